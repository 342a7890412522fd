/* make bench's link: a TCP relay that makes loopback look like a real
 * network, a fixed one-way delay and optionally a rate, between the shim and
 * the agent (or the baseline's two ends).
 *
 *   relay --to HOST:PORT [--listen HOST:PORT] [--delay-us N] [--rate BYTES_PER_S]
 *
 * Prints "listening on HOST:PORT" on stdout, then accepts connections until
 * killed, dialing --to for each. Each direction of each connection is a
 * reader thread and a writer thread around a timed queue: the reader stamps
 * what each read brought with its release time, the writer sends it no
 * earlier. Without a rate a read is released at arrival + delay, so the
 * delay is latency and never caps throughput (up to IN_FLIGHT_MAX bytes in
 * BLOCKS reads in flight each way). With --rate the bytes also go out one after another at
 * that rate, as onto a wire of that speed, before the delay: n bytes take
 * n / rate + delay. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BLOCK ((size_t)256 << 10)      /* the most one read takes */
#define BLOCKS 2048                     /* reads in flight each way at most */
/* Bytes in flight each way at most, as a deep router buffer: past it the
 * sender waits, so it can measure the link. Many small reads (launch
 * records) are bounded by this, not by the number of blocks. */
#define IN_FLIGHT_MAX ((size_t)32 << 20)

static double delay_s, rate;            /* rate 0: none */
static struct addrinfo *target;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "relay: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    struct timespec ts = { .tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9) };
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

typedef struct block {
    uint8_t *p;                 /* BLOCK bytes, allocated on first use */
    size_t len;                 /* 0: the sender closed its side */
    double release;
} block;

/* One direction: src is read, dst written. Blocks cycle free -> queued ->
 * free; queued ones go out in order. */
typedef struct direction {
    int src, dst;
    block blocks[BLOCKS];
    int queue[BLOCKS], free_list[BLOCKS];
    int q_head, q_count, n_free;
    size_t in_flight;           /* bytes queued, not yet written */
    double busy_until;          /* when the rate's wire is free again */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct conn *conn;
} direction;

typedef struct conn {
    int fd[2];                  /* the accepted connection, the dialed one */
    direction dir[2];
    pthread_mutex_t mu;
    int threads;                /* running; the last one out frees the connection */
    bool dead;
} conn;

static void conn_kill(conn *l)
{
    pthread_mutex_lock(&l->mu);
    if (!l->dead) {
        l->dead = true;
        shutdown(l->fd[0], SHUT_RDWR);
        shutdown(l->fd[1], SHUT_RDWR);
    }
    pthread_mutex_unlock(&l->mu);
    for (int d = 0; d < 2; d++) {
        pthread_mutex_lock(&l->dir[d].mu);
        pthread_cond_broadcast(&l->dir[d].cv);
        pthread_mutex_unlock(&l->dir[d].mu);
    }
}

static bool conn_dead(conn *l)
{
    pthread_mutex_lock(&l->mu);
    bool dead = l->dead;
    pthread_mutex_unlock(&l->mu);
    return dead;
}

static void conn_leave(conn *l)
{
    pthread_mutex_lock(&l->mu);
    bool last = --l->threads == 0;
    pthread_mutex_unlock(&l->mu);
    if (!last)
        return;
    close(l->fd[0]);
    close(l->fd[1]);
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < BLOCKS; i++)
            free(l->dir[d].blocks[i].p);
        pthread_mutex_destroy(&l->dir[d].mu);
        pthread_cond_destroy(&l->dir[d].cv);
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static void *reader(void *arg)
{
    direction *d = arg;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while ((d->n_free == 0 || d->in_flight >= IN_FLIGHT_MAX) && !conn_dead(d->conn))
            pthread_cond_wait(&d->cv, &d->mu);
        if (d->n_free == 0 || d->in_flight >= IN_FLIGHT_MAX) {
            pthread_mutex_unlock(&d->mu);
            break;
        }
        int b = d->free_list[--d->n_free];
        pthread_mutex_unlock(&d->mu);
        block *k = &d->blocks[b];
        if (!k->p && !(k->p = malloc(BLOCK))) {
            fprintf(stderr, "relay: no memory for a block\n");
            conn_kill(d->conn);
            break;
        }
        ssize_t r;
        do
            r = read(d->src, k->p, BLOCK);
        while (r < 0 && errno == EINTR);
        double arrival = now_s();
        k->len = r > 0 ? (size_t)r : 0;
        k->release = arrival + delay_s;
        pthread_mutex_lock(&d->mu);
        if (rate > 0 && k->len > 0) {
            double start = arrival > d->busy_until ? arrival : d->busy_until;
            d->busy_until = start + (double)k->len / rate;
            k->release = d->busy_until + delay_s;
        }
        d->queue[(d->q_head + d->q_count++) % BLOCKS] = b;
        d->in_flight += k->len;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        if (r < 0)
            conn_kill(d->conn);
        if (r <= 0)
            break;
    }
    conn_leave(d->conn);
    return NULL;
}

static void *writer(void *arg)
{
    direction *d = arg;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (d->q_count == 0 && !conn_dead(d->conn))
            pthread_cond_wait(&d->cv, &d->mu);
        if (d->q_count == 0) {
            pthread_mutex_unlock(&d->mu);
            break;
        }
        int b = d->queue[d->q_head];
        pthread_mutex_unlock(&d->mu);
        block *k = &d->blocks[b];
        if (k->release > now_s())
            sleep_until(k->release);
        if (k->len == 0) {          /* pass the close on, after its delay */
            shutdown(d->dst, SHUT_WR);
            break;
        }
        bool ok = true;
        for (size_t off = 0; off < k->len && ok;) {
            ssize_t w = write(d->dst, k->p + off, k->len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                ok = false;
            else
                off += (size_t)w;
        }
        if (!ok) {
            conn_kill(d->conn);
            break;
        }
        pthread_mutex_lock(&d->mu);
        d->q_head = (d->q_head + 1) % BLOCKS;
        d->q_count--;
        d->in_flight -= k->len;
        d->free_list[d->n_free++] = b;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
    conn_leave(d->conn);
    return NULL;
}

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void serve(int fd)
{
    int out = socket(target->ai_family, SOCK_STREAM, 0);
    if (out < 0 || connect(out, target->ai_addr, target->ai_addrlen) != 0) {
        fprintf(stderr, "relay: cannot reach the target: %s\n", strerror(errno));
        if (out >= 0)
            close(out);
        close(fd);
        return;
    }
    tune(fd);
    tune(out);
    conn *l = calloc(1, sizeof *l);
    if (!l)
        fail("no memory for a connection");
    l->fd[0] = fd;
    l->fd[1] = out;
    l->threads = 4;
    pthread_mutex_init(&l->mu, NULL);
    for (int i = 0; i < 2; i++) {
        direction *d = &l->dir[i];
        d->src = l->fd[i];
        d->dst = l->fd[1 - i];
        d->conn = l;
        d->n_free = BLOCKS;
        for (int b = 0; b < BLOCKS; b++)
            d->free_list[b] = BLOCKS - 1 - b;
        pthread_mutex_init(&d->mu, NULL);
        pthread_cond_init(&d->cv, NULL);
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10);
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, reader, &l->dir[i]) || pthread_create(&t, &attr, writer, &l->dir[i]))
            fail("cannot start a thread");
    }
    pthread_attr_destroy(&attr);
}

static struct addrinfo *resolve(const char *spec, bool passive)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || (size_t)(colon - spec) >= sizeof host)
        fail("%s: not HOST:PORT", spec);
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0 };
    struct addrinfo *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc)
        fail("%s: %s", spec, gai_strerror(rc));
    return ai;
}

int main(int argc, char **argv)
{
    const char *to = NULL, *listen_at = "127.0.0.1:0";
    static const struct option opts[] = {
        { "to", required_argument, NULL, 't' },       { "listen", required_argument, NULL, 'l' },
        { "delay-us", required_argument, NULL, 'd' }, { "rate", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 't': to = optarg; break;
        case 'l': listen_at = optarg; break;
        case 'd':
            delay_s = strtod(optarg, &end) * 1e-6;
            if (*end || delay_s < 0)
                fail("--delay-us %s: not a number of microseconds", optarg);
            break;
        case 'r':
            rate = strtod(optarg, &end);
            if (*end || rate < 0)
                fail("--rate %s: not a number of bytes a second", optarg);
            break;
        case 'h':
            printf("Usage: relay --to HOST:PORT [--listen HOST:PORT] [--delay-us N] [--rate BYTES_PER_S]\n");
            return 0;
        default:
            fprintf(stderr, "Usage: relay --to HOST:PORT [--listen HOST:PORT] [--delay-us N] [--rate BYTES_PER_S]\n");
            return 1;
        }
    }
    if (!to || optind != argc) {
        fprintf(stderr, "Usage: relay --to HOST:PORT [--listen HOST:PORT] [--delay-us N] [--rate BYTES_PER_S]\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Wake-ups within a microsecond, not the default 50: the delay is the
     * figure. Threads inherit it. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    /* A wire costs the hosts no CPU; the relay shares theirs. As a batch
     * thread its wake-ups do not preempt the program or the agent (on two
     * CPUs a submitting program was preempted every 100 us, a third of its
     * launch rate), and it still runs at once when a CPU is idle, as
     * around every synchronous wait. Threads inherit it. */
    struct sched_param batch = { .sched_priority = 0 };
    if (sched_setscheduler(0, SCHED_BATCH, &batch) != 0)
        fprintf(stderr, "relay: SCHED_BATCH: %s (wake-ups may preempt the program)\n", strerror(errno));
    target = resolve(to, false);
    struct addrinfo *la = resolve(listen_at, true);
    int ls = socket(la->ai_family, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    if (ls < 0 || bind(ls, la->ai_addr, la->ai_addrlen) || listen(ls, 64) ||
        getsockname(ls, (struct sockaddr *)&sa, &sl))
        fail("listen on %s: %s", listen_at, strerror(errno));
    freeaddrinfo(la);
    char host[64];
    if (!inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host))
        fail("listen: %s", strerror(errno));
    printf("listening on %s:%u\n", host, (unsigned)ntohs(sa.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            fail("accept: %s", strerror(errno));
        }
        serve(fd);
    }
}

/* The agent's command: listens, proves the job key, and serves one job at a
 * time by replaying it on this machine's driver (its GPUs, or softgpu). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "proto/handshake.h"
#include "proto/key.h"
#include "proto/names.h"
#include "proto/net.h"
#include "proto/report.h"

static const char usage[] =
    "Usage: rig-agent --listen HOST:PORT (--key-file FILE | --key-stdin) [--driver PATH]\n"
    "  --listen HOST:PORT   where to accept controllers (port 0 picks a free one)\n"
    "  --key-file FILE      the job key: owner-only regular file, 16..4096 bytes\n"
    "  --key-stdin          read the job key from standard input instead\n"
    "  --driver PATH        the CUDA driver to replay on (default: this machine's\n"
    "                       libcuda when it has a device, else softgpu)\n"
    "  --probe [--json]     print the driver's devices and whether an agent here is\n"
    "                       serving a job, then exit (no --listen or key needed)\n";

typedef struct server {
    backend b;
    rig_key key;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    bool busy;
    bool ending;           /* the job's controller is gone; cleanup runs */
    char peer[128];
} server;

typedef struct connection {
    server *s;
    int fd;
    char peer[128];
} connection;

static int admit_controller(void *ctx, uint32_t dialing, uint32_t accepting, char *reason, size_t cap)
{
    (void)ctx;
    if (dialing != 0) {
        snprintf(reason, cap, "process %u is not a controller; this agent serves controllers only", dialing);
        return 1;
    }
    if (accepting == 0) {
        snprintf(reason, cap, "an agent is process 1 or above, not 0");
        return 1;
    }
    return 0;
}

static void *refuse_main(void *arg);

static void job_ending(void *ctx)
{
    server *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->ending = true;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
}

static void *job_main(void *arg)
{
    connection *c = arg;
    server *s = c->s;
    hs_config cfg = { .key = &s->key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
    hs_peers peers;
    rig_why why = { "" };
    if (hs_accept(c->fd, &cfg, admit_controller, NULL, &peers, &why) < 0) {
        fprintf(stderr, "rig-agent: %s: %s\n", c->peer, why.text);
        close(c->fd);
    } else {
        fprintf(stderr, "rig-agent: job from %s (agent %u)\n", c->peer, peers.accepting);
        report_started();
        char ended[600];
        job_serve(&s->b, c->fd, peers.accepting, job_ending, s, ended, sizeof ended);
        fprintf(stderr, "rig-agent: %s: %s\n", c->peer, ended);
        static const char failed[] = "job failed: ";
        if (strncmp(ended, failed, sizeof failed - 1) == 0)
            report_failed(ended + sizeof failed - 1);
        else
            report_closed();
    }
    pthread_mutex_lock(&s->lock);
    s->busy = false;
    s->ending = false;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    free(c);
    return NULL;
}

/* A controller that arrives while the last job is ending (its program
 * gone, its cleanup running) is the next job, not a second one: it waits
 * for the cleanup (10 s at most) instead of being refused. One that arrives
 * while the job still runs is refused, after half a second in which the job
 * may yet turn out to be ending. */
static void *next_job_main(void *arg)
{
    connection *c = arg;
    server *s = c->s;
    struct timespec now, grace, until;
    clock_gettime(CLOCK_REALTIME, &now);
    grace = until = now;
    grace.tv_nsec += 500 * 1000 * 1000;
    if (grace.tv_nsec >= 1000000000) {
        grace.tv_sec++;
        grace.tv_nsec -= 1000000000;
    }
    until.tv_sec += 10;
    pthread_mutex_lock(&s->lock);
    while (s->busy && !s->ending && pthread_cond_timedwait(&s->idle, &s->lock, &grace) == 0)
        ;
    while (s->busy && s->ending && pthread_cond_timedwait(&s->idle, &s->lock, &until) == 0)
        ;
    bool free_now = !s->busy;
    if (free_now) {
        s->busy = true;
        snprintf(s->peer, sizeof s->peer, "%s", c->peer);
    }
    pthread_mutex_unlock(&s->lock);
    return free_now ? job_main(c) : refuse_main(c);
}

static void *refuse_main(void *arg)
{
    connection *c = arg;
    hs_config cfg = { .key = &c->s->key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
    char reason[256];
    pthread_mutex_lock(&c->s->lock);
    snprintf(reason, sizeof reason, "busy: serving a job from %s", c->s->peer);
    pthread_mutex_unlock(&c->s->lock);
    hs_refuse(c->fd, &cfg, reason, NULL);
    close(c->fd);
    free(c);
    return NULL;
}

static void peer_name(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[64] = "?";
    unsigned port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
            port = ntohs(a->sin6_port);
        }
    }
    snprintf(out, cap, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
}

int agent_main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "listen", required_argument, NULL, 'l' }, { "key-file", required_argument, NULL, 'k' },
        { "key-stdin", no_argument, NULL, 's' },    { "driver", required_argument, NULL, 'd' },
        { "help", no_argument, NULL, 'h' },         { "probe", no_argument, NULL, 'p' },
        { "json", no_argument, NULL, 'j' },         { NULL, 0, NULL, 0 },
    };
    bool probe = false, json = false;
    const char *listen_at = NULL, *key_file = NULL, *driver = NULL;
    bool key_stdin = false;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 'l': listen_at = optarg; break;
        case 'k': key_file = optarg; break;
        case 's': key_stdin = true; break;
        case 'd': driver = optarg; break;
        case 'p': probe = true; break;
        case 'j': json = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rig-agent: unexpected argument '%s'\n%s", argv[optind], usage);
        return 1;
    }
    if (json && !probe) {
        fprintf(stderr, "rig-agent: --json goes with --probe\n%s", usage);
        return 1;
    }
    if (probe)
        return agent_probe(stdout, driver, json);
    if (!listen_at || (!key_file && !key_stdin) || (key_file && key_stdin)) {
        fprintf(stderr, "rig-agent: %s\n%s",
                !listen_at ? "--listen is required" : "give exactly one of --key-file and --key-stdin", usage);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Large frames come one after another: keep their memory in the heap
     * for the next one instead of mapping fresh pages (and faulting them
     * in) for each. */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    char rwhy[200];
    if (report_open_from_env(rwhy, sizeof rwhy) < 0) {
        fprintf(stderr, "rig-agent: %s\n", rwhy);
        return 1;
    }

    server *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    rig_why why = { "" };
    if (key_file && key_read_file(&s->key, key_file, &why) < 0) {
        fprintf(stderr, "rig-agent: %s\n", why.text);
        return 1;
    }
    if (key_stdin) {
        uint8_t buf[KEY_MAX + 1];
        size_t n = fread(buf, 1, sizeof buf, stdin);
        if (key_from_bytes(&s->key, buf, n, &why) < 0) {
            fprintf(stderr, "rig-agent: key on standard input: %s\n", why.text);
            return 1;
        }
    }
    names_address addr;
    if (names_parse_listen(listen_at, &addr, &why) < 0) {
        fprintf(stderr, "rig-agent: --listen %s\n", why.text);
        return 1;
    }
    char bwhy[600];
    if (backend_open(&s->b, driver, bwhy, sizeof bwhy) < 0) {
        fprintf(stderr, "rig-agent: no driver to replay on: %s\n", bwhy);
        return 1;
    }
    int lfd;
    uint16_t port;
    if (net_listen(&addr, &lfd, &port, &why) < 0) {
        fprintf(stderr, "rig-agent: %s\n", why.text);
        return 1;
    }
    printf("rig-agent: replaying on %s (%s), %d device%s\n", s->b.kind, s->b.drv.path, s->b.device_count,
           s->b.device_count == 1 ? "" : "s");
    printf(addr.ipv6 ? "listening on [%s]:%u\n" : "listening on %s:%u\n", addr.host, port);
    fflush(stdout);
    /* From here fd 1 is where the driver writes device printf output: a pipe
     * whose bytes go to the job's program. The agent logs on stderr. */
    int out[2];
    if (pipe2(out, O_CLOEXEC) == 0 && dup2(out[1], 1) == 1) {
        close(out[1]);
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        fcntl(out[0], F_SETPIPE_SZ, 1 << 20);
        agent_stdout_pipe = out[0];
    }

    for (;;) {
        int fd;
        if (net_accept(lfd, -1, &fd, &why) < 0) {
            fprintf(stderr, "rig-agent: %s\n", why.text);
            continue;
        }
        connection *c = calloc(1, sizeof *c);
        c->s = s;
        c->fd = fd;
        peer_name(fd, c->peer, sizeof c->peer);
        pthread_mutex_lock(&s->lock);
        bool busy = s->busy;   /* if so, next_job_main decides: wait or refuse */
        if (!busy) {
            s->busy = true;
            snprintf(s->peer, sizeof s->peer, "%s", c->peer);
        }
        pthread_mutex_unlock(&s->lock);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_create(&t, &attr, !busy ? job_main : next_job_main, c);
        pthread_attr_destroy(&attr);
    }
}

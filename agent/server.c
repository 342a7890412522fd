/* The agent's command and its listener. The listener never loads a job's
 * driver state: each connection proves the job key on a thread of its own
 * (holding nothing meanwhile, named to no one), and a proven controller's
 * connection goes to a fresh worker process (worker.c, forked by the
 * spawner, spawner.c, which runs no thread) that serves that one job and
 * exits. So no stranger, abandoned job or endless kernel can keep
 * the agent from serving the next controller. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "proto/compress.h"
#include "proto/deadline.h"
#include "proto/fdio.h"
#include "proto/frame.h"
#include "proto/handshake.h"
#include "proto/job.h"
#include "proto/key.h"
#include "proto/names.h"
#include "proto/net.h"
#include "proto/report.h"
#include "proto/wire.h"

static const char usage[] =
    "Usage: rig-agent --listen HOST:PORT (--key-file FILE | --key-stdin) [--driver PATH]\n"
    "       rig-agent --config FILE [options]\n"
    "  --listen HOST:PORT   where to accept controllers (port 0 picks a free one)\n"
    "  --key-file FILE      the job key: owner-only regular file, 16..4096 bytes\n"
    "  --key-stdin          read the job key from standard input instead\n"
    "  --driver PATH        the CUDA driver to replay on (default: this machine's\n"
    "                       libcuda when it has a device, else softgpu)\n"
    "  --config FILE        settings from FILE, lines of NAME = VALUE: listen,\n"
    "                       key-file, driver (what a standing agent's service\n"
    "                       reads); an option given here wins over the file\n"
    "  --probe [--json]     print the driver's devices and whether an agent here is\n"
    "                       serving a job, then exit (no --listen or key needed)\n";

#define PROVING_MAX 512            /* connections proving the key at once */
#define PROVER_STACK (256 << 10)
#define WORKERS_MAX 16             /* the job's worker and those still ending */
#define WORKER_END_BOUND_MS 15000  /* an ended job's abort lingers 10 s at most */
#define BUSY_GRACE_MS 500          /* a running job may turn out to be ending */
#define ACCEPT_BACKOFF_MS 1000
#define STATUS_MAX 65536           /* bytes of a status answer */

typedef struct worker_rec {
    pid_t pid;
    int status_fd;
    uint64_t gen;              /* the claim it serves */
    char peer[128];
    bool ending, told, killed, exited;
    int exit_status;           /* its wait status, once exited */
    int64_t ending_ms;
    char buf[8192];
    size_t len;
} worker_rec;

typedef struct listener {
    rig_key key;
    const char *driver;
    int wake[2];
    pthread_mutex_t lock;
    pthread_cond_t changed;
    /* The slot: a proven controller claims it; its worker's "ending"
     * frees it for the next one while the old worker exits. */
    bool claimed, ending;
    uint64_t claim_gen;
    char serving[128];
    bool handoff;
    int handoff_fd;
    uint32_t handoff_index;
    uint64_t handoff_gen;
    char handoff_peer[128];
    int proving;
    log_limit strangers;
    spawner sp;
} listener;

typedef struct connection {
    listener *s;
    int fd;
    bool claimed;
    uint64_t gen;
    char peer[128];
} connection;

/* ---- proving a connection ---- */

/* Called by the handshake once the dialing end has proven the key: only a
 * proven controller hears that the agent serves another job. */
static int admit_controller(void *ctx, uint32_t dialing, uint32_t accepting, char *reason, size_t cap)
{
    connection *c = ctx;
    listener *s = c->s;
    if (dialing != 0) {
        snprintf(reason, cap, "process %u is not a controller; this agent serves controllers only", dialing);
        return 1;
    }
    if (accepting == 0)   /* a status query: no job, nothing claimed */
        return 0;
    pthread_mutex_lock(&s->lock);
    int64_t until = deadline_after(BUSY_GRACE_MS);
    while (s->claimed && !s->ending && deadline_now_ms() < until) {
        struct timespec ts = deadline_timespec_in(50);
        pthread_cond_timedwait(&s->changed, &s->lock, &ts);
    }
    int rc = 0;
    if (s->claimed && !s->ending) {
        snprintf(reason, cap, "busy: serving a job from %s", s->serving);
        rc = 1;
    } else {
        s->claimed = true;
        s->ending = false;
        c->gen = ++s->claim_gen;
        c->claimed = true;
        snprintf(s->serving, sizeof s->serving, "%s", c->peer);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void release_claim(listener *s, uint64_t gen)
{
    pthread_mutex_lock(&s->lock);
    if (s->claimed && s->claim_gen == gen) {
        s->claimed = false;
        s->ending = false;
    }
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

/* A status query (a proven key holder dialing process 0, `rig ls`): one
 * answer frame holding what `rig-agent --probe --json` prints, made in a
 * child that exits (the listener holds no driver state), and no job. */
static void answer_status(listener *s, int fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return;
    char spawn_why[200];
    pid_t pid = spawner_probe(&s->sp, p[1], spawn_why, sizeof spawn_why);
    close(p[1]);
    if (pid < 0)
        agent_log("status: cannot start the probe: %s", spawn_why);
    /* This agent's own slot first (the probe sees every agent of the
     * machine), then the machine as the probe saw it. */
    static uint8_t buf[FRAME_HEADER_SIZE + STATUS_MAX];   /* one status at a time: under status_lock */
    static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&status_lock);
    pthread_mutex_lock(&s->lock);
    bool busy = s->claimed && !s->ending;
    char controller[sizeof s->serving] = "";   /* an address peer_name wrote: nothing to escape */
    if (busy)
        snprintf(controller, sizeof controller, "%s", s->serving);
    pthread_mutex_unlock(&s->lock);
    size_t len = (size_t)snprintf((char *)buf + FRAME_HEADER_SIZE, STATUS_MAX,
                                  "{\"busy\":%s,\"controller\":\"%s\",\"machine\":", busy ? "true" : "false",
                                  controller);
    size_t head = len;
    for (;;) {
        ssize_t r = pid > 0 ? read(p[0], buf + FRAME_HEADER_SIZE + len, STATUS_MAX - 2 - len) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(p[0]);   /* the spawner reaps the probe */
    while (len > head && (buf[FRAME_HEADER_SIZE + len - 1] == '\n' || buf[FRAME_HEADER_SIZE + len - 1] == ' '))
        len--;
    if (len == head)
        len += (size_t)snprintf((char *)buf + FRAME_HEADER_SIZE + len, STATUS_MAX - len, "null");
    buf[FRAME_HEADER_SIZE + len++] = '}';
    frame_header_encode(buf, FRAME_ANSWER, len);
    rig_why why = { "" };
    (void)fdio_write_full(fd, buf, FRAME_HEADER_SIZE + len, deadline_after(HS_TIMEOUT_MS), "the status", &why);
    pthread_mutex_unlock(&status_lock);
}

static void *prove_main(void *arg)
{
    connection *c = arg;
    listener *s = c->s;
    hs_config cfg = { .key = &s->key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
    hs_peers peers;
    rig_why why = { "" };
    int rc = hs_accept(c->fd, &cfg, admit_controller, c, &peers, &why);
    if (rc == 0 && peers.accepting == 0) {
        answer_status(s, c->fd);
        close(c->fd);
        pthread_mutex_lock(&s->lock);
        s->proving--;
        pthread_mutex_unlock(&s->lock);
    } else if (rc == 0) {
        pthread_mutex_lock(&s->lock);
        s->handoff = true;
        s->handoff_fd = c->fd;
        s->handoff_index = peers.accepting;
        s->handoff_gen = c->gen;
        snprintf(s->handoff_peer, sizeof s->handoff_peer, "%s", c->peer);
        s->proving--;
        pthread_mutex_unlock(&s->lock);
        if (write(s->wake[1], "h", 1) < 0)
            agent_log("cannot wake the listener: %s", strerror(errno));
    } else {
        if (c->claimed)
            release_claim(s, c->gen);
        close(c->fd);
        pthread_mutex_lock(&s->lock);
        s->proving--;
        bool log = agent_log_allowed(&s->strangers);
        pthread_mutex_unlock(&s->lock);
        if (log)
            agent_log("%s: %s", c->peer, why.text);
    }
    free(c);
    return NULL;
}

/* No thread for this connection: it hears why instead of a greeting (no
 * address in it), and the listener does not wait for it. */
static void refuse_now(int fd, const char *reason)
{
    uint8_t buf[HS_GREETING_MAX];
    int n = hs_encode_greeting_refusal(buf, sizeof buf, HS_VERSION, reason);
    /* A refusal that does not fit the socket's buffer at once is lost: the
     * peer then sees its connection closed, which says as much. */
    if (n > 0)
        (void)send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    close(fd);
}

static void peer_name(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[64] = "?";
    unsigned port = 0;
    memset(&ss, 0, sizeof ss);
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

static void start_proving(listener *s, int fd)
{
    net_tune(fd);
    char peer[128];
    peer_name(fd, peer, sizeof peer);
    pthread_mutex_lock(&s->lock);
    bool room = s->proving < PROVING_MAX;
    if (room)
        s->proving++;
    bool log = !room && agent_log_allowed(&s->strangers);
    pthread_mutex_unlock(&s->lock);
    if (!room) {
        if (log)
            agent_log("%s: closed: %d connections are proving the key already", peer, PROVING_MAX);
        refuse_now(fd, "the agent has too many connections waiting to prove the key; try again");
        return;
    }
    connection *c = calloc(1, sizeof *c);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, PROVER_STACK);
    int rc = ENOMEM;
    if (c) {
        c->s = s;
        c->fd = fd;
        snprintf(c->peer, sizeof c->peer, "%s", peer);
        pthread_t t;
        rc = pthread_create(&t, &attr, prove_main, c);
    }
    pthread_attr_destroy(&attr);
    if (rc == 0)
        return;
    free(c);
    pthread_mutex_lock(&s->lock);
    s->proving--;
    log = agent_log_allowed(&s->strangers);
    pthread_mutex_unlock(&s->lock);
    if (log)
        agent_log("%s: refused: no thread to prove its key on (%s)", peer, strerror(rc));
    refuse_now(fd, "the agent cannot start a thread for this connection now; try again");
}

/* ---- workers ---- */

static worker_rec workers[WORKERS_MAX];

/* The job's connection was proven but no worker can serve it: the
 * controller hears why at once. */
static void abort_unserved(int fd, const char *why)
{
    uint8_t buf[16 + 600];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_string(&w, why, strlen(why));
    conn c;
    rig_why ignored;
    if (conn_init(&c, fd, JOB_FRAME_LIMIT, &ignored) == 0) {
        struct iovec iov = { buf, w.off };
        conn_sendv(&c, FRAME_ABORT, &iov, 1, deadline_after(2000), &ignored);
        conn_close(&c);
    } else {
        close(fd);
    }
}

static void start_worker(listener *s)
{
    pthread_mutex_lock(&s->lock);
    bool have = s->handoff;
    int fd = s->handoff_fd;
    uint32_t index = s->handoff_index;
    uint64_t gen = s->handoff_gen;
    char peer[128];
    snprintf(peer, sizeof peer, "%s", s->handoff_peer);
    s->handoff = false;
    pthread_mutex_unlock(&s->lock);
    if (!have)
        return;
    worker_rec *w = NULL;
    for (int i = 0; i < WORKERS_MAX && !w; i++)
        if (!workers[i].pid)
            w = &workers[i];
    int st[2] = { -1, -1 };
    pid_t pid = -1;
    const char *why = "too many workers still ending";
    if (w && pipe2(st, O_CLOEXEC) < 0) {
        why = strerror(errno);
        w = NULL;
    }
    char spawn_why[200];
    if (w) {
        pid = spawner_worker(&s->sp, fd, st[1], index, spawn_why, sizeof spawn_why);
        if (pid < 0)
            why = spawn_why;
        close(st[1]);
    }
    if (pid < 0) {
        if (st[0] >= 0)
            close(st[0]);
        char text[300];
        snprintf(text, sizeof text, "agent: cannot start a process for the job: %s", why);
        agent_log("%s: job failed: %s", peer, text);
        abort_unserved(fd, text);
        release_claim(s, gen);
        report_failed(text);
        return;
    }
    close(fd);
    memset(w, 0, sizeof *w);
    w->pid = pid;
    w->status_fd = st[0];
    w->gen = gen;
    snprintf(w->peer, sizeof w->peer, "%s", peer);
    agent_log("job from %s (agent %u)", peer, index);
    report_started();
}

/* A line from a worker: "ending" (the controller's side is over: the slot
 * is free) or "ended TEXT" (how the job ended, escaped). */
static void worker_said(listener *s, worker_rec *w, const char *line)
{
    if (strcmp(line, "ending") == 0) {
        w->ending = true;
        w->ending_ms = deadline_now_ms();
        pthread_mutex_lock(&s->lock);
        if (s->claimed && s->claim_gen == w->gen)
            s->ending = true;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
    } else if (strncmp(line, "ended ", 6) == 0 && !w->told) {
        w->told = true;
        const char *ended = line + 6;
        agent_log("%s: %s", w->peer, ended);
        static const char failed[] = "job failed: ";
        if (strncmp(ended, failed, sizeof failed - 1) == 0)
            report_failed(ended + sizeof failed - 1);
        else
            report_closed();
    }
}

static void read_worker(listener *s, worker_rec *w)
{
    ssize_t n = read(w->status_fd, w->buf + w->len, sizeof w->buf - 1 - w->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(w->status_fd);
        w->status_fd = -1;
        return;
    }
    w->len += (size_t)n;
    w->buf[w->len] = '\0';
    char *line = w->buf, *nl;
    while ((nl = strchr(line, '\n'))) {
        *nl = '\0';
        worker_said(s, w, line);
        line = nl + 1;
    }
    w->len -= (size_t)(line - w->buf);
    memmove(w->buf, line, w->len);
    if (w->len == sizeof w->buf - 1)
        w->len = 0;   /* a line this long is no line of ours */
}

/* Reaps workers that exited, and kills one still alive past the bound
 * after its job ended. */
static void tend_workers(listener *s)
{
    int64_t now = deadline_now_ms();
    for (int i = 0; i < WORKERS_MAX; i++) {
        worker_rec *w = &workers[i];
        if (!w->pid)
            continue;
        if (w->ending && !w->killed && now - w->ending_ms > WORKER_END_BOUND_MS) {
            agent_log("%s: the job's process still runs %d s after the job ended; killed",
                      w->peer, WORKER_END_BOUND_MS / 1000);
            kill(w->pid, SIGKILL);
            w->killed = true;
        }
        if (w->status_fd >= 0 || !w->exited)
            continue;
        int status = w->exit_status;
        if (!w->told) {
            char text[200];
            if (WIFSIGNALED(status))
                snprintf(text, sizeof text, "agent: the job's process ended by signal %d (%s)", WTERMSIG(status),
                         strsignal(WTERMSIG(status)));
            else
                snprintf(text, sizeof text, "agent: the job's process exited with status %d", WEXITSTATUS(status));
            agent_log("%s: job failed: %s", w->peer, text);
            report_failed(text);
        }
        release_claim(s, w->gen);
        w->pid = 0;
    }
}

/* Notes each worker the spawner reaped. Without the spawner no job can
 * start again: the agent exits and says so, for its service manager to
 * start it afresh. */
static void children_exited(listener *s)
{
    pid_t pid;
    int status, rc;
    while ((rc = spawner_exited(&s->sp, &pid, &status)) > 0)
        for (int i = 0; i < WORKERS_MAX; i++)
            if (workers[i].pid == pid) {
                workers[i].exited = true;
                workers[i].exit_status = status;
            }
    if (rc < 0) {
        agent_log("the agent's spawner process ended: no job can start; exiting");
        _exit(1);   /* no exit handlers under threads that still run */
    }
}

/* ---- the listener's loop ---- */

static void serve(listener *s, int lfd)
{
    int64_t accept_again = 0;
    log_limit accept_errors = { 0 };
    for (;;) {
        struct pollfd p[3 + WORKERS_MAX];
        worker_rec *of[3 + WORKERS_MAX];
        int n = 0;
        bool accepting = deadline_now_ms() >= accept_again;
        p[n++] = (struct pollfd){ .fd = s->wake[0], .events = POLLIN };
        p[n++] = (struct pollfd){ .fd = s->sp.exits, .events = POLLIN };
        if (accepting)
            p[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < WORKERS_MAX; i++)
            if (workers[i].pid && workers[i].status_fd >= 0) {
                of[n] = &workers[i];
                p[n++] = (struct pollfd){ .fd = workers[i].status_fd, .events = POLLIN };
            }
        int ready = poll(p, (nfds_t)n, 250);
        if (ready < 0 && errno != EINTR) {
            agent_log("poll: %s", strerror(errno));
            struct timespec pause = { 0, 100 * 1000000L };
            nanosleep(&pause, NULL);
        }
        for (int i = 0; ready > 0 && i < n; i++) {
            if (!p[i].revents)
                continue;
            if (p[i].fd == s->wake[0]) {
                char sink[64];
                if (read(s->wake[0], sink, sizeof sink) < 0 && errno != EAGAIN)
                    agent_log("wake pipe: %s", strerror(errno));
                start_worker(s);
            } else if (p[i].fd == s->sp.exits) {
                children_exited(s);
            } else if (p[i].fd == lfd) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd >= 0) {
                    start_proving(s, fd);
                } else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED && errno != EPROTO) {
                    /* Out of descriptors or memory: Linux keeps the
                     * connection queued, so try again in a second rather
                     * than spin on it. */
                    if (agent_log_allowed(&accept_errors))
                        agent_log("accept: %s; accepting again in %d s", strerror(errno), ACCEPT_BACKOFF_MS / 1000);
                    accept_again = deadline_after(ACCEPT_BACKOFF_MS);
                }
            } else {
                read_worker(s, of[i]);
            }
        }
        tend_workers(s);
    }
}

/* The driver, opened in a child that exits: the listener says what it
 * replays on without holding any driver state itself. */
static int announce_driver(const char *driver, char *text, size_t cap)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(text, cap, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(text, cap, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        backend b;
        char why[600], line[5000];
        int n;
        if (backend_open(&b, driver, why, sizeof why) < 0)
            n = snprintf(line, sizeof line, "!%s", why);
        else
            n = snprintf(line, sizeof line, "replaying on %s (%s), %d device%s", b.kind, b.drv.path,
                         b.device_count, b.device_count == 1 ? "" : "s");
        if (write(p[1], line, (size_t)n) < 0)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    size_t len = 0;
    for (;;) {
        ssize_t r = read(p[0], text + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == cap - 1)
            break;
    }
    text[len] = '\0';
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (len == 0) {
        snprintf(text, cap, "the driver's process ended (status %d) without a word", status);
        return -1;
    }
    if (text[0] == '!') {
        memmove(text, text + 1, len);
        return -1;
    }
    return 0;
}

int agent_main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "listen", required_argument, NULL, 'l' }, { "key-file", required_argument, NULL, 'k' },
        { "key-stdin", no_argument, NULL, 's' },    { "driver", required_argument, NULL, 'd' },
        { "help", no_argument, NULL, 'h' },         { "probe", no_argument, NULL, 'p' },
        { "json", no_argument, NULL, 'j' },         { "config", required_argument, NULL, 'c' },
        { NULL, 0, NULL, 0 },
    };
    bool probe = false, json = false;
    const char *listen_at = NULL, *key_file = NULL, *driver = NULL, *config_path = NULL;
    bool key_stdin = false;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 'l': listen_at = optarg; break;
        case 'k': key_file = optarg; break;
        case 's': key_stdin = true; break;
        case 'd': driver = optarg; break;
        case 'p': probe = true; break;
        case 'j': json = true; break;
        case 'c': config_path = optarg; break;
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
    static agent_config config;   /* its strings outlive the listener's use of them */
    if (config_path) {
        char cwhy[AGENT_CONFIG_VALUE_MAX + 256];
        if (agent_config_read(&config, config_path, cwhy, sizeof cwhy) < 0) {
            fprintf(stderr, "rig-agent: --config %s\n", cwhy);
            return 1;
        }
        if (!listen_at && config.listen[0])
            listen_at = config.listen;
        if (!key_file && !key_stdin && config.key_file[0])
            key_file = config.key_file;
        if (!driver && config.driver[0])
            driver = config.driver;
    }
    if (probe)
        return agent_probe(stdout, driver, json);
    if (!listen_at || (!key_file && !key_stdin) || (key_file && key_stdin)) {
        fprintf(stderr, "rig-agent: %s\n%s",
                !listen_at ? "--listen is required" : "give exactly one of --key-file and --key-stdin", usage);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    char rwhy[200];
    if (report_open_from_env(rwhy, sizeof rwhy) < 0) {
        fprintf(stderr, "rig-agent: %s\n", rwhy);
        return 1;
    }

    int lfd = -1;
    listener *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "rig-agent: no memory for the listener\n");
        return 1;
    }
    s->wake[0] = s->wake[1] = -1;
    s->driver = driver;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    rig_why why = { "" };
    if (key_file && key_read_file(&s->key, key_file, &why) < 0) {
        fprintf(stderr, "rig-agent: %s\n", why.text);
        goto out;
    }
    if (key_stdin) {
        uint8_t buf[KEY_MAX + 1];
        size_t n = fread(buf, 1, sizeof buf, stdin);
        if (key_from_bytes(&s->key, buf, n, &why) < 0) {
            fprintf(stderr, "rig-agent: key on standard input: %s\n", why.text);
            goto out;
        }
    }
    names_address addr;
    if (names_parse_listen(listen_at, &addr, &why) < 0) {
        fprintf(stderr, "rig-agent: --listen %s\n", why.text);
        goto out;
    }
    char announced[5000];
    if (announce_driver(driver, announced, sizeof announced) < 0) {
        fprintf(stderr, "rig-agent: no driver to replay on: %s\n", announced);
        goto out;
    }
    uint16_t port;
    if (net_listen(&addr, &lfd, &port, &why) < 0) {
        fprintf(stderr, "rig-agent: %s\n", why.text);
        goto out;
    }
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0) {
        fprintf(stderr, "rig-agent: %s\n", strerror(errno));
        goto out;
    }
    /* Measured once here, before the spawner is forked: every worker it
     * forks inherits the speeds, so no job's first copy into the program
     * pays for them. */
    compress_machine();
    char swhy[200];
    fflush(NULL);   /* nothing buffered to be written twice by a child */
    if (spawner_start(&s->sp, driver, &s->key, swhy, sizeof swhy) < 0) {
        fprintf(stderr, "rig-agent: cannot start the spawner: %s\n", swhy);
        goto out;
    }
    printf("rig-agent: %s\n", announced);
    printf(addr.ipv6 ? "listening on [%s]:%u\n" : "listening on %s:%u\n", addr.host, port);
    fflush(stdout);
    serve(s, lfd);
    return 0;
out:
    if (lfd >= 0)
        close(lfd);
    for (int i = 0; i < 2; i++)
        if (s->wake[i] >= 0)
            close(s->wake[i]);
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return 1;
}

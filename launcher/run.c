/* `rig run`: runs a program here with the GPUs of the named machines. For
 * each attempt it makes a fresh key, starts an agent on every machine (over
 * ssh, or as a child for `local`), hands each its key on standard input,
 * learns its address from its output, runs the program with the preload
 * and the job's variables, and reads the report lines of the controller
 * and the agents. A job that fails is started again, up to --retries times,
 * with fresh agents and a fresh key. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/child.h"
#include "launcher/fleet.h"
#include "launcher/launcher.h"
#include "launcher/placement.h"
#include "launcher/probe.h"
#include "launcher/status.h"
#include "launcher/targets.h"
#include "proto/key.h"
#include "proto/names.h"
#include "proto/net.h"

static const char usage[] =
    "Usage: rig run [--on NAMES] [--gpus N [--min-memory SIZE]] [--retries N] [--rig PATH]\n"
    "               [--dry-run] [-v] -- PROG [ARGS...]\n"
    "Runs PROG here with the GPUs of the named machines as its CUDA devices.\n"
    "  --on NAMES     targets or groups (group NAME b,c in the targets file),\n"
    "                 comma-separated (default: $RIG_ON, else the targets file's\n"
    "                 default, else local); `rig ls` lists them. Several machines:\n"
    "                 one key, an agent on each, PROG sees all their devices\n"
    "                 (CUDA:0@b, CUDA:0@c), and a failure of any restarts the job\n"
    "  --gpus N       probe the machines (--on's, else every target but this one)\n"
    "                 and give PROG N free devices with the most free memory, on\n"
    "                 the fewest machines; it sees those only (the plan is printed)\n"
    "  --min-memory SIZE  with --gpus: only devices with SIZE free (20G, 512M)\n"
    "  --slurm        inside a Slurm allocation (salloc, sbatch): an agent on each\n"
    "                 of its nodes, started as a job step (srun), instead of --on\n"
    "  --stats        after each job, a table of each remote device's calls, round\n"
    "                 trips, bytes each way and time waiting, and the job's wall time\n"
    "  --retries N    start a failed job again up to N times (default 3)\n"
    "  --rig PATH     rig's path on the remote machines (default: rig on their PATH)\n"
    "  --dry-run      print what would run, start nothing\n"
    "  -v, --verbose  relay the agents' logs\n"
    "A target with a standing agent (standing=HOST:PORT in the targets file, which\n"
    "`rig serve` writes) is used as it is, with the fleet key, which the job's other\n"
    "agents then get too. Otherwise each attempt makes a fresh key and starts an\n"
    "agent on each machine (over ssh in batch mode, or here for `local`); the key\n"
    "reaches an agent on its standard input only. PROG gets LD_PRELOAD,\n"
    "RIG_REMOTE_AGENTS, RIG_REMOTE_KEY and RIG_REMOTE_REPORT (and\n"
    "RIG_LOCAL_DRIVER=none with `local`, so this machine's GPUs are seen once,\n"
    "through its agent).\n"
    "Exit status: PROG's own, or 128 + the signal that ended it; 255 when rig\n"
    "itself failed (no agent, no shim, PROG not found); 1 on a usage error.\n"
    "A job that fails (the program exits non-zero after its job reported\n"
    "`failed`) runs again; a program that exits 0 has succeeded.\n"
    "Environment: RIG_TARGETS (the targets file), RIG_SSH_CONFIG (an ssh config\n"
    "file, ssh -F), RIG_SSH (the ssh program), RIG_SHIM (the library to preload;\n"
    "default librigshim.so beside rig), RIG_FLEET_KEY (the fleet key's file).\n";

#define START_TIMEOUT_MS 30000
#define STOP_GRACE_MS 3000
#define LINE_MAX_BYTES 4400

enum { END_NONE, END_CLOSED, END_FAILED };

#define STATS_MAX 64

typedef struct device_stats {
    char device[NAMES_TEXT_MAX];
    unsigned long long calls, round_trips, bytes_out, bytes_in;
    double wait_ms;
} device_stats;

typedef struct reporter {        /* one process's report lines */
    bool started;
    int end;
    char why[LINE_MAX_BYTES];
    size_t nstats;
    device_stats stats[STATS_MAX];
} reporter;

typedef struct line_buf {
    char b[LINE_MAX_BYTES];
    size_t n;
} line_buf;

typedef struct agent_run {
    const target *t;
    child c;
    line_buf out, err;
    char last_err[512];         /* its last non-empty line of stderr */
    char address[NAMES_TEXT_MAX];
    bool started;               /* start_one ran for it (a standing one too) */
    bool listening, exited;
    bool unusable;              /* it listens where rig cannot dial it */
    reporter rep;
} agent_run;

typedef struct run_opts {
    const char *on, *rig;
    int retries;
    int gpus;                   /* --gpus N: placed on the probed machines */
    double min_free;            /* --min-memory, bytes */
    bool dry_run, verbose, stats, slurm;
    char **prog;                /* PROG ARGS..., NULL-terminated */
} run_opts;

typedef struct run_state {
    const run_opts *o;
    const target *targets[TARGETS_MAX];
    size_t n;
    bool any_local;
    char self[LAUNCHER_PATH_MAX + 1];
    char shim[LAUNCHER_PATH_MAX + 32];   /* rig's folder and a place below */
    char *preload;              /* LD_PRELOAD for PROG: its own, then the shim */
    agent_run *agents;
    pid_t prog;                 /* 0 when not running */
    int prog_status;
    int report_fd;
    line_buf report;
    reporter ctl;
    int sigfd;
    int interrupted;            /* the signal that asked rig to stop */
    bool any_standing;          /* a target has a standing agent: the fleet key is the job's */
    char *devices;              /* RIG_REMOTE_DEVICES of a placed job, or NULL */
    target *nodes;              /* --slurm: the allocation's nodes as targets */
    char fleet_hex[KEY_HEX_LEN + 1];
    /* Where the agent of `local` listens: 127.0.0.1, or with other machines
     * in the job this machine's address toward them (their agents dial it
     * too, for the mesh). */
    char local_listen[NAMES_TEXT_MAX];
} run_state;

/* ---- lines ---- */

/* Parses a report line into r; false when it is not one. */
static bool report_line(reporter *r, const char *line)
{
    if (strcmp(line, "started") == 0) {
        r->started = true;
    } else if (strcmp(line, "closed") == 0) {
        if (r->end == END_NONE)
            r->end = END_CLOSED;
    } else if (strncmp(line, "stats ", 6) == 0) {
        device_stats d;
        int used = 0;
        if (r->nstats < STATS_MAX &&
            sscanf(line + 6, "%159s %llu %llu %llu %llu %lf%n", d.device, &d.calls, &d.round_trips, &d.bytes_out,
                   &d.bytes_in, &d.wait_ms, &used) == 6 && line[6 + used] == '\0')
            r->stats[r->nstats++] = d;
    } else if (strncmp(line, "failed ", 7) == 0) {
        /* Several processes may share a descriptor (a shell running two
         * programs): any failure fails the job, the first one is its cause. */
        if (r->end != END_FAILED) {
            r->end = END_FAILED;
            snprintf(r->why, sizeof r->why, "%s", line + 7);
        }
    } else {
        return false;
    }
    return true;
}

static void agent_out_line(run_state *s, agent_run *a, char *line)
{
    static const char listening[] = "listening on ";
    if (!a->listening && strncmp(line, listening, sizeof listening - 1) == 0) {
        const char *at = line + sizeof listening - 1;
        names_address addr;
        rig_why why = { "" };
        if (names_parse_address(at, strlen(at), &addr, &why) < 0) {
            snprintf(a->last_err, sizeof a->last_err, "the agent said it listens on '%s': %s", at, why.text);
            a->unusable = true;
            return;
        }
        /* An agent here on every address is dialled on loopback; a remote
         * one listens where ssh reached it (SSH_CONNECTION), so this is a
         * machine rig cannot tell how to reach. */
        if (strcmp(addr.host, "0.0.0.0") == 0 || strcmp(addr.host, "::") == 0) {
            if (!a->t->local) {
                snprintf(a->last_err, sizeof a->last_err,
                         "the agent listens on %s, every address, not on the address ssh reached it at (an older rig there?)",
                         at);
                a->unusable = true;
                return;
            }
            snprintf(addr.host, sizeof addr.host, "%s", addr.ipv6 ? "::1" : "127.0.0.1");
        }
        snprintf(a->address, sizeof a->address, addr.ipv6 ? "[%s]:%u" : "%s:%u", addr.host, addr.port);
        a->listening = true;
        if (s->o->verbose)
            fprintf(stderr, "rig: %s: agent listening on %s\n", a->t->name, a->address);
    } else if (!report_line(&a->rep, line) && s->o->verbose) {
        fprintf(stderr, "rig: %s: %s\n", a->t->name, line);
    }
}

static void agent_err_line(run_state *s, agent_run *a, char *line)
{
    if (!*line)
        return;
    snprintf(a->last_err, sizeof a->last_err, "%s", line);
    if (s->o->verbose)
        fprintf(stderr, "rig: %s: %s\n", a->t->name, line);
}

/* Reads what fd has into lb and hands on each whole line; returns 1 after
 * reading, 0 at EOF (or an error), -1 when nothing is there now. */
static int read_lines(int fd, line_buf *lb, void (*fn)(run_state *, void *, char *), run_state *s, void *ctx)
{
    ssize_t r = read(fd, lb->b + lb->n, sizeof lb->b - 1 - lb->n);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return -1;
    if (r > 0)
        lb->n += (size_t)r;
    for (;;) {
        char *nl = memchr(lb->b, '\n', lb->n);
        bool full = lb->n == sizeof lb->b - 1;
        if (!nl && !(full || (r <= 0 && lb->n)))
            break;
        size_t len = nl ? (size_t)(nl - lb->b) : lb->n;
        lb->b[len] = '\0';
        fn(s, ctx, lb->b);
        size_t used = nl ? len + 1 : len;
        memmove(lb->b, lb->b + used, lb->n - used);
        lb->n -= used;
    }
    return r > 0;
}

static void on_agent_out(run_state *s, void *a, char *line) { agent_out_line(s, a, line); }
static void on_agent_err(run_state *s, void *a, char *line) { agent_err_line(s, a, line); }
static void on_report(run_state *s, void *ctx, char *line)
{
    (void)ctx;
    report_line(&s->ctl, line);
}

/* ---- the event loop ---- */

static void reap(run_state *s)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid == s->prog) {
            s->prog = 0;
            s->prog_status = st;
            continue;
        }
        for (size_t i = 0; i < s->n; i++)
            if (s->agents[i].c.pid == pid) {
                s->agents[i].c.pid = 0;
                s->agents[i].c.status = st;
                s->agents[i].exited = true;
            }
    }
}

/* Waits up to ms for something to happen and handles it. */
static void pump(run_state *s, int ms)
{
    struct pollfd p[2 + 2 * TARGETS_MAX];
    int n = 0;
    p[n++] = (struct pollfd){ s->sigfd, POLLIN, 0 };
    p[n++] = (struct pollfd){ s->report_fd, POLLIN, 0 };
    for (size_t i = 0; i < s->n; i++) {
        p[n++] = (struct pollfd){ s->agents[i].c.out, POLLIN, 0 };
        p[n++] = (struct pollfd){ s->agents[i].c.err, POLLIN, 0 };
    }
    if (poll(p, (nfds_t)n, ms) < 0)
        return;
    if (p[0].revents & POLLIN) {
        struct signalfd_siginfo si;
        while (read(s->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
            if (si.ssi_signo == SIGCHLD)
                continue;
            s->interrupted = (int)si.ssi_signo;
            /* A Ctrl-C from the terminal reaches the program itself (the
             * kernel sent it to the whole group); one sent to rig alone is
             * passed on. */
            if (s->prog > 0 && si.ssi_code != SI_KERNEL)
                kill(s->prog, (int)si.ssi_signo);
        }
    }
    reap(s);
    if (s->report_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
        read_lines(s->report_fd, &s->report, on_report, s, NULL) == 0) {
        close(s->report_fd);
        s->report_fd = -1;
    }
    for (size_t i = 0; i < s->n; i++) {
        agent_run *a = &s->agents[i];
        if (a->c.out >= 0 && (p[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) &&
            read_lines(a->c.out, &a->out, on_agent_out, s, a) == 0) {
            close(a->c.out);
            a->c.out = -1;
        }
        if (a->c.err >= 0 && (p[3 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) &&
            read_lines(a->c.err, &a->err, on_agent_err, s, a) == 0) {
            close(a->c.err);
            a->c.err = -1;
        }
    }
}

/* True once a has exited and said all it will. */
static bool agent_gone(const agent_run *a)
{
    return a->exited && a->c.out < 0 && a->c.err < 0;
}

/* Lets agent a finish saying why it ended (up to ms). */
static void settle(run_state *s, agent_run *a, int ms)
{
    long long until = child_now_ms() + ms;
    while (!agent_gone(a) && child_now_ms() < until)
        pump(s, 50);
}

/* Ends every agent: closes its lifeline, waits, then signals its group. */
static void stop_agents(run_state *s)
{
    for (size_t i = 0; i < s->n; i++) {
        agent_run *a = &s->agents[i];
        if (a->c.in >= 0) {
            close(a->c.in);
            a->c.in = -1;
        }
    }
    for (int round = 0; round < 3; round++) {
        /* Interrupted, rig does not wait long for agents to end by themselves. */
        int grace = s->interrupted ? 300 : STOP_GRACE_MS;
        long long until = child_now_ms() + (round == 0 ? grace : 1000);
        for (;;) {
            bool all = true;
            for (size_t i = 0; i < s->n; i++)
                all &= s->agents[i].exited || s->agents[i].c.pid <= 0;
            if (all || child_now_ms() >= until)
                break;
            pump(s, 50);
        }
        for (size_t i = 0; i < s->n; i++) {
            agent_run *a = &s->agents[i];
            if (!a->exited && a->c.pid > 0 && round < 2) {
                kill(-a->c.pid, round == 0 ? SIGTERM : SIGKILL);
                kill(a->c.pid, round == 0 ? SIGTERM : SIGKILL);
            }
        }
    }
    for (size_t i = 0; i < s->n; i++)
        child_close_fds(&s->agents[i].c);
}

/* ---- one attempt ---- */

typedef enum outcome {
    OUT_DONE,          /* PROG ran; its status is final */
    OUT_JOB_FAILED,    /* PROG ran and its job failed: try again */
    OUT_START_FAILED,  /* an agent did not start: try again */
    OUT_ABORT,         /* rig cannot go on (or was interrupted) */
} outcome;

/* The command that starts an agent on t into argv (remote, cap bytes,
 * holds the command ssh runs there); RIG_E_TOO_LONG when it does not fit. */
static int agent_command(const run_state *s, const target *t, char *remote, size_t cap, const char *argv[])
{
    if (t->slurm) {
        /* A job step on that node: its stdin (the key, then the lifeline)
         * and stdout are srun's, passed through as they come. */
        static char nodelist[NAMES_NAME_MAX + 16];
        snprintf(nodelist, sizeof nodelist, "--nodelist=%s", t->name);
        int n = 0;
        const char *srun = getenv("RIG_SRUN");
        argv[n++] = srun && *srun ? srun : "srun";
        argv[n++] = "--nodes=1";
        argv[n++] = "--ntasks=1";
        argv[n++] = nodelist;
        argv[n++] = "--unbuffered";
        argv[n++] = "--quiet";
        argv[n++] = "--kill-on-bad-exit=1";
        argv[n++] = s->o->rig;
        argv[n++] = "agent";
        argv[n++] = "--lifeline";
        argv[n] = NULL;
        (void)remote;
        (void)cap;
        return 0;
    }
    if (t->local) {
        int n = 0;
        argv[n++] = s->self;
        argv[n++] = "agent";
        argv[n++] = "--lifeline";
        argv[n++] = "--listen";
        argv[n++] = s->local_listen[0] ? s->local_listen : "127.0.0.1:0";
        argv[n] = NULL;
        return 0;
    }
    remote[0] = '\0';
    int rc = shell_join(remote, cap, (const char *const[]){ "exec", s->o->rig, "agent", "--lifeline", NULL });
    if (rc < 0)
        return rc;
    targets_ssh_argv(t, remote, false, argv);
    return 0;
}

/* Why agent a did not start. */
static void start_failure(run_state *s, agent_run *a, char *cause, size_t cap)
{
    if (a->unusable) {
        snprintf(cause, cap, "%s: %s", a->t->name, a->last_err);
        return;
    }
    settle(s, a, 2000);
    char st[96] = "";
    if (a->exited)
        child_status_text(a->c.status, st, sizeof st);
    bool ssh = !a->t->local;
    if (a->exited && ssh && WIFEXITED(a->c.status) && WEXITSTATUS(a->c.status) == 127)
        snprintf(cause, cap, "%s: %s (is rig installed there? --rig PATH names it)", a->t->name,
                 a->last_err[0] ? a->last_err : "rig not found");
    else if (a->last_err[0])
        snprintf(cause, cap, "%s: %s", a->t->name, a->last_err);
    else if (a->exited)
        snprintf(cause, cap, "%s: the agent %s before listening", a->t->name, st);
    else
        snprintf(cause, cap, "%s: the agent did not say where it listens within %d s", a->t->name,
                 START_TIMEOUT_MS / 1000);
}

/* Starts agent a (or takes its standing one) and hands it the key. */
static outcome start_one(run_state *s, agent_run *a, const char *key_hex, char *cause, size_t cap)
{
    a->started = true;
    if (a->t->standing[0]) {
        /* Served all the time with the fleet key: nothing to start. */
        snprintf(a->address, sizeof a->address, "%s", a->t->standing);
        a->listening = true;
        return OUT_DONE;
    }
    const char *argv[TARGETS_SSH_ARGV_MAX];
    char remote[LAUNCHER_REMOTE_MAX];
    if (agent_command(s, a->t, remote, sizeof remote, argv) < 0) {
        snprintf(cause, cap, "%s: the remote command is longer than %zu bytes", a->t->name, sizeof remote - 1);
        return OUT_ABORT;
    }
    rig_why why = { "" };
    if (child_spawn(&a->c, argv, &why) < 0) {
        snprintf(cause, cap, "%s: %s", a->t->name, why.text);
        return OUT_START_FAILED;
    }
    a->exited = false;
    char line[KEY_HEX_LEN + 2];
    snprintf(line, sizeof line, "%s\n", key_hex);
    ssize_t w = write(a->c.in, line, strlen(line));
    explicit_bzero(line, sizeof line);
    if (w != (ssize_t)(KEY_HEX_LEN + 1)) {
        start_failure(s, a, cause, cap);
        return OUT_START_FAILED;
    }
    return OUT_DONE;
}

/* "HOST:0" (IPv6 in brackets) for this machine's address toward the agent
 * listening at address: the source a connection there takes (a UDP
 * connect sends nothing). -1 with why when there is no route. */
static int address_toward(const char *address, char *out, size_t cap, char *why, size_t why_cap)
{
    names_address a;
    rig_why w = { "" };
    if (names_parse_address(address, strlen(address), &a, &w) < 0) {
        snprintf(why, why_cap, "%s", w.text);
        return -1;
    }
    char port[8];
    snprintf(port, sizeof port, "%u", a.port);
    struct addrinfo hints = { .ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV }, *res = NULL;
    int rc = getaddrinfo(a.host, port, &hints, &res);
    if (rc != 0) {
        snprintf(why, why_cap, "%s: %s", a.host, gai_strerror(rc));
        return -1;
    }
    char host[INET6_ADDRSTRLEN];
    bool v6 = res->ai_family == AF_INET6;
    rc = net_source_toward(res->ai_addr, (unsigned)res->ai_addrlen, host, &w);
    freeaddrinfo(res);
    if (rc < 0) {
        snprintf(why, why_cap, "no route to %s: %s", a.host, w.text);
        return -1;
    }
    snprintf(out, cap, v6 ? "[%s]:0" : "%s:0", host);
    return 0;
}

/* Waits until every started agent says where it listens. */
static outcome wait_listening(run_state *s, char *cause, size_t cap)
{
    long long until = child_now_ms() + START_TIMEOUT_MS;
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < s->n; i++) {
            agent_run *a = &s->agents[i];
            if (!a->started)   /* `local`, started after the others */
                continue;
            if (!a->listening && (a->exited || a->c.out < 0 || a->unusable)) {
                start_failure(s, a, cause, cap);
                return OUT_START_FAILED;
            }
            all &= a->listening;
        }
        if (all)
            return OUT_DONE;
        if (s->interrupted) {
            snprintf(cause, cap, "interrupted by %s while starting agents", strsignal(s->interrupted));
            return OUT_ABORT;
        }
        if (child_now_ms() >= until) {
            for (size_t i = 0; i < s->n; i++)
                if (s->agents[i].started && !s->agents[i].listening) {
                    start_failure(s, &s->agents[i], cause, cap);
                    break;
                }
            return OUT_START_FAILED;
        }
        pump(s, 100);
    }
}

static outcome start_agents(run_state *s, const char *key_hex, char *cause, size_t cap)
{
    bool local = false, others = false;
    for (size_t i = 0; i < s->n; i++) {
        agent_run *a = &s->agents[i];
        memset(a, 0, sizeof *a);
        a->t = s->targets[i];
        a->c.in = a->c.out = a->c.err = -1;
        local |= a->t->local;
        others |= !a->t->local;
    }
    /* With other machines in the job, `local` starts once they listen, on
     * this machine's address toward them: their agents dial it for the
     * mesh, and 127.0.0.1 there is not here. */
    s->local_listen[0] = '\0';
    for (int round = 0; round < (local && others ? 2 : 1); round++) {
        if (round == 1) {
            const char *first = NULL;
            for (size_t i = 0; i < s->n && !first; i++)
                if (!s->agents[i].t->local)
                    first = s->agents[i].address;
            char why[300];
            if (address_toward(first, s->local_listen, sizeof s->local_listen, why, sizeof why) < 0) {
                snprintf(cause, cap, "local: no address of this machine toward the other agents (%s): %s", first,
                         why);
                return OUT_START_FAILED;
            }
        }
        for (size_t i = 0; i < s->n; i++) {
            agent_run *a = &s->agents[i];
            if (local && others && a->t->local != (round == 1))
                continue;
            outcome o = start_one(s, a, key_hex, cause, cap);
            if (o != OUT_DONE)
                return o;
        }
        outcome o = wait_listening(s, cause, cap);
        if (o != OUT_DONE)
            return o;
    }
    return OUT_DONE;
}

/* Every agent's "NAME=ADDRESS" fits RIG_REMOTE_AGENTS' buffer below. */
_Static_assert(TARGETS_MAX <= NAMES_AGENTS_MAX, "more targets than RIG_REMOTE_AGENTS holds");

/* The program's environment additions, in the child; -1 with errno when
 * one cannot be set (the program must not run without them). */
static int program_env(run_state *s, const char *key_hex, int report_fd)
{
    char agents[NAMES_AGENTS_MAX * (NAMES_NAME_MAX + NAMES_TEXT_MAX + 2)];
    size_t off = 0;
    agents[0] = '\0';
    for (size_t i = 0; i < s->n; i++)
        off += (size_t)snprintf(agents + off, sizeof agents - off, "%s%s=%s", i ? "," : "", s->agents[i].t->name,
                                s->agents[i].address);
    char fd[16];
    snprintf(fd, sizeof fd, "%d", report_fd);
    if (report_fd < 0 || setenv("LD_PRELOAD", s->preload, 1) < 0 || setenv("RIG_REMOTE_AGENTS", agents, 1) < 0 ||
        setenv("RIG_REMOTE_KEY", key_hex, 1) < 0 || setenv("RIG_REMOTE_REPORT", fd, 1) < 0 ||
        unsetenv("RIG_KEY_FILE") < 0 ||
        ((s->any_local || s->devices) && setenv("RIG_LOCAL_DRIVER", "none", 1) < 0) ||
        (s->devices ? setenv("RIG_REMOTE_DEVICES", s->devices, 1) : unsetenv("RIG_REMOTE_DEVICES")) < 0)
        return -1;
    return 0;
}

static outcome run_program(run_state *s, const char *key_hex, char *cause, size_t cap, int *status)
{
    int rp[2], ep[2];
    if (pipe2(rp, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
        snprintf(cause, cap, "pipe: %s", strerror(errno));
        return OUT_ABORT;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int fd = dup(rp[1]);   /* without close-on-exec: PROG's to write */
        if (program_env(s, key_hex, fd) == 0)
            execvp(s->o->prog[0], s->o->prog);
        int e = errno;
        ssize_t w = write(ep[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(rp[1]);
    close(ep[1]);
    if (pid < 0) {
        snprintf(cause, cap, "fork: %s", strerror(errno));
        close(rp[0]);
        close(ep[0]);
        return OUT_ABORT;
    }
    s->prog = pid;
    int e = 0;
    ssize_t r;
    do
        r = read(ep[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(ep[0]);
    s->report_fd = rp[0];
    s->report.n = 0;
    memset(&s->ctl, 0, sizeof s->ctl);
    while (s->prog > 0)
        pump(s, 200);
    /* Lines PROG wrote are in the pipe now; a child it left behind may
     * hold the pipe open, so read what is there and no more. */
    fcntl(s->report_fd, F_SETFL, O_NONBLOCK);
    while (read_lines(s->report_fd, &s->report, on_report, s, NULL) > 0)
        ;
    if (s->report_fd >= 0) {
        close(s->report_fd);
        s->report_fd = -1;
    }
    if (r == (ssize_t)sizeof e) {
        snprintf(cause, cap, "cannot run %s: %s", s->o->prog[0], strerror(e));
        *status = RIG_EXIT_OWN_FAILURE;
        return OUT_ABORT;
    }
    int st = s->prog_status;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : RIG_EXIT_OWN_FAILURE;
    if (s->interrupted || s->ctl.end != END_FAILED || *status == 0)
        return OUT_DONE;
    snprintf(cause, cap, "%s", s->ctl.why);
    /* An agent that ended by itself during the job says how. */
    for (size_t i = 0; i < s->n; i++) {
        agent_run *a = &s->agents[i];
        char st_text[96];
        size_t off = strlen(cause);
        if (a->exited && off < cap)
            snprintf(cause + off, cap - off, " (the agent on %s %s%s%s)", a->t->name,
                     child_status_text(a->c.status, st_text, sizeof st_text), a->last_err[0] ? ": " : "",
                     a->last_err);
        else if (a->rep.end == END_FAILED && !strstr(cause, a->rep.why) && off < cap)
            snprintf(cause + off, cap - off, " (%s: %s)", a->t->name, a->rep.why);
    }
    return OUT_JOB_FAILED;
}

static void human_bytes(char *out, size_t cap, unsigned long long n)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

/* --stats: the job's table, from the program's report lines. */
static void print_stats(const reporter *r, long long wall_ms)
{
    fprintf(stderr, "rig run: job stats, wall time %.2f s\n", (double)wall_ms / 1000);
    if (r->nstats == 0) {
        fprintf(stderr, "  (no remote device reported: the program used none, or ended before its shim could say)\n");
        return;
    }
    fprintf(stderr, "  %-24s %10s %12s %12s %12s %10s\n", "DEVICE", "CALLS", "ROUND TRIPS", "BYTES OUT", "BYTES IN",
            "WAIT MS");
    for (size_t i = 0; i < r->nstats; i++) {
        const device_stats *d = &r->stats[i];
        char out[32], in[32];
        human_bytes(out, sizeof out, d->bytes_out);
        human_bytes(in, sizeof in, d->bytes_in);
        fprintf(stderr, "  %-24s %10llu %12llu %12s %12s %10.1f\n", d->device, d->calls, d->round_trips, out, in,
                d->wait_ms);
    }
}

static outcome attempt(run_state *s, char *cause, size_t cap, int *status)
{
    rig_key key;
    rig_why why = { "" };
    char hex[KEY_HEX_LEN + 1];
    *status = RIG_EXIT_OWN_FAILURE;
    if (s->any_standing) {
        memcpy(hex, s->fleet_hex, sizeof hex);
    } else if (key_generate(&key, &why) < 0 || key_to_hex(&key, hex, &why) < 0) {
        key_wipe(&key);
        snprintf(cause, cap, "cannot make a key: %s", why.text);
        return OUT_ABORT;
    } else {
        key_wipe(&key);
    }
    outcome out = start_agents(s, hex, cause, cap);
    if (out == OUT_DONE) {
        long long began = child_now_ms();
        out = run_program(s, hex, cause, cap, status);
        if (s->o->stats)
            print_stats(&s->ctl, child_now_ms() - began);
    }
    explicit_bzero(hex, sizeof hex);
    stop_agents(s);
    return out;
}

/* ---- setup ---- */

static bool find_shim(run_state *s)
{
    const char *env = getenv("RIG_SHIM");
    if (env && *env) {   /* run_main refused one longer than s->shim */
        snprintf(s->shim, sizeof s->shim, "%s", env);
        return access(s->shim, R_OK) == 0;
    }
    char dir[sizeof s->self];
    snprintf(dir, sizeof dir, "%s", s->self);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    static const char *const places[] = { "%s/librigshim.so", "%s/../lib/rig/librigshim.so" };
    /* A place too long to be a path (rig itself deep near PATH_MAX) holds
     * no shim: the kernel would refuse to open it. */
    for (size_t i = 0; i < 2; i++) {
        snprintf(s->shim, sizeof s->shim, places[i], dir);
        if (strlen(s->shim) <= LAUNCHER_PATH_MAX && access(s->shim, R_OK) == 0)
            return true;
    }
    snprintf(s->shim, sizeof s->shim, places[0], dir);
    return false;
}

/* LD_PRELOAD for the program: its own, then the shim; NULL when out of
 * memory. Built whole, however long the inherited one is. */
static char *make_preload(const char *shim)
{
    const char *old = getenv("LD_PRELOAD");
    bool keep = old && *old;
    size_t len = (keep ? strlen(old) + 1 : 0) + strlen(shim) + 1;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s%s%s", keep ? old : "", keep ? ":" : "", shim);
    return p;
}

/* True when PROG can be run: a path to an executable, or found in PATH. */
static bool program_exists(const char *prog)
{
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        char full[LAUNCHER_PATH_MAX + 1];
        /* An entry too long to hold PROG is skipped, as execvp finds
         * nothing there either (the kernel refuses such a path). */
        int n = snprintf(full, sizeof full, "%.*s/%s", (int)len, len ? path : ".", prog);
        struct stat st;
        if (n >= 0 && (size_t)n < sizeof full && stat(full, &st) == 0 && S_ISREG(st.st_mode) &&
            access(full, X_OK) == 0)
            return true;
        if (!colon)
            break;
        path = colon + 1;
    }
    return false;
}

/* Prints s as one shell word, whole however long; false when out of
 * memory. */
static bool print_quoted(const char *s)
{
    size_t cap = SHELL_QUOTED_MAX(strlen(s)) + 1;
    char *q = malloc(cap);
    if (!q)
        return false;
    q[0] = '\0';
    int rc = shell_quote(q, cap, s);   /* cannot fail: cap is the most it needs */
    if (rc == 0)
        fputs(q, stdout);
    free(q);
    return rc == 0;
}

static int dry_run(run_state *s)
{
    printf("rig run --dry-run: nothing is started. Up to %d attempt%s, each with %s:\n", s->o->retries + 1,
           s->o->retries ? "s" : "", s->any_standing ? "the fleet key" : "a fresh key");
    bool ok = true;
    const target *other = NULL;
    for (size_t i = 0; i < s->n && !other; i++)
        if (!s->targets[i]->local)
            other = s->targets[i];
    if (s->any_local && other)   /* start_agents learns it once the others listen */
        snprintf(s->local_listen, sizeof s->local_listen, "<this machine's address toward %s>:0", other->name);
    for (size_t i = 0; i < s->n; i++) {
        if (s->targets[i]->standing[0]) {
            printf("agent %s: the standing agent at %s\n", s->targets[i]->name, s->targets[i]->standing);
            continue;
        }
        const char *argv[TARGETS_SSH_ARGV_MAX];
        char remote[LAUNCHER_REMOTE_MAX];
        if (agent_command(s, s->targets[i], remote, sizeof remote, argv) < 0) {
            fflush(stdout);
            fprintf(stderr, "rig run: %s: the remote command is longer than %zu bytes\n", s->targets[i]->name,
                    sizeof remote - 1);
            return RIG_EXIT_OWN_FAILURE;
        }
        printf("agent %s:", s->targets[i]->name);
        for (size_t j = 0; argv[j]; j++) {
            putchar(' ');
            ok &= print_quoted(argv[j]);
        }
        printf("   (the key on its standard input)\n");
    }
    printf("program: LD_PRELOAD=");
    ok &= print_quoted(s->preload);
    printf(" RIG_REMOTE_AGENTS=");
    for (size_t i = 0; i < s->n; i++)
        printf("%s%s=<its agent's address>", i ? "," : "", s->targets[i]->name);
    printf(" RIG_REMOTE_KEY=<the key> RIG_REMOTE_REPORT=<a descriptor>%s",
           s->any_local || s->devices ? " RIG_LOCAL_DRIVER=none" : "");
    if (s->devices)
        printf(" RIG_REMOTE_DEVICES=%s", s->devices);
    for (char **a = s->o->prog; *a; a++) {
        putchar(' ');
        ok &= print_quoted(*a);
    }
    putchar('\n');
    if (!ok) {
        fflush(stdout);
        fprintf(stderr, "rig run: out of memory: the lines above are incomplete\n");
        return RIG_EXIT_OWN_FAILURE;
    }
    return 0;
}

/* --slurm: the nodes of the allocation this runs in (`scontrol show
 * hostnames` of SLURM_JOB_NODELIST), each a target whose agent is a step. */
static int slurm_nodes(run_state *s)
{
    const char *job = getenv("SLURM_JOB_ID"), *list = getenv("SLURM_JOB_NODELIST");
    if (!job || !*job || !list || !*list) {
        fprintf(stderr, "rig run: --slurm runs inside a Slurm allocation (salloc or sbatch): SLURM_JOB_ID and "
                        "SLURM_JOB_NODELIST are not set\n");
        return -1;
    }
    if (!(s->nodes = calloc(TARGETS_MAX, sizeof *s->nodes))) {
        fprintf(stderr, "rig run: out of memory\n");
        return -1;
    }
    const char *scontrol = getenv("RIG_SCONTROL");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s show hostnames", scontrol && *scontrol ? scontrol : "scontrol");
    FILE *f = popen(cmd, "r");
    if (!f) {
        fprintf(stderr, "rig run: cannot run %s: %s\n", cmd, strerror(errno));
        return -1;
    }
    char line[512];
    s->n = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        if (!names_valid_name(line, strlen(line)) || s->n == TARGETS_MAX) {
            fprintf(stderr, "rig run: the Slurm node '%.80s' %s\n", line,
                    s->n == TARGETS_MAX ? "is one too many" : "is not a name rig can give a device (CUDA:0@NAME)");
            rc = -1;
            break;
        }
        target *g = &s->nodes[s->n];
        snprintf(g->name, sizeof g->name, "%s", line);
        snprintf(g->address, sizeof g->address, "slurm job %s", job);
        g->slurm = true;
        s->targets[s->n++] = g;
    }
    int st = pclose(f);
    if (rc == 0 && (st != 0 || s->n == 0)) {
        fprintf(stderr, "rig run: %s found no nodes in SLURM_JOB_NODELIST=%s (status %d)\n", cmd, list, st);
        rc = -1;
    }
    return rc;
}

/* --gpus N: probes the candidates (--on's targets, else every target of
 * the file but this machine, unless it is the only one), picks the devices
 * and makes the job's targets the machines holding them. */
static int place(run_state *s, const targets *t)
{
    const target *cand[TARGETS_MAX];
    size_t n = 0;
    if (s->o->on || (getenv("RIG_ON") && *getenv("RIG_ON"))) {
        memcpy(cand, s->targets, s->n * sizeof cand[0]);
        n = s->n;
    } else {
        for (size_t i = 0; i < t->count; i++)
            if (!t->v[i].local)
                cand[n++] = &t->v[i];
        if (n == 0)
            cand[n++] = targets_find(t, "local");
    }
    probe *ps = calloc(n, sizeof *ps);
    placement_machine *m = calloc(n, sizeof *m);
    placement *plan = calloc(1, sizeof *plan);
    json **status = calloc(n, sizeof *status);
    int rc = -1;
    if (!ps || !m || !plan || !status) {
        fprintf(stderr, "rig run: out of memory\n");
        goto out;
    }
    /* A standing agent is asked itself, with the fleet key (its own slot
     * decides free or busy); the other machines are probed over ssh. */
    size_t np = 0;
    bool standing = false;
    for (size_t i = 0; i < n; i++)
        standing |= cand[i]->standing[0] != '\0';
    rig_key fleet;
    char key_path[LAUNCHER_PATH_MAX + 1];
    if (standing && fleet_key_read(&fleet, key_path, sizeof key_path, "rig run") < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (cand[i]->standing[0])
            continue;
        ps[np].t = cand[i];
        ps[np].c.in = ps[np].c.out = ps[np].c.err = -1;
        np++;
    }
    fprintf(stderr, "rig run: probing %zu machine%s for %d device%s\n", n, n == 1 ? "" : "s", s->o->gpus,
            s->o->gpus == 1 ? "" : "s");
    probe_all(ps, np, s->o->rig);
    for (size_t i = 0, k = 0; i < n; i++) {
        m[i].name = cand[i]->name;
        if (cand[i]->standing[0]) {
            rig_why w = { "" };
            status[i] = agent_status(cand[i]->standing, &fleet, NULL, &w);
            m[i].answer = status[i];
            if (!status[i])
                fprintf(stderr, "rig run: %s: its standing agent at %s: %s\n", cand[i]->name, cand[i]->standing,
                        w.text);
            continue;
        }
        probe *p = &ps[k++];
        m[i].answer = p->why[0] ? NULL : p->answer;
        if (p->why[0])
            fprintf(stderr, "rig run: %s: down: %s\n", cand[i]->name, p->why);
    }
    if (standing)
        key_wipe(&fleet);
    char why[512];
    if (placement_plan(m, n, s->o->gpus, s->o->min_free, plan, why, sizeof why) < 0) {
        fprintf(stderr, "rig run: cannot place the job: %s\n", why);
        goto out;
    }
    size_t cap = plan->count * (NAMES_NAME_MAX + 24) + 1, off = 0;
    if (!(s->devices = malloc(cap))) {
        fprintf(stderr, "rig run: out of memory\n");
        goto out;
    }
    s->devices[0] = '\0';
    s->n = 0;
    s->any_local = false;
    fprintf(stderr, "rig run: placing %zu device%s on %zu machine%s:", plan->count, plan->count == 1 ? "" : "s",
            plan->machines, plan->machines == 1 ? "" : "s");
    for (size_t i = 0; i < plan->count; i++) {
        const placement_device *d = &plan->d[i];
        const target *g = cand[d->machine];
        if (s->n == 0 || s->targets[s->n - 1] != g) {
            s->targets[s->n++] = g;
            s->any_local |= g->local;
        }
        off += (size_t)snprintf(s->devices + off, cap - off, "%sCUDA:%d@%s", i ? "," : "", d->ordinal, g->name);
        fprintf(stderr, "%s CUDA:%d@%s (%s, %.1f GiB free)", i ? "," : "", d->ordinal, g->name, d->name,
                d->free / (1024.0 * 1024 * 1024));
    }
    fputc('\n', stderr);
    rc = 0;
out:
    for (size_t i = 0; ps && i < n; i++)
        probe_free(&ps[i]);
    for (size_t i = 0; status && i < n; i++)
        json_free(status[i]);
    free(status);
    free(ps);
    free(m);
    free(plan);
    return rc;
}

int run_main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "on", required_argument, NULL, 'o' },  { "retries", required_argument, NULL, 'r' },
        { "rig", required_argument, NULL, 'R' }, { "dry-run", no_argument, NULL, 'n' },
        { "verbose", no_argument, NULL, 'v' },   { "help", no_argument, NULL, 'h' },
        { "gpus", required_argument, NULL, 'g' }, { "min-memory", required_argument, NULL, 'm' },
        { "stats", no_argument, NULL, 's' },     { "slurm", no_argument, NULL, 'S' },
        { NULL, 0, NULL, 0 },
    };
    run_opts o = { .rig = "rig", .retries = 3 };
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, "+vh", opts, NULL)) != -1;) {
        char *end;
        switch (c) {
        case 'o': o.on = optarg; break;
        case 'r':
            errno = 0;
            o.retries = (int)strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || o.retries < 0 || o.retries > 1000) {
                fprintf(stderr, "rig run: --retries takes a count from 0 to 1000, not '%s'\n%s", optarg, usage);
                return 1;
            }
            break;
        case 'R': o.rig = optarg; break;
        case 'g':
            errno = 0;
            o.gpus = (int)strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || o.gpus < 1 || o.gpus > PLACEMENT_MAX) {
                fprintf(stderr, "rig run: --gpus takes a count from 1 to %d, not '%s'\n%s", PLACEMENT_MAX, optarg,
                        usage);
                return 1;
            }
            break;
        case 'm':
            if (placement_parse_size(optarg, &o.min_free) < 0) {
                fprintf(stderr, "rig run: --min-memory takes a size (20G, 512M, bytes), not '%s'\n%s", optarg,
                        usage);
                return 1;
            }
            break;
        case 'n': o.dry_run = true; break;
        case 's': o.stats = true; break;
        case 'S': o.slurm = true; break;
        case 'v': o.verbose = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 1;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "rig run: no program to run\n%s", usage);
        return 1;
    }
    o.prog = argv + optind;
    if (!rig_path_ok("rig run", o.rig, usage))
        return 1;
    const char *shim_env = getenv("RIG_SHIM");
    if (shim_env && strlen(shim_env) > LAUNCHER_PATH_MAX) {
        fprintf(stderr, "rig run: RIG_SHIM: path longer than %d bytes\n", LAUNCHER_PATH_MAX);
        return RIG_EXIT_OWN_FAILURE;
    }
    if (strlen(o.prog[0]) > LAUNCHER_PATH_MAX) {
        fprintf(stderr, "rig run: PROG: path longer than %d bytes\n", LAUNCHER_PATH_MAX);
        return RIG_EXIT_OWN_FAILURE;
    }

    run_state *s = calloc(1, sizeof *s);
    targets *t = calloc(1, sizeof *t);
    int rc = RIG_EXIT_OWN_FAILURE;
    rig_why why = { "" };
    if (!s || !t || !(s->agents = calloc(TARGETS_MAX, sizeof *s->agents))) {
        fprintf(stderr, "rig run: out of memory\n");
        goto out;
    }
    s->o = &o;
    s->report_fd = -1;
    s->sigfd = -1;
    if (o.slurm && (o.on || o.gpus)) {
        fprintf(stderr, "rig run: --slurm takes the allocation's nodes; it goes with neither --on nor --gpus\n%s",
                usage);
        rc = 1;
        goto out;
    }
    if (o.slurm ? slurm_nodes(s) < 0
                : targets_load(t, &why) < 0 || targets_select(t, o.on, s->targets, &s->n, &why) < 0) {
        if (!o.slurm)
            fprintf(stderr, "rig run: %s\n", why.text);
        goto out;
    }
    if (o.min_free > 0 && !o.gpus) {
        fprintf(stderr, "rig run: --min-memory goes with --gpus\n%s", usage);
        rc = 1;
        goto out;
    }
    if (o.gpus && place(s, t) < 0)
        goto out;
    for (size_t i = 0; i < s->n; i++) {
        s->any_local |= s->targets[i]->local;
        s->any_standing |= s->targets[i]->standing[0] != '\0';
    }
    if (s->any_standing) {
        rig_key fleet;
        rig_why why = { "" };
        char path[LAUNCHER_PATH_MAX + 1];
        if (fleet_key_read(&fleet, path, sizeof path, "rig run") < 0)
            goto out;
        int hex_rc = key_to_hex(&fleet, s->fleet_hex, &why);
        key_wipe(&fleet);
        if (hex_rc < 0) {
            fprintf(stderr, "rig run: the fleet key %s: %s\n", path, why.text);
            goto out;
        }
    }
    if (self_path(s->self, sizeof s->self) < 0) {
        fprintf(stderr, "rig run: cannot find this program (/proc/self/exe)\n");
        goto out;
    }
    if (!find_shim(s)) {
        fprintf(stderr, "rig run: no shim to preload at %s (RIG_SHIM names one)\n", s->shim);
        goto out;
    }
    if (!(s->preload = make_preload(s->shim))) {
        fprintf(stderr, "rig run: out of memory\n");
        goto out;
    }
    if (o.dry_run) {
        rc = dry_run(s);
        goto out;
    }
    if (!program_exists(o.prog[0])) {
        fprintf(stderr, "rig run: %s: %s\n", o.prog[0], strchr(o.prog[0], '/') ? strerror(errno) : "command not found");
        goto out;
    }

    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&mask, sigs[i]);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    s->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (s->sigfd < 0) {
        fprintf(stderr, "rig run: signalfd: %s\n", strerror(errno));
        goto out;
    }

    int attempts = o.retries + 1;
    for (int i = 1; i <= attempts; i++) {
        char cause[LINE_MAX_BYTES + 1024] = "";
        int status;
        outcome out = attempt(s, cause, sizeof cause, &status);
        if (out == OUT_DONE) {
            rc = status;
            break;
        }
        if (out == OUT_ABORT) {
            fprintf(stderr, "rig run: %s\n", cause);
            rc = s->interrupted ? 128 + s->interrupted : status;
            break;
        }
        rc = status;
        if (s->interrupted) {
            rc = out == OUT_START_FAILED ? 128 + s->interrupted : status;
            break;
        }
        if (i == attempts) {
            fprintf(stderr, "rig run: giving up after %d attempt%s: %s\n", attempts, attempts == 1 ? "" : "s",
                    cause);
            break;
        }
        fprintf(stderr, "rig run: attempt %d of %d failed: %s\nrig run: starting the job again with %s\n", i,
                attempts, cause, s->any_standing ? "the fleet key" : "fresh agents and a fresh key");
        long long until = child_now_ms() + 200LL * i;
        while (child_now_ms() < until && !s->interrupted)
            pump(s, 50);
        if (s->interrupted) {
            rc = 128 + s->interrupted;
            break;
        }
    }
out:
    if (s && s->sigfd >= 0)
        close(s->sigfd);
    if (s) {
        free(s->agents);
        free(s->preload);
        free(s->devices);
        free(s->nodes);
        explicit_bzero(s->fleet_hex, sizeof s->fleet_hex);
    }
    free(s);
    free(t);
    return rc;
}

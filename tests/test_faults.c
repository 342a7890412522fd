/* Faults, end to end (issue 5): real programs through the preloaded shim,
 * a real rig-agent on loopback, and tests/tools/rig-relay between them to
 * stall, cut or corrupt the path. For each fault the program must end with a
 * non-zero exit and the root cause on stderr ("rig: job failed: CAUSE")
 * within its bound (12 s for silence and stalls, 2 s for the rest), never
 * hang, and the agent must serve the next job. Each case prints one
 * "fault-table:" line (fault, detection time, message) for the record. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness.h"
#include "tests/support.h"
#include "tests/watch.h"

#define PROGRAMS PLAIN_BUILD "/programs/"
#define BOUND_FAST 2.0       /* seconds: every fault but silence and stalls */
#define BOUND_SILENCE 12.0   /* seconds: silence and stalled sends */

/* ---- a program running through the shim, watched while it runs ---- */

typedef watched job;

/* ---- the relay ---- */

typedef struct relay relay;
struct relay {
    pid_t pid;
    int in, out;             /* its command and answer pipes */
    unsigned port;
    char err[128];           /* its stderr */
};

static void relay_line(relay *r, char *line, size_t cap)
{
    size_t have = 0;
    double until = watch_now() + 5;
    while (have + 1 < cap) {
        struct pollfd p = { r->out, POLLIN, 0 };
        cr_assert_gt(poll(&p, 1, (int)((until - watch_now()) * 1000) + 1), 0, "rig-relay did not answer");
        ssize_t n = read(r->out, line + have, 1);
        cr_assert_eq(n, 1, "rig-relay ended (see %s)", r->err);
        if (line[have] == '\n')
            break;
        have++;
    }
    line[have] = '\0';
}

static void relay_start(relay *r, const agent_proc *a)
{
    memset(r, 0, sizeof *r);
    snprintf(r->err, sizeof r->err, "%s/relay.log", a->dir);
    int in[2], out[2];
    cr_assert_eq(pipe(in), 0);
    cr_assert_eq(pipe(out), 0);
    fflush(NULL);
    r->pid = fork();
    cr_assert_geq(r->pid, 0);
    if (r->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        int e = open(r->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(e, 2);
        close(in[1]);
        close(out[0]);
        char to[64];
        snprintf(to, sizeof to, "127.0.0.1:%u", (unsigned)a->port);
        execl(RIG_RELAY, "rig-relay", "--to", to, (char *)NULL);
        _exit(127);
    }
    watch_live_add(r->pid);
    close(in[0]);
    close(out[1]);
    r->in = in[1];
    r->out = out[0];
    char line[128];
    relay_line(r, line, sizeof line);
    cr_assert_eq(sscanf(line, "listening on 127.0.0.1:%u", &r->port), 1, "rig-relay said: %s", line);
}

/* Sends one command; returns its answer, which must start with "ok". */
static void relay_cmd(relay *r, char *answer, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void relay_cmd(relay *r, char *answer, size_t cap, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    line[n++] = '\n';
    cr_assert_eq(write(r->in, line, (size_t)n), n);
    char buf[256];
    if (!answer) {
        answer = buf;
        cap = sizeof buf;
    }
    relay_line(r, answer, cap);
    cr_assert(strncmp(answer, "ok", 2) == 0, "rig-relay: %.*s -> %s", n - 1, line, answer);
}

static void relay_stop(relay *r)
{
    if (r->pid <= 0)
        return;
    close(r->in);
    for (int i = 0; i < 100 && waitpid(r->pid, NULL, WNOHANG) != r->pid; i++)
        usleep(10000);
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    close(r->out);
    r->pid = 0;
    watch_live_remove(r->pid);
}

TestSuite(faults, .fini = watch_end_all);

/* Seconds until the agent's log (from `from`) holds needle, or -1. */
static double agent_wait_log(const agent_proc *a, size_t from, const char *needle, double timeout_s)
{
    double start = watch_now();
    while (watch_now() - start < timeout_s) {
        char *s = watch_log_since(a, from);
        bool found = strstr(s, needle) != NULL;
        free(s);
        if (found)
            return watch_now() - start;
        usleep(10000);
    }
    return -1;
}

/* Seconds until the agent's log (from `from`) ends a job, or -1. */
static double agent_wait_end(const agent_proc *a, size_t from, double timeout_s)
{
    double start = watch_now();
    while (watch_now() - start < timeout_s) {
        char *s = watch_log_since(a, from);
        bool found = strstr(s, ": job failed") || strstr(s, ": job closed");
        free(s);
        if (found)
            return watch_now() - start;
        usleep(10000);
    }
    return -1;
}

/* The agent serves a new job that passes. Waits first for the job before to
 * have ended on the agent (its "job failed"/"job closed" line after from). */
static void agent_serves_next(const agent_proc *a, size_t from, const char *what)
{
    double t = agent_wait_end(a, from, 15);
    char *log = watch_log_since(a, from);
    cr_expect_geq(t, 0, "%s: the agent never ended the job:\n%s", what, log);
    free(log);
    char *argv[] = { PROGRAMS "fault_stream.static", "3", NULL };
    job j;
    watch_start(&j, argv, a->port, a->key_hex);
    watch_finish(&j, 30);
    cr_expect_eq(j.status, 0, "%s: the next job exited %d:\n%s", what, j.status, watch_tail(j.text));
    cr_expect(strstr(j.text, "fault_stream: ok 3 steps"), "%s: the next job:\n%s", what, watch_tail(j.text));
    watch_free(&j);
}

/* The first "rig: ..." line the program printed, for the table. */
static void first_rig_line(const char *text, char *out, size_t cap)
{
    const char *at = strstr(text, "rig: ");
    if (!at) {
        snprintf(out, cap, "(none)");
        return;
    }
    size_t n = strcspn(at, "\n");
    snprintf(out, cap, "%.*s", (int)n, at);
}

static void table_row(const char *fault, double detect, double exit_after, const char *message)
{
    fprintf(stderr, "fault-table: %-28s | detected %6.2f s | exited %6.2f s | %s\n", fault, detect, exit_after,
            message);
}

/* The common check after a fault injected at t_fault. */
static void expect_failed(job *j, const char *fault, double t_fault, const char *cause, double bound)
{
    char line[512];
    first_rig_line(j->text, line, sizeof line);
    double detect = j->failed_at ? j->failed_at - t_fault : -1, exit_after = j->ended - t_fault;
    table_row(fault, detect, exit_after, line);
    cr_expect_neq(j->status, -1, "%s: the program hung (killed at the test's timeout):\n%s", fault, watch_tail(j->text));
    cr_expect_neq(j->status, 0, "%s: the program exited 0:\n%s", fault, watch_tail(j->text));
    cr_expect(strstr(j->text, cause), "%s: expected \"%s\" on stderr:\n%s", fault, cause, watch_tail(j->text));
    cr_expect_leq(exit_after, bound, "%s: ended %.2f s after the fault, bound %.0f s:\n%s", fault, exit_after,
                  bound, watch_tail(j->text));
    char once[600];
    snprintf(once, sizeof once, "rig: job failed:");
    const char *first = strstr(j->text, once);
    cr_expect(!first || !strstr(first + 1, once), "%s: the root cause was printed more than once:\n%s", fault,
              j->text);
}

/* fault_stream through port, until it has done a few steps. */
static void stream_start(job *j, unsigned port, const agent_proc *a)
{
    char *argv[] = { PROGRAMS "fault_stream.static", NULL };
    watch_start(j, argv, port, a->key_hex);
    cr_assert(watch_wait_text(j, "fault_stream: step 5\n", 20), "fault_stream did not get going:\n%s", watch_tail(j->text));
}

/* ---- 1, 2: the agent killed or stopped ---- */

Test(faults, agent_killed, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    job j;
    stream_start(&j, a.port, &a);
    kill(a.pid, SIGKILL);
    double t = watch_now();
    watch_finish(&j, 20);
    expect_failed(&j, "agent killed (SIGKILL)", t, "rig: job failed: b: closed its connection", BOUND_FAST);
    watch_free(&j);
    waitpid(a.pid, NULL, 0);
    a.pid = 0;
    watch_agent_stop(&a);
}

Test(faults, agent_stopped, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    size_t from = watch_file_size(a.log);
    job j;
    stream_start(&j, a.port, &a);
    /* The whole agent: its listener and the job's worker process. */
    kill(-a.pid, SIGSTOP);
    double t = watch_now();
    watch_finish(&j, 20);
    kill(-a.pid, SIGCONT);
    expect_failed(&j, "agent stopped (SIGSTOP)", t, "rig: job failed: b: silent for 10 s", BOUND_SILENCE);
    watch_free(&j);
    agent_serves_next(&a, from, "after SIGSTOP/SIGCONT");
    watch_agent_stop(&a);
}

/* ---- 3, 4: the connection cut or stalled ---- */

typedef struct cut_case {
    char cmd[16];
    char name[40];
} cut_case;

ParameterizedTestParameters(faults, connection_cut)
{
    static cut_case cases[] = { { "cut", "connection cut (FIN)" }, { "cut rst", "connection cut (RST)" } };
    return cr_make_param_array(cut_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(cut_case *c, faults, connection_cut, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    relay r;
    relay_start(&r, &a);
    size_t from = watch_file_size(a.log);
    job j;
    stream_start(&j, r.port, &a);
    relay_cmd(&r, NULL, 0, "%s", c->cmd);
    double t = watch_now();
    watch_finish(&j, 20);
    expect_failed(&j, c->name, t, "rig: job failed: b: closed its connection", BOUND_FAST);
    watch_free(&j);
    double seen = agent_wait_end(&a, from, BOUND_FAST);
    char *log = watch_log_since(&a, from);
    cr_expect_geq(seen, 0, "the agent did not end the job within %.0f s:\n%s", BOUND_FAST, log);
    cr_expect(strstr(log, "job failed: controller: closed its connection"),
              "the agent's cause is not \"controller: closed its connection\":\n%s", log);
    free(log);
    agent_serves_next(&a, from, c->name);
    relay_stop(&r);
    watch_agent_stop(&a);
}

typedef struct stall_case {
    char dir[8];
    int mib;                 /* 0: fault_stream; else fault_bigcopy MIB DIR, stalled mid-copy */
    char name[48];
    char cause[2][96];       /* either is right */
} stall_case;

ParameterizedTestParameters(faults, direction_stalled)
{
    static stall_case cases[] = {
        /* The program hears nothing: its own silence bound. */
        { "down", 0, "stall agent->controller", { "rig: job failed: b: silent for 10 s", "" } },
        /* The agent hears nothing and aborts; or the program's send stops
         * making progress first. */
        { "up", 0, "stall controller->agent",
          { "rig: job failed: b aborted: controller: silent for 10 s", "rig: job failed: b: no progress" } },
        /* In the middle of a large frame: a send that stops progressing. */
        { "up", 64, "stall controller->agent mid-send",
          { "rig: job failed: b: no progress", "rig: job failed: b aborted: controller: silent for 10 s" } },
        { "down", 64, "stall agent->controller mid-send",
          { "rig: job failed: b: silent for 10 s", "rig: job failed: b aborted: controller: no progress" } },
    };
    return cr_make_param_array(stall_case, cases, sizeof cases / sizeof cases[0]);
}

/* fault_bigcopy MIB DIR through the relay, once its copy is under way. */
static void bigcopy_start(job *j, relay *r, const agent_proc *a, int mib, const char *dir)
{
    char mib_s[16], dir_s[8];
    snprintf(mib_s, sizeof mib_s, "%d", mib);
    snprintf(dir_s, sizeof dir_s, "%s", dir);
    char *argv[] = { PROGRAMS "fault_bigcopy.static", mib_s, dir_s, NULL };
    watch_start(j, argv, r->port, a->key_hex);
    cr_assert(watch_wait_text(j, "fault_bigcopy: copying", 20), "fault_bigcopy did not get going:\n%s", watch_tail(j->text));
}

ParameterizedTest(stall_case *c, faults, direction_stalled, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    relay r;
    relay_start(&r, &a);
    size_t from = watch_file_size(a.log);
    job j;
    if (c->mib) {
        /* Slowed first, so the copy's frame is surely still going out. */
        relay_cmd(&r, NULL, 0, "slow %s 4000000", c->dir);
        bigcopy_start(&j, &r, &a, c->mib, c->dir);
        usleep(500 * 1000);
    } else {
        stream_start(&j, r.port, &a);
    }
    relay_cmd(&r, NULL, 0, "stall %s", c->dir);
    double t = watch_now();
    watch_finish(&j, 20);
    const char *cause = strstr(j.text, c->cause[0]) || !c->cause[1][0] ? c->cause[0] : c->cause[1];
    expect_failed(&j, c->name, t, cause, BOUND_SILENCE);
    watch_free(&j);
    /* Let what is held move again, so the agent sees the program's end. */
    relay_cmd(&r, NULL, 0, "pass");
    agent_serves_next(&a, from, c->name);
    relay_stop(&r);
    watch_agent_stop(&a);
}

/* A slow link is not a stalled one: a frame that takes longer than the stall
 * bound to cross, but never stops moving, must not fail the job. 32 MiB at
 * 2 MB/s takes 16 s; the sender's socket holds at most 4 MiB of it. */
ParameterizedTestParameters(faults, slow_link_keeps_the_job)
{
    static char dirs[][8] = { "up", "down" };
    return cr_make_param_array(char[8], dirs, sizeof dirs / sizeof dirs[0]);
}

ParameterizedTest(char (*dir)[8], faults, slow_link_keeps_the_job, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    relay r;
    relay_start(&r, &a);
    relay_cmd(&r, NULL, 0, "slow %s 2000000", *dir);
    job j;
    bigcopy_start(&j, &r, &a, 32, *dir);
    double t = watch_now();
    watch_finish(&j, 40);
    char line[512], name[48];
    first_rig_line(j.text, line, sizeof line);
    snprintf(name, sizeof name, "slow link %s (2 MB/s, 32 MiB)", *dir);
    table_row(name, j.failed_at ? j.failed_at - t : -1, j.ended - t, line);
    cr_expect_eq(j.status, 0, "%s: a copy that kept moving failed the job:\n%s", name, watch_tail(j.text));
    cr_expect(strstr(j.text, "fault_bigcopy: ok"), "%s:\n%s", name, watch_tail(j.text));
    watch_free(&j);
    relay_stop(&r);
    watch_agent_stop(&a);
}

/* Waits in progress when the connection is cut: five threads in stream
 * syncs and host-function waits, or a submit held back by the link. */
typedef struct waits_case {
    char mode[8];
    char ready[32];          /* what the program prints once it waits */
    char slow[32];           /* a relay command first, or "" */
    char name[48];
} waits_case;

ParameterizedTestParameters(faults, waits_return_on_cut)
{
    static waits_case cases[] = {
        { "threads", "fault_waits: all running", "", "cut: five threads waiting" },
        { "flood", "fault_waits: flooding", "slow up 4000000", "cut: a submit held back" },
    };
    return cr_make_param_array(waits_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(waits_case *c, faults, waits_return_on_cut, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    relay r;
    relay_start(&r, &a);
    size_t from = watch_file_size(a.log);
    if (c->slow[0])
        relay_cmd(&r, NULL, 0, "%s", c->slow);
    char *argv[] = { PROGRAMS "fault_waits.static", c->mode, NULL };
    job j;
    watch_start(&j, argv, r.port, a.key_hex);
    cr_assert(watch_wait_text(&j, c->ready, 20), "%s:\n%s", c->name, watch_tail(j.text));
    usleep(300 * 1000);
    relay_cmd(&r, NULL, 0, "cut");
    double t = watch_now();
    watch_finish(&j, 20);
    expect_failed(&j, c->name, t, "rig: job failed: b: closed its connection", BOUND_FAST);
    if (strcmp(c->mode, "threads") == 0)
        for (int i = 0; i < 5; i++) {
            char want[64];
            snprintf(want, sizeof want, "fault_waits: thread %d: cudaError", i);
            cr_expect(strstr(j.text, want), "%s: thread %d did not return an error:\n%s", c->name, i, watch_tail(j.text));
        }
    watch_free(&j);
    relay_cmd(&r, NULL, 0, "pass");
    agent_serves_next(&a, from, c->name);
    relay_stop(&r);
    watch_agent_stop(&a);
}

/* ---- 5: a flipped byte ---- */

typedef struct flip_case {
    char name[48];
    char cmd[48];            /* the relay's flip command */
    char cause[96];
} flip_case;

ParameterizedTestParameters(faults, byte_flipped)
{
    static flip_case cases[] = {
        /* Headers: kind byte, length beyond 2^62-1, length off by one. */
        { "flip up header: kind", "flip up header 8 0xff 3",
          "rig: job failed: b aborted: controller: frame of unknown kind 252" },
        { "flip down header: kind", "flip down header 8 0xff 5", "rig: job failed: b: frame of unknown kind 250" },
        { "flip up header: length bit 62", "flip up header 7 0x40 3", "rig: job failed: b aborted: controller: " },
        { "flip down header: length bit 62", "flip down header 7 0x40 5", "rig: job failed: b: " },
        { "flip up header: length bit 0", "flip up header 0 0x01 3", "rig: job failed: b aborted: controller: " },
        /* Payloads: the stream a handover or a word names, made one the job
         * does not hold (bit 61), or a u64 above 2^62-1 (bit 62). */
        { "flip up payload: handover stream", "flip up payload 15 0x20 3",
          "rig: job failed: b aborted: controller: " },
        { "flip up payload: handover stream bit 62", "flip up payload 15 0x40 3",
          "rig: job failed: b aborted: controller: malformed handover" },
        { "flip down payload: word stream", "flip down payload 7 0x20 5",
          "rig: job failed: b: a word names stream 2305843009213693" },
        { "flip down payload: word stream bit 62", "flip down payload 7 0x40 5", "rig: job failed: b: " },
        /* The low bit of a word's stream: names another of the job's
         * objects, which may be a stream too. */
        { "flip down payload: word stream bit 0", "flip down payload 0 0x01 5", "rig: job failed: b" },
    };
    return cr_make_param_array(flip_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(flip_case *c, faults, byte_flipped, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    relay r;
    relay_start(&r, &a);
    size_t from = watch_file_size(a.log);
    job j;
    stream_start(&j, r.port, &a);
    relay_cmd(&r, NULL, 0, "%s", c->cmd);
    double t = watch_now();
    watch_finish(&j, BOUND_FAST + 2);
    char stats[256];
    relay_cmd(&r, stats, sizeof stats, "stats");
    cr_expect(strstr(stats, "flips 1"), "%s: the relay did not flip: %s", c->name, stats);
    expect_failed(&j, c->name, t, c->cause, BOUND_FAST);
    watch_free(&j);
    relay_cmd(&r, NULL, 0, "cut");
    agent_serves_next(&a, from, c->name);
    relay_stop(&r);
    watch_agent_stop(&a);
}

/* ---- 6: a kernel that writes out of bounds ---- */

Test(faults, kernel_out_of_bounds, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    size_t from = watch_file_size(a.log);
    char *argv[] = { PROGRAMS "fault_oob.static", NULL };
    job j;
    watch_start(&j, argv, a.port, a.key_hex);
    cr_assert(watch_wait_text(&j, "fault_oob: launching", 20), "%s", watch_tail(j.text));
    double t = watch_now();
    watch_finish(&j, 20);
    expect_failed(&j, "kernel writes out of bounds", t,
                  "rig: job failed: b aborted: CUDA:0: CUDA_ERROR_ILLEGAL_ADDRESS in kernel fault_oob_write",
                  BOUND_FAST);
    cr_expect(strstr(j.text, "cudaErrorIllegalAddress"), "the program's error is not the kernel's:\n%s", watch_tail(j.text));
    watch_free(&j);
    agent_serves_next(&a, from, "out of bounds");
    watch_agent_stop(&a);
}

/* ---- 6b: managed memory when the job fails, and faults not the shim's ---- */

Test(faults, managed_memory_after_a_failed_job, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    size_t from = watch_file_size(a.log);
    char *argv[] = { PROGRAMS "fault_managed.static", NULL };
    job j;
    watch_start(&j, argv, a.port, a.key_hex);
    watch_finish(&j, 30);
    cr_expect_eq(j.status, 0, "fault_managed exited %d:\n%s", j.status, watch_tail(j.text));
    cr_expect(strstr(j.text, "rig: job failed: b aborted: CUDA:0: CUDA_ERROR_ILLEGAL_ADDRESS"), "%s",
              watch_tail(j.text));
    cr_expect(strstr(j.text, "fault_managed: ok"), "touching managed memory after the failure did not return:\n%s",
              watch_tail(j.text));
    watch_free(&j);
    agent_serves_next(&a, from, "managed memory after a failed job");
    watch_agent_stop(&a);
}

Test(faults, a_fault_outside_managed_memory_still_kills, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    char *argv[] = { PROGRAMS "fault_managed.static", "segv", NULL };
    job j;
    watch_start(&j, argv, a.port, a.key_hex);
    watch_finish(&j, 30);
    cr_expect(strstr(j.text, "fault_managed: writing through NULL"), "%s", watch_tail(j.text));
    cr_expect(!strstr(j.text, "returned"), "%s", watch_tail(j.text));
    /* Plainly SIGSEGV; under ASan its report and exit code. */
    cr_expect(j.status == 128 + SIGSEGV || (j.status > 0 && strstr(j.text, "AddressSanitizer: SEGV")),
              "fault_managed segv exited %d:\n%s", j.status, watch_tail(j.text));
    watch_free(&j);
    watch_agent_stop(&a);
}

/* ---- 7: the program killed mid-job ---- */

Test(faults, program_killed, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    size_t from = watch_file_size(a.log);
    job j;
    stream_start(&j, a.port, &a);
    kill(j.pid, SIGKILL);
    double t = watch_now();
    watch_finish(&j, 10);
    double seen = agent_wait_end(&a, from, 15);
    double took = seen < 0 ? -1 : watch_now() - t;
    char *log = watch_log_since(&a, from);
    const char *end = strstr(log, ": job failed");
    char line[256];
    snprintf(line, sizeof line, "agent%.*s", end ? (int)strcspn(end, "\n") : 0, end ? end : "");
    table_row("program killed (SIGKILL)", took, j.ended - t, line);
    cr_expect_geq(seen, 0, "the agent did not end the job:\n%s", log);
    cr_expect(strstr(log, "job failed: controller: closed its connection"),
              "the agent's cause is not \"controller: closed its connection\":\n%s", log);
    cr_expect_leq(took, BOUND_FAST, "the agent took %.2f s:\n%s", took, log);
    free(log);
    watch_free(&j);
    agent_serves_next(&a, from, "program killed");
    watch_agent_stop(&a);
}

/* ---- 8: a wrong key ---- */

Test(faults, wrong_key, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    char wrong[65];
    memset(wrong, 'a', 64);
    wrong[64] = '\0';
    char *argv[] = { PROGRAMS "fault_stream.static", "3", NULL };
    job j;
    double t = watch_now();
    watch_start(&j, argv, a.port, wrong);
    watch_finish(&j, 20);
    char line[512];
    first_rig_line(j.text, line, sizeof line);
    table_row("wrong key", j.ended - t, j.ended - t, line);
    cr_expect_neq(j.status, 0, "%s", watch_tail(j.text));
    cr_expect_neq(j.status, -1, "%s", watch_tail(j.text));
    cr_expect(strstr(j.text, "rig: agent b: refused: wrong key"), "%s", watch_tail(j.text));
    cr_expect_leq(j.ended - t, BOUND_FAST, "%s", watch_tail(j.text));
    watch_free(&j);
    char *argv2[] = { PROGRAMS "fault_stream.static", "3", NULL };
    watch_start(&j, argv2, a.port, a.key_hex);
    watch_finish(&j, 30);
    cr_expect_eq(j.status, 0, "the next job after a wrong key:\n%s", watch_tail(j.text));
    watch_free(&j);
    watch_agent_stop(&a);
}

/* ---- 9: a second controller ---- */

Test(faults, second_controller, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    size_t from = watch_file_size(a.log);
    char *first_argv[] = { PROGRAMS "fault_stream.static", "60", "4096", "50", NULL };
    job first;
    watch_start(&first, first_argv, a.port, a.key_hex);
    cr_assert(watch_wait_text(&first, "fault_stream: step 3\n", 20), "%s", watch_tail(first.text));
    char *argv[] = { PROGRAMS "fault_stream.static", "3", NULL };
    job second;
    double t = watch_now();
    watch_start(&second, argv, a.port, a.key_hex);
    watch_finish(&second, 20);
    char line[512];
    first_rig_line(second.text, line, sizeof line);
    table_row("second controller", second.ended - t, second.ended - t, line);
    cr_expect_neq(second.status, 0, "%s", watch_tail(second.text));
    cr_expect_neq(second.status, -1, "%s", watch_tail(second.text));
    cr_expect(strstr(second.text, "rig: agent b: refused: busy: serving a job from 127.0.0.1:"), "%s",
              second.text);
    cr_expect_leq(second.ended - t, BOUND_FAST, "%s", watch_tail(second.text));
    watch_free(&second);
    /* The first goes on to its end, which the agent sees as closed. */
    watch_finish(&first, 40);
    cr_expect_eq(first.status, 0, "the running job was hurt:\n%s", watch_tail(first.text));
    cr_expect(strstr(first.text, "fault_stream: ok 60 steps"), "%s", watch_tail(first.text));
    watch_free(&first);
    cr_expect_geq(agent_wait_log(&a, from, "job closed", 5), 0, "an orderly exit is not a closed job");
    agent_serves_next(&a, from, "second controller");
    watch_agent_stop(&a);
}

/* ---- 10: a fork in the program ---- */

Test(faults, fork_in_program, .timeout = 60)
{
    agent_proc a;
    watch_agent_start(&a);
    size_t from = watch_file_size(a.log);
    char *argv[] = { PROGRAMS "fault_fork.static", NULL };
    job j;
    watch_start(&j, argv, a.port, a.key_hex);
    watch_finish(&j, 20);
    char line[512];
    first_rig_line(j.text, line, sizeof line);
    table_row("fork (child uses device)", j.failed_at ? j.failed_at - j.started : -1, j.ended - j.started, line);
    cr_expect(strstr(j.text, "rig: job failed: b: this process is a fork of the job's program"), "%s", watch_tail(j.text));
    cr_expect(strstr(j.text, "fault_fork: child: "), "the child's use did not fail:\n%s", watch_tail(j.text));
    cr_expect(!strstr(j.text, "fault_fork: child exited 0"), "%s", watch_tail(j.text));
    cr_expect_eq(j.status, 0, "the parent did not go on:\n%s", watch_tail(j.text));
    cr_expect(strstr(j.text, "fault_fork: ok parent went on"), "%s", watch_tail(j.text));
    watch_free(&j);
    cr_expect_geq(agent_wait_log(&a, from, "job closed", 5), 0, "the parent's job did not close in order");
    agent_serves_next(&a, from, "fork");
    watch_agent_stop(&a);
}

/* ---- many failed jobs: the agent's memory ---- */

/* One failed job of kind k: a kernel fault, a cut mid-stream, the program
 * killed mid-stream, a flipped header mid-stream. */
static void fail_one(agent_proc *a, relay *r, int k)
{
    job j;
    size_t from = watch_file_size(a->log);
    if (k == 0) {
        char *argv[] = { PROGRAMS "fault_oob.static", "1", NULL };
        watch_start(&j, argv, a->port, a->key_hex);
        watch_finish(&j, 20);
    } else {
        char *argv[] = { PROGRAMS "fault_stream.static", NULL };
        watch_start(&j, argv, k == 2 ? a->port : r->port, a->key_hex);
        cr_assert(watch_wait_text(&j, "fault_stream: step 1\n", 20), "%s", watch_tail(j.text));
        if (k == 1)
            relay_cmd(r, NULL, 0, "cut");
        else if (k == 2)
            kill(j.pid, SIGKILL);
        else
            relay_cmd(r, NULL, 0, "flip up header 8 0xff 3");
        watch_finish(&j, 20);
    }
    cr_assert(j.status != 0 && j.status != -1, "failed job of kind %d exited %d:\n%s", k, j.status, watch_tail(j.text));
    watch_free(&j);
    double t = agent_wait_end(a, from, 15);
    cr_assert_geq(t, 0, "the agent did not end a failed job of kind %d", k);
}

/* Under SAN=1 the agent is sanitized: ASan keeps freed memory in quarantine
 * (up to 256 MiB) by design, so its resident size says nothing about leaks
 * (LeakSanitizer does), and each job is slower. */
#ifdef __SANITIZE_ADDRESS__
#define FAILED_JOBS 20
#else
#define FAILED_JOBS 100
#endif

Test(faults, hundred_failed_jobs_leave_memory_as_it_was, .timeout = 150)
{
    agent_proc a;
    watch_agent_start(&a);
    relay r;
    relay_start(&r, &a);
    long fresh = support_proc_status(a.pid, "VmRSS");
    /* Warm up: three jobs of each kind, so lazily made driver state and the
     * allocator's arenas count as where it started. */
    for (int i = 0; i < 12; i++)
        fail_one(&a, &r, i % 4);
    long before = support_proc_status(a.pid, "VmRSS");
    double t = watch_now();
    for (int i = 0; i < FAILED_JOBS; i++)
        fail_one(&a, &r, i % 4);
    long after = support_proc_status(a.pid, "VmRSS");
    fprintf(stderr,
            "fault-table: %d failed jobs in %.1f s: agent RSS %ld kB -> %ld kB (%+.1f%%); %ld kB before any job\n",
            FAILED_JOBS, watch_now() - t, before, after, 100.0 * (double)(after - before) / (double)before, fresh);
#ifndef __SANITIZE_ADDRESS__
    cr_expect_leq(after, before + before / 10, "agent RSS grew from %ld kB to %ld kB over %d failed jobs", before,
                  after, FAILED_JOBS);
#endif
    agent_serves_next(&a, 0, "after 100 failed jobs");
    relay_stop(&r);
    watch_agent_stop(&a);
}

/* Most of these tests wait on timers, not CPUs: run four at a time unless
 * told otherwise (-j). */
__attribute__((visibility("default"))) int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    criterion_options.jobs = 4;
    int result = 0;
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result;
}

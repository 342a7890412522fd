/* The end-to-end harness; see harness.h. */
#include "tests/harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

pid_t child_spawn(const char *path, char *const argv[], char *const env_add[], int in_fd, int out_fd, int err_fd)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* A group of its own, like a shell's job: a timeout, an interrupt
         * or a stop reaches its children too; and it dies with the test
         * process, however that ends. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (in_fd >= 0)
            dup2(in_fd, 0);
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        /* Criterion marks its workers; a program that is itself a Criterion
         * runner must not take that mark for its own. */
        unsetenv("BXFI_MAP");
        /* The programs draw their data from SEED (and print it): the
         * suite's RIG_TEST_SEED repeats their runs too. */
        const char *seed = getenv("RIG_TEST_SEED");
        if (seed && *seed)
            setenv("SEED", seed, 1);
        for (size_t i = 0; env_add && env_add[i]; i++) {
            if (strchr(env_add[i], '='))
                putenv(env_add[i]);
            else
                unsetenv(env_add[i]);
        }
        execv(path, argv);
        fprintf(stderr, "cannot run %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

/* Agents started and not yet stopped: an assertion that ends a test early
 * skips its agent_stop, so the test process stops them as it exits. */
#define LIVE_AGENTS_MAX 64
static struct { pid_t pid; char dir[64]; } live_agents[LIVE_AGENTS_MAX];

static void stop_live_agents(void)
{
    for (int i = 0; i < LIVE_AGENTS_MAX; i++) {
        if (live_agents[i].pid > 0) {
            kill(-live_agents[i].pid, SIGKILL);
            waitpid(live_agents[i].pid, NULL, 0);
        }
        if (live_agents[i].dir[0]) {
            char cmd[128];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", live_agents[i].dir);
            if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", live_agents[i].dir);
        }
        live_agents[i].pid = 0;
        live_agents[i].dir[0] = '\0';
    }
}

static void live_agent_add(const agent_proc *a)
{
    static bool registered;
    if (!registered)
        registered = atexit(stop_live_agents) == 0;
    for (int i = 0; i < LIVE_AGENTS_MAX; i++)
        if (live_agents[i].pid <= 0 && !live_agents[i].dir[0]) {
            live_agents[i].pid = a->pid;
            snprintf(live_agents[i].dir, sizeof live_agents[i].dir, "%s", a->dir);
            return;
        }
}

static void live_agent_remove(const agent_proc *a)
{
    for (int i = 0; i < LIVE_AGENTS_MAX; i++)
        if (live_agents[i].pid == a->pid && strcmp(live_agents[i].dir, a->dir) == 0) {
            live_agents[i].pid = 0;
            live_agents[i].dir[0] = '\0';
        }
}

void agent_start(agent_proc *a, const agent_proc *same_key, const char *extra_args)
{
    agent_start_at(a, same_key, extra_args, NULL, "127.0.0.1");
}

void agent_start_at(agent_proc *a, const agent_proc *same_key, const char *extra_args, const char *netns,
                    const char *host)
{
    memset(a, 0, sizeof *a);
    snprintf(a->host, sizeof a->host, "%s", host);
    snprintf(a->dir, sizeof a->dir, "/tmp/rig-e2e-XXXXXX");
    cr_assert_not_null(mkdtemp(a->dir));
    snprintf(a->key_file, sizeof a->key_file, "%s/key", a->dir);
    snprintf(a->log, sizeof a->log, "%s/agent.log", a->dir);
    uint8_t key[32];
    int rnd = open(same_key ? same_key->key_file : "/dev/urandom", O_RDONLY);
    cr_assert_eq(read(rnd, key, sizeof key), (ssize_t)sizeof key);
    close(rnd);
    int kf = open(a->key_file, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(kf, 0);
    cr_assert_eq(write(kf, key, sizeof key), (ssize_t)sizeof key);
    close(kf);
    for (int i = 0; i < 32; i++)
        snprintf(a->key_hex + 2 * i, 3, "%02x", key[i]);

    int out[2];
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    int log = open(a->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(log, 0);
    char cmd[1024];
    char in_ns[64] = "";
    if (netns)
        snprintf(in_ns, sizeof in_ns, "ip netns exec %s ", netns);
    snprintf(cmd, sizeof cmd, "exec %s%s/rig-agent --listen %s:0 --key-file %s %s", in_ns, SHIM_BUILD, host,
             a->key_file, extra_args ? extra_args : "");
    /* Its group holds the listener and its job's worker, so a test stops
     * the agent as a whole (kill(-pid, ...)); stdout says where it listens. */
    char *argv[] = { "sh", "-c", cmd, NULL };
    a->pid = child_spawn("/bin/sh", argv, NULL, -1, out[1], log);
    close(log);
    close(out[1]);
    live_agent_add(a);
    /* Two lines: the driver, then "listening on 127.0.0.1:PORT". */
    char buf[512] = "";
    size_t have = 0;
    double until = now_s() + 20;
    while (!strstr(buf, "listening on") || !strchr(strstr(buf, "listening on"), '\n')) {
        struct pollfd p = { out[0], POLLIN, 0 };
        int left = (int)((until - now_s()) * 1000);
        cr_assert_gt(left, 0, "rig-agent did not say where it listens (log %s)", a->log);
        if (poll(&p, 1, left) <= 0)
            continue;
        ssize_t n = read(out[0], buf + have, sizeof buf - 1 - have);
        cr_assert_gt(n, 0, "rig-agent exited before listening: see %s", a->log);
        have += (size_t)n;
        buf[have] = '\0';
    }
    close(out[0]);
    unsigned port = 0;
    char said[64];
    snprintf(said, sizeof said, "listening on %s:%%u", host);
    cr_assert_eq(sscanf(strstr(buf, "listening on"), said, &port), 1, "%s", buf);
    a->port = (uint16_t)port;
}

void agent_stop(agent_proc *a)
{
    live_agent_remove(a);
    if (a->pid > 0) {
        kill(a->pid, SIGTERM);
        for (int i = 0; i < 200; i++) {
            if (waitpid(a->pid, NULL, WNOHANG) == a->pid) {
                a->pid = 0;
                break;
            }
            usleep(10000);
        }
        if (a->pid > 0) {
            kill(a->pid, SIGKILL);
            waitpid(a->pid, NULL, 0);
        }
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", a->dir);
    if (a->dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", a->dir);
}

void agents_env(const agent_proc *agents, int n, char *out, size_t cap)
{
    size_t off = (size_t)snprintf(out, cap, "RIG_REMOTE_AGENTS=");
    for (int i = 0; i < n && off < cap; i++)
        off += (size_t)snprintf(out + off, cap - off, "%s%c=%s:%u", i ? "," : "", 'b' + i,
                                agents[i].host[0] ? agents[i].host : "127.0.0.1", (unsigned)agents[i].port);
}

void shim_env(char *preload, size_t cap)
{
    snprintf(preload, cap, "LD_PRELOAD=" SHIM_PRELOAD);
}

program_result program_run(char *const argv[], char *const env_add[], int timeout_s)
{
    return program_run_until(argv[0], argv, env_add, timeout_s, NULL);
}

program_result program_run_until(const char *path, char *const argv[], char *const env_add[], int timeout_s,
                                 const char *interrupt_when)
{
    program_result r = { .status = -1 };
    int out[2];
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    /* Programs are not ours: their leaks are not findings (env_add may
     * say otherwise: it comes after). */
    char *env[128] = { "ASAN_OPTIONS=detect_leaks=0" };
    size_t n = 1;
    for (size_t i = 0; env_add && env_add[i]; i++) {
        cr_assert_lt(n, sizeof env / sizeof env[0] - 1, "too many variables for %s", path);
        env[n++] = env_add[i];
    }
    double start = now_s();
    pid_t pid = child_spawn(path, argv, env, -1, out[1], out[1]);
    close(out[1]);
    size_t cap = 1 << 16, have = 0;
    r.output = malloc(cap);
    cr_assert_not_null(r.output);
    bool timed_out = false, interrupted = false;
    for (;;) {
        if (interrupt_when && !interrupted && access(interrupt_when, F_OK) == 0) {
            usleep(100000);
            kill(-pid, SIGINT);   /* what Ctrl-C does */
            interrupted = true;
        }
        int left = (int)((start + timeout_s - now_s()) * 1000);
        if (left <= 0) {
            timed_out = true;
            kill(-pid, SIGKILL);
            break;
        }
        struct pollfd p = { out[0], POLLIN, 0 };
        int wait_ms = interrupt_when && !interrupted && left > 50 ? 50 : left;
        if (poll(&p, 1, wait_ms) <= 0)
            continue;
        if (have + 4096 > cap) {
            char *more = realloc(r.output, cap * 2);
            if (!more) {
                kill(-pid, SIGKILL);
                waitpid(pid, NULL, 0);
                close(out[0]);
                free(r.output);
                cr_assert_fail("no memory for %zu bytes of %s's output", cap * 2, path);
            }
            r.output = more;
            cap *= 2;
        }
        ssize_t n = read(out[0], r.output + have, cap - have - 1);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    r.output[have] = '\0';
    r.len = have;
    close(out[0]);
    int status;
    waitpid(pid, &status, 0);
    r.seconds = now_s() - start;
    if (timed_out)
        r.status = -1;
    else
        r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

void program_result_free(program_result *r)
{
    free(r->output);
    r->output = NULL;
}

/* Processes a test starts and watches (see watch.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/watch.h"

#define LIVE_MAX 16

static pid_t live_pids[LIVE_MAX];
static struct {
    pid_t pid;
    char dir[64];
} live_agents[4];

double watch_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void watch_live_add(pid_t pid)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (live_pids[i] == 0) {
            live_pids[i] = pid;
            return;
        }
    cr_assert_fail("more than %d processes at once", LIVE_MAX);
}

void watch_live_remove(pid_t pid)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (live_pids[i] == pid)
            live_pids[i] = 0;
}

void watch_end_all(void)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (live_pids[i] > 0) {
            kill(-live_pids[i], SIGKILL);
            kill(live_pids[i], SIGKILL);
            waitpid(live_pids[i], NULL, 0);
            live_pids[i] = 0;
        }
    for (size_t i = 0; i < sizeof live_agents / sizeof live_agents[0]; i++)
        if (live_agents[i].pid > 0) {
            kill(live_agents[i].pid, SIGKILL);
            waitpid(live_agents[i].pid, NULL, 0);
            live_agents[i].pid = 0;
            char cmd[128];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", live_agents[i].dir);
            if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", live_agents[i].dir);
        }
}

void watch_agent_start(agent_proc *a)
{
    agent_start(a, NULL, NULL);
    for (size_t i = 0; i < sizeof live_agents / sizeof live_agents[0]; i++)
        if (!live_agents[i].pid) {
            live_agents[i].pid = a->pid;
            snprintf(live_agents[i].dir, sizeof live_agents[i].dir, "%s", a->dir);
            return;
        }
}

/* Stops it once: a second call never signals a pid that may be reused. */
void watch_agent_stop(agent_proc *a)
{
    for (size_t i = 0; i < sizeof live_agents / sizeof live_agents[0]; i++)
        if (live_agents[i].pid && strcmp(live_agents[i].dir, a->dir) == 0)
            live_agents[i].pid = 0;
    if (a->pid > 0 || a->dir[0])
        agent_stop(a);
    a->pid = 0;
    a->dir[0] = '\0';
}

void watch_start(watched *p, char *const argv[], unsigned agents_port, const char *key_hex)
{
    memset(p, 0, sizeof *p);
    char preload[300], agents[96], key[96];
    char *env[8] = { NULL };
    if (agents_port) {
        shim_env(preload, sizeof preload);
        snprintf(agents, sizeof agents, "RIG_REMOTE_AGENTS=b=127.0.0.1:%u", agents_port);
        snprintf(key, sizeof key, "RIG_REMOTE_KEY=%s", key_hex);
        char *e[] = { preload, agents, key, "RIG_LOCAL_DRIVER=none", "ASAN_OPTIONS=detect_leaks=0", NULL };
        memcpy(env, e, sizeof e);
    }
    int o[2], i[2];
    cr_assert_eq(pipe2(o, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(i, O_CLOEXEC), 0);
    p->started = watch_now();
    p->pid = child_spawn(argv[0], argv, env, i[0], o[1], o[1]);
    watch_live_add(p->pid);
    close(o[1]);
    close(i[0]);
    p->out = o[0];
    p->in = i[1];
    p->cap = 1 << 16;
    p->text = calloc(1, p->cap);
    cr_assert_not_null(p->text);
}

void watch_read(watched *p, double until)
{
    while (!p->eof) {
        int left = (int)((until - watch_now()) * 1000);
        if (left < 0)
            return;
        struct pollfd pf = { p->out, POLLIN, 0 };
        if (poll(&pf, 1, left) <= 0)
            return;
        if (p->len + 4096 > p->cap)
            p->text = realloc(p->text, p->cap *= 2);
        ssize_t n = read(p->out, p->text + p->len, p->cap - p->len - 1);
        if (n <= 0) {
            p->eof = true;
            break;
        }
        p->len += (size_t)n;
        p->text[p->len] = '\0';
        if (!p->failed_at && strstr(p->text, "rig: job failed"))
            p->failed_at = watch_now();
    }
}

bool watch_wait_text(watched *p, const char *needle, double timeout_s)
{
    double until = watch_now() + timeout_s;
    while (!strstr(p->text, needle) && !p->eof && watch_now() < until)
        watch_read(p, watch_now() + 0.05 < until ? watch_now() + 0.05 : until);
    return strstr(p->text, needle) != NULL;
}

void watch_finish(watched *p, double timeout_s)
{
    double until = watch_now() + timeout_s;
    if (p->in >= 0)
        close(p->in);
    p->in = -1;
    watch_read(p, until);
    int st;
    pid_t got = 0;
    while ((got = waitpid(p->pid, &st, WNOHANG)) == 0 && watch_now() < until)
        usleep(5000);
    if (got != p->pid) {
        kill(-p->pid, SIGKILL);
        waitpid(p->pid, &st, 0);
        p->status = -1;
    } else {
        p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    watch_live_remove(p->pid);
    p->ended = watch_now();
    if (!p->eof)
        watch_read(p, watch_now() + 0.5);
    close(p->out);
}

void watch_free(watched *p)
{
    free(p->text);
    p->text = NULL;
}

const char *watch_tail(const char *text)
{
    size_t n = strlen(text);
    return n > 3000 ? text + n - 3000 : text;
}

size_t watch_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

char *watch_log_since(const agent_proc *a, size_t from)
{
    FILE *f = fopen(a->log, "r");
    char *s = calloc(1, 1);
    if (!f)
        return s;
    fseek(f, (long)from, SEEK_SET);
    size_t cap = 1, len = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        if (len + 2 > cap)
            s = realloc(s, cap = cap * 2 + 64);
        s[len++] = (char)c;
    }
    s[len] = '\0';
    fclose(f);
    return s;
}

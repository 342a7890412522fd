/* Child processes with piped standard streams; see child.h. */
#include "launcher/child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long child_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int child_spawn(child *c, const char *const argv[], rig_why *why)
{
    c->pid = 0;
    c->in = c->out = c->err = -1;
    int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
    int report[2] = { -1, -1 };   /* exec failure: errno */
    for (int i = 0; i < 3; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0)
            goto fail;
    if (pipe2(report, O_CLOEXEC) < 0)
        goto fail;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        goto fail;
    if (pid == 0) {
        setpgid(0, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int s = 1; s < NSIG; s++)
            signal(s, SIG_DFL);
        if (dup2(p[0][0], 0) < 0 || dup2(p[1][1], 1) < 0 || dup2(p[2][1], 2) < 0)
            _exit(127);
        execvp(argv[0], (char *const *)argv);
        int e = errno;
        ssize_t w = write(report[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(report[1]);
    int e = 0;
    ssize_t r;
    do
        r = read(report[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(report[0]);
    close(p[0][0]);
    close(p[1][1]);
    close(p[2][1]);
    if (r == (ssize_t)sizeof e) {
        close(p[0][1]);
        close(p[1][0]);
        close(p[2][0]);
        waitpid(pid, NULL, 0);
        return why_set(why, RIG_E_IO, "cannot run %s: %s", argv[0], strerror(e));
    }
    c->pid = pid;
    c->in = p[0][1];
    c->out = p[1][0];
    c->err = p[2][0];
    return 0;
fail:;
    int saved = errno;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            if (p[i][j] >= 0)
                close(p[i][j]);
    if (report[0] >= 0) {
        close(report[0]);
        close(report[1]);
    }
    return why_set(why, RIG_E_IO, "cannot start %s: %s", argv[0], strerror(saved));
}

void child_close_fds(child *c)
{
    int *fds[] = { &c->in, &c->out, &c->err };
    for (int i = 0; i < 3; i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

/* Reaps c if it has exited; true when it is gone. */
static bool reap(child *c)
{
    if (c->pid <= 0)
        return true;
    int st;
    pid_t r = waitpid(c->pid, &st, WNOHANG);
    if (r == c->pid || (r < 0 && errno == ECHILD)) {
        c->status = r == c->pid ? st : 0;
        c->pid = 0;
        return true;
    }
    return false;
}

/* Waits up to ms for c to exit, reading and dropping its output meanwhile
 * so that it never blocks on a full pipe. */
static bool wait_for(child *c, int ms)
{
    long long until = child_now_ms() + ms;
    while (!reap(c)) {
        long long left = until - child_now_ms();
        if (left <= 0)
            return false;
        struct pollfd p[2] = { { c->out, POLLIN, 0 }, { c->err, POLLIN, 0 } };
        poll(p, 2, left < 20 ? (int)left : 20);
        for (int i = 0; i < 2; i++)
            if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP))) {
                char buf[4096];
                if (read(p[i].fd, buf, sizeof buf) <= 0) {
                    close(p[i].fd);
                    *(i ? &c->err : &c->out) = -1;
                }
            }
    }
    return true;
}

void child_stop(child *c, int grace_ms)
{
    if (c->in >= 0) {
        close(c->in);
        c->in = -1;
    }
    if (c->pid > 0 && !wait_for(c, grace_ms)) {
        kill(-c->pid, SIGTERM);
        kill(c->pid, SIGTERM);
        if (!wait_for(c, 1000)) {
            kill(-c->pid, SIGKILL);
            kill(c->pid, SIGKILL);
            int st;
            if (waitpid(c->pid, &st, 0) == c->pid)
                c->status = st;
            c->pid = 0;
        }
    }
    child_close_fds(c);
}

const char *child_status_text(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, cap, "ended (wait status %#x)", status);
    return buf;
}

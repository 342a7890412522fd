/* One job in a process of its own: a child of the spawner (spawner.c) that
 * opens the driver, serves the proven controller, and exits when the job
 * ends. Its exit is what frees the job's driver state (on a GPU the kernel
 * driver reclaims a context only when its process goes), so no job can
 * leave the agent wedged behind a kernel that never ends. It dies with the
 * spawner, which dies with the listener. */
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "agent/job.h"
#include "proto/deadline.h"
#include "proto/job.h"

static void status_line(int fd, const char *line)
{
    size_t n = strlen(line);
    if (write(fd, line, n) < 0)
        return;
}

static void tell_ending(void *ctx)
{
    status_line(*(int *)ctx, "ending\n");
}

/* The job's last word to the listener, escaped (a cause may carry a
 * controller's text); then the process ends, under threads that may still
 * wait on the driver, which exit handlers would wait for. */
static void tell_ended(void *ctx, const char *ended)
{
    char line[4 * 1200 + 16];
    size_t n = (size_t)snprintf(line, sizeof line, "ended ");
    n += agent_escape(line + n, sizeof line - n - 1, ended, strlen(ended));
    line[n++] = '\n';
    line[n] = '\0';
    status_line(*(int *)ctx, line);
    _exit(0);
}

/* Keeps fds 0-2, the connection and the status pipe (moved to 3 and 4):
 * the listener's other connections and its listening socket are not the
 * job's, and a stranger's connection must not stay open in here. */
static void keep_only(int *fd, int *status_fd)
{
    int a = fcntl(*fd, F_DUPFD_CLOEXEC, 10), s = fcntl(*status_fd, F_DUPFD_CLOEXEC, 10);
    if (a < 0 || s < 0 || dup2(a, 3) < 0 || dup2(s, 4) < 0)
        _exit(70);
    *fd = 3;
    *status_fd = 4;
    if (close_range(5, ~0u, 0) < 0)
        for (int i = 5; i < 65536; i++)
            close(i);
}

void worker_main(const worker_args *args)
{
    pid_t spawner = getppid();
    int fd = args->fd, status_fd = args->status_fd;
    keep_only(&fd, &status_fd);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != spawner)
        _exit(71);

    /* Large frames come one after another: keep their memory in the heap
     * for the next one instead of mapping fresh pages (and faulting them
     * in) for each. */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);

    /* fd 1 becomes a pipe of the driver's device printf output, which the
     * job sends to the program. */
    int out[2];
    if (pipe2(out, O_CLOEXEC) == 0 && dup2(out[1], 1) == 1) {
        close(out[1]);
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        fcntl(out[0], F_SETPIPE_SZ, 1 << 20);
        agent_stdout_pipe = out[0];
    }

    backend b;
    char bwhy[600];
    job_hooks hooks = { tell_ending, tell_ended, &status_fd };
    if (backend_open(&b, args->driver, bwhy, sizeof bwhy) < 0) {
        char why[700];
        job *j = job_new(&b, fd, args->index, why, sizeof why);
        if (!j) {
            char line[800];
            snprintf(line, sizeof line, "job failed: agent: %s", why);
            tell_ending(&status_fd);
            tell_ended(&status_fd, line);
            _exit(0);   /* tell_ended exits already; j is NULL past here */
        }
        j->hooks = &hooks;
        job_fail(j, "agent: cannot open its driver: %s", bwhy);
        job_end(j, false);
    }
    job_serve(&b, fd, args->index, args->key, &hooks);
    _exit(0);
}

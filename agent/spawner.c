/* The spawner: a child the listener forks at start, before it runs any
 * thread, that forks every job's worker and every status probe from then
 * on. A fork copies only the forking thread, so a child of the threaded
 * listener could inherit a lock (the allocator's, the log's) that one of
 * the proving threads held at that instant and wait on it forever: under
 * AddressSanitizer a job's worker did, silent until the program gave up.
 * The spawner runs no thread, so nothing is ever held when it forks.
 *
 * It hears requests on a socket pair (the connection and the pipes travel
 * as descriptors), answers each with the child's pid, reaps its children
 * and reports each exit on a second socket pair. It dies with the listener;
 * its children die with it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"

enum { SPAWN_WORKER = 1, SPAWN_PROBE = 2 };

typedef struct spawn_request {
    uint32_t kind;
    uint32_t index;            /* SPAWN_WORKER: the agent's process number in the job */
} spawn_request;

typedef struct spawn_reply {
    int32_t pid;               /* or -errno */
} spawn_reply;

/* Sends one message with up to two descriptors. */
static int send_with_fds(int sock, const void *msg, size_t len, const int *fds, int nfds)
{
    struct iovec iov = { (void *)msg, len };
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds) {
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    for (;;) {
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (n == (ssize_t)len)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        return -1;
    }
}

/* Receives one message and its descriptors (closed when the message is not
 * what the caller wants). Returns the bytes read, 0 at the end, -1. */
static ssize_t recv_with_fds(int sock, void *msg, size_t len, int *fds, int *nfds, int max_fds)
{
    struct iovec iov = { msg, len };
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
    ssize_t n;
    do
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    *nfds = 0;
    for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int got = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *in = (int *)CMSG_DATA(c);
        for (int i = 0; i < got; i++) {
            if (*nfds < max_fds)
                fds[(*nfds)++] = in[i];
            else
                close(in[i]);
        }
    }
    return n;
}

/* ---- the spawner's side ---- */

typedef struct spawner_state {
    int requests, exits, sigfd;
    const char *driver;
    const rig_key *key;
    sigset_t old_mask;
} spawner_state;

/* In the fresh child, before it becomes a worker or a probe: nothing of
 * the spawner's stays with it. */
static void child_leaves_spawner(const spawner_state *st)
{
    close(st->requests);
    close(st->exits);
    close(st->sigfd);
    sigprocmask(SIG_SETMASK, &st->old_mask, NULL);
}

static void run_probe(const spawner_state *st, int out_fd)
{
    FILE *out = fdopen(out_fd, "w");
    if (out) {
        agent_probe(out, st->driver, true);
        fclose(out);
    }
    _exit(0);
}

static pid_t spawn(const spawner_state *st, const spawn_request *rq, const int *fds, int nfds)
{
    if ((rq->kind == SPAWN_WORKER && nfds != 2) || (rq->kind == SPAWN_PROBE && nfds != 1) ||
        (rq->kind != SPAWN_WORKER && rq->kind != SPAWN_PROBE)) {
        errno = EINVAL;
        return -1;
    }
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    child_leaves_spawner(st);
    if (rq->kind == SPAWN_PROBE)
        run_probe(st, fds[0]);
    worker_args a = { .fd = fds[0], .index = rq->index, .driver = st->driver, .status_fd = fds[1], .key = st->key };
    worker_main(&a);
}

/* Reports every child that exited: its pid and wait status. */
static void reap(spawner_state *st)
{
    struct signalfd_siginfo si;
    while (read(st->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        ;
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int32_t report[2] = { pid, status };
        if (send_with_fds(st->exits, report, sizeof report, NULL, 0) < 0)
            _exit(0);   /* the listener is gone */
    }
}

static void spawner_main(spawner_state *st, pid_t listener)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != listener)
        _exit(0);
    for (;;) {
        struct pollfd p[2] = { { st->requests, POLLIN, 0 }, { st->sigfd, POLLIN, 0 } };
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        if (p[1].revents)
            reap(st);
        if (!p[0].revents)
            continue;
        spawn_request rq;
        int fds[2], nfds;
        ssize_t n = recv_with_fds(st->requests, &rq, sizeof rq, fds, &nfds, 2);
        if (n <= 0)
            _exit(0);   /* the listener closed its end */
        spawn_reply reply = { -EINVAL };
        if (n == (ssize_t)sizeof rq) {
            pid_t pid = spawn(st, &rq, fds, nfds);
            reply.pid = pid > 0 ? pid : -errno;
        }
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        if (send_with_fds(st->requests, &reply, sizeof reply, NULL, 0) < 0)
            _exit(0);
    }
}

/* ---- the listener's side ---- */

int spawner_start(spawner *sp, const char *driver, const rig_key *key, char *why, size_t cap)
{
    int rq[2], ex[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rq) < 0) {
        snprintf(why, cap, "socketpair: %s", strerror(errno));
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ex) < 0) {
        snprintf(why, cap, "socketpair: %s", strerror(errno));
        close(rq[0]);
        close(rq[1]);
        return -1;
    }
    pid_t listener = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(rq[0]);
        close(ex[0]);
        spawner_state st = { .driver = driver, .key = key };
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, &st.old_mask);
        int sig = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
        /* Only the two sockets, the signals and fds 0-2 stay (as 3, 4, 5):
         * the listening socket and any connection are not the spawner's. */
        int a = fcntl(rq[1], F_DUPFD_CLOEXEC, 10), b = fcntl(ex[1], F_DUPFD_CLOEXEC, 10),
            c = sig < 0 ? -1 : fcntl(sig, F_DUPFD_CLOEXEC, 10);
        if (a < 0 || b < 0 || c < 0 || dup3(a, 3, O_CLOEXEC) < 0 || dup3(b, 4, O_CLOEXEC) < 0 ||
            dup3(c, 5, O_CLOEXEC) < 0 || close_range(6, ~0u, 0) < 0)
            _exit(1);
        st.requests = 3;
        st.exits = 4;
        st.sigfd = 5;
        spawner_main(&st, listener);
    }
    close(rq[1]);
    close(ex[1]);
    if (pid < 0) {
        snprintf(why, cap, "fork: %s", strerror(errno));
        close(rq[0]);
        close(ex[0]);
        return -1;
    }
    sp->requests = rq[0];
    sp->exits = ex[0];
    pthread_mutex_init(&sp->lock, NULL);
    return 0;
}

static pid_t ask(spawner *sp, const spawn_request *rq, const int *fds, int nfds, char *why, size_t cap)
{
    pthread_mutex_lock(&sp->lock);
    spawn_reply reply = { -EPIPE };
    int got_fds[2], ngot = 0;
    ssize_t n = -1;
    if (send_with_fds(sp->requests, rq, sizeof *rq, fds, nfds) == 0)
        n = recv_with_fds(sp->requests, &reply, sizeof reply, got_fds, &ngot, 2);
    pthread_mutex_unlock(&sp->lock);
    for (int i = 0; i < ngot; i++)
        close(got_fds[i]);
    if (n != (ssize_t)sizeof reply) {
        snprintf(why, cap, "the agent's spawner process is gone");
        return -1;
    }
    if (reply.pid <= 0) {
        snprintf(why, cap, "fork: %s", strerror(-reply.pid));
        return -1;
    }
    return reply.pid;
}

pid_t spawner_worker(spawner *sp, int conn_fd, int status_fd, uint32_t index, char *why, size_t cap)
{
    spawn_request rq = { SPAWN_WORKER, index };
    int fds[2] = { conn_fd, status_fd };
    return ask(sp, &rq, fds, 2, why, cap);
}

pid_t spawner_probe(spawner *sp, int out_fd, char *why, size_t cap)
{
    spawn_request rq = { SPAWN_PROBE, 0 };
    return ask(sp, &rq, &out_fd, 1, why, cap);
}

int spawner_exited(spawner *sp, pid_t *pid, int *status)
{
    int32_t report[2];
    ssize_t n;
    do
        n = recv(sp->exits, report, sizeof report, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return -1;   /* the spawner is gone */
    if (n != (ssize_t)sizeof report)
        return 0;
    *pid = report[0];
    *status = report[1];
    return 1;
}

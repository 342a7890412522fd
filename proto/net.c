/* TCP listen, accept and connect with deadlines. */
#include "proto/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/deadline.h"

void net_tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

int net_source_toward(const struct sockaddr *to, unsigned len, char host[static INET6_ADDRSTRLEN], rig_why *why)
{
    struct sockaddr_storage me;
    memset(&me, 0, sizeof me);
    socklen_t mlen = sizeof me;
    int fd = socket(to->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, to, (socklen_t)len) < 0 || getsockname(fd, (struct sockaddr *)&me, &mlen) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return why_set(why, RIG_E_IO, "%s", strerror(e));
    }
    close(fd);
    const void *in = me.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&me)->sin6_addr
                                              : (const void *)&((struct sockaddr_in *)&me)->sin_addr;
    if (!inet_ntop(me.ss_family, in, host, INET6_ADDRSTRLEN))
        return why_set(why, RIG_E_IO, "%s", strerror(errno));
    return RIG_OK;
}

static void format_address(const names_address *a, char *out, size_t cap)
{
    snprintf(out, cap, a->ipv6 ? "[%s]:%u" : "%s:%u", a->host, (unsigned)a->port);
}

static int resolve(const names_address *a, int passive, struct addrinfo **res, rig_why *why)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP };
    hints.ai_family = a->ipv6 ? AF_INET6 : AF_UNSPEC;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)a->port);
    int rc = getaddrinfo(a->host, port, &hints, res);
    if (rc != 0) {
        char text[NAMES_TEXT_MAX];
        format_address(a, text, sizeof text);
        return why_set(why, RIG_E_INVALID, "cannot resolve %s: %s", text, gai_strerror(rc));
    }
    return 0;
}

int net_listen(const names_address *addr, int *fd, uint16_t *port, rig_why *why)
{
    struct addrinfo *res;
    char text[NAMES_TEXT_MAX];
    format_address(addr, text, sizeof text);
    int rc = resolve(addr, 1, &res, why);
    if (rc < 0)
        return rc;
    int s = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        rc = why_set(why, RIG_E_IO, "socket for %s: %s", text, strerror(errno));
        goto out;
    }
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, res->ai_addr, res->ai_addrlen) != 0 || listen(s, 16) != 0) {
        rc = why_set(why, RIG_E_IO, "cannot listen on %s: %s", text, strerror(errno));
        close(s);
        goto out;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(s, (struct sockaddr *)&ss, &sl);
    if (port)
        *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    *fd = s;
out:
    freeaddrinfo(res);
    return rc;
}

int net_accept(int listen_fd, int timeout_ms, int *fd, rig_why *why)
{
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        struct pollfd p = { .fd = listen_fd, .events = POLLIN };
        int rc = poll(&p, 1, deadline_poll_ms(deadline));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return why_set(why, RIG_E_IO, "poll on the listening socket: %s", strerror(errno));
        if (rc == 0)
            return why_set(why, RIG_E_TIMEOUT, "no connection within %d ms", timeout_ms);
        int s = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (s < 0 && (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED))
            continue;
        if (s < 0)
            return why_set(why, RIG_E_IO, "accept: %s", strerror(errno));
        net_tune(s);
        *fd = s;
        return 0;
    }
}

/* One connect attempt bounded by the deadline. */
static int connect_one(const struct addrinfo *ai, int64_t deadline, int *fd, int *err)
{
    int s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) {
        *err = errno;
        return -1;
    }
    if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            *err = errno;
            close(s);
            return -1;
        }
        for (;;) {
            struct pollfd p = { .fd = s, .events = POLLOUT };
            int rc = poll(&p, 1, deadline_poll_ms(deadline));
            if (rc < 0 && errno == EINTR)
                continue;
            if (rc <= 0) {
                *err = rc == 0 ? ETIMEDOUT : errno;
                close(s);
                return -1;
            }
            break;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
            *err = soerr;
            close(s);
            return -1;
        }
    }
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
    net_tune(s);
    *fd = s;
    return 0;
}

int net_connect(const names_address *addr, int timeout_ms, int *fd, rig_why *why)
{
    struct addrinfo *res;
    int rc = resolve(addr, 0, &res, why);
    if (rc < 0)
        return rc;
    int64_t deadline = deadline_after(timeout_ms);
    int err = EHOSTUNREACH;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
        if (connect_one(ai, deadline, fd, &err) == 0)
            goto out;
    char text[NAMES_TEXT_MAX];
    format_address(addr, text, sizeof text);
    rc = why_set(why, err == ETIMEDOUT ? RIG_E_TIMEOUT : RIG_E_IO, "cannot connect to %s: %s", text,
                 err == ETIMEDOUT ? "timed out" : strerror(err));
out:
    freeaddrinfo(res);
    return rc;
}

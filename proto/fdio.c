/* poll() before every read and write so that no peer can hold us past a
 * deadline, whether the descriptor blocks or not. */
#include "proto/fdio.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/deadline.h"

static int wait_for(int fd, short events, int64_t deadline, const char *what, const char *dir,
                    rig_why *why)
{
    for (;;) {
        struct pollfd p = { .fd = fd, .events = events };
        int rc = poll(&p, 1, deadline_poll_ms(deadline));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return why_set(why, RIG_E_IO, "poll while %s %s: %s", dir, what, strerror(errno));
        if (rc == 0)
            return why_set(why, RIG_E_TIMEOUT, "timed out %s %s", dir, what);
        return 0;
    }
}

int fdio_read_full(int fd, void *buf, size_t n, int64_t deadline, const char *what, rig_why *why)
{
    size_t have = 0;
    while (have < n) {
        int rc = wait_for(fd, POLLIN, deadline, what, "waiting for", why);
        if (rc < 0)
            return rc;
        ssize_t got = read(fd, (uint8_t *)buf + have, n - have);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (got < 0) {
            if (errno == ECONNRESET)
                return why_set(why, RIG_E_CLOSED, "connection reset while reading %s", what);
            return why_set(why, RIG_E_IO, "reading %s: %s", what, strerror(errno));
        }
        if (got == 0)
            return why_set(why, RIG_E_CLOSED, "connection closed after %zu of the %zu bytes of %s",
                           have, n, what);
        have += (size_t)got;
    }
    return 0;
}

int fdio_write_full(int fd, const void *buf, size_t n, int64_t deadline, const char *what, rig_why *why)
{
    size_t done = 0;
    while (done < n) {
        int rc = wait_for(fd, POLLOUT, deadline, what, "sending", why);
        if (rc < 0)
            return rc;
        ssize_t put = send(fd, (const uint8_t *)buf + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put < 0 && errno == ENOTSOCK)
            put = write(fd, (const uint8_t *)buf + done, n - done);
        if (put < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (put < 0) {
            if (errno == EPIPE || errno == ECONNRESET)
                return why_set(why, RIG_E_CLOSED, "connection closed while sending %s", what);
            return why_set(why, RIG_E_IO, "sending %s: %s", what, strerror(errno));
        }
        done += (size_t)put;
    }
    return 0;
}

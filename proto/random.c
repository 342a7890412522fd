/* getrandom(2) in a loop: it may return fewer bytes than asked, or be
 * interrupted by a signal. */
#include "proto/random.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

int random_bytes(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

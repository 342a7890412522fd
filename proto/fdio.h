/* Whole reads and writes on a descriptor, bounded by a deadline; a closed
 * peer, a timeout and an errno each give their own RIG_E_* and line. */
#ifndef RIG_PROTO_FDIO_H
#define RIG_PROTO_FDIO_H

#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

/* Reads exactly n bytes before deadline (deadline.h). RIG_E_CLOSED when the
 * peer ends the stream first (why says after how many bytes), RIG_E_TIMEOUT,
 * RIG_E_IO. `what` names the awaited thing in the message. */
int fdio_read_full(int fd, void *buf, size_t n, int64_t deadline, const char *what, rig_why *why);

/* Writes all n bytes before deadline; never raises SIGPIPE. */
int fdio_write_full(int fd, const void *buf, size_t n, int64_t deadline, const char *what, rig_why *why);

#endif

/* The loopback TCP the bench compares rig with: a peer process that sinks
 * and sources bytes on command, and the one-way stream measured against it.
 * baseline measures with it alone; the bench program measures the same
 * stream beside each of rig's copies, so a machine whose speed drifts moves
 * both alike. */
#ifndef RIG_BENCH_TCP_H
#define RIG_BENCH_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The writes of a stream, and the peer's buffer. */
#define TCP_STREAM_WRITE ((size_t)4 << 20)
/* A ping-pong message. */
#define TCP_MSG 32

/* Whole writes and reads; any failure dies naming it. */
void tcp_put_all(int fd, const void *p, size_t n);
void tcp_get_all(int fd, void *p, size_t n);
/* The peer: answers the commands on fd until it closes, then _exits.
 *   'p' u32 count    count ping-pongs of TCP_MSG bytes
 *   's' u64 bytes    sinks them, then one byte back
 *   'g' u64 bytes    sends them */
void tcp_peer(int fd) __attribute__((noreturn));
/* Listens on 127.0.0.1 (any port): the socket and its port. */
int tcp_listen(uint16_t *port);
/* A tuned connection to 127.0.0.1:port. */
int tcp_connect(uint16_t port);
/* total bytes one way to the peer in TCP_STREAM_WRITE writes of buf, and
 * its byte back: the rate in GB/s. */
double tcp_stream_once(int fd, const uint8_t *buf, uint64_t total);
/* One synchronous transfer of n bytes, as a copy makes it: to the peer and
 * its byte back (send), or asked for and read (!send), through buf of
 * TCP_STREAM_WRITE bytes: the rate in GB/s. */
double tcp_transfer_once(int fd, uint8_t *buf, uint64_t n, bool send);
/* The same from or into all n bytes of buf, a buffer as large as a big
 * copy's (the program's own): a copy of a GiB or more meets memory out of
 * the caches and the TLB, which a stream through a small buffer does not. */
double tcp_transfer_whole(int fd, uint8_t *buf, uint64_t n, bool send);

#endif

/* Random bytes from the kernel's generator (getrandom), for nonces and keys.
 * The same source libsodium's randombytes uses on Linux, called directly so
 * that nothing of libsodium that is not position-independent has to be
 * linked into the shim (see `make gpu-bundle`). */
#ifndef RIG_PROTO_RANDOM_H
#define RIG_PROTO_RANDOM_H

#include <stddef.h>

/* Fills buf with n random bytes; returns 0, or -1 with errno set. */
int random_bytes(void *buf, size_t n);

#endif

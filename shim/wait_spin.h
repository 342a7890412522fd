/* How long a thread that waits on an agent polls its socket before it
 * sleeps: the current context's scheduling flags, as the CUDA driver
 * spins or blocks by them. */
#ifndef RIG_SHIM_WAIT_SPIN_H
#define RIG_SHIM_WAIT_SPIN_H

#include <stdint.h>

/* The bound in nanoseconds; 0: sleep at once. */
int64_t shim_wait_spin_ns(void);

#endif

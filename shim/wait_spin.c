/* The waiting thread's spin (shim/wait_spin.h). A thread that sleeps on a
 * socket is woken through the scheduler when the bytes come, and the
 * scheduler tends to wake it on the sender's CPU: on a machine shared with
 * the agent, a copy's pieces then go writer, reader, writer on one CPU
 * while the other idles (docs/design.md "What a synchronous wait costs"). */
#include "shim/wait_spin.h"

#include <cuda.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "shim/log.h"
#include "shim/proxy.h"

/* Long enough to cover the gap between two pieces of a copy and a small
 * answer's round trip; short against a kernel's time. */
#define SPIN_US_DEFAULT 100
#define SPIN_US_MAX 100000

static int64_t bound_ns(void)
{
    static int64_t bound = -1;
    int64_t known = __atomic_load_n(&bound, __ATOMIC_RELAXED);
    if (known >= 0)
        return known;
    int64_t us = SPIN_US_DEFAULT;
    const char *v = getenv("RIG_SPIN_US");
    if (v) {
        char *end = NULL;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (end == v || *end != '\0' || errno || n < 0 || n > SPIN_US_MAX)
            shim_log(SHIM_LOG_ERROR, "RIG_SPIN_US=%s: not a whole number of microseconds from 0 to %d; using %d", v,
                     SPIN_US_MAX, SPIN_US_DEFAULT);
        else
            us = n;
    }
    __atomic_store_n(&bound, us * 1000, __ATOMIC_RELAXED);
    return us * 1000;
}

int64_t shim_wait_spin_ns(void)
{
    unsigned flags = CU_CTX_SCHED_AUTO;
    proxy_obj *c = shim_proxy_current();
    if (c)
        flags = shim_ctx_flags(c);
    switch (flags & CU_CTX_SCHED_MASK) {
    case CU_CTX_SCHED_BLOCKING_SYNC:
        return 0;
    case CU_CTX_SCHED_SPIN:
    case CU_CTX_SCHED_YIELD:
        return bound_ns();
    default: {
        /* As the driver's automatic choice: spin only where a CPU is spare. */
        static long cpus;
        if (!cpus)
            cpus = sysconf(_SC_NPROCESSORS_ONLN);
        return cpus > 1 ? bound_ns() : 0;
    }
    }
}

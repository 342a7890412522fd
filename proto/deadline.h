/* Deadlines on CLOCK_MONOTONIC, in milliseconds, clamped on overflow. */
#ifndef RIG_PROTO_DEADLINE_H
#define RIG_PROTO_DEADLINE_H

#include <stdint.h>
#include <time.h>

static inline int64_t deadline_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The moment ms milliseconds from now; a negative ms means never. */
static inline int64_t deadline_after(int64_t ms)
{
    if (ms < 0)
        return INT64_MAX;
    int64_t now = deadline_now_ms();
    return ms > INT64_MAX - now ? INT64_MAX : now + ms;
}

/* The CLOCK_REALTIME moment ms milliseconds from now, as
 * pthread_cond_timedwait takes it (a short wait; not a deadline above). */
static inline struct timespec deadline_timespec_in(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

/* Milliseconds left until the deadline as a poll() timeout: 0 when passed,
 * -1 for never, at most INT32_MAX. */
static inline int deadline_poll_ms(int64_t deadline)
{
    if (deadline == INT64_MAX)
        return -1;
    int64_t left = deadline - deadline_now_ms();
    if (left <= 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

#endif

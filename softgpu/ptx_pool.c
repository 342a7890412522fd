/* ptx_pool: threads for one launch's blocks (see ptx_pool.h). Threads live
 * for one launch: starting a few costs microseconds next to any launch
 * worth spreading. */
#include "softgpu/ptx_pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct job {
    void (*fn)(void *);
    void *arg;
} job;

static void *trampoline(void *p)
{
    job *j = p;
    j->fn(j->arg);
    return NULL;
}

int ptx_pool_run(unsigned n, void (*fn)(void *), void **args)
{
    if (n == 0)
        return 0;
    pthread_t *tids = calloc(n, sizeof *tids);
    job *jobs = calloc(n, sizeof *jobs);
    bool *started = calloc(n, sizeof *started);
    if (!tids || !jobs || !started) {
        free(tids);
        free(jobs);
        free(started);
        fn(args[0]);   /* one thread still does all the work */
        return 0;
    }
    for (unsigned i = 1; i < n; i++) {
        jobs[i] = (job){ fn, args[i] };
        started[i] = pthread_create(&tids[i], NULL, trampoline, &jobs[i]) == 0;
    }
    fn(args[0]);
    for (unsigned i = 1; i < n; i++)
        if (started[i])
            pthread_join(tids[i], NULL);
    free(tids);
    free(jobs);
    free(started);
    return 0;
}

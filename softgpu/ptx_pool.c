/* ptx_pool: host threads shared by all launches (see ptx_pool.h). Started
 * on first use, they wait for jobs; a launch's caller always works on its
 * own job too, so a launch finishes even when every helper is busy with
 * another one. A forked child starts with no helpers. */
#include "softgpu/ptx_pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_HELPERS 255

typedef struct job {
    void (*fn)(void *);
    void **args;
    unsigned n;
    unsigned next;       /* next args index to hand to a helper */
    unsigned running;    /* helpers inside fn */
    struct job *link;
} job;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static job *queue;          /* jobs with args left to hand out */
static unsigned helpers;    /* threads started */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void unlink_job(job *j)
{
    for (job **p = &queue; *p; p = &(*p)->link)
        if (*p == j) {
            *p = j->link;
            return;
        }
}

static void *helper_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!queue)
            pthread_cond_wait(&work_cv, &mu);
        job *j = queue;
        unsigned i = j->next++;
        j->running++;
        if (j->next >= j->n)
            unlink_job(j);
        pthread_mutex_unlock(&mu);
        j->fn(j->args[i]);
        pthread_mutex_lock(&mu);
        if (--j->running == 0)
            pthread_cond_broadcast(&done_cv);
    }
    return NULL;
}

static void after_fork_child(void)
{
    pthread_mutex_init(&mu, NULL);
    pthread_cond_init(&work_cv, NULL);
    pthread_cond_init(&done_cv, NULL);
    queue = NULL;
    helpers = 0;
}

static void register_fork(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* Starts helpers until there are want (under mu). */
static void start_helpers(unsigned want)
{
    if (want > MAX_HELPERS)
        want = MAX_HELPERS;
    while (helpers < want) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, helper_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        helpers++;
    }
}

int ptx_pool_run(unsigned n, void (*fn)(void *), void **args)
{
    if (n == 0)
        return 0;
    if (n == 1) {
        fn(args[0]);
        return 0;
    }
    pthread_once(&fork_once, register_fork);
    job j = { .fn = fn, .args = args, .n = n, .next = 1 };
    pthread_mutex_lock(&mu);
    start_helpers(n - 1);
    j.link = queue;
    queue = &j;
    pthread_cond_broadcast(&work_cv);
    pthread_mutex_unlock(&mu);
    fn(args[0]);
    pthread_mutex_lock(&mu);
    unlink_job(&j);   /* helpers that never came are not needed now */
    j.next = n;
    while (j.running > 0)
        pthread_cond_wait(&done_cv, &mu);
    pthread_mutex_unlock(&mu);
    return 0;
}

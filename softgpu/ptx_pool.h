/* ptx_pool: runs up to n copies of a function on host threads shared by
 * all launches (the caller's included) and waits for all of them. */
#ifndef RIG_SOFTGPU_PTX_POOL_H
#define RIG_SOFTGPU_PTX_POOL_H

/* Runs fn(args[0]) on the calling thread and fn(args[i]), 0 < i < n, on
 * whichever helpers are free before the caller's copy returns; returns once
 * every copy that started has finished. fn must take its work from a shared
 * queue: copies that never start are simply not needed. Returns 0. */
int ptx_pool_run(unsigned n, void (*fn)(void *), void **args);

#endif

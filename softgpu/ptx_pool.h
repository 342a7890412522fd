/* ptx_pool: runs n copies of a function on n host threads (the caller's
 * included) and waits for all of them. */
#ifndef RIG_SOFTGPU_PTX_POOL_H
#define RIG_SOFTGPU_PTX_POOL_H

/* Runs fn(args[i]) for i < n, fn(args[0]) on the calling thread. Returns 0,
 * or -1 when no thread could be started (nothing ran). When only some start,
 * the rest of the work runs on those that did (fn takes work from a shared
 * queue), so a short pool is slower, never wrong. */
int ptx_pool_run(unsigned n, void (*fn)(void *), void **args);

#endif

/* The real driver behind local devices, loaded by path in its own symbol
 * scope (RTLD_LOCAL | RTLD_DEEPBIND) so that none of its symbols bind to the
 * shim's, and never the shim itself. */
#ifndef RIG_SHIM_LOCAL_DRIVER_H
#define RIG_SHIM_LOCAL_DRIVER_H

#include <cuda.h>

#include "proto/cuda_sigs.h"

/* One pointer per exported symbol (fn_cuMemAlloc_v2, ...); NULL where the
 * driver lacks it. */
typedef struct shim_driver {
    void *handle;
    char path[512];
#define RIG_CUDA_OP(op, sym, base, ver, variant, kinds, served) CUresult (*fn_##sym) RIG_SIG_##sym;
#include "proto/cuda_ops.def"
#undef RIG_CUDA_OP
} shim_driver;

/* The local driver, loaded on first call: RIG_LOCAL_DRIVER=PATH, else the
 * system's libcuda.so.1 when it is not the shim. NULL when there is none
 * (then the program has no local devices). Thread-safe. */
const shim_driver *shim_local_driver(void);

#endif

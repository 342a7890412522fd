/* A CUDA driver library opened by path, with one pointer per symbol of the
 * operation table (fn_cuMemAlloc_v2, ...; NULL where the library lacks one).
 * Used for the shim's local devices and for the agent's backend. Opening
 * only resolves names; proto itself never calls into a driver. */
#ifndef RIG_PROTO_CUDA_DRIVER_H
#define RIG_PROTO_CUDA_DRIVER_H

#include <cuda.h>
#include <stdbool.h>

#include "proto/cuda_ops.h"
#include "proto/cuda_sigs.h"
#include "proto/error.h"

typedef struct cuda_driver {
    void *handle;
    char path[512];
#define RIG_CUDA_OP(op, sym, base, ver, variant, kinds, served) CUresult (*fn_##sym) RIG_SIG_##sym;
#include "proto/cuda_ops.def"
#undef RIG_CUDA_OP
    void *by_op[CUDA_OP_SLOTS];     /* the same pointers, by wire number */
} cuda_driver;

/* dlopens path with RTLD_NOW | RTLD_LOCAL, plus RTLD_DEEPBIND when deep (so
 * its symbols never bind to a preloaded library exporting the same names),
 * and resolves every symbol. RIG_E_INVALID when it cannot be loaded, lacks
 * cuInit, or exports `refuse_marker` (a way to skip ourselves). */
int cuda_driver_open(cuda_driver *d, const char *path, bool deep, const char *refuse_marker, rig_why *why);

/* dlcloses; NULL is fine. */
void cuda_driver_close(cuda_driver *d);

#endif

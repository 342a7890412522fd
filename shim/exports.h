/* Every exported driver symbol as the shim's own function, for code that
 * needs its address or calls it: shim_export_cuMemAlloc_v2 is the symbol
 * cuMemAlloc_v2, whichever definition (exports.c's weak generic one or a
 * SHIM_EXPORT elsewhere) won the link. */
#ifndef RIG_SHIM_EXPORTS_H
#define RIG_SHIM_EXPORTS_H

#include <cuda.h>

#include "proto/cuda_sigs.h"

#define RIG_CUDA_OP(op, sym, base, ver, variant, kinds, served)             \
    __attribute__((visibility("default"))) CUresult shim_export_##sym      \
        RIG_SIG_##sym __asm__(#sym);
#include "proto/cuda_ops.def"
#undef RIG_CUDA_OP

#endif

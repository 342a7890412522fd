/* cuGetProcAddress and cuGetProcAddress_v2: the entry point of the CUDA
 * runtime, answered from the one table by (name, ABI version, flags) as the
 * real driver answers: the newest symbol of that name whose version is at
 * most the one asked for, its per-thread-stream variant when asked. */
#include <stdbool.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "shim/core.h"
#include "shim/exports.h"
#include "shim/log.h"

/* The first ABI version with per-thread default streams (CUDA 7.0). */
#define PER_THREAD_FIRST 7000

/* The shim's export of each wire number. */
static void *const export_of_op[] = {
#define RIG_CUDA_OP(op, sym, base, ver, variant, kinds, served) [op] = (void *)&shim_export_##sym,
#include "proto/cuda_ops.def"
#undef RIG_CUDA_OP
};

/* True when an entry of ABI version v serves a request for version asked;
 * version 0 (a name from cuda.h alone) serves every request. */
static bool serves(uint32_t v, int asked)
{
    return v == 0 || (asked >= 0 && v <= (uint32_t)asked);
}

/* The entry for (name, version, per_thread), or NULL with *why set. */
static const cuda_op_info *find(const char *name, int version, bool per_thread,
                                CUdriverProcAddressQueryResult *why)
{
    long first = *name ? cuda_op_first_of_base(name) : -1;
    if (first < 0) {
        *why = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return NULL;
    }
    const cuda_op_info *best = NULL;
    size_t end = (size_t)first;
    for (; end < cuda_ops_count && strcmp(cuda_ops[end].base, name) == 0; end++) {
        const cuda_op_info *e = &cuda_ops[end];
        if (e->variant == CUDA_PLAIN && serves(e->version, version) &&
            (!best || e->version > best->version))
            best = e;
    }
    if (!best) {
        *why = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return NULL;
    }
    if (per_thread)
        for (size_t i = (size_t)first; i < end; i++)
            if (cuda_ops[i].variant != CUDA_PLAIN && cuda_ops[i].version == best->version)
                return &cuda_ops[i];
    return best;
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    CUdriverProcAddressQueryResult why = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (pfn)
        *pfn = NULL;
    if (status)
        *status = why;
    if (!symbol || !pfn ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    /* Legacy wins where both are asked: it is what a caller gets by default.
     * Per-thread default streams came with CUDA 7.0 (cudaTypedefs.h types
     * every _ptds/_ptsz entry v7000 or later): older requests get legacy. */
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
                      !(flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM) && version >= PER_THREAD_FIRST;
    const cuda_op_info *e = find(symbol, version, per_thread, &why);
    if (!e) {
        if (status)
            *status = why;
        if (shim_log_enabled(SHIM_LOG_DEBUG))
            shim_log(SHIM_LOG_DEBUG, "cuGetProcAddress(%s, %d, %llu): %s", symbol, version,
                     (unsigned long long)flags,
                     why == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND ? "no such symbol" : "version too old");
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = export_of_op[e->op];
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGetProcAddress)
{
    return lookup(symbol, pfn, driverVersion, flags, NULL);
}

SHIM_EXPORT(cuGetProcAddress_v2)
{
    return lookup(symbol, pfn, driverVersion, flags, symbolFound);
}

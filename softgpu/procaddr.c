/* cuGetProcAddress: answers by name, CUDA version and stream flavour from
 * proc_table.h, the one list of what this library exports. */
#include "softgpu/driver.h"

#include <cudaProfiler.h>

#include <string.h>

typedef struct proc { const char *name; int version; void *fn, *per_thread; } proc;

static const proc procs[] = {
#define P(name, version, fn, pt) { #name, version, (void *)(fn), (void *)(pt) },
#include "softgpu/proc_table.h"
#undef P
};

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    const proc *best = NULL;
    bool named = false;
    for (size_t i = 0; i < sizeof procs / sizeof *procs; i++) {
        if (strcmp(procs[i].name, symbol) != 0)
            continue;
        named = true;
        if (procs[i].version <= cudaVersion)
            best = &procs[i];   /* rows are in version order */
    }
    void *fn = NULL;
    if (best)
        fn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->per_thread ? best->per_thread
                                                                                       : best->fn;
    if (status)
        *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS
                     : named && !best ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    *pfn = fn;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                              CUdriverProcAddressQueryResult *symbolStatus)
{
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

SOFT_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

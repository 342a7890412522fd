/* The profiler control calls: no profiler ever attaches to softgpu, and
 * CUDA without one attached answers success (benchmarks and samples call
 * them unconditionally), so these only check for a current context. */
#include "softgpu/driver.h"

#include <cudaProfiler.h>

SOFT_API CUresult CUDAAPI cuProfilerInitialize(const char *configFile, const char *outputFile,
                                               CUoutput_mode outputMode)
{
    (void)configFile;
    (void)outputFile;
    if ((unsigned)outputMode > CU_OUT_CSV)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    return soft_ctx_current(&c);
}

SOFT_API CUresult CUDAAPI cuProfilerStart(void)
{
    struct CUctx_st *c;
    return soft_ctx_current(&c);
}

SOFT_API CUresult CUDAAPI cuProfilerStop(void)
{
    struct CUctx_st *c;
    return soft_ctx_current(&c);
}

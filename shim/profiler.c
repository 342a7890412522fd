/* Profiler control on proxies: no profiler attaches to a device behind an
 * agent, and CUDA without one attached answers success, so a proxy context
 * answers success here without a round trip (benchmarks and samples call
 * these unconditionally). Anything else goes to the local driver. */
#include "shim/core.h"
#include "shim/proxy.h"

SHIM_EXPORT(cuProfilerInitialize)
{
    if (shim_current_is_proxy())
        return (unsigned)outputMode > CU_OUT_CSV ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    return SHIM_LOCAL(cuProfilerInitialize);
}

SHIM_EXPORT(cuProfilerStart)
{
    return shim_current_is_proxy() ? CUDA_SUCCESS : SHIM_LOCAL(cuProfilerStart);
}

SHIM_EXPORT(cuProfilerStop)
{
    return shim_current_is_proxy() ? CUDA_SUCCESS : SHIM_LOCAL(cuProfilerStop);
}

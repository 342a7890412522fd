/* cuDriverGetVersion: the version rig reports, with or without a driver. */
#include "shim/core.h"

SHIM_EXPORT(cuDriverGetVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = SHIM_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

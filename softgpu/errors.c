/* cuGetErrorName / cuGetErrorString over every CUresult of cuda.h. */
#include "softgpu/driver.h"

SOFT_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)error) {
#define X(name, text) case name: *pStr = #name; return CUDA_SUCCESS;
#include "softgpu/error_table.h"
#undef X
    }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

SOFT_API CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)error) {
#define X(name, text) case name: *pStr = text; return CUDA_SUCCESS;
#include "softgpu/error_table.h"
#undef X
    }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

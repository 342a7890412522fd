/* Functions and kernels: names, parameter layouts, attributes and cache
 * preferences. A CUkernel is the same object as its CUfunction. */
#include "softgpu/driver.h"

struct CUfunc_st *soft_func_get(const void *h)
{
    return soft_handle_valid(h, SOFT_FUNC) ? (struct CUfunc_st *)h : NULL;
}

static CUresult func_arg(const void *h, struct CUfunc_st **out)
{
    SOFT_TRY(soft_check_init());
    *out = soft_func_get(h);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult param_info(const void *h, size_t i, size_t *offset, size_t *size)
{
    struct CUfunc_st *f;
    SOFT_TRY(func_arg(h, &f));
    /* CUDA 13 has no count call: callers iterate until this error. */
    if (i >= f->info->param_count)
        return CUDA_ERROR_INVALID_VALUE;
    if (offset)
        *offset = f->info->params[i].offset;
    if (size)
        *size = f->info->params[i].size;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    return param_info(func, paramIndex, paramOffset, paramSize);
}

SOFT_API CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    return param_info(kernel, paramIndex, paramOffset, paramSize);
}

static CUresult get_name(const char **name, const void *h)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f;
    SOFT_TRY(func_arg(h, &f));
    *name = f->info->name;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc) { return get_name(name, hfunc); }
SOFT_API CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc) { return get_name(name, hfunc); }

SOFT_API CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    if (!hmod)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f;
    SOFT_TRY(func_arg(hfunc, &f));
    *hmod = f->mod;
    return CUDA_SUCCESS;
}

static CUresult get_attribute(int *pi, CUfunction_attribute a, const void *h)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f;
    SOFT_TRY(func_arg(h, &f));
    const soft_entry_info *e = f->info;
    switch ((int)a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *pi = (int)(e->max_threads && e->max_threads < SOFT_MAX_THREADS ? e->max_threads : SOFT_MAX_THREADS);
        break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = (int)e->static_shared_bytes; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = (int)e->local_bytes; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = (int)e->num_regs; break;
    /* The PTX it runs was made for its .target (a library's compute_120):
     * libraries size launches by it (cuSPARSE's csrmv assumed 32 threads
     * for sm_75 where its compute_120 code needs 128). The binary is the
     * device's, as a JIT's would be. */
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: {
        uint32_t t = soft_program_target(f->mod->prog);
        *pi = (int)(t ? t : 75);
        break;
    }
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 75; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = f->max_dynamic_shared; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = f->carveout; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        *pi = 0;
        break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult set_attribute(const void *h, CUfunction_attribute a, int value)
{
    struct CUfunc_st *f;
    SOFT_TRY(func_arg(h, &f));
    switch ((int)a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (value < 0 || (uint64_t)value + f->info->static_shared_bytes > SOFT_SHARED_PER_BLOCK_OPTIN)
            return CUDA_ERROR_INVALID_VALUE;
        f->max_dynamic_shared = value;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (value < -1 || value > 100)
            return CUDA_ERROR_INVALID_VALUE;
        f->carveout = value;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return CUDA_ERROR_NOT_SUPPORTED;   /* compute capability 7.5 has no clusters */
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

SOFT_API CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    return get_attribute(pi, attrib, hfunc);
}

SOFT_API CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    return set_attribute(hfunc, attrib, value);
}

SOFT_API CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    SOFT_TRY(soft_check_device(dev));
    return get_attribute(pi, attrib, kernel);
}

SOFT_API CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
    SOFT_TRY(soft_check_device(dev));
    return set_attribute(kernel, attrib, val);
}

static CUresult set_cache(const void *h, CUfunc_cache config)
{
    struct CUfunc_st *f;
    SOFT_TRY(func_arg(h, &f));
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    f->cache = config;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    return set_cache(hfunc, config);
}

SOFT_API CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    SOFT_TRY(soft_check_device(dev));
    return set_cache(kernel, config);
}

SOFT_API CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f;
    SOFT_TRY(func_arg(function, &f));
    *state = CU_FUNCTION_LOADING_STATE_LOADED;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuFuncLoad(CUfunction function)
{
    struct CUfunc_st *f;
    return func_arg(function, &f);
}

SOFT_API CUresult CUDAAPI cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
    struct CUfunc_st *f;
    SOFT_TRY(func_arg(hfunc, &f));
    return (unsigned)config <= CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Libraries (cuLibrary*): context-independent modules. Here a library holds
 * one module whose globals belong to no context; its kernels are the
 * module's functions (a CUkernel and its CUfunction are one object). A
 * large library's PTX is parsed at its first use. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

CUresult soft_read_file(const char *path, void **data, size_t *len);
void soft_jit_log(unsigned n, const CUjit_option *opts, void **vals, const char *text);
struct CUfunc_st *soft_module_function(struct CUmod_st *mod, const char *name);
CUresult soft_module_global(struct CUmod_st *mod, const char *name, CUdeviceptr *dptr, size_t *bytes);

#define LAZY_PTX_BYTES (1u << 20)

/* Parses a library's PTX into its module; lock held or not yet shared. */
static CUresult lib_parse(struct CUlib_st *lib, char *log, size_t loglen)
{
    char *ptx = lib->ptx, *sass_only = lib->sass_only;
    lib->ptx = lib->sass_only = NULL;
    CUresult r = soft_module_from_ptx(ptx, lib->ptx_len, sass_only, NULL, &lib->mod, log, loglen);
    if (r != CUDA_SUCCESS) {
        lib->err = r;
        return r;
    }
    lib->mod->lib = lib;
    return CUDA_SUCCESS;
}

/* The library's module, parsed at the first call that needs it. */
static CUresult lib_module(struct CUlib_st *lib, struct CUmod_st **mod)
{
    pthread_mutex_lock(&lib->lock);
    CUresult r = lib->err;
    if (r == CUDA_SUCCESS && !lib->mod)
        r = lib_parse(lib, NULL, 0);
    *mod = lib->mod;
    pthread_mutex_unlock(&lib->lock);
    return r;
}

static void lib_free(struct CUlib_st *lib)
{
    soft_module_free(lib->mod);
    free(lib->ptx);
    free(lib->sass_only);
    pthread_mutex_destroy(&lib->lock);
    free(lib);
}

/* Library options: CU_LIBRARY_BINARY_IS_PRESERVED is a hint that takes no
 * value (cuBLASLt passes it with a NULL value array; softgpu keeps its own
 * copy regardless) and is invalid from a file; the host table option needs
 * its value. Anything else is refused. */
static bool options_valid(unsigned n, const CUlibraryOption *opts, void *const *vals, bool from_file)
{
    if (n && !opts)
        return false;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == CU_LIBRARY_BINARY_IS_PRESERVED && !from_file)
            continue;
        if (opts[i] != CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE || !vals)
            return false;
    }
    return true;
}

static CUresult load(CUlibrary *library, const void *code, size_t len, CUjit_option *jitOptions,
                     void **jitOptionsValues, unsigned numJitOptions, unsigned numLibraryOptions,
                     CUlibraryOption *libraryOptions, void **libraryOptionValues)
{
    if (!library || !code || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
        !options_valid(numLibraryOptions, libraryOptions, libraryOptionValues, false))
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUlib_st *lib = calloc(1, sizeof *lib);
    if (!lib)
        return CUDA_ERROR_OUT_OF_MEMORY;
    char log[512] = "";
    CUresult r = soft_module_image(code, len, true, &lib->ptx, &lib->ptx_len, &lib->sass_only, log, sizeof log);
    pthread_mutex_init(&lib->lock, NULL);
    /* A large library (cuBLAS's hold megabytes of PTX, dozens of them
     * loaded at cublasCreate) is parsed when first used, as a lazily
     * loading driver does; a small one at once, so its errors come here. */
    if (r == CUDA_SUCCESS && lib->ptx_len <= LAZY_PTX_BYTES)
        r = lib_parse(lib, log, sizeof log);
    soft_jit_log(numJitOptions, jitOptions, jitOptionsValues, log);
    if (r != CUDA_SUCCESS) {
        lib_free(lib);
        return r;
    }
    if (!soft_handle_add(lib, SOFT_LIBRARY)) {
        lib_free(lib);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *library = lib;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                            void **jitOptionsValues, unsigned int numJitOptions,
                                            CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                            unsigned int numLibraryOptions)
{
    return load(library, code, SIZE_MAX, jitOptions, jitOptionsValues, numJitOptions, numLibraryOptions,
                libraryOptions, libraryOptionValues);
}

SOFT_API CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                                void **jitOptionsValues, unsigned int numJitOptions,
                                                CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                                unsigned int numLibraryOptions)
{
    if (!library || !fileName || !options_valid(numLibraryOptions, libraryOptions, libraryOptionValues, true))
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    void *data;
    size_t len;
    SOFT_TRY(soft_read_file(fileName, &data, &len));
    CUresult r = load(library, data, len, jitOptions, jitOptionsValues, numJitOptions, numLibraryOptions,
                      libraryOptions, libraryOptionValues);
    free(data);
    return r;
}

SOFT_API CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(library, SOFT_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    soft_handle_remove(library);
    lib_free(library);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(library, SOFT_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUmod_st *mod;
    SOFT_TRY(lib_module(library, &mod));
    struct CUfunc_st *f = soft_module_function(mod, name);
    if (!f)
        return CUDA_ERROR_NOT_FOUND;
    *pKernel = (CUkernel)f;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(lib, SOFT_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUmod_st *mod;
    SOFT_TRY(lib_module(lib, &mod));
    *count = mod->nfuncs;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
    if (!kernels)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(lib, SOFT_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUmod_st *mod;
    SOFT_TRY(lib_module(lib, &mod));
    for (unsigned i = 0; i < numKernels && i < mod->nfuncs; i++)
        kernels[i] = (CUkernel)&mod->funcs[i];
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    if (!pMod)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(library, SOFT_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUmod_st *mod;
    SOFT_TRY(lib_module(library, &mod));
    *pMod = mod;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(library, SOFT_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUmod_st *mod;
    SOFT_TRY(lib_module(library, &mod));
    return soft_module_global(mod, name, dptr, bytes);
}

SOFT_API CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(library, SOFT_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    /* A __managed__ variable is its global: this process's memory, which
     * the CPU uses at the address kernels use. */
    struct CUmod_st *mod;
    SOFT_TRY(lib_module(library, &mod));
    for (uint32_t i = 0; i < mod->nglobals; i++) {
        const soft_global_info *g = soft_program_global(mod->prog, i);
        if (g->name && g->managed && strcmp(g->name, name) == 0)
            return soft_module_global(mod, name, dptr, bytes);
    }
    return CUDA_ERROR_NOT_FOUND;
}

SOFT_API CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUfunc_st *f = soft_func_get(kernel);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    /* The kernel made a function of a context: where a lazily loading GPU
     * driver would compile it, and refuse it. */
    SOFT_TRY(soft_func_runnable(f));
    *pFunc = f;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    if (!pLib)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUfunc_st *f = soft_func_get(kernel);
    if (!f || !f->mod->lib)
        return CUDA_ERROR_INVALID_HANDLE;
    *pLib = f->mod->lib;
    return CUDA_SUCCESS;
}

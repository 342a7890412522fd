/* Modules: an image (PTX text, fatbin wrapper or container) becomes a parsed
 * engine program, one function per .entry and one tracked allocation per
 * module-scope .global/.const variable, bound into the program. */
#include "softgpu/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static struct CUmod_st *modules;

void soft_module_hold(struct CUmod_st *mod)
{
    atomic_fetch_add(&mod->inflight, 1);
}

void soft_module_release(struct CUmod_st *mod)
{
    if (atomic_fetch_sub(&mod->inflight, 1) == 1) {
        pthread_mutex_lock(&lock);
        pthread_cond_broadcast(&idle);
        pthread_mutex_unlock(&lock);
    }
}

void soft_module_free(struct CUmod_st *mod)
{
    if (!mod)
        return;
    pthread_mutex_lock(&lock);
    while (atomic_load(&mod->inflight) > 0)
        pthread_cond_wait(&idle, &lock);
    for (struct CUmod_st **p = &modules; *p; p = &(*p)->next)
        if (*p == mod) {
            *p = mod->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    soft_handle_remove(mod);
    for (uint32_t i = 0; i < mod->nfuncs; i++) {
        soft_handle_remove(&mod->funcs[i]);
        free(mod->funcs[i].legacy);
    }
    for (uint32_t i = 0; i < mod->nglobals; i++) {
        if (!mod->globals[i])
            continue;
        soft_range r;
        if (soft_range_remove(mod->globals[i], &r))
            soft_pages_free((void *)(uintptr_t)r.base, r.size);
    }
    free(mod->globals);
    soft_refs_free(mod);
    free(mod->funcs);
    soft_program_free(mod->prog);
    free(mod);
}

void soft_module_drop_ctx(struct CUctx_st *ctx)
{
    for (;;) {
        struct CUmod_st *m;
        pthread_mutex_lock(&lock);
        for (m = modules; m && m->ctx != ctx; m = m->next)
            ;
        pthread_mutex_unlock(&lock);
        if (!m)
            return;
        soft_module_free(m);
    }
}

static CUresult failed(CUresult r, const char *what, char *log, size_t loglen)
{
    soft_log("%s", what);
    if (log && loglen && log != what)
        snprintf(log, loglen, "%s", what);
    return r;
}

CUresult soft_module_image(const void *image, size_t len, bool library, char **ptx, size_t *ptx_len,
                           char **sass_only, char *log, size_t loglen)
{
    char msg[512];
    *ptx = NULL;
    *sass_only = NULL;
    CUresult r = soft_fatbin_ptx(image, len, ptx, ptx_len, msg, sizeof msg);
    /* A library loads lazily: its SASS-only kernels are refused when used. */
    if (r == CUDA_ERROR_NOT_SUPPORTED && library && soft_fatbin_sass_stub(image, len, ptx, ptx_len) == CUDA_SUCCESS) {
        *sass_only = strdup(msg);
        if (!*sass_only) {
            free(*ptx);
            *ptx = NULL;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        r = CUDA_SUCCESS;
    }
    if (r != CUDA_SUCCESS)
        return failed(r, msg, log, loglen);
    return CUDA_SUCCESS;
}

CUresult soft_module_load(const void *image, size_t len, struct CUctx_st *ctx,
                          struct CUmod_st **out, char *log, size_t loglen)
{
    char *ptx, *sass_only;
    size_t ptx_len = 0;
    SOFT_TRY(soft_module_image(image, len, !ctx, &ptx, &ptx_len, &sass_only, log, loglen));
    return soft_module_from_ptx(ptx, ptx_len, sass_only, ctx, out, log, loglen);
}

CUresult soft_module_from_ptx(char *ptx, size_t ptx_len, char *sass_only, struct CUctx_st *ctx,
                              struct CUmod_st **out, char *log, size_t loglen)
{
    char msg[512];
    CUresult r;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m) {
        free(ptx);
        free(sass_only);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->ctx = ctx;
    msg[0] = 0;
    r = soft_program_parse(ptx, ptx_len, &m->prog, msg, sizeof msg);
    if (r == CUDA_SUCCESS && sass_only && (r = soft_program_refuse_all(m->prog, sass_only)) != CUDA_SUCCESS)
        snprintf(msg, sizeof msg, "out of memory refusing a SASS-only library's kernels");
    free(sass_only);
    if (r != CUDA_SUCCESS) {
        /* PTX for a newer GPU (a library's compute_120 entry, say) is run
         * like any other (an interpreter is not bound to its target); the
         * target is named for context. */
        const char *t = strstr(ptx, ".target sm_");
        unsigned sm = t ? (unsigned)strtoul(t + 11, NULL, 10) : 0;
        char why[600];
        if (sm > 75)
            snprintf(why, sizeof why, "%s (PTX for sm_%u)", msg[0] ? msg : "PTX does not parse", sm);
        else
            snprintf(why, sizeof why, "%s", msg[0] ? msg : "PTX does not parse");
        free(ptx);
        soft_program_free(m->prog);
        free(m);
        return failed(r, why, log, loglen);
    }
    free(ptx);
    m->nfuncs = soft_program_entry_count(m->prog);
    m->nglobals = soft_program_global_count(m->prog);
    m->funcs = calloc(m->nfuncs ? m->nfuncs : 1, sizeof *m->funcs);
    m->globals = calloc(m->nglobals ? m->nglobals : 1, sizeof *m->globals);
    if (!m->funcs || !m->globals) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        struct CUfunc_st *f = &m->funcs[i];
        f->mod = m;
        f->entry = i;
        f->info = soft_program_entry(m->prog, i);
        f->carveout = -1;
        f->max_dynamic_shared = (int)(SOFT_SHARED_PER_BLOCK - f->info->static_shared_bytes);
        if (!soft_handle_add(f, SOFT_FUNC)) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            goto fail;
        }
    }
    for (uint32_t i = 0; i < m->nglobals; i++) {
        const soft_global_info *g = soft_program_global(m->prog, i);
        uint64_t size = g->size ? g->size : 1;
        void *p = soft_pages_alloc(size);
        if (!p) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            goto fail;
        }
        if (g->init && g->size)
            memcpy(p, g->init, g->size);
        soft_range rg = { .base = (uintptr_t)p, .size = size, .kind = SOFT_MEM_GLOBAL,
                          .device = ctx ? ctx->device : 0, .ctx = ctx };
        r = soft_range_add(&rg);
        if (r != CUDA_SUCCESS) {
            soft_pages_free(p, size);
            goto fail;
        }
        m->globals[i] = rg.base;
        soft_program_bind_global(m->prog, i, rg.base);
    }
    r = soft_refs_make(m);
    if (r != CUDA_SUCCESS)
        goto fail;
    if (!soft_handle_add(m, SOFT_MODULE)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    pthread_mutex_lock(&lock);
    m->next = modules;
    modules = m;
    pthread_mutex_unlock(&lock);
    *out = m;
    return CUDA_SUCCESS;
fail:
    soft_module_free(m);
    return r;
}

/* Reads a whole file into a malloc'd buffer (NUL added). */
CUresult soft_read_file(const char *path, void **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > (1ull << 30)) {
        fclose(f);
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return CUDA_ERROR_FILE_NOT_FOUND;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return CUDA_SUCCESS;
}

/* Fills the error log option of cuModuleLoadDataEx / cuLibraryLoadData. */
void soft_jit_log(unsigned n, const CUjit_option *opts, void **vals, const char *text)
{
    if (!opts || !vals)
        return;
    char *buf = NULL;
    size_t size = 0;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER)
            buf = vals[i];
        else if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            size = (size_t)(uintptr_t)vals[i];
        else if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
            vals[i] = (void *)(uintptr_t)0;
    }
    if (buf && size)
        snprintf(buf, size, "%s", text);
    for (unsigned i = 0; i < n; i++)
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES && buf && size)
            vals[i] = (void *)(uintptr_t)(strnlen(buf, size) + 1 <= size ? strnlen(buf, size) + 1 : size);
}

static CUresult load(CUmodule *module, const void *image, size_t len, unsigned n, CUjit_option *opts,
                     void **vals)
{
    if (!module || !image || (n && (!opts || !vals)))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    char log[512] = "";
    CUresult r = soft_module_load(image, len, c, module, log, sizeof log);
    soft_jit_log(n, opts, vals, log);
    return r;
}

SOFT_API CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    return load(module, image, SIZE_MAX, 0, NULL, NULL);
}

SOFT_API CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                             CUjit_option *options, void **optionValues)
{
    return load(module, image, SIZE_MAX, numOptions, options, optionValues);
}

SOFT_API CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return load(module, fatCubin, SIZE_MAX, 0, NULL, NULL);
}

SOFT_API CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    void *data;
    size_t len;
    SOFT_TRY(soft_read_file(fname, &data, &len));
    CUresult r = load(module, data, len, 0, NULL, NULL);
    free(data);
    return r;
}

SOFT_API CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hmod, SOFT_MODULE) || hmod->lib)
        return CUDA_ERROR_INVALID_HANDLE;
    soft_module_free(hmod);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    *mode = CU_MODULE_EAGER_LOADING;
    return CUDA_SUCCESS;
}

/* The function named name in mod, or NULL. */
struct CUfunc_st *soft_module_function(struct CUmod_st *mod, const char *name)
{
    int i = soft_program_find_entry(mod->prog, name);
    return i < 0 || (uint32_t)i >= mod->nfuncs ? NULL : &mod->funcs[i];
}

CUresult soft_func_runnable(const struct CUfunc_st *f)
{
    if (!f->info->refusal)
        return CUDA_SUCCESS;
    soft_log("cannot run kernel %s (CUDA_ERROR_NOT_SUPPORTED): %s", f->info->name, f->info->refusal);
    return CUDA_ERROR_NOT_SUPPORTED;
}

SOFT_API CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hmod, SOFT_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUfunc_st *f = soft_module_function(hmod, name);
    if (!f)
        return CUDA_ERROR_NOT_FOUND;
    SOFT_TRY(soft_func_runnable(f));
    *hfunc = f;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(mod, SOFT_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    *count = mod->nfuncs;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod)
{
    if (!functions)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(mod, SOFT_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < numFunctions && i < mod->nfuncs; i++)
        functions[i] = &mod->funcs[i];
    return CUDA_SUCCESS;
}

/* Address and size of the global named name in mod. */
CUresult soft_module_global(struct CUmod_st *mod, const char *name, CUdeviceptr *dptr, size_t *bytes)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    for (uint32_t i = 0; i < mod->nglobals; i++) {
        const soft_global_info *g = soft_program_global(mod->prog, i);
        if (g->name && strcmp(g->name, name) == 0) {
            if (dptr)
                *dptr = mod->globals[i];
            if (bytes)
                *bytes = g->size;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

SOFT_API CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hmod, SOFT_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    return soft_module_global(hmod, name, dptr, bytes);
}

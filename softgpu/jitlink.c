/* JIT linking (cuLink*): softgpu runs PTX, so a link of one PTX input (what
 * an NVRTC pipeline makes) or one fatbin yields that input as the image,
 * which cuModuleLoadData takes. Linking several inputs against each other
 * (separate compilation, device libraries) is refused with a reason in the
 * error log: the engine has no cross-module symbol resolution yet. */
#include "softgpu/driver.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINK_INPUTS_MAX 256
#define LINK_FILE_MAX ((size_t)1 << 30)

typedef struct link_input {
    CUjitInputType type;
    uint8_t *bytes;
    size_t len;
} link_input;

typedef struct soft_link {
    link_input in[LINK_INPUTS_MAX];
    unsigned count;
    uint8_t *out;
    char *error_log;             /* the caller's CU_JIT_ERROR_LOG_BUFFER */
    size_t error_log_size;
} soft_link;

static void log_error(soft_link *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_error(soft_link *l, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    soft_log("%s", msg);
    if (l->error_log && l->error_log_size)
        snprintf(l->error_log, l->error_log_size, "%s", msg);
}

static CUresult create(unsigned n, CUjit_option *options, void **values, CUlinkState *stateOut)
{
    SOFT_TRY(soft_check_init());
    struct CUctx_st *ctx;
    SOFT_TRY(soft_ctx_current(&ctx));
    if (!stateOut || (n && (!options || !values)))
        return CUDA_ERROR_INVALID_VALUE;
    soft_link *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < n; i++) {
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
            l->error_log = values[i];
        else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            l->error_log_size = (size_t)(uintptr_t)values[i];
    }
    if (l->error_log && l->error_log_size)
        l->error_log[0] = '\0';
    if (!soft_handle_add(l, SOFT_LINK)) {
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *stateOut = (CUlinkState)l;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                         CUlinkState *stateOut)
{
    return create(numOptions, options, optionValues, stateOut);
}

SOFT_API CUresult CUDAAPI cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                      CUlinkState *stateOut)
{
    return create(numOptions, options, optionValues, stateOut);
}

static CUresult add(CUlinkState state, CUjitInputType type, const void *data, size_t size)
{
    soft_link *l = (soft_link *)state;
    if (!soft_handle_valid(l, SOFT_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!data || size == 0 || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->count == LINK_INPUTS_MAX) {
        log_error(l, "cuLinkAddData: more than %d inputs", LINK_INPUTS_MAX);
        return CUDA_ERROR_INVALID_VALUE;
    }
    link_input *in = &l->in[l->count];
    in->bytes = malloc(size + 1);
    if (!in->bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(in->bytes, data, size);
    in->bytes[size] = 0;   /* PTX text need not end in its NUL */
    in->len = size;
    in->type = type;
    l->count++;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                          const char *name, unsigned int numOptions, CUjit_option *options,
                                          void **optionValues)
{
    (void)name;
    (void)numOptions;
    (void)options;
    (void)optionValues;
    return add(state, type, data, size);
}

SOFT_API CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                       const char *name, unsigned int numOptions, CUjit_option *options,
                                       void **optionValues)
{
    return cuLinkAddData_v2(state, type, data, size, name, numOptions, options, optionValues);
}

SOFT_API CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                          unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    soft_link *l = (soft_link *)state;
    if (!soft_handle_valid(l, SOFT_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "rb");
    if (!f) {
        log_error(l, "cuLinkAddFile: cannot open %s", path);
        return CUDA_ERROR_FILE_NOT_FOUND;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap && cap < LINK_FILE_MAX) {
            uint8_t *more = realloc(buf, cap *= 2);
            if (!more) {
                free(buf);
                buf = NULL;
            }
            buf = more;
        } else if (len == cap) {
            break;
        }
    }
    fclose(f);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = len ? add(state, type, buf, len) : CUDA_ERROR_INVALID_VALUE;
    if (!len)
        log_error(l, "cuLinkAddFile: %s is empty", path);
    free(buf);
    return rc;
}

SOFT_API CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                                       unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    return cuLinkAddFile_v2(state, type, path, numOptions, options, optionValues);
}

SOFT_API CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    soft_link *l = (soft_link *)state;
    if (!soft_handle_valid(l, SOFT_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->count != 1 || (l->in[0].type != CU_JIT_INPUT_PTX && l->in[0].type != CU_JIT_INPUT_FATBINARY)) {
        log_error(l, "softgpu links one PTX or fatbin input (given %u input%s%s); linking inputs against each "
                     "other is not supported", l->count, l->count == 1 ? "" : "s",
                  l->count == 1 ? ", not PTX or fatbin" : "");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    free(l->out);
    /* PTX ends in its NUL, as the module loader reads text to its end. */
    size_t n = l->in[0].len + (l->in[0].type == CU_JIT_INPUT_PTX);
    l->out = malloc(n);
    if (!l->out)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(l->out, l->in[0].bytes, n);
    *cubinOut = l->out;
    *sizeOut = n;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
    soft_link *l = (soft_link *)state;
    if (!soft_handle_valid(l, SOFT_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    soft_handle_remove(l);
    for (unsigned i = 0; i < l->count; i++)
        free(l->in[i].bytes);
    free(l->out);
    free(l);
    return CUDA_SUCCESS;
}

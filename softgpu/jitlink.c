/* JIT linking (cuLink*): softgpu runs PTX, so a link's image is PTX. Each
 * input gives its PTX (PTX text; the PTX entry of a fatbin; of a host object
 * or library, the PTX of each fatbin embedded in it) and the engine's
 * soft_ptx_link joins them as nvlink joins relocatable device code (NVRTC
 * -rdc=true, device libraries): externals resolved across inputs, clashing
 * file-local names kept apart. A SASS-only input, LTO-IR (NVVM) or an
 * undefined or twice-defined symbol fails cuLinkComplete with the reason in
 * CU_JIT_ERROR_LOG_BUFFER. */
#include "softgpu/driver.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINK_INPUTS_MAX 256
#define LINK_FILE_MAX ((size_t)1 << 30)

typedef struct link_input {
    CUjitInputType type;
    char *name;                  /* the file, cuLinkAddData's name, or "input N" */
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

static CUresult add(CUlinkState state, CUjitInputType type, const void *data, size_t size, const char *name)
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
    char fallback[32];
    snprintf(fallback, sizeof fallback, "input %u", l->count + 1);
    in->name = strdup(name && *name ? name : fallback);
    if (!in->name) {
        free(in->bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
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
    (void)numOptions;
    (void)options;
    (void)optionValues;
    return add(state, type, data, size, name);
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
    CUresult rc = len ? add(state, type, buf, len, path) : CUDA_ERROR_INVALID_VALUE;
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

/* Appends the PTX of one image to list (the text malloc'd). */
typedef struct ptx_list {
    soft_ptx_input *v;
    unsigned n, cap;
} ptx_list;

static CUresult push_ptx(soft_link *l, ptx_list *list, const link_input *in, const uint8_t *image, size_t len)
{
    char msg[256];
    char *ptx;
    size_t ptx_len;
    CUresult rc = soft_fatbin_ptx(image, len, &ptx, &ptx_len, msg, sizeof msg);
    if (rc != CUDA_SUCCESS) {
        log_error(l, "cuLinkComplete: %s: %s", in->name, msg);
        return rc;
    }
    if (list->n == list->cap) {
        unsigned cap = list->cap ? list->cap * 2 : 8;
        soft_ptx_input *more = realloc(list->v, cap * sizeof *more);
        if (!more) {
            free(ptx);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        list->v = more;
        list->cap = cap;
    }
    list->v[list->n++] = (soft_ptx_input){ .text = ptx, .len = ptx_len, .name = in->name };
    return CUDA_SUCCESS;
}

static CUresult input_ptx(soft_link *l, ptx_list *list, const link_input *in)
{
    switch (in->type) {
    case CU_JIT_INPUT_PTX:
    case CU_JIT_INPUT_FATBINARY:
    case CU_JIT_INPUT_CUBIN:
        return push_ptx(l, list, in, in->bytes, in->len);
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY: {
        /* A host object (or an archive of them) holds its device code as
         * fatbin containers (in .nv_fatbin), 8-byte aligned. */
        unsigned found = 0;
        for (size_t off = 0; off + 16 <= in->len; off += 8) {
            const uint8_t *p = in->bytes + off;
            if (p[0] != 0x50 || p[1] != 0xED || p[2] != 0x55 || p[3] != 0xBA)
                continue;
            CUresult rc = push_ptx(l, list, in, p, in->len - off);
            if (rc != CUDA_SUCCESS)
                return rc;
            found++;
            /* on past the container (header size, then payload size), which
             * push_ptx found within the input */
            uint16_t hsize;
            uint64_t psize;
            memcpy(&hsize, p + 6, 2);
            memcpy(&psize, p + 8, 8);
            off += ((size_t)hsize + (size_t)psize + 7) / 8 * 8 - 8;
        }
        if (found)
            return CUDA_SUCCESS;
        log_error(l, "cuLinkComplete: %s: no fatbin with PTX in this %s: softgpu links PTX", in->name,
                  in->type == CU_JIT_INPUT_OBJECT ? "object" : "library");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    default:
        log_error(l, "cuLinkComplete: %s: LTO-IR (NVVM) input: softgpu links PTX only", in->name);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

SOFT_API CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    soft_link *l = (soft_link *)state;
    if (!soft_handle_valid(l, SOFT_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    if (!l->count) {
        log_error(l, "cuLinkComplete: no inputs were added");
        return CUDA_ERROR_INVALID_VALUE;
    }
    ptx_list list = { 0 };
    CUresult rc = CUDA_SUCCESS;
    for (unsigned i = 0; i < l->count && rc == CUDA_SUCCESS; i++)
        rc = input_ptx(l, &list, &l->in[i]);
    char *out = NULL;
    size_t out_len = 0;
    if (rc == CUDA_SUCCESS) {
        char msg[512];
        rc = soft_ptx_link(list.v, list.n, &out, &out_len, msg, sizeof msg);
        if (rc != CUDA_SUCCESS)
            log_error(l, "cuLinkComplete: %s", msg);
    }
    for (unsigned i = 0; i < list.n; i++)
        free((char *)list.v[i].text);
    free(list.v);
    if (rc != CUDA_SUCCESS)
        return rc;
    free(l->out);
    /* PTX ends in its NUL, as the module loader reads text to its end. */
    l->out = (uint8_t *)out;
    *cubinOut = l->out;
    *sizeOut = out_len + 1;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
    soft_link *l = (soft_link *)state;
    if (!soft_handle_valid(l, SOFT_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    soft_handle_remove(l);
    for (unsigned i = 0; i < l->count; i++) {
        free(l->in[i].bytes);
        free(l->in[i].name);
    }
    free(l->out);
    free(l);
    return CUDA_SUCCESS;
}

/* JIT linking (cuLink*) on a proxy context. The link state lives here: its
 * inputs are kept until cuLinkComplete, which sends them in one request for
 * the agent's driver to link for its device; the image that comes back is
 * the program's until cuLinkDestroy, and loads as any module. Link states
 * made while a local context is current are the local driver's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/job.h"
#include "proto/text.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/image.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/proxy.h"

static CUresult create(unsigned n, CUjit_option *options, void **values, CUlinkState *stateOut)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!stateOut || (n && (!options || !values)))
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *s = arena_new(PROXY_LINK, ctx->device);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < n; i++) {
        switch (options[i]) {
        case CU_JIT_ERROR_LOG_BUFFER: s->u.jit.error_log = values[i]; break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: s->u.jit.error_log_size = (size_t)(uintptr_t)values[i]; break;
        case CU_JIT_INFO_LOG_BUFFER: s->u.jit.info_log = values[i]; break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: s->u.jit.info_log_size = (size_t)(uintptr_t)values[i]; break;
        default: break;   /* optimisation and target options: the agent's driver chooses for its device */
        }
    }
    if (s->u.jit.error_log && s->u.jit.error_log_size)
        s->u.jit.error_log[0] = '\0';
    if (s->u.jit.info_log && s->u.jit.info_log_size)
        s->u.jit.info_log[0] = '\0';
    *stateOut = (CUlinkState)s;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuLinkCreate_v2)
{
    return shim_proxy_current() ? create(numOptions, options, optionValues, stateOut) : SHIM_LOCAL(cuLinkCreate_v2);
}

SHIM_EXPORT(cuLinkCreate)
{
    return shim_proxy_current() ? create(numOptions, options, optionValues, stateOut) : SHIM_LOCAL(cuLinkCreate);
}

static CUresult add(proxy_obj *s, CUjitInputType type, const void *data, size_t size, const char *name)
{
    if (!data || size == 0 || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->u.jit.count == JOB_LINK_INPUTS_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->u.jit.count == s->u.jit.cap) {
        unsigned cap = s->u.jit.cap ? s->u.jit.cap * 2 : 4;
        jit_input *more = realloc(s->u.jit.inputs, cap * sizeof *more);
        if (!more)
            return shim_nomem("the %u inputs of a link", cap);
        s->u.jit.inputs = more;
        s->u.jit.cap = cap;
    }
    jit_input *in = &s->u.jit.inputs[s->u.jit.count];
    in->bytes = malloc(size);
    in->name = strdup(name ? name : "");
    if (!in->bytes || !in->name) {
        free(in->bytes);
        free(in->name);
        in->bytes = NULL;
        in->name = NULL;
        return shim_nomem("a copy of a %zu-byte link input", size);
    }
    memcpy(in->bytes, data, size);
    in->len = size;
    in->type = (uint32_t)type;
    s->u.jit.count++;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuLinkAddData_v2)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    proxy_obj *s = arena_get(state, PROXY_LINK);
    return s ? add(s, type, data, size, name) : SHIM_LOCAL(cuLinkAddData_v2);
}

SHIM_EXPORT(cuLinkAddData)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    proxy_obj *s = arena_get(state, PROXY_LINK);
    return s ? add(s, type, data, size, name) : SHIM_LOCAL(cuLinkAddData);
}

static CUresult add_file(proxy_obj *s, CUjitInputType type, const char *path)
{
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t *buf;
    size_t len;
    if (image_read_file(path, &buf, &len) < 0) {
        shim_log(SHIM_LOG_ERROR, "cuLinkAddFile: %s: %s", path, strerror(errno));
        return errno == ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY
                               : errno == EFBIG ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_FILE_NOT_FOUND;
    }
    const char *base = strrchr(path, '/');
    CUresult rc = len ? add(s, type, buf, len, base ? base + 1 : path) : CUDA_ERROR_INVALID_VALUE;
    free(buf);
    return rc;
}

SHIM_EXPORT(cuLinkAddFile_v2)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    proxy_obj *s = arena_get(state, PROXY_LINK);
    return s ? add_file(s, type, path) : SHIM_LOCAL(cuLinkAddFile_v2);
}

SHIM_EXPORT(cuLinkAddFile)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    proxy_obj *s = arena_get(state, PROXY_LINK);
    return s ? add_file(s, type, path) : SHIM_LOCAL(cuLinkAddFile);
}

static void put_log(char *buf, size_t cap, const char *text, size_t n)
{
    if (!buf || !cap)
        return;
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(buf, text, k);
    buf[k] = '\0';
}

SHIM_EXPORT(cuLinkComplete)
{
    proxy_obj *s = arena_get(state, PROXY_LINK);
    if (!s)
        return SHIM_LOCAL(cuLinkComplete);
    if (!cubinOut || !sizeOut || s->u.jit.count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t total = 12;
    for (unsigned i = 0; i < s->u.jit.count; i++)
        total += 16 + strlen(s->u.jit.inputs[i].name) + s->u.jit.inputs[i].len;
    if (total > JOB_FRAME_LIMIT - 64)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t *req = malloc(total);
    if (!req)
        return shim_nomem("a link request of %zu bytes", total);
    wire_writer w = wire_writer_init(req, total);
    wire_put_u32(&w, JOB_OP_LINK);
    wire_put_u32(&w, (uint32_t)shim_device_at(s->device)->remote_ordinal);
    wire_put_u32(&w, s->u.jit.count);
    for (unsigned i = 0; i < s->u.jit.count; i++) {
        jit_input *in = &s->u.jit.inputs[i];
        wire_put_u32(&w, in->type);
        wire_put_string(&w, in->name, strlen(in->name));
        wire_put_u64(&w, in->len);
        wire_put_bytes(&w, in->bytes, in->len);
    }
    struct iovec iov = { req, w.off };
    frame f;
    const uint8_t *o;
    size_t on;
    CUresult rc = w.err ? CUDA_ERROR_INVALID_VALUE : link_request(s->link, &iov, 1, &f, &o, &on);
    free(req);
    if (w.err)
        return rc;
    wire_reader r = wire_reader_init(o, on);
    if (rc == CUDA_SUCCESS) {
        uint64_t len = wire_get_u64(&r);
        const uint8_t *image = len == wire_remaining(&r) && len ? wire_get_view(&r, (size_t)len) : NULL;
        uint8_t *copy = image ? malloc((size_t)len) : NULL;
        if (!copy) {
            frame_release(&f);
            if (!image)
                return link_malformed(s->link, "an image of %llu bytes in a link answer of %zu",
                                      (unsigned long long)len, on);
            return shim_nomem("a linked image of %llu bytes", (unsigned long long)len);
        }
        memcpy(copy, image, (size_t)len);
        free(s->u.jit.image);
        s->u.jit.image = copy;
        s->u.jit.image_len = (size_t)len;
        *cubinOut = copy;
        *sizeOut = (size_t)len;
    } else if (f.payload) {
        const uint8_t *text;
        size_t n = wire_get_string(&r, &text, JOB_REASON_MAX);
        if (!r.err) {
            /* The agent's driver's log: lines kept, other control bytes
             * shown as '?' so it cannot play tricks on a terminal. */
            char shown[JOB_REASON_MAX + 1];
            text_printable(shown, sizeof shown, text, n, true);
            put_log(s->u.jit.error_log, s->u.jit.error_log_size, shown, n);
            shim_log(SHIM_LOG_ERROR, "cuLinkComplete on %s: %s", shim_device_at(s->device)->label, shown);
        }
    }
    frame_release(&f);
    return rc;
}

SHIM_EXPORT(cuLinkDestroy)
{
    proxy_obj *s = arena_get(state, PROXY_LINK);
    if (!s)
        return SHIM_LOCAL(cuLinkDestroy);
    for (unsigned i = 0; i < s->u.jit.count; i++) {
        free(s->u.jit.inputs[i].bytes);
        free(s->u.jit.inputs[i].name);
    }
    free(s->u.jit.inputs);
    free(s->u.jit.image);
    arena_free(s);
    return CUDA_SUCCESS;
}

/* Encoding a generic call from parameter kinds; see generic.h. The agent's
 * agent/generic.c decodes the same layout: u32 op, u32 device, then per
 * parameter: scalars as u32 or 8 raw bytes, handles as the object's u64 id, device
 * ordinals as the agent's own, strings with their length, and for each
 * output a u8 saying whether the caller gave room for it. */
#include "shim/generic.h"

#include <stdlib.h>
#include <string.h>

#include "proto/job.h"
#include "proto/wire.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/proxy.h"

static bool handle_kind(char k)
{
    return strchr("CMFSELKT", k) != NULL;
}

bool shim_generic_served(const cuda_op_info *op)
{
    if (op->served != 'G')
        return false;
    for (const char *k = op->kinds; *k; k++)
        if (!strchr("bhiuqfdDCMFSELKT1248s", *k))
            return false;
    return true;
}

/* The program's device the call is for: a proxy handle's, a proxy device
 * argument's, else the current proxy context's; -1 when none. */
static int target_device(const cuda_op_info *op, const void *const *args)
{
    for (size_t i = 0; op->kinds[i]; i++) {
        char k = op->kinds[i];
        if (handle_kind(k)) {
            const void *h = *(const void *const *)args[i];
            proxy_obj *o = arena_get(h, PROXY_FREE);
            if (o && o->device >= 0)
                return o->device;
        } else if (k == 'D') {
            int d = *(const int *)args[i];
            shim_device *sd = shim_device_at(d);
            if (sd && sd->proxy)
                return d;
        }
    }
    proxy_obj *ctx = shim_proxy_current();
    return ctx ? ctx->device : -1;
}

CUresult shim_generic_call(const cuda_op_info *op, const void *const *args)
{
    if (!shim_generic_served(op))
        return CUDA_ERROR_NOT_SUPPORTED;
    int dev = target_device(op, args);
    shim_device *d = shim_device_at(dev);
    if (!d || !d->proxy)
        return CUDA_ERROR_INVALID_CONTEXT;
    size_t cap = 64 + 16 * 12;
    for (size_t i = 0; op->kinds[i]; i++)
        if (op->kinds[i] == 's' && *(const char *const *)args[i])
            cap += strnlen(*(const char *const *)args[i], JOB_NAME_MAX + 1);
    uint8_t *body = malloc(cap);
    if (!body)
        return shim_nomem("a %s request (%zu bytes)", op->symbol, cap);
    wire_writer w = wire_writer_init(body, cap);
    wire_put_u32(&w, op->op);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; op->kinds[i]; i++) {
        const void *a = args[i];
        switch (op->kinds[i]) {
        case 'b': wire_put_u32(&w, *(const uint8_t *)a); break;
        case 'h': wire_put_u32(&w, *(const uint16_t *)a); break;
        case 'i': wire_put_u32(&w, (uint32_t)*(const int32_t *)a); break;
        case 'u': wire_put_u32(&w, *(const uint32_t *)a); break;
        /* 64-bit values go raw: any bit pattern is a valid size or double. */
        case 'q': wire_put_bytes(&w, a, 8); break;
        case 'f': wire_put_u32(&w, *(const uint32_t *)a); break;
        case 'd': wire_put_bytes(&w, a, 8); break;
        case 'D': {
            shim_device *sd = shim_device_at(*(const int *)a);
            if (!sd || !sd->proxy || sd->link != d->link)
                rc = CUDA_ERROR_INVALID_DEVICE;
            else
                wire_put_u32(&w, (uint32_t)sd->remote_ordinal);
            break;
        }
        case '1': case '2': case '4': case '8':
            wire_put_u8(&w, *(void *const *)a != NULL);
            break;
        case 's': {
            const char *s = *(const char *const *)a;
            size_t n = s ? strnlen(s, JOB_NAME_MAX + 1) : 0;
            if (n > JOB_NAME_MAX)
                rc = CUDA_ERROR_INVALID_VALUE;
            else
                wire_put_string(&w, s ? s : "", n);
            break;
        }
        default: {
            const void *h = *(const void *const *)a;
            proxy_obj *o = arena_get(h, PROXY_FREE);
            if (h && (!o || o->link != d->link))
                rc = CUDA_ERROR_INVALID_HANDLE;
            else
                wire_put_u64(&w, o ? o->id : 0);
            break;
        }
        }
    }
    if (rc == CUDA_SUCCESS && w.err)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS) {
        free(body);
        return rc;
    }
    struct iovec iov = { body, w.off };
    frame f;
    const uint8_t *out;
    size_t n;
    rc = link_request(d->link, &iov, 1, &f, &out, &n);
    free(body);
    if (rc == CUDA_ERROR_NOT_SUPPORTED)
        shim_log_unsupported_once(op->symbol, d->label);
    if (rc == CUDA_SUCCESS) {
        wire_reader r = wire_reader_init(out, n);
        for (size_t i = 0; op->kinds[i] && !r.err; i++) {
            size_t size = 0;
            switch (op->kinds[i]) {
            case '1': size = 1; break;
            case '2': size = 2; break;
            case '4': size = 4; break;
            case '8': size = 8; break;
            default: continue;
            }
            /* Only output parameters are pointers: read args[i] as one here. */
            void *dst = *(void *const *)args[i];
            const uint8_t *v = wire_get_view(&r, size);
            if (v && dst)
                memcpy(dst, v, size);
        }
        if (wire_reader_finish(&r))
            rc = link_malformed(d->link, "the outputs of %s: %zu bytes, which do not match its parameters",
                                op->symbol, n);
    }
    frame_release(&f);
    /* Work the call put on a stream gets a place on its timeline, so a sync
     * of that stream waits for it like for any handed-over work. */
    for (size_t i = 0; op->kinds[i] && rc == CUDA_SUCCESS; i++) {
        if (op->kinds[i] != 'S')
            continue;
        proxy_obj *s = arena_get(*(const void *const *)args[i], PROXY_STREAM);
        if (!s) {
            proxy_obj *ctx = shim_proxy_current();
            const void *h = *(const void *const *)args[i];
            if (ctx && (h == NULL || h == CU_STREAM_LEGACY))
                s = shim_device_at(ctx->device)->null_stream;
        }
        if (s) {
            handover mark = { .op = JOB_OP_MARK, .stream = s };
            rc = link_handover(s->link, &mark, NULL);
        }
    }
    return rc;
}

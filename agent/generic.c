/* The generic path: operations the table marks 'G' are replayed from their
 * parameter kinds alone. The controller sends each parameter by kind; here
 * handles become this job's real objects, device ordinals stay as sent,
 * outputs get local room, and libffi calls the driver's entry point with
 * the exact signature the kinds describe. The answer carries the outputs
 * in parameter order. */
#include <ffi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/generic.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/wire.h"

#define GENERIC_ARGS_MAX 16

/* One argument's storage: a scalar, a pointer, or output room. */
typedef union slot {
    uint8_t u8;
    uint16_t u16;
    int32_t i32;
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;
    void *p;
} slot;

static ffi_type *ffi_of(char kind)
{
    switch (kind) {
    case 'b': return &ffi_type_uint8;
    case 'h': return &ffi_type_uint16;
    case 'i': case 'D': return &ffi_type_sint32;
    case 'u': return &ffi_type_uint32;
    case 'q': return &ffi_type_uint64;
    case 'f': return &ffi_type_float;
    case 'd': return &ffi_type_double;
    case 'C': case 'M': case 'F': case 'S': case 'E': case 'L': case 'K': case 'T':
    case '1': case '2': case '4': case '8': case 's':
        return &ffi_type_pointer;
    default:
        return NULL;   /* graphs, arrays, structs: not generic */
    }
}

bool generic_supported(const char *kinds)
{
    size_t n = strlen(kinds);
    if (n > GENERIC_ARGS_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!ffi_of(kinds[i]))
            return false;
    return true;
}

CUresult generic_call(const generic_env *env, const cuda_op_info *op, wire_reader *r, uint8_t *out,
                      size_t *out_len, char *why, size_t whylen)
{
    const char *kinds = op->kinds;
    size_t n = strlen(kinds);
    void *fn = env->drv->by_op[op->op];
    if (!generic_supported(kinds)) {
        snprintf(why, whylen, "%s cannot be replayed from its parameter kinds", op->symbol);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (!fn) {
        /* The driver lacks it: an answer the program gets, not a job failure. */
        why[0] = '\0';
        *out_len = 0;
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    uint32_t device = wire_get_u32(r);
    slot vals[GENERIC_ARGS_MAX], outs[GENERIC_ARGS_MAX];
    void *argv[GENERIC_ARGS_MAX];
    ffi_type *types[GENERIC_ARGS_MAX];
    char *strings[GENERIC_ARGS_MAX] = { 0 };
    CUresult rc = CUDA_SUCCESS;
    memset(outs, 0, sizeof outs);
    for (size_t i = 0; i < n && !r->err && rc == CUDA_SUCCESS; i++) {
        char k = kinds[i];
        types[i] = ffi_of(k);
        argv[i] = &vals[i];
        switch (k) {
        case 'b': vals[i].u8 = (uint8_t)wire_get_u32(r); break;
        case 'h': vals[i].u16 = (uint16_t)wire_get_u32(r); break;
        case 'i': case 'D': vals[i].i32 = (int32_t)wire_get_u32(r); break;
        case 'u': vals[i].u32 = wire_get_u32(r); break;
        case 'q': wire_get_bytes(r, &vals[i].u64, 8); break;
        case 'f': { uint32_t b = wire_get_u32(r); memcpy(&vals[i].f, &b, 4); break; }
        case 'd': wire_get_bytes(r, &vals[i].d, 8); break;
        case '1': case '2': case '4': case '8':
            vals[i].p = wire_get_u8(r) ? &outs[i] : NULL;
            break;
        case 's': {
            const uint8_t *s;
            size_t len = wire_get_string(r, &s, JOB_NAME_MAX);
            if (!r->err) {
                strings[i] = strndup((const char *)s, len);
                vals[i].p = strings[i];
                if (!strings[i]) {
                    snprintf(why, whylen, "no memory for string argument %zu of %s", i + 1, op->symbol);
                    rc = CUDA_ERROR_OUT_OF_MEMORY;
                }
            }
            break;
        }
        default: {
            uint64_t id = wire_get_u64(r);
            void *real = NULL;
            if (id && !env->handle(env->ctx, k, id, (int)device, &real)) {
                snprintf(why, whylen, "%s names object %llu, which this job does not hold", op->symbol,
                         (unsigned long long)id);
                rc = CUDA_ERROR_INVALID_HANDLE;
            }
            vals[i].p = real;
            break;
        }
        }
    }
    if (rc == CUDA_SUCCESS && wire_reader_finish(r) != 0) {
        snprintf(why, whylen, "malformed %s request", op->symbol);
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc == CUDA_SUCCESS) {
        ffi_cif cif;
        ffi_arg result = 0;
        if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, (unsigned)n, &ffi_type_sint32, types) != FFI_OK) {
            snprintf(why, whylen, "libffi cannot describe %s", op->symbol);
            rc = CUDA_ERROR_NOT_SUPPORTED;
        } else {
            env->use_device(env->ctx, (int)device);
            ffi_call(&cif, FFI_FN(fn), &result, argv);
            rc = (CUresult)(int32_t)result;
            why[0] = '\0';
        }
    }
    for (size_t i = 0; i < n; i++)
        free(strings[i]);
    if (rc != CUDA_SUCCESS && why[0])
        return rc;
    wire_writer w = wire_writer_init(out, GENERIC_OUT_MAX);
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        switch (kinds[i]) {
        case '1': wire_put_u8(&w, outs[i].u8); break;
        case '2': wire_put_u16(&w, outs[i].u16); break;
        case '4': wire_put_u32(&w, outs[i].u32); break;
        case '8': wire_put_bytes(&w, &outs[i].u64, 8); break;
        default: break;
        }
    }
    *out_len = rc == CUDA_SUCCESS ? w.off : 0;
    return rc;
}

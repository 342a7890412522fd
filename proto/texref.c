/* Encoder and decoder of proto/texref.h. */
#include "proto/texref.h"

#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/error.h"

bool texref_op(uint32_t op)
{
    switch (op) {
    case CUDA_OP_cuModuleGetTexRef: case CUDA_OP_cuModuleGetSurfRef:
    case CUDA_OP_cuTexRefSetArray: case CUDA_OP_cuTexRefSetMipmappedArray: case CUDA_OP_cuSurfRefSetArray:
    case CUDA_OP_cuTexRefSetAddress_v2: case CUDA_OP_cuTexRefSetAddress2D_v3: case CUDA_OP_cuTexRefSetBorderColor:
        return true;
    default:
        return false;
    }
}

void texref_put_request(wire_writer *w, const texref_req *q)
{
    wire_put_u32(w, q->op);
    wire_put_u64(w, q->ref);
    switch (q->op) {
    case CUDA_OP_cuModuleGetTexRef:
    case CUDA_OP_cuModuleGetSurfRef:
        wire_put_u64(w, q->object);
        wire_put_string(w, q->name, q->name_len);
        break;
    case CUDA_OP_cuTexRefSetArray:
    case CUDA_OP_cuTexRefSetMipmappedArray:
    case CUDA_OP_cuSurfRefSetArray:
        wire_put_u64(w, q->object);
        wire_put_u32(w, q->flags);
        break;
    case CUDA_OP_cuTexRefSetAddress_v2:
        wire_put_u64(w, q->address);
        wire_put_u64(w, q->bytes);
        break;
    case CUDA_OP_cuTexRefSetAddress2D_v3:
        wire_put_u64(w, q->width);
        wire_put_u64(w, q->height);
        wire_put_u32(w, q->format);
        wire_put_u32(w, q->channels);
        wire_put_u64(w, q->address);
        wire_put_u64(w, q->bytes);
        break;
    case CUDA_OP_cuTexRefSetBorderColor:
        for (int i = 0; i < 4; i++) {
            uint32_t b;
            memcpy(&b, &q->border[i], 4);
            wire_put_u32(w, b);
        }
        break;
    default:
        w->err = RIG_E_MALFORMED;
        break;
    }
}

void texref_get_request(wire_reader *r, texref_req *q)
{
    uint32_t op = q->op;
    memset(q, 0, sizeof *q);
    q->op = op;
    q->ref = wire_get_u64(r);
    switch (op) {
    case CUDA_OP_cuModuleGetTexRef:
    case CUDA_OP_cuModuleGetSurfRef: {
        q->object = wire_get_u64(r);
        const uint8_t *s = NULL;
        q->name_len = (uint32_t)wire_get_string(r, &s, TEXREF_NAME_MAX);
        q->name = (const char *)s;
        break;
    }
    case CUDA_OP_cuTexRefSetArray:
    case CUDA_OP_cuTexRefSetMipmappedArray:
    case CUDA_OP_cuSurfRefSetArray:
        q->object = wire_get_u64(r);
        q->flags = wire_get_u32(r);
        break;
    case CUDA_OP_cuTexRefSetAddress_v2:
        q->address = wire_get_u64(r);
        q->bytes = wire_get_u64(r);
        break;
    case CUDA_OP_cuTexRefSetAddress2D_v3:
        q->width = wire_get_u64(r);
        q->height = wire_get_u64(r);
        q->format = wire_get_u32(r);
        q->channels = wire_get_u32(r);
        q->address = wire_get_u64(r);
        q->bytes = wire_get_u64(r);
        break;
    case CUDA_OP_cuTexRefSetBorderColor:
        for (int i = 0; i < 4; i++) {
            uint32_t b = wire_get_u32(r);
            memcpy(&q->border[i], &b, 4);
        }
        break;
    default:
        r->err = RIG_E_MALFORMED;
        break;
    }
}

/* Encoders and decoders of proto/images.h. */
#include "proto/images.h"

#include <string.h>

#include "proto/error.h"

static void put_f32(wire_writer *w, float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    wire_put_u32(w, b);
}

static float get_f32(wire_reader *r)
{
    uint32_t b = wire_get_u32(r);
    float f;
    memcpy(&f, &b, 4);
    return f;
}

void image_put_array_desc(wire_writer *w, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    wire_put_u64(w, d->Width);
    wire_put_u64(w, d->Height);
    wire_put_u64(w, d->Depth);
    wire_put_u32(w, (uint32_t)d->Format);
    wire_put_u32(w, d->NumChannels);
    wire_put_u32(w, d->Flags);
}

void image_get_array_desc(wire_reader *r, CUDA_ARRAY3D_DESCRIPTOR *d)
{
    memset(d, 0, sizeof *d);
    d->Width = wire_get_u64(r);
    d->Height = wire_get_u64(r);
    d->Depth = wire_get_u64(r);
    d->Format = (CUarray_format)wire_get_u32(r);
    d->NumChannels = wire_get_u32(r);
    d->Flags = wire_get_u32(r);
}

void image_put_resource(wire_writer *w, const CUDA_RESOURCE_DESC *d, uint64_t id)
{
    wire_put_u32(w, (uint32_t)d->resType);
    switch (d->resType) {
    case CU_RESOURCE_TYPE_LINEAR:
        wire_put_u64(w, d->res.linear.devPtr);
        wire_put_u32(w, (uint32_t)d->res.linear.format);
        wire_put_u32(w, d->res.linear.numChannels);
        wire_put_u64(w, d->res.linear.sizeInBytes);
        break;
    case CU_RESOURCE_TYPE_PITCH2D:
        wire_put_u64(w, d->res.pitch2D.devPtr);
        wire_put_u32(w, (uint32_t)d->res.pitch2D.format);
        wire_put_u32(w, d->res.pitch2D.numChannels);
        wire_put_u64(w, d->res.pitch2D.width);
        wire_put_u64(w, d->res.pitch2D.height);
        wire_put_u64(w, d->res.pitch2D.pitchInBytes);
        break;
    default:   /* array, mipmapped array */
        wire_put_u64(w, id);
        break;
    }
    wire_put_u32(w, d->flags);
}

void image_get_resource(wire_reader *r, CUDA_RESOURCE_DESC *d, uint64_t *id)
{
    memset(d, 0, sizeof *d);
    *id = 0;
    d->resType = (CUresourcetype)wire_get_u32(r);
    switch (d->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        *id = wire_get_u64(r);
        break;
    case CU_RESOURCE_TYPE_LINEAR:
        d->res.linear.devPtr = wire_get_u64(r);
        d->res.linear.format = (CUarray_format)wire_get_u32(r);
        d->res.linear.numChannels = wire_get_u32(r);
        d->res.linear.sizeInBytes = wire_get_u64(r);
        break;
    case CU_RESOURCE_TYPE_PITCH2D:
        d->res.pitch2D.devPtr = wire_get_u64(r);
        d->res.pitch2D.format = (CUarray_format)wire_get_u32(r);
        d->res.pitch2D.numChannels = wire_get_u32(r);
        d->res.pitch2D.width = wire_get_u64(r);
        d->res.pitch2D.height = wire_get_u64(r);
        d->res.pitch2D.pitchInBytes = wire_get_u64(r);
        break;
    default:
        r->err = RIG_E_MALFORMED;
        return;
    }
    d->flags = wire_get_u32(r);
}

void image_put_texture(wire_writer *w, const CUDA_TEXTURE_DESC *d)
{
    for (int i = 0; i < 3; i++)
        wire_put_u32(w, (uint32_t)d->addressMode[i]);
    wire_put_u32(w, (uint32_t)d->filterMode);
    wire_put_u32(w, d->flags);
    wire_put_u32(w, d->maxAnisotropy);
    wire_put_u32(w, (uint32_t)d->mipmapFilterMode);
    put_f32(w, d->mipmapLevelBias);
    put_f32(w, d->minMipmapLevelClamp);
    put_f32(w, d->maxMipmapLevelClamp);
    for (int i = 0; i < 4; i++)
        put_f32(w, d->borderColor[i]);
}

void image_get_texture(wire_reader *r, CUDA_TEXTURE_DESC *d)
{
    memset(d, 0, sizeof *d);
    for (int i = 0; i < 3; i++)
        d->addressMode[i] = (CUaddress_mode)wire_get_u32(r);
    d->filterMode = (CUfilter_mode)wire_get_u32(r);
    d->flags = wire_get_u32(r);
    d->maxAnisotropy = wire_get_u32(r);
    d->mipmapFilterMode = (CUfilter_mode)wire_get_u32(r);
    d->mipmapLevelBias = get_f32(r);
    d->minMipmapLevelClamp = get_f32(r);
    d->maxMipmapLevelClamp = get_f32(r);
    for (int i = 0; i < 4; i++)
        d->borderColor[i] = get_f32(r);
}

void image_put_view(wire_writer *w, const CUDA_RESOURCE_VIEW_DESC *v)
{
    wire_put_u8(w, v != NULL);
    if (!v)
        return;
    wire_put_u32(w, (uint32_t)v->format);
    wire_put_u64(w, v->width);
    wire_put_u64(w, v->height);
    wire_put_u64(w, v->depth);
    wire_put_u32(w, v->firstMipmapLevel);
    wire_put_u32(w, v->lastMipmapLevel);
    wire_put_u32(w, v->firstLayer);
    wire_put_u32(w, v->lastLayer);
}

bool image_get_view(wire_reader *r, CUDA_RESOURCE_VIEW_DESC *v)
{
    memset(v, 0, sizeof *v);
    uint8_t has = wire_get_u8(r);
    if (has > 1)
        r->err = RIG_E_MALFORMED;
    if (has != 1)
        return false;
    v->format = (CUresourceViewFormat)wire_get_u32(r);
    v->width = wire_get_u64(r);
    v->height = wire_get_u64(r);
    v->depth = wire_get_u64(r);
    v->firstMipmapLevel = wire_get_u32(r);
    v->lastMipmapLevel = wire_get_u32(r);
    v->firstLayer = wire_get_u32(r);
    v->lastLayer = wire_get_u32(r);
    return true;
}

void image_put_side(wire_writer *w, const image_side *s)
{
    wire_put_u8(w, s->kind);
    wire_put_u64(w, s->at);
    wire_put_u64(w, s->x);
    wire_put_u64(w, s->y);
    wire_put_u64(w, s->z);
    wire_put_u64(w, s->pitch);
    wire_put_u64(w, s->height);
}

void image_get_side(wire_reader *r, image_side *s)
{
    s->kind = wire_get_u8(r);
    s->at = wire_get_u64(r);
    s->x = wire_get_u64(r);
    s->y = wire_get_u64(r);
    s->z = wire_get_u64(r);
    s->pitch = wire_get_u64(r);
    s->height = wire_get_u64(r);
    if (s->kind > IMAGE_SIDE_ARRAY)
        r->err = RIG_E_MALFORMED;
}

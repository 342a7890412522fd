/* proto/images.c: every layout round-trips; every truncation of an encoded
 * record and every single-bit flip decodes from an exact-size heap copy
 * without reading past it (ASan under SAN=1); unknown kinds are refused. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/images.h"
#include "proto/tensormap.h"

/* One record of each layout, and how to decode it. */
enum { REC_ARRAY, REC_RESOURCE_ARRAY, REC_RESOURCE_LINEAR, REC_RESOURCE_PITCH, REC_TEXTURE, REC_VIEW, REC_NOVIEW,
       REC_SIDE, REC_COUNT };

static size_t encode(int rec, uint8_t *buf, size_t cap)
{
    wire_writer w = wire_writer_init(buf, cap);
    switch (rec) {
    case REC_ARRAY: {
        CUDA_ARRAY3D_DESCRIPTOR d = { 640, 480, 6, CU_AD_FORMAT_HALF, 4, CUDA_ARRAY3D_CUBEMAP };
        image_put_array_desc(&w, &d);
        break;
    }
    case REC_RESOURCE_ARRAY: {
        CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY };
        image_put_resource(&w, &r, 77);
        break;
    }
    case REC_RESOURCE_LINEAR: {
        CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_LINEAR,
                                 .res.linear = { 0x200000001000ull, CU_AD_FORMAT_SIGNED_INT16, 2, 4096 } };
        image_put_resource(&w, &r, 0);
        break;
    }
    case REC_RESOURCE_PITCH: {
        CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_PITCH2D,
                                 .res.pitch2D = { 0x200000002000ull, CU_AD_FORMAT_FLOAT, 1, 100, 50, 512 } };
        image_put_resource(&w, &r, 0);
        break;
    }
    case REC_TEXTURE: {
        CUDA_TEXTURE_DESC t = { .addressMode = { CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_MIRROR,
                                                 CU_TR_ADDRESS_MODE_BORDER },
                                .filterMode = CU_TR_FILTER_MODE_LINEAR, .flags = CU_TRSF_NORMALIZED_COORDINATES,
                                .maxAnisotropy = 4, .mipmapLevelBias = 0.5f, .maxMipmapLevelClamp = 3,
                                .borderColor = { 1, -2, 0.25f, 8 } };
        image_put_texture(&w, &t);
        break;
    }
    case REC_VIEW: {
        CUDA_RESOURCE_VIEW_DESC v = { CU_RES_VIEW_FORMAT_FLOAT_1X32, 10, 20, 30, 1, 2, 3, 4, { 0 } };
        image_put_view(&w, &v);
        break;
    }
    case REC_NOVIEW:
        image_put_view(&w, NULL);
        break;
    default: {
        image_side s = { IMAGE_SIDE_ARRAY, 12, 4, 5, 6, 0, 0 };
        image_put_side(&w, &s);
        break;
    }
    }
    cr_assert_eq(w.err, 0);
    return w.off;
}

/* Decodes rec from exactly len bytes; returns the reader's error. */
static int decode(int rec, const uint8_t *p, size_t len)
{
    wire_reader r = wire_reader_init(p, len);
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC t;
    CUDA_RESOURCE_VIEW_DESC v;
    image_side s;
    uint64_t id;
    switch (rec) {
    case REC_ARRAY: image_get_array_desc(&r, &d); break;
    case REC_RESOURCE_ARRAY: case REC_RESOURCE_LINEAR: case REC_RESOURCE_PITCH: image_get_resource(&r, &res, &id); break;
    case REC_TEXTURE: image_get_texture(&r, &t); break;
    case REC_VIEW: case REC_NOVIEW: image_get_view(&r, &v); break;
    default: image_get_side(&r, &s); break;
    }
    return wire_reader_finish(&r);
}

Test(images, round_trips)
{
    uint8_t buf[128];
    size_t n = encode(REC_ARRAY, buf, sizeof buf);
    cr_assert_eq(n, IMAGE_ARRAY_DESC_BYTES);
    wire_reader r = wire_reader_init(buf, n);
    CUDA_ARRAY3D_DESCRIPTOR d;
    image_get_array_desc(&r, &d);
    cr_assert(d.Width == 640 && d.Height == 480 && d.Depth == 6 && d.Format == CU_AD_FORMAT_HALF &&
              d.NumChannels == 4 && d.Flags == CUDA_ARRAY3D_CUBEMAP);

    n = encode(REC_RESOURCE_PITCH, buf, sizeof buf);
    cr_assert_eq(n, IMAGE_RESOURCE_MAX);
    r = wire_reader_init(buf, n);
    CUDA_RESOURCE_DESC res;
    uint64_t id;
    image_get_resource(&r, &res, &id);
    cr_assert_eq(wire_reader_finish(&r), 0);
    cr_assert(res.res.pitch2D.devPtr == 0x200000002000ull && res.res.pitch2D.width == 100 &&
              res.res.pitch2D.height == 50 && res.res.pitch2D.pitchInBytes == 512 && id == 0);
    n = encode(REC_RESOURCE_ARRAY, buf, sizeof buf);
    r = wire_reader_init(buf, n);
    image_get_resource(&r, &res, &id);
    cr_assert(res.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY && id == 77 && !res.res.mipmap.hMipmappedArray);

    n = encode(REC_TEXTURE, buf, sizeof buf);
    cr_assert_eq(n, IMAGE_TEXTURE_BYTES);
    r = wire_reader_init(buf, n);
    CUDA_TEXTURE_DESC t;
    image_get_texture(&r, &t);
    cr_assert(t.addressMode[1] == CU_TR_ADDRESS_MODE_MIRROR && t.filterMode == CU_TR_FILTER_MODE_LINEAR &&
              t.maxAnisotropy == 4 && t.mipmapLevelBias == 0.5f && t.borderColor[1] == -2 && t.borderColor[3] == 8);

    n = encode(REC_VIEW, buf, sizeof buf);
    cr_assert_eq(n, IMAGE_VIEW_MAX);
    r = wire_reader_init(buf, n);
    CUDA_RESOURCE_VIEW_DESC v;
    cr_assert(image_get_view(&r, &v));
    cr_assert(v.width == 10 && v.depth == 30 && v.lastLayer == 4);
    n = encode(REC_NOVIEW, buf, sizeof buf);
    r = wire_reader_init(buf, n);
    cr_assert_not(image_get_view(&r, &v));
    cr_assert_eq(wire_reader_finish(&r), 0);

    n = encode(REC_SIDE, buf, sizeof buf);
    cr_assert_eq(n, IMAGE_SIDE_BYTES);
    r = wire_reader_init(buf, n);
    image_side s;
    image_get_side(&r, &s);
    cr_assert(s.kind == IMAGE_SIDE_ARRAY && s.at == 12 && s.x == 4 && s.y == 5 && s.z == 6);
}

Test(images, unknown_kinds_refused)
{
    uint8_t buf[128];
    size_t n = encode(REC_SIDE, buf, sizeof buf);
    buf[0] = 3;
    cr_assert_neq(decode(REC_SIDE, buf, n), 0);
    n = encode(REC_RESOURCE_LINEAR, buf, sizeof buf);
    buf[0] = 9;   /* no such resource type */
    cr_assert_neq(decode(REC_RESOURCE_LINEAR, buf, n), 0);
    n = encode(REC_VIEW, buf, sizeof buf);
    buf[0] = 2;
    cr_assert_neq(decode(REC_VIEW, buf, n), 0);
}

Test(images, truncations_and_bit_flips)
{
    for (int rec = 0; rec < REC_COUNT; rec++) {
        uint8_t buf[128];
        size_t n = encode(rec, buf, sizeof buf);
        cr_assert_eq(decode(rec, buf, n), 0, "record %d", rec);
        for (size_t len = 0; len < n; len++) {
            uint8_t *copy = malloc(len ? len : 1);
            memcpy(copy, buf, len);
            cr_assert_neq(decode(rec, copy, len), 0, "record %d cut at %zu decodes", rec, len);
            free(copy);
        }
        for (size_t bit = 0; bit < 8 * n; bit++) {
            uint8_t *copy = malloc(n);
            memcpy(copy, buf, n);
            copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            (void)decode(rec, copy, n);   /* may be refused; never reads past n */
            free(copy);
        }
    }
}

Test(images, tensor_map_layout)
{
    tensormap_tiled t = { .type = 7, .rank = 3, .address = 0x200000004000ull, .dim = { 64, 32, 8 },
                          .stride = { 256, 8192 }, .box = { 32, 16, 2 }, .estride = { 1, 1, 2 }, .swizzle = 3,
                          .l2 = 2 };
    uint8_t buf[TENSORMAP_TILED_BYTES];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    tensormap_put_tiled(&w, &t);
    cr_assert(w.err == 0 && w.off == TENSORMAP_TILED_BYTES);
    tensormap_tiled back;
    wire_reader r = wire_reader_init(buf, w.off);
    tensormap_get_tiled(&r, &back);
    cr_assert_eq(wire_reader_finish(&r), 0);
    cr_assert(memcmp(&t, &back, sizeof t) == 0);
    for (size_t len = 0; len < w.off; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, buf, len);
        r = wire_reader_init(copy, len);
        tensormap_get_tiled(&r, &back);
        cr_assert_neq(wire_reader_finish(&r), 0, "cut at %zu decodes", len);
        free(copy);
    }
    /* Rank 0 and rank 6 are refused. */
    for (uint32_t rank = 0; rank <= 6; rank += 6) {
        t.rank = rank;
        w = wire_writer_init(buf, sizeof buf);
        tensormap_put_tiled(&w, &t);
        r = wire_reader_init(buf, w.off);
        tensormap_get_tiled(&r, &back);
        cr_assert_neq(wire_reader_finish(&r), 0, "rank %u", rank);
    }
}

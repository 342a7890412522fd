/* proto/texref.c: every request layout round-trips; every truncation
 * decodes from an exact-size heap copy without reading past it and fails;
 * unknown ops and names too long are refused. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"   /* op numbers; proto has no cuda.h here: 0x10 is CU_AD_FORMAT_HALF */
#include "proto/texref.h"

static const uint32_t ops[] = {
    CUDA_OP_cuModuleGetTexRef, CUDA_OP_cuModuleGetSurfRef, CUDA_OP_cuTexRefSetArray,
    CUDA_OP_cuTexRefSetMipmappedArray, CUDA_OP_cuSurfRefSetArray, CUDA_OP_cuTexRefSetAddress_v2,
    CUDA_OP_cuTexRefSetAddress2D_v3, CUDA_OP_cuTexRefSetBorderColor,
};

static texref_req sample(uint32_t op)
{
    return (texref_req){ .op = op, .ref = 41, .object = 7, .name = "tex_ref", .name_len = 7, .flags = 1,
                         .address = 0x200000001000ull, .bytes = 4096, .width = 640, .height = 480,
                         .format = 0x10, .channels = 4, .border = { 0.5f, -1.0f, 2.0f, 3.25f } };
}

/* Encodes q; decodes the op back from the front, then the rest. */
static size_t encode(const texref_req *q, uint8_t *buf, size_t cap)
{
    wire_writer w = wire_writer_init(buf, cap);
    texref_put_request(&w, q);
    cr_assert_eq(w.err, 0);
    return w.off;
}

static int decode(const uint8_t *buf, size_t n, texref_req *q)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, buf, n);
    wire_reader r = wire_reader_init(copy, n);
    q->op = wire_get_u32(&r);
    texref_get_request(&r, q);
    int err = wire_reader_finish(&r);
    free(copy);
    return err;
}

Test(texref_wire, round_trips)
{
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        cr_assert(texref_op(ops[i]));
        texref_req q = sample(ops[i]), back;
        uint8_t buf[256];
        size_t n = encode(&q, buf, sizeof buf);
        cr_assert_eq(decode(buf, n, &back), 0, "op %u", ops[i]);
        cr_assert_eq(back.op, q.op);
        cr_assert_eq(back.ref, q.ref);
        switch (ops[i]) {
        case CUDA_OP_cuModuleGetTexRef: case CUDA_OP_cuModuleGetSurfRef:
            cr_assert(back.object == 7 && back.name_len == 7 && memcmp(back.name, "tex_ref", 7) == 0);
            break;
        case CUDA_OP_cuTexRefSetAddress_v2:
            cr_assert(back.address == q.address && back.bytes == q.bytes);
            break;
        case CUDA_OP_cuTexRefSetAddress2D_v3:
            cr_assert(back.width == 640 && back.height == 480 && back.format == 0x10 &&
                      back.channels == 4 && back.address == q.address && back.bytes == q.bytes);
            break;
        case CUDA_OP_cuTexRefSetBorderColor:
            cr_assert(memcmp(back.border, q.border, sizeof q.border) == 0);
            break;
        default:
            cr_assert(back.object == 7 && back.flags == 1);
            break;
        }
    }
}

Test(texref_wire, truncations_fail)
{
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        texref_req q = sample(ops[i]), back;
        uint8_t buf[256];
        size_t n = encode(&q, buf, sizeof buf);
        for (size_t cut = 4; cut < n; cut++)
            cr_assert_neq(decode(buf, cut, &back), 0, "op %u cut at %zu of %zu", ops[i], cut, n);
    }
}

Test(texref_wire, unknown_ops_and_long_names_are_refused)
{
    cr_assert(!texref_op(CUDA_OP_cuTexRefSetFilterMode));
    uint8_t buf[64];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    texref_req q = sample(CUDA_OP_cuTexRefSetFilterMode);
    texref_put_request(&w, &q);
    cr_assert_neq(w.err, 0);
    /* A well-formed header with an op this layout does not carry. */
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuTexRefSetFilterMode);
    wire_put_u64(&w, 1);
    texref_req back;
    cr_assert_neq(decode(buf, w.off, &back), 0);
    static char name[TEXREF_NAME_MAX + 2];
    memset(name, 'a', sizeof name - 1);
    q = sample(CUDA_OP_cuModuleGetTexRef);
    q.name = name;
    q.name_len = TEXREF_NAME_MAX + 1;
    static uint8_t big[TEXREF_NAME_MAX + 64];
    w = wire_writer_init(big, sizeof big);
    texref_put_request(&w, &q);
    cr_assert_eq(w.err, 0);
    cr_assert_neq(decode(big, w.off, &back), 0, "a name past TEXREF_NAME_MAX");
}

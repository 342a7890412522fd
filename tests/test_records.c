/* proto/records.c: every layout of proto/records.def round-trips, and its
 * decoder refuses a short body, a long one and an out-of-range field,
 * naming the layout and the field; the bytes are the ones docs/wire.md
 * shows (written here field by field with wire.h, as each end once did). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/records.h"
#include "tests/support.h"

/* What the generic walk knows of a layout, gathered from the field list. */
typedef struct field_info {
    const char *name;
    size_t at, size;            /* in the struct */
    size_t wire_at, wire_size;  /* in the encoding */
    bool u64, side;             /* a value whose top bits make it malformed */
    bool has_bad;
    uint64_t bad;               /* a value outside the field's range */
} field_info;

typedef struct layout_info {
    const char *name, *what;
    bool whole, has_check;
    size_t size;                /* rec_NAME_size */
    size_t nf;
    field_info f[32];
    const char *tail;           /* NULL: none */
    bool tail_exact;            /* TAIL_OF: its length is fixed by a count */
    size_t tail_max;
    void (*put)(wire_writer *w, const void *v);
    int (*get)(wire_reader *r, void *v, rig_why *why);
    size_t struct_size;
} layout_info;

/* Type-erased entry points, one pair per layout. */
#define LAYOUT(name, what)                                                      \
    static void put_##name(wire_writer *w, const void *v) { rec_##name##_put(w, v); } \
    static int get_##name(wire_reader *r, void *v, rig_why *why) { return rec_##name##_get(r, v, why); }
#define FIELD(kind, name)
#define FIELD_ARRAY(kind, name, n)
#define FIELD_BYTES(name, n)
#define LAYOUT_END(name)
#include "proto/records.def"

/* A value of each kind from a seed (u64s stay below 2^62). */
__attribute__((unused)) static void fill_U8(uint8_t *v, uint64_t s) { *v = (uint8_t)(s * 37 + 1); }
static void fill_U32(uint32_t *v, uint64_t s) { *v = (uint32_t)(s * 0x01000193u + 7); }
static void fill_I32(int32_t *v, uint64_t s) { *v = -(int32_t)(s + 2); }
static void fill_U64(uint64_t *v, uint64_t s) { *v = (s * 0x9E3779B97F4A7C15ull) & WIRE_U64_MAX; }
static void fill_SIDE(image_side *v, uint64_t s)
{
    *v = (image_side){ .kind = IMAGE_SIDE_DEVICE, .at = 0x200000001000ull + s, .x = s, .y = s + 1, .z = s + 2,
                       .pitch = 512, .height = 64 };
}

static uint64_t load_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void store_le(uint8_t *p, size_t n, uint64_t v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint8_t *exact_copy(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    cr_assert(c);
    if (n)
        memcpy(c, p, n);
    return c;
}

/* Decodes p[0..n) from an exact-size heap copy (ASan sees any over-read). */
static int decode(const layout_info *L, const uint8_t *p, size_t n, void *v, rig_why *why, size_t *left)
{
    uint8_t *c = exact_copy(p, n);
    wire_reader r = wire_reader_init(c, n);
    why->text[0] = 0;
    int rc = L->get(&r, v, why);
    if (left)
        *left = wire_remaining(&r);
    free(c);
    return rc;
}

static void expect_names(const layout_info *L, const rig_why *why, const char *field, const char *when)
{
    cr_expect(strstr(why->text, L->what), "%s, %s: the message does not name the layout: %s", L->name, when, why->text);
    if (field)
        cr_expect(strstr(why->text, field), "%s, %s: the message does not name %s: %s", L->name, when, field,
                  why->text);
}

/* The field whose wire bytes hold offset at, or the tail. */
static const char *field_at(const layout_info *L, size_t at)
{
    for (size_t i = 0; i < L->nf; i++)
        if (at >= L->f[i].wire_at && at < L->f[i].wire_at + L->f[i].wire_size)
            return L->f[i].name;
    return L->tail;
}

typedef struct walk_ctx {
    const layout_info *L;
    size_t struct_size;
} walk_ctx;

/* Any mutation: a clean result or a named refusal, never a crash. */
static void mutated(const uint8_t *p, size_t n, void *ctx)
{
    walk_ctx *w = ctx;
    uint8_t v[512];
    rig_why why;
    int rc = decode(w->L, p, n, v, &why, NULL);
    if (rc)
        cr_expect(strstr(why.text, w->L->what), "%s: a refusal without its name: %s", w->L->name, why.text);
}

static void check_layout(const layout_info *L, const void *sample, const uint8_t *tail, size_t tail_len)
{
    cr_assert(L->struct_size <= 512);
    uint8_t body[4096], back[512];
    wire_writer w = wire_writer_init(body, sizeof body);
    L->put(&w, sample);
    cr_assert_eq(w.err, 0, "%s: the encoder failed", L->name);
    cr_assert_eq(w.off, L->size, "%s: %zu bytes of fields, not rec_%s_size %zu", L->name, w.off, L->name, L->size);
    cr_assert(w.off + tail_len <= sizeof body);
    memcpy(body + w.off, tail, tail_len);
    size_t n = w.off + tail_len, left;
    rig_why why;

    /* Round trip: every field, and the tail in place. */
    int rc = decode(L, body, n, back, &why, &left);
    cr_assert_eq(rc, 0, "%s: the decoder refused its own encoding: %s", L->name, why.text);
    cr_expect_eq(left, 0u);
    for (size_t i = 0; i < L->nf; i++)
        cr_expect(memcmp((const uint8_t *)sample + L->f[i].at, back + L->f[i].at, L->f[i].size) == 0,
                  "%s: %s did not round-trip", L->name, L->f[i].name);

    /* Every cut inside the fields (and inside a counted tail) is short. */
    for (size_t cut = 0; cut < n; cut++) {
        if (cut >= L->size && !L->tail_exact)
            continue;   /* a shorter free tail is still a body */
        rc = decode(L, body, cut, back, &why, NULL);
        cr_expect_eq(rc, RIG_E_TRUNCATED, "%s cut to %zu bytes: %d (%s)", L->name, cut, rc, why.text);
        expect_names(L, &why, field_at(L, cut), "cut");
    }

    /* A byte too many: trailing for a whole layout (the tail takes it when
     * free); a head leaves it unread. */
    body[n] = 0x5a;
    rc = decode(L, body, n + 1, back, &why, &left);
    if (!L->whole) {
        cr_expect_eq(rc, 0, "%s: a head refused what follows it: %s", L->name, why.text);
        cr_expect_eq(left, 1u, "%s: a head read past its fields", L->name);
    } else if (L->tail && !L->tail_exact) {
        cr_expect(rc == 0 || L->has_check, "%s: a longer tail was refused: %s", L->name, why.text);
    } else {
        cr_expect_eq(rc, RIG_E_TRAILING, "%s with a byte more: %d (%s)", L->name, rc, why.text);
        expect_names(L, &why, n ? (L->tail ? L->tail : L->f[L->nf - 1].name) : NULL, "a byte more");
    }

    /* Each field out of its range, and each u64 above 2^62-1. */
    for (size_t i = 0; i < L->nf; i++) {
        const field_info *f = &L->f[i];
        uint8_t saved[64];
        cr_assert(f->wire_size <= sizeof saved);
        memcpy(saved, body + f->wire_at, f->wire_size);
        if (f->has_bad) {
            store_le(body + f->wire_at, f->wire_size, f->bad);
            rc = decode(L, body, n, back, &why, NULL);
            cr_expect_eq(rc, RIG_E_MALFORMED, "%s: %s = %llu was taken", L->name, f->name,
                         (unsigned long long)f->bad);
            expect_names(L, &why, f->name, "out of range");
        }
        if (f->u64 || f->side) {
            /* A side's kind byte, or the u64's top byte. */
            size_t at = f->side ? f->wire_at : f->wire_at + 7;
            body[at] = 0xff;
            rc = decode(L, body, n, back, &why, NULL);
            cr_expect_eq(rc, RIG_E_MALFORMED, "%s: %s with byte %zu 0xff was taken", L->name, f->name, at);
            expect_names(L, &why, f->name, "malformed");
        }
        memcpy(body + f->wire_at, saved, f->wire_size);
    }

    /* A free tail above its limit. */
    if (L->tail && !L->tail_exact && L->tail_max < 1u << 20) {
        size_t big = L->size + L->tail_max + 1;
        uint8_t *p = calloc(1, big);
        cr_assert(p);
        memcpy(p, body, L->size);
        rc = decode(L, p, big, back, &why, NULL);
        cr_expect_eq(rc, RIG_E_TOO_LONG, "%s: a tail of %zu bytes was taken", L->name, L->tail_max + 1);
        expect_names(L, &why, L->tail, "a long tail");
        free(p);
    }

    walk_ctx ctx = { L, L->struct_size };
    support_each_mutation(body, n, mutated, &ctx);
}

/* One test per layout: a sample from seeds (each ranged field takes the
 * first value its rule allows), then the walk above. Layouts with rules
 * across fields have their own tests below. */
#define LAYOUT(name_, what_)                                                    \
    Test(records, name_)                                                        \
    {                                                                           \
        static layout_info L;                                                   \
        L = (layout_info){ .name = #name_, .what = what_, .whole = true, .size = rec_##name_##_size, \
                           .put = put_##name_, .get = get_##name_, .struct_size = sizeof(rec_##name_) }; \
        rec_##name_ v;                                                          \
        memset(&v, 0, sizeof v);                                                \
        uint64_t seed = 3;                                                      \
        size_t wire_at = 0;                                                     \
        uint8_t tail[1024];                                                     \
        size_t tail_len = 0;                                                    \
        for (size_t i_ = 0; i_ < sizeof tail; i_++)                             \
            tail[i_] = (uint8_t)(i_ * 7 + 1);                                   \
        (void)seed;
#define LAYOUT_HEAD(name_, what_)                                               \
    LAYOUT(name_, what_)                                                        \
    L.whole = false;
#define ADD_FIELD(kind, name_, n)                                               \
    L.f[L.nf++] = (field_info){ .name = #name_, .at = (size_t)((char *)&v.name_ - (char *)&v), \
                                .size = sizeof v.name_, .wire_at = wire_at,     \
                                .wire_size = REC_SIZE_##kind * (n),             \
                                .u64 = REC_SIZE_##kind == 8 && (n) == 1,        \
                                .side = REC_SIZE_##kind == IMAGE_SIDE_BYTES };  \
    wire_at += REC_SIZE_##kind * (n);
#define FIELD(kind, name_)                                                      \
    fill_##kind(&v.name_, seed++);                                              \
    ADD_FIELD(kind, name_, 1)
#define FIELD_IF(kind, name_, ok, expect)                                       \
    ADD_FIELD(kind, name_, 1)                                                   \
    for (uint64_t c_ = 0; c_ < 1000; c_++) {                                    \
        REC_C_##kind x = (REC_C_##kind)c_;                                      \
        if (ok) {                                                               \
            v.name_ = x;                                                        \
            break;                                                              \
        }                                                                       \
    }                                                                           \
    {                                                                           \
        const uint64_t cands_[] = { 0, 3, 255, 0xffffffffu, 0x80000000u };     \
        for (size_t c_ = 0; c_ < 5 && !L.f[L.nf - 1].has_bad; c_++) {           \
            REC_C_##kind x = (REC_C_##kind)cands_[c_];                          \
            if (!(ok) && (uint64_t)x == cands_[c_]) {                           \
                L.f[L.nf - 1].has_bad = true;                                   \
                L.f[L.nf - 1].bad = cands_[c_];                                 \
            }                                                                   \
        }                                                                       \
        cr_assert(L.f[L.nf - 1].has_bad, "no value outside %s's range", #name_); \
    }
#define FIELD_ARRAY(kind, name_, n)                                             \
    for (size_t i_ = 0; i_ < (n); i_++)                                         \
        fill_##kind(&v.name_[i_], seed++);                                      \
    ADD_FIELD(kind, name_, n)
#define FIELD_BYTES(name_, n)                                                   \
    for (size_t i_ = 0; i_ < (n); i_++)                                         \
        v.name_[i_] = (uint8_t)(seed + i_);                                     \
    L.f[L.nf++] = (field_info){ .name = #name_, .at = (size_t)((char *)&v.name_ - (char *)&v), \
                                .size = (n), .wire_at = wire_at, .wire_size = (n) }; \
    wire_at += (n);
#define TAIL(name_, max)                                                        \
    L.tail = #name_;                                                            \
    L.tail_max = (max);                                                         \
    tail_len = 28;
#define TAIL_OF(name_, count, size_)                                            \
    L.tail = #name_;                                                            \
    L.tail_exact = true;                                                        \
    tail_len = (size_t)v.count * (size_);                                       \
    cr_assert(tail_len <= sizeof tail);
#define LAYOUT_CHECK(ok, text) L.has_check = true;
#define LAYOUT_END(name_)                                                       \
    cr_assert_eq(wire_at, L.size, "%s: the field list and rec_%s_size differ", #name_, #name_); \
    if (!L.has_check)                                                           \
        check_layout(&L, &v, tail, tail_len);                                   \
    }
#include "proto/records.def"

/* ---- the bytes as docs/wire.md shows them ---- */

static void expect_bytes(const uint8_t *got, size_t got_n, const wire_writer *want, const char *what)
{
    cr_assert_eq(want->err, 0);
    cr_expect_eq(got_n, want->off, "%s: %zu bytes, not %zu", what, got_n, want->off);
    cr_expect(got_n == want->off && memcmp(got, want->p, got_n) == 0, "%s: other bytes than docs/wire.md's", what);
}

Test(records, launch_bytes)
{
    rec_launch v = { .function = 0x1234, .device = 1, .grid = { 2, 3, 4 }, .block = { 32, 1, 1 }, .shared = 96 };
    uint8_t got[rec_launch_size], want[64];
    wire_writer w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_launch_put(&w, &v);
    wire_put_u64(&d, 0x1234);
    wire_put_u32(&d, 1);
    uint32_t dims[7] = { 2, 3, 4, 32, 1, 1, 96 };
    for (int i = 0; i < 7; i++)
        wire_put_u32(&d, dims[i]);
    expect_bytes(got, w.off, &d, "launch");
    cr_expect_eq(rec_launch_size, 40);
}

Test(records, memset_bytes)
{
    rec_memset v = { .dst = 0x200000000100ull, .pitch = 256, .value = 0xabcd, .element_size = 2, .width = 100,
                     .height = 3 };
    uint8_t got[rec_memset_size], want[64];
    wire_writer w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_memset_put(&w, &v);
    wire_put_u64(&d, 0x200000000100ull);
    wire_put_u64(&d, 256);
    wire_put_u32(&d, 0xabcd);
    wire_put_u32(&d, 2);
    wire_put_u64(&d, 100);
    wire_put_u64(&d, 3);
    expect_bytes(got, w.off, &d, "memset");
}

/* The requests whose fields share a type, so a swap would pass every
 * round trip: their bytes as docs/wire.md's tables order them, written
 * here field by field. */
Test(records, same_typed_fields_in_wire_md_order)
{
    uint8_t got[96], want[96];
    wire_writer w, d;

    w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_p2p_attribute_put(&w, &(rec_p2p_attribute){ .attribute = 1, .src = 2, .dst = 3 });
    wire_put_u32(&d, 1);
    wire_put_u32(&d, 2);
    wire_put_u32(&d, 3);
    expect_bytes(got, w.off, &d, "p2p attribute: attribute, src, dst");

    w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_stream_attr_copy_put(&w, &(rec_stream_attr_copy){ .dst = 11, .src = 12 });
    wire_put_u64(&d, 11);
    wire_put_u64(&d, 12);
    expect_bytes(got, w.off, &d, "stream attribute copy: destination, source");

    w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_peer_enable_put(&w, &(rec_peer_enable){ .device = 1, .peer = 2, .flags = 3 });
    wire_put_u32(&d, 1);
    wire_put_u32(&d, 2);
    wire_put_u32(&d, 3);
    expect_bytes(got, w.off, &d, "peer enable: device, peer, flags");

    w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_occupancy_put(&w, &(rec_occupancy){ .function = 5, .device = 1, .threads = 256, .shared = 64 });
    wire_put_u64(&d, 5);
    wire_put_u32(&d, 1);
    wire_put_u32(&d, 256);
    wire_put_u32(&d, 64);
    expect_bytes(got, w.off, &d, "occupancy: function, device, threads, shared");

    w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_cluster_occupancy_put(&w, &(rec_cluster_occupancy){ .function = 5, .device = 1, .grid = { 2, 3, 4 },
                                                            .block = { 5, 6, 7 }, .shared = 8,
                                                            .cluster = { 9, 10, 11 } });
    wire_put_u64(&d, 5);
    for (uint32_t x = 1; x <= 11; x++)   /* device, grid, block, shared, cluster */
        wire_put_u32(&d, x);
    expect_bytes(got, w.off, &d, "cluster occupancy: grid, block, shared, cluster");

    w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_copy_2d_put(&w, &(rec_copy_2d){ .direction = REC_COPY_DEVICE, .dst = 21, .dst_pitch = 22, .src = 23,
                                        .src_pitch = 24, .width = 25, .height = 26 });
    wire_put_u8(&d, REC_COPY_DEVICE);
    for (uint64_t x = 21; x <= 26; x++)   /* dst, its pitch, src, its pitch, width, height */
        wire_put_u64(&d, x);
    expect_bytes(got, w.off, &d, "2-D copy: dst, dst pitch, src, src pitch, width, height");

    cr_expect_eq(rec_occupancy_size, 20);
    cr_expect_eq(rec_peer_pair_size, 8);
    cr_expect_eq(rec_peer_enable_size, 12);
    cr_expect_eq(rec_p2p_attribute_size, 12);
    cr_expect_eq(rec_stream_attr_get_size, 12);
    cr_expect_eq(rec_stream_attr_copy_size, 16);
}

Test(records, heads_bytes)
{
    rec_record_head h = { .op = 0x8002, .length = 12, .stream = 7, .value = 0 };
    uint8_t got[64], want[64];
    wire_writer w = wire_writer_init(got, sizeof got), d = wire_writer_init(want, sizeof want);
    rec_record_head_put(&w, &h);
    wire_put_u32(&d, 0x8002);
    wire_put_u32(&d, 12);
    wire_put_u64(&d, 7);
    wire_put_u64(&d, 0);
    expect_bytes(got, w.off, &d, "record head");
    cr_expect_eq(rec_record_head_size, 24);
    cr_expect_eq(rec_drop_size, 12);
    cr_expect_eq(rec_word_size, 24);
    cr_expect_eq(rec_stream_create_size, 12);
    cr_expect_eq(rec_event_create_size, 8);
    cr_expect_eq(rec_event_record_size, 12);
    cr_expect_eq(rec_wait_event_size, 12);
    cr_expect_eq(rec_mark_size, 0);
    cr_expect_eq(rec_memset_size, 40);
    cr_expect_eq(rec_copy_dtod_size, 24);
    cr_expect_eq(rec_copy_2d_size, 49);
    cr_expect_eq(rec_copy_3d_size, 2 * IMAGE_SIDE_BYTES + 24);
    cr_expect_eq(rec_graph_launch_size, 8);
    cr_expect_eq(rec_free_async_size, 8);
    cr_expect_eq(rec_cluster_occupancy_size, 8 + 4 + 40);
    cr_expect_eq(rec_stream_attr_set_size, 12 + 64);
    cr_expect_eq(rec_memop_batch_size, 16);
    cr_expect_eq(rec_atomic_caps_size, 12);
}

Test(records, stream_create_priority_is_signed)
{
    rec_stream_create v = { .device = 0, .flags = JOB_STREAM_NULL, .priority = -1 }, back;
    uint8_t got[rec_stream_create_size];
    wire_writer w = wire_writer_init(got, sizeof got);
    rec_stream_create_put(&w, &v);
    cr_expect_eq(load_le(got + 8, 4), 0xffffffffu);
    wire_reader r = wire_reader_init(got, w.off);
    rig_why why;
    cr_assert_eq(rec_stream_create_get(&r, &back, &why), 0, "%s", why.text);
    cr_expect_eq(back.priority, -1);
    cr_expect_eq(back.flags, JOB_STREAM_NULL);
}

/* ---- the copies, whose rules span fields ---- */

static int copy_2d(uint8_t direction, uint64_t width, uint64_t height, size_t rows, rig_why *why)
{
    rec_copy_2d v = { .direction = direction, .dst = 0x200000000000ull, .dst_pitch = 64, .src = 0x200000010000ull,
                      .src_pitch = 64, .width = width, .height = height }, back;
    uint8_t body[rec_copy_2d_size + 64] = { 0 };
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_copy_2d_put(&w, &v);
    cr_assert_eq(w.off, rec_copy_2d_size);
    cr_assert(rows <= 64);
    uint8_t *c = exact_copy(body, w.off + rows);
    wire_reader r = wire_reader_init(c, w.off + rows);
    why->text[0] = 0;
    int rc = rec_copy_2d_get(&r, &back, why);
    if (rc == 0) {
        cr_expect_eq(back.direction, direction);
        cr_expect_eq(back.width, width);
        cr_expect_eq(back.height, height);
        cr_expect_eq(back.rows_len, rows);
        cr_expect(rows == 0 || back.rows == c + rec_copy_2d_size, "the rows are not a view into the body");
    }
    free(c);
    return rc;
}

Test(records, copy_2d_rules)
{
    rig_why why;
    cr_expect_eq(copy_2d(REC_COPY_TO_DEVICE, 8, 4, 32, &why), 0, "%s", why.text);
    cr_expect_eq(copy_2d(REC_COPY_TO_PROGRAM, 8, 4, 0, &why), 0, "%s", why.text);
    cr_expect_eq(copy_2d(REC_COPY_DEVICE, 8, 4, 0, &why), 0, "%s", why.text);
    /* Rows missing, rows where none belong, a wrapped area. */
    cr_expect_eq(copy_2d(REC_COPY_TO_DEVICE, 8, 4, 31, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "2-D copy: width x height"), "%s", why.text);
    cr_expect_eq(copy_2d(REC_COPY_TO_PROGRAM, 8, 4, 1, &why), RIG_E_MALFORMED);
    cr_expect_eq(copy_2d(REC_COPY_DEVICE, 1ull << 32, 1ull << 32, 0, &why), RIG_E_MALFORMED);
    cr_expect_eq(copy_2d(REC_COPY_DEVICE, JOB_COPY_CHUNK, 2, 0, &why), RIG_E_MALFORMED);
    /* A direction out of range names the field. */
    cr_expect_eq(copy_2d(3, 8, 4, 0, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "2-D copy: direction is 3, not 0"), "%s", why.text);
    /* Every cut of the fields is short, naming where it ends. */
    uint8_t body[rec_copy_2d_size];
    rec_copy_2d v = { .direction = REC_COPY_DEVICE, .width = 1, .height = 1 }, back;
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_copy_2d_put(&w, &v);
    for (size_t cut = 0; cut < sizeof body; cut++) {
        uint8_t *c = exact_copy(body, cut);
        wire_reader r = wire_reader_init(c, cut);
        cr_expect_eq(rec_copy_2d_get(&r, &back, &why), RIG_E_TRUNCATED, "cut %zu", cut);
        cr_expect(strstr(why.text, "2-D copy: the body"), "%s", why.text);
        free(c);
    }
}

static int copy_3d(uint8_t from, uint8_t to, uint64_t width, uint64_t height, uint64_t depth, size_t data,
                   rig_why *why)
{
    rec_copy_3d v = { .src = { .kind = from, .at = 0x200000000000ull, .pitch = 64, .height = 4 },
                      .dst = { .kind = to, .at = 5, .x = 1, .y = 2, .z = 3 },
                      .width = width, .height = height, .depth = depth }, back;
    uint8_t body[rec_copy_3d_size + 64] = { 0 };
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_copy_3d_put(&w, &v);
    cr_assert_eq(w.off, rec_copy_3d_size);
    uint8_t *c = exact_copy(body, w.off + data);
    wire_reader r = wire_reader_init(c, w.off + data);
    why->text[0] = 0;
    int rc = rec_copy_3d_get(&r, &back, why);
    if (rc == 0) {
        cr_expect(memcmp(&back.src, &v.src, sizeof v.src) == 0 && memcmp(&back.dst, &v.dst, sizeof v.dst) == 0,
                  "the sides did not round-trip");
        cr_expect_eq(back.depth, depth);
        cr_expect_eq(back.data_len, data);
    }
    free(c);
    return rc;
}

Test(records, copy_3d_rules)
{
    rig_why why;
    cr_expect_eq(copy_3d(IMAGE_SIDE_PROGRAM, IMAGE_SIDE_ARRAY, 8, 4, 1, 32, &why), 0, "%s", why.text);
    cr_expect_eq(copy_3d(IMAGE_SIDE_ARRAY, IMAGE_SIDE_PROGRAM, 8, 4, 2, 0, &why), 0, "%s", why.text);
    cr_expect_eq(copy_3d(IMAGE_SIDE_DEVICE, IMAGE_SIDE_ARRAY, 1ull << 20, 1ull << 10, 64, 0, &why), 0, "%s",
                 why.text);   /* no program side: no 16 MiB bound */
    cr_expect_eq(copy_3d(IMAGE_SIDE_PROGRAM, IMAGE_SIDE_PROGRAM, 8, 4, 1, 32, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "3-D copy: "), "%s", why.text);
    cr_expect_eq(copy_3d(IMAGE_SIDE_PROGRAM, IMAGE_SIDE_ARRAY, 8, 4, 1, 31, &why), RIG_E_MALFORMED);
    cr_expect_eq(copy_3d(IMAGE_SIDE_ARRAY, IMAGE_SIDE_PROGRAM, 8, 4, 1, 1, &why), RIG_E_MALFORMED);
    cr_expect_eq(copy_3d(IMAGE_SIDE_ARRAY, IMAGE_SIDE_DEVICE, 1ull << 40, 1ull << 40, 1, 0, &why), RIG_E_MALFORMED);
    cr_expect_eq(copy_3d(IMAGE_SIDE_ARRAY + 1, IMAGE_SIDE_DEVICE, 8, 4, 1, 0, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "3-D copy: src is malformed"), "%s", why.text);
}

Test(records, tails_point_into_the_body)
{
    uint8_t body[rec_launch_size + 16];
    rec_launch v = { .function = 9 }, back;
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_launch_put(&w, &v);
    memset(body + w.off, 0xee, 16);
    wire_reader r = wire_reader_init(body, sizeof body);
    rig_why why;
    cr_assert_eq(rec_launch_get(&r, &back, &why), 0, "%s", why.text);
    cr_expect(back.params == body + rec_launch_size && back.params_len == 16);
    /* No parameters at all is a launch too. */
    r = wire_reader_init(body, rec_launch_size);
    cr_assert_eq(rec_launch_get(&r, &back, &why), 0, "%s", why.text);
    cr_expect_eq(back.params_len, 0u);
}

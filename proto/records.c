/* The encoders and decoders of proto/records.def, expanded from the one
 * field list (docs/wire.md). */
#include "proto/records.h"

#include <string.h>

static void put_U8(wire_writer *w, const uint8_t *v) { wire_put_u8(w, *v); }
static void put_U32(wire_writer *w, const uint32_t *v) { wire_put_u32(w, *v); }
static void put_I32(wire_writer *w, const int32_t *v) { wire_put_u32(w, (uint32_t)*v); }
static void put_U64(wire_writer *w, const uint64_t *v) { wire_put_u64(w, *v); }
static void put_SIDE(wire_writer *w, const image_side *v) { image_put_side(w, v); }
static void get_U8(wire_reader *r, uint8_t *v) { *v = wire_get_u8(r); }
static void get_U32(wire_reader *r, uint32_t *v) { *v = wire_get_u32(r); }
static void get_I32(wire_reader *r, int32_t *v) { *v = (int32_t)wire_get_u32(r); }
static void get_U64(wire_reader *r, uint64_t *v) { *v = wire_get_u64(r); }
static void get_SIDE(wire_reader *r, image_side *v) { image_get_side(r, v); }

/* A get of field failed: the body ended inside it, or its bytes are not a
 * value (a u64 above 2^62-1, a side of unknown kind). */
static int field_failed(const wire_reader *r, rig_why *why, const char *what, const char *field)
{
    if (r->err == RIG_E_TRUNCATED)
        return why_set(why, r->err, "%s: the body (%zu bytes) ends inside %s", what, r->len, field);
    return why_set(why, r->err, "%s: %s is malformed (a u64 above 2^62-1, or a side of unknown kind)", what, field);
}

static int out_of_range(rig_why *why, const char *what, const char *field, unsigned long long x, const char *expect)
{
    return why_set(why, RIG_E_MALFORMED, "%s: %s is %llu, not %s", what, field, x, expect);
}

/* The rest of the body as a tail of at most max bytes. */
static int tail_get(wire_reader *r, const uint8_t **p, size_t *len, size_t max, rig_why *why, const char *what,
                    const char *field)
{
    *len = wire_remaining(r);
    if (*len > max)
        return why_set(why, RIG_E_TOO_LONG, "%s: %s of %zu bytes, more than %zu", what, field, *len, max);
    *p = wire_get_view(r, *len);
    return 0;
}

/* The rest of the body as exactly count x size bytes. */
static int tail_of_get(wire_reader *r, const uint8_t **p, size_t *len, uint64_t count, size_t size, rig_why *why,
                       const char *what, const char *field, const char *count_name)
{
    uint64_t want = count * size;
    *len = wire_remaining(r);
    if (*len != want)
        return why_set(why, *len < want ? RIG_E_TRUNCATED : RIG_E_TRAILING,
                       "%s: %s of %zu bytes, not %s (%llu) x %zu", what, field, *len, count_name,
                       (unsigned long long)count, size);
    *p = wire_get_view(r, *len);
    return 0;
}

static int finish(const wire_reader *r, rig_why *why, const char *what, const char *last)
{
    if (wire_reader_finish(r))
        return why_set(why, RIG_E_TRAILING, "%s: %zu bytes after %s", what, wire_remaining(r),
                       last ? last : "its (empty) body");
    return 0;
}

/* Encoders: the fields in order; tails stay with the caller. */
#define LAYOUT(name, what)                                                      \
    void rec_##name##_put(wire_writer *w, const rec_##name *v)                  \
    {                                                                           \
        (void)w;                                                                \
        (void)v;
#define FIELD(kind, name) put_##kind(w, &v->name);
#define FIELD_ARRAY(kind, name, n)                                              \
    for (size_t i_ = 0; i_ < (n); i_++)                                         \
        put_##kind(w, &v->name[i_]);
#define FIELD_BYTES(name, n) wire_put_bytes(w, v->name, n);
#define LAYOUT_END(name) }
#include "proto/records.def"

/* Decoders: each field checked as it is read, so a failure names it. */
#define DECODER(name, what_, whole_)                                            \
    int rec_##name##_get(wire_reader *r, rec_##name *v, rig_why *why)           \
    {                                                                           \
        const char *what = what_, *last = NULL;                                 \
        const bool whole = whole_;                                              \
        int rc_ = 0;                                                            \
        (void)what;                                                             \
        (void)rc_;                                                              \
        memset(v, 0, sizeof *v);
#define LAYOUT(name, what) DECODER(name, what, true)
#define LAYOUT_HEAD(name, what) DECODER(name, what, false)
#define FIELD(kind, name)                                                       \
    get_##kind(r, &v->name);                                                    \
    if (r->err)                                                                 \
        return field_failed(r, why, what, #name);                               \
    last = #name;
#define FIELD_IF(kind, name, ok, expect)                                        \
    FIELD(kind, name)                                                           \
    {                                                                           \
        REC_C_##kind x = v->name;                                               \
        if (!(ok))                                                              \
            return out_of_range(why, what, #name, x, expect);                   \
    }
#define FIELD_ARRAY(kind, name, n)                                              \
    for (size_t i_ = 0; i_ < (n); i_++)                                         \
        get_##kind(r, &v->name[i_]);                                            \
    if (r->err)                                                                 \
        return field_failed(r, why, what, #name);                               \
    last = #name;
#define FIELD_BYTES(name, n)                                                    \
    wire_get_bytes(r, v->name, n);                                              \
    if (r->err)                                                                 \
        return field_failed(r, why, what, #name);                               \
    last = #name;
#define TAIL(name, max)                                                         \
    if ((rc_ = tail_get(r, &v->name, &v->name##_len, max, why, what, #name)))   \
        return rc_;                                                             \
    last = #name;
#define TAIL_OF(name, count, size)                                              \
    if ((rc_ = tail_of_get(r, &v->name, &v->name##_len, v->count, size, why,    \
                           what, #name, #count)))                               \
        return rc_;                                                             \
    last = #name;
#define LAYOUT_CHECK(ok, text)                                                  \
    if (!(ok))                                                                  \
        return why_set(why, RIG_E_MALFORMED, "%s: %s", what, text);
#define LAYOUT_END(name)                                                        \
    return whole ? finish(r, why, what, last) : 0;                              \
    }
#include "proto/records.def"
#undef DECODER

/* width x height without wrapping (a wrapped product must not pass for a
 * small copy: the driver would then read past the frame). */
bool rec_copy_2d_fits(const rec_copy_2d *v)
{
    uint64_t area;
    if (__builtin_mul_overflow(v->width, v->height, &area) || area > JOB_COPY_CHUNK)
        return false;
    return v->rows_len == (v->direction == REC_COPY_TO_DEVICE ? area : 0);
}

bool rec_copy_3d_fits(const rec_copy_3d *v)
{
    bool from = v->src.kind == IMAGE_SIDE_PROGRAM, to = v->dst.kind == IMAGE_SIDE_PROGRAM;
    uint64_t area;
    if ((from && to) || __builtin_mul_overflow(v->width, v->height, &area) ||
        __builtin_mul_overflow(area, v->depth, &area) || ((from || to) && area > JOB_COPY_CHUNK))
        return false;
    return v->data_len == (from ? area : 0);
}

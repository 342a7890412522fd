/* The byte codec: every get checks the remaining length first, subtracting
 * on the trusted side (len - off), so no input can walk it off the end. */
#include "proto/wire.h"

#include <string.h>

#include "proto/error.h"

wire_reader wire_reader_init(const void *p, size_t len)
{
    return (wire_reader){ .p = p, .len = len, .off = 0, .err = 0 };
}

/* Returns a pointer to the next n bytes and advances, or NULL with err set. */
static const uint8_t *take(wire_reader *r, size_t n)
{
    if (r->err)
        return NULL;
    if (r->len - r->off < n) {
        r->err = RIG_E_TRUNCATED;
        return NULL;
    }
    const uint8_t *at = r->p + r->off;
    r->off += n;
    return at;
}

uint8_t wire_get_u8(wire_reader *r)
{
    const uint8_t *p = take(r, 1);
    return p ? p[0] : 0;
}

uint16_t wire_get_u16(wire_reader *r)
{
    const uint8_t *p = take(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint32_t wire_get_u32(wire_reader *r)
{
    const uint8_t *p = take(r, 4);
    return p ? wire_load_u32(p) : 0;
}

uint64_t wire_get_u64(wire_reader *r)
{
    const uint8_t *p = take(r, 8);
    if (!p)
        return 0;
    uint64_t v = wire_load_u64(p);
    if (v > WIRE_U64_MAX) {
        r->err = RIG_E_MALFORMED;
        return 0;
    }
    return v;
}

void wire_get_bytes(wire_reader *r, void *out, size_t n)
{
    const uint8_t *p = take(r, n);
    if (p)
        memcpy(out, p, n);
    else if (n)
        memset(out, 0, n);
}

const uint8_t *wire_get_view(wire_reader *r, size_t n)
{
    return take(r, n);
}

size_t wire_get_string(wire_reader *r, const uint8_t **out, size_t limit)
{
    *out = NULL;
    uint32_t n = wire_get_u32(r);
    if (r->err)
        return 0;
    if (n > limit) {
        r->err = RIG_E_TOO_LONG;
        return 0;
    }
    const uint8_t *p = take(r, n);
    if (!p)
        return 0;
    *out = p;
    return n;
}

int wire_reader_finish(const wire_reader *r)
{
    if (r->err)
        return r->err;
    return r->off == r->len ? 0 : RIG_E_TRAILING;
}

size_t wire_remaining(const wire_reader *r)
{
    return r->err ? 0 : r->len - r->off;
}

wire_writer wire_writer_init(void *p, size_t cap)
{
    return (wire_writer){ .p = p, .cap = cap, .off = 0, .err = 0 };
}

/* Returns where to write n bytes and advances, or NULL with err set. */
static uint8_t *room(wire_writer *w, size_t n)
{
    if (w->err)
        return NULL;
    if (w->cap - w->off < n) {
        w->err = RIG_E_TOO_LONG;
        return NULL;
    }
    uint8_t *at = w->p + w->off;
    w->off += n;
    return at;
}

void wire_put_u8(wire_writer *w, uint8_t v)
{
    uint8_t *p = room(w, 1);
    if (p)
        p[0] = v;
}

void wire_put_u16(wire_writer *w, uint16_t v)
{
    uint8_t *p = room(w, 2);
    if (p) {
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
    }
}

void wire_put_u32(wire_writer *w, uint32_t v)
{
    uint8_t *p = room(w, 4);
    if (p)
        wire_store_u32(p, v);
}

void wire_put_u64(wire_writer *w, uint64_t v)
{
    if (v > WIRE_U64_MAX) {
        if (!w->err)
            w->err = RIG_E_INVALID;
        return;
    }
    uint8_t *p = room(w, 8);
    if (p)
        wire_store_u64(p, v);
}

void wire_put_bytes(wire_writer *w, const void *src, size_t n)
{
    uint8_t *p = room(w, n);
    if (p && n)
        memcpy(p, src, n);
}

void wire_put_string(wire_writer *w, const void *src, size_t n)
{
    if (n > UINT32_MAX) {
        if (!w->err)
            w->err = RIG_E_TOO_LONG;
        return;
    }
    wire_put_u32(w, (uint32_t)n);
    wire_put_bytes(w, src, n);
}

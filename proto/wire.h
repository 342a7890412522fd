/* The byte codec: little-endian integers and length-prefixed strings read
 * from and written to caller buffers, bounds-checked, with a sticky error.
 * Wire bytes are never cast to structs or integers. */
#ifndef RIG_PROTO_WIRE_H
#define RIG_PROTO_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* The largest u64 the wire carries; anything above is malformed. */
#define WIRE_U64_MAX ((UINT64_C(1) << 62) - 1)

/* Reads from p[0..len). After the first failure every get returns 0 and err
 * keeps the first RIG_E_* code; callers check err once at the end. */
typedef struct wire_reader {
    const uint8_t *p;
    size_t len, off;
    int err;
} wire_reader;

/* Writes into p[0..cap). A put past cap sets err (RIG_E_TOO_LONG) and writes
 * nothing more; off counts the bytes written. */
typedef struct wire_writer {
    uint8_t *p;
    size_t cap, off;
    int err;
} wire_writer;

wire_reader wire_reader_init(const void *p, size_t len);
uint8_t wire_get_u8(wire_reader *r);
uint16_t wire_get_u16(wire_reader *r);
uint32_t wire_get_u32(wire_reader *r);
/* A value above WIRE_U64_MAX is RIG_E_MALFORMED. */
uint64_t wire_get_u64(wire_reader *r);
/* Copies n raw bytes into out (zeroes out on failure). */
void wire_get_bytes(wire_reader *r, void *out, size_t n);
/* Points *out at n raw bytes inside the buffer, without copying (NULL on failure). */
const uint8_t *wire_get_view(wire_reader *r, size_t n);
/* A u32 length then bytes; a length above limit is RIG_E_TOO_LONG. *out
 * points into the buffer (not NUL-terminated); returns the length. */
size_t wire_get_string(wire_reader *r, const uint8_t **out, size_t limit);
/* Returns r->err, or RIG_E_TRAILING when bytes remain after the last get. */
int wire_reader_finish(const wire_reader *r);
size_t wire_remaining(const wire_reader *r);

wire_writer wire_writer_init(void *p, size_t cap);
void wire_put_u8(wire_writer *w, uint8_t v);
void wire_put_u16(wire_writer *w, uint16_t v);
void wire_put_u32(wire_writer *w, uint32_t v);
/* A value above WIRE_U64_MAX sets RIG_E_INVALID: we never send what we reject. */
void wire_put_u64(wire_writer *w, uint64_t v);
void wire_put_bytes(wire_writer *w, const void *p, size_t n);
/* u32 length then the bytes; n must fit in a u32. */
void wire_put_string(wire_writer *w, const void *p, size_t n);

/* Plain little-endian loads and stores for fixed headers already in memory. */
static inline uint32_t wire_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t wire_load_u64(const uint8_t *p)
{
    return (uint64_t)wire_load_u32(p) | (uint64_t)wire_load_u32(p + 4) << 32;
}

static inline void wire_store_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void wire_store_u64(uint8_t *p, uint64_t v)
{
    wire_store_u32(p, (uint32_t)v);
    wire_store_u32(p + 4, (uint32_t)(v >> 32));
}

#endif

/* Copies' record bodies and the bytes frame's head; see copy.h. */
#include "proto/copy.h"

#include <string.h>

#include "proto/job.h"
#include "proto/wire.h"

_Static_assert(JOB_COPY_CHUNK <= COMPRESS_CHUNK_MAX, "a copy's chunk must fit one compressed chunk");

void copy_htod_write(uint8_t p[static COPY_HTOD_HEAD], uint64_t dst, bool quiet, const compress_header *h)
{
    wire_store_u64(p, dst);
    p[8] = quiet ? COPY_QUIET : 0;
    compress_header_write(p + 9, h);
}

int copy_htod_read(const uint8_t *p, size_t have_len, uint64_t body_len, copy_htod_head *c, rig_why *why)
{
    memset(c, 0, sizeof *c);
    if (have_len < COPY_HTOD_HEAD || body_len < have_len)
        return why_set(why, RIG_E_TRUNCATED, "cuMemcpyHtoDAsync_v2: a body of %llu bytes, the head alone is %d",
                       (unsigned long long)body_len, COPY_HTOD_HEAD);
    c->dst = wire_load_u64(p);
    if (p[8] & ~COPY_QUIET)
        return why_set(why, RIG_E_MALFORMED, "cuMemcpyHtoDAsync_v2: flags %#x (only %#x is defined)", p[8],
                       COPY_QUIET);
    c->quiet = p[8] & COPY_QUIET;
    rig_why inner = { "" };
    int rc = compress_header_read(p + 9, &c->chunk, &inner);
    if (rc)
        return why_set(why, rc, "cuMemcpyHtoDAsync_v2: %s", inner.text);
    if (c->chunk.original > JOB_COPY_CHUNK)
        return why_set(why, RIG_E_TOO_LONG, "cuMemcpyHtoDAsync_v2: %u bytes, above the chunk of %llu",
                       c->chunk.original, (unsigned long long)JOB_COPY_CHUNK);
    if (body_len - COPY_HTOD_HEAD != c->chunk.stored)
        return why_set(why, RIG_E_MALFORMED, "cuMemcpyHtoDAsync_v2: the chunk stores %u bytes, the record carries %llu",
                       c->chunk.stored, (unsigned long long)(body_len - COPY_HTOD_HEAD));
    c->data = p + COPY_HTOD_HEAD;
    c->data_len = have_len - COPY_HTOD_HEAD;
    return RIG_OK;
}

void copy_dtoh_write(uint8_t p[static COPY_DTOH_BODY], uint64_t src, uint64_t length)
{
    wire_store_u64(p, src);
    wire_store_u64(p + 8, length);
}

int copy_dtoh_read(const uint8_t *p, size_t len, uint64_t *src, uint64_t *length, rig_why *why)
{
    if (len != COPY_DTOH_BODY)
        return why_set(why, RIG_E_MALFORMED, "cuMemcpyDtoHAsync_v2: a body of %zu bytes (%d)", len, COPY_DTOH_BODY);
    *src = wire_load_u64(p);
    *length = wire_load_u64(p + 8);
    if (*length > JOB_COPY_CHUNK)
        return why_set(why, RIG_E_TOO_LONG, "cuMemcpyDtoHAsync_v2: %llu bytes, above the chunk of %llu",
                       (unsigned long long)*length, (unsigned long long)JOB_COPY_CHUNK);
    return RIG_OK;
}

void copy_bytes_write(uint8_t p[static COPY_BYTES_HEAD], uint64_t stream, uint64_t value, const compress_header *h)
{
    wire_store_u64(p, stream);
    wire_store_u64(p + 8, value);
    compress_header_write(p + 16, h);
}

int copy_bytes_read(const uint8_t *p, size_t have_len, uint64_t frame_len, copy_bytes_head *b, rig_why *why)
{
    memset(b, 0, sizeof *b);
    if (have_len < COPY_BYTES_HEAD || frame_len < have_len)
        return why_set(why, RIG_E_TRUNCATED, "a bytes message of %llu bytes, shorter than its head (%d)",
                       (unsigned long long)frame_len, COPY_BYTES_HEAD);
    b->stream = wire_load_u64(p);
    b->value = wire_load_u64(p + 8);
    if ((b->stream == 0) != (b->value == 0))
        return why_set(why, RIG_E_MALFORMED, "bytes for stream %llu at value %llu, which no copy has",
                       (unsigned long long)b->stream, (unsigned long long)b->value);
    rig_why inner = { "" };
    int rc = compress_header_read(p + 16, &b->chunk, &inner);
    if (rc)
        return why_set(why, rc, "a bytes message: %s", inner.text);
    if (frame_len - COPY_BYTES_HEAD != b->chunk.stored)
        return why_set(why, RIG_E_MALFORMED, "a bytes message: the chunk stores %u bytes, the message carries %llu",
                       b->chunk.stored, (unsigned long long)(frame_len - COPY_BYTES_HEAD));
    if (b->stream == 0 && b->chunk.method != COMPRESS_RAW)
        return why_set(why, RIG_E_MALFORMED, "device output in a compressed chunk (method %u)", b->chunk.method);
    b->data = p + COPY_BYTES_HEAD;
    b->data_len = have_len - COPY_BYTES_HEAD;
    return RIG_OK;
}

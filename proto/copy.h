/* The layouts of copies between program memory and a device, written once
 * for both ends (docs/wire.md, "Handover records of CUDA operations" and
 * "bytes (6)"): the body of a cuMemcpyHtoDAsync_v2 record, the body of a
 * cuMemcpyDtoHAsync_v2 record, and the head of a bytes frame. The bytes
 * either way travel as one compressed chunk (proto/compress.h): a 9-byte
 * header saying raw or lz4, then the stored bytes. */
#ifndef RIG_PROTO_COPY_H
#define RIG_PROTO_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/compress.h"
#include "proto/error.h"

/* cuMemcpyHtoDAsync_v2: u64 dst, u8 flags, the chunk header, then its
 * stored bytes. */
#define COPY_HTOD_HEAD (8 + 1 + COMPRESS_HEADER_SIZE)
/* flags: a piece with more of its copy behind it on the same stream, which
 * the agent reports no word for: a later piece's word covers it (each word
 * woke the program's reader while its thread was still sending). No other
 * bit is defined. */
#define COPY_QUIET 0x01
/* cuMemcpyDtoHAsync_v2: u64 src, u64 length. */
#define COPY_DTOH_BODY 16
/* A bytes frame: u64 stream, u64 value, the chunk header, then its stored
 * bytes. The receiver of a copy reads that far, then the data straight
 * into place (or into a buffer to decode from). */
#define COPY_BYTES_HEAD (16 + COMPRESS_HEADER_SIZE)

typedef struct copy_htod_head {
    uint64_t dst;
    bool quiet;                 /* COPY_QUIET */
    compress_header chunk;
    const uint8_t *data;        /* the stored bytes present after the head */
    size_t data_len;
} copy_htod_head;

typedef struct copy_bytes_head {
    uint64_t stream, value;     /* both 0: device printf output (raw only) */
    compress_header chunk;
    const uint8_t *data;        /* the stored bytes present after the head */
    size_t data_len;
} copy_bytes_head;

/* Writes an HtoD record's head: dst, COPY_QUIET when quiet, and the chunk
 * header h. */
void copy_htod_write(uint8_t p[static COPY_HTOD_HEAD], uint64_t dst, bool quiet, const compress_header *h);

/* Parses an HtoD record body of body_len bytes of which the first have_len
 * are at p (have_len < body_len when the rest went elsewhere, straight into
 * a buffer): the head, no flag but COPY_QUIET, a valid chunk header, a stored length equal to
 * body_len less the head and an original length of at most JOB_COPY_CHUNK.
 * Returns 0 or RIG_E_TRUNCATED / RIG_E_MALFORMED / RIG_E_TOO_LONG naming it. */
int copy_htod_read(const uint8_t *p, size_t have_len, uint64_t body_len, copy_htod_head *c, rig_why *why);

/* Writes a DtoH record's body. */
void copy_dtoh_write(uint8_t p[static COPY_DTOH_BODY], uint64_t src, uint64_t length);

/* Parses a DtoH record's body: exactly COPY_DTOH_BODY bytes, a length of at
 * most JOB_COPY_CHUNK. Returns 0 or RIG_E_MALFORMED / RIG_E_TOO_LONG. */
int copy_dtoh_read(const uint8_t *p, size_t len, uint64_t *src, uint64_t *length, rig_why *why);

/* Writes a bytes frame's head. */
void copy_bytes_write(uint8_t p[static COPY_BYTES_HEAD], uint64_t stream, uint64_t value, const compress_header *h);

/* Parses a bytes frame whose payload is frame_len bytes, the first have_len
 * of them at p: stream and value both 0 or neither, a valid chunk header
 * (raw for printf output), its stored length equal to the rest of the frame.
 * Returns 0 or RIG_E_TRUNCATED / RIG_E_MALFORMED / RIG_E_TOO_LONG naming it. */
int copy_bytes_read(const uint8_t *p, size_t have_len, uint64_t frame_len, copy_bytes_head *b, rig_why *why);

#endif

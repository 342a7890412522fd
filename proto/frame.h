/* Frames: u64 payload length, u8 kind, payload. The decoder takes a stream
 * in pieces of any size and yields whole frames; lengths are checked against
 * the receiver's limit before anything is allocated. */
#ifndef RIG_PROTO_FRAME_H
#define RIG_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

#define FRAME_HEADER_SIZE 9

/* Message kinds (docs/wire.md "Frames"); numbers never change. */
typedef enum frame_kind {
    FRAME_REQUEST = 1,   /* controller: a call that needs an answer */
    FRAME_ANSWER = 2,    /* agent: answers, in request order */
    FRAME_HANDOVER = 3,  /* controller: stream-ordered work */
    FRAME_DROP = 4,      /* controller: release an object */
    FRAME_WORD = 5,      /* agent: stream s reached timeline value v */
    FRAME_BYTES = 6,     /* agent: bytes of a copy into controller memory */
    FRAME_RAIL = 7,      /* any: a transfer between two agents */
    FRAME_BEAT = 8,      /* any: sent after 1 s of silence */
    FRAME_ABORT = 9,     /* any: the sender's root cause */
    FRAME_CLOSE = 10,    /* any: orderly end */
} frame_kind;

#define FRAME_KIND_MIN FRAME_REQUEST
#define FRAME_KIND_MAX FRAME_CLOSE

/* "request", "answer", ...; "unknown" outside 1..10. */
const char *frame_kind_name(unsigned kind);

/* Writes the 9-byte header for a payload of len bytes. */
void frame_header_encode(uint8_t out[static FRAME_HEADER_SIZE], frame_kind kind, uint64_t len);

/* Parses a 9-byte header: RIG_E_MALFORMED for an unknown kind or a length
 * above 2^62-1, RIG_E_TOO_LONG for one above limit. */
int frame_header_decode(const uint8_t in[static FRAME_HEADER_SIZE], uint64_t limit,
                        frame_kind *kind, uint64_t *len, rig_why *why);

/* A whole frame; the payload is malloc'd and belongs to whoever holds it. */
typedef struct frame {
    frame_kind kind;
    uint64_t len;
    uint8_t *payload;   /* NULL when len is 0 */
} frame;

void frame_release(frame *f);

typedef struct frame_decoder {
    uint64_t limit;                  /* largest payload accepted */
    uint8_t header[FRAME_HEADER_SIZE];
    size_t header_have;
    frame current;
    uint64_t payload_have;
    int err;                          /* sticky: a broken stream stays broken */
    /* Split frames (conn_recv_split): a frame of split_kind (0: none) longer
     * than split_above bytes is yielded after its first split_head bytes;
     * rest counts the payload bytes that follow it, which the caller takes
     * from the stream itself before the next frame. */
    frame_kind split_kind;
    uint64_t split_head, split_above;
    uint64_t rest;
} frame_decoder;

void frame_decoder_init(frame_decoder *d, uint64_t limit);
/* Frees a partly received payload. */
void frame_decoder_reset(frame_decoder *d);

/* Consumes bytes from p[0..n) and sets *used to how many. Returns 1 with
 * *out holding a whole frame (or a split frame's head, d->rest then saying
 * how many of its bytes follow; the caller owns its payload) and the rest of
 * the input unconsumed, 0 when every byte was consumed without completing a
 * frame, or a negative RIG_E_* (sticky) with why saying what was wrong. */
int frame_decoder_feed(frame_decoder *d, const uint8_t *p, size_t n, size_t *used,
                       frame *out, rig_why *why);

/* True when the decoder is between frames (a clean place for a stream to end). */
int frame_decoder_idle(const frame_decoder *d);

#endif

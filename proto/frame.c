/* Frame header codec and the incremental frame decoder. */
#include "proto/frame.h"

#include <stdlib.h>
#include <string.h>

#include "proto/wire.h"

const char *frame_kind_name(unsigned kind)
{
    static const char *const names[] = {
        [FRAME_REQUEST] = "request", [FRAME_ANSWER] = "answer",
        [FRAME_HANDOVER] = "handover", [FRAME_DROP] = "drop",
        [FRAME_WORD] = "word", [FRAME_BYTES] = "bytes",
        [FRAME_RAIL] = "rail", [FRAME_BEAT] = "beat",
        [FRAME_ABORT] = "abort", [FRAME_CLOSE] = "close",
    };
    if (kind < FRAME_KIND_MIN || kind > FRAME_KIND_MAX)
        return "unknown";
    return names[kind];
}

void frame_header_encode(uint8_t out[static FRAME_HEADER_SIZE], frame_kind kind, uint64_t len)
{
    wire_store_u64(out, len);
    out[8] = (uint8_t)kind;
}

int frame_header_decode(const uint8_t in[static FRAME_HEADER_SIZE], uint64_t limit,
                        frame_kind *kind, uint64_t *len, rig_why *why)
{
    uint64_t n = wire_load_u64(in);
    unsigned k = in[8];
    if (k < FRAME_KIND_MIN || k > FRAME_KIND_MAX)
        return why_set(why, RIG_E_MALFORMED, "frame of unknown kind %u", k);
    if (n > WIRE_U64_MAX)
        return why_set(why, RIG_E_MALFORMED, "%s frame announces length %llu, above 2^62-1",
                       frame_kind_name(k), (unsigned long long)n);
    if (n > limit)
        return why_set(why, RIG_E_TOO_LONG, "%s frame of %llu bytes exceeds the limit of %llu",
                       frame_kind_name(k), (unsigned long long)n, (unsigned long long)limit);
    *kind = (frame_kind)k;
    *len = n;
    return 0;
}

void frame_release(frame *f)
{
    if (!f)
        return;
    free(f->payload);
    f->payload = NULL;
    f->len = 0;
}

void frame_decoder_init(frame_decoder *d, uint64_t limit)
{
    memset(d, 0, sizeof *d);
    d->limit = limit;
}

void frame_decoder_reset(frame_decoder *d)
{
    frame_release(&d->current);
    uint64_t limit = d->limit;
    frame_decoder_init(d, limit);
}

int frame_decoder_idle(const frame_decoder *d)
{
    return d->header_have == 0 && d->rest == 0 && !d->err;
}

int frame_decoder_feed(frame_decoder *d, const uint8_t *p, size_t n, size_t *used,
                       frame *out, rig_why *why)
{
    size_t off = 0;
    *used = 0;
    if (d->err)
        return why_set(why, d->err, "frame stream already failed");
    /* A split frame's head is still being fed while rest is counted; the
     * next frame may only begin once the caller has taken the rest. */
    if (d->rest && d->header_have == 0)
        return why_set(why, RIG_E_INVALID, "%llu bytes of a split frame not yet taken", (unsigned long long)d->rest);

    if (d->header_have < FRAME_HEADER_SIZE) {
        size_t want = FRAME_HEADER_SIZE - d->header_have;
        size_t take = n < want ? n : want;
        memcpy(d->header + d->header_have, p, take);
        d->header_have += take;
        off += take;
        if (d->header_have < FRAME_HEADER_SIZE) {
            *used = off;
            return 0;
        }
        int rc = frame_header_decode(d->header, d->limit, &d->current.kind, &d->current.len, why);
        if (rc < 0) {
            d->err = rc;
            *used = off;
            return rc;
        }
        d->payload_have = 0;
        if (d->split_kind && d->current.kind == d->split_kind && d->current.len > d->split_head &&
            d->current.len > d->split_above) {
            d->rest = d->current.len - d->split_head;
            d->current.len = d->split_head;
        }
        if (d->current.len > 0) {
            d->current.payload = malloc(d->current.len);
            if (!d->current.payload) {
                d->err = RIG_E_NOMEM;
                *used = off;
                return why_set(why, RIG_E_NOMEM, "no memory for a %s frame of %llu bytes",
                               frame_kind_name(d->current.kind),
                               (unsigned long long)d->current.len);
            }
        }
    }

    uint64_t want = d->current.len - d->payload_have;
    size_t avail = n - off;
    size_t take = avail < want ? avail : (size_t)want;
    if (take) {
        memcpy(d->current.payload + d->payload_have, p + off, take);
        d->payload_have += take;
        off += take;
    }
    *used = off;
    if (d->payload_have < d->current.len)
        return 0;

    *out = d->current;
    d->current = (frame){ 0 };
    d->header_have = 0;
    d->payload_have = 0;
    return 1;
}

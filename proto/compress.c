/* Compressed chunks and the decision to compress; see compress.h and
 * docs/wire.md ("Compressed chunks"). */
#include "proto/compress.h"

#include <lz4.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/wire.h"

#define SAMPLE_PIECES 16
#define SAMPLE_PIECE 1024
/* Compressed must beat raw by this much: the estimate is from a sample. */
#define PAYS_MARGIN 1.1

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t compress_bound(size_t len)
{
    if (len > COMPRESS_CHUNK_MAX)
        return 0;
    size_t lz4 = (size_t)LZ4_compressBound((int)len);
    return COMPRESS_HEADER_SIZE + (lz4 > len ? lz4 : len);
}

void compress_sparse_floats(uint8_t *p, size_t len, uint64_t seed)
{
    uint64_t x = seed | 1;
    memset(p, 0, len);
    for (size_t i = 0; i + 4 <= len; i += 4) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if ((x & 7) == 0) {
            float f = (float)(x >> 40) / (float)(1u << 24);
            memcpy(p + i, &f, 4);
        }
    }
}

int compress_measure(compress_rates *r, rig_why *why)
{
    enum { LEN = 4 << 20, CHUNK = 1 << 20 };
    int rc = RIG_OK;
    uint8_t *in = malloc(LEN), *out = malloc((size_t)LZ4_compressBound(LEN)), *back = malloc(LEN);
    if (!in || !out || !back) {
        rc = why_set(why, RIG_E_NOMEM, "compress: no memory to measure LZ4's speed");
        goto out;
    }
    compress_sparse_floats(in, LEN, 0x9e3779b97f4a7c15u);
    /* First touches are not LZ4's time. */
    memset(out, 0, (size_t)LZ4_compressBound(LEN));
    memset(back, 0, LEN);
    /* Chunk by chunk, the way copies use it, until 20 ms have passed. */
    int stored[LEN / CHUNK];
    size_t done = 0;
    double t0 = now_s(), t;
    do {
        size_t at = 0;
        for (int c = 0; c < LEN / CHUNK; c++) {
            stored[c] = LZ4_compress_default((const char *)in + c * CHUNK, (char *)out + at, CHUNK,
                                             LZ4_compressBound(CHUNK));
            at += (size_t)stored[c];
        }
        done += LEN;
    } while ((t = now_s() - t0) < 0.02);
    r->compress_bps = (double)done / t;
    done = 0;
    t0 = now_s();
    do {
        size_t at = 0;
        for (int c = 0; c < LEN / CHUNK; c++) {
            if (LZ4_decompress_safe((const char *)out + at, (char *)back + c * CHUNK, stored[c], CHUNK) != CHUNK) {
                rc = why_set(why, RIG_E_INVALID, "compress: LZ4 does not decode its own output");
                goto out;
            }
            at += (size_t)stored[c];
        }
        done += LEN;
    } while ((t = now_s() - t0) < 0.02);
    r->decompress_bps = (double)done / t;
    if (memcmp(in, back, LEN) != 0)
        rc = why_set(why, RIG_E_INVALID, "compress: LZ4 decodes its own output to other bytes");
out:
    free(in);
    free(out);
    free(back);
    return rc;
}

static compress_rates machine;
static pthread_once_t machine_once = PTHREAD_ONCE_INIT;

static void measure_machine(void)
{
    rig_why why = { "" };
    if (compress_measure(&machine, &why) < 0)
        machine = (compress_rates){ 0 };
}

compress_rates compress_machine(void)
{
    pthread_once(&machine_once, measure_machine);
    compress_rates r = machine;
    r.link_bps = 0;
    return r;
}

double compress_link_rate(uint64_t measured)
{
    const char *v = getenv("RIG_LINK_RATE");
    char *end = NULL;
    double forced = v ? strtod(v, &end) : 0;
    if (v && end != v && *end == '\0' && forced > 0)
        return forced;
    return (double)measured;
}

bool compress_kept_up(size_t len, double seconds, double link_bps)
{
    return !(seconds > 0) || (double)len / seconds > PAYS_MARGIN * link_bps;
}

static double min3(double a, double b, double c)
{
    double m = a < b ? a : b;
    return m < c ? m : c;
}

compress_verdict compress_decide(const void *p, size_t len, const compress_rates *r)
{
    compress_verdict v = { .pays = false, .ratio = 1, .raw_bps = r->link_bps, .compressed_bps = 0 };
    if (len == 0 || !(r->link_bps > 0) || !(r->compress_bps > 0) || !(r->decompress_bps > 0))
        return v;
    /* The pieces side by side, so repeats across them count as they would
     * inside one chunk. */
    uint8_t sample[SAMPLE_PIECES * SAMPLE_PIECE];
    char packed[LZ4_COMPRESSBOUND(SAMPLE_PIECES * SAMPLE_PIECE)];
    size_t n;
    if (len <= sizeof sample) {
        memcpy(sample, p, len);
        n = len;
    } else {
        size_t stride = (len - SAMPLE_PIECE) / (SAMPLE_PIECES - 1);
        for (int i = 0; i < SAMPLE_PIECES; i++)
            memcpy(sample + i * SAMPLE_PIECE, (const uint8_t *)p + (size_t)i * stride, SAMPLE_PIECE);
        n = sizeof sample;
    }
    double t0 = now_s();
    int got = LZ4_compress_default((const char *)sample, packed, (int)n, (int)sizeof packed);
    double t = now_s() - t0;
    if (got <= 0)
        return v;
    v.ratio = (double)n / (double)got;
    /* LZ4 runs far faster over long runs than over the calibration's
     * floats; the sample's own time says so. A preempted sample only
     * looks slower, so the larger of the two is never optimistic by much. */
    double c = r->compress_bps;
    if (t > 0 && (double)n / t > c)
        c = (double)n / t;
    v.compressed_bps = min3(c, r->link_bps * v.ratio, r->decompress_bps);
    v.pays = v.compressed_bps > PAYS_MARGIN * r->link_bps;
    return v;
}

void compress_header_write(uint8_t p[static COMPRESS_HEADER_SIZE], const compress_header *h)
{
    p[0] = h->method;
    wire_store_u32(p + 1, h->original);
    wire_store_u32(p + 5, h->stored);
}

int compress_chunk(const void *in, size_t len, bool lz4, void *out, size_t cap, size_t *out_len, rig_why *why)
{
    if (len > COMPRESS_CHUNK_MAX)
        return why_set(why, RIG_E_TOO_LONG, "compress: a chunk of %zu bytes (at most %u)", len,
                       (unsigned)COMPRESS_CHUNK_MAX);
    if (cap < compress_bound(len))
        return why_set(why, RIG_E_TOO_LONG, "compress: %zu bytes of room for a chunk of %zu (needs %zu)", cap, len,
                       compress_bound(len));
    uint8_t *o = out;
    compress_header h = { .method = COMPRESS_RAW, .original = (uint32_t)len, .stored = (uint32_t)len };
    if (lz4 && len > 0) {
        /* Into the full bound (LZ4 is faster so); it must come out below
         * the original, or the chunk goes raw. */
        int got = LZ4_compress_default(in, (char *)o + COMPRESS_HEADER_SIZE, (int)len, LZ4_compressBound((int)len));
        if (got > 0 && (size_t)got < len) {
            h.method = COMPRESS_LZ4;
            h.stored = (uint32_t)got;
        }
    }
    if (h.method == COMPRESS_RAW && len > 0)
        memcpy(o + COMPRESS_HEADER_SIZE, in, len);
    compress_header_write(o, &h);
    *out_len = COMPRESS_HEADER_SIZE + h.stored;
    return RIG_OK;
}

int compress_header_read(const uint8_t p[static COMPRESS_HEADER_SIZE], compress_header *h, rig_why *why)
{
    h->method = p[0];
    h->original = wire_load_u32(p + 1);
    h->stored = wire_load_u32(p + 5);
    if (h->original > COMPRESS_CHUNK_MAX)
        return why_set(why, RIG_E_TOO_LONG, "compressed chunk: original length %u above the limit %u", h->original,
                       (unsigned)COMPRESS_CHUNK_MAX);
    switch (h->method) {
    case COMPRESS_RAW:
        if (h->stored != h->original)
            return why_set(why, RIG_E_MALFORMED, "compressed chunk: raw, stored length %u is not the original %u",
                           h->stored, h->original);
        return RIG_OK;
    case COMPRESS_LZ4:
        if (h->stored == 0 || h->stored >= h->original)
            return why_set(why, RIG_E_MALFORMED,
                           "compressed chunk: lz4, stored length %u is not between 1 and the original %u less one",
                           h->stored, h->original);
        return RIG_OK;
    default:
        return why_set(why, RIG_E_MALFORMED, "compressed chunk: method %u (0 raw, 1 lz4)", h->method);
    }
}

int compress_body_decode(const compress_header *h, const void *body, void *out, size_t cap, rig_why *why)
{
    if (cap < h->original)
        return why_set(why, RIG_E_TOO_LONG, "compressed chunk: original length %u, room for %zu", h->original, cap);
    if (h->method == COMPRESS_RAW) {
        if (h->original > 0)
            memcpy(out, body, h->original);
        return RIG_OK;
    }
    if (h->method != COMPRESS_LZ4)
        return why_set(why, RIG_E_MALFORMED, "compressed chunk: method %u (0 raw, 1 lz4)", h->method);
    int got = LZ4_decompress_safe(body, out, (int)h->stored, (int)h->original);
    if (got < 0)
        return why_set(why, RIG_E_MALFORMED, "compressed chunk: lz4 body of %u bytes is corrupt (liblz4 says %d)",
                       h->stored, got);
    if ((uint32_t)got != h->original)
        return why_set(why, RIG_E_MALFORMED, "compressed chunk: lz4 body decodes to %d bytes, the header says %u", got,
                       h->original);
    return RIG_OK;
}

int decompress_chunk(const void *in, size_t in_len, void *out, size_t cap, size_t *consumed, size_t *out_len,
                     rig_why *why)
{
    if (in_len < COMPRESS_HEADER_SIZE)
        return why_set(why, RIG_E_TRUNCATED, "compressed chunk: %zu bytes, the header alone is %d", in_len,
                       COMPRESS_HEADER_SIZE);
    compress_header h;
    int rc = compress_header_read(in, &h, why);
    if (rc)
        return rc;
    if (in_len - COMPRESS_HEADER_SIZE < h.stored)
        return why_set(why, RIG_E_TRUNCATED, "compressed chunk: stored length %u, %zu bytes follow the header",
                       h.stored, in_len - COMPRESS_HEADER_SIZE);
    rc = compress_body_decode(&h, (const uint8_t *)in + COMPRESS_HEADER_SIZE, out, cap, why);
    if (rc)
        return rc;
    *consumed = COMPRESS_HEADER_SIZE + h.stored;
    *out_len = h.original;
    return RIG_OK;
}

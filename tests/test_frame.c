/* Frames: header layout, kinds, limits checked before allocation, and
 * incremental decoding from pieces of every size. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/frame.h"
#include "proto/wire.h"
#include "tests/support.h"
#include "tests/seed.h"

Test(frame, header_layout)
{
    uint8_t h[FRAME_HEADER_SIZE];
    frame_header_encode(h, FRAME_WORD, 0x0102030405060708ull);
    const uint8_t expect[] = { 8, 7, 6, 5, 4, 3, 2, 1, 5 };
    cr_assert_arr_eq(h, expect, sizeof expect);
}

Test(frame, kind_names_match_design)
{
    const char *names[] = { "request", "answer", "handover", "drop", "word",
                            "bytes", "rail", "beat", "abort", "close" };
    for (unsigned k = 1; k <= 10; k++)
        cr_assert_str_eq(frame_kind_name(k), names[k - 1]);
    cr_assert_str_eq(frame_kind_name(0), "unknown");
    cr_assert_str_eq(frame_kind_name(11), "unknown");
}

Test(frame, unknown_kind_and_huge_length)
{
    uint8_t h[FRAME_HEADER_SIZE];
    frame_kind kind;
    uint64_t len;
    rig_why why;
    frame_header_encode(h, FRAME_BEAT, 0);
    h[8] = 0;
    cr_assert_eq(frame_header_decode(h, 100, &kind, &len, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "unknown kind 0"), "%s", why.text);
    h[8] = 11;
    cr_assert_eq(frame_header_decode(h, 100, &kind, &len, &why), RIG_E_MALFORMED);

    wire_store_u64(h, WIRE_U64_MAX + 1);
    h[8] = FRAME_BYTES;
    cr_assert_eq(frame_header_decode(h, UINT64_MAX, &kind, &len, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "2^62-1"), "%s", why.text);
}

Test(frame, limit_checked_before_allocation)
{
    uint8_t h[FRAME_HEADER_SIZE];
    frame_header_encode(h, FRAME_HANDOVER, 1ull << 40);
    frame_decoder d;
    frame_decoder_init(&d, 1 << 20);
    frame f = { 0 };
    size_t used;
    rig_why why;
    int rc = frame_decoder_feed(&d, h, sizeof h, &used, &f, &why);
    cr_assert_eq(rc, RIG_E_TOO_LONG);
    cr_assert_null(d.current.payload, "nothing may be allocated for a refused length");
    cr_assert(strstr(why.text, "handover frame of 1099511627776 bytes exceeds the limit of 1048576"),
              "%s", why.text);
    /* The stream stays failed. */
    cr_assert_eq(frame_decoder_feed(&d, h, sizeof h, &used, &f, &why), RIG_E_TOO_LONG);
    frame_decoder_reset(&d);
}

/* Builds a stream of nframes random frames; records them in kinds/lens. */
static uint8_t *build_stream(unsigned seed, int nframes, size_t *total, frame_kind *kinds,
                             uint64_t *lens, uint8_t **payloads)
{
    srand(seed);
    size_t cap = 0;
    for (int i = 0; i < nframes; i++) {
        kinds[i] = (frame_kind)(1 + rand() % 10);
        lens[i] = rand() % 4 == 0 ? 0 : (uint64_t)(rand() % 3000);
        cap += FRAME_HEADER_SIZE + lens[i];
    }
    uint8_t *buf = malloc(cap);
    size_t off = 0;
    for (int i = 0; i < nframes; i++) {
        frame_header_encode(buf + off, kinds[i], lens[i]);
        off += FRAME_HEADER_SIZE;
        payloads[i] = buf + off;
        for (uint64_t j = 0; j < lens[i]; j++)
            buf[off++] = (uint8_t)rand();
    }
    *total = off;
    return buf;
}

Test(frame, stream_in_pieces_of_any_size)
{
    unsigned seed = test_seed();
    enum { N = 60 };
    frame_kind kinds[N];
    uint64_t lens[N];
    uint8_t *payloads[N];
    size_t total;
    uint8_t *stream = build_stream(seed, N, &total, kinds, lens, payloads);

    for (size_t piece_max = 1; piece_max <= 4099; piece_max = piece_max * 3 + 1) {
        frame_decoder d;
        frame_decoder_init(&d, 4096);
        int got = 0;
        size_t off = 0;
        while (off < total) {
            size_t piece = 1 + (size_t)rand() % piece_max;
            if (piece > total - off)
                piece = total - off;
            size_t in_piece = 0;
            while (in_piece < piece) {
                frame f;
                size_t used;
                int rc = frame_decoder_feed(&d, stream + off + in_piece, piece - in_piece, &used, &f, NULL);
                cr_assert_geq(rc, 0, "seed %u", seed);
                in_piece += used;
                if (rc == 1) {
                    cr_assert_lt(got, N);
                    cr_assert_eq(f.kind, kinds[got], "seed %u frame %d", seed, got);
                    cr_assert_eq(f.len, lens[got], "seed %u frame %d", seed, got);
                    cr_assert(f.len == 0 || memcmp(f.payload, payloads[got], f.len) == 0,
                              "seed %u frame %d", seed, got);
                    frame_release(&f);
                    got++;
                } else {
                    cr_assert_eq(in_piece, piece, "0 means the piece was consumed");
                }
            }
            off += piece;
        }
        cr_assert_eq(got, N, "seed %u piece %zu", seed, piece_max);
        cr_assert(frame_decoder_idle(&d));
        frame_decoder_reset(&d);
    }
    free(stream);
}

/* Decodes a stream from an exact-size copy: frames or an error, never a
 * crash; a cut stream leaves the decoder mid-frame. */
static void decode_stream(const uint8_t *p, size_t n, void *ctx)
{
    size_t whole = *(size_t *)ctx;
    frame_decoder d;
    frame_decoder_init(&d, 64);
    size_t off = 0;
    int rc = 0;
    while (off < n) {
        frame f;
        size_t used;
        rc = frame_decoder_feed(&d, p + off, n - off, &used, &f, NULL);
        off += used;
        if (rc < 0)
            break;
        if (rc == 1) {
            cr_assert_leq(f.len, 64);
            frame_release(&f);
        }
    }
    if (n < whole && rc >= 0)
        cr_assert(!frame_decoder_idle(&d) || n == 0 || n == 9 + 5,
                  "a cut stream must be mid-frame (n=%zu)", n);
    frame_decoder_reset(&d);
}

Test(frame, every_truncation_and_bit_flip)
{
    uint8_t buf[2 * FRAME_HEADER_SIZE + 5 + 20];
    frame_header_encode(buf, FRAME_REQUEST, 5);
    memcpy(buf + 9, "abcde", 5);
    frame_header_encode(buf + 14, FRAME_ABORT, 20);
    memset(buf + 23, 'x', 20);
    size_t whole = sizeof buf;
    decode_stream(buf, whole, &whole);
    support_each_mutation(buf, whole, decode_stream, &whole);
}

/* A split frame's head fed one byte at a time still comes out (the rest is
 * counted from the header on), and the next frame waits for the rest. */
Test(frame, split_head_in_pieces)
{
    uint8_t s[FRAME_HEADER_SIZE + 40];
    frame_header_encode(s, FRAME_BYTES, 40);
    for (int i = 0; i < 40; i++)
        s[FRAME_HEADER_SIZE + i] = (uint8_t)i;
    frame_decoder d;
    frame_decoder_init(&d, 100);
    d.split_kind = FRAME_BYTES;
    d.split_head = 16;
    frame f;
    size_t used = 0, off = 0;
    int rc = 0;
    while (rc == 0 && off < sizeof s) {
        rc = frame_decoder_feed(&d, s + off, 1, &used, &f, NULL);
        off += used;
    }
    cr_assert_eq(rc, 1);
    cr_assert_eq(off, FRAME_HEADER_SIZE + 16);
    cr_assert_eq(f.len, 16);
    cr_assert_eq(f.payload[15], 15);
    cr_assert_eq(d.rest, 24);
    cr_assert(!frame_decoder_idle(&d));
    frame_release(&f);
    rig_why why;
    cr_assert_eq(frame_decoder_feed(&d, s, FRAME_HEADER_SIZE, &used, &f, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "not yet taken"), "%s", why.text);
    d.rest = 0;
    cr_assert(frame_decoder_idle(&d));
    frame_decoder_reset(&d);
}

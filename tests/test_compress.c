/* proto/compress: chunks round trip with each method for zeros, patterns,
 * random bytes and sparse floats at every length (tails of 1-3 bytes, short
 * last blocks); every truncation and bit flip of a compressed chunk is
 * refused or decodes to the right length inside its buffers; lying headers
 * and zero-word bodies are refused naming what; zero words' vector and
 * scalar paths write a reference's bytes; the decision says no for
 * random bytes, yes for zeros on a slow link, zero words for sparse floats
 * on a link faster than LZ4, no on a link faster than both; docs/wire.md's
 * chunk header is the code's. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proto/compress.h"
#include "proto/wire.h"
#include "tests/seed.h"
#include "tests/support.h"

enum { ZEROS, PATTERN, RANDOM, SPARSE };
static const char *const kind_names[] = { "zeros", "pattern", "random", "sparse floats" };

static uint64_t rng;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint8_t *make(int kind, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    cr_assert(p);
    for (size_t i = 0; i < len; i++) {
        switch (kind) {
        case ZEROS: p[i] = 0; break;
        case PATTERN: p[i] = (uint8_t)(i * 7 % 251); break;
        case RANDOM: p[i] = (uint8_t)next(); break;
        case SPARSE: p[i] = 0; break;
        }
    }
    if (kind == SPARSE)     /* 1 float in 8 random in [0, 1), as after a ReLU */
        for (size_t i = 0; i + 4 <= len; i += 4)
            if (next() % 8 == 0) {
                float f = (float)(next() >> 40) / (float)(1u << 24);
                memcpy(p + i, &f, 4);
            }
    return p;
}

/* Compresses in[0..len) into an exact-size heap chunk; returns it. */
static uint8_t *chunk_of(const uint8_t *in, size_t len, uint8_t method, size_t *n)
{
    size_t cap = compress_bound(len);
    cr_assert_gt(cap, len);
    uint8_t *room = malloc(cap);
    rig_why why = { "" };
    cr_assert_eq(compress_chunk(in, len, method, room, cap, n, &why), 0, "%s", why.text);
    cr_assert_leq(*n, cap);
    uint8_t *exact = malloc(*n);
    memcpy(exact, room, *n);
    free(room);
    return exact;
}

static void round_trip(int kind, size_t len)
{
    uint8_t *in = make(kind, len);
    for (uint8_t method = COMPRESS_RAW; method <= COMPRESS_ZEROS; method++) {
        size_t n;
        uint8_t *c = chunk_of(in, len, method, &n);
        compress_header h;
        rig_why why = { "" };
        cr_assert_eq(compress_header_read(c, &h, &why), 0, "%s", why.text);
        cr_assert_eq(h.original, len);
        cr_assert_eq(n, COMPRESS_HEADER_SIZE + h.stored);
        /* Zero words shrink only zeros and sparse floats; LZ4 the pattern too. */
        bool shrinks = method == COMPRESS_LZ4 ? kind != RANDOM : kind == ZEROS || kind == SPARSE;
        if (method == COMPRESS_RAW || !shrinks || len == 0)
            cr_assert_eq(h.method, COMPRESS_RAW, "%s of %zu bytes, method %u: stored as %u", kind_names[kind], len,
                         method, h.method);
        else if (len >= 4096)
            cr_assert_eq(h.method, method, "%s of %zu bytes did not compress with method %u", kind_names[kind], len,
                         method);
        uint8_t *out = malloc(len ? len : 1);
        size_t consumed = 0, out_len = 0;
        cr_assert_eq(decompress_chunk(c, n, out, len, &consumed, &out_len, &why), 0, "%s of %zu: %s",
                     kind_names[kind], len, why.text);
        cr_assert_eq(consumed, n);
        cr_assert_eq(out_len, len);
        cr_assert(len == 0 || memcmp(in, out, len) == 0, "%s of %zu bytes came back different", kind_names[kind], len);
        free(out);
        free(c);
    }
    free(in);
}

Test(compress, round_trips)
{
    rng = test_seed() | 1;
    static const size_t lens[] = { 0, 1, 3, 16, 127, 128, 129, 131, 1000, 4096, 4099, 65536, 1 << 20, (3 << 20) + 2 };
    for (int kind = 0; kind < 4; kind++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
            round_trip(kind, lens[i]);
}

Test(compress, largest_chunk_and_ratios)
{
    rng = test_seed() | 1;
    size_t len = COMPRESS_CHUNK_MAX, n;
    uint8_t *in = make(SPARSE, len);
    uint8_t *out = malloc(len);
    size_t consumed, out_len;
    rig_why why = { "" };
    for (uint8_t method = COMPRESS_LZ4; method <= COMPRESS_ZEROS; method++) {
        uint8_t *c = chunk_of(in, len, method, &n);
        /* 1 float in 8: zero words keep a mask word per 32 and the floats. */
        cr_assert_lt(n, len / 2, "16 MiB of sparse floats compressed to %zu bytes (method %u)", n, method);
        cr_assert_eq(c[0], method);
        memset(out, 0xee, len);
        cr_assert_eq(decompress_chunk(c, n, out, len, &consumed, &out_len, &why), 0, "%s", why.text);
        cr_assert_eq(memcmp(in, out, len), 0);
        free(c);
    }
    free(out);
    free(in);
    /* One byte more is refused before anything is done. */
    uint8_t small[64];
    cr_assert_eq(compress_bound((size_t)COMPRESS_CHUNK_MAX + 1), 0);
    cr_assert_eq(compress_chunk(small, (size_t)COMPRESS_CHUNK_MAX + 1, COMPRESS_LZ4, small, sizeof small, &n, &why),
                 RIG_E_TOO_LONG);
    cr_assert(strstr(why.text, "at most"), "%s", why.text);
    /* Too little room for the worst case is refused too. */
    cr_assert_eq(compress_chunk(small, 60, COMPRESS_LZ4, small, 60, &n, &why), RIG_E_TOO_LONG);
}

/* ---- corrupt and lying chunks ---- */

typedef struct mutation_ctx {
    size_t original;
    unsigned refused, decoded;
} mutation_ctx;

static void check_mutation(const uint8_t *p, size_t n, void *vctx)
{
    mutation_ctx *ctx = vctx;
    /* Exactly the original's room, on the heap, so an overrun is seen. */
    uint8_t *out = malloc(ctx->original);
    size_t consumed = 0, out_len = 0;
    rig_why why = { "" };
    int rc = decompress_chunk(p, n, out, ctx->original, &consumed, &out_len, &why);
    if (rc == 0) {
        /* Zero words whose header's length lost trailing zero words still
         * decode, to the length the header says: the copy's own length
         * (proto/copy.c) is what refuses that one. */
        size_t claimed = n >= 5 ? wire_load_u32(p + 1) : 0;
        size_t want = p[0] == COMPRESS_ZEROS ? claimed : ctx->original;
        cr_assert_eq(out_len, want, "a mutated chunk decoded to %zu bytes, not %zu", out_len, want);
        cr_assert_leq(out_len, ctx->original);
        cr_assert_leq(consumed, n);
        ctx->decoded++;
    } else {
        cr_assert(rc == RIG_E_MALFORMED || rc == RIG_E_TRUNCATED || rc == RIG_E_TOO_LONG, "rc %d", rc);
        cr_assert(strstr(why.text, "compressed chunk"), "an error that does not say what: %s", why.text);
        ctx->refused++;
    }
    free(out);
}

static void mutate(int kind, size_t len, uint8_t method)
{
    uint8_t *in = make(kind, len);
    size_t n;
    uint8_t *c = chunk_of(in, len, method, &n);
    cr_assert_eq(c[0], method, "%s did not compress", kind_names[kind]);
    mutation_ctx ctx = { .original = len };
    support_each_mutation(c, n, check_mutation, &ctx);
    /* Every proper prefix is refused; most flips are too. */
    cr_assert_geq(ctx.refused, n, "%s: %u refused, %u decoded", kind_names[kind], ctx.refused, ctx.decoded);
    free(c);
    free(in);
}

Test(compress, truncations_and_bit_flips_zeros) { rng = test_seed() | 1; mutate(ZEROS, 65536, COMPRESS_LZ4); }
Test(compress, truncations_and_bit_flips_pattern) { rng = test_seed() | 1; mutate(PATTERN, 16384, COMPRESS_LZ4); }
Test(compress, truncations_and_bit_flips_sparse) { rng = test_seed() | 1; mutate(SPARSE, 8192, COMPRESS_LZ4); }
/* A short last block and a 3-byte tail; the vector paths' reads ahead and
 * the scalar loops both. */
Test(compress, truncations_and_bit_flips_zero_words)
{
    rng = test_seed() | 1;
    for (int vectors = 1; vectors >= 0; vectors--) {
        compress_vectors(vectors);
        mutate(SPARSE, 8192 + 40 + 3, COMPRESS_ZEROS);
        mutate(ZEROS, 4096 + 1, COMPRESS_ZEROS);
    }
}

/* Zero words as docs/wire.md gives them, written the plainest way. */
static size_t zero_words_reference(const uint8_t *in, size_t len, uint8_t *out)
{
    size_t words = len / 4, o = 0;
    for (size_t b = 0; b < words; b += 32) {
        size_t mask_at = o;
        uint32_t mask = 0;
        o += 4;
        for (size_t i = b; i < words && i < b + 32; i++) {
            if (!memcmp(in + 4 * i, "\0\0\0\0", 4))
                continue;
            mask |= 1u << (i - b);
            memcpy(out + o, in + 4 * i, 4);
            o += 4;
        }
        wire_store_u32(out + mask_at, mask);
    }
    memcpy(out + o, in + 4 * words, len % 4);
    return o + len % 4;
}

/* The AVX2 paths (where this CPU has them) and the scalar loops write the
 * reference's bytes and read them back, at every density and at lengths
 * around the block, the tail and the vector reads' reach. */
Test(compress, zero_words_vector_and_scalar_paths_agree)
{
    rng = test_seed() | 1;
    bool have = compress_vectors(true);
    cr_log_info(have ? "zero words: AVX2 and scalar paths compared" : "zero words: no AVX2 here, scalar paths only");
    static const size_t lens[] = { 1, 3, 4, 5, 60, 127, 128, 129, 131, 144, 147, 255, 256, 260, 268, 4096 + 3,
                                   65536, 65536 + 12, (size_t)1 << 20 };
    static const unsigned one_in[] = { 0, 1, 2, 8, 64 };   /* a word nonzero one in n; 0: none */
    size_t most = (size_t)1 << 20, cap = compress_bound(most);
    uint8_t *in = malloc(most), *ref = malloc(cap), *room = malloc(cap);
    cr_assert(in && ref && room);
    for (size_t d = 0; d < sizeof one_in / sizeof one_in[0]; d++) {
        for (size_t i = 0; i < most; i += 4) {
            uint32_t w = one_in[d] && next() % one_in[d] == 0 ? (uint32_t)next() | 1u << (next() % 32) : 0;
            memcpy(in + i, &w, 4);
        }
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            size_t len = lens[k], want = zero_words_reference(in, len, ref);
            for (int vectors = 1; vectors >= 0; vectors--) {
                compress_vectors(vectors);
                size_t n;
                uint8_t *c = chunk_of(in, len, COMPRESS_ZEROS, &n);
                if (want < len) {
                    cr_assert_eq(c[0], COMPRESS_ZEROS, "%zu bytes, one in %u: went %u", len, one_in[d], c[0]);
                    cr_assert_eq(n, COMPRESS_HEADER_SIZE + want, "%zu bytes, one in %u, vectors %d: %zu stored, not %zu",
                                 len, one_in[d], vectors, n - COMPRESS_HEADER_SIZE, want);
                    cr_assert(!memcmp(c + COMPRESS_HEADER_SIZE, ref, want),
                              "%zu bytes, one in %u, vectors %d: other bytes than the reference", len, one_in[d], vectors);
                } else {
                    cr_assert_eq(c[0], COMPRESS_RAW, "%zu bytes, one in %u: %zu of zero words kept", len, one_in[d],
                                 want);
                }
                /* Read back by both paths, from a chunk of exactly its size. */
                for (int back = 1; back >= 0; back--) {
                    compress_vectors(back);
                    size_t consumed, got;
                    rig_why why = { "" };
                    memset(room, 0xa5, len);
                    cr_assert_eq(decompress_chunk(c, n, room, len, &consumed, &got, &why), 0, "%s", why.text);
                    cr_assert(got == len && !memcmp(room, in, len), "%zu bytes, one in %u: written with vectors %d, "
                              "read with %d, came back different", len, one_in[d], vectors, back);
                }
                free(c);
            }
        }
    }
    free(in);
    free(ref);
    free(room);
}

static int read_header(uint8_t method, uint32_t original, uint32_t stored, rig_why *why)
{
    uint8_t p[COMPRESS_HEADER_SIZE];
    compress_header h = { .method = method, .original = original, .stored = stored }, back;
    compress_header_write(p, &h);
    return compress_header_read(p, &back, why);
}

Test(compress, lying_headers)
{
    static const struct {
        uint8_t method;
        uint32_t original, stored;
        int rc;
        const char *says;
    } cases[] = {
        { 3, 100, 50, RIG_E_MALFORMED, "method 3" },
        { 255, 100, 100, RIG_E_MALFORMED, "method 255" },
        { COMPRESS_ZEROS, 100, 100, RIG_E_MALFORMED, "zeros, stored length 100" },
        { COMPRESS_ZEROS, 100, 0, RIG_E_MALFORMED, "zeros, stored length 0" },
        { COMPRESS_RAW, 100, 99, RIG_E_MALFORMED, "stored length 99 is not the original 100" },
        { COMPRESS_RAW, 100, 101, RIG_E_MALFORMED, "raw" },
        { COMPRESS_LZ4, 100, 100, RIG_E_MALFORMED, "lz4, stored length 100" },
        { COMPRESS_LZ4, 100, 0, RIG_E_MALFORMED, "lz4, stored length 0" },
        { COMPRESS_LZ4, 0, 0, RIG_E_MALFORMED, "lz4" },
        { COMPRESS_RAW, COMPRESS_CHUNK_MAX + 1, COMPRESS_CHUNK_MAX + 1, RIG_E_TOO_LONG, "above the limit" },
        { COMPRESS_LZ4, 0xffffffffu, 10, RIG_E_TOO_LONG, "original length 4294967295" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rig_why why = { "" };
        cr_expect_eq(read_header(cases[i].method, cases[i].original, cases[i].stored, &why), cases[i].rc, "case %zu",
                     i);
        cr_expect(strstr(why.text, cases[i].says), "case %zu says \"%s\", not \"%s\"", i, why.text, cases[i].says);
    }
    rig_why why = { "" };
    cr_assert_eq(read_header(COMPRESS_RAW, 0, 0, &why), 0, "%s", why.text);
    cr_assert_eq(read_header(COMPRESS_LZ4, COMPRESS_CHUNK_MAX, 1, &why), 0, "%s", why.text);

    /* A valid LZ4 body behind a header that claims more (or less) than it
     * decodes to. */
    uint8_t *zeros = make(ZEROS, 1000);
    size_t n;
    uint8_t *c = chunk_of(zeros, 1000, COMPRESS_LZ4, &n);
    uint8_t *out = malloc(2000);
    size_t consumed, out_len;
    compress_header h;
    cr_assert_eq(compress_header_read(c, &h, &why), 0);
    h.original = 2000;
    compress_header_write(c, &h);
    cr_assert_eq(decompress_chunk(c, n, out, 2000, &consumed, &out_len, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "decodes to 1000 bytes, the header says 2000"), "%s", why.text);
    h.original = 999;
    compress_header_write(c, &h);
    cr_assert_eq(decompress_chunk(c, n, out, 999, &consumed, &out_len, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "corrupt"), "%s", why.text);
    /* Room below the original is refused before decoding. */
    h.original = 1000;
    compress_header_write(c, &h);
    cr_assert_eq(decompress_chunk(c, n, out, 999, &consumed, &out_len, &why), RIG_E_TOO_LONG);
    cr_assert(strstr(why.text, "original length 1000, room for 999"), "%s", why.text);
    /* A header alone, and a body shorter than stored. */
    cr_assert_eq(decompress_chunk(c, COMPRESS_HEADER_SIZE - 1, out, 1000, &consumed, &out_len, &why), RIG_E_TRUNCATED);
    cr_assert_eq(decompress_chunk(c, n - 1, out, 1000, &consumed, &out_len, &why), RIG_E_TRUNCATED);
    cr_assert(strstr(why.text, "follow the header"), "%s", why.text);
    free(out);
    free(c);
    free(zeros);
}

/* Zero-word bodies written by hand: each lie is refused, naming it. */
static int zeros_body(uint32_t original, const uint8_t *body, uint32_t stored, uint8_t *out, rig_why *why)
{
    uint8_t chunk[COMPRESS_HEADER_SIZE + 64];
    compress_header h = { .method = COMPRESS_ZEROS, .original = original, .stored = stored };
    compress_header_write(chunk, &h);
    memcpy(chunk + COMPRESS_HEADER_SIZE, body, stored);
    size_t consumed, out_len;
    return decompress_chunk(chunk, COMPRESS_HEADER_SIZE + stored, out, original, &consumed, &out_len, why);
}

Test(compress, lying_zero_words)
{
    uint8_t out[512];
    rig_why why = { "" };
    /* 17 bytes: four words (the second stored) and a tail byte. */
    static const uint8_t good[] = { 2, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd, 0x7f };
    memset(out, 0xee, sizeof out);
    cr_assert_eq(zeros_body(17, good, sizeof good, out, &why), 0, "%s", why.text);
    static const uint8_t want[] = { 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f };
    cr_assert_eq(memcmp(out, want, 17), 0);
    /* A mask bit past the chunk's three words. */
    static const uint8_t past[] = { 8, 0, 0, 0, 1, 2, 3, 4, 5 };
    cr_assert_eq(zeros_body(13, past, sizeof past, out, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "past the chunk's 3"), "%s", why.text);
    /* Words the mask promises and the body lacks. */
    static const uint8_t short_words[] = { 3, 0, 0, 0, 1, 2, 3, 4 };
    cr_assert_eq(zeros_body(12, short_words, sizeof short_words, out, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "ends in block 0's 2 words"), "%s", why.text);
    /* 256 bytes are two blocks: a body that ends in the second's mask. */
    static const uint8_t one_block[] = { 0, 0, 0, 0, 0, 0 };
    cr_assert_eq(zeros_body(256, one_block, sizeof one_block, out, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "ends in block 1's mask"), "%s", why.text);
    /* Bytes after the words that are not the tail. */
    static const uint8_t extra[] = { 0, 0, 0, 0, 9, 9 };
    cr_assert_eq(zeros_body(8 + 1, extra, sizeof extra, out, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "2 bytes after its words, the original's tail is 1"), "%s", why.text);
}

/* ---- the decision ---- */

/* The choice between methods from fixed speeds, whatever this machine's:
 * each method's copy runs at the slowest of its coding and the link
 * carrying its ratio. */
Test(compress, decision_from_given_speeds)
{
    rng = test_seed() | 1;
    size_t len = (size_t)4 << 20;
    uint8_t *zeros = make(ZEROS, len), *sparse = make(SPARSE, len), *random = make(RANDOM, len);
    /* A fast link, zero words fast: they win (LZ4 decodes below the link). */
    compress_rates r = { .link_bps = 3e9, .compress_bps = 1e9, .decompress_bps = 2e9, .zeros_compress_bps = 10e9,
                         .zeros_decompress_bps = 10e9 };
    compress_verdict v = compress_decide(sparse, len, &r);
    cr_assert(v.pays && v.method == COMPRESS_ZEROS, "pays %d method %u", v.pays, v.method);
    cr_assert(v.ratio > 5 && v.ratio < 8, "zero words' ratio on 1 float in 8: %g", v.ratio);
    cr_assert(!compress_decide(random, len, &r).pays);
    /* The same link without zero words: LZ4 cannot beat it, so no. */
    r.zeros_compress_bps = r.zeros_decompress_bps = 0;
    v = compress_decide(sparse, len, &r);
    cr_assert(!v.pays && v.method == COMPRESS_RAW);
    /* A slow link, zero words slow: the better ratio wins, zero words on
     * sparse floats (6.4 against LZ4's 4.6), LZ4 on all zeros. */
    r = (compress_rates){ .link_bps = 1e6, .compress_bps = 1e9, .decompress_bps = 2e9, .zeros_compress_bps = 5e8,
                          .zeros_decompress_bps = 5e8 };
    v = compress_decide(sparse, len, &r);
    cr_assert(v.pays && v.method == COMPRESS_ZEROS, "sparse floats: method %u", v.method);
    v = compress_decide(zeros, len, &r);
    cr_assert(v.pays && v.method == COMPRESS_LZ4, "zeros: method %u", v.method);
    free(zeros);
    free(sparse);
    free(random);
}

/* Long runs (a tensor of ones) go LZ4-compressed on a link faster than
 * LZ4's measured decoding, which is over sparse floats: its sample's own
 * speeds say it runs near a memory copy there. Only from 1 MiB: a smaller
 * copy is not worth the sample. */
Test(compress, long_runs_go_lz4_on_a_link_faster_than_its_measured_decoding)
{
    rng = test_seed() | 1;
    size_t len = (size_t)4 << 20;
    float *ones = malloc(len);
    for (size_t i = 0; i < len / sizeof(float); i++)
        ones[i] = 1.0f;
    uint8_t *sparse = make(SPARSE, len), *random = make(RANDOM, len);
    compress_rates r = { .link_bps = 1.5e9, .compress_bps = 0.5e9, .decompress_bps = 1e9, .zeros_compress_bps = 10e9,
                         .zeros_decompress_bps = 10e9 };
    /* A thread's first sample pays for its stack's fresh pages (17-20 us
     * each in some VMs), and only looks slower. */
    compress_decide(ones, len, &r);
    compress_verdict v = compress_decide(ones, len, &r);
    cr_assert(v.pays && v.method == COMPRESS_LZ4, "ones on a link of 1.5 GB/s: pays %d method %u, ratio %g at %.3g B/s",
              v.pays, v.method, v.ratio, v.compressed_bps);
    cr_assert_gt(v.ratio, 50);
    v = compress_decide(ones, (size_t)64 << 10, &r);
    cr_assert(!v.pays && v.method == COMPRESS_RAW, "64 KiB of ones: method %u", v.method);
    v = compress_decide(sparse, len, &r);
    cr_assert(v.pays && v.method == COMPRESS_ZEROS, "sparse floats: method %u", v.method);
    cr_assert(!compress_decide(random, len, &r).pays);
    /* Without zero words as fast as a memory copy, no sample on such a link. */
    r.zeros_compress_bps = r.zeros_decompress_bps = 1e9;
    v = compress_decide(ones, len, &r);
    cr_assert(!v.pays && v.method == COMPRESS_RAW, "ones with slow zero words: method %u", v.method);
    free(ones);
    free(sparse);
    free(random);
}

Test(compress, decision)
{
    rng = test_seed() | 1;
    compress_rates r = { 0 };
    rig_why why = { "" };
    cr_assert_eq(compress_measure(&r, &why), 0, "%s", why.text);
    /* Far below any real machine's, so a loaded one passes too. */
    cr_assert_gt(r.compress_bps, 2e6, "LZ4 at %g B/s", r.compress_bps);
    cr_assert_gt(r.decompress_bps, 2e6, "LZ4 decoding at %g B/s", r.decompress_bps);
    /* LZ4 decodes faster than it compresses; a measurement that counted a
     * preempted pass once put decoding at a third of compressing. */
    cr_assert_gt(r.decompress_bps, r.compress_bps, "LZ4 decoding at %g B/s, compressing at %g", r.decompress_bps,
                 r.compress_bps);
    cr_log_info("LZ4 here: %.2f GB/s compressing sparse floats, %.2f GB/s decoding", r.compress_bps / 1e9,
                r.decompress_bps / 1e9);
    cr_log_info("zero words: %.2f GB/s compressing, %.2f GB/s decoding", r.zeros_compress_bps / 1e9,
                r.zeros_decompress_bps / 1e9);
    /* What zero words are for: sparse floats at several times LZ4's speed. */
    cr_assert_gt(r.zeros_compress_bps, r.compress_bps, "zero words at %g B/s, LZ4 at %g", r.zeros_compress_bps,
                 r.compress_bps);
    size_t len = (size_t)8 << 20;
    uint8_t *zeros = make(ZEROS, len), *random = make(RANDOM, len), *sparse = make(SPARSE, len);

    /* A slow link: 1 MB/s (a thin WAN), far below LZ4 even on a loaded machine. */
    r.link_bps = 1e6;
    compress_verdict v = compress_decide(zeros, len, &r);
    cr_assert(v.pays, "zeros on a 1 MB/s link: ratio %g", v.ratio);
    cr_assert_gt(v.ratio, 50);
    cr_assert_gt(v.compressed_bps, v.raw_bps);
    v = compress_decide(random, len, &r);
    cr_assert(!v.pays, "random bytes on a 1 MB/s link: ratio %g", v.ratio);
    cr_assert_leq(v.ratio, 1.0);
    v = compress_decide(sparse, len, &r);
    cr_assert(v.pays, "sparse floats on a 1 MB/s link: ratio %g", v.ratio);
    cr_assert_gt(v.ratio, 1.5);

    /* A link half as fast as zero words: they pay for sparse floats, and
     * beat LZ4 whenever the link is faster than LZ4 compresses. */
    double zw = r.zeros_compress_bps < r.zeros_decompress_bps ? r.zeros_compress_bps : r.zeros_decompress_bps;
    r.link_bps = zw / 2;
    v = compress_decide(sparse, len, &r);
    cr_assert(v.pays, "sparse floats on a link of %g B/s: ratio %g", r.link_bps, v.ratio);
    if (r.link_bps > r.compress_bps)
        cr_assert_eq(v.method, COMPRESS_ZEROS, "sparse floats on a link of %g B/s: method %u", r.link_bps, v.method);
    v = compress_decide(random, len, &r);
    cr_assert(!v.pays && v.method == COMPRESS_RAW);

    /* A link faster than every method: never. */
    double fastest = r.compress_bps;
    double speeds[] = { r.decompress_bps, r.zeros_compress_bps, r.zeros_decompress_bps };
    for (int i = 0; i < 3; i++)
        fastest = speeds[i] > fastest ? speeds[i] : fastest;
    r.link_bps = 2 * fastest;
    cr_assert(!compress_decide(sparse, len, &r).pays);
    r.link_bps = 1e12;
    cr_assert(!compress_decide(zeros, len, &r).pays);

    /* No rate known, or nothing to send: no. */
    r.link_bps = 0;
    cr_assert(!compress_decide(zeros, len, &r).pays);
    r.link_bps = 1e6;
    cr_assert(!compress_decide(zeros, 0, &r).pays);
    /* A short copy is sampled whole. */
    cr_assert(compress_decide(zeros, 5000, &r).pays);
    free(zeros);
    free(random);
    free(sparse);
}

/* ---- docs/wire.md ---- */

Test(compress, wire_md_describes_the_header)
{
    size_t len;
    char *md = support_read_file(RIG_SOURCE_DIR "/docs/wire.md", &len);
    cr_assert(md);
    char *at = strstr(md, "\n## Compressed chunks");
    cr_assert(at, "docs/wire.md has no Compressed chunks section");
    char *end = strstr(at + 1, "\n## ");
    if (end)
        *end = '\0';
    char size[32];
    snprintf(size, sizeof size, "a %d-byte header", COMPRESS_HEADER_SIZE);
    cr_expect(strstr(at, size), "docs/wire.md does not say \"%s\"", size);
    cr_expect(strstr(at, "u8 method   u32 original length   u32 stored length"));
    cr_expect(strstr(at, "| 0 | raw |") && COMPRESS_RAW == 0);
    cr_expect(strstr(at, "| 1 | lz4 |") && COMPRESS_LZ4 == 1);
    cr_expect(strstr(at, "(16 MiB)") && COMPRESS_CHUNK_MAX == 16u << 20);
    /* The layout the page gives is the one the code writes. */
    uint8_t p[COMPRESS_HEADER_SIZE];
    compress_header h = { .method = COMPRESS_LZ4, .original = 0x04030201, .stored = 0x08070605 };
    compress_header_write(p, &h);
    static const uint8_t want[COMPRESS_HEADER_SIZE] = { 1, 1, 2, 3, 4, 5, 6, 7, 8 };
    cr_assert_arr_eq(p, want, COMPRESS_HEADER_SIZE);
    free(md);
}

/* A sender whose compressing ran slower than the link by the margin stops. */
Test(compress, kept_up_is_against_the_link_with_the_margin)
{
    cr_assert(compress_kept_up(1 << 20, 0.001, 1e8));     /* 1 GB/s against 100 MB/s */
    cr_assert(!compress_kept_up(1 << 20, 0.01, 1e8));     /* 105 MB/s: under the 10% margin */
    cr_assert(!compress_kept_up(1 << 20, 0.1, 1e8));
    cr_assert(compress_kept_up(1 << 20, 0, 1e8));         /* too quick to time */
}

static void *machine_of_thread(void *out)
{
    *(compress_rates *)out = compress_machine();
    return NULL;
}

/* Callers racing for the speeds each measure rather than wait on another
 * and all come back with the one set published. */
Test(compress, machine_speeds_race_to_one_value, .timeout = 30)
{
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    compress_rates got[THREADS];
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, machine_of_thread, &got[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_gt(got[i].zeros_compress_bps, 0, "thread %d measured nothing", i);
        cr_assert_gt(got[i].decompress_bps, 0, "thread %d measured nothing", i);
    }
    /* A loser of the race returns the winner's, as every later call does. */
    compress_rates a = compress_machine();
    for (int i = 0; i < THREADS; i++)
        cr_assert(!memcmp(&got[i], &a, sizeof a), "thread %d got speeds other than the published ones", i);
}

/* One slow piece is a preemption; COMPRESS_SLOW_PIECES in a row pause. */
Test(compress, pace_pauses_after_slow_pieces_in_a_row)
{
    compress_pace p = { 0 };
    for (int round = 0; round < 2; round++) {
        for (int i = 1; i < COMPRESS_SLOW_PIECES; i++)
            cr_assert(!compress_pace_note(&p, 1 << 20, 0.1, 1e8), "paused after %d slow pieces", i);
        cr_assert(!compress_pace_paused(&p), "paused before %d slow pieces in a row", COMPRESS_SLOW_PIECES);
        cr_assert(compress_pace_note(&p, 1 << 20, 0.1, 1e8), "not paused after %d slow pieces in a row",
                  COMPRESS_SLOW_PIECES);
        cr_assert(compress_pace_paused(&p), "the pause did not begin");
        p.paused_until_ns = 0;   /* as if COMPRESS_PAUSE_MS had passed */
    }
    /* A piece that keeps up starts the count again. */
    for (int i = 1; i < 2 * COMPRESS_SLOW_PIECES; i++) {
        if (i % COMPRESS_SLOW_PIECES == 0)
            cr_assert(!compress_pace_note(&p, 1 << 20, 0.001, 1e8));
        else
            cr_assert(!compress_pace_note(&p, 1 << 20, 0.1, 1e8), "paused at %d with a quick piece between", i);
    }
}

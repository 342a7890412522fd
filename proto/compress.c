/* Compressed chunks and the decision to compress; see compress.h and
 * docs/wire.md ("Compressed chunks"). */
#include "proto/compress.h"

#include <lz4.h>
#include <pthread.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZW_VECTORS 1
#endif
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/wire.h"

#define SAMPLE_PIECES 16
#define SAMPLE_PIECE 1024
/* Compressed must beat raw by this much: the estimate is from a sample. */
#define PAYS_MARGIN 1.1
/* The sample's bytes sit in the cache and a copy's do not: LZ4 ran over
 * the sample of sparse floats 2.5 times as fast as over a 4 MiB chunk of
 * them, over long runs (a tensor of ones, ids) about as fast; so the
 * sample's own speeds count at this share. */
#define SAMPLE_SPEED_SHARE 0.5
/* From this size LZ4 is sampled even where its measured decoding cannot
 * beat the link: over long runs it decodes near the speed of a memory copy
 * (a tensor of ones, 25 GB/s here, against 2.6 over sparse floats), and
 * the sample's few microseconds are lost in such a copy. */
#define LZ4_RUNS_MIN ((size_t)1 << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: a method's speed per CPU, whatever else shares
 * the CPUs while it is measured (or preempts the measuring thread). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- zero words (COMPRESS_ZEROS) ----
 * The original's 4-byte words in blocks of 32, each block a u32 mask (bit
 * i: word i is stored) and then its stored words in order, the last block
 * shorter when the words run out; then the original's last original % 4
 * bytes as they are. Sparse tensors (activations after a ReLU, masks,
 * pruned weights) shrink several times at close to memory speed, where
 * LZ4 runs at a tenth of it. */
#define ZW_BLOCK 32

/* The vector encoder stores 32 bytes where it may keep only 4: room for
 * its last store past the end. */
#define ZW_SLACK 32

static size_t zeros_bound(size_t len)
{
    size_t words = len / 4;
    return 4 * ((words + ZW_BLOCK - 1) / ZW_BLOCK) + 4 * words + len % 4 + ZW_SLACK;
}

/* The bits set in x, in a few instructions: __builtin_popcount is a call
 * into libgcc on CPUs the build does not assume have popcnt. */
static unsigned bits_set(uint32_t x)
{
    x = x - ((x >> 1) & 0x55555555u);
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    x = (x + (x >> 4)) & 0x0f0f0f0fu;
    return (x * 0x01010101u) >> 24;
}

/* Bit i set for each nonzero word i of the block's n words. */
static uint32_t nonzero_words(const uint8_t *block, size_t n)
{
    uint32_t mask = 0;
#if defined(__SSE2__)
    /* Four words to a compare: twice the scalar loop's speed. */
    if (n == ZW_BLOCK) {
        const __m128i zero = _mm_setzero_si128();
        for (int q = 0; q < ZW_BLOCK / 4; q++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(block + 16 * q));
            uint32_t zeros = (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, zero)));
            mask |= (~zeros & 0xfu) << (4 * q);
        }
        return mask;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, block + 4 * i, 4);
        mask |= (uint32_t)(w != 0) << i;
    }
    return mask;
}

/* ---- zero words with AVX2 permutes: eight words at a time, no branch per
 * word (the scalar loops mispredict on every block of random sparsity).
 * For each 8-bit mask of which of eight words are stored: the permute
 * that packs them to the front, the one that spreads them back, and their
 * count. Chosen at run time: the build assumes plain x86-64. */
#if defined(ZW_VECTORS)
static uint32_t zw_pack[256][8] __attribute__((aligned(32)));
static uint32_t zw_spread[256][8] __attribute__((aligned(32)));
static uint8_t zw_count[256];
static bool zw_vectors;
static pthread_once_t zw_once = PTHREAD_ONCE_INIT;

static bool cpu_has_vectors(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
}

static void zw_init(void)
{
    for (unsigned m = 0; m < 256; m++) {
        unsigned k = 0;
        for (unsigned w = 0; w < 8; w++) {
            zw_pack[m][w] = zw_spread[m][w] = 0;   /* lanes the mask leaves out: zeroed or past the end */
            if (m >> w & 1) {
                zw_pack[m][k] = w;
                zw_spread[m][w] = k;
                k++;
            }
        }
        zw_count[m] = (uint8_t)k;
    }
    zw_vectors = cpu_has_vectors();
}

static bool zw_use_vectors(void)
{
    pthread_once(&zw_once, zw_init);
    return __atomic_load_n(&zw_vectors, __ATOMIC_RELAXED);
}

/* Whole blocks of in into o; returns the end. Each store is 32 bytes
 * wide: up to 28 past the words kept (ZW_SLACK). */
__attribute__((target("avx2"))) static uint8_t *zw_encode_blocks(const uint8_t *in, size_t blocks, uint8_t *o)
{
    const __m256i zero = _mm256_setzero_si256();
    for (size_t b = 0; b < blocks; b++, in += 4 * ZW_BLOCK) {
        uint8_t *w = o + 4;
        uint32_t mask = 0;
        for (unsigned q = 0; q < ZW_BLOCK / 8; q++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(in + 32 * q));
            unsigned m = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, zero))) & 0xffu;
            __m256i order = _mm256_load_si256((const __m256i *)(const void *)zw_pack[m]);
            _mm256_storeu_si256((__m256i *)(void *)w, _mm256_permutevar8x32_epi32(v, order));
            w += 4 * zw_count[m];
            mask |= (uint32_t)m << (8 * q);
        }
        wire_store_u32(o, mask);
        o = w;
    }
    return o;
}

/* Whole blocks from body[*at..stored) into out, for as long as each block's
 * words are there with 32 bytes readable past them (the loads' reach);
 * returns the blocks done and moves *at past them. The scalar loop goes on
 * from there, naming whatever is wrong. */
__attribute__((target("avx2,popcnt"))) static size_t zw_decode_blocks(const uint8_t *body, size_t stored, size_t *at,
                                                                       uint8_t *out, size_t blocks)
{
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    size_t b = 0, p = *at;
    for (; b < blocks && stored - p >= 4; b++, out += 4 * ZW_BLOCK) {
        uint32_t mask = wire_load_u32(body + p);
        size_t k = (size_t)_mm_popcnt_u32(mask);
        if (stored - p - 4 < 4 * k + 32)
            break;
        const uint8_t *w = body + p + 4;
        for (unsigned q = 0; q < ZW_BLOCK / 8; q++, mask >>= 8) {
            unsigned m = mask & 0xffu;
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)w);
            __m256i order = _mm256_load_si256((const __m256i *)(const void *)zw_spread[m]);
            /* All ones in the lanes the mask stores, zero in the others. */
            __m256i kept = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), lane_bit), lane_bit);
            _mm256_storeu_si256((__m256i *)(void *)(out + 32 * q),
                                _mm256_and_si256(_mm256_permutevar8x32_epi32(v, order), kept));
            w += 4 * zw_count[m];
        }
        p += 4 + 4 * k;
    }
    *at = p;
    return b;
}
#else
static bool zw_use_vectors(void)
{
    return false;
}
#endif

bool compress_vectors(bool on)
{
#if defined(ZW_VECTORS)
    pthread_once(&zw_once, zw_init);
    __atomic_store_n(&zw_vectors, on && cpu_has_vectors(), __ATOMIC_RELAXED);
#else
    (void)on;
#endif
    return zw_use_vectors();
}

static size_t zeros_encode(const uint8_t *in, size_t len, uint8_t *out)
{
    size_t words = len / 4;
    uint8_t *o = out;
    size_t b = 0;
#if defined(ZW_VECTORS)
    if (zw_use_vectors()) {
        size_t whole = words / ZW_BLOCK;
        o = zw_encode_blocks(in, whole, o);
        b = whole * ZW_BLOCK;
    }
#endif
    for (; b < words; b += ZW_BLOCK) {
        size_t n = words - b < ZW_BLOCK ? words - b : ZW_BLOCK;
        const uint8_t *block = in + 4 * b;
        uint32_t mask = nonzero_words(block, n);
        wire_store_u32(o, mask);
        o += 4;
        for (uint32_t m = mask; m; m &= m - 1) {
            memcpy(o, block + 4 * __builtin_ctz(m), 4);
            o += 4;
        }
    }
    memcpy(o, in + 4 * words, len % 4);
    return (size_t)(o - out) + len % 4;
}

static int zeros_decode(const uint8_t *body, size_t stored, uint8_t *out, size_t len, rig_why *why)
{
    size_t words = len / 4, at = 0, b = 0;
#if defined(ZW_VECTORS)
    if (zw_use_vectors())
        b = ZW_BLOCK * zw_decode_blocks(body, stored, &at, out, words / ZW_BLOCK);
#endif
    for (; b < words; b += ZW_BLOCK) {
        size_t n = words - b < ZW_BLOCK ? words - b : ZW_BLOCK;
        if (stored - at < 4)
            return why_set(why, RIG_E_MALFORMED, "compressed chunk: zeros body of %zu bytes ends in block %zu's mask",
                           stored, b / ZW_BLOCK);
        uint32_t mask = wire_load_u32(body + at);
        at += 4;
        if (n < ZW_BLOCK && mask >> n)
            return why_set(why, RIG_E_MALFORMED,
                           "compressed chunk: zeros block %zu's mask %#x names words past the chunk's %zu", b / ZW_BLOCK,
                           mask, words);
        size_t k = bits_set(mask);
        if ((stored - at) / 4 < k)
            return why_set(why, RIG_E_MALFORMED,
                           "compressed chunk: zeros body of %zu bytes ends in block %zu's %zu words", stored,
                           b / ZW_BLOCK, k);
        uint8_t *o = out + 4 * b;
        if (n == ZW_BLOCK)
            memset(o, 0, 4 * ZW_BLOCK);   /* a constant length: stores in line, no call */
        else
            memset(o, 0, 4 * n);
        for (uint32_t m = mask; m; m &= m - 1) {
            memcpy(o + 4 * __builtin_ctz(m), body + at, 4);
            at += 4;
        }
    }
    if (stored - at != len % 4)
        return why_set(why, RIG_E_MALFORMED,
                       "compressed chunk: zeros body has %zu bytes after its words, the original's tail is %zu",
                       stored - at, len % 4);
    memcpy(out + 4 * words, body + at, len % 4);
    return RIG_OK;
}

/* The zero-words size of p[0..len), without writing it. */
static size_t zeros_size(const uint8_t *p, size_t len)
{
    size_t words = len / 4, stored = 0;
    for (size_t b = 0; b < words; b += ZW_BLOCK)
        stored += bits_set(nonzero_words(p + 4 * b, words - b < ZW_BLOCK ? words - b : ZW_BLOCK));
    return 4 * ((words + ZW_BLOCK - 1) / ZW_BLOCK) + 4 * stored + len % 4;
}

size_t compress_bound(size_t len)
{
    if (len > COMPRESS_CHUNK_MAX)
        return 0;
    size_t lz4 = (size_t)LZ4_compressBound((int)len), zeros = zeros_bound(len);
    size_t most = lz4 > len ? lz4 : len;
    return COMPRESS_HEADER_SIZE + (zeros > most ? zeros : most);
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

enum { MEASURE_LEN = 2 << 20, MEASURE_CHUNK = 1 << 20, MEASURE_CHUNKS = MEASURE_LEN / MEASURE_CHUNK };
#define MEASURE_S 0.005

/* One pass of method over in[0..MEASURE_LEN), chunk by chunk the way
 * copies use it, into out (MEASURE_CHUNKS slots of
 * compress_bound(MEASURE_CHUNK)); and one pass back into back. */
static void compress_pass(uint8_t method, const uint8_t *in, uint8_t *out, size_t *len)
{
    size_t slot = compress_bound(MEASURE_CHUNK);
    for (int c = 0; c < MEASURE_CHUNKS; c++)
        compress_chunk(in + (size_t)c * MEASURE_CHUNK, MEASURE_CHUNK, method, out + (size_t)c * slot, slot, &len[c],
                       NULL);
}

static bool decompress_pass(uint8_t method, const uint8_t *out, const size_t *len, uint8_t *back)
{
    size_t slot = compress_bound(MEASURE_CHUNK);
    for (int c = 0; c < MEASURE_CHUNKS; c++) {
        size_t consumed, got;
        if (out[(size_t)c * slot] != method ||
            decompress_chunk(out + (size_t)c * slot, len[c], back + (size_t)c * MEASURE_CHUNK, MEASURE_CHUNK,
                             &consumed, &got, NULL) != RIG_OK)
            return false;
    }
    return true;
}

/* Times method both ways: input bytes/s compressing, output bytes/s
 * decoding, both per second of this thread's CPU time. */
static int time_method(uint8_t method, const uint8_t *in, uint8_t *out, uint8_t *back, double *compress_bps,
                       double *decompress_bps, rig_why *why)
{
    const char *name = method == COMPRESS_LZ4 ? "LZ4" : "zero words";
    size_t len[MEASURE_CHUNKS];
    /* One pass each way untimed: the first pays cold caches and the
     * library's first call. Then the fastest of the passes in MEASURE_S:
     * a pass the host preempted counts that time as this thread's CPU
     * time too. Averaged over 20 ms, the first pass included, LZ4's
     * decoding came out at 0.8-1.0 GB/s where a loop of it runs at 2;
     * averaged over 5 ms, at 0.2-0.3. */
    compress_pass(method, in, out, len);
    if (!decompress_pass(method, out, len, back))
        return why_set(why, RIG_E_INVALID, "compress: %s does not decode its own output", name);
    double start = cpu_s(), best = 0;
    do {
        double t0 = cpu_s();
        compress_pass(method, in, out, len);
        double t = cpu_s() - t0;
        if (best == 0 || t < best)
            best = t;
    } while (cpu_s() - start < MEASURE_S);
    *compress_bps = (double)MEASURE_LEN / (best > 0 ? best : 1e-9);
    start = cpu_s();
    best = 0;
    do {
        double t0 = cpu_s();
        if (!decompress_pass(method, out, len, back))
            return why_set(why, RIG_E_INVALID, "compress: %s does not decode its own output", name);
        double t = cpu_s() - t0;
        if (best == 0 || t < best)
            best = t;
    } while (cpu_s() - start < MEASURE_S);
    *decompress_bps = (double)MEASURE_LEN / (best > 0 ? best : 1e-9);
    if (memcmp(in, back, MEASURE_LEN) != 0)
        return why_set(why, RIG_E_INVALID, "compress: %s decodes its own output to other bytes", name);
    return RIG_OK;
}

int compress_measure(compress_rates *r, rig_why *why)
{
    size_t slot = compress_bound(MEASURE_CHUNK);
    uint8_t *in = malloc(MEASURE_LEN), *out = malloc(slot * MEASURE_CHUNKS), *back = malloc(MEASURE_LEN);
    int rc;
    if (!in || !out || !back) {
        rc = why_set(why, RIG_E_NOMEM, "compress: no memory to measure compressing");
    } else {
        compress_sparse_floats(in, MEASURE_LEN, 0x9e3779b97f4a7c15u);
        /* First touches are not the methods' time. */
        memset(out, 0, slot * MEASURE_CHUNKS);
        memset(back, 0, MEASURE_LEN);
        rc = time_method(COMPRESS_LZ4, in, out, back, &r->compress_bps, &r->decompress_bps, why);
        if (rc == RIG_OK)
            rc = time_method(COMPRESS_ZEROS, in, out, back, &r->zeros_compress_bps, &r->zeros_decompress_bps, why);
    }
    free(in);
    free(out);
    free(back);
    return rc;
}

/* The speeds once some thread has measured them. Any thread that needs
 * them and finds none measures itself and publishes its result unless
 * another got there first: a caller never waits on another thread's
 * measurement (the shim's runs at idle priority, which a busy machine may
 * starve). */
static compress_rates *machine;

compress_rates compress_machine(void)
{
    compress_rates *known = __atomic_load_n(&machine, __ATOMIC_ACQUIRE);
    compress_rates r = { 0 };
    if (known) {
        r = *known;
    } else {
        rig_why why = { "" };
        if (compress_measure(&r, &why) < 0)
            r = (compress_rates){ 0 };
        compress_rates *mine = malloc(sizeof *mine), *none = NULL;
        if (mine) {
            *mine = r;
            if (!__atomic_compare_exchange_n(&machine, &none, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                free(mine);
                r = *none;   /* another thread's, already published */
            }
        }
    }
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

bool compress_pace_note(compress_pace *p, size_t len, double seconds, double link_bps)
{
    if (compress_kept_up(len, seconds, link_bps)) {
        __atomic_store_n(&p->slow, 0, __ATOMIC_RELAXED);
        return false;
    }
    if (__atomic_add_fetch(&p->slow, 1, __ATOMIC_RELAXED) < COMPRESS_SLOW_PIECES)
        return false;
    __atomic_store_n(&p->slow, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->paused_until_ns, (int64_t)(now_s() * 1e9) + (int64_t)COMPRESS_PAUSE_MS * 1000000,
                     __ATOMIC_RELAXED);
    return true;
}

bool compress_pace_paused(const compress_pace *p)
{
    return (int64_t)(now_s() * 1e9) < __atomic_load_n(&p->paused_until_ns, __ATOMIC_RELAXED);
}

static double min3(double a, double b, double c)
{
    double m = a < b ? a : b;
    return m < c ? m : c;
}

compress_verdict compress_decide(const void *p, size_t len, const compress_rates *r)
{
    compress_verdict v = { .pays = false, .method = COMPRESS_RAW, .ratio = 1, .raw_bps = r->link_bps,
                           .compressed_bps = 0 };
    if (len == 0 || !(r->link_bps > 0))
        return v;
    /* A method whose decoding alone cannot beat the link is not tried: on
     * a fast link no sample is taken at all. LZ4's decoding over long runs
     * goes about as fast as the zero words' (both near a memory copy). */
    double need = PAYS_MARGIN * r->link_bps;
    bool try_zeros = r->zeros_compress_bps > need && r->zeros_decompress_bps > need;
    bool try_lz4 = r->compress_bps > 0 &&
                   (r->decompress_bps > need || (len >= LZ4_RUNS_MIN && r->zeros_decompress_bps > need));
    if (!try_zeros && !try_lz4)
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
    /* Each method's copy runs at the slowest of compressing, the link
     * carrying ratio times its rate, and decompressing; the faster wins. */
    double best = 0;
    if (try_zeros) {
        double ratio = (double)n / (double)zeros_size(sample, n);
        double rate = min3(r->zeros_compress_bps, r->link_bps * ratio, r->zeros_decompress_bps);
        v.ratio = ratio;
        if (rate > best) {
            best = rate;
            v.method = COMPRESS_ZEROS;
        }
    }
    if (try_lz4) {
        double t0 = now_s();
        int got = LZ4_compress_default((const char *)sample, packed, (int)n, (int)sizeof packed);
        double t1 = now_s();
        /* Decoded back over the sample, which is spent: the time is what
         * counts, and the bytes are the same. */
        int back = got > 0 ? LZ4_decompress_safe(packed, (char *)sample, got, (int)n) : -1;
        double t2 = now_s();
        if (got > 0 && back == (int)n) {
            double ratio = (double)n / (double)got;
            /* LZ4 runs far faster over long runs than over the calibration's
             * floats; the sample's own times say so. A preempted sample only
             * looks slower, so the larger of the two is never optimistic by
             * much. */
            double c = r->compress_bps, d = r->decompress_bps;
            if (t1 > t0 && SAMPLE_SPEED_SHARE * (double)n / (t1 - t0) > c)
                c = SAMPLE_SPEED_SHARE * (double)n / (t1 - t0);
            if (t2 > t1 && SAMPLE_SPEED_SHARE * (double)n / (t2 - t1) > d)
                d = SAMPLE_SPEED_SHARE * (double)n / (t2 - t1);
            double rate = min3(c, r->link_bps * ratio, d);
            if (rate > best) {
                best = rate;
                v.method = COMPRESS_LZ4;
                v.ratio = ratio;
            }
        }
    }
    v.compressed_bps = best;
    v.pays = best > PAYS_MARGIN * r->link_bps;
    if (!v.pays)
        v.method = COMPRESS_RAW;
    return v;
}

void compress_header_write(uint8_t p[static COMPRESS_HEADER_SIZE], const compress_header *h)
{
    p[0] = h->method;
    wire_store_u32(p + 1, h->original);
    wire_store_u32(p + 5, h->stored);
}

int compress_chunk(const void *in, size_t len, uint8_t method, void *out, size_t cap, size_t *out_len, rig_why *why)
{
    if (len > COMPRESS_CHUNK_MAX)
        return why_set(why, RIG_E_TOO_LONG, "compress: a chunk of %zu bytes (at most %u)", len,
                       (unsigned)COMPRESS_CHUNK_MAX);
    if (cap < compress_bound(len))
        return why_set(why, RIG_E_TOO_LONG, "compress: %zu bytes of room for a chunk of %zu (needs %zu)", cap, len,
                       compress_bound(len));
    uint8_t *o = out;
    compress_header h = { .method = COMPRESS_RAW, .original = (uint32_t)len, .stored = (uint32_t)len };
    /* Into the full bound (LZ4 is faster so); it must come out below the
     * original, or the chunk goes raw. */
    if (method == COMPRESS_LZ4 && len > 0) {
        int got = LZ4_compress_default(in, (char *)o + COMPRESS_HEADER_SIZE, (int)len, LZ4_compressBound((int)len));
        if (got > 0 && (size_t)got < len) {
            h.method = COMPRESS_LZ4;
            h.stored = (uint32_t)got;
        }
    } else if (method == COMPRESS_ZEROS && len > 0) {
        size_t got = zeros_encode(in, len, o + COMPRESS_HEADER_SIZE);
        if (got > 0 && got < len) {
            h.method = COMPRESS_ZEROS;
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
    case COMPRESS_ZEROS:
        if (h->stored == 0 || h->stored >= h->original)
            return why_set(why, RIG_E_MALFORMED,
                           "compressed chunk: %s, stored length %u is not between 1 and the original %u less one",
                           h->method == COMPRESS_LZ4 ? "lz4" : "zeros", h->stored, h->original);
        return RIG_OK;
    default:
        return why_set(why, RIG_E_MALFORMED, "compressed chunk: method %u (0 raw, 1 lz4, 2 zeros)", h->method);
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
    if (h->method == COMPRESS_ZEROS)
        return zeros_decode(body, h->stored, out, h->original, why);
    if (h->method != COMPRESS_LZ4)
        return why_set(why, RIG_E_MALFORMED, "compressed chunk: method %u (0 raw, 1 lz4, 2 zeros)", h->method);
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

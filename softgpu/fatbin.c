/* Fatbins: finds the PTX softgpu runs in a module image. An image is PTX
 * text, a fatbin wrapper (0x466243B1, pointing to a container), a fatbin
 * container (0xBA55ED50) or an ELF cubin. A container's entries are SASS
 * (kind 2), PTX (kind 1) or LTO-IR (kind 8), each raw, zstd or LZ4; the PTX
 * entry with the highest virtual architecture up to softgpu's 7.5 wins (else
 * the lowest above). Every read is bounded: a truncated or corrupt image
 * gets CUDA_ERROR_INVALID_IMAGE, never a read past its end. */
#include "softgpu/driver.h"

#include <lz4.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define WRAPPER_MAGIC 0x466243B1u
#define CONTAINER_MAGIC 0xBA55ED50u
#define ENTRY_FIXED 64u
#define KIND_PTX 1
#define KIND_ELF 2
#define FLAG_LZ4 0x2000u
#define FLAG_ZSTD 0x8000u
#define MAX_IMAGE (1ull << 30)
#define MAX_PTX (256ull << 20)
#define SOFT_SM 75u

/* A bounded reader: each get checks what is left, a short read sets err. */
typedef struct reader { const uint8_t *p; size_t len, off; bool err; } reader;

static uint64_t get(reader *r, size_t n)
{
    if (r->err || r->len - r->off < n) {
        r->err = true;
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[r->off + i] << (8 * i);
    r->off += n;
    return v;
}

static CUresult fail(CUresult r, char *msg, size_t msglen, const char *fmt, ...)
{
    if (msg && msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return r;
}

static uint32_t le32(const void *p)
{
    const uint8_t *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

typedef struct entry {
    uint16_t kind;
    uint32_t sm;
    uint64_t flags, uncompressed;
    uint32_t compressed;
    const uint8_t *payload;
    uint64_t payload_size;
} entry;

/* Copies PTX text (up to its first NUL) into a fresh NUL-terminated buffer. */
static CUresult text_copy(const char *src, size_t n, char **ptx, size_t *ptx_len, char *msg, size_t msglen)
{
    size_t len = strnlen(src, n);
    if (len == 0)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: empty PTX entry");
    char *t = malloc(len + 1);
    if (!t)
        return fail(CUDA_ERROR_OUT_OF_MEMORY, msg, msglen, "fatbin: out of memory for %zu bytes of PTX", len);
    memcpy(t, src, len);
    t[len] = 0;
    *ptx = t;
    *ptx_len = len;
    return CUDA_SUCCESS;
}

static CUresult entry_ptx(const entry *e, char **ptx, size_t *ptx_len, char *msg, size_t msglen)
{
    bool zstd = e->flags & FLAG_ZSTD, lz4 = e->flags & FLAG_LZ4;
    if (!zstd && !lz4)
        return text_copy((const char *)e->payload, e->payload_size, ptx, ptx_len, msg, msglen);
    if (zstd && lz4)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: PTX entry flags 0x%llx name two compressions",
                    (unsigned long long)e->flags);
    if (e->compressed == 0 || e->compressed > e->payload_size || e->uncompressed == 0 ||
        e->uncompressed > MAX_PTX)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen,
                    "fatbin: PTX entry sizes do not fit (compressed %u of %llu, uncompressed %llu)",
                    e->compressed, (unsigned long long)e->payload_size, (unsigned long long)e->uncompressed);
    char *buf = malloc(e->uncompressed + 1);
    if (!buf)
        return fail(CUDA_ERROR_OUT_OF_MEMORY, msg, msglen, "fatbin: out of memory for %llu bytes of PTX",
                    (unsigned long long)e->uncompressed);
    size_t got;
    if (zstd) {
        got = ZSTD_decompress(buf, e->uncompressed, e->payload, e->compressed);
        if (ZSTD_isError(got)) {
            free(buf);
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: zstd PTX entry does not decompress: %s",
                        ZSTD_getErrorName(got));
        }
    } else {
        int n = LZ4_decompress_safe((const char *)e->payload, buf, (int)e->compressed, (int)e->uncompressed);
        if (n < 0) {
            free(buf);
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: LZ4 PTX entry does not decompress");
        }
        got = (size_t)n;
    }
    if (got != e->uncompressed) {
        free(buf);
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen,
                    "fatbin: PTX entry decompressed to %zu bytes, header says %llu", got,
                    (unsigned long long)e->uncompressed);
    }
    CUresult r = text_copy(buf, got, ptx, ptx_len, msg, msglen);
    free(buf);
    return r;
}

static CUresult container(const uint8_t *p, size_t len, char **ptx, size_t *ptx_len, char *msg, size_t msglen)
{
    reader r = { .p = p, .len = len };
    uint32_t magic = (uint32_t)get(&r, 4);
    uint16_t version = (uint16_t)get(&r, 2);
    uint16_t hsize = (uint16_t)get(&r, 2);
    uint64_t psize = get(&r, 8);
    if (r.err)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: container header truncated");
    if (magic != CONTAINER_MAGIC || version != 1 || hsize < 16)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen,
                    "fatbin: bad container header (magic 0x%08x, version %u, header size %u)", magic,
                    version, hsize);
    if (psize > MAX_IMAGE || hsize > len || psize > len - hsize)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen,
                    "fatbin: container says %llu payload bytes, %zu are there",
                    (unsigned long long)psize, hsize <= len ? len - hsize : 0);

    reader body = { .p = p + hsize, .len = (size_t)psize };
    entry best = { 0 };
    bool have = false;
    uint32_t sass_sm = 0;
    unsigned others = 0;
    while (body.off < body.len) {
        size_t start = body.off;
        entry e = { 0 };
        e.kind = (uint16_t)get(&body, 2);
        get(&body, 2);
        uint32_t ehsize = (uint32_t)get(&body, 4);
        e.payload_size = get(&body, 8);
        e.compressed = (uint32_t)get(&body, 4);
        get(&body, 4);
        get(&body, 2);   /* minor */
        get(&body, 2);   /* major */
        e.sm = (uint32_t)get(&body, 4);
        get(&body, 4);   /* name offset */
        get(&body, 4);   /* name length */
        e.flags = get(&body, 8);
        get(&body, 8);
        e.uncompressed = get(&body, 8);
        if (body.err)
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: entry header at %zu truncated", start);
        if (ehsize < ENTRY_FIXED || ehsize > body.len - start ||
            e.payload_size > body.len - start - ehsize)
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen,
                        "fatbin: entry at %zu does not fit (header %u, payload %llu, %zu left)", start,
                        ehsize, (unsigned long long)e.payload_size, body.len - start);
        e.payload = body.p + start + ehsize;
        body.off = start + ehsize + (size_t)e.payload_size;
        if (e.kind == KIND_PTX) {
            bool better = !have || (e.sm <= SOFT_SM ? best.sm > SOFT_SM || e.sm > best.sm
                                                    : best.sm > SOFT_SM && e.sm < best.sm);
            if (better) {
                best = e;
                have = true;
            }
        } else if (e.kind == KIND_ELF) {
            sass_sm = e.sm;
        } else {
            others++;
        }
    }
    if (!have) {
        if (sass_sm)
            return fail(CUDA_ERROR_NOT_SUPPORTED, msg, msglen,
                        "module has SASS only (sm_%u), no PTX: softgpu runs PTX; build with "
                        "-gencode arch=compute_%u,code=compute_%u as well",
                        sass_sm, sass_sm, sass_sm);
        return fail(others ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_IMAGE, msg, msglen,
                    others ? "module has no PTX entry (LTO-IR only?): softgpu runs PTX"
                           : "fatbin: container holds no entry");
    }
    return entry_ptx(&best, ptx, ptx_len, msg, msglen);
}

/* Text that looks like PTX: printable ASCII and whitespace up to the NUL. */
static bool looks_like_text(const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i < n && p[i]; i++)
        if (p[i] >= 0x7f || (p[i] < 0x20 && p[i] != '\n' && p[i] != '\r' && p[i] != '\t'))
            return false;
    return i > 0;
}

CUresult soft_fatbin_ptx(const void *image, size_t len, char **ptx, size_t *ptx_len, char *msg, size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    if (!image || !ptx || !ptx_len)
        return fail(CUDA_ERROR_INVALID_VALUE, msg, msglen, "no image");
    const uint8_t *p = image;
    /* No magic holds a zero byte: a shorter string is (bad) text. */
    if (len == SIZE_MAX && strnlen(image, 4) < 4)
        len = strnlen(image, 4);
    bool unknown = len == SIZE_MAX;
    if (len < 4)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "image of %zu bytes is too short", len);
    uint32_t magic = le32(p);
    if (magic == WRAPPER_MAGIC) {
        reader r = { .p = p, .len = unknown ? 24 : len };
        get(&r, 4);
        uint32_t version = (uint32_t)get(&r, 4);
        uint64_t data = get(&r, 8);
        if (r.err)
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin wrapper truncated");
        if (version != 1 && version != 2)
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin wrapper version %u unknown", version);
        if (!data)
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin wrapper points nowhere");
        /* The wrapper carries no size: the container's header gives it. */
        return soft_fatbin_ptx((const void *)(uintptr_t)data, SIZE_MAX, ptx, ptx_len, msg, msglen);
    }
    if (magic == CONTAINER_MAGIC) {
        size_t n = len;
        if (unknown) {
            uint64_t psize = 0;
            memcpy(&psize, p + 8, 8);   /* native little-endian, as nvcc wrote it */
            uint16_t hsize;
            memcpy(&hsize, p + 6, 2);
            if (psize > MAX_IMAGE || hsize < 16)
                return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: container payload size %llu too large",
                            (unsigned long long)psize);
            n = (size_t)hsize + (size_t)psize;
        }
        return container(p, n, ptx, ptx_len, msg, msglen);
    }
    if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F')
        return fail(CUDA_ERROR_NOT_SUPPORTED, msg, msglen,
                    "module is a SASS cubin (ELF), no PTX: softgpu runs PTX; load PTX or a fatbin with "
                    "a compute_XX entry");
    size_t n = unknown ? strlen((const char *)p) : len;
    if (!looks_like_text(p, n))
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen,
                    "image is neither PTX text, a fatbin nor a cubin (starts 0x%08x)", magic);
    return text_copy((const char *)p, n, ptx, ptx_len, msg, msglen);
}

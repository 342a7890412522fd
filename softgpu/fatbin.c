/* Fatbins: finds the PTX softgpu runs in a module image. An image is PTX
 * text, a fatbin wrapper (0x466243B1, pointing to a container), a fatbin
 * container (0xBA55ED50) or an ELF cubin. A container's entries are SASS
 * (kind 2), PTX (kind 1) or LTO-IR (kind 8), each raw, zstd or LZ4; the PTX
 * entry with the highest virtual architecture up to softgpu's 7.5 wins (else
 * the lowest above: an interpreter is not bound to its target). SASS
 * without kernels or variables (cuBLAS loads such modules) loads empty.
 * Every read is bounded: a truncated or corrupt image gets
 * CUDA_ERROR_INVALID_IMAGE, never a read past its end. */
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

/* An entry's payload, decompressed when it is (*owned: free it). */
static CUresult entry_bytes(const entry *e, const uint8_t **out, size_t *out_len, bool *owned, char *msg,
                            size_t msglen)
{
    bool zstd = e->flags & FLAG_ZSTD, lz4 = e->flags & FLAG_LZ4;
    *owned = false;
    if (!zstd && !lz4) {
        *out = e->payload;
        *out_len = (size_t)e->payload_size;
        return CUDA_SUCCESS;
    }
    if (zstd && lz4)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: entry flags 0x%llx name two compressions",
                    (unsigned long long)e->flags);
    if (e->compressed == 0 || e->compressed > e->payload_size || e->uncompressed == 0 ||
        e->uncompressed > MAX_PTX)
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen,
                    "fatbin: entry sizes do not fit (compressed %u of %llu, uncompressed %llu)",
                    e->compressed, (unsigned long long)e->payload_size, (unsigned long long)e->uncompressed);
    char *buf = malloc(e->uncompressed + 1);
    if (!buf)
        return fail(CUDA_ERROR_OUT_OF_MEMORY, msg, msglen, "fatbin: out of memory for %llu bytes",
                    (unsigned long long)e->uncompressed);
    size_t got;
    if (zstd) {
        got = ZSTD_decompress(buf, e->uncompressed, e->payload, e->compressed);
        if (ZSTD_isError(got)) {
            free(buf);
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: zstd entry does not decompress: %s",
                        ZSTD_getErrorName(got));
        }
    } else {
        int n = LZ4_decompress_safe((const char *)e->payload, buf, (int)e->compressed, (int)e->uncompressed);
        if (n < 0) {
            free(buf);
            return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: LZ4 entry does not decompress");
        }
        got = (size_t)n;
    }
    if (got != e->uncompressed) {
        free(buf);
        return fail(CUDA_ERROR_INVALID_IMAGE, msg, msglen, "fatbin: entry decompressed to %zu bytes, header says %llu",
                    got, (unsigned long long)e->uncompressed);
    }
    *out = (const uint8_t *)buf;
    *out_len = got;
    *owned = true;
    return CUDA_SUCCESS;
}

static CUresult entry_ptx(const entry *e, char **ptx, size_t *ptx_len, char *msg, size_t msglen)
{
    const uint8_t *b;
    size_t n;
    bool owned;
    CUresult r = entry_bytes(e, &b, &n, &owned, msg, msglen);
    if (r != CUDA_SUCCESS)
        return r;
    r = text_copy((const char *)b, n, ptx, ptx_len, msg, msglen);
    if (owned)
        free((void *)b);
    return r;
}

/* Whether an ELF cubin holds what a program could reach: code (a .text.*
 * section) or a variable with a global name (a defined GLOBAL or WEAK
 * OBJECT symbol). A malformed one counts as holding them, so that it is
 * refused rather than loaded empty. */
static bool elf_has_code(const uint8_t *p, size_t n)
{
    reader r = { .p = p, .len = n };
    if (n < 64 || p[4] != 2)   /* ELFCLASS64 */
        return true;
    r.off = 0x28;
    uint64_t shoff = get(&r, 8);
    r.off = 0x3a;
    uint16_t shentsize = (uint16_t)get(&r, 2), shnum = (uint16_t)get(&r, 2), shstrndx = (uint16_t)get(&r, 2);
    if (r.err || shentsize < 64 || shstrndx >= shnum || shoff > n || (uint64_t)shnum * shentsize > n - shoff)
        return true;
    r.off = (size_t)shoff + (size_t)shstrndx * shentsize + 0x18;
    uint64_t stroff = get(&r, 8), strsize = get(&r, 8);
    if (r.err || stroff > n || strsize > n - stroff)
        return true;
    for (unsigned i = 0; i < shnum; i++) {
        r.off = (size_t)shoff + (size_t)i * shentsize;
        uint32_t name = (uint32_t)get(&r, 4), type = (uint32_t)get(&r, 4);
        r.off += 16;
        uint64_t off = get(&r, 8), size = get(&r, 8);
        if (r.err || name >= strsize)
            return true;
        const char *s = (const char *)p + stroff + name;
        if (strnlen(s, (size_t)(strsize - name)) > 6 && strncmp(s, ".text.", 6) == 0)
            return true;
        if (type != 2)   /* SHT_SYMTAB */
            continue;
        if (off > n || size > n - off)
            return true;
        for (uint64_t k = 0; k + 24 <= size; k += 24) {
            const uint8_t *sym = p + off + k;
            unsigned bind = sym[4] >> 4, stype = sym[4] & 15;
            uint16_t shndx = (uint16_t)(sym[6] | sym[7] << 8);
            if ((bind == 1 || bind == 2) && stype == 1 && shndx != 0)
                return true;
        }
    }
    return false;
}

/* A raw cubin's size when none is given: its section headers come last. */
static size_t elf_size(const uint8_t *p)
{
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    return shoff < MAX_IMAGE ? (size_t)shoff + (size_t)shentsize * shnum : 0;
}

/* PTX for a module that holds no code at all (an ELF with no kernels, no
 * variables): loading it gives an empty module, as a GPU driver's does. */
static CUresult empty_module(char **ptx, size_t *ptx_len, char *msg, size_t msglen)
{
    static const char empty[] = ".version 7.0\n.target sm_75\n.address_size 64\n";
    return text_copy(empty, sizeof empty, ptx, ptx_len, msg, msglen);
}

/* The PTX to run from a container; with elf_out, its first SASS entry
 * instead (CUDA_ERROR_NOT_FOUND when it has none). */
static CUresult container(const uint8_t *p, size_t len, char **ptx, size_t *ptx_len, char *msg, size_t msglen,
                          entry *elf_out)
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
    entry best = { 0 }, elf = { 0 };
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
            if (!sass_sm)
                elf = e;
            sass_sm = e.sm;
        } else {
            others++;
        }
    }
    if (elf_out) {
        *elf_out = elf;
        return sass_sm ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    }
    if (!have && sass_sm) {
        const uint8_t *b;
        size_t n;
        bool owned;
        if (entry_bytes(&elf, &b, &n, &owned, msg, msglen) == CUDA_SUCCESS) {
            bool code = elf_has_code(b, n);
            if (owned)
                free((void *)b);
            if (!code)
                return empty_module(ptx, ptx_len, msg, msglen);
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
        return container(p, n, ptx, ptx_len, msg, msglen, NULL);
    }
    if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') {
        if (!elf_has_code(p, unknown ? elf_size(p) : len))
            return empty_module(ptx, ptx_len, msg, msglen);
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

/* Appends the kernels of an ELF cubin (its .text.NAME sections) to text as
 * entries whose bodies trap; false when it is malformed or full. */
static bool stub_kernels(const uint8_t *p, size_t n, char *text, size_t cap, size_t *len, unsigned *count)
{
    reader r = { .p = p, .len = n };
    if (n < 64 || p[4] != 2)
        return false;
    r.off = 0x28;
    uint64_t shoff = get(&r, 8);
    r.off = 0x3a;
    uint16_t shentsize = (uint16_t)get(&r, 2), shnum = (uint16_t)get(&r, 2), shstrndx = (uint16_t)get(&r, 2);
    if (r.err || shentsize < 64 || shstrndx >= shnum || shoff > n || (uint64_t)shnum * shentsize > n - shoff)
        return false;
    r.off = (size_t)shoff + (size_t)shstrndx * shentsize + 0x18;
    uint64_t stroff = get(&r, 8), strsize = get(&r, 8);
    if (r.err || stroff > n || strsize > n - stroff)
        return false;
    for (unsigned i = 0; i < shnum; i++) {
        r.off = (size_t)shoff + (size_t)i * shentsize;
        uint32_t name = (uint32_t)get(&r, 4);
        if (r.err || name >= strsize)
            return false;
        const char *s = (const char *)p + stroff + name;
        size_t sl = strnlen(s, (size_t)(strsize - name));
        if (sl <= 6 || strncmp(s, ".text.", 6) != 0)
            continue;
        int w = snprintf(text + *len, cap - *len, ".visible .entry %.*s()\n{\ntrap;\n}\n", (int)(sl - 6), s + 6);
        if (w < 0 || (size_t)w >= cap - *len)
            return false;
        *len += (size_t)w;
        (*count)++;
    }
    return true;
}

CUresult soft_fatbin_sass_stub(const void *image, size_t len, char **ptx, size_t *ptx_len)
{
    const uint8_t *p = image;
    if (!image || len < 4)
        return CUDA_ERROR_INVALID_IMAGE;
    if (le32(p) == WRAPPER_MAGIC) {
        uint64_t data;
        memcpy(&data, p + 8, 8);
        if (!data)
            return CUDA_ERROR_INVALID_IMAGE;
        p = (const uint8_t *)(uintptr_t)data;
        len = SIZE_MAX;
    }
    const uint8_t *elf = NULL;
    size_t n = 0;
    bool owned = false;
    char msg[8];
    if (le32(p) == CONTAINER_MAGIC) {
        uint64_t psize;
        uint16_t hsize;
        memcpy(&psize, p + 8, 8);
        memcpy(&hsize, p + 6, 2);
        if (psize > MAX_IMAGE || hsize < 16)
            return CUDA_ERROR_INVALID_IMAGE;
        size_t total = (size_t)hsize + (size_t)psize;
        entry e;
        if (container(p, len == SIZE_MAX || len > total ? total : len, NULL, NULL, msg, sizeof msg, &e) !=
                CUDA_SUCCESS ||
            entry_bytes(&e, &elf, &n, &owned, msg, sizeof msg) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_IMAGE;
    } else if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') {
        elf = p;
        n = len == SIZE_MAX ? elf_size(p) : len;
    } else {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    size_t cap = 64 + n, tl = 0;   /* a section name is in the ELF: its line is at most ~40 more */
    char *text = malloc(cap * 2);
    unsigned count = 0;
    CUresult r = CUDA_ERROR_INVALID_IMAGE;
    if (text) {
        tl = (size_t)snprintf(text, cap * 2, ".version 7.0\n.target sm_75\n.address_size 64\n");
        if (stub_kernels(elf, n, text, cap * 2, &tl, &count) && count > 0) {
            *ptx = text;
            *ptx_len = tl;
            text = NULL;
            r = CUDA_SUCCESS;
        }
    }
    free(text);
    if (owned)
        free((void *)elf);
    return r;
}

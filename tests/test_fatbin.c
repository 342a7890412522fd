/* softgpu's fatbin reader (softgpu/fatbin.c), driven directly: every kernel
 * of tests/kernels in every mode yields its PTX, the compressed entries
 * (zstd, LZ4) decode to the same text as the raw one, wrappers, PTX text and
 * SASS-only images behave, and every truncation and single-bit flip of real
 * fatbins, handed over in exact-size heap copies, ends in an error or in
 * well-formed text, never in a read past the end. */
#include "softgpu/driver.h"
#include "tests/support.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tests/seed.h"

static const char *kernels[] = { "vecadd", "saxpy", "reduce", "matmul", "globals", "printf", "histogram",
                                 "shuffle", "warpreduce", "structparam", "gridstride", "math", "int64",
                                 "half", "funcs" };
static const char *modes[] = { "default", "fast", "debug", "nocomp", "speed", "size" };

static uint8_t *load(const char *path, size_t *n)
{
    char *d = support_read_file(path, n);
    cr_assert(d, "cannot read %s (make kernels)", path);
    return (uint8_t *)d;
}

static uint8_t *kernel_fatbin(const char *k, const char *mode, size_t *n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/%s.%s.fatbin", RIG_BUILD_DIR, k, mode);
    return load(path, n);
}

static char *ptx_of(const uint8_t *img, size_t n)
{
    char *ptx = NULL, msg[256];
    size_t len = 0;
    CUresult r = soft_fatbin_ptx(img, n, &ptx, &len, msg, sizeof msg);
    cr_assert_eq(r, CUDA_SUCCESS, "soft_fatbin_ptx: %d %s", r, msg);
    cr_assert_eq(strlen(ptx), len);
    return ptx;
}

Test(fatbin, every_kernel_every_mode)
{
    for (size_t k = 0; k < sizeof kernels / sizeof *kernels; k++) {
        char *raw = NULL;
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            size_t n;
            uint8_t *img = kernel_fatbin(kernels[k], modes[m], &n);
            char *ptx = ptx_of(img, n);
            cr_expect(strstr(ptx, ".target sm_75"), "%s.%s: no .target sm_75", kernels[k], modes[m]);
            cr_expect(strstr(ptx, ".entry"), "%s.%s: no .entry", kernels[k], modes[m]);
            /* Unknown size (as cuModuleLoadData gets it): the header says. */
            char *again = ptx_of(img, SIZE_MAX);
            cr_expect_str_eq(again, ptx);
            free(again);
            /* default, nocomp, speed and size differ only in compression. */
            if (strcmp(modes[m], "nocomp") == 0)
                raw = strdup(ptx);
            free(ptx);
            free(img);
        }
        const char *same[] = { "default", "speed", "size" };
        for (size_t m = 0; m < 3; m++) {
            size_t n;
            uint8_t *img = kernel_fatbin(kernels[k], same[m], &n);
            char *ptx = ptx_of(img, n);
            cr_expect_str_eq(ptx, raw, "%s.%s decodes differently from nocomp", kernels[k], same[m]);
            free(ptx);
            free(img);
        }
        free(raw);
    }
}

Test(fatbin, wrapper_points_to_container)
{
    size_t n;
    uint8_t *img = kernel_fatbin("vecadd", "default", &n);
    struct { uint32_t magic, version; const void *data; void *unused; } w = { 0x466243B1u, 1, img, NULL };
    char *a = ptx_of((const uint8_t *)&w, sizeof w), *b = ptx_of(img, n);
    cr_expect_str_eq(a, b);
    free(a);
    free(b);
    w.version = 7;
    char *ptx = NULL, msg[256];
    size_t len;
    cr_expect_eq(soft_fatbin_ptx(&w, sizeof w, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    w.version = 1;
    w.data = NULL;
    cr_expect_eq(soft_fatbin_ptx(&w, sizeof w, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    cr_expect_eq(soft_fatbin_ptx(&w, 12, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    free(img);
}

Test(fatbin, ptx_text_passes_through)
{
    const char text[] = ".version 9.0\n.target sm_75\n.address_size 64\n";
    char *ptx = ptx_of((const uint8_t *)text, SIZE_MAX);
    cr_expect_str_eq(ptx, text);
    free(ptx);
    /* Without a NUL, when the size is known. */
    ptx = ptx_of((const uint8_t *)text, 13);
    cr_expect_str_eq(ptx, ".version 9.0\n");
    free(ptx);
}

Test(fatbin, sass_only_is_refused_with_a_message)
{
    char path[512];
    snprintf(path, sizeof path, "%s/softgpu-tests/sass_only.fatbin", RIG_BUILD_DIR);
    size_t n;
    uint8_t *img = load(path, &n);
    char *ptx = NULL, msg[256] = "";
    size_t len;
    cr_expect_eq(soft_fatbin_ptx(img, n, &ptx, &len, msg, sizeof msg), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect(strstr(msg, "SASS") && strstr(msg, "sm_86"), "message: %s", msg);
    cr_expect_null(ptx);
    free(img);
}

/* A minimal ELF64 cubin: a NULL section, .shstrtab and, when given, one more
 * named section (size n written to *len). */
static uint8_t *tiny_cubin(const char *extra, size_t *len)
{
    static uint8_t img[512];
    memset(img, 0, sizeof img);
    memcpy(img, "\x7f" "ELF", 4);
    img[4] = 2;   /* 64-bit */
    img[5] = 1;
    char names[64] = "";
    size_t nl = 1;   /* names[0] = "" */
    memcpy(names + nl, ".shstrtab", 10);
    size_t shstr = nl;
    nl += 10;
    size_t xname = nl;
    if (extra) {
        memcpy(names + nl, extra, strlen(extra) + 1);
        nl += strlen(extra) + 1;
    }
    memcpy(img + 64, names, nl);
    uint64_t shoff = 192;
    uint16_t shentsize = 64, shnum = extra ? 3 : 2, shstrndx = 1;
    memcpy(img + 0x28, &shoff, 8);
    memcpy(img + 0x3a, &shentsize, 2);
    memcpy(img + 0x3c, &shnum, 2);
    memcpy(img + 0x3e, &shstrndx, 2);
    uint8_t *sh = img + shoff + 64;   /* section 1: .shstrtab */
    uint32_t nm = (uint32_t)shstr, type = 3;
    uint64_t off = 64, size = nl;
    memcpy(sh, &nm, 4);
    memcpy(sh + 4, &type, 4);
    memcpy(sh + 0x18, &off, 8);
    memcpy(sh + 0x20, &size, 8);
    if (extra) {
        sh += 64;
        nm = (uint32_t)xname;
        type = 1;
        memcpy(sh, &nm, 4);
        memcpy(sh + 4, &type, 4);
    }
    *len = shoff + (size_t)shentsize * shnum;
    return img;
}

Test(fatbin, cubin_without_kernels_or_variables_loads_empty)
{
    /* cuBLAS loads SASS modules holding nothing a program can reach. */
    size_t n;
    uint8_t *img = tiny_cubin(".nv.callgraph", &n);
    char *ptx = NULL, msg[256] = "";
    size_t len;
    cr_assert_eq(soft_fatbin_ptx(img, n, &ptx, &len, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    cr_expect(strstr(ptx, ".version") && !strstr(ptx, ".entry"), "%s", ptx);
    free(ptx);
    ptx = NULL;
    /* Unknown size, as cuLibraryLoadData passes: the section headers say. */
    cr_assert_eq(soft_fatbin_ptx(img, SIZE_MAX, &ptx, &len, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    free(ptx);
    ptx = NULL;
    img = tiny_cubin(".text.kernel", &n);
    cr_expect_eq(soft_fatbin_ptx(img, n, &ptx, &len, msg, sizeof msg), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect_null(ptx);
    /* A library of it: the kernel named, its body a trap. */
    cr_assert_eq(soft_fatbin_sass_stub(img, n, &ptx, &len), CUDA_SUCCESS);
    cr_expect(strstr(ptx, ".entry kernel()") && strstr(ptx, "trap;"), "%s", ptx);
    free(ptx);
    img = tiny_cubin(".nv.global", &n);
    cr_expect_eq(soft_fatbin_ptx(img, n, &ptx, &len, msg, sizeof msg), CUDA_SUCCESS);
    free(ptx);
}

Test(fatbin, cubin_is_refused)
{
    static const uint8_t elf[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
    char *ptx = NULL, msg[256] = "";
    size_t len;
    cr_expect_eq(soft_fatbin_ptx(elf, sizeof elf, &ptx, &len, msg, sizeof msg), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect(strstr(msg, "cubin"), "message: %s", msg);
}

Test(fatbin, garbage_is_invalid)
{
    static const uint8_t bin[] = { 0x01, 0x02, 0x03, 0x04, 0x05 };
    char *ptx = NULL, msg[256] = "";
    size_t len;
    cr_expect_eq(soft_fatbin_ptx(bin, sizeof bin, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    cr_expect_eq(soft_fatbin_ptx(bin, 0, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    cr_expect_eq(soft_fatbin_ptx("", SIZE_MAX, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    cr_expect_eq(soft_fatbin_ptx(NULL, 5, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_VALUE);
}

/* A container with one PTX entry whose header fields we choose. */
static size_t build(uint8_t *out, uint64_t flags, const void *payload, uint32_t psize, uint32_t csize,
                    uint64_t usize, uint32_t sm)
{
    memset(out, 0, 16 + 64 + psize);
    uint32_t magic = 0xBA55ED50u;
    uint16_t ver = 1, hs = 16;
    uint64_t total = 64 + psize;
    memcpy(out, &magic, 4);
    memcpy(out + 4, &ver, 2);
    memcpy(out + 6, &hs, 2);
    memcpy(out + 8, &total, 8);
    uint8_t *e = out + 16;
    uint16_t kind = 1;
    uint32_t ehs = 64;
    uint64_t eps = psize;
    memcpy(e, &kind, 2);
    memcpy(e + 4, &ehs, 4);
    memcpy(e + 8, &eps, 8);
    memcpy(e + 16, &csize, 4);
    memcpy(e + 28, &sm, 4);
    memcpy(e + 40, &flags, 8);
    memcpy(e + 56, &usize, 8);
    memcpy(e + 64, payload, psize);
    return 16 + 64 + psize;
}

Test(fatbin, header_lies_are_caught)
{
    uint8_t buf[512], junk[64];
    memset(junk, 0xab, sizeof junk);
    char *ptx = NULL, msg[256];
    size_t len;
    /* zstd flag over bytes that are not zstd. */
    size_t n = build(buf, 0x8011, junk, 64, 64, 100, 75);
    cr_expect_eq(soft_fatbin_ptx(buf, n, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    /* LZ4 the same. */
    n = build(buf, 0x2011, junk, 64, 64, 100, 75);
    cr_expect_eq(soft_fatbin_ptx(buf, n, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    /* Compressed size beyond the payload. */
    n = build(buf, 0x8011, junk, 64, 65, 100, 75);
    cr_expect_eq(soft_fatbin_ptx(buf, n, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    /* Both compressions at once. */
    n = build(buf, 0xa011, junk, 64, 64, 100, 75);
    cr_expect_eq(soft_fatbin_ptx(buf, n, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    /* An absurd uncompressed size is refused before allocating. */
    n = build(buf, 0x8011, junk, 64, 64, 1ull << 40, 75);
    cr_expect_eq(soft_fatbin_ptx(buf, n, &ptx, &len, msg, sizeof msg), CUDA_ERROR_INVALID_IMAGE);
    /* Raw text is taken up to its NUL. */
    n = build(buf, 0x11, ".version 9.0\0zz", 16, 0, 0, 75);
    cr_assert_eq(soft_fatbin_ptx(buf, n, &ptx, &len, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    cr_expect_str_eq(ptx, ".version 9.0");
    free(ptx);
}

Test(fatbin, best_ptx_entry_is_chosen)
{
    /* Two containers' worth of entries in one: sm_52, sm_75 and sm_86 PTX. */
    uint8_t buf[1024];
    uint8_t *p = buf + 16;
    const char *texts[] = { "// fifty-two", "// seventy-five", "// eighty-six" };
    uint32_t sms[] = { 52, 86, 75 };
    const char *want = texts[1];
    const char *order[] = { texts[0], texts[2], texts[1] };
    for (int i = 0; i < 3; i++) {
        uint8_t one[256];
        size_t n = build(one, 0x11, order[i], (uint32_t)strlen(order[i]) + 1, 0, 0, sms[i]);
        memcpy(p, one + 16, n - 16);
        p += n - 16;
    }
    uint32_t magic = 0xBA55ED50u;
    uint16_t ver = 1, hs = 16;
    uint64_t total = (uint64_t)(p - buf - 16);
    memcpy(buf, &magic, 4);
    memcpy(buf + 4, &ver, 2);
    memcpy(buf + 6, &hs, 2);
    memcpy(buf + 8, &total, 8);
    char *ptx = ptx_of(buf, (size_t)(p - buf));
    cr_expect_str_eq(ptx, want);
    free(ptx);
}

/* The CUDA libraries carry compute_120 PTX and SASS for older GPUs: PTX
 * newer than softgpu's 7.5, when it is the only PTX, is taken (an
 * interpreter is not bound to its target). */
Test(fatbin, newer_ptx_taken_when_it_is_the_only_one)
{
    uint8_t buf[256];
    const char text[] = ".version 8.8\n.target sm_120\n.address_size 64\n";
    size_t n = build(buf, 0x11, text, (uint32_t)sizeof text, 0, 0, 120);
    char *ptx = ptx_of(buf, n);
    cr_expect_str_eq(ptx, text);
    free(ptx);
}

static void check_mutation(const uint8_t *p, size_t n, void *ctx)
{
    size_t *successes = ctx;
    char *ptx = NULL, msg[256] = "";
    size_t len = 0;
    CUresult r = soft_fatbin_ptx(p, n, &ptx, &len, msg, sizeof msg);
    if (r == CUDA_SUCCESS) {
        cr_assert_not_null(ptx);
        cr_assert_eq(strlen(ptx), len);
        (*successes)++;
        free(ptx);
    } else {
        cr_assert_null(ptx);
        cr_assert(msg[0], "error %d without a message", r);
    }
}

/* Every truncation (each must fail: the container's size no longer fits)
 * and every single-bit flip (any result but a crash or an over-read), each
 * in an exact-size heap buffer so ASan sees a read past the end. The flips
 * reuse one buffer, flipping each bit and back, which keeps this quick
 * under ASan. */
static void mutate(const char *k, const char *mode)
{
    size_t n;
    uint8_t *img = kernel_fatbin(k, mode, &n);
    for (size_t len = 0; len < n; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, img, len);
        char *ptx = NULL, msg[256] = "";
        size_t plen;
        cr_assert_neq(soft_fatbin_ptx(copy, len, &ptx, &plen, msg, sizeof msg), CUDA_SUCCESS,
                      "%s.%s truncated to %zu decodes", k, mode, len);
        cr_assert(msg[0], "%s.%s truncated to %zu: no message", k, mode, len);
        free(copy);
    }
    uint8_t *copy = malloc(n);
    memcpy(copy, img, n);
    size_t successes = 0;
    for (size_t bit = 0; bit < n * 8; bit++) {
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        check_mutation(copy, n, &successes);
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    /* Most flips land in the SASS entry, which is never read. */
    cr_expect_gt(successes, 0);
    free(copy);
    free(img);
}

Test(fatbin, truncations_and_bit_flips_zstd) { mutate("vecadd", "size"); }
Test(fatbin, truncations_and_bit_flips_lz4) { mutate("saxpy", "speed"); }
Test(fatbin, truncations_and_bit_flips_raw) { mutate("vecadd", "nocomp"); }
Test(fatbin, truncations_and_bit_flips_default) { mutate("structparam", "default"); }

Test(fatbin, seeded_random_containers)
{
    test_srand();
    uint8_t buf[256];
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(rand() % 200);
        for (size_t j = 0; j < n; j++)
            buf[j] = (uint8_t)rand();
        if (n >= 16 && (i & 1)) {
            uint32_t magic = 0xBA55ED50u;
            uint16_t ver = 1, hs = 16;
            uint64_t total = n - 16;
            memcpy(buf, &magic, 4);
            memcpy(buf + 4, &ver, 2);
            memcpy(buf + 6, &hs, 2);
            memcpy(buf + 8, &total, 8);
        }
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, buf, n);
        size_t ok = 0;
        check_mutation(copy, n, &ok);
        free(copy);
    }
}

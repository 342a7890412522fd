/* Helpers for the engine's tests (test_ptx_*.c): read a built PTX file,
 * parse it, keep a table of malloc'd "device" buffers that a soft_memory
 * answers from, bind globals, launch. Header-only: each test binary is one
 * translation unit plus this. */
#ifndef RIG_TESTS_TEST_PTX_UTIL_H
#define RIG_TESTS_TEST_PTX_UTIL_H

#include "softgpu/engine.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const tp_modes[] = { "default", "fast", "debug", "nocomp", "speed", "size",
                                        "sm90" };
#define TP_NMODES 7

/* ---- the buffer table ---- */

#define TP_MAXBUF 64
static struct {
    void *p;
    size_t n;
} tp_bufs[TP_MAXBUF];
static unsigned tp_nbufs;
static void *tp_gaddr[TP_MAXBUF];

static __attribute__((unused)) bool tp_find(void *ctx, uint64_t addr, uint64_t *base, uint64_t *size)
{
    (void)ctx;
    for (unsigned i = 0; i < tp_nbufs; i++) {
        uint64_t b = (uintptr_t)tp_bufs[i].p;
        if (tp_bufs[i].p && addr >= b && addr - b < tp_bufs[i].n) {
            *base = b;
            *size = tp_bufs[i].n;
            return true;
        }
    }
    return false;
}

static const soft_memory tp_memory = { .ctx = NULL, .find = tp_find };

/* A zeroed buffer of n bytes that kernels may access. */
static __attribute__((unused)) void *tp_alloc(size_t n)
{
    cr_assert(tp_nbufs < TP_MAXBUF);
    void *p = calloc(1, n ? n : 1);
    cr_assert(p);
    tp_bufs[tp_nbufs].p = p;
    tp_bufs[tp_nbufs].n = n;
    tp_nbufs++;
    return p;
}

static __attribute__((unused)) void tp_free_all(void)
{
    for (unsigned i = 0; i < tp_nbufs; i++)
        free(tp_bufs[i].p);
    tp_nbufs = 0;
}

/* ---- programs ---- */

static __attribute__((unused)) char *tp_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s (build the kernels first)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    cr_assert(b);
    cr_assert(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

/* Parses build/kernels/K.M.ptx and binds its globals to fresh buffers
 * holding their initialisers. */
static __attribute__((unused)) soft_program *tp_load(const char *kernel, const char *mode)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/%s.%s.ptx", RIG_BUILD_DIR, kernel, mode);
    size_t len;
    char *text = tp_read(path, &len);
    soft_program *prog = NULL;
    char msg[256];
    CUresult rc = soft_program_parse(text, len, &prog, msg, sizeof msg);
    free(text);
    cr_assert_eq(rc, CUDA_SUCCESS, "%s.%s: parse failed (%d): %s", kernel, mode, rc, msg);
    for (uint32_t i = 0; i < soft_program_global_count(prog); i++) {
        const soft_global_info *g = soft_program_global(prog, i);
        void *p = tp_alloc(g->size);
        if (g->init)
            memcpy(p, g->init, g->size);
        soft_program_bind_global(prog, i, (uint64_t)(uintptr_t)p);
        if (i < TP_MAXBUF)
            tp_gaddr[i] = p;
    }
    return prog;
}

/* Host address of the bound global named name. */
static __attribute__((unused)) void *tp_global(soft_program *prog, const char *name)
{
    for (uint32_t i = 0; i < soft_program_global_count(prog) && i < TP_MAXBUF; i++)
        if (strcmp(soft_program_global(prog, i)->name, name) == 0)
            return tp_gaddr[i];
    cr_assert_fail("no global %s", name);
    return NULL;
}

typedef struct tp_args {
    uint8_t buf[512];
    size_t len;
} tp_args;

static __attribute__((unused)) void tp_arg(tp_args *a, const void *v, size_t size, size_t align)
{
    a->len = (a->len + align - 1) / align * align;
    cr_assert(a->len + size <= sizeof a->buf);
    memcpy(a->buf + a->len, v, size);
    a->len += size;
}

#define TP_ARG(a, v) do { __typeof__(v) tp_v_ = (v); tp_arg((a), &tp_v_, sizeof tp_v_, _Alignof(__typeof__(v))); } while (0)

/* Launches entry name; returns the result, message in msg. */
static CUresult tp_launch_ex(soft_program *prog, const char *name, uint32_t gx, uint32_t gy,
                             uint32_t bx, uint32_t by, uint32_t dyn, const tp_args *a,
                             void (*print)(void *, const char *, size_t), void *pctx,
                             char *msg, size_t msglen)
{
    int e = soft_program_find_entry(prog, name);
    cr_assert(e >= 0, "no entry %s", name);
    const soft_entry_info *info = soft_program_entry(prog, (uint32_t)e);
    cr_assert_eq(info->param_bytes, a->len, "%s: parameter bytes %u, test packs %zu", name,
                 info->param_bytes, a->len);
    soft_launch l = {
        .entry = (uint32_t)e,
        .grid = { gx, gy, 1 },
        .block = { bx, by, 1 },
        .dynamic_shared_bytes = dyn,
        .params = a->buf,
        .memory = &tp_memory,
        .print = print,
        .print_ctx = pctx,
        .threads = 2,
    };
    return soft_program_launch(prog, &l, msg, msglen);
}

static __attribute__((unused)) void tp_launch(soft_program *prog, const char *name, const char *mode, uint32_t gx,
                      uint32_t gy, uint32_t bx, uint32_t by, uint32_t dyn, const tp_args *a)
{
    char msg[256];
    CUresult rc = tp_launch_ex(prog, name, gx, gy, bx, by, dyn, a, NULL, NULL, msg, sizeof msg);
    cr_assert_eq(rc, CUDA_SUCCESS, "%s (%s): launch failed (%d): %s", name, mode, rc, msg);
}

/* ---- random inputs: a seeded generator, seed printed on failure ---- */

static uint64_t tp_state;

static uint64_t tp_rand(void)
{
    uint64_t x = tp_state += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static __attribute__((unused)) float tp_randf(float lo, float hi)
{
    return lo + (hi - lo) * (float)(tp_rand() >> 40) / (float)(1 << 24);
}

static __attribute__((unused)) bool tp_close(double got, double want, double rel, double abs_tol)
{
    if (got == want)
        return true;
    double d = got > want ? got - want : want - got;
    double m = want < 0 ? -want : want;
    return d <= abs_tol || d <= rel * m;
}

#endif

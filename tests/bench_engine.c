/* softgpu engine speed: thread-instructions per second for vector add, a
 * block reduction and a tiled matrix multiply, GFLOP/s of a wmma GEMM and
 * texture fetches per second of bilinear sampling, on one host thread and on
 * all of them, by the wall clock and per CPU-second. Prints; asserts
 * nothing (speed is measured, never tested). */
#include "softgpu/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct buf {
    void *p;
    size_t n;
} buf;

static buf bufs[8];
static unsigned nbufs;

static bool find(void *ctx, uint64_t addr, uint64_t *base, uint64_t *size)
{
    (void)ctx;
    for (unsigned i = 0; i < nbufs; i++) {
        uint64_t b = (uintptr_t)bufs[i].p;
        if (addr >= b && addr - b < bufs[i].n) {
            *base = b;
            *size = bufs[i].n;
            return true;
        }
    }
    return false;
}

static const soft_memory memory = { .find = find };

static void *alloc(size_t n)
{
    void *p = malloc(n);
    if (!p || nbufs == 8) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n / 4; i++)
        ((float *)p)[i] = (float)(i % 97) * 0.01f;
    bufs[nbufs++] = (buf){ p, n };
    return p;
}

static void free_all(void)
{
    for (unsigned i = 0; i < nbufs; i++)
        free(bufs[i].p);
    nbufs = 0;
}

static soft_program *load(const char *kernel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/%s.default.ptx", RIG_BUILD_DIR, kernel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench: cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "bench: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    soft_program *p;
    char msg[256];
    if (soft_program_parse(text, (size_t)n, &p, msg, sizeof msg) != CUDA_SUCCESS) {
        fprintf(stderr, "bench: %s: %s\n", path, msg);
        exit(1);
    }
    free(text);
    return p;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double last_cpu_s;   /* CPU seconds of the last measure */

/* Runs the launch reps times; prints the rate; returns the wall seconds. */
static double measure(const char *label, soft_program *p, soft_launch *l, unsigned threads, int reps)
{
    char msg[256];
    l->threads = threads;
    l->memory = &memory;
    uint64_t before = soft_engine_thread_instructions();
    double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < reps; i++)
        if (soft_program_launch(p, l, msg, sizeof msg) != CUDA_SUCCESS) {
            fprintf(stderr, "bench: %s: %s\n", label, msg);
            exit(1);
        }
    double dt = clock_s(CLOCK_MONOTONIC) - t0, dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    uint64_t n = soft_engine_thread_instructions() - before;
    /* per CPU-second as well: the machine may be shared */
    printf("  softgpu %-10s %2u thread%s %7.3f G thread-instructions/s, %.3f G per CPU-second\n",
           label, threads, threads == 1 ? " " : "s", (double)n / dt * 1e-9, (double)n / dc * 1e-9);
    last_cpu_s = dc;
    return dt;
}

/* The texture object the texture figure samples: 512x512 f32, bilinear,
 * clamped, unnormalised coordinates. */
static soft_image bench_tex;

static const soft_image *bench_image(uint64_t handle, bool surface)
{
    return handle == 1 && !surface ? &bench_tex : NULL;
}

/* A GEMM kernel's first parameters: A, B, C, then m, n, k all m. */
static void gemm_params(uint8_t *params, void *A, void *B, void *C, int m)
{
    memcpy(params, &A, 8);
    memcpy(params + 8, &B, 8);
    memcpy(params + 16, &C, 8);
    for (int i = 0; i < 3; i++)
        memcpy(params + 24 + 4 * i, &m, 4);
}

int main(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned all = ncpu > 0 ? (unsigned)ncpu : 1;
    unsigned counts[2] = { 1, all };
    for (unsigned c = 0; c < (all > 1 ? 2u : 1u); c++) {
        unsigned t = counts[c];
        {
            soft_program *p = load("vecadd");
            int n = 1 << 22;
            struct { void *a, *b, *c; int n; } __attribute__((packed)) args;
            uint8_t params[28];
            args.a = alloc((size_t)n * 4);
            args.b = alloc((size_t)n * 4);
            args.c = alloc((size_t)n * 4);
            args.n = n;
            memcpy(params, &args, 28);
            soft_launch l = { .entry = (uint32_t)soft_program_find_entry(p, "vecadd"),
                              .grid = { (uint32_t)(n / 256), 1, 1 }, .block = { 256, 1, 1 },
                              .params = params };
            measure("vecadd", p, &l, t, 3);
            soft_program_free(p);
            free_all();
        }
        {
            soft_program *p = load("reduce");
            int n = 1 << 22;
            uint8_t params[20];
            void *in = alloc((size_t)n * 4), *out = alloc((size_t)n / 512 * 4 + 4);
            memcpy(params, &in, 8);
            memcpy(params + 8, &out, 8);
            memcpy(params + 16, &n, 4);
            soft_launch l = { .entry = (uint32_t)soft_program_find_entry(p, "reduce_sum"),
                              .grid = { (uint32_t)(n / 512), 1, 1 }, .block = { 256, 1, 1 },
                              .params = params };
            measure("reduction", p, &l, t, 3);
            soft_program_free(p);
            free_all();
        }
        {
            soft_program *p = load("matmul");
            int m = 256;
            uint8_t params[36];
            gemm_params(params, alloc((size_t)m * m * 4), alloc((size_t)m * m * 4), alloc((size_t)m * m * 4), m);
            soft_launch l = { .entry = (uint32_t)soft_program_find_entry(p, "matmul"),
                              .grid = { (uint32_t)m / 16, (uint32_t)m / 16, 1 },
                              .block = { 16, 16, 1 }, .params = params };
            measure("matmul", p, &l, t, 2);
            soft_program_free(p);
            free_all();
        }
        {   /* the tensor-core path: nvcuda::wmma f16 -> f32, one warp per 16x16 tile */
            soft_program *p = load("wmma");
            int m = 256;
            float alpha = 1.0f;
            uint8_t params[40];
            gemm_params(params, alloc((size_t)m * m * 2), alloc((size_t)m * m * 2), alloc((size_t)m * m * 4), m);
            memcpy(params + 36, &alpha, 4);
            soft_launch l = { .entry = (uint32_t)soft_program_find_entry(p, "wmma_f16_rr"),
                              .grid = { (uint32_t)(m / 16) * (m / 16) / 4, 1, 1 },
                              .block = { 128, 1, 1 }, .params = params };
            int reps = 2;
            double dt = measure("wmma f16", p, &l, t, reps);
            double flop = 2.0 * m * m * m * reps;
            printf("  softgpu %-10s %2u thread%s %7.3f GFLOP/s, %.3f per CPU-second (256^3 GEMM, "
                   "tensor-core path)\n", "wmma f16", t, t == 1 ? " " : "s", flop / dt * 1e-9,
                   flop / last_cpu_s * 1e-9);
            soft_program_free(p);
            free_all();
        }
        {   /* the texture path: tex2D<float> of a 2-D f32 texture, linear filtering */
            soft_program *p = load("images");
            int n = 1 << 20, w = 512;
            float *texels = alloc((size_t)w * w * 4), *uv = alloc((size_t)n * 8);
            for (int i = 0; i < w * w; i++)
                texels[i] = (float)(i % 977);
            for (int i = 0; i < n; i++) {   /* fractional coordinates spread over the texture */
                uv[2 * i] = (float)((i * 37) % (w * 8)) / 8.0f + 0.3f;
                uv[2 * i + 1] = (float)((i / 7 * 13) % (w * 8)) / 8.0f + 0.6f;
            }
            bench_tex = (soft_image){ .data = (uint8_t *)texels, .pitch = (uint64_t)w * 4,
                                      .slice = (uint64_t)w * w * 4, .width = (uint32_t)w,
                                      .height = (uint32_t)w, .depth = 1, .format = CU_AD_FORMAT_FLOAT,
                                      .channels = 1, .elem = 4, .levels = 1,
                                      .address = { CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP,
                                                   CU_TR_ADDRESS_MODE_CLAMP },
                                      .filter = CU_TR_FILTER_MODE_LINEAR };
            uint64_t handle = 1;
            void *out = alloc((size_t)n * 4);
            uint8_t params[28];
            memcpy(params, &handle, 8);
            memcpy(params + 8, &uv, 8);
            memcpy(params + 16, &out, 8);
            memcpy(params + 24, &n, 4);
            soft_launch l = { .entry = (uint32_t)soft_program_find_entry(p, "tex2d_f1"),
                              .grid = { (uint32_t)(n / 256), 1, 1 }, .block = { 256, 1, 1 },
                              .params = params, .image = bench_image };
            int reps = 3;
            double dt = measure("tex2d", p, &l, t, reps);
            printf("  softgpu %-10s %2u thread%s %7.4f G texture fetches/s, %.4f G per CPU-second (f32, "
                   "bilinear)\n", "tex2d", t, t == 1 ? " " : "s", (double)n * reps / dt * 1e-9,
                   (double)n * reps / last_cpu_s * 1e-9);
            soft_program_free(p);
            free_all();
        }
    }
    return 0;
}

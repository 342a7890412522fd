// Large pitched copies through the runtime, as an image pipeline makes them:
//  - a 3000 x 2000 float image (24 MB of rows) from a host buffer with a
//    wider pitch into cudaMallocPitch memory, a kernel on the pitched rows,
//    and back into a host buffer with another pitch, whose padding must stay
//    untouched;
//  - the whole image device to device between two pitches, then a
//    sub-rectangle of it back with cudaMemcpy2DAsync on a stream;
//  - a few rows each longer than 4 MiB, both ways, with pitches wider than
//    the rows.
// Checked on the CPU against random data (seed printed; SEED=N repeats a
// run).
//
// Through an agent any 2-D copy of more than 16 MiB to or from the program
// once failed the job ("malformed 2-D copy: rows of 24000000 bytes, more
// than 16777216"): the shim sent it as one record.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "check.h"

__global__ void scale(float *p, size_t pitch, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) {
        float *row = (float *)((char *)p + y * pitch);
        row[x] = row[x] * 2.0f + 1.0f;
    }
}

static int wrong;

static void expect(bool ok, const char *what, size_t y, size_t x, double got, double want)
{
    if (!ok && wrong++ < 5)
        printf("%s [%zu][%zu] = %g, expected %g\n", what, y, x, got, want);
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);

    // The image: host rows of W floats every HP, device rows at its pitch.
    const size_t W = 3000, H = 2000, HP = 3100, OP = 3050;
    float *in = (float *)malloc(sizeof(float) * HP * H), *out = (float *)malloc(sizeof(float) * OP * H);
    for (size_t i = 0; i < HP * H; i++)
        in[i] = (float)(seed_next32() % 100000) * 0.25f;
    for (size_t i = 0; i < OP * H; i++)
        out[i] = -1.0f;
    float *img, *img2;
    size_t pitch, pitch2;
    CHECK(cudaMallocPitch((void **)&img, &pitch, W * sizeof(float), H));
    CHECK(cudaMallocPitch((void **)&img2, &pitch2, (W + 77) * sizeof(float), H));
    CHECK(cudaMemcpy2D(img, pitch, in, HP * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
    scale<<<dim3((unsigned)((W + 255) / 256), (unsigned)H), 256>>>(img, pitch, (int)W, (int)H);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy2D(out, OP * sizeof(float), img, pitch, W * sizeof(float), H, cudaMemcpyDeviceToHost));
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < OP; x++) {
            float want = x < W ? in[y * HP + x] * 2.0f + 1.0f : -1.0f;
            expect(out[y * OP + x] == want, "image", y, x, out[y * OP + x], want);
        }

    // Device to device between pitches, then a sub-rectangle back on a stream.
    CHECK(cudaMemcpy2D(img2, pitch2, img, pitch, W * sizeof(float), H, cudaMemcpyDeviceToDevice));
    const size_t SX = 123, SY = 45, SW = 2800, SH = 1900;
    float *sub = (float *)malloc(sizeof(float) * SW * SH);
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CHECK(cudaMemcpy2DAsync(sub, SW * sizeof(float), (char *)img2 + SY * pitch2 + SX * sizeof(float), pitch2,
                            SW * sizeof(float), SH, cudaMemcpyDeviceToHost, st));
    CHECK(cudaStreamSynchronize(st));
    for (size_t y = 0; y < SH; y++)
        for (size_t x = 0; x < SW; x++) {
            float want = in[(y + SY) * HP + x + SX] * 2.0f + 1.0f;
            expect(sub[y * SW + x] == want, "sub-rectangle", y, x, sub[y * SW + x], want);
        }

    // Rows longer than 4 MiB: 5 rows of 5 MiB + 12 bytes, pitches wider.
    const size_t LW = (5u << 20) + 12, LR = 5, LHP = LW + 4096, LOP = LW + 100;
    unsigned char *lin = (unsigned char *)malloc(LHP * LR), *lout = (unsigned char *)malloc(LOP * LR);
    for (size_t i = 0; i < LHP * LR; i++)
        lin[i] = (unsigned char)seed_next32();
    memset(lout, 0xee, LOP * LR);
    unsigned char *lrows;
    size_t lpitch;
    CHECK(cudaMallocPitch((void **)&lrows, &lpitch, LW, LR));
    CHECK(cudaMemcpy2D(lrows, lpitch, lin, LHP, LW, LR, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy2D(lout, LOP, lrows, lpitch, LW, LR, cudaMemcpyDeviceToHost));
    for (size_t y = 0; y < LR; y++)
        for (size_t x = 0; x < LOP; x++) {
            unsigned char want = x < LW ? lin[y * LHP + x] : 0xee;
            expect(lout[y * LOP + x] == want, "long rows", y, x, lout[y * LOP + x], want);
        }

    CHECK(cudaStreamDestroy(st));
    CHECK(cudaFree(img));
    CHECK(cudaFree(img2));
    CHECK(cudaFree(lrows));
    free(in);
    free(out);
    free(sub);
    free(lin);
    free(lout);
    if (wrong) {
        printf("bigcopy2d: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("bigcopy2d: ok, pitches %zu %zu %zu\n", pitch, pitch2, lpitch);
    return 0;
}

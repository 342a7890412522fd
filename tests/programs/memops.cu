// Memory operations through the runtime, checked on the CPU against random
// inputs (seed printed; SEED=N repeats a run):
//  - cudaMallocPitch, and cudaMemcpy2D host->device (a host pitch wider than
//    the rows), device->device (between different pitches, at an offset into
//    a sub-rectangle) and device->host (into another host pitch, whose
//    padding must stay untouched), a kernel reading the pitched rows, and
//    cudaMemcpy2DAsync;
//  - cudaMemset and cudaMemsetAsync at odd offsets and sizes, cudaMemset2D
//    on a sub-rectangle;
//  - cudaMemcpyToSymbol/FromSymbol on a __constant__ and a __device__
//    array, whole and at an offset, seen by a kernel; cudaGetSymbolSize;
//  - cudaMemGetInfo before and after a 64 MiB allocation;
//  - cudaPointerGetAttributes on a device pointer, inside it, on pinned host
//    memory and on plain malloc memory; cudaMemcpyDefault both ways.
//
// Through an agent this once failed three ways (cudaGetDevice as the first
// call, hostPointer of device memory, pinned memory made while a proxy is
// current); all pass since 3e1ec97.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

__constant__ float coeff[8];
__device__ int table[300];

// out = in * coeff[row % 8] + table[col % 300], rows of width floats.
__global__ void apply(const float *in, size_t in_pitch, float *out, size_t out_pitch, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        const float *r = (const float *)((const char *)in + y * in_pitch);
        float *w = (float *)((char *)out + y * out_pitch);
        w[x] = r[x] * coeff[y % 8] + (float)table[x % 300];
    }
}

__global__ void bump_table(int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 300)
        table[i] = table[i] * 2 + k;
}

static int wrong;
#define EXPECT(cond, ...)                  \
    do {                                   \
        if (!(cond)) {                     \
            if (wrong++ < 10)              \
                printf(__VA_ARGS__);       \
        }                                  \
    } while (0)

static const char *mtype(cudaMemoryType t)
{
    switch (t) {
    case cudaMemoryTypeUnregistered: return "unregistered";
    case cudaMemoryTypeHost: return "host";
    case cudaMemoryTypeDevice: return "device";
    case cudaMemoryTypeManaged: return "managed";
    }
    return "?";
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    int dev = -1;
    CHECK(cudaGetDevice(&dev));

    // --- symbols ---
    float c[8];
    int t[300];
    for (int i = 0; i < 8; i++)
        c[i] = (float)(seed_next32() % 9) - 4.0f;
    for (int i = 0; i < 300; i++)
        t[i] = (int)(seed_next32() % 1000);
    size_t sz = 0;
    CHECK(cudaGetSymbolSize(&sz, table));
    EXPECT(sz == sizeof t, "cudaGetSymbolSize(table) %zu, expected %zu\n", sz, sizeof t);
    CHECK(cudaGetSymbolSize(&sz, coeff));
    EXPECT(sz == sizeof c, "cudaGetSymbolSize(coeff) %zu, expected %zu\n", sz, sizeof c);
    CHECK(cudaMemcpyToSymbol(coeff, c, 3 * sizeof(float)));
    CHECK(cudaMemcpyToSymbol(coeff, c + 3, 5 * sizeof(float), 3 * sizeof(float)));   // at an offset
    CHECK(cudaMemcpyToSymbol(table, t, sizeof t));
    float c_back[8];
    int t_back[100];
    CHECK(cudaMemcpyFromSymbol(c_back, coeff, sizeof c_back));
    CHECK(cudaMemcpyFromSymbol(t_back, table, sizeof t_back, 150 * sizeof(int)));
    EXPECT(memcmp(c_back, c, sizeof c) == 0, "coeff read back differs\n");
    EXPECT(memcmp(t_back, t + 150, sizeof t_back) == 0, "table[150..250) read back differs\n");

    // --- pitched 2-D copies ---
    const int W = 37, H = 29, hp_in = 41, hp_out = 43;   // host pitches in floats
    float *hin = (float *)malloc(hp_in * H * sizeof(float)), *hout = (float *)malloc(hp_out * H * sizeof(float));
    for (int i = 0; i < hp_in * H; i++)
        hin[i] = (i % hp_in) < W ? (float)(seed_next32() % 2001) - 1000.0f : -7777.0f;
    float *d1, *d2, *d3;
    size_t p1, p2, p3;
    CHECK(cudaMallocPitch(&d1, &p1, W * sizeof(float), H));
    CHECK(cudaMallocPitch(&d2, &p2, W * sizeof(float), H));
    CHECK(cudaMallocPitch(&d3, &p3, (W + 50) * sizeof(float), H + 6));   // wider: another pitch
    printf("pitches %zu %zu %zu for rows of %zu and %zu bytes\n", p1, p2, p3, W * sizeof(float),
           (W + 50) * sizeof(float));
    EXPECT(p1 >= W * sizeof(float) && p3 >= (W + 50) * sizeof(float), "pitch too small\n");
    CHECK(cudaMemcpy2D(d1, p1, hin, hp_in * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
    dim3 block(16, 8), grid((W + 15) / 16, (H + 7) / 8);
    apply<<<grid, block>>>(d1, p1, d2, p2, W, H);
    CHECK(cudaGetLastError());
    // d3 all 0x01 bytes, then the result into rows 4.. at column 9
    CHECK(cudaMemset2D(d3, p3, 0x01, (W + 50) * sizeof(float), H + 6));
    float *d3_at = (float *)((char *)d3 + 4 * p3) + 9;
    CHECK(cudaMemcpy2D(d3_at, p3, d2, p2, W * sizeof(float), H, cudaMemcpyDeviceToDevice));
    // a band of 0x7f bytes over columns 2..5 of rows 1..3 (outside the copy)
    CHECK(cudaMemset2D((char *)d3 + p3 + 2 * sizeof(float), p3, 0x7f, 4 * sizeof(float), 3));
    for (int i = 0; i < hp_out * H; i++)
        hout[i] = -5555.0f;
    CHECK(cudaMemcpy2D(hout, hp_out * sizeof(float), d3_at, p3, W * sizeof(float), H, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < hp_out; x++) {
            float got = hout[y * hp_out + x];
            if (x < W) {
                float want = hin[y * hp_in + x] * c[y % 8] + (float)t[x % 300];
                EXPECT(got == want, "2-D result [%d][%d] = %g, expected %g\n", y, x, got, want);
            } else {
                EXPECT(got == -5555.0f, "host pitch padding [%d][%d] overwritten: %g\n", y, x, got);
            }
        }
    // the whole of d3, to see the memsets and that the copy stayed in place
    const int W3 = W + 50, H3 = H + 6;
    unsigned *whole = (unsigned *)malloc(W3 * H3 * sizeof(unsigned));
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st));
    CHECK(cudaMemcpy2DAsync(whole, W3 * sizeof(unsigned), d3, p3, W3 * sizeof(unsigned), H3, cudaMemcpyDeviceToHost,
                            st));
    CHECK(cudaStreamSynchronize(st));
    for (int y = 0; y < H3; y++)
        for (int x = 0; x < W3; x++) {
            unsigned got = whole[y * W3 + x], want;
            if (y >= 4 && y < 4 + H && x >= 9 && x < 9 + W) {
                float f = hout[(y - 4) * hp_out + (x - 9)];
                memcpy(&want, &f, 4);
            } else if (y >= 1 && y <= 3 && x >= 2 && x <= 5) {
                want = 0x7f7f7f7fu;
            } else {
                want = 0x01010101u;
            }
            EXPECT(got == want, "d3[%d][%d] = %#x, expected %#x\n", y, x, got, want);
        }

    // --- linear memsets at odd offsets ---
    const int nb = 10007;
    unsigned char *lin, *hl = (unsigned char *)malloc(nb), *want_l = (unsigned char *)malloc(nb);
    CHECK(cudaMalloc(&lin, nb));
    CHECK(cudaMemset(lin, 0xa5, nb));
    CHECK(cudaMemset(lin + 3, 0x00, 1001));
    // With --default-stream per-thread the memsets above are on the thread's
    // stream, which does not order st: finish them first.
    CHECK(cudaStreamSynchronize(0));
    CHECK(cudaMemsetAsync(lin + 4999, 0x5c, 2003, st));
    CHECK(cudaMemsetAsync(lin + nb - 1, 0xee, 1, st));
    CHECK(cudaStreamSynchronize(st));
    CHECK(cudaMemcpy(hl, lin, nb, cudaMemcpyDeviceToHost));
    memset(want_l, 0xa5, nb);
    memset(want_l + 3, 0x00, 1001);
    memset(want_l + 4999, 0x5c, 2003);
    want_l[nb - 1] = 0xee;
    for (int i = 0; i < nb; i++)
        EXPECT(hl[i] == want_l[i], "memset byte %d = %#x, expected %#x\n", i, hl[i], want_l[i]);

    // --- a kernel writes the __device__ array; read it back whole and in part ---
    bump_table<<<3, 128>>>(5);
    CHECK(cudaGetLastError());
    int t2[300], t2part[7];
    CHECK(cudaMemcpyFromSymbol(t2, table, sizeof t2));
    CHECK(cudaMemcpyFromSymbolAsync(t2part, table, sizeof t2part, 293 * sizeof(int), cudaMemcpyDeviceToHost, st));
    CHECK(cudaStreamSynchronize(st));
    for (int i = 0; i < 300; i++)
        EXPECT(t2[i] == t[i] * 2 + 5, "table[%d] after kernel = %d, expected %d\n", i, t2[i], t[i] * 2 + 5);
    for (int i = 0; i < 7; i++)
        EXPECT(t2part[i] == t[293 + i] * 2 + 5, "table[%d] read at an offset = %d, expected %d\n", 293 + i,
               t2part[i], t[293 + i] * 2 + 5);

    // --- cudaMemGetInfo ---
    size_t free0 = 0, total0 = 0, free1 = 0, total1 = 0;
    CHECK(cudaMemGetInfo(&free0, &total0));
    void *big;
    const size_t big_bytes = 64u << 20;
    CHECK(cudaMalloc(&big, big_bytes));
    CHECK(cudaMemset(big, 0, big_bytes));
    CHECK(cudaMemGetInfo(&free1, &total1));
    printf("cudaMemGetInfo: total %zu MiB, free %zu MiB, after 64 MiB %zu MiB\n", total0 >> 20, free0 >> 20,
           free1 >> 20);
    EXPECT(total0 > 0 && free0 <= total0 && total1 == total0, "cudaMemGetInfo: free %zu total %zu, then %zu %zu\n",
           free0, total0, free1, total1);
    EXPECT(free1 + big_bytes / 2 <= free0, "cudaMemGetInfo: free went from %zu to %zu after a 64 MiB allocation\n",
           free0, free1);

    // --- cudaPointerGetAttributes ---
    cudaPointerAttributes a;
    memset(&a, 0x55, sizeof a);
    CHECK(cudaPointerGetAttributes(&a, d2));
    printf("attributes of %p: type %s device %d devicePointer %p hostPointer %p\n", (void *)d2, mtype(a.type),
           a.device, a.devicePointer, a.hostPointer);
    EXPECT(a.type == cudaMemoryTypeDevice && a.device == dev && a.devicePointer == d2 && a.hostPointer == nullptr,
           "cudaPointerGetAttributes(device pointer): type %d device %d devicePointer %p hostPointer %p\n",
           (int)a.type, a.device, a.devicePointer, a.hostPointer);
    char *inside = (char *)big + 12345;
    memset(&a, 0x55, sizeof a);
    CHECK(cudaPointerGetAttributes(&a, inside));
    EXPECT(a.type == cudaMemoryTypeDevice && a.device == dev && a.devicePointer == inside,
           "cudaPointerGetAttributes(inside an allocation): type %d device %d devicePointer %p, expected %p\n",
           (int)a.type, a.device, a.devicePointer, (void *)inside);
    float *pinned;
    CHECK(cudaMallocHost(&pinned, 4096));
    memset(&a, 0x55, sizeof a);
    CHECK(cudaPointerGetAttributes(&a, pinned));
    printf("attributes of pinned %p: type %s hostPointer %p\n", (void *)pinned, mtype(a.type), a.hostPointer);
    EXPECT(a.type == cudaMemoryTypeHost && a.hostPointer == pinned,
           "cudaPointerGetAttributes(pinned): type %d hostPointer %p\n", (int)a.type, a.hostPointer);
    memset(&a, 0x55, sizeof a);
    cudaError_t pe = cudaPointerGetAttributes(&a, hin);
    EXPECT(pe == cudaSuccess && a.type == cudaMemoryTypeUnregistered,
           "cudaPointerGetAttributes(malloc memory): %s type %d\n", cudaGetErrorName(pe), (int)a.type);
    cudaGetLastError();

    // --- cudaMemcpyDefault: the runtime infers the direction from the pointers ---
    for (int i = 0; i < 1024; i++)
        pinned[i] = (float)i * 0.25f;
    CHECK(cudaMemcpy(big, pinned, 4096, cudaMemcpyDefault));
    CHECK(cudaMemcpy((char *)big + 8192, big, 4096, cudaMemcpyDefault));
    float back[1024];
    CHECK(cudaMemcpy(back, (char *)big + 8192, 4096, cudaMemcpyDefault));
    for (int i = 0; i < 1024; i++)
        EXPECT(back[i] == (float)i * 0.25f, "cudaMemcpyDefault round trip [%d] = %g\n", i, back[i]);

    CHECK(cudaStreamDestroy(st));
    CHECK(cudaFree(d1));
    CHECK(cudaFree(d2));
    CHECK(cudaFree(d3));
    CHECK(cudaFree(lin));
    CHECK(cudaFree(big));
    CHECK(cudaFreeHost(pinned));
    free(hin);
    free(hout);
    free(whole);
    free(hl);
    free(want_l);
    if (wrong) {
        printf("memops: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("memops: ok %dx%d pitched, %d bytes set\n", W, H, nb);
    return 0;
}

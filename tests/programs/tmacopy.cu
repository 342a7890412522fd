// A tiled 2-D copy through the tensor memory accelerator, as Hopper
// kernels stage tiles: the host encodes tensor maps with
// cuTensorMapEncodeTiled (reached through cudaGetDriverEntryPointByVersion,
// as the CUDA samples do), each block loads its box into shared memory with
// cp.async.bulk.tensor completing on an mbarrier, transforms it, and
// stores it back with a bulk-group store. The matrix is no multiple of the
// box, so the edge boxes read zeros outside it and write only inside it;
// the result is checked against the CPU. Built for sm_90.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>
#include <vector>

#include "check.h"

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("tmacopy: %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define BW 32
#define BH 16

// out = 2 * in + 1 box by box; also counts, per block, the box's elements
// that arrived as zero (outside the matrix).
__global__ void tma_scale(const __grid_constant__ CUtensorMap in, const __grid_constant__ CUtensorMap out,
                          int *zeros)
{
    __shared__ alignas(128) float tile[BH][BW];
    __shared__ alignas(8) unsigned long long bar;
    int x = blockIdx.x * BW, y = blockIdx.y * BH;
    unsigned sbar = (unsigned)__cvta_generic_to_shared(&bar), stile = (unsigned)__cvta_generic_to_shared(tile);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sbar));
        asm volatile("fence.mbarrier_init.release.cluster;");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sbar), "r"((int)sizeof tile));
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];" ::"r"(stile), "l"(&in), "r"(x), "r"(y), "r"(sbar)
                     : "memory");
    }
    unsigned done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(sbar) : "memory");
    int z = 0;
    for (int i = threadIdx.x; i < BW * BH; i += blockDim.x) {
        float v = tile[i / BW][i % BW];
        z += v == 0.0f;
        tile[i / BW][i % BW] = 2.0f * v + 1.0f;
    }
    atomicAdd(&zeros[blockIdx.y * gridDim.x + blockIdx.x], z);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                     ::"l"(&out), "r"(x), "r"(y), "r"(stile) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static CUtensorMap make_map(encode_fn encode, float *base, int w, int h)
{
    CUtensorMap m;
    cuuint64_t dims[2] = { (cuuint64_t)w, (cuuint64_t)h }, strides[1] = { (cuuint64_t)w * sizeof(float) };
    cuuint32_t box[2] = { BW, BH }, elem[2] = { 1, 1 };
    CUresult rc = encode(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, elem,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                         CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    EXPECT(rc == CUDA_SUCCESS, "cuTensorMapEncodeTiled: %d", (int)rc);
    return m;
}

int main()
{
    const int w = 100, h = 70;   // 3 full boxes and 4 columns across; 4 full and 6 rows down
    const int gx = (w + BW - 1) / BW, gy = (h + BH - 1) / BH;
    std::vector<float> a(w * h), b(w * h);
    for (int i = 0; i < w * h; i++)
        a[i] = (float)(i % 251) + 0.5f;
    float *da, *db;
    int *dz;
    CHECK(cudaMalloc(&da, w * h * sizeof(float)));
    CHECK(cudaMalloc(&db, w * h * sizeof(float)));
    CHECK(cudaMalloc(&dz, gx * gy * sizeof(int)));
    CHECK(cudaMemcpy(da, a.data(), w * h * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(db, 0, w * h * sizeof(float)));
    CHECK(cudaMemset(dz, 0, gx * gy * sizeof(int)));
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    EXPECT(q == cudaDriverEntryPointSuccess && fn, "cuTensorMapEncodeTiled not found");
    encode_fn encode = (encode_fn)fn;
    CUtensorMap min = make_map(encode, da, w, h), mout = make_map(encode, db, w, h);
    tma_scale<<<dim3(gx, gy), 128>>>(min, mout, dz);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(b.data(), db, w * h * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<int> zeros(gx * gy);
    CHECK(cudaMemcpy(zeros.data(), dz, gx * gy * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < w * h; i++)
        EXPECT(b[i] == 2.0f * a[i] + 1.0f, "element (%d, %d): %g, want %g", i % w, i / w, b[i], 2.0f * a[i] + 1.0f);
    for (int by = 0; by < gy; by++)
        for (int bx = 0; bx < gx; bx++) {
            int cols = w - bx * BW < BW ? w - bx * BW : BW, rows = h - by * BH < BH ? h - by * BH : BH;
            int want = BW * BH - cols * rows;   // the inputs are never zero
            EXPECT(zeros[by * gx + bx] == want, "box (%d, %d): %d zeros, want %d", bx, by, zeros[by * gx + bx], want);
        }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dz));
    printf("tmacopy: ok\n");
    return 0;
}

// Tensor maps for the tensor memory accelerator, encoded on the host as
// Hopper code does (CUTLASS, Triton): cuTensorMapEncodeTiled over a
// cudaMalloc'd matrix, its address replaced by cuTensorMapReplaceAddress,
// and the calls the driver refuses refused (a misaligned address, a box
// dimension past 256, a stride that is no multiple of 16). The encoding is
// the driver's own: only results are checked, and that encoding the same
// map twice gives the same bytes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>

#include "check.h"

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("tensormap: %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static CUresult encode(CUtensorMap *m, void *base, cuuint64_t rows, cuuint64_t cols, cuuint32_t box_rows,
                       cuuint32_t box_cols, cuuint64_t pitch)
{
    cuuint64_t dims[2] = { cols, rows };
    cuuint64_t strides[1] = { pitch };
    cuuint32_t box[2] = { box_cols, box_rows };
    cuuint32_t elem[2] = { 1, 1 };
    return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, elem,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

int main()
{
    const int rows = 256, cols = 512;
    float *a, *b;
    CHECK(cudaMalloc(&a, rows * cols * sizeof(float)));
    CHECK(cudaMalloc(&b, rows * cols * sizeof(float)));
    CUtensorMap m1, m2;
    EXPECT(encode(&m1, a, rows, cols, 64, 32, cols * sizeof(float)) == CUDA_SUCCESS, "encode");
    EXPECT(encode(&m2, a, rows, cols, 64, 32, cols * sizeof(float)) == CUDA_SUCCESS, "encode again");
    EXPECT(memcmp(&m1, &m2, sizeof m1) == 0, "the same map encodes to the same bytes");
    EXPECT(cuTensorMapReplaceAddress(&m2, b) == CUDA_SUCCESS, "replace the address");
    CUtensorMap m3;
    EXPECT(encode(&m3, b, rows, cols, 64, 32, cols * sizeof(float)) == CUDA_SUCCESS, "encode b");
    EXPECT(memcmp(&m2, &m3, sizeof m2) == 0, "a replaced address encodes as a fresh map of it");
    EXPECT(memcmp(&m1, &m3, sizeof m1) != 0, "maps of two buffers differ");
    EXPECT(encode(&m3, (char *)a + 4, rows, cols, 64, 32, cols * sizeof(float)) == CUDA_ERROR_INVALID_VALUE,
           "a misaligned address");
    EXPECT(encode(&m3, a, rows, cols, 512, 32, cols * sizeof(float)) == CUDA_ERROR_INVALID_VALUE,
           "a box past 256");
    EXPECT(encode(&m3, a, rows, cols, 64, 32, cols * sizeof(float) + 4) == CUDA_ERROR_INVALID_VALUE,
           "a stride that is no multiple of 16");
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    printf("tensormap: ok\n");
    return 0;
}

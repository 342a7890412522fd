/* Tensor maps: the 128-byte descriptors of the Hopper tensor memory
 * accelerator, checked as the driver checks them and kept in the layout
 * the engine's cp.async.bulk.tensor reads (soft_tensor_map, engine.h). */
#include "softgpu/driver.h"

#include <string.h>

#define MAGIC SOFT_TMAP_MAGIC
typedef soft_tensor_map tmap;
_Static_assert(sizeof(tmap) <= sizeof(CUtensorMap), "a tensor map is 128 bytes");

static unsigned type_bytes(CUtensorMapDataType t)
{
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32: case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ: case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;   /* the packed sub-byte types are not kept */
    }
}

SOFT_API CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                                 cuuint32_t tensorRank, void *globalAddress,
                                                 const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                                 const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                                 CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
    SOFT_TRY(soft_check_init());
    unsigned eb = type_bytes(tensorDataType);
    uint64_t align = interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
    if (!tensorMap || !eb || tensorRank == 0 || tensorRank > 5 || !globalDim || (tensorRank > 1 && !globalStrides) ||
        !boxDim || !elementStrides || (uintptr_t)globalAddress % align ||
        (unsigned)interleave > CU_TENSOR_MAP_INTERLEAVE_32B || (interleave && tensorRank < 3) ||
        (unsigned)swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
        (unsigned)l2Promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        (unsigned)oobFill > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        return CUDA_ERROR_INVALID_VALUE;
    tmap m = { .magic = MAGIC, .type = (uint8_t)tensorDataType, .rank = (uint8_t)tensorRank,
               .interleave = (uint8_t)interleave, .swizzle = (uint8_t)swizzle, .l2 = (uint8_t)l2Promotion,
               .oob = (uint8_t)oobFill, .elem = (uint8_t)eb, .address = (uintptr_t)globalAddress };
    for (unsigned i = 0; i < tensorRank; i++) {
        if (globalDim[i] == 0 || globalDim[i] > (1ull << 32) || boxDim[i] == 0 || boxDim[i] > 256 ||
            elementStrides[i] == 0 || elementStrides[i] > 8)
            return CUDA_ERROR_INVALID_VALUE;
        m.dim[i] = globalDim[i];
        m.box[i] = (uint16_t)boxDim[i];
        m.estride[i] = (uint8_t)elementStrides[i];
    }
    /* Strides of the dimensions above the first: multiples of 16 bytes. */
    for (unsigned i = 0; i + 1 < tensorRank; i++) {
        if (globalStrides[i] % 16 || globalStrides[i] >= (1ull << 40))
            return CUDA_ERROR_INVALID_VALUE;
        m.stride[i] = globalStrides[i];
    }
    if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && (uint64_t)boxDim[0] * eb % 16)
        return CUDA_ERROR_INVALID_VALUE;
    memset(tensorMap, 0, sizeof *tensorMap);
    memcpy(tensorMap, &m, sizeof m);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
    SOFT_TRY(soft_check_init());
    tmap m;
    if (!tensorMap)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&m, tensorMap, sizeof m);
    if (m.magic != MAGIC || (uintptr_t)globalAddress % (m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16))
        return CUDA_ERROR_INVALID_VALUE;
    m.address = (uintptr_t)globalAddress;
    memcpy(tensorMap, &m, sizeof m);
    return CUDA_SUCCESS;
}

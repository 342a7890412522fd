/* Occupancy, computed as for a compute capability 7.5 multiprocessor: 1024
 * threads, 16 blocks, 64 KiB shared memory and 64K registers each. */
#include "softgpu/driver.h"

static int blocks_per_sm(const struct CUfunc_st *f, int block, size_t dyn)
{
    if (block <= 0)
        return 0;
    int warps = (block + SOFT_WARP - 1) / SOFT_WARP;
    int n = SOFT_MAX_BLOCKS_PER_SM;
    int by_threads = SOFT_THREADS_PER_SM / (warps * SOFT_WARP);
    if (by_threads < n)
        n = by_threads;
    uint64_t shared = f->info->static_shared_bytes + dyn;
    if (shared) {
        uint64_t by_shared = SOFT_SHARED_PER_SM / shared;
        if (by_shared < (uint64_t)n)
            n = (int)by_shared;
    }
    uint64_t regs = (uint64_t)(f->info->num_regs ? f->info->num_regs : 32) * warps * SOFT_WARP;
    uint64_t by_regs = SOFT_REGS_PER_SM / regs;
    if (by_regs < (uint64_t)n)
        n = (int)by_regs;
    return n;
}

static int max_block(const struct CUfunc_st *f)
{
    uint32_t m = f->info->max_threads;
    return (int)(m && m < SOFT_MAX_THREADS ? m : SOFT_MAX_THREADS);
}

SOFT_API CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                                int blockSize, size_t dynamicSMemSize,
                                                                                unsigned int flags)
{
    if (!numBlocks || blockSize <= 0 || flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUfunc_st *f = soft_func_get(func);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *numBlocks = blockSize > max_block(f) ? 0 : blocks_per_sm(f, blockSize, dynamicSMemSize);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                                      size_t dynamicSMemSize)
{
    return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

SOFT_API CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                                                    CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                                    size_t dynamicSMemSize, int blockSizeLimit,
                                                                    unsigned int flags)
{
    if (!minGridSize || !blockSize || blockSizeLimit < 0 || flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUfunc_st *f = soft_func_get(func);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    int limit = max_block(f);
    if (blockSizeLimit > 0 && blockSizeLimit < limit)
        limit = blockSizeLimit;
    int best = 0, best_threads = 0;
    for (int b = (limit + SOFT_WARP - 1) / SOFT_WARP * SOFT_WARP; b > 0; b -= SOFT_WARP) {
        int size = b > limit ? limit : b;
        size_t dyn = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(size) : dynamicSMemSize;
        int n = blocks_per_sm(f, size, dyn);
        if (n * size > best_threads) {
            best_threads = n * size;
            best = size;
        }
    }
    *blockSize = best;
    *minGridSize = best ? best_threads / best * SOFT_SM_COUNT : 0;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                           CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                           size_t dynamicSMemSize, int blockSizeLimit)
{
    return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                                     dynamicSMemSize, blockSizeLimit, 0);
}

SOFT_API CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func,
                                                                  int numBlocks, int blockSize)
{
    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUfunc_st *f = soft_func_get(func);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (blocks_per_sm(f, blockSize, 0) < numBlocks) {
        *dynamicSmemSize = 0;
        return CUDA_SUCCESS;
    }
    uint64_t per = SOFT_SHARED_PER_SM / (uint64_t)numBlocks;
    uint64_t st = f->info->static_shared_bytes;
    uint64_t avail = per > st ? per - st : 0;
    if (avail > (uint64_t)f->max_dynamic_shared)
        avail = (uint64_t)f->max_dynamic_shared;
    *dynamicSmemSize = (size_t)avail;
    return CUDA_SUCCESS;
}

/* Thread block clusters need compute capability 9.0; softgpu is 7.5. A
 * cluster of one block is every launch, so that much is answered; a larger
 * one is the driver's invalid cluster size. */
static CUresult cluster_of(const CUlaunchConfig *config, CUfunction func, struct CUfunc_st **f, unsigned *blocks)
{
    SOFT_TRY(soft_check_init());
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    if (!(*f = soft_func_get(func)))
        return CUDA_ERROR_INVALID_HANDLE;
    *blocks = 1;
    for (unsigned i = 0; i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            *blocks = config->attrs[i].value.clusterDim.x * config->attrs[i].value.clusterDim.y *
                      config->attrs[i].value.clusterDim.z;
    if (*blocks != 1) {
        soft_log("clusters of %u blocks: softgpu (compute capability 7.5) has no thread block clusters", *blocks);
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
                                                             const CUlaunchConfig *config)
{
    struct CUfunc_st *f;
    unsigned blocks;
    if (!clusterSize)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(cluster_of(config, func, &f, &blocks));
    *clusterSize = 1;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
    struct CUfunc_st *f;
    unsigned blocks;
    if (!numClusters)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(cluster_of(config, func, &f, &blocks));
    int block = (int)(config->blockDimX * config->blockDimY * config->blockDimZ);
    *numClusters = block > max_block(f) ? 0 : blocks_per_sm(f, block, config->sharedMemBytes) * SOFT_SM_COUNT;
    return CUDA_SUCCESS;
}

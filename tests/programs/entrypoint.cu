// Driver entry points fetched through the runtime, as PyTorch fetches its
// VMM calls: cudaGetDriverEntryPointByVersion passes (name, version, flags)
// to cuGetProcAddress. Found names are called (a VMM allocation mapped,
// written and read back); unknown names and too-old versions are refused
// with the matching status.
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)
#define CU(call)                                                                      \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            printf("%s:%d: %s: %d\n", __FILE__, __LINE__, #call, (int)r_);           \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

template <typename T>
static int get(const char *name, T *fn, unsigned version)
{
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, (void **)fn, version, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
        printf("%s@%u: %s, status %d\n", name, version, cudaGetErrorName(e), (int)q);
        return 1;
    }
    return 0;
}

int main()
{
    CHECK(cudaFree(0));   // the primary context, current
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemSetAccess_v10020 access;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemAddressFree_v10020 addr_free;
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemsetD32Async_v3020 memset32;
    PFN_cuCtxGetDevice_v2000 ctx_device;
    if (get("cuMemAddressReserve", &reserve, 12000) || get("cuMemCreate", &create, 12000) ||
        get("cuMemMap", &map, 12000) || get("cuMemSetAccess", &access, 12000) ||
        get("cuMemUnmap", &unmap, 12000) || get("cuMemRelease", &release, 12000) ||
        get("cuMemAddressFree", &addr_free, 12000) ||
        get("cuMemGetAllocationGranularity", &granularity, 12000) ||
        get("cuMemsetD32Async", &memset32, 12000) || get("cuCtxGetDevice", &ctx_device, 12000))
        return 1;

    CUdevice dev = -1;
    CU(ctx_device(&dev));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CU(granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t size = gran ? gran : (2u << 20);
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h;
    CU(reserve(&va, size, 0, 0, 0));
    CU(create(&h, size, &prop, 0));
    CU(map(va, size, 0, h, 0));
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location = prop.location;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(access(va, size, &desc, 1));
    CU(memset32(va, 0xabcd1234u, size / 4, 0));
    unsigned words[256];
    CHECK(cudaMemcpy(words, (void *)va, sizeof words, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (unsigned w : words)
        if (w != 0xabcd1234u)
            wrong++;
    CU(unmap(va, size));
    CU(release(h));
    CU(addr_free(va, size));

    // Refusals: an unknown name, a name older than its first version.
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000, cudaEnableDefault, &q);
    if (e == cudaSuccess || q != cudaDriverEntryPointSymbolNotFound || fn) {
        printf("unknown name: %s, status %d\n", cudaGetErrorName(e), (int)q);
        wrong++;
    }
    e = cudaGetDriverEntryPointByVersion("cuMemcpyBatchAsync", &fn, 12000, cudaEnableDefault, &q);
    if (e == cudaSuccess || q != cudaDriverEntryPointVersionNotSufficent || fn) {
        printf("too old: %s, status %d\n", cudaGetErrorName(e), (int)q);
        wrong++;
    }
    if (wrong) {
        printf("entrypoint: %d wrong\n", wrong);
        return 1;
    }
    printf("entrypoint: ok\n");
    return 0;
}

// Device query: what cudaGetDeviceProperties says about every device,
// checked for sanity. With no device it prints the runtime's error name and
// exits 3 (the shim's no-driver test looks for exactly that).
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

int main()
{
    int n = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        printf("devicequery: cudaGetDeviceCount: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
        return e == cudaErrorNoDevice ? 3 : 1;
    }
    printf("devicequery: %d device(s)\n", n);
    if (n < 1)
        return 1;
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess || cudaRuntimeGetVersion(&runtime) != cudaSuccess)
        return 1;
    printf("driver %d runtime %d\n", driver, runtime);
    int bad = 0;
    for (int d = 0; d < n; d++) {
        cudaDeviceProp p;
        memset(&p, 0, sizeof p);
        e = cudaGetDeviceProperties(&p, d);
        if (e != cudaSuccess) {
            printf("cudaGetDeviceProperties(%d): %s\n", d, cudaGetErrorName(e));
            return 1;
        }
        printf("device %d: %s\n", d, p.name);
        printf("  compute capability %d.%d\n", p.major, p.minor);
        printf("  totalGlobalMem %zu\n", p.totalGlobalMem);
        printf("  multiProcessorCount %d\n", p.multiProcessorCount);
        printf("  warpSize %d\n", p.warpSize);
        printf("  maxThreadsPerBlock %d\n", p.maxThreadsPerBlock);
        printf("  maxThreadsDim %d %d %d\n", p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]);
        printf("  maxGridSize %d %d %d\n", p.maxGridSize[0], p.maxGridSize[1], p.maxGridSize[2]);
        printf("  sharedMemPerBlock %zu\n", p.sharedMemPerBlock);
        printf("  pciBusID %d pciDeviceID %d pciDomainID %d\n", p.pciBusID, p.pciDeviceID, p.pciDomainID);
        int attr = 0;
        if (cudaDeviceGetAttribute(&attr, cudaDevAttrWarpSize, d) != cudaSuccess || attr != p.warpSize)
            bad++;
        if (p.warpSize != 32 || p.maxThreadsPerBlock < 1 || p.totalGlobalMem == 0 || p.major < 1 ||
            p.multiProcessorCount < 1 || p.name[0] == 0)
            bad++;
    }
    // The first call that needs a context makes the primary one.
    e = cudaSetDevice(0);
    if (e == cudaSuccess)
        e = cudaFree(0);
    if (e != cudaSuccess) {
        printf("context: %s\n", cudaGetErrorName(e));
        return 1;
    }
    size_t free_b = 0, total_b = 0;
    e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess || total_b == 0 || free_b > total_b) {
        printf("cudaMemGetInfo: %s free %zu total %zu\n", cudaGetErrorName(e), free_b, total_b);
        return 1;
    }
    if (bad) {
        printf("devicequery: %d implausible values\n", bad);
        return 1;
    }
    printf("devicequery: ok\n");
    return 0;
}

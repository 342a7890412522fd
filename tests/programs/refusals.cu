// Calls rig serves on no proxy, each twice, on device argv[1] (default 0):
// one named by a stream handle, one by a device ordinal, one by the current
// context alone, and a stream-ordered allocation inside a capture. Prints each result; the shim's face test checks that a
// proxy answers CUDA_ERROR_NOT_SUPPORTED with one log line per function,
// and clears the output it refused to fill.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>

#define SETUP(call)                                                                   \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            printf("%s: %d\n", #call, (int)r_);                                       \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static void show(const char *what, CUresult r)
{
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("%s: %s\n", what, name);
}

int main(int argc, char **argv)
{
    int ordinal = argc > 1 ? atoi(argv[1]) : 0;
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, ordinal));
    SETUP(cuDevicePrimaryCtxRetain(&ctx, dev));
    SETUP(cuCtxSetCurrent(ctx));
    SETUP(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 2; i++) {
        // External semaphores are another API's handles: never served.
        show("semaphores", cuSignalExternalSemaphoresAsync(NULL, NULL, 0, s));
        char luid[8];
        unsigned mask;
        show("luid", cuDeviceGetLuid(luid, &mask, dev));
        CUmemGenericAllocationHandle mc = 0xdeadbeef;
        CUmulticastObjectProp prop = {};
        prop.numDevices = 1;
        prop.size = 2 << 20;
        prop.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        show("multicast", cuMulticastCreate(&mc, &prop));
        // A refusal leaves no garbage in the outputs: a caller that reads
        // them anyway (cuBLAS did) must find zeros, never its stack.
        if (mc != 0)
            printf("multicast: left %#llx in its output\n", (unsigned long long)mc);
        // A graph memory node (stream-ordered allocation in a capture):
        // refused on a proxy, which also invalidates the capture.
        SETUP(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
        CUdeviceptr q = 0;
        show("capture alloc", cuMemAllocAsync(&q, 4096, s));
        CUgraph g = NULL;
        show("capture end", cuStreamEndCapture(s, &g));
        if (g)
            SETUP(cuGraphDestroy(g));
        if (q)
            SETUP(cuMemFree(q));
    }
    SETUP(cuStreamDestroy(s));
    SETUP(cuDevicePrimaryCtxRelease(dev));
    printf("refusals: done\n");
    return 0;
}

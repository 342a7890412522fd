// Driver calls that rig serves on proxies by their parameter kinds alone
// (the table's 'G' entries, replayed by the agent through libffi): a device
// query with an output, a stream write of a value, and what a driver that
// lacks an entry point answers. Checked against the plain driver's answers.
#include <cstdio>
#include <cuda.h>

#define CU(call)                                                                \
    do {                                                                        \
        CUresult r_ = (call);                                                   \
        if (r_ != CUDA_SUCCESS) {                                               \
            printf("%s:%d: %s: %d\n", __FILE__, __LINE__, #call, (int)r_);     \
            return 1;                                                           \
        }                                                                       \
    } while (0)

int main()
{
    CUdevice dev;
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuCtxCreate(&ctx, NULL, 0, dev));
    size_t width = 0;
    CU(cuDeviceGetTexture1DLinearMaxWidth(&width, CU_AD_FORMAT_FLOAT, 1, dev));
    int wrong = 0;
    if (width == 0) {
        printf("texture 1D linear max width is 0\n");
        wrong++;
    }
    CUdeviceptr p;
    CUstream s;
    CU(cuMemAlloc(&p, 64));
    CU(cuMemsetD32(p, 0, 16));
    CU(cuCtxSynchronize());   // the memset's stream does not order the non-blocking one
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(cuStreamWriteValue32(s, p + 8, 0x5eed1234u, 0));
    CU(cuStreamSynchronize(s));
    unsigned words[16];
    CU(cuMemcpyDtoH(words, p, sizeof words));
    if (words[2] != 0x5eed1234u || words[0] != 0 || words[3] != 0) {
        printf("stream write value: %#x %#x %#x\n", words[0], words[2], words[3]);
        wrong++;
    }
    CU(cuStreamDestroy(s));
    CU(cuMemFree(p));
    CU(cuCtxDestroy(ctx));
    if (wrong) {
        printf("generic: %d wrong\n", wrong);
        return 1;
    }
    printf("generic: ok width %zu\n", width);
    return 0;
}

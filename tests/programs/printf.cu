// Device printf through the runtime, from several blocks, with ints, floats,
// doubles, chars, hex, 64-bit values and strings. The data is fixed (no
// seed), so the set of lines is known: the host formats the same lines with
// its own snprintf. The program points its stdout at a temporary file while
// the kernels run and synchronize, reads back what the device printed,
// checks that every expected line arrived exactly once (blocks may print in
// any order, but each thread's lines keep their order), then copies the
// device's lines to the real stdout and ends with "printf: ok".
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>
#include <cuda_runtime.h>

#define BLOCKS 6
#define THREADS 64

__device__ __host__ inline int value(int i) { return (i * 7) % 13 - 4; }

__device__ __host__ inline const char *name_of(int b)
{
    switch (b % 4) {
    case 0: return "alpha";
    case 1: return "beta";
    case 2: return "gamma";
    default: return "delta";
    }
}

__global__ void block_sums(const int *in)
{
    __shared__ int part[THREADS];
    part[threadIdx.x] = in[blockIdx.x * THREADS + threadIdx.x];
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        int sum = part[0];
        printf("block %d first\n", blockIdx.x);
        printf("block %d sum %d mean %.3f name %s\n", blockIdx.x, sum, (float)sum / THREADS, name_of(blockIdx.x));
        printf("block %d second\n", blockIdx.x);
    }
}

__global__ void formats(long long big, double d)
{
    int t = threadIdx.x;
    printf("thread %2d: %c|%5d|%-4d|%x|%u|%lld|%.2e|%g|%s\n", t, 'a' + t % 26, t * 111, -t, t * 4099, 3000000000u + t,
           big * (t + 1), d * t, 0.5 * t, (t & 1) ? "odd" : "even");
}

__global__ void grid2d()
{
    if (threadIdx.x == 0 && threadIdx.y == 0)
        printf("grid (%d,%d) of (%d,%d)\n", blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            restore_stdout();                                                         \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static int saved_stdout = -1;
static void restore_stdout()
{
    if (saved_stdout >= 0) {
        fflush(stdout);
        dup2(saved_stdout, 1);
        close(saved_stdout);
        saved_stdout = -1;
    }
}

static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

int main()
{
    int h[BLOCKS * THREADS];
    for (int i = 0; i < BLOCKS * THREADS; i++)
        h[i] = value(i);
    int *d;
    CHECK(cudaMalloc(&d, sizeof h));
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));

    std::vector<std::string> want;
    for (int b = 0; b < BLOCKS; b++) {
        int sum = 0;
        for (int t = 0; t < THREADS; t++)
            sum += h[b * THREADS + t];
        want.push_back(fmt("block %d first", b));
        want.push_back(fmt("block %d sum %d mean %.3f name %s", b, sum, (double)((float)sum / THREADS), name_of(b)));
        want.push_back(fmt("block %d second", b));
    }
    const long long big = 1234567890123LL;
    const double dv = -1.0 / 3.0;
    const int fthreads = 40;
    for (int t = 0; t < fthreads; t++)
        want.push_back(fmt("thread %2d: %c|%5d|%-4d|%x|%u|%lld|%.2e|%g|%s", t, 'a' + t % 26, t * 111, -t, t * 4099,
                           3000000000u + t, big * (t + 1), dv * t, 0.5 * t, (t & 1) ? "odd" : "even"));
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++)
            want.push_back(fmt("grid (%d,%d) of (%d,%d)", x, y, 3, 2));

    // Capture fd 1 while the device prints.
    char path[] = "/tmp/printf-capture-XXXXXX";
    int cap = mkstemp(path);
    if (cap < 0) {
        perror("mkstemp");
        return 1;
    }
    unlink(path);
    fflush(stdout);
    saved_stdout = dup(1);
    dup2(cap, 1);

    block_sums<<<BLOCKS, THREADS>>>(d);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    formats<<<1, fthreads, 0, s>>>(big, dv);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(s));
    grid2d<<<dim3(3, 2), dim3(4, 2)>>>();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    restore_stdout();

    std::string out;
    char buf[4096];
    ssize_t r;
    lseek(cap, 0, SEEK_SET);
    while ((r = read(cap, buf, sizeof buf)) > 0)
        out.append(buf, (size_t)r);
    close(cap);

    std::vector<std::string> got;
    for (size_t at = 0; at < out.size();) {
        size_t nl = out.find('\n', at);
        if (nl == std::string::npos) {
            got.push_back(out.substr(at) + " (no newline)");
            break;
        }
        got.push_back(out.substr(at, nl - at));
        at = nl + 1;
    }
    // The device's lines, as they came, for whoever compares stdout.
    fwrite(out.data(), 1, out.size(), stdout);

    int wrong = 0;
    // Each thread's own lines keep their order.
    for (int b = 0; b < BLOCKS; b++) {
        auto first = std::find(got.begin(), got.end(), fmt("block %d first", b));
        auto second = std::find(got.begin(), got.end(), fmt("block %d second", b));
        if (first != got.end() && second != got.end() && second < first && wrong++ < 5)
            printf("printf: block %d printed its second line before its first\n", b);
    }
    std::vector<std::string> ws = want, gs = got;
    std::sort(ws.begin(), ws.end());
    std::sort(gs.begin(), gs.end());
    std::vector<std::string> missing, extra;
    std::set_difference(ws.begin(), ws.end(), gs.begin(), gs.end(), std::back_inserter(missing));
    std::set_difference(gs.begin(), gs.end(), ws.begin(), ws.end(), std::back_inserter(extra));
    for (size_t i = 0; i < missing.size(); i++)
        if (wrong++ < 10)
            printf("printf: missing line \"%s\"\n", missing[i].c_str());
    for (size_t i = 0; i < extra.size(); i++)
        if (wrong++ < 10)
            printf("printf: unexpected line \"%s\"\n", extra[i].c_str());
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
    if (wrong) {
        printf("printf: %d wrong of %zu lines (%zu printed)\n", wrong, want.size(), got.size());
        return 1;
    }
    printf("printf: ok %zu lines\n", want.size());
    return 0;
}

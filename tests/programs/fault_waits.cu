// Waits in progress when a job fails: each must return an error, none may
// hang. Exit 1 with each thread's error once all returned.
//   fault_waits threads   four threads each in a loop of copies, a launch
//                         and a stream sync, and one waiting on host
//                         functions; prints "fault_waits: all running"
//   fault_waits flood     async copies up with no sync, so submits block
//                         on the link; prints "fault_waits: flooding"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <pthread.h>
#include <unistd.h>

extern "C" __global__ void fault_twice(const float *in, float *out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i] * 2.0f;
}

static const int n = 16384;
static volatile int running;
static cudaError_t errors[5];

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    cudaStream_t s;
    float *h, *d_in, *d_out;
    cudaError_t e;
    if ((e = cudaStreamCreate(&s)) || (e = cudaMallocHost(&h, n * sizeof(float))) ||
        (e = cudaMalloc(&d_in, n * sizeof(float))) || (e = cudaMalloc(&d_out, n * sizeof(float)))) {
        errors[t] = e;
        return NULL;
    }
    __sync_fetch_and_add(&running, 1);
    for (long step = 0;; step++) {
        if ((e = cudaMemcpyAsync(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice, s)))
            break;
        fault_twice<<<2, 128, 0, s>>>(d_in, d_out, n);
        if ((e = cudaGetLastError()) ||
            (e = cudaMemcpyAsync(h, d_out, n * sizeof(float), cudaMemcpyDeviceToHost, s)) ||
            (e = cudaStreamSynchronize(s)))
            break;
    }
    errors[t] = e;
    return NULL;
}

static void CUDART_CB host_fn(void *arg)
{
    ++*(long *)arg;
}

static void *host_waiter(void *arg)
{
    (void)arg;
    cudaStream_t s;
    cudaError_t e;
    static long calls;
    if ((e = cudaStreamCreate(&s))) {
        errors[4] = e;
        return NULL;
    }
    __sync_fetch_and_add(&running, 1);
    for (;;) {
        if ((e = cudaLaunchHostFunc(s, host_fn, &calls)) || (e = cudaStreamSynchronize(s)))
            break;
    }
    errors[4] = e;
    return NULL;
}

static int threads(void)
{
    pthread_t th[5];
    for (long t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    pthread_create(&th[4], NULL, host_waiter, NULL);
    while (running < 5) {
        bool early = false;
        for (int t = 0; t < 5; t++)
            early |= errors[t] != cudaSuccess;
        if (early)
            break;
        usleep(1000);
    }
    printf("fault_waits: all running\n");
    fflush(stdout);
    for (int t = 0; t < 5; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < 5; t++)
        printf("fault_waits: thread %d: %s\n", t, cudaGetErrorName(errors[t]));
    return 1;
}

static int flood(void)
{
    size_t bytes = 8 << 20;
    unsigned char *h, *d;
    cudaStream_t s;
    cudaError_t e;
    if ((e = cudaMallocHost(&h, bytes)) || (e = cudaMalloc(&d, bytes)) || (e = cudaStreamCreate(&s))) {
        printf("fault_waits: setting up: %s\n", cudaGetErrorName(e));
        return 1;
    }
    memset(h, 1, bytes);
    for (long i = 0;; i++) {
        if ((e = cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s)))
            break;
        if (i == 2) {
            printf("fault_waits: flooding\n");
            fflush(stdout);
        }
    }
    printf("fault_waits: flood: %s\n", cudaGetErrorName(e));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "threads") == 0)
        return threads();
    if (argc == 2 && strcmp(argv[1], "flood") == 0)
        return flood();
    fprintf(stderr, "Usage: fault_waits threads|flood\n");
    return 2;
}

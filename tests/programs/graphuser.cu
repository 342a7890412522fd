// CUDA user objects tying a host buffer's life to the graphs that use it:
// a captured graph copies its input from a malloc'd staging buffer, runs a
// kernel and a host node, and copies the result back; the buffer belongs to
// a user object (cudaUserObjectCreate) whose reference moves into the
// graph (cudaGraphRetainUserObject with cudaGraphUserObjectMove); a clone
// and the executable graph hold their own. The destructor (which frees the
// buffer) must run exactly once, only after the graph, its clone and the
// executable are gone and the last launch's host node has run. Results
// are checked against the CPU (seed printed; SEED=N repeats a run).
// Prints "graphuser: ok".
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <vector>
#include <cuda_runtime.h>

#include "check.h"

#define WANT(cond, ...)                                                               \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("%s:%d: ", __FILE__, __LINE__);                                    \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

const int N = 4099;

__global__ void affine(unsigned *y, const unsigned *x, int n, unsigned k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * k + (unsigned)i;
}

static std::atomic<int> destroyed{ 0 }, host_runs{ 0 };
static std::atomic<bool> last_launch_done{ false }, early{ false };

// The user object's destructor: frees the staging buffer (no CUDA calls).
static void CUDART_CB free_staging(void *p)
{
    if (!last_launch_done.load())
        early = true;
    free(p);
    destroyed++;
}

// The graph's host node: the last launch is slow, so a destructor run too
// early would be seen.
static void CUDART_CB host_node(void *p)
{
    int k = ++host_runs;
    if (k == *(int *)p) {
        usleep(100000);
        last_launch_done = true;
    }
}

int main()
{
    unsigned seed = run_seed("graphuser");
    srand(seed);
    unsigned *staging = (unsigned *)malloc(N * sizeof(unsigned));
    std::vector<unsigned> got(N);
    unsigned *x, *y;
    CHECK(cudaMalloc(&x, N * sizeof(unsigned)));
    CHECK(cudaMalloc(&y, N * sizeof(unsigned)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const unsigned k = 2654435761u;
    int launches = 4;

    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemcpyAsync(x, staging, N * sizeof(unsigned), cudaMemcpyHostToDevice, s));
    affine<<<(N + 127) / 128, 128, 0, s>>>(y, x, N, k);
    CHECK(cudaMemcpyAsync(got.data(), y, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    CHECK(cudaLaunchHostFunc(s, host_node, &launches));
    CHECK(cudaStreamEndCapture(s, &g));

    cudaUserObject_t obj;
    CHECK(cudaUserObjectCreate(&obj, staging, free_staging, 1, cudaUserObjectNoDestructorSync));
    CHECK(cudaUserObjectRetain(obj, 2));
    CHECK(cudaUserObjectRelease(obj, 2));
    CHECK(cudaGraphRetainUserObject(g, obj, 1, cudaGraphUserObjectMove));   // the program's reference moves
    cudaGraph_t clone;
    CHECK(cudaGraphClone(&clone, g));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, clone, 0));
    CHECK(cudaGraphDestroy(g));
    WANT(destroyed == 0, "destroyed while the clone holds it");
    CHECK(cudaGraphDestroy(clone));
    WANT(destroyed == 0, "destroyed while the executable graph holds it");

    for (int l = 0; l < launches; l++) {
        for (int i = 0; i < N; i++)
            staging[i] = (unsigned)rand();
        std::vector<unsigned> in(staging, staging + N);
        CHECK(cudaGraphLaunch(exec, s));
        if (l < launches - 1) {
            CHECK(cudaStreamSynchronize(s));
            for (int i = 0; i < N; i++)
                WANT(got[i] == in[i] * k + (unsigned)i, "launch %d: y[%d] = %u, want %u", l, i, got[i],
                     in[i] * k + (unsigned)i);
        }
    }
    // The last launch is still running (its host node sleeps): the
    // executable goes now, its reference once that launch finished.
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < 2000 && destroyed == 0; i++)
        usleep(1000);
    WANT(destroyed == 1, "the destructor ran %d times", destroyed.load());
    WANT(!early, "the destructor ran before the last launch finished");
    WANT(host_runs == launches, "%d host node runs, want %d", host_runs.load(), launches);
    usleep(20000);
    WANT(destroyed == 1, "the destructor ran %d times", destroyed.load());

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    printf("graphuser: %d launches, the staging buffer freed once after the last\n", launches);
    printf("graphuser: ok\n");
    return 0;
}

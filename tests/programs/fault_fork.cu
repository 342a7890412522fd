// fork in the middle of a job: the child's job is failed from the start
// (its use of the device must return an error), the parent's goes on.
// Prints the child's error and exit status; exits 0 only when the child
// failed and the parent's work after the fork is right.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" __global__ void fault_add(float *p, int n, float v)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] += v;
}

#define CHECK(who, call)                                                               \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            printf("fault_fork: %s: %s: %s\n", who, #call, cudaGetErrorName(e_));      \
            fflush(stdout);                                                            \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

static int round_trip(const char *who, float *d, float *h, int n, float expect)
{
    fault_add<<<4, 128>>>(d, n, 1.0f);
    CHECK(who, cudaGetLastError());
    CHECK(who, cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i += 101)
        if (h[i] != expect) {
            printf("fault_fork: %s: h[%d] = %g, expected %g\n", who, i, h[i], expect);
            return 1;
        }
    return 0;
}

int main()
{
    const int n = 4096;
    float *d, h[n];
    CHECK("parent", cudaMalloc(&d, n * sizeof(float)));
    CHECK("parent", cudaMemset(d, 0, n * sizeof(float)));
    for (int i = 1; i <= 3; i++)
        if (round_trip("parent", d, h, n, (float)i))
            return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        // The child: any use of the proxy must fail; exit() runs the usual
        // teardown, which must leave the parent's connection alone.
        if (round_trip("child", d, h, n, 4.0f) == 0) {
            printf("fault_fork: child: the device worked in a fork\n");
            exit(0);
        }
        exit(1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    int child = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    printf("fault_fork: child exited %d\n", child);
    for (int i = 4; i <= 8; i++)
        if (round_trip("parent", d, h, n, (float)i))
            return 1;
    CHECK("parent", cudaFree(d));
    if (child == 0) {
        printf("fault_fork: the child's job was not failed\n");
        return 1;
    }
    printf("fault_fork: ok parent went on\n");
    return 0;
}

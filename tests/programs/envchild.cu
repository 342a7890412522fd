// The environment a child of a CUDA program inherits: after the runtime's
// first call (cuInit through the shim) it runs a shell that lists the RIG_
// variables it sees. rig's job variables (the key, the agents, the report
// descriptor) must be gone by then, so no child inherits the key.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

int main()
{
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess)
        e = cudaFree(0);
    if (e != cudaSuccess) {
        printf("envchild: cudaFree(0): %s\n", cudaGetErrorName(e));
        return 1;
    }
    fflush(stdout);
    // Names only: the key's value has no business in a log.
    int rc = system("env | sed -n 's/^\\(RIG_[A-Z_]*\\)=.*/envchild: child has \\1/p'; echo envchild: child ran");
    fflush(stdout);
    static const char *const job_vars[] = { "RIG_REMOTE_KEY", "RIG_REMOTE_AGENTS", "RIG_REMOTE_REPORT" };
    int left = 0;
    for (const char *name : job_vars)
        if (getenv(name)) {
            printf("envchild: %s is still set here\n", name);
            left++;
        }
    if (rc != 0 || left) {
        printf("envchild: FAILED (shell %d, %d variable(s) left)\n", rc, left);
        return 1;
    }
    printf("envchild: ok\n");
    return 0;
}

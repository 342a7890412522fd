// What the cuBLAS programs share beside check.h: a cuBLAS call that must
// succeed, and the uniform numbers in [-1, 1) their matrices are filled with.
#pragma once

#include <cublas_v2.h>

#include "check.h"

// A cuBLAS call must succeed; else the program says which, where, its status
// and the last CUDA error, and exits 1.
#define BLAS(call)                                                                    \
    do {                                                                              \
        cublasStatus_t s_ = (call);                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
            cudaError_t e_ = cudaGetLastError();                                      \
            printf("%s:%d: %s: %s (last CUDA error %s)\n", __FILE__, __LINE__, #call,  \
                   cublasGetStatusName(s_), cudaGetErrorName(e_));                    \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

// The generator's state: a program seeds it (rng = seed) before drawing.
static unsigned long long rng;

static double uniform()
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
}

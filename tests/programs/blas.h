// What the cuBLAS programs share beside check.h: a cuBLAS call that must
// succeed, and (uniform.h) the numbers their matrices are filled with.
#pragma once

#include <cublas_v2.h>

#include "check.h"
#include "uniform.h"

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

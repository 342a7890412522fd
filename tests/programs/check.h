// What the test programs share, as CUDA's samples share helper_cuda.h.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "seed.h"

// A runtime call must succeed; else the program says which, where and why,
// and exits 1.
#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

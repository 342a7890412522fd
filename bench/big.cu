/* A module of about 1 MB for the module-load figure: many kernels, each an
 * unrolled chain of loads, multiply-adds and stores, plus a table of
 * constant data. Built uncompressed, so the fatbin's size is its PTX. */

__device__ const float table[16384] = { 1.0f, 2.0f, 3.0f };

#define BODY(n)                                                              \
    extern "C" __global__ void big##n(float *a, float b)                    \
    {                                                                       \
        float x = a[threadIdx.x] + table[(n) * 7 % 16384];                  \
        _Pragma("unroll") for (int i = 0; i < 48; i++) {                   \
            x = x * b + a[threadIdx.x + i * ((n) + 1)];                     \
            a[threadIdx.x + i * 32 + (n)] = x;                              \
        }                                                                   \
    }
#define TEN(d) BODY(d##0) BODY(d##1) BODY(d##2) BODY(d##3) BODY(d##4) \
               BODY(d##5) BODY(d##6) BODY(d##7) BODY(d##8) BODY(d##9)
TEN(1) TEN(2) TEN(3) TEN(4) TEN(5) TEN(6) TEN(7) TEN(8) TEN(9) TEN(10)
TEN(11) TEN(12) TEN(13) TEN(14) TEN(15) TEN(16) TEN(17) TEN(18) TEN(19) TEN(20)

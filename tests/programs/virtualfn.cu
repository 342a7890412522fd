// Device-side virtual functions and function pointers, checked on the CPU:
//  - a kernel builds objects of derived classes with new (the class chosen
//    per thread, so a warp's lanes call different overrides), calls their
//    virtual methods, some overridden and one inherited, through a base
//    pointer, and deletes them through a virtual destructor that counts;
//  - objects built by one kernel live on: a later kernel calls their
//    methods and deletes them;
//  - a __device__ table of function pointers (its initialiser names the
//    functions) and a pointer to a __device__ variable in an initialiser;
//  - a function pointer read back by the host with cudaMemcpyFromSymbol and
//    passed to a kernel as an argument calls the same function.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "check.h"

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("virtualfn: %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

__device__ int destroyed;

struct Shape {
    int id;
    __device__ explicit Shape(int id) : id(id) {}
    __device__ virtual ~Shape() { atomicAdd(&destroyed, 1); }
    __device__ virtual float area() const = 0;
    __device__ virtual int corners() const { return 0; }
    __device__ int describe() const { return id * 100 + corners(); }
};

struct Square : Shape {
    float side;
    __device__ Square(int id, float side) : Shape(id), side(side) {}
    __device__ float area() const override { return side * side; }
    __device__ int corners() const override { return 4; }
};

struct Triangle : Shape {
    float base, height;
    __device__ Triangle(int id, float b, float h) : Shape(id), base(b), height(h) {}
    __device__ float area() const override { return base * height / 2; }
    __device__ int corners() const override { return 3; }
};

struct Circle : Shape {   // corners() inherited
    float r;
    __device__ Circle(int id, float r) : Shape(id), r(r) {}
    __device__ float area() const override { return 3 * r * r; }
};

__device__ Shape *make_shape(int i)
{
    switch (i % 3) {
    case 0: return new Square(i, (float)(i % 7));
    case 1: return new Triangle(i, (float)(i % 5), 2);
    default: return new Circle(i, (float)(i % 4));
    }
}

static float area_cpu(int i)
{
    switch (i % 3) {
    case 0: return (float)(i % 7) * (float)(i % 7);
    case 1: return (float)(i % 5) * 2 / 2;
    default: return 3 * (float)(i % 4) * (float)(i % 4);
    }
}

static int corners_cpu(int i)
{
    return i % 3 == 0 ? 4 : i % 3 == 1 ? 3 : 0;
}

__global__ void shapes_now(float *areas, int *desc, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    Shape *s = make_shape(i);
    if (!s) {
        desc[i] = -1;
        return;
    }
    areas[i] = s->area();
    desc[i] = s->describe();
    delete s;
}

__global__ void shapes_build(Shape **slots, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        slots[i] = make_shape(i);
}

__global__ void shapes_use(Shape **slots, float *areas, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !slots[i])
        return;
    areas[i] = slots[i]->area() + slots[i]->corners();
    delete slots[i];
}

typedef int (*binop)(int, int);
__device__ int add(int a, int b) { return a + b; }
__device__ int sub(int a, int b) { return a - b; }
__device__ int mul(int a, int b) { return a * b; }
__device__ int maxi(int a, int b) { return a > b ? a : b; }
__device__ binop ops[4] = { add, sub, mul, maxi };
__device__ binop chosen = mul;
__device__ int weights[3] = { 5, 7, 11 };
__device__ int *second_weight = &weights[1];

__global__ void apply_ops(const int *a, const int *b, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = ops[i % 4](a[i], b[i]) + *second_weight;
}

__global__ void apply_given(binop f, const int *a, const int *b, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = f(a[i], b[i]);
}

static int op_cpu(int k, int a, int b)
{
    switch (k) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    default: return a > b ? a : b;
    }
}

int main(void)
{
    const int n = 1000;
    float *areas, hareas[n];
    int *desc, hdesc[n];
    CHECK(cudaMalloc(&areas, n * sizeof(float)));
    CHECK(cudaMalloc(&desc, n * sizeof(int)));
    shapes_now<<<(n + 127) / 128, 128>>>(areas, desc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(hareas, areas, sizeof hareas, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hdesc, desc, sizeof hdesc, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        EXPECT(hdesc[i] == i * 100 + corners_cpu(i), "shape %d describes itself as %d", i, hdesc[i]);
        EXPECT(hareas[i] == area_cpu(i), "shape %d area %g, want %g", i, hareas[i], area_cpu(i));
    }
    int gone = 0;
    CHECK(cudaMemcpyFromSymbol(&gone, destroyed, sizeof gone));
    EXPECT(gone == n, "virtual destructors ran %d times, want %d", gone, n);

    Shape **slots;
    CHECK(cudaMalloc(&slots, n * sizeof(Shape *)));
    shapes_build<<<(n + 255) / 256, 256>>>(slots, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemset(areas, 0, n * sizeof(float)));
    shapes_use<<<(n + 63) / 64, 64>>>(slots, areas, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(hareas, areas, sizeof hareas, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        EXPECT(hareas[i] == area_cpu(i) + corners_cpu(i), "kept shape %d: %g", i, hareas[i]);
    CHECK(cudaMemcpyFromSymbol(&gone, destroyed, sizeof gone));
    EXPECT(gone == 2 * n, "virtual destructors ran %d times, want %d", gone, 2 * n);

    int ha[n], hb[n], hout[n];
    for (int i = 0; i < n; i++) {
        ha[i] = rand() % 2001 - 1000;
        hb[i] = rand() % 2001 - 1000;
    }
    int *a, *b, *out;
    CHECK(cudaMalloc(&a, sizeof ha));
    CHECK(cudaMalloc(&b, sizeof hb));
    CHECK(cudaMalloc(&out, sizeof hout));
    CHECK(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, hb, sizeof hb, cudaMemcpyHostToDevice));
    apply_ops<<<(n + 127) / 128, 128>>>(a, b, out, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        EXPECT(hout[i] == op_cpu(i % 4, ha[i], hb[i]) + 7, "table op %d on %d: %d", i % 4, i, hout[i]);

    binop f = nullptr;
    CHECK(cudaMemcpyFromSymbol(&f, chosen, sizeof f));
    EXPECT(f != nullptr, "device function pointer read back as null");
    apply_given<<<(n + 127) / 128, 128>>>(f, a, b, out, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        EXPECT(hout[i] == ha[i] * hb[i], "pointer from the host, element %d: %d", i, hout[i]);

    CHECK(cudaFree(areas));
    CHECK(cudaFree(desc));
    CHECK(cudaFree(slots));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(out));
    printf("virtualfn: ok\n");
    return 0;
}

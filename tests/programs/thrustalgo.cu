// thrust on the device: sort of 1M keys, inclusive_scan, reduce and copy_if
// on thrust::device_vector, each checked against the same work on the CPU
// (seed printed; SEED=N repeats a run).
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "seed.h"

struct is_odd {
    __host__ __device__ bool operator()(unsigned x) const { return x & 1u; }
};

static bool same(const char *what, const std::vector<unsigned> &want,
                 const thrust::host_vector<unsigned> &got)
{
    if (want.size() != got.size()) {
        printf("thrustalgo: %s: %zu elements, want %zu\n", what, got.size(), want.size());
        return false;
    }
    for (size_t i = 0; i < want.size(); i++)
        if (want[i] != got[i]) {
            printf("thrustalgo: %s: [%zu] = %u, want %u\n", what, i, got[i], want[i]);
            return false;
        }
    return true;
}

int main()
{
    unsigned seed = run_seed("thrustalgo");
    srand(seed);

    const size_t n = 1 << 20;
    std::vector<unsigned> h(n);
    for (auto &x : h) x = ((unsigned)rand() << 8) ^ (unsigned)rand();

    bool ok = true;
    // reduce: the sum wraps modulo 2^32 on both sides.
    thrust::device_vector<unsigned> d(h.begin(), h.end());
    unsigned sum = thrust::reduce(d.begin(), d.end(), 0u);
    unsigned want_sum = 0;
    for (auto x : h) want_sum += x;
    if (sum != want_sum) {
        printf("thrustalgo: reduce = %u, want %u\n", sum, want_sum);
        ok = false;
    }

    // inclusive_scan
    thrust::device_vector<unsigned> scanned(n);
    thrust::inclusive_scan(d.begin(), d.end(), scanned.begin());
    std::vector<unsigned> want_scan(n);
    unsigned run = 0;
    for (size_t i = 0; i < n; i++) want_scan[i] = run += h[i];
    ok &= same("inclusive_scan", want_scan, thrust::host_vector<unsigned>(scanned));

    // copy_if
    thrust::device_vector<unsigned> odd(n);
    auto end = thrust::copy_if(d.begin(), d.end(), odd.begin(), is_odd());
    odd.resize(end - odd.begin());
    std::vector<unsigned> want_odd;
    for (auto x : h) if (x & 1u) want_odd.push_back(x);
    ok &= same("copy_if", want_odd, thrust::host_vector<unsigned>(odd));

    // sort
    thrust::sort(d.begin(), d.end());
    std::vector<unsigned> want_sorted = h;
    std::sort(want_sorted.begin(), want_sorted.end());
    ok &= same("sort", want_sorted, thrust::host_vector<unsigned>(d));

    if (!ok) return 1;
    printf("thrustalgo: ok\n");
    return 0;
}

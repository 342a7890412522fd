// More of CUB and thrust on the device, each checked against the CPU (seed
// printed; SEED=N repeats a run): cub::DeviceHistogram::HistogramEven,
// cub::DeviceRunLengthEncode::Encode and cub::DeviceSelect::Unique with their
// two-phase temporary storage, thrust::sort of floats, thrust::sort_by_key
// of 64-bit keys and thrust::reduce_by_key.
#include <cub/device/device_histogram.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <utility>
#include <vector>

#include "seed.h"

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            printf("cubalgo: %s: %s\n", #call, cudaGetErrorString(e_));              \
            return 1;                                                                \
        }                                                                            \
    } while (0)

#define EXPECT(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            printf("cubalgo: " __VA_ARGS__);                                         \
            printf("\n");                                                            \
            return 1;                                                                \
        }                                                                            \
    } while (0)

static const int n = 200000, bins = 100;

int main()
{
    unsigned seed = run_seed("cubalgo");
    srand(seed);

    // Sorted small values: runs for the encoder, repeats for unique.
    std::vector<int> h(n);
    for (auto &x : h) x = rand() % bins;
    std::vector<int> sorted = h;
    std::sort(sorted.begin(), sorted.end());

    int *samples, *hist, *vals, *uniq, *counts, *nruns;
    CHECK(cudaMalloc(&samples, n * sizeof(int)));
    CHECK(cudaMalloc(&vals, n * sizeof(int)));
    CHECK(cudaMalloc(&uniq, n * sizeof(int)));
    CHECK(cudaMalloc(&counts, n * sizeof(int)));
    CHECK(cudaMalloc(&hist, bins * sizeof(int)));
    CHECK(cudaMalloc(&nruns, sizeof(int)));
    CHECK(cudaMemcpy(samples, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(vals, sorted.data(), n * sizeof(int), cudaMemcpyHostToDevice));

    // Histogram: bins + 1 levels over [0, bins).
    void *temp = NULL;
    size_t temp_bytes = 0;
    CHECK(cub::DeviceHistogram::HistogramEven(temp, temp_bytes, samples, hist, bins + 1, 0, bins, n));
    CHECK(cudaMalloc(&temp, temp_bytes));
    CHECK(cub::DeviceHistogram::HistogramEven(temp, temp_bytes, samples, hist, bins + 1, 0, bins, n));
    std::vector<int> got(bins), want(bins, 0);
    CHECK(cudaMemcpy(got.data(), hist, bins * sizeof(int), cudaMemcpyDeviceToHost));
    for (int x : h) want[x]++;
    for (int b = 0; b < bins; b++)
        EXPECT(got[b] == want[b], "histogram bin %d = %d, want %d", b, got[b], want[b]);
    CHECK(cudaFree(temp));

    // Run-length encoding of the sorted values.
    std::vector<std::pair<int, int>> runs;
    for (int x : sorted) {
        if (runs.empty() || runs.back().first != x) runs.push_back({ x, 0 });
        runs.back().second++;
    }
    temp = NULL;
    temp_bytes = 0;
    CHECK(cub::DeviceRunLengthEncode::Encode(temp, temp_bytes, vals, uniq, counts, nruns, n));
    CHECK(cudaMalloc(&temp, temp_bytes));
    CHECK(cub::DeviceRunLengthEncode::Encode(temp, temp_bytes, vals, uniq, counts, nruns, n));
    int nr;
    CHECK(cudaMemcpy(&nr, nruns, sizeof nr, cudaMemcpyDeviceToHost));
    EXPECT(nr == (int)runs.size(), "%d runs, want %zu", nr, runs.size());
    std::vector<int> ru(nr), rc(nr);
    CHECK(cudaMemcpy(ru.data(), uniq, nr * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(rc.data(), counts, nr * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < nr; i++)
        EXPECT(ru[i] == runs[i].first && rc[i] == runs[i].second, "run %d = (%d, %d), want (%d, %d)", i,
               ru[i], rc[i], runs[i].first, runs[i].second);
    CHECK(cudaFree(temp));

    // Unique of the unsorted values keeps the first of each repeat.
    std::vector<int> want_u;
    for (int x : h)
        if (want_u.empty() || want_u.back() != x) want_u.push_back(x);
    temp = NULL;
    temp_bytes = 0;
    CHECK(cub::DeviceSelect::Unique(temp, temp_bytes, samples, uniq, nruns, n));
    CHECK(cudaMalloc(&temp, temp_bytes));
    CHECK(cub::DeviceSelect::Unique(temp, temp_bytes, samples, uniq, nruns, n));
    CHECK(cudaMemcpy(&nr, nruns, sizeof nr, cudaMemcpyDeviceToHost));
    EXPECT(nr == (int)want_u.size(), "unique: %d, want %zu", nr, want_u.size());
    std::vector<int> gu(nr);
    CHECK(cudaMemcpy(gu.data(), uniq, nr * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < nr; i++)
        EXPECT(gu[i] == want_u[i], "unique [%d] = %d, want %d", i, gu[i], want_u[i]);
    CHECK(cudaFree(temp));

    // thrust: floats (negative ones too), 64-bit keys with values, keys' sums.
    std::vector<float> hf(n);
    for (auto &x : hf) x = (float)(rand() % 20001 - 10000) / 7.0f;
    thrust::device_vector<float> df(hf.begin(), hf.end());
    thrust::sort(df.begin(), df.end());
    std::sort(hf.begin(), hf.end());
    thrust::host_vector<float> gf = df;
    for (int i = 0; i < n; i++)
        EXPECT(gf[i] == hf[i], "float sort [%d] = %g, want %g", i, gf[i], hf[i]);

    std::vector<unsigned long long> hk(n);
    std::vector<int> hv(n);
    for (int i = 0; i < n; i++) {
        hk[i] = (unsigned long long)rand() << 33 ^ (unsigned long long)rand() << 2 ^ (unsigned)(i & 3);
        hv[i] = i;
    }
    thrust::device_vector<unsigned long long> dk(hk.begin(), hk.end());
    thrust::device_vector<int> dv(hv.begin(), hv.end());
    thrust::sort_by_key(dk.begin(), dk.end(), dv.begin());
    thrust::host_vector<unsigned long long> gk = dk;
    thrust::host_vector<int> gv = dv;
    for (int i = 0; i < n; i++) {
        EXPECT(i == 0 || gk[i - 1] <= gk[i], "sort_by_key: keys out of order at %d", i);
        EXPECT(hk[gv[i]] == gk[i], "sort_by_key: value %d does not go with key %d", gv[i], i);
    }

    std::map<int, long long> sums;
    std::vector<int> weights(n);
    for (int i = 0; i < n; i++) {
        weights[i] = rand() % 1000;
        sums[sorted[i]] += weights[i];
    }
    thrust::device_vector<int> dkeys(sorted.begin(), sorted.end()), dw(weights.begin(), weights.end());
    thrust::device_vector<int> ok(n), ov(n);
    auto end = thrust::reduce_by_key(dkeys.begin(), dkeys.end(), dw.begin(), ok.begin(), ov.begin());
    int groups = (int)(end.first - ok.begin());
    EXPECT(groups == (int)sums.size(), "reduce_by_key: %d groups, want %zu", groups, sums.size());
    thrust::host_vector<int> rk = ok, rv = ov;
    int i = 0;
    for (auto &kv : sums) {
        EXPECT(rk[i] == kv.first && rv[i] == kv.second, "reduce_by_key [%d] = (%d, %d), want (%d, %lld)", i,
               rk[i], rv[i], kv.first, kv.second);
        i++;
    }

    CHECK(cudaFree(nruns));
    CHECK(cudaFree(hist));
    CHECK(cudaFree(counts));
    CHECK(cudaFree(uniq));
    CHECK(cudaFree(vals));
    CHECK(cudaFree(samples));
    printf("cubalgo: ok\n");
    return 0;
}

/* make bench's CUDA program: an ordinary driver-API program (it links the
 * toolkit's stub libcuda.so), so it measures whichever libcuda.so.1 it runs
 * on: softgpu directly, or the shim with an agent behind it. bench/run runs
 * it both ways and compares.
 *
 *   bench SECTION...     latency launch bw work rss
 *                        (latency is sync, alloc and module)
 *
 * BENCH_KERNELS names the directory of kernels.fatbin and big.fatbin;
 * BENCH_BW_SIZES (e.g. "64MiB,1GiB") limits the copy sizes measured (copies
 * are of random bytes, and at 64 MiB of compressible ones too);
 * BENCH_AGENT_PID, when set, is a process whose resident memory the rss
 * section reports too. BENCH_TCP_PEER, a port of "baseline --serve": beside
 * the copies of 1 MiB or more a 64 MiB loopback TCP stream to it too, its
 * figure tcp_beside_NAME (the machine's speed drifts; the ratio should
 * not), and under 64 MiB TCP's own synchronous transfer of the copy's size
 * beside each copy, tcp_same_NAME, and from a GiB TCP's transfer of the
 * program's whole buffer beside each copy, tcp_whole_NAME. Prints "fig" lines (bench/common.h) and "note" lines. */
#include <cuda.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/common.h"
#include "bench/tcp.h"
#include "proto/compress.h"

#define CK(call)                                                               \
    do {                                                                       \
        CUresult rc_ = (call);                                                 \
        if (rc_ != CUDA_SUCCESS) {                                             \
            const char *name_ = NULL;                                          \
            cuGetErrorName(rc_, &name_);                                       \
            die("%s:%d: %s: %s", __FILE__, __LINE__, #call, name_ ? name_ : "?"); \
        }                                                                      \
    } while (0)

static CUcontext ctx;
static CUmodule kernels;
static CUfunction fn_empty, fn_spin, fn_matmul, fn_reduce;
static const char *kernel_dir;
/* BENCH_TCP_PEER's connection (baseline --serve), or -1. */
static int tcp_peer_fd = -1;

static void *read_file(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", kernel_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    void *p = malloc((size_t)n + 1);
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n)
        die("cannot read %s", path);
    fclose(f);
    ((char *)p)[n] = 0;
    *len = (size_t)n;
    return p;
}

/* VmRSS of a process in MiB ("self" or a pid), or -1. */
static double rss_mib(const char *pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    double kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf kB", &kib) == 1)
            break;
    fclose(f);
    return kib < 0 ? -1 : kib / 1024.0;
}

static void start(void)
{
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    size_t len;
    void *image = read_file("kernels.fatbin", &len);
    CK(cuModuleLoadData(&kernels, image));
    free(image);
    CK(cuModuleGetFunction(&fn_empty, kernels, "empty"));
    CK(cuModuleGetFunction(&fn_spin, kernels, "spin"));
    CK(cuModuleGetFunction(&fn_matmul, kernels, "matmul"));
    CK(cuModuleGetFunction(&fn_reduce, kernels, "reduce"));
}

static void launch_empty(CUstream s)
{
    CK(cuLaunchKernel(fn_empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
}

/* ---- sync, alloc, module: synchronous round trips, allocation, module load ---- */

static void section_sync(void)
{
    enum { N = 2000, WARM = 200 };
    static double t[N];
    CUdeviceptr d;
    CK(cuMemAlloc(&d, 4096));
    CK(cuMemsetD32(d, 7, 1024));
    uint32_t word = 0;
    for (int i = -WARM; i < N; i++) {
        double t0 = now_s();
        CK(cuMemcpyDtoH(&word, d, 4));
        if (i >= 0)
            t[i] = (now_s() - t0) * 1e6;
    }
    if (word != 7)
        die("a 4-byte copy read %u, not 7", word);
    fig_print("sync_dtoh_4B", "us", t, N);

    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = -WARM; i < N; i++) {
        double t0 = now_s();
        launch_empty(s);
        CK(cuStreamSynchronize(s));
        if (i >= 0)
            t[i] = (now_s() - t0) * 1e6;
    }
    fig_print("launch_sync", "us", t, N);
    CK(cuStreamDestroy(s));
    CK(cuMemFree(d));
}

static void section_alloc(void)
{
    enum { NA = 500 };
    static double t[NA];
    for (int i = -50; i < NA; i++) {
        CUdeviceptr p;
        double t0 = now_s();
        CK(cuMemAlloc(&p, (size_t)1 << 20));
        CK(cuMemFree(p));
        if (i >= 0)
            t[i] = (now_s() - t0) * 1e6;
    }
    fig_print("alloc_free_1MiB", "us", t, NA);
}

static void section_module(void)
{
    enum { NM = 7 };
    double t[NM];
    size_t len;
    void *image = read_file("big.fatbin", &len);
    printf("note module_size %zu bytes\n", len);
    for (int i = -1; i < NM; i++) {
        CUmodule m;
        double t0 = now_s();
        CK(cuModuleLoadData(&m, image));
        if (i >= 0)
            t[i] = (now_s() - t0) * 1e3;
        CK(cuModuleUnload(m));
        /* Through rig an unload is a drop the agent applies later; a round
         * trip here keeps that work out of the next load's time. */
        size_t free_b, total_b;
        CK(cuMemGetInfo(&free_b, &total_b));
    }
    fig_print("module_load_1MB", "ms", t, NM);
    free(image);
}

/* ---- launch: asynchronous launch rate ---- */

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The submitting thread's own count of times it slept (waited for
 * anything: a full socket, a lock, an answer) and was preempted. */
static void thread_switches(long *slept, long *preempted)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    *slept = ru.ru_nvcsw;
    *preempted = ru.ru_nivcsw;
}

/* Besides the wall-clock rates: the submitting thread's launches per
 * second of its own CPU time and the times it slept while submitting. A
 * program that waited on the link would sleep; one that shares two CPUs
 * with an agent and a relay is preempted instead, which lowers the wall
 * rate alone. */
static void section_launch(void)
{
    enum { N = 20000, REPS = 7 };
    double submit[REPS], e2e[REPS], cpu[REPS], sleeps[REPS], preempts[REPS];
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 2000; i++)
        launch_empty(s);
    CK(cuStreamSynchronize(s));
    for (int rep = 0; rep < REPS; rep++) {
        long slept0, slept1, pre0, pre1;
        thread_switches(&slept0, &pre0);
        double c0 = thread_cpu_s(), t0 = now_s();
        for (int i = 0; i < N; i++)
            launch_empty(s);
        double t1 = now_s(), c1 = thread_cpu_s();
        thread_switches(&slept1, &pre1);
        CK(cuStreamSynchronize(s));
        double t2 = now_s();
        submit[rep] = N / (t1 - t0);
        e2e[rep] = N / (t2 - t0);
        cpu[rep] = c1 > c0 ? N / (c1 - c0) : 0;
        sleeps[rep] = (double)(slept1 - slept0);
        preempts[rep] = (double)(pre1 - pre0);
    }
    fig_print("launch_submit", "launches/s", submit, REPS);
    fig_print("launch_e2e", "launches/s", e2e, REPS);
    fig_print("launch_submit_cpu", "launches/s", cpu, REPS);
    fig_print("launch_submit_sleeps", "per20k", sleeps, REPS);
    fig_print("launch_submit_preempted", "per20k", preempts, REPS);
    CK(cuStreamDestroy(s));
}

/* ---- bw: synchronous copies of each size, both ways, both host kinds ---- */

/* The buffer the TCP streams and transfers beside copies write from and
 * read into, made on first use. */
static uint8_t *tcp_buffer(void)
{
    static uint8_t *buf;
    if (!buf) {
        if (!(buf = malloc(TCP_STREAM_WRITE)))
            die("no memory for the TCP stream's buffer");
        memset(buf, 2, TCP_STREAM_WRITE);
    }
    return buf;
}

/* First touches are dear on some machines (a fresh page can cost tens of
 * microseconds in a nested VM), so one host buffer serves both kinds: it is
 * touched once, measured pageable, then page-locked with cuMemHostRegister
 * and measured again. The bytes are random (device memory holds what the
 * host sent), and at 64 MiB each copy is measured again on compressible
 * bytes (compress_sparse_floats; figures NAME_compressible). Each figure stops
 * repeating after BENCH_FIG_S seconds (4), a 1 GiB or 4 GiB one after twice
 * that (7 and 3 copies at most: its samples swing by a third or more
 * here, and 3 and 2 left its median to chance); a 1 GiB or 4 GiB figure is skipped when its
 * 64 MiB rate says one copy would take more than BENCH_BIG_S seconds (20),
 * and the note says so, and has one untimed copy first, as smaller ones
 * have several: memory left idle through the smaller figures came back
 * slowly here (a first 4 GiB copy ran at 0.59 GB/s, the next at 2.4-3.4). A copy to the device is timed until the device has
 * its bytes (the copy, then cuCtxSynchronize); with run > 1, run copies to
 * the device in a row and then one cuCtxSynchronize are timed as one, as a
 * program uploading several buffers meets them. The TCP stream beside a
 * sample under 64 MiB runs after every STREAM_EVERY samples, not each: its
 * 64 MiB through the kernel leaves the next copy's memory out of the caches
 * (1 MiB DtoH measured 3.4-4.3 GB/s back to back, 2.0-2.4 GB/s after 64 MiB
 * of other memory touched), which no program copying in a loop meets. */
#define STREAM_EVERY 8
static void copy_figure(const char *name, int dir, CUdeviceptr d, uint8_t *host, size_t n, int reps, bool big,
                        double budget, double *rate, int run)
{
    static double gbs[400], beside[400], same[400];
    bool tcp = tcp_peer_fd >= 0 && n >= ((size_t)1 << 20);
    uint8_t *stream_buf = tcp ? tcp_buffer() : NULL;
    int warm = big ? 1 : reps > 10 ? reps / 10 : 1, got = 0, streams = 0;
    int every = n * (size_t)run < ((size_t)64 << 20) ? STREAM_EVERY : 1;
    /* Under 64 MiB TCP's own synchronous transfer of the size beside each
     * copy too, for the weight of its round trip. */
    bool tcp_same = tcp && n < ((size_t)64 << 20) && run == 1;
    /* From a GiB, TCP's own transfer of the program's whole buffer beside
     * each copy too (its peer's end a small buffer, as the stream's). */
    static double whole[400];
    double t_start = 0;
    for (int i = -warm; i < reps; i++) {
        if (i == 0)
            t_start = now_s();
        else if (i > 0 && now_s() - t_start > (big ? 2 * budget : budget))
            break;
        double t0 = now_s();
        if (dir == 0) {
            /* Until the device has the bytes: a synchronous copy in may
             * return once they are sent (docs/design.md "One copy"). */
            for (int k = 0; k < run; k++)
                CK(cuMemcpyHtoD(d, host, n));
            CK(cuCtxSynchronize());
        } else {
            CK(cuMemcpyDtoH(host, d, n));
        }
        double t = now_s() - t0;
        if (i >= 0) {
            gbs[got] = (double)n * (dir == 0 ? run : 1) / t / 1e9;
            if (tcp_same)
                same[got] = tcp_transfer_once(tcp_peer_fd, stream_buf, n, dir == 0);
            got++;
            if (tcp && got % every == 0)
                beside[streams++] = tcp_stream_once(tcp_peer_fd, stream_buf, (uint64_t)64 << 20);
            if (tcp && big)
                whole[got - 1] = tcp_transfer_whole(tcp_peer_fd, host, n, dir == 0);
        }
    }
    if (tcp && streams == 0)
        beside[streams++] = tcp_stream_once(tcp_peer_fd, stream_buf, (uint64_t)64 << 20);
    double med = fig_print(name, "GB/s", gbs, (size_t)got);
    if (tcp) {
        char bname[96];
        snprintf(bname, sizeof bname, "tcp_beside_%s", name);
        fig_print(bname, "GB/s", beside, (size_t)streams);
    }
    if (tcp_same) {
        char bname[96];
        snprintf(bname, sizeof bname, "tcp_same_%s", name);
        fig_print(bname, "GB/s", same, (size_t)got);
    }
    if (tcp && big) {
        char bname[96];
        snprintf(bname, sizeof bname, "tcp_whole_%s", name);
        fig_print(bname, "GB/s", whole, (size_t)got);
    }
    if (rate)
        *rate = med;
}

/* Many small asynchronous copies on one stream, then one synchronize, as
 * a server swapping KV-cache blocks makes them: count copies of size bytes
 * at scattered places, the rate over all of them (figure NAME), each
 * sample with a TCP stream beside it. */
static void small_copies_figure(const char *name, int dir, CUdeviceptr d, uint8_t *host, size_t size, int count,
                                double budget)
{
    enum { REPS = 15 };
    static double gbs[REPS], beside[REPS];
    uint8_t *stream_buf = tcp_peer_fd >= 0 ? tcp_buffer() : NULL;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    int got = 0;
    double t_start = now_s();
    for (int i = -1; i < REPS && (i < 1 || now_s() - t_start < budget); i++) {
        double t0 = now_s();
        for (int k = 0; k < count; k++) {
            size_t at = (size_t)((k * 7919) % count) * size;
            if (dir == 0)
                CK(cuMemcpyHtoDAsync(d + at, host + (size_t)k * size, size, s));
            else
                CK(cuMemcpyDtoHAsync(host + (size_t)k * size, d + at, size, s));
        }
        CK(cuStreamSynchronize(s));
        double t = now_s() - t0;
        if (i < 0)
            continue;
        gbs[got] = (double)size * count / t / 1e9;
        if (tcp_peer_fd >= 0)
            beside[got] = tcp_stream_once(tcp_peer_fd, stream_buf, (uint64_t)64 << 20);
        got++;
    }
    CK(cuStreamDestroy(s));
    fig_print(name, "GB/s", gbs, (size_t)got);
    if (tcp_peer_fd >= 0) {
        char bname[96];
        snprintf(bname, sizeof bname, "tcp_beside_%s", name);
        fig_print(bname, "GB/s", beside, (size_t)got);
    }
}

static void section_bw(void)
{
    static const struct { size_t size; const char *name; int reps; } sizes[] = {
        { (size_t)4 << 10, "4KiB", 400 },  { (size_t)64 << 10, "64KiB", 200 }, { (size_t)1 << 20, "1MiB", 60 },
        { (size_t)64 << 20, "64MiB", 7 }, { (size_t)1 << 30, "1GiB", 7 }, { (size_t)4 << 30, "4GiB", 3 },
    };
    enum { NSIZES = sizeof sizes / sizeof sizes[0] };
    const size_t mib64 = (size_t)64 << 20;
    const double budget = getenv("BENCH_FIG_S") ? atof(getenv("BENCH_FIG_S")) : 4.0;
    const double big_limit = getenv("BENCH_BIG_S") ? atof(getenv("BENCH_BIG_S")) : 20.0;
    const char *only = getenv("BENCH_BW_SIZES");   /* e.g. "64MiB,1GiB", for a closer look */
    size_t max = 0;
    for (int k = 0; k < NSIZES; k++)
        if (!only || strstr(only, sizes[k].name))
            max = sizes[k].size > max ? sizes[k].size : max;
    if (max == 0)
        return;
    CUdeviceptr d;
    CK(cuMemAlloc(&d, max));
    uint8_t *host = malloc(max);
    if (!host)
        die("no memory for %zu bytes", max);
    for (int h = 0; h < 2; h++) {
        /* Random bytes on both ends before each kind's figures. */
        fill_random(host, max, 0x5eed + (uint64_t)h);
        CK(cuMemcpyHtoD(d, host, max));
        if (h)
            CK(cuMemHostRegister(host, max, 0));
        double rate64[2] = { 0, 0 };
        for (int k = 0; k < NSIZES; k++) {
            if (only && !strstr(only, sizes[k].name))
                continue;
            for (int dir = 0; dir < 2; dir++) {
                size_t n = sizes[k].size;
                char name[64];
                snprintf(name, sizeof name, "%s_%s_%s", dir ? "dtoh" : "htod", h ? "pinned" : "pageable",
                         sizes[k].name);
                bool big = n >= ((size_t)1 << 30);
                if (big && rate64[dir] > 0 && (double)n / (rate64[dir] * 1e9) > big_limit) {
                    printf("note skipped_%s one copy would take ~%.0f s at the 64 MiB rate (limit %.0f s)\n", name,
                           (double)n / (rate64[dir] * 1e9), big_limit);
                    continue;
                }
                copy_figure(name, dir, d, host, n, sizes[k].reps, big, budget, n == mib64 ? &rate64[dir] : NULL, 1);
                if (dir == 0 && n == ((size_t)1 << 20)) {
                    strcat(name, "_run16");
                    copy_figure(name, dir, d, host, n, sizes[k].reps / 4, false, budget, NULL, 16);
                }
            }
        }
        if (max >= mib64 && (!only || strstr(only, "64MiB"))) {
            /* HtoD first: it leaves the compressible bytes on the device for DtoH. */
            compress_sparse_floats(host, mib64, 0xc0de + (uint64_t)h);
            for (int dir = 0; dir < 2; dir++) {
                char name[64];
                snprintf(name, sizeof name, "%s_%s_64MiB_compressible", dir ? "dtoh" : "htod",
                         h ? "pinned" : "pageable");
                copy_figure(name, dir, d, host, mib64, 7, false, budget, NULL, 1);
            }
        }
        /* 4000 asynchronous copies of 4 KiB from and to page-locked memory. */
        if (h && max >= ((size_t)16 << 20) && (!only || strstr(only, "4KiBx4000")))
            for (int dir = 0; dir < 2; dir++)
                small_copies_figure(dir ? "dtoh_pinned_4KiBx4000_async" : "htod_pinned_4KiBx4000_async", dir, d, host,
                                    (size_t)4 << 10, 4000, budget);
    }
    CK(cuMemHostUnregister(host));
    free(host);
    CK(cuMemFree(d));
}

/* ---- work: a loop of tiled matmuls and reductions with copies ---- */

#define WN 256
#define WITER 4

static void work_once(CUstream s, CUdeviceptr da, CUdeviceptr db, CUdeviceptr dc, CUdeviceptr de,
                      CUdeviceptr dsum, float *a, float *b, float *c, float *sums)
{
    int n = WN;
    unsigned tiles = WN / 16, blocks = WN * WN / 256;
    int count = WN * WN;
    for (int it = 0; it < WITER; it++) {
        a[it] = (float)it;          /* each round's input differs a little */
        CK(cuMemcpyHtoDAsync(da, a, sizeof(float) * WN * WN, s));
        CK(cuMemcpyHtoDAsync(db, b, sizeof(float) * WN * WN, s));
        void *p1[] = { &da, &db, &dc, &n };
        CK(cuLaunchKernel(fn_matmul, tiles, tiles, 1, 16, 16, 1, 0, s, p1, NULL));
        void *p2[] = { &dc, &db, &de, &n };
        CK(cuLaunchKernel(fn_matmul, tiles, tiles, 1, 16, 16, 1, 0, s, p2, NULL));
        void *p3[] = { &de, &dsum, &count };
        CK(cuLaunchKernel(fn_reduce, blocks, 1, 1, 256, 1, 1, 0, s, p3, NULL));
        CK(cuMemcpyDtoHAsync(c, dc, sizeof(float) * WN * WN, s));
        CK(cuMemcpyDtoHAsync(sums, dsum, sizeof(float) * blocks, s));
        CK(cuStreamSynchronize(s));
    }
}

static void section_work(void)
{
    enum { REPS = 5 };
    size_t bytes = sizeof(float) * WN * WN;
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), *sums = malloc(bytes);
    for (int i = 0; i < WN * WN; i++) {
        a[i] = (float)(i % 7) * 0.25f;
        b[i] = (float)(i % 5) * 0.5f - 1.0f;
    }
    CUdeviceptr da, db, dc, de, dsum;
    CK(cuMemAlloc(&da, bytes));
    CK(cuMemAlloc(&db, bytes));
    CK(cuMemAlloc(&dc, bytes));
    CK(cuMemAlloc(&de, bytes));
    CK(cuMemAlloc(&dsum, bytes));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    double t[REPS];
    for (int rep = -1; rep < REPS; rep++) {
        double t0 = now_s();
        work_once(s, da, db, dc, de, dsum, a, b, c, sums);
        if (rep >= 0)
            t[rep] = (now_s() - t0) * 1e3;
    }
    /* The last round's c = a * b, checked on the CPU. */
    double worst = 0;
    for (int i = 0; i < WN; i++)
        for (int j = 0; j < WN; j++) {
            double ref = 0;
            for (int k = 0; k < WN; k++)
                ref += (double)a[i * WN + k] * b[k * WN + j];
            double err = ref - c[i * WN + j];
            err = err < 0 ? -err : err;
            worst = err > worst ? err : worst;
        }
    if (worst > 1e-2)
        die("the workload's matmul is off by %g", worst);
    fig_print("workload", "ms", t, REPS);
    CK(cuStreamDestroy(s));
    CK(cuMemFree(da));
    CK(cuMemFree(db));
    CK(cuMemFree(dc));
    CK(cuMemFree(de));
    CK(cuMemFree(dsum));
    free(a);
    free(b);
    free(c);
    free(sums);
}

/* ---- rss: resident memory idle and with much work outstanding ---- */

#define RSS_STREAMS 1000
#define RSS_LAUNCHES 100000

/* Seconds one spin(n) takes, synchronously. */
static double spin_time(CUstream s, CUdeviceptr out, long long n)
{
    void *p[] = { &n, &out };
    double t0 = now_s();
    CK(cuLaunchKernel(fn_spin, 1, 1, 1, 1, 1, 1, 0, s, p, NULL));
    CK(cuStreamSynchronize(s));
    return now_s() - t0;
}

static void section_rss(double before)
{
    const char *agent = getenv("BENCH_AGENT_PID");
    /* Idle: initialised, a module loaded, one round trip done. */
    CUdeviceptr out;
    CK(cuMemAlloc(&out, 64));
    uint32_t w;
    CK(cuMemcpyDtoH(&w, out, 4));
    usleep(200 * 1000);
    fig_value("rss_before_init", "MiB", before);
    fig_value("rss_idle", "MiB", rss_mib("self"));
    if (agent)
        fig_value("agent_rss_idle", "MiB", rss_mib(agent));

    static CUstream streams[RSS_STREAMS];
    for (int i = 0; i < RSS_STREAMS; i++)
        CK(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
    /* A spin long enough to outlast the submission below holds every
     * stream back through an event, so all launches stay outstanding. */
    long long n = 1 << 14;
    double t;
    while ((t = spin_time(streams[0], out, n)) < 0.05 && n < (1LL << 40))
        n *= 2;
    double hold = getenv("BENCH_SPIN_S") ? atof(getenv("BENCH_SPIN_S")) : 6.0;
    n = (long long)((double)n * hold / t);
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    void *p[] = { &n, &out };
    double t0 = now_s();
    CK(cuLaunchKernel(fn_spin, 1, 1, 1, 1, 1, 1, 0, streams[0], p, NULL));
    CK(cuEventRecord(ev, streams[0]));
    for (int i = 1; i < RSS_STREAMS; i++)
        CK(cuStreamWaitEvent(streams[i], ev, 0));
    for (int i = 0; i < RSS_LAUNCHES; i++)
        launch_empty(streams[i % RSS_STREAMS]);
    double submitted = now_s() - t0;
    double rss = rss_mib("self"), agent_rss = agent ? rss_mib(agent) : -1;
    CUresult q = cuStreamQuery(streams[0]);
    printf("note rss_outstanding %s (spin of %.1f s, submission took %.2f s)\n",
           q == CUDA_ERROR_NOT_READY ? "yes" : "NO", hold, submitted);
    fig_value("rss_loaded", "MiB", rss);
    if (agent)
        fig_value("agent_rss_loaded", "MiB", agent_rss);
    CK(cuCtxSynchronize());
    fig_value("rss_drained", "MiB", rss_mib("self"));
    for (int i = 0; i < RSS_STREAMS; i++)
        CK(cuStreamDestroy(streams[i]));
    CK(cuEventDestroy(ev));
    CK(cuMemFree(out));
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    kernel_dir = getenv("BENCH_KERNELS");
    if (!kernel_dir || argc < 2) {
        fprintf(stderr, "Usage: BENCH_KERNELS=DIR bench SECTION...   (latency launch bw work rss; sync alloc module)\n");
        return 1;
    }
    double before = rss_mib("self");
    if (getenv("BENCH_TCP_PEER"))
        tcp_peer_fd = tcp_connect((uint16_t)atoi(getenv("BENCH_TCP_PEER")));
    start();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "latency") == 0) {
            section_sync();
            section_alloc();
            section_module();
        } else if (strcmp(argv[i], "sync") == 0)
            section_sync();
        else if (strcmp(argv[i], "alloc") == 0)
            section_alloc();
        else if (strcmp(argv[i], "module") == 0)
            section_module();
        else if (strcmp(argv[i], "launch") == 0)
            section_launch();
        else if (strcmp(argv[i], "bw") == 0)
            section_bw();
        else if (strcmp(argv[i], "work") == 0)
            section_work();
        else if (strcmp(argv[i], "rss") == 0)
            section_rss(before);
        else
            die("no section %s", argv[i]);
    }
    CK(cuModuleUnload(kernels));
    CK(cuDevicePrimaryCtxRelease(0));
    return 0;
}

/* softgpu streams and events through the driver API: each stream really
 * runs on its own (a blocked host function keeps it not-ready while others
 * go on), the legacy NULL stream orders against blocking streams but not
 * non-blocking ones, cuStreamWaitEvent orders across streams, events time,
 * callbacks run, and bad handles get errors. Kernels are in
 * test_softgpu_launch; here host functions stand in for work. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/cuda_ok.h"

static CUcontext ctx;

static void setup(void)
{
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
}

TestSuite(stream, .init = setup);
TestSuite(event, .init = setup);

/* A gate a host function waits on, so a stream stays busy until opened. */
typedef struct gate { pthread_mutex_t m; pthread_cond_t c; bool open; } gate;
static gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };

static void CUDA_CB wait_gate(void *arg)
{
    gate *x = arg;
    pthread_mutex_lock(&x->m);
    while (!x->open)
        pthread_cond_wait(&x->c, &x->m);
    pthread_mutex_unlock(&x->m);
}

static void open_gate(gate *x)
{
    pthread_mutex_lock(&x->m);
    x->open = true;
    pthread_cond_broadcast(&x->c);
    pthread_mutex_unlock(&x->m);
}

/* Appends its tag to a shared log. */
static char order[64];
static _Atomic int order_n;
static void CUDA_CB tag(void *arg)
{
    order[atomic_fetch_add(&order_n, 1)] = (char)(uintptr_t)arg;
}

Test(stream, streams_run_independently)
{
    CUstream a, b;
    OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    OK(cuLaunchHostFunc(a, wait_gate, &g));
    OK(cuLaunchHostFunc(a, tag, (void *)'a'));
    OK(cuLaunchHostFunc(b, tag, (void *)'b'));
    OK(cuStreamSynchronize(b));          /* b finishes while a is blocked */
    cr_expect_eq(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    OK(cuStreamQuery(b));
    cr_expect_eq(order_n, 1);
    cr_expect_eq(order[0], 'b');
    open_gate(&g);
    OK(cuStreamSynchronize(a));
    OK(cuStreamQuery(a));
    cr_expect_eq(order_n, 2);
    OK(cuStreamDestroy(a));
    OK(cuStreamDestroy(b));
    cr_expect_eq(cuStreamDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    cr_expect_eq(cuStreamQuery(a), CUDA_ERROR_INVALID_HANDLE);
}

Test(stream, legacy_null_stream_orders_blocking_streams)
{
    CUstream blocking, nonblocking;
    OK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    OK(cuLaunchHostFunc(blocking, wait_gate, &g));
    OK(cuLaunchHostFunc(blocking, tag, (void *)'1'));
    /* NULL-stream work waits for the blocking stream... */
    OK(cuLaunchHostFunc(NULL, tag, (void *)'2'));
    /* ...and later blocking-stream work waits for the NULL stream. */
    OK(cuLaunchHostFunc(blocking, tag, (void *)'3'));
    /* A non-blocking stream ignores both. */
    OK(cuLaunchHostFunc(nonblocking, tag, (void *)'n'));
    OK(cuStreamSynchronize(nonblocking));
    cr_expect_eq(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    open_gate(&g);
    OK(cuCtxSynchronize());
    cr_expect_eq(order_n, 4);
    cr_expect_eq(memcmp(order, "n123", 4), 0, "order %.4s", order);
    OK(cuStreamDestroy(blocking));
    OK(cuStreamDestroy(nonblocking));
}

static void *open_later(void *arg)
{
    usleep(10000);
    open_gate(arg);
    return NULL;
}

Test(stream, sync_copy_waits_for_blocking_streams)
{
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 4));
    OK(cuMemsetD32(d, 0, 1));
    OK(cuLaunchHostFunc(s, wait_gate, &g));
    OK(cuMemsetD32Async(d, 77, 1, s));
    /* Open the gate a little later from another thread. */
    pthread_t t;
    pthread_create(&t, NULL, open_later, &g);
    uint32_t v = 0;
    OK(cuMemcpyDtoH(&v, d, 4));          /* legacy: after s's memset */
    cr_expect_eq(v, 77);
    pthread_join(t, NULL);
    OK(cuMemFree(d));
    OK(cuStreamDestroy(s));
}

Test(stream, wait_event_orders_across_streams)
{
    CUstream a, b;
    CUevent e;
    OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    OK(cuLaunchHostFunc(a, wait_gate, &g));
    OK(cuLaunchHostFunc(a, tag, (void *)'a'));
    OK(cuEventRecord(e, a));
    OK(cuStreamWaitEvent(b, e, 0));
    OK(cuLaunchHostFunc(b, tag, (void *)'b'));
    /* Re-recording later does not move what b waits for. */
    cr_expect_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    usleep(20000);
    cr_expect_eq(order_n, 0);
    cr_expect_eq(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
    open_gate(&g);
    OK(cuStreamSynchronize(b));
    cr_expect_eq(memcmp(order, "ab", 2), 0);
    OK(cuEventSynchronize(e));
    OK(cuEventQuery(e));
    /* Destroying an event that a queued wait still needs is fine. */
    gate g2 = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
    OK(cuLaunchHostFunc(a, wait_gate, &g2));
    OK(cuEventRecord(e, a));
    OK(cuStreamWaitEvent(b, e, 0));
    OK(cuEventDestroy(e));
    open_gate(&g2);
    OK(cuStreamSynchronize(b));
    OK(cuStreamDestroy(a));
    OK(cuStreamDestroy(b));
    cr_expect_eq(cuStreamWaitEvent(NULL, e, 0), CUDA_ERROR_INVALID_HANDLE);
}

static void CUDA_CB sleep_ms(void *arg)
{
    usleep((useconds_t)(uintptr_t)arg * 1000);
}

Test(event, timing)
{
    CUevent start, stop, untimed;
    OK(cuEventCreate(&start, 0));
    OK(cuEventCreate(&stop, CU_EVENT_BLOCKING_SYNC));
    OK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
    float ms;
    cr_expect_eq(cuEventElapsedTime(&ms, start, stop), CUDA_ERROR_INVALID_HANDLE);   /* never recorded */
    OK(cuEventQuery(start));                                   /* never recorded: complete */
    OK(cuEventRecord(start, NULL));
    OK(cuLaunchHostFunc(NULL, sleep_ms, (void *)(uintptr_t)30));
    OK(cuEventRecord(stop, NULL));
    OK(cuEventRecord(untimed, NULL));
    OK(cuEventSynchronize(stop));
    OK(cuEventElapsedTime(&ms, start, stop));
    cr_expect(ms >= 29.0f && ms < 2000.0f, "elapsed %f ms", ms);
    cr_expect_eq(cuEventElapsedTime(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE);
    cr_expect_eq(cuEventElapsedTime(NULL, start, stop), CUDA_ERROR_INVALID_VALUE);
    CUevent e;
    cr_expect_eq(cuEventCreate(&e, 0x80), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventDestroy(start));
    OK(cuEventDestroy(stop));
    OK(cuEventDestroy(untimed));
    cr_expect_eq(cuEventDestroy(stop), CUDA_ERROR_INVALID_HANDLE);
    cr_expect_eq(cuEventRecord(stop, NULL), CUDA_ERROR_INVALID_HANDLE);
}

Test(event, pending_elapsed_is_not_ready)
{
    CUstream s;
    CUevent a, b;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&a, 0));
    OK(cuEventCreate(&b, 0));
    OK(cuEventRecord(a, s));
    OK(cuLaunchHostFunc(s, wait_gate, &g));
    OK(cuEventRecord(b, s));
    float ms;
    OK(cuEventSynchronize(a));
    cr_expect_eq(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
    cr_expect_eq(cuEventQuery(b), CUDA_ERROR_NOT_READY);
    open_gate(&g);
    OK(cuEventSynchronize(b));
    OK(cuEventElapsedTime(&ms, a, b));
    OK(cuStreamDestroy(s));
}

static CUresult seen_status = (CUresult)-1;
static CUstream seen_stream;
static void CUDA_CB callback(CUstream s, CUresult status, void *arg)
{
    seen_stream = s;
    seen_status = status;
    *(int *)arg = 1;
}

Test(stream, callbacks_and_properties)
{
    CUstream s;
    OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -3));
    int ran = 0;
    OK(cuStreamAddCallback(s, callback, &ran, 0));
    OK(cuStreamSynchronize(s));
    cr_expect_eq(ran, 1);
    cr_expect_eq(seen_status, CUDA_SUCCESS);
    cr_expect_eq(seen_stream, s);
    unsigned flags;
    int prio;
    CUcontext c;
    unsigned long long id1, id2;
    OK(cuStreamGetFlags(s, &flags));
    cr_expect_eq(flags, CU_STREAM_NON_BLOCKING);
    OK(cuStreamGetPriority(s, &prio));
    cr_expect_eq(prio, -3);
    OK(cuStreamGetCtx(s, &c));
    cr_expect_eq(c, ctx);
    OK(cuStreamGetId(s, &id1));
    OK(cuStreamGetId(NULL, &id2));
    cr_expect_neq(id1, id2);
    cr_expect_eq(cuStreamAddCallback(s, callback, &ran, 1), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuLaunchHostFunc(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuStreamCreate(&s, 0x40), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
}

static void *per_thread_worker(void *arg)
{
    cuCtxSetCurrent(ctx);
    CUstream *out = arg;
    unsigned long long id;
    cuLaunchHostFunc(CU_STREAM_PER_THREAD, tag, (void *)'t');
    cuStreamSynchronize(CU_STREAM_PER_THREAD);
    cuStreamGetId(CU_STREAM_PER_THREAD, &id);
    *out = (CUstream)(uintptr_t)id;
    return NULL;
}

Test(stream, per_thread_default_streams)
{
    CUstream ids[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, per_thread_worker, &ids[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    cr_expect_neq(ids[0], ids[1]);
    cr_expect_eq(order_n, 2);
    unsigned long long a, b;
    OK(cuStreamGetId(CU_STREAM_PER_THREAD, &a));
    OK(cuStreamGetId(CU_STREAM_PER_THREAD, &b));
    cr_expect_eq(a, b);
    OK(cuCtxSynchronize());
}

Test(stream, many_streams_and_ops)
{
    enum { S = 8, OPS = 200 };
    CUstream s[S];
    CUdeviceptr d;
    OK(cuMemAlloc(&d, S * 4));
    OK(cuMemsetD32(d, 0, S));
    for (int i = 0; i < S; i++)
        OK(cuStreamCreate(&s[i], i & 1 ? CU_STREAM_NON_BLOCKING : 0));
    for (int k = 0; k < OPS; k++)
        for (int i = 0; i < S; i++)
            OK(cuMemsetD32Async(d + 4 * (CUdeviceptr)i, (unsigned)k, 1, s[i]));
    OK(cuCtxSynchronize());
    for (int i = 0; i < S; i++)
        cr_expect_eq(((uint32_t *)(uintptr_t)d)[i], OPS - 1);
    for (int i = 0; i < S; i++)
        OK(cuStreamDestroy(s[i]));
    OK(cuMemFree(d));
}

Test(stream, destroy_returns_at_once_and_work_still_runs)
{
    gate g3 = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    OK(cuLaunchHostFunc(s, wait_gate, &g3));
    OK(cuLaunchHostFunc(s, tag, (void *)'x'));
    OK(cuStreamDestroy(s));                   /* does not wait for the gate */
    cr_expect_eq(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    /* The NULL stream still orders after the destroyed stream's work. */
    OK(cuLaunchHostFunc(NULL, tag, (void *)'y'));
    cr_expect_eq(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    open_gate(&g3);
    OK(cuCtxSynchronize());
    cr_expect_eq(order_n, 2);
    cr_expect_eq(memcmp(order, "xy", 2), 0);
    /* A context destroyed right after a stream with queued work. */
    gate g4 = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
    CUcontext c2;
    OK(cuCtxCreate(&c2, NULL, 0, 0));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuLaunchHostFunc(s, wait_gate, &g4));
    OK(cuLaunchHostFunc(s, tag, (void *)'z'));
    OK(cuStreamDestroy(s));
    pthread_t t;
    pthread_create(&t, NULL, open_later, &g4);
    OK(cuCtxDestroy(c2));                     /* waits for the queued work */
    cr_expect_eq(order_n, 3);
    pthread_join(t, NULL);
}

Test(stream, never_capturing)
{
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    OK(cuStreamIsCapturing(s, &st));
    cr_expect_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    cuuint64_t id = 9;
    size_t n = 9;
    OK(cuStreamGetCaptureInfo(NULL, &st, &id, NULL, NULL, NULL, &n));
    cr_expect(st == CU_STREAM_CAPTURE_STATUS_NONE && n == 0);
    cr_expect_eq(cuStreamIsCapturing(s, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
}

Test(stream, event_and_stream_agree_after_a_sync)
{
    CUstream s;
    CUevent e;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&e, 0));
    for (int i = 0; i < 300; i++) {
        OK(cuLaunchHostFunc(s, sleep_ms, (void *)(uintptr_t)0));
        OK(cuEventRecord(e, s));
        OK(cuEventSynchronize(e));
        cr_assert_eq(cuStreamQuery(s), CUDA_SUCCESS, "round %d", i);
        /* And the other way round. */
        OK(cuLaunchHostFunc(s, sleep_ms, (void *)(uintptr_t)0));
        OK(cuEventRecord(e, s));
        OK(i % 2 ? cuStreamSynchronize(s) : cuCtxSynchronize());
        cr_assert_eq(cuEventQuery(e), CUDA_SUCCESS, "round %d", i);
    }
    OK(cuStreamDestroy(s));
    OK(cuEventDestroy(e));
}

static unsigned pinned_value;
static void CUDA_CB write_pinned(void *arg)
{
    *(unsigned *)arg = pinned_value;
}

Test(stream, pinned_source_is_read_when_the_copy_runs)
{
    /* A host function ahead of the copy writes the pinned buffer: the copy
     * must see that, not what the buffer held at submit. */
    unsigned *h;
    OK(cuMemAllocHost((void **)&h, 4));
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 4));
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (unsigned i = 1; i <= 50; i++) {
        *h = 0;
        pinned_value = i;
        OK(cuLaunchHostFunc(s, write_pinned, h));
        OK(cuMemcpyHtoDAsync(d, h, 4, s));
        OK(cuStreamSynchronize(s));
        unsigned got;
        OK(cuMemcpyDtoH(&got, d, 4));
        cr_assert_eq(got, i);
    }
    OK(cuStreamDestroy(s));
    OK(cuMemFree(d));
    OK(cuMemFreeHost(h));
}

Test(stream, wait_and_write_value)
{
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 16));
    OK(cuMemsetD8(d, 0, 16));
    CUstream a, b;
    OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    /* a waits for the flag that b writes once its gate opens. */
    OK(cuStreamWaitValue32(a, d, 5, CU_STREAM_WAIT_VALUE_GEQ));
    OK(cuLaunchHostFunc(a, tag, (void *)'a'));
    OK(cuLaunchHostFunc(b, wait_gate, &g));
    OK(cuLaunchHostFunc(b, tag, (void *)'b'));
    OK(cuStreamWriteValue32(b, d, 7, 0));
    usleep(20000);
    cr_expect_eq(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    cr_expect_eq(order_n, 0);
    open_gate(&g);
    OK(cuStreamSynchronize(a));
    cr_expect_eq(memcmp(order, "ba", 2), 0);
    /* 64-bit, and the other conditions, on values already there. */
    OK(cuStreamWriteValue64(a, d + 8, 0xf0f0000000000001ull, 0));
    OK(cuStreamWaitValue64(a, d + 8, 0xf0f0000000000001ull, CU_STREAM_WAIT_VALUE_EQ));
    OK(cuStreamWaitValue32(a, d, 2, CU_STREAM_WAIT_VALUE_AND));           /* 7 & 2 */
    OK(cuStreamWaitValue32(a, d, 0xfffffff0u, CU_STREAM_WAIT_VALUE_NOR)); /* ~(7 | ~15) */
    OK(cuStreamSynchronize(a));
    uint64_t v;
    OK(cuMemcpyDtoH(&v, d + 8, 8));
    cr_expect_eq(v, 0xf0f0000000000001ull);
    cr_expect_eq(cuStreamWaitValue32(a, d + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);     /* misaligned */
    cr_expect_eq(cuStreamWriteValue32(a, d + 16, 1, 0), CUDA_ERROR_INVALID_VALUE);   /* outside */
    cr_expect_eq(cuStreamWaitValue32(a, d, 1, 7), CUDA_ERROR_INVALID_VALUE);         /* no such test */
    int attr;
    OK(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0));
    cr_expect_eq(attr, 1);
    OK(cuStreamDestroy(a));
    OK(cuStreamDestroy(b));
    OK(cuMemFree(d));
}

#include <dirent.h>

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void *use_default_stream_and_exit(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);
    cuLaunchHostFunc(CU_STREAM_PER_THREAD, tag, (void *)'p');
    cuStreamSynchronize(CU_STREAM_PER_THREAD);
    return NULL;
}

Test(stream, a_threads_default_stream_goes_with_it)
{
    int before = threads_now();
    for (int i = 0; i < 20; i++) {
        pthread_t t;
        pthread_create(&t, NULL, use_default_stream_and_exit, NULL);
        pthread_join(t, NULL);
    }
    OK(cuCtxSynchronize());
    cr_expect_eq(order_n, 20);
    /* Their workers drain and exit on their own: give them a moment. */
    int after = 0;
    for (int tries = 0; tries < 200 && (after = threads_now()) > before; tries++)
        usleep(10000);
    cr_expect_eq(after, before, "%d threads before, %d after", before, after);
}

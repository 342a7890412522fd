/* The shim's face as a program sees it: build/librigshim.so loaded with
 * dlopen (exports, SONAME, cuGetProcAddress, export tables, error names), and
 * unmodified nvcc-built programs from tests/programs run with the shim
 * preloaded over softgpu, or over no driver at all. Nothing of the shim is
 * linked in; proto's operation table says what to expect. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "proto/cuda_ops.h"
#include "tests/harness.h"
#include "tests/support.h"

/* The shim this test loads (sanitized under SAN=1), and what the programs
 * run with: the plain build's shim and softgpu (nvcc programs are never
 * sanitized, and under ASan no process can dlopen with RTLD_DEEPBIND, which
 * is how the shim loads its local driver). */
#define SHIM_PATH RIG_BUILD_DIR "/librigshim.so"
#define PLAIN_SHIM_PATH RIG_PLAIN_BUILD_DIR "/librigshim.so"
#define SOFTGPU_PATH RIG_PLAIN_BUILD_DIR "/libcudasoft.so"
/* A directory whose libcuda.so.1 is softgpu: programs run on it directly. */
#define SOFTGPU_DIRECT_DIR RIG_PLAIN_BUILD_DIR "/softgpu-direct"
#define PROGRAMS RIG_PLAIN_BUILD_DIR "/programs/"

/* The shim, loaded privately with the local driver chosen by `driver`
 * (a path or "none"). Each Criterion test runs in its own process, so the
 * environment seen at the shim's first call is this one. */
static void *load_shim(const char *driver)
{
    setenv("RIG_LOCAL_DRIVER", driver, 1);
    void *h = dlopen(SHIM_PATH, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "dlopen %s: %s", SHIM_PATH, dlerror());
    return h;
}

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    cr_assert_not_null(p, "%s is not exported: %s", name, dlerror());
    return p;
}

#ifdef __SANITIZE_ADDRESS__
/* Criterion's runner (not a test) leaks one small block when tests with
 * timeouts run in parallel; suppress leaks allocated inside libcriterion. */
__attribute__((visibility("default"))) const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libcriterion.so\n";
}
#endif

/* ---- (a) exports ---- */

Test(shim_face, exports_every_stub_symbol)
{
    void *h = load_shim("none");
    FILE *p = popen("nm -D --defined-only " CUDA_STUB " | awk '$2 == \"T\" {print $3}'", "r");
    cr_assert_not_null(p);
    char name[256];
    int count = 0;
    while (fscanf(p, "%255s", name) == 1) {
        void *f = sym(h, name);
        Dl_info info;
        cr_assert(dladdr(f, &info) && info.dli_fname, "%s: dladdr", name);
        cr_assert(strstr(info.dli_fname, "librigshim.so"), "%s resolves into %s", name, info.dli_fname);
        count++;
    }
    pclose(p);
    cr_assert_eq(count, 637, "the stub exports %d functions", count);
}

/* Nothing else leaks into the program's symbol space: the driver's names
 * and the marker that keeps the shim from loading itself as the driver. */
Test(shim_face, exports_nothing_else)
{
    FILE *p = popen("nm -D --defined-only " SHIM_PATH " | awk '{print $3}'", "r");
    cr_assert_not_null(p);
    char name[256];
    int count = 0;
    while (fscanf(p, "%255s", name) == 1) {
        cr_assert(cuda_op_by_symbol(name) || strcmp(name, "rig_shim_marker") == 0,
                  "the shim exports %s", name);
        count++;
    }
    pclose(p);
    cr_assert_eq(count, 638);
}

Test(shim_face, soname_is_libcuda_so_1)
{
    FILE *p = popen("readelf -d " SHIM_PATH, "r");
    cr_assert_not_null(p);
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, p))
        if (strstr(line, "(SONAME)"))
            found = strstr(line, "[libcuda.so.1]") != NULL ? 1 : -1;
    pclose(p);
    cr_assert_eq(found, 1, "the shim's SONAME is not libcuda.so.1");
}

/* ---- (b) cuGetProcAddress ---- */

typedef CUresult (*proc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*proc_v1_fn)(const char *, void **, int, cuuint64_t);

static void *shim;
static proc_v2_fn proc_v2;

static void proc_setup(void)
{
    shim = load_shim("none");
    proc_v2 = (proc_v2_fn)sym(shim, "cuGetProcAddress_v2");
}

/* Asks for (name, version, flags) and checks the answer is symbol `want`. */
static void expect(const char *name, int version, cuuint64_t flags, const char *want)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult q = (CUdriverProcAddressQueryResult)-1;
    CUresult rc = proc_v2(name, &fn, version, flags, &q);
    cr_assert_eq(rc, CUDA_SUCCESS, "%s@%d/%llu: %d", name, version, (unsigned long long)flags, rc);
    cr_assert_eq(q, CU_GET_PROC_ADDRESS_SUCCESS);
    cr_assert_eq(fn, sym(shim, want), "%s@%d/%llu is not %s", name, version,
                 (unsigned long long)flags, want);
}

static void expect_missing(const char *name, int version, cuuint64_t flags,
                           CUdriverProcAddressQueryResult why)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult q = (CUdriverProcAddressQueryResult)-1;
    cr_assert_eq(proc_v2(name, &fn, version, flags, &q), CUDA_ERROR_NOT_FOUND, "%s@%d", name, version);
    cr_assert_eq(q, why, "%s@%d: status %d", name, version, q);
    cr_assert_null(fn);
}

#define PT CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#define LEGACY CU_GET_PROC_ADDRESS_LEGACY_STREAM

Test(proc_address, versions_pick_the_matching_abi, .init = proc_setup)
{
    expect("cuCtxSynchronize", 2000, 0, "cuCtxSynchronize");
    expect("cuCtxSynchronize", 12090, 0, "cuCtxSynchronize");
    expect("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
    expect("cuCtxSynchronize", 13020, PT, "cuCtxSynchronize_v2");
    expect("cuCtxGetDevice", 2000, 0, "cuCtxGetDevice");
    expect("cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2");
    expect("cuMemAlloc", 2000, 0, "cuMemAlloc");
    expect("cuMemAlloc", 3010, 0, "cuMemAlloc");
    expect("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
    expect("cuMemAlloc", 13000, PT, "cuMemAlloc_v2");
    expect("cuStreamGetCaptureInfo", 10010, 0, "cuStreamGetCaptureInfo");
    expect("cuStreamGetCaptureInfo", 11030, 0, "cuStreamGetCaptureInfo_v2");
    expect("cuStreamGetCaptureInfo", 12030, 0, "cuStreamGetCaptureInfo_v3");
    expect("cuStreamGetCaptureInfo", 13000, 0, "cuStreamGetCaptureInfo_v3");
    expect("cuStreamGetCaptureInfo", 10010, PT, "cuStreamGetCaptureInfo_ptsz");
    expect("cuStreamGetCaptureInfo", 11030, PT, "cuStreamGetCaptureInfo_v2_ptsz");
    expect("cuStreamGetCaptureInfo", 12030, PT, "cuStreamGetCaptureInfo_v3_ptsz");
    expect("cuMemcpyBatchAsync", 12080, 0, "cuMemcpyBatchAsync");
    expect("cuMemcpyBatchAsync", 12090, 0, "cuMemcpyBatchAsync");
    expect("cuMemcpyBatchAsync", 13000, 0, "cuMemcpyBatchAsync_v2");
    expect("cuMemcpyBatchAsync", 12080, PT, "cuMemcpyBatchAsync_ptsz");
    expect("cuMemcpyBatchAsync", 13000, PT, "cuMemcpyBatchAsync_v2_ptsz");
    expect("cuEventElapsedTime", 2000, 0, "cuEventElapsedTime");
    expect("cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2");
    expect("cuGraphInstantiate", 10000, 0, "cuGraphInstantiate");
    expect("cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2");
    expect("cuIpcOpenMemHandle", 4010, 0, "cuIpcOpenMemHandle");
    expect("cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2");
    expect("cuMemPrefetchAsync", 8000, 0, "cuMemPrefetchAsync");
    expect("cuMemPrefetchAsync", 12020, 0, "cuMemPrefetchAsync_v2");
    expect("cuMemPrefetchAsync", 12020, PT, "cuMemPrefetchAsync_v2_ptsz");
}

Test(proc_address, per_thread_and_legacy_streams, .init = proc_setup)
{
    expect("cuMemcpyHtoD", 7000, PT, "cuMemcpyHtoD_v2_ptds");
    /* Per-thread streams begin with CUDA 7.0: older requests get legacy. */
    expect("cuMemcpyHtoD", 6050, PT, "cuMemcpyHtoD_v2");
    expect("cuMemcpyHtoD", 13000, PT, "cuMemcpyHtoD_v2_ptds");
    expect("cuMemcpyHtoD", 13000, LEGACY, "cuMemcpyHtoD_v2");
    expect("cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2");
    expect("cuMemcpyHtoD", 2000, PT, "cuMemcpyHtoD");
    expect("cuMemsetD32", 7000, PT, "cuMemsetD32_v2_ptds");
    expect("cuLaunchKernel", 7000, PT, "cuLaunchKernel_ptsz");
    expect("cuLaunchKernel", 4000, PT, "cuLaunchKernel");
    expect("cuLaunchKernel", 4000, LEGACY, "cuLaunchKernel");
    expect("cuStreamSynchronize", 13000, PT, "cuStreamSynchronize_ptsz");
    expect("cuMemcpyAsync", 7000, PT, "cuMemcpyAsync_ptsz");
    /* Names without a per-thread variant answer the plain one. */
    expect("cuInit", 2000, PT, "cuInit");
    expect("cuDeviceGetAttribute", 13000, PT, "cuDeviceGetAttribute");
}

Test(proc_address, refusals, .init = proc_setup)
{
    expect_missing("", 0, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_missing("", 13000, PT, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_missing("cuNoSuchThing", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_missing("cuMemAlloc_v2", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_missing("cuGLGetDevices", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_missing("cuMemcpyBatchAsync", 12070, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_missing("cuMemcpyBatchAsync", 12070, PT, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_missing("cuStreamGetCaptureInfo", 10000, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_missing("cuMemAlloc", 1000, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_missing("cuInit", 0, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

    void *fn = (void *)1;
    cr_assert_eq(proc_v2(NULL, &fn, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(proc_v2("cuInit", NULL, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(proc_v2("cuInit", &fn, 13000, 4, NULL), CUDA_ERROR_INVALID_VALUE);
    /* The status is optional. */
    cr_assert_eq(proc_v2("cuInit", &fn, 13000, 0, NULL), CUDA_SUCCESS);
    cr_assert_eq(fn, sym(shim, "cuInit"));
}

Test(proc_address, cuda_h_only_names_match_any_version, .init = proc_setup)
{
    expect("cuCtxRecordEvent", 2000, 0, "cuCtxRecordEvent");
    expect("cuCtxRecordEvent", 13000, PT, "cuCtxRecordEvent");
    expect("cuGreenCtxCreate", 0, 0, "cuGreenCtxCreate");
}

Test(proc_address, itself_and_the_v1_entry, .init = proc_setup)
{
    expect("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
    expect("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
    expect("cuGetExportTable", 3000, 0, "cuGetExportTable");
    proc_v1_fn v1 = (proc_v1_fn)sym(shim, "cuGetProcAddress");
    void *fn = NULL;
    cr_assert_eq(v1("cuCtxSynchronize", &fn, 13000, 0), CUDA_SUCCESS);
    cr_assert_eq(fn, sym(shim, "cuCtxSynchronize_v2"));
    cr_assert_eq(v1("cuNoSuchThing", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
}

/* Every entry of the table, asked at its own version with its own variant,
 * answers exactly that symbol (per-thread ones from 7000 on, where no newer
 * plain version lies between). */
Test(proc_address, every_table_entry_at_its_version, .init = proc_setup)
{
    int checked = 0;
    for (size_t i = 0; i < cuda_ops_count; i++) {
        const cuda_op_info *e = &cuda_ops[i];
        int version = e->version ? (int)e->version : 13000;
        if (e->variant != CUDA_PLAIN && version < 7000) {
            bool newer = false;
            for (size_t j = 0; j < cuda_ops_count; j++)
                if (strcmp(cuda_ops[j].base, e->base) == 0 && cuda_ops[j].variant == CUDA_PLAIN &&
                    cuda_ops[j].version > e->version && cuda_ops[j].version <= 7000)
                    newer = true;
            if (newer)
                continue;
            version = 7000;
        }
        expect(e->base, version, e->variant == CUDA_PLAIN ? LEGACY : PT, e->symbol);
        checked++;
    }
    cr_assert_geq(checked, 630);
}

/* ---- Error names, version, generic exports with no driver ---- */

Test(shim_face, error_names_without_a_driver)
{
    void *h = load_shim("none");
    CUresult (*name)(CUresult, const char **) = (CUresult(*)(CUresult, const char **))sym(h, "cuGetErrorName");
    CUresult (*text)(CUresult, const char **) = (CUresult(*)(CUresult, const char **))sym(h, "cuGetErrorString");
    const char *s = NULL;
    cr_assert_eq(name(CUDA_ERROR_NO_DEVICE, &s), CUDA_SUCCESS);
    cr_assert_str_eq(s, "CUDA_ERROR_NO_DEVICE");
    cr_assert_eq(name(CUDA_SUCCESS, &s), CUDA_SUCCESS);
    cr_assert_str_eq(s, "CUDA_SUCCESS");
    cr_assert_eq(name(CUDA_ERROR_UNKNOWN, &s), CUDA_SUCCESS);
    cr_assert_str_eq(s, "CUDA_ERROR_UNKNOWN");
    cr_assert_eq(text(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
    cr_assert_str_eq(s, "invalid argument");
    cr_assert_eq(text(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    cr_assert_str_eq(s, "out of memory");
    cr_assert_eq(name((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(s);
    cr_assert_eq(text((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(name(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
}

Test(shim_face, no_driver_refuses_cleanly)
{
    void *h = load_shim("none");
    int v = 0;
    cr_assert_eq(((CUresult(*)(int *))sym(h, "cuDriverGetVersion"))(&v), CUDA_SUCCESS);
    cr_assert_geq(v, 13000);
    cr_assert_eq(((CUresult(*)(unsigned))sym(h, "cuInit"))(0), CUDA_ERROR_NO_DEVICE);
    /* Calls the core serves fail as it decides; none succeeds or crashes. */
    CUdeviceptr p = 0;
    cr_assert_neq(((CUresult(*)(CUdeviceptr *, size_t))sym(h, "cuMemAlloc_v2"))(&p, 64), CUDA_SUCCESS);
    cr_assert_neq(((CUresult(*)(void))sym(h, "cuCtxSynchronize"))(), CUDA_SUCCESS);
    cr_assert_neq(((CUresult(*)(CUstream))sym(h, "cuStreamSynchronize_ptsz"))(NULL), CUDA_SUCCESS);
    cr_assert_neq(((CUresult(*)(CUstream, CUstreamCaptureMode))sym(h, "cuStreamBeginCapture_v2_ptsz"))(
                      NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
                  CUDA_SUCCESS);
    /* The generic path with no driver: no device. */
    CUmemGenericAllocationHandle mc;
    CUmulticastObjectProp prop = { .numDevices = 1, .size = 2 << 20 };
    cr_assert_eq(((CUresult(*)(CUmemGenericAllocationHandle *, const CUmulticastObjectProp *))sym(
                     h, "cuMulticastCreate"))(&mc, &prop),
                 CUDA_ERROR_NO_DEVICE);
    /* Pools are served by the core too. */
    CUmemoryPool pool;
    cr_assert_neq(((CUresult(*)(CUmemoryPool *, CUdevice))sym(h, "cuDeviceGetDefaultMemPool"))(&pool, 0),
                  CUDA_SUCCESS);
}

#ifndef __SANITIZE_ADDRESS__
/* Not under ASan, which refuses the shim's RTLD_DEEPBIND dlopen of the local
 * driver; the drvapi programs cover the same path in every build. */
Test(shim_face, generic_exports_reach_the_local_driver)
{
    void *h = load_shim(SOFTGPU_PATH);
    cr_assert_eq(((CUresult(*)(unsigned))sym(h, "cuInit"))(0), CUDA_SUCCESS);
    int n = 0;
    cr_assert_eq(((CUresult(*)(int *))sym(h, "cuDeviceGetCount"))(&n), CUDA_SUCCESS);
    cr_assert_geq(n, 1);
    CUcontext ctx = NULL;
    cr_assert_eq(((CUresult(*)(CUcontext *, CUdevice))sym(h, "cuDevicePrimaryCtxRetain"))(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(((CUresult(*)(CUcontext))sym(h, "cuCtxSetCurrent"))(ctx), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    cr_assert_eq(((CUresult(*)(CUdeviceptr *, size_t))sym(h, "cuMemAlloc_v2"))(&p, 4096), CUDA_SUCCESS);
    cr_assert_neq(p, 0);
    cr_assert_eq(((CUresult(*)(CUdeviceptr, unsigned, size_t, CUstream))sym(h, "cuMemsetD32Async_ptsz"))(p, 7, 1024, NULL),
                 CUDA_SUCCESS);
    cr_assert_eq(((CUresult(*)(CUcontext))sym(h, "cuCtxSynchronize_v2"))(ctx), CUDA_SUCCESS);
    unsigned got[1024];
    cr_assert_eq(((CUresult(*)(void *, CUdeviceptr, size_t))sym(h, "cuMemcpyDtoH_v2_ptds"))(got, p, sizeof got),
                 CUDA_SUCCESS);
    for (int i = 0; i < 1024; i++)
        cr_assert_eq(got[i], 7u);
    cr_assert_eq(((CUresult(*)(CUdeviceptr))sym(h, "cuMemFree_v2"))(p), CUDA_SUCCESS);
}

static const void *const *table(void *h, const char *hex, CUresult *rc);

/* Export table 2: the primary context (slot 2) and modules from a fatbin
 * wrapper (slots 1 and 6) or the container itself (slot 8). */
Test(export_tables, runtime_table_contexts_and_modules)
{
    void *h = load_shim(SOFTGPU_PATH);
    cr_assert_eq(((CUresult(*)(unsigned))sym(h, "cuInit"))(0), CUDA_SUCCESS);
    CUresult rc;
    const void *const *t = table(h, "6bd5fb6c5bf4e74a8987d93912fd9df9", &rc);
    cr_assert_eq(rc, CUDA_SUCCESS);
    CUcontext ctx = NULL, again = NULL;
    cr_assert_eq(((CUresult(*)(CUcontext *, CUdevice))t[2])(&ctx, 0), CUDA_SUCCESS);
    cr_assert_not_null(ctx);
    cr_assert_eq(((CUresult(*)(CUcontext *, CUdevice))t[2])(&again, 0), CUDA_SUCCESS);
    cr_assert_eq(ctx, again);
    cr_assert_neq(((CUresult(*)(CUcontext *, CUdevice))t[2])(&again, 99), CUDA_SUCCESS);
    cr_assert_eq(((CUresult(*)(CUcontext))sym(h, "cuCtxSetCurrent"))(ctx), CUDA_SUCCESS);

    size_t len = 0;
    char *fatbin = support_read_file(RIG_BUILD_DIR "/kernels/vecadd.default.fatbin", &len);
    cr_assert_not_null(fatbin);
    struct { uint32_t magic, version; const void *data, *unused; } wrapper = { 0x466243B1, 1, fatbin, NULL };
    typedef CUresult (*getfn)(CUfunction *, CUmodule, const char *);
    getfn get = (getfn)sym(h, "cuModuleGetFunction");
    CUmodule m1 = NULL, m6 = NULL, m8 = NULL;
    CUfunction f = NULL;
    cr_assert_eq(((CUresult(*)(CUmodule *, const void *))t[1])(&m1, &wrapper), CUDA_SUCCESS);
    cr_assert_eq(get(&f, m1, "vecadd"), CUDA_SUCCESS);
    cr_assert_eq(((CUresult(*)(CUmodule *, const void *, void *, void *, uint32_t))t[6])(&m6, &wrapper, NULL, NULL, 0),
                 CUDA_SUCCESS);
    cr_assert_eq(get(&f, m6, "vecadd_i32"), CUDA_SUCCESS);
    cr_assert_eq(((CUresult(*)(const void *, CUmodule *, void *, void *, uint32_t))t[8])(fatbin, &m8, NULL, NULL, 0),
                 CUDA_SUCCESS);
    cr_assert_eq(get(&f, m8, "vecadd"), CUDA_SUCCESS);
    wrapper.magic = 0x12345678;
    cr_assert_eq(((CUresult(*)(CUmodule *, const void *))t[1])(&m1, &wrapper), CUDA_ERROR_INVALID_VALUE);
    free(fatbin);
}
#endif

/* ---- Export tables ---- */

typedef CUresult (*export_table_fn)(const void **, const CUuuid *);

static const void *const *table(void *h, const char *hex, CUresult *rc)
{
    CUuuid id;
    for (int i = 0; i < 16; i++) {
        unsigned b;
        sscanf(hex + 2 * i, "%2x", &b);
        id.bytes[i] = (char)b;
    }
    const void *t = (const void *)1;
    *rc = ((export_table_fn)sym(h, "cuGetExportTable"))(&t, &id);
    return (const void *const *)t;
}

#define T_RUNTIME "6bd5fb6c5bf4e74a8987d93912fd9df9"
#define T_HOOKS "a094798c2e742e7493f20800200c0a66"
#define T_TLS "42d85a8123f6cb478298f6e78a3aecdc"
#define T_STORAGE "c693336e1121df11a8c368f355d89593"
#define T_SIX "263e88607cd2614392f6bbd5006dfa7e"
#define T_INTEGRITY "d4082055bde6704b8d34ba123c66e1f2"
#define T_CUBLAS "21318c60971432488ca641ff7324c8f2"

Test(export_tables, known_tables_and_their_sizes)
{
    void *h = load_shim("none");
    CUresult rc;
    const void *const *t = table(h, "f8cff95121468b4eb9e2fb469e7c0dd9", &rc);
    cr_assert_eq(rc, CUDA_ERROR_NOT_FOUND);
    cr_assert_null(t);
    t = table(h, "00112233445566778899aabbccddeeff", &rc);
    cr_assert_eq(rc, CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(t);
    static const struct {
        const char *id;
        size_t size;   /* 0: no size word */
    } known[] = { { T_RUNTIME, 80 }, { T_HOOKS, 56 }, { T_TLS, 32 }, { T_STORAGE, 0 },
                  { T_SIX, 32 },     { T_INTEGRITY, 24 }, { T_CUBLAS, 0 } };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        t = table(h, known[i].id, &rc);
        cr_assert_eq(rc, CUDA_SUCCESS, "%s", known[i].id);
        cr_assert_not_null(t);
        if (known[i].size)
            cr_assert_eq((size_t)(uintptr_t)t[0], known[i].size, "%s", known[i].id);
    }
    /* cublasSdot with a host result calls slot 51 of cuBLAS's table. */
    t = table(h, T_CUBLAS, &rc);
    uint64_t out = 7;
    cr_assert_eq(((CUresult(*)(void *, void *, void *))t[51])(NULL, NULL, &out), CUDA_SUCCESS);
    cr_assert_eq(((export_table_fn)sym(h, "cuGetExportTable"))(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}

Test(export_tables, tool_hooks_hand_out_zeroed_buffers)
{
    void *h = load_shim("none");
    CUresult rc;
    const void *const *t = table(h, T_HOOKS, &rc);
    for (int slot = 2; slot <= 6; slot += 4) {
        void *buf = NULL;
        size_t size = 0;
        ((void (*)(void **, size_t *))t[slot])(&buf, &size);
        cr_assert_not_null(buf);
        cr_assert_geq(size, 523);
        for (size_t i = 0; i < size; i++)
            cr_assert_eq(((unsigned char *)buf)[i], 0);
    }
    cr_assert_eq(((CUresult(*)(void))t[1])(), CUDA_SUCCESS);
    cr_assert_eq(((CUresult(*)(void))t[4])(), CUDA_SUCCESS);
    t = table(h, T_SIX, &rc);
    uint32_t word = 99;
    void *other = NULL;
    cr_assert_eq(((CUresult(*)(CUcontext, uint32_t *, void **))t[2])(NULL, &word, &other), CUDA_SUCCESS);
    cr_assert_eq(word, 0);
    cr_assert_eq(((CUresult(*)(void))t[3])(), CUDA_SUCCESS);
}

typedef CUresult (*put_fn)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *));
typedef CUresult (*del_fn)(CUcontext, void *);
typedef CUresult (*get_fn)(void **, CUcontext, void *);

Test(export_tables, context_storage_by_context_and_key)
{
    void *h = load_shim("none");
    CUresult rc;
    const void *const *t = table(h, T_STORAGE, &rc);
    put_fn put = (put_fn)t[0];
    del_fn del = (del_fn)t[1];
    get_fn get = (get_fn)t[2];
    CUcontext a = (CUcontext)0x1000, b = (CUcontext)0x2000;
    int k1, k2;
    void *v = NULL;
    cr_assert_eq(get(&v, a, &k1), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(put(a, &k1, (void *)11, NULL), CUDA_SUCCESS);
    cr_assert_eq(put(a, &k2, (void *)12, NULL), CUDA_SUCCESS);
    cr_assert_eq(put(b, &k1, (void *)21, NULL), CUDA_SUCCESS);
    cr_assert_eq(get(&v, a, &k1), CUDA_SUCCESS);
    cr_assert_eq(v, (void *)11);
    cr_assert_eq(get(&v, a, &k2), CUDA_SUCCESS);
    cr_assert_eq(v, (void *)12);
    cr_assert_eq(get(&v, b, &k1), CUDA_SUCCESS);
    cr_assert_eq(v, (void *)21);
    cr_assert_eq(get(&v, b, &k2), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(put(a, &k1, (void *)13, NULL), CUDA_SUCCESS);
    cr_assert_eq(get(&v, a, &k1), CUDA_SUCCESS);
    cr_assert_eq(v, (void *)13);
    cr_assert_eq(del(a, &k1), CUDA_SUCCESS);
    cr_assert_eq(get(&v, a, &k1), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(get(&v, b, &k1), CUDA_SUCCESS);
    for (intptr_t i = 1; i <= 200; i++)
        cr_assert_eq(put((CUcontext)(0x10000 + i * 16), &k2, (void *)i, NULL), CUDA_SUCCESS);
    for (intptr_t i = 1; i <= 200; i++) {
        cr_assert_eq(get(&v, (CUcontext)(0x10000 + i * 16), &k2), CUDA_SUCCESS);
        cr_assert_eq(v, (void *)i);
    }
    /* With no driver there is no current context: NULL misses. */
    cr_assert_eq(get(&v, NULL, &k1), CUDA_ERROR_NOT_FOUND);
}

/* Many threads at once on the storage, as every runtime call reads it:
 * each thread owns its contexts and keys; all read a shared entry. */
typedef struct storage_worker {
    put_fn put;
    del_fn del;
    get_fn get;
    int id;
    int errors;
} storage_worker;

static int shared_key;

static void *storage_hammer(void *arg)
{
    storage_worker *w = arg;
    int keys[4];
    for (int round = 0; round < 2000; round++) {
        CUcontext ctx = (CUcontext)(uintptr_t)(0x100000 + w->id * 0x1000 + (round % 8) * 16);
        for (int k = 0; k < 4; k++)
            if (w->put(ctx, &keys[k], (void *)(uintptr_t)(round * 4 + k + 1), NULL) != CUDA_SUCCESS)
                w->errors++;
        for (int k = 0; k < 4; k++) {
            void *v = NULL;
            if (w->get(&v, ctx, &keys[k]) != CUDA_SUCCESS || v != (void *)(uintptr_t)(round * 4 + k + 1))
                w->errors++;
        }
        void *v = NULL;
        if (w->get(&v, (CUcontext)0x42, &shared_key) != CUDA_SUCCESS || v != (void *)0x4242)
            w->errors++;
        for (int k = 0; k < 4; k += 2)
            if (w->del(ctx, &keys[k]) != CUDA_SUCCESS || w->get(&v, ctx, &keys[k]) != CUDA_ERROR_NOT_FOUND)
                w->errors++;
    }
    return NULL;
}

Test(export_tables, context_storage_from_many_threads, .timeout = 60)
{
    void *h = load_shim("none");
    CUresult rc;
    const void *const *t = table(h, T_STORAGE, &rc);
    put_fn put = (put_fn)t[0];
    cr_assert_eq(put((CUcontext)0x42, &shared_key, (void *)0x4242, NULL), CUDA_SUCCESS);
    pthread_t th[8];
    storage_worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (storage_worker){ put, (del_fn)t[1], (get_fn)t[2], i, 0 };
        cr_assert_eq(pthread_create(&th[i], NULL, storage_hammer, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(w[i].errors, 0, "thread %d: %d errors", i, w[i].errors);
    }
}

Test(export_tables, integrity_fixed_answers)
{
    void *h = load_shim("none");
    CUresult rc;
    const void *const *t = table(h, T_INTEGRITY, &rc);
    CUresult (*check)(uint32_t, uint64_t, uint64_t *) = (CUresult(*)(uint32_t, uint64_t, uint64_t *))t[1];
    uint64_t out[2] = { 0, 0 };
    cr_assert_eq(check(13000, 1700000000, out), CUDA_SUCCESS);
    cr_assert_eq(out[0], 0x3341181C03CB675Cull);
    cr_assert_eq(out[1], 0x8ED383AA1F4CD1E8ull);
    cr_assert_eq(check(13001, 1700000000, out), CUDA_SUCCESS);
    cr_assert_eq(out[0], 0x1841181C03CB675Cull);
    cr_assert_eq(out[1], 0x8ED383AA1F4CD1E8ull);
    /* The verified one depends on the time: two times, two answers. */
    uint64_t again[2];
    cr_assert_eq(check(13002, 1700000000, out), CUDA_SUCCESS);
    cr_assert_eq(check(13002, 1700000001, again), CUDA_SUCCESS);
    cr_assert(out[0] != again[0] || out[1] != again[1]);
}

/* ---- (c) and (d): programs through the preloaded shim ---- */

/* Runs program (with the space-separated arguments in args, or none when
 * NULL) with the shim preloaded, RIG_LOCAL_DRIVER=driver and SOFTGPU_DEVICES=devices (unset when
 * NULL); driver NULL: no shim, softgpu is its libcuda.so.1 (LD_LIBRARY_PATH).
 * Returns its exit status (-1 when killed at the deadline), its output in
 * *out. */
static int run_program(const char *program, const char *args, const char *driver, const char *devices,
                       int timeout_ms, char **out)
{
    char argbuf[128] = "", *argv[8] = { NULL };
    int argc = 1;
    snprintf(argbuf, sizeof argbuf, "%s", args ? args : "");
    for (char *save = NULL, *t = strtok_r(argbuf, " ", &save); t && argc < 7; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    char path[512], local[600], count[64];
    snprintf(path, sizeof path, PROGRAMS "%s", program);
    cr_assert_eq(access(path, X_OK), 0, "%s is not built", path);
    argv[0] = path;
    if (devices)
        snprintf(count, sizeof count, "SOFTGPU_DEVICES=%s", devices);
    else
        snprintf(count, sizeof count, "SOFTGPU_DEVICES");
    char *shimmed[] = { "LD_PRELOAD=" PLAIN_SHIM_PATH, local, count, NULL };
    char *direct[] = { "LD_PRELOAD", "LD_LIBRARY_PATH=" SOFTGPU_DIRECT_DIR, count, NULL };
    if (driver)
        snprintf(local, sizeof local, "RIG_LOCAL_DRIVER=%s", driver);
    program_result r = program_run(argv, driver ? shimmed : direct, (timeout_ms + 999) / 1000);
    *out = r.output;
    return r.status;
}

static void expect_run_on(const char *program, const char *driver, const char *devices, int want_status,
                          const char *want_text)
{
    char *out = NULL;
    int st = run_program(program, NULL, driver, devices, 120 * 1000, &out);
    cr_assert_eq(st, want_status, "%s (driver %s, SOFTGPU_DEVICES=%s) exited %d, expected %d; its output:\n%s",
                 program, driver ? driver : "softgpu directly", devices ? devices : "", st, want_status, out);
    cr_assert(strstr(out, want_text), "%s printed no \"%s\"; its output:\n%s", program, want_text, out);
    free(out);
}

static void expect_run(const char *program, const char *driver, int want_status, const char *want_text)
{
    expect_run_on(program, driver, NULL, want_status, want_text);
}

/* Every program of tests/programs, in every build, on two softgpu devices
 * through the preloaded shim. A program says "NAME: ok" and exits 0 unless
 * listed here. The fault tests' tools (fault_*) need their harness and run
 * here only where listed. */
static const struct program_expectation {
    const char *name;
    const char *args;    /* its arguments, space-separated, or NULL */
    int status;          /* -1: not run here */
    const char *text;
} expectations[] = {
    { "refusals", NULL, -1, NULL },                   /* proxy_refusals below */
    { "fault_stream", "20", 0, "fault_stream: ok 20 steps" },
    { "fault_oob", NULL, 1, "cudaErrorIllegalAddress" },
    { "fault_bigcopy", "16 up", 0, "fault_bigcopy: ok" },
    { "fault_fork", NULL, 0, "fault_fork: ok" },
};

typedef struct program_case {
    char name[32];
    char build[8];
} program_case;

static const struct program_expectation *expectation_of(const char *name)
{
    static const struct program_expectation harness_only = { NULL, NULL, -1, NULL };
    for (size_t i = 0; i < sizeof expectations / sizeof expectations[0]; i++)
        if (strcmp(expectations[i].name, name) == 0)
            return &expectations[i];
    return strncmp(name, "fault_", 6) == 0 ? &harness_only : NULL;
}

/* The programs' names from their sources (tests/programs/NAME.cu, not the
 * *_kernel.cu files other programs embed); returns the count. */
static size_t program_names(char names[][32], size_t cap)
{
    DIR *d = opendir(RIG_SOURCE_DIR "/tests/programs");
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || len - 3 >= 32 || strcmp(e->d_name + len - 3, ".cu") != 0)
            continue;
        if (len > 10 && strcmp(e->d_name + len - 10, "_kernel.cu") == 0)
            continue;
        if (n < cap) {
            memcpy(names[n], e->d_name, len - 3);
            names[n][len - 3] = 0;
        }
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

static void free_cases(struct criterion_test_params *crp)
{
    cr_free(crp->params);
}

ParameterizedTestParameters(programs_on_softgpu, every_program_every_build)
{
    static const char *const builds[] = { "static", "shared", "ptds" };
    char names[256][32];
    size_t n = program_names(names, 256);
    if (n > 256)
        n = 256;
    program_case *cases = cr_calloc(n * 3 + 1, sizeof *cases);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct program_expectation *x = expectation_of(names[i]);
        if (x && x->status < 0)
            continue;
        for (size_t b = 0; b < 3; b++) {
            snprintf(cases[k].name, sizeof cases[k].name, "%s", names[i]);
            snprintf(cases[k].build, sizeof cases[k].build, "%s", builds[b]);
            k++;
        }
    }
    return cr_make_param_array(program_case, cases, k, free_cases);
}

ParameterizedTest(program_case *c, programs_on_softgpu, every_program_every_build, .timeout = 180)
{
    const struct program_expectation *x = expectation_of(c->name);
    char program[48], ok[48];
    snprintf(program, sizeof program, "%s.%s", c->name, c->build);
    snprintf(ok, sizeof ok, "%s: ok", c->name);
    int want = x ? x->status : 0;
    const char *text = x ? x->text : ok;
    char *out = NULL;
    int st = run_program(program, x ? x->args : NULL, SOFTGPU_PATH, "2", 120 * 1000, &out);
    cr_expect_eq(st, want, "%s exited %d, expected %d; its output:\n%s", program, st, want, out);
    cr_expect(strstr(out, text), "%s printed no \"%s\"; its output:\n%s", program, text, out);
    free(out);
}

/* The parameter list above comes from the sources: make sure it found them
 * (an empty list would run nothing and pass). */
Test(programs_on_softgpu, every_source_is_built)
{
    char names[256][32];
    size_t n = program_names(names, 256);
    cr_assert_geq(n, 7, "found %zu programs in tests/programs", n);
    for (size_t i = 0; i < n && i < 256; i++)
        for (int b = 0; b < 3; b++) {
            static const char *const builds[] = { "static", "shared", "ptds" };
            char path[512];
            snprintf(path, sizeof path, PROGRAMS "%s.%s", names[i], builds[b]);
            cr_expect_eq(access(path, X_OK), 0, "%s is not built", path);
        }
}

/* Three softgpu devices: the integrity check hashes one record per device,
 * each device has its own primary context and runtime state. */
#define ON_THREE(prog, build, text)                                                        \
    Test(programs_on_three_devices, prog##_##build, .timeout = 180)                        \
    {                                                                                      \
        expect_run_on(#prog "." #build, SOFTGPU_PATH, "3", 0, text);                       \
    }
ON_THREE(devicequery, static, "devicequery: 3 device(s)")
ON_THREE(multidev, static, "multidev: ok 3 devices")
ON_THREE(multidev, shared, "multidev: ok 3 devices")
ON_THREE(multidev, ptds, "multidev: ok 3 devices")

/* softgpu's own reasons on the program's stderr: a kernel it cannot run in
 * a module that loads (the other kernel runs), a module it cannot load. */
Test(programs_on_softgpu, refusals_name_the_kernel_instruction_and_line, .timeout = 120)
{
    static const char *const says[] = {
        "softgpu: cannot run kernel refused (CUDA_ERROR_NOT_SUPPORTED): line 8, in kernel refused: "
        "instruction 'frobnicate.b32' is not supported",
        "refusedptx: the module loaded; its bad kernel alone was refused",
        "softgpu: line 3: 32-bit addresses",
        "refusedptx: ok",
    };
    char *out = NULL;
    int st = run_program("refusedptx.shared", NULL, SOFTGPU_PATH, NULL, 120 * 1000, &out);
    cr_assert_eq(st, 0, "refusedptx exited %d:\n%s", st, out);
    for (size_t i = 0; i < sizeof says / sizeof *says; i++)
        cr_expect(strstr(out, says[i]), "no \"%s\" in its output:\n%s", says[i], out);
    free(out);
}

/* softgpu as the program's own libcuda.so.1, no shim in front: the CUDA
 * runtime initialises on it (export tables, integrity check), thrust and
 * CUB run; driver-API programs too. */
#define DIRECT(prog, build, text)                                                          \
    Test(programs_directly_on_softgpu, prog##_##build, .timeout = 180)                     \
    {                                                                                      \
        expect_run_on(#prog "." #build, NULL, "2", 0, text);                               \
    }
DIRECT(vecadd, static, "vecadd: ok")
DIRECT(vecadd, shared, "vecadd: ok")
DIRECT(vecadd, ptds, "vecadd: ok")
DIRECT(devicequery, shared, "devicequery: 2 device(s)")
DIRECT(multidev, static, "multidev: ok 2 devices")
DIRECT(graphs, static, "graphs: ok")
DIRECT(mallocasync, ptds, "mallocasync: ok")
DIRECT(streams, static, "streams: ok")
DIRECT(thrustalgo, static, "thrustalgo: ok")
DIRECT(cubsort, shared, "cubsort: ok")
DIRECT(vmmtwo, static, "vmmtwo: ok")
DIRECT(vmmtwo, shared, "vmmtwo: ok")
DIRECT(refusedptx, static, "refusedptx: the module loaded; its bad kernel alone was refused")
DIRECT(drvapi, static, "drvapi: ok")
DIRECT(lazyrefuse, static, "lazyrefuse: ok")
DIRECT(lazyrefuse, ptds, "cannot run kernel _Z15with_breakpointPii (CUDA_ERROR_NOT_SUPPORTED): line ")

/* With no local driver (and no proxies) a runtime program sees no device. */
#define NO_DRIVER(prog, build, status, text)                                               \
    Test(programs_without_driver, prog##_##build, .timeout = 60)                           \
    {                                                                                      \
        expect_run(#prog "." #build, "none", status, text);                                \
    }
NO_DRIVER(devicequery, static, 3, "cudaErrorNoDevice")
NO_DRIVER(devicequery, shared, 3, "cudaErrorNoDevice")
NO_DRIVER(devicequery, ptds, 3, "cudaErrorNoDevice")
NO_DRIVER(vecadd, static, 1, "cudaErrorNoDevice")
NO_DRIVER(drvapi, static, 1, "CUDA_ERROR_NO_DEVICE")

/* A local driver that cannot be loaded is said once, then reads as none. */
Test(programs_without_driver, driver_path_missing, .timeout = 60)
{
    expect_run("devicequery.static", "/nonexistent/libcuda.so.1", 3, "cudaErrorNoDevice");
    expect_run("devicequery.static", "/nonexistent/libcuda.so.1", 3, "rig: ");
    expect_run("devicequery.static", "/nonexistent/libcuda.so.1", 3, "/nonexistent/libcuda.so.1");
}

/* A driver with no devices reads the same to the program. */
Test(programs_without_driver, softgpu_with_no_devices, .timeout = 60)
{
    expect_run_on("devicequery.shared", SOFTGPU_PATH, "0", 3, "cudaErrorNoDevice");
}

/* ---- Refusals on proxies: a real agent on loopback (tests/harness.h) ---- */

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Runs refusals.static on device `ordinal` with one agent and the given
 * local driver (NULL: none; then this build's shim, else the plain one). */
static program_result run_refusals(const agent_proc *a, const char *local_driver, const char *ordinal)
{
    char path[] = PROGRAMS "refusals.static";
    char agents_var[256], key[96], local[300], preload[300];
    agents_env(a, 1, agents_var, sizeof agents_var);
    snprintf(key, sizeof key, "RIG_REMOTE_KEY=%s", a->key_hex);
    snprintf(local, sizeof local, "RIG_LOCAL_DRIVER=%s", local_driver ? local_driver : "none");
    if (local_driver)
        snprintf(preload, sizeof preload, "LD_PRELOAD=%s", PLAIN_SHIM_PATH);
    else
        shim_env(preload, sizeof preload);
    char *argv[] = { path, (char *)ordinal, NULL };
    char *env[] = { preload, agents_var, key, local, NULL };
    return program_run(argv, env, 60);
}

/* Each refused call answers CUDA_ERROR_NOT_SUPPORTED, twice, and the shim
 * says so once per function, naming the device. */
static void expect_refused(const program_result *r, const char *device)
{
    cr_assert_eq(r->status, 0, "refusals exited %d:\n%s", r->status, r->output);
    cr_assert_null(strstr(r->output, "left"), "a refusal left garbage in an output:\n%s", r->output);
    cr_assert_eq(count_of(r->output, ": CUDA_ERROR_NOT_SUPPORTED\n"), 8, "%s", r->output);
    static const char *const fns[] = { "cuSignalExternalSemaphoresAsync", "cuDeviceGetLuid",
                                       "cuMulticastCreate", "cuGraphConditionalHandleCreate" };
    for (size_t i = 0; i < 4; i++) {
        char line[160];
        snprintf(line, sizeof line, "rig: %s on %s: not supported\n", fns[i], device);
        cr_assert_eq(count_of(r->output, line), 1, "want one \"%s\" in:\n%s", line, r->output);
    }
}

Test(proxy_refusals, by_handle_device_and_current_context, .timeout = 90)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    program_result r = run_refusals(&a, NULL, "0");
    expect_refused(&r, "CUDA:0@b");
    program_result_free(&r);
    agent_stop(&a);
}

Test(proxy_refusals, beside_a_local_device, .timeout = 90)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    /* Device 1 is the agent's: refused. */
    program_result r = run_refusals(&a, SOFTGPU_PATH, "1");
    expect_refused(&r, "CUDA:0@b");
    program_result_free(&r);
    /* Device 0 is local: the same calls reach softgpu, which lacks them. */
    r = run_refusals(&a, SOFTGPU_PATH, "0");
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_assert_eq(count_of(r.output, ": CUDA_ERROR_NOT_FOUND\n"), 8, "%s", r.output);
    cr_assert_eq(count_of(r.output, "on the local driver: not supported"), 4, "%s", r.output);
    cr_assert_eq(count_of(r.output, "NOT_SUPPORTED"), 0, "%s", r.output);
    program_result_free(&r);
    agent_stop(&a);
}

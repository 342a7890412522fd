/* libcudasoft.so's face: every symbol it exports is one the toolkit's stub
 * libcuda.so exports (same names, so the agent can load either), every one
 * is reachable through cuGetProcAddress, it exports nothing of its own, and
 * its SONAME is libcudasoft.so. Reads the symbol tables with nm/readelf. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB RIG_BUILD_DIR "/libcudasoft.so"
#define STUB "/usr/local/cuda/lib64/stubs/libcuda.so"

typedef struct names { char **v; size_t n; } names;

static names dynamic_symbols(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    names out = { 0 };
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char addr[64], type[8], name[256];
        if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3 || (type[0] != 'T' && type[0] != 'W'))
            continue;
        out.v = realloc(out.v, (out.n + 1) * sizeof *out.v);
        out.v[out.n++] = strdup(name);
    }
    pclose(f);
    return out;
}

static bool has(const names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return true;
    return false;
}

Test(exports, same_names_as_the_stub)
{
    names mine = dynamic_symbols(LIB), stub = dynamic_symbols(STUB);
    /* The toolkit and binutils are part of the build: their absence fails. */
    cr_assert_gt(stub.n, 150, "nm -D found %zu exports in %s", stub.n, STUB);
    cr_assert_gt(mine.n, 150, "%zu exports", mine.n);
    for (size_t i = 0; i < mine.n; i++) {
        cr_expect(strncmp(mine.v[i], "cu", 2) == 0, "exports %s", mine.v[i]);
        cr_expect(has(&stub, mine.v[i]), "%s is not a libcuda export", mine.v[i]);
    }
    /* What the agent and cudart need at least. */
    const char *needed[] = { "cuInit", "cuDriverGetVersion", "cuGetProcAddress_v2", "cuMemAlloc_v2",
                             "cuMemFree_v2", "cuCtxSynchronize", "cuCtxSynchronize_v2", "cuMemcpyHtoD_v2",
                             "cuMemcpyHtoDAsync_v2", "cuMemAddressReserve", "cuMemCreate", "cuMemMap",
                             "cuMemSetAccess", "cuMemUnmap", "cuMemRelease", "cuMemAddressFree",
                             "cuLibraryLoadData", "cuLaunchKernel", "cuLaunchKernelEx", "cuFuncGetParamInfo",
                             "cuKernelGetParamInfo", "cuLaunchHostFunc", "cuStreamWaitEvent",
                             "cuEventElapsedTime", "cuMemsetD32Async", "cuMemcpy2D_v2" };
    for (size_t i = 0; i < sizeof needed / sizeof *needed; i++)
        cr_expect(has(&mine, needed[i]), "%s missing", needed[i]);
}

Test(exports, every_export_reachable_by_proc_address)
{
    names mine = dynamic_symbols(LIB);
    cr_assert_gt(mine.n, 0);
    for (size_t i = 0; i < mine.n; i++) {
        const char *sym = mine.v[i];
        void *want = dlsym(RTLD_DEFAULT, sym);
        cr_assert(want, "%s", sym);
        /* The base name: strip _ptsz/_ptds, then _vN. */
        char base[256];
        snprintf(base, sizeof base, "%s", sym);
        bool pt = false;
        size_t n = strlen(base);
        if (n > 5 && (strcmp(base + n - 5, "_ptsz") == 0 || strcmp(base + n - 5, "_ptds") == 0)) {
            base[n - 5] = 0;
            pt = true;
        }
        char *v = strrchr(base, '_');
        if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9')
            *v = 0;
        bool found = false;
        for (int ver = 2000; ver <= 13000 && !found; ver += 10) {
            void *fn;
            if (cuGetProcAddress(base, &fn, ver, pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, NULL) ==
                    CUDA_SUCCESS &&
                fn == want)
                found = true;
        }
        cr_expect(found, "%s (as %s) not reachable", sym, base);
    }
}

Test(exports, soname)
{
    FILE *f = popen("readelf -d '" LIB "' 2>/dev/null", "r");
    cr_assert(f);
    char line[512];
    bool ok = false;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "SONAME") && strstr(line, "[libcudasoft.so]"))
            ok = true;
    pclose(f);
    cr_expect(ok);
}

/* The tables the CUDA runtime asks for (docs/cudart.md): known ones answer,
 * table 1 is refused as the runtime expects, an unknown UUID is invalid;
 * the integrity check gives the fixed answers and a time-dependent one;
 * context-local storage keeps a value per context and key. */
Test(exports, runtime_tables)
{
    void *h = dlopen(LIB, RTLD_NOW | RTLD_LOCAL);
    cr_assert(h, "%s", dlerror());
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*table)(const void **, const CUuuid *) =
        (CUresult(*)(const void **, const CUuuid *))dlsym(h, "cuGetExportTable");
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
    cr_assert(init && table && retain);
    cr_assert_eq(init(0), CUDA_SUCCESS);
    static const CUuuid one = { { (char)0xf8, (char)0xcf, (char)0xf9, 0x51, 0x21, 0x46, (char)0x8b, 0x4e, (char)0xb9,
                                  (char)0xe2, (char)0xfb, 0x46, (char)0x9e, 0x7c, 0x0d, (char)0xd9 } };
    static const CUuuid two = { { 0x6b, (char)0xd5, (char)0xfb, 0x6c, 0x5b, (char)0xf4, (char)0xe7, 0x4a, (char)0x89,
                                  (char)0x87, (char)0xd9, 0x39, 0x12, (char)0xfd, (char)0x9d, (char)0xf9 } };
    static const CUuuid five = { { (char)0xc6, (char)0x93, 0x33, 0x6e, 0x11, 0x21, (char)0xdf, 0x11, (char)0xa8,
                                   (char)0xc3, 0x68, (char)0xf3, 0x55, (char)0xd8, (char)0x95, (char)0x93 } };
    static const CUuuid seven = { { (char)0xd4, 0x08, 0x20, 0x55, (char)0xbd, (char)0xe6, 0x70, 0x4b, (char)0x8d, 0x34,
                                    (char)0xba, 0x12, 0x3c, 0x66, (char)0xe1, (char)0xf2 } };
    static const CUuuid unknown = { { 1, 2, 3 } };
    const void *t = (const void *)1;
    cr_expect_eq(table(&t, &one), CUDA_ERROR_NOT_FOUND);
    cr_expect_eq(table(&t, &unknown), CUDA_ERROR_INVALID_VALUE);
    cr_expect_null(t);

    const void *const *rt;
    cr_assert_eq(table((const void **)&rt, &two), CUDA_SUCCESS);
    cr_expect_eq((uintptr_t)rt[0], 10 * sizeof(void *));
    CUcontext primary = NULL, retained = NULL;
    cr_assert_eq(((CUresult(*)(CUcontext *, CUdevice))rt[2])(&primary, 0), CUDA_SUCCESS);
    cr_assert_eq(retain(&retained, 0), CUDA_SUCCESS);
    cr_expect_eq(primary, retained);

    const void *const *t7;
    cr_assert_eq(table((const void **)&t7, &seven), CUDA_SUCCESS);
    CUresult (*check)(uint32_t, uint64_t, uint64_t *) = (CUresult(*)(uint32_t, uint64_t, uint64_t *))t7[1];
    uint64_t out[2], again[2];
    cr_assert_eq(check(13000, 1700000000, out), CUDA_SUCCESS);
    cr_expect(out[0] == 0x3341181C03CB675Cull && out[1] == 0x8ED383AA1F4CD1E8ull);
    cr_assert_eq(check(13002, 1700000000, out), CUDA_SUCCESS);
    cr_assert_eq(check(13002, 1700000001, again), CUDA_SUCCESS);
    cr_expect(out[0] != again[0] || out[1] != again[1]);

    const void *const *t5;
    cr_assert_eq(table((const void **)&t5, &five), CUDA_SUCCESS);
    CUresult (*put)(CUcontext, void *, void *, void *) = (CUresult(*)(CUcontext, void *, void *, void *))t5[0];
    CUresult (*get)(void **, CUcontext, void *) = (CUresult(*)(void **, CUcontext, void *))t5[2];
    int key, value;
    void *v = NULL;
    cr_expect_eq(get(&v, primary, &key), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(put(primary, &key, &value, NULL), CUDA_SUCCESS);
    cr_assert_eq(get(&v, primary, &key), CUDA_SUCCESS);
    cr_expect_eq(v, &value);
}

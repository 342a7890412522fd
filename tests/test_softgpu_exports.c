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

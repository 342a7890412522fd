/* cuGetExportTable: the undocumented tables the CUDA runtime asks its
 * driver for by UUID (docs/cudart.md has what each slot does, as
 * measured), so that a cudart program runs on softgpu loaded directly as
 * libcuda.so.1, with no shim in front. A slot of unknown use answers
 * CUDA_ERROR_NOT_SUPPORTED without reading its arguments. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

#define SLOT(fn) ((const void *)(fn))
#define SIZE_WORD(n) ((const void *)(uintptr_t)(n))

static CUresult slot_zero(void)
{
    return CUDA_SUCCESS;
}

static CUresult slot_unknown(void)
{
    soft_log("cuGetExportTable: a slot of unknown use was called: CUDA_ERROR_NOT_SUPPORTED");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- 2: the runtime's interface ---- */

/* A program's .nvFatBinSegment entry. */
typedef struct fatbin_wrapper {
    uint32_t magic, version;
    const void *data, *filename_or_fatbins;
} fatbin_wrapper;

static CUresult from_wrapper(CUmodule *out, const fatbin_wrapper *w)
{
    if (!out || !w || w->magic != 0x466243B1u || !w->data)
        return CUDA_ERROR_INVALID_VALUE;
    return cuModuleLoadData(out, w->data);
}

static CUresult from_wrapper_ext(CUmodule *out, const fatbin_wrapper *w, void *a3, void *a4, uint32_t a5)
{
    (void)a3, (void)a4, (void)a5;
    return from_wrapper(out, w);
}

static CUresult from_fatbin(const void *fatbin, CUmodule *out, void *a3, void *a4, uint32_t a5)
{
    (void)a3, (void)a4, (void)a5;
    if (!out || !fatbin)
        return CUDA_ERROR_INVALID_VALUE;
    return cuModuleLoadData(out, fatbin);
}

/* The device's primary context, made if need be but not retained. */
static CUresult primary_context(CUcontext *out, CUdevice dev)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_primary_context(dev, &c));
    *out = c;
    return CUDA_SUCCESS;
}

const void *const soft_table_runtime[] = {
    SIZE_WORD(10 * sizeof(void *)), SLOT(from_wrapper),     SLOT(primary_context),
    SLOT(slot_unknown),             SLOT(slot_unknown),     SLOT(slot_unknown),
    SLOT(from_wrapper_ext),         SLOT(slot_zero),        SLOT(from_fatbin),
    SLOT(slot_unknown),
};

/* ---- 3: tools callback hooks: zeroed buffers of at least 523 bytes ---- */

static uint64_t hooks_a[128], hooks_b[128];

static void tools_hooks_a(void **buf, size_t *size)
{
    if (buf)
        *buf = hooks_a;
    if (size)
        *size = sizeof hooks_a;
}

static void tools_hooks_b(void **buf, size_t *size)
{
    if (buf)
        *buf = hooks_b;
    if (size)
        *size = sizeof hooks_b;
}

static const void *const table_tools_hooks[] = {
    SIZE_WORD(7 * sizeof(void *)), SLOT(slot_zero), SLOT(tools_hooks_a), SLOT(slot_zero),
    SLOT(slot_zero),               SLOT(slot_zero), SLOT(tools_hooks_b),
};

/* ---- 4: tools thread-local state ---- */

static const void *const table_tools_tls[] = {
    SIZE_WORD(4 * sizeof(void *)), SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero),
};

/* ---- 5: context-local storage (no size word) ---- */

typedef void (*storage_dtor)(CUcontext ctx, void *key, void *value);

typedef struct entry {
    CUcontext ctx;
    void *key, *value;
    storage_dtor dtor;
} entry;

/* A handful of entries (contexts times runtime instances): a flat array. */
static pthread_mutex_t storage_lock = PTHREAD_MUTEX_INITIALIZER;
static entry *storage;
static size_t nstorage, capstorage;

static CUcontext ctx_or_current(CUcontext ctx)
{
    CUcontext cur = NULL;
    return ctx ? ctx : cuCtxGetCurrent(&cur) == CUDA_SUCCESS ? cur : NULL;
}

static long find(CUcontext ctx, void *key)
{
    for (size_t i = 0; i < nstorage; i++)
        if (storage[i].ctx == ctx && storage[i].key == key)
            return (long)i;
    return -1;
}

static CUresult storage_put(CUcontext ctx, void *key, void *value, storage_dtor dtor)
{
    if (!(ctx = ctx_or_current(ctx)))
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&storage_lock);
    long i = find(ctx, key);
    if (i < 0) {
        if (nstorage == capstorage) {
            size_t cap = capstorage ? 2 * capstorage : 16;
            entry *grown = realloc(storage, cap * sizeof *grown);
            if (!grown) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out;
            }
            storage = grown;
            capstorage = cap;
        }
        i = (long)nstorage++;
    }
    storage[i] = (entry){ ctx, key, value, dtor };
out:
    pthread_mutex_unlock(&storage_lock);
    return r;
}

/* The runtime frees its own value here: no destructor runs. */
static CUresult storage_delete(CUcontext ctx, void *key)
{
    ctx = ctx_or_current(ctx);
    pthread_mutex_lock(&storage_lock);
    long i = find(ctx, key);
    if (i >= 0)
        storage[i] = storage[--nstorage];
    pthread_mutex_unlock(&storage_lock);
    return CUDA_SUCCESS;
}

/* A miss must fail: the runtime then sets the context up. */
static CUresult storage_get(void **value, CUcontext ctx, void *key)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(ctx = ctx_or_current(ctx)))
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    pthread_mutex_lock(&storage_lock);
    long i = find(ctx, key);
    if (i >= 0) {
        *value = storage[i].value;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&storage_lock);
    return r;
}

void soft_storage_drop(struct CUctx_st *c)
{
    for (;;) {
        entry e = { 0 };
        pthread_mutex_lock(&storage_lock);
        for (size_t i = 0; i < nstorage && !e.ctx; i++)
            if (storage[i].ctx == c) {
                e = storage[i];
                storage[i] = storage[--nstorage];
            }
        pthread_mutex_unlock(&storage_lock);
        if (!e.ctx)
            return;
        if (e.dtor)   /* outside the lock: it may call back in */
            e.dtor(e.ctx, e.key, e.value);
    }
}

static const void *const table_storage[] = { SLOT(storage_put), SLOT(storage_delete), SLOT(storage_get) };

/* ---- 6: slot 2 (ctx, uint32_t *out, void **) before context set-up ---- */

static CUresult context_query(CUcontext ctx, uint32_t *out, void **other)
{
    (void)ctx, (void)other;
    if (out)
        *out = 0;
    return CUDA_SUCCESS;
}

static const void *const table_six[] = {
    SIZE_WORD(4 * sizeof(void *)), SLOT(slot_zero), SLOT(context_query), SLOT(slot_zero),
};

/* ---- 7: the integrity check (integrity.c) ---- */

const void *const soft_table_integrity[] = {
    SIZE_WORD(3 * sizeof(void *)), SLOT(soft_integrity_check), SLOT(slot_zero),
};

/* ---- 8: cuBLAS's ---- */

/* cublasCreate calls slot 4; cublasSdot with a host result calls slot 51
 * (0, 0, out): answered 0 like the rest, out untouched. */
#define SLOTS8 SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero), \
               SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero)
static const void *const table_cublas[] = { SLOTS8, SLOTS8, SLOTS8, SLOTS8, SLOTS8, SLOTS8, SLOTS8, SLOTS8 };
#undef SLOTS8

static const struct {
    uint8_t uuid[16];
    const void *const *table;   /* NULL: known, answered CUDA_ERROR_NOT_FOUND */
} tables[] = {
    { { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 }, NULL },
    { { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 }, soft_table_runtime },
    { { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 }, table_tools_hooks },
    { { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc }, table_tools_tls },
    { { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 }, table_storage },
    { { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e }, table_six },
    { { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 }, soft_table_integrity },
    { { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 }, table_cublas },
};

SOFT_API CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
        if (memcmp(tables[i].uuid, pExportTableId->bytes, 16) == 0) {
            if (!tables[i].table)
                return CUDA_ERROR_NOT_FOUND;
            *ppExportTable = tables[i].table;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

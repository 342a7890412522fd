/* cuGetExportTable: the undocumented tables the CUDA runtime (and cuBLAS)
 * ask for by UUID, implemented here for every device, local or proxy.
 * What each slot does is measured, not documented: see docs/cudart.md. A slot
 * whose use is unknown returns an error without reading its arguments. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "shim/core.h"
#include "shim/export_tables.h"
#include "shim/exports.h"
#include "shim/log.h"

#define SLOT(fn) ((const void *)(fn))
#define SIZE_WORD(n) ((const void *)(uintptr_t)(n))

static CUresult slot_zero(void)
{
    return CUDA_SUCCESS;
}

static CUresult slot_unknown(void)
{
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        shim_log(SHIM_LOG_WARN, "cuGetExportTable: a slot of unknown use was called; it returns "
                                "CUDA_ERROR_NOT_SUPPORTED");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- Table 2: the runtime interface ---- */

/* The fatbin wrapper in a program's .nvFatBinSegment. */
typedef struct fatbin_wrapper {
    uint32_t magic;   /* 0x466243B1 */
    uint32_t version;
    const void *data; /* the fatbin container */
    const void *filename_or_fatbins;
} fatbin_wrapper;

#define FATBIN_WRAPPER_MAGIC 0x466243B1u

static CUresult module_from_wrapper(CUmodule *out, const fatbin_wrapper *w)
{
    if (!out || !w || w->magic != FATBIN_WRAPPER_MAGIC || !w->data)
        return CUDA_ERROR_INVALID_VALUE;
    return shim_export_cuModuleLoadData(out, w->data);
}

/* Slot 1: (CUmodule *out, const wrapper *). */
static CUresult rt_module_from_wrapper(CUmodule *out, const fatbin_wrapper *w)
{
    return module_from_wrapper(out, w);
}

/* Slot 2: the device's primary context, not retained. */
static CUresult rt_primary_context(CUcontext *out, CUdevice dev)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    return shim_primary_context(dev, out);
}

/* Slot 6: slot 1 with three more arguments of unknown use. */
static CUresult rt_module_from_wrapper_ext(CUmodule *out, const fatbin_wrapper *w, void *a3,
                                           void *a4, uint32_t a5)
{
    (void)a3, (void)a4, (void)a5;
    return module_from_wrapper(out, w);
}

/* Slot 8: from the fatbin container itself. */
static CUresult rt_module_from_fatbin(const void *fatbin, CUmodule *out, void *a3, void *a4,
                                      uint32_t a5)
{
    (void)a3, (void)a4, (void)a5;
    if (!out || !fatbin)
        return CUDA_ERROR_INVALID_VALUE;
    return shim_export_cuModuleLoadData(out, fatbin);
}

const void *const shim_table_runtime[] = {
    SIZE_WORD(10 * sizeof(void *)),
    SLOT(rt_module_from_wrapper),
    SLOT(rt_primary_context),
    SLOT(slot_unknown),
    SLOT(slot_unknown),
    SLOT(slot_unknown),
    SLOT(rt_module_from_wrapper_ext),
    SLOT(slot_zero),
    SLOT(rt_module_from_fatbin),
    SLOT(slot_unknown),
};

/* ---- Table 3: tools callback hooks ---- */

/* Zeroed buffers the runtime takes for its tool hooks (it needs 523 bytes
 * or more); shared by every runtime instance in the process. */
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

/* ---- Table 4: tools thread-local state ---- */

static const void *const table_tools_tls[] = {
    SIZE_WORD(4 * sizeof(void *)), SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero),
};

/* ---- Table 5: context-local storage ---- */

typedef void (*storage_dtor)(CUcontext ctx, void *key, void *value);

typedef struct storage_entry {
    CUcontext ctx;
    void *key;
    void *value;
    storage_dtor dtor;
} storage_entry;

/* A handful of entries (contexts times runtime instances): a flat array. */
static storage_entry *storage;
static size_t storage_len, storage_cap;
static pthread_rwlock_t storage_lock = PTHREAD_RWLOCK_INITIALIZER;

/* ctx, or the calling thread's current context when ctx is NULL. */
static CUcontext resolve_ctx(CUcontext ctx)
{
    if (ctx)
        return ctx;
    CUcontext cur = NULL;
    if (shim_export_cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
        return NULL;
    return cur;
}

static long storage_find(CUcontext ctx, void *key)
{
    for (size_t i = 0; i < storage_len; i++)
        if (storage[i].ctx == ctx && storage[i].key == key)
            return (long)i;
    return -1;
}

/* Slot 0: put(ctx, key, value, dtor). */
static CUresult storage_put(CUcontext ctx, void *key, void *value, storage_dtor dtor)
{
    ctx = resolve_ctx(ctx);
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&storage_lock);
    long i = storage_find(ctx, key);
    if (i < 0) {
        if (storage_len == storage_cap) {
            size_t cap = storage_cap ? storage_cap * 2 : 16;
            storage_entry *grown = realloc(storage, cap * sizeof *grown);
            if (!grown) {
                rc = shim_nomem("the runtime's context storage (%zu entries)", cap);
                goto out;
            }
            storage = grown;
            storage_cap = cap;
        }
        i = (long)storage_len++;
    }
    storage[i] = (storage_entry){ ctx, key, value, dtor };
out:
    pthread_rwlock_unlock(&storage_lock);
    return rc;
}

/* Slot 1: delete(ctx, key); the runtime drops its own value, so no dtor. */
static CUresult storage_delete(CUcontext ctx, void *key)
{
    ctx = resolve_ctx(ctx);
    pthread_rwlock_wrlock(&storage_lock);
    long i = storage_find(ctx, key);
    if (i >= 0)
        storage[i] = storage[--storage_len];
    pthread_rwlock_unlock(&storage_lock);
    return CUDA_SUCCESS;
}

/* Slot 2: get(&value, ctx, key); CUDA_ERROR_NOT_FOUND on a miss. */
static CUresult storage_get(void **value, CUcontext ctx, void *key)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    ctx = resolve_ctx(ctx);
    if (!ctx)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    pthread_rwlock_rdlock(&storage_lock);
    long i = storage_find(ctx, key);
    if (i >= 0) {
        *value = storage[i].value;
        rc = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&storage_lock);
    return rc;
}

void shim_context_storage_drop(CUcontext ctx)
{
    for (;;) {
        storage_entry e = { 0 };
        bool found = false;
        pthread_rwlock_wrlock(&storage_lock);
        for (size_t i = 0; i < storage_len; i++)
            if (storage[i].ctx == ctx) {
                e = storage[i];
                storage[i] = storage[--storage_len];
                found = true;
                break;
            }
        pthread_rwlock_unlock(&storage_lock);
        if (!found)
            return;
        if (e.dtor)   /* outside the lock: a destructor may call back in */
            e.dtor(e.ctx, e.key, e.value);
    }
}

static const void *const table_context_storage[] = {
    SLOT(storage_put),
    SLOT(storage_delete),
    SLOT(storage_get),
};

/* ---- Table 6 ---- */

/* Slot 2: (ctx, uint32_t *out, void **) before context set-up and syncs. */
static CUresult t6_context_query(CUcontext ctx, uint32_t *out, void **other)
{
    (void)ctx, (void)other;
    if (out)
        *out = 0;
    return CUDA_SUCCESS;
}

static const void *const table_six[] = {
    SIZE_WORD(4 * sizeof(void *)), SLOT(slot_zero), SLOT(t6_context_query), SLOT(slot_zero),
};

/* ---- Table 7: integrity ---- */

const void *const shim_table_integrity[] = {
    SIZE_WORD(3 * sizeof(void *)),
    SLOT(shim_integrity_check),
    SLOT(slot_zero),
};

/* ---- Table 8: cuBLAS ---- */

/* cublasCreate calls slot 4; cublasSdot with a host result calls slot 51
 * (0, 0, out): answered 0 like the rest, out untouched. */
#define SLOTS8 SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero), \
               SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero), SLOT(slot_zero)
static const void *const table_cublas[] = { SLOTS8, SLOTS8, SLOTS8, SLOTS8, SLOTS8, SLOTS8, SLOTS8, SLOTS8 };
#undef SLOTS8

/* ---- Lookup ---- */

typedef struct export_table {
    uint8_t uuid[16];
    const void *const *table;   /* NULL: known, refused with NOT_FOUND */
} export_table;

static const export_table tables[] = {
    { { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 }, NULL },
    { { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 }, shim_table_runtime },
    { { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 }, table_tools_hooks },
    { { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc }, table_tools_tls },
    { { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 }, table_context_storage },
    { { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e }, table_six },
    { { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 }, shim_table_integrity },
    { { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 }, table_cublas },
};

SHIM_EXPORT(cuGetExportTable)
{
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (memcmp(tables[i].uuid, pExportTableId->bytes, 16) != 0)
            continue;
        if (!tables[i].table)
            return CUDA_ERROR_NOT_FOUND;
        *ppExportTable = tables[i].table;
        return CUDA_SUCCESS;
    }
    if (shim_log_enabled(SHIM_LOG_DEBUG)) {
        char hex[33];
        for (int i = 0; i < 16; i++) {
            static const char digits[] = "0123456789abcdef";
            hex[2 * i] = digits[(uint8_t)pExportTableId->bytes[i] >> 4];
            hex[2 * i + 1] = digits[(uint8_t)pExportTableId->bytes[i] & 15];
        }
        hex[32] = 0;
        shim_log(SHIM_LOG_DEBUG, "cuGetExportTable: unknown table %s", hex);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

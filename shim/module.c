/* Modules, libraries, functions and kernels on proxies. A module belongs
 * to one device and is loaded there at once. A library is context-free, so
 * while proxies exist the shim keeps its image and loads it on each agent
 * the first time that agent needs it (and through the local driver too).
 * Resolving a function brings back its parameter layout and attributes,
 * so launches marshal their parameters without asking. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/text.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/decode.h"
#include "shim/image.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/module.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* Loading a library on an agent and resolving a function there happen once
 * each; threads that race to do it wait for the first. Rare calls, so one
 * lock serves. */
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t link_bit(agent_link *l)
{
    return (uint64_t)1 << ((l->index - 1) % 64);
}

/* A request whose answer carries no outputs beyond the result. */
static CUresult simple_request(agent_link *l, const uint8_t *body, size_t n, const void *data, size_t dn)
{
    struct iovec iov[2] = { { (void *)body, n }, { (void *)data, dn } };
    frame f;
    const uint8_t *o;
    size_t on;
    CUresult rc = link_request(l, iov, dn ? 2 : 1, &f, &o, &on);
    if (rc == CUDA_SUCCESS && on)
        rc = link_malformed(l, "an answer with %zu bytes of outputs where none were due", on);
    frame_release(&f);
    return rc;
}

/* The driver's reason a refusal's answer carries (a string), printable, in
 * why; a bad one is no reason but does not fail the job: the call failed
 * anyway. */
static void answer_reason(const uint8_t *o, size_t on, char *why, size_t whylen)
{
    wire_reader r = wire_reader_init(o, on);
    const uint8_t *text;
    size_t n = wire_get_string(&r, &text, 1024);
    char clean[JOB_REASON_MAX + 1];
    text_printable(clean, sizeof clean, text, r.err ? 0 : n, false);
    size_t keep = strnlen(clean, whylen - 1);
    memcpy(why, clean, keep);
    why[keep] = '\0';
}

/* Loads m on the agent. A refusal comes with the driver's reason, which
 * goes to *why (the caller names the kernel that needed the module). */
static CUresult load_on(proxy_obj *m, agent_link *l, int remote_device, char *why, size_t whylen)
{
    if (m->u.module.loaded & link_bit(l))
        return CUDA_SUCCESS;
    uint8_t body[16];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, m->u.module.library ? CUDA_OP_cuLibraryLoadData : CUDA_OP_cuModuleLoadData);
    wire_put_u64(&w, m->id);
    wire_put_u32(&w, (uint32_t)remote_device);
    struct iovec iov[2] = { { body, w.off }, { m->u.module.image, m->u.module.image_len } };
    frame f;
    const uint8_t *o;
    size_t on;
    CUresult rc = link_request(l, iov, 2, &f, &o, &on);
    if (rc == CUDA_SUCCESS && on) {
        rc = link_malformed(l, "an answer to a module load with %zu bytes of outputs where none were due", on);
    } else if (rc == CUDA_SUCCESS) {
        __atomic_or_fetch(&m->u.module.loaded, link_bit(l), __ATOMIC_RELEASE);
    } else if (why && o) {
        answer_reason(o, on, why, whylen);
    }
    frame_release(&f);
    return rc;
}

CUresult shim_module_ready(proxy_obj *m, int device)
{
    shim_device *d = shim_device_at(device);
    if (!d || !d->proxy)
        return CUDA_ERROR_INVALID_DEVICE;
    char why[1100] = "";
    pthread_mutex_lock(&resolve_lock);
    CUresult rc = load_on(m, d->link, d->remote_ordinal, why, sizeof why);
    pthread_mutex_unlock(&resolve_lock);
    if (rc && why[0])
        shim_log(SHIM_LOG_ERROR, "module load on %s: %s", d->label, why);
    return rc;
}

/* Says once, for each function, why an agent could not run it: the call
 * fails with a CUDA error the program may not print, so this line is how
 * the user learns which kernel and why. */
static void tell_unrunnable(proxy_obj *f, shim_device *d, CUresult rc, const char *why)
{
    if (__atomic_exchange_n(&f->u.fn.told, true, __ATOMIC_RELAXED))
        return;
    const char *name = NULL;
    cuGetErrorName(rc, &name);
    shim_log(SHIM_LOG_ERROR, "kernel %s on %s: %s%s%s", f->u.fn.name, d->label, name ? name : "error",
             why && why[0] ? ": " : "", why ? why : "");
}

static CUresult resolve(proxy_obj *f, shim_device *d);

CUresult shim_function_ready(proxy_obj *f, int device)
{
    shim_device *d = shim_device_at(device);
    if (!d || !d->proxy)
        return CUDA_ERROR_INVALID_DEVICE;
    if (__atomic_load_n(&f->u.fn.resolved, __ATOMIC_ACQUIRE) & link_bit(d->link))
        return CUDA_SUCCESS;
    pthread_mutex_lock(&resolve_lock);
    CUresult rc = resolve(f, d);
    pthread_mutex_unlock(&resolve_lock);
    return rc;
}

static CUresult resolve(proxy_obj *f, shim_device *d)
{
    agent_link *l = d->link;
    if (__atomic_load_n(&f->u.fn.resolved, __ATOMIC_ACQUIRE) & link_bit(l))
        return CUDA_SUCCESS;
    proxy_obj *m = f->u.fn.module;
    char why[1100] = "";
    CUresult rc = load_on(m, l, d->remote_ordinal, why, sizeof why);
    if (rc) {
        tell_unrunnable(f, d, rc, why[0] ? why : "its module cannot load there");
        return rc;
    }
    size_t name_len = strlen(f->u.fn.name);
    uint8_t body[24];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, m->u.module.library ? CUDA_OP_cuLibraryGetKernel : CUDA_OP_cuModuleGetFunction);
    wire_put_u64(&w, m->id);
    wire_put_u64(&w, f->id);
    wire_put_u32(&w, (uint32_t)name_len);
    struct iovec iov[2] = { { body, w.off }, { f->u.fn.name, name_len } };
    frame fr;
    const uint8_t *o;
    size_t on;
    rc = link_request(l, iov, 2, &fr, &o, &on);
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_DEVICE_UNAVAILABLE) {
        /* A kernel the agent's driver cannot run comes with its reason. */
        if (o && on)
            answer_reason(o, on, why, sizeof why);
        tell_unrunnable(f, d, rc, rc == CUDA_ERROR_NOT_FOUND ? "no such kernel in its module" : why);
    }
    if (rc == CUDA_SUCCESS && !f->u.fn.params) {
        shim_param_info pi;
        rig_why bad = { "" };
        int drc = shim_decode_param_info(o, on, &pi, &bad);
        if (drc == RIG_E_NOMEM) {
            rc = shim_nomem("the layout of kernel %s", f->u.fn.name);   /* ours, not the agent's fault */
        } else if (drc < 0) {
            rc = link_malformed(l, "the layout of kernel %s: %s", f->u.fn.name, bad.text);
        } else {
            f->u.fn.params = pi.params;
            f->u.fn.param_count = pi.count;
            f->u.fn.param_bytes = pi.bytes;
            f->u.fn.attrs = pi.attrs;
            f->u.fn.attr_count = pi.attr_count;
        }
    }
    frame_release(&fr);
    if (rc == CUDA_SUCCESS)
        __atomic_or_fetch(&f->u.fn.resolved, link_bit(l), __ATOMIC_RELEASE);
    return rc;
}

/* ---- modules ---- */

static CUresult module_load(CUmodule *out, const void *image, size_t len_hint)
{
    proxy_obj *ctx = shim_proxy_current();
    const void *data = image;
    size_t len = len_hint;
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if (!len && image_extent(image, &data, &len) < 0)
        return CUDA_ERROR_INVALID_IMAGE;
    proxy_obj *m = arena_new(PROXY_MODULE, ctx->device);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->u.module.image = (uint8_t *)data;   /* only read during the load below */
    m->u.module.image_len = len;
    char why[1100] = "";
    CUresult rc = load_on(m, m->link, shim_device_at(ctx->device)->remote_ordinal, why, sizeof why);
    m->u.module.image = NULL;
    if (rc && why[0])
        shim_log(SHIM_LOG_ERROR, "module load on %s: %s", shim_current_device_label(), why);
    if (rc) {
        arena_free(m);
        return rc;
    }
    *out = (CUmodule)m;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuModuleLoadData)
{
    return shim_proxy_current() ? module_load(module, image, 0) : SHIM_LOCAL(cuModuleLoadData);
}

SHIM_EXPORT(cuModuleLoadDataEx)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    return shim_proxy_current() ? module_load(module, image, 0) : SHIM_LOCAL(cuModuleLoadDataEx);
}

SHIM_EXPORT(cuModuleLoadFatBinary)
{
    return shim_proxy_current() ? module_load(module, fatCubin, 0) : SHIM_LOCAL(cuModuleLoadFatBinary);
}

SHIM_EXPORT(cuModuleLoad)
{
    if (!shim_proxy_current())
        return SHIM_LOCAL(cuModuleLoad);
    if (!fname)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t *buf;
    size_t n;
    if (image_read_file(fname, &buf, &n) < 0)
        return errno == ENOMEM ? shim_nomem("the contents of module file %s", fname)
                               : errno == EFBIG ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_FILE_NOT_FOUND;
    const void *data;
    size_t len;
    CUresult rc = image_extent(buf, &data, &len) < 0 || len > n + 1 ? CUDA_ERROR_INVALID_IMAGE
                                                                      : module_load(module, buf, len);
    free(buf);
    return rc;
}

SHIM_EXPORT(cuModuleUnload)
{
    proxy_obj *m = arena_get(hmod, PROXY_MODULE);
    if (!m)
        return SHIM_LOCAL(cuModuleUnload);
    /* A library's module (cuLibraryGetModule) goes with its library. */
    if (m->u.module.library)
        return CUDA_SUCCESS;
    shim_texref_module_gone(m);
    CUresult rc = link_drop(m->link, CUDA_OP_cuModuleUnload, m->id);
    __atomic_store_n(&m->type, PROXY_FREE, __ATOMIC_RELEASE);
    return rc;
}

static proxy_obj *new_function(proxy_obj *m, const char *name, int device)
{
    proxy_obj *f = arena_new(PROXY_FUNCTION, device);
    if (!f)
        return NULL;
    f->u.fn.module = m;
    f->u.fn.name = strdup(name);
    if (!f->u.fn.name) {
        shim_nomem("the name of function %s", name);
        arena_free(f);
        return NULL;
    }
    return f;
}

/* The device a module acts on: its own; a library's (cuLibraryGetModule
 * hands a library out as a module) is the current proxy context's. */
static int module_device(const proxy_obj *m)
{
    if (m->device >= 0)
        return m->device;
    proxy_obj *ctx = shim_proxy_current();
    return ctx ? ctx->device : -1;
}

SHIM_EXPORT(cuModuleGetFunction)
{
    proxy_obj *m = arena_get(hmod, PROXY_MODULE);
    if (!m)
        return SHIM_LOCAL(cuModuleGetFunction);
    if (!hfunc || !name || strlen(name) > JOB_NAME_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *f = new_function(m, name, m->device);
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = shim_function_ready(f, module_device(m));
    if (rc) {
        free(f->u.fn.name);
        arena_free(f);
        return rc;
    }
    *hfunc = (CUfunction)f;
    return CUDA_SUCCESS;
}

static CUresult get_global(proxy_obj *m, int device, CUdeviceptr *dptr, size_t *bytes, const char *name)
{
    shim_device *d = shim_device_at(device);
    if (!d || !d->proxy)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!name || strlen(name) > JOB_NAME_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&resolve_lock);
    CUresult rc = load_on(m, d->link, d->remote_ordinal, NULL, 0);
    pthread_mutex_unlock(&resolve_lock);
    if (rc)
        return rc;
    size_t name_len = strlen(name);
    uint8_t body[20];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, m->u.module.library ? CUDA_OP_cuLibraryGetGlobal : CUDA_OP_cuModuleGetGlobal_v2);
    wire_put_u64(&w, m->id);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    wire_put_u32(&w, (uint32_t)name_len);
    struct iovec iov[2] = { { body, w.off }, { (void *)name, name_len } };
    frame fr;
    const uint8_t *o;
    size_t on;
    rc = link_request(d->link, iov, 2, &fr, &o, &on);
    if (rc == CUDA_SUCCESS) {
        uint64_t p = on == 16 ? wire_load_u64(o) : 0, size = on == 16 ? wire_load_u64(o + 8) : 0;
        if (on != 16) {
            rc = link_malformed(d->link, "an answer to cuModuleGetGlobal of %zu bytes, not 16", on);
        } else if (p == 0 || size > UINT64_MAX - p) {
            rc = link_malformed(d->link, "global %s at %#llx of %llu bytes, which wraps around", name,
                                (unsigned long long)p, (unsigned long long)size);
        } else {
            uint64_t b, s;
            int dev;
            /* Globals live where the agent's driver put them, outside the
             * window: the table is how copies find them. */
            if (!shim_alloc_find(p, &b, &s, &dev) && !shim_alloc_add(p, size, device)) {
                rc = CUDA_ERROR_OUT_OF_MEMORY;   /* the global stays the module's */
            } else {
                if (dptr)
                    *dptr = p;
                if (bytes)
                    *bytes = size;
            }
        }
    }
    frame_release(&fr);
    return rc;
}

CUresult shim_module_global(proxy_obj *m, int device, CUdeviceptr *dptr, size_t *bytes, const char *name)
{
    return get_global(m, device, dptr, bytes, name);
}

SHIM_EXPORT(cuModuleGetGlobal_v2)
{
    proxy_obj *m = arena_get(hmod, PROXY_MODULE);
    if (!m)
        return SHIM_LOCAL(cuModuleGetGlobal_v2);
    return get_global(m, module_device(m), dptr, bytes, name);
}

SHIM_EXPORT(cuModuleGetLoadingMode)
{
    if (shim_local_driver())
        return SHIM_LOCAL(cuModuleGetLoadingMode);
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* ---- libraries and kernels ---- */

SHIM_EXPORT(cuLibraryLoadData)
{
    if (!shim_has_proxies())
        return SHIM_LOCAL(cuLibraryLoadData);
    const void *data;
    size_t len;
    if (!library || !code)
        return CUDA_ERROR_INVALID_VALUE;
    if (image_extent(code, &data, &len) < 0)
        return CUDA_ERROR_INVALID_IMAGE;
    proxy_obj *m = arena_new(PROXY_MODULE, -1);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->u.module.library = true;
    m->u.module.image = malloc(len);
    if (!m->u.module.image) {
        arena_free(m);
        return shim_nomem("a copy of a library's %zu-byte image", len);
    }
    memcpy(m->u.module.image, data, len);
    m->u.module.image_len = len;
    if (shim_local_count() > 0) {
        CUlibrary local = NULL;
        const shim_driver *drv = shim_local_driver();
        if (drv->fn_cuLibraryLoadData(&local, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                                      libraryOptionValues, numLibraryOptions) == CUDA_SUCCESS)
            m->u.module.local = local;
    }
    *library = (CUlibrary)m;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuLibraryUnload)
{
    proxy_obj *m = arena_get(library, PROXY_MODULE);
    if (!m)
        return SHIM_LOCAL(cuLibraryUnload);
    CUresult rc = CUDA_SUCCESS;
    for (int dev = 0; dev < shim_device_count(); dev++) {
        shim_device *d = shim_device_at(dev);
        if (d->proxy && d->remote_ordinal == 0 && (m->u.module.loaded & link_bit(d->link))) {
            CUresult r = link_drop(d->link, CUDA_OP_cuLibraryUnload, m->id);
            if (!rc)
                rc = r;
        }
    }
    if (m->u.module.local)
        shim_local_driver()->fn_cuLibraryUnload(m->u.module.local);
    free(m->u.module.image);
    m->u.module.image = NULL;
    __atomic_store_n(&m->type, PROXY_FREE, __ATOMIC_RELEASE);
    return rc;
}

/* A library is its own module here: lookups through the module act on the
 * current proxy context's device, as the library's own do. */
SHIM_EXPORT(cuLibraryGetModule)
{
    proxy_obj *m = arena_get(library, PROXY_MODULE);
    if (!m)
        return SHIM_LOCAL(cuLibraryGetModule);
    if (!pMod || !m->u.module.library)
        return CUDA_ERROR_INVALID_VALUE;
    if (!shim_current_is_proxy()) {
        if (!m->u.module.local)
            return CUDA_ERROR_INVALID_CONTEXT;
        return shim_local_driver()->fn_cuLibraryGetModule(pMod, m->u.module.local);
    }
    *pMod = (CUmodule)m;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuLibraryGetKernel)
{
    proxy_obj *m = arena_get(library, PROXY_MODULE);
    if (!m)
        return SHIM_LOCAL(cuLibraryGetKernel);
    if (!pKernel || !name || strlen(name) > JOB_NAME_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *ctx = shim_proxy_current();
    proxy_obj *f = new_function(m, name, ctx ? ctx->device : -1);
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_SUCCESS;
    if (m->u.module.local)
        rc = shim_local_driver()->fn_cuLibraryGetKernel(&f->u.fn.local, m->u.module.local, name);
    /* With a proxy current, a missing name is reported now, as the driver would. */
    if (rc == CUDA_SUCCESS && ctx)
        rc = shim_function_ready(f, ctx->device);
    if (rc) {
        free(f->u.fn.name);
        arena_free(f);
        return rc;
    }
    *pKernel = (CUkernel)f;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuLibraryGetGlobal)
{
    proxy_obj *m = arena_get(library, PROXY_MODULE);
    if (!m)
        return SHIM_LOCAL(cuLibraryGetGlobal);
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx) {
        if (!m->u.module.local)
            return CUDA_ERROR_INVALID_CONTEXT;
        return shim_local_driver()->fn_cuLibraryGetGlobal(dptr, bytes, m->u.module.local, name);
    }
    return get_global(m, ctx->device, dptr, bytes, name);
}

/* The function object of a proxy kernel or function handle. */
static proxy_obj *fn_of(const void *h)
{
    return arena_get(h, PROXY_FUNCTION);
}

/* The device a function acts on: its module's, else the current proxy's. */
static int fn_device(proxy_obj *f)
{
    if (f->u.fn.module->device >= 0)
        return f->u.fn.module->device;
    proxy_obj *ctx = shim_proxy_current();
    return ctx ? ctx->device : -1;
}

SHIM_EXPORT(cuKernelGetFunction)
{
    proxy_obj *f = fn_of(kernel);
    if (!f)
        return SHIM_LOCAL(cuKernelGetFunction);
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx) {
        if (!f->u.fn.local)
            return CUDA_ERROR_INVALID_CONTEXT;
        return shim_local_driver()->fn_cuKernelGetFunction(pFunc, f->u.fn.local);
    }
    CUresult rc = shim_function_ready(f, ctx->device);
    if (rc == CUDA_SUCCESS)
        *pFunc = (CUfunction)f;
    return rc;
}

static CUresult fn_attribute(proxy_obj *f, int device, int *pi, int attrib)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = shim_function_ready(f, device);
    if (rc)
        return rc;
    if (attrib < 0 || (uint32_t)attrib >= f->u.fn.attr_count)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = f->u.fn.attrs[attrib];
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuKernelGetAttribute)
{
    proxy_obj *f = fn_of(kernel);
    shim_device *d = shim_device_at(dev);
    if (!f)
        return SHIM_LOCAL(cuKernelGetAttribute);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!d->proxy)
        return f->u.fn.local ? shim_local_driver()->fn_cuKernelGetAttribute(pi, attrib, f->u.fn.local, dev)
                             : CUDA_ERROR_INVALID_HANDLE;
    return fn_attribute(f, dev, pi, attrib);
}

static CUresult fn_set_attribute(proxy_obj *f, int device, int attrib, int value)
{
    shim_device *d = shim_device_at(device);
    if (!d || !d->proxy)
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = shim_function_ready(f, device);
    if (rc)
        return rc;
    uint8_t body[24];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuFuncSetAttribute);
    wire_put_u64(&w, f->id);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    wire_put_u32(&w, (uint32_t)attrib);
    wire_put_u32(&w, (uint32_t)value);
    rc = simple_request(d->link, body, w.off, NULL, 0);
    if (rc == CUDA_SUCCESS && attrib >= 0 && (uint32_t)attrib < f->u.fn.attr_count)
        f->u.fn.attrs[attrib] = value;
    return rc;
}

SHIM_EXPORT(cuKernelSetAttribute)
{
    proxy_obj *f = fn_of(kernel);
    shim_device *d = shim_device_at(dev);
    if (!f)
        return SHIM_LOCAL(cuKernelSetAttribute);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!d->proxy)
        return f->u.fn.local ? shim_local_driver()->fn_cuKernelSetAttribute(attrib, val, f->u.fn.local, dev)
                             : CUDA_ERROR_INVALID_HANDLE;
    return fn_set_attribute(f, dev, attrib, val);
}

SHIM_EXPORT(cuKernelSetCacheConfig)
{
    proxy_obj *f = fn_of(kernel);
    if (!f)
        return SHIM_LOCAL(cuKernelSetCacheConfig);
    (void)config;
    (void)dev;
    return CUDA_SUCCESS;
}

static CUresult param_info(proxy_obj *f, size_t index, size_t *offset, size_t *size)
{
    int dev = fn_device(f);
    if (dev < 0) {
        /* Any agent can tell; the first device of a proxy is as good. */
        for (int i = 0; i < shim_device_count() && dev < 0; i++)
            if (shim_device_at(i)->proxy)
                dev = i;
    }
    CUresult rc = shim_function_ready(f, dev);
    if (rc)
        return rc;
    if (index >= f->u.fn.param_count)
        return CUDA_ERROR_INVALID_VALUE;
    if (offset)
        *offset = f->u.fn.params[index].offset;
    if (size)
        *size = f->u.fn.params[index].size;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuKernelGetParamInfo)
{
    proxy_obj *f = fn_of(kernel);
    return f ? param_info(f, paramIndex, paramOffset, paramSize) : SHIM_LOCAL(cuKernelGetParamInfo);
}

SHIM_EXPORT(cuFuncGetParamInfo)
{
    proxy_obj *f = fn_of(func);
    return f ? param_info(f, paramIndex, paramOffset, paramSize) : SHIM_LOCAL(cuFuncGetParamInfo);
}

SHIM_EXPORT(cuKernelGetName)
{
    proxy_obj *f = fn_of(hfunc);
    if (!f)
        return SHIM_LOCAL(cuKernelGetName);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    *name = f->u.fn.name;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuFuncGetName)
{
    proxy_obj *f = fn_of(hfunc);
    if (!f)
        return SHIM_LOCAL(cuFuncGetName);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    *name = f->u.fn.name;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuFuncGetModule)
{
    proxy_obj *f = fn_of(hfunc);
    if (!f)
        return SHIM_LOCAL(cuFuncGetModule);
    if (!hmod)
        return CUDA_ERROR_INVALID_VALUE;
    *hmod = (CUmodule)f->u.fn.module;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuFuncGetAttribute)
{
    proxy_obj *f = fn_of(hfunc);
    if (!f)
        return SHIM_LOCAL(cuFuncGetAttribute);
    int dev = fn_device(f);
    if (dev < 0)
        return f->u.fn.local ? shim_local_driver()->fn_cuFuncGetAttribute(pi, attrib, (CUfunction)f->u.fn.local)
                             : CUDA_ERROR_INVALID_CONTEXT;
    return fn_attribute(f, dev, pi, attrib);
}

SHIM_EXPORT(cuFuncSetAttribute)
{
    proxy_obj *f = fn_of(hfunc);
    if (!f)
        return SHIM_LOCAL(cuFuncSetAttribute);
    int dev = fn_device(f);
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return fn_set_attribute(f, dev, attrib, value);
}

SHIM_EXPORT(cuFuncSetCacheConfig)
{
    proxy_obj *f = fn_of(hfunc);
    (void)config;
    return f ? CUDA_SUCCESS : SHIM_LOCAL(cuFuncSetCacheConfig);
}

SHIM_EXPORT(cuFuncIsLoaded)
{
    proxy_obj *f = fn_of(hfunc);
    if (!f)
        return SHIM_LOCAL(cuFuncIsLoaded);
    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    *state = CU_FUNCTION_LOADING_STATE_LOADED;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuFuncLoad)
{
    proxy_obj *f = fn_of(hfunc);
    if (!f)
        return SHIM_LOCAL(cuFuncLoad);
    int dev = fn_device(f);
    return dev < 0 ? CUDA_SUCCESS : shim_function_ready(f, dev);
}

/* ---- occupancy, from the function's attributes and the device's ---- */

static int active_blocks(proxy_obj *f, int device, int block, size_t dyn)
{
    shim_device *d = shim_device_at(device);
    int per_sm_threads = d->attrs[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR];
    int per_sm_blocks = d->attrs[CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR];
    size_t per_sm_shared = (size_t)d->attrs[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR];
    int max_block = f->u.fn.attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
    if (block <= 0 || block > max_block || per_sm_threads <= 0)
        return 0;
    /* 64-bit: the agent's figures may be any int. */
    int64_t warps = ((int64_t)block + 31) / 32 * 32;
    int64_t n = per_sm_threads / warps;
    if (per_sm_blocks > 0 && n > per_sm_blocks)
        n = per_sm_blocks;
    size_t shared = (size_t)(uint32_t)f->u.fn.attrs[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] + dyn;
    if (shared > 0 && per_sm_shared > 0 && (size_t)n > per_sm_shared / shared)
        n = (int64_t)(per_sm_shared / shared);
    return (int)n;
}

static CUresult occupancy(int *num, proxy_obj *f, int block, size_t dyn)
{
    int dev = fn_device(f);
    if (!num || dev < 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = shim_function_ready(f, dev);
    if (rc)
        return rc;
    *num = active_blocks(f, dev, block, dyn);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuOccupancyMaxActiveBlocksPerMultiprocessor)
{
    proxy_obj *f = fn_of(func);
    return f ? occupancy(numBlocks, f, blockSize, dynamicSMemSize)
             : SHIM_LOCAL(cuOccupancyMaxActiveBlocksPerMultiprocessor);
}

SHIM_EXPORT(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
{
    proxy_obj *f = fn_of(func);
    (void)flags;
    return f ? occupancy(numBlocks, f, blockSize, dynamicSMemSize)
             : SHIM_LOCAL(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
}

static CUresult potential(int *min_grid, int *block_out, proxy_obj *f, CUoccupancyB2DSize dyn_of, size_t dyn,
                          int limit)
{
    int dev = fn_device(f);
    if (!min_grid || !block_out || dev < 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = shim_function_ready(f, dev);
    if (rc)
        return rc;
    int max_block = f->u.fn.attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
    if (limit > 0 && limit < max_block)
        max_block = limit;
    /* No GPU has bigger blocks; an agent's larger figure must not make
     * this loop run for seconds. */
    if (max_block > 65536)
        max_block = 65536;
    /* 64-bit products, clamped: the agent's figures may be any int. */
    int best_block = 0, best_n = 0;
    int64_t best_threads = -1;
    for (int b = max_block / 32 * 32; b >= 32; b -= 32) {
        int n = active_blocks(f, dev, b, dyn_of ? dyn_of(b) : dyn);
        if ((int64_t)n * b > best_threads) {
            best_threads = (int64_t)n * b;
            best_block = b;
            best_n = n;
        }
    }
    *block_out = best_block;
    int64_t grid = (int64_t)best_n * shim_device_at(dev)->attrs[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT];
    *min_grid = grid > INT32_MAX ? INT32_MAX : grid < 0 ? 0 : (int)grid;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuOccupancyMaxPotentialBlockSize)
{
    proxy_obj *f = fn_of(func);
    return f ? potential(minGridSize, blockSize, f, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit)
             : SHIM_LOCAL(cuOccupancyMaxPotentialBlockSize);
}

SHIM_EXPORT(cuOccupancyMaxPotentialBlockSizeWithFlags)
{
    proxy_obj *f = fn_of(func);
    (void)flags;
    return f ? potential(minGridSize, blockSize, f, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit)
             : SHIM_LOCAL(cuOccupancyMaxPotentialBlockSizeWithFlags);
}

SHIM_EXPORT(cuOccupancyAvailableDynamicSMemPerBlock)
{
    proxy_obj *f = fn_of(func);
    if (!f)
        return SHIM_LOCAL(cuOccupancyAvailableDynamicSMemPerBlock);
    int dev = fn_device(f);
    if (!dynamicSmemSize || dev < 0 || numBlocks <= 0 || blockSize <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = shim_function_ready(f, dev);
    if (rc)
        return rc;
    shim_device *d = shim_device_at(dev);
    size_t per_sm = (size_t)d->attrs[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR];
    size_t per_block = (size_t)d->attrs[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN];
    size_t avail = per_sm / (size_t)numBlocks;
    if (per_block && avail > per_block)
        avail = per_block;
    size_t stat = (size_t)f->u.fn.attrs[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES];
    *dynamicSmemSize = avail > stat ? avail - stat : 0;
    return CUDA_SUCCESS;
}

/* Cluster occupancy is the agent's driver's to answer (it knows its GPU's
 * clusters). Request: u32 op, u64 function, u32 device, u32 grid[3],
 * u32 block[3], u32 shared, u32 cluster[3] (0 0 0: none given) -> i32. */
static CUresult cluster_query(uint32_t op, int *out, proxy_obj *f, const CUlaunchConfig *config)
{
    if (!out || !config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    int dev = fn_device(f);
    proxy_obj *s;
    CUresult rc;
    if (config->hStream && shim_stream(config->hStream, false, &s, &rc) > 0)
        dev = s->device;
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = shim_function_ready(f, dev)))
        return rc;
    uint32_t cluster[3] = { 0, 0, 0 };
    for (unsigned i = 0; i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            cluster[0] = config->attrs[i].value.clusterDim.x;
            cluster[1] = config->attrs[i].value.clusterDim.y;
            cluster[2] = config->attrs[i].value.clusterDim.z;
        }
    shim_device *d = shim_device_at(dev);
    uint8_t body[4 + rec_cluster_occupancy_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, op);
    rec_cluster_occupancy_put(&w, &(rec_cluster_occupancy){
        .function = f->id, .device = (uint32_t)d->remote_ordinal,
        .grid = { config->gridDimX, config->gridDimY, config->gridDimZ },
        .block = { config->blockDimX, config->blockDimY, config->blockDimZ },
        .shared = config->sharedMemBytes, .cluster = { cluster[0], cluster[1], cluster[2] } });
    struct iovec iov = { body, w.off };
    frame fr;
    const uint8_t *o;
    size_t n;
    rc = link_request(d->link, &iov, 1, &fr, &o, &n);
    if (rc == CUDA_SUCCESS && n == 4)
        *out = (int)wire_load_u32(o);
    else if (rc == CUDA_SUCCESS)
        rc = link_malformed(d->link, "an answer to a cluster occupancy request of %zu bytes, not 4", n);
    frame_release(&fr);
    return rc;
}

SHIM_EXPORT(cuOccupancyMaxActiveClusters)
{
    proxy_obj *f = fn_of(func);
    return f ? cluster_query(CUDA_OP_cuOccupancyMaxActiveClusters, numClusters, f, config)
             : SHIM_LOCAL(cuOccupancyMaxActiveClusters);
}

SHIM_EXPORT(cuOccupancyMaxPotentialClusterSize)
{
    proxy_obj *f = fn_of(func);
    return f ? cluster_query(CUDA_OP_cuOccupancyMaxPotentialClusterSize, clusterSize, f, config)
             : SHIM_LOCAL(cuOccupancyMaxPotentialClusterSize);
}

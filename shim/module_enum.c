/* Modules and libraries as collections on proxies: their kernels counted
 * and enumerated by name from the agent's driver (handles made here as
 * cuModuleGetFunction and cuLibraryGetKernel make them), a library's
 * kernel's library, a library read from the program's file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/exports.h"
#include "shim/image.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/module.h"
#include "shim/proxy.h"


/* The device whose agent answers for m: a module's own; for a library, the
 * current proxy context's, else the first proxy device. */
static int answering_device(const proxy_obj *m)
{
    if (m->device >= 0)
        return m->device;
    proxy_obj *ctx = shim_proxy_current();
    if (ctx)
        return ctx->device;
    for (int i = 0; i < shim_device_count(); i++)
        if (shim_device_at(i)->proxy)
            return i;
    return -1;
}

/* The names of m's kernels, in the agent's driver's order: *names points
 * into *frame_out (released by the caller) as count views of *lens bytes. */
static CUresult kernel_names(proxy_obj *m, unsigned *count, const uint8_t ***names, size_t **lens, frame *fr)
{
    int device = answering_device(m);
    shim_device *d = shim_device_at(device);
    if (!d || !d->proxy)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = shim_module_ready(m, device);
    if (rc)
        return rc;
    uint8_t body[4 + rec_enumerate_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, m->u.module.library ? CUDA_OP_cuLibraryEnumerateKernels : CUDA_OP_cuModuleEnumerateFunctions);
    rec_enumerate_put(&w, &(rec_enumerate){ .module = m->id });
    struct iovec iov = { body, w.off };
    const uint8_t *o;
    size_t n;
    rc = link_request(d->link, &iov, 1, fr, &o, &n);
    if (rc) {
        frame_release(fr);
        return rc;
    }
    wire_reader r = wire_reader_init(o, n);
    uint32_t c = wire_get_u32(&r);
    if (r.err || c > JOB_ENUMERATE_MAX) {
        frame_release(fr);
        return link_malformed(d->link, "a list of %u kernel names", c);
    }
    *names = calloc(c ? c : 1, sizeof **names);
    *lens = calloc(c ? c : 1, sizeof **lens);
    if (!*names || !*lens) {
        free(*names);
        free(*lens);
        frame_release(fr);
        return shim_nomem("a list of %u kernel names", c);
    }
    for (uint32_t i = 0; i < c && !r.err; i++)
        (*lens)[i] = wire_get_string(&r, &(*names)[i], JOB_NAME_MAX);
    if (wire_reader_finish(&r)) {
        free(*names);
        free(*lens);
        frame_release(fr);
        return link_malformed(d->link, "a list of kernel names of %zu bytes that does not parse", n);
    }
    *count = c;
    return CUDA_SUCCESS;
}

static CUresult kernel_count(proxy_obj *m, unsigned *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    const uint8_t **names;
    size_t *lens;
    frame fr;
    CUresult rc = kernel_names(m, count, &names, &lens, &fr);
    if (rc == CUDA_SUCCESS) {
        free(names);
        free(lens);
        frame_release(&fr);
    }
    return rc;
}

/* Up to max handles of m's kernels, each made as a lookup by name makes it. */
static CUresult enumerate(proxy_obj *m, void **out, unsigned max)
{
    if (!out && max)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned count;
    const uint8_t **names;
    size_t *lens;
    frame fr;
    CUresult rc = kernel_names(m, &count, &names, &lens, &fr);
    if (rc)
        return rc;
    for (unsigned i = 0; i < count && i < max && rc == CUDA_SUCCESS; i++) {
        char name[JOB_NAME_MAX + 1];
        memcpy(name, names[i], lens[i]);
        name[lens[i]] = 0;
        rc = m->u.module.library ? shim_export_cuLibraryGetKernel((CUkernel *)&out[i], (CUlibrary)m, name)
                                 : shim_export_cuModuleGetFunction((CUfunction *)&out[i], (CUmodule)m, name);
    }
    free(names);
    free(lens);
    frame_release(&fr);
    return rc;
}

/* A library also loaded by the local driver answers there while a local
 * context is current. */
static bool library_local(const proxy_obj *m)
{
    return m->u.module.local && !shim_current_is_proxy();
}

SHIM_EXPORT(cuModuleGetFunctionCount)
{
    /* A library's kernel's module (cuFuncGetModule) is the library here. */
    proxy_obj *m = arena_get(hmod, PROXY_MODULE);
    return m ? kernel_count(m, count) : SHIM_LOCAL(cuModuleGetFunctionCount);
}

SHIM_EXPORT(cuModuleEnumerateFunctions)
{
    proxy_obj *m = arena_get(mod, PROXY_MODULE);
    return m ? enumerate(m, (void **)functions, numFunctions) : SHIM_LOCAL(cuModuleEnumerateFunctions);
}

SHIM_EXPORT(cuLibraryGetKernelCount)
{
    proxy_obj *m = arena_get(lib, PROXY_MODULE);
    if (!m || !m->u.module.library)
        return m ? CUDA_ERROR_INVALID_HANDLE : SHIM_LOCAL(cuLibraryGetKernelCount);
    if (library_local(m))
        return shim_local_driver()->fn_cuLibraryGetKernelCount(count, (CUlibrary)m->u.module.local);
    return kernel_count(m, count);
}

SHIM_EXPORT(cuLibraryEnumerateKernels)
{
    proxy_obj *m = arena_get(lib, PROXY_MODULE);
    if (!m || !m->u.module.library)
        return m ? CUDA_ERROR_INVALID_HANDLE : SHIM_LOCAL(cuLibraryEnumerateKernels);
    return enumerate(m, (void **)kernels, numKernels);
}

SHIM_EXPORT(cuKernelGetLibrary)
{
    proxy_obj *f = arena_get(kernel, PROXY_FUNCTION);
    if (!f)
        return SHIM_LOCAL(cuKernelGetLibrary);
    if (!pLib)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f->u.fn.module->u.module.library)
        return CUDA_ERROR_INVALID_HANDLE;   /* a module's function is no kernel */
    *pLib = (CUlibrary)f->u.fn.module;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuLibraryLoadFromFile)
{
    if (!shim_has_proxies())
        return SHIM_LOCAL(cuLibraryLoadFromFile);
    if (!library || !fileName)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t *buf;
    size_t len;
    if (image_read_file(fileName, &buf, &len) < 0) {
        int e = errno;
        shim_log(SHIM_LOG_ERROR, "cuLibraryLoadFromFile: %s: %s", fileName, strerror(e));
        return e == ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : e == EFBIG ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_FILE_NOT_FOUND;
    }
    CUresult rc = shim_export_cuLibraryLoadData(library, buf, jitOptions, jitOptionsValues, numJitOptions,
                                                libraryOptions, libraryOptionValues, numLibraryOptions);
    free(buf);
    return rc;
}

/* The kernels of a job's module or library, by name, in the driver's order
 * (cuModuleEnumerateFunctions, cuLibraryEnumerateKernels on proxies). The
 * shim makes its own handles from the names.
 *   request  u32 op, then proto/records.def's enumerate (u64 module or library id)
 *   answer   u32 count, count x string name */
#include <stdlib.h>
#include <string.h>

#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/wire.h"


void replay_enumerate(job *j, uint32_t op, wire_reader *r)
{
    bool library = op == CUDA_OP_cuLibraryEnumerateKernels;
    rec_enumerate v;
    rig_why why;
    if (rec_enumerate_get(r, &v, &why)) {
        job_refuse(j, "malformed %s", why.text);
        return;
    }
    agent_obj *m = objects_get(&j->objs, v.module, library ? AOBJ_LIBRARY : AOBJ_MODULE);
    if (!m) {
        job_refuse(j, "an enumeration of %s %llu, which this job does not hold", library ? "library" : "module",
                   (unsigned long long)v.module);
        return;
    }
    const cuda_driver *d = &j->b->drv;
    if (library ? !d->fn_cuLibraryGetKernelCount || !d->fn_cuLibraryEnumerateKernels || !d->fn_cuKernelGetName
                : !d->fn_cuModuleGetFunctionCount || !d->fn_cuModuleEnumerateFunctions || !d->fn_cuFuncGetName) {
        job_answer(j, CUDA_ERROR_NOT_SUPPORTED, NULL, 0);   /* a driver before CUDA 12.4 */
        return;
    }
    unsigned count = 0;
    CUresult rc = job_use_device(j, m->device >= 0 ? m->device : 0);
    if (rc == CUDA_SUCCESS)
        rc = library ? d->fn_cuLibraryGetKernelCount(&count, m->u.library.real)
                     : d->fn_cuModuleGetFunctionCount(&count, m->u.module.real);
    /* The driver's own count: too many is an answer, not the controller's fault. */
    if (rc == CUDA_SUCCESS && count > JOB_ENUMERATE_MAX)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    void **handles = rc == CUDA_SUCCESS ? calloc(count ? count : 1, sizeof *handles) : NULL;
    if (rc == CUDA_SUCCESS && !handles) {
        job_log_nomem(j, "the %u handles of an enumeration", count);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        rc = library ? d->fn_cuLibraryEnumerateKernels((CUkernel *)handles, count, m->u.library.real)
                     : d->fn_cuModuleEnumerateFunctions((CUfunction *)handles, count, m->u.module.real);
    const char **names = rc == CUDA_SUCCESS ? calloc(count ? count : 1, sizeof *names) : NULL;
    if (rc == CUDA_SUCCESS && !names) {
        job_log_nomem(j, "the %u names of an enumeration", count);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t bytes = 4;
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < count; i++) {
        rc = library ? d->fn_cuKernelGetName(&names[i], (CUkernel)handles[i])
                     : d->fn_cuFuncGetName(&names[i], (CUfunction)handles[i]);
        if (rc == CUDA_SUCCESS && (!names[i] || strlen(names[i]) > JOB_NAME_MAX))
            rc = CUDA_ERROR_INVALID_VALUE;
        if (rc == CUDA_SUCCESS)
            bytes += 4 + strlen(names[i]);
    }
    uint8_t *out = rc == CUDA_SUCCESS ? malloc(bytes) : NULL;
    if (rc == CUDA_SUCCESS && !out) {
        job_log_nomem(j, "the answer to an enumeration (%zu bytes)", bytes);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t n = 0;
    if (rc == CUDA_SUCCESS) {
        wire_writer w = wire_writer_init(out, bytes);
        wire_put_u32(&w, count);
        for (unsigned i = 0; i < count; i++)
            wire_put_string(&w, names[i], strlen(names[i]));
        n = w.off;
    }
    job_answer(j, rc, out, n);
    free(out);
    free(names);
    free(handles);
}

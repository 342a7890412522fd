/* Copies between the socket and device memory in place. softgpu's device
 * memory is host memory at the device address, so on an idle stream a
 * copy's bytes can be received into, or sent from, the device memory
 * itself, the way GPUDirect RDMA lets a NIC reach a GPU's memory: the pass
 * through a staging buffer (a CPU memcpy on softgpu, where a GPU's copy
 * engine costs the CPU nothing) is spared. A GPU driver's memory is never
 * touched this way. */
#include "agent/job.h"

void *job_device_bytes(job *j, int device, CUdeviceptr p, uint64_t len)
{
    const cuda_driver *d = &j->b->drv;
    if (!j->b->host_memory || !len || p + len < p)
        return NULL;
    /* Only device memory the table holds whole: an address the controller
     * names anywhere else (the agent's own memory) goes through the
     * driver's checked copy. */
    unsigned type = 0;
    CUdeviceptr base = 0;
    size_t size = 0;
    if (d->fn_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS ||
        type != CU_MEMORYTYPE_DEVICE || d->fn_cuMemGetAddressRange_v2(&base, &size, p) != CUDA_SUCCESS ||
        p < base || p + len > base + size)
        return NULL;
    /* A mapping the stream's device may not touch: the driver's copy
     * reports that, so it is left to it. */
    CUmemLocation where = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device };
    unsigned long long access = 0;
    if (d->fn_cuMemGetAccess(&access, &where, p) == CUDA_SUCCESS && access == CU_MEM_ACCESS_FLAGS_PROT_NONE)
        return NULL;
    return (void *)(uintptr_t)p;
}

bool job_stream_idle(job *j, agent_obj *s)
{
    const cuda_driver *d = &j->b->drv;
    CUstream rs = job_real_stream(s);
    unsigned flags = 0;
    if (job_use_device(j, s->device) != CUDA_SUCCESS || d->fn_cuStreamQuery(rs) != CUDA_SUCCESS)
        return false;
    /* A query says what the stream itself has left; a copy enqueued on a
     * blocking stream would also wait for the NULL stream's work (cuBLAS
     * launches there while a per-thread-stream program copies). The NULL
     * stream's own query covers every blocking stream. */
    if (!rs || (d->fn_cuStreamGetFlags(rs, &flags) == CUDA_SUCCESS && (flags & CU_STREAM_NON_BLOCKING)))
        return true;
    return d->fn_cuStreamQuery(NULL) == CUDA_SUCCESS;
}

/* Requests: each is replayed at once on the job thread and answered
 * (u8 0, u32 CUresult, outputs), or refused (u8 1, why) when malformed. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/generic.h"
#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"

/* Sends an answer: u8 0, u32 result, outputs. */
void job_answer(job *j, CUresult result, const void *out, size_t n)
{
    uint8_t head[5];
    head[0] = 0;
    wire_store_u32(head + 1, (uint32_t)result);
    struct iovec iov[2] = { { head, 5 }, { (void *)out, n } };
    job_send(j, FRAME_ANSWER, iov, n ? 2 : 1);
}

/* Memory for one request's work was short: one line naming what, so the
 * agent's log says why the program saw CUDA_ERROR_OUT_OF_MEMORY. */
void job_log_nomem(job *j, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    agent_log("agent %u of a job: no memory for %s", j->index, what);
}

const char *job_put_failure(void)
{
    return errno == ENOMEM ? "cannot be recorded: the agent is out of memory" : "is taken or out of range";
}

/* A protocol refusal: the controller fails the job with this reason. */
void job_refuse(job *j, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    uint8_t buf[520];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u8(&w, 1);
    wire_put_string(&w, why, strlen(why));
    struct iovec iov = { buf, w.off };
    job_send(j, FRAME_ANSWER, &iov, 1);
}

static void open_job(job *j, wire_reader *r)
{
    uint32_t index = wire_get_u32(r);
    uint64_t base = wire_get_u64(r), size = wire_get_u64(r);
    if (wire_reader_finish(r) || size == 0 || index != j->index) {
        job_refuse(j, "malformed open request");
        return;
    }
    if (j->win.reserved)
        window_release(&j->win, j->b);
    if (!window_reserve(&j->win, j->b, base, size)) {
        uint8_t no = 0;
        job_answer(j, CUDA_SUCCESS, &no, 1);
        return;
    }
    size_t cap = 1 << 16;
    uint8_t *out = malloc(cap);
    if (!out) {
        job_refuse(j, "agent: no memory for the answer to an open request (%zu bytes)", cap);
        return;
    }
    wire_writer w = wire_writer_init(out, cap);
    wire_put_u8(&w, 1);
    int version = 0;
    j->b->drv.fn_cuDriverGetVersion(&version);
    wire_put_u32(&w, (uint32_t)version);
    wire_put_string(&w, j->b->kind, strlen(j->b->kind));
    wire_put_u32(&w, (uint32_t)j->b->device_count);
    for (int d = 0; d < j->b->device_count; d++) {
        char name[256] = "";
        j->b->drv.fn_cuDeviceGetName(name, sizeof name, d);
        wire_put_string(&w, name, strlen(name));
        CUuuid u = { { 0 } };
        if (j->b->drv.fn_cuDeviceGetUuid_v2)
            j->b->drv.fn_cuDeviceGetUuid_v2(&u, d);
        wire_put_bytes(&w, u.bytes, 16);
        size_t mem = 0;
        j->b->drv.fn_cuDeviceTotalMem_v2(&mem, d);
        wire_put_u64(&w, mem);
        uint32_t n = CU_DEVICE_ATTRIBUTE_MAX - 1;
        wire_put_u32(&w, n);
        for (uint32_t a = 1; a <= n; a++) {
            int v = 0;
            if (j->b->drv.fn_cuDeviceGetAttribute(&v, (CUdevice_attribute)a, d) != CUDA_SUCCESS)
                v = 0;
            wire_put_u32(&w, (uint32_t)v);
        }
    }
    if (w.err)
        job_refuse(j, "the device list does not fit an answer");
    else
        job_answer(j, CUDA_SUCCESS, out, w.off);
    free(out);
}

/* The function of fn on device, looked up once per device. */
CUresult job_function_on(job *j, agent_obj *fn, int device, CUfunction *out)
{
    if (device < 0 || device >= AGENT_DEVICES_MAX)
        return CUDA_ERROR_INVALID_DEVICE;
    if (fn->u.fn.per_device[device]) {
        *out = fn->u.fn.per_device[device];
        return CUDA_SUCCESS;
    }
    CUresult rc = job_use_device(j, device);
    if (rc)
        return rc;
    agent_obj *m = objects_get(&j->objs, fn->u.fn.module, 0);
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    if (m->type == AOBJ_LIBRARY)
        rc = j->b->drv.fn_cuKernelGetFunction(&fn->u.fn.per_device[device], fn->u.fn.kernel);
    else if (m->device != device)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else
        rc = j->b->drv.fn_cuModuleGetFunction(&fn->u.fn.per_device[device], m->u.module.real, fn->u.fn.name);
    if (rc == CUDA_SUCCESS)
        *out = fn->u.fn.per_device[device];
    return rc;
}

static void load_module(job *j, uint32_t op, wire_reader *r)
{
    uint64_t id = wire_get_u64(r);
    uint32_t device = wire_get_u32(r);
    size_t n = wire_remaining(r);
    const uint8_t *image = wire_get_view(r, n);
    if (r->err || n == 0) {
        job_refuse(j, "malformed module load");
        return;
    }
    /* PTX text must end in a NUL the frame does not promise. */
    uint8_t *copy = malloc(n + 1);
    if (!copy) {
        job_log_nomem(j, "a copy of module %llu (%zu bytes)", (unsigned long long)id, n + 1);
        job_answer(j, CUDA_ERROR_OUT_OF_MEMORY, NULL, 0);
        return;
    }
    memcpy(copy, image, n);
    copy[n] = 0;
    bool library = op == CUDA_OP_cuLibraryLoadData;
    CUresult rc = job_use_device(j, library ? (j->current >= 0 ? j->current : 0) : (int)device);
    agent_obj *o = NULL;
    char log[600] = "";
    if (rc == CUDA_SUCCESS) {
        o = objects_put(&j->objs, id, library ? AOBJ_LIBRARY : AOBJ_MODULE, (int)device);
        if (!o) {
            const char *failure = job_put_failure();
            free(copy);
            job_fail(j, "a module load names object %llu, which %s", (unsigned long long)id, failure);
            job_refuse(j, "object %llu %s", (unsigned long long)id, failure);
            return;
        }
        /* The driver's own reason for a refusal (softgpu's names the kernel,
         * instruction and PTX line; a GPU driver's is its JIT's error log). */
        CUjit_option opts[2] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
        void *vals[2] = { log, (void *)(uintptr_t)sizeof log };
        if (library)
            rc = j->b->drv.fn_cuLibraryLoadData(&o->u.library.real, copy, opts, vals, 2, NULL, NULL, 0);
        else
            rc = j->b->drv.fn_cuModuleLoadDataEx(&o->u.module.real, copy, 2, opts, vals);
        if (rc)
            objects_remove(&j->objs, id);
    }
    free(copy);
    if (rc == CUDA_ERROR_NOT_SUPPORTED || rc == CUDA_ERROR_NO_BINARY_FOR_GPU || rc == CUDA_ERROR_INVALID_PTX ||
        rc == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || rc == CUDA_ERROR_INVALID_IMAGE) {
        /* The reason the program will see in its log: the driver's error
         * log when it wrote one, else what the result code means. */
        char why[900];
        log[sizeof log - 1] = '\0';
        size_t ln = strlen(log);
        while (ln > 0 && (log[ln - 1] == '\n' || log[ln - 1] == ' '))
            log[--ln] = '\0';
        /* Without PTX (SASS only) softgpu has nothing to try: say why. */
        const char *hint = strcmp(j->b->kind, "softgpu") == 0 && rc != CUDA_ERROR_NOT_SUPPORTED &&
                                   rc != CUDA_ERROR_INVALID_PTX
                               ? " (softgpu runs PTX up to its ISA, not SASS)"
                               : "";
        int n = ln ? snprintf(why, sizeof why, "the agent's driver (%s) cannot load this module: %s%s", j->b->kind,
                              log, hint)
                   : snprintf(why, sizeof why, "the agent's driver (%s) has no code it can run in this module%s",
                              j->b->kind, strcmp(j->b->kind, "softgpu") == 0 ? " (softgpu runs PTX up to its ISA, not SASS)" : "");
        uint8_t out[920];
        wire_writer w = wire_writer_init(out, sizeof out);
        wire_put_string(&w, why, (size_t)n < sizeof why ? (size_t)n : sizeof why - 1);
        job_answer(j, rc, out, w.off);
        return;
    }
    job_answer(j, rc, NULL, 0);
}

/* The driver log's last line since it (trimmed) in why, or "" when none. */
static void driver_reason(const cuda_driver *d, CUlogIterator since, char *why, size_t len)
{
    char buf[4096];
    size_t n = sizeof buf;
    why[0] = '\0';
    if (d->fn_cuLogsDumpToMemory(&since, buf, &n, 0) != CUDA_SUCCESS || n == 0 || n >= sizeof buf)
        return;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    const char *last = strrchr(buf, '\n');
    last = last ? last + 1 : buf;
    snprintf(why, len, "the agent's driver logged: ");
    size_t at = strlen(why), keep = strnlen(last, len - 1 - at);   /* cut to fit, as the shim takes it */
    memcpy(why + at, last, keep);
    why[at + keep] = '\0';
}

static void get_function(job *j, uint32_t op, wire_reader *r)
{
    uint64_t mid = wire_get_u64(r), fid = wire_get_u64(r);
    uint32_t len = wire_get_u32(r);
    const uint8_t *name = len <= JOB_NAME_MAX ? wire_get_view(r, len) : NULL;
    if (wire_reader_finish(r) || !name) {
        job_refuse(j, "malformed function request");
        return;
    }
    agent_obj *m = objects_get(&j->objs, mid, op == CUDA_OP_cuLibraryGetKernel ? AOBJ_LIBRARY : AOBJ_MODULE);
    if (!m) {
        job_fail(j, "a function request names module %llu, which this job does not hold", (unsigned long long)mid);
        job_refuse(j, "no module %llu", (unsigned long long)mid);
        return;
    }
    char *cname = strndup((const char *)name, len);
    if (!cname) {
        job_fail(j, "agent: no memory for the name of function %llu", (unsigned long long)fid);
        job_refuse(j, "agent: no memory for the name of function %llu", (unsigned long long)fid);
        return;
    }
    agent_obj *f = objects_put(&j->objs, fid, AOBJ_FUNCTION, m->device);
    if (!f) {
        const char *failure = job_put_failure();
        free(cname);
        job_fail(j, "a function request names object %llu, which %s", (unsigned long long)fid, failure);
        job_refuse(j, "object %llu %s", (unsigned long long)fid, failure);
        return;
    }
    f->u.fn.module = mid;
    f->u.fn.name = cname;
    CUresult rc = CUDA_SUCCESS;
    int device = m->type == AOBJ_MODULE ? m->device : (j->current >= 0 ? j->current : 0);
    /* Where the driver keeps a log (CUDA 12.9; softgpu's names a kernel it
     * cannot run, the instruction and the PTX line), a refusal carries its
     * last line since here: the program's log shows the driver's reason. */
    const cuda_driver *d = &j->b->drv;
    CUlogIterator since = 0;
    bool logged = d->fn_cuLogsCurrent && d->fn_cuLogsDumpToMemory && d->fn_cuLogsCurrent(&since, 0) == CUDA_SUCCESS;
    if (m->type == AOBJ_LIBRARY)
        rc = d->fn_cuLibraryGetKernel(&f->u.fn.kernel, m->u.library.real, cname);
    CUfunction fn = NULL;
    if (rc == CUDA_SUCCESS)
        rc = job_function_on(j, f, device, &fn);
    if (rc) {
        objects_remove(&j->objs, fid);
        char why[1024] = "";   /* the shim takes reasons of up to 1024 bytes */
        if (rc == CUDA_ERROR_NOT_SUPPORTED && logged)
            driver_reason(d, since, why, sizeof why);
        uint8_t out[sizeof why + 8];
        wire_writer w = wire_writer_init(out, sizeof out);
        if (why[0])
            wire_put_string(&w, why, strlen(why));
        job_answer(j, rc, why[0] ? out : NULL, why[0] ? w.off : 0);
        return;
    }
    uint8_t out[8 + 8 * 1024 + 4 + 4 * 64];
    wire_writer w = wire_writer_init(out, sizeof out);
    uint8_t *count_at = out;
    wire_put_u32(&w, 0);
    uint32_t n = 0;
    for (; n < 1024; n++) {
        size_t off, size;
        if (j->b->drv.fn_cuFuncGetParamInfo(fn, n, &off, &size) != CUDA_SUCCESS)
            break;
        wire_put_u32(&w, (uint32_t)off);
        wire_put_u32(&w, (uint32_t)size);
    }
    wire_store_u32(count_at, n);
    uint32_t na = CU_FUNC_ATTRIBUTE_MAX;
    wire_put_u32(&w, na);
    for (uint32_t a = 0; a < na; a++) {
        int v = 0;
        if (j->b->drv.fn_cuFuncGetAttribute(&v, (CUfunction_attribute)a, fn) != CUDA_SUCCESS)
            v = 0;
        wire_put_u32(&w, (uint32_t)v);
    }
    job_answer(j, CUDA_SUCCESS, out, w.off);
}

static void get_global(job *j, uint32_t op, wire_reader *r)
{
    uint64_t mid = wire_get_u64(r);
    uint32_t device = wire_get_u32(r), len = wire_get_u32(r);
    const uint8_t *name = len <= JOB_NAME_MAX ? wire_get_view(r, len) : NULL;
    if (wire_reader_finish(r) || !name) {
        job_refuse(j, "malformed global request");
        return;
    }
    bool library = op == CUDA_OP_cuLibraryGetGlobal;
    agent_obj *m = objects_get(&j->objs, mid, library ? AOBJ_LIBRARY : AOBJ_MODULE);
    if (!m) {
        job_fail(j, "a global request names module %llu, which this job does not hold", (unsigned long long)mid);
        job_refuse(j, "no module %llu", (unsigned long long)mid);
        return;
    }
    char *cname = strndup((const char *)name, len);
    CUdeviceptr p = 0;
    size_t size = 0;
    CUresult rc = cname ? job_use_device(j, (int)device) : CUDA_ERROR_OUT_OF_MEMORY;
    if (!cname)
        job_log_nomem(j, "the name of a global of module %llu", (unsigned long long)mid);
    if (rc == CUDA_SUCCESS)
        rc = library ? j->b->drv.fn_cuLibraryGetGlobal(&p, &size, m->u.library.real, cname)
                     : j->b->drv.fn_cuModuleGetGlobal_v2(&p, &size, m->u.module.real, cname);
    free(cname);
    uint8_t out[16];
    wire_store_u64(out, p);
    wire_store_u64(out + 8, size);
    job_answer(j, rc, rc ? NULL : out, rc ? 0 : 16);
}


/* The program's own virtual memory calls, inside its window. */
static void replay_vmm(job *j, uint32_t op, wire_reader *r)
{
    const cuda_driver *d = &j->b->drv;
    CUresult rc = CUDA_SUCCESS;
    uint64_t out = 0;
    bool has_out = false;
    switch (op) {
    case CUDA_OP_cuMemGetAllocationGranularity: {
        uint32_t device = wire_get_u32(r), option = wire_get_u32(r);
        if (wire_reader_finish(r) || device >= (uint32_t)j->b->device_count)
            goto malformed;
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)device } };
        size_t g = 0;
        rc = d->fn_cuMemGetAllocationGranularity(&g, &prop, (CUmemAllocationGranularity_flags)option);
        /* Ranges in the window are cut at the agent's own granularity. */
        if (rc == CUDA_SUCCESS && g < j->b->granularity)
            g = j->b->granularity;
        out = g;
        has_out = true;
        break;
    }
    case CUDA_OP_cuMemAddressReserve: {
        uint64_t size = wire_get_u64(r), align = wire_get_u64(r), hint = wire_get_u64(r);
        if (wire_reader_finish(r))
            goto malformed;
        CUdeviceptr p = 0;
        rc = window_take_range(&j->win, j->b, size, align, hint, &p);
        out = p;
        has_out = true;
        break;
    }
    case CUDA_OP_cuMemAddressFree: {
        uint64_t p = wire_get_u64(r), size = wire_get_u64(r);
        if (wire_reader_finish(r))
            goto malformed;
        rc = window_give_range(&j->win, p, size);
        break;
    }
    case CUDA_OP_cuMemCreate: {
        uint64_t id = wire_get_u64(r);
        uint32_t device = wire_get_u32(r);
        uint64_t size = wire_get_u64(r);
        if (wire_reader_finish(r) || device >= (uint32_t)j->b->device_count)
            goto malformed;
        agent_obj *o = objects_put(&j->objs, id, AOBJ_MEMORY, (int)device);
        if (!o) {
            const char *failure = job_put_failure();
            job_fail(j, "controller: memory object %llu %s", (unsigned long long)id, failure);
            job_refuse(j, "memory object %llu %s", (unsigned long long)id, failure);
            return;
        }
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)device } };
        rc = d->fn_cuMemCreate(&o->u.memory.real, size, &prop, 0);
        if (rc)
            objects_remove(&j->objs, id);
        break;
    }
    case CUDA_OP_cuMemRelease: {
        uint64_t id = wire_get_u64(r);
        agent_obj *o = objects_get(&j->objs, id, AOBJ_MEMORY);
        if (wire_reader_finish(r) || !o)
            goto malformed;
        rc = d->fn_cuMemRelease(o->u.memory.real);
        if (rc == CUDA_SUCCESS)
            objects_remove(&j->objs, id);
        break;
    }
    case CUDA_OP_cuMemMap: {
        uint64_t p = wire_get_u64(r), size = wire_get_u64(r), offset = wire_get_u64(r);
        agent_obj *o = objects_get(&j->objs, wire_get_u64(r), AOBJ_MEMORY);
        if (wire_reader_finish(r) || !o || offset != 0)
            goto malformed;
        rc = window_map(&j->win, j->b, p, size, o->u.memory.real);
        break;
    }
    case CUDA_OP_cuMemUnmap: {
        uint64_t p = wire_get_u64(r), size = wire_get_u64(r);
        if (wire_reader_finish(r))
            goto malformed;
        rc = window_unmap(&j->win, j->b, p, size);
        break;
    }
    case CUDA_OP_cuMemSetAccess: {
        uint64_t p = wire_get_u64(r), size = wire_get_u64(r);
        uint32_t count = wire_get_u32(r);
        CUmemAccessDesc desc[16];
        if (count == 0 || count > 16)
            goto malformed;
        for (uint32_t i = 0; i < count; i++) {
            uint32_t device = wire_get_u32(r), flags = wire_get_u32(r);
            if (device >= (uint32_t)j->b->device_count)
                goto malformed;
            desc[i] = (CUmemAccessDesc){ .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)device },
                                         .flags = (CUmemAccess_flags)flags };
        }
        if (wire_reader_finish(r))
            goto malformed;
        rc = d->fn_cuMemSetAccess(p, size, desc, count);
        break;
    }
    case CUDA_OP_cuMemGetAccess: {
        uint64_t p = wire_get_u64(r);
        uint32_t device = wire_get_u32(r);
        if (wire_reader_finish(r) || device >= (uint32_t)j->b->device_count)
            goto malformed;
        CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)device };
        unsigned long long flags = 0;
        rc = d->fn_cuMemGetAccess ? d->fn_cuMemGetAccess(&flags, &loc, p) : CUDA_ERROR_NOT_SUPPORTED;
        out = flags;
        has_out = true;
        break;
    }
    }
    {
        uint8_t buf[8];
        wire_store_u64(buf, out);
        job_answer(j, rc, rc || !has_out ? NULL : buf, rc || !has_out ? 0 : 8);
    }
    return;
malformed:
    job_refuse(j, "malformed or unknown-object %s request", job_op_name(op));
}

/* Peer access between two of this agent's devices (layouts in
 * proto/records.def): answered and enabled by the driver, on primary
 * contexts. */
static void replay_peer(job *j, uint32_t op, wire_reader *r)
{
    const cuda_driver *d = &j->b->drv;
    uint32_t attrib = 0, dev, peer, flags = 0;
    rig_why why;
    int bad;
    if (op == CUDA_OP_cuDeviceGetP2PAttribute) {
        rec_p2p_attribute v;
        bad = rec_p2p_attribute_get(r, &v, &why);
        attrib = v.attribute, dev = v.src, peer = v.dst;
    } else if (op == CUDA_OP_cuCtxEnablePeerAccess) {
        rec_peer_enable v;
        bad = rec_peer_enable_get(r, &v, &why);
        dev = v.device, peer = v.peer, flags = v.flags;
    } else {
        rec_peer_pair v;
        bad = rec_peer_pair_get(r, &v, &why);
        dev = v.device, peer = v.peer;
    }
    if (bad) {
        job_refuse(j, "malformed %s: %s", job_op_name(op), why.text);
        return;
    }
    if (dev >= (uint32_t)j->b->device_count || peer >= (uint32_t)j->b->device_count) {
        job_refuse(j, "%s between devices %u and %u of %d", job_op_name(op), dev, peer, j->b->device_count);
        return;
    }
    int v = 0;
    CUresult rc;
    switch (op) {
    case CUDA_OP_cuDeviceCanAccessPeer:
        rc = d->fn_cuDeviceCanAccessPeer(&v, (CUdevice)dev, (CUdevice)peer);
        break;
    case CUDA_OP_cuDeviceGetP2PAttribute:
        rc = d->fn_cuDeviceGetP2PAttribute(&v, (CUdevice_P2PAttribute)attrib, (CUdevice)dev, (CUdevice)peer);
        break;
    case CUDA_OP_cuCtxEnablePeerAccess:
        if ((rc = job_use_device(j, (int)dev)) == CUDA_SUCCESS)
            rc = d->fn_cuCtxEnablePeerAccess(j->b->primary[peer], flags);
        break;
    default:
        if ((rc = job_use_device(j, (int)dev)) == CUDA_SUCCESS)
            rc = d->fn_cuCtxDisablePeerAccess(j->b->primary[peer]);
        break;
    }
    bool has_out = op == CUDA_OP_cuDeviceCanAccessPeer || op == CUDA_OP_cuDeviceGetP2PAttribute;
    uint8_t out[4];
    wire_store_u32(out, (uint32_t)v);
    job_answer(j, rc, rc || !has_out ? NULL : out, rc || !has_out ? 0 : 4);
}

/* The generic path's view of this job's objects. */
static bool generic_handle(void *ctx, char kind, uint64_t id, int device, void **real)
{
    job *j = ctx;
    agent_obj *o;
    switch (kind) {
    case 'C':
        if (device < 0 || device >= j->b->device_count)
            return false;
        *real = j->b->primary[device];
        return true;
    case 'S':
        if (!(o = objects_get(&j->objs, id, AOBJ_STREAM)))
            return false;
        *real = job_real_stream(o);
        return true;
    case 'E':
        if (!(o = objects_get(&j->objs, id, AOBJ_EVENT)))
            return false;
        *real = o->u.event.real;
        return true;
    case 'F': {
        CUfunction f;
        if (!(o = objects_get(&j->objs, id, AOBJ_FUNCTION)) || job_function_on(j, o, device, &f) != CUDA_SUCCESS)
            return false;
        *real = f;
        return true;
    }
    case 'K':
        if (!(o = objects_get(&j->objs, id, AOBJ_FUNCTION)) || !o->u.fn.kernel)
            return false;
        *real = o->u.fn.kernel;
        return true;
    case 'M':
        if (!(o = objects_get(&j->objs, id, AOBJ_MODULE)))
            return false;
        *real = o->u.module.real;
        return true;
    case 'L':
        if (!(o = objects_get(&j->objs, id, AOBJ_LIBRARY)))
            return false;
        *real = o->u.library.real;
        return true;
    case 'T':
        if (!(o = texref_get(j, id, false)))
            return false;
        *real = o->u.texref.real;
        return true;
    }
    return false;
}

static void generic_use_device(void *ctx, int device)
{
    job_use_device(ctx, device);
}

void replay_request(job *j, const frame *f)
{
    wire_reader r = wire_reader_init(f->payload, f->len);
    uint32_t op = wire_get_u32(&r);
    if (r.err) {
        job_refuse(j, "malformed request");
        return;
    }
    switch (op) {
    case JOB_OP_OPEN:
        open_job(j, &r);
        return;
    case JOB_OP_LINK:
        replay_link(j, &r);
        return;
    case JOB_OP_GRAPH:
        replay_graph(j, &r);
        return;
    case JOB_OP_PEER_LISTEN:
        mesh_listen(j, &r);
        return;
    case JOB_OP_JOIN:
        mesh_join_request(j, r.p + r.off, r.len - r.off);
        return;
    case CUDA_OP_cuMemAlloc_v2: {
        uint32_t device = wire_get_u32(&r);
        uint64_t size = wire_get_u64(&r);
        if (wire_reader_finish(&r)) {
            job_refuse(j, "malformed allocation");
            return;
        }
        CUdeviceptr p = 0;
        CUresult rc = device < (uint32_t)j->b->device_count ? window_alloc(&j->win, j->b, (int)device, size, &p)
                                                             : CUDA_ERROR_INVALID_DEVICE;
        uint8_t out[8];
        wire_store_u64(out, p);
        job_answer(j, rc, rc ? NULL : out, rc ? 0 : 8);
        return;
    }
    case CUDA_OP_cuMemPoolCreate: {
        uint64_t id = wire_get_u64(&r);
        uint32_t device = wire_get_u32(&r);
        uint64_t max_size = wire_get_u64(&r);
        if (wire_reader_finish(&r)) {
            job_refuse(j, "malformed pool creation");
            return;
        }
        job_answer(j, pool_create(j, id, device < (uint32_t)j->b->device_count ? (int)device : -1, max_size), NULL, 0);
        return;
    }
    case CUDA_OP_cuMemAllocAsync: {
        uint64_t pool = wire_get_u64(&r), stream = wire_get_u64(&r), size = wire_get_u64(&r);
        if (wire_reader_finish(&r)) {
            job_refuse(j, "malformed pool allocation");
            return;
        }
        CUdeviceptr p = 0;
        CUresult rc = pool_alloc(j, pool, stream, size, &p);
        uint8_t out[8];
        wire_store_u64(out, p);
        job_answer(j, rc, rc ? NULL : out, rc ? 0 : 8);
        return;
    }
    case CUDA_OP_cuMemPoolGetAttribute:
    case CUDA_OP_cuMemPoolSetAttribute:
    case CUDA_OP_cuMemPoolTrimTo: {
        uint64_t pool = wire_get_u64(&r);
        uint32_t attr = op == CUDA_OP_cuMemPoolTrimTo ? 0 : wire_get_u32(&r);
        uint64_t value = op == CUDA_OP_cuMemPoolGetAttribute ? 0 : wire_get_u64(&r);
        if (wire_reader_finish(&r)) {
            job_refuse(j, "malformed pool request");
            return;
        }
        CUresult rc;
        if (op == CUDA_OP_cuMemPoolTrimTo)
            rc = pool_trim(j, pool, value);
        else if (op == CUDA_OP_cuMemPoolSetAttribute)
            rc = pool_set_attribute(j, pool, attr, value);
        else
            rc = pool_get_attribute(j, pool, attr, &value);
        uint8_t out[8];
        wire_store_u64(out, value);
        bool give = rc == CUDA_SUCCESS && op == CUDA_OP_cuMemPoolGetAttribute;
        job_answer(j, rc, give ? out : NULL, give ? 8 : 0);
        return;
    }
    case CUDA_OP_cuArray3DCreate_v2:
    case CUDA_OP_cuMipmappedArrayCreate:
    case CUDA_OP_cuMipmappedArrayGetLevel:
    case CUDA_OP_cuTexObjectCreate:
    case CUDA_OP_cuSurfObjectCreate:
    case CUDA_OP_cuArrayGetMemoryRequirements:
    case CUDA_OP_cuMipmappedArrayGetMemoryRequirements:
        image_request(j, op, &r);
        return;
    case CUDA_OP_cuModuleGetTexRef:
    case CUDA_OP_cuModuleGetSurfRef:
    case CUDA_OP_cuTexRefSetArray:
    case CUDA_OP_cuTexRefSetMipmappedArray:
    case CUDA_OP_cuSurfRefSetArray:
    case CUDA_OP_cuTexRefSetAddress_v2:
    case CUDA_OP_cuTexRefSetAddress2D_v3:
    case CUDA_OP_cuTexRefSetBorderColor:
        texref_request(j, op, &r);
        return;
    case CUDA_OP_cuTensorMapEncodeTiled:
    case CUDA_OP_cuTensorMapReplaceAddress:
        tensormap_request(j, op, &r);
        return;
    case CUDA_OP_cuMemGetInfo_v2: {
        uint32_t device = wire_get_u32(&r);
        if (wire_reader_finish(&r)) {
            job_refuse(j, "malformed memory query");
            return;
        }
        size_t free_b = 0, total = 0;
        CUresult rc = job_use_device(j, (int)device);
        if (rc == CUDA_SUCCESS)
            rc = j->b->drv.fn_cuMemGetInfo_v2(&free_b, &total);
        uint8_t out[16];
        wire_store_u64(out, free_b);
        wire_store_u64(out + 8, total);
        job_answer(j, rc, rc ? NULL : out, rc ? 0 : 16);
        return;
    }
    case CUDA_OP_cuModuleLoadData:
    case CUDA_OP_cuLibraryLoadData:
        load_module(j, op, &r);
        return;
    case CUDA_OP_cuMemGetAllocationGranularity:
    case CUDA_OP_cuMemAddressReserve:
    case CUDA_OP_cuMemAddressFree:
    case CUDA_OP_cuMemCreate:
    case CUDA_OP_cuMemRelease:
    case CUDA_OP_cuMemMap:
    case CUDA_OP_cuMemUnmap:
    case CUDA_OP_cuMemSetAccess:
    case CUDA_OP_cuMemGetAccess:
        replay_vmm(j, op, &r);
        return;
    case CUDA_OP_cuModuleGetFunction:
    case CUDA_OP_cuLibraryGetKernel:
        get_function(j, op, &r);
        return;
    case CUDA_OP_cuModuleGetGlobal_v2:
    case CUDA_OP_cuLibraryGetGlobal:
        get_global(j, op, &r);
        return;
    case CUDA_OP_cuFuncSetAttribute: {
        uint64_t fid = wire_get_u64(&r);
        uint32_t device = wire_get_u32(&r), attrib = wire_get_u32(&r), value = wire_get_u32(&r);
        agent_obj *fn = objects_get(&j->objs, fid, AOBJ_FUNCTION);
        if (wire_reader_finish(&r) || !fn) {
            job_refuse(j, "malformed attribute request");
            return;
        }
        CUfunction f;
        CUresult rc = job_function_on(j, fn, (int)device, &f);
        if (rc == CUDA_SUCCESS)
            rc = j->b->drv.fn_cuFuncSetAttribute(f, (CUfunction_attribute)attrib, (int)value);
        job_answer(j, rc, NULL, 0);
        return;
    }
    case CUDA_OP_cuCtxSetLimit: {
        /* u32 device, u32 limit, u64 value (shim/context.c): the device heap's size */
        uint32_t device = wire_get_u32(&r), limit = wire_get_u32(&r);
        uint64_t value = wire_get_u64(&r);
        if (wire_reader_finish(&r) || limit != CU_LIMIT_MALLOC_HEAP_SIZE) {
            job_refuse(j, "malformed limit request");
            return;
        }
        CUresult rc = job_use_device(j, (int)device);
        if (rc == CUDA_SUCCESS)
            rc = j->b->drv.fn_cuCtxSetLimit((CUlimit)limit, (size_t)value);
        job_answer(j, rc, NULL, 0);
        return;
    }
    case CUDA_OP_cuDeviceCanAccessPeer:
    case CUDA_OP_cuDeviceGetP2PAttribute:
    case CUDA_OP_cuCtxEnablePeerAccess:
    case CUDA_OP_cuCtxDisablePeerAccess:
        replay_peer(j, op, &r);
        return;
    case CUDA_OP_cuStreamGetAttribute:
    case CUDA_OP_cuStreamSetAttribute:
    case CUDA_OP_cuStreamCopyAttributes:
        replay_stream_attribute(j, op, &r);
        return;
    case CUDA_OP_cuModuleEnumerateFunctions:
    case CUDA_OP_cuLibraryEnumerateKernels:
        replay_enumerate(j, op, &r);
        return;
    case CUDA_OP_cuDeviceGetP2PAtomicCapabilities: {
        rec_atomic_caps v;
        rig_why why;
        if (rec_atomic_caps_get(&r, &v, &why)) {
            job_refuse(j, "malformed %s", why.text);
            return;
        }
        if (v.src >= (uint32_t)j->b->device_count || v.dst >= (uint32_t)j->b->device_count) {
            job_refuse(j, "atomic capabilities between devices %u and %u of %d", v.src, v.dst, j->b->device_count);
            return;
        }
        /* The decoder held count to 1..REC_ATOMIC_OPS_MAX. */
        CUatomicOperation ops[REC_ATOMIC_OPS_MAX];
        unsigned caps[REC_ATOMIC_OPS_MAX];
        for (uint32_t i = 0; i < v.count; i++)
            ops[i] = (CUatomicOperation)wire_load_u32(v.ops + 4 * i);
        CUresult rc = j->b->drv.fn_cuDeviceGetP2PAtomicCapabilities
                          ? j->b->drv.fn_cuDeviceGetP2PAtomicCapabilities(caps, ops, v.count, (CUdevice)v.src,
                                                                           (CUdevice)v.dst)
                          : CUDA_ERROR_NOT_SUPPORTED;
        uint8_t out[REC_ATOMIC_OPS_MAX * 4];
        for (uint32_t i = 0; i < v.count; i++)
            wire_store_u32(out + 4 * i, caps[i]);
        job_answer(j, rc, rc ? NULL : out, rc ? 0 : v.count * 4);
        return;
    }
    case CUDA_OP_cuStreamBatchMemOp_v2:
        replay_memop_batch(j, &r);
        return;
    case CUDA_OP_cuOccupancyMaxActiveBlocksPerMultiprocessor: {
        /* u64 function, u32 device, u32 threads, u32 shared -> i32 (the
         * shim bounds cooperative launches by it: shim/launch.c) */
        rec_occupancy q;
        rig_why why;
        if (rec_occupancy_get(&r, &q, &why)) {
            job_refuse(j, "malformed %s", why.text);
            return;
        }
        agent_obj *fn = objects_get(&j->objs, q.function, AOBJ_FUNCTION);
        if (!fn) {
            job_refuse(j, "an occupancy request for function %llu, which this job does not hold",
                       (unsigned long long)q.function);
            return;
        }
        CUfunction f;
        int v = 0;
        CUresult rc = job_function_on(j, fn, (int)q.device, &f);
        if (rc == CUDA_SUCCESS)
            rc = j->b->drv.fn_cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, (int)q.threads, q.shared);
        uint8_t out[4];
        wire_store_u32(out, (uint32_t)v);
        job_answer(j, rc, rc ? NULL : out, rc ? 0 : 4);
        return;
    }
    case CUDA_OP_cuOccupancyMaxActiveClusters:
    case CUDA_OP_cuOccupancyMaxPotentialClusterSize: {
        rec_cluster_occupancy q;
        rig_why why;
        if (rec_cluster_occupancy_get(&r, &q, &why)) {
            job_refuse(j, "malformed %s", why.text);
            return;
        }
        agent_obj *fn = objects_get(&j->objs, q.function, AOBJ_FUNCTION);
        if (!fn) {
            job_refuse(j, "a cluster occupancy request for function %llu, which this job does not hold",
                       (unsigned long long)q.function);
            return;
        }
        CUlaunchAttribute attr = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
        attr.value.clusterDim.x = q.cluster[0];
        attr.value.clusterDim.y = q.cluster[1];
        attr.value.clusterDim.z = q.cluster[2];
        CUlaunchConfig config = { .gridDimX = q.grid[0], .gridDimY = q.grid[1], .gridDimZ = q.grid[2],
                                  .blockDimX = q.block[0], .blockDimY = q.block[1], .blockDimZ = q.block[2],
                                  .sharedMemBytes = q.shared, .attrs = &attr,
                                  .numAttrs = q.cluster[0] || q.cluster[1] || q.cluster[2] ? 1 : 0 };
        CUfunction f;
        int out_v = 0;
        CUresult rc = job_function_on(j, fn, (int)q.device, &f);
        bool active = op == CUDA_OP_cuOccupancyMaxActiveClusters;
        if (rc == CUDA_SUCCESS && !(active ? j->b->drv.fn_cuOccupancyMaxActiveClusters
                                           : j->b->drv.fn_cuOccupancyMaxPotentialClusterSize))
            rc = CUDA_ERROR_NOT_SUPPORTED;
        if (rc == CUDA_SUCCESS)
            rc = active ? j->b->drv.fn_cuOccupancyMaxActiveClusters(&out_v, f, &config)
                        : j->b->drv.fn_cuOccupancyMaxPotentialClusterSize(&out_v, f, &config);
        uint8_t out[4];
        wire_store_u32(out, (uint32_t)out_v);
        job_answer(j, rc, rc ? NULL : out, rc ? 0 : 4);
        return;
    }
    case CUDA_OP_cuEventElapsedTime_v2: {
        agent_obj *a = objects_get(&j->objs, wire_get_u64(&r), AOBJ_EVENT);
        agent_obj *b = objects_get(&j->objs, wire_get_u64(&r), AOBJ_EVENT);
        if (wire_reader_finish(&r) || !a || !b) {
            job_refuse(j, "malformed elapsed-time request");
            return;
        }
        float ms = 0;
        CUresult rc = j->b->drv.fn_cuEventElapsedTime_v2
                          ? j->b->drv.fn_cuEventElapsedTime_v2(&ms, a->u.event.real, b->u.event.real)
                          : j->b->drv.fn_cuEventElapsedTime(&ms, a->u.event.real, b->u.event.real);
        uint32_t bits;
        memcpy(&bits, &ms, 4);
        uint8_t out[4];
        wire_store_u32(out, bits);
        job_answer(j, rc, rc ? NULL : out, rc ? 0 : 4);
        return;
    }
    default: {
        const cuda_op_info *info = cuda_op_by_number(op);
        if (info && info->served == 'G') {
            generic_env env = { &j->b->drv, j, generic_handle, generic_use_device };
            uint8_t out[GENERIC_OUT_MAX];
            size_t n = 0;
            char why[256] = "";
            CUresult rc = generic_call(&env, info, &r, out, &n, why, sizeof why);
            if (rc != CUDA_SUCCESS && why[0])
                job_refuse(j, "%s", why);
            else
                job_answer(j, rc, out, n);
            return;
        }
        job_refuse(j, "request %s is not served by this agent", info ? info->symbol : "of an unknown operation");
        return;
    }
    }
}


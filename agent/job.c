/* One job, from the proven connection to its end. The job thread reads
 * frames and replays them in the order sent: requests are answered at once,
 * handovers are enqueued on the job's real streams with a marker behind
 * each, and the marker (a host function run by the driver when the stream
 * reaches it) hands a note to the sender thread, which sends the bytes of
 * copies into the program and then the words. The driver's threads never
 * touch the network. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/generic.h"
#include "proto/cuda_ops.h"
#include "proto/deadline.h"
#include "proto/job.h"
#include "proto/wire.h"



typedef struct note {
    struct note *next;
    uint64_t stream, value, bytes;
    void *staging;            /* pinned bytes of a copy into the program */
    size_t len;
} note;

struct job {
    backend *b;
    conn c;
    uint32_t index;
    pthread_mutex_t send_lock;
    window win;
    object_table objs;
    int current;              /* device whose primary context is current */
    pthread_mutex_t q_lock;
    pthread_cond_t q_cond;
    note *q_head, *q_tail;
    uint64_t pending_markers;
    char last_kernel[AGENT_DEVICES_MAX][128];   /* for naming a fault */
    bool stopping;
    bool failed;
    bool abort_sent;
    char cause[512];
    pthread_t sender;
};

static void job_fail(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_fail(job *j, const char *fmt, ...)
{
    pthread_mutex_lock(&j->q_lock);
    if (!j->failed) {
        j->failed = true;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->cause, sizeof j->cause, fmt, ap);
        va_end(ap);
    }
    pthread_cond_broadcast(&j->q_cond);
    pthread_mutex_unlock(&j->q_lock);
}

static bool job_failed(job *j)
{
    pthread_mutex_lock(&j->q_lock);
    bool f = j->failed;
    pthread_mutex_unlock(&j->q_lock);
    return f;
}

static int send_locked(job *j, frame_kind kind, const struct iovec *iov, int n)
{
    rig_why why = { "" };
    pthread_mutex_lock(&j->send_lock);
    int rc = conn_sendv(&j->c, kind, iov, n, deadline_after(JOB_STALL_MS), &why);
    pthread_mutex_unlock(&j->send_lock);
    if (rc == RIG_E_CLOSED)
        job_fail(j, "controller: closed its connection");
    else if (rc < 0)
        job_fail(j, "controller: %s", why.text);
    return rc;
}

/* ---- the sender thread: bytes, words and beats ---- */

static void CUDA_CB marker(void *arg)
{
    note *n = arg;
    job *j = *(job **)((uint8_t *)n + sizeof *n);
    pthread_mutex_lock(&j->q_lock);
    n->next = NULL;
    if (j->q_tail)
        j->q_tail->next = n;
    else
        j->q_head = n;
    j->q_tail = n;
    pthread_cond_broadcast(&j->q_cond);
    pthread_mutex_unlock(&j->q_lock);
}

/* A note carries its job right after itself, so the marker can find it. */
static note *note_new(job *j)
{
    note *n = calloc(1, sizeof *n + sizeof(job *));
    if (n)
        *(job **)((uint8_t *)n + sizeof *n) = j;
    return n;
}

int agent_stdout_pipe = -1;

/* Sends what kernels printed so far, as bytes for stream 0. Called before
 * words, so output printed before a value reaches the program before the
 * value does. */
static void forward_output(job *j)
{
    if (agent_stdout_pipe < 0)
        return;
    uint8_t buf[16 + 65536];
    for (;;) {
        ssize_t n = read(agent_stdout_pipe, buf + 16, sizeof buf - 16);
        if (n <= 0)
            return;
        wire_store_u64(buf, 0);
        wire_store_u64(buf + 8, 0);
        struct iovec iov = { buf, 16 + (size_t)n };
        /* Output printed before a failure still goes out, ahead of the
         * abort: a device assert's message is how the user learns why. */
        if (!j->abort_sent)
            send_locked(j, FRAME_BYTES, &iov, 1);
    }
}

/* Output left in the pipe by an earlier job is not this job's. */
static void discard_output(void)
{
    uint8_t buf[4096];
    while (agent_stdout_pipe >= 0 && read(agent_stdout_pipe, buf, sizeof buf) > 0)
        ;
}

static void send_abort(job *j);

/* Work is queued but nothing completed for a second: a device whose
 * context has failed (a kernel fault) never runs its markers, so ask each
 * device for its sticky error instead of waiting forever. */
static void check_devices(job *j)
{
    for (int d = 0; d < j->b->device_count; d++) {
        j->b->drv.fn_cuCtxSetCurrent(j->b->primary[d]);
        CUresult rc = j->b->drv.fn_cuStreamQuery(NULL);
        if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_READY)
            continue;
        const char *name = NULL;
        j->b->drv.fn_cuGetErrorName(rc, &name);
        if (j->last_kernel[d][0])
            job_fail(j, "CUDA:%d: %s in kernel %s", d, name ? name : "error", j->last_kernel[d]);
        else
            job_fail(j, "CUDA:%d: %s", d, name ? name : "error");
        /* The controller learns it now; its end of the connection then
         * ends the job thread's wait. */
        send_abort(j);
        return;
    }
}

static void *sender_main(void *arg)
{
    job *j = arg;
    pthread_mutex_lock(&j->q_lock);
    for (;;) {
        while (!j->q_head && !j->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            int rc = pthread_cond_timedwait(&j->q_cond, &j->q_lock, &ts);
            if (rc == ETIMEDOUT && !j->failed) {
                bool waiting = j->pending_markers > 0;
                pthread_mutex_unlock(&j->q_lock);
                forward_output(j);
                if (waiting)
                    check_devices(j);
                pthread_mutex_lock(&j->send_lock);
                bool idle = deadline_now_ms() - j->c.last_send_ms >= JOB_BEAT_MS;
                pthread_mutex_unlock(&j->send_lock);
                if (idle)
                    send_locked(j, FRAME_BEAT, NULL, 0);
                pthread_mutex_lock(&j->q_lock);
            }
        }
        note *batch = j->q_head;
        j->q_head = j->q_tail = NULL;
        bool stop = j->stopping && !batch;
        pthread_mutex_unlock(&j->q_lock);
        if (stop)
            return NULL;

        forward_output(j);
        size_t count = 0;
        for (note *n = batch; n; n = n->next)
            count++;
        uint8_t *words = malloc(count * 24);
        wire_writer w = wire_writer_init(words, count * 24);
        for (note *n = batch; n;) {
            if (n->staging) {
                uint8_t head[16];
                wire_store_u64(head, n->stream);
                wire_store_u64(head + 8, n->value);
                struct iovec iov[2] = { { head, 16 }, { n->staging, n->len } };
                if (!job_failed(j))
                    send_locked(j, FRAME_BYTES, iov, 2);
                staging_put(j->b, n->staging, n->len);
            }
            wire_put_u64(&w, n->stream);
            wire_put_u64(&w, n->value);
            wire_put_u64(&w, n->bytes);
            note *next = n->next;
            free(n);
            n = next;
        }
        if (words && count && !job_failed(j)) {
            struct iovec iov = { words, w.off };
            send_locked(j, FRAME_WORD, &iov, 1);
        }
        free(words);
        pthread_mutex_lock(&j->q_lock);
        j->pending_markers -= count;
        pthread_cond_broadcast(&j->q_cond);
    }
}

/* ---- replay helpers ---- */

static CUresult use_device(job *j, int device)
{
    if (device < 0 || device >= j->b->device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    if (j->current != device) {
        CUresult rc = j->b->drv.fn_cuCtxSetCurrent(j->b->primary[device]);
        if (rc)
            return rc;
        j->current = device;
    }
    return CUDA_SUCCESS;
}

/* Sends an answer: u8 0, u32 result, outputs. */
static void answer(job *j, CUresult result, const void *out, size_t n)
{
    uint8_t head[5];
    head[0] = 0;
    wire_store_u32(head + 1, (uint32_t)result);
    struct iovec iov[2] = { { head, 5 }, { (void *)out, n } };
    send_locked(j, FRAME_ANSWER, iov, n ? 2 : 1);
}

/* A protocol refusal: the controller fails the job with this reason. */
static void refuse(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(job *j, const char *fmt, ...)
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
    send_locked(j, FRAME_ANSWER, &iov, 1);
}

static void open_job(job *j, wire_reader *r)
{
    uint32_t index = wire_get_u32(r);
    uint64_t base = wire_get_u64(r), size = wire_get_u64(r);
    if (wire_reader_finish(r) || size == 0 || index != j->index) {
        refuse(j, "malformed open request");
        return;
    }
    if (j->win.reserved)
        window_release(&j->win, j->b);
    if (!window_reserve(&j->win, j->b, base, size)) {
        uint8_t no = 0;
        answer(j, CUDA_SUCCESS, &no, 1);
        return;
    }
    size_t cap = 1 << 16;
    uint8_t *out = malloc(cap);
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
        refuse(j, "the device list does not fit an answer");
    else
        answer(j, CUDA_SUCCESS, out, w.off);
    free(out);
}

/* The function of fn on device, looked up once per device. */
static CUresult function_on(job *j, agent_obj *fn, int device, CUfunction *out)
{
    if (device < 0 || device >= AGENT_DEVICES_MAX)
        return CUDA_ERROR_INVALID_DEVICE;
    if (fn->u.fn.per_device[device]) {
        *out = fn->u.fn.per_device[device];
        return CUDA_SUCCESS;
    }
    CUresult rc = use_device(j, device);
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
        refuse(j, "malformed module load");
        return;
    }
    /* PTX text must end in a NUL the frame does not promise. */
    uint8_t *copy = malloc(n + 1);
    if (!copy) {
        answer(j, CUDA_ERROR_OUT_OF_MEMORY, NULL, 0);
        return;
    }
    memcpy(copy, image, n);
    copy[n] = 0;
    bool library = op == CUDA_OP_cuLibraryLoadData;
    CUresult rc = use_device(j, library ? (j->current >= 0 ? j->current : 0) : (int)device);
    agent_obj *o = NULL;
    if (rc == CUDA_SUCCESS) {
        o = objects_put(&j->objs, id, library ? AOBJ_LIBRARY : AOBJ_MODULE, (int)device);
        if (!o) {
            free(copy);
            job_fail(j, "a module load names object %llu, which is taken or invalid", (unsigned long long)id);
            refuse(j, "object %llu is taken or invalid", (unsigned long long)id);
            return;
        }
        if (library)
            rc = j->b->drv.fn_cuLibraryLoadData(&o->u.library.real, copy, NULL, NULL, 0, NULL, NULL, 0);
        else
            rc = j->b->drv.fn_cuModuleLoadData(&o->u.module.real, copy);
        if (rc)
            objects_remove(&j->objs, id);
    }
    free(copy);
    if (rc == CUDA_ERROR_NOT_SUPPORTED || rc == CUDA_ERROR_NO_BINARY_FOR_GPU || rc == CUDA_ERROR_INVALID_PTX ||
        rc == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || rc == CUDA_ERROR_INVALID_IMAGE) {
        /* The reason the program will see in its log: the driver keeps its
         * own message to itself (or to this agent's stderr). */
        char why[300];
        int n = snprintf(why, sizeof why, "the agent's driver (%s) has no code it can run in this module%s",
                         j->b->kind,
                         strcmp(j->b->kind, "softgpu") == 0 ? " (softgpu runs PTX up to its ISA, not SASS)" : "");
        uint8_t out[320];
        wire_writer w = wire_writer_init(out, sizeof out);
        wire_put_string(&w, why, (size_t)n < sizeof why ? (size_t)n : sizeof why - 1);
        answer(j, rc, out, w.off);
        return;
    }
    answer(j, rc, NULL, 0);
}

static void get_function(job *j, uint32_t op, wire_reader *r)
{
    uint64_t mid = wire_get_u64(r), fid = wire_get_u64(r);
    uint32_t len = wire_get_u32(r);
    const uint8_t *name = len <= JOB_NAME_MAX ? wire_get_view(r, len) : NULL;
    if (wire_reader_finish(r) || !name) {
        refuse(j, "malformed function request");
        return;
    }
    agent_obj *m = objects_get(&j->objs, mid, op == CUDA_OP_cuLibraryGetKernel ? AOBJ_LIBRARY : AOBJ_MODULE);
    if (!m) {
        job_fail(j, "a function request names module %llu, which this job does not hold", (unsigned long long)mid);
        refuse(j, "no module %llu", (unsigned long long)mid);
        return;
    }
    char *cname = strndup((const char *)name, len);
    agent_obj *f = objects_put(&j->objs, fid, AOBJ_FUNCTION, m->device);
    if (!f || !cname) {
        free(cname);
        job_fail(j, "a function request names object %llu, which is taken", (unsigned long long)fid);
        refuse(j, "object %llu is taken", (unsigned long long)fid);
        return;
    }
    f->u.fn.module = mid;
    f->u.fn.name = cname;
    CUresult rc = CUDA_SUCCESS;
    int device = m->type == AOBJ_MODULE ? m->device : (j->current >= 0 ? j->current : 0);
    if (m->type == AOBJ_LIBRARY)
        rc = j->b->drv.fn_cuLibraryGetKernel(&f->u.fn.kernel, m->u.library.real, cname);
    CUfunction fn = NULL;
    if (rc == CUDA_SUCCESS)
        rc = function_on(j, f, device, &fn);
    if (rc) {
        objects_remove(&j->objs, fid);
        answer(j, rc, NULL, 0);
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
    answer(j, CUDA_SUCCESS, out, w.off);
}

static void get_global(job *j, uint32_t op, wire_reader *r)
{
    uint64_t mid = wire_get_u64(r);
    uint32_t device = wire_get_u32(r), len = wire_get_u32(r);
    const uint8_t *name = len <= JOB_NAME_MAX ? wire_get_view(r, len) : NULL;
    if (wire_reader_finish(r) || !name) {
        refuse(j, "malformed global request");
        return;
    }
    bool library = op == CUDA_OP_cuLibraryGetGlobal;
    agent_obj *m = objects_get(&j->objs, mid, library ? AOBJ_LIBRARY : AOBJ_MODULE);
    if (!m) {
        job_fail(j, "a global request names module %llu, which this job does not hold", (unsigned long long)mid);
        refuse(j, "no module %llu", (unsigned long long)mid);
        return;
    }
    char *cname = strndup((const char *)name, len);
    CUdeviceptr p = 0;
    size_t size = 0;
    CUresult rc = use_device(j, (int)device);
    if (rc == CUDA_SUCCESS)
        rc = library ? j->b->drv.fn_cuLibraryGetGlobal(&p, &size, m->u.library.real, cname)
                     : j->b->drv.fn_cuModuleGetGlobal_v2(&p, &size, m->u.module.real, cname);
    free(cname);
    uint8_t out[16];
    wire_store_u64(out, p);
    wire_store_u64(out + 8, size);
    answer(j, rc, rc ? NULL : out, rc ? 0 : 16);
}

static CUstream real_stream(agent_obj *s);
static const char *op_name(uint32_t op);

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
            job_fail(j, "controller: memory object %llu is taken or invalid", (unsigned long long)id);
            refuse(j, "memory object %llu is taken or invalid", (unsigned long long)id);
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
    }
    {
        uint8_t buf[8];
        wire_store_u64(buf, out);
        answer(j, rc, rc || !has_out ? NULL : buf, rc || !has_out ? 0 : 8);
    }
    return;
malformed:
    refuse(j, "malformed or unknown-object %s request", op_name(op));
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
        *real = real_stream(o);
        return true;
    case 'E':
        if (!(o = objects_get(&j->objs, id, AOBJ_EVENT)))
            return false;
        *real = o->u.event.real;
        return true;
    case 'F': {
        CUfunction f;
        if (!(o = objects_get(&j->objs, id, AOBJ_FUNCTION)) || function_on(j, o, device, &f) != CUDA_SUCCESS)
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
    }
    return false;
}

static void generic_use_device(void *ctx, int device)
{
    use_device(ctx, device);
}

static void replay_request(job *j, const frame *f)
{
    wire_reader r = wire_reader_init(f->payload, f->len);
    uint32_t op = wire_get_u32(&r);
    if (r.err) {
        refuse(j, "malformed request");
        return;
    }
    switch (op) {
    case JOB_OP_OPEN:
        open_job(j, &r);
        return;
    case CUDA_OP_cuMemAlloc_v2: {
        uint32_t device = wire_get_u32(&r);
        uint64_t size = wire_get_u64(&r);
        if (wire_reader_finish(&r)) {
            refuse(j, "malformed allocation");
            return;
        }
        CUdeviceptr p = 0;
        CUresult rc = device < (uint32_t)j->b->device_count ? window_alloc(&j->win, j->b, (int)device, size, &p)
                                                             : CUDA_ERROR_INVALID_DEVICE;
        uint8_t out[8];
        wire_store_u64(out, p);
        answer(j, rc, rc ? NULL : out, rc ? 0 : 8);
        return;
    }
    case CUDA_OP_cuMemGetInfo_v2: {
        uint32_t device = wire_get_u32(&r);
        if (wire_reader_finish(&r)) {
            refuse(j, "malformed memory query");
            return;
        }
        size_t free_b = 0, total = 0;
        CUresult rc = use_device(j, (int)device);
        if (rc == CUDA_SUCCESS)
            rc = j->b->drv.fn_cuMemGetInfo_v2(&free_b, &total);
        uint8_t out[16];
        wire_store_u64(out, free_b);
        wire_store_u64(out + 8, total);
        answer(j, rc, rc ? NULL : out, rc ? 0 : 16);
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
            refuse(j, "malformed attribute request");
            return;
        }
        CUfunction f;
        CUresult rc = function_on(j, fn, (int)device, &f);
        if (rc == CUDA_SUCCESS)
            rc = j->b->drv.fn_cuFuncSetAttribute(f, (CUfunction_attribute)attrib, (int)value);
        answer(j, rc, NULL, 0);
        return;
    }
    case CUDA_OP_cuEventElapsedTime_v2: {
        agent_obj *a = objects_get(&j->objs, wire_get_u64(&r), AOBJ_EVENT);
        agent_obj *b = objects_get(&j->objs, wire_get_u64(&r), AOBJ_EVENT);
        if (wire_reader_finish(&r) || !a || !b) {
            refuse(j, "malformed elapsed-time request");
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
        answer(j, rc, rc ? NULL : out, rc ? 0 : 4);
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
                refuse(j, "%s", why);
            else
                answer(j, rc, out, n);
            return;
        }
        refuse(j, "request %s is not served by this agent", info ? info->symbol : "of an unknown operation");
        return;
    }
    }
}

/* ---- handovers ---- */

static CUstream real_stream(agent_obj *s)
{
    return s->u.stream.null ? NULL : s->u.stream.real;
}

/* Replays one record; returns the staging buffer of a copy into the
 * program through *staging. */
static CUresult replay_record(job *j, uint32_t op, agent_obj *s, uint64_t object, wire_reader *r,
                              void **staging, size_t *staging_len)
{
    const cuda_driver *d = &j->b->drv;
    CUstream rs = s ? real_stream(s) : NULL;
    CUresult rc;
    if (s && (rc = use_device(j, s->device)))
        return rc;
    switch (op) {
    case JOB_OP_STREAM_CREATE: {
        uint32_t device = wire_get_u32(r), flags = wire_get_u32(r);
        int32_t priority = (int32_t)wire_get_u32(r);
        if (wire_reader_finish(r))
            return CUDA_ERROR_INVALID_VALUE;
        agent_obj *o = objects_put(&j->objs, object, AOBJ_STREAM, (int)device);
        if (!o)
            return CUDA_ERROR_INVALID_HANDLE;
        if ((rc = use_device(j, (int)device)))
            return rc;
        if (flags & JOB_STREAM_NULL) {
            o->u.stream.null = true;
            return CUDA_SUCCESS;
        }
        return d->fn_cuStreamCreateWithPriority(&o->u.stream.real, flags, priority);
    }
    case JOB_OP_EVENT_CREATE: {
        uint32_t device = wire_get_u32(r), flags = wire_get_u32(r);
        if (wire_reader_finish(r))
            return CUDA_ERROR_INVALID_VALUE;
        agent_obj *o = objects_put(&j->objs, object, AOBJ_EVENT, (int)device);
        if (!o)
            return CUDA_ERROR_INVALID_HANDLE;
        if ((rc = use_device(j, (int)device)))
            return rc;
        return d->fn_cuEventCreate(&o->u.event.real, flags);
    }
    case JOB_OP_MARK:
        return CUDA_SUCCESS;
    case CUDA_OP_cuMemcpyHtoDAsync_v2: {
        uint64_t dst = wire_get_u64(r);
        size_t n = wire_remaining(r);
        const uint8_t *data = wire_get_view(r, n);
        if (r->err)
            return CUDA_ERROR_INVALID_VALUE;
        return d->fn_cuMemcpyHtoDAsync_v2(dst, data, n, rs);
    }
    case CUDA_OP_cuMemcpyDtoHAsync_v2: {
        uint64_t src = wire_get_u64(r), n = wire_get_u64(r);
        if (wire_reader_finish(r) || n > JOB_COPY_CHUNK)
            return CUDA_ERROR_INVALID_VALUE;
        if ((rc = staging_get(j->b, n, staging)))
            return rc;
        *staging_len = n;
        return d->fn_cuMemcpyDtoHAsync_v2(*staging, src, n, rs);
    }
    case CUDA_OP_cuMemcpyDtoDAsync_v2: {
        uint64_t dst = wire_get_u64(r), src = wire_get_u64(r), n = wire_get_u64(r);
        if (wire_reader_finish(r))
            return CUDA_ERROR_INVALID_VALUE;
        return d->fn_cuMemcpyDtoDAsync_v2(dst, src, n, rs);
    }
    case CUDA_OP_cuMemcpy2DAsync_v2: {
        uint8_t dir = wire_get_u8(r);
        uint64_t dst = wire_get_u64(r), dpitch = wire_get_u64(r), src = wire_get_u64(r), spitch = wire_get_u64(r);
        uint64_t width = wire_get_u64(r), height = wire_get_u64(r);
        size_t n = wire_remaining(r);
        const uint8_t *data = wire_get_view(r, n);
        if (r->err || dir > 2 || (dir == 0 && n != width * height) || (dir != 0 && n != 0) ||
            width * height > JOB_COPY_CHUNK)
            return CUDA_ERROR_INVALID_VALUE;
        CUDA_MEMCPY2D c = { .WidthInBytes = width, .Height = height };
        if (dir == 0) {
            c.srcMemoryType = CU_MEMORYTYPE_HOST;
            c.srcHost = data;
            c.srcPitch = width;
            c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
            c.dstDevice = dst;
            c.dstPitch = dpitch;
            return d->fn_cuMemcpy2DAsync_v2(&c, rs);
        }
        if (dir == 1) {
            if ((rc = staging_get(j->b, width * height, staging)))
                return rc;
            *staging_len = width * height;
            c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
            c.srcDevice = src;
            c.srcPitch = spitch;
            c.dstMemoryType = CU_MEMORYTYPE_HOST;
            c.dstHost = *staging;
            c.dstPitch = width;
            return d->fn_cuMemcpy2DAsync_v2(&c, rs);
        }
        c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = src;
        c.srcPitch = spitch;
        c.dstDevice = dst;
        c.dstPitch = dpitch;
        return d->fn_cuMemcpy2DAsync_v2(&c, rs);
    }
    case CUDA_OP_cuMemsetD2D32Async: {
        uint64_t dst = wire_get_u64(r), pitch = wire_get_u64(r);
        uint32_t value = wire_get_u32(r), elem = wire_get_u32(r);
        uint64_t width = wire_get_u64(r), height = wire_get_u64(r);
        if (wire_reader_finish(r))
            return CUDA_ERROR_INVALID_VALUE;
        if (height == 1) {
            switch (elem) {
            case 1: return d->fn_cuMemsetD8Async(dst, (unsigned char)value, width, rs);
            case 2: return d->fn_cuMemsetD16Async(dst, (unsigned short)value, width, rs);
            case 4: return d->fn_cuMemsetD32Async(dst, value, width, rs);
            }
            return CUDA_ERROR_INVALID_VALUE;
        }
        switch (elem) {
        case 1: return d->fn_cuMemsetD2D8Async(dst, pitch, (unsigned char)value, width, height, rs);
        case 2: return d->fn_cuMemsetD2D16Async(dst, pitch, (unsigned short)value, width, height, rs);
        case 4: return d->fn_cuMemsetD2D32Async(dst, pitch, value, width, height, rs);
        }
        return CUDA_ERROR_INVALID_VALUE;
    }
    case CUDA_OP_cuStreamWaitEvent: {
        agent_obj *e = objects_get(&j->objs, wire_get_u64(r), AOBJ_EVENT);
        uint32_t flags = wire_get_u32(r);
        if (wire_reader_finish(r) || !e)
            return CUDA_ERROR_INVALID_HANDLE;
        return d->fn_cuStreamWaitEvent(rs, e->u.event.real, flags);
    }
    case CUDA_OP_cuEventRecordWithFlags: {
        agent_obj *e = objects_get(&j->objs, wire_get_u64(r), AOBJ_EVENT);
        uint32_t flags = wire_get_u32(r);
        if (wire_reader_finish(r) || !e)
            return CUDA_ERROR_INVALID_HANDLE;
        return flags ? d->fn_cuEventRecordWithFlags(e->u.event.real, rs, flags) : d->fn_cuEventRecord(e->u.event.real, rs);
    }
    case CUDA_OP_cuLaunchKernel: {
        agent_obj *fn = objects_get(&j->objs, wire_get_u64(r), AOBJ_FUNCTION);
        uint32_t device = wire_get_u32(r), dims[7];
        for (int i = 0; i < 7; i++)
            dims[i] = wire_get_u32(r);
        size_t n = wire_remaining(r);
        const uint8_t *params = wire_get_view(r, n);
        if (r->err || !fn)
            return CUDA_ERROR_INVALID_HANDLE;
        CUfunction f;
        if ((rc = function_on(j, fn, (int)device, &f)))
            return rc;
        snprintf(j->last_kernel[device], sizeof j->last_kernel[device], "%s", fn->u.fn.name);
        size_t size = n;
        void *buffer = (void *)params;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                          CU_LAUNCH_PARAM_END };
        return d->fn_cuLaunchKernel(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], rs, NULL,
                                    n ? extra : NULL);
    }
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Errors that a fault of earlier work leaves on the context: whatever call
 * meets them first, the cause is the last kernel launched there. */
static bool sticky(CUresult rc)
{
    switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_ASSERT: case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
        return true;
    default:
        return false;
    }
}

static void fail_with_driver_error(job *j, int device, CUresult rc, const char *what)
{
    const char *name = NULL;
    j->b->drv.fn_cuGetErrorName(rc, &name);
    if (!name)
        name = "error";
    if (sticky(rc) && device >= 0 && device < AGENT_DEVICES_MAX && j->last_kernel[device][0])
        job_fail(j, "CUDA:%d: %s in kernel %s", device, name, j->last_kernel[device]);
    else
        job_fail(j, "CUDA:%d: %s in %s", device < 0 ? 0 : device, name, what);
}

static const char *op_name(uint32_t op)
{
    switch (op) {
    case JOB_OP_STREAM_CREATE: return "stream creation";
    case JOB_OP_EVENT_CREATE: return "event creation";
    case JOB_OP_MARK: return "host function";
    }
    const cuda_op_info *info = cuda_op_by_number(op);
    return info ? info->symbol : "an unknown operation";
}

/* Puts a marker for (stream, value) behind the work enqueued so far. */
static bool mark(job *j, agent_obj *s, uint64_t stream, uint64_t value, void *staging, size_t staging_len)
{
    note *n = note_new(j);
    if (!n) {
        if (staging)
            staging_put(j->b, staging, staging_len);
        job_fail(j, "agent: out of memory");
        return false;
    }
    n->stream = stream;
    n->value = value;
    n->bytes = s->u.stream.bytes;
    n->staging = staging;
    n->len = staging_len;
    pthread_mutex_lock(&j->q_lock);
    j->pending_markers++;
    pthread_mutex_unlock(&j->q_lock);
    CUresult rc = j->b->drv.fn_cuLaunchHostFunc(real_stream(s), marker, n);
    if (rc) {
        pthread_mutex_lock(&j->q_lock);
        j->pending_markers--;
        pthread_mutex_unlock(&j->q_lock);
        if (staging)
            staging_put(j->b, staging, staging_len);
        free(n);
        fail_with_driver_error(j, s->device, rc, "following the stream (cuLaunchHostFunc)");
        return false;
    }
    return true;
}

/* The streams a frame touched and their last value not yet marked: a
 * frame of many records costs one marker per stream, not one per record. */
#define TOUCHED_MAX 64
typedef struct touched {
    agent_obj *s;
    uint64_t stream, value;
} touched;

static void replay_handover(job *j, const frame *f)
{
    touched t[TOUCHED_MAX];
    size_t nt = 0;
    wire_reader fr = wire_reader_init(f->payload, f->len);
    while (wire_remaining(&fr) && !job_failed(j)) {
        uint32_t op = wire_get_u32(&fr), len = wire_get_u32(&fr);
        uint64_t stream = wire_get_u64(&fr), value = wire_get_u64(&fr);
        const uint8_t *body = wire_get_view(&fr, len);
        if (fr.err) {
            job_fail(j, "controller: malformed handover");
            return;
        }
        wire_reader r = wire_reader_init(body, len);
        agent_obj *s = NULL;
        if (value) {
            s = objects_get(&j->objs, stream, AOBJ_STREAM);
            if (!s) {
                job_fail(j, "controller: %s on stream %llu, which this job does not hold", op_name(op),
                         (unsigned long long)stream);
                return;
            }
        }
        void *staging = NULL;
        size_t staging_len = 0;
        CUresult rc = replay_record(j, op, s, stream, &r, &staging, &staging_len);
        if (rc) {
            if (op == CUDA_OP_cuLaunchKernel && !sticky(rc)) {
                const char *name = NULL;
                j->b->drv.fn_cuGetErrorName(rc, &name);
                wire_reader k = wire_reader_init(body, len);
                agent_obj *fn = objects_get(&j->objs, wire_get_u64(&k), AOBJ_FUNCTION);
                job_fail(j, "CUDA:%d: %s in kernel %s", s ? s->device : 0, name ? name : "error",
                         fn ? fn->u.fn.name : "?");
            } else {
                fail_with_driver_error(j, s ? s->device : -1, rc, op_name(op));
            }
            if (staging)
                staging_put(j->b, staging, staging_len);
            return;
        }
        if (!value)
            continue;
        s->u.stream.bytes += len;
        size_t i = 0;
        while (i < nt && t[i].s != s)
            i++;
        /* Copies into the program carry bytes and host functions run in the
         * program when reached: each gets its own marker, at once. */
        if (staging || op == JOB_OP_MARK) {
            if (!mark(j, s, stream, value, staging, staging_len))
                return;
            if (i < nt)
                t[i].value = 0;
            continue;
        }
        if (i == nt) {
            if (nt == TOUCHED_MAX) {
                if (!mark(j, s, stream, value, NULL, 0))
                    return;
                continue;
            }
            t[nt++] = (touched){ s, stream, 0 };
        }
        t[i].value = value;
    }
    for (size_t i = 0; i < nt && !job_failed(j); i++)
        if (t[i].value && !mark(j, t[i].s, t[i].stream, t[i].value, NULL, 0))
            return;
}

static void replay_drop(job *j, const frame *f)
{
    wire_reader r = wire_reader_init(f->payload, f->len);
    uint32_t op = wire_get_u32(&r);
    uint64_t id = wire_get_u64(&r);
    if (wire_reader_finish(&r)) {
        job_fail(j, "controller: malformed drop");
        return;
    }
    const cuda_driver *d = &j->b->drv;
    agent_obj *o;
    switch (op) {
    case CUDA_OP_cuMemFree_v2:
        if (window_free(&j->win, j->b, id) != CUDA_SUCCESS)
            job_fail(j, "controller: frees %#llx, which this job did not allocate", (unsigned long long)id);
        return;
    case CUDA_OP_cuStreamDestroy_v2:
        if ((o = objects_get(&j->objs, id, AOBJ_STREAM))) {
            /* Its markers still run: keep the object until the job ends,
             * destroy the real stream now (the driver lets queued work finish). */
            if (!o->u.stream.null && o->u.stream.real) {
                use_device(j, o->device);
                d->fn_cuStreamDestroy_v2(o->u.stream.real);
                o->u.stream.real = NULL;
                o->u.stream.null = true;
            }
            return;
        }
        break;
    case CUDA_OP_cuEventDestroy_v2:
        if ((o = objects_get(&j->objs, id, AOBJ_EVENT))) {
            d->fn_cuEventDestroy_v2(o->u.event.real);
            objects_remove(&j->objs, id);
            return;
        }
        break;
    case CUDA_OP_cuModuleUnload:
        if ((o = objects_get(&j->objs, id, AOBJ_MODULE))) {
            use_device(j, o->device);
            d->fn_cuCtxSynchronize();
            d->fn_cuModuleUnload(o->u.module.real);
            objects_remove(&j->objs, id);
            return;
        }
        break;
    case CUDA_OP_cuLibraryUnload:
        if ((o = objects_get(&j->objs, id, AOBJ_LIBRARY))) {
            d->fn_cuLibraryUnload(o->u.library.real);
            objects_remove(&j->objs, id);
            return;
        }
        break;
    default:
        job_fail(j, "controller: drop of an unknown kind (%u)", op);
        return;
    }
    job_fail(j, "controller: drops object %llu, which this job does not hold", (unsigned long long)id);
}

/* ---- the job ---- */

/* Waits for every device to finish and every marker to be sent; returns
 * a mask of the devices whose context failed (their markers never run). */
static unsigned drain(job *j)
{
    unsigned failed = 0;
    for (int d = 0; d < j->b->device_count; d++) {
        j->b->drv.fn_cuCtxSetCurrent(j->b->primary[d]);
        if (j->b->drv.fn_cuCtxSynchronize() != CUDA_SUCCESS)
            failed |= 1u << d;
    }
    j->current = -1;
    if (failed)
        return failed;
    /* Bounded, in case a driver never runs them. */
    pthread_mutex_lock(&j->q_lock);
    int64_t give_up = deadline_after(10000);
    while (j->pending_markers > 0 && deadline_now_ms() < give_up) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&j->q_cond, &j->q_lock, &ts);
    }
    pthread_mutex_unlock(&j->q_lock);
    return 0;
}

/* A device whose context failed gets a fresh primary context, as after a
 * fault on a GPU, so the next job starts clean. */
static void reset_devices(job *j, unsigned failed)
{
    const cuda_driver *d = &j->b->drv;
    for (int dev = 0; dev < j->b->device_count; dev++) {
        if (!(failed & (1u << dev)))
            continue;
        d->fn_cuDevicePrimaryCtxRelease_v2(dev);
        d->fn_cuDevicePrimaryCtxReset_v2(dev);
        if (d->fn_cuDevicePrimaryCtxRetain(&j->b->primary[dev], dev) != CUDA_SUCCESS)
            fprintf(stderr, "rig-agent: CUDA:%d: cannot make a fresh context after a fault\n", dev);
    }
}

/* Frees everything the job held, so the next job starts clean. */
static void cleanup(job *j)
{
    const cuda_driver *d = &j->b->drv;
    for (uint64_t id = 0; id < j->objs.cap; id++) {
        agent_obj *o = j->objs.v[id];
        if (!o)
            continue;
        if (o->device >= 0 && o->device < j->b->device_count)
            d->fn_cuCtxSetCurrent(j->b->primary[o->device]);
        switch (o->type) {
        case AOBJ_STREAM:
            if (!o->u.stream.null && o->u.stream.real)
                d->fn_cuStreamDestroy_v2(o->u.stream.real);
            break;
        case AOBJ_EVENT: d->fn_cuEventDestroy_v2(o->u.event.real); break;
        case AOBJ_MODULE: d->fn_cuModuleUnload(o->u.module.real); break;
        case AOBJ_LIBRARY: d->fn_cuLibraryUnload(o->u.library.real); break;
        case AOBJ_MEMORY: d->fn_cuMemRelease(o->u.memory.real); break;
        default: break;
        }
        objects_remove(&j->objs, id);
    }
    free(j->objs.v);
    window_release(&j->win, j->b);
    j->current = -1;
}

/* Sends the job's root cause once and ends our side of the connection, so
 * the abort is not lost to a reset; the controller then ends its side. */
static void send_abort(job *j)
{
    forward_output(j);
    pthread_mutex_lock(&j->q_lock);
    bool already = j->abort_sent;
    j->abort_sent = true;
    char why[sizeof j->cause];
    memcpy(why, j->cause, sizeof why);
    pthread_mutex_unlock(&j->q_lock);
    if (already)
        return;
    uint8_t buf[JOB_REASON_MAX + 4];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    size_t n = strlen(why);
    wire_put_string(&w, why, n < JOB_REASON_MAX ? n : JOB_REASON_MAX);
    struct iovec iov = { buf, w.off };
    rig_why ignored;
    pthread_mutex_lock(&j->send_lock);
    conn_sendv(&j->c, FRAME_ABORT, &iov, 1, deadline_after(2000), &ignored);
    shutdown(j->c.fd, SHUT_WR);
    pthread_mutex_unlock(&j->send_lock);
}

/* After an abort: read and discard until the controller ends its side, at
 * most 10 s, so closing cannot reset the connection under the abort. */
static void linger(job *j)
{
    conn_drain(&j->c, deadline_after(10000));
}

void job_serve(backend *b, int fd, uint32_t index, void (*ending)(void *ctx), void *ctx, char *ended,
               size_t endedlen)
{
    job *j = calloc(1, sizeof *j);
    rig_why why = { "" };
    if (!j || conn_init(&j->c, fd, JOB_FRAME_LIMIT, &why) < 0) {
        snprintf(ended, endedlen, "cannot start a job: out of memory");
        free(j);
        close(fd);
        return;
    }
    j->b = b;
    j->index = index;
    j->current = -1;
    pthread_mutex_init(&j->send_lock, NULL);
    pthread_mutex_init(&j->q_lock, NULL);
    pthread_cond_init(&j->q_cond, NULL);
    discard_output();
    pthread_create(&j->sender, NULL, sender_main, j);

    bool closed = false;
    while (!job_failed(j)) {
        frame f = { 0 };
        int rc = conn_recv(&j->c, &f, deadline_after(-1), JOB_SILENCE_MS, &why);
        if (rc < 0) {
            if (rc == RIG_E_TIMEOUT)
                job_fail(j, "controller: silent for %d s", JOB_SILENCE_MS / 1000);
            else
                job_fail(j, "controller: %s", rc == RIG_E_CLOSED ? "closed its connection" : why.text);
            break;
        }
        switch (f.kind) {
        case FRAME_REQUEST: replay_request(j, &f); break;
        case FRAME_HANDOVER: replay_handover(j, &f); break;
        case FRAME_DROP: replay_drop(j, &f); break;
        case FRAME_BEAT: break;
        case FRAME_CLOSE: closed = true; break;
        case FRAME_ABORT: {
            wire_reader r = wire_reader_init(f.payload, f.len);
            const uint8_t *s;
            size_t n = wire_get_string(&r, &s, JOB_REASON_MAX);
            job_fail(j, "controller aborted: %.*s", (int)n, r.err ? "" : (const char *)s);
            break;
        }
        default:
            job_fail(j, "controller: sent a %s message, which controllers never send", frame_kind_name(f.kind));
        }
        frame_release(&f);
        if (closed)
            break;
    }
    if (ending)
        ending(ctx);
    bool failed = job_failed(j);
    unsigned broken = 0;
    if (!failed) {
        broken = drain(j);
        send_locked(j, FRAME_CLOSE, NULL, 0);
        snprintf(ended, endedlen, "job closed");
    } else {
        send_abort(j);
        snprintf(ended, endedlen, "job failed: %s", j->cause);
        linger(j);
        broken = drain(j);
    }
    pthread_mutex_lock(&j->q_lock);
    j->stopping = true;
    pthread_cond_broadcast(&j->q_cond);
    pthread_mutex_unlock(&j->q_lock);
    pthread_join(j->sender, NULL);
    cleanup(j);
    /* A job's staging is kept only while the job runs. */
    staging_release_all(j->b);
    reset_devices(j, broken);
    conn_close(&j->c);
    free(j);
}

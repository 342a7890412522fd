/* Kernel launches: check the configuration and the parameters against the
 * entry's layout, pack the parameter buffer, and queue the launch on the
 * stream; the worker runs it through the engine. A failed launch poisons
 * its context (sticky, as on a GPU) and says so in one line on stderr. */
#include "softgpu/driver.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Device printf: the text goes to fd 1 (the agent redirects fd 1). */
static void print_out(void *ctx, const char *text, size_t len)
{
    (void)ctx;
    while (len > 0) {
        ssize_t n = write(1, text, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        text += n;
        len -= (size_t)n;
    }
}

static void run_launch(soft_op *op, struct CUctx_st *ctx)
{
    struct CUfunc_st *f = op->u.launch.func;
    soft_launch l = {
        .entry = f->entry,
        .dynamic_shared_bytes = op->u.launch.shared,
        .params = op->u.launch.params,
        .memory = soft_memory_on(ctx->device),
        .print = print_out,
        .cooperative = op->u.launch.cooperative,
        .image = soft_image_find,
        .refs = op->u.launch.refs,
        .nrefs = op->u.launch.nrefs,
        .heap_alloc = soft_heap_alloc,
        .heap_free = soft_heap_free,
        .heap_ctx = ctx,
    };
    memcpy(l.grid, op->u.launch.grid, sizeof l.grid);
    memcpy(l.block, op->u.launch.block, sizeof l.block);
    /* One block has nothing to share out: run it here, not on the pool. */
    if ((uint64_t)l.grid[0] * l.grid[1] * l.grid[2] == 1)
        l.threads = 1;
    char msg[512] = "";
    soft_mem_use_begin();
    soft_refs_recheck(op->u.launch.refs, op->u.launch.nrefs);
    CUresult r = soft_program_launch(f->mod->prog, &l, msg, sizeof msg);
    soft_mem_use_end();
    if (r == CUDA_SUCCESS)
        return;
    soft_ctx_poison(ctx, r);
    const char *name = "?";
    cuGetErrorName(r, &name);
    if (!msg[0])
        soft_log("%s in kernel %s", name, f->info->name);
    else if (strstr(msg, f->info->name))
        soft_log("%s: %s", name, msg);
    else
        soft_log("%s in kernel %s: %s", name, f->info->name, msg);
}

static void drop_launch(soft_op *op)
{
    free(op->u.launch.params);
    free(op->u.launch.refs);
    if (!op->u.launch.in_graph)
        soft_module_release(op->u.launch.func->mod);
}

void soft_launch_to_graph(soft_op *op)
{
    if (op && op->drop == drop_launch && !op->u.launch.in_graph) {
        op->u.launch.in_graph = true;
        soft_module_release(op->u.launch.func->mod);
    }
}

struct CUmod_st *soft_launch_module(const soft_op *op)
{
    return op && op->drop == drop_launch ? op->u.launch.func->mod : NULL;
}

/* Packs kernelParams or extra into a fresh buffer laid out per the entry. */
static CUresult pack(const struct CUfunc_st *f, void **kernelParams, void **extra, void **out)
{
    const soft_entry_info *e = f->info;
    uint32_t need = 0, maxalign = 1;
    for (uint32_t i = 0; i < e->param_count; i++) {
        const soft_param *p = &e->params[i];
        if (p->offset + p->size > need)
            need = p->offset + p->size;
        if (p->align > maxalign)
            maxalign = p->align;
    }
    size_t n = e->param_bytes > need ? e->param_bytes : need;
    if (kernelParams && extra) {
        soft_log("launch of %s: kernelParams and extra both given", e->name);
        return CUDA_ERROR_INVALID_VALUE;
    }
    char *buf = calloc(1, n ? n : 1);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (extra) {
        const void *ptr = NULL;
        const size_t *sizep = NULL;
        for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (i >= 64 || (extra[i] != CU_LAUNCH_PARAM_BUFFER_POINTER && extra[i] != CU_LAUNCH_PARAM_BUFFER_SIZE)) {
                soft_log("launch of %s: extra holds an unknown key or no CU_LAUNCH_PARAM_END", e->name);
                free(buf);
                return CUDA_ERROR_INVALID_VALUE;
            }
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                ptr = extra[i + 1];
            else
                sizep = extra[i + 1];
        }
        if ((need && !ptr) || !sizep) {
            soft_log("launch of %s: extra lacks CU_LAUNCH_PARAM_BUFFER_%s", e->name, !sizep ? "SIZE" : "POINTER");
            free(buf);
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (maxalign < 8)
            maxalign = 8;
        size_t most = ((size_t)need + maxalign - 1) / maxalign * maxalign;
        if (most < n)
            most = n;
        if (*sizep < need || *sizep > most) {
            soft_log("launch of %s: extra gives %zu parameter bytes, the kernel takes %u", e->name, *sizep, need);
            free(buf);
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (need)
            memcpy(buf, ptr, need);
    } else if (e->param_count) {
        if (!kernelParams) {
            soft_log("launch of %s: no parameters given, the kernel takes %u", e->name, e->param_count);
            free(buf);
            return CUDA_ERROR_INVALID_VALUE;
        }
        for (uint32_t i = 0; i < e->param_count; i++) {
            if (!kernelParams[i]) {
                soft_log("launch of %s: parameter %u is NULL", e->name, i);
                free(buf);
                return CUDA_ERROR_INVALID_VALUE;
            }
            memcpy(buf + e->params[i].offset, kernelParams[i], e->params[i].size);
        }
    }
    *out = buf;
    return CUDA_SUCCESS;
}

/* A copy of a launch (a graph instantiated) owns its own parameters. */
static bool clone_launch(soft_op *op)
{
    const soft_entry_info *e = op->u.launch.func->info;
    size_t n = e->param_bytes;
    for (uint32_t i = 0; i < e->param_count; i++)
        if (e->params[i].offset + e->params[i].size > n)
            n = e->params[i].offset + e->params[i].size;
    void *p = malloc(n ? n : 1);
    if (!p)
        return false;
    memcpy(p, op->u.launch.params, n);
    soft_image *refs = NULL;
    if (op->u.launch.nrefs) {
        refs = malloc(op->u.launch.nrefs * sizeof *refs);
        if (!refs) {
            free(p);
            return false;
        }
        memcpy(refs, op->u.launch.refs, op->u.launch.nrefs * sizeof *refs);
    }
    op->u.launch.params = p;
    op->u.launch.refs = refs;
    if (!op->u.launch.in_graph)
        soft_module_hold(op->u.launch.func->mod);
    return true;
}

CUresult soft_launch_op(const void *fh, const unsigned grid[3], const unsigned block[3], unsigned shared,
                        void **kernelParams, void **extra, soft_op **out)
{
    SOFT_TRY(soft_check_init());
    struct CUfunc_st *f = soft_func_get(fh);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    SOFT_TRY(soft_func_runnable(f));
    const soft_entry_info *e = f->info;
    if (!grid[0] || !grid[1] || !grid[2] || grid[0] > 2147483647u || grid[1] > 65535 || grid[2] > 65535 ||
        !block[0] || !block[1] || !block[2] || block[0] > 1024 || block[1] > 1024 || block[2] > 64 ||
        (uint64_t)block[0] * block[1] * block[2] > SOFT_MAX_THREADS) {
        soft_log("launch of %s: grid (%u,%u,%u) block (%u,%u,%u) out of range", e->name, grid[0], grid[1],
                 grid[2], block[0], block[1], block[2]);
        /* What cudart reports as cudaErrorInvalidConfiguration (driver.h). */
        return CUDA_ERROR_INVALID_CONFIGURATION;
    }
    uint32_t threads = block[0] * block[1] * block[2];
    if (e->max_threads && threads > e->max_threads) {
        soft_log("launch of %s: %u threads a block, the kernel allows %u", e->name, threads, e->max_threads);
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    }
    if (shared > (unsigned)f->max_dynamic_shared) {
        soft_log("launch of %s: %u bytes of dynamic shared memory, %d allowed", e->name, shared,
                 f->max_dynamic_shared);
        return CUDA_ERROR_INVALID_VALUE;
    }
    void *params;
    SOFT_TRY(pack(f, kernelParams, extra, &params));
    /* References as bound now: later binds do not reach this launch. */
    soft_image *refs;
    CUresult rr = soft_refs_snapshot(f->mod, &refs);
    if (rr != CUDA_SUCCESS) {
        free(params);
        return rr;
    }
    soft_op *op = soft_op_new(run_launch);
    if (!op) {
        free(params);
        free(refs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.launch.refs = refs;
    op->u.launch.nrefs = f->mod->nrefs;
    soft_module_hold(f->mod);
    op->drop = drop_launch;
    op->clone = clone_launch;
    op->u.launch.func = f;
    op->u.launch.params = params;
    op->u.launch.shared = shared;
    memcpy(op->u.launch.grid, grid, sizeof op->u.launch.grid);
    memcpy(op->u.launch.block, block, sizeof op->u.launch.block);
    *out = op;
    return CUDA_SUCCESS;
}

/* A straight-line kernel of at most this many threads runs in the call. */
#define SOFT_INLINE_THREADS_MAX 1024

static CUresult launch(const void *fh, const unsigned grid[3], const unsigned block[3], unsigned shared,
                       CUstream h, void **kernelParams, void **extra, bool ptds, bool cooperative)
{
    SOFT_TRY(soft_check_init());
    struct CUfunc_st *f = soft_func_get(fh);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    soft_op *op;
    SOFT_TRY(soft_launch_op(fh, grid, block, shared, kernelParams, extra, &op));
    if (cooperative) {
        /* Every block must be resident at once, as on a GPU: at most what
         * occupancy allows on every multiprocessor. */
        int per_sm = 0;
        unsigned threads = block[0] * block[1] * block[2];
        uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
        CUresult rc = cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (CUfunction)fh, (int)threads, shared);
        if (rc == CUDA_SUCCESS && blocks > (uint64_t)per_sm * SOFT_SM_COUNT) {
            soft_log("cooperative launch of %s: %llu blocks, at most %d can be resident", f->info->name,
                     (unsigned long long)blocks, per_sm * SOFT_SM_COUNT);
            rc = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
        }
        if (rc) {
            soft_op_free(op);
            return rc;
        }
        op->u.launch.cooperative = true;
    }
    uint64_t threads = (uint64_t)grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2];
    if (!cooperative && f->info->straight && threads <= SOFT_INLINE_THREADS_MAX && !soft_capturing(s) &&
        soft_stream_idle(s)) {
        /* Nothing to order after and a bounded run: here, without waking
         * the stream's worker (which costs more than such a kernel; an
         * agent answering a synchronisation waits for it). */
        run_launch(op, s->ctx);
        soft_op_free(op);
        return CUDA_SUCCESS;
    }
    return soft_stream_submit(s, op, NULL);
}

#define LAUNCH_ARGS CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
                    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,             \
                    unsigned int sharedMemBytes, CUstream hStream

#define LAUNCH_CALL(ptds)                                                                                \
    const unsigned grid[3] = { gridDimX, gridDimY, gridDimZ };                                           \
    const unsigned block[3] = { blockDimX, blockDimY, blockDimZ };                                       \
    return launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra, ptds, cooperative)

SOFT_API CUresult CUDAAPI cuLaunchKernel(LAUNCH_ARGS, void **kernelParams, void **extra)
{
    const bool cooperative = false;
    LAUNCH_CALL(false);
}

SOFT_API CUresult CUDAAPI cuLaunchKernel_ptsz(LAUNCH_ARGS, void **kernelParams, void **extra)
{
    const bool cooperative = false;
    LAUNCH_CALL(true);
}

SOFT_API CUresult CUDAAPI cuLaunchCooperativeKernel(LAUNCH_ARGS, void **kernelParams)
{
    void **extra = NULL;
    const bool cooperative = true;
    LAUNCH_CALL(false);
}

SOFT_API CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(LAUNCH_ARGS, void **kernelParams)
{
    void **extra = NULL;
    const bool cooperative = true;
    LAUNCH_CALL(true);
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra, bool ptds)
{
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    bool cooperative = false;
    for (unsigned i = 0; i < config->numAttrs; i++) {
        const CUlaunchAttribute *a = &config->attrs[i];
        if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
            cooperative = a->value.cooperative != 0;
        if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION &&
            a->value.clusterDim.x * a->value.clusterDim.y * a->value.clusterDim.z > 1)
            return CUDA_ERROR_NOT_SUPPORTED;   /* no clusters on compute capability 7.5 */
    }
    const unsigned grid[3] = { config->gridDimX, config->gridDimY, config->gridDimZ };
    const unsigned block[3] = { config->blockDimX, config->blockDimY, config->blockDimZ };
    return launch(f, grid, block, config->sharedMemBytes, config->hStream, kernelParams, extra, ptds, cooperative);
}

SOFT_API CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, false);
}

SOFT_API CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                                void **extra)
{
    return launch_ex(config, f, kernelParams, extra, true);
}

/* ptx_launch: one kernel launch: checks the geometry, hands blocks to a
 * pool of host threads (ptx_pool.c), and runs each block's warps round
 * robin, releasing bar.sync when every warp waits at it or has exited. */
#include "softgpu/ptx_exec.h"
#include "softgpu/ptx_pool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SHARED (227u << 10)   /* what an H100 block may opt into */

void ptx_run_fail(ptx_run *run, CUresult err, const char *fmt, ...)
{
    pthread_mutex_lock(&run->lock);
    if (run->err == CUDA_SUCCESS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(run->msg, sizeof run->msg, fmt, ap);
        va_end(ap);
        run->err = err;
    }
    pthread_mutex_unlock(&run->lock);
    atomic_store(&run->failed, 1);
}

/* Each host thread keeps its worker's buffers from launch to launch (a
 * fresh multi-megabyte register file per launch costs more than small
 * kernels run); the constants stay loaded while the program is the same. */
typedef struct worker_cache {
    ptx_worker k;
    uint32_t cap_warps, cap_regs;
    size_t cap_smem, cap_lmem, cap_pmem;
    uint64_t loaded_id, loaded_gen;   /* program whose constants R holds */
    uint32_t loaded_warps;
} worker_cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *p)
{
    worker_cache *c = p;
    if (!c)
        return;
    for (uint32_t i = 0; i < c->cap_warps; i++)
        free(c->k.warps[i].R);
    free(c->k.warps);
    free(c->k.smem);
    free(c->k.lmem);
    free(c->k.pmem);
    free(c);
}

static void cache_key_init(void)
{
    pthread_key_create(&cache_key, cache_free);
}

static bool ensure(uint8_t **buf, size_t *cap, size_t need)
{
    if (need == 0)
        need = 1;
    if (*cap >= need)
        return true;
    free(*buf);
    *buf = calloc(1, need);
    *cap = *buf ? need : 0;
    return *buf != NULL;
}

/* This thread's worker, sized for run; NULL when out of memory. */
static ptx_worker *worker_get(ptx_run *run)
{
    const soft_program *g = run->prog;
    pthread_once(&cache_once, cache_key_init);
    worker_cache *c = pthread_getspecific(cache_key);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c || pthread_setspecific(cache_key, c) != 0) {
            free(c);
            return NULL;
        }
    }
    if (c->cap_regs < g->nregs) {
        for (uint32_t i = 0; i < c->cap_warps; i++) {
            free(c->k.warps[i].R);
            c->k.warps[i].R = NULL;
        }
        c->cap_regs = g->nregs;
        c->loaded_warps = 0;
    }
    if (c->cap_warps < run->nwarps) {
        ptx_warp *w = realloc(c->k.warps, run->nwarps * sizeof *w);
        if (!w)
            return NULL;
        memset(w + c->cap_warps, 0, (run->nwarps - c->cap_warps) * sizeof *w);
        c->k.warps = w;
        c->cap_warps = run->nwarps;
    }
    if (c->loaded_id != g->id || c->loaded_gen != g->bind_gen) {
        c->loaded_id = g->id;
        c->loaded_gen = g->bind_gen;
        c->loaded_warps = 0;
    }
    for (uint32_t i = 0; i < run->nwarps; i++) {
        ptx_warp *w = &c->k.warps[i];
        w->index = i;
        if (!w->R) {
            w->R = calloc(c->cap_regs ? c->cap_regs : 1, sizeof *w->R);
            if (!w->R)
                return NULL;
            if (i < c->loaded_warps)
                c->loaded_warps = i;
        }
    }
    for (uint32_t i = c->loaded_warps; i < run->nwarps; i++) {
        ptx_warp *w = &c->k.warps[i];
        for (uint32_t k = 0; k < g->nconsts; k++)
            for (unsigned l = 0; l < PTX_WARP; l++)
                w->R[g->consts[k].reg][l] = g->consts[k].value;
        for (uint32_t k = 0; k < g->nglobals; k++)
            for (unsigned l = 0; l < PTX_WARP; l++)
                w->R[g->globals[k].reg][l] = g->globals[k].addr;
    }
    if (run->nwarps > c->loaded_warps)
        c->loaded_warps = run->nwarps;
    if (!ensure(&c->k.smem, &c->cap_smem, run->shared_bytes) ||
        !ensure(&c->k.lmem, &c->cap_lmem, (size_t)run->block_threads * run->lstride) ||
        !ensure(&c->k.pmem, &c->cap_pmem, (size_t)run->block_threads * run->pstride))
        return NULL;
    c->k.run = run;
    c->k.cache_lo = c->k.cache_hi = 0;
    return &c->k;
}

static void set_row(uint64_t *row, uint64_t v)
{
    for (unsigned l = 0; l < PTX_WARP; l++)
        row[l] = v;
}

/* The registers that stay the same for every block of a launch. */
static void launch_rows(ptx_worker *k, unsigned worker_index)
{
    ptx_run *run = k->run;
    const soft_launch *L = run->launch;
    const uint32_t *bd = L->block, *gd = L->grid;
    for (uint32_t i = 0; i < run->nwarps; i++) {
        uint64_t (*R)[PTX_WARP] = k->warps[i].R;
        for (unsigned l = 0; l < PTX_WARP; l++) {
            uint32_t t = i * PTX_WARP + l;
            R[SR_TID_X][l] = t % bd[0];
            R[SR_TID_Y][l] = (t / bd[0]) % bd[1];
            R[SR_TID_Z][l] = t / (bd[0] * bd[1]);
            R[SR_LANEID][l] = l;
            R[SR_LANEMASK_EQ][l] = 1u << l;
            R[SR_LANEMASK_LT][l] = (1u << l) - 1;
            R[SR_LANEMASK_LE][l] = (uint32_t)((2ull << l) - 1);
            R[SR_LANEMASK_GT][l] = (uint32_t)(~0ull << (l + 1));
            R[SR_LANEMASK_GE][l] = (uint32_t)(~0ull << l);
        }
        set_row(R[SR_ZERO], 0);
        set_row(R[SR_ONE], 1);
        set_row(R[SR_NTID_X], bd[0]);
        set_row(R[SR_NTID_Y], bd[1]);
        set_row(R[SR_NTID_Z], bd[2]);
        set_row(R[SR_NCTAID_X], gd[0]);
        set_row(R[SR_NCTAID_Y], gd[1]);
        set_row(R[SR_NCTAID_Z], gd[2]);
        set_row(R[SR_WARPID], i);
        set_row(R[SR_NWARPID], run->nwarps);
        set_row(R[SR_SMID], worker_index);
        set_row(R[SR_NSMID], 1);
        set_row(R[SR_GRIDID], 1);
        set_row(R[SR_DYN_SMEM], L->dynamic_shared_bytes);
        set_row(R[SR_TOTAL_SMEM], run->shared_bytes);
        set_row(R[SR_ENVREG1], run->workspace >> 32);
        set_row(R[SR_ENVREG2], (uint32_t)run->workspace);
    }
}

static void block_start(ptx_worker *k, uint64_t b)
{
    ptx_run *run = k->run;
    const uint32_t *gd = run->launch->grid;
    k->ctaid[0] = (uint32_t)(b % gd[0]);
    k->ctaid[1] = (uint32_t)((b / gd[0]) % gd[1]);
    k->ctaid[2] = (uint32_t)(b / ((uint64_t)gd[0] * gd[1]));
    uint32_t sp0 = (run->entry->depot + 15) / 16 * 16;
    uint32_t pc0 = run->entry->pc;
    k->red_popc = 0;
    k->red_and = true;
    k->red_or = false;
    for (uint32_t i = 0; i < run->nwarps; i++) {
        ptx_warp *w = &k->warps[i];
        uint64_t (*R)[PTX_WARP] = w->R;
        uint32_t first = i * PTX_WARP;
        w->live = run->block_threads - first >= PTX_WARP
                      ? PTX_FULL : (1u << (run->block_threads - first)) - 1;
        w->bar = 0;
        w->wsync = 0;
        w->mwait = 0;
        for (unsigned l = 0; l < PTX_WARP; l++) {
            w->lpc[l] = pc0;
            w->frame[l] = UINT32_MAX;
            w->fp[l] = 0;
            w->sp[l] = sp0;
            w->cc[l] = 0;
        }
        set_row(R[SR_CTAID_X], k->ctaid[0]);
        set_row(R[SR_CTAID_Y], k->ctaid[1]);
        set_row(R[SR_CTAID_Z], k->ctaid[2]);
    }
}

/* Runs the current block to the end; false on a fault. */
static bool block_run(ptx_worker *k)
{
    ptx_run *run = k->run;
    for (;;) {
        bool live = false;
        for (uint32_t i = 0; i < run->nwarps; i++) {
            ptx_warp *w = &k->warps[i];
            if ((w->live & ~w->bar) && ptx_warp_run(k, w) == WARP_FAULT)
                return false;
            live |= w->live != 0;
        }
        if (!live)
            return true;
        /* a warp yielded (a failed mbarrier wait, nanosleep): run them all
         * again until every live lane waits at the barrier */
        bool yielded = false;
        for (uint32_t i = 0; i < run->nwarps; i++)
            yielded |= (k->warps[i].live & ~k->warps[i].bar) != 0;
        if (yielded) {
            if (atomic_load(&run->failed))
                return false;
            continue;
        }
        /* every live lane of every warp waits at the barrier: release it,
         * giving bar.red's lanes the block's result */
        for (uint32_t i = 0; i < run->nwarps; i++) {
            ptx_warp *w = &k->warps[i];
            for (uint32_t r = w->bar; r; r &= r - 1) {
                unsigned l = (unsigned)__builtin_ctz(r);
                const ptx_insn *in = &run->prog->code[w->lpc[l] - 1];
                if (in->op != OP_BAR || !in->mode)
                    continue;
                w->R[in->d][l] = in->mode == 1 ? k->red_popc : in->mode == 2 ? k->red_and : k->red_or;
            }
            w->bar = 0;
        }
        k->red_popc = 0;
        k->red_and = true;
        k->red_or = false;
        if (atomic_load(&run->failed))
            return false;
    }
}

typedef struct worker_arg {
    ptx_run *run;
    unsigned index;
} worker_arg;

static void worker_main(void *arg)
{
    worker_arg *wa = arg;
    ptx_run *run = wa->run;
    if (atomic_load(&run->next_block) >= run->nblocks)
        return;   /* came late: nothing left */
    ptx_worker *k = worker_get(run);
    if (!k) {
        ptx_run_fail(run, CUDA_ERROR_OUT_OF_MEMORY, "kernel %s: out of host memory",
                     run->entry->name);
        return;
    }
    launch_rows(k, wa->index);
    for (;;) {
        if (atomic_load(&run->failed))
            break;
        uint64_t b = atomic_fetch_add(&run->next_block, 1);
        if (b >= run->nblocks)
            break;
        block_start(k, b);
        if (!block_run(k))
            break;
    }
    k->run = NULL;
}

/* A cooperative launch: every block on a host thread of its own, all
 * started before any runs (a block spinning at grid.sync() waits for every
 * other one). Threads that cannot start fail the launch before any block
 * runs. */
typedef struct coop_gate {
    pthread_mutex_t lock;
    pthread_cond_t opened;
    bool open;
} coop_gate;

typedef struct coop_start {
    coop_gate *gate;
    worker_arg *arg;
} coop_start;

static void *coop_thread(void *p)
{
    coop_start *s = p;
    pthread_mutex_lock(&s->gate->lock);
    while (!s->gate->open)
        pthread_cond_wait(&s->gate->opened, &s->gate->lock);
    pthread_mutex_unlock(&s->gate->lock);
    if (!atomic_load(&s->arg->run->failed))
        worker_main(s->arg);
    return NULL;
}

static void run_cooperative(ptx_run *run, unsigned n, worker_arg *args)
{
    coop_gate gate = { .open = false };
    pthread_mutex_init(&gate.lock, NULL);
    pthread_cond_init(&gate.opened, NULL);
    pthread_t *threads = calloc(n, sizeof *threads);
    coop_start *starts = calloc(n, sizeof *starts);
    unsigned started = 1;
    if (threads && starts) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1u << 20);
        for (; started < n; started++) {
            starts[started] = (coop_start){ &gate, &args[started] };
            if (pthread_create(&threads[started], &attr, coop_thread, &starts[started]) != 0)
                break;
        }
        pthread_attr_destroy(&attr);
    }
    if (!threads || !starts || started < n)
        ptx_run_fail(run, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                     "kernel %s: cannot start a host thread for each of %u cooperative blocks",
                     run->entry->name, n);
    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.opened);
    pthread_mutex_unlock(&gate.lock);
    if (!atomic_load(&run->failed))
        worker_main(&args[0]);
    for (unsigned i = 1; i < started; i++)
        pthread_join(threads[i], NULL);
    pthread_cond_destroy(&gate.opened);
    pthread_mutex_destroy(&gate.lock);
    free(starts);
    free(threads);
}

CUresult soft_program_launch(soft_program *prog, const soft_launch *L, char *msg, size_t msglen)
{
    char dummy[1];
    if (!msg || msglen == 0) {
        msg = dummy;
        msglen = sizeof dummy;
    }
    msg[0] = 0;
    if (!prog || !L || L->entry >= prog->nentries) {
        snprintf(msg, msglen, "launch: no such entry");
        return CUDA_ERROR_INVALID_VALUE;
    }
    const ptx_func *entry = &prog->funcs[prog->entries[L->entry]];
    if (entry->info.refusal) {
        snprintf(msg, msglen, "%s", entry->info.refusal);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    uint64_t threads = (uint64_t)L->block[0] * L->block[1] * L->block[2];
    uint64_t nblocks = (uint64_t)L->grid[0] * L->grid[1] * L->grid[2];
    if (threads == 0 || nblocks == 0 || L->block[0] > 1024 || L->block[1] > 1024 ||
        L->block[2] > 64 || threads > 1024 || L->grid[1] > 65535 || L->grid[2] > 65535 ||
        L->grid[0] > 0x7fffffffu) {
        snprintf(msg, msglen, "kernel %s: bad launch geometry grid (%u,%u,%u) block (%u,%u,%u)",
                 entry->name, L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1],
                 L->block[2]);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (threads > entry->info.max_threads) {
        snprintf(msg, msglen, "kernel %s: %llu threads per block, at most %u",
                 entry->name, (unsigned long long)threads, entry->info.max_threads);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (entry->info.param_bytes && !L->params) {
        snprintf(msg, msglen, "kernel %s: no parameters given", entry->name);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (uint32_t i = 0; i < prog->nglobals; i++)
        if (!prog->globals[i].addr) {
            snprintf(msg, msglen, "kernel %s: global '%s' is not bound", entry->name,
                     prog->globals[i].name);
            return CUDA_ERROR_INVALID_VALUE;
        }
    /* The limit counts this entry's variables; the buffer holds the
     * module-wide layout their addresses come from. */
    uint64_t counted = (uint64_t)entry->info.static_shared_bytes + L->dynamic_shared_bytes;
    uint64_t shared = L->dynamic_shared_bytes ? (uint64_t)prog->dyn_shared_off + L->dynamic_shared_bytes
                                               : prog->shared_bytes;
    if (counted > MAX_SHARED) {
        snprintf(msg, msglen, "kernel %s: %llu bytes of shared memory, at most %u",
                 entry->name, (unsigned long long)counted, MAX_SHARED);
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    }
    ptx_run *run = calloc(1, sizeof *run);
    if (!run)
        return CUDA_ERROR_OUT_OF_MEMORY;
    run->prog = prog;
    run->entry = entry;
    run->launch = L;
    run->kparams = L->params;
    run->block_threads = (uint32_t)threads;
    run->nwarps = (uint32_t)((threads + PTX_WARP - 1) / PTX_WARP);
    run->shared_bytes = (uint32_t)shared;
    run->lstride = (entry->depot + 15) / 16 * 16 + (prog->has_calls ? PTX_STACK_BYTES : 0);
    if (run->lstride == 0)
        run->lstride = 16;
    run->pstride = (prog->param_bytes + 15) / 16 * 16;
    if (run->pstride == 0)
        run->pstride = 16;
    run->nblocks = nblocks;
    pthread_mutex_init(&run->lock, NULL);
    unsigned n = L->threads;
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (unsigned)c : 1;
    }
    if (n > 256)
        n = 256;
    if (n > nblocks || L->cooperative)
        n = (unsigned)nblocks;   /* the driver layer bounds a cooperative grid */
    uint64_t workspace[2] = { 0, 0 };   /* grid.sync()'s counter lives at +4 */
    if (L->cooperative) {
        run->cooperative = true;
        run->workspace = (uint64_t)(uintptr_t)workspace;
        run->workspace_size = sizeof workspace;
    }
    worker_arg *args = calloc(n, sizeof *args);
    void **argv = calloc(n, sizeof *argv);
    CUresult rc;
    if (!args || !argv) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    for (unsigned i = 0; i < n; i++) {
        args[i] = (worker_arg){ .run = run, .index = i };
        argv[i] = &args[i];
    }
    if (L->cooperative)
        run_cooperative(run, n, args);
    else if (ptx_pool_run(n, worker_main, argv) != 0)
        ptx_run_fail(run, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "kernel %s: cannot start threads",
                     entry->name);
    rc = run->err;
    if (rc != CUDA_SUCCESS)
        snprintf(msg, msglen, "%s", run->msg);
out:
    free(args);
    free(argv);
    pthread_mutex_destroy(&run->lock);
    free(run);
    return rc;
}

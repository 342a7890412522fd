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

static void worker_free(ptx_worker *k)
{
    if (!k)
        return;
    if (k->warps)
        for (uint32_t i = 0; i < k->run->nwarps; i++)
            free(k->warps[i].R);
    free(k->warps);
    free(k->smem);
    free(k->lmem);
    free(k->pmem);
}

static bool worker_init(ptx_worker *k, ptx_run *run)
{
    const soft_program *g = run->prog;
    memset(k, 0, sizeof *k);
    k->run = run;
    k->warps = calloc(run->nwarps, sizeof *k->warps);
    k->smem = calloc(run->shared_bytes ? run->shared_bytes : 1, 1);
    k->lmem = calloc((size_t)run->block_threads, run->lstride);
    k->pmem = calloc((size_t)run->block_threads, run->pstride);
    if (!k->warps || !k->smem || !k->lmem || !k->pmem)
        return false;
    for (uint32_t i = 0; i < run->nwarps; i++) {
        ptx_warp *w = &k->warps[i];
        w->index = i;
        w->R = calloc(g->nregs, sizeof *w->R);
        if (!w->R)
            return false;
        for (uint32_t c = 0; c < g->nconsts; c++)
            for (unsigned l = 0; l < PTX_WARP; l++)
                w->R[g->consts[c].reg][l] = g->consts[c].value;
        for (uint32_t c = 0; c < g->nglobals; c++)
            for (unsigned l = 0; l < PTX_WARP; l++)
                w->R[g->globals[c].reg][l] = g->globals[c].addr;
    }
    return true;
}

static void set_row(uint64_t *row, uint64_t v)
{
    for (unsigned l = 0; l < PTX_WARP; l++)
        row[l] = v;
}

static void block_start(ptx_worker *k, uint64_t b, unsigned worker_index)
{
    ptx_run *run = k->run;
    const soft_launch *L = run->launch;
    const uint32_t *bd = L->block, *gd = L->grid;
    k->ctaid[0] = (uint32_t)(b % gd[0]);
    k->ctaid[1] = (uint32_t)((b / gd[0]) % gd[1]);
    k->ctaid[2] = (uint32_t)(b / ((uint64_t)gd[0] * gd[1]));
    uint32_t sp0 = (run->entry->depot + 15) / 16 * 16;
    k->red_popc = 0;
    k->red_and = true;
    k->red_or = false;
    for (uint32_t i = 0; i < run->nwarps; i++) {
        ptx_warp *w = &k->warps[i];
        uint64_t (*R)[PTX_WARP] = w->R;
        w->live = 0;
        w->bar = 0;
        for (unsigned l = 0; l < PTX_WARP; l++) {
            uint32_t t = i * PTX_WARP + l;
            if (t < run->block_threads)
                w->live |= 1u << l;
            R[SR_TID_X][l] = t % bd[0];
            R[SR_TID_Y][l] = (t / bd[0]) % bd[1];
            R[SR_TID_Z][l] = t / (bd[0] * bd[1]);
            R[SR_LANEID][l] = l;
            R[SR_LANEMASK_EQ][l] = 1u << l;
            R[SR_LANEMASK_LT][l] = (1u << l) - 1;
            R[SR_LANEMASK_LE][l] = (uint32_t)((2ull << l) - 1);
            R[SR_LANEMASK_GT][l] = (uint32_t)(~0ull << (l + 1));
            R[SR_LANEMASK_GE][l] = (uint32_t)(~0ull << l);
            w->lpc[l] = run->entry->pc;
            w->frame[l] = UINT32_MAX;
            w->fp[l] = 0;
            w->sp[l] = sp0;
            w->cc[l] = 0;
        }
        set_row(R[SR_ZERO], 0);
        set_row(R[SR_NTID_X], bd[0]);
        set_row(R[SR_NTID_Y], bd[1]);
        set_row(R[SR_NTID_Z], bd[2]);
        set_row(R[SR_CTAID_X], k->ctaid[0]);
        set_row(R[SR_CTAID_Y], k->ctaid[1]);
        set_row(R[SR_CTAID_Z], k->ctaid[2]);
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
    ptx_worker k;
    if (!worker_init(&k, run)) {
        worker_free(&k);
        ptx_run_fail(run, CUDA_ERROR_OUT_OF_MEMORY, "kernel %s: out of host memory",
                     run->entry->name);
        return;
    }
    for (;;) {
        if (atomic_load(&run->failed))
            break;
        uint64_t b = atomic_fetch_add(&run->next_block, 1);
        if (b >= run->nblocks)
            break;
        block_start(&k, b, wa->index);
        if (!block_run(&k))
            break;
    }
    worker_free(&k);
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
    uint64_t shared = L->dynamic_shared_bytes ? (uint64_t)prog->dyn_shared_off + L->dynamic_shared_bytes
                                               : prog->shared_bytes;
    if (shared > MAX_SHARED) {
        snprintf(msg, msglen, "kernel %s: %llu bytes of shared memory, at most %u",
                 entry->name, (unsigned long long)shared, MAX_SHARED);
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
    if (n > nblocks)
        n = (unsigned)nblocks;
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
    if (ptx_pool_run(n, worker_main, argv) != 0)
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

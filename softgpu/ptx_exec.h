/* ptx_exec: the warp interpreter and the state it runs on. ptx_launch.c
 * owns launches (geometry, the block pool, barriers between warps);
 * ptx_exec.c runs one warp until it exits, waits at a barrier or faults. */
#ifndef RIG_SOFTGPU_PTX_EXEC_H
#define RIG_SOFTGPU_PTX_EXEC_H

#include "softgpu/ptx_ir.h"

#include <pthread.h>
#include <stdatomic.h>

/* Per-lane local memory beyond the entry's depot when the module makes calls:
 * call frames (and saved registers of recursive functions) live there. */
#define PTX_STACK_BYTES (16u << 10)
/* A call frame's header in local memory: return pc, call site, caller's
 * frame and depot, callee (an indirect call's is known only then). */
#define PTX_FRAME_HDR 32u

/* What all workers of one launch share. */
typedef struct ptx_run {
    const soft_program *prog;
    const ptx_func *entry;
    const soft_launch *launch;
    const uint8_t *kparams;
    uint32_t block_threads, nwarps;
    uint32_t shared_bytes;       /* static + dynamic */
    uint32_t lstride;            /* per-lane local memory bytes */
    uint32_t pstride;            /* per-lane .func parameter bytes */
    uint64_t nblocks;
    bool cooperative;
    uint64_t workspace, workspace_size;  /* cooperative: the grid workspace, global memory */
    _Atomic uint64_t next_block;
    _Atomic int failed;          /* stop taking blocks */
    pthread_mutex_t lock;        /* err, msg and printf output */
    CUresult err;
    char msg[256];
} ptx_run;

typedef struct ptx_warp {
    uint64_t (*R)[PTX_WARP];     /* nregs rows */
    uint32_t index;              /* warp in block */
    uint32_t live;               /* lanes not exited */
    uint32_t bar;                /* lanes waiting at bar.sync */
    uint32_t wsync;              /* lanes waiting for others at a .sync warp op */
    uint32_t mwait;              /* lanes after a failed mbarrier wait or at
                                  * nanosleep: they go on once the others (and
                                  * the block's other warps) ran */
    uint32_t lpc[PTX_WARP];      /* pc of each lane not in the running group */
    uint32_t frame[PTX_WARP];    /* local offset of the current call frame */
    uint32_t fp[PTX_WARP];       /* local offset of the current depot */
    uint32_t sp[PTX_WARP];       /* first free local byte */
    uint8_t cc[PTX_WARP];        /* carry flags */
} ptx_warp;

/* One host thread's state, reused across the blocks it runs. */
typedef struct ptx_worker {
    ptx_run *run;
    ptx_warp *warps;
    uint8_t *smem;               /* shared_bytes */
    uint8_t *lmem;               /* block_threads * lstride */
    uint8_t *pmem;               /* block_threads * pstride */
    uint64_t cache_lo, cache_hi; /* last global range found */
    uint32_t ctaid[3];
    /* bar.red of the current barrier: threads with a true predicate, and
     * whether all / any had one */
    uint32_t red_popc;
    bool red_and, red_or;
} ptx_worker;

enum { WARP_EXITED, WARP_BARRIER, WARP_FAULT };

/* Runs warp w of the worker's current block from its lanes' pcs; returns
 * WARP_EXITED when every lane exited, WARP_BARRIER when every live lane waits
 * at bar.sync or, lanes left without bar set, yields after a failed mbarrier
 * wait or a nanosleep, WARP_FAULT after recording the launch's error. */
int ptx_warp_run(ptx_worker *k, ptx_warp *w);

/* Runs an image instruction (tex, tld4, txq, suld, sust, suq) for lanes m
 * (ptx_image.c); false after recording the launch's error. */
bool ptx_image_exec(ptx_worker *k, ptx_warp *w, const ptx_insn *in, uint32_t m);

/* Records the launch's first error (later ones are dropped) and stops it. */
void ptx_run_fail(ptx_run *run, CUresult err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

/* Stream memory operations: cuStreamWriteValue32/64 writes a word when the
 * stream gets there; cuStreamWaitValue32/64 holds the stream until a word
 * meets a condition (written by a kernel, another stream or the host). The
 * wait polls, backing off to a millisecond, and never holds the memory
 * lifetime lock while it sleeps, so frees and other streams go on. */
#include "softgpu/driver.h"

#include <time.h>

/* Reads or writes the word at addr, if it is still device-visible memory;
 * false (and the context poisoned) when it is not. */
static bool access_word(struct CUctx_st *ctx, uint64_t addr, bool wide, bool write, uint64_t *v)
{
    unsigned n = wide ? 8 : 4;
    soft_mem_use_begin();
    bool ok = soft_range_covers(addr, n);
    if (ok && write) {
        if (wide)
            __atomic_store_n((uint64_t *)(uintptr_t)addr, *v, __ATOMIC_SEQ_CST);
        else
            __atomic_store_n((uint32_t *)(uintptr_t)addr, (uint32_t)*v, __ATOMIC_SEQ_CST);
    } else if (ok) {
        *v = wide ? __atomic_load_n((uint64_t *)(uintptr_t)addr, __ATOMIC_SEQ_CST)
                  : __atomic_load_n((uint32_t *)(uintptr_t)addr, __ATOMIC_SEQ_CST);
    }
    soft_mem_use_end();
    if (!ok) {
        soft_ctx_poison(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
        soft_log("CUDA_ERROR_ILLEGAL_ADDRESS: stream memory operation on 0x%llx, no longer allocated",
                 (unsigned long long)addr);
    }
    return ok;
}

static void run_write(soft_op *op, struct CUctx_st *ctx)
{
    uint64_t v = op->u.memop.value;
    access_word(ctx, op->u.memop.addr, op->u.memop.wide, true, &v);
}

static bool met(uint64_t have, uint64_t want, unsigned how, bool wide)
{
    if (!wide) {
        have = (uint32_t)have;
        want = (uint32_t)want;
    }
    switch (how) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return wide ? (int64_t)(have - want) >= 0 : (int32_t)(uint32_t)(have - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return have == want;
    case CU_STREAM_WAIT_VALUE_AND: return (have & want) != 0;
    default: /* NOR */
        return wide ? ~(have | want) != 0 : (uint32_t)~(have | want) != 0;
    }
}

static void run_wait(soft_op *op, struct CUctx_st *ctx)
{
    unsigned how = op->u.memop.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
    long ns = 1000;
    for (;;) {
        uint64_t v;
        if (!access_word(ctx, op->u.memop.addr, op->u.memop.wide, false, &v))
            return;
        if (met(v, op->u.memop.value, how, op->u.memop.wide))
            return;
        if (soft_ctx_status(ctx) != CUDA_SUCCESS)
            return;   /* the context failed meanwhile: nothing will come */
        struct timespec ts = { 0, ns };
        nanosleep(&ts, NULL);
        if (ns < 1000000)
            ns *= 2;
    }
}

static CUresult memop(CUstream h, CUdeviceptr addr, uint64_t value, unsigned flags, bool wide, bool wait,
                      bool ptds)
{
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    if (addr % (wide ? 8 : 4))
        return CUDA_ERROR_INVALID_VALUE;
    if (wait ? (flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) > CU_STREAM_WAIT_VALUE_NOR
             : flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
        return CUDA_ERROR_INVALID_VALUE;
    if (!soft_range_covers(addr, wide ? 8 : 4))
        return CUDA_ERROR_INVALID_VALUE;
    soft_op *op = soft_op_new(wait ? run_wait : run_write);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.memop.addr = addr;
    op->u.memop.value = value;
    op->u.memop.flags = flags;
    op->u.memop.wide = wide;
    return soft_stream_submit(s, op, NULL);
}

/* Each name in its v1 and v2 ABI (the same arguments) and per-thread form. */
#define MEMOP(name, T, wide, wait)                                                                        \
    SOFT_API CUresult CUDAAPI name(CUstream s, CUdeviceptr a, T v, unsigned int f)                        \
    { return memop(s, a, v, f, wide, wait, false); }                                                      \
    SOFT_API CUresult CUDAAPI name##_ptsz(CUstream s, CUdeviceptr a, T v, unsigned int f)                 \
    { return memop(s, a, v, f, wide, wait, true); }                                                       \
    SOFT_API CUresult CUDAAPI name##_v2(CUstream s, CUdeviceptr a, T v, unsigned int f)                   \
    { return memop(s, a, v, f, wide, wait, false); }                                                      \
    SOFT_API CUresult CUDAAPI name##_v2_ptsz(CUstream s, CUdeviceptr a, T v, unsigned int f)              \
    { return memop(s, a, v, f, wide, wait, true); }

MEMOP(cuStreamWriteValue32, cuuint32_t, false, false)
MEMOP(cuStreamWriteValue64, cuuint64_t, true, false)
MEMOP(cuStreamWaitValue32, cuuint32_t, false, true)
MEMOP(cuStreamWaitValue64, cuuint64_t, true, true)

/* A batch: the operations in order on one stream, checked whole before any
 * is queued. Flushes and barriers have nothing to do in memory the CPU
 * keeps coherent. */
static CUresult batch(CUstream h, unsigned count, const CUstreamBatchMemOpParams *ops, unsigned flags, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (flags || (count && !ops) || count > 256)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        const CUstreamBatchMemOpParams *p = &ops[i];
        switch (p->operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
            bool wide = p->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 || p->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
            /* waitValue and writeValue share their address's place. */
            if (p->waitValue.address % (wide ? 8 : 4) || !soft_range_covers(p->waitValue.address, wide ? 8 : 4))
                return CUDA_ERROR_INVALID_VALUE;
            break;
        }
        case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        case CU_STREAM_MEM_OP_BARRIER:
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (unsigned i = 0; i < count; i++) {
        const CUstreamBatchMemOpParams *p = &ops[i];
        CUresult rc = CUDA_SUCCESS;
        switch (p->operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
            rc = memop(h, p->waitValue.address, p->waitValue.value, p->waitValue.flags, false, true, ptds);
            break;
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
            rc = memop(h, p->waitValue.address, p->waitValue.value64, p->waitValue.flags, true, true, ptds);
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
            rc = memop(h, p->writeValue.address, p->writeValue.value, p->writeValue.flags, false, false, ptds);
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            rc = memop(h, p->writeValue.address, p->writeValue.value64, p->writeValue.flags, true, false, ptds);
            break;
        default:
            break;
        }
        if (rc)
            return rc;
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamBatchMemOp(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p, unsigned int f)
{
    return batch(s, n, p, f, false);
}

SOFT_API CUresult CUDAAPI cuStreamBatchMemOp_ptsz(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p,
                                                  unsigned int f)
{
    return batch(s, n, p, f, true);
}

SOFT_API CUresult CUDAAPI cuStreamBatchMemOp_v2(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p,
                                                unsigned int f)
{
    return batch(s, n, p, f, false);
}

SOFT_API CUresult CUDAAPI cuStreamBatchMemOp_v2_ptsz(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p,
                                                     unsigned int f)
{
    return batch(s, n, p, f, true);
}

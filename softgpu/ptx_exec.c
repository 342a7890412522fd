/* ptx_exec: runs one warp in lockstep. Lane-major registers R[reg][32];
 * the lanes at the lowest pc step together (the "group"); the others keep
 * their pc in lpc[] until the group reaches or passes them. One dispatch per
 * warp instruction, then a loop over the group's lanes. */
#include "softgpu/ptx_exec.h"
#include "softgpu/ptx_math.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define BIT(l) (1u << (l))

/* Runs body for each lane l of m: a plain loop when all 32 are active. */
#define EACH(...)                                                         \
    do {                                                                   \
        if (m == PTX_FULL) {                                               \
            for (unsigned l = 0; l < PTX_WARP; l++) {                      \
                __VA_ARGS__;                                               \
            }                                                              \
        } else {                                                           \
            for (uint32_t mm_ = m; mm_; mm_ &= mm_ - 1) {                  \
                unsigned l = (unsigned)__builtin_ctz(mm_);                 \
                __VA_ARGS__;                                                    \
            }                                                              \
        }                                                                  \
    } while (0)

#define F32(x) ptx_f32(x)
#define F64(x) ptx_f64(x)
#define B32(x) ptx_f32_bits(x)
#define B64(x) ptx_f64_bits(x)

/* ---- memory ---- */

static uint8_t *global_slow(ptx_worker *k, uint64_t a, unsigned size)
{
    const ptx_run *run = k->run;
    const soft_program *g = run->prog;
    uint64_t base = 0, len = 0;
    bool found = false;
    for (uint32_t i = 0; i < g->nglobals && !found; i++) {
        const ptx_global *gl = &g->globals[i];
        if (gl->addr && a >= gl->addr && a - gl->addr < gl->info.size) {
            base = gl->addr;
            len = gl->info.size;
            found = true;
        }
    }
    if (!found && run->workspace_size && a >= run->workspace && a - run->workspace < run->workspace_size) {
        base = run->workspace;
        len = run->workspace_size;
        found = true;
    }
    const soft_memory *mem = run->launch->memory;
    if (!found && mem && mem->find)
        found = mem->find(mem->ctx, a, &base, &len);
    if (!found || a < base || a - base > len || len - (a - base) < size)
        return NULL;
    k->cache_lo = base;
    k->cache_hi = base + len;
    return (uint8_t *)(uintptr_t)a;
}

static inline uint8_t *global_ptr(ptx_worker *k, uint64_t a, unsigned size)
{
    if (a >= k->cache_lo && a + size <= k->cache_hi && a + size > a)
        return (uint8_t *)(uintptr_t)a;
    return global_slow(k, a, size);
}

static inline uint8_t *shared_ptr(ptx_worker *k, uint64_t a, unsigned size)
{
    uint32_t n = k->run->shared_bytes;
    if (a > n || n - a < size)
        return NULL;
    return k->smem + a;
}

static inline uint8_t *local_base(ptx_worker *k, const ptx_warp *w, unsigned l)
{
    return k->lmem + (size_t)(w->index * PTX_WARP + l) * k->run->lstride;
}

static inline uint8_t *local_ptr(ptx_worker *k, const ptx_warp *w, unsigned l, uint64_t a,
                                 unsigned size)
{
    uint32_t n = k->run->lstride;
    if (a > n || n - a < size)
        return NULL;
    return local_base(k, w, l) + a;
}

static uint8_t *generic_ptr(ptx_worker *k, uint64_t a, unsigned size)
{
    if (a >= k->cache_lo && a + size <= k->cache_hi && a + size > a)
        return (uint8_t *)(uintptr_t)a;
    const ptx_run *run = k->run;
    uint64_t s = (uintptr_t)k->smem;
    if (k->smem && a >= s && a - s < run->shared_bytes)
        return run->shared_bytes - (a - s) >= size ? (uint8_t *)(uintptr_t)a : NULL;
    uint64_t lb = (uintptr_t)k->lmem;
    uint64_t ln = (uint64_t)run->block_threads * run->lstride;
    if (k->lmem && a >= lb && a - lb < ln)
        return ln - (a - lb) >= size ? (uint8_t *)(uintptr_t)a : NULL;
    return global_slow(k, a, size);
}

static inline uint8_t *space_ptr(ptx_worker *k, const ptx_warp *w, int space, unsigned l,
                                 uint64_t a, unsigned size)
{
    switch (space) {
    case SP_GLOBAL:
    case SP_CONST:
        return global_ptr(k, a, size);
    case SP_SHARED:
        return shared_ptr(k, a, size);
    case SP_LOCAL:
        return local_ptr(k, w, l, a, size);
    default:
        return generic_ptr(k, a, size);
    }
}

uint8_t *ptx_lane_ptr(ptx_worker *k, const ptx_warp *w, int space, unsigned l, uint64_t a,
                      unsigned size)
{
    return space_ptr(k, w, space, l, a, size);
}

static inline uint64_t load_n(const uint8_t *p, unsigned n)
{
    switch (n) {
    case 1: return *p;
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static inline void store_n(uint8_t *p, unsigned n, uint64_t v)
{
    switch (n) {
    case 1: *p = (uint8_t)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

/* A vector access of 8 or 16 aligned bytes moves as one: CUB's decoupled
 * look-back publishes a tile's status and value with one st.v2 and reads
 * them with one ld.v2 from other blocks, and must never see one half new. */
static inline void load_whole(uint8_t *to, const uint8_t *p, unsigned bytes)
{
    if (bytes == 8 && ((uintptr_t)p & 7) == 0) {
        uint64_t v = __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
        memcpy(to, &v, 8);
#ifdef __SSE2__
    } else if (bytes == 16 && ((uintptr_t)p & 15) == 0) {
        /* An aligned 16-byte SSE access is single-copy atomic on x86 CPUs
         * with AVX (Intel SDM 3A 9.1.1; AMD likewise). */
        __m128i v = *(const volatile __m128i *)p;
        memcpy(to, &v, 16);
#endif
    } else {
        memcpy(to, p, bytes);
    }
}

static inline void store_whole(uint8_t *p, const uint8_t *from, unsigned bytes)
{
    if (bytes == 8 && ((uintptr_t)p & 7) == 0) {
        uint64_t v;
        memcpy(&v, from, 8);
        __atomic_store_n((uint64_t *)p, v, __ATOMIC_RELAXED);
#ifdef __SSE2__
    } else if (bytes == 16 && ((uintptr_t)p & 15) == 0) {
        __m128i v;
        memcpy(&v, from, 16);
        *(volatile __m128i *)p = v;
#endif
    } else {
        memcpy(p, from, bytes);
    }
}

/* A loaded value of n bytes into a dwidth-byte register. */
static inline uint64_t extend(uint64_t v, unsigned n, bool sign, unsigned dwidth)
{
    if (sign && n < 8 && (v >> (8 * n - 1)) & 1)
        v |= ~0ull << (8 * n);
    if (dwidth < 8)
        v &= (1ull << (8 * dwidth)) - 1;
    return v;
}

static const char *space_name(int space)
{
    switch (space) {
    case SP_GLOBAL: return "global";
    case SP_SHARED: return "shared";
    case SP_LOCAL: return "local";
    case SP_CONST: return "const";
    case SP_PARAM: return "param";
    default: return "generic";
    }
}

/* ---- integer helpers ---- */

static inline uint64_t mulhi_u64(uint64_t a, uint64_t b)
{
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
}

static inline uint64_t mulhi_s64(uint64_t a, uint64_t b)
{
    return (uint64_t)(((__int128)(int64_t)a * (int64_t)b) >> 64);
}

static inline uint64_t shl_n(uint64_t a, uint64_t s, unsigned bits)
{
    uint64_t m = bits == 64 ? ~0ull : (1ull << bits) - 1;
    return s >= bits ? 0 : (a << s) & m;
}

static inline uint64_t shr_u(uint64_t a, uint64_t s, unsigned bits)
{
    uint64_t m = bits == 64 ? ~0ull : (1ull << bits) - 1;
    a &= m;
    return s >= bits ? 0 : a >> s;
}

static inline uint64_t shr_s(int64_t a, uint64_t s, unsigned bits)
{
    uint64_t m = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (s >= bits)
        s = bits - 1;
    return (uint64_t)(a >> s) & m;
}

static inline int64_t sext(uint64_t v, unsigned bits)
{
    if (bits == 64)
        return (int64_t)v;
    uint64_t m = 1ull << (bits - 1);
    v &= (m << 1) - 1;
    return (int64_t)((v ^ m) - m);
}

static inline uint64_t maskw(unsigned bits)
{
    return bits == 64 ? ~0ull : (1ull << bits) - 1;
}

static uint64_t bfe(uint64_t a, uint64_t b, uint64_t c, unsigned bits, bool sign)
{
    unsigned msb = bits - 1, pos = (unsigned)(b & 0xff), len = (unsigned)(c & 0xff);
    uint64_t sbit = 0;
    if (sign && len != 0) {
        unsigned top = pos + len - 1 < msb ? pos + len - 1 : msb;
        sbit = (a >> top) & 1;
    }
    uint64_t d = 0;
    for (unsigned i = 0; i <= msb; i++) {
        uint64_t bit = (i < len && pos + i <= msb) ? (a >> (pos + i)) & 1 : sbit;
        d |= bit << i;
    }
    return d;
}

static uint64_t bfi(uint64_t a, uint64_t b, uint64_t c, uint64_t e, unsigned bits)
{
    unsigned msb = bits - 1, pos = (unsigned)(c & 0xff), len = (unsigned)(e & 0xff);
    uint64_t d = b;
    for (unsigned i = 0; i < len && pos + i <= msb; i++)
        d = (d & ~(1ull << (pos + i))) | (((a >> i) & 1) << (pos + i));
    return d & maskw(bits);
}

static uint32_t bfind(uint64_t a, unsigned bits, bool sign, bool shiftamt)
{
    a &= maskw(bits);
    if (sign && (a >> (bits - 1)) & 1)
        a = ~a & maskw(bits);
    if (a == 0)
        return 0xffffffffu;
    unsigned idx = 63 - (unsigned)__builtin_clzll(a);
    return shiftamt ? bits - 1 - idx : idx;
}

static uint32_t prmt(uint32_t a, uint32_t b, uint32_t c)
{
    uint64_t t = (uint64_t)b << 32 | a;
    uint32_t d = 0;
    for (unsigned i = 0; i < 4; i++) {
        unsigned sel = (c >> (4 * i)) & 0xf;
        uint32_t byte = (uint32_t)(t >> (8 * (sel & 7))) & 0xff;
        if (sel & 8)
            byte = (byte & 0x80) ? 0xff : 0;
        d |= byte << (8 * i);
    }
    return d;
}

static uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, unsigned lut)
{
    uint32_t r = 0;
    for (unsigned i = 0; i < 8; i++)
        if ((lut >> i) & 1)
            r |= ((i & 4) ? a : ~a) & ((i & 2) ? b : ~b) & ((i & 1) ? c : ~c);
    return r;
}

static inline bool cmp_float(double x, double y, unsigned mode)
{
    bool un = isnan(x) || isnan(y);
    switch (mode & 7) {
    case CMP_EQ: return un ? (mode & PTX_CMP_U) : x == y;
    case CMP_NE: return un ? (mode & PTX_CMP_U) : x != y;
    case CMP_LT: return un ? (mode & PTX_CMP_U) : x < y;
    case CMP_LE: return un ? (mode & PTX_CMP_U) : x <= y;
    case CMP_GT: return un ? (mode & PTX_CMP_U) : x > y;
    case CMP_GE: return un ? (mode & PTX_CMP_U) : x >= y;
    case CMP_NUM: return !un;
    default: return un;
    }
}

static inline double as_double(uint64_t v, int type, bool ftz)
{
    switch (type) {
    case T_F32: return F32(ftz ? ptx_ftz32(v) : v);
    case T_F16: return ptx_half_to_float((uint16_t)v);
    default: return F64(v);
    }
}

/* ---- atomics ---- */

static uint64_t atom_apply(uint8_t *p, int op, int type, uint64_t b, uint64_t c)
{
    if (type == T_U32 || type == T_S32 || type == T_F32) {
        uint32_t *q = (uint32_t *)p, old = __atomic_load_n(q, __ATOMIC_RELAXED), nv;
        uint32_t v = (uint32_t)b;
        switch (op) {
        case ATOM_ADD:
            if (type != T_F32)
                return __atomic_fetch_add(q, v, __ATOMIC_SEQ_CST);
            break;
        case ATOM_AND: return __atomic_fetch_and(q, v, __ATOMIC_SEQ_CST);
        case ATOM_OR: return __atomic_fetch_or(q, v, __ATOMIC_SEQ_CST);
        case ATOM_XOR: return __atomic_fetch_xor(q, v, __ATOMIC_SEQ_CST);
        case ATOM_EXCH: return __atomic_exchange_n(q, v, __ATOMIC_SEQ_CST);
        case ATOM_CAS: {
            uint32_t exp = v;
            __atomic_compare_exchange_n(q, &exp, (uint32_t)c, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
            return exp;
        }
        default: break;
        }
        do {
            switch (op) {
            case ATOM_ADD: nv = (uint32_t)B32(F32(old) + F32(v)); break;
            case ATOM_MIN: nv = type == T_S32 ? ((int32_t)old < (int32_t)v ? old : v) : (old < v ? old : v); break;
            case ATOM_MAX: nv = type == T_S32 ? ((int32_t)old > (int32_t)v ? old : v) : (old > v ? old : v); break;
            case ATOM_INC: nv = old >= v ? 0 : old + 1; break;
            case ATOM_DEC: nv = (old == 0 || old > v) ? v : old - 1; break;
            default: nv = old; break;
            }
        } while (!__atomic_compare_exchange_n(q, &old, nv, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
        return old;
    }
    uint64_t *q = (uint64_t *)p, old = __atomic_load_n(q, __ATOMIC_RELAXED), nv;
    switch (op) {
    case ATOM_ADD:
        if (type != T_F64)
            return __atomic_fetch_add(q, b, __ATOMIC_SEQ_CST);
        break;
    case ATOM_AND: return __atomic_fetch_and(q, b, __ATOMIC_SEQ_CST);
    case ATOM_OR: return __atomic_fetch_or(q, b, __ATOMIC_SEQ_CST);
    case ATOM_XOR: return __atomic_fetch_xor(q, b, __ATOMIC_SEQ_CST);
    case ATOM_EXCH: return __atomic_exchange_n(q, b, __ATOMIC_SEQ_CST);
    case ATOM_CAS: {
        uint64_t exp = b;
        __atomic_compare_exchange_n(q, &exp, c, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return exp;
    }
    default: break;
    }
    do {
        switch (op) {
        case ATOM_ADD: nv = B64(F64(old) + F64(b)); break;
        case ATOM_MIN: nv = type == T_S64 ? ((int64_t)old < (int64_t)b ? old : b) : (old < b ? old : b); break;
        case ATOM_MAX: nv = type == T_S64 ? ((int64_t)old > (int64_t)b ? old : b) : (old > b ? old : b); break;
        default: nv = old; break;
        }
    } while (!__atomic_compare_exchange_n(q, &old, nv, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
}

/* ---- fused multiply-add: the hardware instruction where the CPU has it ---- */

__attribute__((target("fma")))
static void fma32_hw(uint64_t *D, const uint64_t *A, const uint64_t *B, const uint64_t *C, uint32_t m)
{
    EACH(D[l] = B32(__builtin_fmaf(F32(A[l]), F32(B[l]), F32(C[l]))));
}

__attribute__((target("fma")))
static void fma64_hw(uint64_t *D, const uint64_t *A, const uint64_t *B, const uint64_t *C, uint32_t m)
{
    EACH(D[l] = B64(__builtin_fma(F64(A[l]), F64(B[l]), F64(C[l]))));
}

static void fma32_sw(uint64_t *D, const uint64_t *A, const uint64_t *B, const uint64_t *C, uint32_t m)
{
    EACH(D[l] = B32(fmaf(F32(A[l]), F32(B[l]), F32(C[l]))));
}

static void fma64_sw(uint64_t *D, const uint64_t *A, const uint64_t *B, const uint64_t *C, uint32_t m)
{
    EACH(D[l] = B64(fma(F64(A[l]), F64(B[l]), F64(C[l]))));
}

static int have_fma;
static pthread_once_t fma_once = PTHREAD_ONCE_INIT;

static void detect_fma(void)
{
    __builtin_cpu_init();
    have_fma = __builtin_cpu_supports("fma") ? 1 : 0;
}

static _Atomic uint64_t thread_instructions;

uint64_t soft_engine_thread_instructions(void)
{
    return atomic_load(&thread_instructions);
}

/* ---- mbarrier objects ---- */

/* The 64-bit object: pending arrivals (bits 0-19), expected arrivals
 * (20-39), the transaction count (40-60, signed) and the current phase's
 * parity (63). A phase completes when no arrival and no byte is pending.
 * An arrive's state token is the phase's parity and the arrivals left. */
#define MB_MAX 0xfffffu

static inline uint64_t mb_make(uint32_t pending, uint32_t expected, int32_t tx, uint64_t phase)
{
    return pending | (uint64_t)expected << 20 | (uint64_t)((uint32_t)tx & 0x1fffffu) << 40 |
           phase << 63;
}

enum { MB_OK, MB_BAD_ADDRESS, MB_BAD_USE };

/* One lane's mbarrier operation on the object at a; *res gets the result
 * (token or predicate); *why names a misuse the ISA leaves undefined. */
static int mbar_op(ptx_worker *k, ptx_warp *w, int mode, int space, unsigned l, uint64_t a,
                   uint64_t b, uint64_t *res, const char **why)
{
    if (mode == MB_PENDING) {
        *res = b & MB_MAX;
        return MB_OK;
    }
    uint8_t *q = space_ptr(k, w, space, l, a, 8);
    if (!q || (a & 7))
        return MB_BAD_ADDRESS;
    uint64_t s;
    memcpy(&s, q, 8);
    uint32_t pending = s & MB_MAX, expected = (s >> 20) & MB_MAX;
    int32_t tx = (int32_t)((s >> 40) & 0x1fffff);
    if (tx & 0x100000)
        tx -= 0x200000;
    uint64_t phase = s >> 63;
    uint32_t count = (uint32_t)b;
    switch (mode) {
    case MB_INIT:
        if (count == 0 || count > MB_MAX) {
            *why = "mbarrier.init count out of [1, 2^20-1]";
            return MB_BAD_USE;
        }
        memcpy(q, &(uint64_t){ mb_make(count, count, 0, 0) }, 8);
        return MB_OK;
    case MB_INVAL:
        memset(q, 0, 8);
        return MB_OK;
    case MB_TEST:
        *res = phase != (b >> 63);
        return MB_OK;
    case MB_TEST_PARITY:
        *res = phase != (b & 1);
        return MB_OK;
    case MB_EXPECT_TX:
    case MB_ARRIVE_TX:
    case MB_ARRIVE_DROP_TX:
        tx += (int32_t)(count & MB_MAX);
        if (count > MB_MAX || tx > (int32_t)MB_MAX) {
            *why = "mbarrier transaction count out of range";
            return MB_BAD_USE;
        }
        count = 1;
        break;
    case MB_COMPLETE_TX:
        tx -= (int32_t)(count & MB_MAX);
        if (count > MB_MAX || tx < -(int32_t)MB_MAX) {
            *why = "mbarrier transaction count out of range";
            return MB_BAD_USE;
        }
        break;
    default:
        break;
    }
    if (mode == MB_ARRIVE || mode == MB_ARRIVE_DROP || mode == MB_ARRIVE_TX ||
        mode == MB_ARRIVE_DROP_TX) {
        if (count == 0 || count > pending) {
            *why = expected ? "mbarrier arrive beyond the pending count"
                            : "mbarrier arrive on an object not initialised";
            return MB_BAD_USE;
        }
        pending -= count;
        if (mode == MB_ARRIVE_DROP || mode == MB_ARRIVE_DROP_TX)
            expected -= count;
        *res = phase << 63 | pending;
    }
    if (pending == 0 && tx == 0 && expected) {   /* the phase completes */
        phase ^= 1;
        pending = expected;
    }
    memcpy(q, &(uint64_t){ mb_make(pending, expected, tx, phase) }, 8);
    return MB_OK;
}

/* OP_TMA for lane l (see ptx_ir.h): the box at the coordinates, elements
 * outside the tensor read as zero and never written, rows of the innermost
 * dimension moved whole. False after recording the launch's error. */
static bool tma_lane(ptx_worker *k, ptx_warp *w, const ptx_insn *in, unsigned l)
{
    ptx_run *run = k->run;
    uint64_t (*R)[PTX_WARP] = w->R;
    const ptx_mma *mm = &run->prog->mmas[in->aux];
    soft_tensor_map tm;
    uint64_t ta = R[in->b][l] + R[in->c][l], pb = run->entry->info.param_bytes;
    if ((in->flags & F_REF) || ta + sizeof tm <= pb) {
        if (ta + sizeof tm > pb) {
            ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: tensor map beyond the parameters (PTX line %u)",
                         run->entry->name, in->line);
            return false;
        }
        memcpy(&tm, run->kparams + ta, sizeof tm);
    } else {
        const uint8_t *q = space_ptr(k, w, SP_GENERIC, l, ta, sizeof tm);
        if (!q) {
            ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: illegal address 0x%llx (tensor map, PTX line %u)",
                         run->entry->name, (unsigned long long)ta, in->line);
            return false;
        }
        memcpy(&tm, q, sizeof tm);
    }
    bool ok = tm.magic == SOFT_TMAP_MAGIC && tm.rank == in->mode && !tm.interleave && !tm.swizzle && !tm.oob &&
              (tm.elem == 1 || tm.elem == 2 || tm.elem == 4 || tm.elem == 8);
    for (unsigned i = 0; ok && i < tm.rank; i++)
        ok = tm.estride[i] == 1 && tm.box[i] >= 1;
    if (!ok) {
        ptx_run_fail(run, CUDA_ERROR_NOT_SUPPORTED, "kernel %s: cp.async.bulk.tensor of a tensor map softgpu's "
                     "cuTensorMapEncodeTiled did not write for this rank, or with interleave, swizzle, element "
                     "strides or NaN fill (PTX line %u)", run->entry->name, in->line);
        return false;
    }
    unsigned rank = tm.rank, es = tm.elem;
    uint64_t box[5] = { 1, 1, 1, 1, 1 }, dim[5] = { 1, 1, 1, 1, 1 };
    int64_t c[5] = { 0 };
    uint64_t bytes = es;
    for (unsigned i = 0; i < rank; i++) {
        box[i] = tm.box[i];
        dim[i] = tm.dim[i];
        c[i] = (int32_t)R[mm->a[i]][l];
        bytes *= box[i];
    }
    uint64_t sa = R[in->a][l] + (uint64_t)in->imm;
    uint8_t *sp = (sa & 15) ? NULL : space_ptr(k, w, SP_SHARED, l, sa, (unsigned)bytes);
    if (!sp) {
        ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: illegal or misaligned address 0x%llx (shared "
                     "box of %llu bytes, PTX line %u)", run->entry->name, (unsigned long long)sa,
                     (unsigned long long)bytes, in->line);
        return false;
    }
    int64_t lo0 = c[0] < 0 ? -c[0] : 0, hi0 = (int64_t)dim[0] - c[0];
    if (hi0 > (int64_t)box[0])
        hi0 = (int64_t)box[0];
    uint64_t row = 0;   /* index of the box's row (dims 1..4) */
    for (uint64_t j4 = 0; j4 < box[4]; j4++)
        for (uint64_t j3 = 0; j3 < box[3]; j3++)
            for (uint64_t j2 = 0; j2 < box[2]; j2++)
                for (uint64_t j1 = 0; j1 < box[1]; j1++, row++) {
                    uint8_t *s = sp + row * box[0] * es;
                    uint64_t j[5] = { 0, j1, j2, j3, j4 }, ga = tm.address;
                    bool in_rows = lo0 < hi0;
                    for (unsigned i = 1; i < rank && in_rows; i++) {
                        int64_t g = c[i] + (int64_t)j[i];
                        in_rows = g >= 0 && (uint64_t)g < dim[i];
                        ga += (uint64_t)g * tm.stride[i - 1];
                    }
                    if (!in_rows) {
                        if (in->vec)
                            memset(s, 0, box[0] * es);
                        continue;
                    }
                    ga += (uint64_t)(c[0] + lo0) * es;
                    unsigned n = (unsigned)(hi0 - lo0) * es;
                    uint8_t *gp = space_ptr(k, w, SP_GLOBAL, l, ga, n);
                    if (!gp) {
                        ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: illegal address 0x%llx (tensor "
                                     "row of %u bytes, PTX line %u)", run->entry->name, (unsigned long long)ga, n,
                                     in->line);
                        return false;
                    }
                    if (in->vec) {
                        memset(s, 0, (size_t)lo0 * es);
                        memcpy(s + lo0 * es, gp, n);
                        memset(s + lo0 * es + n, 0, (box[0] - (uint64_t)hi0) * es);
                    } else {
                        memcpy(gp, s + lo0 * es, n);
                    }
                }
    if (in->vec) {   /* complete_tx of the whole box on the mbarrier */
        uint64_t ma = R[in->v[0]][l] + R[in->v[1]][l], res;
        const char *why = "";
        int rc = mbar_op(k, w, MB_COMPLETE_TX, SP_SHARED, l, ma, bytes, &res, &why);
        if (rc != MB_OK) {
            ptx_run_fail(run, rc == MB_BAD_ADDRESS ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_ERROR_LAUNCH_FAILED,
                         "kernel %s: %s at 0x%llx (PTX line %u)", run->entry->name,
                         rc == MB_BAD_ADDRESS ? "bad mbarrier address" : why, (unsigned long long)ma, in->line);
            return false;
        }
    }
    return true;
}

/* ---- control ---- */

/* Picks the next group: the runnable lanes at the lowest pc. False when
 * no lane can run (all exited or waiting at the barrier). */
static bool pick(ptx_warp *w, uint32_t *pc, uint32_t *mask, uint32_t *wait_min)
{
    uint32_t run = w->live & ~w->bar & ~w->wsync & ~w->mwait;
    if (!run && w->mwait)     /* yield: the waiters retry after the others ran */
        return false;
    if (!run && w->wsync) {   /* nobody else can come: let the waiters go on */
        w->wsync = 0;
        run = w->live & ~w->bar;
    }
    if (!run)
        return false;
    uint32_t best = UINT32_MAX;
    for (uint32_t r = run; r; r &= r - 1) {
        unsigned l = (unsigned)__builtin_ctz(r);
        if (w->lpc[l] < best)
            best = w->lpc[l];
    }
    uint32_t m = 0, second = UINT32_MAX;
    for (uint32_t r = run; r; r &= r - 1) {
        unsigned l = (unsigned)__builtin_ctz(r);
        if (w->lpc[l] == best)
            m |= BIT(l);
        else if (w->lpc[l] < second)
            second = w->lpc[l];
    }
    *pc = best;
    *mask = m;
    *wait_min = second;
    return true;
}

static void flush_group(ptx_warp *w, uint32_t pc, uint32_t mask)
{
    for (uint32_t r = mask; r; r &= r - 1)
        w->lpc[__builtin_ctz(r)] = pc;
}

/* A .sync warp operation waits for the live lanes of its member mask. True
 * when the group changed (the caller goes round again): it parked to let
 * others catch up, or took in lanes already parked at this pc. False: run
 * it now, with whoever is here. */
static bool sync_wait(ptx_warp *w, uint32_t member, uint32_t *pc, uint32_t *mask,
                      uint32_t *wait_min)
{
    uint32_t others = member & w->live & ~w->bar & ~*mask;
    if (!others)
        return false;
    if (others & ~w->wsync) {   /* some can still get here: wait for them */
        flush_group(w, *pc, *mask);
        w->wsync |= *mask;
        pick(w, pc, mask, wait_min);
        return true;
    }
    uint32_t same = 0;
    for (uint32_t r = others; r; r &= r - 1) {
        unsigned l = (unsigned)__builtin_ctz(r);
        if (w->lpc[l] == *pc)
            same |= BIT(l);
    }
    if (!same)
        return false;
    w->wsync &= ~same;
    *mask |= same;
    return true;
}

static bool read_generic(void *ctx, uint64_t addr, void *dst, size_t len)
{
    ptx_worker *k = ctx;
    while (len > 0) {   /* byte ranges may span allocations: go piecewise */
        size_t n = len > 64 ? 64 : len;
        uint8_t *p = NULL;
        while (n > 0 && !(p = generic_ptr(k, addr, (unsigned)n)))
            n /= 2;
        if (!p)
            return false;
        memcpy(dst, p, n);
        dst = (uint8_t *)dst + n;
        addr += n;
        len -= n;
    }
    return true;
}

static int do_printf(ptx_worker *k, ptx_warp *w, const ptx_insn *in, uint32_t m)
{
    ptx_run *run = k->run;
    for (uint32_t r = m; r; r &= r - 1) {
        unsigned l = (unsigned)__builtin_ctz(r);
        uint8_t *pm = k->pmem + (size_t)(w->index * PTX_WARP + l) * run->pstride;
        uint64_t fmt, args;
        memcpy(&fmt, pm + in->a, 8);
        memcpy(&args, pm + in->b, 8);
        char *text = NULL;
        int n = ptx_format_printf(fmt, args, read_generic, k, &text);
        if (n < 0) {
            free(text);
            ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS,
                         "kernel %s: printf reads an illegal address (PTX line %u)",
                         run->entry->name, in->line);
            return -1;
        }
        pthread_mutex_lock(&run->lock);
        if (run->launch->print) {
            run->launch->print(run->launch->print_ctx, text, (size_t)n);
        } else {
            fwrite(text, 1, (size_t)n, stdout);
            fflush(stdout);
        }
        pthread_mutex_unlock(&run->lock);
        free(text);
        if (in->c != UINT32_MAX) {
            uint64_t v = (uint64_t)(int64_t)n;
            memcpy(pm + in->c, &v, in->e < 8 ? in->e : 8);
        }
    }
    return 0;
}

/* Prints what CUDA prints for a failed device assert(), for each lane. */
static void assert_message(ptx_worker *k, ptx_warp *w, const ptx_insn *in, uint32_t m)
{
    ptx_run *run = k->run;
    for (uint32_t r = m; r; r &= r - 1) {
        unsigned l = (unsigned)__builtin_ctz(r);
        const uint8_t *pm = k->pmem + (size_t)(w->index * PTX_WARP + l) * run->pstride;
        uint64_t msg_addr, file_addr, func_addr;
        uint32_t line;
        memcpy(&msg_addr, pm + in->a, 8);
        memcpy(&file_addr, pm + in->b, 8);
        memcpy(&line, pm + in->c, 4);
        memcpy(&func_addr, pm + in->e, 8);
        char *msg = ptx_read_cstring(msg_addr, read_generic, k);
        char *file = ptx_read_cstring(file_addr, read_generic, k);
        char *func = ptx_read_cstring(func_addr, read_generic, k);
        char *text = NULL;
        int n = asprintf(&text, "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.\n",
                         file ? file : "?", line, func ? func : "?", k->ctaid[0], k->ctaid[1],
                         k->ctaid[2], (unsigned)w->R[SR_TID_X][l], (unsigned)w->R[SR_TID_Y][l],
                         (unsigned)w->R[SR_TID_Z][l], msg ? msg : "?");
        free(msg);
        free(file);
        free(func);
        if (n < 0)
            continue;
        pthread_mutex_lock(&run->lock);
        if (run->launch->print) {
            run->launch->print(run->launch->print_ctx, text, (size_t)n);
        } else {
            fwrite(text, 1, (size_t)n, stdout);
            fflush(stdout);
        }
        pthread_mutex_unlock(&run->lock);
        free(text);
    }
}

/* ---- the interpreter ---- */

__attribute__((target_clones("avx2", "default")))
int ptx_warp_run(ptx_worker *k, ptx_warp *w)
{
    ptx_run *run = k->run;
    const soft_program *g = run->prog;
    const ptx_insn *code = g->code;
    uint64_t (*R)[PTX_WARP] = w->R;
    uint32_t pc, mask, wait_min;
    uint64_t fault_addr = 0;
    unsigned fault_size = 0;
    const char *fault_what = "";

    uint64_t executed = 0;
    uint32_t spins = 0;          /* backward branches of a cooperative launch */
    int status;

    pthread_once(&fma_once, detect_fma);
    w->mwait = 0;
    if (!pick(w, &pc, &mask, &wait_min))
        { status = w->live ? WARP_BARRIER : WARP_EXITED; goto done; }

    for (;;) {
        const ptx_insn *in = &code[pc];
        uint32_t m = mask;
        executed += (unsigned)__builtin_popcount(mask);
        if (in->guard >= 0) {
            const uint64_t *P = R[in->guard];
            uint32_t t = 0;
            uint64_t neg = (in->flags & F_GUARD_NEG) ? 1 : 0;
            if (mask == PTX_FULL) {
                for (unsigned l = 0; l < PTX_WARP; l++)
                    t |= (uint32_t)((P[l] ^ neg) & 1) << l;
            } else {
                for (uint32_t r = mask; r; r &= r - 1) {
                    unsigned l = (unsigned)__builtin_ctz(r);
                    t |= (uint32_t)((P[l] ^ neg) & 1) << l;
                }
            }
            m = t;
        }
        if ((in->flags & F_MEMBER) && mask != PTX_FULL &&
            sync_wait(w, (uint32_t)R[in->v[0]][__builtin_ctz(mask)], &pc, &mask, &wait_min))
            continue;
        uint64_t *D = R[in->d];
        const uint64_t *A = R[in->a], *B = R[in->b], *C = R[in->c];
        const int type = in->type;

        switch (in->op) {
        case OP_NOP:
        case OP_MEMBAR:
            if (in->op == OP_MEMBAR)
                __atomic_thread_fence(__ATOMIC_SEQ_CST);
            break;

        case OP_MOV:
            switch (ptx_type_size(type)) {
            case 1: EACH(D[l] = A[l] & 0xff); break;
            case 2: EACH(D[l] = (uint16_t)A[l]); break;
            case 4: EACH(D[l] = (uint32_t)A[l]); break;
            default: EACH(D[l] = A[l]); break;
            }
            if (type == T_PRED)
                EACH(D[l] = A[l] & 1);
            break;

        case OP_PACK: {
            unsigned n = in->vec, bits = 8 * ptx_type_size(type) / n;
            uint64_t em = maskw(bits);
            EACH({
                uint64_t v = 0;
                for (unsigned e = 0; e < n; e++)
                    v |= (R[in->v[e]][l] & em) << (e * bits);
                D[l] = v;
            });
            break;
        }
        case OP_UNPACK: {
            unsigned n = in->vec, bits = 8 * ptx_type_size(type) / n;
            uint64_t em = maskw(bits);
            EACH({
                uint64_t v = A[l];
                for (unsigned e = 0; e < n; e++)
                    R[in->v[e]][l] = (v >> (e * bits)) & em;
            });
            break;
        }

        case OP_LD: {
            unsigned es = ptx_type_size(type), n = in->vec, dw = in->dwidth;
            bool sign = ptx_type_signed(type);
            int64_t off = in->imm;
            int space = in->space;
            if (n == 1 && es == 4 && (space == SP_GLOBAL || space == SP_CONST)) {
                EACH({
                    uint64_t a = A[l] + (uint64_t)off;
                    const uint8_t *p = global_ptr(k, a, 4);
                    if (!p) {
                        fault_addr = a; fault_size = 4; fault_what = "load";
                        goto fault;
                    }
                    uint32_t v;
                    memcpy(&v, p, 4);
                    D[l] = sign ? (uint64_t)(int64_t)(int32_t)v & maskw(8 * dw) : v;
                });
                break;
            }
            if (n == 1 && es == 4 && space == SP_SHARED) {
                uint32_t sb = run->shared_bytes;
                EACH({
                    uint64_t a = A[l] + (uint64_t)off;
                    if (a > sb || sb - a < 4) {
                        fault_addr = a; fault_size = 4; fault_what = "load";
                        goto fault;
                    }
                    uint32_t v;
                    memcpy(&v, k->smem + a, 4);
                    D[l] = sign ? (uint64_t)(int64_t)(int32_t)v & maskw(8 * dw) : v;
                });
                break;
            }
            EACH({
                uint64_t a = A[l] + (uint64_t)off;
                const uint8_t *p = space_ptr(k, w, space, l, a, es * n);
                if (!p) {
                    fault_addr = a; fault_size = es * n; fault_what = "load";
                    goto fault;
                }
                if (n > 1) {
                    uint8_t whole[32];
                    load_whole(whole, p, es * n);
                    p = whole;
                    for (unsigned e = 0; e < n; e++)
                        R[in->v[e]][l] = extend(load_n(p + e * es, es), es, sign, dw);
                } else {
                    R[in->v[0]][l] = extend(load_n(p, es), es, sign, dw);
                }
            });
            break;
        }
        case OP_ST: {
            unsigned es = ptx_type_size(type), n = in->vec;
            int64_t off = in->imm;
            int space = in->space;
            if (n == 1 && es == 4 && space == SP_GLOBAL) {
                EACH({
                    uint64_t a = A[l] + (uint64_t)off;
                    uint8_t *p = global_ptr(k, a, 4);
                    if (!p) {
                        fault_addr = a; fault_size = 4; fault_what = "store";
                        goto fault;
                    }
                    uint32_t v = (uint32_t)D[l];
                    memcpy(p, &v, 4);
                });
                break;
            }
            EACH({
                uint64_t a = A[l] + (uint64_t)off;
                uint8_t *p = space_ptr(k, w, space, l, a, es * n);
                if (!p) {
                    fault_addr = a; fault_size = es * n; fault_what = "store";
                    goto fault;
                }
                if (n > 1) {
                    uint8_t whole[32];
                    for (unsigned e = 0; e < n; e++)
                        store_n(whole + e * es, es, R[in->v[e]][l]);
                    store_whole(p, whole, es * n);
                } else {
                    store_n(p, es, R[in->v[0]][l]);
                }
            });
            break;
        }
        case OP_LD_KPARAM: {
            unsigned es = ptx_type_size(type), n = in->vec, dw = in->dwidth;
            bool sign = ptx_type_signed(type);
            for (unsigned e = 0; e < n; e++) {
                uint64_t v = extend(load_n(run->kparams + in->imm + e * es, es), es, sign, dw);
                uint64_t *V = R[in->v[e]];
                EACH(V[l] = v);
            }
            break;
        }
        case OP_LD_KPARAM_REG: {
            unsigned es = ptx_type_size(type), n = in->vec, dw = in->dwidth;
            bool sign = ptx_type_signed(type);
            uint64_t limit = run->entry->info.param_bytes;
            const int64_t off = in->imm;
            EACH({
                uint64_t a = A[l] + (uint64_t)off;
                if (a > limit || limit - a < (uint64_t)es * n) {
                    fault_addr = a; fault_size = es * n; fault_what = "load";
                    goto fault;
                }
            });
            EACH({
                uint64_t a = A[l] + (uint64_t)off;
                for (unsigned e = 0; e < n; e++)
                    R[in->v[e]][l] = extend(load_n(run->kparams + a + e * es, es), es, sign, dw);
            });
            break;
        }
        case OP_LD_PARAM: {
            unsigned es = ptx_type_size(type), n = in->vec, dw = in->dwidth;
            bool sign = ptx_type_signed(type);
            EACH({
                const uint8_t *p = k->pmem + (size_t)(w->index * PTX_WARP + l) * run->pstride + in->imm;
                for (unsigned e = 0; e < n; e++)
                    R[in->v[e]][l] = extend(load_n(p + e * es, es), es, sign, dw);
            });
            break;
        }
        case OP_ST_PARAM: {
            unsigned es = ptx_type_size(type), n = in->vec;
            EACH({
                uint8_t *p = k->pmem + (size_t)(w->index * PTX_WARP + l) * run->pstride + in->imm;
                for (unsigned e = 0; e < n; e++)
                    store_n(p + e * es, es, R[in->v[e]][l]);
            });
            break;
        }

        case OP_ADD:
        case OP_SUB: {
            bool sub = in->op == OP_SUB;
            switch (type) {
            case T_U16: EACH(D[l] = (uint16_t)(sub ? A[l] - B[l] : A[l] + B[l])); break;
            case T_U32:
                if (sub)
                    EACH(D[l] = (uint32_t)(A[l] - B[l]));
                else
                    EACH(D[l] = (uint32_t)(A[l] + B[l]));
                break;
            case T_U64:
                if (sub)
                    EACH(D[l] = A[l] - B[l]);
                else
                    EACH(D[l] = A[l] + B[l]);
                break;
            case T_S32:   /* .sat */
                EACH({
                    int64_t v = sub ? (int64_t)(int32_t)A[l] - (int32_t)B[l]
                                    : (int64_t)(int32_t)A[l] + (int32_t)B[l];
                    if (v > INT32_MAX) v = INT32_MAX;
                    if (v < INT32_MIN) v = INT32_MIN;
                    D[l] = (uint32_t)v;
                });
                break;
            case T_F32:
                if (in->mode > RND_RN)
                    goto rounded;
                if (sub)
                    EACH(D[l] = B32(F32(A[l]) - F32(B[l])));
                else
                    EACH(D[l] = B32(F32(A[l]) + F32(B[l])));
                goto post32;
            case T_F64:
                if (in->mode > RND_RN)
                    goto rounded;
                if (sub)
                    EACH(D[l] = B64(F64(A[l]) - F64(B[l])));
                else
                    EACH(D[l] = B64(F64(A[l]) + F64(B[l])));
                goto post64;
            case T_F16: case T_F16X2: case T_BF16: case T_BF16X2:
                EACH(D[l] = ptx_half_op(in->op, (ptx_type)type, in->flags, in->flags2, A[l], B[l], 0));
                break;
            default:
                goto bad;
            }
            break;
        }

        case OP_MUL:
            switch (type) {
            case T_U16: EACH(D[l] = (uint16_t)(A[l] * B[l])); break;
            case T_U32: EACH(D[l] = (uint32_t)(A[l] * B[l])); break;
            case T_U64: EACH(D[l] = A[l] * B[l]); break;
            case T_F32:
                if (in->mode > RND_RN)
                    goto rounded;
                EACH(D[l] = B32(F32(A[l]) * F32(B[l])));
                goto post32;
            case T_F64:
                if (in->mode > RND_RN)
                    goto rounded;
                EACH(D[l] = B64(F64(A[l]) * F64(B[l])));
                goto post64;
            case T_F16: case T_F16X2: case T_BF16: case T_BF16X2:
                EACH(D[l] = ptx_half_op(OP_MUL, (ptx_type)type, in->flags, in->flags2, A[l], B[l], 0));
                break;
            default:
                goto bad;
            }
            break;
        case OP_MULHI:
        case OP_MADHI: {
            bool mad = in->op == OP_MADHI;
            switch (type) {
            case T_U16: EACH(D[l] = (uint16_t)((((uint32_t)(uint16_t)A[l] * (uint16_t)B[l]) >> 16) + (mad ? C[l] : 0))); break;
            case T_S16: EACH(D[l] = (uint16_t)(((int32_t)(int16_t)A[l] * (int16_t)B[l] >> 16) + (mad ? C[l] : 0))); break;
            case T_U32: EACH(D[l] = (uint32_t)((((uint64_t)(uint32_t)A[l] * (uint32_t)B[l]) >> 32) + (mad ? C[l] : 0))); break;
            case T_S32: EACH(D[l] = (uint32_t)((uint64_t)((int64_t)(int32_t)A[l] * (int32_t)B[l] >> 32) + (mad ? C[l] : 0))); break;
            case T_U64: EACH(D[l] = mulhi_u64(A[l], B[l]) + (mad ? C[l] : 0)); break;
            case T_S64: EACH(D[l] = mulhi_s64(A[l], B[l]) + (mad ? C[l] : 0)); break;
            default: goto bad;
            }
            break;
        }
        case OP_MULWIDE:
        case OP_MADWIDE: {
            bool mad = in->op == OP_MADWIDE;
            switch (type) {
            case T_U16: EACH(D[l] = (uint32_t)((uint32_t)(uint16_t)A[l] * (uint16_t)B[l] + (mad ? C[l] : 0))); break;
            case T_S16: EACH(D[l] = (uint32_t)((uint32_t)((int32_t)(int16_t)A[l] * (int16_t)B[l]) + (mad ? C[l] : 0))); break;
            case T_U32: EACH(D[l] = (uint64_t)(uint32_t)A[l] * (uint32_t)B[l] + (mad ? C[l] : 0)); break;
            case T_S32: EACH(D[l] = (uint64_t)((int64_t)(int32_t)A[l] * (int32_t)B[l]) + (mad ? C[l] : 0)); break;
            default: goto bad;
            }
            break;
        }
        case OP_MAD:
            switch (type) {
            case T_U16: EACH(D[l] = (uint16_t)(A[l] * B[l] + C[l])); break;
            case T_U32: EACH(D[l] = (uint32_t)(A[l] * B[l] + C[l])); break;
            case T_U64: EACH(D[l] = A[l] * B[l] + C[l]); break;
            default: goto bad;
            }
            break;
        case OP_MUL24:
            EACH(D[l] = (uint32_t)((A[l] & 0xffffff) * (B[l] & 0xffffff)));
            break;
        case OP_MAD24:
            EACH(D[l] = (uint32_t)((A[l] & 0xffffff) * (B[l] & 0xffffff) + C[l]));
            break;
        case OP_FMA:
            switch (type) {
            case T_F32:
                if (in->mode > RND_RN)
                    goto rounded;
                if (have_fma)
                    fma32_hw(D, A, B, C, m);
                else
                    fma32_sw(D, A, B, C, m);
                goto post32;
            case T_F64:
                if (in->mode > RND_RN)
                    goto rounded;
                if (have_fma)
                    fma64_hw(D, A, B, C, m);
                else
                    fma64_sw(D, A, B, C, m);
                goto post64;
            case T_F16: case T_F16X2: case T_BF16: case T_BF16X2:
                EACH(D[l] = ptx_half_op(OP_FMA, (ptx_type)type, in->flags, in->flags2, A[l], B[l], C[l]));
                break;
            default:
                goto bad;
            }
            break;

        case OP_ADDC:
        case OP_SUBC:
        case OP_MADC: {
            bool cin = in->flags & F_CC_IN, cout = in->flags & F_CC_OUT;
            bool hi = in->mode;
            EACH({
                uint64_t a = A[l], b = B[l], ci = cin ? w->cc[l] : 0, r, co;
                if (in->op == OP_MADC) {
                    uint64_t prod = type == T_U32 ? (hi ? ((uint64_t)(uint32_t)a * (uint32_t)b) >> 32
                                                        : (uint32_t)((uint64_t)(uint32_t)a * (uint32_t)b))
                                                  : (hi ? mulhi_u64(a, b) : a * b);
                    a = prod;
                    b = C[l];
                }
                if (type == T_U32) {
                    a = (uint32_t)a;
                    b = (uint32_t)b;
                    if (in->op == OP_SUBC) {
                        r = a - b - ci;
                        co = a < b + ci;
                    } else {
                        r = a + b + ci;
                        co = r >> 32;
                    }
                    r = (uint32_t)r;
                } else {
                    if (in->op == OP_SUBC) {
                        unsigned __int128 s = (unsigned __int128)b + ci;
                        r = a - (uint64_t)s;
                        co = (unsigned __int128)a < s;
                    } else {
                        unsigned __int128 s = (unsigned __int128)a + b + ci;
                        r = (uint64_t)s;
                        co = (uint64_t)(s >> 64);
                    }
                }
                D[l] = r;
                if (cout)
                    w->cc[l] = (uint8_t)co;
            });
            break;
        }

        case OP_DIV:
            switch (type) {
            case T_U16: EACH(D[l] = (uint16_t)B[l] ? (uint16_t)((uint16_t)A[l] / (uint16_t)B[l]) : 0xffff); break;
            case T_S16: EACH(D[l] = (int16_t)B[l] ? (uint16_t)((int32_t)(int16_t)A[l] / (int16_t)B[l]) : 0xffff); break;
            case T_U32: EACH(D[l] = (uint32_t)B[l] ? (uint32_t)A[l] / (uint32_t)B[l] : 0xffffffffu); break;
            case T_S32:
                EACH({
                    int32_t a = (int32_t)A[l], b = (int32_t)B[l];
                    D[l] = b == 0 ? 0xffffffffu : (b == -1 && a == INT32_MIN) ? (uint32_t)a : (uint32_t)(a / b);
                });
                break;
            case T_U64: EACH(D[l] = B[l] ? A[l] / B[l] : ~0ull); break;
            case T_S64:
                EACH({
                    int64_t a = (int64_t)A[l], b = (int64_t)B[l];
                    D[l] = b == 0 ? ~0ull : (b == -1 && a == INT64_MIN) ? (uint64_t)a : (uint64_t)(a / b);
                });
                break;
            case T_F32:
                if (in->mode > RND_RN)
                    goto rounded;
                EACH(D[l] = B32(F32(A[l]) / F32(B[l])));
                goto post32;
            case T_F64:
                if (in->mode > RND_RN)
                    goto rounded;
                EACH(D[l] = B64(F64(A[l]) / F64(B[l])));
                goto post64;
            default:
                goto bad;
            }
            break;
        case OP_REM:
            switch (type) {
            case T_U16: EACH(D[l] = (uint16_t)B[l] ? (uint16_t)((uint16_t)A[l] % (uint16_t)B[l]) : (uint16_t)A[l]); break;
            case T_S16: EACH(D[l] = (int16_t)B[l] ? (uint16_t)((int32_t)(int16_t)A[l] % (int16_t)B[l]) : (uint16_t)A[l]); break;
            case T_U32: EACH(D[l] = (uint32_t)B[l] ? (uint32_t)A[l] % (uint32_t)B[l] : (uint32_t)A[l]); break;
            case T_S32:
                EACH({
                    int32_t a = (int32_t)A[l], b = (int32_t)B[l];
                    D[l] = b == 0 ? (uint32_t)a : b == -1 ? 0 : (uint32_t)(a % b);
                });
                break;
            case T_U64: EACH(D[l] = B[l] ? A[l] % B[l] : A[l]); break;
            case T_S64:
                EACH({
                    int64_t a = (int64_t)A[l], b = (int64_t)B[l];
                    D[l] = b == 0 ? (uint64_t)a : b == -1 ? 0 : (uint64_t)(a % b);
                });
                break;
            default:
                goto bad;
            }
            break;

        case OP_MIN:
        case OP_MAX: {
            bool mx = in->op == OP_MAX;
            switch (type) {
            case T_U16: case T_U32: case T_U64: {
                uint64_t wm = maskw(8 * ptx_type_size(type));
                EACH({ uint64_t a = A[l] & wm, b = B[l] & wm; D[l] = mx ? (a > b ? a : b) : (a < b ? a : b); });
                break;
            }
            case T_S16: case T_S32: case T_S64: {
                unsigned bits = 8 * ptx_type_size(type);
                EACH({ int64_t a = sext(A[l], bits), b = sext(B[l], bits);
                       D[l] = (uint64_t)(mx ? (a > b ? a : b) : (a < b ? a : b)) & maskw(bits); });
                break;
            }
            case T_F32:
                if (in->flags & F_NAN)   /* a NaN operand gives the canonical NaN */
                    EACH({ float a = F32(A[l]), b = F32(B[l]);
                           D[l] = isnan(a) || isnan(b) ? 0x7fffffffu : B32(mx ? fmaxf(a, b) : fminf(a, b)); });
                else if (mx)
                    EACH(D[l] = B32(fmaxf(F32(A[l]), F32(B[l]))));
                else
                    EACH(D[l] = B32(fminf(F32(A[l]), F32(B[l]))));
                goto post32;
            case T_F64:
                if (in->flags & F_NAN)
                    EACH({ double a = F64(A[l]), b = F64(B[l]);
                           D[l] = isnan(a) || isnan(b) ? 0x7fffffffffffffffull : B64(mx ? fmax(a, b) : fmin(a, b)); });
                else if (mx)
                    EACH(D[l] = B64(fmax(F64(A[l]), F64(B[l]))));
                else
                    EACH(D[l] = B64(fmin(F64(A[l]), F64(B[l]))));
                break;
            case T_F16: case T_F16X2: case T_BF16: case T_BF16X2:
                EACH(D[l] = ptx_half_op(in->op, (ptx_type)type, in->flags, in->flags2, A[l], B[l], 0));
                break;
            default:
                goto bad;
            }
            break;
        }
        case OP_ABS:
        case OP_NEG: {
            bool neg = in->op == OP_NEG;
            switch (type) {
            case T_S16: case T_S32: case T_S64: {
                unsigned bits = 8 * ptx_type_size(type);
                EACH({ int64_t a = sext(A[l], bits);
                       uint64_t r = neg ? (uint64_t)0 - (uint64_t)a : (a < 0 ? (uint64_t)0 - (uint64_t)a : (uint64_t)a);
                       D[l] = r & maskw(bits); });
                break;
            }
            case T_F32:
                if (neg)
                    EACH(D[l] = (uint32_t)A[l] ^ 0x80000000u);
                else
                    EACH(D[l] = (uint32_t)A[l] & 0x7fffffffu);
                goto post32;
            case T_F64:
                if (neg)
                    EACH(D[l] = A[l] ^ 0x8000000000000000ull);
                else
                    EACH(D[l] = A[l] & 0x7fffffffffffffffull);
                break;
            case T_F16: case T_F16X2: case T_BF16: case T_BF16X2:
                EACH(D[l] = ptx_half_op(in->op, (ptx_type)type, in->flags, in->flags2, A[l], 0, 0));
                break;
            default:
                goto bad;
            }
            break;
        }

        case OP_AND: EACH(D[l] = A[l] & B[l]); break;
        case OP_OR: EACH(D[l] = A[l] | B[l]); break;
        case OP_XOR: EACH(D[l] = A[l] ^ B[l]); break;
        case OP_NOT:
            if (type == T_PRED)
                EACH(D[l] = !(A[l] & 1));
            else {
                uint64_t wm = maskw(8 * ptx_type_size(type));
                EACH(D[l] = ~A[l] & wm);
            }
            break;
        case OP_CNOT: {
            uint64_t wm = maskw(8 * ptx_type_size(type));
            EACH(D[l] = (A[l] & wm) == 0);
            break;
        }
        case OP_SHL: {
            unsigned bits = 8 * ptx_type_size(type);
            if (bits == 32)
                EACH(D[l] = (uint32_t)B[l] >= 32 ? 0 : (uint32_t)((uint32_t)A[l] << (uint32_t)B[l]));
            else
                EACH(D[l] = shl_n(A[l], (uint32_t)B[l], bits));
            break;
        }
        case OP_SHR: {
            unsigned bits = 8 * ptx_type_size(type);
            if (ptx_type_signed(type))
                EACH(D[l] = shr_s(sext(A[l], bits), (uint32_t)B[l], bits));
            else if (bits == 32)
                EACH(D[l] = (uint32_t)B[l] >= 32 ? 0 : (uint32_t)A[l] >> (uint32_t)B[l]);
            else
                EACH(D[l] = shr_u(A[l], (uint32_t)B[l], bits));
            break;
        }

        case OP_SETP:
        case OP_SET: {
            uint32_t res = 0;
            unsigned cmp = in->mode;
            if (!ptx_type_float(type)) {
                unsigned bits = 8 * ptx_type_size(type);
                if (ptx_type_signed(type)) {
                    switch (cmp) {
#define SCMP(c, op) case c: EACH(res |= (uint32_t)(sext(A[l], bits) op sext(B[l], bits)) << l); break;
                    SCMP(CMP_EQ, ==) SCMP(CMP_NE, !=) SCMP(CMP_LT, <) SCMP(CMP_LE, <=)
                    SCMP(CMP_GT, >) SCMP(CMP_GE, >=)
#undef SCMP
                    default: goto bad;
                    }
                } else {
                    uint64_t wm = maskw(bits);
                    switch (cmp) {
#define UCMP(c, op) case c: EACH(res |= (uint32_t)((A[l] & wm) op (B[l] & wm)) << l); break;
                    UCMP(CMP_EQ, ==) UCMP(CMP_NE, !=) UCMP(CMP_LT, <) UCMP(CMP_LE, <=)
                    UCMP(CMP_GT, >) UCMP(CMP_GE, >=)
#undef UCMP
                    default: goto bad;
                    }
                }
            } else {
                bool ftz = in->flags & F_FTZ;
                EACH(res |= (uint32_t)cmp_float(as_double(A[l], type, ftz), as_double(B[l], type, ftz), cmp) << l);
            }
            uint32_t cpred = 0;
            if (in->boolop != BOOL_NONE) {
                uint64_t neg = (in->flags & F_NEG_C) ? 1 : 0;
                EACH(cpred |= (uint32_t)((C[l] ^ neg) & 1) << l);
            }
            uint32_t p = res, q = ~res;
            switch (in->boolop) {
            case BOOL_AND: p &= cpred; q &= cpred; break;
            case BOOL_OR: p |= cpred; q |= cpred; break;
            case BOOL_XOR: p ^= cpred; q ^= cpred; break;
            default: break;
            }
            if (in->op == OP_SET) {
                uint64_t one = in->type2 == T_F32 ? 0x3f800000u : 0xffffffffu;
                EACH(D[l] = (p >> l) & 1 ? one : 0);
            } else {
                EACH(D[l] = (p >> l) & 1);
                if (in->flags & F_HAS_P) {
                    uint64_t *E = R[in->e];
                    EACH(E[l] = (q >> l) & 1);
                }
            }
            break;
        }
        case OP_SELP: {
            uint64_t neg = (in->flags & F_NEG_C) ? 1 : 0;
            EACH(D[l] = ((C[l] ^ neg) & 1) ? A[l] : B[l]);
            break;
        }

        case OP_CVT: {
            int st = in->type2;
            unsigned dw = in->dwidth;
            if (in->flags == 0 || (in->flags & ~F_GUARD_NEG) == 0) {
                if (type == T_U64 && st == T_U32) {
                    EACH(D[l] = (uint32_t)A[l]);
                    break;
                }
                if (type == T_S64 && st == T_S32) {
                    EACH(D[l] = (uint64_t)(int64_t)(int32_t)A[l]);
                    break;
                }
                if ((type == T_U32 || type == T_S32) && (st == T_U64 || st == T_S64) && dw == 4) {
                    EACH(D[l] = (uint32_t)A[l]);
                    break;
                }
                if (type == T_F32 && st == T_S32 && in->mode == RND_RN) {
                    EACH(D[l] = B32((float)(int32_t)A[l]));
                    break;
                }
                if (type == T_F64 && st == T_F32) {
                    EACH(D[l] = B64((double)F32(A[l])));
                    break;
                }
            }
            EACH(D[l] = ptx_cvt(A[l], (ptx_type)type, (ptx_type)st, in->mode, in->flags, dw));
            break;
        }
        case OP_CVTA_FROM:
            if (in->space == SP_SHARED) {
                uint64_t s = (uintptr_t)k->smem;
                EACH(D[l] = s + A[l]);
            } else {
                EACH(D[l] = (uintptr_t)local_base(k, w, l) + A[l]);
            }
            break;
        case OP_CVTA_TO:
            if (in->space == SP_SHARED) {
                uint64_t s = (uintptr_t)k->smem;
                EACH(D[l] = A[l] - s);
            } else {
                EACH(D[l] = A[l] - (uintptr_t)local_base(k, w, l));
            }
            break;
        case OP_DEPOT:
            EACH(D[l] = w->fp[l] + (uint64_t)in->imm);
            break;

        case OP_POPC:
            if (type == T_U32)
                EACH(D[l] = (uint32_t)__builtin_popcount((uint32_t)A[l]));
            else
                EACH(D[l] = (uint32_t)__builtin_popcountll(A[l]));
            break;
        case OP_CLZ:
            if (type == T_U32)
                EACH(D[l] = (uint32_t)A[l] ? (uint32_t)__builtin_clz((uint32_t)A[l]) : 32);
            else
                EACH(D[l] = A[l] ? (uint32_t)__builtin_clzll(A[l]) : 64);
            break;
        case OP_BREV:
            if (type == T_U32)
                EACH({ uint32_t x = (uint32_t)A[l], r = 0;
                       for (unsigned i = 0; i < 32; i++) r |= ((x >> i) & 1) << (31 - i);
                       D[l] = r; });
            else
                EACH({ uint64_t x = A[l], r = 0;
                       for (unsigned i = 0; i < 64; i++) r |= ((x >> i) & 1) << (63 - i);
                       D[l] = r; });
            break;
        case OP_BFIND: {
            unsigned bits = 8 * ptx_type_size(type);
            bool sign = ptx_type_signed(type), sa = in->flags & F_SHIFTAMT;
            EACH(D[l] = bfind(A[l], bits, sign, sa));
            break;
        }
        case OP_BFE: {
            unsigned bits = 8 * ptx_type_size(type);
            bool sign = ptx_type_signed(type);
            EACH(D[l] = bfe(A[l], B[l], C[l], bits, sign));
            break;
        }
        case OP_BFI: {
            unsigned bits = 8 * ptx_type_size(type);
            const uint64_t *E = R[in->e];
            EACH(D[l] = bfi(A[l], B[l], C[l], E[l], bits));
            break;
        }
        case OP_BMSK: {
            bool wrap = in->mode;
            EACH({
                uint64_t a = (uint32_t)A[l], b = (uint32_t)B[l];
                a = wrap ? a & 31 : a > 32 ? 32 : a;
                b = wrap ? b & 31 : b > 32 ? 32 : b;
                uint64_t top = a + b >= 32 ? 0 : ~0ull << (a + b);
                D[l] = (uint32_t)((~0ull << a) & ~top);
            });
            break;
        }
        case OP_PRMT:
            EACH(D[l] = prmt((uint32_t)A[l], (uint32_t)B[l], (uint32_t)C[l]));
            break;
        case OP_LOP3:
            EACH(D[l] = lop3((uint32_t)A[l], (uint32_t)B[l], (uint32_t)C[l], (unsigned)in->imm));
            break;
        case OP_COPYSIGN:
            if (type == T_F32)
                EACH(D[l] = ((uint32_t)B[l] & 0x7fffffffu) | ((uint32_t)A[l] & 0x80000000u));
            else
                EACH(D[l] = (B[l] & 0x7fffffffffffffffull) | (A[l] & 0x8000000000000000ull));
            break;

        case OP_RCP:
        case OP_SQRT:
            if (in->mode > RND_RN)
                goto rounded;
            if (type == T_F32 && in->op == OP_SQRT)
                EACH(D[l] = B32(sqrtf(F32((in->flags & F_FTZ) ? ptx_ftz32(A[l]) : A[l]))));
            else if (type == T_F32)
                EACH(D[l] = B32(1.0f / F32((in->flags & F_FTZ) ? ptx_ftz32(A[l]) : A[l])));
            else
                EACH(D[l] = ptx_fmath(in->op, (ptx_type)type, A[l]));
            if (type == T_F32)
                goto post32;
            break;
        case OP_RSQRT:
        case OP_EX2:
        case OP_LG2:
        case OP_SIN:
        case OP_COS:
        case OP_TANH:
            if (type == T_F32 && (in->flags & F_FTZ))
                EACH(D[l] = ptx_fmath(in->op, (ptx_type)type, ptx_ftz32(A[l])));
            else
                EACH(D[l] = ptx_fmath(in->op, (ptx_type)type, A[l]));
            if (type == T_F32)
                goto post32;
            break;
        case OP_TESTP:
            EACH(D[l] = ptx_testp(in->mode, (ptx_type)type, A[l]));
            break;
        case OP_CLOCK: {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t v = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
            /* mode: 0 the 64-bit count, 1 its low half (%clock), 2 its high half */
            if (in->mode == 2)
                v >>= 32;
            else if (in->mode == 1 || ptx_type_size((ptx_type)type) < 8)
                v = (uint32_t)v;
            EACH(D[l] = v);
            break;
        }

        case OP_ATOM: {
            unsigned es = ptx_type_size(type);
            int space = in->space;
            bool res = !(in->flags & F_NO_RESULT);
            EACH({
                uint64_t a = A[l] + (uint64_t)in->imm;
                uint8_t *p = space_ptr(k, w, space, l, a, es);
                if (!p || ((uintptr_t)p & (es - 1))) {
                    fault_addr = a; fault_size = es; fault_what = "atomic";
                    goto fault;
                }
                uint64_t old = atom_apply(p, in->mode, type, B[l], C[l]);
                if (res)
                    D[l] = es == 4 ? (uint32_t)old : old;
            });
            break;
        }
        case OP_SHFL: {
            uint32_t src[PTX_WARP], out[PTX_WARP];
            uint32_t pv = 0;
            for (unsigned l = 0; l < PTX_WARP; l++)
                src[l] = (uint32_t)A[l];
            EACH({
                uint32_t b = (uint32_t)B[l], c = (uint32_t)C[l];
                uint32_t segmask = (c >> 8) & 0x1f, clamp = c & 0x1f;
                uint32_t maxl = (l & segmask) | (clamp & ~segmask);
                uint32_t minl = l & segmask;
                uint32_t j;
                bool ok;
                switch (in->mode) {
                case SHFL_UP: j = l - b; ok = (int32_t)j >= (int32_t)maxl; break;
                case SHFL_DOWN: j = l + b; ok = j <= maxl; break;
                case SHFL_BFLY: j = l ^ b; ok = j <= maxl; break;
                default: j = minl | (b & ~segmask); ok = j <= maxl; break;
                }
                if (!ok || j >= PTX_WARP)
                    j = l;
                out[l] = src[j & 31];
                pv |= (uint32_t)ok << l;
            });
            EACH(D[l] = out[l]);
            if (in->flags & F_HAS_P) {
                uint64_t *E = R[in->e];
                EACH(E[l] = (pv >> l) & 1);
            }
            break;
        }
        case OP_VOTE: {
            uint32_t ballot = 0;
            uint64_t neg = (in->flags & F_NEG_B) ? 1 : 0;
            EACH(ballot |= (uint32_t)((A[l] ^ neg) & 1) << l);
            uint64_t v;
            switch (in->mode) {
            case VOTE_ALL: v = ballot == m; break;
            case VOTE_ANY: v = ballot != 0; break;
            case VOTE_UNI: v = ballot == 0 || ballot == m; break;
            default: v = ballot; break;
            }
            EACH(D[l] = v);
            break;
        }
        case OP_SHF: {
            bool left = in->mode & 1, wrap = in->mode & 2;
            EACH({
                uint32_t n = (uint32_t)C[l];
                n = wrap ? n & 31 : (n > 32 ? 32 : n);
                uint64_t x = (uint64_t)(uint32_t)B[l] << 32 | (uint32_t)A[l];
                D[l] = left ? (uint32_t)((x << n) >> 32) : (uint32_t)(x >> n);
            });
            break;
        }
        case OP_MATCH: {
            uint64_t vals[PTX_WARP];
            uint64_t wm = type == T_U32 ? 0xffffffffu : ~0ull;
            for (unsigned l = 0; l < PTX_WARP; l++)
                vals[l] = A[l] & wm;
            uint32_t same[PTX_WARP];
            bool all = true;
            EACH({
                uint32_t s = 0;
                for (uint32_t r = m; r; r &= r - 1) {
                    unsigned j = (unsigned)__builtin_ctz(r);
                    s |= (uint32_t)(vals[j] == vals[l]) << j;
                }
                same[l] = s;
                all &= s == m;
            });
            if (in->mode) {
                EACH(D[l] = all ? m : 0);
                if (in->flags & F_HAS_P) {
                    uint64_t *E = R[in->e];
                    EACH(E[l] = all);
                }
            } else {
                EACH(D[l] = same[l]);
            }
            break;
        }
        case OP_REDUX: {
            uint32_t acc = in->mode == 3 ? ~0u : 0;
            bool first = true;
            EACH({
                uint32_t v = (uint32_t)A[l];
                switch (in->mode) {
                case 0: acc += v; break;
                case 1: acc = first ? v : type == T_S32 ? ((int32_t)v < (int32_t)acc ? v : acc) : (v < acc ? v : acc); break;
                case 2: acc = first ? v : type == T_S32 ? ((int32_t)v > (int32_t)acc ? v : acc) : (v > acc ? v : acc); break;
                case 3: acc &= v; break;
                case 4: acc |= v; break;
                default: acc ^= v; break;
                }
                first = false;
            });
            EACH(D[l] = acc);
            break;
        }
        case OP_DP4A: {
            bool sa = type == T_S32, sb = in->type2 == T_S32;
            EACH({
                uint32_t a = (uint32_t)A[l], b = (uint32_t)B[l];
                int64_t acc = (int32_t)(uint32_t)C[l];
                for (unsigned i = 0; i < 4; i++) {
                    int32_t x = sa ? (int8_t)(a >> (8 * i)) : (int32_t)((a >> (8 * i)) & 0xff);
                    int32_t y = sb ? (int8_t)(b >> (8 * i)) : (int32_t)((b >> (8 * i)) & 0xff);
                    acc += (int64_t)x * y;
                }
                D[l] = (uint32_t)acc;
            });
            break;
        }
        case OP_ISSPACEP: {
            uint64_t s = (uintptr_t)k->smem, lb = (uintptr_t)k->lmem;
            uint64_t sn = run->shared_bytes, ln = (uint64_t)run->block_threads * run->lstride;
            EACH({
                uint64_t a = A[l];
                bool sh = k->smem && a >= s && a - s < sn, lo = k->lmem && a >= lb && a - lb < ln;
                bool r;
                switch (in->space) {
                case SP_SHARED: r = sh; break;
                case SP_LOCAL: r = lo; break;
                case SP_CONST: {
                    r = false;
                    for (uint32_t i = 0; i < g->nglobals && !r; i++)
                        r = g->globals[i].info.space == SOFT_SPACE_CONST && a >= g->globals[i].addr &&
                            a - g->globals[i].addr < g->globals[i].info.size;
                    break;
                }
                default: r = !sh && !lo; break;
                }
                D[l] = r;
            });
            break;
        }
        case OP_ACTIVEMASK:
            EACH(D[l] = mask);
            break;

        /* ---- control flow ---- */
        case OP_BRA: {
            uint32_t target = (uint32_t)in->imm;
            /* A cooperative block may spin on a grid barrier: let the blocks
             * it waits for have the CPU, and stop when the launch failed. */
            if (run->cooperative && target <= pc && (++spins & 63) == 0) {
                if (atomic_load(&run->failed))
                    { status = WARP_FAULT; goto done; }
                sched_yield();
            }
            if (m == mask) {
                pc = target;
            } else if (m == 0) {
                pc++;
            } else {
                for (uint32_t r = mask; r; r &= r - 1) {
                    unsigned l = (unsigned)__builtin_ctz(r);
                    w->lpc[l] = (m >> l) & 1 ? target : pc + 1;
                }
                pick(w, &pc, &mask, &wait_min);
                continue;
            }
            if (pc >= wait_min) {
                flush_group(w, pc, mask);
                pick(w, &pc, &mask, &wait_min);
            }
            continue;
        }
        case OP_EXIT:
            w->live &= ~m;
            if (m != mask) {
                flush_group(w, pc + 1, mask & ~m);
            }
            if (!w->live)
                { status = WARP_EXITED; goto done; }
            if (!pick(w, &pc, &mask, &wait_min))
                { status = w->live ? WARP_BARRIER : WARP_EXITED; goto done; }
            continue;
        case OP_BAR:
            if (in->vec) {   /* the barrier named by a register */
                uint32_t bad = 0;
                EACH(bad |= (uint32_t)R[in->e][l]);
                if (bad) {
                    ptx_run_fail(run, CUDA_ERROR_NOT_SUPPORTED,
                                 "kernel %s: barrier %u: barriers other than 0 are not supported (PTX line %u)",
                                 run->entry->name, bad, in->line);
                    { status = WARP_FAULT; goto done; }
                }
            }
            if (in->mode) {   /* bar.red: fold this group's predicates in */
                uint64_t neg = (in->flags & F_NEG_C) ? 1 : 0;
                EACH({
                    bool v = (C[l] ^ neg) & 1;
                    k->red_popc += v;
                    k->red_and &= v;
                    k->red_or |= v;
                });
            }
            flush_group(w, pc + 1, mask);
            w->bar |= m;
            if (!pick(w, &pc, &mask, &wait_min))
                { status = WARP_BARRIER; goto done; }
            continue;
        case OP_TRAP:
            if (m == 0)
                break;
            if (in->mode) {
                assert_message(k, w, in, m);
                ptx_run_fail(run, CUDA_ERROR_ASSERT,
                             "kernel %s: device-side assert triggered (PTX line %u)",
                             run->entry->name, in->line);
            } else {
                ptx_run_fail(run, CUDA_ERROR_LAUNCH_FAILED, "kernel %s: trap (PTX line %u)",
                             run->entry->name, in->line);
            }
            { status = WARP_FAULT; goto done; }
        case OP_TEX: case OP_TLD4: case OP_TXQ: case OP_SULD: case OP_SUST: case OP_SUQ:
            if (m && !ptx_image_exec(k, w, in, m))
                { status = WARP_FAULT; goto done; }
            break;
        case OP_WMMA_LD: case OP_WMMA_ST: case OP_MMA: case OP_LDMATRIX: case OP_STMATRIX:
        case OP_MOVMATRIX:
            if (m && !ptx_mma_exec(k, w, in, m))
                { status = WARP_FAULT; goto done; }
            break;
        case OP_TF32:
            EACH(D[l] = ptx_cvt_tf32(A[l], in->mode));
            break;
        case OP_CVTNARROW:
            EACH(D[l] = ptx_cvt_narrow((int)in->aux, (ptx_type)type, (ptx_type)in->type2, in->mode,
                                       in->flags, in->flags2, A[l], B[l]));
            break;
        case OP_CVTPACK:
            EACH(D[l] = ptx_cvt_pack(in->mode, ptx_type_signed((ptx_type)type), A[l], B[l], C[l]));
            break;
        case OP_MALLOC:
        case OP_FREE: {
            const soft_launch *L = run->launch;
            for (uint32_t r = m; r; r &= r - 1) {
                unsigned l = (unsigned)__builtin_ctz(r);
                uint8_t *pm = k->pmem + (size_t)(w->index * PTX_WARP + l) * run->pstride;
                uint64_t v;
                memcpy(&v, pm + in->a, 8);
                if (in->op == OP_FREE) {
                    if (v && L->heap_free)
                        L->heap_free(L->heap_ctx, v);
                    continue;
                }
                v = L->heap_alloc ? L->heap_alloc(L->heap_ctx, v) : 0;
                memcpy(pm + in->c, &v, 8);
            }
            break;
        }
        case OP_MBAR: {
            uint32_t fail = 0;
            const char *why = "";
            EACH({
                uint64_t a = A[l] + (uint64_t)in->imm, res = 0;
                int rc = mbar_op(k, w, in->mode, in->space, l, a, B[l], &res, &why);
                if (rc == MB_BAD_ADDRESS) {
                    fault_addr = a; fault_size = 8; fault_what = "mbarrier";
                    goto fault;
                }
                if (rc == MB_BAD_USE) {
                    ptx_run_fail(run, CUDA_ERROR_LAUNCH_FAILED, "kernel %s: %s (PTX line %u)",
                                 run->entry->name, why, in->line);
                    status = WARP_FAULT;
                    goto done;
                }
                D[l] = res;
                if ((in->mode == MB_TEST || in->mode == MB_TEST_PARITY) && !res)
                    fail |= BIT(l);
            });
            if (!fail)
                break;
            /* not complete: these lanes go on (with false) once the rest of
             * the warp and the other warps had their turn */
            m = fail;
            goto park;
        }
        case OP_SLEEP:
            if (!m)
                break;
        park:   /* lanes m wait for the others: they go on after a yield */
            pc++;
            flush_group(w, pc, mask);
            w->mwait |= m;
            if (!pick(w, &pc, &mask, &wait_min))
                { status = WARP_BARRIER; goto done; }
            continue;
        case OP_CPASYNC: {
            bool bulk = in->mode == 0;
            EACH({
                uint64_t da = A[l] + (uint64_t)in->imm, sa = B[l] + C[l];
                uint64_t e = R[in->e][l];
                unsigned size = bulk ? (uint32_t)e : in->mode, n = size;
                if (!bulk && type == T_PRED)   /* ignore-src */
                    n = ((e ^ ((in->flags & F_NEG_C) ? 1 : 0)) & 1) ? 0 : size;
                else if (!bulk && (uint32_t)e < size)   /* src-size: zero-fill the rest */
                    n = (uint32_t)e;
                unsigned align = bulk ? 16 : size;
                if ((bulk && size % 16) || ((da | sa) & (align - 1))) {
                    ptx_run_fail(run, CUDA_ERROR_MISALIGNED_ADDRESS,
                                 "kernel %s: misaligned cp.async of %u bytes from 0x%llx to 0x%llx "
                                 "(PTX line %u)", run->entry->name, size, (unsigned long long)sa,
                                 (unsigned long long)da, in->line);
                    status = WARP_FAULT;
                    goto done;
                }
                uint8_t *dp = space_ptr(k, w, in->space, l, da, size);
                if (!dp) {
                    fault_addr = da; fault_size = size; fault_what = "cp.async destination";
                    goto fault;
                }
                const uint8_t *sp = n ? space_ptr(k, w, in->type2, l, sa, n) : NULL;
                if (n && !sp) {
                    ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS,
                                 "kernel %s: illegal address 0x%llx (%s cp.async source of %u bytes, "
                                 "PTX line %u)", run->entry->name, (unsigned long long)sa,
                                 space_name(in->type2), n, in->line);
                    status = WARP_FAULT;
                    goto done;
                }
                if (n)
                    memmove(dp, sp, n);
                memset(dp + n, 0, size - n);
                if (in->vec) {   /* complete_tx of the bytes on the mbarrier */
                    uint64_t ma = R[in->v[0]][l] + R[in->v[1]][l], res;
                    const char *why = "";
                    int rc = mbar_op(k, w, MB_COMPLETE_TX, SP_SHARED, l, ma, size, &res, &why);
                    if (rc == MB_BAD_ADDRESS) {
                        fault_addr = ma; fault_size = 8; fault_what = "mbarrier";
                        goto fault;
                    }
                    if (rc == MB_BAD_USE) {
                        ptx_run_fail(run, CUDA_ERROR_LAUNCH_FAILED, "kernel %s: %s (PTX line %u)",
                                     run->entry->name, why, in->line);
                        status = WARP_FAULT;
                        goto done;
                    }
                }
            });
            break;
        }
        case OP_TMA:
            EACH({
                if (!tma_lane(k, w, in, l)) {
                    status = WARP_FAULT;
                    goto done;
                }
            });
            break;
        case OP_VPRINTF:
            if (do_printf(k, w, in, m) < 0)
                { status = WARP_FAULT; goto done; }
            break;
        case OP_CALL:
        case OP_CALLI: {
            if (m == 0)
                break;
            const ptx_call *c = &g->calls[in->aux];
            for (uint32_t r = m; r; r &= r - 1) {
                unsigned l = (unsigned)__builtin_ctz(r);
                uint32_t fi = c->func;
                if (in->op == OP_CALLI) {
                    fi = ptx_func_at(g, A[l]);
                    const ptx_func *t = fi == PTX_NO_FUNC ? NULL : &g->funcs[fi];
                    bool ok = t && t->defined && !t->is_entry && t->nparams == c->nargs &&
                              t->nrets == c->nrets;
                    for (uint32_t i = 0; ok && i < c->nargs; i++)
                        ok = t->param_size[i] == c->args[i].size;
                    for (uint32_t i = 0; ok && i < c->nrets; i++)
                        ok = t->ret_size[i] == c->rets[i].size;
                    if (ok && t->refusal) {
                        /* Its statement softgpu cannot run was left out at
                         * load: running the rest would compute wrongly. */
                        ptx_run_fail(run, CUDA_ERROR_ILLEGAL_INSTRUCTION,
                                     "kernel %s: indirect call to %s, which softgpu cannot run (%s)",
                                     run->entry->name, t->name, t->refusal);
                        { status = WARP_FAULT; goto done; }
                    }
                    if (!ok) {
                        ptx_run_fail(run, CUDA_ERROR_ILLEGAL_INSTRUCTION,
                                     "kernel %s: indirect call to 0x%llx, %s (PTX line %u)",
                                     run->entry->name, (unsigned long long)A[l],
                                     !t ? "not a device function of this module"
                                        : !t->defined || t->is_entry ? "a function without a body here"
                                                                     : "whose parameters differ from the call's prototype",
                                     in->line);
                        { status = WARP_FAULT; goto done; }
                    }
                }
                const ptx_func *f = &g->funcs[fi];
                uint32_t save = f->recursive ? f->reg_count * 8 : 0;
                uint32_t align = f->depot_align > 16 ? f->depot_align : 16;
                uint32_t start = (w->sp[l] + 15) / 16 * 16;
                uint32_t depot = (start + PTX_FRAME_HDR + save + align - 1) / align * align;
                uint64_t end = (uint64_t)depot + f->depot;
                if (end > run->lstride) {
                    ptx_run_fail(run, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                                 "kernel %s: call stack overflow in %s (PTX line %u)",
                                 run->entry->name, f->name, in->line);
                    { status = WARP_FAULT; goto done; }
                }
                uint8_t *lb = local_base(k, w, l);
                uint32_t hdr[PTX_FRAME_HDR / 4] = { pc + 1, in->aux, w->frame[l], w->fp[l], fi };
                memcpy(lb + start, hdr, sizeof hdr);
                for (uint32_t i = 0; i < save / 8; i++)
                    memcpy(lb + start + PTX_FRAME_HDR + 8 * i, &R[f->reg_first + i][l], 8);
                uint8_t *pm = k->pmem + (size_t)(w->index * PTX_WARP + l) * run->pstride;
                for (uint32_t i = 0; i < c->nargs; i++)
                    memmove(pm + f->param_off[i], pm + c->args[i].from, c->args[i].size);
                w->frame[l] = start;
                w->fp[l] = depot;
                w->sp[l] = (uint32_t)end;
                w->lpc[l] = f->pc;
            }
            for (uint32_t r = mask & ~m; r; r &= r - 1)
                w->lpc[__builtin_ctz(r)] = pc + 1;
            if (m == mask && in->op == OP_CALL) {
                pc = w->lpc[__builtin_ctz(m)];
                if (pc >= wait_min) {
                    flush_group(w, pc, mask);
                    pick(w, &pc, &mask, &wait_min);
                }
            } else {
                pick(w, &pc, &mask, &wait_min);
            }
            continue;
        }
        case OP_RET: {
            if (m == 0)
                break;
            for (uint32_t r = m; r; r &= r - 1) {
                unsigned l = (unsigned)__builtin_ctz(r);
                if (w->frame[l] == UINT32_MAX) {   /* return from the entry */
                    w->live &= ~BIT(l);
                    continue;
                }
                uint8_t *lb = local_base(k, w, l);
                uint32_t hdr[PTX_FRAME_HDR / 4];
                memcpy(hdr, lb + w->frame[l], sizeof hdr);
                const ptx_call *c = &g->calls[hdr[1]];
                const ptx_func *f = &g->funcs[hdr[4]];
                uint8_t *pm = k->pmem + (size_t)(w->index * PTX_WARP + l) * run->pstride;
                for (uint32_t i = 0; i < c->nrets; i++)
                    memmove(pm + c->rets[i].to, pm + f->ret_off[i], c->rets[i].size);
                if (f->recursive)
                    for (uint32_t i = 0; i < f->reg_count; i++)
                        memcpy(&R[f->reg_first + i][l], lb + w->frame[l] + PTX_FRAME_HDR + 8 * i, 8);
                w->sp[l] = w->frame[l];
                w->frame[l] = hdr[2];
                w->fp[l] = hdr[3];
                w->lpc[l] = hdr[0];
            }
            for (uint32_t r = mask & ~m; r; r &= r - 1)
                w->lpc[__builtin_ctz(r)] = pc + 1;
            if (!pick(w, &pc, &mask, &wait_min))
                { status = w->live ? WARP_BARRIER : WARP_EXITED; goto done; }
            continue;
        }
        default:
            goto bad;
        }
        pc++;
        if (pc >= wait_min) {
            flush_group(w, pc, mask);
            pick(w, &pc, &mask, &wait_min);
        }
        continue;

    post32:
        if (in->flags & F_FTZ)
            EACH(D[l] = ptx_ftz32(D[l]));
        if (in->flags & F_SAT)
            EACH({ float f = F32(D[l]); D[l] = B32(isnan(f) ? 0.0f : f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f); });
        goto next;
    post64:
        if (in->flags & F_SAT)
            EACH({ double f = F64(D[l]); D[l] = B64(isnan(f) ? 0.0 : f < 0.0 ? 0.0 : f > 1.0 ? 1.0 : f); });
        goto next;
    rounded:
        EACH(D[l] = ptx_fop_rounded(in->op, (ptx_type)type, in->mode, A[l], B[l], C[l]));
        if (type == T_F32)
            goto post32;
        goto post64;
    next:
        pc++;
        if (pc >= wait_min) {
            flush_group(w, pc, mask);
            pick(w, &pc, &mask, &wait_min);
        }
        continue;

    fault:
        ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS,
                     "kernel %s: illegal address 0x%llx (%s %s of %u bytes, PTX line %u)",
                     run->entry->name, (unsigned long long)fault_addr, space_name(in->space),
                     fault_what, fault_size, in->line);
        { status = WARP_FAULT; goto done; }
    bad:
        ptx_run_fail(run, CUDA_ERROR_LAUNCH_FAILED,
                     "kernel %s: internal error: unhandled form at PTX line %u",
                     run->entry->name, in->line);
        { status = WARP_FAULT; goto done; }
    }
done:
    atomic_fetch_add_explicit(&thread_instructions, executed, memory_order_relaxed);
    return status;
}

/* ptx_mma: the warp's matrix instructions: wmma.load/store/mma, mma,
 * ldmatrix, stmatrix, movmatrix. Each runs once for the whole warp: it
 * gathers every lane's fragment registers into whole matrices, computes,
 * and scatters the result to the lanes that run it.
 *
 * Where an element lives. Every fragment is cut into tiles of 8 rows (of
 * the matrix's M side for A and C, its N side for B) by 4 * P elements
 * along the other side, P elements per lane and tile: lane l holds, in
 * each tile, row l / 4 and elements (l % 4) * P + i, i < P. P is what fills
 * 32 bits along K for A and B (2 for f16/bf16, 1 for tf32/f64, 4 for
 * s8/u8) and 2 for accumulators. Tiles go down the 8-row side first for A
 * and C, along K first for B. This is exactly the layout the PTX ISA gives
 * mma's fragments (m16n8k16, m16n8k8, m16n8k4, m16n8k32, m8n8k16, m8n8k4
 * f64); wmma's is unspecified by the ISA, and this is the same layout
 * tiled over wmma's shapes: a 16x16 f32 accumulator is two m16n8 ones side
 * by side, as on sm_80 and later. wmma's f16 multiplicands have twice (or
 * four times) the registers their elements need, as on sm_70: the second
 * half repeats the first. Programs may rely only on what the CUDA guide
 * allows, element-wise operations on frag.x[i] applied to every element;
 * those see the same results as on a GPU. */
#include "softgpu/ptx_exec.h"
#include "softgpu/ptx_math.h"

#include <math.h>
#include <string.h>

/* Elements held per lane and tile along the tile's long side. */
static unsigned per_lane(int frag, unsigned es)
{
    return frag == FRAG_C ? 2 : es == 8 ? 1 : 4 / es;
}

/* Rows (x) and columns (y) of the tiled sides: x is M for A and C, N for B;
 * y is K for A and B, N for C. */
static void sides(const ptx_mma *mm, int frag, unsigned *x, unsigned *y)
{
    *x = frag == FRAG_B ? mm->n : mm->m;
    *y = frag == FRAG_C ? mm->n : mm->k;
}

/* Where each lane's distinct elements are: rc[l][e] is row << 8 | column in
 * the fragment's matrix (A: MxK, B: KxN, C: MxN) of element e < u of lane
 * l; element e >= u repeats e % u. */
typedef struct layout {
    unsigned u;
    uint16_t rc[PTX_WARP][16];
} layout;

static void make_layout(const ptx_mma *mm, int frag, unsigned es, layout *L)
{
    unsigned x, y, p = per_lane(frag, es);
    sides(mm, frag, &x, &y);
    unsigned xt = x / 8, yt = y / (4 * p);
    bool b = frag == FRAG_B;
    unsigned outer = b ? xt : yt, inner = b ? yt : xt;
    L->u = xt * yt * p;
    for (unsigned l = 0; l < PTX_WARP; l++) {
        unsigned e = 0;
        for (unsigned o = 0; o < outer; o++)
            for (unsigned n = 0; n < inner; n++) {
                unsigned tx = b ? o : n, ty = b ? n : o;
                for (unsigned i = 0; i < p; i++, e++) {
                    unsigned r = tx * 8 + l / 4, c = ty * 4 * p + (l % 4) * p + i;
                    L->rc[l][e] = (uint16_t)(b ? c << 8 | r : r << 8 | c);
                }
            }
    }
}

static unsigned type_bytes(ptx_type t)
{
    return t == T_B32 ? 4 : ptx_type_size(t);
}

/* Element e (of es bytes) of lane l in the register list regs. */
static inline __attribute__((always_inline)) uint64_t get_elem(uint64_t (*R)[PTX_WARP], const uint32_t *regs, unsigned es, unsigned e,
                         unsigned l)
{
    if (es == 8)
        return R[regs[e]][l];
    unsigned per = 4 / es;
    uint32_t v = (uint32_t)R[regs[e / per]][l];
    return es == 4 ? v : (v >> (8 * es * (e % per))) & ((1u << (8 * es)) - 1);
}

/* Elements a register list of n registers holds. */
static unsigned list_elems(unsigned n, unsigned es)
{
    return es == 8 ? n : n * (4 / es);
}

/* Writes elements vals[0 .. list_elems) of lane l into the list regs. */
static inline __attribute__((always_inline)) void put_elems(uint64_t (*R)[PTX_WARP], const uint32_t *regs, unsigned n, unsigned es,
                      const uint64_t *vals, unsigned l)
{
    if (es == 8) {
        for (unsigned i = 0; i < n; i++)
            R[regs[i]][l] = vals[i];
        return;
    }
    unsigned per = 4 / es;
    for (unsigned i = 0; i < n; i++) {
        uint32_t v = 0;
        for (unsigned j = 0; j < per; j++)
            v |= (uint32_t)(vals[i * per + j] & ((es == 4 ? 0xffffffffull : (1ull << (8 * es)) - 1)))
                 << (8 * es * j);
        R[regs[i]][l] = v;
    }
}

static const char *space_word(int space)
{
    switch (space) {
    case SP_GLOBAL: return "global";
    case SP_SHARED: return "shared";
    default: return "generic";
    }
}

static bool fault(ptx_worker *k, const ptx_insn *in, uint64_t a, unsigned size, const char *what)
{
    ptx_run_fail(k->run, CUDA_ERROR_ILLEGAL_ADDRESS,
                 "kernel %s: illegal address 0x%llx (%s %s of %u bytes, PTX line %u)",
                 k->run->entry->name, (unsigned long long)a, space_word(in->space), what, size,
                 in->line);
    return false;
}

/* Element offset of (row, col) in memory of the given layout. */
static uint64_t mem_index(bool col_major, unsigned row, unsigned col, uint64_t stride)
{
    return col_major ? col * stride + row : row * stride + col;
}

/* The layout of fragment frag, from a small per-thread cache: a kernel
 * uses few shapes, and building one costs as much as a load. */
static const layout *layout_of(const ptx_mma *mm, int frag, unsigned es)
{
    static _Thread_local struct { uint32_t key; layout L; } cache[8];
    static _Thread_local unsigned next;
    uint32_t key = (uint32_t)mm->m | (uint32_t)mm->n << 8 | (uint32_t)mm->k << 16 |
                   (uint32_t)frag << 24 | es << 28;
    for (unsigned i = 0; i < 8; i++)
        if (cache[i].key == key)
            return &cache[i].L;
    unsigned i = next++ % 8;
    make_layout(mm, frag, es, &cache[i].L);
    cache[i].key = key;
    return &cache[i].L;
}

/* Reads or writes one element of es bytes (a constant size for each:
 * a call to memcpy per element would cost more than the rest). */
static inline uint64_t read_elem(const uint8_t *p, unsigned es)
{
    switch (es) {
    case 1: return *p;
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static inline void write_elem(uint8_t *p, unsigned es, uint64_t v)
{
    switch (es) {
    case 1: *p = (uint8_t)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

/* wmma.load (load) and wmma.store.d: every lane moves its own elements.
 * Inlined once per element size es. */
static inline __attribute__((always_inline)) bool wmma_ldst_es(ptx_worker *k, ptx_warp *w,
                                                               const ptx_insn *in,
                                                               const ptx_mma *mm, uint32_t m,
                                                               bool load, unsigned es)
{
    uint64_t (*R)[PTX_WARP] = w->R;
    int frag = mm->frag;
    unsigned nregs = load ? mm->nd : mm->nc;
    const uint32_t *regs = load ? mm->d : mm->c;
    unsigned n = list_elems(nregs, es);
    unsigned rows = frag == FRAG_B ? mm->k : mm->m, cols = frag == FRAG_A ? mm->k : mm->n;
    const layout *L = layout_of(mm, frag, es);
    uint64_t vals[32], idx[16];
    for (uint32_t r = m; r; r &= r - 1) {
        unsigned l = (unsigned)__builtin_ctz(r);
        uint64_t base = R[in->a][l] + (uint64_t)in->imm;
        uint64_t stride = in->b == UINT32_MAX ? (mm->col ? rows : cols) : (uint32_t)R[in->b][l];
        uint64_t lo = UINT64_MAX, hi = 0;
        for (unsigned e = 0; e < L->u; e++) {
            idx[e] = mem_index(mm->col, L->rc[l][e] >> 8, L->rc[l][e] & 0xff, stride) * es;
            lo = idx[e] < lo ? idx[e] : lo;
            hi = idx[e] > hi ? idx[e] : hi;
        }
        /* one check for the lane's whole span; element by element when it
         * crosses out of a range, to name the first bad address */
        uint8_t *span = hi - lo < (1u << 30) ? ptx_lane_ptr(k, w, in->space, l, base + lo,
                                                             (unsigned)(hi - lo) + es)
                                             : NULL;
        for (unsigned e = 0; e < n; e++) {
            uint64_t off = idx[e % L->u];
            uint8_t *p = span ? span + (off - lo) : ptx_lane_ptr(k, w, in->space, l, base + off, es);
            if (!p)
                return fault(k, in, base + off, es, load ? "load" : "store");
            if (load)
                vals[e] = read_elem(p, es);
            else
                write_elem(p, es, get_elem(R, regs, es, e, l));
        }
        if (load)
            put_elems(R, regs, nregs, es, vals, l);
    }
    return true;
}

static bool wmma_ldst(ptx_worker *k, ptx_warp *w, const ptx_insn *in, const ptx_mma *mm,
                      uint32_t m, bool load)
{
    switch (type_bytes((ptx_type)in->type)) {
    case 1: return wmma_ldst_es(k, w, in, mm, m, load, 1);
    case 2: return wmma_ldst_es(k, w, in, mm, m, load, 2);
    case 4: return wmma_ldst_es(k, w, in, mm, m, load, 4);
    default: return wmma_ldst_es(k, w, in, mm, m, load, 8);
    }
}

/* A multiplicand's element as the tensor core reads it. */
static inline __attribute__((always_inline)) double in_value(uint64_t bits, ptx_type t, bool tf32)
{
    switch (t) {
    case T_F16: return ptx_half_to_float((uint16_t)bits);
    case T_BF16: return ptx_f32(bits << 16);
    case T_F64: return ptx_f64(bits);
    case T_S8: return (int8_t)bits;
    case T_U8: return (uint8_t)bits;
    case T_S32: return (int32_t)bits;
    case T_B32: return ptx_f32(tf32 ? bits & 0xffffe000u : bits);   /* tf32 keeps 10 mantissa bits */
    case T_E4M3: return ptx_narrow_value(NF_E4M3, (unsigned)bits);
    case T_E5M2: return ptx_narrow_value(NF_E5M2, (unsigned)bits);
    default: return ptx_f32(bits);
    }
}

/* Gathers fragment frag (elements of type t) of all lanes into mat, row
 * stride 32; transposed (column stride 32) when tr. Inlined once per type
 * below, so that element size and conversion are constants. */
static inline __attribute__((always_inline)) void gather_t(uint64_t (*R)[PTX_WARP],
                                                           const layout *L, const uint32_t *regs,
                                                           ptx_type t, unsigned es, bool tf32,
                                                           bool tr, double *mat)
{
    for (unsigned l = 0; l < PTX_WARP; l++)
        for (unsigned e = 0; e < L->u; e++) {
            unsigned row = L->rc[l][e] >> 8, col = L->rc[l][e] & 0xff;
            mat[tr ? col * 32 + row : row * 32 + col] = in_value(get_elem(R, regs, es, e, l), t, tf32);
        }
}

static void gather(uint64_t (*R)[PTX_WARP], const ptx_mma *mm, int frag, const uint32_t *regs,
                   ptx_type t, bool tr, double *mat)
{
    const layout *L = layout_of(mm, frag, type_bytes(t));
    switch (t) {
    case T_F16: gather_t(R, L, regs, T_F16, 2, false, tr, mat); break;
    case T_BF16: gather_t(R, L, regs, T_BF16, 2, false, tr, mat); break;
    case T_B32: gather_t(R, L, regs, T_B32, 4, mm->tf32, tr, mat); break;
    case T_F32: gather_t(R, L, regs, T_F32, 4, false, tr, mat); break;
    case T_S32: gather_t(R, L, regs, T_S32, 4, false, tr, mat); break;
    case T_F64: gather_t(R, L, regs, T_F64, 8, false, tr, mat); break;
    case T_S8: gather_t(R, L, regs, T_S8, 1, false, tr, mat); break;
    case T_E4M3: gather_t(R, L, regs, T_E4M3, 1, false, tr, mat); break;
    case T_E5M2: gather_t(R, L, regs, T_E5M2, 1, false, tr, mat); break;
    default: gather_t(R, L, regs, T_U8, 1, false, tr, mat); break;
    }
}

static bool mma(ptx_warp *w, const ptx_mma *mm, uint32_t m)
{
    uint64_t (*R)[PTX_WARP] = w->R;
    double A[32 * 32], BT[32 * 32], C[32 * 32];   /* BT: B transposed, N x K */
    gather(R, mm, FRAG_A, mm->a, (ptx_type)mm->atype, false, A);
    gather(R, mm, FRAG_B, mm->b, (ptx_type)mm->btype, true, BT);
    gather(R, mm, FRAG_C, mm->c, (ptx_type)mm->ctype, false, C);
    ptx_type dt = (ptx_type)mm->dtype;
    unsigned M = mm->m, N = mm->n, K = mm->k;
    uint64_t D[32 * 32];
    if (dt == T_S32) {   /* exact in 64 bits, then wrapped or saturated */
        for (unsigned i = 0; i < M; i++)
            for (unsigned j = 0; j < N; j++) {
                int64_t acc = (int64_t)C[i * 32 + j];
                for (unsigned q = 0; q < K; q++)
                    acc += (int64_t)A[i * 32 + q] * (int64_t)BT[j * 32 + q];
                if (mm->satfinite)
                    acc = acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : acc;
                D[i * 32 + j] = (uint32_t)acc;
            }
    } else if (dt == T_F64) {
        for (unsigned i = 0; i < M; i++)
            for (unsigned j = 0; j < N; j++) {
                double acc = C[i * 32 + j];
                for (unsigned q = 0; q < K; q++)
                    acc = fma(A[i * 32 + q], BT[j * 32 + q], acc);
                D[i * 32 + j] = ptx_f64_bits(acc);
            }
    } else {   /* products of f16, bf16, tf32 and fp8 are exact in f32; sums round in f32, in k order */
        float af[32 * 32], bf[32 * 32];
        for (unsigned i = 0; i < M; i++)
            for (unsigned q = 0; q < K; q++)
                af[i * 32 + q] = (float)A[i * 32 + q];
        for (unsigned j = 0; j < N; j++)
            for (unsigned q = 0; q < K; q++)
                bf[j * 32 + q] = (float)BT[j * 32 + q];
        for (unsigned i = 0; i < M; i++)
            for (unsigned j = 0; j < N; j++) {
                float acc = (float)C[i * 32 + j];
                const float *a = &af[i * 32], *b = &bf[j * 32];
                for (unsigned q = 0; q < K; q++)
                    acc += a[q] * b[q];
                D[i * 32 + j] = dt == T_F16 ? ptx_float_to_half(acc) : ptx_f32_bits(acc);
            }
    }
    unsigned es = type_bytes(dt), n = list_elems(mm->nd, es);
    const layout *L = layout_of(mm, FRAG_C, es);
    uint64_t vals[32];
    for (uint32_t r = m; r; r &= r - 1) {
        unsigned l = (unsigned)__builtin_ctz(r);
        for (unsigned e = 0; e < n; e++) {
            unsigned rc = L->rc[l][e % L->u];
            vals[e] = D[(rc >> 8) * 32 + (rc & 0xff)];
        }
        put_elems(R, mm->d, mm->nd, es, vals, l);
    }
    return true;
}

/* ldmatrix / stmatrix: lane 8j + r names row r of 8x8 matrix j; lane l
 * holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of each (of its
 * transpose with .trans). */
static bool matrix_ldst(ptx_worker *k, ptx_warp *w, const ptx_insn *in, const ptx_mma *mm,
                        uint32_t m, bool load)
{
    uint64_t (*R)[PTX_WARP] = w->R;
    unsigned nmat = mm->frag;
    uint16_t rows[4][8][8];
    if (!load)
        for (unsigned j = 0; j < nmat; j++)
            for (unsigned r = 0; r < 8; r++)
                for (unsigned c = 0; c < 8; c++) {
                    unsigned fr = mm->trans ? c : r, fc = mm->trans ? r : c;
                    uint32_t v = (uint32_t)R[mm->c[j]][fr * 4 + fc / 2];
                    rows[j][r][c] = (uint16_t)(v >> (16 * (fc % 2)));
                }
    for (unsigned j = 0; j < nmat; j++)
        for (unsigned r = 0; r < 8; r++) {
            unsigned src = 8 * j + r;
            if (!load && !(m & (1u << src)))
                continue;
            uint64_t a = R[in->a][src] + (uint64_t)in->imm;
            uint8_t *p = ptx_lane_ptr(k, w, in->space, src, a, 16);
            if (!p)
                return fault(k, in, a, 16, load ? "load" : "store");
            if (load)
                memcpy(rows[j][r], p, 16);
            else
                memcpy(p, rows[j][r], 16);
        }
    if (!load)
        return true;
    for (uint32_t b = m; b; b &= b - 1) {
        unsigned l = (unsigned)__builtin_ctz(b), g = l / 4, t = l % 4;
        for (unsigned j = 0; j < nmat; j++) {
            uint16_t lo = mm->trans ? rows[j][2 * t][g] : rows[j][g][2 * t];
            uint16_t hi = mm->trans ? rows[j][2 * t + 1][g] : rows[j][g][2 * t + 1];
            R[mm->d[j]][l] = (uint32_t)lo | (uint32_t)hi << 16;
        }
    }
    return true;
}

/* movmatrix.trans: the 8x8 matrix in ldmatrix's layout, transposed. */
static void movmatrix(ptx_warp *w, const ptx_mma *mm, uint32_t m)
{
    uint64_t (*R)[PTX_WARP] = w->R;
    uint32_t s[PTX_WARP];
    for (unsigned l = 0; l < PTX_WARP; l++)
        s[l] = (uint32_t)R[mm->a[0]][l];
    for (uint32_t b = m; b; b &= b - 1) {
        unsigned l = (unsigned)__builtin_ctz(b), g = l / 4, t = l % 4;
        uint32_t v = 0;
        for (unsigned i = 0; i < 2; i++) {
            unsigned row = 2 * t + i;   /* element (row, g) of the source */
            v |= ((s[row * 4 + g / 2] >> (16 * (g % 2))) & 0xffff) << (16 * i);
        }
        R[mm->d[0]][l] = v;
    }
}

bool ptx_mma_exec(ptx_worker *k, ptx_warp *w, const ptx_insn *in, uint32_t m)
{
    const ptx_mma *mm = &k->run->prog->mmas[in->aux];
    switch (in->op) {
    case OP_WMMA_LD: return wmma_ldst(k, w, in, mm, m, true);
    case OP_WMMA_ST: return wmma_ldst(k, w, in, mm, m, false);
    case OP_MMA: return mma(w, mm, m);
    case OP_LDMATRIX: return matrix_ldst(k, w, in, mm, m, true);
    case OP_STMATRIX: return matrix_ldst(k, w, in, mm, m, false);
    default: movmatrix(w, mm, m); return true;
    }
}

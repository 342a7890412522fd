/* ptx_ir: the decoded form of a PTX module that the interpreter runs. The
 * parser (ptx_parse.c) and decoder (ptx_decode.c) build it once; launches
 * (ptx_launch.c, ptx_exec.c) only read it, except for bound global addresses.
 *
 * Every operand is a register index into a warp's lane-major register file
 * `uint64_t R[nregs][32]`: immediates and symbol addresses become registers
 * preloaded once per launch, special registers (%tid.x, ...) registers
 * preloaded per warp. A register holds its value zero-extended from the
 * register's width; floats as their bit patterns. */
#ifndef RIG_SOFTGPU_PTX_IR_H
#define RIG_SOFTGPU_PTX_IR_H

#include "softgpu/engine.h"

#include <stdbool.h>
#include <stdint.h>

#define PTX_WARP 32
#define PTX_FULL 0xffffffffu

/* Operand types, in the order their sizes grow within a kind. */
typedef enum ptx_type {
    T_NONE, T_PRED,
    T_B8, T_U8, T_S8,
    T_B16, T_U16, T_S16,
    T_B32, T_U32, T_S32,
    T_B64, T_U64, T_S64,
    T_F16, T_F16X2, T_BF16, T_F32, T_F64,
    T_B128,
    T_BF16X2,   /* after the others: comparisons of types above never meet it */
    T_E4M3, T_E5M2,   /* mma's fp8 multiplicands only */
    T_COUNT
} ptx_type;

static inline unsigned ptx_type_size(ptx_type t)
{
    static const uint8_t size[T_COUNT] = {
        [T_PRED] = 1, [T_B8] = 1, [T_U8] = 1, [T_S8] = 1, [T_B16] = 2, [T_U16] = 2,
        [T_S16] = 2, [T_B32] = 4, [T_U32] = 4, [T_S32] = 4, [T_B64] = 8, [T_U64] = 8,
        [T_S64] = 8, [T_F16] = 2, [T_F16X2] = 4, [T_BF16] = 2, [T_F32] = 4, [T_F64] = 8,
        [T_B128] = 16, [T_BF16X2] = 4, [T_E4M3] = 1, [T_E5M2] = 1,
    };
    return (unsigned)t < T_COUNT ? size[t] : 0;
}

static inline bool ptx_type_signed(ptx_type t)
{
    return t == T_S8 || t == T_S16 || t == T_S32 || t == T_S64;
}

static inline bool ptx_type_float(ptx_type t)
{
    return t == T_F16 || t == T_F16X2 || t == T_BF16 || t == T_F32 || t == T_F64 || t == T_BF16X2;
}

/* Opcodes of the decoded form. One PTX opcode can decode to several. */
#define PTX_OPS(X) \
    X(NOP) X(MOV) X(PACK) X(UNPACK) X(LD) X(ST) X(LD_KPARAM) X(LD_PARAM) \
    X(ST_PARAM) X(ADD) X(SUB) X(MUL) X(MULHI) X(MULWIDE) X(MAD) X(MADHI) \
    X(MADWIDE) X(ADDC) X(SUBC) X(MADC) X(DIV) X(REM) X(ABS) X(NEG) X(MIN) \
    X(MAX) X(AND) X(OR) X(XOR) X(NOT) X(CNOT) X(SHL) X(SHR) X(SETP) X(SET) \
    X(SELP) X(CVT) X(CVTA_TO) X(CVTA_FROM) X(BRA) X(RET) X(EXIT) X(CALL) \
    X(VPRINTF) X(TRAP) X(BAR) X(MEMBAR) X(ATOM) X(SHFL) X(VOTE) \
    X(ACTIVEMASK) X(POPC) X(CLZ) X(BREV) X(BFIND) X(BFE) X(BFI) X(PRMT) \
    X(COPYSIGN) X(RCP) X(SQRT) X(RSQRT) X(EX2) X(LG2) X(SIN) X(COS) \
    X(TANH) X(FMA) X(TESTP) X(CLOCK) X(DEPOT) X(LOP3) X(MUL24) X(MAD24) \
    X(SAD) X(FNS) X(DP4A) X(SHF) X(MATCH) X(REDUX) X(ISSPACEP) \
    X(TEX) X(TLD4) X(TXQ) X(SULD) X(SUST) X(SUQ) X(LD_KPARAM_REG) X(BMSK) \
    X(MALLOC) X(FREE) X(CALLI) X(CPASYNC) X(MBAR) X(SLEEP) \
    X(WMMA_LD) X(WMMA_ST) X(MMA) X(LDMATRIX) X(STMATRIX) X(MOVMATRIX) X(TF32) \
    X(CVTNARROW) X(CVTPACK) \
    X(TMA)

typedef enum ptx_op {
#define PTX_OP_ENUM(n) OP_##n,
    PTX_OPS(PTX_OP_ENUM)
#undef PTX_OP_ENUM
    OP_COUNT
} ptx_op;

/* State spaces of memory operands. */
enum { SP_GENERIC, SP_GLOBAL, SP_SHARED, SP_LOCAL, SP_CONST, SP_PARAM };

/* Comparisons (setp, set). Unsigned integer ones map to LT.. with the
 * operand type made unsigned; unordered float ones set PTX_CMP_U. */
enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_NUM, CMP_NAN };
#define PTX_CMP_U 8

/* Rounding: none given, rn rz rm rp (float results), rni rzi rmi rpi
 * (round to integral). */
enum { RND_NONE, RND_RN, RND_RZ, RND_RM, RND_RP, RND_RNI, RND_RZI, RND_RMI, RND_RPI };

/* Modes of shfl, vote, atom, bool ops, bfind. */
enum { SHFL_UP, SHFL_DOWN, SHFL_BFLY, SHFL_IDX };
enum { VOTE_ALL, VOTE_ANY, VOTE_UNI, VOTE_BALLOT };
enum { ATOM_ADD, ATOM_MIN, ATOM_MAX, ATOM_INC, ATOM_DEC, ATOM_AND, ATOM_OR,
       ATOM_XOR, ATOM_EXCH, ATOM_CAS };
enum { BOOL_NONE, BOOL_AND, BOOL_OR, BOOL_XOR };

/* mbarrier operations (ptx_insn.mode of OP_MBAR): address a + imm in space,
 * operand b (count, tx-count, state or parity), result d. */
enum { MB_INIT, MB_ARRIVE, MB_ARRIVE_DROP, MB_ARRIVE_TX, MB_ARRIVE_DROP_TX, MB_EXPECT_TX,
       MB_COMPLETE_TX, MB_TEST, MB_TEST_PARITY, MB_INVAL, MB_PENDING };

/* OP_CPASYNC: copies at issue (every later wait then finds it complete).
 * Destination a + imm in space, source b + c (an offset register) in type2.
 * mode 4, 8 or 16: cp.async of that many bytes, e the source size (or,
 * type T_PRED, ignore-src: the predicate); mode 0: cp.async.bulk of e
 * bytes, then, vec 1, complete_tx of them on the mbarrier at v[0] + v[1]. */

/* Geometries of image instructions (ptx_insn.mode of tex, tld4, suld,
 * sust); clamp modes of suld/sust (ptx_insn.space); queries of txq/suq
 * (ptx_insn.mode). Image instructions run in ptx_image.c: operands a (the
 * handle), coordinates b, c, e, d in PTX order, values v[0..vec), level
 * of detail register aux (tex.level). */
enum { GEO_1D, GEO_2D, GEO_3D, GEO_A1D, GEO_A2D, GEO_CUBE, GEO_ACUBE };
enum { SURF_TRAP, SURF_CLAMP, SURF_ZERO };
enum { QUERY_WIDTH, QUERY_HEIGHT, QUERY_DEPTH, QUERY_CHANNEL_DATA_TYPE, QUERY_CHANNEL_ORDER,
       QUERY_NORMALIZED_COORDS, QUERY_FILTER_MODE, QUERY_ADDR_MODE_0, QUERY_ADDR_MODE_1,
       QUERY_ADDR_MODE_2, QUERY_ARRAY_SIZE, QUERY_NUM_MIPMAP_LEVELS, QUERY_NUM_SAMPLES,
       QUERY_MEMORY_LAYOUT };

/* ptx_insn.flags */
#define F_GUARD_NEG  0x0001   /* @!p */
#define F_FTZ        0x0002
#define F_SAT        0x0004
#define F_CC_IN      0x0008   /* addc/subc/madc read the carry */
#define F_CC_OUT     0x0010   /* .cc: write the carry */
#define F_NEG_C      0x0020   /* setp/selp/vote: !c (or !a for vote) */
#define F_HAS_P      0x0040   /* shfl d|p, setp p|q */
#define F_SHIFTAMT   0x0080   /* bfind.shiftamt */
#define F_UNI        0x0100   /* bra.uni, call.uni */
#define F_APPROX     0x0200
#define F_NO_RESULT  0x0400   /* red (atom without a result) */
#define F_NEG_B      0x0800   /* vote/setp source predicate negated */
#define F_MEMBER     0x1000   /* .sync warp op: v[0] holds the member mask */
#define F_FORMATTED  0x2000   /* sust.p */
#define F_REF        0x4000   /* image access: a is a texture/surface reference index, not a register */
#define F_NAN        0x8000   /* min/max.NaN: a NaN operand gives the canonical NaN */
/* ptx_insn.flags2 */
#define F2_RELU      0x0001   /* .relu: a negative result is +0 */

/* OP_CVTNARROW: cvt to or from the 8-, 6- and 4-bit float formats in pairs
 * (ptx_insn.aux the format, NF_*). Narrowing: d (b16, or b8 for e2m1x2)
 * packs a (high) and b (low) of type2 T_F32, or the halves of a of type2
 * T_F16X2/T_BF16X2; widening: d of type T_F16X2 (T_BF16X2 for ue8m0x2)
 * from the two narrow values of a. mode the rounding, F_SAT .satfinite,
 * F2_RELU .relu (ptx_math.c, ptx_cvt_narrow). */
enum { NF_E4M3, NF_E5M2, NF_E2M3, NF_E3M2, NF_E2M1, NF_UE8M0 };
/* OP_TMA: cp.async.bulk.tensor.Nd (tile mode) of one box, at issue like
 * OP_CPASYNC; mode the rank, vec 1 global to shared (then complete_tx on
 * the mbarrier at v[0] + v[1]), 0 shared to global. Shared address a + imm;
 * tensor map at b + c, a kernel parameter offset when F_REF (or when a
 * register holds a parameter's offset: smaller than the parameters), else
 * a generic address; coordinates prog->mmas[aux].a[0..mode). */
/* OP_CVTPACK: cvt.pack.sat.type.s32.b32 d, a, b(, c): a and b saturated to
 * type (mode: its width in bits, F_SAT... always; type2 signedness in
 * type), packed a above b, c's bits above them. */

typedef struct ptx_insn {
    uint8_t op;          /* ptx_op */
    uint8_t type;        /* ptx_type of the operation (dest for cvt) */
    uint8_t type2;       /* cvt: source type; setp: unused */
    uint8_t mode;        /* cmp, rounding, shfl/vote/atom mode */
    uint8_t space;       /* SP_* for memory operations */
    uint8_t vec;         /* 1, 2 or 4 elements for ld/st; operands of pack */
    uint8_t dwidth;      /* width in bytes of the destination register */
    uint8_t boolop;      /* setp/set: BOOL_* */
    uint16_t flags;
    uint16_t flags2;     /* F2_* */
    int32_t guard;       /* predicate register, or -1 */
    uint32_t d, a, b, c, e;
    uint32_t v[4];       /* vector operands (ld/st/pack), else unused */
    int64_t imm;         /* address offset; branch/call target pc; param offset */
    uint32_t line;       /* source line for messages */
    uint32_t aux;        /* call: index of its ptx_call */
} ptx_insn;

/* ptx_call.func of an indirect call: the callee is known per lane when it
 * runs, so args[].to and rets[].from are the callee's formal slots then. */
#define PTX_NO_FUNC UINT32_MAX
/* A warp's matrix operation (wmma.*, mma, ldmatrix, stmatrix, movmatrix;
 * ptx_insn.aux indexes prog->mmas). Fragments are register lists, element
 * 0 in the low bits of the first; ptx_mma.c says which element is where. */
enum { FRAG_A, FRAG_B, FRAG_C };
typedef struct ptx_mma {
    uint8_t m, n, k;
    uint8_t atype, btype;        /* ptx_type of A and B (T_B32 for tf32) */
    uint8_t ctype, dtype;        /* accumulators */
    uint8_t frag;                /* wmma.load/store: FRAG_*; ldmatrix: matrices */
    bool col;                    /* wmma.load/store: column-major memory */
    bool trans;                  /* ldmatrix, stmatrix */
    bool wmma;                   /* wmma fragments, not mma's */
    bool tf32;                   /* A and B are tf32 */
    bool satfinite;
    uint8_t na, nb, nc, nd;      /* registers in each list */
    uint32_t a[8], b[8], c[8], d[8];
} ptx_mma;

/* A copy between per-lane parameter slots at a call or return. */
typedef struct ptx_pcopy {
    uint32_t from, to, size;
} ptx_pcopy;

typedef struct ptx_call {
    uint32_t func;           /* index into prog->funcs; PTX_NO_FUNC: indirect */
    uint32_t nargs, nrets;
    ptx_pcopy *args;         /* call-site param -> formal param */
    ptx_pcopy *rets;         /* formal retval -> call-site param */
} ptx_call;

typedef struct ptx_func {
    char *name;
    bool is_entry;
    bool defined;
    bool is_extern;
    uint32_t pc, end;            /* code range */
    uint32_t reg_first, reg_count;  /* its registers, saved across calls */
    uint32_t depot;              /* bytes of __local_depot */
    uint32_t depot_align;
    bool recursive;              /* can call itself: calls save its registers */
    bool addressed;              /* its address is taken: indirect calls may reach it */
    uint32_t *shared_used;       /* static shared variables it names (ids) */
    uint32_t nshared_used, capshared_used;
    /* .func formals: per-lane param slots */
    uint32_t nparams, nrets;
    uint32_t *param_off, *param_size;
    uint32_t *ret_off, *ret_size;
    /* why the engine cannot run it (malloc'd), NULL when it can */
    char *refusal;
    /* .entry */
    soft_entry_info info;
    soft_param *kparams;
} ptx_func;

/* A module's `.global .texref` / `.global .surfref` variable. */
typedef struct ptx_ref {
    char *name;
    bool surface;
} ptx_ref;

/* An initialiser word holding another variable's address (`generic(x)+8`):
 * written into the holder's storage once both are bound. */
typedef struct ptx_reloc {
    uint32_t holder, target;     /* indices into prog->globals */
    uint64_t offset;             /* in the holder */
    int64_t addend;
} ptx_reloc;

typedef struct ptx_global {
    soft_global_info info;
    char *name;
    uint8_t *init;
    uint32_t reg;        /* register preloaded with its address */
    uint64_t addr;       /* bound address, 0 until bound */
} ptx_global;

/* Registers preloaded per warp from the launch geometry. */
enum {
    SR_ZERO,     /* always 0; also the sink `_` writes into SR_SINK */
    SR_SINK,
    SR_TID_X, SR_TID_Y, SR_TID_Z,
    SR_NTID_X, SR_NTID_Y, SR_NTID_Z,
    SR_CTAID_X, SR_CTAID_Y, SR_CTAID_Z,
    SR_NCTAID_X, SR_NCTAID_Y, SR_NCTAID_Z,
    SR_LANEID, SR_WARPID, SR_NWARPID, SR_SMID, SR_NSMID, SR_GRIDID,
    SR_LANEMASK_EQ, SR_LANEMASK_LE, SR_LANEMASK_LT, SR_LANEMASK_GE,
    SR_LANEMASK_GT, SR_DYN_SMEM, SR_TOTAL_SMEM,
    SR_ENVREG1, SR_ENVREG2,  /* a cooperative launch's grid workspace, high and low halves */
    SR_ONE,      /* always 1: a cluster's size in CTAs (every CTA is its own cluster) */
    SR_CLOCK, SR_CLOCK64, SR_CLOCK_HI, /* never read: mov from them decodes to OP_CLOCK */
    SR_COUNT
};

/* A register preloaded once per launch in every lane. */
typedef struct ptx_const {
    uint32_t reg;
    uint64_t value;
} ptx_const;

struct soft_program {
    ptx_insn *code;
    uint32_t ncode;
    ptx_func *funcs;
    uint32_t nfuncs;
    uint32_t *entries;           /* indices into funcs */
    uint32_t nentries;
    ptx_global *globals;
    uint32_t nglobals;
    ptx_const *consts;
    uint32_t nconsts;
    ptx_call *calls;
    uint32_t ncalls;
    ptx_reloc *relocs;
    uint32_t nrelocs;
    ptx_mma *mmas;               /* operands of warp matrix instructions */
    uint32_t nmmas;
    ptx_ref *refs;               /* texture and surface references, in module order */
    uint32_t nrefs;
    uint32_t nregs;
    uint8_t *reg_width;          /* bytes, per register */
    uint32_t shared_bytes;       /* static .shared, module-wide layout */
    uint32_t dyn_shared_off;     /* where extern .shared starts */
    uint32_t param_bytes;        /* per-lane .func parameter slots */
    bool has_calls;
    uint32_t target;             /* .target sm_XX: XX (0 when none named) */
    uint64_t id;                 /* unique in the process: caches key on it */
    uint64_t bind_gen;           /* bumped by every bind */
};

/* A device function's address. No memory holds code here, so it is a tag,
 * the program's id and the function's index; an indirect call decodes it
 * and refuses any other value. */
#define PTX_FADDR_TAG 0xfe00000000000000ull
static inline uint64_t ptx_func_addr(const soft_program *g, uint32_t f)
{
    return PTX_FADDR_TAG | (g->id & 0xffffffffull) << 24 | f;
}

/* The function an address names in g, or PTX_NO_FUNC. */
static inline uint32_t ptx_func_at(const soft_program *g, uint64_t a)
{
    if ((a & 0xff00000000000000ull) != PTX_FADDR_TAG || ((a >> 24) & 0xffffffffull) != (g->id & 0xffffffffull))
        return PTX_NO_FUNC;
    uint32_t f = (uint32_t)(a & 0xffffff);
    return f < g->nfuncs ? f : PTX_NO_FUNC;
}

/* Formats one vprintf call of one lane (ptx_printf.c). Reads the format and
 * arguments through rd; returns the text length or -1 (bad address). */
typedef bool (*ptx_read_fn)(void *ctx, uint64_t addr, void *dst, size_t len);
int ptx_format_printf(uint64_t fmt, uint64_t args, ptx_read_fn rd, void *ctx,
                      char **text);
/* A NUL-terminated device string (malloc'd), "(null)" for address 0, or
 * NULL when it cannot be read (ptx_printf.c). */
char *ptx_read_cstring(uint64_t addr, ptx_read_fn rd, void *ctx);

#endif

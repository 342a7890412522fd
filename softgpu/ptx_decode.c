/* ptx_decode: one PTX instruction (opcode with its modifiers, parsed
 * operands) to ptx_insn. Whatever it does not know it refuses with
 * CUDA_ERROR_NOT_SUPPORTED naming the instruction: never a guess. */
#include "softgpu/ptx_parse.h"

#include <stdio.h>
#include <string.h>

/* The modifiers of one opcode, each to be consumed by the decoder. */
typedef struct mods {
    const ptx_tok *op;
    char base[24];
    unsigned n;
    const char *s[16];
    uint8_t len[16];
    bool used[16];
} mods;

static bool is(const mods *m, unsigned i, const char *name)
{
    return strlen(name) == m->len[i] && memcmp(m->s[i], name, m->len[i]) == 0;
}

/* Consumes modifier name; true when present. */
static bool take(mods *m, const char *name)
{
    for (unsigned i = 0; i < m->n; i++)
        if (!m->used[i] && is(m, i, name)) {
            m->used[i] = true;
            return true;
        }
    return false;
}

/* Consumes the first of names present; returns its index or -1. */
static int take_one(mods *m, const char *const *names, unsigned count)
{
    for (unsigned i = 0; i < m->n; i++) {
        if (m->used[i])
            continue;
        for (unsigned k = 0; k < count; k++)
            if (is(m, i, names[k])) {
                m->used[i] = true;
                return (int)k;
            }
    }
    return -1;
}

static ptx_type take_type(mods *m)
{
    for (unsigned i = 0; i < m->n; i++) {
        if (m->used[i])
            continue;
        ptx_type t = ptx_type_from(m->s[i], m->len[i]);
        if (t != T_NONE) {
            m->used[i] = true;
            return t;
        }
    }
    return T_NONE;
}

/* shared::cluster is shared: every cluster here is one CTA, whose own
 * shared addresses are the same in both windows. */
static int take_space(mods *m)
{
    static const char *const names[] = { "global", "shared", "local", "const", "param",
                                         "shared::cta", "shared::cluster" };
    static const int spaces[] = { SP_GLOBAL, SP_SHARED, SP_LOCAL, SP_CONST, SP_PARAM,
                                  SP_SHARED, SP_SHARED };
    int k = take_one(m, names, 7);
    return k < 0 ? SP_GENERIC : spaces[k];
}

static int take_rnd(mods *m)
{
    static const char *const names[] = { "rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi" };
    int k = take_one(m, names, 8);
    return k < 0 ? RND_NONE : RND_RN + k;
}

__attribute__((noreturn))
static void unsupported(ptx_parser *p, const mods *m, const char *why)
{
    ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, m->op->line, "instruction '%.*s' is not supported%s%s",
             (int)(m->op->len > 60 ? 60 : m->op->len), m->op->s, why ? ": " : "", why ? why : "");
}

__attribute__((noreturn))
static void invalid(ptx_parser *p, const mods *m, const char *why)
{
    ptx_fail(p, CUDA_ERROR_INVALID_PTX, m->op->line, "'%.*s': %s",
             (int)(m->op->len > 60 ? 60 : m->op->len), m->op->s, why);
}

/* Modifiers that change nothing on a CPU: cache hints, memory order and
 * scope (every access here is at least as strong), .sync/.aligned. */
static bool ignorable(const char *s, unsigned len)
{
    static const char *const names[] = {
        "ca", "cg", "cs", "lu", "cv", "wb", "wt", "relaxed", "acquire", "release",
        "acq_rel", "sc", "weak", "volatile", "gpu", "sys", "cta", "aligned", "sync",
        "nc", "mmio",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0)
            return true;
    return (len > 4 && (memcmp(s, "L1::", 4) == 0 || memcmp(s, "L2::", 4) == 0)) ||
           (len > 7 && memcmp(s, "level::", 7) == 0);
}

static void finish_mods(ptx_parser *p, mods *m)
{
    for (unsigned i = 0; i < m->n; i++)
        if (!m->used[i] && !ignorable(m->s[i], m->len[i])) {
            char why[64];
            snprintf(why, sizeof why, "modifier .%.*s", (int)m->len[i], m->s[i]);
            unsupported(p, m, why);
        }
}

static void split(ptx_parser *p, const ptx_tok *op, mods *m)
{
    memset(m, 0, sizeof *m);
    m->op = op;
    const char *s = op->s, *e = op->s + op->len;
    const char *dot = memchr(s, '.', op->len);
    size_t blen = dot ? (size_t)(dot - s) : op->len;
    if (blen == 0 || blen >= sizeof m->base)
        unsupported(p, m, NULL);
    memcpy(m->base, s, blen);
    m->base[blen] = 0;
    while (dot && dot < e) {
        const char *start = dot + 1;
        const char *next = memchr(start, '.', (size_t)(e - start));
        const char *end = next ? next : e;
        if (m->n == 16 || end == start || end - start > 60)
            unsupported(p, m, "malformed modifiers");
        m->s[m->n] = start;
        m->len[m->n] = (uint8_t)(end - start);
        m->n++;
        dot = next;
    }
}

/* ---- operands ---- */

static ptx_type norm_int(ptx_type t)
{
    switch (t) {
    case T_B8: return T_U8;
    case T_B16: return T_U16;
    case T_B32: return T_U32;
    case T_B64: return T_U64;
    default: return t;
    }
}

static ptx_type unsign(ptx_type t)
{
    switch (t) {
    case T_S8: case T_B8: return T_U8;
    case T_S16: case T_B16: return T_U16;
    case T_S32: case T_B32: return T_U32;
    case T_S64: case T_B64: return T_U64;
    default: return t;
    }
}

static uint64_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

/* An immediate's bits as an operand of type t. */
static uint64_t imm_bits(uint8_t kind, uint64_t bits, ptx_type t)
{
    if (kind == OPD_INT) {
        if (t == T_F32)
            return f32_bits((float)(int64_t)bits);
        if (t == T_F64)
            return f64_bits((double)(int64_t)bits);
        return bits;
    }
    if (kind == OPD_F32) {
        float f;
        uint32_t u = (uint32_t)bits;
        memcpy(&f, &u, 4);
        if (t == T_F64)
            return f64_bits((double)f);
        return bits & 0xffffffffu;
    }
    /* OPD_F64 */
    double d;
    memcpy(&d, &bits, 8);
    if (t == T_F32)
        return f32_bits((float)d);
    return bits;
}

static uint32_t dst_any(ptx_parser *p, const mods *m, const ptx_opd *o, bool pair)
{
    if (o->kind == OPD_SINK)
        return SR_SINK;
    if (o->kind != OPD_REG || (o->has_reg2 && !pair) || o->neg)
        invalid(p, m, "destination must be a register");
    if (o->reg < SR_COUNT)
        invalid(p, m, "destination is a special register");
    return o->reg;
}

static uint32_t dst(ptx_parser *p, const mods *m, const ptx_opd *o)
{
    return dst_any(p, m, o, false);
}

static uint32_t symbol_address(ptx_parser *p, const mods *m, const ptx_opd *o)
{
    const ptx_sym *s = o->sym;
    if (!s)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, m->op->line, "unknown symbol '%.*s'",
                 (int)(o->name->len > 40 ? 40 : o->name->len), o->name->s);
    switch (s->kind) {
    case SYM_GLOBAL:
        return p->prog->globals[s->index].reg;
    case SYM_SHARED:
        ptx_use_shared(p, s->index);
        return ptx_const_reg(p, s->offset);
    case SYM_DYNSHARED:
        return ptx_dyn_shared_reg(p);
    case SYM_FUNC:
        if (p->prog->funcs[s->index].is_entry)
            unsupported(p, m, "address of a kernel");
        p->prog->funcs[s->index].addressed = true;
        return ptx_const_reg(p, ptx_func_addr(p->prog, s->index));
    default:
        unsupported(p, m, "address of this kind of symbol");
    }
}

static uint32_t src(ptx_parser *p, const mods *m, const ptx_opd *o, ptx_type t)
{
    switch (o->kind) {
    case OPD_REG:
        if (o->has_reg2)
            invalid(p, m, "unexpected '|'");
        if (o->reg == SR_CLOCK || o->reg == SR_CLOCK64 || o->reg == SR_CLOCK_HI)
            unsupported(p, m, "%clock outside mov");
        return o->reg;
    case OPD_INT:
    case OPD_F32:
    case OPD_F64:
        return ptx_const_reg(p, imm_bits(o->kind, o->bits, t));
    case OPD_SYM:
        return symbol_address(p, m, o);
    default:
        invalid(p, m, "bad source operand");
    }
}

static uint32_t pred_src(ptx_parser *p, const mods *m, const ptx_opd *o, bool *neg)
{
    *neg = o->neg;
    if (o->kind == OPD_INT)
        return ptx_const_reg(p, o->bits != 0);
    if (o->kind != OPD_REG || p->prog->reg_width[o->reg] != 1 || o->has_reg2)
        invalid(p, m, "expected a predicate");
    return o->reg;
}

/* A memory operand: base register plus immediate offset. */
static void address(ptx_parser *p, const mods *m, const ptx_opd *o, int space, ptx_insn *in)
{
    if (o->kind != OPD_ADDR || o->n)
        invalid(p, m, "expected an address");
    in->imm = o->off;
    if (o->addr_reg) {
        in->a = o->reg;
        return;
    }
    if (!o->addr_sym) {
        in->a = SR_ZERO;
        return;
    }
    const ptx_sym *s = o->sym;
    if (!s)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, m->op->line, "unknown symbol '%.*s'",
                 (int)(o->name->len > 40 ? 40 : o->name->len), o->name->s);
    switch (s->kind) {
    case SYM_GLOBAL:
        if (space == SP_SHARED || space == SP_LOCAL || space == SP_PARAM)
            invalid(p, m, "global variable in another state space");
        in->a = p->prog->globals[s->index].reg;
        return;
    case SYM_SHARED:
    case SYM_DYNSHARED:
        if (space != SP_SHARED)
            unsupported(p, m, "shared variable used as a generic address");
        if (s->kind == SYM_SHARED)
            ptx_use_shared(p, s->index);
        in->a = s->kind == SYM_SHARED ? SR_ZERO : ptx_dyn_shared_reg(p);
        in->imm += (int64_t)s->offset;
        return;
    case SYM_LOCAL:
        if (space != SP_LOCAL || !p->fn->is_entry)
            unsupported(p, m, "local variable addressed by name");
        in->a = SR_ZERO;
        in->imm += (int64_t)s->offset;
        return;
    default:
        invalid(p, m, "bad address symbol");
    }
}

static void need(ptx_parser *p, const mods *m, unsigned n, unsigned want)
{
    if (n != want)
        invalid(p, m, "wrong number of operands");
}

/* ---- instruction families ---- */

static bool int_type(ptx_type t)
{
    return t >= T_B8 && t <= T_S64;
}

static void dec_mov(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    ptx_type t = norm_int(take_type(m));
    finish_mods(p, m);
    need(p, m, n, 2);
    if (t == T_NONE)
        invalid(p, m, "missing type");
    in->type = (uint8_t)t;
    unsigned size = ptx_type_size(t);
    if (o[0].kind == OPD_VEC) {   /* mov.b64 {lo, hi}, x */
        in->op = OP_UNPACK;
        in->vec = o[0].n;
        if (o[0].n < 2 || o[0].n > 4 || size % o[0].n)
            invalid(p, m, "bad unpack");
        for (unsigned i = 0; i < o[0].n; i++) {
            if (o[0].v[i].kind != OPD_REG && o[0].v[i].kind != OPD_SINK)
                invalid(p, m, "bad unpack");
            in->v[i] = o[0].v[i].kind == OPD_SINK ? SR_SINK : o[0].v[i].reg;
        }
        in->a = src(p, m, &o[1], t);
        return;
    }
    in->d = dst(p, m, &o[0]);
    if (o[1].kind == OPD_VEC) {   /* mov.b64 x, {lo, hi} */
        in->op = OP_PACK;
        in->vec = o[1].n;
        if (o[1].n < 2 || o[1].n > 4 || size % o[1].n)
            invalid(p, m, "bad pack");
        for (unsigned i = 0; i < o[1].n; i++) {
            ptx_velem *e = &o[1].v[i];
            if (e->kind == OPD_SINK)
                invalid(p, m, "bad pack");
            in->v[i] = e->kind == OPD_REG ? e->reg : ptx_const_reg(p, e->bits);
        }
        return;
    }
    if (o[1].kind == OPD_REG &&
        (o[1].reg == SR_CLOCK || o[1].reg == SR_CLOCK64 || o[1].reg == SR_CLOCK_HI)) {
        in->op = OP_CLOCK;
        in->mode = o[1].reg == SR_CLOCK ? 1 : o[1].reg == SR_CLOCK_HI ? 2 : 0;
        return;
    }
    if (o[1].kind == OPD_SYM && o[1].sym && o[1].sym->kind == SYM_LOCAL) {
        in->op = OP_DEPOT;
        in->imm = (int64_t)o[1].sym->offset;
        return;
    }
    if (o[1].kind == OPD_SYM && o[1].sym && o[1].sym->kind == SYM_FUNC && size != 8)
        invalid(p, m, "a function's address is 64 bits");
    /* A kernel parameter's address (CUB takes one of a by-value struct to
     * read it through ld.param [%rd+off]): its offset in the launch's buffer. */
    if (o[1].kind == OPD_SYM && o[1].sym && o[1].sym->kind == SYM_KPARAM && size == 8) {
        in->op = OP_MOV;
        in->a = ptx_const_reg(p, o[1].sym->offset);
        return;
    }
    if (o[1].kind == OPD_SYM && o[1].sym &&
        (o[1].sym->kind == SYM_KPARAM || o[1].sym->kind == SYM_PARAM))
        unsupported(p, m, "parameter addresses");
    in->op = OP_MOV;
    in->a = src(p, m, &o[1], t);
}

static void dec_ldst(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool load)
{
    int space = take_space(m);
    in->vec = 1;
    if (take(m, "v2"))
        in->vec = 2;
    else if (take(m, "v4"))
        in->vec = 4;
    else if (take(m, "v8"))
        unsupported(p, m, ".v8");
    ptx_type t = norm_int(take_type(m));
    finish_mods(p, m);
    need(p, m, n, 2);
    if (t == T_NONE || t == T_PRED || t == T_B128 || t == T_F16X2 || t == T_BF16X2)
        unsupported(p, m, "type");
    in->type = (uint8_t)t;
    in->space = (uint8_t)space;
    const ptx_opd *val = load ? &o[0] : &o[1];
    const ptx_opd *adr = load ? &o[1] : &o[0];
    if (in->vec > 1) {
        if (val->kind != OPD_VEC || val->n != in->vec)
            invalid(p, m, "vector operand does not match");
        for (unsigned i = 0; i < in->vec; i++) {
            const ptx_velem *e = &val->v[i];
            if (load) {
                if (e->kind == OPD_SINK)
                    in->v[i] = SR_SINK;
                else if (e->kind == OPD_REG && e->reg >= SR_COUNT)
                    in->v[i] = e->reg;
                else
                    invalid(p, m, "bad vector destination");
            } else {
                if (e->kind == OPD_SINK)
                    invalid(p, m, "bad vector source");
                in->v[i] = e->kind == OPD_REG ? e->reg : ptx_const_reg(p, imm_bits(e->kind, e->bits, t));
            }
        }
    } else if (load) {
        in->v[0] = dst(p, m, val);
    } else {
        in->v[0] = src(p, m, val, t);
    }
    in->d = in->v[0];
    in->dwidth = load ? p->prog->reg_width[in->v[0]] : 0;
    if (load && in->dwidth < ptx_type_size(t) && in->v[0] != SR_SINK)
        invalid(p, m, "destination register too narrow");
    if (space == SP_PARAM && load && adr->kind == OPD_ADDR && adr->addr_reg && p->fn->is_entry) {
        /* through an address taken by mov of a kernel parameter: checked
         * against the parameter buffer when it runs */
        in->op = OP_LD_KPARAM_REG;
        address(p, m, adr, space, in);
        return;
    }
    if (space == SP_PARAM) {
        if (adr->kind != OPD_ADDR || !adr->addr_sym || !adr->sym)
            unsupported(p, m, "parameter access through a register");
        const ptx_sym *s = adr->sym;
        if (adr->off < 0 || (uint64_t)adr->off + ptx_type_size(t) * in->vec > s->size)
            invalid(p, m, "parameter access out of bounds");
        in->imm = (int64_t)s->offset + adr->off;
        if (s->kind == SYM_KPARAM) {
            if (!load)
                unsupported(p, m, "store to a kernel parameter");
            in->op = OP_LD_KPARAM;
        } else if (s->kind == SYM_PARAM) {
            in->op = load ? OP_LD_PARAM : OP_ST_PARAM;
        } else {
            invalid(p, m, "not a parameter");
        }
        return;
    }
    in->op = load ? OP_LD : OP_ST;
    address(p, m, adr, space, in);
}

static int has_v8(const mods *m)
{
    for (unsigned i = 0; i < m->n; i++)
        if (is(m, i, "v8"))
            return (int)i;
    return -1;
}

/* A 256-bit ld/st.v8 (sm_100's) as two .v4 halves; the second is left in in. */
static void dec_ldst_v8(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool load)
{
    unsigned vi = load ? 0 : 1;
    if (n < 2 || n > PTX_MAX_OPDS || o[vi].kind != OPD_VEC || o[vi].n != 8)
        invalid(p, m, "a .v8 access needs eight values");
    for (unsigned i = 0; load && o[1].kind == OPD_ADDR && o[1].addr_reg && i < 4; i++)
        if (o[0].v[i].kind == OPD_REG && o[0].v[i].reg == o[1].reg)
            unsupported(p, m, "a .v8 load whose first half overwrites its address");
    int k = has_v8(m);
    ptx_opd half[PTX_MAX_OPDS];
    ptx_insn first = *in;
    for (unsigned h = 0; h < 2; h++) {
        mods hm = *m;
        hm.s[k] = "v4";
        memcpy(half, o, n * sizeof *o);
        half[vi].n = 4;
        memcpy(half[vi].v, o[vi].v + 4 * h, 4 * sizeof *o[vi].v);
        if (h) {
            half[1 - vi].off += 4 * (int64_t)ptx_type_size(first.type);
            dec_ldst(p, &hm, in, half, n, load);
        } else {
            dec_ldst(p, &hm, &first, half, n, load);
            ptx_emit(p, &first);
        }
    }
}

/* Maps a binary/ternary arithmetic op on type t to the decoded type:
 * integer types lose signedness unless keep_sign. */
static ptx_type arith_type(ptx_parser *p, mods *m, ptx_type t, bool keep_sign)
{
    if (t == T_NONE)
        invalid(p, m, "missing type");
    if (int_type(t)) {
        if (t == T_B8 || t == T_U8 || t == T_S8)
            unsupported(p, m, "8-bit arithmetic");
        return keep_sign ? norm_int(t) : unsign(t);
    }
    if (t == T_F32 || t == T_F64 || t == T_F16 || t == T_F16X2 || t == T_BF16 || t == T_BF16X2)
        return t;
    unsupported(p, m, "type");
}

/* The forms f16 and bf16 arithmetic take: rounding .rn only; .ftz and .sat
 * for f16; .relu (taken by the caller) for fma, min and max. */
static void half_check(ptx_parser *p, const mods *m, const ptx_insn *in)
{
    ptx_type t = (ptx_type)in->type;
    bool f16 = t == T_F16 || t == T_F16X2, bf = t == T_BF16 || t == T_BF16X2;
    bool relu_op = in->op == OP_FMA || in->op == OP_MIN || in->op == OP_MAX;
    if ((in->flags2 & F2_RELU) && (!(f16 || bf) || !relu_op))
        unsupported(p, m, ".relu here");
    if (!f16 && !bf)
        return;
    if (in->op != OP_ADD && in->op != OP_SUB && in->op != OP_MUL && in->op != OP_FMA && !relu_op &&
        in->op != OP_NEG && in->op != OP_ABS)
        unsupported(p, m, "type");
    if (in->mode != RND_NONE && in->mode != RND_RN)
        unsupported(p, m, "f16/bf16 rounding other than .rn");
    if ((in->flags & F_APPROX) || (bf && (in->flags & (F_FTZ | F_SAT))))
        unsupported(p, m, "modifier of this type");
    if ((in->flags & F_SAT) && (in->flags2 & F2_RELU))
        invalid(p, m, ".sat with .relu");
}

static void float_mods(mods *m, ptx_insn *in)
{
    int r = take_rnd(m);
    if (r != RND_NONE)
        in->mode = (uint8_t)r;
    if (take(m, "ftz"))
        in->flags |= F_FTZ;
    if (take(m, "sat"))
        in->flags |= F_SAT;
    if (take(m, "approx"))
        in->flags |= F_APPROX;
    take(m, "full");
}

/* Binary ops d = a OP b with one type. */
static void dec_binary(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n,
                       ptx_op op, bool keep_sign, bool floats, bool ints)
{
    float_mods(m, in);
    ptx_type t = take_type(m);
    finish_mods(p, m);
    need(p, m, n, 3);
    t = arith_type(p, m, t, keep_sign);
    if ((!floats && ptx_type_float(t)) || (!ints && int_type(t)))
        unsupported(p, m, "type");
    if ((in->flags & F_SAT) && int_type(t) && t != T_S32)
        unsupported(p, m, ".sat");
    in->op = (uint8_t)op;
    in->type = (uint8_t)t;
    half_check(p, m, in);
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], t);
    in->b = src(p, m, &o[2], t);
}

static void dec_unary(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n,
                      ptx_op op, bool keep_sign, bool floats, bool ints)
{
    float_mods(m, in);
    ptx_type t = take_type(m);
    finish_mods(p, m);
    need(p, m, n, 2);
    t = arith_type(p, m, t, keep_sign);
    if ((!floats && ptx_type_float(t)) || (!ints && int_type(t)))
        unsupported(p, m, "type");
    in->op = (uint8_t)op;
    in->type = (uint8_t)t;
    half_check(p, m, in);
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], t);
}

static void dec_logic(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, ptx_op op)
{
    ptx_type t = unsign(take_type(m));
    finish_mods(p, m);
    unsigned want = (op == OP_NOT || op == OP_CNOT) ? 2 : 3;
    need(p, m, n, want);
    if (t != T_PRED && t != T_U16 && t != T_U32 && t != T_U64)
        unsupported(p, m, "type");
    in->op = (uint8_t)op;
    in->type = (uint8_t)t;
    in->d = dst(p, m, &o[0]);
    if (t == T_PRED) {
        bool neg;
        in->a = pred_src(p, m, &o[1], &neg);
        if (neg)
            invalid(p, m, "negated source");
        if (want == 3) {
            in->b = pred_src(p, m, &o[2], &neg);
            if (neg)
                invalid(p, m, "negated source");
        }
        return;
    }
    in->a = src(p, m, &o[1], t);
    if (want == 3)
        in->b = src(p, m, &o[2], t);
}

static void dec_mul(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool mad)
{
    bool hi = take(m, "hi"), lo = take(m, "lo"), wide = take(m, "wide");
    bool cc = take(m, "cc");
    float_mods(m, in);
    ptx_type t = take_type(m);
    finish_mods(p, m);
    need(p, m, n, mad ? 4 : 3);
    if (t == T_NONE)
        invalid(p, m, "missing type");
    if (ptx_type_float(t)) {
        if (hi || lo || wide || cc)
            invalid(p, m, "mode on a float multiply");
        if (t != T_F32 && t != T_F64 && t != T_F16 && t != T_F16X2 && t != T_BF16 && t != T_BF16X2)
            unsupported(p, m, "type");
        in->op = mad ? OP_FMA : OP_MUL;
        in->type = (uint8_t)t;
        half_check(p, m, in);
    } else {
        if (!int_type(t) || ptx_type_size(t) < 2)
            unsupported(p, m, "type");
        if (hi + lo + wide != 1)
            invalid(p, m, "needs one of .lo .hi .wide");
        if (wide && ptx_type_size(t) == 8)
            invalid(p, m, ".wide of 64-bit operands");
        if (cc && !mad)
            invalid(p, m, ".cc");
        if (cc) {
            if (wide || ptx_type_size(t) < 4)
                unsupported(p, m, ".cc form");
            in->op = OP_MADC;
            in->flags |= F_CC_OUT;
            in->mode = hi;
            t = unsign(t);
        } else if (lo) {
            in->op = mad ? OP_MAD : OP_MUL;
            t = unsign(t);
        } else if (hi) {
            in->op = mad ? OP_MADHI : OP_MULHI;
            t = norm_int(t);
        } else {
            in->op = mad ? OP_MADWIDE : OP_MULWIDE;
            t = norm_int(t);
        }
        in->type = (uint8_t)t;
    }
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], t);
    in->b = src(p, m, &o[2], t);
    if (mad) {
        ptx_type ct = (in->op == OP_MADWIDE) ? (ptx_type_signed(t) ? T_S64 : T_U64) : t;
        if (in->op == OP_MADWIDE && ptx_type_size(t) == 2)
            ct = ptx_type_signed(t) ? T_S32 : T_U32;
        in->c = src(p, m, &o[3], ct);
    }
    if (in->op == OP_MULWIDE || in->op == OP_MADWIDE) {
        if (p->prog->reg_width[in->d] < 2 * ptx_type_size(t) && in->d != SR_SINK)
            invalid(p, m, "destination too narrow");
    }
}

/* add.cc, addc, sub.cc, subc, madc */
static void dec_carry(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n,
                      ptx_op op, bool cin)
{
    bool cc = take(m, "cc");
    int hi = -1;
    if (op == OP_MADC) {
        if (take(m, "hi"))
            hi = 1;
        else if (take(m, "lo"))
            hi = 0;
        else
            invalid(p, m, "needs .lo or .hi");
    }
    ptx_type t = unsign(take_type(m));
    finish_mods(p, m);
    need(p, m, n, op == OP_MADC ? 4 : 3);
    if (t != T_U32 && t != T_U64)
        unsupported(p, m, "type");
    in->op = (uint8_t)op;
    in->type = (uint8_t)t;
    in->mode = hi == 1;
    if (cin)
        in->flags |= F_CC_IN;
    if (cc)
        in->flags |= F_CC_OUT;
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], t);
    in->b = src(p, m, &o[2], t);
    if (op == OP_MADC)
        in->c = src(p, m, &o[3], t);
}

static int cmp_op(mods *m, ptx_type t, bool *unord)
{
    static const char *const names[] = {
        "eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs",
        "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan",
    };
    static const int cmp[] = {
        CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_LT, CMP_LE, CMP_GT, CMP_GE,
        CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_NUM, CMP_NAN,
    };
    (void)t;
    int k = take_one(m, names, 18);
    if (k < 0)
        return -1;
    *unord = k >= 10 && k < 16;
    if (k >= 6 && k < 10)
        return 16 + cmp[k];   /* unsigned form */
    return cmp[k];
}

static void dec_setp(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool set)
{
    bool unord = false;
    ptx_type dt = T_NONE;
    if (set) {
        dt = take_type(m);
    }
    int cmp = cmp_op(m, T_NONE, &unord);
    static const char *const bools[] = { "and", "or", "xor" };
    int b = take_one(m, bools, 3);
    if (take(m, "ftz"))
        in->flags |= F_FTZ;
    ptx_type t = take_type(m);
    finish_mods(p, m);
    if (set && dt != T_NONE && t == T_NONE) {
        t = dt;
        dt = T_NONE;
    }
    if (cmp < 0 || t == T_NONE)
        invalid(p, m, "missing comparison or type");
    if (cmp >= 16) {
        if (!int_type(t))
            invalid(p, m, "unsigned comparison of floats");
        t = unsign(t);
        cmp -= 16;
    } else {
        t = norm_int(t);
    }
    if (unord || cmp >= CMP_NUM) {
        if (!ptx_type_float(t))
            invalid(p, m, "unordered comparison of integers");
    }
    if (t == T_F16X2 || t == T_BF16 || t == T_BF16X2 || t == T_PRED || t == T_B128)
        unsupported(p, m, "type");
    if (int_type(t) && ptx_type_size(t) < 2)
        unsupported(p, m, "type");
    in->op = set ? OP_SET : OP_SETP;
    need(p, m, n, b < 0 ? 3 : 4);
    in->d = dst_any(p, m, &o[0], !set);
    in->type = (uint8_t)t;
    in->type2 = (uint8_t)dt;
    in->mode = (uint8_t)(cmp | (unord ? PTX_CMP_U : 0));
    in->boolop = (uint8_t)(b < 0 ? BOOL_NONE : BOOL_AND + b);
    if (o[0].has_reg2) {
        if (set)
            invalid(p, m, "set has one destination");
        in->flags |= F_HAS_P;
        in->e = o[0].reg2;
    }
    if (set) {
        if (dt != T_U32 && dt != T_S32 && dt != T_F32 && dt != T_B32)
            unsupported(p, m, "destination type");
        in->type2 = (uint8_t)norm_int(dt);
    }
    in->a = src(p, m, &o[1], t);
    in->b = src(p, m, &o[2], t);
    if (b >= 0) {
        bool neg;
        in->c = pred_src(p, m, &o[3], &neg);
        if (neg)
            in->flags |= F_NEG_C;
    }
}

static void dec_selp(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    ptx_type t = unsign(take_type(m));
    finish_mods(p, m);
    need(p, m, n, 4);
    if (t == T_NONE || t == T_PRED || t == T_U8)
        unsupported(p, m, "type");
    if (t == T_S32 || t == T_S64 || t == T_S16)
        t = unsign(t);
    in->op = OP_SELP;
    in->type = (uint8_t)t;
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], t);
    in->b = src(p, m, &o[2], t);
    bool neg;
    in->c = pred_src(p, m, &o[3], &neg);
    if (neg)
        in->flags |= F_NEG_C;
}

/* cvt.rn.{f16x2,bf16x2}.f32 d, a, b: d packs a (high half) and b
 * (low half), each rounded: two converts and a pack (the last left in in). */
static void dec_cvt_pack(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, ptx_type half)
{
    float_mods(m, in);
    ptx_type st = take_type(m);
    finish_mods(p, m);
    need(p, m, n, 3);
    if (st != T_F32 || in->mode != RND_RN || (in->flags & (F_SAT | F_FTZ)))
        unsupported(p, m, "only .rn from f32");
    uint32_t d = dst(p, m, &o[0]);
    uint32_t parts[2];
    for (unsigned i = 0; i < 2; i++) {
        ptx_insn c = { .op = OP_CVT, .type = (uint8_t)half, .type2 = T_F32, .mode = RND_RN,
                       .guard = in->guard, .flags = in->flags & F_GUARD_NEG, .line = in->line };
        c.a = src(p, m, &o[2 - i], T_F32);
        c.d = parts[i] = ptx_new_reg(p, half);
        c.dwidth = 2;
        ptx_emit(p, &c);
    }
    in->op = OP_PACK;
    in->type = T_U32;
    in->vec = 2;
    in->d = d;
    in->v[0] = parts[0];
    in->v[1] = parts[1];
}

/* cvt to or from a pair of 8-, 6- or 4-bit floats (ptx_ir.h OP_CVTNARROW):
 * the PTX ISA's forms, each checked; false when no such format is named. */
static bool dec_cvt_narrow(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    static const char *const fmts[] = { "e4m3x2", "e5m2x2", "e2m3x2", "e3m2x2", "e2m1x2", "ue8m0x2" };
    static const char *const fours[] = { "e4m3x4", "e5m2x4", "e2m3x4", "e3m2x4", "e2m1x4" };
    static const char *const others[] = { "f32", "f16x2", "bf16x2" };
    static const ptx_type other_t[] = { T_F32, T_F16X2, T_BF16X2 };
    int fmt = -1, fi = -1, oi = -1;
    ptx_type ot = T_NONE;
    for (unsigned i = 0; i < m->n; i++) {
        for (unsigned k = 0; k < 5; k++)
            if (is(m, i, fours[k]))
                unsupported(p, m, "stochastic rounding of four values");
        for (unsigned k = 0; k < 6; k++)
            if (is(m, i, fmts[k])) {
                fmt = (int)k;
                fi = (int)i;
            }
        for (unsigned k = 0; k < 3; k++)
            if (is(m, i, others[k])) {
                ot = other_t[k];
                oi = (int)i;
            }
    }
    if (fmt < 0)
        return false;
    m->used[fi] = true;
    if (oi >= 0)
        m->used[oi] = true;
    int r = take_rnd(m);
    bool sat = take(m, "satfinite"), relu = take(m, "relu");
    finish_mods(p, m);
    if (ot == T_NONE)
        invalid(p, m, "needs a second type");
    bool narrowing = fi < oi, ue = fmt == NF_UE8M0;
    if (narrowing) {
        if (ue ? (r != RND_RZ && r != RND_RP) || relu || ot == T_F16X2 : r != RND_RN)
            invalid(p, m, "rounding or modifier of this conversion");
        if (!ue && !sat)
            invalid(p, m, "needs .satfinite");
        if (!ue && ot != T_F32 && !(ot == T_F16X2 && fmt <= NF_E5M2))
            unsupported(p, m, "source type");
        need(p, m, n, ot == T_F32 ? 3 : 2);
        in->type = fmt == NF_E2M1 ? T_B8 : T_B16;
        in->type2 = (uint8_t)ot;
    } else {
        if (r != RND_RN || sat || (ue && relu) || ot != (ue ? T_BF16X2 : T_F16X2))
            invalid(p, m, "form of this conversion");
        need(p, m, n, 2);
        in->type = (uint8_t)ot;
        in->type2 = fmt == NF_E2M1 ? T_B8 : T_B16;
    }
    in->op = OP_CVTNARROW;
    in->aux = (uint32_t)fmt;
    in->mode = (uint8_t)r;
    if (sat)
        in->flags |= F_SAT;
    if (relu)
        in->flags2 |= F2_RELU;
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], narrowing ? (ot == T_F32 ? T_F32 : T_B32) : (ptx_type)in->type2);
    if (narrowing && ot == T_F32)
        in->b = src(p, m, &o[2], T_F32);
    return true;
}

/* cvt.pack.sat.{u16,s16}.s32.b32 d, a, b and
 * cvt.pack.sat.{u8,s8,u4,s4,u2,s2}.s32.b32 d, a, b, c (OP_CVTPACK). */
static void dec_cvt_packint(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    static const char *const types[] = { "u16", "s16", "u8", "s8", "u4", "s4", "u2", "s2" };
    static const uint8_t widths[] = { 16, 16, 8, 8, 4, 4, 2, 2 };
    bool sat = take(m, "sat");
    int k = take_one(m, types, 8);
    bool ab = take(m, "s32"), c = take(m, "b32");
    finish_mods(p, m);
    if (!sat || k < 0 || !ab || !c)
        invalid(p, m, "needs .sat, a narrow type, .s32 and .b32");
    unsigned w = widths[k];
    need(p, m, n, w == 16 ? 3 : 4);
    in->op = OP_CVTPACK;
    in->mode = (uint8_t)w;
    in->type = (k & 1) ? T_S32 : T_U32;
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], T_S32);
    in->b = src(p, m, &o[2], T_S32);
    if (w < 16)
        in->c = src(p, m, &o[3], T_B32);
}

static void dec_cvt(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    if (take(m, "pack")) {
        dec_cvt_packint(p, m, in, o, n);
        return;
    }
    if (dec_cvt_narrow(p, m, in, o, n))
        return;
    if (take(m, "tf32")) {   /* cvt.{rna,rn,rz}.tf32.f32: f32 bits with a 10-bit mantissa */
        static const char *const rnds[] = { "rna", "rn", "rz" };
        int r = take_one(m, rnds, 3);
        ptx_type st = take_type(m);
        finish_mods(p, m);
        need(p, m, n, 2);
        if (r < 0 || st != T_F32)
            unsupported(p, m, NULL);
        in->op = OP_TF32;
        in->type = T_B32;
        in->mode = (uint8_t)r;
        in->d = dst(p, m, &o[0]);
        in->a = src(p, m, &o[1], T_F32);
        return;
    }
    for (unsigned i = 0; i < m->n; i++)
        if (is(m, i, "f16x2") || is(m, i, "bf16x2")) {
            ptx_type half = is(m, i, "f16x2") ? T_F16 : T_BF16;
            m->used[i] = true;
            dec_cvt_pack(p, m, in, o, n, half);
            return;
        }
    float_mods(m, in);
    ptx_type dt = take_type(m), st = take_type(m);
    finish_mods(p, m);
    need(p, m, n, 2);
    if (dt == T_NONE || st == T_NONE)
        invalid(p, m, "needs two types");
    if (dt == T_PRED || st == T_PRED || dt == T_B128 || st == T_B128 || dt == T_F16X2 ||
        st == T_F16X2 || dt == T_BF16X2 || st == T_BF16X2)
        unsupported(p, m, "type");
    if ((dt == T_BF16 && st != T_F32) || (st == T_BF16 && dt != T_F32))
        unsupported(p, m, "bf16 converts only to and from f32");
    if (dt == T_BF16 && in->mode != RND_RN && in->mode != RND_RZ)
        unsupported(p, m, "rounding to bf16 other than .rn and .rz");
    dt = norm_int(dt);
    st = norm_int(st);
    bool dfl = ptx_type_float(dt), sfl = ptx_type_float(st);
    int r = in->mode;
    if (dfl && sfl) {
        if (dt == st) {
            if (r != RND_NONE && r < RND_RNI)
                invalid(p, m, "rounding of a same-type cvt");
        } else if (ptx_type_size(dt) > ptx_type_size(st)) {
            if (r != RND_NONE)
                invalid(p, m, "rounding of a widening cvt");
        } else if (r == RND_NONE || r >= RND_RNI) {
            invalid(p, m, "narrowing cvt needs a rounding mode");
        }
    } else if (dfl || sfl) {
        if (dfl && (r == RND_NONE || r >= RND_RNI))
            invalid(p, m, "int to float needs .rn .rz .rm or .rp");
        if (sfl && (r == RND_NONE || r < RND_RNI))
            invalid(p, m, "float to int needs .rni .rzi .rmi or .rpi");
    } else if (r != RND_NONE) {
        invalid(p, m, "rounding of an integer cvt");
    }
    in->op = OP_CVT;
    in->type = (uint8_t)dt;
    in->type2 = (uint8_t)st;
    in->d = dst(p, m, &o[0]);
    in->dwidth = p->prog->reg_width[in->d];
    if (in->dwidth < ptx_type_size(dt) && in->d != SR_SINK)
        invalid(p, m, "destination register too narrow");
    in->a = src(p, m, &o[1], st);
}

static void dec_cvta(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    bool to = take(m, "to");
    int space = take_space(m);
    ptx_type t = unsign(take_type(m));
    finish_mods(p, m);
    need(p, m, n, 2);
    if (t != T_U64 && t != T_U32)
        unsupported(p, m, "type");
    if (space == SP_PARAM && !to && p->fn->is_entry && t == T_U64) {
        /* a kernel parameter's generic address (of mov.b64 %rd, param) stays
         * its offset in the parameter buffer: what cp.async.bulk.tensor reads
         * a tensor map through (OP_TMA); a generic load through it faults */
        in->op = OP_MOV;
        in->type = T_U64;
        in->d = dst(p, m, &o[0]);
        in->a = src(p, m, &o[1], T_U64);
        return;
    }
    if (space == SP_GENERIC || space == SP_PARAM)
        unsupported(p, m, "state space");
    in->type = T_U64;
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], T_U64);
    in->space = (uint8_t)space;
    if (space == SP_GLOBAL || space == SP_CONST) {
        in->op = OP_MOV;
        return;
    }
    in->op = to ? OP_CVTA_TO : OP_CVTA_FROM;
}

static void dec_atom(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool red)
{
    int space = take_space(m);
    static const char *const ops[] = { "add", "min", "max", "inc", "dec", "and", "or",
                                       "xor", "exch", "cas" };
    int op = take_one(m, ops, 10);
    ptx_type t = take_type(m);
    finish_mods(p, m);
    if (op < 0 || t == T_NONE)
        invalid(p, m, "needs an operation and a type");
    if (space != SP_GENERIC && space != SP_GLOBAL && space != SP_SHARED)
        unsupported(p, m, "state space");
    t = norm_int(t);
    bool ok;
    switch (op) {
    case ATOM_ADD: ok = t == T_U32 || t == T_S32 || t == T_U64 || t == T_S64 || t == T_F32 || t == T_F64; break;
    case ATOM_MIN: case ATOM_MAX: ok = t == T_U32 || t == T_S32 || t == T_U64 || t == T_S64; break;
    case ATOM_INC: case ATOM_DEC: ok = t == T_U32; break;
    default: ok = t == T_U32 || t == T_U64; break;   /* b32/b64 */
    }
    if (!ok)
        unsupported(p, m, "type for this operation");
    if (op == ATOM_ADD && (t == T_S32 || t == T_S64))
        t = unsign(t);
    in->op = OP_ATOM;
    in->type = (uint8_t)t;
    in->mode = (uint8_t)op;
    in->space = (uint8_t)space;
    unsigned k = 0;
    if (red) {
        in->flags |= F_NO_RESULT;
        in->d = SR_SINK;
    } else {
        if (n < 1)
            invalid(p, m, "wrong number of operands");
        in->d = dst(p, m, &o[k++]);
    }
    need(p, m, n, k + (op == ATOM_CAS ? 3 : 2));
    address(p, m, &o[k], space, in);
    in->b = src(p, m, &o[k + 1], t);
    if (op == ATOM_CAS)
        in->c = src(p, m, &o[k + 2], t);
}

static void dec_shfl(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    bool sync = take(m, "sync");
    static const char *const modes[] = { "up", "down", "bfly", "idx" };
    int mode = take_one(m, modes, 4);
    ptx_type t = unsign(take_type(m));
    finish_mods(p, m);
    if (mode < 0 || t != T_U32)
        unsupported(p, m, NULL);
    need(p, m, n, sync ? 5 : 4);
    in->op = OP_SHFL;
    in->type = T_U32;
    in->mode = (uint8_t)mode;
    in->d = dst_any(p, m, &o[0], true);
    if (o[0].has_reg2) {
        in->flags |= F_HAS_P;
        in->e = o[0].reg2;
    }
    in->a = src(p, m, &o[1], T_U32);
    in->b = src(p, m, &o[2], T_U32);
    in->c = src(p, m, &o[3], T_U32);
    if (sync) {   /* lanes of the member mask meet before it runs */
        in->v[0] = src(p, m, &o[4], T_U32);
        in->flags |= F_MEMBER;
    }
}

static void dec_vote(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    bool sync = take(m, "sync");
    static const char *const modes[] = { "all", "any", "uni", "ballot" };
    int mode = take_one(m, modes, 4);
    ptx_type t = unsign(take_type(m));
    finish_mods(p, m);
    if (mode < 0 || (mode == VOTE_BALLOT ? t != T_U32 : t != T_PRED))
        unsupported(p, m, NULL);
    need(p, m, n, sync ? 3 : 2);
    in->op = OP_VOTE;
    in->type = (uint8_t)t;
    in->mode = (uint8_t)mode;
    in->d = dst(p, m, &o[0]);
    bool neg;
    in->a = pred_src(p, m, &o[1], &neg);
    if (neg)
        in->flags |= F_NEG_B;
    if (sync) {
        in->v[0] = src(p, m, &o[2], T_U32);
        in->flags |= F_MEMBER;
    }
}

static void dec_bits(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, ptx_op op)
{
    if (op == OP_BFIND && take(m, "shiftamt"))
        in->flags |= F_SHIFTAMT;
    ptx_type t = take_type(m);
    finish_mods(p, m);
    if (op == OP_BFIND || op == OP_BFE)
        t = norm_int(t);
    else
        t = unsign(t);
    if (t != T_U32 && t != T_U64 && t != T_S32 && t != T_S64)
        unsupported(p, m, "type");
    if ((op == OP_POPC || op == OP_CLZ || op == OP_BREV || op == OP_BFI) &&
        (t == T_S32 || t == T_S64))
        unsupported(p, m, "type");
    in->op = (uint8_t)op;
    in->type = (uint8_t)t;
    unsigned want = op == OP_BFE ? 4 : op == OP_BFI ? 5 : 2;
    need(p, m, n, want);
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], t);
    if (op == OP_BFE) {
        in->b = src(p, m, &o[2], T_U32);
        in->c = src(p, m, &o[3], T_U32);
    } else if (op == OP_BFI) {
        in->b = src(p, m, &o[2], t);
        in->c = src(p, m, &o[3], T_U32);
        in->e = src(p, m, &o[4], T_U32);
    }
}

static void dec_math(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, ptx_op op)
{
    float_mods(m, in);
    ptx_type t = take_type(m);
    finish_mods(p, m);
    need(p, m, n, 2);
    bool f64ok = op == OP_RCP || op == OP_SQRT || op == OP_RSQRT;
    if (t != T_F32 && !(t == T_F64 && f64ok))
        unsupported(p, m, "type");
    in->op = (uint8_t)op;
    in->type = (uint8_t)t;
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], t);
}

static void dec_fma(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    float_mods(m, in);
    if (take(m, "relu"))
        in->flags2 |= F2_RELU;
    ptx_type t = take_type(m);
    finish_mods(p, m);
    need(p, m, n, 4);
    if (t != T_F32 && t != T_F64 && t != T_F16 && t != T_F16X2 && t != T_BF16 && t != T_BF16X2)
        unsupported(p, m, "type");
    in->op = OP_FMA;
    in->type = (uint8_t)t;
    half_check(p, m, in);
    if ((t == T_F16 || t == T_F16X2 || t == T_BF16 || t == T_BF16X2) && in->mode != RND_RN)
        invalid(p, m, "fma needs .rn");
    in->d = dst(p, m, &o[0]);
    in->a = src(p, m, &o[1], t);
    in->b = src(p, m, &o[2], t);
    in->c = src(p, m, &o[3], t);
}

static void dec_bra(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    if (take(m, "uni"))
        in->flags |= F_UNI;
    finish_mods(p, m);
    need(p, m, n, 1);
    if (o[0].kind != OPD_SYM || (o[0].sym && o[0].sym->kind != SYM_FUNC && o[0].sym))
        unsupported(p, m, "branch target must be a label");
    in->op = OP_BRA;
    uint32_t pc = ptx_emit(p, in);
    ptx_add_fixup(p, pc, o[0].name);
}

/* ---- image instructions: tex, tld4, txq, suld, sust, suq ---- */

static int take_geometry(ptx_parser *p, mods *m)
{
    static const char *const names[] = { "1d", "2d", "3d", "a1d", "a2d", "cube", "acube" };
    int g = take_one(m, names, 7);
    if (g < 0)
        unsupported(p, m, "geometry");
    return g;
}

/* Coordinates an image access of geometry g takes (PTX order). */
static unsigned coord_count(int g)
{
    switch (g) {
    case GEO_1D: return 1;
    case GEO_2D: case GEO_A1D: return 2;
    default: return 4;
    }
}

/* The handle (a 64-bit object register, or a texture or surface reference
 * by name: F_REF and its index) and coordinates of [a, {c...}] into in. */
static void image_address(ptx_parser *p, mods *m, ptx_insn *in, const ptx_opd *o, unsigned want,
                          ptx_type ctype)
{
    bool surface = in->op == OP_SULD || in->op == OP_SUST || in->op == OP_SUQ;
    if (o->kind == OPD_ADDR && o->addr_sym && !o->off) {
        if (!o->sym || o->sym->kind != SYM_REF)
            invalid(p, m, "the handle must be a 64-bit register or a texture or surface reference");
        if (p->prog->refs[o->sym->index].surface != surface)
            invalid(p, m, surface ? "a surface instruction names a texture reference"
                                  : "a texture instruction names a surface reference");
        in->flags |= F_REF;
        in->a = o->sym->index;
    } else {
        if (o->kind != OPD_ADDR || !o->addr_reg || o->off)
            invalid(p, m, "the handle must be a 64-bit register or a texture or surface reference");
        if (p->prog->reg_width[o->reg] != 8)
            invalid(p, m, "the handle must be a 64-bit register");
        in->a = o->reg;
    }
    if (o->n != want)
        invalid(p, m, "wrong number of coordinates");
    uint32_t *slot[4] = { &in->b, &in->c, &in->e, &in->d };
    for (unsigned i = 0; i < 4; i++) {
        if (i >= o->n) {
            *slot[i] = SR_ZERO;
            continue;
        }
        const ptx_velem *e = &o->v[i];
        *slot[i] = e->kind == OPD_REG ? e->reg : ptx_const_reg(p, imm_bits(e->kind, e->bits, ctype));
    }
}

/* The value vector of an image access: destinations (load) or sources. */
static void image_values(ptx_parser *p, mods *m, ptx_insn *in, const ptx_opd *o, bool load, ptx_type t)
{
    unsigned n = o->kind == OPD_VEC ? o->n : 1;
    if (n != in->vec)
        invalid(p, m, "vector operand does not match");
    for (unsigned i = 0; i < n; i++) {
        if (o->kind != OPD_VEC) {
            in->v[0] = load ? dst(p, m, o) : src(p, m, o, t);
            break;
        }
        const ptx_velem *e = &o->v[i];
        if (load)
            in->v[i] = e->kind == OPD_SINK ? SR_SINK : e->kind == OPD_REG && e->reg >= SR_COUNT ? e->reg
                     : (invalid(p, m, "bad vector destination"), 0);
        else
            in->v[i] = e->kind == OPD_REG ? e->reg
                     : e->kind == OPD_SINK ? (invalid(p, m, "bad vector source"), 0)
                     : ptx_const_reg(p, imm_bits(e->kind, e->bits, t));
    }
    if (load)
        for (unsigned i = 0; i < n; i++)
            if (in->v[i] != SR_SINK && p->prog->reg_width[in->v[i]] < ptx_type_size(t))
                invalid(p, m, "destination register too narrow");
}

/* tex[.level|.grad].geom.v4.dtype.ctype d, [a, c] [, lod | , dPdx, dPdy];
 * tld4.comp.2d.v4.dtype.f32 d, [a, c]. */
static void dec_tex(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool gather)
{
    static const char *const comps[] = { "r", "g", "b", "a" };
    int comp = gather ? take_one(m, comps, 4) : 0;
    if (comp < 0)
        invalid(p, m, "missing component");
    bool level = !gather && take(m, "level"), grad = !gather && !level && take(m, "grad");
    int g = take_geometry(p, m);
    if (!take(m, "v4"))
        unsupported(p, m, "only .v4 results");
    ptx_type dt = take_type(m), ct = take_type(m);
    finish_mods(p, m);
    if (dt != T_F32 && dt != T_S32 && dt != T_U32)
        unsupported(p, m, "result type");
    if (ct != T_F32 && ct != T_S32)
        unsupported(p, m, "coordinate type");
    if (gather && (g != GEO_2D || ct != T_F32))
        unsupported(p, m, "tld4 other than 2d with f32 coordinates");
    need(p, m, n, level ? 3 : grad ? 4 : 2);
    in->op = gather ? OP_TLD4 : OP_TEX;
    in->mode = (uint8_t)g;
    in->type = (uint8_t)dt;
    in->type2 = (uint8_t)ct;
    in->vec = 4;
    in->space = (uint8_t)comp;
    image_values(p, m, in, &o[0], true, dt);
    image_address(p, m, in, &o[1], coord_count(g), ct);
    /* Level of detail: softgpu samples level 0 (gradients too). */
    in->aux = level ? src(p, m, &o[2], T_F32) : SR_ZERO;
}

/* suld.b.geom{.v2,.v4}.btype.clamp d, [a, c]; sust.{b,p}... [a, c], v. */
static void dec_surf(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool load)
{
    static const char *const clamps[] = { "trap", "clamp", "zero" };
    bool formatted = !load && take(m, "p");
    if (!formatted && !take(m, "b"))
        unsupported(p, m, "only .b (and sust.p) accesses");
    int g = take_geometry(p, m);
    if (g == GEO_CUBE || g == GEO_ACUBE)
        unsupported(p, m, "cube surfaces");
    in->vec = take(m, "v2") ? 2 : take(m, "v4") ? 4 : 1;
    ptx_type t = take_type(m);
    int c = take_one(m, clamps, 3);
    finish_mods(p, m);
    if (c < 0)
        c = SURF_TRAP;
    if (formatted ? t != T_B32 : (t != T_B8 && t != T_B16 && t != T_B32 && t != T_B64))
        unsupported(p, m, "type");
    need(p, m, n, 2);
    in->op = load ? OP_SULD : OP_SUST;
    in->mode = (uint8_t)g;
    in->type = (uint8_t)t;
    in->type2 = T_S32;
    in->space = (uint8_t)c;
    if (formatted)
        in->flags |= F_FORMATTED;
    image_values(p, m, in, load ? &o[0] : &o[1], load, t);
    image_address(p, m, in, load ? &o[1] : &o[0], coord_count(g), T_S32);
    in->dwidth = load && in->v[0] != SR_SINK ? p->prog->reg_width[in->v[0]] : 0;
}

/* txq.query.b32 d, [a]; suq.query.b32 d, [a]. */
static void dec_query(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool surface)
{
    static const char *const names[] = {
        "width", "height", "depth", "channel_data_type", "channel_order", "normalized_coords",
        "filter_mode", "addr_mode_0", "addr_mode_1", "addr_mode_2", "array_size",
        "num_mipmap_levels", "num_samples", "memory_layout",
    };
    if (!surface && take(m, "level"))
        unsupported(p, m, "txq.level");
    int q = take_one(m, names, 14);
    ptx_type t = take_type(m);
    finish_mods(p, m);
    if (q < 0 || t != T_B32)
        unsupported(p, m, "query");
    need(p, m, n, 2);
    in->op = surface ? OP_SUQ : OP_TXQ;
    in->mode = (uint8_t)q;
    in->type = T_B32;
    image_address(p, m, in, &o[1], 0, T_S32);
    in->d = dst(p, m, &o[0]);   /* after: the coordinates' fourth slot is d */
}

/* A second memory operand of an instruction: its base register and a
 * register preloaded with its offset. */
static void address_regs(ptx_parser *p, const mods *m, const ptx_opd *o, int space,
                         uint32_t *base, uint32_t *off)
{
    ptx_insn t = { 0 };
    address(p, m, o, space, &t);
    *base = t.a;
    *off = ptx_const_reg(p, (uint64_t)t.imm);
}

/* shared, shared::cta and shared::cluster (a cluster here is one CTA, so
 * a cluster address of the CTA's own memory is its shared address), else
 * generic (finish_mods refuses any other space left). */
static int take_shared(mods *m)
{
    if (take(m, "shared") || take(m, "shared::cta") || take(m, "shared::cluster"))
        return SP_SHARED;
    return SP_GENERIC;
}

/* cp.async.bulk.tensor (OP_TMA, see ptx_ir.h) and
 * cp.async.bulk.prefetch.tensor, tile mode, no multicast. */
static void dec_tma(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    static const char *const dims[] = { "1d", "2d", "3d", "4d", "5d" };
    int d = take_one(m, dims, 5);
    take(m, "tile");
    if (take(m, "multicast::cluster"))
        unsupported(p, m, "multicast");
    bool hint = take(m, "L2::cache_hint");
    bool prefetch = take(m, "prefetch");
    if (prefetch)
        take(m, "L2");
    bool tx = take(m, "mbarrier::complete_tx::bytes");
    bool group = take(m, "bulk_group");
    bool global = take(m, "global");
    bool cluster = take(m, "shared::cluster"), cta = take(m, "shared::cta");
    finish_mods(p, m);
    if (d < 0)
        invalid(p, m, "needs a dimension .1d to .5d");
    unsigned rank = (unsigned)d + 1;
    bool g2s = tx && !group && global && (cluster || cta) && !prefetch;
    bool s2g = group && !tx && global && cta && !cluster && !prefetch;
    if (!g2s && !s2g && !(prefetch && global && !tx && !group && !cluster && !cta))
        unsupported(p, m, "state spaces or completion mechanism");
    unsigned ti = g2s ? 1 : 0;
    need(p, m, n, (prefetch ? 1 : g2s ? 3 : 2) + hint);
    const ptx_opd *t = &o[ti];
    if (t->kind != OPD_ADDR || t->n != rank)
        invalid(p, m, "expected [tensor map, {coordinates}] of the instruction's rank");
    if (prefetch) {   /* a hint */
        in->op = OP_NOP;
        return;
    }
    ptx_mma *mm = ptx_new_mma(p);
    in->aux = p->prog->nmmas - 1;
    mm->na = (uint8_t)rank;
    for (unsigned i = 0; i < rank; i++) {
        const ptx_velem *e = &t->v[i];
        if (e->kind == OPD_SINK)
            invalid(p, m, "bad coordinate");
        mm->a[i] = e->kind == OPD_REG ? e->reg : ptx_const_reg(p, imm_bits(e->kind, e->bits, T_S32));
    }
    if (t->addr_sym && t->sym && t->sym->kind == SYM_KPARAM) {
        in->flags |= F_REF;
        in->b = ptx_const_reg(p, t->sym->offset + (uint64_t)t->off);
        in->c = SR_ZERO;
    } else {
        ptx_opd base = *t;
        base.n = 0;
        address_regs(p, m, &base, SP_GENERIC, &in->b, &in->c);
    }
    address(p, m, &o[g2s ? 0 : 1], SP_SHARED, in);
    if (g2s)
        address_regs(p, m, &o[2], SP_SHARED, &in->v[0], &in->v[1]);
    in->op = OP_TMA;
    in->mode = (uint8_t)rank;
    in->vec = g2s;
    in->space = SP_SHARED;
}

/* cp.async (non-bulk and bulk), its groups and its mbarrier arrive. */
static void dec_cp(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    if (!take(m, "async"))
        unsupported(p, m, NULL);
    if (take(m, "commit_group") || take(m, "wait_all") || take(m, "wait_group")) {
        /* copies complete at issue: nothing is ever outstanding */
        take(m, "bulk");
        take(m, "read");
        finish_mods(p, m);
        if (n > 1 || (n == 1 && o[0].kind != OPD_INT))
            invalid(p, m, "expected a group count");
        in->op = OP_NOP;
        return;
    }
    if (take(m, "mbarrier")) {
        /* cp.async.mbarrier.arrive[.noinc]: an arrive once this thread's
         * copies are done (now). Without .noinc the pending count is raised
         * first, so nothing changes. */
        if (!take(m, "arrive"))
            unsupported(p, m, NULL);
        bool noinc = take(m, "noinc");
        int space = take_shared(m);
        ptx_type t = take_type(m);
        finish_mods(p, m);
        need(p, m, n, 1);
        if (t != T_B64)
            unsupported(p, m, "state space or type");
        address(p, m, &o[0], space, in);
        in->space = (uint8_t)space;
        in->op = noinc ? OP_MBAR : OP_NOP;
        in->mode = MB_ARRIVE;
        in->d = SR_SINK;
        in->b = ptx_const_reg(p, 1);
        return;
    }
    in->op = OP_CPASYNC;
    bool bulk = take(m, "bulk");
    if (bulk && take(m, "tensor")) {
        dec_tma(p, m, in, o, n);
        return;
    }
    if (bulk) {
        if (take(m, "multicast::cluster"))
            unsupported(p, m, "multicast forms");
        if (take(m, "prefetch")) {   /* cp.async.bulk.prefetch.L2.global [a], size: a hint */
            take(m, "L2");
            take(m, "global");
            finish_mods(p, m);
            if (n < 2 || n > 3 || o[0].kind != OPD_ADDR)
                invalid(p, m, "expected an address and a size");
            in->op = OP_NOP;
            return;
        }
        bool hint = take(m, "L2::cache_hint");
        bool tx = take(m, "mbarrier::complete_tx::bytes");
        bool group = take(m, "bulk_group");
        bool global = take(m, "global");
        bool cluster = take(m, "shared::cluster"), cta = take(m, "shared::cta");
        finish_mods(p, m);
        /* .shared::cluster.global (or .shared::cta.global) and
         * .shared::cluster.shared::cta complete on an mbarrier;
         * .global.shared::cta is a bulk group */
        bool g2s = tx && !group && (cluster != cta) && global;
        bool s2s = tx && !group && cluster && cta && !global;
        bool s2g = group && !tx && global && cta && !cluster;
        if (!g2s && !s2s && !s2g)
            unsupported(p, m, "state spaces or completion mechanism");
        need(p, m, n, 3 + tx + hint);
        in->mode = 0;
        in->type = T_U32;
        in->e = src(p, m, &o[2], T_U32);
        in->space = s2g ? SP_GLOBAL : SP_SHARED;
        in->type2 = g2s ? SP_GLOBAL : SP_SHARED;
        address(p, m, &o[0], in->space, in);
        address_regs(p, m, &o[1], in->type2, &in->b, &in->c);
        if (tx) {
            in->vec = 1;
            address_regs(p, m, &o[3], SP_SHARED, &in->v[0], &in->v[1]);
        }
        return;
    }
    static const char *const levels[] = { "ca", "cg" };
    int level = take_one(m, levels, 2);
    bool hint = take(m, "L2::cache_hint");
    bool shared = take(m, "shared") || take(m, "shared::cta");
    bool global = take(m, "global");
    finish_mods(p, m);
    if (level < 0 || !shared || !global)
        unsupported(p, m, NULL);
    if (n < 3 || o[2].kind != OPD_INT)
        invalid(p, m, "expected a copy size");
    uint64_t size = o[2].bits;
    if (size != 16 && (level == 1 || (size != 4 && size != 8)))
        invalid(p, m, "copy size must be 4, 8 or 16 (16 for .cg)");
    in->mode = (uint8_t)size;
    in->space = SP_SHARED;
    in->type2 = SP_GLOBAL;
    address(p, m, &o[0], SP_SHARED, in);
    address_regs(p, m, &o[1], SP_GLOBAL, &in->b, &in->c);
    unsigned k = 3;
    in->type = T_U32;
    in->e = ptx_const_reg(p, size);
    if (n > k + hint) {   /* src-size, or the ignore-src predicate */
        const ptx_opd *x = &o[k];
        if (x->kind == OPD_REG && p->prog->reg_width[x->reg] == 1) {
            bool neg;
            in->e = pred_src(p, m, x, &neg);
            in->type = T_PRED;
            if (neg)
                in->flags |= F_NEG_C;
        } else {
            in->e = src(p, m, x, T_U32);
        }
        k++;
    }
    need(p, m, n, k + hint);   /* a cache policy last, ignored */
}

/* mbarrier.* on a 64-bit barrier object in shared memory. */
static void dec_mbarrier(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n)
{
    static const char *const ops[] = { "init", "arrive", "arrive_drop", "expect_tx",
                                       "complete_tx", "test_wait", "try_wait", "inval",
                                       "pending_count" };
    int op = take_one(m, ops, 9);
    bool parity = take(m, "parity");
    bool expect = take(m, "expect_tx");
    take(m, "cluster");   /* scope: a cluster is this CTA alone */
    take(m, "noComplete");   /* the program promises no completion: an ordinary arrive */
    int space = take_shared(m);
    ptx_type t = take_type(m);
    finish_mods(p, m);
    if (op < 0 || t != T_B64 || (parity && op != 5 && op != 6) ||
        (expect && op != 1 && op != 2))
        unsupported(p, m, NULL);
    in->op = OP_MBAR;
    in->space = (uint8_t)space;
    in->type = T_B64;
    in->d = SR_SINK;
    switch (op) {
    case 0:   /* init [a], count */
    case 3:   /* expect_tx [a], tx */
    case 4:   /* complete_tx [a], tx */
        need(p, m, n, 2);
        in->mode = op == 0 ? MB_INIT : op == 3 ? MB_EXPECT_TX : MB_COMPLETE_TX;
        address(p, m, &o[0], space, in);
        in->b = src(p, m, &o[1], T_U32);
        return;
    case 1:   /* arrive[_drop][.expect_tx] state|_, [a] [, count | tx] */
    case 2:
        if (n < 2 || n > 3)
            invalid(p, m, "wrong number of operands");
        if (expect && n != 3)
            invalid(p, m, "expect_tx needs a transaction count");
        in->mode = expect ? (op == 1 ? MB_ARRIVE_TX : MB_ARRIVE_DROP_TX)
                          : (op == 1 ? MB_ARRIVE : MB_ARRIVE_DROP);
        in->d = dst(p, m, &o[0]);
        address(p, m, &o[1], space, in);
        in->b = n == 3 ? src(p, m, &o[2], T_U32) : ptx_const_reg(p, 1);
        return;
    case 5:   /* test_wait/try_wait[.parity] p, [a], state|parity [, time hint] */
    case 6:
        if (n != 3 && !(op == 6 && n == 4))
            invalid(p, m, "wrong number of operands");
        in->mode = parity ? MB_TEST_PARITY : MB_TEST;
        in->d = dst(p, m, &o[0]);
        if (p->prog->reg_width[in->d] != 1)
            invalid(p, m, "expected a predicate destination");
        address(p, m, &o[1], space, in);
        in->b = src(p, m, &o[2], parity ? T_U32 : T_U64);
        return;
    case 7:   /* inval [a] */
        need(p, m, n, 1);
        in->mode = MB_INVAL;
        address(p, m, &o[0], space, in);
        return;
    default:  /* pending_count.b64 count, state */
        need(p, m, n, 2);
        in->mode = MB_PENDING;
        in->d = dst(p, m, &o[0]);
        in->b = src(p, m, &o[1], T_U64);
        return;
    }
}

/* ---- warp matrix instructions (executed in ptx_mma.c) ---- */

/* A matrix element type as wmma and mma spell it; tf32 is T_B32 with
 * *tf32 set. T_NONE if m->s[i] is not one. */
static ptx_type mma_type_at(const mods *m, unsigned i, bool *tf32)
{
    *tf32 = false;
    if (is(m, i, "tf32")) {
        *tf32 = true;
        return T_B32;
    }
    if (is(m, i, "e4m3") || is(m, i, "e5m2"))
        return is(m, i, "e4m3") ? T_E4M3 : T_E5M2;
    ptx_type t = ptx_type_from(m->s[i], m->len[i]);
    switch (t) {
    case T_F16: case T_BF16: case T_F32: case T_F64: case T_S8: case T_U8: case T_S32:
        return t;
    default:
        return T_NONE;
    }
}

/* Consumes the types of the modifiers, in order, into t[]; returns how many
 * (at most max). */
static unsigned take_mma_types(mods *m, ptx_type *t, bool *tf32, unsigned max)
{
    unsigned n = 0;
    for (unsigned i = 0; i < m->n; i++) {
        if (m->used[i])
            continue;
        bool f;
        ptx_type x = mma_type_at(m, i, &f);
        if (x == T_NONE)
            continue;
        if (n == max)
            return max + 1;
        m->used[i] = true;
        t[n] = x;
        tf32[n] = f;
        n++;
    }
    return n;
}

/* Consumes the shape modifier mMnNkK (or mMnN when no k): false if none. */
static bool take_shape(mods *m, ptx_mma *mm, bool with_k)
{
    for (unsigned i = 0; i < m->n; i++) {
        if (m->used[i] || m->s[i][0] != 'm')
            continue;
        char buf[24];
        unsigned a, b, c, len = m->len[i] < sizeof buf - 1 ? m->len[i] : sizeof buf - 1;
        int used = 0;
        memcpy(buf, m->s[i], len);
        buf[len] = 0;
        if (with_k ? sscanf(buf, "m%un%uk%u%n", &a, &b, &c, &used) != 3
                   : (c = 0, sscanf(buf, "m%un%u%n", &a, &b, &used) != 2))
            continue;
        if ((unsigned)used != len || a > 64 || b > 64 || c > 64)
            continue;
        m->used[i] = true;
        mm->m = (uint8_t)a;
        mm->n = (uint8_t)b;
        mm->k = (uint8_t)c;
        return true;
    }
    return false;
}

/* Consumes up to two of row/col in order; returns how many, col[i] set
 * for each. */
static unsigned take_layouts(mods *m, bool *col)
{
    unsigned n = 0;
    for (unsigned i = 0; i < m->n && n < 2; i++)
        if (!m->used[i] && (is(m, i, "row") || is(m, i, "col"))) {
            m->used[i] = true;
            col[n++] = is(m, i, "col");
        }
    return n;
}

static unsigned elem_size(ptx_type t)
{
    return t == T_B32 ? 4 : ptx_type_size(t);
}

/* Registers of fragment frag of shape mm with elements of type t (see
 * ptx_mma.c for the layout); 0 when the shape does not tile. */
static unsigned frag_regs(const ptx_mma *mm, int frag, ptx_type t)
{
    unsigned es = elem_size(t);
    unsigned x = frag == FRAG_B ? mm->n : mm->m, y = frag == FRAG_C ? mm->n : mm->k;
    unsigned per = frag == FRAG_C ? 2 : es == 8 ? 1 : 4 / es;
    if (x % 8 || y % (4 * per))
        return 0;
    unsigned unique = x / 8 * (y / (4 * per)) * per;
    if (mm->wmma && frag != FRAG_C && t == T_F16)
        return 8;   /* wmma's f16 multiplicands: sixteen halves, some repeated */
    return es >= 4 ? unique : unique * es / 4;
}

/* Whether shape mm takes multiplicands of type ab (tf32: T_B32) and
 * accumulators of type acc. */
static bool mma_form_ok(const ptx_mma *mm, ptx_type ab, ptx_type acc)
{
    unsigned m = mm->m, n = mm->n, k = mm->k;
    bool f16acc = acc == T_F16 || acc == T_F32;
    if (mm->wmma) {
        bool big = (m == 16 && n == 16 && k == 16) || (m == 32 && n == 8 && k == 16) ||
                   (m == 8 && n == 32 && k == 16);
        switch (ab) {
        case T_F16: return big && f16acc;
        case T_BF16: return big && acc == T_F32;
        case T_B32: return m == 16 && n == 16 && k == 8 && acc == T_F32;
        case T_F64: return m == 8 && n == 8 && k == 4 && acc == T_F64;
        case T_S8: case T_U8: return big && acc == T_S32;
        default: return false;
        }
    }
    switch (ab) {
    case T_F16: return m == 16 && n == 8 && (k == 8 || k == 16) && f16acc;
    case T_BF16: return m == 16 && n == 8 && (k == 8 || k == 16) && acc == T_F32;
    case T_B32: return m == 16 && n == 8 && (k == 4 || k == 8) && acc == T_F32;
    case T_F64: return m == 8 && n == 8 && k == 4 && acc == T_F64;
    case T_S8: case T_U8:
        return ((m == 8 && n == 8 && k == 16) || (m == 16 && n == 8 && (k == 16 || k == 32))) &&
               acc == T_S32;
    case T_E4M3: case T_E5M2: return m == 16 && n == 8 && (k == 16 || k == 32) && f16acc;
    default: return false;
    }
}

/* A fragment operand: want registers into out[], each at least width bytes
 * when written. Sources may be immediates. */
static void mma_regs(ptx_parser *p, const mods *m, const ptx_opd *o, unsigned want,
                     uint32_t *out, bool dest, unsigned width, ptx_type t)
{
    ptx_velem one;
    const ptx_velem *v = o->v;
    unsigned n = o->n;
    if (o->kind != OPD_VEC) {
        if (o->kind == OPD_ADDR || o->kind == OPD_SYM || o->neg || o->has_reg2)
            invalid(p, m, "expected a register vector");
        one = (ptx_velem){ .kind = o->kind, .reg = o->reg, .bits = o->bits };
        v = &one;
        n = 1;
    }
    if (n != want) {
        char why[64];
        snprintf(why, sizeof why, "a fragment of %u registers, not %u", want, n);
        invalid(p, m, why);
    }
    for (unsigned i = 0; i < n; i++) {
        if (dest) {
            if (v[i].kind == OPD_SINK)
                out[i] = SR_SINK;
            else if (v[i].kind == OPD_REG && v[i].reg >= SR_COUNT &&
                     p->prog->reg_width[v[i].reg] >= width)
                out[i] = v[i].reg;
            else
                invalid(p, m, "bad fragment destination");
        } else if (v[i].kind == OPD_REG) {
            out[i] = v[i].reg;
        } else if (v[i].kind == OPD_SINK) {
            invalid(p, m, "bad fragment source");
        } else {
            out[i] = ptx_const_reg(p, imm_bits(v[i].kind, v[i].bits, t));
        }
    }
}

/* The operand of a warp-wide instruction: every lane of the warp meets
 * before it runs, as .sync.aligned demands. */
static void mma_common(ptx_parser *p, ptx_insn *in, ptx_op op)
{
    in->op = (uint8_t)op;
    in->aux = p->prog->nmmas - 1;
    in->v[0] = ptx_const_reg(p, PTX_FULL);
    in->flags |= F_MEMBER;
}

/* wmma.load.{a,b,c} / wmma.store.d */
static void dec_wmma_ldst(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n,
                          bool load)
{
    ptx_mma *mm = ptx_new_mma(p);
    mm->wmma = true;
    int frag;
    if (load)
        frag = take(m, "a") ? FRAG_A : take(m, "b") ? FRAG_B : take(m, "c") ? FRAG_C : -1;
    else
        frag = take(m, "d") ? FRAG_C : -1;
    bool col[2];
    unsigned nl = take_layouts(m, col);
    bool shape = take_shape(m, mm, true);
    int space = take_space(m);
    ptx_type t[2];
    bool tf32[2];
    unsigned nt = take_mma_types(m, t, tf32, 1);
    bool sync = take(m, "sync");
    finish_mods(p, m);
    if (frag < 0 || nl != 1 || !shape || nt != 1 || !sync)
        unsupported(p, m, NULL);
    if (space == SP_CONST || space == SP_LOCAL || space == SP_PARAM)
        unsupported(p, m, "state space");
    if (n != 2 && n != 3)
        invalid(p, m, "wrong number of operands");
    mm->frag = (uint8_t)frag;
    mm->col = col[0];
    ptx_type ty = t[0];
    mm->tf32 = tf32[0];
    bool ok = frag == FRAG_C
        ? ((ty == T_F16 || ty == T_F32) && (mma_form_ok(mm, T_F16, ty) || mma_form_ok(mm, T_BF16, ty) ||
                                             mma_form_ok(mm, T_B32, ty))) ||
          (ty == T_S32 && mma_form_ok(mm, T_S8, ty)) || (ty == T_F64 && mma_form_ok(mm, T_F64, ty))
        : mma_form_ok(mm, ty, ty == T_F64 ? T_F64 : ty == T_S8 || ty == T_U8 ? T_S32 : T_F32);
    if (!ok)
        unsupported(p, m, "shape and type");
    if (frag == FRAG_C)
        mm->ctype = mm->dtype = (uint8_t)ty;
    else
        mm->atype = mm->btype = (uint8_t)ty;
    unsigned nr = frag_regs(mm, frag, ty);
    unsigned width = ty == T_F64 ? 8 : 4;
    const ptx_opd *val = load ? &o[0] : &o[1], *adr = load ? &o[1] : &o[0];
    mma_regs(p, m, val, nr, load ? mm->d : mm->c, load, width, ty);
    if (load)
        mm->nd = (uint8_t)nr;
    else
        mm->nc = (uint8_t)nr;
    in->space = (uint8_t)space;
    address(p, m, adr, space, in);
    in->b = n == 3 ? src(p, m, &o[2], T_U32) : UINT32_MAX;
    in->type = (uint8_t)ty;
    mma_common(p, in, load ? OP_WMMA_LD : OP_WMMA_ST);
}

/* wmma.mma and mma: d, a, b, c */
static void dec_mma(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, bool wmma)
{
    ptx_mma *mm = ptx_new_mma(p);
    mm->wmma = wmma;
    bool col[2];
    unsigned nl = take_layouts(m, col);
    bool shape = take_shape(m, mm, true);
    bool sync = take(m, "sync");
    mm->satfinite = take(m, "satfinite");
    bool rn = take(m, "rn");
    bool f8kind = take(m, "kind::f8f6f4");   /* of its types, e4m3 and e5m2 only (below) */
    ptx_type t[4];
    bool tf32[4];
    unsigned nt = take_mma_types(m, t, tf32, 4);
    finish_mods(p, m);
    if (!shape || !sync)
        unsupported(p, m, NULL);
    if (nl != 2)
        unsupported(p, m, "layouts");
    need(p, m, n, 4);
    ptx_type dt, at, bt, ct;
    if (nt == 2 && wmma && t[0] != T_F64) {   /* wmma.mma .f16: .dtype.ctype */
        dt = t[0];
        ct = t[1];
        at = bt = T_F16;
    } else if (nt == 4) {
        dt = t[0];
        at = t[1];
        bt = t[2];
        ct = t[3];
        mm->tf32 = tf32[1];
        if (tf32[1] != tf32[2])
            unsupported(p, m, "types");
    } else {
        unsupported(p, m, "types");
    }
    bool ints = at == T_S8 || at == T_U8, fp8 = at == T_E4M3 || at == T_E5M2;
    if (at != bt && !(ints && (bt == T_S8 || bt == T_U8)) && !(fp8 && (bt == T_E4M3 || bt == T_E5M2)))
        unsupported(p, m, "types");
    if (f8kind && !fp8)
        unsupported(p, m, "kind::f8f6f4 with 6- or 4-bit types");
    if (!mma_form_ok(mm, at, dt) || !mma_form_ok(mm, bt, dt) || !mma_form_ok(mm, at, ct))
        unsupported(p, m, "shape and types");
    if (rn && at != T_F64)
        unsupported(p, m, ".rn");
    if (mm->satfinite && !ints)
        unsupported(p, m, ".satfinite on floats");
    if (!wmma && (col[0] || !col[1]))
        unsupported(p, m, "layouts other than .row.col");
    mm->atype = (uint8_t)at;
    mm->btype = (uint8_t)bt;
    mm->ctype = (uint8_t)ct;
    mm->dtype = (uint8_t)dt;
    mm->nd = (uint8_t)frag_regs(mm, FRAG_C, dt);
    mm->na = (uint8_t)frag_regs(mm, FRAG_A, at);
    mm->nb = (uint8_t)frag_regs(mm, FRAG_B, bt);
    mm->nc = (uint8_t)frag_regs(mm, FRAG_C, ct);
    mma_regs(p, m, &o[0], mm->nd, mm->d, true, dt == T_F64 ? 8 : 4, dt);
    mma_regs(p, m, &o[1], mm->na, mm->a, false, 0, at == T_F64 ? T_F64 : T_B32);
    mma_regs(p, m, &o[2], mm->nb, mm->b, false, 0, bt == T_F64 ? T_F64 : T_B32);
    mma_regs(p, m, &o[3], mm->nc, mm->c, false, 0, ct);
    in->type = (uint8_t)at;
    mma_common(p, in, OP_MMA);
}

/* ldmatrix / stmatrix .m8n8.x{1,2,4}[.trans][.shared].b16; movmatrix
 * .m8n8.trans.b16 */
static void dec_matrix(ptx_parser *p, mods *m, ptx_insn *in, ptx_opd *o, unsigned n, ptx_op op)
{
    ptx_mma *mm = ptx_new_mma(p);
    bool shape = take_shape(m, mm, false);
    static const char *const nums[] = { "x1", "x2", "x4" };
    int num = op == OP_MOVMATRIX ? 0 : take_one(m, nums, 3);
    mm->trans = take(m, "trans");
    int space = take_space(m);
    bool sync = take(m, "sync");
    ptx_type t = take_type(m);
    finish_mods(p, m);
    if (!shape || mm->m != 8 || mm->n != 8 || num < 0 || t != T_B16 || !sync)
        unsupported(p, m, NULL);
    if (op == OP_MOVMATRIX && !mm->trans)
        unsupported(p, m, NULL);
    if (space != SP_GENERIC && space != SP_SHARED)
        unsupported(p, m, "state space");
    need(p, m, n, 2);
    mm->frag = (uint8_t)(1u << num);   /* matrices */
    if (op == OP_MOVMATRIX) {
        mm->nd = mm->na = 1;
        mma_regs(p, m, &o[0], 1, mm->d, true, 4, T_B32);
        mma_regs(p, m, &o[1], 1, mm->a, false, 0, T_B32);
    } else if (op == OP_LDMATRIX) {
        mm->nd = mm->frag;
        mma_regs(p, m, &o[0], mm->nd, mm->d, true, 4, T_B32);
        address(p, m, &o[1], space, in);
    } else {
        mm->nc = mm->frag;
        mma_regs(p, m, &o[1], mm->nc, mm->c, false, 0, T_B32);
        address(p, m, &o[0], space, in);
    }
    in->space = (uint8_t)space;
    in->type = T_B16;
    mma_common(p, in, op);
}

bool ptx_known_opcode(const ptx_tok *op)
{
    static const char *const known[] = {
        "mov", "ld", "ldu", "st", "add", "sub", "addc", "subc", "madc", "mul", "mad",
        "mul24", "mad24", "div", "rem", "min", "max", "abs", "neg", "and", "or", "xor",
        "not", "cnot", "shl", "shr", "setp", "set", "selp", "cvt", "cvta", "bra", "ret",
        "exit", "trap", "bar", "barrier", "membar", "fence", "nanosleep", "pmevent",
        "atom", "red", "shfl", "vote", "activemask", "popc", "clz", "brev", "bfind", "bfe",
        "bfi", "prmt", "lop3", "copysign", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin",
        "cos", "tanh", "fma", "testp", "shf", "bmsk", "match", "redux", "dp4a", "prefetch",
        "prefetchu", "isspacep", "tex", "tld4", "txq", "suld", "sust", "suq", "cp", "mbarrier", "wmma", "mma",
        "ldmatrix", "stmatrix", "movmatrix",
        "griddepcontrol", "createpolicy",
    };
    const char *dot = memchr(op->s, '.', op->len);
    size_t n = dot ? (size_t)(dot - op->s) : op->len;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strlen(known[i]) == n && memcmp(known[i], op->s, n) == 0)
            return true;
    return false;
}

void ptx_decode(ptx_parser *p, const ptx_tok *optok, int32_t guard, bool guard_neg,
                ptx_opd *o, unsigned n)
{
    mods mm, *m = &mm;
    split(p, optok, m);
    ptx_insn in = { .guard = guard, .line = optok->line };
    if (guard_neg)
        in.flags |= F_GUARD_NEG;
    /* .L2::cache_hint's operand (last) is a cache policy: a hint, dropped
     * (cp's forms count it themselves). */
    for (unsigned i = 0; i < m->n && strcmp(m->base, "cp") != 0; i++)
        if (is(m, i, "L2::cache_hint") && n > 0)
            n--;
    const char *b = m->base;
#define IS(s) (strcmp(b, s) == 0)
    if (IS("mov")) {
        dec_mov(p, m, &in, o, n);
    } else if ((IS("ld") || IS("st")) && has_v8(m) >= 0) {
        dec_ldst_v8(p, m, &in, o, n, IS("ld"));
    } else if (IS("ld")) {
        dec_ldst(p, m, &in, o, n, true);
    } else if (IS("tex") || IS("tld4")) {
        dec_tex(p, m, &in, o, n, IS("tld4"));
    } else if (IS("suld") || IS("sust")) {
        dec_surf(p, m, &in, o, n, IS("suld"));
    } else if (IS("txq") || IS("suq")) {
        dec_query(p, m, &in, o, n, IS("suq"));
    } else if (IS("ldu")) {
        dec_ldst(p, m, &in, o, n, true);
    } else if (IS("st")) {
        dec_ldst(p, m, &in, o, n, false);
    } else if (IS("add") || IS("sub")) {
        bool sub = IS("sub"), cc = false;
        for (unsigned i = 0; i < m->n; i++)
            cc |= is(m, i, "cc");
        if (cc) {
            dec_carry(p, m, &in, o, n, sub ? OP_SUBC : OP_ADDC, false);
        } else {
            dec_binary(p, m, &in, o, n, sub ? OP_SUB : OP_ADD, true, true, true);
            if (int_type(in.type) && !(in.flags & F_SAT))
                in.type = (uint8_t)unsign(in.type);
        }
    } else if (IS("addc")) {
        dec_carry(p, m, &in, o, n, OP_ADDC, true);
    } else if (IS("subc")) {
        dec_carry(p, m, &in, o, n, OP_SUBC, true);
    } else if (IS("madc")) {
        dec_carry(p, m, &in, o, n, OP_MADC, true);
    } else if (IS("mul")) {
        dec_mul(p, m, &in, o, n, false);
    } else if (IS("mad")) {
        dec_mul(p, m, &in, o, n, true);
    } else if (IS("mul24") || IS("mad24")) {
        bool mad = IS("mad24");
        if (!take(m, "lo"))
            unsupported(p, m, NULL);
        ptx_type t = unsign(take_type(m));
        finish_mods(p, m);
        if (t != T_U32)
            unsupported(p, m, "type");
        need(p, m, n, mad ? 4 : 3);
        in.op = mad ? OP_MAD24 : OP_MUL24;
        in.type = T_U32;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], T_U32);
        in.b = src(p, m, &o[2], T_U32);
        if (mad)
            in.c = src(p, m, &o[3], T_U32);
    } else if (IS("div")) {
        dec_binary(p, m, &in, o, n, OP_DIV, true, true, true);
    } else if (IS("rem")) {
        dec_binary(p, m, &in, o, n, OP_REM, true, false, true);
    } else if (IS("min") || IS("max")) {
        bool nan = take(m, "NaN");
        if (take(m, "xorsign"))
            unsupported(p, m, NULL);
        if (take(m, "relu"))
            in.flags2 |= F2_RELU;
        dec_binary(p, m, &in, o, n, IS("min") ? OP_MIN : OP_MAX, true, true, true);
        if (nan && !ptx_type_float(in.type))
            invalid(p, m, ".NaN of integers");
        if (nan)
            in.flags |= F_NAN;
    } else if (IS("abs") || IS("neg")) {
        dec_unary(p, m, &in, o, n, IS("abs") ? OP_ABS : OP_NEG, true, true, true);
        if (int_type(in.type) && !ptx_type_signed(in.type))
            unsupported(p, m, "type");
    } else if (IS("and") || IS("or") || IS("xor")) {
        dec_logic(p, m, &in, o, n, IS("and") ? OP_AND : IS("or") ? OP_OR : OP_XOR);
    } else if (IS("not") || IS("cnot")) {
        dec_logic(p, m, &in, o, n, IS("not") ? OP_NOT : OP_CNOT);
        if (in.op == OP_CNOT && in.type == T_PRED)
            unsupported(p, m, "type");
    } else if (IS("shl") || IS("shr")) {
        ptx_type t = take_type(m);
        finish_mods(p, m);
        need(p, m, n, 3);
        t = IS("shl") ? unsign(t) : norm_int(t);
        if (!int_type(t) || ptx_type_size(t) < 2)
            unsupported(p, m, "type");
        in.op = IS("shl") ? OP_SHL : OP_SHR;
        in.type = (uint8_t)t;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], t);
        in.b = src(p, m, &o[2], T_U32);
    } else if (IS("setp")) {
        dec_setp(p, m, &in, o, n, false);
    } else if (IS("set")) {
        dec_setp(p, m, &in, o, n, true);
    } else if (IS("selp")) {
        dec_selp(p, m, &in, o, n);
    } else if (IS("cvt")) {
        dec_cvt(p, m, &in, o, n);
    } else if (IS("cvta")) {
        dec_cvta(p, m, &in, o, n);
    } else if (IS("bra")) {
        dec_bra(p, m, &in, o, n);
        return;
    } else if (IS("ret") || IS("exit")) {
        take(m, "uni");
        finish_mods(p, m);
        need(p, m, n, 0);
        in.op = (IS("exit") || p->fn->is_entry) ? OP_EXIT : OP_RET;
    } else if (IS("trap")) {
        finish_mods(p, m);
        need(p, m, n, 0);
        in.op = OP_TRAP;
    } else if (IS("bar") || IS("barrier")) {
        bool warp = take(m, "warp");
        bool red = take(m, "red");
        static const char *const rops[] = { "popc", "and", "or" };
        int rop = red ? take_one(m, rops, 3) : -1;
        ptx_type rt = red ? unsign(take_type(m)) : T_NONE;
        bool sync = take(m, "sync") || (IS("barrier") && !warp) || red;
        take(m, "aligned");
        finish_mods(p, m);
        if (warp) {
            if (!sync)
                unsupported(p, m, NULL);
            in.op = OP_NOP;
        } else if (red) {
            if (rop < 0 || (rop == 0 ? rt != T_U32 : rt != T_PRED))
                unsupported(p, m, NULL);
            need(p, m, n, 3);
            if (o[1].kind != OPD_INT || o[1].bits != 0)
                unsupported(p, m, "barriers other than 0");
            in.op = OP_BAR;
            in.mode = (uint8_t)(1 + rop);
            in.type = (uint8_t)rt;
            in.d = dst(p, m, &o[0]);
            bool neg;
            in.c = pred_src(p, m, &o[2], &neg);
            if (neg)
                in.flags |= F_NEG_C;
        } else {
            if (!sync)
                unsupported(p, m, NULL);
            /* -G builds name the barrier in a register (cooperative groups'
             * block sync): checked to be 0 when it runs */
            bool reg = n >= 1 && o[0].kind == OPD_REG;
            if (n < 1 || n > 2 || (!reg && (o[0].kind != OPD_INT || o[0].bits != 0)))
                unsupported(p, m, "barriers other than 0");
            if (n == 2)
                unsupported(p, m, "a thread count");
            in.op = OP_BAR;
            if (reg) {
                in.vec = 1;
                in.e = src(p, m, &o[0], T_U32);
            }
        }
    } else if (IS("shf")) {
        bool left = take(m, "l"), right = take(m, "r");
        bool wrap = take(m, "wrap"), clamp = take(m, "clamp");
        ptx_type t = unsign(take_type(m));
        finish_mods(p, m);
        need(p, m, n, 4);
        if (left == right || wrap == clamp || t != T_U32)
            unsupported(p, m, NULL);
        in.op = OP_SHF;
        in.type = T_U32;
        in.mode = (uint8_t)(left | wrap << 1);
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], T_U32);
        in.b = src(p, m, &o[2], T_U32);
        in.c = src(p, m, &o[3], T_U32);
    } else if (IS("match")) {
        bool sync = take(m, "sync");
        bool any = take(m, "any"), all = take(m, "all");
        ptx_type t = unsign(take_type(m));
        finish_mods(p, m);
        if (!sync || any == all || (t != T_U32 && t != T_U64))
            unsupported(p, m, NULL);
        need(p, m, n, 3);
        in.op = OP_MATCH;
        in.type = (uint8_t)t;
        in.mode = all;
        in.d = dst_any(p, m, &o[0], all);
        if (o[0].has_reg2) {
            in.flags |= F_HAS_P;
            in.e = o[0].reg2;
        }
        in.a = src(p, m, &o[1], t);
    } else if (IS("membar") || IS("fence")) {
        in.op = OP_MEMBAR;
        for (unsigned i = 0; i < m->n; i++)
            m->used[i] = is(m, i, "cta") || is(m, i, "gl") || is(m, i, "sys") ||
                         is(m, i, "gpu") || is(m, i, "sc") || is(m, i, "acq_rel") ||
                         /* proxy fences and the mbarrier-init fence: one
                          * proxy and one CTA per cluster here */
                         is(m, i, "proxy") || is(m, i, "async") || is(m, i, "alias") ||
                         is(m, i, "shared::cta") || is(m, i, "shared::cluster") ||
                         is(m, i, "global") || is(m, i, "mbarrier_init") ||
                         is(m, i, "release") || is(m, i, "acquire") || is(m, i, "cluster");
        finish_mods(p, m);
    } else if (IS("createpolicy")) {
        /* A cache policy for .L2::cache_hint accesses, which drop it. */
        for (unsigned i = 0; i < m->n; i++)
            m->used[i] = true;
        if (n < 2 || o[0].kind != OPD_REG || p->prog->reg_width[o[0].reg] != 8)
            invalid(p, m, "needs a 64-bit destination");
        in.op = OP_MOV;
        in.type = T_U64;
        in.d = dst(p, m, &o[0]);
        in.a = ptx_const_reg(p, 0);
    } else if (IS("griddepcontrol")) {
        /* Programmatic dependent launch: a stream's grids run one after
         * another here, so the one before has finished and nothing waits. */
        if (!take(m, "wait") && !take(m, "launch_dependents"))
            unsupported(p, m, NULL);
        finish_mods(p, m);
        in.op = OP_NOP;
    } else if (IS("nanosleep") || IS("pmevent")) {
        take_type(m);
        finish_mods(p, m);
        /* a sleeping thread lets the block's other warps run: spin-waits
         * on shared memory (libcu++'s barrier before sm_80) back off so */
        in.op = IS("nanosleep") ? OP_SLEEP : OP_NOP;
    } else if (IS("atom")) {
        dec_atom(p, m, &in, o, n, false);
    } else if (IS("red")) {
        dec_atom(p, m, &in, o, n, true);
    } else if (IS("shfl")) {
        dec_shfl(p, m, &in, o, n);
    } else if (IS("vote")) {
        dec_vote(p, m, &in, o, n);
    } else if (IS("activemask")) {
        ptx_type t = unsign(take_type(m));
        finish_mods(p, m);
        need(p, m, n, 1);
        if (t != T_U32)
            unsupported(p, m, "type");
        in.op = OP_ACTIVEMASK;
        in.type = T_U32;
        in.d = dst(p, m, &o[0]);
    } else if (IS("popc") || IS("clz") || IS("brev") || IS("bfind") || IS("bfe") || IS("bfi")) {
        ptx_op op = IS("popc") ? OP_POPC : IS("clz") ? OP_CLZ : IS("brev") ? OP_BREV :
                    IS("bfind") ? OP_BFIND : IS("bfe") ? OP_BFE : OP_BFI;
        dec_bits(p, m, &in, o, n, op);
    } else if (IS("bmsk")) {
        /* bmsk.mode.b32 d, a, b: b one bits from bit a; .wrap takes both
         * modulo 32, .clamp caps them at 32 */
        bool wrap = take(m, "wrap");
        if (!wrap && !take(m, "clamp"))
            unsupported(p, m, "mode");
        ptx_type t = take_type(m);
        finish_mods(p, m);
        need(p, m, n, 3);
        if (t != T_B32)
            unsupported(p, m, "type");
        in.op = OP_BMSK;
        in.type = T_U32;
        in.mode = wrap;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], T_U32);
        in.b = src(p, m, &o[2], T_U32);
    } else if (IS("prmt")) {
        ptx_type t = unsign(take_type(m));
        finish_mods(p, m);
        need(p, m, n, 4);
        if (t != T_U32)
            unsupported(p, m, "mode or type");
        in.op = OP_PRMT;
        in.type = T_U32;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], T_U32);
        in.b = src(p, m, &o[2], T_U32);
        in.c = src(p, m, &o[3], T_U32);
    } else if (IS("lop3")) {
        ptx_type t = unsign(take_type(m));
        finish_mods(p, m);
        need(p, m, n, 5);
        if (t != T_U32 || o[4].kind != OPD_INT)
            unsupported(p, m, "form");
        in.op = OP_LOP3;
        in.type = T_U32;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], T_U32);
        in.b = src(p, m, &o[2], T_U32);
        in.c = src(p, m, &o[3], T_U32);
        in.imm = (int64_t)(o[4].bits & 0xff);
    } else if (IS("copysign")) {
        dec_binary(p, m, &in, o, n, OP_COPYSIGN, true, true, false);
        if (in.type != T_F32 && in.type != T_F64)
            unsupported(p, m, "type");
    } else if (IS("rcp") || IS("sqrt") || IS("rsqrt") || IS("ex2") || IS("lg2") ||
               IS("sin") || IS("cos") || IS("tanh")) {
        ptx_op op = IS("rcp") ? OP_RCP : IS("sqrt") ? OP_SQRT : IS("rsqrt") ? OP_RSQRT :
                    IS("ex2") ? OP_EX2 : IS("lg2") ? OP_LG2 : IS("sin") ? OP_SIN :
                    IS("cos") ? OP_COS : OP_TANH;
        dec_math(p, m, &in, o, n, op);
    } else if (IS("fma")) {
        dec_fma(p, m, &in, o, n);
    } else if (IS("redux")) {
        bool sync = take(m, "sync");
        static const char *const ops[] = { "add", "min", "max", "and", "or", "xor" };
        int op = take_one(m, ops, 6);
        ptx_type t = norm_int(take_type(m));
        finish_mods(p, m);
        if (!sync || op < 0 || (op < 3 ? (t != T_U32 && t != T_S32) : t != T_U32))
            unsupported(p, m, NULL);
        need(p, m, n, 3);
        in.op = OP_REDUX;
        in.mode = (uint8_t)op;
        in.type = (uint8_t)t;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], t);
        in.v[0] = src(p, m, &o[2], T_U32);
        in.flags |= F_MEMBER;
    } else if (IS("dp4a")) {
        ptx_type ta = norm_int(take_type(m)), tb = norm_int(take_type(m));
        finish_mods(p, m);
        if ((ta != T_U32 && ta != T_S32) || (tb != T_U32 && tb != T_S32))
            unsupported(p, m, NULL);
        need(p, m, n, 4);
        in.op = OP_DP4A;
        in.type = (uint8_t)ta;
        in.type2 = (uint8_t)tb;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], T_U32);
        in.b = src(p, m, &o[2], T_U32);
        in.c = src(p, m, &o[3], T_U32);
    } else if (IS("prefetch") || IS("prefetchu")) {
        /* a hint: nothing to do on a CPU, and it never faults */
        for (unsigned i = 0; i < m->n; i++)
            m->used[i] = true;
        need(p, m, n, 1);
        if (o[0].kind != OPD_ADDR)
            invalid(p, m, "expected an address");
        in.op = OP_NOP;
    } else if (IS("isspacep")) {
        int space = take_space(m);
        finish_mods(p, m);
        need(p, m, n, 2);
        if (space == SP_GENERIC || space == SP_PARAM)
            unsupported(p, m, "state space");
        in.op = OP_ISSPACEP;
        in.space = (uint8_t)space;
        in.type = T_PRED;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], T_U64);
    } else if (IS("cp")) {
        dec_cp(p, m, &in, o, n);
    } else if (IS("mbarrier")) {
        dec_mbarrier(p, m, &in, o, n);
    } else if (IS("wmma")) {
        if (take(m, "load"))
            dec_wmma_ldst(p, m, &in, o, n, true);
        else if (take(m, "store"))
            dec_wmma_ldst(p, m, &in, o, n, false);
        else if (take(m, "mma"))
            dec_mma(p, m, &in, o, n, true);
        else
            unsupported(p, m, NULL);
    } else if (IS("mma")) {
        dec_mma(p, m, &in, o, n, false);
    } else if (IS("ldmatrix") || IS("stmatrix") || IS("movmatrix")) {
        dec_matrix(p, m, &in, o, n, IS("ldmatrix") ? OP_LDMATRIX : IS("stmatrix") ? OP_STMATRIX
                                                                                 : OP_MOVMATRIX);
    } else if (IS("testp")) {
        static const char *const kinds[] = { "finite", "infinite", "number", "notanumber",
                                             "normal", "subnormal" };
        int k = take_one(m, kinds, 6);
        ptx_type t = take_type(m);
        finish_mods(p, m);
        need(p, m, n, 2);
        if (k < 0 || (t != T_F32 && t != T_F64))
            unsupported(p, m, NULL);
        in.op = OP_TESTP;
        in.type = (uint8_t)t;
        in.mode = (uint8_t)k;
        in.d = dst(p, m, &o[0]);
        in.a = src(p, m, &o[1], t);
    } else {
        unsupported(p, m, NULL);
    }
#undef IS
    ptx_emit(p, &in);
}

/* A call's arguments and results match what it calls (a function or, for
 * a call through a register, its prototype) in count and sizes. */
static void check_call_sizes(ptx_parser *p, const mods *m, const ptx_sym **args, unsigned nargs,
                             const ptx_sym **rets, unsigned nrets, unsigned want_args, const uint32_t *arg_size,
                             unsigned want_rets, const uint32_t *ret_size, const char *what)
{
    char why[96];
    if (nargs != want_args || nrets != want_rets) {
        snprintf(why, sizeof why, "argument count does not match %s", what);
        invalid(p, m, why);
    }
    for (unsigned i = 0; i < nargs; i++)
        if (args[i]->size != arg_size[i]) {
            snprintf(why, sizeof why, "argument size does not match %s", what);
            invalid(p, m, why);
        }
    for (unsigned i = 0; i < nrets; i++)
        if (rets[i]->size != ret_size[i]) {
            snprintf(why, sizeof why, "result size does not match %s", what);
            invalid(p, m, why);
        }
}

void ptx_decode_call(ptx_parser *p, const ptx_tok *optok, int32_t guard, bool guard_neg,
                     const ptx_tok *callee, const ptx_sym **rets, unsigned nrets,
                     const ptx_sym **args, unsigned nargs)
{
    mods mm, *m = &mm;
    split(p, optok, m);
    ptx_insn in = { .guard = guard, .line = optok->line };
    if (guard_neg)
        in.flags |= F_GUARD_NEG;
    if (take(m, "uni"))
        in.flags |= F_UNI;
    finish_mods(p, m);
    const ptx_sym *s = ptx_lookup(p, callee->s, callee->len);
    if (!s || s->kind != SYM_FUNC) {
        if (s && (s->kind == SYM_REG || s->kind == SYM_REGRANGE))
            unsupported(p, m, "indirect calls");
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, callee->line, "call to unknown '%.*s'",
                 (int)(callee->len > 60 ? 60 : callee->len), callee->s);
    }
    soft_program *g = p->prog;
    ptx_func *f = &g->funcs[s->index];
    if (f->is_entry)
        invalid(p, m, "call to an entry");
    check_call_sizes(p, m, args, nargs, rets, nrets, f->nparams, f->param_size, f->nrets, f->ret_size,
                     "the callee");
    if (f->is_extern && !f->defined) {
        if (strcmp(f->name, "vprintf") == 0) {
            if (nargs != 2 || nrets > 1 || f->param_size[0] != 8 || f->param_size[1] != 8)
                invalid(p, m, "vprintf takes two pointers");
            in.op = OP_VPRINTF;
            in.a = (uint32_t)args[0]->offset;
            in.b = (uint32_t)args[1]->offset;
            in.c = nrets ? (uint32_t)rets[0]->offset : UINT32_MAX;
            in.e = nrets ? rets[0]->size : 0;
            ptx_emit(p, &in);
            return;
        }
        /* Device malloc and free: the driver layer's heap. */
        if (strcmp(f->name, "malloc") == 0) {
            if (nargs != 1 || nrets != 1 || f->param_size[0] != 8 || f->ret_size[0] != 8)
                invalid(p, m, "malloc takes a size and returns a pointer");
            in.op = OP_MALLOC;
            in.a = (uint32_t)args[0]->offset;
            in.c = (uint32_t)rets[0]->offset;
            ptx_emit(p, &in);
            return;
        }
        if (strcmp(f->name, "free") == 0) {
            if (nargs != 1 || nrets != 0 || f->param_size[0] != 8)
                invalid(p, m, "free takes a pointer");
            in.op = OP_FREE;
            in.a = (uint32_t)args[0]->offset;
            ptx_emit(p, &in);
            return;
        }
        if (strcmp(f->name, "__assertfail") == 0) {
            /* (message, file, line, function, char size) */
            if (nargs < 4 || args[0]->size != 8 || args[1]->size != 8 || args[2]->size != 4 ||
                args[3]->size != 8)
                invalid(p, m, "__assertfail takes message, file, line and function");
            in.op = OP_TRAP;
            in.mode = 1;   /* assertion */
            in.a = (uint32_t)args[0]->offset;
            in.b = (uint32_t)args[1]->offset;
            in.c = (uint32_t)args[2]->offset;
            in.e = (uint32_t)args[3]->offset;
            ptx_emit(p, &in);
            return;
        }
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, optok->line, "call to external function '%s'",
                 f->name);
    }
    if (g->ncalls >= (1u << 20))
        invalid(p, m, "too many calls");
    ptx_call *c = ptx_new_call(p);
    c->func = s->index;
    if (nargs) {
        c->args = calloc(nargs, sizeof *c->args);
        if (!c->args)
            ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, optok->line, "out of memory");
        c->nargs = nargs;
        for (unsigned i = 0; i < nargs; i++)
            c->args[i] = (ptx_pcopy){ .from = (uint32_t)args[i]->offset,
                                      .to = f->param_off[i], .size = f->param_size[i] };
    }
    if (nrets) {
        c->rets = calloc(nrets, sizeof *c->rets);
        if (!c->rets)
            ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, optok->line, "out of memory");
        c->nrets = nrets;
        for (unsigned i = 0; i < nrets; i++)
            c->rets[i] = (ptx_pcopy){ .from = f->ret_off[i], .to = (uint32_t)rets[i]->offset,
                                      .size = f->ret_size[i] };
    }
    g->has_calls = true;
    in.op = OP_CALL;
    in.aux = g->ncalls - 1;
    ptx_emit(p, &in);
}

void ptx_decode_icall(ptx_parser *p, const ptx_tok *optok, int32_t guard, bool guard_neg,
                      uint32_t target, const ptx_proto *proto, const ptx_sym **rets,
                      unsigned nrets, const ptx_sym **args, unsigned nargs)
{
    mods mm, *m = &mm;
    split(p, optok, m);
    ptx_insn in = { .guard = guard, .line = optok->line };
    if (guard_neg)
        in.flags |= F_GUARD_NEG;
    if (take(m, "uni"))
        in.flags |= F_UNI;
    finish_mods(p, m);
    soft_program *g = p->prog;
    if (g->reg_width[target] != 8)
        invalid(p, m, "the callee's address must be a 64-bit register");
    check_call_sizes(p, m, args, nargs, rets, nrets, proto->nargs, proto->arg_size, proto->nrets,
                     proto->ret_size, "the prototype");
    if (g->ncalls >= (1u << 20))
        invalid(p, m, "too many calls");
    ptx_call *c = ptx_new_call(p);
    c->func = PTX_NO_FUNC;
    /* the callee's formal slots (args[].to, rets[].from) are known per lane
     * when it runs */
    if (nargs) {
        c->args = calloc(nargs, sizeof *c->args);
        if (!c->args)
            ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, optok->line, "out of memory");
        c->nargs = nargs;
        for (unsigned i = 0; i < nargs; i++)
            c->args[i] = (ptx_pcopy){ .from = (uint32_t)args[i]->offset, .size = args[i]->size };
    }
    if (nrets) {
        c->rets = calloc(nrets, sizeof *c->rets);
        if (!c->rets)
            ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, optok->line, "out of memory");
        c->nrets = nrets;
        for (unsigned i = 0; i < nrets; i++)
            c->rets[i] = (ptx_pcopy){ .to = (uint32_t)rets[i]->offset, .size = rets[i]->size };
    }
    g->has_calls = true;
    in.op = OP_CALLI;
    in.a = target;
    in.aux = g->ncalls - 1;
    ptx_emit(p, &in);
}

/* ptx_parse: PTX module text to a soft_program. Handles the module
 * structure (directives, variables, .entry/.func, scopes, registers, labels)
 * and operand syntax; what each instruction means is ptx_decode.c's. */
#include "softgpu/ptx_parse.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STATIC_BYTES (64u << 20)   /* one global variable, one shared layout */

void ptx_fail(ptx_parser *p, CUresult err, uint32_t line, const char *fmt, ...)
{
    va_list ap;
    /* The kernel or function whose body fails, for a refusal to name it. */
    /* A library's mangled names run to a thousand characters: the reason
     * must still fit a log line after one. */
    int n = p->fn && p->fn->name ? snprintf(p->msg, p->msglen, "line %u, in %s %.160s%s: ", line,
                                            p->fn->is_entry ? "kernel" : "function", p->fn->name,
                                            strlen(p->fn->name) > 160 ? "..." : "")
                                 : snprintf(p->msg, p->msglen, "line %u: ", line);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < p->msglen)
        vsnprintf(p->msg + n, p->msglen - (size_t)n, fmt, ap);
    va_end(ap);
    p->err = err;
    longjmp(p->fail, 1);
}

static void *grow(ptx_parser *p, void *ptr, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return ptr;
    uint32_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > (1u << 28))
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "module too large");
        ncap *= 2;
    }
    void *np = realloc(ptr, (size_t)ncap * elem);
    if (!np)
        ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, p->t->line, "out of memory");
    memset((char *)np + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *cap = ncap;
    return np;
}

static void *xcalloc(ptx_parser *p, size_t n, size_t size)
{
    void *q = calloc(n ? n : 1, size);
    if (!q)
        ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, p->t->line, "out of memory");
    return q;
}

static char *tok_dup(ptx_parser *p, const ptx_tok *t)
{
    char *s = xcalloc(p, t->len + 1, 1);
    memcpy(s, t->s, t->len);
    return s;
}

bool ptx_tok_is(const ptx_tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->kind == PTX_TOK_IDENT && t->len == n && memcmp(t->s, s, n) == 0;
}

static bool punct(const ptx_tok *t, char c)
{
    return t->kind == PTX_TOK_PUNCT && t->c == c;
}

static void expect(ptx_parser *p, char c)
{
    if (!punct(p->t, c))
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "expected '%c' near '%.*s'",
                 c, (int)(p->t->len > 40 ? 40 : p->t->len), p->t->s);
    p->t++;
}

static bool accept(ptx_parser *p, char c)
{
    if (!punct(p->t, c))
        return false;
    p->t++;
    return true;
}

static const ptx_tok *expect_ident(ptx_parser *p)
{
    if (p->t->kind != PTX_TOK_IDENT)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "expected a name");
    return p->t++;
}

/* ---- registers, constants, code ---- */

static unsigned reg_bytes(ptx_type t)
{
    unsigned s = ptx_type_size(t);
    return s ? s : 1;
}

uint32_t ptx_new_reg(ptx_parser *p, ptx_type type)
{
    soft_program *g = p->prog;
    if (g->nregs >= (1u << 22))
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "too many registers");
    g->reg_width = grow(p, g->reg_width, &p->capregs, g->nregs + 1, 1);
    g->reg_width[g->nregs] = (uint8_t)reg_bytes(type);
    return g->nregs++;
}

uint32_t ptx_const_reg(ptx_parser *p, uint64_t bits)
{
    soft_program *g = p->prog;
    for (uint32_t i = g->nconsts; i-- > 0;)   /* recent ones are likeliest */
        if (g->consts[i].value == bits && (!p->dyn_reg || g->consts[i].reg != p->dyn_reg))
            return g->consts[i].reg;
    g->consts = grow(p, g->consts, &p->capconsts, g->nconsts + 1, sizeof *g->consts);
    uint32_t r = ptx_new_reg(p, T_B64);
    g->consts[g->nconsts++] = (ptx_const){ .reg = r, .value = bits };
    return r;
}

uint32_t ptx_dyn_shared_reg(ptx_parser *p)
{
    soft_program *g = p->prog;
    if (!p->dyn_reg) {
        g->consts = grow(p, g->consts, &p->capconsts, g->nconsts + 1, sizeof *g->consts);
        p->dyn_reg = ptx_new_reg(p, T_B64);
        /* value set in finish(), once all static shared memory is known */
        g->consts[g->nconsts++] = (ptx_const){ .reg = p->dyn_reg, .value = 0 };
    }
    return p->dyn_reg;
}

uint32_t ptx_emit(ptx_parser *p, const ptx_insn *in)
{
    soft_program *g = p->prog;
    g->code = grow(p, g->code, &p->capcode, g->ncode + 1, sizeof *g->code);
    g->code[g->ncode] = *in;
    return g->ncode++;
}

ptx_call *ptx_new_call(ptx_parser *p)
{
    soft_program *g = p->prog;
    g->calls = grow(p, g->calls, &p->capcalls, g->ncalls + 1, sizeof *g->calls);
    return &g->calls[g->ncalls++];
}

ptx_mma *ptx_new_mma(ptx_parser *p)
{
    soft_program *g = p->prog;
    g->mmas = grow(p, g->mmas, &p->capmmas, g->nmmas + 1, sizeof *g->mmas);
    g->mmas[g->nmmas] = (ptx_mma){ 0 };
    return &g->mmas[g->nmmas++];
}

void ptx_add_fixup(ptx_parser *p, uint32_t pc, const ptx_tok *label)
{
    p->fixups = grow(p, p->fixups, &p->capfixups, p->nfixups + 1, sizeof *p->fixups);
    p->fixups[p->nfixups++] = (ptx_fixup){ .pc = pc, .label = label };
}

void ptx_use_shared(ptx_parser *p, uint32_t id)
{
    ptx_func *f = p->fn;
    if (!f)
        return;
    for (uint32_t i = 0; i < f->nshared_used; i++)
        if (f->shared_used[i] == id)
            return;
    f->shared_used = grow(p, f->shared_used, &f->capshared_used, f->nshared_used + 1,
                          sizeof *f->shared_used);
    f->shared_used[f->nshared_used++] = id;
}

uint32_t ptx_param_slot(ptx_parser *p, uint32_t size, uint32_t align)
{
    soft_program *g = p->prog;
    if (align < 1)
        align = 1;
    if (align > 256 || size > (1u << 16))
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "parameter too large");
    uint32_t off = (g->param_bytes + align - 1) / align * align;
    if (off + size > (1u << 20))
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line, "too many call parameters");
    g->param_bytes = off + size;
    return off;
}

/* ---- symbols ---- */

static ptx_sym *add_sym(ptx_parser *p, const ptx_tok *name, ptx_sym_kind kind)
{
    p->syms = grow(p, p->syms, &p->capsyms, p->nsyms + 1, sizeof *p->syms);
    ptx_sym *s = &p->syms[p->nsyms++];
    *s = (ptx_sym){ .name = name->s, .len = name->len, .kind = (uint8_t)kind };
    return s;
}

static bool digits(const char *s, uint32_t len, uint32_t *val)
{
    uint64_t v = 0;
    if (len == 0 || len > 9)
        return false;
    if (len > 1 && s[0] == '0')
        return false;
    for (uint32_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *val = (uint32_t)v;
    return true;
}

const ptx_sym *ptx_lookup(ptx_parser *p, const char *name, uint32_t len)
{
    for (uint32_t i = p->nsyms; i-- > 0;) {
        const ptx_sym *s = &p->syms[i];
        if (s->kind == SYM_REGRANGE) {
            uint32_t k;
            if (len > s->len && memcmp(name, s->name, s->len) == 0 &&
                digits(name + s->len, len - s->len, &k) && k < s->count)
                return s;
        } else if (s->len == len && memcmp(s->name, name, len) == 0) {
            return s;
        }
    }
    return NULL;
}

/* Register index of a name that lookup found as a register. */
static uint32_t sym_reg(const ptx_sym *s, const char *name, uint32_t len)
{
    uint32_t k = 0;
    if (s->kind == SYM_REGRANGE)
        digits(name + s->len, len - s->len, &k);
    return s->index + k;
}

static void push_scope(ptx_parser *p)
{
    if (p->nscope >= sizeof p->scope / sizeof p->scope[0])
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "scopes nested too deeply");
    p->scope[p->nscope++] = p->nsyms;
}

static void pop_scope(ptx_parser *p)
{
    p->nsyms = p->scope[--p->nscope];
}

static void check_new_name(ptx_parser *p, const ptx_tok *name)
{
    uint32_t base = p->nscope ? p->scope[p->nscope - 1] : 0;
    for (uint32_t i = base; i < p->nsyms; i++)
        if (p->syms[i].len == name->len &&
            memcmp(p->syms[i].name, name->s, name->len) == 0)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "'%.*s' declared twice",
                     (int)name->len, name->s);
}

/* ---- numbers ---- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parses a numeric literal token into *kind (OPD_INT/F32/F64) and *bits. */
static void parse_number(ptx_parser *p, const ptx_tok *t, bool negate, uint8_t *kind,
                         uint64_t *bits)
{
    const char *s = t->s;
    uint32_t n = t->len;
    uint64_t v = 0;
    if (n >= 2 && s[0] == '0' && (s[1] == 'f' || s[1] == 'F' || s[1] == 'd' || s[1] == 'D')) {
        uint32_t want = (s[1] == 'f' || s[1] == 'F') ? 8 : 16;
        if (n != want + 2)
            goto bad;
        for (uint32_t i = 2; i < n; i++) {
            int h = hexval(s[i]);
            if (h < 0)
                goto bad;
            v = v << 4 | (uint64_t)h;
        }
        if (want == 8) {
            *kind = OPD_F32;
            *bits = negate ? v ^ 0x80000000u : v;
        } else {
            *kind = OPD_F64;
            *bits = negate ? v ^ 0x8000000000000000ull : v;
        }
        return;
    }
    bool isfloat = false;
    for (uint32_t i = 0; i < n; i++)
        if (s[i] == '.' || ((s[i] == 'e' || s[i] == 'E') && !(n > 1 && (s[1] == 'x' || s[1] == 'X'))))
            isfloat = true;
    if (isfloat) {
        char buf[64];
        if (n >= sizeof buf)
            goto bad;
        memcpy(buf, s, n);
        buf[n] = 0;
        char *end;
        double d = strtod(buf, &end);
        if (*end)
            goto bad;
        if (negate)
            d = -d;
        memcpy(&v, &d, 8);
        *kind = OPD_F64;
        *bits = v;
        return;
    }
    uint32_t i = 0, base = 10;
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        i = 2;
    } else if (n > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
        base = 2;
        i = 2;
    } else if (n > 1 && s[0] == '0') {
        base = 8;
        i = 1;
    }
    uint32_t end = n;
    if (end > i && (s[end - 1] == 'U' || s[end - 1] == 'u'))
        end--;
    if (end == i)
        goto bad;
    for (; i < end; i++) {
        int h = hexval(s[i]);
        if (h < 0 || (unsigned)h >= base)
            goto bad;
        v = v * base + (uint64_t)h;
    }
    *kind = OPD_INT;
    *bits = negate ? (uint64_t)0 - v : v;
    return;
bad:
    ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "bad number '%.*s'",
             (int)(n > 40 ? 40 : n), s);
}

static uint64_t expect_uint(ptx_parser *p, uint64_t max)
{
    uint8_t kind;
    uint64_t v;
    if (p->t->kind != PTX_TOK_NUMBER)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "expected a number");
    parse_number(p, p->t, false, &kind, &v);
    if (kind != OPD_INT || v > max)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad number");
    p->t++;
    return v;
}

/* ---- types ---- */

static const struct { const char *name; ptx_type t; } type_names[] = {
    { "pred", T_PRED }, { "b8", T_B8 }, { "u8", T_U8 }, { "s8", T_S8 },
    { "b16", T_B16 }, { "u16", T_U16 }, { "s16", T_S16 },
    { "b32", T_B32 }, { "u32", T_U32 }, { "s32", T_S32 },
    { "b64", T_B64 }, { "u64", T_U64 }, { "s64", T_S64 },
    { "f16", T_F16 }, { "f16x2", T_F16X2 }, { "bf16", T_BF16 },
    { "f32", T_F32 }, { "f64", T_F64 }, { "b128", T_B128 },
    { "bf16x2", T_BF16X2 },
};

ptx_type ptx_type_from(const char *s, size_t len)
{
    if (len && s[0] == '.') {
        s++;
        len--;
    }
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
        if (strlen(type_names[i].name) == len && memcmp(type_names[i].name, s, len) == 0)
            return type_names[i].t;
    return T_NONE;
}

/* ---- declarations ---- */

typedef struct decl {
    uint32_t align;
    ptx_type type;
    const ptx_tok *name;
    uint64_t count;       /* array elements, 1 for a scalar */
    bool unsized;         /* name[] */
    bool is_array;
    bool managed;         /* .attribute(.managed) */
} decl;

/* Parses `[.align N] [.ptr .space .align N] .type name[N][M]...` after the
 * state space. */
static void parse_decl(ptx_parser *p, decl *d)
{
    *d = (decl){ .count = 1 };
    for (;;) {
        if (ptx_tok_is(p->t, ".align")) {
            p->t++;
            d->align = (uint32_t)expect_uint(p, 4096);
            if (d->align == 0 || (d->align & (d->align - 1)))
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad alignment");
        } else if (ptx_tok_is(p->t, ".attribute")) {
            /* Only .managed: the variable is memory the CPU shares (library.c). */
            p->t++;
            expect(p, '(');
            if (!ptx_tok_is(p->t, ".managed"))
                ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line, "variable attribute '%.*s'", (int)p->t->len,
                         p->t->s);
            p->t++;
            expect(p, ')');
            d->managed = true;
        } else if (ptx_tok_is(p->t, ".ptr") || ptx_tok_is(p->t, ".global") ||
                   ptx_tok_is(p->t, ".shared") || ptx_tok_is(p->t, ".const") ||
                   ptx_tok_is(p->t, ".local")) {
            p->t++;
        } else if (ptx_tok_is(p->t, ".v2") || ptx_tok_is(p->t, ".v4")) {
            ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line, "vector variables");
        } else {
            break;
        }
    }
    if (p->t->kind != PTX_TOK_IDENT)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "expected a type");
    d->type = ptx_type_from(p->t->s, p->t->len);
    if (d->type == T_NONE || d->type == T_PRED)
        ptx_fail(p, ptx_tok_is(p->t, ".texref") || ptx_tok_is(p->t, ".samplerref") ||
                 ptx_tok_is(p->t, ".surfref") ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_PTX,
                 p->t->line, "unsupported variable type '%.*s'", (int)p->t->len, p->t->s);
    p->t++;
    /* sm_100 PTX puts pointer attributes after the type: .u64 .ptr .align 1 */
    while (ptx_tok_is(p->t, ".ptr") || ptx_tok_is(p->t, ".global") ||
           ptx_tok_is(p->t, ".shared") || ptx_tok_is(p->t, ".const") ||
           ptx_tok_is(p->t, ".local") || ptx_tok_is(p->t, ".align")) {
        if (ptx_tok_is(p->t, ".align")) {
            p->t++;
            uint64_t a = expect_uint(p, 4096);
            if (a == 0 || (a & (a - 1)))
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad alignment");
        } else {
            p->t++;
        }
    }
    d->name = expect_ident(p);
    while (accept(p, '[')) {
        d->is_array = true;
        if (accept(p, ']')) {
            d->unsized = true;
            continue;
        }
        uint64_t n = expect_uint(p, MAX_STATIC_BYTES);
        expect(p, ']');
        d->count *= n;
        if (d->count > MAX_STATIC_BYTES)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "variable too large");
    }
    if (!d->align)
        d->align = ptx_type_size(d->type);
}

/* An address in an initialiser word: `f` (a device function), `x`,
 * `generic(x)` (a variable; generic and global addresses are one here),
 * each with an optional `+n`/`-n`. Returns the word, or records a
 * relocation (holder's byte offset) and returns 0 for a variable. */
static uint64_t parse_init_address(ptx_parser *p, const decl *d, uint32_t holder, uint64_t offset)
{
    const ptx_tok *at = p->t;
    bool generic = ptx_tok_is(p->t, "generic") && punct(p->t + 1, '(');
    if (generic)
        p->t += 2;
    const ptx_tok *name = expect_ident(p);
    if (generic)
        expect(p, ')');
    int64_t addend = 0;
    if (punct(p->t, '+') || punct(p->t, '-')) {
        bool neg = accept(p, '-');
        if (!neg)
            p->t++;
        addend = (int64_t)expect_uint(p, 1ull << 40);
        if (neg)
            addend = -addend;
    }
    const ptx_sym *s = ptx_lookup(p, name->s, name->len);
    if (ptx_type_size(d->type) != 8 || ptx_type_float(d->type))
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, at->line,
                 "initialiser of '%.*s': an address in an element narrower than 64 bits",
                 (int)d->name->len, d->name->s);
    if (s && s->kind == SYM_FUNC && !generic && !p->prog->funcs[s->index].is_entry) {
        if (addend)
            ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, at->line,
                     "initialiser of '%.*s': an offset from a function's address",
                     (int)d->name->len, d->name->s);
        p->prog->funcs[s->index].addressed = true;
        return ptx_func_addr(p->prog, s->index);
    }
    if (!s || s->kind != SYM_GLOBAL)
        ptx_fail(p, s ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_PTX, at->line,
                 "initialiser of '%.*s': '%.*s' is %s", (int)d->name->len, d->name->s,
                 (int)(name->len > 40 ? 40 : name->len), name->s,
                 s ? "not a device function or a variable" : "unknown");
    soft_program *g = p->prog;
    if (g->nrelocs >= (1u << 24))
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, at->line, "too many addresses in initialisers");
    ptx_reloc *r = realloc(g->relocs, (g->nrelocs + 1) * sizeof *r);
    if (!r)
        ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, at->line, "out of memory");
    g->relocs = r;
    g->relocs[g->nrelocs++] = (ptx_reloc){ .holder = holder, .target = s->index,
                                           .offset = offset, .addend = addend };
    return 0;
}

/* Parses `= value` or `= {v, ...}` into init (size bytes, zeroed) of
 * global holder. */
static void parse_init(ptx_parser *p, const decl *d, uint32_t holder, uint8_t *init, uint64_t size)
{
    unsigned es = ptx_type_size(d->type);
    uint64_t i = 0;
    int depth = 0;
    do {
        if (accept(p, '{')) {
            depth++;
            continue;
        }
        if (depth > 0 && accept(p, '}')) {
            depth--;
            continue;
        }
        if (p->t->kind == PTX_TOK_IDENT) {
            if ((i + 1) * es > size)
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "too many initialisers");
            uint64_t bits = parse_init_address(p, d, holder, i * es);
            memcpy(init + i * es, &bits, 8);
            i++;
            if (depth == 0)
                break;
            continue;
        }
        bool neg = accept(p, '-');
        if (p->t->kind != PTX_TOK_NUMBER)
            ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line,
                     "initialiser of '%.*s': expected a number or an address",
                     (int)d->name->len, d->name->s);
        uint8_t kind;
        uint64_t bits;
        parse_number(p, p->t, neg, &kind, &bits);
        p->t++;
        if (ptx_type_float(d->type) && kind == OPD_INT) {
            if (d->type == T_F32) {
                float f = (float)(int64_t)bits;
                uint32_t u;
                memcpy(&u, &f, 4);
                bits = u;
            } else if (d->type == T_F64) {
                double f = (double)(int64_t)bits;
                memcpy(&bits, &f, 8);
            }
        } else if (d->type == T_F32 && kind == OPD_F64) {
            double f;
            memcpy(&f, &bits, 8);
            float g = (float)f;
            uint32_t u;
            memcpy(&u, &g, 4);
            bits = u;
        }
        if ((i + 1) * es > size)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "too many initialisers");
        for (unsigned b = 0; b < es; b++)
            init[i * es + b] = (uint8_t)(bits >> (8 * b));
        i++;
        if (depth == 0)
            break;
    } while (accept(p, ',') || depth > 0);
    if (depth != 0)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "unbalanced initialiser");
}

static uint32_t add_shared(ptx_parser *p, const decl *d, uint64_t size)
{
    soft_program *g = p->prog;
    uint32_t align = d->align < 1 ? 1 : d->align;
    uint64_t off = ((uint64_t)g->shared_bytes + align - 1) / align * align;
    if (off + size > MAX_STATIC_BYTES)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, d->name->line, "shared memory too large");
    g->shared_bytes = (uint32_t)(off + size);
    return (uint32_t)off;
}

/* `.global .texref name;`, `.global .surfref name;` (or the old
 * `.tex .u32 name;`) at module scope: a texture or surface reference the
 * driver binds (cuModuleGetTexRef); image instructions name it. */
static void parse_ref(ptx_parser *p, bool surface, bool is_extern)
{
    soft_program *g = p->prog;
    const ptx_tok *type = p->t++;
    if (p->fn)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, type->line, "%.*s inside a function", (int)type->len, type->s);
    if (is_extern)
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, type->line, "external %.*s", (int)type->len, type->s);
    const ptx_tok *name = expect_ident(p);
    check_new_name(p, name);
    if (punct(p->t, '[') || punct(p->t, '='))
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line,
                 "reference '%.*s': arrays of references and initialisers (independent texturing mode)",
                 (int)name->len, name->s);
    if (g->nrefs >= 4096)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "too many texture and surface references");
    ptx_ref *r = realloc(g->refs, (g->nrefs + 1) * sizeof *r);
    if (!r)
        ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, name->line, "out of memory");
    g->refs = r;
    g->refs[g->nrefs] = (ptx_ref){ .name = tok_dup(p, name), .surface = surface };
    ptx_sym *s = add_sym(p, name, SYM_REF);
    s->index = g->nrefs++;
    expect(p, ';');
}

/* .global/.const/.shared/.local variable at module or function scope. */
static void parse_variable(ptx_parser *p, int space, bool is_extern)
{
    soft_program *g = p->prog;
    if (space == SP_GLOBAL && (ptx_tok_is(p->t, ".texref") || ptx_tok_is(p->t, ".surfref"))) {
        parse_ref(p, ptx_tok_is(p->t, ".surfref"), is_extern);
        return;
    }
    decl d;
    parse_decl(p, &d);
    uint64_t size = d.count * ptx_type_size(d.type);
    check_new_name(p, d.name);
    if (space == SP_SHARED) {
        ptx_sym *s = add_sym(p, d.name, SYM_SHARED);
        if (d.unsized || is_extern) {
            s->kind = SYM_DYNSHARED;
        } else {
            s->offset = add_shared(p, &d, size);
            s->size = (uint32_t)size;
            p->shvars = grow(p, p->shvars, &p->capshvars, p->nshvars + 1, sizeof *p->shvars);
            p->shvars[p->nshvars].size = (uint32_t)size;
            p->shvars[p->nshvars].align = d.align ? d.align : 1;
            s->index = p->nshvars++;
        }
        if (ptx_tok_is(p->t, "=") || punct(p->t, '='))
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "shared memory has no initialiser");
    } else if (space == SP_LOCAL) {
        if (!p->fn)
            ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, d.name->line, "module-scope .local");
        if (d.unsized)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, d.name->line, "unsized .local");
        ptx_sym *s = add_sym(p, d.name, SYM_LOCAL);
        uint32_t align = d.align < 1 ? 1 : d.align;
        uint64_t off = ((uint64_t)p->fn->depot + align - 1) / align * align;
        if (off + size > (1u << 20))
            ptx_fail(p, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, d.name->line, "local memory too large");
        p->fn->depot = (uint32_t)(off + size);
        if (align > p->fn->depot_align)
            p->fn->depot_align = align;
        s->offset = off;
        s->size = (uint32_t)size;
    } else {
        if (d.unsized && !is_extern)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, d.name->line, "unsized variable");
        if (is_extern)
            ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, d.name->line,
                     "external variable '%.*s'", (int)d.name->len, d.name->s);
        if (g->nglobals >= 65536)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, d.name->line, "too many variables");
        ptx_global *gl = realloc(g->globals, (g->nglobals + 1) * sizeof *gl);
        if (!gl)
            ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, d.name->line, "out of memory");
        g->globals = gl;
        gl = &g->globals[g->nglobals];
        *gl = (ptx_global){ 0 };
        gl->name = tok_dup(p, d.name);
        g->nglobals++;
        gl->info.name = gl->name;
        gl->info.size = size;
        gl->info.align = d.align;
        gl->info.managed = d.managed;
        gl->info.space = space == SP_CONST ? SOFT_SPACE_CONST : SOFT_SPACE_GLOBAL;
        gl->reg = ptx_new_reg(p, T_B64);
        if (accept(p, '=')) {
            gl->init = xcalloc(p, size, 1);
            parse_init(p, &d, g->nglobals - 1, gl->init, size);
            gl->info.init = gl->init;
        }
        ptx_sym *s = add_sym(p, d.name, SYM_GLOBAL);
        s->index = g->nglobals - 1;
        s->size = (uint32_t)size;
    }
    expect(p, ';');
}

/* `.reg .type name, name<N>, ...;` */
static void parse_reg(ptx_parser *p)
{
    if (ptx_tok_is(p->t, ".v2") || ptx_tok_is(p->t, ".v4"))
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line, "vector registers");
    if (p->t->kind != PTX_TOK_IDENT)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "expected a register type");
    ptx_type t = ptx_type_from(p->t->s, p->t->len);
    if (t == T_NONE)
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line, "register type '%.*s'",
                 (int)p->t->len, p->t->s);
    p->t++;
    do {
        const ptx_tok *name = expect_ident(p);
        check_new_name(p, name);
        if (accept(p, '<')) {
            uint64_t n = expect_uint(p, 1u << 20);
            expect(p, '>');
            ptx_sym *s = add_sym(p, name, SYM_REGRANGE);
            s->type = (uint8_t)t;
            s->count = (uint32_t)n;
            s->index = p->prog->nregs;
            for (uint64_t i = 0; i < n; i++)
                ptx_new_reg(p, t);
            s = NULL;
        } else {
            uint32_t r = ptx_new_reg(p, t);
            ptx_sym *s = add_sym(p, name, SYM_REG);
            s->type = (uint8_t)t;
            s->index = r;
        }
    } while (accept(p, ','));
    expect(p, ';');
}

/* `.param [.align N] .type name[N]` in a parameter list or body. Returns
 * the symbol; size and align through the pointers. */
static ptx_sym *parse_param_decl(ptx_parser *p, ptx_sym_kind kind, uint32_t *size,
                                 uint32_t *align)
{
    if (!ptx_tok_is(p->t, ".param") && !ptx_tok_is(p->t, ".reg"))
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "expected .param");
    if (ptx_tok_is(p->t, ".reg"))
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line, ".reg parameters");
    p->t++;
    decl d;
    parse_decl(p, &d);
    if (d.unsized)
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, d.name->line, "unsized parameter");
    /* A kernel's parameters take 32764 bytes in all since CUDA 12.1 (one
     * by-value struct may take them all); a call's take a param slot. */
    uint64_t sz = d.count * ptx_type_size(d.type);
    if (sz > (kind == SYM_KPARAM ? 32764u : 1u << 16))
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, d.name->line, "parameter too large");
    *size = (uint32_t)sz;
    *align = d.align ? d.align : 1;
    check_new_name(p, d.name);
    ptx_sym *s = add_sym(p, d.name, kind);
    s->size = (uint32_t)sz;
    return s;
}

/* Skips to the end of the line of token t (for .loc, .file and friends). */
static void skip_line(ptx_parser *p)
{
    uint32_t line = p->t->line;
    while (p->t->kind != PTX_TOK_END && p->t->line == line)
        p->t++;
}

static void skip_braces(ptx_parser *p)
{
    expect(p, '{');
    int depth = 1;
    while (depth > 0) {
        if (p->t->kind == PTX_TOK_END)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "unterminated section");
        if (punct(p->t, '{'))
            depth++;
        else if (punct(p->t, '}'))
            depth--;
        p->t++;
    }
}

/* ---- operands ---- */

static void parse_scalar(ptx_parser *p, ptx_opd *o)
{
    bool neg = false;
    if (accept(p, '!'))
        o->neg = true;
    if (accept(p, '-'))
        neg = true;
    const ptx_tok *t = p->t;
    if (t->kind == PTX_TOK_NUMBER) {
        parse_number(p, t, neg, &o->kind, &o->bits);
        p->t++;
        return;
    }
    if (t->kind != PTX_TOK_IDENT || neg)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "bad operand");
    p->t++;
    if (t->len == 1 && t->s[0] == '_') {
        o->kind = OPD_SINK;
        return;
    }
    const ptx_sym *s = ptx_lookup(p, t->s, t->len);
    if (s && (s->kind == SYM_REG || s->kind == SYM_REGRANGE)) {
        o->kind = OPD_REG;
        o->reg = sym_reg(s, t->s, t->len);
        o->sym = s;
        if (accept(p, '|')) {
            const ptx_tok *t2 = expect_ident(p);
            const ptx_sym *s2 = ptx_lookup(p, t2->s, t2->len);
            if (t2->len == 1 && t2->s[0] == '_')
                o->reg2 = SR_SINK;
            else if (!s2 || (s2->kind != SYM_REG && s2->kind != SYM_REGRANGE))
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, t2->line, "unknown register '%.*s'",
                         (int)t2->len, t2->s);
            else
                o->reg2 = sym_reg(s2, t2->s, t2->len);
            o->has_reg2 = true;
        }
        return;
    }
    if (t->s[0] == '%' && !s)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "unknown register '%.*s'",
                 (int)(t->len > 40 ? 40 : t->len), t->s);
    /* The ISA's one predefined constant: the warp size. */
    if (!s && t->len == 7 && memcmp(t->s, "WARP_SZ", 7) == 0) {
        o->kind = OPD_INT;
        o->bits = PTX_WARP;
        return;
    }
    o->kind = OPD_SYM;
    o->name = t;
    o->sym = s;
}

/* The coordinates of an image access: a vector, or one scalar, into o->v. */
static void parse_coords(ptx_parser *p, ptx_opd *o)
{
    bool vec = accept(p, '{');
    do {
        if (o->n >= 5)   /* images take up to 4, tensor maps 5 */
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "too many coordinates");
        ptx_opd e = { 0 };
        parse_scalar(p, &e);
        if (e.kind == OPD_SYM || e.kind == OPD_SINK || e.neg || e.has_reg2)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad coordinate");
        o->v[o->n++] = (ptx_velem){ .kind = e.kind, .reg = e.reg, .bits = e.bits };
    } while (vec && accept(p, ','));
    if (vec)
        expect(p, '}');
}

static void parse_operand(ptx_parser *p, ptx_opd *o)
{
    *o = (ptx_opd){ 0 };
    if (accept(p, '[')) {
        o->kind = OPD_ADDR;
        const ptx_tok *t = p->t;
        if (t->kind == PTX_TOK_IDENT) {
            ptx_opd base;
            parse_scalar(p, &base);
            if (base.kind == OPD_REG) {
                o->addr_reg = true;
                o->reg = base.reg;
            } else if (base.kind == OPD_SYM) {
                o->addr_sym = true;
                o->name = base.name;
                o->sym = base.sym;
            } else {
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "bad address");
            }
            if (accept(p, '+')) {
                bool neg = accept(p, '-');
                uint8_t kind;
                uint64_t v;
                if (p->t->kind != PTX_TOK_NUMBER)
                    ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad address offset");
                parse_number(p, p->t, neg, &kind, &v);
                if (kind != OPD_INT)
                    ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad address offset");
                p->t++;
                o->off = (int64_t)v;
            } else if (accept(p, '-')) {
                uint8_t kind;
                uint64_t v;
                if (p->t->kind != PTX_TOK_NUMBER)
                    ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad address offset");
                parse_number(p, p->t, true, &kind, &v);
                if (kind != OPD_INT)
                    ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad address offset");
                p->t++;
                o->off = (int64_t)v;
            }
        } else if (t->kind == PTX_TOK_NUMBER) {
            uint8_t kind;
            uint64_t v;
            parse_number(p, t, false, &kind, &v);
            if (kind != OPD_INT)
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "bad address");
            p->t++;
            o->off = (int64_t)v;
        } else {
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "bad address");
        }
        if (accept(p, ','))   /* [handle, {coordinates}] of tex, tld4, suld, sust */
            parse_coords(p, o);
        expect(p, ']');
        return;
    }
    if (accept(p, '{')) {
        o->kind = OPD_VEC;
        do {
            if (o->n >= PTX_MAX_VEC)
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "vector too long");
            ptx_opd e = { 0 };
            parse_scalar(p, &e);
            if (e.kind == OPD_SYM || e.neg || e.has_reg2)
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "bad vector element");
            o->v[o->n++] = (ptx_velem){ .kind = e.kind, .reg = e.reg, .bits = e.bits };
        } while (accept(p, ','));
        expect(p, '}');
        return;
    }
    parse_scalar(p, o);
}

/* One parameter of a call prototype: `.param [.align N] .type _[[N]]`;
 * returns its size in bytes. */
static uint32_t parse_proto_param(ptx_parser *p)
{
    const ptx_tok *at = p->t;
    if (!ptx_tok_is(p->t, ".param"))
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, at->line,
                 "call prototype: parameters other than .param");
    p->t++;
    if (ptx_tok_is(p->t, ".align")) {
        p->t++;
        expect_uint(p, 1u << 16);
    }
    ptx_type t = p->t->kind == PTX_TOK_IDENT ? ptx_type_from(p->t->s, p->t->len) : T_NONE;
    if (t == T_NONE || t == T_PRED)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "call prototype: expected a type");
    p->t++;
    if (ptx_tok_is(p->t, ".ptr")) {   /* .ptr[.space][.align N]: a pointer hint */
        p->t++;
        while (p->t->kind == PTX_TOK_IDENT && p->t->s[0] == '.' && !ptx_tok_is(p->t, ".param"))
            if (ptx_tok_is(p->t++, ".align"))
                expect_uint(p, 1u << 16);
    }
    expect_ident(p);
    uint64_t n = 1;
    if (accept(p, '[')) {
        n = expect_uint(p, MAX_STATIC_BYTES);
        expect(p, ']');
    }
    uint64_t size = n * ptx_type_size(t);
    if (size == 0 || size > (1u << 16))
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, at->line, "call prototype: bad parameter size");
    return (uint32_t)size;
}

/* `name: .callprototype [(ret)] _ [(args)];` (the label and directive
 * already taken). */
static void parse_proto(ptx_parser *p, const ptx_tok *name)
{
    for (uint32_t i = 0; i < p->nprotos; i++)
        if (p->protos[i].name->len == name->len &&
            memcmp(p->protos[i].name->s, name->s, name->len) == 0)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "prototype '%.*s' defined twice",
                     (int)name->len, name->s);
    ptx_proto pr = { .name = name };
    if (accept(p, '(')) {
        if (!accept(p, ')')) {
            do {
                if (pr.nrets == 8)
                    ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, name->line, "call prototype: too many results");
                pr.ret_size[pr.nrets++] = parse_proto_param(p);
            } while (accept(p, ','));
            expect(p, ')');
        }
    }
    const ptx_tok *u = expect_ident(p);
    if (u->len != 1 || u->s[0] != '_')
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, u->line, "call prototype: expected '_'");
    if (accept(p, '(') && !accept(p, ')')) {
        do {
            if (pr.nargs == 32)
                ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, name->line, "call prototype: too many arguments");
            pr.arg_size[pr.nargs++] = parse_proto_param(p);
        } while (accept(p, ','));
        expect(p, ')');
    }
    expect(p, ';');
    p->protos = grow(p, p->protos, &p->capprotos, p->nprotos + 1, sizeof *p->protos);
    p->protos[p->nprotos++] = pr;
}

/* call[.uni] [(ret, ...),] func[, (arg, ...)];
 * call [(ret, ...),] %reg, [(arg, ...),] prototype; */
static void parse_call(ptx_parser *p, const ptx_tok *op, int32_t guard, bool gneg)
{
    const ptx_sym *rets[8], *args[32];
    unsigned nrets = 0, nargs = 0;
    if (accept(p, '(')) {
        do {
            const ptx_tok *t = expect_ident(p);
            const ptx_sym *s = ptx_lookup(p, t->s, t->len);
            if (!s || s->kind != SYM_PARAM)
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "call: '%.*s' is not a parameter",
                         (int)t->len, t->s);
            if (nrets == 8)
                ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, t->line, "call: too many results");
            rets[nrets++] = s;
        } while (accept(p, ','));
        expect(p, ')');
        expect(p, ',');
    }
    const ptx_tok *callee = expect_ident(p);
    const ptx_tok *pname = NULL;
    bool has_args = false;
    if (accept(p, ',')) {
        has_args = accept(p, '(');
        if (!has_args)
            pname = expect_ident(p);
    }
    if (has_args) {
        if (!accept(p, ')')) {
            do {
                const ptx_tok *t = expect_ident(p);
                const ptx_sym *s = ptx_lookup(p, t->s, t->len);
                if (!s || s->kind != SYM_PARAM)
                    ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, t->line,
                             "call: argument '%.*s' is not a parameter", (int)t->len, t->s);
                if (nargs == 32)
                    ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, t->line, "call: too many arguments");
                args[nargs++] = s;
            } while (accept(p, ','));
            expect(p, ')');
        }
        if (!pname && accept(p, ','))
            pname = expect_ident(p);
    }
    expect(p, ';');
    const ptx_sym *s = ptx_lookup(p, callee->s, callee->len);
    if (pname && s && (s->kind == SYM_REG || s->kind == SYM_REGRANGE)) {
        const ptx_proto *pr = NULL;
        for (uint32_t i = 0; i < p->nprotos && !pr; i++)
            if (p->protos[i].name->len == pname->len &&
                memcmp(p->protos[i].name->s, pname->s, pname->len) == 0)
                pr = &p->protos[i];
        if (!pr)   /* a .calltargets list, or nothing declared */
            ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, pname->line,
                     "indirect call through '%.*s', which is not a call prototype",
                     (int)(pname->len > 40 ? 40 : pname->len), pname->s);
        ptx_decode_icall(p, op, guard, gneg, sym_reg(s, callee->s, callee->len), pr, rets,
                         nrets, args, nargs);
        return;
    }
    if (pname)
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, pname->line, "call with a prototype or jump table");
    ptx_decode_call(p, op, guard, gneg, callee, rets, nrets, args, nargs);
}

static void parse_instruction(ptx_parser *p)
{
    int32_t guard = -1;
    bool gneg = false;
    if (accept(p, '@')) {
        if (accept(p, '!'))
            gneg = true;
        const ptx_tok *t = expect_ident(p);
        const ptx_sym *s = ptx_lookup(p, t->s, t->len);
        if (!s || (s->kind != SYM_REG && s->kind != SYM_REGRANGE) || s->type != T_PRED)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "guard '%.*s' is not a predicate",
                     (int)(t->len > 40 ? 40 : t->len), t->s);
        guard = (int32_t)sym_reg(s, t->s, t->len);
    }
    const ptx_tok *op = expect_ident(p);
    if (op->len >= 4 && memcmp(op->s, "call", 4) == 0 && (op->len == 4 || op->s[4] == '.')) {
        parse_call(p, op, guard, gneg);
        return;
    }
    if (!ptx_known_opcode(op))
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, op->line, "instruction '%.*s' is not supported",
                 (int)(op->len > 60 ? 60 : op->len), op->s);
    ptx_opd opds[PTX_MAX_OPDS];
    unsigned n = 0;
    if (!punct(p->t, ';')) {
        do {
            if (n == PTX_MAX_OPDS)
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, op->line, "too many operands");
            parse_operand(p, &opds[n++]);
        } while (accept(p, ','));
    }
    expect(p, ';');
    ptx_decode(p, op, guard, gneg, opds, n);
}

/* Parses one instruction of a function body. One the engine does not run
 * refuses that function instead of the module (its first reason kept), so
 * that the module's other kernels load and run; the statement is skipped. */
static void parse_or_refuse(ptx_parser *p)
{
    const ptx_tok *const start = p->t;
    jmp_buf outer;
    memcpy(outer, p->fail, sizeof outer);
    if (setjmp(p->fail) == 0) {
        parse_instruction(p);
        memcpy(p->fail, outer, sizeof outer);
        return;
    }
    memcpy(p->fail, outer, sizeof outer);
    if (p->err != CUDA_ERROR_NOT_SUPPORTED)
        longjmp(p->fail, 1);
    ptx_func *fn = &p->prog->funcs[p->fn_index];
    if (!fn->refusal && !(fn->refusal = strdup(p->msg)))
        ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, start->line, "out of memory");
    p->msg[0] = 0;
    p->err = CUDA_SUCCESS;
    for (p->t = start; !punct(p->t, ';'); p->t++)
        if (p->t->kind == PTX_TOK_END)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, start->line, "unterminated statement");
    p->t++;
}

/* ---- functions ---- */

static void add_label(ptx_parser *p, const ptx_tok *name)
{
    for (uint32_t i = 0; i < p->nlabels; i++)
        if (p->labels[i].name->len == name->len &&
            memcmp(p->labels[i].name->s, name->s, name->len) == 0)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "label '%.*s' defined twice",
                     (int)name->len, name->s);
    p->labels = grow(p, p->labels, &p->caplabels, p->nlabels + 1, sizeof *p->labels);
    p->labels[p->nlabels++] = (ptx_label){ .name = name, .pc = p->prog->ncode };
}

static void parse_body(ptx_parser *p)
{
    ptx_func *fn = p->fn;
    soft_program *g = p->prog;
    unsigned depth = 0;
    expect(p, '{');
    push_scope(p);
    for (;;) {
        const ptx_tok *t = p->t;
        fn = &g->funcs[p->fn_index];   /* funcs may move while parsing */
        p->fn = fn;
        if (t->kind == PTX_TOK_END)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "unterminated function body");
        if (punct(t, '{')) {
            p->t++;
            push_scope(p);
            depth++;
            continue;
        }
        if (punct(t, '}')) {
            p->t++;
            pop_scope(p);
            if (depth == 0)
                break;
            depth--;
            continue;
        }
        if (t->kind == PTX_TOK_IDENT && punct(t + 1, ':') && ptx_tok_is(t + 2, ".callprototype")) {
            p->t += 3;
            parse_proto(p, t);
            continue;
        }
        if (t->kind == PTX_TOK_IDENT && punct(t + 1, ':')) {
            add_label(p, t);
            p->t += 2;
            continue;
        }
        if (ptx_tok_is(t, ".reg")) {
            p->t++;
            parse_reg(p);
        } else if (ptx_tok_is(t, ".local")) {
            p->t++;
            parse_variable(p, SP_LOCAL, false);
        } else if (ptx_tok_is(t, ".shared")) {
            p->t++;
            parse_variable(p, SP_SHARED, false);
        } else if (ptx_tok_is(t, ".param")) {
            uint32_t size, align;
            ptx_sym *s = parse_param_decl(p, SYM_PARAM, &size, &align);
            s->offset = ptx_param_slot(p, size, align);
            expect(p, ';');
        } else if (ptx_tok_is(t, ".loc") || ptx_tok_is(t, ".file")) {
            skip_line(p);
        } else if (ptx_tok_is(t, ".pragma")) {
            p->t++;
            while (p->t->kind == PTX_TOK_STRING || punct(p->t, ','))
                p->t++;
            expect(p, ';');
        } else if (t->kind == PTX_TOK_IDENT && t->s[0] == '.') {
            ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, t->line, "directive '%.*s' in a function body",
                     (int)(t->len > 40 ? 40 : t->len), t->s);
        } else {
            parse_or_refuse(p);
        }
    }
    fn = &g->funcs[p->fn_index];
    ptx_insn end = { .op = fn->is_entry ? OP_EXIT : OP_RET, .guard = -1, .line = p->t[-1].line };
    ptx_emit(p, &end);
    for (uint32_t i = 0; i < p->nfixups; i++) {
        const ptx_tok *l = p->fixups[i].label;
        uint32_t k;
        for (k = 0; k < p->nlabels; k++)
            if (p->labels[k].name->len == l->len && memcmp(p->labels[k].name->s, l->s, l->len) == 0)
                break;
        if (k == p->nlabels)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, l->line, "unknown label '%.*s'",
                     (int)(l->len > 40 ? 40 : l->len), l->s);
        g->code[p->fixups[i].pc].imm = p->labels[k].pc;
    }
    p->nfixups = 0;
    p->nlabels = 0;
    p->nprotos = 0;
}

static ptx_func *new_func(ptx_parser *p, const ptx_tok *name, bool entry)
{
    soft_program *g = p->prog;
    if (g->nfuncs >= 65536)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "too many functions");
    ptx_func *f = realloc(g->funcs, (g->nfuncs + 1) * sizeof *f);
    if (!f)
        ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, name->line, "out of memory");
    g->funcs = f;
    f = &g->funcs[g->nfuncs];
    *f = (ptx_func){ 0 };
    f->name = tok_dup(p, name);
    f->is_entry = entry;
    f->depot_align = 1;
    ptx_sym *s = add_sym(p, name, SYM_FUNC);
    s->index = g->nfuncs;
    g->nfuncs++;
    return f;
}

/* .entry name (params) [perf directives] { body } */
static void parse_entry(ptx_parser *p)
{
    soft_program *g = p->prog;
    const ptx_tok *name = expect_ident(p);
    if (ptx_lookup(p, name->s, name->len))
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "'%.*s' declared twice",
                 (int)name->len, name->s);
    ptx_func *fn = new_func(p, name, true);
    uint32_t index = g->nfuncs - 1;
    fn->info.max_threads = 1024;
    push_scope(p);   /* parameters */
    uint32_t off = 0, n = 0, cap = 0;
    soft_param *params = NULL;
    if (accept(p, '(')) {
        if (!accept(p, ')')) {
            do {
                uint32_t size, align;
                ptx_sym *s = parse_param_decl(p, SYM_KPARAM, &size, &align);
                off = (off + align - 1) / align * align;
                s->offset = off;
                params = grow(p, params, &cap, n + 1, sizeof *params);
                g->funcs[index].kparams = params;   /* owned by the program at once */
                params[n++] = (soft_param){ .offset = off, .size = size, .align = align };
                off += size;
                if (off > 32764)
                    ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "kernel parameters too large");
            } while (accept(p, ','));
            expect(p, ')');
        }
    }
    fn = &g->funcs[index];
    fn->kparams = params;
    fn->info.params = params;
    fn->info.param_count = n;
    fn->info.param_bytes = off;
    for (;;) {
        if (ptx_tok_is(p->t, ".maxntid") || ptx_tok_is(p->t, ".reqntid")) {
            p->t++;
            uint64_t prod = 1;
            do {
                prod *= expect_uint(p, 1024);
            } while (accept(p, ','));
            if (prod >= 1 && prod < fn->info.max_threads)
                fn->info.max_threads = (uint32_t)prod;
        } else if (ptx_tok_is(p->t, ".minnctapersm") || ptx_tok_is(p->t, ".maxnreg") ||
                   ptx_tok_is(p->t, ".maxnctapersm") || ptx_tok_is(p->t, ".noreturn")) {
            p->t++;
            while (p->t->kind == PTX_TOK_NUMBER || punct(p->t, ','))
                p->t++;
        } else if (ptx_tok_is(p->t, ".pragma")) {
            p->t++;
            while (p->t->kind == PTX_TOK_STRING || punct(p->t, ','))
                p->t++;
            expect(p, ';');
        } else {
            break;
        }
    }
    if (accept(p, ';')) {
        pop_scope(p);
        ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, name->line, "entry declared without a body");
    }
    p->fn = fn;
    p->fn_index = index;
    fn->pc = g->ncode;
    fn->reg_first = g->nregs;
    parse_body(p);
    fn = &g->funcs[index];
    fn->defined = true;
    fn->end = g->ncode;
    fn->reg_count = g->nregs - fn->reg_first;
    pop_scope(p);
    p->fn = NULL;
}

/* .func [(.param ret)] name [(.param a, ...)] (; | { body }) */
static void parse_func(ptx_parser *p, bool is_extern)
{
    soft_program *g = p->prog;
    uint32_t rsize[8], ralign[8], psize[64], palign[64];
    unsigned nr = 0, np = 0;
    const ptx_tok *save = p->t;
    push_scope(p);   /* scratch scope for the signature */
    if (accept(p, '(')) {
        do {
            if (nr == 8)
                ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line, "too many results");
            parse_param_decl(p, SYM_PARAM, &rsize[nr], &ralign[nr]);
            nr++;
        } while (accept(p, ','));
        expect(p, ')');
    }
    const ptx_tok *name = expect_ident(p);
    if (accept(p, '(')) {
        if (!accept(p, ')')) {
            do {
                if (np == 64)
                    ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, p->t->line, "too many parameters");
                parse_param_decl(p, SYM_PARAM, &psize[np], &palign[np]);
                np++;
            } while (accept(p, ','));
            expect(p, ')');
        }
    }
    pop_scope(p);
    while (ptx_tok_is(p->t, ".noreturn") || ptx_tok_is(p->t, ".pragma")) {
        if (ptx_tok_is(p->t, ".pragma")) {
            p->t++;
            while (p->t->kind == PTX_TOK_STRING || punct(p->t, ','))
                p->t++;
            expect(p, ';');
        } else {
            p->t++;
        }
    }
    const ptx_sym *prev = ptx_lookup(p, name->s, name->len);
    ptx_func *fn;
    uint32_t index;
    if (prev) {
        if (prev->kind != SYM_FUNC)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "'%.*s' declared twice",
                     (int)name->len, name->s);
        index = prev->index;
        fn = &g->funcs[index];
        if (fn->is_entry || fn->nparams != np || fn->nrets != nr)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "'%.*s' redeclared differently",
                     (int)name->len, name->s);
    } else {
        fn = new_func(p, name, false);
        index = g->nfuncs - 1;
        fn->is_extern = is_extern;
        fn->nparams = np;
        fn->nrets = nr;
        fn->param_off = xcalloc(p, np, sizeof(uint32_t));
        fn->param_size = xcalloc(p, np, sizeof(uint32_t));
        fn->ret_off = xcalloc(p, nr, sizeof(uint32_t));
        fn->ret_size = xcalloc(p, nr, sizeof(uint32_t));
        fn = &g->funcs[index];
        for (unsigned i = 0; i < nr; i++) {
            fn->ret_off[i] = ptx_param_slot(p, rsize[i], ralign[i]);
            fn->ret_size[i] = rsize[i];
        }
        for (unsigned i = 0; i < np; i++) {
            fn->param_off[i] = ptx_param_slot(p, psize[i], palign[i]);
            fn->param_size[i] = psize[i];
        }
    }
    if (accept(p, ';'))
        return;
    if (fn->defined)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, name->line, "'%.*s' defined twice",
                 (int)name->len, name->s);
    /* Rebind the signature's names to the slots, in a scope for the body. */
    const ptx_tok *body = p->t;
    p->t = save;
    push_scope(p);
    unsigned ri = 0, pi = 0;
    if (accept(p, '(')) {
        do {
            uint32_t size, align;
            ptx_sym *s = parse_param_decl(p, SYM_PARAM, &size, &align);
            s->offset = fn->ret_off[ri++];
        } while (accept(p, ','));
        expect(p, ')');
    }
    p->t++;   /* name */
    if (accept(p, '(')) {
        if (!accept(p, ')')) {
            do {
                uint32_t size, align;
                ptx_sym *s = parse_param_decl(p, SYM_PARAM, &size, &align);
                s->offset = fn->param_off[pi++];
            } while (accept(p, ','));
            expect(p, ')');
        }
    }
    p->t = body;
    p->fn = fn;
    p->fn_index = index;
    fn->pc = g->ncode;
    fn->reg_first = g->nregs;
    parse_body(p);
    fn = &g->funcs[index];
    fn->defined = true;
    fn->end = g->ncode;
    fn->reg_count = g->nregs - fn->reg_first;
    pop_scope(p);
    p->fn = NULL;
}

static void add_special(ptx_parser *p, const char *name, uint32_t reg, ptx_type type)
{
    ptx_tok t = { .kind = PTX_TOK_IDENT, .s = name, .len = (uint32_t)strlen(name) };
    ptx_sym *s = add_sym(p, &t, SYM_REG);
    s->index = reg;
    s->type = (uint8_t)type;
}

static void add_specials(ptx_parser *p)
{
    static const struct { const char *name; uint32_t reg; ptx_type type; } sr[] = {
        { "%tid.x", SR_TID_X, T_U32 }, { "%tid.y", SR_TID_Y, T_U32 },
        { "%tid.z", SR_TID_Z, T_U32 }, { "%ntid.x", SR_NTID_X, T_U32 },
        { "%ntid.y", SR_NTID_Y, T_U32 }, { "%ntid.z", SR_NTID_Z, T_U32 },
        { "%ctaid.x", SR_CTAID_X, T_U32 }, { "%ctaid.y", SR_CTAID_Y, T_U32 },
        { "%ctaid.z", SR_CTAID_Z, T_U32 }, { "%nctaid.x", SR_NCTAID_X, T_U32 },
        { "%nctaid.y", SR_NCTAID_Y, T_U32 }, { "%nctaid.z", SR_NCTAID_Z, T_U32 },
        { "%laneid", SR_LANEID, T_U32 }, { "%warpid", SR_WARPID, T_U32 },
        { "%nwarpid", SR_NWARPID, T_U32 }, { "%smid", SR_SMID, T_U32 },
        { "%nsmid", SR_NSMID, T_U32 }, { "%gridid", SR_GRIDID, T_U64 },
        { "%lanemask_eq", SR_LANEMASK_EQ, T_U32 }, { "%lanemask_le", SR_LANEMASK_LE, T_U32 },
        { "%lanemask_lt", SR_LANEMASK_LT, T_U32 }, { "%lanemask_ge", SR_LANEMASK_GE, T_U32 },
        { "%lanemask_gt", SR_LANEMASK_GT, T_U32 },
        { "%dynamic_smem_size", SR_DYN_SMEM, T_U32 },
        { "%total_smem_size", SR_TOTAL_SMEM, T_U32 },
        { "%clock", SR_CLOCK, T_U32 }, { "%clock64", SR_CLOCK64, T_U64 },
        { "%clock_hi", SR_CLOCK_HI, T_U32 },
        /* The global timer counts nanoseconds, as the clock here does. */
        { "%globaltimer", SR_CLOCK64, T_U64 }, { "%globaltimer_lo", SR_CLOCK, T_U32 },
        { "%globaltimer_hi", SR_CLOCK_HI, T_U32 },
        /* No shared memory is reserved for the driver: the reserved region is
         * empty and lies past the CTA's own. */
        { "%aggr_smem_size", SR_TOTAL_SMEM, T_U32 },
        { "%reserved_smem_offset_begin", SR_TOTAL_SMEM, T_U32 },
        { "%reserved_smem_offset_end", SR_TOTAL_SMEM, T_U32 },
        { "%reserved_smem_offset_cap", SR_ZERO, T_U32 },
        { "%reserved_smem_offset_0", SR_TOTAL_SMEM, T_U32 },
        { "%reserved_smem_offset_1", SR_TOTAL_SMEM, T_U32 },
        /* Every CTA is a cluster of one, launched without cluster dimensions. */
        { "%clusterid.x", SR_CTAID_X, T_U32 }, { "%clusterid.y", SR_CTAID_Y, T_U32 },
        { "%clusterid.z", SR_CTAID_Z, T_U32 }, { "%nclusterid.x", SR_NCTAID_X, T_U32 },
        { "%nclusterid.y", SR_NCTAID_Y, T_U32 }, { "%nclusterid.z", SR_NCTAID_Z, T_U32 },
        { "%cluster_ctaid.x", SR_ZERO, T_U32 }, { "%cluster_ctaid.y", SR_ZERO, T_U32 },
        { "%cluster_ctaid.z", SR_ZERO, T_U32 }, { "%cluster_nctaid.x", SR_ONE, T_U32 },
        { "%cluster_nctaid.y", SR_ONE, T_U32 }, { "%cluster_nctaid.z", SR_ONE, T_U32 },
        { "%cluster_ctarank", SR_ZERO, T_U32 }, { "%cluster_nctarank", SR_ONE, T_U32 },
        { "%is_explicit_cluster", SR_ZERO, T_PRED },
        /* No graph launches from the device. */
        { "%current_graph_exec", SR_ZERO, T_U64 },
        { "%envreg1", SR_ENVREG1, T_U32 }, { "%envreg2", SR_ENVREG2, T_U32 },
    };
    for (uint32_t i = 0; i < SR_COUNT; i++)
        ptx_new_reg(p, T_B64);
    for (size_t i = 0; i < sizeof sr / sizeof sr[0]; i++)
        add_special(p, sr[i].name, sr[i].reg, sr[i].type);
    /* The other environment registers hold nothing the driver sets here. */
    static const char *const envregs[] = {
        "%envreg0", "%envreg3", "%envreg4", "%envreg5", "%envreg6", "%envreg7", "%envreg8", "%envreg9",
        "%envreg10", "%envreg11", "%envreg12", "%envreg13", "%envreg14", "%envreg15", "%envreg16",
        "%envreg17", "%envreg18", "%envreg19", "%envreg20", "%envreg21", "%envreg22", "%envreg23",
        "%envreg24", "%envreg25", "%envreg26", "%envreg27", "%envreg28", "%envreg29", "%envreg30",
        "%envreg31",
    };
    for (size_t i = 0; i < sizeof envregs / sizeof envregs[0]; i++)
        add_special(p, envregs[i], SR_ZERO, T_U32);
    /* Performance monitor counters: nothing is counted. */
    static const char *const pms[] = {
        "%pm0", "%pm1", "%pm2", "%pm3", "%pm4", "%pm5", "%pm6", "%pm7",
        "%pm0_64", "%pm1_64", "%pm2_64", "%pm3_64", "%pm4_64", "%pm5_64", "%pm6_64", "%pm7_64",
    };
    for (size_t i = 0; i < sizeof pms / sizeof pms[0]; i++)
        add_special(p, pms[i], SR_ZERO, i < 8 ? T_U32 : T_U64);
}

static void parse_module(ptx_parser *p)
{
    bool seen_version = false;
    add_specials(p);
    push_scope(p);   /* module */
    while (p->t->kind != PTX_TOK_END) {
        const ptx_tok *t = p->t;
        if (ptx_tok_is(t, ".version")) {
            p->t++;
            if (p->t->kind != PTX_TOK_NUMBER)
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "bad .version");
            p->t++;
            seen_version = true;
            continue;
        }
        if (!seen_version)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, t->line, "expected .version first");
        if (ptx_tok_is(t, ".target")) {
            p->t++;
            do {
                const ptx_tok *a = expect_ident(p);
                if (a->len > 3 && memcmp(a->s, "sm_", 3) == 0) {   /* sm_120a: 120 */
                    uint32_t sm = 0;
                    for (size_t k = 3; k < a->len && k < 8 && a->s[k] >= '0' && a->s[k] <= '9'; k++)
                        sm = sm * 10 + (uint32_t)(a->s[k] - '0');
                    p->prog->target = sm;
                }
                if (a->len == 19 && memcmp(a->s, "texmode_independent", 19) == 0)
                    ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, a->line,
                             "texmode_independent (separate samplers): only the unified texturing mode");
                if (a->len >= 7 && memcmp(a->s, "texmode", 7) == 0)
                    continue;
            } while (accept(p, ','));
        } else if (ptx_tok_is(t, ".address_size")) {
            p->t++;
            if (expect_uint(p, 64) != 64)
                ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, t->line, "32-bit addresses");
        } else if (ptx_tok_is(t, ".file") || ptx_tok_is(t, ".loc")) {
            skip_line(p);
        } else if (ptx_tok_is(t, ".section")) {
            p->t++;
            expect_ident(p);
            skip_braces(p);
        } else if (ptx_tok_is(t, ".pragma")) {
            p->t++;
            while (p->t->kind == PTX_TOK_STRING || punct(p->t, ','))
                p->t++;
            expect(p, ';');
        } else {
            bool is_extern = false;
            while (ptx_tok_is(p->t, ".visible") || ptx_tok_is(p->t, ".extern") ||
                   ptx_tok_is(p->t, ".weak") || ptx_tok_is(p->t, ".common")) {
                if (ptx_tok_is(p->t, ".extern"))
                    is_extern = true;
                p->t++;
            }
            const ptx_tok *d = p->t;
            if (ptx_tok_is(d, ".entry")) {
                p->t++;
                parse_entry(p);
            } else if (ptx_tok_is(d, ".func")) {
                p->t++;
                parse_func(p, is_extern);
            } else if (ptx_tok_is(d, ".global")) {
                p->t++;
                parse_variable(p, SP_GLOBAL, is_extern);
            } else if (ptx_tok_is(d, ".const")) {
                p->t++;
                parse_variable(p, SP_CONST, is_extern);
            } else if (ptx_tok_is(d, ".shared")) {
                p->t++;
                parse_variable(p, SP_SHARED, is_extern);
            } else if (ptx_tok_is(d, ".tex")) {
                /* The deprecated .tex space: `.tex .u32 name` is a .texref. */
                p->t++;
                if (!ptx_tok_is(p->t, ".u32") && !ptx_tok_is(p->t, ".u64") && !ptx_tok_is(p->t, ".texref"))
                    ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "expected .u32 after .tex");
                parse_ref(p, false, is_extern);
            } else if (d->kind == PTX_TOK_IDENT && d->s[0] == '.') {
                ptx_fail(p, CUDA_ERROR_NOT_SUPPORTED, d->line, "directive '%.*s'",
                         (int)(d->len > 40 ? 40 : d->len), d->s);
            } else {
                ptx_fail(p, CUDA_ERROR_INVALID_PTX, d->line, "unexpected '%.*s'",
                         (int)(d->len > 40 ? 40 : d->len), d->s);
            }
        }
    }
    if (!seen_version)
        ptx_fail(p, CUDA_ERROR_INVALID_PTX, p->t->line, "no .version");
}

/* Marks functions that can reach themselves through calls: their calls save
 * and restore their registers. */
static void find_recursion(ptx_parser *p)
{
    soft_program *g = p->prog;
    uint32_t n = g->nfuncs;
    uint8_t *reach = xcalloc(p, (size_t)n * n, 1);   /* reach[a*n+b]: a calls b */
    for (uint32_t f = 0; f < n; f++)
        for (uint32_t pc = g->funcs[f].pc; pc < g->funcs[f].end; pc++) {
            if (g->code[pc].op == OP_CALL)
                reach[(size_t)f * n + g->calls[g->code[pc].aux].func] = 1;
            if (g->code[pc].op == OP_CALLI)   /* may reach any function whose address is taken */
                for (uint32_t b = 0; b < n; b++)
                    reach[(size_t)f * n + b] |= g->funcs[b].addressed;
        }
    for (uint32_t k = 0; k < n; k++)   /* transitive closure; modules are small */
        for (uint32_t a = 0; a < n; a++)
            if (reach[(size_t)a * n + k])
                for (uint32_t b = 0; b < n; b++)
                    reach[(size_t)a * n + b] |= reach[(size_t)k * n + b];
    for (uint32_t f = 0; f < n; f++)
        g->funcs[f].recursive = reach[(size_t)f * n + f];
    p->reach = reach;
}

/* Static shared bytes of entry e: its own and its callees' variables, laid
 * out in module order (the module-wide layout gives the addresses; this is
 * what cuFuncGetAttribute reports and launches count against the limit). */
static uint32_t entry_shared(ptx_parser *p, uint32_t e)
{
    soft_program *g = p->prog;
    if (!p->reach || p->nshvars == 0)
        return p->reach ? 0 : g->shared_bytes;
    uint8_t *used = xcalloc(p, p->nshvars, 1);
    for (uint32_t f = 0; f < g->nfuncs; f++)
        if (f == e || p->reach[(size_t)e * g->nfuncs + f])
            for (uint32_t i = 0; i < g->funcs[f].nshared_used; i++)
                used[g->funcs[f].shared_used[i]] = 1;
    uint64_t off = 0;
    for (uint32_t i = 0; i < p->nshvars; i++)
        if (used[i])
            off = (off + p->shvars[i].align - 1) / p->shvars[i].align * p->shvars[i].align +
                  p->shvars[i].size;
    free(used);
    return (uint32_t)off;
}

/* Refuses f with a reason made from fmt, unless it has one. */
__attribute__((format(printf, 3, 4)))
static void refuse(ptx_parser *p, ptx_func *f, const char *fmt, ...)
{
    if (f->refusal)
        return;
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (!(f->refusal = strdup(line)))
        ptx_fail(p, CUDA_ERROR_OUT_OF_MEMORY, 0, "out of memory");
}

/* A function calling one without a body, or one refused, is refused in
 * turn, up to the entries: until nothing changes (call chains are short). */
static void refuse_callers(ptx_parser *p)
{
    soft_program *g = p->prog;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t f = 0; f < g->nfuncs; f++) {
            ptx_func *fn = &g->funcs[f];
            for (uint32_t pc = fn->pc; pc < fn->end && !fn->refusal; pc++) {
                const ptx_insn *in = &g->code[pc];
                if (in->op != OP_CALL || in->aux >= g->ncalls || g->calls[in->aux].func >= g->nfuncs)
                    continue;
                const ptx_func *callee = &g->funcs[g->calls[in->aux].func];
                const char *kind = fn->is_entry ? "kernel" : "function";
                if (!callee->defined)
                    refuse(p, fn, "line %u, in %s %s: call to '%s', which has no body", in->line, kind, fn->name,
                           callee->name);
                else if (callee->refusal)
                    refuse(p, fn, "%s %s calls %s (line %u): %s", kind, fn->name, callee->name, in->line,
                           callee->refusal);
                changed |= fn->refusal != NULL;
            }
        }
    }
}

/* After the whole module: callees defined, entries listed, sizes known. */
static void finish(ptx_parser *p)
{
    soft_program *g = p->prog;
    refuse_callers(p);
    if (g->nfuncs <= 4096)
        find_recursion(p);
    else
        for (uint32_t i = 0; i < g->nfuncs; i++)
            g->funcs[i].recursive = true;
    g->dyn_shared_off = (g->shared_bytes + 15) / 16 * 16;
    for (uint32_t i = 0; i < g->nconsts; i++)
        if (p->dyn_reg && g->consts[i].reg == p->dyn_reg)
            g->consts[i].value = g->dyn_shared_off;
    g->entries = xcalloc(p, g->nfuncs, sizeof *g->entries);
    for (uint32_t i = 0; i < g->nfuncs; i++) {
        ptx_func *f = &g->funcs[i];
        if (!f->is_entry)
            continue;
        f->info.name = f->name;
        f->info.refusal = f->refusal;
        f->info.static_shared_bytes = entry_shared(p, i);
        f->info.local_bytes = f->depot;
        /* PTX registers are virtual: like ptxas, allocate no more than lets a
         * block of the most threads it allows fit in 64K (CUB's histogram
         * sizes its grid by occupancy, and 0 would launch nothing) */
        uint32_t fit = 65536 / f->info.max_threads;
        uint32_t regs = f->reg_count < 255 ? f->reg_count : 255;
        f->info.num_regs = regs < fit ? regs : fit;
        f->info.straight = true;
        for (uint32_t pc = f->pc; pc < f->end && f->info.straight; pc++) {
            const ptx_insn *in = &g->code[pc];
            if (in->op == OP_CALL || in->op == OP_CALLI || (in->op == OP_BRA && in->imm <= (int64_t)pc))
                f->info.straight = false;
        }
        g->entries[g->nentries++] = i;
    }
    for (uint32_t i = 0; i < g->ncode; i++) {
        ptx_insn *in = &g->code[i];
        if ((in->op == OP_BRA) && (uint64_t)in->imm >= g->ncode)
            ptx_fail(p, CUDA_ERROR_INVALID_PTX, in->line, "branch out of the code");
    }
}

CUresult soft_program_parse(const char *ptx, size_t len, soft_program **out,
                            char *msg, size_t msglen)
{
    char dummy[1];
    if (!msg || msglen == 0) {
        msg = dummy;
        msglen = sizeof dummy;
    }
    msg[0] = 0;
    if (!ptx || !out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = NULL;
    /* the text may end with NULs */
    while (len > 0 && ptx[len - 1] == 0)
        len--;
    if (memchr(ptx, 0, len)) {
        snprintf(msg, msglen, "PTX text holds a NUL byte");
        return CUDA_ERROR_INVALID_PTX;
    }
    ptx_tok *toks = NULL;
    size_t ntoks = 0;
    if (ptx_lex(ptx, len, &toks, &ntoks, msg, msglen) != 0)
        return CUDA_ERROR_INVALID_PTX;
    ptx_parser *p = calloc(1, sizeof *p);
    soft_program *g = calloc(1, sizeof *g);
    if (!p || !g) {
        free(p);
        free(g);
        free(toks);
        snprintf(msg, msglen, "out of memory");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    static _Atomic uint64_t next_id = 1;
    g->id = atomic_fetch_add(&next_id, 1);
    p->prog = g;
    p->toks = toks;
    p->t = toks;
    p->msg = msg;
    p->msglen = msglen;
    CUresult rc = CUDA_SUCCESS;
    if (setjmp(p->fail) == 0) {
        parse_module(p);
        finish(p);
    } else {
        rc = p->err;
    }
    free(p->syms);
    free(p->shvars);
    free(p->reach);
    free(p->labels);
    free(p->fixups);
    free(p->protos);
    free(p);
    free(toks);
    if (rc != CUDA_SUCCESS) {
        soft_program_free(g);
        return rc;
    }
    *out = g;
    return CUDA_SUCCESS;
}

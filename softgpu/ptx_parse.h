/* ptx_parse: what the module parser (ptx_parse.c) shares with the
 * instruction decoder (ptx_decode.c): parsed operands, the symbol table and
 * the helpers that grow the program. Nothing outside the engine sees it. */
#ifndef RIG_SOFTGPU_PTX_PARSE_H
#define RIG_SOFTGPU_PTX_PARSE_H

#include "softgpu/ptx_ir.h"
#include "softgpu/ptx_lex.h"

#include <setjmp.h>

typedef enum ptx_sym_kind {
    SYM_REG,         /* scalar register */
    SYM_REGRANGE,    /* %r<N>: registers prefix0 .. prefix(N-1) */
    SYM_GLOBAL,      /* .global/.const variable: index */
    SYM_SHARED,      /* .shared variable: offset in the block's shared memory */
    SYM_DYNSHARED,   /* extern .shared: starts at prog->dyn_shared_off */
    SYM_LOCAL,       /* .local variable: offset in the function's depot */
    SYM_KPARAM,      /* .entry parameter: offset in the launch's buffer */
    SYM_PARAM,       /* .func or call-site parameter: per-lane slot */
    SYM_FUNC,        /* index into prog->funcs */
    SYM_REF,         /* .texref/.surfref variable: index into prog->refs */
} ptx_sym_kind;

typedef struct ptx_sym {
    const char *name;
    uint32_t len;
    uint8_t kind;
    uint8_t type;        /* registers */
    uint32_t index;      /* register base, global or function index */
    uint32_t count;      /* SYM_REGRANGE */
    uint64_t offset;     /* byte offset (shared, local, params) */
    uint32_t size;       /* bytes (params, variables) */
} ptx_sym;

typedef enum ptx_opd_kind {
    OPD_REG, OPD_INT, OPD_F32, OPD_F64, OPD_SYM, OPD_ADDR, OPD_VEC, OPD_SINK,
} ptx_opd_kind;

/* One element of a vector operand {a, b, ...}. */
typedef struct ptx_velem {
    uint8_t kind;        /* OPD_REG, OPD_INT, OPD_F32, OPD_F64, OPD_SINK */
    uint32_t reg;
    uint64_t bits;
} ptx_velem;

typedef struct ptx_opd {
    uint8_t kind;
    bool neg;                /* !%p */
    uint32_t reg;            /* OPD_REG; OPD_ADDR with a register base */
    uint32_t reg2;           /* d|p: the second destination */
    bool has_reg2;
    uint64_t bits;           /* OPD_INT/F32/F64 */
    const ptx_tok *name;     /* OPD_SYM, OPD_ADDR with a symbol base */
    const ptx_sym *sym;      /* resolved symbol, or NULL (label, function) */
    bool addr_reg;           /* OPD_ADDR: base is reg */
    bool addr_sym;           /* OPD_ADDR: base is name/sym; else absolute */
    int64_t off;             /* OPD_ADDR offset */
    uint8_t n;               /* OPD_VEC; OPD_ADDR: coordinates of an image access */
    ptx_velem v[4];
} ptx_opd;

#define PTX_MAX_OPDS 8

typedef struct ptx_fixup {
    uint32_t pc;
    const ptx_tok *label;
} ptx_fixup;

typedef struct ptx_label {
    const ptx_tok *name;
    uint32_t pc;
} ptx_label;

/* `name: .callprototype (.param ...) _ (.param ...);` in the function being
 * parsed: what an indirect call through it passes and gets. */
typedef struct ptx_proto {
    const ptx_tok *name;
    uint32_t nrets, nargs;
    uint32_t ret_size[8], arg_size[32];
} ptx_proto;

typedef struct ptx_parser {
    soft_program *prog;
    const ptx_tok *t;        /* cursor */
    const ptx_tok *toks;
    jmp_buf fail;
    CUresult err;
    char *msg;
    size_t msglen;
    /* symbols, innermost scope last */
    ptx_sym *syms;
    uint32_t nsyms, capsyms;
    uint32_t scope[64];
    uint32_t nscope;
    /* the function being parsed */
    ptx_func *fn;
    uint32_t fn_index;
    ptx_label *labels;
    uint32_t nlabels, caplabels;
    ptx_fixup *fixups;
    uint32_t nfixups, capfixups;
    ptx_proto *protos;
    uint32_t nprotos, capprotos;
    /* constant registers, by value */
    uint32_t capconsts;
    uint32_t dyn_reg;        /* 0 until ptx_dyn_shared_reg */
    uint32_t capcode, capregs, capcalls;
    /* static .shared variables in module order, for per-entry sizes */
    struct { uint32_t size, align; } *shvars;
    uint32_t nshvars, capshvars;
    uint8_t *reach;          /* call graph closure, freed with the parser */
} ptx_parser;

/* Stops the parse: err is CUDA_ERROR_INVALID_PTX or CUDA_ERROR_NOT_SUPPORTED,
 * the message says what and where. Never returns. */
__attribute__((noreturn, format(printf, 4, 5)))
void ptx_fail(ptx_parser *p, CUresult err, uint32_t line, const char *fmt, ...);

/* Appends an instruction to the program; returns its pc. */
uint32_t ptx_emit(ptx_parser *p, const ptx_insn *in);
/* A register preloaded with bits in every lane (shared between uses). */
uint32_t ptx_const_reg(ptx_parser *p, uint64_t bits);
/* The register preloaded with where dynamic shared memory starts (known
 * only once the whole module's static shared memory is laid out). */
uint32_t ptx_dyn_shared_reg(ptx_parser *p);
/* A fresh scratch register of width bytes. */
uint32_t ptx_new_reg(ptx_parser *p, ptx_type type);
/* A new, zeroed call-site record at the end of prog->calls. */
ptx_call *ptx_new_call(ptx_parser *p);
/* Adds a branch fixup: insn pc's imm becomes the label's pc. */
void ptx_add_fixup(ptx_parser *p, uint32_t pc, const ptx_tok *label);
/* Looks up a name in the scopes, innermost first; NULL when unknown. */
const ptx_sym *ptx_lookup(ptx_parser *p, const char *name, uint32_t len);
/* Notes that the function being parsed uses static shared variable id. */
void ptx_use_shared(ptx_parser *p, uint32_t id);
/* Allocates len bytes of per-lane parameter slots aligned to align. */
uint32_t ptx_param_slot(ptx_parser *p, uint32_t size, uint32_t align);

/* Decodes one instruction (ptx_decode.c): optok is the opcode token,
 * guard the predicate register or -1. Emits into p->prog or fails. */
void ptx_decode(ptx_parser *p, const ptx_tok *optok, int32_t guard, bool guard_neg,
                ptx_opd *opds, unsigned nopds);
/* True when the opcode's base (before the first dot) is one ptx_decode
 * knows; operands of others are never parsed. */
bool ptx_known_opcode(const ptx_tok *op);
/* Decodes a call: rets and args are call-site parameter symbols. */
void ptx_decode_call(ptx_parser *p, const ptx_tok *optok, int32_t guard, bool guard_neg,
                     const ptx_tok *callee, const ptx_sym **rets, unsigned nrets,
                     const ptx_sym **args, unsigned nargs);

/* Decodes an indirect call through 64-bit register target, checked
 * against the call prototype proto. */
void ptx_decode_icall(ptx_parser *p, const ptx_tok *optok, int32_t guard, bool guard_neg,
                      uint32_t target, const ptx_proto *proto, const ptx_sym **rets,
                      unsigned nrets, const ptx_sym **args, unsigned nargs);

/* Name comparison helper: token text equals the NUL-terminated s. */
bool ptx_tok_is(const ptx_tok *t, const char *s);
/* Parses a type name (".u32", "u32" without the dot); T_NONE if not one. */
ptx_type ptx_type_from(const char *s, size_t len);

#endif

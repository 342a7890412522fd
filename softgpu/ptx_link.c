/* ptx_link: links several PTX texts into one, as nvlink does for relocatable
 * device code. Each input is split into its top-level statements; a
 * `.extern` (or body-less) declaration resolves against a `.visible` or
 * `.weak` definition of any input (a visible one beats weak ones, the first
 * weak one wins among weak ones; two visible ones clash); file-local symbols
 * that another input also names get a per-input suffix. The output is PTX:
 * one header, a prototype of every function (so calls across inputs and
 * function addresses in initialisers parse), the variables, then the bodies,
 * each input's text copied as written apart from renamed identifiers. Text
 * rather than parsed programs are merged: the parser then sees one ordinary
 * module and checks it as it checks any other. */
#include "softgpu/engine.h"
#include "softgpu/ptx_lex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ST_VERSION, ST_TARGET, ST_ADDRESS, ST_DROP, ST_FUNC, ST_ENTRY, ST_VAR, ST_EXTSHARED, ST_OTHER };
enum { LK_LOCAL, LK_VISIBLE, LK_WEAK, LK_EXTERN };

typedef struct stmt {
    unsigned input;
    size_t first, end;    /* tokens [first, end) */
    int kind, linkage;
    size_t name;          /* token of the declared name; 0 for none */
    size_t proto_end;     /* ST_FUNC: tokens [first, proto_end) are the prototype */
    bool body;            /* a definition (function body, or a variable not .extern) */
    bool init;            /* a variable with an initialiser (which may name other variables) */
    bool keep;
} stmt;

typedef struct in_toks {
    const char *text;
    size_t len;
    ptx_tok *t;
    size_t n;
    const char *name;
} in_toks;

/* One name of the link: its winning global definition and where it is local. */
typedef struct sym {
    const char *s;
    uint32_t len;
    long def;             /* stmt index of the kept global definition, or -1 */
    int def_linkage;
    unsigned last_input, ninputs;   /* distinct inputs naming it at top level */
    unsigned *local;      /* inputs where it is file-local */
    unsigned nlocal;
    size_t *local_def;    /* stmts of its file-local definitions */
    unsigned nlocal_def;
    bool runtime_kept;    /* a device runtime function's declaration is emitted */
} sym;

typedef struct linker {
    in_toks *in;
    unsigned n;
    stmt *st;
    size_t nst, capst;
    sym *tab;
    size_t captab;
    char *out;
    size_t outlen, outcap;
    bool oom;
    char *msg;
    size_t msglen;
} linker;

static CUresult fail(linker *k, CUresult rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static CUresult fail(linker *k, CUresult rc, const char *fmt, ...)
{
    if (k->msg && k->msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(k->msg, k->msglen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static bool is(const ptx_tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->kind == PTX_TOK_IDENT && t->len == n && memcmp(t->s, s, n) == 0;
}

static bool punct(const ptx_tok *t, char c)
{
    return t->kind == PTX_TOK_PUNCT && t->c == c;
}

/* Source span of a token: a string's quotes belong to it. */
static const char *tok_begin(const ptx_tok *t)
{
    return t->kind == PTX_TOK_STRING ? t->s - 1 : t->s;
}

static const char *tok_end(const ptx_tok *t)
{
    return t->s + t->len + (t->kind == PTX_TOK_STRING);
}

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* The table entry for a name; create adds it when missing (else NULL). */
static sym *lookup(linker *k, const char *s, uint32_t len, bool create)
{
    size_t mask = k->captab - 1;
    for (size_t i = hash(s, len) & mask;; i = (i + 1) & mask) {
        sym *e = &k->tab[i];
        if (!e->s) {
            if (!create)
                return NULL;
            *e = (sym){ .s = s, .len = len, .def = -1, .last_input = ~0u };
            return e;
        }
        if (e->len == len && memcmp(e->s, s, len) == 0)
            return e;
    }
}

static bool local_in(const sym *e, unsigned input)
{
    for (unsigned i = 0; i < e->nlocal; i++)
        if (e->local[i] == input)
            return true;
    return false;
}

static void put(linker *k, const char *s, size_t n)
{
    if (k->oom)
        return;
    if (k->outlen + n + 1 > k->outcap) {
        size_t cap = k->outcap ? k->outcap : 1 << 16;
        while (k->outlen + n + 1 > cap)
            cap *= 2;
        char *more = realloc(k->out, cap);
        if (!more) {
            k->oom = true;
            return;
        }
        k->out = more;
        k->outcap = cap;
    }
    memcpy(k->out + k->outlen, s, n);
    k->outlen += n;
    k->out[k->outlen] = 0;
}

static void puts_(linker *k, const char *s)
{
    put(k, s, strlen(s));
}

/* Copies tokens [a, b) of an input with the text between them (comments,
 * spacing), renaming its file-local symbols that clash. */
static void emit(linker *k, unsigned input, size_t a, size_t b)
{
    const in_toks *in = &k->in[input];
    for (size_t i = a; i < b; i++) {
        const ptx_tok *t = &in->t[i];
        if (i > a)
            put(k, tok_end(&in->t[i - 1]), (size_t)(tok_begin(t) - tok_end(&in->t[i - 1])));
        put(k, tok_begin(t), (size_t)(tok_end(t) - tok_begin(t)));
        if (t->kind == PTX_TOK_IDENT && t->s[0] != '.' && t->s[0] != '%') {
            const sym *e = lookup(k, t->s, t->len, false);
            if (e && e->ninputs > 1 && local_in(e, input)) {
                char suffix[24];
                snprintf(suffix, sizeof suffix, "_$in%u", input);
                puts_(k, suffix);
            }
        }
    }
}

/* Splits input i into top-level statements. */
static CUresult split(linker *k, unsigned input)
{
    const in_toks *in = &k->in[input];
    size_t i = 0;
    while (in->t[i].kind != PTX_TOK_END) {
        stmt s = { .input = input, .first = i, .kind = ST_OTHER, .linkage = LK_LOCAL };
        const ptx_tok *t = &in->t[i];
        if (is(t, ".version") || is(t, ".target") || is(t, ".address_size") || is(t, ".file") ||
            is(t, ".loc")) {
            /* directives without a semicolon: a number, a list of names, or
             * (.file, .loc) the rest of their line */
            s.kind = is(t, ".version") ? ST_VERSION : is(t, ".target") ? ST_TARGET
                   : is(t, ".address_size") ? ST_ADDRESS : ST_DROP;
            if (s.kind == ST_VERSION || s.kind == ST_ADDRESS) {
                i += in->t[i + 1].kind == PTX_TOK_NUMBER ? 2 : 1;
            } else if (s.kind == ST_TARGET) {
                i++;
                while (in->t[i].kind == PTX_TOK_IDENT && in->t[i].s[0] != '.' && punct(&in->t[i + 1], ','))
                    i += 2;
                if (in->t[i].kind == PTX_TOK_IDENT && in->t[i].s[0] != '.')
                    i++;
            } else {
                uint32_t line = t->line;
                while (in->t[i].kind != PTX_TOK_END && in->t[i].line == line)
                    i++;
            }
        } else {
            size_t j = i;
            for (;; j++) {
                t = &in->t[j];
                if (is(t, ".extern"))
                    s.linkage = LK_EXTERN;
                else if (is(t, ".visible") && s.linkage != LK_EXTERN)
                    s.linkage = LK_VISIBLE;
                else if ((is(t, ".weak") || is(t, ".common")) && s.linkage != LK_EXTERN)
                    s.linkage = LK_WEAK;
                else
                    break;
            }
            if (t->kind == PTX_TOK_END)
                return fail(k, CUDA_ERROR_INVALID_PTX, "%s: line %u: statement does not end", in->name,
                            in->t[i].line);
            if (is(t, ".func"))
                s.kind = ST_FUNC;
            else if (is(t, ".entry"))
                s.kind = ST_ENTRY;
            else if (is(t, ".global") || is(t, ".const") || is(t, ".tex"))
                s.kind = ST_VAR;
            else if (is(t, ".shared"))
                s.kind = s.linkage == LK_EXTERN ? ST_EXTSHARED : ST_VAR;
            else if (is(t, ".section") || punct(t, ';'))
                s.kind = ST_DROP;   /* debug sections: per input, not merged; a stray ';' */
            int depth = 0, pdepth = 0;
            bool pragma = false;
            for (j += !punct(t, ';');; j++) {   /* (a stray ';' is a statement of its own) */
                t = &in->t[j];
                if (t->kind == PTX_TOK_END)
                    return fail(k, CUDA_ERROR_INVALID_PTX, "%s: line %u: statement does not end",
                                in->name, in->t[i].line);
                if (punct(t, '=') && !depth)
                    s.init = true;
                if (punct(t, '('))
                    pdepth++;
                else if (punct(t, ')'))
                    pdepth--;
                if (!depth && !pdepth && !s.name && t->kind == PTX_TOK_IDENT && t->s[0] != '.' &&
                    (s.kind == ST_FUNC || s.kind == ST_ENTRY || s.kind == ST_VAR || s.kind == ST_EXTSHARED))
                    s.name = j;
                if (is(t, ".pragma"))
                    pragma = true;
                if (punct(t, '{')) {
                    depth++;
                    if (s.kind == ST_FUNC || s.kind == ST_ENTRY)
                        s.body = true;
                } else if (punct(t, '}')) {
                    if (--depth == 0) {
                        if (punct(&in->t[j + 1], ';'))
                            j++;
                        j++;
                        break;
                    }
                } else if (punct(t, ';') && !depth) {
                    if (pragma && (s.kind == ST_FUNC || s.kind == ST_ENTRY)) {
                        pragma = false;   /* `.pragma "...";` between a signature and its body */
                        continue;
                    }
                    j++;
                    break;
                }
            }
            i = j;
            if ((s.kind == ST_FUNC || s.kind == ST_ENTRY || s.kind == ST_VAR) && !s.name)
                return fail(k, CUDA_ERROR_INVALID_PTX, "%s: line %u: declaration without a name",
                            in->name, in->t[s.first].line);
            if (s.kind == ST_FUNC && s.name) {
                /* the prototype ends with the parameter list, or the name when there is none */
                size_t e = s.name + 1;
                if (punct(&in->t[e], '(')) {
                    for (int pd = 0; e < j; e++)
                        if (punct(&in->t[e], '('))
                            pd++;
                        else if (punct(&in->t[e], ')') && --pd == 0)
                            break;
                    e++;
                }
                s.proto_end = e;
            }
            if (s.kind == ST_VAR)
                s.body = s.linkage != LK_EXTERN;
            if (s.kind == ST_ENTRY)
                s.body = true;   /* an entry cannot be called: a prototype of one declares nothing needed */
        }
        s.end = i;
        s.keep = true;
        if (k->nst == k->capst) {
            size_t cap = k->capst ? k->capst * 2 : 256;
            stmt *more = realloc(k->st, cap * sizeof *more);
            if (!more)
                return fail(k, CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
            k->st = more;
            k->capst = cap;
        }
        k->st[k->nst++] = s;
    }
    return CUDA_SUCCESS;
}

static const ptx_tok *name_tok(const linker *k, const stmt *s)
{
    return &k->in[s->input].t[s->name];
}

static bool named(const stmt *s)
{
    return s->kind == ST_FUNC || s->kind == ST_ENTRY || s->kind == ST_VAR;
}

/* Whether input names the symbol outside the statement declaring it. */
static bool used(const linker *k, const stmt *decl)
{
    const in_toks *in = &k->in[decl->input];
    const ptx_tok *n = name_tok(k, decl);
    for (size_t i = 0; in->t[i].kind != PTX_TOK_END; i++)
        if ((i < decl->first || i >= decl->end) && in->t[i].kind == PTX_TOK_IDENT && in->t[i].len == n->len &&
            memcmp(in->t[i].s, n->s, n->len) == 0)
            return true;
    return false;
}

/* Functions the driver's device runtime supplies to every link (printf,
 * assert, malloc, launches from the device): their declarations stay, for
 * the engine to run or refuse. */
static bool runtime_function(const ptx_tok *n)
{
    static const char *const names[] = { "vprintf", "__assertfail", "malloc", "free" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (n->len == strlen(names[i]) && memcmp(n->s, names[i], n->len) == 0)
            return true;
    return (n->len > 4 && memcmp(n->s, "cuda", 4) == 0) || (n->len > 6 && memcmp(n->s, "__cuda", 6) == 0);
}

/* Resolves symbols and marks what is kept. */
static CUresult resolve(linker *k)
{
    /* Who names what: clashing locals, the winning global definitions. */
    for (size_t i = 0; i < k->nst; i++) {
        stmt *s = &k->st[i];
        if (!named(s))
            continue;
        const ptx_tok *n = name_tok(k, s);
        sym *e = lookup(k, n->s, n->len, true);
        if (e->last_input != s->input) {
            e->last_input = s->input;
            e->ninputs++;
        }
        if (s->linkage == LK_LOCAL && !local_in(e, s->input)) {
            unsigned *more = realloc(e->local, (e->nlocal + 1) * sizeof *more);
            if (!more)
                return fail(k, CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
            e->local = more;
            e->local[e->nlocal++] = s->input;
        }
        if (s->body && s->linkage == LK_LOCAL) {
            size_t *more = realloc(e->local_def, (e->nlocal_def + 1) * sizeof *more);
            if (!more)
                return fail(k, CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
            e->local_def = more;
            e->local_def[e->nlocal_def++] = i;
        }
        if (!s->body || s->linkage == LK_LOCAL || s->linkage == LK_EXTERN)
            continue;
        if (e->def < 0 || (e->def_linkage == LK_WEAK && s->linkage == LK_VISIBLE)) {
            if (e->def >= 0)
                k->st[e->def].keep = false;
            e->def = (long)i;
            e->def_linkage = s->linkage;
        } else if (s->linkage == LK_WEAK) {
            s->keep = false;
        } else if (e->def_linkage == LK_VISIBLE) {
            const stmt *d = &k->st[e->def];
            return fail(k, CUDA_ERROR_INVALID_IMAGE, "Multiple definition of '%.*s' in '%s', first defined in '%s'",
                        (int)n->len, n->s, k->in[s->input].name, k->in[d->input].name);
        }
    }
    /* Declarations: dropped (prototypes of definitions are emitted), each
     * checked for a definition it can mean. */
    for (size_t i = 0; i < k->nst; i++) {
        stmt *s = &k->st[i];
        if (s->kind == ST_EXTSHARED) {
            /* dynamic shared memory: one declaration per name is enough */
            const ptx_tok *n = name_tok(k, s);
            for (size_t j = 0; j < i && s->keep; j++)
                if (k->st[j].kind == ST_EXTSHARED && k->st[j].keep && name_tok(k, &k->st[j])->len == n->len &&
                    memcmp(name_tok(k, &k->st[j])->s, n->s, n->len) == 0)
                    s->keep = false;
            continue;
        }
        if (!named(s) || s->body)
            continue;
        s->keep = false;
        const ptx_tok *n = name_tok(k, s);
        const sym *e = lookup(k, n->s, n->len, false);
        const stmt *def = NULL;
        if (s->linkage == LK_LOCAL)   /* a forward declaration: its own input's definition */
            for (unsigned j = 0; e && j < e->nlocal_def && !def; j++)
                if (k->st[e->local_def[j]].input == s->input)
                    def = &k->st[e->local_def[j]];
        if (!def && e && e->def >= 0)
            def = &k->st[e->def];
        if (!def && s->kind == ST_FUNC && runtime_function(n)) {
            sym *r = lookup(k, n->s, n->len, false);
            s->keep = !r->runtime_kept;   /* one declaration; the parser deals with the calls */
            r->runtime_kept = true;
            continue;
        }
        if (!def) {
            if (!used(k, s))
                continue;
            return fail(k, CUDA_ERROR_INVALID_IMAGE, "Undefined reference to '%.*s' in '%s'", (int)n->len, n->s,
                        k->in[s->input].name);
        }
        if ((def->kind == ST_FUNC) != (s->kind == ST_FUNC))
            return fail(k, CUDA_ERROR_INVALID_IMAGE, "'%.*s' is declared as a %s in '%s' but defined as a %s in '%s'",
                        (int)n->len, n->s, s->kind == ST_FUNC ? "function" : "variable", k->in[s->input].name,
                        def->kind == ST_FUNC ? "function" : "variable", k->in[def->input].name);
    }
    return CUDA_SUCCESS;
}

/* "major.minor" of a .version statement, as one comparable number. */
static unsigned version_of(const linker *k, const stmt *s)
{
    const ptx_tok *t = &k->in[s->input].t[s->first + 1];
    unsigned major = 0, minor = 0;
    if (s->end > s->first + 1 && t->kind == PTX_TOK_NUMBER)
        sscanf(t->s, "%u.%u", &major, &minor);
    return major * 1000 + minor;
}

/* The sm_ number of a .target statement. */
static unsigned sm_of(const linker *k, const stmt *s)
{
    unsigned best = 0;
    for (size_t i = s->first + 1; i < s->end; i++) {
        const ptx_tok *t = &k->in[s->input].t[i];
        unsigned sm;
        if (t->kind == PTX_TOK_IDENT && t->len > 3 && memcmp(t->s, "sm_", 3) == 0 && sscanf(t->s + 3, "%u", &sm) == 1 &&
            sm > best)
            best = sm;
    }
    return best;
}

static void write_out(linker *k)
{
    const stmt *version = NULL, *target = NULL, *address = NULL;
    for (size_t i = 0; i < k->nst; i++) {
        const stmt *s = &k->st[i];
        if (s->kind == ST_VERSION && (!version || version_of(k, s) > version_of(k, version)))
            version = s;
        else if (s->kind == ST_TARGET && (!target || sm_of(k, s) > sm_of(k, target)))
            target = s;
        else if (s->kind == ST_ADDRESS && !address)
            address = s;
    }
    puts_(k, "// linked by softgpu\n");
    const stmt *head[] = { version, target, address };
    for (unsigned h = 0; h < 3; h++)
        if (head[h]) {
            emit(k, head[h]->input, head[h]->first, head[h]->end);
            puts_(k, "\n");
        }
    for (size_t i = 0; i < k->nst; i++) {   /* prototypes */
        const stmt *s = &k->st[i];
        if (s->keep && s->kind == ST_FUNC && s->body && s->proto_end) {
            emit(k, s->input, s->first, s->proto_end);
            puts_(k, ";\n");
        }
    }
    /* variables without initialisers and the rest, those with (they may name
     * variables of a later input), then bodies */
    for (int pass = 0; pass < 3; pass++)
        for (size_t i = 0; i < k->nst; i++) {
            const stmt *s = &k->st[i];
            int want = s->kind == ST_FUNC || s->kind == ST_ENTRY ? 2 : s->init ? 1 : 0;
            if (!s->keep || s->kind == ST_VERSION || s->kind == ST_TARGET || s->kind == ST_ADDRESS ||
                s->kind == ST_DROP || want != pass)
                continue;
            emit(k, s->input, s->first, s->end);
            puts_(k, "\n");
        }
}

CUresult soft_ptx_link(const soft_ptx_input *inputs, unsigned n, char **out, size_t *out_len, char *msg,
                       size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    linker k = { .n = n, .msg = msg, .msglen = msglen };
    if (!inputs || !n || !out || !out_len)
        return fail(&k, CUDA_ERROR_INVALID_VALUE, "nothing to link");
    CUresult rc = CUDA_SUCCESS;
    k.in = calloc(n, sizeof *k.in);
    if (!k.in)
        return fail(&k, CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
    for (unsigned i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        in_toks *in = &k.in[i];
        in->text = inputs[i].text;
        in->len = inputs[i].len;
        in->name = inputs[i].name ? inputs[i].name : "(input)";
        char lexmsg[200];
        if (ptx_lex(in->text, in->len, &in->t, &in->n, lexmsg, sizeof lexmsg) != 0)
            rc = fail(&k, CUDA_ERROR_INVALID_PTX, "%s: %s", in->name, lexmsg);
        else
            rc = split(&k, i);
    }
    if (rc == CUDA_SUCCESS) {
        k.captab = 64;
        while (k.captab < 2 * k.nst + 64)
            k.captab *= 2;
        k.tab = calloc(k.captab, sizeof *k.tab);
        rc = k.tab ? resolve(&k) : fail(&k, CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    if (rc == CUDA_SUCCESS) {
        write_out(&k);
        if (k.oom || !k.out)
            rc = fail(&k, CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    if (rc == CUDA_SUCCESS) {
        *out = k.out;
        *out_len = k.outlen;
        k.out = NULL;
    }
    for (size_t i = 0; k.tab && i < k.captab; i++) {
        free(k.tab[i].local);
        free(k.tab[i].local_def);
    }
    free(k.tab);
    for (unsigned i = 0; i < n; i++)
        free(k.in[i].t);
    free(k.in);
    free(k.st);
    free(k.out);
    return rc;
}

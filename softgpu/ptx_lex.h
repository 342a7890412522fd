/* ptx_lex: splits PTX text into tokens. Identifiers keep their dots and
 * sigils (`ld.global.f32`, `%tid.x`, `$L__BB0_2`, `.reg`), numbers keep
 * their PTX spelling (`0f3F800000`, `0x1F`, `42U`); comments are dropped. */
#ifndef RIG_SOFTGPU_PTX_LEX_H
#define RIG_SOFTGPU_PTX_LEX_H

#include <stddef.h>
#include <stdint.h>

typedef enum ptx_tok_kind {
    PTX_TOK_END,
    PTX_TOK_IDENT,   /* also directives and opcodes */
    PTX_TOK_NUMBER,
    PTX_TOK_STRING,
    PTX_TOK_PUNCT,   /* one character, in .c */
} ptx_tok_kind;

typedef struct ptx_tok {
    uint8_t kind;
    char c;              /* PTX_TOK_PUNCT */
    uint32_t len;
    uint32_t line;
    const char *s;       /* into the source text */
} ptx_tok;

/* Tokenises len bytes of text into *toks (malloc'd, ends with PTX_TOK_END;
 * caller frees). Returns 0, or -1 with msg set on a stray byte or an
 * unterminated comment or string. */
int ptx_lex(const char *text, size_t len, ptx_tok **toks, size_t *count,
            char *msg, size_t msglen);

#endif

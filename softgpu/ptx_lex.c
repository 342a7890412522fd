/* ptx_lex: PTX text to tokens (see ptx_lex.h). */
#include "softgpu/ptx_lex.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static bool ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '$' || c == '%' || c == '.';
}

static bool ident_char(char c)
{
    return ident_start(c) || (c >= '0' && c <= '9');
}

static bool strchr_punct(char c)
{
    switch (c) {
    case '{': case '}': case '[': case ']': case '(': case ')': case '<':
    case '>': case ',': case ';': case ':': case '+': case '-': case '=':
    case '!': case '@': case '|': case '*':
        return true;
    default:
        return false;
    }
}

static bool push(ptx_tok **toks, size_t *n, size_t *cap, ptx_tok t)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 1024;
        ptx_tok *p = realloc(*toks, ncap * sizeof **toks);
        if (!p)
            return false;
        *toks = p;
        *cap = ncap;
    }
    (*toks)[(*n)++] = t;
    return true;
}

int ptx_lex(const char *text, size_t len, ptx_tok **out, size_t *count,
            char *msg, size_t msglen)
{
    ptx_tok *toks = NULL;
    size_t n = 0, cap = 0, i = 0;
    uint32_t line = 1;

    while (i < len) {
        char c = text[i];
        ptx_tok t = { .line = line, .s = text + i };
        if (c == '\n') {
            line++;
            i++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            i++;
            continue;
        }
        if (c == '/' && i + 1 < len && text[i + 1] == '/') {
            while (i < len && text[i] != '\n')
                i++;
            continue;
        }
        if (c == '/' && i + 1 < len && text[i + 1] == '*') {
            size_t j = i + 2;
            while (j + 1 < len && !(text[j] == '*' && text[j + 1] == '/')) {
                if (text[j] == '\n')
                    line++;
                j++;
            }
            if (j + 1 >= len) {
                snprintf(msg, msglen, "line %u: unterminated comment", t.line);
                goto fail;
            }
            i = j + 2;
            continue;
        }
        if (ident_start(c)) {
            size_t j = i + 1;
            for (;;) {
                if (j < len && ident_char(text[j]))
                    j++;
                else if (j + 2 < len && text[j] == ':' && text[j + 1] == ':' &&
                         ident_char(text[j + 2]))
                    j += 2;     /* .shared::cta, .L1::no_allocate */
                else
                    break;
            }
            t.kind = PTX_TOK_IDENT;
            t.len = (uint32_t)(j - i);
            i = j;
        } else if (c >= '0' && c <= '9') {
            size_t j = i + 1;
            while (j < len && (ident_char(text[j]) && text[j] != '%' && text[j] != '$'))
                j++;
            t.kind = PTX_TOK_NUMBER;
            t.len = (uint32_t)(j - i);
            i = j;
        } else if (c == '"') {
            size_t j = i + 1;
            while (j < len && text[j] != '"' && text[j] != '\n') {
                if (text[j] == '\\' && j + 1 < len)
                    j++;
                j++;
            }
            if (j >= len || text[j] != '"') {
                snprintf(msg, msglen, "line %u: unterminated string", t.line);
                goto fail;
            }
            t.kind = PTX_TOK_STRING;
            t.s = text + i + 1;
            t.len = (uint32_t)(j - i - 1);
            i = j + 1;
        } else if (c && strchr_punct(c)) {
            t.kind = PTX_TOK_PUNCT;
            t.c = c;
            t.len = 1;
            i++;
        } else {
            snprintf(msg, msglen, "line %u: unexpected byte 0x%02x", line,
                     (unsigned)(unsigned char)c);
            goto fail;
        }
        if (!push(&toks, &n, &cap, t)) {
            snprintf(msg, msglen, "out of memory");
            goto fail;
        }
    }
    ptx_tok end = { .kind = PTX_TOK_END, .line = line, .s = text + len };
    if (!push(&toks, &n, &cap, end)) {
        snprintf(msg, msglen, "out of memory");
        goto fail;
    }
    *out = toks;
    *count = n;
    return 0;
fail:
    free(toks);
    return -1;
}

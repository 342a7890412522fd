/* Shell quoting; see quote.h. */
#include "launcher/quote.h"

#include <stdbool.h>
#include <string.h>

#include "proto/error.h"

/* Bytes no POSIX shell treats specially anywhere in a word. */
static const char plain_bytes[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-";

/* The bytes s takes as a word; *plain when it goes unquoted. */
static size_t quoted_len(const char *s, bool *plain)
{
    size_t n = 2;   /* the outer quotes, when quoted */
    *plain = *s != '\0';
    for (const char *p = s; *p; p++) {
        *plain &= strchr(plain_bytes, *p) != NULL;
        n += *p == '\'' ? 4 : 1;
    }
    return *plain ? n - 2 : n;
}

/* Writes s as a word at w (room measured by quoted_len); returns its end. */
static char *put_word(char *w, const char *s, bool plain)
{
    if (!plain)
        *w++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'' && !plain) {   /* close, an escaped quote, reopen */
            memcpy(w, "'\\''", 4);
            w += 4;
        } else {
            *w++ = *p;
        }
    }
    if (!plain)
        *w++ = '\'';
    return w;
}

/* Appends words, a space before each but a first one that starts out, or
 * nothing when they do not all fit. */
static int append(char *out, size_t cap, const char *const words[], bool spaced)
{
    size_t off = strnlen(out, cap);
    if (off == cap)
        return RIG_E_TOO_LONG;
    /* Measured first, so what does not fit leaves out untouched. */
    size_t need = 0;
    bool plain;
    for (size_t i = 0; words[i]; i++)
        need += (spaced && (off > 0 || i > 0)) + quoted_len(words[i], &plain);
    if (need >= cap - off)
        return RIG_E_TOO_LONG;
    char *w = out + off;
    for (size_t i = 0; words[i]; i++) {
        if (spaced && (off > 0 || i > 0))
            *w++ = ' ';
        quoted_len(words[i], &plain);
        w = put_word(w, words[i], plain);
    }
    *w = '\0';
    return 0;
}

int shell_quote(char *out, size_t cap, const char *s)
{
    return append(out, cap, (const char *const[]){ s, NULL }, false);
}

int shell_join(char *out, size_t cap, const char *const words[])
{
    return append(out, cap, words, true);
}

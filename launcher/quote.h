/* Words for a POSIX shell: the remote commands rig hands ssh, and what
 * `rig run --dry-run` prints. A word either fits whole or the caller gets
 * an error and its buffer as it was: never half a quoted word. */
#ifndef RIG_LAUNCHER_QUOTE_H
#define RIG_LAUNCHER_QUOTE_H

#include <stddef.h>

/* The most bytes shell_quote appends for a string of len bytes (each byte
 * a quote, '\'' for 4, plus the two outer quotes), without the NUL. */
#define SHELL_QUOTED_MAX(len) (4 * (size_t)(len) + 2)

/* Appends s to out (cap bytes, NUL-terminated within them) as one shell
 * word: as it is when every byte is safe, else in single quotes. Returns 0,
 * or RIG_E_TOO_LONG with out unchanged when the word does not fit (or out
 * holds no NUL within cap). */
int shell_quote(char *out, size_t cap, const char *s);

/* Appends words (NULL-terminated) to out, each quoted, separated by spaces
 * (one before the first when out is not empty). Returns 0, or
 * RIG_E_TOO_LONG with out unchanged. */
int shell_join(char *out, size_t cap, const char *const words[]);

#endif

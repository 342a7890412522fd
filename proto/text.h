/* A peer's text made safe to print: what an agent, a controller or a
 * stranger sends may end up in a log line or on a terminal. */
#ifndef RIG_PROTO_TEXT_H
#define RIG_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Copies n bytes of p into out (cap bytes, NUL-terminated, cut to fit):
 * bytes outside printable ASCII become '?', so the text can neither forge
 * log lines nor drive a terminal (0x1b, 0x9b); with lines, '\n' is kept.
 * Returns the length written. */
size_t text_printable(char *out, size_t cap, const uint8_t *p, size_t n, bool lines);

#endif

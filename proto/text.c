/* A peer's text made safe to print (see text.h). */
#include "proto/text.h"

size_t text_printable(char *out, size_t cap, const uint8_t *p, size_t n, bool lines)
{
    if (cap == 0)
        return 0;
    size_t i = 0;
    for (; i < n && i + 1 < cap; i++)
        out[i] = (p[i] >= 32 && p[i] < 127) || (lines && p[i] == '\n') ? (char)p[i] : '?';
    out[i] = '\0';
    return i;
}

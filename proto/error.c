/* Error lines: formatting into a caller's rig_why. */
#include "proto/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int why_set(rig_why *why, int code, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why->text, sizeof why->text, fmt, ap);
        va_end(ap);
    }
    return code;
}

int why_prefix(rig_why *why, int code, const char *fmt, ...)
{
    if (!why)
        return code;
    char prefix[RIG_WHY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[RIG_WHY_MAX];
    memcpy(old, why->text, sizeof old);
    old[sizeof old - 1] = '\0';
    /* A line longer than the buffer is cut; the cause is at its start. */
    if (snprintf(why->text, sizeof why->text, "%s: %s", prefix, old) >= (int)sizeof why->text)
        why->text[sizeof why->text - 1] = '\0';
    return code;
}

const char *rig_strerror(int code)
{
    switch (code) {
    case RIG_OK: return "ok";
    case RIG_E_MALFORMED: return "malformed";
    case RIG_E_TOO_LONG: return "too long";
    case RIG_E_TRUNCATED: return "truncated";
    case RIG_E_TRAILING: return "trailing bytes";
    case RIG_E_IO: return "i/o error";
    case RIG_E_CLOSED: return "connection closed";
    case RIG_E_TIMEOUT: return "timed out";
    case RIG_E_REFUSED: return "refused";
    case RIG_E_AUTH: return "proof does not match";
    case RIG_E_VERSION: return "version mismatch";
    case RIG_E_INVALID: return "invalid";
    case RIG_E_NOMEM: return "out of memory";
    }
    return "unknown error";
}

/* Error codes and messages shared by every part of rig.
 * Functions return 0 or a negative RIG_E_*; a rig_why, when given, receives
 * one line saying what went wrong and where. */
#ifndef RIG_PROTO_ERROR_H
#define RIG_PROTO_ERROR_H

#include <stddef.h>

enum {
    RIG_OK = 0,
    RIG_E_MALFORMED = -1,   /* peer bytes that break the format */
    RIG_E_TOO_LONG = -2,    /* a length above its limit */
    RIG_E_TRUNCATED = -3,   /* input ended inside a value */
    RIG_E_TRAILING = -4,    /* bytes left after the last value */
    RIG_E_IO = -5,          /* a system call failed (errno in the message) */
    RIG_E_CLOSED = -6,      /* the peer closed the connection */
    RIG_E_TIMEOUT = -7,     /* a deadline passed */
    RIG_E_REFUSED = -8,     /* the peer refused, with a reason */
    RIG_E_AUTH = -9,        /* a proof did not match the key */
    RIG_E_VERSION = -10,    /* the peer speaks another protocol version */
    RIG_E_INVALID = -11,    /* a bad argument, name, key or file */
    RIG_E_NOMEM = -12,
};

#define RIG_WHY_MAX 512

/* One line describing the last error; callers keep it on the stack. */
typedef struct rig_why {
    char text[RIG_WHY_MAX];
} rig_why;

/* Formats into why (NULL allowed) and returns code, so a failing path reads
 * `return why_set(why, RIG_E_INVALID, "...", ...);`. */
int why_set(rig_why *why, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Puts "PREFIX: " before the message already in why. */
int why_prefix(rig_why *why, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A constant name for a RIG_E_* code ("malformed", "timed out", ...). */
const char *rig_strerror(int code);

#endif

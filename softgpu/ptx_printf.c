/* ptx_printf: formats one device printf (vprintf) call: the format string
 * and the argument buffer are read from device memory, arguments packed
 * like a struct of the promoted types (int and unsigned 4 bytes, long,
 * pointers and doubles 8, each at its natural alignment). */
#include "softgpu/ptx_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FORMAT (64u << 10)
#define MAX_TEXT (1u << 20)

typedef struct out {
    char *s;
    size_t len, cap;
    bool oom;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->oom || o->len + n > MAX_TEXT)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *p = realloc(o->s, cap);
        if (!p) {
            o->oom = true;
            return;
        }
        o->s = p;
        o->cap = cap;
    }
    memcpy(o->s + o->len, s, n);
    o->len += n;
    o->s[o->len] = 0;
}

/* Reads a NUL-terminated device string of at most max bytes. */
static char *read_string(uint64_t addr, ptx_read_fn rd, void *ctx, size_t max, size_t *len)
{
    out o = { 0 };
    char c;
    for (size_t i = 0; i < max; i++) {
        if (!rd(ctx, addr + i, &c, 1)) {
            free(o.s);
            return NULL;
        }
        if (c == 0)
            break;
        put(&o, &c, 1);
    }
    if (!o.s)
        put(&o, "", 0);
    if (!o.s) {   /* empty string: allocate one byte */
        o.s = calloc(1, 1);
        if (!o.s)
            return NULL;
    }
    *len = o.len;
    return o.s;
}

char *ptx_read_cstring(uint64_t addr, ptx_read_fn rd, void *ctx)
{
    size_t len;
    if (!addr)
        return strdup("(null)");
    return read_string(addr, rd, ctx, MAX_FORMAT, &len);
}

int ptx_format_printf(uint64_t fmt_addr, uint64_t args, ptx_read_fn rd, void *ctx, char **text)
{
    size_t flen;
    *text = NULL;
    char *fmt = read_string(fmt_addr, rd, ctx, MAX_FORMAT, &flen);
    if (!fmt)
        return -1;
    out o = { 0 };
    uint64_t off = 0;
    int rc = 0;
    for (size_t i = 0; i < flen;) {
        if (fmt[i] != '%') {
            size_t j = i;
            while (j < flen && fmt[j] != '%')
                j++;
            put(&o, fmt + i, j - i);
            i = j;
            continue;
        }
        size_t start = i++;
        if (i < flen && fmt[i] == '%') {
            put(&o, "%", 1);
            i++;
            continue;
        }
        while (i < flen && strchr("-+ #0", fmt[i]))
            i++;
        size_t digits = 0;
        while (i < flen && fmt[i] >= '0' && fmt[i] <= '9') {
            i++;
            digits++;
        }
        if (i < flen && fmt[i] == '.') {
            i++;
            size_t prec = 0;
            while (i < flen && fmt[i] >= '0' && fmt[i] <= '9') {
                i++;
                prec++;
            }
            if (prec > digits)
                digits = prec;
        }
        if (digits > 3) {   /* width or precision over 999: print the spec as written */
            put(&o, fmt + start, i - start);
            continue;
        }
        size_t lstart = i;
        while (i < flen && strchr("hlLqjzt", fmt[i]))
            i++;
        bool wide = false;
        for (size_t k = lstart; k < i; k++)
            if (fmt[k] == 'l' || fmt[k] == 'L' || fmt[k] == 'q' || fmt[k] == 'j' ||
                fmt[k] == 'z' || fmt[k] == 't')
                wide = true;
        if (i >= flen) {   /* a lone '%' at the end: print it */
            put(&o, fmt + start, i - start);
            break;
        }
        char conv = fmt[i++];
        /* the spec without its length modifiers, then the one we pass */
        char spec[64];
        size_t body = lstart - start;
        if (body > 40) {
            put(&o, fmt + start, i - start);
            continue;
        }
        memcpy(spec, fmt + start, body);
        char buf[512];
        int n = -1;
        unsigned size;
        switch (conv) {
        case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': case 'c':
            size = wide ? 8 : 4;
            break;
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'a': case 'A':
        case 'p': case 's':
            size = 8;
            break;
        default:   /* unknown conversion: print as written */
            put(&o, fmt + start, i - start);
            continue;
        }
        off = (off + size - 1) / size * size;
        uint64_t v = 0;
        if (!args || !rd(ctx, args + off, &v, size)) {
            rc = -1;
            goto done;
        }
        off += size;
        switch (conv) {
        case 'd': case 'i':
            memcpy(spec + body, "lld", 4);
            spec[body + 2] = conv;
            n = snprintf(buf, sizeof buf, spec, size == 8 ? (long long)v : (long long)(int32_t)v);
            break;
        case 'u': case 'x': case 'X': case 'o':
            memcpy(spec + body, "llu", 4);
            spec[body + 2] = conv;
            n = snprintf(buf, sizeof buf, spec, size == 8 ? (unsigned long long)v
                                                          : (unsigned long long)(uint32_t)v);
            break;
        case 'c':
            spec[body] = 'c';
            spec[body + 1] = 0;
            n = snprintf(buf, sizeof buf, spec, (int)(int32_t)v);
            break;
        case 'p':
            spec[body] = 'p';
            spec[body + 1] = 0;
            n = snprintf(buf, sizeof buf, spec, (void *)(uintptr_t)v);
            break;
        case 's': {
            size_t slen;
            char *str = v ? read_string(v, rd, ctx, MAX_FORMAT, &slen) : NULL;
            if (v && !str) {
                rc = -1;
                goto done;
            }
            spec[body] = 's';
            spec[body + 1] = 0;
            int need = snprintf(NULL, 0, spec, str ? str : "(null)");
            if (need > 0) {
                char *tmp = malloc((size_t)need + 1);
                if (tmp) {
                    snprintf(tmp, (size_t)need + 1, spec, str ? str : "(null)");
                    put(&o, tmp, (size_t)need);
                    free(tmp);
                }
            }
            free(str);
            continue;
        }
        default: {
            double d;
            memcpy(&d, &v, 8);
            spec[body] = conv;
            spec[body + 1] = 0;
            n = snprintf(buf, sizeof buf, spec, d);
            break;
        }
        }
        if (n > 0)
            put(&o, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    }
done:
    free(fmt);
    if (rc < 0 || o.oom) {
        free(o.s);
        return -1;
    }
    if (!o.s) {
        o.s = calloc(1, 1);
        if (!o.s)
            return -1;
    }
    *text = o.s;
    return (int)o.len;
}

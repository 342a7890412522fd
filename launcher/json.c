/* A small JSON reader; see json.h. */
#include "launcher/json.h"

#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *p;
    int depth;
} parser;

static void skip(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static void clear(json *v)
{
    free(v->str);
    free(v->key);
    for (size_t i = 0; i < v->count; i++)
        clear(&v->items[i]);
    free(v->items);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static char *string(parser *ps)
{
    if (*ps->p != '"')
        return NULL;
    ps->p++;
    size_t cap = 32, n = 0;
    char *out = malloc(cap);
    while (out && *ps->p && *ps->p != '"') {
        if (n + 5 > cap) {
            char *grown = realloc(out, cap *= 2);
            if (!grown)
                break;
            out = grown;
        }
        unsigned char c = (unsigned char)*ps->p++;
        if (c < 0x20)
            break;
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        if (!*ps->p)   /* a backslash at the very end */
            goto bad;
        char e = *ps->p++;
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *at = e ? strchr(from, e) : NULL;
        if (at) {
            out[n++] = to[at - from];
        } else if (e == 'u') {
            unsigned u = 0;
            for (int i = 0; i < 4; i++) {
                int h = hexval(ps->p[i]);
                if (h < 0)
                    goto bad;
                u = u << 4 | (unsigned)h;
            }
            ps->p += 4;
            if (u < 0x80) {
                out[n++] = (char)u;
            } else if (u < 0x800) {
                out[n++] = (char)(0xC0 | u >> 6);
                out[n++] = (char)(0x80 | (u & 63));
            } else {
                out[n++] = (char)(0xE0 | u >> 12);
                out[n++] = (char)(0x80 | ((u >> 6) & 63));
                out[n++] = (char)(0x80 | (u & 63));
            }
        } else {
            goto bad;
        }
    }
    if (!out || *ps->p != '"')
        goto bad;
    ps->p++;
    out[n] = '\0';
    return out;
bad:
    free(out);
    return NULL;
}

static bool value(parser *ps, json *v);

static bool push(json *v, json *item)
{
    json *grown = realloc(v->items, (v->count + 1) * sizeof *grown);
    if (!grown)
        return false;
    v->items = grown;
    v->items[v->count++] = *item;
    return true;
}

static bool container(parser *ps, json *v, char close)
{
    ps->p++;
    if (++ps->depth > 32)
        return false;
    skip(ps);
    if (*ps->p == close) {
        ps->p++;
        ps->depth--;
        return true;
    }
    for (;;) {
        json item = { 0 };
        skip(ps);
        if (close == '}') {
            item.key = string(ps);
            skip(ps);
            if (!item.key || *ps->p != ':') {
                free(item.key);
                return false;
            }
            ps->p++;
        }
        char *key = item.key;
        if (!value(ps, &item)) {
            clear(&item);
            return false;
        }
        item.key = key;
        if (!push(v, &item)) {
            clear(&item);
            return false;
        }
        skip(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p != close)
            return false;
        ps->p++;
        ps->depth--;
        return true;
    }
}

static bool value(parser *ps, json *v)
{
    char *key = v->key;
    memset(v, 0, sizeof *v);
    v->key = key;
    skip(ps);
    char c = *ps->p;
    if (c == '{') {
        v->type = JSON_OBJECT;
        return container(ps, v, '}');
    }
    if (c == '[') {
        v->type = JSON_ARRAY;
        return container(ps, v, ']');
    }
    if (c == '"') {
        v->type = JSON_STRING;
        return (v->str = string(ps)) != NULL;
    }
    static const struct { const char *word; json_type t; bool b; } words[] = {
        { "true", JSON_BOOL, true }, { "false", JSON_BOOL, false }, { "null", JSON_NULL, false } };
    for (size_t i = 0; i < 3; i++)
        if (strncmp(ps->p, words[i].word, strlen(words[i].word)) == 0) {
            ps->p += strlen(words[i].word);
            v->type = words[i].t;
            v->b = words[i].b;
            return true;
        }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char *end;
        v->type = JSON_NUMBER;
        v->num = strtod(ps->p, &end);
        if (end == ps->p)
            return false;
        ps->p = end;
        return true;
    }
    return false;
}

json *json_parse(const char *text)
{
    parser ps = { text, 0 };
    json *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    if (!value(&ps, v)) {
        json_free(v);
        return NULL;
    }
    skip(&ps);
    if (*ps.p) {
        json_free(v);
        return NULL;
    }
    return v;
}

void json_free(json *v)
{
    if (!v)
        return;
    clear(v);
    free(v);
}

const json *json_get(const json *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (v->items[i].key && strcmp(v->items[i].key, key) == 0)
            return &v->items[i];
    return NULL;
}

const char *json_str(const json *v, const char *key)
{
    const json *m = json_get(v, key);
    return m && m->type == JSON_STRING ? m->str : "";
}

double json_num(const json *v, const char *key, double dflt)
{
    const json *m = json_get(v, key);
    return m && m->type == JSON_NUMBER ? m->num : dflt;
}

bool json_bool(const json *v, const char *key)
{
    const json *m = json_get(v, key);
    return m && m->type == JSON_BOOL && m->b;
}

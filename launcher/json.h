/* A small JSON reader for what `rig agent --probe --json` prints: objects,
 * arrays, strings (escapes decoded, \u to UTF-8), numbers, true, false and
 * null, nested at most 32 deep. */
#ifndef RIG_LAUNCHER_JSON_H
#define RIG_LAUNCHER_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json {
    json_type type;
    bool b;
    double num;
    char *str;              /* JSON_STRING; a member's key in an object */
    char *key;
    struct json *items;     /* array elements or object members */
    size_t count;
} json;

/* Parses text (the whole of it, whitespace around allowed); NULL when it is
 * not JSON. Free with json_free. */
json *json_parse(const char *text);
void json_free(json *v);

/* The member called key of an object, or NULL (also when v is not one). */
const json *json_get(const json *v, const char *key);
/* A member's string ("" when absent or not a string) or number (dflt). */
const char *json_str(const json *v, const char *key);
double json_num(const json *v, const char *key, double dflt);
bool json_bool(const json *v, const char *key);

#endif

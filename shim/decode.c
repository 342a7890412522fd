/* Decoders of agent-sent payloads; see decode.h. Every count is checked
 * against its limit before it sizes a loop or an allocation. */
#include "shim/decode.h"

#include <stdlib.h>
#include <string.h>

#include "proto/text.h"
#include "proto/wire.h"

/* A string of at most limit bytes that must end the payload. */
static int reason_in(wire_reader *r, char *out, rig_why *why)
{
    const uint8_t *s;
    size_t n = wire_get_string(r, &s, JOB_REASON_MAX);
    if (r->err == RIG_E_TOO_LONG)
        return why_set(why, RIG_E_TOO_LONG, "a reason longer than %d bytes", JOB_REASON_MAX);
    if (r->err)
        return why_set(why, r->err, "a truncated reason");
    if (wire_reader_finish(r))
        return why_set(why, RIG_E_TRAILING, "%zu bytes after a reason", wire_remaining(r));
    text_printable(out, JOB_REASON_MAX + 1, s, n, false);
    return 0;
}

int shim_decode_reason(const uint8_t *p, size_t len, char out[static JOB_REASON_MAX + 1], rig_why *why)
{
    wire_reader r = wire_reader_init(p, len);
    out[0] = '\0';
    return reason_in(&r, out, why);
}

int shim_decode_answer(const uint8_t *p, size_t len, shim_answer *a, rig_why *why)
{
    memset(a, 0, offsetof(shim_answer, why));
    a->why[0] = '\0';
    wire_reader r = wire_reader_init(p, len);
    uint8_t status = wire_get_u8(&r);
    if (r.err)
        return why_set(why, RIG_E_TRUNCATED, "an empty answer");
    if (status == 1) {
        a->refused = true;
        return reason_in(&r, a->why, why);
    }
    if (status != 0)
        return why_set(why, RIG_E_MALFORMED, "an answer of unknown kind %u", status);
    a->result = wire_get_u32(&r);
    if (r.err)
        return why_set(why, RIG_E_TRUNCATED, "an answer without its result");
    if (a->result >= SHIM_RESULT_LIMIT)
        return why_set(why, RIG_E_MALFORMED, "an answer with result %u, which is no CUresult", a->result);
    a->out = p + r.off;
    a->out_len = len - r.off;
    return 0;
}

/* One device of the open answer: string name, 16 uuid, u64 total memory,
 * u32 n, n x i32 attributes 1..n. */
static int device_in(wire_reader *r, shim_device *d, uint32_t i, rig_why *why)
{
    memset(d, 0, sizeof *d);
    const uint8_t *s;
    size_t n = wire_get_string(r, &s, sizeof d->name - 1);
    if (r->err == RIG_E_TOO_LONG)
        return why_set(why, RIG_E_TOO_LONG, "device %u has a name longer than %zu bytes", i, sizeof d->name - 1);
    /* A name is printed (deviceQuery, logs): no control bytes in it. */
    if (!r->err)
        text_printable(d->name, sizeof d->name, s, n, false);
    wire_get_bytes(r, d->uuid, 16);
    d->total_mem = wire_get_u64(r);
    uint32_t na = wire_get_u32(r);
    if (r->err)
        return why_set(why, r->err, "device %u is cut short or malformed", i);
    /* attrs[0] is no attribute: 1..na must fit below SHIM_ATTRS_MAX. */
    if (na >= SHIM_ATTRS_MAX)
        return why_set(why, RIG_E_TOO_LONG, "device %u has %u attributes, more than %d", i, na, SHIM_ATTRS_MAX - 1);
    d->attr_count = (int)na + 1;
    for (uint32_t a = 1; a <= na; a++)
        d->attrs[a] = (int32_t)wire_get_u32(r);
    if (r->err)
        return why_set(why, r->err, "the attributes of device %u are cut short", i);
    return 0;
}

int shim_decode_open(const uint8_t *p, size_t len, shim_device *devs, int room, shim_open_info *o, rig_why *why)
{
    memset(o, 0, sizeof *o);
    shim_answer a;
    int rc = shim_decode_answer(p, len, &a, why);
    if (rc < 0)
        return rc;
    if (a.refused)
        return why_set(why, RIG_E_REFUSED, "refused to open: %s", a.why);
    o->result = a.result;
    wire_reader r = wire_reader_init(a.out, a.out_len);
    if (o->result != 0) {
        if (wire_reader_finish(&r))
            return why_set(why, RIG_E_TRAILING, "%zu bytes after a failed open's result", a.out_len);
        return 0;
    }
    uint8_t taken = wire_get_u8(&r);
    if (r.err)
        return why_set(why, RIG_E_TRUNCATED, "an open answer without its window flag");
    if (taken > 1)
        return why_set(why, RIG_E_MALFORMED, "an open answer with window flag %u", taken);
    o->taken = taken;
    if (!taken) {
        if (wire_reader_finish(&r))
            return why_set(why, RIG_E_TRAILING, "%zu bytes after an open answer that took no window",
                           wire_remaining(&r));
        return 0;
    }
    o->driver_version = wire_get_u32(&r);
    const uint8_t *s;
    size_t n = wire_get_string(&r, &s, SHIM_DRIVER_MAX);
    if (r.err == RIG_E_TOO_LONG)
        return why_set(why, RIG_E_TOO_LONG, "a driver description longer than %d bytes", SHIM_DRIVER_MAX);
    if (!r.err)
        text_printable(o->driver, sizeof o->driver, s, n, false);
    uint32_t count = wire_get_u32(&r);
    if (r.err)
        return why_set(why, r.err, "an open answer cut short before its devices");
    /* Unsigned against a non-negative room: 0xFFFFFFFF is never "-1". */
    uint32_t limit = room < 0 ? 0 : (uint32_t)room;
    if (limit > SHIM_DEVICES_MAX)
        limit = SHIM_DEVICES_MAX;
    if (count > limit)
        return why_set(why, RIG_E_TOO_LONG, "%u devices, more than the %u this program has room for", count, limit);
    for (uint32_t i = 0; i < count; i++)
        if ((rc = device_in(&r, &devs[i], i, why)) < 0)
            return rc;
    if (wire_reader_finish(&r))
        return why_set(why, RIG_E_TRAILING, "%zu bytes after the device list", wire_remaining(&r));
    o->count = count;
    return 0;
}

int shim_decode_words(const uint8_t *p, size_t len, size_t *count, rig_why *why)
{
    *count = 0;
    if (len == 0 || len % rec_word_size != 0)
        return why_set(why, RIG_E_MALFORMED, "a word message of %zu bytes, not whole words", len);
    wire_reader r = wire_reader_init(p, len);
    rec_word w;
    while (wire_remaining(&r)) {
        int rc = rec_word_get(&r, &w, why);
        if (rc < 0)
            return rc;
    }
    *count = len / rec_word_size;
    return 0;
}

shim_word shim_word_at(const uint8_t *p, size_t i)
{
    /* Checked whole by shim_decode_words: this get cannot fail. */
    wire_reader r = wire_reader_init(p + i * rec_word_size, rec_word_size);
    shim_word w;
    rig_why why;
    rec_word_get(&r, &w, &why);
    return w;
}

int shim_check_word(const shim_word *w, const shim_stream_view *v, rig_why *why)
{
    unsigned long long s = w->stream, val = w->value, b = w->bytes;
    if (w->value > v->submitted || w->bytes > v->bytes_submitted)
        return why_set(why, RIG_E_MALFORMED,
                       "a word says stream %llu reached %llu (%llu bytes), beyond what was handed over to it (%llu, "
                       "%llu bytes)", s, val, b, (unsigned long long)v->submitted,
                       (unsigned long long)v->bytes_submitted);
    if (w->value < v->last_value || w->bytes < v->last_bytes)
        return why_set(why, RIG_E_MALFORMED, "a word says stream %llu reached %llu (%llu bytes), back from %llu (%llu bytes)",
                       s, val, b, (unsigned long long)v->last_value, (unsigned long long)v->last_bytes);
    if (v->first_copy && w->value >= v->first_copy)
        return why_set(why, RIG_E_MALFORMED, "a word says stream %llu reached %llu before the bytes of its copy at %llu",
                       s, val, (unsigned long long)v->first_copy);
    return 0;
}

void shim_param_info_free(shim_param_info *pi)
{
    if (!pi)
        return;
    free(pi->params);
    free(pi->attrs);
    pi->params = NULL;
    pi->attrs = NULL;
}

int shim_decode_param_info(const uint8_t *p, size_t len, shim_param_info *pi, rig_why *why)
{
    memset(pi, 0, sizeof *pi);
    wire_reader r = wire_reader_init(p, len);
    int rc = 0;
    uint32_t n = wire_get_u32(&r);
    if (r.err)
        return why_set(why, r.err, "a function's layout without its parameter count");
    if (n > SHIM_PARAMS_MAX)
        return why_set(why, RIG_E_TOO_LONG, "a function with %u parameters, more than %d", n, SHIM_PARAMS_MAX);
    pi->params = calloc(n ? n : 1, sizeof *pi->params);
    if (!pi->params) {
        rc = why_set(why, RIG_E_NOMEM, "no memory for a function's parameters");
        goto out;
    }
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t off = wire_get_u32(&r), size = wire_get_u32(&r);
        if (r.err) {
            rc = why_set(why, r.err, "a function's parameters cut short");
            goto out;
        }
        /* 64-bit sum: offset 0xFFFFFFFF plus size 2 must not wrap to 1. */
        if ((uint64_t)off + size > JOB_PARAMS_MAX) {
            rc = why_set(why, RIG_E_TOO_LONG, "parameter %u at %u of %u bytes ends past %d", i, off, size,
                         JOB_PARAMS_MAX);
            goto out;
        }
        pi->params[i] = (proxy_param){ off, size };
        if ((uint64_t)off + size > bytes)
            bytes = (uint64_t)off + size;
    }
    uint32_t na = wire_get_u32(&r);
    if (r.err) {
        rc = why_set(why, r.err, "a function's layout without its attribute count");
        goto out;
    }
    if (na > SHIM_FUNC_ATTRS_MAX) {
        rc = why_set(why, RIG_E_TOO_LONG, "a function with %u attributes, more than %d", na, SHIM_FUNC_ATTRS_MAX);
        goto out;
    }
    /* The shim reads the attributes it knows by index whatever na was. */
    pi->attrs = calloc(na > CU_FUNC_ATTRIBUTE_MAX ? na : CU_FUNC_ATTRIBUTE_MAX, sizeof *pi->attrs);
    if (!pi->attrs) {
        rc = why_set(why, RIG_E_NOMEM, "no memory for a function's attributes");
        goto out;
    }
    for (uint32_t i = 0; i < na; i++)
        pi->attrs[i] = (int32_t)wire_get_u32(&r);
    if (r.err) {
        rc = why_set(why, r.err, "a function's attributes cut short");
        goto out;
    }
    if (wire_reader_finish(&r)) {
        rc = why_set(why, RIG_E_TRAILING, "%zu bytes after a function's layout", wire_remaining(&r));
        goto out;
    }
    pi->count = n;
    pi->bytes = (uint32_t)bytes;
    pi->attr_count = na;
out:
    if (rc < 0)
        shim_param_info_free(pi);
    return rc;
}

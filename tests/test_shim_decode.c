/* The shim's decoders of agent-sent payloads (shim/decode.c): exact values
 * from valid encodings, every truncation and single-bit flip of each (a
 * result within bounds or a refusal with a reason), the limits one past
 * and at the edge, the word judge, and a seeded random loop. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/compress.h"
#include "proto/copy.h"
#include "proto/job.h"
#include "proto/wire.h"
#include "shim/decode.h"
#include "tests/support.h"
#include "tests/seed.h"

/* ---- valid encodings, as rig-agent writes them ---- */

/* An open answer: window taken, driver "softgpu", devices of n attributes. */
static size_t enc_open(uint8_t *buf, size_t cap, uint32_t devices, uint32_t attrs)
{
    wire_writer w = wire_writer_init(buf, cap);
    wire_put_u8(&w, 0);
    wire_put_u32(&w, 0);
    wire_put_u8(&w, 1);
    wire_put_u32(&w, 12080);
    wire_put_string(&w, "softgpu", 7);
    wire_put_u32(&w, devices);
    for (uint32_t d = 0; d < devices; d++) {
        char name[32];
        int n = snprintf(name, sizeof name, "device %u", d);
        wire_put_string(&w, name, (size_t)n);
        uint8_t uuid[16];
        memset(uuid, (int)(0xa0 + d), sizeof uuid);
        wire_put_bytes(&w, uuid, 16);
        wire_put_u64(&w, (uint64_t)(d + 1) << 30);
        wire_put_u32(&w, attrs);
        for (uint32_t a = 1; a <= attrs; a++)
            wire_put_u32(&w, a * 10 + d);
    }
    cr_assert_eq(w.err, 0);
    return w.off;
}

static size_t enc_answer(uint8_t *buf, size_t cap, uint32_t result, const void *out, size_t n)
{
    wire_writer w = wire_writer_init(buf, cap);
    wire_put_u8(&w, 0);
    wire_put_u32(&w, result);
    wire_put_bytes(&w, out, n);
    cr_assert_eq(w.err, 0);
    return w.off;
}

static size_t enc_refusal(uint8_t *buf, size_t cap, const char *why)
{
    wire_writer w = wire_writer_init(buf, cap);
    wire_put_u8(&w, 1);
    wire_put_string(&w, why, strlen(why));
    cr_assert_eq(w.err, 0);
    return w.off;
}

static size_t enc_words(uint8_t *buf, size_t cap, const shim_word *words, size_t n)
{
    wire_writer w = wire_writer_init(buf, cap);
    for (size_t i = 0; i < n; i++) {
        wire_put_u64(&w, words[i].stream);
        wire_put_u64(&w, words[i].value);
        wire_put_u64(&w, words[i].bytes);
    }
    cr_assert_eq(w.err, 0);
    return w.off;
}

static size_t enc_bytes(uint8_t *buf, size_t cap, uint64_t stream, uint64_t value, size_t n)
{
    wire_writer w = wire_writer_init(buf, cap);
    wire_put_u64(&w, stream);
    wire_put_u64(&w, value);
    wire_put_u8(&w, COMPRESS_RAW);
    wire_put_u32(&w, (uint32_t)n);
    wire_put_u32(&w, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        wire_put_u8(&w, (uint8_t)i);
    cr_assert_eq(w.err, 0);
    return w.off;
}

/* A kernel's layout: params (offset, size) pairs, then na attributes. */
static size_t enc_params(uint8_t *buf, size_t cap, const uint32_t *pairs, uint32_t n, uint32_t na)
{
    wire_writer w = wire_writer_init(buf, cap);
    wire_put_u32(&w, n);
    for (uint32_t i = 0; i < 2 * n; i++)
        wire_put_u32(&w, pairs[i]);
    wire_put_u32(&w, na);
    for (uint32_t a = 0; a < na; a++)
        wire_put_u32(&w, 100 + a);
    cr_assert_eq(w.err, 0);
    return w.off;
}

static const uint32_t three_params[] = { 0, 8, 8, 4, 16, 8 };

/* ---- exact values ---- */

Test(shim_decode, open_answer_values)
{
    static uint8_t buf[8192];
    static shim_device devs[SHIM_DEVICES_MAX];
    size_t n = enc_open(buf, sizeof buf, 2, CU_DEVICE_ATTRIBUTE_MAX - 1);
    shim_open_info o;
    rig_why why = { "" };
    cr_assert_eq(shim_decode_open(buf, n, devs, 4, &o, &why), 0, "%s", why.text);
    cr_assert_eq(o.result, 0);
    cr_assert(o.taken);
    cr_assert_eq(o.driver_version, 12080);
    cr_assert_str_eq(o.driver, "softgpu");
    cr_assert_eq(o.count, 2);
    cr_assert_str_eq(devs[1].name, "device 1");
    cr_assert_eq(devs[1].uuid[15], 0xa1);
    cr_assert_eq(devs[1].total_mem, (uint64_t)2 << 30);
    cr_assert_eq(devs[1].attr_count, CU_DEVICE_ATTRIBUTE_MAX);
    cr_assert_eq(devs[1].attrs[1], 11);
    cr_assert_eq(devs[1].attrs[CU_DEVICE_ATTRIBUTE_MAX - 1], (CU_DEVICE_ATTRIBUTE_MAX - 1) * 10 + 1);
}

Test(shim_decode, open_answer_window_not_taken_and_failed)
{
    uint8_t buf[16], no = 0;
    shim_device devs[1];
    shim_open_info o;
    size_t n = enc_answer(buf, sizeof buf, 0, &no, 1);
    cr_assert_eq(shim_decode_open(buf, n, devs, 1, &o, NULL), 0);
    cr_assert(!o.taken);
    cr_assert_eq(o.count, 0);
    n = enc_answer(buf, sizeof buf, CUDA_ERROR_OUT_OF_MEMORY, &no, 0);
    cr_assert_eq(shim_decode_open(buf, n, devs, 1, &o, NULL), 0);
    cr_assert_eq(o.result, CUDA_ERROR_OUT_OF_MEMORY);
    n = enc_refusal(buf, sizeof buf, "no");
    rig_why why = { "" };
    cr_assert_eq(shim_decode_open(buf, n, devs, 1, &o, &why), RIG_E_REFUSED);
    cr_assert(strstr(why.text, "refused to open: no"), "%s", why.text);
}

/* The device count in the answer, whatever it claims, against the room. */
typedef struct count_case {
    uint32_t count;
    int room;
    int rc;
} count_case;

Test(shim_decode, device_counts_past_the_room_are_refused)
{
    static const count_case cases[] = {
        { 0xFFFFFFFFu, 64, RIG_E_TOO_LONG }, { 17, 16, RIG_E_TOO_LONG },  { 1u << 20, 64, RIG_E_TOO_LONG },
        { 65, 1000, RIG_E_TOO_LONG },        { 0x80000000u, 64, RIG_E_TOO_LONG }, { 1, 0, RIG_E_TOO_LONG },
        { 1, -1, RIG_E_TOO_LONG },           { 0, 0, 0 },                  { 16, 16, 0 },
    };
    static uint8_t buf[1 << 16];
    static shim_device devs[SHIM_DEVICES_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const count_case *c = &cases[i];
        /* A full encoding of min(count, 16) devices, then the claimed count. */
        uint32_t real = c->count < 16 ? c->count : 16;
        size_t n = enc_open(buf, sizeof buf, real, 4);
        wire_store_u32(buf + 1 + 4 + 1 + 4 + 4 + 7, c->count);
        shim_open_info o;
        rig_why why = { "" };
        int rc = shim_decode_open(buf, n, devs, c->room, &o, &why);
        cr_assert_eq(rc, c->rc, "count %u room %d: rc %d (%s)", c->count, c->room, rc, why.text);
        if (rc == 0)
            cr_assert_eq(o.count, c->count);
        else
            cr_assert(strstr(why.text, "devices, more than"), "%s", why.text);
    }
}

Test(shim_decode, attribute_counts_up_to_the_table)
{
    static uint8_t buf[8192];
    static shim_device devs[2];
    shim_open_info o;
    rig_why why = { "" };
    /* attrs[0] is no attribute, so SHIM_ATTRS_MAX - 1 is the most that fits. */
    size_t n = enc_open(buf, sizeof buf, 1, SHIM_ATTRS_MAX - 1);
    cr_assert_eq(shim_decode_open(buf, n, devs, 2, &o, &why), 0, "%s", why.text);
    cr_assert_eq(devs[0].attr_count, SHIM_ATTRS_MAX);
    cr_assert_eq(devs[0].attrs[SHIM_ATTRS_MAX - 1], (SHIM_ATTRS_MAX - 1) * 10);
    uint32_t bad[] = { SHIM_ATTRS_MAX, SHIM_ATTRS_MAX + 1, 0xFFFFFFFFu };
    for (size_t i = 0; i < 3; i++) {
        n = enc_open(buf, sizeof buf, 1, SHIM_ATTRS_MAX - 1);
        size_t at = 1 + 4 + 1 + 4 + 4 + 7 + 4 + 4 + 8 + 16 + 8;
        wire_store_u32(buf + at, bad[i]);
        cr_assert_eq(shim_decode_open(buf, n, devs, 2, &o, &why), RIG_E_TOO_LONG, "%u", bad[i]);
        cr_assert(strstr(why.text, "attributes, more than"), "%s", why.text);
    }
}

Test(shim_decode, answers_and_reasons)
{
    uint8_t buf[8192], out[3] = { 7, 8, 9 };
    shim_answer a;
    rig_why why = { "" };
    size_t n = enc_answer(buf, sizeof buf, CUDA_ERROR_INVALID_VALUE, out, 3);
    cr_assert_eq(shim_decode_answer(buf, n, &a, &why), 0);
    cr_assert(!a.refused);
    cr_assert_eq(a.result, CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(a.out_len, 3);
    cr_assert_eq(a.out, buf + 5);
    n = enc_answer(buf, sizeof buf, 0xFFFFFFFFu, out, 0);
    cr_assert_eq(shim_decode_answer(buf, n, &a, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "no CUresult"), "%s", why.text);
    n = enc_answer(buf, sizeof buf, SHIM_RESULT_LIMIT, out, 0);
    cr_assert_eq(shim_decode_answer(buf, n, &a, &why), RIG_E_MALFORMED);
    buf[0] = 2;
    cr_assert_eq(shim_decode_answer(buf, n, &a, &why), RIG_E_MALFORMED);
    cr_assert_eq(shim_decode_answer(buf, 0, &a, &why), RIG_E_TRUNCATED);

    /* A refusal's reason comes back printable: no forged log lines. */
    n = enc_refusal(buf, sizeof buf, "bad\nrig: job failed: forged\x1b[31m");
    cr_assert_eq(shim_decode_answer(buf, n, &a, &why), 0);
    cr_assert(a.refused);
    cr_assert_str_eq(a.why, "bad?rig: job failed: forged?[31m");
    buf[n++] = 0;
    cr_assert_eq(shim_decode_answer(buf, n, &a, &why), RIG_E_TRAILING);

    char reason[JOB_REASON_MAX + 1];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, JOB_REASON_MAX + 1);
    cr_assert_eq(shim_decode_reason(buf, w.off, reason, &why), RIG_E_TOO_LONG);
    cr_assert(strstr(why.text, "longer than"), "%s", why.text);
    w = wire_writer_init(buf, sizeof buf);
    static char longest[JOB_REASON_MAX];
    memset(longest, 'x', sizeof longest);
    wire_put_string(&w, longest, sizeof longest);
    cr_assert_eq(shim_decode_reason(buf, w.off, reason, &why), 0);
    cr_assert_eq(strlen(reason), JOB_REASON_MAX);
}

Test(shim_decode, words_and_their_judge)
{
    uint8_t buf[256];
    shim_word in[2] = { { 5, 3, 100 }, { 9, 1, 24 } };
    size_t n = enc_words(buf, sizeof buf, in, 2), count;
    rig_why why = { "" };
    cr_assert_eq(shim_decode_words(buf, n, &count, &why), 0);
    cr_assert_eq(count, 2);
    shim_word w = shim_word_at(buf, 1);
    cr_assert(w.stream == 9 && w.value == 1 && w.bytes == 24);
    cr_assert_eq(shim_decode_words(buf, 0, &count, &why), RIG_E_MALFORMED);
    cr_assert_eq(shim_decode_words(buf, 25, &count, &why), RIG_E_MALFORMED);
    wire_store_u64(buf + 40, UINT64_MAX);
    cr_assert_eq(shim_decode_words(buf, n, &count, &why), RIG_E_MALFORMED);

    shim_stream_view v = { .submitted = 10, .bytes_submitted = 1000, .last_value = 4, .last_bytes = 400 };
    shim_word ok = { 5, 6, 600 }, same = { 5, 4, 400 };
    cr_assert_eq(shim_check_word(&ok, &v, &why), 0);
    cr_assert_eq(shim_check_word(&same, &v, &why), 0);
    shim_word bad[] = {
        { 5, 11, 600 },    /* beyond what was handed over */
        { 5, 6, 1001 },    /* more bytes than handed over */
        { 5, 3, 600 },     /* value going backwards */
        { 5, 6, 399 },     /* bytes going backwards */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why.text[0] = '\0';
        cr_assert_eq(shim_check_word(&bad[i], &v, &why), RIG_E_MALFORMED, "case %zu", i);
        cr_assert(strstr(why.text, "stream 5"), "%s", why.text);
    }
    /* A value reached before the bytes of a copy at or below it arrived. */
    v.first_copy = 6;
    cr_assert_eq(shim_check_word(&ok, &v, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "before the bytes"), "%s", why.text);
    v.first_copy = 7;
    cr_assert_eq(shim_check_word(&ok, &v, &why), 0);
}

Test(shim_decode, bytes_headers)
{
    uint8_t buf[64];
    copy_bytes_head b;
    rig_why why = { "" };
    size_t n = enc_bytes(buf, sizeof buf, 7, 3, 10);
    cr_assert_eq(copy_bytes_read(buf, n, n, &b, &why), 0, "%s", why.text);
    cr_assert(b.stream == 7 && b.value == 3 && b.data_len == 10 && b.data == buf + COPY_BYTES_HEAD &&
              b.data[9] == 9 && b.chunk.original == 10);
    /* Split after the head: the rest is counted, not present. */
    cr_assert_eq(copy_bytes_read(buf, COPY_BYTES_HEAD, n, &b, &why), 0, "%s", why.text);
    cr_assert(b.data_len == 0 && b.chunk.stored == 10);
    n = enc_bytes(buf, sizeof buf, 0, 0, 4);
    cr_assert_eq(copy_bytes_read(buf, n, n, &b, &why), 0);
    cr_assert(b.stream == 0 && b.data_len == 4);
    cr_assert_eq(copy_bytes_read(buf, n, n + 1, &b, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "stores 4 bytes"), "%s", why.text);
    buf[16] = COMPRESS_LZ4;   /* device output is never compressed (and an lz4 chunk must shrink) */
    cr_assert_eq(copy_bytes_read(buf, n, n, &b, &why), RIG_E_MALFORMED);
    n = enc_bytes(buf, sizeof buf, 0, 5, 4);
    cr_assert_eq(copy_bytes_read(buf, n, n, &b, &why), RIG_E_MALFORMED);
    n = enc_bytes(buf, sizeof buf, 5, 0, 4);
    cr_assert_eq(copy_bytes_read(buf, n, n, &b, &why), RIG_E_MALFORMED);
    cr_assert_eq(copy_bytes_read(buf, COPY_BYTES_HEAD - 1, COPY_BYTES_HEAD - 1, &b, &why), RIG_E_TRUNCATED);
    n = enc_bytes(buf, sizeof buf, 5, 1, 4);
    buf[16] = 7;
    cr_assert_eq(copy_bytes_read(buf, n, n, &b, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "method 7"), "%s", why.text);
}

Test(shim_decode, parameter_layouts)
{
    static uint8_t buf[16 + 8 * 1100 + 4 * 80];
    shim_param_info pi;
    rig_why why = { "" };
    size_t n = enc_params(buf, sizeof buf, three_params, 3, CU_FUNC_ATTRIBUTE_MAX);
    cr_assert_eq(shim_decode_param_info(buf, n, &pi, &why), 0, "%s", why.text);
    cr_assert_eq(pi.count, 3);
    cr_assert_eq(pi.bytes, 24);
    cr_assert_eq(pi.params[1].offset, 8);
    cr_assert_eq(pi.params[1].size, 4);
    cr_assert_eq(pi.attr_count, CU_FUNC_ATTRIBUTE_MAX);
    cr_assert_eq(pi.attrs[CU_FUNC_ATTRIBUTE_MAX - 1], 100 + CU_FUNC_ATTRIBUTE_MAX - 1);
    shim_param_info_free(&pi);

    /* Fewer attributes than the shim reads by index: the rest read 0. */
    n = enc_params(buf, sizeof buf, three_params, 3, 1);
    cr_assert_eq(shim_decode_param_info(buf, n, &pi, &why), 0);
    cr_assert_eq(pi.attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES], 0);
    shim_param_info_free(&pi);

    /* 1024 parameters fit, 1025 do not. */
    static uint32_t many[2 * 1025];
    for (uint32_t i = 0; i < 1025; i++) {
        many[2 * i] = i * 4;
        many[2 * i + 1] = 4;
    }
    n = enc_params(buf, sizeof buf, many, SHIM_PARAMS_MAX, 16);
    cr_assert_eq(shim_decode_param_info(buf, n, &pi, &why), 0, "%s", why.text);
    cr_assert_eq(pi.bytes, 4096);
    shim_param_info_free(&pi);
    n = enc_params(buf, sizeof buf, many, SHIM_PARAMS_MAX + 1, 16);
    cr_assert_eq(shim_decode_param_info(buf, n, &pi, &why), RIG_E_TOO_LONG);
    cr_assert_null(pi.params);

    typedef struct { uint32_t pairs[2]; uint32_t na; int rc; } layout_case;
    static const layout_case cases[] = {
        { { 0xFFFFFFFFu, 2 }, 16, RIG_E_TOO_LONG },          /* wraps in 32 bits */
        { { JOB_PARAMS_MAX, 1 }, 16, RIG_E_TOO_LONG },
        { { 0, JOB_PARAMS_MAX + 1 }, 16, RIG_E_TOO_LONG },
        { { JOB_PARAMS_MAX - 8, 8 }, 16, 0 },
        { { 0, 8 }, SHIM_FUNC_ATTRS_MAX + 1, RIG_E_TOO_LONG },
        { { 0, 8 }, SHIM_FUNC_ATTRS_MAX, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = enc_params(buf, sizeof buf, cases[i].pairs, 1, cases[i].na);
        int rc = shim_decode_param_info(buf, n, &pi, &why);
        cr_assert_eq(rc, cases[i].rc, "case %zu: %d (%s)", i, rc, why.text);
        if (rc == 0)
            cr_assert_leq(pi.bytes, JOB_PARAMS_MAX);
        shim_param_info_free(&pi);
    }
    n = enc_params(buf, sizeof buf, three_params, 3, 16);
    buf[n++] = 0;
    cr_assert_eq(shim_decode_param_info(buf, n, &pi, &why), RIG_E_TRAILING);
}

/* ---- every truncation and bit flip: in bounds or refused with a reason ---- */

static void refused_with_reason(int rc, const rig_why *why)
{
    cr_assert_lt(rc, 0);
    cr_assert(why->text[0], "refused without a reason (rc %d)", rc);
}

static void check_open(const uint8_t *p, size_t n, void *ctx)
{
    int room = *(int *)ctx;
    static shim_device devs[SHIM_DEVICES_MAX + 1];
    devs[room].name[0] = 'z';   /* the slot past the room must stay untouched */
    shim_open_info o;
    rig_why why = { "" };
    int rc = shim_decode_open(p, n, devs, room, &o, &why);
    cr_assert_eq(devs[room].name[0], 'z');
    if (rc < 0) {
        refused_with_reason(rc, &why);
        return;
    }
    cr_assert_lt(o.result, SHIM_RESULT_LIMIT);
    cr_assert_leq(o.count, (uint32_t)room);
    cr_assert(o.taken || o.count == 0);
    cr_assert_lt(strlen(o.driver), sizeof o.driver);
    for (uint32_t i = 0; i < o.count; i++) {
        cr_assert_lt(strnlen(devs[i].name, sizeof devs[i].name), sizeof devs[i].name);
        cr_assert(devs[i].attr_count >= 1 && devs[i].attr_count <= SHIM_ATTRS_MAX);
    }
}

static void check_answer(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    shim_answer a;
    rig_why why = { "" };
    int rc = shim_decode_answer(p, n, &a, &why);
    if (rc < 0) {
        refused_with_reason(rc, &why);
        return;
    }
    if (a.refused) {
        cr_assert_leq(strlen(a.why), JOB_REASON_MAX);
        for (const char *c = a.why; *c; c++)
            cr_assert((unsigned char)*c >= 0x20 && *c != 0x7f);
    } else {
        cr_assert_lt(a.result, SHIM_RESULT_LIMIT);
        cr_assert(a.out >= p && a.out + a.out_len == p + n);
    }
}

static void check_reason(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    char out[JOB_REASON_MAX + 1];
    rig_why why = { "" };
    int rc = shim_decode_reason(p, n, out, &why);
    if (rc < 0)
        refused_with_reason(rc, &why);
    else
        cr_assert_eq(strlen(out) + 4, n);
}

static void check_words(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    size_t count;
    rig_why why = { "" };
    int rc = shim_decode_words(p, n, &count, &why);
    if (rc < 0) {
        refused_with_reason(rc, &why);
        return;
    }
    cr_assert_eq(count * 24, n);
    for (size_t i = 0; i < count; i++) {
        shim_word w = shim_word_at(p, i);
        cr_assert(w.stream <= WIRE_U64_MAX && w.value <= WIRE_U64_MAX && w.bytes <= WIRE_U64_MAX);
    }
}

static void check_bytes(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    copy_bytes_head b;
    rig_why why = { "" };
    int rc = copy_bytes_read(p, n, n, &b, &why);
    if (rc < 0) {
        refused_with_reason(rc, &why);
        return;
    }
    cr_assert((b.stream == 0) == (b.value == 0));
    cr_assert(b.data == p + COPY_BYTES_HEAD && b.data_len == n - COPY_BYTES_HEAD && b.chunk.stored == b.data_len);
    /* Whatever the body, decoding stays inside both buffers. */
    uint8_t *out = malloc(b.chunk.original ? b.chunk.original : 1);
    cr_assert_not_null(out);
    rc = compress_body_decode(&b.chunk, b.data, out, b.chunk.original, &why);
    if (rc < 0)
        refused_with_reason(rc, &why);
    free(out);
}

static void check_params(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    shim_param_info pi;
    rig_why why = { "" };
    int rc = shim_decode_param_info(p, n, &pi, &why);
    if (rc < 0) {
        refused_with_reason(rc, &why);
        cr_assert(!pi.params && !pi.attrs);
        return;
    }
    cr_assert_leq(pi.count, SHIM_PARAMS_MAX);
    cr_assert_leq(pi.bytes, JOB_PARAMS_MAX);
    cr_assert_leq(pi.attr_count, SHIM_FUNC_ATTRS_MAX);
    for (uint32_t i = 0; i < pi.count; i++)
        cr_assert_leq((uint64_t)pi.params[i].offset + pi.params[i].size, pi.bytes);
    /* The shim reads these by index whatever the count: they must exist
     * (ASan fails the read otherwise), zero past what was sent. */
    if (pi.attr_count < CU_FUNC_ATTRIBUTE_MAX)
        cr_assert_eq(pi.attrs[CU_FUNC_ATTRIBUTE_MAX - 1], 0);
    shim_param_info_free(&pi);
}

Test(shim_decode, every_truncation_and_bit_flip)
{
    static uint8_t buf[8192];
    int room = 2;
    size_t n = enc_open(buf, sizeof buf, 2, 20);
    support_each_mutation(buf, n, check_open, &room);
    room = 1;   /* the same answer into a table with room for one */
    support_each_mutation(buf, n, check_open, &room);
    uint8_t no = 0;
    n = enc_answer(buf, sizeof buf, 0, &no, 1);
    room = 2;
    support_each_mutation(buf, n, check_open, &room);

    uint8_t out[16] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    n = enc_answer(buf, sizeof buf, CUDA_SUCCESS, out, sizeof out);
    support_each_mutation(buf, n, check_answer, NULL);
    n = enc_refusal(buf, sizeof buf, "malformed launch");
    support_each_mutation(buf, n, check_answer, NULL);

    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_string(&w, "CUDA:0: CUDA_ERROR_ILLEGAL_ADDRESS in kernel k", 46);
    support_each_mutation(buf, w.off, check_reason, NULL);

    shim_word words[3] = { { 3, 1, 40 }, { 4, 7, 1 << 20 }, { 3, 2, 80 } };
    n = enc_words(buf, sizeof buf, words, 3);
    support_each_mutation(buf, n, check_words, NULL);

    n = enc_bytes(buf, sizeof buf, 3, 9, 12);
    support_each_mutation(buf, n, check_bytes, NULL);
    n = enc_bytes(buf, sizeof buf, 0, 0, 5);
    support_each_mutation(buf, n, check_bytes, NULL);

    n = enc_params(buf, sizeof buf, three_params, 3, CU_FUNC_ATTRIBUTE_MAX);
    support_each_mutation(buf, n, check_params, NULL);
}

/* Random bytes and random splices of valid encodings: the same judgement. */
Test(shim_decode, seeded_random_inputs)
{
    test_srand();
    static uint8_t valid[4][2048];
    size_t lens[4] = {
        enc_open(valid[0], sizeof valid[0], 1, 8),
        enc_answer(valid[1], sizeof valid[1], 0, "abcdefgh", 8),
        enc_params(valid[2], sizeof valid[2], three_params, 3, 4),
        enc_bytes(valid[3], sizeof valid[3], 1, 1, 32),
    };
    for (int iter = 0; iter < 4000; iter++) {
        int k = rand() % 4;
        size_t n = (size_t)rand() % (lens[k] + 8);
        uint8_t *p = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
            p[i] = i < lens[k] && rand() % 8 ? valid[k][i] : (uint8_t)rand();
        int room = 1 + rand() % 3;
        check_open(p, n, &room);
        check_answer(p, n, NULL);
        check_reason(p, n, NULL);
        check_words(p, n, NULL);
        check_bytes(p, n, NULL);
        check_params(p, n, NULL);
        free(p);
    }
}

/* A device name carries no control bytes into the program's output: an
 * agent's escape sequence or newline shows as '?'. */
Test(shim_decode, device_names_lose_control_bytes)
{
    static uint8_t buf[8192];
    static shim_device devs[SHIM_DEVICES_MAX];
    size_t n = enc_open(buf, sizeof buf, 1, 4);
    /* The name "device 0" sits after the head: status, result, taken,
     * version, driver string, count, then its own u32 length. */
    size_t at = 1 + 4 + 1 + 4 + 4 + 7 + 4 + 4;
    cr_assert_eq(memcmp(buf + at, "device 0", 8), 0);
    buf[at + 6] = '\n';
    buf[at + 1] = 0x1b;
    shim_open_info o;
    rig_why why = { "" };
    cr_assert_eq(shim_decode_open(buf, n, devs, 4, &o, &why), 0, "%s", why.text);
    cr_assert_str_eq(devs[0].name, "d?vice?0");
}

/* The byte codec: round trips, limits, sticky errors, trailing bytes, and
 * every truncation and bit flip of a valid record. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/error.h"
#include "proto/text.h"
#include "proto/wire.h"
#include "tests/support.h"
#include "tests/seed.h"

static size_t encode_sample(uint8_t *buf, size_t cap)
{
    wire_writer w = wire_writer_init(buf, cap);
    wire_put_u8(&w, 0xab);
    wire_put_u16(&w, 0x1234);
    wire_put_u32(&w, 0xdeadbeef);
    wire_put_u64(&w, WIRE_U64_MAX);
    wire_put_string(&w, "hello", 5);
    cr_assert_eq(w.err, 0);
    return w.off;
}

Test(wire, little_endian_layout)
{
    uint8_t buf[64];
    size_t n = encode_sample(buf, sizeof buf);
    const uint8_t expect[] = { 0xab, 0x34, 0x12, 0xef, 0xbe, 0xad, 0xde,
                               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f,
                               5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o' };
    cr_assert_eq(n, sizeof expect);
    cr_assert_arr_eq(buf, expect, sizeof expect);
}

Test(wire, round_trip)
{
    uint8_t buf[64];
    size_t n = encode_sample(buf, sizeof buf);
    wire_reader r = wire_reader_init(buf, n);
    cr_assert_eq(wire_get_u8(&r), 0xab);
    cr_assert_eq(wire_get_u16(&r), 0x1234);
    cr_assert_eq(wire_get_u32(&r), 0xdeadbeef);
    cr_assert_eq(wire_get_u64(&r), WIRE_U64_MAX);
    const uint8_t *s;
    size_t len = wire_get_string(&r, &s, 16);
    cr_assert_eq(len, 5);
    cr_assert_arr_eq(s, "hello", 5);
    cr_assert_eq(wire_reader_finish(&r), 0);
}

Test(wire, u64_above_2_62_is_malformed)
{
    uint8_t buf[8];
    wire_store_u64(buf, WIRE_U64_MAX + 1);
    wire_reader r = wire_reader_init(buf, sizeof buf);
    cr_assert_eq(wire_get_u64(&r), 0);
    cr_assert_eq(r.err, RIG_E_MALFORMED);

    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u64(&w, UINT64_MAX);
    cr_assert_eq(w.err, RIG_E_INVALID, "the writer must refuse what readers reject");
    cr_assert_eq(w.off, 0);
}

Test(wire, string_over_limit_and_sticky)
{
    uint8_t buf[64];
    size_t n = encode_sample(buf, sizeof buf);
    wire_reader r = wire_reader_init(buf, n);
    wire_get_u8(&r);
    wire_get_u16(&r);
    wire_get_u32(&r);
    wire_get_u64(&r);
    const uint8_t *s;
    cr_assert_eq(wire_get_string(&r, &s, 4), 0);
    cr_assert_null(s);
    cr_assert_eq(r.err, RIG_E_TOO_LONG);
    /* Sticky: later gets return 0 and keep the first error. */
    cr_assert_eq(wire_get_u8(&r), 0);
    cr_assert_eq(wire_reader_finish(&r), RIG_E_TOO_LONG);
}

Test(wire, trailing_bytes_rejected)
{
    uint8_t buf[3] = { 1, 2, 3 };
    wire_reader r = wire_reader_init(buf, sizeof buf);
    wire_get_u16(&r);
    cr_assert_eq(wire_reader_finish(&r), RIG_E_TRAILING);
    cr_assert_eq(wire_remaining(&r), 1);
}

Test(wire, truncation_is_sticky)
{
    uint8_t buf[3] = { 1, 2, 3 };
    wire_reader r = wire_reader_init(buf, sizeof buf);
    cr_assert_eq(wire_get_u32(&r), 0);
    cr_assert_eq(r.err, RIG_E_TRUNCATED);
    cr_assert_eq(wire_get_u8(&r), 0, "after an error nothing more is read");
    uint8_t out[2] = { 9, 9 };
    wire_get_bytes(&r, out, 2);
    cr_assert(out[0] == 0 && out[1] == 0);
}

Test(wire, writer_overflow_is_sticky)
{
    uint8_t buf[5];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, 7);
    wire_put_u16(&w, 7);
    cr_assert_eq(w.err, RIG_E_TOO_LONG);
    cr_assert_eq(w.off, 4);
    wire_put_u8(&w, 1);
    cr_assert_eq(w.off, 4, "a failed writer writes nothing more");
}

/* A record: u32 count, then count strings of at most 8 bytes. */
static void decode_record(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    wire_reader r = wire_reader_init(p, n);
    uint32_t count = wire_get_u32(&r);
    for (uint32_t i = 0; i < count && !r.err; i++) {
        const uint8_t *s;
        size_t len = wire_get_string(&r, &s, 8);
        if (!r.err)
            cr_assert(len <= 8 && s >= p && s + len <= p + n);
    }
    wire_get_u64(&r);
    int rc = wire_reader_finish(&r);
    cr_assert(rc == 0 || rc == RIG_E_TRUNCATED || rc == RIG_E_TRAILING || rc == RIG_E_TOO_LONG ||
              rc == RIG_E_MALFORMED, "unexpected code %d", rc);
    if (n < 28)
        cr_assert_neq(rc, 0, "a truncated record must not decode");
}

Test(wire, every_truncation_and_bit_flip)
{
    uint8_t buf[64];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, 2);
    wire_put_string(&w, "abc", 3);
    wire_put_string(&w, "defgh", 5);
    wire_put_u64(&w, 42);
    cr_assert_eq(w.off, 28);
    decode_record(buf, w.off, NULL);
    support_each_mutation(buf, w.off, decode_record, NULL);
}

Test(wire, seeded_random_round_trips)
{
    unsigned seed = test_srand();
    for (int iter = 0; iter < 2000; iter++) {
        uint8_t buf[256];
        uint64_t v64 = ((uint64_t)rand() << 31 ^ (uint64_t)rand()) & WIRE_U64_MAX;
        uint32_t v32 = (uint32_t)rand();
        char s[32];
        size_t slen = (size_t)rand() % sizeof s;
        for (size_t i = 0; i < slen; i++)
            s[i] = (char)rand();
        wire_writer w = wire_writer_init(buf, sizeof buf);
        wire_put_u64(&w, v64);
        wire_put_u32(&w, v32);
        wire_put_string(&w, s, slen);
        wire_reader r = wire_reader_init(buf, w.off);
        cr_assert_eq(wire_get_u64(&r), v64, "seed %u", seed);
        cr_assert_eq(wire_get_u32(&r), v32, "seed %u", seed);
        const uint8_t *got;
        cr_assert_eq(wire_get_string(&r, &got, sizeof s), slen, "seed %u", seed);
        cr_assert(slen == 0 || memcmp(got, s, slen) == 0, "seed %u", seed);
        cr_assert_eq(wire_reader_finish(&r), 0, "seed %u", seed);
    }
}

/* A peer's text: only printable ASCII passes (and newlines when asked),
 * cut to the room there is, always NUL-terminated. */
Test(wire, peer_text_made_printable)
{
    const uint8_t in[] = "ok\n\x1b[2J\x9b\x7f\xc3\xa9!";
    char out[64];
    cr_assert_eq(text_printable(out, sizeof out, in, sizeof in - 1, false), sizeof in - 1);
    cr_assert_str_eq(out, "ok??[2J????" "!");
    text_printable(out, sizeof out, in, sizeof in - 1, true);
    cr_assert_str_eq(out, "ok\n?[2J????" "!");
    cr_assert_eq(text_printable(out, 4, in, sizeof in - 1, false), 3);
    cr_assert_str_eq(out, "ok?");
    cr_assert_eq(text_printable(out, 1, in, sizeof in - 1, false), 0);
    cr_assert_str_eq(out, "");
}

/* proto/rail.c: the rail records' layouts both ways, and every way a
 * malformed one is refused. */
#include <criterion/criterion.h>
#include <string.h>

#include "proto/job.h"
#include "proto/rail.h"
#include "proto/wire.h"

static const rail_record samples[] = {
    { .op = RAIL_SEND, .peer = 2, .device = 1, .addr = 0x200000001000, .len = RAIL_CHUNK, .signal = 7, .extra = 3 },
    { .op = RAIL_RECV, .peer = 1, .device = 0, .addr = 0x204000000000, .len = 12, .signal = 1, .extra = 9 },
    { .op = RAIL_SIGNAL, .peer = 3, .signal = 5, .extra = 41 },
    { .op = RAIL_WAIT, .peer = 64, .signal = 1ull << 40 },
};

Test(rail, records_round_trip)
{
    static const size_t lengths[] = { 40, 40, 20, 12 };
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
        uint8_t buf[48];
        size_t n = rail_encode(&samples[i], buf);
        cr_expect_eq(n, lengths[i], "record %zu: %zu bytes", i, n);
        rail_record back;
        rig_why why = { "" };
        cr_assert_eq(rail_decode(rail_job_op(samples[i].op), buf, n, &back, &why), 0, "%s", why.text);
        /* Field by field: the struct has padding memcmp would read. */
        const rail_record *want = &samples[i];
        cr_expect(back.op == want->op && back.peer == want->peer && back.device == want->device &&
                      back.addr == want->addr && back.len == want->len && back.signal == want->signal &&
                      back.extra == want->extra,
                  "record %zu changed on the way", i);
        /* Every cut and one byte more is refused, never read past. */
        for (size_t cut = 0; cut < n; cut++)
            cr_expect_eq(rail_decode(rail_job_op(samples[i].op), buf, cut, &back, &why), RIG_E_MALFORMED);
        buf[n] = 0;
        cr_expect_eq(rail_decode(rail_job_op(samples[i].op), buf, n + 1, &back, &why), RIG_E_MALFORMED);
        cr_expect(strstr(why.text, "not its layout"), "%s", why.text);
    }
    cr_expect_eq(rail_job_op(RAIL_SEND), (uint32_t)JOB_OP_RAIL_SEND);
    cr_expect_eq(rail_job_op(RAIL_WAIT), (uint32_t)JOB_OP_WAIT);
}

/* The bytes as docs/wire.md's table orders them, written out here: a swap
 * of two u64s would pass the round trip above. */
Test(rail, bytes_in_wire_md_order)
{
    uint8_t got[48], want[48];
    rail_record send = { .op = RAIL_SEND, .peer = 2, .device = 1, .addr = 0x1111, .len = 0x2222, .signal = 0x3333,
                         .extra = 0x4444 };
    size_t n = rail_encode(&send, got);
    wire_writer d = wire_writer_init(want, sizeof want);
    wire_put_u32(&d, 2);        /* peer */
    wire_put_u32(&d, 1);        /* device */
    wire_put_u64(&d, 0x1111);   /* src (dst for a receive) */
    wire_put_u64(&d, 0x2222);   /* length */
    wire_put_u64(&d, 0x3333);   /* signal */
    wire_put_u64(&d, 0x4444);   /* go (landed, for a receive) */
    cr_expect(n == d.off && memcmp(got, want, n) == 0, "rail send: other bytes than docs/wire.md's");
    rail_record sig = { .op = RAIL_SIGNAL, .peer = 3, .signal = 5, .extra = 41 };
    n = rail_encode(&sig, got);
    d = wire_writer_init(want, sizeof want);
    wire_put_u32(&d, 3);
    wire_put_u64(&d, 5);
    wire_put_u64(&d, 41);      /* event */
    cr_expect(n == d.off && memcmp(got, want, n) == 0, "signal: other bytes than docs/wire.md's");
}

static void expect_refused(rail_record r, const char *says)
{
    uint8_t buf[48];
    size_t n = rail_encode(&r, buf);
    rail_record back;
    rig_why why = { "" };
    cr_expect_eq(rail_decode(rail_job_op(r.op), buf, n, &back, &why), RIG_E_MALFORMED, "taken: %s", says);
    cr_expect(strstr(why.text, says), "\"%s\" does not say \"%s\"", why.text, says);
}

Test(rail, malformed_records_say_what)
{
    rail_record r = samples[0];
    r.peer = 0;
    expect_refused(r, "rail send: peer 0 is the controller");
    r = samples[1];
    r.len = 0;
    expect_refused(r, "rail receive: length 0 outside 1..8388608");
    r = samples[0];
    r.len = RAIL_CHUNK + 1;
    expect_refused(r, "length 8388609 outside");
    r = samples[1];
    r.device = 70000;
    expect_refused(r, "rail receive: device 70000");
    r = samples[2];
    r.signal = 0;
    expect_refused(r, "signal: signal 0");
    r = samples[3];
    r.signal = 0;
    expect_refused(r, "wait for a signal: signal 0");
    rail_record back;
    rig_why why = { "" };
    uint8_t buf[48] = { 0 };
    cr_expect_eq(rail_decode(JOB_OP_MARK, buf, 0, &back, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "is no rail record"), "%s", why.text);
}

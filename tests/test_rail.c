/* proto/rail.c: the rail records' layouts both ways, and every way a
 * malformed one is refused. */
#include <criterion/criterion.h>
#include <string.h>

#include "proto/job.h"
#include "proto/rail.h"

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
        cr_expect_eq(memcmp(&back, &samples[i], sizeof back), 0, "record %zu changed on the way", i);
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

/* The rails' record layouts; see rail.h. */
#include "proto/rail.h"

#include "proto/job.h"
#include "proto/wire.h"

uint32_t rail_job_op(rail_op op)
{
    static const uint32_t ops[] = { [RAIL_SEND] = JOB_OP_RAIL_SEND, [RAIL_RECV] = JOB_OP_RAIL_RECV,
                                    [RAIL_SIGNAL] = JOB_OP_SIGNAL, [RAIL_WAIT] = JOB_OP_WAIT };
    return ops[op];
}

size_t rail_encode(const rail_record *r, uint8_t out[static 48])
{
    wire_writer w = wire_writer_init(out, 48);
    wire_put_u32(&w, r->peer);
    switch (r->op) {
    case RAIL_SEND:
    case RAIL_RECV:
        wire_put_u32(&w, r->device);
        wire_put_u64(&w, r->addr);
        wire_put_u64(&w, r->len);
        wire_put_u64(&w, r->signal);
        wire_put_u64(&w, r->extra);
        break;
    case RAIL_SIGNAL:
        wire_put_u64(&w, r->signal);
        wire_put_u64(&w, r->extra);
        break;
    case RAIL_WAIT:
        wire_put_u64(&w, r->signal);
        break;
    }
    return w.off;
}

int rail_decode(uint32_t op, const uint8_t *p, size_t n, rail_record *r, rig_why *why)
{
    *r = (rail_record){ 0 };
    wire_reader w = wire_reader_init(p, n);
    const char *name;
    switch (op) {
    case JOB_OP_RAIL_SEND: r->op = RAIL_SEND; name = "rail send"; break;
    case JOB_OP_RAIL_RECV: r->op = RAIL_RECV; name = "rail receive"; break;
    case JOB_OP_SIGNAL: r->op = RAIL_SIGNAL; name = "signal"; break;
    case JOB_OP_WAIT: r->op = RAIL_WAIT; name = "wait for a signal"; break;
    default: return why_set(why, RIG_E_MALFORMED, "op %#x is no rail record", op);
    }
    r->peer = wire_get_u32(&w);
    if (r->op == RAIL_SEND || r->op == RAIL_RECV) {
        r->device = wire_get_u32(&w);
        r->addr = wire_get_u64(&w);
        r->len = wire_get_u64(&w);
    }
    r->signal = wire_get_u64(&w);
    if (r->op != RAIL_WAIT)
        r->extra = wire_get_u64(&w);
    if (wire_reader_finish(&w))
        return why_set(why, RIG_E_MALFORMED, "%s: %zu bytes, not its layout", name, n);
    if (r->peer == 0)
        return why_set(why, RIG_E_MALFORMED, "%s: peer 0 is the controller, not an agent", name);
    if ((r->op == RAIL_SEND || r->op == RAIL_RECV) && (r->len == 0 || r->len > RAIL_CHUNK))
        return why_set(why, RIG_E_MALFORMED, "%s: length %llu outside 1..%llu", name, (unsigned long long)r->len,
                       (unsigned long long)RAIL_CHUNK);
    if ((r->op == RAIL_SEND || r->op == RAIL_RECV) && r->device > 0xffff)
        return why_set(why, RIG_E_MALFORMED, "%s: device %u", name, r->device);
    if (r->signal == 0)
        return why_set(why, RIG_E_MALFORMED, "%s: signal 0", name);
    return 0;
}

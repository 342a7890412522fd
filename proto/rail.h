/* Rails: bytes and signals that go straight from one agent of a job to
 * another on their mesh connection (docs/design.md "Peer copies"), never
 * through the controller. The controller hands each agent its half with
 * no round trip; the layouts of those records and of the rail frame are
 * defined here once for both ends.
 *
 * A *signal* is a number the controller gives to one event between two
 * agents, from X to Y, counting from 1 for each ordered pair: "the bytes
 * of chunk k are here", "the copy may start", "it landed", "event e
 * completed". Y's stream waits for it; X sends it once it happened.
 *
 * Records (handover, each with a place on a timeline or none, proto/job.h):
 *   JOB_OP_RAIL_SEND  u32 peer, u32 device, u64 src, u64 len, u64 signal,
 *                     u64 go: copies len bytes at src (device memory of
 *                     this agent) to the peer as signal's data; on a
 *                     timeline, where the stream gets there; without one,
 *                     on the agent's own rail stream of device toward
 *                     peer, after the peer's signal go (0: at once).
 *   JOB_OP_RAIL_RECV  u32 peer, u32 device, u64 dst, u64 len, u64 signal,
 *                     u64 landed: once the peer's signal brought len
 *                     bytes, copies them to dst; then, when landed is not
 *                     0, sends the peer signal landed. Stream as above.
 *   JOB_OP_SIGNAL     u32 peer, u64 signal, u64 event: sends the peer
 *                     signal when the stream gets here (on a timeline,
 *                     event 0), or when the event (the controller's id)
 *                     completes as recorded now (no timeline).
 *   JOB_OP_WAIT       u32 peer, u64 signal: the stream waits for the
 *                     peer's signal (on a timeline only).
 * Frame rail (7), agent to agent: u64 signal, then the bytes it carries
 * (none for a bare signal). */
#ifndef RIG_PROTO_RAIL_H
#define RIG_PROTO_RAIL_H

#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

#define RAIL_HEAD 8
/* A peer copy goes in chunks of this many bytes, each its own signal, so
 * one agent's device copy of a chunk overlaps the transfer of the next. */
#define RAIL_CHUNK ((uint64_t)8 << 20)
/* Chunks of one copy in flight: chunk i + RAIL_WINDOW leaves the sending
 * agent once chunk i landed (64 MiB: a fast device never piles a whole
 * copy up in page-locked memory ahead of a slower link). */
#define RAIL_WINDOW 8

typedef enum rail_op {
    RAIL_SEND,
    RAIL_RECV,
    RAIL_SIGNAL,
    RAIL_WAIT,
} rail_op;

typedef struct rail_record {
    rail_op op;
    uint32_t peer;        /* the other agent's process number */
    uint32_t device;      /* SEND, RECV: this agent's device */
    uint64_t addr;        /* SEND: src, RECV: dst */
    uint64_t len;         /* SEND, RECV: 1..RAIL_CHUNK */
    uint64_t signal;      /* every op: >= 1 */
    uint64_t extra;       /* SEND: go, RECV: landed, SIGNAL: event (0: none) */
} rail_record;

/* The job op number of r's op (JOB_OP_RAIL_*). */
uint32_t rail_job_op(rail_op op);
/* Writes r's body into out (room for 48 bytes); returns its length. */
size_t rail_encode(const rail_record *r, uint8_t out[static 48]);
/* Reads the body of a record whose job op is op; RIG_E_MALFORMED naming
 * the field (peer 0, device past 2^16, a length of 0 or above RAIL_CHUNK,
 * signal 0, bytes short or left over). */
int rail_decode(uint32_t op, const uint8_t *p, size_t n, rail_record *r, rig_why *why);

#endif

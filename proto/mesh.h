/* The agents' mesh of a job (docs/design.md "Processes"): the controller
 * tells each agent the job's agents, and agent i dials agents i+1..n and
 * proves the key with the handshake's process numbers (i dialing j). The
 * layouts of the two requests, defined here once for both ends:
 *   JOB_OP_PEER_LISTEN  request: nothing        answer: u16 port
 *       (the agent listens for its peers on the address the controller
 *       reached it at, on that port)
 *   JOB_OP_JOIN         request: u32 self, u32 n, n x (string name, string
 *       host, u16 port), agents 1..n in order     answer: nothing, once
 *       connected to every other agent; a refusal naming both machines
 *       ("b: cannot reach c at HOST:PORT: WHY") otherwise */
#ifndef RIG_PROTO_MESH_H
#define RIG_PROTO_MESH_H

#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"
#include "proto/names.h"

#define MESH_AGENTS_MAX 64

typedef struct mesh_agent {
    char name[NAMES_NAME_MAX + 1];
    char host[NAMES_HOST_MAX + 1];
    uint16_t port;
} mesh_agent;

typedef struct mesh_join {
    uint32_t self;              /* this agent's process number, 1..n */
    uint32_t n;
    mesh_agent agents[MESH_AGENTS_MAX];   /* process number k at [k - 1] */
} mesh_join;

/* Writes the JOIN request's body (after its op) into out; its length, or
 * RIG_E_TOO_LONG when cap is short. */
int mesh_join_encode(const mesh_join *m, uint8_t *out, size_t cap, rig_why *why);
/* Reads it; RIG_E_MALFORMED naming what is wrong (self outside 1..n, n
 * above MESH_AGENTS_MAX, a bad name or host, port 0, bytes left over). */
int mesh_join_decode(const uint8_t *p, size_t n, mesh_join *m, rig_why *why);

#endif

/* The agents' mesh at cuInit (proto/mesh.h): with two agents or more, each
 * listens for the job's other agents, then each joins in turn (agent i
 * dials agents i+1..n), so that nothing about a pair of agents waits for
 * the controller later. A join that fails fails the job with the agent's
 * words, which name both machines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/job.h"
#include "proto/mesh.h"
#include "proto/wire.h"
#include "shim/link.h"
#include "shim/mesh.h"

CUresult shim_mesh_join(agent_link *links, size_t n, rig_why *why)
{
    if (n < 2)
        return CUDA_SUCCESS;
    if (n > MESH_AGENTS_MAX) {
        why_set(why, RIG_E_TOO_LONG, "%zu agents: a job's agents join a mesh of %d at most", n, MESH_AGENTS_MAX);
        return CUDA_ERROR_INVALID_VALUE;
    }
    mesh_join *join = calloc(1, sizeof *join);
    size_t cap = 64 + MESH_AGENTS_MAX * (NAMES_NAME_MAX + NAMES_HOST_MAX + 16);
    uint8_t *body = malloc(cap);
    CUresult rc = CUDA_SUCCESS;
    if (!join || !body) {
        why_set(why, RIG_E_NOMEM, "no memory for the agents' mesh");
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    join->n = (uint32_t)n;
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        uint8_t op[4];
        wire_store_u32(op, JOB_OP_PEER_LISTEN);
        struct iovec iov = { op, 4 };
        frame f;
        const uint8_t *o;
        size_t len;
        rc = link_request(&links[i], &iov, 1, &f, &o, &len);
        if (rc == CUDA_SUCCESS && len != 2)
            rc = link_malformed(&links[i], "an answer of %zu bytes to a peer-listen request", len);
        if (rc == CUDA_SUCCESS) {
            mesh_agent *a = &join->agents[i];
            snprintf(a->name, sizeof a->name, "%s", links[i].name);
            snprintf(a->host, sizeof a->host, "%s", links[i].addr.host);
            a->port = (uint16_t)(o[0] | o[1] << 8);
        }
        frame_release(&f);
    }
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        join->self = (uint32_t)(i + 1);
        wire_store_u32(body, JOB_OP_JOIN);
        int len = mesh_join_encode(join, body + 4, cap - 4, why);
        if (len < 0) {
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        struct iovec iov = { body, 4 + (size_t)len };
        frame f;
        const uint8_t *o;
        size_t olen;
        rc = link_request(&links[i], &iov, 1, &f, &o, &olen);
        frame_release(&f);
    }
    if (rc != CUDA_SUCCESS && !why->text[0])
        why_set(why, RIG_E_REFUSED, "the agents could not join: see the line above");
out:
    free(join);
    free(body);
    return rc;
}

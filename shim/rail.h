/* Work between devices of two agents that goes straight from one agent to
 * the other (rail.c). */
#ifndef RIG_SHIM_RAIL_H
#define RIG_SHIM_RAIL_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

#include "shim/proxy.h"

/* True when work between agents a and b can go on their rails (two agents
 * of the job's mesh; RIG_PEER_COPY=staged says no, for comparison). */
bool shim_rail_usable(agent_link *a, agent_link *b);
/* Copies n bytes from src (a device of one agent) to dst (a device of
 * another) in the order of stream h; wait: returns once they landed. */
CUresult shim_rail_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool per_thread, bool wait);
/* Makes proxy stream s wait for proxy event e of another agent, on the
 * agents themselves. */
CUresult shim_rail_wait_event(proxy_obj *s, proxy_obj *e);

#endif

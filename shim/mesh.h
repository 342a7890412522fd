/* The agents' mesh, joined at cuInit; see shim/mesh.c. */
#ifndef RIG_SHIM_MESH_H
#define RIG_SHIM_MESH_H

#include <stddef.h>

#include "shim/link.h"

/* Asks links[0..n) (in process-number order) to listen for each other and
 * join; nothing with fewer than two. A refusal has failed the job. */
CUresult shim_mesh_join(agent_link *links, size_t n, rig_why *why);

#endif

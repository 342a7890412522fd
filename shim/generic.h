/* The generic path for proxies: an operation marked 'G' in the table is
 * sent as its parameter kinds describe and replayed by the agent through
 * libffi; no hand-written code per operation on either end. */
#ifndef RIG_SHIM_GENERIC_H
#define RIG_SHIM_GENERIC_H

#include <cuda.h>
#include <stdbool.h>

#include "proto/cuda_ops.h"

/* True when op can go the generic way (marked 'G', every kind sendable). */
bool shim_generic_served(const cuda_op_info *op);

/* Sends op with its arguments (args[i] points at parameter i) to the agent
 * of the proxy it names, and writes the outputs back. */
CUresult shim_generic_call(const cuda_op_info *op, const void *const *args);

#endif

/* Streams and events on proxies, as the other shim files use them. */
#ifndef RIG_SHIM_STREAMS_H
#define RIG_SHIM_STREAMS_H

#include <cuda.h>
#include <stdbool.h>

#include "shim/proxy.h"

/* Resolves a stream argument. Returns 1 and *out for a proxy stream (NULL,
 * CU_STREAM_LEGACY and CU_STREAM_PER_THREAD resolve on the current proxy
 * context; per_thread: the call is a _ptsz/_ptds variant), 0 when the call
 * belongs to the local driver, or -1 with *rc for a bad handle. */
int shim_stream(CUstream h, bool per_thread, proxy_obj **out, CUresult *rc);

/* Waits for every stream of a proxy device to reach what was submitted. */
CUresult shim_sync_device(int device);

/* The per-thread default stream of a proxy device, created on first use. */
proxy_obj *shim_per_thread_stream(int device, CUresult *rc);

#endif

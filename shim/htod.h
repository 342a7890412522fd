/* Host-to-device copy records (proto/copy.h): program bytes handed over as
 * one chunk each, compressed (LZ4 or zero words) when the copy's sample and
 * the link's measured rate say it pays (docs/design.md "One copy"). */
#ifndef RIG_SHIM_HTOD_H
#define RIG_SHIM_HTOD_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shim/link.h"

/* Decides once per copy whether the n bytes at src go compressed on l, and
 * how: the method for shim_htod_record (COMPRESS_RAW: not compressed).
 * Only when the link's rate is known (a slow link) does it look at the
 * bytes, and then, when reads_program, first waits for earlier work on s
 * that writes program memory, since the sample must read what CUDA would. */
uint8_t shim_htod_compress(agent_link *l, proxy_obj *s, const void *src, size_t n, bool reads_program);

/* Hands over one record copying len (<= JOB_COPY_CHUNK) bytes at src to
 * dst on s, compressed with method when it shrinks them; *last receives its value
 * (may be NULL). quiet: a piece with more of its copy behind it, which the
 * agent reports no word for (COPY_QUIET); after_quiet: the piece before it
 * was quiet, so it must not wait for the agent's words (only its own
 * copy's next word would come). The bytes are read before it returns. */
CUresult shim_htod_record(agent_link *l, proxy_obj *s, CUdeviceptr dst, const void *src, size_t len,
                          uint8_t method, bool reads_program, bool quiet, bool after_quiet, uint64_t *last);

#endif

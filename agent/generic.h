/* Replaying an operation from its parameter kinds (the 'G' entries of
 * proto/cuda_ops.def) through libffi. */
#ifndef RIG_AGENT_GENERIC_H
#define RIG_AGENT_GENERIC_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/cuda_driver.h"
#include "proto/cuda_ops.h"
#include "proto/wire.h"

#define GENERIC_OUT_MAX 256

typedef struct generic_env {
    const cuda_driver *drv;
    void *ctx;
    /* The real handle for a handle kind and wire id on device; false when
     * the job holds no such object. */
    bool (*handle)(void *ctx, char kind, uint64_t id, int device, void **real);
    void (*use_device)(void *ctx, int device);
} generic_env;

/* True when every parameter kind can cross generically. */
bool generic_supported(const char *kinds);

/* Decodes the arguments after the op number (u32 device, then one value
 * per parameter by kind), calls the driver, and writes the outputs (in
 * parameter order) to out. A decoding or handle error returns a CUresult
 * with why set; a driver result is returned with why empty. */
CUresult generic_call(const generic_env *env, const cuda_op_info *op, wire_reader *r, uint8_t *out,
                      size_t *out_len, char *why, size_t whylen);

#endif

/* The wire layouts of tensor maps (cuTensorMapEncodeTiled,
 * cuTensorMapReplaceAddress), which the agent's driver encodes: the
 * descriptor is 128 bytes the program passes into kernels unchanged.
 *
 * tiled:   u32 data type, u32 rank (1..5), u64 global address, 5 x u64
 *          global dims, 4 x u64 global strides, 5 x u32 box dims, 5 x u32
 *          element strides, u32 interleave, u32 swizzle, u32 L2 promotion,
 *          u32 OOB fill (entries past the rank are 0)
 *  cuTensorMapEncodeTiled     request u32 device, tiled -> 128 bytes
 *  cuTensorMapReplaceAddress  request u32 device, 128 bytes, u64 address
 *                             -> 128 bytes */
#ifndef RIG_PROTO_TENSORMAP_H
#define RIG_PROTO_TENSORMAP_H

#include <stdint.h>

#include "proto/wire.h"

#define TENSORMAP_RANK_MAX 5
#define TENSORMAP_BYTES 128
#define TENSORMAP_TILED_BYTES 144

typedef struct tensormap_tiled {
    uint32_t type, rank;
    uint64_t address;
    uint64_t dim[TENSORMAP_RANK_MAX], stride[TENSORMAP_RANK_MAX - 1];
    uint32_t box[TENSORMAP_RANK_MAX], estride[TENSORMAP_RANK_MAX];
    uint32_t interleave, swizzle, l2, oob;
} tensormap_tiled;

void tensormap_put_tiled(wire_writer *w, const tensormap_tiled *t);
/* A rank outside 1..5 sets the reader's error. */
void tensormap_get_tiled(wire_reader *r, tensormap_tiled *t);

#endif

/* The wire layouts of CUDA arrays, texture and surface objects and 3-D
 * copies, used by the shim to write and the agent to read. Array and
 * mipmapped-array handles travel as the controller's object ids; device
 * pointers as they are (they are the same on both ends). Floats travel as
 * their 32-bit patterns.
 *
 * array descriptor: u64 width, u64 height, u64 depth, u32 format,
 *                   u32 channels, u32 flags
 * resource:         u32 type, then array/mipmap: u64 id; linear: u64 pointer,
 *                   u32 format, u32 channels, u64 bytes; pitch2D: u64 pointer,
 *                   u32 format, u32 channels, u64 width, u64 height,
 *                   u64 pitch; then u32 flags
 * texture:          u32 address modes[3], u32 filter, u32 flags,
 *                   u32 max anisotropy, u32 mipmap filter, f32 level bias,
 *                   f32 min level, f32 max level, f32 border[4]
 * view:             u8 0 (none) | u8 1, u32 format, u64 width, u64 height,
 *                   u64 depth, u32 first level, u32 last level,
 *                   u32 first layer, u32 last layer
 * copy side:        u8 kind (IMAGE_SIDE_*), u64 at (pointer or array id),
 *                   u64 x (bytes), u64 y, u64 z, u64 pitch, u64 height
 *
 * Requests and records that carry them (ops of proto/cuda_ops.def):
 *  cuArray3DCreate_v2       request u64 id, u32 device, array descriptor
 *  cuMipmappedArrayCreate   request u64 id, u32 device, array descriptor, u32 levels
 *  cuMipmappedArrayGetLevel request u64 mipmap id, u32 level, u64 new id
 *  cuTexObjectCreate        request u64 id, u32 device, resource, texture, view
 *                           -> u64 the object's value
 *  cuSurfObjectCreate       request u64 id, u32 device, resource -> u64 value
 *  cuArrayGetMemoryRequirements, cuMipmappedArrayGetMemoryRequirements
 *                           request u64 array or mipmap id, u32 device
 *                           -> u64 size, u64 alignment
 *  cuMemcpy3DAsync_v2       handover: src side, dst side, u64 width (bytes),
 *                           u64 height, u64 depth, then the packed bytes of a
 *                           program source; a program destination gets
 *                           packed bytes back (width x height x depth)
 *  drops cuArrayDestroy, cuMipmappedArrayDestroy, cuTexObjectDestroy,
 *  cuSurfObjectDestroy name the id. */
#ifndef RIG_PROTO_IMAGES_H
#define RIG_PROTO_IMAGES_H

#include <cuda.h>
#include <stdbool.h>

#include "proto/wire.h"

enum {
    IMAGE_SIDE_PROGRAM = 0,   /* the program's memory: packed bytes on the wire */
    IMAGE_SIDE_DEVICE = 1,
    IMAGE_SIDE_ARRAY = 2,
};

typedef struct image_side {
    uint8_t kind;
    uint64_t at;
    uint64_t x, y, z, pitch, height;
} image_side;

#define IMAGE_ARRAY_DESC_BYTES 36
#define IMAGE_RESOURCE_MAX 48
#define IMAGE_TEXTURE_BYTES 56
#define IMAGE_VIEW_MAX 45
#define IMAGE_SIDE_BYTES 49

void image_put_array_desc(wire_writer *w, const CUDA_ARRAY3D_DESCRIPTOR *d);
void image_get_array_desc(wire_reader *r, CUDA_ARRAY3D_DESCRIPTOR *d);
/* id: the wire id of the resource's array or mipmapped array (else unused). */
void image_put_resource(wire_writer *w, const CUDA_RESOURCE_DESC *d, uint64_t id);
/* Fills *d with handles left NULL and the array's id in *id; an unknown
 * type sets the reader's error. */
void image_get_resource(wire_reader *r, CUDA_RESOURCE_DESC *d, uint64_t *id);
void image_put_texture(wire_writer *w, const CUDA_TEXTURE_DESC *d);
void image_get_texture(wire_reader *r, CUDA_TEXTURE_DESC *d);
/* v may be NULL (no view). */
void image_put_view(wire_writer *w, const CUDA_RESOURCE_VIEW_DESC *v);
/* False when the view is absent. */
bool image_get_view(wire_reader *r, CUDA_RESOURCE_VIEW_DESC *v);
void image_put_side(wire_writer *w, const image_side *s);
/* An unknown kind sets the reader's error. */
void image_get_side(wire_reader *r, image_side *s);

#endif

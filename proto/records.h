/* rig's own record layouts, each defined once in proto/records.def and
 * expanded here for both ends (docs/wire.md). For each layout NAME:
 *   rec_NAME          its fields; a tail is a pointer and NAME_len
 *   rec_NAME_size     the bytes of its fields (a tail's not counted)
 *   rec_NAME_put      writes the fields into w (a full writer sets w->err);
 *                     the tail is the caller's to send after them
 *   rec_NAME_get      reads the fields from r, every get bounds-checked,
 *                     then (LAYOUT) the tail as a view into r's buffer and
 *                     wire_reader_finish, or (LAYOUT_HEAD) nothing more;
 *                     0, or RIG_E_TRUNCATED, RIG_E_TRAILING, RIG_E_TOO_LONG
 *                     or RIG_E_MALFORMED with why naming the layout and the
 *                     field. Nothing is allocated; v points into r's bytes. */
#ifndef RIG_PROTO_RECORDS_H
#define RIG_PROTO_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"
#include "proto/images.h"
#include "proto/job.h"
#include "proto/wire.h"

/* A 2-D copy's direction. */
enum {
    REC_COPY_TO_DEVICE = 0,    /* the packed rows travel in the record */
    REC_COPY_TO_PROGRAM = 1,   /* they come back in a bytes frame */
    REC_COPY_DEVICE = 2,       /* device to device */
};

#define REC_STREAM_ATTR_BYTES 64                      /* sizeof(CUstreamAttrValue) */
#define REC_BATCH_OP_BYTES 48                         /* sizeof(CUstreamBatchMemOpParams) */
#define REC_ATOMIC_OPS_MAX (4 * CU_ATOMIC_OPERATION_MAX)   /* operations in one capability request */

_Static_assert(sizeof(CUstreamAttrValue) == REC_STREAM_ATTR_BYTES, "the wire carries 64 bytes an attribute value");
_Static_assert(sizeof(CUstreamBatchMemOpParams) == REC_BATCH_OP_BYTES, "the wire carries 48 bytes an operation");

/* The kinds of fields: C type and wire size. */
#define REC_C_U8 uint8_t
#define REC_C_U32 uint32_t
#define REC_C_I32 int32_t
#define REC_C_U64 uint64_t
#define REC_C_SIDE image_side
#define REC_SIZE_U8 1
#define REC_SIZE_U32 4
#define REC_SIZE_I32 4
#define REC_SIZE_U64 8
#define REC_SIZE_SIDE IMAGE_SIDE_BYTES

/* The structs. */
#define LAYOUT(name, what) typedef struct rec_##name {
#define FIELD(kind, name) REC_C_##kind name;
#define FIELD_ARRAY(kind, name, n) REC_C_##kind name[n];
#define FIELD_BYTES(name, n) uint8_t name[n];
#define TAIL(name, max) const uint8_t *name; size_t name##_len;
#define TAIL_OF(name, count, size) TAIL(name, 0)
#define LAYOUT_END(name) } rec_##name;
#include "proto/records.def"

/* The sizes of their fields. */
#define LAYOUT(name, what) enum { rec_##name##_size = 0
#define FIELD(kind, name) + REC_SIZE_##kind
#define FIELD_ARRAY(kind, name, n) + REC_SIZE_##kind * (n)
#define FIELD_BYTES(name, n) + (n)
#define LAYOUT_END(name) };
#include "proto/records.def"

/* Cross-field rules the decoders apply (records.c). */
bool rec_copy_2d_fits(const rec_copy_2d *v);
bool rec_copy_3d_fits(const rec_copy_3d *v);

/* The encoders and decoders. */
#define LAYOUT(name, what)                                                      \
    void rec_##name##_put(wire_writer *w, const rec_##name *v);                 \
    int rec_##name##_get(wire_reader *r, rec_##name *v, rig_why *why);
#define FIELD(kind, name)
#define FIELD_ARRAY(kind, name, n)
#define FIELD_BYTES(name, n)
#define LAYOUT_END(name)
#include "proto/records.def"

#endif

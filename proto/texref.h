/* The wire layouts of texture and surface references on proxies (the
 * requests the shim's own code sends; scalar setters and getters go the
 * generic way). A reference is an object the controller names by id; the
 * agent's is its driver's reference of the module the controller named.
 * Every request is u32 op, u64 reference id, then:
 *  cuModuleGetTexRef, cuModuleGetSurfRef  u64 module id, u32 name length,
 *                                         name bytes -> nothing
 *  cuTexRefSetArray, cuTexRefSetMipmappedArray, cuSurfRefSetArray
 *                                         u64 array or mipmap id, u32 flags
 *                                         -> nothing
 *  cuTexRefSetAddress_v2                  u64 address, u64 bytes
 *                                         -> u64 byte offset
 *  cuTexRefSetAddress2D_v3                u64 width, u64 height, u32 format,
 *                                         u32 channels, u64 address, u64 pitch
 *                                         -> nothing
 *  cuTexRefSetBorderColor                 4 x f32 (bits) -> nothing */
#ifndef RIG_PROTO_TEXREF_H
#define RIG_PROTO_TEXREF_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/wire.h"

#define TEXREF_NAME_MAX 1024

typedef struct texref_req {
    uint32_t op;
    uint64_t ref;
    uint64_t object;          /* module, array or mipmapped array id */
    const char *name;         /* module lookups: not NUL-terminated */
    uint32_t name_len;
    uint32_t flags;
    uint64_t address, bytes;  /* SetAddress; SetAddress2D: address and pitch (bytes) */
    uint64_t width, height;
    uint32_t format, channels;
    float border[4];
} texref_req;

/* True for the ops this layout carries. */
bool texref_op(uint32_t op);
/* Writes the request after nothing (op first). */
void texref_put_request(wire_writer *w, const texref_req *q);
/* Reads the request after its op (q->op set by the caller); an unknown op
 * or a name too long sets the reader's error. name points into the reader. */
void texref_get_request(wire_reader *r, texref_req *q);

#endif

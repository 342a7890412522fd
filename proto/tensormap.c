/* Encoder and decoder of proto/tensormap.h. */
#include "proto/tensormap.h"

#include <string.h>

#include "proto/error.h"

void tensormap_put_tiled(wire_writer *w, const tensormap_tiled *t)
{
    wire_put_u32(w, t->type);
    wire_put_u32(w, t->rank);
    wire_put_u64(w, t->address);
    for (int i = 0; i < TENSORMAP_RANK_MAX; i++)
        wire_put_u64(w, t->dim[i]);
    for (int i = 0; i < TENSORMAP_RANK_MAX - 1; i++)
        wire_put_u64(w, t->stride[i]);
    for (int i = 0; i < TENSORMAP_RANK_MAX; i++)
        wire_put_u32(w, t->box[i]);
    for (int i = 0; i < TENSORMAP_RANK_MAX; i++)
        wire_put_u32(w, t->estride[i]);
    wire_put_u32(w, t->interleave);
    wire_put_u32(w, t->swizzle);
    wire_put_u32(w, t->l2);
    wire_put_u32(w, t->oob);
}

void tensormap_get_tiled(wire_reader *r, tensormap_tiled *t)
{
    memset(t, 0, sizeof *t);
    t->type = wire_get_u32(r);
    t->rank = wire_get_u32(r);
    t->address = wire_get_u64(r);
    for (int i = 0; i < TENSORMAP_RANK_MAX; i++)
        t->dim[i] = wire_get_u64(r);
    for (int i = 0; i < TENSORMAP_RANK_MAX - 1; i++)
        t->stride[i] = wire_get_u64(r);
    for (int i = 0; i < TENSORMAP_RANK_MAX; i++)
        t->box[i] = wire_get_u32(r);
    for (int i = 0; i < TENSORMAP_RANK_MAX; i++)
        t->estride[i] = wire_get_u32(r);
    t->interleave = wire_get_u32(r);
    t->swizzle = wire_get_u32(r);
    t->l2 = wire_get_u32(r);
    t->oob = wire_get_u32(r);
    if (t->rank == 0 || t->rank > TENSORMAP_RANK_MAX)
        r->err = RIG_E_MALFORMED;
}

/* The job's objects, indexed by the ids the controller chose: ids are slot
 * numbers of the controller's arena, so a growable array serves. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

#define IDS_MAX (1u << 20)

agent_obj *objects_get(object_table *t, uint64_t id, agent_obj_type type)
{
    if (id >= t->cap || !t->v[id])
        return NULL;
    agent_obj *o = t->v[id];
    return type == 0 || o->type == type ? o : NULL;
}

agent_obj *objects_put(object_table *t, uint64_t id, agent_obj_type type, int device)
{
    if (id == 0 || id >= IDS_MAX) {
        errno = EINVAL;
        return NULL;
    }
    if (id >= t->cap) {
        uint64_t cap = t->cap ? t->cap : 1024;
        while (cap <= id)
            cap *= 2;
        agent_obj **grown = realloc(t->v, cap * sizeof *grown);
        if (!grown) {
            errno = ENOMEM;
            return NULL;
        }
        memset(grown + t->cap, 0, (cap - t->cap) * sizeof *grown);
        t->v = grown;
        t->cap = cap;
    }
    if (t->v[id]) {
        errno = EEXIST;
        return NULL;
    }
    agent_obj *o = calloc(1, sizeof *o);
    if (!o) {
        errno = ENOMEM;
        return NULL;
    }
    o->type = type;
    o->device = device;
    t->v[id] = o;
    return o;
}

void objects_remove(object_table *t, uint64_t id)
{
    if (id < t->cap && t->v[id]) {
        if (t->v[id]->type == AOBJ_FUNCTION)
            free(t->v[id]->u.fn.name);
        free(t->v[id]);
        t->v[id] = NULL;
    }
}

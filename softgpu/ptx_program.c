/* ptx_program: the soft_program accessors of engine.h and its lifetime. */
#include "softgpu/ptx_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void soft_program_free(soft_program *g)
{
    if (!g)
        return;
    for (uint32_t i = 0; i < g->nfuncs; i++) {
        ptx_func *f = &g->funcs[i];
        free(f->name);
        free(f->refusal);
        free(f->param_off);
        free(f->param_size);
        free(f->ret_off);
        free(f->ret_size);
        free(f->kparams);
        free(f->shared_used);
    }
    for (uint32_t i = 0; i < g->nglobals; i++) {
        free(g->globals[i].name);
        free(g->globals[i].init);
    }
    for (uint32_t i = 0; i < g->ncalls; i++) {
        free(g->calls[i].args);
        free(g->calls[i].rets);
    }
    for (uint32_t i = 0; i < g->nrefs; i++)
        free(g->refs[i].name);
    free(g->refs);
    free(g->code);
    free(g->funcs);
    free(g->entries);
    free(g->globals);
    free(g->consts);
    free(g->calls);
    free(g->relocs);
    free(g->mmas);
    free(g->reg_width);
    free(g);
}

uint32_t soft_program_entry_count(const soft_program *g)
{
    return g ? g->nentries : 0;
}

CUresult soft_program_refuse_all(soft_program *g, const char *why)
{
    for (uint32_t i = 0; i < g->nentries; i++) {
        ptx_func *f = &g->funcs[g->entries[i]];
        if (f->refusal)
            continue;
        if (!(f->refusal = strdup(why)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        f->info.refusal = f->refusal;
    }
    return CUDA_SUCCESS;
}

const soft_entry_info *soft_program_entry(const soft_program *g, uint32_t i)
{
    if (!g || i >= g->nentries)
        return NULL;
    return &g->funcs[g->entries[i]].info;
}

int soft_program_find_entry(const soft_program *g, const char *name)
{
    if (!g || !name)
        return -1;
    for (uint32_t i = 0; i < g->nentries; i++)
        if (strcmp(g->funcs[g->entries[i]].name, name) == 0)
            return (int)i;
    return -1;
}

uint32_t soft_program_global_count(const soft_program *g)
{
    return g ? g->nglobals : 0;
}

uint32_t soft_program_target(const soft_program *g)
{
    return g ? g->target : 0;
}

const soft_global_info *soft_program_global(const soft_program *g, uint32_t i)
{
    if (!g || i >= g->nglobals)
        return NULL;
    return &g->globals[i].info;
}

void soft_program_bind_global(soft_program *g, uint32_t i, uint64_t addr)
{
    if (g && i < g->nglobals) {
        g->globals[i].addr = addr;
        g->bind_gen++;
        /* Addresses of variables in initialisers: the storage is host memory
         * at the device address, already holding the initialiser. */
        for (uint32_t k = 0; k < g->nrelocs; k++) {
            const ptx_reloc *r = &g->relocs[k];
            const ptx_global *h = &g->globals[r->holder], *t = &g->globals[r->target];
            if ((r->holder != i && r->target != i) || !h->addr || !t->addr)
                continue;
            uint64_t v = t->addr + (uint64_t)r->addend;
            memcpy((void *)(uintptr_t)(h->addr + r->offset), &v, 8);
        }
    }
}

CUresult soft_program_check_params(const soft_program *g, uint32_t entry, size_t size,
                                   char *msg, size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    if (!g || entry >= g->nentries) {
        if (msg && msglen)
            snprintf(msg, msglen, "no such entry");
        return CUDA_ERROR_INVALID_VALUE;
    }
    const soft_entry_info *e = &g->funcs[g->entries[entry]].info;
    if (size != e->param_bytes) {
        if (msg && msglen)
            snprintf(msg, msglen, "kernel %s takes %u bytes of parameters, given %zu", e->name,
                     e->param_bytes, size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

uint32_t soft_program_ref_count(const soft_program *g)
{
    return g ? g->nrefs : 0;
}

const char *soft_program_ref(const soft_program *g, uint32_t i, bool *surface)
{
    if (!g || i >= g->nrefs)
        return NULL;
    if (surface)
        *surface = g->refs[i].surface;
    return g->refs[i].name;
}

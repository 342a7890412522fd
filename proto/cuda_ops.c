/* The operation table expanded from proto/cuda_ops.def, with lookups. */
#include "proto/cuda_ops.h"

#include <stdlib.h>
#include <string.h>

const cuda_op_info cuda_ops[] = {
#define RIG_CUDA_OP(op, sym, base, ver, variant, kinds, served) \
    { op, variant, served, ver, #sym, #base, kinds },
#include "proto/cuda_ops.def"
#undef RIG_CUDA_OP
};

const size_t cuda_ops_count = sizeof cuda_ops / sizeof cuda_ops[0];

const cuda_op_info *cuda_op_by_number(uint32_t op)
{
    static const cuda_op_info *by_number[CUDA_OP_SLOTS];
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        /* Idempotent fill: racing threads write the same values. */
        for (size_t i = 0; i < cuda_ops_count; i++)
            if (cuda_ops[i].op < CUDA_OP_SLOTS)
                by_number[cuda_ops[i].op] = &cuda_ops[i];
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return op < CUDA_OP_SLOTS ? by_number[op] : NULL;
}

const cuda_op_info *cuda_op_by_symbol(const char *symbol)
{
    for (size_t i = 0; i < cuda_ops_count; i++)
        if (strcmp(cuda_ops[i].symbol, symbol) == 0)
            return &cuda_ops[i];
    return NULL;
}

static int compare_base(const void *key, const void *elem)
{
    return strcmp(key, ((const cuda_op_info *)elem)->base);
}

long cuda_op_first_of_base(const char *base)
{
    const cuda_op_info *hit = bsearch(base, cuda_ops, cuda_ops_count, sizeof cuda_ops[0], compare_base);
    if (!hit)
        return -1;
    while (hit > cuda_ops && strcmp(hit[-1].base, base) == 0)
        hit--;
    return hit - cuda_ops;
}

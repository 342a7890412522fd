/* The generated operation table: complete against the toolkit's stub
 * libcuda.so, unique numbers, and lookups that agree with each other. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "tests/support.h"

Test(cuda_ops, covers_every_stub_export)
{
    /* The toolkit's stub driver exports exactly the names rig must export. */
    FILE *p = popen("nm -D --defined-only " CUDA_STUB " | awk '$2 == \"T\" {print $3}'", "r");
    cr_assert_not_null(p);
    char name[256];
    int count = 0;
    while (fscanf(p, "%255s", name) == 1) {
        cr_assert_not_null(cuda_op_by_symbol(name), "%s is missing from the table", name);
        count++;
    }
    pclose(p);
    cr_assert_eq(count, 637, "the stub exports %d functions", count);
    cr_assert_eq(cuda_ops_count, 637);
}

Test(cuda_ops, numbers_unique_and_lookups_agree)
{
    for (size_t i = 0; i < cuda_ops_count; i++) {
        const cuda_op_info *op = &cuda_ops[i];
        cr_assert(op->op > 0 && op->op < 2048, "%s has number %u", op->symbol, op->op);
        cr_assert_eq(cuda_op_by_number(op->op), op, "%s", op->symbol);
        cr_assert_eq(cuda_op_by_symbol(op->symbol), op);
        long first = cuda_op_first_of_base(op->base);
        cr_assert_geq(first, 0);
        cr_assert_leq((size_t)first, i);
        cr_assert(op->served == 'S' || op->served == 'G' || op->served == '-');
    }
    cr_assert_null(cuda_op_by_number(0));
    cr_assert_null(cuda_op_by_number(70000));
    cr_assert_eq(cuda_op_first_of_base("cuNoSuchThing"), -1);
}

Test(cuda_ops, versions_line_up_with_symbols)
{
    const cuda_op_info *v1 = cuda_op_by_symbol("cuCtxSynchronize");
    const cuda_op_info *v2 = cuda_op_by_symbol("cuCtxSynchronize_v2");
    cr_assert(v1 && v2);
    cr_assert_eq(v1->version, 2000);
    cr_assert_eq(v2->version, 13000);
    cr_assert_str_eq(v2->kinds, "C");
    const cuda_op_info *ptds = cuda_op_by_symbol("cuMemcpyHtoD_v2_ptds");
    cr_assert(ptds && ptds->variant == CUDA_PTDS && ptds->version == 3020);
    cr_assert_str_eq(ptds->base, "cuMemcpyHtoD");
    const cuda_op_info *launch = cuda_op_by_symbol("cuLaunchKernel_ptsz");
    cr_assert(launch && launch->variant == CUDA_PTSZ);
    cr_assert_str_eq(launch->kinds, "FuuuuuuuSpp");
    const cuda_op_info *alloc = cuda_op_by_symbol("cuMemAlloc_v2");
    cr_assert_str_eq(alloc->kinds, "8q");
}

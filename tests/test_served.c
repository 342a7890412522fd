/* The table's word on what proxies serve matches the shim as built: an
 * entry marked 'S' is defined by rig's own code (a strong symbol in
 * librigshim.so), every other entry by the generic weak export. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proto/cuda_ops.h"

Test(served, table_matches_the_shim)
{
    FILE *p = popen("nm -D --defined-only " RIG_BUILD_DIR "/librigshim.so", "r");
    cr_assert_not_null(p);
    char addr[64], type[8], name[256];
    int strong = 0, weak = 0, checked = 0;
    while (fscanf(p, "%63s %7s %255s", addr, type, name) == 3) {
        const cuda_op_info *op = cuda_op_by_symbol(name);
        if (!op)
            continue;
        checked++;
        if (op->served == 'S') {
            cr_expect_str_eq(type, "T", "%s is marked served but the shim has no code of its own for it", name);
            strong++;
        } else {
            cr_expect_str_eq(type, "W", "%s is not marked served but the shim defines it", name);
            weak++;
        }
    }
    pclose(p);
    cr_assert_eq(checked, (int)cuda_ops_count, "every table entry is exported");
    cr_log_info("%d served by rig's code, %d generic or refused", strong, weak);
}

/* libFuzzer: the shim's decoders of answers and abort reasons (shim/decode.c). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shim/decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    shim_answer a;
    rig_why why;
    if (shim_decode_answer(data, size, &a, &why) == 0 && !a.refused && a.out + a.out_len != data + size)
        __builtin_trap();
    char reason[JOB_REASON_MAX + 1];
    if (shim_decode_reason(data, size, reason, &why) == 0 && strlen(reason) + 4 != size)
        __builtin_trap();
    /* A function's parameter layout arrives in an answer's outputs. */
    shim_param_info pi;
    if (shim_decode_param_info(data, size, &pi, &why) == 0) {
        for (uint32_t i = 0; i < pi.count; i++)
            if ((uint64_t)pi.params[i].offset + pi.params[i].size > pi.bytes || pi.bytes > JOB_PARAMS_MAX)
                __builtin_trap();
        (void)pi.attrs[CU_FUNC_ATTRIBUTE_MAX - 1];
        shim_param_info_free(&pi);
    }
    return 0;
}

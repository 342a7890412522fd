/* libFuzzer: the shim's decoder of bytes messages (shim/decode.c). */
#include <stddef.h>
#include <stdint.h>

#include "shim/decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    shim_bytes b;
    rig_why why;
    if (shim_decode_bytes(data, size, &b, &why) == 0 &&
        (b.data + b.len != data + size || (b.stream == 0) != (b.value == 0)))
        __builtin_trap();
    return 0;
}

/* libFuzzer: the bytes frame's head as the shim reads it (proto/copy.c),
 * and the decoding of its chunk into a destination of the size it claims. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "proto/copy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    copy_bytes_head b;
    rig_why why;
    if (copy_bytes_read(data, size, size, &b, &why) != 0)
        return 0;
    if (b.data + b.data_len != data + size || (b.stream == 0) != (b.value == 0) || b.chunk.stored != b.data_len)
        __builtin_trap();
    uint8_t *out = malloc(b.chunk.original ? b.chunk.original : 1);
    if (out)
        compress_body_decode(&b.chunk, b.data, out, b.chunk.original, &why);
    free(out);
    return 0;
}

/* libFuzzer: the byte codec reading a record of mixed fields. */
#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_reader r = wire_reader_init(data, size);
    uint32_t count = wire_get_u32(&r);
    for (uint32_t i = 0; i < count && !r.err; i++) {
        const uint8_t *s;
        wire_get_string(&r, &s, 64);
        wire_get_u64(&r);
        wire_get_u16(&r);
    }
    (void)wire_reader_finish(&r);
    return 0;
}

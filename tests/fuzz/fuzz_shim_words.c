/* libFuzzer: the shim's decoder of word messages and its judge of each
 * word against a stream (shim/decode.c); the first 40 bytes are the view. */
#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"
#include "shim/decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 40)
        return 0;
    shim_stream_view v = { wire_load_u64(data), wire_load_u64(data + 8), wire_load_u64(data + 16),
                           wire_load_u64(data + 24), wire_load_u64(data + 32) };
    size_t count;
    rig_why why;
    if (shim_decode_words(data + 40, size - 40, &count, &why) < 0)
        return 0;
    if (count * 24 != size - 40)
        __builtin_trap();
    for (size_t i = 0; i < count; i++) {
        shim_word w = shim_word_at(data + 40, i);
        if (shim_check_word(&w, &v, &why) == 0 &&
            (w.value > v.submitted || w.bytes > v.bytes_submitted || w.value < v.last_value))
            __builtin_trap();
    }
    return 0;
}

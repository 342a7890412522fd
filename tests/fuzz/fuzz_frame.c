/* libFuzzer: the frame decoder, fed the input in pieces whose sizes come
 * from the input's first byte. */
#include <stddef.h>
#include <stdint.h>

#include "proto/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t piece = 1 + data[0] % 17;
    data++;
    size--;
    frame_decoder d;
    frame_decoder_init(&d, 1 << 16);
    size_t off = 0;
    while (off < size) {
        size_t n = size - off < piece ? size - off : piece;
        size_t used;
        frame f;
        int rc = frame_decoder_feed(&d, data + off, n, &used, &f, NULL);
        off += used;
        if (rc < 0)
            break;
        if (rc == 1)
            frame_release(&f);
    }
    frame_decoder_reset(&d);
    return 0;
}

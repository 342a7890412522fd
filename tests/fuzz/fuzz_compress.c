/* libFuzzer: compressed chunks (proto/compress.c) as a receiver decodes
 * them, into room of exactly the length the header claims (capped), and
 * what decodes must be that length. */
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/compress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < COMPRESS_HEADER_SIZE)
        return 0;
    compress_header h;
    if (compress_header_read(data, &h, NULL) != 0)
        return 0;
    size_t cap = h.original > (1u << 20) ? (1u << 20) : h.original;
    uint8_t *out = malloc(cap ? cap : 1);
    size_t consumed, len;
    if (out && decompress_chunk(data, size, out, cap, &consumed, &len, NULL) == 0 &&
        (len != h.original || consumed > size))
        abort();
    free(out);
    return 0;
}

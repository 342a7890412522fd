/* libFuzzer: the texture reference requests (proto/texref.c) as the agent
 * reads them: an op, then its layout. */
#include <stddef.h>
#include <stdint.h>

#include "proto/texref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_reader r = wire_reader_init(data, size);
    texref_req q = { .op = wire_get_u32(&r) };
    texref_get_request(&r, &q);
    (void)texref_op(q.op);
    (void)wire_reader_finish(&r);
    return 0;
}

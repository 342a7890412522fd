/* libFuzzer: the handshake's greeting decoder. */
#include <stddef.h>
#include <stdint.h>

#include "proto/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_greeting g;
    rig_why why;
    (void)hs_decode_greeting(data, size, &g, &why);
    return 0;
}

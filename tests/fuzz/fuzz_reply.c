/* libFuzzer: the handshake's reply decoder. */
#include <stddef.h>
#include <stdint.h>

#include "proto/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_reply r;
    rig_why why;
    (void)hs_decode_reply(data, size, &r, &why);
    return 0;
}

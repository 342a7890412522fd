/* libFuzzer: the handshake's dialing-message decoder. */
#include <stddef.h>
#include <stdint.h>

#include "proto/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_dial_msg m;
    rig_why why;
    (void)hs_decode_dial(data, size, &m, &why);
    return 0;
}

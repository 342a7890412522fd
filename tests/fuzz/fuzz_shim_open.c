/* libFuzzer: the shim's decoder of the open answer (shim/decode.c). The
 * first byte picks the room the device table has. */
#include <stddef.h>
#include <stdint.h>

#include "shim/decode.h"

static shim_device devs[SHIM_DEVICES_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int room = data[0] % (SHIM_DEVICES_MAX + 1);
    shim_open_info o;
    rig_why why;
    if (shim_decode_open(data + 1, size - 1, devs, room, &o, &why) == 0) {
        if (o.count > (uint32_t)room)
            __builtin_trap();
        for (uint32_t i = 0; i < o.count; i++)
            if (devs[i].attr_count < 1 || devs[i].attr_count > SHIM_ATTRS_MAX)
                __builtin_trap();
    }
    return 0;
}

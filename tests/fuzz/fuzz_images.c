/* libFuzzer: the layouts of arrays, textures and 3-D copies
 * (proto/images.c) and tensor maps (proto/tensormap.c), as the agent reads a request or record: each decoder
 * in turn on what the previous one left. */
#include <stddef.h>
#include <stdint.h>

#include "proto/images.h"
#include "proto/tensormap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_reader r = wire_reader_init(data, size);
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC t;
    CUDA_RESOURCE_VIEW_DESC v;
    image_side s;
    uint64_t id;
    image_get_array_desc(&r, &d);
    image_get_resource(&r, &res, &id);
    image_get_texture(&r, &t);
    (void)image_get_view(&r, &v);
    image_get_side(&r, &s);
    image_get_side(&r, &s);
    tensormap_tiled tm;
    tensormap_get_tiled(&r, &tm);
    (void)wire_reader_finish(&r);
    return 0;
}

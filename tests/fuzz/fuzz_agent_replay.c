/* libFuzzer: the agent's replay of a controller's request, handover and
 * drop frames, on softgpu in this process, after the frames of a small
 * valid job (so the input can name its allocation, module, kernel and
 * stream). The input's first byte picks the frame kind; a fresh job per
 * input. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/replay_rig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const frame_kind kinds[] = { FRAME_REQUEST, FRAME_HANDOVER, FRAME_DROP };
    if (size == 0)
        return 0;
    char why[600] = "";
    replay_rig *r = replay_rig_new(RIG_SOFTGPU, why, sizeof why);
    if (!r) {
        fprintf(stderr, "no job on softgpu: %s\n", why);
        abort();
    }
    replay_script s;
    if (!replay_script_run(r, &s, why, sizeof why)) {
        fprintf(stderr, "the valid job failed: %s\n", why);
        abort();
    }
    replay_rig_frame(r, kinds[data[0] % 3], data + 1, size - 1);
    replay_script_free(&s);
    replay_rig_free(r);
    return 0;
}

/* `rig run --gpus N`: which devices of which machines a job gets, from
 * what each machine's probe answered. */
#ifndef RIG_LAUNCHER_PLACEMENT_H
#define RIG_LAUNCHER_PLACEMENT_H

#include <stddef.h>

#include "launcher/json.h"

#define PLACEMENT_MAX 64

typedef struct placement_machine {
    const char *name;
    const json *answer;         /* the probe's answer, or a standing agent's
                                   status ("busy", "machine"); NULL: down */
} placement_machine;

typedef struct placement_device {
    size_t machine;             /* index into the machines given */
    int ordinal;
    double free, memory;        /* bytes */
    const char *name;           /* the device's, from the answer */
} placement_device;

typedef struct placement {
    size_t count, machines;
    placement_device d[PLACEMENT_MAX];   /* grouped by machine, most free memory first */
} placement;

/* Picks gpus devices with at least min_free bytes free on machines that are
 * up and not busy, over the fewest machines, and among those the devices
 * with the most free memory. -1 with why (what there is) when they are not
 * there. */
int placement_plan(const placement_machine *m, size_t n, int gpus, double min_free, placement *out, char *why,
                   size_t cap);
/* "20G", "512M", "1.5T", "4096" (bytes): binary units; -1 when not a size. */
int placement_parse_size(const char *text, double *bytes);

#endif

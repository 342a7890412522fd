/* Probing machines: `RIG agent --probe --json` on each (over ssh, or here
 * for `local`), all at once, for `rig probe`, `rig ls` and `rig run --gpus`. */
#ifndef RIG_LAUNCHER_PROBE_H
#define RIG_LAUNCHER_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/child.h"
#include "launcher/json.h"
#include "launcher/targets.h"

#define PROBE_TIMEOUT_MS 20000
#define PROBE_OUT_MAX (1 << 20)

typedef struct probe {
    const target *t;
    child c;
    char *out;
    size_t outlen;
    char err[2048];
    size_t errlen;
    bool exited;
    json *answer;
    char why[700];              /* when there is no answer */
} probe;

/* Probes ps[0..n) (each with t set and its descriptors -1) until each has
 * answered or PROBE_TIMEOUT_MS passed: answer, or why it has none. */
void probe_all(probe *ps, size_t n, const char *rig);
void probe_free(probe *p);

#endif

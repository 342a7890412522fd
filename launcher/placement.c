/* Placement for `rig run --gpus N`; see placement.h. */
#include "launcher/placement.h"

#include <math.h>   /* isfinite */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct candidate {
    size_t machine;
    int count;                  /* its devices with enough free memory */
    double best_free;           /* the free memory of its best min(count, gpus) */
    placement_device d[PLACEMENT_MAX];
} candidate;

static int by_free(const void *a, const void *b)
{
    const placement_device *x = a, *y = b;
    return x->free < y->free ? 1 : x->free > y->free ? -1 : x->ordinal - y->ordinal;
}

/* More usable devices first (fewest machines), then the most free memory,
 * then the order of the targets file. */
static int by_use(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->count != y->count)
        return y->count - x->count;
    if (x->best_free != y->best_free)
        return x->best_free < y->best_free ? 1 : -1;
    return x->machine < y->machine ? -1 : 1;
}

int placement_plan(const placement_machine *m, size_t n, int gpus, double min_free, placement *out, char *why,
                   size_t cap)
{
    memset(out, 0, sizeof *out);
    if (gpus < 1 || gpus > PLACEMENT_MAX) {
        snprintf(why, cap, "--gpus takes 1 to %d", PLACEMENT_MAX);
        return -1;
    }
    candidate *c = calloc(n ? n : 1, sizeof *c);
    if (!c) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    size_t used = 0, total = 0, down = 0, busy = 0;
    for (size_t i = 0; i < n; i++) {
        if (!m[i].answer) {
            down++;
            continue;
        }
        if (json_bool(m[i].answer, "busy")) {
            busy++;
            continue;
        }
        candidate *k = &c[used];
        k->machine = i;
        /* A probe's answer, or a standing agent's status (its machine's). */
        const json *devs = json_get(m[i].answer, "devices");
        if (!devs)
            devs = json_get(json_get(m[i].answer, "machine"), "devices");
        for (size_t j = 0; devs && devs->type == JSON_ARRAY && j < devs->count && k->count < PLACEMENT_MAX; j++) {
            const json *d = &devs->items[j];
            double free = json_num(d, "free", 0);
            if (free < min_free)
                continue;
            k->d[k->count++] = (placement_device){ i, (int)json_num(d, "ordinal", (double)j), free,
                                                   json_num(d, "memory", 0), json_str(d, "name") };
        }
        if (k->count == 0)
            continue;
        qsort(k->d, (size_t)k->count, sizeof k->d[0], by_free);
        int take = k->count < gpus ? k->count : gpus;
        for (int j = 0; j < take; j++)
            k->best_free += k->d[j].free;
        total += (size_t)k->count;
        used++;
    }
    if (total < (size_t)gpus) {
        snprintf(why, cap,
                 "%d device%s wanted, %zu free with enough memory (of %zu machine%s: %zu down, %zu busy)", gpus,
                 gpus == 1 ? "" : "s", total, n, n == 1 ? "" : "s", down, busy);
        free(c);
        return -1;
    }
    /* The fewest machines: while none can finish alone, the one with the
     * most usable devices gives them all; then, of those that can finish,
     * the one whose best devices have the most free memory. */
    qsort(c, used, sizeof c[0], by_use);
    bool *taken = calloc(used ? used : 1, sizeof *taken);
    if (!taken) {
        free(c);
        snprintf(why, cap, "out of memory");
        return -1;
    }
    for (int left = gpus; left > 0;) {
        size_t pick = used;
        double best = -1;
        for (size_t j = 0; j < used; j++) {
            if (taken[j] || c[j].count < left)
                continue;
            double sum = 0;
            for (int k = 0; k < left; k++)
                sum += c[j].d[k].free;
            if (sum > best) {
                best = sum;
                pick = j;
            }
        }
        if (pick == used)   /* sorted: the first not taken has the most */
            for (pick = 0; taken[pick]; pick++)
                ;
        taken[pick] = true;
        int take = c[pick].count < left ? c[pick].count : left;
        for (int k = 0; k < take; k++)
            out->d[out->count++] = c[pick].d[k];
        out->machines++;
        left -= take;
    }
    free(taken);
    free(c);
    return 0;
}

int placement_parse_size(const char *text, double *bytes)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !isfinite(v) || v < 0)
        return -1;
    double unit = 1;
    if (*end) {
        const char *units = "KMGT";
        const char *u = strchr(units, *end == 'k' ? 'K' : *end);
        if (!u || !*u)
            return -1;
        for (const char *k = units; k <= u; k++)
            unit *= 1024;
        end++;
        if (*end == 'i')
            end++;
        if (*end == 'B')
            end++;
        if (*end)
            return -1;
    }
    *bytes = v * unit;
    return 0;
}

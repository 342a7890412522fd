/* Opening a driver library and resolving the table's symbols in it. */
#include "proto/cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int cuda_driver_open(cuda_driver *d, const char *path, bool deep, const char *refuse_marker, rig_why *why)
{
    memset(d, 0, sizeof *d);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | (deep ? RTLD_DEEPBIND : 0));
    if (!h)
        return why_set(why, RIG_E_INVALID, "cannot load the driver %s: %s", path, dlerror());
    if (refuse_marker && dlsym(h, refuse_marker)) {
        dlclose(h);
        return why_set(why, RIG_E_INVALID, "%s is rig's own shim, not a driver", path);
    }
    d->handle = h;
    snprintf(d->path, sizeof d->path, "%s", path);
#define RIG_CUDA_OP(op, sym, base, ver, variant, kinds, served) \
    d->by_op[op] = *(void **)&d->fn_##sym = dlsym(h, #sym);
#include "proto/cuda_ops.def"
#undef RIG_CUDA_OP
    if (!d->fn_cuInit) {
        dlclose(h);
        memset(d, 0, sizeof *d);
        return why_set(why, RIG_E_INVALID, "%s has no cuInit: not a CUDA driver", path);
    }
    return 0;
}

void cuda_driver_close(cuda_driver *d)
{
    if (d && d->handle) {
        dlclose(d->handle);
        d->handle = NULL;
    }
}

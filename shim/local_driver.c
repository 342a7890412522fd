/* Finds and loads the real driver for local devices. */
#include "shim/local_driver.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/log.h"

static shim_driver driver;
static const shim_driver *loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* True when handle is this very library (the system's libcuda.so.1 may be
 * the shim itself, e.g. when it is installed under that name). */
static int is_self(void *handle)
{
    void *ours = dlsym(handle, "rig_shim_marker");
    return ours != NULL;
}

/* Candidate system paths for libcuda.so.1, other than through the loader's
 * search (which would find the preloaded shim by SONAME). */
static const char *const system_paths[] = {
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
};

static void *open_driver(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
        shim_log(SHIM_LOG_DEBUG, "local driver %s: %s", path, dlerror());
        return NULL;
    }
    if (is_self(h)) {
        dlclose(h);
        return NULL;
    }
    return h;
}

static void load(void)
{
    const char *chosen = getenv("RIG_LOCAL_DRIVER");
    void *h = NULL;
    if (chosen && *chosen) {
        if (strcmp(chosen, "none") == 0)
            return;
        h = open_driver(chosen);
        if (!h) {
            shim_log(SHIM_LOG_ERROR, "RIG_LOCAL_DRIVER=%s cannot be loaded: %s", chosen, dlerror());
            return;
        }
    } else {
        for (size_t i = 0; i < sizeof system_paths / sizeof system_paths[0] && !h; i++)
            if ((h = open_driver(system_paths[i])))
                chosen = system_paths[i];
    }
    if (!h)
        return;
    driver.handle = h;
    snprintf(driver.path, sizeof driver.path, "%s", chosen);
#define RIG_CUDA_OP(op, sym, base, ver, variant, kinds, served) \
    *(void **)&driver.fn_##sym = dlsym(h, #sym);
#include "proto/cuda_ops.def"
#undef RIG_CUDA_OP
    if (!driver.fn_cuInit) {
        shim_log(SHIM_LOG_ERROR, "local driver %s has no cuInit: not a CUDA driver", chosen);
        dlclose(h);
        return;
    }
    shim_log(SHIM_LOG_DEBUG, "local driver: %s", chosen);
    loaded = &driver;
}

const shim_driver *shim_local_driver(void)
{
    pthread_once(&once, load);
    return loaded;
}

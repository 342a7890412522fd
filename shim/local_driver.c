/* Finds and loads the real driver for local devices. */
#include "shim/local_driver.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/log.h"

static shim_driver driver;
static const shim_driver *loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The loader's own search would find the preloaded shim by its SONAME, so
 * the system's driver is looked for at its usual paths. */
static const char *const system_paths[] = {
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
};

static void load(void)
{
    rig_why why = { "" };
    const char *chosen = getenv("RIG_LOCAL_DRIVER");
    if (chosen && *chosen) {
        if (strcmp(chosen, "none") == 0)
            return;
        if (cuda_driver_open(&driver, chosen, true, "rig_shim_marker", &why) != 0) {
            shim_log(SHIM_LOG_ERROR, "RIG_LOCAL_DRIVER: %s", why.text);
            return;
        }
    } else {
        size_t i = 0;
        for (; i < sizeof system_paths / sizeof system_paths[0]; i++)
            if (cuda_driver_open(&driver, system_paths[i], true, "rig_shim_marker", &why) == 0)
                break;
        if (i == sizeof system_paths / sizeof system_paths[0])
            return;
    }
    shim_log(SHIM_LOG_DEBUG, "local driver: %s", driver.path);
    loaded = &driver;
}

const shim_driver *shim_local_driver(void)
{
    pthread_once(&once, load);
    return loaded;
}

/* The driver the agent replays on. */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"

static const char *const system_paths[] = {
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
};

static int try_open(backend *b, const char *path, const char *kind, char *why, size_t whylen)
{
    rig_why w = { "" };
    /* No RTLD_DEEPBIND: nothing here exports driver names, and sanitizers
     * refuse it. */
    if (cuda_driver_open(&b->drv, path, false, "rig_shim_marker", &w) != 0) {
        snprintf(why, whylen, "%s", w.text);
        return -1;
    }
    CUresult rc = b->drv.fn_cuInit(0);
    int n = 0;
    if (rc == CUDA_SUCCESS)
        rc = b->drv.fn_cuDeviceGetCount(&n);
    if (rc != CUDA_SUCCESS || n <= 0) {
        snprintf(why, whylen, "%s: no device (cuInit/cuDeviceGetCount gave %d)", path, rc);
        cuda_driver_close(&b->drv);
        return -1;
    }
    snprintf(b->kind, sizeof b->kind, "%s", kind);
    /* softgpu's contract (softgpu/alloc.c): bytes for its devices may go
     * between the socket and device memory in place (agent/in_place.c). */
    b->host_memory = strcmp(kind, "softgpu") == 0;
    b->device_count = n < AGENT_DEVICES_MAX ? n : AGENT_DEVICES_MAX;
    return 0;
}

int backend_open(backend *b, const char *path, char *why, size_t whylen)
{
    memset(b, 0, sizeof *b);
    /* The shim in this process (an LD_PRELOAD meant for the program) would
     * take the driver's names: softgpu's calls among its own entry points
     * would go to it and fail as CUDA_ERROR_NOT_INITIALIZED mid-job. */
    if (dlsym(RTLD_DEFAULT, "rig_shim_marker")) {
        snprintf(why, whylen, "rig's shim (librigshim.so) is loaded into the agent, most likely by LD_PRELOAD; "
                              "it stands in for the driver the agent replays on: start rig-agent without it");
        return -1;
    }
    int rc = -1;
    if (path) {
        const char *base = strrchr(path, '/');
        rc = try_open(b, path, strstr(base ? base : path, "cudasoft") ? "softgpu" : "driver", why, whylen);
    } else {
        for (size_t i = 0; i < sizeof system_paths / sizeof system_paths[0] && rc < 0; i++)
            if (access(system_paths[i], R_OK) == 0)
                rc = try_open(b, system_paths[i], "GPU driver", why, whylen);
        if (rc < 0) {
            char exe[4096];
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (n > 0) {
                exe[n] = '\0';
                const char *dir = dirname(exe);
                /* Beside the program in a build folder; PREFIX/lib/rig once
                 * installed (the program in PREFIX/bin or PREFIX/sbin). */
                static const char *const places[] = { "%s/libcudasoft.so", "%s/../lib/rig/libcudasoft.so" };
                for (size_t i = 0; i < 2 && rc < 0; i++) {
                    char soft[4200];
                    snprintf(soft, sizeof soft, places[i], dir);
                    if (i == 0 || access(soft, R_OK) == 0)
                        rc = try_open(b, soft, "softgpu", why, whylen);
                }
            }
        }
    }
    if (rc < 0)
        return rc;
    for (int d = 0; d < b->device_count; d++) {
        CUresult r = b->drv.fn_cuDevicePrimaryCtxRetain(&b->primary[d], d);
        if (r != CUDA_SUCCESS) {
            snprintf(why, whylen, "%s: cannot retain the primary context of device %d (%d)", b->drv.path, d, r);
            return -1;
        }
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d } };
        size_t g = 0;
        if (b->drv.fn_cuMemGetAllocationGranularity &&
            b->drv.fn_cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
            g > b->granularity)
            b->granularity = g;
    }
    if (!b->granularity)
        b->granularity = 2 << 20;
    return 0;
}

void backend_reset(backend *b)
{
    staging_drop(b);
    for (int d = 0; d < b->device_count; d++)
        b->drv.fn_cuDevicePrimaryCtxReset_v2(d);
}

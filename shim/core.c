/* The shim's core state: which devices exist and which handles belong to
 * proxies. For now every device is local (issue 4 adds the proxies). */
#include "shim/core.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shim/local_driver.h"

/* Marks this library so the local-driver search never loads the shim itself. */
__attribute__((visibility("default"))) const char rig_shim_marker[] = "rig shim";

bool shim_is_proxy_handle(const void *h)
{
    (void)h;
    return false;
}

bool shim_current_is_proxy(void)
{
    return false;
}

int shim_device_count(void)
{
    const shim_driver *d = shim_local_driver();
    int n = 0;
    if (!d || !d->fn_cuDeviceGetCount || d->fn_cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return 0;
    return n;
}

/* Primary contexts handed out through export table 2: retained once per
 * device on first request and kept, as the table's contract has no release. */
static CUcontext primaries[64];
static pthread_mutex_t primaries_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult shim_primary_context(CUdevice dev, CUcontext *out)
{
    const shim_driver *d = shim_local_driver();
    if (!d)
        return CUDA_ERROR_NO_DEVICE;
    if (dev < 0 || dev >= 64 || dev >= shim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primaries_lock);
    CUresult rc = CUDA_SUCCESS;
    if (!primaries[dev])
        rc = d->fn_cuDevicePrimaryCtxRetain(&primaries[dev], dev);
    *out = primaries[dev];
    pthread_mutex_unlock(&primaries_lock);
    return rc;
}

CUresult shim_device_identity(CUdevice dev, uint8_t uuid[16], int *pci_domain, int *pci_bus,
                              int *pci_device)
{
    const shim_driver *d = shim_local_driver();
    if (!d)
        return CUDA_ERROR_NO_DEVICE;
    CUuuid u;
    CUresult rc = d->fn_cuDeviceGetUuid_v2 ? d->fn_cuDeviceGetUuid_v2(&u, dev) : d->fn_cuDeviceGetUuid(&u, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    memcpy(uuid, u.bytes, 16);
    if ((rc = d->fn_cuDeviceGetAttribute(pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev)) ||
        (rc = d->fn_cuDeviceGetAttribute(pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev)) ||
        (rc = d->fn_cuDeviceGetAttribute(pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev)))
        return rc;
    return CUDA_SUCCESS;
}

const char *shim_current_device_label(void)
{
    static __thread char label[32];
    const shim_driver *d = shim_local_driver();
    CUdevice dev = -1;
    if (!d || !d->fn_cuCtxGetDevice || d->fn_cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return "no device";
    snprintf(label, sizeof label, "CUDA:%d", dev);
    return label;
}

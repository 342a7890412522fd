/* The CUDA runtime's integrity check (export table 7, slot 1): an HMAC-MD2
 * over this process, thread, the tables and every device, which the
 * runtime recomputes from what it was told and compares
 * (cudaErrorSoftwareValidityNotEstablished when it differs). The record
 * and key are as measured (docs/cudart.md). */
#include "softgpu/driver.h"

#include <string.h>
#include <unistd.h>

static const uint8_t key[16] = {
    0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52, 0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F,
};

/* The fixed answers to versions ending in 0 and 1 (not verified). */
static const uint64_t answer0[2] = { 0x3341181C03CB675Cull, 0x8ED383AA1F4CD1E8ull };
static const uint64_t answer1[2] = { 0x1841181C03CB675Cull, 0x8ED383AA1F4CD1E8ull };

typedef struct head {
    uint32_t driver_version, version, pid, thread;
    const void *runtime_table, *integrity_table, *integrity_fn;
    uint64_t unix_seconds;
} head;

typedef struct device_record {
    uint8_t uuid[16];
    int32_t pci_domain, pci_bus, pci_device;
} device_record;

_Static_assert(sizeof(head) == 48, "the runtime hashes a 48-byte record");
_Static_assert(sizeof(device_record) == 28, "and 28 bytes a device");

CUresult soft_integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (version % 10 < 2) {
        memcpy(out, version % 10 ? answer1 : answer0, 16);
        return CUDA_SUCCESS;
    }
    int driver = 0;
    SOFT_TRY(cuDriverGetVersion(&driver));
    uint8_t msg[sizeof(head) + SOFT_MAX_DEVICES * sizeof(device_record)];
    memset(msg, 0, sizeof msg);
    head h = {
        .driver_version = (uint32_t)driver, .version = version, .pid = (uint32_t)getpid(),
        .thread = (uint32_t)pthread_self(), .runtime_table = soft_table_runtime,
        .integrity_table = soft_table_integrity, .integrity_fn = soft_table_integrity[1],
        .unix_seconds = unix_seconds,
    };
    memcpy(msg, &h, sizeof h);
    int n = soft_device_count();
    for (int d = 0; d < n && d < SOFT_MAX_DEVICES; d++) {
        device_record r;
        memset(&r, 0, sizeof r);
        int domain = 0, bus = 0, device = 0;
        SOFT_TRY(cuDeviceGetUuid_v2((CUuuid *)r.uuid, d));
        SOFT_TRY(cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d));
        SOFT_TRY(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d));
        SOFT_TRY(cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d));
        r.pci_domain = domain;
        r.pci_bus = bus;
        r.pci_device = device;
        memcpy(msg + sizeof h + (size_t)d * sizeof r, &r, sizeof r);
    }
    uint8_t mac[16];
    soft_hmac_md2(key, msg, sizeof(head) + (size_t)n * sizeof(device_record), mac);
    memcpy(out, mac, sizeof mac);
    return CUDA_SUCCESS;
}

/* The CUDA runtime's integrity check (export table 7, slot 1): an HMAC-MD2
 * over this process, thread, the tables and every device the program sees,
 * which the runtime recomputes and compares (cudaErrorSoftwareValidity-
 * NotEstablished when it differs). Layout and key as measured: docs/cudart.md. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "shim/core.h"
#include "shim/export_tables.h"
#include "shim/md2.h"

static const uint8_t integrity_key[16] = {
    0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52, 0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F,
};

/* The fixed answers for versions ending in 0 and 1 (not verified by cudart). */
static const uint64_t answer_v0[2] = { 0x3341181C03CB675Cull, 0x8ED383AA1F4CD1E8ull };
static const uint64_t answer_v1[2] = { 0x1841181C03CB675Cull, 0x8ED383AA1F4CD1E8ull };

typedef struct integrity_head {
    uint32_t driver_version;
    uint32_t version;
    uint32_t pid;
    uint32_t thread;
    const void *runtime_table;
    const void *integrity_table;
    const void *integrity_fn;
    uint64_t unix_seconds;
} integrity_head;

typedef struct integrity_device {
    uint8_t uuid[16];
    int32_t pci_domain;
    int32_t pci_bus;
    int32_t pci_device;
} integrity_device;

_Static_assert(sizeof(integrity_head) == 48, "the record the runtime hashes is 48 bytes");
_Static_assert(sizeof(integrity_device) == 28, "a device record is 28 bytes");

CUresult shim_integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (version % 10 == 0) {
        memcpy(out, answer_v0, sizeof answer_v0);
        return CUDA_SUCCESS;
    }
    if (version % 10 == 1) {
        memcpy(out, answer_v1, sizeof answer_v1);
        return CUDA_SUCCESS;
    }
    integrity_head head;
    memset(&head, 0, sizeof head);
    head.driver_version = SHIM_DRIVER_VERSION;
    head.version = version;
    head.pid = (uint32_t)getpid();
    head.thread = (uint32_t)pthread_self();
    head.runtime_table = shim_table_runtime;
    head.integrity_table = shim_table_integrity;
    head.integrity_fn = shim_table_integrity[1];
    head.unix_seconds = unix_seconds;

    int n = shim_device_count();
    integrity_device devs[64];
    if (n < 0)
        n = 0;
    if (n > 64)
        n = 64;
    memset(devs, 0, sizeof devs);
    for (int i = 0; i < n; i++) {
        int domain = 0, bus = 0, device = 0;
        CUresult rc = shim_device_identity(i, devs[i].uuid, &domain, &bus, &device);
        if (rc != CUDA_SUCCESS)
            return rc;
        devs[i].pci_domain = domain;
        devs[i].pci_bus = bus;
        devs[i].pci_device = device;
    }
    uint8_t msg[sizeof head + sizeof devs];
    memcpy(msg, &head, sizeof head);
    memcpy(msg + sizeof head, devs, (size_t)n * sizeof devs[0]);
    uint8_t mac[16];
    hmac_md2(integrity_key, sizeof integrity_key, msg, sizeof head + (size_t)n * sizeof devs[0], mac);
    memcpy(out, mac, sizeof mac);
    return CUDA_SUCCESS;
}

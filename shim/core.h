/* The shim's core: devices (local ones through the real driver, then the
 * proxies of remote agents), contexts and the handles of proxy objects.
 * The shim's face (exports.c, proc_address.c, export_tables.c,
 * integrity.c) asks it these questions and nothing else. */
#ifndef RIG_SHIM_CORE_H
#define RIG_SHIM_CORE_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto/cuda_sigs.h"

/* Defines the exported driver function `sym` with its exact parameter list
 * from proto/cuda_sigs.h (parameter names as generated), e.g.
 *     SHIM_EXPORT(cuMemAlloc_v2) { ... dptr ... bytesize ... }
 * The asm label gives the symbol its exact name even where cuda.h defines
 * `sym` as a macro (cuMemAlloc -> cuMemAlloc_v2). Generic weak versions of
 * every symbol live in exports.c; a SHIM_EXPORT elsewhere replaces one.
 * The body is a static function the export calls, so every export is
 * traced in one place. */
#define SHIM_EXPORT(sym)                                                        \
    static CUresult shim_impl_##sym RIG_SIG_##sym;                              \
    __attribute__((visibility("default"))) CUresult shim_export_##sym           \
        RIG_SIG_##sym __asm__(#sym);                                            \
    CUresult shim_export_##sym RIG_SIG_##sym                                    \
    {                                                                           \
        CUresult rc_ = shim_impl_##sym RIG_ARGS_##sym;                          \
        if (__builtin_expect(shim_tracing, 0))                                  \
            shim_trace(#sym, rc_);                                              \
        return rc_;                                                             \
    }                                                                           \
    static CUresult shim_impl_##sym RIG_SIG_##sym

/* RIG_LOG=debug: every call served by a SHIM_EXPORT is logged with its
 * result and the device of the calling thread. */
extern int shim_tracing;
void shim_trace(const char *symbol, CUresult rc);

/* The driver version rig reports (cuDriverGetVersion); cudart needs 13000+. */
#define SHIM_DRIVER_VERSION 13000

/* A CUresult cuda.h does not name: the only code cudart (CUDA 13) reports as
 * cudaErrorInvalidConfiguration (a test driver returned each code 1..1000
 * from cuLaunchKernel; see scripts/gen-error-table). Returned for a launch
 * geometry no device can run, as on a GPU. */
#ifndef CUDA_ERROR_INVALID_CONFIGURATION
#define CUDA_ERROR_INVALID_CONFIGURATION ((CUresult)9)
#endif


/* True when h is a handle (context, stream, event, module, function, ...)
 * of a proxy object. Cheap (an address range check) and safe on any value. */
bool shim_is_proxy_handle(const void *h);

/* True when the calling thread's current context belongs to a proxy. */
bool shim_current_is_proxy(void);

/* Number of devices the program sees (local, then proxies); 0 before cuInit. */
int shim_device_count(void);

/* The device's primary context, without retaining it (export table 2, slot 2). */
CUresult shim_primary_context(CUdevice dev, CUcontext *out);

/* What the integrity check hashes for a device: the same values the shim
 * reports through cuDeviceGetUuid and attributes 50, 33, 34. */
CUresult shim_device_identity(CUdevice dev, uint8_t uuid[16], int *pci_domain, int *pci_bus,
                              int *pci_device);

/* A name for the device that the calling thread's context is on, for
 * messages ("CUDA:0@h100-b", "CUDA:0" for a local one). */
const char *shim_current_device_label(void);

#endif

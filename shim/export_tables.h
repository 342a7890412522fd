/* The runtime's private export tables (cuGetExportTable), as far as the
 * integrity check and the core need to see them. */
#ifndef RIG_SHIM_EXPORT_TABLES_H
#define RIG_SHIM_EXPORT_TABLES_H

#include <cuda.h>
#include <stdint.h>

/* Table 2 (runtime interface) and table 7 (integrity), as handed out. */
extern const void *const shim_table_runtime[];
extern const void *const shim_table_integrity[];

/* Table 7, slot 1: the runtime's integrity check (integrity.c). */
CUresult shim_integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);

/* Forgets every context-local value (table 5) stored for ctx, calling each
 * value's destructor as the driver does when a context is destroyed. For
 * the core to call from cuCtxDestroy and primary-context resets. */
void shim_context_storage_drop(CUcontext ctx);

#endif

/* rig's side of the driver's error log (cuLogs*): driver_logs.c. */
#ifndef RIG_SHIM_DRIVER_LOGS_H
#define RIG_SHIM_DRIVER_LOGS_H

#include <cuda.h>
#include <stddef.h>

/* Keeps one message (no newline) and hands it to registered callbacks. */
void driver_logs_add(CUlogLevel level, const char *text, size_t len);

#endif

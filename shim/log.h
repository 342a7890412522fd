/* The shim's messages on stderr, each prefixed "rig: ". RIG_LOG sets the
 * level: error (default), warn, info, debug. */
#ifndef RIG_SHIM_LOG_H
#define RIG_SHIM_LOG_H

#include <cuda.h>

typedef enum shim_log_level {
    SHIM_LOG_ERROR = 0,
    SHIM_LOG_WARN = 1,
    SHIM_LOG_INFO = 2,
    SHIM_LOG_DEBUG = 3,
} shim_log_level;

/* True when messages of this level are printed. */
int shim_log_enabled(shim_log_level level);

/* Prints one line (a newline is added) in a single write. */
void shim_log(shim_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "rig: no memory for WHAT" as an error; returns CUDA_ERROR_OUT_OF_MEMORY
 * for the entry point to give back. */
CUresult shim_nomem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "rig: SYMBOL on DEVICE: not supported", printed once per symbol. */
void shim_log_unsupported_once(const char *symbol, const char *device);

#endif

/* Levelled logging to stderr, one write per line so lines from threads and
 * processes never interleave. */
#include "shim/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/cuda_ops.h"
#include "shim/core.h"
#include "shim/driver_logs.h"

static int level_from_env(void)
{
    const char *v = getenv("RIG_LOG");
    if (!v || !*v) return SHIM_LOG_ERROR;
    if (strcmp(v, "debug") == 0) return SHIM_LOG_DEBUG;
    if (strcmp(v, "info") == 0) return SHIM_LOG_INFO;
    if (strcmp(v, "warn") == 0) return SHIM_LOG_WARN;
    return SHIM_LOG_ERROR;
}

int shim_log_enabled(shim_log_level level)
{
    static int current = -1;
    int c = __atomic_load_n(&current, __ATOMIC_RELAXED);
    if (c < 0) {
        c = level_from_env();
        __atomic_store_n(&current, c, __ATOMIC_RELAXED);
    }
    return (int)level <= c;
}

void shim_log(shim_log_level level, const char *fmt, ...)
{
    /* Errors and warnings go to the driver log (cuLogs*) even when not printed. */
    bool keep = level <= SHIM_LOG_WARN;
    if (!keep && !shim_log_enabled(level))
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "rig: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    if (keep)
        driver_logs_add(level == SHIM_LOG_ERROR ? CU_LOG_LEVEL_ERROR : CU_LOG_LEVEL_WARNING, line + n, len - (size_t)n);
    if (!shim_log_enabled(level))
        return;
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}

CUresult shim_nomem(const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    shim_log(SHIM_LOG_ERROR, "no memory for %s", what);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

void shim_log_unsupported_once(const char *symbol, const char *device)
{
    /* One flag per wire number: the table is small and dense. */
    static unsigned char said[2048];
    const cuda_op_info *op = cuda_op_by_symbol(symbol);
    if (op && op->op < sizeof said && __atomic_exchange_n(&said[op->op], 1, __ATOMIC_RELAXED))
        return;
    shim_log(SHIM_LOG_ERROR, "%s on %s: not supported", symbol, device);
}

int shim_tracing;

/* Reading one variable at load is all the constructor does: helper
 * processes that inherit the preload pay nothing else. */
__attribute__((constructor)) static void read_trace_setting(void)
{
    const char *v = getenv("RIG_LOG");
    shim_tracing = v && strcmp(v, "debug") == 0;
}

void shim_trace(const char *symbol, CUresult rc)
{
    const char *name = "?";
    if (rc == CUDA_SUCCESS)
        name = "ok";
    else
        cuGetErrorName(rc, &name);
    shim_log(SHIM_LOG_DEBUG, "%s on %s: %s", symbol, shim_current_device_label(), name ? name : "?");
}

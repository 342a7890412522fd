/* softgpu's one-line messages on stderr (fd 1 is the kernels' printf),
 * each also in the driver log (logs.c). */
#include "softgpu/driver.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void soft_log(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "softgpu: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    /* The driver log (logs.c) keeps it too, without the newline. */
    soft_logs_add(line, len);
    line[len++] = '\n';
    /* One write, so concurrent lines do not interleave. */
    ssize_t w = write(2, line, len);
    (void)w;
}

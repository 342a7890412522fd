/* One line per event on the report descriptor; see report.h. */
#include "proto/report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int report_fd = -1;
static pid_t report_pid;
static int said_started, said_end;

int report_open_from_env(char *why, unsigned whylen)
{
    const char *v = getenv("RIG_REMOTE_REPORT");
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long fd = strtol(v, &end, 10);
    unsetenv("RIG_REMOTE_REPORT");
    if (errno || end == v || *end || fd < 0 || fd > 65535 || fcntl((int)fd, F_GETFD) < 0) {
        snprintf(why, whylen, "RIG_REMOTE_REPORT=%s is not an open descriptor", v);
        return -1;
    }
    fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    report_fd = (int)fd;
    report_pid = getpid();
    return 0;
}

/* Writes one whole line in one write, only in the process that opened it. */
static void say(const char *line)
{
    if (report_fd < 0 || getpid() != report_pid)
        return;
    size_t n = strlen(line);
    ssize_t w = write(report_fd, line, n);
    (void)w;
}

void report_started(void)
{
    if (__atomic_exchange_n(&said_started, 1, __ATOMIC_ACQ_REL))
        return;
    say("started\n");
}

void report_failed(const char *why)
{
    if (__atomic_exchange_n(&said_end, 1, __ATOMIC_ACQ_REL))
        return;
    char line[4200];
    /* A reason is one line: newlines inside it would forge others. */
    size_t n = 0;
    n += (size_t)snprintf(line, sizeof line, "failed ");
    for (const char *p = why; *p && n < sizeof line - 2; p++)
        line[n++] = (*p == '\n' || *p == '\r') ? ' ' : *p;
    line[n++] = '\n';
    line[n] = '\0';
    say(line);
}

void report_closed(void)
{
    if (__atomic_exchange_n(&said_end, 1, __ATOMIC_ACQ_REL))
        return;
    say("closed\n");
}

void report_stats(const char *device, unsigned long long calls, unsigned long long round_trips,
                  unsigned long long bytes_out, unsigned long long bytes_in, double wait_ms)
{
    if (__atomic_load_n(&said_end, __ATOMIC_ACQUIRE) || strcspn(device, " \n\r") != strlen(device))
        return;
    char line[256];
    snprintf(line, sizeof line, "stats %.96s %llu %llu %llu %llu %.3f\n", device, calls, round_trips, bytes_out,
             bytes_in, wait_ms);
    say(line);
}

/* The driver's error log (cuLogs*, CUDA 12.9) as rig keeps it: every error
 * and warning line the shim writes (why a call failed on a proxy, what an
 * agent said) goes into a buffer of at most 25600 bytes, as the driver's,
 * and to the program's registered callbacks. An iterator is the sequence
 * number of the next message. The local driver's own log is not merged:
 * these calls answer for rig's messages. */
#include "shim/driver_logs.h"
#include "shim/log.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/core.h"

#define LOG_BYTES_MAX 25600
#define LOG_LINE_MAX 1024
#define LOG_CALLBACKS_MAX 64

typedef struct log_message {
    CUlogLevel level;
    size_t len;
    char text[LOG_LINE_MAX];
} log_message;

struct CUlogsCallbackEntry_st {
    CUlogsCallback fn;
    void *data;
    bool live;
};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
/* Messages first..next-1 are kept, in ring[seq % LOG_RING]. */
#define LOG_RING 256
static log_message ring[LOG_RING];
static uint32_t first, next;
static size_t held_bytes;
static struct CUlogsCallbackEntry_st callbacks[LOG_CALLBACKS_MAX];

void driver_logs_add(CUlogLevel level, const char *text, size_t len)
{
    if (len >= LOG_LINE_MAX)
        len = LOG_LINE_MAX - 1;
    struct CUlogsCallbackEntry_st calls[LOG_CALLBACKS_MAX];
    int ncalls = 0;
    pthread_mutex_lock(&log_lock);
    while (next - first >= LOG_RING || (next != first && held_bytes + len + 1 > LOG_BYTES_MAX)) {
        held_bytes -= ring[first % LOG_RING].len + 1;
        first++;
    }
    log_message *m = &ring[next % LOG_RING];
    m->level = level;
    m->len = len;
    memcpy(m->text, text, len);
    m->text[len] = 0;
    held_bytes += len + 1;
    next++;
    for (int i = 0; i < LOG_CALLBACKS_MAX; i++)
        if (callbacks[i].live)
            calls[ncalls++] = callbacks[i];
    pthread_mutex_unlock(&log_lock);
    /* Outside the lock: a callback may log or dump. */
    for (int i = 0; i < ncalls; i++) {
        char copy[LOG_LINE_MAX];
        memcpy(copy, text, len);
        copy[len] = 0;
        calls[i].fn(calls[i].data, level, copy, len);
    }
}

SHIM_EXPORT(cuLogsRegisterCallback)
{
    if (!callbackFunc)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&log_lock);
    struct CUlogsCallbackEntry_st *e = NULL;
    for (int i = 0; i < LOG_CALLBACKS_MAX && !e; i++)
        if (!callbacks[i].live)
            e = &callbacks[i];
    if (e) {
        e->fn = callbackFunc;
        e->data = userData;
        e->live = true;
    }
    pthread_mutex_unlock(&log_lock);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (callback)
        *callback = e;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuLogsUnregisterCallback)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < LOG_CALLBACKS_MAX; i++)
        if (callback == &callbacks[i] && callbacks[i].live) {
            callbacks[i].live = false;
            rc = CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&log_lock);
    return rc;
}

SHIM_EXPORT(cuLogsCurrent)
{
    if (!iterator || flags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&log_lock);
    *iterator = next;
    pthread_mutex_unlock(&log_lock);
    return CUDA_SUCCESS;
}

/* The text of messages from *iterator (all kept ones when NULL) into a
 * malloc'd buffer, newest last, keeping at most cap bytes (NUL excluded)
 * and saying at its head when older messages were lost or left out;
 * advances *iterator. NULL when nothing fits or (*nomem) memory runs out. */
static char *dump(CUlogIterator *iterator, size_t cap, size_t *len_out, bool *none, bool *nomem)
{
    pthread_mutex_lock(&log_lock);
    uint32_t from = iterator ? *iterator : first;
    /* An iterator from before the oldest kept message lost some. */
    uint32_t lost = (int32_t)(first - from) > 0 ? first - from : 0;
    if (lost || (int32_t)(from - next) > 0)
        from = (int32_t)(from - next) > 0 ? next : first;
    char head[96] = "";
    /* Newest messages first, while they fit with room for a head line. */
    size_t total = 0;
    uint32_t start = next;
    while (start != from) {
        size_t add = ring[(start - 1) % LOG_RING].len + 1;
        if (total + add + sizeof head > cap && total + add > cap)
            break;
        total += add;
        start--;
    }
    uint32_t left_out = start - from;
    if (lost || left_out)
        snprintf(head, sizeof head, "[rig: %u earlier log messages were %s]\n", lost + left_out,
                 lost ? "overwritten" : "left out for room");
    size_t hl = strlen(head);
    while (start != next && total + hl > cap) {
        total -= ring[start % LOG_RING].len + 1;
        start++;
    }
    if (total + hl > cap)
        hl = 0;
    *none = next == from;
    char *out = (total || *none) ? malloc(total + hl + 1) : NULL;
    *nomem = (total || *none) && !out;
    size_t off = 0;
    if (out) {
        memcpy(out, head, hl);
        off = hl;
        for (uint32_t s = start; s != next; s++) {
            memcpy(out + off, ring[s % LOG_RING].text, ring[s % LOG_RING].len);
            off += ring[s % LOG_RING].len;
            out[off++] = '\n';
        }
        out[off] = 0;
        if (iterator)
            *iterator = next;
    }
    pthread_mutex_unlock(&log_lock);
    *len_out = off;
    return out;
}

SHIM_EXPORT(cuLogsDumpToMemory)
{
    if (!buffer || !size || flags)
        return CUDA_ERROR_INVALID_VALUE;
    size_t cap = *size ? *size - 1 : 0;
    bool none, nomem = false;
    size_t len = 0;
    char *text = *size ? dump(iterator, cap, &len, &none, &nomem) : NULL;
    if (!text && nomem)
        return shim_nomem("a copy of the driver log");
    if (!text) {
        /* Not even the newest message fits. */
        *size = 0;
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(buffer, text, len + 1);
    *size = len;
    free(text);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuLogsDumpToFile)
{
    if (!pathToFile || flags)
        return CUDA_ERROR_INVALID_VALUE;
    bool none, nomem = false;
    size_t len = 0;
    char *text = dump(iterator, (size_t)LOG_BYTES_MAX * 2, &len, &none, &nomem);
    if (!text)
        return nomem ? shim_nomem("a copy of the driver log") : CUDA_ERROR_OUT_OF_MEMORY;
    /* Appends: a file named twice keeps what it already held. */
    int fd = open(pathToFile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    CUresult rc = fd < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    for (size_t off = 0; fd >= 0 && off < len && rc == CUDA_SUCCESS;) {
        ssize_t w = write(fd, text + off, len - off);
        if (w <= 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            off += (size_t)w;
    }
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

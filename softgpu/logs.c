/* The driver's error log (cuLogs*, CUDA 12.9): every line softgpu writes on
 * stderr is also kept here, at most LOG_RING lines and LOG_BYTES bytes as
 * the driver's buffer, and handed to registered callbacks. An iterator is
 * the sequence number of the next line. The agent reads it to tell a
 * program why softgpu refused a call (a kernel it cannot run). */
#include "softgpu/driver.h"

#include <stdio.h>
#include <string.h>

#define LOG_RING 64
#define LOG_LINE 1024
#define LOG_BYTES 25600
#define LOG_CALLBACKS 64

typedef struct line {
    size_t len;
    char text[LOG_LINE];
} line;

struct CUlogsCallbackEntry_st {
    CUlogsCallback fn;
    void *data;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static line ring[LOG_RING];
static unsigned first, next;   /* lines first..next-1 are kept */
static size_t held;
static struct CUlogsCallbackEntry_st callbacks[LOG_CALLBACKS];

void soft_logs_add(const char *text, size_t len)
{
    if (len >= LOG_LINE)
        len = LOG_LINE - 1;
    struct CUlogsCallbackEntry_st calls[LOG_CALLBACKS];
    int ncalls = 0;
    pthread_mutex_lock(&lock);
    while (next - first >= LOG_RING || (next != first && held + len + 1 > LOG_BYTES)) {
        held -= ring[first % LOG_RING].len + 1;
        first++;
    }
    line *l = &ring[next % LOG_RING];
    memcpy(l->text, text, len);
    l->text[len] = 0;
    l->len = len;
    held += len + 1;
    next++;
    for (int i = 0; i < LOG_CALLBACKS; i++)
        if (callbacks[i].fn)
            calls[ncalls++] = callbacks[i];
    pthread_mutex_unlock(&lock);
    /* Outside the lock: a callback may log or register in turn. */
    for (int i = 0; i < ncalls; i++) {
        char copy[LOG_LINE];
        memcpy(copy, text, len);
        copy[len] = 0;
        calls[i].fn(calls[i].data, CU_LOG_LEVEL_ERROR, copy, len);
    }
}

SOFT_API CUresult CUDAAPI cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData,
                                                 CUlogsCallbackHandle *callback_out)
{
    if (!callbackFunc || !callback_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < LOG_CALLBACKS; i++)
        if (!callbacks[i].fn) {
            callbacks[i] = (struct CUlogsCallbackEntry_st){ callbackFunc, userData };
            *callback_out = &callbacks[i];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuLogsUnregisterCallback(CUlogsCallbackHandle callback)
{
    if (!callback || callback < callbacks || callback >= callbacks + LOG_CALLBACKS)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    if (callback->fn)
        *callback = (struct CUlogsCallbackEntry_st){ 0 };
    else
        r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuLogsCurrent(CUlogIterator *iterator_out, unsigned int flags)
{
    if (!iterator_out || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    *iterator_out = next;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* Copies the lines from *it into buf (cap bytes with the NUL), each ending
 * in a newline, as many whole lines as fit; advances *it past them. Lines
 * already dropped are said in one line of their own. Lock held. */
static size_t dump(CUlogIterator *it, char *buf, size_t cap)
{
    size_t off = 0;
    unsigned from = *it;
    if (next - from > next - first) {
        /* Older than what is kept (the iterator wrapped past it counts too). */
        char note[80];
        int n = snprintf(note, sizeof note, "softgpu: %u log lines were dropped before this one\n",
                         first - from);
        if (n > 0 && (size_t)n < cap) {
            memcpy(buf, note, (size_t)n);
            off = (size_t)n;
        }
        from = first;
    }
    for (; from != next; from++) {
        const line *l = &ring[from % LOG_RING];
        if (off + l->len + 1 >= cap)
            break;
        memcpy(buf + off, l->text, l->len);
        off += l->len;
        buf[off++] = '\n';
    }
    buf[off] = 0;
    *it = from;
    return off;
}

SOFT_API CUresult CUDAAPI cuLogsDumpToMemory(CUlogIterator *iterator, char *buffer, size_t *size, unsigned int flags)
{
    if (!buffer || !size || flags != 0 || *size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUlogIterator it = 0;
    pthread_mutex_lock(&lock);
    if (iterator)
        it = *iterator;
    else
        it = first;
    bool any = it != next;
    size_t n = dump(&it, buffer, *size);
    if (iterator)
        *iterator = it;
    pthread_mutex_unlock(&lock);
    *size = n;
    /* Messages waiting, none of which fits: the buffer is too small. */
    return any && n == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuLogsDumpToFile(CUlogIterator *iterator, const char *pathToFile, unsigned int flags)
{
    if (!pathToFile || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(pathToFile, "a");
    if (!f)
        return CUDA_ERROR_INVALID_VALUE;
    static char buf[LOG_BYTES + LOG_RING + 128];
    pthread_mutex_lock(&lock);
    CUlogIterator it = iterator ? *iterator : first;
    size_t n = dump(&it, buf, sizeof buf);
    bool ok = fwrite(buf, 1, n, f) == n;
    if (iterator)
        *iterator = it;
    pthread_mutex_unlock(&lock);
    ok = fclose(f) == 0 && ok;
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Host-to-device copy records, compressed when it pays; see htod.h. The
 * link's sends are synchronous and return once the socket holds the bytes,
 * so the next piece is compressed here while the last one is still on the
 * wire: compression is pipelined piece by piece with no thread of its own. */
#include "shim/htod.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/compress.h"
#include "proto/copy.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "shim/log.h"

/* Smaller copies go raw: a record and a sample cost more than LZ4 saves. */
#define HTOD_COMPRESS_MIN ((size_t)64 << 10)

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint8_t shim_htod_compress(agent_link *l, proxy_obj *s, const void *src, size_t n, bool reads_program)
{
    double link = compress_link_rate(conn_link_rate(&l->c));
    if (n < HTOD_COMPRESS_MIN || !(link > 0) || compress_pace_paused(&l->compress_pace))
        return COMPRESS_RAW;
    if (reads_program && s && link_wait_program_writes(l, s) != CUDA_SUCCESS)
        return COMPRESS_RAW;   /* the job failed: the record reports it */
    /* The first such copy measures this machine's speeds (35-50 ms here),
     * not a thread at startup: even at idle priority, one measuring beside
     * a program's first synchronous calls made each of them 2-3 times
     * slower on 2 vCPUs (docs/design.md "What a synchronous wait costs"). */
    compress_rates r = compress_machine();
    r.link_bps = link;
    return compress_decide(src, n, &r).method;
}

/* Each thread's buffer for compressed pieces, kept for the next copy. */
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
typedef struct htod_buf {
    size_t cap;
    uint8_t bytes[];
} htod_buf;

static void make_key(void)
{
    pthread_key_create(&buf_key, free);
}

static uint8_t *thread_buffer(size_t need)
{
    pthread_once(&buf_once, make_key);
    htod_buf *b = pthread_getspecific(buf_key);
    if (b && b->cap >= need)
        return b->bytes;
    free(b);
    b = malloc(sizeof *b + need);
    pthread_setspecific(buf_key, b);
    if (!b)
        return NULL;
    /* Its pages touched now: first touches are not compressing's time,
     * which decides whether compressing keeps up (a fresh page can cost
     * tens of microseconds in a VM). */
    memset(b->bytes, 0, need);
    b->cap = need;
    return b->bytes;
}

CUresult shim_htod_record(agent_link *l, proxy_obj *s, CUdeviceptr dst, const void *src, size_t len,
                          uint8_t method, bool reads_program, bool quiet, bool after_quiet, uint64_t *last)
{
    uint8_t body[COPY_HTOD_HEAD];
    compress_header h = { .method = COMPRESS_RAW, .original = (uint32_t)len, .stored = (uint32_t)len };
    const void *data = src;
    /* A piece after compressing stopped keeping up goes raw. */
    bool compress = method != COMPRESS_RAW;
    uint8_t *packed =
        compress && !compress_pace_paused(&l->compress_pace) ? thread_buffer(compress_bound(len)) : NULL;
    if (packed) {
        /* compress_bound fits: the call cannot fail. */
        size_t out = 0;
        rig_why why = { "" };
        int64_t t0 = now_ns();
        int rc = compress_chunk(src, len, method, packed, compress_bound(len), &out, &why);
        double link = compress_link_rate(conn_link_rate(&l->c));
        if (compress_pace_note(&l->compress_pace, len, (double)(now_ns() - t0) * 1e-9, link))
            shim_log(SHIM_LOG_DEBUG,
                     "agent %s: compressing ran slower than the link (%.3g bytes/s) %d pieces in a row; raw for %d ms",
                     l->name, link, COMPRESS_SLOW_PIECES, COMPRESS_PAUSE_MS);
        if (rc == RIG_OK && packed[0] != COMPRESS_RAW) {
            rig_why bad = { "" };
            compress_header_read(packed, &h, &bad);
            data = packed + COMPRESS_HEADER_SIZE;
            __atomic_add_fetch(&l->compressed_out_bytes, len, __ATOMIC_RELAXED);
            __atomic_add_fetch(&l->compressed_out_stored, h.stored, __ATOMIC_RELAXED);
        }
    } else if (compress) {
        shim_log(SHIM_LOG_DEBUG, "agent %s: no memory to compress a copy of %zu bytes; it goes raw", l->name, len);
    }
    copy_htod_write(body, dst, quiet, &h);
    handover ho = { .op = CUDA_OP_cuMemcpyHtoDAsync_v2, .stream = s, .body = body, .body_len = sizeof body,
                    .data = data, .data_len = h.stored, .reads_program = reads_program, .after_quiet = after_quiet };
    return link_handover(l, &ho, last);
}

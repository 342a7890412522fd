/* Registered host memory mapped for the device on proxies
 * (cuMemHostRegister with CU_MEMHOSTREGISTER_DEVICEMAP): the program's own
 * pages cannot be protected (malloc keeps its bookkeeping beside them), so
 * each registration has a device copy on the agent at another address and
 * a shadow here of what both last agreed on. Before a launch the bytes the
 * CPU changed since (host != shadow) go to the device; at the next
 * synchronisation after it the device's bytes come back wherever the CPU
 * left them alone (host == shadow): what the CPU wrote meanwhile wins. */
#include <stdlib.h>
#include <string.h>

#include "proto/copy.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/htod.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* Changed bytes are sent in blocks of this size. */
#define BLOCK 4096

typedef struct hostmap {
    struct hostmap *next;
    uint8_t *host;
    uint64_t size;
    CUdeviceptr dev;
    int device;
    agent_link *link;
    uint8_t *shadow;
    bool written;               /* a launch may have written it since the last fetch */
} hostmap;

static hostmap *maps;
static _Atomic int map_count;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool fetching;  /* this thread's own waits are not syncs */

CUresult shim_hostmap_register(proxy_obj *ctx, void *p, size_t size)
{
    hostmap *m = calloc(1, sizeof *m);
    uint8_t *shadow = malloc(size);
    if (!m || !shadow) {
        free(m);
        free(shadow);
        return shim_nomem("the shadow of %zu bytes of mapped host memory", size);
    }
    CUdeviceptr dev;
    CUresult rc = shim_mem_alloc(ctx, size, &dev);
    if (rc) {
        free(m);
        free(shadow);
        return rc;
    }
    /* The shadow differs from the host everywhere it can: the first launch
     * sends the whole range. */
    for (size_t i = 0; i < size; i++)
        shadow[i] = (uint8_t)~((uint8_t *)p)[i];
    *m = (hostmap){ NULL, p, size, dev, ctx->device, shim_device_at(ctx->device)->link, shadow, false };
    pthread_mutex_lock(&map_lock);
    for (hostmap *o = maps; o; o = o->next)
        if ((uint8_t *)p < o->host + o->size && o->host < (uint8_t *)p + size)
            rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (!rc) {
        m->next = maps;
        maps = m;
        map_count++;
    }
    pthread_mutex_unlock(&map_lock);
    if (rc) {
        uint64_t sz;
        int d;
        if (shim_alloc_remove(dev, &sz, &d))
            link_drop(m->link, CUDA_OP_cuMemFree_v2, dev);
        free(shadow);
        free(m);
    }
    return rc;
}

bool shim_hostmap_unregister(void *p)
{
    if (!map_count)
        return false;
    pthread_mutex_lock(&map_lock);
    hostmap *m = NULL;
    for (hostmap **pp = &maps; *pp; pp = &(*pp)->next)
        if ((*pp)->host == p) {
            m = *pp;
            *pp = m->next;
            map_count--;
            break;
        }
    pthread_mutex_unlock(&map_lock);
    if (!m)
        return false;
    uint64_t sz;
    int d;
    if (shim_alloc_remove(m->dev, &sz, &d))
        link_drop(m->link, CUDA_OP_cuMemFree_v2, m->dev);
    free(m->shadow);
    free(m);
    return true;
}

bool shim_hostmap_device_pointer(const void *p, CUdeviceptr *out)
{
    if (!map_count)
        return false;
    bool found = false;
    pthread_mutex_lock(&map_lock);
    for (hostmap *m = maps; m; m = m->next)
        if ((const uint8_t *)p >= m->host && (const uint8_t *)p < m->host + m->size) {
            *out = m->dev + (CUdeviceptr)((const uint8_t *)p - m->host);
            found = true;
            break;
        }
    pthread_mutex_unlock(&map_lock);
    return found;
}

CUresult shim_hostmap_before_launch(agent_link *l, proxy_obj *s)
{
    if (!map_count)
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&map_lock);
    for (hostmap *m = maps; m && rc == CUDA_SUCCESS; m = m->next) {
        if (m->link != l)
            continue;
        m->written = true;
        for (uint64_t off = 0; off < m->size && rc == CUDA_SUCCESS;) {
            uint64_t len = m->size - off < BLOCK ? m->size - off : BLOCK;
            if (memcmp(m->host + off, m->shadow + off, len) == 0) {
                off += len;
                continue;
            }
            /* A run of changed blocks goes as one copy. */
            uint64_t end = off + len;
            while (end < m->size && end - off < JOB_COPY_CHUNK) {
                uint64_t n = m->size - end < BLOCK ? m->size - end : BLOCK;
                if (memcmp(m->host + end, m->shadow + end, n) == 0)
                    break;
                end += n;
            }
            memcpy(m->shadow + off, m->host + off, end - off);
            uint8_t method = shim_htod_compress(l, s, m->shadow + off, end - off, false);
            rc = shim_htod_record(l, s, m->dev + off, m->shadow + off, end - off, method, false, false, false, NULL);
            off = end;
        }
    }
    pthread_mutex_unlock(&map_lock);
    return rc;
}

/* Fetches m's device copy and takes each byte the CPU left alone; false
 * when it could not (the next sync tries again). */
static bool fetch(hostmap *m)
{
    uint8_t *got = malloc(m->size);
    if (!got) {
        shim_nomem("a fetch of %zu bytes of mapped host memory; it keeps its older bytes until the next sync",
                   m->size);
        return false;
    }
    /* This thread's own stream: the NULL stream's words may wait behind a
     * host function, which may be the one synchronising. */
    CUresult rc;
    proxy_obj *s = shim_per_thread_stream(m->device, &rc);
    if (!s) {
        free(got);
        return false;
    }
    uint64_t v = 0;
    for (uint64_t off = 0; off < m->size && rc == CUDA_SUCCESS; off += JOB_COPY_CHUNK) {
        uint64_t len = m->size - off < JOB_COPY_CHUNK ? m->size - off : JOB_COPY_CHUNK;
        uint8_t body[COPY_DTOH_BODY];
        copy_dtoh_write(body, m->dev + off, len);
        handover h = { .op = CUDA_OP_cuMemcpyDtoHAsync_v2, .stream = s, .body = body, .body_len = sizeof body,
                       .dst = got + off, .dst_len = len };
        rc = link_handover(m->link, &h, &v);
    }
    if (rc == CUDA_SUCCESS)
        rc = link_wait(m->link, s, v);
    if (rc == CUDA_SUCCESS)
        for (uint64_t i = 0; i < m->size; i++)
            if (m->host[i] == m->shadow[i])
                m->host[i] = m->shadow[i] = got[i];
    free(got);
    return rc == CUDA_SUCCESS;
}

void shim_hostmap_synced(agent_link *l)
{
    if (!map_count || fetching)
        return;
    pthread_mutex_lock(&map_lock);
    bool any = false;
    for (hostmap *m = maps; m && !any; m = m->next)
        any = m->link == l && m->written;
    if (any) {
        pthread_mutex_lock(&l->lock);
        bool idle = l->unreported_bytes == 0;
        pthread_mutex_unlock(&l->lock);
        fetching = true;
        for (hostmap *m = maps; m; m = m->next)
            if (m->link == l && m->written && fetch(m))
                m->written = !idle;   /* work still in flight may write again */
        fetching = false;
    }
    pthread_mutex_unlock(&map_lock);
}

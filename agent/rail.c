/* Rails on the agent (proto/rail.h, docs/design.md "Peer copies"): the
 * halves of peer copies and the signals between this agent and the job's
 * others. A stream that must wait for a peer's signal waits on the device
 * itself (cuStreamWaitValue32 on a page-locked word), so no thread of ours
 * blocks and the program's other streams go on; the peer's reader sets the
 * word once the signal, and the bytes it carries, are here.
 *
 * Each awaited or arrived signal has an entry (peer, signal) made by
 * whichever comes first: the record that waits (the job thread) or the
 * frame (the peer's reader). The entry is freed by a host function behind
 * the wait, once the stream has passed it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/job.h"
#include "proto/deadline.h"
#include "proto/job.h"
#include "proto/mesh.h"
#include "proto/rail.h"

/* Words awaited or arrived at once; a job past it fails, naming it. */
#define RAIL_WORDS 4096

typedef struct rail_entry {
    struct rail_entry *next;
    uint32_t peer;
    uint64_t signal;
    int word;                 /* index into the words */
    void *data;               /* the bytes a data signal brings (staging) */
    size_t len;
    bool arrived;
    bool filling;             /* a mesh reader is receiving into data */
} rail_entry;

struct agent_rails {
    pthread_mutex_t lock;
    uint32_t *words;          /* page-locked, device-mapped */
    CUdeviceptr words_dev;
    int free_words[RAIL_WORDS];
    int nfree;
    rail_entry *entries;
    bool released;            /* the job ended: every wait lets go */
    CUstream rail_stream[AGENT_DEVICES_MAX][MESH_AGENTS_MAX + 1];
    CUstream signal_stream[AGENT_DEVICES_MAX];
};

/* What a host function behind a rail's work needs. */
typedef struct rail_cb {
    job *j;
    uint32_t peer;
    uint64_t signal;          /* to send (0: none) */
    void *data;               /* staging: sent (a send) or given back */
    size_t len;
    rail_entry *entry;        /* freed (a wait passed) */
} rail_cb;

int rail_open(job *j)
{
    if (j->rails)
        return 0;
    agent_rails *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    const cuda_driver *d = &j->b->drv;
    void *p = NULL;
    if (d->fn_cuCtxSetCurrent(j->b->primary[0]) ||
        d->fn_cuMemHostAlloc(&p, RAIL_WORDS * sizeof(uint32_t),
                             CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) ||
        d->fn_cuMemHostGetDevicePointer_v2(&r->words_dev, p, 0)) {
        if (p)
            d->fn_cuMemFreeHost(p);
        free(r);
        j->current = -1;
        return -1;
    }
    j->current = -1;
    r->words = p;
    memset(r->words, 0, RAIL_WORDS * sizeof(uint32_t));
    for (int i = 0; i < RAIL_WORDS; i++)
        r->free_words[i] = RAIL_WORDS - 1 - i;
    r->nfree = RAIL_WORDS;
    pthread_mutex_init(&r->lock, NULL);
    j->rails = r;
    return 0;
}

/* The entry of (peer, signal), made when missing; NULL (the job failed)
 * when no word is left. Under r->lock. */
static rail_entry *entry_of(job *j, agent_rails *r, uint32_t peer, uint64_t signal)
{
    for (rail_entry *e = r->entries; e; e = e->next)
        if (e->peer == peer && e->signal == signal)
            return e;
    rail_entry *e = calloc(1, sizeof *e);
    if (!e || !r->nfree) {
        free(e);
        job_fail(j, "agent: more than %d signals between agents outstanding", RAIL_WORDS);
        return NULL;
    }
    e->peer = peer;
    e->signal = signal;
    e->word = r->free_words[--r->nfree];
    __atomic_store_n(&r->words[e->word], 0, __ATOMIC_SEQ_CST);
    e->next = r->entries;
    r->entries = e;
    return e;
}

/* Unlinks and frees e, giving its word and bytes back. Under r->lock. */
static void entry_free(job *j, agent_rails *r, rail_entry *e)
{
    for (rail_entry **p = &r->entries; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    r->free_words[r->nfree++] = e->word;
    if (e->data)
        staging_put(j->b, e->data, e->len);
    free(e);
}

static void CUDA_CB rail_done(void *arg)
{
    rail_cb *cb = arg;
    job *j = cb->j;
    if (cb->entry) {
        pthread_mutex_lock(&j->rails->lock);
        entry_free(j, j->rails, cb->entry);
        pthread_mutex_unlock(&j->rails->lock);
    }
    /* A send's bytes (or a bare signal) go out on the mesh's sender. */
    if (cb->signal)
        mesh_post(j, cb->peer, cb->signal, cb->data, cb->len);
    else if (cb->data)
        staging_put(j->b, cb->data, cb->len);
    free(cb);
}

/* Enqueues rail_done(cb) on stream; on failure frees what cb holds. */
static CUresult behind(job *j, CUstream stream, rail_cb *cb)
{
    CUresult rc = j->b->drv.fn_cuLaunchHostFunc(stream, rail_done, cb);
    if (rc) {
        if (cb->data)
            staging_put(j->b, cb->data, cb->len);
        free(cb);
    }
    return rc;
}

/* Makes stream wait for the peer's signal; the entry is freed behind the
 * wait unless the caller keeps it (*kept: a receive frees it itself). */
static CUresult wait_signal(job *j, CUstream stream, uint32_t peer, uint64_t signal, size_t data_len,
                            rail_entry **kept)
{
    agent_rails *r = j->rails;
    const cuda_driver *d = &j->b->drv;
    pthread_mutex_lock(&r->lock);
    rail_entry *e = entry_of(j, r, peer, signal);
    CUresult rc = CUDA_SUCCESS;
    if (e && data_len && !e->data && !e->arrived) {
        rc = staging_get(j->b, data_len, &e->data);
        if (rc == CUDA_SUCCESS)
            e->len = data_len;
        else
            e->data = NULL;
    }
    /* A bare signal has len 0; bytes being read have the frame's length. */
    bool wrong = e && data_len && (e->arrived || e->data) && e->len != data_len;
    CUdeviceptr word = e ? r->words_dev + (CUdeviceptr)e->word * sizeof(uint32_t) : 0;
    pthread_mutex_unlock(&r->lock);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc)
        return rc;
    if (wrong) {
        job_fail(j, "agent %u: signal %llu brought %zu bytes, the copy expects %zu", peer,
                 (unsigned long long)signal, e->len, data_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    rc = d->fn_cuStreamWaitValue32_v2 ? d->fn_cuStreamWaitValue32_v2(stream, word, 1, CU_STREAM_WAIT_VALUE_EQ)
                                      : d->fn_cuStreamWaitValue32(stream, word, 1, CU_STREAM_WAIT_VALUE_EQ);
    if (rc)
        return rc;
    if (kept) {
        *kept = e;
        return CUDA_SUCCESS;
    }
    rail_cb *cb = calloc(1, sizeof *cb);
    if (!cb)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *cb = (rail_cb){ .j = j, .entry = e };
    return behind(j, stream, cb);
}

/* The agent's own stream of device for rails toward peer (or, peer 0, for
 * event signals), made on first use. */
static CUresult own_stream(job *j, int device, uint32_t peer, CUstream *out)
{
    agent_rails *r = j->rails;
    CUstream *slot = peer ? &r->rail_stream[device][peer] : &r->signal_stream[device];
    if (!*slot) {
        CUresult rc = j->b->drv.fn_cuStreamCreate(slot, CU_STREAM_NON_BLOCKING);
        if (rc)
            return rc;
    }
    *out = *slot;
    return CUDA_SUCCESS;
}

CUresult rail_replay(job *j, uint32_t op, agent_obj *s, const uint8_t *body, size_t len)
{
    rail_record rec;
    rig_why why = { "" };
    if (rail_decode(op, body, len, &rec, &why) < 0) {
        job_fail(j, "controller: %s", why.text);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!mesh_peer_up(j, rec.peer)) {
        job_fail(j, "controller: a %s with agent %u, which is not this job's connected peer",
                 job_op_name(op), rec.peer);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!j->rails)
        return CUDA_ERROR_OUT_OF_MEMORY;
    const cuda_driver *d = &j->b->drv;
    CUresult rc;
    CUstream stream = s ? job_real_stream(s) : NULL;
    int device = s ? s->device : (int)rec.device;
    if ((rec.op == RAIL_SEND || rec.op == RAIL_RECV) && !s) {
        if (device >= j->b->device_count)
            return CUDA_ERROR_INVALID_DEVICE;
        if ((rc = job_use_device(j, device)) || (rc = own_stream(j, device, rec.peer, &stream)))
            return rc;
    }
    switch (rec.op) {
    case RAIL_SEND: {
        if (rec.extra && (rc = wait_signal(j, stream, rec.peer, rec.extra, 0, NULL)))
            return rc;
        rail_cb *cb = calloc(1, sizeof *cb);
        if (!cb)
            return CUDA_ERROR_OUT_OF_MEMORY;
        *cb = (rail_cb){ .j = j, .peer = rec.peer, .signal = rec.signal, .len = rec.len };
        if ((rc = staging_get(j->b, rec.len, &cb->data))) {
            free(cb);
            return rc;
        }
        if ((rc = d->fn_cuMemcpyDtoHAsync_v2(cb->data, rec.addr, rec.len, stream))) {
            staging_put(j->b, cb->data, rec.len);
            free(cb);
            return rc;
        }
        return behind(j, stream, cb);
    }
    case RAIL_RECV: {
        rail_entry *e = NULL;
        if ((rc = wait_signal(j, stream, rec.peer, rec.signal, rec.len, &e)))
            return rc;
        /* The entry's bytes stay until the copy has read them. */
        if ((rc = d->fn_cuMemcpyHtoDAsync_v2(rec.addr, e->data, rec.len, stream)))
            return rc;
        rail_cb *cb = calloc(1, sizeof *cb);
        if (!cb)
            return CUDA_ERROR_OUT_OF_MEMORY;
        *cb = (rail_cb){ .j = j, .peer = rec.peer, .signal = rec.extra, .entry = e };
        return behind(j, stream, cb);
    }
    case RAIL_SIGNAL: {
        if (rec.extra) {
            if (s)
                return CUDA_ERROR_INVALID_VALUE;
            agent_obj *ev = objects_get(&j->objs, rec.extra, AOBJ_EVENT);
            if (!ev)
                return CUDA_ERROR_INVALID_HANDLE;
            if ((rc = job_use_device(j, ev->device)) || (rc = own_stream(j, ev->device, 0, &stream)) ||
                (rc = d->fn_cuStreamWaitEvent(stream, ev->u.event.real, 0)))
                return rc;
        } else if (!s) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        rail_cb *cb = calloc(1, sizeof *cb);
        if (!cb)
            return CUDA_ERROR_OUT_OF_MEMORY;
        *cb = (rail_cb){ .j = j, .peer = rec.peer, .signal = rec.signal };
        return behind(j, stream, cb);
    }
    case RAIL_WAIT:
        if (!s)
            return CUDA_ERROR_INVALID_VALUE;
        return wait_signal(j, stream, rec.peer, rec.signal, 0, NULL);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

int rail_arrive(job *j, uint32_t peer, uint64_t signal, conn *c, uint64_t len, rig_why *why)
{
    agent_rails *r = j->rails;
    if (!r)
        return why_set(why, RIG_E_MALFORMED, "a rail before this agent's mesh");
    /* Checked before anything is allocated for it: a chunk is at most
     * RAIL_CHUNK bytes. */
    if (len > RAIL_CHUNK)
        return why_set(why, RIG_E_MALFORMED, "signal %llu brought %llu bytes, more than a chunk (%llu)",
                       (unsigned long long)signal, (unsigned long long)len, (unsigned long long)RAIL_CHUNK);
    pthread_mutex_lock(&r->lock);
    rail_entry *e = entry_of(j, r, peer, signal);
    if (e && e->arrived) {
        pthread_mutex_unlock(&r->lock);
        return why_set(why, RIG_E_MALFORMED, "signal %llu came twice", (unsigned long long)signal);
    }
    CUresult rc = CUDA_SUCCESS;
    if (e && len && !e->data) {
        static __thread bool has_context;
        if (!has_context)
            has_context = j->b->drv.fn_cuCtxSetCurrent(j->b->primary[0]) == CUDA_SUCCESS;
        rc = staging_get(j->b, len, &e->data);
        if (rc == CUDA_SUCCESS)
            e->len = len;
        else
            e->data = NULL;
    }
    bool wrong = e && e->data && e->len != len;
    void *data = e ? e->data : NULL;
    /* While the bytes come, rail_release must not let the stream go: its
     * host function would free the entry and the buffer under them. */
    if (e && !rc && !wrong && len)
        e->filling = true;
    pthread_mutex_unlock(&r->lock);
    if (!e)
        return why_set(why, RIG_E_NOMEM, "no room for signal %llu", (unsigned long long)signal);
    if (rc)
        return why_set(why, RIG_E_NOMEM, "no page-locked memory for %llu bytes", (unsigned long long)len);
    if (wrong)
        return why_set(why, RIG_E_MALFORMED, "signal %llu brought %llu bytes, the copy expects %zu",
                       (unsigned long long)signal, (unsigned long long)len, e->len);
    /* Once begun, the frame is read to its end: only silence stops it. */
    int got = len ? conn_recv_rest(c, data, len, deadline_after(-1), JOB_SILENCE_MS, why) : 0;
    pthread_mutex_lock(&r->lock);
    e->filling = false;
    if (got == 0)
        e->arrived = true;
    if (got == 0 || r->released)
        __atomic_store_n(&r->words[e->word], 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&r->lock);
    return got < 0 ? got : 0;
}

void rail_release(job *j)
{
    agent_rails *r = j->rails;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->released = true;
    /* One a reader is filling lets go when its bytes are in (rail_arrive). */
    for (rail_entry *e = r->entries; e; e = e->next)
        if (!e->filling)
            __atomic_store_n(&r->words[e->word], 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&r->lock);
}

void rail_free(job *j)
{
    agent_rails *r = j->rails;
    if (!r)
        return;
    const cuda_driver *d = &j->b->drv;
    for (int dev = 0; dev < AGENT_DEVICES_MAX && dev < j->b->device_count; dev++) {
        d->fn_cuCtxSetCurrent(j->b->primary[dev]);
        for (int k = 0; k <= MESH_AGENTS_MAX; k++)
            if (r->rail_stream[dev][k])
                d->fn_cuStreamDestroy_v2(r->rail_stream[dev][k]);
        if (r->signal_stream[dev])
            d->fn_cuStreamDestroy_v2(r->signal_stream[dev]);
    }
    while (r->entries)
        entry_free(j, r, r->entries);
    d->fn_cuMemFreeHost(r->words);
    pthread_mutex_destroy(&r->lock);
    free(r);
    j->rails = NULL;
    j->current = -1;
}

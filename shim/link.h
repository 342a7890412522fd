/* The connection to one agent: requests that wait for their answer (in
 * order), handovers that do not, and the receiver thread that applies words
 * and bytes to stream timelines and program memory. */
#ifndef RIG_SHIM_LINK_H
#define RIG_SHIM_LINK_H

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/compress.h"
#include "proto/conn.h"
#include "proto/frame.h"
#include "proto/key.h"
#include "proto/names.h"
#include "shim/proxy.h"

typedef struct pending_answer pending_answer;
typedef struct pending_copy pending_copy;
typedef struct pending_host pending_host;

struct agent_link {
    char name[NAMES_NAME_MAX + 1];
    names_address addr;
    uint32_t index;                  /* this agent's process number (1-based) */
    conn c;
    pthread_mutex_t send_lock;       /* one sender at a time, in order */
    pthread_mutex_t lock;            /* answers, timelines, failure */
    pthread_cond_t changed;
    pending_answer *answers_head, *answers_tail;
    /* Bytes expected for program memory, oldest first: they come in that
     * order on each stream, so a search from the head stops at once. */
    pending_copy *copies, *copies_last;
    pending_host *hosts, *hosts_last;  /* host functions waiting for a word, oldest first */
    struct completion *cb_head, *cb_tail;  /* words waiting for host functions */
    pthread_cond_t cb_ready;
    bool cb_stop;                    /* link_open failed: the host-function thread ends */
    /* The reader baton (docs/design.md, "Threads"): whoever holds it reads
     * and applies frames; a waiting program thread takes it before the
     * receiver does. Under lock. */
    bool reading;
    int waiters;                     /* program threads reading for their wait */
    bool rx_linger;                  /* a read failed: the receiver drains */
    pthread_cond_t rx_idle;
    pthread_t receiver;
    bool receiver_started;
    bool failed;
    bool abort_wanted, abort_sent;   /* a cause found here goes to the agent */
    bool cause_told;                 /* "rig: job failed" printed for it */
    CUresult failure;                /* what later calls return */
    char cause[512];
    uint64_t window_base, window_size;
    uint32_t driver_version;
    char driver[128];
    int device_count;
    int first_device;                /* the program's ordinal of device 0 */
    uint64_t unreported_bytes;       /* handed over, not yet reached */
    /* The last synchronous copy to the device that returned once its bytes
     * were sent (link_post): work on any other stream, a request and a
     * drop wait for it first. Under lock; NULL: none. */
    proxy_obj *posted_stream;
    uint64_t posted_value;
    uint64_t copy_bytes_pending;     /* copies into the program whose bytes are still to come */
    uint8_t *batch;                  /* small handover records not yet sent */
    size_t batch_len;                /* under send_lock; read unlocked as a hint */
    int64_t last_flush_ns;
    /* A wait ended since the last flush (atomic): the agent has caught up,
     * so the next record goes at once rather than waiting for company. */
    bool waited;
    compress_pace compress_pace;          /* whether compressing keeps up, piece after piece */
    uint8_t *packed;                 /* compressed bytes frames land here (the baton's holder) */
    size_t packed_cap;
    /* statistics for RIG_STATS */
    uint64_t calls, round_trips;
    uint64_t wait_ns;
    /* Copies' bytes that went compressed (atomic): originals, stored. */
    uint64_t compressed_out_bytes, compressed_out_stored, compressed_in_bytes, compressed_in_stored;
};

/* Connects, proves the key, reserves a pointer window (both ends), opens the
 * devices and starts the receiver. Errors name the agent. */
int link_open(agent_link *l, const char *name, const names_address *addr, uint32_t index,
              const rig_key *key, shim_device *devs, int room, rig_why *why);

/* Sends a request (payload pieces) and waits for its answer. On success
 * *result is the CUresult and *answer holds the outputs that follow it
 * (the caller releases it); a protocol refusal or a failed job returns the
 * job's error without an answer. */
CUresult link_request(agent_link *l, const struct iovec *iov, int n, frame *answer, const uint8_t **out,
                      size_t *out_len);

/* One record of stream-ordered work. */
typedef struct handover {
    uint32_t op;
    proxy_obj *stream;          /* NULL: no place on a timeline */
    uint64_t object;            /* without a stream: the object it names */
    const void *body;           /* the op's fields */
    size_t body_len;
    const void *data;           /* bytes carried after the body */
    size_t data_len;
    bool reads_program;         /* data is program memory the GPU may be writing */
    bool after_quiet;           /* follows a quiet piece of its copy: never waits for words */
    void *dst;                  /* program memory the agent's bytes go to */
    size_t dst_len;
    size_t dst_pitch, dst_width;  /* rows: width bytes every pitch; 0: flat */
    CUhostFn host_fn;           /* runs in the program when reached */
    void *host_data;
} handover;

/* Hands over one record and returns its timeline value (0 without a
 * stream). Blocks while too much work is unreported (not after_quiet); first waits for
 * earlier work on the stream that writes program memory when this record
 * reads program memory. */
CUresult link_handover(agent_link *l, const handover *h, uint64_t *value);

/* Waits for earlier work on stream that writes program memory (copies into
 * it, host functions), before reading program memory for the stream. */
CUresult link_wait_program_writes(agent_link *l, proxy_obj *stream);

/* Sends a drop (no answer). */
CUresult link_drop(agent_link *l, uint32_t op, uint64_t object);

/* Sends the handover records still batched; cheap when there are none. */
CUresult link_flush(agent_link *l);

/* Waits until stream reaches value (the receiver ran its host functions
 * and wrote its bytes); the job's error if it fails first. */
CUresult link_wait(agent_link *l, proxy_obj *stream, uint64_t value);

/* Records that stream s, from its value after on, waits for stream on (of
 * the same link) to reach value, as an event wait orders them: when a
 * host function of on still runs before that value in the program, s's
 * words from after on count only once on got there. */
void link_stream_depends(agent_link *l, proxy_obj *s, uint64_t after, proxy_obj *on, uint64_t value);

/* Whether a synchronous copy to the device on stream s may return once its
 * bytes are sent: nothing is outstanding on the link but earlier such
 * copies on s, so the stream sync CUDA does before it has nothing to wait
 * for. */
bool link_may_post(agent_link *l, proxy_obj *s);
/* Whether l's agent replays on softgpu: it runs PTX only, and moves copies'
 * bytes between the socket and device memory in place. */
bool link_on_softgpu(const agent_link *l);
/* Sends what is batched and remembers the copy that ended at value on s:
 * it has returned, as CUDA's synchronous copy from pageable memory does
 * once the bytes are staged (here: in the socket), and later work on
 * other streams waits for it, as it would have waited for its return. */
CUresult link_post(agent_link *l, proxy_obj *s, uint64_t value);

/* True when the stream has reached value (no wait). */
bool link_reached(proxy_obj *stream, uint64_t value);

/* Fails the job because the agent's answer broke its format ("b: " and
 * the formatted text); returns the job's error for the call to return. */
CUresult link_malformed(agent_link *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The job's error once failed, else CUDA_SUCCESS. */
CUresult link_status(agent_link *l);

/* Sends close and waits briefly for the agent's; at exit. */
void link_close(agent_link *l);

#endif

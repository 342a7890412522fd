/* The inside of one job, shared by the files that serve it: job.c (its
 * life), request.c (requests and their answers), handover.c (handovers and
 * drops), sender.c (the threads that send: bytes and words, beats, and the
 * watcher of device faults). A job lives in a worker process of its own. */
#ifndef RIG_AGENT_JOB_H
#define RIG_AGENT_JOB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"
#include "proto/compress.h"
#include "proto/conn.h"
#include "proto/copy.h"
#include "proto/key.h"
#include "proto/records.h"
#include "proto/wire.h"

/* A stream's value reached, handed from the driver's callback to the
 * sender; a copy into the program carries its pinned bytes. */
typedef struct note {
    struct note *next;
    struct note *live_prev, *live_next;   /* every note not yet sent, for job_free */
    uint64_t stream, value, bytes;
    void *staging;
    size_t len;
    bool inbound;         /* staging held a copy to the device: given back, not sent */
    bool in_place;        /* staging is the device memory itself: sent at once, never given back */
    bool quiet;           /* a piece of a copy in (COPY_QUIET): its buffer given back, no word */
} note;

/* Small copies' bytes into the program gathered for one write with their
 * words (sender.c): the notes, in order, whose memory the frames point
 * into until the write. */
typedef struct job_gather {
    conn_gather g;
    uint8_t heads[CONN_GATHER_FRAMES][COPY_BYTES_HEAD];
    note *notes[CONN_GATHER_FRAMES];
    int count;
} job_gather;

typedef struct agent_mesh agent_mesh;
typedef struct agent_rails agent_rails;

struct job {
    backend *b;
    conn c;
    uint32_t index;
    const rig_key *key;           /* the job key: the mesh proves it to the other agents */
    agent_mesh *mesh;             /* the job's other agents, once the controller asks (mesh.c) */
    agent_rails *rails;           /* peer copies and signals on the mesh (rail.c) */
    pthread_mutex_t send_lock;    /* held only around conn_sendv, never across a driver call */
    pthread_mutex_t output_lock;  /* device output: read and sent in order */
    window win;
    object_table objs;
    agent_pool *pools;            /* every memory pool, destroyed ones until their memory is back */
    int current;                  /* device whose primary context is current (job thread) */
    pthread_mutex_t q_lock;
    /* One condition per kind of waiter, so a frame or a note wakes only
     * the thread that acts on it (one shared condition woke four threads
     * per frame, each taking q_lock to go back to sleep). */
    pthread_cond_t q_cond;        /* the job thread: a frame in the inbox, the reader stopped or ended */
    pthread_cond_t send_cond;     /* the sender: notes queued, a marker done sending, stopping */
    pthread_cond_t sent_cond;     /* a wait for earlier words: the sender or a marker done sending */
    pthread_cond_t tick_cond;     /* the beat and the watcher: a failure, stopping */
    note *q_head, *q_tail;
    note *live;                   /* notes given to the driver or queued, not yet sent */
    uint64_t pending_markers;
    bool sending;                 /* the sender is sending a batch of notes */
    bool marker_sending;          /* a marker sends its note itself */
    int64_t last_marker_ms;       /* when the last marker ran: the watcher's clue */
    char last_kernel[AGENT_DEVICES_MAX][128];   /* for naming a fault */
    bool stopping;
    bool failed;
    bool abort_sent;
    char cause[512];
    pthread_t sender, beater, watcher;
    bool threads_started;
    /* The inbox: frames the reader thread took off the connection, waiting
     * for the job thread, so that the controller's sends keep moving and
     * its silence is noticed while the driver holds the job thread. When
     * the inbox is empty and no one reads, the job thread reads itself.
     * All under q_lock. */
    struct inbox_item *in_head, *in_tail;
    uint64_t in_bytes;
    bool reader_started, reader_done;
    bool reading;                 /* a thread is in conn_recv */
    bool job_waiting;             /* the job thread waits for the inbox */
    bool reader_wanted;           /* a burst: the reader reads ahead */
    bool read_over;               /* the controller's frames ended (close, error) */
    bool drain;                   /* ... on bytes that are not frames: drain them */
    int64_t busy_since_ms;        /* the job thread replays a frame since; 0: not */
    pthread_cond_t rd_cond;       /* wakes the reader */
    bool end_started;
    const job_hooks *hooks;
    /* Compressed chunks (proto/compress.h), buffers kept for the next: the
     * sender's outgoing copies, and the controller's before they decode
     * (whichever thread reads holds it: one at a time). */
    uint8_t *packed_out;
    size_t packed_out_cap;
    compress_pace compress_pace;       /* the sender's: whether compressing keeps up, piece after piece */
    uint8_t *packed_in;
    size_t packed_in_cap;
    job_gather in_place;          /* the job thread's in-place notes, written at job_flush_in_place */
};

/* ---- job.c ---- */
/* A job on a proven connection, its sending threads not yet started; NULL
 * with a reason when memory is short. */
job *job_new(backend *b, int fd, uint32_t index, char *why, size_t whylen);
/* Starts the sender, the beat and the watcher threads. */
int job_start_threads(job *j);
/* Records the job's root cause (the first one wins) and wakes its threads. */
void job_fail(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool job_failed(job *j);
/* Sends one frame; a failed send fails the job. Never waits on the driver. */
int job_send(job *j, frame_kind kind, const struct iovec *iov, int n);
/* Two frames in one write (conn_sendv2), so the program wakes once. */
int job_send2(job *j, frame_kind kind1, const struct iovec *iov1, int n1, frame_kind kind2,
              const struct iovec *iov2, int n2);
/* The frames gathered in g in one write (conn_gather_send); empties g. */
int job_send_gather(job *j, conn_gather *g);
/* Sends the root cause once and ends our side of the connection. */
void job_send_abort(job *j);
CUresult job_use_device(job *j, int device);
/* A driver error as the job's cause: a sticky error names the last kernel. */
void job_fail_driver(job *j, int device, CUresult rc, const char *what);
bool job_sticky(CUresult rc);
const char *job_op_name(uint32_t op);
/* Ends the job once, from whichever thread sees its end first: the job
 * thread after the controller's close, or the beat thread once the job
 * failed (the driver may hold the job thread). */
void job_end(job *j, bool closed);
/* Replays one frame from the controller; true for its close. */
bool job_replay_frame(job *j, const frame *f);
/* Destroys every object of the job and gives its window back. */
void job_cleanup(job *j);
/* Stops the job's threads, waits for its devices, cleans up and frees it:
 * for a job that ends inside a longer-lived process (tests, fuzzers); a
 * worker just exits. */
void job_free(job *j);

/* ---- request.c ---- */
void replay_request(job *j, const frame *f);
/* An answer: u8 0, u32 result, outputs. */
void job_answer(job *j, CUresult result, const void *out, size_t n);
/* A protocol refusal (u8 1, why): the controller fails the job with it. */
void job_refuse(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Logs "no memory for WHAT" once; the caller then answers
 * CUDA_ERROR_OUT_OF_MEMORY (the program's error) or refuses. */
void job_log_nomem(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* What objects_put's failure means, for a message: "is taken or out of
 * range", or that memory is short (errno after objects_put). */
const char *job_put_failure(void);

/* ---- handover.c ---- */
/* A buffer of at least need bytes at *buf (capacity *cap), grown as needed
 * and kept; NULL when memory is short. */
uint8_t *job_buffer(uint8_t **buf, size_t *cap, size_t need);

/* ---- jitlink.c ---- */
/* JOB_OP_LINK: links the program's inputs with this agent's driver. */
void replay_link(job *j, wire_reader *r);
/* stream_attr.c: cuStreamGet/SetAttribute, cuStreamCopyAttributes. */
void replay_stream_attribute(job *j, uint32_t op, wire_reader *r);
/* enumerate.c: the kernels of a module or library, by name. */
void replay_enumerate(job *j, uint32_t op, wire_reader *r);
/* memop_batch.c: cuStreamBatchMemOp. */
void replay_memop_batch(job *j, wire_reader *r);
CUresult job_function_on(job *j, agent_obj *fn, int device, CUfunction *out);

/* ---- mesh.c: the job's other agents (proto/mesh.h) ---- */
/* JOB_OP_PEER_LISTEN: answers the port the agents before this one dial. */
void mesh_listen(job *j, wire_reader *r);
/* JOB_OP_JOIN (its body after the op): connected to every other agent, or
 * a refusal naming both machines. */
void mesh_join_request(job *j, const uint8_t *body, size_t len);
/* A beat to each peer that heard nothing for JOB_BEAT_MS (the beat thread). */
void mesh_beat(job *j);
/* Tells the peers the job's end: cause (an abort), or NULL (an orderly close). */
void mesh_end(job *j, const char *cause);
void mesh_free(job *j);
/* True when process number peer is an agent this one is connected to. */
bool mesh_peer_up(job *j, uint32_t peer);
/* Queues a rail frame to peer (signal, then len bytes of the staging
 * buffer data, which is given back once sent; NULL and 0 for a bare
 * signal) for the mesh's sender thread. Never blocks: the driver's
 * callback thread calls it. */
void mesh_post(job *j, uint32_t peer, uint64_t signal, void *data, size_t len);

/* ---- rail.c: peer copies and signals between agents (proto/rail.h) ---- */
/* Makes the page-locked words streams wait on (at the mesh's start);
 * -1 when memory is short. */
int rail_open(job *j);
/* Replays a JOB_OP_RAIL_SEND, _RECV, JOB_OP_SIGNAL or JOB_OP_WAIT record
 * on s (NULL: no place on a timeline). */
CUresult rail_replay(job *j, uint32_t op, agent_obj *s, const uint8_t *body, size_t len);
/* A rail frame from peer whose head said signal: its len bytes are read
 * from c (the rest of a split frame) into place, then the waiting stream
 * may go. Errors name what the peer got wrong. */
int rail_arrive(job *j, uint32_t peer, uint64_t signal, conn *c, uint64_t len, rig_why *why);
/* Lets every stream waiting for a signal go (the job failed: nothing will
 * come, and the streams must drain). */
void rail_release(job *j);
void rail_free(job *j);

/* ---- handover.c ---- */
/* A handover frame whose one record is a host-to-device copy, its data
 * received straight into a staging buffer by handover_recv: the agent's
 * own kind, outside the wire's, so only the reader makes it. */
#define JOB_FRAME_STAGED ((frame_kind)0x100)
/* conn_recv for whoever reads the job's connection: large host-to-device
 * copies arrive as JOB_FRAME_STAGED frames, everything else as sent. The
 * job thread with every earlier frame replayed reads in_order: a copy to an
 * idle stream may then land in device memory in place (in_place.c). The
 * deadline and idle_ms bound the wait for a frame to begin; one begun is
 * read to its end. */
int handover_recv(job *j, frame *f, int64_t deadline, int idle_ms, bool in_order, rig_why *why);
/* frame_release that also gives back a staged frame's buffer. */
void handover_frame_release(job *j, frame *f);
/* Replays a FRAME_HANDOVER or JOB_FRAME_STAGED frame. */
void replay_handover(job *j, const frame *f);
void replay_drop(job *j, const frame *f);
CUstream job_real_stream(agent_obj *s);

/* ---- in_place.c: copies straight between the socket and device memory ---- */
/* The host address of len bytes of device memory at p that device may use,
 * when the backend's device memory is host memory and the whole range is
 * one allocation of it; else NULL (the copy goes through staging). */
void *job_device_bytes(job *j, int device, CUdeviceptr p, uint64_t len);
/* True when s has done all its work (legacy ordering included), so a copy
 * on it may happen now, in the calling thread. */
bool job_stream_idle(job *j, agent_obj *s);

/* ---- pool.c: memory pools and stream-ordered allocation ---- */
/* A pool of device at id (the controller's); max_size 0: no limit. */
CUresult pool_create(job *j, uint64_t id, int device, uint64_t max_size);
/* Allocates size bytes from pool id for stream (a wire id) into *out. */
CUresult pool_alloc(job *j, uint64_t id, uint64_t stream, uint64_t size, CUdeviceptr *out);
/* cuMemFreeAsync on s: *found when base is a pool allocation, which goes
 * back to its pool once s reaches this point. */
CUresult pool_free_async(job *j, agent_obj *s, uint64_t stream, CUdeviceptr base, bool *found);
/* cuMemFree of a pool allocation: false when base is none. */
bool pool_free_now(job *j, CUdeviceptr base);
CUresult pool_get_attribute(job *j, uint64_t id, uint32_t attr, uint64_t *value);
CUresult pool_set_attribute(job *j, uint64_t id, uint32_t attr, uint64_t value);
CUresult pool_trim(job *j, uint64_t id, uint64_t keep);
/* cuMemPoolDestroy: false when id is no pool; its memory stays usable
 * until freed. */
bool pool_destroy(job *j, uint64_t id);
/* Frees every pool's records (the window's release unmaps their memory). */
void pool_cleanup(job *j);

/* ---- graph.c: executable graphs the controller built ---- */
/* JOB_OP_GRAPH: builds and instantiates a graph with this agent's driver. */
void replay_graph(job *j, wire_reader *r);
/* JOB_OP_GRAPH_LAUNCH's record: launches graph id on s. */
CUresult graph_launch(job *j, agent_obj *s, uint64_t id);
/* The drop of cuGraphExecDestroy: false when id is no graph. */
bool graph_drop(job *j, uint64_t id);
/* Frees one graph object's driver state (job_cleanup). */
void graph_free_real(job *j, agent_obj *o);

/* ---- images.c: arrays, texture and surface objects, 3-D copies ---- */
/* Answers the requests of proto/images.h (array, mipmap, texture and
 * surface creation). */
void image_request(job *j, uint32_t op, wire_reader *r);
/* A cuMemcpy3DAsync_v2 record on s, decoded; a copy into the program
 * returns its staging buffer. */
CUresult image_copy(job *j, agent_obj *s, const rec_copy_3d *v, void **staging, size_t *staging_len);
/* A drop of an array, mipmap, texture or surface object: false when id is
 * none of them. */
bool image_drop(job *j, uint32_t op, uint64_t id);
/* Destroys o's real object (job cleanup). */
void image_release(job *j, agent_obj *o);

/* ---- texref.c: a module's texture and surface references ---- */
/* Answers the requests of proto/texref.h. */
void texref_request(job *j, uint32_t op, wire_reader *r);
/* The reference id (a surface one when surface) whose module is still
 * loaded, or NULL. */
agent_obj *texref_get(job *j, uint64_t id, bool surface);

/* ---- tensormap.c ---- */
/* Answers cuTensorMapEncodeTiled and cuTensorMapReplaceAddress. */
void tensormap_request(job *j, uint32_t op, wire_reader *r);

/* ---- sender.c ---- */
/* A note whose marker, run by the driver, hands it to the sender. */
note *note_new(job *j);
/* Frees a note that was sent, or whose marker was never enqueued. */
void note_free(job *j, note *n);
void CUDA_CB job_marker(void *arg);
/* Sends a note whose stream already reached its value (and its bytes, at
 * most a marker's) from the job thread, which may wait on the socket,
 * when that cannot reorder words; true when it took the note (sent, or the
 * job failed in the send; the note is freed). */
bool job_send_reached(job *j, note *n);
/* Sends an in-place note (its bytes read from device memory) from the job
 * thread, after every note the sender holds, before the job thread replays
 * anything that could change those bytes or send a later word; frees the
 * note. A small one waits in j->in_place for the next: the job thread calls
 * job_flush_in_place before any record but another copy into the program,
 * and at the end of each frame, so a run of them costs one write. */
void job_send_in_place(job *j, note *n);
void job_flush_in_place(job *j);
void *sender_main(void *arg);
void *beat_main(void *arg);
void *watch_main(void *arg);
/* Sends what kernels printed so far (before words, so output printed before
 * a value reaches the program before the value does). */
void forward_output(job *j);

#endif

/* softgpu's driver layer: what its files share. Every .c of the driver layer
 * includes this first: it asks cuda.h for its internal view
 * (__CUDA_API_VERSION_INTERNAL), in which no name is #defined to another and
 * every exported symbol (cuMemAlloc_v2, cuMemcpyHtoD_v2_ptds, the legacy
 * cuCtxSynchronize) has its own prototype, so that defining a function under
 * its exported name checks its signature against the toolkit's.
 * The engine (PTX parse and run) is behind engine.h; nothing here knows PTX.
 *
 * Where softgpu chooses (the driver's documentation leaves room, or a CPU
 * cannot do what a GPU does):
 *  - SOFTGPU_DEVICES (default 1) and SOFTGPU_MEMORY (default 4G) are read at
 *    cuInit; a malformed value fails cuInit with one line on stderr.
 *  - Device memory is host memory at the device address; every range lives
 *    in one table (alloc.c) that the engine, copies and queries consult, and
 *    nothing in flight ever touches memory taken away (soft_mem_use_*).
 *  - cuMemAddressReserve honours the requested address exactly or fails
 *    (CUDA_ERROR_OUT_OF_MEMORY); read-only VMM access is not enforced, but
 *    which devices have access is: a kernel of a device without it faults
 *    (CUDA_ERROR_ILLEGAL_ADDRESS), a copy on its context is refused
 *    (CUDA_ERROR_INVALID_VALUE).
 *  - A failed launch poisons its context for good (until cuCtxDestroy or
 *    cuDevicePrimaryCtxReset) and logs one line naming kernel and address.
 *  - cuStreamDestroy returns at once; cuMemFree and cuModuleUnload wait for
 *    the work that may use what they free.
 *  - extra's CU_LAUNCH_PARAM_BUFFER_SIZE may lie between the end of the last
 *    parameter and that rounded up to the largest alignment (8 at least).
 *  - The PTX entry for the highest compute capability up to 7.5 is chosen,
 *    else the lowest above it; SASS-only images get CUDA_ERROR_NOT_SUPPORTED.
 *    A function's PTX version is its module's .target, its binary version
 *    the device's 7.5.
 *  - cuInit sets CUDA_FORCE_PTX_JIT=1 in the process (unless set): softgpu
 *    ignores SASS as that asks, and cuBLASLt then picks kernels with PTX.
 *  - A kernel reaching an instruction the engine cannot run is refused
 *    alone (cuModuleGetFunction, cuKernelGetFunction and launches:
 *    CUDA_ERROR_NOT_SUPPORTED, one line naming kernel, instruction and PTX
 *    line); its module loads, where a GPU's JIT would refuse it whole.
 *  - A graph launch runs its nodes one after another, in an order that
 *    respects their dependencies, on the stream's worker (independent
 *    branches do not overlap); memcpy nodes take any 3-D copy, arrays
 *    too (copy3d.c); an event record in a capture makes no node (it forks and joins
 *    streams); destroying a stream while it captures leaves the capture to
 *    fail at its end. */
#ifndef RIG_SOFTGPU_DRIVER_H
#define RIG_SOFTGPU_DRIVER_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "softgpu/engine.h"

/* Marks an entry point the library exports (CFLAGS hide everything else). */
#define SOFT_API __attribute__((visibility("default")))

/* A CUresult cuda.h does not name: the only code cudart (CUDA 13) reports as
 * cudaErrorInvalidConfiguration (a test driver returned each code 1..1000
 * from cuLaunchKernel; see scripts/gen-error-table). Returned for a launch
 * geometry no device can run, as on a GPU. */
#ifndef CUDA_ERROR_INVALID_CONFIGURATION
#define CUDA_ERROR_INVALID_CONFIGURATION ((CUresult)9)
#endif


/* Returns from the calling function when r is not CUDA_SUCCESS. */
#define SOFT_TRY(r) do { CUresult soft_try_ = (r); if (soft_try_ != CUDA_SUCCESS) return soft_try_; } while (0)

/* ---- log (log.c) ---- */
/* One line on stderr, prefixed "softgpu: ". */
void soft_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Keeps one line (len bytes, no newline) in the driver log (logs.c), which
 * cuLogsDumpToMemory reads and callbacks receive. */
void soft_logs_add(const char *text, size_t len);

/* ---- init and devices (device.c) ---- */
#define SOFT_MAX_DEVICES 16
#define SOFT_WARP 32
#define SOFT_MAX_THREADS 1024
#define SOFT_SHARED_PER_BLOCK (48u * 1024)
#define SOFT_SHARED_PER_BLOCK_OPTIN (64u * 1024)
#define SOFT_SHARED_PER_SM (64u * 1024)
#define SOFT_SM_COUNT 40
#define SOFT_REGS_PER_SM 65536
#define SOFT_MAX_BLOCKS_PER_SM 16
#define SOFT_THREADS_PER_SM 1024
/* CUDA_ERROR_NOT_INITIALIZED until cuInit succeeded. */
CUresult soft_check_init(void);
/* CUDA_ERROR_INVALID_DEVICE unless dev names a device (after init). */
CUresult soft_check_device(CUdevice dev);
int soft_device_count(void);
uint64_t soft_device_total_memory(void);
/* Bytes allocated on dev (cuMemAlloc, cuMemCreate); add may be negative.
 * soft_device_reserve fails (false) past total memory. */
bool soft_device_reserve(int dev, uint64_t bytes);
void soft_device_unreserve(int dev, uint64_t bytes);
uint64_t soft_device_used(int dev);

/* ---- what the CUDA runtime asks of its driver beyond cuda.h
 * (export_tables.c, integrity.c, md2.c) ---- */
extern const void *const soft_table_runtime[];
extern const void *const soft_table_integrity[];
/* Table 7's slot 1: (version, unix seconds, 16 bytes out). */
CUresult soft_integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);
void soft_hmac_md2(const uint8_t key[16], const void *data, size_t len, uint8_t out[16]);
/* Runs and forgets the runtime's context-local storage of ctx (destroyed
 * or reset). */
struct CUctx_st;
void soft_storage_drop(struct CUctx_st *ctx);
/* Device dev's primary context, made if need be, not retained. */
CUresult soft_primary_context(int dev, struct CUctx_st **out);

/* ---- handles (handle.c): which pointers are live objects of which kind ---- */
typedef enum soft_kind {
    SOFT_CTX = 1, SOFT_STREAM, SOFT_EVENT, SOFT_MODULE, SOFT_FUNC, SOFT_LIBRARY,
    SOFT_VMM, SOFT_LINK, SOFT_POOL, SOFT_GRAPH, SOFT_NODE, SOFT_EXEC,
    SOFT_ARRAY, SOFT_MIPMAP, SOFT_TEXOBJ, SOFT_SURFOBJ,
    SOFT_TEXREF, SOFT_SURFREF, SOFT_UOBJ,
} soft_kind;
/* Records p as a live object of kind k; false when out of memory. */
bool soft_handle_add(const void *p, soft_kind k);
/* True when p is a live object of kind k. Never dereferences p. */
bool soft_handle_valid(const void *p, soft_kind k);
void soft_handle_remove(const void *p);

/* ---- device malloc's heap (heap.c) ---- */
struct CUctx_st;
/* The engine's soft_launch.heap_alloc and heap_free, ctx the context. */
uint64_t soft_heap_alloc(void *ctx, uint64_t bytes);
void soft_heap_free(void *ctx, uint64_t addr);
/* True once a kernel made the heap: its size is fixed from then on. */
bool soft_heap_made(struct CUctx_st *c);
/* Forgets the heap; its range goes with the context's other ranges. */
void soft_heap_drop(struct CUctx_st *c);

/* ---- contexts (context.c) ---- */
struct soft_pts;
struct CUctx_st {
    int device;
    unsigned flags;
    bool primary;
    int primary_refs;          /* primary: retains outstanding */
    unsigned long long id;     /* never reused */
    _Atomic unsigned long long pts_key;  /* names its per-thread streams; renewed on reset */
    pthread_mutex_t lock;      /* streams list, per-thread streams */
    pthread_cond_t reaped;     /* a destroyed stream's worker left the list */
    _Atomic int sticky;        /* CUresult that poisons the context, or 0 */
    struct CUstream_st *null_stream;
    struct CUstream_st *streams;   /* every stream but the NULL one */
    size_t limits[CU_LIMIT_MAX];
    CUfunc_cache cache_config;
    _Atomic unsigned long long peers;   /* bit d: peer access to device d's contexts enabled */
    _Atomic unsigned attached;          /* cuCtxAttach's count beyond creation */
    struct soft_heap *heap;             /* device malloc's heap (heap.c), NULL until used */
};
/* The calling thread's current context: CUDA_ERROR_INVALID_CONTEXT when none,
 * CUDA_ERROR_CONTEXT_IS_DESTROYED when it was destroyed. */
CUresult soft_ctx_current(struct CUctx_st **out);
/* ctx's sticky error, or CUDA_SUCCESS. */
CUresult soft_ctx_status(struct CUctx_st *ctx);
/* A fresh process-unique number (context ids, per-thread stream keys). */
unsigned long long soft_unique(void);
/* Current context with its sticky error checked: for calls that do work. */
CUresult soft_ctx_enter(struct CUctx_st **out);
/* Makes err ctx's sticky error unless it already has one. */
void soft_ctx_poison(struct CUctx_st *ctx, CUresult err);
/* Waits for every stream of ctx, then returns its sticky error. */
CUresult soft_ctx_sync(struct CUctx_st *ctx);

/* ---- allocations (alloc.c): every range kernels and copies may touch ---- */
typedef enum soft_mem_kind {
    SOFT_MEM_DEVICE = 1,       /* cuMemAlloc */
    SOFT_MEM_HOST,             /* cuMemAllocHost / cuMemHostAlloc */
    SOFT_MEM_REGISTERED,       /* cuMemHostRegister: the program's memory */
    SOFT_MEM_VMM,              /* a cuMemMap'd range with access set */
    SOFT_MEM_GLOBAL,           /* a module's .global / .const variable */
    SOFT_MEM_MANAGED,          /* cuMemAllocManaged (managed.c) */
} soft_mem_kind;
typedef struct soft_range {
    uint64_t base, size;
    soft_mem_kind kind;
    int device;
    struct CUctx_st *ctx;      /* owner; NULL for library globals, VMM, pools */
    unsigned flags;            /* host allocation flags */
    struct CUmemPoolHandle_st *pool;   /* stream-ordered allocations: their pool */
    uint32_t access;           /* VMM: bit d set when device d may touch it */
} soft_range;
/* Adds r; CUDA_ERROR_INVALID_VALUE if it overlaps a live range. */
CUresult soft_range_add(const soft_range *r);
/* Removes the range starting at base; fills *out if out; false if none. */
bool soft_range_remove(uint64_t base, soft_range *out);
/* The range holding addr: true and *out. */
bool soft_range_find(uint64_t addr, soft_range *out);
/* True when [addr, addr + n) lies inside one live range (n may be 0), or
 * in VMM mappings that follow each other without a gap (one reservation's
 * pieces, as PyTorch's expandable segments map them). */
bool soft_range_covers(uint64_t addr, uint64_t n);
/* The same, and device dev may touch all of it: VMM memory only where
 * cuMemSetAccess granted dev access. */
bool soft_range_covers_on(uint64_t addr, uint64_t n, int dev);
/* The VMM range at base is now accessible to the devices in mask (nonzero). */
void soft_range_set_access(uint64_t base, uint32_t mask);
/* Removes every range owned by ctx and calls fn on each (may be NULL). */
void soft_range_drop_ctx(struct CUctx_st *ctx, void (*fn)(const soft_range *));
/* The engine's view of the table: any device's, and device dev's (VMM
 * ranges it has no access to are not there). */
extern const soft_memory soft_memory_table;
const soft_memory *soft_memory_on(int dev);

/* Forgets the advice of the managed allocation at base (managed.c). */
void soft_managed_forget(uint64_t base);

/* Zeroed host memory for a device range, 256-byte aligned (pages when
 * large); NULL on failure. Free with soft_pages_free and the same size. */
void *soft_pages_alloc(uint64_t size);
/* Unmaps pages already out of the table, once no work still touches them. */
void soft_pages_free(void *p, uint64_t size);

/* Work that touches device memory (a launch, a queued copy or fill) runs
 * between soft_mem_use_begin/end; taking memory away (unmap, access
 * reduced) runs between soft_mem_retire_begin/end, after its range left the
 * table. So nothing in flight ever touches unmapped pages: it finishes
 * first, and what starts later no longer finds the range. */
void soft_mem_use_begin(void);
void soft_mem_use_end(void);
void soft_mem_retire_begin(void);
void soft_mem_retire_end(void);

/* ---- arrays (array.c), 3-D copies (copy3d.c), texture and surface
 * objects (texture.c) ---- */
/* A CUDA array: its elements row-major in host memory (img.data), slices
 * one after another; img holds its geometry (no sampling state). */
struct CUarray_st {
    CUDA_ARRAY3D_DESCRIPTOR desc;
    struct CUctx_st *ctx;
    int device;                          /* ctx's, kept for after ctx is gone */
    soft_image img;
    uint64_t bytes;
    struct CUmipmappedArray_st *owner;   /* a mipmapped array's level, or NULL */
};
struct CUmipmappedArray_st {
    CUDA_ARRAY3D_DESCRIPTOR desc;
    unsigned levels;
    struct CUarray_st **level;
};
/* The live array h (CUDA_ERROR_INVALID_HANDLE if none). */
CUresult soft_array_get(CUarray h, struct CUarray_st **out);
/* The object a kernel names by handle (soft_launch.image). */
const soft_image *soft_image_find(uint64_t handle, bool surface);
/* Texture and surface references (texref.c): a module's, one per
 * soft_program_ref, made at load and freed with it. */
CUresult soft_refs_make(struct CUmod_st *mod);
void soft_refs_free(struct CUmod_st *mod);
/* Every reference of mod as bound now (a launch's copy, malloc'd; NULL
 * when mod has none); an unbound one has data NULL. */
CUresult soft_refs_snapshot(struct CUmod_st *mod, soft_image **out);
/* When the launch runs: device memory freed since reads as unbound. */
void soft_refs_recheck(soft_image *refs, uint32_t n);
/* Declared by cuda.h only for the driver's own build. */
CUresult CUDAAPI cuTexRefSetAddress2D_v2(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR *desc, CUdeviceptr dptr,
                                         size_t Pitch);
/* A copy of a box between two pitched sides (host, device or array
 * memory, already resolved and checked). */
struct soft_copy3d {
    uint8_t *dst;
    const uint8_t *src;
    uint64_t dpitch, dslice, spitch, sslice;
    uint64_t width, height, depth;
    uint64_t dst_span, src_span;   /* bytes from the first to past the last */
    bool dst_dev, src_dev;         /* device memory: checked again when it runs */
};
struct soft_op;
/* cuMemcpy2D* with an array on either side (copy.c hands them over). */
CUresult soft_copy2d_array(const CUDA_MEMCPY2D *p, CUstream h, bool async, bool ptds);
/* A graph's memcpy node with arrays or depth above 1. */
CUresult soft_copy3d_any_op(const CUDA_MEMCPY3D *p, struct soft_op **out);

/* ---- streams (stream.c) ---- */
typedef struct soft_op soft_op;
typedef void (*soft_op_fn)(soft_op *op, struct CUctx_st *ctx);
/* A dependency: a stream reaching a value, or an event completing a record. */
typedef struct soft_dep {
    struct CUstream_st *stream;
    struct CUevent_st *event;
    uint64_t value;
} soft_dep;
struct soft_op {
    soft_op *next;
    soft_op_fn run;            /* runs on the stream's worker */
    soft_op_fn finish;         /* then, with the stream's lock held and its count advanced */
    void (*drop)(soft_op *op); /* frees what the op owns (may be NULL) */
    /* Makes *copy own what op owns, after copy was made as a bytewise copy
     * of op (a graph's node instantiated); NULL: nothing to take. */
    bool (*clone)(soft_op *copy);
    bool always;               /* run even when the context is poisoned */
    CUgraphNodeType node_type; /* the node it becomes in a capture (0: a kernel's; capture.c) */
    uint64_t value;            /* the stream's count once done */
    size_t ndeps;
    soft_dep *deps;
    union {
        /* *_dev: that side is device memory, checked again when the copy
         * runs (it may have been freed meanwhile). */
        struct { void *dst; const void *src; size_t n; void *staging; bool dst_dev, src_dev; } copy;
        struct { CUDA_MEMCPY2D p; uint64_t dst_span, src_span; bool dst_dev, src_dev; } copy2d;
        struct { uint64_t dst; size_t pitch, width, height; unsigned value, elem; } fill;
        struct { CUhostFn fn; void *data; } host;
        struct { CUstreamCallback fn; void *data; struct CUstream_st *stream; } callback;
        struct { struct CUevent_st *event; uint64_t seq, ns; } record;
        struct { uint64_t addr, value; unsigned flags; bool wide; } memop;
        struct { CUstreamBatchMemOpParams *ops; unsigned n; } batch;   /* a batch graph node's, owned */
        struct { struct soft_gmem *m; } gmem;   /* a graph memory node's allocation (graph_mem.c) */
        struct {
            struct CUfunc_st *func; uint32_t grid[3], block[3], shared; void *params; bool cooperative;
            bool in_graph;     /* a graph's (soft_launch_to_graph): holds no module */
            soft_image *refs;  /* its module's texture and surface reference bindings */
            uint32_t nrefs;
        } launch;
        struct { uint64_t base; unsigned long long stream; } pool_free;
        struct { struct soft_plan *plan; } graph;
        struct soft_copy3d copy3d;
    } u;
};
struct CUstream_st {
    struct CUctx_st *ctx;
    unsigned flags;
    int priority;
    bool legacy;               /* the context's NULL stream */
    bool per_thread;           /* a thread's default stream */
    unsigned long long id;
    _Atomic int refs;
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    pthread_t thread;
    pthread_t thread_owner;    /* per_thread: the thread it serves */
    bool started, stop;
    bool destroyed;            /* by cuStreamDestroy: its worker drains, then frees it */
    soft_op *head, *tail;
    uint64_t submitted, completed;
    struct CUstream_st *next;  /* in ctx->streams */
    /* Stream capture (capture.c), under its lock: the capture this stream
     * takes part in, and the nodes the next captured work depends on. */
    struct soft_capture *capture;
    struct CUgraphNode_st **cap_deps;
    size_t cap_ndeps;
    /* cuStreamSetAttribute's hints (stream_attr.c), under its lock: softgpu
     * has no L2 to reserve or sync domains to pick, so they only read back. */
    CUaccessPolicyWindow access_policy;
    CUsynchronizationPolicy sync_policy;
    CUlaunchMemSyncDomainMap domain_map;
    CUlaunchMemSyncDomain domain;
};
/* Resolves a stream argument (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or
 * a handle); ptds: the caller is a _ptsz/_ptds entry point. */
CUresult soft_stream_get(CUstream h, bool ptds, struct CUstream_st **out);
/* A zeroed op; NULL when out of memory. */
soft_op *soft_op_new(soft_op_fn run);
/* Adds a dependency to op; false when out of memory. */
bool soft_op_dep(soft_op *op, struct CUstream_st *s, struct CUevent_st *e, uint64_t value);
/* Queues op on s (ownership passes); returns the value s reaches with it. */
CUresult soft_stream_submit(struct CUstream_st *s, soft_op *op, uint64_t *value);
/* Frees an op that was never queued (or ran), with what it owns. */
void soft_op_free(soft_op *op);
/* Waits until s reaches value. */
void soft_stream_wait(struct CUstream_st *s, uint64_t value);
/* True when no work s would wait for is unfinished, so that a synchronous
 * operation may run on the calling thread at once. */
bool soft_stream_idle(struct CUstream_st *s);
/* Waits for everything submitted to s so far. */
void soft_stream_drain(struct CUstream_st *s);
CUresult soft_stream_create(struct CUctx_st *ctx, unsigned flags, int priority,
                            bool legacy, bool per_thread, struct CUstream_st **out);
/* Drains s, stops its worker and drops the creator's reference. */
void soft_stream_destroy(struct CUstream_st *s);
/* cuStreamDestroy: returns at once; the worker runs what is queued, leaves
 * ctx->streams and frees s. */
void soft_stream_retire(struct CUstream_st *s);
void soft_stream_ref(struct CUstream_st *s);
void soft_stream_unref(struct CUstream_st *s);

/* ---- events (event.c) ---- */
struct CUevent_st {
    unsigned flags;
    _Atomic int refs;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t recorded;         /* records asked */
    uint64_t completed;        /* records done */
    struct CUstream_st *stream;  /* of the last record (referenced) */
    uint64_t value;            /* that stream's value after the record */
    uint64_t ns;               /* CLOCK_MONOTONIC of the last completed record */
    struct CUctx_st *ctx;
    /* A record made while its stream captured (capture.c): that capture's
     * id (0: none) and the nodes a wait on the event then depends on. */
    unsigned long long cap_id;
    struct CUgraphNode_st **cap_nodes;
    size_t cap_n;
};
void soft_event_unref(struct CUevent_st *e);
/* True when e has completed record number seq. */
bool soft_event_reached(struct CUevent_st *e, uint64_t seq);
void soft_event_wait(struct CUevent_st *e, uint64_t seq);

/* ---- memory pools (mempool.c) ---- */
/* A sync point on device dev (stream, event, context synchronize): each of
 * its pools gives back what it holds unused above its release threshold. */
void soft_pool_sync_point(int dev);
/* cuMemFree of a pool allocation r: waits for the device, then returns the
 * memory to its pool. */
CUresult soft_pool_free_now(const soft_range *r);

/* ---- stream capture (capture.c) and graphs (graph.c) ---- */
/* True when s is capturing: work submitted to it becomes graph nodes. */
bool soft_capturing(struct CUstream_st *s);
/* Takes op (ownership passes) as a node of s's capture, depending on what
 * s's captured work so far ends in. */
CUresult soft_capture_add(struct CUstream_st *s, soft_op *op);
/* Before work on the legacy NULL stream: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
 * (and each such capture invalidated) when a blocking stream of its
 * context is capturing, as the driver does. */
CUresult soft_capture_legacy_check(struct CUstream_st *s);
/* Before a call that is unsafe during capture (allocation, synchronous
 * copy, synchronization): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED when the
 * calling thread's capture mode forbids it (cuThreadExchangeStreamCaptureMode),
 * invalidating the captures that forbid it; else CUDA_SUCCESS. */
CUresult soft_capture_unsafe(void);
/* A synchronous use of capturing stream s (sync, query, blocking copy):
 * invalidates its capture; returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. */
CUresult soft_capture_misuse(struct CUstream_st *s);
/* cuEventRecord on a capturing stream: the event remembers the capture's
 * current nodes. cuStreamWaitEvent on such an event: s joins the capture. */
CUresult soft_capture_record(struct CUstream_st *s, struct CUevent_st *e);
/* *joined: true when e was recorded in a live capture and s now waits on
 * it inside that capture (nothing to queue). */
CUresult soft_capture_wait(struct CUstream_st *s, struct CUevent_st *e, bool *joined);
/* Frees the capture state an event holds (event destroyed). */
void soft_capture_event_free(struct CUevent_st *e);

#define SOFT_NODE_ATTRS 17   /* CU_LAUNCH_ATTRIBUTE_* ids below this */
struct CUgraphNode_st {
    struct CUgraph_st *graph;
    CUgraphNodeType type;
    soft_op *op;                   /* what it runs (NULL: an empty node) */
    struct CUgraphNode_st **deps;  /* nodes it runs after */
    size_t ndeps, capdeps;
    size_t index;                  /* its place in graph->nodes */
    struct CUgraphNode_st *origin; /* a clone's node: the node it was copied from */
    /* A kernel node's launch attributes by id (graph_attr.c): hints that
     * only read back, but for cooperation, which lives in op. */
    CUlaunchAttributeValue attr[SOFT_NODE_ATTRS];
};
struct CUgraph_st {
    pthread_mutex_t lock;
    struct CUgraphNode_st **nodes;
    size_t n, cap;
    struct soft_uref *urefs;       /* user objects it holds references to (userobj.c) */
    size_t nurefs;
};

/* ---- user objects (userobj.c): a destructor the program gives, run once
 * the last reference (the program's, a graph's, an executable graph's or a
 * queued launch's) goes ---- */
struct soft_uref { struct CUuserObject_st *o; unsigned count; };
/* An immutable set of references an executable graph's plan holds, shared
 * by the launches queued with it. */
struct soft_urefs;
/* A new set holding copies of v's references (*out NULL when n is 0);
 * false when out of memory. */
bool soft_urefs_of(const struct soft_uref *v, size_t n, struct soft_urefs **out);
struct soft_urefs *soft_urefs_hold(struct soft_urefs *r);
/* Drops one hold; the last releases the references. */
void soft_urefs_drop(struct soft_urefs *r);
/* Releases a graph's references (its list freed). */
void soft_graph_urefs_release(struct CUgraph_st *g);
/* dst (a new graph) takes copies of src's references; false when out of memory. */
bool soft_graph_urefs_copy(struct CUgraph_st *dst, const struct CUgraph_st *src);
/* A fresh empty graph (NULL when out of memory), a live handle. */
struct CUgraph_st *soft_graph_new(void);
/* Frees g with its nodes and their ops (the handle too). */
void soft_graph_free(struct CUgraph_st *g);
/* Adds a node running op (NULL: empty) after deps; ownership of op passes
 * even on failure. */
CUresult soft_graph_add(struct CUgraph_st *g, CUgraphNodeType type, soft_op *op,
                        struct CUgraphNode_st *const *deps, size_t ndeps, struct CUgraphNode_st **out);

/* Builders for graph nodes, shared with the stream entry points: a launch
 * (launch.c), a copy (copy.c) and a fill (memset.c), checked as the stream
 * calls check them; *out is a fresh op. */
/* cuMemFree or cuMemFreeAsync of a graph allocation (graph_mem.c): true
 * when dptr is one, now no longer in use (its nodes keep the memory). */
bool soft_gmem_free(uint64_t dptr);
/* cuMemAllocAsync and cuMemFreeAsync on capturing s: an alloc node (a new
 * graph allocation at *dptr) or a free node of a graph allocation. */
CUresult soft_gmem_capture_alloc(struct CUstream_st *s, size_t bytes, CUdeviceptr *dptr);
CUresult soft_gmem_capture_free(struct CUstream_st *s, CUdeviceptr dptr);
/* A batch memory-op node's op (memop.c): the operations checked as
 * cuStreamBatchMemOp checks them, copied. */
CUresult soft_batch_op(const CUstreamBatchMemOpParams *ops, unsigned count, unsigned flags, soft_op **out);
/* cuGraphAdd*Node's common part: h and deps checked, then as
 * soft_graph_add (op taken even on failure). */
CUresult soft_graph_add_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t n, CUgraphNodeType type,
                             soft_op *op);
/* Replaces the op of an executable graph's node made from node (of type
 * type): later launches run op (graph.c); op is taken, even on failure. */
CUresult soft_exec_set_op(CUgraphExec h, CUgraphNode node, CUgraphNodeType type, soft_op *op);
CUresult soft_launch_op(const void *fh, const unsigned grid[3], const unsigned block[3], unsigned shared,
                        void **kernelParams, void **extra, soft_op **out);
CUresult soft_copy3d_op(const CUDA_MEMCPY3D *p, soft_op **out);
CUresult soft_fill_op(const CUDA_MEMSET_NODE_PARAMS *p, soft_op **out);
/* A host function call. */
CUresult soft_host_op(CUhostFn fn, void *data, soft_op **out);
/* op now belongs to a graph: a launch stops holding its module, so that a
 * module unloads while graphs that name its kernels live (launching them
 * then is the program's error, as with the driver); a graph's launch holds
 * its kernels' modules while it is queued. */
void soft_launch_to_graph(soft_op *op);
/* The module a launch op (or a graph's, while queued) runs, else NULL. */
struct CUmod_st *soft_launch_module(const soft_op *op);

/* ---- fatbins (fatbin.c) ---- */
/* Finds the PTX to run in image: PTX text, a fatbin wrapper or container
 * (entries raw, zstd or LZ4), or a cubin. len: bytes readable at image, or
 * SIZE_MAX when the caller does not know (the driver API passes no size; the
 * headers then give it). On success *ptx is malloc'd, NUL-terminated text of
 * *ptx_len bytes (caller frees). On failure: CUDA_ERROR_INVALID_IMAGE (bad
 * image), CUDA_ERROR_NOT_SUPPORTED (SASS only), CUDA_ERROR_OUT_OF_MEMORY,
 * with one line in msg. */
CUresult soft_fatbin_ptx(const void *image, size_t len, char **ptx, size_t *ptx_len,
                         char *msg, size_t msglen);
/* For a library whose image is SASS only: PTX naming its kernels (from the
 * first SASS entry's .text sections), each body a trap, so that the library
 * loads and each kernel is refused when used, as a lazily loading driver
 * would fail at first use. CUDA_ERROR_INVALID_IMAGE when there are none. */
CUresult soft_fatbin_sass_stub(const void *image, size_t len, char **ptx, size_t *ptx_len);

/* ---- modules (module.c) ---- */
struct CUfunc_st {
    struct CUmod_st *mod;
    uint32_t entry;
    const soft_entry_info *info;
    int max_dynamic_shared;
    int carveout;
    CUfunc_cache cache;
    struct soft_legacy_launch *legacy;   /* cuFuncSetBlockShape & co., malloc'd on first use */
};
struct CUmod_st {
    soft_program *prog;
    struct CUctx_st *ctx;      /* NULL for a library's module */
    struct CUlib_st *lib;
    uint32_t nfuncs;
    struct CUfunc_st *funcs;
    uint32_t nglobals;
    uint64_t *globals;         /* device address of each global */
    _Atomic int inflight;      /* launches queued or running */
    uint32_t nrefs;
    struct CUtexref_st **refs; /* texture and surface references (texref.c) */
    struct CUmod_st *next;     /* in module.c's list */
};
struct CUlib_st {
    struct CUmod_st *mod;      /* NULL until first used (library.c: lib_module) */
    pthread_mutex_t lock;
    char *ptx, *sass_only;     /* what mod is parsed from, until then */
    size_t ptx_len;
    CUresult err;              /* the parse's failure, answered from then on */
};
/* Loads image (see soft_fatbin_ptx for len) into a module owned by ctx (NULL:
 * a library's); on failure one line in log and on stderr. */
CUresult soft_module_load(const void *image, size_t len, struct CUctx_st *ctx,
                          struct CUmod_st **out, char *log, size_t loglen);
/* soft_module_load in two steps, for a library that parses at first use:
 * the image's PTX (for a library of SASS only, its kernels' stub and
 * *sass_only the reason they cannot run), then the module from that PTX
 * (taking ptx and sass_only; each kernel of a SASS-only library refused
 * with that reason). Each fails with one line in log and on stderr. */
CUresult soft_module_image(const void *image, size_t len, bool library, char **ptx, size_t *ptx_len,
                           char **sass_only, char *log, size_t loglen);
CUresult soft_module_from_ptx(char *ptx, size_t ptx_len, char *sass_only, struct CUctx_st *ctx,
                              struct CUmod_st **out, char *log, size_t loglen);
/* Waits for the module's launches, frees it and everything it holds. */
void soft_module_free(struct CUmod_st *mod);
/* Launch bookkeeping, so that unloading waits for kernels still queued. */
void soft_module_hold(struct CUmod_st *mod);
void soft_module_release(struct CUmod_st *mod);
/* CUDA_SUCCESS when the engine can run f; else CUDA_ERROR_NOT_SUPPORTED,
 * with its reason (kernel, instruction, PTX line) logged. Its module
 * loaded all the same: only the kernels that cannot run are refused. */
CUresult soft_func_runnable(const struct CUfunc_st *f);
/* A CUfunction or CUkernel (cudart passes one for the other): the function,
 * or NULL. Kernels and functions are the same objects here. */
struct CUfunc_st *soft_func_get(const void *h);

#endif

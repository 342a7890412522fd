/* Proxy devices: the agents of RIG_REMOTE_AGENTS, their devices, and the
 * objects (contexts, streams, events, modules, functions) the program holds
 * on them. Internal to the shim's core files. */
#ifndef RIG_SHIM_PROXY_H
#define RIG_SHIM_PROXY_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto/conn.h"
#include "proto/names.h"
#include "shim/local_driver.h"

#define SHIM_DEVICES_MAX 64
#define SHIM_ATTRS_MAX 160

typedef struct agent_link agent_link;
typedef struct proxy_obj proxy_obj;

/* One device the program sees. Local ones first, then proxies. */
typedef struct shim_device {
    bool proxy;
    int local_ordinal;          /* the real driver's ordinal, local devices */
    agent_link *link;           /* proxies: the agent and its device index */
    int remote_ordinal;
    char label[96];             /* "CUDA:0@h100-b" */
    char name[256];
    uint8_t uuid[16];
    uint64_t total_mem;
    int attrs[SHIM_ATTRS_MAX];  /* indexed by CUdevice_attribute */
    int attr_count;
    proxy_obj *primary;         /* the primary context object */
    int primary_refs;
    unsigned primary_flags;
    proxy_obj *null_stream;     /* the legacy default stream */
} shim_device;

/* A stream's timeline: values handed over and values the agent reached. */
typedef struct timeline {
    uint64_t submitted;         /* under the link's send lock */
    uint64_t bytes_submitted;   /* record bytes handed over, cumulative */
    uint64_t bytes_reported;    /* ... and covered by words */
    _Atomic uint64_t reached;   /* written by the receiver under the link lock */
    uint64_t program_writes;    /* last value that writes program memory */
    uint64_t word_value, word_bytes;  /* the agent's last word; the receiver's alone */
} timeline;

typedef enum proxy_type {
    PROXY_FREE = 0,
    PROXY_CONTEXT,
    PROXY_STREAM,
    PROXY_EVENT,
    PROXY_MODULE,      /* also libraries: a library is a module here */
    PROXY_FUNCTION,    /* also kernels */
    PROXY_MEMORY,      /* a physical allocation of the VMM calls */
    PROXY_LINK,        /* a JIT link state on a proxy context (jitlink.c) */
    PROXY_POOL,        /* a memory pool (mempool.c) */
    PROXY_GRAPH,       /* a graph, kept in the shim (graph.c) */
    PROXY_GRAPH_NODE,  /* one of its nodes */
    PROXY_GRAPH_EXEC,  /* an executable graph (graph_exec.c) */
    PROXY_ARRAY,       /* a CUDA array, or a mipmapped array's level (images.c) */
    PROXY_MIPMAP,      /* a mipmapped array */
    PROXY_IMAGE,       /* a texture or surface object */
    PROXY_TEXREF,      /* a module's texture or surface reference (texref.c) */
    PROXY_USER_OBJECT, /* a user object made on a proxy context (userobj.c) */
} proxy_type;

/* What the program gave for a texture or surface object, to answer
 * cuTexObjectGet*Desc with its own handles (images.c). */
typedef struct proxy_image_descs {
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
    CUDA_RESOURCE_VIEW_DESC view;
    bool has_view;
} proxy_image_descs;

/* One input of a JIT link, kept until the link completes. */
typedef struct jit_input {
    uint32_t type;              /* CUjitInputType */
    char *name;
    uint8_t *bytes;
    size_t len;
} jit_input;

/* A kernel parameter as the agent reported it. */
typedef struct proxy_param {
    uint32_t offset, size;
} proxy_param;

/* Every proxy handle points at one of these, inside the arena (arena.c), so
 * telling a proxy handle from a real one is a range check. */
struct proxy_obj {
    uint32_t type;
    int device;                 /* the program's ordinal */
    uint64_t id;                /* wire id: the slot number */
    agent_link *link;
    union {
        struct { bool primary; unsigned flags; unsigned attached; } ctx;  /* attached: cuCtxAttach's count */
        struct {
            timeline tl;
            unsigned flags;
            int priority;
            bool per_thread;
            uint32_t deferred;     /* words queued behind host functions */
            struct capture_member *cap;   /* its part in a capture (capture.c), under its lock */
            struct stream_dep *deps;      /* waits for streams held by host functions (link.c), under the link's lock */
        } stream;
        struct {
            proxy_obj *stream; uint64_t value; unsigned flags; bool recorded;
            struct capture_mark *cap;     /* recorded in a capture (capture.c) */
        } event;
        struct { struct shim_graph *g; } graph;
        struct { struct shim_node *n; } gnode;
        struct { struct shim_exec *x; } gexec;
        struct { _Atomic unsigned refs; void *ptr; CUhostFn destroy; } uobj;
        struct { uint64_t size; } mem;
        struct {
            bool is_default;
            unsigned char access[SHIM_DEVICES_MAX];   /* other devices' CUmemAccess_flags (mempool_access.c) */
        } pool;
        struct { CUDA_ARRAY3D_DESCRIPTOR desc; uint32_t elem; proxy_obj *mipmap; } array;
        struct { CUDA_ARRAY3D_DESCRIPTOR desc; unsigned levels; proxy_obj **level; } mipmap;
        struct { unsigned long long value; bool surface; proxy_image_descs *descs; } image;
        struct {
            proxy_obj *module;
            char *name;            /* malloc'd */
            bool surface;          /* a CUsurfref */
            proxy_obj *array, *mipmap;   /* what it is bound to, for the getters */
            float border[4];
        } texref;
        struct {
            jit_input *inputs;     /* malloc'd */
            unsigned count, cap;
            uint8_t *image;        /* the linked image, the program's until destroy */
            size_t image_len;
            char *error_log;       /* the program's CU_JIT_ERROR_LOG_BUFFER */
            size_t error_log_size;
            char *info_log;        /* ... and CU_JIT_INFO_LOG_BUFFER */
            size_t info_log_size;
        } jit;
        struct {
            bool library;          /* context-free: loaded on each agent when first used */
            uint64_t loaded;       /* bit i: loaded on agent i + 1 */
            uint8_t *image;        /* libraries: a copy, for agents that load it later */
            size_t image_len;
            CUlibrary local;       /* libraries: the local driver's, when there is one */
        } module;
        struct {
            proxy_obj *module;
            uint64_t resolved;     /* bit i: known to agent i + 1 */
            uint32_t param_count;
            uint32_t param_bytes;
            proxy_param *params;   /* malloc'd, from the first agent that resolved it */
            int *attrs;            /* CUfunction_attribute values, malloc'd */
            uint32_t attr_count;
            char *name;            /* malloc'd */
            CUkernel local;        /* kernels of libraries also loaded locally */
            bool told;             /* why it cannot run was logged */
            int coop_device;       /* 1 + the device of the cached resident-block count, 0: none */
            uint32_t coop_threads, coop_shared;
            int coop_blocks;       /* the agent's occupancy for that configuration */
            struct shim_legacy_launch *legacy;  /* cuFuncSetBlockShape & co. (legacy_launch.c) */
        } fn;
    } u;
};

/* ---- texref.c ---- */
/* Forgets module m's texture and surface references (m is unloading). */
void shim_texref_module_gone(proxy_obj *m);

/* ---- arena.c ---- */
/* A zeroed object of type on device (with its link), or NULL when full. */
proxy_obj *arena_new(proxy_type type, int device);
void arena_free(proxy_obj *o);
/* The object h points at if it is a live proxy of that type (PROXY_FREE:
 * any type), else NULL. Safe on any value. */
proxy_obj *arena_get(const void *h, proxy_type type);
bool arena_contains(const void *h);
/* The live object with wire id `id`, or NULL. */
proxy_obj *arena_from_id(uint64_t id);

/* ---- core.c ---- */
/* Devices, after cuInit; NULL outside 0..count-1. */
shim_device *shim_device_at(int ordinal);
/* The thread's current proxy context, or NULL when the current one is local
 * (or none). */
proxy_obj *shim_proxy_current(void);
/* A proxy context's flags (a primary one's are its device's). */
unsigned shim_ctx_flags(const proxy_obj *ctx);
void shim_set_proxy_current(proxy_obj *ctx);
/* True once cuInit succeeded. */
bool shim_initialized(void);
/* The device that owns device pointer p, or -1 when p is in no window. */
int shim_device_of_pointer(uint64_t p);

/* True when the program has at least one proxy device. */
bool shim_has_proxies(void);
/* Number of local devices (they come first). */
int shim_local_count(void);
/* cuInit: loads the local driver and opens every agent, once. */
CUresult shim_init(unsigned flags);
/* The thread's context stack across local and proxy contexts. */
bool shim_ctx_push(proxy_obj *proxy);
bool shim_ctx_pop(proxy_obj **was);
/* The program's allocations on proxies, for pointer queries. Room first
 * (CUDA_ERROR_OUT_OF_MEMORY, logged, when memory is short), so that what
 * the agent allocated is never left unrecorded: reserve before the
 * request, then add_reserved on success or unreserve on failure. */
CUresult shim_alloc_reserve(void);
void shim_alloc_unreserve(void);
void shim_alloc_add_reserved(uint64_t base, uint64_t size, int device);
/* Without a reservation: false (logged) when memory is short. */
bool shim_alloc_add(uint64_t base, uint64_t size, int device);
bool shim_alloc_remove(uint64_t base, uint64_t *size, int *device);
bool shim_alloc_find(uint64_t p, uint64_t *base, uint64_t *size, int *device);
/* Hands over the frees of the pool blocks the shim keeps for reuse that
 * were freed on stream (NULL: every stream), with wait until the streams
 * reached them (mempool.c): before a stream goes, before the device's free
 * memory is asked, when an allocation found none. */
CUresult shim_pool_release_kept(proxy_obj *stream, bool wait);
/* A pool block freed with cuMemFree: no longer one to keep. */
void shim_pool_forget(uint64_t ptr);

/* ---- managed.c: managed and mapped host memory on proxies ---- */
typedef struct shim_managed_info {
    uint64_t base, size;        /* size: as the program asked */
    int device;
    bool host;                  /* cuMemHostAlloc(DEVICEMAP), not managed */
    unsigned flags;
} shim_managed_info;
/* True and *out when p lies in a managed or mapped allocation. */
bool shim_managed_find(uint64_t p, shim_managed_info *out);
/* cuMemHostAlloc(DEVICEMAP) on a proxy context: host pages at their device address. */
CUresult shim_managed_host_alloc(proxy_obj *ctx, size_t bytes, unsigned flags, void **out);
/* Frees the allocation starting at base; false when it is not one. */
bool shim_managed_free(uint64_t base, bool host);
/* What a proxy reports for a device attribute, given the agent's value. */
int shim_managed_device_attribute(CUdevice_attribute a, int agent_value);
/* Before a launch on s: sends what the CPU wrote; after it: the device may
 * have written every allocation of the link. */
CUresult shim_managed_before_launch(agent_link *l, proxy_obj *s);
void shim_managed_after_launch(agent_link *l);
/* Before a copy or memset on s touching [p, p + n) on the device, and after
 * one that wrote it. */
CUresult shim_managed_before_access(proxy_obj *s, uint64_t p, uint64_t n);
void shim_managed_written(uint64_t p, uint64_t n);
/* The program is ordered after work of l: what it may have written is
 * fetched on the next touch. */
void shim_managed_synced(agent_link *l);

/* ---- hostmap.c: registered host memory mapped for proxies ---- */
CUresult shim_hostmap_register(proxy_obj *ctx, void *p, size_t size);
/* False when p starts no mapped registration. */
bool shim_hostmap_unregister(void *p);
/* True and *out when p lies in a mapped registration. */
bool shim_hostmap_device_pointer(const void *p, CUdeviceptr *out);
CUresult shim_hostmap_before_launch(agent_link *l, proxy_obj *s);
void shim_hostmap_synced(agent_link *l);

/* ---- module.c ---- */
/* The address and size of global `name` of module or library m on device. */
CUresult shim_module_global(proxy_obj *m, int device, CUdeviceptr *dptr, size_t *bytes, const char *name);

/* ---- memory.c ---- */
/* Device memory of size bytes on ctx's device (in the table of allocations). */
CUresult shim_mem_alloc(proxy_obj *ctx, size_t size, CUdeviceptr *out);
/* The same, and its free, for graph memory nodes (graph_mem.c): allowed
 * while a capture forbids allocation, the capture's own. */
CUresult shim_mem_alloc_for_graph(proxy_obj *ctx, size_t size, CUdeviceptr *out);
CUresult shim_mem_free_for_graph(CUdeviceptr p);

/* ---- images.c ---- */
/* cuMemcpy2D* with a CUDA array on a side (memory.c hands them over);
 * *local: neither side is a proxy's, the local driver's call. */
CUresult shim_copy2d_array(const CUDA_MEMCPY2D *p, CUstream h, bool per_thread, bool wait, bool *local);

/* Calls the local driver's symbol with the export's own arguments. Without
 * a local driver, a call that names no proxy object and finds no proxy
 * context current has no context to act on. */
#define SHIM_LOCAL(sym)                                                         \
    (shim_local_driver() && shim_local_driver()->fn_##sym                       \
         ? shim_local_driver()->fn_##sym RIG_ARGS_##sym                         \
         : shim_no_local())

/* What a call meant for the local driver returns when there is none. */
static inline CUresult shim_no_local(void)
{
    return shim_initialized() ? (shim_local_driver() ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_CONTEXT)
                              : CUDA_ERROR_NOT_INITIALIZED;
}

#endif

/* Graphs and stream capture on proxies, kept in the shim (capture.c,
 * graph.c, graph_exec.c). A graph is the program's list of nodes, each
 * holding what one stream call would do (a launch with its packed
 * parameters, a copy, a fill, a host function, an event record or wait, a
 * child graph); capturing a proxy stream turns its calls into such nodes
 * instead of handing them over, and launching an executable graph makes
 * those calls again, in dependency order, on the launch stream: a
 * sequence of handovers with no round trip. So host nodes run the
 * program's function in the program and copies read and write the
 * program's memory at each launch, as CUDA does. */
#ifndef RIG_SHIM_GRAPH_H
#define RIG_SHIM_GRAPH_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shim/proxy.h"

typedef struct shim_graph shim_graph;
typedef struct shim_node shim_node;

struct shim_node {
    proxy_obj *handle;          /* the program's CUgraphNode (NULL in an executable's copy) */
    shim_graph *graph;
    CUgraphNodeType type;
    shim_node **deps;           /* the nodes it runs after */
    size_t ndeps, capdeps;
    size_t index;               /* its place in graph->nodes */
    const shim_node *origin;    /* clones: the node it was copied from */
    union {
        struct {
            proxy_obj *fn;
            unsigned grid[3], block[3], shared;
            uint8_t *params;    /* packed as the function's layout says (malloc'd) */
            uint32_t nbytes;
            void **ptrs;        /* kernelParams for GetParams: one per parameter, into params */
        } kernel;
        CUDA_MEMCPY3D copy;     /* Depth 1, host, device or unified sides */
        CUDA_MEMSET_NODE_PARAMS set;
        CUDA_HOST_NODE_PARAMS host;
        struct { proxy_obj *event; } ev;
        struct { shim_graph *g; } child;   /* the graph's own copy */
    } u;
};

struct shim_graph {
    proxy_obj *handle;          /* the program's CUgraph (NULL for an executable's or child's copy) */
    int device;                 /* -1 until a node names one */
    shim_node **nodes;
    size_t n, cap;
};

/* ---- graph.c ---- */
/* A new empty graph; with_handle: the program gets a CUgraph for it. */
shim_graph *graph_new(int device, bool with_handle);
void graph_free(shim_graph *g);
/* The graph a proxy CUgraph names, or NULL. */
shim_graph *graph_of(CUgraph h);
/* Adds a copy of tmpl (its params deep-copied) after deps; *out the node. */
CUresult graph_add(shim_graph *g, const shim_node *tmpl, shim_node *const *deps, size_t ndeps, shim_node **out);
/* A deep copy of g; with_handles: the copy and its nodes get handles. */
shim_graph *graph_clone(const shim_graph *g, bool with_handles);
/* g's nodes in an order where each follows its dependencies (malloc'd);
 * NULL with *rc on a cycle or no memory. */
shim_node **graph_order(const shim_graph *g, CUresult *rc);
/* Replaces dst's params by a deep copy of src's (same type). */
CUresult node_copy_params(shim_node *dst, const shim_node *src);
void node_free_params(shim_node *nd);
/* A kernel node's fields from a launch: packs params by f's layout. */
CUresult node_kernel(shim_node *nd, proxy_obj *f, int device, const unsigned grid[3], const unsigned block[3],
                     unsigned shared, void **kernelParams, void **extra);
/* A node's fields from the program's parameters, checked; dev: the proxy
 * device of the graph (-1: the kernel's module's). */
CUresult node_from_kernel(shim_node *nd, int dev, CUfunction func, CUkernel kern, unsigned gx, unsigned gy,
                          unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, void **params,
                          void **extra);
#define NODE_FROM_KERNEL(nd, dev, p, kern)                                                                    \
    node_from_kernel(nd, dev, (p)->func, kern, (p)->gridDimX, (p)->gridDimY, (p)->gridDimZ, (p)->blockDimX,  \
                     (p)->blockDimY, (p)->blockDimZ, (p)->sharedMemBytes, (p)->kernelParams, (p)->extra)
CUresult node_from_memcpy(shim_node *nd, const CUDA_MEMCPY3D *p);
CUresult node_from_memset(shim_node *nd, const CUDA_MEMSET_NODE_PARAMS *p);
/* The same from cuGraphAddNode's generic form; memory, semaphore, batch and
 * conditional nodes: CUDA_ERROR_NOT_SUPPORTED with one log line. */
CUresult node_from_params(shim_node *nd, int dev, const CUgraphNodeParams *p);
/* Makes the calls a node stands for on proxy stream s. */
CUresult node_run(const shim_node *nd, proxy_obj *s);

/* ---- launch.c ---- */
/* Packs kernelParams (one pointer per parameter) or extra (a ready buffer)
 * into out (f's param_bytes); returns the byte count or -1. */
long launch_pack_params(proxy_obj *f, void **kernelParams, void **extra, uint8_t *out);

/* ---- capture.c ---- */
/* Before stream-ordered work on s: *captured when s is capturing (the
 * caller adds a node with capture_add instead); an error for work on the
 * legacy stream while a blocking stream of its device captures. */
CUresult capture_check(proxy_obj *s, bool *captured);
/* Adds a copy of tmpl to s's capture after s's current dependencies. */
CUresult capture_add(proxy_obj *s, const shim_node *tmpl);
/* Before a call that is unsafe during capture (allocation, synchronous
 * copy or fill, context synchronize): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * when the calling thread's mode forbids it, invalidating those captures. */
CUresult capture_unsafe(void);
/* A synchronous use of s (sync, query): when s captures, invalidates it and
 * returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; else CUDA_SUCCESS. */
CUresult capture_misuse(proxy_obj *s);
/* Work on a capturing stream rig cannot capture: invalidates the capture
 * and logs why once; returns CUDA_ERROR_NOT_SUPPORTED. */
CUresult capture_refuse(proxy_obj *s, const char *what);
/* cuEventRecord on capturing s: e remembers the capture's nodes. A record
 * on a stream that is not capturing forgets them (capture_forget). */
CUresult capture_record(proxy_obj *s, proxy_obj *e);
void capture_forget(proxy_obj *e);
/* cuStreamWaitEvent: *joined when e was recorded in a capture and s now
 * takes part in it (nothing to hand over). */
CUresult capture_wait(proxy_obj *s, proxy_obj *e, bool *joined);

/* ---- graph_exec.c ---- */
/* The executable graph a proxy CUgraphExec names, or NULL. */
struct shim_exec *exec_of(CUgraphExec h);

#endif

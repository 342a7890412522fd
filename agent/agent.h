/* rig-agent's internals: the driver it replays on, the objects of the job
 * it serves, and the replay of each message. */
#ifndef RIG_AGENT_AGENT_H
#define RIG_AGENT_AGENT_H

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "proto/conn.h"
#include "proto/cuda_driver.h"
#include "proto/frame.h"
#include "proto/key.h"

#define AGENT_DEVICES_MAX 16

/* ---- backend.c: the driver ---- */
typedef struct backend {
    cuda_driver drv;
    char kind[32];            /* "softgpu", "GPU driver" (found), "driver" (--driver) */
    int device_count;
    CUcontext primary[AGENT_DEVICES_MAX];
    size_t granularity;       /* the largest minimum VMM granularity of the devices */
    bool host_memory;         /* device memory is host memory at the device address (softgpu) */
} backend;

/* Loads the driver (path from --driver, else the system's libcuda when it
 * has a device, else softgpu next to this program) and opens its devices. */
int backend_open(backend *b, const char *path, char *why, size_t whylen);
/* What a worker's exit does for the next job: the pooled staging buffers
 * freed and every primary context reset (objects freed, a kernel's sticky
 * fault cleared). For a process that serves several jobs on one driver. */
void backend_reset(backend *b);

/* ---- staging.c: page-locked buffers for copies into the program ---- */
/* A buffer of at least n bytes, reused when one is free. */
CUresult staging_get(backend *b, size_t n, void **out);
/* Gives back a buffer staging_get returned for n bytes; never calls the
 * driver (a buffer past the pool's size is freed on a thread of its own). */
void staging_put(backend *b, void *p, size_t n);
/* Frees every pooled buffer (before the contexts they belong to go). */
void staging_drop(backend *b);

/* ---- objects.c: the job's objects by wire id ---- */
typedef enum agent_obj_type {
    AOBJ_STREAM = 1,
    AOBJ_EVENT,
    AOBJ_MODULE,
    AOBJ_LIBRARY,
    AOBJ_FUNCTION,
    AOBJ_MEMORY,          /* a physical allocation of the program's VMM calls */
    AOBJ_POOL,            /* a memory pool (pool.c) */
    AOBJ_GRAPH,           /* an executable graph and its graph (graph.c) */
    AOBJ_ARRAY,           /* a CUDA array (images.c) */
    AOBJ_MIPMAP,          /* a mipmapped array */
    AOBJ_TEXTURE,         /* a texture object */
    AOBJ_SURFACE,         /* a surface object */
    AOBJ_TEXREF,          /* a module's texture or surface reference (texref.c) */
} agent_obj_type;

typedef struct agent_pool agent_pool;

typedef struct agent_obj {
    agent_obj_type type;
    int device;
    union {
        struct { CUstream real; bool null; uint64_t bytes; } stream;
        struct { CUevent real; } event;
        struct { CUmodule real; } module;
        struct { CUlibrary real; } library;
        struct { CUmemGenericAllocationHandle real; } memory;
        struct { agent_pool *p; } pool;
        struct { CUgraph graph; CUgraphExec exec; } graph;
        struct { CUarray real; uint64_t mipmap; } array;   /* a level: its mipmapped array's id */
        struct { CUmipmappedArray real; } mipmap;
        struct { unsigned long long real; } image;         /* texture and surface objects */
        /* the module's reference (CUtexref, or CUsurfref when surface);
         * its module's id, since the reference dies with the module */
        struct { void *real; uint64_t module; CUmodule real_module; bool surface; } texref;
        struct {
            uint64_t module;          /* id of its module or library */
            char *name;
            CUfunction per_device[AGENT_DEVICES_MAX];
            CUkernel kernel;          /* library kernels */
        } fn;
    } u;
} agent_obj;

typedef struct object_table {
    agent_obj **v;
    uint64_t cap;
} object_table;

/* The object with id (of type, 0 = any), or NULL. */
agent_obj *objects_get(object_table *t, uint64_t id, agent_obj_type type);
/* A new zeroed object at id; NULL when the id is taken, 0 or too large
 * (errno EEXIST, EINVAL), or when memory is short (errno ENOMEM). */
agent_obj *objects_put(object_table *t, uint64_t id, agent_obj_type type, int device);
void objects_remove(object_table *t, uint64_t id);

/* ---- window.c: device pointers inside the job's window ---- */
typedef struct window_block window_block;
typedef struct window {
    CUdeviceptr base;
    uint64_t size;
    bool reserved;
    window_block *blocks;     /* mapped allocations, by address */
    window_block *holes;      /* free ranges, by address */
    window_block *ranges;     /* ranges the program reserved (VMM calls) */
    window_block *maps;       /* its mappings inside them */
} window;

/* Reserves exactly [base, base + size) through the driver; false when the
 * driver put it elsewhere (then nothing is held). */
bool window_reserve(window *w, backend *b, uint64_t base, uint64_t size);
/* Maps size bytes for device; CUDA_ERROR_OUT_OF_MEMORY when full. */
CUresult window_alloc(window *w, backend *b, int device, uint64_t size, CUdeviceptr *out);
/* Unmaps an allocation made by window_alloc; INVALID_VALUE for another pointer. */
CUresult window_free(window *w, backend *b, CUdeviceptr p);
/* The same without waiting for the device: for memory no work can still use. */
CUresult window_free_idle(window *w, backend *b, CUdeviceptr p);
/* Unmaps everything and gives the range back. */
void window_release(window *w, backend *b);

/* The program's own VMM calls: a range reserved in the window (the hint
 * honoured when free), given back, and physical memory mapped into it. */
CUresult window_take_range(window *w, backend *b, uint64_t size, uint64_t align, uint64_t hint, CUdeviceptr *out);
CUresult window_give_range(window *w, CUdeviceptr p, uint64_t size);
CUresult window_map(window *w, backend *b, CUdeviceptr p, uint64_t size, CUmemGenericAllocationHandle h);
CUresult window_unmap(window *w, backend *b, CUdeviceptr p, uint64_t size);

/* ---- probe.c ---- */
/* What this machine offers (devices, memory, compute capability, driver
 * version, busy or free) as a table or JSON; returns the exit status. */
int agent_probe(FILE *out, const char *driver, bool json);

/* ---- log.c: the agent's log on stderr ---- */
/* One line, "rig-agent: " and the text, in a single write. */
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* At most LOG_LIMIT_LINES lines per LOG_LIMIT_WINDOW_MS of one kind (what
 * strangers can cause), then a count of those left out. */
#define LOG_LIMIT_LINES 20
#define LOG_LIMIT_WINDOW_MS 10000
typedef struct log_limit {
    int64_t window_ms;
    unsigned lines;
    unsigned long long dropped;
} log_limit;
/* True when a line of this kind may be logged now; the caller holds
 * whatever lock guards l. */
bool agent_log_allowed(log_limit *l);
/* s (n bytes) as text safe for a log line: control bytes, bytes past ASCII
 * and backslashes escaped; returns the length written (cut to fit cap). */
size_t agent_escape(char *out, size_t cap, const char *s, size_t n);

/* ---- config.c: rig-agent --config FILE ---- */
#define AGENT_CONFIG_VALUE_MAX 4096
/* Lines of `NAME = VALUE` ('#' starts a comment); an unset one is "". */
typedef struct agent_config {
    char listen[AGENT_CONFIG_VALUE_MAX];
    char key_file[AGENT_CONFIG_VALUE_MAX];
    char driver[AGENT_CONFIG_VALUE_MAX];
} agent_config;
/* Both fail naming FILE:LINE and what is wrong there (an unknown name, a
 * setting given twice, a line without '='). */
int agent_config_parse(agent_config *c, const char *text, size_t len, const char *path, char *why, size_t whylen);
int agent_config_read(agent_config *c, const char *path, char *why, size_t whylen);

/* ---- server.c: the listener ---- */
/* rig-agent's command line (`rig agent` runs the same); returns the exit
 * status. */
int agent_main(int argc, char **argv);

/* ---- spawner.c: the process that forks workers and probes ---- */
typedef struct spawner {
    int requests;             /* a request and its descriptors; the child's pid back */
    int exits;                /* "pid status" of each child that exited */
    pthread_mutex_t lock;     /* one request at a time */
} spawner;
/* Forks the spawner; call it before the listener starts any thread. */
int spawner_start(spawner *sp, const char *driver, const rig_key *key, char *why, size_t cap);
/* A worker serving the proven connection conn_fd, saying how the job went
 * on status_fd; returns its pid, or -1 with why. The descriptors stay the
 * caller's to close. */
pid_t spawner_worker(spawner *sp, int conn_fd, int status_fd, uint32_t index, char *why, size_t cap);
/* A child writing what `rig-agent --probe --json` prints to out_fd. */
pid_t spawner_probe(spawner *sp, int out_fd, char *why, size_t cap);
/* One exit report from sp->exits: 1 with pid and wait status, 0 when none
 * is waiting, -1 when the spawner is gone. */
int spawner_exited(spawner *sp, pid_t *pid, int *status);

/* ---- worker.c: one job in a process of its own ---- */
typedef struct worker_args {
    int fd;                   /* the proven connection */
    uint32_t index;           /* this agent's process number in the job */
    const char *driver;       /* the driver the listener announced */
    int status_fd;            /* lines to the listener: "ending", "ended TEXT" */
    const rig_key *key;       /* the job key (the listener's, in this copy of its memory) */
} worker_args;
/* In a fresh child of the spawner: serves the job and exits. */
void worker_main(const worker_args *a) __attribute__((noreturn));

/* ---- job.c ---- */
typedef struct job job;

/* The read end of the pipe on this process's fd 1, where the driver writes
 * device printf output; -1 when output is not captured. */
extern int agent_stdout_pipe;

/* How a job's end is told: `ending` once the controller's side is over,
 * then `ended` with the line to log ("job closed", "job failed: CAUSE").
 * Either may run on any of the job's threads: when the job thread is held
 * by the driver (a kernel that never ends) another thread ends the job. */
typedef struct job_hooks {
    void (*ending)(void *ctx);
    void (*ended)(void *ctx, const char *line);
    void *ctx;
} job_hooks;

/* Serves one job on a proven connection until it ends and its hooks have
 * run. Threads of the job may still run: the worker exits next. */
void job_serve(backend *b, int fd, uint32_t index, const rig_key *key, const job_hooks *hooks);

#endif

/* softgpu's inner boundary: the driver layer (cuda.h entry points, memory,
 * contexts, streams, modules and fatbins) hands PTX text to the engine
 * (parse, then execute launches) through this header and nothing else.
 * The engine knows nothing of contexts or streams; the driver layer knows
 * nothing of PTX. Additions are fine; changes to what is here break the
 * other side. */
#ifndef RIG_SOFTGPU_ENGINE_H
#define RIG_SOFTGPU_ENGINE_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One parsed PTX module; immutable after parse except for bound globals. */
typedef struct soft_program soft_program;

/* One kernel parameter as the .entry declares it. */
typedef struct soft_param {
    uint32_t offset;   /* in the packed parameter buffer */
    uint32_t size;     /* bytes; a struct at full size */
    uint32_t align;
} soft_param;

/* What the driver layer needs to know of one .entry. */
typedef struct soft_entry_info {
    const char *name;          /* mangled name, as cuModuleGetFunction asks */
    uint32_t param_count;
    const soft_param *params;
    uint32_t param_bytes;      /* size of the packed parameter buffer */
    uint32_t static_shared_bytes;
    uint32_t local_bytes;      /* per thread */
    uint32_t max_threads;      /* 1024 unless .maxntid says less */
    uint32_t num_regs;
    /* Added: NULL when the engine runs it; else why not, one line naming
     * the kernel, the PTX line and the instruction (its own or a callee's).
     * Such an entry's module still loads; launching it fails with
     * CUDA_ERROR_NOT_SUPPORTED. */
    const char *refusal;
    /* No backward branch and no call: each thread runs each instruction at
     * most once, so its run time is bounded by its size (launch.c may run
     * a small grid of it in the launching thread). */
    bool straight;
} soft_entry_info;

typedef enum soft_space { SOFT_SPACE_GLOBAL, SOFT_SPACE_CONST } soft_space;

/* A module-scope .global or .const variable. */
typedef struct soft_global_info {
    const char *name;
    uint64_t size;
    uint32_t align;
    soft_space space;
    const uint8_t *init;       /* size bytes of initialiser, or NULL for zeros */
    bool managed;              /* .attribute(.managed): a __managed__ variable */
} soft_global_info;

/* How the engine checks a global or generic access: the driver layer answers
 * with the live allocation (or bound global) holding addr. Called rarely: the
 * engine caches the last range per warp. */
typedef struct soft_memory {
    void *ctx;
    /* true and [*base, *base + *size) when addr lies in a live range */
    bool (*find)(void *ctx, uint64_t addr, uint64_t *base, uint64_t *size);
} soft_memory;

/* A CUDA array, or linear or pitched memory, as texture and surface
 * instructions see it (the driver layer's texture and surface objects).
 * Element x of row y of slice z is at data + z * slice + y * pitch +
 * x * elem; a slice is a 3-D depth, a layer, a cube face (face f of layer l
 * is slice 6 * l + f). */
typedef struct soft_image {
    uint8_t *data;
    uint64_t pitch, slice;
    uint32_t width, height, depth;   /* each at least 1; depth counts slices */
    uint32_t format;                 /* CUarray_format */
    uint32_t channels;               /* 1, 2 or 4 */
    uint32_t elem;                   /* bytes of one element */
    uint32_t levels;                 /* mipmap levels (1: not mipmapped) */
    bool layered, cubemap;
    bool linear;                     /* linear memory: fetches outside read zero */
    bool device_memory;              /* linear or pitched memory: checked live at each use */
    /* sampling (texture objects only) */
    uint32_t address[3];             /* CUaddress_mode of each coordinate */
    uint32_t filter;                 /* CUfilter_mode */
    bool normalized;                 /* coordinates in [0, 1) */
    bool read_as_integer;            /* CU_TRSF_READ_AS_INTEGER */
    float border[4];
} soft_image;

/* A tensor map (CUtensorMap's 128 opaque bytes) as softgpu's
 * cuTensorMapEncodeTiled writes it and cp.async.bulk.tensor reads it. */
#define SOFT_TMAP_MAGIC 0x4d545347u   /* "GSTM" */
typedef struct soft_tensor_map {
    uint32_t magic;
    uint8_t type, rank, interleave, swizzle, l2, oob;   /* CUtensorMap* enums */
    uint8_t elem;                    /* bytes of one element */
    uint8_t pad[5];
    uint64_t address;
    uint64_t dim[5];                 /* elements, innermost first */
    uint64_t stride[4];              /* bytes between indices of dims 1.. */
    uint16_t box[5];
    uint8_t estride[5];
} soft_tensor_map;

typedef struct soft_launch {
    uint32_t entry;                  /* index from soft_program_find_entry */
    uint32_t grid[3], block[3];
    uint32_t dynamic_shared_bytes;
    const void *params;              /* param_bytes bytes, laid out per params[] */
    const soft_memory *memory;
    /* device printf output, one formatted call at a time; NULL: stdout */
    void (*print)(void *ctx, const char *text, size_t len);
    void *print_ctx;
    unsigned threads;                /* host threads for blocks; 0 = engine's choice */
    /* every block runs at once, each on a host thread of its own, with a
     * zeroed grid workspace in %envreg1:%envreg2 (what cooperative groups'
     * grid.sync() uses); the driver layer bounds the grid */
    bool cooperative;
    /* the texture (surface false) or surface object named by a kernel's
     * 64-bit handle, or NULL when the handle names none; NULL: none exist */
    const soft_image *(*image)(uint64_t handle, bool surface);
    /* Added: the module's texture and surface references as bound when the
     * launch was made, refs[i] for soft_program_ref(i); data NULL: unbound
     * (a kernel using it faults). nrefs 0: none given. */
    const soft_image *refs;
    uint32_t nrefs;
    /* Added: device malloc and free on the context's heap, called from any
     * block thread at once; heap_alloc returns 0 when the heap is full.
     * NULL: malloc returns NULL, free does nothing. */
    uint64_t (*heap_alloc)(void *ctx, uint64_t size);
    void (*heap_free)(void *ctx, uint64_t addr);
    void *heap_ctx;
} soft_launch;

/* Parses PTX text (len bytes, NUL not required). On failure returns
 * CUDA_ERROR_INVALID_PTX, or CUDA_ERROR_NOT_SUPPORTED for what the engine
 * does not run outside function bodies, with one line in msg naming what
 * and where (line). An instruction it does not run (or a call to a function
 * without a body) refuses only the entries that reach it: see
 * soft_entry_info.refusal. */
CUresult soft_program_parse(const char *ptx, size_t len, soft_program **out,
                            char *msg, size_t msglen);

/* Frees a program; NULL is fine. */
void soft_program_free(soft_program *prog);

/* Refuses each of its kernels with why (a library of SASS only, loaded
 * with stub kernels so that each is refused when used). */
CUresult soft_program_refuse_all(soft_program *prog, const char *why);
uint32_t soft_program_entry_count(const soft_program *prog);
const soft_entry_info *soft_program_entry(const soft_program *prog, uint32_t i);
/* Index of the entry named name, or -1. */
int soft_program_find_entry(const soft_program *prog, const char *name);

uint32_t soft_program_global_count(const soft_program *prog);
/* The XX of the module's .target sm_XX (0 when it names none). */
uint32_t soft_program_target(const soft_program *prog);
const soft_global_info *soft_program_global(const soft_program *prog, uint32_t i);
/* The driver layer allocated the storage of global i at addr (host memory at
 * the device address) and copied its initialiser; kernels now use it. Every
 * global must be bound before the first launch. Initialiser words naming
 * another variable's address are written here once both are bound. */
void soft_program_bind_global(soft_program *prog, uint32_t i, uint64_t addr);

/* Added: the module's `.global .texref` and `.global .surfref` variables
 * (legacy texture and surface references), in module order: the name of
 * reference i, *surface true for a .surfref. NULL past the end. */
uint32_t soft_program_ref_count(const soft_program *prog);
const char *soft_program_ref(const soft_program *prog, uint32_t i, bool *surface);

/* Runs one launch to completion on the calling thread plus the engine's
 * block pool. Returns CUDA_SUCCESS, CUDA_ERROR_ILLEGAL_ADDRESS (msg names
 * the kernel and address), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
 * CUDA_ERROR_INVALID_VALUE (bad grid/block), or CUDA_ERROR_LAUNCH_FAILED. */
CUresult soft_program_launch(soft_program *prog, const soft_launch *launch,
                             char *msg, size_t msglen);

/* Added by the engine: checks that a packed parameter buffer of size bytes
 * fits entry i. Returns CUDA_SUCCESS, or CUDA_ERROR_INVALID_VALUE with one
 * line in msg naming the kernel and both sizes. */
CUresult soft_program_check_params(const soft_program *prog, uint32_t entry, size_t size,
                                   char *msg, size_t msglen);

/* Added by the engine: soft_program_launch also returns CUDA_ERROR_ASSERT
 * when a device assert() fails; CUDA's message for it ("file:line: function:
 * block: [x,y,z], thread: [x,y,z] Assertion `expr` failed.") goes through
 * soft_launch.print like printf output. */

/* Added by the engine: thread-instructions executed by every launch of this
 * process so far (each instruction counts once per thread that issued it);
 * for benchmarks. */
uint64_t soft_engine_thread_instructions(void);

/* Added: one input of soft_ptx_link; name (a file or cuLinkAddData's name)
 * is what messages call it. */
typedef struct soft_ptx_input {
    const char *text;
    size_t len;
    const char *name;
} soft_ptx_input;

/* Added: links PTX texts as nvlink links relocatable device code: an
 * `.extern` declaration resolves against a `.visible` (else `.weak`)
 * definition of any input; file-local names that clash are renamed per
 * input; one header with the highest .version. On success *out is malloc'd
 * PTX (NUL-terminated, *out_len bytes without it) that soft_program_parse
 * takes. Fails with CUDA_ERROR_INVALID_IMAGE for an undefined reference or
 * a symbol defined twice ("Undefined reference to 'x' in 'a.ptx'", as
 * nvlink words them), CUDA_ERROR_INVALID_PTX for text it cannot split, with
 * one line in msg. */
CUresult soft_ptx_link(const soft_ptx_input *inputs, unsigned n, char **out, size_t *out_len,
                       char *msg, size_t msglen);

#endif

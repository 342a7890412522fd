/* The layouts a job's frames carry between the controller (shim) and an
 * agent, beside the frame kinds of proto/frame.h (docs/wire.md has every
 * layout byte by byte, docs/glossary.md the words). CUDA operations keep their wire
 * numbers from proto/cuda_ops.def; rig's own operations are numbered from
 * JOB_OP_BASE up. Every integer little-endian through wire.h.
 *
 * request  (1)  u32 op, then the op's fields                 -> one answer
 * answer   (2)  u8 0, u32 CUresult, outputs | u8 1, string why
 * handover (3)  one or more records, back to back: u32 op, u32 body
 *               length, u64 stream, u64 value, body (value 0: the record
 *               has no place on a timeline and the stream field names the
 *               object it creates)
 * drop     (4)  u32 op, u64 object
 * word     (5)  one or more triples: u64 stream, u64 value reached, u64
 *               bytes of handover bodies on that stream up to that value
 * bytes    (6)  u64 stream, u64 value, the bytes of a copy into the program
 *               (stream 0 and value 0: device printf output for stdout)
 * rail     (7)  agent to agent only: u64 signal, its bytes (proto/rail.h)
 * beat     (8)  empty
 * abort    (9)  string why
 * close    (10) empty */
#ifndef RIG_PROTO_JOB_H
#define RIG_PROTO_JOB_H

#include <stdint.h>

/* The largest frame either end accepts; copies are cut into chunks below it. */
#define JOB_FRAME_LIMIT ((uint64_t)80 << 20)
/* 16 MiB: small enough that the receiving ends' allocators reuse the memory
 * of one chunk for the next (fresh pages cost more than the bytes). */
#define JOB_COPY_CHUNK ((uint64_t)16 << 20)
#define JOB_REASON_MAX 4096
#define JOB_NAME_MAX 4096          /* kernel and global names */
#define JOB_PARAMS_MAX 32768       /* a kernel's parameter buffer */

/* Liveness (docs/design.md "Failure"): each end sends a beat after JOB_BEAT_MS
 * in which it sent nothing; JOB_SILENCE_MS with no byte received, or a send
 * that makes no progress for JOB_STALL_MS, fails the job. */
#define JOB_BEAT_MS 1000
#define JOB_SILENCE_MS 10000
#define JOB_STALL_MS 10000

/* Each agent's device pointers live in a window of JOB_WINDOW_SIZE bytes:
 * the controller tries candidates JOB_WINDOW_FIRST + k * JOB_WINDOW_SIZE
 * (k = 0, 1, ... below JOB_WINDOW_LAST; one counter for all its agents, so
 * no two share one) until both ends could reserve it (shim/link.c). */
#define JOB_WINDOW_SIZE ((uint64_t)1 << 38)           /* 256 GiB */
#define JOB_WINDOW_FIRST ((uint64_t)0x200000000000)   /* 32 TiB */
#define JOB_WINDOW_LAST ((uint64_t)0x600000000000)

enum job_op {
    JOB_OP_BASE = 0x8000,
    /* request: u32 agent index (the dialing end's peer number, 1-based),
     *          u64 window base, u64 window size; nothing else (every
     *          device of the agent is opened; NULL streams are created
     *          later by JOB_OP_STREAM_CREATE with JOB_STREAM_NULL).
     * answer:  CUDA_SUCCESS, then u8 window taken; 0: nothing follows (the
     *          controller tries the next candidate); 1: u32 driver version,
     *          string driver kind ("softgpu", "GPU driver", "driver"), u32
     *          devices, per device: string name, 16 uuid, u64 total memory,
     *          u32 n, n x i32 attributes 1..n (shim/link.c open_request,
     *          agent/request.c open_job, shim/decode.c shim_decode_open) */
    JOB_OP_OPEN = 0x8001,
    /* handover: u32 device, u32 flags (CU_STREAM_* | JOB_STREAM_*),
     * i32 priority; the record's stream field holds the new id, value 0 */
    JOB_OP_STREAM_CREATE = 0x8002,
    /* handover: u32 device, u32 flags; the stream field holds the new id */
    JOB_OP_EVENT_CREATE = 0x8003,
    /* handover on stream: nothing to do but reach the value (a host
     * function runs in the program when its word arrives) */
    JOB_OP_MARK = 0x8004,
    /* request: u32 device, u32 inputs, per input: u32 CUjitInputType,
     *          string name, u64 length, the bytes.
     * answer:  outputs u64 length, the linked image (CUDA_SUCCESS) | string
     *          the driver's error log (a failed link) */
    JOB_OP_LINK = 0x8010,
    /* request: u64 id (the controller's, of the executable graph), u32
     *          device, u32 nodes, then per node in dependency order: u32
     *          CUgraphNodeType, u32 n, n x u32 (indices of earlier nodes it
     *          runs after), and by type: kernel: u64 function, 7 x u32
     *          (grid, block, shared bytes), u32 length, the parameter bytes;
     *          memset: u64 dst, u64 pitch, u32 value, u32 element size, u64
     *          width, u64 height; memcpy (device to device): u64 dst, u64
     *          dst pitch, u64 src, u64 src pitch, u64 width bytes, u64
     *          height; event record or wait: u64 event; batch memory ops:
     *          u32 count, count x 48 bytes (CUstreamBatchMemOpParams);
     *          empty: nothing.
     * answer:  nothing: the agent's driver built and instantiated the graph
     *          (the drop of cuGraphExecDestroy frees it), or its error. */
    JOB_OP_GRAPH = 0x8020,
    /* handover on stream: u64 id of an executable graph (JOB_OP_GRAPH) */
    JOB_OP_GRAPH_LAUNCH = 0x8021,
    /* The agents' mesh, layouts in proto/mesh.h: a listener for the job's
     * other agents, then the join (agent i dials agents i+1..n). */
    JOB_OP_PEER_LISTEN = 0x8030,
    JOB_OP_JOIN = 0x8031,
    /* Rails between two agents, layouts in proto/rail.h: handover records
     * that move a peer copy's bytes and signals on the mesh. */
    JOB_OP_RAIL_SEND = 0x8040,
    JOB_OP_RAIL_RECV = 0x8041,
    JOB_OP_SIGNAL = 0x8042,
    JOB_OP_WAIT = 0x8043,
};

/* Requests of CUDA operations whose layouts only the shim's and the
 * agent's own code write and read (u32 op first; devices are the agent's
 * ordinals; docs/wire.md lists every one; proto/records.def defines each
 * once, as it does the handover records' bodies and the frame heads):
 *   cuStreamGetAttribute    u64 stream, u32 attribute -> 64-byte CUstreamAttrValue
 *   cuStreamSetAttribute    u64 stream, u32 attribute, 64-byte CUstreamAttrValue
 *   cuStreamCopyAttributes  u64 destination stream, u64 source stream
 *   cuOccupancyMaxActiveClusters, cuOccupancyMaxPotentialClusterSize
 *                           u64 function, u32 device, 7 x u32 (grid, block,
 *                           shared bytes), 3 x u32 cluster (0s: none) -> i32
 *   cuDeviceGetP2PAtomicCapabilities
 *                           u32 src, u32 dst, u32 count, count x u32
 *                           CUatomicOperation -> count x u32 capabilities
 *   cuDeviceCanAccessPeer   u32 device, u32 peer -> i32
 *   cuDeviceGetP2PAttribute u32 attribute, u32 src, u32 dst -> i32
 *   cuCtxEnablePeerAccess   u32 device, u32 peer, u32 flags
 *   cuCtxDisablePeerAccess  u32 device, u32 peer
 *   cuStreamBatchMemOp_v2   u64 stream, u32 flags, u32 count (<= JOB_BATCH_MAX),
 *                           count x 48-byte CUstreamBatchMemOpParams
 *   cuModuleEnumerateFunctions, cuLibraryEnumerateKernels
 *                           u64 module or library -> u32 count, count x string
 * (shim/stream_attr.c, shim/module.c cluster_query, shim/peer.c,
 * shim/memop_batch.c, shim/module_enum.c write them through
 * proto/records.h; agent/stream_attr.c, agent/request.c,
 * agent/memop_batch.c, agent/enumerate.c read them through it.) */

#define JOB_GRAPH_NODES_MAX 65536
#define JOB_GRAPH_DEPS_MAX 65536
#define JOB_GRAPH_BATCH_MAX 256        /* operations in one batch node, the driver's limit */
#define JOB_BATCH_MAX JOB_GRAPH_BATCH_MAX   /* operations in one cuStreamBatchMemOp request */
#define JOB_ENUMERATE_MAX 65536        /* kernel names in one enumeration answer */

#define JOB_LINK_INPUTS_MAX 256

/* Stream creation flags beside CUDA's own. */
#define JOB_STREAM_NULL 0x80000000u       /* the device's legacy NULL stream */

#endif

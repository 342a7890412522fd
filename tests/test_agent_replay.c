/* The agent's replay of what a controller sends, fed every truncation and
 * many bit flips of each frame of a small valid job (an allocation, a PTX
 * module and its kernel, a stream, copies in and out, a launch, a free),
 * on softgpu inside this process. Whatever the bytes, the agent must answer
 * each request exactly once or fail the job with a cause it can name;
 * never crash (make check SAN=1 runs this under ASan and UBSan). The seed of
 * the random flips is RIG_TEST_SEED when set, and is printed on failure. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <time.h>

#include "proto/compress.h"
#include "proto/copy.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "agent/job.h"
#include "tests/replay_rig.h"
#include "tests/seed.h"

#define SOFTGPU RIG_BUILD_DIR "/libcudasoft.so"
#define HEAD_BYTES 64        /* every bit of the first bytes is flipped */
#define RANDOM_FLIPS 48      /* and this many random bits past them */

static replay_rig *rig_or_die(void)
{
    char why[600] = "";
    replay_rig *r = replay_rig_new(SOFTGPU, why, sizeof why);
    cr_assert_not_null(r, "no job on softgpu: %s", why);
    return r;
}

Test(agent_replay, valid_job_computes)
{
    for (int round = 0; round < 2; round++) {
        replay_rig *r = rig_or_die();
        replay_script s;
        char why[600] = "";
        bool ok = replay_script_run(r, &s, why, sizeof why);
        cr_expect(ok, "round %d: %s", round, why);
        cr_expect_str_empty(replay_rig_cause(r), "round %d", round);
        replay_script_free(&s);
        replay_rig_free(r);
    }
}

/* A fresh job with the script's frames before k replayed as they were. */
static replay_rig *rig_before(const replay_script *s, int k, unsigned seed)
{
    replay_rig *r = rig_or_die();
    uint64_t requests = 1;   /* the open */
    for (int i = 0; i < k; i++) {
        replay_rig_frame(r, s->kind[i], s->frame[i], s->len[i]);
        requests += s->kind[i] == FRAME_REQUEST;
    }
    cr_assert_eq(replay_rig_answers(r, requests, 5000), requests, "the frames before %d were not all answered (seed %u)", k, seed);
    cr_assert_str_empty(replay_rig_cause(r), "the valid frames before %d failed the job: %s (seed %u)", k,
                        replay_rig_cause(r), seed);
    return r;
}

typedef struct mutation {
    size_t len;              /* the frame cut to this length */
    long flip;               /* the bit flipped, -1: none */
} mutation;

static bool in_launch_dims(const replay_script *s, int k, size_t bit)
{
    /* A launch of 2^31 blocks is valid CUDA, just long: not what this walk
     * looks for. */
    return k == s->launch && bit / 8 >= s->launch_dims_at && bit / 8 < s->launch_dims_at + s->launch_dims_len;
}

static size_t mutations_of(const replay_script *s, int k, unsigned seed, mutation *m, size_t cap)
{
    size_t n = 0, len = s->len[k];
    for (size_t l = 0; l < len && n < cap; l += l < 96 ? 1 : 37)
        m[n++] = (mutation){ l, -1 };
    for (size_t bit = 0; bit < 8 * (len < HEAD_BYTES ? len : HEAD_BYTES) && n < cap; bit++)
        if (!in_launch_dims(s, k, bit))
            m[n++] = (mutation){ len, (long)bit };
    srand(seed + (unsigned)k);
    for (int i = 0; len > HEAD_BYTES && i < RANDOM_FLIPS && n < cap; i++) {
        size_t bit = 8 * HEAD_BYTES + (size_t)rand() % (8 * (len - HEAD_BYTES));
        if (!in_launch_dims(s, k, bit))
            m[n++] = (mutation){ len, (long)bit };
    }
    return n;
}

ParameterizedTestParameters(agent_replay, mutated_frame)
{
    static int frames[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    return cr_make_param_array(int, frames, sizeof frames / sizeof frames[0]);
}

ParameterizedTest(int *k, agent_replay, mutated_frame, .timeout = 240)
{
    unsigned seed = test_seed();
    replay_rig *r = rig_or_die();
    replay_script s;
    char why[600] = "";
    cr_assert(replay_script_run(r, &s, why, sizeof why), "%s", why);
    replay_rig_free(r);
    cr_assert_lt(*k, s.count);

    mutation m[2048];
    size_t nm = mutations_of(&s, *k, seed, m, 2048);
    cr_assert_gt(nm, 0);
    uint8_t *buf = malloc(s.len[*k]);
    replay_rig *cur = NULL;
    size_t failed = 0, refused = 0;
    for (size_t i = 0; i < nm; i++) {
        if (!cur)
            cur = rig_before(&s, *k, seed);
        memcpy(buf, s.frame[*k], s.len[*k]);
        if (m[i].flip >= 0)
            buf[m[i].flip / 8] ^= (uint8_t)(1u << (m[i].flip % 8));
        uint64_t before = replay_rig_answers(cur, 0, 0);
        replay_rig_frame(cur, s.kind[*k], buf, m[i].len);
        /* A job that failed sends its abort instead of what it was doing. */
        bool job_failed = replay_rig_cause(cur)[0] != '\0';
        if (s.kind[*k] == FRAME_REQUEST && !job_failed) {
            uint64_t after = replay_rig_answers(cur, before + 1, 30000);
            cr_assert_eq(after, before + 1,
                         "frame %d cut to %zu, bit %ld flipped: %llu answers to one request (seed %u)", *k,
                         m[i].len, m[i].flip, (unsigned long long)(after - before), seed);
            /* A refusal (status 1) or an error result: the agent noticed. */
            uint8_t a[5];
            if (replay_rig_last_answer(cur, a, sizeof a) == 5 && (a[0] != 0 || wire_load_u32(a + 1) != 0))
                refused++;
        }
        const char *cause = replay_rig_cause(cur);
        if (cause[0]) {
            failed++;
            replay_rig_free(cur);
            cur = NULL;
        }
    }
    if (cur)
        replay_rig_free(cur);
    /* Some of these bytes must be noticed (the job failed, or the request
     * refused or answered with an error): a walk the agent took without
     * noticing anything would test nothing. */
    cr_expect(failed + refused > 0, "frame %d: %zu mutations, none noticed (seed %u)", *k, nm, seed);
    cr_log_info("frame %d: %zu mutations, %zu failed the job, %zu refused or in error", *k, nm, failed, refused);
    free(buf);
    replay_script_free(&s);
}

/* One handover record on stream at value. */
static size_t graph_record(uint8_t *out, size_t cap, uint32_t op, uint64_t stream, uint64_t value,
                           const uint8_t *body, size_t n)
{
    wire_writer w = wire_writer_init(out, cap);
    wire_put_u32(&w, op);
    wire_put_u32(&w, (uint32_t)n);
    wire_put_u64(&w, stream);
    wire_put_u64(&w, value);
    wire_put_bytes(&w, body, n);
    return w.err ? 0 : w.off;
}

/* A graph request: the script's kernel (one added to each int), an empty
 * node after it, the kernel again after that; bad_dep: the last node names
 * a later one. */
static size_t graph_request(uint8_t *buf, size_t cap, uint64_t id, uint64_t ptr, bool bad_dep)
{
    wire_writer w = wire_writer_init(buf, cap);
    wire_put_u32(&w, JOB_OP_GRAPH);
    wire_put_u64(&w, id);
    wire_put_u32(&w, 0);
    wire_put_u32(&w, 3);
    for (uint32_t k = 0; k < 3; k++) {
        wire_put_u32(&w, k == 1 ? CU_GRAPH_NODE_TYPE_EMPTY : CU_GRAPH_NODE_TYPE_KERNEL);
        wire_put_u32(&w, k ? 1 : 0);
        if (k)
            wire_put_u32(&w, bad_dep && k == 2 ? 2 : k - 1);
        if (k == 1)
            continue;
        wire_put_u64(&w, 11);                /* the script's kernel */
        uint32_t dims[7] = { 2, 1, 1, 32, 1, 1, 0 };
        for (int i = 0; i < 7; i++)
            wire_put_u32(&w, dims[i]);
        wire_put_u32(&w, 12);
        wire_put_u64(&w, ptr);
        wire_put_u32(&w, REPLAY_N);
    }
    return w.err ? 0 : w.off;
}

Test(agent_replay, graphs_the_agent_builds_run_at_each_launch)
{
    replay_rig *r = rig_or_die();
    replay_script s;
    char why[600] = "";
    cr_assert(replay_script_run(r, &s, why, sizeof why), "%s", why);
    /* Memory of its own (the script freed its allocation), holding i. */
    uint8_t buf[1024], body[600], a[16], out[REPLAY_N * 4];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuMemAlloc_v2);
    wire_put_u32(&w, 0);
    wire_put_u64(&w, REPLAY_N * 4);
    uint64_t answers = replay_rig_answers(r, 0, 0);
    replay_rig_frame(r, FRAME_REQUEST, buf, w.off);
    cr_assert_eq(replay_rig_answers(r, answers + 1, 5000), answers + 1);
    cr_assert_eq(replay_rig_last_answer(r, a, sizeof a), 13);
    uint64_t ptr = wire_load_u64(a + 5);
    uint8_t ints[REPLAY_N * 4];
    for (uint32_t i = 0; i < REPLAY_N; i++)
        wire_store_u32(ints + 4 * i, i);
    size_t body_len = replay_htod_body(body, sizeof body, ptr, false, ints, sizeof ints);
    size_t n = graph_record(buf, sizeof buf, CUDA_OP_cuMemcpyHtoDAsync_v2, REPLAY_STREAM, 4, body, body_len);
    replay_rig_frame(r, FRAME_HANDOVER, buf, n);

    answers = replay_rig_answers(r, 0, 0);
    n = graph_request(buf, sizeof buf, 30, ptr, false);
    replay_rig_frame(r, FRAME_REQUEST, buf, n);
    cr_assert_eq(replay_rig_answers(r, answers + 1, 5000), answers + 1);
    cr_assert_eq(replay_rig_last_answer(r, a, sizeof a), 5);
    cr_assert(a[0] == 0 && wire_load_u32(a + 1) == 0, "the graph was not built: %u", wire_load_u32(a + 1));
    /* Launched twice: each launch adds two. */
    uint64_t value = 5;
    for (uint32_t launch = 0; launch < 2; launch++, value += 2) {
        w = wire_writer_init(body, sizeof body);
        wire_put_u64(&w, 30);
        n = graph_record(buf, sizeof buf, JOB_OP_GRAPH_LAUNCH, REPLAY_STREAM, value, body, w.off);
        w = wire_writer_init(body, sizeof body);
        wire_put_u64(&w, ptr);
        wire_put_u64(&w, REPLAY_N * 4);
        n += graph_record(buf + n, sizeof buf - n, CUDA_OP_cuMemcpyDtoHAsync_v2, REPLAY_STREAM, value + 1, body,
                          w.off);
        replay_rig_frame(r, FRAME_HANDOVER, buf, n);
        cr_assert_eq(replay_rig_bytes(r, REPLAY_STREAM, value + 1, out, sizeof out, 10000), (long)sizeof out,
                     "launch %u: no bytes; cause: %s", launch, replay_rig_cause(r));
        for (uint32_t i = 0; i < REPLAY_N; i++)
            cr_assert_eq(wire_load_u32(out + 4 * i), i + 2 + 2 * launch, "launch %u: element %u", launch, i);
    }
    /* A node that names a later one is refused; the job goes on. */
    answers = replay_rig_answers(r, 0, 0);
    n = graph_request(buf, sizeof buf, 31, ptr, true);
    replay_rig_frame(r, FRAME_REQUEST, buf, n);
    cr_assert_eq(replay_rig_answers(r, answers + 1, 5000), answers + 1);
    cr_assert(replay_rig_last_answer(r, a, sizeof a) >= 1 && a[0] == 1, "a graph with a forward edge was built");
    cr_assert_str_empty(replay_rig_cause(r));
    /* Destroyed, then launched: the controller's error fails the job. */
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuGraphExecDestroy);
    wire_put_u64(&w, 30);
    replay_rig_frame(r, FRAME_DROP, buf, w.off);
    cr_assert_str_empty(replay_rig_cause(r));
    w = wire_writer_init(body, sizeof body);
    wire_put_u64(&w, 30);
    n = graph_record(buf, sizeof buf, JOB_OP_GRAPH_LAUNCH, REPLAY_STREAM, value, body, w.off);
    replay_rig_frame(r, FRAME_HANDOVER, buf, n);
    cr_assert(strstr(replay_rig_cause(r), "graph launch"), "cause: %s", replay_rig_cause(r));
    replay_script_free(&s);
    replay_rig_free(r);
}

/* A batch memory-op node of a graph request: u32 count, count operations. */
static void put_batch(wire_writer *w, const CUstreamBatchMemOpParams *ops, uint32_t count)
{
    wire_put_u32(w, count);
    wire_put_bytes(w, ops, (size_t)count * sizeof *ops);
}

Test(agent_replay, graphs_with_batch_memory_op_nodes)
{
    replay_rig *r = rig_or_die();
    replay_script s;
    char why[600] = "";
    cr_assert(replay_script_run(r, &s, why, sizeof why), "%s", why);
    uint8_t buf[4096], body[600], a[16], out[16];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuMemAlloc_v2);
    wire_put_u32(&w, 0);
    wire_put_u64(&w, 16);
    uint64_t answers = replay_rig_answers(r, 0, 0);
    replay_rig_frame(r, FRAME_REQUEST, buf, w.off);
    cr_assert_eq(replay_rig_answers(r, answers + 1, 5000), answers + 1);
    cr_assert_eq(replay_rig_last_answer(r, a, sizeof a), 13);
    uint64_t ptr = wire_load_u64(a + 5);
    static const uint8_t zeros[16];
    size_t body_len = replay_htod_body(body, sizeof body, ptr, false, zeros, sizeof zeros);
    size_t n = graph_record(buf, sizeof buf, CUDA_OP_cuMemcpyHtoDAsync_v2, REPLAY_STREAM, 4, body, body_len);
    replay_rig_frame(r, FRAME_HANDOVER, buf, n);

    /* Node 0 writes two words; node 1 waits for the first, then writes a third. */
    CUstreamBatchMemOpParams first[2], second[2];
    memset(first, 0, sizeof first);
    memset(second, 0, sizeof second);
    first[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    first[0].writeValue.address = ptr;
    first[0].writeValue.value = 0xabc;
    first[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    first[1].writeValue.address = ptr + 8;
    first[1].writeValue.value64 = 0x1122334455667788ull;
    second[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    second[0].waitValue.address = ptr;
    second[0].waitValue.value = 0xabc;
    second[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    second[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    second[1].writeValue.address = ptr + 4;
    second[1].writeValue.value = 7;
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, JOB_OP_GRAPH);
    wire_put_u64(&w, 40);
    wire_put_u32(&w, 0);
    wire_put_u32(&w, 2);
    wire_put_u32(&w, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
    wire_put_u32(&w, 0);
    put_batch(&w, first, 2);
    wire_put_u32(&w, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
    wire_put_u32(&w, 1);
    wire_put_u32(&w, 0);
    put_batch(&w, second, 2);
    cr_assert_eq(w.err, 0);
    answers = replay_rig_answers(r, 0, 0);
    replay_rig_frame(r, FRAME_REQUEST, buf, w.off);
    cr_assert_eq(replay_rig_answers(r, answers + 1, 5000), answers + 1);
    cr_assert_eq(replay_rig_last_answer(r, a, sizeof a), 5);
    cr_assert(a[0] == 0 && wire_load_u32(a + 1) == 0, "the graph was not built: %u", wire_load_u32(a + 1));
    w = wire_writer_init(body, sizeof body);
    wire_put_u64(&w, 40);
    n = graph_record(buf, sizeof buf, JOB_OP_GRAPH_LAUNCH, REPLAY_STREAM, 5, body, w.off);
    w = wire_writer_init(body, sizeof body);
    wire_put_u64(&w, ptr);
    wire_put_u64(&w, sizeof out);
    n += graph_record(buf + n, sizeof buf - n, CUDA_OP_cuMemcpyDtoHAsync_v2, REPLAY_STREAM, 6, body, w.off);
    replay_rig_frame(r, FRAME_HANDOVER, buf, n);
    cr_assert_eq(replay_rig_bytes(r, REPLAY_STREAM, 6, out, sizeof out, 10000), (long)sizeof out, "no bytes; cause: %s",
                 replay_rig_cause(r));
    cr_expect_eq(wire_load_u32(out), 0xabc);
    cr_expect_eq(wire_load_u32(out + 4), 7);
    cr_expect_eq(wire_load_u64(out + 8), 0x1122334455667788ull);

    /* A batch above the driver's limit is answered with an error; the job goes on. */
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, JOB_OP_GRAPH);
    wire_put_u64(&w, 41);
    wire_put_u32(&w, 0);
    wire_put_u32(&w, 1);
    wire_put_u32(&w, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
    wire_put_u32(&w, 0);
    wire_put_u32(&w, JOB_GRAPH_BATCH_MAX + 1);
    answers = replay_rig_answers(r, 0, 0);
    replay_rig_frame(r, FRAME_REQUEST, buf, w.off);
    cr_assert_eq(replay_rig_answers(r, answers + 1, 5000), answers + 1);
    cr_assert(replay_rig_last_answer(r, a, sizeof a) >= 5 && wire_load_u32(a + 1) != 0, "an oversized batch was built");
    cr_assert_str_empty(replay_rig_cause(r));
    replay_script_free(&s);
    replay_rig_free(r);
}

/* Bytes of a typical compressible tensor (7 in 8 floats zero), or random. */
static void fill(uint8_t *p, size_t n, bool sparse, uint64_t seed)
{
    if (sparse) {
        compress_sparse_floats(p, n, seed);
        return;
    }
    uint64_t x = seed | 1;
    memset(p, 0, n);
    for (size_t i = 0; i + 4 <= n; i += 4) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 4);
    }
}

/* Copies of N bytes to ptr at value v and back at v + 1; the record in
 * carries chunk (COMPRESS_HEADER_SIZE + stored bytes). */
static size_t copy_there_and_back(uint8_t *buf, size_t cap, uint64_t ptr, const uint8_t *chunk, size_t chunk_len,
                                  size_t n, uint64_t v)
{
    uint8_t *body = malloc(COPY_HTOD_HEAD + chunk_len);
    cr_assert_not_null(body);
    compress_header h;
    cr_assert_eq(compress_header_read(chunk, &h, NULL), 0);
    copy_htod_write(body, ptr, false, &h);
    memcpy(body + COPY_HTOD_HEAD, chunk + COMPRESS_HEADER_SIZE, chunk_len - COMPRESS_HEADER_SIZE);
    size_t at = graph_record(buf, cap, CUDA_OP_cuMemcpyHtoDAsync_v2, REPLAY_STREAM, v, body,
                             COPY_HTOD_HEAD + chunk_len - COMPRESS_HEADER_SIZE);
    uint8_t back[COPY_DTOH_BODY];
    copy_dtoh_write(back, ptr, n);
    at += graph_record(buf + at, cap - at, CUDA_OP_cuMemcpyDtoHAsync_v2, REPLAY_STREAM, v + 1, back, sizeof back);
    free(body);
    return at;
}

/* Runs the valid script on r (its stream REPLAY_STREAM), then allocates n
 * bytes of device memory: their address. */
static uint64_t script_and_alloc(replay_rig *r, replay_script *s, uint64_t n)
{
    char why[600] = "";
    cr_assert(replay_script_run(r, s, why, sizeof why), "%s", why);
    uint8_t req[32], a[16];
    wire_writer w = wire_writer_init(req, sizeof req);
    wire_put_u32(&w, CUDA_OP_cuMemAlloc_v2);
    wire_put_u32(&w, 0);
    wire_put_u64(&w, n);
    uint64_t answers = replay_rig_answers(r, 0, 0);
    replay_rig_frame(r, FRAME_REQUEST, req, w.off);
    cr_assert_eq(replay_rig_answers(r, answers + 1, 5000), answers + 1);
    cr_assert_eq(replay_rig_last_answer(r, a, sizeof a), 13);
    return wire_load_u64(a + 5);
}

/* Copies whose bytes compress go as LZ4 chunks both ways (RIG_LINK_RATE
 * makes the link slow enough that the agent's sample says it pays) and
 * arrive exactly; random bytes go raw; an LZ4 body that is not LZ4 fails
 * the job naming the copy. */
Test(agent_replay, compressed_copies, .timeout = 60)
{
    enum { N = 256 << 10 };
    setenv("RIG_LINK_RATE", "1e6", 1);
    replay_rig *r = rig_or_die();
    replay_script s;
    uint64_t ptr = script_and_alloc(r, &s, N);

    size_t cap = compress_bound(N) + 256;
    uint8_t *data = malloc(N), *chunk = malloc(compress_bound(N)), *buf = malloc(cap), *out = malloc(N);
    cr_assert(data && chunk && buf && out);
    size_t chunk_len = 0;
    uint64_t v = 4;
    /* Sparse floats as zero words, then as LZ4; random bytes raw. */
    static const uint8_t methods[] = { COMPRESS_ZEROS, COMPRESS_LZ4, COMPRESS_RAW };
    for (int m = 0; m < 3; m++, v += 2) {
        int sparse = methods[m] != COMPRESS_RAW;
        fill(data, N, sparse, 0x5eed + (uint64_t)m);
        cr_assert_eq(compress_chunk(data, N, methods[m], chunk, compress_bound(N), &chunk_len, NULL), 0);
        cr_assert_eq(chunk[0], methods[m]);
        uint64_t compressed_before = replay_rig_compressed_bytes(r);
        size_t n = copy_there_and_back(buf, cap, ptr, chunk, chunk_len, N, v);
        replay_rig_frame(r, FRAME_HANDOVER, buf, n);
        cr_assert_eq(replay_rig_bytes(r, REPLAY_STREAM, v + 1, out, N, 10000), (long)N, "%s data: no bytes; cause: %s",
                     sparse ? "sparse" : "random", replay_rig_cause(r));
        cr_assert_eq(memcmp(out, data, N), 0, "%s data came back changed", sparse ? "sparse" : "random");
        cr_assert_eq(replay_rig_compressed_bytes(r) - compressed_before, sparse ? 1u : 0u,
                     "%s data: the copy back went %s", sparse ? "sparse" : "random", sparse ? "raw" : "compressed");
    }
    /* A chunk that says lz4 over bytes that are not. */
    compress_header h = { .method = COMPRESS_LZ4, .original = N, .stored = 4096 };
    compress_header_write(chunk, &h);
    memset(chunk + COMPRESS_HEADER_SIZE, 0xff, 4096);
    size_t n = copy_there_and_back(buf, cap, ptr, chunk, COMPRESS_HEADER_SIZE + 4096, N, v);
    replay_rig_frame(r, FRAME_HANDOVER, buf, n);
    const char *cause = replay_rig_cause(r);
    cr_assert(strstr(cause, "cuMemcpyHtoDAsync_v2") && strstr(cause, "lz4 body"), "cause: %s", cause);
    replay_rig_free(r);
    replay_script_free(&s);
    free(data);
    free(chunk);
    free(buf);
    free(out);
    unsetenv("RIG_LINK_RATE");
}

/* Copies move in place (agent/in_place.c) only within one allocation of
 * device memory: a controller that names any other address, or a range
 * past an allocation's end, gets the driver's checked copy (which fails
 * the job naming it), never a write into the agent's own memory. Then a
 * copy in and back on an idle stream comes back exactly. */
Test(agent_replay, copies_in_place_stay_inside_device_memory, .timeout = 60)
{
    enum { N = 1 << 20 };
    replay_rig *r = rig_or_die();
    replay_script s;
    uint64_t ptr = script_and_alloc(r, &s, N);

    job *j = replay_rig_job(r);
    const cuda_driver *d = &j->b->drv;
    cr_assert_eq(job_use_device(j, 0), CUDA_SUCCESS);
    CUdeviceptr base = 0;
    size_t size = 0;
    cr_assert_eq(d->fn_cuMemGetAddressRange_v2(&base, &size, ptr), CUDA_SUCCESS);
    cr_assert(base <= ptr && ptr + N <= base + size);
    cr_assert_eq(job_device_bytes(j, 0, ptr, N), (void *)(uintptr_t)ptr);
    cr_assert_eq(job_device_bytes(j, 0, base, size), (void *)(uintptr_t)base, "the whole allocation");
    cr_assert_null(job_device_bytes(j, 0, base + size - 4096, 8192), "past the allocation's end");
    cr_assert_null(job_device_bytes(j, 0, base - 4096, 8192), "from below the allocation");
    cr_assert_null(job_device_bytes(j, 0, ptr, 0), "nothing");
    cr_assert_null(job_device_bytes(j, 0, ptr, UINT64_MAX - 10), "a length that wraps");
    uint8_t here[64];
    cr_assert_null(job_device_bytes(j, 0, (CUdeviceptr)(uintptr_t)here, sizeof here), "the agent's stack");
    void *pinned = NULL;
    cr_assert_eq(d->fn_cuMemHostAlloc(&pinned, 8192, 0), CUDA_SUCCESS);
    cr_assert_null(job_device_bytes(j, 0, (CUdeviceptr)(uintptr_t)pinned, 8192), "page-locked host memory");
    d->fn_cuMemFreeHost(pinned);

    /* The replay's copies on an idle stream, through the same check. */
    uint8_t *data = malloc(N), *chunk = malloc(compress_bound(N)), *buf = malloc(N + 256), *out = malloc(N);
    cr_assert(data && chunk && buf && out);
    fill(data, N, false, 0x1ace);
    size_t chunk_len = 0;
    cr_assert_eq(compress_chunk(data, N, COMPRESS_RAW, chunk, compress_bound(N), &chunk_len, NULL), 0);
    size_t n = copy_there_and_back(buf, N + 256, ptr, chunk, chunk_len, N, 4);
    replay_rig_frame(r, FRAME_HANDOVER, buf, n);
    cr_assert_eq(replay_rig_bytes(r, REPLAY_STREAM, 5, out, N, 10000), (long)N, "no bytes; cause: %s",
                 replay_rig_cause(r));
    cr_assert_eq(memcmp(out, data, N), 0, "the bytes came back changed");
    /* A copy out that runs past the allocation fails the job, naming it. */
    uint8_t back[COPY_DTOH_BODY];
    copy_dtoh_write(back, base + size - 4096, 8192);
    n = graph_record(buf, N + 256, CUDA_OP_cuMemcpyDtoHAsync_v2, REPLAY_STREAM, 6, back, sizeof back);
    replay_rig_frame(r, FRAME_HANDOVER, buf, n);
    const char *cause = replay_rig_cause(r);
    cr_assert(strstr(cause, "cuMemcpyDtoHAsync_v2"), "cause: %s", cause);
    replay_rig_free(r);
    replay_script_free(&s);
    free(data);
    free(chunk);
    free(buf);
    free(out);
}

/* A record whose body breaks its layout (proto/records.def) fails the job
 * with a cause naming the layout and the field. */
typedef struct bad_record {
    uint32_t op;
    uint8_t body[64];
    size_t len;
    const char *cause;
} bad_record;

static bad_record bad_memset(void)
{
    bad_record b = { .op = CUDA_OP_cuMemsetD2D32Async,
                     .cause = "controller: malformed memset: element_size is 3, not 1, 2 or 4" };
    wire_writer w = wire_writer_init(b.body, sizeof b.body);
    rec_memset_put(&w, &(rec_memset){ .dst = 0x1000, .pitch = 8, .element_size = 3, .width = 1, .height = 1 });
    b.len = w.off;
    return b;
}

static bad_record bad_launch(void)
{
    bad_record b = { .op = CUDA_OP_cuLaunchKernel, .len = 8 + 4 + 6,
                     .cause = "controller: malformed launch: the body (18 bytes) ends inside grid" };
    wire_writer w = wire_writer_init(b.body, sizeof b.body);
    rec_launch_put(&w, &(rec_launch){ .function = 11, .grid = { 1, 1, 1 }, .block = { 1, 1, 1 } });
    return b;
}

static bad_record bad_mark(void)
{
    return (bad_record){ .op = JOB_OP_MARK, .len = 3, .cause = "controller: malformed mark: 3 bytes after its (empty) body" };
}

static bad_record bad_copy_2d(void)
{
    bad_record b = { .op = CUDA_OP_cuMemcpy2DAsync_v2, .cause = "controller: malformed 2-D copy: direction is 7" };
    wire_writer w = wire_writer_init(b.body, sizeof b.body);
    rec_copy_2d_put(&w, &(rec_copy_2d){ .direction = 7, .width = 1, .height = 1 });
    b.len = w.off;
    return b;
}

Test(agent_replay, broken_layouts_name_their_field)
{
    bad_record cases[] = { bad_memset(), bad_launch(), bad_mark(), bad_copy_2d() };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        replay_rig *r = rig_or_die();
        replay_script s;
        char why[600] = "";
        cr_assert(replay_script_run(r, &s, why, sizeof why), "%s", why);
        uint8_t buf[128];
        size_t n = graph_record(buf, sizeof buf, cases[i].op, REPLAY_STREAM, 10, cases[i].body, cases[i].len);
        replay_rig_frame(r, FRAME_HANDOVER, buf, n);
        cr_expect(strstr(replay_rig_cause(r), cases[i].cause), "case %zu: cause %s, not %s", i, replay_rig_cause(r),
                  cases[i].cause);
        replay_script_free(&s);
        replay_rig_free(r);
    }
}

/* A copy in whose pieces before the last are quiet (COPY_QUIET) gets one
 * word, its last piece's, and every piece's bytes land. */
Test(agent_replay, quiet_pieces_get_no_word_of_their_own, .timeout = 60)
{
    enum { PIECE = 4096, PIECES = 3 };
    replay_rig *r = rig_or_die();
    replay_script s;
    uint64_t ptr = script_and_alloc(r, &s, PIECE * PIECES);
    uint8_t data[PIECE * PIECES], out[PIECE * PIECES], body[COPY_HTOD_HEAD + PIECE], buf[64 + sizeof body];
    fill(data, sizeof data, 0, 0x9e7);
    uint64_t v = 4;
    for (int k = 0; k < PIECES; k++, v++) {
        size_t body_len = replay_htod_body(body, sizeof body, ptr + (uint64_t)k * PIECE, k < PIECES - 1,
                                           data + k * PIECE, PIECE);
        size_t n = graph_record(buf, sizeof buf, CUDA_OP_cuMemcpyHtoDAsync_v2, REPLAY_STREAM, v, body, body_len);
        cr_assert(n);
        replay_rig_frame(r, FRAME_HANDOVER, buf, n);
    }
    uint64_t last = v - 1;
    cr_assert(replay_rig_reached(r, REPLAY_STREAM, last, 10000), "no word reached %llu; cause: %s",
              (unsigned long long)last, replay_rig_cause(r));
    uint64_t values[64];
    size_t words = replay_rig_words(r, REPLAY_STREAM, values, 64);
    for (size_t k = 0; k < words && k < 64; k++)
        cr_assert(values[k] < 4 || values[k] == last, "a word of value %llu, a quiet piece's",
                  (unsigned long long)values[k]);
    uint8_t back[COPY_DTOH_BODY];
    copy_dtoh_write(back, ptr, sizeof out);
    size_t n = graph_record(buf, sizeof buf, CUDA_OP_cuMemcpyDtoHAsync_v2, REPLAY_STREAM, v, back, sizeof back);
    replay_rig_frame(r, FRAME_HANDOVER, buf, n);
    cr_assert_eq(replay_rig_bytes(r, REPLAY_STREAM, v, out, sizeof out, 10000), (long)sizeof out, "cause: %s",
                 replay_rig_cause(r));
    cr_assert_eq(memcmp(out, data, sizeof out), 0, "a quiet piece's bytes did not land");
    replay_rig_free(r);
    replay_script_free(&s);
}

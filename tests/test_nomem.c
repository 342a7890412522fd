/* Allocation failures (issue 18): every allocation rig's code makes on one
 * path is made to fail in turn (tests/failing_alloc.h), and what follows
 * must be a clean error that names memory: the agent answers
 * CUDA_ERROR_OUT_OF_MEMORY, refuses the request or fails the job saying
 * so; proto's and the shim's decoders return RIG_E_NOMEM and keep nothing.
 * Never a crash, a silent success or a leak (make check SAN=1 runs this
 * under ASan, UBSan and LeakSanitizer). */
#include <criterion/criterion.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/conn.h"
#include "proto/cuda_ops.h"
#include "proto/frame.h"
#include "proto/job.h"
#include "proto/names.h"
#include "proto/wire.h"
#include "shim/decode.h"
#include "tests/failing_alloc.h"
#include "tests/replay_rig.h"

#define SOFTGPU RIG_BUILD_DIR "/libcudasoft.so"

static replay_rig *rig_or_die(void)
{
    char why[600] = "";
    replay_rig *r = replay_rig_new(SOFTGPU, why, sizeof why);
    cr_assert_not_null(r, "no job on softgpu: %s", why);
    return r;
}

/* A fresh job with the script's frames before k replayed as they were. */
static replay_rig *rig_before(const replay_script *s, int k)
{
    replay_rig *r = rig_or_die();
    uint64_t requests = 1;   /* the open */
    for (int i = 0; i < k; i++) {
        replay_rig_frame(r, s->kind[i], s->frame[i], s->len[i]);
        requests += s->kind[i] == FRAME_REQUEST;
    }
    cr_assert_eq(replay_rig_answers(r, requests, 5000), requests, "the frames before %d were not all answered", k);
    cr_assert_str_empty(replay_rig_cause(r), "the frames before %d failed the job", k);
    return r;
}

/* Replays frame k of s with allocation nth of this thread failing (0: none);
 * returns how many allocations the replay made, and says in *clean whether
 * what followed named memory and in *leaked how many of its blocks were
 * still held once the job was freed. */
static unsigned long replay_failing(const replay_script *s, int k, unsigned long nth, bool *clean,
                                    unsigned long *leaked, char *what, size_t whatlen)
{
    replay_rig *r = rig_before(s, k);
    uint64_t before = replay_rig_answers(r, 0, 0);
    failing_alloc_arm(nth);
    replay_rig_frame(r, s->kind[k], s->frame[k], s->len[k]);
    unsigned long made = failing_alloc_disarm();
    *clean = false;
    const char *cause = replay_rig_cause(r);
    if (cause[0]) {
        *clean = strcasestr(cause, "memory") != NULL;
        snprintf(what, whatlen, "the job failed: %s", cause);
    } else if (s->kind[k] == FRAME_REQUEST) {
        uint64_t after = replay_rig_answers(r, before + 1, 10000);
        uint8_t a[600];
        size_t n = replay_rig_last_answer(r, a, sizeof a);
        if (after != before + 1) {
            snprintf(what, whatlen, "%llu answers to one request", (unsigned long long)(after - before));
        } else if (n >= 5 && a[0] == 0) {
            *clean = wire_load_u32(a + 1) == CUDA_ERROR_OUT_OF_MEMORY;
            snprintf(what, whatlen, "answered with result %u", wire_load_u32(a + 1));
        } else if (n >= 1 && a[0] == 1) {
            *clean = memmem(a, n, "memory", 6) != NULL;
            snprintf(what, whatlen, "refused: %.*s", (int)(n > 5 ? n - 5 : 0), (const char *)a + 5);
        } else {
            snprintf(what, whatlen, "an answer of %zu bytes", n);
        }
    } else {
        snprintf(what, whatlen, "nothing noticed");
    }
    replay_rig_free(r);
    *leaked = failing_alloc_live();
    return made;
}

/* Appends a request frame to the script (its frames are the script's to free). */
static void append(replay_script *s, const uint8_t *p, size_t n)
{
    cr_assert_lt(s->count, 16);
    s->frame[s->count] = malloc(n);
    cr_assert_not_null(s->frame[s->count]);
    memcpy(s->frame[s->count], p, n);
    s->kind[s->count] = FRAME_REQUEST;
    s->len[s->count] = n;
    s->count++;
}

static const char link_ptx[] =
    ".version 7.5\n.target sm_75\n.address_size 64\n"
    ".visible .entry nop()\n{\n  ret;\n}\n";

/* Requests past the script that allocate on their own paths: a graph of
 * the script's kernel, the module's kernels by name, a link of PTX. */
static void append_more(replay_script *s)
{
    uint64_t ptr = wire_load_u64(s->frame[4] + 24);   /* the copy in's destination */
    uint8_t buf[1024];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, JOB_OP_GRAPH);
    wire_put_u64(&w, 30);
    wire_put_u32(&w, 0);
    wire_put_u32(&w, 2);
    for (uint32_t k = 0; k < 2; k++) {
        wire_put_u32(&w, k ? CU_GRAPH_NODE_TYPE_EMPTY : CU_GRAPH_NODE_TYPE_KERNEL);
        wire_put_u32(&w, k);
        if (k) {
            wire_put_u32(&w, 0);
            continue;
        }
        wire_put_u64(&w, 11);                /* the script's kernel */
        uint32_t dims[7] = { 2, 1, 1, 32, 1, 1, 0 };
        for (int i = 0; i < 7; i++)
            wire_put_u32(&w, dims[i]);
        wire_put_u32(&w, 12);
        wire_put_u64(&w, ptr);
        wire_put_u32(&w, REPLAY_N);
    }
    cr_assert(!w.err);
    append(s, buf, w.off);
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuModuleEnumerateFunctions);
    wire_put_u64(&w, 10);
    append(s, buf, w.off);
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, JOB_OP_LINK);
    wire_put_u32(&w, 0);
    wire_put_u32(&w, 1);
    wire_put_u32(&w, CU_JIT_INPUT_PTX);
    wire_put_string(&w, "nop.ptx", 7);
    wire_put_u64(&w, sizeof link_ptx);
    wire_put_bytes(&w, link_ptx, sizeof link_ptx);
    cr_assert(!w.err);
    append(s, buf, w.off);
}

Test(nomem, every_allocation_of_the_agents_replay, .timeout = 600)
{
    replay_rig *r = rig_or_die();
    replay_script s;
    char why[600] = "";
    cr_assert(replay_script_run(r, &s, why, sizeof why), "%s", why);
    replay_rig_free(r);
    append_more(&s);
    /* Each added request works when nothing fails. */
    r = rig_before(&s, s.count);
    replay_rig_free(r);
    unsigned long total = 0;
    for (int k = 0; k < s.count; k++) {
        bool clean;
        unsigned long leaked;
        char what[700];
        unsigned long made = replay_failing(&s, k, 0, &clean, &leaked, what, sizeof what);
        cr_expect_eq(leaked, 0, "frame %d: %lu blocks held after the job was freed", k, leaked);
        for (unsigned long nth = 1; nth <= made; nth++) {
            replay_failing(&s, k, nth, &clean, &leaked, what, sizeof what);
            cr_assert(failing_alloc_hit(), "frame %d: allocation %lu of %lu was not reached again", k, nth, made);
            cr_expect(clean, "frame %d, allocation %lu of %lu failing: %s", k, nth, made, what);
            cr_expect_eq(leaked, 0, "frame %d, allocation %lu of %lu failing: %lu blocks leaked", k, nth, made,
                         leaked);
        }
        total += made;
    }
    /* The module load copies its image, the function keeps its name: a walk
     * that failed nothing would test nothing. */
    cr_expect_geq(total, 3, "only %lu allocations in the whole job", total);
    cr_log_info("%lu allocations of the agent's replay made to fail in turn", total);
    replay_script_free(&s);
}

Test(nomem, frame_decoder_names_the_payload_it_cannot_hold)
{
    uint8_t bytes[FRAME_HEADER_SIZE + 100];
    frame_header_encode(bytes, FRAME_REQUEST, 100);
    memset(bytes + FRAME_HEADER_SIZE, 7, 100);
    frame_decoder d;
    frame_decoder_init(&d, JOB_FRAME_LIMIT);
    frame f = { 0 };
    size_t used = 0;
    rig_why why = { "" };
    failing_alloc_arm(1);
    int rc = frame_decoder_feed(&d, bytes, sizeof bytes, &used, &f, &why);
    failing_alloc_disarm();
    cr_assert(failing_alloc_hit());
    cr_assert_eq(rc, RIG_E_NOMEM);
    cr_assert(strstr(why.text, "no memory") && strstr(why.text, "100 bytes"), "%s", why.text);
    cr_assert_null(f.payload);
    cr_assert_eq(failing_alloc_live(), 0);
    /* Sticky: the stream is broken, not half read. */
    cr_assert_lt(frame_decoder_feed(&d, bytes, sizeof bytes, &used, &f, &why), 0);
    frame_decoder_reset(&d);
}

Test(nomem, conn_init_gives_back_nothing)
{
    conn c;
    rig_why why = { "" };
    failing_alloc_arm(1);
    int rc = conn_init(&c, 5, JOB_FRAME_LIMIT, &why);
    failing_alloc_disarm();
    cr_assert(failing_alloc_hit());
    cr_assert_eq(rc, RIG_E_NOMEM);
    cr_assert_eq(c.fd, -1, "a failed conn_init holds the caller's fd");
    cr_assert(strstr(why.text, "no memory"), "%s", why.text);
}

Test(nomem, agents_list)
{
    names_agents list;
    rig_why why = { "" };
    failing_alloc_arm(1);
    int rc = names_parse_agents("a=127.0.0.1:1,b=127.0.0.1:2", &list, &why);
    failing_alloc_disarm();
    cr_assert(failing_alloc_hit());
    cr_assert_eq(rc, RIG_E_NOMEM);
    cr_assert_null(list.agents);
    cr_assert_eq(failing_alloc_live(), 0);
    cr_assert(strstr(why.text, "no memory"), "%s", why.text);
}

Test(nomem, function_layout_each_allocation)
{
    uint8_t buf[64];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, 2);                     /* parameters: u64 at 0, u32 at 8 */
    wire_put_u32(&w, 0);
    wire_put_u32(&w, 8);
    wire_put_u32(&w, 8);
    wire_put_u32(&w, 4);
    wire_put_u32(&w, 1);                     /* one attribute */
    wire_put_u32(&w, 256);
    shim_param_info pi;
    rig_why why = { "" };
    failing_alloc_arm(0);
    cr_assert_eq(shim_decode_param_info(buf, w.off, &pi, &why), 0, "%s", why.text);
    unsigned long made = failing_alloc_disarm();
    shim_param_info_free(&pi);
    cr_assert_eq(made, 2);
    for (unsigned long nth = 1; nth <= made; nth++) {
        failing_alloc_arm(nth);
        int rc = shim_decode_param_info(buf, w.off, &pi, &why);
        failing_alloc_disarm();
        cr_assert_eq(rc, RIG_E_NOMEM, "allocation %lu", nth);
        cr_assert(strstr(why.text, "no memory"), "%s", why.text);
        cr_assert(!pi.params && !pi.attrs, "allocation %lu: a failed decode kept memory", nth);
        cr_assert_eq(failing_alloc_live(), 0, "allocation %lu: a failed decode leaked", nth);
    }
}

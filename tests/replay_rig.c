/* An agent's job in this process on softgpu (see replay_rig.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/job.h"
#include "proto/compress.h"
#include "proto/copy.h"
#include "proto/cuda_ops.h"
#include "proto/deadline.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "tests/replay_rig.h"

#define KEPT_BYTES 8
#define KEPT_WORDS 64

struct replay_rig {
    job *j;
    int peer;                    /* our end of the job's connection */
    pthread_t reader;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    uint64_t answers;
    uint8_t last[4096];
    size_t last_len;
    struct {
        uint64_t stream, value;
        uint8_t *data;
        size_t len;
    } bytes[KEPT_BYTES];
    int next_bytes;
    uint64_t compressed_bytes;   /* bytes frames that came compressed */
    struct {
        uint64_t stream, value;
    } words[KEPT_WORDS];         /* the first ones */
    size_t word_count;
};

static backend softgpu;
static bool softgpu_open;

static void *reader_main(void *arg)
{
    replay_rig *r = arg;
    frame_decoder d;
    frame_decoder_init(&d, JOB_FRAME_LIMIT);
    uint8_t buf[65536];
    for (;;) {
        ssize_t n = read(r->peer, buf, sizeof buf);
        if (n <= 0)
            break;
        size_t off = 0;
        while (off < (size_t)n) {
            size_t used;
            frame f;
            int rc = frame_decoder_feed(&d, buf + off, (size_t)n - off, &used, &f, NULL);
            off += used;
            if (rc < 0)
                goto out;
            if (rc == 0)
                continue;
            pthread_mutex_lock(&r->lock);
            copy_bytes_head b;
            if (f.kind == FRAME_WORD) {
                wire_reader wr = wire_reader_init(f.payload, f.len);
                rec_word v;
                while (wire_remaining(&wr) && rec_word_get(&wr, &v, NULL) == 0) {
                    if (r->word_count < KEPT_WORDS) {
                        r->words[r->word_count].stream = v.stream;
                        r->words[r->word_count].value = v.value;
                    }
                    r->word_count++;
                }
            } else if (f.kind == FRAME_ANSWER) {
                r->answers++;
                r->last_len = f.len < sizeof r->last ? f.len : sizeof r->last;
                memcpy(r->last, f.payload, r->last_len);
            } else if (f.kind == FRAME_BYTES && copy_bytes_read(f.payload, f.len, f.len, &b, NULL) == 0 &&
                       b.chunk.original <= (1u << 20)) {
                /* Kept decoded; a chunk that does not decode is kept empty. */
                int k = r->next_bytes++ % KEPT_BYTES;
                free(r->bytes[k].data);
                r->bytes[k].stream = b.stream;
                r->bytes[k].value = b.value;
                r->bytes[k].len = b.chunk.original;
                r->bytes[k].data = malloc(b.chunk.original + 1);
                if (r->bytes[k].data &&
                    compress_body_decode(&b.chunk, b.data, r->bytes[k].data, b.chunk.original, NULL) < 0)
                    r->bytes[k].len = 0;
                if (b.chunk.method != COMPRESS_RAW)
                    r->compressed_bytes++;
            }
            pthread_cond_broadcast(&r->changed);
            pthread_mutex_unlock(&r->lock);
            frame_release(&f);
        }
    }
out:
    frame_decoder_reset(&d);
    return NULL;
}

static struct timespec in_ms(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

replay_rig *replay_rig_new(const char *softgpu_path, char *why, size_t whylen)
{
    if (!softgpu_open) {
        if (backend_open(&softgpu, softgpu_path, why, whylen) < 0)
            return NULL;
        softgpu_open = true;
    }
    replay_rig *r = calloc(1, sizeof *r);
    int sv[2];
    if (!r || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf(why, whylen, "no socket pair");
        free(r);
        return NULL;
    }
    r->peer = sv[1];
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    r->j = job_new(&softgpu, sv[0], 1, why, whylen);
    if (!r->j || job_start_threads(r->j) < 0 || pthread_create(&r->reader, NULL, reader_main, r) != 0) {
        snprintf(why, whylen, "cannot start the job");
        abort();
    }
    uint8_t open[24];
    wire_writer w = wire_writer_init(open, sizeof open);
    wire_put_u32(&w, JOB_OP_OPEN);
    wire_put_u32(&w, 1);
    wire_put_u64(&w, JOB_WINDOW_FIRST);
    wire_put_u64(&w, JOB_WINDOW_SIZE);
    replay_rig_frame(r, FRAME_REQUEST, open, w.off);
    uint8_t a[8];
    if (replay_rig_answers(r, 1, 5000) != 1 || replay_rig_last_answer(r, a, sizeof a) < 6 || a[0] != 0 ||
        wire_load_u32(a + 1) != 0 || a[5] != 1) {
        snprintf(why, whylen, "the job's open was not answered with a window taken");
        replay_rig_free(r);
        return NULL;
    }
    return r;
}

void replay_rig_free(replay_rig *r)
{
    job_free(r->j);              /* closes its end: the reader sees the end */
    pthread_join(r->reader, NULL);
    /* The agent gives each job its own worker process, so a kernel's fault
     * (sticky on its context) ends with the job; jobs here share one driver,
     * reset to the same effect. */
    backend_reset(&softgpu);
    close(r->peer);
    for (int k = 0; k < KEPT_BYTES; k++)
        free(r->bytes[k].data);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->changed);
    free(r);
}

struct job *replay_rig_job(replay_rig *r)
{
    return r->j;
}

bool replay_rig_frame(replay_rig *r, frame_kind kind, const uint8_t *payload, size_t len)
{
    frame f = { .kind = kind, .payload = (uint8_t *)payload, .len = len };
    return job_replay_frame(r->j, &f);
}

uint64_t replay_rig_answers(replay_rig *r, uint64_t n, int timeout_ms)
{
    struct timespec until = in_ms(timeout_ms);
    pthread_mutex_lock(&r->lock);
    while (r->answers < n && pthread_cond_timedwait(&r->changed, &r->lock, &until) == 0)
        ;
    uint64_t have = r->answers;
    pthread_mutex_unlock(&r->lock);
    return have;
}

size_t replay_rig_last_answer(replay_rig *r, uint8_t *out, size_t cap)
{
    pthread_mutex_lock(&r->lock);
    size_t n = r->last_len < cap ? r->last_len : cap;
    memcpy(out, r->last, n);
    pthread_mutex_unlock(&r->lock);
    return n;
}

long replay_rig_bytes(replay_rig *r, uint64_t stream, uint64_t value, uint8_t *out, size_t cap, int timeout_ms)
{
    struct timespec until = in_ms(timeout_ms);
    pthread_mutex_lock(&r->lock);
    long got = -1;
    for (;;) {
        for (int k = 0; k < KEPT_BYTES && got < 0; k++)
            if (r->bytes[k].data && r->bytes[k].stream == stream && r->bytes[k].value == value) {
                got = (long)(r->bytes[k].len < cap ? r->bytes[k].len : cap);
                memcpy(out, r->bytes[k].data, (size_t)got);
            }
        if (got >= 0 || pthread_cond_timedwait(&r->changed, &r->lock, &until) != 0)
            break;
    }
    pthread_mutex_unlock(&r->lock);
    return got;
}

uint64_t replay_rig_compressed_bytes(replay_rig *r)
{
    pthread_mutex_lock(&r->lock);
    uint64_t n = r->compressed_bytes;
    pthread_mutex_unlock(&r->lock);
    return n;
}

size_t replay_rig_words(replay_rig *r, uint64_t stream, uint64_t *values, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t k = 0; k < r->word_count && k < KEPT_WORDS; k++)
        if (r->words[k].stream == stream) {
            if (n < cap)
                values[n] = r->words[k].value;
            n++;
        }
    pthread_mutex_unlock(&r->lock);
    return n;
}

bool replay_rig_reached(replay_rig *r, uint64_t stream, uint64_t value, int timeout_ms)
{
    struct timespec until = in_ms(timeout_ms);
    bool reached = false;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        for (size_t k = 0; k < r->word_count && k < KEPT_WORDS && !reached; k++)
            reached = r->words[k].stream == stream && r->words[k].value >= value;
        if (reached || pthread_cond_timedwait(&r->changed, &r->lock, &until) != 0)
            break;
    }
    pthread_mutex_unlock(&r->lock);
    return reached;
}

size_t replay_htod_body(uint8_t *body, size_t cap, uint64_t dst, bool quiet, const void *data, size_t n)
{
    if (cap < COPY_HTOD_HEAD + n)
        abort();
    compress_header h = { .method = COMPRESS_RAW, .original = (uint32_t)n, .stored = (uint32_t)n };
    copy_htod_write(body, dst, quiet, &h);
    memcpy(body + COPY_HTOD_HEAD, data, n);
    return COPY_HTOD_HEAD + n;
}

const char *replay_rig_cause(replay_rig *r)
{
    return job_failed(r->j) ? r->j->cause : "";
}

/* ---- the script ---- */

static const char add1_ptx[] =
    ".version 7.5\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry add1(.param .u64 add1_p, .param .u32 add1_n)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [add1_p];\n"
    "  ld.param.u32 %r2, [add1_n];\n"
    "  mov.u32 %r3, %ctaid.x;\n"
    "  mov.u32 %r4, %ntid.x;\n"
    "  mov.u32 %r5, %tid.x;\n"
    "  mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "  setp.ge.s32 %p1, %r1, %r2;\n"
    "  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mul.wide.s32 %rd3, %r1, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n"
    "  ld.global.u32 %r3, [%rd4];\n"
    "  add.s32 %r3, %r3, 1;\n"
    "  st.global.u32 [%rd4], %r3;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

static void keep(replay_script *s, frame_kind kind, const uint8_t *p, size_t n)
{
    s->kind[s->count] = kind;
    s->frame[s->count] = malloc(n);
    memcpy(s->frame[s->count], p, n);
    s->len[s->count] = n;
    s->count++;
}

/* A handover record: u32 op, u32 body length, u64 stream, u64 value, body. */
static size_t record(uint8_t *out, size_t cap, uint32_t op, uint64_t stream, uint64_t value, const uint8_t *body,
                     size_t n)
{
    wire_writer w = wire_writer_init(out, cap);
    wire_put_u32(&w, op);
    wire_put_u32(&w, (uint32_t)n);
    wire_put_u64(&w, stream);
    wire_put_u64(&w, value);
    wire_put_bytes(&w, body, n);
    return w.err ? 0 : w.off;
}

bool replay_script_run(replay_rig *r, replay_script *s, char *why, size_t whylen)
{
    memset(s, 0, sizeof *s);
    uint8_t buf[4096], body[1024], a[64];
    uint64_t answers = 1;
    /* An allocation. */
    wire_writer w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuMemAlloc_v2);
    wire_put_u32(&w, 0);
    wire_put_u64(&w, REPLAY_N * 4);
    keep(s, FRAME_REQUEST, buf, w.off);
    replay_rig_frame(r, FRAME_REQUEST, buf, w.off);
    answers++;
    if (replay_rig_answers(r, answers, 5000) != answers || replay_rig_last_answer(r, a, sizeof a) != 13 ||
        a[0] != 0 || wire_load_u32(a + 1) != 0) {
        snprintf(why, whylen, "cuMemAlloc was not answered with a pointer");
        return false;
    }
    uint64_t ptr = wire_load_u64(a + 5);
    /* A module and its kernel. */
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuModuleLoadData);
    wire_put_u64(&w, 10);
    wire_put_u32(&w, 0);
    wire_put_bytes(&w, add1_ptx, sizeof add1_ptx - 1);
    keep(s, FRAME_REQUEST, buf, w.off);
    replay_rig_frame(r, FRAME_REQUEST, buf, w.off);
    answers++;
    if (replay_rig_answers(r, answers, 5000) != answers || replay_rig_last_answer(r, a, sizeof a) < 5 ||
        a[0] != 0 || wire_load_u32(a + 1) != 0) {
        snprintf(why, whylen, "the module was not loaded (%u)", wire_load_u32(a + 1));
        return false;
    }
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuModuleGetFunction);
    wire_put_u64(&w, 10);
    wire_put_u64(&w, 11);
    wire_put_u32(&w, 4);
    wire_put_bytes(&w, "add1", 4);
    keep(s, FRAME_REQUEST, buf, w.off);
    replay_rig_frame(r, FRAME_REQUEST, buf, w.off);
    answers++;
    if (replay_rig_answers(r, answers, 5000) != answers || replay_rig_last_answer(r, a, sizeof a) < 5 ||
        a[0] != 0 || wire_load_u32(a + 1) != 0) {
        snprintf(why, whylen, "the kernel was not found");
        return false;
    }
    /* A stream, a copy in, the launch, a copy out. */
    w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, 0);
    wire_put_u32(&w, 0);
    wire_put_u32(&w, 0);
    size_t n = record(buf, sizeof buf, JOB_OP_STREAM_CREATE, REPLAY_STREAM, 0, body, w.off);
    keep(s, FRAME_HANDOVER, buf, n);
    uint8_t ints[REPLAY_N * 4];
    for (uint32_t i = 0; i < REPLAY_N; i++)
        wire_store_u32(ints + 4 * i, i);
    size_t body_len = replay_htod_body(body, sizeof body, ptr, false, ints, sizeof ints);
    n = record(buf, sizeof buf, CUDA_OP_cuMemcpyHtoDAsync_v2, REPLAY_STREAM, 1, body, body_len);
    keep(s, FRAME_HANDOVER, buf, n);
    w = wire_writer_init(body, sizeof body);
    wire_put_u64(&w, 11);
    wire_put_u32(&w, 0);
    uint32_t dims[7] = { 2, 1, 1, 32, 1, 1, 0 };
    for (int i = 0; i < 7; i++)
        wire_put_u32(&w, dims[i]);
    wire_put_u64(&w, ptr);                   /* the parameters: u64 at 0, u32 at 8 */
    wire_put_u32(&w, REPLAY_N);
    s->launch = s->count;
    s->launch_dims_at = 24 + 12;             /* the record's head, then function and device */
    s->launch_dims_len = 28;                 /* grid, block, shared memory */
    n = record(buf, sizeof buf, CUDA_OP_cuLaunchKernel, REPLAY_STREAM, 2, body, w.off);
    keep(s, FRAME_HANDOVER, buf, n);
    w = wire_writer_init(body, sizeof body);
    wire_put_u64(&w, ptr);
    wire_put_u64(&w, REPLAY_N * 4);
    n = record(buf, sizeof buf, CUDA_OP_cuMemcpyDtoHAsync_v2, REPLAY_STREAM, 3, body, w.off);
    keep(s, FRAME_HANDOVER, buf, n);
    for (int k = 3; k < s->count; k++)
        replay_rig_frame(r, FRAME_HANDOVER, s->frame[k], s->len[k]);
    uint8_t out[REPLAY_N * 4];
    long got = replay_rig_bytes(r, REPLAY_STREAM, 3, out, sizeof out, 10000);
    if (got != (long)sizeof out) {
        snprintf(why, whylen, "no bytes of the copy out (%ld); cause: %s", got, replay_rig_cause(r));
        return false;
    }
    for (uint32_t i = 0; i < REPLAY_N; i++)
        if (wire_load_u32(out + 4 * i) != i + 1) {
            snprintf(why, whylen, "element %u is %u, not %u", i, wire_load_u32(out + 4 * i), i + 1);
            return false;
        }
    /* The allocation freed. */
    w = wire_writer_init(buf, sizeof buf);
    wire_put_u32(&w, CUDA_OP_cuMemFree_v2);
    wire_put_u64(&w, ptr);
    keep(s, FRAME_DROP, buf, w.off);
    replay_rig_frame(r, FRAME_DROP, buf, w.off);
    if (replay_rig_cause(r)[0]) {
        snprintf(why, whylen, "the job failed: %s", replay_rig_cause(r));
        return false;
    }
    return true;
}

void replay_script_free(replay_script *s)
{
    for (int k = 0; k < s->count; k++)
        free(s->frame[k]);
    s->count = 0;
}

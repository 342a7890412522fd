/* A hostile agent, end to end: a real nvcc-built program through the
 * preloaded shim talks to a peer inside this test that holds the job's key,
 * does the real handshake (hs_accept) and relays frames to and from a real
 * rig-agent, rewriting one frame of the agent's into something malformed:
 * device and attribute counts past the table, cut and bit-flipped open
 * answers, words for unknown streams, going backwards or beyond what was
 * handed over, bytes for no copy or of the wrong size, garbage answers and
 * aborts. The program must end with a non-zero exit and the shim's clear
 * message, within its bound, never by a signal or a sanitizer report.
 * Through the same relay unchanged, the program's close is the last frame
 * it sends. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/compress.h"
#include "proto/conn.h"
#include "proto/copy.h"
#include "proto/deadline.h"
#include "proto/handshake.h"
#include "proto/job.h"
#include "proto/key.h"
#include "proto/names.h"
#include "proto/net.h"
#include "proto/wire.h"
#include "shim/proxy.h"
#include "tests/harness.h"
#include "tests/support.h"

#define BOUND_S 15.0           /* seconds a program may take to fail */
#define RELAY_MS 60000         /* the relay's bound on everything */

typedef enum mutation {
    OPEN_COUNT,      /* the open answer's device count := arg */
    OPEN_MANY,       /* the count := arg, and 80 more devices' bytes follow device 0 */
    OPEN_ATTRS,      /* device 0's attribute count := arg */
    OPEN_CUT,        /* the open answer loses its last arg bytes */
    OPEN_FLIP,       /* bit arg of the open answer flipped */
    WORD_STREAM,     /* the first word names stream arg */
    WORD_BACK,       /* a stream's second word goes back before its first */
    WORD_BYTES,      /* the first word's byte count := arg */
    WORD_RAGGED,     /* the first word message loses its last arg bytes */
    BYTES_VALUE,     /* the first copy's bytes come for value + arg */
    BYTES_SHORT,     /* the first copy's bytes lose their last arg bytes */
    BYTES_HEADER,    /* the first copy's bytes message is cut to arg bytes */
    BYTES_LZ4,       /* the first copy's chunk claims lz4 over arg bytes less of 0xff */
    BYTES_ZEROS,     /* ... claims zero words over them */
    ANSWER_CUT,      /* the first answer after open is cut to arg bytes */
    ANSWER_RESULT,   /* ... carries result arg */
    ANSWER_STATUS,   /* ... has status byte arg */
    ANSWER_BIG,      /* ... gets arg bytes of zeros after its own */
    ABORT_BAD,       /* an abort whose reason claims arg bytes */
} mutation;

typedef struct hostile_case {
    char name[32];
    mutation m;
    uint64_t arg;
    char expect[96];         /* what the program's output must say */
} hostile_case;

/* What an open answer's failure prints (shim_init), and a job's; the
 * case's text follows somewhere after. */
#define OPEN_FAILED "rig: agent b: malformed answer to open: "
#define JOB_FAILED "rig: job failed: b"

/* ---- the relay: the program's side, the agent's side, one rewrite ---- */

typedef struct relay {
    int listen_fd;
    uint16_t agent_port;
    rig_key key;
    const hostile_case *c;
    conn shim, agent;
    bool mutated;                 /* the one rewrite happened */
    struct { uint64_t stream, value; } seen[64];   /* each stream's last word */
    int closes, after_close;      /* the program's close frames, and frames after the first */
    int upstream_done;            /* atomic: the program's side has ended */
    size_t nseen;
    char why[RIG_WHY_MAX];        /* what went wrong inside the relay */
} relay;

static void *upstream_main(void *arg)
{
    relay *r = arg;
    for (;;) {
        frame f = { 0 };
        if (conn_recv(&r->shim, &f, deadline_after(RELAY_MS), -1, NULL) < 0)
            break;
        r->after_close += r->closes > 0;
        r->closes += f.kind == FRAME_CLOSE;
        struct iovec iov = { f.payload, f.len };
        int rc = conn_sendv(&r->agent, f.kind, &iov, f.len ? 1 : 0, deadline_after(RELAY_MS), NULL);
        frame_release(&f);
        if (rc < 0)
            break;
    }
    shutdown(r->agent.fd, SHUT_WR);
    __atomic_store_n(&r->upstream_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static uint32_t load32(const frame *f, size_t at)
{
    return at + 4 <= f->len ? wire_load_u32(f->payload + at) : 0;
}

/* Offsets in the open answer: status, result, taken, version, driver. */
static size_t count_at(const frame *f)
{
    return 14 + load32(f, 10);
}

static void set_len(frame *f, uint64_t len)
{
    if (len < f->len)
        f->len = len;
}

/* Rewrites the agent's frame f as the case says; true once it did. */
static bool rewrite(relay *r, frame *f, bool open_answer)
{
    const hostile_case *c = r->c;
    uint64_t a = c->arg;
    switch (c->m) {
    case OPEN_MANY:
        if (!open_answer || count_at(f) + 4 > f->len)
            return false;
        /* Enough bytes for a decoder that trusts the count to write past a
         * 64-entry table: empty name, uuid, memory, no attributes. */
        {
            size_t extra = 80 * (4 + 16 + 8 + 4);
            uint8_t *more = calloc(1, f->len + extra);
            if (!more)
                return false;
            memcpy(more, f->payload, f->len);
            wire_store_u32(more + count_at(f), (uint32_t)a);
            free(f->payload);
            f->payload = more;
            f->len += extra;
        }
        return true;
    case OPEN_COUNT:
    case OPEN_ATTRS:
    case OPEN_CUT:
    case OPEN_FLIP:
        if (!open_answer)
            return false;
        if (c->m == OPEN_COUNT && count_at(f) + 4 <= f->len)
            wire_store_u32(f->payload + count_at(f), (uint32_t)a);
        if (c->m == OPEN_ATTRS) {
            size_t name = count_at(f) + 4;
            size_t at = name + 4 + load32(f, name) + 16 + 8;
            if (at + 4 <= f->len)
                wire_store_u32(f->payload + at, (uint32_t)a);
        }
        if (c->m == OPEN_CUT)
            set_len(f, a < f->len ? f->len - a : 0);
        if (c->m == OPEN_FLIP && a / 8 < f->len)
            f->payload[a / 8] ^= (uint8_t)(1u << (a % 8));
        return true;
    case WORD_STREAM:
    case WORD_BYTES:
    case WORD_RAGGED:
        if (f->kind != FRAME_WORD || f->len < 24)
            return false;
        if (c->m == WORD_STREAM)
            wire_store_u64(f->payload, a);
        if (c->m == WORD_BYTES)
            wire_store_u64(f->payload + 16, a);
        if (c->m == WORD_RAGGED)
            set_len(f, f->len - a);
        return true;
    case WORD_BACK:
        if (f->kind != FRAME_WORD)
            return false;
        for (size_t off = 0; off + 24 <= f->len; off += 24) {
            uint64_t s = wire_load_u64(f->payload + off), v = wire_load_u64(f->payload + off + 8);
            size_t i = 0;
            while (i < r->nseen && r->seen[i].stream != s)
                i++;
            if (i < r->nseen && v > r->seen[i].value) {
                wire_store_u64(f->payload + off + 8, r->seen[i].value - 1);
                return true;
            }
            if (i == r->nseen && r->nseen < 64)
                r->nseen++;
            r->seen[i].stream = s;
            r->seen[i].value = v;
        }
        return false;
    case BYTES_VALUE:
    case BYTES_SHORT:
    case BYTES_HEADER:
    case BYTES_LZ4:
    case BYTES_ZEROS:
        if (f->kind != FRAME_BYTES || f->len < COPY_BYTES_HEAD || wire_load_u64(f->payload) == 0)
            return false;
        if (c->m == BYTES_LZ4 || c->m == BYTES_ZEROS) {
            uint32_t original = wire_load_u32(f->payload + 17);
            if (original <= a)
                return false;
            compress_header h = { .method = c->m == BYTES_LZ4 ? COMPRESS_LZ4 : COMPRESS_ZEROS, .original = original,
                                  .stored = original - (uint32_t)a };
            compress_header_write(f->payload + 16, &h);
            set_len(f, COPY_BYTES_HEAD + h.stored);
            memset(f->payload + COPY_BYTES_HEAD, 0xff, h.stored);
        }
        if (c->m == BYTES_VALUE)
            wire_store_u64(f->payload + 8, wire_load_u64(f->payload + 8) + a);
        if (c->m == BYTES_SHORT)
            set_len(f, f->len - (a < f->len - COPY_BYTES_HEAD ? a : f->len - COPY_BYTES_HEAD));
        if (c->m == BYTES_HEADER)
            set_len(f, a);
        return true;
    case ANSWER_CUT:
    case ANSWER_RESULT:
    case ANSWER_STATUS:
    case ANSWER_BIG:
        if (f->kind != FRAME_ANSWER || open_answer || f->len < 5)
            return false;
        if (c->m == ANSWER_CUT)
            set_len(f, a);
        if (c->m == ANSWER_RESULT)
            wire_store_u32(f->payload + 1, (uint32_t)a);
        if (c->m == ANSWER_STATUS)
            f->payload[0] = (uint8_t)a;
        if (c->m == ANSWER_BIG) {
            uint8_t *big = calloc(1, f->len + a);
            if (!big)
                return false;
            memcpy(big, f->payload, f->len);
            free(f->payload);
            f->payload = big;
            f->len += a;
        }
        return true;
    case ABORT_BAD:
        return false;   /* sent on its own, after the open answer */
    }
    return false;
}

static void *downstream_main(void *arg)
{
    relay *r = arg;
    bool opened = false;
    for (;;) {
        frame f = { 0 };
        if (conn_recv(&r->agent, &f, deadline_after(RELAY_MS), -1, NULL) < 0)
            break;
        bool open_answer = f.kind == FRAME_ANSWER && !opened;
        opened = opened || open_answer;
        if (!r->mutated)
            r->mutated = rewrite(r, &f, open_answer);
        struct iovec iov = { f.payload, f.len };
        int rc = conn_sendv(&r->shim, f.kind, &iov, f.len ? 1 : 0, deadline_after(RELAY_MS), NULL);
        frame_release(&f);
        if (rc < 0)
            break;
        if (open_answer && r->c->m == ABORT_BAD) {
            uint8_t bad[8];
            wire_store_u32(bad, (uint32_t)r->c->arg);
            memcpy(bad + 4, "oops", 4);
            conn_send(&r->shim, FRAME_ABORT, bad, sizeof bad, deadline_after(RELAY_MS), NULL);
            r->mutated = true;
        }
    }
    shutdown(r->shim.fd, SHUT_WR);
    return NULL;
}

/* Accepts the program, proves the key to it, dials the real agent as the
 * program would, then relays both ways. */
static void *relay_main(void *arg)
{
    relay *r = arg;
    struct pollfd p = { r->listen_fd, POLLIN, 0 };
    if (poll(&p, 1, RELAY_MS) <= 0) {
        snprintf(r->why, sizeof r->why, "the program never connected");
        return NULL;
    }
    int sfd = accept(r->listen_fd, NULL, NULL);
    hs_config cfg = { .key = &r->key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
    hs_peers peers;
    rig_why why = { "" };
    if (sfd < 0 || hs_accept(sfd, &cfg, NULL, NULL, &peers, &why) < 0) {
        snprintf(r->why, sizeof r->why, "handshake with the program: %s", why.text);
        return NULL;
    }
    names_address addr;
    char spec[32];
    snprintf(spec, sizeof spec, "127.0.0.1:%u", (unsigned)r->agent_port);
    int afd = -1;
    if (names_parse_address(spec, strlen(spec), &addr, &why) < 0 || net_connect(&addr, HS_TIMEOUT_MS, &afd, &why) < 0 ||
        hs_dial(afd, &cfg, peers.dialing, peers.accepting, &why) < 0) {
        snprintf(r->why, sizeof r->why, "dialing the agent: %s", why.text);
        close(sfd);
        return NULL;
    }
    if (conn_init(&r->shim, sfd, JOB_FRAME_LIMIT * 2, &why) < 0 || conn_init(&r->agent, afd, JOB_FRAME_LIMIT, &why) < 0) {
        snprintf(r->why, sizeof r->why, "conn_init: %s", why.text);
        return NULL;
    }
    pthread_t up;
    pthread_create(&up, NULL, upstream_main, r);
    downstream_main(r);
    pthread_join(up, NULL);
    return NULL;
}

/* ---- what a test starts, ended by the suite's fini even after a failed assertion ---- */

static agent_proc live_agent;
static bool agent_live;

static void end_what_lives(void)
{
    if (agent_live)
        agent_stop(&live_agent);
    agent_live = false;
}

TestSuite(hostile_agent, .fini = end_what_lives);

/* Static: the detached relay thread may outlive the test function. */
static relay the_relay;

/* Runs program through the shim against a relay rewriting as c says. */
static program_result run_against(const hostile_case *c, const char *program, relay **out)
{
    relay *r = &the_relay;
    *out = r;
    agent_start(&live_agent, NULL, NULL);
    agent_live = true;
    memset(r, 0, sizeof *r);
    r->c = c;
    r->listen_fd = support_listen(&r->agent_port);
    uint16_t relay_port = r->agent_port;
    r->agent_port = live_agent.port;
    rig_why why = { "" };
    cr_assert_eq(key_from_hex(&r->key, live_agent.key_hex, &why), 0, "%s", why.text);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, relay_main, r), 0);
    pthread_detach(t);

    char path[256], agents[96], key[96], preload[300];
    snprintf(path, sizeof path, PLAIN_BUILD "/programs/%s", program);
    cr_assert_eq(access(path, X_OK), 0, "%s is not built", path);
    snprintf(agents, sizeof agents, "RIG_REMOTE_AGENTS=b=127.0.0.1:%u", (unsigned)relay_port);
    snprintf(key, sizeof key, "RIG_REMOTE_KEY=%s", live_agent.key_hex);
    shim_env(preload, sizeof preload);
    char *argv[] = { path, NULL };
    char *env[] = { preload, agents, key, "RIG_LOCAL_DRIVER=none", NULL };
    return program_run(argv, env, 30);
}

static void assert_failed_cleanly(const hostile_case *c, const char *prefix, const relay *r,
                                  const program_result *p)
{
    cr_assert(r->mutated, "%s: the relay never found the frame to rewrite (%s); output:\n%s", c->name, r->why,
              p->output);
    cr_assert_neq(p->status, -1, "%s: still running after 30 s:\n%s", c->name, p->output);
    cr_assert(p->status > 0 && p->status < 128, "%s: exited %d (128 + signal?):\n%s", c->name, p->status,
              p->output);
    cr_assert_lt(p->seconds, BOUND_S, "%s: took %.1f s", c->name, p->seconds);
    cr_assert(!strstr(p->output, "AddressSanitizer") && !strstr(p->output, "runtime error"),
              "%s: a sanitizer report:\n%s", c->name, p->output);
    const char *said = strstr(p->output, prefix);
    cr_assert(said, "%s: no \"%s\" in:\n%s", c->name, prefix, p->output);
    cr_assert(strstr(said, c->expect), "%s: no \"%s\" after \"%s\" in:\n%s", c->name, c->expect, prefix,
              p->output);
}

ParameterizedTestParameters(hostile_agent, open_answer)
{
    static hostile_case cases[] = {
        { "count 0xFFFFFFFF", OPEN_COUNT, 0xFFFFFFFFu, "4294967295 devices, more than the 64" },
        { "count 0xFFFFFFFF, 81 devices", OPEN_MANY, 0xFFFFFFFFu, "4294967295 devices, more than the 64" },
        { "count 81, 81 devices", OPEN_MANY, 81, "81 devices, more than the 64" },
        { "count 1<<20", OPEN_COUNT, 1u << 20, "1048576 devices, more than the 64" },
        { "count 17", OPEN_COUNT, 17, "device 1 is cut short" },
        { "count 65", OPEN_COUNT, 65, "65 devices, more than the 64" },
        { "attributes 160", OPEN_ATTRS, SHIM_ATTRS_MAX, "device 0 has 160 attributes, more than 159" },
        { "attributes 0xFFFFFFFF", OPEN_ATTRS, 0xFFFFFFFFu, "device 0 has 4294967295 attributes" },
        { "cut by 1", OPEN_CUT, 1, "the attributes of device 0 are cut short" },
        { "cut by 600", OPEN_CUT, 600, "cut short" },
        { "status flipped", OPEN_FLIP, 7, "an answer of unknown kind 128" },
        { "window flag flipped", OPEN_FLIP, 5 * 8 + 1, "window flag 3" },
        { "driver length flipped", OPEN_FLIP, 13 * 8 + 7, "a driver description longer than 127" },
        { "unchanged", OPEN_CUT, 0, "" },   /* a control: the relay alone, the program passes */
    };
    return cr_make_param_array(hostile_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(hostile_case *c, hostile_agent, open_answer, .timeout = 60)
{
    relay *r;
    program_result p = run_against(c, "devicequery.static", &r);
    if (!c->expect[0]) {
        /* The unchanged answer: the relay itself is faithful. */
        cr_assert_eq(p.status, 0, "%s", p.output);
        cr_assert(strstr(p.output, "devicequery: ok"), "%s", p.output);
    } else {
        assert_failed_cleanly(c, OPEN_FAILED, r, &p);
    }
    program_result_free(&p);
}

ParameterizedTestParameters(hostile_agent, after_open)
{
    static hostile_case cases[] = {
        { "word for unknown stream", WORD_STREAM, 0x3FFFFFFF, "a word names stream 1073741823" },
        { "word going backwards", WORD_BACK, 0, "back from" },
        { "word bytes too big", WORD_BYTES, (uint64_t)1 << 40, "beyond what was handed over" },
        { "word ragged", WORD_RAGGED, 1, "bytes, not whole words" },
        { "bytes for no copy", BYTES_VALUE, 1000, "a copy this job did not ask for" },
        { "bytes one short", BYTES_SHORT, 1, "the chunk stores 40028 bytes, the message carries 40027" },
        { "bytes header cut", BYTES_HEADER, 10, "shorter than its head" },
        { "bytes lz4 corrupt", BYTES_LZ4, 100, "compressed chunk: lz4 body of 39928 bytes is corrupt" },
        { "bytes zeros corrupt", BYTES_ZEROS, 100, "compressed chunk: zeros body of 39928 bytes ends in block" },
        { "answer cut", ANSWER_CUT, 3, "malformed answer: an answer without its result" },
        { "answer empty", ANSWER_CUT, 0, "malformed answer: an empty answer" },
        { "answer result 0xFFFFFFFF", ANSWER_RESULT, 0xFFFFFFFFu, "result 4294967295, which is no CUresult" },
        { "answer status 7", ANSWER_STATUS, 7, "an answer of unknown kind 7" },
        { "answer 1 MiB too long", ANSWER_BIG, 1 << 20, "of 1048584 bytes, not 8" },
        { "abort reason too long", ABORT_BAD, 0xFFFFFFFFu, "aborted with a malformed reason" },
        { "abort reason cut", ABORT_BAD, 100, "aborted with a malformed reason" },
    };
    return cr_make_param_array(hostile_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(hostile_case *c, hostile_agent, after_open, .timeout = 60)
{
    relay *r;
    program_result p = run_against(c, "vecadd.static", &r);
    assert_failed_cleanly(c, JOB_FAILED, r, &p);
    program_result_free(&p);
}

/* The program's close is the last frame it sends: what cudart's exit
 * handlers free after the shim's (its library) is not sent to a job the
 * agent is ending. */
Test(hostile_agent, nothing_follows_the_close, .timeout = 60)
{
    static const hostile_case faithful = { "unchanged", OPEN_CUT, 0, "" };
    relay *r;
    program_result p = run_against(&faithful, "vecadd.static", &r);
    cr_assert_eq(p.status, 0, "%s", p.output);
    cr_assert(strstr(p.output, "vecadd: ok"), "%s", p.output);
    for (int i = 0; i < 500 && !__atomic_load_n(&r->upstream_done, __ATOMIC_ACQUIRE); i++)
        usleep(10000);
    cr_assert(__atomic_load_n(&r->upstream_done, __ATOMIC_ACQUIRE), "the relay still reads the program");
    cr_assert_eq(r->closes, 1, "the program sent %d closes", r->closes);
    cr_assert_eq(r->after_close, 0, "the program sent %d frames after its close", r->after_close);
    program_result_free(&p);
}

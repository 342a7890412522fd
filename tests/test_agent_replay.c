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
#include <time.h>

#include "proto/wire.h"
#include "tests/replay_rig.h"

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

static unsigned test_seed(void)
{
    const char *v = getenv("RIG_TEST_SEED");
    return v && *v ? (unsigned)strtoul(v, NULL, 0) : (unsigned)time(NULL);
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
    cr_assert_str_empty(replay_rig_cause(r), "the valid frames before %d failed the job", k);
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
            cur = rig_before(&s, *k);
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
    cr_expect(failed + refused > 0, "frame %d: %zu mutations, none noticed", *k, nm);
    cr_log_info("frame %d: %zu mutations, %zu failed the job, %zu refused or in error", *k, nm, failed, refused);
    free(buf);
    replay_script_free(&s);
}

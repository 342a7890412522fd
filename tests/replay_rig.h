/* An agent's job inside the test process, on softgpu, for tests and
 * fuzzers of the agent's replay: frames go straight to the job's replay
 * (agent/job.h), and what the job sends comes back on a socket pair that a
 * thread reads, counting answers and keeping the last one and the bytes. */
#ifndef RIG_TESTS_REPLAY_RIG_H
#define RIG_TESTS_REPLAY_RIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/frame.h"

typedef struct replay_rig replay_rig;

/* Opens softgpu at softgpu_path (once per process) and starts a job whose
 * open request has been answered. NULL with why when it cannot. */
replay_rig *replay_rig_new(const char *softgpu_path, char *why, size_t whylen);
void replay_rig_free(replay_rig *r);
/* The job itself, for tests of the agent's own functions on it. */
struct job *replay_rig_job(replay_rig *r);

/* Replays one frame of kind with payload; true when it was a close. */
bool replay_rig_frame(replay_rig *r, frame_kind kind, const uint8_t *payload, size_t len);
/* Answer frames received so far; waits up to timeout_ms for at least n. */
uint64_t replay_rig_answers(replay_rig *r, uint64_t n, int timeout_ms);
/* The last answer's payload (copied into out, at most cap bytes). */
size_t replay_rig_last_answer(replay_rig *r, uint8_t *out, size_t cap);
/* Bytes of copies into the program for (stream, value), waiting up to
 * timeout_ms; returns their length, or -1 when none came. */
long replay_rig_bytes(replay_rig *r, uint64_t stream, uint64_t value, uint8_t *out, size_t cap, int timeout_ms);
/* Bytes frames so far whose chunk was compressed (LZ4 or zero words). */
uint64_t replay_rig_compressed_bytes(replay_rig *r);
/* Words received for stream so far: how many, and their values (the first
 * cap of them, in order, into values). */
size_t replay_rig_words(replay_rig *r, uint64_t stream, uint64_t *values, size_t cap);
/* Waits up to timeout_ms for a word of stream reaching value; true if one came. */
bool replay_rig_reached(replay_rig *r, uint64_t stream, uint64_t value, int timeout_ms);
/* A cuMemcpyHtoDAsync_v2 body copying n raw bytes of data to dst (quiet:
 * COPY_QUIET) into body; its length. */
size_t replay_htod_body(uint8_t *body, size_t cap, uint64_t dst, bool quiet, const void *data, size_t n);
/* The job's root cause, "" while it has not failed. */
const char *replay_rig_cause(replay_rig *r);

/* The frames of a small valid job, after the open: an allocation, a PTX
 * module and its kernel, a stream, a copy in, a launch, a copy out. Built
 * as they are replayed, since later frames name the allocation. */
typedef struct replay_script {
    uint8_t *frame[16];
    size_t len[16];
    frame_kind kind[16];
    size_t launch_dims_at, launch_dims_len;   /* where the grid sits in the launch */
    int count;
    int launch;                               /* index of the launch frame */
} replay_script;
#define REPLAY_N 64                           /* ints the kernel adds one to */
#define REPLAY_STREAM 20
/* Runs the script's frames on r, building each from the answers before it;
 * the script keeps copies for mutation. Returns false with why when a step
 * does not do what a driver would. */
bool replay_script_run(replay_rig *r, replay_script *s, char *why, size_t whylen);
void replay_script_free(replay_script *s);

#endif

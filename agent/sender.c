/* The job's threads that send, and the one that watches the devices. The
 * driver's callback thread sends a word itself when it can without waiting
 * (marker_send). No thread here that sends ever calls the driver: freeing pinned memory or
 * querying a stream may wait for every queued kernel, and a sender stuck
 * there sends neither words nor beats, so a healthy job would be failed as
 * silent. The watcher calls the driver and sends nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "agent/job.h"
#include "proto/compress.h"
#include "proto/copy.h"
#include "proto/deadline.h"
#include "proto/job.h"

int agent_stdout_pipe = -1;

/* A copy into the program at most this long goes out from the marker
 * itself (a synchronous read of a value); larger ones go through the
 * sender, so the callback thread never spends long on the network. */
#define MARKER_BYTES_MAX ((size_t)4 << 10)

/* A note's triple of the word frame (proto/records.def "word"). */
static void word_of(const note *n, uint8_t out[static rec_word_size])
{
    wire_writer w = wire_writer_init(out, rec_word_size);
    rec_word_put(&w, &(rec_word){ .stream = n->stream, .value = n->value, .bytes = n->bytes });
}

/* A marker or the job thread sent a note itself: the sender may take
 * what was queued meanwhile, and a wait for earlier words may go on. The
 * caller holds q_lock. */
static void done_sending(job *j)
{
    if (j->q_head)
        pthread_cond_signal(&j->send_cond);
    pthread_cond_broadcast(&j->sent_cond);
}

/* Sends a note's bytes (a copy into the program of at most
 * MARKER_BYTES_MAX) and word in one write, then frees it; the caller holds
 * send_lock. */
static void send_note_locked(job *j, note *n)
{
    rig_why why = { "" };
    uint8_t word[rec_word_size];
    word_of(n, word);
    struct iovec iov = { word, sizeof word };
    int rc;
    if (n->staging) {
        /* One write: the program's reader wakes once for both. Raw: so
         * small a copy gains nothing from LZ4. */
        uint8_t head[COPY_BYTES_HEAD];
        compress_header h = { .method = COMPRESS_RAW, .original = (uint32_t)n->len, .stored = (uint32_t)n->len };
        copy_bytes_write(head, n->stream, n->value, &h);
        struct iovec bytes[2] = { { head, sizeof head }, { n->staging, n->len } };
        rc = conn_sendv2(&j->c, FRAME_BYTES, bytes, 2, FRAME_WORD, &iov, 1, deadline_after(JOB_STALL_MS), &why);
    } else {
        rc = conn_sendv(&j->c, FRAME_WORD, &iov, 1, deadline_after(JOB_STALL_MS), &why);
    }
    if (rc == RIG_E_CLOSED)
        job_fail(j, "controller: closed its connection");
    else if (rc < 0)
        job_fail(j, "controller: %s", why.text);
    if (n->staging)
        staging_put(j->b, n->staging, n->len);
    note_free(j, n);
}

/* The marker's own send: when nothing is queued for the sender or being
 * sent by it, no device output waits, nobody else sends and the socket's
 * buffer surely takes the frames whole, the callback thread sends the
 * note's bytes and word itself, sparing the sender's wake-up on the way
 * of a synchronous wait. It never waits: any doubt leaves the note to the
 * sender (false). It calls no driver function. */
static bool marker_send(job *j, note *n)
{
    if (pthread_mutex_trylock(&j->output_lock) != 0)
        return false;
    int pending = 0;
    if (agent_stdout_pipe >= 0 && (ioctl(agent_stdout_pipe, FIONREAD, &pending) < 0 || pending > 0)) {
        pthread_mutex_unlock(&j->output_lock);
        return false;
    }
    if (pthread_mutex_trylock(&j->send_lock) != 0) {
        pthread_mutex_unlock(&j->output_lock);
        return false;
    }
    /* Two frame headers, the bytes' head, the copy and one triple. */
    if (conn_send_room(&j->c) < 2 * FRAME_HEADER_SIZE + COPY_BYTES_HEAD + n->len + rec_word_size) {
        pthread_mutex_unlock(&j->send_lock);
        pthread_mutex_unlock(&j->output_lock);
        return false;
    }
    send_note_locked(j, n);
    pthread_mutex_unlock(&j->send_lock);
    pthread_mutex_unlock(&j->output_lock);
    return true;
}

bool job_send_reached(job *j, note *n)
{
    if (n->staging && (n->inbound || n->len > MARKER_BYTES_MAX))
        return false;
    pthread_mutex_lock(&j->q_lock);
    if (j->q_head || j->sending || j->marker_sending || j->failed) {
        pthread_mutex_unlock(&j->q_lock);
        return false;
    }
    j->marker_sending = true;
    pthread_mutex_unlock(&j->q_lock);
    /* The job thread may wait on the socket, as it does for answers: the
     * device output so far, then the word, without the marker's checks
     * (three system calls more on the way of each synchronous wait). */
    forward_output(j);
    pthread_mutex_lock(&j->send_lock);
    send_note_locked(j, n);
    pthread_mutex_unlock(&j->send_lock);
    pthread_mutex_lock(&j->q_lock);
    j->marker_sending = false;
    done_sending(j);
    pthread_mutex_unlock(&j->q_lock);
    return true;
}

void CUDA_CB job_marker(void *arg)
{
    note *n = arg;
    job *j = *(job **)((uint8_t *)n + sizeof *n);
    pthread_mutex_lock(&j->q_lock);
    j->last_marker_ms = deadline_now_ms();
    if (n->quiet) {
        /* A later piece's word reports this one. */
        j->pending_markers--;
        pthread_mutex_unlock(&j->q_lock);
        staging_put(j->b, n->staging, n->len);
        note_free(j, n);
        return;
    }
    if (!j->q_head && !j->sending && !j->marker_sending && !j->failed && (!n->staging || n->len <= MARKER_BYTES_MAX)) {
        /* Claims the sending of words; notes queued meanwhile wait. */
        j->marker_sending = true;
        pthread_mutex_unlock(&j->q_lock);
        bool sent = marker_send(j, n);
        pthread_mutex_lock(&j->q_lock);
        j->marker_sending = false;
        done_sending(j);
        if (sent) {
            j->pending_markers--;
            pthread_mutex_unlock(&j->q_lock);
            return;
        }
    }
    n->next = NULL;
    if (j->q_tail)
        j->q_tail->next = n;
    else
        j->q_head = n;
    j->q_tail = n;
    pthread_cond_signal(&j->send_cond);
    pthread_mutex_unlock(&j->q_lock);
}

/* A note carries its job right after itself, so the marker can find it. */
note *note_new(job *j)
{
    note *n = calloc(1, sizeof *n + sizeof(job *));
    if (!n)
        return NULL;
    *(job **)((uint8_t *)n + sizeof *n) = j;
    pthread_mutex_lock(&j->q_lock);
    n->live_next = j->live;
    if (j->live)
        j->live->live_prev = n;
    j->live = n;
    pthread_mutex_unlock(&j->q_lock);
    return n;
}

void note_free(job *j, note *n)
{
    pthread_mutex_lock(&j->q_lock);
    if (n->live_prev)
        n->live_prev->live_next = n->live_next;
    else
        j->live = n->live_next;
    if (n->live_next)
        n->live_next->live_prev = n->live_prev;
    pthread_mutex_unlock(&j->q_lock);
    free(n);
}

void forward_output(job *j)
{
    if (agent_stdout_pipe < 0)
        return;
    uint8_t buf[COPY_BYTES_HEAD + 65536];
    pthread_mutex_lock(&j->output_lock);
    for (;;) {
        ssize_t n = read(agent_stdout_pipe, buf + COPY_BYTES_HEAD, sizeof buf - COPY_BYTES_HEAD);
        if (n <= 0)
            break;
        compress_header h = { .method = COMPRESS_RAW, .original = (uint32_t)n, .stored = (uint32_t)n };
        copy_bytes_write(buf, 0, 0, &h);
        struct iovec iov = { buf, COPY_BYTES_HEAD + (size_t)n };
        /* Output printed before a failure still goes out, ahead of the
         * abort: a device assert's message is how the user learns why. */
        if (!j->abort_sent)
            job_send(j, FRAME_BYTES, &iov, 1);
    }
    pthread_mutex_unlock(&j->output_lock);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Copies into the program smaller than this go raw: LZ4 saves less than a
 * sample costs. */
#define BYTES_COMPRESS_MIN ((size_t)64 << 10)

/* A copy's bytes into the program: compressed when a sample of them and
 * the link's measured rate say it pays (compress_decide), else raw from the
 * staging buffer. The sender compresses the next copy while the socket
 * still carries this one. With word (the note's triple), the word frame
 * goes in the same write. */
static void send_bytes(job *j, const note *n, const uint8_t *word)
{
    uint8_t head[COPY_BYTES_HEAD];
    compress_header h = { .method = COMPRESS_RAW, .original = (uint32_t)n->len, .stored = (uint32_t)n->len };
    const void *data = n->staging;
    double link = n->len >= BYTES_COMPRESS_MIN ? compress_link_rate(conn_link_rate(&j->c)) : 0;
    if (link > 0 && !compress_pace_paused(&j->compress_pace)) {
        compress_rates r = compress_machine();
        r.link_bps = link;
        uint8_t method = compress_decide(n->staging, n->len, &r).method;
        uint8_t *out = method != COMPRESS_RAW ? job_buffer(&j->packed_out, &j->packed_out_cap, compress_bound(n->len))
                                              : NULL;
        size_t got = 0;
        rig_why why = { "" };
        int64_t t0 = now_ns();
        int rc = out ? compress_chunk(n->staging, n->len, method, out, j->packed_out_cap, &got, &why) : -1;
        if (out)
            compress_pace_note(&j->compress_pace, n->len, (double)(now_ns() - t0) * 1e-9, link);
        if (rc == 0 && out[0] != COMPRESS_RAW && compress_header_read(out, &h, &why) == 0)
            data = out + COMPRESS_HEADER_SIZE;
        else
            h = (compress_header){ .method = COMPRESS_RAW, .original = (uint32_t)n->len, .stored = (uint32_t)n->len };
    }
    copy_bytes_write(head, n->stream, n->value, &h);
    struct iovec iov[2] = { { head, sizeof head }, { (void *)data, h.stored } };
    struct iovec w = { (void *)word, rec_word_size };
    if (word)
        job_send2(j, FRAME_BYTES, iov, 2, FRAME_WORD, &w, 1);
    else
        job_send(j, FRAME_BYTES, iov, 2);
}

/* Adds a small copy's bytes to ga, raw (LZ4 saves less than a sample costs
 * below BYTES_COMPRESS_MIN); false when full, one frame kept for the words. */
static bool gather_bytes(job_gather *ga, note *n)
{
    if (ga->g.frames >= CONN_GATHER_FRAMES - 1)
        return false;
    uint8_t *head = ga->heads[ga->g.frames];
    compress_header h = { .method = COMPRESS_RAW, .original = (uint32_t)n->len, .stored = (uint32_t)n->len };
    copy_bytes_write(head, n->stream, n->value, &h);
    struct iovec iov[2] = { { head, COPY_BYTES_HEAD }, { n->staging, n->len } };
    conn_gather_add(&ga->g, FRAME_BYTES, iov, 2);
    ga->notes[ga->count++] = n;
    return true;
}

/* Writes what ga gathered, with words (the words of ga's own notes, when
 * with_words) as its last frame, then gives back the notes' buffers. */
static void gather_flush(job *j, job_gather *ga, bool with_words)
{
    uint8_t words[CONN_GATHER_FRAMES * rec_word_size];
    if (with_words && ga->count) {
        for (int i = 0; i < ga->count; i++)
            word_of(ga->notes[i], words + i * rec_word_size);
        struct iovec iov = { words, (size_t)ga->count * rec_word_size };
        conn_gather_add(&ga->g, FRAME_WORD, &iov, 1);
    }
    if (!job_failed(j))
        job_send_gather(j, &ga->g);
    else
        conn_gather_init(&ga->g);
    for (int i = 0; i < ga->count; i++) {
        note *n = ga->notes[i];
        if (!n->in_place)
            staging_put(j->b, n->staging, n->len);
        note_free(j, n);
    }
    ga->count = 0;
}

/* Claims the sending of words for the job thread, after every note the
 * sender holds: their words may be of earlier values of the same stream,
 * and go first, or the program would take a later value for theirs. False
 * once the job failed. */
static bool claim_words(job *j)
{
    pthread_mutex_lock(&j->q_lock);
    while ((j->q_head || j->sending || j->marker_sending) && !j->failed) {
        struct timespec ts = deadline_timespec_in(100);
        pthread_cond_timedwait(&j->sent_cond, &j->q_lock, &ts);
    }
    bool failed = j->failed;
    if (!failed)
        j->marker_sending = true;
    pthread_mutex_unlock(&j->q_lock);
    return !failed;
}

static void release_words(job *j)
{
    pthread_mutex_lock(&j->q_lock);
    j->marker_sending = false;
    done_sending(j);
    pthread_mutex_unlock(&j->q_lock);
}

void job_flush_in_place(job *j)
{
    job_gather *ga = &j->in_place;
    if (!ga->count)
        return;
    if (claim_words(j)) {
        forward_output(j);
        gather_flush(j, ga, true);
        release_words(j);
    } else {
        gather_flush(j, ga, true);   /* gives the notes back, sends nothing */
    }
}

void job_send_in_place(job *j, note *n)
{
    if (n->len < BYTES_COMPRESS_MIN) {
        if (!gather_bytes(&j->in_place, n)) {
            job_flush_in_place(j);
            gather_bytes(&j->in_place, n);
        }
        return;
    }
    job_flush_in_place(j);
    if (claim_words(j)) {
        forward_output(j);
        uint8_t word[rec_word_size];
        word_of(n, word);
        if (!job_failed(j))
            send_bytes(j, n, word);
        release_words(j);
    }
    note_free(j, n);
}

/* Bytes of copies into the program, then the words of the values reached;
 * a staged copy to the device only gives its buffer back. */
void *sender_main(void *arg)
{
    job *j = arg;
    job_gather sends = { .count = 0 };
    pthread_mutex_lock(&j->q_lock);
    for (;;) {
        while ((!j->q_head || j->marker_sending) && !j->stopping)
            pthread_cond_wait(&j->send_cond, &j->q_lock);
        note *batch = j->q_head;
        j->q_head = j->q_tail = NULL;
        j->sending = batch != NULL;
        bool stop = j->stopping && !batch;
        pthread_mutex_unlock(&j->q_lock);
        if (stop)
            return NULL;

        forward_output(j);
        size_t count = 0;
        for (note *n = batch; n; n = n->next)
            count++;
        uint8_t *words = malloc(count * rec_word_size);
        wire_writer w = wire_writer_init(words, words ? count * rec_word_size : 0);
        /* Small copies' bytes go gathered, many to a write; a larger one
         * (which may compress) after those before it. */
        for (note *n = batch; n;) {
            rec_word_put(&w, &(rec_word){ .stream = n->stream, .value = n->value, .bytes = n->bytes });
            note *next = n->next;
            if (n->staging && !n->inbound && !job_failed(j) && n->len < BYTES_COMPRESS_MIN) {
                if (!gather_bytes(&sends, n)) {
                    gather_flush(j, &sends, false);
                    gather_bytes(&sends, n);
                }
            } else {
                if (n->staging && !n->inbound && !job_failed(j)) {
                    gather_flush(j, &sends, false);
                    send_bytes(j, n, NULL);
                }
                if (n->staging)
                    staging_put(j->b, n->staging, n->len);
                note_free(j, n);
            }
            n = next;
        }
        if (!words)
            job_fail(j, "agent: out of memory for the words of %zu values", count);
        struct iovec iov = { words, w.off };
        if (words && count)
            conn_gather_add(&sends.g, FRAME_WORD, &iov, 1);   /* gather_bytes kept a frame for it */
        gather_flush(j, &sends, false);
        free(words);
        pthread_mutex_lock(&j->q_lock);
        j->sending = false;
        j->pending_markers -= count;
        pthread_cond_broadcast(&j->sent_cond);
    }
}

/* A beat after JOB_BEAT_MS of quiet, device output within a beat, and the
 * end of a job that failed, wherever it failed. A send in progress holds
 * the send lock; its bytes are its beat, so it is skipped. */
void *beat_main(void *arg)
{
    job *j = arg;
    pthread_mutex_lock(&j->q_lock);
    while (!j->stopping) {
        struct timespec ts = deadline_timespec_in(JOB_BEAT_MS / 4);
        pthread_cond_timedwait(&j->tick_cond, &j->q_lock, &ts);
        bool failed = j->failed, stopping = j->stopping;
        pthread_mutex_unlock(&j->q_lock);
        if (stopping)
            return NULL;
        if (failed) {
            /* Here, not on the job thread, which the driver may hold (a
             * kernel that never ends, a free behind it). */
            job_end(j, false);
        } else {
            forward_output(j);
            if (pthread_mutex_trylock(&j->send_lock) == 0) {
                bool quiet = deadline_now_ms() - j->c.last_send_ms >= JOB_BEAT_MS;
                rig_why why = { "" };
                int rc = quiet ? conn_sendv(&j->c, FRAME_BEAT, NULL, 0, deadline_after(JOB_STALL_MS), &why) : 0;
                pthread_mutex_unlock(&j->send_lock);
                if (rc == RIG_E_CLOSED)
                    job_fail(j, "controller: closed its connection");
                else if (rc < 0)
                    job_fail(j, "controller: %s", why.text);
            }
            mesh_beat(j);
        }
        pthread_mutex_lock(&j->q_lock);
    }
    pthread_mutex_unlock(&j->q_lock);
    return NULL;
}

/* Work is queued but no marker ran for a second: a device whose context
 * has failed (a kernel fault) never runs its markers, so ask each device
 * for its sticky error. A query may wait on the driver; only this thread
 * waits, and it sends nothing (the beat thread sends the abort). */
static void check_devices(job *j)
{
    for (int d = 0; d < j->b->device_count; d++) {
        j->b->drv.fn_cuCtxSetCurrent(j->b->primary[d]);
        CUresult rc = j->b->drv.fn_cuStreamQuery(NULL);
        if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_READY)
            continue;
        const char *name = NULL;
        j->b->drv.fn_cuGetErrorName(rc, &name);
        if (j->last_kernel[d][0])
            job_fail(j, "CUDA:%d: %s in kernel %s", d, name ? name : "error", j->last_kernel[d]);
        else
            job_fail(j, "CUDA:%d: %s", d, name ? name : "error");
        return;
    }
}

void *watch_main(void *arg)
{
    job *j = arg;
    pthread_mutex_lock(&j->q_lock);
    while (!j->stopping && !j->failed) {
        struct timespec ts = deadline_timespec_in(JOB_BEAT_MS / 2);
        pthread_cond_timedwait(&j->tick_cond, &j->q_lock, &ts);
        bool waiting = j->pending_markers > 0 && deadline_now_ms() - j->last_marker_ms >= JOB_BEAT_MS;
        if (j->stopping || j->failed || !waiting)
            continue;
        pthread_mutex_unlock(&j->q_lock);
        check_devices(j);
        pthread_mutex_lock(&j->q_lock);
        j->last_marker_ms = deadline_now_ms();   /* the next look in a second */
    }
    pthread_mutex_unlock(&j->q_lock);
    return NULL;
}

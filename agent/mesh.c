/* The job's mesh (proto/mesh.h): a connection to every other agent of the
 * job, agent i having dialed agents i+1..n and accepted agents 1..i-1, each
 * proven with the job key and the handshake's process numbers. Each
 * connection has a reader that keeps its liveness as the controller's
 * connection does: beats, silence, an abort (the peer's root cause, which
 * fails this job too) and an orderly close (the job is ending). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/job.h"
#include "proto/deadline.h"
#include "proto/handshake.h"
#include "proto/job.h"
#include "proto/mesh.h"
#include "proto/net.h"
#include "proto/rail.h"
#include "proto/text.h"

typedef struct mesh_peer {
    conn c;
    bool up;                    /* proven, its reader running */
    bool closed;                /* it said close: the job is ending there */
    pthread_t reader;
    pthread_mutex_t send_lock;
} mesh_peer;

/* A rail frame waiting for the mesh's sender. */
typedef struct outgoing {
    struct outgoing *next;
    uint32_t peer;
    uint64_t signal;
    void *data;
    size_t len;
} outgoing;

struct agent_mesh {
    job *j;
    /* Rail frames go out on a thread of their own: the driver's callback
     * thread that queues them must never wait on the network. */
    pthread_t sender;
    bool sender_started;
    outgoing *out_head, *out_tail;
    pthread_cond_t out_ready;
    int listen_fd;
    uint16_t port;
    pthread_t acceptor;
    bool acceptor_started;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool joined, ending;
    mesh_join join;                      /* names and addresses, once joined */
    mesh_peer peers[MESH_AGENTS_MAX + 1];   /* by process number */
};

/* The peer's name for a message: its agent name once joined, else its number. */
static const char *peer_name(agent_mesh *m, uint32_t k, char *buf, size_t cap)
{
    if (m->joined && k >= 1 && k <= m->join.n)
        return m->join.agents[k - 1].name;
    snprintf(buf, cap, "agent %u", k);
    return buf;
}

static void *reader_main(void *arg);

/* Makes p the connection to process k and starts its reader. */
static int peer_up(agent_mesh *m, uint32_t k, int fd, rig_why *why)
{
    mesh_peer *p = &m->peers[k];
    if (conn_init(&p->c, fd, JOB_FRAME_LIMIT, why) < 0)
        return -1;
    pthread_mutex_init(&p->send_lock, NULL);
    struct { agent_mesh *m; uint32_t k; } *arg = malloc(sizeof *arg);
    if (!arg) {
        conn_close(&p->c);
        return why_set(why, RIG_E_NOMEM, "no memory for a peer's reader");
    }
    arg->m = m;
    arg->k = k;
    pthread_mutex_lock(&m->lock);
    p->up = true;
    pthread_mutex_unlock(&m->lock);
    if (pthread_create(&p->reader, NULL, reader_main, arg) != 0) {
        free(arg);
        pthread_mutex_lock(&m->lock);
        p->up = false;
        pthread_mutex_unlock(&m->lock);
        conn_close(&p->c);
        return why_set(why, RIG_E_NOMEM, "no thread for a peer's reader");
    }
    pthread_mutex_lock(&m->lock);
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    return 0;
}

static void *reader_main(void *arg)
{
    struct { agent_mesh *m; uint32_t k; } *a = arg;
    agent_mesh *m = a->m;
    uint32_t k = a->k;
    free(arg);
    job *j = m->j;
    mesh_peer *p = &m->peers[k];
    char nbuf[32];
    for (;;) {
        frame f = { 0 };
        rig_why why = { "" };
        int rc = conn_recv_split(&p->c, &f, FRAME_RAIL, RAIL_HEAD, RAIL_HEAD, deadline_after(-1), JOB_SILENCE_MS, &why);
        if (rc == 0 && f.kind == FRAME_RAIL) {
            /* Its bytes go straight where the copy wants them. */
            uint64_t rest = conn_rest(&p->c);
            wire_reader r = wire_reader_init(f.payload, f.len);
            uint64_t signal = wire_get_u64(&r);
            if (r.err || signal == 0)
                rc = why_set(&why, RIG_E_MALFORMED, "a rail frame of %zu bytes without its signal", f.len);
            else
                rc = wire_remaining(&r) ? why_set(&why, RIG_E_MALFORMED, "a rail frame read whole")
                                      : rail_arrive(j, k, signal, &p->c, rest, &why);
            frame_release(&f);
            if (rc == 0)
                continue;
        }
        pthread_mutex_lock(&m->lock);
        bool quiet = m->ending || p->closed;
        const char *name = peer_name(m, k, nbuf, sizeof nbuf);
        pthread_mutex_unlock(&m->lock);
        if (rc < 0) {
            if (!quiet && !job_failed(j)) {
                if (rc == RIG_E_TIMEOUT)
                    job_fail(j, "%s: silent for %d s", name, JOB_SILENCE_MS / 1000);
                else
                    job_fail(j, "%s: %s", name, rc == RIG_E_CLOSED ? "closed its connection" : why.text);
            }
            return NULL;
        }
        switch (f.kind) {
        case FRAME_BEAT:
            break;
        case FRAME_CLOSE:
            pthread_mutex_lock(&m->lock);
            p->closed = true;
            pthread_mutex_unlock(&m->lock);
            break;
        case FRAME_ABORT: {
            wire_reader r = wire_reader_init(f.payload, f.len);
            const uint8_t *s;
            size_t n = wire_get_string(&r, &s, JOB_REASON_MAX);
            char cause[JOB_REASON_MAX + 1] = "";
            /* A peer's text, made safe to log and to pass on like the
             * controller's; its root cause is the job's, with its name. */
            if (!r.err)
                text_printable(cause, sizeof cause, s, n, false);
            job_fail(j, "%s: %s", name, cause[0] ? cause : "aborted");
            break;
        }
        case FRAME_RAIL:
            break;   /* taken above */
        default:
            job_fail(j, "%s: sent a %s message, which agents never send to each other", name,
                     frame_kind_name(f.kind));
        }
        frame_release(&f);
    }
}

static int send_to(agent_mesh *m, uint32_t k, frame_kind kind, const struct iovec *iov, int n, rig_why *why)
{
    mesh_peer *p = &m->peers[k];
    pthread_mutex_lock(&p->send_lock);
    int rc = conn_sendv(&p->c, kind, iov, n, deadline_after(JOB_STALL_MS), why);
    pthread_mutex_unlock(&p->send_lock);
    return rc;
}

static void *rail_sender_main(void *arg)
{
    agent_mesh *m = arg;
    job *j = m->j;
    pthread_mutex_lock(&m->lock);
    for (;;) {
        while (!m->out_head && !m->ending)
            pthread_cond_wait(&m->out_ready, &m->lock);
        outgoing *o = m->out_head;
        if (!o) {
            pthread_mutex_unlock(&m->lock);
            return NULL;
        }
        m->out_head = o->next;
        if (!m->out_head)
            m->out_tail = NULL;
        bool ending = m->ending;
        pthread_mutex_unlock(&m->lock);
        if (!ending && !job_failed(j)) {
            uint8_t head[RAIL_HEAD];
            wire_store_u64(head, o->signal);
            struct iovec iov[2] = { { head, sizeof head }, { o->data, o->len } };
            rig_why why = { "" };
            int rc = send_to(m, o->peer, FRAME_RAIL, iov, o->len ? 2 : 1, &why);
            if (rc < 0) {
                char nbuf[32];
                pthread_mutex_lock(&m->lock);
                const char *name = peer_name(m, o->peer, nbuf, sizeof nbuf);
                pthread_mutex_unlock(&m->lock);
                job_fail(j, "%s: %s", name, rc == RIG_E_CLOSED ? "closed its connection" : why.text);
            }
        }
        if (o->data)
            staging_put(j->b, o->data, o->len);
        free(o);
        pthread_mutex_lock(&m->lock);
    }
}

void mesh_post(job *j, uint32_t peer, uint64_t signal, void *data, size_t len)
{
    agent_mesh *m = j->mesh;
    outgoing *o = m ? malloc(sizeof *o) : NULL;
    if (!o) {
        if (data)
            staging_put(j->b, data, len);
        job_fail(j, "agent: no memory to send a rail");
        return;
    }
    *o = (outgoing){ .peer = peer, .signal = signal, .data = data, .len = len };
    pthread_mutex_lock(&m->lock);
    if (m->out_tail)
        m->out_tail->next = o;
    else
        m->out_head = o;
    m->out_tail = o;
    pthread_cond_signal(&m->out_ready);
    pthread_mutex_unlock(&m->lock);
}

bool mesh_peer_up(job *j, uint32_t peer)
{
    agent_mesh *m = j->mesh;
    if (!m || peer == 0 || peer > MESH_AGENTS_MAX || peer == j->index)
        return false;
    pthread_mutex_lock(&m->lock);
    bool up = m->peers[peer].up && !m->peers[peer].closed;
    pthread_mutex_unlock(&m->lock);
    return up;
}

/* Admits a proven agent before this one (the acceptor's handshake). */
static int admit_peer(void *ctx, uint32_t dialing, uint32_t accepting, char *reason, size_t cap)
{
    agent_mesh *m = ctx;
    if (accepting != m->j->index || dialing == 0 || dialing >= accepting || dialing > MESH_AGENTS_MAX) {
        snprintf(reason, cap, "this is agent %u of the job, which agents 1..%u dial; not %u dialing %u",
                 m->j->index, m->j->index - 1, dialing, accepting);
        return 1;
    }
    pthread_mutex_lock(&m->lock);
    bool taken = m->peers[dialing].up;
    pthread_mutex_unlock(&m->lock);
    if (taken) {
        snprintf(reason, cap, "agent %u is connected already", dialing);
        return 1;
    }
    return 0;
}

static void *acceptor_main(void *arg)
{
    agent_mesh *m = arg;
    for (;;) {
        pthread_mutex_lock(&m->lock);
        bool ending = m->ending;
        pthread_mutex_unlock(&m->lock);
        if (ending)
            return NULL;
        int fd = -1;
        rig_why why = { "" };
        int rc = net_accept(m->listen_fd, 200, &fd, &why);
        if (rc == RIG_E_TIMEOUT)
            continue;
        if (rc < 0) {
            agent_log("mesh: accept: %s", why.text);
            continue;
        }
        net_tune(fd);
        hs_config cfg = { .key = m->j->key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
        hs_peers peers;
        if (hs_accept(fd, &cfg, admit_peer, m, &peers, &why) < 0 || peer_up(m, peers.dialing, fd, &why) < 0) {
            agent_log("mesh: a connection from another agent: %s", why.text);
            close(fd);
        }
    }
}

/* JOB_OP_PEER_LISTEN: listens for the agents before this one on the address
 * the controller reached this agent at. */
void mesh_listen(job *j, wire_reader *r)
{
    if (wire_reader_finish(r)) {
        job_refuse(j, "malformed peer-listen request");
        return;
    }
    if (!j->key) {   /* a job served in process (tests) has no key to prove */
        job_refuse(j, "agent: this job has no key for a mesh");
        return;
    }
    if (j->mesh) {
        uint16_t port = j->mesh->port;
        uint8_t out[2] = { (uint8_t)port, (uint8_t)(port >> 8) };
        job_answer(j, CUDA_SUCCESS, out, 2);
        return;
    }
    agent_mesh *m = calloc(1, sizeof *m);
    if (!m) {
        job_refuse(j, "agent: no memory for the mesh");
        return;
    }
    m->j = j;
    m->listen_fd = -1;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->changed, NULL);
    pthread_cond_init(&m->out_ready, NULL);
    if (rail_open(j) < 0) {
        free(m);
        job_refuse(j, "agent: no page-locked memory for the signals between agents");
        return;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    names_address here = { .port = 0 };
    rig_why why = { "" };
    if (getsockname(j->c.fd, (struct sockaddr *)&ss, &sl) < 0) {
        job_refuse(j, "agent: cannot tell where the controller reached it: %s", strerror(errno));
        free(m);
        return;
    }
    here.ipv6 = ss.ss_family == AF_INET6;
    inet_ntop(ss.ss_family,
              here.ipv6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr : (void *)&((struct sockaddr_in *)&ss)->sin_addr,
              here.host, sizeof here.host);
    if (net_listen(&here, &m->listen_fd, &m->port, &why) < 0) {
        job_refuse(j, "agent: cannot listen for the job's other agents on %s: %s", here.host, why.text);
        free(m);
        return;
    }
    /* Without its sender a rail's frames would wait forever, beats going on. */
    if (pthread_create(&m->sender, NULL, rail_sender_main, m) != 0) {
        close(m->listen_fd);
        free(m);
        job_refuse(j, "agent: no thread to send the job's rails");
        return;
    }
    m->sender_started = true;
    if (pthread_create(&m->acceptor, NULL, acceptor_main, m) != 0) {
        pthread_mutex_lock(&m->lock);
        m->ending = true;
        pthread_cond_broadcast(&m->out_ready);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->sender, NULL);
        close(m->listen_fd);
        free(m);
        job_refuse(j, "agent: no thread to accept the job's other agents");
        return;
    }
    m->acceptor_started = true;
    j->mesh = m;
    uint8_t out[2] = { (uint8_t)m->port, (uint8_t)(m->port >> 8) };
    job_answer(j, CUDA_SUCCESS, out, 2);
}

/* JOB_OP_JOIN: dials the agents after this one, waits for those before it,
 * and answers once connected to every other; refuses naming both machines. */
void mesh_join_request(job *j, const uint8_t *body, size_t len)
{
    agent_mesh *m = j->mesh;
    mesh_join join;
    rig_why why = { "" };
    if (mesh_join_decode(body, len, &join, &why) < 0) {
        job_refuse(j, "%s", why.text);
        return;
    }
    if (!m || join.self != j->index) {
        job_refuse(j, m ? "join: this agent is %u, not %u" : "join before peer-listen", j->index, join.self);
        return;
    }
    pthread_mutex_lock(&m->lock);
    m->join = join;
    m->joined = true;
    pthread_mutex_unlock(&m->lock);
    const char *me = join.agents[join.self - 1].name;
    for (uint32_t k = join.self + 1; k <= join.n; k++) {
        const mesh_agent *a = &join.agents[k - 1];
        names_address addr;
        int fd = -1;
        char text[NAMES_TEXT_MAX];
        snprintf(text, sizeof text, strchr(a->host, ':') ? "[%s]:%u" : "%s:%u", a->host, a->port);
        hs_config cfg = { .key = j->key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
        if (names_parse_address(text, strlen(text), &addr, &why) < 0 ||
            net_connect(&addr, HS_TIMEOUT_MS, &fd, &why) < 0 || hs_dial(fd, &cfg, join.self, k, &why) < 0 ||
            peer_up(m, k, fd, &why) < 0) {
            if (fd >= 0 && !m->peers[k].up)
                close(fd);
            job_refuse(j, "%s: cannot reach %s at %s: %s", me, a->name, text, why.text);
            return;
        }
    }
    int64_t until = deadline_after(HS_TIMEOUT_MS);
    pthread_mutex_lock(&m->lock);
    for (uint32_t k = 1; k < join.self; k++)
        while (!m->peers[k].up && deadline_now_ms() < until) {
            struct timespec ts = deadline_timespec_in(50);
            pthread_cond_timedwait(&m->changed, &m->lock, &ts);
        }
    uint32_t missing = 0;
    for (uint32_t k = 1; k < join.self && !missing; k++)
        if (!m->peers[k].up)
            missing = k;
    pthread_mutex_unlock(&m->lock);
    if (missing) {
        job_refuse(j, "%s: %s did not connect within %d s", me, join.agents[missing - 1].name,
                   HS_TIMEOUT_MS / 1000);
        return;
    }
    job_answer(j, CUDA_SUCCESS, NULL, 0);
}

void mesh_beat(job *j)
{
    agent_mesh *m = j->mesh;
    if (!m)
        return;
    for (uint32_t k = 1; k <= MESH_AGENTS_MAX; k++) {
        mesh_peer *p = &m->peers[k];
        pthread_mutex_lock(&m->lock);
        bool up = p->up;
        pthread_mutex_unlock(&m->lock);
        if (!up || pthread_mutex_trylock(&p->send_lock) != 0)
            continue;   /* a peer busy sending: its bytes are its beat */
        rig_why why = { "" };
        int rc = 0;
        if (deadline_now_ms() - p->c.last_send_ms >= JOB_BEAT_MS)
            rc = conn_sendv(&p->c, FRAME_BEAT, NULL, 0, deadline_after(JOB_STALL_MS), &why);
        pthread_mutex_unlock(&p->send_lock);
        if (rc < 0) {
            char nbuf[32];
            pthread_mutex_lock(&m->lock);
            const char *name = peer_name(m, k, nbuf, sizeof nbuf);
            pthread_mutex_unlock(&m->lock);
            job_fail(j, "%s: %s", name, rc == RIG_E_CLOSED ? "closed its connection" : why.text);
        }
    }
}

/* Tells every peer how the job ends here: the root cause (an abort) or an
 * orderly close; then no more is sent, and the readers go quiet. */
void mesh_end(job *j, const char *cause)
{
    agent_mesh *m = j->mesh;
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    bool already = m->ending;
    m->ending = true;
    pthread_mutex_unlock(&m->lock);
    pthread_cond_broadcast(&m->out_ready);
    if (already)
        return;
    /* Streams waiting for a peer's signal must drain: none will come. */
    rail_release(j);
    uint8_t buf[JOB_REASON_MAX + 4];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    if (cause) {
        size_t n = strlen(cause);
        wire_put_string(&w, cause, n < JOB_REASON_MAX ? n : JOB_REASON_MAX);
    }
    struct iovec iov = { buf, w.off };
    for (uint32_t k = 1; k <= MESH_AGENTS_MAX; k++) {
        if (!m->peers[k].up)
            continue;
        rig_why ignored;
        send_to(m, k, cause ? FRAME_ABORT : FRAME_CLOSE, &iov, cause ? 1 : 0, &ignored);
        shutdown(m->peers[k].c.fd, SHUT_WR);
    }
}

/* Stops the acceptor and the readers and frees the mesh: for a job that
 * ends inside a longer-lived process (a worker just exits). */
void mesh_free(job *j)
{
    agent_mesh *m = j->mesh;
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->ending = true;
    pthread_cond_broadcast(&m->out_ready);
    pthread_mutex_unlock(&m->lock);
    rail_release(j);
    if (m->acceptor_started)
        pthread_join(m->acceptor, NULL);
    if (m->sender_started)
        pthread_join(m->sender, NULL);
    while (m->out_head) {
        outgoing *o = m->out_head;
        m->out_head = o->next;
        staging_put(j->b, o->data, o->len);
        free(o);
    }
    for (uint32_t k = 1; k <= MESH_AGENTS_MAX; k++) {
        mesh_peer *p = &m->peers[k];
        if (!p->up)
            continue;
        shutdown(p->c.fd, SHUT_RDWR);
        pthread_join(p->reader, NULL);
        conn_close(&p->c);
        pthread_mutex_destroy(&p->send_lock);
    }
    if (m->listen_fd >= 0)
        close(m->listen_fd);
    pthread_cond_destroy(&m->changed);
    pthread_cond_destroy(&m->out_ready);
    pthread_mutex_destroy(&m->lock);
    free(m);
    j->mesh = NULL;
}

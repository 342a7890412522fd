/* The handshake: byte-for-byte against Python's vectors, every decoder under
 * truncation and bit flips, and live exchanges between two processes over
 * loopback TCP (success, wrong keys, versions, refusals, silence, half a
 * message). */
#include <criterion/criterion.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/deadline.h"
#include "proto/fdio.h"
#include "proto/net.h"
#include "proto/handshake.h"
#include "proto/key.h"
#include "tests/support.h"

#define VECTORS RIG_SOURCE_DIR "/tests/vectors/handshake.txt"

static support_record *recs;
static size_t nrecs;

static void load(void)
{
    nrecs = support_load_vectors(VECTORS, &recs);
}

static void unload(void)
{
    support_free_vectors(recs, nrecs);
}

Test(handshake_vectors, proofs_and_bytes_match_python, .init = load, .fini = unload)
{
    int checked = 0;
    size_t key_sizes_seen[3] = { 0 };
    for (size_t i = 0; i < nrecs; i++) {
        support_record *r = &recs[i];
        if (strcmp(r->type, "handshake") != 0)
            continue;
        size_t klen, n;
        uint8_t *keyb = support_field_bytes(r, "key", &klen);
        uint8_t *an = support_field_bytes(r, "accepting_nonce", &n);
        uint8_t *dn = support_field_bytes(r, "dialing_nonce", &n);
        uint8_t *pd = support_field_bytes(r, "proof_dialing", &n);
        uint8_t *pa = support_field_bytes(r, "proof_accepting", &n);
        size_t glen, dlen, rlen;
        uint8_t *greeting = support_field_bytes(r, "greeting", &glen);
        uint8_t *dial = support_field_bytes(r, "dial", &dlen);
        uint8_t *reply = support_field_bytes(r, "reply", &rlen);
        uint32_t dialing = (uint32_t)support_field_u64(r, "dialing");
        uint32_t accepting = (uint32_t)support_field_u64(r, "accepting");
        if (klen == 16) key_sizes_seen[0] = 1;
        if (klen == 32) key_sizes_seen[1] = 1;
        if (klen == 4096) key_sizes_seen[2] = 1;

        rig_key key;
        cr_assert_eq(key_from_bytes(&key, keyb, klen, NULL), 0);
        uint8_t digest[32], proof[HS_PROOF];
        key_digest(&key, digest);
        hs_proof(digest, HS_DIALING, dialing, accepting, an, dn, proof);
        cr_assert_arr_eq(proof, pd, HS_PROOF, "dialing proof, key of %zu bytes", klen);
        hs_proof(digest, HS_ACCEPTING, dialing, accepting, an, dn, proof);
        cr_assert_arr_eq(proof, pa, HS_PROOF, "accepting proof, key of %zu bytes", klen);

        uint8_t buf[HS_GREETING_MAX];
        cr_assert_eq(hs_encode_greeting(buf, sizeof buf, HS_VERSION, an), (int)glen);
        cr_assert_arr_eq(buf, greeting, glen);
        hs_dial_msg m = { .dialing = dialing, .accepting = accepting };
        memcpy(m.nonce, dn, HS_NONCE);
        memcpy(m.proof, pd, HS_PROOF);
        cr_assert_eq(hs_encode_dial(buf, sizeof buf, &m), (int)dlen);
        cr_assert_arr_eq(buf, dial, dlen);
        cr_assert_eq(hs_encode_reply(buf, sizeof buf, pa), (int)rlen);
        cr_assert_arr_eq(buf, reply, rlen);

        hs_greeting g;
        cr_assert_eq(hs_decode_greeting(greeting, glen, &g, NULL), 0);
        cr_assert(!g.refused && g.version == HS_VERSION);
        cr_assert_arr_eq(g.nonce, an, HS_NONCE);
        hs_dial_msg dm;
        cr_assert_eq(hs_decode_dial(dial, dlen, &dm, NULL), 0);
        cr_assert(dm.dialing == dialing && dm.accepting == accepting);
        cr_assert_arr_eq(dm.proof, pd, HS_PROOF);
        hs_reply rep;
        cr_assert_eq(hs_decode_reply(reply, rlen, &rep, NULL), 0);
        cr_assert_arr_eq(rep.proof, pa, HS_PROOF);

        free(keyb); free(an); free(dn); free(pd); free(pa);
        free(greeting); free(dial); free(reply);
        checked++;
    }
    cr_assert_eq(checked, 5);
    cr_assert(key_sizes_seen[0] && key_sizes_seen[1] && key_sizes_seen[2],
              "keys of 16, 32 and 4096 bytes must be covered");
}

Test(handshake_vectors, refusals_match_python, .init = load, .fini = unload)
{
    int checked = 0;
    for (size_t i = 0; i < nrecs; i++) {
        support_record *r = &recs[i];
        if (strcmp(r->type, "refusal") != 0)
            continue;
        size_t rlen, glen, plen;
        uint8_t *reason = support_field_bytes(r, "reason", &rlen);
        uint8_t *greeting = support_field_bytes(r, "greeting", &glen);
        uint8_t *reply = support_field_bytes(r, "reply", &plen);
        char *text = calloc(1, rlen + 1);
        memcpy(text, reason, rlen);

        uint8_t buf[HS_GREETING_MAX];
        cr_assert_eq(hs_encode_greeting_refusal(buf, sizeof buf, HS_VERSION, text), (int)glen);
        cr_assert_arr_eq(buf, greeting, glen);
        cr_assert_eq(hs_encode_reply_refusal(buf, sizeof buf, text), (int)plen);
        cr_assert_arr_eq(buf, reply, plen);

        hs_greeting g;
        cr_assert_eq(hs_decode_greeting(greeting, glen, &g, NULL), 0);
        cr_assert(g.refused);
        cr_assert_eq(g.reason_len, rlen);
        cr_assert(rlen == 0 || memcmp(g.reason, reason, rlen) == 0);
        hs_reply rep;
        cr_assert_eq(hs_decode_reply(reply, plen, &rep, NULL), 0);
        cr_assert(rep.refused && rep.reason_len == rlen);
        free(reason); free(greeting); free(reply); free(text);
        checked++;
    }
    cr_assert_eq(checked, 3);
}

Test(handshake_codec, long_reason_cut_and_announced_long_malformed)
{
    char *reason = malloc(5001);
    memset(reason, 'r', 5000);
    reason[5000] = '\0';
    uint8_t buf[HS_GREETING_MAX];
    int n = hs_encode_reply_refusal(buf, sizeof buf, reason);
    cr_assert_eq(n, 1 + 4 + HS_REASON_MAX, "a reason is cut to 4096 bytes");
    hs_reply rep;
    cr_assert_eq(hs_decode_reply(buf, (size_t)n, &rep, NULL), 0);
    cr_assert_eq(rep.reason_len, HS_REASON_MAX);

    /* One announced longer than 4096 is malformed. */
    uint8_t bad[1 + 4 + HS_REASON_MAX + 1];
    bad[0] = 1;
    bad[1] = (HS_REASON_MAX + 1) & 0xff;
    bad[2] = (HS_REASON_MAX + 1) >> 8;
    bad[3] = bad[4] = 0;
    memset(bad + 5, 'r', HS_REASON_MAX + 1);
    rig_why why;
    cr_assert_eq(hs_decode_reply(bad, sizeof bad, &rep, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "longer than 4096"), "%s", why.text);
    free(reason);
}

Test(handshake_codec, not_a_rig_peer)
{
    const char http[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    hs_greeting g;
    rig_why why;
    cr_assert_eq(hs_decode_greeting((const uint8_t *)http, sizeof http - 1, &g, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "not a rig agent"), "%s", why.text);
}

static void check_greeting(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    hs_greeting g;
    rig_why why;
    int rc = hs_decode_greeting(p, n, &g, &why);
    if (rc == 0 && g.refused)
        cr_assert(g.reason_len <= HS_REASON_MAX && g.reason + g.reason_len <= p + n);
    cr_assert(rc == 0 || rc == RIG_E_TRUNCATED || rc == RIG_E_MALFORMED || rc == RIG_E_TRAILING, "rc %d", rc);
}

static void check_dial(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    hs_dial_msg m;
    int rc = hs_decode_dial(p, n, &m, NULL);
    cr_assert(rc == 0 ? n == HS_DIAL_SIZE : (rc == RIG_E_TRUNCATED), "rc %d n %zu", rc, n);
}

static void check_reply(const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    hs_reply r;
    int rc = hs_decode_reply(p, n, &r, NULL);
    cr_assert(rc == 0 || rc == RIG_E_TRUNCATED || rc == RIG_E_MALFORMED || rc == RIG_E_TRAILING, "rc %d", rc);
}

Test(handshake_codec, every_truncation_and_bit_flip)
{
    uint8_t nonce[HS_NONCE], buf[HS_GREETING_MAX];
    memset(nonce, 0x5a, sizeof nonce);
    int n = hs_encode_greeting(buf, sizeof buf, HS_VERSION, nonce);
    support_each_mutation(buf, (size_t)n, check_greeting, NULL);
    n = hs_encode_greeting_refusal(buf, sizeof buf, HS_VERSION, "busy: serving a job");
    support_each_mutation(buf, (size_t)n, check_greeting, NULL);

    hs_dial_msg m = { .dialing = 0, .accepting = 1 };
    memset(m.nonce, 1, sizeof m.nonce);
    memset(m.proof, 2, sizeof m.proof);
    n = hs_encode_dial(buf, sizeof buf, &m);
    support_each_mutation(buf, (size_t)n, check_dial, NULL);

    n = hs_encode_reply(buf, sizeof buf, m.proof);
    support_each_mutation(buf, (size_t)n, check_reply, NULL);
    n = hs_encode_reply_refusal(buf, sizeof buf, "wrong key");
    support_each_mutation(buf, (size_t)n, check_reply, NULL);
}

/* ---- live exchanges between two processes ---- */

static rig_key key_a, key_b;

static void make_keys(void)
{
    cr_assert_eq(sodium_init() >= 0, 1);
    cr_assert_eq(key_generate(&key_a, NULL), 0);
    cr_assert_eq(key_from_bytes(&key_b, "another job's key, 34 bytes long", 32, NULL), 0);
}

/* What a peer process is told to do, and the pipe it reports on. */
typedef struct peer_job {
    int listen_fd;
    uint16_t port;
    int report;
    const rig_key *key;
    uint32_t version;
    int timeout_ms;
    enum { ACCEPT, DIAL, REFUSE, SILENT, HALF_GREETING, BAD_PROOF, HALF_DIAL, ADMIT_NONE } act;
} peer_job;

/* The child's report: its code and its error line. */
typedef struct peer_report {
    int rc;
    hs_peers peers;
    char why[RIG_WHY_MAX];
} peer_report;

static int admit_none(void *ctx, uint32_t dialing, uint32_t accepting, char *reason, size_t cap)
{
    (void)ctx;
    snprintf(reason, cap, "busy: process %u may not join as %u", dialing, accepting);
    return 1;
}

static int peer_main(void *arg)
{
    peer_job *j = arg;
    hs_config cfg = { .key = j->key, .version = j->version, .timeout_ms = j->timeout_ms };
    peer_report rep = { 0 };
    rig_why why = { "" };
    int fd;
    if (j->act == DIAL || j->act == HALF_DIAL) {
        fd = support_connect(j->port);
    } else {
        fd = accept(j->listen_fd, NULL, NULL);
    }
    uint8_t buf[HS_GREETING_MAX];
    switch (j->act) {
    case ACCEPT:
        rep.rc = hs_accept(fd, &cfg, NULL, NULL, &rep.peers, &why);
        break;
    case ADMIT_NONE:
        rep.rc = hs_accept(fd, &cfg, admit_none, NULL, &rep.peers, &why);
        break;
    case DIAL:
        rep.rc = hs_dial(fd, &cfg, 0, 1, &why);
        break;
    case REFUSE:
        rep.rc = hs_refuse(fd, &cfg, "busy: serving a job for 10.0.0.2", &why);
        break;
    case SILENT:
        sleep(3);
        break;
    case HALF_GREETING: {
        uint8_t nonce[HS_NONCE] = { 0 };
        hs_encode_greeting(buf, sizeof buf, HS_VERSION, nonce);
        rep.rc = (int)write(fd, buf, 10) == 10 ? 0 : -1;
        break;
    }
    case HALF_DIAL: {
        uint8_t greeting[HS_MAGIC_LEN + 4 + 1 + HS_NONCE];
        rep.rc = fdio_read_full(fd, greeting, sizeof greeting, deadline_after(2000), "greeting", &why);
        memset(buf, 0, 40);
        if (rep.rc == 0 && write(fd, buf, 40) != 40)
            rep.rc = -1;
        break;
    }
    case BAD_PROOF: {
        /* A fake acceptor that takes any proof and answers with garbage. */
        uint8_t nonce[HS_NONCE] = { 0 };
        int n = hs_encode_greeting(buf, sizeof buf, HS_VERSION, nonce);
        rep.rc = fdio_write_full(fd, buf, (size_t)n, deadline_after(2000), "greeting", &why);
        if (rep.rc == 0)
            rep.rc = fdio_read_full(fd, buf, HS_DIAL_SIZE, deadline_after(2000), "dial", &why);
        uint8_t junk[HS_PROOF];
        memset(junk, 0x77, sizeof junk);
        n = hs_encode_reply(buf, sizeof buf, junk);
        if (rep.rc == 0)
            rep.rc = fdio_write_full(fd, buf, (size_t)n, deadline_after(2000), "reply", &why);
        sleep(1);
        break;
    }
    }
    snprintf(rep.why, sizeof rep.why, "%s", why.text);
    if (write(j->report, &rep, sizeof rep) != sizeof rep)
        return 3;
    close(fd);
    return 0;
}

/* Starts a peer; the test's own end then runs in this process. */
static pid_t start_peer(peer_job *j, int *report_fd)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    j->report = p[1];
    if (j->act != DIAL && j->act != HALF_DIAL)
        j->listen_fd = support_listen(&j->port);
    if (!j->version)
        j->version = HS_VERSION;
    if (!j->timeout_ms)
        j->timeout_ms = 3000;
    pid_t pid = support_spawn(peer_main, j);
    close(p[1]);
    *report_fd = p[0];
    return pid;
}

static peer_report finish_peer(pid_t pid, int report_fd)
{
    peer_report rep;
    memset(&rep, 0, sizeof rep);
    ssize_t n = read(report_fd, &rep, sizeof rep);
    cr_assert_eq(n, (ssize_t)sizeof rep, "the peer process reported nothing");
    cr_assert_eq(support_wait(pid, 10000), 0, "the peer process failed");
    close(report_fd);
    return rep;
}

static hs_config cfg_for(const rig_key *k, int timeout_ms)
{
    return (hs_config){ .key = k, .version = HS_VERSION, .timeout_ms = timeout_ms };
}

TestSuite(handshake_live, .init = make_keys, .timeout = 30);

Test(handshake_live, dial_to_accepting_process)
{
    peer_job j = { .key = &key_a, .act = ACCEPT };
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd = support_connect(j.port);
    hs_config cfg = cfg_for(&key_a, 3000);
    rig_why why = { "" };
    cr_assert_eq(hs_dial(fd, &cfg, 0, 7, &why), 0, "%s", why.text);
    peer_report rep = finish_peer(pid, rfd);
    cr_assert_eq(rep.rc, 0, "%s", rep.why);
    cr_assert_eq(rep.peers.dialing, 0);
    cr_assert_eq(rep.peers.accepting, 7);
    close(fd);
}

Test(handshake_live, accept_from_dialing_process)
{
    uint16_t port;
    peer_job j = { .key = &key_a, .act = DIAL };
    j.listen_fd = support_listen(&port);
    j.port = port;
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd;
    rig_why why = { "" };
    cr_assert_eq(net_accept(j.listen_fd, 3000, &fd, &why), 0, "%s", why.text);
    hs_config cfg = cfg_for(&key_a, 3000);
    hs_peers peers;
    cr_assert_eq(hs_accept(fd, &cfg, NULL, NULL, &peers, &why), 0, "%s", why.text);
    cr_assert(peers.dialing == 0 && peers.accepting == 1);
    peer_report rep = finish_peer(pid, rfd);
    cr_assert_eq(rep.rc, 0, "%s", rep.why);
    close(fd);
}

Test(handshake_live, wrong_key_at_dialing_end_is_refused_with_reason)
{
    peer_job j = { .key = &key_a, .act = ACCEPT };
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd = support_connect(j.port);
    hs_config cfg = cfg_for(&key_b, 3000);
    rig_why why;
    cr_assert_eq(hs_dial(fd, &cfg, 0, 1, &why), RIG_E_REFUSED);
    cr_assert(strstr(why.text, "refused: wrong key"), "%s", why.text);
    peer_report rep = finish_peer(pid, rfd);
    cr_assert_eq(rep.rc, RIG_E_AUTH);
    cr_assert(strstr(rep.why, "does not match the job key"), "%s", rep.why);
    close(fd);
}

Test(handshake_live, wrong_key_at_accepting_end_is_refused_with_reason)
{
    uint16_t port;
    peer_job j = { .key = &key_a, .act = DIAL };
    j.listen_fd = support_listen(&port);
    j.port = port;
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd;
    cr_assert_eq(net_accept(j.listen_fd, 3000, &fd, NULL), 0);
    hs_config cfg = cfg_for(&key_b, 3000);
    rig_why why;
    cr_assert_eq(hs_accept(fd, &cfg, NULL, NULL, NULL, &why), RIG_E_AUTH);
    cr_assert(strstr(why.text, "wrong key"), "%s", why.text);
    peer_report rep = finish_peer(pid, rfd);
    cr_assert_eq(rep.rc, RIG_E_REFUSED);
    cr_assert(strstr(rep.why, "wrong key"), "%s", rep.why);
    close(fd);
}

Test(handshake_live, accepting_proof_that_does_not_match)
{
    peer_job j = { .key = &key_a, .act = BAD_PROOF };
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd = support_connect(j.port);
    hs_config cfg = cfg_for(&key_a, 3000);
    rig_why why;
    cr_assert_eq(hs_dial(fd, &cfg, 0, 1, &why), RIG_E_AUTH);
    cr_assert(strstr(why.text, "accepting end's proof does not match"), "%s", why.text);
    close(fd);
    finish_peer(pid, rfd);
}

Test(handshake_live, other_version_names_both)
{
    peer_job j = { .key = &key_a, .act = ACCEPT, .version = 7 };
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd = support_connect(j.port);
    hs_config cfg = cfg_for(&key_a, 3000);
    rig_why why;
    cr_assert_eq(hs_dial(fd, &cfg, 0, 1, &why), RIG_E_VERSION);
    cr_assert(strstr(why.text, "version 7, this end version 1"), "%s", why.text);
    close(fd);
    peer_report rep = finish_peer(pid, rfd);
    cr_assert_eq(rep.rc, RIG_E_CLOSED, "the accepting end sees the dialing end leave: %s", rep.why);
}

Test(handshake_live, refusal_before_proof)
{
    peer_job j = { .key = &key_a, .act = REFUSE };
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd = support_connect(j.port);
    hs_config cfg = cfg_for(&key_a, 3000);
    rig_why why;
    cr_assert_eq(hs_dial(fd, &cfg, 0, 1, &why), RIG_E_REFUSED);
    cr_assert_str_eq(why.text, "refused: busy: serving a job for 10.0.0.2");
    close(fd);
    peer_report rep = finish_peer(pid, rfd);
    cr_assert_eq(rep.rc, 0, "%s", rep.why);
}

Test(handshake_live, admit_refuses_with_reason)
{
    peer_job j = { .key = &key_a, .act = ADMIT_NONE };
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd = support_connect(j.port);
    hs_config cfg = cfg_for(&key_a, 3000);
    rig_why why;
    cr_assert_eq(hs_dial(fd, &cfg, 0, 2, &why), RIG_E_REFUSED);
    cr_assert_str_eq(why.text, "refused: busy: process 0 may not join as 2");
    close(fd);
    peer_report rep = finish_peer(pid, rfd);
    cr_assert_eq(rep.rc, RIG_E_REFUSED);
}

Test(handshake_live, silent_accepting_end_times_out)
{
    peer_job j = { .key = &key_a, .act = SILENT };
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd = support_connect(j.port);
    hs_config cfg = cfg_for(&key_a, 300);
    rig_why why;
    int64_t start = deadline_now_ms();
    cr_assert_eq(hs_dial(fd, &cfg, 0, 1, &why), RIG_E_TIMEOUT);
    int64_t took = deadline_now_ms() - start;
    cr_assert_geq(took, 290, "the bound must be waited out, not cut short");
    cr_assert(strstr(why.text, "timed out waiting for the greeting"), "%s", why.text);
    close(fd);
    finish_peer(pid, rfd);
}

Test(handshake_live, silent_dialing_end_times_out)
{
    uint16_t port;
    int lfd = support_listen(&port);
    int fd = support_connect(port), afd;
    cr_assert_eq(net_accept(lfd, 3000, &afd, NULL), 0);
    hs_config cfg = cfg_for(&key_a, 300);
    rig_why why;
    cr_assert_eq(hs_accept(afd, &cfg, NULL, NULL, NULL, &why), RIG_E_TIMEOUT);
    cr_assert(strstr(why.text, "timed out waiting for the dialing message"), "%s", why.text);
    close(fd);
    close(afd);
    close(lfd);
}

Test(handshake_live, half_a_greeting_then_close)
{
    peer_job j = { .key = &key_a, .act = HALF_GREETING };
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd = support_connect(j.port);
    hs_config cfg = cfg_for(&key_a, 3000);
    rig_why why;
    cr_assert_eq(hs_dial(fd, &cfg, 0, 1, &why), RIG_E_CLOSED);
    cr_assert(strstr(why.text, "closed after 10 of the 12 bytes of the greeting"), "%s", why.text);
    close(fd);
    finish_peer(pid, rfd);
}

Test(handshake_live, half_a_dialing_message_then_close)
{
    uint16_t port;
    peer_job j = { .key = &key_a, .act = HALF_DIAL };
    j.listen_fd = support_listen(&port);
    j.port = port;
    int rfd;
    pid_t pid = start_peer(&j, &rfd);
    int fd;
    cr_assert_eq(net_accept(j.listen_fd, 3000, &fd, NULL), 0);
    hs_config cfg = cfg_for(&key_a, 3000);
    rig_why why;
    cr_assert_eq(hs_accept(fd, &cfg, NULL, NULL, NULL, &why), RIG_E_CLOSED);
    cr_assert(strstr(why.text, "closed after 40 of the 72 bytes of the dialing message"), "%s", why.text);
    close(fd);
    finish_peer(pid, rfd);
}

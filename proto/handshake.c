/* The handshake: message codecs, proofs, and both ends over a socket. */
#include "proto/handshake.h"
#include "proto/text.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/deadline.h"
#include "proto/fdio.h"
#include "proto/hmac.h"
#include "proto/random.h"
#include "proto/wire.h"

void hs_proof(const uint8_t key_digest[static 32], hs_role role, uint32_t dialing,
              uint32_t accepting, const uint8_t accepting_nonce[static HS_NONCE],
              const uint8_t dialing_nonce[static HS_NONCE], uint8_t out[static HS_PROOF])
{
    const char *label = role == HS_DIALING ? HS_LABEL_DIALING : HS_LABEL_ACCEPTING;
    uint8_t numbers[8];
    wire_store_u32(numbers, dialing);
    wire_store_u32(numbers + 4, accepting);

    hmac_state st;
    hmac_init(&st, key_digest, 32);
    hmac_update(&st, label, strlen(label));
    hmac_update(&st, numbers, sizeof numbers);
    hmac_update(&st, accepting_nonce, HS_NONCE);
    hmac_update(&st, dialing_nonce, HS_NONCE);
    hmac_final(&st, out);
}

static int finish_encode(const wire_writer *w)
{
    return w->err ? w->err : (int)w->off;
}

static size_t reason_len(const char *reason)
{
    return reason ? strnlen(reason, HS_REASON_MAX) : 0;
}

int hs_encode_greeting(uint8_t *out, size_t cap, uint32_t version, const uint8_t nonce[static HS_NONCE])
{
    wire_writer w = wire_writer_init(out, cap);
    wire_put_bytes(&w, HS_MAGIC, HS_MAGIC_LEN);
    wire_put_u32(&w, version);
    wire_put_u8(&w, 0);
    wire_put_bytes(&w, nonce, HS_NONCE);
    return finish_encode(&w);
}

int hs_encode_greeting_refusal(uint8_t *out, size_t cap, uint32_t version, const char *reason)
{
    wire_writer w = wire_writer_init(out, cap);
    wire_put_bytes(&w, HS_MAGIC, HS_MAGIC_LEN);
    wire_put_u32(&w, version);
    wire_put_u8(&w, 1);
    wire_put_string(&w, reason ? reason : "", reason_len(reason));
    return finish_encode(&w);
}

int hs_encode_dial(uint8_t *out, size_t cap, const hs_dial_msg *m)
{
    wire_writer w = wire_writer_init(out, cap);
    wire_put_bytes(&w, m->nonce, HS_NONCE);
    wire_put_u32(&w, m->dialing);
    wire_put_u32(&w, m->accepting);
    wire_put_bytes(&w, m->proof, HS_PROOF);
    return finish_encode(&w);
}

int hs_encode_reply(uint8_t *out, size_t cap, const uint8_t proof[static HS_PROOF])
{
    wire_writer w = wire_writer_init(out, cap);
    wire_put_u8(&w, 0);
    wire_put_bytes(&w, proof, HS_PROOF);
    return finish_encode(&w);
}

int hs_encode_reply_refusal(uint8_t *out, size_t cap, const char *reason)
{
    wire_writer w = wire_writer_init(out, cap);
    wire_put_u8(&w, 1);
    wire_put_string(&w, reason ? reason : "", reason_len(reason));
    return finish_encode(&w);
}

/* Turns a reader's error into a line about the message being decoded. */
static int decode_error(int err, const char *what, rig_why *why)
{
    switch (err) {
    case RIG_E_TRUNCATED:
        return why_set(why, err, "%s is cut short", what);
    case RIG_E_TRAILING:
        return why_set(why, err, "%s has bytes after its end", what);
    case RIG_E_TOO_LONG:
        return why_set(why, RIG_E_MALFORMED, "%s carries a reason longer than %d bytes", what,
                       HS_REASON_MAX);
    default:
        return why_set(why, RIG_E_MALFORMED, "%s is malformed", what);
    }
}

/* Reads the tail shared by greetings and replies: u8 0 + fixed bytes, or
 * u8 1 + reason. */
static int decode_verdict(wire_reader *r, int *refused, uint8_t *fixed, const uint8_t **reason,
                          size_t *reason_n, const char *what, rig_why *why)
{
    uint8_t status = wire_get_u8(r);
    *reason = NULL;
    *reason_n = 0;
    *refused = 0;
    if (!r->err && status == 0) {
        wire_get_bytes(r, fixed, 32);
    } else if (!r->err && status == 1) {
        *refused = 1;
        *reason_n = wire_get_string(r, reason, HS_REASON_MAX);
    } else if (!r->err) {
        return why_set(why, RIG_E_MALFORMED, "%s has status %u, neither 0 nor 1", what, status);
    }
    int rc = wire_reader_finish(r);
    return rc ? decode_error(rc, what, why) : 0;
}

int hs_decode_greeting_head(const uint8_t *p, size_t n, uint32_t *version, rig_why *why)
{
    wire_reader r = wire_reader_init(p, n);
    const uint8_t *magic = wire_get_view(&r, HS_MAGIC_LEN);
    if (magic && memcmp(magic, HS_MAGIC, HS_MAGIC_LEN) != 0)
        return why_set(why, RIG_E_MALFORMED,
                       "the peer is not a rig agent: its first bytes are not \"rig-job\\n\"");
    *version = wire_get_u32(&r);
    return r.err ? decode_error(r.err, "the greeting", why) : 0;
}

int hs_decode_greeting(const uint8_t *p, size_t n, hs_greeting *g, rig_why *why)
{
    memset(g, 0, sizeof *g);
    size_t head = HS_MAGIC_LEN + 4;
    int rc = hs_decode_greeting_head(p, n < head ? n : head, &g->version, why);
    if (rc < 0)
        return rc;
    wire_reader r = wire_reader_init(p + head, n - head);
    return decode_verdict(&r, &g->refused, g->nonce, &g->reason, &g->reason_len, "the greeting", why);
}

int hs_decode_dial(const uint8_t *p, size_t n, hs_dial_msg *m, rig_why *why)
{
    wire_reader r = wire_reader_init(p, n);
    wire_get_bytes(&r, m->nonce, HS_NONCE);
    m->dialing = wire_get_u32(&r);
    m->accepting = wire_get_u32(&r);
    wire_get_bytes(&r, m->proof, HS_PROOF);
    int rc = wire_reader_finish(&r);
    return rc ? decode_error(rc, "the dialing message", why) : 0;
}

int hs_decode_reply(const uint8_t *p, size_t n, hs_reply *rep, rig_why *why)
{
    memset(rep, 0, sizeof *rep);
    wire_reader r = wire_reader_init(p, n);
    return decode_verdict(&r, &rep->refused, rep->proof, &rep->reason, &rep->reason_len,
                          "the accepting reply", why);
}

/* Reads a greeting or reply from fd: the fixed head, then the proof or the
 * reason it announces, into buf; returns the total length or a RIG_E_*. */
static int read_verdict_message(int fd, uint8_t *buf, size_t head, int64_t deadline,
                                const char *what, rig_why *why)
{
    int rc = fdio_read_full(fd, buf, head, deadline, what, why);
    if (rc < 0)
        return rc;
    size_t total = head;
    if (buf[head - 1] == 0) {
        rc = fdio_read_full(fd, buf + total, 32, deadline, what, why);
        total += 32;
    } else if (buf[head - 1] == 1) {
        rc = fdio_read_full(fd, buf + total, 4, deadline, what, why);
        if (rc < 0)
            return rc;
        uint32_t len = wire_load_u32(buf + total);
        total += 4;
        if (len > HS_REASON_MAX)
            return why_set(why, RIG_E_MALFORMED, "%s announces a reason of %u bytes, above %d",
                           what, len, HS_REASON_MAX);
        rc = fdio_read_full(fd, buf + total, len, deadline, what, why);
        total += len;
    }
    /* Any other status byte is left for the decoder to name. */
    return rc < 0 ? rc : (int)total;
}

static void proof_key(const hs_config *cfg, uint8_t digest[static 32])
{
    key_digest(cfg->key, digest);
}

int hs_accept(int fd, const hs_config *cfg, hs_admit_fn admit, void *admit_ctx, hs_peers *out,
              rig_why *why)
{
    int rc;
    uint8_t digest[32], our_nonce[HS_NONCE], buf[HS_REPLY_MAX];
    uint8_t expected[HS_PROOF], greeting[HS_MAGIC_LEN + 4 + 1 + HS_NONCE];
    char reason[HS_REASON_MAX + 1];
    hs_dial_msg dial;

    if (random_bytes(our_nonce, sizeof our_nonce) < 0)
        return why_set(why, RIG_E_IO, "no random bytes for a nonce: %s", strerror(errno));
    int n = hs_encode_greeting(greeting, sizeof greeting, cfg->version, our_nonce);
    rc = fdio_write_full(fd, greeting, (size_t)n, deadline_after(cfg->timeout_ms), "the greeting", why);
    if (rc < 0)
        goto out;

    rc = fdio_read_full(fd, buf, HS_DIAL_SIZE, deadline_after(cfg->timeout_ms),
                        "the dialing message", why);
    if (rc < 0)
        goto out;
    rc = hs_decode_dial(buf, HS_DIAL_SIZE, &dial, why);
    if (rc < 0)
        goto out;

    proof_key(cfg, digest);
    hs_proof(digest, HS_DIALING, dial.dialing, dial.accepting, our_nonce, dial.nonce, expected);
    if (crypto_verify_32(expected, dial.proof) != 0) {
        snprintf(reason, sizeof reason, "wrong key: the proof of process %u does not match this end's job key",
                 dial.dialing);
        n = hs_encode_reply_refusal(buf, sizeof buf, reason);
        fdio_write_full(fd, buf, (size_t)n, deadline_after(cfg->timeout_ms), "the refusal", NULL);
        rc = why_set(why, RIG_E_AUTH, "refused process %u: its proof does not match the job key (wrong key)",
                     dial.dialing);
        goto out;
    }

    if (admit) {
        reason[0] = '\0';
        if (admit(admit_ctx, dial.dialing, dial.accepting, reason, sizeof reason) != 0) {
            reason[sizeof reason - 1] = '\0';
            if (!reason[0])
                snprintf(reason, sizeof reason, "process %u may not join", dial.dialing);
            n = hs_encode_reply_refusal(buf, sizeof buf, reason);
            fdio_write_full(fd, buf, (size_t)n, deadline_after(cfg->timeout_ms), "the refusal", NULL);
            char shown[256];
            text_printable(shown, sizeof shown, (const uint8_t *)reason, strlen(reason), false);
            rc = why_set(why, RIG_E_REFUSED, "refused process %u: %s", dial.dialing, shown);
            goto out;
        }
    }

    hs_proof(digest, HS_ACCEPTING, dial.dialing, dial.accepting, our_nonce, dial.nonce, expected);
    n = hs_encode_reply(buf, sizeof buf, expected);
    rc = fdio_write_full(fd, buf, (size_t)n, deadline_after(cfg->timeout_ms), "the proof", why);
    if (rc < 0)
        goto out;
    if (out)
        *out = (hs_peers){ .dialing = dial.dialing, .accepting = dial.accepting };
    rc = 0;
out:
    explicit_bzero(digest, sizeof digest);
    return rc;
}

int hs_dial(int fd, const hs_config *cfg, uint32_t self, uint32_t peer, rig_why *why)
{
    int rc;
    uint8_t digest[32], buf[HS_GREETING_MAX], expected[HS_PROOF];
    hs_greeting g;
    hs_reply rep;
    hs_dial_msg dial = { .dialing = self, .accepting = peer };
    char shown[HS_REASON_MAX + 1];
    int64_t deadline = deadline_after(cfg->timeout_ms);

    /* The version sits before the verdict so that a peer of another version
     * is named as such whatever follows. */
    size_t head = HS_MAGIC_LEN + 4;
    rc = fdio_read_full(fd, buf, head, deadline, "the greeting", why);
    if (rc < 0)
        return rc;
    rc = hs_decode_greeting_head(buf, head, &g.version, why);
    if (rc < 0)
        return rc;
    if (g.version != cfg->version)
        return why_set(why, RIG_E_VERSION, "the peer speaks rig-job version %u, this end version %u",
                       g.version, cfg->version);
    int n = read_verdict_message(fd, buf + head, 1, deadline, "the greeting", why);
    if (n < 0)
        return n;
    rc = hs_decode_greeting(buf, head + (size_t)n, &g, why);
    if (rc < 0)
        return rc;
    if (g.refused) {
        text_printable(shown, sizeof shown, g.reason, g.reason_len, false);
        return why_set(why, RIG_E_REFUSED, "refused: %s", shown);
    }

    if (random_bytes(dial.nonce, sizeof dial.nonce) < 0)
        return why_set(why, RIG_E_IO, "no random bytes for a nonce: %s", strerror(errno));
    proof_key(cfg, digest);
    hs_proof(digest, HS_DIALING, self, peer, g.nonce, dial.nonce, dial.proof);
    n = hs_encode_dial(buf, sizeof buf, &dial);
    rc = fdio_write_full(fd, buf, (size_t)n, deadline_after(cfg->timeout_ms), "the proof", why);
    if (rc < 0)
        goto out;

    n = read_verdict_message(fd, buf, 1, deadline_after(cfg->timeout_ms), "the accepting reply", why);
    if (n < 0) {
        rc = n;
        goto out;
    }
    rc = hs_decode_reply(buf, (size_t)n, &rep, why);
    if (rc < 0)
        goto out;
    if (rep.refused) {
        text_printable(shown, sizeof shown, rep.reason, rep.reason_len, false);
        rc = why_set(why, RIG_E_REFUSED, "refused: %s", shown);
        goto out;
    }
    hs_proof(digest, HS_ACCEPTING, self, peer, g.nonce, dial.nonce, expected);
    if (crypto_verify_32(expected, rep.proof) != 0) {
        rc = why_set(why, RIG_E_AUTH, "the accepting end's proof does not match the job key (wrong key)");
        goto out;
    }
    rc = 0;
out:
    explicit_bzero(digest, sizeof digest);
    return rc;
}

int hs_refuse(int fd, const hs_config *cfg, const char *reason, rig_why *why)
{
    uint8_t buf[HS_GREETING_MAX];
    int n = hs_encode_greeting_refusal(buf, sizeof buf, cfg->version, reason);
    if (n < 0)
        return why_set(why, n, "cannot encode the refusal");
    int rc = fdio_write_full(fd, buf, (size_t)n, deadline_after(cfg->timeout_ms), "the refusal", why);
    if (rc < 0)
        return rc;
    /* End our side, then wait for the peer to end its own, so that closing
     * with unread bytes cannot turn the refusal into a reset. */
    shutdown(fd, SHUT_WR);
    int64_t deadline = deadline_after(cfg->timeout_ms < 2000 ? cfg->timeout_ms : 2000);
    for (;;) {
        uint8_t sink[512];
        if (fdio_read_full(fd, sink, 1, deadline, "the peer's close", NULL) < 0)
            break;
    }
    return 0;
}

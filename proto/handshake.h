/* The handshake that opens every connection of a job (docs/wire.md "Handshake"):
 *   accepting: "rig-job\n", u32 version, u8 0, nonce[32]   (or u8 1, string why)
 *   dialing:   nonce[32], u32 self, u32 peer, proof[32]
 *   accepting: u8 0, proof[32]                             (or u8 1, string why)
 * Proofs are HMAC-BLAKE2b-256 keyed by BLAKE2b-256(key) over label ||
 * u32 dialing || u32 accepting || accepting nonce || dialing nonce. */
#ifndef RIG_PROTO_HANDSHAKE_H
#define RIG_PROTO_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"
#include "proto/key.h"

#define HS_VERSION 1
#define HS_MAGIC "rig-job\n"
#define HS_MAGIC_LEN 8
#define HS_NONCE 32
#define HS_PROOF 32
#define HS_REASON_MAX 4096
#define HS_TIMEOUT_MS 10000

#define HS_LABEL_DIALING "rig-job dialing"
#define HS_LABEL_ACCEPTING "rig-job accepting"

/* Largest encodings: a greeting or reply carrying a refusal of HS_REASON_MAX. */
#define HS_GREETING_MAX (HS_MAGIC_LEN + 4 + 1 + 4 + HS_REASON_MAX)
#define HS_DIAL_SIZE (HS_NONCE + 4 + 4 + HS_PROOF)
#define HS_REPLY_MAX (1 + 4 + HS_REASON_MAX)

typedef enum hs_role { HS_DIALING, HS_ACCEPTING } hs_role;

/* Computes the proof a role gives, from the job key's digest (key_digest). */
void hs_proof(const uint8_t key_digest[static 32], hs_role role, uint32_t dialing,
              uint32_t accepting, const uint8_t accepting_nonce[static HS_NONCE],
              const uint8_t dialing_nonce[static HS_NONCE], uint8_t out[static HS_PROOF]);

/* A decoded first or last message: either admitted (with its nonce or
 * proof) or refused (with a reason, not NUL-terminated, inside the input). */
typedef struct hs_greeting {
    uint32_t version;
    int refused;
    uint8_t nonce[HS_NONCE];
    const uint8_t *reason;
    size_t reason_len;
} hs_greeting;

typedef struct hs_dial_msg {
    uint8_t nonce[HS_NONCE];
    uint32_t dialing, accepting;
    uint8_t proof[HS_PROOF];
} hs_dial_msg;

typedef struct hs_reply {
    int refused;
    uint8_t proof[HS_PROOF];
    const uint8_t *reason;
    size_t reason_len;
} hs_reply;

/* Encoders return the number of bytes written to out (cap bytes available),
 * or a negative RIG_E_* when cap is too small. A reason longer than
 * HS_REASON_MAX is cut to it. */
int hs_encode_greeting(uint8_t *out, size_t cap, uint32_t version, const uint8_t nonce[static HS_NONCE]);
int hs_encode_greeting_refusal(uint8_t *out, size_t cap, uint32_t version, const char *reason);
int hs_encode_dial(uint8_t *out, size_t cap, const hs_dial_msg *m);
int hs_encode_reply(uint8_t *out, size_t cap, const uint8_t proof[static HS_PROOF]);
int hs_encode_reply_refusal(uint8_t *out, size_t cap, const char *reason);

/* Decoders take exactly one whole message: RIG_E_TRUNCATED when it is cut
 * short, RIG_E_TRAILING when bytes follow, RIG_E_MALFORMED otherwise. The
 * version is returned, not judged: the dialing end compares it. */
int hs_decode_greeting(const uint8_t *p, size_t n, hs_greeting *g, rig_why *why);
/* The greeting's first 12 bytes (magic, version): what every version shares. */
int hs_decode_greeting_head(const uint8_t *p, size_t n, uint32_t *version, rig_why *why);
int hs_decode_dial(const uint8_t *p, size_t n, hs_dial_msg *m, rig_why *why);
int hs_decode_reply(const uint8_t *p, size_t n, hs_reply *r, rig_why *why);

typedef struct hs_config {
    const rig_key *key;
    uint32_t version;      /* HS_VERSION; tests speak others */
    int timeout_ms;        /* bound on each reply awaited: HS_TIMEOUT_MS */
} hs_config;

/* The accepting end's verdict on a proven peer: return 0 to admit, or write a
 * reason (NUL-terminated, within cap) and return nonzero to refuse. */
typedef int (*hs_admit_fn)(void *ctx, uint32_t dialing, uint32_t accepting, char *reason,
                           size_t cap);

/* Who joined: the process numbers of both ends as the dialing end named them. */
typedef struct hs_peers {
    uint32_t dialing, accepting;
} hs_peers;

/* Accepting end on a connected socket: greet, check the dialing proof in
 * constant time (a wrong key is refused with a reason and gives RIG_E_AUTH),
 * ask admit (NULL admits everyone; a refusal gives RIG_E_REFUSED), then
 * prove ourselves. */
int hs_accept(int fd, const hs_config *cfg, hs_admit_fn admit, void *admit_ctx, hs_peers *out,
              rig_why *why);

/* Dialing end: read the greeting, prove, check the accepting end's proof.
 * RIG_E_REFUSED with the peer's reason, RIG_E_VERSION naming both versions,
 * RIG_E_AUTH when the accepting end's proof does not match. */
int hs_dial(int fd, const hs_config *cfg, uint32_t self, uint32_t peer, rig_why *why);

/* Accepting end refusing before any proof (busy, shutting down): sends the
 * refusal greeting, ends its side, and waits briefly for the peer to close so
 * the reason is not lost to a reset. */
int hs_refuse(int fd, const hs_config *cfg, const char *reason, rig_why *why);

#endif

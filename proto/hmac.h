/* HMAC-BLAKE2b-256 per RFC 2104 (128-byte blocks, 32-byte BLAKE2b), built on
 * libsodium's unkeyed BLAKE2b, which has no HMAC of its own. */
#ifndef RIG_PROTO_HMAC_H
#define RIG_PROTO_HMAC_H

#include <sodium.h>
#include <stddef.h>
#include <stdint.h>

#define HMAC_SIZE 32
#define HMAC_BLOCK 128

typedef struct hmac_state {
    crypto_generichash_blake2b_state inner;
    uint8_t outer_pad[HMAC_BLOCK];
} hmac_state;

/* Starts a MAC under key (any length; longer than a block is hashed first). */
void hmac_init(hmac_state *st, const uint8_t *key, size_t keylen);
void hmac_update(hmac_state *st, const void *p, size_t n);
/* Writes the 32-byte MAC and wipes the state. */
void hmac_final(hmac_state *st, uint8_t out[static HMAC_SIZE]);

/* BLAKE2b with a 32-byte digest, unkeyed. */
void blake2b_256(const void *p, size_t n, uint8_t out[static 32]);

#endif

/* RFC 2104: H((K0 ^ opad) || H((K0 ^ ipad) || m)), K0 the key zero-padded to
 * the block (or its hash when longer than a block). */
#include "proto/hmac.h"

#include <string.h>

void blake2b_256(const void *p, size_t n, uint8_t out[static 32])
{
    crypto_generichash_blake2b(out, 32, p, n, NULL, 0);
}

void hmac_init(hmac_state *st, const uint8_t *key, size_t keylen)
{
    uint8_t k0[HMAC_BLOCK] = { 0 };
    if (keylen > HMAC_BLOCK)
        blake2b_256(key, keylen, k0);
    else if (keylen)
        memcpy(k0, key, keylen);

    uint8_t inner_pad[HMAC_BLOCK];
    for (size_t i = 0; i < HMAC_BLOCK; i++) {
        inner_pad[i] = k0[i] ^ 0x36;
        st->outer_pad[i] = k0[i] ^ 0x5c;
    }
    crypto_generichash_blake2b_init(&st->inner, NULL, 0, HMAC_SIZE);
    crypto_generichash_blake2b_update(&st->inner, inner_pad, sizeof inner_pad);
    explicit_bzero(k0, sizeof k0);
    explicit_bzero(inner_pad, sizeof inner_pad);
}

void hmac_update(hmac_state *st, const void *p, size_t n)
{
    crypto_generichash_blake2b_update(&st->inner, p, n);
}

void hmac_final(hmac_state *st, uint8_t out[static HMAC_SIZE])
{
    uint8_t inner_hash[HMAC_SIZE];
    crypto_generichash_blake2b_final(&st->inner, inner_hash, sizeof inner_hash);

    crypto_generichash_blake2b_state outer;
    crypto_generichash_blake2b_init(&outer, NULL, 0, HMAC_SIZE);
    crypto_generichash_blake2b_update(&outer, st->outer_pad, sizeof st->outer_pad);
    crypto_generichash_blake2b_update(&outer, inner_hash, sizeof inner_hash);
    crypto_generichash_blake2b_final(&outer, out, HMAC_SIZE);

    explicit_bzero(inner_hash, sizeof inner_hash);
    explicit_bzero(st, sizeof *st);
}

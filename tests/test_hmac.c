/* HMAC-BLAKE2b-256 against Python's hmac + hashlib.blake2b, including keys
 * shorter than, equal to and longer than the 128-byte block. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/hmac.h"
#include "tests/support.h"

#define VECTORS RIG_SOURCE_DIR "/tests/vectors/handshake.txt"

Test(hmac, matches_python)
{
    support_record *recs;
    size_t n = support_load_vectors(VECTORS, &recs);
    int checked = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(recs[i].type, "hmac") != 0)
            continue;
        size_t klen, mlen, maclen;
        uint8_t *key = support_field_bytes(&recs[i], "key", &klen);
        uint8_t *msg = support_field_bytes(&recs[i], "msg", &mlen);
        uint8_t *expect = support_field_bytes(&recs[i], "mac", &maclen);
        cr_assert_eq(maclen, HMAC_SIZE);

        uint8_t got[HMAC_SIZE];
        hmac_state st;
        hmac_init(&st, key, klen);
        hmac_update(&st, msg, mlen);
        hmac_final(&st, got);
        cr_assert_arr_eq(got, expect, HMAC_SIZE, "key of %zu bytes, message of %zu", klen, mlen);

        /* Fed in two pieces, the MAC is the same. */
        hmac_init(&st, key, klen);
        hmac_update(&st, msg, mlen / 2);
        hmac_update(&st, msg + mlen / 2, mlen - mlen / 2);
        hmac_final(&st, got);
        cr_assert_arr_eq(got, expect, HMAC_SIZE);
        free(key);
        free(msg);
        free(expect);
        checked++;
    }
    cr_assert_eq(checked, 7, "every hmac vector must be checked");
    support_free_vectors(recs, n);
}

Test(hmac, blake2b_256_known_answer)
{
    /* BLAKE2b-256 of the empty string, from the BLAKE2 reference. */
    const char *hex = "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8";
    uint8_t *expect;
    size_t n;
    cr_assert_eq(support_unhex(hex, &expect, &n), 0);
    uint8_t got[32];
    blake2b_256("", 0, got);
    cr_assert_arr_eq(got, expect, 32);
    free(expect);
}

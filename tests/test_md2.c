/* MD2 against RFC 1319's test suite (A.5), fed whole and byte by byte, and
 * HMAC-MD2's construction checked against MD2 itself. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "shim/md2.h"

static const struct {
    const char *msg;
    const char *digest;
} rfc1319[] = {
    { "", "8350e5a3e24c153df2275c9f80692773" },
    { "a", "32ec01ec4a6dac72c0ab96fb34c0b5d1" },
    { "abc", "da853b0d3f88d99b30283a69e6ded6bb" },
    { "message digest", "ab4f496bfb2a530b219ff33031fe06b0" },
    { "abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b" },
    { "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
      "da33def2a42df13975352846c30338cd" },
    { "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
      "d5976f79d83d3a0dc9806c3c66f3efd8" },
};

static void hex(const uint8_t d[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

Test(md2, rfc1319_suite_whole)
{
    for (size_t i = 0; i < sizeof rfc1319 / sizeof rfc1319[0]; i++) {
        uint8_t d[16];
        char h[33];
        md2(rfc1319[i].msg, strlen(rfc1319[i].msg), d);
        hex(d, h);
        cr_assert_str_eq(h, rfc1319[i].digest, "MD2(\"%s\")", rfc1319[i].msg);
    }
}

Test(md2, rfc1319_suite_in_pieces)
{
    for (size_t i = 0; i < sizeof rfc1319 / sizeof rfc1319[0]; i++) {
        const char *m = rfc1319[i].msg;
        for (size_t step = 1; step <= 17; step++) {
            md2_ctx c;
            md2_init(&c);
            for (size_t off = 0; off < strlen(m); off += step) {
                size_t n = strlen(m) - off < step ? strlen(m) - off : step;
                md2_update(&c, m + off, n);
            }
            uint8_t d[16];
            char h[33];
            md2_final(&c, d);
            hex(d, h);
            cr_assert_str_eq(h, rfc1319[i].digest, "MD2(\"%s\") in pieces of %zu", m, step);
        }
    }
}

/* HMAC(K, m) = H((K ^ opad) || H((K ^ ipad) || m)) with 16-byte blocks. */
static void hmac_by_hand(const uint8_t k[16], const void *m, size_t n, uint8_t out[16])
{
    uint8_t buf[16 + 256];
    uint8_t inner[16];
    for (int i = 0; i < 16; i++)
        buf[i] = k[i] ^ 0x36;
    memcpy(buf + 16, m, n);
    md2(buf, 16 + n, inner);
    for (int i = 0; i < 16; i++)
        buf[i] = k[i] ^ 0x5c;
    memcpy(buf + 16, inner, 16);
    md2(buf, 32, out);
}

Test(md2, hmac_is_rfc2104_over_md2)
{
    static const uint8_t key[16] = { 0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                                     0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F };
    uint8_t msg[76];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 7 + 1);
    uint8_t a[16], b[16];
    hmac_md2(key, 16, msg, sizeof msg, a);
    hmac_by_hand(key, msg, sizeof msg, b);
    cr_assert_arr_eq(a, b, 16);

    /* A short key is zero-padded; a long key is hashed first. */
    uint8_t padded[16] = { 1, 2, 3 };
    hmac_md2(padded, 3, "abc", 3, a);
    hmac_by_hand(padded, "abc", 3, b);
    cr_assert_arr_eq(a, b, 16);
    uint8_t longkey[40], hashed[16];
    memset(longkey, 0xa5, sizeof longkey);
    md2(longkey, sizeof longkey, hashed);
    hmac_md2(longkey, sizeof longkey, "abc", 3, a);
    hmac_by_hand(hashed, "abc", 3, b);
    cr_assert_arr_eq(a, b, 16);
}

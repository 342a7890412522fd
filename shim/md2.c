/* MD2, RFC 1319, and HMAC over it (RFC 2104 with MD2's 16-byte block). */
#include "shim/md2.h"

#include <string.h>

/* The permutation of 0..255 built from the digits of pi (RFC 1319, 3.2). */
static const uint8_t S[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,
    98,  167, 5,   243, 192, 199, 115, 140, 152, 147, 43,  217, 188, 76,  130, 202,
    30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,  138, 23,  229, 18,
    190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122,
    169, 104, 121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,
    128, 127, 93,  154, 90,  144, 50,  39,  53,  62,  204, 231, 191, 247, 151, 3,
    255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,  170, 198,
    79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241,
    69,  157, 112, 89,  100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,
    27,  96,  37,  173, 174, 176, 185, 246, 28,  70,  97,  105, 52,  64,  126, 15,
    85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,
    106, 220, 55,  200, 108, 193, 171, 250, 36,  225, 123, 8,   12,  189, 177, 74,
    120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254, 59,  0,   29,  57,
    242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,
    49,  68,  80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20,
};

/* Mixes one 16-byte block into the state and the checksum (RFC 1319, 3.3-3.4). */
static void block(md2_ctx *c, const uint8_t m[16])
{
    uint8_t l = c->checksum[15];
    for (int j = 0; j < 16; j++) {
        c->state[16 + j] = m[j];
        c->state[32 + j] = (uint8_t)(m[j] ^ c->state[j]);
        l = c->checksum[j] ^= S[m[j] ^ l];
    }
    uint8_t t = 0;
    for (int j = 0; j < 18; j++) {
        for (int k = 0; k < 48; k++)
            t = c->state[k] ^= S[t];
        t = (uint8_t)(t + j);
    }
}

void md2_init(md2_ctx *c)
{
    memset(c, 0, sizeof *c);
}

void md2_update(md2_ctx *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        size_t n = 16 - c->used;
        if (n > len)
            n = len;
        memcpy(c->buf + c->used, p, n);
        c->used += n;
        p += n;
        len -= n;
        if (c->used == 16) {
            block(c, c->buf);
            c->used = 0;
        }
    }
}

void md2_final(md2_ctx *c, uint8_t out[static 16])
{
    /* Pad with i bytes of value i (1..16), then append the checksum. */
    uint8_t pad[16];
    size_t n = 16 - c->used;
    memset(pad, (int)n, n);
    md2_update(c, pad, n);
    uint8_t sum[16];
    memcpy(sum, c->checksum, 16);
    md2_update(c, sum, 16);
    memcpy(out, c->state, 16);
}

void md2(const void *data, size_t len, uint8_t out[static 16])
{
    md2_ctx c;
    md2_init(&c);
    md2_update(&c, data, len);
    md2_final(&c, out);
}

void hmac_md2(const void *key, size_t keylen, const void *data, size_t len, uint8_t out[static 16])
{
    uint8_t k[16] = { 0 };
    if (keylen > 16)
        md2(key, keylen, k);
    else if (keylen > 0)
        memcpy(k, key, keylen);
    uint8_t pad[16];
    uint8_t inner[16];
    md2_ctx c;
    for (int i = 0; i < 16; i++)
        pad[i] = k[i] ^ 0x36;
    md2_init(&c);
    md2_update(&c, pad, 16);
    md2_update(&c, data, len);
    md2_final(&c, inner);
    for (int i = 0; i < 16; i++)
        pad[i] = k[i] ^ 0x5c;
    md2_init(&c);
    md2_update(&c, pad, 16);
    md2_update(&c, inner, 16);
    md2_final(&c, out);
}

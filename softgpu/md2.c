/* HMAC-MD2 (RFC 1319's MD2 under RFC 2104's HMAC, 16-byte blocks): the
 * hash of the CUDA runtime's integrity check (integrity.c). The shim has
 * its own copy: softgpu depends on nothing else of rig's. */
#include "softgpu/driver.h"

#include <string.h>

/* RFC 1319's permutation of 0..255 from the digits of pi. */
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

typedef struct md2 {
    uint8_t x[48], sum[16], buf[16];
    size_t used;
} md2;

static void md2_block(md2 *c, const uint8_t m[16])
{
    uint8_t l = c->sum[15];
    for (int j = 0; j < 16; j++) {
        c->x[16 + j] = m[j];
        c->x[32 + j] = (uint8_t)(m[j] ^ c->x[j]);
        l = c->sum[j] ^= S[m[j] ^ l];
    }
    uint8_t t = 0;
    for (int j = 0; j < 18; j++) {
        for (int k = 0; k < 48; k++)
            t = c->x[k] ^= S[t];
        t = (uint8_t)(t + j);
    }
}

static void md2_add(md2 *c, const uint8_t *p, size_t n)
{
    while (n > 0) {
        size_t k = 16 - c->used < n ? 16 - c->used : n;
        memcpy(c->buf + c->used, p, k);
        c->used += k;
        p += k;
        n -= k;
        if (c->used == 16) {
            md2_block(c, c->buf);
            c->used = 0;
        }
    }
}

static void md2_end(md2 *c, uint8_t out[16])
{
    uint8_t pad[16];
    size_t k = 16 - c->used;   /* 1..16 bytes, each of value k */
    memset(pad, (int)k, k);
    md2_add(c, pad, k);
    uint8_t sum[16];
    memcpy(sum, c->sum, 16);
    md2_add(c, sum, 16);
    memcpy(out, c->x, 16);
}

void soft_hmac_md2(const uint8_t key[16], const void *data, size_t len, uint8_t out[16])
{
    uint8_t ipad[16], opad[16], inner[16];
    for (int i = 0; i < 16; i++) {
        ipad[i] = key[i] ^ 0x36;
        opad[i] = key[i] ^ 0x5c;
    }
    md2 c = { 0 };
    md2_add(&c, ipad, 16);
    md2_add(&c, data, len);
    md2_end(&c, inner);
    c = (md2){ 0 };
    md2_add(&c, opad, 16);
    md2_add(&c, inner, 16);
    md2_end(&c, out);
}

/* MD2 (RFC 1319) and HMAC-MD2 (RFC 2104 over MD2, 16-byte blocks): the
 * hash of the CUDA runtime's integrity check (export table 7). */
#ifndef RIG_SHIM_MD2_H
#define RIG_SHIM_MD2_H

#include <stddef.h>
#include <stdint.h>

typedef struct md2_ctx {
    uint8_t state[48];
    uint8_t checksum[16];
    uint8_t buf[16];
    size_t used;   /* bytes in buf */
} md2_ctx;

void md2_init(md2_ctx *c);
void md2_update(md2_ctx *c, const void *data, size_t len);
/* Writes the 16-byte digest; the context must be initialised again to reuse. */
void md2_final(md2_ctx *c, uint8_t out[static 16]);
/* One-shot MD2 of data. */
void md2(const void *data, size_t len, uint8_t out[static 16]);

/* HMAC-MD2 keyed by key (hashed first when longer than 16 bytes). */
void hmac_md2(const void *key, size_t keylen, const void *data, size_t len, uint8_t out[static 16]);

#endif

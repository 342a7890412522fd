/* Job keys: 16..4096 secret bytes shared by the processes of one job. The
 * key never crosses the wire and never appears in an error message. */
#ifndef RIG_PROTO_KEY_H
#define RIG_PROTO_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

#define KEY_MIN 16
#define KEY_MAX 4096
#define KEY_GENERATED 32
#define KEY_HEX_LEN (2 * KEY_GENERATED)

typedef struct rig_key {
    size_t len;
    uint8_t bytes[KEY_MAX];
} rig_key;

/* Copies n bytes into k; RIG_E_INVALID (naming the length) outside 16..4096. */
int key_from_bytes(rig_key *k, const void *p, size_t n, rig_why *why);

/* Reads a key file in one open: a regular file owned by this user with no
 * group or other access, 16..4096 bytes. A FIFO is refused without waiting
 * for a writer. Errors name the file. */
int key_read_file(rig_key *k, const char *path, rig_why *why);

/* Parses RIG_REMOTE_KEY: exactly 64 hex characters (either case). */
int key_from_hex(rig_key *k, const char *hex, rig_why *why);

/* Reads "HEX\n" from fd one byte at a time (what follows the line is not
 * ours to read) and parses it as key_from_hex does; the line is wiped.
 * RIG_E_CLOSED when fd ends first, RIG_E_TOO_LONG past 64 digits. */
int key_read_hex_line(int fd, rig_key *k, rig_why *why);

/* Writes a 32-byte key's 64 lowercase hex digits and a NUL into out. */
int key_to_hex(const rig_key *k, char out[static KEY_HEX_LEN + 1], rig_why *why);

/* 32 random bytes from the system's generator. */
int key_generate(rig_key *k, rig_why *why);

/* BLAKE2b-256 of the key: what the handshake's proofs are keyed by. */
void key_digest(const rig_key *k, uint8_t out[static 32]);

/* Zeroes the key; NULL is fine. */
void key_wipe(rig_key *k);

#endif

/* Shared helpers for rig's Criterion tests: files, hex, vectors, the
 * truncation-and-bit-flip walk, loopback sockets and child processes. */
#ifndef RIG_TESTS_SUPPORT_H
#define RIG_TESTS_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Whole file, malloc'd with a NUL after it; NULL when unreadable. */
char *support_read_file(const char *path, size_t *len);

/* The number after "FIELD:" in /proc/PID/status (VmRSS in kB, Threads),
 * or -1. */
long support_proc_status(pid_t pid, const char *field);

/* Reads fd to its end into buf[have..cap - 1), keeping buf NUL-terminated;
 * returns the bytes now in buf. */
size_t support_read_rest(int fd, char *buf, size_t have, size_t cap);

/* The file once it holds text (a log line written a moment later), or as
 * it is after timeout_ms; malloc'd, NULL when unreadable. */
char *support_wait_file_text(const char *path, const char *text, int timeout_ms);

/* Decodes hex into a malloc'd buffer; -1 on a bad digit or odd length. */
int support_unhex(const char *hex, uint8_t **out, size_t *n);

#define SUPPORT_FIELDS_MAX 16
/* One record of a tests/vectors file: a type line, "name hex-or-number"
 * lines, then "end". */
typedef struct support_record {
    char type[32];
    int nfields;
    char name[SUPPORT_FIELDS_MAX][32];
    char *text[SUPPORT_FIELDS_MAX];   /* the value as written */
} support_record;

/* Loads every record of a vectors file; returns the count (aborts the test on errors). */
size_t support_load_vectors(const char *path, support_record **out);
void support_free_vectors(support_record *r, size_t n);
/* The field's value decoded from hex (malloc'd) or as a number. */
uint8_t *support_field_bytes(const support_record *r, const char *name, size_t *n);
uint64_t support_field_u64(const support_record *r, const char *name);

/* Calls check on every proper prefix and every single-bit flip of valid,
 * each handed over in an exact-size heap copy so ASan sees any over-read. */
typedef void (*support_check_fn)(const uint8_t *p, size_t n, void *ctx);
void support_each_mutation(const uint8_t *valid, size_t n, support_check_fn check, void *ctx);

/* A loopback listening socket on an ephemeral port. */
int support_listen(uint16_t *port);
int support_connect(uint16_t port);

/* Runs fn(arg) in a child that exits with its return value. */
pid_t support_spawn(int (*fn)(void *), void *arg);
/* Exit status of the child, or -1 if it had to be killed after timeout_ms. */
int support_wait(pid_t pid, int timeout_ms);

#endif

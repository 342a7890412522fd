/* Test helpers; see support.h. */
#include "tests/support.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *support_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap)
            buf = realloc(buf, (cap *= 2) + 1);
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

long support_proc_status(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = strlen(field);
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

size_t support_read_rest(int fd, char *buf, size_t have, size_t cap)
{
    for (;;) {
        ssize_t n = read(fd, buf + have, cap - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
    }
    return have;
}

char *support_wait_file_text(const char *path, const char *text, int timeout_ms)
{
    char *got = NULL;
    for (int waited = 0;; waited += 100) {
        free(got);
        got = support_read_file(path, NULL);
        if ((got && strstr(got, text)) || waited >= timeout_ms)
            return got;
        usleep(100 * 1000);
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int support_unhex(const char *hex, uint8_t **out, size_t *n)
{
    size_t len = strlen(hex);
    if (len % 2)
        return -1;
    uint8_t *b = malloc(len / 2 ? len / 2 : 1);
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b);
            return -1;
        }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    *out = b;
    *n = len / 2;
    return 0;
}

size_t support_load_vectors(const char *path, support_record **out)
{
    char *text = support_read_file(path, NULL);
    cr_assert_not_null(text, "cannot read %s", path);
    size_t cap = 16, n = 0;
    support_record *recs = calloc(cap, sizeof *recs);
    support_record *cur = NULL;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (!cur) {
            if (n == cap)
                recs = realloc(recs, (cap *= 2) * sizeof *recs);
            cur = &recs[n];
            memset(cur, 0, sizeof *cur);
            snprintf(cur->type, sizeof cur->type, "%s", line);
            continue;
        }
        if (strcmp(line, "end") == 0) {
            n++;
            cur = NULL;
            continue;
        }
        char *space = strchr(line, ' ');
        cr_assert_not_null(space, "%s: line without a value: %.40s", path, line);
        cr_assert_lt(cur->nfields, SUPPORT_FIELDS_MAX);
        *space = '\0';
        snprintf(cur->name[cur->nfields], sizeof cur->name[0], "%s", line);
        cur->text[cur->nfields] = strdup(space + 1);
        cur->nfields++;
    }
    cr_assert_null(cur, "%s: last record has no end", path);
    free(text);
    *out = recs;
    return n;
}

void support_free_vectors(support_record *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int f = 0; f < r[i].nfields; f++)
            free(r[i].text[f]);
    free(r);
}

static const char *field(const support_record *r, const char *name)
{
    for (int f = 0; f < r->nfields; f++)
        if (strcmp(r->name[f], name) == 0)
            return r->text[f];
    cr_assert_fail("record %s has no field %s", r->type, name);
    return NULL;
}

uint8_t *support_field_bytes(const support_record *r, const char *name, size_t *n)
{
    uint8_t *b;
    cr_assert_eq(support_unhex(field(r, name), &b, n), 0, "field %s is not hex", name);
    return b;
}

uint64_t support_field_u64(const support_record *r, const char *name)
{
    return strtoull(field(r, name), NULL, 10);
}

void support_each_mutation(const uint8_t *valid, size_t n, support_check_fn check, void *ctx)
{
    for (size_t len = 0; len < n; len++) {
        uint8_t *copy = malloc(len);
        if (len)
            memcpy(copy, valid, len);
        check(copy, len, ctx);
        free(copy);
    }
    for (size_t bit = 0; bit < n * 8; bit++) {
        uint8_t *copy = malloc(n);
        memcpy(copy, valid, n);
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        check(copy, n, ctx);
        free(copy);
    }
}

int support_listen(uint16_t *port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(s, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(s, 8), 0);
    socklen_t sl = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &sl);
    *port = ntohs(a.sin_port);
    return s;
}

int support_connect(uint16_t port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(s, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    return s;
}

pid_t support_spawn(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(fn(arg));
    return pid;
}

int support_wait(pid_t pid, int timeout_ms)
{
    struct timespec step = { 0, 5 * 1000 * 1000 };
    for (int waited = 0;; waited += 5) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (waited >= timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&step, NULL);
    }
}

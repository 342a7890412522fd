/* Job keys from bytes, files, hex and the system's random generator. */
#include "proto/key.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/hmac.h"
#include "proto/random.h"

int key_from_bytes(rig_key *k, const void *p, size_t n, rig_why *why)
{
    if (n < KEY_MIN || n > KEY_MAX)
        return why_set(why, RIG_E_INVALID, "a key is %d to %d bytes, this one is %zu",
                       KEY_MIN, KEY_MAX, n);
    memcpy(k->bytes, p, n);
    k->len = n;
    return 0;
}

static const char *file_type_name(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

int key_read_file(rig_key *k, const char *path, rig_why *why)
{
    int rc = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return why_set(why, RIG_E_INVALID, "key file %s: %s", path, strerror(errno));

    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = why_set(why, RIG_E_INVALID, "key file %s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = why_set(why, RIG_E_INVALID, "key file %s is %s, not a regular file", path,
                     file_type_name(st.st_mode));
        goto out;
    }
    if (st.st_uid != geteuid()) {
        rc = why_set(why, RIG_E_INVALID, "key file %s is owned by uid %u, not by this user (uid %u)",
                     path, (unsigned)st.st_uid, (unsigned)geteuid());
        goto out;
    }
    if (st.st_mode & 077) {
        rc = why_set(why, RIG_E_INVALID,
                     "key file %s has mode %04o: group and others must have no access (chmod 600)",
                     path, (unsigned)(st.st_mode & 07777));
        goto out;
    }

    /* Read one byte past the limit so an over-long file is seen as such even
     * if it grew after fstat. */
    uint8_t buf[KEY_MAX + 1];
    size_t have = 0;
    while (have < sizeof buf) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = why_set(why, RIG_E_INVALID, "key file %s: %s", path, strerror(errno));
            goto wipe;
        }
        if (n == 0)
            break;
        have += (size_t)n;
    }
    if (have < KEY_MIN || have > KEY_MAX) {
        rc = why_set(why, RIG_E_INVALID, "key file %s holds %s%zu bytes; a key is %d to %d bytes",
                     path, have > KEY_MAX ? "more than " : "", have > KEY_MAX ? (size_t)KEY_MAX : have,
                     KEY_MIN, KEY_MAX);
        goto wipe;
    }
    rc = key_from_bytes(k, buf, have, why);
wipe:
    explicit_bzero(buf, sizeof buf);
out:
    close(fd);
    return rc;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int key_from_hex(rig_key *k, const char *hex, rig_why *why)
{
    if (!hex)
        return why_set(why, RIG_E_INVALID, "RIG_REMOTE_KEY is not set");
    size_t n = strnlen(hex, KEY_HEX_LEN + 1);
    if (n != KEY_HEX_LEN)
        return why_set(why, RIG_E_INVALID, "RIG_REMOTE_KEY must be exactly %d hex characters, it has %s%zu",
                       KEY_HEX_LEN, n > KEY_HEX_LEN ? "more than " : "", n > KEY_HEX_LEN ? (size_t)KEY_HEX_LEN : n);
    uint8_t bytes[KEY_GENERATED];
    for (size_t i = 0; i < KEY_GENERATED; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            explicit_bzero(bytes, sizeof bytes);
            return why_set(why, RIG_E_INVALID,
                           "RIG_REMOTE_KEY has a character that is not hex at position %zu",
                           hi < 0 ? 2 * i + 1 : 2 * i + 2);
        }
        bytes[i] = (uint8_t)(hi << 4 | lo);
    }
    int rc = key_from_bytes(k, bytes, sizeof bytes, why);
    explicit_bzero(bytes, sizeof bytes);
    return rc;
}

int key_read_hex_line(int fd, rig_key *k, rig_why *why)
{
    char line[KEY_HEX_LEN + 2];
    size_t n = 0;
    int rc = 0;
    for (;;) {
        char ch;
        ssize_t r = read(fd, &ch, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = why_set(why, RIG_E_CLOSED, "the input closed before the key's line");
            break;
        }
        if (ch == '\n')
            break;
        if (n == sizeof line - 1) {
            rc = why_set(why, RIG_E_TOO_LONG, "the key's line is longer than %d hex digits", KEY_HEX_LEN);
            break;
        }
        line[n++] = ch;
    }
    line[n] = '\0';
    if (rc == 0)
        rc = key_from_hex(k, line, why);
    explicit_bzero(line, sizeof line);
    return rc;
}

int key_to_hex(const rig_key *k, char out[static KEY_HEX_LEN + 1], rig_why *why)
{
    if (k->len != KEY_GENERATED)
        return why_set(why, RIG_E_INVALID, "only a %d-byte key has a hex form; this one is %zu bytes",
                       KEY_GENERATED, k->len);
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < KEY_GENERATED; i++) {
        out[2 * i] = digits[k->bytes[i] >> 4];
        out[2 * i + 1] = digits[k->bytes[i] & 15];
    }
    out[KEY_HEX_LEN] = '\0';
    return 0;
}

int key_generate(rig_key *k, rig_why *why)
{
    if (random_bytes(k->bytes, KEY_GENERATED) < 0)
        return why_set(why, RIG_E_IO, "no random bytes for a key: %s", strerror(errno));
    k->len = KEY_GENERATED;
    return 0;
}

void key_digest(const rig_key *k, uint8_t out[static 32])
{
    blake2b_256(k->bytes, k->len, out);
}

void key_wipe(rig_key *k)
{
    if (k)
        explicit_bzero(k, sizeof *k);
}

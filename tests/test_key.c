/* Keys: lengths, hex, generation, and key files that must be refused with a
 * line naming the file (owner, mode, FIFO, directory, size, missing). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/deadline.h"
#include "proto/key.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/rig-key-test-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Writes n bytes of 'k' to dir/name with mode; returns the path (static). */
static const char *key_file(const char *name, size_t n, mode_t mode)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    char *bytes = malloc(n + 1);
    memset(bytes, 'k', n);
    cr_assert_eq(write(fd, bytes, n), (ssize_t)n);
    free(bytes);
    close(fd);
    cr_assert_eq(chmod(path, mode), 0);
    return path;
}

TestSuite(key_file, .init = make_dir, .fini = remove_dir, .timeout = 10);

Test(key_file, good_file_reads_every_byte)
{
    const char *path = key_file("good", 4096, 0600);
    rig_key k;
    rig_why why = { "" };
    cr_assert_eq(key_read_file(&k, path, &why), 0, "%s", why.text);
    cr_assert_eq(k.len, 4096);
    cr_assert_eq(k.bytes[0], 'k');
    cr_assert_eq(k.bytes[4095], 'k');
    path = key_file("short-ok", 16, 0400);
    cr_assert_eq(key_read_file(&k, path, &why), 0, "%s", why.text);
    cr_assert_eq(k.len, 16);
}

Test(key_file, mode_0644_refused)
{
    const char *path = key_file("open", 32, 0644);
    rig_key k;
    rig_why why;
    cr_assert_eq(key_read_file(&k, path, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, path), "names the file: %s", why.text);
    cr_assert(strstr(why.text, "mode 0644"), "%s", why.text);
    path = key_file("group", 32, 0640);
    cr_assert_eq(key_read_file(&k, path, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "mode 0640"), "%s", why.text);
}

Test(key_file, wrong_owner_refused)
{
    const char *path = key_file("theirs", 32, 0600);
    cr_assert_eq(chown(path, geteuid() + 1, (gid_t)-1), 0, "the test needs to chown (run as root)");
    rig_key k;
    rig_why why;
    cr_assert_eq(key_read_file(&k, path, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, path), "%s", why.text);
    cr_assert(strstr(why.text, "not by this user"), "%s", why.text);
}

Test(key_file, fifo_refused_without_waiting_for_a_writer)
{
    char path[128];
    snprintf(path, sizeof path, "%s/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    rig_key k;
    rig_why why;
    int64_t start = deadline_now_ms();
    cr_assert_eq(key_read_file(&k, path, &why), RIG_E_INVALID);
    cr_assert_lt(deadline_now_ms() - start, 5000, "a FIFO must not block the read");
    cr_assert(strstr(why.text, path) && strstr(why.text, "a FIFO"), "%s", why.text);
}

Test(key_file, directory_refused)
{
    rig_key k;
    rig_why why;
    cr_assert_eq(key_read_file(&k, dir, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, dir) && strstr(why.text, "a directory"), "%s", why.text);
}

Test(key_file, sizes_15_and_4097_refused)
{
    rig_key k;
    rig_why why;
    const char *path = key_file("fifteen", 15, 0600);
    cr_assert_eq(key_read_file(&k, path, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, path) && strstr(why.text, "holds 15 bytes"), "%s", why.text);
    path = key_file("long", 4097, 0600);
    cr_assert_eq(key_read_file(&k, path, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, path) && strstr(why.text, "more than 4096 bytes"), "%s", why.text);
    path = key_file("empty", 0, 0600);
    cr_assert_eq(key_read_file(&k, path, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "holds 0 bytes"), "%s", why.text);
}

Test(key_file, missing_file)
{
    char path[128];
    snprintf(path, sizeof path, "%s/absent", dir);
    rig_key k;
    rig_why why;
    cr_assert_eq(key_read_file(&k, path, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, path) && strstr(why.text, "No such file"), "%s", why.text);
}

Test(key, lengths_and_no_bytes_in_errors)
{
    uint8_t secret[4097];
    memset(secret, 'S', sizeof secret);
    rig_key k;
    rig_why why;
    cr_assert_eq(key_from_bytes(&k, secret, 15, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "this one is 15"), "%s", why.text);
    cr_assert_null(strstr(why.text, "SS"), "an error never shows the key");
    cr_assert_eq(key_from_bytes(&k, secret, 4097, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "4097"), "%s", why.text);
    cr_assert_eq(key_from_bytes(&k, secret, 16, NULL), 0);
    cr_assert_eq(key_from_bytes(&k, secret, 4096, NULL), 0);
    cr_assert_eq(k.len, 4096);
}

Test(key, hex_exactly_64)
{
    const char *good = "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff";
    rig_key k;
    rig_why why = { "" };
    cr_assert_eq(key_from_hex(&k, good, &why), 0, "%s", why.text);
    cr_assert_eq(k.len, 32);
    cr_assert_eq(k.bytes[0], 0x00);
    cr_assert_eq(k.bytes[10], 0xaa);
    cr_assert_eq(k.bytes[31], 0xff);
    char back[KEY_HEX_LEN + 1];
    cr_assert_eq(key_to_hex(&k, back, NULL), 0);
    cr_assert_eq(strcasecmp(back, good), 0);

    cr_assert_eq(key_from_hex(&k, "0011", &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "exactly 64 hex characters, it has 4"), "%s", why.text);
    char long_hex[70];
    memset(long_hex, 'a', 65);
    long_hex[65] = '\0';
    cr_assert_eq(key_from_hex(&k, long_hex, &why), RIG_E_INVALID);
    char bad[65];
    memcpy(bad, good, 65);
    bad[20] = 'g';
    cr_assert_eq(key_from_hex(&k, bad, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "position 21"), "%s", why.text);
    cr_assert_eq(key_from_hex(&k, NULL, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "not set"), "%s", why.text);
}

Test(key, generate_is_random_and_32_bytes)
{
    rig_key a, b;
    cr_assert_eq(key_generate(&a, NULL), 0);
    cr_assert_eq(key_generate(&b, NULL), 0);
    cr_assert_eq(a.len, 32);
    cr_assert_neq(memcmp(a.bytes, b.bytes, 32), 0);
    key_wipe(&a);
    cr_assert_eq(a.len, 0);
}

Test(key, hex_line_from_a_descriptor)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    const char *text = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFFrest";
    cr_assert_eq(write(p[1], text, 64), 64);
    cr_assert_eq(write(p[1], "\nrest", 5), 5);
    rig_key k;
    rig_why why = { "" };
    cr_assert_eq(key_read_hex_line(p[0], &k, &why), 0, "%s", why.text);
    cr_expect_eq(k.len, 32u);
    cr_expect_eq(k.bytes[1], 0x11);
    cr_expect_eq(k.bytes[31], 0xff);
    char rest[8] = "";
    cr_expect_eq(read(p[0], rest, 4), 4, "the bytes after the line are left");
    cr_expect_str_eq(rest, "rest");
    cr_assert_eq(write(p[1], "0011", 4), 4);
    close(p[1]);
    cr_expect_eq(key_read_hex_line(p[0], &k, &why), RIG_E_CLOSED);
    close(p[0]);
    cr_assert_eq(pipe(p), 0);
    char longline[80];
    memset(longline, 'a', sizeof longline);
    cr_assert_eq(write(p[1], longline, sizeof longline), (ssize_t)sizeof longline);
    cr_expect_eq(key_read_hex_line(p[0], &k, &why), RIG_E_TOO_LONG);
    cr_expect(strstr(why.text, "longer than 64 hex digits"), "%s", why.text);
    close(p[0]);
    close(p[1]);
}

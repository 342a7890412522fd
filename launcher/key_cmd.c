/* `rig key [FILE]`: a new random 32-byte key file, owner-only, for agents
 * run by hand (rig-agent --key-file) and programs (RIG_KEY_FILE). `rig run`
 * needs none: it makes a fresh key for every attempt. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/launcher.h"
#include "proto/key.h"

static const char usage[] =
    "Usage: rig key [--force] [FILE]\n"
    "Writes a new random 32-byte key to FILE (default ~/.config/rig/key), readable\n"
    "by its owner only, and prints the file's name. An existing file is kept\n"
    "unless --force replaces it.\n"
    "  -f, --force   replace FILE if it exists\n";

int key_main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
    bool force = false;
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, "+fh", opts, NULL)) != -1;) {
        switch (c) {
        case 'f': force = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 1;
        }
    }
    if (argc - optind > 1) {
        fprintf(stderr, "rig key: one FILE at most\n%s", usage);
        return 1;
    }
    char path[LAUNCHER_PATH_MAX + 1];
    if (optind < argc) {
        if (strlen(argv[optind]) > LAUNCHER_PATH_MAX) {
            fprintf(stderr, "rig key: FILE: path longer than %d bytes\n", LAUNCHER_PATH_MAX);
            return 1;
        }
        snprintf(path, sizeof path, "%s", argv[optind]);
    } else {
        static const char rel[] = "/.config/rig/key";
        const char *home = getenv("HOME");
        if (!home || !*home) {
            fprintf(stderr, "rig key: HOME is not set; name the FILE\n");
            return 1;
        }
        if (strlen(home) + sizeof rel - 1 > LAUNCHER_PATH_MAX) {
            fprintf(stderr, "rig key: HOME: path longer than %zu bytes (room is needed for %s); name the FILE\n",
                    LAUNCHER_PATH_MAX - (sizeof rel - 1), rel);
            return 1;
        }
        static const char *const dirs[] = { "/.config", "/.config/rig" };   /* existing ones are fine */
        for (size_t i = 0; i < 2; i++) {
            snprintf(path, sizeof path, "%s%s", home, dirs[i]);
            if (mkdir(path, 0700) < 0 && errno != EEXIST) {
                fprintf(stderr, "rig key: cannot create %s: %s\n", path, strerror(errno));
                return RIG_EXIT_OWN_FAILURE;
            }
        }
        snprintf(path, sizeof path, "%s%s", home, rel);
    }
    rig_key key;
    rig_why why = { "" };
    if (key_generate(&key, &why) < 0) {
        fprintf(stderr, "rig key: %s\n", why.text);
        return RIG_EXIT_OWN_FAILURE;
    }
    /* Written under a temporary name and renamed, so no reader ever sees a
     * partial key and --force never leaves the old file half-replaced. */
    char tmp[sizeof path + sizeof ".tmp-XXXXXX"];
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    int rc = RIG_EXIT_OWN_FAILURE;
    if (fd < 0) {
        fprintf(stderr, "rig key: cannot create %s: %s\n", path, strerror(errno));
        goto out;
    }
    if (fchmod(fd, 0600) < 0 || write(fd, key.bytes, key.len) != (ssize_t)key.len || fsync(fd) < 0) {
        fprintf(stderr, "rig key: cannot write %s: %s\n", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    close(fd);
    if (force ? rename(tmp, path) < 0 : link(tmp, path) < 0) {
        fprintf(stderr, "rig key: %s: %s%s\n", path, strerror(errno),
                errno == EEXIST ? " (rig key --force replaces it)" : "");
        unlink(tmp);
        goto out;
    }
    if (!force)
        unlink(tmp);
    printf("%s\n", path);
    rc = 0;
out:
    key_wipe(&key);
    return rc;
}

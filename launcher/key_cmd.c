/* `rig key [FILE]`: a new random 32-byte key file, owner-only, for agents
 * run by hand (rig-agent --key-file) and programs (RIG_KEY_FILE). `rig run`
 * needs none: it makes a fresh key for every attempt. `rig key --fleet`:
 * the one key of a fleet of standing agents, where they read it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/fleet.h"
#include "launcher/launcher.h"
#include "proto/key.h"

static const char usage[] =
    "Usage: rig key [--force] [--fleet] [FILE]\n"
    "Writes a new random 32-byte key to FILE (default ~/.config/rig/key), readable\n"
    "by its owner only, and prints the file's name. An existing file is kept\n"
    "unless --force replaces it.\n"
    "  -f, --force   replace FILE if it exists\n"
    "  --fleet       the fleet key of standing agents: FILE defaults to\n"
    "                $RIG_FLEET_KEY, else as root /etc/rig/key, else\n"
    "                ~/.config/rig/fleet-key; as root it is given to the user\n"
    "                rig-agent when there is one (the rig-agent service reads it)\n";

#define AGENT_USER "rig-agent"

/* The folders of path below its first skip bytes (~/.config, ~/.config/rig),
 * owner-only when made here. */
static int make_parents(char *path, size_t skip)
{
    for (char *slash = path + skip + 1; (slash = strchr(slash, '/')); slash++) {
        *slash = '\0';
        int made = mkdir(path, 0700);
        int err = errno;
        *slash = '/';
        if (made < 0 && err != EEXIST) {
            fprintf(stderr, "rig key: cannot create %.*s: %s\n", (int)(slash - path), path, strerror(err));
            return -1;
        }
    }
    return 0;
}

int key_main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' },
        { "fleet", no_argument, NULL, 'F' }, { NULL, 0, NULL, 0 } };
    bool force = false, fleet = false;
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, "+fh", opts, NULL)) != -1;) {
        switch (c) {
        case 'f': force = true; break;
        case 'F': fleet = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 1;
        }
    }
    if (argc - optind > 1) {
        fprintf(stderr, "rig key: one FILE at most\n%s", usage);
        return 1;
    }
    char path[LAUNCHER_PATH_MAX + 1];
    bool system_fleet = false;   /* root's fleet key: given to the service's user */
    const char *home = getenv("HOME");
    if (optind < argc) {
        if (strlen(argv[optind]) > LAUNCHER_PATH_MAX) {
            fprintf(stderr, "rig key: FILE: path longer than %d bytes\n", LAUNCHER_PATH_MAX);
            return 1;
        }
        snprintf(path, sizeof path, "%s", argv[optind]);
    } else if (fleet) {
        bool system;
        if (fleet_key_write_path(path, sizeof path, &system, "rig key") < 0)
            return 1;
        system_fleet = geteuid() == 0;
        if (system && mkdir("/etc/rig", 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "rig key: cannot create /etc/rig: %s\n", strerror(errno));
            return RIG_EXIT_OWN_FAILURE;
        }
        if (!system && !getenv("RIG_FLEET_KEY") && make_parents(path, strlen(home)) < 0)
            return RIG_EXIT_OWN_FAILURE;
    } else {
        static const char rel[] = "/.config/rig/key";
        if (!home || !*home) {
            fprintf(stderr, "rig key: HOME is not set; name the FILE\n");
            return 1;
        }
        if (snprintf(path, sizeof path, "%s%s", home, rel) >= (int)sizeof path) {
            fprintf(stderr, "rig key: HOME: path longer than %zu bytes (room is needed for %s); name the FILE\n",
                    LAUNCHER_PATH_MAX - (sizeof rel - 1), rel);
            return 1;
        }
        if (make_parents(path, strlen(home)) < 0)
            return RIG_EXIT_OWN_FAILURE;
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
    /* The service reads the fleet key as its own user, and a key file must
     * be its reader's alone. */
    struct passwd *agent_user = system_fleet ? getpwnam(AGENT_USER) : NULL;
    if (agent_user && fchown(fd, agent_user->pw_uid, agent_user->pw_gid) < 0) {
        fprintf(stderr, "rig key: cannot give %s to the user %s: %s\n", tmp, AGENT_USER, strerror(errno));
        close(fd);
        unlink(tmp);
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
    if (system_fleet && !agent_user)
        fprintf(stderr, "rig key: no user %s here: %s belongs to root (the rig-agent package makes the user)\n",
                AGENT_USER, path);
    rc = 0;
out:
    key_wipe(&key);
    return rc;
}

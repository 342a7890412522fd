/* The fleet key's places; see fleet.h. */
#include "launcher/fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *env_path(void)
{
    const char *e = getenv("RIG_FLEET_KEY");
    return e && *e ? e : NULL;
}

static int user_path(char *out, size_t cap, const char *cmd)
{
    const char *home = getenv("HOME");
    if (!home || !*home) {
        fprintf(stderr, "%s: HOME is not set: set RIG_FLEET_KEY to the fleet key's file\n", cmd);
        return -1;
    }
    if (snprintf(out, cap, "%s%s", home, FLEET_KEY_USER) >= (int)cap) {
        fprintf(stderr, "%s: HOME: path too long for %s; set RIG_FLEET_KEY\n", cmd, FLEET_KEY_USER);
        return -1;
    }
    return 0;
}

int fleet_key_write_path(char *out, size_t cap, bool *system, const char *cmd)
{
    *system = false;
    const char *e = env_path();
    if (e) {
        if (snprintf(out, cap, "%s", e) >= (int)cap) {
            fprintf(stderr, "%s: RIG_FLEET_KEY: path longer than %zu bytes\n", cmd, cap - 1);
            return -1;
        }
        return 0;
    }
    if (geteuid() == 0) {
        *system = true;
        snprintf(out, cap, "%s", FLEET_KEY_SYSTEM);
        return 0;
    }
    return user_path(out, cap, cmd);
}

int fleet_key_read(rig_key *key, char *path, size_t cap, const char *cmd)
{
    const char *e = env_path();
    if (e) {
        if (snprintf(path, cap, "%s", e) >= (int)cap) {
            fprintf(stderr, "%s: RIG_FLEET_KEY: path longer than %zu bytes\n", cmd, cap - 1);
            return -1;
        }
    } else {
        if (user_path(path, cap, cmd) < 0)
            return -1;
        if (access(path, F_OK) != 0 && access(FLEET_KEY_SYSTEM, R_OK) == 0)
            snprintf(path, cap, "%s", FLEET_KEY_SYSTEM);
    }
    rig_why why = { "" };
    if (key_read_file(key, path, &why) < 0) {
        fprintf(stderr, "%s: the fleet key: %s%s\n", cmd, why.text,
                access(path, F_OK) != 0 ? " (`rig key --fleet` makes one; RIG_FLEET_KEY names another)" : "");
        return -1;
    }
    return 0;
}

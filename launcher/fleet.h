/* The fleet key: one key for every standing agent of a team (`rig key
 * --fleet` writes it, `rig serve` installs it on a target, `rig run` uses it
 * for a target with a standing agent). */
#ifndef RIG_LAUNCHER_FLEET_H
#define RIG_LAUNCHER_FLEET_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/key.h"

#define FLEET_KEY_SYSTEM "/etc/rig/key"
#define FLEET_KEY_USER "/.config/rig/fleet-key"   /* below HOME */

/* Where `rig key --fleet` writes it: $RIG_FLEET_KEY, else /etc/rig/key for
 * root, else ~/.config/rig/fleet-key. *system is true for the root default.
 * -1 after saying why on stderr (prefixed by cmd). */
int fleet_key_write_path(char *out, size_t cap, bool *system, const char *cmd);
/* Reads the fleet key this user has: $RIG_FLEET_KEY, else
 * ~/.config/rig/fleet-key, else /etc/rig/key; path names the file read.
 * -1 after saying why on stderr (prefixed by cmd). */
int fleet_key_read(rig_key *key, char *path, size_t cap, const char *cmd);

#endif

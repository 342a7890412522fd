/* rig's launcher: the `rig` command. Each subcommand is a *_main that parses
 * its own options and returns the exit status. */
#ifndef RIG_LAUNCHER_LAUNCHER_H
#define RIG_LAUNCHER_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/quote.h"

#define RIG_VERSION "0.1.0"
/* `rig run` exits with this when rig itself failed (PROG's own status
 * otherwise). */
#define RIG_EXIT_OWN_FAILURE 255

int run_main(int argc, char **argv);     /* run.c */
int agent_cmd_main(int argc, char **argv); /* agent_cmd.c */
int key_main(int argc, char **argv);     /* key_cmd.c */
int probe_main(int argc, char **argv);   /* probe_cmd.c */
int ls_main(int argc, char **argv);      /* probe_cmd.c */
int exec_main(int argc, char **argv);    /* exec_cmd.c */
int serve_main(int argc, char **argv);   /* serve_cmd.c */

/* The longest path rig takes from its user (--rig, FILE, HOME, RIG_SHIM,
 * RIG_TARGETS): PATH_MAX less its NUL, the most the kernel opens. Longer is
 * an error naming it, never a cut. */
#define LAUNCHER_PATH_MAX 4095

/* Room for a remote command `exec RIG agent ...` with any --rig path. */
#define LAUNCHER_REMOTE_MAX (SHELL_QUOTED_MAX(LAUNCHER_PATH_MAX) + 64)

/* This program's absolute path (/proc/self/exe) into out; -1 when unknown
 * or longer than cap - 1. */
int self_path(char *out, size_t cap);

/* True when --rig PATH can be sent as rig's path; else false after saying
 * why on stderr ("CMD: --rig: path longer than 4095 bytes"; usage when
 * empty). */
bool rig_path_ok(const char *cmd, const char *rig, const char *usage);

#endif

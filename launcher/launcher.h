/* rig's launcher: the `rig` command. Each subcommand is a *_main that parses
 * its own options and returns the exit status. */
#ifndef RIG_LAUNCHER_LAUNCHER_H
#define RIG_LAUNCHER_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>

#define RIG_VERSION "0.1.0"
/* `rig run` exits with this when rig itself failed (PROG's own status
 * otherwise). */
#define RIG_EXIT_OWN_FAILURE 255

int run_main(int argc, char **argv);     /* run.c */
int agent_cmd_main(int argc, char **argv); /* agent_cmd.c */
int key_main(int argc, char **argv);     /* key_cmd.c */
int probe_main(int argc, char **argv);   /* probe_cmd.c */
int ls_main(int argc, char **argv);      /* probe_cmd.c */

/* This program's absolute path (/proc/self/exe) into out; -1 when unknown. */
int self_path(char *out, size_t cap);

/* Appends s to out (cap bytes, NUL-terminated) quoted for a POSIX shell
 * when it needs quoting; false when it does not fit. */
bool shell_quote(char *out, size_t cap, const char *s);

#endif

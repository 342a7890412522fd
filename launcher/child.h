/* Child processes of rig: agents (local or over ssh) and probes, each with
 * its standard input, output and error on pipes to rig. */
#ifndef RIG_LAUNCHER_CHILD_H
#define RIG_LAUNCHER_CHILD_H

#include <stdbool.h>
#include <sys/types.h>

#include "proto/error.h"

typedef struct child {
    pid_t pid;          /* 0 once reaped */
    int in, out, err;   /* rig's ends of the pipes (close-on-exec); -1 once closed */
    int status;         /* wait status, valid once reaped */
} child;

/* Starts argv[0] (searched in PATH) with its standard streams on pipes, in
 * a process group of its own (so a Ctrl-C meant for the program does not
 * reach it), signals at their defaults and unblocked. Errors name argv[0]. */
int child_spawn(child *c, const char *const argv[], rig_why *why);

/* Closes rig's ends; NULL-safe for each. */
void child_close_fds(child *c);

/* Stops c: closes its standard input, waits up to grace_ms for it to exit,
 * then SIGTERMs its process group, then SIGKILLs it, and reaps it. */
void child_stop(child *c, int grace_ms);

/* Describes a wait status: "exited with status 3", "killed by signal 9". */
const char *child_status_text(int status, char *buf, size_t cap);

/* Milliseconds on CLOCK_MONOTONIC. */
long long child_now_ms(void);

#endif

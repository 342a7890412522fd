/* The targets file: which machines `rig` can run on.
 *   ~/.config/rig/targets   (RIG_TARGETS names another file)
 *   NAME ADDRESS [standing=HOST:PORT]
 *                           ADDRESS: an ssh destination (host, user@host,
 *                           ssh://user@host:port, a Host of ssh's config)
 *                           or `local` (an agent started here, no ssh);
 *                           standing: where NAME's standing agent (one that
 *                           `rig serve` or the rig-agent package runs, with
 *                           the fleet key) listens
 *   group NAME MEMBERS      a target of several machines: MEMBERS names
 *                           targets of the file, comma-separated (b,c);
 *                           `--on NAME` is `--on b,c`
 *   default NAME            the target (or group) of a command given no --on
 *   # comment
 * The target `local` exists even without a file. */
#ifndef RIG_LAUNCHER_TARGETS_H
#define RIG_LAUNCHER_TARGETS_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/error.h"
#include "proto/names.h"

#define TARGETS_MAX 256
#define TARGET_ADDRESS_MAX 512
#define TARGETS_LINE_MAX 2046   /* bytes of a line of the file, without its newline */
#define TARGETS_GROUPS_MAX 64
#define TARGETS_GROUP_TEXT_MAX 1024   /* a group's MEMBERS, as written */

typedef struct target {
    char name[NAMES_NAME_MAX + 1];
    char address[TARGET_ADDRESS_MAX];
    bool local;                  /* address is `local` */
    bool slurm;                  /* a node of this Slurm allocation: its agent is a job step */
    char standing[NAMES_TEXT_MAX];   /* HOST:PORT of its standing agent, or "" */
} target;

typedef struct target_group {
    char name[NAMES_NAME_MAX + 1];
    char members[TARGETS_GROUP_TEXT_MAX];   /* "b,c": each a target of the file */
    int line;
} target_group;

typedef struct targets {
    char path[4096];             /* the file read (or that would be) */
    bool have_file;
    size_t count;
    target v[TARGETS_MAX];       /* in file order; `local` added last if absent */
    size_t groups;
    target_group g[TARGETS_GROUPS_MAX];      /* in file order */
    char default_name[NAMES_NAME_MAX + 1];   /* "" when the file names none */
} targets;

/* Reads the targets file. A missing file is fine unless RIG_TARGETS names
 * it. Errors name the file and line. */
int targets_load(targets *t, rig_why *why);

/* The target called name, or NULL. */
const target *targets_find(const targets *t, const char *name);
/* The group called name, or NULL. */
const target_group *targets_group(const targets *t, const char *name);
/* Rewrites the file with NAME's standing agent at addr (NULL: none), every
 * other line as it was; atomically (a new file renamed over the old). */
int targets_set_standing(const targets *t, const char *name, const char *addr, rig_why *why);

/* The machines of a command: on (a comma-separated list of names, each a
 * target or a group; NULL: RIG_ON, else the file's default, else `local`)
 * resolved into out, in order, a group as its members. Refuses unknown
 * names and a machine given twice. */
int targets_select(const targets *t, const char *on, const target *out[static TARGETS_MAX], size_t *n,
                   rig_why *why);

#define TARGETS_SSH_ARGV_MAX 24
/* The ssh command line that runs remote_command on t (a non-local target):
 * `ssh -T -o BatchMode=yes ... [-F $RIG_SSH_CONFIG] -- ADDRESS CMD`
 * ($RIG_SSH instead of ssh when set; -tt instead of -T with tty: a
 * terminal there), NULL-terminated; returns the count. The strings are
 * t's, remote_command and constants. */
int targets_ssh_argv(const target *t, const char *remote_command, bool tty,
                     const char *argv[static TARGETS_SSH_ARGV_MAX]);

#endif

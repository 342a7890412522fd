/* The targets file; see targets.h. */
#include "launcher/targets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int set_path(targets *t, bool *explicit, rig_why *why)
{
    const char *env = getenv("RIG_TARGETS");
    *explicit = env && *env;
    if (*explicit) {
        if (strlen(env) >= sizeof t->path)
            return why_set(why, RIG_E_TOO_LONG, "RIG_TARGETS: path longer than %zu bytes", sizeof t->path - 1);
        snprintf(t->path, sizeof t->path, "%s", env);
        return 0;
    }
    const char *home = getenv("HOME");
    if (!home || !*home)
        return why_set(why, RIG_E_INVALID, "HOME is not set: cannot find the targets file (set RIG_TARGETS)");
    static const char rel[] = "/.config/rig/targets";
    if (strlen(home) + sizeof rel > sizeof t->path)
        return why_set(why, RIG_E_TOO_LONG, "HOME: path longer than %zu bytes (room is needed for %s); set RIG_TARGETS",
                       sizeof t->path - sizeof rel, rel);
    snprintf(t->path, sizeof t->path, "%s%s", home, rel);
    return 0;
}

static int add(targets *t, const char *name, const char *address, const char *standing, const char *where,
               rig_why *why)
{
    if (!names_valid_name(name, strlen(name)) || strcmp(name, "default") == 0 || strcmp(name, "group") == 0)
        return why_set(why, RIG_E_INVALID,
                       "%s: '%s' is not a target name (letters, digits, '.', '_', '-'; at most %d)", where, name,
                       NAMES_NAME_MAX);
    if (targets_find(t, name) || targets_group(t, name))
        return why_set(why, RIG_E_INVALID, "%s: target '%s' is named twice", where, name);
    if (strlen(address) >= TARGET_ADDRESS_MAX)
        return why_set(why, RIG_E_TOO_LONG, "%s: the address of '%s' is longer than %d bytes", where, name,
                       TARGET_ADDRESS_MAX - 1);
    if (address[0] == '-')
        return why_set(why, RIG_E_INVALID, "%s: '%s' is not an ssh destination", where, address);
    if (t->count == TARGETS_MAX)
        return why_set(why, RIG_E_TOO_LONG, "%s: more than %d targets", where, TARGETS_MAX);
    target *g = &t->v[t->count++];
    snprintf(g->name, sizeof g->name, "%s", name);
    snprintf(g->address, sizeof g->address, "%s", address);
    g->local = strcmp(address, "local") == 0;
    if (standing) {
        static const char prefix[] = "standing=";
        names_address a;
        rig_why w = { "" };
        if (strncmp(standing, prefix, sizeof prefix - 1) != 0) {
            t->count--;
            return why_set(why, RIG_E_INVALID, "%s: expected 'standing=HOST:PORT' after the address, found '%.60s'",
                           where, standing);
        }
        const char *addr = standing + sizeof prefix - 1;
        if (strlen(addr) >= sizeof g->standing || names_parse_address(addr, strlen(addr), &a, &w) < 0) {
            t->count--;
            return why_set(why, RIG_E_INVALID, "%s: standing=%.60s: %s", where, addr,
                           w.text[0] ? w.text : "too long");
        }
        snprintf(g->standing, sizeof g->standing, "%s", addr);
    }
    return 0;
}

/* `group NAME MEMBERS`: kept as written; its members are checked once
 * the whole file is read (a group may come before them). */
static int add_group(targets *t, const char *name, const char *members, int line, const char *where, rig_why *why)
{
    if (!names_valid_name(name, strlen(name)) || strcmp(name, "default") == 0 || strcmp(name, "group") == 0)
        return why_set(why, RIG_E_INVALID, "%s: '%s' is not a group name (letters, digits, '.', '_', '-'; at most %d)",
                       where, name, NAMES_NAME_MAX);
    if (targets_find(t, name) || targets_group(t, name))
        return why_set(why, RIG_E_INVALID, "%s: target '%s' is named twice", where, name);
    if (strlen(members) >= TARGETS_GROUP_TEXT_MAX)
        return why_set(why, RIG_E_TOO_LONG, "%s: the members of group '%s' are longer than %d bytes", where, name,
                       TARGETS_GROUP_TEXT_MAX - 1);
    if (t->groups == TARGETS_GROUPS_MAX)
        return why_set(why, RIG_E_TOO_LONG, "%s: more than %d groups", where, TARGETS_GROUPS_MAX);
    target_group *g = &t->g[t->groups++];
    snprintf(g->name, sizeof g->name, "%s", name);
    snprintf(g->members, sizeof g->members, "%s", members);
    g->line = line;
    return 0;
}

/* Each group's members: targets of the file, none a group, none twice. */
static int check_groups(const targets *t, rig_why *why)
{
    for (size_t i = 0; i < t->groups; i++) {
        const target_group *g = &t->g[i];
        const target *seen[TARGETS_MAX];
        size_t n = 0;
        for (const char *p = g->members;; p++) {
            size_t len = strcspn(p, ",");
            char name[NAMES_NAME_MAX + 1];
            if (len == 0 || len > NAMES_NAME_MAX)
                return why_set(why, RIG_E_INVALID, "%s:%d: group '%s': %s in '%s'", t->path, g->line, g->name,
                               len ? "a name too long" : "an empty name", g->members);
            memcpy(name, p, len);
            name[len] = '\0';
            const target *m = targets_find(t, name);
            if (!m)
                return why_set(why, RIG_E_INVALID, "%s:%d: group '%s' names %s '%s'%s", t->path, g->line, g->name,
                               targets_group(t, name) ? "the group" : "no target of the file:", name,
                               targets_group(t, name) ? " (members are machines)" : "");
            for (size_t k = 0; k < n; k++)
                if (seen[k] == m)
                    return why_set(why, RIG_E_INVALID, "%s:%d: group '%s' names '%s' twice", t->path, g->line,
                                   g->name, name);
            if (n < TARGETS_MAX)
                seen[n++] = m;
            p += len;
            if (!*p)
                break;
        }
    }
    return 0;
}

int targets_load(targets *t, rig_why *why)
{
    memset(t, 0, sizeof *t);
    bool explicit;
    int rc = set_path(t, &explicit, why);
    if (rc < 0)
        return rc;
    FILE *f = fopen(t->path, "r");
    if (!f && (errno != ENOENT || explicit))
        return why_set(why, RIG_E_IO, "targets file %s: %s", t->path, strerror(errno));
    if (f) {
        t->have_file = true;
        char line[TARGETS_LINE_MAX + 2];   /* the line, its newline, the NUL */
        for (int no = 1; fgets(line, sizeof line, f); no++) {
            char where[sizeof t->path + 16];
            snprintf(where, sizeof where, "%s:%d", t->path, no);
            /* fgets would hand on the rest of a long line as a line of its
             * own (a comment's tail read as a target). */
            if (!strchr(line, '\n') && !feof(f)) {
                rc = why_set(why, RIG_E_TOO_LONG, "%s: line longer than %d bytes", where, TARGETS_LINE_MAX);
                break;
            }
            char *hash = strchr(line, '#');
            if (hash)
                *hash = '\0';
            char *save = NULL, *a = strtok_r(line, " \t\r\n", &save);
            char *b = a ? strtok_r(NULL, " \t\r\n", &save) : NULL;
            char *c = b ? strtok_r(NULL, " \t\r\n", &save) : NULL;
            char *d = c ? strtok_r(NULL, " \t\r\n", &save) : NULL;
            if (!a)
                continue;
            bool group = strcmp(a, "group") == 0;
            if (!b || d || (c && strcmp(a, "default") == 0) || (group && !c)) {
                rc = why_set(why, RIG_E_INVALID,
                             "%s: expected 'NAME ADDRESS [standing=HOST:PORT]', 'group NAME MEMBER,MEMBER...' or "
                             "'default NAME'",
                             where);
                break;
            }
            if (group) {
                if ((rc = add_group(t, b, c, no, where, why)) < 0)
                    break;
            } else if (strcmp(a, "default") == 0) {
                if (!names_valid_name(b, strlen(b))) {
                    rc = why_set(why, RIG_E_INVALID, "%s: '%s' is not a target name", where, b);
                    break;
                }
                snprintf(t->default_name, sizeof t->default_name, "%s", b);
            } else if ((rc = add(t, a, b, c, where, why)) < 0) {
                break;
            }
        }
        fclose(f);
        if (rc < 0)
            return rc;
    }
    if (!targets_find(t, "local") && (rc = add(t, "local", "local", NULL, t->path, why)) < 0)
        return rc;
    if (t->default_name[0] && !targets_find(t, t->default_name) && !targets_group(t, t->default_name))
        return why_set(why, RIG_E_INVALID, "%s: the default target '%s' is not in the file", t->path,
                       t->default_name);
    return check_groups(t, why);
}

const target_group *targets_group(const targets *t, const char *name)
{
    for (size_t i = 0; i < t->groups; i++)
        if (strcmp(t->g[i].name, name) == 0)
            return &t->g[i];
    return NULL;
}

const target *targets_find(const targets *t, const char *name)
{
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->v[i].name, name) == 0)
            return &t->v[i];
    return NULL;
}

int targets_select(const targets *t, const char *on, const target *out[static TARGETS_MAX], size_t *n,
                   rig_why *why)
{
    const char *from = "--on";
    if (!on || !*on) {
        on = getenv("RIG_ON");
        from = "RIG_ON";
    }
    if (!on || !*on) {
        on = t->default_name[0] ? t->default_name : "local";
        from = t->default_name[0] ? "the default target" : "the built-in target";
    }
    *n = 0;
    const char *p = on;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[NAMES_NAME_MAX + 1];
        if (len == 0 || len > NAMES_NAME_MAX)
            return why_set(why, RIG_E_INVALID, "%s '%s': %s", from, on,
                           len ? "a name is too long" : "an empty name");
        memcpy(name, p, len);
        name[len] = '\0';
        const target *g = targets_find(t, name);
        const target_group *group = g ? NULL : targets_group(t, name);
        if (!g && !group)
            return why_set(why, RIG_E_INVALID, "%s: no target named '%s' (targets are in %s; `rig ls` lists them)",
                           from, name, t->path);
        /* A group is its members, each a target (check_groups made sure). */
        const char *m = group ? group->members : NULL;
        for (;;) {
            char mname[NAMES_NAME_MAX + 1];
            if (m) {
                size_t mlen = strcspn(m, ",");
                if (mlen == 0 || mlen > NAMES_NAME_MAX)
                    return why_set(why, RIG_E_INVALID, "group '%s': '%s': %s", name, group->members,
                                   mlen ? "a name is too long" : "an empty name");
                memcpy(mname, m, mlen);
                mname[mlen] = '\0';
                m = m[mlen] ? m + mlen + 1 : NULL;
                if (!(g = targets_find(t, mname)))
                    return why_set(why, RIG_E_INVALID, "group '%s': no target named '%s'", name, mname);
            }
            const char *said = group ? mname : name;
            for (size_t i = 0; i < *n; i++)
                if (out[i] == g)
                    return why_set(why, RIG_E_INVALID, "%s: target '%s' is given twice", from, said);
            if (*n == TARGETS_MAX)
                return why_set(why, RIG_E_TOO_LONG, "%s: more than %d targets", from, TARGETS_MAX);
            out[(*n)++] = g;
            if (!m)
                break;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

int targets_ssh_argv(const target *t, const char *remote_command, bool tty,
                     const char *argv[static TARGETS_SSH_ARGV_MAX])
{
    static const char *const fixed[] = {
        "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR",
    };
    size_t n = 0;
    const char *ssh = getenv("RIG_SSH");
    argv[n++] = ssh && *ssh ? ssh : "ssh";
    argv[n++] = tty ? "-tt" : "-T";
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv[n++] = fixed[i];
    const char *config = getenv("RIG_SSH_CONFIG");
    if (config && *config) {
        argv[n++] = "-F";
        argv[n++] = config;
    }
    argv[n++] = "--";
    argv[n++] = t->address;
    argv[n++] = remote_command;
    argv[n] = NULL;
    return (int)n;
}

int targets_set_standing(const targets *t, const char *name, const char *addr, rig_why *why)
{
    const target *g = targets_find(t, name);
    if (!g || g->local)
        return why_set(why, RIG_E_INVALID, "no target '%s' with an ssh address in %s", name, t->path);
    FILE *in = fopen(t->path, "r");
    if (!in)
        return why_set(why, RIG_E_IO, "targets file %s: %s", t->path, strerror(errno));
    char tmp[sizeof t->path + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", t->path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return why_set(why, RIG_E_IO, "%s: %s", tmp, strerror(errno));
    }
    bool found = false;
    char line[TARGETS_LINE_MAX + 2];
    while (fgets(line, sizeof line, in)) {
        /* The line naming the target: its first word, before any comment. */
        char copy[sizeof line];
        snprintf(copy, sizeof copy, "%s", line);
        char *hash = strchr(copy, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL, *first = strtok_r(copy, " \t\r\n", &save);
        if (!found && first && strcmp(first, name) == 0) {
            found = true;
            fprintf(out, "%s %s", g->name, g->address);
            if (addr)
                fprintf(out, " standing=%s", addr);
            /* A comment on the line stays on it. */
            const char *comment = strchr(line, '#');
            if (comment)
                fprintf(out, " %s", comment);
            else
                fputc('\n', out);
        } else {
            fputs(line, out);
        }
    }
    bool failed = ferror(in) || ferror(out);
    fclose(in);
    if (fclose(out) != 0 || failed || !found || rename(tmp, t->path) < 0) {
        int e = errno;
        unlink(tmp);
        return why_set(why, RIG_E_IO, "cannot rewrite %s: %s", t->path,
                       !found ? "the target's line is gone" : strerror(e));
    }
    return 0;
}

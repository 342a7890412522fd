/* rig-agent --config FILE: the settings of a standing agent (the systemd
 * unit's /etc/rig/agent.conf), so that a service's address and key live in
 * a file an administrator edits rather than in the unit. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

#define CONFIG_BYTES_MAX 65536

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

static int setting(agent_config *c, const char *name, const char *value, const char *where, char *why,
                   size_t whylen)
{
    static const struct {
        const char *name;
        size_t offset;
    } known[] = {
        { "listen", offsetof(agent_config, listen) },
        { "key-file", offsetof(agent_config, key_file) },
        { "driver", offsetof(agent_config, driver) },
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(name, known[i].name) != 0)
            continue;
        char *slot = (char *)c + known[i].offset;
        if (slot[0]) {
            snprintf(why, whylen, "%s: '%s' is set twice", where, name);
            return -1;
        }
        if (!value[0] || strlen(value) >= AGENT_CONFIG_VALUE_MAX) {
            snprintf(why, whylen, "%s: '%s' needs a value of 1 to %d bytes", where, name,
                     AGENT_CONFIG_VALUE_MAX - 1);
            return -1;
        }
        memcpy(slot, value, strlen(value) + 1);
        return 0;
    }
    snprintf(why, whylen, "%s: unknown setting '%s' (known: listen, key-file, driver)", where, name);
    return -1;
}

int agent_config_parse(agent_config *c, const char *text, size_t len, const char *path, char *why, size_t whylen)
{
    memset(c, 0, sizeof *c);
    if (memchr(text, '\0', len)) {
        snprintf(why, whylen, "%s: a NUL byte: not a text file", path);
        return -1;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        snprintf(why, whylen, "%s: no memory for its %zu bytes", path, len);
        return -1;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    int rc = 0;
    unsigned line_no = 0;
    for (char *line = copy, *next; line && rc == 0; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        line_no++;
        char where[AGENT_CONFIG_VALUE_MAX + 32];
        snprintf(where, sizeof where, "%s:%u", path, line_no);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(why, whylen, "%s: expected 'NAME = VALUE', found '%.80s'", where, s);
            rc = -1;
            break;
        }
        *eq = '\0';
        rc = setting(c, trim(s), trim(eq + 1), where, why, whylen);
    }
    free(copy);
    return rc;
}

int agent_config_read(agent_config *c, const char *path, char *why, size_t whylen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(CONFIG_BYTES_MAX + 1);
    if (!buf) {
        fclose(f);
        snprintf(why, whylen, "%s: no memory to read it", path);
        return -1;
    }
    size_t n = fread(buf, 1, CONFIG_BYTES_MAX + 1, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    int rc = -1;
    if (err)
        snprintf(why, whylen, "%s: %s", path, strerror(err));
    else if (n > CONFIG_BYTES_MAX)
        snprintf(why, whylen, "%s: longer than %d bytes", path, CONFIG_BYTES_MAX);
    else
        rc = agent_config_parse(c, buf, n, path, why, whylen);
    free(buf);
    return rc;
}

/* Parsing and printing of agents lists, addresses and device names. */
#include "proto/names.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int names_valid_name(const char *s, size_t len)
{
    if (len == 0 || len > NAMES_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

/* Decimal without sign or leading zeros, in [min, max]; -1 when not. */
static int64_t parse_decimal(const char *s, size_t len, int64_t min, int64_t max)
{
    if (len == 0 || len > 10 || (len > 1 && s[0] == '0'))
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v < min || v > max ? -1 : v;
}

static int valid_hostname(const char *s, size_t len)
{
    if (len == 0 || len > NAMES_HOST_MAX)
        return 0;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (label == 0 || s[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        if (!is_alnum(s[i]) && s[i] != '-')
            return 0;
        if (label == 0 && s[i] == '-')
            return 0;
        if (++label > 63)
            return 0;
    }
    return label > 0 && s[len - 1] != '-';
}

static int all_digits_and_dots(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!(s[i] >= '0' && s[i] <= '9') && s[i] != '.')
            return 0;
    return 1;
}

static int parse_address(const char *text, size_t len, bool any_port, names_address *out, rig_why *why);

int names_parse_address(const char *text, size_t len, names_address *out, rig_why *why)
{
    return parse_address(text, len, false, out, why);
}

int names_parse_listen(const char *text, names_address *out, rig_why *why)
{
    return parse_address(text, strlen(text), true, out, why);
}

static int parse_address(const char *text, size_t len, bool any_port, names_address *out, rig_why *why)
{
    memset(out, 0, sizeof *out);
    const char *host = text, *port;
    size_t host_len;
    if (len > 0 && text[0] == '[') {
        const char *close = memchr(text, ']', len);
        if (!close)
            return why_set(why, RIG_E_INVALID, "\"%.*s\": '[' without ']'", (int)len, text);
        host = text + 1;
        host_len = (size_t)(close - host);
        if (close + 1 == text + len || close[1] != ':')
            return why_set(why, RIG_E_INVALID, "\"%.*s\": a port must follow the bracketed address, as [%.*s]:PORT",
                           (int)len, text, (int)host_len, host);
        port = close + 2;
        char buf[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;
        if (host_len == 0 || host_len >= sizeof buf)
            return why_set(why, RIG_E_INVALID, "\"%.*s\": not an IPv6 address", (int)len, text);
        memcpy(buf, host, host_len);
        buf[host_len] = '\0';
        if (inet_pton(AF_INET6, buf, &a6) != 1)
            return why_set(why, RIG_E_INVALID, "\"%.*s\": \"%s\" is not an IPv6 address", (int)len, text, buf);
        out->ipv6 = 1;
    } else {
        const char *colon = memchr(text, ':', len);
        if (!colon)
            return why_set(why, RIG_E_INVALID, "\"%.*s\": no port (write HOST:PORT)", (int)len, text);
        if (memchr(colon + 1, ':', len - (size_t)(colon + 1 - text)))
            return why_set(why, RIG_E_INVALID,
                           "\"%.*s\" is ambiguous: an IPv6 address must be in brackets, as [ADDR]:PORT",
                           (int)len, text);
        host_len = (size_t)(colon - text);
        port = colon + 1;
        if (host_len > 0 && all_digits_and_dots(host, host_len)) {
            char buf[INET_ADDRSTRLEN + 1];
            struct in_addr a4;
            if (host_len >= sizeof buf)
                return why_set(why, RIG_E_INVALID, "\"%.*s\": not an IPv4 address", (int)len, text);
            memcpy(buf, host, host_len);
            buf[host_len] = '\0';
            if (inet_pton(AF_INET, buf, &a4) != 1)
                return why_set(why, RIG_E_INVALID, "\"%.*s\": \"%s\" is not an IPv4 address", (int)len, text, buf);
        } else if (!valid_hostname(host, host_len)) {
            return why_set(why, RIG_E_INVALID, "\"%.*s\": \"%.*s\" is not a host name", (int)len, text,
                           (int)host_len, host);
        }
    }
    size_t port_len = (size_t)(text + len - port);
    int64_t p = parse_decimal(port, port_len, any_port ? 0 : 1, 65535);
    if (p < 0)
        return why_set(why, RIG_E_INVALID, "\"%.*s\": port \"%.*s\" is not a number from %d to 65535",
                       (int)len, text, (int)port_len, port, any_port ? 0 : 1);
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    out->port = (uint16_t)p;
    return 0;
}

static int same_address(const names_address *a, const names_address *b)
{
    return a->port == b->port && a->ipv6 == b->ipv6 && strcmp(a->host, b->host) == 0;
}

int names_parse_agents(const char *text, names_agents *out, rig_why *why)
{
    out->count = 0;
    out->agents = NULL;
    if (!text)
        return why_set(why, RIG_E_INVALID, "RIG_REMOTE_AGENTS is not set");
    size_t total = strlen(text);
    if (total == 0)
        return why_set(why, RIG_E_INVALID, "RIG_REMOTE_AGENTS is empty");

    names_agents list = { 0, calloc(NAMES_AGENTS_MAX, sizeof(names_agent)) };
    if (!list.agents)
        return why_set(why, RIG_E_NOMEM, "no memory for the agents list");
    int rc = 0;
    const char *p = text, *end = text + total;
    for (size_t index = 1;; index++) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        /* Spaces around an entry are forgiven; inside one they are not. */
        while (p < stop && *p == ' ')
            p++;
        const char *last = stop;
        while (last > p && last[-1] == ' ')
            last--;
        size_t len = (size_t)(last - p);
        if (len == 0) {
            rc = why_set(why, RIG_E_INVALID, "RIG_REMOTE_AGENTS: entry %zu is empty", index);
            goto out;
        }
        if (list.count == NAMES_AGENTS_MAX) {
            rc = why_set(why, RIG_E_INVALID, "RIG_REMOTE_AGENTS: more than %d agents", NAMES_AGENTS_MAX);
            goto out;
        }
        const char *eq = memchr(p, '=', len);
        if (!eq) {
            rc = why_set(why, RIG_E_INVALID, "RIG_REMOTE_AGENTS: entry \"%.*s\" is not NAME=ADDR:PORT",
                         (int)len, p);
            goto out;
        }
        size_t name_len = (size_t)(eq - p);
        if (!names_valid_name(p, name_len)) {
            rc = why_set(why, RIG_E_INVALID,
                         "RIG_REMOTE_AGENTS: \"%.*s\" is not a name (1 to %d letters, digits, '.', '_', '-')",
                         (int)name_len, p, NAMES_NAME_MAX);
            goto out;
        }
        names_agent *a = &list.agents[list.count];
        memcpy(a->name, p, name_len);
        a->name[name_len] = '\0';
        rc = names_parse_address(eq + 1, (size_t)(last - eq - 1), &a->addr, why);
        if (rc < 0) {
            why_prefix(why, rc, "RIG_REMOTE_AGENTS: agent %s", a->name);
            goto out;
        }
        for (size_t i = 0; i < list.count; i++) {
            if (strcmp(list.agents[i].name, a->name) == 0) {
                rc = why_set(why, RIG_E_INVALID, "RIG_REMOTE_AGENTS: the name %s is given twice", a->name);
                goto out;
            }
            if (same_address(&list.agents[i].addr, &a->addr)) {
                rc = why_set(why, RIG_E_INVALID, "RIG_REMOTE_AGENTS: %s and %s are the same address %.*s",
                             list.agents[i].name, a->name, (int)(last - eq - 1), eq + 1);
                goto out;
            }
        }
        list.count++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = list;
    return 0;
out:
    free(list.agents);
    return rc;
}

void names_agents_free(names_agents *list)
{
    if (!list)
        return;
    free(list->agents);
    list->agents = NULL;
    list->count = 0;
}

/* Parses the machine part M: a NAME, or HOST:PORT with an optional #N. */
static int parse_machine(const char *text, size_t len, names_name *out, rig_why *why)
{
    const char *hash = memchr(text, '#', len);
    size_t addr_len = hash ? (size_t)(hash - text) : len;
    if (!memchr(text, ':', addr_len) && !memchr(text, '[', addr_len)) {
        if (hash || !names_valid_name(text, len))
            return why_set(why, RIG_E_INVALID, "\"%.*s\" is neither a machine name nor HOST:PORT",
                           (int)len, text);
        out->named = 1;
        memcpy(out->name, text, len);
        out->name[len] = '\0';
        return 0;
    }
    int rc = names_parse_address(text, addr_len, &out->addr, why);
    if (rc < 0)
        return rc;
    out->instance = 1;
    if (hash) {
        int64_t n = parse_decimal(hash + 1, len - addr_len - 1, 1, 65535);
        if (n < 0)
            return why_set(why, RIG_E_INVALID, "\"%.*s\": \"#%.*s\" is not a connection number from 1 to 65535",
                           (int)len, text, (int)(len - addr_len - 1), hash + 1);
        out->instance = (uint32_t)n;
    }
    return 0;
}

int names_parse(const char *text, names_name *out, rig_why *why)
{
    memset(out, 0, sizeof *out);
    size_t len = strlen(text);
    const char *at = memchr(text, '@', len);
    if (!at) {
        out->kind = NAMES_ADDRESS;
        int rc = parse_machine(text, len, out, why);
        if (rc == 0 && out->named)
            return why_set(why, RIG_E_INVALID, "\"%s\" is not HOST:PORT, CPU@M or CUDA:N@M", text);
        return rc;
    }
    size_t dev_len = (size_t)(at - text);
    if (dev_len == 3 && memcmp(text, "CPU", 3) == 0) {
        out->kind = NAMES_CPU;
    } else if (dev_len > 5 && memcmp(text, "CUDA:", 5) == 0) {
        int64_t n = parse_decimal(text + 5, dev_len - 5, 0, INT32_MAX);
        if (n < 0)
            return why_set(why, RIG_E_INVALID, "\"%s\": \"%.*s\" is not a device number", text,
                           (int)(dev_len - 5), text + 5);
        out->kind = NAMES_CUDA;
        out->device = (uint32_t)n;
    } else {
        return why_set(why, RIG_E_INVALID, "\"%s\": the device before '@' must be CPU or CUDA:N", text);
    }
    size_t machine_len = len - dev_len - 1;
    if (machine_len == 0)
        return why_set(why, RIG_E_INVALID, "\"%s\": no machine after '@'", text);
    return parse_machine(at + 1, machine_len, out, why);
}

int names_format(const names_name *n, char *out, size_t cap)
{
    char machine[NAMES_TEXT_MAX];
    if (n->named) {
        snprintf(machine, sizeof machine, "%s", n->name);
    } else {
        int k = snprintf(machine, sizeof machine, n->addr.ipv6 ? "[%s]:%u" : "%s:%u", n->addr.host,
                         (unsigned)n->addr.port);
        if (n->instance > 1)
            snprintf(machine + k, sizeof machine - (size_t)k, "#%u", (unsigned)n->instance);
    }
    int len;
    switch (n->kind) {
    case NAMES_CPU: len = snprintf(out, cap, "CPU@%s", machine); break;
    case NAMES_CUDA: len = snprintf(out, cap, "CUDA:%u@%s", (unsigned)n->device, machine); break;
    default: len = snprintf(out, cap, "%s", machine); break;
    }
    return len < 0 || (size_t)len >= cap ? RIG_E_TOO_LONG : len;
}

/* `rig probe NAME` and `rig ls`: what machines offer, asked live. Each runs
 * `RIG agent --probe --json` on the machine (over ssh, or here for
 * `local`) and renders its answer. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/child.h"
#include "launcher/json.h"
#include "launcher/fleet.h"
#include "launcher/launcher.h"
#include "launcher/probe.h"
#include "launcher/status.h"
#include "launcher/targets.h"


static const char probe_usage[] =
    "Usage: rig probe [--json] [--rig PATH] [NAME...]\n"
    "Shows what each target NAME offers (default: $RIG_ON, else the targets file's\n"
    "default, else local): its driver and version, each device's name, compute\n"
    "capability and memory, and whether an agent there is serving a job (busy).\n"
    "A NAME may be a group of the targets file or a list (b,c): each machine of it.\n"
    "  --json       print the machine's answer as JSON\n"
    "  --rig PATH   rig's path on the remote machine (default: rig on its PATH)\n";

static const char ls_usage[] =
    "Usage: rig ls [--json] [--rig PATH]\n"
    "Lists every target of the targets file (and `local`), asked live: one line\n"
    "each with its state (free, busy or down) and devices. `*` marks the default.\n"
    "Then each group (several machines, one target: `group NAME b,c`): its\n"
    "members, free when all are (else busy, or down naming the machines down),\n"
    "and the devices of all of them, as a job on it sees them.\n"
    "A target with a standing agent gets a second line from the agent itself,\n"
    "asked with the fleet key: free, or busy and the job's controller; its\n"
    "devices with memory used and free.\n"
    "  --json       one JSON object per target, in an array\n"
    "  --rig PATH   rig's path on the remote machines (default: rig on their PATH)\n";

/* Starts p's probe; self is NULL when this program's path is unknown. */
static void start(probe *p, const char *self, const char *rig)
{
    const char *argv[TARGETS_SSH_ARGV_MAX];
    char remote[LAUNCHER_REMOTE_MAX] = "";
    if (p->t->local) {
        if (!self) {
            snprintf(p->why, sizeof p->why, "cannot find this program (/proc/self/exe)");
            p->exited = true;
            return;
        }
        argv[0] = self;
        argv[1] = "agent";
        argv[2] = "--probe";
        argv[3] = "--json";
        argv[4] = NULL;
    } else {
        if (shell_join(remote, sizeof remote, (const char *const[]){ "exec", rig, "agent", "--probe", "--json", NULL }) < 0) {
            snprintf(p->why, sizeof p->why, "the remote command is longer than %zu bytes", sizeof remote - 1);
            p->exited = true;
            return;
        }
        targets_ssh_argv(p->t, remote, false, argv);
    }
    rig_why why = { "" };
    p->out = malloc(PROBE_OUT_MAX + 1);
    if (!p->out || child_spawn(&p->c, argv, &why) < 0) {
        snprintf(p->why, sizeof p->why, "%s", p->out ? why.text : "out of memory");
        p->exited = true;
        return;
    }
    close(p->c.in);
    p->c.in = -1;
}

/* The last non-empty line of text. */
static void last_line(const char *text, char *out, size_t cap)
{
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        n--;
    size_t b = n;
    while (b && text[b - 1] != '\n')
        b--;
    snprintf(out, cap, "%.*s", (int)(n - b), text + b);
}

static void finish(probe *p, bool timed_out)
{
    child_stop(&p->c, 0);
    if (p->why[0])
        return;
    if (timed_out) {
        snprintf(p->why, sizeof p->why, "no answer within %d s", PROBE_TIMEOUT_MS / 1000);
        return;
    }
    p->out[p->outlen] = '\0';
    p->err[p->errlen] = '\0';
    char line[600];
    last_line(p->out, line, sizeof line);
    p->answer = json_parse(p->out);
    if (p->answer && p->answer->type == JSON_OBJECT) {
        const char *e = json_str(p->answer, "error");
        if (*e)
            snprintf(p->why, sizeof p->why, "%s", e);
        return;
    }
    json_free(p->answer);
    p->answer = NULL;
    last_line(p->err, line, sizeof line);
    int st = p->c.status;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !p->t->local)
        snprintf(p->why, sizeof p->why, "%s (is rig installed there? --rig PATH names it)",
                 line[0] ? line : "rig not found");
    else if (line[0])
        snprintf(p->why, sizeof p->why, "%s", line);
    else
        child_status_text(st, p->why, sizeof p->why);
}

void probe_all(probe *ps, size_t n, const char *rig)
{
    char self[LAUNCHER_PATH_MAX + 1];
    bool known = self_path(self, sizeof self) == 0;
    for (size_t i = 0; i < n; i++)
        start(&ps[i], known ? self : NULL, rig);
    long long until = child_now_ms() + PROBE_TIMEOUT_MS;
    for (;;) {
        struct pollfd pf[2 * TARGETS_MAX];
        size_t k = 0;
        bool open = false;
        for (size_t i = 0; i < n; i++) {
            pf[k++] = (struct pollfd){ ps[i].exited ? -1 : ps[i].c.out, POLLIN, 0 };
            pf[k++] = (struct pollfd){ ps[i].exited ? -1 : ps[i].c.err, POLLIN, 0 };
            open |= !ps[i].exited && (ps[i].c.out >= 0 || ps[i].c.err >= 0);
        }
        long long left = until - child_now_ms();
        if (!open || left <= 0)
            break;
        poll(pf, (nfds_t)k, (int)left);
        for (size_t i = 0; i < n; i++) {
            probe *p = &ps[i];
            if (p->exited)
                continue;
            if (p->c.out >= 0 && (pf[2 * i].revents & (POLLIN | POLLHUP | POLLERR))) {
                ssize_t r = read(p->c.out, p->out + p->outlen, PROBE_OUT_MAX - p->outlen);
                if (r > 0)
                    p->outlen += (size_t)r;
                else if (r == 0 || errno != EINTR) {
                    close(p->c.out);
                    p->c.out = -1;
                }
            }
            if (p->c.err >= 0 && (pf[2 * i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
                char buf[1024];
                ssize_t r = read(p->c.err, buf, sizeof buf);
                if (r > 0) {
                    if (p->errlen + (size_t)r >= sizeof p->err) {   /* keep the end */
                        size_t drop = p->errlen + (size_t)r - (sizeof p->err - 1);
                        drop = drop > p->errlen ? p->errlen : drop;
                        memmove(p->err, p->err + drop, p->errlen - drop);
                        p->errlen -= drop;
                    }
                    size_t take = (size_t)r < sizeof p->err - 1 - p->errlen ? (size_t)r : sizeof p->err - 1 - p->errlen;
                    memcpy(p->err + p->errlen, buf + r - take, take);
                    p->errlen += take;
                } else if (r == 0 || errno != EINTR) {
                    close(p->c.err);
                    p->c.err = -1;
                }
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!ps[i].exited)
            finish(&ps[i], ps[i].c.out >= 0 || ps[i].c.err >= 0);
}

void probe_free(probe *p)
{
    free(p->out);
    json_free(p->answer);
}

static void gib(char *out, size_t cap, double bytes)
{
    snprintf(out, cap, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
}

static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* {"target":..,"address":.., then the machine's answer's members, or
 * "error"}. */
static void print_probe_json(const probe *p, const char *tail)
{
    printf("{\"target\":");
    print_json_string(p->t->name);
    printf(",\"address\":");
    print_json_string(p->t->address);
    if (p->answer && !p->why[0]) {
        const char *body = strchr(p->out, '{') + 1;
        size_t len = strlen(body);
        while (len && (body[len - 1] == '\n' || body[len - 1] == ' '))
            len--;
        /* The answer's members, then tail's, then its closing brace. */
        if (len && body[len - 1] == '}')
            len--;
        printf("%s%.*s%s}", body[0] == '}' ? "" : ",", (int)len, body, tail);
    } else {
        printf(",\"error\":");
        print_json_string(p->why);
        printf("%s}", tail);
    }
}

static const char *state_of(const probe *p)
{
    return p->why[0] ? "down" : json_bool(p->answer, "busy") ? "busy" : "free";
}

static void print_probe_table(const probe *p)
{
    const json *a = p->answer;
    int v = (int)json_num(a, "version", 0);
    printf("%s (%s): host %s, %s %d.%d (%s), %s", p->t->name, p->t->address, json_str(a, "host"),
           json_str(a, "driver"), v / 1000, v % 1000 / 10, json_str(a, "path"), state_of(p));
    if (json_bool(a, "busy"))
        printf(": serving a job%s%s", *json_str(a, "controller") ? " from " : "", json_str(a, "controller"));
    printf("\n%-8s %-32s %-5s %12s %12s\n", "DEVICE", "NAME", "CC", "MEMORY", "FREE");
    const json *devs = json_get(a, "devices");
    for (size_t i = 0; devs && devs->type == JSON_ARRAY && i < devs->count; i++) {
        const json *d = &devs->items[i];
        char mem[32], fr[32], dev[24];
        gib(mem, sizeof mem, json_num(d, "memory", 0));
        gib(fr, sizeof fr, json_num(d, "free", 0));
        snprintf(dev, sizeof dev, "CUDA:%d", (int)json_num(d, "ordinal", (double)i));
        printf("%-8s %-32s %-5s %12s %12s\n", dev, json_str(d, "name"), json_str(d, "cc"), mem, fr);
    }
}

int probe_main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, 'j' }, { "rig", required_argument, NULL, 'R' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
    bool as_json = false;
    const char *rig = "rig";
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 'j': as_json = true; break;
        case 'R': rig = optarg; break;
        case 'h': fputs(probe_usage, stdout); return 0;
        default: fputs(probe_usage, stderr); return 1;
        }
    }
    if (!rig_path_ok("rig probe", rig, probe_usage))
        return 1;
    static targets t;
    static const target *chosen[TARGETS_MAX];
    size_t n = 0;
    rig_why why = { "" };
    if (targets_load(&t, &why) < 0) {
        fprintf(stderr, "rig probe: %s\n", why.text);
        return RIG_EXIT_OWN_FAILURE;
    }
    if (optind == argc && targets_select(&t, NULL, chosen, &n, &why) < 0) {
        fprintf(stderr, "rig probe: %s\n", why.text);
        return RIG_EXIT_OWN_FAILURE;
    }
    /* Each NAME a target, a group or a list (b,c): every machine once. */
    for (int i = optind; i < argc; i++) {
        static const target *some[TARGETS_MAX];
        size_t k = 0;
        if (targets_select(&t, argv[i], some, &k, &why) < 0) {
            fprintf(stderr, "rig probe: %s\n", why.text);
            return RIG_EXIT_OWN_FAILURE;
        }
        for (size_t j = 0; j < k; j++) {
            bool seen = false;
            for (size_t m = 0; m < n && !seen; m++)
                seen = chosen[m] == some[j];
            if (!seen && n < TARGETS_MAX)
                chosen[n++] = some[j];
        }
    }
    probe *ps = calloc(n, sizeof *ps);
    if (!ps)
        return RIG_EXIT_OWN_FAILURE;
    for (size_t i = 0; i < n; i++) {
        ps[i].t = chosen[i];
        ps[i].c.in = ps[i].c.out = ps[i].c.err = -1;
    }
    probe_all(ps, n, rig);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        probe *p = &ps[i];
        if (p->why[0])
            rc = RIG_EXIT_OWN_FAILURE;
        if (as_json) {
            print_probe_json(p, "");
            putchar('\n');
        } else if (p->why[0]) {
            fprintf(stderr, "rig probe: %s: %s\n", p->t->name, p->why);
        } else {
            print_probe_table(p);
        }
        probe_free(p);
    }
    free(ps);
    return rc;
}

/* The standing agent of t, as it answers a holder of the fleet key:
 * "  standing ADDR: free|busy (a job from ADDR); CUDA:0 NAME 1.2 of 80.0 GiB used, ..." */
static void print_standing(const target *t, const rig_key *key, const char *no_key)
{
    if (!key) {
        printf("  standing %s: %s\n", t->standing, no_key);
        return;
    }
    rig_why why = { "" };
    json *a = agent_status(t->standing, key, NULL, &why);
    if (!a) {
        printf("  standing %s: down: %s\n", t->standing, why.text);
        return;
    }
    const json *machine = json_get(a, "machine");
    const char *err = machine ? json_str(machine, "error") : "the agent's probe said nothing";
    if (*err) {
        printf("  standing %s: no driver: %s\n", t->standing, err);
        json_free(a);
        return;
    }
    bool busy = json_bool(a, "busy");
    printf("  standing %s: %s%s%s", t->standing, busy ? "busy" : "free",
           busy && *json_str(a, "controller") ? ", a job from " : "", busy ? json_str(a, "controller") : "");
    const json *devs = json_get(machine, "devices");
    for (size_t i = 0; devs && devs->type == JSON_ARRAY && i < devs->count; i++) {
        const json *d = &devs->items[i];
        double total = json_num(d, "memory", 0), free = json_num(d, "free", 0);
        char used_s[32], total_s[32];
        gib(used_s, sizeof used_s, total - free);
        gib(total_s, sizeof total_s, total);
        printf("%s CUDA:%d %s %s of %s used", i ? "," : ";", (int)json_num(d, "ordinal", (double)i),
               json_str(d, "name"), used_s, total_s);
    }
    putchar('\n');
    json_free(a);
}

/* ,"standing":{"address":..., "status": the agent's answer | "error": why}
 * for `rig ls --json` (malloc'd). */
static char *standing_json(const target *t, const rig_key *key, const char *no_key)
{
    rig_why why = { "" };
    char *text = NULL;
    json *a = key ? agent_status(t->standing, key, &text, &why) : NULL;
    json_free(a);
    const char *err = key ? why.text : no_key;
    size_t cap = 128 + strlen(t->standing) + (text ? strlen(text) : 2 * strlen(err) + 8);
    char *out = malloc(cap);
    if (!out) {
        free(text);
        return NULL;
    }
    int n = snprintf(out, cap, ",\"standing\":{\"address\":\"%s\",", t->standing);   /* HOST:PORT: plain */
    if (text) {
        snprintf(out + n, cap - (size_t)n, "\"status\":%s}", text);
    } else {
        n += snprintf(out + n, cap - (size_t)n, "\"error\":\"");
        for (const char *c = err; *c && (size_t)n < cap - 4; c++)
            if ((unsigned char)*c >= 0x20 && *c != '"' && *c != '\\')
                out[n++] = *c;
        snprintf(out + n, cap - (size_t)n, "\"}");
    }
    free(text);
    return out;
}

/* The device k of the machines' answers taken in order, or NULL. */
static const json *nth_device(const json *const a[], size_t n, size_t k)
{
    for (size_t m = 0; m < n; m++) {
        const json *devs = json_get(a[m], "devices");
        size_t c = devs && devs->type == JSON_ARRAY ? devs->count : 0;
        if (k < c)
            return &devs->items[k];
        k -= c;
    }
    return NULL;
}

/* "2 x NVIDIA H100 (9.0, 80.0 GiB)" for the devices of n machines (one, or
 * a group's members) together. */
static void summary(const json *const a[], size_t n, char *out, size_t cap)
{
    size_t off = 0, count = 0;
    out[0] = '\0';
    while (nth_device(a, n, count))
        count++;
    if (count == 0) {
        snprintf(out, cap, "no devices");
        return;
    }
    for (size_t i = 0; i < count; i++) {
        const json *d = nth_device(a, n, i);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(json_str(nth_device(a, n, j), "name"), json_str(d, "name")) == 0;
        if (seen)
            continue;
        int same = 0;
        for (size_t j = i; j < count; j++)
            same += strcmp(json_str(nth_device(a, n, j), "name"), json_str(d, "name")) == 0;
        char mem[32];
        gib(mem, sizeof mem, json_num(d, "memory", 0));
        if (off < cap)
            off += (size_t)snprintf(out + off, cap - off, "%s%d x %s (%s, %s)", off ? ", " : "", same,
                                    json_str(d, "name"), json_str(d, "cc"), mem);
    }
    if (off >= cap && cap > 4)   /* cut: say so */
        memcpy(out + cap - 4, "...", 4);
}

/* A group's state from its members' probes: down (naming them) when any is
 * down, else busy when any is busy, else free; *what gets the summary or
 * the machines down. */
static const char *group_state(const targets *t, const target_group *g, const probe *ps, char *what, size_t cap)
{
    const target *sel[TARGETS_MAX];
    const json *a[TARGETS_MAX];
    size_t n = 0, down = 0;
    rig_why why = { "" };
    bool busy = false;
    if (targets_select(t, g->members, sel, &n, &why) < 0) {   /* targets_load checked it */
        snprintf(what, cap, "%s", why.text);
        return "down";
    }
    size_t off = 0;
    what[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const probe *p = &ps[sel[i] - t->v];
        a[i] = p->answer;
        if (p->why[0]) {
            if (off < cap)
                off += (size_t)snprintf(what + off, cap - off, "%s%s: %s", down ? "; " : "", sel[i]->name, p->why);
            down++;
        } else {
            busy |= json_bool(p->answer, "busy");
        }
    }
    if (down)
        return "down";
    summary(a, n, what, cap);
    return busy ? "busy" : "free";
}

int ls_main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, 'j' }, { "rig", required_argument, NULL, 'R' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
    bool as_json = false;
    const char *rig = "rig";
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 'j': as_json = true; break;
        case 'R': rig = optarg; break;
        case 'h': fputs(ls_usage, stdout); return 0;
        default: fputs(ls_usage, stderr); return 1;
        }
    }
    if (!rig_path_ok("rig ls", rig, ls_usage))
        return 1;
    if (optind < argc) {
        fprintf(stderr, "rig ls: unexpected argument '%s'\n%s", argv[optind], ls_usage);
        return 1;
    }
    static targets t;
    rig_why why = { "" };
    if (targets_load(&t, &why) < 0) {
        fprintf(stderr, "rig ls: %s\n", why.text);
        return RIG_EXIT_OWN_FAILURE;
    }
    probe *ps = calloc(t.count, sizeof *ps);
    if (!ps)
        return RIG_EXIT_OWN_FAILURE;
    for (size_t i = 0; i < t.count; i++) {
        ps[i].t = &t.v[i];
        ps[i].c.in = ps[i].c.out = ps[i].c.err = -1;
    }
    probe_all(ps, t.count, rig);
    /* Standing agents are asked with the fleet key, when there is one. */
    rig_key fleet;
    char key_why[600] = "", key_path[LAUNCHER_PATH_MAX + 1];
    bool any_standing = false, have_key = false;
    for (size_t i = 0; i < t.count; i++)
        any_standing |= t.v[i].standing[0] != '\0';
    if (any_standing) {
        /* fleet_key_read says why on stderr; the line under each agent says it short. */
        have_key = fleet_key_read(&fleet, key_path, sizeof key_path, "rig ls") == 0;
        if (!have_key)
            snprintf(key_why, sizeof key_why, "no fleet key to ask it with");
    }
    size_t wname = 4, waddr = 7;
    for (size_t i = 0; i < t.count; i++) {
        wname = strlen(t.v[i].name) + 1 > wname ? strlen(t.v[i].name) + 1 : wname;
        waddr = strlen(t.v[i].address) > waddr ? strlen(t.v[i].address) : waddr;
    }
    for (size_t i = 0; i < t.groups; i++) {
        wname = strlen(t.g[i].name) + 1 > wname ? strlen(t.g[i].name) + 1 : wname;
        waddr = strlen(t.g[i].members) > waddr ? strlen(t.g[i].members) : waddr;
    }
    if (as_json)
        printf("[");
    else
        printf("%-*s %-*s %-5s %s\n", (int)wname, "NAME", (int)waddr, "ADDRESS", "STATE", "DEVICES");
    for (size_t i = 0; i < t.count; i++) {
        probe *p = &ps[i];
        if (as_json) {
            printf(i ? ",\n " : "");
            char *tail = p->t->standing[0] ? standing_json(p->t, have_key ? &fleet : NULL, key_why) : NULL;
            print_probe_json(p, tail ? tail : "");
            free(tail);
            continue;
        }
        char name[NAMES_NAME_MAX + 2], what[1024];
        bool dflt = strcmp(t.default_name[0] ? t.default_name : "local", p->t->name) == 0;
        snprintf(name, sizeof name, "%s%s", p->t->name, dflt ? "*" : "");
        if (p->why[0])
            snprintf(what, sizeof what, "%s", p->why);
        else
            summary((const json *const[]){ p->answer }, 1, what, sizeof what);
        printf("%-*s %-*s %-5s %s\n", (int)wname, name, (int)waddr, p->t->address, state_of(p), what);
        if (p->t->standing[0])
            print_standing(p->t, have_key ? &fleet : NULL, key_why);
    }
    /* Groups after the machines, from the same probes. */
    for (size_t i = 0; i < t.groups; i++) {
        const target_group *g = &t.g[i];
        char what[1024];
        const char *state = group_state(&t, g, ps, what, sizeof what);
        if (as_json) {
            printf(",\n {\"group\":");
            print_json_string(g->name);
            printf(",\"members\":[");
            const char *m = g->members;
            for (bool first = true;; first = false) {
                size_t len = strcspn(m, ",");
                printf("%s\"%.*s\"", first ? "" : ",", (int)len, m);   /* names: plain */
                if (!m[len])
                    break;
                m += len + 1;
            }
            printf("],\"state\":\"%s\",\"%s\":", state, strcmp(state, "down") == 0 ? "error" : "summary");
            print_json_string(what);
            putchar('}');
            continue;
        }
        char name[NAMES_NAME_MAX + 2];
        snprintf(name, sizeof name, "%s%s", g->name, strcmp(t.default_name, g->name) == 0 ? "*" : "");
        printf("%-*s %-*s %-5s %s\n", (int)wname, name, (int)waddr, g->members, state, what);
    }
    if (as_json)
        printf("]\n");
    if (have_key)
        key_wipe(&fleet);
    for (size_t i = 0; i < t.count; i++)
        probe_free(&ps[i]);
    free(ps);
    return 0;
}

/* `rig-agent --probe [--json]`: what this machine offers a job, for `rig
 * probe` and `rig ls`: the driver and its version, each device's name,
 * memory and compute capability, and whether a rig agent here is serving a
 * job now (found from /proc: a worker process of an agent holding a
 * connection accepted on the agent's listening port). */
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"

int agent_probe(FILE *out, const char *driver, bool json);

#define PROBE_SOCKETS_MAX 256

typedef struct agent_seen {
    int agents;              /* other agent processes found */
    int serving;             /* of them, serving a job */
    char peer[64];           /* the controller of one job served */
} agent_seen;

/* True when pid is a rig agent other than this process: rig-agent, or rig
 * whose first argument is `agent`, not probing. */
static bool is_agent(const char *pid)
{
    char path[300], exe[4096];
    snprintf(path, sizeof path, "/proc/%s/exe", pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    if (strcmp(base, "rig-agent") != 0 && strcmp(base, "rig") != 0)
        return false;
    snprintf(path, sizeof path, "/proc/%s/cmdline", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char cmd[4096];
    size_t len = fread(cmd, 1, sizeof cmd - 1, f);
    fclose(f);
    cmd[len] = '\0';
    bool agent = strcmp(base, "rig-agent") == 0;
    bool probing = false;
    size_t first = strlen(cmd) + 1;
    if (first < len && strcmp(cmd + first, "agent") == 0)
        agent = true;
    for (size_t i = 0; i < len; i += strlen(cmd + i) + 1)
        if (strcmp(cmd + i, "--probe") == 0)
            probing = true;
    return agent && !probing;
}

/* The socket inodes among pid's descriptors. */
static size_t socket_inodes(const char *pid, unsigned long *inodes, size_t cap)
{
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/fd", pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < cap;) {
        char link[600], target[64];
        snprintf(link, sizeof link, "%s/%s", path, e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        unsigned long ino;
        if (sscanf(target, "socket:[%lu]", &ino) == 1)
            inodes[n++] = ino;
    }
    closedir(d);
    return n;
}

typedef struct tcp_entry {
    unsigned lport;
    char remote[64];
    int state;               /* 0x0A listening, 0x01 established */
} tcp_entry;

/* Looks inode up in /proc/net/tcp and tcp6. */
static bool tcp_find(unsigned long inode, tcp_entry *e)
{
    static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
    for (size_t f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        if (!fp)
            continue;
        char line[512];
        bool found = false;
        while (!found && fgets(line, sizeof line, fp)) {
            char local[64], remote[64];
            unsigned st;
            unsigned long ino;
            if (sscanf(line, " %*d: %63s %63s %x %*s %*s %*s %*s %*s %lu", local, remote, &st, &ino) != 4 ||
                ino != inode)
                continue;
            const char *colon = strrchr(local, ':');
            const char *rcolon = strrchr(remote, ':');
            e->lport = colon ? (unsigned)strtoul(colon + 1, NULL, 16) : 0;
            e->state = (int)st;
            e->remote[0] = '\0';
            if (f == 0 && rcolon && rcolon - remote == 8) {
                unsigned long a = strtoul(remote, NULL, 16);   /* little-endian bytes */
                snprintf(e->remote, sizeof e->remote, "%lu.%lu.%lu.%lu:%lu", a & 255, (a >> 8) & 255,
                         (a >> 16) & 255, (a >> 24) & 255, strtoul(rcolon + 1, NULL, 16));
            }
            found = true;
        }
        fclose(fp);
        if (found)
            return true;
    }
    return false;
}

typedef struct agent_proc_seen {
    tcp_entry t[PROBE_SOCKETS_MAX];
    size_t nt;
    bool listens;
} agent_proc_seen;

/* A listener is an agent; a job is served by one of its worker processes,
 * which holds an established connection on a listening port but listens on
 * none (connections still proving the key sit in the listener: they serve
 * nothing). */
static void find_agents(agent_seen *seen)
{
    memset(seen, 0, sizeof *seen);
    DIR *d = opendir("/proc");
    if (!d)
        return;
    char self[32];
    snprintf(self, sizeof self, "%d", (int)getpid());
    agent_proc_seen *procs = NULL;
    size_t np = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!isdigit((unsigned char)e->d_name[0]) || strcmp(e->d_name, self) == 0 || !is_agent(e->d_name))
            continue;
        agent_proc_seen *more = realloc(procs, (np + 1) * sizeof *procs);
        if (!more) {
            agent_log("probe: no memory to look at more than %zu agent processes; those counted are shown", np);
            break;
        }
        procs = more;
        agent_proc_seen *p = &procs[np++];
        memset(p, 0, sizeof *p);
        unsigned long inodes[PROBE_SOCKETS_MAX];
        size_t n = socket_inodes(e->d_name, inodes, PROBE_SOCKETS_MAX);
        for (size_t i = 0; i < n; i++)
            if (tcp_find(inodes[i], &p->t[p->nt])) {
                p->listens |= p->t[p->nt].state == 0x0A;
                p->nt++;
            }
    }
    closedir(d);
    for (size_t a = 0; a < np; a++) {
        if (!procs[a].listens)
            continue;
        seen->agents++;
        bool serving = false;
        for (size_t l = 0; l < procs[a].nt; l++) {
            if (procs[a].t[l].state != 0x0A)
                continue;
            for (size_t w = 0; w < np && !serving; w++) {
                if (procs[w].listens)
                    continue;
                for (size_t i = 0; i < procs[w].nt && !serving; i++)
                    if (procs[w].t[i].state == 0x01 && procs[w].t[i].lport == procs[a].t[l].lport) {
                        serving = true;
                        if (!seen->peer[0])
                            snprintf(seen->peer, sizeof seen->peer, "%s", procs[w].t[i].remote);
                    }
            }
        }
        seen->serving += serving;
    }
    free(procs);
}

/* Writes s as a JSON string. */
static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

int agent_probe(FILE *out, const char *driver, bool json)
{
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    agent_seen seen;
    find_agents(&seen);
    backend b;
    char why[600];
    if (backend_open(&b, driver, why, sizeof why) < 0) {
        if (json) {
            fprintf(out, "{\"host\":");
            json_string(out, host);
            fprintf(out, ",\"error\":");
            json_string(out, why);
            fprintf(out, "}\n");
        } else {
            fprintf(out, "%s: no driver to replay on: %s\n", host, why);
        }
        return 1;
    }
    int version = 0;
    if (b.drv.fn_cuDriverGetVersion)
        b.drv.fn_cuDriverGetVersion(&version);
    if (json) {
        fprintf(out, "{\"host\":");
        json_string(out, host);
        fprintf(out, ",\"driver\":");
        json_string(out, b.kind);
        fprintf(out, ",\"path\":");
        json_string(out, b.drv.path);
        fprintf(out, ",\"version\":%d,\"agents\":%d,\"serving\":%d,\"busy\":%s,\"controller\":", version,
                seen.agents, seen.serving, seen.serving ? "true" : "false");
        json_string(out, seen.peer);
        fprintf(out, ",\"devices\":[");
    } else {
        fprintf(out, "%s: %s %d.%d (%s), %s", host, b.kind, version / 1000, version % 1000 / 10, b.drv.path,
                seen.serving ? "busy" : "free");
        if (seen.serving)
            fprintf(out, ": an agent here serves a job%s%s", seen.peer[0] ? " from " : "", seen.peer);
        fprintf(out, "\n  %-7s %-32s %-4s %12s %12s\n", "DEVICE", "NAME", "CC", "MEMORY", "FREE");
    }
    for (int d = 0; d < b.device_count; d++) {
        char name[256] = "?";
        int major = 0, minor = 0;
        size_t total = 0, free_b = 0;
        b.drv.fn_cuDeviceGetName(name, sizeof name, d);
        b.drv.fn_cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
        b.drv.fn_cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
        if (b.drv.fn_cuDeviceTotalMem_v2)
            b.drv.fn_cuDeviceTotalMem_v2(&total, d);
        if (b.drv.fn_cuCtxSetCurrent && b.drv.fn_cuMemGetInfo_v2 &&
            b.drv.fn_cuCtxSetCurrent(b.primary[d]) == CUDA_SUCCESS &&
            b.drv.fn_cuMemGetInfo_v2(&free_b, &total) != CUDA_SUCCESS)
            free_b = 0;
        if (json) {
            fprintf(out, "%s{\"ordinal\":%d,\"name\":", d ? "," : "", d);
            json_string(out, name);
            fprintf(out, ",\"cc\":\"%d.%d\",\"memory\":%zu,\"free\":%zu}", major, minor, total, free_b);
        } else {
            fprintf(out, "  CUDA:%-2d %-32s %d.%-2d %9.1f GiB %8.1f GiB\n", d, name, major, minor,
                    (double)total / (1 << 30), (double)free_b / (1 << 30));
        }
    }
    if (json)
        fprintf(out, "]}\n");
    return 0;
}

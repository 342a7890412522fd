/* Separate hosts as network namespaces; see netns.h. */
#include "tests/netns.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"

#define IP "/usr/sbin/ip"
#define TC "/usr/sbin/tc"
#define SSHD "/usr/sbin/sshd"
#define SSHD_START RIG_SOURCE_DIR "/tests/tools/sshd-start"
#define SSHD_STOP RIG_SOURCE_DIR "/tests/tools/sshd-stop"

static netns_lab *live[4];

static void down_live(void)
{
    for (int i = 0; i < 4; i++)
        if (live[i])
            netns_lab_down(live[i]);
}

/* Runs argv; its output when it fails (asserting when must). */
static int run(char *const argv[], bool must)
{
    program_result r = program_run(argv, NULL, 30);
    int st = r.status;
    if (must)
        cr_assert_eq(st, 0, "%s %s %s exited %d:\n%s", argv[0], argv[1], argv[2] ? argv[2] : "", st, r.output);
    program_result_free(&r);
    return st;
}

bool netns_available(char *why, size_t cap)
{
    if (geteuid() != 0) {
        snprintf(why, cap, "not root: network namespaces need root");
        return false;
    }
    if (access(IP, X_OK) != 0 || access(TC, X_OK) != 0) {
        snprintf(why, cap, "no %s or %s (apt-get install iproute2)", IP, TC);
        return false;
    }
    char name[32];
    snprintf(name, sizeof name, "rigprobe%d", (int)getpid());
    program_result r = program_run((char *[]){ IP, "netns", "add", name, NULL }, NULL, 30);
    bool ok = r.status == 0;
    if (!ok)
        snprintf(why, cap, "ip netns add failed: %.200s", r.output);
    program_result_free(&r);
    if (ok)
        run((char *[]){ IP, "netns", "del", name, NULL }, false);
    return ok;
}

void netns_lab_up(netns_lab *lab, const char *const names[], int n)
{
    cr_assert_leq(n, NETNS_HOSTS_MAX);
    memset(lab, 0, sizeof *lab);
    /* One lab per test process at a time of this id: the pid keeps the
     * names and addresses of tests running at once apart. */
    lab->id = 10 + (int)(getpid() % 240);
    snprintf(lab->bridge, sizeof lab->bridge, "rigbr%d", lab->id);
    static bool hooked;
    if (!hooked) {
        atexit(down_live);
        hooked = true;
    }
    for (int i = 0; i < 4; i++)
        if (!live[i]) {
            live[i] = lab;
            break;
        }
    char cidr[32];
    run((char *[]){ IP, "link", "add", lab->bridge, "type", "bridge", NULL }, true);
    run((char *[]){ IP, "link", "set", lab->bridge, "up", NULL }, true);
    for (int i = 0; i < n; i++) {
        netns_host *h = &lab->h[lab->count++];
        snprintf(h->name, sizeof h->name, "%s", names[i]);
        snprintf(h->ns, sizeof h->ns, "rig%d-%s", lab->id, names[i]);
        snprintf(h->veth, sizeof h->veth, "rv%d-%d", lab->id, i);
        snprintf(h->addr, sizeof h->addr, "198.18.%d.%d", lab->id, i + 1);
        snprintf(cidr, sizeof cidr, "%s/24", h->addr);
        char peer[16];
        snprintf(peer, sizeof peer, "rp%d-%d", lab->id, i);
        run((char *[]){ IP, "netns", "add", h->ns, NULL }, true);
        run((char *[]){ IP, "link", "add", h->veth, "type", "veth", "peer", "name", peer, NULL }, true);
        run((char *[]){ IP, "link", "set", peer, "netns", h->ns, NULL }, true);
        run((char *[]){ IP, "link", "set", h->veth, "master", lab->bridge, "up", NULL }, true);
        run((char *[]){ IP, "-n", h->ns, "link", "set", peer, "name", "eth0", NULL }, true);
        run((char *[]){ IP, "-n", h->ns, "addr", "add", cidr, "dev", "eth0", NULL }, true);
        run((char *[]){ IP, "-n", h->ns, "link", "set", "eth0", "up", NULL }, true);
        run((char *[]){ IP, "-n", h->ns, "link", "set", "lo", "up", NULL }, true);
    }
}

void netns_lab_down(netns_lab *lab)
{
    /* An sshd outlives its namespace's deletion: it is stopped first. */
    for (int i = 0; i < lab->count; i++)
        if (lab->h[i].sshd) {
            char dir[sizeof lab->dir + 24];
            snprintf(dir, sizeof dir, "%s/sshd-%s", lab->dir, lab->h[i].name);
            run((char *[]){ SSHD_STOP, dir, NULL }, false);
            lab->h[i].sshd = false;
        }
    if (lab->dir[0]) {
        run((char *[]){ "/bin/rm", "-rf", lab->dir, NULL }, false);
        lab->dir[0] = '\0';
    }
    for (int i = 0; i < lab->count; i++) {
        run((char *[]){ IP, "netns", "del", lab->h[i].ns, NULL }, false);
        run((char *[]){ IP, "link", "del", lab->h[i].veth, NULL }, false);
    }
    if (lab->bridge[0])
        run((char *[]){ IP, "link", "del", lab->bridge, NULL }, false);
    lab->count = 0;
    lab->bridge[0] = '\0';
    for (int i = 0; i < 4; i++)
        if (live[i] == lab)
            live[i] = NULL;
}

const netns_host *netns_host_of(const netns_lab *lab, const char *name)
{
    for (int i = 0; i < lab->count; i++)
        if (strcmp(lab->h[i].name, name) == 0)
            return &lab->h[i];
    cr_assert_fail("no host %s in the lab", name);
    return NULL;
}

void netns_rate(const netns_lab *lab, const char *name, const char *rate)
{
    const netns_host *h = netns_host_of(lab, name);
    /* Towards the host (the bridge's end) and from it (its own eth0). */
    run((char *[]){ TC, "qdisc", "replace", "dev", (char *)h->veth, "root", "tbf", "rate", (char *)rate, "burst",
                    "64kb", "latency", "400ms", NULL },
        true);
    run((char *[]){ IP, "netns", "exec", (char *)h->ns, TC, "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate",
                    (char *)rate, "burst", "64kb", "latency", "400ms", NULL },
        true);
}

uint64_t netns_bytes(const netns_lab *lab, const char *name, bool sent)
{
    const netns_host *h = netns_host_of(lab, name);
    /* The bridge's end counts the other way round. */
    char path[128];
    snprintf(path, sizeof path, "/sys/class/net/%s/statistics/%s_bytes", h->veth, sent ? "rx" : "tx");
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    unsigned long long v = 0;
    cr_assert_eq(fscanf(f, "%llu", &v), 1);
    fclose(f);
    return v;
}

bool netns_sshd(netns_lab *lab, const char *name, char *why, size_t cap)
{
    if (access(SSHD, X_OK) != 0) {
        snprintf(why, cap, "no %s (apt-get install openssh-server)", SSHD);
        return false;
    }
    netns_host *h = (netns_host *)netns_host_of(lab, name);
    if (!lab->dir[0]) {
        snprintf(lab->dir, sizeof lab->dir, "/tmp/rig-netns%d-XXXXXX", lab->id);
        cr_assert_not_null(mkdtemp(lab->dir), "mkdtemp: %s", lab->dir);
        snprintf(lab->ssh_config, sizeof lab->ssh_config, "%s/ssh_config", lab->dir);
    }
    char dir[sizeof lab->dir + 24];
    snprintf(dir, sizeof dir, "%s/sshd-%s", lab->dir, h->name);
    h->sshd = true;   /* before it runs: a half-started one is stopped too */
    char *argv[64];
    netns_argv(h, (char *[]){ SSHD_START, dir, h->addr, h->name, NULL }, argv);
    program_result r = program_run(argv, NULL, 60);
    cr_assert_eq(r.status, 0, "sshd in %s did not start:\n%s", h->ns, r.output);
    program_result_free(&r);
    /* Its Host entry joins the lab's one config file. */
    char from[sizeof dir + 16];
    snprintf(from, sizeof from, "%s/ssh_config", dir);
    FILE *in = fopen(from, "r"), *out = fopen(lab->ssh_config, "a");
    cr_assert(in && out, "%s or %s: cannot open", from, lab->ssh_config);
    char line[512];
    while (fgets(line, sizeof line, in))
        fputs(line, out);
    fclose(in);
    cr_assert_eq(fclose(out), 0, "%s: cannot write", lab->ssh_config);
    return true;
}

void netns_argv(const netns_host *h, char *const argv[], char *out[64])
{
    int n = 0;
    out[n++] = IP;
    out[n++] = "netns";
    out[n++] = "exec";
    out[n++] = (char *)h->ns;
    for (int i = 0; argv[i]; i++) {
        cr_assert_lt(n, 63);
        out[n++] = argv[i];
    }
    out[n] = NULL;
}

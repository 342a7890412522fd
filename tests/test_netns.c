/* rig between separate hosts (network namespaces joined by veth links on a
 * bridge, tests/netns.c): the controller in one namespace, an agent in
 * another reachable only at its own address, the bytes of a job counted on
 * the controller's link. The ground issue 16's agent mesh is tested on,
 * and `rig run --on b,c` over a real sshd in each agent's namespace.
 * Skipped, with the reason, where namespaces (or sshd) cannot be had. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness.h"
#include "tests/netns.h"
#include "tests/support.h"

static netns_lab lab;

static void up(const char *const names[], int n)
{
    char why[300];
    if (!netns_available(why, sizeof why))
        cr_skip_test("no network namespaces here: %s", why);
    netns_lab_up(&lab, names, n);
}

/* The program in the host's namespace, through the agents given. */
static program_result run_in(const char *host, const char *prog, agent_proc *agents, int n)
{
    char agents_var[256], key[96], preload[512];
    agents_env(agents, n, agents_var, sizeof agents_var);
    snprintf(key, sizeof key, "RIG_REMOTE_KEY=%s", agents[0].key_hex);
    shim_env(preload, sizeof preload);
    char *env[] = { agents_var, key, preload, "RIG_LOCAL_DRIVER=none", NULL };
    char *argv[64];
    netns_argv(netns_host_of(&lab, host), (char *[]){ (char *)prog, NULL }, argv);
    return program_run(argv, env, 240);
}

Test(netns, a_job_between_two_hosts, .timeout = 300)
{
    up((const char *const[]){ "ctl", "b" }, 2);
    const netns_host *b = netns_host_of(&lab, "b");
    agent_proc a;
    agent_start_at(&a, NULL, NULL, b->ns, b->addr);

    /* The agent listens on b's address only: not on the controller's
     * loopback, not on this namespace's. */
    char probe[200];
    snprintf(probe, sizeof probe, "exec 3<>/dev/tcp/127.0.0.1/%u", (unsigned)a.port);
    char *argv[64];
    netns_argv(netns_host_of(&lab, "ctl"), (char *[]){ "/bin/bash", "-c", probe, NULL }, argv);
    program_result r = program_run(argv, NULL, 30);
    cr_expect_neq(r.status, 0, "the agent answered on the controller's loopback");
    program_result_free(&r);

    uint64_t sent0 = netns_bytes(&lab, "ctl", true), got0 = netns_bytes(&lab, "ctl", false);
    r = run_in("ctl", PLAIN_BUILD "/programs/bigcopy.static", &a, 1);
    cr_expect_eq(r.status, 0, "bigcopy between hosts exited %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "bigcopy: ok"), "%s", r.output);
    program_result_free(&r);
    /* Its 72 MiB each way (and more) crossed the controller's link. */
    uint64_t sent = netns_bytes(&lab, "ctl", true) - sent0, got = netns_bytes(&lab, "ctl", false) - got0;
    cr_expect_geq(sent, 72ull << 20, "the controller sent %llu bytes on its link", (unsigned long long)sent);
    cr_expect_geq(got, 72ull << 20, "the controller received %llu bytes on its link", (unsigned long long)got);
    agent_stop(&a);
    netns_lab_down(&lab);
}

Test(netns, a_rate_limited_link_carries_the_job, .timeout = 300)
{
    up((const char *const[]){ "ctl", "b" }, 2);
    const netns_host *b = netns_host_of(&lab, "b");
    netns_rate(&lab, "ctl", "200mbit");
    agent_proc a;
    agent_start_at(&a, NULL, NULL, b->ns, b->addr);
    program_result r = run_in("ctl", PLAIN_BUILD "/programs/vecadd.static", &a, 1);
    cr_expect_eq(r.status, 0, "%s", r.output);
    cr_expect(strstr(r.output, "vecadd: ok"), "%s", r.output);
    program_result_free(&r);
    /* With the agent gone, the job fails naming where it was. */
    agent_stop(&a);
    r = run_in("ctl", PLAIN_BUILD "/programs/vecadd.static", &a, 1);
    cr_expect_neq(r.status, 0, "%s", r.output);
    cr_expect(strstr(r.output, b->addr), "the failure does not name the agent's address:\n%s", r.output);
    program_result_free(&r);
    netns_lab_down(&lab);
}

/* Two agents on two hosts with one key, and the program's environment. */
static void two_agents(agent_proc ag[2])
{
    up((const char *const[]){ "ctl", "b", "c" }, 3);
    const netns_host *b = netns_host_of(&lab, "b"), *c = netns_host_of(&lab, "c");
    agent_start_at(&ag[0], NULL, NULL, b->ns, b->addr);
    agent_start_at(&ag[1], &ag[0], NULL, c->ns, c->addr);
}

Test(netns, agents_join_a_mesh, .timeout = 300)
{
    agent_proc ag[2];
    two_agents(ag);
    program_result r = run_in("ctl", PLAIN_BUILD "/programs/multidev.static", ag, 2);
    cr_expect_eq(r.status, 0, "%s", r.output);
    cr_expect(strstr(r.output, "multidev: ok 2 devices"), "%s", r.output);
    program_result_free(&r);
    /* b cannot reach c (a route that refuses): the job fails at its start,
     * naming both machines and where b tried. */
    const netns_host *b = netns_host_of(&lab, "b"), *c = netns_host_of(&lab, "c");
    char route[64];
    snprintf(route, sizeof route, "%s/32", c->addr);
    char *argv[64];
    netns_argv(b, (char *[]){ "/usr/sbin/ip", "route", "add", "prohibit", route, NULL }, argv);
    program_result ip = program_run(argv, NULL, 30);
    cr_assert_eq(ip.status, 0, "%s", ip.output);
    program_result_free(&ip);
    r = run_in("ctl", PLAIN_BUILD "/programs/multidev.static", ag, 2);
    cr_expect_neq(r.status, 0, "%s", r.output);
    char expect[128];
    snprintf(expect, sizeof expect, "b: cannot reach c at %s:", c->addr);
    cr_expect(strstr(r.output, expect), "no '%s' in:\n%s", expect, r.output);
    cr_expect(r.seconds < 20, "the failure took %.1f s", r.seconds);
    program_result_free(&r);
    agent_stop(&ag[0]);
    agent_stop(&ag[1]);
    netns_lab_down(&lab);
}

Test(netns, an_agent_killed_fails_the_job_everywhere, .timeout = 300)
{
    agent_proc ag[2];
    two_agents(ag);
    /* A job held on b's device; c dies under it. */
    char agents_var[256], key[96], preload[512];
    agents_env(ag, 2, agents_var, sizeof agents_var);
    snprintf(key, sizeof key, "RIG_REMOTE_KEY=%s", ag[0].key_hex);
    shim_env(preload, sizeof preload);
    char *argv[64];
    netns_argv(netns_host_of(&lab, "ctl"), (char *[]){ PLAIN_BUILD "/programs/hang_wait.static", "forever", NULL },
               argv);
    int out[2];
    cr_assert_eq(pipe(out), 0);
    pid_t pid = child_spawn(argv[0], argv, (char *[]){ agents_var, key, preload, "RIG_LOCAL_DRIVER=none", NULL }, -1,
                            out[1], out[1]);
    close(out[1]);
    char buf[8192] = "";
    size_t have = 0;
    while (!strstr(buf, "hang_wait: waiting") && have < sizeof buf - 1) {
        ssize_t n = read(out[0], buf + have, sizeof buf - 1 - have);
        cr_assert_gt(n, 0, "the program ended before waiting:\n%s", buf);
        have += (size_t)n;
        buf[have] = '\0';
    }
    kill(-ag[1].pid, SIGKILL);
    support_read_rest(out[0], buf, have, sizeof buf);
    close(out[0]);
    int st;
    waitpid(pid, &st, 0);
    cr_expect(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "the program succeeded:\n%s", buf);
    cr_expect(strstr(buf, "rig: job failed: c: ") || strstr(buf, "rig: job failed: b aborted: c: "), "%s", buf);
    /* b failed its job too, with c's closing as the cause (its log line may
     * come a moment after the program has ended). */
    char *log = support_wait_file_text(ag[0].log, "c: closed its connection", 10000);
    /* From its own connection to c, or the controller's abort naming c. */
    cr_expect(log && (strstr(log, "job failed: c: closed its connection") ||
                      strstr(log, "job failed: controller aborted: c: closed its connection")),
              "b's log:\n%s", log);
    free(log);
    agent_stop(&ag[0]);
    agent_stop(&ag[1]);
    netns_lab_down(&lab);
}

#define RIG RIG_BUILD_DIR "/rig"

/* `rig run --on b,c` from the controller's namespace: the launcher starts an
 * agent on each machine over a real sshd there, with one fresh key; each
 * listens where ssh reached it (its own address, the only one it has), the
 * two join their mesh, and a program using both devices (a peer copy
 * between them, checked on the CPU) runs. */
Test(netns, rig_run_on_two_machines_over_ssh, .timeout = 300)
{
    up((const char *const[]){ "ctl", "b", "c" }, 3);
    char why[300];
    if (!netns_sshd(&lab, "b", why, sizeof why) || !netns_sshd(&lab, "c", why, sizeof why)) {
        netns_lab_down(&lab);
        cr_skip_test("no sshd here: %s", why);
    }
    const netns_host *b = netns_host_of(&lab, "b"), *c = netns_host_of(&lab, "c");
    /* The machines by their ssh Host names (the lab's ssh_config), and a
     * group of both. */
    char targets[128], targets_env[160], ssh_env[160];
    snprintf(targets, sizeof targets, "%s/targets", lab.dir);
    FILE *f = fopen(targets, "w");
    cr_assert_not_null(f);
    fprintf(f, "b b\nc c\ngroup pair b,c\n");
    cr_assert_eq(fclose(f), 0);
    snprintf(targets_env, sizeof targets_env, "RIG_TARGETS=%s", targets);
    snprintf(ssh_env, sizeof ssh_env, "RIG_SSH_CONFIG=%s", lab.ssh_config);
    char *env[] = { targets_env, ssh_env, "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0",
#ifdef __SANITIZE_ADDRESS__
                    /* The program is never sanitized: it preloads the plain shim. */
                    "RIG_SHIM=" PLAIN_BUILD "/librigshim.so",
#endif
                    NULL };
    const char *const on[] = { "b,c", "pair" };
    for (int i = 0; i < 2; i++) {
        char *argv[64];
        netns_argv(netns_host_of(&lab, "ctl"),
                   (char *[]){ RIG, "run", "--on", (char *)on[i], "-v", "--retries", "0", "--rig", RIG, "--",
                               PLAIN_BUILD "/programs/peer.static", NULL },
                   argv);
        program_result r = program_run(argv, env, 240);
        cr_expect_eq(r.status, 0, "rig run --on %s exited %d:\n%s", on[i], r.status, r.output);
        cr_expect(strstr(r.output, "peer: ok"), "%s", r.output);
        /* One device on each machine, and they are not peers. */
        cr_expect(strstr(r.output, "device 0: softgpu") && strstr(r.output, "device 1: softgpu") &&
                      strstr(r.output, "can access peer: 0->1 0, 1->0 0"),
                  "%s", r.output);
        /* Each agent at its machine's own address, where ssh reached it. */
        char at[80];
        snprintf(at, sizeof at, "rig: b: agent listening on %s:", b->addr);
        cr_expect(strstr(r.output, at), "no '%s' in:\n%s", at, r.output);
        snprintf(at, sizeof at, "rig: c: agent listening on %s:", c->addr);
        cr_expect(strstr(r.output, at), "no '%s' in:\n%s", at, r.output);
        program_result_free(&r);
    }
    /* This machine and b: the agent of `local` listens on this machine's
     * address toward b, not on loopback, since b's agent dials it too. */
    {
        const netns_host *ctl = netns_host_of(&lab, "ctl");
        char *argv[64];
        netns_argv(ctl,
                   (char *[]){ RIG, "run", "--on", "b,local", "-v", "--retries", "0", "--rig", RIG, "--",
                               PLAIN_BUILD "/programs/peer.static", NULL },
                   argv);
        program_result r = program_run(argv, env, 240);
        cr_expect_eq(r.status, 0, "rig run --on b,local exited %d:\n%s", r.status, r.output);
        cr_expect(strstr(r.output, "peer: ok"), "%s", r.output);
        char at[80];
        snprintf(at, sizeof at, "rig: local: agent listening on %s:", ctl->addr);
        cr_expect(strstr(r.output, at), "no '%s' in:\n%s", at, r.output);
        program_result_free(&r);
    }
    /* rig probe and rig ls show the group: both machines, over ssh. */
    char *argv[64];
    netns_argv(netns_host_of(&lab, "ctl"), (char *[]){ RIG, "probe", "--rig", RIG, "pair", NULL }, argv);
    program_result r = program_run(argv, env, 120);
    cr_expect_eq(r.status, 0, "%s", r.output);
    cr_expect(strstr(r.output, "b (b): host ") && strstr(r.output, "c (c): host "), "%s", r.output);
    program_result_free(&r);
    netns_argv(netns_host_of(&lab, "ctl"), (char *[]){ RIG, "ls", "--rig", RIG, NULL }, argv);
    r = program_run(argv, env, 120);
    cr_expect_eq(r.status, 0, "%s", r.output);
    const char *row = strstr(r.output, "\npair ");
    char line[512] = "";
    if (row)
        snprintf(line, sizeof line, "%.*s", (int)strcspn(row + 1, "\n"), row + 1);
    cr_expect(strstr(line, " b,c ") && strstr(line, " free ") && strstr(line, " 2 x softgpu ("), "%s", r.output);
    program_result_free(&r);
    /* b cannot reach c (a route that refuses), though the controller
     * reaches both: rig run fails the job naming both machines, within the
     * handshake's bounds, and gives up after its one attempt. */
    char route[64];
    snprintf(route, sizeof route, "%s/32", c->addr);
    netns_argv(b, (char *[]){ "/usr/sbin/ip", "route", "add", "prohibit", route, NULL }, argv);
    r = program_run(argv, NULL, 30);
    cr_assert_eq(r.status, 0, "%s", r.output);
    program_result_free(&r);
    netns_argv(netns_host_of(&lab, "ctl"),
               (char *[]){ RIG, "run", "--on", "pair", "--retries", "0", "--rig", RIG, "--",
                           PLAIN_BUILD "/programs/peer.static", NULL },
               argv);
    r = program_run(argv, env, 120);
    cr_expect_neq(r.status, 0, "%s", r.output);
    char expect[128];
    snprintf(expect, sizeof expect, "b: cannot reach c at %s:", c->addr);
    cr_expect(strstr(r.output, expect) && strstr(r.output, "rig run: giving up after 1 attempt: "), "no '%s' in:\n%s",
              expect, r.output);
    cr_expect(r.seconds < 40, "the failure took %.1f s (agents started over ssh, then at most 10 s)", r.seconds);
    program_result_free(&r);
    netns_lab_down(&lab);
}

/* Peer copies between agents on separate hosts (network namespaces on a
 * bridge, tests/netns.c) go on the rails between the agents: their bytes
 * cross the agents' links and not the controller's, a pipeline across
 * three hosts keeps its order, and an agent killed mid-copy fails the job
 * on every process with the root cause. Skipped, with the reason, where
 * namespaces cannot be made. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness.h"
#include "tests/netns.h"
#include "tests/support.h"

static netns_lab lab;

/* The controller's host and one agent per other name, all with one key. */
static void lab_with_agents(const char *const names[], int n, agent_proc *ag)
{
    char why[300];
    if (!netns_available(why, sizeof why))
        cr_skip_test("no network namespaces here: %s", why);
    netns_lab_up(&lab, names, n);
    for (int i = 1; i < n; i++) {
        const netns_host *h = netns_host_of(&lab, names[i]);
        agent_start_at(&ag[i - 1], i > 1 ? &ag[0] : NULL, NULL, h->ns, h->addr);
    }
}

/* The program's environment for the agents: "b=ADDR:PORT,c=..." with the
 * names the test gave them (agents_env names them b, c, d). */
static void job_env(const agent_proc *ag, int n, char *agents_var, size_t cap, char key[96], char preload[512])
{
    agents_env(ag, n, agents_var, cap);
    snprintf(key, 96, "RIG_REMOTE_KEY=%s", ag[0].key_hex);
    shim_env(preload, 512);
}

static program_result run_in_ctl(const char *prog, const agent_proc *ag, int n, const char *extra)
{
    char agents_var[256], key[96], preload[512];
    job_env(ag, n, agents_var, sizeof agents_var, key, preload);
    char *env[] = { agents_var, key, preload, "RIG_LOCAL_DRIVER=none", (char *)extra, NULL };
    char *argv[64];
    netns_argv(netns_host_of(&lab, "ctl"), (char *[]){ (char *)prog, NULL }, argv);
    return program_run(argv, env, 240);
}

Test(netns_rails, a_peer_copy_never_crosses_the_controllers_link, .timeout = 300)
{
    agent_proc ag[2];
    lab_with_agents((const char *const[]){ "ctl", "b", "c" }, 3, ag);
    /* 100 Mbit/s: 100 MiB through the controller would take 17 s. */
    netns_rate(&lab, "ctl", "100mbit");
    uint64_t ctl0 = netns_bytes(&lab, "ctl", true) + netns_bytes(&lab, "ctl", false);
    uint64_t b0 = netns_bytes(&lab, "b", true), c0 = netns_bytes(&lab, "c", false);
    /* 13 chunks and a ragged end: more than the window of 8 in flight. */
    program_result r = run_in_ctl(PLAIN_BUILD "/programs/peerbig.static", ag, 2, "SIZE=104857612");
    cr_expect_eq(r.status, 0, "peerbig exited %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "peerbig: ok 104857612 bytes"), "%s", r.output);
    program_result_free(&r);
    uint64_t ctl = netns_bytes(&lab, "ctl", true) + netns_bytes(&lab, "ctl", false) - ctl0;
    uint64_t b = netns_bytes(&lab, "b", true) - b0, c = netns_bytes(&lab, "c", false) - c0;
    /* The program's module and calls (a few hundred KiB), not the copy. */
    cr_expect_lt(ctl, 4ull << 20, "%llu bytes crossed the controller's link", (unsigned long long)ctl);
    cr_expect_geq(b, 104857612ull, "b sent %llu bytes", (unsigned long long)b);
    cr_expect_geq(c, 104857612ull, "c received %llu bytes", (unsigned long long)c);
    agent_stop(&ag[0]);
    agent_stop(&ag[1]);
    netns_lab_down(&lab);
}

Test(netns_rails, a_pipeline_across_three_hosts, .timeout = 300)
{
    agent_proc ag[3];
    lab_with_agents((const char *const[]){ "ctl", "b", "c", "d" }, 4, ag);
    uint64_t c0 = netns_bytes(&lab, "c", true) + netns_bytes(&lab, "c", false);
    program_result r = run_in_ctl(PLAIN_BUILD "/programs/chain.static", ag, 3, NULL);
    cr_expect_eq(r.status, 0, "chain exited %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "chain: ok 3 stages, 3 batches of 20971532 bytes"), "%s", r.output);
    program_result_free(&r);
    /* The middle stage's 60 MiB came from b and went to d: in and out. */
    uint64_t c = netns_bytes(&lab, "c", true) + netns_bytes(&lab, "c", false) - c0;
    cr_expect_geq(c, 120ull << 20, "c moved %llu bytes", (unsigned long long)c);
    for (int i = 0; i < 3; i++)
        agent_stop(&ag[i]);
    netns_lab_down(&lab);
}

Test(netns_rails, an_agent_killed_mid_copy_fails_the_job_everywhere, .timeout = 300)
{
    agent_proc ag[2];
    lab_with_agents((const char *const[]){ "ctl", "b", "c" }, 3, ag);
    /* 50 Mbit/s from b: the 64 MiB copy takes about 11 s. */
    netns_rate(&lab, "b", "50mbit");
    char agents_var[256], key[96], preload[512];
    job_env(ag, 2, agents_var, sizeof agents_var, key, preload);
    char *argv[64];
    netns_argv(netns_host_of(&lab, "ctl"), (char *[]){ PLAIN_BUILD "/programs/peerbig.static", NULL }, argv);
    int out[2];
    cr_assert_eq(pipe(out), 0);
    pid_t pid = child_spawn(argv[0], argv,
                            (char *[]){ agents_var, key, preload, "RIG_LOCAL_DRIVER=none", "SIZE=67108864", NULL },
                            -1, out[1], out[1]);
    close(out[1]);
    /* Once c has taken a few MiB of the copy, c dies. */
    uint64_t c0 = netns_bytes(&lab, "c", false);
    for (int i = 0; i < 600 && netns_bytes(&lab, "c", false) - c0 < (4ull << 20); i++)
        usleep(50 * 1000);
    cr_assert_geq(netns_bytes(&lab, "c", false) - c0, 4ull << 20, "the copy never began");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kill(-ag[1].pid, SIGKILL);
    char buf[16384] = "";
    support_read_rest(out[0], buf, 0, sizeof buf);
    close(out[0]);
    int st;
    waitpid(pid, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_expect(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "the program succeeded:\n%s", buf);
    /* The root cause is c's, whoever saw it first: the controller ("c:
     * ...") or b over the mesh ("b aborted: c: ..."). */
    cr_expect(strstr(buf, "rig: job failed: c: ") || strstr(buf, "rig: job failed: b aborted: c: "),
              "the failure does not name c:\n%s", buf);
    /* Within the bounds: a closed connection is seen at once, silence in 10 s. */
    cr_expect_lt(took, 15.0, "the job took %.1f s to fail", took);
    /* b failed its job too, with c's end as the cause (its log line may
     * come a moment after the program's exit). */
    char *log = support_wait_file_text(ag[0].log, "c: closed its connection", 10000);
    /* From its own connection to c, or from the controller's abort at the
     * program's end, whichever came first: c's end either way. */
    cr_expect(log && (strstr(log, "job failed: c: closed its connection") ||
                      strstr(log, "job failed: controller aborted: c: closed its connection")),
              "b's log:\n%s\nthe program:\n%s", log, buf);
    free(log);
    agent_stop(&ag[0]);
    agent_stop(&ag[1]);
    netns_lab_down(&lab);
}

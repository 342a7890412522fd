/* rig run --slurm against a real Slurm: munged, slurmctld and two slurmd
 * started by the test (tests/tools/slurm-start), each slurmd in a network
 * namespace of its own (tests/netns.c), the controller's salloc in
 * another. Skipped, with the reason, where namespaces cannot be made or
 * Slurm is not installed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"
#include "tests/netns.h"

#define SLURM_START RIG_SOURCE_DIR "/tests/tools/slurm-start"
#define SLURM_STOP RIG_SOURCE_DIR "/tests/tools/slurm-stop"
#define RIG RIG_BUILD_DIR "/rig"

static netns_lab lab;
static char dir[64], conf_env[128];

static void cluster_up(void)
{
    char why[300];
    if (!netns_available(why, sizeof why))
        cr_skip_test("no network namespaces here: %s", why);
    if (access("/usr/sbin/slurmctld", X_OK) != 0 || access("/usr/sbin/munged", X_OK) != 0)
        cr_skip_test("Slurm is not installed here (scripts/install-deps installs slurmctld, slurmd and munge)");
    netns_lab_up(&lab, (const char *const[]){ "ctl", "n1", "n2" }, 3);
    snprintf(dir, sizeof dir, "/tmp/rig-slurm-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    const netns_host *c = netns_host_of(&lab, "ctl"), *a = netns_host_of(&lab, "n1"), *b = netns_host_of(&lab, "n2");
    program_result r = program_run((char *[]){ SLURM_START, dir, (char *)c->ns, (char *)c->addr, (char *)a->ns,
                                               (char *)a->addr, (char *)b->ns, (char *)b->addr, NULL },
                                   NULL, 120);
    if (r.status == 2)
        cr_skip_test("Slurm cannot start here: %s", r.output);
    cr_assert_eq(r.status, 0, "the Slurm cluster did not start:\n%s", r.output);
    snprintf(conf_env, sizeof conf_env, "SLURM_CONF=%s/slurm.conf", dir);
    program_result_free(&r);
}

static void cluster_down(void)
{
    program_result r = program_run((char *[]){ SLURM_STOP, dir, NULL }, NULL, 60);
    program_result_free(&r);
    r = program_run((char *[]){ "/bin/rm", "-rf", dir, NULL }, NULL, 60);
    program_result_free(&r);
    netns_lab_down(&lab);
}

/* argv run by salloc -N2 in the controller's namespace. */
static program_result in_allocation(char *const argv[])
{
    char *words[40] = { "salloc", "-N2", "--quiet" };
    int n = 3;
    for (int i = 0; argv[i] && n < 39; i++)
        words[n++] = argv[i];
    words[n] = NULL;
    char *ns_argv[64];
    netns_argv(netns_host_of(&lab, "ctl"), words, ns_argv);
    /* Programs are never sanitized: they take the plain shim. */
    return program_run(ns_argv, (char *[]){ conf_env, "RIG_SHIM=" PLAIN_BUILD "/librigshim.so", NULL }, 180);
}

Test(slurm, an_agent_per_node_as_a_job_step, .timeout = 400)
{
    cluster_up();
    program_result r = in_allocation((char *[]){ RIG, "run", "--slurm", "--rig", RIG, "--stats", "--",
                                                 PLAIN_BUILD "/programs/multidev.static", NULL });
    cr_expect_eq(r.status, 0, "%s", r.output);
    cr_expect(strstr(r.output, "multidev: ok 2 devices"), "%s", r.output);
    /* One device on each node, through agents listening where the nodes are. */
    cr_expect(strstr(r.output, "CUDA:0@n1") && strstr(r.output, "CUDA:0@n2"), "%s", r.output);
    program_result_free(&r);

    /* The program's status is rig's; the steps end with the job. */
    r = in_allocation((char *[]){ RIG, "run", "--slurm", "--rig", RIG, "--", "/bin/sh", "-c", "exit 3", NULL });
    cr_expect_eq(r.status, 3, "%s", r.output);
    program_result_free(&r);
    char *squeue[64];
    netns_argv(netns_host_of(&lab, "ctl"), (char *[]){ "squeue", "-h", "-s", NULL }, squeue);
    r = program_run(squeue, (char *[]){ conf_env, NULL }, 30);
    cr_expect_eq(r.status, 0, "%s", r.output);
    cr_expect_eq(r.len, 0, "steps are left running:\n%s", r.output);
    program_result_free(&r);

    /* An agent that cannot start fails the job, naming the node. */
    r = in_allocation((char *[]){ RIG, "run", "--slurm", "--retries", "0", "--rig", "/nonexistent/rig", "--",
                                  PLAIN_BUILD "/programs/vecadd.static", NULL });
    cr_expect_eq(r.status, 255, "%s", r.output);
    cr_expect(strstr(r.output, "rig run: giving up after 1 attempt: n1: ") ||
                  strstr(r.output, "rig run: giving up after 1 attempt: n2: "),
              "%s", r.output);
    program_result_free(&r);
    cluster_down();
}

Test(slurm, outside_an_allocation_says_so)
{
    program_result r = program_run((char *[]){ RIG, "run", "--slurm", "--", "true", NULL },
                                   (char *[]){ "SLURM_JOB_ID", "SLURM_JOB_NODELIST", NULL }, 30);
    cr_expect_eq(r.status, 255, "%s", r.output);
    cr_expect(strstr(r.output, "rig run: --slurm runs inside a Slurm allocation (salloc or sbatch)"), "%s",
              r.output);
    program_result_free(&r);
    r = program_run((char *[]){ RIG, "run", "--slurm", "--on", "local", "--", "true", NULL }, NULL, 30);
    cr_expect_eq(r.status, 1, "%s", r.output);
    cr_expect(strstr(r.output, "--slurm takes the allocation's nodes"), "%s", r.output);
    program_result_free(&r);
}

/* Unmodified nvcc-built programs run through the preloaded shim against a
 * real rig-agent process on loopback, backed by softgpu: every program in
 * every build, several agents at once, local and proxy devices together. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"

typedef struct case_t {
    char program[32];
    char build[8];
} case_t;

#define BUILDS(p) { p, "static" }, { p, "shared" }, { p, "ptds" }

ParameterizedTestParameters(remote, program_runs_through_one_agent)
{
    /* Every program of tests/programs but streams (its host function holds
     * a stream, which rig does not do: see the closing note of issue 4),
     * peer (two devices, below) and the fault programs (test_faults). */
    static case_t cases[] = {
        BUILDS("devicequery"), BUILDS("vecadd"), BUILDS("drvapi"), BUILDS("symbols"), BUILDS("multidev"),
        BUILDS("atomics"), BUILDS("defaultstream"), BUILDS("entrypoint"), BUILDS("hostfunc"),
        BUILDS("int64"), BUILDS("mathfn"), BUILDS("matmul"), BUILDS("memops"), BUILDS("printf"),
        BUILDS("reduce"), BUILDS("refusals"), BUILDS("reset"), BUILDS("generic"), BUILDS("errors"),
        BUILDS("bigcopy"), BUILDS("bigcopy2d"), BUILDS("swapblocks"), BUILDS("memcpybatch"), BUILDS("threads"), BUILDS("launch"), BUILDS("jitlink"),
        BUILDS("mallocasync"), BUILDS("profiler"), BUILDS("coop"), BUILDS("capturequery"),
        BUILDS("managed"), BUILDS("zerocopy"),
        BUILDS("graphs"), BUILDS("torchgraph"), BUILDS("graphbuild"), BUILDS("graphattr"), BUILDS("graphuser"),
        BUILDS("graphmemop"), BUILDS("graphmem"),
        BUILDS("drvmisc"), BUILDS("texture"), BUILDS("tensormap"), BUILDS("texref"),
        BUILDS("devmalloc"), BUILDS("refusedptx"), BUILDS("cublasblas"), BUILDS("thrustalgo"), BUILDS("cubsort"), BUILDS("cubalgo"),
        BUILDS("memcpyasync"), BUILDS("virtualfn"), BUILDS("lazyrefuse"),
        BUILDS("wmmagemm"),
        BUILDS("cublas"), BUILDS("cublasgemm"), BUILDS("cusparsespmv"), BUILDS("cusolverlu"),
        BUILDS("tmacopy"), BUILDS("copyorder"),
    };
    return cr_make_param_array(case_t, cases, sizeof cases / sizeof cases[0]);
}

/* Runs PLAIN_BUILD/programs/PROGRAM.BUILD through agents[0..n) with the
 * arguments args and the variables extra (NAME=VALUE) in its environment,
 * each NULL-ended or NULL for none; local_driver names the program's own
 * driver (RIG_LOCAL_DRIVER), NULL for none. */
static program_result run_program(const agent_proc *agents, int n, const char *program, const char *build,
                                  const char *local_driver, char *const *args, char *const *extra, int timeout_s)
{
    /* A local driver needs RTLD_DEEPBIND, which sanitizers refuse: local
     * devices are always tested with the plain shim. */
    bool plain = local_driver != NULL;
    char path[256], agents_var[256], key[96], local[300], preload[300];
    snprintf(path, sizeof path, PLAIN_BUILD "/programs/%s.%s", program, build);
    cr_assert_eq(access(path, X_OK), 0, "%s is not built", path);
    agents_env(agents, n, agents_var, sizeof agents_var);
    snprintf(key, sizeof key, "RIG_REMOTE_KEY=%s", agents[0].key_hex);
    snprintf(local, sizeof local, "RIG_LOCAL_DRIVER=%s", local_driver ? local_driver : "none");
    if (plain)
        snprintf(preload, sizeof preload, "LD_PRELOAD=" PLAIN_BUILD "/librigshim.so");
    else
        shim_env(preload, sizeof preload);
    char *argv[8] = { path }, *env[12] = { preload, agents_var, key, local };
    int argc = 1, envc = 4;
    for (; args && *args; args++) {
        cr_assert_lt(argc, 7, "more arguments than run_program takes");
        argv[argc++] = *args;
    }
    for (; extra && *extra; extra++) {
        cr_assert_lt(envc, 11, "more variables than run_program takes");
        env[envc++] = *extra;
    }
    return program_run(argv, env, timeout_s);
}

/* run_program with one more variable (NAME=VALUE) in the program's
 * environment, or none when extra is NULL. */
static program_result run_through_env(const agent_proc *agents, int n, const char *program, const char *build,
                                      const char *local_driver, const char *extra)
{
    char *const vars[] = { (char *)extra, NULL };
    return run_program(agents, n, program, build, local_driver, NULL, vars, 60);
}

static program_result run_through(const agent_proc *agents, int n, const char *program, const char *build,
                                  const char *local_driver)
{
    return run_through_env(agents, n, program, build, local_driver, NULL);
}

ParameterizedTest(case_t *c, remote, program_runs_through_one_agent, .timeout = 90)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    program_result r = run_through(&a, 1, c->program, c->build, NULL);
    char ok[64], done[64];
    snprintf(ok, sizeof ok, "%s: ok", c->program);
    snprintf(done, sizeof done, "%s: done", c->program);   /* refusals says so */
    cr_expect_eq(r.status, 0, "%s.%s exited %d:\n%s", c->program, c->build, r.status, r.output);
    cr_expect(strstr(r.output, ok) || strstr(r.output, done), "%s.%s did not say ok:\n%s", c->program, c->build,
              r.output);
    program_result_free(&r);
    agent_stop(&a);
}

/* Programs that move bytes, through an agent that takes softgpu for a
 * GPU's driver (its --driver is a link named libcuda.so.1): every copy then
 * goes through page-locked staging and the driver's asynchronous copies, as
 * on a GPU, where nothing is moved in place. copyorder's synchronous copies
 * in return before their device copies end here; a kernel on another stream
 * right after must still read their bytes. (Not the CUDA libraries: the
 * shim asks PTX of them only from an agent on softgpu.) */
ParameterizedTestParameters(remote, copies_take_the_gpu_path_intact)
{
    static case_t cases[] = {
        { "copyorder", "static" }, { "copyorder", "ptds" }, { "sparsecopy", "static" },
        { "bigcopy", "static" },   { "bigcopy2d", "static" }, { "swapblocks", "static" }, { "memcpybatch", "static" },
        { "memcpyasync", "static" }, { "cubsort", "static" },
        { "memops", "static" },    { "graphs", "static" },    { "hostfunc", "static" },
        { "defaultstream", "static" }, { "streams", "static" }, { "threads", "static" },
        { "managed", "static" },   { "zerocopy", "static" },  { "mallocasync", "static" },
        { "texture", "static" },
    };
    return cr_make_param_array(case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(case_t *c, remote, copies_take_the_gpu_path_intact, .timeout = 120)
{
    char dir[] = "/tmp/rig-gpu-path-XXXXXX", link[64], args[128];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
    cr_assert_eq(symlink(SHIM_BUILD "/libcudasoft.so", link), 0);
    snprintf(args, sizeof args, "--driver %s", link);
    /* The agent takes it for a GPU's driver, not for softgpu. */
    char *probe[] = { SHIM_BUILD "/rig-agent", "--probe", "--json", "--driver", link, NULL };
    program_result p = program_run(probe, NULL, 30);
    cr_assert(p.status == 0 && strstr(p.output, "\"driver\":\"driver\""), "the agent's probe of %s:\n%s", link,
              p.output);
    program_result_free(&p);
    agent_proc a;
    agent_start(&a, NULL, args);
    program_result r = run_through(&a, 1, c->program, c->build, NULL);
    char ok[64];
    snprintf(ok, sizeof ok, "%s: ok", c->program);
    cr_expect_eq(r.status, 0, "%s.%s exited %d:\n%s", c->program, c->build, r.status, r.output);
    cr_expect(strstr(r.output, ok), "%s.%s did not say ok:\n%s", c->program, c->build, r.output);
    program_result_free(&r);
    agent_stop(&a);
    unlink(link);
    rmdir(dir);
}

Test(remote, device_properties_come_from_the_agent, .timeout = 60)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    program_result r = run_through(&a, 1, "devicequery", "static", NULL);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_assert(strstr(r.output, "1 device(s)"), "%s", r.output);
    cr_assert(strstr(r.output, "device 0: softgpu"), "%s", r.output);
    cr_assert(strstr(r.output, "compute capability 7.5"), "%s", r.output);
    program_result_free(&r);
    agent_stop(&a);
}

Test(remote, one_agent_serves_jobs_one_after_another, .timeout = 90)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        program_result r = run_through(&a, 1, "vecadd", "static", NULL);
        cr_assert_eq(r.status, 0, "job %d:\n%s", i, r.output);
        program_result_free(&r);
    }
    agent_stop(&a);
}

/* Runs program.static through n fresh agents of one job (and a local
 * softgpu when local), asserts a clean exit and that it said `says`;
 * returns its output (the caller frees it). */
static char *run_ok(int n, bool local, const char *program, const char *says)
{
    agent_proc a[3];
    cr_assert(n >= 1 && n <= 3);
    agent_start(&a[0], NULL, NULL);
    for (int i = 1; i < n; i++)
        agent_start(&a[i], &a[0], NULL);
    program_result r = run_through(a, n, program, "static", local ? PLAIN_BUILD "/libcudasoft.so" : NULL);
    for (int i = 0; i < n; i++)
        agent_stop(&a[i]);
    cr_assert_eq(r.status, 0, "%s exited %d:\n%s", program, r.status, r.output);
    cr_assert(strstr(r.output, says), "%s did not say \"%s\":\n%s", program, says, r.output);
    return r.output;
}

Test(remote, two_agents_give_two_devices, .timeout = 90)
{
    free(run_ok(2, false, "multidev", "multidev: ok 2 devices"));
}

Test(remote, three_devices_local_and_two_agents, .timeout = 90)
{
    free(run_ok(2, true, "multidev", "multidev: ok 3 devices"));
}

Test(remote, local_and_proxy_devices_together, .timeout = 90)
{
    free(run_ok(1, true, "multidev", "multidev: ok 2 devices"));
}

Test(remote, peer_copies_between_two_agents, .timeout = 90)
{
    char *out = run_ok(2, false, "peer", "peer: ok ptrs ");
    /* Each agent's window: distinct pointer values. */
    unsigned long long p0 = 0, p1 = 0;
    cr_assert_eq(sscanf(strstr(out, "peer: ok ptrs "), "peer: ok ptrs %llx %llx", &p0, &p1), 2, "%s", out);
    cr_assert_neq(p0, p1);
    free(out);
}

/* A pipeline across two and three agents: peer copies of 20 MiB on the
 * sender's and the receiver's streams, ordered by events across agents,
 * go on the rails between the agents (tests/programs/chain.cu). */
Test(remote, a_pipeline_across_two_agents, .timeout = 180)
{
    free(run_ok(2, false, "chain", "chain: ok 2 stages, 3 batches of 20971532 bytes"));
    /* 72 MiB: more chunks than a copy keeps in flight (RAIL_WINDOW), so
     * later chunks wait for earlier ones to land, in both orders. */
    agent_proc a[2];
    agent_start(&a[0], NULL, NULL);
    agent_start(&a[1], &a[0], NULL);
    program_result r = run_through_env(a, 2, "chain", "static", NULL, "SIZE=75497484");
    agent_stop(&a[0]);
    agent_stop(&a[1]);
    cr_expect_eq(r.status, 0, "chain exited %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "chain: ok 2 stages, 3 batches of 75497484 bytes"), "%s", r.output);
    program_result_free(&r);
}

Test(remote, a_pipeline_across_three_agents, .timeout = 120)
{
    free(run_ok(3, false, "chain", "chain: ok 3 stages, 3 batches of 20971532 bytes"));
}

Test(remote, peer_copies_between_local_and_proxy, .timeout = 90)
{
    free(run_ok(1, true, "peer", "peer: ok"));
}

/* One agent with two softgpu devices: they are peers, as its driver says;
 * access enabled through the agent lets a kernel on device 1 use device
 * 0's memory. Every build. */
/* An agent whose softgpu has two devices. */
static void agent_start_two_devices(agent_proc *a)
{
    setenv("SOFTGPU_DEVICES", "2", 1);
    agent_start(a, NULL, NULL);
    unsetenv("SOFTGPU_DEVICES");
}

/* program in every build through agent a exits 0 printing want. */
static void expect_every_build(const agent_proc *a, const char *program, const char *want)
{
    static const char *const builds[] = { "static", "shared", "ptds" };
    for (int b = 0; b < 3; b++) {
        program_result r = run_through(a, 1, program, builds[b], NULL);
        cr_expect_eq(r.status, 0, "%s.%s exited %d:\n%s", program, builds[b], r.status, r.output);
        cr_expect(strstr(r.output, want), "%s.%s printed no \"%s\":\n%s", program, builds[b], want, r.output);
        program_result_free(&r);
    }
}

Test(remote, peers_on_one_agent_with_two_devices, .timeout = 120)
{
    agent_proc a;
    agent_start_two_devices(&a);
    expect_every_build(&a, "p2p", "p2p: ok peers");
    program_result r = run_through(&a, 1, "peer", "static", NULL);
    cr_expect_eq(r.status, 0, "peer exited %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "can access peer: 0->1 1, 1->0 1") && strstr(r.output, "peer: ok"), "%s", r.output);
    program_result_free(&r);
    agent_stop(&a);
}

/* A pool's access granted to the other device of one agent (drvmisc). */
Test(remote, pool_access_for_a_peer_on_one_agent, .timeout = 90)
{
    setenv("SOFTGPU_DEVICES", "2", 1);
    agent_proc a;
    agent_start(&a, NULL, NULL);
    unsetenv("SOFTGPU_DEVICES");
    program_result r = run_through(&a, 1, "drvmisc", "static", NULL);
    cr_expect_eq(r.status, 0, "drvmisc exited %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "drvmisc: a peer was granted access to a pool"), "%s", r.output);
    program_result_free(&r);
    agent_stop(&a);
}

/* Devices of two agents are not peers: access is unsupported, copies work. */
Test(remote, devices_of_two_agents_are_not_peers, .timeout = 90)
{
    free(run_ok(2, false, "p2p", "p2p: ok not peers"));
}

Test(remote, printf_reaches_the_program, .timeout = 90)
{
    /* The program checks its own lines on its stdout pipe; here: they came. */
    free(run_ok(1, false, "printf", "printf: ok 64 lines"));
}

Test(remote, driver_log_holds_why_a_proxy_refused_a_call, .timeout = 90)
{
    /* drvmisc reads cuLogsDumpToMemory and its callback after a refused call. */
    free(run_ok(1, false, "drvmisc", "drvmisc: the driver log names cuDeviceGetLuid"));
}

Test(remote, cublas_told_to_take_sass_names_the_kernel_softgpu_cannot_run, .timeout = 120)
{
    /* The shim declares CUDA_FORCE_PTX_JIT=1 for an agent on softgpu, and
     * cuBLASLt then picks GEMM kernels that carry PTX (cublas passes above).
     * A program that sets it to 0 gets the SASS-only kernel it picks at
     * 7.5, and a clear refusal. */
    agent_proc a;
    agent_start(&a, NULL, NULL);
    program_result r = run_through_env(&a, 1, "cublas", "static", NULL, "CUDA_FORCE_PTX_JIT=0");
    cr_assert_neq(r.status, 0, "softgpu cannot run cuBLAS's SASS:\n%s", r.output);
    cr_assert(strstr(r.output, "cuBLAS 1"), "cublasCreate must succeed:\n%s", r.output);
    /* Capture queries (cuBLAS asks before its work) are answered, not refused. */
    cr_assert_null(strstr(r.output, "Captur"), "a capture query was refused:\n%s", r.output);
    /* Its libraries load (softgpu parses large ones at first use); the GEMM
     * kernel cuBLAS picks at compute capability 7.5 is SASS only, and its
     * launch is refused, naming it. */
    cr_assert(strstr(r.output, "rig: kernel volta_sgemm") && strstr(r.output, "CUDA_ERROR_NOT_SUPPORTED") &&
                  strstr(r.output, "SASS only"),
              "a clear line naming the kernel:\n%s", r.output);
    program_result_free(&r);
    agent_stop(&a);
}

Test(remote, a_refused_module_names_the_instruction_and_line, .timeout = 90)
{
    /* softgpu's own reasons reach the program's log, not only the agent's:
     * a module it cannot load at all, and a kernel it cannot run in a
     * module that loads (its other kernel runs). */
    agent_proc a;
    agent_start(&a, NULL, NULL);
    program_result r = run_through(&a, 1, "refusedptx", "static", NULL);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_assert(strstr(r.output, "refusedptx: ok"), "%s", r.output);
    cr_assert(strstr(r.output, "rig: module load on ") && strstr(r.output, "(softgpu) cannot load this module") &&
                  strstr(r.output, "line 3: 32-bit addresses"),
              "the shim's line names the PTX line and what softgpu lacks:\n%s", r.output);
    cr_assert(strstr(r.output, "refusedptx: the module loaded; its bad kernel alone was refused"), "%s", r.output);
    cr_assert(strstr(r.output, "rig: kernel refused on ") && strstr(r.output, "CUDA_ERROR_NOT_SUPPORTED") &&
                  strstr(r.output, "the agent's driver logged: softgpu: cannot run kernel refused") &&
                  strstr(r.output, "line 8, in kernel refused") && strstr(r.output, "'frobnicate.b32'"),
              "the shim's line names the kernel, PTX line and instruction:\n%s", r.output);
    program_result_free(&r);
    agent_stop(&a);
}

/* A runtime program's kernel softgpu cannot run: refused alone, at once,
 * with softgpu's sentence in rig's line; the module's other kernel runs. */
Test(remote, a_kernel_softgpu_cannot_run_is_refused_alone, .timeout = 90)
{
    char *out = run_ok(1, false, "lazyrefuse", "lazyrefuse: ok");
    cr_assert(strstr(out, "lazyrefuse: the kernel with a breakpoint was refused alone"), "%s", out);
    cr_assert(strstr(out, "rig: kernel _Z15with_breakpointPii on ") &&
                  strstr(out, "the agent's driver logged: softgpu: cannot run kernel _Z15with_breakpointPii") &&
                  strstr(out, "instruction 'brkpt' is not supported"),
              "rig's line carries softgpu's reason:\n%s", out);
    free(out);
}

/* VMM memory created on device 0 in pieces, mapped end to end, made
 * accessible to both devices of one agent: copies and kernels on either
 * see it. Every build. */
Test(remote, vmm_shared_by_two_devices_of_one_agent, .timeout = 120)
{
    agent_proc a;
    agent_start_two_devices(&a);
    expect_every_build(&a, "vmmtwo", "vmmtwo: ok");
    agent_stop(&a);
}

Test(remote, no_agent_listening_is_a_clear_error, .timeout = 60)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    agent_proc gone = a;
    agent_stop(&a);
    program_result r = run_through(&gone, 1, "vecadd", "static", NULL);
    cr_assert_neq(r.status, 0, "%s", r.output);
    cr_assert(strstr(r.output, "rig: agent b: cannot connect to 127.0.0.1:"), "%s", r.output);
    cr_assert_lt(r.seconds, 20);
    program_result_free(&r);
}

Test(remote, wrong_key_is_a_clear_error, .timeout = 60)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    agent_proc wrong = a;
    memset(wrong.key_hex, 'a', 64);
    program_result r = run_through(&wrong, 1, "vecadd", "static", NULL);
    cr_assert_neq(r.status, 0, "%s", r.output);
    cr_assert(strstr(r.output, "rig: agent b: refused: wrong key"), "%s", r.output);
    program_result_free(&r);
    agent_stop(&a);
}

/* softgpu's own kernel tests, run as programs of their own through the
 * shim and an agent: every test process is one job. Two launch tests are
 * about softgpu in-process (a fault leaving other contexts usable, device
 * memory read as host memory) and do not apply to proxies, where a job
 * fails whole and device memory is remote. */
/* The tests a Criterion binary lists (its --list ignores --filter). */
static int listed_tests(const char *path)
{
    char *argv[] = { (char *)path, "--list", NULL };
    char *env[] = { NULL };
    program_result r = program_run(argv, env, 60);
    cr_assert_eq(r.status, 0, "%s --list exited %d:\n%s", path, r.status, r.output);
    int n = 0;
    for (const char *p = r.output; (p = strstr(p, "\xe2\x94\x80\xe2\x94\x80 ")); p++)   /* "── " */
        n++;
    program_result_free(&r);
    return n;
}

/* Runs a suite with filter through the shim and an agent; every test but
 * the excluded ones must run and pass (a filter that selects nothing also
 * prints "Failing: 0"). */
static void run_suite_through(const char *binary, const char *filter, int excluded)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    char path[256], agents_var[256], key[96], preload[300];
    snprintf(path, sizeof path, SHIM_BUILD "/tests/%s", binary);
    cr_assert_eq(access(path, X_OK), 0, "%s is not built", path);
    int want = listed_tests(path) - excluded;
    cr_assert_gt(want, 0, "%s lists no tests to run", binary);
    agents_env(&a, 1, agents_var, sizeof agents_var);
    snprintf(key, sizeof key, "RIG_REMOTE_KEY=%s", a.key_hex);
    shim_env(preload, sizeof preload);
    char filter_arg[256];
    snprintf(filter_arg, sizeof filter_arg, "--filter=%s", filter ? filter : "*/*");
    char *argv[] = { path, "-j1", filter_arg, NULL };
    char *env[] = { preload, agents_var, key, "RIG_LOCAL_DRIVER=none", NULL };
    program_result r = program_run(argv, env, 240);
    cr_expect_eq(r.status, 0, "%s through the shim exited %d:\n%s", binary, r.status, r.output);
    char summary[128];
    snprintf(summary, sizeof summary, "Tested: %d | Passing: %d | Failing: 0 | Crashing: 0", want, want);
    cr_expect(strstr(r.output, summary), "want \"%s\":\n%s", summary, r.output);
    program_result_free(&r);
    agent_stop(&a);
}

Test(remote, softgpu_kernel_tests_through_the_shim, .timeout = 300)
{
    run_suite_through("test_softgpu_kernels", NULL, 0);
}

Test(remote, softgpu_launch_tests_through_the_shim, .timeout = 300)
{
    run_suite_through("test_softgpu_launch",
                      "*/!(illegal_address_is_sticky_and_named|library_kernel_as_function_and_launch_ex)", 2);
}

/* The shim takes the job's variables out of the environment once cuInit
 * read them: a child the program starts after its first CUDA call sees none
 * of them (and the key never reaches it), while the rest of the environment
 * passes on as usual. */
Test(remote, children_inherit_no_job_variables, .timeout = 60)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    /* A descriptor the program inherits, for RIG_REMOTE_REPORT to name. */
    int report = open("/dev/null", O_WRONLY);
    cr_assert_geq(report, 0);
    char report_var[48];
    snprintf(report_var, sizeof report_var, "RIG_REMOTE_REPORT=%d", report);
    char *vars[] = { report_var, "RIG_TEST_MARK=1", NULL };
    program_result r = run_program(&a, 1, "envchild", "static", NULL, NULL, vars, 30);
    close(report);
    agent_stop(&a);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_assert(strstr(r.output, "envchild: child ran"), "%s", r.output);
    /* The child's environment was listed: the variable set beside them is there. */
    cr_assert(strstr(r.output, "envchild: child has RIG_TEST_MARK"), "%s", r.output);
    cr_assert(strstr(r.output, "envchild: child has RIG_LOCAL_DRIVER"), "%s", r.output);
    static const char *const gone[] = { "RIG_REMOTE_KEY", "RIG_REMOTE_AGENTS", "RIG_REMOTE_REPORT" };
    for (int i = 0; i < 3; i++) {
        char line[64];
        snprintf(line, sizeof line, "envchild: child has %s\n", gone[i]);
        cr_assert(!strstr(r.output, line), "the child inherited %s:\n%s", gone[i], r.output);
    }
    cr_assert(!strstr(r.output, a.key_hex), "the key is in the output:\n%s", r.output);
    cr_assert(strstr(r.output, "envchild: ok"), "%s", r.output);
    program_result_free(&r);
}

/* Copies whose bytes compress go compressed both ways on a slow link
 * (RIG_LINK_RATE tells both ends the link carries 1 MB/s, so that
 * compressing keeps up with it however loaded the machine) and arrive exactly; random
 * bytes go raw, as the sample says: the shim's RIG_STATS=1 line counts
 * exactly the sparse tensor's 8 MiB twice each way (once behind a kernel
 * writing the same buffer, which the copy in must follow), and is absent
 * when only random words travel. */
Test(remote, compressible_copies_go_compressed_both_ways, .timeout = 120)
{
    setenv("RIG_LINK_RATE", "1e6", 1);   /* the agent inherits it */
    agent_proc a;
    agent_start(&a, NULL, NULL);
    for (int random = 0; random < 2; random++) {
        char *args[] = { random ? (char *)"random" : NULL, NULL };
        char *extra[] = { (char *)"RIG_STATS=1", (char *)"RIG_LINK_RATE=1e6", NULL };
        program_result r = run_program(&a, 1, "sparsecopy", "static", NULL, args, extra, 90);
        cr_assert_eq(r.status, 0, "%s exited %d:\n%s", random ? "random" : "sparse", r.status, r.output);
        cr_assert(strstr(r.output, "sparsecopy: ok"), "%s", r.output);
        const char *at = strstr(r.output, " compressed out ");
        if (random) {
            cr_assert_null(at, "random words went compressed:\n%s", r.output);
        } else {
            unsigned long long out = 0, out_stored = 0, in = 0, in_stored = 0;
            cr_assert(at && sscanf(at, " compressed out %llu bytes as %llu, in %llu bytes as %llu", &out, &out_stored, &in,
                                   &in_stored) == 4,
                      "no compressed line:\n%s", r.output);
            cr_assert_eq(out, 16ull << 20, "%s", r.output);
            cr_assert_eq(in, 16ull << 20, "%s", r.output);
            cr_assert(out_stored > 0 && out_stored * 2 < out && in_stored > 0 && in_stored * 2 < in, "%s", r.output);
        }
        program_result_free(&r);
    }
    agent_stop(&a);
    unsetenv("RIG_LINK_RATE");
}

/* Runs waitspin MODE ROUNDS through a with a 100 ms spin; its wait's CPU
 * time and wall time in ms. */
static void waitspin(const agent_proc *a, const char *mode, long long rounds, double *cpu, double *wall)
{
    char count[32];
    snprintf(count, sizeof count, "%lld", rounds);
    char *args[] = { (char *)mode, count, NULL };
    char *extra[] = { (char *)"RIG_SPIN_US=100000", NULL };
    program_result r = run_program(a, 1, "waitspin", "static", NULL, args, extra, 90);
    cr_assert_eq(r.status, 0, "waitspin %s exited %d:\n%s", mode, r.status, r.output);
    char want[64];
    snprintf(want, sizeof want, "waitspin: ok %s cpu ", mode);
    const char *at = strstr(r.output, want);
    cr_assert(at && sscanf(at + strlen(want), "%lf ms of %lf ms", cpu, wall) == 2, "%s", r.output);
    program_result_free(&r);
}

/* A synchronize on a proxy waits as the device's scheduling flag says:
 * cudaDeviceScheduleBlockingSync sleeps at once, cudaDeviceScheduleSpin
 * polls the agent's socket first (RIG_SPIN_US, here 100 ms). The kernel is
 * sized from the first run to take about 40 ms, well inside the spin, so the
 * spinning thread's CPU time is most of its wait (less what the kernel's
 * own threads take from it) however fast the build runs kernels. */
Test(remote, a_synchronize_spins_or_sleeps_as_the_flag_says, .timeout = 120)
{
    agent_proc a;
    agent_start(&a, NULL, NULL);
    const long long probe = 4000000;
    double cpu_block, wall_block, cpu_spin, wall_spin;
    waitspin(&a, "block", probe, &cpu_block, &wall_block);
    cr_assert_gt(wall_block, 20, "the kernel took only %.1f ms: too short to tell waits apart", wall_block);
    cr_assert_lt(cpu_block, wall_block / 10, "blocking sync: the waiting thread used %.1f ms of CPU in a %.1f ms wait",
                 cpu_block, wall_block);
    long long rounds = (long long)((double)probe * 40 / wall_block);
    waitspin(&a, "spin", rounds > 0 ? rounds : 1, &cpu_spin, &wall_spin);
    cr_assert(cpu_spin > wall_spin / 5 && cpu_spin / wall_spin > 5 * cpu_block / wall_block,
              "spin: the waiting thread used %.1f ms of CPU in a %.1f ms wait (blocking sync: %.1f of %.1f ms)",
              cpu_spin, wall_spin, cpu_block, wall_block);
    /* A bound that is no number is named, and the default serves. */
    char *args[] = { (char *)"spin", (char *)"1000", NULL };
    char *extra[] = { (char *)"RIG_SPIN_US=fast", NULL };
    program_result r = run_program(&a, 1, "waitspin", "static", NULL, args, extra, 90);
    cr_assert_eq(r.status, 0, "waitspin with RIG_SPIN_US=fast exited %d:\n%s", r.status, r.output);
    cr_assert(strstr(r.output, "rig: RIG_SPIN_US=fast: not a whole number of microseconds from 0 to 100000; using 100") &&
                  strstr(r.output, "waitspin: ok spin"),
              "%s", r.output);
    program_result_free(&r);
    agent_stop(&a);
}

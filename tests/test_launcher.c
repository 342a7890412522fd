/* rig, the launcher, end to end: `rig run` through agents it starts here
 * (`local`) and over real ssh (a private sshd on a loopback port, see
 * tests/tools/sshd-start), restarts after an agent is killed mid-job, gives
 * up after its retries, exit statuses, Ctrl-C, --dry-run; `rig key`,
 * `rig probe`, `rig ls`, help and usage errors.
 *
 * The program of several tests is this test binary itself: run with
 * RIG_TEST_ROLE set, a constructor plays that role through the preloaded
 * shim (found with dlsym) and exits before Criterion starts. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/json.h"
#include "launcher/placement.h"
#include "launcher/quote.h"
#include "launcher/targets.h"
#include "proto/error.h"
#include "tests/harness.h"
#include "tests/support.h"
#include "tests/seed.h"

#define RIG RIG_BUILD_DIR "/rig"
#define VECADD PLAIN_BUILD "/programs/vecadd.static"
#define SSHD_START RIG_SOURCE_DIR "/tests/tools/sshd-start"
#define SSHD_STOP RIG_SOURCE_DIR "/tests/tools/sshd-stop"

/* ---- the program's roles ---- */

/* The port of the first agent of RIG_REMOTE_AGENTS. */
static unsigned first_agent_port(void)
{
    const char *a = getenv("RIG_REMOTE_AGENTS");
    const char *colon = a ? strrchr(a, ':') : NULL;
    const char *comma = a ? strchr(a, ',') : NULL;
    if (comma)
        for (colon = comma; colon > a && *colon != ':'; colon--)
            ;
    return colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 0;
}

/* The process listening on 127.0.0.1:port, found through /proc. */
static pid_t listener_of(unsigned port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return -1;
    char line[512];
    unsigned long inode = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned lport, st;
        unsigned long ino;
        if (sscanf(line, " %*d: %*8x:%x %*s %x %*s %*s %*s %*s %*s %lu", &lport, &st, &ino) == 3 &&
            lport == port && st == 0x0A)
            inode = ino;
    }
    fclose(f);
    if (!inode)
        return -1;
    char want[64];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *d = opendir("/proc");
    pid_t found = -1;
    for (struct dirent *e; d && found < 0 && (e = readdir(d));) {
        char fdpath[300];
        snprintf(fdpath, sizeof fdpath, "/proc/%s/fd", e->d_name);
        DIR *fds = opendir(fdpath);
        for (struct dirent *g; fds && (g = readdir(fds));) {
            char link[600], target[64];
            snprintf(link, sizeof link, "%s/%s", fdpath, g->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n > 0) {
                target[n] = '\0';
                if (strcmp(target, want) == 0) {
                    found = atoi(e->d_name);
                    break;
                }
            }
        }
        if (fds)
            closedir(fds);
    }
    if (d)
        closedir(d);
    return found;
}

#define SYM(name) __typeof__(name) *p_##name = (__typeof__(name) *)dlsym(RTLD_DEFAULT, #name)

/* Starts the job, kills its agent, and fails as a program does when its
 * GPU goes away. */
static int role_kill_agent(void)
{
    SYM(cuInit);
    SYM(cuDeviceGet);
    SYM(cuDevicePrimaryCtxRetain);
    SYM(cuCtxSetCurrent);
    SYM(cuMemAlloc_v2);
    SYM(cuMemFree_v2);
    /* Read before cuInit: the shim takes RIG_REMOTE_AGENTS out of the environment. */
    unsigned port = first_agent_port();
    if (!p_cuInit || p_cuInit(0) != CUDA_SUCCESS) {
        printf("helper: cuInit failed\n");
        return 4;
    }
    CUdevice dev;
    CUcontext ctx;
    if (p_cuDeviceGet(&dev, 0) || p_cuDevicePrimaryCtxRetain(&ctx, dev) || p_cuCtxSetCurrent(ctx)) {
        printf("helper: no device\n");
        return 4;
    }
    pid_t agent = listener_of(port);
    if (agent <= 0) {
        printf("helper: no agent listening on port %u\n", port);
        return 4;
    }
    kill(agent, SIGKILL);
    printf("helper: killed the agent (pid %d)\n", (int)agent);
    fflush(stdout);
    for (int i = 0; i < 100; i++) {
        CUdeviceptr p;
        CUresult rc = p_cuMemAlloc_v2(&p, 1 << 20);
        if (rc != CUDA_SUCCESS) {
            printf("helper: CUDA error %d once the agent was gone\n", rc);
            return 3;
        }
        p_cuMemFree_v2(p);
        usleep(50000);
    }
    printf("helper: the job went on without its agent\n");
    return 5;
}

static int role(const char *r)
{
    if (strcmp(r, "kill-agent-once") == 0) {
        const char *mark = getenv("RIG_TEST_MARK");
        int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0) {   /* the second attempt: a real program */
            char *argv[] = { VECADD, NULL };
            unsetenv("RIG_TEST_ROLE");
            execv(argv[0], argv);
            return 127;
        }
        close(fd);
        return role_kill_agent();
    }
    if (strcmp(r, "kill-agent") == 0)
        return role_kill_agent();
    if (strcmp(r, "wait") == 0) {
        SYM(cuInit);
        unsigned port = first_agent_port();   /* before cuInit takes it away */
        if (!p_cuInit || p_cuInit(0) != CUDA_SUCCESS)
            return 4;
        FILE *f = fopen(getenv("RIG_TEST_READY"), "w");
        fprintf(f, "%u\n", port);
        fclose(f);
        for (;;)
            pause();
    }
    if (strcmp(r, "env") == 0) {
        const char *key = getenv("RIG_REMOTE_KEY");
        const char *report = getenv("RIG_REMOTE_REPORT");
        printf("LD_PRELOAD=%s\nRIG_REMOTE_AGENTS=%s\nRIG_LOCAL_DRIVER=%s\nkey length %zu\n",
               getenv("LD_PRELOAD"), getenv("RIG_REMOTE_AGENTS"), getenv("RIG_LOCAL_DRIVER"),
               key ? strlen(key) : 0);
        if (report && fcntl(atoi(report), F_GETFD) >= 0)
            printf("report descriptor open\n");
        /* The key is on no command line and in no other process's
         * environment. */
        DIR *d = opendir("/proc");
        for (struct dirent *e; key && d && (e = readdir(d));) {
            if (atoi(e->d_name) <= 0 || atoi(e->d_name) == getpid())
                continue;
            static const char *const files[] = { "cmdline", "environ" };
            for (int i = 0; i < 2; i++) {
                char path[300];
                snprintf(path, sizeof path, "/proc/%s/%s", e->d_name, files[i]);
                int fd = open(path, O_RDONLY);
                if (fd < 0)
                    continue;
                static char buf[1 << 16];
                ssize_t n = read(fd, buf, sizeof buf - 1);
                close(fd);
                if (n > 0 && memmem(buf, (size_t)n, key, strlen(key)))
                    printf("the key is in %s\n", path);
            }
        }
        if (d)
            closedir(d);
        return 0;
    }
    fprintf(stderr, "helper: no role %s\n", r);
    return 2;
}

__attribute__((constructor)) static void maybe_play_a_role(void)
{
    const char *r = getenv("RIG_TEST_ROLE");
    if (r && *r) {
        int rc = role(r);
        fflush(NULL);
        _exit(rc);
    }
}

/* ---- running rig ---- */

typedef struct rig_result {
    int status;         /* exit code, 128 + signal, -1 on timeout */
    char out[1 << 18];  /* stdout and stderr together */
    double seconds;
} rig_result;

/* Runs rig with argv (argv[0] is "rig") and env_add through the harness's
 * runner (a process group of its own, like a shell's job). With ready set,
 * sends SIGINT to the group (what Ctrl-C does) once that file exists. */
static void rig_exec(rig_result *r, char *const argv[], char *const env_add[], int timeout_s, const char *ready)
{
    memset(r, 0, sizeof *r);
    char *env[64];
    size_t n = 0;
    /* The test binary as the program: the shim comes after its ASan. */
    env[n++] = "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0";
#ifdef __SANITIZE_ADDRESS__
    /* Programs are never sanitized: they preload the plain shim. */
    env[n++] = "RIG_SHIM=" PLAIN_BUILD "/librigshim.so";
    /* The test binary, sanitized, as the program: no RTLD_DEEPBIND. */
    env[n++] = "RIG_LOCAL_DRIVER=none";
#endif
    /* Last, so a test's own RIG_SHIM wins over the defaults above. */
    for (size_t i = 0; env_add && env_add[i]; i++) {
        cr_assert_lt(n, sizeof env / sizeof env[0] - 1);
        env[n++] = env_add[i];
    }
    env[n] = NULL;
    program_result p = program_run_until(RIG, argv, env, timeout_s, ready);
    size_t keep = p.len < sizeof r->out - 1 ? p.len : sizeof r->out - 1;
    memcpy(r->out, p.output, keep);
    r->out[keep] = '\0';
    r->status = p.status;
    r->seconds = p.seconds;
    program_result_free(&p);
}

/* A directory of the test's own with a targets file. */
typedef struct setup {
    char dir[64];
    char targets[128];
    char targets_env[160];
    char ssh_config_env[160];
    char ssh_dir[128];
    bool sshd;
} setup;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

static void setup_begin(setup *s, const char *targets_text)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/rig-launcher-XXXXXX");
    cr_assert_not_null(mkdtemp(s->dir));
    snprintf(s->targets, sizeof s->targets, "%s/targets", s->dir);
    snprintf(s->targets_env, sizeof s->targets_env, "RIG_TARGETS=%s", s->targets);
    write_file(s->targets, targets_text);
}

/* Starts the private sshd; targets name it as `rig-test-ssh` (a Host of the
 * ssh config RIG_SSH_CONFIG names). */
static void setup_sshd(setup *s)
{
    snprintf(s->ssh_dir, sizeof s->ssh_dir, "%s/ssh", s->dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, SSHD_START " %s >%s/port", s->ssh_dir, s->dir);
    cr_assert_eq(system(cmd), 0, "could not start sshd (%s)", cmd);
    s->sshd = true;
    snprintf(s->ssh_config_env, sizeof s->ssh_config_env, "RIG_SSH_CONFIG=%s/ssh_config", s->ssh_dir);
}

static void setup_end(setup *s)
{
    char cmd[512];
    if (s->sshd) {
        snprintf(cmd, sizeof cmd, SSHD_STOP " %s", s->ssh_dir);
        cr_expect_eq(system(cmd), 0);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    cr_expect_eq(system(cmd), 0);
}

static bool port_open(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(0x7f000001) };
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static char self_exe[4096];

static const char *self(void)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    cr_assert_gt(n, 0);
    self_exe[n] = '\0';
    return self_exe;
}

/* ---- the command ---- */

Test(launcher, help_version_and_usage_errors, .timeout = 30)
{
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "--version", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strncmp(r.out, "rig ", 4) == 0, "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "help", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "run ") && strstr(r.out, "probe") && strstr(r.out, "ls"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "help", "run", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "Usage: rig run") && strstr(r.out, "--retries"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "Usage: rig"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "frobnicate", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "no command 'frobnicate'"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "run", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "no program to run") && strstr(r.out, "Usage: rig run"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "run", "--retries", "many", "--", "true", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "--retries takes a count"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "probe", "--bogus", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "Usage: rig probe"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "agent", "--help", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "--key-stdin"), "%s", r.out);
    /* Where it listens by default: never every address. */
    rig_exec(&r, (char *[]){ "rig", "help", "agent", NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "(SSH_CONNECTION) when run over ssh, its address toward") &&
                  strstr(r.out, "the srun node under srun, else 127.0.0.1") &&
              strstr(r.out, "every address only with --listen 0.0.0.0:PORT") && !strstr(r.out, "else 0.0.0.0"),
              "%s", r.out);
}

Test(launcher, key_file_is_new_random_and_owner_only, .timeout = 30)
{
    setup s;
    setup_begin(&s, "");
    char path[128];
    snprintf(path, sizeof path, "%s/key", s.dir);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "key", path, NULL }, NULL, 10, NULL);
    cr_assert_eq(r.status, 0, "%s", r.out);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_size, 32);
    cr_expect_eq(st.st_mode & 0777, 0600);
    char first[32], second[32];
    FILE *f = fopen(path, "rb");
    cr_assert_eq(fread(first, 1, 32, f), 32u);
    fclose(f);
    rig_exec(&r, (char *[]){ "rig", "key", path, NULL }, NULL, 10, NULL);
    cr_expect_neq(r.status, 0, "an existing key was replaced without --force");
    cr_expect(strstr(r.out, "--force"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "key", "--force", path, NULL }, NULL, 10, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    f = fopen(path, "rb");
    cr_assert_eq(fread(second, 1, 32, f), 32u);
    fclose(f);
    cr_expect_neq(memcmp(first, second, 32), 0, "the same key twice");
    /* No FILE: ~/.config/rig/key, the one `rig agent` uses by default. */
    char home[160], want[200];
    snprintf(home, sizeof home, "HOME=%s/home", s.dir);
    snprintf(want, sizeof want, "%s/home/.config/rig/key\n", s.dir);
    mkdir(home + 5, 0700);
    rig_exec(&r, (char *[]){ "rig", "key", NULL }, (char *[]){ home, NULL }, 10, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect_str_eq(r.out, want);
    want[strlen(want) - 1] = '\0';
    cr_expect_eq(access(want, R_OK), 0);
    setup_end(&s);
}

Test(launcher, targets_file_errors_are_clear, .timeout = 30)
{
    setup s;
    setup_begin(&s, "# machines\ngpu some-host\ndefault gpu\nbroken line here\n");
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "gpu", "--", "true", NULL }, (char *[]){ s.targets_env, NULL },
             10, NULL);
    cr_expect_eq(r.status, 255);
    cr_expect(strstr(r.out, "targets:4: expected 'standing=HOST:PORT' after the address, found 'here'"), "%s",
              r.out);
    write_file(s.targets, "gpu some-host\n");
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "nosuch", "--", "true", NULL },
             (char *[]){ s.targets_env, NULL }, 10, NULL);
    cr_expect_eq(r.status, 255);
    cr_expect(strstr(r.out, "no target named 'nosuch'"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "gpu,gpu", "--", "true", NULL },
             (char *[]){ s.targets_env, NULL }, 10, NULL);
    cr_expect_eq(r.status, 255);
    cr_expect(strstr(r.out, "given twice"), "%s", r.out);
    /* An address is never taken for one of ssh's options. */
    write_file(s.targets, "evil -oProxyCommand=touch\n");
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "evil", "--", "true", NULL }, (char *[]){ s.targets_env, NULL },
             10, NULL);
    cr_expect_eq(r.status, 255);
    cr_expect(strstr(r.out, "'-oProxyCommand=touch' is not an ssh destination"), "%s", r.out);
    write_file(s.targets, "gpu some-host\n");
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "local", "--", "/no/such/program", NULL },
             (char *[]){ s.targets_env, NULL }, 10, NULL);
    cr_expect_eq(r.status, 255);
    cr_expect(strstr(r.out, "/no/such/program"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, dry_run_prints_what_would_run, .timeout = 30)
{
    setup s;
    setup_begin(&s, "gpu user@gpu-host.invalid\nbox local\ndefault gpu\n");
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--dry-run", "--rig", "/opt/rig/bin/rig", "--", "./train", "a b", NULL },
             (char *[]){ s.targets_env, NULL }, 10, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "agent gpu: ssh -T -o BatchMode=yes"), "%s", r.out);
    cr_expect(strstr(r.out, "-- user@gpu-host.invalid 'exec /opt/rig/bin/rig agent --lifeline'"), "%s", r.out);
    cr_expect(strstr(r.out, "RIG_REMOTE_AGENTS=gpu=") && strstr(r.out, "./train 'a b'"), "%s", r.out);
    cr_expect(!strstr(r.out, "RIG_LOCAL_DRIVER"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "run", "--dry-run", "--on", "gpu,box", "--", "true", NULL },
             (char *[]){ s.targets_env, NULL }, 10, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    /* With another machine, local listens where that one reaches it. */
    cr_expect(strstr(r.out, "agent box: " RIG " agent --lifeline --listen '<this machine'\\''s address toward gpu>:0'"),
              "%s", r.out);
    cr_expect(strstr(r.out, "RIG_REMOTE_AGENTS=gpu=<its agent's address>,box=") &&
              strstr(r.out, "RIG_LOCAL_DRIVER=none"), "%s", r.out);
    /* No --on: RIG_ON before the file's default. */
    rig_exec(&r, (char *[]){ "rig", "run", "--dry-run", "--", "true", NULL },
             (char *[]){ s.targets_env, "RIG_ON=box", NULL }, 10, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "agent box: ") && !strstr(r.out, "agent gpu: "), "%s", r.out);
    setup_end(&s);
}

/* ---- local agents ---- */

Test(launcher, local_agent_runs_a_program, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--", VECADD, NULL }, (char *[]){ s.targets_env, NULL }, 40, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "vecadd: ok"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, program_gets_the_job_and_the_key_stays_private, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "local", "--", (char *)self(), NULL },
             (char *[]){ s.targets_env, "RIG_TEST_ROLE=env", NULL }, 40, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "librigshim.so\n"), "%s", r.out);
    cr_expect(strstr(r.out, "RIG_REMOTE_AGENTS=local=127.0.0.1:"), "%s", r.out);
    cr_expect(strstr(r.out, "RIG_LOCAL_DRIVER=none"), "%s", r.out);
    cr_expect(strstr(r.out, "key length 64"), "%s", r.out);
    cr_expect(strstr(r.out, "report descriptor open"), "%s", r.out);
    cr_expect(!strstr(r.out, "the key is in"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, exit_status_is_the_programs, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--", "sh", "-c", "exit 7", NULL }, (char *[]){ s.targets_env, NULL },
             30, NULL);
    cr_expect_eq(r.status, 7, "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "run", "--", "sh", "-c", "kill -TERM $$", NULL },
             (char *[]){ s.targets_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 128 + SIGTERM, "%s", r.out);
    /* A program that fails on its own (no job failure) is not run again. */
    cr_expect(!strstr(r.out, "attempt"), "%s", r.out);
    setup_end(&s);
}

/* Ctrl-C while the program runs: it dies of SIGINT, rig exits 130 and its
 * agent (whose port the program wrote down) is gone. */
static void ctrl_c(setup *s, char *extra_env)
{
    char ready[128], ready_env[160];
    snprintf(ready, sizeof ready, "%s/ready", s->dir);
    snprintf(ready_env, sizeof ready_env, "RIG_TEST_READY=%s", ready);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--rig", RIG, "--", (char *)self(), NULL },
             (char *[]){ s->targets_env, "RIG_TEST_ROLE=wait", ready_env, extra_env, NULL }, 40, ready);
    cr_expect_eq(r.status, 128 + SIGINT, "%s", r.out);
    cr_expect(!strstr(r.out, "attempt"), "an interrupted job was started again:\n%s", r.out);
    char *text = support_read_file(ready, NULL);
    cr_assert_not_null(text);
    unsigned port = (unsigned)atoi(text);
    free(text);
    cr_expect_gt(port, 0u);
    cr_expect(!port_open(port), "the agent on port %u still listens", port);
}

Test(launcher, ctrl_c_reaches_the_program_and_ends_the_agents, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    ctrl_c(&s, NULL);
    setup_end(&s);
}

Test(launcher, probe_and_ls_show_the_local_machine, .timeout = 60)
{
    setup s;
    setup_begin(&s, "nowhere user@host.invalid\n");
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "probe", "--json", "local", NULL }, (char *[]){ s.targets_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "{\"target\":\"local\",\"address\":\"local\",\"host\":"), "%s", r.out);
    cr_expect(strstr(r.out, "\"devices\":[{\"ordinal\":0,\"name\":\"softgpu\",\"cc\":\"7.5\""), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "probe", NULL }, (char *[]){ s.targets_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "CUDA:0   softgpu"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "ls", NULL }, (char *[]){ s.targets_env, "RIG_SSH_CONFIG=/dev/null", NULL }, 40,
             NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "NAME"), "%s", r.out);
    cr_expect(strstr(r.out, "local*") && strstr(r.out, "1 x softgpu (7.5"), "%s", r.out);
    cr_expect(strstr(r.out, "nowhere ") && strstr(r.out, " down "), "%s", r.out);
    setup_end(&s);
}

/* ---- over ssh ---- */

static const char ssh_targets[] = "gpu rig-test-ssh\ndefault gpu\n";

Test(launcher, ssh_agent_runs_a_program, .timeout = 90)
{
    setup s;
    setup_begin(&s, ssh_targets);
    setup_sshd(&s);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "gpu", "--rig", RIG, "--", VECADD, NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, NULL }, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "vecadd: ok"), "%s", r.out);
    /* Two machines, one over ssh and this one: a device each, this
     * machine's seen only through its agent. */
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "gpu,local", "--rig", RIG, "--", PLAIN_BUILD "/programs/multidev.static",
                             NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, NULL }, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "multidev: ok 2 devices"), "%s", r.out);
    /* The key reached the agent over ssh's standard input only. */
    rig_exec(&r, (char *[]){ "rig", "run", "--rig", RIG, "--", (char *)self(), NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, "RIG_TEST_ROLE=env", NULL }, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "RIG_REMOTE_AGENTS=gpu=127.0.0.1:") && strstr(r.out, "key length 64"), "%s", r.out);
#ifndef __SANITIZE_ADDRESS__   /* where the test itself sets it */
    cr_expect(!strstr(r.out, "RIG_LOCAL_DRIVER=none"), "only a local agent hides local devices:\n%s", r.out);
#endif
    cr_expect(!strstr(r.out, "the key is in"), "%s", r.out);
    /* Probe goes over ssh too. */
    rig_exec(&r, (char *[]){ "rig", "probe", "--rig", RIG, "gpu", NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, NULL }, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "gpu (rig-test-ssh): host ") && strstr(r.out, "CUDA:0   softgpu"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, ssh_exit_status_and_ctrl_c, .timeout = 120)
{
    setup s;
    setup_begin(&s, ssh_targets);
    setup_sshd(&s);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--rig", RIG, "--", "sh", "-c", "exit 7", NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, NULL }, 60, NULL);
    cr_expect_eq(r.status, 7, "%s", r.out);
    ctrl_c(&s, s.ssh_config_env);
    setup_end(&s);
}

Test(launcher, agent_killed_mid_job_restarts_and_succeeds, .timeout = 120)
{
    setup s;
    setup_begin(&s, ssh_targets);
    setup_sshd(&s);
    char mark[160];
    snprintf(mark, sizeof mark, "RIG_TEST_MARK=%s/killed-once", s.dir);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--rig", RIG, "--", (char *)self(), NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, "RIG_TEST_ROLE=kill-agent-once", mark, NULL }, 100, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "helper: killed the agent"), "%s", r.out);
    cr_expect(strstr(r.out, "rig run: attempt 1 of 4 failed: gpu: "), "%s", r.out);
    cr_expect(strstr(r.out, "starting the job again"), "%s", r.out);
    cr_expect(strstr(r.out, "vecadd: ok"), "%s", r.out);
    cr_expect(!strstr(r.out, "attempt 2 of"), "%s", r.out);
    setup_end(&s);
}

/* Two machines (two targets reaching the one sshd), named by a group: an
 * agent on each with one key, the program sees both; the first agent
 * killed mid-job fails the job and the whole job starts again, both agents
 * fresh. */
Test(launcher, two_machines_one_job_and_a_killed_agent_restarts_both, .timeout = 150)
{
    setup s;
    setup_begin(&s, "b rig-test-ssh\nc rig-test-ssh\ngroup pair b,c\n");
    setup_sshd(&s);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "pair", "--rig", RIG, "--", PLAIN_BUILD "/programs/multidev.static",
                             NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, NULL }, 90, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "multidev: ok 2 devices"), "%s", r.out);
    char mark[160];
    snprintf(mark, sizeof mark, "RIG_TEST_MARK=%s/killed-once", s.dir);
    rig_exec(&r, (char *[]){ "rig", "run", "-v", "--on", "b,c", "--rig", RIG, "--", (char *)self(), NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, "RIG_TEST_ROLE=kill-agent-once", mark, NULL }, 120, NULL);
    cr_expect_eq(r.status, 0, "rig exited %d:\n%s", r.status, r.out);
    cr_expect(strstr(r.out, "helper: killed the agent"), "%s", r.out);
    /* The cause is b's, whoever saw it first: the controller ("b: ...") or
     * c, over the mesh ("c aborted: b: ..."). */
    const char *failed = strstr(r.out, "rig run: attempt 1 of 4 failed: ");
    char line[512] = "";
    if (failed)
        snprintf(line, sizeof line, "%.*s", (int)strcspn(failed, "\n"), failed);
    cr_expect(strstr(line, "failed: b: ") || strstr(line, "failed: c aborted: b: "), "%s", r.out);
    cr_expect(strstr(r.out, "starting the job again with fresh agents and a fresh key"), "%s", r.out);
    cr_expect(strstr(r.out, "vecadd: ok"), "%s", r.out);
    /* Both machines' agents started twice: the job restarts whole. */
    for (int m = 0; m < 2; m++) {
        const char *said = m ? "rig: c: agent listening on 127.0.0.1:" : "rig: b: agent listening on 127.0.0.1:";
        int seen = 0;
        for (const char *p = r.out; (p = strstr(p, said)); p++)
            seen++;
        cr_expect_eq(seen, 2, "%s started %d times:\n%s", m ? "c" : "b", seen, r.out);
    }
    setup_end(&s);
}

Test(launcher, job_that_always_fails_gives_up_with_the_last_cause, .timeout = 120)
{
    setup s;
    setup_begin(&s, ssh_targets);
    setup_sshd(&s);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--retries", "1", "--rig", RIG, "--", (char *)self(), NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, "RIG_TEST_ROLE=kill-agent", NULL }, 100, NULL);
    cr_expect_eq(r.status, 3, "%s", r.out);
    cr_expect(strstr(r.out, "rig run: attempt 1 of 2 failed: gpu: "), "%s", r.out);
    cr_expect(strstr(r.out, "rig run: giving up after 2 attempts: gpu: "), "%s", r.out);
    cr_expect(!strstr(r.out, "attempt 2 of 2 failed"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, ssh_failure_is_rigs_own_with_the_cause, .timeout = 120)
{
    setup s;
    setup_begin(&s, "gpu rig-test-ssh\n");
    setup_sshd(&s);
    rig_result r;
    /* No rig at that path there: the remote shell says so. */
    rig_exec(&r, (char *[]){ "rig", "run", "--on", "gpu", "--retries", "0", "--rig", "/nonexistent/rig", "--", VECADD,
                             NULL },
             (char *[]){ s.targets_env, s.ssh_config_env, NULL }, 60, NULL);
    cr_expect_eq(r.status, 255, "%s", r.out);
    cr_expect(strstr(r.out, "giving up after 1 attempt: gpu: ") && strstr(r.out, "/nonexistent/rig"), "%s", r.out);
    cr_expect(strstr(r.out, "--rig PATH"), "%s", r.out);
    setup_end(&s);
}

/* ---- in-process: the targets file and the JSON reader ---- */

static void load_targets(setup *s, const char *text, targets *t, rig_why *why, int *rc)
{
    write_file(s->targets, text);
    setenv("RIG_TARGETS", s->targets, 1);
    *rc = targets_load(t, why);
}

Test(launcher, targets_file_parses_and_selects, .timeout = 30)
{
    setup s;
    setup_begin(&s, "");
    static targets t;
    rig_why why = { "" };
    int rc;
    load_targets(&s, "# a comment\n\n  a  user@host-a   # trailing\nb ssh://u@h:2222\ndefault b\n", &t, &why, &rc);
    cr_assert_eq(rc, 0, "%s", why.text);
    cr_expect_eq(t.count, 3u);   /* a, b and the built-in local */
    cr_expect_str_eq(t.v[0].address, "user@host-a");
    cr_expect_str_eq(t.v[2].name, "local");
    cr_expect(t.v[2].local);
    cr_expect_str_eq(t.default_name, "b");
    const target *sel[TARGETS_MAX];
    size_t n;
    unsetenv("RIG_ON");
    cr_assert_eq(targets_select(&t, NULL, sel, &n, &why), 0, "%s", why.text);
    cr_expect(n == 1 && strcmp(sel[0]->name, "b") == 0);
    setenv("RIG_ON", "a,local", 1);
    cr_assert_eq(targets_select(&t, NULL, sel, &n, &why), 0, "%s", why.text);
    cr_expect(n == 2 && strcmp(sel[0]->name, "a") == 0 && sel[1]->local);
    cr_assert_eq(targets_select(&t, "b", sel, &n, &why), 0, "%s", why.text);
    cr_expect(n == 1 && strcmp(sel[0]->name, "b") == 0);
    unsetenv("RIG_ON");
    static const char *const bad[][2] = {
        { "a host extra\n", ":1: expected 'standing=HOST:PORT' after the address, found 'extra'" },
        { "a host standing=nohost\n", ":1: standing=nohost: " },
        { "a host standing=h:1 more\n", ":1: expected 'NAME ADDRESS [standing=HOST:PORT]'" },
        { "default a standing=h:1\n", ":1: expected 'NAME ADDRESS [standing=HOST:PORT]'" },
        { "lonely\n", ":1: expected 'NAME ADDRESS [standing=HOST:PORT]', 'group NAME MEMBER,MEMBER...' or 'default NAME'" },
        { "a h\na h2\n", ":2: target 'a' is named twice" },
        { "bad/name h\n", "'bad/name' is not a target name" },
        { "default h\n", "'h'" },
        { "a -oX=y\n", "is not an ssh destination" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        load_targets(&s, bad[i][0], &t, &why, &rc);
        cr_expect_lt(rc, 0, "accepted: %s", bad[i][0]);
        cr_expect(strstr(why.text, bad[i][1]), "%s: %s", bad[i][0], why.text);
    }
    load_targets(&s, "a h\n", &t, &why, &rc);
    cr_assert_eq(rc, 0);
    cr_expect_lt(targets_select(&t, "a,,b", sel, &n, &why), 0);
    cr_expect(strstr(why.text, "an empty name"), "%s", why.text);
    /* RIG_TARGETS naming a missing file is an error; the default path
     * missing is not. */
    setenv("RIG_TARGETS", "/nonexistent/targets", 1);
    cr_expect_lt(targets_load(&t, &why), 0);
    cr_expect(strstr(why.text, "/nonexistent/targets"), "%s", why.text);
    unsetenv("RIG_TARGETS");
    char home[128];
    snprintf(home, sizeof home, "%s/home", s.dir);
    setenv("HOME", home, 1);
    cr_expect_eq(targets_load(&t, &why), 0, "%s", why.text);
    cr_expect(t.count == 1 && t.v[0].local && !t.have_file);
    setup_end(&s);
}

Test(launcher, targets_groups_expand_and_their_errors_are_clear, .timeout = 30)
{
    setup s;
    setup_begin(&s, "");
    static targets t;
    rig_why why = { "" };
    int rc;
    load_targets(&s, "group pair b,c   # before its members\nb hb\nc hc\nd hd\ndefault pair\n", &t, &why, &rc);
    cr_assert_eq(rc, 0, "%s", why.text);
    cr_expect_eq(t.groups, 1u);
    cr_expect(targets_group(&t, "pair") && !targets_find(&t, "pair"));
    const target *sel[TARGETS_MAX];
    size_t n;
    unsetenv("RIG_ON");
    cr_assert_eq(targets_select(&t, NULL, sel, &n, &why), 0, "%s", why.text);
    cr_expect(n == 2 && strcmp(sel[0]->name, "b") == 0 && strcmp(sel[1]->name, "c") == 0);
    cr_assert_eq(targets_select(&t, "d,pair", sel, &n, &why), 0, "%s", why.text);
    cr_expect(n == 3 && strcmp(sel[0]->name, "d") == 0 && strcmp(sel[2]->name, "c") == 0);
    cr_expect_lt(targets_select(&t, "pair,c", sel, &n, &why), 0);
    cr_expect(strstr(why.text, "target 'c' is given twice"), "%s", why.text);
    static const char *const bad[][2] = {
        { "b h\ngroup pair b,x\n", ":2: group 'pair' names no target of the file: 'x'" },
        { "b h\ngroup g1 b\ngroup g2 g1\n", ":3: group 'g2' names the group 'g1' (members are machines)" },
        { "b h\ngroup pair b,b\n", ":2: group 'pair' names 'b' twice" },
        { "b h\ngroup pair b,,b\n", ":2: group 'pair': an empty name in 'b,,b'" },
        { "b h\ngroup pair b,\n", ":2: group 'pair': an empty name in 'b,'" },
        { "b h\ngroup pair\n", ":2: expected 'NAME ADDRESS [standing=HOST:PORT]', 'group NAME MEMBER,MEMBER...'" },
        { "b h\ngroup b b\n", ":2: target 'b' is named twice" },
        { "b h\ngroup pair b\npair h2\n", ":3: target 'pair' is named twice" },
        { "group h\n", "'group NAME MEMBER,MEMBER...'" },
        { "group x/y b\n", "'x/y' is not a group name" },
        { "group b h\n", ":1: group 'b' names no target of the file: 'h'" },
        { "default g\nb h\n", "the default target 'g' is not in the file" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        load_targets(&s, bad[i][0], &t, &why, &rc);
        cr_expect_lt(rc, 0, "accepted: %s", bad[i][0]);
        cr_expect(strstr(why.text, bad[i][1]), "%s: %s", bad[i][0], why.text);
    }
    unsetenv("RIG_TARGETS");
    setup_end(&s);
}

static const char probe_answer[] =
    "{\"host\":\"h\\u00e9\",\"driver\":\"softgpu\",\"version\":13000,\"busy\":false,\"controller\":\"\","
    "\"devices\":[{\"ordinal\":0,\"name\":\"softgpu\",\"cc\":\"7.5\",\"memory\":4294967296,\"free\":1.5e3},"
    "{\"ordinal\":1,\"name\":\"x\\\"y\",\"cc\":\"9.0\",\"memory\":0,\"free\":null}],\"deep\":[[[true]]]}\n";

Test(launcher, json_reads_a_probe_answer, .timeout = 10)
{
    json *j = json_parse(probe_answer);
    cr_assert_not_null(j);
    cr_expect_str_eq(json_str(j, "host"), "h\xc3\xa9");
    cr_expect_eq(json_num(j, "version", 0), 13000);
    cr_expect(!json_bool(j, "busy"));
    const json *d = json_get(j, "devices");
    cr_assert(d && d->type == JSON_ARRAY && d->count == 2);
    cr_expect_eq(json_num(&d->items[0], "memory", 0), 4294967296.0);
    cr_expect_eq(json_num(&d->items[0], "free", 0), 1500);
    cr_expect_str_eq(json_str(&d->items[1], "name"), "x\"y");
    cr_expect_eq(json_num(&d->items[1], "free", -1), -1);
    cr_expect_null(json_get(j, "absent"));
    json_free(j);
    static const char *const bad[] = { "", "{", "{\"a\":}", "{\"a\":1,}", "[1 2]", "{\"a\":1} x", "\"\\q\"",
                                       "\"\\u12\"", "tru", "{\"a\\", "\"\\" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_null(json_parse(bad[i]), "accepted %s", bad[i]);
    char deep[100];
    memset(deep, '[', 40);
    memset(deep + 40, ']', 40);
    deep[80] = '\0';
    cr_expect_null(json_parse(deep), "nested 40 deep");
}

/* The answer comes from another machine: no prefix and no bit flip makes
 * the reader read past its input or crash (SAN=1), a cut answer is never
 * taken for a whole one, and what a flip leaves valid is still an object. */
typedef struct json_walk {
    size_t full;                 /* the answer's length, its newline included */
    size_t flips_taken, flips_refused;
} json_walk;

static void parse_mutation(const uint8_t *p, size_t n, void *ctx)
{
    json_walk *w = ctx;
    char *text = malloc(n + 1);
    cr_assert_not_null(text);
    memcpy(text, p, n);
    text[n] = '\0';
    json *j = json_parse(text);
    if (n + 1 < w->full)
        cr_expect_null(j, "the answer cut to %zu bytes was taken", n);
    else if (n + 1 == w->full)
        cr_expect(j && j->type == JSON_OBJECT, "the answer without its newline was refused");
    else if (j) {
        w->flips_taken++;
        cr_expect_eq(j->type, JSON_OBJECT, "a bit flip made the answer a value of type %d", j->type);
    } else {
        w->flips_refused++;
    }
    json_free(j);
    free(text);
}

Test(launcher, json_survives_every_truncation_and_bit_flip, .timeout = 60)
{
    json_walk w = { .full = sizeof probe_answer - 1 };
    support_each_mutation((const uint8_t *)probe_answer, w.full, parse_mutation, &w);
    /* Flips inside strings leave valid JSON; flips of structure do not. */
    cr_expect_gt(w.flips_taken, 0);
    cr_expect_gt(w.flips_refused, 0);
}

/* ---- in-process: shell quoting ---- */

/* Runs `sh -c cmd` and returns its output (malloc'd, *len bytes). */
static char *sh_output(const char *cmd, size_t *len)
{
    char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
    program_result r = program_run(argv, NULL, 30);
    cr_assert_eq(r.status, 0, "sh -c exited %d on: %.300s\n%s", r.status, cmd, r.output);
    *len = r.len;
    return r.output;
}

/* Builds `printf '%s\0' WORDS...` with shell_join, has /bin/sh run it, and
 * expects each word back exactly. */
static void expect_round_trip(const char *const *words, size_t count, const char *what)
{
    const char **argv = calloc(count + 3, sizeof *argv);
    size_t cap = 64, want = 0;
    argv[0] = "printf";
    argv[1] = "%s\\0";
    for (size_t i = 0; i < count; i++) {
        argv[i + 2] = words[i];
        cap += SHELL_QUOTED_MAX(strlen(words[i])) + 1;
        want += strlen(words[i]) + 1;
    }
    char *cmd = malloc(cap);
    cmd[0] = '\0';
    cr_assert_eq(shell_join(cmd, cap, argv), 0, "%s: refused in a buffer of the most it needs", what);
    size_t n;
    char *out = sh_output(cmd, &n);
    cr_assert_eq(n, want, "%s: sh printed %zu bytes, not %zu, for: %.300s", what, n, want, cmd);
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(words[i]);
        cr_assert(memcmp(out + off, words[i], len + 1) == 0, "%s: word %zu came back as '%.200s' from: %.300s", what,
                  i, out + off, cmd);
        off += len + 1;
    }
    free(out);
    free(cmd);
    free(argv);
}

Test(launcher, shell_quote_round_trips_hostile_and_random_words_through_sh, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    char touch[256], backtick[256];
    snprintf(touch, sizeof touch, "$(touch %s/ran)", s.dir);
    snprintf(backtick, sizeof backtick, "`touch %s/ran`", s.dir);
    const char *hostile[] = {
        "", "'", "''", "\"", "\\", "\\'", "'\\''", touch, backtick, "a\nb", "\n", "\r\n", " ", "\t", "*", "?", "[a]",
        "~", "~root", "#x", "$HOME", "${HOME}", "$", "a;b", "a&b", "a|b", "<a", ">a", "!", "-n", "-e", "--",
        "%s", "%%", "\\0", "a'b'c", "it's", "\x01\x1f\x7f", "\xff\xfe", "\xc3\xa9t\xc3\xa9", "plain/path_1.2-3:4@5",
        "$(printf x)'$(printf y)'", "';touch /tmp/x;'", "\"$@\"", "a b", "{a,b}", "=x", "x=y",
    };
    expect_round_trip(hostile, sizeof hostile / sizeof hostile[0], "hostile words");
    char ran[200];
    snprintf(ran, sizeof ran, "%s/ran", s.dir);
    cr_expect_neq(access(ran, F_OK), 0, "a quoted word ran a command");

    unsigned seed = test_srand();
    static const char alphabet[] = "'\"\\$`()!*?[]{};&|<>~# \t\n\r%-=:/.aZ09";
    for (int round = 0; round < 20; round++) {
        char *words[40];
        for (size_t i = 0; i < 40; i++) {
            size_t len = (size_t)rand() % 48;
            words[i] = malloc(len + 1);
            for (size_t j = 0; j < len; j++)   /* any byte but NUL, hostile ones often */
                words[i][j] = rand() % 2 ? alphabet[rand() % (int)(sizeof alphabet - 1)] : (char)(1 + rand() % 255);
            words[i][len] = '\0';
        }
        char what[64];
        snprintf(what, sizeof what, "random words (seed %u, round %d)", seed, round);
        expect_round_trip((const char *const *)words, 40, what);
        for (size_t i = 0; i < 40; i++)
            free(words[i]);
    }
    /* Long words: 30000 bytes, one of them all quotes (quoted, four times
     * its size: near the kernel's 128 KiB for one argument). */
    char *longs[2] = { malloc(30001), malloc(30001) };
    for (size_t j = 0; j < 30000; j++) {
        longs[0][j] = alphabet[rand() % (int)(sizeof alphabet - 1)];
        longs[1][j] = '\'';
    }
    longs[0][30000] = longs[1][30000] = '\0';
    expect_round_trip((const char *const *)longs, 1, "a 30000-byte random word");
    expect_round_trip((const char *const *)longs + 1, 1, "30000 quotes");
    free(longs[0]);
    free(longs[1]);
    setup_end(&s);
}

/* For every cap short of what the result needs, from a buffer of exactly
 * cap bytes (so ASan sees any write past it): refused, the buffer as it
 * was. At exactly the need: the whole result. */
static void expect_all_or_nothing(const char *prefix, const char *const words[], bool join)
{
    size_t big = 1 << 16;
    char *whole = malloc(big);
    snprintf(whole, big, "%s", prefix);
    cr_assert_eq(join ? shell_join(whole, big, words) : shell_quote(whole, big, words[0]), 0);
    size_t need = strlen(whole) + 1;
    for (size_t cap = 0; cap <= need; cap++) {
        char *buf = malloc(cap ? cap : 1);
        char *before = malloc(cap ? cap : 1);
        /* A prefix that does not fit leaves no NUL within cap. */
        memset(buf, 'Z', cap);
        memcpy(buf, prefix, strlen(prefix) + 1 < cap ? strlen(prefix) + 1 : cap);
        memcpy(before, buf, cap);
        int rc = join ? shell_join(buf, cap, words) : shell_quote(buf, cap, words[0]);
        if (cap < need) {
            cr_expect_eq(rc, RIG_E_TOO_LONG, "'%s' + '%s': cap %zu of %zu accepted", prefix, words[0], cap, need);
            cr_expect(memcmp(buf, before, cap) == 0, "'%s' + '%s': cap %zu changed the buffer to '%.*s'", prefix,
                      words[0], cap, (int)cap, buf);
        } else {
            cr_expect_eq(rc, 0, "'%s' + '%s': refused at exactly %zu bytes", prefix, words[0], cap);
            cr_expect_str_eq(buf, whole);
        }
        free(buf);
        free(before);
    }
    free(whole);
}

Test(launcher, shell_quote_fits_whole_or_refuses_leaving_the_buffer, .timeout = 30)
{
    static const char *const cases[][4] = {
        { "plain", NULL }, { "it's", NULL }, { "''", NULL }, { "", NULL }, { "a b'c'd", NULL },
        { "exec", "/opt/my rig/rig", "agent", NULL }, { "exec", "/o'p't", "--lifeline", NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_all_or_nothing("", cases[i], false);
        expect_all_or_nothing("exec ", cases[i], false);
        expect_all_or_nothing("", cases[i], true);
        expect_all_or_nothing("ssh --", cases[i], true);
    }
    /* A 100000-byte path in the launcher's remote-command room: refused,
     * nothing of it left behind. */
    char *huge = malloc(100001);
    memset(huge, '\'', 100000);
    huge[100000] = '\0';
    static char remote[SHELL_QUOTED_MAX(4095) + 64];
    snprintf(remote, sizeof remote, "exec");
    cr_expect_eq(shell_join(remote, sizeof remote, (const char *const[]){ huge, "agent", NULL }), RIG_E_TOO_LONG);
    cr_expect_str_eq(remote, "exec");
    free(huge);
}

/* ---- where `rig agent` listens ---- */

/* Every address listening on TCP port `port` (/proc/net/tcp and tcp6), as
 * text; returns how many. */
static size_t listeners_on(unsigned port, char addrs[][INET6_ADDRSTRLEN], size_t max)
{
    size_t n = 0;
    for (int v6 = 0; v6 < 2; v6++) {
        FILE *f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
        if (!f)
            continue;
        char line[512], hex[40];
        unsigned lport, st;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, " %*d: %39[0-9A-Fa-f]:%x %*s %x", hex, &lport, &st) != 3 || lport != port || st != 0x0A ||
                n == max)
                continue;
            /* The kernel prints each 32-bit word of the address as a native
             * integer. */
            uint32_t words[4] = { 0 };
            for (size_t w = 0; w < strlen(hex) / 8 && w < 4; w++) {
                char part[9];
                memcpy(part, hex + 8 * w, 8);
                part[8] = '\0';
                words[w] = (uint32_t)strtoul(part, NULL, 16);
            }
            inet_ntop(v6 ? AF_INET6 : AF_INET, words, addrs[n++], INET6_ADDRSTRLEN);
        }
        fclose(f);
    }
    return n;
}

static bool connects(const char *host, unsigned port)
{
    bool v6 = strchr(host, ':') != NULL;
    struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
    cr_assert_eq(inet_pton(v6 ? AF_INET6 : AF_INET, host, v6 ? (void *)&a6.sin6_addr : (void *)&a4.sin_addr), 1);
    int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    bool ok = connect(fd, v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4, v6 ? sizeof a6 : sizeof a4) == 0;
    close(fd);
    return ok;
}

typedef struct rig_agent {
    pid_t pid;
    char out[4096], err[4096];   /* its standard output and error so far */
    char host[INET6_ADDRSTRLEN]; /* from its "listening on HOST:PORT" line */
    unsigned port;
} rig_agent;

/* Starts `rig agent --key-file KEY [extra]` with SSH_CONNECTION set to
 * ssh_connection (unset when NULL) and waits for its listening line. */
static void rig_agent_start(rig_agent *a, setup *s, const char *ssh_connection, const char *extra)
{
    memset(a, 0, sizeof *a);
    char key[160], out[160], err[160];
    snprintf(key, sizeof key, "%s/key", s->dir);
    snprintf(out, sizeof out, "%s/agent.out", s->dir);
    snprintf(err, sizeof err, "%s/agent.err", s->dir);
    int kfd = open(key, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(kfd, 0);
    cr_assert_eq(write(kfd, "0123456789abcdef0123456789abcdef", 32), 32);
    close(kfd);
    unlink(out);
    fflush(NULL);
    a->pid = fork();
    cr_assert_geq(a->pid, 0);
    if (a->pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int in = open("/dev/null", O_RDONLY);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        unsetenv("BXFI_MAP");
        if (ssh_connection)
            setenv("SSH_CONNECTION", ssh_connection, 1);
        else
            unsetenv("SSH_CONNECTION");
        putenv("ASAN_OPTIONS=detect_leaks=0");
        execl(RIG, "rig", "agent", "--key-file", key, extra, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 400; i++) {
        char *text = support_read_file(out, NULL);
        const char *at = text ? strstr(text, "listening on ") : NULL;
        bool done = at && strchr(at, '\n');
        if (done) {
            char hostport[200];
            cr_assert_eq(sscanf(at, "listening on %199s", hostport), 1);
            char *colon = strrchr(hostport, ':');
            cr_assert_not_null(colon, "%s", at);
            *colon = '\0';
            a->port = (unsigned)atoi(colon + 1);
            size_t hl = strlen(hostport);
            bool br = hostport[0] == '[' && hostport[hl - 1] == ']';
            snprintf(a->host, sizeof a->host, "%.*s", (int)(br ? hl - 2 : hl), hostport + br);
        }
        snprintf(a->out, sizeof a->out, "%s", text ? text : "");
        free(text);
        text = support_read_file(err, NULL);
        snprintf(a->err, sizeof a->err, "%s", text ? text : "");
        free(text);
        if (done || waitpid(a->pid, NULL, WNOHANG) == a->pid)
            break;
        usleep(50000);
    }
    cr_assert_gt(a->port, 0u, "rig agent did not say where it listens:\n%s%s", a->out, a->err);
}

static void rig_agent_stop(rig_agent *a)
{
    kill(a->pid, SIGKILL);
    waitpid(a->pid, NULL, 0);
}

/* It listens at host only: its line says so, the kernel's tables agree, a
 * connection there is taken, and never on every address. */
static void expect_listens_only_on(const rig_agent *a, const char *host)
{
    cr_expect_str_eq(a->host, host, "%s", a->out);
    char addrs[8][INET6_ADDRSTRLEN];
    size_t n = listeners_on(a->port, addrs, 8);
    cr_expect_eq(n, 1u, "%zu listeners on port %u", n, a->port);
    for (size_t i = 0; i < n; i++) {
        cr_expect_str_eq(addrs[i], host, "port %u", a->port);
        cr_expect(strcmp(addrs[i], "0.0.0.0") != 0 && strcmp(addrs[i], "::") != 0, "on every address");
    }
    cr_expect(connects(host, a->port), "no connection to %s:%u", host, a->port);
}

Test(launcher, agent_listens_on_loopback_when_not_reached_over_ssh, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    rig_agent a;
    rig_agent_start(&a, &s, NULL, NULL);
    expect_listens_only_on(&a, "127.0.0.1");
    cr_expect(strstr(a.err, "rig agent: listening on 127.0.0.1 (not reached over ssh; --listen HOST:PORT to choose)\n"),
              "%s", a.err);
    rig_agent_stop(&a);
    /* Every address only when asked, and then no note about a default. */
    rig_agent_start(&a, &s, NULL, "--listen=0.0.0.0:0");
    cr_expect_str_eq(a.host, "0.0.0.0");
    cr_expect(!strstr(a.err, "rig agent: listening"), "%s", a.err);
    rig_agent_stop(&a);
    /* An abbreviated --listen is the user's too, never overridden. */
    rig_agent_start(&a, &s, "10.9.8.7 50000 127.0.0.3 22", "--li=127.0.0.4:0");
    expect_listens_only_on(&a, "127.0.0.4");
    rig_agent_stop(&a);
    setup_end(&s);
}

Test(launcher, agent_listens_where_ssh_reached_it, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    rig_agent a;
    /* 127.0.0.2 is this machine too, but not 127.0.0.1. */
    rig_agent_start(&a, &s, "10.9.8.7 50000 127.0.0.2 22", NULL);
    expect_listens_only_on(&a, "127.0.0.2");
    cr_expect(!connects("127.0.0.1", a.port), "it listens on 127.0.0.1 too");
    cr_expect(strstr(a.err, "rig agent: listening on 127.0.0.2 (where ssh reached this machine; --listen HOST:PORT"),
              "%s", a.err);
    rig_agent_stop(&a);
    setup_end(&s);
}

Test(launcher, agent_listens_where_ssh_reached_it_over_ipv6, .timeout = 60)
{
    if (access("/proc/net/tcp6", F_OK) != 0)
        cr_skip_test("no IPv6 on this machine");
    setup s;
    setup_begin(&s, "");
    rig_agent a;
    rig_agent_start(&a, &s, "::1 50000 ::1 22", NULL);
    cr_expect(strstr(a.out, "listening on [::1]:"), "%s", a.out);
    expect_listens_only_on(&a, "::1");
    cr_expect(!connects("127.0.0.1", a.port), "it listens on 127.0.0.1 too");
    cr_expect(strstr(a.err, "rig agent: listening on [::1] (where ssh reached"), "%s", a.err);
    rig_agent_stop(&a);
    setup_end(&s);
}

Test(launcher, agent_refuses_an_ssh_connection_it_cannot_read, .timeout = 60)
{
    char *huge = malloc(100001);
    memset(huge, '1', 100000);
    huge[100000] = '\0';
    huge[10] = ' ';
    const char *bad[][2] = {
        { "garbage", "SSH_CONNECTION 'garbage' is not 'CLIENT PORT SERVER PORT'" },
        { "1.2.3.4 5 6.7.8.9 22 extra", "is not 'CLIENT PORT SERVER PORT'" },
        { "1.2.3.4 5 gpu-host 22", "the server address 'gpu-host' is not an IP address" },
        { "fe80::2 5 fe80::1%eth0 22", "'fe80::1%eth0' is not an IP address rig can listen on (a scoped one)" },
        { huge, "is not 'CLIENT PORT SERVER PORT'" },
    };
    setup s;
    setup_begin(&s, "");
    char key[160];
    snprintf(key, sizeof key, "%s/key", s.dir);
    write_file(key, "0123456789abcdef0123456789abcdef");
    chmod(key, 0600);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = strlen("SSH_CONNECTION=") + strlen(bad[i][0]) + 1;
        char *env = malloc(len);
        snprintf(env, len, "SSH_CONNECTION=%s", bad[i][0]);
        rig_result r;
        rig_exec(&r, (char *[]){ "rig", "agent", "--key-file", key, NULL }, (char *[]){ env, NULL }, 20, NULL);
        cr_expect_eq(r.status, 1, "%.100s: %s", bad[i][0], r.out);
        cr_expect(strstr(r.out, bad[i][1]) && strstr(r.out, "--listen HOST:PORT names where to listen"), "%.100s: %s",
                  bad[i][0], r.out);
        cr_expect(!strstr(r.out, "listening on"), "%.100s: %s", bad[i][0], r.out);
        cr_expect_lt(strlen(r.out), 400u, "the message repeats all of SSH_CONNECTION: %.100s", r.out);
        free(env);
    }
    setup_end(&s);
    free(huge);
}

/* ---- over-long input ---- */

/* A path of len bytes with a space and a quote in it (so quoting grows
 * it), malloc'd. */
static char *long_path(size_t len)
{
    char *p = malloc(len + 1);
    static const char part[] = "/it's a dir";
    for (size_t i = 0; i < len; i++)
        p[i] = part[i % (sizeof part - 1)];
    p[len] = '\0';
    return p;
}

Test(launcher, rig_path_longer_than_path_max_is_refused, .timeout = 60)
{
    setup s;
    setup_begin(&s, "gpu user@gpu-host.invalid\ndefault gpu\n");
    /* Nothing must reach ssh: a stand-in that says it ran. */
    static const size_t lens[] = { 4096, 5000, 100000 };
    for (size_t i = 0; i < 3; i++) {
        char *path = long_path(lens[i]);
        char *const cmds[][8] = {
            { "rig", "probe", "--rig", path, "gpu", NULL },
            { "rig", "ls", "--rig", path, NULL },
            { "rig", "run", "--rig", path, "--dry-run", "--", "true", NULL },
            { "rig", "run", "--rig", path, "--", "true", NULL },
        };
        for (size_t c = 0; c < 4; c++) {
            rig_result r;
            rig_exec(&r, cmds[c], (char *[]){ s.targets_env, "RIG_SSH=/bin/echo", NULL }, 20, NULL);
            char want[80];
            snprintf(want, sizeof want, "rig %s: --rig: path longer than 4095 bytes\n", cmds[c][1]);
            cr_expect_eq(r.status, 1, "rig %s, %zu bytes: %.300s", cmds[c][1], lens[i], r.out);
            cr_expect_str_eq(r.out, want, "rig %s, %zu bytes", cmds[c][1], lens[i]);
        }
        free(path);
    }
    /* 4095 bytes is a path: the dry run shows it whole, quoted. */
    char *path = long_path(4095);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--rig", path, "--dry-run", "--", "true", NULL },
             (char *[]){ s.targets_env, NULL }, 20, NULL);
    cr_expect_eq(r.status, 0, "%.300s", r.out);
    size_t cap = SHELL_QUOTED_MAX(4095) + 64;
    char *want = malloc(cap);
    char *quoted = malloc(cap);
    snprintf(want, cap, "exec");
    cr_assert_eq(shell_join(want, cap, (const char *const[]){ path, "agent", "--lifeline", NULL }), 0);
    quoted[0] = '\0';
    cr_assert_eq(shell_quote(quoted, cap, want), 0);
    cr_expect(strstr(r.out, quoted), "the remote command is not there whole: %.300s", r.out);
    free(want);
    free(quoted);
    free(path);
    setup_end(&s);
}

Test(launcher, key_file_path_longer_than_path_max_is_refused, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    static const size_t lens[] = { 4096, 5000, 100000 };
    for (size_t i = 0; i < 3; i++) {
        /* DIR/./././.../key-file-name: cut at 4095 it would still name a
         * file in DIR (key-fi...), written without a word. */
        char *path = malloc(lens[i] + 1);
        size_t n = (size_t)snprintf(path, lens[i] + 1, "%s/", s.dir);
        while (n + 2 < lens[i] - 20)
            n += (size_t)snprintf(path + n, lens[i] + 1 - n, "./");
        while (n < lens[i])
            path[n++] = 'k';
        path[n] = '\0';
        rig_result r;
        rig_exec(&r, (char *[]){ "rig", "key", path, NULL }, NULL, 20, NULL);
        cr_expect_eq(r.status, 1, "%zu bytes: %.300s", lens[i], r.out);
        cr_expect_str_eq(r.out, "rig key: FILE: path longer than 4095 bytes\n");
        free(path);
    }
    /* Nothing was written anywhere in DIR. */
    DIR *d = opendir(s.dir);
    for (struct dirent *e; (e = readdir(d));)
        cr_expect(strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, "targets") == 0,
                  "rig key wrote %s", e->d_name);
    closedir(d);
    /* HOME too long for HOME/.config/rig/key: for rig key and rig agent. */
    char *home = malloc(5000 + 6);
    memcpy(home, "HOME=", 5);
    memset(home + 5, 'h', 5000);
    home[5] = '/';
    home[5005] = '\0';
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "key", NULL }, (char *[]){ home, NULL }, 20, NULL);
    cr_expect_eq(r.status, 1, "%.300s", r.out);
    cr_expect(strstr(r.out, "rig key: HOME: path longer than 4079 bytes (room is needed for /.config/rig/key)"),
              "%.300s", r.out);
    rig_exec(&r, (char *[]){ "rig", "agent", NULL }, (char *[]){ home, NULL }, 20, NULL);
    cr_expect_eq(r.status, 1, "%.300s", r.out);
    cr_expect(strstr(r.out, "rig agent: HOME: path longer than 4079 bytes"), "%.300s", r.out);
    free(home);
    setup_end(&s);
}

Test(launcher, targets_file_long_lines_and_paths_are_errors, .timeout = 30)
{
    setup s;
    setup_begin(&s, "");
    static targets t;
    rig_why why = { "" };
    int rc;
    /* A comment of 2100 bytes whose tail looks like a target. */
    char *text = malloc(4000);
    size_t n = (size_t)snprintf(text, 4000, "ok host\n#");
    while (n < 2100)
        text[n++] = 'x';
    snprintf(text + n, 4000 - n, " evil evil-host\n");
    load_targets(&s, text, &t, &why, &rc);
    cr_expect_lt(rc, 0, "a long comment's tail was read as a line");
    cr_expect(strstr(why.text, "targets:2: line longer than 2046 bytes"), "%s", why.text);
    cr_expect_null(targets_find(&t, "evil"));
    /* 2046 bytes and its newline is a line. */
    n = (size_t)snprintf(text, 4000, "ok host #");
    while (n < 2046)
        text[n++] = 'x';
    snprintf(text + n, 4000 - n, "\nnext other\n");
    load_targets(&s, text, &t, &why, &rc);
    cr_expect_eq(rc, 0, "%s", why.text);
    cr_expect(targets_find(&t, "ok") && targets_find(&t, "next"));
    /* An address over its limit says so. */
    n = (size_t)snprintf(text, 4000, "a ");
    while (n < 600)
        text[n++] = 'h';
    snprintf(text + n, 4000 - n, "\n");
    load_targets(&s, text, &t, &why, &rc);
    cr_expect_lt(rc, 0);
    cr_expect(strstr(why.text, "targets:1: the address of 'a' is longer than 511 bytes"), "%s", why.text);
    free(text);
    /* RIG_TARGETS and HOME too long to be a path. */
    char *path = long_path(5000);
    setenv("RIG_TARGETS", path, 1);
    cr_expect_lt(targets_load(&t, &why), 0);
    cr_expect_str_eq(why.text, "RIG_TARGETS: path longer than 4095 bytes");
    unsetenv("RIG_TARGETS");
    setenv("HOME", path, 1);
    cr_expect_lt(targets_load(&t, &why), 0);
    cr_expect(strstr(why.text, "HOME: path longer than 4075 bytes (room is needed for /.config/rig/targets); set RIG_TARGETS"), "%s", why.text);
    free(path);
    setup_end(&s);
}

Test(launcher, run_keeps_long_environment_and_arguments_whole, .timeout = 60)
{
    setup s;
    setup_begin(&s, "box local\n");
    /* LD_PRELOAD of 9000 bytes: kept whole, the shim after it. */
    char *preload = malloc(9000 + 12);
    size_t n = (size_t)snprintf(preload, 12, "LD_PRELOAD=");
    while (n < 9000 + 11)
        n += (size_t)snprintf(preload + n, 9000 + 12 - n, "/lib/x.so:");
    preload[9000 + 11] = '\0';
    /* An argument of 50000 bytes with quotes in it. */
    char *arg = long_path(50000);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--dry-run", "--", "true", arg, NULL },
             (char *[]){ s.targets_env, preload, NULL }, 20, NULL);
    cr_expect_eq(r.status, 0, "%.300s", r.out);
    char *want = malloc(SHELL_QUOTED_MAX(50000) + 1);
    want[0] = '\0';
    cr_assert_eq(shell_quote(want, SHELL_QUOTED_MAX(50000) + 1, arg), 0);
    cr_expect(strstr(r.out, want), "the argument is not there whole");
    char *p = strstr(r.out, "LD_PRELOAD=");
    cr_assert_not_null(p);
    cr_expect(strncmp(p, preload, 9000 + 11) == 0 && strstr(p + 9000 + 11, "librigshim.so"),
              "LD_PRELOAD was cut: %.100s", p + 9000);
    free(want);
    free(arg);
    free(preload);
    /* RIG_SHIM and PROG too long to be paths. */
    char *path = long_path(5000);
    char *shim = malloc(5000 + 10);
    snprintf(shim, 5000 + 10, "RIG_SHIM=%s", path);
    rig_exec(&r, (char *[]){ "rig", "run", "--", "true", NULL }, (char *[]){ s.targets_env, shim, NULL }, 20, NULL);
    cr_expect_eq(r.status, 255, "%.300s", r.out);
    cr_expect_str_eq(r.out, "rig run: RIG_SHIM: path longer than 4095 bytes\n");
    rig_exec(&r, (char *[]){ "rig", "run", "--", path, NULL }, (char *[]){ s.targets_env, NULL }, 20, NULL);
    cr_expect_eq(r.status, 255, "%.300s", r.out);
    cr_expect_str_eq(r.out, "rig run: PROG: path longer than 4095 bytes\n");
    free(shim);
    free(path);
    setup_end(&s);
}

Test(launcher, ls_marks_a_cut_device_summary, .timeout = 60)
{
    setup s;
    setup_begin(&s, "many some-host\n");
    /* A stand-in for ssh that answers the probe with 40 devices of
     * different names: more than one line of `rig ls` holds. */
    char ssh[160], ssh_env[200];
    snprintf(ssh, sizeof ssh, "%s/fake-ssh", s.dir);
    FILE *f = fopen(ssh, "w");
    cr_assert_not_null(f);
    fprintf(f, "#!/bin/sh\nprintf '{\"host\":\"h\",\"driver\":\"d\",\"version\":1,\"busy\":false,\"devices\":['\n"
               "i=0; while [ $i -lt 40 ]; do [ $i -gt 0 ] && printf ,\n"
               "printf '{\"ordinal\":%%d,\"name\":\"device-model-number-%%02d\",\"cc\":\"9.0\",\"memory\":1}' $i $i\n"
               "i=$((i+1)); done; printf ']}\\n'\n");
    fclose(f);
    chmod(ssh, 0700);
    snprintf(ssh_env, sizeof ssh_env, "RIG_SSH=%s", ssh);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "ls", NULL }, (char *[]){ s.targets_env, ssh_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    char *line = strstr(r.out, "\nmany ");
    cr_assert_not_null(line, "%s", r.out);
    char *end = strchr(line + 1, '\n');
    cr_assert_not_null(end);
    cr_expect(strstr(line, "1 x device-model-number-00 (9.0, 0.0 GiB)"), "%s", r.out);
    cr_expect(end - 3 > line && strncmp(end - 3, "...", 3) == 0, "a cut summary not marked: %.*s", (int)(end - line),
              line);
    setup_end(&s);
}

/* Groups: a target of several machines. rig ls shows each after the
 * machines, with its members, its state from theirs and all their devices
 * together; rig probe shows each machine of a group or a list. A stand-in
 * for ssh answers per address: host-b free, busy-host busy, down-host
 * unreachable. */
Test(launcher, ls_and_probe_show_groups, .timeout = 60)
{
    setup s;
    setup_begin(&s, "b host-b\nc busy-host\nd down-host\ngroup pair b,local\ngroup hot b,c\ngroup broken c,d\n"
                    "default pair\n");
    char ssh[160], ssh_env[200];
    snprintf(ssh, sizeof ssh, "%s/fake-ssh", s.dir);
    FILE *f = fopen(ssh, "w");
    cr_assert_not_null(f);
    fprintf(f, "#!/bin/sh\ncase \"$*\" in\n"
               "*down-host*) echo 'ssh: connect to host down-host port 22: No route to host' >&2; exit 255;;\n"
               "*busy-host*) busy=true;;\n*) busy=false;;\nesac\n"
               "printf '{\"host\":\"h\",\"driver\":\"d\",\"version\":1,\"busy\":%%s,\"devices\":"
               "[{\"ordinal\":0,\"name\":\"fake\",\"cc\":\"9.0\",\"memory\":1073741824}]}\\n' $busy\n");
    fclose(f);
    chmod(ssh, 0700);
    snprintf(ssh_env, sizeof ssh_env, "RIG_SSH=%s", ssh);
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "ls", NULL }, (char *[]){ s.targets_env, ssh_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    static const char *const rows[][3] = {
        { "\npair* ", " b,local ", " free  1 x fake (9.0, 1.0 GiB), 1 x softgpu (7.5, " },
        { "\nhot ", " b,c ", " busy  2 x fake (9.0, 1.0 GiB)" },
        { "\nbroken ", " c,d ", " down  d: ssh: connect to host down-host port 22: No route to host" },
    };
    for (size_t i = 0; i < 3; i++) {
        const char *row = strstr(r.out, rows[i][0]);
        char line[512] = "";
        if (row)
            snprintf(line, sizeof line, "%.*s", (int)strcspn(row + 1, "\n"), row + 1);
        cr_expect(strstr(line, rows[i][1]) && strstr(line, rows[i][2]), "no row '%s ... %s ... %s' in:\n%s",
                  rows[i][0] + 1, rows[i][1], rows[i][2], r.out);
    }
    /* The machines' own rows come first, the group's after them. */
    cr_expect(strstr(r.out, "\nb ") && strstr(r.out, "\nb ") < strstr(r.out, "\npair* "), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "ls", "--json", NULL }, (char *[]){ s.targets_env, ssh_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "{\"group\":\"hot\",\"members\":[\"b\",\"c\"],\"state\":\"busy\",\"summary\":\"2 x fake "),
              "%s", r.out);
    cr_expect(strstr(r.out, "{\"group\":\"broken\",\"members\":[\"c\",\"d\"],\"state\":\"down\",\"error\":\"d: "),
              "%s", r.out);
    json *j = json_parse(r.out);
    cr_expect(j && j->type == JSON_ARRAY && j->count == 7, "not an array of 4 machines and 3 groups:\n%s", r.out);
    json_free(j);
    /* rig probe: a group, a list, a machine given twice shown once; the
     * default is the group. */
    rig_exec(&r, (char *[]){ "rig", "probe", "hot", "c,b", NULL }, (char *[]){ s.targets_env, ssh_env, NULL }, 30,
             NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    const char *bp = strstr(r.out, "b (host-b): host h"), *cp = strstr(r.out, "c (busy-host): host h");
    cr_expect(bp && cp && bp < cp && !strstr(bp + 1, "b (host-b)") && !strstr(cp + 1, "c (busy-host)"), "%s", r.out);
    cr_expect(strstr(r.out, "busy: serving a job"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "probe", NULL }, (char *[]){ s.targets_env, ssh_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "b (host-b): ") && strstr(r.out, "local (local): ") && strstr(r.out, "CUDA:0   softgpu"),
              "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "probe", "nosuch", NULL }, (char *[]){ s.targets_env, ssh_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 255, "%s", r.out);
    cr_expect(strstr(r.out, "no target named 'nosuch'"), "%s", r.out);
    /* --dry-run on a group: an agent on each member. */
    rig_exec(&r, (char *[]){ "rig", "run", "--dry-run", "--on", "hot", "--", "prog", NULL },
             (char *[]){ s.targets_env, ssh_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "agent b: ") && strstr(r.out, "agent c: ") &&
                  strstr(r.out, "RIG_REMOTE_AGENTS=b=<its agent's address>,c=<its agent's address>"),
              "%s", r.out);
    setup_end(&s);
}

/* ---- rig exec ---- */

/* sh -c SCRIPT with rig, the targets and the ssh config in its environment
 * ($RIG), interrupted (SIGINT to its group) once `ready` exists. */
static void exec_sh(rig_result *r, setup *s, const char *script, const char *ready, int timeout_s)
{
    char *env[] = { s->targets_env, s->ssh_config_env, "RIG=" RIG, "FOO=bar baz", "HOME=/nonexistent-rig-home",
                    NULL };
    program_result p = program_run_until("/bin/sh", (char *[]){ "sh", "-c", (char *)script, NULL }, env, timeout_s,
                                         ready);
    size_t keep = p.len < sizeof r->out - 1 ? p.len : sizeof r->out - 1;
    memcpy(r->out, p.output, keep);
    r->out[keep] = '\0';
    r->status = p.status;
    program_result_free(&p);
}

Test(launcher, exec_runs_as_if_here, .timeout = 120)
{
    setup s;
    setup_begin(&s, ssh_targets);
    setup_sshd(&s);
    rig_result r;
    char script[1024];
    /* Working directory and environment travel; HOME is the other machine's. */
    snprintf(script, sizeof script,
             "cd %s && exec $RIG exec --rig $RIG -- sh -c 'echo \"pwd=$(pwd) foo=$FOO home=$HOME\"; exit 7'", s.dir);
    exec_sh(&r, &s, script, NULL, 60);
    cr_expect_eq(r.status, 7, "%s", r.out);
    char expect[256];
    snprintf(expect, sizeof expect, "pwd=%s foo=bar baz home=", s.dir);
    cr_expect(strstr(r.out, expect) && !strstr(r.out, "home=/nonexistent-rig-home"), "%s", r.out);
    /* Standard input reaches the command whole, after the environment. */
    exec_sh(&r, &s, "head -c 300000 /dev/zero | tr '\\0' x | $RIG exec --rig $RIG -- wc -c", NULL, 60);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "300000"), "%s", r.out);
    /* A command the other machine lacks: 127, as a shell says. */
    exec_sh(&r, &s, "$RIG exec --rig $RIG -- no-such-command-rig", NULL, 60);
    cr_expect_eq(r.status, 127, "%s", r.out);
    cr_expect(strstr(r.out, "rig exec: no-such-command-rig: No such file or directory"), "%s", r.out);
    /* A terminal when rig has one: script(1) gives it one. */
    exec_sh(&r, &s,
            "script -qec \"$RIG exec --rig $RIG -- sh -c 'test -t 0 && test -t 1 && echo both-terminals; "
            "echo foo=\\$FOO; exit 4'\" /dev/null </dev/null",
            NULL, 60);
    cr_expect_eq(r.status, 4, "%s", r.out);
    cr_expect(strstr(r.out, "both-terminals") && strstr(r.out, "foo=bar baz"), "%s", r.out);
    /* --no-tty under a terminal: pipes. */
    exec_sh(&r, &s,
            "script -qec \"$RIG exec --no-tty --rig $RIG -- sh -c 'test -t 1 || echo no-terminal'\" /dev/null "
            "</dev/null",
            NULL, 60);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "no-terminal"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, exec_signals_reach_the_command_and_its_children, .timeout = 120)
{
    setup s;
    setup_begin(&s, ssh_targets);
    setup_sshd(&s);
    rig_result r;
    char script[1024], ready[160];
    /* Ctrl-C (SIGINT to rig's process group) ends the command and the
     * children it started there: 130, as the command died of it. */
    snprintf(ready, sizeof ready, "%s/ready", s.dir);
    snprintf(script, sizeof script, "exec $RIG exec --rig $RIG -- sh -c 'sleep 37.25 & touch %s; wait'", ready);
    exec_sh(&r, &s, script, ready, 60);
    cr_expect_eq(r.status, 130, "%s", r.out);
    usleep(300000);
    program_result p = program_run((char *[]){ "/usr/bin/pgrep", "-f", "sleep 37.25", NULL }, NULL, 10);
    cr_expect_neq(p.status, 0, "the command's child survived:\n%s", p.output);
    program_result_free(&p);
    /* SIGTERM sent to rig alone reaches a command that traps it. */
    unlink(ready);
    snprintf(script, sizeof script,
             "$RIG exec --rig $RIG -- sh -c 'trap \"echo got-term; exit 3\" TERM; touch %s; while :; do sleep "
             "0.1; done' & pid=$!; while [ ! -e %s ]; do sleep 0.05; done; kill -TERM $pid; wait $pid",
             ready, ready);
    exec_sh(&r, &s, script, NULL, 60);
    cr_expect_eq(r.status, 3, "%s", r.out);
    cr_expect(strstr(r.out, "got-term"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, exec_local_and_unreachable, .timeout = 60)
{
    setup s;
    setup_begin(&s, "gone ssh://127.0.0.1:1\n");
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "exec", "--on", "local", "--", "sh", "-c", "exit 4", NULL },
             (char *[]){ s.targets_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 4, "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "exec", "--on", "gone", "--", "true", NULL }, (char *[]){ s.targets_env, NULL },
             30, NULL);
    cr_expect_eq(r.status, 255, "%s", r.out);
    cr_expect(strstr(r.out, "127.0.0.1") && strstr(r.out, "refused"), "ssh's reason is shown:\n%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "exec", "--on", "gone,local", "--", "true", NULL },
             (char *[]){ s.targets_env, NULL }, 30, NULL);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "rig exec: --on names one target, not 2"), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "exec", "--child", "../../etc", "--cwd", "/", "--", "true", NULL }, NULL, 30,
             NULL);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "is not an id rig exec made"), "%s", r.out);
    setup_end(&s);
}

/* ---- rig serve ---- */

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
    socklen_t len = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

Test(launcher, serve_run_and_stop_a_standing_agent, .timeout = 180)
{
    setup s;
    setup_begin(&s, "gpu rig-test-ssh   # the GPU box\ndefault gpu\n");
    setup_sshd(&s);
    char fleet_env[160], listen[32], state[128], standing[128];
    snprintf(fleet_env, sizeof fleet_env, "RIG_FLEET_KEY=%s/fleet-key", s.dir);
    unsigned port = free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%u", port);
    snprintf(state, sizeof state, "%s/serve", s.dir);
    snprintf(standing, sizeof standing, "gpu rig-test-ssh standing=%s # the GPU box\n", listen);
    char *env[] = { s.targets_env, s.ssh_config_env, fleet_env, NULL };
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "key", "--fleet", NULL }, env, 30, NULL);
    cr_assert_eq(r.status, 0, "%s", r.out);

    /* --dry-run says every step and changes nothing. */
    rig_exec(&r, (char *[]){ "rig", "serve", "--on", "gpu", "--listen", listen, "--rig", RIG, "--state-dir", state,
                             "--dry-run", NULL },
             env, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "would write the fleet key to") && strstr(r.out, "would start a supervisor"), "%s",
              r.out);
    cr_expect_neq(access(state, F_OK), 0, "--dry-run made %s", state);
    cr_expect(!port_open(port));

    rig_exec(&r, (char *[]){ "rig", "serve", "--on", "gpu", "--listen", listen, "--rig", RIG, "--state-dir", state,
                             NULL },
             env, 60, NULL);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "serving on 127.0.0.1:") && strstr(r.out, "`rig run --on gpu` uses it"), "%s", r.out);
    char *targets = support_read_file(s.targets, NULL);
    cr_expect(targets && strstr(targets, standing), "the targets file:\n%s", targets);
    free(targets);

    /* rig run uses it: nothing started over ssh, the job on the agent. */
    rig_exec(&r, (char *[]){ "rig", "run", "--rig", RIG, "--", VECADD, NULL }, env, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "vecadd: ok"), "%s", r.out);
    char log[160];
    snprintf(log, sizeof log, "%s/agent.log", state);
    char *text = support_read_file(log, NULL);
    cr_expect(text && strstr(text, "job from 127.0.0.1:"), "the standing agent served no job:\n%s", text);
    free(text);

    /* The supervisor starts an agent that ended again. */
    char kill_cmd[256];
    snprintf(kill_cmd, sizeof kill_cmd, "pkill -KILL -f '[a]gent --config %s/agent.conf'", state);
    cr_assert_eq(system(kill_cmd), 0);
    bool again = false;
    for (int i = 0; i < 100 && !again; i++) {
        usleep(100000);
        text = support_read_file(log, NULL);
        again = text && strstr(text, "starting it again") && port_open(port);
        free(text);
    }
    cr_expect(again, "the agent was not started again");
    rig_exec(&r, (char *[]){ "rig", "run", "--rig", RIG, "--", VECADD, NULL }, env, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);

    /* rig ls asks the standing agent itself with the fleet key. */
    char line[160];
    snprintf(line, sizeof line, "  standing %s: free; CUDA:0 softgpu ", listen);
    bool free_seen = false;
    for (int i = 0; i < 20 && !free_seen; i++) {   /* until the last job's worker has gone */
        rig_exec(&r, (char *[]){ "rig", "ls", "--rig", RIG, NULL }, env, 60, NULL);
        free_seen = strstr(r.out, line) != NULL;
        if (!free_seen)
            usleep(250000);
    }
    cr_expect(free_seen, "no '%s' in:\n%s", line, r.out);
    char agents_var[96], key_var[200];
    snprintf(agents_var, sizeof agents_var, "RIG_REMOTE_AGENTS=g=%s", listen);
    snprintf(key_var, sizeof key_var, "RIG_KEY_FILE=%s/fleet-key", s.dir);
    char preload[512];
    shim_env(preload, sizeof preload);
    int devnull = open("/dev/null", O_WRONLY);
    pid_t job = child_spawn(PLAIN_BUILD "/programs/hang_wait.static",
                            (char *[]){ "hang_wait", "forever", NULL },
                            (char *[]){ agents_var, key_var, preload, "RIG_LOCAL_DRIVER=none", NULL }, -1, devnull,
                            devnull);
    close(devnull);
    snprintf(line, sizeof line, "  standing %s: busy, a job from 127.0.0.1:", listen);
    bool busy_seen = false;
    for (int i = 0; i < 40 && !busy_seen; i++) {
        usleep(250000);
        rig_exec(&r, (char *[]){ "rig", "ls", "--rig", RIG, NULL }, env, 60, NULL);
        busy_seen = strstr(r.out, line) != NULL;
    }
    cr_expect(busy_seen, "no '%s' in:\n%s", line, r.out);
    rig_exec(&r, (char *[]){ "rig", "ls", "--json", "--rig", RIG, NULL }, env, 60, NULL);
    cr_expect(strstr(r.out, "\"standing\":{\"address\":\"127.0.0.1:") && strstr(r.out, "\"status\":{\"busy\":true,"),
              "%s", r.out);
    kill(-job, SIGKILL);
    waitpid(job, NULL, 0);

    /* Another fleet key: the job fails, naming the key. */
    char other_env[160];
    snprintf(other_env, sizeof other_env, "RIG_FLEET_KEY=%s/other-key", s.dir);
    char *other[] = { s.targets_env, s.ssh_config_env, other_env, NULL };
    rig_exec(&r, (char *[]){ "rig", "key", "--fleet", NULL }, other, 30, NULL);
    rig_exec(&r, (char *[]){ "rig", "run", "--retries", "0", "--rig", RIG, "--", VECADD, NULL }, other, 60, NULL);
    cr_expect_neq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "key"), "the failure does not name the key:\n%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "ls", "--rig", RIG, NULL }, other, 60, NULL);
    cr_expect(strstr(r.out, ": down: refused: wrong key"), "%s", r.out);

    rig_exec(&r, (char *[]){ "rig", "serve", "--on", "gpu", "--stop", "--rig", RIG, "--state-dir", state, NULL },
             env, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(!port_open(port), "the agent still listens after --stop");
    cr_expect_neq(access(state, F_OK), 0, "--stop left %s", state);
    targets = support_read_file(s.targets, NULL);
    cr_expect(targets && strstr(targets, "gpu rig-test-ssh # the GPU box\n") && !strstr(targets, "standing"),
              "the targets file:\n%s", targets);
    free(targets);
    setup_end(&s);
}

/* ---- placement (rig run --gpus) ---- */

/* A machine's probe answer with devices of the given free GiB. */
static json *answer_with(bool busy, const double *free_gib, int n)
{
    char text[4096];
    int off = snprintf(text, sizeof text, "{\"busy\":%s,\"devices\":[", busy ? "true" : "false");
    for (int i = 0; i < n; i++)
        off += snprintf(text + off, sizeof text - (size_t)off,
                        "%s{\"ordinal\":%d,\"name\":\"gpu%d\",\"memory\":85899345920,\"free\":%.0f}", i ? "," : "", i,
                        i, free_gib[i] * 1073741824.0);
    snprintf(text + off, sizeof text - (size_t)off, "]}");
    json *j = json_parse(text);
    cr_assert_not_null(j, "%s", text);
    return j;
}

static void plan_text(const placement *p, const placement_machine *m, char *out, size_t cap)
{
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < p->count; i++)
        off += (size_t)snprintf(out + off, cap - off, "%s%s:%d", i ? " " : "", m[p->d[i].machine].name,
                                p->d[i].ordinal);
}

Test(launcher, placement_fewest_machines_most_free_memory)
{
    json *a = answer_with(false, (double[]){ 10, 70, 20, 80 }, 4);   /* 4 devices */
    json *b = answer_with(false, (double[]){ 79, 78 }, 2);           /* 2 roomy ones */
    json *c = answer_with(true, (double[]){ 80, 80, 80, 80, 80 }, 5);  /* busy */
    json *d = answer_with(false, (double[]){ 5 }, 1);
    placement_machine m[] = { { "a", a }, { "b", b }, { "c", c }, { "down", NULL }, { "d", d } };
    placement p;
    char why[256], text[256];
    static const struct {
        int gpus;
        double min_gib;
        const char *plan;
    } cases[] = {
        { 1, 0, "a:3" },                   /* the most free memory of any */
        { 2, 0, "b:0 b:1" },               /* one machine; b's two beat a's best two */
        { 3, 0, "a:3 a:1 a:2" },           /* only a holds three */
        { 4, 0, "a:3 a:1 a:2 a:0" },
        { 5, 0, "a:3 a:1 a:2 a:0 b:0" },   /* two machines: a whole, then the best one */
        { 6, 0, "a:3 a:1 a:2 a:0 b:0 b:1" },
        { 7, 0, "a:3 a:1 a:2 a:0 b:0 b:1 d:0" },
        { 2, 60, "b:0 b:1" },              /* --min-memory 60G: a has two too, with less free */
        { 3, 60, "b:0 b:1 a:3" },          /* none has three: the roomier pair, then the best one */
        { 1, 79.5, "a:3" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = placement_plan(m, 5, cases[i].gpus, cases[i].min_gib * 1073741824.0, &p, why, sizeof why);
        cr_expect_eq(rc, 0, "gpus %d: %s", cases[i].gpus, why);
        plan_text(&p, m, text, sizeof text);
        cr_expect_str_eq(text, cases[i].plan, "gpus %d min %.0f GiB", cases[i].gpus, cases[i].min_gib);
    }
    cr_expect_eq(placement_plan(m, 5, 8, 0, &p, why, sizeof why), -1);
    cr_expect_str_eq(why, "8 devices wanted, 7 free with enough memory (of 5 machines: 1 down, 1 busy)");
    cr_expect_eq(placement_plan(m, 5, 4, 75.0 * 1073741824.0, &p, why, sizeof why), -1);
    cr_expect(strstr(why, "4 devices wanted, 3 free"), "%s", why);
    double bytes;
    cr_expect(placement_parse_size("20G", &bytes) == 0 && bytes == 20.0 * 1073741824.0);
    cr_expect(placement_parse_size("1.5TiB", &bytes) == 0 && bytes == 1.5 * 1099511627776.0);
    cr_expect(placement_parse_size("512", &bytes) == 0 && bytes == 512);
    cr_expect_eq(placement_parse_size("12X", &bytes), -1);
    cr_expect_eq(placement_parse_size("-1G", &bytes), -1);
    cr_expect_eq(placement_parse_size("G", &bytes), -1);
    json_free(a), json_free(b), json_free(c), json_free(d);
}

Test(launcher, gpus_places_and_the_program_sees_those_only, .timeout = 120)
{
    setup s;
    setup_begin(&s, "");
    rig_result r;
    char *env[] = { s.targets_env, "SOFTGPU_DEVICES=3", NULL };
    rig_exec(&r, (char *[]){ "rig", "run", "--gpus", "4", "--on", "local", "--dry-run", "--", "true", NULL }, env, 60,
             NULL);
    cr_expect_eq(r.status, 255, "%s", r.out);
    cr_expect(strstr(r.out, "cannot place the job: 4 devices wanted"), "%s", r.out);
    /* An agent here serving another test's job makes this machine busy for
     * a while: the run is tried until it is free. */
    for (int i = 0; i < 60; i++) {
        rig_exec(&r, (char *[]){ "rig", "run", "--gpus", "2", "--on", "local", "--", PLAIN_BUILD "/programs/multidev.static",
                                 NULL },
                 env, 60, NULL);
        if (!strstr(r.out, "busy)"))
            break;
        sleep(1);
    }
    if (strstr(r.out, "busy)"))
        cr_skip_test("this machine stayed busy for a minute (other jobs on it): %s", r.out);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "placing 2 devices on 1 machine: CUDA:0@local (softgpu, 4.0 GiB free), CUDA:1@local"),
              "%s", r.out);
    cr_expect(strstr(r.out, "multidev: ok 2 devices"), "the program saw other devices:\n%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "run", "--gpus", "4", "--on", "local", "--", "true", NULL }, env, 60, NULL);
    cr_expect_eq(r.status, 255, "%s", r.out);
    cr_expect(strstr(r.out, "cannot place the job: 4 devices wanted, "), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "run", "--min-memory", "1G", "--", "true", NULL }, env, 60, NULL);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "--min-memory goes with --gpus"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, stats_table_per_job, .timeout = 60)
{
    setup s;
    setup_begin(&s, "");
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--stats", "--", VECADD, NULL }, (char *[]){ s.targets_env, NULL }, 60,
             NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    const char *t = strstr(r.out, "rig run: job stats, wall time ");
    cr_assert_not_null(t, "%s", r.out);
    const char *row = strstr(t, "\n  CUDA:0@local ");
    cr_assert_not_null(row, "%s", r.out);
    unsigned long long calls = 0, rt = 0;
    cr_expect_eq(sscanf(row + 15, "%llu %llu", &calls, &rt), 2, "%s", row);
    cr_expect(calls >= 5 && rt >= 1 && rt <= calls, "calls %llu, round trips %llu:\n%s", calls, rt, r.out);
    /* Without --stats, no table. */
    rig_exec(&r, (char *[]){ "rig", "run", "--", VECADD, NULL }, (char *[]){ s.targets_env, NULL }, 60, NULL);
    cr_expect(!strstr(r.out, "job stats"), "%s", r.out);
    setup_end(&s);
}

Test(launcher, gpus_over_three_standing_agents, .timeout = 120)
{
    /* Three standing agents with the fleet key, with 1, 3 and 2 GiB. */
    agent_proc ag[3];
    static const char *const mem[] = { "1G", "3G", "2G" };
    for (int i = 0; i < 3; i++) {
        setenv("SOFTGPU_MEMORY", mem[i], 1);
        agent_start(&ag[i], i ? &ag[0] : NULL, NULL);
    }
    unsetenv("SOFTGPU_MEMORY");
    char text[512];
    snprintf(text, sizeof text,
             "a a.invalid standing=127.0.0.1:%u\nb b.invalid standing=127.0.0.1:%u\nc c.invalid "
             "standing=127.0.0.1:%u\n",
             ag[0].port, ag[1].port, ag[2].port);
    setup s;
    setup_begin(&s, text);
    char fleet[200];
    snprintf(fleet, sizeof fleet, "RIG_FLEET_KEY=%s", ag[0].key_file);
    char *env[] = { s.targets_env, fleet, NULL };
    rig_result r;
    rig_exec(&r, (char *[]){ "rig", "run", "--gpus", "1", "--dry-run", "--", "true", NULL }, env, 60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "placing 1 device on 1 machine: CUDA:0@b (softgpu, 3.0 GiB free)"), "%s", r.out);
    cr_expect(strstr(r.out, "RIG_REMOTE_DEVICES=CUDA:0@b "), "%s", r.out);
    rig_exec(&r, (char *[]){ "rig", "run", "--gpus", "2", "--min-memory", "2.5G", "--", "true", NULL }, env, 60,
             NULL);
    cr_expect_eq(r.status, 255, "%s", r.out);
    cr_expect(strstr(r.out, "2 devices wanted, 1 free with enough memory (of 3 machines: 0 down, 0 busy)"), "%s",
              r.out);
    rig_exec(&r, (char *[]){ "rig", "run", "--gpus", "2", "--", PLAIN_BUILD "/programs/multidev.static", NULL }, env,
             60, NULL);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "placing 2 devices on 2 machines: CUDA:0@b (softgpu, 3.0 GiB free), CUDA:0@c "
                            "(softgpu, 2.0 GiB free)"),
              "%s", r.out);
    cr_expect(strstr(r.out, "multidev: ok 2 devices"), "%s", r.out);
    for (int i = 0; i < 3; i++)
        agent_stop(&ag[i]);
    setup_end(&s);
}

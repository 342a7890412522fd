/* make install and make deb (issue 17): the installed tree serves a real job
 * through its own paths (rig-agent finding softgpu in PREFIX/lib/rig, a
 * program finding the shim through PREFIX/lib/rig/cuda), the unit passes
 * systemd-analyze, the man pages name every option the programs have, the
 * packages hold what they should, and rig-agent --config and rig key
 * --fleet behave. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "tests/harness.h"

#define SRC RIG_SOURCE_DIR
#define BUILD RIG_BUILD_DIR

/* A sub-make must not take the jobserver of the make that runs the tests. */
static char *const quiet_make[] = { "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "RIG_SUBMAKE", NULL };

static const char *san_arg(void)
{
    size_t n = strlen(BUILD);
    return n >= 4 && strcmp(BUILD + n - 4, "/san") == 0 ? "SAN=1" : "SAN=";
}

/* The harness runs a path; these tools are found on PATH. */
static char *tool(const char *name)
{
    const char *path = getenv("PATH");
    static char found[16][256];
    static int next;
    char *out = found[next++ % 16];
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(out, 256, "%.*s/%s", (int)n, p, name);
        if (n && access(out, X_OK) == 0)
            return out;
        p += n + (p[n] == ':');
    }
    snprintf(out, 256, "%s", name);   /* the harness then says it cannot run it */
    return out;
}

static char *tmpdir(const char *name)
{
    char *d = malloc(256);
    snprintf(d, 256, "/tmp/rig-install-%s-XXXXXX", name);
    cr_assert_not_null(mkdtemp(d), "mkdtemp: %s", strerror(errno));
    return d;
}

static void rm_rf(const char *d)
{
    char *argv[] = { tool("rm"), "-rf", (char *)d, NULL };
    program_result r = program_run(argv, NULL, 60);
    program_result_free(&r);
}

static program_result run_ok(char *const argv[], char *const env[], int timeout_s)
{
    program_result r = program_run(argv, env, timeout_s);
    cr_assert_eq(r.status, 0, "%s exited %d:\n%s", argv[0], r.status, r.output);
    return r;
}

static void make_install(const char *destdir, const char *prefix, const char *sysconf)
{
    char d[300], p[300], s[300];
    snprintf(d, sizeof d, "DESTDIR=%s", destdir);
    snprintf(p, sizeof p, "PREFIX=%s", prefix);
    snprintf(s, sizeof s, "SYSCONFDIR=%s", sysconf);
    char *argv[] = { tool("make"), "-s", "--no-print-directory", "-C", SRC, "install", d, p, s, (char *)san_arg(), NULL };
    program_result r = run_ok(argv, quiet_make, 300);
    program_result_free(&r);
}

static void expect_mode(const char *root, const char *rel, mode_t type, mode_t perm)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s", root, rel);
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s: %s", path, strerror(errno));
    cr_expect_eq(st.st_mode & S_IFMT, type, "%s: type %o, expected %o", rel, st.st_mode & S_IFMT, type);
    if (type != S_IFLNK)
        cr_expect_eq(st.st_mode & 07777, perm, "%s: mode %o, expected %o", rel, st.st_mode & 07777, perm);
}

static void expect_link(const char *root, const char *rel, const char *target)
{
    char path[512], got[512];
    snprintf(path, sizeof path, "%s%s", root, rel);
    ssize_t n = readlink(path, got, sizeof got - 1);
    cr_assert_gt(n, 0, "%s: not a link: %s", rel, strerror(errno));
    got[n] = '\0';
    cr_expect_str_eq(got, target, "%s points at %s", rel, got);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

Test(install, layout_and_kept_settings, .timeout = 300)
{
    char *dest = tmpdir("layout");
    make_install(dest, "/usr", "/etc");
    expect_mode(dest, "/usr/bin/rig", S_IFREG, 0755);
    expect_mode(dest, "/usr/sbin/rig-agent", S_IFREG, 0755);
    expect_mode(dest, "/usr/lib/rig/librigshim.so", S_IFREG, 0644);
    expect_mode(dest, "/usr/lib/rig/libcudasoft.so", S_IFREG, 0644);
    expect_link(dest, "/usr/lib/rig/cuda/libcuda.so.1", "../librigshim.so");
    expect_link(dest, "/usr/lib/rig/softgpu/libcuda.so.1", "../libcudasoft.so");
    expect_mode(dest, "/usr/share/man/man1/rig.1", S_IFREG, 0644);
    expect_mode(dest, "/usr/share/man/man8/rig-agent.8", S_IFREG, 0644);
    expect_mode(dest, "/usr/lib/systemd/system/rig-agent.service", S_IFREG, 0644);
    expect_mode(dest, "/etc/rig/agent.conf", S_IFREG, 0644);

    char path[512];
    snprintf(path, sizeof path, "%s/usr/lib/systemd/system/rig-agent.service", dest);
    char *unit = slurp(path);
    cr_expect(strstr(unit, "\nExecStart=/usr/sbin/rig-agent --config /etc/rig/agent.conf\n"),
              "the unit's ExecStart names the installed agent and settings:\n%s", unit);
    cr_expect(strstr(unit, "\nUser=rig-agent\n") && strstr(unit, "\nRestart=on-failure\n"), "%s", unit);
    cr_expect_null(strchr(unit, '@'), "a placeholder was left in the unit:\n%s", unit);
    free(unit);

    /* An administrator's settings survive the next install. */
    snprintf(path, sizeof path, "%s/etc/rig/agent.conf", dest);
    write_file(path, "listen = 10.0.0.1:7420\n", 0644);
    make_install(dest, "/usr", "/etc");
    char *conf = slurp(path);
    cr_expect_str_eq(conf, "listen = 10.0.0.1:7420\n");
    free(conf);

    /* The shipped settings are ones the agent takes. */
    snprintf(path, sizeof path, "%s/packaging/agent.conf", SRC);
    agent_config c;
    char why[512];
    cr_expect_eq(agent_config_read(&c, path, why, sizeof why), 0, "%s", why);
    cr_expect_str_eq(c.listen, "0.0.0.0:7420");
    cr_expect_str_eq(c.key_file, "/etc/rig/key");
    cr_expect_str_eq(c.driver, "");
    rm_rf(dest);
    free(dest);
}

/* Reads the agent's stdout until "listening on HOST:PORT"; returns the port. */
static int wait_listening(int fd, char *out, size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < 200; i++) {
        ssize_t n = read(fd, out + len, cap - 1 - len);
        if (n > 0) {
            len += (size_t)n;
            out[len] = '\0';
            const char *l = strstr(out, "listening on 127.0.0.1:");
            if (l && strchr(l, '\n'))
                return atoi(l + strlen("listening on 127.0.0.1:"));
        } else if (n == 0) {
            break;
        } else if (errno == EAGAIN) {
            usleep(50000);
        } else {
            break;
        }
    }
    return -1;
}

Test(install, installed_tree_serves_a_job, .timeout = 300)
{
    char *dest = tmpdir("serve");
    make_install(dest, "/usr", "/etc");
    char key[512], conf[512], agent[512], text[1200];
    snprintf(key, sizeof key, "%s/key", dest);
    write_file(key, "0123456789abcdef0123456789abcdef", 0600);
    snprintf(conf, sizeof conf, "%s/etc/rig/agent.conf", dest);
    snprintf(text, sizeof text, "# a test's agent\nlisten = 127.0.0.1:0\nkey-file = %s   # the job key\n", key);
    write_file(conf, text, 0644);

    snprintf(agent, sizeof agent, "%s/usr/sbin/rig-agent", dest);
    int out[2];
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    char *argv[] = { "rig-agent", "--config", conf, NULL };
    char log[400];
    snprintf(log, sizeof log, "%s/agent.log", dest);
    int log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(log_fd, 0);
    pid_t pid = child_spawn(agent, argv, NULL, -1, out[1], log_fd);
    close(log_fd);
    close(out[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    char said[4096];
    int port = wait_listening(out[0], said, sizeof said);
    cr_assert_gt(port, 0, "the installed agent did not listen; it said:\n%s", said);
    /* softgpu found in PREFIX/lib/rig, beside nothing in sbin. */
    char soft[600];
    snprintf(soft, sizeof soft, "(%s/usr/sbin/../lib/rig/libcudasoft.so)", dest);
    cr_expect(strstr(said, soft), "the agent did not name %s:\n%s", soft, said);

    char agents[128], keyenv[600], libpath[600];
    snprintf(agents, sizeof agents, "RIG_REMOTE_AGENTS=b=127.0.0.1:%d", port);
    snprintf(keyenv, sizeof keyenv, "RIG_KEY_FILE=%s", key);
    /* No LD_PRELOAD: cudart finds libcuda.so.1 in the installed folder. */
    snprintf(libpath, sizeof libpath, "LD_LIBRARY_PATH=%s/usr/lib/rig/cuda", dest);
    char *env[] = { agents, keyenv, libpath, "RIG_LOCAL_DRIVER=none", "LD_PRELOAD",
#ifdef RIG_ASAN_RUNTIME
                    "LD_PRELOAD=" RIG_ASAN_RUNTIME,
#endif
                    NULL };
    char *prog[] = { PLAIN_BUILD "/programs/vecadd.shared", NULL };
    program_result r = program_run(prog, env, 120);
    kill(-pid, SIGTERM);
    waitpid(pid, NULL, 0);
    close(out[0]);
    cr_expect_eq(r.status, 0, "vecadd through the installed shim and agent exited %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "vecadd: ok"), "%s", r.output);
    char *agent_log = slurp(log);
    /* Its end may be logged after the program exits: the start says it served. */
    cr_expect(strstr(agent_log, "job from 127.0.0.1:"), "the agent served no job:\n%s", agent_log);
    free(agent_log);
    program_result_free(&r);
    rm_rf(dest);
    free(dest);
}

Test(install, unit_passes_systemd_analyze, .timeout = 300)
{
    if (access("/usr/bin/systemd-analyze", X_OK) != 0)
        cr_skip_test("systemd-analyze is not installed here");
    /* Installed for real under a temporary PREFIX, so the unit's paths exist. */
    char *dir = tmpdir("unit");
    char prefix[300], sysconf[300], unit[400], manpath[400];
    snprintf(prefix, sizeof prefix, "%s/usr", dir);
    snprintf(sysconf, sizeof sysconf, "%s/etc", dir);
    make_install("", prefix, sysconf);
    snprintf(unit, sizeof unit, "%s/lib/systemd/system/rig-agent.service", prefix);
    snprintf(manpath, sizeof manpath, "MANPATH=%s/share/man", prefix);
    char *argv[] = { tool("systemd-analyze"), "verify", unit, NULL };
    char *env[] = { manpath, NULL };
    program_result r = program_run(argv, env, 60);
    cr_expect_eq(r.status, 0, "systemd-analyze verify exited %d:\n%s", r.status, r.output);
    cr_expect_eq(r.len, 0, "systemd-analyze verify said:\n%s", r.output);
    program_result_free(&r);
    rm_rf(dir);
    free(dir);
}

/* Every "--option" in text must appear in the man page (roff's "\-" read
 * as "-"). */
static void options_in_page(const char *help, const char *page, const char *what)
{
    int found = 0;
    for (const char *p = help; (p = strstr(p, "--"));) {
        const char *s = p + 2;
        size_t n = 0;
        while (isalnum((unsigned char)s[n]) || s[n] == '-')
            n++;
        if (n > 0 && isalpha((unsigned char)s[0])) {
            char opt[64];
            snprintf(opt, sizeof opt, "--%.*s", (int)n, s);
            cr_expect(strstr(page, opt), "%s: %s is not in the man page", what, opt);
            found++;
        }
        p = s + n;
    }
    cr_expect_gt(found, 0, "%s: no options found in its help", what);
}

static char *page_text(const char *name)
{
    char path[400];
    snprintf(path, sizeof path, "%s/packaging/%s", SRC, name);
    char *raw = slurp(path);
    /* "\-" is roff's minus; the options are written with it. */
    char *w = raw;
    for (const char *r = raw; *r; r++) {
        if (r[0] == '\\' && r[1] == '-')
            continue;
        *w++ = *r;
    }
    *w = '\0';
    return raw;
}

Test(install, man_pages_name_every_option, .timeout = 60)
{
    char *rig1 = page_text("rig.1"), *agent8 = page_text("rig-agent.8");
    char *help[] = { BUILD "/rig", "help", NULL };
    program_result r = run_ok(help, NULL, 30);
    /* Commands are the indented words under "Commands:". */
    const char *cmds = strstr(r.output, "Commands:\n");
    cr_assert_not_null(cmds, "%s", r.output);
    int commands = 0;
    for (const char *l = strchr(cmds, '\n') + 1; l[0] == ' ' && l[1] == ' '; l = strchr(l, '\n') + 1) {
        char cmd[32], sub[64];
        sscanf(l, "%31s", cmd);
        snprintf(sub, sizeof sub, ".SS \"rig %s", cmd);
        cr_expect(strstr(rig1, sub) || (strcmp(cmd, "version") == 0 && strstr(rig1, ", rig version\"")),
                  "rig.1 has no section for the command %s", cmd);
        commands++;
        if (strcmp(cmd, "help") == 0 || strcmp(cmd, "version") == 0)
            continue;
        char *argv[] = { BUILD "/rig", cmd, "--help", NULL };
        program_result h = run_ok(argv, NULL, 30);
        options_in_page(h.output, rig1, cmd);
        program_result_free(&h);
    }
    cr_expect_geq(commands, 5);
    program_result_free(&r);
    char *agent_help[] = { BUILD "/rig-agent", "--help", NULL };
    r = run_ok(agent_help, NULL, 30);
    options_in_page(r.output, agent8, "rig-agent");
    program_result_free(&r);

    /* groff finds nothing to warn about in either page. */
    for (int i = 0; i < 2; i++) {
        char path[400];
        snprintf(path, sizeof path, "%s/packaging/%s", SRC, i ? "rig-agent.8" : "rig.1");
        char *argv[] = { tool("groff"), "-man", "-ww", "-z", path, NULL };
        program_result g = program_run(argv, NULL, 30);
        cr_expect(g.status == 0 && g.len == 0, "groff on %s (%d):\n%s", path, g.status, g.output);
        program_result_free(&g);
    }
    free(rig1);
    free(agent8);
}

Test(install, agent_settings_errors_name_the_line)
{
    static const struct {
        const char *text, *why;
    } cases[] = {
        { "listen = a:1\nbogus\n", "f.conf:2: expected 'NAME = VALUE', found 'bogus'" },
        { "# c\n\nport = 4\n", "f.conf:3: unknown setting 'port' (known: listen, key-file, driver)" },
        { "listen = a:1\nlisten = b:2\n", "f.conf:2: 'listen' is set twice" },
        { "key-file =   # nothing\n", "f.conf:1: 'key-file' needs a value of 1 to 4095 bytes" },
        { "listen = a:1\0x\n", "f.conf: a NUL byte: not a text file" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        agent_config c;
        char why[512] = "";
        size_t len = strlen(cases[i].text) + (i == 4 ? 3 : 0);
        cr_expect_eq(agent_config_parse(&c, cases[i].text, len, "f.conf", why, sizeof why), -1, "case %zu taken",
                     i);
        cr_expect_str_eq(why, cases[i].why, "case %zu", i);
    }
    agent_config c;
    char why[512] = "";
    const char *good = "  listen=127.0.0.1:0  \r\n\tkey-file = /k # the key\ndriver = /d\n";
    cr_assert_eq(agent_config_parse(&c, good, strlen(good), "g.conf", why, sizeof why), 0, "%s", why);
    cr_expect_str_eq(c.listen, "127.0.0.1:0");
    cr_expect_str_eq(c.key_file, "/k");
    cr_expect_str_eq(c.driver, "/d");

    /* The program says the same and exits 1, serving nothing. */
    char *dir = tmpdir("conf");
    char conf[400];
    snprintf(conf, sizeof conf, "%s/agent.conf", dir);
    write_file(conf, "listen = 127.0.0.1:0\nkey = x\n", 0644);
    char *argv[] = { BUILD "/rig-agent", "--config", conf, NULL };
    program_result r = program_run(argv, NULL, 30);
    char expect[600];
    snprintf(expect, sizeof expect, "rig-agent: --config %s:2: unknown setting 'key'", conf);
    cr_expect_eq(r.status, 1, "%s", r.output);
    cr_expect(strstr(r.output, expect), "expected '%s' in:\n%s", expect, r.output);
    program_result_free(&r);
    rm_rf(dir);
    free(dir);
}

/* The file lists of `dpkg-deb -c`, paths only ("./usr/bin/rig"). */
static char *deb_files(const char *deb)
{
    char *argv[] = { tool("dpkg-deb"), "-c", (char *)deb, NULL };
    program_result r = run_ok(argv, NULL, 60);
    char *list = calloc(1, r.len + 1), *w = list;
    for (char *l = r.output; *l;) {
        char *nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        char *path = strstr(l, " ./");
        if (path && l[0] != 'd') {
            char *arrow = strstr(path, " -> ");
            if (arrow)
                *arrow = '\0';
            w += sprintf(w, "%s\n", path + 1);
        }
        l = nl ? nl + 1 : l + strlen(l);
    }
    program_result_free(&r);
    return list;
}

Test(install, debian_packages, .timeout = 600)
{
    char *argv[] = { tool("make"), "-s", "--no-print-directory", "-C", SRC, "deb", (char *)san_arg(), NULL };
    program_result r = run_ok(argv, quiet_make, 300);
    program_result_free(&r);
    static const struct {
        const char *deb, *files;
    } pkgs[] = {
        { BUILD "/deb/rig_0.1.0_amd64.deb",
          "./usr/bin/rig\n./usr/lib/rig/librigshim.so\n./usr/share/doc/rig/changelog.gz\n"
          "./usr/share/doc/rig/copyright\n./usr/share/man/man1/rig.1.gz\n./usr/lib/rig/cuda/libcuda.so.1\n" },
        { BUILD "/deb/rig-agent_0.1.0_amd64.deb",
          "./etc/rig/agent.conf\n./lib/systemd/system/rig-agent.service\n./usr/lib/rig/libcudasoft.so\n"
          "./usr/sbin/rig-agent\n./usr/share/doc/rig-agent/changelog.gz\n./usr/share/doc/rig-agent/copyright\n"
          "./usr/share/man/man8/rig-agent.8.gz\n./usr/lib/rig/softgpu/libcuda.so.1\n" },
    };
    for (size_t i = 0; i < 2; i++) {
        char *files = deb_files(pkgs[i].deb);
        cr_expect_str_eq(files, pkgs[i].files, "%s holds:\n%s", pkgs[i].deb, files);
        free(files);
        char *info[] = { tool("dpkg-deb"), "-f", (char *)pkgs[i].deb, "Depends", NULL };
        r = run_ok(info, NULL, 30);
        cr_expect(strstr(r.output, "libc6 (>=") && strstr(r.output, "libsodium23"), "%s Depends: %s",
                  pkgs[i].deb, r.output);
        program_result_free(&r);
    }
    char *conffiles[] = { tool("dpkg-deb"), "-I", (char *)pkgs[1].deb, "conffiles", NULL };
    r = run_ok(conffiles, NULL, 30);
    cr_expect_str_eq(r.output, "/etc/rig/agent.conf\n");
    program_result_free(&r);

    if (access("/usr/bin/lintian", X_OK) != 0)
        cr_skip_test("lintian is not installed here (scripts/install-deps installs it)");
    /* What lintian says that is accepted, and why (README "Install"). */
    char *lint[] = { tool("lintian"), "--tag-display-limit", "0", (char *)pkgs[0].deb, (char *)pkgs[1].deb, NULL };
    r = program_run(lint, NULL, 300);
    int bad = 0, tags = 0;
    for (char *l = r.output; *l;) {
        char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        /* Tags are "X: package: tag ..."; errors and warnings fail. */
        if (n > 3 && l[1] == ':' && l[2] == ' ' && strchr("EWIPXNOC", l[0])) {
            tags++;
            if (l[0] == 'E' || l[0] == 'W') {
                cr_expect_fail("lintian: %.*s", (int)n, l);
                bad++;
            }
        }
        l = nl ? nl + 1 : l + n;
    }
    (void)tags;
    cr_expect_eq(bad, 0, "lintian (status %d):\n%s", r.status, r.output);
    program_result_free(&r);
}

Test(install, fleet_key, .timeout = 120)
{
    char *dir = tmpdir("fleet");
    chmod(dir, 0755);
    /* A user's fleet key: ~/.config/rig/fleet-key, owner-only. */
    char home[300], homeenv[320];
    snprintf(home, sizeof home, "%s/home", dir);
    cr_assert_eq(mkdir(home, 0755), 0);
    cr_assert_eq(chown(home, 65534, 65534), 0, "%s", strerror(errno));
    snprintf(homeenv, sizeof homeenv, "HOME=%s", home);
    char *as_nobody[] = { tool("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", BUILD "/rig", "key",
                          "--fleet", NULL };
    char *env[] = { homeenv, "RIG_FLEET_KEY", NULL };
    program_result r = run_ok(as_nobody, env, 30);
    char path[400];
    snprintf(path, sizeof path, "%s/.config/rig/fleet-key", home);
    cr_expect(strstr(r.output, path), "%s", r.output);
    program_result_free(&r);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
    cr_expect_eq(st.st_mode & 07777, 0600);
    cr_expect_eq(st.st_uid, 65534u);
    cr_expect_eq(st.st_size, 32);

    /* root's: given to the user rig-agent where there is one. The user
     * exists only in a mount namespace whose /etc/passwd names it. */
    if (geteuid() != 0)
        cr_skip_test("not root: the fleet key of the service is root's to write");
    char passwd[400], group[400], keyenv[420], script[2400];
    snprintf(passwd, sizeof passwd, "%s/passwd", dir);
    snprintf(group, sizeof group, "%s/group", dir);
    char *real = slurp("/etc/passwd"), *realg = slurp("/etc/group");
    char *fake = malloc(strlen(real) + 200), *fakeg = malloc(strlen(realg) + 200);
    sprintf(fake, "%srig-agent:x:4242:4243::/nonexistent:/usr/sbin/nologin\n", real);
    sprintf(fakeg, "%srig-agent:x:4243:\n", realg);
    write_file(passwd, fake, 0644);
    write_file(group, fakeg, 0644);
    free(real), free(realg), free(fake), free(fakeg);
    snprintf(path, sizeof path, "%s/etc-rig-key", dir);
    snprintf(keyenv, sizeof keyenv, "RIG_FLEET_KEY=%s", path);
    snprintf(script, sizeof script,
             "mount --make-rprivate / && mount --bind %s /etc/passwd && mount --bind %s /etc/group && exec %s/rig "
             "key --fleet", passwd, group, BUILD);
    char *ns[] = { tool("unshare"), "--mount", "sh", "-c", script, NULL };
    char *env2[] = { keyenv, NULL };
    r = program_run(ns, env2, 30);
    if (r.status != 0 && strstr(r.output, "unshare"))
        cr_skip_test("no mount namespace here: %s", r.output);
    cr_assert_eq(r.status, 0, "%s", r.output);
    program_result_free(&r);
    cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
    cr_expect_eq(st.st_uid, 4242u, "the fleet key belongs to uid %u, not rig-agent's 4242", st.st_uid);
    cr_expect_eq(st.st_gid, 4243u);
    cr_expect_eq(st.st_mode & 07777, 0600);
    /* A second one is refused without --force. */
    char *again[] = { BUILD "/rig", "key", "--fleet", NULL };
    r = program_run(again, env2, 30);
    cr_expect_eq(r.status, 255, "%s", r.output);
    cr_expect(strstr(r.output, "rig key --force replaces it"), "%s", r.output);
    program_result_free(&r);
    rm_rf(dir);
    free(dir);
}

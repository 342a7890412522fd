/* `rig serve --on NAME`: makes NAME serve jobs all the time with the fleet
 * key (a standing agent), so `rig run --on NAME` needs no ssh per job.
 *
 * This side: finds rig there (or copies this one), hands over the fleet key
 * on ssh's standard input, runs `rig serve --here` there, proves the key to
 * the agent it started, and writes standing=HOST:PORT on NAME's line of the
 * targets file. `--stop` undoes each step.
 *
 * The other side, `rig serve --here`: with systemd running and rig root
 * there, the unit rig-agent.service (the package's when installed, else one
 * written to /etc/systemd/system) with /etc/rig/agent.conf and /etc/rig/key
 * given to the user rig-agent; elsewhere (or with --state-dir) a supervisor,
 * `rig serve --supervise DIR`, detached from ssh, that runs `rig agent
 * --config DIR/agent.conf` and starts it again when it ends. Every file it
 * writes says so, and --stop removes only those. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/fleet.h"
#include "launcher/launcher.h"
#include "launcher/status.h"
#include "launcher/targets.h"
#include "proto/key.h"
#include "proto/names.h"
#include "proto/net.h"
#include "proto/handshake.h"

#define SERVE_DEFAULT_LISTEN "0.0.0.0:7420"
#define SERVE_MARK "# written by rig serve"
#define SERVE_UNIT_ETC "/etc/systemd/system/rig-agent.service"
#define SERVE_CONF "/etc/rig/agent.conf"
#define SERVE_KEY_MARK "/etc/rig/.key-written-by-rig-serve"
#define SERVE_UP_MS 10000
#define SERVE_OUT_MAX 65536

static const char usage[] =
    "Usage: rig serve --on NAME [--listen HOST:PORT] [--rig PATH] [--state-dir DIR] [--dry-run]\n"
    "       rig serve --on NAME --stop [--rig PATH] [--state-dir DIR] [--dry-run]\n"
    "Makes NAME serve jobs all the time with the fleet key (a standing agent), over\n"
    "ssh: copies this rig there when it has none (to /usr/local/lib/rig as root,\n"
    "else ~/.local/lib/rig), installs the fleet key, runs the agent as the systemd\n"
    "unit rig-agent.service where systemd runs and rig is root there, else as a\n"
    "supervised process that starts it again when it ends, checks that it proves\n"
    "the key, and writes standing=HOST:PORT on NAME's line of the targets file, so\n"
    "`rig run --on NAME` uses it.\n"
    "  --on NAME           the target, one of the targets file reached over ssh\n"
    "  --listen HOST:PORT  where the agent listens (default " SERVE_DEFAULT_LISTEN ")\n"
    "  --rig PATH          rig's path there (default: rig on its PATH, else a copy)\n"
    "  --state-dir DIR     run a supervised agent keeping its files in DIR there\n"
    "                      (default without systemd: ~/.config/rig/serve)\n"
    "  --dry-run           print every step, change nothing\n"
    "  --stop              stop the agent, remove what rig serve installed there,\n"
    "                      and drop standing= from the targets file\n";

/* ---- running a command (over ssh) with input and captured output ---- */

typedef struct ran {
    int status;                 /* exit status, 128 + signal, or -1 */
    char out[SERVE_OUT_MAX];    /* stdout and stderr together */
    size_t len;
} ran;

/* argv with input (len bytes, or the file in_fd when >= 0) on its stdin. */
static void run_cmd(const char *const argv[], const void *input, size_t len, int in_fd, ran *r)
{
    memset(r, 0, sizeof *r);
    r->status = -1;
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
        snprintf(r->out, sizeof r->out, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in_fd >= 0 ? in_fd : in[0], 0);
        dup2(out[1], 1);
        dup2(out[1], 2);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        close(in[1]);
        close(out[0]);
        snprintf(r->out, sizeof r->out, "fork: %s", strerror(errno));
        return;
    }
    /* Input and output at once: neither side may fill a pipe and wait. */
    const char *p = input;
    size_t sent = 0;
    if (in_fd >= 0 || len == 0) {
        close(in[1]);
        in[1] = -1;
    } else {
        fcntl(in[1], F_SETFL, O_NONBLOCK);
    }
    for (;;) {
        struct pollfd fds[2] = { { out[0], POLLIN, 0 }, { in[1], POLLOUT, 0 } };
        if (poll(fds, in[1] >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
            break;
        if (in[1] >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(in[1], p + sent, len - sent);
            if (w > 0)
                sent += (size_t)w;
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                sent = len;
            if (sent == len) {
                close(in[1]);
                in[1] = -1;
            }
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[4096];
            ssize_t n = read(out[0], buf, sizeof buf);
            if (n <= 0)
                break;
            size_t keep = sizeof r->out - 1 - r->len;
            if ((size_t)n < keep)
                keep = (size_t)n;
            memcpy(r->out + r->len, buf, keep);
            r->len += keep;
        }
    }
    r->out[r->len] = '\0';
    if (in[1] >= 0)
        close(in[1]);
    close(out[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void ssh_cmd(const target *t, const char *const words[], const void *input, size_t len, int in_fd, ran *r)
{
    char remote[4 * SHELL_QUOTED_MAX(LAUNCHER_PATH_MAX) + 512] = "";
    if (shell_join(remote, sizeof remote, words) < 0) {
        memset(r, 0, sizeof *r);
        r->status = -1;
        snprintf(r->out, sizeof r->out, "the remote command is too long");
        return;
    }
    const char *argv[TARGETS_SSH_ARGV_MAX];
    targets_ssh_argv(t, remote, false, argv);
    run_cmd(argv, input, len, in_fd, r);
}

/* The last line of text, for an error. */
static const char *last_line(char *text)
{
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    char *nl = strrchr(text, '\n');
    return nl ? nl + 1 : text;
}

/* ---- the other side: rig serve --here ---- */

static bool dry;

static void step(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void step(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf(dry ? "would " : "");
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stdout);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
    return RIG_EXIT_OWN_FAILURE;
}

/* Writes text to path (mode, owner uid/gid unless -1) through a new file
 * renamed over it. */
static int put_file(const char *path, const void *text, size_t len, mode_t mode, uid_t uid, gid_t gid)
{
    char tmp[LAUNCHER_PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return fail("%s: %s", tmp, strerror(errno));
    bool ok = fchmod(fd, mode) == 0 && (uid == (uid_t)-1 || fchown(fd, uid, gid) == 0) &&
              write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    int e = errno;
    close(fd);
    if (!ok || rename(tmp, path) < 0) {
        e = ok ? errno : e;
        unlink(tmp);
        return fail("%s: %s", path, strerror(e));
    }
    return 0;
}

/* True when path starts with the mark rig serve writes. */
static bool ours(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[128] = "";
    bool mine = fgets(line, sizeof line, f) && strncmp(line, SERVE_MARK, strlen(SERVE_MARK)) == 0;
    fclose(f);
    return mine;
}

/* Until the agent listening at listen_at answers a status query with key
 * (SERVE_UP_MS at most): up, and holding the key given. */
static bool wait_agent(const names_address *listen_at, const rig_key *key)
{
    names_address a = *listen_at;
    if (strcmp(a.host, "0.0.0.0") == 0)
        snprintf(a.host, sizeof a.host, "127.0.0.1");
    else if (strcmp(a.host, "::") == 0)
        snprintf(a.host, sizeof a.host, "::1");
    char addr[NAMES_TEXT_MAX];
    snprintf(addr, sizeof addr, a.ipv6 ? "[%s]:%u" : "%s:%u", a.host, a.port);
    for (int waited = 0; waited < SERVE_UP_MS; waited += 100) {
        rig_why why = { "" };
        json *status = agent_status(addr, key, NULL, &why);
        if (status) {
            json_free(status);
            return true;
        }
        usleep(100000);
    }
    return false;
}

/* Where controllers dial: the listening host, or where ssh reached this
 * machine when it listens on every address. */
static void dial_address(const names_address *a, char *out, size_t cap)
{
    char host[NAMES_HOST_MAX + 3];
    snprintf(host, sizeof host, a->ipv6 ? "[%s]" : "%s", a->host);
    if (strcmp(a->host, "0.0.0.0") == 0 || strcmp(a->host, "::") == 0) {
        const char *conn = getenv("SSH_CONNECTION");
        char c[4][64] = { "" };
        if (conn && sscanf(conn, "%63s %63s %63s %63s", c[0], c[1], c[2], c[3]) == 4)
            snprintf(host, sizeof host, strchr(c[2], ':') ? "[%s]" : "%s", c[2]);
        else
            snprintf(host, sizeof host, "127.0.0.1");
    }
    snprintf(out, cap, "%s:%u", host, a->port);
}

static int read_key_line(rig_key *key)
{
    rig_why why = { "" };
    return key_read_hex_line(0, key, &why) < 0 ? fail("the fleet key on standard input: %s", why.text) : 0;
}

static int self_or_fail(char *self, size_t cap)
{
    return self_path(self, cap) < 0 ? fail("cannot find this program (/proc/self/exe)") : 0;
}

static int systemctl(const char *const args[])
{
    const char *argv[8] = { "systemctl" };
    size_t n = 1;
    for (; args[n - 1] && n < 7; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    char text[256] = "systemctl";
    for (size_t i = 1; argv[i]; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), " %s", argv[i]);
    step("run %s", text);
    if (dry)
        return 0;
    ran r;
    run_cmd(argv, NULL, 0, -1, &r);
    return r.status == 0 ? 0 : fail("%s: %s", text, last_line(r.out));
}

static int here_systemd(const names_address *a, const char *listen_text, const rig_key *key)
{
    char self[LAUNCHER_PATH_MAX + 1];
    if (self_or_fail(self, sizeof self) < 0)
        return RIG_EXIT_OWN_FAILURE;
    struct passwd *pw = getpwnam("rig-agent");
    if (!pw) {
        step("make the system user rig-agent");
        if (!dry) {
            const char *argv[] = { "useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                                   "/nonexistent", "--shell", "/usr/sbin/nologin", "rig-agent", NULL };
            ran r;
            run_cmd(argv, NULL, 0, -1, &r);
            if (r.status != 0 || !(pw = getpwnam("rig-agent")))
                return fail("useradd rig-agent: %s", last_line(r.out));
        }
    }
    step("write the fleet key to " FLEET_KEY_SYSTEM " (user rig-agent, mode 600)");
    step("write " SERVE_CONF " (listen = %s)", listen_text);
    if (!dry) {
        if (mkdir("/etc/rig", 0755) < 0 && errno != EEXIST)
            return fail("/etc/rig: %s", strerror(errno));
        if (put_file(FLEET_KEY_SYSTEM, key->bytes, key->len, 0600, pw->pw_uid, pw->pw_gid) < 0 ||
            put_file(SERVE_KEY_MARK, "", 0, 0644, (uid_t)-1, (gid_t)-1) < 0)
            return RIG_EXIT_OWN_FAILURE;
        char conf[8192];
        int n = snprintf(conf, sizeof conf, SERVE_MARK " (rig serve --stop removes it)\nlisten = %s\nkey-file = %s\n",
                         listen_text, FLEET_KEY_SYSTEM);
        if (put_file(SERVE_CONF, conf, (size_t)n, 0644, (uid_t)-1, (gid_t)-1) < 0)
            return RIG_EXIT_OWN_FAILURE;
    }
    /* The package's unit runs the package's agent; otherwise one of ours. */
    static const char *const packaged[] = { "/lib/systemd/system/rig-agent.service",
                                            "/usr/lib/systemd/system/rig-agent.service",
                                            "/usr/local/lib/systemd/system/rig-agent.service" };
    bool have_unit = false;
    for (size_t i = 0; i < 3 && !have_unit; i++)
        if (access(packaged[i], R_OK) == 0) {
            have_unit = true;
            step("use the installed unit %s", packaged[i]);
        }
    if (!have_unit) {
        step("write " SERVE_UNIT_ETC " (ExecStart=%s agent --config " SERVE_CONF ")", self);
        if (!dry) {
            char unit[LAUNCHER_PATH_MAX + 1024];
            int n = snprintf(unit, sizeof unit,
                             SERVE_MARK " (rig serve --stop removes it)\n[Unit]\nDescription=rig agent: this "
                             "machine's GPUs for rig jobs\nAfter=network-online.target\nWants=network-online.target\n\n"
                             "[Service]\nUser=rig-agent\nGroup=rig-agent\nExecStart=%s agent --config " SERVE_CONF
                             "\nRestart=on-failure\nRestartSec=2\n\n[Install]\nWantedBy=multi-user.target\n",
                             self);
            if (put_file(SERVE_UNIT_ETC, unit, (size_t)n, 0644, (uid_t)-1, (gid_t)-1) < 0)
                return RIG_EXIT_OWN_FAILURE;
        }
    }
    if (systemctl((const char *[]){ "daemon-reload", NULL }) < 0 ||
        systemctl((const char *[]){ "enable", "rig-agent", NULL }) < 0 ||
        systemctl((const char *[]){ "restart", "rig-agent", NULL }) < 0)
        return RIG_EXIT_OWN_FAILURE;
    (void)a;
    return 0;
}

static int state_file(char *out, size_t cap, const char *dir, const char *name)
{
    return snprintf(out, cap, "%s/%s", dir, name) >= (int)cap ? fail("%s: path too long", dir) : 0;
}

static pid_t read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid > 1 ? (pid_t)pid : 0;
}

/* Ends the supervisor whose pid file is in dir (it ends its agent). */
static int stop_supervisor(const char *dir)
{
    char pidfile[LAUNCHER_PATH_MAX + 32];
    if (state_file(pidfile, sizeof pidfile, dir, "supervisor.pid") < 0)
        return -1;
    pid_t pid = read_pid(pidfile);
    if (!pid || kill(pid, 0) < 0)
        return 0;
    step("stop the supervisor (pid %d) and its agent", (int)pid);
    if (dry)
        return 0;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
        usleep(100000);
    if (kill(pid, 0) == 0)
        return fail("the supervisor (pid %d) did not end", (int)pid);
    return 0;
}

static int here_supervised(const char *dir, const char *listen_text, const rig_key *key)
{
    char self[LAUNCHER_PATH_MAX + 1], keyfile[LAUNCHER_PATH_MAX + 32], conf[LAUNCHER_PATH_MAX + 32],
        log[LAUNCHER_PATH_MAX + 32];
    if (self_or_fail(self, sizeof self) < 0 || state_file(keyfile, sizeof keyfile, dir, "key") < 0 ||
        state_file(conf, sizeof conf, dir, "agent.conf") < 0 || state_file(log, sizeof log, dir, "agent.log") < 0)
        return RIG_EXIT_OWN_FAILURE;
    step("make %s (mode 700)", dir);
    step("write the fleet key to %s (mode 600) and %s (listen = %s)", keyfile, conf, listen_text);
    if (!dry) {
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return fail("%s: %s", dir, strerror(errno));
        char text[LAUNCHER_PATH_MAX + 256];
        int n = snprintf(text, sizeof text, SERVE_MARK " (rig serve --stop removes it)\nlisten = %s\nkey-file = %s\n",
                         listen_text, keyfile);
        if (put_file(keyfile, key->bytes, key->len, 0600, (uid_t)-1, (gid_t)-1) < 0 ||
            put_file(conf, text, (size_t)n, 0644, (uid_t)-1, (gid_t)-1) < 0)
            return RIG_EXIT_OWN_FAILURE;
    }
    if (stop_supervisor(dir) < 0)
        return RIG_EXIT_OWN_FAILURE;
    step("start a supervisor: %s serve --supervise %s (its log: %s)", self, dir, log);
    if (dry)
        return 0;
    /* Twice forked and in a session of its own: it outlives the ssh
     * connection, which waits for no descriptor of it. */
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork: %s", strerror(errno));
    if (pid == 0) {
        setsid();
        if (fork() != 0)
            _exit(0);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(1);
        execl(self, "rig", "serve", "--supervise", dir, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return 0;
}

static int here_stop(const char *dir, bool systemd)
{
    if (systemd) {
        if (access(SERVE_UNIT_ETC, F_OK) == 0 || access(SERVE_CONF, F_OK) == 0) {
            if (systemctl((const char *[]){ "disable", "--now", "rig-agent", NULL }) < 0)
                return RIG_EXIT_OWN_FAILURE;
        }
        static const char *const files[] = { SERVE_UNIT_ETC, SERVE_CONF };
        for (size_t i = 0; i < 2; i++)
            if (ours(files[i])) {
                step("remove %s", files[i]);
                if (!dry && unlink(files[i]) < 0)
                    return fail("%s: %s", files[i], strerror(errno));
            }
        if (access(SERVE_KEY_MARK, F_OK) == 0) {
            step("remove the fleet key " FLEET_KEY_SYSTEM);
            if (!dry && (unlink(FLEET_KEY_SYSTEM) < 0 || unlink(SERVE_KEY_MARK) < 0) && errno != ENOENT)
                return fail(FLEET_KEY_SYSTEM ": %s", strerror(errno));
        }
        return systemctl((const char *[]){ "daemon-reload", NULL }) < 0 ? RIG_EXIT_OWN_FAILURE : 0;
    }
    if (stop_supervisor(dir) < 0)
        return RIG_EXIT_OWN_FAILURE;
    static const char *const names[] = { "key", "agent.conf", "supervisor.pid", "agent.log" };
    for (size_t i = 0; i < 4; i++) {
        char path[LAUNCHER_PATH_MAX + 32];
        if (state_file(path, sizeof path, dir, names[i]) < 0)
            return RIG_EXIT_OWN_FAILURE;
        if (access(path, F_OK) != 0 || (i == 1 && !ours(path)))
            continue;
        step("remove %s", path);
        if (!dry && unlink(path) < 0)
            return fail("%s: %s", path, strerror(errno));
    }
    if (!dry)
        rmdir(dir);   /* only when nothing else is there */
    return 0;
}

static int here_main(const char *listen_text, const char *state_dir, bool stop)
{
    char dir[LAUNCHER_PATH_MAX + 1];
    bool systemd = !state_dir && geteuid() == 0 && access("/run/systemd/system", F_OK) == 0;
    if (state_dir) {
        snprintf(dir, sizeof dir, "%s", state_dir);
    } else {
        const char *home = getenv("HOME");
        if (!home || snprintf(dir, sizeof dir, "%s/.config/rig/serve", home) >= (int)sizeof dir)
            return fail("HOME is not set (or too long) here; --state-dir names a folder");
        if (!systemd && !dry) {
            char parent[sizeof dir];
            snprintf(parent, sizeof parent, "%s/.config", home);
            mkdir(parent, 0700);
            snprintf(parent, sizeof parent, "%s/.config/rig", home);
            mkdir(parent, 0700);
        }
    }
    if (stop)
        return here_stop(dir, systemd);
    names_address a;
    rig_why why = { "" };
    if (names_parse_listen(listen_text, &a, &why) < 0 || a.port == 0)
        return fail("--listen %s: %s", listen_text, a.port == 0 && !why.text[0] ? "a port is needed" : why.text);
    rig_key key;
    if (read_key_line(&key) < 0)
        return RIG_EXIT_OWN_FAILURE;
    int rc = systemd ? here_systemd(&a, listen_text, &key) : here_supervised(dir, listen_text, &key);
    bool up = rc == 0 && !dry && wait_agent(&a, &key);
    key_wipe(&key);
    if (rc != 0)
        return rc;
    char dial[NAMES_TEXT_MAX];
    dial_address(&a, dial, sizeof dial);
    if (!dry) {
        if (!up)
            return fail("the agent does not answer on %s after %d s%s%s", listen_text, SERVE_UP_MS / 1000,
                        systemd ? "; see journalctl -u rig-agent" : "; see ", systemd ? "" : dir);
        printf("standing %s (%s)\n", dial, systemd ? "systemd unit rig-agent.service" : "supervised process");
    }
    return 0;
}

/* ---- the supervisor ---- */

static int supervise_main(const char *dir)
{
    char self[LAUNCHER_PATH_MAX + 1], conf[LAUNCHER_PATH_MAX + 32], pidfile[LAUNCHER_PATH_MAX + 32];
    if (self_path(self, sizeof self) < 0 || snprintf(conf, sizeof conf, "%s/agent.conf", dir) >= (int)sizeof conf ||
        snprintf(pidfile, sizeof pidfile, "%s/supervisor.pid", dir) >= (int)sizeof pidfile) {
        fprintf(stderr, "rig serve --supervise: bad folder %s\n", dir);
        return 1;
    }
    char text[32];
    int n = snprintf(text, sizeof text, "%d\n", (int)getpid());
    if (put_file(pidfile, text, (size_t)n, 0600, (uid_t)-1, (gid_t)-1) != 0)
        return 1;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int backoff_ms = 1000;
    for (;;) {
        time_t started = time(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            execl(self, "rig", "agent", "--config", conf, (char *)NULL);
            _exit(127);
        }
        printf("rig serve: agent started (pid %d)\n", (int)pid);
        fflush(stdout);
        int status = 0;
        bool stopping = false;
        for (;;) {
            int sig = sigwaitinfo(&set, NULL);
            if (sig == SIGCHLD) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                    break;
            } else if (sig > 0) {
                stopping = true;
                kill(pid, SIGTERM);
            }
        }
        if (stopping) {
            unlink(pidfile);
            printf("rig serve: stopped\n");
            return 0;
        }
        if (time(NULL) - started > 60)
            backoff_ms = 1000;
        printf("rig serve: the agent %s %d; starting it again in %d ms\n",
               WIFEXITED(status) ? "exited with status" : "was killed by signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), backoff_ms);
        fflush(stdout);
        struct timespec ts = { backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L };
        if (sigtimedwait(&set, NULL, &ts) > 0 && !sigismember(&set, SIGCHLD)) {
            unlink(pidfile);
            return 0;
        }
        backoff_ms = backoff_ms * 2 > 30000 ? 30000 : backoff_ms * 2;
    }
}

/* ---- this side ---- */

/* rig's path there: --rig, rig on its PATH, an earlier copy, or a copy of
 * this one (with softgpu beside it). "" with a message on failure. */
static int remote_rig(const target *t, const char *given, bool copy, char *out, size_t cap)
{
    if (given) {
        snprintf(out, cap, "%s", given);
        return 0;
    }
    static const char find[] =
        "command -v rig || for d in /usr/local/lib/rig \"$HOME/.local/lib/rig\"; do "
        "[ -x \"$d/rig\" ] && echo \"$d/rig\" && break; done";
    ran r;
    ssh_cmd(t, (const char *const[]){ "sh", "-c", find, NULL }, NULL, 0, -1, &r);
    const char *found = last_line(r.out);
    if (r.status == 0 && found[0] == '/') {
        snprintf(out, cap, "%s", found);
        return 0;
    }
    if (r.status == 255 || r.status < 0) {
        fprintf(stderr, "rig serve: %s: ssh failed: %s\n", t->name, found);
        return -1;
    }
    if (!copy) {
        fprintf(stderr, "rig serve: %s: no rig there (--rig PATH names it)\n", t->name);
        return -1;
    }
    char self[LAUNCHER_PATH_MAX + 1], soft[LAUNCHER_PATH_MAX + 32];
    if (self_path(self, sizeof self) < 0) {
        fprintf(stderr, "rig serve: cannot find this program (/proc/self/exe)\n");
        return -1;
    }
    char dir[LAUNCHER_PATH_MAX + 1];
    snprintf(dir, sizeof dir, "%s", self);
    *strrchr(dir, '/') = '\0';
    snprintf(soft, sizeof soft, "%s/libcudasoft.so", dir);
    if (access(soft, R_OK) != 0)
        snprintf(soft, sizeof soft, "%s/../lib/rig/libcudasoft.so", dir);
    static const char put[] =
        "if [ \"$(id -u)\" = 0 ]; then d=/usr/local/lib/rig; else d=\"$HOME/.local/lib/rig\"; fi; "
        "mkdir -p \"$d\" && cat > \"$d/$1.tmp\" && chmod 755 \"$d/$1.tmp\" && mv \"$d/$1.tmp\" \"$d/$1\" && "
        ": > \"$d/.copied-by-rig-serve\" && echo \"$d/$1\"";
    const char *files[][2] = { { self, "rig" }, { soft, "libcudasoft.so" } };
    for (size_t i = 0; i < 2; i++) {
        int fd = open(files[i][0], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "rig serve: %s: %s\n", files[i][0], strerror(errno));
            return -1;
        }
        printf("rig serve: %s: no rig there: copying %s\n", t->name, files[i][0]);
        ssh_cmd(t, (const char *const[]){ "sh", "-c", put, "put", files[i][1], NULL }, NULL, 0, fd, &r);
        close(fd);
        if (r.status != 0) {
            fprintf(stderr, "rig serve: %s: copying %s failed: %s\n", t->name, files[i][1], last_line(r.out));
            return -1;
        }
        if (i == 0)
            snprintf(out, cap, "%s", last_line(r.out));
    }
    ssh_cmd(t, (const char *const[]){ out, "version", NULL }, NULL, 0, -1, &r);
    if (r.status != 0) {
        fprintf(stderr, "rig serve: %s: the copied rig does not run there (%s); install the rig-agent package or "
                        "copy the GPU bundle's static rig and name it with --rig\n", t->name, last_line(r.out));
        return -1;
    }
    return 0;
}

/* Proves the fleet key to the agent at addr by asking its status. */
static int check_agent(const char *addr, const rig_key *key, char *why_out, size_t cap)
{
    rig_why why = { "" };
    json *status = agent_status(addr, key, NULL, &why);
    if (!status) {
        snprintf(why_out, cap, "%s", why.text);
        return -1;
    }
    json_free(status);
    return 0;
}

/* Prints the other side's lines as this command's, keeping "standing". */
static void relay(const target *t, char *out, char *standing, size_t cap)
{
    for (char *l = out, *nl; l && *l; l = nl) {
        nl = strchr(l, '\n');
        if (nl)
            *nl++ = '\0';
        if (strncmp(l, "standing ", 9) == 0) {
            snprintf(standing, cap, "%.*s", (int)strcspn(l + 9, " "), l + 9);
            continue;
        }
        printf("rig serve: %s: %s\n", t->name, l);
    }
    fflush(stdout);
}

int serve_main(int argc, char **argv)
{
    enum { OPT_LISTEN = 1000, OPT_RIG, OPT_STATE, OPT_DRY, OPT_STOP, OPT_HERE, OPT_SUPERVISE };
    static const struct option opts[] = {
        { "on", required_argument, NULL, 'o' },           { "listen", required_argument, NULL, OPT_LISTEN },
        { "rig", required_argument, NULL, OPT_RIG },      { "state-dir", required_argument, NULL, OPT_STATE },
        { "dry-run", no_argument, NULL, OPT_DRY },        { "stop", no_argument, NULL, OPT_STOP },
        { "here", no_argument, NULL, OPT_HERE },          { "supervise", required_argument, NULL, OPT_SUPERVISE },
        { "help", no_argument, NULL, 'h' },               { NULL, 0, NULL, 0 },
    };
    const char *on = NULL, *listen_text = SERVE_DEFAULT_LISTEN, *rig = NULL, *state_dir = NULL, *supervise = NULL;
    bool stop = false, here = false;
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 'o': on = optarg; break;
        case OPT_LISTEN: listen_text = optarg; break;
        case OPT_RIG: rig = optarg; break;
        case OPT_STATE: state_dir = optarg; break;
        case OPT_DRY: dry = true; break;
        case OPT_STOP: stop = true; break;
        case OPT_HERE: here = true; break;
        case OPT_SUPERVISE: supervise = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rig serve: unexpected argument '%s'\n%s", argv[optind], usage);
        return 1;
    }
    if (state_dir && state_dir[0] != '/') {
        fprintf(stderr, "rig serve: --state-dir must be an absolute path\n");
        return 1;
    }
    if (supervise)
        return supervise_main(supervise);
    if (here)
        return here_main(listen_text, state_dir, stop);
    if (rig && !rig_path_ok("rig serve", rig, usage))
        return 1;
    if (!on) {
        fprintf(stderr, "rig serve: --on NAME is required\n%s", usage);
        return 1;
    }

    targets *ts = malloc(sizeof *ts);
    rig_why why = { "" };
    const target *sel[TARGETS_MAX];
    size_t n = 0;
    int rc = 1;
    if (!ts || targets_load(ts, &why) < 0 || targets_select(ts, on, sel, &n, &why) < 0) {
        fprintf(stderr, "rig serve: %s\n", ts ? why.text : "out of memory");
        goto out;
    }
    const target *t = sel[0];
    if (n != 1 || t->local) {
        fprintf(stderr, "rig serve: --on names one target reached over ssh%s\n",
                t->local ? " (this machine's standing agent: the rig-agent package, or rig-agent --config)" : "");
        goto out;
    }
    rc = RIG_EXIT_OWN_FAILURE;
    rig_key key;
    char keypath[LAUNCHER_PATH_MAX + 1];
    if (!stop && fleet_key_read(&key, keypath, sizeof keypath, "rig serve") < 0)
        goto out;
    char hex[KEY_HEX_LEN + 2] = "";
    if (!stop && key_to_hex(&key, hex, &why) < 0) {
        fprintf(stderr, "rig serve: the fleet key %s: %s\n", keypath, why.text);
        goto wipe;
    }
    if (!stop)
        strcat(hex, "\n");
    char where[LAUNCHER_PATH_MAX + 1];
    if (dry && !rig && !stop) {
        printf("rig serve: %s: would find rig there (on its PATH or copied before), else copy this one\n", t->name);
        snprintf(where, sizeof where, "rig");
    } else if (remote_rig(t, rig, !stop && !dry, where, sizeof where) < 0) {
        goto wipe;
    }
    const char *words[12];
    size_t w = 0;
    words[w++] = where;
    words[w++] = "serve";
    words[w++] = "--here";
    words[w++] = "--listen";
    words[w++] = listen_text;
    if (state_dir) {
        words[w++] = "--state-dir";
        words[w++] = state_dir;
    }
    if (stop)
        words[w++] = "--stop";
    if (dry)
        words[w++] = "--dry-run";
    words[w] = NULL;
    ran r;
    ssh_cmd(t, words, hex, strlen(hex), -1, &r);
    char standing[NAMES_TEXT_MAX] = "";
    relay(t, r.out, standing, sizeof standing);
    if (r.status != 0) {
        fprintf(stderr, "rig serve: %s: %s\n", t->name,
                r.status == 127 ? "rig is not there (--rig PATH names it)" : "the steps above failed");
        goto wipe;
    }
    if (stop) {
        if (t->standing[0]) {
            printf("rig serve: %s%s drop standing=%s from %s\n", t->name, dry ? ": would" : ":", t->standing,
                   ts->path);
            if (!dry && targets_set_standing(ts, t->name, NULL, &why) < 0) {
                fprintf(stderr, "rig serve: %s\n", why.text);
                goto wipe;
            }
        }
        rc = 0;
        goto wipe;
    }
    if (dry) {
        printf("rig serve: %s: would prove the fleet key to the agent and write standing=HOST:PORT in %s\n",
               t->name, ts->path);
        rc = 0;
        goto wipe;
    }
    char bad[512];
    if (!standing[0] || check_agent(standing, &key, bad, sizeof bad) < 0) {
        fprintf(stderr, "rig serve: %s: the agent at %s does not prove the fleet key: %s\n", t->name,
                standing[0] ? standing : "(no address said)", standing[0] ? bad : "");
        goto wipe;
    }
    if (targets_set_standing(ts, t->name, standing, &why) < 0) {
        fprintf(stderr, "rig serve: %s\n", why.text);
        goto wipe;
    }
    printf("rig serve: %s: serving on %s with the fleet key; `rig run --on %s` uses it\n", t->name, standing,
           t->name);
    rc = 0;
wipe:
    explicit_bzero(hex, sizeof hex);
    if (!stop)
        key_wipe(&key);
out:
    free(ts);
    return rc;
}

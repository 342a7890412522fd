/* `rig exec --on NAME -- CMD`: runs CMD on a target over ssh as if here:
 * in this working directory (when it exists there), with this environment
 * (less what belongs to one machine), this terminal as its terminal when
 * there is one, signals sent to rig reaching CMD and its children, and
 * CMD's exit status as rig's (128 + signal; 255 when rig or ssh failed).
 *
 * Over ssh the other end is rig itself, in three internal forms:
 *   rig exec --child ID --cwd DIR [--tty] [--env-stdin] -- CMD...
 *       sets the environment (from standard input, a "RIGEXEC1 LEN" line
 *       then LEN bytes of NAME=VALUE\0..., or from what --store left),
 *       runs CMD in a process group of its own (the terminal's foreground
 *       one with --tty), records that group under ID and exits as CMD did;
 *   rig exec --store ID     keeps standard input as ID's environment (with
 *       a terminal, standard input is the terminal's, so the environment
 *       travels first on a connection of its own);
 *   rig exec --signal ID N  sends signal N to ID's process group.
 * The environment never travels on a command line, where any user of the
 * other machine could read it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "launcher/launcher.h"
#include "launcher/targets.h"
#include "proto/random.h"

extern char **environ;

#define EXEC_ENV_MAX (1 << 20)   /* bytes of environment carried */
#define EXEC_ID_LEN 32           /* hex characters */

static const char usage[] =
    "Usage: rig exec [--on NAME] [--tty | --no-tty] [--rig PATH] -- CMD [ARGS...]\n"
    "Runs CMD on the target NAME over ssh, as if here: in this working directory\n"
    "(when it exists there; else the home directory, with a note), with this\n"
    "environment less what belongs to one machine (HOME, PATH, USER, SHELL, TERM,\n"
    "DISPLAY, SSH_*, XDG_*, RIG_* and a few more), this terminal as its terminal\n"
    "when standard input and output are one, and signals sent to rig (INT, TERM,\n"
    "HUP, QUIT, USR1, USR2) reaching CMD and its children.\n"
    "  --on NAME      the target (default: $RIG_ON, else the targets file's\n"
    "                 default, else local, where CMD simply runs here)\n"
    "  --tty          give CMD a terminal even when rig has none\n"
    "  --no-tty       give CMD none (its input, output and errors as pipes)\n"
    "  --rig PATH     rig's path on the remote machine (default: rig on its PATH)\n"
    "Exit status: CMD's own, or 128 + the signal that ended it; 255 when rig or\n"
    "ssh failed (as ssh); 1 on a usage error.\n";

/* Variables of one machine, not of the user's task: the other machine's own
 * stay. A name ending in '*' is a prefix. */
static const char *const machine_vars[] = {
    "HOME", "PATH", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "SHLVL", "_", "TERM", "TERMCAP", "COLUMNS",
    "LINES", "DISPLAY", "XAUTHORITY", "MAIL", "HOSTNAME", "HOSTTYPE", "MACHTYPE", "OSTYPE", "TMPDIR",
    "LS_COLORS", "MOTD_SHOWN", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "LD_PRELOAD",
    "SSH_*", "XDG_*", "RIG_*", "BASH_FUNC_*", "KRB5CCNAME", "GPG_AGENT_INFO", "SSH_AUTH_SOCK",
};

static bool machine_var(const char *entry)
{
    size_t len = strcspn(entry, "=");
    for (size_t i = 0; i < sizeof machine_vars / sizeof machine_vars[0]; i++) {
        const char *m = machine_vars[i];
        size_t n = strlen(m);
        if (m[n - 1] == '*' ? len >= n - 1 && strncmp(entry, m, n - 1) == 0 : len == n && strncmp(entry, m, n) == 0)
            return true;
    }
    return false;
}

static bool valid_id(const char *id)
{
    if (strlen(id) != EXEC_ID_LEN)
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* ~/.cache/rig/exec/ID.SUFFIX, the folders made owner-only. */
static int state_path(char *out, size_t cap, const char *id, const char *suffix)
{
    const char *home = getenv("HOME");
    if (!home || !*home) {
        fprintf(stderr, "rig exec: HOME is not set on this machine\n");
        return -1;
    }
    static const char *const dirs[] = { "/.cache", "/.cache/rig", "/.cache/rig/exec" };
    for (size_t i = 0; i < 3; i++) {
        if (snprintf(out, cap, "%s%s", home, dirs[i]) >= (int)cap) {
            fprintf(stderr, "rig exec: HOME is too long\n");
            return -1;
        }
        if (mkdir(out, 0700) < 0 && errno != EEXIST) {
            fprintf(stderr, "rig exec: cannot create %s: %s\n", out, strerror(errno));
            return -1;
        }
    }
    if (snprintf(out, cap, "%s/.cache/rig/exec/%s.%s", home, id, suffix) >= (int)cap) {
        fprintf(stderr, "rig exec: HOME is too long\n");
        return -1;
    }
    return 0;
}

static bool read_full(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

static bool write_full(int fd, const void *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        done += (size_t)w;
    }
    return true;
}

/* NAME=VALUE\0 entries: each set, over this machine's own. */
static int apply_env(const char *blob, size_t len)
{
    for (size_t off = 0; off < len;) {
        const char *e = blob + off;
        size_t n = strnlen(e, len - off);
        if (n == len - off) {
            fprintf(stderr, "rig exec: the environment's last entry has no end\n");
            return -1;
        }
        const char *eq = memchr(e, '=', n);
        if (eq && eq != e && !machine_var(e)) {
            char *name = strndup(e, (size_t)(eq - e));
            if (!name || setenv(name, eq + 1, 1) < 0) {
                free(name);
                fprintf(stderr, "rig exec: cannot set the environment: %s\n", strerror(errno));
                return -1;
            }
            free(name);
        }
        off += n + 1;
    }
    return 0;
}

/* The header line "RIGEXEC1 LEN\n", read a byte at a time: what follows the
 * environment is CMD's input, not ours. */
static int read_env_stdin(char **blob, size_t *len)
{
    char line[64];
    size_t n = 0;
    for (;;) {
        if (n == sizeof line - 1 || !read_full(0, line + n, 1)) {
            fprintf(stderr, "rig exec: no environment header on standard input\n");
            return -1;
        }
        if (line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    char *end;
    if (strncmp(line, "RIGEXEC1 ", 9) != 0) {
        fprintf(stderr, "rig exec: the environment header is '%.40s', not 'RIGEXEC1 LEN'\n", line);
        return -1;
    }
    errno = 0;
    unsigned long long l = strtoull(line + 9, &end, 10);
    if (errno || *end || end == line + 9 || l > EXEC_ENV_MAX) {
        fprintf(stderr, "rig exec: the environment's length '%.20s' is not 0..%d\n", line + 9, EXEC_ENV_MAX);
        return -1;
    }
    *len = (size_t)l;
    *blob = malloc(*len + 1);
    if (!*blob || !read_full(0, *blob, *len)) {
        fprintf(stderr, "rig exec: the environment ended early\n");
        free(*blob);
        return -1;
    }
    return 0;
}

static int read_env_file(const char *path, char **blob, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        fprintf(stderr, "rig exec: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > EXEC_ENV_MAX) {
        fprintf(stderr, "rig exec: %s: not an environment rig stored\n", path);
        close(fd);
        return -1;
    }
    *len = (size_t)st.st_size;
    *blob = malloc(*len + 1);
    bool ok = *blob && read_full(fd, *blob, *len);
    close(fd);
    unlink(path);
    if (!ok) {
        fprintf(stderr, "rig exec: cannot read %s\n", path);
        free(*blob);
        return -1;
    }
    return 0;
}

static int store_main(const char *id)
{
    char path[4200], tmp[4300];
    if (state_path(path, sizeof path, id, "env") < 0)
        return RIG_EXIT_OWN_FAILURE;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "rig exec: %s: %s\n", tmp, strerror(errno));
        return RIG_EXIT_OWN_FAILURE;
    }
    char buf[65536];
    size_t total = 0;
    for (;;) {
        ssize_t r = read(0, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        total += (size_t)r;
        if (total > EXEC_ENV_MAX || !write_full(fd, buf, (size_t)r)) {
            fprintf(stderr, "rig exec: cannot keep the environment (%s)\n",
                    total > EXEC_ENV_MAX ? "too long" : strerror(errno));
            close(fd);
            unlink(tmp);
            return RIG_EXIT_OWN_FAILURE;
        }
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        fprintf(stderr, "rig exec: %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return RIG_EXIT_OWN_FAILURE;
    }
    return 0;
}

static int signal_main(const char *id, const char *num)
{
    char *end;
    long sig = strtol(num, &end, 10);
    if (*end || end == num || sig <= 0 || sig >= NSIG) {
        fprintf(stderr, "rig exec: --signal: '%s' is not a signal number\n", num);
        return 1;
    }
    char path[4200], text[32] = "";
    if (state_path(path, sizeof path, id, "pid") < 0)
        return RIG_EXIT_OWN_FAILURE;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;   /* CMD has not started yet, or has ended: nothing to signal */
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    long pgid = n > 0 ? strtol(text, &end, 10) : 0;
    if (pgid <= 1 || kill(-(pid_t)pgid, (int)sig) < 0) {
        if (pgid > 1 && errno == ESRCH)
            return 0;
        fprintf(stderr, "rig exec: cannot signal %s's process group: %s\n", id, pgid > 1 ? strerror(errno) : path);
        return RIG_EXIT_OWN_FAILURE;
    }
    return 0;
}

static volatile sig_atomic_t child_group;

/* The connection's end or a signal to this helper reaches CMD too. */
static void pass_on(int sig)
{
    if (child_group > 1)
        kill(-(pid_t)child_group, sig);
}

static int child_main(const char *id, const char *cwd, bool tty, bool env_stdin, char **cmd)
{
    char *blob = NULL;
    size_t len = 0;
    char env_path[4200], pid_path[4200];
    if (state_path(env_path, sizeof env_path, id, "env") < 0 || state_path(pid_path, sizeof pid_path, id, "pid") < 0)
        return RIG_EXIT_OWN_FAILURE;
    if ((env_stdin ? read_env_stdin(&blob, &len) : read_env_file(env_path, &blob, &len)) < 0 ||
        apply_env(blob, len) < 0) {
        free(blob);
        return RIG_EXIT_OWN_FAILURE;
    }
    free(blob);
    if (chdir(cwd) < 0) {
        const char *home = getenv("HOME");
        fprintf(stderr, "rig exec: %s: %s here; running in %s\n", cwd, strerror(errno), home ? home : "/");
        if (chdir(home ? home : "/") < 0)
            (void)!chdir("/");
    }
    struct sigaction sa = { .sa_handler = pass_on };
    sigemptyset(&sa.sa_mask);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "rig exec: fork: %s\n", strerror(errno));
        return RIG_EXIT_OWN_FAILURE;
    }
    if (pid == 0) {
        setpgid(0, 0);
        if (tty && isatty(0)) {
            /* The terminal's keys (Ctrl-C) are CMD's, not this helper's. */
            signal(SIGTTOU, SIG_IGN);
            tcsetpgrp(0, getpgrp());
        }
        signal(SIGTTOU, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(cmd[0], cmd);
        int err = errno;
        fprintf(stderr, "rig exec: %s: %s\n", cmd[0], strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    setpgid(pid, pid);   /* whichever of the two runs first */
    child_group = pid;
    char text[32];
    int n = snprintf(text, sizeof text, "%d\n", (int)pid);
    int fd = open(pid_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        (void)!write_full(fd, text, (size_t)n);
        close(fd);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    unlink(pid_path);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* "NAME=VALUE\0..." of what travels. */
static char *env_blob(size_t *len)
{
    size_t total = 0;
    for (char **e = environ; *e; e++)
        if (!machine_var(*e))
            total += strlen(*e) + 1;
    if (total > EXEC_ENV_MAX) {
        fprintf(stderr, "rig exec: the environment is %zu bytes, more than the %d rig carries\n", total,
                EXEC_ENV_MAX);
        return NULL;
    }
    char *blob = malloc(total + 1), *w = blob;
    if (!blob) {
        fprintf(stderr, "rig exec: no memory for the environment\n");
        return NULL;
    }
    for (char **e = environ; *e; e++)
        if (!machine_var(*e)) {
            size_t n = strlen(*e) + 1;
            memcpy(w, *e, n);
            w += n;
        }
    *len = total;
    return blob;
}

/* Starts argv with the signal mask and dispositions a fresh program has;
 * in a process group of its own when own_group. stdin_fd -1: ours. */
static pid_t spawn(const char *const argv[], int stdin_fd, bool own_group, const sigset_t *mask)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (own_group)
        setpgid(0, 0);
    if (stdin_fd >= 0 && dup2(stdin_fd, 0) < 0)
        _exit(RIG_EXIT_OWN_FAILURE);
    sigprocmask(SIG_SETMASK, mask, NULL);
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "rig exec: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(RIG_EXIT_OWN_FAILURE);
}

static int wait_status(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/* Feeds ssh's standard input: the environment's header and bytes, then
 * ours until it ends. A process of its own, in rig's process group (so it
 * may read a terminal), deaf to the terminal's keys, which are CMD's. */
static pid_t start_feeder(int out_fd, const char *env, size_t env_len, const sigset_t *mask)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, mask, NULL);
    char head[64];
    int n = snprintf(head, sizeof head, "RIGEXEC1 %zu\n", env_len);
    if (!write_full(out_fd, head, (size_t)n) || !write_full(out_fd, env, env_len))
        _exit(1);
    char buf[65536];
    for (;;) {
        ssize_t r = read(0, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || !write_full(out_fd, buf, (size_t)r))
            _exit(0);
    }
}

static int remote_exec(const target *t, const char *rig, bool tty, char **cmd)
{
    char id[EXEC_ID_LEN + 1];
    unsigned char raw[EXEC_ID_LEN / 2];
    if (random_bytes(raw, sizeof raw) < 0) {
        fprintf(stderr, "rig exec: no random bytes: %s\n", strerror(errno));
        return RIG_EXIT_OWN_FAILURE;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(id + 2 * i, 3, "%02x", raw[i]);
    char cwd[LAUNCHER_PATH_MAX + 1];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, "/");
    size_t env_len = 0;
    char *env = env_blob(&env_len);
    if (!env)
        return RIG_EXIT_OWN_FAILURE;

    /* The remote command, every word quoted. */
    size_t cap = SHELL_QUOTED_MAX(LAUNCHER_PATH_MAX) * 2 + 256;
    for (char **c = cmd; *c; c++)
        cap += SHELL_QUOTED_MAX(strlen(*c)) + 1;
    char *remote = malloc(cap);
    if (!remote) {
        fprintf(stderr, "rig exec: no memory for the command\n");
        free(env);
        return RIG_EXIT_OWN_FAILURE;
    }
    remote[0] = '\0';
    const char *head[] = { "exec", rig, "exec", "--child", id, "--cwd", cwd, tty ? "--tty" : "--env-stdin", "--",
                           NULL };
    if (shell_join(remote, cap, head) < 0 || shell_join(remote, cap, (const char *const *)cmd) < 0) {
        fprintf(stderr, "rig exec: the command is too long\n");
        free(remote);
        free(env);
        return RIG_EXIT_OWN_FAILURE;
    }

    /* Signals are taken in the loop below, never in a handler. */
    sigset_t set, old;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&set, forwarded[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    signal(SIGPIPE, SIG_IGN);

    int rc = RIG_EXIT_OWN_FAILURE;
    pid_t main_pid = -1, feeder = -1;
    const char *argv[TARGETS_SSH_ARGV_MAX];
    int env_pipe[2];
    if (pipe2(env_pipe, O_CLOEXEC) < 0) {
        fprintf(stderr, "rig exec: pipe: %s\n", strerror(errno));
        goto out;
    }
    if (tty) {
        /* Standard input there is the terminal: the environment goes first,
         * on a connection of its own. */
        char store[SHELL_QUOTED_MAX(LAUNCHER_PATH_MAX) + 128] = "";
        const char *words[] = { "exec", rig, "exec", "--store", id, NULL };
        shell_join(store, sizeof store, words);
        targets_ssh_argv(t, store, false, argv);
        pid_t pid = spawn(argv, env_pipe[0], true, &old);
        close(env_pipe[0]);
        bool sent = pid > 0 && write_full(env_pipe[1], env, env_len);
        close(env_pipe[1]);
        int status = pid > 0 ? wait_status(pid) : -1;
        if (!sent || status != 0) {
            fprintf(stderr, "rig exec: %s: could not hand over the environment (ssh %s)\n", t->name,
                    pid <= 0 ? "did not start" : WIFEXITED(status) ? "failed" : "was killed");
            goto out;
        }
        /* ssh keeps the terminal (raw: its keys travel as bytes) in rig's
         * process group. */
        targets_ssh_argv(t, remote, true, argv);
        main_pid = spawn(argv, -1, false, &old);
    } else {
        feeder = start_feeder(env_pipe[1], env, env_len, &old);
        close(env_pipe[1]);
        /* ssh in a group of its own: a Ctrl-C here is forwarded by rig, not
         * taken by ssh as the end of the connection. */
        targets_ssh_argv(t, remote, false, argv);
        main_pid = feeder > 0 ? spawn(argv, env_pipe[0], true, &old) : -1;
        close(env_pipe[0]);
    }
    if (main_pid < 0) {
        fprintf(stderr, "rig exec: fork: %s\n", strerror(errno));
        goto out;
    }

    for (;;) {
        int sig = sigwaitinfo(&set, NULL);
        if (sig < 0)
            continue;
        if (sig != SIGCHLD) {
            /* Delivered there by a connection of its own. */
            char words_text[SHELL_QUOTED_MAX(LAUNCHER_PATH_MAX) + 160] = "", num[16];
            snprintf(num, sizeof num, "%d", sig);
            const char *words[] = { "exec", rig, "exec", "--signal", id, num, NULL };
            shell_join(words_text, sizeof words_text, words);
            const char *sargv[TARGETS_SSH_ARGV_MAX];
            targets_ssh_argv(t, words_text, false, sargv);
            int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
            spawn(sargv, devnull, true, &old);
            if (devnull >= 0)
                close(devnull);
            continue;
        }
        bool ended = false;
        for (;;) {
            int status;
            pid_t p = waitpid(-1, &status, WNOHANG);
            if (p <= 0)
                break;
            if (p == main_pid) {
                ended = true;
                rc = WIFEXITED(status) ? WEXITSTATUS(status) : RIG_EXIT_OWN_FAILURE;
            } else if (p == feeder) {
                feeder = -1;
            }
        }
        if (ended)
            break;
    }
out:
    if (feeder > 0) {
        kill(feeder, SIGKILL);
        wait_status(feeder);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    free(remote);
    free(env);
    return rc;
}

int exec_main(int argc, char **argv)
{
    enum { OPT_TTY = 1000, OPT_NO_TTY, OPT_RIG, OPT_CHILD, OPT_CWD, OPT_ENV_STDIN, OPT_STORE, OPT_SIGNAL };
    static const struct option opts[] = {
        { "on", required_argument, NULL, 'o' },          { "tty", no_argument, NULL, OPT_TTY },
        { "no-tty", no_argument, NULL, OPT_NO_TTY },     { "rig", required_argument, NULL, OPT_RIG },
        { "help", no_argument, NULL, 'h' },              { "child", required_argument, NULL, OPT_CHILD },
        { "cwd", required_argument, NULL, OPT_CWD },     { "env-stdin", no_argument, NULL, OPT_ENV_STDIN },
        { "store", required_argument, NULL, OPT_STORE }, { "signal", required_argument, NULL, OPT_SIGNAL },
        { NULL, 0, NULL, 0 },
    };
    const char *on = NULL, *rig = "rig", *child = NULL, *cwd = NULL, *store = NULL, *signal_id = NULL;
    int tty = -1;
    bool env_stdin = false;
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, "+h", opts, NULL)) != -1;) {
        switch (c) {
        case 'o': on = optarg; break;
        case OPT_TTY: tty = 1; break;
        case OPT_NO_TTY: tty = 0; break;
        case OPT_RIG: rig = optarg; break;
        case OPT_CHILD: child = optarg; break;
        case OPT_CWD: cwd = optarg; break;
        case OPT_ENV_STDIN: env_stdin = true; break;
        case OPT_STORE: store = optarg; break;
        case OPT_SIGNAL: signal_id = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 1;
        }
    }
    const char *id = child ? child : store ? store : signal_id;
    if (id && !valid_id(id)) {
        fprintf(stderr, "rig exec: '%.40s' is not an id rig exec made\n", id);
        return 1;
    }
    if (store)
        return optind == argc ? store_main(store) : (fputs(usage, stderr), 1);
    if (signal_id)
        return optind + 1 == argc ? signal_main(signal_id, argv[optind]) : (fputs(usage, stderr), 1);
    if (optind == argc) {
        fprintf(stderr, "rig exec: no command\n%s", usage);
        return 1;
    }
    if (child) {
        if (!cwd) {
            fprintf(stderr, "rig exec: --child needs --cwd\n");
            return 1;
        }
        return child_main(child, cwd, tty == 1, env_stdin, argv + optind);
    }
    if (!rig_path_ok("rig exec", rig, usage))
        return 1;

    targets ts;
    rig_why why = { "" };
    const target *sel[TARGETS_MAX];
    size_t n = 0;
    if (targets_load(&ts, &why) < 0 || targets_select(&ts, on, sel, &n, &why) < 0) {
        fprintf(stderr, "rig exec: %s\n", why.text);
        return 1;
    }
    if (n != 1) {
        fprintf(stderr, "rig exec: --on names one target, not %zu\n", n);
        return 1;
    }
    if (tty < 0)
        tty = isatty(0) && isatty(1);
    if (sel[0]->local) {
        execvp(argv[optind], argv + optind);
        fprintf(stderr, "rig exec: %s: %s\n", argv[optind], strerror(errno));
        return errno == ENOENT ? 127 : 126;
    }
    return remote_exec(sel[0], rig, tty == 1, argv + optind);
}

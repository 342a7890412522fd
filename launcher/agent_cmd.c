/* `rig agent`: rig-agent's own command line (agent_main), plus what `rig
 * run` needs from an agent it starts:
 *   --lifeline   the job key arrives as one line of hex on standard input,
 *                and the agent serves until standard input closes (when
 *                `rig run` ends, or the ssh connection that carried it).
 *                Its standard output then carries rig-agent's two lines
 *                (driver, "listening on HOST:PORT") and its report lines.
 * Without --listen the agent listens on the address ssh reached this
 * machine at (SSH_CONNECTION) under ssh, else 0.0.0.0, on a free port. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "launcher/launcher.h"
#include "proto/key.h"

#define AGENT_ARGS_MAX 64

static const char usage[] =
    "Usage: rig agent [--listen HOST:PORT] [--key-file FILE | --key-stdin] [--driver PATH]\n"
    "       rig agent --probe [--json] [--driver PATH]\n"
    "Serves jobs on this machine's GPUs (softgpu where it has none); the same\n"
    "program as rig-agent.\n"
    "  --listen HOST:PORT   where to accept controllers (port 0 picks a free one;\n"
    "                       default: the address ssh reached this machine at\n"
    "                       when run over ssh, else 0.0.0.0, port 0)\n"
    "  --key-file FILE      the job key: owner-only regular file, 16..4096 bytes\n"
    "                       (default ~/.config/rig/key, which `rig key` makes)\n"
    "  --key-stdin          read the job key from standard input until it closes\n"
    "  --lifeline           read the key as one hex line from standard input and\n"
    "                       serve until standard input closes (what `rig run` uses)\n"
    "  --driver PATH        the CUDA driver to replay on\n"
    "  --probe [--json]     print this machine's devices and whether an agent here\n"
    "                       is serving a job, then exit\n";

static int lifeline_fd = -1;

/* Ends the agent when `rig run` (or its ssh connection) goes away. */
static void *lifeline_main(void *arg)
{
    (void)arg;
    char buf[256];
    for (;;) {
        ssize_t n = read(lifeline_fd, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EINTR))
            _exit(0);
    }
    return NULL;
}

/* Reads "HEX\n" from fd 0 one byte at a time (nothing after it is ours). */
static int read_key_line(rig_key *key, rig_why *why)
{
    char line[2 * KEY_MAX + 2];
    size_t n = 0;
    for (;;) {
        char ch;
        ssize_t r = read(0, &ch, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return why_set(why, RIG_E_CLOSED, "--lifeline: standard input closed before the key line");
        if (ch == '\n')
            break;
        if (n == sizeof line - 1)
            return why_set(why, RIG_E_TOO_LONG, "--lifeline: the key line is too long");
        line[n++] = ch;
    }
    line[n] = '\0';
    return key_from_hex(key, line, why);
}

/* The agent's stdin becomes a pipe holding only the key, so agent_main's
 * --key-stdin reads it; the real stdin is watched by a thread. */
static int start_lifeline(rig_why *why)
{
    rig_key key;
    int rc = read_key_line(&key, why);
    if (rc < 0)
        return rc;
    lifeline_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
    int p[2];
    if (lifeline_fd < 0 || pipe(p) < 0) {
        key_wipe(&key);
        return why_set(why, RIG_E_IO, "--lifeline: %s", strerror(errno));
    }
    ssize_t len = (ssize_t)key.len;
    ssize_t w = write(p[1], key.bytes, key.len);
    key_wipe(&key);
    close(p[1]);
    if (w != len || dup2(p[0], 0) < 0)
        return why_set(why, RIG_E_IO, "--lifeline: cannot hand the key on");
    close(p[0]);
    /* Report lines go on the stream `rig run` reads, after the listening
     * line; fd 1 itself becomes the device printf pipe. */
    int report = fcntl(1, F_DUPFD_CLOEXEC, 3);
    char num[16];
    snprintf(num, sizeof num, "%d", report);
    if (report < 0 || setenv("RIG_REMOTE_REPORT", num, 1) < 0)
        return why_set(why, RIG_E_IO, "--lifeline: %s", strerror(errno));
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, lifeline_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return why_set(why, RIG_E_IO, "--lifeline: cannot start its thread: %s", strerror(rc));
    return 0;
}

/* The default --listen: the address ssh reached us at, else all addresses. */
static void default_listen(char *out, size_t cap, bool lifeline)
{
    const char *conn = getenv("SSH_CONNECTION");   /* client port server port */
    char client[256], server[256];
    unsigned cport, sport;
    if (conn && sscanf(conn, "%255s %u %255s %u", client, &cport, server, &sport) == 4 && !strchr(server, '%')) {
        snprintf(out, cap, strchr(server, ':') ? "[%s]:0" : "%s:0", server);
        return;
    }
    snprintf(out, cap, "%s", lifeline ? "127.0.0.1:0" : "0.0.0.0:0");
}

int agent_cmd_main(int argc, char **argv)
{
    if (argc > AGENT_ARGS_MAX - 4) {
        fprintf(stderr, "rig agent: too many arguments\n%s", usage);
        return 1;
    }
    char *args[AGENT_ARGS_MAX];
    int n = 0;
    args[n++] = "rig agent";
    bool lifeline = false, listen = false, key = false, probe = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--lifeline") == 0) {
            lifeline = true;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        listen |= strncmp(a, "--listen", 8) == 0;
        key |= strncmp(a, "--key-", 6) == 0;
        probe |= strcmp(a, "--probe") == 0;
        args[n++] = argv[i];
    }
    if (lifeline && (key || probe)) {
        fprintf(stderr, "rig agent: --lifeline brings its own key; it takes no --key-file, --key-stdin or --probe\n%s",
                usage);
        return 1;
    }
    char listen_at[300];
    if (!listen && !probe) {
        default_listen(listen_at, sizeof listen_at, lifeline);
        args[n++] = "--listen";
        args[n++] = listen_at;
    }
    /* No key named: the one `rig key` writes by default, if there is one. */
    char key_file[4200];
    const char *home = getenv("HOME");
    if (!lifeline && !key && !probe && home && *home) {
        snprintf(key_file, sizeof key_file, "%s/.config/rig/key", home);
        if (access(key_file, F_OK) == 0) {
            args[n++] = "--key-file";
            args[n++] = key_file;
        }
    }
    if (lifeline) {
        rig_why why = { "" };
        if (start_lifeline(&why) < 0) {
            fprintf(stderr, "rig agent: %s\n", why.text);
            return 1;
        }
        args[n++] = "--key-stdin";
    }
    args[n] = NULL;
    optind = 0;   /* agent_main parses with getopt from the start */
    return agent_main(n, args);
}

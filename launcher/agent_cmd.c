/* `rig agent`: rig-agent's own command line (agent_main), plus what `rig
 * run` needs from an agent it starts:
 *   --lifeline   the job key arrives as one line of hex on standard input,
 *                and the agent serves until standard input closes (when
 *                `rig run` ends, or the ssh connection that carried it).
 *                Its standard output then carries rig-agent's two lines
 *                (driver, "listening on HOST:PORT") and its report lines.
 * Without --listen the agent listens on the address ssh reached this
 * machine at (SSH_CONNECTION) under ssh, on its address toward the node
 * srun ran on under srun (SLURM_LAUNCH_NODE_IPADDR), else on loopback
 * only, on a free port: never on every address unless the user asks for
 * 0.0.0.0. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "launcher/launcher.h"
#include "proto/key.h"
#include "proto/net.h"

#define AGENT_ARGS_MAX 64

static const char usage[] =
    "Usage: rig agent [--listen HOST:PORT] [--key-file FILE | --key-stdin] [--driver PATH]\n"
    "       rig agent --config FILE [options]\n"
    "       rig agent --probe [--json] [--driver PATH]\n"
    "Serves jobs on this machine's GPUs (softgpu where it has none); the same\n"
    "program as rig-agent.\n"
    "  --listen HOST:PORT   where to accept controllers (port 0 picks a free one;\n"
    "                       default: the address ssh reached this machine at\n"
    "                       (SSH_CONNECTION) when run over ssh, its address toward\n"
    "                       the srun node under srun, else 127.0.0.1, port 0;\n"
    "                       every address only with --listen 0.0.0.0:PORT)\n"
    "  --key-file FILE      the job key: owner-only regular file, 16..4096 bytes\n"
    "                       (default ~/.config/rig/key, which `rig key` makes)\n"
    "  --key-stdin          read the job key from standard input until it closes\n"
    "  --lifeline           read the key as one hex line from standard input and\n"
    "                       serve until standard input closes (what `rig run` uses)\n"
    "  --driver PATH        the CUDA driver to replay on\n"
    "  --config FILE        settings from FILE (NAME = VALUE lines: listen, key-file,\n"
    "                       driver), what a standing agent's service reads; no\n"
    "                       default address or key is added then\n"
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

/* The agent's stdin becomes a pipe holding only the key, so agent_main's
 * --key-stdin reads it; the real stdin is watched by a thread. */
static int start_lifeline(rig_why *why)
{
    rig_key key;
    int rc = key_read_hex_line(0, &key, why);
    if (rc < 0) {
        rig_why inner = *why;
        return why_set(why, rc, "--lifeline: %s", inner.text);
    }
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

/* Where ssh reached this machine: SSH_CONNECTION's third field ("CLIENT
 * CPORT SERVER SPORT"), bracketed when IPv6, into out. Returns 1 with out
 * empty when not run over ssh, 0 when found, or an error naming
 * SSH_CONNECTION when it holds something else (sshd writes it; anything
 * else there is not to be guessed at). */
static int ssh_server_address(char out[static INET6_ADDRSTRLEN + 2], rig_why *why)
{
    out[0] = '\0';
    const char *conn = getenv("SSH_CONNECTION");
    if (!conn || !*conn)
        return 1;
    const char *field[4] = { NULL };
    size_t len[4] = { 0 }, n = 0;
    for (const char *p = conn; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        size_t l = strcspn(p, " ");
        if (n == 4) {
            n++;
            break;
        }
        field[n] = p;
        len[n++] = l;
        p += l;
    }
    if (n != 4)
        return why_set(why, RIG_E_INVALID, "SSH_CONNECTION '%.80s%s' is not 'CLIENT PORT SERVER PORT'", conn,
                       strlen(conn) > 80 ? "..." : "");
    char host[INET6_ADDRSTRLEN];
    unsigned char bin[sizeof(struct in6_addr)];
    bool v4 = false, v6 = false;
    if (len[2] < sizeof host) {
        memcpy(host, field[2], len[2]);
        host[len[2]] = '\0';
        v4 = inet_pton(AF_INET, host, bin) == 1;
        v6 = !v4 && inet_pton(AF_INET6, host, bin) == 1;
    }
    if (!v4 && !v6)
        return why_set(why, RIG_E_INVALID, "SSH_CONNECTION: the server address '%.*s%s' is not an IP address%s",
                       len[2] > 80 ? 80 : (int)len[2], field[2], len[2] > 80 ? "..." : "",
                       memchr(field[2], '%', len[2]) ? " rig can listen on (a scoped one)" : "");
    snprintf(out, INET6_ADDRSTRLEN + 2, v6 ? "[%s]" : "%s", host);
    return 0;
}

/* Under srun (a Slurm job step, `rig run --slurm`): this node's address on
 * the route to the node srun ran on (SLURM_LAUNCH_NODE_IPADDR), found by
 * connecting a UDP socket there (nothing is sent). 1 with out empty when
 * not under srun; -1 naming the variable when it holds no address. */
static int srun_route_address(char out[static INET6_ADDRSTRLEN + 2], rig_why *why)
{
    out[0] = '\0';
    const char *launch = getenv("SLURM_LAUNCH_NODE_IPADDR");
    if (!launch || !*launch)
        return 1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, launch, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(9);
        len = sizeof *a4;
    } else if (inet_pton(AF_INET6, launch, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(9);
        len = sizeof *a6;
    } else {
        return why_set(why, RIG_E_INVALID, "SLURM_LAUNCH_NODE_IPADDR '%.60s' is not an IP address", launch);
    }
    char host[INET6_ADDRSTRLEN];
    rig_why w = { "" };
    if (net_source_toward((struct sockaddr *)&ss, len, host, &w) < 0)
        return why_set(why, RIG_E_IO, "no route to the srun node %s: %s", launch, w.text);
    snprintf(out, INET6_ADDRSTRLEN + 2, ss.ss_family == AF_INET6 ? "[%s]" : "%s", host);
    return 0;
}

/* True when a is option name (or a prefix getopt_long takes for it: at
 * least min bytes), with or without "=VALUE". */
static bool is_option(const char *a, const char *name, size_t min)
{
    size_t len = strcspn(a, "=");
    return len >= min && len <= strlen(name) && strncmp(a, name, len) == 0;
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
    bool lifeline = false, listen = false, key = false, probe = false, config = false;
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
        listen |= is_option(a, "--listen", 3);
        key |= is_option(a, "--key-file", 7) || is_option(a, "--key-stdin", 7);
        probe |= is_option(a, "--probe", 3);
        config |= is_option(a, "--config", 3);
        args[n++] = argv[i];
    }
    if (lifeline && (key || probe || config)) {
        fprintf(stderr,
                "rig agent: --lifeline brings its own key; it takes no --key-file, --key-stdin, --config or "
                "--probe\n%s", usage);
        return 1;
    }
    char host[INET6_ADDRSTRLEN + 2], listen_at[INET6_ADDRSTRLEN + 8], note[INET6_ADDRSTRLEN + 200] = "";
    if (!listen && !probe && !config) {
        rig_why why = { "" };
        int over_ssh = ssh_server_address(host, &why);
        if (over_ssh < 0) {
            fprintf(stderr, "rig agent: %s; --listen HOST:PORT names where to listen\n", why.text);
            return 1;
        }
        const char *how = over_ssh == 1 ? "not reached over ssh" : "where ssh reached this machine";
        if (over_ssh == 1) {
            int under_srun = srun_route_address(host, &why);
            if (under_srun < 0) {
                fprintf(stderr, "rig agent: %s; --listen HOST:PORT names where to listen\n", why.text);
                return 1;
            }
            if (under_srun == 1)
                snprintf(host, sizeof host, "127.0.0.1");
            else
                how = "the address on the way to the node that ran srun";
        }
        snprintf(listen_at, sizeof listen_at, "%s:0", host);
        args[n++] = "--listen";
        args[n++] = listen_at;
        /* Under `rig run` the listening line says it, and a line on stderr
         * would stand as the cause if the agent failed. */
        if (!lifeline)
            snprintf(note, sizeof note, "rig agent: listening on %s (%s; --listen HOST:PORT to choose)\n", host,
                     how);
    }
    /* No key named: the one `rig key` writes by default, if there is one. */
    char key_file[LAUNCHER_PATH_MAX + 1];
    const char *home = getenv("HOME");
    if (!lifeline && !key && !probe && !config && home && *home) {
        static const char rel[] = "/.config/rig/key";
        if (strlen(home) + sizeof rel - 1 > LAUNCHER_PATH_MAX) {
            fprintf(stderr, "rig agent: HOME: path longer than %zu bytes (room is needed for %s); --key-file FILE "
                            "names the key\n", LAUNCHER_PATH_MAX - (sizeof rel - 1), rel);
            return 1;
        }
        snprintf(key_file, sizeof key_file, "%s%s", home, rel);
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
    fputs(note, stderr);   /* once nothing of ours can fail */
    optind = 0;   /* agent_main parses with getopt from the start */
    return agent_main(n, args);
}

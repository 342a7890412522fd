/* rig: the one command. `rig run` runs a program here on the GPUs of the
 * machines it names; the other subcommands serve, name and inspect those
 * machines. One table of subcommands; each parses its own options. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launcher/launcher.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static int help_main(int argc, char **argv);
static int version_main(int argc, char **argv);

static const command commands[] = {
    { "run", run_main, "run a program here with the GPUs of the named machines" },
    { "serve", serve_main, "make a machine serve jobs all the time with the fleet key" },
    { "exec", exec_main, "run a command on another machine as if here (cwd, environment, terminal)" },
    { "agent", agent_cmd_main, "serve jobs on this machine's GPUs (what rig-agent is)" },
    { "key", key_main, "write a new random 32-byte key file, owner-only" },
    { "probe", probe_main, "show what a machine offers: devices, memory, driver, busy or free" },
    { "ls", ls_main, "list the machines of the targets file, live" },
    { "help", help_main, "show this help, or a command's (rig help run)" },
    { "version", version_main, "print rig's version" },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void print_commands(FILE *f)
{
    fprintf(f, "Usage: rig COMMAND [OPTIONS]\n\nCommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nMachines are named in ~/.config/rig/targets (RIG_TARGETS names another file):\n"
               "  NAME ADDRESS    ADDRESS: an ssh destination (host, user@host,\n"
               "                  ssh://user@host:port, a Host of the ssh config) or `local`\n"
               "  default NAME    the machine when neither --on nor $RIG_ON names one\n"
               "The target `local` (an agent started here) exists without a file. Ports,\n"
               "users and keys for ssh may come from an ssh config file: RIG_SSH_CONFIG\n"
               "names one (ssh -F).\n"
               "\n`rig help COMMAND` or `rig COMMAND --help` shows a command's options.\n"
               "Example: rig run --on gpu-box -- ./train --epochs 3\n");
}

static const command *find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int help_main(int argc, char **argv)
{
    if (argc > 2) {
        fprintf(stderr, "Usage: rig help [COMMAND]\n");
        return 1;
    }
    if (argc == 1) {
        print_commands(stdout);
        return 0;
    }
    const command *c = find(argv[1]);
    if (!c || c->fn == help_main) {
        if (c) {
            print_commands(stdout);
            return 0;
        }
        fprintf(stderr, "rig: no command '%s'\n", argv[1]);
        print_commands(stderr);
        return 1;
    }
    if (c->fn == version_main) {
        printf("Usage: rig version\n       rig --version\n");
        return 0;
    }
    char *sub[] = { argv[1], "--help", NULL };
    return c->fn(2, sub);
}

static int version_main(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "Usage: rig version\n");
        return 1;
    }
    printf("rig %s\n", RIG_VERSION);
    return 0;
}

int self_path(char *out, size_t cap)
{
    /* readlink cuts silently: only a path shorter than the buffer is whole. */
    ssize_t n = readlink("/proc/self/exe", out, cap);
    if (n <= 0 || (size_t)n >= cap)
        return -1;
    out[n] = '\0';
    return 0;
}

bool rig_path_ok(const char *cmd, const char *rig, const char *usage)
{
    if (!*rig)
        fprintf(stderr, "%s: --rig needs a path\n%s", cmd, usage);
    else if (strlen(rig) > LAUNCHER_PATH_MAX)
        fprintf(stderr, "%s: --rig: path longer than %d bytes\n", cmd, LAUNCHER_PATH_MAX);
    return *rig && strlen(rig) <= LAUNCHER_PATH_MAX;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_commands(stderr);
        return 1;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0)
        return version_main(1, argv + 1);
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        return help_main(1, argv + 1);
    const command *c = find(name);
    if (!c) {
        fprintf(stderr, "rig: no command '%s'\n", name);
        print_commands(stderr);
        return 1;
    }
    return c->fn(argc - 1, argv + 1);
}

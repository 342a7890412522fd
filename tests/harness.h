/* End-to-end harness: a real rig-agent process on loopback with a fresh
 * key, and unmodified CUDA programs run through the preloaded shim. */
#ifndef RIG_TESTS_HARNESS_H
#define RIG_TESTS_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct agent_proc {
    pid_t pid;
    uint16_t port;
    char key_hex[65];
    char key_file[128];
    char dir[64];
    char log[192];         /* the agent's stderr */
    char host[32];         /* where it listens: 127.0.0.1, or its namespace's address */
} agent_proc;

/* Starts build/rig-agent (the plain build: programs are never sanitized)
 * on 127.0.0.1:0 with a new key, or the key of same_key (another agent of
 * the same job), in a process group of its own (its pid is the group's),
 * and waits for its port. extra_args may be NULL. Aborts
 * the test on failure. */
void agent_start(agent_proc *a, const agent_proc *same_key, const char *extra_args);
/* The same in the network namespace netns (NULL: this one), listening on
 * host (an address there). */
void agent_start_at(agent_proc *a, const agent_proc *same_key, const char *extra_args, const char *netns,
                    const char *host);
/* SIGTERM, then SIGKILL, and reap. */
void agent_stop(agent_proc *a);

typedef struct program_result {
    int status;            /* exit code, 128 + signal, or -1 on timeout */
    char *output;          /* stdout and stderr together, malloc'd, NUL after */
    size_t len;            /* its bytes (the output may hold NULs) */
    double seconds;
} program_result;

/* The one way tests run a program to its end: argv with env_add (a
 * NULL-terminated list of "NAME=VALUE" to set and "NAME" to unset) applied
 * to the environment, stdout and stderr captured together, killed after
 * timeout_s. */
/* The one way tests start a program: path with argv, env_add applied to
 * the environment as below, its stdin in_fd (-1: the test's), stdout
 * out_fd and stderr err_fd; in a process group of its own (its pid) that
 * dies with the test process. */
pid_t child_spawn(const char *path, char *const argv[], char *const env_add[], int in_fd, int out_fd, int err_fd);

program_result program_run(char *const argv[], char *const env_add[], int timeout_s);
/* The same with the program at path (argv[0] is only its name) and, when
 * interrupt_when is set, SIGINT to its process group once that file
 * exists. */
program_result program_run_until(const char *path, char *const argv[], char *const env_add[], int timeout_s,
                                 const char *interrupt_when);
void program_result_free(program_result *r);

/* "b=127.0.0.1:PORT,..." for the given agents, named b, c, d, ... */
void agents_env(const agent_proc *agents, int n, char *out, size_t cap);

/* The plain build's directory: programs (never sanitized). */
#define PLAIN_BUILD RIG_SOURCE_DIR "/build"

/* The shim and the agent under test: this build's (sanitized with SAN=1;
 * the sanitizer runtime is then preloaded ahead of the shim, as a program
 * not built with it needs). */
#define SHIM_BUILD RIG_BUILD_DIR
#ifdef RIG_ASAN_RUNTIME
#define SHIM_PRELOAD RIG_ASAN_RUNTIME ":" SHIM_BUILD "/librigshim.so"
#else
#define SHIM_PRELOAD SHIM_BUILD "/librigshim.so"
#endif

/* The environment entries every program through the shim gets. */
void shim_env(char *preload, size_t cap);

#endif

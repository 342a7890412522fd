/* Processes an end-to-end test starts and watches while they run: a program
 * (through the shim against an agent, or plainly) or a tool, in a process
 * group of its own with its output captured as it comes; and the agents a
 * test started. Whatever a test started is ended by watch_end_all, the
 * suite's .fini, even when an assertion ends the test early. */
#ifndef RIG_TESTS_WATCH_H
#define RIG_TESTS_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/harness.h"

typedef struct watched {
    pid_t pid;
    int out;                 /* its stdout and stderr */
    int in;                  /* its stdin (tools end when it closes), or -1 */
    char *text;
    size_t len, cap;
    bool eof;
    int status;              /* exit code, 128 + signal, -1: killed at the timeout */
    double started, ended;
    double failed_at;        /* when "rig: job failed" appeared; 0: never */
} watched;

/* Seconds on the monotonic clock. */
double watch_now(void);

/* Starts argv; through the shim against the agent at 127.0.0.1:agents_port
 * with key_hex, or plainly when agents_port is 0. */
void watch_start(watched *p, char *const argv[], unsigned agents_port, const char *key_hex);
/* Reads what it wrote until `until` or its end of output. */
void watch_read(watched *p, double until);
/* True once it printed needle, within timeout_s. */
bool watch_wait_text(watched *p, const char *needle, double timeout_s);
/* Waits for it to end, killing its group at timeout_s. */
void watch_finish(watched *p, double timeout_s);
void watch_free(watched *p);
/* The end of a text, for messages. */
const char *watch_tail(const char *text);

/* A process (a group when it leads one) ended by watch_end_all. */
void watch_live_add(pid_t pid);
void watch_live_remove(pid_t pid);
/* agent_start / agent_stop, with the agent ended by watch_end_all. */
void watch_agent_start(agent_proc *a);
void watch_agent_stop(agent_proc *a);
void watch_end_all(void);

size_t watch_file_size(const char *path);
/* The agent's log from byte `from` on, malloc'd. */
char *watch_log_since(const agent_proc *a, size_t from);

#endif

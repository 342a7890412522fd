/* The report protocol between `rig run` and the processes of a job
 * (docs/design.md "The launcher"): RIG_REMOTE_REPORT names a descriptor on
 * which a process writes at most one `started` line and one end line,
 * `failed WHY` or `closed`, each in one write; before its end line, a
 * controller writes a `stats DEVICE CALLS ROUND_TRIPS BYTES_OUT BYTES_IN
 * WAIT_MS` line per remote device (`rig run --stats` prints them). The variable is removed from
 * the environment and the descriptor made close-on-exec, so programs the
 * process starts never inherit it; a forked child writes nothing. */
#ifndef RIG_PROTO_REPORT_H
#define RIG_PROTO_REPORT_H

/* Takes the descriptor from RIG_REMOTE_REPORT (once per process). Returns
 * 0, or -1 with why when the variable is set but names no open descriptor
 * (then nothing is reported). */
int report_open_from_env(char *why, unsigned whylen);

/* Each writes its line once; later calls, and calls in a forked child, do
 * nothing. The end lines are exclusive: the first one wins. */
void report_started(void);
void report_failed(const char *why);
void report_closed(void);
/* Any number, before the end line; device is a name without spaces. */
void report_stats(const char *device, unsigned long long calls, unsigned long long round_trips,
                  unsigned long long bytes_out, unsigned long long bytes_in, double wait_ms);

#endif

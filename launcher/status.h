/* A standing agent's status, asked over the network by a holder of its key:
 * the handshake as process 0 dialing process 0, then one answer frame:
 * {"busy": this agent serves a job, "controller": its address, "machine":
 * what `rig-agent --probe --json` prints there} (docs/wire.md "Status").
 * No job starts. */
#ifndef RIG_LAUNCHER_STATUS_H
#define RIG_LAUNCHER_STATUS_H

#include "launcher/json.h"
#include "proto/error.h"
#include "proto/key.h"

/* The answer of the agent at addr (HOST:PORT), parsed, and its text in
 * *text when text is not NULL (malloc'd); NULL with why (the agent's
 * refusal, a wrong key, no answer within the handshake's bounds). */
json *agent_status(const char *addr, const rig_key *key, char **text, rig_why *why);

#endif

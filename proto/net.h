/* TCP endpoints for rig's connections: listen, dial with a deadline, and the
 * socket options every connection of a job uses. */
#ifndef RIG_PROTO_NET_H
#define RIG_PROTO_NET_H

#include <netinet/in.h>
#include <stdint.h>

#include "proto/error.h"
#include "proto/names.h"

/* Listens on addr (port 0 picks one); *port receives the bound port. The
 * descriptor is close-on-exec. */
int net_listen(const names_address *addr, int *fd, uint16_t *port, rig_why *why);

/* Accepts one connection and tunes it; RIG_E_TIMEOUT after timeout_ms
 * (negative: wait forever). */
int net_accept(int listen_fd, int timeout_ms, int *fd, rig_why *why);

/* Resolves addr and connects, trying each resolved address, all within
 * timeout_ms; the connection is tuned and blocking. Errors name the address. */
int net_connect(const names_address *addr, int timeout_ms, int *fd, rig_why *why);

/* TCP_NODELAY, keepalive, close-on-exec: small messages go out at once. */
void net_tune(int fd);

/* This machine's address (text, no brackets) that a connection to `to`
 * would leave from, found by a UDP connect (nothing is sent). Errors say
 * why there is no route. */
int net_source_toward(const struct sockaddr *to, unsigned len, char host[static INET6_ADDRSTRLEN], rig_why *why);

#endif

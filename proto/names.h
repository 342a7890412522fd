/* Names of machines, processes and devices, and the agents list.
 *   RIG_REMOTE_AGENTS   NAME=ADDR:PORT,...   (IPv6 ADDR only in brackets)
 *   HOST:PORT           an agent named by its address
 *   HOST:PORT#N         the Nth connection to that address (N >= 2; #1 is
 *                       the plain form), e.g. a second job's controller
 *   CPU@M               the host CPU of machine M
 *   CUDA:3@M            device 3 of machine M
 * where M is a NAME from the agents list or a HOST:PORT. */
#ifndef RIG_PROTO_NAMES_H
#define RIG_PROTO_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

#define NAMES_NAME_MAX 63     /* NAME: letters, digits, '.', '_', '-' */
#define NAMES_HOST_MAX 253    /* a DNS name, an IPv4 or an IPv6 address */
#define NAMES_AGENTS_MAX 256
/* The longest formatted name: CUDA:2147483647@[host]:65535#65535 */
#define NAMES_TEXT_MAX (5 + 10 + 1 + 2 + NAMES_HOST_MAX + 6 + 6 + 1)

typedef struct names_address {
    char host[NAMES_HOST_MAX + 1];   /* without brackets */
    int ipv6;
    uint16_t port;
} names_address;

typedef struct names_agent {
    char name[NAMES_NAME_MAX + 1];
    names_address addr;
} names_agent;

typedef struct names_agents {
    size_t count;
    names_agent *agents;    /* malloc'd; names_agents_free releases */
} names_agents;

/* Parses RIG_REMOTE_AGENTS. Refuses empty entries, bad names, bad ports, an
 * IPv6 address outside brackets ("fd00::2:4123" is ambiguous), and a name or
 * an address given twice; the error quotes the entry. */
int names_parse_agents(const char *text, names_agents *out, rig_why *why);
void names_agents_free(names_agents *list);

/* Parses "HOST:PORT" or "[V6]:PORT" (port 1..65535). */
int names_parse_address(const char *text, size_t len, names_address *out, rig_why *why);
/* The same for a place to listen, where port 0 asks for any free port. */
int names_parse_listen(const char *text, names_address *out, rig_why *why);

typedef enum names_kind {
    NAMES_ADDRESS,   /* HOST:PORT or HOST:PORT#N */
    NAMES_CPU,       /* CPU@M */
    NAMES_CUDA,      /* CUDA:N@M */
} names_kind;

typedef struct names_name {
    names_kind kind;
    uint32_t device;              /* N of CUDA:N */
    /* The machine: a NAME (named set) or an address with its connection. */
    int named;
    char name[NAMES_NAME_MAX + 1];
    names_address addr;
    uint32_t instance;            /* #N; 1 when absent */
} names_name;

/* Parses any of the forms above. */
int names_parse(const char *text, names_name *out, rig_why *why);

/* Writes the canonical text of n (NUL-terminated); returns its length, or
 * RIG_E_TOO_LONG when cap is too small. */
int names_format(const names_name *n, char *out, size_t cap);

/* True when s is a valid NAME. */
int names_valid_name(const char *s, size_t len);

#endif

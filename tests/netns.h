/* Separate hosts for a test, on one machine: each host is a network
 * namespace whose one interface (a veth pair) hangs on a bridge in the
 * test's namespace, addressed from 198.18.0.0/15 (the benchmarking range),
 * so a process there reaches the others only at their addresses, through
 * links a test can rate-limit (tc tbf) and count bytes on. Needs root and
 * `ip`; netns_available says why not. Labs are taken down when the test
 * process exits, however it ends. */
#ifndef RIG_TESTS_NETNS_H
#define RIG_TESTS_NETNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NETNS_HOSTS_MAX 8

typedef struct netns_host {
    char name[16];        /* the test's name for it: "ctl", "b" */
    char ns[32];          /* the namespace: rig<ID>-<name> */
    char veth[16];        /* its link's end on the bridge side */
    char addr[20];        /* 198.18.ID.K */
    bool sshd;            /* netns_sshd started one there */
} netns_host;

typedef struct netns_lab {
    int id;
    char bridge[16];
    int count;
    netns_host h[NETNS_HOSTS_MAX];
    char dir[64];         /* the lab's files (sshd's), "" until needed */
    char ssh_config[96];  /* dir/ssh_config: a Host NAME per host with an sshd */
} netns_lab;

/* True when namespaces can be made here; else false with the reason. */
bool netns_available(char *why, size_t cap);
/* Makes the bridge and one host per name (asserts on failure). */
void netns_lab_up(netns_lab *lab, const char *const names[], int n);
void netns_lab_down(netns_lab *lab);
const netns_host *netns_host_of(const netns_lab *lab, const char *name);
/* Limits the host's link to rate (tc's form: "20mbit") both ways. */
void netns_rate(const netns_lab *lab, const char *name, const char *rate);
/* Bytes the host has sent (or received) on its link so far. */
uint64_t netns_bytes(const netns_lab *lab, const char *name, bool sent);
/* Starts a real sshd in the host's namespace (tests/tools/sshd-start),
 * listening on its address only, and adds `Host NAME` for it to the lab's
 * ssh_config (ssh -F); stopped with the lab. False with the reason where
 * sshd is not installed; other failures assert. */
bool netns_sshd(netns_lab *lab, const char *name, char *why, size_t cap);
/* argv (NULL-terminated, at most 60 words) run in the host's namespace:
 * "ip netns exec NS argv..." into out (room for 64 pointers). */
void netns_argv(const netns_host *h, char *const argv[], char *out[64]);

#endif

/* Agents lists and names: what parses, what is refused and how it reads. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "proto/names.h"
#include "tests/support.h"

Test(agents, parses_names_hosts_ipv4_ipv6)
{
    names_agents l;
    rig_why why = { "" };
    cr_assert_eq(names_parse_agents("h100-b=gpu-b.lab:4123, local=127.0.0.1:9,six=[fd00::2]:4123", &l, &why),
                 0, "%s", why.text);
    cr_assert_eq(l.count, 3);
    cr_assert_str_eq(l.agents[0].name, "h100-b");
    cr_assert_str_eq(l.agents[0].addr.host, "gpu-b.lab");
    cr_assert_eq(l.agents[0].addr.port, 4123);
    cr_assert_str_eq(l.agents[1].addr.host, "127.0.0.1");
    cr_assert_eq(l.agents[1].addr.port, 9);
    cr_assert_str_eq(l.agents[2].addr.host, "fd00::2");
    cr_assert(l.agents[2].addr.ipv6);
    names_agents_free(&l);
}

/* Inline arrays, not pointers: Criterion re-executes the binary for each
 * parameter, so pointers into it would not survive ASLR. */
typedef struct bad_list {
    char text[48];
    char says[40];
} bad_list;

ParameterizedTestParameters(agents, refused)
{
    static bad_list cases[] = {
        { "", "is empty" },
        { "a=1.2.3.4:5,", "entry 2 is empty" },
        { ",a=1.2.3.4:5", "entry 1 is empty" },
        { "a=fd00::2:4123", "ambiguous" },
        { "a=1.2.3.4", "no port" },
        { "a=1.2.3.4:0", "not a number from 1 to 65535" },
        { "a=1.2.3.4:65536", "not a number from 1 to 65535" },
        { "a=1.2.3.4:08", "not a number" },
        { "a=1.2.3.4:+8", "not a number" },
        { "a=1.2.3.999:8", "not an IPv4 address" },
        { "a=[fd00::zz]:8", "not an IPv6 address" },
        { "a=[fd00::2]8", "a port must follow" },
        { "a=[fd00::2:8", "without ']'" },
        { "a=-bad.host:8", "not a host name" },
        { "a=bad_host:8", "not a host name" },
        { "1.2.3.4:5", "not NAME=ADDR:PORT" },
        { "a b=1.2.3.4:5", "is not a name" },
        { "=1.2.3.4:5", "is not a name" },
        { "a=1.2.3.4:5,a=1.2.3.4:6", "the name a is given twice" },
        { "a=1.2.3.4:5,b=1.2.3.4:5", "same address" },
    };
    return cr_make_param_array(bad_list, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_list *c, agents, refused)
{
    names_agents l;
    rig_why why = { "" };
    cr_assert_eq(names_parse_agents(c->text, &l, &why), RIG_E_INVALID, "\"%s\" must be refused", c->text);
    cr_assert(strstr(why.text, c->says), "\"%s\": %s", c->text, why.text);
    cr_assert(strstr(why.text, "RIG_REMOTE_AGENTS"), "the error names the variable: %s", why.text);
    cr_assert_null(l.agents);
}

Test(names, forms_round_trip)
{
    const char *forms[] = { "gpu-b:4123", "gpu-b:4123#2", "10.0.0.2:9", "[fd00::2]:4123#3",
                            "CPU@h100-b", "CUDA:3@h100-b", "CUDA:0@[::1]:4123", "CPU@10.0.0.2:7#2" };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        names_name n;
        rig_why why = { "" };
        cr_assert_eq(names_parse(forms[i], &n, &why), 0, "%s: %s", forms[i], why.text);
        char out[NAMES_TEXT_MAX];
        cr_assert_gt(names_format(&n, out, sizeof out), 0);
        cr_assert_str_eq(out, forms[i]);
    }
}

Test(names, fields)
{
    names_name n;
    cr_assert_eq(names_parse("CUDA:3@h100-b", &n, NULL), 0);
    cr_assert(n.kind == NAMES_CUDA && n.device == 3 && n.named);
    cr_assert_str_eq(n.name, "h100-b");
    cr_assert_eq(names_parse("gpu-b:4123#2", &n, NULL), 0);
    cr_assert(n.kind == NAMES_ADDRESS && !n.named && n.instance == 2 && n.addr.port == 4123);
    cr_assert_eq(names_parse("gpu-b:4123", &n, NULL), 0);
    cr_assert_eq(n.instance, 1);
    /* "#1" is the plain form. */
    cr_assert_eq(names_parse("gpu-b:4123#1", &n, NULL), 0);
    char out[NAMES_TEXT_MAX];
    names_format(&n, out, sizeof out);
    cr_assert_str_eq(out, "gpu-b:4123");
}

Test(names, refused_forms)
{
    const char *bad[] = { "h100-b", "CUDA:@x", "CUDA:01@x", "CUDA:x@x", "GPU:1@x", "CPU@",
                          "CUDA:3@", "x:1#0", "x:1#", "x:1#70000", "CPU@a b", "CUDA:1@fd00::2:1",
                          "CUDA:4294967296@x", "name#2" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        names_name n;
        rig_why why = { "" };
        cr_assert_eq(names_parse(bad[i], &n, &why), RIG_E_INVALID, "\"%s\" must be refused", bad[i]);
        cr_assert_neq(why.text[0], '\0');
    }
}

Test(names, format_needs_room)
{
    names_name n;
    cr_assert_eq(names_parse("CUDA:3@h100-b", &n, NULL), 0);
    char small[5];
    cr_assert_eq(names_format(&n, small, sizeof small), RIG_E_TOO_LONG);
}

/* Each truncation and bit flip of valid texts parses or is refused, never
 * more; the text is a NUL-terminated exact-size copy. */
static void check_text(const uint8_t *p, size_t n, void *ctx)
{
    int agents = *(int *)ctx;
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    if (agents) {
        names_agents l;
        int rc = names_parse_agents(s, &l, NULL);
        cr_assert(rc == 0 || rc == RIG_E_INVALID);
        if (rc == 0)
            for (size_t i = 0; i < l.count; i++)
                cr_assert(l.agents[i].addr.port > 0 && names_valid_name(l.agents[i].name, strlen(l.agents[i].name)));
        names_agents_free(&l);
    } else {
        names_name nm;
        int rc = names_parse(s, &nm, NULL);
        cr_assert(rc == 0 || rc == RIG_E_INVALID);
    }
    free(s);
}

Test(names, every_truncation_and_bit_flip)
{
    const char *list = "a=gpu.lab:4123,b=[fd00::2]:1,c=10.1.2.3:65535";
    int agents = 1;
    support_each_mutation((const uint8_t *)list, strlen(list), check_text, &agents);
    agents = 0;
    const char *names[] = { "CUDA:12@[fd00::2]:4123#2", "CPU@h100-b", "host.lab:80#9" };
    for (size_t i = 0; i < 3; i++)
        support_each_mutation((const uint8_t *)names[i], strlen(names[i]), check_text, &agents);
}

Test(names, listen_allows_port_zero)
{
    names_address a;
    rig_why why = { "" };
    cr_assert_eq(names_parse_listen("127.0.0.1:0", &a, &why), 0, "%s", why.text);
    cr_assert_eq(a.port, 0);
    cr_assert_eq(names_parse_listen("[::1]:4123", &a, &why), 0, "%s", why.text);
    cr_assert(a.ipv6 && a.port == 4123);
    cr_assert_eq(names_parse_listen("127.0.0.1:65536", &a, &why), RIG_E_INVALID);
    cr_assert(strstr(why.text, "from 0 to 65535"), "%s", why.text);
    names_address b;
    cr_assert_eq(names_parse_address("127.0.0.1:0", 11, &b, &why), RIG_E_INVALID, "a peer's port is never 0");
}

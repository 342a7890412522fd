/* proto/mesh.c: the join request's layout, both ways, and every way a
 * malformed one is refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proto/mesh.h"
#include "proto/wire.h"

static mesh_join sample(void)
{
    mesh_join m = { .self = 2, .n = 3 };
    const char *names[] = { "b", "gpu-c", "d.1" }, *hosts[] = { "198.18.0.2", "fd00::3", "gpu-d.example" };
    for (int i = 0; i < 3; i++) {
        snprintf(m.agents[i].name, sizeof m.agents[i].name, "%s", names[i]);
        snprintf(m.agents[i].host, sizeof m.agents[i].host, "%s", hosts[i]);
        m.agents[i].port = (uint16_t)(4000 + i);
    }
    return m;
}

Test(mesh, join_round_trips)
{
    mesh_join m = sample(), back;
    uint8_t buf[1024];
    rig_why why = { "" };
    int n = mesh_join_encode(&m, buf, sizeof buf, &why);
    cr_assert_gt(n, 0, "%s", why.text);
    cr_assert_eq(mesh_join_decode(buf, (size_t)n, &back, &why), 0, "%s", why.text);
    cr_expect_eq(back.self, 2u);
    cr_expect_eq(back.n, 3u);
    for (int i = 0; i < 3; i++) {
        cr_expect_str_eq(back.agents[i].name, m.agents[i].name);
        cr_expect_str_eq(back.agents[i].host, m.agents[i].host);
        cr_expect_eq(back.agents[i].port, m.agents[i].port);
    }
    /* Every truncation is refused, never read past. */
    for (int cut = 0; cut < n; cut++)
        cr_expect_lt(mesh_join_decode(buf, (size_t)cut, &back, &why), 0, "a cut to %d bytes was taken", cut);
    cr_expect_eq(mesh_join_encode(&m, buf, 20, &why), RIG_E_TOO_LONG);
}

Test(mesh, malformed_joins_say_what)
{
    uint8_t buf[1024];
    rig_why why = { "" };
    mesh_join m = sample();
    m.self = 4;
    int n = mesh_join_encode(&m, buf, sizeof buf, &why);
    cr_expect_eq(mesh_join_decode(buf, (size_t)n, &m, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "this agent is 4, not one of 1..3"), "%s", why.text);
    m = sample();
    m.n = 1;
    n = mesh_join_encode(&m, buf, sizeof buf, &why);
    cr_expect_eq(mesh_join_decode(buf, (size_t)n, &m, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "1 agents (2 to 64 make a mesh)"), "%s", why.text);
    m = sample();
    m.agents[1].port = 0;
    n = mesh_join_encode(&m, buf, sizeof buf, &why);
    cr_expect_eq(mesh_join_decode(buf, (size_t)n, &m, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "agent 2 has no port"), "%s", why.text);
    m = sample();
    snprintf(m.agents[0].name, sizeof m.agents[0].name, "bad/name");
    n = mesh_join_encode(&m, buf, sizeof buf, &why);
    cr_expect_eq(mesh_join_decode(buf, (size_t)n, &m, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "agent 1's name is not a name"), "%s", why.text);
    m = sample();
    m.agents[2].host[0] = '\0';
    n = mesh_join_encode(&m, buf, sizeof buf, &why);
    cr_expect_eq(mesh_join_decode(buf, (size_t)n, &m, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "agent 3's host is missing, empty or too long"), "%s", why.text);
    m = sample();
    n = mesh_join_encode(&m, buf, sizeof buf, &why);
    buf[n] = 0;
    cr_expect_eq(mesh_join_decode(buf, (size_t)n + 1, &m, &why), RIG_E_MALFORMED);
    cr_expect(strstr(why.text, "bytes after the last agent"), "%s", why.text);
}

/* The mesh's request layouts; see mesh.h. */
#include "proto/mesh.h"

#include <string.h>

#include "proto/wire.h"

int mesh_join_encode(const mesh_join *m, uint8_t *out, size_t cap, rig_why *why)
{
    wire_writer w = wire_writer_init(out, cap);
    wire_put_u32(&w, m->self);
    wire_put_u32(&w, m->n);
    for (uint32_t k = 0; k < m->n && k < MESH_AGENTS_MAX; k++) {
        wire_put_string(&w, m->agents[k].name, strlen(m->agents[k].name));
        wire_put_string(&w, m->agents[k].host, strlen(m->agents[k].host));
        wire_put_u16(&w, m->agents[k].port);
    }
    if (w.err)
        return why_set(why, RIG_E_TOO_LONG, "a join of %u agents does not fit %zu bytes", m->n, cap);
    return (int)w.off;
}

static int get_text(wire_reader *r, char *out, size_t cap, uint32_t k, const char *what, rig_why *why)
{
    const uint8_t *s;
    size_t n = wire_get_string(r, &s, cap - 1);
    if (r->err || n == 0 || memchr(s, '\0', n))
        return why_set(why, RIG_E_MALFORMED, "join: agent %u's %s is missing, empty or too long", k, what);
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

int mesh_join_decode(const uint8_t *p, size_t len, mesh_join *m, rig_why *why)
{
    memset(m, 0, sizeof *m);
    wire_reader r = wire_reader_init(p, len);
    m->self = wire_get_u32(&r);
    m->n = wire_get_u32(&r);
    if (r.err)
        return why_set(why, RIG_E_MALFORMED, "join: shorter than its counts");
    if (m->n < 2 || m->n > MESH_AGENTS_MAX)
        return why_set(why, RIG_E_MALFORMED, "join: %u agents (2 to %d make a mesh)", m->n, MESH_AGENTS_MAX);
    if (m->self < 1 || m->self > m->n)
        return why_set(why, RIG_E_MALFORMED, "join: this agent is %u, not one of 1..%u", m->self, m->n);
    for (uint32_t k = 0; k < m->n; k++) {
        mesh_agent *a = &m->agents[k];
        if (get_text(&r, a->name, sizeof a->name, k + 1, "name", why) < 0 ||
            get_text(&r, a->host, sizeof a->host, k + 1, "host", why) < 0)
            return RIG_E_MALFORMED;
        if (!names_valid_name(a->name, strlen(a->name)))
            return why_set(why, RIG_E_MALFORMED, "join: agent %u's name is not a name", k + 1);
        a->port = wire_get_u16(&r);
        if (r.err || a->port == 0)
            return why_set(why, RIG_E_MALFORMED, "join: agent %u has no port", k + 1);
    }
    if (wire_reader_finish(&r))
        return why_set(why, RIG_E_MALFORMED, "join: bytes after the last agent");
    return 0;
}

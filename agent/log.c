/* The agent's log on stderr. Each line goes out in one write(2): lines of
 * threads and worker processes never interleave, and no stdio lock is taken
 * (a fork copies a lock that another thread may hold, and a worker must not
 * wait on it). Text that came from a peer is escaped before it is logged,
 * so no peer can forge or break lines, or send a terminal escapes
 * (bytes past ASCII too: 0x9b is a control sequence to some terminals). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "proto/deadline.h"

void agent_log(const char *fmt, ...)
{
    char line[2048];
    static const char prefix[] = "rig-agent: ";
    memcpy(line, prefix, sizeof prefix - 1);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + sizeof prefix - 1, sizeof line - sizeof prefix, fmt, ap);
    va_end(ap);
    size_t len = sizeof prefix - 1 + (n < 0 ? 0 : (size_t)n < sizeof line - sizeof prefix ? (size_t)n
                                                                                    : sizeof line - sizeof prefix - 1);
    line[len++] = '\n';
    if (write(2, line, len) < 0)
        return;
}

bool agent_log_allowed(log_limit *l)
{
    int64_t now = deadline_now_ms();
    if (now - l->window_ms >= LOG_LIMIT_WINDOW_MS) {
        if (l->dropped)
            agent_log("%llu more lines like the last were not logged", (unsigned long long)l->dropped);
        l->window_ms = now;
        l->lines = 0;
        l->dropped = 0;
    }
    if (l->lines < LOG_LIMIT_LINES) {
        l->lines++;
        return true;
    }
    l->dropped++;
    return false;
}

size_t agent_escape(char *out, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[5];
        size_t k = 0;
        if (c == '\\') {
            esc[k++] = '\\';
            esc[k++] = '\\';
        } else if (c == '\n') {
            esc[k++] = '\\';
            esc[k++] = 'n';
        } else if (c < 32 || c >= 127) {
            esc[k++] = '\\';
            esc[k++] = 'x';
            esc[k++] = hex[c >> 4];
            esc[k++] = hex[c & 15];
        } else {
            esc[k++] = (char)c;
        }
        if (o + k + 1 > cap)
            break;
        memcpy(out + o, esc, k);
        o += k;
    }
    out[o] = '\0';
    return o;
}

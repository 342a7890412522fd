/* A standing agent's status; see status.h. */
#include "launcher/status.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/deadline.h"
#include "proto/fdio.h"
#include "proto/frame.h"
#include "proto/handshake.h"
#include "proto/names.h"
#include "proto/net.h"

#define STATUS_LIMIT 65536

json *agent_status(const char *addr, const rig_key *key, char **text_out, rig_why *why)
{
    if (text_out)
        *text_out = NULL;
    names_address a;
    int fd = -1;
    if (names_parse_address(addr, strlen(addr), &a, why) < 0 || net_connect(&a, HS_TIMEOUT_MS, &fd, why) < 0)
        return NULL;
    hs_config cfg = { .key = key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
    json *answer = NULL;
    uint8_t head[FRAME_HEADER_SIZE];
    frame_kind kind;
    uint64_t len = 0;
    char *text = NULL;
    int64_t deadline = deadline_after(HS_TIMEOUT_MS);
    if (hs_dial(fd, &cfg, 0, 0, why) < 0 ||
        fdio_read_full(fd, head, sizeof head, deadline, "the status", why) < 0 ||
        frame_header_decode(head, STATUS_LIMIT, &kind, &len, why) < 0)
        goto out;
    if (kind != FRAME_ANSWER) {
        why_set(why, RIG_E_MALFORMED, "a %s frame, not the status", frame_kind_name(kind));
        goto out;
    }
    text = malloc(len + 1);
    if (!text) {
        why_set(why, RIG_E_NOMEM, "no memory for a status of %llu bytes", (unsigned long long)len);
        goto out;
    }
    if (fdio_read_full(fd, text, len, deadline, "the status", why) < 0)
        goto out;
    text[len] = '\0';
    answer = json_parse(text);
    if (!answer || answer->type != JSON_OBJECT) {
        json_free(answer);
        answer = NULL;
        why_set(why, RIG_E_MALFORMED, "the status is not a JSON object");
    }
out:
    if (answer && text_out)
        *text_out = text;
    else
        free(text);
    close(fd);
    return answer;
}

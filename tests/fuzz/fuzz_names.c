/* libFuzzer: RIG_REMOTE_AGENTS and name parsing, and RIG_REMOTE_KEY. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/key.h"
#include "proto/names.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    names_agents list;
    if (names_parse_agents(text, &list, NULL) == 0)
        names_agents_free(&list);
    names_name n;
    if (names_parse(text, &n, NULL) == 0) {
        char out[NAMES_TEXT_MAX];
        names_format(&n, out, sizeof out);
    }
    rig_key k;
    (void)key_from_hex(&k, text, NULL);
    free(text);
    return 0;
}

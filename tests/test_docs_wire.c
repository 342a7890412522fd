/* docs/wire.md against the code, so the page cannot drift silently: its
 * frame table names every kind with frame_kind_name's name and number, its
 * table of rig's operations lists every JOB_OP_* of proto/job.h with its
 * number, every CUDA operation the agent's request, handover and drop
 * replay handles is named on the page, and every CUDA operation the page
 * names exists in the op table, and every layout of proto/records.def is
 * named in its section "The record layouts". */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/frame.h"
#include "proto/job.h"
#include "proto/records.h"

#define WIRE_MD RIG_SOURCE_DIR "/docs/wire.md"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Calls fn for each match of pattern in text with its capture groups
 * (at most 3) as NUL-terminated strings. */
typedef void match_fn(void *ctx, char groups[3][128]);

static int each_match(const char *text, const char *pattern, match_fn *fn, void *ctx)
{
    regex_t re;
    cr_assert_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE), 0, "bad pattern %s", pattern);
    regmatch_t m[4];
    int count = 0;
    for (const char *p = text; regexec(&re, p, 4, m, p == text ? 0 : REG_NOTBOL) == 0; p += m[0].rm_eo) {
        char groups[3][128] = { "", "", "" };
        for (int g = 1; g <= 3; g++)
            if (m[g].rm_so >= 0) {
                size_t len = (size_t)(m[g].rm_eo - m[g].rm_so);
                cr_assert_lt(len, sizeof groups[0]);
                memcpy(groups[g - 1], p + m[g].rm_so, len);
            }
        fn(ctx, groups);
        count++;
        if (m[0].rm_eo == 0)
            break;
    }
    regfree(&re);
    return count;
}

/* ---- frames ---- */

static unsigned frames_seen;

static void frame_row(void *ctx, char g[3][128])
{
    (void)ctx;
    unsigned kind = (unsigned)strtoul(g[0], NULL, 10);
    cr_assert(kind >= FRAME_KIND_MIN && kind <= FRAME_KIND_MAX, "docs/wire.md lists frame kind %u, which proto/frame.h lacks",
              kind);
    cr_expect_str_eq(g[1], frame_kind_name(kind), "docs/wire.md calls frame kind %u %s; proto/frame.c says %s", kind,
                     g[1], frame_kind_name(kind));
    cr_expect_eq(frames_seen & (1u << kind), 0, "docs/wire.md lists frame kind %u twice", kind);
    frames_seen |= 1u << kind;
}

/* The section of md whose heading line starts head, cut where the next
 * heading of that level (next) begins. */
static char *section(char *md, const char *head, const char *next)
{
    char *at = strstr(md, head);
    cr_assert(at, "docs/wire.md has no section \"%s\"", head);
    char *end = strstr(at + strlen(head), next);
    if (end)
        *end = '\0';
    return at;
}

Test(docs_wire, frame_kinds)
{
    char *md = slurp(WIRE_MD);
    /* Only the Frames section: other tables have rows like "| 9 | close |". */
    char *at = section(md, "\n## Frames", "\n## ");
    frames_seen = 0;
    each_match(at, "^\\| ([0-9]+) \\| ([a-z]+) \\|", frame_row, NULL);
    for (unsigned k = FRAME_KIND_MIN; k <= FRAME_KIND_MAX; k++)
        cr_expect(frames_seen & (1u << k), "docs/wire.md's frame table lacks kind %u (%s)", k, frame_kind_name(k));
    free(md);
}

/* ---- rig's own operations ---- */

typedef struct op_list {
    char name[64][128];
    unsigned long number[64];
    int n;
} op_list;

static void add_op(void *ctx, char g[3][128])
{
    op_list *l = ctx;
    cr_assert_lt(l->n, 64);
    snprintf(l->name[l->n], sizeof l->name[0], "%s", g[0]);
    l->number[l->n] = strtoul(g[1], NULL, 16);
    l->n++;
}

static long find_op(const op_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->name[i], name) == 0)
            return (long)l->number[i];
    return -1;
}

Test(docs_wire, job_ops)
{
    char *header = slurp(RIG_SOURCE_DIR "/proto/job.h");
    char *md = slurp(WIRE_MD);
    static op_list code, page;
    code.n = page.n = 0;
    each_match(header, "^ +(JOB_OP_[A-Z_]+) = 0x([0-9A-Fa-f]+),", add_op, &code);
    each_match(md, "^\\| `(JOB_OP_[A-Z_]+)` \\| 0x([0-9A-Fa-f]+) \\|", add_op, &page);
    /* The parse of the header sees what the compiler sees. */
    cr_assert_eq(find_op(&code, "JOB_OP_OPEN"), JOB_OP_OPEN);
    cr_assert_eq(find_op(&code, "JOB_OP_GRAPH_LAUNCH"), JOB_OP_GRAPH_LAUNCH);
    cr_assert_eq(find_op(&code, "JOB_OP_BASE"), JOB_OP_BASE);
    for (int i = 0; i < code.n; i++) {
        if (strcmp(code.name[i], "JOB_OP_BASE") == 0)
            continue;
        long n = find_op(&page, code.name[i]);
        cr_expect_neq(n, -1, "docs/wire.md does not list %s (proto/job.h)", code.name[i]);
        if (n != -1)
            cr_expect_eq((unsigned long)n, code.number[i], "docs/wire.md numbers %s %#lx; proto/job.h %#lx",
                         code.name[i], (unsigned long)n, code.number[i]);
    }
    for (int i = 0; i < page.n; i++)
        cr_expect_neq(find_op(&code, page.name[i]), -1, "docs/wire.md lists %s, which proto/job.h lacks", page.name[i]);
    free(header);
    free(md);
}

/* ---- CUDA operations ---- */

static const char *page_text;

static void named_on_page(void *ctx, char g[3][128])
{
    const char *file = ctx;
    char quoted[160];
    snprintf(quoted, sizeof quoted, "`%s`", g[0]);
    cr_expect(strstr(page_text, quoted), "%s replays %s; docs/wire.md does not name it", file, g[0]);
}

Test(docs_wire, replayed_ops_documented)
{
    char *md = slurp(WIRE_MD);
    page_text = md;
    static const char *files[] = { "agent/request.c", "agent/handover.c" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", RIG_SOURCE_DIR, files[i]);
        char *src = slurp(path);
        int n = each_match(src, "case CUDA_OP_([A-Za-z0-9_]+):", named_on_page, (void *)files[i]);
        cr_expect_gt(n, 5, "%s: no case labels found", files[i]);
        free(src);
    }
    free(md);
}

static void exists(void *ctx, char g[3][128])
{
    (void)ctx;
    cr_expect(cuda_op_by_symbol(g[0]), "docs/wire.md names %s, which proto/cuda_ops.def lacks", g[0]);
}

Test(docs_wire, named_ops_exist)
{
    char *md = slurp(WIRE_MD);
    int n = each_match(md, "`(cu[A-Z][A-Za-z0-9_]*)`", exists, NULL);
    cr_expect_gt(n, 40);
    free(md);
}

Test(docs_wire, record_layouts_listed)
{
    char *md = slurp(WIRE_MD);
    char *at = section(md, "### The record layouts", "\n### ");
    static const char *const names[] = {
#define LAYOUT(name, what) #name,
#define FIELD(kind, name)
#define FIELD_ARRAY(kind, name, n)
#define FIELD_BYTES(name, n)
#define LAYOUT_END(name)
#include "proto/records.def"
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char quoted[80];
        snprintf(quoted, sizeof quoted, "`%s`", names[i]);
        cr_expect(strstr(at, quoted), "docs/wire.md's record layouts do not name %s", names[i]);
    }
    free(md);
}

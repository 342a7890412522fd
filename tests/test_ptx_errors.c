/* The engine on bad input: malformed and mutated PTX, instructions it does
 * not run, out-of-bounds kernels, bad launches. Each is a clear error, never
 * a crash (run under ASan/UBSan with SAN=1). */
#include "tests/test_ptx_util.h"

TestSuite(ptx_errors, .fini = tp_free_all);

static CUresult parse_str(const char *text, soft_program **p, char *msg, size_t msglen)
{
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);   /* exact size: ASan sees any over-read */
    cr_assert(copy);
    memcpy(copy, text, n);
    CUresult rc = soft_program_parse(copy, n, p, msg, msglen);
    free(copy);
    return rc;
}

static const char *const small_kernel =
    ".version 9.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".global .align 4 .u32 gcount = 3;\n"
    ".visible .entry k(.param .u64 k_p0, .param .u32 k_p1)\n"
    "{\n"
    "\t.reg .pred %p<2>;\n"
    "\t.reg .b32 %r<6>;\n"
    "\t.reg .b64 %rd<5>;\n"
    "\tld.param.u64 %rd1, [k_p0];\n"
    "\tld.param.u32 %r1, [k_p1];\n"
    "\tmov.u32 %r2, %tid.x;\n"
    "\tsetp.ge.u32 %p1, %r2, %r1;\n"
    "\t@%p1 bra $L_end;\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n"
    "\tmul.wide.u32 %rd3, %r2, 4;\n"
    "\tadd.s64 %rd4, %rd2, %rd3;\n"
    "\tld.global.u32 %r3, [gcount];\n"
    "\tmad.lo.s32 %r4, %r2, %r3, 7;\n"
    "\tst.global.u32 [%rd4], %r4;\n"
    "$L_end:\n"
    "\tret;\n"
    "}\n";

/* What a launch of a mutant may give: success, or an error a kernel's
 * fault or a bad launch gives on a GPU, always with a message. */
static bool launch_error_expected(CUresult rc)
{
    switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_LAUNCH_FAILED: case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_ASSERT: case CUDA_ERROR_NOT_SUPPORTED: case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_INVALID_PC: case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_LAUNCH_TIMEOUT:
        return true;
    default:
        return false;
    }
}

#define LAUNCH_WORDS 64

/* Launches every entry of a parsed program (two blocks of 48 threads, a
 * buffer of LAUNCH_WORDS words filled with 0xee and 40 as parameters); each
 * launch succeeds or fails with an expected error and a message. Returns
 * the launches that succeeded; the buffer ends in out when given. The
 * suite's fini frees what an assertion leaves. */
static unsigned try_launch(soft_program *p, const char *what, uint32_t *out)
{
    unsigned ok = 0;
    for (uint32_t i = 0; i < soft_program_global_count(p); i++) {
        const soft_global_info *g = soft_program_global(p, i);
        if (g->size > 4096) {
            tp_free_all();   /* a mutated array bound: too big to back here */
            return 0;
        }
        void *m = tp_alloc(g->size);
        if (g->init)
            memcpy(m, g->init, g->size);
        soft_program_bind_global(p, i, (uintptr_t)m);
    }
    uint32_t *buf = tp_alloc(LAUNCH_WORDS * 4);
    memset(buf, 0xee, LAUNCH_WORDS * 4);
    uint8_t params[4096] = { 0 };
    uint64_t ptr = (uintptr_t)buf;
    uint32_t n = 40;
    memcpy(params, &ptr, 8);
    memcpy(params + 8, &n, 4);
    for (uint32_t e = 0; e < soft_program_entry_count(p); e++) {
        if (soft_program_entry(p, e)->param_bytes > sizeof params)
            continue;
        soft_launch l = { .entry = e, .grid = { 2, 1, 1 }, .block = { 48, 1, 1 },
                          .params = params, .memory = &tp_memory, .threads = 1 };
        char msg[256] = "";
        CUresult rc = soft_program_launch(p, &l, msg, sizeof msg);
        if (rc == CUDA_SUCCESS) {
            ok++;
            continue;
        }
        cr_assert(launch_error_expected(rc), "%s: launch of entry %u gave %d (%s)", what, e, rc, msg);
        cr_assert(msg[0], "%s: launch of entry %u gave %d and no message", what, e, rc);
    }
    if (out)
        memcpy(out, buf, LAUNCH_WORDS * 4);
    tp_free_all();
    return ok;
}

Test(ptx_errors, intact_kernel_computes)
{
    soft_program *p = NULL;
    char msg[256];
    cr_assert_eq(parse_str(small_kernel, &p, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    uint32_t out[LAUNCH_WORDS];
    cr_assert_eq(try_launch(p, "intact", out), 1);
    for (uint32_t i = 0; i < LAUNCH_WORDS; i++)
        cr_assert_eq(out[i], i < 40 ? i * 3 + 7 : 0xeeeeeeeeu, "word %u", i);
    soft_program_free(p);
}

Test(ptx_errors, every_truncation)
{
    size_t n = strlen(small_kernel);
    for (size_t len = 0; len < n; len++) {
        char *copy = malloc(len ? len : 1);
        memcpy(copy, small_kernel, len);
        soft_program *p = NULL;
        char msg[256];
        CUresult rc = soft_program_parse(copy, len, &p, msg, sizeof msg);
        free(copy);
        if (rc == CUDA_SUCCESS) {
            char what[64];
            snprintf(what, sizeof what, "truncated to %zu", len);
            try_launch(p, what, NULL);
            soft_program_free(p);
        } else {
            cr_assert(rc == CUDA_ERROR_INVALID_PTX || rc == CUDA_ERROR_NOT_SUPPORTED,
                      "truncated to %zu: result %d", len, rc);
            cr_assert(msg[0], "truncated to %zu: no message", len);
        }
    }
}

Test(ptx_errors, every_bit_flip)
{
    size_t n = strlen(small_kernel);
    unsigned ok = 0;
    for (size_t i = 0; i < n; i++)
        for (unsigned bit = 0; bit < 8; bit++) {
            char *copy = malloc(n);
            memcpy(copy, small_kernel, n);
            copy[i] ^= (char)(1u << bit);
            soft_program *p = NULL;
            char msg[256];
            CUresult rc = soft_program_parse(copy, n, &p, msg, sizeof msg);
            free(copy);
            if (rc == CUDA_SUCCESS) {
                ok++;
                char what[64];
                snprintf(what, sizeof what, "flip %zu.%u", i, bit);
                try_launch(p, what, NULL);
                soft_program_free(p);
            } else {
                cr_assert(rc == CUDA_ERROR_INVALID_PTX || rc == CUDA_ERROR_NOT_SUPPORTED,
                          "flip %zu.%u: result %d", i, bit, rc);
                cr_assert(msg[0], "flip %zu.%u: no message", i, bit);
            }
        }
    cr_assert(ok > 0);
}

Test(ptx_errors, built_kernel_mutations)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/vecadd.default.ptx", RIG_BUILD_DIR);
    size_t n;
    char *text = tp_read(path, &n);
    unsigned launched = 0;
    for (size_t i = 0; i < n; i += 3) {
        char *copy = malloc(n);
        memcpy(copy, text, n);
        copy[i] ^= (char)(1u << (i % 8));
        soft_program *p = NULL;
        char msg[256];
        CUresult rc = soft_program_parse(copy, n, &p, msg, sizeof msg);
        free(copy);
        if (rc == CUDA_SUCCESS) {
            char what[64];
            snprintf(what, sizeof what, "vecadd, byte %zu flipped", i);
            launched += try_launch(p, what, NULL);
            soft_program_free(p);
        }
    }
    free(text);
    /* Most flips land in names and comments: those kernels still run. */
    cr_assert_gt(launched, 0);
}

Test(ptx_errors, garbage)
{
    static const char *const bad[] = {
        "", "   \n", "hello", ".version", ".version 9.0 .target", "\x01\x02",
        ".version 9.0\n.entry k(\n", ".version 9.0\n.entry k() { mov.u32 %r1, 1; }",
        ".version 9.0\n.entry k() { .reg .b32 %r<2>; bra $nowhere; }",
        ".version 9.0\n.entry k() { .reg .b32 %r<2>; mov.u32 %r1, 0fZZZZ; }",
        ".version 9.0\n.entry k() { /* unterminated",
        ".version 9.0\n.global .u32 x[99999999999];",
        ".version 9.0\n.entry k() { .reg .b32 %r<2>; add.u32 %r1, %r1; }",
        ".version 9.0\n.entry k() { .reg .b32 %r<2>; .reg .b32 %r<2>; }",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        soft_program *p = (soft_program *)1;
        char msg[256];
        CUresult rc = parse_str(bad[i], &p, msg, sizeof msg);
        cr_assert(rc == CUDA_ERROR_INVALID_PTX, "case %zu: result %d (%s)", i, rc, msg);
        cr_assert(p == NULL, "case %zu: program left behind", i);
        cr_assert(msg[0], "case %zu: no message", i);
    }
}

Test(ptx_errors, unknown_opcode_named)
{
    static const char *const cases[][2] = {
        { "frobnicate.b32 %r1, %r2;", "frobnicate.b32" },
        { "wmma.load.a.sync.aligned.row.m8n8k32.s4 {%r1}, [%rd1];", "wmma.load" },
        { "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%r1}, {%r2}, {%r3}, {%r4};", "mma.sync" },
        { "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r1}, {%r2}, {%r3}, {%r4};", "mma.sp" },
        { "ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r1}, [%rd1];", "ldmatrix" },
        { "add.xyz.u32 %r1, %r2, %r3;", "add.xyz.u32" },
        { "tex.2dms.v4.f32.s32 {%r1, %r2, %r3, %r4}, [%rd1, {%r1, %r2, %r3, %r4}];", "tex.2dms" },
        { "bar.arrive 0, 32;", "bar.arrive" },
        /* split in two .v4, the first half would replace the second's address */
        { "ld.shared.v8.b32 {%r1, %r2, %r3, %r4, %r1, %r2, %r3, %r4}, [%r2];", "overwrites its address" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 ".version 9.0\n.target sm_75\n.address_size 64\n"
                 ".visible .entry k()\n{\n.reg .b32 %%r<5>;\n.reg .b64 %%rd<3>;\n%s\nret;\n}\n",
                 cases[i][0]);
        /* The module parses; only the kernel is refused, and says why. */
        soft_program *p = NULL;
        char msg[256];
        CUresult rc = parse_str(text, &p, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_SUCCESS, "%s: result %d (%s)", cases[i][0], rc, msg);
        const char *why = soft_program_entry(p, 0)->refusal;
        cr_assert(why, "%s: kernel not refused", cases[i][0]);
        cr_assert(strstr(why, cases[i][1]), "reason '%s' does not name %s", why, cases[i][1]);
        cr_assert(strstr(why, "line 8, in kernel k"), "reason '%s' does not give the line and kernel", why);
        soft_launch l = { .entry = 0, .grid = { 1, 1, 1 }, .block = { 32, 1, 1 }, .memory = &tp_memory };
        cr_assert_eq(soft_program_launch(p, &l, msg, sizeof msg), CUDA_ERROR_NOT_SUPPORTED);
        cr_assert(strstr(msg, cases[i][1]), "launch message '%s'", msg);
        soft_program_free(p);
    }
}

Test(ptx_errors, out_of_bounds_store)
{
    soft_program *p = tp_load("vecadd", "default");
    int n = 1000;
    int *a = tp_alloc(n * 4), *b = tp_alloc(n * 4), *c = tp_alloc(500 * 4);
    tp_args args = { 0 };
    TP_ARG(&args, a);
    TP_ARG(&args, b);
    TP_ARG(&args, c);
    TP_ARG(&args, n);
    char msg[256];
    CUresult rc = tp_launch_ex(p, "vecadd_i32", 4, 1, 256, 1, 0, &args, NULL, NULL, msg, sizeof msg);
    cr_assert_eq(rc, CUDA_ERROR_ILLEGAL_ADDRESS, "result %d (%s)", rc, msg);
    cr_assert(strstr(msg, "vecadd_i32"), "message '%s' does not name the kernel", msg);
    const char *hex = strstr(msg, "0x");
    cr_assert(hex, "message '%s' has no address", msg);
    unsigned long long addr = strtoull(hex, NULL, 16);
    cr_assert(addr >= (uintptr_t)(c + 500) && addr < (uintptr_t)(c + 1000),
              "address %llx outside the overrun", addr);
    cr_assert(strchr(msg, '\n') == NULL, "one line");
    soft_program_free(p);
}

Test(ptx_errors, null_and_wild_pointers)
{
    soft_program *p = tp_load("vecadd", "debug");
    int n = 64;
    float *b = tp_alloc(n * 4), *c = tp_alloc(n * 4);
    float *wild[] = { NULL, (float *)(uintptr_t)0xdead0000ull, b + 1000000 };
    for (size_t i = 0; i < 3; i++) {
        tp_args args = { 0 };
        TP_ARG(&args, wild[i]);
        TP_ARG(&args, b);
        TP_ARG(&args, c);
        TP_ARG(&args, n);
        char msg[256];
        CUresult rc = tp_launch_ex(p, "vecadd", 1, 1, 64, 1, 0, &args, NULL, NULL, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_ERROR_ILLEGAL_ADDRESS, "pointer %zu: result %d (%s)", i, rc, msg);
        cr_assert(strstr(msg, "vecadd") && strstr(msg, "0x"), "message '%s'", msg);
    }
    soft_program_free(p);
}

Test(ptx_errors, shared_out_of_bounds_and_trap)
{
    const char *text =
        ".version 9.0\n.target sm_75\n.address_size 64\n"
        ".shared .align 4 .b8 sh[64];\n"
        ".visible .entry oob(.param .u32 o_p0)\n{\n"
        ".reg .b32 %r<4>;\n"
        "ld.param.u32 %r1, [o_p0];\n"
        "mov.u32 %r2, sh;\n"
        "add.s32 %r3, %r2, %r1;\n"
        "st.shared.u32 [%r3], %r1;\n"
        "ret;\n}\n"
        ".visible .entry boom()\n{\ntrap;\n}\n";
    soft_program *p = NULL;
    char msg[256];
    cr_assert_eq(parse_str(text, &p, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    tp_args args = { 0 };
    TP_ARG(&args, 60u);
    cr_assert_eq(tp_launch_ex(p, "oob", 1, 1, 32, 1, 0, &args, NULL, NULL, msg, sizeof msg),
                 CUDA_SUCCESS, "%s", msg);
    args = (tp_args){ 0 };
    TP_ARG(&args, 61u);
    cr_assert_eq(tp_launch_ex(p, "oob", 1, 1, 32, 1, 0, &args, NULL, NULL, msg, sizeof msg),
                 CUDA_ERROR_ILLEGAL_ADDRESS, "%s", msg);
    cr_assert(strstr(msg, "oob") && strstr(msg, "shared"), "message '%s'", msg);
    args = (tp_args){ 0 };
    cr_assert_eq(tp_launch_ex(p, "boom", 3, 1, 32, 1, 0, &args, NULL, NULL, msg, sizeof msg),
                 CUDA_ERROR_LAUNCH_FAILED, "%s", msg);
    cr_assert(strstr(msg, "boom") && strstr(msg, "trap"), "message '%s'", msg);
    soft_program_free(p);
}

Test(ptx_errors, bad_launches)
{
    soft_program *p = tp_load("vecadd", "default");
    int e = soft_program_find_entry(p, "vecadd");
    cr_assert(e >= 0);
    char msg[256];
    /* wrong parameter sizes */
    cr_assert_eq(soft_program_check_params(p, (uint32_t)e, 28, msg, sizeof msg), CUDA_SUCCESS);
    cr_assert_eq(soft_program_check_params(p, (uint32_t)e, 24, msg, sizeof msg), CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(msg, "vecadd") && strstr(msg, "28") && strstr(msg, "24"), "message '%s'", msg);
    cr_assert_eq(soft_program_check_params(p, (uint32_t)e, 32, msg, sizeof msg), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(soft_program_check_params(p, 99, 28, msg, sizeof msg), CUDA_ERROR_INVALID_VALUE);
    uint8_t params[28] = { 0 };
    soft_launch l = { .entry = (uint32_t)e, .grid = { 1, 1, 1 }, .block = { 32, 1, 1 },
                      .params = NULL, .memory = &tp_memory };
    cr_assert_eq(soft_program_launch(p, &l, msg, sizeof msg), CUDA_ERROR_INVALID_VALUE, "no params");
    l.params = params;
    static const uint32_t geo[][6] = {
        { 0, 1, 1, 32, 1, 1 }, { 1, 1, 1, 0, 1, 1 }, { 1, 1, 1, 2048, 1, 1 },
        { 1, 1, 1, 32, 32, 2 }, { 1, 70000, 1, 32, 1, 1 }, { 1, 1, 1, 1, 1, 65 },
    };
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) {
        memcpy(l.grid, geo[i], 12);
        memcpy(l.block, geo[i] + 3, 12);
        cr_assert_eq(soft_program_launch(p, &l, msg, sizeof msg), CUDA_ERROR_INVALID_VALUE,
                     "geometry %zu", i);
        cr_assert(msg[0]);
    }
    l.grid[0] = l.grid[1] = l.grid[2] = 1;
    l.block[0] = 32;
    l.block[1] = l.block[2] = 1;
    l.dynamic_shared_bytes = 1u << 30;
    cr_assert_eq(soft_program_launch(p, &l, msg, sizeof msg), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    l.dynamic_shared_bytes = 0;
    l.entry = 7;
    cr_assert_eq(soft_program_launch(p, &l, msg, sizeof msg), CUDA_ERROR_INVALID_VALUE);
    soft_program_free(p);

    /* a global that was never bound */
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/globals.default.ptx", RIG_BUILD_DIR);
    size_t len;
    char *text = tp_read(path, &len);
    cr_assert_eq(soft_program_parse(text, len, &p, msg, sizeof msg), CUDA_SUCCESS);
    free(text);
    int out = 0;
    int *outp = &out;
    l = (soft_launch){ .entry = (uint32_t)soft_program_find_entry(p, "read_counter"),
                       .grid = { 1, 1, 1 }, .block = { 1, 1, 1 }, .params = &outp,
                       .memory = &tp_memory };
    cr_assert_eq(soft_program_launch(p, &l, msg, sizeof msg), CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(msg, "not bound"), "message '%s'", msg);
    soft_program_free(p);
}

Test(ptx_errors, entry_info)
{
    soft_program *p = tp_load("structparam", "default");
    cr_assert_eq(soft_program_entry_count(p), 1);
    const soft_entry_info *e = soft_program_entry(p, 0);
    cr_assert_str_eq(e->name, "_Z12scale_struct6Params5Small");
    cr_assert_eq(e->param_count, 2);
    cr_assert_eq(e->params[0].offset, 0);
    cr_assert_eq(e->params[0].size, 40);
    cr_assert_eq(e->params[0].align, 8);
    cr_assert_eq(e->params[1].offset, 40);
    cr_assert_eq(e->params[1].size, 8);
    cr_assert_eq(e->param_bytes, 48);
    cr_assert_eq(e->max_threads, 1024);
    cr_assert_null(soft_program_entry(p, 1));
    cr_assert_eq(soft_program_find_entry(p, "scale_struct"), -1);
    soft_program_free(p);
    p = tp_load("matmul", "default");
    cr_assert_eq(soft_program_entry(p, 0)->static_shared_bytes, 2 * 16 * 16 * 4);
    soft_program_free(p);
    for (unsigned mi = 0; mi < TP_NMODES; mi++) {   /* each kernel counts its own */
        p = tp_load("histogram", tp_modes[mi]);
        int h = soft_program_find_entry(p, "histogram"), a = soft_program_find_entry(p, "atomics");
        cr_assert(h >= 0 && a >= 0);
        cr_assert_eq(soft_program_entry(p, (uint32_t)h)->static_shared_bytes, 64 * 4, "%s", tp_modes[mi]);
        cr_assert_eq(soft_program_entry(p, (uint32_t)a)->static_shared_bytes, 0, "%s", tp_modes[mi]);
        soft_program_free(p);
        tp_free_all();
    }
    p = tp_load("globals", "default");
    cr_assert_eq(soft_program_global_count(p), 4);
    soft_program_free(p);
}

static void capture(void *ctx, const char *text, size_t len)
{
    char *buf = ctx;
    size_t have = strlen(buf);
    if (have + len < 256) {
        memcpy(buf + have, text, len);
        buf[have + len] = 0;
    }
}

Test(ptx_errors, printf_bad_format)
{
    const char *text =
        ".version 9.0\n.target sm_75\n.address_size 64\n"
        ".extern .func (.param .b32 func_retval0) vprintf (.param .b64 p0, .param .b64 p1);\n"
        ".global .align 1 .b8 fmt[16] = {37, 57, 57, 57, 57, 57, 100, 32, 37, 100, 10, 0};\n"
        ".visible .entry pf(.param .u64 bad)\n{\n"
        ".local .align 8 .b8 __local_depot0[8];\n"
        ".reg .b64 %rd<6>;\n.reg .b32 %r<3>;\n"
        "mov.u64 %rd1, fmt;\ncvta.global.u64 %rd2, %rd1;\n"
        "mov.u64 %rd3, __local_depot0;\ncvta.local.u64 %rd4, %rd3;\n"
        "st.local.u32 [%rd3], 42;\n"
        "{\n.param .b64 param0;\nst.param.b64 [param0], %rd2;\n.param .b64 param1;\n"
        "st.param.b64 [param1], %rd4;\n.param .b32 retval0;\n"
        "call.uni (retval0), vprintf, (param0, param1);\nld.param.b32 %r1, [retval0];\n}\n"
        "ld.param.u64 %rd5, [bad];\n"
        "{\n.param .b64 param0;\nst.param.b64 [param0], %rd5;\n.param .b64 param1;\n"
        "st.param.b64 [param1], %rd4;\n.param .b32 retval0;\n"
        "call.uni (retval0), vprintf, (param0, param1);\n}\n"
        "ret;\n}\n";
    soft_program *p = NULL;
    char msg[256];
    cr_assert_eq(parse_str(text, &p, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    void *g = tp_alloc(16);
    memcpy(g, soft_program_global(p, 0)->init, 16);
    soft_program_bind_global(p, 0, (uintptr_t)g);
    char out[256] = "";
    tp_args a = { 0 };
    TP_ARG(&a, (uint64_t)0xbad000);
    CUresult rc = tp_launch_ex(p, "pf", 1, 1, 1, 1, 0, &a, capture, out, msg, sizeof msg);
    cr_assert_eq(rc, CUDA_ERROR_ILLEGAL_ADDRESS, "result %d (%s)", rc, msg);
    cr_assert(strstr(msg, "pf") && strstr(msg, "printf"), "message '%s'", msg);
    cr_assert_str_eq(out, "%99999d 42\n", "a huge width is printed as written, not expanded");
    soft_program_free(p);
}

Test(ptx_errors, device_assert)
{
    for (unsigned mi = 0; mi < TP_NMODES; mi++) {
        const char *mode = tp_modes[mi];
        soft_program *p = tp_load("assert", mode);
        int n = 1000;
        int *x = tp_alloc(n * 4);
        for (int i = 0; i < n; i++)
            x[i] = i;
        x[777] = -5;
        tp_args a = { 0 };
        TP_ARG(&a, x);
        TP_ARG(&a, n);
        char out[256] = "", msg[256];
        CUresult rc = tp_launch_ex(p, "check_positive", (n + 127) / 128, 1, 128, 1, 0, &a, capture,
                                   out, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_ERROR_ASSERT, "%s: result %d (%s)", mode, rc, msg);
        cr_assert(strstr(msg, "check_positive"), "%s: message '%s'", mode, msg);
        cr_assert(strstr(out, "block: [6,0,0], thread: [9,0,0]") && strstr(out, "x[i] >= 0") &&
                  strstr(out, "assert.cu"), "%s: printed '%s'", mode, out);
        x[777] = 5;
        out[0] = 0;
        rc = tp_launch_ex(p, "check_positive", (n + 127) / 128, 1, 128, 1, 0, &a, capture, out,
                          msg, sizeof msg);
        cr_assert_eq(rc, CUDA_SUCCESS, "%s: %s", mode, msg);
        cr_assert_str_eq(out, "");
        soft_program_free(p);
        tp_free_all();
    }
}

/* Indirect calls through what is not a device function of the module, or
 * one whose parameters differ from the call's prototype; a pointer table and
 * a variable's address in initialisers; misused mbarriers and cp.async out
 * of bounds: each a clear error naming the kernel and line. */
Test(ptx_errors, indirect_calls_and_async_copies)
{
    const char *text =
        ".version 9.0\n.target sm_90\n.address_size 64\n"
        ".func (.param .b32 r) twice(.param .b32 x)\n{\n.reg .b32 %r<3>;\n"
        "ld.param.b32 %r1, [x];\nadd.s32 %r2, %r1, %r1;\nst.param.b32 [r], %r2;\nret;\n}\n"
        ".func (.param .b64 r) wide(.param .b32 x)\n{\n.reg .b64 %rd<2>;\n"
        "mov.u64 %rd1, 1;\nst.param.b64 [r], %rd1;\nret;\n}\n"
        ".global .align 4 .u32 vals[4] = {10, 20, 30, 40};\n"
        ".global .align 8 .u64 fns[3] = {twice, wide, 0};\n"
        ".global .align 8 .u64 third = generic(vals)+8;\n"
        ".shared .align 16 .b8 sh[64];\n"
        ".visible .entry callk(.param .u64 out, .param .u32 which, .param .u64 raw)\n{\n"
        ".reg .pred %p<2>;\n.reg .b32 %r<6>;\n.reg .b64 %rd<8>;\n"
        "ld.param.u64 %rd1, [out];\nld.param.u32 %r1, [which];\nld.param.u64 %rd5, [raw];\n"
        "mul.wide.u32 %rd2, %r1, 8;\nmov.u64 %rd3, fns;\nadd.s64 %rd3, %rd3, %rd2;\n"
        "setp.eq.u32 %p1, %r1, 3;\n@!%p1 ld.global.u64 %rd4, [%rd3];\n@%p1 mov.u64 %rd4, %rd5;\n"
        "ld.global.u64 %rd6, [third];\nld.u32 %r2, [%rd6];\n"
        "{\n.param .b32 a0;\nst.param.b32 [a0], %r2;\n.param .b32 r0;\n"
        "proto: .callprototype (.param .b32 _) _ (.param .b32 _);\n"
        "call (r0), %rd4, (a0), proto;\nld.param.b32 %r3, [r0];\n}\n"
        "st.global.u32 [%rd1], %r3;\nret;\n}\n"
        ".visible .entry mbk(.param .u32 count, .param .u32 arrivals)\n{\n"
        ".reg .b32 %r<6>;\n.reg .b64 %rd<4>;\n"
        "ld.param.u32 %r1, [count];\nld.param.u32 %r2, [arrivals];\nmov.u32 %r3, sh;\n"
        "mbarrier.init.shared.b64 [%r3], %r1;\n"
        "mbarrier.arrive.shared.b64 %rd1, [%r3], %r2;\nret;\n}\n"
        ".visible .entry cpk(.param .u64 src)\n{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n"
        "ld.param.u64 %rd1, [src];\nmov.u32 %r1, sh;\n"
        "cp.async.cg.shared.global [%r1], [%rd1], 16;\ncp.async.wait_all;\nret;\n}\n";
    soft_program *p = NULL;
    char msg[256];
    cr_assert_eq(parse_str(text, &p, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    for (uint32_t i = 0; i < soft_program_global_count(p); i++) {
        const soft_global_info *g = soft_program_global(p, i);
        void *m = tp_alloc(g->size);
        if (g->init)
            memcpy(m, g->init, g->size);
        soft_program_bind_global(p, i, (uintptr_t)m);
    }
    uint32_t *out = tp_alloc(4);
    /* fns[0] is twice; third points at vals[2] */
    tp_args args = { 0 };
    TP_ARG(&args, out);
    TP_ARG(&args, 0u);
    TP_ARG(&args, (uint64_t)0);
    cr_assert_eq(tp_launch_ex(p, "callk", 1, 1, 32, 1, 0, &args, NULL, NULL, msg, sizeof msg),
                 CUDA_SUCCESS, "%s", msg);
    cr_assert_eq(*out, 60u, "twice(vals[2]) through the table: %u", *out);
    static const struct { uint32_t which; uint64_t raw; const char *why; } bad[] = {
        { 1, 0, "parameters differ" },                  /* wide returns 64 bits */
        { 2, 0, "not a device function" },              /* a null pointer */
        { 3, 0xdeadbeefull, "not a device function" },  /* garbage */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        args = (tp_args){ 0 };
        TP_ARG(&args, out);
        TP_ARG(&args, bad[i].which);
        TP_ARG(&args, bad[i].raw);
        CUresult rc = tp_launch_ex(p, "callk", 1, 1, 32, 1, 0, &args, NULL, NULL, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_ERROR_ILLEGAL_INSTRUCTION, "case %zu: %d (%s)", i, rc, msg);
        cr_assert(strstr(msg, "callk") && strstr(msg, bad[i].why) && strstr(msg, "line"),
                  "case %zu: message '%s'", i, msg);
    }
    static const struct { uint32_t count, arrivals; CUresult rc; const char *why; } mb[] = {
        { 32, 1, CUDA_SUCCESS, "" },
        { 0, 1, CUDA_ERROR_LAUNCH_FAILED, "init count" },
        { 1u << 20, 1, CUDA_ERROR_LAUNCH_FAILED, "init count" },
        { 4, 5, CUDA_ERROR_LAUNCH_FAILED, "beyond the pending count" },
    };
    for (size_t i = 0; i < sizeof mb / sizeof mb[0]; i++) {
        args = (tp_args){ 0 };
        TP_ARG(&args, mb[i].count);
        TP_ARG(&args, mb[i].arrivals);
        CUresult rc = tp_launch_ex(p, "mbk", 1, 1, 1, 1, 0, &args, NULL, NULL, msg, sizeof msg);
        cr_assert_eq(rc, mb[i].rc, "mbarrier case %zu: %d (%s)", i, rc, msg);
        cr_assert(strstr(msg, mb[i].why), "mbarrier case %zu: message '%s'", i, msg);
    }
    uint8_t *src = tp_alloc(24);   /* calloc: 16-byte aligned */
    args = (tp_args){ 0 };
    TP_ARG(&args, src);
    cr_assert_eq(tp_launch_ex(p, "cpk", 1, 1, 1, 1, 0, &args, NULL, NULL, msg, sizeof msg),
                 CUDA_SUCCESS, "%s", msg);
    args = (tp_args){ 0 };
    TP_ARG(&args, src + 16);
    cr_assert_eq(tp_launch_ex(p, "cpk", 1, 1, 1, 1, 0, &args, NULL, NULL, msg, sizeof msg),
                 CUDA_ERROR_ILLEGAL_ADDRESS, "%s", msg);
    cr_assert(strstr(msg, "cpk") && strstr(msg, "global cp.async source"), "message '%s'", msg);
    args = (tp_args){ 0 };
    TP_ARG(&args, src + 4);
    cr_assert_eq(tp_launch_ex(p, "cpk", 1, 1, 1, 1, 0, &args, NULL, NULL, msg, sizeof msg),
                 CUDA_ERROR_MISALIGNED_ADDRESS, "%s", msg);
    cr_assert(strstr(msg, "cpk") && strstr(msg, "misaligned"), "message '%s'", msg);
    soft_program_free(p);
}

/* A call whose arguments do not match its callee, or its prototype when
 * made through a register, is malformed PTX, named as such. */
Test(ptx_errors, call_arguments_must_match)
{
    static const char *const cases[][2] = {
        { "call.uni (r), f, (a, a);", "argument count does not match the callee" },
        { "call.uni (r), f, (h);", "argument size does not match the callee" },
        { "call.uni (h), f, (a);", "result size does not match the callee" },
        { "call.uni (r), %rd1, (a, a), proto;", "argument count does not match the prototype" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 ".version 9.0\n.target sm_75\n.address_size 64\n"
                 ".func (.param .b32 fr) f(.param .b32 fa)\n{\nst.param.b32 [fr], 1;\nret;\n}\n"
                 ".visible .entry k()\n{\n.reg .b64 %%rd<3>;\n"
                 "proto: .callprototype (.param .b32 _) _ (.param .b32 _);\n"
                 "{\n.param .b32 a;\n.param .b32 r;\n.param .b16 h;\n%s\n}\nret;\n}\n",
                 cases[i][0]);
        soft_program *p = NULL;
        char msg[256];
        CUresult rc = parse_str(text, &p, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_ERROR_INVALID_PTX, "%s: result %d (%s)", cases[i][0], rc, msg);
        cr_assert(strstr(msg, cases[i][1]), "message '%s' does not say '%s'", msg, cases[i][1]);
    }
}

/* proto/copy: the HtoD and DtoH record bodies and the bytes frame's head,
 * written and read back, and every way a peer can break them. */
#include <criterion/criterion.h>
#include <string.h>

#include "proto/copy.h"
#include "proto/job.h"
#include "proto/wire.h"

Test(copy, htod_round_trip_whole_and_split)
{
    uint8_t body[COPY_HTOD_HEAD + 5];
    compress_header h = { .method = COMPRESS_RAW, .original = 5, .stored = 5 };
    copy_htod_write(body, 0x123456789aull, false, &h);
    memcpy(body + COPY_HTOD_HEAD, "abcde", 5);
    copy_htod_head c;
    rig_why why = { "" };
    cr_assert_eq(copy_htod_read(body, sizeof body, sizeof body, &c, &why), 0, "%s", why.text);
    cr_assert(c.dst == 0x123456789aull && !c.quiet && c.chunk.method == COMPRESS_RAW && c.chunk.original == 5);
    cr_assert(c.data == body + COPY_HTOD_HEAD && c.data_len == 5);
    /* Its head alone, the bytes gone straight into a staging buffer. */
    cr_assert_eq(copy_htod_read(body, COPY_HTOD_HEAD, sizeof body, &c, &why), 0, "%s", why.text);
    cr_assert_eq(c.data_len, 0);
    /* A quiet piece says so, and nothing else changes. */
    copy_htod_write(body, 0x123456789aull, true, &h);
    cr_assert_eq(copy_htod_read(body, sizeof body, sizeof body, &c, &why), 0, "%s", why.text);
    cr_assert(c.quiet && c.dst == 0x123456789aull && c.chunk.original == 5 && c.data_len == 5);
}

Test(copy, htod_refusals_name_the_field)
{
    uint8_t body[COPY_HTOD_HEAD + 8];
    copy_htod_head c;
    rig_why why = { "" };
    compress_header h = { .method = COMPRESS_RAW, .original = 8, .stored = 8 };
    copy_htod_write(body, 1, false, &h);
    cr_assert_eq(copy_htod_read(body, COPY_HTOD_HEAD - 1, COPY_HTOD_HEAD - 1, &c, &why), RIG_E_TRUNCATED);
    cr_assert(strstr(why.text, "cuMemcpyHtoDAsync_v2"), "%s", why.text);
    cr_assert_eq(copy_htod_read(body, sizeof body - 1, sizeof body - 1, &c, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "stores 8 bytes, the record carries 7"), "%s", why.text);
    /* A flag no one defined. */
    copy_htod_write(body, 1, true, &h);
    body[8] |= 0x80;
    cr_assert_eq(copy_htod_read(body, sizeof body, sizeof body, &c, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "flags 0x81"), "%s", why.text);
    h = (compress_header){ .method = 9, .original = 8, .stored = 8 };
    copy_htod_write(body, 1, false, &h);
    cr_assert_eq(copy_htod_read(body, sizeof body, sizeof body, &c, &why), RIG_E_MALFORMED);
    cr_assert(strstr(why.text, "method 9"), "%s", why.text);
    h = (compress_header){ .method = COMPRESS_LZ4, .original = 8, .stored = 8 };
    copy_htod_write(body, 1, false, &h);
    cr_assert_eq(copy_htod_read(body, sizeof body, sizeof body, &c, &why), RIG_E_MALFORMED);
    /* Above a copy's chunk, though a compressed chunk could hold it. */
    h = (compress_header){ .method = COMPRESS_LZ4, .original = (uint32_t)JOB_COPY_CHUNK + 1, .stored = 8 };
    copy_htod_write(body, 1, false, &h);
    int rc = copy_htod_read(body, sizeof body, sizeof body, &c, &why);
    cr_assert_eq(rc, RIG_E_TOO_LONG, "%d %s", rc, why.text);
}

Test(copy, dtoh_body)
{
    uint8_t body[COPY_DTOH_BODY];
    copy_dtoh_write(body, 0xabcdef, 4096);
    uint64_t src = 0, len = 0;
    rig_why why = { "" };
    cr_assert_eq(copy_dtoh_read(body, sizeof body, &src, &len, &why), 0, "%s", why.text);
    cr_assert(src == 0xabcdef && len == 4096);
    cr_assert_eq(copy_dtoh_read(body, sizeof body - 1, &src, &len, &why), RIG_E_MALFORMED);
    copy_dtoh_write(body, 1, JOB_COPY_CHUNK + 1);
    cr_assert_eq(copy_dtoh_read(body, sizeof body, &src, &len, &why), RIG_E_TOO_LONG);
    cr_assert(strstr(why.text, "cuMemcpyDtoHAsync_v2"), "%s", why.text);
}

/* Every truncation and single-bit flip of a valid head: refused with a
 * reason or read to fields that say what the bytes say. */
Test(copy, bytes_head_mutations)
{
    uint8_t valid[COPY_BYTES_HEAD + 16], p[sizeof valid];
    compress_header h = { .method = COMPRESS_RAW, .original = 16, .stored = 16 };
    copy_bytes_write(valid, 3, 9, &h);
    memset(valid + COPY_BYTES_HEAD, 0x5a, 16);
    for (size_t len = 0; len <= sizeof valid; len++)
        for (long bit = -1; bit < 8 * COPY_BYTES_HEAD; bit++) {
            memcpy(p, valid, sizeof valid);
            if (bit >= 0)
                p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            copy_bytes_head b;
            rig_why why = { "" };
            int rc = copy_bytes_read(p, len, len, &b, &why);
            if (rc) {
                cr_assert(why.text[0], "refused without a reason");
                continue;
            }
            cr_assert_eq(b.chunk.stored, len - COPY_BYTES_HEAD);
            cr_assert((b.stream == 0) == (b.value == 0));
            cr_assert_eq(b.stream, wire_load_u64(p));
            if (bit < 0)
                cr_assert(len == sizeof valid && b.stream == 3 && b.value == 9 && b.data_len == 16);
        }
}

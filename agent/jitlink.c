/* JIT linking for a proxy context: the program's link inputs arrive in one
 * request, this agent's driver links them for the device (a GPU's driver
 * makes a cubin for its architecture), and the image goes back to the
 * program, which loads it as any module. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/job.h"
#include "proto/job.h"

#define LINK_LOG_MAX 4096

void replay_link(job *j, wire_reader *r)
{
    uint32_t device = wire_get_u32(r), count = wire_get_u32(r);
    if (r->err || count == 0 || count > JOB_LINK_INPUTS_MAX) {
        job_refuse(j, "malformed link request (%u inputs)", count);
        return;
    }
    CUresult rc = job_use_device(j, (int)device);
    if (rc) {
        job_answer(j, rc, NULL, 0);
        return;
    }
    const cuda_driver *d = &j->b->drv;
    if (!d->fn_cuLinkCreate_v2 || !d->fn_cuLinkAddData_v2 || !d->fn_cuLinkComplete || !d->fn_cuLinkDestroy) {
        job_answer(j, CUDA_ERROR_NOT_SUPPORTED, NULL, 0);
        return;
    }
    char log[LINK_LOG_MAX] = "";
    CUjit_option opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *values[] = { log, (void *)(uintptr_t)sizeof log };
    CUlinkState state = NULL;
    rc = d->fn_cuLinkCreate_v2(2, opts, values, &state);
    for (uint32_t i = 0; rc == CUDA_SUCCESS && i < count; i++) {
        uint32_t type = wire_get_u32(r);
        const uint8_t *name;
        size_t name_len = wire_get_string(r, &name, JOB_NAME_MAX);
        uint64_t len = wire_get_u64(r);
        const uint8_t *bytes = len <= wire_remaining(r) ? wire_get_view(r, (size_t)len) : NULL;
        if (r->err || !bytes || len == 0) {
            d->fn_cuLinkDestroy(state);
            job_refuse(j, "malformed input %u of a link request", i);
            return;
        }
        char *cname = strndup((const char *)name, name_len);
        if (!cname) {
            snprintf(log, sizeof log, "agent: no memory for the name of link input %u", i);
            job_log_nomem(j, "the name of link input %u", i);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        /* The driver may keep reading the bytes until the link completes;
         * the frame outlives this call. */
        rc = d->fn_cuLinkAddData_v2(state, (CUjitInputType)type, (void *)bytes, (size_t)len, cname, 0, NULL, NULL);
        free(cname);
    }
    if (rc == CUDA_SUCCESS && wire_reader_finish(r)) {
        d->fn_cuLinkDestroy(state);
        job_refuse(j, "malformed link request (bytes after its inputs)");
        return;
    }
    void *image = NULL;
    size_t size = 0;
    if (rc == CUDA_SUCCESS)
        rc = d->fn_cuLinkComplete(state, &image, &size);
    if (rc == CUDA_SUCCESS) {
        uint8_t *out = malloc(8 + size);
        if (!out) {
            snprintf(log, sizeof log, "agent: no memory for the linked image (%zu bytes)", size);
            job_log_nomem(j, "a linked image of %zu bytes", size);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            wire_store_u64(out, size);
            memcpy(out + 8, image, size);
            job_answer(j, CUDA_SUCCESS, out, 8 + size);
            free(out);
        }
    }
    if (rc != CUDA_SUCCESS) {
        log[sizeof log - 1] = '\0';
        uint8_t out[LINK_LOG_MAX + 8];
        wire_writer w = wire_writer_init(out, sizeof out);
        wire_put_string(&w, log, strlen(log));
        job_answer(j, rc, out, w.off);
    }
    if (state)
        d->fn_cuLinkDestroy(state);
}

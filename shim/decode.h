/* Decoders of what an agent sends the controller: the open answer, answers,
 * abort reasons, words and functions' parameter layouts.
 * Each takes payload bytes, checks every field against its bound and
 * returns 0 with the values, or a negative RIG_E_* with why naming what was
 * wrong. They keep no state, so tests and fuzzers call them directly. */
#ifndef RIG_SHIM_DECODE_H
#define RIG_SHIM_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"
#include "proto/job.h"
#include "proto/records.h"
#include "shim/proxy.h"

/* Every CUresult is below this (CUDA_ERROR_UNKNOWN is 999). */
#define SHIM_RESULT_LIMIT 1000
/* A function's parameters and attributes, as many as an agent reports. */
#define SHIM_PARAMS_MAX 1024
#define SHIM_FUNC_ATTRS_MAX 64
/* The longest driver description kept (agent_link.driver). */
#define SHIM_DRIVER_MAX 127

/* An answer: u8 0, u32 CUresult, outputs | u8 1, string why. */
typedef struct shim_answer {
    bool refused;
    uint32_t result;                 /* below SHIM_RESULT_LIMIT */
    const uint8_t *out;              /* the outputs, inside the payload */
    size_t out_len;
    char why[JOB_REASON_MAX + 1];    /* a refusal's reason, printable */
} shim_answer;

int shim_decode_answer(const uint8_t *p, size_t len, shim_answer *a, rig_why *why);

/* An abort's payload: one string of at most JOB_REASON_MAX bytes, nothing
 * after it; out gets it printable. */
int shim_decode_reason(const uint8_t *p, size_t len, char out[static JOB_REASON_MAX + 1], rig_why *why);

/* The answer to JOB_OP_OPEN (proto/job.h). */
typedef struct shim_open_info {
    uint32_t result;                 /* nonzero: the agent failed; nothing follows */
    bool taken;                      /* the window was free there; devices follow */
    uint32_t driver_version;
    char driver[SHIM_DRIVER_MAX + 1];
    uint32_t count;                  /* devices written to devs[0..count) */
} shim_open_info;

/* Decodes an open answer; with the window taken, fills name, uuid,
 * total_mem, attrs and attr_count of devs[0..count) (count <= room, every
 * other field zeroed). */
int shim_decode_open(const uint8_t *p, size_t len, shim_device *devs, int room, shim_open_info *o, rig_why *why);

/* One triple of a word message (proto/records.def's word). */
typedef rec_word shim_word;

/* Checks a word message (one or more whole triples, each value at most
 * WIRE_U64_MAX) and sets *count. */
int shim_decode_words(const uint8_t *p, size_t len, size_t *count, rig_why *why);
/* The i-th triple of a message shim_decode_words accepted. */
shim_word shim_word_at(const uint8_t *p, size_t i);

/* What the controller knows of a stream when a word names it. */
typedef struct shim_stream_view {
    uint64_t submitted, bytes_submitted;   /* handed over so far */
    uint64_t last_value, last_bytes;       /* the previous word's */
    uint64_t first_copy;                   /* oldest value still waiting for its bytes; 0: none */
} shim_stream_view;

/* Judges a word against its stream: values and byte counts never go
 * backwards nor beyond what was handed over, and a value is reached only
 * after the bytes of every copy up to it arrived. */
int shim_check_word(const shim_word *w, const shim_stream_view *v, rig_why *why);

/* A resolved function's answer: u32 n, n x (u32 offset, u32 size), u32 na,
 * na x i32 attributes. */
typedef struct shim_param_info {
    uint32_t count;                  /* at most SHIM_PARAMS_MAX */
    uint32_t bytes;                  /* end of the last parameter, at most JOB_PARAMS_MAX */
    proxy_param *params;             /* count entries (at least one allocated), malloc'd */
    uint32_t attr_count;             /* at most SHIM_FUNC_ATTRS_MAX */
    int *attrs;                      /* max(attr_count, CU_FUNC_ATTRIBUTE_MAX) entries, zero past
                                        attr_count, malloc'd */
} shim_param_info;

/* On success the caller owns params and attrs (shim_param_info_free). */
int shim_decode_param_info(const uint8_t *p, size_t len, shim_param_info *pi, rig_why *why);
void shim_param_info_free(shim_param_info *pi);

#endif

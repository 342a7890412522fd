/* The generic face of every exported driver symbol: a weak definition per
 * entry of proto/cuda_ops.def that sends a call touching a proxy to a clear
 * refusal and everything else to the local driver, unchanged. The core
 * replaces a symbol by defining it with SHIM_EXPORT (a strong definition
 * wins the link). A call on a proxy whose operation the table marks 'G'
 * goes the generic way (shim/generic.c, replayed by the agent via libffi). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "shim/core.h"
#include "shim/generic.h"
#include "shim/local_driver.h"
#include "shim/log.h"

/* Argument counting and mapping over RIG_ARGS_<sym> (at most 20 parameters;
 * the table's widest has 16). Empty lists count 0 (GNU ## before
 * __VA_ARGS__). */
#define EXP_NARGS(...) EXP_NARGS_(_, ##__VA_ARGS__, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, \
                                  9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define EXP_NARGS_(_, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, \
                   a17, a18, a19, a20, n, ...)                                                  \
    n
#define EXP_CAT(a, b) EXP_CAT_(a, b)
#define EXP_CAT_(a, b) a##b
#define EXP_APPLY(m, args) m args

/* EXP_ADDRS(a, b, c) -> , &a, &b, &c */
#define EXP_ADDRS(...) EXP_CAT(EXP_A, EXP_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define EXP_A0()
#define EXP_A1(x) , (const void *)&x
#define EXP_A2(x, ...) EXP_A1(x) EXP_A1(__VA_ARGS__)
#define EXP_A3(x, ...) EXP_A1(x) EXP_A2(__VA_ARGS__)
#define EXP_A4(x, ...) EXP_A1(x) EXP_A3(__VA_ARGS__)
#define EXP_A5(x, ...) EXP_A1(x) EXP_A4(__VA_ARGS__)
#define EXP_A6(x, ...) EXP_A1(x) EXP_A5(__VA_ARGS__)
#define EXP_A7(x, ...) EXP_A1(x) EXP_A6(__VA_ARGS__)
#define EXP_A8(x, ...) EXP_A1(x) EXP_A7(__VA_ARGS__)
#define EXP_A9(x, ...) EXP_A1(x) EXP_A8(__VA_ARGS__)
#define EXP_A10(x, ...) EXP_A1(x) EXP_A9(__VA_ARGS__)
#define EXP_A11(x, ...) EXP_A1(x) EXP_A10(__VA_ARGS__)
#define EXP_A12(x, ...) EXP_A1(x) EXP_A11(__VA_ARGS__)
#define EXP_A13(x, ...) EXP_A1(x) EXP_A12(__VA_ARGS__)
#define EXP_A14(x, ...) EXP_A1(x) EXP_A13(__VA_ARGS__)
#define EXP_A15(x, ...) EXP_A1(x) EXP_A14(__VA_ARGS__)
#define EXP_A16(x, ...) EXP_A1(x) EXP_A15(__VA_ARGS__)
#define EXP_A17(x, ...) EXP_A1(x) EXP_A16(__VA_ARGS__)
#define EXP_A18(x, ...) EXP_A1(x) EXP_A17(__VA_ARGS__)
#define EXP_A19(x, ...) EXP_A1(x) EXP_A18(__VA_ARGS__)
#define EXP_A20(x, ...) EXP_A1(x) EXP_A19(__VA_ARGS__)

/* True for the kinds that are handles of driver objects (proto/cuda_ops.h). */
static bool is_handle_kind(char k)
{
    switch (k) {
    case 'C': case 'M': case 'F': case 'S': case 'E': case 'L': case 'K':
    case 'G': case 'N': case 'X': case 'A': case 'P': case 'R': case 'T':
        return true;
    default:
        return false;
    }
}

/* The generic cuCtxGetDevice (or the core's), for device labels. */
__attribute__((weak, visibility("default"))) CUresult shim_export_cuCtxGetDevice
    RIG_SIG_cuCtxGetDevice __asm__("cuCtxGetDevice");

#define EXP_LABEL 96

/* The name of device dev for a message: the core's label when it is the
 * current context's device, else its ordinal. */
static void device_label(CUdevice dev, char label[static EXP_LABEL])
{
    CUdevice cur = -1;
    if (shim_export_cuCtxGetDevice(&cur) == CUDA_SUCCESS && cur == dev)
        snprintf(label, EXP_LABEL, "%s", shim_current_device_label());
    else
        snprintf(label, EXP_LABEL, "CUDA:%d", dev);
}

/* True when ordinal dev is a proxy device: proxies follow the local ones. */
static bool is_proxy_device(CUdevice dev)
{
    if (dev < 0 || dev >= shim_device_count())
        return false;
    const shim_driver *d = shim_local_driver();
    int local = 0;
    if (d && d->fn_cuDeviceGetCount && d->fn_cuDeviceGetCount(&local) != CUDA_SUCCESS)
        local = 0;
    return dev >= local;
}

/* True when the call belongs to a proxy: one of its handle or device ('D')
 * arguments is a proxy's, or none names an object (handles all NULL or the
 * stream pseudo-handles CU_STREAM_LEGACY / CU_STREAM_PER_THREAD) and the
 * current context is a proxy's. args[i] points at parameter i. On true,
 * label names the device for the message. */
static bool goes_to_proxy(const char *kinds, const void *const *args, char label[static EXP_LABEL])
{
    bool named = false;
    for (size_t i = 0; kinds[i]; i++) {
        if (kinds[i] == 'D') {
            CUdevice dev = *(const CUdevice *)args[i];
            if (is_proxy_device(dev)) {
                device_label(dev, label);
                return true;
            }
            named = true;
            continue;
        }
        if (!is_handle_kind(kinds[i]))
            continue;
        const void *h = *(const void *const *)args[i];
        if ((uintptr_t)h <= 2)   /* NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
            continue;
        if (shim_is_proxy_handle(h)) {
            snprintf(label, EXP_LABEL, "%s", shim_current_device_label());
            return true;
        }
        named = true;
    }
    if (!named && shim_current_is_proxy()) {
        snprintf(label, EXP_LABEL, "%s", shim_current_device_label());
        return true;
    }
    return false;
}

/* Before a refusal: clears every output scalar and output handle the call
 * names, so that a caller reading them despite the error (cuBLAS reads a
 * refused cuStreamGetCaptureInfo_v2's status and dependency count) finds
 * zeros (no capture, no handle, nothing), never what its stack held. */
static void clear_outputs(const char *kinds, const void *const *args)
{
    for (size_t i = 0; kinds[i]; i++) {
        size_t n = kinds[i] == 'O' ? sizeof(void *) : kinds[i] >= '1' && kinds[i] <= '8' ? (size_t)(kinds[i] - '0') : 0;
        void *out = n ? *(void *const *)args[i] : NULL;
        if (out)
            memset(out, 0, n);
    }
}

/* Where the generic path refuses: logs once and gives the error to return. */
static CUresult refuse_proxy(const char *sym, const char *label, const char *kinds, const void *const *args)
{
    clear_outputs(kinds, args);
    shim_log_unsupported_once(sym, label);
    return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult refuse_local(const char *sym, const shim_driver *d, const char *kinds, const void *const *args)
{
    clear_outputs(kinds, args);
    if (!d)
        return CUDA_ERROR_NO_DEVICE;
    shim_log_unsupported_once(sym, "the local driver");
    return CUDA_ERROR_NOT_FOUND;
}

/* The generic export. exp_args_[0] is a placeholder so that a parameterless
 * symbol still has an array; parameter i is exp_args_[i + 1] (names that no
 * generated parameter uses). The static assertion keeps the kinds string and
 * the parameter list in step. */
#define RIG_CUDA_OP(op, sym, base, ver, variant, kinds, served)                         \
    __attribute__((weak, visibility("default"))) CUresult shim_export_##sym             \
        RIG_SIG_##sym __asm__(#sym);                                                    \
    CUresult shim_export_##sym RIG_SIG_##sym                                            \
    {                                                                                   \
        _Static_assert(sizeof(kinds) - 1 == EXP_APPLY(EXP_NARGS, RIG_ARGS_##sym),       \
                       #sym ": kinds and parameters differ");                           \
        const void *const exp_args_[] = { NULL EXP_APPLY(EXP_ADDRS, RIG_ARGS_##sym) };  \
        char exp_label_[EXP_LABEL];                                                     \
        const shim_driver *exp_d_;                                                      \
        CUresult exp_rc_;                                                               \
        if (goes_to_proxy(kinds, exp_args_ + 1, exp_label_))                            \
            exp_rc_ = served == 'G'                                                     \
                          ? shim_generic_call(cuda_op_by_number(op), exp_args_ + 1)     \
                          : refuse_proxy(#sym, exp_label_, kinds, exp_args_ + 1);                             \
        else if (!(exp_d_ = shim_local_driver()) || !exp_d_->fn_##sym)                  \
            exp_rc_ = refuse_local(#sym, exp_d_, kinds, exp_args_ + 1);                                       \
        else                                                                            \
            exp_rc_ = exp_d_->fn_##sym RIG_ARGS_##sym;                                  \
        if (__builtin_expect(shim_tracing, 0))                                          \
            shim_trace(#sym, exp_rc_);                                                  \
        return exp_rc_;                                                                 \
    }
#include "proto/cuda_ops.def"
#undef RIG_CUDA_OP

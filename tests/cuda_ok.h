/* OK(call): a driver call in a test must succeed; otherwise the test stops
 * naming the call and the error it gave. */
#ifndef RIG_TESTS_CUDA_OK_H
#define RIG_TESTS_CUDA_OK_H

#include <criterion/criterion.h>
#include <cuda.h>

#define OK(call)                                                                              \
    do {                                                                                      \
        CUresult ok_rc_ = (call);                                                             \
        const char *ok_name_ = NULL;                                                          \
        if (ok_rc_ != CUDA_SUCCESS)                                                           \
            cuGetErrorName(ok_rc_, &ok_name_);                                                \
        cr_assert_eq(ok_rc_, CUDA_SUCCESS, "%s gave %s (%d)", #call, ok_name_ ? ok_name_ : "?", \
                     (int)ok_rc_);                                                            \
    } while (0)

#endif

/* cuGetErrorName and cuGetErrorString from cuda.h's CUresult list: they work
 * with no driver at all, as a program reports why it has none. */
#include <stddef.h>

#include "shim/core.h"

typedef struct error_name {
    CUresult code;
    const char *name;
    const char *text;
} error_name;

static const error_name errors[] = {
#define X(name, text) { name, #name, text },
#include "shim/error_table.h"
#undef X
};

static const error_name *find(CUresult code)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code)
            return &errors[i];
    return NULL;
}

SHIM_EXPORT(cuGetErrorName)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const error_name *e = find(error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SHIM_EXPORT(cuGetErrorString)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const error_name *e = find(error);
    *pStr = e ? e->text : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Functions on proxies, for launches. */
#ifndef RIG_SHIM_MODULE_H
#define RIG_SHIM_MODULE_H

#include <cuda.h>

#include "shim/proxy.h"

/* Makes sure device's agent has f's module loaded and knows f, fetching its
 * parameter layout and attributes the first time. */
CUresult shim_function_ready(proxy_obj *f, int device);

/* Makes sure device's agent has module or library m loaded. */
CUresult shim_module_ready(proxy_obj *m, int device);

#endif

/* The real driver behind local devices, loaded by path in its own symbol
 * scope so none of its symbols bind to the shim's, and never the shim. */
#ifndef RIG_SHIM_LOCAL_DRIVER_H
#define RIG_SHIM_LOCAL_DRIVER_H

#include "proto/cuda_driver.h"

/* fn_<symbol> pointers, one per table entry (proto/cuda_driver.h). */
typedef cuda_driver shim_driver;

/* The local driver, loaded on first call: RIG_LOCAL_DRIVER=PATH ("none":
 * no local driver), else the system's libcuda.so.1 when it is not the shim.
 * NULL when there is none (then the program has no local devices). */
const shim_driver *shim_local_driver(void);

#endif

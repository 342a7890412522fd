/* Weak stand-ins for the engine's entry points (engine.h), so the driver
 * layer links and its non-kernel parts work while the engine is absent or
 * incomplete. The engine's archive is linked whole, so its definitions
 * replace every one of these. Each refuses with CUDA_ERROR_NOT_SUPPORTED. */
#include "softgpu/driver.h"

#include <stdio.h>

#define WEAK __attribute__((weak))

WEAK CUresult soft_program_parse(const char *ptx, size_t len, soft_program **out, char *msg, size_t msglen)
{
    (void)ptx;
    (void)len;
    (void)out;
    snprintf(msg, msglen, "softgpu was built without its PTX engine");
    return CUDA_ERROR_NOT_SUPPORTED;
}

WEAK void soft_program_free(soft_program *prog) { (void)prog; }
WEAK uint32_t soft_program_entry_count(const soft_program *prog) { (void)prog; return 0; }
WEAK const soft_entry_info *soft_program_entry(const soft_program *prog, uint32_t i) { (void)prog; (void)i; return NULL; }
WEAK int soft_program_find_entry(const soft_program *prog, const char *name) { (void)prog; (void)name; return -1; }
WEAK uint32_t soft_program_global_count(const soft_program *prog) { (void)prog; return 0; }
WEAK const soft_global_info *soft_program_global(const soft_program *prog, uint32_t i) { (void)prog; (void)i; return NULL; }
WEAK void soft_program_bind_global(soft_program *prog, uint32_t i, uint64_t addr) { (void)prog; (void)i; (void)addr; }

WEAK CUresult soft_program_launch(soft_program *prog, const soft_launch *launch, char *msg, size_t msglen)
{
    (void)prog;
    (void)launch;
    snprintf(msg, msglen, "softgpu was built without its PTX engine");
    return CUDA_ERROR_NOT_SUPPORTED;
}

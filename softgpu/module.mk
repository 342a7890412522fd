# softgpu: build/libcudasoft.so, a CPU implementation of the driver API.
# The engine (PTX parse and execute) and the driver layer each keep their own
# rules; this file only joins them.
include softgpu/engine.mk
include softgpu/driver.mk

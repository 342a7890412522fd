# softgpu engine: $(B)/libsoftengine.a, the PTX parser and interpreter
# (softgpu/ptx_*.c) behind softgpu/engine.h. The driver layer links it into
# libcudasoft.so. Its tests run the kernels of tests/kernels on the engine
# alone, without the driver layer.
include tests/kernels/module.mk

SOFT_ENGINE_SRC := $(wildcard softgpu/ptx_*.c)
SOFT_ENGINE_OBJ := $(SOFT_ENGINE_SRC:%.c=$(B)/%.o)
SOFT_ENGINE_LIB := $(B)/libsoftengine.a

$(SOFT_ENGINE_LIB): $(SOFT_ENGINE_OBJ)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(SOFT_ENGINE_LIB)

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

# The interpreter's hot loops want -O3; directed rounding needs fenv honoured.
$(B)/softgpu/ptx_exec.o: CFLAGS += -O3
$(B)/softgpu/ptx_math.o: CFLAGS += -frounding-math

# Engine tests: the kernels above, parsed and run without the driver layer.
SOFT_ENGINE_TESTS := $(B)/tests/test_ptx_kernels $(B)/tests/test_ptx_isa $(B)/tests/test_ptx_errors \
                     $(B)/tests/test_ptx_mma
$(B)/tests/test_ptx_%.o: tests/test_ptx_util.h
$(SOFT_ENGINE_TESTS): $(B)/tests/test_ptx_%: $(B)/tests/test_ptx_%.o $(SOFT_ENGINE_LIB) | $(KERNELS)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(SOFT_ENGINE_LIB) -lcriterion -lpthread -lm

CHECK_TESTS += $(SOFT_ENGINE_TESTS)

# Speed: thread-instructions per second (the owner hooks this into make bench).
SOFT_ENGINE_BENCH := $(B)/tests/bench_engine
$(SOFT_ENGINE_BENCH): $(B)/tests/bench_engine.o $(SOFT_ENGINE_LIB) | $(KERNELS)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(SOFT_ENGINE_LIB) -lpthread -lm

.PHONY: softgpu-bench
softgpu-bench: $(SOFT_ENGINE_BENCH)
	$(Q)$(SOFT_ENGINE_BENCH)
ALL_TARGETS += $(SOFT_ENGINE_BENCH)

# softgpu driver layer: $(B)/libcudasoft.so (SONAME libcudasoft.so), the CUDA
# driver API on the CPU: devices, contexts, memory, VMM, streams, events,
# fatbins, modules and launches, with the PTX engine ($(SOFT_ENGINE_LIB),
# softgpu/engine.mk) linked in; --no-undefined makes a missing engine entry
# point a link error rather than a failure at load time; nodelete keeps
# dlclose from unmapping code that stream workers still run.
SOFT_DRIVER_SRC := $(filter-out softgpu/ptx_% softgpu/engine_%,$(wildcard softgpu/*.c))
SOFT_DRIVER_OBJ := $(SOFT_DRIVER_SRC:%.c=$(B)/%.o)
SOFT_LIB        := $(B)/libcudasoft.so
SOFT_LDLIBS     := -lzstd -llz4 -lpthread -lm -ldl

$(SOFT_LIB): $(SOFT_DRIVER_OBJ) $(SOFT_ENGINE_LIB) $(B)/softgpu/exports.map softgpu/driver.mk
	$(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libcudasoft.so -Wl,--no-undefined -Wl,-z,nodelete \
		-Wl,--version-script=$(B)/softgpu/exports.map $(LDFLAGS) -o $@ \
		$(SOFT_DRIVER_OBJ) $(SOFT_ENGINE_LIB) $(SOFT_LDLIBS)

# Only driver entry points leave the library, whatever else has default
# visibility inside it (an ifunc resolver of a target_clones function, say).
$(B)/softgpu/exports.map: softgpu/driver.mk
	$(Q)mkdir -p $(dir $@)
	$(Q)printf '{\n  global: cu*;\n  local: *;\n};\n' > $@

ALL_TARGETS += $(SOFT_LIB)

# softgpu as libcuda.so.1 in a directory of its own: LD_LIBRARY_PATH=there
# runs a CUDA program on it directly, with no shim in front.
$(B)/softgpu-direct/libcuda.so.1: | $(SOFT_LIB)
	$(Q)mkdir -p $(dir $@)
	$(Q)ln -sfn ../libcudasoft.so $@
ALL_TARGETS += $(B)/softgpu-direct/libcuda.so.1

# Tests: test_fatbin drives the parser directly (exact-size buffers under
# ASan); test_softgpu_* go through the library's exported API, as the agent does.
SOFT_TEST_NAMES := $(patsubst tests/test_%.c,%,$(wildcard tests/test_softgpu_*.c))
SOFT_TESTS      := $(SOFT_TEST_NAMES:%=$(B)/tests/test_%)
SOFT_TEST_DEPS  := $(SOFT_LIB) $(if $(KERNEL_FATBINS),$(KERNEL_FATBINS)) $(B)/softgpu-tests/sass_only.fatbin

$(SOFT_TESTS): $(B)/tests/test_%: $(B)/tests/test_%.o $(B)/tests/support.o $(SOFT_TEST_DEPS)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(SOFT_LIB) -Wl,-rpath,$(abspath $(B)) -lcriterion -lpthread -ldl -lm

$(B)/tests/test_fatbin: $(B)/tests/test_fatbin.o $(B)/tests/support.o $(B)/softgpu/fatbin.o $(B)/softgpu/log.o $(B)/softgpu/logs.o $(B)/softgpu-tests/sass_only.fatbin $(KERNEL_FATBINS)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lcriterion -lzstd -llz4 -lpthread

# A module with SASS only (no PTX): softgpu must refuse it clearly.
$(B)/softgpu-tests/sass_only.fatbin: tests/softgpu/sass_only.cu
	$(call say,NVCC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(NVCC) -gencode arch=compute_86,code=sm_86 -fatbin -o $@ $<

CHECK_TESTS += $(B)/tests/test_fatbin $(SOFT_TESTS)

# shim: build/librigshim.so (SONAME libcuda.so.1), the driver the program
# loads. Every shim/*.c is part of it.
SHIM_SRC := $(wildcard shim/*.c)
SHIM_OBJ := $(SHIM_SRC:%.c=$(B)/%.o)
SHIM_LIB := $(B)/librigshim.so

$(SHIM_LIB): $(SHIM_OBJ) $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs $(LDFLAGS) -o $@ $(SHIM_OBJ) $(PROTO_LIB) \
	  -lsodium -llz4 -lpthread -ldl

ALL_TARGETS += $(SHIM_LIB)

# The shim's face: CUDA programs run through the preloaded shim on softgpu,
# MD2's unit test, and the face test, which loads the built library the way a
# program does (it links nothing of the shim). The programs (nvcc, never
# sanitized) always run with the plain build's shim and softgpu: under ASan a
# process cannot dlopen the local driver with RTLD_DEEPBIND, so with SAN=1 the
# sanitized shim is exercised in-process (dlopen, no local driver) and a
# sub-make provides the plain libraries for the children. Refusals on proxies
# run through a real agent (tests/harness.c), as test_remote does.
include tests/programs/module.mk

$(B)/tests/test_md2: $(B)/tests/test_md2.o $(B)/shim/md2.o
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcriterion

$(B)/tests/test_shim_face.o: CFLAGS += -DCUDA_STUB='"$(CUDA_HOME)/lib64/stubs/libcuda.so"' \
  -DRIG_PLAIN_BUILD_DIR='"$(abspath build)"'
$(B)/tests/test_shim_face: $(B)/tests/test_shim_face.o $(B)/tests/harness.o $(B)/tests/support.o $(PROTO_LIB) \
  | $(SHIM_LIB) $(B)/rig-agent $(PROGRAMS) $(if $(filter 1,$(SAN)),shim-face-plain,$(B)/libcudasoft.so $(B)/softgpu-direct/libcuda.so.1 $(B)/kernels/vecadd.default.fatbin)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -lcriterion -ldl $(PROTO_LDLIBS)

.PHONY: shim-face-plain
shim-face-plain:
	$(Q)$(MAKE) -s --no-print-directory SAN= build/librigshim.so build/libcudasoft.so build/softgpu-direct/libcuda.so.1

CHECK_TESTS += $(B)/tests/test_md2 $(B)/tests/test_shim_face

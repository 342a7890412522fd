# shim: build/librigshim.so (SONAME libcuda.so.1), the driver the program
# loads. Every shim/*.c is part of it.
SHIM_SRC := $(wildcard shim/*.c)
SHIM_OBJ := $(SHIM_SRC:%.c=$(B)/%.o)
SHIM_LIB := $(B)/librigshim.so

$(SHIM_LIB): $(SHIM_OBJ) $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs $(LDFLAGS) -o $@ $(SHIM_OBJ) $(PROTO_LIB) \
	  -lsodium -lpthread -ldl

ALL_TARGETS += $(SHIM_LIB)

# The shim's face: CUDA programs run through the preloaded shim on softgpu,
# MD2's unit test, and the face test, which loads the built library the way a
# program does (it links nothing of the shim). Under SAN=1 the children run
# with the sanitizer runtimes preloaded before the sanitized shim.
include tests/programs/module.mk

$(B)/tests/test_md2: $(B)/tests/test_md2.o $(B)/shim/md2.o
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcriterion

SHIM_SAN_PRELOAD := $(if $(filter 1,$(SAN)),$(shell $(CC) -print-file-name=libasan.so) $(shell $(CC) -print-file-name=libubsan.so))
$(B)/tests/test_shim_face.o: CFLAGS += -DCUDA_STUB='"$(CUDA_HOME)/lib64/stubs/libcuda.so"' \
  -DSHIM_SAN_PRELOAD='"$(strip $(SHIM_SAN_PRELOAD))"'
$(B)/tests/test_shim_face: $(B)/tests/test_shim_face.o $(B)/tests/support.o $(PROTO_LIB) \
  | $(SHIM_LIB) $(B)/libcudasoft.so $(PROGRAMS)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -lcriterion -ldl $(PROTO_LDLIBS)

CHECK_TESTS += $(B)/tests/test_md2 $(B)/tests/test_shim_face

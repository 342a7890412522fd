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

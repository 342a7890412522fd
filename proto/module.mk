# proto: build/librigproto.a, the wire library (no CUDA effects, no threads).
PROTO_SRC := $(wildcard proto/*.c)
PROTO_OBJ := $(PROTO_SRC:%.c=$(B)/%.o)
PROTO_LIB := $(B)/librigproto.a
PROTO_LDLIBS := -lsodium -llz4 -ldl

$(PROTO_LIB): $(PROTO_OBJ)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(PROTO_LIB)

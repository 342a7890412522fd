# tests: one Criterion binary per tests/test_<module>.c. Test objects see
# RIG_BUILD_DIR and RIG_SOURCE_DIR so they find built programs and data.
$(B)/tests/%.o: CFLAGS += $(TEST_CFLAGS)

# proto's tests link the proto library only.
PROTO_TEST_NAMES := $(patsubst tests/test_%.c,%,$(wildcard $(addprefix tests/test_,$(addsuffix .c,wire frame hmac handshake key names))))
PROTO_TESTS := $(PROTO_TEST_NAMES:%=$(B)/tests/test_%)

$(PROTO_TESTS): $(B)/tests/test_%: $(B)/tests/test_%.o $(B)/tests/support.o $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcriterion $(PROTO_LDLIBS)

CHECK_TESTS += $(PROTO_TESTS)

# The handshake vectors come from Python's hmac and hashlib, never from our C.
tests/vectors/handshake.txt: scripts/gen-handshake-vectors
	$(PYTHON) scripts/gen-handshake-vectors > $@

-include tests/fuzz/module.mk

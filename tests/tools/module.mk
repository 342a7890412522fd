# tests/tools: helpers the end-to-end tests start as processes of their own.
# rig-relay is the fault-injecting relay of the fault tests (tests/tools/relay.c);
# test_faults runs programs through it and through a real agent on loopback.
RELAY_BIN := $(B)/tests/tools/rig-relay

$(RELAY_BIN): $(B)/tests/tools/relay.o
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^

$(B)/tests/test_faults.o: CFLAGS += -DRIG_RELAY='"$(abspath $(RELAY_BIN))"'

$(B)/tests/test_faults: $(B)/tests/test_faults.o $(B)/tests/harness.o $(B)/tests/support.o \
  | $(RELAY_BIN) e2e-programs $(SHIM_LIB) $(AGENT_BIN) $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lcriterion

ALL_TARGETS += $(RELAY_BIN)
CHECK_TESTS += $(B)/tests/test_faults

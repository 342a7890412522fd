# tests/tools: helpers the end-to-end tests start as processes of their own.
# rig-relay is the fault-injecting relay of the fault tests (tests/tools/relay.c);
# test_faults runs programs through it and through a real agent on loopback.
RELAY_BIN := $(B)/tests/tools/rig-relay

$(RELAY_BIN): $(B)/tests/tools/relay.o
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^

$(B)/tests/test_faults.o: CFLAGS += -DRIG_RELAY='"$(abspath $(RELAY_BIN))"'

$(B)/tests/test_faults: $(B)/tests/test_faults.o $(B)/tests/harness.o $(B)/tests/watch.o $(B)/tests/support.o \
  | $(RELAY_BIN) e2e-programs $(SHIM_LIB) $(AGENT_BIN) $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lcriterion

ALL_TARGETS += $(RELAY_BIN)
CHECK_TESTS += $(B)/tests/test_faults

# rig-hostile: idle, dripping, flooding and key-holding hostile peers of an
# agent (tests/tools/hostile.c) for test_service and the soak (issue 12).
HOSTILE_BIN := $(B)/tests/tools/rig-hostile

$(HOSTILE_BIN): $(B)/tests/tools/hostile.o $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PROTO_LDLIBS)

ALL_TARGETS += $(HOSTILE_BIN)

# test_service: the agent as a service (issue 12), with rig-hostile.
$(B)/tests/test_service.o: CFLAGS += -DRIG_HOSTILE='"$(abspath $(HOSTILE_BIN))"'

$(B)/tests/test_service: $(B)/tests/test_service.o $(B)/tests/harness.o $(B)/tests/watch.o $(B)/tests/support.o \
  | $(HOSTILE_BIN) e2e-programs $(SHIM_LIB) $(AGENT_BIN) $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lcriterion

CHECK_TESTS += $(B)/tests/test_service

# rig-ptx-census: how much of a CUDA library's PTX softgpu loads (issue 14):
# `build/tests/tools/rig-ptx-census /usr/local/cuda/lib64/libcublas.so ...`.
# Not run by make check (minutes over the toolkit's libraries).
CENSUS_BIN := $(B)/tests/tools/rig-ptx-census

$(CENSUS_BIN): $(B)/tests/tools/ptx_census.o $(B)/softgpu/fatbin.o $(B)/softgpu/log.o $(B)/softgpu/logs.o $(SOFT_ENGINE_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lzstd -llz4 -lpthread -lm

ALL_TARGETS += $(CENSUS_BIN)

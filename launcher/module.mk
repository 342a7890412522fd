# launcher: build/rig, the one command (run, agent, key, probe, ls). `rig
# agent` is rig-agent's own main, linked from build/libagent.a, so build/rig
# sits beside build/libcudasoft.so and build/librigshim.so and finds both.
LAUNCHER_SRC := $(wildcard launcher/*.c)
LAUNCHER_OBJ := $(LAUNCHER_SRC:%.c=$(B)/%.o)
LAUNCHER_BIN := $(B)/rig

$(LAUNCHER_BIN): $(LAUNCHER_OBJ) $(AGENT_LIB) $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(LAUNCHER_OBJ) $(AGENT_LIB) $(PROTO_LIB) $(AGENT_LDLIBS) $(PROTO_LDLIBS)

ALL_TARGETS += $(LAUNCHER_BIN)

# End to end: rig run through agents it starts locally and over ssh (a
# private sshd on a loopback port, started by the test; see tests/tools).
# The targets file, the JSON reader and shell quoting are also tested
# in-process.
$(B)/tests/test_launcher: $(B)/tests/test_launcher.o $(B)/tests/harness.o $(B)/tests/support.o \
  $(B)/launcher/targets.o $(B)/launcher/json.o $(B)/launcher/quote.o $(B)/launcher/placement.o $(PROTO_LIB) | e2e-programs $(LAUNCHER_BIN) $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -lcriterion $(PROTO_LDLIBS)

CHECK_TESTS += $(B)/tests/test_launcher

# rig run --slurm against a real slurmctld, two slurmd and munged started by
# the test in network namespaces (tests/tools/slurm-start).
$(B)/tests/test_slurm: $(B)/tests/test_slurm.o $(B)/tests/netns.o $(B)/tests/harness.o $(B)/tests/support.o \
  | e2e-programs $(SHIM_LIB) $(LAUNCHER_BIN) $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lcriterion

CHECK_TESTS += $(B)/tests/test_slurm

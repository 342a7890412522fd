# tests: one Criterion binary per tests/test_<module>.c. Test objects see
# RIG_BUILD_DIR and RIG_SOURCE_DIR so they find built programs and data.
$(B)/tests/%.o: CFLAGS += $(TEST_CFLAGS)

# proto's tests link the proto library only.
PROTO_TEST_NAMES := $(patsubst tests/test_%.c,%,$(wildcard $(addprefix tests/test_,$(addsuffix .c,wire frame hmac handshake key names cuda_ops served conn images texref_wire docs_wire mesh rail compress records copy))))
PROTO_TESTS := $(PROTO_TEST_NAMES:%=$(B)/tests/test_%)

$(PROTO_TESTS): $(B)/tests/test_%: $(B)/tests/test_%.o $(B)/tests/support.o $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcriterion $(PROTO_LDLIBS)

CHECK_TESTS += $(PROTO_TESTS)
# The served test reads the built shim.
$(B)/tests/test_served: | $(SHIM_LIB)
$(B)/tests/test_cuda_ops.o: CFLAGS += -DCUDA_STUB='"$(CUDA_HOME)/lib64/stubs/libcuda.so"'

# The handshake vectors come from Python's hmac and hashlib, never from our
# C; check that the committed copy is what the script writes today.
.PHONY: check-vectors
check-vectors:
	$(Q)$(PYTHON) scripts/gen-handshake-vectors | cmp -s - tests/vectors/handshake.txt || \
	  { echo "tests/vectors/handshake.txt differs from scripts/gen-handshake-vectors' output" >&2; exit 1; }
CHECK_STEPS += check-vectors

include tests/fuzz/module.mk

# The CUDA operation table must be what the generator writes from the
# toolkit's headers today.
.PHONY: check-cuda-table
check-cuda-table:
	$(Q)$(PYTHON) scripts/gen-cuda-table --check $(CUDA_HOME)
CHECK_STEPS += check-cuda-table

# End to end: programs through the shim and a real agent on loopback. The
# programs are never sanitized (a sub-make builds them in the plain build);
# under SAN=1 the shim, the agent and softgpu are this build's sanitized
# ones, with the sanitizer runtime preloaded into the programs.
ifeq ($(SAN),1)
$(B)/tests/harness.o $(B)/tests/test_install.o: CFLAGS += -DRIG_ASAN_RUNTIME='"$(shell $(CC) -print-file-name=libasan.so)"'
endif
$(B)/tests/test_remote: $(B)/tests/test_remote.o $(B)/tests/harness.o $(B)/tests/support.o \
  | e2e-programs $(SHIM_LIB) $(AGENT_BIN) $(B)/libcudasoft.so $(B)/tests/test_softgpu_kernels \
    $(B)/tests/test_softgpu_launch
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lcriterion

.PHONY: e2e-programs
e2e-programs:
	$(Q)$(MAKE) --no-print-directory SAN= programs build/libcudasoft.so build/librigshim.so

CHECK_TESTS += $(B)/tests/test_remote

# The agent's replay, in process on softgpu: every truncation and many bit
# flips of each frame of a small valid job.
$(B)/tests/test_agent_replay: $(B)/tests/test_agent_replay.o $(B)/tests/replay_rig.o $(AGENT_LIB) $(PROTO_LIB) \
  | $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -lcriterion $(AGENT_LDLIBS)
CHECK_TESTS += $(B)/tests/test_agent_replay

# Fault tests: the rig-relay tool and test_faults (issue 5).
include tests/tools/module.mk

# The CUresult table's two copies (shim/, softgpu/) are what the generator
# writes from cuda.h today.
.PHONY: check-error-table
check-error-table:
	$(Q)$(PYTHON) scripts/gen-error-table --check $(CUDA_HOME)
CHECK_STEPS += check-error-table

# The soak (issue 12): SOAK_JOBS jobs (default 1000) of every kind against
# one agent; not part of make check.
.PHONY: soak
soak: $(ALL_TARGETS)
	$(Q)tests/soak $(B)

# The shim's decoders of agent-sent payloads, pure functions tested alone.
$(B)/tests/test_shim_decode: $(B)/tests/test_shim_decode.o $(B)/shim/decode.o $(B)/tests/support.o $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcriterion $(PROTO_LDLIBS)

CHECK_TESTS += $(B)/tests/test_shim_decode

# A hostile agent end to end: programs through the shim against a relay in
# the test that holds the key and rewrites one of a real agent's frames.
$(B)/tests/test_hostile_agent: $(B)/tests/test_hostile_agent.o $(B)/tests/harness.o $(B)/tests/support.o \
  $(PROTO_LIB) | e2e-programs $(SHIM_LIB) $(AGENT_BIN) $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -lcriterion -lpthread $(PROTO_LDLIBS)

CHECK_TESTS += $(B)/tests/test_hostile_agent

# Allocation failures (issue 18): the agent's replay and the decoders of
# proto and the shim with each allocation of a thread made to fail in turn;
# --wrap sends the allocations of the objects linked here through
# tests/failing_alloc.c.
FAILING_ALLOC_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup \
  -Wl,--wrap=aligned_alloc,--wrap=posix_memalign,--wrap=free
$(B)/tests/test_nomem: $(B)/tests/test_nomem.o $(B)/tests/failing_alloc.o $(B)/tests/replay_rig.o \
  $(B)/shim/decode.o $(AGENT_LIB) $(PROTO_LIB) | $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $(FAILING_ALLOC_WRAP) -o $@ $(filter %.o %.a,$^) -lcriterion $(AGENT_LDLIBS)
CHECK_TESTS += $(B)/tests/test_nomem

# Separate hosts as network namespaces (tests/netns.c): needs root, skips
# with the reason elsewhere.
$(B)/tests/test_netns: $(B)/tests/test_netns.o $(B)/tests/netns.o $(B)/tests/harness.o $(B)/tests/support.o \
  | e2e-programs $(SHIM_LIB) $(AGENT_BIN) $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lcriterion

CHECK_TESTS += $(B)/tests/test_netns

# Peer copies on the rails between agents on separate hosts.
$(B)/tests/test_netns_rails: $(B)/tests/test_netns_rails.o $(B)/tests/netns.o $(B)/tests/harness.o \
  $(B)/tests/support.o | e2e-programs $(SHIM_LIB) $(AGENT_BIN) $(B)/libcudasoft.so
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lcriterion

CHECK_TESTS += $(B)/tests/test_netns_rails

# `make fuzz`: one libFuzzer harness per decoder, built with clang into
# $(B)/fuzz/. Run one with e.g. `build/fuzz/fuzz_frame -max_total_time=60`.
FUZZ_CC := clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -I. -I$(CUDA_HOME)/include -D_GNU_SOURCE
FUZZ_NAMES := wire frame greeting dial reply names images texref compress
FUZZ_TARGETS += $(FUZZ_NAMES:%=$(B)/fuzz/fuzz_%)

$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(PROTO_SRC) $(wildcard proto/*.h)
	$(call say,FUZZ,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(PROTO_SRC) -lsodium -llz4

# The agent's replay links the agent and runs on the plain build's softgpu.
FUZZ_TARGETS += $(B)/fuzz/fuzz_agent_replay
$(B)/fuzz/fuzz_agent_replay: tests/fuzz/fuzz_agent_replay.c tests/replay_rig.c $(AGENT_SRC) $(PROTO_SRC) \
  $(wildcard agent/*.h proto/*.h) | build/libcudasoft.so
	$(call say,FUZZ,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -I$(CUDA_HOME)/include -DRIG_SOFTGPU='"$(abspath build/libcudasoft.so)"' \
	  -o $@ tests/fuzz/fuzz_agent_replay.c tests/replay_rig.c $(AGENT_SRC) $(PROTO_SRC) -lsodium -llz4 -lffi -ldl -lpthread

# The shim's decoders of what an agent sends (shim/decode.c).
SHIM_FUZZ_NAMES := shim_answer shim_open shim_words shim_bytes
SHIM_FUZZ_TARGETS := $(SHIM_FUZZ_NAMES:%=$(B)/fuzz/fuzz_%)
FUZZ_TARGETS += $(SHIM_FUZZ_TARGETS)

$(SHIM_FUZZ_TARGETS): $(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c shim/decode.c $(PROTO_SRC) $(wildcard proto/*.h shim/*.h)
	$(call say,FUZZ,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -I$(CUDA_HOME)/include -o $@ $< shim/decode.c $(PROTO_SRC) -lsodium -llz4

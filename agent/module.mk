# agent: build/libagent.a (everything of the agent but its main, so `rig`
# can run it as `rig agent`) and build/rig-agent.
AGENT_SRC := $(filter-out agent/rig-agent.c,$(wildcard agent/*.c))
AGENT_OBJ := $(AGENT_SRC:%.c=$(B)/%.o)
AGENT_LIB := $(B)/libagent.a
AGENT_BIN := $(B)/rig-agent
AGENT_LDLIBS := -lsodium -llz4 -lffi -lpthread -ldl

$(AGENT_LIB): $(AGENT_OBJ)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(AGENT_BIN): $(B)/agent/rig-agent.o $(AGENT_LIB) $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(AGENT_LDLIBS)

ALL_TARGETS += $(AGENT_BIN)

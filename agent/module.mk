# agent: build/rig-agent, which serves jobs by replaying them on a driver.
AGENT_SRC := $(wildcard agent/*.c)
AGENT_OBJ := $(AGENT_SRC:%.c=$(B)/%.o)
AGENT_BIN := $(B)/rig-agent

$(AGENT_BIN): $(AGENT_OBJ) $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(AGENT_OBJ) $(PROTO_LIB) -lsodium -lffi -lpthread -ldl

ALL_TARGETS += $(AGENT_BIN)

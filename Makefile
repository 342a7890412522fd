# rig: everything builds into build/ (build/san/ with SAN=1, so sanitized and
# plain objects never mix). Each folder adds its targets in its own module.mk.
#   make            build everything
#   make check      build and run every test (SAN=1: under ASan + UBSan)
#   make demo       install what is missing, build, run the loopback demo
#   make fuzz       build the libFuzzer harnesses (clang), not part of check
#   V=1             show the commands

# Every core by default (CI calls a plain `make check`, and the nvcc-built
# test programs dominate a clean build); a -j on the command line wins.
# Sub-makes share the top one's jobs instead of forcing their own.
ifndef RIG_SUBMAKE
MAKEFLAGS += -j$(shell nproc)
export RIG_SUBMAKE := 1
endif

CUDA_HOME ?= /usr/local/cuda
CC        ?= cc
NVCC      ?= $(CUDA_HOME)/bin/nvcc
PYTHON    ?= python3

ifeq ($(SAN),1)
B        := build/san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
B        := build
SANFLAGS :=
endif

OPT      ?= -O2
WARN     := -Wall -Wextra -Werror
CFLAGS   := -std=gnu11 $(OPT) -g $(WARN) -MMD -MP -fPIC -fvisibility=hidden \
            -D_GNU_SOURCE -I. -I$(CUDA_HOME)/include $(SANFLAGS) $(EXTRA_CFLAGS)
LDFLAGS  := $(SANFLAGS) $(EXTRA_LDFLAGS)
TEST_CFLAGS := -DRIG_BUILD_DIR='"$(abspath $(B))"' -DRIG_SOURCE_DIR='"$(abspath .)"'

ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @printf '  %-6s %s\n' $(1) $(2);
endif

# Modules append to these.
ALL_TARGETS :=
CHECK_TESTS :=     # test binaries `make check` runs, in order
CHECK_STEPS :=     # extra phony steps `make check` runs before the tests
FUZZ_TARGETS :=

.PHONY: all check demo fuzz clean deps
all: build-all

include proto/module.mk
include softgpu/module.mk
include shim/module.mk
include agent/module.mk
include tests/module.mk
include launcher/module.mk
include bench/module.mk
include gpu/module.mk
include packaging/module.mk

build-all: $(ALL_TARGETS)

$(B)/%.o: %.c
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

deps:
	$(Q)scripts/install-deps

check: $(ALL_TARGETS) $(CHECK_TESTS) $(CHECK_STEPS)
	$(Q)scripts/run-tests $(CHECK_TESTS)

demo: deps
	$(Q)$(MAKE) --no-print-directory build-all
	$(Q)scripts/demo $(B)

fuzz: $(FUZZ_TARGETS)

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)

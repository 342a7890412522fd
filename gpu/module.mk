# gpu: `make gpu-bundle` (issue 8) builds build/gpu-bundle/, a folder to
# carry to a machine with a GPU (the CUDA toolkit, PyTorch and nvidia-smi
# there, but no packages to install and no network) and run there as
#   build/gpu-bundle/gpu-check
# It holds:
#   bin/rig-agent, bin/rig     libsodium, libffi and lz4 linked in statically:
#                              they need glibc only (and the driver, dlopened)
#   lib/librigshim.so          the shim (SONAME libcuda.so.1), RUNPATH $ORIGIN,
#                              lz4 linked in, its symbols hidden (a program's
#                              own lz4 stays its own)
#   lib/libsodium.so.23        ... for the shim: Debian's libsodium.a is not
#                              position-independent, so it cannot go into a
#                              shared object; the one library bundled
#   lib/libcudasoft.so         softgpu, zstd and lz4 linked in (gpu-check
#                              --self-test, where there is no GPU)
#   programs/NAME              tests/programs, static cudart, stripped (the
#                              cuBLAS, cuSPARSE, cuSOLVER and NVRTC programs
#                              need the toolkit's libraries at run time)
#   bench/                     the bench program (bench/) and its fatbins
#   gpu-check, gpu-torch-check.py
# Not part of `make` or `make check`. Always the plain (unsanitized) build.
ifeq ($(SAN)$(filter gpu-bundle,$(MAKECMDGOALS)),1gpu-bundle)
$(error make gpu-bundle builds from the plain build only: run it without SAN=1)
endif
GPU_DIR  := build/gpu-bundle
GPU_LINK := build/gpu-link
GPU_LIBDIR := /usr/lib/x86_64-linux-gnu
GPU_STATIC := -Wl,-Bstatic -lsodium -lffi -llz4 -Wl,-Bdynamic
GPU_PROGRAMS := $(foreach p,$(PROGRAM_NAMES),$(PROGRAM_DIR)/$(p).static)

# Links of their own, from the build's objects: the same code, other libraries.
$(GPU_LINK)/rig-agent: build/agent/rig-agent.o build/libagent.a build/librigproto.a gpu/module.mk
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) $(GPU_STATIC) -lpthread -ldl

$(GPU_LINK)/rig: $(patsubst %.c,build/%.o,$(LAUNCHER_SRC)) build/libagent.a build/librigproto.a gpu/module.mk
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) $(GPU_STATIC) -lpthread -ldl

$(GPU_LINK)/librigshim.so: $(patsubst %.c,build/%.o,$(SHIM_SRC)) build/librigproto.a gpu/module.mk
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs -Wl,-rpath,'$$ORIGIN' -o $@ \
	  $(filter %.o %.a,$^) -Wl,--exclude-libs,liblz4.a -Wl,-Bstatic -llz4 -Wl,-Bdynamic -lsodium -lpthread -ldl

$(GPU_LINK)/libcudasoft.so: $(patsubst %.c,build/%.o,$(SOFT_DRIVER_SRC)) build/libsoftengine.a \
  build/softgpu/exports.map gpu/module.mk
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,-soname,libcudasoft.so -Wl,--no-undefined -Wl,-z,nodelete \
	  -Wl,--version-script=build/softgpu/exports.map -o $@ \
	  $(filter %.o %.a,$^) -Wl,-Bstatic -lzstd -llz4 -Wl,-Bdynamic -lpthread -lm -ldl

GPU_LINKED := $(GPU_LINK)/rig-agent $(GPU_LINK)/rig $(GPU_LINK)/librigshim.so $(GPU_LINK)/libcudasoft.so

.PHONY: gpu-bundle
gpu-bundle: $(GPU_LINKED) $(GPU_PROGRAMS) build/bench/bench build/bench/kernels.fatbin build/bench/big.fatbin \
  scripts/gpu-check scripts/gpu-torch-check.py
	$(call say,BUNDLE,$(GPU_DIR))
	$(Q)rm -rf $(GPU_DIR) && mkdir -p $(GPU_DIR)/bin $(GPU_DIR)/lib $(GPU_DIR)/programs $(GPU_DIR)/bench
	$(Q)cp $(GPU_LINK)/rig-agent $(GPU_LINK)/rig $(GPU_DIR)/bin/
	$(Q)cp $(GPU_LINK)/librigshim.so $(GPU_LINK)/libcudasoft.so $(GPU_DIR)/lib/
	$(Q)cp -L $(GPU_LIBDIR)/libsodium.so.23 $(GPU_DIR)/lib/
	$(Q)for p in $(GPU_PROGRAMS); do cp $$p $(GPU_DIR)/programs/$$(basename $$p .static); done
	$(Q)cp build/bench/bench build/bench/kernels.fatbin build/bench/big.fatbin $(GPU_DIR)/bench/
	$(Q)cp scripts/gpu-check scripts/gpu-torch-check.py $(GPU_DIR)/
	$(Q)strip --strip-debug $(GPU_DIR)/bin/* $(GPU_DIR)/lib/*.so* $(GPU_DIR)/bench/bench
	$(Q)strip --strip-all $(GPU_DIR)/programs/*   # their symbol tables alone took the bundle past 60 MiB
	$(Q){ git describe --always --dirty 2>/dev/null || echo unknown; \
	  $(NVCC) --version | sed -n 's/.*release \([0-9.]*\),.*/cuda \1/p'; } > $(GPU_DIR)/VERSION
	$(Q)scripts/gpu-check --verify-bundle $(GPU_DIR)

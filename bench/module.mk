# bench: `make bench` measures rig against what the machine and the network
# allow (issue 7): bench/run runs the baselines, the bench program on softgpu
# directly and through the shim and a loopback agent, and softgpu's engine
# bench, then bench/report prints the table and writes $(B)/bench.json.
# Nothing here is part of `make` or `make check`.
BENCH_DIR     := $(B)/bench
BENCH_BIN     := $(BENCH_DIR)/bench
BENCH_BASE    := $(BENCH_DIR)/baseline
BENCH_RELAY   := $(BENCH_DIR)/relay
BENCH_FATBINS := $(BENCH_DIR)/kernels.fatbin $(BENCH_DIR)/big.fatbin
BENCH_ARCH    := -gencode arch=compute_75,code=compute_75 -Wno-deprecated-gpu-targets

# The program links the toolkit's stub, so it runs on whichever libcuda.so.1
# the run gives it.
# The compressible bytes are proto's (compress_sparse_floats), with lz4 linked
# in so the GPU bundle's copy needs glibc and the driver only.
$(BENCH_BIN): $(BENCH_DIR)/bench.o $(BENCH_DIR)/common.o $(BENCH_DIR)/tcp.o $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -L$(CUDA_HOME)/lib64/stubs -lcuda -Wl,-Bstatic -llz4 -Wl,-Bdynamic

$(BENCH_BASE): $(BENCH_DIR)/baseline.o $(BENCH_DIR)/common.o $(BENCH_DIR)/tcp.o $(PROTO_LIB)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^

# The delaying relay the bench runs rig and the baselines through.
$(BENCH_RELAY): $(BENCH_DIR)/relay.o
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lpthread

$(BENCH_DIR)/kernels.fatbin: bench/kernels.cu bench/module.mk
	$(call say,NVCC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(NVCC) $(BENCH_ARCH) -fatbin -o $@ $<

# About 1 MB: uncompressed, so the size is the PTX's.
$(BENCH_DIR)/big.fatbin: bench/big.cu bench/module.mk
	$(call say,NVCC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(NVCC) $(BENCH_ARCH) --compress-mode=none -fatbin -o $@ $<

.PHONY: bench
bench: $(BENCH_BIN) $(BENCH_BASE) $(BENCH_RELAY) $(BENCH_FATBINS) $(SHIM_LIB) $(AGENT_BIN) $(B)/libcudasoft.so \
       $(SOFT_ENGINE_BENCH) $(B)/programs/peerbig.static
	$(Q)bench/run $(B)

# tests/programs: unmodified CUDA programs that check their own results
# against the CPU, each built three ways into build/programs/<name>.<build>
# (never sanitized, so SAN=1 shares them with the plain build):
#   static  --cudart=static        shared  --cudart=shared
#   ptds    --cudart=static --default-stream per-thread
# with PTX embedded (softgpu runs PTX). They are never linked with the shim:
# tests run them with LD_PRELOAD. Driver-API programs link the toolkit's stub
# libcuda.so, so their NEEDED libcuda.so.1 is what the preload provides.
PROGRAM_SRC    := $(wildcard tests/programs/*.cu)
PROGRAM_NAMES  := $(filter-out %_kernel,$(patsubst tests/programs/%.cu,%,$(PROGRAM_SRC)))
PROGRAM_BUILDS := static shared ptds
PROGRAM_DIR    := build/programs
PROGRAMS       := $(foreach p,$(PROGRAM_NAMES),$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/$(p).$(m)))

PROGRAM_ARCH     := -gencode arch=compute_75,code=[sm_75,compute_75]
# recursive: a program may set its own PROGRAM_ARCH (target-specific, below)
PROGRAM_NVFLAGS   = $(PROGRAM_ARCH) -O2 -I$(PROGRAM_DIR) -Wno-deprecated-gpu-targets
PROGRAM_LIBS     := -L$(CUDA_HOME)/lib64/stubs -lcuda
PFLAGS_static    := --cudart=static
PFLAGS_shared    := --cudart=shared -Xlinker -rpath=$(CUDA_HOME)/lib64
PFLAGS_ptds      := --cudart=static --default-stream per-thread

# The driver-API program's PTX, compiled here and embedded as a C array.
$(PROGRAM_DIR)/drvapi_kernel.ptx: tests/programs/drvapi_kernel.cu tests/programs/module.mk
	$(call say,NVCC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(NVCC) -arch=compute_75 -ptx -o $@ $<

$(PROGRAM_DIR)/drvapi_kernel.ptx.h: $(PROGRAM_DIR)/drvapi_kernel.ptx
	$(call say,BIN2C,$@)
	$(Q)$(CUDA_HOME)/bin/bin2c --name drvapi_ptx --padd 0 --static --const $< >$@

define program_build_rules
$(PROGRAM_DIR)/%.$(1): tests/programs/%.cu tests/programs/module.mk tests/programs/check.h tests/programs/seed.h
	$$(call say,NVCC,$$@)
	$$(Q)mkdir -p $$(dir $$@)
	$$(Q)$$(NVCC) $$(PROGRAM_NVFLAGS) $$(PFLAGS_$(1)) -o $$@ $$< $$(PROGRAM_LIBS)
endef
$(foreach m,$(PROGRAM_BUILDS),$(eval $(call program_build_rules,$(m))))

$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/drvapi.$(m)): $(PROGRAM_DIR)/drvapi_kernel.ptx.h

.PHONY: programs
programs: $(PROGRAMS)
ALL_TARGETS += $(PROGRAMS)

# wmmagemm's bf16 tensor cores need sm_80 (softgpu takes the compute_80 PTX).
$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/wmmagemm.$(m)): \
	PROGRAM_ARCH := -gencode arch=compute_80,code=[sm_80,compute_80]

# cublas, cublasblas and cublasgemm link the toolkit's shared cuBLAS,
# cusparsespmv its cuSPARSE and cusolverlu its cuSOLVER, found at run time
# by rpath. The cuBLAS programs share blas.h; they and the others draw their
# numbers from uniform.h.
$(foreach p,cublas cublasblas cublasgemm,$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/$(p).$(m))): \
	tests/programs/blas.h tests/programs/uniform.h
$(foreach p,cusparsespmv cusolverlu,$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/$(p).$(m))): tests/programs/uniform.h
$(foreach p,cublas cublasblas cublasgemm,$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/$(p).$(m))): \
	PROGRAM_LIBS += -L$(CUDA_HOME)/lib64 -lcublas -Xlinker -rpath=$(CUDA_HOME)/lib64
$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/cusparsespmv.$(m)): \
	PROGRAM_LIBS += -L$(CUDA_HOME)/lib64 -lcusparse -Xlinker -rpath=$(CUDA_HOME)/lib64
$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/cusolverlu.$(m)): \
	PROGRAM_LIBS += -L$(CUDA_HOME)/lib64 -lcusolver -Xlinker -rpath=$(CUDA_HOME)/lib64

# jitlink compiles with NVRTC at run time: the toolkit's shared libnvrtc.
$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/jitlink.$(m)): \
	PROGRAM_LIBS += -L$(CUDA_HOME)/lib64 -lnvrtc -Xlinker -rpath=$(CUDA_HOME)/lib64

# memcpyasync's copies are cp.async and mbarriers, which need sm_80.
$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/memcpyasync.$(m)): \
	PROGRAM_ARCH := -gencode arch=compute_80,code=[sm_80,compute_80]

# tmacopy's bulk tensor copies (TMA) need sm_90.
$(foreach m,$(PROGRAM_BUILDS),$(PROGRAM_DIR)/tmacopy.$(m)): \
	PROGRAM_ARCH := -gencode arch=compute_90,code=[sm_90,compute_90]

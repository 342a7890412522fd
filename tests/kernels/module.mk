# tests/kernels: CUDA kernels compiled by nvcc at build time, each in every
# mode (sm90: what nvcc emits for a Hopper target), into $(B)/kernels/K.M.fatbin (nvcc -fatbin) and $(B)/kernels/K.M.ptx
# (nvcc -ptx, same flags). Names are stable: the driver layer's tests load
# the fatbins, the engine's tests parse the PTX.
KERNEL_SRC   := $(wildcard tests/kernels/*.cu)
KERNEL_NAMES := $(patsubst tests/kernels/%.cu,%,$(KERNEL_SRC))
KERNEL_MODES := default fast debug nocomp speed size sm90

KFLAGS_default :=
KFLAGS_fast    := -O3 --use_fast_math
KFLAGS_debug   := -G
KFLAGS_nocomp  := --compress-mode=none
KFLAGS_speed   := --compress-mode=speed
KFLAGS_size    := --compress-mode=size
KFLAGS_sm90    := -arch=sm_90

# A kernel that needs a newer GPU than nvcc's default names its arch here;
# it applies in every mode that does not pick its own.
KARCH_wmma     := -arch=sm_80
KARCH_fp8      := -arch=sm_89
karch           = $(if $(filter -arch=%,$(KFLAGS_$(1))),,$(KARCH_$(2)))

KERNEL_FATBINS := $(foreach k,$(KERNEL_NAMES),$(foreach m,$(KERNEL_MODES),$(B)/kernels/$(k).$(m).fatbin))
KERNEL_PTX     := $(foreach k,$(KERNEL_NAMES),$(foreach m,$(KERNEL_MODES),$(B)/kernels/$(k).$(m).ptx))
KERNELS        := $(KERNEL_FATBINS) $(KERNEL_PTX)

define kernel_mode_rules
$(B)/kernels/%.$(1).fatbin: tests/kernels/%.cu tests/kernels/module.mk
	$$(call say,NVCC,$$@)
	$$(Q)mkdir -p $$(dir $$@)
	$$(Q)$$(NVCC) $$(call karch,$(1),$$*) $$(KFLAGS_$(1)) -fatbin -o $$@ $$<

$(B)/kernels/%.$(1).ptx: tests/kernels/%.cu tests/kernels/module.mk
	$$(call say,NVCC,$$@)
	$$(Q)mkdir -p $$(dir $$@)
	$$(Q)$$(NVCC) $$(call karch,$(1),$$*) $$(KFLAGS_$(1)) -ptx -o $$@ $$<
endef
$(foreach m,$(KERNEL_MODES),$(eval $(call kernel_mode_rules,$(m))))

.PHONY: kernels
kernels: $(KERNELS)
ALL_TARGETS += $(KERNELS)

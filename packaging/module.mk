# packaging: `make install` (PREFIX, DESTDIR, SYSCONFDIR, UNITDIR) and
# `make deb` (build/deb/: rig_VERSION_amd64.deb for the machines that run
# programs, rig-agent_VERSION_amd64.deb for GPU hosts). The files they
# install beside the build's: man pages, the agent's unit and settings.
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
INSTALLED  := $(LAUNCHER_BIN) $(AGENT_BIN) $(SHIM_LIB) $(B)/libcudasoft.so

.PHONY: install deb
install: $(INSTALLED)
	$(Q)scripts/install-rig $(B) "$(DESTDIR)" $(PREFIX) $(SYSCONFDIR) $(UNITDIR)

deb: $(INSTALLED)
	$(Q)scripts/make-debs $(B) $(B)/deb

# The installed tree and the packages, end to end (a real agent from the
# installed tree serving vecadd; dpkg-deb -c; lintian; systemd-analyze).
$(B)/tests/test_install: $(B)/tests/test_install.o $(B)/agent/config.o $(B)/tests/harness.o $(B)/tests/support.o \
  $(PROTO_LIB) | e2e-programs $(INSTALLED)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -lcriterion $(PROTO_LDLIBS)

CHECK_TESTS += $(B)/tests/test_install

# profd: one non-recursive Makefile, out-of-tree into build/ (or build/<variant>/).
# make            build/profd build/profctl build/libprofagent.so
# make test       every test (unit + integration), ends with "N passed, N failed"
# make demo       install deps (Debian), build, profile examples/demo, print the trace path
# V=1 full commands; DEBUG=1 -O0; SAN=address,undefined sanitizers (own build dir)
# make ARCH=aarch64  cross-builds (Debian's gcc-aarch64-linux-gnu) into build/aarch64/
# make test-aarch64  runs those builds and the arm64 agent under qemu-user
#                    (tests/aarch64/run.sh; make test runs it last)

CC      ?= cc
PROTOC_C ?= protoc-c

BUILD := build
ifneq ($(SAN),)
BUILD := build/san
endif
ifneq ($(DEBUG),)
BUILD := build/debug
endif

# ---- target architecture ------------------------------------------------------
# ARCH other than the host's cross-compiles with $(ARCH)-linux-gnu-gcc into
# build/$(ARCH)/ (multiarch :arm64 -dev packages give the libraries). Only the
# architectures in AGENT_ARCHES build the agent; a cross build makes only the
# agent and the portable test targets (profd and profctl run on the host).
HOST_ARCH := $(shell uname -m)
ARCH ?= $(HOST_ARCH)
AGENT_ARCHES := x86_64 aarch64
ifneq ($(ARCH),$(HOST_ARCH))
CROSS_COMPILE ?= $(ARCH)-linux-gnu-
CC  := $(CROSS_COMPILE)gcc
CXX := $(CROSS_COMPILE)g++
BUILD := build/$(ARCH)$(patsubst build%,%,$(BUILD))
endif

OPT := -O2
ifneq ($(DEBUG),)
OPT := -O0
endif

WARN   := -Wall -Wextra -Werror -Wno-missing-field-initializers
# A section per function and object: the agent's link keeps only what it uses (--gc-sections)
CFLAGS_BASE := -std=gnu11 $(OPT) -g $(WARN) -fPIC -fvisibility=hidden \
	-fno-omit-frame-pointer -ffunction-sections -fdata-sections \
	-MMD -MP -I. -I$(BUILD)/gen -D_GNU_SOURCE
ifneq ($(SAN),)
CFLAGS_BASE += -fsanitize=$(SAN) -fno-sanitize-recover=all
LDFLAGS_SAN := -fsanitize=$(SAN)
endif
CFLAGS ?=
# aarch64: atomics inline, not calls to libgcc's __aarch64_* helpers (the hooks call nothing)
CFLAGS_ARCH_aarch64 := -mno-outline-atomics
ALL_CFLAGS := $(CFLAGS_BASE) $(CFLAGS_ARCH_$(ARCH)) $(CFLAGS)

LIBS_COMMON := -lprotobuf-c -lzstd -lz -lisal -lpthread
# x86-64: protobuf-c linked in (hidden): one library fewer for the loader to map and
# the agent to scan at each process start of a tree. Other architectures' archives
# may be missing from a cross sysroot: the shared library there.
# libZydis is not linked: trampolines/insn_zydis_x86_64.c dlopen()s it when the built-in
# decoder meets an instruction it leaves to Zydis (most processes never do).
LIBS_AGENT_x86_64 := -Wl,-Bstatic -lprotobuf-c -Wl,-Bdynamic -Wl,--exclude-libs,libprotobuf-c.a
LIBS_AGENT_aarch64 := -lprotobuf-c
LIBS_AGENT  := $(LIBS_AGENT_$(ARCH)) -lpthread -ldl
LIBS_DAEMON := -lbpf -lelf -ldw -lzstd -lz -lisal -lprotobuf-c -lsystemd -lpthread -lstdc++
LIBS_TEST   := -lbpf -lelf -ldw -lzstd -lz -lisal -lprotobuf-c -lZydis -lsystemd -lpthread -ldl -lstdc++

ifeq ($(V),1)
Q :=
else
Q := @
endif

# ---- sources ---------------------------------------------------------------
PROTOS      := proto/profd.proto proto/perfetto_trace_subset.proto
PROTO_GEN_C := $(patsubst proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS))
PROTO_GEN_H := $(PROTO_GEN_C:.c=.h)

COMMON_SRC  := $(wildcard common/*.c) $(wildcard proto/*.c)
# Per architecture: the trampolines and the relocator (on x86-64 a built-in decoder, and
# Zydis loaded when it does not know an instruction).
TRAMP_SRC_x86_64  := trampolines/relocator_x86_64.c trampolines/return_slot_x86_64.c trampolines/skip_reason.c \
	trampolines/insn_x86_64.c trampolines/insn_zydis_x86_64.c
TRAMP_ASM_x86_64  := trampolines/x86_64.S
TRAMP_SRC_aarch64 := trampolines/aarch64/relocator_aarch64.c trampolines/skip_reason.c
TRAMP_ASM_aarch64 := trampolines/aarch64.S
TRAMP_SRC   := $(TRAMP_SRC_$(ARCH))
TRAMP_ASM   := $(TRAMP_ASM_$(ARCH))
# Other architectures' pure-encoding code: unit-tested on this host, never in its agent.
TRAMP_FOREIGN_SRC_x86_64 := $(wildcard trampolines/aarch64/*.c)
TRAMP_FOREIGN_SRC := $(TRAMP_FOREIGN_SRC_$(ARCH))
# agent/stub_slot_$(ARCH).c: what goes in a stub slot on this architecture
AGENT_SRC   := $(filter-out agent/stub_slot_%.c,$(wildcard agent/*.c)) agent/stub_slot_$(ARCH).c
DAEMON_SRC  := $(filter-out daemon/profd.c %.bpf.c,$(wildcard daemon/*.c daemon/*/*.c))
EXPORT_SRC  := $(wildcard viewer-export/*.c viewer-export/export/*.c)
PROFCTL_SRC := $(filter-out profctl/profctl.c profctl/agent_link.c,$(wildcard profctl/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(patsubst %.S,$(BUILD)/obj/%.o,$(1)))

COMMON_OBJ  := $(call obj,$(COMMON_SRC)) $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(PROTO_GEN_C))
TRAMP_OBJ   := $(call obj,$(TRAMP_SRC) $(TRAMP_ASM))
TRAMP_FOREIGN_OBJ := $(call obj,$(TRAMP_FOREIGN_SRC))
AGENT_OBJ   := $(call obj,$(AGENT_SRC))
DAEMON_OBJ  := $(call obj,$(DAEMON_SRC))
EXPORT_OBJ  := $(call obj,$(EXPORT_SRC))
PROFCTL_OBJ := $(call obj,$(PROFCTL_SRC))
# `profctl funcs` decides with the agent's own code (agent/instrument.c), run on mapped files,
# and `profctl run` reads the module presets its agents take (agent/module_preset.c) with it
PROFCTL_AGENT_OBJ := $(call obj,agent/instrument.c agent/elf_symbols.c agent/patcher.c agent/arg_capture.c \
	agent/module_preset.c \
	agent/stub_slot_$(ARCH).c agent/proc_maps.c agent/jit_callers.c $(TRAMP_SRC) profctl/agent_link.c)

UNIT_SRC    := $(wildcard tests/unit/test_*.c)
UNIT_BIN    := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
TARGET_SRC  := $(wildcard tests/targets/*.c) $(wildcard tests/targets/*.cpp) $(wildcard examples/*.c)
# Targets of several files: tests/targets/NAME/*.c makes $(BUILD)/tests/targets/NAME
TARGET_DIRS := $(patsubst %/,%,$(dir $(wildcard tests/targets/*/main.c)))
TARGET_BIN  := $(patsubst %.cpp,$(BUILD)/%,$(patsubst %.c,$(BUILD)/%,$(TARGET_SRC))) \
	$(patsubst %,$(BUILD)/%,$(TARGET_DIRS)) \
	$(patsubst tests/targets/plugin/%.c,$(BUILD)/tests/targets/lib%.so,$(wildcard tests/targets/plugin/*.c))
# Test targets in portable C and C++ (per-architecture cases are #ifdef'd
# inside), built for every ARCH and compared under qemu-user by tests/aarch64/run.sh.
PORTABLE_TARGET_BIN := $(BUILD)/tests/targets/abi_torture $(BUILD)/tests/targets/shadow_torture \
	$(BUILD)/tests/targets/exceptions $(BUILD)/tests/targets/args_target
PAC_TARGET_BIN_aarch64 := $(BUILD)/tests/targets/pac/abi_torture $(BUILD)/tests/targets/pac/shadow_torture \
	$(BUILD)/tests/targets/pac/args_target
BENCH_SRC   := $(filter-out bench/stream_tee.c,$(wildcard bench/*.c))
BENCH_BIN   := $(patsubst %.c,$(BUILD)/%,$(BENCH_SRC)) $(BUILD)/bench/stream_tee.so

ifeq ($(ARCH),$(HOST_ARCH))
all: $(BUILD)/profd $(BUILD)/profctl $(BUILD)/libprofagent.so $(BUILD)/libprofagent.so-gdb.py \
	$(TARGET_BIN) $(BUILD)/tests/targets/fp_target
else
all: $(PORTABLE_TARGET_BIN) $(if $(filter $(ARCH),$(AGENT_ARCHES)),$(BUILD)/libprofagent.so) \
	$(PAC_TARGET_BIN_$(ARCH))
endif

# gdb auto-loads it from next to the agent (once the directory is a safe path)
$(BUILD)/libprofagent.so-gdb.py: tools/gdb/libprofagent.so-gdb.py
	@mkdir -p $(@D)
	$(Q)cp $< $@

# ---- generated protobuf-c code ----------------------------------------------
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(@D)
	@echo "  PROTOC  $<"
	$(Q)$(PROTOC_C) --proto_path=proto --c_out=$(BUILD)/gen $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -Wno-unused-parameter -c -o $@ $<

# every object may include generated headers
$(COMMON_OBJ) $(TRAMP_OBJ) $(AGENT_OBJ) $(DAEMON_OBJ) $(EXPORT_OBJ) $(PROFCTL_OBJ): | $(PROTO_GEN_H)

# ---- the scheduler's BPF probe (CO-RE) -----------------------------------------
# vmlinux.h from this machine's kernel BTF; the program, compiled once, runs on
# any kernel with BTF (libbpf relocates its field accesses at load time).
BPF_CLANG ?= clang
KERNEL_BTF ?= /sys/kernel/btf/vmlinux
$(BUILD)/gen/vmlinux.h:
	@mkdir -p $(@D)
	@test -r $(KERNEL_BTF) || { echo "no kernel BTF at $(KERNEL_BTF): profd's BPF probe needs it to build (KERNEL_BTF=...)"; exit 1; }
	@echo "  BTF     $@"
	$(Q)bpftool btf dump file $(KERNEL_BTF) format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/sched.bpf.o: daemon/sched/sched.bpf.c daemon/sched/sched_record.h $(BUILD)/gen/vmlinux.h
	@mkdir -p $(@D)
	@echo "  BPF     $<"
	$(Q)$(BPF_CLANG) -g -O2 -target bpf -Wall -Werror -I$(BUILD)/gen -I. -c -o $@ $<
	$(Q)llvm-strip -g $@

$(BUILD)/gen/sched.skel.h: $(BUILD)/bpf/sched.bpf.o
	@echo "  SKEL    $@"
	$(Q)bpftool gen skeleton $< name sched_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/daemon/sched/sched_tracer.o: $(BUILD)/gen/sched.skel.h

# ---- objects ----------------------------------------------------------------
# The hooks' fast path must not touch vector registers: the trampolines save
# only general-purpose registers (see trampolines/$(ARCH).S).
HOT_CFLAGS_x86_64 := -fcf-protection=none
HOT_CFLAGS := -mgeneral-regs-only -fno-stack-protector -fno-sanitize=all $(HOT_CFLAGS_$(ARCH)) \
	-fno-exceptions -fno-asynchronous-unwind-tables -funwind-tables

$(BUILD)/obj/agent/hooks.o $(BUILD)/obj/agent/arg_capture_hot.o: ALL_CFLAGS += $(HOT_CFLAGS)

# the libZydis trampolines/insn_zydis_x86_64.c dlopen()s: the one its header comes with
ZYDIS_SONAME := $(shell readelf -d $$($(CC) -print-file-name=libZydis.so) 2>/dev/null | \
	sed -n 's/.*soname: \[\(.*\)\]/\1/p')
$(BUILD)/obj/trampolines/insn_zydis_x86_64.o: ALL_CFLAGS += -DZYDIS_SONAME='"$(or $(ZYDIS_SONAME),libZydis.so)"'

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.S
	@mkdir -p $(@D)
	@echo "  AS      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

# ---- products ---------------------------------------------------------------
# --gc-sections: every process of a followed tree loads the agent, and what it
# relocates it copies (1,369 relative relocations of protobuf-c descriptors
# the agent never uses made 11 RELRO pages, a page fault each; bench/README.md,
# "Sixth pass").
$(BUILD)/libprofagent.so: $(AGENT_OBJ) $(TRAMP_OBJ) $(COMMON_OBJ) agent/libprofagent.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared -o $@ $(AGENT_OBJ) $(TRAMP_OBJ) $(COMMON_OBJ) \
		-Wl,--version-script=agent/libprofagent.map -Wl,--no-undefined -Wl,-z,now \
		-Wl,--gc-sections \
		$(LDFLAGS_SAN) $(LIBS_AGENT)

$(BUILD)/profd: $(BUILD)/obj/daemon/profd.o $(DAEMON_OBJ) $(EXPORT_OBJ) $(COMMON_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) -o $@ $^ $(LDFLAGS_SAN) $(LIBS_DAEMON)

$(BUILD)/profctl: $(BUILD)/obj/profctl/profctl.o $(PROFCTL_OBJ) $(PROFCTL_AGENT_OBJ) $(EXPORT_OBJ) \
		$(COMMON_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) -o $@ $^ $(LDFLAGS_SAN) $(LIBS_COMMON) -ldl

# ---- tests, targets, benchmarks ---------------------------------------------
TEST_LINK_OBJ := $(AGENT_OBJ) $(TRAMP_OBJ) $(TRAMP_FOREIGN_OBJ) $(DAEMON_OBJ) $(EXPORT_OBJ) $(PROFCTL_OBJ) $(COMMON_OBJ)

$(BUILD)/tests/%: tests/unit/%.c $(TEST_LINK_OBJ) $(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(TEST_LINK_OBJ) $(LDFLAGS_SAN) $(LIBS_TEST)

# Targets: built like ordinary user programs (frame pointers, even in leaves),
# default visibility so their functions appear in .dynsym too.
TARGET_CFLAGS := -std=gnu11 -O2 -g -Wall -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -pthread -rdynamic
TARGET_HDR := $(wildcard tests/targets/*.h)
$(BUILD)/tests/targets/%: tests/targets/%.c $(TARGET_HDR)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(TARGET_CFLAGS) -o $@ $< -lm
define multi_file_target
$(BUILD)/$(1): $(wildcard $(1)/*.c) $(wildcard $(1)/*.h) $(TARGET_HDR)
	@mkdir -p $$(@D)
	@echo "  CC      $(1)/*.c"
	$(Q)$$(CC) $$(TARGET_CFLAGS) -o $$@ $(wildcard $(1)/*.c) -lm
$(BUILD)/$(dir $(1))pac/$(notdir $(1)): $(wildcard $(1)/*.c) $(wildcard $(1)/*.h) $(TARGET_HDR)
	@mkdir -p $$(@D)
	@echo "  CC      $(1)/*.c (pac-ret, bti)"
	$(Q)$$(CC) $$(TARGET_CFLAGS) -mbranch-protection=standard -o $$@ $(wildcard $(1)/*.c) -lm
endef
$(foreach d,$(TARGET_DIRS),$(eval $(call multi_file_target,$(d))))
# nofp_target's functions with their frame pointers kept: for --call-graph fp
$(BUILD)/tests/targets/fp_target: tests/targets/nofp_target.c
	@mkdir -p $(@D)
	@echo "  CC      $< (frame pointers)"
	$(Q)$(CC) $(TARGET_CFLAGS) -DKEEP_FRAME_POINTERS -o $@ $< -lm
# args_dwarf: one function (args_dwarf/nodwarf.c) built without -g, the rest
# with; args_dwarf_O0 the same at -O0 (tests/unit/test_dwarf_params.c reads both)
$(BUILD)/tests/targets/args_dwarf: tests/targets/args_dwarf.c tests/targets/args_dwarf/nodwarf.c
	@mkdir -p $(@D)
	@echo "  CC      $< (+ nodwarf.c without -g)"
	$(Q)$(CC) $(TARGET_CFLAGS) -g0 -c -o $@-nodwarf.o tests/targets/args_dwarf/nodwarf.c
	$(Q)$(CC) $(TARGET_CFLAGS) -o $@ $< $@-nodwarf.o
$(BUILD)/tests/targets/args_dwarf_O0: tests/targets/args_dwarf.c tests/targets/args_dwarf/nodwarf.c
	@mkdir -p $(@D)
	@echo "  CC      $< (-O0, + nodwarf.c without -g)"
	$(Q)$(CC) $(TARGET_CFLAGS) -O0 -g0 -c -o $@-nodwarf.o tests/targets/args_dwarf/nodwarf.c
	$(Q)$(CC) $(TARGET_CFLAGS) -O0 -o $@ $< $@-nodwarf.o
$(BUILD)/tests/test_dwarf_params: $(BUILD)/tests/targets/args_dwarf $(BUILD)/tests/targets/args_dwarf_O0
# aarch64: the same targets again with pointer authentication and BTI landing
# pads (-mbranch-protection=standard), which Debian 12 does not default to:
# the trampolines' paciasp/autiasp handling (agent/stub_slot_aarch64.c).
$(BUILD)/tests/targets/pac/%: tests/targets/%.c $(TARGET_HDR)
	@mkdir -p $(@D)
	@echo "  CC      $< (pac-ret, bti)"
	$(Q)$(CC) $(TARGET_CFLAGS) -mbranch-protection=standard -o $@ $< -lm
$(BUILD)/tests/targets/%: tests/targets/%.cpp
	@mkdir -p $(@D)
	@echo "  CXX     $<"
	$(Q)$(CXX) $(subst -std=gnu11,-std=gnu++17,$(TARGET_CFLAGS)) -o $@ $<
$(BUILD)/tests/targets/lib%.so: tests/targets/plugin/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(TARGET_CFLAGS) -fPIC -shared -o $@ $<
$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(TARGET_CFLAGS) -o $@ $<
$(BUILD)/bench/%: bench/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(TARGET_CFLAGS) -o $@ $< -ldl
# The writer's codecs on real trace bytes (bench/README.md).
$(BUILD)/bench/compress_cost: bench/compress_cost.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(TARGET_CFLAGS) -I. -o $@ $< -lz -lzstd -lisal
# bench/replay.sh: the agent stream's tee (a preloaded shim) and its replay.
$(BUILD)/bench/stream_tee.so: bench/stream_tee.c proto/frame.h
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(TARGET_CFLAGS) -I. -fPIC -shared -o $@ $< -ldl
$(BUILD)/bench/stream_replay: bench/stream_replay.c proto/frame.c proto/frame.h
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(TARGET_CFLAGS) -I. -o $@ $< proto/frame.c
# This one measures the daemon's own unwinder: built like the daemon and
# linked with its objects (profd's, less its main).
$(BUILD)/bench/unwind_cost: bench/unwind_cost.c $(DAEMON_OBJ) $(EXPORT_OBJ) $(COMMON_OBJ)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(DAEMON_OBJ) $(EXPORT_OBJ) $(COMMON_OBJ) \
		$(LDFLAGS_SAN) $(LIBS_DAEMON)

bench: all $(BENCH_BIN)
	$(Q)bench/run.sh $(BUILD)

unit: $(UNIT_BIN)

# tests/integration/test_sched_pingpong.sh runs bench/pingpong
test: all $(UNIT_BIN) $(BUILD)/bench/pingpong
	$(Q)BUILD=$(BUILD) tests/run.sh

# arm64 builds of the portable targets under qemu-user against the host's
# builds, then the arm64 agent in them against the host's profd (also the
# last part of make test); prints `skip: ...` and 0 passed, 0 failed without
# the cross tools.
test-aarch64: all
	$(Q)HOST_BUILD=$(BUILD) tests/aarch64/run.sh

deps:
	$(Q)tools/install-deps.sh

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)tools/demo.sh $(BUILD)

clean:
	rm -rf build

# ---- install ------------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=staging-root]. profctl looks for
# profd and libprofagent.so next to its own executable (/proc/self/exe), so
# the three live together in PKGLIBDIR; bin/profctl and sbin/profd are
# symlinks there. The service unit gets PKGLIBDIR written into it.
PREFIX         ?= /usr/local
BINDIR         ?= $(PREFIX)/bin
SBINDIR        ?= $(PREFIX)/sbin
PKGLIBDIR      ?= $(PREFIX)/lib/profd
DOCDIR         ?= $(PREFIX)/share/doc/profd
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
MANDIR         ?= $(PREFIX)/share/man
BASHCOMPDIR    ?= $(PREFIX)/share/bash-completion/completions
INSTALL        ?= install

install: $(BUILD)/profd $(BUILD)/profctl $(BUILD)/libprofagent.so $(BUILD)/libprofagent.so-gdb.py
	@echo "  INSTALL $(DESTDIR)$(PREFIX)"
	$(Q)$(INSTALL) -d $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) \
		$(DESTDIR)$(DOCDIR) $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(BASHCOMPDIR)
	$(Q)$(INSTALL) -m 0755 $(BUILD)/profd $(BUILD)/profctl $(DESTDIR)$(PKGLIBDIR)/
	$(Q)$(INSTALL) -m 0644 $(BUILD)/libprofagent.so $(BUILD)/libprofagent.so-gdb.py \
		$(DESTDIR)$(PKGLIBDIR)/
	$(Q)for a in $(filter-out $(ARCH),$(AGENT_ARCHES)); do \
		[ -f build/$$a/libprofagent.so ] || continue; \
		$(INSTALL) -d $(DESTDIR)$(PKGLIBDIR)/$$a && \
		$(INSTALL) -m 0644 build/$$a/libprofagent.so $(DESTDIR)$(PKGLIBDIR)/$$a/; \
	done # other architectures' agents, for programs run under qemu-user
	$(Q)ln -sfn $(PKGLIBDIR)/profctl $(DESTDIR)$(BINDIR)/profctl
	$(Q)ln -sfn $(PKGLIBDIR)/profd $(DESTDIR)$(SBINDIR)/profd
	$(Q)$(INSTALL) -m 0644 systemd/profd.socket $(DESTDIR)$(SYSTEMDUNITDIR)/profd.socket
	$(Q)sed -e 's|@PKGLIBDIR@|$(PKGLIBDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' \
		systemd/profd.service.in >$(DESTDIR)$(SYSTEMDUNITDIR)/profd.service
	$(Q)chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/profd.service
	$(Q)$(INSTALL) -m 0644 systemd/profd.sysusers $(DESTDIR)$(SYSUSERSDIR)/profd.conf
	$(Q)$(INSTALL) -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	$(Q)$(INSTALL) -m 0644 man/profctl.1 $(DESTDIR)$(MANDIR)/man1/profctl.1
	$(Q)$(INSTALL) -m 0644 man/profd.8 $(DESTDIR)$(MANDIR)/man8/profd.8
	$(Q)$(INSTALL) -m 0644 completion/profctl.bash $(DESTDIR)$(BASHCOMPDIR)/profctl
	@echo "  then: systemd-sysusers; systemctl daemon-reload; systemctl enable --now profd.socket"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/profctl $(DESTDIR)$(SBINDIR)/profd \
		$(DESTDIR)$(SYSTEMDUNITDIR)/profd.socket $(DESTDIR)$(SYSTEMDUNITDIR)/profd.service \
		$(DESTDIR)$(SYSUSERSDIR)/profd.conf $(DESTDIR)$(DOCDIR)/README.md \
		$(DESTDIR)$(MANDIR)/man1/profctl.1 $(DESTDIR)$(MANDIR)/man8/profd.8 \
		$(DESTDIR)$(BASHCOMPDIR)/profctl \
		$(addprefix $(DESTDIR)$(PKGLIBDIR)/,profd profctl libprofagent.so libprofagent.so-gdb.py) \
		$(foreach a,$(AGENT_ARCHES),$(DESTDIR)$(PKGLIBDIR)/$(a)/libprofagent.so)
	-rmdir $(foreach a,$(AGENT_ARCHES),$(DESTDIR)$(PKGLIBDIR)/$(a)) 2>/dev/null
	-rmdir $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(DOCDIR)

.PHONY: install uninstall
.PHONY: all test test-aarch64 unit bench deps demo clean
.DELETE_ON_ERROR:

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

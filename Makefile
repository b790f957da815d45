# lockscope top-level Makefile. `make help` lists the targets.
# SAN=1: daemon, CLI and unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer
# (LeakSanitizer at exit) into their own directory; `make test SAN=1` runs every suite on them.
# FUZZ=1: the same with clang and libFuzzer's coverage (`make fuzz` sets it) into build/fuzz/.
SAN ?= 0
FUZZ ?= 0
ifeq ($(FUZZ),1)
OUTPUT ?= build/fuzz
else ifeq ($(SAN),1)
OUTPUT ?= build/san
else
OUTPUT ?= build
endif
PREFIX ?= /usr/local
DESTDIR ?=
WERROR ?= 1
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux

CC ?= cc
CLANG ?= clang
BPFTOOL ?= bpftool
PYTHON ?= /usr/bin/python3
ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

WARN := -Wall -Wextra
ifeq ($(WERROR),1)
WARN += -Werror
endif

CFLAGS ?= -O2 -g
CFLAGS += $(WARN) -std=gnu11 -D_GNU_SOURCE -fno-omit-frame-pointer -MMD -MP \
	  -I$(OUTPUT) -I$(BPF_OUT) -Ibpf -Idaemon -I$(BLAZESYM_INC)
ifeq ($(FUZZ),1)
CC := $(CLANG)
# libFuzzer's main is linked into the targets only; the engine gets its coverage hooks
SAN_FLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
CFLAGS += $(SAN_FLAGS)
LDFLAGS += $(SAN_FLAGS)
else ifeq ($(SAN),1)
# any report fails the run: UBSan does not recover, ASan never does
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
CFLAGS += $(SAN_FLAGS)
LDFLAGS += $(SAN_FLAGS)
endif
# The Rust libraries (blazesym's C API for symbolization, inferno's flame graphs), built by
# cargo from deps/rust as one static library, pinned by its Cargo.lock. blazesym's header
# ships inside its crate, wherever cargo unpacked it.
# deps/toolchain.sh finds a cargo new enough for blazesym (rustup's, the distribution's, Ubuntu's
# versioned one); a versioned toolchain keeps its rustc beside its cargo.
ifeq ($(origin CARGO),undefined)
CARGO := $(or $(shell sh deps/toolchain.sh rust find),cargo)
endif
CARGO_RUN = $(if $(findstring /,$(CARGO)),PATH="$(dir $(CARGO)):$$PATH") $(CARGO)
# uninstrumented Rust serves every build flavour: the sanitizer builds share the plain one's
RUST_DIR := $(if $(filter 1,$(SAN) $(FUZZ)),build/rust,$(OUTPUT)/rust)
RUST_LIB := $(RUST_DIR)/release/liblockscope_rs.a
BLAZESYM_INC := $(RUST_DIR)/include
LIBS := -lbpf -ldw -lelf -lz -lcjson -lprotobuf-c -lresolv -lm $(RUST_LIB) -lpthread -ldl
# The BPF objects, their skeletons and vmlinux.h do not depend on the build flavour: the
# sanitizer and fuzz builds use the plain build's, as they use its Rust
BPF_OUT := $(if $(filter 1,$(SAN) $(FUZZ)),build,$(OUTPUT))
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) $(WARN) -Wno-unused-function -Wno-unused-parameter \
	      -I$(BPF_OUT) -Ibpf

BPF_APPS := klock scheduler
BPF_OBJS := $(patsubst %,$(BPF_OUT)/%.bpf.o,$(BPF_APPS))
SKELS := $(patsubst %,$(BPF_OUT)/%.skel.h,$(BPF_APPS))

# The engine: everything the daemon and `lockscope scan` (embedded) share.
# One folder per stage of the data's path (tests/layers.py checks the includes follow it)
DAEMON_LAYERS := lib collect decode store analyze api serve
ENGINE_SRCS := $(foreach l,$(DAEMON_LAYERS),$(wildcard daemon/$(l)/*.c))
# wire formats we write, compiled by protoc-c: pprof's profile, Parca's WriteRaw request
PROTOS := daemon/api/profile.proto daemon/serve/parca.proto
PB_HDRS := $(patsubst %.proto,$(OUTPUT)/%.pb-c.h,$(notdir $(PROTOS)))
PB_OBJS := $(patsubst %.proto,$(OUTPUT)/daemon/%.pb-c.o,$(notdir $(PROTOS)))
ENGINE_OBJS := $(patsubst daemon/%.c,$(OUTPUT)/daemon/%.o,$(ENGINE_SRCS)) $(PB_OBJS)
CLI_SRCS := $(wildcard cli/*.c)
CLI_OBJS := $(patsubst cli/%.c,$(OUTPUT)/cli/%.o,$(CLI_SRCS))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUTPUT)/tests/%,$(UNIT_SRCS))
# libFuzzer targets (tests/fuzz): `make fuzz` runs them; the integration suite replays their
# corpora and regression inputs through plain builds of the same targets (replay_*)
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(patsubst %,$(OUTPUT)/fuzz/fuzz_%,$(FUZZ_TARGETS))
REPLAY_BINS := $(patsubst %,$(OUTPUT)/tests/replay_%,$(FUZZ_TARGETS))
# The Kubernetes manifest's decoding test (tests/k8s, k8s.io/api's own types), compiled
# with the other tests, where Go is installed: compiling k8s.io/api takes half a minute
# the first time, which CI spends beside its soak instead of inside the suite
GO_CMD := $(shell command -v go 2>/dev/null)
K8S_TEST := $(if $(GO_CMD),$(OUTPUT)/tests/k8s.test)
FUZZ_TIME ?= 60
FUZZ_JOBS ?= $(shell nproc)
WORKLOAD_SRCS := $(wildcard tests/workloads/*.c)
WORKLOADS := $(patsubst tests/workloads/%.c,$(OUTPUT)/workloads/%,$(WORKLOAD_SRCS)) \
	     $(OUTPUT)/workloads/mutex_server_nofp $(OUTPUT)/workloads/mutex_server_nocfi \
	     $(OUTPUT)/workloads/tokio_tick

.PHONY: all clean config deps test test-build unit-test integration-test install demo help bench bench-tools \
	fuzz fuzz-seeds bench-soak bench-push parca
.DELETE_ON_ERROR:
.SECONDARY:

MANPAGES := $(OUTPUT)/man/lockscope.1 $(OUTPUT)/man/lockscoped.8

all: $(OUTPUT)/lockscoped $(OUTPUT)/lockscope $(OUTPUT)/lockscoped.service $(WORKLOADS) $(MANPAGES)

help:
	@echo "make [all]          build daemon, CLI and workloads into $(OUTPUT)/"
	@echo "make deps           install build and test dependencies (Debian/Ubuntu, root)"
	@echo "make test           unit tests, then integration tests with real BPF (root)"
	@echo "make test SAN=1     the same, built with ASan + UBSan (LSan at exit) into build/san/"
	@echo "make test-build     what make test runs, built and not run"
	@echo "make bench-soak     lockscoped's RSS over SOAK_MINUTES (15) of mixed load (root)"
	@echo "make bench-push     lockscoped's RSS over PUSH_MINUTES (5) of pushing to backends that are down (root)"
	@echo "make fuzz           every libFuzzer target for FUZZ_TIME (60) seconds (root: BPF)"
	@echo "make demo           start lockscoped on a contention demo and show lockscope top"
	@echo "make bench          overhead and capacity vs perf, bpftrace and the empty-hook floor (root)"
	@echo "                    -> bench/results.md, bench/results.json"
	@echo "make install        install into DESTDIR/PREFIX"
	@echo "make config         regenerate deploy/lockscoped.conf from the daemon's settings table"
	@echo "options: V=1 WERROR=0 OUTPUT=dir VMLINUX_BTF=path CLANG=clang-16"

# deps/install.sh needs nothing but sh and apt: the README's first command runs it before
# make exists on a fresh machine
deps:
	sh deps/install.sh

$(sort $(OUTPUT) $(BPF_OUT)) $(OUTPUT)/daemon $(OUTPUT)/cli $(OUTPUT)/tests $(OUTPUT)/workloads:
	$(Q)mkdir -p $@

$(BPF_OUT)/vmlinux.h: | $(BPF_OUT)
	$(call msg,GEN,$@)
	$(Q)command -v $(BPFTOOL) >/dev/null || { echo "bpftool not found: run 'make deps' (Debian package bpftool)" >&2; exit 1; }
	$(Q)test -r $(VMLINUX_BTF) || { echo "no kernel BTF at $(VMLINUX_BTF): use a kernel with CONFIG_DEBUG_INFO_BTF=y or set VMLINUX_BTF=" >&2; exit 1; }
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@

$(BPF_OUT)/%.bpf.o: bpf/%.bpf.c $(BPF_OUT)/vmlinux.h | $(BPF_OUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -MF $(@:.o=.d) -MT $@ -c $< -o $@.tmp
	$(Q)$(BPFTOOL) gen object $@ $@.tmp && rm -f $@.tmp

$(BPF_OUT)/%.skel.h: $(BPF_OUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

$(RUST_LIB): deps/rust/Cargo.toml deps/rust/Cargo.lock deps/rust/src/lib.rs
	$(call msg,CARGO,$@)
	$(Q)command -v $(CARGO) >/dev/null || { echo "no cargo for Rust $$(sh deps/toolchain.sh rust min)+ found: run 'sudo deps/install.sh' (or install Rust with rustup)" >&2; exit 1; }
	$(Q)$(CARGO_RUN) build --quiet --release --locked --manifest-path deps/rust/Cargo.toml \
		--target-dir $(RUST_DIR)
	$(Q)mkdir -p $(BLAZESYM_INC)
	$(Q)cp "$$($(CARGO_RUN) metadata --format-version 1 --locked --manifest-path deps/rust/Cargo.toml | \
		$(PYTHON) -c 'import json,sys,os; m=json.load(sys.stdin); print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"]=="blazesym-c"))')/include/blazesym.h" \
		$(BLAZESYM_INC)/blazesym.h
	$(Q)touch $@

# each .proto (the part of the format we write) into $(OUTPUT)/NAME.pb-c.[ch] by protoc-c
vpath %.proto $(sort $(dir $(PROTOS)))
$(OUTPUT)/%.pb-c.c $(OUTPUT)/%.pb-c.h: %.proto | $(OUTPUT)
	$(call msg,PROTOC,$@)
	$(Q)command -v protoc-c >/dev/null || { echo "protoc-c not found: run 'make deps' (Debian package protobuf-c-compiler)" >&2; exit 1; }
	$(Q)protoc-c --proto_path=$(<D) --c_out=$(OUTPUT) $<

$(OUTPUT)/daemon/%.pb-c.o: $(OUTPUT)/%.pb-c.c | $(OUTPUT)/daemon
	$(call msg,CC,$@)
	$(Q)$(CC) $(filter-out -Wextra,$(CFLAGS)) -c $< -o $@

$(OUTPUT)/daemon/%.o: daemon/%.c $(SKELS) $(RUST_LIB) $(PB_HDRS) | $(OUTPUT)/daemon
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(OUTPUT)/cli/%.o: cli/%.c $(SKELS) $(RUST_LIB) | $(OUTPUT)/cli
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Icli -c $< -o $@

$(OUTPUT)/libengine.a: $(ENGINE_OBJS)
	$(call msg,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(OUTPUT)/lockscoped: $(OUTPUT)/daemon/main.o $(OUTPUT)/libengine.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LIBS) -o $@

$(OUTPUT)/lockscope: $(CLI_OBJS) $(OUTPUT)/libengine.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LIBS) -o $@

$(OUTPUT)/tests/test_%: tests/unit/test_%.c $(OUTPUT)/libengine.a $(CLI_OBJS) | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Icli $< $(filter-out $(OUTPUT)/cli/main.o,$(CLI_OBJS)) \
		$(OUTPUT)/libengine.a $(LIBS) -lcmocka -o $@

FUZZ_LINK = $(filter-out $(OUTPUT)/cli/main.o,$(CLI_OBJS)) $(OUTPUT)/libengine.a $(LIBS)

$(OUTPUT)/fuzz:
	$(Q)mkdir -p $@

$(OUTPUT)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(OUTPUT)/libengine.a $(CLI_OBJS) | $(OUTPUT)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CC) $(CFLAGS) -fsanitize=fuzzer -Icli $< $(FUZZ_LINK) -o $@

$(OUTPUT)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h tests/fuzz/replay.c $(OUTPUT)/libengine.a \
			  $(CLI_OBJS) | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Icli $< tests/fuzz/replay.c $(FUZZ_LINK) -o $@

# Workloads keep frame pointers unless they test unwinding without them:
#   mutex_server_nofp   the server built as distros build code (CFI, no frame pointers)
#   mutex_server_nocfi  the server with frame pointers and no CFI at all (JIT-like code):
#                       the unwinder must fall back to frame pointers
#   inline_locks        no frame pointers, the lock call inlined twice
$(OUTPUT)/workloads/uv_pool $(OUTPUT)/workloads/uv_async_spin: WORKLOAD_LIBS := -luv
$(OUTPUT)/workloads/inline_locks: WORKLOAD_FP := -fomit-frame-pointer
$(OUTPUT)/workloads/%: tests/workloads/%.c tests/workloads/workload.h | $(OUTPUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g $(or $(WORKLOAD_FP),-fno-omit-frame-pointer) $(WARN) -pthread $< $(WORKLOAD_LIBS) -o $@

# seed 001's reproducer is a tokio program: built by cargo, pinned by its Cargo.lock
$(OUTPUT)/workloads/tokio_tick: tests/workloads/tokio_tick/src/main.rs tests/workloads/tokio_tick/Cargo.toml \
				tests/workloads/tokio_tick/Cargo.lock | $(OUTPUT)/workloads
	$(call msg,CARGO,$@)
	$(Q)$(CARGO_RUN) build --quiet --release --locked --manifest-path tests/workloads/tokio_tick/Cargo.toml \
		--target-dir $(OUTPUT)/tokio_tick
	$(Q)cp $(OUTPUT)/tokio_tick/release/tokio_tick $@

$(OUTPUT)/workloads/mutex_server_nofp: tests/workloads/mutex_server.c tests/workloads/workload.h | $(OUTPUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -fomit-frame-pointer $(WARN) -pthread $< -o $@

$(OUTPUT)/workloads/mutex_server_nocfi: tests/workloads/mutex_server.c tests/workloads/workload.h | $(OUTPUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -fno-omit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables \
		$(WARN) -pthread $< -o $@.tmp
	$(Q)objcopy -R .eh_frame -R .eh_frame_hdr -R .debug_frame $@.tmp $@ && rm -f $@.tmp

# `make bench`: the overhead and capacity comparison (bench/run.py). Its own programs (the
# empty-hook floor) build here; the anchors (perf with BPF skeletons) in $(OUTPUT)/bench.
$(OUTPUT)/bench:
	$(Q)mkdir -p $@

# the floor's, the helpers' and the bound's programs (empty ones leave their arguments unused)
$(OUTPUT)/bench/%.bpf.o: bench/%.bpf.c bpf/arch.bpf.h $(BPF_OUT)/vmlinux.h | $(OUTPUT)/bench
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -Wno-unused-parameter -c $< -o $@.tmp
	$(Q)$(BPFTOOL) gen object $@ $@.tmp && rm -f $@.tmp

# the bound takes the futex commands and the slot cache's size from the scheduler's header
$(OUTPUT)/bench/bound.bpf.o: bpf/scheduler.h bpf/lockscope.h

$(OUTPUT)/bench/%.skel.h: $(OUTPUT)/bench/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $*_bpf > $@

$(OUTPUT)/bench/floor: bench/floor.c $(OUTPUT)/bench/floor.skel.h $(OUTPUT)/bench/helpers.skel.h \
		$(OUTPUT)/bench/bound.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -I$(OUTPUT)/bench $< -lbpf -lelf -lz -o $@

# bench/profile.py's map from a program's machine code to its source lines
$(OUTPUT)/bench/bpf_lines: bench/bpf_lines.c | $(OUTPUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $< -lbpf -lelf -lz -o $@

bench-tools: all $(OUTPUT)/bench/floor $(OUTPUT)/bench/bpf_lines
	$(Q)OUTPUT=$(OUTPUT) bench/anchors.sh

bench: bench-tools
	$(Q)OUTPUT=$(OUTPUT) $(PYTHON) bench/run.py

# lockscoped's memory under a long mixed load (bench/soak.py)
SOAK_MINUTES ?= 15
bench-soak: all
	$(Q)OUTPUT=$(OUTPUT) $(PYTHON) bench/soak.py --minutes $(SOAK_MINUTES)

# lockscoped's memory while its push backends are down (bench/push_dead.py)
PUSH_MINUTES ?= 5
bench-push: all
	$(Q)OUTPUT=$(OUTPUT) $(PYTHON) bench/push_dead.py --minutes $(PUSH_MINUTES)

unit-test: $(UNIT_BINS)
	$(Q)$(PYTHON) tests/layers.py
	$(Q)set -e; for t in $(UNIT_BINS); do echo "== $$t"; $$t; done

# The Parca end-to-end test's server, built from the Go module proxy at the version
# tests/parca/go.mod pins (~6 minutes the first time); one binary for every build flavour.
# `make test` has the suite build it (beside the other tests, at the lowest priority) when
# LOCKSCOPE_TEST_PARCA=1 or in CI, and runs the test when it is here.
PARCA := build/parca/parca
TEST_PARCA := $(or $(LOCKSCOPE_TEST_PARCA),$(if $(filter true,$(CI)),1,0))
parca: $(PARCA)
$(PARCA): tests/parca/go.mod tests/parca/go.sum tests/parca/parca.go
	$(Q)tests/parca/build.sh $@

integration-test: all $(REPLAY_BINS) $(K8S_TEST)
	$(Q)OUTPUT=$(OUTPUT) SAN=$(SAN) LOCKSCOPE_PARCA=$(abspath $(PARCA)) LOCKSCOPE_PARCA_BUILD=$(TEST_PARCA) \
		$(PYTHON) -m pytest -v --durations=12 tests/integration

# `make fuzz [FUZZ_TIME=s] [FUZZ_JOBS=n] [FUZZ_TARGETS=...]`: each target for FUZZ_TIME
# seconds, FUZZ_JOBS at once, from the checked-in seeds and what earlier runs found
ifeq ($(FUZZ),1)
fuzz: $(FUZZ_BINS)
	$(Q)tests/fuzz/run.sh $(OUTPUT) $(FUZZ_TIME) $(FUZZ_JOBS) $(FUZZ_TARGETS)

# rewrites tests/fuzz/corpus from real traffic (see tests/fuzz/seeds.sh)
fuzz-seeds: $(FUZZ_BINS)
	$(Q)tests/fuzz/seeds.sh $(OUTPUT) build
else
fuzz fuzz-seeds:
	$(Q)$(MAKE) --no-print-directory FUZZ=1 $@
endif

test: unit-test integration-test

# what `make test` runs, built and not run (CI builds the sanitizer build's beside the soak)
test-build: all $(UNIT_BINS) $(REPLAY_BINS) $(K8S_TEST)

$(OUTPUT)/tests/k8s.test: tests/k8s/go.mod tests/k8s/go.sum $(wildcard tests/k8s/*.go) | $(OUTPUT)/tests
	$(call msg,GO-TEST,$@)
	$(Q)cd tests/k8s && GOFLAGS=-mod=mod $(GO_CMD) test -c -o $(abspath $@) .

demo: all
	$(Q)tests/demo.sh $(OUTPUT)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin
	install -m 0755 $(OUTPUT)/lockscope $(DESTDIR)$(PREFIX)/bin/lockscope
	install -m 0755 $(OUTPUT)/lockscoped $(DESTDIR)$(PREFIX)/sbin/lockscoped
	install -d $(DESTDIR)$(PREFIX)/share/lockscope/schemas
	install -m 0644 schemas/*.json $(DESTDIR)$(PREFIX)/share/lockscope/schemas/
	install -m 0644 README.md $(DESTDIR)$(PREFIX)/share/lockscope/README.md
	install -d $(DESTDIR)$(PREFIX)/share/lockscope/docs
	install -m 0644 docs/*.md $(DESTDIR)$(PREFIX)/share/lockscope/docs/
	install -d $(DESTDIR)$(PREFIX)/share/lockscope/monitoring
	install -m 0644 deploy/monitoring/* $(DESTDIR)$(PREFIX)/share/lockscope/monitoring/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 $(OUTPUT)/man/lockscope.1 $(DESTDIR)$(PREFIX)/share/man/man1/lockscope.1
	install -m 0644 $(OUTPUT)/man/lockscoped.8 $(DESTDIR)$(PREFIX)/share/man/man8/lockscoped.8
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions
	install -m 0644 deploy/completion/lockscope.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/lockscope
	install -m 0644 deploy/completion/_lockscope $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_lockscope
	install -d $(DESTDIR)/lib/systemd/system $(DESTDIR)/usr/lib/sysusers.d
	install -m 0644 $(OUTPUT)/lockscoped.service $(DESTDIR)/lib/systemd/system/lockscoped.service
	install -m 0644 deploy/systemd/lockscope.sysusers $(DESTDIR)/usr/lib/sysusers.d/lockscope.conf
	install -d $(DESTDIR)/etc/lockscope
	@# an edited config is the admin's: never overwritten
	test -e $(DESTDIR)/etc/lockscope/lockscoped.conf || \
		install -m 0644 deploy/lockscoped.conf $(DESTDIR)/etc/lockscope/lockscoped.conf
	@test -n "$(DESTDIR)" || ! command -v systemd-sysusers >/dev/null || systemd-sysusers lockscope.conf

# Man pages from the programs' own --help and --version (help2man): one source, so the
# page and the help cannot drift apart (test_cli.py checks every option is in both).
$(OUTPUT)/man/lockscope.1: $(OUTPUT)/lockscope
	$(call msg,MAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)help2man --no-info --section=1 --name="show lock and spin contention seen by lockscoped" \
		--output=$@ $<
$(OUTPUT)/man/lockscoped.8: $(OUTPUT)/lockscoped
	$(call msg,MAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)help2man --no-info --section=8 --name="eBPF lock and spin profiler daemon" --output=$@ $<

# The unit with this install's paths; MEMORY_MAX is the footprint the README measures, doubled
MEMORY_MAX ?= 256M
$(OUTPUT)/lockscoped.service: deploy/systemd/lockscoped.service.in Makefile | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)sed -e 's|@SBINDIR@|$(PREFIX)/sbin|' -e 's|@DOCDIR@|$(PREFIX)/share/lockscope|' \
		-e 's|@MEMORY_MAX@|$(MEMORY_MAX)|' $< > $@

# The shipped config: every key commented out at its default, from the daemon's own table
# (test_config.py fails when this file and the table disagree).
config: $(OUTPUT)/lockscoped
	$(call msg,GEN,deploy/lockscoped.conf)
	$(Q){ echo "# /etc/lockscope/lockscoped.conf: lockscoped's settings. Every key is shown commented out"; \
	      echo "# at its default; uncomment to change. Command-line --KEY=VALUE options win over this"; \
	      echo "# file. 'systemctl reload lockscoped' (SIGHUP) applies the keys marked (reload)."; \
	      $(OUTPUT)/lockscoped --dump-config | sed -e '1,2d' -e 's/^\([a-z]\)/#\1/'; } > deploy/lockscoped.conf

clean:
	rm -rf $(OUTPUT)

-include $(wildcard $(BPF_OUT)/*.bpf.d $(OUTPUT)/daemon/*.d $(OUTPUT)/daemon/*/*.d $(OUTPUT)/cli/*.d $(OUTPUT)/tests/*.d)

# agentic: one static binary, built with musl from src/ and the pinned third_party libraries.
#
#   make          build ./agentic (static, stripped) and print its size
#   make check    unit tests (glibc + ASan/UBSan), fuzz corpus replay, integration tests, the
#                 real e2b SDK against agenticd (tests/e2b)
#   make bench    benchmarks, printed as ratios against their peers
#   make soak     the long scenarios: the e2b SDK's 70 s command (tests/e2b/soak.test.mjs)
#   make simulate the deterministic simulation (tests/sim): SEEDS=N seeds, or SEED=n to replay one
#   make fuzz     libFuzzer builds of every tests/fuzz/fuzz_*.c (clang)
#   make vm-kernel  the VM runtime's guest kernel (third_party/kernel.lock) into build/vm/
#   make install  PREFIX=/usr/local: the binary and its applet links (never a test program),
#                 and build/vm/ (when made) as PREFIX/lib/agentic/vm/
#   make uninstall  the same PREFIX (and DESTDIR): the binary, every link to it, lib/agentic/vm/
#   make clean

MUSL_CC  ?= musl-gcc
CC       ?= cc
CLANG    ?= clang
PREFIX   ?= /usr/local
BUILD    := build
TP_OUT   := $(CURDIR)/$(BUILD)/third_party
KINC     := $(CURDIR)/$(BUILD)/kinc
GEN      := $(BUILD)/gen

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
STD      := -std=c11 -D_GNU_SOURCE
# No paths or timestamps may reach the binary: the same commit builds bit-identical output.
REPRO    := -ffile-prefix-map=$(CURDIR)/= -fno-ident
# No unwind tables in our objects: nothing in agentic unwinds (C, no exceptions, no backtraces:
# a failed ASSERT prints its file, line and condition), and they were 87 KB of the binary.
MUSL_CFLAGS := $(STD) $(WARN) -O2 $(REPRO) -DAGENTIC_STATIC_ALLOC -fno-asynchronous-unwind-tables \
	       -ffunction-sections -fdata-sections \
	       -isystem $(KINC) -I$(TP_OUT)/include -Isrc -I$(GEN)
MUSL_LDFLAGS := -static -s -Wl,--build-id=none -Wl,--gc-sections
TEST_CFLAGS := $(STD) $(WARN) -g -O1 -fno-omit-frame-pointer \
	       -fsanitize=address,undefined -fno-sanitize-recover=undefined -Isrc -I$(GEN)
# The test build links Debian's protobuf-c (libprotobuf-c-dev); the static binary links ours.
TEST_LDFLAGS := -fsanitize=address,undefined -lprotobuf-c
TP_PBC   := $(TP_OUT)/lib/libprotobuf-c.a
# BearSSL (src/tls/tls.c): the static binary links the musl build from third_party; the test
# builds link the same pinned source compiled with the system compiler (no Debian package).
TP_BEARSSL := $(TP_OUT)/lib/libbearssl.a
BEARSSL_SRC := $(TP_OUT)/src/bearssl
ASAN_BEARSSL := $(BUILD)/asan/bearssl/libbearssl.a
TEST_LDFLAGS += $(ASAN_BEARSSL)

PROTOS   := $(sort $(wildcard proto/*.proto))
GEN_SRCS := $(PROTOS:proto/%.proto=$(GEN)/%.pb-c.c)
GEN_HDRS := $(GEN_SRCS:.c=.h)
SRCS     := $(sort $(wildcard src/*/*.c)) $(GEN_SRCS)
# Messages only test programs speak (proto/grpctest.proto): built, never linked into agentic.
TEST_GEN_SRCS := $(GEN)/grpctest.pb-c.c
LIB_OBJS := $(patsubst %.c,$(BUILD)/musl/%.o,$(filter-out $(TEST_GEN_SRCS),$(SRCS)))
MAIN_OBJ := $(BUILD)/musl/src/main.o
# Code off every hot path is built for size: the CLI, the verifier and its probe, the VM image
# builder, the pruner, config and profile reading, the fleet, the E2B key store, network
# options and control plane (create, list, kill), the Engine API's request bodies and a create
# request's checks (the engine's own work dwarfs both), the host's uid claims and the recovery
# at agenticd's start, its footprint on the host and the seccomp profile it reads once, the
# admin API's posture views and its v2 routes, the metrics' text, the engine's blocking calls
# (recovery's), a workspace's image, mount and deletion (the engine's create and a loop
# device's setup dwarf them), and the VM runtime's create, accelerator probe and QEMU's start
# (a guest's boot dwarfs them). The exec, agent, egress, gRPC and HTTP paths stay -O2 (make
# bench measures them).
COLD_DIRS := cli verify vmimage prune config profile fleet
COLD_OBJS := $(filter $(COLD_DIRS:%=$(BUILD)/musl/src/%/%),$(LIB_OBJS)) \
	     $(BUILD)/musl/src/e2b/e2b_net.o $(BUILD)/musl/src/e2b/e2b_keys.o \
	     $(BUILD)/musl/src/e2b/e2b_api.o $(BUILD)/musl/src/docker/requests.o \
	     $(BUILD)/musl/src/sandbox/reqcheck.o $(BUILD)/musl/src/workspace/host_uids.o \
	     $(BUILD)/musl/src/lifecycle/recover.o $(BUILD)/musl/src/runtime/runtime_vm_create.o \
	     $(BUILD)/musl/src/admin/admin_info.o $(BUILD)/musl/src/admin/admin_posture.o \
	     $(BUILD)/musl/src/daemon/seccomp.o $(BUILD)/musl/src/workspace/host.o \
	     $(BUILD)/musl/src/runtime/runtime_vm_accel.o $(BUILD)/musl/src/runtime/runtime_vm_spawn.o \
	     $(BUILD)/musl/src/workspace/workspace.o $(BUILD)/musl/src/workspace/share.o \
	     $(BUILD)/musl/src/workspace/workspace_rm.o $(BUILD)/musl/src/metrics/metrics.o \
	     $(BUILD)/musl/src/docker/blocking.o $(BUILD)/musl/src/admin/admin_v2.o
$(COLD_OBJS): MUSL_CFLAGS += -Os
TEST_OBJS := $(SRCS:%.c=$(BUILD)/asan/%.o)
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/asan/unit/%,$(wildcard tests/unit/test_*.c))
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
REPLAYS  := $(FUZZ_NAMES:%=$(BUILD)/asan/replay/fuzz_%)
FUZZERS  := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
# Integration programs: tests/integration/test_X.c builds here and runs through the executable
# wrapper tests/integration/test_X, which tests/run finds (it needs the real engine).
INTEG_PROGS := $(patsubst tests/integration/%.c,$(BUILD)/asan/integration/%,$(wildcard tests/integration/test_*.c))
# Benchmark drivers: tools/bench/X.c builds against the production (musl, -O2) objects.
BENCH_PROGS := $(patsubst tools/bench/%.c,$(BUILD)/musl/bench/%,$(wildcard tools/bench/*.c))

.PHONY: all check bench bench-capacity soak fuzz demo images install uninstall clean third_party bootstrap test-build simulate \
	vm-kernel
all: agentic

$(KINC):
	mkdir -p $@
	ln -sfn /usr/include/linux $@/linux
	ln -sfn /usr/include/x86_64-linux-gnu/asm $@/asm
	ln -sfn /usr/include/asm-generic $@/asm-generic

# After the libraries' own rule, never beside it: two makes in third_party at once (make -j)
# would share one apt index and lock each other out.
third_party: $(TP_BEARSSL) | $(KINC)
	$(MAKE) -C third_party OUT=$(TP_OUT) KINC=$(KINC)

# protobuf-c's runtime for the static build comes from third_party (built when missing).
$(TP_PBC): | $(KINC)
	$(MAKE) -C third_party OUT=$(TP_OUT) KINC=$(KINC)
# The same make builds every library: after TP_PBC's run this one finds nothing to do.
$(TP_BEARSSL): $(TP_PBC)
	$(MAKE) -C third_party OUT=$(TP_OUT) KINC=$(KINC)

# BearSSL's own makefile, pointed at a build folder of ours: its source tree is left as it is.
$(ASAN_BEARSSL): $(TP_BEARSSL)
	$(MAKE) -s -C $(BEARSSL_SRC) CC=$(CC) LD=$(CC) CFLAGS='-W -Wall -O2 -g' \
		BUILD=$(CURDIR)/$(BUILD)/asan/bearssl ARFLAGS=-rcsD lib

# ---- messages: proto/X.proto -> build/gen/X.pb-c.{c,h} with protoc-c ----
$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto
	@mkdir -p $(@D)
	protoc-c --c_out=$(GEN) -Iproto $<
.SECONDARY: $(GEN_SRCS) $(GEN_HDRS)

$(BUILD)/musl/%.o: %.c | $(KINC) $(GEN_HDRS) $(TP_PBC)
	@mkdir -p $(@D)
	$(MUSL_CC) $(MUSL_CFLAGS) -MMD -MP -c $< -o $@

# The init's code first in the link: an idle agentic-init's resident text is every 64 KiB
# window of the file it has touched (a page fault maps the page's neighbours too), so the code
# it runs (its own, gRPC, HTTP/2, base, the messages) sits together at the start of the text
# rather than spread among agenticd's. bench_init's init_rss_idle measures it. main.o (the
# applet dispatch) and protobuf-c come right after it: at the end of the link, where an
# archive's members land by default, every change to agenticd's code moved them across a
# window's edge (one such move cost the idle init 60 KiB). protobuf-c is named again after
# agenticd's objects for what only they use.
INIT_LINK_OBJS := $(filter $(patsubst %,$(BUILD)/musl/src/%/%,init grpc h2 base) \
		  $(BUILD)/musl/$(GEN)/%,$(LIB_OBJS))
LINK_OBJS := $(INIT_LINK_OBJS) $(filter-out $(INIT_LINK_OBJS),$(LIB_OBJS))
agentic: $(LINK_OBJS) $(MAIN_OBJ) $(TP_PBC) $(TP_BEARSSL)
	$(MUSL_CC) $(MUSL_LDFLAGS) -o $@ $(INIT_LINK_OBJS) $(MAIN_OBJ) $(TP_PBC) \
		$(filter-out $(INIT_LINK_OBJS),$(LIB_OBJS)) $(TP_PBC) $(TP_BEARSSL)
	@echo "agentic: $$(stat -c %s $@) bytes, $$(file -b $@ | cut -d, -f1-5)"

# ---- tests: the same sources against glibc, with ASan and UBSan ----
$(BUILD)/asan/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/asan/src/tls/tls.o: TEST_CFLAGS += -I$(BEARSSL_SRC)/inc
$(BUILD)/asan/src/tls/tls.o: | $(ASAN_BEARSSL)
$(BUILD)/asan/src/workspace/host.o: TEST_CFLAGS += -I$(BEARSSL_SRC)/inc
$(BUILD)/asan/src/workspace/host.o: | $(ASAN_BEARSSL)
$(BUILD)/asan/src/e2b/e2b_keys.o: TEST_CFLAGS += -I$(BEARSSL_SRC)/inc
$(BUILD)/asan/src/e2b/e2b_keys.o: | $(ASAN_BEARSSL)
$(BUILD)/asan/unit/test_e2b_keys: TEST_CFLAGS += -I$(BEARSSL_SRC)/inc
$(BUILD)/asan/src/vmimage/image.o: TEST_CFLAGS += -I$(BEARSSL_SRC)/inc
$(BUILD)/asan/src/vmimage/image.o: | $(ASAN_BEARSSL)
$(BUILD)/asan/src/e2b/e2b_state.o: TEST_CFLAGS += -I$(BEARSSL_SRC)/inc
$(BUILD)/asan/src/e2b/e2b_state.o: | $(ASAN_BEARSSL)

$(BUILD)/asan/libagentic.a: $(TEST_OBJS) | $(ASAN_BEARSSL)
	rm -f $@
	ar rcs $@ $(TEST_OBJS)

# A unit test that stands in for a layer below the one it tests names the functions it wraps.
UNIT_WRAP_test_exec_sink := -Wl,--wrap=exec_stdin,--wrap=exec_detach,--wrap=grpc_call_send \
	-Wl,--wrap=exec_resize \
	-Wl,--wrap=grpc_call_flush,--wrap=grpc_call_finish,--wrap=grpc_call_set_user
UNIT_WRAP_test_e2b_process := -Wl,--wrap=exec_begin,--wrap=exec_stdin,--wrap=exec_signal \
	-Wl,--wrap=exec_detach,--wrap=exec_resize,--wrap=exec_alive,--wrap=e2b_sandbox,--wrap=e2b_path,--wrap=e2b_query \
	-Wl,--wrap=e2b_header,--wrap=e2b_body,--wrap=e2b_reply,--wrap=e2b_reply_error \
	-Wl,--wrap=e2b_connect_error,--wrap=e2b_stream_begin,--wrap=e2b_stream_write \
	-Wl,--wrap=e2b_stream_hold,--wrap=e2b_stream_end,--wrap=e2b_conn_attach,--wrap=e2b_ref_of \
	-Wl,--wrap=e2b_conn_get,--wrap=e2b_user_check
# The E2B file routes over stand-ins of the connection layer and the fileop client.
E2B_FILES_WRAPS := e2b_query e2b_header e2b_sandbox e2b_body e2b_reply e2b_reply_error \
	e2b_connect_error e2b_stream_begin e2b_stream_write e2b_stream_room e2b_stream_end \
	e2b_conn_attach e2b_body_pause e2b_body_resume e2b_ref_of e2b_conn_get e2b_user_check \
	e2b_path_resolve fileop_begin fileop_write fileop_cancel
UNIT_WRAP_test_e2b_files := $(E2B_FILES_WRAPS:%=-Wl,--wrap=%)
$(BUILD)/asan/unit/%: tests/unit/%.c $(BUILD)/asan/libagentic.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(BUILD)/asan/libagentic.a $(TEST_LDFLAGS) -lcmocka \
		$(UNIT_WRAP_$*)

$(BUILD)/asan/replay/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(BUILD)/asan/libagentic.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $< tests/fuzz/replay_main.c $(BUILD)/asan/libagentic.a $(TEST_LDFLAGS)

# The mutation test (tests/integration/test_assert_live): the h2 engine with its stream count
# broken (a new stream not counted) must stop on its ASSERT when the h2 fuzz corpus is
# replayed, so the assertions are shown live. The mutant is made from src/h2/h2.c by sed.
MUTANT := $(BUILD)/asan/mutant/fuzz_h2_uncounted
$(MUTANT): tests/fuzz/fuzz_h2_frames.c tests/fuzz/replay_main.c src/h2/h2.c $(BUILD)/asan/libagentic.a
	@mkdir -p $(@D)
	sed 's|^\t\tc->nstreams++;$$|\t\t/* mutant: the new stream is not counted */|' src/h2/h2.c \
		> $(@D)/h2_uncounted.c
	! cmp -s src/h2/h2.c $(@D)/h2_uncounted.c
	$(CC) $(TEST_CFLAGS) -o $@ $< tests/fuzz/replay_main.c $(@D)/h2_uncounted.c \
		$(BUILD)/asan/libagentic.a $(TEST_LDFLAGS)

# Static probes: small musl programs over the real objects, for what ASan builds cannot show.
$(BUILD)/musl/probe/%: tests/static/%.c $(LIB_OBJS) $(TP_PBC) $(TP_BEARSSL)
	@mkdir -p $(@D)
	$(MUSL_CC) $(MUSL_CFLAGS) -static -o $@ $< $(LIB_OBJS) $(TP_PBC) $(TP_BEARSSL)

# The credential route's probe (tests/static) once more under ASan: its relay loop checked for
# memory errors by tests/integration/test_egress_route_tls.
ASAN_PROBES := $(BUILD)/asan/probe/egress_route_tls
$(BUILD)/asan/probe/%: tests/static/%.c $(BUILD)/asan/libagentic.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(BUILD)/asan/libagentic.a $(TEST_LDFLAGS)

$(BUILD)/asan/integration/%: tests/integration/%.c $(BUILD)/asan/libagentic.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(BUILD)/asan/libagentic.a $(TEST_LDFLAGS)

$(BUILD)/musl/bench/%: tools/bench/%.c $(LIB_OBJS) $(TP_PBC) $(TP_BEARSSL)
	@mkdir -p $(@D)
	$(MUSL_CC) $(MUSL_CFLAGS) -static -o $@ $< $(LIB_OBJS) $(TP_PBC) $(TP_BEARSSL)

# agentic-grpctest: the gRPC test service, interop client and `make bench` load generator. A
# test program over the product's musl objects, like tests/static: never an applet, never
# installed (tests/integration/test_applets fails if it re-enters the applet table).
GRPCTEST := $(BUILD)/musl/agentic-grpctest
TEST_GEN_OBJS := $(TEST_GEN_SRCS:%.c=$(BUILD)/musl/%.o)
$(GRPCTEST): tests/grpctest/grpctest.c $(LIB_OBJS) $(TEST_GEN_OBJS) $(TP_PBC) $(TP_BEARSSL)
	@mkdir -p $(@D)
	$(MUSL_CC) $(MUSL_CFLAGS) -static -o $@ $< $(LIB_OBJS) $(TEST_GEN_OBJS) $(TP_PBC) \
		$(TP_BEARSSL)

# The deterministic simulation: agenticd's objects driving tests/sim's fake runtime, with the
# gRPC calls of the agent socket, the clock, the random ids and the peer pidfds wrapped.
SIM_SRCS  := $(wildcard tests/sim/*.c)
SIM_WRAPS := clock_mono_ms clock_wall_ms random_hex uuid7 close malloc calloc realloc free \
	     idalloc_free runlog_output sandbox_pidfd_pid sandbox_read_pid_ns \
	     metrics_provision \
	     metrics_refusal grpc_call_send grpc_call_finish grpc_call_flush grpc_call_md \
	     grpc_call_peer grpc_call_set_user grpc_call_user grpc_call_app \
	     grpc_server_drop_reserved share_make_workspace share_mount_workspace share_retire \
	     docker_network_create_begin docker_network_list_begin docker_network_remove_begin \
	     docker_container_create_begin docker_container_start_begin \
	     docker_container_inspect_begin docker_container_stop_begin \
	     docker_container_logs_begin docker_container_remove_begin \
	     docker_container_list_begin docker_events_begin docker_call_step docker_call_run \
	     docker_call_fd docker_call_events docker_call_timeout_ms docker_call_end \
	     docker_result_id docker_result_container docker_result_each \
	     docker_result_each_subnet docker_container_inspect docker_container_remove \
	     docker_network_remove docker_network_inspect docker_network_inspect_begin \
	     docker_result_network docker_image_list_begin docker_result_each_tag
SIM_PROG  := $(BUILD)/asan/sim/test_simulation
$(SIM_PROG): $(SIM_SRCS) tests/sim/sim.h $(BUILD)/asan/libagentic.a
	@mkdir -p $(@D)
	@echo "CC $@ (with $(words $(SIM_WRAPS)) functions wrapped)"
	@$(CC) $(TEST_CFLAGS) -o $@ $(SIM_SRCS) $(BUILD)/asan/libagentic.a $(TEST_LDFLAGS) \
		$(SIM_WRAPS:%=-Wl,--wrap=%)

# The simulator over a lifecycle with one invariant broken on purpose (a call's end not
# recorded, so the next call of that sandbox begins while one runs): it must stop on the
# ASSERT in lc_begin (tests/integration/test_assert_live). The mutant's objects come before
# the library, so its events.c stands in for the real one.
SIM_MUTANT := $(BUILD)/asan/mutant/sim_call_stuck
$(SIM_MUTANT): $(SIM_SRCS) tests/sim/sim.h src/lifecycle/events.c $(BUILD)/asan/libagentic.a
	@mkdir -p $(@D)
	sed 's|^\tlc_slot(sb)->call_active = false;$$|\t/* mutant: the call stays active */|' \
		src/lifecycle/events.c > $(@D)/events_call_stuck.c
	! cmp -s src/lifecycle/events.c $(@D)/events_call_stuck.c
	@$(CC) $(TEST_CFLAGS) -o $@ $(SIM_SRCS) $(@D)/events_call_stuck.c \
		$(BUILD)/asan/libagentic.a $(TEST_LDFLAGS) $(SIM_WRAPS:%=-Wl,--wrap=%)

# SEEDS=N seeds from SEED_BASE (default 1), or SEED=n alone (its trace printed on failure).
SEEDS ?= 1000
simulate: $(SIM_PROG)
	SEEDS=$(SEEDS) $(SIM_PROG)

PROBES   := $(patsubst tests/static/%.c,$(BUILD)/musl/probe/%,$(wildcard tests/static/*.c))
test-build: $(UNIT_TESTS) $(REPLAYS) $(MUTANT) $(SIM_MUTANT) $(PROBES) $(ASAN_PROBES) $(INTEG_PROGS) $(GRPCTEST) $(SIM_PROG)

check: bootstrap
	$(MAKE) all third_party test-build vm-kernel
	tools/dockerd-up
	tools/build-images
	tests/e2b/install || true # a skip or failure is the suite's to report (tests/e2b/run)
	tests/run

# The sandbox images, imported into the local engine (no registry): tools/build-images.
images: all
	tools/dockerd-up
	tools/build-images

bootstrap:
	@tools/bootstrap

# One command on a fresh Debian 12 machine (as root): tools/demo says what it shows.
demo: bootstrap
	$(MAKE) all
	tools/dockerd-up
	tools/build-images
	tools/demo

bench: all $(BENCH_PROGS) $(GRPCTEST) vm-kernel
	tools/bench/run

# One host's capacity: bench_agenticd's scale rows up to 1000 idle sandboxes (about 40 minutes
# on a 2-core machine; 16 MiB of workspace each, so some 17 GB of disk and as much memory as
# 1000 containers take). Not part of `make bench`.
bench-capacity: all
	BENCH_SCALE="0 250 500 1000" BENCH_RUNS=5 tools/bench/bench_agenticd

soak: bootstrap all
	tools/dockerd-up
	tools/build-images
	tests/e2b/install || true
	tests/e2b/run soak

# ---- the VM runtime's guest kernel: Debian's cloud kernel, pinned in third_party/kernel.lock ----
# build/vm/ holds only what this rule makes (it is replaced whole): vmlinuz, vmlinux (the same
# kernel uncompressed, which QEMU boots through its PVH entry: under TCG the bzImage's own
# decompressor is emulated, some 0.7 s of every boot; tools/vm-extract-vmlinux), kernel.release and
# modules/ with the virtio modules as plain .ko files and load-order, the order to insmod them in
# (the package has no modules.dep). Never installed on the host: dpkg-deb -x into build/vm-fetch,
# the files below copied out, the rest (~100 MB) deleted. Its own apt state (build/vm-fetch/apt):
# a deb index, never third_party's deb-src one. OFFLINE=1 and TP_CACHE (absolute) as for
# third_party.
VM       := $(BUILD)/vm
VM_LOCK  := third_party/kernel.lock
VM_TMP   := $(CURDIR)/$(BUILD)/vm-fetch
VM_CACHE := $(abspath $(or $(TP_CACHE),third_party/cache))
# Paths under lib/modules/RELEASE/kernel/, in load order.
VM_MODULE_PATHS := drivers/virtio/virtio_ring.ko drivers/virtio/virtio.ko \
	drivers/virtio/virtio_mmio.ko drivers/char/virtio_console.ko drivers/block/virtio_blk.ko
VM_MODULES := $(basename $(notdir $(VM_MODULE_PATHS)))
VM_OUT   := $(VM)/vmlinuz $(VM)/vmlinux $(VM)/kernel.release $(VM)/modules/load-order \
	    $(VM_MODULES:%=$(VM)/modules/%.ko)
VM_FETCH := TP_LOCK=$(CURDIR)/$(VM_LOCK) TP_CACHE=$(VM_CACHE) TP_STATE=$(VM_TMP)/apt \
	    $(CURDIR)/third_party/fetch.sh

vm-kernel: $(VM_OUT)

# One run makes every file (a grouped target): the release is the package name's tail.
$(VM_OUT) &: $(VM_LOCK) third_party/fetch.sh tools/vm-extract-vmlinux Makefile
	$(VM_FETCH) get-deb
	@set -e; \
	pkg=$$(awk '!/^[[:space:]]*(#|$$)/ { print $$1 }' $(VM_LOCK)); \
	case $$pkg in linux-image-?*) ;; *) pkg=;; esac; \
	if [ -z "$$pkg" ] || [ "$$(printf '%s\n' "$$pkg" | wc -l)" != 1 ]; then \
		echo "vm-kernel: $(VM_LOCK) must pin exactly one linux-image-RELEASE package" >&2; exit 1; \
	fi; \
	rel=$${pkg#linux-image-}; u=$(VM_TMP)/unpack; s=$(VM_TMP)/stage; \
	trap 'rm -rf "$$u" "$$u.tmp" "$$s"' EXIT; \
	rm -rf "$$s"; mkdir -p "$$s/modules"; \
	echo "vm-kernel: unpacking $$pkg"; \
	$(VM_FETCH) unpack-deb "$$pkg" "$$u"; \
	for f in boot/vmlinuz-$$rel $(VM_MODULE_PATHS:%=lib/modules/$$rel/kernel/%); do \
		[ -f "$$u/$$f" ] || { echo "vm-kernel: $$pkg has no $$f (see VM_MODULE_PATHS)" >&2; exit 1; }; \
	done; \
	install -m 0644 "$$u/boot/vmlinuz-$$rel" "$$s/vmlinuz"; \
	tools/vm-extract-vmlinux "$$s/vmlinuz" "$$s/vmlinux"; \
	for p in $(VM_MODULE_PATHS); do install -m 0644 "$$u/lib/modules/$$rel/kernel/$$p" "$$s/modules/"; done; \
	printf '%s\n' $(VM_MODULES) >"$$s/modules/load-order"; \
	printf '%s\n' "$$rel" >"$$s/kernel.release"; \
	rm -rf $(VM) && mv "$$s" $(VM); \
	echo "vm-kernel: $(VM)/vmlinuz ($$rel) and $(words $(VM_MODULES)) modules"

# ---- libFuzzer builds (clang) ----
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(SRCS) $(ASAN_BEARSSL)
	@mkdir -p $(@D)
	$(CLANG) $(STD) -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -I$(GEN) \
		-I$(BEARSSL_SRC)/inc -o $@ $< $(SRCS) -lprotobuf-c $(ASAN_BEARSSL)

fuzz: $(FUZZERS)

# The links point at `agentic` beside them (relative), so a DESTDIR staging tree moves intact;
# --force also removes links to the binary named after an applet it no longer has.
install: agentic
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 agentic $(DESTDIR)$(PREFIX)/bin/agentic
	$(DESTDIR)$(PREFIX)/bin/agentic --install $(DESTDIR)$(PREFIX)/bin --force
	@vm='$(DESTDIR)$(PREFIX)/lib/agentic/vm'; \
	if [ -f $(VM)/vmlinuz ]; then \
		set -e; rm -rf "$$vm"; install -d "$$vm/modules"; \
		install -m 0644 $(VM)/vmlinuz $(VM)/vmlinux $(VM)/kernel.release "$$vm/"; \
		install -m 0644 $(VM)/modules/* "$$vm/modules/"; \
		echo "installed $(VM)/ as $$vm"; \
	else echo "install: no $(VM)/vmlinuz (make vm-kernel): the VM kernel is not installed"; fi

# Removes the installed binary and every agentic* symlink beside it that resolves to it;
# anything else (a regular file, a link elsewhere) stays.
uninstall:
	@bin='$(DESTDIR)$(PREFIX)/bin'; \
	for l in "$$bin"/agentic?*; do \
		if [ -L "$$l" ] && [ "$$l" -ef "$$bin/agentic" ]; then rm -f "$$l" && echo "removed $$l"; fi; \
	done; \
	if [ -f "$$bin/agentic" ]; then rm -f "$$bin/agentic" && echo "removed $$bin/agentic"; fi; \
	vm='$(DESTDIR)$(PREFIX)/lib/agentic/vm'; \
	if [ -d "$$vm" ]; then rm -rf "$$vm" && echo "removed $$vm"; fi; \
	rmdir "$${vm%/vm}" 2>/dev/null || true

clean:
	rm -rf $(BUILD) agentic

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

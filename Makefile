# leakref — top-level build. `make help` lists targets.
SHELL      := /bin/bash
PREFIX     ?= /usr/local
BUILD      ?= build
CXX        ?= g++
CC         ?= gcc
OPT        ?= -O2
SAN        ?=
DEBUG      ?= -g
CXXFLAGS   ?= $(OPT) $(DEBUG)
CXXFLAGS   += -std=c++20 -Wall -Wextra -Werror -fPIC -I. -I$(BUILD)/gen $(SAN)
LDLIBS     := -ldw -lelf -ldebuginfod -lkdumpfile -laddrxlat -lfmt -lsqlite3 -lzstd -llzma -llz4 -lz $(SAN)

# The engine is corelib/<layer>/, one static library per layer, bottom up
# (a layer includes only its own headers and those of the layers below it:
# `make check-layers`). targets/<name>/ holds what one program, kernel or
# allocator needs (its profile TOML and the C++ it takes beyond it), each a
# library over the engine; frontend/ holds the commands the CLI (cli/) and
# the crash extension (extension/) share. Includes are written from the top
# of the tree ("corelib/dump/memory.hpp"), so every include names its layer.
LAYERS     := $(shell sed -e 's/\#.*//' corelib/LAYERS)
TARGETS    := glibc jemalloc tcmalloc linux glusterfs nfs-ganesha libstdcxx libcxx cpython
layer_src   = $(wildcard corelib/$(1)/*.cpp)
target_src  = $(wildcard targets/$(1)/*.cpp)
CORE_SRC   := $(foreach l,$(LAYERS),$(call layer_src,$(l)))
TGT_SRC    := $(foreach t,$(TARGETS),$(call target_src,$(t))) $(wildcard targets/*.cpp)
ENGINE_SRC := $(CORE_SRC) $(TGT_SRC)
CORE_OBJ   := $(ENGINE_SRC:%.cpp=$(BUILD)/%.o)
LAYER_LIBS := $(foreach l,$(LAYERS),$(BUILD)/lib/libleakref-$(l).a)
TGT_LIBS   := $(BUILD)/lib/libleakref-targets.a $(foreach t,$(TARGETS),$(BUILD)/lib/libleakref-target-$(t).a)
# Linked top first: targets over the layers, each layer over those below
# (engine_libs: those of the build directory $(1)).
LAYERS_DOWN := $(shell echo $(LAYERS) | tr ' ' '\n' | tac)
engine_libs = $(1)/lib/libleakref-targets.a $(foreach t,$(TARGETS),$(1)/lib/libleakref-target-$(t).a) \
              $(foreach l,$(LAYERS_DOWN),$(1)/lib/libleakref-$(l).a)
ENGINE_LIBS := $(call engine_libs,$(BUILD))
FE_SRC     := $(wildcard frontend/*/*.cpp)
FE_OBJ     := $(FE_SRC:%.cpp=$(BUILD)/%.o)
# FE_UNITY=N builds the front end as N unity files (each #includes every
# Nth front-end source) instead of one object per file: its 30 files repeat
# the same template instantiations (nlohmann-json, CLI11, fmt), which at -O0
# are most of their compile time, so N units take a tenth of it. The demo's
# quick build uses it; everyday builds keep one object per file for quick
# rebuilds. `make check-unity` keeps the sources fit for it.
FE_UNITY   ?=
ifneq ($(FE_UNITY),)
FE_UNITS   := $(shell seq 1 $(FE_UNITY))
FE_OBJ     := $(FE_UNITS:%=$(BUILD)/unity/frontend-%.o)
endif
FE_LIB     := $(BUILD)/lib/libleakref-frontend.a
CLI_SRC    := $(wildcard cli/*.cpp)
CLI_OBJ    := $(CLI_SRC:%.cpp=$(BUILD)/%.o)
TEST_SRC   := $(wildcard tests/*.cpp)
TEST_OBJ   := $(TEST_SRC:%.cpp=$(BUILD)/%.o)
# What `make install` ships for programs built on the engine: every library
# above in one archive.
LIB        := $(BUILD)/libleakref.a
BIN        := $(BUILD)/leakref
# The crash extension (its rules are below; `all` needs the name here).
EXT        := $(BUILD)/leakref.so
TESTBIN    := $(BUILD)/leakref-tests

NPROC      ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all lib extension bench-kernel test test-quick test-durations provision test-build-deps test-build test-sanitize-build test-sanitize-durations test-deps check-layers check-unity check-functions test-sanitize fuzz fuzz-build bench bench-trace demo install clean deps fixtures format format-check help

# Bundled profiles (data): targets/<target>/*.toml, copied flat
# beside the binaries, where `--profile NAME` finds them in a build tree; the
# files their [build] includes (targets/<target>/<dir>/*) keep
# their <dir>.
PROFILE_SRC := $(wildcard targets/*/*.toml)
PROFILES    := $(addprefix $(BUILD)/profiles/,$(notdir $(PROFILE_SRC)))
PROFILE_AUX_SRC := $(wildcard targets/*/*/*)
PROFILE_AUX := $(foreach f,$(PROFILE_AUX_SRC),$(BUILD)/profiles/$(word 3,$(subst /, ,$(f)))/$(notdir $(f)))
PROFILES    += $(PROFILE_AUX)

all: $(BIN) fixtures $(EXT) $(PROFILES) $(BUILD)/compile_commands.json

# For clangd and other tools: one entry per C++ source, with the flags make uses.
$(BUILD)/compile_commands.json: Makefile $(ENGINE_SRC) $(FE_SRC) $(CLI_SRC) $(TEST_SRC)
	@mkdir -p $(dir $@)
	@{ echo '['; sep=''; \
	  for f in $(ENGINE_SRC) $(FE_SRC) $(CLI_SRC) extension/crash_glue.cpp bench/walk_repeat.cpp; do \
	    printf '%s{"directory":"%s","file":"%s","command":"%s %s -c %s"}\n' "$$sep" "$(CURDIR)" "$$f" "$(CXX)" "$(CXXFLAGS)" "$$f"; sep=','; done; \
	  for f in $(TEST_SRC); do \
	    printf ',{"directory":"%s","file":"%s","command":"%s %s -Itests -c %s"}\n' "$(CURDIR)" "$$f" "$(CXX)" "$(CXXFLAGS)" "$$f"; done; \
	  echo ']'; } > $@

$(BUILD)/profiles/%.toml: $(PROFILE_SRC)
	@mkdir -p $(dir $@)
	cp $(filter %/$*.toml,$(PROFILE_SRC)) $@

$(PROFILE_AUX): $(PROFILE_AUX_SRC)
	@mkdir -p $(dir $@)
	cp $(filter %/$(notdir $(patsubst %/,%,$(dir $@)))/$(notdir $@),$(PROFILE_AUX_SRC)) $@

lib: $(LIB)

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@

# The front end's files (and main's) start from a precompiled header of the
# third-party headers they all include (frontend/base/pch.hpp), built with the
# same flags; a copy beside its .gch is what -include names.
PCH := $(BUILD)/pch/pch.hpp
$(PCH).gch: frontend/base/pch.hpp
	@mkdir -p $(dir $@)
	cp $< $(PCH)
	$(CXX) $(CXXFLAGS) -x c++-header $(PCH) -o $@
$(BUILD)/frontend/%.o: frontend/%.cpp $(PCH).gch
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -include $(PCH) -MMD -MP -c $< -o $@
# (A unity build has no other user of the header: main compiles without it.)
CLI_PCH := $(if $(FE_UNITY),,$(PCH).gch)
$(BUILD)/cli/%.o: cli/%.cpp $(CLI_PCH)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(if $(CLI_PCH),-include $(PCH)) -MMD -MP -c $< -o $@

# Unity file K of FE_UNITY: sources K, K+N, K+2N, ... of frontend/*/*.cpp.
ifneq ($(FE_UNITY),)
$(FE_OBJ:.o=.cpp): $(BUILD)/unity/frontend-%.cpp: $(FE_SRC) Makefile
	@mkdir -p $(dir $@)
	@echo $(FE_SRC) | tr ' ' '\n' | awk -v k=$* -v n=$(FE_UNITY) \
	  '(NR - 1) % n == k - 1 { printf "#include \"%s\"\n", $$0 }' > $@.tmp && mv $@.tmp $@
$(FE_OBJ): $(BUILD)/unity/frontend-%.o: $(BUILD)/unity/frontend-%.cpp
	$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@
endif

# Profiles the engine's own reports read are built into the library
# (.incbin in the file that loads them): a changed profile rebuilds it.
EMBEDDED_PROFILES := targets/linux/linux-kernel.toml targets/glusterfs/glusterfs.toml
$(BUILD)/targets/linux/kernel_knowledge.o: targets/linux/linux-kernel.toml
$(BUILD)/targets/glusterfs/gluster_knowledge.o: targets/glusterfs/glusterfs.toml

# The types and members GlusterFS's C++ reads are those glusterfs.toml
# declares, as enums scripts/gen-fields writes under <build>/gen (found by
# -I<build>/gen): the TOML is their only list.
GEN_FIELDS = $(1)/gen/targets/glusterfs/glusterfs_fields.hpp
define gen_fields
$(call GEN_FIELDS,$(1)): targets/glusterfs/glusterfs.toml scripts/gen-fields
	@mkdir -p $$(dir $$@)
	python3 scripts/gen-fields $$< lr::gf::fields $$@
$(patsubst %.cpp,$(2)/%.o,$(call target_src,glusterfs)): | $(call GEN_FIELDS,$(1))
endef
$(eval $(call gen_fields,$(BUILD),$(BUILD)))

# One archive per layer and per target, of its folder's objects.
define archive
$(1): $(2)
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call archive,$(BUILD)/lib/libleakref-$(l).a,$(patsubst %.cpp,$(BUILD)/%.o,$(call layer_src,$(l))))))
$(foreach t,$(TARGETS),$(eval $(call archive,$(BUILD)/lib/libleakref-target-$(t).a,$(patsubst %.cpp,$(BUILD)/%.o,$(call target_src,$(t))))))
# targets/*.cpp: the one place that lists the targets (registers them).
$(eval $(call archive,$(BUILD)/lib/libleakref-targets.a,$(patsubst %.cpp,$(BUILD)/%.o,$(wildcard targets/*.cpp))))

$(LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FE_LIB): $(FE_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/cli/main.o $(FE_LIB) $(ENGINE_LIBS)
	$(CXX) $(CXXFLAGS) -o $@ $(BUILD)/cli/main.o $(FE_LIB) $(ENGINE_LIBS) $(LDLIBS)

# make bench's repeated-walk helper (bench/walk_repeat.cpp)
$(BUILD)/walk_repeat: $(BUILD)/bench/walk_repeat.o $(ENGINE_LIBS)
	$(CXX) $(CXXFLAGS) -o $@ $< $(ENGINE_LIBS) $(LDLIBS)

# Every object's header dependencies, the crash extension's and make
# bench's included (a changed header left a stale leakref.so).
-include $(CORE_OBJ:.o=.d) $(FE_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/extension/crash_glue.d \
         $(BUILD)/extension/leakref_crash.d $(BUILD)/bench/walk_repeat.d

# ---- crash extension -------------------------------------------------------
# The shim is C and alone includes crash's defs.h (Debian's crash package);
# the rest is the engine and the front-end library the CLI links too (the
# kernel subcommands and what they use). All symbols are local
# (leakref.map), so nothing clashes with crash, its gdb or other extensions;
# crash's own symbols resolve when crash dlopens it.
CRASH_DEFS ?= /usr/include/crash

$(BUILD)/extension/leakref_crash.o: extension/leakref_crash.c extension/leakref_host.h
	@mkdir -p $(dir $@)
	@test -f $(CRASH_DEFS)/defs.h || { echo "crash's defs.h not found in $(CRASH_DEFS) (make deps installs crash)"; exit 1; }
	$(CC) $(OPT) -g -Wall -Wextra -Werror -fPIC -DX86_64 -isystem $(CRASH_DEFS) $(SAN) -MMD -MP -c $< -o $@

$(BUILD)/extension/crash_glue.o: extension/crash_glue.cpp extension/leakref_host.h
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@

$(EXT): $(BUILD)/extension/leakref_crash.o $(BUILD)/extension/crash_glue.o $(FE_LIB) $(ENGINE_LIBS) extension/leakref.map
	$(CXX) $(CXXFLAGS) -shared -Wl,--version-script=extension/leakref.map -o $@ \
	  $(BUILD)/extension/leakref_crash.o $(BUILD)/extension/crash_glue.o $(FE_LIB) $(ENGINE_LIBS) $(LDLIBS)

extension: $(EXT)

# The same extension built against another crash's defs.h: CRASH_OTHER is a
# tree holding usr/include/crash (sid's crash 9, unpacked by
# scripts/debian-root), and the library goes to
# $(BUILD)/crash-other/<tree name>/leakref.so. It is loaded by that crash in
# that tree: its RUNPATH is $$ORIGIN, and the libraries it needs whose sonames
# the tree lacks (sid ships libfmt 10 and libkdumpfile 12, not bookworm's 9
# and 10) are copied beside it.
ifneq ($(CRASH_OTHER),)
OTHER_DIR := $(BUILD)/crash-other/$(notdir $(CRASH_OTHER))
$(OTHER_DIR)/leakref_crash.o: extension/leakref_crash.c extension/leakref_host.h
	@mkdir -p $(dir $@)
	@test -f $(CRASH_OTHER)/usr/include/crash/defs.h || { echo "no usr/include/crash/defs.h in $(CRASH_OTHER)"; exit 1; }
	$(CC) $(OPT) -g -Wall -Wextra -Werror -fPIC -DX86_64 -isystem $(CRASH_OTHER)/usr/include/crash $(SAN) -c $< -o $@

$(OTHER_DIR)/leakref.so: $(OTHER_DIR)/leakref_crash.o $(BUILD)/extension/crash_glue.o $(FE_LIB) $(ENGINE_LIBS) extension/leakref.map
	$(CXX) $(CXXFLAGS) -shared -Wl,--version-script=extension/leakref.map -Wl,-rpath,'$$ORIGIN' -o $@ \
	  $(OTHER_DIR)/leakref_crash.o $(BUILD)/extension/crash_glue.o $(FE_LIB) $(ENGINE_LIBS) $(LDLIBS)
	scripts/debian-root --libs-beside $(CRASH_OTHER) $@

extension-other: $(OTHER_DIR)/leakref.so
endif

include fixtures/fixtures.mk
include provision.mk

clean:
	rm -rf $(BUILD) $(SAN_DIR) $(FUZZ_DIR) $(DEMO_BUILD)

# ---- tests ---------------------------------------------------------------
SAN_BUILD    := $(if $(SAN),1)
# The tests' own code (orchestration: processes run, JSON compared) is
# compiled at -O1 with line tables and without the sanitizers: what they
# test is the engine and front end, built with OPT, DEBUG and SAN (the test
# binary is still linked with the sanitizers, and the unit tests run the
# sanitized engine in it). Half the time of -O2 -g; under ASan, a third.
TEST_OPT     ?= -O1 -g1
TEST_CXXFLAGS = $(filter-out $(OPT) $(DEBUG) $(SAN),$(CXXFLAGS)) $(TEST_OPT) \
                -DLR_BUILD_DIR='"$(abspath $(BUILD))"' -DLR_SOURCE_DIR='"$(CURDIR)"' -Itests \
                $(if $(SAN_BUILD),-DLR_SANITIZE=1)
# The runner is Catch2's own implementation (2 minutes under ASan, for code
# that is not leakref's): in the sanitized build it is compiled without
# the sanitizers, and the test binary is still linked with them.
$(BUILD)/tests/main.o: override SAN :=

$(BUILD)/tests/%.o: tests/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(TEST_CXXFLAGS) -MMD -MP -c $< -o $@

$(TESTBIN): $(TEST_OBJ) $(ENGINE_LIBS)
	$(CXX) $(CXXFLAGS) -o $@ $(TEST_OBJ) $(ENGINE_LIBS) $(LDLIBS)

# Builds in parallel while the programs the tests run are installed and the
# caches they read are filled (make provision: downloads, guests, other
# software's builds), then runs the suite in SHARDS processes side by side
# (scripts/run-tests) as soon as the build is done: a test that needs a cache
# provisioning is still filling waits for it (each cache's tool holds a lock
# while it fills it, and a second caller then finds it made). TEST_ARGS (a
# Catch test spec) runs only those tests, and fills no cache first.
SHARDS ?= $(NPROC)
test: test-build-deps check-layers
	@mkdir -p $(BUILD); touch $(BUILD)/.build-deps-installed; pv=""; t0=$$(date +%s); \
	if [ -z "$(TEST_ARGS)" ]; then \
	  echo "test: installing what the tests run, then provisioning, while building (log: $(BUILD)/provision.log)"; \
	  rm -f $(BUILD)/.test-deps-installed; \
	  { $(MAKE) -s test-deps && touch $(BUILD)/.test-deps-installed && \
	    echo "test: what the tests run was installed by +$$(( $$(date +%s) - t0 )) s" && scripts/provision; } \
	    > $(BUILD)/provision.log 2>&1 & pv=$$!; \
	else $(MAKE) -s test-deps || exit $$?; fi; \
	$(MAKE) -j2 $(if $(SAN),,check-unity) test-build; b=$$?; \
	if [ $$b -ne 0 ]; then [ -z "$$pv" ] || kill $$pv; exit $$b; fi; \
	if [ -n "$$pv" ]; then \
	  until [ -e $(BUILD)/.test-deps-installed ] || ! kill -0 $$pv 2>/dev/null; do sleep 2; done; fi; \
	echo "test: built; the shards begin at +$$(( $$(date +%s) - t0 )) s"; \
	t=0; scripts/run-tests $(BUILD) --shards $(SHARDS) $(if $(TEST_ARGS),-- '$(TEST_ARGS)') || t=$$?; \
	echo "test: the shards ended at +$$(( $$(date +%s) - t0 )) s"; \
	if [ -n "$$pv" ]; then p=0; wait $$pv || p=$$?; \
	  echo "==== provisioning (begun while building; ended by +$$(( $$(date +%s) - t0 )) s) ===="; \
	  cat $(BUILD)/provision.log; \
	  [ $$p -eq 0 ] || echo "test: provisioning ended with status $$p (the tests that need what failed say so)"; \
	  cat $(BUILD)/test-summary.txt 2>/dev/null; fi; \
	exit $$t

# The inner loop (at most 5 minutes on 2 cores, once built): the unit tests
# and the user-space cores of fixtures, no guests, no GlusterFS or
# nfs-ganesha, no other releases or architectures.
QUICK_TESTS ?= ~[kernel]~[gluster]~[batch]~[ganesha]~[glibc-releases]~[aarch64]~[jemalloc]~[tcmalloc]~[slow]
test-quick: check-layers
	$(MAKE) test-build
	scripts/run-tests $(BUILD) --shards $(SHARDS) -- '$(QUICK_TESTS)'

# Every test case's seconds on this machine, for the shards' balance
# (tests/durations.txt): a whole run, one process.
test-durations: test-build
	$(TESTBIN) -d yes $(if $(SAN),'$(SAN_TESTS)') | python3 scripts/durations.py $(TESTBIN) \
	  > tests/$(if $(SAN),durations-san.txt,durations.txt)

# What the tests run, built in parallel.
test-build:
	$(MAKE) -j$(NPROC) $(BIN) $(EXT) fixtures $(TESTBIN) $(PROFILES)

# The suite built with AddressSanitizer + UndefinedBehaviorSanitizer: every
# test that reads an input its own way, and every hostile-input test. Left
# out are the end-to-end runs `make test` has just run unsanitized, whose
# readers the tests kept here already drive: the kernel guests, dump
# archives (Slurm), nfs-ganesha, GlusterFS's daemons, the aarch64 and mosh
# cores, the series and live bpftrace captures, the README's and docs'
# examples, install checks and browser renderings. Under ASan they would
# take CI past its 35 minutes on two cores (the GlusterFS runs alone take
# three of them). (GCC 12 reports a false maybe-uninitialized inside
# <regex> under -fsanitize.)
SAN_TESTS ?= [hostile],~[kernel]~[batch]~[ganesha]~[gluster]~[aarch64]~[mosh]~[series]~[live]~[docs]~[install]~[scripts]~[html]
# Line tables only (-g1): ASan's reports keep file:line, and a file compiles
# in about half the time full debug info takes (cmd_trend.cpp: 25 s, 47 s).
# The front end as one unity file per core (FE_UNITY): its 30 files repeat
# the same instantiations of nlohmann-json, CLI11 and fmt, 70-125 s each
# under ASan; reports still name the file and line each came from.
# Built by clang with libFuzzer's instrumentation as well (fuzzer-no-link:
# its callbacks are the sanitizer runtime's no-ops outside a fuzzer): the
# fuzzers link this build's engine instead of compiling it a third time.
SAN_DIR  := build-san
SAN_MAKE = $(MAKE) BUILD=$(SAN_DIR) CXX=clang++ CC=clang OPT=-O1 DEBUG=-g1 FE_UNITY=$(NPROC) \
           SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=all"
test-sanitize:
	$(SAN_MAKE) TEST_ARGS='$(SAN_TESTS)' test
# Its build alone.
test-sanitize-build:
	$(SAN_MAKE) test-build
# Its shards' balance (tests/durations-san.txt): the sanitized suite in one
# process (under the sanitized build's variables: the tests that run make
# build with them).
test-sanitize-durations:
	$(SAN_MAKE) test-durations

# ---- fuzzing (clang + libFuzzer) ------------------------------------------
FUZZ_SECONDS ?= 20
FUZZ_DIR     := build-fuzz
FUZZ_CXX     := clang++
FUZZ_FLAGS   := -std=c++20 -g1 -O1 -fsanitize=fuzzer,address,undefined -I. -I$(SAN_DIR)/gen
TRACE_PARSERS := leakref bpftrace stap mmleak bcc mtrace
FUZZERS      := $(FUZZ_DIR)/fuzz_core $(FUZZ_DIR)/fuzz_path $(FUZZ_DIR)/fuzz_expr $(FUZZ_DIR)/fuzz_profile \
                $(FUZZ_DIR)/fuzz_kdump $(FUZZ_DIR)/fuzz_statedump $(FUZZ_DIR)/fuzz_jemalloc $(FUZZ_DIR)/fuzz_tcmalloc \
                $(FUZZ_DIR)/fuzz_std $(FUZZ_DIR)/fuzz_python \
                $(TRACE_PARSERS:%=$(FUZZ_DIR)/fuzz_trace_%)

# The engine is the sanitized build's (instrumented for libFuzzer too, not
# linked with its main), made first when it is not there.
FUZZ_LIBS    := $(call engine_libs,$(SAN_DIR))
FUZZ_LDLIBS  := -ldw -lelf -ldebuginfod -lkdumpfile -laddrxlat -lfmt -lsqlite3 -lzstd -llzma -llz4 -lz
ifneq ($(BUILD),$(SAN_DIR))
$(FUZZ_LIBS) &:
	$(SAN_MAKE) $(FUZZ_LIBS)
endif

$(FUZZ_DIR)/fuzz_trace_%: tests/fuzz/fuzz_trace.cpp $(FUZZ_LIBS)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -DLR_FUZZ_PARSER=parse_$* -o $@ $< $(FUZZ_LIBS) $(FUZZ_LDLIBS)

# The container readers' fuzzer reads the types of fx_cxx's and
# fx_libcxx's globals from -g builds of them of its own.
$(FUZZ_DIR)/fx_cxx_types: fixtures/fx_cxx.cpp
	@mkdir -p $(dir $@)
	g++ -g -O0 -o $@ $<

$(FUZZ_DIR)/fx_libcxx_types: fixtures/fx_libcxx.cpp
	@mkdir -p $(dir $@)
	clang++ -std=c++17 -stdlib=libc++ -g -O0 -o $@ $<

$(FUZZ_DIR)/fuzz_std: tests/fuzz/fuzz_std.cpp $(FUZZ_LIBS) $(FUZZ_DIR)/fx_cxx_types \
                      $(FUZZ_DIR)/fx_libcxx_types
	$(FUZZ_CXX) $(FUZZ_FLAGS) -DLR_FUZZ_STD_EXE='"$(abspath $(FUZZ_DIR))/fx_cxx_types"' \
	  -DLR_FUZZ_LIBCXX_EXE='"$(abspath $(FUZZ_DIR))/fx_libcxx_types"' -o $@ $< \
	  $(FUZZ_LIBS) $(FUZZ_LDLIBS)

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.cpp $(FUZZ_LIBS)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIBS) $(FUZZ_LDLIBS)

fuzz-build: $(FUZZERS)

# Runs each fuzzer briefly on its seed corpus (CI: FUZZ_SECONDS each).
fuzz:
	$(MAKE) -j$(NPROC) fuzz-build
	@for f in $(FUZZERS); do \
	  n=$$(basename $$f); mkdir -p $(FUZZ_DIR)/corpus-$$n; \
	  cp -n tests/fuzz/seeds/$$n/* $(FUZZ_DIR)/corpus-$$n/ 2>/dev/null || true; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	      $(FUZZ_DIR)/corpus-$$n > $(FUZZ_DIR)/$$n.log 2>&1 || { tail -n 40 $(FUZZ_DIR)/$$n.log; exit 1; }; \
	  grep -E '^#[0-9]+.*DONE|Done [0-9]+ runs' $(FUZZ_DIR)/$$n.log | tail -n 1; \
	done

# ---- layers ----------------------------------------------------------------
# Every include goes down the layers (corelib/<layer>, targets/, frontend/,
# cli/ and extension/), and the engine names no target (scripts/check-layers).
check-layers:
	@python3 scripts/check-layers

# The front end still compiles as one file (FE_UNITY, the demo's build): no
# two of its files define the same file-local name.
check-unity: $(call GEN_FIELDS,$(BUILD))
	@printf '#include "%s"\n' $(FE_SRC) | $(CXX) $(CXXFLAGS) -fsyntax-only -x c++ -

# No function longer than 120 lines but the hot loops docs/architecture.md
# lists (universal-ctags over the sources; no build needed).
check-functions:
	@scripts/check-functions

# ---- help ------------------------------------------------------------------
help:
	@echo "make            build leakref, leakref.so (crash), fixtures, profiles, compile_commands.json"
	@echo "make deps       install the Debian 12 packages building and running leakref needs"
	@echo "make test       install what the tests need (test-deps), check the layers, run every test"
	@echo "make check-layers   every include goes down the layers; the engine names no target"
	@echo "make check-unity    the front end compiles as one file (the demo's quick build)"
	@echo "make check-functions  no function over 120 lines but the hot loops docs/architecture.md lists"
	@echo "make test-sanitize  the same suite under ASan+UBSan (build-san/)"
	@echo "make fuzz       each libFuzzer target for FUZZ_SECONDS (build-fuzz/)"
	@echo "make demo       run a fixture, take its core with gcore, walk it"
	@echo "make bench      leakref vs drgn on 1M-object cores (walks, output, heap)"
	@echo "make bench-trace / bench-kernel   capture overhead / kernel walks vs crash"
	@echo "make install    PREFIX=$(PREFIX): binaries, leakref.so, profiles, man pages,"
	@echo "                gdb macro, libleakref.a, headers, leakref.pc"
	@echo "make format / format-check   apply / check .clang-format"
	@echo "make clean      remove build/, build-san/, build-fuzz/"

# ---- style -----------------------------------------------------------------
# .clang-format governs the C++ and the crash shim (fixtures keep the layout
# of the programs they imitate; the kernel module is kernel style).
FORMAT_SRC := $(wildcard corelib/*/*.cpp corelib/*/*.hpp targets/*.cpp targets/*/*.cpp targets/*/*.hpp \
                frontend/*/*.cpp frontend/*/*.hpp cli/*.cpp extension/*.cpp extension/*.h extension/*.c \
                tests/*.cpp tests/*.hpp tests/fuzz/*.cpp bench/*.cpp)
format:
	clang-format -i $(FORMAT_SRC)
# CI: any file that clang-format would change fails the run, naming it.
format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRC) && echo "format-check: $(words $(FORMAT_SRC)) files conform to .clang-format"

# ---- install, demo, bench -------------------------------------------------
install: $(BIN) $(EXT) $(LIB)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/leakref
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/leakref
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libleakref.a
	for h in corelib/*/*.hpp targets/*/*.hpp; do \
	  install -D -m 644 $$h $(DESTDIR)$(PREFIX)/include/leakref/$$h; done
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: leakref' 'Description: post-mortem refcount-leak analysis of cores (engine)' \
	  'Version: 0.1.0' 'Requires.private: libdw libelf libdebuginfod libkdumpfile libaddrxlat fmt' \
	  'Cflags: -I$${includedir}/leakref -std=c++20' 'Libs: -L$${libdir} -lleakref' \
	  'Libs.private: -ldw -lelf -ldebuginfod -lkdumpfile -laddrxlat -lfmt -lzstd -llzma -llz4 -lz' > $(BUILD)/leakref.pc
	install -m 644 $(BUILD)/leakref.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/leakref.pc
	install -d $(DESTDIR)$(PREFIX)/lib/crash/extensions $(DESTDIR)$(PREFIX)/share/leakref/profiles
	install -m 644 $(PROFILE_SRC) $(DESTDIR)$(PREFIX)/share/leakref/profiles/
	install -d $(DESTDIR)$(PREFIX)/share/leakref/schemas
	install -m 644 schemas/*.schema.json $(DESTDIR)$(PREFIX)/share/leakref/schemas/
	for f in $(PROFILE_AUX_SRC); do d=$$(basename $$(dirname $$f)); \
	  install -D -m 644 $$f $(DESTDIR)$(PREFIX)/share/leakref/profiles/$$d/$$(basename $$f); done
	install -m 755 scripts/leakref-debsrc $(DESTDIR)$(PREFIX)/bin/leakref-debsrc
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/leakref
	install -m 644 $(EXT) $(DESTDIR)$(PREFIX)/lib/crash/extensions/leakref.so
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/share/doc/leakref/docs
	install -m 644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 man/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 644 man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7/
	install -m 644 README.md $(DESTDIR)$(PREFIX)/share/doc/leakref/
	install -m 644 docs/*.md $(DESTDIR)$(PREFIX)/share/doc/leakref/docs/
	install -D -m 644 scripts/leakref-completion.bash \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/leakref
	install -D -m 644 scripts/_leakref $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_leakref
	install -m 755 scripts/leakref-snap $(DESTDIR)$(PREFIX)/bin/leakref-snap
	install -m 755 scripts/leakref-trace $(DESTDIR)$(PREFIX)/bin/leakref-trace
	sed 's|@LEAKREF@|$(PREFIX)/bin/leakref|g' scripts/leakref.gdb > $(BUILD)/leakref.gdb.installed
	install -m 644 $(BUILD)/leakref.gdb.installed $(DESTDIR)$(PREFIX)/share/leakref/leakref.gdb

# Runs a bundled fixture, takes its core with gcore, and walks it. The
# demo's leakref is a quick build of its own (unoptimized, no debug info, in
# $(DEMO_BUILD)/): on a fresh 2-core machine the optimized build takes
# minutes more, and `make` makes it when wanted.
DEMO_BUILD ?= build-demo
demo:
	$(MAKE) -j$(NPROC) BUILD=$(DEMO_BUILD) OPT=-O0 DEBUG= FE_UNITY=$(NPROC) $(DEMO_BUILD)/leakref \
	  $(DEMO_BUILD)/fixtures/fx_structs_pie
	BUILD=$(DEMO_BUILD) scripts/demo.sh

# leakref-trace's overhead on a real GlusterFS FUSE I/O loop (root).
bench-trace:
	$(MAKE) -j$(NPROC) $(BIN) fixtures
	BUILD=$(BUILD) scripts/bench trace

# leakref walk (crash extension) vs crash's own `list -s` on a real vmcore.
bench-kernel:
	$(MAKE) -j$(NPROC) $(BIN) $(EXT)
	BUILD=$(BUILD) scripts/bench kernel

# leakref vs drgn on a 1,000,000-node list and hash table in one core; batch
# throughput; the reference index on 5.9 M allocations (and chap beside it
# with CHAP=/path/to/chap) and on an 8 GB core (BENCH_REFS_GB); C++: a map
# and an unordered_map of 1 M entries against gdb's printers, and the
# shared_ptr census on 5 M control blocks against leaks; CPython: 5 M
# objects with their refcounts reconciled, against a gdb Python walk of
# the GC's lists.
bench:
	$(MAKE) -j$(NPROC) $(BIN) $(BUILD)/walk_repeat fixtures
	BUILD=$(BUILD) scripts/bench walks
	BUILD=$(BUILD) scripts/bench batch
	BUILD=$(BUILD) scripts/bench refs
	BUILD=$(BUILD) scripts/bench cxx
	BUILD=$(BUILD) scripts/bench python

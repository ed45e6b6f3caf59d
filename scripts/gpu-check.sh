#!/bin/sh
# The CUDA check for a lent H200 (a bare machine: the CUDA toolkit, gcc, no
# network, none of the project's Debian packages), within 8 minutes:
#   build    sm_90 only, nvcc --threads, against the kit (below)
#   test_cuda  every op against the CPU backend; a skip (no GPU) fails
#   gen_*    synthetic GGUF files at real shapes, random weights
#            (engine/bench/synth_gguf.c): SmolLM2-135M Q4_1, Llama-3.2-1B
#            BF16 and Q4_1, Qwen2.5-1.5B Q4_K_M (+ the 0.5B as the drafter)
#   cpu_*    each file on the CPU backend: finite logits
#   compare_*  each file on CUDA against the CPU backend (logits, argmax);
#            compare_pdl_* the same with programmatic dependent launch
#   forward_strategies  tests/cuda_emu/test_emu_forward.c built for the GPU:
#            small synthetic models of every weight type against the CPU,
#            and every greedy strategy, with CUDA graphs off and on;
#            forward_strategies_pdl the same with programmatic dependent launch
#   decode_* greedy decode with the argmax on the device, tok/s and % of
#            the copy-bandwidth bound: plain launches, a CUDA graph, a graph
#            with programmatic dependent launch; that again with every
#            RMSNorm launched on its own (_nofold: SD_CUDA_FUSE_NORM=0),
#            with folded launches planned for 4 and 16 blocks a multiprocessor,
#            with each step one persistent launch (_persist:
#            SD_CUDA_PERSISTENT=1, kernels/cuda/step.cu), that with each
#            item's weight rows staged in shared memory (_persist_stage:
#            SD_CUDA_STAGE=1, two models) and with its norms launched as
#            stages (_persist_nofold, two models), with the quantised products on
#            tensor cores (_mma: SD_CUDA_MMA=1), and both
#            (decode_persist_mma_qwen-1.5b-q4_k_m)
#   verify   n-row verification cost n = 1..9, 16 at the Qwen 1.5B shape (plain
#            launches, then graphs with programmatic dependent launch, with
#            and without folded norms, with the quantised products on
#            tensor cores instead of the __dp4a tiles (_mma: SD_CUDA_MMA=1),
#            and as persistent launches, on the __dp4a tiles, staged and on
#            tensor cores: verify_persist_stage, verify_persist_mma) and
#            the speculative speedup it implies at ACCEPT (inputs: the
#            pair's per-draft acceptance measured on the CPU, docs/performance.md)
#   spec_*   speculative decoding end to end (bench_gpu_check spec, gamma 4):
#            the Qwen 1.5B drafting for itself (every draft accepted: the
#            realised speedup against the cost model of the run's own step
#            costs, within 10%); the Qwen pair, whose measured step costs
#            give the speedup implied at ACCEPT (_mma: on tensor cores); a synthetic Llama-3.2-3B
#            BF16 target (gen_llama-3b-bf16, 6.4 GB, made here when the disk
#            has room) decoded alone and with the Llama-3.2-1B BF16 drafting
#   cli      the specdec binary on the real stories260K files of tests/data:
#            CUDA's greedy ids equal the CPU's, spec and nasd equal ar
#   bench_kernels  per-kernel GB/s and % of copy bandwidth, real shapes
#   persist_bench  the persistent step's primitives (bench_persist_cuda): a
#            flag's one-way trip, a stage-level wait, a block's first weight
#            loads cold, from L2 and prefetched, a streaming read; its
#            "ledger:" lines are the step ledger's persist:NAME figures
#   profile_*  one Qwen 1.5B decode step under Nsight Compute, time by
#            kernel (caches left warm, as a decode step finds them)
#   memcheck_*, racecheck_*  compute-sanitizer on short test cases
# Each step runs under its own limit and the whole run under BUDGET seconds
# (a step that would start with under 10 s left is not run and fails).
# Output: $OUT when set, else build/gpu-check: summary.txt (printed last:
# each step with pass/fail and seconds, then every figure next to its
# target), gpu-check.log (every step's output), bench_kernels_cuda.csv.
# Without a usable GPU the CPU steps still run and the CUDA steps fail:
# the exit status is 1.
#
#   scripts/gpu-check.sh --prepare    on the build machine: writes the kit
#       build/gpu-check-kit (headers and shared libraries of Criterion and
#       PCRE2 with what they load, less the C/C++ runtimes the GPU machine
#       has; where nvcc is here, the seven programs (the CLI with its sampler
#       plugins among them) built for sm_90 alone, stripped, in bin.tar.gz) and checks that it and the tracked tree fit
#       in 64 MiB. Carry build/gpu-check-kit with the tree. With the kit's
#       programs the check spends no device time building (the first build
#       on an H200 took over 113 s); GPU_CHECK_BUILD=1 builds there anyway.
#   scripts/gpu-check.sh              the check (GPU machine); with the
#       workplace's device tool: run(command "sh scripts/gpu-check.sh",
#       carry ["build/gpu-check-kit"], timeout_s 600) after --prepare here
# Environment: OUT, BUDGET (480), BUILD_LIMIT (300), GPU_CHECK_BUILD, ACCEPT (the "accept" line
# of docs/perf/gpu-targets.txt, which also holds the decode targets), GPU_CHECK_SMALL=1
# (2-layer models with a 4096-token vocabulary: a quick run of the CPU path).
set -u
cd "$(dirname "$0")/.." || exit 1
KIT=build/gpu-check-kit
SELF="$PWD/scripts/gpu-check.sh"
# where the programs are: build/, or the kit's unpacked (GPU_CHECK_BIN)
BIN=${GPU_CHECK_BIN:-build}
# the CLI, with its sampler plugins beside it (plugins/)
if [ -n "${GPU_CHECK_BIN:-}" ]; then CLI=$GPU_CHECK_BIN/specdec; else CLI=./specdec; fi
PLUGIN_SOS=$(ls samplers/*.c | sed 's|^samplers/\(.*\)\.c$|plugins/\1.so|')
LIMIT_MIB=64

# Steps that are shell code, run as `gpu-check.sh --run FUNCTION` so that
# timeout can limit them.
# a suite that skips found no GPU: a failure here
gpu_tests() {
    out=$($BIN/tests/test_cuda --jobs 4 2>&1)
    rc=$?
    printf '%s\n' "$out"
    if printf '%s\n' "$out" | grep -q '\[SKIP\]'; then rc=3; echo "gpu-check: the CUDA tests skipped"; fi
    printf '%s\n' "$out" | grep -E 'Synthesis' | sed 's/^/S test_cuda: /'
    return $rc
}
# the whole-forward and strategy suite on the GPU: every test of the file
# runs, but those that need the emulator's schedule check, which skip
# saying so (a skip for any other reason, no GPU say, fails here)
forward_tests() {
    out=$($BIN/tests/test_cuda_forward --jobs 4 --verbose 2>&1)
    rc=$?
    printf '%s\n' "$out"
    want=$(grep -c '^Test(' tests/cuda_emu/test_emu_forward.c)
    ran=$(printf '%s\n' "$out" | sed -n 's/.*Synthesis: Tested: \([0-9]*\) .*/\1/p')
    emu=$(printf '%s\n' "$out" | grep '^\[SKIP\]' | grep -c "emulator's schedule check")
    [ "$((${ran:-0} + emu))" -eq "$want" ] || { rc=3; echo "gpu-check: ${ran:-0} forward tests ran (and $emu emulator-only skipped) of $want"; }
    printf '%s\n' "$out" | grep -E 'Synthesis' | sed 's/^/S test_cuda_forward: /'
    return $rc
}
# the CLI as a user runs it, with the backend's defaults (graphs and
# programmatic dependent launch on): the real stories260K files of
# tests/data (F32, F16, Q8_0), greedy, 64 tokens. On CUDA, spec
# (self-speculative, the first 2 layers drafting) and nasd must give ar's
# ids, and ar's ids must be the CPU's; beam and draft run too.
cli() {
    rc=0
    for m in stories260K stories260K-f16 stories260K-q8_0; do
        f=tests/data/models/$m.gguf
        set -- -m "$f" -p "Once upon a time" -n 64 --ignore-eos --jsonl
        g=$("$CLI" "$@" --device cuda --strategy ar,spec,nasd,beam,draft --draft-layers 2) ||
            { echo "gpu-check: specdec on cuda failed for $m"; rc=1; continue; }
        c=$("$CLI" "$@" --device cpu) || { echo "gpu-check: specdec on cpu failed for $m"; rc=1; continue; }
        printf '%s\n%s\n' "$g" "$c"
        ids() { printf '%s\n' "$1" | grep "\"strategy\":\"$2\"" | sed 's/.*"ids":\(\[[^]]*\]\).*/\1/'; }
        same=$(printf '%s\n' "$g" | grep -E '"strategy":"(spec|nasd)"' | grep -c '"same_as_ar":1')
        cuda_ar=$(ids "$g" ar)
        cpu_ar=$(ids "$c" ar)
        toks=$(printf '%s\n' "$g" | grep '"strategy":"ar"' | sed 's/.*"decode_tokens_per_s":\([0-9.]*\).*/\1/')
        verdict=ok
        if [ -z "$cuda_ar" ] || [ "$cuda_ar" != "$cpu_ar" ] || [ "$same" != 2 ]; then verdict=FAIL; rc=1; fi
        echo "S cli $m: $verdict: cuda ar ids $([ "$cuda_ar" = "$cpu_ar" ] && echo equal || echo DIFFER from) the cpu's; spec, nasd same as ar: $same of 2; cuda ar decode $toks tok/s"
    done
    return $rc
}
# matrix-vector kernels (matmul, qkv_rope, ffn_swiglu) one row each: the
# target is 85% of the copy bandwidth
kernels() {
    $BIN/bench/bench_kernels_cuda "$LOG/bench_kernels_cuda.csv" || return $?
    [ -s "$LOG/bench_kernels_cuda.csv" ] || { echo "gpu-check: no CSV (the benchmark found no GPU)"; return 3; }
    awk -F, 'NR > 1 && ($1 ~ /^matmul/ || $1 == "qkv_rope" || $1 == "ffn_swiglu") {
            n++; ok = $9 + 0 >= 85; met += ok
            printf "S kernel %-10s %-13s %-5s n=%-2s %-22s %8.0f GB/s %5.1f%% of copy  %s\n",
                   $1, $2, $3, $4, $5, $8, $9, ok ? "met" : "below 85%"
        }
        END { printf "S kernels at >= 85%% of copy bandwidth: %d of %d rows\n", met, n }' \
        "$LOG/bench_kernels_cuda.csv"
}
# the persistent step's primitives; a run without its figures (no GPU) fails
persist_bench() {
    out=$($BIN/bench/bench_persist_cuda 2>&1)
    rc=$?
    printf '%s\n' "$out"
    printf '%s\n' "$out" | grep -q 'ledger: persist:flag_us' || { [ $rc -ne 0 ] || rc=3; echo "gpu-check: no figures"; }
    return $rc
}
# compute-sanitizer TOOL over the CUDA tests of FILTER; a skip fails here too
san() {
    out=$(compute-sanitizer --tool "$1" --target-processes all --error-exitcode 99 \
        $BIN/tests/test_cuda --jobs 1 \
        --filter "cuda/$2" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    if printf '%s\n' "$out" | grep -q '\[SKIP\]'; then rc=3; echo "gpu-check: the CUDA tests skipped"; fi
    printf '%s\n' "$out" | grep -E '(ERROR|RACECHECK) SUMMARY' | tail -n 1 | sed "s/^/S $1 $2: /"
    return $rc
}
# one greedy decode step of MODEL (plain launches) under Nsight Compute:
# each kernel's duration (ns), summed by kernel name, in profile_<name>.csv
# (ncu's own output beside it, .raw)
profile() {
    command -v ncu >/dev/null || { echo "gpu-check: ncu not found"; return 3; }
    csv="$LOG/profile_$(basename "$1" .gguf).csv"
    SD_CUDA_GRAPH=0 SD_CUDA_PDL=0 ncu --clock-control none --cache-control none --launch-skip "$2" --launch-count "$3" \
        --metrics gpu__time_duration.sum --print-units base --csv "$BIN/bench/bench_gpu_check" decode "$1" >"$csv.raw" || return $?
    grep '^"' "$csv.raw" | awk -F'","' -v f="$csv" 'NR > 1 { gsub(/[",]/, "", $NF); n = $5;
            sub(/[<(].*/, "", n); sub(/^void /, "", n); t[n] += $NF; c[n]++; all += $NF }
        END { for (k in t) printf "%s,%d,%.1f\n", k, c[k], t[k] / 1000 >f;
              printf "S profile %s: %d kernels, %.1f us in all\n", f, NR - 1, all / 1000 }'
    sort -t, -k3 -n -r "$csv" | head -n 12 | awk -F, '{ printf "S   %-32s %4d launches %9.1f us\n", $1, $2, $3 }'
}
# one launch each of the decode step's attention, SwiGLU, qkv_rope and
# output-projection kernels under Nsight Compute's throughput, occupancy
# and warp-stall sections (profile_detail.txt): where a small kernel's
# microseconds go
profile_detail() {
    command -v ncu >/dev/null || { echo "gpu-check: ncu not found"; return 3; }
    for k in attn_kernel ffn_swiglu_kernel qkv_rope_kernel mm_plain_kernel; do
        SD_CUDA_GRAPH=0 SD_CUDA_PDL=0 ncu --clock-control none --cache-control none -k "regex:^$k" \
            --launch-skip 100 --launch-count 1 --section SpeedOfLight --section LaunchStats \
            --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
            --section SchedulerStats "$BIN/bench/bench_gpu_check" decode "$1" 2>&1 |
            grep -v '^S ' || return $?
    done >"$LOG/profile_detail.txt"
    grep -E '^  [a-z_]+kernel|Duration|Warp Cycles Per Issued|Stall|Achieved Occupancy|Memory Throughput' \
        "$LOG/profile_detail.txt" | head -n 40 | sed 's/^/S   /'
}
if [ "${1:-}" = --run ]; then
    LOG=${OUT:-build/gpu-check}
    shift
    "$@"
    exit $?
fi

if [ "${1:-}" = --prepare ]; then
    rm -rf "$KIT"
    mkdir -p "$KIT/include" "$KIT/lib" || exit 1
    cp -r /usr/include/criterion "$KIT/include/" &&
        cp /usr/include/pcre2.h "$KIT/include/" || { echo "prepare: headers missing (make deps)"; exit 1; }
    # the libraries linked directly, under their link names and sonames
    # (plain copies: no links to lose on the way), then everything they
    # load except glibc and the compiler's runtimes
    for l in criterion pcre2-8; do
        f=$(ls /usr/lib/x86_64-linux-gnu/lib$l.so.[0-9]* /usr/lib/lib$l.so.[0-9]* 2>/dev/null | head -n 1)
        [ -n "$f" ] || { echo "prepare: lib$l not found"; exit 1; }
        so=$(objdump -p "$f" | awk '/SONAME/ { print $2 }')
        cp -L "$f" "$KIT/lib/lib$l.so" && cp -L "$f" "$KIT/lib/$so" || exit 1
        ldd "$f" | awk '/=> \// { print $3 }' |
            grep -v -E '/(libc|libm|libdl|librt|libpthread|libresolv|libgcc_s|libstdc\+\+|libgomp|ld-linux[^/]*)\.so' |
            while read -r d; do cp -L "$d" "$KIT/lib/$(basename "$d")" || exit 1; done
    done
    # the programs, sm_90 alone, in a build folder of their own (build/
    # keeps whatever mode it has); the GPU machine's glibc is at least as
    # new as the build machine's, and cudart is linked statically
    if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
        PATH="$PATH:/usr/local/cuda/bin"
        PB=build/gpu-check-build
        make -j"$(nproc)" BUILD=$PB CUDA=1 NVCC_THREADS="$(nproc)" \
            CUDA_GENCODE="-gencode arch=compute_90,code=sm_90" KIT="$PWD/$KIT" \
            $PB/bench/synth_gguf $PB/bench/bench_gpu_check $PB/tests/test_cuda \
            $PB/tests/test_cuda_forward $PB/bench/bench_kernels_cuda $PB/bench/bench_persist_cuda \
            BIN=$PB/specdec $PB/specdec \
            $PLUGIN_SOS >build/gpu-check-prepare.log 2>&1 ||
            { echo "prepare: the sm_90 build failed (build/gpu-check-prepare.log)"; exit 1; }
        rm -rf "$KIT/bin" && mkdir -p "$KIT/bin/bench" "$KIT/bin/tests" "$KIT/bin/plugins" || exit 1
        for f in bench/synth_gguf bench/bench_gpu_check tests/test_cuda tests/test_cuda_forward \
            bench/bench_kernels_cuda bench/bench_persist_cuda specdec; do
            strip -o "$KIT/bin/$f" "$PB/$f" || exit 1
        done
        for f in $PLUGIN_SOS; do strip -o "$KIT/bin/$f" "$f" || exit 1; done
        tar -C "$KIT/bin" -czf "$KIT/bin.tar.gz" . && rm -rf "$KIT/bin" || exit 1
    else
        echo "prepare: no nvcc here: the check will build on the GPU machine"
    fi
    tree=$(git ls-files -z | xargs -0 cat | wc -c)
    kit=$(find "$KIT" -type f -exec cat {} + | wc -c)
    total=$((tree + kit))
    awk -v k="$kit" -v t="$tree" -v n="$(find "$KIT" -type f | wc -l)" -v d="$KIT" -v l=$LIMIT_MIB 'BEGIN {
        printf "prepared %s: %d files, %.1f MiB; tracked tree %.1f MiB; together %.1f MiB (limit %d MiB)\n",
               d, n, k / 1048576, t / 1048576, (k + t) / 1048576, l }'
    [ $total -le $((LIMIT_MIB * 1048576)) ] || { echo "prepare: over $LIMIT_MIB MiB"; exit 1; }
    echo "carry: $KIT"
    exit 0
fi

for d in /usr/local/cuda/bin /usr/local/cuda-*/bin /opt/nvidia/nsight-compute/*; do
    [ -d "$d" ] && case ":$PATH:" in *":$d:"*) ;; *) PATH="$d:$PATH" ;; esac
done
export PATH
LOG=${OUT:-build/gpu-check}
BUDGET=${BUDGET:-480}
TARGETS=docs/perf/gpu-targets.txt
ACCEPT=${ACCEPT:-$(awk '$1 == "accept" { $1 = ""; print }' "$TARGETS")}
MODELS=build/gpu-check-models
mkdir -p "$LOG" "$MODELS"
: >"$LOG/gpu-check.log"
STEPS="$LOG/.steps"
FIGS="$LOG/.figures"
: >"$STEPS"
: >"$FIGS"
T_START=$(date +%s)
status=0

# step NAME LIMIT CMD...: CMD under min(LIMIT, what the budget has left),
# output to the log; its "S " lines are figures for the summary.
step() {
    name=$1 lim=$2
    shift 2
    left=$((BUDGET - ($(date +%s) - T_START)))
    [ $lim -gt $left ] && lim=$left
    if [ $lim -lt 10 ]; then
        printf '%-36s %-26s %5s\n' "$name" "FAIL (budget spent)" "-" >>"$STEPS"
        status=1
        return 1
    fi
    echo "== $name (limit $lim s): $*" >>"$LOG/gpu-check.log"
    t0=$(date +%s)
    timeout -k 5 "$lim" "$@" >"$LOG/.out" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    cat "$LOG/.out" >>"$LOG/gpu-check.log"
    grep '^S ' "$LOG/.out" | cut -c3- >>"$FIGS"
    verdict=pass
    if [ $rc -ne 0 ]; then
        verdict="FAIL (exit $rc$(case $rc in 124 | 137) echo ", timed out" ;; esac))"
        status=1
    fi
    printf '%-36s %-26s %5d s\n' "$name" "$verdict" "$secs" >>"$STEPS"
    echo "$name: $verdict ($secs s)"
    return $rc
}
# nogpu NAME: a CUDA step that cannot run (WHY: no GPU, or nothing built)
WHY="no GPU"
nogpu() {
    printf '%-36s %-26s %5s\n' "$1" "FAIL ($WHY)" "-" >>"$STEPS"
    echo "$1: FAIL ($WHY)"
    status=1
}

GPU=1
if ! nvidia-smi -L >>"$LOG/gpu-check.log" 2>&1; then
    GPU=0
    echo "gpu-check: no usable GPU (nvidia-smi -L failed): CPU steps only, exit 1" | tee -a "$LOG/gpu-check.log"
fi
BINS="build/bench/synth_gguf build/bench/bench_gpu_check"
PRESETS="smollm2-135m-q4_1 llama-1b-bf16 llama-1b-q4_1 qwen-1.5b-q4_k_m qwen-0.5b-q4_k_m"
if [ $GPU = 1 ] && [ -f "$KIT/bin.tar.gz" ] && [ "${GPU_CHECK_BUILD:-0}" != 1 ]; then
    # the kit's programs (--prepare); they find the kit's libraries here
    BIN=build/gpu-check-bin
    GPU_CHECK_BIN=$BIN
    export GPU_CHECK_BIN
    rm -rf "$BIN" && mkdir -p "$BIN"
    step build_unpack_kit 30 tar -C "$BIN" -xzf "$KIT/bin.tar.gz"
    LD_LIBRARY_PATH="$PWD/$KIT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
elif [ $GPU = 1 ]; then
    BINS="$BINS build/tests/test_cuda build/tests/test_cuda_forward build/bench/bench_kernels_cuda"
    BINS="$BINS build/bench/bench_persist_cuda specdec $PLUGIN_SOS"
    [ -d "$KIT" ] || echo "gpu-check: no $KIT (scripts/gpu-check.sh --prepare, then carry it): building against the system's libraries" | tee -a "$LOG/gpu-check.log"
    # the kit when there is one; -Wno-error and no nvcc --Werror: another
    # gcc's new warnings must not stop a check that is about the GPU
    step build "${BUILD_LIMIT:-300}" make -j16 CUDA=1 NVCC_THREADS=8 NVCC_WERROR= \
        CUDA_GENCODE="-gencode arch=compute_90,code=sm_90" \
        $([ -d "$KIT" ] && echo "KIT=$PWD/$KIT") EXTRA_CFLAGS=-Wno-error $BINS
else
    step build 300 make -j2 CUDA=0 $BINS
fi
if [ $status != 0 ]; then
    echo "gpu-check: nothing was built: no step after the build can run" | tee -a "$LOG/gpu-check.log"
    GPU=0
    WHY="not built"
    PRESETS=""
fi

if [ $GPU = 1 ]; then
    step test_cuda 120 sh "$SELF" --run gpu_tests
    # a few seconds; early, so that a spent budget never leaves it out
    step persist_bench 30 sh "$SELF" --run persist_bench
else
    nogpu test_cuda
    nogpu persist_bench
fi

SMALL=""
[ "${GPU_CHECK_SMALL:-0}" = 1 ] && SMALL="--layers 2 --vocab 4096"
for p in $PRESETS; do
    # shellcheck disable=SC2086
    step "gen_$p" 60 $BIN/bench/synth_gguf "$p" "$MODELS/$p.gguf" $SMALL
done
for p in $PRESETS; do step "cpu_$p" 60 $BIN/bench/bench_gpu_check cpu "$MODELS/$p.gguf"; done
# the Llama-3.2-3B BF16 target of the spec steps: 6.4 GB (GPU only; the
# disk must keep 2 GB beside it)
if [ $GPU = 1 ]; then
    free_mb=$(df -Pm "$MODELS" | awk 'NR == 2 { print $4 }')
    if [ "${free_mb:-0}" -ge 8500 ] || [ -n "$SMALL" ]; then
        # shellcheck disable=SC2086
        step gen_llama-3b-bf16 120 $BIN/bench/synth_gguf llama-3b-bf16 "$MODELS/llama-3b-bf16.gguf" $SMALL
    else
        printf '%-36s %-26s %5s\n' gen_llama-3b-bf16 "FAIL (disk: ${free_mb} MB free)" "-" >>"$STEPS"
        status=1
    fi
fi

# decode targets (docs/perf/gpu-targets.txt): tok/s or % of the bound
target() {
    awk -v p="$1" '$1 == "decode" && $2 == p { print ($3 == "toks" ? "--min-toks " : "--min-pct ") $4 }' "$TARGETS"
}
if [ $GPU = 1 ]; then
    # The CPU side at most avx512vnni: on an AMX host its K-quant products
    # would read one activation scale per 256, the CUDA kernels' one per 32
    # (kernels/cpu/cpu.h); a lower level ignores the cap.
    for p in smollm2-135m-q4_1 llama-1b-bf16 llama-1b-q4_1 qwen-1.5b-q4_k_m; do
        step "compare_$p" 90 env SD_CUDA_PDL=0 SD_ISA=avx512vnni $BIN/bench/bench_gpu_check compare "$MODELS/$p.gguf"
    done
    # the same with programmatic dependent launch, whose kernels run
    # ahead of their wait (cuda_int.h): against the CPU again
    for p in smollm2-135m-q4_1 llama-1b-bf16 llama-1b-q4_1 qwen-1.5b-q4_k_m; do
        step "compare_pdl_$p" 90 env SD_CUDA_PDL=1 SD_ISA=avx512vnni $BIN/bench/bench_gpu_check compare "$MODELS/$p.gguf"
    done
    step forward_strategies 120 env SD_CUDA_PDL=0 sh "$SELF" --run forward_tests
    step forward_strategies_pdl 120 env SD_CUDA_PDL=1 sh "$SELF" --run forward_tests
    step cli 120 sh "$SELF" --run cli
    for p in smollm2-135m-q4_1 llama-1b-bf16 llama-1b-q4_1 qwen-1.5b-q4_k_m; do
        # shellcheck disable=SC2046
        step "decode_$p" 60 env SD_CUDA_GRAPH=0 SD_CUDA_PDL=0 $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
        # shellcheck disable=SC2046
        step "decode_graph_$p" 60 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=0 $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
        # shellcheck disable=SC2046
        step "decode_graph_pdl_$p" 60 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=1 $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
        # the same with every RMSNorm launched on its own (no folded norms)
        # shellcheck disable=SC2046
        step "decode_graph_pdl_nofold_$p" 60 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=1 SD_CUDA_FUSE_NORM=0 $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
        # each step one persistent launch (kernels/cuda/step.cu)
        # shellcheck disable=SC2046
        step "decode_persist_$p" 60 env SD_CUDA_GRAPH=1 SD_CUDA_PERSISTENT=1 $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
        # the quantised products on tensor cores (mma.sync, kernels/cuda/mv_mma.cuh)
        if [ "$p" != llama-1b-bf16 ]; then
            # shellcheck disable=SC2046
            step "decode_graph_pdl_mma_$p" 60 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=1 SD_CUDA_MMA=1 $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
        fi
    done
    # the persistent step with each item's weight rows staged in shared
    # memory while it waits (kernels/cuda/stage.cuh): the ledger's
    # fine_smem; and with its norms launched as stages of their own
    # (SD_CUDA_FUSE_NORM=0: what folding them saves on the device)
    for p in smollm2-135m-q4_1 qwen-1.5b-q4_k_m; do
        # shellcheck disable=SC2046
        step "decode_persist_stage_$p" 60 env SD_CUDA_GRAPH=1 SD_CUDA_PERSISTENT=1 SD_CUDA_STAGE=1 $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
        # shellcheck disable=SC2046
        step "decode_persist_nofold_$p" 60 env SD_CUDA_GRAPH=1 SD_CUDA_PERSISTENT=1 SD_CUDA_FUSE_NORM=0 $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
    done
    # the Qwen pair's drafter, whose step the spec targets turn on (the step
    # ledger's decode_pdl / decode_stage figures of qwen-0.5b-q4_k_m)
    step decode_graph_pdl_qwen-0.5b-q4_k_m 60 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=1 $BIN/bench/bench_gpu_check decode "$MODELS/qwen-0.5b-q4_k_m.gguf"
    step decode_persist_qwen-0.5b-q4_k_m 60 env SD_CUDA_GRAPH=1 SD_CUDA_PERSISTENT=1 $BIN/bench/bench_gpu_check decode "$MODELS/qwen-0.5b-q4_k_m.gguf"
    # the persistent step with its products on tensor cores (the ledger's
    # fine_mma figures): the verification target's decode step
    # shellcheck disable=SC2046
    step decode_persist_mma_qwen-1.5b-q4_k_m 60 env SD_CUDA_GRAPH=1 SD_CUDA_PERSISTENT=1 SD_CUDA_MMA=1 $BIN/bench/bench_gpu_check decode "$MODELS/qwen-1.5b-q4_k_m.gguf" $(target qwen-1.5b-q4_k_m)
    # folded launches planned for 4 and 16 resident blocks a multiprocessor (default 8)
    for k in 4 16; do
        for p in smollm2-135m-q4_1 qwen-1.5b-q4_k_m; do
            # shellcheck disable=SC2046
            step "decode_graph_pdl_fold${k}_$p" 60 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=1 SD_CUDA_FUSE_NORM=$k $BIN/bench/bench_gpu_check decode "$MODELS/$p.gguf" $(target $p)
        done
    done
    # shellcheck disable=SC2086
    step verify 90 env SD_CUDA_GRAPH=0 SD_CUDA_PDL=0 $BIN/bench/bench_gpu_check verify \
        "$MODELS/qwen-1.5b-q4_k_m.gguf" "$MODELS/qwen-0.5b-q4_k_m.gguf" $ACCEPT
    # shellcheck disable=SC2086
    step verify_graph_pdl 90 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=1 $BIN/bench/bench_gpu_check verify \
        "$MODELS/qwen-1.5b-q4_k_m.gguf" "$MODELS/qwen-0.5b-q4_k_m.gguf" $ACCEPT
    # shellcheck disable=SC2086
    step verify_graph_pdl_nofold 90 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=1 SD_CUDA_FUSE_NORM=0 $BIN/bench/bench_gpu_check verify \
        "$MODELS/qwen-1.5b-q4_k_m.gguf" "$MODELS/qwen-0.5b-q4_k_m.gguf" $ACCEPT
    # shellcheck disable=SC2086
    step verify_graph_pdl_mma 90 env SD_CUDA_GRAPH=1 SD_CUDA_PDL=1 SD_CUDA_MMA=1 $BIN/bench/bench_gpu_check verify \
        "$MODELS/qwen-1.5b-q4_k_m.gguf" "$MODELS/qwen-0.5b-q4_k_m.gguf" $ACCEPT
    # shellcheck disable=SC2086
    step verify_persist 90 env SD_CUDA_GRAPH=1 SD_CUDA_PERSISTENT=1 $BIN/bench/bench_gpu_check verify \
        "$MODELS/qwen-1.5b-q4_k_m.gguf" "$MODELS/qwen-0.5b-q4_k_m.gguf" $ACCEPT
    # shellcheck disable=SC2086
    step verify_persist_mma 90 env SD_CUDA_GRAPH=1 SD_CUDA_PERSISTENT=1 SD_CUDA_MMA=1 $BIN/bench/bench_gpu_check verify \
        "$MODELS/qwen-1.5b-q4_k_m.gguf" "$MODELS/qwen-0.5b-q4_k_m.gguf" $ACCEPT
    # shellcheck disable=SC2086
    step verify_persist_stage 90 env SD_CUDA_GRAPH=1 SD_CUDA_PERSISTENT=1 SD_CUDA_STAGE=1 $BIN/bench/bench_gpu_check verify \
        "$MODELS/qwen-1.5b-q4_k_m.gguf" "$MODELS/qwen-0.5b-q4_k_m.gguf" $ACCEPT
    # speculative decoding end to end: realised against the cost model of
    # the run's own step costs (bench_gpu_check spec)
    q15="$MODELS/qwen-1.5b-q4_k_m.gguf"
    # shellcheck disable=SC2086
    step spec_identical_qwen-1.5b 90 $BIN/bench/bench_gpu_check spec "$q15" "$q15" 4 $ACCEPT
    # shellcheck disable=SC2086
    step spec_pair_qwen 90 $BIN/bench/bench_gpu_check spec "$q15" "$MODELS/qwen-0.5b-q4_k_m.gguf" 4 $ACCEPT
    # shellcheck disable=SC2086
    step spec_pair_qwen_mma 90 env SD_CUDA_MMA=1 $BIN/bench/bench_gpu_check spec "$q15" "$MODELS/qwen-0.5b-q4_k_m.gguf" 4 $ACCEPT
    if [ -f "$MODELS/llama-3b-bf16.gguf" ]; then
        l3="$MODELS/llama-3b-bf16.gguf"
        # shellcheck disable=SC2046
        step decode_graph_pdl_llama-3b-bf16 90 $BIN/bench/bench_gpu_check decode "$l3" $(target llama-3b-bf16)
        # shellcheck disable=SC2046
        step decode_persist_llama-3b-bf16 90 env SD_CUDA_PERSISTENT=1 $BIN/bench/bench_gpu_check decode "$l3" $(target llama-3b-bf16)
        # shellcheck disable=SC2086
        step spec_identical_llama-3b-bf16 120 $BIN/bench/bench_gpu_check spec "$l3" "$l3" 4 $ACCEPT
        # shellcheck disable=SC2086
        step spec_llama-3b-bf16 120 $BIN/bench/bench_gpu_check spec "$l3" "$MODELS/llama-1b-bf16.gguf" 4 $ACCEPT
    fi
    step bench_kernels 180 sh "$SELF" --run kernels
    step profile_qwen-1.5b 120 sh "$SELF" --run profile "$MODELS/qwen-1.5b-q4_k_m.gguf" 3000 300
    step profile_detail 120 sh "$SELF" --run profile_detail "$MODELS/qwen-1.5b-q4_k_m.gguf"
    if command -v compute-sanitizer >/dev/null; then
        for f in model_q4_1 model_q4_k matmul_q6_k attention_long_and_prefill attention_merge_launch attention_live_splits \
            qkv_rope_neox_bias top_k_rows decode_graph decode_persistent norm_folded_loop; do
            step "memcheck_$f" 60 sh "$SELF" --run san memcheck "$f"
        done
        for f in model_q8_0 attention_long_and_prefill top_k_rows norm_folded_loop decode_persistent; do
            step "racecheck_$f" 60 sh "$SELF" --run san racecheck "$f"
        done
    else
        printf '%-36s %-26s %5s\n' compute-sanitizer "FAIL (not found)" "-" >>"$STEPS"
        status=1
    fi
else
    for p in compare decode decode_graph; do nogpu "${p}_*"; done
    for p in verify bench_kernels memcheck racecheck; do nogpu "$p"; done
    nogpu "spec_*"
fi

{
    echo "gpu-check summary ($(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no GPU'), $(($(date +%s) - T_START)) s of $BUDGET)"
    printf '%-36s %-26s %7s\n' step result time
    cat "$STEPS"
    echo
    echo "figures (targets: matvec kernels >= 85% of copy bandwidth; 5-row verify <= 1.15x 1 row;"
    echo "a self-drafting spec run within 10% of its cost model; and those of $TARGETS:"
    grep -v '^#' "$TARGETS" | tr '\n' ';' | sed 's/;$/)/; s/;/; /g'
    echo
    cat "$FIGS"
    echo
    echo "gpu-check: exit $status"
} >"$LOG/summary.txt"
rm -f "$STEPS" "$FIGS" "$LOG/.out"
echo "---- summary ($LOG/summary.txt)"
cat "$LOG/summary.txt"
exit $status

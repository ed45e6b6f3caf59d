#!/bin/sh
# CUDA backend check for a lent GPU machine (bare: the CUDA toolkit, no
# network, none of the project's Debian packages), within about 8 minutes:
# build for sm_90, the CUDA test suite (every op against the CPU backend),
# a decode measurement, the kernel benchmark, compute-sanitizer memcheck and
# racecheck on short cases. Every step runs under a time limit; no usable
# GPU is a failure here (elsewhere the CUDA tests skip).
#
# Output: $OUT when set, else build/gpu-check, with three files: summary.txt
# (one line per step: name, pass/fail, seconds; printed last), gpu-check.log
# (every step's output) and bench_kernels_cuda.csv.
#
# What the build needs beyond the toolkit (Criterion, PCRE2, libedit) is
# produced here first by `scripts/gpu-check.sh --prepare`: it builds the
# binaries and copies the shared libraries they need, but not the C and C++
# runtimes the GPU machine has itself, into build/gpu-libs. Carry
# build/gpu-libs and the binaries it names; this script uses them when it
# cannot build.
set -u
cd "$(dirname "$0")/.." || exit 1
BINS="build/tests/test_cuda build/bench/bench_kernels_cuda build/bench/bench_model"
STEP_TIMEOUT=${STEP_TIMEOUT:-150}
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -d "$d" ] && case ":$PATH:" in *":$d:"*) ;; *) PATH="$d:$PATH" ;; esac
done
export PATH

if [ "${1:-}" = --prepare ]; then
    make -j2 $BINS || exit 1
    mkdir -p build/gpu-libs
    for b in $BINS; do
        ldd "$b" | awk '/=> \// { print $3 }' |
            grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libgomp|ld-linux[^/]*)\.so' |
            xargs -r cp -L -t build/gpu-libs
    done
    echo "prepared: carry $BINS build/gpu-libs ($(du -sh build/gpu-libs | cut -f1))"
    exit 0
fi

LOG=${OUT:-build/gpu-check}
mkdir -p "$LOG"
: >"$LOG/gpu-check.log"
: >"$LOG/summary.txt"
status=0
# step NAME CMD...: CMD under the time limit, its output appended to the
# log; a summary line either way.
step() {
    name=$1
    shift
    echo "== $name: $*" | tee -a "$LOG/gpu-check.log"
    t0=$(date +%s)
    timeout "$STEP_TIMEOUT" "$@" >>"$LOG/gpu-check.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    verdict=pass
    [ $rc -eq 0 ] || { verdict="FAIL (exit $rc$([ $rc -eq 124 ] && echo ", timed out"))"; status=1; }
    printf '%-28s %-24s %5d s\n' "$name" "$verdict" "$secs" >>"$LOG/summary.txt"
    return $rc
}

if ! nvidia-smi -L >>"$LOG/gpu-check.log" 2>&1; then
    echo "gpu-check: no usable GPU (nvidia-smi -L failed; see $LOG/gpu-check.log)" | tee -a "$LOG/summary.txt"
    exit 1
fi
if ! step build make -j16 CUDA=1 NVCC_THREADS=4 \
    CUDA_GENCODE="-gencode arch=compute_90,code=sm_90" $BINS; then
    for b in $BINS; do [ -x "$b" ] || { echo "no build and no carried $b" >&2; exit 1; }; done
    echo "   build failed: using the carried binaries (libraries from build/gpu-libs)"
    export LD_LIBRARY_PATH="$PWD/build/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# a suite that skips found no GPU: that is a failure on this machine
gpu_tests() {
    build/tests/test_cuda --jobs 4 >"$LOG/.test_cuda" 2>&1
    rc=$?
    cat "$LOG/.test_cuda"
    if grep -q '\[SKIP\]' "$LOG/.test_cuda"; then rc=3; echo "gpu-check: the CUDA tests skipped"; fi
    rm -f "$LOG/.test_cuda"
    return $rc
}
step test_cuda gpu_tests
step decode_stories260K build/bench/bench_model tests/data/models/stories260K.gguf
step bench_kernels build/bench/bench_kernels_cuda "$LOG/bench_kernels_cuda.csv"

if command -v compute-sanitizer >/dev/null; then
    for f in model_q4_1 matmul_q8_0 attention_long_and_prefill qkv_rope_neox_bias; do
        step "memcheck_$f" compute-sanitizer --tool memcheck --target-processes all \
            --error-exitcode 99 build/tests/test_cuda --jobs 1 --filter "cuda/$f"
    done
    step racecheck_model compute-sanitizer --tool racecheck --target-processes all \
        --error-exitcode 99 build/tests/test_cuda --jobs 1 --filter "cuda/model_q8_0"
else
    echo "compute-sanitizer not found: memcheck and racecheck not run" | tee -a "$LOG/summary.txt"
    status=1
fi
echo "---- summary ($LOG/summary.txt)"
cat "$LOG/summary.txt"
echo "gpu-check: exit $status"
exit $status

#!/bin/sh
# CUDA backend checks for a lent GPU machine (about 5 minutes on an H200):
# build, the CUDA test suite (every op against the CPU backend), the kernel
# benchmark, and compute-sanitizer (memcheck, racecheck) on short cases.
# Logs and the benchmark CSV go to $OUT when it is set, else build/gpu-check.
#
# The device image may lack the build's libraries (Criterion, PCRE2). Then
# run `scripts/gpu-check.sh --prepare` here first: it builds the two
# binaries and copies the shared libraries they need into build/gpu-libs;
# carry build/tests/test_cuda, build/bench/bench_kernels_cuda and
# build/gpu-libs, and this script falls back to them when it cannot build.
set -u
cd "$(dirname "$0")/.." || exit 1
BINS="build/tests/test_cuda build/bench/bench_kernels_cuda"

if [ "${1:-}" = --prepare ]; then
    make -j2 $BINS || exit 1
    mkdir -p build/gpu-libs
    for b in $BINS; do
        ldd "$b" | awk '/=> \// { print $3 }' |
            grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|ld-linux[^/]*)\.so' |
            xargs -r cp -L -t build/gpu-libs
    done
    echo "prepared: carry $BINS build/gpu-libs"
    exit 0
fi

LOG=${OUT:-build/gpu-check}
mkdir -p "$LOG"
status=0
# step NAME CMD...: runs CMD with its output in $LOG/NAME.log, shows the tail.
step() {
    name=$1
    shift
    echo "== $name: $*"
    t0=$(date +%s)
    "$@" >"$LOG/$name.log" 2>&1
    rc=$?
    echo "   exit $rc after $(($(date +%s) - t0)) s (log: $LOG/$name.log)"
    tail -n 30 "$LOG/$name.log"
    [ $rc -eq 0 ] || status=$rc
    return $rc
}

command -v nvidia-smi >/dev/null && nvidia-smi >"$LOG/nvidia-smi.log" 2>&1
if ! step build make -j16 CUDA=1 $BINS; then
    for b in $BINS; do [ -x "$b" ] || { echo "no build and no carried $b" >&2; exit 1; }; done
    echo "   build failed: using the carried binaries (libraries from build/gpu-libs)"
    status=0
    export LD_LIBRARY_PATH="$PWD/build/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

step test_cuda build/tests/test_cuda --jobs 4
step bench_kernels build/bench/bench_kernels_cuda "$LOG/bench_kernels_cuda.csv"

if command -v compute-sanitizer >/dev/null; then
    for f in model_q4_1 matmul_q8_0 attention_long_and_prefill; do
        step "memcheck_$f" compute-sanitizer --tool memcheck --target-processes all \
            --error-exitcode 99 build/tests/test_cuda --jobs 1 --filter "cuda/$f"
    done
    step racecheck_model compute-sanitizer --tool racecheck --target-processes all \
        --error-exitcode 99 build/tests/test_cuda --jobs 1 --filter "cuda/model_q8_0"
    if [ -x ./specdec ] && ./specdec --help 2>&1 | grep -q -- '--device'; then
        step memcheck_specdec compute-sanitizer --tool memcheck --error-exitcode 99 \
            ./specdec --device cuda -m tests/data/models/stories260K.gguf -p "Once upon a time" -n 16
    fi
else
    echo "== compute-sanitizer not found: memcheck skipped"
fi
echo "gpu-check: exit $status (logs in $LOG)"
exit $status

#!/bin/sh
# Runs every Criterion suite given, each followed by its wall time
# ("-- SUITE: N s"), then prints one total line:
#   tests: N passed, N failed, N skipped
# Skipped tests are counted from Criterion's synthesis line ("Skipped: N",
# when its version prints one) or, where it does not, from a suite's own
# "[SKIP] SUITE: N of M tests skipped: WHY" line (test_cuda without a GPU);
# the larger of the two counts, so a suite printing both is not counted twice.
# SUITE_JOBS: how many of a suite's tests Criterion runs at once (default 1;
# each test is its own process).
pass=0 fail=0 skip=0 bad=""
for t in "$@"; do
    echo "== $t"
    t0=$(date +%s)
    out=$("$t" --jobs "${SUITE_JOBS:-1}" 2>&1); rc=$?
    printf '%s\n' "$out"
    echo "-- $(basename "$t"): $(($(date +%s) - t0)) s"
    syn=$(printf '%s\n' "$out" | grep 'Synthesis:' | tail -n 1)
    p=$(printf '%s' "$syn" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    f=$(printf '%s' "$syn" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
    c=$(printf '%s' "$syn" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
    s=$(printf '%s' "$syn" | sed -n 's/.*Skipped: \([0-9]*\).*/\1/p')
    own=0
    for n in $(printf '%s\n' "$out" |
               sed -n 's/^\[SKIP\] [^:]*: \([0-9][0-9]*\) of [0-9][0-9]* tests\{0,1\} skipped.*/\1/p'); do
        own=$((own + n))
    done
    s=${s:-0}
    [ "$own" -gt "$s" ] && s=$own
    pass=$((pass + ${p:-0}))
    fail=$((fail + ${f:-0} + ${c:-0}))
    skip=$((skip + s))
    if [ $rc -ne 0 ] || [ -z "$syn" ]; then
        bad="$bad $t"
        [ -z "$syn" ] && fail=$((fail + 1))
    fi
done
echo "tests: $pass passed, $fail failed, $skip skipped"
[ -z "$bad" ] || { echo "failing suites:$bad" >&2; exit 1; }

#!/bin/sh
# Runs every Criterion suite given, then prints one total line.
pass=0 fail=0 bad=""
for t in "$@"; do
    echo "== $t"
    out=$("$t" --jobs 1 2>&1); rc=$?
    printf '%s\n' "$out"
    syn=$(printf '%s\n' "$out" | grep 'Synthesis:' | tail -n 1)
    p=$(printf '%s' "$syn" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    f=$(printf '%s' "$syn" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
    c=$(printf '%s' "$syn" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
    pass=$((pass + ${p:-0}))
    fail=$((fail + ${f:-0} + ${c:-0}))
    if [ $rc -ne 0 ] || [ -z "$syn" ]; then
        bad="$bad $t"
        [ -z "$syn" ] && fail=$((fail + 1))
    fi
done
echo "tests: $pass passed, $fail failed"
[ -z "$bad" ] || { echo "failing suites:$bad" >&2; exit 1; }

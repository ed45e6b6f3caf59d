#!/bin/sh
# memcheck.sh BIN: valgrind memcheck over one short run of every strategy
# with a plugin sampler, and a few runs that fail (bad context, sampler
# argument, drafter file); any error or definitely/indirectly lost byte fails.
set -u
bin=$1
m=tests/data/models
command -v valgrind >/dev/null 2>&1 || { echo "memcheck: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
# check WANT ARGS...: one valgrind run that must exit WANT (0 for a run
# that succeeds, 2 for a bad flag value, 1 for a bad input found later; a
# memcheck error or leak gives 99).
runs=0
check() {
    want=$1
    shift
    runs=$((runs + 1))
    echo "memcheck (exit $want): $*"
    valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect "$bin" "$@" >/dev/null 2>tests/tmp/memcheck.log
    rc=$?
    if [ $rc -ne "$want" ]; then
        cat tests/tmp/memcheck.log >&2
        echo "memcheck: FAILED (exit $rc, expected $want): $*" >&2
        exit 1
    fi
}
run() { check 0 "$@"; }
run_fail() { check 1 "$@"; }
mkdir -p tests/tmp
run -m $m/stories260K.gguf -d $m/stories260K-q8_0.gguf -p "Once upon a time" -n 12 -t 2 \
    --strategy ar,spec,nasd,draft --sampler top_k --sampler-arg top_k=20 --seed 1
run -m $m/stories260K.gguf -p "Once upon a time" -n 12 -t 1 --strategy beam --sampler greedy --json
run -m $m/stories260K.gguf --draft-layers 2 -p "Once upon a time" -n 12 -t 1 \
    --strategy spec,nasd --sampler nucleus --sampler-arg top_p=0.9 --seed 2 --no-cache --json
run -m $m/stories260K.gguf --draft-layers 5 -p "Once upon a time" -n 12 -t 1 \
    --strategy ar,spec,nasd,draft --sampler penalty,top_k,mirostat --sampler-arg top_k=30 --seed 3
run -m $m/stories260K.gguf -d $m/stories260K-q8_0.gguf -p "Once upon a time" -n 12 -t 1 \
    --strategy spec --sampler penalty,greedy --sampler-arg repeat=1.5 --json
run -m $m/stories260K.gguf -d $m/stories260K-q8_0.gguf --draft-vocab 100 -p "Once upon a time" -n 12 -t 2 \
    --strategy spec,draft --sampler multinomial --seed 4
run -m $m/stories260K-f16.gguf -p "Lily and Tom" -n 8 --sampler greedy --list-samplers
run -m $m/stories260K.gguf --perplexity tests/data/text/GPL-3.txt --ctx 64 --chunks 2 -t 2
run -m $m/stories260K.gguf --perplexity tests/data/text/GPL-3.txt --ctx 200 --chunks 1 -t 1 --json
# Error paths free what they made too.
check 2 -m $m/stories260K.gguf --perplexity tests/data/text/GPL-3.txt --ctx 4096 -t 1
printf 'Once upon a time.\n' >tests/tmp/memcheck.txt
run_fail -m $m/stories260K.gguf --perplexity tests/tmp/memcheck.txt -t 1
run_fail -m $m/stories260K.gguf -p "Once upon a time" --ctx 4 -t 1
check 2 -m $m/stories260K.gguf -d $m/stories260K-q8_0.gguf -p hi -t 1 --sampler nucleus --sampler-arg top_p=2
check 2 -m $m/stories260K.gguf -p hi -t 1 --sampler penalty,top_k --sampler-arg nucleus.top_p=2
check 2 -m $m/stories260K.gguf -p hi -t 1 --strategy beam --sampler penalty,greedy
run_fail -m $m/stories260K.gguf -d tests/data/README.md -p hi -t 1
printf '/length 6\n/ngram\n/sampler multinomial temperature=0.8\nOnce upon a time\n/sampler penalty,mirostat tau=3\nOnce\n/beam\nOnce\n/sampler penalty\n/quit\n' >tests/tmp/memcheck.in
echo "memcheck: interactive"
valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    "$bin" -m $m/stories260K.gguf -i <tests/tmp/memcheck.in >/dev/null 2>tests/tmp/memcheck.log \
    || { cat tests/tmp/memcheck.log >&2; echo "memcheck: FAILED: interactive" >&2; exit 1; }
echo "memcheck: $((runs + 1)) runs, 0 errors, 0 bytes definitely or indirectly lost"

#!/bin/sh
# Installs the system packages the build and tests need, or says how;
# "deps.sh dev" does the same for the checkers (valgrind, clang + libFuzzer).
set -e
pkgs=""
[ -f /usr/include/criterion/criterion.h ] || pkgs="$pkgs libcriterion-dev"
[ -f /usr/include/pcre2.h ] || pkgs="$pkgs libpcre2-dev"
[ -f /usr/include/histedit.h ] || pkgs="$pkgs libedit-dev"
command -v pip >/dev/null 2>&1 || command -v pip3 >/dev/null 2>&1 || pkgs="$pkgs python3-pip"
if [ "${1:-}" = dev ]; then
    pkgs=""
    command -v valgrind >/dev/null 2>&1 || pkgs="$pkgs valgrind"
    command -v clang >/dev/null 2>&1 || pkgs="$pkgs clang"
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
        pkgs="$pkgs libclang-rt-dev"
fi
[ -z "$pkgs" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing$pkgs"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq $pkgs >/dev/null
else
    echo "deps: missing packages:$pkgs" >&2
    echo "deps: run: sudo apt-get install -y$pkgs" >&2
    exit 1
fi

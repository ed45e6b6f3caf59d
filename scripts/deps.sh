#!/bin/sh
# Installs the system packages the build and tests need, or says how.
set -e
pkgs=""
[ -f /usr/include/criterion/criterion.h ] || pkgs="$pkgs libcriterion-dev"
[ -f /usr/include/pcre2.h ] || pkgs="$pkgs libpcre2-dev"
[ -f /usr/include/histedit.h ] || pkgs="$pkgs libedit-dev"
command -v pip >/dev/null 2>&1 || command -v pip3 >/dev/null 2>&1 || pkgs="$pkgs python3-pip"
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

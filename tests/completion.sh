#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/completion.sh BUILD - completion/bonsai parses, and completes
# `bonsai-dump -s <TAB> STORE` with the maps of a real store of two maps
# (one name with a space, quoted for the shell), a prefix with the maps
# that start with it, a missing store with nothing and no message, and an
# option with the tool's options.  Uses the tools in BUILD.  Run by
# `make check-man`; exits 1 on any failure.
set -u

build=${1:?usage: tests/completion.sh BUILD}
cd "$(dirname "$0")/.." || exit 1
fail=0
say() { echo "completion.sh: $*"; }

bash -n completion/bonsai || { say "FAILED: bash -n completion/bonsai"; exit 1; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
store=$tmp/two.bonsai
printf '%s\n' 'VERSION=3' 'format=print' 'database=alpha' 'type=btree' \
    'HEADER=END' ' k' ' v' 'DATA=END' 'VERSION=3' 'format=print' \
    'database=big cats' 'type=btree' 'HEADER=END' ' lion' ' roar' \
    'DATA=END' | "$build/bonsai-load" "$store" ||
    { say "FAILED: bonsai-load could not make the store"; exit 1; }

PATH=$(cd "$build" && pwd):$PATH
. completion/bonsai

# expect WANT WORD... : completes the word at COMP_CWORD (set before) of
# the command line WORD... and compares COMPREPLY, joined by '|', and what
# went to stderr, with WANT.
expect() {
    local want=$1 got err
    shift
    COMP_WORDS=("$@")
    COMPREPLY=()
    _bonsai 2>"$tmp/err"
    got=$(IFS='|'; echo "${COMPREPLY[*]}")
    err=$(cat "$tmp/err")
    if [[ $got != "$want" || -n $err ]]; then
        say "FAILED: $* (word $COMP_CWORD): got '$got'," \
            "want '$want'${err:+; stderr: $err}"
        fail=1
    fi
}

COMP_CWORD=2 expect 'alpha|big\ cats' bonsai-dump -s '' "$store"
# what bash gives for `bonsai-dump -s <TAB> STORE`, the cursor on the
# second of the blanks between -s and STORE: no empty word, STORE current
line="bonsai-dump -s  $store"
COMP_LINE=$line COMP_POINT=15 COMP_CWORD=2 \
    expect 'alpha|big\ cats' bonsai-dump -s "$store"
COMP_CWORD=2 expect 'big\ cats' bonsai-dump -s b "$store"
COMP_CWORD=3 expect 'alpha|big\ cats' bonsai-stat "$store" -s ''
COMP_CWORD=2 expect '' bonsai-dump -s '' "$tmp/missing.bonsai"
COMP_CWORD=1 expect '-s' bonsai-dump -s
COMP_CWORD=1 expect '--quick|--quiet' bonsai-verify --qui

[[ ! -e $tmp/missing.bonsai ]] ||
    { say "FAILED: completing made $tmp/missing.bonsai"; fail=1; }
[[ $fail -eq 0 ]] || exit 1
say "ok"

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/abi/check.sh BUILD CC "CFLAGS" "LIBS" - the library's ABI:
#  1. the shared library exports exactly the functions bonsai.h declares
#     (nm -D), and the static library defines no other global symbol;
#  2. a program that defines functions named like bonsai's internal ones
#     links against each library and runs correctly (tests/abi/clash.c).
set -eu
build=$1 cc=$2 cflags=$3 libs=$4
out=$build/abi
mkdir -p "$out"
fail() { echo "check-abi: FAILED: $*"; exit 1; }

sed -n 's/^BONSAI_API [^(]*[ *]\(bonsai_[a-z0-9_]*\)(.*/\1/p' lib/bonsai.h |
    sort -u >"$out/declared"
[ -s "$out/declared" ] || fail "no BONSAI_API declarations in lib/bonsai.h"
nm -D --defined-only "$build/libbonsai.so" | awk '$2 ~ /^[TW]$/ {print $3}' |
    sort -u >"$out/exported"
diff -u "$out/declared" "$out/exported" >"$out/diff-shared" ||
    { cat "$out/diff-shared"; fail "libbonsai.so exports other than bonsai.h"; }
nm -g --defined-only "$build/libbonsai.a" | awk 'NF == 3 {print $3}' |
    sort -u >"$out/static"
diff -u "$out/declared" "$out/static" >"$out/diff-static" ||
    { cat "$out/diff-static"; fail "libbonsai.a defines other globals"; }

# shellcheck disable=SC2086
$cc $cflags -Ilib -o "$out/clash-static" tests/abi/clash.c \
    "$build/libbonsai.a" $libs || fail "clash.c does not link statically"
# shellcheck disable=SC2086
$cc $cflags -Ilib -o "$out/clash-shared" tests/abi/clash.c \
    -L"$build" -lbonsai $libs || fail "clash.c does not link to the .so"
rm -f "$out/store" "$out/store-lock"
"$out/clash-static" "$out/store" || fail "clash-static"
rm -f "$out/store" "$out/store-lock"
LD_LIBRARY_PATH=$build "$out/clash-shared" "$out/store" || fail "clash-shared"
rm -f "$out/store" "$out/store-lock"
echo "check-abi: OK: $(wc -l <"$out/exported") functions exported," \
     "none else; internal names do not clash"

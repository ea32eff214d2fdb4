#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/examples.sh BUILD CC "FLAGS" "LIBS" - every examples/*.c builds
# against the static library and runs twice in an empty directory (a
# second run finds the store the first left), and the README shows each
# example it names (a line "<!-- example: examples/NAME.c -->" before a
# C block) exactly as the file has it.
set -eu
build=$1 cc=$2 flags=$3 libs=$4
out=$build/examples
rm -rf "$out" && mkdir -p "$out"
fail() { echo "check-examples: FAILED: $*"; exit 1; }
n=0
for src in examples/*.c; do
    name=$(basename "$src" .c)
    # shellcheck disable=SC2086
    $cc $flags -Ilib -o "$out/$name" "$src" "$build/libbonsai.a" $libs ||
        fail "$src does not build"
    mkdir -p "$out/run-$name"
    (cd "$out/run-$name" && "../$name" >../"$name".out) ||
        fail "$src: first run failed"
    (cd "$out/run-$name" && "../$name" >../"$name".out2) ||
        fail "$src: second run failed"
    n=$((n + 1))
done
# the README's copies
grep -o '<!-- example: [^ ]* -->' README.md | sed 's/<!-- example: \(.*\) -->/\1/' |
while read -r src; do
    [ -f "$src" ] || fail "README.md names $src, which is not there"
    awk -v want="<!-- example: $src -->" '
        $0 == want { armed = 1; next }
        armed && /^```c$/ { inside = 1; next }
        inside && /^```$/ { exit }
        inside { print }' README.md >"$out/readme-$(basename "$src")"
    diff -u "$src" "$out/readme-$(basename "$src")" ||
        fail "README.md's copy of $src differs from the file"
done
echo "check-examples: OK: $n examples built and ran; the README's copies match"

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/coverage.sh BUILD [--report] - runs every test binary of BUILD (a
# tree built with --coverage: `make coverage`), then prints the line and
# branch coverage of each lib/*.c and in total, and per file the three
# functions with the most lines never run.  Counters start from zero on
# every run; --report only prints the figures of the last run.  Exits
# non-zero when a test binary failed (the figures are still shown).
# Run from the top directory.
set -u
build=$1
abs=$(cd "$build" && pwd)

failed=
if [ "${2:-}" != --report ]; then
    find "$abs" -name '*.gcda' -exec rm -f {} +
    for t in "$abs"/tests/test_*; do
        [ -x "$t" ] || continue
        echo "== $t"
        BONSAI_BUILD_DIR="$abs" "$t" ${TESTFLAGS:---jobs 2} ||
            failed="$failed ${t##*/}"
    done
fi

mkdir -p "$abs/gcov"
report=$abs/gcov/summary.txt
: > "$report"
for src in lib/*.c; do
    f=${src##*/}
    # from the top directory, where the objects name their sources; the
    # annotated files it writes here are moved to $abs/gcov/ below
    gcov -b -f -o "$abs/obj/lib" "$src" 2>/dev/null |
        awk -v file="$f" '
        # gcov prints, per function and then per source file:
        #   Function '\''name'\'' / File '\''path'\''
        #   Lines executed:P% of N
        #   Taken at least once:P% of N   (branches)
        /^Function / { kind = "fn"; name = $2; gsub(/'\''/, "", name); next }
        /^File / {
            path = $2; gsub(/'\''/, "", path)
            kind = (path ~ ("(^|/)lib/" file "$")) ? "file" : "other"; next
        }
        /^Lines executed:/ {
            split($0, a, /[:% ]+/); p = a[3]; n = $NF
            if (kind == "fn" && n > 0) {
                miss[name] = int(n * (100 - p) / 100 + 0.5)
            } else if (kind == "file") {
                lines = n; lhit = int(n * p / 100 + 0.5)
            }
            next
        }
        /^Taken at least once:/ && kind == "file" {
            split($0, a, /[:% ]+/); bhit = int($NF * a[5] / 100 + 0.5)
            branches = $NF; next
        }
        /^No branches/ && kind == "file" { branches = 0; bhit = 0 }
        END {
            # the three functions with the most unrun lines
            top = ""
            for (k = 0; k < 3; k++) {
                best = ""; bm = 0
                for (fn in miss)
                    if (miss[fn] > bm) { bm = miss[fn]; best = fn }
                if (best == "") break
                top = top (top == "" ? "" : ", ") best " " bm
                delete miss[best]
            }
            printf "%s %d %d %d %d %s\n", file, lhit, lines, bhit,
                   branches + 0, top
        }' >> "$report"
    mv -f -- *.gcov "$abs/gcov/" 2>/dev/null
done

awk '
function pct(a, b) { return b ? sprintf("%5.1f%%", 100 * a / b) : "    -" }
BEGIN {
    printf "%-12s %13s %7s %13s %7s  %s\n", "file", "lines run", "",
           "branches", "", "most lines unrun (function lines)"
}
{
    top = ""
    for (i = 6; i <= NF; i++) top = top (i > 6 ? " " : "") $i
    printf "%-12s %6d/%-6d %7s %6d/%-6d %7s  %s\n", $1, $2, $3, pct($2, $3),
           $4, $5, pct($4, $5), top
    l += $2; L += $3; b += $4; B += $5
}
END {
    printf "%-12s %6d/%-6d %7s %6d/%-6d %7s\n", "total", l, L, pct(l, L), b,
           B, pct(b, B)
}' "$report"
echo "coverage: annotated sources in $abs/gcov/ (*.c.gcov)"
if [ -n "$failed" ]; then
    echo "coverage: FAILED test binaries:$failed"
    exit 1
fi

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/man.sh BUILD - the manual pages in man/ are clean mdoc, and each
# tool's page, its --help and its bash completion know the same options.
#
#  1. `mandoc -T lint -W warning` prints nothing for any page, and where
#     groff is installed (what man(1) renders pages with), each renders
#     with no groff warning.
#  2. For each tool BUILD/bonsai-X: the options of `bonsai-X --help` (its
#     entry lines, "    -s MAP  ..." or "    -q, --quiet  ...") and those
#     of man/bonsai-X.1 (the .It lines of OPTIONS) are the same names, and
#     a short and a long option given as one entry ("-q, --quiet") are
#     paired alike in both; the completion's list (completion/bonsai) has
#     the same names as the page.  Every difference is printed, one line
#     per tool and side.
# Run by `make check-man`; exits 1 on any failure.
set -u

build=${1:?usage: tests/man.sh BUILD}
cd "$(dirname "$0")/.." || exit 1
# every program of tools/*.c
tools=$(for f in tools/*.c; do basename "$f" .c; done)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

say() { echo "man.sh: $*"; }

# ---- 1. the pages render cleanly --------------------------------------------

if ! command -v mandoc >/dev/null 2>&1; then
    say "mandoc not found: install it (Debian: mandoc)"
    exit 1
fi
if ! mandoc -T lint -W warning man/* >"$tmp/lint" 2>&1 || [ -s "$tmp/lint" ]
then
    cat "$tmp/lint"
    say "FAILED: mandoc -T lint -W warning man/*"
    fail=1
fi

# groff, as man(1) runs it, with every warning on; one run for all pages
# (man-db's own start-up costs half a second a page: too slow for check).
if command -v groff >/dev/null 2>&1; then
    if ! groff -mandoc -Tutf8 -ww -z man/* >"$tmp/warn" 2>&1 ||
            [ -s "$tmp/warn" ]; then
        cat "$tmp/warn"
        say "FAILED: groff -mandoc -ww man/*"
        fail=1
    fi
else
    say "groff not installed: pages checked by mandoc only"
fi

# ---- 2. --help, the page and the completion agree ---------------------------

# The options of --help's entry lines on stdin, one a line, then for an
# entry that gives a short and a long option the pair "-q, --quiet".
help_options() {
    awk '/^[ \t]+-/ {
        short = ""; long = ""; n = 0
        line = $0; sub(/^[ \t]+/, "", line)
        while (match(line, /^--?[A-Za-z0-9][A-Za-z0-9-]*/)) {
            opt = substr(line, 1, RLENGTH)
            print opt
            if (opt ~ /^--/) long = opt; else short = opt
            n++
            line = substr(line, RLENGTH + 1)
            if (!sub(/^, */, "", line)) break
        }
        if (n == 2 && short != "" && long != "") print short ", " long
    }'
}

# The same from the .It lines of the OPTIONS section of an mdoc page.
page_options() {
    awk '/^\.Sh / { inopt = ($2 == "OPTIONS"); next }
        inopt && /^\.It / {
        short = ""; long = ""; n = 0
        for (i = 2; i < NF; i++) {
            if ($i != "Fl") continue
            opt = $(i + 1); gsub(/\\-/, "-", opt); opt = "-" opt
            print opt
            if (opt ~ /^--/) long = opt; else short = opt
            n++
        }
        if (n == 2 && short != "" && long != "") print short ", " long
    }' "$1"
}

# Compares the lists help, page and comp (each an option, or a pair, a
# line; comp "TOOL OPTION" lines): prints each difference, fails if any.
compare() {
    awk -v tool="$1" -v page="$2" '
        function add(list, x) {
            if ((list, x) in seen) return
            seen[list, x] = 1
            order[list] = order[list] SUBSEP x
        }
        FILENAME ~ /help$/ { add("help", $0) }
        FILENAME ~ /page$/ {
            add("page", $0)
            if (!index($0, " ")) add("names", $0)
        }
        FILENAME ~ /comp$/ && $1 == tool { add("comp", $2) }
        # what list a has and list b lacks, "-q, --quiet" quoted
        function only(a, b, what,    n, i, x, out) {
            n = split(substr(order[a], 2), x, SUBSEP); out = ""
            for (i = 1; i <= n; i++)
                if (!((b, x[i]) in seen))
                    out = out " " (index(x[i], " ") ? "\"" x[i] "\"" : x[i])
            if (out != "") {
                print "man.sh: " tool ": " what ":" out
                bad = 1
            }
        }
        END {
            if (order["help"] == "" || order["page"] == "" ||
                order["comp"] == "") {
                print "man.sh: FAILED: " tool ": no options found in" \
                    " --help, " page " or completion/bonsai"
                exit 1
            }
            only("help", "page", "in --help, not in " page)
            only("page", "help", "in " page ", not in --help")
            only("comp", "names", "in completion/bonsai, not in " page)
            only("names", "comp", "in " page ", not in completion/bonsai")
            exit bad
        }' "$tmp/help" "$tmp/page" "$tmp/comp"
}

# Every tool's completion options, "TOOL OPTION" a line.
bash -c '. completion/bonsai || exit 1
    for tool; do
        _bonsai_options "$tool" && printf "$tool %s\n" $_bonsai_opts
    done' sh $tools >"$tmp/comp" || fail=1

for tool in $tools; do
    page=man/$tool.1
    if [ ! -x "$build/$tool" ] || [ ! -f "$page" ]; then
        say "FAILED: $tool: no $build/$tool or no $page"
        fail=1
        continue
    fi
    "$build/$tool" --help 2>&1 | help_options >"$tmp/help"
    page_options "$page" >"$tmp/page"
    compare "$tool" "$page" || fail=1
done

if [ "$fail" -ne 0 ]; then
    say "FAILED"
    exit 1
fi
say "ok: $(ls man | wc -l) pages lint clean; --help, pages and completion" \
    "agree for $(echo $tools | wc -w) tools"

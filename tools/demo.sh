#!/bin/sh
# SPDX-License-Identifier: MIT
# demo.sh - runs every bonsai-fill preset (the experiment's ladder) at one
# cap and prints a table against the original's figures.
#
#   tools/demo.sh FILL OUTDIR [CAP]
#
# FILL is the bonsai-fill program, OUTDIR gets, per preset, NAME.csv (the
# --csv rows), NAME.log (its output) and NAME.json (its --json line), and
# for all of them summary.tsv (for tools/plot.gp) and table.md (the table
# printed at the end).  CAP defaults to 256M.  File presets use
# OUTDIR/fill.db, removed after each run.
#
# DEMO_PRESETS (names) and DEMO_BOUNDS (NAME:COUNT ...) in the
# environment replace the lists below.
#
# A preset listed in BOUNDS runs with --count instead of until full: at
# 256 MiB it would take far more than a minute.  Its ratio is then
# projected from its bytes per entry (cap / bytes per entry).
#
# The original's figure is per "15 GB", read as 15 GiB: scaled to the cap
# it is orig_entries * cap / (15 * 2^30).
#
# Exit status: 0 when every run exited 0, else 1 (the table still shows
# every run).
set -u

FILL=${1:?usage: demo.sh FILL OUTDIR [CAP]}
OUT=${2:?usage: demo.sh FILL OUTDIR [CAP]}
CAP=${3:-256M}

PRESETS=${DEMO_PRESETS:-"direct direct-cache direct-cache-n120-zlib
direct-cache-n120-lz4 random-cache file-direct file-direct-cache
file-direct-cache-n120-zlib file-direct-cache-n120-lz4 file-random-cache"}

# Presets that would run for many minutes at 256 MiB, and their bound.
# Sequential keys take well under a byte an entry: filling 256 MiB means
# billions of them.  Random keys would fill it at about 43 M entries, but
# at some 150 k inserts/s that alone takes five minutes.
BOUNDS=${DEMO_BOUNDS:-"direct:20000000 direct-cache:50000000
direct-cache-n120-zlib:20000000 direct-cache-n120-lz4:20000000
random-cache:10000000 file-direct:20000000 file-direct-cache:50000000
file-direct-cache-n120-zlib:20000000 file-direct-cache-n120-lz4:20000000
file-random-cache:5000000"}

bound_of() {
    for b in $BOUNDS; do
        [ "${b%%:*}" = "$1" ] && { echo "${b#*:}"; return; }
    done
}

# The value of a number or string field of a flat JSON object.
jget() {
    sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$1"
}

run_one() {
    p=$1
    set -- --preset "$p" --cap "$CAP" --quiet --json --csv "$OUT/$p.csv"
    case $p in file-*) set -- "$@" --file "$OUT/fill.db" ;; esac
    n=$(bound_of "$p")
    [ -n "$n" ] && set -- "$@" --count "$n"
    echo "demo: bonsai-fill $*" >&2
    "$FILL" "$@" >"$OUT/$p.log" 2>&1
    rc=$?
    rm -f "$OUT/fill.db"
    tail -n 1 "$OUT/$p.log" | grep '^{' >"$OUT/$p.json"
    return $rc
}

# One summary.tsv line: preset entries stopped bpe rate orig_scaled ratio
# orig_bpe rc.  ratio is entries / orig_scaled, or for a bounded run
# (cap / bpe) / orig_scaled.
summarize() {
    p=$1 rc=$2 j="$OUT/$1.json"
    if [ ! -s "$j" ]; then
        printf '%s\t0\tfailed\t0\t0\t0\t0\t0\t%s\n' "$p" "$rc"
        return
    fi
    awk -v p="$p" -v rc="$rc" -v e="$(jget "$j" entries)" \
        -v st="$(jget "$j" stopped)" -v bpe="$(jget "$j" bytes_per_entry)" \
        -v r="$(jget "$j" inserts_per_sec)" -v os="$(jget "$j" orig_scaled)" \
        -v cap="$(jget "$j" cap)" -v oe="$(jget "$j" orig_entries)" 'BEGIN {
        reached = (st == "full") ? e : (bpe > 0 ? cap / bpe : 0)
        ratio = os > 0 ? reached / os : 0
        obpe = oe > 0 ? 15 * 2^30 / oe : 0
        printf "%s\t%s\t%s\t%s\t%s\t%.0f\t%.3f\t%.2f\t%s\n",
               p, e, st, bpe, r, os, ratio, obpe, rc }'
}

# The Markdown table from summary.tsv.
table() {
    awk -F '\t' -v cap="$CAP" 'BEGIN {
        print "| preset | entries reached | bytes/entry | inserts/s |" \
              " original at " cap " | its bytes/entry | ratio |"
        print "|---|---:|---:|---:|---:|---:|---:|"
    }
    function group(n,   s, r) {
        s = sprintf("%.0f", n)
        r = ""
        while (length(s) > 3) {
            r = "," substr(s, length(s) - 2) r
            s = substr(s, 1, length(s) - 3)
        }
        return s r
    }
    {
        if ($3 == "failed") {
            printf "| %s | FAILED (exit %s) | | | | | |\n", $1, $9
            next
        }
        e = group($2)
        if ($3 == "count") e = e " (--count bound)"
        if ($9 != 0) e = e " (exit " $9 ")"
        ratio = sprintf("%.2f", $7)
        if ($3 == "count") ratio = "~" ratio " (projected)"
        printf "| %s | %s | %.3f | %s | %s | %.1f | %s |\n", $1, e, $4,
               group($5), group($6), $8, ratio
    }' "$OUT/summary.tsv"
}

mkdir -p "$OUT" || exit 1
: >"$OUT/summary.tsv.new"
status=0
for p in $PRESETS; do
    run_one "$p"
    rc=$?
    [ $rc -ne 0 ] && status=1 && echo "demo: $p exited $rc" >&2
    summarize "$p" $rc >>"$OUT/summary.tsv.new"
done
mv "$OUT/summary.tsv.new" "$OUT/summary.tsv"
table | tee "$OUT/table.md"
echo
echo "original: MapDB 2012, entries in 15 GB scaled to $CAP (15 GB read" \
     "as 15 GiB); ratio = entries / that."
exit $status

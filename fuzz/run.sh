#!/bin/sh
# SPDX-License-Identifier: MIT
# fuzz/run.sh - runs one libFuzzer harness for a while (used by fuzz.mk).
#
#   run.sh BINARY NAME SECONDS MAX_LEN OUT [libFuzzer flags ...]
#
# Seeds: fuzz/corpus/NAME/ and fuzz/regress/NAME/ (when present), only read.
# New inputs go to OUT/corpus/NAME/, a crash to OUT/artifacts/NAME/, the
# whole log to OUT/logs/NAME.log; fuzz/NAME.dict is used when it exists.
# Prints one summary line (runs, exec/s, coverage) and, on a crash, the
# report.  Exit 0 when the time ran out without a finding, else 1.
set -u
bin=$1 name=$2 seconds=$3 maxlen=$4 out=$5
shift 5

corpus=$out/corpus/$name
artifacts=$out/artifacts/$name
log=$out/logs/$name.log
mkdir -p "$corpus" "$artifacts" "$out/logs"

set -- -max_total_time="$seconds" -max_len="$maxlen" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$@"
[ -f "fuzz/$name.dict" ] && set -- -dict="fuzz/$name.dict" "$@"
seeds="fuzz/corpus/$name"
[ -d "$seeds" ] || { echo "fuzz: $name: no $seeds (make fuzz-corpus)"; seeds=; }
regress="fuzz/regress/$name"
[ -d "$regress" ] || regress=

echo "== fuzz $name: ${seconds}s, -max_len=$maxlen, log $log"
"$bin" "$@" "$corpus" $seeds $regress >"$log" 2>&1
rc=$?

# the last status line: "#N DONE cov: C ft: F corp: K/S lim: L exec/s: E ..."
awk -v name="$name" '
    / cov: / { line = $0 }
    /^stat::number_of_executed_units:/ { runs = $2 }
    /^stat::average_exec_per_sec:/ { eps = $2 }
    END {
        cov = ft = corp = "?"
        n = split(line, w, " ")
        for (i = 1; i < n; i++) {
            if (w[i] == "cov:") cov = w[i + 1]
            if (w[i] == "ft:") ft = w[i + 1]
            if (w[i] == "corp:") corp = w[i + 1]
        }
        printf "fuzz %s: %s runs, %s exec/s, cov %s, ft %s, corpus %s\n",
               name, runs == "" ? "?" : runs, eps == "" ? "?" : eps, cov, ft,
               corp
    }' "$log"

if [ $rc -ne 0 ]; then
    echo "fuzz $name: FAILED (exit $rc); the report:"
    grep -m1 -A24 -E 'bonsai fuzz finding|ERROR: [A-Za-z]+Sanitizer|runtime error:|ERROR: libFuzzer' "$log" |
        cut -c1-200
    ls -1 "$artifacts" 2>/dev/null | sed "s|^|    $artifacts/|"
    echo "fuzz $name: a new crasher belongs in fuzz/regress/$name/ (make check replays it)"
    exit 1
fi
exit 0

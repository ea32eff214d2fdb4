# SPDX-License-Identifier: MIT
# plot.gp - draws the demo's figures (make plot):
#
#   gnuplot -e "dir='build/demo'" tools/plot.gp
#
# dir/entries.png          entries against bytes used, one line per preset
#                          (from dir/NAME.csv; the steeper, the denser);
#                          grey lines are the original's rows.  Nodes held
#                          in a write cache are not "used" until written,
#                          so cached presets start steep.
# dir/bytes-per-entry.png  bytes per entry per preset, bonsai beside the
#                          original (from dir/summary.tsv), log scale

if (!exists("dir")) dir = "build/demo"

# One colour per rung; its file- twin is dashed in the same colour.
# A preset without a CSV is skipped with a warning.
rungs = "direct direct-cache direct-cache-n120-zlib direct-cache-n120-lz4 " . \
        "random-cache"
nfile = 5   # every rung has a file- twin
csv(n) = dir . "/" . n . ".csv"
MiB = 1024.0 * 1024.0

set terminal pngcairo size 1280,800 font "Sans,11"
set grid
set key outside right top

# ---- entries against bytes used ----------------------------------------

set output dir . "/entries.png"
set title "bonsai-fill: entries against memory used, per preset\n" . \
    "{/*0.8 (a write cache's nodes count once written, so cached runs " . \
    "start steep; lines that coincide hide each other)}"
set xlabel "bytes used (MiB)"
set ylabel "entries (millions)"
set xrange [0:*]
set yrange [0:*]
set datafile separator ","
# The original's rows as lines of constant bytes per entry.
orig(x, bpe) = x * MiB / bpe / 1e6
set samples 2
plot for [i=1:words(rungs)] csv(word(rungs, i)) \
         using ($3 / MiB):($2 / 1e6) \
         with linespoints pointsize 0.5 lw 2 lc i dt 1 title word(rungs, i), \
     for [i=1:nfile] csv("file-" . word(rungs, i)) \
         using ($3 / MiB):($2 / 1e6) \
         with linespoints pointsize 0.5 lw 2 lc i dt 2 \
         title "file-" . word(rungs, i), \
     orig(x, 16.4) with lines dt 2 lc "gray40" \
         title "MapDB direct, 16.4 B/entry", \
     orig(x, 9.3) with lines dt 3 lc "gray40" \
         title "MapDB + write cache, 9.3", \
     orig(x, 4.9) with lines dt 4 lc "gray40" \
         title "MapDB + n120 + compression, 4.9", \
     orig(x, 24.7) with lines dt 5 lc "gray40" \
         title "MapDB random keys, 24.7"

# ---- bytes per entry per preset ----------------------------------------

set output dir . "/bytes-per-entry.png"
set title "bytes per entry: bonsai at the demo's cap " . \
    "against the original (15 GB)"
unset xlabel
set ylabel "bytes per entry (log scale)"
set logscale y
set yrange [0.01:200]
set datafile separator "\t"
stats dir . "/summary.tsv" using 4 nooutput
set xrange [-0.7:STATS_records - 0.3]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -35 left nomirror
set key inside right top
set grid noxtics ytics
plot dir . "/summary.tsv" using 4:xtic(1) title "bonsai" lc rgb "#2a7fb8", \
     "" using 8 title "original (MapDB 2012)" lc rgb "#bbbbbb", \
     "" using ($0 - 0.22):4:(sprintf("%.2f", $4)) \
         with labels offset 0,0.7 font "Sans,9" notitle, \
     "" using ($0 + 0.22):8:(sprintf("%.1f", $8)) \
         with labels offset 0,0.7 font "Sans,9" notitle

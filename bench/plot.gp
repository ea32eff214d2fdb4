# SPDX-License-Identifier: MIT
# bench/plot.gp - draws the CSV of bonsai-bench as one PNG (gnuplot 5.4).
#   gnuplot -e "csv='bench/results.csv'; out='bench/results.png'" bench/plot.gp
# (what `make bench-plot` runs).  Seven panels: bytes per entry of the
# map's tree alone (free pages not counted; malloc's bytes in use for the
# in-memory peers) and peak RSS per entry, every engine; the throughput
# ratios bonsai/LMDB of each bonsai engine; and those of bonsai-mem over
# each in-memory peer (std-unordered has no ordered scan, so no scan bar).
# The batched-hit bar is bonsai's batched gets of present keys over the
# other engine's single gets (none of them has a batched get).  An empty
# cell in the CSV draws no bar.
# Columns are found by name in the CSV's header line.

if (!exists("csv")) csv = 'bench/results.csv'
if (!exists("out")) out = 'bench/results.png'

set datafile separator ','
set datafile columnheaders
set terminal pngcairo size 1500,1900 font ',10'
set output out

# One group of bars per workload (x = workload_index); within a group,
# one bar per engine or per figure, `nbars` of them.
bar(i, k, nbars) = i + (k - (nbars - 1) / 2.0) * 0.8 / nbars
is(name) = strcol("engine") eq name
# Short bar labels: six bars share a workload's width.
lbl(v) = v < 10 ? sprintf("%.2f", v) : sprintf("%.0f", v)
engines = "lmdb bonsai-mem bonsai-file std-map std-unordered judy"
colors = "#4e79a7 #59a14f #e15759 #9c755f #bab0ac #edc948"
nengines = words(engines)
ratios = "inserts_per_s hits_per_s batch_hits_per_s misses_per_s scan_per_s"
ratio_labels = "insert lookup-hit batched-hit lookup-miss scan"
ratio_colors = "#4e79a7 #f28e2b #ffbe7d #76b7b2 #b07aa1"
nratios = words(ratios)

set style fill solid 0.85 border -1
set boxwidth 0.8 / nengines
set grid ytics
set key outside top center horizontal
set xtics nomirror rotate by 0
set xrange [-0.6:*]
set logscale y

set multiplot layout 4,2 title "bonsai vs LMDB and in-memory peers (".csv.")"

set title "tree bytes per entry (log scale; lower is better)"
set ylabel "bytes / entry"
plot for [k=1:nengines] csv using (bar(column("workload_index"), k - 1, nengines)): \
        (is(word(engines, k)) ? column("tree_bytes_per_entry") : NaN) \
        with boxes lc rgb word(colors, k) title word(engines, k), \
     for [k=1:nengines] csv using (bar(column("workload_index"), k - 1, nengines)): \
        (is(word(engines, k)) ? column("tree_bytes_per_entry") : NaN): \
        (lbl(column("tree_bytes_per_entry"))) \
        with labels offset 0,0.6 font ',7' notitle, \
     csv using (column("workload_index")):(NaN):xtic(1) notitle

set title "peak RSS per entry (log scale; lower is better)"
plot for [k=1:nengines] csv using (bar(column("workload_index"), k - 1, nengines)): \
        (is(word(engines, k)) ? column("rss_bytes_per_entry") : NaN) \
        with boxes lc rgb word(colors, k) title word(engines, k), \
     for [k=1:nengines] csv using (bar(column("workload_index"), k - 1, nengines)): \
        (is(word(engines, k)) ? column("rss_bytes_per_entry") : NaN): \
        (lbl(column("rss_bytes_per_entry"))) \
        with labels offset 0,0.6 font ',7' notitle, \
     csv using (column("workload_index")):(NaN):xtic(1) notitle

set boxwidth 0.8 / nratios
set ylabel "bonsai / LMDB"
do for [e in "bonsai-mem bonsai-file"] {
    set title sprintf("throughput %s / lmdb (log scale; above 1 = bonsai faster)", e)
    plot for [k=1:nratios] csv using (bar(column("workload_index"), k - 1, nratios)): \
            (is(e) ? column("ratio_".word(ratios, k)) : NaN) \
            with boxes lc rgb word(ratio_colors, k) \
            title word(ratio_labels, k), \
         for [k=1:nratios] csv using (bar(column("workload_index"), k - 1, nratios)): \
            (is(e) ? column("ratio_".word(ratios, k)) : NaN): \
            (sprintf("%.2f", column("ratio_".word(ratios, k)))) \
            with labels offset 0,0.6 font ',7' notitle, \
         1 with lines lc rgb "black" dt 2 notitle, \
         csv using (column("workload_index")):(NaN):xtic(1) notitle
}

# The same rates of bonsai-mem over each peer: the peer's row holds them
# in its mem_ratio_ columns.
set ylabel "bonsai-mem / peer"
do for [p in "judy std-unordered std-map"] {
    set title sprintf("throughput bonsai-mem / %s (log scale; above 1 = bonsai faster)", p)
    plot for [k=1:nratios] csv using (bar(column("workload_index"), k - 1, nratios)): \
            (is(p) ? column("mem_ratio_".word(ratios, k)) : NaN) \
            with boxes lc rgb word(ratio_colors, k) \
            title word(ratio_labels, k), \
         for [k=1:nratios] csv using (bar(column("workload_index"), k - 1, nratios)): \
            (is(p) ? column("mem_ratio_".word(ratios, k)) : NaN): \
            (sprintf("%.2f", column("mem_ratio_".word(ratios, k)))) \
            with labels offset 0,0.6 font ',7' notitle, \
         1 with lines lc rgb "black" dt 2 notitle, \
         csv using (column("workload_index")):(NaN):xtic(1) notitle
}

unset multiplot

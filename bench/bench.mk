# SPDX-License-Identifier: MIT
# bench/bench.mk - the benchmark, bonsai against LMDB and in-memory
# collections (see bench/README.md).  Included by the top Makefile, which
# defines BUILD, CC, ALL_CPPFLAGS, ALL_CFLAGS, OPT_FLAGS, ALL_LDFLAGS,
# STATIC and LIBS.  To try it alone:
#   make -f Makefile -f bench/bench.mk bench-quick
#
#   make bench        the full run: table on stdout, bench/results.csv
#   make bench-quick  a tenth of every size; fails only if an engine fails
#                     or the engines disagree (never on a time); the
#                     in-memory peers only on the two 1 M workloads
#   make bench-plot   bench/results.png from bench/results.csv (gnuplot)
#
# BENCH_FLAGS is passed to every run, e.g. BENCH_FLAGS='--timeout 900'
# or BENCH_FLAGS='--workload rand-u64 --engine lmdb'.

BENCH_BIN       := $(BUILD)/bonsai-bench
BENCH_OBJ       := $(BUILD)/obj/bench/bench.o
# std::map and std::unordered_map: the only C++, behind bench/peers.h.
PEERS_OBJ       := $(BUILD)/obj/bench/peers.o
BENCH_CSV       ?= bench/results.csv
BENCH_PNG       ?= bench/results.png
BENCH_QUICK_CSV ?= $(BUILD)/bench-quick.csv
BENCH_FLAGS     ?=
# Linked by the C driver: libstdc++ by name (Debian: g++, libjudy-dev).
BENCH_LIBS      := -llmdb -lJudy -lstdc++ -lm
BENCH_CXXFLAGS  := -std=c++17 -Wall -Wextra -Werror $(OPT_FLAGS) -MMD -MP \
                   $(CXXFLAGS)

.PHONY: bench bench-quick bench-plot

$(BENCH_OBJ): bench/bench.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(PEERS_OBJ): bench/peers.cc
	@mkdir -p $(@D)
	$(CXX) $(ALL_CPPFLAGS) $(BENCH_CXXFLAGS) -c -o $@ $<

$(BENCH_BIN): $(BENCH_OBJ) $(PEERS_OBJ) $(INTERNAL)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(BENCH_LIBS) $(LIBS)

bench: $(BENCH_BIN)
	$(BENCH_BIN) --csv $(BENCH_CSV) $(BENCH_FLAGS)

# The peers on every workload would more than double the check's time
# (std::map alone takes 20 s of CPU); these two cover every kind of key and
# value they are given.
bench-quick: $(BENCH_BIN)
	$(BENCH_BIN) --quick --jobs 2 --csv $(BENCH_QUICK_CSV) \
	    --peers-on rand-u64-v16 --peers-on str-keys $(BENCH_FLAGS)

bench-plot: bench/plot.gp
	@test -f $(BENCH_CSV) || { echo "bench-plot: no $(BENCH_CSV):" \
	    "run 'make bench' first"; exit 1; }
	gnuplot -e "csv='$(BENCH_CSV)'; out='$(BENCH_PNG)'" bench/plot.gp
	@echo "bench-plot: wrote $(BENCH_PNG)"

-include $(BENCH_OBJ:.o=.d) $(PEERS_OBJ:.o=.d)

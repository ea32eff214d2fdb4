# SPDX-License-Identifier: MIT
# tools/fill.mk - the experiment's ladder; included by the top Makefile,
# whose $(BUILD) and $(BUILD)/bonsai-fill it uses.
#
#   make demo   every bonsai-fill preset at DEMO_CAP (default 256M), one
#               after the other; per preset a CSV, log and JSON line in
#               DEMO_DIR (default $(BUILD)/demo), then one table against
#               the original's figures (tools/demo.sh)
#   make plot   $(DEMO_DIR)/entries.png (entries against bytes used, every
#               preset) and $(DEMO_DIR)/bytes-per-entry.png (a bar chart)
#               with gnuplot, from the last demo's files; runs the demo
#               first if there are none

DEMO_CAP ?= 256M
DEMO_DIR ?= $(BUILD)/demo
DEMO_RUN = sh tools/demo.sh '$(BUILD)/bonsai-fill' '$(DEMO_DIR)' '$(DEMO_CAP)'

.PHONY: demo plot

demo: $(BUILD)/bonsai-fill
	$(DEMO_RUN)

# With `make demo plot` (even -j), plot waits for demo.
plot: $(BUILD)/bonsai-fill | $(filter demo,$(MAKECMDGOALS))
	@test -s '$(DEMO_DIR)/summary.tsv' || $(DEMO_RUN)
	gnuplot -e "dir='$(DEMO_DIR)'" tools/plot.gp
	@echo "plot: $(DEMO_DIR)/entries.png $(DEMO_DIR)/bytes-per-entry.png"

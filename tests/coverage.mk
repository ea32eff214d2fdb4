# SPDX-License-Identifier: MIT
# tests/coverage.mk - line and branch coverage of lib/ by the tests;
# included by the top Makefile.  Not part of `make check`.
#
#   make coverage   builds the library, the tools and the tests with
#                   --coverage (and -O0, so lines map to code) into
#                   $(COV_BUILD) (default $(BUILD)/cov), runs every test
#                   binary there, and prints the line and branch coverage
#                   of each lib/*.c and in total, with the functions that
#                   leave the most lines unrun (gcov -b, tests/coverage.sh).
#                   The annotated sources stay in $(COV_BUILD)/gcov/.
#
# Branch coverage is gcov's "taken at least once": of all the outcomes of
# all conditional branches, the share that ever happened.

COV_BUILD ?= $(BUILD)/cov

.PHONY: coverage coverage-build

coverage:
	@$(MAKE) --no-print-directory BUILD='$(COV_BUILD)' SANITIZE=0 LTO=0 \
	    CFLAGS='$(CFLAGS) -O0 --coverage' LDFLAGS='$(LDFLAGS) --coverage' \
	    coverage-build
	@TESTFLAGS='$(TESTFLAGS)' sh tests/coverage.sh '$(COV_BUILD)'

# (run by the sub-make above, in $(COV_BUILD))
coverage-build: all $(TESTS)

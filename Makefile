# SPDX-License-Identifier: MIT
# Makefile - builds bonsai out of tree in $(BUILD) (default build/).
#
#   make            build/libbonsai.a, build/libbonsai.so.$(VERSION) (+ the
#                   libbonsai.so.0 and libbonsai.so links), and one program
#                   build/<name> for every tools/<name>.c (tools/common/
#                   holds the code they share)
#   make check      builds and runs every tests/test_*.c (Criterion), first
#                   in build/, then again in build/asan/ with ASan + UBSan
#                   (`make check-tree` runs one tree: build/, or $(BUILD))
#   make demo       every bonsai-fill preset at 256 MiB, one table (tools/fill.mk)
#   make plot       PNG charts of the demo (gnuplot)
#   make bench      bonsai against LMDB and in-memory collections, side by
#                   side (bench/bench.mk); bench-quick, bench-plot
#   make fuzz       libFuzzer harnesses (fuzz/fuzz.mk); fuzz-smoke: each for
#                   FUZZ_SMOKE_SECONDS (60; CI gives 30), two at a time
#                   under -j2
#   make coverage   line and branch coverage of lib/ by the tests, with gcov
#                   (tests/coverage.mk; not part of check)
#   make check-man  the manual pages (man/) lint clean and agree with each
#                   tool's --help and the bash completion (part of check)
#   make install    PREFIX=/usr/local DESTDIR= ; make uninstall ; make clean
#
# Your CC, CPPFLAGS, CFLAGS, LDFLAGS and LDLIBS are honoured and come after
# ours, so they win.  SANITIZE=1 builds the whole tree with sanitizers (what
# `make check` does in build/asan/).
#

# The version is that of lib/bonsai.h's BONSAI_VERSION_* macros.
version_part = $(shell sed -n 's/^\#define BONSAI_VERSION_$(1) //p' lib/bonsai.h)
VERSION    := $(call version_part,MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)
SOMAJOR    := $(call version_part,MAJOR)
CC         ?= cc
AR         ?= ar

PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PCDIR      ?= $(LIBDIR)/pkgconfig
MANDIR     ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions

BUILD      ?= build
SANITIZE   ?= 0
# Criterion runs each test in a forked worker; keep it to two cores.
TESTFLAGS  ?= --jobs 2

# Link-time optimisation across the library's files, with gcc: its layers
# call one another on every put and get (loads 20-25 % faster).  Fat
# objects keep libbonsai.a usable by programs built without it.  LTO=0
# turns it off (coverage and sanitizer builds do).
CC_IS_GCC := $(shell $(CC) --version 2>/dev/null | grep -c 'Free Software Foundation')
LTO ?= $(if $(filter-out 0,$(CC_IS_GCC)),1,0)
ifeq ($(LTO),1)
LTO_FLAGS := -flto=auto -ffat-lto-objects
else
LTO_FLAGS :=
endif

ifeq ($(SANITIZE),1)
# BONSAI_CHECK_HINTS: the library checks its shortcuts against the slow
# path (an assert), so that the whole suite tests them.
OPT_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
             -fno-sanitize-recover=all -DBONSAI_CHECK_HINTS
SAN_LDFLAGS := -fsanitize=address,undefined
else
OPT_FLAGS := -O2 -g $(LTO_FLAGS)
SAN_LDFLAGS :=
endif

BONSAI_CPPFLAGS := -D_GNU_SOURCE -Ilib
BONSAI_CFLAGS   := -std=c11 -Wall -Wextra -Werror $(OPT_FLAGS) -MMD -MP
ALL_CPPFLAGS    := $(BONSAI_CPPFLAGS) $(CPPFLAGS)
ALL_CFLAGS      := $(BONSAI_CFLAGS) $(CFLAGS)
ALL_LDFLAGS     := $(SAN_LDFLAGS) $(LDFLAGS)
LIBS            := -lz -llz4 -lpthread $(LDLIBS)

# ---- what there is -------------------------------------------------------

LIB_SRCS   := $(sort $(wildcard lib/*.c))
TOOL_SRCS  := $(sort $(wildcard tools/*.c))
# tools/common/*.c is what the programs share, linked into each of them.
TCOM_SRCS  := $(sort $(wildcard tools/common/*.c))
TEST_SRCS  := $(sort $(wildcard tests/test_*.c))
# Any other tests/*.c is a helper linked into every test binary.
HELP_SRCS  := $(sort $(filter-out $(TEST_SRCS),$(wildcard tests/*.c)))

LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TOOL_OBJS  := $(TOOL_SRCS:%.c=$(BUILD)/obj/%.o)
TCOM_OBJS  := $(TCOM_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_OBJS  := $(TEST_SRCS:%.c=$(BUILD)/obj/%.o)
HELP_OBJS  := $(HELP_SRCS:%.c=$(BUILD)/obj/%.o)

STATIC     := $(BUILD)/libbonsai.a
# The library's objects as they are, internal symbols included: only for
# the tests and fuzz seeds that test layers below the public API.
INTERNAL   := $(BUILD)/libbonsai-internal.a
# libbonsai.a holds one object whose only global symbols are bonsai.h's.
COMBINED   := $(BUILD)/obj/libbonsai.o
SHARED     := $(BUILD)/libbonsai.so.$(VERSION)
SONAME     := libbonsai.so.$(SOMAJOR)
SOLINKS    := $(BUILD)/$(SONAME) $(BUILD)/libbonsai.so
TOOLS      := $(TOOL_SRCS:tools/%.c=$(BUILD)/%)
TESTS      := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
MAN1       := $(sort $(wildcard man/*.1))
MAN3       := $(sort $(wildcard man/*.3))

.PHONY: all check check-tree check-abi check-examples check-man install \
        uninstall clean
.DEFAULT_GOAL := all

all: $(STATIC) $(SHARED) $(SOLINKS) $(TOOLS)

# ---- compiling -------------------------------------------------------------

# Hidden by default: only what bonsai.h marks BONSAI_API is exported.
$(LIB_OBJS): $(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(TOOL_OBJS) $(TCOM_OBJS) $(TEST_OBJS) $(HELP_OBJS): $(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

# ---- linking ---------------------------------------------------------------

# The static library: the objects linked into one relocatable object
# (with LTO across them, as the shared library has), whose hidden symbols
# are then made local, so that no internal name can clash with a
# program's own (a program may well have its own cache_flush).
$(COMBINED): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(if $(LTO_FLAGS),-flinker-output=nolto-rel) \
	    -r -nostdlib -o $@ $^
	objcopy --localize-hidden $@

$(STATIC): $(COMBINED)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(INTERNAL): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(SHARED): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,$(SONAME) $(ALL_LDFLAGS) \
	    -o $@ $^ $(LIBS)

$(BUILD)/$(SONAME): $(SHARED)
	ln -sf $(notdir $(SHARED)) $@

$(BUILD)/libbonsai.so: $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

# One program per tools/<name>.c, with the shared tools/common/ code,
# linked with the library's own objects: with LTO the program and the
# library are optimised as one (a sequential fill runs 25-35 % fewer
# instructions a put than through libbonsai.a or the .so, whose calls
# cannot be inlined into the caller).  They use bonsai.h alone, but for
# bonsai-compact's progress (lib/compact.h), bonsai-verify's problems in
# parts (lib/verify.h) and bonsai-dump's salvage (lib/salvage.h).
$(TOOLS): $(BUILD)/%: $(BUILD)/obj/tools/%.o $(TCOM_OBJS) $(INTERNAL)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# Test programs link the objects' plain code (-fno-lto: the objects are
# fat): an LTO link of the whole library per test binary took most of
# the build; the tools, the benchmark and the examples keep LTO.
$(TESTS): $(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(HELP_OBJS) $(INTERNAL)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(if $(LTO_FLAGS),-fno-lto) $(ALL_LDFLAGS) -o $@ $^ \
	    -lcriterion $(LIBS)

# ---- tests -----------------------------------------------------------------

# Runs every test binary of this tree; the first one that fails stops it.
# Tests find the tools through BONSAI_BUILD_DIR.  Sanitizer reports go to
# files in $(SANLOG) and any report fails the run: a leak found when a
# Criterion worker exits does not fail the test by itself.
SANLOG := $(abspath $(BUILD))/sanitizer-logs

check-tree: all $(TESTS) check-abi check-examples
	@rm -rf '$(SANLOG)' && mkdir -p '$(SANLOG)' && n=0 && \
	for t in $(TESTS); do \
	    echo "== $$t"; \
	    BONSAI_BUILD_DIR='$(abspath $(BUILD))' \
	    ASAN_OPTIONS="$${ASAN_OPTIONS:+$$ASAN_OPTIONS:}log_path=$(SANLOG)/asan" \
	    UBSAN_OPTIONS="$${UBSAN_OPTIONS:+$$UBSAN_OPTIONS:}log_path=$(SANLOG)/ubsan" \
	        $$t $(TESTFLAGS); rc=$$?; \
	    if [ -n "$$(ls -A '$(SANLOG)')" ]; then \
	        cat '$(SANLOG)'/*; \
	        echo "check: FAILED: $$t: sanitizer report above"; exit 1; \
	    fi; \
	    if [ $$rc -ne 0 ]; then echo "check: FAILED: $$t (exit $$rc)"; exit 1; fi; \
	    n=$$((n + 1)); \
	done; \
	echo "check: $$n test binaries passed in $(BUILD)/"

# Only bonsai.h's functions leave the libraries, and a program's own
# functions named like internal ones do not clash (tests/abi/check.sh).
check-abi: all
	@sh tests/abi/check.sh '$(BUILD)' '$(CC)' \
	    '$(ALL_CPPFLAGS) $(filter-out -MMD -MP,$(ALL_CFLAGS)) $(ALL_LDFLAGS)' \
	    '$(LIBS)'

# examples/*.c build and run, and the README shows them as they are.
check-examples: all
	@sh tests/examples.sh '$(BUILD)' '$(CC)' \
	    '$(ALL_CPPFLAGS) $(filter-out -MMD -MP,$(ALL_CFLAGS)) $(ALL_LDFLAGS)' \
	    '$(LIBS)'

# The manual pages lint clean (mandoc, and groff where it is installed),
# each tool's page, its --help and the bash completion know the same
# options, and the completion lists a store's maps for -s (both scripts
# run, whatever the first says).
check-man: all
	@sh tests/man.sh '$(BUILD)'; m=$$?; \
	bash tests/completion.sh '$(BUILD)' && [ $$m -eq 0 ]

# The plain tree, then the sanitizer tree; a failure in either stops here.
check: check-tree check-man
	@ASAN_OPTIONS=detect_leaks=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    $(MAKE) --no-print-directory BUILD='$(BUILD)/asan' SANITIZE=1 \
	    check-tree
	@echo "check: OK: $(words $(TESTS)) test binaries passed in" \
	    "$(BUILD)/ and $(BUILD)/asan/ (ASan+UBSan)"
	@if printf '#include <lmdb.h>\n#include <Judy.h>\n' | \
	    $(CC) -E -x c - >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory bench-quick; \
	else \
	    echo "check: bench-quick not run: no lmdb.h or Judy.h" \
	        "(Debian: liblmdb-dev, libjudy-dev)"; \
	fi

# ---- the experiment's ladder, the benchmark, fuzzing ------------------------

include tools/fill.mk
-include bench/bench.mk
-include fuzz/fuzz.mk
include tests/coverage.mk

# ---- install ---------------------------------------------------------------

install: all
	install -d '$(DESTDIR)$(INCLUDEDIR)' '$(DESTDIR)$(LIBDIR)' \
	    '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(PCDIR)'
	install -m 644 lib/bonsai.h '$(DESTDIR)$(INCLUDEDIR)/bonsai.h'
	install -m 644 $(STATIC) '$(DESTDIR)$(LIBDIR)/libbonsai.a'
	install -m 755 $(SHARED) '$(DESTDIR)$(LIBDIR)/$(notdir $(SHARED))'
	ln -sf $(notdir $(SHARED)) '$(DESTDIR)$(LIBDIR)/$(SONAME)'
	ln -sf $(SONAME) '$(DESTDIR)$(LIBDIR)/libbonsai.so'
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    bonsai.pc.in > '$(DESTDIR)$(PCDIR)/bonsai.pc'
	$(if $(TOOLS),install -m 755 $(TOOLS) '$(DESTDIR)$(BINDIR)/')
	install -d '$(DESTDIR)$(MANDIR)/man1' '$(DESTDIR)$(MANDIR)/man3' \
	    '$(DESTDIR)$(BASHCOMPDIR)'
	install -m 644 $(MAN1) '$(DESTDIR)$(MANDIR)/man1/'
	install -m 644 $(MAN3) '$(DESTDIR)$(MANDIR)/man3/'
	for t in $(notdir $(TOOLS)); do \
	    install -m 644 completion/bonsai '$(DESTDIR)$(BASHCOMPDIR)'/$$t || \
	        exit 1; \
	done

uninstall:
	rm -f '$(DESTDIR)$(INCLUDEDIR)/bonsai.h' \
	    '$(DESTDIR)$(LIBDIR)/libbonsai.a' \
	    '$(DESTDIR)$(LIBDIR)/$(notdir $(SHARED))' \
	    '$(DESTDIR)$(LIBDIR)/$(SONAME)' \
	    '$(DESTDIR)$(LIBDIR)/libbonsai.so' \
	    '$(DESTDIR)$(PCDIR)/bonsai.pc' \
	    $(foreach t,$(notdir $(TOOLS)),'$(DESTDIR)$(BINDIR)/$(t)') \
	    $(foreach p,$(notdir $(MAN1)),'$(DESTDIR)$(MANDIR)/man1/$(p)') \
	    $(foreach p,$(notdir $(MAN3)),'$(DESTDIR)$(MANDIR)/man3/$(p)') \
	    $(foreach t,$(notdir $(TOOLS)),'$(DESTDIR)$(BASHCOMPDIR)/$(t)')

clean:
	rm -rf '$(BUILD)'

-include $(LIB_OBJS:.o=.d) $(TOOL_OBJS:.o=.d) $(TCOM_OBJS:.o=.d) \
         $(TEST_OBJS:.o=.d) $(HELP_OBJS:.o=.d)

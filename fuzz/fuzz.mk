# SPDX-License-Identifier: MIT
# fuzz/fuzz.mk - libFuzzer harnesses, included by the top Makefile (which
# defines BUILD, CC, ALL_CPPFLAGS, ALL_CFLAGS, LIB_SRCS, LIBS and STATIC).
#
#   make fuzz          builds every harness, runs each for FUZZ_SECONDS
#                      (default 300), one after another; fails on a finding
#   make fuzz-smoke    the same for FUZZ_SMOKE_SECONDS each (default 60),
#                      two at a time under make -j2
#   make fuzz-build    only builds them: $(BUILD)/fuzz/fuzz_<name>
#   make fuzz-corpus   (re)writes the seeds fuzz/corpus/<name>/ with
#                      fuzz/make_corpus.c
#   make fuzz-merge    adds to fuzz/corpus/<name>/ the inputs found so far
#                      ($(BUILD)/fuzz/corpus/<name>/) that add coverage;
#                      check what it added before committing it
#
# One harness per decoder or entry point (fuzz/fuzz_<name>.c): node (node
# images and packed images), file (a store file through open, cursors,
# stat, a write transaction), ops (an op sequence against a model),
# compress (the codecs), u64groups (the groups form of a u64 key section,
# lib/u64groups.c).  Each is built with $(FUZZ_CC) and
# -fsanitize=fuzzer,address,undefined against lib/*.c compiled again with
# the same flags into $(BUILD)/fuzz/obj/.  A run reads fuzz/corpus/<name>/
# and fuzz/regress/<name>/ and never writes there: new inputs go to
# $(BUILD)/fuzz/corpus/<name>/, a crash to $(BUILD)/fuzz/artifacts/<name>/,
# the log to $(BUILD)/fuzz/logs/<name>.log (fuzz/run.sh).  Keep a crasher
# in fuzz/regress/<name>/: tests/test_fuzz_replay.c replays both folders
# in `make check`, built by the ordinary compiler.
#
# FUZZ_CC, FUZZ_CFLAGS, FUZZ_SANITIZE and FUZZ_FLAGS (more libFuzzer
# options, e.g. FUZZ_FLAGS=-jobs=2) may be set; CPPFLAGS, LDFLAGS and
# LDLIBS are honoured as in the top Makefile.

FUZZ_CC            ?= clang
FUZZ_SANITIZE      ?= -fsanitize=fuzzer,address,undefined \
                      -fno-sanitize-recover=all
FUZZ_CFLAGS        ?= -std=c11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra
FUZZ_SECONDS       ?= 300
FUZZ_SMOKE_SECONDS ?= 60
FUZZ_TIMEOUT       ?= 30
FUZZ_FLAGS         ?=

# -max_len per harness: a node image, a small store file, a program, a
# compressed stream, a key section of up to 2001 keys
FUZZ_MAXLEN_node      ?= 16384
FUZZ_MAXLEN_file      ?= 65536
FUZZ_MAXLEN_ops       ?= 4096
FUZZ_MAXLEN_compress  ?= 16384
FUZZ_MAXLEN_u64groups ?= 32768

FUZZ_NAMES    := node file ops compress u64groups
FUZZ_OUT      := $(BUILD)/fuzz
FUZZ_BINS     := $(FUZZ_NAMES:%=$(FUZZ_OUT)/fuzz_%)
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=$(FUZZ_OUT)/obj/%.o)
FUZZ_OBJS     := $(FUZZ_NAMES:%=$(FUZZ_OUT)/obj/fuzz/fuzz_%.o)
FUZZ_MKCORPUS := $(FUZZ_OUT)/make_corpus
FUZZ_MKC_OBJ  := $(FUZZ_OUT)/host/fuzz/make_corpus.o

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-corpus fuzz-merge

fuzz-build: $(FUZZ_BINS)

$(FUZZ_LIB_OBJS) $(FUZZ_OBJS): $(FUZZ_OUT)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) -MMD -MP \
	    -c -o $@ $<

$(FUZZ_BINS): $(FUZZ_OUT)/fuzz_%: $(FUZZ_OUT)/obj/fuzz/fuzz_%.o \
                                 $(FUZZ_LIB_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) $(LDFLAGS) -o $@ $^ $(LIBS)

# Runs harness $(1) for $(2) seconds on its corpus.
fuzz_run_one = sh fuzz/run.sh $(FUZZ_OUT)/fuzz_$(1) $(1) $(2) \
    $(FUZZ_MAXLEN_$(1)) $(FUZZ_OUT) -timeout=$(FUZZ_TIMEOUT) $(FUZZ_FLAGS)

# Runs each harness in turn, all of them even when one fails; fails at the
# end if any did.
define fuzz_run_all
	@fail=; \
	$(foreach h,$(FUZZ_NAMES),$(call fuzz_run_one,$(h),$(1)) || \
	    fail="$$fail $(h)";) \
	if [ -n "$$fail" ]; then echo "fuzz: FAILED:$$fail"; exit 1; fi; \
	echo "fuzz: OK: $(FUZZ_NAMES), $(1)s each"
endef

fuzz: $(FUZZ_BINS)
	$(call fuzz_run_all,$(FUZZ_SECONDS))

# The smoke run, a target a harness, so that `make -j2 fuzz-smoke` runs
# two at a time (CI's cores are idle by then); each runs even when another
# failed, and the last step fails if any did.
FUZZ_SMOKE_RUNS := $(FUZZ_NAMES:%=fuzz-smoke-%)
.PHONY: $(FUZZ_SMOKE_RUNS)

fuzz-smoke: $(FUZZ_SMOKE_RUNS)
	@fail=; for h in $(FUZZ_NAMES); do \
	    [ -e $(FUZZ_OUT)/smoke-failed-$$h ] && fail="$$fail $$h"; \
	done; \
	if [ -n "$$fail" ]; then echo "fuzz: FAILED:$$fail"; exit 1; fi; \
	echo "fuzz: OK: $(FUZZ_NAMES), $(FUZZ_SMOKE_SECONDS)s each"

$(FUZZ_SMOKE_RUNS): fuzz-smoke-%: $(FUZZ_OUT)/fuzz_%
	@rm -f $(FUZZ_OUT)/smoke-failed-$*
	@$(call fuzz_run_one,$*,$(FUZZ_SMOKE_SECONDS)) || \
	    touch $(FUZZ_OUT)/smoke-failed-$*

# ---- seeds ------------------------------------------------------------------

# make_corpus is an ordinary program against the ordinary static library.
$(FUZZ_MKC_OBJ): fuzz/make_corpus.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(FUZZ_MKCORPUS): $(FUZZ_MKC_OBJ) $(INTERNAL)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

fuzz-corpus: $(FUZZ_MKCORPUS)
	$(FUZZ_MKCORPUS) fuzz/corpus $(FUZZ_NAMES)

fuzz-merge: $(FUZZ_BINS)
	@for h in $(FUZZ_NAMES); do \
	    mkdir -p fuzz/corpus/$$h $(FUZZ_OUT)/corpus/$$h $(FUZZ_OUT)/logs; \
	    $(FUZZ_OUT)/fuzz_$$h -merge=1 fuzz/corpus/$$h \
	        $(FUZZ_OUT)/corpus/$$h >$(FUZZ_OUT)/logs/merge-$$h.log 2>&1 || \
	        { echo "fuzz-merge: $$h failed, see" \
	               "$(FUZZ_OUT)/logs/merge-$$h.log"; exit 1; }; \
	    echo "fuzz-merge: fuzz/corpus/$$h: $$(ls fuzz/corpus/$$h | wc -l)" \
	         "files"; \
	done

-include $(FUZZ_LIB_OBJS:.o=.d) $(FUZZ_OBJS:.o=.d) $(FUZZ_MKC_OBJ:.o=.d)

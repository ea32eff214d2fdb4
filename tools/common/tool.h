/* SPDX-License-Identifier: MIT */
/*
 * tool.h - what the bonsai command-line programs share, so that each of
 * them reads as its own job: the exit codes, messages on standard error
 * that start with the program's name, usage errors, opening a store with
 * the checks a program owes its user first, and small parsers.
 *
 * Linked into every program in tools/ (it is not a program itself).  A
 * program calls tool_init first; the functions below then know its name
 * and its one-line synopsis.
 */
#ifndef BONSAI_TOOL_H
#define BONSAI_TOOL_H

#include <stdint.h>

#include "bonsai.h"

/* Exit codes of every tool. */
#define TOOL_EXIT_OK 0
#define TOOL_EXIT_FAIL 1  /* an operation failed, or a problem was found */
#define TOOL_EXIT_USAGE 2 /* bad usage */

/* The program's name ("bonsai-dump") and synopsis: the argument part of
 * each form of the command, one per line ("[-p] FILE\n-l FILE"); a line
 * that starts with a space continues the form before it. */
void tool_init(const char *name, const char *synopsis);

/* The program's name, as tool_init set it ("bonsai-dump"). */
const char *tool_name(void);

/* Messages name what the work at hand reads (an input file, "standard
 * input") after the program's name while it is set: "NAME: WHAT: ...";
 * NULL for none. */
void tool_set_context(const char *what);

/* "NAME: message\n" on stderr; returns TOOL_EXIT_FAIL. */
int tool_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Like tool_fail, without the exit status: for warnings. */
void tool_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* -q, --quiet: from now on tool_info says nothing. */
void tool_set_quiet(int quiet);

/* Like tool_warn, for what the user did not ask to hear but may want to
 * know (that the tool waits for another writer): not with --quiet. */
void tool_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The message (fmt may be NULL), the synopsis and a pointer to --help on
 * stderr; returns TOOL_EXIT_USAGE. */
int tool_usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* The usage error for what getopt_long returned as c (':' a missing
 * argument, anything else an unknown option), from optopt / optind. */
int tool_bad_option(int c, char **argv);

/* The usage error for a bad option value, naming the option and what it
 * takes: "OPTION: RULE, not 'VALUE'" (rule: "must be ..."). */
int tool_bad_value(const char *option, const char *value, const char *rule);

/* What bonsai_open takes for --page-size, --node-bytes or --node-entries,
 * in bonsai_options_check's words ("must be a power of two from 64 to
 * 65536"); NULL for another option. */
const char *tool_store_rule(const char *option);

/* value of --page-size, --node-bytes or --node-entries as a number the
 * library takes for it, into *out; 0, or the usage error (with its rule,
 * tool_store_rule). */
int tool_store_option(const char *option, const char *value, uint32_t *out);

/* A file name from the command line, what naming where it was given
 * ("FILE", "DST", "-f"): 0, or the usage error for "" and for "-" (a
 * caller that takes "-" for a standard stream does so first; no tool
 * makes a file named "-": ./- names one). */
int tool_new_path(const char *what, const char *path);

/* The one FILE operand left after the options (argv[optind]) into *file;
 * 0, or the usage error when there is none or more than one. */
int tool_one_file(int argc, char **argv, const char **file);

/* 0 if name (from -s MAP) may name a map, else the usage error. */
int tool_check_map_name(const char *name);

/* -V, --version: prints "NAME (bonsai X.Y.Z)" on stdout. */
void tool_version(void);

/* Opens the store at path with opts.  A path that exists must be a
 * regular file: a directory, a FIFO (whose open would wait for a writer)
 * or a device is refused before the library sees it.  Failures are
 * reported with the bonsai_strerror text and what the OS says about the
 * path.  Returns 0 or TOOL_EXIT_FAIL (*db is then NULL). */
int tool_open(const char *path, const bonsai_options *opts, bonsai_db **db);

/* tool_open waits for another writer as opts->busy_timeout_ms says; when
 * it has to, it says so on stderr first ("waiting for ..."). */

/* The tools that write wait for another writer this long by default. */
#define TOOL_BUSY_TIMEOUT_DEFAULT BONSAI_WAIT_FOREVER
/* "--busy-timeout MS": a number of milliseconds (0 = fail at once) or
 * "forever"; 0, or the usage error naming the option. */
int tool_parse_busy_timeout(const char *s, uint32_t *ms);
/* What it takes, as a rule for tool_bad_value. */
#define TOOL_BUSY_TIMEOUT_RULE                                                \
    "must be milliseconds from 0 to 4294967294, or \"forever\""
/* The --help line for it, the same in every tool. */
#define TOOL_BUSY_TIMEOUT_HELP                                                \
    "    --busy-timeout MS\n"                                                 \
    "               wait at most MS milliseconds (0: not at all) for\n"      \
    "               another process that has the store open to write;\n"     \
    "               default: as long as it takes (\"forever\")\n"

/* Where path is a store, opens it to write, so that *held has its
 * writer's lock while the tool replaces the file: waits up to timeout_ms
 * for another process that has it open to write (saying so on stderr).
 * *held is NULL where path is missing, empty or not a store.  Returns 0,
 * or TOOL_EXIT_FAIL when the wait ran out. */
int tool_hold_writer(const char *path, uint32_t timeout_ms,
                     bonsai_db **held);

/* tool_open read-only, never creating: for the tools that only read. */
int tool_open_read_only(const char *path, bonsai_db **db);

/* Does the file at path start as a bonsai store does (the magic of
 * format.md)?  1 yes, 0 no (also when it is shorter), -1 when it cannot
 * be read (errno says why).  It only reads: opening a file as a store
 * makes a lock file beside it. */
int tool_is_store(const char *path);

/* Does path name the same file as other (both existing)? */
int tool_same_file(const char *path, const char *other);

/* Flushes stdout and reports a write error; returns 0 or TOOL_EXIT_FAIL. */
int tool_flush_stdout(void);

/* s as a decimal number in [lo, hi] into *out; -1 if it is not one. */
int tool_number(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* What --compress takes, as a rule for tool_bad_value. */
#define TOOL_COMPRESS_RULE "must be none, lz4, zlib or zlib:LEVEL (1 to 9)"

/* "none", "lz4", "zlib" or "zlib:LEVEL" (1..9) into *codec
 * (BONSAI_COMPRESS_*) and *level (0: the default); -1 if s is none of
 * them. */
int tool_parse_compress(const char *s, unsigned *codec, int *level);

/* The name tool_parse_compress reads for a BONSAI_COMPRESS_* codec. */
const char *tool_codec_name(unsigned codec);

/* ---- the maps of a store ------------------------------------------------ */

typedef struct tool_map {
    char *name;
    unsigned kind; /* BONSAI_KEY_* */
    uint64_t entries;
} tool_map;

typedef struct tool_maps {
    tool_map *v;
    size_t n, cap;
} tool_maps;

/* Fills *maps (empty) in txn: the map named only, or every map in name
 * order when only is NULL, each with its entries.  Returns 0 or a bonsai error (what is listed
 * so far stays in *maps). */
int tool_maps_list(bonsai_db *db, bonsai_txn *txn, const char *only,
                   tool_maps *maps);
void tool_maps_free(tool_maps *maps);

#endif /* BONSAI_TOOL_H */

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

/* "NAME: message\n" on stderr; returns TOOL_EXIT_FAIL. */
int tool_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Like tool_fail, without the exit status: for warnings. */
void tool_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The message (fmt may be NULL), the synopsis and a pointer to --help on
 * stderr; returns TOOL_EXIT_USAGE. */
int tool_usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* The usage error for what getopt_long returned as c (':' a missing
 * argument, anything else an unknown option), from optopt / optind. */
int tool_bad_option(int c, char **argv);

/* The one FILE operand left after the options (argv[optind]) into *file;
 * 0, or the usage error when there is none or more than one. */
int tool_one_file(int argc, char **argv, const char **file);

/* 0 if name (from -s MAP) may name a map, else the usage error. */
int tool_check_map_name(const char *name);

/* Prints "NAME (bonsai X.Y.Z)" on stdout. */
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

/* Does path name the same file as other (both existing)? */
int tool_same_file(const char *path, const char *other);

/* Flushes stdout and reports a write error; returns 0 or TOOL_EXIT_FAIL. */
int tool_flush_stdout(void);

/* s as a decimal number in [lo, hi] into *out; -1 if it is not one. */
int tool_number(const char *s, int64_t lo, int64_t hi, int64_t *out);

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
} tool_map;

typedef struct tool_maps {
    tool_map *v;
    size_t n, cap;
} tool_maps;

/* Fills *maps (empty) in txn: the map named only, or every map in name
 * order when only is NULL.  Returns 0 or a bonsai error (what is listed
 * so far stays in *maps). */
int tool_maps_list(bonsai_db *db, bonsai_txn *txn, const char *only,
                   tool_maps *maps);
void tool_maps_free(tool_maps *maps);

#endif /* BONSAI_TOOL_H */

/* SPDX-License-Identifier: MIT */
/*
 * test_cli.c - the conventions every command-line tool keeps, run as
 * programs from $BONSAI_BUILD_DIR (toolrun.h):
 *
 *  - -V and --version print one version line, the same form everywhere;
 *    -h and --help print the manual;
 *  - a bad option value is a usage error (exit 2) that names the program
 *    by its base name, the option and what it takes; a map that is not
 *    there is named;
 *  - bonsai-verify's -q is --quiet, its quick check --quick;
 *  - -f - is standard output for bonsai-dump and standard input for
 *    bonsai-load, and no tool makes a file named "-";
 *  - the progress line: on a terminal (a pseudo-terminal here), erased
 *    at the end, never on a file, never with -q;
 *  - bonsai-fill's counter lines only with --counter; --file replaces
 *    an existing store only with --force, any other file never;
 *  - bonsai-compact's DST keeps its permission bits, or takes SRC's.
 *
 * Stores are made by bonsai-fill (--count: a few thousand entries in the
 * map "test").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bonsai.h"
#include "toolrun.h"
#include "util.h"

/* .timeout: a hang guard, not a timing assertion */
TestSuite(cli, .init = tu_setup, .fini = tu_teardown, .timeout = 120);

static const char *const all_tools[] = {
    "bonsai-fill", "bonsai-dump", "bonsai-load",
    "bonsai-verify", "bonsai-compact", "bonsai-stat",
};
#define N_TOOLS (sizeof all_tools / sizeof all_tools[0])

/* The tools that do work worth a progress line, a store to give them,
 * and the words their line starts with. */
typedef struct worker {
    const char *tool;
    const char *line;
} worker;

static const worker workers[] = {
    {"bonsai-fill", "bonsai-fill: filling "},
    {"bonsai-dump", "bonsai-dump: dumping "},
    {"bonsai-load", "bonsai-load: loading "},
    {"bonsai-verify", "bonsai-verify: verifying "},
    {"bonsai-compact", "bonsai-compact: copying "},
};
#define N_WORKERS (sizeof workers / sizeof workers[0])

/* ---- helpers ------------------------------------------------------------ */

static void expect(const tr_result *r, int want)
{
    cr_assert(r->status == want, "%s: exit %d, expected %d\nstdout: %.2000s"
              "\nstderr: %.2000s", r->cmd, r->status, want, r->out, r->err);
}

static void expect_in(const char *text, const char *needle, const char *cmd)
{
    cr_assert(strstr(text, needle), "%s: no '%s' in:\n%.3000s", cmd, needle,
              text);
}

static void expect_empty(const char *text, const char *what, const char *cmd)
{
    cr_assert(text[0] == 0, "%s: %s not empty:\n%.3000s", cmd, what, text);
}

/* A store of n entries (the map "test"), made by bonsai-fill. */
static const char *make_store(const char *name, const char *n)
{
    const char *path = tr_path(name);
    tr_result r = TR_RUN("bonsai-fill", "--file", path, "--count", n,
                         "--quiet");
    expect(&r, 0);
    tr_result_free(&r);
    return path;
}

static uint64_t entries(const char *path)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    o.create = 0;
    bonsai_db *db;
    TU_OK(bonsai_open(path, &o, &db));
    bonsai_map m;
    uint64_t n = 0;
    TU_OK(bonsai_map_open(db, NULL, "test", &m, NULL));
    TU_OK(bonsai_count(NULL, m, &n));
    TU_OK(bonsai_close(db));
    return n;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    cr_assert(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
    return st.st_mode & 07777;
}

/* Runs the tools from the test's directory, so that a file a tool makes
 * by a relative name ("-") is made there, where the test looks. */
static void enter_test_dir(void)
{
    const char *dir = getenv("BONSAI_BUILD_DIR");
    char *abs = realpath(dir && *dir ? dir : "build", NULL);
    cr_assert(abs, "the build directory: %s", strerror(errno));
    cr_assert(setenv("BONSAI_BUILD_DIR", abs, 1) == 0);
    free(abs);
    cr_assert(chdir(tu_tmpdir()) == 0, "%s: %s", tu_tmpdir(),
              strerror(errno));
}

/* The arguments that make tool do its work on a store of a few thousand
 * entries: st a store, dump its dump (for load), out a path to write. */
static void work_args(const char *tool, const char *st, const char *dump,
                      const char *out, const char *argv[9])
{
    int n = 0;
    argv[n++] = tool;
    if (!strcmp(tool, "bonsai-fill")) {
        argv[n++] = "--count";
        argv[n++] = "5000";
    } else if (!strcmp(tool, "bonsai-dump")) {
        argv[n++] = "-f";
        argv[n++] = out;
        argv[n++] = st;
    } else if (!strcmp(tool, "bonsai-load")) {
        argv[n++] = "-f";
        argv[n++] = dump;
        argv[n++] = out;
    } else if (!strcmp(tool, "bonsai-compact")) {
        argv[n++] = st;
        argv[n++] = out;
    } else {
        argv[n++] = st;
    }
    argv[n] = NULL;
}

/* ---- -V, --version, -h, --help ------------------------------------------ */

Test(cli, version_and_help_everywhere)
{
    char version[64];
    snprintf(version, sizeof version, " (bonsai %d.%d.%d)\n",
             BONSAI_VERSION_MAJOR, BONSAI_VERSION_MINOR,
             BONSAI_VERSION_PATCH);
    for (size_t t = 0; t < N_TOOLS; t++) {
        char want[96];
        snprintf(want, sizeof want, "%s%s", all_tools[t], version);
        static const char *const vflags[] = {"-V", "--version"};
        for (int i = 0; i < 2; i++) {
            tr_result r = TR_RUN(all_tools[t], vflags[i]);
            expect(&r, 0);
            cr_assert_str_eq(r.out, want, "%s", r.cmd);
            expect_empty(r.err, "stderr", r.cmd);
            tr_result_free(&r);
        }
        tr_result h = TR_RUN(all_tools[t], "-h");
        tr_result help = TR_RUN(all_tools[t], "--help");
        expect(&h, 0);
        expect(&help, 0);
        cr_assert_str_eq(h.out, help.out, "%s: -h and --help differ",
                         all_tools[t]);
        cr_assert(strncmp(help.out, "NAME\n", 5) == 0, "%s", help.cmd);
        expect_in(help.out, "-V, --version", help.cmd);
        expect_in(help.out, "-h, --help", help.cmd);
        expect_in(help.out, "EXIT STATUS\n", help.cmd);
        expect_empty(help.err, "stderr", help.cmd);
        tr_result_free(&h);
        tr_result_free(&help);
    }
}

/* ---- usage errors ------------------------------------------------------- */

/* A bad value for an option of each tool: exit 2, and the message starts
 * with the program's base name, even when argv[0] is a path. */
Test(cli, bad_values_name_the_option)
{
    const char *st = make_store("s.bonsai", "1000");
    const char *dst = tr_path("d.bonsai");
    static const char *const bad[][8] = {
        {"./bonsai-fill", "--cap", "0", NULL},
        {"./bonsai-fill", "--keys", "sorted", NULL},
        {"./bonsai-fill", "--page-size", "100", NULL},
        {"./bonsai-fill", "--seconds", "soon", NULL},
        {"./bonsai-fill", "--bogus", NULL},
        {"./bonsai-compact", "--page-size", "100", "S", "D", NULL},
        {"./bonsai-compact", "--node-bytes", "100", "S", "D", NULL},
        {"./bonsai-compact", "--compress", "zstd", "S", "D", NULL},
        {"./bonsai-load", "--busy-timeout", "soon", "D", NULL},
        {"./bonsai-dump", "-s", "", "S", NULL},
        {"./bonsai-dump", "-f", "", "S", NULL},
        {"./bonsai-stat", "-s", "", "S", NULL},
        {"./bonsai-verify", "--bogus", "S", NULL},
    };
    static const char *const says[] = {
        "bonsai-fill: --cap: must be from 64K to 8 EiB",
        "bonsai-fill: --keys: must be seq or random, not 'sorted'",
        "bonsai-fill: --page-size: must be a power of two from 64 to 65536",
        "bonsai-fill: --seconds: must be a whole number, not 'soon'",
        "bonsai-fill: unknown option --bogus",
        "bonsai-compact: --page-size: must be a power of two from 64 to "
        "65536, not '100'",
        "bonsai-compact: --node-bytes: must be from 256 to 1048576",
        "bonsai-compact: --compress: must be none, lz4, zlib",
        "bonsai-load: --busy-timeout: must be milliseconds",
        "bonsai-dump: -s: must be a map name of 1 to 255 bytes",
        "bonsai-dump: -f: must be a file name, not ''",
        "bonsai-stat: -s: must be a map name of 1 to 255 bytes",
        "bonsai-verify: unknown option --bogus",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[8];
        for (int j = 0; j < 8; j++)
            argv[j] = !bad[i][j]            ? NULL
                      : !strcmp(bad[i][j], "S") ? st
                      : !strcmp(bad[i][j], "D") ? dst
                                                : bad[i][j];
        tr_result r = tr_run_v(-1, NULL, argv);
        expect(&r, 2);
        cr_assert(strncmp(r.err, says[i], strlen(says[i])) == 0,
                  "%s: expected '%s...', got:\n%s", r.cmd, says[i], r.err);
        expect_in(r.err, "Try '", r.cmd);
        tr_result_free(&r);
    }
    cr_assert(!tr_exists(dst), "a refused run made %s", dst);
}

Test(cli, a_missing_map_is_named)
{
    const char *st = make_store("s.bonsai", "1000");
    static const char *const tools[] = {"bonsai-stat", "bonsai-dump"};
    for (int i = 0; i < 2; i++) {
        tr_result r = TR_RUN(tools[i], "-s", "nope", st);
        expect(&r, 1);
        expect_in(r.err, st, r.cmd);
        expect_in(r.err, "map nope", r.cmd);
        expect_in(r.err, bonsai_strerror(BONSAI_NOTFOUND), r.cmd);
        tr_result_free(&r);
    }
}

/* ---- bonsai-verify: -q is --quiet --------------------------------------- */

Test(cli, verify_q_is_quiet_and_quick_is_long)
{
    const char *st = make_store("s.bonsai", "3000");
    tr_result full = TR_RUN("bonsai-verify", st);
    expect(&full, 0);
    expect_in(full.out, "(full check of txn", full.cmd);
    /* -q: the full check, and no progress even on a terminal */
    tr_result r = tr_run_tty(TR_ARGS("bonsai-verify", "-q", st));
    expect(&r, 0);
    cr_assert_str_eq(r.out, full.out, "%s", r.cmd);
    expect_empty(r.err, "the terminal", r.cmd);
    tr_result_free(&r);
    r = TR_RUN("bonsai-verify", "--quiet", st);
    expect(&r, 0);
    cr_assert_str_eq(r.out, full.out, "%s", r.cmd);
    tr_result_free(&r);
    r = TR_RUN("bonsai-verify", "--quick", st);
    expect(&r, 0);
    expect_in(r.out, "(quick check of txn", r.cmd);
    tr_result_free(&r);
    /* --progress still asks for it */
    r = TR_RUN("bonsai-verify", "-q", "--progress", st);
    expect(&r, 0);
    expect_in(r.err, "bonsai-verify: verifying ", r.cmd);
    tr_result_free(&r);
    tr_result_free(&full);
}

/* ---- "-" ---------------------------------------------------------------- */

Test(cli, dash_is_standard_output_or_input_never_a_file)
{
    enter_test_dir();
    const char *st = make_store("s.bonsai", "3000");
    tr_result plain = TR_RUN("bonsai-dump", st);
    expect(&plain, 0);
    tr_result r = TR_RUN("bonsai-dump", "-f", "-", st);
    expect(&r, 0);
    cr_assert_str_eq(r.out, plain.out, "dump -f - is not standard output");
    tr_result_free(&r);
    const char *dump = tr_path("s.dump");
    tr_write_bytes(dump, plain.out, strlen(plain.out));
    const char *copy = tr_path("copy.bonsai");
    r = tr_run_v(-1, dump, TR_ARGS("bonsai-load", "-f", "-", copy));
    expect(&r, 0);
    tr_result_free(&r);
    cr_assert_eq(entries(copy), 3000);
    /* "-" where a file would be made: refused */
    static const char *const refused[][6] = {
        {"bonsai-load", "-f", "DUMP", "-", NULL},
        {"bonsai-compact", "S", "-", NULL},
        {"bonsai-fill", "--file", "-", "--count", "10", NULL},
        {"bonsai-fill", "--csv", "-", "--count", "10", NULL},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *argv[6];
        for (int j = 0; j < 6; j++)
            argv[j] = !refused[i][j]                ? NULL
                      : !strcmp(refused[i][j], "S")    ? st
                      : !strcmp(refused[i][j], "DUMP") ? dump
                                                       : refused[i][j];
        r = tr_run_v(-1, NULL, argv);
        expect(&r, 2);
        expect_in(r.err, "'-' is not a file name here", r.cmd);
        tr_result_free(&r);
    }
    cr_assert(!tr_exists("-"), "a tool made a file named '-'");
    tr_result_free(&plain);
}

/* ---- the progress line and --quiet -------------------------------------- */

/* The store, its dump and a path to write, for each worker's runs. */
typedef struct work {
    const char *st, *dump, *out;
} work;

static work make_work(void)
{
    work w = {.st = make_store("s.bonsai", "5000"),
              .dump = tr_path("s.dump"), .out = tr_path("out")};
    tr_result r = TR_RUN("bonsai-dump", "-f", w.dump, w.st);
    expect(&r, 0);
    tr_result_free(&r);
    return w;
}

static tr_result run_worker(const worker *wk, const work *w, int tty,
                            const char *flag)
{
    const char *argv[9] = {0};
    work_args(wk->tool, w->st, w->dump, w->out, argv);
    if (flag) { /* right after the program's name */
        memmove(argv + 2, argv + 1, 7 * sizeof *argv);
        argv[1] = flag;
    }
    unlink(w->out);
    return tty ? tr_run_tty(argv) : tr_run_v(-1, NULL, argv);
}

Test(cli, progress_only_on_a_terminal)
{
    work w = make_work();
    for (size_t i = 0; i < N_WORKERS; i++) {
        tr_result r = run_worker(&workers[i], &w, 1, NULL);
        expect(&r, 0);
        expect_in(r.err, workers[i].line, r.cmd);
        /* the line is erased at the end: nothing left after it */
        const char *end = "\r\033[K";
        size_t n = strlen(r.err);
        cr_assert(n >= strlen(end) &&
                      !strcmp(r.err + n - strlen(end), end),
                  "%s: the progress line stays:\n%s", r.cmd, r.err);
        tr_result_free(&r);
        r = run_worker(&workers[i], &w, 0, NULL);
        expect(&r, 0);
        expect_empty(r.err, "stderr (a file)", r.cmd);
        tr_result_free(&r);
    }
}

Test(cli, quiet_silences)
{
    work w = make_work();
    for (size_t i = 0; i < N_WORKERS; i++) {
        /* each spelling on every other tool: a run under ASan is slow */
        tr_result r = run_worker(&workers[i], &w, 1,
                                 i % 2 ? "-q" : "--quiet");
        expect(&r, 0);
        expect_empty(r.err, "the terminal", r.cmd);
        if (!strcmp(workers[i].tool, "bonsai-compact"))
            expect_empty(r.out, "stdout", r.cmd);
        tr_result_free(&r);
    }
}

/* ---- bonsai-fill -------------------------------------------------------- */

Test(cli, fill_counter_only_when_asked)
{
    tr_result r = TR_RUN("bonsai-fill", "--count", "1000000", "--counter");
    expect(&r, 0);
    cr_assert(!strncmp(r.out, "1000000\nstore:", 14),
              "%s: no counter line first:\n%.500s", r.cmd, r.out);
    tr_result_free(&r);
    r = TR_RUN("bonsai-fill", "--count", "1000000");
    expect(&r, 0);
    cr_assert(!strncmp(r.out, "store:", 6),
              "%s: more than the report:\n%.500s", r.cmd, r.out);
    tr_result_free(&r);
}

/* A report that cannot be written fails the run: exit 1 and a message,
 * whether the report is the text, the JSON or the counter's lines. */
Test(cli, fill_fails_when_its_report_cannot_be_written)
{
    if (access("/dev/full", W_OK) != 0)
        cr_skip_test("no /dev/full to write to");
    const char *err = tr_path("fill.err");
    const char *opts[] = {"", "--json", "--counter"};
    for (int i = 0; i < 3; i++) {
        int st = tu_sh("%s --count 1000000 %s >/dev/full 2>%s",
                       tu_quote(tu_program("bonsai-fill")), opts[i],
                       tu_quote(err));
        cr_assert_eq(st, 1, "bonsai-fill %s >/dev/full: exit %d", opts[i],
                     st);
        char *text = tr_slurp(err, NULL);
        cr_assert(strstr(text, "bonsai-fill: write standard output"),
                  "bonsai-fill %s >/dev/full said: %s", opts[i], text);
        free(text);
    }
}

Test(cli, fill_replaces_only_a_store_and_only_with_force)
{
    const char *text = tr_path("notes.txt");
    tr_write_bytes(text, "not a store\n", 12);
    const char *st = make_store("s.bonsai", "3000");
    const char *fifo = tr_path("fifo");
    cr_assert(mkfifo(fifo, 0644) == 0, "mkfifo: %s", strerror(errno));
    /* --force does not make another file a store's place */
    const char *refused[][2] = {
        {text, NULL}, {st, NULL}, {fifo, NULL}, {text, "--force"},
    };
    for (int i = 0; i < 4; i++) {
        tr_snap s = tr_snap_take(refused[i][0]);
        tr_result r = tr_run_v(-1, NULL, TR_ARGS("bonsai-fill", "--file",
                                                 refused[i][0], "--count",
                                                 "10", refused[i][1]));
        expect(&r, 1);
        expect_in(r.err, "bonsai-fill: ", r.cmd);
        expect_in(r.err, "not replaced", r.cmd);
        tr_result_free(&r);
        tr_snap_same(&s, "a refused --file");
    }
    cr_assert(!tr_exists(tr_path("notes.txt-lock")),
              "the refusal opened the text file as a store");
    tr_result r = TR_RUN("bonsai-fill", "--file", st, "--count", "10",
                         "--force", "--quiet");
    expect(&r, 0);
    tr_result_free(&r);
    cr_assert_eq(entries(st), 10);
    /* an empty file holds nothing to lose: it is taken as a new store */
    const char *empty = tr_path("empty");
    tr_write_bytes(empty, "", 0);
    r = TR_RUN("bonsai-fill", "--file", empty, "--count", "10", "--quiet");
    expect(&r, 0);
    tr_result_free(&r);
    cr_assert_eq(entries(empty), 10);
}

/* ---- bonsai-compact: DST's permission bits ------------------------------ */

Test(cli, compact_keeps_dst_mode_else_takes_src_mode)
{
    const char *st = make_store("s.bonsai", "3000");
    const char *dst = tr_path("d.bonsai");
    /* bits a umask of 022 would take from a new file */
    cr_assert(chmod(st, 0664) == 0);
    mode_t old = umask(022);
    tr_result r = TR_RUN("bonsai-compact", "-q", st, dst);
    expect(&r, 0);
    expect_empty(r.out, "stdout (-q)", r.cmd);
    tr_result_free(&r);
    cr_assert_eq(mode_of(dst), 0664, "a new DST: %o, not SRC's 0664",
                 (unsigned)mode_of(dst));
    cr_assert(chmod(dst, 0604) == 0);
    r = TR_RUN("bonsai-compact", "-q", st, dst);
    expect(&r, 0);
    tr_result_free(&r);
    umask(old);
    cr_assert_eq(mode_of(dst), 0604, "DST was 0604, now %o",
                 (unsigned)mode_of(dst));
    cr_assert_eq(entries(dst), 3000);
    r = TR_RUN("bonsai-compact", "--help");
    expect_in(r.out, "permission bits", r.cmd);
    tr_result_free(&r);
}

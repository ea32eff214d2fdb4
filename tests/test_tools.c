/* SPDX-License-Identifier: MIT */
/*
 * test_tools.c - every command-line tool (bonsai-verify, -stat, -dump,
 * -load, -compact) on the inputs a user gets wrong, run as programs from
 * $BONSAI_BUILD_DIR (default build/), as test_dumpload.c finds them:
 *
 *  - --help is a manual on stdout (exit 0); bad flags exit 2 with the
 *    synopsis on stderr;
 *  - an empty file, garbage, a FIFO, /dev/zero, a missing path and a
 *    directory, wherever a tool reads a store or its input: exit 1 and a
 *    message, promptly (a FIFO is refused, never waited on);
 *  - unwritable outputs (compact DST in a read-only directory or under
 *    /proc, a load into a read-only file, dump -f there): exit 1, nothing
 *    created;
 *  - a corrupted store, bytes flipped all over its used pages: verify
 *    exits 1 and names the page, dump and stat report and do not crash;
 *  - verify's progress only on a terminal or when asked;
 *  - bonsai-dump's output against mdb_dump's and db_dump's, byte for byte
 *    but for the sizing lines each tool writes of its own;
 *  - a lock file bonsai did not make (a link, a FIFO, zeros): refused by
 *    every tool, and never written;
 *  - a store of more maps than one handle opens at once: every tool reads
 *    it whole, a load of its dump makes it again;
 *  - caps out of range: an invalid option, named;
 *  - a failed load (a new store, through a dangling link, an empty file,
 *    CRLF input, a disk too full to grow the file): the directory exactly
 *    as it was.
 *
 * Every run asserts that no tool died of a signal (an alarm kills a hung
 * one) and that every file given to a tool as a source is unchanged, byte
 * for byte.  Read-only files and directories do not stop root: as root,
 * those runs drop to the user nobody.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bonsai.h"
#include "toolrun.h"
#include "util.h"

/* .timeout: a hang guard, not a timing assertion */
TestSuite(tools, .init = tu_setup, .fini = tu_teardown, .timeout = 300);

#define NOBODY 65534

/* The user a run must be to meet read-only files: nobody as root, else
 * the tester. */
static int unprivileged(void)
{
    return geteuid() == 0 ? NOBODY : -1;
}

/* Asserts exit status want and, for a failure, a message on stderr. */
static void expect(const tr_result *r, int want)
{
    cr_assert(r->status == want, "%s: exit %d, expected %d\nstdout: %.2000s"
              "\nstderr: %.2000s", r->cmd, r->status, want, r->out, r->err);
    if (want != 0)
        cr_assert(strlen(r->err) > 0, "%s: exit %d without a message",
                  r->cmd, r->status);
}

/* text with every run of white space made one space (a manual wraps). */
static char *squeeze(const char *text)
{
    char *s = malloc(strlen(text) + 1), *o = s;
    cr_assert(s);
    for (const char *p = text; *p; p++)
        if (!(*p == ' ' || *p == '\n') || (o > s && o[-1] != ' '))
            *o++ = *p == '\n' ? ' ' : *p;
    *o = 0;
    return s;
}

static void expect_in(const char *text, const char *needle, const char *cmd)
{
    cr_assert(strstr(text, needle), "%s: no '%s' in:\n%.3000s", cmd, needle,
              text);
}

/* ---- stores ------------------------------------------------------------- */

static void put_entries(bonsai_txn *txn, bonsai_map bytes, bonsai_map u64,
                        int n)
{
    for (int i = 0; i < n; i++) {
        char k[32], v[48];
        int kl = snprintf(k, sizeof k, "key-%06d", i * 7);
        int vl = snprintf(v, sizeof v, "value %d", i);
        bonsai_val key = tu_val(k, (size_t)kl), val = tu_val(v, (size_t)vl);
        TU_OK(bonsai_put(txn, bytes, &key, &val, 0));
        TU_OK(bonsai_put_u64(txn, u64, (uint64_t)i * 1000, &val, 0));
    }
}

/* A store with a byte-string map "bytes" and a u64 map "u64", n entries
 * each, written in one commit (so nothing below its high-water mark is
 * free). */
static const char *make_store(const char *name, int n)
{
    const char *path = tr_path(name);
    bonsai_options o;
    bonsai_options_init(&o);
    o.transactions = 1;
    o.max_size = 64u << 20;
    bonsai_db *db = tu_open(path, &o);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    bonsai_map b = tu_map_create(db, txn, "bytes", BONSAI_KEY_BYTES);
    bonsai_map u = tu_map_create(db, txn, "u64", BONSAI_KEY_U64);
    put_entries(txn, b, u, n);
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
    cr_assert(chmod(path, 0644) == 0);
    return path;
}

static uint64_t map_count(const char *path, const char *map)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    o.create = 0;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m;
    uint64_t n = 0;
    TU_OK(bonsai_map_open(db, NULL, map, &m, NULL));
    TU_OK(bonsai_count(NULL, m, &n));
    TU_OK(bonsai_close(db));
    return n;
}

/* ---- the bad inputs ----------------------------------------------------- */

enum { BAD_EMPTY, BAD_GARBAGE, BAD_FIFO, BAD_ZERO, BAD_MISSING, BAD_DIR,
       N_BAD };
static const char *const bad_name[N_BAD] = {
    "an empty file", "garbage", "a FIFO", "/dev/zero", "a missing path",
    "a directory",
};

/* Makes each bad input in the test's directory. */
static void make_bad(const char *path[N_BAD])
{
    path[BAD_EMPTY] = tr_path("empty");
    tr_write_bytes(path[BAD_EMPTY], "", 0);
    path[BAD_GARBAGE] = tr_path("garbage");
    tu_rng rng = {tu_seed("garbage", 11)};
    static uint8_t junk[1 << 16];
    tu_fill(&rng, junk, sizeof junk);
    tr_write_bytes(path[BAD_GARBAGE], junk, sizeof junk);
    path[BAD_FIFO] = tr_path("fifo");
    cr_assert(mkfifo(path[BAD_FIFO], 0644) == 0, "mkfifo: %s",
              strerror(errno));
    path[BAD_ZERO] = "/dev/zero";
    path[BAD_MISSING] = tr_path("missing");
    path[BAD_DIR] = tr_path("dir");
    cr_assert(mkdir(path[BAD_DIR], 0755) == 0);
}

/* ---- --help and bad flags ----------------------------------------------- */

static const char *const all_tools[] = {
    "bonsai-verify", "bonsai-stat", "bonsai-dump", "bonsai-load",
    "bonsai-compact",
};
#define N_TOOLS (sizeof all_tools / sizeof all_tools[0])

Test(tools, help_is_a_manual)
{
    static const char *const sections[] = {
        "NAME\n", "SYNOPSIS\n", "DESCRIPTION\n", "OPTIONS\n",
        "EXIT STATUS\n", "EXAMPLES\n",
    };
    for (size_t t = 0; t < N_TOOLS; t++) {
        tr_result r = TR_RUN(all_tools[t], "--help");
        expect(&r, 0);
        cr_assert(r.err[0] == 0, "%s: stderr: %s", r.cmd, r.err);
        for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
            expect_in(r.out, sections[i], r.cmd);
        expect_in(r.out, all_tools[t], r.cmd);
        char *flat = squeeze(strstr(r.out, "EXIT STATUS\n"));
        expect_in(flat, "0 ", r.cmd);
        expect_in(flat, " 1 ", r.cmd);
        expect_in(flat, "2 bad usage", r.cmd);
        free(flat);
        tr_result_free(&r);
        r = TR_RUN(all_tools[t], "-V");
        expect(&r, 0);
        expect_in(r.out, "bonsai 0.", r.cmd);
        tr_result_free(&r);
    }
}

Test(tools, bad_flags_exit_2)
{
    const char *st = make_store("s.bonsai", 50);
    const char *dst = tr_path("dst.bonsai");
    tr_snap s = tr_snap_take(st);
    /* each row: a tool and its arguments, up to 4 */
    static const struct {
        const char *tool, *a[4];
    } bad[] = {
        {"bonsai-verify", {NULL}},
        {"bonsai-verify", {"--bogus", "S"}},
        {"bonsai-verify", {"-x", "S"}},
        {"bonsai-verify", {"S", "S"}},
        {"bonsai-stat", {NULL}},
        {"bonsai-stat", {"--bogus", "S"}},
        {"bonsai-stat", {"-s"}},
        {"bonsai-stat", {"-s", "", "S"}},
        {"bonsai-stat", {"S", "S"}},
        {"bonsai-dump", {NULL}},
        {"bonsai-dump", {"-x", "S"}},
        {"bonsai-dump", {"-f"}},
        {"bonsai-dump", {"-a", "-s", "bytes", "S"}},
        {"bonsai-dump", {"-l", "-p", "S"}},
        {"bonsai-dump", {"-f", "S", "S"}},
        {"bonsai-load", {NULL}},
        {"bonsai-load", {"-x", "S"}},
        {"bonsai-load", {"-T", "S"}},
        {"bonsai-load", {"-s"}},
        {"bonsai-load", {"-f", "S", "S"}},
        {"bonsai-compact", {NULL}},
        {"bonsai-compact", {"S"}},
        {"bonsai-compact", {"S", "S"}},
        {"bonsai-compact", {"S", "D", "D"}},
        {"bonsai-compact", {"--node-bytes", "7", "S", "D"}},
        {"bonsai-compact", {"--node-entries", "1", "S", "D"}},
        {"bonsai-compact", {"--node-entries", "x", "S", "D"}},
        {"bonsai-compact", {"--page-size", "1000", "S", "D"}},
        {"bonsai-compact", {"--compress", "brotli", "S", "D"}},
        {"bonsai-compact", {"--compress", "zlib:10", "S", "D"}},
        {"bonsai-compact", {"--compress"}},
        {"bonsai-compact", {"--bogus", "S", "D"}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[6] = {bad[i].tool};
        for (int j = 0; j < 4 && bad[i].a[j]; j++) {
            const char *a = bad[i].a[j];
            argv[j + 1] = !strcmp(a, "S") ? st : !strcmp(a, "D") ? dst : a;
        }
        tr_result r = tr_run_v(-1, NULL, argv);
        expect(&r, 2);
        expect_in(r.err, "usage: ", r.cmd);
        expect_in(r.err, "--help", r.cmd);
        cr_assert(r.out[0] == 0, "%s: stdout: %s", r.cmd, r.out);
        tr_result_free(&r);
    }
    tr_snap_same(&s, "bad flags");
    cr_assert(!tr_exists(dst), "a usage error created %s", dst);
}

/* ---- bad store files ---------------------------------------------------- */

Test(tools, readers_refuse_bad_files)
{
    const char *bad[N_BAD];
    make_bad(bad);
    const char *dst = tr_path("copy.bonsai");
    for (int b = 0; b < N_BAD; b++) {
        tr_snap s = tr_snap_take(bad[b]);
        const char *const *runs[] = {
            TR_ARGS("bonsai-verify", bad[b]),
            TR_ARGS("bonsai-verify", "--quick", bad[b]),
            TR_ARGS("bonsai-stat", bad[b]),
            TR_ARGS("bonsai-stat", "--json", bad[b]),
            TR_ARGS("bonsai-dump", bad[b]),
            TR_ARGS("bonsai-dump", "-l", bad[b]),
            TR_ARGS("bonsai-compact", bad[b], dst),
        };
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            tr_result r = tr_run_v(-1, NULL, runs[i]);
            expect(&r, 1);
            expect_in(r.err, bad[b], r.cmd);
            tr_result_free(&r);
            tr_snap_same(&s, bad_name[b]);
            s = tr_snap_take(bad[b]);
        }
        free(s.bytes);
        cr_assert(!tr_exists(dst), "compact of %s created %s", bad_name[b],
                  dst);
    }
}

Test(tools, load_refuses_bad_store_files)
{
    const char *bad[N_BAD];
    make_bad(bad);
    const char *src = make_store("s.bonsai", 100), *dump = tr_path("dump");
    tr_result r = TR_RUN("bonsai-dump", "-f", dump, src);
    expect(&r, 0);
    tr_result_free(&r);
    static const int refused[] = {BAD_GARBAGE, BAD_FIFO, BAD_ZERO, BAD_DIR};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *path = bad[refused[i]];
        tr_snap s = tr_snap_take(path);
        r = TR_RUN("bonsai-load", "-f", dump, path);
        expect(&r, 1);
        expect_in(r.err, path, r.cmd);
        tr_result_free(&r);
        tr_snap_same(&s, bad_name[refused[i]]);
    }
    /* a missing store is created and an empty file made a store, as by
     * the library (and by mdb_load) */
    const char *made[] = {bad[BAD_MISSING], bad[BAD_EMPTY]};
    for (int i = 0; i < 2; i++) {
        r = TR_RUN("bonsai-load", "-f", dump, made[i]);
        expect(&r, 0);
        tr_result_free(&r);
        cr_assert_eq(map_count(made[i], "bytes"), 100);
    }
}

/* ---- sizes out of range ------------------------------------------------- */

/* A cap of 2^64 - 1 (whose size rounds up past it, to 0) or beyond
 * BONSAI_MAX_SIZE: an invalid option named as such, not an I/O error. */
Test(tools, caps_out_of_range_are_named_invalid)
{
    const char *st = tr_path("cap.bonsai");
    static const char *const caps[] = {
        "18446744073709551615", "18446744073709551614",
        "9223372036854775809", "8589934593G", "65535", "1K",
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        tr_result r = TR_RUN("bonsai-fill", "--cap", caps[i], "--count", "10",
                       "--quiet");
        expect(&r, 2);
        expect_in(r.err, "--cap: must be from 64K to 8 EiB", r.cmd);
        expect_in(r.err, caps[i], r.cmd);
        tr_result_free(&r);
        r = TR_RUN("bonsai-fill", "--file", st, "--cap", caps[i], "--count",
                "10", "--quiet");
        expect(&r, 2);
        tr_result_free(&r);
        cr_assert(!tr_exists(st), "fill --cap %s made %s", caps[i], st);
    }
    static const char *const opts[][2] = {
        {"--page-size", "100"}, {"--page-size", "131072"},
        {"--node-bytes", "255"}, {"--node-entries", "1"},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        tr_result r = TR_RUN("bonsai-fill", opts[i][0], opts[i][1], "--count",
                       "10", "--quiet");
        expect(&r, 2);
        expect_in(r.err, opts[i][0], r.cmd);
        expect_in(r.err, ": must be ", r.cmd);
        tr_result_free(&r);
    }
    /* mapsize= in a dump header: the line that says it, and no store */
    static const char *const sizes[] = {"18446744073709551615",
                                        "9223372036854775809"};
    const char *in = tr_path("big.dump");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "VERSION=3\nformat=print\ndatabase=m\n"
                 "type=btree\nmapsize=%s\nHEADER=END\n a\n b\nDATA=END\n",
                 sizes[i]);
        tr_write_bytes(in, text, strlen(text));
        tr_result r = TR_RUN("bonsai-load", "-f", in, st);
        expect(&r, 1);
        expect_in(r.err, "line 5", r.cmd);
        expect_in(r.err, "mapsize", r.cmd);
        expect_in(r.err, bonsai_strerror(BONSAI_INVALID), r.cmd);
        tr_result_free(&r);
        cr_assert(!tr_exists(st), "load of mapsize=%s made %s", sizes[i], st);
    }
    /* the largest cap loads, where the address space holds it */
    tr_result r = TR_RUN("bonsai-fill", "--cap", "9223372036854775808", "--count",
                   "10", "--quiet");
    cr_assert(r.status == 0 || strstr(r.err, bonsai_strerror(BONSAI_NOMEM)),
              "%s: exit %d: %s", r.cmd, r.status, r.err);
    tr_result_free(&r);
}

/* ---- a lock file bonsai did not make ------------------------------------ */

/* STORE-lock a symbolic link to a file of zeros, a FIFO, a regular file
 * of zeros that no creation of a lock table leaves: every tool refuses
 * the store, and writes neither the lock file nor what it points at. */
Test(tools, no_tool_writes_through_a_foreign_lock_file)
{
    const char *st = make_store("s.bonsai", 50), *dst = tr_path("copy.bonsai");
    const char *lock = tr_path("s.bonsai-lock"), *victim = tr_path("victim");
    const char *dump = tr_path("in.dump");
    tr_result r = TR_RUN("bonsai-dump", "-f", dump, st);
    expect(&r, 0);
    tr_result_free(&r);
    enum { LINK_TABLE_SIZE, LINK_BIG, FIFO, ZEROS, NCASES };
    static const char *const what[NCASES] = {
        "a link to 8 KiB of zeros", "a link to 64 KiB of zeros", "a FIFO",
        "4 KiB of zeros"};
    char *zeros = calloc(1, 65536);
    cr_assert(zeros);
    for (int c = 0; c < NCASES; c++) {
        unlink(lock);
        unlink(victim);
        if (c == LINK_TABLE_SIZE || c == LINK_BIG) {
            tr_write_bytes(victim, zeros, c == LINK_BIG ? 65536 : 8192);
            cr_assert(symlink(victim, lock) == 0);
        } else if (c == FIFO) {
            cr_assert(mkfifo(lock, 0644) == 0);
        } else {
            tr_write_bytes(lock, zeros, 4096);
        }
        const char *const *runs[] = {
            TR_ARGS("bonsai-verify", st),
            TR_ARGS("bonsai-stat", st),
            TR_ARGS("bonsai-dump", st),
            TR_ARGS("bonsai-dump", "-l", st),
            TR_ARGS("bonsai-compact", st, dst),
            TR_ARGS("bonsai-load", "-f", dump, st),
        };
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            tr_snap sv = tr_snap_take(victim), sl = tr_snap_take(lock),
                 ss = tr_snap_take(st);
            r = tr_run_v(-1, NULL, runs[i]);
            expect(&r, 1);
            expect_in(r.err, "-lock file", r.cmd);
            tr_result_free(&r);
            tr_snap_same(&sv, what[c]);
            tr_snap_same(&sl, what[c]);
            tr_snap_same(&ss, what[c]);
            cr_assert(!tr_exists(dst), "%s: compact made %s", what[c], dst);
        }
    }
    free(zeros);
}

/* ---- bad load input ----------------------------------------------------- */

/* Writes text into the FIFO from a child process; returns its pid. */
static pid_t feed_fifo(const char *fifo, const char *text)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(TR_HANG_SECONDS);
        int fd = open(fifo, O_WRONLY);
        size_t n = strlen(text), done = 0;
        while (fd >= 0 && done < n) {
            ssize_t w = write(fd, text + done, n - done);
            if (w <= 0)
                _exit(1);
            done += (size_t)w;
        }
        _exit(fd >= 0 ? 0 : 1);
    }
    return pid;
}

Test(tools, load_refuses_bad_input)
{
    const char *bad[N_BAD];
    make_bad(bad);
    const char *st = make_store("s.bonsai", 100), *fresh = tr_path("new.bonsai");
    static const int refused[] = {BAD_GARBAGE, BAD_ZERO, BAD_MISSING,
                                  BAD_DIR};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *in = bad[refused[i]];
        /* into an existing store, plain and -T, and into a new one */
        const char *const *runs[] = {
            TR_ARGS("bonsai-load", "-f", in, st),
            TR_ARGS("bonsai-load", "-T", "-s", "t", "-f", in, st),
            TR_ARGS("bonsai-load", "-f", in, fresh),
        };
        for (size_t j = 0; j < sizeof runs / sizeof runs[0]; j++) {
            tr_snap s = tr_snap_take(st);
            tr_result r = tr_run_v(-1, NULL, runs[j]);
            expect(&r, 1);
            tr_result_free(&r);
            tr_snap_same(&s, bad_name[refused[i]]);
            cr_assert(!tr_exists(fresh), "a failed load left %s", fresh);
        }
    }
    /* input that fails after the store is open: a missing store is not
     * left behind, an empty file is left empty */
    const char *cut = tr_path("cut.dump");
    const char *cut_text = "VERSION=3\ndatabase=x\nHEADER=END\n 61\n";
    tr_write_bytes(cut, cut_text, strlen(cut_text));
    const char *targets[] = {fresh, bad[BAD_EMPTY], st};
    for (int i = 0; i < 3; i++) {
        tr_snap s = tr_snap_take(targets[i]);
        tr_result r = TR_RUN("bonsai-load", "-f", cut, targets[i]);
        expect(&r, 1);
        expect_in(r.err, "line 4", r.cmd);
        expect_in(r.err, cut, r.cmd); /* the input is named */
        tr_result_free(&r);
        tr_snap_same(&s, "a load cut short");
    }

    /* the same on standard input */
    tr_snap s = tr_snap_take(st);
    tr_result r = tr_run_v(-1, "/dev/zero", TR_ARGS("bonsai-load", st));
    expect(&r, 1);
    expect_in(r.err, "standard input: line 1", r.cmd);
    tr_result_free(&r);
    tr_snap_same(&s, "/dev/zero on stdin");

    /* empty input is the dump of an empty store: nothing to load */
    r = TR_RUN("bonsai-load", "-f", bad[BAD_EMPTY], fresh);
    expect(&r, 0);
    tr_result_free(&r);

    /* a FIFO is a stream like stdin: it loads once the writer is done */
    const char *text = "VERSION=3\nformat=print\ndatabase=piped\n"
                       "type=btree\nHEADER=END\n a\n 1\n b\n 2\nDATA=END\n";
    pid_t w = feed_fifo(bad[BAD_FIFO], text);
    r = TR_RUN("bonsai-load", "-f", bad[BAD_FIFO], fresh);
    int wst;
    cr_assert(waitpid(w, &wst, 0) == w && WIFEXITED(wst) &&
              WEXITSTATUS(wst) == 0, "the FIFO writer failed");
    expect(&r, 0);
    tr_result_free(&r);
    cr_assert_eq(map_count(fresh, "piped"), 2);
}

/* ---- a failed load leaves no trace -------------------------------------- */

static uint64_t file_size(const char *path);

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Everything in dir, one line an entry in name order: its name, type,
 * mode, size, and a hash of its bytes or its link's target. */
static char *dir_state(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert(d, "%s: %s", dir, strerror(errno));
    char *line[64];
    size_t n = 0, total = 1;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        cr_assert(n < 64);
        char path[PATH_MAX], what[PATH_MAX] = "";
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        cr_assert(lstat(path, &st) == 0);
        if (S_ISLNK(st.st_mode)) {
            ssize_t k = readlink(path, what, sizeof what - 1);
            cr_assert(k >= 0);
            what[k] = 0;
        } else if (S_ISREG(st.st_mode)) {
            size_t len;
            char *bytes = tr_slurp(path, &len);
            snprintf(what, sizeof what, "%016" PRIx64,
                     tu_hash(bytes, len, 0));
            free(bytes);
        }
        char buf[2 * PATH_MAX];
        int k = snprintf(buf, sizeof buf, "%s %o %jd %s\n", e->d_name,
                         (unsigned)st.st_mode, (intmax_t)st.st_size, what);
        line[n] = strdup(buf);
        cr_assert(line[n]);
        total += (size_t)k;
        n++;
    }
    closedir(d);
    qsort(line, n, sizeof *line, by_name);
    char *s = calloc(1, total);
    cr_assert(s);
    for (size_t i = 0; i < n; i++) {
        strcat(s, line[i]);
        free(line[i]);
    }
    return s;
}

/* Runs bonsai-load with args (a shell word list), input from in, and
 * expects it to fail (and want in its message) leaving dir exactly as it
 * was.  limit: RLIMIT_FSIZE in bytes for it, 0 for none. */
static void load_fails_cleanly(const char *dir, const char *in,
                               const char *args, const char *want,
                               uint64_t limit, const char *ctx)
{
    char *before = dir_state(dir);
    char lim[64] = "";
    if (limit)
        snprintf(lim, sizeof lim, "trap '' XFSZ; ulimit -f %" PRIu64 "; ",
                 limit / 512);
    const char *err = tr_path("load.err");
    int st = tu_sh("cd %s && %sexec %s -f %s %s 2>%s", tu_quote(dir), lim,
                   tu_quote(tu_program("bonsai-load")), tu_quote(in), args,
                   tu_quote(err));
    char *msg = tr_slurp(err, NULL);
    cr_assert(st == 1, "%s: exit %d: %s", ctx, st, msg);
    expect_in(msg, want, ctx);
    char *after = dir_state(dir);
    cr_assert(strcmp(before, after) == 0,
              "%s: the failed load changed %s:\nbefore:\n%s\nafter:\n%s\n%s",
              ctx, dir, before, after, msg);
    free(before);
    free(after);
    free(msg);
}

/* A load that fails leaves the file system exactly as it was: a store it
 * made (also through a dangling symbolic link) is gone with its lock
 * file, an empty file is empty again, an existing store is its old size
 * after a disk too full to grow it, and CRLF input is refused. */
Test(tools, failed_load_leaves_the_file_system_as_it_was)
{
    const char *dir = tr_path("place"), *cut = tr_path("cut.dump");
    cr_assert(mkdir(dir, 0755) == 0);
    const char *cut_text = "VERSION=3\ndatabase=x\nHEADER=END\n 61\n";
    tr_write_bytes(cut, cut_text, strlen(cut_text));

    load_fails_cleanly(dir, cut, "new.bonsai", "line 4", 0, "a new store");
    cr_assert(symlink("target.bonsai", tr_path("place/dangling")) == 0);
    load_fails_cleanly(dir, cut, "dangling", "line 4", 0,
                       "through a dangling link");
    cr_assert(mkdir(tr_path("place/sub"), 0755) == 0);
    cr_assert(symlink("sub/../sub/t.bonsai", tr_path("place/deep")) == 0);
    cr_assert(symlink("deep", tr_path("place/chain")) == 0);
    load_fails_cleanly(dir, cut, "chain", "line 4", 0,
                       "through two links into a directory");
    tr_write_bytes(tr_path("place/empty"), "", 0);
    load_fails_cleanly(dir, cut, "empty", "line 4", 0, "an empty file");
    /* a lock file not bonsai's: the open fails, the new store goes */
    char zeros[4096] = {0};
    tr_write_bytes(tr_path("place/locked.bonsai-lock"), zeros, sizeof zeros);
    load_fails_cleanly(dir, cut, "locked.bonsai", "-lock file", 0,
                       "a new store beside a foreign lock file");

    /* an existing store (with its lock file) */
    const char *st = tr_path("place/s.bonsai");
    tr_copy_file(make_store("s.bonsai", 100), st);
    bonsai_db *db = tu_open(st, NULL); /* its lock file, made */
    TU_OK(bonsai_close(db));
    load_fails_cleanly(dir, cut, "s.bonsai", "line 4", 0,
                       "an existing store");
    /* CRLF line ends: in a header, in data lines */
    const char *crlf = tr_path("crlf.dump");
    const char *header_crlf = "VERSION=3\r\nformat=print\r\n";
    tr_write_bytes(crlf, header_crlf, strlen(header_crlf));
    load_fails_cleanly(dir, crlf, "s.bonsai",
                       "line 1: carriage return (CRLF", 0, "a CRLF header");
    const char *data_crlf = "VERSION=3\nformat=print\ndatabase=c\n"
                            "HEADER=END\n a\r\n b\r\nDATA=END\r\n";
    tr_write_bytes(crlf, data_crlf, strlen(data_crlf));
    load_fails_cleanly(dir, crlf, "s.bonsai",
                       "line 5: carriage return (CRLF", 0, "CRLF data");
    tr_write_bytes(crlf, "a\r\nb\r\n", 6);
    load_fails_cleanly(dir, crlf, "-T -s c s.bonsai",
                       "line 1: carriage return (CRLF", 0, "CRLF text");

    /* a disk that will not hold what the load needs (the file may not
     * grow past a limit): the growth it got is taken back */
    const char *big = tr_path("big.dump");
    FILE *f = fopen(big, "w");
    cr_assert(f);
    fprintf(f, "VERSION=3\ndatabase=big\nHEADER=END\n");
    tu_rng rng = {tu_seed("big load", 3)};
    for (int i = 0; i < 8000; i++) {
        fprintf(f, " %016" PRIx64 "\n ", tu_rand(&rng));
        for (int j = 0; j < 50; j++)
            fprintf(f, "%016" PRIx64, tu_rand(&rng));
        fprintf(f, "\n");
    }
    fprintf(f, "DATA=END\n");
    cr_assert(fclose(f) == 0);
    load_fails_cleanly(dir, big, "s.bonsai", "s.bonsai",
                       file_size(st) + (3u << 19), "a disk too full");
}

/* ---- unwritable outputs ------------------------------------------------- */

/* Runs argv as an unprivileged user; 0 and a log line if that cannot be
 * (no setuid, or the build lies where nobody may not go). */
static int run_unprivileged(const char *const *argv, tr_result *r)
{
    cr_assert(chmod(tu_tmpdir(), 0755) == 0);
    *r = tr_run_v(unprivileged(), NULL, argv);
    cr_assert(chmod(tu_tmpdir(), 0700) == 0);
    if (r->status == 125 || r->status == 126) {
        cr_log_warn("%s: cannot run as nobody (exit %d): not checked",
                    r->cmd, r->status);
        tr_result_free(r);
        return 0;
    }
    return 1;
}

Test(tools, unwritable_outputs)
{
    const char *src = make_store("s.bonsai", 200), *dump = tr_path("dump");
    cr_assert(chmod(src, 0644) == 0);
    tr_result r = TR_RUN("bonsai-dump", "-f", dump, src);
    expect(&r, 0);
    tr_result_free(&r);
    cr_assert(chmod(dump, 0644) == 0);
    tr_snap s = tr_snap_take(src);

    /* under /proc nothing can be created, not even by root */
    const char *const *proc_runs[] = {
        TR_ARGS("bonsai-compact", src, "/proc/bonsai-none/copy"),
        TR_ARGS("bonsai-compact", src, "/proc/bonsai-none"),
        TR_ARGS("bonsai-dump", "-f", "/proc/bonsai-none/out", src),
        TR_ARGS("bonsai-load", "-f", dump, "/proc/bonsai-none/new"),
    };
    for (size_t i = 0; i < sizeof proc_runs / sizeof proc_runs[0]; i++) {
        r = tr_run_v(-1, NULL, proc_runs[i]);
        expect(&r, 1);
        tr_result_free(&r);
    }

    /* DST a FIFO or a directory: compact would rename over them */
    const char *fifo = tr_path("fifo"), *dir = tr_path("dir");
    cr_assert(mkfifo(fifo, 0644) == 0 && mkdir(dir, 0755) == 0);
    const char *dsts[] = {fifo, dir};
    for (int i = 0; i < 2; i++) {
        tr_snap d = tr_snap_take(dsts[i]);
        r = TR_RUN("bonsai-compact", src, dsts[i]);
        expect(&r, 1);
        expect_in(r.err, dsts[i], r.cmd);
        tr_result_free(&r);
        tr_snap_same(&d, "compact DST");
    }

    /* a read-only directory: compact, dump and load create nothing */
    const char *ro = tr_path("ro");
    cr_assert(mkdir(ro, 0555) == 0);
    const char *in_ro = tr_path("ro/out");
    const char *const *ro_runs[] = {
        TR_ARGS("bonsai-compact", src, in_ro),
        TR_ARGS("bonsai-dump", "-f", in_ro, src),
        TR_ARGS("bonsai-load", "-f", dump, in_ro),
    };
    for (size_t i = 0; i < sizeof ro_runs / sizeof ro_runs[0]; i++) {
        if (!run_unprivileged(ro_runs[i], &r))
            continue;
        expect(&r, 1);
        tr_result_free(&r);
        cr_assert(!tr_exists(in_ro), "%s was created", in_ro);
    }

    /* a read-only store file: load refuses it and leaves it alone */
    const char *rofile = tr_path("ro.bonsai");
    tr_copy_file(src, rofile);
    cr_assert(chmod(rofile, 0444) == 0);
    tr_snap f = tr_snap_take(rofile);
    if (run_unprivileged(TR_ARGS("bonsai-load", "-f", dump, rofile), &r)) {
        expect(&r, 1);
        expect_in(r.err, bonsai_strerror(BONSAI_READONLY), r.cmd);
        tr_result_free(&r);
    }
    tr_snap_same(&f, "read-only store");
    /* ... while the tools that only read it work */
    const char *const *readers[] = {
        TR_ARGS("bonsai-verify", rofile),
        TR_ARGS("bonsai-stat", rofile),
        TR_ARGS("bonsai-dump", "-f", tr_path("ro.dump"), rofile),
        TR_ARGS("bonsai-compact", rofile, tr_path("fromro.bonsai")),
    };
    f = tr_snap_take(rofile);
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
        r = tr_run_v(-1, NULL, readers[i]);
        expect(&r, 0);
        tr_result_free(&r);
    }
    tr_snap_same(&f, "read-only store, read");
    tr_snap_same(&s, "source of the unwritable outputs");
}

/* ---- a corrupted store -------------------------------------------------- */

/* Flips the bits of n bytes at off. */
static void smash(const char *path, uint64_t off, size_t n)
{
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    uint8_t b[64];
    cr_assert(n <= sizeof b);
    cr_assert(pread(fd, b, n, (off_t)off) == (ssize_t)n);
    for (size_t i = 0; i < n; i++)
        b[i] ^= 0xa5;
    cr_assert(pwrite(fd, b, n, (off_t)off) == (ssize_t)n);
    close(fd);
}

Test(tools, corrupted_store)
{
    const char *good = make_store("good.bonsai", 3000);
    const char *bad = tr_path("bad.bonsai"), *dst = tr_path("copy.bonsai");
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    o.create = 0;
    bonsai_db *db = tu_open(good, &o);
    bonsai_space sp;
    TU_OK(bonsai_space_stat(db, &sp));
    TU_OK(bonsai_close(db));
    /* one commit: every page past the head is a node or a value, under a
     * checksum or verify's zero-fill check, so any flip there is found */
    cr_assert(sp.free_bytes == 0 && sp.problems == 0,
              "free %" PRIu64 " problems %" PRIu64, sp.free_bytes,
              sp.problems);
    uint64_t lo = sp.head_bytes, span = sp.end_bytes - sp.head_bytes;
    const int spots = 24;
    for (int i = 0; i < spots; i++) {
        uint64_t off = lo + span * (uint64_t)i / spots + (uint64_t)i * 13;
        tr_copy_file(good, bad);
        smash(bad, off, 8);
        tr_snap s = tr_snap_take(bad);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "8 bytes at %" PRIu64, off);

        /* its report is its output: on stdout */
        tr_result r = TR_RUN("bonsai-verify", bad);
        cr_assert_eq(r.status, 1, "%s (%s): exit %d", r.cmd, ctx, r.status);
        cr_assert(strstr(r.out, ", page ") && strstr(r.out, "problem"),
                  "%s (%s): the node is not named:\n%s", r.cmd, ctx, r.out);
        tr_result_free(&r);

        /* dump and stat may not read the smashed bytes; when they do,
         * they say so */
        const char *const *others[] = {
            TR_ARGS("bonsai-dump", "-f", tr_path("out.dump"), bad),
            TR_ARGS("bonsai-stat", bad),
            TR_ARGS("bonsai-stat", "--json", bad),
        };
        for (size_t j = 0; j < sizeof others / sizeof others[0]; j++) {
            r = tr_run_v(-1, NULL, others[j]);
            cr_assert(r.status == 0 || r.status == 1, "%s (%s): exit %d",
                      r.cmd, ctx, r.status);
            if (r.status)
                cr_assert(r.err[0], "%s (%s): exit 1, no message", r.cmd,
                          ctx);
            tr_result_free(&r);
        }
        /* --quick skips leaf bodies: it may pass, or says where */
        r = TR_RUN("bonsai-verify", "--quick", bad);
        cr_assert(r.status == 0 || strstr(r.out, "page ") ||
                      strstr(r.out, "the file"),
                  "%s (%s): exit %d:\n%s", r.cmd, ctx, r.status, r.out);
        tr_result_free(&r);

        /* compact verifies its source first: never a copy of this */
        r = TR_RUN("bonsai-compact", bad, dst);
        expect(&r, 1);
        tr_result_free(&r);
        cr_assert(!tr_exists(dst), "%s: compact copied a corrupt store", ctx);
        tr_snap_same(&s, ctx);
    }
}

/* ---- verify's progress -------------------------------------------------- */

Test(tools, verify_progress_only_on_a_terminal_or_asked)
{
    const char *st = make_store("s.bonsai", 20000);
    /* stderr is a file here: no progress by default */
    tr_result r = TR_RUN("bonsai-verify", st);
    expect(&r, 0);
    cr_assert(r.err[0] == 0, "progress on a file: %s", r.err);
    char *summary = strdup(r.out);
    tr_result_free(&r);
    r = TR_RUN("bonsai-verify", "--progress", st);
    expect(&r, 0);
    expect_in(r.err, " pages (", r.cmd);
    cr_assert_str_eq(r.out, summary, "progress changed stdout");
    tr_result_free(&r);
    r = TR_RUN("bonsai-verify", "--no-progress", st);
    expect(&r, 0);
    cr_assert(r.err[0] == 0, "--no-progress: %s", r.err);
    tr_result_free(&r);
    free(summary);
}

/* ---- bonsai-stat and bonsai-compact on good stores ---------------------- */

Test(tools, stat_reports_every_field)
{
    const char *st = make_store("s.bonsai", 200);
    tr_snap s = tr_snap_take(st);
    tr_result r = TR_RUN("bonsai-stat", "--json", st);
    expect(&r, 0);
    static const char *const file_keys[] = {
        "\"file_bytes\":", "\"cap\":", "\"used_bytes\":",
        "\"free_bytes\":", "\"free_extents\":", "\"txn_id\":",
        "\"readers\":", "\"oldest_reader_lag\":", "\"format_version\":",
        "\"rounding_waste\":",
    };
    static const char *const map_keys[] = {
        "\"entries\":200,", "\"depth\":", "\"branch_nodes\":",
        "\"leaf_nodes\":", "\"raw_bytes\":", "\"stored_bytes\":",
        "\"page_bytes\":", "\"leaf_fill\":", "\"bytes_per_entry\":",
        "\"compression_ratio\":", "\"rounding_waste\":",
    };
    /* the file's fields come before the maps */
    char *maps = strstr(r.out, "\"maps\":[");
    cr_assert(maps, "%s: no maps: %s", r.cmd, r.out);
    *maps = 0;
    for (size_t i = 0; i < sizeof file_keys / sizeof file_keys[0]; i++)
        expect_in(r.out, file_keys[i], r.cmd);
    *maps = '"';
    const char *u = strstr(r.out, "{\"name\":\"u64\"");
    const char *b = strstr(r.out, "{\"name\":\"bytes\"");
    cr_assert(u && b, "%s: a map is missing: %s", r.cmd, r.out);
    for (size_t i = 0; i < sizeof map_keys / sizeof map_keys[0]; i++) {
        expect_in(u, map_keys[i], r.cmd);
        expect_in(b, map_keys[i], r.cmd);
    }
    cr_assert(r.out[strlen(r.out) - 1] == '\n' && strchr(r.out, '\n') ==
              r.out + strlen(r.out) - 1, "--json: not one line: %s", r.out);
    tr_result_free(&r);

    r = TR_RUN("bonsai-stat", "--json", "-s", "u64", st);
    expect(&r, 0);
    cr_assert(strstr(r.out, "\"name\":\"u64\"") &&
                  !strstr(r.out, "\"name\":\"bytes\""),
              "-s u64: %s", r.out);
    tr_result_free(&r);
    r = TR_RUN("bonsai-stat", "-s", "nosuch", st);
    expect(&r, 1);
    tr_result_free(&r);

    static const char *const labels[] = {
        "format version", "file size", "cap", "used", "free ", "extent",
        "read snapshots", "txn id", "rounding waste", "entries", "depth",
        "branch", "leaf", "bytes in nodes", "average leaf fill",
        "bytes per entry", "compression ratio",
    };
    r = TR_RUN("bonsai-stat", st);
    expect(&r, 0);
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
        expect_in(r.out, labels[i], r.cmd);
    tr_result_free(&r);
    tr_snap_same(&s, "stat");
}

/* A store of many small commits over the same keys: copy-on-write leaves
 * free space and part-full leaves behind. */
static const char *make_churned_store(void)
{
    const char *path = tr_path("churn.bonsai");
    bonsai_options o;
    bonsai_options_init(&o);
    o.transactions = 1;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tu_rng rng = {tu_seed("churn", 5)};
    for (int c = 0; c < 30; c++) {
        bonsai_txn *txn;
        TU_OK(bonsai_txn_begin(db, 0, &txn));
        for (int i = 0; i < 300; i++) {
            char v[16];
            int n = snprintf(v, sizeof v, "v%d", c);
            bonsai_val val = tu_val(v, (size_t)n);
            TU_OK(bonsai_put_u64(txn, m, tu_below(&rng, 5000), &val, 0));
        }
        TU_OK(bonsai_txn_commit(txn));
    }
    TU_OK(bonsai_close(db));
    return path;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    cr_assert(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
    return (uint64_t)st.st_size;
}

/* Asserts that a and b dump to the same text. */
static void same_dump(const char *a, const char *b)
{
    const char *da = tr_path("a.dump"), *db = tr_path("b.dump");
    tr_result r = TR_RUN("bonsai-dump", "-f", da, a);
    expect(&r, 0);
    tr_result_free(&r);
    r = TR_RUN("bonsai-dump", "-f", db, b);
    expect(&r, 0);
    tr_result_free(&r);
    size_t na, nb;
    char *pa = tr_slurp(da, &na), *pb = tr_slurp(db, &nb);
    cr_assert(na == nb && memcmp(pa, pb, na) == 0, "%s and %s differ", a,
              b);
    free(pa);
    free(pb);
}

/* Occurrences of needle in text. */
static size_t count_in(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

#define MANY_MAPS 5000

/* A dump of maps [from, to), one entry each. */
static void write_many_maps(const char *path, int from, int to)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s: %s", path, strerror(errno));
    for (int i = from; i < to; i++)
        fprintf(f, "VERSION=3\nformat=print\ndatabase=map%05d\n"
                "type=btree\nHEADER=END\n k%d\n v%d\nDATA=END\n", i, i,
                i);
    cr_assert(fclose(f) == 0);
}

/* Two loads of 2,500 maps each make a store that holds more maps than
 * one handle opens at once: every tool reads it whole, and a load of
 * its whole dump makes the same store again. */
Test(tools, tools_handle_more_maps_than_one_handle_opens)
{
    const char *st = tr_path("many.bonsai"), *half1 = tr_path("half1.dump"),
               *half2 = tr_path("half2.dump"), *all = tr_path("all.dump"),
               *copy = tr_path("copy.bonsai"), *again = tr_path("again.bonsai");
    write_many_maps(half1, 0, MANY_MAPS / 2);
    write_many_maps(half2, MANY_MAPS / 2, MANY_MAPS);
    tr_result r = TR_RUN("bonsai-load", "-f", half1, st);
    expect(&r, 0);
    tr_result_free(&r);
    r = TR_RUN("bonsai-load", "-f", half2, st);
    expect(&r, 0);
    tr_result_free(&r);
    r = TR_RUN("bonsai-verify", st);
    expect(&r, 0);
    tr_result_free(&r);

    r = TR_RUN("bonsai-dump", "-a", "-p", "-f", all, st);
    expect(&r, 0);
    tr_result_free(&r);
    char *text = tr_slurp(all, NULL);
    cr_assert_eq(count_in(text, "DATA=END\n"), MANY_MAPS);
    cr_assert(strstr(text, "database=map04999\n"), "the last map is missing");
    free(text);
    r = TR_RUN("bonsai-dump", "-l", st);
    expect(&r, 0);
    cr_assert_eq(count_in(r.out, "\n"), MANY_MAPS);
    tr_result_free(&r);
    r = TR_RUN("bonsai-stat", "--json", st);
    expect(&r, 0);
    cr_assert_eq(count_in(r.out, "\"name\":"), MANY_MAPS);
    tr_result_free(&r);
    r = TR_RUN("bonsai-compact", st, copy);
    expect(&r, 0);
    tr_result_free(&r);
    same_dump(st, copy);
    r = TR_RUN("bonsai-load", "-f", all, again);
    expect(&r, 0);
    tr_result_free(&r);
    same_dump(st, again);
}

Test(tools, compact_options_and_sizes)
{
    const char *src = make_churned_store(), *dst = tr_path("dst.bonsai");
    tr_snap s = tr_snap_take(src);
    /* an old DST is replaced whole */
    tr_write_bytes(dst, "old", 3);
    tr_result r = TR_RUN("bonsai-compact", src, dst);
    expect(&r, 0);
    char line[PATH_MAX + 64];
    snprintf(line, sizeof line, "%s: %" PRIu64 " bytes\n", src,
             file_size(src));
    expect_in(r.out, line, r.cmd);
    snprintf(line, sizeof line, "%s: %" PRIu64 " bytes, ", dst,
             file_size(dst));
    expect_in(r.out, line, r.cmd);
    tr_result_free(&r);
    cr_assert(file_size(dst) <= file_size(src), "the copy is larger: %"
              PRIu64 " > %" PRIu64, file_size(dst), file_size(src));
    r = TR_RUN("bonsai-verify", dst);
    expect(&r, 0);
    tr_result_free(&r);
    same_dump(src, dst);

    /* other settings: the copy has them, the same data, and verifies */
    const char *dz = tr_path("z.bonsai");
    r = TR_RUN("bonsai-compact", "--quiet", "--compress", "zlib:9",
            "--node-bytes", "1024", "--node-entries", "32", src, dz);
    expect(&r, 0);
    cr_assert(r.out[0] == 0, "--quiet: %s", r.out);
    tr_result_free(&r);
    r = TR_RUN("bonsai-stat", "--json", dz);
    expect(&r, 0);
    expect_in(r.out, "\"compression\":\"zlib\",\"compression_level\":9",
              r.cmd);
    expect_in(r.out, "\"node_bytes\":1024,\"node_entries\":32", r.cmd);
    tr_result_free(&r);
    r = TR_RUN("bonsai-verify", dz);
    expect(&r, 0);
    tr_result_free(&r);
    same_dump(src, dz);
    r = TR_RUN("bonsai-compact", "--compress", "lz4", src, tr_path("l.bonsai"));
    expect(&r, 0);
    tr_result_free(&r);
    same_dump(src, tr_path("l.bonsai"));

    /* no temporary file is left beside DST */
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q compact-", tu_tmpdir());
    cr_assert(system(cmd) != 0, "a temporary file was left behind");
    tr_snap_same(&s, "compact source");
}

/* ---- bonsai-dump against the reference tools ---------------------------- */

static int on_path(const char *prog)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

/* Runs a shell command; its exit status (a signal fails the test). */
static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    fflush(NULL);
    int st = system(cmd);
    cr_assert(st != -1 && !WIFSIGNALED(st), "%s: signal", cmd);
    return WEXITSTATUS(st);
}

/* Asserts that two files hold the same bytes. */
static void same_bytes(const char *a, const char *b, const char *ctx)
{
    size_t na, nb;
    char *pa = tr_slurp(a, &na), *pb = tr_slurp(b, &nb);
    cr_assert(na == nb && memcmp(pa, pb, na) == 0,
              "%s: %s and %s differ:\n--- %.1500s\n+++ %.1500s", ctx, a, b,
              pa, pb);
    free(pa);
    free(pb);
}

/* A store of byte-string maps whose keys and values hold every kind of
 * byte: printable, backslash, space, control, high. */
static const char *make_bytes_store(void)
{
    const char *path = tr_path("bytes.bonsai");
    bonsai_options o;
    bonsai_options_init(&o);
    o.transactions = 1;
    bonsai_db *db = tu_open(path, &o);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    const char *names[] = {"plain", "with space", "back\\slash"};
    for (int m = 0; m < 3; m++) {
        bonsai_map map = tu_map_create(db, txn, names[m], BONSAI_KEY_BYTES);
        for (int i = 0; i < 300; i++) {
            uint8_t k[6] = {(uint8_t)(i * 37), (uint8_t)i, '\\', ' ',
                            (uint8_t)(i >> 8), (uint8_t)m};
            uint8_t v[3] = {(uint8_t)(255 - i), '\n', 'x'};
            bonsai_val key = tu_val(k, sizeof k);
            bonsai_val val = tu_val(v, (size_t)(i % 4 == 0 ? 0 : 3));
            TU_OK(bonsai_put(txn, map, &key, &val, 0));
        }
    }
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
    return path;
}

Test(tools, dump_matches_mdb_dump_and_db_dump)
{
    int lmdb = on_path("mdb_load") && on_path("mdb_dump");
    int bdb = on_path("db_load") && on_path("db_dump");
    if (!lmdb || !bdb)
        cr_log_warn("not on PATH:%s%s (Debian packages lmdb-utils, "
                    "db-util): those comparisons are skipped",
                    lmdb ? "" : " mdb_load/mdb_dump",
                    bdb ? "" : " db_load/db_dump");
    const char *st = make_bytes_store();
    const char *ours = tr_path("ours"), *oursp = tr_path("ours.p");
    const char *theirs = tr_path("theirs"), *want = tr_path("want");
    tr_result r = TR_RUN("bonsai-dump", "-f", ours, st);
    expect(&r, 0);
    tr_result_free(&r);
    r = TR_RUN("bonsai-dump", "-p", "-f", oursp, st);
    expect(&r, 0);
    tr_result_free(&r);
    if (lmdb) {
        /* mdb_dump adds the environment's maxreaders= and db_pagesize=,
         * which bonsai has no use for; every other byte is the same */
        const char *mdb = tr_path("x.mdb");
        cr_assert_eq(sh("mdb_load -n -f '%s' '%s'", ours, mdb), 0);
        cr_assert_eq(sh("mdb_dump -n -a '%s' | sed '/^maxreaders=/d; "
                        "/^db_pagesize=/d' >'%s'", mdb, theirs), 0);
        same_bytes(ours, theirs, "mdb_dump -a");
    }
    if (bdb) {
        /* db_dump writes db_pagesize=, bonsai-dump mapsize= */
        const char *db = tr_path("x.db");
        cr_assert_eq(sh("sed '/^mapsize=/d' '%s' | db_load '%s'", ours, db),
                     0);
        const char *flags[] = {"", "-p "};
        const char *mine[] = {ours, oursp};
        for (int i = 0; i < 2; i++) {
            cr_assert_eq(sh("db_dump %s'%s' | sed '/^db_pagesize=/d' >'%s'",
                            flags[i], db, theirs), 0);
            cr_assert_eq(sh("sed '/^mapsize=/d' '%s' >'%s'", mine[i], want),
                         0);
            same_bytes(want, theirs, flags[i][0] ? "db_dump -p" : "db_dump");
        }
    }
}

/* ---- bonsai-fill in parts ------------------------------------------------ */

/* A part of a fill of path: exit 0, the report's entries and where it
 * stopped. */
static void fill_part(const char *mode, const char *path, const char *count,
                      int resume, const char *entries, const char *stopped)
{
    tr_result r = resume ? TR_RUN("bonsai-fill", "--keys", "random", "--cap", "64M",
                            mode, "--file", path, "--count", count,
                            "--resume", "--quiet", "--json")
                      : TR_RUN("bonsai-fill", "--keys", "random", "--cap", "64M",
                            mode, "--file", path, "--count", count,
                            "--quiet", "--json");
    expect(&r, 0);
    char want[64];
    snprintf(want, sizeof want, "{\"entries\":%s,", entries);
    expect_in(r.out, want, r.cmd);
    snprintf(want, sizeof want, "\"stopped\":\"%s\"", stopped);
    expect_in(r.out, want, r.cmd);
    expect_in(r.out, "\"consistent\":true", r.cmd);
    tr_result_free(&r);
}

/* A fill stopped by --count goes on with --resume, with and without
 * transactions: the store holds the stream's first keys and no other
 * (the tool's own check walks them all), and --count counts them all. */
Test(tools, fill_resumes_where_it_stopped)
{
    static const char *const modes[] = {"--no-txn", "--txn"};
    for (int m = 0; m < 2; m++) {
        const char *f = tr_path(m ? "txn.bonsai" : "notxn.bonsai");
        fill_part(modes[m], f, "150000", 0, "150000", "count");
        fill_part(modes[m], f, "250000", 1, "250000", "count");
        /* asked for fewer than it holds: nothing to add */
        fill_part(modes[m], f, "100", 1, "250000", "count");
        cr_assert_eq(map_count(f, "test"), 250000);
    }
}

/* --resume refuses a store it cannot go on with, and needs --file. */
Test(tools, fill_resume_refuses_other_stores)
{
    const char *f = tr_path("r.bonsai");
    tr_result r = TR_RUN("bonsai-fill", "--keys", "random", "--cap", "64M",
                   "--no-txn", "--file", f, "--count", "1000", "--quiet");
    expect(&r, 0);
    tr_result_free(&r);
    tr_snap s = tr_snap_take(f);
    r = TR_RUN("bonsai-fill", "--keys", "random", "--seed", "2", "--cap", "64M",
            "--no-txn", "--file", f, "--resume", "--quiet");
    expect(&r, 1);
    expect_in(r.err, "does not hold the first 1000 keys", r.cmd);
    tr_result_free(&r);
    r = TR_RUN("bonsai-fill", "--keys", "seq", "--cap", "64M", "--no-txn",
            "--file", f, "--resume", "--quiet");
    expect(&r, 1);
    tr_result_free(&r);
    tr_snap_same(&s, "refused resumes");
    r = TR_RUN("bonsai-fill", "--keys", "random", "--resume", "--quiet");
    expect(&r, 2);
    expect_in(r.err, "--resume needs --file", r.cmd);
    tr_result_free(&r);
    r = TR_RUN("bonsai-fill", "--keys", "random", "--cap", "64M", "--file",
            tr_path("missing.bonsai"), "--resume", "--quiet");
    expect(&r, 1);
    tr_result_free(&r);
}

/* --seconds ends a fill early and cleanly: the store is whole. */
Test(tools, fill_stops_after_its_seconds)
{
    const char *f = tr_path("t.bonsai");
    tr_result r = TR_RUN("bonsai-fill", "--keys", "random", "--cap", "1G",
                   "--no-txn", "--file", f, "--seconds", "1", "--quiet",
                   "--json");
    expect(&r, 0);
    expect_in(r.out, "\"stopped\":\"time\"", r.cmd);
    expect_in(r.out, "\"consistent\":true", r.cmd);
    tr_result_free(&r);
    r = TR_RUN("bonsai-verify", f);
    expect(&r, 0);
    tr_result_free(&r);
}

/* SPDX-License-Identifier: MIT */
/*
 * test_xreaders.c - read snapshots across processes: read-only opens
 * beside a writer in another process, through the lock file PATH-lock.
 *
 * What a user relies on: a read-only open works while another process
 * holds the store read-write and sees its last commit; a snapshot stays
 * exactly as it was while the writer commits hundreds of transactions
 * that free and reuse pages, even when the writer opens after the
 * snapshot began; a reader that dies does not hold space forever; the
 * tools read a store being written and copy a committed state.
 *
 * Other processes are forked children that never use Criterion: they
 * report results as ints through a pipe and leave with _exit.  A child
 * waiting for the parent reads a pipe the parent holds, so it also ends
 * when the parent dies.
 *
 * The data: map "m" of u64 keys 0..N-1.  Round 0 puts every key at
 * version 0; round r >= 1, one commit, deletes every key k with
 * k % 3 == r % 3 and puts it back at version r.  The value of a key is a
 * hash of (key, version), so the state after round r is known exactly.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
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
#include "util.h"

/* .timeout: a hang guard (a child that never reports), not a timing
 * assertion */
TestSuite(xreaders, .init = tu_setup, .fini = tu_teardown, .timeout = 600);

#define NKEYS 3000u
#define VAL_BYTES 16u

/* ---- the data ------------------------------------------------------------ */

static void value_of(uint64_t k, uint64_t version, uint8_t out[VAL_BYTES])
{
    uint64_t a = tu_mix64(k * 3 + (version << 20) + 1);
    uint64_t b = tu_mix64(a ^ version);
    memcpy(out, &a, 8);
    memcpy(out + 8, &b, 8);
}

/* The version key k holds after round r. */
static uint64_t version_after(uint64_t k, uint64_t r)
{
    uint64_t d = (r + 3 - k % 3) % 3; /* rounds since k was last put */
    return r >= d + 1 ? r - d : 0;
}

static void model_after(tm_model *m, uint64_t r)
{
    tm_init(m, BONSAI_KEY_U64);
    uint8_t v[VAL_BYTES];
    for (uint64_t k = 0; k < NKEYS; k++) {
        value_of(k, version_after(k, r), v);
        tm_append(m, &k, 8, v, sizeof v);
    }
}

static bonsai_options writer_options(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.sync = 0; /* other processes see commits through the page cache */
    o.create = 0;
    o.node_bytes = 1024; /* many nodes: every round rewrites most leaves */
    return o;
}

static bonsai_options reader_options(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    o.create = 0;
    return o;
}

/* Round 0 in a new store: returns the txn id of its commit. */
static uint64_t make_store(const char *path)
{
    bonsai_options o = writer_options();
    o.create = 1;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    uint8_t v[VAL_BYTES];
    for (uint64_t k = 0; k < NKEYS; k++) {
        value_of(k, 0, v);
        bonsai_val val = tu_val(v, sizeof v);
        TU_OK(bonsai_put_u64(t, m, k, &val, 0));
    }
    TU_OK(bonsai_txn_commit(t));
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    TU_OK(bonsai_close(db));
    return st.txn_id;
}

/* One round as one commit.  Used by children too: no Criterion here. */
static int run_round(bonsai_db *db, bonsai_map m, uint64_t r)
{
    bonsai_txn *t;
    int rc = bonsai_txn_begin(db, 0, &t);
    if (rc)
        return rc;
    for (uint64_t k = r % 3; k < NKEYS && rc == 0; k += 3)
        rc = bonsai_del_u64(t, m, k);
    uint8_t v[VAL_BYTES];
    for (uint64_t k = r % 3; k < NKEYS && rc == 0; k += 3) {
        value_of(k, r, v);
        bonsai_val val = tu_val(v, sizeof v);
        rc = bonsai_put_u64(t, m, k, &val, 0);
    }
    if (rc) {
        bonsai_txn_abort(t);
        return rc;
    }
    return bonsai_txn_commit(t);
}

static int run_rounds(bonsai_db *db, uint64_t from, uint64_t to)
{
    bonsai_map m;
    int rc = bonsai_map_open(db, NULL, "m", &m, NULL);
    for (uint64_t r = from; r <= to && rc == 0; r++)
        rc = run_round(db, m, r);
    return rc;
}

/* Does txn's view of "m" equal the state after round r?  Returns 0 or
 * why not, in why (no Criterion: children use it). */
static int snapshot_is_round(bonsai_txn *txn, bonsai_map m, uint64_t r,
                             char *why, size_t whylen)
{
    tm_model want;
    model_after(&want, r);
    int ok = tu_same(txn, m, &want, why, whylen);
    tm_free(&want);
    return ok ? 0 : 1;
}

static uint64_t problems_of(bonsai_db *db)
{
    uint64_t problems = 0;
    int rc = bonsai_verify(db, 0, NULL, NULL, NULL, &problems);
    return rc ? 1000000 + (uint64_t)-rc : problems;
}

static uint64_t size_of(const char *path)
{
    struct stat st;
    cr_assert(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
    return (uint64_t)st.st_size;
}

/* ---- children ------------------------------------------------------------ */

typedef void (*child_fn)(const char *path, int up, int down, uint64_t arg);

typedef struct child_call {
    child_fn fn;
    const char *path;
    uint64_t arg;
} child_call;

static void call_child(int up, int down, void *ctx)
{
    const child_call *c = ctx;
    c->fn(c->path, up, down, c->arg);
}

static tu_child spawn(child_fn fn, const char *path, uint64_t arg)
{
    child_call c = {fn, path, arg};
    return tu_spawn(call_child, &c);
}

/* Writer: opens read-write, reports; then, for every byte from the
 * parent, runs the next `arg` rounds and reports their result; at EOF
 * closes and reports the close. */
static void writer_child(const char *path, int up, int down, uint64_t arg)
{
    bonsai_options o = writer_options();
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, &o, &db);
    tu_put_int(up, rc);
    if (rc)
        return;
    uint64_t next = 1;
    while (tu_wait_parent(down)) {
        rc = run_rounds(db, next, next + arg - 1);
        next += arg;
        tu_put_int(up, rc);
    }
    tu_put_int(up, bonsai_close(db));
}

/* Writer: runs rounds 1..arg without waiting, reports their result and
 * the verify problems of the final state, closes and reports that. */
static void churn_child(const char *path, int up, int down, uint64_t arg)
{
    (void)down;
    bonsai_options o = writer_options();
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, &o, &db);
    tu_put_int(up, rc);
    if (rc)
        return;
    tu_put_int(up, run_rounds(db, 1, arg));
    tu_put_int(up, (int64_t)problems_of(db));
    tu_put_int(up, bonsai_close(db));
}

/* Reader: opens read-only, begins a snapshot, reports the open and the
 * snapshot's txn id; waits for the parent; then checks that the snapshot
 * still holds round arg (0 or 1), reports it and closes. */
static void snapshot_child(const char *path, int up, int down, uint64_t arg)
{
    bonsai_options o = reader_options();
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, &o, &db);
    tu_put_int(up, rc);
    if (rc)
        return;
    bonsai_txn *t = NULL;
    bonsai_map m = NULL;
    rc = bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t);
    if (rc == 0)
        rc = bonsai_map_open(db, t, "m", &m, NULL);
    tu_put_int(up, rc ? rc : (int64_t)bonsai_txn_id(t));
    tu_wait_parent(down);
    char why[256];
    tu_put_int(up, rc ? 1 : snapshot_is_round(t, m, arg, why, sizeof why));
    bonsai_txn_abort(t);
    tu_put_int(up, bonsai_close(db));
}

/* ---- (a) a read-only open beside a writer ------------------------------- */

Test(xreaders, read_only_open_beside_a_writer_sees_its_commits)
{
    const char *path = tu_path("a.db");
    uint64_t t0 = make_store(path);
    tu_child w = spawn(writer_child, path, 1);
    int64_t rc = tu_report(&w, "its open");
    cr_assert(rc == 0, "the writer's open -> %s", tu_err((int)rc));
    tu_release(&w); /* round 1 */
    cr_assert(tu_report(&w, "round 1") == 0);

    bonsai_options o = reader_options();
    bonsai_db *r = NULL;
    rc = bonsai_open(path, &o, &r);
    cr_assert(rc == 0, "read-only open while another process writes -> %s",
              tu_err((int)rc));
    bonsai_map m = tu_map_open(r, NULL, "m", BONSAI_KEY_U64);
    char why[256];
    for (uint64_t round = 1; round <= 3; round++) {
        bonsai_txn *t;
        TU_OK(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &t));
        cr_assert_eq(bonsai_txn_id(t), t0 + round,
                     "a new snapshot reads txn %llu, the writer's last "
                     "commit is %llu",
                     (unsigned long long)bonsai_txn_id(t),
                     (unsigned long long)(t0 + round));
        cr_assert(snapshot_is_round(t, m, round, why, sizeof why) == 0,
                  "round %llu: %s", (unsigned long long)round, why);
        bonsai_txn_abort(t);
        tu_release(&w); /* the next round */
        cr_assert(tu_report(&w, "a round") == 0);
    }
    /* a value read without a transaction comes from the last commit */
    bonsai_val v;
    uint8_t want[VAL_BYTES];
    TU_OK(bonsai_get_u64(NULL, m, 1, &v));
    value_of(1, version_after(1, 4), want);
    cr_assert(v.size == VAL_BYTES && memcmp(v.data, want, VAL_BYTES) == 0,
              "a get without a transaction missed the last commit");
    bonsai_stat st;
    TU_OK(bonsai_db_stat(r, &st));
    cr_assert_eq(st.txn_id, t0 + 4, "a reader's stat names txn %llu",
                 (unsigned long long)st.txn_id);
    cr_assert(problems_of(r) == 0, "verify of the store being written "
                                    "found problems");
    TU_OK(bonsai_close(r));
    close(w.to);
    cr_assert(tu_report(&w, "its close") == 0);
    tu_reap(&w);
}

/* ---- (b) a long snapshot stays intact ------------------------------------ */

Test(xreaders, long_snapshot_survives_hundreds_of_commits)
{
    const char *path = tu_path("b.db");
    uint64_t t0 = make_store(path);
    uint64_t rounds = tu_scaled(300, 60);

    bonsai_options o = reader_options();
    bonsai_db *r = tu_open(path, &o);
    bonsai_map m = tu_map_open(r, NULL, "m", BONSAI_KEY_U64);
    bonsai_txn *old;
    TU_OK(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &old));
    cr_assert_eq(bonsai_txn_id(old), t0);
    char why[256];
    cr_assert(snapshot_is_round(old, m, 0, why, sizeof why) == 0, "%s", why);

    tu_child w = spawn(churn_child, path, rounds);
    cr_assert(tu_report(&w, "its open") == 0);
    /* while it commits: the old snapshot holds, a second one taken on
     * the way holds, and every fresh snapshot is some whole commit */
    bonsai_txn *mid = NULL;
    uint64_t mid_round = 0, checks = 0;
    while (!tu_has_report(&w) || checks < 3) {
        cr_assert(snapshot_is_round(old, m, 0, why, sizeof why) == 0,
                  "the first snapshot changed under the writer: %s", why);
        bonsai_txn *t;
        TU_OK(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &t));
        uint64_t round = bonsai_txn_id(t) - t0;
        cr_assert(round <= rounds);
        cr_assert(snapshot_is_round(t, m, round, why, sizeof why) == 0,
                  "a fresh snapshot of round %llu: %s",
                  (unsigned long long)round, why);
        if (!mid && round > 0) {
            mid = t;
            mid_round = round;
        } else {
            bonsai_txn_abort(t);
        }
        checks++;
    }
    int64_t rc = tu_report(&w, "its rounds");
    cr_assert(rc == 0, "the writer's rounds -> %s", tu_err((int)rc));
    cr_assert(tu_report(&w, "its verify") == 0, "the writer's store has "
                                             "problems");
    cr_assert(tu_report(&w, "its close") == 0);
    tu_reap(&w);

    cr_assert(snapshot_is_round(old, m, 0, why, sizeof why) == 0,
              "the first snapshot, after the writer: %s", why);
    if (mid)
        cr_assert(snapshot_is_round(mid, m, mid_round, why, sizeof why) == 0,
                  "the snapshot of round %llu, after the writer: %s",
                  (unsigned long long)mid_round, why);
    cr_log_info("%llu checks while the writer ran %llu rounds",
                (unsigned long long)checks, (unsigned long long)rounds);
    bonsai_txn_abort(old);
    bonsai_txn_abort(mid);
    cr_assert(problems_of(r) == 0);
    TU_OK(bonsai_close(r));

    bonsai_options wo = writer_options();
    bonsai_db *db = tu_open(path, &wo);
    m = tu_map_open(db, NULL, "m", BONSAI_KEY_U64);
    cr_assert(snapshot_is_round(NULL, m, rounds, why, sizeof why) == 0, "%s",
              why);
    cr_assert(problems_of(db) == 0);
    TU_OK(bonsai_close(db));
}

/* ---- (c) a dead reader lets go --------------------------------------------- */

Test(xreaders, killed_reader_does_not_hold_space_forever)
{
    const char *path = tu_path("c.db");
    make_store(path);
    tu_child rd = spawn(snapshot_child, path, 0);
    cr_assert(tu_report(&rd, "its open") == 0);
    cr_assert(tu_report(&rd, "its snapshot") > 0);

    bonsai_options o = writer_options();
    bonsai_db *db = tu_open(path, &o);
    uint64_t start = size_of(path);
    TU_OK(run_rounds(db, 1, 100));
    uint64_t held = size_of(path);
    /* the reader's snapshot keeps every page it reaches: the file grows */
    cr_assert(held >= start + (UINT64_C(2) << 20),
              "with a reader holding round 0 the file went from %llu to "
              "only %llu bytes in 100 rounds",
              (unsigned long long)start, (unsigned long long)held);
    /* and the writer's stat shows it, as bonsai-stat prints it */
    bonsai_space sp;
    TU_OK(bonsai_space_stat(db, &sp));
    cr_assert(sp.shared_readers && sp.all_readers == 1 &&
                  sp.txn_id - sp.oldest_any >= 100,
              "stat: shared %d, %llu snapshots, the oldest %llu behind",
              sp.shared_readers, (unsigned long long)sp.all_readers,
              (unsigned long long)(sp.txn_id - sp.oldest_any));

    kill(rd.pid, SIGKILL);
    int st;
    while (waitpid(rd.pid, &st, 0) < 0 && errno == EINTR)
        ;
    cr_assert(WIFSIGNALED(st));
    close(rd.to);
    close(rd.from);

    TU_OK(bonsai_space_stat(db, &sp));
    cr_assert(sp.all_readers == 0, "a dead reader's snapshot still counted");
    TU_OK(run_rounds(db, 101, 110)); /* pages it held become free */
    uint64_t after = size_of(path);
    TU_OK(run_rounds(db, 111, 400));
    uint64_t later = size_of(path);
    cr_log_info("file: %llu at start, %llu after 100 rounds with the reader, "
                "%llu and %llu after 10 and 300 rounds without",
                (unsigned long long)start, (unsigned long long)held,
                (unsigned long long)after, (unsigned long long)later);
    cr_assert(later == after,
              "the file grew from %llu to %llu bytes in 290 rounds after "
              "the reader died",
              (unsigned long long)after, (unsigned long long)later);
    cr_assert(problems_of(db) == 0);
    TU_OK(bonsai_close(db));
}

/* ---- (e) a writer that opens after the snapshot began -------------------- */

Test(xreaders, writer_opening_later_keeps_an_old_snapshot)
{
    const char *path = tu_path("e.db");
    uint64_t t0 = make_store(path);
    tu_child rd = spawn(snapshot_child, path, 0);
    cr_assert(tu_report(&rd, "its open") == 0);
    cr_assert_eq(tu_report(&rd, "its snapshot"), (int64_t)t0);

    /* three writers one after another: each opens with the reader's
     * snapshot older than the last commit, and must find it in the lock
     * file, since the previous writer's pending frees died with it */
    bonsai_options o = writer_options();
    for (uint64_t w = 0; w < 3; w++) {
        bonsai_db *db = tu_open(path, &o);
        TU_OK(run_rounds(db, 1 + w * 50, 50 + w * 50));
        cr_assert(problems_of(db) == 0);
        TU_OK(bonsai_close(db));
    }
    tu_release(&rd);
    cr_assert(tu_report(&rd, "its check") == 0,
              "the reader's snapshot of round 0 changed while writers that "
              "opened after it committed");
    cr_assert(tu_report(&rd, "its close") == 0);
    tu_reap(&rd);

    /* once it is gone, a writer reuses those pages */
    bonsai_db *db = tu_open(path, &o);
    uint64_t before = size_of(path);
    TU_OK(run_rounds(db, 151, 300));
    cr_assert_eq(size_of(path), before, "the file grew with no reader left");
    char why[256];
    bonsai_map m = tu_map_open(db, NULL, "m", BONSAI_KEY_U64);
    cr_assert(snapshot_is_round(NULL, m, 300, why, sizeof why) == 0, "%s",
              why);
    TU_OK(bonsai_close(db));
}

/* A writer opening while a reader in another process holds an old
 * snapshot, in this process's own read-only handle. */
Test(xreaders, writer_reopened_in_process_keeps_a_read_only_handles_snapshot)
{
    const char *path = tu_path("e2.db");
    uint64_t t0 = make_store(path);
    bonsai_options ro = reader_options(), o = writer_options();
    bonsai_db *r = tu_open(path, &ro);
    bonsai_map rm = tu_map_open(r, NULL, "m", BONSAI_KEY_U64);
    bonsai_db *db = tu_open(path, &o);
    TU_OK(run_rounds(db, 1, 20));
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &t));
    cr_assert_eq(bonsai_txn_id(t), t0 + 20);
    TU_OK(bonsai_close(db));
    char why[256];
    for (uint64_t w = 0; w < 3; w++) {
        db = tu_open(path, &o);
        TU_OK(run_rounds(db, 21 + w * 40, 60 + w * 40));
        TU_OK(bonsai_close(db));
        cr_assert(snapshot_is_round(t, rm, 20, why, sizeof why) == 0,
                  "after writer %llu: %s", (unsigned long long)w, why);
    }
    bonsai_txn_abort(t);
    TU_OK(bonsai_close(r));
}

/* ---- (d) the tools on a store being written -------------------------------- */

/* s quoted for sh: a short name for the many command lines below. */
static const char *q(const char *s)
{
    return tu_quote(s);
}

static const char *tool(const char *name)
{
    return q(tu_program(name));
}

/* A copy holds exactly the state of some commit the writer made: keys
 * 0..k of "g" for one k >= first, each with the value of version 0. */
static uint64_t assert_some_commit(const char *path, uint64_t first,
                                   const char *what)
{
    bonsai_options o = reader_options();
    bonsai_db *db = tu_open(path, &o);
    cr_assert(problems_of(db) == 0, "%s: verify found problems", what);
    bonsai_map g = tu_map_open(db, NULL, "g", BONSAI_KEY_U64);
    tm_model got;
    tm_init(&got, BONSAI_KEY_U64);
    char why[256];
    TU_OK(tu_walk(NULL, g, &got, why, sizeof why));
    cr_assert(got.n > first, "%s: %zu keys, fewer than the first commit's",
              what, got.n);
    uint8_t v[VAL_BYTES];
    for (size_t i = 0; i < got.n; i++) {
        value_of(i, 0, v);
        cr_assert(tu_u64_of(got.e[i].key) == i && got.e[i].vlen == VAL_BYTES &&
                      memcmp(got.e[i].val, v, VAL_BYTES) == 0,
                  "%s: entry %zu is not key %zu with its value: not a "
                  "committed state",
                  what, i, i);
    }
    uint64_t n = got.n;
    tm_free(&got);
    TU_OK(bonsai_close(db));
    return n;
}

/* Writer of "g": commit i holds keys 0..first+i (each commit adds one key
 * and rewrites every seventh key, so freed pages are reused), until the
 * parent writes a byte; then reports its commits and closes. */
static void growing_child(const char *path, int up, int down, uint64_t first)
{
    bonsai_options o = writer_options();
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, &o, &db);
    tu_put_int(up, rc);
    if (rc)
        return;
    bonsai_map g;
    rc = bonsai_map_open(db, NULL, "g", &g, NULL);
    int fl = fcntl(down, F_GETFL);
    fcntl(down, F_SETFL, fl | O_NONBLOCK);
    uint8_t v[VAL_BYTES];
    int64_t commits = 0;
    for (uint64_t k = first + 1; rc == 0; k++) {
        char c;
        if (read(down, &c, 1) != -1 || errno != EAGAIN)
            break; /* a byte or EOF: stop */
        bonsai_txn *t;
        if ((rc = bonsai_txn_begin(db, 0, &t)))
            break;
        /* j == k is the new key */
        for (uint64_t j = k % 7; j <= k && rc == 0; j += 7) {
            value_of(j, 0, v);
            bonsai_val val = tu_val(v, sizeof v);
            if (j < k)
                rc = bonsai_del_u64(t, g, j);
            if (rc == 0)
                rc = bonsai_put_u64(t, g, j, &val, 0);
        }
        rc = rc ? (bonsai_txn_abort(t), rc) : bonsai_txn_commit(t);
        commits++;
    }
    tu_put_int(up, rc ? rc : commits);
    tu_put_int(up, bonsai_close(db));
}

Test(xreaders, tools_read_a_store_being_written)
{
    const char *path = tu_path("d.db");
    uint64_t first = 2000;
    {
        bonsai_options o = writer_options();
        o.create = 1;
        bonsai_db *db = tu_open(path, &o);
        bonsai_map g = tu_map_create(db, NULL, "g", BONSAI_KEY_U64);
        bonsai_txn *t;
        TU_OK(bonsai_txn_begin(db, 0, &t));
        uint8_t v[VAL_BYTES];
        for (uint64_t k = 0; k <= first; k++) {
            value_of(k, 0, v);
            bonsai_val val = tu_val(v, sizeof v);
            TU_OK(bonsai_put_u64(t, g, k, &val, 0));
        }
        TU_OK(bonsai_txn_commit(t));
        TU_OK(bonsai_close(db));
    }
    tu_child w = spawn(growing_child, path, first);
    cr_assert(tu_report(&w, "its open") == 0);

    const char *dump = tu_path("d.dump"), *loaded = tu_path("loaded.db");
    const char *compacted = tu_path("compacted.db");
    uint64_t seen[4];
    for (int i = 0; i < 2; i++) {
        unlink(loaded);
        cr_assert_eq(tu_sh("%s -f %s %s", tool("bonsai-dump"), q(dump),
                         q(path)), 0, "bonsai-dump of a store being written");
        cr_assert_eq(tu_sh("%s -f %s %s", tool("bonsai-load"), q(dump),
                         q(loaded)), 0, "bonsai-load of that dump");
        seen[2 * i] = assert_some_commit(loaded, first, "the dump");
        cr_assert_eq(tu_sh("%s --quiet %s %s", tool("bonsai-compact"), q(path),
                         q(compacted)), 0,
                     "bonsai-compact of a store being written");
        seen[2 * i + 1] = assert_some_commit(compacted, first, "the copy");
        cr_assert_eq(tu_sh("%s %s >/dev/null", tool("bonsai-verify"), q(path)),
                     0, "bonsai-verify of a store being written");
        cr_assert_eq(tu_sh("%s %s >/dev/null", tool("bonsai-stat"), q(path)),
                     0, "bonsai-stat of a store being written");
    }
    tu_release(&w);
    int64_t commits = tu_report(&w, "its commits");
    cr_assert(commits > 0, "the writer -> %s", tu_err((int)commits));
    cr_assert(tu_report(&w, "its close") == 0);
    tu_reap(&w);
    cr_log_info("the writer made %lld commits; the tools saw %llu, %llu, "
                "%llu and %llu keys",
                (long long)commits, (unsigned long long)seen[0],
                (unsigned long long)seen[1], (unsigned long long)seen[2],
                (unsigned long long)seen[3]);
    uint64_t last = assert_some_commit(path, first, "the store");
    cr_assert_eq(last, first + 1 + (uint64_t)commits);
}

/* ---- the lock file ---------------------------------------------------------- */

static const char *lock_path(const char *path)
{
    static char buf[PATH_MAX + sizeof "-lock"];
    snprintf(buf, sizeof buf, "%s-lock", path);
    return buf;
}

static int try_open(const char *path, int read_only, int transactions,
                    bonsai_db **db)
{
    bonsai_options o = read_only ? reader_options() : writer_options();
    o.transactions = transactions;
    *db = NULL;
    return bonsai_open(path, &o, db);
}

Test(xreaders, lock_file_sits_beside_the_store_with_its_permissions)
{
    const char *path = tu_path("p.db");
    make_store(path);
    cr_assert(chmod(path, 0640) == 0);
    unlink(lock_path(path));
    mode_t mask = umask(022);
    umask(mask);
    bonsai_db *r;
    TU_OK(try_open(path, 1, -1, &r));
    struct stat st;
    cr_assert(stat(lock_path(path), &st) == 0, "no %s: %s", lock_path(path),
              strerror(errno));
    cr_assert_eq(st.st_mode & 0777, 0640 & ~mask,
                 "the lock file has mode %o", st.st_mode & 0777);
    TU_OK(bonsai_close(r));
}

Test(xreaders, damaged_lock_file_is_a_clear_error)
{
    const char *path = tu_path("l.db");
    make_store(path);
    /* another file, and a header cut short */
    static const char garbage[2][9] = {"not bonsa", "BSLK\x01\0\0\0\x7f"};
    for (size_t i = 0; i < 2; i++) {
        FILE *f = fopen(lock_path(path), "w");
        cr_assert(f);
        cr_assert(fwrite(garbage[i], 1, sizeof garbage[i], f) ==
                  sizeof garbage[i]);
        fclose(f);
        bonsai_db *db;
        TU_RC(try_open(path, 1, -1, &db), BONSAI_LOCKFILE);
        TU_RC(try_open(path, 0, -1, &db), BONSAI_LOCKFILE);
    }
    /* a lock file whose creator died before writing its header is made
     * afresh */
    FILE *f = fopen(lock_path(path), "w");
    cr_assert(f);
    fclose(f);
    bonsai_db *db;
    TU_OK(try_open(path, 1, -1, &db));
    TU_OK(bonsai_close(db));
    /* removed while nothing has the store open: made again */
    cr_assert(unlink(lock_path(path)) == 0);
    TU_OK(try_open(path, 0, -1, &db));
    TU_OK(bonsai_close(db));
}

/* ---- a lock file bonsai did not make ------------------------------------ */

/* The bytes of a regular file (NULL for anything else), for comparing. */
static char *bytes_of(const char *path, size_t *len)
{
    struct stat st;
    *len = 0;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL;
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    char *p = malloc((size_t)st.st_size + 1);
    cr_assert(p);
    *len = fread(p, 1, (size_t)st.st_size, f);
    fclose(f);
    cr_assert_eq(*len, (size_t)st.st_size, "%s: short read", path);
    return p;
}

static void zeros_file(const char *path, size_t n)
{
    char *z = calloc(1, n + 1);
    FILE *f = fopen(path, "wb");
    cr_assert(z && f, "%s: %s", path, strerror(errno));
    cr_assert(fwrite(z, 1, n, f) == n && fclose(f) == 0);
    free(z);
}

/* Opens path read-only and read-write and expects BONSAI_LOCKFILE both
 * times, with what (PATH-lock, or the file a link there names) left
 * exactly as it was: same type, same bytes, same inode. */
static void refused_unwritten(const char *path, const char *what,
                              const char *ctx)
{
    struct stat before, after;
    int existed = lstat(what, &before) == 0;
    size_t n0, n1;
    char *b0 = bytes_of(what, &n0);
    for (int ro = 1; ro >= 0; ro--) {
        bonsai_db *db;
        int rc = try_open(path, ro, -1, &db);
        if (rc == 0)
            bonsai_close(db);
        cr_assert(rc == BONSAI_LOCKFILE, "%s, %s open: %s, expected "
                  "BONSAI_LOCKFILE", ctx, ro ? "read-only" : "read-write",
                  tu_err(rc));
    }
    int exists = lstat(what, &after) == 0;
    cr_assert_eq(exists, existed, "%s: %s was %s, now %s", ctx, what,
                 existed ? "there" : "missing", exists ? "there" : "missing");
    char *b1 = bytes_of(what, &n1);
    if (existed) {
        cr_assert(before.st_ino == after.st_ino &&
                  (before.st_mode & S_IFMT) == (after.st_mode & S_IFMT),
                  "%s: %s was replaced", ctx, what);
        cr_assert(n0 == n1 && (!b0 || memcmp(b0, b1, n0) == 0),
                  "%s: %s was written (%zu bytes, now %zu)", ctx, what, n0,
                  n1);
    }
    free(b0);
    free(b1);
}

Test(xreaders, foreign_lock_file_is_refused_and_never_written)
{
    const char *path = tu_path("f.db"), *lock = lock_path(path);
    const char *victim = tu_path("victim");
    make_store(path);
    cr_assert(unlink(lock) == 0);
    size_t table = 8192; /* a new table (format.md, "The lock file") */
    /* a symbolic link, to a file of zeros (of the table's size, and
     * another), to nothing at all, and to a valid table */
    size_t sizes[] = {table, 100000};
    for (size_t i = 0; i < 2; i++) {
        zeros_file(victim, sizes[i]);
        cr_assert(symlink(victim, lock) == 0);
        refused_unwritten(path, victim, "a link to a file of zeros");
        refused_unwritten(path, lock, "a link to a file of zeros");
        cr_assert(unlink(lock) == 0 && unlink(victim) == 0);
    }
    cr_assert(symlink(victim, lock) == 0);
    refused_unwritten(path, victim, "a dangling link");
    cr_assert(unlink(lock) == 0);
    bonsai_db *db;
    TU_OK(try_open(path, 1, -1, &db)); /* makes a valid table */
    TU_OK(bonsai_close(db));
    cr_assert(rename(lock, victim) == 0 && symlink(victim, lock) == 0);
    refused_unwritten(path, victim, "a link to a valid table");
    cr_assert(unlink(lock) == 0 && unlink(victim) == 0);

    /* not a regular file */
    cr_assert(mkfifo(lock, 0644) == 0);
    refused_unwritten(path, lock, "a FIFO");
    cr_assert(unlink(lock) == 0);
    cr_assert(mkdir(lock, 0755) == 0);
    refused_unwritten(path, lock, "a directory");
    cr_assert(rmdir(lock) == 0);

    /* a regular file of zeros that no creation of a table leaves: of
     * another size, or with a second name */
    size_t foreign[] = {1, 64, 100, 4096, table - 1, table + 1, 100000};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        zeros_file(lock, foreign[i]);
        refused_unwritten(path, lock, "a regular file of zeros");
        cr_assert(unlink(lock) == 0);
    }
    zeros_file(victim, table);
    cr_assert(link(victim, lock) == 0);
    refused_unwritten(path, victim, "a hard link to a file of zeros");
    cr_assert(unlink(lock) == 0 && unlink(victim) == 0);
    /* the table's size, zero but for a byte past the header */
    zeros_file(lock, table);
    int fd = open(lock, O_WRONLY);
    cr_assert(fd >= 0 && pwrite(fd, "x", 1, 4000) == 1 && close(fd) == 0);
    refused_unwritten(path, lock, "a table-sized file, not all zero");
    cr_assert(unlink(lock) == 0);

    /* what an unfinished creation leaves is made afresh: an empty file
     * (as before), and the table's blocks reserved but no header yet */
    zeros_file(lock, table);
    TU_OK(try_open(path, 1, -1, &db));
    TU_OK(bonsai_close(db));
    size_t n;
    char *t = bytes_of(lock, &n);
    cr_assert(t && n == table && memcmp(t, "BSLK", 4) == 0,
              "the unfinished table was not made afresh");
    free(t);
}

/* A reader in the lock file and a writer without transactions (which
 * updates nodes in place) exclude each other. */
Test(xreaders, no_transaction_writer_and_readers_exclude_each_other)
{
    const char *path = tu_path("n.db");
    make_store(path);
    bonsai_db *r, *w;
    TU_OK(try_open(path, 1, -1, &r));
    TU_RC(try_open(path, 0, 0, &w), BONSAI_BUSY);
    TU_OK(bonsai_close(r));
    TU_OK(try_open(path, 0, 0, &w));
    TU_RC(try_open(path, 1, -1, &r), BONSAI_BUSY);
    /* a read-only handle without transactions has no snapshots either */
    TU_RC(try_open(path, 1, 0, &r), BONSAI_BUSY);
    TU_OK(bonsai_close(w));
    TU_OK(try_open(path, 0, -1, &w));
    TU_RC(try_open(path, 1, 0, &r), BONSAI_BUSY);
    TU_OK(try_open(path, 1, -1, &r));
    TU_OK(bonsai_close(r));
    TU_OK(bonsai_close(w));
}

/* Without a usable lock file (here: a store file nobody may write)
 * readers and a writer exclude each other, as before lock files. */
Test(xreaders, without_a_lock_file_readers_and_writer_exclude_each_other)
{
    const char *path = tu_path("f.db");
    make_store(path);
    unlink(lock_path(path));
    cr_assert(chmod(path, 0444) == 0);
    bonsai_db *r, *r2, *w;
    TU_OK(try_open(path, 1, -1, &r));
    cr_assert(access(lock_path(path), F_OK) != 0,
              "a lock file was made for a store nobody may write");
    TU_OK(try_open(path, 1, -1, &r2)); /* readers share */
    int rc = try_open(path, 0, -1, &w);
    /* a writer: BONSAI_READONLY for most users, BONSAI_BUSY for root */
    cr_assert(rc == BONSAI_BUSY || rc == BONSAI_READONLY,
              "a writer beside readers without a lock file -> %s",
              tu_err(rc));
    TU_OK(bonsai_close(r));
    TU_OK(bonsai_close(r2));
    if (try_open(path, 0, -1, &w) == 0) {
        TU_RC(try_open(path, 1, -1, &r), BONSAI_BUSY);
        TU_OK(bonsai_close(w));
    }
}

/* Read snapshots of one handle at different commits each hold a slot;
 * many snapshots of the same commit share one. */
Test(xreaders, snapshots_of_one_handle_at_several_commits)
{
    const char *path = tu_path("s.db");
    uint64_t t0 = make_store(path);
    bonsai_options ro = reader_options(), o = writer_options();
    bonsai_db *r = tu_open(path, &ro);
    bonsai_map rm = tu_map_open(r, NULL, "m", BONSAI_KEY_U64);
    bonsai_db *db = tu_open(path, &o);
    enum { SNAPS = 200 }; /* more than the table's slots: shared ones */
    bonsai_txn *t[SNAPS];
    for (int i = 0; i < SNAPS; i++) {
        if (i % 40 == 0)
            TU_OK(run_rounds(db, (uint64_t)i / 40 * 10 + 1,
                             (uint64_t)i / 40 * 10 + 10));
        TU_OK(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &t[i]));
        cr_assert_eq(bonsai_txn_id(t[i]), t0 + (uint64_t)(i / 40 + 1) * 10);
    }
    TU_OK(run_rounds(db, 51, 150));
    char why[256];
    for (int i = 0; i < SNAPS; i++) {
        if (i % 40 == 0 || i % 40 == 39)
            cr_assert(snapshot_is_round(t[i], rm, (uint64_t)(i / 40 + 1) * 10,
                                        why, sizeof why) == 0,
                      "snapshot %d: %s", i, why);
        bonsai_txn_abort(t[i]);
    }
    TU_OK(bonsai_close(db));
    TU_OK(bonsai_close(r));
}

/* Snapshots at as many distinct commits as the table has slots; one more
 * is refused cleanly, and works again once one ends. */
Test(xreaders, reader_slots_run_out_cleanly)
{
    const char *path = tu_path("full.db");
    make_store(path);
    bonsai_options ro = reader_options(), o = writer_options();
    bonsai_db *r = tu_open(path, &ro);
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_open(db, NULL, "m", BONSAI_KEY_U64);
    enum { SLOTS = 127 }; /* format.md, "The lock file" */
    bonsai_txn *t[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        TU_OK(bonsai_put_u64(NULL, m, NKEYS + (uint64_t)i, NULL, 0));
        TU_OK(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &t[i]));
    }
    TU_OK(bonsai_put_u64(NULL, m, 2 * NKEYS, NULL, 0));
    bonsai_txn *more;
    TU_RC(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &more),
          BONSAI_READERS_FULL);
    /* a snapshot of a commit already held shares its slot */
    bonsai_txn_abort(t[SLOTS - 1]);
    TU_OK(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &more));
    bonsai_txn *same;
    TU_OK(bonsai_txn_begin(r, BONSAI_TXN_RDONLY, &same));
    cr_assert_eq(bonsai_txn_id(same), bonsai_txn_id(more));
    bonsai_val v;
    TU_OK(bonsai_get_u64(same, tu_map_open(r, NULL, "m", BONSAI_KEY_U64),
                         2 * NKEYS, &v));
    bonsai_txn_abort(same);
    bonsai_txn_abort(more);
    for (int i = 0; i < SLOTS - 1; i++)
        bonsai_txn_abort(t[i]);
    TU_OK(bonsai_close(db));
    TU_OK(bonsai_close(r));
}

/* ---- threads of a reader process beside a writer process ------------------ */

typedef struct reader_thread {
    bonsai_db *db;
    bonsai_map m;
    uint64_t t0, rounds;
    volatile int *stop;
    uint64_t checks;
    int failed;
    char why[256];
} reader_thread;

/* Fresh snapshots until told to stop, each compared with its round; one
 * is kept across many commits.  No Criterion in threads: results are
 * left in the struct. */
static void *read_snapshots(void *arg)
{
    reader_thread *rt = arg;
    bonsai_txn *kept = NULL;
    uint64_t kept_round = 0;
    while (!rt->failed && (!*rt->stop || rt->checks < 3)) {
        bonsai_txn *t;
        int rc = bonsai_txn_begin(rt->db, BONSAI_TXN_RDONLY, &t);
        if (rc) {
            snprintf(rt->why, sizeof rt->why, "begin -> %s", tu_err(rc));
            rt->failed = 1;
            break;
        }
        uint64_t round = bonsai_txn_id(t) - rt->t0;
        if (round > rt->rounds ||
            snapshot_is_round(t, rt->m, round, rt->why, sizeof rt->why))
            rt->failed = 1;
        if (!kept) {
            kept = t;
            kept_round = round;
        } else {
            bonsai_txn_abort(t);
        }
        rt->checks++;
    }
    if (kept && !rt->failed &&
        snapshot_is_round(kept, rt->m, kept_round, rt->why, sizeof rt->why))
        rt->failed = 1;
    bonsai_txn_abort(kept);
    return NULL;
}

Test(xreaders, reader_threads_beside_a_writer_process)
{
    const char *path = tu_path("t.db");
    uint64_t t0 = make_store(path);
    uint64_t rounds = tu_scaled(300, 60);
    bonsai_options o = reader_options();
    bonsai_db *r = tu_open(path, &o);
    bonsai_map m = tu_map_open(r, NULL, "m", BONSAI_KEY_U64);
    tu_child w = spawn(churn_child, path, rounds);
    cr_assert(tu_report(&w, "its open") == 0);
    volatile int stop = 0;
    enum { THREADS = 3 };
    reader_thread rt[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        rt[i] = (reader_thread){.db = r, .m = m, .t0 = t0, .rounds = rounds,
                                .stop = &stop};
        cr_assert(pthread_create(&th[i], NULL, read_snapshots, &rt[i]) == 0);
    }
    int64_t rc = tu_report(&w, "its rounds");
    stop = 1;
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    cr_assert(rc == 0, "the writer's rounds -> %s", tu_err((int)rc));
    cr_assert(tu_report(&w, "its verify") == 0);
    cr_assert(tu_report(&w, "its close") == 0);
    tu_reap(&w);
    for (int i = 0; i < THREADS; i++)
        cr_assert(!rt[i].failed, "reader thread %d, check %llu: %s", i,
                  (unsigned long long)rt[i].checks, rt[i].why);
    TU_OK(bonsai_close(r));
}

/* A reader that opens the store through a symbolic link shares the
 * writer's lock file, so its snapshot is kept. */
Test(xreaders, reader_through_a_symbolic_link_is_kept)
{
    const char *path = tu_path("real.db");
    char link[PATH_MAX];
    snprintf(link, sizeof link, "%s", tu_path("link.db"));
    make_store(path);
    cr_assert(symlink(path, link) == 0, "symlink: %s", strerror(errno));
    tu_child rd = spawn(snapshot_child, link, 0);
    cr_assert(tu_report(&rd, "its open") == 0);
    cr_assert(tu_report(&rd, "its snapshot") > 0);
    bonsai_options o = writer_options();
    for (uint64_t w = 0; w < 2; w++) {
        bonsai_db *db = tu_open(path, &o);
        TU_OK(run_rounds(db, 1 + w * 50, 50 + w * 50));
        TU_OK(bonsai_close(db));
    }
    tu_release(&rd);
    cr_assert(tu_report(&rd, "its check") == 0,
              "a snapshot read through a link changed under the writer");
    cr_assert(tu_report(&rd, "its close") == 0);
    tu_reap(&rd);
    cr_assert(access(lock_path(link), F_OK) != 0,
              "a second lock file was made beside the link");
}

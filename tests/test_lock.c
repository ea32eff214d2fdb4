/* SPDX-License-Identifier: MIT */
/*
 * test_lock.c - one writer per file: a second read-write open, from another
 * process or from this one, gets BONSAI_BUSY until the first closes (or
 * its process dies); read-only opens work beside a writer (through the
 * lock file PATH-lock, test_xreaders.c has more), and do not block each
 * other.
 *
 * Other processes are forked children.  A child never uses Criterion: it
 * reports each bonsai result as an int through a pipe and leaves with
 * _exit.  A child that waits for the parent reads a pipe whose end the
 * parent holds, so it also ends if the parent dies.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bonsai.h"
#include "util.h"

/* .timeout: a hang guard (a child or a lock that never lets go), not a
 * timing assertion */
TestSuite(lock, .init = tu_setup, .fini = tu_teardown, .timeout = 300);

#define KEY_PARENT 7
#define KEY_CHILD 42

/* ---- children ----------------------------------------------------------- */

enum child_mode {
    C_OPEN_CLOSE, /* open, report, close, report the close */
    C_READ,       /* open, read KEY_PARENT, report the get, close */
    C_WRITE,      /* open, write KEY_CHILD (autocommit), report, close */
    C_HOLD,       /* open, report, wait for the parent, close, report */
    C_CRASH,      /* open, write KEY_CHILD, report, wait, _exit unclosed */
};

static int child_work(bonsai_db *db, enum child_mode mode)
{
    bonsai_map m = NULL;
    int rc;
    if (mode == C_READ) {
        rc = bonsai_map_open(db, NULL, "m", &m, NULL);
        if (rc == 0) {
            bonsai_val v;
            rc = bonsai_get_u64(NULL, m, KEY_PARENT, &v);
        }
        return rc;
    }
    if (mode == C_WRITE || mode == C_CRASH) {
        rc = bonsai_map_open(db, NULL, "m", &m, NULL);
        if (rc == 0)
            rc = bonsai_put_u64(NULL, m, KEY_CHILD, NULL, 0);
        return rc;
    }
    return 0;
}

typedef struct child_args {
    const char *path;
    int read_only;
    enum child_mode mode;
} child_args;

static void child_main(int up, int down, void *ctx)
{
    const child_args *a = ctx;
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = a->read_only;
    o.create = 0;
    bonsai_db *db = NULL;
    int rc = bonsai_open(a->path, &o, &db);
    tu_put_int(up, rc);
    int rc2 = rc ? rc : child_work(db, a->mode);
    if (a->mode == C_READ || a->mode == C_WRITE || a->mode == C_CRASH)
        tu_put_int(up, rc2);
    if (a->mode == C_HOLD || a->mode == C_CRASH)
        tu_wait_parent(down); /* a byte or EOF */
    if (a->mode == C_CRASH)
        _exit(0); /* no close: as if the process died */
    int rc3 = rc ? 0 : bonsai_close(db);
    tu_put_int(up, rc3);
}

static tu_child spawn(const char *path, int read_only, enum child_mode mode)
{
    child_args a = {path, read_only, mode};
    return tu_spawn(child_main, &a);
}

/* The next result the child reports. */
static int child_report(tu_child *c, const char *what)
{
    return (int)tu_report(c, what);
}

/* ---- helpers ------------------------------------------------------------ */

/* A store with map "m" holding KEY_PARENT; closed. */
static const char *make_store(void)
{
    const char *path = tu_path("lock.db");
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    TU_OK(bonsai_put_u64(NULL, m, KEY_PARENT, NULL, 0));
    TU_OK(bonsai_close(db));
    return path;
}

static bonsai_db *open_rw(const char *path)
{
    return tu_open(path, NULL);
}

static int try_open(const char *path, int read_only, bonsai_db **db)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = read_only;
    o.create = 0;
    *db = NULL;
    return bonsai_open(path, &o, db);
}

/* The store works: KEY_PARENT is there, and (rw) a write commits. */
static void store_works(bonsai_db *db, int write)
{
    bonsai_map m = tu_map_open(db, NULL, "m", BONSAI_KEY_U64);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    bonsai_val v;
    TU_OK(bonsai_get_u64(t, m, KEY_PARENT, &v));
    bonsai_txn_abort(t);
    if (write) {
        TU_OK(bonsai_put_u64(NULL, m, 1000, NULL, 0));
        TU_OK(bonsai_del_u64(NULL, m, 1000));
    }
}

static bool has_key(bonsai_db *db, uint64_t k)
{
    bonsai_map m = tu_map_open(db, NULL, "m", BONSAI_KEY_U64);
    bonsai_val v;
    int rc = bonsai_get_u64(NULL, m, k, &v);
    cr_assert(rc == 0 || rc == BONSAI_NOTFOUND, "get -> %s", tu_err(rc));
    return rc == 0;
}

/* ---- tests -------------------------------------------------------------- */

Test(lock, second_writer_in_another_process_is_busy)
{
    const char *path = make_store();
    bonsai_db *db = open_rw(path);
    tu_child c = spawn(path, 0, C_OPEN_CLOSE);
    int rc = child_report(&c, "its open");
    cr_assert(rc == BONSAI_BUSY,
              "a second read-write open in another process -> %s, expected "
              "BONSAI_BUSY",
              tu_err(rc));
    child_report(&c, "its close");
    tu_reap(&c);
    /* the first writer is unharmed */
    store_works(db, 1);
    TU_OK(bonsai_close(db));

    /* once it closed, another process can open and write */
    c = spawn(path, 0, C_WRITE);
    rc = child_report(&c, "its open");
    cr_assert(rc == 0, "open after the writer closed -> %s", tu_err(rc));
    rc = child_report(&c, "its write");
    cr_assert(rc == 0, "the child's write -> %s", tu_err(rc));
    rc = child_report(&c, "its close");
    cr_assert(rc == 0, "the child's close -> %s", tu_err(rc));
    tu_reap(&c);
    db = open_rw(path);
    cr_assert(has_key(db, KEY_CHILD), "the child's commit is missing");
    cr_assert(has_key(db, KEY_PARENT));
    TU_OK(bonsai_close(db));
}

Test(lock, second_writer_in_this_process_is_busy)
{
    const char *path = make_store();
    bonsai_db *db = open_rw(path);
    bonsai_db *db2 = NULL;
    int rc = try_open(path, 0, &db2);
    cr_assert(rc == BONSAI_BUSY,
              "a second read-write open in the same process -> %s, expected "
              "BONSAI_BUSY",
              tu_err(rc));
    /* again: a refused open leaves nothing behind */
    rc = try_open(path, 0, &db2);
    cr_assert(rc == BONSAI_BUSY, "third open -> %s", tu_err(rc));
    store_works(db, 1);
    TU_OK(bonsai_close(db));
    /* free again, for this process and then another */
    db = open_rw(path);
    store_works(db, 1);
    TU_OK(bonsai_close(db));
    tu_child c = spawn(path, 0, C_OPEN_CLOSE);
    rc = child_report(&c, "its open");
    cr_assert(rc == 0, "open in a child after close -> %s", tu_err(rc));
    child_report(&c, "its close");
    tu_reap(&c);
}

Test(lock, writer_in_another_process_blocks_this_one)
{
    const char *path = make_store();
    tu_child c = spawn(path, 0, C_HOLD);
    int rc = child_report(&c, "its open");
    cr_assert(rc == 0, "the child's open -> %s", tu_err(rc));
    bonsai_db *db = NULL;
    rc = try_open(path, 0, &db);
    cr_assert(rc == BONSAI_BUSY,
              "open while another process writes -> %s, expected BONSAI_BUSY",
              tu_err(rc));
    tu_release(&c);
    rc = child_report(&c, "its close");
    cr_assert(rc == 0, "the child's close -> %s", tu_err(rc));
    tu_reap(&c);
    db = open_rw(path);
    store_works(db, 1);
    TU_OK(bonsai_close(db));
}

Test(lock, a_dead_writer_lets_go)
{
    const char *path = make_store();
    tu_child c = spawn(path, 0, C_CRASH);
    int rc = child_report(&c, "its open");
    cr_assert(rc == 0, "the child's open -> %s", tu_err(rc));
    rc = child_report(&c, "its write");
    cr_assert(rc == 0, "the child's write -> %s", tu_err(rc));
    bonsai_db *db = NULL;
    rc = try_open(path, 0, &db);
    cr_assert(rc == BONSAI_BUSY, "open while the child holds it -> %s",
              tu_err(rc));
    tu_release(&c); /* it exits without closing */
    tu_reap(&c);
    db = open_rw(path);
    /* its commit was durable when it returned */
    cr_assert(has_key(db, KEY_CHILD), "a commit of the dead writer is lost");
    store_works(db, 1);
    TU_OK(bonsai_close(db));
}

/* While a writer holds the file, a read-only open works (through the lock
 * file) and reads the writer's last commit; it does not disturb it. */
Test(lock, read_only_open_while_a_writer_holds_the_file)
{
    const char *path = make_store();
    bonsai_db *w = open_rw(path);
    /* a commit by the writer after the store was made */
    bonsai_map m = tu_map_open(w, NULL, "m", BONSAI_KEY_U64);
    TU_OK(bonsai_put_u64(NULL, m, 8, NULL, 0));

    /* this process */
    bonsai_db *r = NULL;
    int rc = try_open(path, 1, &r);
    cr_assert(rc == 0, "read-only open beside a writer (same process) -> %s",
              tu_err(rc));
    store_works(r, 0);
    cr_assert(has_key(r, 8), "a reader missed a commit made before it "
                             "opened");
    /* and one made after it opened */
    TU_OK(bonsai_put_u64(NULL, m, 9, NULL, 0));
    cr_assert(has_key(r, 9), "a reader missed a commit made after it "
                             "opened");
    TU_OK(bonsai_close(r));
    /* another process */
    tu_child c = spawn(path, 1, C_READ);
    rc = child_report(&c, "its open");
    cr_assert(rc == 0, "read-only open beside a writer (other process) -> %s",
              tu_err(rc));
    rc = child_report(&c, "its read");
    cr_assert(rc == 0, "the child's read -> %s", tu_err(rc));
    child_report(&c, "its close");
    tu_reap(&c);

    /* the writer was not disturbed */
    store_works(w, 1);
    TU_OK(bonsai_close(w));

    /* without a writer a read-only open works too */
    c = spawn(path, 1, C_READ);
    rc = child_report(&c, "its open");
    cr_assert(rc == 0, "read-only open with no writer -> %s", tu_err(rc));
    rc = child_report(&c, "its read");
    cr_assert(rc == 0, "the child's read -> %s", tu_err(rc));
    child_report(&c, "its close");
    tu_reap(&c);
}

Test(lock, readers_do_not_block_readers)
{
    const char *path = make_store();
    bonsai_db *r1 = NULL, *r2 = NULL;
    TU_OK(try_open(path, 1, &r1));
    int rc = try_open(path, 1, &r2);
    cr_assert(rc == 0, "a second read-only open in this process -> %s",
              tu_err(rc));
    tu_child c = spawn(path, 1, C_READ);
    rc = child_report(&c, "its open");
    cr_assert(rc == 0, "a read-only open in another process beside two "
                       "readers -> %s", tu_err(rc));
    rc = child_report(&c, "its read");
    cr_assert(rc == 0, "the child's read -> %s", tu_err(rc));
    child_report(&c, "its close");
    tu_reap(&c);
    store_works(r1, 0);
    store_works(r2, 0);
    TU_OK(bonsai_close(r1));
    TU_OK(bonsai_close(r2));
    /* a writer may open afterwards */
    bonsai_db *w = open_rw(path);
    store_works(w, 1);
    TU_OK(bonsai_close(w));
}

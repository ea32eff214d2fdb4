/* SPDX-License-Identifier: MIT */
/*
 * test_wait.c - writers that wait (busy_timeout_ms): threads and processes
 * taking turns at the same store land every write and lose none, read
 * snapshots open meanwhile do not deadlock them, and a writer that cannot
 * get in answers BONSAI_BUSY when its timeout has passed, not before and
 * not much after (within 10 %).
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

TestSuite(wait, .init = tu_setup, .fini = tu_teardown, .timeout = 120);

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static bonsai_options wait_options(uint32_t timeout_ms)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.sync = 0;
    o.max_size = 64u << 20;
    o.busy_timeout_ms = timeout_ms;
    return o;
}

/* A timed-out wait lasted its timeout, and at most 10 % more. */
static void assert_waited(double ms, uint32_t timeout_ms, const char *what)
{
    cr_assert(ms >= timeout_ms - 1.0, "%s: BUSY after %.1f ms, timeout %u",
              what, ms, timeout_ms);
    cr_assert(ms <= timeout_ms * 1.1, "%s: BUSY after %.1f ms, timeout %u",
              what, ms, timeout_ms);
}

/* ---- threads ------------------------------------------------------------ */

#define THREAD_WRITES 200

typedef struct writer_arg {
    bonsai_db *db;
    bonsai_map map;
    uint64_t base;
    int failed; /* the first error, 0 if none */
} writer_arg;

/* Each write transaction puts one key of its own range and commits. */
static void *writer_thread(void *p)
{
    writer_arg *a = p;
    for (uint64_t i = 0; i < THREAD_WRITES && !a->failed; i++) {
        bonsai_txn *t;
        int rc = bonsai_txn_begin(a->db, 0, &t);
        if (rc == 0 && (rc = bonsai_put_u64(t, a->map, a->base + i, NULL,
                                            0)) != 0)
            bonsai_txn_abort(t);
        else if (rc == 0)
            rc = bonsai_txn_commit(t);
        /* one-off puts without a transaction wait the same way */
        if (rc == 0)
            rc = bonsai_put_u64(NULL, a->map, a->base + 100000 + i, NULL, 0);
        a->failed = rc;
    }
    return NULL;
}

typedef struct reader_arg {
    bonsai_db *db;
    bonsai_map map;
    volatile int stop;
    int failed;
} reader_arg;

/* Read snapshots held open while the writers take turns. */
static void *reader_thread(void *p)
{
    reader_arg *a = p;
    while (!a->stop && !a->failed) {
        bonsai_txn *t;
        uint64_t n;
        int rc = bonsai_txn_begin(a->db, BONSAI_TXN_RDONLY, &t);
        if (rc == 0) {
            rc = bonsai_count(t, a->map, &n);
            usleep(200);
            bonsai_txn_abort(t);
        }
        a->failed = rc;
    }
    return NULL;
}

Test(wait, threads_take_turns_and_lose_nothing)
{
    bonsai_options o = wait_options(BONSAI_WAIT_FOREVER);
    bonsai_db *db;
    TU_OK(bonsai_open(tu_path("t.db"), &o, &db));
    bonsai_map m;
    TU_OK(bonsai_map_create(db, NULL, "m", BONSAI_KEY_U64, &m));
    writer_arg w[2] = {{db, m, 0, 0}, {db, m, 1000000, 0}};
    reader_arg r = {db, m, 0, 0};
    pthread_t tw[2], tr;
    cr_assert_eq(pthread_create(&tr, NULL, reader_thread, &r), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&tw[i], NULL, writer_thread, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(tw[i], NULL);
    r.stop = 1;
    pthread_join(tr, NULL);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(w[i].failed, 0, "writer %d: %s", i, tu_err(w[i].failed));
    cr_assert_eq(r.failed, 0, "reader: %s", tu_err(r.failed));
    uint64_t n;
    TU_OK(bonsai_count(NULL, m, &n));
    cr_assert_eq(n, 4 * THREAD_WRITES);
    TU_OK(bonsai_close(db));
    TU_OK(bonsai_open(tu_path("t.db"), &o, &db));
    TU_OK(bonsai_map_open(db, NULL, "m", &m, NULL));
    TU_OK(bonsai_count(NULL, m, &n));
    cr_assert_eq(n, 4 * THREAD_WRITES, "after reopen: %llu",
                 (unsigned long long)n);
    TU_OK(bonsai_close(db));
}

typedef struct holder_arg {
    bonsai_db *db;
    int rc;
    double waited_ms;
} holder_arg;

static void *second_writer(void *p)
{
    holder_arg *a = p;
    double t0 = now_ms();
    bonsai_txn *t = NULL;
    a->rc = bonsai_txn_begin(a->db, 0, &t);
    a->waited_ms = now_ms() - t0;
    if (a->rc == 0)
        bonsai_txn_abort(t);
    return NULL;
}

Test(wait, thread_timeout_is_honoured)
{
    const uint32_t timeout = 1000;
    bonsai_options o = wait_options(timeout);
    bonsai_db *db;
    TU_OK(bonsai_open(tu_path("t.db"), &o, &db));
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    holder_arg a = {db, 0, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, second_writer, &a), 0);
    pthread_join(th, NULL);
    TU_RC(a.rc, BONSAI_BUSY);
    assert_waited(a.waited_ms, timeout, "second thread");
    TU_OK(bonsai_txn_commit(t));
    TU_OK(bonsai_close(db));
}

/* A writer released during the wait gets in at once, not at the end. */
Test(wait, thread_gets_in_when_the_writer_ends)
{
    bonsai_options o = wait_options(10000);
    bonsai_db *db;
    TU_OK(bonsai_open(tu_path("t.db"), &o, &db));
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    holder_arg a = {db, -1, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, second_writer, &a), 0);
    usleep(100 * 1000);
    TU_OK(bonsai_txn_commit(t));
    pthread_join(th, NULL);
    TU_OK(a.rc);
    cr_assert(a.waited_ms < 5000, "waited %.1f ms", a.waited_ms);
    TU_OK(bonsai_close(db));
}

/* The thread that holds the write transaction would wait for itself. */
Test(wait, own_thread_is_busy_at_once)
{
    bonsai_options o = wait_options(BONSAI_WAIT_FOREVER);
    bonsai_db *db;
    TU_OK(bonsai_open(tu_path("t.db"), &o, &db));
    bonsai_map m;
    TU_OK(bonsai_map_create(db, NULL, "m", BONSAI_KEY_U64, &m));
    bonsai_txn *t, *t2;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    TU_RC(bonsai_txn_begin(db, 0, &t2), BONSAI_BUSY);
    TU_RC(bonsai_put_u64(NULL, m, 1, NULL, 0), BONSAI_BUSY);
    TU_OK(bonsai_put_u64(t, m, 2, NULL, 0));
    TU_OK(bonsai_txn_commit(t));
    TU_OK(bonsai_put_u64(NULL, m, 1, NULL, 0));
    TU_OK(bonsai_close(db));
}

/* timeout 0 is the old behaviour: BUSY at once. */
Test(wait, zero_timeout_fails_at_once)
{
    bonsai_options o = wait_options(0);
    bonsai_db *db;
    TU_OK(bonsai_open(tu_path("t.db"), &o, &db));
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    holder_arg a = {db, 0, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, second_writer, &a), 0);
    pthread_join(th, NULL);
    TU_RC(a.rc, BONSAI_BUSY);
    cr_assert(a.waited_ms < 500, "waited %.1f ms", a.waited_ms);
    bonsai_txn_abort(t);
    TU_OK(bonsai_close(db));
}

/* ---- processes ---------------------------------------------------------- */

#define PROCESS_TURNS 40

typedef struct turns_arg {
    const char *path;
    uint64_t base;
} turns_arg;

/* Opens the store read-write (waiting for the other process), puts a key
 * in a commit, closes; PROCESS_TURNS times.  Reports the first error. */
static void take_turns(int up, int down, void *ctx)
{
    (void)down;
    const turns_arg *a = ctx;
    bonsai_options o = wait_options(BONSAI_WAIT_FOREVER);
    int rc = 0;
    for (uint64_t i = 0; i < PROCESS_TURNS && rc == 0; i++) {
        bonsai_db *db;
        if ((rc = bonsai_open(a->path, &o, &db)) != 0)
            break;
        bonsai_map m;
        rc = bonsai_map_create(db, NULL, "m", BONSAI_KEY_U64, &m);
        if (rc == BONSAI_EXISTS)
            rc = 0;
        if (rc == 0)
            rc = bonsai_put_u64(NULL, m, a->base + i, NULL, 0);
        usleep(1000); /* hold the store a moment, so the other waits */
        int crc = bonsai_close(db);
        if (rc == 0)
            rc = crc;
    }
    tu_put_int(up, rc);
}

Test(wait, processes_take_turns_and_lose_nothing)
{
    const char *path = tu_path("p.db");
    turns_arg a[2] = {{path, 0}, {path, 1000}};
    tu_child c[2];
    for (int i = 0; i < 2; i++)
        c[i] = tu_spawn(take_turns, &a[i]);
    for (int i = 0; i < 2; i++) {
        int64_t rc = tu_report(&c[i], "turns");
        cr_assert_eq(rc, 0, "process %d: %s", i, tu_err((int)rc));
        tu_reap(&c[i]);
    }
    bonsai_options o = wait_options(0);
    bonsai_db *db;
    TU_OK(bonsai_open(path, &o, &db));
    bonsai_map m;
    TU_OK(bonsai_map_open(db, NULL, "m", &m, NULL));
    uint64_t n;
    TU_OK(bonsai_count(NULL, m, &n));
    cr_assert_eq(n, 2 * PROCESS_TURNS);
    for (uint64_t i = 0; i < PROCESS_TURNS; i++) {
        bonsai_val v;
        TU_OK(bonsai_get_u64(NULL, m, i, &v));
        TU_OK(bonsai_get_u64(NULL, m, 1000 + i, &v));
    }
    TU_OK(bonsai_close(db));
}

typedef struct open_arg {
    const char *path;
    uint32_t timeout_ms;
} open_arg;

/* Once the parent has opened the store, reports the open's result, then
 * how long it took in microseconds.  (Forked before the parent opens: a
 * child would share the parent's lock through the descriptor.) */
static void timed_open(int up, int down, void *ctx)
{
    if (!tu_wait_parent(down))
        return;
    const open_arg *a = ctx;
    bonsai_options o = wait_options(a->timeout_ms);
    bonsai_db *db = NULL;
    double t0 = now_ms();
    int rc = bonsai_open(a->path, &o, &db);
    double ms = now_ms() - t0;
    if (rc == 0)
        rc = bonsai_close(db);
    tu_put_int(up, rc);
    tu_put_int(up, (int64_t)(ms * 1000));
}

Test(wait, process_timeout_is_honoured)
{
    const char *path = tu_path("p.db");
    open_arg a = {path, 1000};
    tu_child c = tu_spawn(timed_open, &a);
    bonsai_options o = wait_options(0);
    bonsai_db *db;
    TU_OK(bonsai_open(path, &o, &db));
    tu_release(&c);
    int64_t rc = tu_report(&c, "open");
    double ms = (double)tu_report(&c, "time") / 1000;
    tu_reap(&c);
    TU_RC((int)rc, BONSAI_BUSY);
    assert_waited(ms, a.timeout_ms, "second process");
    TU_OK(bonsai_close(db));
}

/* The waiting open gets in as soon as the holder closes. */
Test(wait, process_gets_in_when_the_holder_closes)
{
    const char *path = tu_path("p.db");
    open_arg a = {path, BONSAI_WAIT_FOREVER};
    tu_child c = tu_spawn(timed_open, &a);
    bonsai_options o = wait_options(0);
    bonsai_db *db;
    TU_OK(bonsai_open(path, &o, &db));
    tu_release(&c);
    usleep(200 * 1000);
    cr_assert(!tu_has_report(&c), "the second open did not wait");
    TU_OK(bonsai_close(db));
    int64_t rc = tu_report(&c, "open");
    double ms = (double)tu_report(&c, "time") / 1000;
    tu_reap(&c);
    TU_OK((int)rc);
    cr_assert(ms >= 150, "opened after %.1f ms, while the store was held",
              ms);
}

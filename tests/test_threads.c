/* SPDX-License-Identifier: MIT */
/*
 * test_threads.c - read snapshots in other threads while one writer
 * commits (transaction mode, a file store).
 *
 * The writer keeps an invariant in every commit: map "meta" key 0 holds the
 * entry count and an order-independent checksum of map "data".  Readers
 * check, inside one read txn, that a full walk of "data" matches "meta" and
 * bonsai_count (so a torn or partly visible commit shows), then walk again
 * and expect exactly the same (a stable snapshot).  Between the two walks
 * a reader waits until the writer has committed again, so every snapshot
 * check spans a commit; the writer, after each commit, waits until some
 * reader has begun a new snapshot (every 4th commit; otherwise it goes on
 * at once, so snapshots also begin while a write txn is open), so readers
 * see many different commits.
 * Both waits are progress handshakes (they also end when the other side is
 * done), not timing.
 *
 * Reader threads never call Criterion assertions: they record the first
 * problem and the test's thread asserts after joining them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "util.h"

TestSuite(threads, .init = tu_setup, .fini = tu_teardown, .timeout = 600);

#define NREADERS 4
#define KEY_RANGE 20000

typedef struct meta_val {
    uint64_t count;
    uint64_t sum;
} meta_val;

typedef struct shared {
    bonsai_db *db;
    bonsai_map data, meta;
    atomic_int stop;
    atomic_ulong commits; /* commits by the writer so far */
    atomic_ulong begins;  /* read txns begun so far */
    atomic_int active;    /* reader threads still running */
} shared;

typedef struct reader {
    shared *s;
    int id;
    uint64_t iters;
    uint64_t snapshots_changed; /* how often the snapshot id moved */
    char err[512];              /* first problem, empty if none */
} reader;

/* One walk: entries, checksum, in direction dir. */
static int walk(bonsai_txn *t, bonsai_map m, int dir, uint64_t *n,
                uint64_t *sum, char *err, size_t errlen)
{
    bonsai_cursor *cur = NULL;
    int rc = bonsai_cursor_open(t, m, &cur);
    if (rc) {
        snprintf(err, errlen, "cursor_open -> %s", tu_err(rc));
        return rc;
    }
    *n = 0;
    *sum = 0;
    uint64_t last = 0;
    rc = dir > 0 ? bonsai_cursor_first(cur) : bonsai_cursor_last(cur);
    while (rc == 0) {
        bonsai_val k = {0, NULL}, v = {0, NULL};
        rc = bonsai_cursor_get(cur, &k, &v);
        if (rc || k.size != 8) {
            snprintf(err, errlen, "cursor_get -> %s (key %zu bytes)",
                     tu_err(rc), k.size);
            rc = rc ? rc : BONSAI_CORRUPT;
            break;
        }
        uint64_t key = tu_u64_of(k.data);
        if (*n && (dir > 0 ? key <= last : key >= last)) {
            snprintf(err, errlen, "walk out of order: %" PRIu64
                     " after %" PRIu64, key, last);
            rc = BONSAI_CORRUPT;
            break;
        }
        last = key;
        ++*n;
        *sum += tu_entry_hash(k.data, 8, v.data, v.size);
        rc = dir > 0 ? bonsai_cursor_next(cur) : bonsai_cursor_prev(cur);
    }
    bonsai_cursor_close(cur);
    if (rc == BONSAI_NOTFOUND)
        return 0;
    if (rc && !err[0])
        snprintf(err, errlen, "cursor move -> %s", tu_err(rc));
    return rc;
}

/* One read txn: two walks, count, meta; returns false with r->err set. */
static bool check_snapshot(reader *r, uint64_t *prev_id)
{
    shared *s = r->s;
    bonsai_txn *t = NULL;
    char e[256] = "";
    int rc = bonsai_txn_begin(s->db, BONSAI_TXN_RDONLY, &t);
    if (rc) {
        snprintf(r->err, sizeof r->err, "reader %d: begin -> %s", r->id,
                 tu_err(rc));
        return false;
    }
    uint64_t id = bonsai_txn_id(t);
    if (id != *prev_id)
        r->snapshots_changed++;
    *prev_id = id;
    atomic_fetch_add(&s->begins, 1);
    unsigned long commits_at_begin = atomic_load(&s->commits);
    bool ok = false;
    uint64_t n1, s1, n2, s2, cnt = 0;
    bonsai_val mv = {0, NULL};
    meta_val meta;
    if ((rc = walk(t, s->data, +1, &n1, &s1, e, sizeof e))) {
        snprintf(r->err, sizeof r->err, "reader %d, snapshot %" PRIu64
                 ": first walk: %s", r->id, id, e);
        goto out;
    }
    rc = bonsai_get_u64(t, s->meta, 0, &mv);
    if (rc || mv.size != sizeof meta) {
        snprintf(r->err, sizeof r->err, "reader %d, snapshot %" PRIu64
                 ": get meta -> %s (%zu bytes)", r->id, id, tu_err(rc),
                 mv.size);
        goto out;
    }
    memcpy(&meta, mv.data, sizeof meta);
    rc = bonsai_count(t, s->data, &cnt);
    if (rc || cnt != n1 || meta.count != n1 || meta.sum != s1) {
        snprintf(r->err, sizeof r->err,
                 "reader %d, snapshot %" PRIu64 ": walk saw %" PRIu64
                 " entries (sum %016" PRIx64 "), count -> %s %" PRIu64
                 ", meta says %" PRIu64 " (sum %016" PRIx64
                 "): a commit is partly visible",
                 r->id, id, n1, s1, tu_err(rc), cnt, meta.count, meta.sum);
        goto out;
    }
    /* let the writer commit at least once while this snapshot is open */
    while (atomic_load(&s->commits) == commits_at_begin &&
           !atomic_load(&s->stop))
        sched_yield();
    int dir = (r->iters % 2) ? -1 : +1;
    if ((rc = walk(t, s->data, dir, &n2, &s2, e, sizeof e))) {
        snprintf(r->err, sizeof r->err, "reader %d, snapshot %" PRIu64
                 ": second walk: %s", r->id, id, e);
        goto out;
    }
    if (n2 != n1 || s2 != s1) {
        snprintf(r->err, sizeof r->err,
                 "reader %d, snapshot %" PRIu64 ": the snapshot moved: first "
                 "walk %" PRIu64 " entries (sum %016" PRIx64 "), second %"
                 PRIu64 " (sum %016" PRIx64 ")",
                 r->id, id, n1, s1, n2, s2);
        goto out;
    }
    if (bonsai_txn_id(t) != id) {
        snprintf(r->err, sizeof r->err, "reader %d: snapshot id moved",
                 r->id);
        goto out;
    }
    ok = true;
out:
    bonsai_txn_abort(t);
    return ok;
}

static void *reader_main(void *arg)
{
    reader *r = arg;
    uint64_t prev = UINT64_MAX;
    while (!atomic_load(&r->s->stop) || r->iters < 2) {
        if (!check_snapshot(r, &prev))
            break;
        r->iters++;
    }
    atomic_fetch_sub(&r->s->active, 1);
    return NULL;
}

/* ---- the writer --------------------------------------------------------- */

static void put_meta(bonsai_txn *t, shared *s, const tm_model *m)
{
    meta_val mv = {m->n, tm_checksum(m)};
    bonsai_val v = tu_val(&mv, sizeof mv);
    TU_OK(bonsai_put_u64(t, s->meta, 0, &v, 0));
}

/* nops random changes to "data" and the matching "meta", in one txn.  The
 * changes are planned on the model first and "meta" is written before
 * them, so while the txn is open the store is inconsistent as long as
 * possible: a reader that could see uncommitted changes would notice. */
typedef struct wop {
    int del;
    uint64_t key;
    uint8_t val[48];
    size_t vlen;
} wop;

static void writer_ops(bonsai_txn *t, shared *s, tm_model *m, tu_rng *rng,
                       unsigned nops)
{
    wop *ops = malloc((nops ? nops : 1) * sizeof *ops);
    cr_assert(ops != NULL);
    for (unsigned i = 0; i < nops; i++) {
        wop *o = &ops[i];
        unsigned r = (unsigned)tu_below(rng, 10);
        o->del = r >= 4 && r < 8 && m->n > 0;
        if (r < 4 || m->n == 0)
            o->key = tu_below(rng, KEY_RANGE);
        else
            o->key = tu_u64_of(m->e[tu_below(rng, m->n)].key);
        if (o->del) {
            tm_del(m, &o->key, 8);
        } else {
            o->vlen = (size_t)tu_below(rng, sizeof o->val);
            tu_fill(rng, o->val, o->vlen);
            tm_put(m, &o->key, 8, o->val, o->vlen);
        }
    }
    put_meta(t, s, m);
    for (unsigned i = 0; i < nops; i++) {
        wop *o = &ops[i];
        if (o->del) {
            TU_OK(bonsai_del_u64(t, s->data, o->key));
        } else {
            bonsai_val v = tu_val(o->val, o->vlen);
            TU_OK(bonsai_put_u64(t, s->data, o->key, &v, 0));
        }
    }
    free(ops);
}

static bonsai_db *open_store(shared *s, uint32_t node_bytes)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.sync = 0;
    o.node_bytes = node_bytes;
    s->db = tu_open(tu_path("threads.db"), &o);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(s->db, 0, &t));
    s->data = tu_map_create(s->db, t, "data", BONSAI_KEY_U64);
    s->meta = tu_map_create(s->db, t, "meta", BONSAI_KEY_U64);
    TU_OK(bonsai_txn_commit(t));
    return s->db;
}

Test(threads, readers_see_stable_snapshots)
{
    uint64_t seed = tu_seed("readers_see_stable_snapshots", 0x7EAD0001);
    tu_rng rng = {seed};
    shared s;
    memset(&s, 0, sizeof s);
    atomic_init(&s.stop, 0);
    atomic_init(&s.commits, 0);
    atomic_init(&s.begins, 0);
    atomic_init(&s.active, NREADERS);
    open_store(&s, 1024);
    tm_model m;
    tm_init(&m, BONSAI_KEY_U64);

    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(s.db, 0, &t));
    for (uint64_t k = 0; k < KEY_RANGE; k += 10) { /* 2000 entries */
        uint64_t v = tu_mix64(k);
        bonsai_val val = tu_val(&v, (size_t)(k % 9));
        TU_OK(bonsai_put_u64(t, s.data, k, &val, 0));
        tm_put(&m, &k, 8, &v, (size_t)(k % 9));
    }
    writer_ops(t, &s, &m, &rng, 100);
    TU_OK(bonsai_txn_commit(t));

    reader rd[NREADERS];
    pthread_t th[NREADERS];
    for (int i = 0; i < NREADERS; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].s = &s;
        rd[i].id = i;
        cr_assert(pthread_create(&th[i], NULL, reader_main, &rd[i]) == 0);
    }

    uint64_t commits = tu_scaled(400, 200), aborts = 0;
    tm_model saved;
    tm_init(&saved, BONSAI_KEY_U64);
    for (uint64_t c = 0; c < commits;) {
        bool abort_it = tu_chance(&rng, 100);
        if (abort_it)
            tm_copy(&saved, &m);
        TU_OK(bonsai_txn_begin(s.db, 0, &t));
        writer_ops(t, &s, &m, &rng, (unsigned)tu_range(&rng, 1, 60));
        if (abort_it) {
            bonsai_txn_abort(t);
            tm_copy(&m, &saved);
            aborts++;
        } else {
            TU_OK(bonsai_txn_commit(t));
            c++;
            /* every 4th commit, wait for a reader to take a snapshot of
             * it (in between, readers begin while a write txn is open) */
            unsigned long b = atomic_load(&s.begins);
            atomic_fetch_add(&s.commits, 1);
            while (c % 4 == 0 && atomic_load(&s.begins) == b &&
                   atomic_load(&s.active) > 0)
                sched_yield();
        }
    }
    atomic_store(&s.stop, 1);
    for (int i = 0; i < NREADERS; i++)
        pthread_join(th[i], NULL);

    uint64_t total = 0, moved = 0;
    for (int i = 0; i < NREADERS; i++) {
        cr_assert(rd[i].err[0] == 0, "seed=%" PRIu64 ": %s", seed,
                  rd[i].err);
        cr_assert(rd[i].iters >= 2);
        total += rd[i].iters;
        moved += rd[i].snapshots_changed;
    }
    /* the final state, once more from this thread */
    TU_OK(bonsai_txn_begin(s.db, BONSAI_TXN_RDONLY, &t));
    TU_ASSERT_SAME(t, s.data, &m, "after the writer finished");
    bonsai_txn_abort(t);
    cr_log_info("%" PRIu64 " commits, %" PRIu64 " aborts; %" PRIu64
                " snapshot checks, %" PRIu64 " of them on a new snapshot",
                commits, aborts, total, moved);
    tm_free(&m);
    tm_free(&saved);
    TU_OK(bonsai_close(s.db));
}

/* ---- a reader in another thread does not see later commits -------------- */

typedef struct late {
    shared *s;
    pthread_barrier_t *b;
    uint64_t n_before, n_during, n_after;
    uint64_t sum_before, sum_during;
    int new_keys_seen_during; /* of the keys committed after it began */
    int new_keys_seen_after;
    int old_value_kept;       /* an overwritten key shows its old value */
    int deleted_key_seen;     /* a deleted key still there */
    char err[512];
} late;

static void *late_reader(void *arg)
{
    late *l = arg;
    shared *s = l->s;
    bonsai_txn *t = NULL;
    char e[200] = "";
    int rc = bonsai_txn_begin(s->db, BONSAI_TXN_RDONLY, &t);
    if (rc)
        snprintf(l->err, sizeof l->err, "begin -> %s", tu_err(rc));
    else if (walk(t, s->data, +1, &l->n_before, &l->sum_before, e, sizeof e))
        snprintf(l->err, sizeof l->err, "walk before: %s", e);
    pthread_barrier_wait(l->b); /* 1: the snapshot is taken */
    pthread_barrier_wait(l->b); /* 2: the writer committed */
    if (t && !l->err[0]) {
        for (uint64_t k = 100000; k < 100100; k++) {
            bonsai_val v;
            if (bonsai_get_u64(t, s->data, k, &v) != BONSAI_NOTFOUND)
                l->new_keys_seen_during++;
        }
        bonsai_val v = {0, NULL};
        if (bonsai_get_u64(t, s->data, 5, &v) == 0 && v.size == 3 &&
            memcmp(v.data, "old", 3) == 0)
            l->old_value_kept = 1;
        if (bonsai_get_u64(t, s->data, 6, &v) == 0)
            l->deleted_key_seen = 1;
        if (walk(t, s->data, -1, &l->n_during, &l->sum_during, e, sizeof e))
            snprintf(l->err, sizeof l->err, "walk during: %s", e);
    }
    bonsai_txn_abort(t);
    /* a new snapshot sees the commit */
    t = NULL;
    rc = bonsai_txn_begin(s->db, BONSAI_TXN_RDONLY, &t);
    if (rc == 0) {
        for (uint64_t k = 100000; k < 100100; k++) {
            bonsai_val v;
            if (bonsai_get_u64(t, s->data, k, &v) == 0)
                l->new_keys_seen_after++;
        }
        uint64_t sum;
        if (walk(t, s->data, +1, &l->n_after, &sum, e, sizeof e) &&
            !l->err[0])
            snprintf(l->err, sizeof l->err, "walk after: %s", e);
        bonsai_txn_abort(t);
    } else if (!l->err[0]) {
        snprintf(l->err, sizeof l->err, "second begin -> %s", tu_err(rc));
    }
    return NULL;
}

Test(threads, snapshot_does_not_see_later_commits)
{
    shared s;
    memset(&s, 0, sizeof s);
    open_store(&s, 4096);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(s.db, 0, &t));
    for (uint64_t k = 0; k < 1000; k++) {
        bonsai_val v = tu_val("old", 3);
        TU_OK(bonsai_put_u64(t, s.data, k, &v, 0));
    }
    TU_OK(bonsai_txn_commit(t));

    pthread_barrier_t b;
    cr_assert(pthread_barrier_init(&b, NULL, 2) == 0);
    late l;
    memset(&l, 0, sizeof l);
    l.s = &s;
    l.b = &b;
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, late_reader, &l) == 0);
    pthread_barrier_wait(&b); /* 1 */
    TU_OK(bonsai_txn_begin(s.db, 0, &t));
    for (uint64_t k = 100000; k < 100100; k++)
        TU_OK(bonsai_put_u64(t, s.data, k, NULL, 0));
    bonsai_val nv = tu_val("new", 3);
    TU_OK(bonsai_put_u64(t, s.data, 5, &nv, 0));
    TU_OK(bonsai_del_u64(t, s.data, 6));
    TU_OK(bonsai_txn_commit(t));
    /* and an autocommit write */
    TU_OK(bonsai_put_u64(NULL, s.data, 100050, &nv, 0));
    pthread_barrier_wait(&b); /* 2 */
    pthread_join(th, NULL);
    pthread_barrier_destroy(&b);

    cr_assert(l.err[0] == 0, "%s", l.err);
    cr_assert_eq(l.n_before, 1000);
    cr_assert_eq(l.new_keys_seen_during, 0,
                 "the old snapshot saw %d of 100 keys committed later",
                 l.new_keys_seen_during);
    cr_assert(l.old_value_kept, "the old snapshot saw a later overwrite");
    cr_assert(l.deleted_key_seen, "the old snapshot lost a later-deleted key");
    cr_assert(l.n_during == l.n_before && l.sum_during == l.sum_before,
              "the old snapshot changed: %" PRIu64 " entries, then %" PRIu64,
              l.n_before, l.n_during);
    cr_assert_eq(l.new_keys_seen_after, 100);
    cr_assert_eq(l.n_after, 1099);
    TU_OK(bonsai_close(s.db));
}

/* Batched gets in several threads at once, of batches of many sizes: each
 * batch sorts its keys in memory the store keeps for the next one, which
 * one thread at a time may hold. */
typedef struct batcher {
    bonsai_db *db;
    bonsai_map map;
    uint64_t seed;
    char err[256];
} batcher;

#define BATCH_KEYS 20000 /* present: the even keys below 2 * BATCH_KEYS */

static void *batcher_main(void *arg)
{
    batcher *b = arg;
    tu_rng rng = {b->seed};
    uint64_t *keys = malloc(5000 * sizeof *keys);
    bonsai_val *vals = malloc(5000 * sizeof *vals);
    uint8_t *found = malloc(5000);
    for (int round = 0; round < 60 && !b->err[0] && keys && vals && found;
         round++) {
        size_t n = 1 + (size_t)(tu_below(&rng, round % 3 ? 5000 : 50));
        for (size_t i = 0; i < n; i++)
            keys[i] = tu_below(&rng, 4 * BATCH_KEYS);
        bonsai_txn *t = NULL;
        int rc = round % 2 ? bonsai_txn_begin(b->db, BONSAI_TXN_RDONLY, &t)
                           : 0;
        if (rc == 0)
            rc = bonsai_get_batch_u64(t, b->map, keys, n, vals, found);
        for (size_t i = 0; rc == 0 && i < n && !b->err[0]; i++) {
            int present = keys[i] % 2 == 0 && keys[i] < 2 * BATCH_KEYS;
            uint64_t v;
            if (found[i] != present ||
                (present && (vals[i].size != 8 ||
                             (memcpy(&v, vals[i].data, 8), v) !=
                                 tu_mix64(keys[i]))))
                snprintf(b->err, sizeof b->err,
                         "seed %" PRIu64 " round %d: key %" PRIu64
                         " answered wrong",
                         b->seed, round, keys[i]);
        }
        if (t)
            bonsai_txn_abort(t);
        if (rc && !b->err[0])
            snprintf(b->err, sizeof b->err, "seed %" PRIu64 ": %s", b->seed,
                     bonsai_strerror(rc));
    }
    if (!keys || !vals || !found)
        snprintf(b->err, sizeof b->err, "out of memory");
    free(keys);
    free(vals);
    free(found);
    return NULL;
}

Test(threads, batched_gets_in_many_threads_answer_as_one)
{
    shared s;
    memset(&s, 0, sizeof s);
    open_store(&s, 1024);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(s.db, 0, &t));
    for (uint64_t k = 0; k < 2 * BATCH_KEYS; k += 2) {
        uint64_t v = tu_mix64(k);
        bonsai_val val = tu_val(&v, 8);
        TU_OK(bonsai_put_u64(t, s.data, k, &val, 0));
    }
    TU_OK(bonsai_txn_commit(t));
    uint64_t seed = tu_seed("batched_gets_in_many_threads", 0xBA7C0001);
    batcher b[NREADERS];
    pthread_t th[NREADERS];
    for (int i = 0; i < NREADERS; i++) {
        b[i] = (batcher){.db = s.db, .map = s.data, .seed = seed + (uint64_t)i};
        cr_assert(pthread_create(&th[i], NULL, batcher_main, &b[i]) == 0);
    }
    for (int i = 0; i < NREADERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NREADERS; i++)
        cr_assert(b[i].err[0] == 0, "%s", b[i].err);
    TU_OK(bonsai_close(s.db));
}

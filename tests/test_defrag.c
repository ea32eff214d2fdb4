/* SPDX-License-Identifier: MIT */
/*
 * test_defrag.c - gathering free space (bt_defrag): a store whose free
 * pages lie in short runs gets longer ones, and holds the same entries,
 * verifies, and keeps its cursors on their keys.  Then, filled to its cap
 * through the room budget (which gathers on its own), it still matches
 * the model.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "room.h"
#include "util.h"

TestSuite(defrag, .init = tu_setup, .fini = tu_teardown);

static bonsai_options small_store(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = 2u << 20;
    o.node_bytes = 1024;
    o.write_cache_bytes = 256 * 1024;
    return o;
}

/* Random keys with values of 0 to 24 bytes, then a random half deleted:
 * leaves of many sizes, moved and shrunk, and their old runs freed. */
static void fragment(bonsai_map m, tm_model *model, tu_rng *r, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = tu_rand(r), v[3];
        tu_fill(r, v, sizeof v);
        size_t vlen = (size_t)tu_below(r, 25);
        bonsai_val val = tu_val(v, vlen);
        TU_OK(bonsai_put_u64(NULL, m, k, &val, 0));
        tm_put(model, &k, 8, v, vlen);
    }
    for (size_t i = 0; i < model->n;) {
        if (tu_chance(r, 500)) {
            uint64_t k = tu_u64_of(model->e[i].key);
            TU_OK(bonsai_del_u64(NULL, m, k));
            tm_del(model, &k, 8);
        } else {
            i++;
        }
    }
}

static uint64_t problems_of(bonsai_db *db)
{
    uint64_t problems = 0;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    return problems;
}

Test(defrag, gathers_free_runs_and_keeps_entries_and_cursors)
{
    uint64_t seed = tu_seed("defrag", 5);
    tu_rng r = {seed};
    bonsai_options o = small_store();
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tm_model model;
    tm_init(&model, BONSAI_KEY_U64);
    fragment(m, &model, &r, 60000);
    TU_OK(bonsai_sync(db));

    /* a cursor on a key in the middle, before the leaves move */
    bonsai_cursor *c;
    TU_OK(bonsai_cursor_open(NULL, m, &c));
    size_t mid = model.n / 2;
    bonsai_val key = tu_val(model.e[mid].key, 8), got_k, got_v;
    TU_OK(bonsai_cursor_seek(c, &key));

    uint64_t runs0 = alloc_runs_avail(&db->al);
    uint64_t pages0 = alloc_pages_avail(&db->al);
    TU_OK(bt_defrag(db, &m->w));
    uint64_t runs1 = alloc_runs_avail(&db->al);
    cr_assert(runs1 > runs0,
              "seed=%llu: node runs %llu before, %llu after: nothing gathered",
              (unsigned long long)seed, (unsigned long long)runs0,
              (unsigned long long)runs1);
    cr_assert_eq(alloc_pages_avail(&db->al), pages0,
                 "seed=%llu: moving leaves changed the free pages",
                 (unsigned long long)seed);

    TU_OK(bonsai_cursor_get(c, &got_k, &got_v));
    cr_assert(got_k.size == 8 && memcmp(got_k.data, model.e[mid].key, 8) == 0,
              "seed=%llu: the cursor left its key", (unsigned long long)seed);
    for (size_t i = mid + 1; i < model.n && i < mid + 2000; i++) {
        TU_OK(bonsai_cursor_next(c));
        TU_OK(bonsai_cursor_get(c, &got_k, &got_v));
        cr_assert(memcmp(got_k.data, model.e[i].key, 8) == 0 &&
                      got_v.size == model.e[i].vlen &&
                      (got_v.size == 0 ||
                       memcmp(got_v.data, model.e[i].val, got_v.size) == 0),
                  "seed=%llu: entry %zu differs after the move",
                  (unsigned long long)seed, i);
    }
    bonsai_cursor_close(c);
    TU_ASSERT_SAME(NULL, m, &model, "after defrag");
    cr_assert_eq(problems_of(db), 0, "seed=%llu: verify found problems",
                 (unsigned long long)seed);

    /* the moved leaves take changes as any other */
    fragment(m, &model, &r, 20000);
    TU_ASSERT_SAME(NULL, m, &model, "changes after defrag");
    TU_OK(bonsai_sync(db));
    cr_assert_eq(problems_of(db), 0, "seed=%llu: verify after changes",
                 (unsigned long long)seed);
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

/* What a fill put, kept unsorted: a sorted model costs a move of half of
 * it for each random put. */
typedef struct put_log {
    struct logged {
        uint64_t k, v;
        size_t vlen;
    } * e;
    size_t n, cap;
} put_log;

static int by_key(const void *a, const void *b)
{
    const struct logged *x = a, *y = b;
    return (x->k > y->k) - (x->k < y->k);
}

/* The model of the log: sorted, the later of two puts of a key kept. */
static void model_of(put_log *log, tm_model *model)
{
    tm_free(model);
    tm_init(model, BONSAI_KEY_U64);
    qsort(log->e, log->n, sizeof *log->e, by_key); /* keys are distinct */
    for (size_t i = 0; i < log->n; i++)
        tm_append(model, &log->e[i].k, 8, &log->e[i].v, log->e[i].vlen);
}

/* Random puts to BONSAI_FULL, deletes of a third, and puts to FULL again:
 * the room budget gathers free space on its own near the cap; every
 * acknowledged put is there and the store verifies. */
Test(defrag, fill_to_full_twice_matches_the_model)
{
    uint64_t seed = tu_seed("defrag-full", 9);
    tu_rng r = {seed};
    bonsai_options o = small_store();
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tm_model model;
    tm_init(&model, BONSAI_KEY_U64);
    put_log log = {0};
    for (int round = 0; round < 2; round++) {
        int rc = 0;
        while (rc == 0) {
            uint64_t k = tu_rand(&r), v = tu_rand(&r);
            size_t vlen = (size_t)tu_below(&r, 9);
            bonsai_val val = tu_val(&v, vlen);
            rc = bonsai_put_u64(NULL, m, k, &val, 0);
            if (rc == 0) {
                if (log.n == log.cap) {
                    log.cap = log.cap ? 2 * log.cap : 4096;
                    log.e = realloc(log.e, log.cap * sizeof *log.e);
                    cr_assert(log.e);
                }
                log.e[log.n++] = (struct logged){k, v, vlen};
            }
        }
        TU_RC(rc, BONSAI_FULL);
        model_of(&log, &model);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "seed=%llu round %d at FULL",
                 (unsigned long long)seed, round);
        TU_ASSERT_SAME(NULL, m, &model, ctx);
        TU_OK(bonsai_sync(db));
        cr_assert_eq(problems_of(db), 0, "%s: verify", ctx);
        size_t kept = 0;
        for (size_t i = 0; i < log.n; i++) {
            if (tu_chance(&r, 333))
                TU_OK(bonsai_del_u64(NULL, m, log.e[i].k));
            else
                log.e[kept++] = log.e[i];
        }
        log.n = kept;
    }
    free(log.e);
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

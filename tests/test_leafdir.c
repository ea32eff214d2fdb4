/* SPDX-License-Identifier: MIT */
/*
 * test_leafdir.c - the table of leaves a u64 tree's lookups go through
 * (leafdir.h): it finds the leaf whose range holds a key, and gets through
 * it answer as the model does while the tree changes, is written back,
 * gathered (bt_defrag), rolled back, and read from snapshots.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "leafdir.h"
#include "util.h"

TestSuite(leafdir, .init = tu_setup, .fini = tu_teardown);

/* ---- the table alone ---------------------------------------------------- */

static uint32_t last_not_above(const uint64_t *lo, uint32_t n, uint64_t key)
{
    uint32_t i = 0;
    while (i + 1 < n && lo[i + 1] <= key)
        i++;
    return i;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* n distinct bounds, the first 0, spread over the whole range, crowded
 * into a narrow one, or both (shape 0, 1, 2). */
static uint32_t make_bounds(tu_rng *r, uint64_t *lo, uint32_t n, int shape)
{
    uint64_t base = tu_rand(r) >> 1, width = 1 + tu_below(r, 100000);
    for (uint32_t i = 1; i < n; i++) {
        int crowded = shape == 1 || (shape == 2 && tu_chance(r, 500));
        lo[i] = crowded ? base + tu_below(r, width) : tu_rand(r);
    }
    lo[0] = 0;
    qsort(lo, n, sizeof *lo, by_value);
    uint32_t m = 1; /* without repeats (and without further zeros) */
    for (uint32_t i = 1; i < n; i++)
        if (lo[i] != lo[m - 1])
            lo[m++] = lo[i];
    return m;
}

static uint64_t key_near(tu_rng *r, const uint64_t *lo, uint32_t n)
{
    uint64_t at = lo[tu_below(r, n)];
    switch (tu_below(r, 5)) {
    case 0: return tu_rand(r);
    case 1: return at - 1;
    case 2: return at + 1;
    case 3: return tu_chance(r, 500) ? 0 : UINT64_MAX;
    default: return at;
    }
}

/* The page ld_likely_page names is one of a leaf whose range meets the
 * key's bucket (the test's leaf i lies at page 7 i + 1). */
static void check_likely_page(const leafdir *d, const uint64_t *lo,
                              uint32_t n, uint64_t key)
{
    uint32_t page = ld_likely_page(d, key), b = ld_bucket_of(d, key);
    cr_assert(page % 7 == 1 && (page - 1) / 7 < n, "page %u", page);
    uint32_t j = (page - 1) / 7;
    unsigned __int128 start = (unsigned __int128)d->base +
                              ((unsigned __int128)b << d->shift);
    unsigned __int128 end = start + ((unsigned __int128)1 << d->shift);
    if (b == 0)
        start = 0;
    if (b + 1 == d->nb)
        end = (unsigned __int128)UINT64_MAX + 1;
    cr_assert(lo[j] < end && (j + 1 == n || lo[j + 1] > start),
              "key %llu: leaf %u lies outside its bucket",
              (unsigned long long)key, j);
}

Test(leafdir, finds_the_last_bound_not_above_the_key)
{
    uint64_t seed = tu_seed("leafdir.find", 20261206);
    tu_rng r = {seed};
    uint64_t *lo = malloc(5000 * sizeof *lo);
    cr_assert(lo);
    for (int round = 0; round < 300; round++) {
        uint32_t want = 1 + (uint32_t)tu_below(&r, round % 3 ? 5000 : 8);
        uint32_t n = make_bounds(&r, lo, want, round % 3);
        leafdir d = {0};
        for (uint32_t i = 0; i < n; i++)
            cr_assert_eq(ld_add(&d, lo[i], (bn_ext){i * 7u + 1, i % 9 + 1}),
                         0, "seed %llu round %d", (unsigned long long)seed,
                         round);
        cr_assert_eq(ld_finish(&d), 0);
        for (int k = 0; k < 2000; k++) {
            uint64_t key = key_near(&r, lo, n);
            uint32_t i = ld_find(&d, key), want_i = last_not_above(lo, n, key);
            cr_assert_eq(i, want_i, "seed %llu round %d key %llu: %u, not %u",
                         (unsigned long long)seed, round,
                         (unsigned long long)key, i, want_i);
            bn_ext e = ld_ext(&d, i);
            cr_assert(e.pgno == i * 7u + 1 && e.npages == i % 9 + 1);
            check_likely_page(&d, lo, n, key);
        }
        ld_drop(&d);
    }
    free(lo);
}

Test(leafdir, refuses_what_it_cannot_hold)
{
    leafdir d = {0};
    cr_assert_eq(ld_finish(&d), -1, "no leaf");
    cr_assert_eq(ld_add(&d, 5, (bn_ext){1, 1}), -1, "the first bound is 0");
    cr_assert_eq(ld_add(&d, 0, (bn_ext){1, 1}), 0);
    cr_assert_eq(ld_add(&d, 0, (bn_ext){2, 1}), -1, "bounds increase");
    cr_assert_eq(ld_add(&d, 9, (bn_ext){UINT64_C(1) << LD_PGNO_BITS, 1}), -1);
    cr_assert_eq(ld_add(&d, 9, (bn_ext){3, 1u << LD_NPAGES_BITS}), -1);
    cr_assert_eq(ld_add(&d, 9, (bn_ext){3, 2}), 0);
    cr_assert_eq(ld_finish(&d), 0);
    cr_assert_eq(ld_find(&d, 8), 0);
    cr_assert_eq(ld_find(&d, 9), 1);
    cr_assert_eq(ld_find(&d, UINT64_MAX), 1);
    ld_drop(&d);
    cr_assert(!ld_built(&d));
}

/* ---- gets through it ---------------------------------------------------- */

/* A get of every kind of key the model tells about: present, absent
 * beside a present one, anywhere. */
static void check_gets(bonsai_txn *txn, bonsai_map m, const tm_model *model,
                       tu_rng *r, uint64_t n, uint64_t seed, const char *when)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = tu_rand(r);
        if (model->n && !tu_chance(r, 300))
            k = tu_u64_of(model->e[tu_below(r, model->n)].key) +
                (tu_chance(r, 300) ? 1 : 0);
        size_t at;
        bool present = tm_find(model, &k, 8, &at);
        bonsai_val v;
        int rc = bonsai_get_u64(txn, m, k, &v);
        cr_assert_eq(rc, present ? 0 : BONSAI_NOTFOUND,
                     "seed %llu, %s: get %llu gave %s",
                     (unsigned long long)seed, when, (unsigned long long)k,
                     tu_err(rc));
        if (present)
            cr_assert(v.size == model->e[at].vlen &&
                          (v.size == 0 ||
                           memcmp(v.data, model->e[at].val, v.size) == 0),
                      "seed %llu, %s: value of %llu",
                      (unsigned long long)seed, when, (unsigned long long)k);
    }
}

static void put_random(bonsai_txn *txn, bonsai_map m, tm_model *model,
                       tu_rng *r, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = tu_rand(r), v = tu_rand(r);
        size_t vlen = (size_t)tu_below(r, 9);
        bonsai_val val = tu_val(&v, vlen);
        TU_OK(bonsai_put_u64(txn, m, k, &val, 0));
        tm_put(model, &k, 8, &v, vlen);
    }
}

static void del_random(bonsai_txn *txn, bonsai_map m, tm_model *model,
                       tu_rng *r, uint64_t n)
{
    for (uint64_t i = 0; i < n && model->n; i++) {
        uint64_t k = tu_u64_of(model->e[tu_below(r, model->n)].key);
        TU_OK(bonsai_del_u64(txn, m, k));
        tm_del(model, &k, 8);
    }
}

/* Enough gets that the table is built (view.c asks 256 + count / 256),
 * and as many again through it. */
static uint64_t gets_for(const tm_model *model)
{
    return 2 * (256 + model->n / 256) + 500;
}

/* Small nodes: a deep tree of many leaves from few keys. */
static bonsai_options deep_tree(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = 64u << 20;
    o.node_entries = 16;
    o.write_cache_bytes = 8u << 20;
    return o;
}

Test(leafdir, writer_gets_agree_while_the_tree_changes)
{
    uint64_t seed = tu_seed("leafdir.writer", 7);
    tu_rng r = {seed};
    bonsai_options o = deep_tree();
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tm_model model;
    tm_init(&model, BONSAI_KEY_U64);
    put_random(NULL, m, &model, &r, tu_scaled(20000, 5000));
    TU_OK(bonsai_sync(db));
    cr_assert_geq(m->w.depth, 3, "a tree the table serves");
    for (int round = 0; round < 24; round++) {
        int step = round % 6;
        if (step == 1)
            put_random(NULL, m, &model, &r, 200); /* left in the cache */
        else if (step == 2)
            del_random(NULL, m, &model, &r, 300);
        else if (step == 3)
            put_random(NULL, m, &model, &r, 1);
        else if (step == 4)
            TU_OK(bt_defrag(db, &m->w));
        else if (step == 5)
            del_random(NULL, m, &model, &r, model.n / 2),
                put_random(NULL, m, &model, &r, model.n);
        int written = step != 1 && step != 5;
        if (written)
            TU_OK(bonsai_sync(db));
        char when[32];
        snprintf(when, sizeof when, "round %d", round);
        check_gets(NULL, m, &model, &r, gets_for(&model), seed, when);
        if (written && m->w.depth >= 3)
            cr_assert(ld_built(&db->ld), "seed %llu, %s: gets used a table",
                      (unsigned long long)seed, when);
        if (db->dirty.n)
            cr_assert(!ld_built(&db->ld), "%s: a table over changed nodes",
                      when);
    }
    tm_free(&model);
    bonsai_close(db);
}

Test(leafdir, snapshots_and_rolled_back_writes_agree)
{
    uint64_t seed = tu_seed("leafdir.snapshots", 11);
    tu_rng r = {seed};
    bonsai_options o = deep_tree();
    o.transactions = 1;
    o.sync = 0;
    bonsai_db *db = tu_open(tu_path("ld.bonsai"), &o);
    bonsai_txn *w, *snap;
    TU_OK(bonsai_txn_begin(db, 0, &w));
    bonsai_map m = tu_map_create(db, w, "m", BONSAI_KEY_U64);
    tm_model model, before;
    tm_init(&model, BONSAI_KEY_U64);
    tm_init(&before, BONSAI_KEY_U64);
    put_random(w, m, &model, &r, tu_scaled(20000, 5000));
    TU_OK(bonsai_txn_commit(w));

    /* a snapshot keeps its table while the writer moves on */
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &snap));
    tm_copy(&before, &model);
    check_gets(snap, m, &before, &r, gets_for(&before), seed, "snapshot");
    cr_assert(ld_built(&snap->ld), "the snapshot's gets used a table");
    for (int round = 0; round < 4; round++) {
        TU_OK(bonsai_txn_begin(db, 0, &w));
        check_gets(w, m, &model, &r, gets_for(&model), seed, "writer");
        cr_assert(ld_built(&db->ld), "the writer's gets used a table");
        put_random(w, m, &model, &r, 500);
        del_random(w, m, &model, &r, 500);
        check_gets(w, m, &model, &r, gets_for(&model), seed, "changed");
        cr_assert(db->dirty.n && !ld_built(&db->ld),
                  "no table over changed nodes");
        TU_OK(bonsai_txn_commit(w));
        check_gets(snap, m, &before, &r, 2000, seed, "snapshot after");
    }
    bonsai_txn_abort(snap);

    /* a rolled back change leaves the committed tree to be read */
    TU_OK(bonsai_txn_begin(db, 0, &w));
    check_gets(w, m, &model, &r, gets_for(&model), seed, "before abort");
    tm_model lost;
    tm_init(&lost, BONSAI_KEY_U64);
    tm_copy(&lost, &model);
    put_random(w, m, &lost, &r, 2000);
    bonsai_txn_abort(w);
    TU_OK(bonsai_txn_begin(db, 0, &w));
    check_gets(w, m, &model, &r, gets_for(&model), seed, "after abort");
    bonsai_txn_abort(w);
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &snap));
    check_gets(snap, m, &model, &r, gets_for(&model), seed, "new snapshot");
    cr_assert(ld_built(&snap->ld));
    bonsai_txn_abort(snap);
    tm_free(&lost);
    tm_free(&before);
    tm_free(&model);
    bonsai_close(db);
}

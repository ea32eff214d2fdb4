/* SPDX-License-Identifier: MIT */
/*
 * test_full.c - filling a store to its cap (max_size): BONSAI_FULL is a
 * clean result, the store stays consistent, readable and writable for
 * deletes, and space freed by deletes is used again.
 *
 *  - anonymous memory (no-transaction mode), 1 MiB cap, default options:
 *    u64 keys with empty values, then byte keys with 100-byte values;
 *  - anonymous memory with 64-byte pages, 2 MiB cap, a 1 MiB write cache:
 *    random keys leave the free space in runs shorter than a node, and
 *    the write cache must still be written back after FULL (bonsai_sync
 *    succeeds) with every acknowledged entry in it;
 *  - anonymous memory, a sequential load to half the cap (appends leave
 *    every leaf full), then random keys among them until FULL: nearly
 *    every waiting put splits a leaf, the worst case of the room the
 *    write cache counts on for waiting puts; the write-back must succeed;
 *  - anonymous memory, byte keys loaded so that each leaf stores its short
 *    keys whole, then keys put among them: every later restart point of a
 *    leaf moves to a long key, the leaf nearly doubles, and the write-back
 *    after FULL (and after deletes) must still succeed;
 *  - a file in transaction mode, 1 MiB cap: the write transaction that
 *    hits the cap reports BONSAI_FULL (at a put or at commit); after the
 *    abort the committed contents are intact, also after a reopen.  A
 *    copy-on-write delete needs space too, so there delete transactions
 *    may report FULL as well (the header allows it); whatever they report,
 *    the store must match what was committed;
 *  - both modes, ascending keys to FULL, then deleted in the same order,
 *    three times: the emptied map keeps no node and the next fill reaches
 *    the same count.
 *
 * Keys are tu_mix64(seed + id) (distinct for distinct ids); values are a
 * function of the id, so no copy of them is kept.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bonsai.h"
#include "util.h"

TestSuite(full, .init = tu_setup, .fini = tu_teardown);

#define CAP (UINT64_C(1) << 20)
/* The keys are random: no encoding stores a random set of 64-bit keys in
 * under about 5 bytes each at these sizes, so 1 MiB holds at most ~200,000
 * of them.  2 inserts a byte of the cap (0.5 bytes per entry) mean
 * BONSAI_FULL never came. */
#define NEVER_FULL(cap) ((cap) * 2)

typedef struct fill {
    const char *name;
    unsigned kind;
    size_t vlen;     /* value bytes */
    unsigned flags;  /* of every put */
    uint64_t max_size; /* the store's cap */
    uint64_t seed;
    uint64_t next;   /* next id never used */
    uint64_t nseq;   /* ids below this have ascending keys ... */
    int seq_even;    /* ... evenly spaced (else with random low bits);
                        SEQ_SHIFTED: each group of 64 evenly, groups by
                        turns at two steps */
    uint64_t *live;  /* ids present */
    size_t nlive, cap;
} fill;

typedef struct keyrec {
    uint8_t k[16];
    size_t len;
} keyrec;

#define FFAIL(f, ...)                                                        \
    do {                                                                     \
        char fmsg_[512];                                                     \
        snprintf(fmsg_, sizeof fmsg_, __VA_ARGS__);                          \
        cr_assert_fail("[%s] seed=%" PRIu64 ": %s", (f)->name, (f)->seed,    \
                       fmsg_);                                               \
    } while (0)

/* Ascending with id, up to SEQ_MAX ids spread over the whole key space
 * (random keys fall among them), with random low bits so that they do not
 * compress to nothing. */
#define SEQ_MAX (UINT64_C(1) << 18)
#define SEQ_SHIFTED 2
static uint64_t seq_key(const fill *f, uint64_t id)
{
    if (f->seq_even == SEQ_SHIFTED)
        return (id << 46) + ((id >> 6) & 1 ? (id & 63) << 40 : 0);
    return (id << 46) | (f->seq_even ? 0 : tu_mix64(f->seed ^ id) >> 24);
}

static void make_key(const fill *f, uint64_t id, keyrec *k)
{
    uint64_t u = id < f->nseq ? seq_key(f, id) : tu_mix64(f->seed + id);
    if (f->kind == BONSAI_KEY_U64) {
        memcpy(k->k, &u, 8);
        k->len = 8;
    } else {
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, u);
        memcpy(k->k, hex, 16);
        k->len = 16;
    }
}

static void make_val(const fill *f, uint64_t id, uint8_t *buf)
{
    tu_rng r = {id * 31 + f->seed};
    tu_fill(&r, buf, f->vlen);
}

static void live_add(fill *f, uint64_t id)
{
    if (f->nlive == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 4096;
        f->live = realloc(f->live, f->cap * sizeof *f->live);
        cr_assert(f->live != NULL);
    }
    f->live[f->nlive++] = id;
}

static int put_id(const fill *f, bonsai_txn *t, bonsai_map m, uint64_t id)
{
    keyrec k;
    uint8_t v[256];
    make_key(f, id, &k);
    make_val(f, id, v);
    bonsai_val key = tu_val(k.k, k.len), val = tu_val(v, f->vlen);
    return bonsai_put(t, m, &key, &val, f->flags);
}

static int del_id(const fill *f, bonsai_txn *t, bonsai_map m, uint64_t id)
{
    keyrec k;
    make_key(f, id, &k);
    bonsai_val key = tu_val(k.k, k.len);
    return bonsai_del(t, m, &key);
}

static unsigned sort_kind;
static int keyrec_cmp(const void *a, const void *b)
{
    const keyrec *x = a, *y = b;
    return tm_cmp(sort_kind, x->k, x->len, y->k, y->len);
}

/* Count, every live key with its value, absent ids absent, and an ordered
 * walk that sees exactly the live keys. */
static void verify(fill *f, bonsai_txn *t, bonsai_map m,
                   const uint64_t *gone, size_t ngone, const char *when)
{
    uint64_t n = UINT64_MAX;
    int rc = bonsai_count(t, m, &n);
    if (rc || n != f->nlive)
        FFAIL(f, "%s: count -> %s, %" PRIu64 " entries, expected %zu", when,
              tu_err(rc), n, f->nlive);
    uint8_t want[256];
    keyrec *keys = malloc((f->nlive ? f->nlive : 1) * sizeof *keys);
    cr_assert(keys != NULL);
    for (size_t i = 0; i < f->nlive; i++) {
        make_key(f, f->live[i], &keys[i]);
        make_val(f, f->live[i], want);
        bonsai_val key = tu_val(keys[i].k, keys[i].len), val = {0, NULL};
        rc = bonsai_get(t, m, &key, &val);
        if (rc)
            FFAIL(f, "%s: get of inserted key %s (id %" PRIu64 ") -> %s",
                  when, tu_fmt(f->kind, keys[i].k, keys[i].len), f->live[i],
                  tu_err(rc));
        if (val.size != f->vlen ||
            (f->vlen && memcmp(val.data, want, f->vlen) != 0))
            FFAIL(f, "%s: key %s has a wrong value (%zu bytes)", when,
                  tu_fmt(f->kind, keys[i].k, keys[i].len), val.size);
    }
    for (size_t i = 0; i < ngone; i++) {
        keyrec k;
        make_key(f, gone[i], &k);
        bonsai_val key = tu_val(k.k, k.len), val;
        rc = bonsai_get(t, m, &key, &val);
        if (rc != BONSAI_NOTFOUND)
            FFAIL(f, "%s: key %s should be absent, get -> %s", when,
                  tu_fmt(f->kind, k.k, k.len), tu_err(rc));
    }
    sort_kind = f->kind;
    qsort(keys, f->nlive, sizeof *keys, keyrec_cmp);
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(t, m, &cur));
    rc = bonsai_cursor_first(cur);
    for (size_t i = 0; i < f->nlive; i++) {
        if (rc)
            FFAIL(f, "%s: walk stopped after %zu of %zu entries: %s", when,
                  i, f->nlive, tu_err(rc));
        bonsai_val k = {0, NULL};
        TU_OK(bonsai_cursor_get(cur, &k, NULL));
        if (k.size != keys[i].len || memcmp(k.data, keys[i].k, k.size))
            FFAIL(f, "%s: walk entry %zu is %s, expected %s", when, i,
                  tu_fmt(f->kind, k.data, k.size),
                  tu_fmt(f->kind, keys[i].k, keys[i].len));
        rc = bonsai_cursor_next(cur);
    }
    if (rc != BONSAI_NOTFOUND)
        FFAIL(f, "%s: walk did not end after %zu entries: %s", when,
              f->nlive, tu_err(rc));
    bonsai_cursor_close(cur);
    free(keys);
}

/* Removes every other live id (a random half: ids were inserted in random
 * key order); returns the removed ids. */
static uint64_t *take_half(fill *f, size_t *n)
{
    uint64_t *gone = malloc((f->nlive / 2 + 1) * sizeof *gone);
    cr_assert(gone != NULL);
    size_t j = 0, g = 0;
    for (size_t i = 0; i < f->nlive; i++) {
        if (i % 2)
            gone[g++] = f->live[i];
        else
            f->live[j++] = f->live[i];
    }
    f->nlive = j;
    *n = g;
    return gone;
}

/* Inserts new ids until BONSAI_FULL; then a few more, each of which must be
 * 0 or BONSAI_FULL.  Returns the number inserted. */
static uint64_t fill_direct(fill *f, bonsai_map m, uint64_t *full_id)
{
    uint64_t ok = 0;
    for (;;) {
        uint64_t id = f->next++;
        int rc = put_id(f, NULL, m, id);
        if (rc == BONSAI_FULL) {
            *full_id = id;
            break;
        }
        if (rc)
            FFAIL(f, "put %" PRIu64 " (after %" PRIu64 " inserts) -> %s", id,
                  ok, tu_err(rc));
        live_add(f, id);
        if (++ok >= NEVER_FULL(f->max_size))
            FFAIL(f, "%" PRIu64 " inserts into a %" PRIu64 "-byte store "
                  "and no FULL", ok, f->max_size);
    }
    for (int i = 0; i < 200; i++) {
        uint64_t id = f->next++;
        int rc = put_id(f, NULL, m, id);
        if (rc == 0) {
            live_add(f, id);
            ok++;
        } else if (rc != BONSAI_FULL) {
            FFAIL(f, "put after FULL -> %s", tu_err(rc));
        }
    }
    return ok;
}

static void check_cap(fill *f, bonsai_db *db, const char *path)
{
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    if (st.max_size != f->max_size)
        FFAIL(f, "stat max_size %" PRIu64, st.max_size);
    if (st.bytes_used > f->max_size)
        FFAIL(f, "bytes_used %" PRIu64 " over the cap", st.bytes_used);
    if (path) {
        struct stat sb;
        cr_assert(stat(path, &sb) == 0);
        if ((uint64_t)sb.st_size > f->max_size)
            FFAIL(f, "file size %lld over the cap", (long long)sb.st_size);
    }
}

/* The first problem verify reports, for the failure message. */
static void first_problem(void *ctx, const char *map, uint64_t pgno,
                          const char *what)
{
    char *buf = ctx;
    if (!buf[0])
        snprintf(buf, 256, "map '%s', page %" PRIu64 ": %s", map, pgno,
                 what);
}

/* After a FULL the cached changes can still be written back: the room
 * the store reported for them was there. */
static void sync_after_full(fill *f, bonsai_db *db, const char *when)
{
    int rc = bonsai_sync(db);
    if (rc)
        FFAIL(f, "%s: bonsai_sync -> %s", when, tu_err(rc));
    uint64_t problems = UINT64_MAX;
    char first[256] = "";
    TU_OK(bonsai_verify(db, 0, first_problem, NULL, first, &problems));
    if (problems)
        FFAIL(f, "%s: verify found %" PRIu64 " problems, first %s", when,
              problems, first);
}

static void fill_start(fill *f, const char *name, unsigned kind,
                       size_t vlen, unsigned flags, uint64_t max_size,
                       uint64_t def_seed)
{
    memset(f, 0, sizeof *f);
    f->name = name;
    f->kind = kind;
    f->vlen = vlen;
    f->flags = flags;
    f->max_size = max_size;
    f->seed = tu_seed(name, def_seed);
}

static void direct_fill_test(const char *name, unsigned kind, size_t vlen,
                             unsigned flags, uint64_t def_seed,
                             const bonsai_options *o)
{
    fill f;
    fill_start(&f, name, kind, vlen, flags, o->max_size, def_seed);
    bonsai_db *db = tu_open(NULL, o);
    bonsai_map m = tu_map_create(db, NULL, "fill", kind);

    uint64_t full_id;
    uint64_t first = fill_direct(&f, m, &full_id);
    if (first < 100)
        FFAIL(&f, "only %" PRIu64 " entries fit in %" PRIu64 " bytes", first,
              f.max_size);
    sync_after_full(&f, db, "after the first FULL");
    check_cap(&f, db, NULL);
    verify(&f, NULL, m, &full_id, 1, "after the first FULL");

    size_t ngone;
    uint64_t *gone = take_half(&f, &ngone);
    for (size_t i = 0; i < ngone; i++) {
        int rc = del_id(&f, NULL, m, gone[i]);
        if (rc)
            FFAIL(&f, "delete %zu of %zu after FULL -> %s", i + 1, ngone,
                  tu_err(rc));
    }
    verify(&f, NULL, m, gone, ngone, "after deleting half");

    uint64_t again = fill_direct(&f, m, &full_id);
    /* the freed space is used again (a lenient bound: a quarter) */
    if (again < ngone / 4)
        FFAIL(&f, "deleted %zu entries, then only %" PRIu64 " inserts fit",
              ngone, again);
    sync_after_full(&f, db, "after the second FULL");
    check_cap(&f, db, NULL);
    verify(&f, NULL, m, gone, ngone, "after the second FULL");
    cr_log_info("[%s] %" PRIu64 " entries fit in %" PRIu64 " bytes; "
                "deleted %zu, then %" PRIu64 " fit again",
                name, first, f.max_size, ngone, again);
    free(gone);
    free(f.live);
    TU_OK(bonsai_close(db));
}

static bonsai_options capped(uint64_t cap)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = cap;
    return o;
}

Test(full, anonymous_u64_empty_values)
{
    bonsai_options o = capped(CAP);
    direct_fill_test("anon-u64-empty", BONSAI_KEY_U64, 0, BONSAI_NOOVERWRITE,
                     0xF0110001, &o);
}

Test(full, anonymous_bytes_100_byte_values)
{
    bonsai_options o = capped(CAP);
    direct_fill_test("anon-bytes-100", BONSAI_KEY_BYTES, 100,
                     BONSAI_NOOVERWRITE, 0xF0110002, &o);
}

/* 64-byte pages, random keys, the write cache on: at FULL most free pages
 * lie in runs shorter than a node.  The room the write cache counted on
 * must be runs a node fits, or the write-back after FULL fails (it did,
 * with 1 KiB and with 4 KiB nodes). */
static bonsai_options small_pages(uint32_t node_bytes)
{
    bonsai_options o = capped(2 * CAP);
    o.page_size = 64;
    o.node_bytes = node_bytes;
    o.write_cache_bytes = CAP;
    o.flush_delay_ms = 0;
    return o;
}

Test(full, anonymous_page_64_random_u64_syncs_after_full)
{
    bonsai_options o = small_pages(1024);
    direct_fill_test("anon-p64-u64", BONSAI_KEY_U64, 0, 0, 0xF0110005, &o);
}

Test(full, anonymous_page_64_random_bytes_syncs_after_full)
{
    bonsai_options o = small_pages(1024);
    direct_fill_test("anon-p64-bytes-8", BONSAI_KEY_BYTES, 8, 0, 0xF0110006,
                     &o);
}

/* Ascending ids until the store's bytes in use reach half the cap, or
 * SEQ_MAX of them. */
static void load_sequential(fill *f, bonsai_db *db, bonsai_map m)
{
    f->nseq = SEQ_MAX;
    for (;;) {
        if (f->next % 256 == 0) {
            bonsai_stat st;
            TU_OK(bonsai_sync(db));
            TU_OK(bonsai_db_stat(db, &st));
            if (st.bytes_used >= f->max_size / 2)
                break;
        }
        if (f->next == SEQ_MAX)
            break;
        uint64_t id = f->next++;
        int rc = put_id(f, NULL, m, id);
        if (rc)
            FFAIL(f, "ascending put %" PRIu64 " -> %s", id, tu_err(rc));
        live_add(f, id);
    }
    f->nseq = f->next;
}

/* With path: in that file, closed and opened again between the ascending
 * and the random puts, so that the leaves the random puts land in are
 * ones the store has not read. */
static void split_every_leaf_test(const char *name, uint64_t def_seed,
                                  int even, const bonsai_options *o,
                                  const char *path)
{
    fill f;
    fill_start(&f, name, BONSAI_KEY_U64, 0, 0, o->max_size, def_seed);
    f.seq_even = even;
    bonsai_db *db = tu_open(path, o);
    bonsai_map m = tu_map_create(db, NULL, "fill", f.kind);
    load_sequential(&f, db, m);
    if (path) {
        TU_OK(bonsai_close(db));
        db = tu_open(path, o);
        m = tu_map_open(db, NULL, "fill", f.kind);
    }
    uint64_t full_id, loaded = f.nlive;
    uint64_t added = fill_direct(&f, m, &full_id);
    sync_after_full(&f, db, "after FULL");
    check_cap(&f, db, path);
    verify(&f, NULL, m, &full_id, 1, "after FULL");
    cr_log_info("[%s] %" PRIu64 " ascending, then %" PRIu64 " random", name,
                loaded, added);
    free(f.live);
    TU_OK(bonsai_close(db));
}

Test(full, anonymous_random_into_full_leaves_syncs_after_full)
{
    bonsai_options o = capped(CAP);
    split_every_leaf_test("anon-split-every-leaf", 0xF0110007, 0, &o, NULL);
}

Test(full, anonymous_page_64_random_into_full_leaves_syncs_after_full)
{
    bonsai_options o = small_pages(1024);
    split_every_leaf_test("anon-p64-split-every-leaf", 0xF0110008, 0, &o,
                          NULL);
}

/* Evenly spaced keys pack to almost nothing (one step for a whole group),
 * so leaves are full by count: one random key among them widens a group,
 * and its leaf grows many times over. */
Test(full, anonymous_random_into_even_keys_syncs_after_full)
{
    bonsai_options o = capped(CAP);
    split_every_leaf_test("anon-even-split-every-leaf", 0xF0110009, 1, &o,
                          NULL);
}

/* Groups of 64 evenly spaced keys whose steps differ by turns also pack
 * to almost nothing; a key put among them shifts every later group of its
 * leaf by one entry, so each group then holds a difference of the other
 * step and widens from 0 to 41 bits: one put grows every group of a leaf
 * at once, past node_bytes. */
Test(full, anonymous_random_into_shifted_groups_syncs_after_full)
{
    bonsai_options o = capped(CAP);
    split_every_leaf_test("anon-shifted-split-every-leaf", 0xF011000A,
                          SEQ_SHIFTED, &o, NULL);
}

/* The same in a file opened again before the random puts: the budget
 * cannot know the leaves it has not read, so it counts them at their
 * worst until it has. */
Test(full, file_reopened_random_into_shifted_groups_syncs_after_full)
{
    bonsai_options o = capped(CAP);
    o.transactions = 0;
    split_every_leaf_test("file-shifted-split-every-leaf", 0xF011000B,
                          SEQ_SHIFTED, &o, tu_path("shifted.db"));
}


/* ---- byte keys whose restart points shift -------------------------------- */

/* A byte-key leaf stores every 16th key whole and the others as what they
 * add to the key before.  Keys are made in blocks of 16: a short one, then
 * one that adds a long filler, then 14 that add one byte to it.  Loaded in
 * order, a block's short key is whole; a key put among them moves every
 * later key of the leaf by one, so each block's last key, filler and all,
 * is stored whole instead of in one byte: the leaf nearly doubles, the
 * growth the budget must count for byte keys as it does for u64 groups. */
#define SHIFT_BLOCK 16u

/* Key `id` of the ascending load (extra 0), or the key put right after it
 * (extra 1..255). */
static size_t shifted_key(uint64_t id, unsigned filler, unsigned extra,
                          uint8_t *k)
{
    uint64_t block = id / SHIFT_BLOCK;
    unsigned j = (unsigned)(id % SHIFT_BLOCK);
    size_t n = 0;
    for (int i = 7; i >= 0; i--)
        k[n++] = (uint8_t)(block >> (8 * i));
    if (j > 0) {
        for (unsigned i = 0; i < filler; i++)
            k[n++] = (uint8_t)(tu_mix64(block * 4096 + i) | 1);
        k[n++] = (uint8_t)j;
    }
    if (extra)
        k[n++] = (uint8_t)extra;
    return n;
}

static int shifted_op(bonsai_map m, uint64_t id, unsigned filler,
                      unsigned extra, int del)
{
    uint8_t k[BONSAI_MAX_KEY];
    bonsai_val key = tu_val(k, shifted_key(id, filler, extra, k));
    bonsai_val val = tu_val("", 0);
    return del ? bonsai_del(NULL, m, &key) : bonsai_put(NULL, m, &key, &val, 0);
}

static void shifted_present(fill *f, bonsai_map m, const uint64_t *ids,
                            size_t n, unsigned filler, const char *when)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t k[BONSAI_MAX_KEY];
        bonsai_val key = tu_val(k, shifted_key(ids[i] >> 8, filler,
                                               (unsigned)(ids[i] & 255), k));
        bonsai_val val;
        int rc = bonsai_get(NULL, m, &key, &val);
        if (rc)
            FFAIL(f, "%s: get of put %zu (id %" PRIu64 ") -> %s", when, i,
                  ids[i], tu_err(rc));
    }
}

static void shifted_restarts_test(const char *name, uint64_t def_seed,
                                  unsigned filler, bonsai_options *o)
{
    fill f;
    fill_start(&f, name, BONSAI_KEY_BYTES, 0, 0, o->max_size, def_seed);
    bonsai_db *db = tu_open(NULL, o);
    bonsai_map m = tu_map_create(db, NULL, "fill", BONSAI_KEY_BYTES);
    for (;; f.next++) {
        if (f.next % SHIFT_BLOCK == 0) { /* whole blocks only */
            bonsai_stat st;
            TU_OK(bonsai_sync(db));
            TU_OK(bonsai_db_stat(db, &st));
            if (st.bytes_used >= f.max_size / 2)
                break;
        }
        int rc = shifted_op(m, f.next, filler, 0, 0);
        if (rc)
            FFAIL(&f, "ascending put %" PRIu64 " -> %s", f.next, tu_err(rc));
        live_add(&f, f.next << 8);
    }
    uint64_t loaded = f.nlive;
    tu_rng r = {f.seed};
    for (;;) {
        uint64_t id = tu_below(&r, loaded);
        unsigned extra = 1 + (unsigned)tu_below(&r, 255);
        int rc = shifted_op(m, id, filler, extra, 0);
        if (rc == BONSAI_FULL)
            break;
        if (rc)
            FFAIL(&f, "put after id %" PRIu64 " -> %s", id, tu_err(rc));
        live_add(&f, id << 8 | extra);
    }
    sync_after_full(&f, db, "after FULL");
    check_cap(&f, db, NULL);
    shifted_present(&f, m, f.live, f.nlive, filler, "after FULL");
    /* deletes after FULL shift restart points back */
    for (size_t i = loaded; i < f.nlive; i += 2) {
        int rc = shifted_op(m, f.live[i] >> 8, filler,
                            (unsigned)(f.live[i] & 255), 1);
        if (rc && rc != BONSAI_NOTFOUND) /* a key put twice goes once */
            FFAIL(&f, "delete after FULL -> %s", tu_err(rc));
    }
    sync_after_full(&f, db, "after the deletes");
    shifted_present(&f, m, f.live, loaded, filler, "after the deletes");
    cr_log_info("[%s] %" PRIu64 " ascending, then %zu put among them", name,
                loaded, f.nlive - loaded);
    free(f.live);
    TU_OK(bonsai_close(db));
}

/* Leaves of 64 entries, so a load leaves every block's short key whole. */
Test(full, anonymous_bytes_into_shifted_restarts_syncs_after_full)
{
    bonsai_options o = capped(CAP);
    o.node_entries = 64;
    shifted_restarts_test("anon-bytes-shifted-restarts", 0xF011000C, 900,
                          &o);
}

Test(full, anonymous_small_nodes_bytes_into_shifted_restarts_syncs)
{
    bonsai_options o = capped(CAP);
    o.node_bytes = 1024;
    o.node_entries = 32;
    shifted_restarts_test("anon-p1k-bytes-shifted-restarts", 0xF011000D, 200,
                          &o);
}

/* ---- file, transactions ------------------------------------------------- */

/* Write txns of new ids until a txn of a single put reports FULL (at the
 * put or at commit).  A txn of more puts that reports FULL is retried with
 * a quarter of them (the size grows back after 8 commits).  A FULL txn
 * must leave the committed contents alone: the count is checked after
 * each, the whole contents by the caller.  Returns the committed inserts;
 * *where says where the last FULL came, *fulls counts FULL txns. */
static uint64_t fill_txn(fill *f, bonsai_db *db, bonsai_map m, size_t batch,
                         const char **where, unsigned *fulls)
{
    uint64_t ok = 0;
    size_t max_batch = batch;
    unsigned streak = 0;
    uint64_t *pending = malloc(batch * sizeof *pending);
    cr_assert(pending != NULL);
    for (;;) {
        bonsai_txn *t;
        TU_OK(bonsai_txn_begin(db, 0, &t));
        size_t np = 0;
        int rc = 0;
        while (np < batch) {
            uint64_t id = f->next++;
            rc = put_id(f, t, m, id);
            if (rc)
                break;
            pending[np++] = id;
        }
        if (rc == BONSAI_FULL) {
            *where = "put";
            /* the txn is still consistent: its earlier puts are there */
            if (np) {
                keyrec k;
                make_key(f, pending[np - 1], &k);
                bonsai_val key = tu_val(k.k, k.len), val;
                int g = bonsai_get(t, m, &key, &val);
                if (g)
                    FFAIL(f, "get in the txn after FULL -> %s", tu_err(g));
            }
            bonsai_txn_abort(t);
        } else if (rc) {
            FFAIL(f, "put in txn -> %s", tu_err(rc));
        } else {
            rc = bonsai_txn_commit(t);
            if (rc == BONSAI_FULL)
                *where = "commit";
            else if (rc)
                FFAIL(f, "commit -> %s", tu_err(rc));
        }
        if (rc == BONSAI_FULL) {
            ++*fulls;
            bonsai_txn *r;
            TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
            uint64_t n = UINT64_MAX;
            TU_OK(bonsai_count(r, m, &n));
            if (n != f->nlive)
                FFAIL(f, "after a FULL txn (at %s) the map has %" PRIu64
                      " entries, committed %zu", *where, n, f->nlive);
            if (np) {
                keyrec k;
                make_key(f, pending[0], &k);
                bonsai_val key = tu_val(k.k, k.len), val;
                int g = bonsai_get(r, m, &key, &val);
                if (g != BONSAI_NOTFOUND)
                    FFAIL(f, "after a FULL txn, get of a key it put -> %s, "
                          "expected NOTFOUND", tu_err(g));
            }
            bonsai_txn_abort(r);
            TU_OK(bonsai_sync(db));
            if (batch == 1)
                break;
            batch = batch / 4 ? batch / 4 : 1;
            streak = 0;
            continue;
        }
        for (size_t i = 0; i < np; i++)
            live_add(f, pending[i]);
        ok += np;
        if (++streak >= 8 && batch < max_batch) { /* grow back */
            batch = batch * 2 < max_batch ? batch * 2 : max_batch;
            streak = 0;
        }
        if (ok >= NEVER_FULL(f->max_size))
            FFAIL(f, "%" PRIu64 " inserts into a %" PRIu64 "-byte store "
                  "and no FULL", ok, f->max_size);
    }
    free(pending);
    return ok;
}

static void verify_snapshot(fill *f, bonsai_db *db, bonsai_map m,
                            const uint64_t *gone, size_t ngone,
                            const char *when)
{
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    verify(f, t, m, gone, ngone, when);
    bonsai_txn_abort(t);
}

static void file_fill_test(const char *name, unsigned kind, size_t vlen,
                           uint64_t def_seed)
{
    fill f;
    memset(&f, 0, sizeof f);
    f.name = name;
    f.kind = kind;
    f.vlen = vlen;
    f.flags = BONSAI_NOOVERWRITE;
    f.max_size = CAP;
    f.seed = tu_seed(name, def_seed);
    const char *path = tu_path("full.db");
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = CAP;
    /* sync off keeps the many commits cheap; after each FULL the test
     * calls bonsai_sync, as a user would, so that space freed by earlier
     * commits can be reused whatever the implementation waits for */
    o.sync = 0;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "fill", kind);

    const char *where = "?";
    unsigned fulls = 0;
    uint64_t first = fill_txn(&f, db, m, 200, &where, &fulls);
    if (first < 100)
        FFAIL(&f, "only %" PRIu64 " entries committed in 1 MiB", first);
    check_cap(&f, db, path);
    verify_snapshot(&f, db, m, NULL, 0, "after the FULL txn");
    /* a write transaction may begin again */
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    bonsai_txn_abort(t);
    TU_OK(bonsai_close(db));

    db = tu_open(path, &o);
    m = tu_map_open(db, NULL, "fill", kind);
    verify_snapshot(&f, db, m, NULL, 0, "after FULL and reopen");
    check_cap(&f, db, path);

    /* Deletes.  A copy-on-write delete needs space itself, so a delete txn
     * may report FULL too; then it is retried smaller, down to one key.
     * Whatever happens, the store must match what was committed. */
    size_t keep = f.nlive;
    size_t ngone;
    uint64_t *gone = take_half(&f, &ngone);
    size_t done = 0, batch = 10;
    while (done < ngone) {
        TU_OK(bonsai_txn_begin(db, 0, &t));
        size_t end = done + batch < ngone ? done + batch : ngone;
        int rc = 0;
        for (size_t i = done; i < end && rc == 0; i++)
            rc = del_id(&f, t, m, gone[i]);
        if (rc == 0)
            rc = bonsai_txn_commit(t);
        else
            bonsai_txn_abort(t);
        if (rc == BONSAI_FULL) {
            TU_OK(bonsai_sync(db));
            if (batch == 1)
                break;
            batch = batch / 4 ? batch / 4 : 1;
            continue;
        }
        if (rc)
            FFAIL(&f, "delete txn -> %s", tu_err(rc));
        done = end;
        batch = batch * 2 < 2000 ? batch * 2 : 2000;
    }
    /* ids [done, ngone) of gone are still present */
    for (size_t i = done; i < ngone; i++)
        live_add(&f, gone[i]);
    cr_assert_eq(f.nlive + done, keep);
    TU_OK(bonsai_sync(db));
    verify_snapshot(&f, db, m, gone, done, "after deleting");

    /* and the space is used again */
    uint64_t again = fill_txn(&f, db, m, 100, &where, &fulls);
    if (again < done / 4)
        FFAIL(&f, "deleted %zu entries, then only %" PRIu64 " inserts fit",
              done, again);
    verify_snapshot(&f, db, m, gone, done, "after the second FULL");
    TU_OK(bonsai_close(db));
    db = tu_open(path, &o);
    m = tu_map_open(db, NULL, "fill", kind);
    verify_snapshot(&f, db, m, gone, done, "after the second FULL, reopened");
    check_cap(&f, db, path);
    cr_log_info("[%s] %" PRIu64 " entries committed in 1 MiB; deleted %zu "
                "of %zu, then %" PRIu64 " fit again; %u FULL txns, the last "
                "at %s",
                name, first, done, ngone, again, fulls, where);
    free(gone);
    free(f.live);
    TU_OK(bonsai_close(db));
}

Test(full, file_txn_u64_empty_values)
{
    file_fill_test("file-u64-empty", BONSAI_KEY_U64, 0, 0xF0110003);
}

Test(full, file_txn_bytes_100_byte_values)
{
    file_fill_test("file-bytes-100", BONSAI_KEY_BYTES, 100, 0xF0110004);
}

/* ---- an emptied store takes as many again ------------------------------ */

/* Key i of the kind, ascending with i: the u64 i, or 10 decimal digits. */
static int put_seq(bonsai_map m, unsigned kind, uint64_t i)
{
    if (kind == BONSAI_KEY_U64)
        return bonsai_put_u64(NULL, m, i, NULL, 0);
    char buf[24];
    snprintf(buf, sizeof buf, "%010" PRIu64, i % UINT64_C(10000000000));
    bonsai_val k = tu_val(buf, 10);
    return bonsai_put(NULL, m, &k, NULL, 0);
}

static int del_seq(bonsai_map m, unsigned kind, uint64_t i)
{
    if (kind == BONSAI_KEY_U64)
        return bonsai_del_u64(NULL, m, i);
    char buf[24];
    snprintf(buf, sizeof buf, "%010" PRIu64, i % UINT64_C(10000000000));
    bonsai_val k = tu_val(buf, 10);
    return bonsai_del(NULL, m, &k);
}

/* Fills to FULL with ascending keys (each put on its own), then deletes
 * them all in the same order, three times: the emptied map must keep no
 * node, and every page it had must serve the next fill, which reaches
 * the same count. */
static void refill_test(unsigned kind, int transactions)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = CAP;
    o.node_entries = 4; /* many nodes, a deep tree */
    o.transactions = transactions;
    o.sync = 0;
    bonsai_db *db = tu_open(transactions ? tu_path("refill.db") : NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", kind);
    uint64_t first = 0;
    for (int round = 0; round < 3; round++) {
        uint64_t n = 0;
        int rc;
        while ((rc = put_seq(m, kind, n)) == 0) {
            n++;
            cr_assert(n < NEVER_FULL(CAP), "BONSAI_FULL never came");
        }
        TU_RC(rc, BONSAI_FULL);
        if (round == 0)
            first = n;
        cr_assert_eq(n, first, "round %d: %" PRIu64 " entries fit, the "
                     "first time %" PRIu64, round, n, first);
        for (uint64_t i = 0; i < n; i++) {
            rc = del_seq(m, kind, i);
            cr_assert(rc == 0, "round %d: delete %" PRIu64 " of %" PRIu64
                      " -> %s", round, i, n, tu_err(rc));
        }
        bonsai_map_info mi;
        TU_OK(bonsai_map_stat(NULL, m, &mi));
        cr_assert(mi.entries == 0 && mi.depth == 0 && mi.leaf_nodes == 0 &&
                      mi.branch_nodes == 0,
                  "round %d: emptied, the map has depth %u, %" PRIu64
                  " leaves and %" PRIu64 " branches", round, mi.depth,
                  mi.leaf_nodes, mi.branch_nodes);
        bonsai_space sp;
        TU_OK(bonsai_space_stat(db, &sp));
        cr_assert_eq(sp.node_bytes, 0, "round %d: %" PRIu64 " bytes of "
                     "nodes kept", round, sp.node_bytes);
    }
    uint64_t problems = 1;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    cr_assert_eq(problems, 0);
    cr_log_info("%u/%d: %" PRIu64 " entries fit each time", kind,
                transactions, first);
    TU_OK(bonsai_close(db));
}

Test(full, emptied_u64_map_takes_as_many_again_direct)
{
    refill_test(BONSAI_KEY_U64, 0);
}

Test(full, emptied_u64_map_takes_as_many_again_txn)
{
    refill_test(BONSAI_KEY_U64, 1);
}

Test(full, emptied_bytes_map_takes_as_many_again_direct)
{
    refill_test(BONSAI_KEY_BYTES, 0);
}

Test(full, emptied_bytes_map_takes_as_many_again_txn)
{
    refill_test(BONSAI_KEY_BYTES, 1);
}

/* ---- no transactions, write cache, near the cap ------------------------- */

/* Random puts and deletes of ids below CHURN_IDS near the cap of a file
 * without transactions, with a write cache as large as the cap: every
 * change acknowledged (0) must be written back by bonsai_sync and close,
 * and every one refused (BONSAI_FULL) must have changed nothing.  A
 * cached delete dirties its leaf and may merge nodes; when deletes took
 * no room ahead, the cache outgrew what could be written: sync, verify and
 * close answered FULL and deleted keys came back after a reopen. */
#define CHURN_IDS 100000u

static uint64_t churn_key(uint64_t seed, uint64_t id)
{
    return tu_mix64(seed ^ (id * UINT64_C(0x9E3779B97F4A7C15)));
}

static void churn_check(uint64_t seed, bonsai_map m,
                        const uint8_t *live, const char *when)
{
    uint64_t n = 0, count = UINT64_MAX;
    for (uint64_t id = 0; id < CHURN_IDS; id++) {
        bonsai_val v = {0, NULL};
        int rc = bonsai_get_u64(NULL, m, churn_key(seed, id), &v);
        if (live[id]) {
            n++;
            uint8_t want[16];
            memset(want, (int)(id & 0xff), sizeof want);
            cr_assert(rc == 0 && v.size == 16 && !memcmp(v.data, want, 16),
                      "seed=%" PRIu64 " %s: id %" PRIu64 " (acknowledged "
                      "put) -> %s, %zu bytes", seed, when, id, tu_err(rc),
                      v.size);
        } else {
            cr_assert(rc == BONSAI_NOTFOUND,
                      "seed=%" PRIu64 " %s: id %" PRIu64 " (acknowledged "
                      "delete, or never put) -> %s", seed, when, id,
                      tu_err(rc));
        }
    }
    TU_OK(bonsai_count(NULL, m, &count));
    cr_assert(count == n, "seed=%" PRIu64 " %s: count %" PRIu64 ", %" PRIu64
              " live", seed, when, count, n);
}

Test(full, file_no_txn_cached_deletes_near_cap_are_written_back)
{
    uint64_t seed = tu_seed("no-txn-churn", 0xF011000A);
    tu_rng r = {seed};
    const char *path = tu_path("churn.db");
    bonsai_options o = capped(CAP);
    o.transactions = 0;
    o.write_cache_bytes = CAP;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "churn", BONSAI_KEY_U64);
    uint8_t *live = calloc(CHURN_IDS, 1);
    cr_assert(live != NULL);
    uint64_t ops = tu_scaled(300000, 150000), fulls = 0, dels = 0;
    for (uint64_t op = 0; op < ops; op++) {
        uint64_t id = tu_below(&r, CHURN_IDS), k = churn_key(seed, id);
        int rc;
        if (tu_chance(&r, 300)) {
            rc = bonsai_del_u64(NULL, m, k);
            cr_assert(rc == (live[id] ? 0 : BONSAI_NOTFOUND) ||
                          rc == BONSAI_FULL,
                      "seed=%" PRIu64 " op %" PRIu64 ": delete of %s id -> "
                      "%s", seed, op, live[id] ? "a live" : "an absent",
                      tu_err(rc));
            if (rc == 0) {
                live[id] = 0;
                dels++;
            }
        } else {
            uint8_t v[16];
            memset(v, (int)(id & 0xff), sizeof v);
            bonsai_val val = tu_val(v, sizeof v);
            rc = bonsai_put_u64(NULL, m, k, &val, 0);
            cr_assert(rc == 0 || rc == BONSAI_FULL,
                      "seed=%" PRIu64 " op %" PRIu64 ": put -> %s", seed, op,
                      tu_err(rc));
            if (rc == 0)
                live[id] = 1;
        }
        fulls += rc == BONSAI_FULL;
        if (op % 50000 == 49999) {
            rc = bonsai_sync(db);
            cr_assert(rc == 0, "seed=%" PRIu64 " op %" PRIu64 ": sync -> %s",
                      seed, op, tu_err(rc));
        }
    }
    cr_assert(fulls > 0, "seed=%" PRIu64 ": the cap was never reached", seed);
    int rc = bonsai_sync(db);
    cr_assert(rc == 0, "seed=%" PRIu64 ": sync -> %s", seed, tu_err(rc));
    uint64_t problems = UINT64_MAX;
    char first[256] = "";
    TU_OK(bonsai_verify(db, 0, first_problem, NULL, first, &problems));
    cr_assert(problems == 0, "seed=%" PRIu64 ": verify: %" PRIu64
              " problems, first %s", seed, problems, first);
    churn_check(seed, m, live, "before close");
    rc = bonsai_close(db);
    cr_assert(rc == 0, "seed=%" PRIu64 ": close -> %s", seed, tu_err(rc));

    o.max_size = 4 * CAP; /* room to spare: what is there is what was kept */
    db = tu_open(path, &o);
    m = tu_map_open(db, NULL, "churn", BONSAI_KEY_U64);
    churn_check(seed, m, live, "after reopening");
    cr_log_info("[no-txn-churn] %" PRIu64 " ops, %" PRIu64 " FULL, %" PRIu64
                " deletes", ops, fulls, dels);
    free(live);
    TU_OK(bonsai_close(db));
}

/* ---- a map created at the cap, without transactions --------------------- */

static int list_names(void *ctx, const char *name, unsigned kind,
                      uint64_t entries)
{
    (void)kind;
    (void)entries;
    char *names = ctx;
    strcat(names, name);
    return 0;
}

/* Four maps of one entry per node (node_entries 4: the catalog's leaf is
 * full), map "a" filled to the cap, then a fifth map: its record needs a
 * new catalog node.  Its room must be found at the create, or the create
 * refused: a record left for later found no room, and the catalog was
 * left half split (a branch at page 0), which close wrote to the file. */
static void create_at_full_test(const char *path, uint64_t cache)
{
    bonsai_options o = capped(7u << 20);
    o.transactions = 0;
    o.write_cache_bytes = cache;
    o.node_entries = 4;
    o.page_size = 65536;
    bonsai_db *db = tu_open(path, &o);
    static const char *const names[] = {"a", "b", "c", "d"};
    bonsai_map m[4];
    for (int i = 0; i < 4; i++)
        m[i] = tu_map_create(db, NULL, names[i], BONSAI_KEY_U64);
    uint64_t n = 0, k = 0;
    int rc;
    while ((rc = bonsai_put_u64(NULL, m[0], k++ * 7919, NULL, 0)) == 0)
        n++;
    TU_RC(rc, BONSAI_FULL);
    /* and the last pages that single keys still fit */
    for (uint64_t i = 0; i < 20000; i++)
        if (bonsai_put_u64(NULL, m[0], i * 31 + 3, NULL,
                           BONSAI_NOOVERWRITE) == 0)
            n++;
    bonsai_map e = NULL;
    rc = bonsai_map_create(db, NULL, "e", BONSAI_KEY_U64, &e);
    cr_assert(rc == 0 || rc == BONSAI_FULL, "create at FULL -> %s",
              tu_err(rc));
    const char *want = rc == 0 ? "abcde" : "abcd";
    if (rc) {
        bonsai_map x;
        TU_RC(bonsai_map_open(db, NULL, "e", &x, NULL), BONSAI_NOTFOUND);
    }
    char listed[64] = "";
    TU_OK(bonsai_map_list(db, NULL, list_names, listed));
    cr_assert_str_eq(listed, want);
    TU_OK(bonsai_sync(db));
    uint64_t problems = UINT64_MAX;
    char first[256] = "";
    TU_OK(bonsai_verify(db, 0, first_problem, NULL, first, &problems));
    cr_assert(problems == 0, "verify: %" PRIu64 " problems, first %s",
              problems, first);
    uint64_t count = 0;
    TU_OK(bonsai_count(NULL, m[0], &count));
    cr_assert_eq(count, n);
    TU_OK(bonsai_close(db));
    if (!path)
        return;
    o.max_size = 64u << 20;
    db = tu_open(path, &o);
    listed[0] = 0;
    TU_OK(bonsai_map_list(db, NULL, list_names, listed));
    cr_assert_str_eq(listed, want);
    bonsai_map a = tu_map_open(db, NULL, "a", BONSAI_KEY_U64);
    TU_OK(bonsai_count(NULL, a, &count));
    cr_assert_eq(count, n);
    TU_OK(bonsai_verify(db, 0, first_problem, NULL, first, &problems));
    cr_assert(problems == 0, "verify after reopening: %" PRIu64
              " problems, first %s", problems, first);
    TU_OK(bonsai_close(db));
}

Test(full, no_txn_map_created_at_full_leaves_the_catalog_whole)
{
    create_at_full_test(tu_path("create.db"), 0);
    create_at_full_test(NULL, 0);
    create_at_full_test(tu_path("create-cached.db"), 1u << 20);
    create_at_full_test(NULL, 1u << 20);
}

/* ---- calls that need no room, in a full store ---------------------------- */

typedef struct list_want {
    uint64_t entries; /* of map "m" */
    int seen, others;
} list_want;

static int list_count(void *ctx, const char *name, unsigned kind,
                      uint64_t entries)
{
    (void)kind;
    list_want *w = ctx;
    if (strcmp(name, "m") == 0) {
        w->seen++;
        w->entries = entries;
    } else {
        w->others++;
    }
    return 0;
}

/* In a store at its cap, with puts waiting in the write cache, what adds
 * nothing must answer as it would anywhere: a NOOVERWRITE put of a
 * present key BONSAI_EXISTS, a delete of an absent key BONSAI_NOTFOUND
 * (they answered BONSAI_FULL: the path was copied, or waiting puts
 * applied, before the key was looked up), and listing, count, cursor
 * moves, map_stat and verify succeed (a listing wrote the catalog).  t is
 * a write transaction, or NULL. */
static void no_room_needed(bonsai_db *db, bonsai_txn *t, bonsai_map m,
                           uint64_t present, uint64_t n, const char *what)
{
    TU_RC(bonsai_put_u64(t, m, present, NULL, BONSAI_NOOVERWRITE),
          BONSAI_EXISTS);
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t absent = tu_mix64(i ^ 0xAB5E17);
        bonsai_val v;
        if (bonsai_get_u64(t, m, absent, &v) == 0)
            continue;
        int rc = bonsai_del_u64(t, m, absent);
        cr_assert(rc == BONSAI_NOTFOUND, "%s: delete of an absent key -> %s",
                  what, tu_err(rc));
    }
    list_want w = {0, 0, 0};
    int rc = bonsai_map_list(db, t, list_count, &w);
    cr_assert(rc == 0, "%s: map_list -> %s", what, tu_err(rc));
    cr_assert(w.seen == 1 && w.entries == n, "%s: map_list gave %" PRIu64
              " entries (seen %d), expected %" PRIu64, what, w.entries,
              w.seen, n);
    uint64_t count = 0;
    rc = bonsai_count(t, m, &count);
    cr_assert(rc == 0 && count == n, "%s: count -> %s, %" PRIu64
              " entries, expected %" PRIu64, what, tu_err(rc), count, n);
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(t, m, &cur));
    rc = bonsai_cursor_first(cur);
    for (int i = 0; i < 50 && rc == 0; i++)
        rc = bonsai_cursor_next(cur);
    cr_assert(rc == 0, "%s: cursor -> %s", what, tu_err(rc));
    TU_OK(bonsai_cursor_seek_u64(cur, present));
    bonsai_cursor_close(cur);
    bonsai_map_info mi;
    rc = bonsai_map_stat(t, m, &mi);
    cr_assert(rc == 0 && mi.entries == n, "%s: map_stat -> %s", what,
              tu_err(rc));
    if (t)
        return;
    uint64_t problems = UINT64_MAX;
    char first[256] = "";
    rc = bonsai_verify(db, 0, first_problem, NULL, first, &problems);
    cr_assert(rc == 0 && problems == 0, "%s: verify -> %s, %" PRIu64
              " problems, first %s", what, tu_err(rc), problems, first);
}

/* Random puts until n_full of them answered BONSAI_FULL; returns the
 * puts that went in (each of a new key).  The first key put is *first. */
static uint64_t put_until_full(bonsai_txn *t, bonsai_map m, uint64_t seed,
                               int n_full, uint64_t *first)
{
    uint8_t v[16] = {0};
    bonsai_val val = tu_val(v, sizeof v);
    uint64_t n = 0;
    *first = tu_mix64(seed);
    for (uint64_t i = 0; n_full > 0; i++) {
        int rc = bonsai_put_u64(t, m, tu_mix64(seed + i), &val, 0);
        if (rc == BONSAI_FULL) {
            n_full--;
            continue;
        }
        cr_assert(rc == 0, "put -> %s", tu_err(rc));
        n++;
    }
    return n;
}

Test(full, calls_that_add_nothing_need_no_room)
{
    /* without transactions, the write cache on: puts wait */
    bonsai_options o = capped(CAP);
    o.write_cache_bytes = CAP;
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    uint64_t first, n = put_until_full(NULL, m, 0xF011000B, 200, &first);
    no_room_needed(db, NULL, m, first, n, "no transactions");
    TU_OK(bonsai_close(db));

    /* a file with transactions: inside a write transaction at the cap, and
     * on their own after it */
    const char *path = tu_path("noroom.db");
    o = capped(CAP);
    o.sync = 0;
    db = tu_open(path, &o);
    m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    uint8_t v[16] = {0};
    bonsai_val val = tu_val(v, sizeof v);
    uint64_t committed = 0, present = 0, got = 0;
    bonsai_txn *t = NULL;
    int rc = 0;
    for (uint64_t seed = 1; rc == 0; seed++) {
        TU_OK(bonsai_txn_begin(db, 0, &t));
        got = 0;
        for (uint64_t i = 0; i < 500 && rc == 0; i++) {
            rc = bonsai_put_u64(t, m, tu_mix64(seed << 32 | i), &val, 0);
            got += rc == 0;
        }
        if (rc == BONSAI_FULL) /* t stays open, at the cap */
            break;
        TU_OK(rc);
        rc = bonsai_txn_commit(t);
        t = NULL;
        if (rc == 0) {
            committed += got;
            present = tu_mix64(seed << 32);
        } else {
            TU_RC(rc, BONSAI_FULL);
            rc = 0; /* the next transaction meets the cap at a put */
        }
    }
    cr_assert(committed > 0, "no transaction committed before the cap");
    uint64_t in_t = 0;
    for (uint64_t i = 0; i < 500; i++) { /* those that go in wait */
        rc = bonsai_put_u64(t, m, tu_mix64(i ^ 0x7EA), &val,
                            BONSAI_NOOVERWRITE);
        cr_assert(rc == 0 || rc == BONSAI_FULL, "put -> %s", tu_err(rc));
        in_t += rc == 0;
    }
    no_room_needed(db, t, m, present, committed + got + in_t,
                   "in a full transaction");
    bonsai_txn_abort(t);
    no_room_needed(db, NULL, m, present, committed, "autocommit");
    TU_OK(bonsai_close(db));
    cr_log_info("[no-room] %" PRIu64 " puts before FULL without "
                "transactions; %" PRIu64 " committed, %" PRIu64 " more in "
                "the full transaction", n, committed, in_t);
}

/* SPDX-License-Identifier: MIT */
/*
 * test_pending.c - puts that wait in the write cache before they reach the
 * tree (lib/put.h): what a user sees must not change.  Random puts
 * into a tree too large for the decoded-leaf cache wait; reads, deletes,
 * overwrites, put-if-absent, counts, cursors, commit and abort must all
 * see them exactly as if they had gone to the tree at once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

TestSuite(pending, .init = tu_setup, .fini = tu_teardown);

/* Small nodes and a small cache: a few thousand keys are enough for most
 * puts to wait, and for several batches to be applied. */
static bonsai_options small_cache(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.node_bytes = 512;
    o.node_entries = 64;
    o.write_cache_bytes = 64 * 1024;
    return o;
}

static void put_u64(bonsai_txn *txn, bonsai_map m, tm_model *model,
                    uint64_t k, uint64_t v, size_t vlen)
{
    bonsai_val val = tu_val(&v, vlen);
    TU_OK(bonsai_put_u64(txn, m, k, &val, 0));
    tm_put(model, &k, 8, &v, vlen);
}

/* Mixed operations, checked against the model after every phase. */
static void mixed_ops(bonsai_db *db, bonsai_txn *txn, bonsai_map m,
                      tm_model *model, uint64_t seed, int phases)
{
    tu_rng r = {seed};
    for (int phase = 0; phase < phases; phase++) {
        uint64_t n = tu_scaled(4000, 500);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = tu_below(&r, 50000);
            unsigned what = (unsigned)tu_below(&r, 100);
            if (what < 80) {
                put_u64(txn, m, model, k, tu_rand(&r), tu_below(&r, 9));
            } else if (what < 88) {
                uint64_t v = 7;
                bonsai_val val = tu_val(&v, 8);
                size_t at;
                int want = tm_find(model, &k, 8, &at) ? BONSAI_EXISTS : 0;
                TU_RC(bonsai_put_u64(txn, m, k, &val, BONSAI_NOOVERWRITE),
                      want);
                if (!want)
                    tm_put(model, &k, 8, &v, 8);
            } else if (what < 96) {
                bonsai_val got;
                size_t at;
                int rc = bonsai_get_u64(txn, m, k, &got);
                if (tm_find(model, &k, 8, &at)) {
                    TU_RC(rc, 0);
                    cr_assert(got.size == model->e[at].vlen &&
                                  (got.size == 0 ||
                                   memcmp(got.data, model->e[at].val,
                                          got.size) == 0),
                              "seed=%llu: value of %llu differs",
                              (unsigned long long)seed,
                              (unsigned long long)k);
                } else {
                    TU_RC(rc, BONSAI_NOTFOUND);
                }
            } else {
                int want = tm_del(model, &k, 8) ? 0 : BONSAI_NOTFOUND;
                TU_RC(bonsai_del_u64(txn, m, k), want);
            }
        }
        char ctx[64];
        snprintf(ctx, sizeof ctx, "seed=%llu phase %d",
                 (unsigned long long)seed, phase);
        TU_ASSERT_SAME(txn, m, model, ctx);
    }
    (void)db;
}

Test(pending, anonymous_mixed_ops_match_the_model)
{
    bonsai_options o = small_cache();
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tm_model model;
    tm_init(&model, BONSAI_KEY_U64);
    mixed_ops(db, NULL, m, &model, tu_seed("pending-anon", 11), 6);
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

Test(pending, a_get_sees_the_newest_waiting_value)
{
    bonsai_options o = small_cache();
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tu_rng r = {tu_seed("pending-newest", 5)};
    for (int i = 0; i < 20000; i++)
        TU_OK(bonsai_put_u64(NULL, m, tu_rand(&r), NULL, 0));
    uint64_t k = tu_rand(&r);
    for (uint64_t v = 1; v <= 3; v++) {
        bonsai_val val = tu_val(&v, 8), got;
        TU_OK(bonsai_put_u64(NULL, m, k, &val, 0));
        TU_OK(bonsai_get_u64(NULL, m, k, &got));
        cr_assert(got.size == 8 && memcmp(got.data, &v, 8) == 0);
    }
    uint64_t count;
    TU_OK(bonsai_count(NULL, m, &count));
    cr_assert(count == 20001, "count %llu", (unsigned long long)count);
    TU_OK(bonsai_close(db));
}

Test(pending, abort_forgets_waiting_puts_and_commit_keeps_them)
{
    bonsai_options o = small_cache();
    bonsai_db *db = tu_open(tu_path("s.db"), &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tm_model model;
    tm_init(&model, BONSAI_KEY_U64);
    uint64_t seed = tu_seed("pending-txn", 3);
    for (int round = 0; round < 6; round++) {
        bonsai_txn *txn;
        TU_OK(bonsai_txn_begin(db, 0, &txn));
        tm_model tried;
        memset(&tried, 0, sizeof tried);
        tm_copy(&tried, &model);
        mixed_ops(db, txn, m, &tried, seed + (uint64_t)round, 1);
        if (round % 2) {
            bonsai_txn_abort(txn);
        } else {
            TU_OK(bonsai_txn_commit(txn));
            tm_copy(&model, &tried);
        }
        tm_free(&tried);
        TU_ASSERT_SAME(NULL, m, &model, round % 2 ? "after abort"
                                                  : "after commit");
    }
    TU_OK(bonsai_close(db));
    db = tu_open(tu_path("s.db"), &o);
    m = tu_map_open(db, NULL, "m", BONSAI_KEY_U64);
    TU_ASSERT_SAME(NULL, m, &model, "after reopen");
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

/* Key k of a sequential load: the u64 itself, or "key:" and k
 * big-endian (byte keys in the same order). */
typedef struct seq_key {
    uint8_t b[12];
    bonsai_val v;
} seq_key;

static const bonsai_val *seq_key_of(unsigned kind, uint64_t k, seq_key *s)
{
    if (kind == BONSAI_KEY_U64) {
        memcpy(s->b, &k, 8);
        s->v = (bonsai_val){8, s->b};
    } else {
        memcpy(s->b, "key:", 4);
        for (int i = 0; i < 8; i++)
            s->b[4 + i] = (uint8_t)(k >> (56 - 8 * i));
        s->v = (bonsai_val){12, s->b};
    }
    return &s->v;
}

static uint64_t seq_key_value(unsigned kind, const uint8_t *key)
{
    uint64_t k = 0;
    if (kind == BONSAI_KEY_U64)
        memcpy(&k, key, 8);
    else
        for (int i = 0; i < 8; i++)
            k = k << 8 | key[4 + i];
    return k;
}

static void seq_put(bonsai_map m, unsigned kind, tm_model *model, uint64_t k,
                    uint64_t v, size_t vlen)
{
    seq_key s;
    const bonsai_val *key = seq_key_of(kind, k, &s);
    bonsai_val val = tu_val(&v, vlen);
    TU_OK(bonsai_put(NULL, m, key, &val, 0));
    tm_put(model, key->data, key->size, &v, vlen);
}

static void seq_del(bonsai_map m, unsigned kind, tm_model *model, uint64_t k)
{
    seq_key s;
    const bonsai_val *key = seq_key_of(kind, k, &s);
    TU_RC(bonsai_del(NULL, m, key),
          tm_del(model, key->data, key->size) ? 0 : BONSAI_NOTFOUND);
}

/* One step of a sequential load into `seq` with, now and then, a change
 * that moves or rewrites its last leaf behind the load's back. */
static void seq_step(bonsai_db *db, bonsai_map seq, unsigned kind,
                     bonsai_map other, tm_model *ms, tm_model *mo, tu_rng *r,
                     uint64_t *next)
{
    uint64_t k = *next, v = tu_rand(r);
    unsigned what = (unsigned)tu_below(r, 1000);
    if (what < 900) { /* the append itself */
        *next += 1 + tu_below(r, 3);
        seq_put(seq, kind, ms, k, 0, 0);
    } else if (what < 920 && ms->n) { /* the last key goes */
        seq_del(seq, kind, ms, seq_key_value(kind, ms->e[ms->n - 1].key));
    } else if (what < 940) { /* a key before the end */
        seq_put(seq, kind, ms, tu_below(r, k + 1), v, 8);
    } else if (what < 960) { /* another map */
        put_u64(NULL, other, mo, tu_rand(r), v, tu_below(r, 9));
    } else if (what < 970) { /* any key goes */
        seq_del(seq, kind, ms, tu_below(r, k + 1));
    } else if (what < 980) { /* the load jumps ahead */
        *next += 1 + tu_below(r, UINT64_C(1) << 40);
    } else if (what < 990) {
        TU_OK(bonsai_sync(db));
    } else { /* a read that decodes other leaves */
        seq_key s;
        const bonsai_val *key = seq_key_of(kind, tu_below(r, k + 1), &s);
        bonsai_val got;
        size_t i;
        TU_RC(bonsai_get(NULL, seq, key, &got),
              tm_find(ms, key->data, key->size, &i) ? 0 : BONSAI_NOTFOUND);
    }
}

/* A sequential load goes straight to its last leaf while nothing else
 * changed since the last append; deletes, puts elsewhere, write-backs
 * and reads in between must all be seen.  (The sanitizer build also
 * checks every such shortcut against a walk down the tree.) */
static void sequential_load_among_other_changes(unsigned kind)
{
    bonsai_options o = small_cache();
    o.transactions = 0; /* where loads take the direct path */
    bonsai_db *db = tu_open(tu_path("s.db"), &o);
    bonsai_map seq = tu_map_create(db, NULL, "seq", kind);
    bonsai_map other = tu_map_create(db, NULL, "other", BONSAI_KEY_U64);
    tm_model ms, mo;
    tm_init(&ms, kind);
    tm_init(&mo, BONSAI_KEY_U64);
    uint64_t seed = tu_seed("pending-seq", 17);
    tu_rng r = {seed};
    uint64_t next = 1;
    for (int phase = 0; phase < 4; phase++) {
        uint64_t n = tu_scaled(20000, 3000);
        for (uint64_t i = 0; i < n; i++)
            seq_step(db, seq, kind, other, &ms, &mo, &r, &next);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "seed=%llu phase %d",
                 (unsigned long long)seed, phase);
        TU_ASSERT_SAME(NULL, seq, &ms, ctx);
        TU_ASSERT_SAME(NULL, other, &mo, ctx);
    }
    TU_OK(bonsai_close(db));
    db = tu_open(tu_path("s.db"), &o);
    seq = tu_map_open(db, NULL, "seq", kind);
    other = tu_map_open(db, NULL, "other", BONSAI_KEY_U64);
    TU_ASSERT_SAME(NULL, seq, &ms, "after reopen");
    TU_ASSERT_SAME(NULL, other, &mo, "after reopen");
    tm_free(&ms);
    tm_free(&mo);
    TU_OK(bonsai_close(db));
}

Test(pending, sequential_u64_load_among_other_changes_matches_the_model)
{
    sequential_load_among_other_changes(BONSAI_KEY_U64);
}

Test(pending, sequential_byte_key_load_among_other_changes_matches_the_model)
{
    sequential_load_among_other_changes(BONSAI_KEY_BYTES);
}

static int cmp_u64_ref(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Puts that wait count their room ahead: filling to the cap, every put
 * acknowledged is there after BONSAI_FULL, and nothing is left waiting. */
Test(pending, full_keeps_every_acknowledged_put)
{
    bonsai_options o = small_cache();
    o.max_size = 1 << 20;
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tu_rng r = {tu_seed("pending-full", 9)};
    /* the acknowledged keys, put into the model in key order after: one
     * by one in random order, the model's inserts took most of the time */
    size_t n = 0, cap = 1 << 16;
    uint64_t *acked = malloc(cap * sizeof *acked);
    cr_assert(acked);
    int rc = 0;
    while (rc == 0) {
        uint64_t k = tu_rand(&r);
        rc = bonsai_put_u64(NULL, m, k, NULL, 0);
        if (rc != 0)
            break;
        if (n == cap) {
            acked = realloc(acked, (cap *= 2) * sizeof *acked);
            cr_assert(acked);
        }
        acked[n++] = k;
    }
    TU_RC(rc, BONSAI_FULL);
    qsort(acked, n, sizeof *acked, cmp_u64_ref);
    tm_model model;
    tm_init(&model, BONSAI_KEY_U64);
    for (size_t i = 0; i < n; i++)
        tm_put(&model, &acked[i], 8, NULL, 0);
    free(acked);
    cr_assert(model.n > 10000, "only %zu entries fit", model.n);
    TU_OK(bonsai_sync(db));
    TU_ASSERT_SAME(NULL, m, &model, "after FULL");
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

/* Byte keys that share long prefixes, end in zero bytes or are prefixes
 * of each other: a waiting batch sorts them by 8-byte chunks, and the
 * order it applies them in must be the keys' order. */
Test(pending, byte_keys_with_shared_prefixes_land_in_order)
{
    bonsai_options o = small_cache();
    o.write_cache_bytes = 1024 * 1024; /* whole batches of thousands */
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    tm_model model;
    tm_init(&model, BONSAI_KEY_BYTES);
    uint64_t seed = tu_seed("pending-chunks", 13);
    tu_rng r = {seed};
    static const char *stems[] = {"user:0000000000", "user:000000000",
                                  "order:00", "", "k"};
    uint64_t n = tu_scaled(30000, 5000);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t key[64];
        const char *stem = stems[tu_below(&r, 5)];
        size_t len = strlen(stem);
        memcpy(key, stem, len);
        size_t tail = (size_t)tu_below(&r, 20);
        for (size_t j = 0; j < tail; j++) /* digits, or a zero byte */
            key[len + j] = tu_below(&r, 8) ? (uint8_t)('0' + tu_below(&r, 3))
                                           : 0;
        len += tail;
        if (len == 0)
            continue;
        bonsai_val k = tu_val(key, len), v = tu_val(&i, 8);
        TU_OK(bonsai_put(NULL, m, &k, &v, 0));
        tm_put(&model, key, len, &i, 8);
    }
    char ctx[64];
    snprintf(ctx, sizeof ctx, "seed=%llu", (unsigned long long)seed);
    TU_ASSERT_SAME(NULL, m, &model, ctx);
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

/* ---- the batch sort itself ---------------------------------------------- */

#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "putbuf.h"

static int cmp_bytes_ref(const void *a, const void *b)
{
    const bonsai_val *x = a, *y = b;
    size_t m = x->size < y->size ? x->size : y->size;
    int c = memcmp(x->data, y->data, m);
    return c ? c : (x->size > y->size) - (x->size < y->size);
}

/* Keys built to hit every path of pb_sort: long shared prefixes (chunks
 * equal for thousands of keys), decimal digits (few distinct values in
 * the radix buckets' bits), trailing zero bytes, and runs large enough
 * for the bucket pass and small enough for insertion sorting. */
Test(pending, batch_sort_orders_byte_keys)
{
    tu_rng r = {tu_seed("batch-sort-bytes", 0x5047)};
    enum { N = 20000 };
    static uint8_t keys[N][48];
    static bonsai_val ref[N];
    putbuf b;
    pb_init(&b, BONSAI_KEY_BYTES);
    size_t n = 0;
    while (n < N) {
        uint8_t *k = keys[n];
        size_t len;
        switch (tu_below(&r, 4)) {
        case 0:
            len = (size_t)snprintf((char *)k, 48, "user:%012llu:session:%u",
                                   (unsigned long long)tu_below(&r, 100000),
                                   (unsigned)tu_below(&r, 32));
            break;
        case 1:
            len = (size_t)snprintf((char *)k, 48, "customer:profile:%012llu",
                                   (unsigned long long)tu_below(&r, 1000));
            break;
        case 2: /* trailing zero bytes after a shared prefix */
            memcpy(k, "zz:", 3);
            len = 3 + tu_below(&r, 20);
            memset(k + 3, 0, len - 3);
            if (len > 3)
                k[3] = (uint8_t)tu_below(&r, 2);
            break;
        default:
            len = 1 + tu_below(&r, 40);
            tu_fill(&r, k, len);
            break;
        }
        bn_key key = {.b = k, .len = (uint32_t)len};
        if (pb_find(&b, &key) != UINT32_MAX)
            continue; /* distinct keys: a repeat only replaces a value */
        cr_assert_eq(pb_put(&b, key, NULL, 0), 0);
        ref[n] = (bonsai_val){len, k};
        n++;
    }
    pb_sort(&b);
    qsort(ref, n, sizeof *ref, cmp_bytes_ref);
    cr_assert_eq(b.n, n);
    for (size_t i = 0; i < n; i++) {
        bn_key k = pb_key(&b, (uint32_t)i);
        cr_assert(k.len == ref[i].size && memcmp(k.b, ref[i].data, k.len) == 0,
                  "entry %zu of %zu out of order (seed in the log)", i, n);
    }
    pb_free(&b);
}

Test(pending, batch_sort_orders_u64_keys)
{
    tu_rng r = {tu_seed("batch-sort-u64", 0x5048)};
    enum { N = 50000 };
    static uint64_t ref[N];
    putbuf b;
    pb_init(&b, BONSAI_KEY_U64);
    size_t n = 0;
    while (n < N) {
        /* clustered: a few high patterns, spread low bits */
        uint64_t k = (tu_below(&r, 3) << 40) | tu_below(&r, UINT64_C(1) << 20);
        if (tu_below(&r, 8) == 0)
            k = tu_rand(&r);
        bn_key key = {.u = k};
        if (pb_find(&b, &key) != UINT32_MAX)
            continue;
        cr_assert_eq(pb_put(&b, key, NULL, 0), 0);
        ref[n++] = k;
    }
    pb_sort(&b);
    qsort(ref, n, sizeof *ref, cmp_u64_ref);
    cr_assert_eq(b.n, n);
    for (size_t i = 0; i < n; i++)
        cr_assert(pb_key(&b, (uint32_t)i).u == ref[i],
                  "entry %zu of %zu out of order", i, n);
    pb_free(&b);
}

/* The value pb_find finds for key, as a u64 (0 when absent). */
static uint64_t pb_value_of(const putbuf *b, bn_key key)
{
    uint32_t i = pb_find(b, &key), vlen;
    if (i == UINT32_MAX)
        return 0;
    uint64_t v;
    const uint8_t *p = pb_value(b, i, &vlen);
    cr_assert_eq(vlen, 8);
    memcpy(&v, p, 8);
    return v;
}

/* Key number k: spread bits above k for u64, "keyNNNNNNNN" for bytes. */
static bn_key key_of(unsigned kind, uint8_t (*bytes)[12], uint32_t k)
{
    if (kind == BONSAI_KEY_U64)
        return (bn_key){.u = (uint64_t)k << 32 | (k * 2654435761u)};
    return (bn_key){.b = bytes[k], .len = 11};
}

/* Keys put again long after their first put (so the newer entry sits in
 * the front index and the older in the main one), against a model: every
 * lookup finds the newest value, and the sorted batch holds each key
 * once with it.  Both key kinds; values count the puts, so 0 is none. */
static void repeats_keep_the_newest(unsigned kind, uint64_t seed)
{
    enum { KEYS = 3 * PB_FRONT_MAX, PUTS = 12 * PB_FRONT_MAX };
    static uint64_t model[KEYS];
    memset(model, 0, sizeof model);
    tu_rng r = {seed};
    putbuf b;
    pb_init(&b, kind);
    uint8_t bytes[KEYS][12];
    for (uint32_t k = 0; k < KEYS; k++)
        snprintf((char *)bytes[k], sizeof bytes[k], "key%08u", k);
    for (uint64_t v = 1; v <= PUTS; v++) {
        uint32_t k = (uint32_t)tu_below(&r, KEYS);
        bn_key key = key_of(kind, bytes, k);
        cr_assert_eq(pb_put(&b, key, (const uint8_t *)&v, 8), 0);
        model[k] = v;
        uint32_t probe = (uint32_t)tu_below(&r, KEYS);
        bn_key pk = key_of(kind, bytes, probe);
        cr_assert_eq(pb_value_of(&b, pk), model[probe],
                     "seed=%llu: key %u after %llu puts",
                     (unsigned long long)seed, probe, (unsigned long long)v);
    }
    pb_sort(&b);
    uint32_t present = 0;
    for (uint32_t k = 0; k < KEYS; k++)
        present += model[k] != 0;
    cr_assert_eq(b.n, present, "seed=%llu: %u entries for %u keys",
                 (unsigned long long)seed, b.n, present);
    for (uint32_t i = 0; i < b.n; i++) {
        bn_key key = pb_key(&b, i);
        uint32_t k = 0;
        if (kind == BONSAI_KEY_U64)
            k = (uint32_t)(key.u >> 32);
        else /* the arena's key bytes end with no NUL */
            for (uint32_t j = 3; j < key.len; j++)
                k = k * 10 + (uint32_t)(key.b[j] - '0');
        uint32_t vlen;
        uint64_t v;
        memcpy(&v, pb_value(&b, i, &vlen), 8);
        cr_assert_eq(v, model[k], "seed=%llu: entry %u holds an old value",
                     (unsigned long long)seed, i);
    }
    pb_free(&b);
}

Test(pending, repeated_u64_keys_keep_the_newest_value)
{
    repeats_keep_the_newest(BONSAI_KEY_U64, tu_seed("pb-repeat-u64", 0x5049));
}

Test(pending, repeated_byte_keys_keep_the_newest_value)
{
    repeats_keep_the_newest(BONSAI_KEY_BYTES,
                            tu_seed("pb-repeat-bytes", 0x504a));
}

#include "internal.h"

/* The batch tests' store: anonymous memory with a 64 KiB write cache,
 * so that a batch reaches its budget within a few thousand puts. */
#define SMALL_CACHE (UINT64_C(64) * 1024)

static bonsai_db *open_small_cache(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.write_cache_bytes = SMALL_CACHE;
    return tu_open(NULL, &o);
}

/* A batch applied whole keeps its arrays for the next one, and they count
 * in the waiting puts' budget.  Past it (here: repeated keys grew them
 * without asking the budget), they left no room for another put to wait:
 * every put went to the tree at once, with a write-back after each.
 * Random puts of keys already stored must go on waiting, pass after
 * pass. */
Test(pending, kept_batch_arrays_leave_room_for_puts_to_wait)
{
    enum { N = 20000 };
    bonsai_db *db = open_small_cache();
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    tu_rng r = {tu_seed("pending-kept", 0x6b65)};
    char key[32];
    for (int pass = 0; pass < 3; pass++) {
        unsigned waited = 0;
        for (unsigned i = 0; i < N; i++) {
            int len = snprintf(key, sizeof key, "key:%012" PRIu64,
                               tu_below(&r, N));
            bonsai_val k = {(size_t)len, key};
            TU_OK(bonsai_put(NULL, m, &k, NULL, 0));
            waited += db->waiting > 0;
        }
        cr_assert_geq(waited, N / 2,
                      "pass %d: a batch waited after %u of %u puts", pass,
                      waited, (unsigned)N);
    }
    TU_OK(bonsai_close(db));
}

/* A batch applied whole keeps its arrays for its map's next puts, and
 * they count in the waiting puts' budget.  When the puts move on to
 * another map, the first map's kept arrays give way: the other map's
 * puts wait too, rather than each going to the tree at once. */
Test(pending, kept_arrays_give_way_to_another_maps_puts)
{
    enum { N = 20000 };
    bonsai_db *db = open_small_cache();
    bonsai_map first = tu_map_create(db, NULL, "first", BONSAI_KEY_U64);
    bonsai_map second = tu_map_create(db, NULL, "second", BONSAI_KEY_U64);
    tu_rng r = {tu_seed("pending-give-way", 0x6777)};
    for (unsigned i = 0; i < N; i++)
        TU_OK(bonsai_put_u64(NULL, first, tu_rand(&r), NULL, 0));
    TU_OK(bonsai_sync(db)); /* the first map's batch applied, arrays kept */
    unsigned waited = 0;
    for (unsigned i = 0; i < N; i++) {
        TU_OK(bonsai_put_u64(NULL, second, tu_rand(&r), NULL, 0));
        waited += db->waiting > 0;
    }
    cr_assert_geq(waited, N / 2, "a batch waited after %u of %u puts",
                  waited, (unsigned)N);
    TU_OK(bonsai_close(db));
}

/* A put of a key already waiting takes an entry and arena bytes more
 * (the batch keeps the newest value; the older one goes when it is
 * settled), and grew the arrays past the waiting puts' budget when the
 * batch was at it: 1.38 MB held against a 1 MiB cache.  Repeated keys,
 * both kinds, with values: the batch stays within fifteen sixteenths of
 * the cache after every put. */
static void repeats_stay_within_budget(unsigned kind, uint64_t seed)
{
    enum { N = 20000 };
    bonsai_db *db = open_small_cache();
    bonsai_map m = tu_map_create(db, NULL, "m", kind);
    tu_rng r = {seed};
    uint64_t v = 7;
    bonsai_val val = tu_val(&v, 8);
    char key[32];
    for (unsigned i = 0; i < 3 * N; i++) {
        uint64_t id = tu_below(&r, N);
        if (kind == BONSAI_KEY_U64) {
            TU_OK(bonsai_put_u64(NULL, m, id, &val, 0));
        } else {
            int len = snprintf(key, sizeof key, "key:%012" PRIu64, id);
            bonsai_val k = {(size_t)len, key};
            TU_OK(bonsai_put(NULL, m, &k, &val, 0));
        }
        cr_assert_leq(db->waiting_bytes, SMALL_CACHE / 16 * 15,
                      "put %u: a batch holds %zu bytes of a %" PRIu64
                      "-byte cache",
                      i, (size_t)db->waiting_bytes, SMALL_CACHE);
    }
    TU_OK(bonsai_close(db));
}

Test(pending, repeated_u64_puts_keep_the_batch_within_its_budget)
{
    repeats_stay_within_budget(BONSAI_KEY_U64, tu_seed("pending-rep-u64", 9));
}

Test(pending, repeated_byte_key_puts_keep_the_batch_within_its_budget)
{
    repeats_stay_within_budget(BONSAI_KEY_BYTES,
                               tu_seed("pending-rep-bytes", 10));
}

/* A batch grows only as far as the room it is given, and what it reports
 * holding covers its arrays (the write cache budget counts it so, and a
 * fill's peak memory depends on it): for tiny to large budgets, with
 * empty values and with values in the arena. */
Test(pending, batch_memory_stays_within_its_budget)
{
    static const size_t budgets[] = {4096, 64 * 1024, 1u << 20, 6u << 20};
    for (size_t bi = 0; bi < sizeof budgets / sizeof *budgets; bi++) {
        for (uint32_t vlen = 0; vlen <= 24; vlen += 24) {
            size_t max = budgets[bi];
            putbuf b;
            pb_init(&b, BONSAI_KEY_U64);
            uint8_t val[24] = {0};
            uint64_t k = 0;
            int rc;
            while ((rc = pb_make_room(&b, vlen, max)) == 0) {
                k = k * 6364136223846793005u + 1442695040888963407u;
                cr_assert_eq(pb_put(&b, (bn_key){.u = k}, val, vlen), 0);
                cr_assert_leq(pb_mem_bytes(&b), max, "budget %zu vlen %u",
                              max, vlen);
            }
            cr_assert_eq(rc, BONSAI_FULL);
            size_t held = (size_t)b.cap * sizeof(pb_entry) +
                          b.cell_bytes + b.acap +
                          (size_t)b.front_cells * sizeof(uint64_t);
            cr_assert_geq(pb_mem_bytes(&b), held, "budget %zu", max);
            /* the batch uses the room: half of it at least where the
             * arena's doublings leave that much */
            cr_assert_gt(b.n, 0, "budget %zu vlen %u", max, vlen);
            if (max >= 64 * 1024)
                cr_assert_geq((size_t)b.n * (2 * sizeof(pb_entry) + vlen),
                              max / 2, "budget %zu vlen %u: %u entries", max,
                              vlen, b.n);
            pb_free(&b);
        }
    }
}

/* A batch's arrays live in the heap while small and in mappings of their
 * own once large (bigmem.h): growing and shrinking across that line, and
 * within each side, keeps every byte up to the shorter size. */
Test(pending, big_arrays_keep_their_bytes_across_resizes)
{
    static const size_t sizes[] = {100,         BIG_MIN - 1, BIG_MIN,
                                   3 * BIG_MIN, 1u << 20,    BIG_MIN + 1,
                                   4000,        1u << 21,    7};
    size_t old = 0;
    uint8_t *p = NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        uint8_t *q = big_resize(p, old, n);
        cr_assert_not_null(q, "resize %zu -> %zu", old, n);
        size_t kept = old < n ? old : n;
        for (size_t j = 0; j < kept; j++)
            cr_assert_eq(q[j], (uint8_t)(j * 7 + old), "byte %zu after "
                         "%zu -> %zu", j, old, n);
        for (size_t j = 0; j < n; j++)
            q[j] = (uint8_t)(j * 7 + n);
        p = q;
        old = n;
    }
    big_free(p, old);
    uint64_t *z = big_alloc(3 * BIG_MIN, 1);
    cr_assert_not_null(z);
    for (size_t j = 0; j < 3 * BIG_MIN / sizeof *z; j++)
        cr_assert_eq(z[j], 0, "zeroed array, word %zu", j);
    big_free(z, 3 * BIG_MIN);
}

static uint64_t cache_bytes_of(bonsai_db *db)
{
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    return st.cache_bytes;
}

/* Lookups without transactions keep the writer's branches they pass
 * decoded, as a read transaction keeps its own, but only within the
 * write cache's budget: a sync gives the batch arrays back, the lookups
 * that follow take part of what is free, and every value stays right,
 * also after more puts and a sync again. */
Test(pending, lookups_keep_branches_within_the_cache_budget)
{
    bonsai_options o = small_cache();
    bonsai_db *db;
    TU_OK(bonsai_open(NULL, &o, &db));
    bonsai_map m;
    TU_OK(bonsai_map_create(db, NULL, "m", BONSAI_KEY_U64, &m));
    enum { N = 40000 };
    for (uint64_t round = 0; round < 2; round++) {
        for (uint64_t i = round * N; i < (round + 1) * N; i++) {
            uint64_t k = i * UINT64_C(0x9E3779B97F4A7C15);
            bonsai_val v = tu_val(&i, sizeof i);
            TU_OK(bonsai_put_u64(NULL, m, k, &v, 0));
        }
        TU_OK(bonsai_sync(db));
        uint64_t before = cache_bytes_of(db);
        cr_assert_leq(before, o.write_cache_bytes);
        for (uint64_t i = 0; i < (round + 1) * N; i++) {
            bonsai_val v;
            TU_OK(bonsai_get_u64(NULL, m, i * UINT64_C(0x9E3779B97F4A7C15),
                                 &v));
            cr_assert(v.size == sizeof i && memcmp(v.data, &i, sizeof i) == 0,
                      "round %" PRIu64 " key %" PRIu64, round, i);
        }
        uint64_t after = cache_bytes_of(db);
        cr_assert_gt(after, before, "round %" PRIu64 ": no branch kept", round);
        cr_assert_leq(after, o.write_cache_bytes, "round %" PRIu64, round);
    }
    TU_OK(bonsai_close(db));
}

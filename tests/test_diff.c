/* SPDX-License-Identifier: MIT */
/*
 * test_diff.c - randomised differential test: a bonsai map against the
 * reference model of util.h (a sorted array), op by op.
 *
 * Operations, in a random mix whose balance drifts in phases (grow to a
 * random target size, shrink to another, sometimes to empty) so trees
 * split and merge all the way up and down: put of a new key, overwrite,
 * put NOOVERWRITE (present and absent keys), delete (present and absent),
 * get (present and absent), a batch of gets (present and absent keys,
 * repeats, in any order), cursor stretches forward and backward, seek to
 * a random key then a few next/prev steps, first/last, count, a cursor
 * kept across a write (it must re-find its key), and the cursor machine:
 * a cursor bounded by a random range (set_range, set_range_u64, or a
 * prefix) making random moves (first, last, next, prev, seek, seek_le,
 * also on from beyond either end) and writing at itself (cursor_del,
 * cursor_put; READONLY in a read snapshot).
 *
 * Configurations:
 *  (a) anonymous memory, no-transaction mode (NULL txn), with small nodes
 *      (deep trees, many splits and merges) and with the defaults;
 *  (b) a file in transaction mode: write transactions of random size,
 *      committed or aborted at random (the model is rolled back through an
 *      undo log on abort), autocommit (NULL txn) runs in between, read
 *      snapshots begun between and inside write transactions that must keep
 *      seeing the state committed when they began (gets, a batch of gets,
 *      a full comparison), and close/reopen with a full comparison.
 * Each store also holds a small "decoy" map of the other key kind that must
 * never change.  Every configuration ends with a full comparison.
 *
 * The map mix (the last section) adds, in both modes: a map dropped and
 * created again (of either kind) inside write transactions, map listings,
 * maps emptied (then they must have no nodes), and a cursor deleting the
 * key it stands on, then moving next or prev.
 *
 * Reproduce a failure with BONSAI_TEST_SEED=<seed> (printed in the failure
 * message); BONSAI_TEST_SCALE scales the op counts (default 1, 1/4 under
 * AddressSanitizer).  At scale 1 the configurations run 1,510,000 ops,
 * those of the map mix 500,000 more.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "util.h"

TestSuite(diff, .init = tu_setup, .fini = tu_teardown);

/* ---- configuration ------------------------------------------------------ */

typedef struct cfg {
    const char *name;
    unsigned kind;
    int file;              /* 0: anonymous, no txn; 1: file, transactions */
    uint32_t page_size;    /* 0: default */
    uint32_t node_bytes;   /* 0: default */
    uint32_t node_entries; /* 0: default */
    int sync;
    uint64_t ops;          /* at scale 1 */
    size_t max_entries;    /* phase targets are drawn from [0, this] */
    uint64_t seed;         /* default seed */
    unsigned compression;  /* BONSAI_COMPRESS_* */
    uint64_t write_cache;  /* 0: default; CACHE_NONE: no write cache */
} cfg;

#define CACHE_NONE UINT64_MAX

/* ---- state -------------------------------------------------------------- */

typedef struct undo {
    uint8_t *key;
    uint8_t *val;
    uint32_t klen, vlen;
    bool had;
} undo;

#define NREADERS 2

typedef struct reader {
    bonsai_txn *t;
    tm_model snap; /* the committed state when it began */
    int ttl;       /* write txns left before it is checked and ended */
} reader;

typedef struct dt {
    const cfg *c;
    uint64_t seed;
    tu_rng rng;
    uint64_t op, total;
    const char *opname;
    const char *path;
    bonsai_options opts;
    bonsai_db *db;
    bonsai_map map, decoy;
    tm_model model;       /* what the current txn (or the store) sees */
    tm_model decoy_model; /* never changes after setup */
    bonsai_txn *txn;      /* the write txn, or NULL */
    undo *log;
    size_t nlog, caplog;
    reader rd[NREADERS];
    /* phases */
    size_t target;
    uint64_t phase_left;
    bool grow;
    /* key generation */
    uint64_t seq;
    uint8_t prefix[6][48];
    size_t prefix_len[6];
    uint8_t key[BONSAI_MAX_KEY];
    size_t klen;
    uint8_t *vbuf;
    size_t vlen;
    /* statistics */
    uint64_t n_commit, n_abort, n_auto, n_reopen, n_reader, n_full;
    size_t max_seen;
} dt;

#define VBUF_MAX (256u * 1024u)

#define DFAIL(d, ...)                                                        \
    do {                                                                     \
        char dmsg_[768];                                                     \
        snprintf(dmsg_, sizeof dmsg_, __VA_ARGS__);                          \
        cr_assert_fail("[%s] seed=%" PRIu64 " op=%" PRIu64 " (%s, %zu "      \
                       "entries): %s",                                       \
                       (d)->c->name, (d)->seed, (d)->op, (d)->opname,        \
                       (d)->model.n, dmsg_);                                 \
    } while (0)

#define DCHECK(d, cond, ...)                                                 \
    do {                                                                     \
        if (!(cond))                                                         \
            DFAIL(d, __VA_ARGS__);                                           \
    } while (0)

#define DRC(d, expr, want)                                                   \
    do {                                                                     \
        int drc_ = (expr);                                                   \
        int dwant_ = (want);                                                 \
        DCHECK(d, drc_ == dwant_, "%s -> %s, expected %s", #expr,            \
               tu_err(drc_), tu_err(dwant_));                                \
    } while (0)

static const char *kstr(const dt *d, const void *k, size_t kl)
{
    return tu_fmt(d->c->kind, k, kl);
}

/* ---- key and value generation ------------------------------------------- */

static void gen_u64(dt *d)
{
    uint64_t k;
    unsigned r = (unsigned)tu_below(&d->rng, 100);
    if (r < 25) {
        k = tu_below(&d->rng, 2000);
    } else if (r < 55) {
        k = tu_rand(&d->rng);
    } else if (r < 60) {
        switch (tu_below(&d->rng, 4)) {
        case 0: k = 0; break;
        case 1: k = UINT64_MAX; break;
        case 2: k = UINT64_MAX - tu_below(&d->rng, 10); break;
        default: k = tu_below(&d->rng, 10); break;
        }
    } else if (r < 80) {
        if (tu_chance(&d->rng, 20))
            d->seq = tu_rand(&d->rng) >> tu_below(&d->rng, 64);
        k = d->seq++;
    } else if (d->model.n) {
        const tm_entry *e = &d->model.e[tu_below(&d->rng, d->model.n)];
        k = tu_u64_of(e->key) + tu_below(&d->rng, 7) - 3;
    } else {
        k = tu_rand(&d->rng);
    }
    memcpy(d->key, &k, 8);
    d->klen = 8;
}

static size_t gen_len(dt *d)
{
    unsigned r = (unsigned)tu_below(&d->rng, 1000);
    if (r < 900)
        return (size_t)tu_range(&d->rng, 1, 64);
    if (r < 980)
        return (size_t)tu_range(&d->rng, 65, 300);
    return (size_t)tu_range(&d->rng, 301, BONSAI_MAX_KEY);
}

static void fill_alpha(dt *d, uint8_t *p, size_t n)
{
    static const uint8_t alpha[] = {0x00, 0x01, 'a', 'b', 0xfe, 0xff};
    for (size_t i = 0; i < n; i++)
        p[i] = alpha[tu_below(&d->rng, sizeof alpha)];
}

static void gen_bytes(dt *d)
{
    size_t n = gen_len(d);
    unsigned r = (unsigned)tu_below(&d->rng, 100);
    if (r < 30) {
        tu_fill(&d->rng, d->key, n);
    } else if (r < 50) {
        fill_alpha(d, d->key, n);
    } else if (r < 80) {
        /* a shared prefix, then random or small-alphabet bytes */
        unsigned p = (unsigned)tu_below(&d->rng, 6);
        size_t pl = d->prefix_len[p];
        memcpy(d->key, d->prefix[p], pl);
        size_t extra = tu_below(&d->rng, 4) ? tu_range(&d->rng, 0, 24)
                                            : gen_len(d);
        if (pl + extra > BONSAI_MAX_KEY)
            extra = BONSAI_MAX_KEY - pl;
        if (tu_chance(&d->rng, 500))
            tu_fill(&d->rng, d->key + pl, extra);
        else
            fill_alpha(d, d->key + pl, extra);
        n = pl + extra;
    } else if (d->model.n) {
        /* derived from a present key: cut, extended, or last byte bumped */
        const tm_entry *e = &d->model.e[tu_below(&d->rng, d->model.n)];
        n = e->klen;
        memcpy(d->key, e->key, n);
        switch (tu_below(&d->rng, 3)) {
        case 0:
            n = (size_t)tu_range(&d->rng, 1, n);
            break;
        case 1: {
            size_t extra = (size_t)tu_range(&d->rng, 1, 8);
            if (n + extra > BONSAI_MAX_KEY)
                extra = BONSAI_MAX_KEY - n;
            /* trailing zero bytes: a key its extension pads alike */
            if (tu_chance(&d->rng, 250))
                memset(d->key + n, 0, extra);
            else
                fill_alpha(d, d->key + n, extra);
            n += extra;
            break;
        }
        default:
            d->key[n - 1] = (uint8_t)(d->key[n - 1] +
                                      (tu_below(&d->rng, 2) ? 1 : 255));
            break;
        }
    } else {
        tu_fill(&d->rng, d->key, n);
    }
    if (n == 0) {
        d->key[0] = 'k';
        n = 1;
    }
    d->klen = n;
}

static void gen_key(dt *d)
{
    if (d->c->kind == BONSAI_KEY_U64)
        gen_u64(d);
    else
        gen_bytes(d);
}

/* A key not in the model (gives up after a few tries: then any key). */
static bool gen_absent(dt *d)
{
    for (int i = 0; i < 16; i++) {
        gen_key(d);
        if (!tm_find(&d->model, d->key, d->klen, NULL))
            return true;
    }
    return false;
}

/* A present key copied into d->key; false when the model is empty. */
static bool pick_present(dt *d, size_t *idx)
{
    if (d->model.n == 0)
        return false;
    size_t i = tu_below(&d->rng, d->model.n);
    memcpy(d->key, d->model.e[i].key, d->model.e[i].klen);
    d->klen = d->model.e[i].klen;
    if (idx)
        *idx = i;
    return true;
}

static void gen_val(dt *d)
{
    unsigned r = (unsigned)tu_below(&d->rng, 100000);
    size_t n;
    if (r < 45000)
        n = 0;
    else if (r < 90000)
        n = (size_t)tu_range(&d->rng, 1, 32);
    else if (r < 99000)
        n = (size_t)tu_range(&d->rng, 33, 512);
    else if (r < 99800)
        n = (size_t)tu_range(&d->rng, 513, 4096);
    else if (r < 99980)
        n = (size_t)tu_range(&d->rng, 4097, 65536);
    else
        n = (size_t)tu_range(&d->rng, 65537, VBUF_MAX);
    tu_fill(&d->rng, d->vbuf, n);
    d->vlen = n;
}

/* ---- undo log and snapshots --------------------------------------------- */

static uint8_t *dup_or_null(const void *p, size_t n)
{
    if (!n)
        return NULL;
    uint8_t *q = malloc(n);
    cr_assert(q != NULL);
    memcpy(q, p, n);
    return q;
}

/* Before a change of key k inside a write txn: remember its old state. */
static void log_change(dt *d, const void *k, size_t kl)
{
    if (!d->txn)
        return;
    if (d->nlog == d->caplog) {
        d->caplog = d->caplog ? d->caplog * 2 : 256;
        d->log = realloc(d->log, d->caplog * sizeof *d->log);
        cr_assert(d->log != NULL);
    }
    undo *u = &d->log[d->nlog++];
    size_t i;
    u->had = tm_find(&d->model, k, kl, &i);
    u->key = dup_or_null(k, kl);
    u->klen = (uint32_t)kl;
    u->val = u->had ? dup_or_null(d->model.e[i].val, d->model.e[i].vlen)
                    : NULL;
    u->vlen = u->had ? d->model.e[i].vlen : 0;
}

static void undo_apply(const dt *d, tm_model *m)
{
    for (size_t j = d->nlog; j-- > 0;) {
        const undo *u = &d->log[j];
        if (u->had)
            tm_put(m, u->key, u->klen, u->val, u->vlen);
        else
            tm_del(m, u->key, u->klen);
    }
}

static void log_clear(dt *d)
{
    for (size_t j = 0; j < d->nlog; j++) {
        free(d->log[j].key);
        free(d->log[j].val);
    }
    d->nlog = 0;
}

/* The last committed state: the model without the current txn's changes. */
static void committed_copy(const dt *d, tm_model *out)
{
    tm_copy(out, &d->model);
    undo_apply(d, out);
}

/* ---- checks ------------------------------------------------------------- */

static void full_check(dt *d, bonsai_txn *t, bonsai_map map,
                       const tm_model *m, const char *what)
{
    char why[512];
    d->n_full++;
    if (!tu_same(t, map, m, why, sizeof why))
        DFAIL(d, "%s: %s", what, why);
}

/* A read txn for cursor work when no write txn is at hand (file mode). */
static bonsai_txn *read_txn(dt *d, bool *temp)
{
    *temp = false;
    if (d->txn || !d->c->file)
        return d->txn;
    bonsai_txn *t = NULL;
    DRC(d, bonsai_txn_begin(d->db, BONSAI_TXN_RDONLY, &t), 0);
    *temp = true;
    return t;
}

/* The cursor's entry must be model entry i. */
static void cur_check(dt *d, bonsai_cursor *cur, const tm_model *m, size_t i,
                      const char *how)
{
    bonsai_val k = {0, NULL}, v = {0, NULL};
    int rc;
    if (d->c->kind == BONSAI_KEY_U64 && tu_chance(&d->rng, 300)) {
        uint64_t u = 0;
        rc = bonsai_cursor_get_u64(cur, &u, &v);
        DCHECK(d, rc == 0, "%s: cursor_get_u64 -> %s", how, tu_err(rc));
        DCHECK(d, u == tu_u64_of(m->e[i].key),
               "%s: cursor at u64 %" PRIu64 ", model entry %zu is %s", how, u,
               i, kstr(d, m->e[i].key, m->e[i].klen));
    } else {
        rc = bonsai_cursor_get(cur, &k, &v);
        DCHECK(d, rc == 0, "%s: cursor_get -> %s", how, tu_err(rc));
        DCHECK(d, k.data && tm_cmp(d->c->kind, k.data, k.size, m->e[i].key,
                                   m->e[i].klen) == 0 &&
                      k.size == m->e[i].klen,
               "%s: cursor at %s, model entry %zu of %zu is %s", how,
               kstr(d, k.data, k.size), i, m->n,
               kstr(d, m->e[i].key, m->e[i].klen));
    }
    DCHECK(d, v.size == m->e[i].vlen &&
                  (v.size == 0 || memcmp(v.data, m->e[i].val, v.size) == 0),
           "%s: value at %s is %s, model %s", how,
           kstr(d, m->e[i].key, m->e[i].klen),
           tu_fmt(BONSAI_KEY_BYTES, v.data, v.size),
           tu_fmt(BONSAI_KEY_BYTES, m->e[i].val, m->e[i].vlen));
}

/* Checks get of key (d->key) against the model m in txn t. */
static void check_get(dt *d, bonsai_txn *t, bonsai_map map, const tm_model *m,
                      const void *k, size_t kl)
{
    size_t i;
    bool have = tm_find(m, k, kl, &i);
    bonsai_val key = tu_val(k, kl), val = {0, NULL};
    int rc = bonsai_get(t, map, &key, &val);
    if (!have) {
        DCHECK(d, rc == BONSAI_NOTFOUND, "get(%s) -> %s, model: absent",
               kstr(d, k, kl), tu_err(rc));
        return;
    }
    DCHECK(d, rc == 0, "get(%s) -> %s, model: present", kstr(d, k, kl),
           tu_err(rc));
    DCHECK(d, val.size == m->e[i].vlen &&
                  (val.size == 0 || memcmp(val.data, m->e[i].val,
                                           val.size) == 0),
           "get(%s) = %s, model %s", kstr(d, k, kl),
           tu_fmt(BONSAI_KEY_BYTES, val.data, val.size),
           tu_fmt(BONSAI_KEY_BYTES, m->e[i].val, m->e[i].vlen));
}

#define BATCH_MAX 200

/* Looks keys[0, n) up in one batch in txn t (the _u64 form when u64 is
 * set) and only then checks every answer against the model m: all the
 * values of a batch stay valid together. */
static void check_batch(dt *d, bonsai_txn *t, bonsai_map map,
                        const tm_model *m, const bonsai_val *keys, size_t n,
                        bool u64)
{
    static bonsai_val vals[BATCH_MAX];
    static uint64_t nums[BATCH_MAX];
    static uint8_t found[BATCH_MAX];
    for (size_t i = 0; i < n; i++)
        nums[i] = u64 ? tu_u64_of(keys[i].data) : 0;
    int rc = u64 ? bonsai_get_batch_u64(t, map, nums, n, vals, found)
                 : bonsai_get_batch(t, map, keys, n, vals, found);
    DCHECK(d, rc == 0, "get_batch%s of %zu keys -> %s", u64 ? "_u64" : "", n,
           tu_err(rc));
    for (size_t i = 0; i < n; i++) {
        const void *k = keys[i].data;
        size_t kl = keys[i].size, at;
        if (!tm_find(m, k, kl, &at)) {
            DCHECK(d, found[i] == 0 && vals[i].data == NULL,
                   "batch key %zu of %zu (%s): found %u, model: absent", i,
                   n, kstr(d, k, kl), found[i]);
            continue;
        }
        const tm_entry *e = &m->e[at];
        DCHECK(d, found[i] == 1 && vals[i].size == e->vlen &&
                      (e->vlen == 0 ||
                       memcmp(vals[i].data, e->val, e->vlen) == 0),
               "batch key %zu of %zu (%s): found %u, %s, model %s", i, n,
               kstr(d, k, kl), found[i],
               tu_fmt(BONSAI_KEY_BYTES, vals[i].data, vals[i].size),
               tu_fmt(BONSAI_KEY_BYTES, e->val, e->vlen));
    }
}

/* A random batch of n keys for the model m: present keys, absent ones and
 * repeats, in any order; their bytes go to buf (n * BONSAI_MAX_KEY). */
static void gen_batch(dt *d, const tm_model *m, bonsai_val *keys, size_t n,
                      uint8_t *buf)
{
    for (size_t i = 0; i < n; i++, buf += BONSAI_MAX_KEY) {
        unsigned r = (unsigned)tu_below(&d->rng, 10);
        if (r < 2 && i > 0) {
            keys[i] = keys[tu_below(&d->rng, i)];
            continue;
        }
        if (r < 6 && m->n) {
            const tm_entry *e = &m->e[tu_below(&d->rng, m->n)];
            memcpy(buf, e->key, e->klen);
            keys[i] = tu_val(buf, e->klen);
            continue;
        }
        gen_key(d);
        memcpy(buf, d->key, d->klen);
        keys[i] = tu_val(buf, d->klen);
    }
}

/* A batch of gets in the txn (or store) at hand, against the model m. */
static void batch_check(dt *d, bonsai_txn *t, const tm_model *m)
{
    static bonsai_val keys[BATCH_MAX];
    static uint8_t buf[BATCH_MAX * BONSAI_MAX_KEY];
    unsigned r = (unsigned)tu_below(&d->rng, 100);
    size_t n = r < 3 ? 0 : r < 90 ? (size_t)tu_range(&d->rng, 1, 24)
                                  : (size_t)tu_range(&d->rng, 25, BATCH_MAX);
    gen_batch(d, m, keys, n, buf);
    bool u64 = d->c->kind == BONSAI_KEY_U64 && tu_chance(&d->rng, 500);
    check_batch(d, t, d->map, m, keys, n, u64);
}

/* ---- operations --------------------------------------------------------- */

static int do_put(dt *d, unsigned flags)
{
    bonsai_val k = tu_val(d->key, d->klen), v = tu_val(d->vbuf, d->vlen);
    if (d->c->kind == BONSAI_KEY_U64 && tu_chance(&d->rng, 300))
        return bonsai_put_u64(d->txn, d->map, tu_u64_of(d->key),
                              d->vlen || tu_chance(&d->rng, 500) ? &v : NULL,
                              flags);
    return bonsai_put(d->txn, d->map, &k, &v, flags);
}

static int do_del(dt *d)
{
    bonsai_val k = tu_val(d->key, d->klen);
    if (d->c->kind == BONSAI_KEY_U64 && tu_chance(&d->rng, 300))
        return bonsai_del_u64(d->txn, d->map, tu_u64_of(d->key));
    return bonsai_del(d->txn, d->map, &k);
}

static void op_put_new(dt *d)
{
    d->opname = "put new key";
    gen_absent(d);
    gen_val(d);
    log_change(d, d->key, d->klen);
    int rc = do_put(d, 0);
    DCHECK(d, rc == 0, "put(%s, %zu-byte value) -> %s", kstr(d, d->key,
           d->klen), d->vlen, tu_err(rc));
    tm_put(&d->model, d->key, d->klen, d->vbuf, d->vlen);
    if (tu_chance(&d->rng, 200))
        check_get(d, d->txn, d->map, &d->model, d->key, d->klen);
}

static void op_overwrite(dt *d)
{
    d->opname = "overwrite";
    if (!pick_present(d, NULL)) {
        op_put_new(d);
        return;
    }
    gen_val(d);
    log_change(d, d->key, d->klen);
    int rc = do_put(d, 0);
    DCHECK(d, rc == 0, "overwrite(%s, %zu-byte value) -> %s",
           kstr(d, d->key, d->klen), d->vlen, tu_err(rc));
    tm_put(&d->model, d->key, d->klen, d->vbuf, d->vlen);
    if (tu_chance(&d->rng, 200))
        check_get(d, d->txn, d->map, &d->model, d->key, d->klen);
}

static void op_nooverwrite(dt *d)
{
    d->opname = "put NOOVERWRITE";
    if (tu_below(&d->rng, 2) == 0 || !pick_present(d, NULL))
        gen_key(d); /* present or not, whatever came out */
    gen_val(d);
    bool had = tm_find(&d->model, d->key, d->klen, NULL);
    if (!had)
        log_change(d, d->key, d->klen);
    int rc = do_put(d, BONSAI_NOOVERWRITE);
    if (had) {
        DCHECK(d, rc == BONSAI_EXISTS,
               "put NOOVERWRITE of present %s -> %s, expected EXISTS",
               kstr(d, d->key, d->klen), tu_err(rc));
        /* the old value stays */
        check_get(d, d->txn, d->map, &d->model, d->key, d->klen);
    } else {
        DCHECK(d, rc == 0, "put NOOVERWRITE of absent %s -> %s",
               kstr(d, d->key, d->klen), tu_err(rc));
        tm_put(&d->model, d->key, d->klen, d->vbuf, d->vlen);
    }
}

static void op_del_present(dt *d)
{
    d->opname = "delete present";
    if (!pick_present(d, NULL))
        return;
    log_change(d, d->key, d->klen);
    int rc = do_del(d);
    DCHECK(d, rc == 0, "del(%s) -> %s, model: present",
           kstr(d, d->key, d->klen), tu_err(rc));
    tm_del(&d->model, d->key, d->klen);
    if (tu_chance(&d->rng, 200))
        check_get(d, d->txn, d->map, &d->model, d->key, d->klen);
}

static void op_del_absent(dt *d)
{
    d->opname = "delete absent";
    if (!gen_absent(d))
        return;
    int rc = do_del(d);
    DCHECK(d, rc == BONSAI_NOTFOUND, "del(%s) -> %s, model: absent",
           kstr(d, d->key, d->klen), tu_err(rc));
}

static void op_get_present(dt *d)
{
    d->opname = "get present";
    if (!pick_present(d, NULL))
        return;
    if (d->c->kind == BONSAI_KEY_U64 && tu_chance(&d->rng, 300)) {
        size_t i;
        tm_find(&d->model, d->key, 8, &i);
        bonsai_val v = {0, NULL};
        int rc = bonsai_get_u64(d->txn, d->map, tu_u64_of(d->key), &v);
        DCHECK(d, rc == 0 && v.size == d->model.e[i].vlen &&
                      (v.size == 0 ||
                       memcmp(v.data, d->model.e[i].val, v.size) == 0),
               "get_u64(%s) -> %s with %zu bytes, model %u bytes",
               kstr(d, d->key, 8), tu_err(rc), v.size, d->model.e[i].vlen);
        return;
    }
    check_get(d, d->txn, d->map, &d->model, d->key, d->klen);
}

static void op_get_absent(dt *d)
{
    d->opname = "get absent";
    gen_absent(d);
    check_get(d, d->txn, d->map, &d->model, d->key, d->klen);
}

static void op_get_batch(dt *d)
{
    d->opname = "get batch";
    batch_check(d, d->txn, &d->model);
}

static void op_count(dt *d)
{
    d->opname = "count";
    uint64_t n = UINT64_MAX;
    DRC(d, bonsai_count(d->txn, d->map, &n), 0);
    DCHECK(d, n == d->model.n, "count = %" PRIu64 ", model %zu", n,
           d->model.n);
}

/* Positions cur at model index i (seeking its key) or at a random key's
 * lower bound; returns the index (n when past the end). */
static size_t position(dt *d, bonsai_cursor *cur, const tm_model *m)
{
    size_t i;
    int rc;
    unsigned how = (unsigned)tu_below(&d->rng, 10);
    if (how == 0) {
        rc = bonsai_cursor_first(cur);
        i = 0;
    } else if (how == 1) {
        rc = bonsai_cursor_last(cur);
        i = m->n ? m->n - 1 : m->n; /* empty: past the end */
    } else if (how < 6 && m->n) {
        i = tu_below(&d->rng, m->n);
        bonsai_val k = tu_val(m->e[i].key, m->e[i].klen);
        if (d->c->kind == BONSAI_KEY_U64 && tu_chance(&d->rng, 300))
            rc = bonsai_cursor_seek_u64(cur, tu_u64_of(k.data));
        else
            rc = bonsai_cursor_seek(cur, &k);
    } else {
        gen_key(d);
        i = tm_lower_bound(m, d->key, d->klen);
        bonsai_val k = tu_val(d->key, d->klen);
        rc = bonsai_cursor_seek(cur, &k);
    }
    if (i >= m->n) {
        DCHECK(d, rc == BONSAI_NOTFOUND,
               "cursor positioning (mode %u) past the end / in an empty map "
               "-> %s, expected NOTFOUND",
               how, tu_err(rc));
        return m->n;
    }
    DCHECK(d, rc == 0, "cursor positioning (mode %u) at entry %zu (%s) -> %s",
           how, i, kstr(d, m->e[i].key, m->e[i].klen), tu_err(rc));
    cur_check(d, cur, m, i, "after positioning");
    return i;
}

/* Walks up to steps entries in direction dir (+1 next, -1 prev) from i. */
static void stretch(dt *d, bonsai_cursor *cur, const tm_model *m, size_t i,
                    int dir, unsigned steps)
{
    for (unsigned s = 0; s < steps; s++) {
        int rc = dir > 0 ? bonsai_cursor_next(cur) : bonsai_cursor_prev(cur);
        bool end = dir > 0 ? i + 1 >= m->n : i == 0;
        if (end) {
            DCHECK(d, rc == BONSAI_NOTFOUND,
                   "%s from entry %zu of %zu (the %s) -> %s, expected "
                   "NOTFOUND",
                   dir > 0 ? "next" : "prev", i, m->n,
                   dir > 0 ? "last" : "first", tu_err(rc));
            return;
        }
        i = dir > 0 ? i + 1 : i - 1;
        DCHECK(d, rc == 0, "%s to entry %zu of %zu (%s) -> %s",
               dir > 0 ? "next" : "prev", i, m->n,
               kstr(d, m->e[i].key, m->e[i].klen), tu_err(rc));
        cur_check(d, cur, m, i, dir > 0 ? "walking forward" :
                                          "walking backward");
    }
}

static void op_cursor(dt *d, int mode)
{
    static const char *names[] = {"cursor stretch forward",
                                  "cursor stretch backward",
                                  "cursor seek and wander"};
    d->opname = names[mode];
    bool temp;
    bonsai_txn *t = read_txn(d, &temp);
    bonsai_cursor *cur = NULL;
    DRC(d, bonsai_cursor_open(t, d->map, &cur), 0);
    size_t i = position(d, cur, &d->model);
    if (i < d->model.n) {
        if (mode == 0) {
            stretch(d, cur, &d->model, i, +1,
                    (unsigned)tu_range(&d->rng, 1, 64));
        } else if (mode == 1) {
            stretch(d, cur, &d->model, i, -1,
                    (unsigned)tu_range(&d->rng, 1, 64));
        } else {
            /* a few steps each way; stop at an end (the cursor then has no
             * current entry) */
            for (int s = 0; s < 6; s++) {
                int dir = tu_below(&d->rng, 2) ? 1 : -1;
                bool end = dir > 0 ? i + 1 >= d->model.n : i == 0;
                stretch(d, cur, &d->model, i, dir, 1);
                if (end)
                    break;
                i = dir > 0 ? i + 1 : i - 1;
            }
        }
    }
    bonsai_cursor_close(cur);
    if (temp)
        bonsai_txn_abort(t);
}

/* A cursor kept across a write of another key re-finds its key. */
static void op_cursor_across_write(dt *d)
{
    d->opname = "cursor across a write";
    if (d->c->file && !d->txn)
        return; /* autocommit writes end no txn of ours: nothing to test */
    if (d->model.n < 2) {
        op_put_new(d);
        return;
    }
    bonsai_cursor *cur = NULL;
    DRC(d, bonsai_cursor_open(d->txn, d->map, &cur), 0);
    size_t i = tu_below(&d->rng, d->model.n);
    uint8_t ck[BONSAI_MAX_KEY];
    size_t cl = d->model.e[i].klen;
    memcpy(ck, d->model.e[i].key, cl);
    bonsai_val k = tu_val(ck, cl);
    DRC(d, bonsai_cursor_seek(cur, &k), 0);
    /* a write of some other key */
    unsigned w = (unsigned)tu_below(&d->rng, 3);
    if (w == 0) {
        op_put_new(d);
    } else {
        size_t j = tu_below(&d->rng, d->model.n - 1);
        if (j >= i)
            j++;
        memcpy(d->key, d->model.e[j].key, d->model.e[j].klen);
        d->klen = d->model.e[j].klen;
        if (w == 1) {
            gen_val(d);
            log_change(d, d->key, d->klen);
            DRC(d, do_put(d, 0), 0);
            tm_put(&d->model, d->key, d->klen, d->vbuf, d->vlen);
        } else {
            log_change(d, d->key, d->klen);
            DRC(d, do_del(d), 0);
            tm_del(&d->model, d->key, d->klen);
        }
    }
    d->opname = "cursor across a write";
    bool found = tm_find(&d->model, ck, cl, &i);
    DCHECK(d, found, "test bug: cursor key vanished");
    cur_check(d, cur, &d->model, i, "same cursor after a write");
    stretch(d, cur, &d->model, i, tu_below(&d->rng, 2) ? 1 : -1, 3);
    bonsai_cursor_close(cur);
}

/* ---- the cursor machine: ranges, seek_le, ends, writes at a cursor ------ */

/* Where a cursor stands, in the model: a key (on it, or in its gap once
 * deleted), beyond either end of its range, or nowhere yet. */
enum { MC_NOTHING, MC_START, MC_END, MC_ON, MC_GAP };

typedef struct mcur {
    int pos;
    uint8_t key[BONSAI_MAX_KEY];
    size_t kl;
    /* the range: keys from lo (when has_lo) up to below hi (has_hi); or,
     * for prefix, the keys that begin with lo */
    bool has_lo, has_hi, prefix;
    uint8_t lo[BONSAI_MAX_KEY], hi[BONSAI_MAX_KEY];
    size_t lol, hil;
} mcur;

/* The first index after the keys <= k. */
static size_t tm_upper_bound(const tm_model *m, const void *k, size_t kl)
{
    size_t i;
    return tm_find(m, k, kl, &i) ? i + 1 : tm_lower_bound(m, k, kl);
}

/* The model indices [*L, *H) of the range (found afresh: deletes at the
 * cursor shift them). */
static void mc_bounds(const mcur *mc, const tm_model *m, size_t *L, size_t *H)
{
    *L = mc->has_lo ? tm_lower_bound(m, mc->lo, mc->lol) : 0;
    if (mc->prefix) {
        size_t h = *L;
        while (h < m->n && m->e[h].klen >= mc->lol &&
               memcmp(m->e[h].key, mc->lo, mc->lol) == 0)
            h++;
        *H = h;
    } else {
        *H = mc->has_hi ? tm_lower_bound(m, mc->hi, mc->hil) : m->n;
    }
    if (*H < *L)
        *H = *L;
}

/* The model cursor lands on index i, or beyond an end (pos). */
static void mc_land(mcur *mc, const tm_model *m, size_t i, int pos)
{
    mc->pos = pos;
    if (pos != MC_ON)
        return;
    memcpy(mc->key, m->e[i].key, m->e[i].klen);
    mc->kl = m->e[i].klen;
}

/* The answer of a move, rc, against the model cursor (already moved). */
static void mc_check(dt *d, bonsai_cursor *cur, const mcur *mc, int rc,
                     const char *what)
{
    if (mc->pos != MC_ON) {
        DCHECK(d, rc == BONSAI_NOTFOUND, "%s -> %s, model: %s", what,
               tu_err(rc),
               mc->pos == MC_END ? "past the end" : "before the start");
        bonsai_val k;
        DRC(d, bonsai_cursor_get(cur, &k, NULL), BONSAI_NOTFOUND);
        return;
    }
    size_t i;
    DCHECK(d, tm_find(&d->model, mc->key, mc->kl, &i), "test bug: lost key");
    DCHECK(d, rc == 0, "%s -> %s, model: entry %zu of %zu (%s)", what,
           tu_err(rc), i, d->model.n, kstr(d, mc->key, mc->kl));
    cur_check(d, cur, &d->model, i, what);
}

/* Sets a random range (or none) on the cursor and the model. */
static void mc_set_range(dt *d, bonsai_cursor *cur, mcur *mc)
{
    const tm_model *m = &d->model;
    unsigned r = (unsigned)tu_below(&d->rng, 10);
    mc->has_lo = mc->has_hi = mc->prefix = false;
    mc->pos = MC_NOTHING;
    if (r < 2) {
        DRC(d, bonsai_cursor_set_range(cur, NULL, NULL), 0);
        return;
    }
    if (r < 4 && d->c->kind == BONSAI_KEY_BYTES) { /* a prefix */
        if (!pick_present(d, NULL))
            gen_key(d);
        mc->lol = (size_t)tu_range(&d->rng, 1, d->klen < 4 ? d->klen : 4);
        memcpy(mc->lo, d->key, mc->lol);
        if (tu_chance(&d->rng, 300)) /* trailing 0xff bytes */
            memset(mc->lo + mc->lol - 1, 0xff, 1);
        mc->has_lo = mc->prefix = true;
        bonsai_val p = tu_val(mc->lo, mc->lol);
        DRC(d, bonsai_cursor_set_prefix(cur, &p), 0);
        return;
    }
    /* lo and hi: present keys (often near each other) or any keys */
    for (int e = 0; e < 2; e++) {
        if (tu_chance(&d->rng, 200))
            continue; /* an open end */
        size_t i;
        if (tu_below(&d->rng, 2) && pick_present(d, &i)) {
            if (e == 1 && tu_below(&d->rng, 2) && mc->has_lo) {
                i = tm_lower_bound(m, mc->lo, mc->lol) +
                    (size_t)tu_below(&d->rng, 20);
                if (i >= m->n)
                    i = m->n - 1;
                memcpy(d->key, m->e[i].key, m->e[i].klen);
                d->klen = m->e[i].klen;
            }
        } else {
            gen_key(d);
        }
        if (e == 0) {
            mc->has_lo = true;
            memcpy(mc->lo, d->key, d->klen);
            mc->lol = d->klen;
        } else {
            mc->has_hi = true;
            memcpy(mc->hi, d->key, d->klen);
            mc->hil = d->klen;
        }
    }
    if (d->c->kind == BONSAI_KEY_U64 && mc->has_lo && tu_below(&d->rng, 2)) {
        DRC(d, bonsai_cursor_set_range_u64(cur, tu_u64_of(mc->lo),
                                           mc->has_hi ? tu_u64_of(mc->hi)
                                                      : tu_rand(&d->rng),
                                           mc->has_hi ? 0
                                                      : BONSAI_RANGE_NO_HI),
            0);
        return;
    }
    bonsai_val lo = tu_val(mc->lo, mc->lol), hi = tu_val(mc->hi, mc->hil);
    DRC(d, bonsai_cursor_set_range(cur, mc->has_lo ? &lo : NULL,
                                   mc->has_hi ? &hi : NULL),
        0);
}

/* next (dir > 0) or prev in the model. */
static void mc_step(dt *d, mcur *mc, int dir)
{
    const tm_model *m = &d->model;
    size_t L, H, j;
    mc_bounds(mc, m, &L, &H);
    int from = mc->pos;
    if (from == MC_NOTHING || from == MC_START || from == MC_END) {
        if (from == (dir > 0 ? MC_END : MC_START))
            return; /* stays beyond that end */
        if (dir > 0)
            mc_land(mc, m, L, L < H ? MC_ON : MC_END);
        else
            mc_land(mc, m, H - 1, L < H ? MC_ON : MC_START);
        return;
    }
    if (dir > 0) {
        j = tm_upper_bound(m, mc->key, mc->kl);
        mc_land(mc, m, j, j < H ? MC_ON : MC_END);
    } else {
        j = tm_lower_bound(m, mc->key, mc->kl);
        mc_land(mc, m, j - 1, j > L ? MC_ON : MC_START);
    }
}

/* A write at the cursor (only where the cursor's txn is the writer's). */
static void mc_write(dt *d, bonsai_cursor *cur, mcur *mc, bool can_write)
{
    bool on = mc->pos == MC_ON;
    if (tu_below(&d->rng, 2)) {
        int rc = bonsai_cursor_del(cur);
        if (!can_write) {
            DCHECK(d, rc == BONSAI_READONLY, "cursor_del in a snapshot -> %s",
                   tu_err(rc));
            return;
        }
        if (!on) {
            DCHECK(d, rc == BONSAI_NOTFOUND, "cursor_del, no current key -> "
                   "%s", tu_err(rc));
            return;
        }
        DCHECK(d, rc == 0, "cursor_del at %s -> %s",
               kstr(d, mc->key, mc->kl), tu_err(rc));
        log_change(d, mc->key, mc->kl);
        tm_del(&d->model, mc->key, mc->kl);
        mc->pos = MC_GAP;
        DRC(d, bonsai_cursor_get(cur, NULL, NULL), BONSAI_NOTFOUND);
        return;
    }
    gen_val(d);
    bonsai_val v = tu_val(d->vbuf, d->vlen);
    unsigned flags = tu_chance(&d->rng, 100) ? BONSAI_NOOVERWRITE : 0;
    int rc = bonsai_cursor_put(cur, d->vlen || tu_below(&d->rng, 2) ? &v
                                                                   : NULL,
                               flags);
    if (!can_write) {
        DCHECK(d, rc == BONSAI_READONLY, "cursor_put in a snapshot -> %s",
               tu_err(rc));
        return;
    }
    if (!on) {
        DCHECK(d, rc == BONSAI_NOTFOUND, "cursor_put, no current key -> %s",
               tu_err(rc));
        return;
    }
    if (flags) {
        DCHECK(d, rc == BONSAI_EXISTS, "cursor_put NOOVERWRITE -> %s",
               tu_err(rc));
        return;
    }
    DCHECK(d, rc == 0, "cursor_put at %s -> %s", kstr(d, mc->key, mc->kl),
           tu_err(rc));
    log_change(d, mc->key, mc->kl);
    tm_put(&d->model, mc->key, mc->kl, d->vbuf, d->vlen);
    mc_check(d, cur, mc, 0, "get after cursor_put");
}

/* A cursor with a random range making random moves (first, last, next,
 * prev, seek, seek_le, also from beyond either end) and, where it writes
 * in the writer's transaction, deletes and puts at itself; in a read
 * snapshot those answer READONLY. */
static void op_cursor_machine(dt *d)
{
    d->opname = "cursor machine";
    bool temp, can_write = d->txn || !d->c->file;
    bonsai_txn *t = read_txn(d, &temp);
    bonsai_cursor *cur = NULL;
    DRC(d, bonsai_cursor_open(t, d->map, &cur), 0);
    mcur mc;
    mc_set_range(d, cur, &mc);
    unsigned moves = (unsigned)tu_range(&d->rng, 4, 24);
    for (unsigned s = 0; s < moves; s++) {
        const tm_model *m = &d->model;
        size_t L, H, j;
        mc_bounds(&mc, m, &L, &H);
        unsigned r = (unsigned)tu_below(&d->rng, 100);
        int rc;
        const char *what;
        if (r < 8) {
            what = "first";
            rc = bonsai_cursor_first(cur);
            mc_land(&mc, m, L, L < H ? MC_ON : MC_END);
        } else if (r < 16) {
            what = "last";
            rc = bonsai_cursor_last(cur);
            mc_land(&mc, m, H - 1, L < H ? MC_ON : MC_START);
        } else if (r < 42) {
            what = "next";
            rc = bonsai_cursor_next(cur);
            mc_step(d, &mc, 1);
        } else if (r < 68) {
            what = "prev";
            rc = bonsai_cursor_prev(cur);
            mc_step(d, &mc, -1);
        } else if (r < 88) {
            if (tu_below(&d->rng, 3) || !pick_present(d, NULL))
                gen_key(d);
            bool le = tu_below(&d->rng, 2);
            what = le ? "seek_le" : "seek";
            bool u = d->c->kind == BONSAI_KEY_U64 && tu_below(&d->rng, 2);
            bonsai_val k = tu_val(d->key, d->klen);
            if (le) {
                rc = u ? bonsai_cursor_seek_le_u64(cur, tu_u64_of(d->key))
                       : bonsai_cursor_seek_le(cur, &k);
                j = tm_upper_bound(m, d->key, d->klen);
                if (j > H)
                    j = H;
                mc_land(&mc, m, j - 1, j > L ? MC_ON : MC_START);
            } else {
                rc = u ? bonsai_cursor_seek_u64(cur, tu_u64_of(d->key))
                       : bonsai_cursor_seek(cur, &k);
                j = tm_lower_bound(m, d->key, d->klen);
                if (j < L)
                    j = L;
                mc_land(&mc, m, j, j < H ? MC_ON : MC_END);
            }
        } else if (r < 97) {
            mc_write(d, cur, &mc, can_write);
            continue;
        } else {
            mc_set_range(d, cur, &mc);
            continue;
        }
        mc_check(d, cur, &mc, rc, what);
    }
    bonsai_cursor_close(cur);
    if (temp)
        bonsai_txn_abort(t);
}

/* One random operation; the balance of puts and deletes follows the phase. */
static void one_op(dt *d)
{
    if (d->phase_left == 0 || (d->grow && d->model.n >= d->target) ||
        (!d->grow && d->model.n <= d->target)) {
        d->target = tu_chance(&d->rng, 150)
                        ? 0
                        : (size_t)tu_below(&d->rng, d->c->max_entries + 1);
        d->grow = d->model.n < d->target;
        d->phase_left = tu_range(&d->rng, 2000, 30000);
    }
    d->phase_left--;
    unsigned wput = d->grow ? 300 : 60;
    unsigned wdel = d->grow ? 60 : 300;
    /* weights: put new, overwrite, noovw, del, del absent, get, get absent,
     * fwd, back, seek, count, across, batch get, machine */
    unsigned w[] = {wput, 100, 60, wdel, 30, 150, 50, 25, 25, 40, 15, 8, 15,
                    40};
    unsigned total = 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        total += w[i];
    unsigned r = (unsigned)tu_below(&d->rng, total);
    size_t op = 0;
    while (r >= w[op])
        r -= w[op++];
    switch (op) {
    case 0: op_put_new(d); break;
    case 1: op_overwrite(d); break;
    case 2: op_nooverwrite(d); break;
    case 3: op_del_present(d); break;
    case 4: op_del_absent(d); break;
    case 5: op_get_present(d); break;
    case 6: op_get_absent(d); break;
    case 7: op_cursor(d, 0); break;
    case 8: op_cursor(d, 1); break;
    case 9: op_cursor(d, 2); break;
    case 10: op_count(d); break;
    case 11: op_cursor_across_write(d); break;
    case 12: op_get_batch(d); break;
    default: op_cursor_machine(d); break;
    }
    if (d->model.n > d->max_seen)
        d->max_seen = d->model.n;
    d->op++;
}

/* ---- setup, readers, reopen --------------------------------------------- */

static void open_maps(dt *d, bool create)
{
    unsigned other = d->c->kind == BONSAI_KEY_U64 ? BONSAI_KEY_BYTES
                                                   : BONSAI_KEY_U64;
    if (create) {
        d->map = tu_map_create(d->db, NULL, "data", d->c->kind);
        d->decoy = tu_map_create(d->db, NULL, "decoy", other);
    } else {
        d->map = tu_map_open(d->db, NULL, "data", d->c->kind);
        d->decoy = tu_map_open(d->db, NULL, "decoy", other);
    }
}

static void setup(dt *d, const cfg *c)
{
    memset(d, 0, sizeof *d);
    d->c = c;
    d->seed = tu_seed(c->name, c->seed);
    d->rng.s = d->seed;
    d->total = tu_scaled(c->ops, 1000);
    d->opname = "setup";
    d->vbuf = malloc(VBUF_MAX);
    cr_assert(d->vbuf != NULL);
    tm_init(&d->model, c->kind);
    unsigned other = c->kind == BONSAI_KEY_U64 ? BONSAI_KEY_BYTES
                                                : BONSAI_KEY_U64;
    tm_init(&d->decoy_model, other);
    for (int p = 0; p < 6; p++) {
        d->prefix_len[p] = (size_t)tu_range(&d->rng, 1, 48);
        if (p % 2)
            tu_fill(&d->rng, d->prefix[p], d->prefix_len[p]);
        else
            fill_alpha(d, d->prefix[p], d->prefix_len[p]);
    }
    d->seq = tu_rand(&d->rng) >> 8;

    bonsai_options_init(&d->opts);
    if (c->page_size)
        d->opts.page_size = c->page_size;
    if (c->node_bytes)
        d->opts.node_bytes = c->node_bytes;
    if (c->node_entries)
        d->opts.node_entries = c->node_entries;
    d->opts.sync = c->sync;
    d->opts.compression = c->compression;
    if (c->write_cache)
        d->opts.write_cache_bytes = c->write_cache == CACHE_NONE
                                        ? 0 : c->write_cache;
    d->path = c->file ? tu_path("diff.db") : NULL;
    d->db = tu_open(d->path, &d->opts);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(d->db, &st));
    cr_assert_eq(st.transactions, c->file ? 1 : 0);
    open_maps(d, true);

    /* the decoy: 50 entries of the other kind */
    for (uint64_t i = 0; i < 50; i++) {
        uint64_t u = tu_mix64(i + d->seed);
        uint8_t kb[16];
        size_t kl = other == BONSAI_KEY_U64 ? 8 : (size_t)(1 + i % 16);
        memset(kb, 0, sizeof kb);
        memcpy(kb, &u, 8);
        if (kl > 8)
            memcpy(kb + 8, &i, kl - 8);
        bonsai_val k = tu_val(kb, kl), v = tu_val(&u, i % 9);
        TU_OK(bonsai_put(NULL, d->decoy, &k, &v, 0));
        tm_put(&d->decoy_model, kb, kl, &u, i % 9);
    }
}

static void check_all(dt *d, bonsai_txn *t, const char *what)
{
    const char *save = d->opname;
    d->opname = what;
    full_check(d, t, d->map, &d->model, "data map");
    full_check(d, t, d->decoy, &d->decoy_model, "decoy map");
    d->opname = save;
}

static void reader_begin(dt *d, reader *r)
{
    DRC(d, bonsai_txn_begin(d->db, BONSAI_TXN_RDONLY, &r->t), 0);
    tm_init(&r->snap, d->c->kind);
    committed_copy(d, &r->snap);
    r->ttl = (int)tu_range(&d->rng, 1, 8);
    d->n_reader++;
}

static void reader_end(dt *d, reader *r)
{
    const char *save = d->opname;
    d->opname = "read snapshot check";
    /* random gets, then the whole map */
    for (int i = 0; i < 20 && r->snap.n; i++) {
        const tm_entry *e = &r->snap.e[tu_below(&d->rng, r->snap.n)];
        check_get(d, r->t, d->map, &r->snap, e->key, e->klen);
    }
    for (int i = 0; i < 10; i++) {
        gen_key(d);
        check_get(d, r->t, d->map, &r->snap, d->key, d->klen);
    }
    batch_check(d, r->t, &r->snap);
    full_check(d, r->t, d->map, &r->snap, "read snapshot");
    bonsai_txn_abort(r->t);
    r->t = NULL;
    tm_free(&r->snap);
    d->opname = save;
}

static void readers_tick(dt *d, bool all)
{
    for (int i = 0; i < NREADERS; i++)
        if (d->rd[i].t && (all || --d->rd[i].ttl <= 0))
            reader_end(d, &d->rd[i]);
}

static void maybe_reader(dt *d, unsigned per_mille)
{
    for (int i = 0; i < NREADERS; i++)
        if (!d->rd[i].t) {
            if (tu_chance(&d->rng, per_mille))
                reader_begin(d, &d->rd[i]);
            return;
        }
}

static void reopen(dt *d)
{
    d->opname = "reopen";
    readers_tick(d, true);
    TU_OK(bonsai_close(d->db));
    d->db = NULL;
    int rc = bonsai_open(d->path, &d->opts, &d->db);
    DCHECK(d, rc == 0, "reopen -> %s", tu_err(rc));
    open_maps(d, false);
    bonsai_txn *t;
    DRC(d, bonsai_txn_begin(d->db, BONSAI_TXN_RDONLY, &t), 0);
    check_all(d, t, "after reopen");
    bonsai_txn_abort(t);
    d->n_reopen++;
}

/* After an abort: every key the txn touched is back as committed. */
static void check_rollback(dt *d)
{
    bonsai_txn *t;
    DRC(d, bonsai_txn_begin(d->db, BONSAI_TXN_RDONLY, &t), 0);
    d->opname = "after abort";
    for (size_t j = 0; j < d->nlog && j < 200; j++)
        check_get(d, t, d->map, &d->model, d->log[j].key, d->log[j].klen);
    bonsai_txn_abort(t);
}

/* ---- the two modes ------------------------------------------------------ */

static void run_direct(dt *d)
{
    uint64_t next_full = 20000;
    while (d->op < d->total) {
        one_op(d);
        if (d->op >= next_full) {
            check_all(d, NULL, "periodic full check");
            next_full += 20000;
        }
    }
}

static void run_txn(dt *d)
{
    uint64_t txns = 0;
    while (d->op < d->total) {
        txns++;
        if (tu_chance(&d->rng, 20))
            reopen(d);
        maybe_reader(d, 80);

        if (tu_chance(&d->rng, 50)) {
            /* autocommit: each call is a transaction of its own */
            unsigned n = (unsigned)tu_range(&d->rng, 1, 10);
            for (unsigned i = 0; i < n; i++)
                one_op(d);
            d->n_auto += n;
            readers_tick(d, false);
            continue;
        }

        unsigned r = (unsigned)tu_below(&d->rng, 100);
        uint64_t n = r < 70 ? tu_range(&d->rng, 1, 20)
                   : r < 95 ? tu_range(&d->rng, 21, 200)
                            : tu_range(&d->rng, 201, 2000);
        d->opname = "begin";
        DRC(d, bonsai_txn_begin(d->db, 0, &d->txn), 0);
        uint64_t mid = tu_chance(&d->rng, 60) ? tu_below(&d->rng, n) : n;
        for (uint64_t i = 0; i < n; i++) {
            if (i == mid)
                maybe_reader(d, 1000); /* a snapshot begun mid-txn */
            one_op(d);
        }
        bool commit = tu_below(&d->rng, 100) < 80;
        if (commit) {
            d->opname = "commit";
            int rc = bonsai_txn_commit(d->txn);
            d->txn = NULL;
            DCHECK(d, rc == 0, "commit of %" PRIu64 " ops -> %s", n,
                   tu_err(rc));
            log_clear(d);
            d->n_commit++;
        } else {
            d->opname = "abort";
            bonsai_txn_abort(d->txn);
            d->txn = NULL;
            undo_apply(d, &d->model);
            check_rollback(d);
            log_clear(d);
            d->n_abort++;
        }
        readers_tick(d, false);
        if (txns % 100 == 0) {
            bonsai_txn *t;
            DRC(d, bonsai_txn_begin(d->db, BONSAI_TXN_RDONLY, &t), 0);
            check_all(d, t, "periodic full check");
            bonsai_txn_abort(t);
        }
    }
    readers_tick(d, true);
}

static void run(const cfg *c)
{
    dt d;
    setup(&d, c);
    if (c->file)
        run_txn(&d);
    else
        run_direct(&d);

    /* the end: everything, then (file) after a reopen */
    if (c->file) {
        bonsai_txn *t;
        DRC(&d, bonsai_txn_begin(d.db, BONSAI_TXN_RDONLY, &t), 0);
        check_all(&d, t, "final check");
        bonsai_txn_abort(t);
        reopen(&d);
    } else {
        check_all(&d, NULL, "final check");
    }
    /* a plain walk agrees too (tu_walk checks strict order on its own) */
    tm_model w;
    tm_init(&w, c->kind);
    char why[512];
    bool temp;
    d.opname = "final walk";
    bonsai_txn *t = read_txn(&d, &temp);
    int rc = tu_walk(t, d.map, &w, why, sizeof why);
    DCHECK(&d, rc == 0, "walk: %s", why);
    DCHECK(&d, w.n == d.model.n && tm_checksum(&w) == tm_checksum(&d.model),
           "final walk: %zu entries, model %zu (or contents differ)", w.n,
           d.model.n);
    if (temp)
        bonsai_txn_abort(t);
    tm_free(&w);

    cr_log_info("[%s] %" PRIu64 " ops, %zu entries at the end, %zu at most; "
                "%" PRIu64 " commits, %" PRIu64 " aborts, %" PRIu64
                " autocommit ops, %" PRIu64 " reopens, %" PRIu64
                " snapshots, %" PRIu64 " full checks",
                c->name, d.op, d.model.n, d.max_seen, d.n_commit, d.n_abort,
                d.n_auto, d.n_reopen, d.n_reader, d.n_full);
    TU_OK(bonsai_close(d.db));
    tm_free(&d.model);
    tm_free(&d.decoy_model);
    log_clear(&d);
    free(d.log);
    free(d.vbuf);
}

/* ---- the configurations (1,510,000 ops at scale 1) ---------------------- */

static const cfg cfg_anon_u64_small = {
    "anon-u64-small-nodes", BONSAI_KEY_U64, 0, 512, 512, 8, 0,
    200000, 3000, 0x5EED0001, 0, 0};
static const cfg cfg_anon_u64_default = {
    "anon-u64-default", BONSAI_KEY_U64, 0, 0, 0, 0, 0,
    150000, 20000, 0x5EED0002, 0, 0};
static const cfg cfg_anon_bytes_small = {
    "anon-bytes-small-nodes", BONSAI_KEY_BYTES, 0, 512, 512, 8, 0,
    200000, 3000, 0x5EED0003, 0, 0};
static const cfg cfg_anon_bytes_default = {
    "anon-bytes-default-4k-pages", BONSAI_KEY_BYTES, 0, 4096, 0, 0, 0,
    100000, 8000, 0x5EED0004, 0, 0};
static const cfg cfg_file_u64_small = {
    "file-u64-small-nodes", BONSAI_KEY_U64, 1, 512, 512, 8, 0,
    150000, 3000, 0x5EED0005, 0, 0};
static const cfg cfg_file_u64_default = {
    "file-u64-default-sync", BONSAI_KEY_U64, 1, 0, 0, 0, 1,
    50000, 10000, 0x5EED0006, 0, 0};
static const cfg cfg_file_bytes_small = {
    "file-bytes-small-nodes", BONSAI_KEY_BYTES, 1, 512, 1024, 16, 0,
    150000, 3000, 0x5EED0007, 0, 0};
static const cfg cfg_file_bytes_default = {
    "file-bytes-default-1k-pages", BONSAI_KEY_BYTES, 1, 1024, 0, 0, 0,
    50000, 6000, 0x5EED0008, 0, 0};

/* the write cache: none (every call writes), and a budget so small that
 * nodes are written and dropped all the time; each node codec */
static const cfg cfg_anon_u64_direct = {
    "anon-u64-no-write-cache", BONSAI_KEY_U64, 0, 512, 1024, 32, 0,
    60000, 4000, 0x5EED0009, BONSAI_COMPRESS_NONE, CACHE_NONE};
static const cfg cfg_anon_u64_tiny_cache_lz4 = {
    "anon-u64-tiny-cache-lz4", BONSAI_KEY_U64, 0, 512, 2048, 120, 0,
    80000, 6000, 0x5EED000A, BONSAI_COMPRESS_LZ4, 4096};
static const cfg cfg_anon_bytes_tiny_cache_zlib = {
    "anon-bytes-tiny-cache-zlib", BONSAI_KEY_BYTES, 0, 512, 1024, 0, 0,
    60000, 4000, 0x5EED000B, BONSAI_COMPRESS_ZLIB, 8192};
static const cfg cfg_file_u64_zlib = {
    "file-u64-zlib", BONSAI_KEY_U64, 1, 512, 4096, 0, 0,
    50000, 8000, 0x5EED000C, BONSAI_COMPRESS_ZLIB, 0};
static const cfg cfg_file_bytes_lz4_tiny_cache = {
    "file-bytes-lz4-tiny-cache", BONSAI_KEY_BYTES, 1, 512, 1024, 16, 0,
    50000, 3000, 0x5EED000D, BONSAI_COMPRESS_LZ4, 4096};

/* the smallest page (64 bytes): node images span many pages and several
 * small images share one OS page and one sector; raw and compressed */
static const cfg cfg_anon_u64_p64_zlib = {
    "anon-u64-p64-zlib", BONSAI_KEY_U64, 0, 64, 1024, 120, 0,
    60000, 6000, 0x5EED000E, BONSAI_COMPRESS_ZLIB, 8192};
static const cfg cfg_file_u64_p64 = {
    "file-u64-p64", BONSAI_KEY_U64, 1, 64, 512, 16, 0,
    60000, 4000, 0x5EED000F, BONSAI_COMPRESS_NONE, 0};
static const cfg cfg_file_bytes_p64_lz4 = {
    "file-bytes-p64-lz4", BONSAI_KEY_BYTES, 1, 64, 1024, 0, 0,
    40000, 3000, 0x5EED0010, BONSAI_COMPRESS_LZ4, 4096};

Test(diff, anon_u64_p64_zlib) { run(&cfg_anon_u64_p64_zlib); }
Test(diff, file_u64_p64) { run(&cfg_file_u64_p64); }
Test(diff, file_bytes_p64_lz4) { run(&cfg_file_bytes_p64_lz4); }
Test(diff, anon_u64_no_write_cache) { run(&cfg_anon_u64_direct); }
Test(diff, anon_u64_tiny_cache_lz4) { run(&cfg_anon_u64_tiny_cache_lz4); }
Test(diff, anon_bytes_tiny_cache_zlib)
{
    run(&cfg_anon_bytes_tiny_cache_zlib);
}
Test(diff, file_u64_zlib) { run(&cfg_file_u64_zlib); }
Test(diff, file_bytes_lz4_tiny_cache) { run(&cfg_file_bytes_lz4_tiny_cache); }
Test(diff, anon_u64_small_nodes) { run(&cfg_anon_u64_small); }
Test(diff, anon_u64_default) { run(&cfg_anon_u64_default); }
Test(diff, anon_bytes_small_nodes) { run(&cfg_anon_bytes_small); }
Test(diff, anon_bytes_default) { run(&cfg_anon_bytes_default); }
Test(diff, file_u64_small_nodes) { run(&cfg_file_u64_small); }
Test(diff, file_u64_default_sync) { run(&cfg_file_u64_default); }
Test(diff, file_bytes_small_nodes) { run(&cfg_file_bytes_small); }
Test(diff, file_bytes_default) { run(&cfg_file_bytes_default); }

/* ---- the map mix: map churn, emptied maps, deletes at a cursor ---------- */
/*
 * The mix above, with these operations among it (in their own functions,
 * so that the mix above stays as it is):
 *  - a scratch map "x" dropped and created again, of either key kind,
 *    with a few puts and deletes of its own, inside write transactions
 *    that commit or abort (its committed state is kept to roll back to);
 *    among them a drop and a create with another kind in one go, then
 *    puts and up to two listings, as a user re-purposing a name would;
 *  - bonsai_map_list, checked against the maps the model holds (once or
 *    twice in a row);
 *  - the data map or "x" emptied key by key (ascending, descending,
 *    random, or by a cursor deleting where it stands), then
 *    bonsai_map_stat must say depth 0 and no nodes; so must it whenever
 *    the mix above empties the data map;
 *  - a cursor that deletes the key it stands on, then moves next or prev,
 *    with gets in the gap, puts of other keys and a key put back between:
 *    it must go where bonsai.h says (the key after or before the gap).
 * "x" is checked against its model after every commit, after reopen and
 * at the end, through its handle and through bonsai_map_open; a handle
 * of its other kind must find no map.
 */

#define XNAME "x"

typedef struct xstate {
    bool exists;
    unsigned kind;
    tm_model model;
} xstate;

typedef struct mt {
    dt d;
    xstate x, x_committed;
    bonsai_map xh[3]; /* "x" handles by kind (BONSAI_KEY_*), once seen */
    bool was_empty;   /* the data map was empty after the last op */
    uint64_t n_drop, n_create, n_other_kind, n_list, n_empty, n_gap;
} mt;

static unsigned other_kind(unsigned kind)
{
    return kind == BONSAI_KEY_U64 ? BONSAI_KEY_BYTES : BONSAI_KEY_U64;
}

static void xstate_copy(xstate *dst, const xstate *src)
{
    dst->exists = src->exists;
    dst->kind = src->kind;
    tm_copy(&dst->model, &src->model);
}

/* After a change outside a write txn it is committed at once. */
static void x_settle(mt *x)
{
    if (!x->d.txn)
        xstate_copy(&x->x_committed, &x->x);
}

/* A key for "x": few distinct ones, so that puts and deletes meet. */
static size_t x_key(mt *x, unsigned kind, uint8_t *k)
{
    dt *d = &x->d;
    if (kind == BONSAI_KEY_U64) {
        uint64_t u = tu_below(&d->rng, 300);
        memcpy(k, &u, 8);
        return 8;
    }
    size_t n = (size_t)tu_range(&d->rng, 1, 6);
    fill_alpha(d, k, n);
    return n;
}

/* Asserts that a map has no nodes left (it must be empty). */
static void check_no_nodes(dt *d, bonsai_txn *t, bonsai_map map,
                           const char *what)
{
    bonsai_map_info mi;
    int rc = bonsai_map_stat(t, map, &mi);
    DCHECK(d, rc == 0, "%s: map_stat -> %s", what, tu_err(rc));
    DCHECK(d, mi.entries == 0 && mi.depth == 0 && mi.leaf_nodes == 0 &&
                  mi.branch_nodes == 0,
           "%s: an empty map has %" PRIu64 " entries, depth %u, %" PRIu64
           " leaves, %" PRIu64 " branches",
           what, mi.entries, mi.depth, mi.leaf_nodes, mi.branch_nodes);
}

/* "x" as the model says, in t (NULL: as the writer or autocommit sees). */
static void x_check(mt *x, bonsai_txn *t, const xstate *want,
                    const char *what)
{
    dt *d = &x->d;
    const char *save = d->opname;
    d->opname = what;
    bonsai_map h = NULL;
    unsigned kind = 0;
    int rc = bonsai_map_open(d->db, t, XNAME, &h, &kind);
    if (!want->exists) {
        DCHECK(d, rc == BONSAI_NOTFOUND, "map_open(x) -> %s, model: no map",
               tu_err(rc));
    } else {
        DCHECK(d, rc == 0 && kind == want->kind,
               "map_open(x) -> %s, kind %u; model: kind %u", tu_err(rc),
               kind, want->kind);
        DCHECK(d, x->xh[kind] == NULL || x->xh[kind] == h,
               "map_open(x) gave another handle than before");
        x->xh[kind] = h;
        full_check(d, t, h, &want->model, "map x");
        if (want->model.n == 0)
            check_no_nodes(d, t, h, "empty map x");
    }
    /* a handle of the kind "x" does not have finds no map */
    for (unsigned k = BONSAI_KEY_BYTES; k <= BONSAI_KEY_U64; k++) {
        if (!x->xh[k] || (want->exists && k == want->kind))
            continue;
        uint64_t n = 0;
        rc = bonsai_count(t, x->xh[k], &n);
        DCHECK(d, rc == BONSAI_NOTFOUND,
               "count through a kind-%u handle of x -> %s (%" PRIu64 "); "
               "model: %s", k, tu_err(rc), n,
               want->exists ? "x has the other kind" : "no map x");
    }
    d->opname = save;
}

static void op_x_drop(mt *x)
{
    dt *d = &x->d;
    d->opname = "drop x";
    int rc = bonsai_map_drop(d->db, d->txn, XNAME);
    DCHECK(d, rc == (x->x.exists ? 0 : BONSAI_NOTFOUND),
           "map_drop(x) -> %s, model: %s", tu_err(rc),
           x->x.exists ? "present" : "absent");
    x->x.exists = false;
    tm_free(&x->x.model);
    x->n_drop++;
    x_settle(x);
}

static void op_x_create(mt *x, unsigned kind)
{
    dt *d = &x->d;
    d->opname = "create x";
    bonsai_map h = NULL;
    int rc = bonsai_map_create(d->db, d->txn, XNAME, kind, &h);
    if (x->x.exists) {
        DCHECK(d, rc == BONSAI_EXISTS, "map_create(x) of a present map -> "
               "%s", tu_err(rc));
        return;
    }
    DCHECK(d, rc == 0, "map_create(x, kind %u) -> %s", kind, tu_err(rc));
    DCHECK(d, x->xh[kind] == NULL || x->xh[kind] == h,
           "map_create(x) gave another handle than before for kind %u",
           kind);
    x->xh[kind] = h;
    x->x.exists = true;
    x->x.kind = kind;
    tm_free(&x->x.model);
    x->x.model.kind = kind;
    x->n_create++;
    x_settle(x);
}

static void op_x_writes(mt *x)
{
    dt *d = &x->d;
    d->opname = "puts and deletes in x";
    if (!x->x.exists)
        return;
    unsigned kind = x->x.kind;
    unsigned n = (unsigned)tu_range(&d->rng, 1, 30);
    for (unsigned i = 0; i < n; i++) {
        uint8_t k[8], v[16];
        size_t kl = x_key(x, kind, k);
        bonsai_val key = tu_val(k, kl);
        if (tu_chance(&d->rng, 250)) {
            bool had = tm_del(&x->x.model, k, kl);
            DRC(d, bonsai_del(d->txn, x->xh[kind], &key),
                had ? 0 : BONSAI_NOTFOUND);
            continue;
        }
        size_t vl = (size_t)tu_below(&d->rng, sizeof v + 1);
        tu_fill(&d->rng, v, vl);
        bonsai_val val = tu_val(v, vl);
        DRC(d, bonsai_put(d->txn, x->xh[kind], &key, &val, 0), 0);
        tm_put(&x->x.model, k, kl, v, vl);
    }
    x_settle(x);
}

typedef struct list_seen {
    int n;
    char names[4][8];
    unsigned kinds[4];
    uint64_t entries[4];
} list_seen;

static int list_note(void *ctx, const char *name, unsigned kind,
                     uint64_t entries)
{
    list_seen *s = ctx;
    if (s->n < 4) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
        s->kinds[s->n] = kind;
        s->entries[s->n] = entries;
    }
    s->n++;
    return 0;
}

/* bonsai_map_list: "data", "decoy" and, when it exists, "x", with their
 * kinds and entry counts. */
static void op_list(mt *x)
{
    dt *d = &x->d;
    d->opname = "map list";
    list_seen s;
    memset(&s, 0, sizeof s);
    int rc = bonsai_map_list(d->db, d->txn, list_note, &s);
    DCHECK(d, rc == 0, "map_list -> %s", tu_err(rc));
    const char *names[] = {"data", "decoy", XNAME};
    unsigned kinds[] = {d->c->kind, other_kind(d->c->kind), x->x.kind};
    uint64_t entries[] = {d->model.n, d->decoy_model.n, x->x.model.n};
    int want = x->x.exists ? 3 : 2;
    DCHECK(d, s.n == want, "map_list named %d maps, model %d (x %s)", s.n,
           want, x->x.exists ? "present" : "absent");
    for (int i = 0; i < want; i++)
        DCHECK(d, strcmp(s.names[i], names[i]) == 0 &&
                      s.kinds[i] == kinds[i] && s.entries[i] == entries[i],
               "map_list entry %d: %s kind %u, %" PRIu64 " entries; model "
               "%s kind %u, %" PRIu64, i, s.names[i], s.kinds[i],
               s.entries[i], names[i], kinds[i], entries[i]);
    x->n_list++;
}

/* Drop "x" and create it again, of the other kind or the same, with
 * puts and up to two listings after: one user call after another, in the
 * current write txn or each on its own. */
static void op_x_recreate(mt *x)
{
    dt *d = &x->d;
    unsigned kind = x->x.exists ? x->x.kind : BONSAI_KEY_BYTES;
    if (tu_below(&d->rng, 4))
        kind = other_kind(kind);
    if (x->x.exists && kind != x->x.kind)
        x->n_other_kind++;
    if (x->x.exists)
        op_x_drop(x);
    if (tu_chance(&d->rng, 200))
        op_list(x);
    op_x_create(x, kind);
    op_x_writes(x);
    for (unsigned i = (unsigned)tu_below(&d->rng, 3); i > 0; i--)
        op_list(x);
}

/* Deletes every key of a map in one of several orders (cursor orders
 * only for the data map, whose kind cur_check knows, and where a cursor
 * sees the deletes: in a write txn, or without transactions); then the
 * map must have no nodes.  data: the data map (its deletes are logged). */
static void empty_map(mt *x, bonsai_map map, tm_model *m, bool data)
{
    dt *d = &x->d;
    bool cursor_ok = data && (d->txn || !d->c->file);
    unsigned order = (unsigned)tu_below(&d->rng, cursor_ok ? 5 : 3);
    bonsai_cursor *cur = NULL;
    if (order >= 3) {
        DRC(d, bonsai_cursor_open(d->txn, map, &cur), 0);
        int rc = order == 3 ? bonsai_cursor_first(cur)
                            : bonsai_cursor_last(cur);
        DCHECK(d, rc == (m->n ? 0 : BONSAI_NOTFOUND),
               "emptying: cursor first/last -> %s", tu_err(rc));
    }
    while (m->n) {
        size_t i = order == 0 || order == 3 ? 0
                 : order == 1 || order == 4 ? m->n - 1
                                            : tu_below(&d->rng, m->n);
        if (cur)
            cur_check(d, cur, m, i, "emptying by cursor");
        uint8_t k[BONSAI_MAX_KEY];
        size_t kl = m->e[i].klen;
        memcpy(k, m->e[i].key, kl);
        if (data)
            log_change(d, k, kl);
        bonsai_val key = tu_val(k, kl);
        DRC(d, bonsai_del(d->txn, map, &key), 0);
        tm_del(m, k, kl);
        if (cur) {
            int rc = order == 3 ? bonsai_cursor_next(cur)
                                : bonsai_cursor_prev(cur);
            DCHECK(d, rc == (m->n ? 0 : BONSAI_NOTFOUND),
                   "emptying: %s after deleting at the cursor -> %s "
                   "(%zu left)", order == 3 ? "next" : "prev", tu_err(rc),
                   m->n);
        }
    }
    bonsai_cursor_close(cur);
    check_no_nodes(d, d->txn, map, "emptied map");
    x->n_empty++;
}

static void op_empty(mt *x)
{
    dt *d = &x->d;
    if (tu_below(&d->rng, 2) && x->x.exists) {
        d->opname = "empty x";
        empty_map(x, x->xh[x->x.kind], &x->x.model, false);
        x_settle(x);
        return;
    }
    /* key by key: a few thousand autocommits at most */
    if (d->c->file && !d->txn && d->model.n > 3000)
        return;
    d->opname = "empty the data map";
    empty_map(x, d->map, &d->model, true);
}

/* The cursor's place after a write, in the model: the entry of key k
 * when present; else the gap where it would be. */
static void expect_step(dt *d, bonsai_cursor *cur, const uint8_t *k,
                        size_t kl, int dir, size_t *i_out, bool *end)
{
    const tm_model *m = &d->model;
    size_t lb = tm_lower_bound(m, k, kl);
    bool present = lb < m->n && tm_cmp(m->kind, m->e[lb].key, m->e[lb].klen,
                                       k, kl) == 0 &&
                   m->e[lb].klen == kl;
    size_t want;
    if (dir > 0) {
        want = present ? lb + 1 : lb;
        *end = want >= m->n;
    } else {
        *end = lb == 0;
        want = lb - (lb > 0);
    }
    int rc = dir > 0 ? bonsai_cursor_next(cur) : bonsai_cursor_prev(cur);
    if (*end) {
        DCHECK(d, rc == BONSAI_NOTFOUND, "%s from %s (%s) -> %s, expected "
               "NOTFOUND", dir > 0 ? "next" : "prev", kstr(d, k, kl),
               present ? "present" : "deleted", tu_err(rc));
        return;
    }
    DCHECK(d, rc == 0, "%s from %s (%s) -> %s, expected %s",
           dir > 0 ? "next" : "prev", kstr(d, k, kl),
           present ? "present" : "deleted", tu_err(rc),
           kstr(d, m->e[want].key, m->e[want].klen));
    cur_check(d, cur, m, want, dir > 0 ? "next after a delete at the cursor"
                                       : "prev after a delete at the cursor");
    *i_out = want;
}

/* A cursor deleting where it stands, then moving: a delete-then-next (or
 * prev) loop, with gets in the gap, puts of other keys, and sometimes the
 * key put back (the cursor is then on it again). */
static void op_cursor_delete_loop(mt *x)
{
    dt *d = &x->d;
    d->opname = "delete at a cursor, then move";
    if (d->c->file && !d->txn)
        return; /* its cursor would read a snapshot of its own */
    if (d->model.n == 0)
        return;
    bonsai_cursor *cur = NULL;
    DRC(d, bonsai_cursor_open(d->txn, d->map, &cur), 0);
    size_t i = tu_below(&d->rng, d->model.n);
    bonsai_val sk = tu_val(d->model.e[i].key, d->model.e[i].klen);
    DRC(d, bonsai_cursor_seek(cur, &sk), 0);
    int fixed = tu_below(&d->rng, 3) ? (tu_below(&d->rng, 2) ? 1 : -1) : 0;
    unsigned steps = (unsigned)tu_range(&d->rng, 1, 64);
    uint8_t k[BONSAI_MAX_KEY];
    for (unsigned s = 0; s < steps; s++) {
        cur_check(d, cur, &d->model, i, "a cursor before its delete");
        size_t kl = d->model.e[i].klen;
        memcpy(k, d->model.e[i].key, kl);
        /* the phase's balance holds here too */
        bool deleted = tu_chance(&d->rng, d->grow ? 150 : 750);
        if (deleted) {
            log_change(d, k, kl);
            bonsai_val key = tu_val(k, kl);
            DRC(d, bonsai_del(d->txn, d->map, &key), 0);
            tm_del(&d->model, k, kl);
            x->n_gap++;
            if (tu_below(&d->rng, 2)) {
                bonsai_val gk = {0, NULL};
                DRC(d, bonsai_cursor_get(cur, &gk, NULL), BONSAI_NOTFOUND);
            }
        }
        if (tu_chance(&d->rng, 200)) {
            /* a put of another key moves nothing */
            if (gen_absent(d) &&
                !(d->klen == kl && memcmp(d->key, k, kl) == 0)) {
                gen_val(d);
                log_change(d, d->key, d->klen);
                DRC(d, do_put(d, 0), 0);
                tm_put(&d->model, d->key, d->klen, d->vbuf, d->vlen);
            }
        }
        if (deleted && tu_chance(&d->rng, 100)) {
            /* the key put back: the cursor is on it again */
            gen_val(d);
            log_change(d, k, kl);
            bonsai_val key = tu_val(k, kl), val = tu_val(d->vbuf, d->vlen);
            DRC(d, bonsai_put(d->txn, d->map, &key, &val, 0), 0);
            tm_put(&d->model, k, kl, d->vbuf, d->vlen);
            size_t j;
            tm_find(&d->model, k, kl, &j);
            cur_check(d, cur, &d->model, j, "a cursor whose key came back");
        }
        int dir = fixed ? fixed : (tu_below(&d->rng, 2) ? 1 : -1);
        bool end;
        expect_step(d, cur, k, kl, dir, &i, &end);
        if (end)
            break;
    }
    bonsai_cursor_close(cur);
}

/* One op of the map mix. */
static void maps_one_op(mt *x)
{
    dt *d = &x->d;
    unsigned r = (unsigned)tu_below(&d->rng, 1000);
    if (r < 860)
        one_op(d);
    else if (r < 900)
        op_x_writes(x);
    else if (r < 915)
        op_list(x);
    else if (r < 925)
        op_x_drop(x);
    else if (r < 935)
        op_x_create(x, tu_below(&d->rng, 2) ? BONSAI_KEY_U64
                                             : BONSAI_KEY_BYTES);
    else if (r < 955)
        op_x_recreate(x);
    else if (r < 978)
        op_cursor_delete_loop(x);
    else if (r < 998)
        op_cursor(d, 2); /* no delete: in and out of the gaps above */
    else
        op_empty(x);
    if (d->model.n == 0 && !x->was_empty)
        check_no_nodes(d, d->txn, d->map, "the data map, just emptied");
    x->was_empty = d->model.n == 0;
}

static void maps_check_all(mt *x, const char *what)
{
    dt *d = &x->d;
    bool temp;
    bonsai_txn *t = read_txn(d, &temp);
    check_all(d, t, what);
    x_check(x, t, &x->x_committed, what);
    op_list(x);
    if (temp)
        bonsai_txn_abort(t);
}

static void maps_reopen(mt *x)
{
    reopen(&x->d);
    /* handles belong to the handle closed */
    memset(x->xh, 0, sizeof x->xh);
    x_check(x, NULL, &x->x_committed, "x after reopen");
}

static void run_maps_direct(mt *x)
{
    dt *d = &x->d;
    uint64_t next_full = 10000;
    while (d->op < d->total) {
        maps_one_op(x);
        if (d->op >= next_full) {
            maps_check_all(x, "periodic full check");
            next_full += 10000;
        }
    }
}

static void run_maps_txn(mt *x)
{
    dt *d = &x->d;
    uint64_t txns = 0;
    while (d->op < d->total) {
        txns++;
        if (tu_chance(&d->rng, 20))
            maps_reopen(x);
        if (tu_chance(&d->rng, 100)) {
            unsigned n = (unsigned)tu_range(&d->rng, 1, 10);
            for (unsigned i = 0; i < n; i++)
                maps_one_op(x);
            d->n_auto += n;
            continue;
        }
        uint64_t n = tu_chance(&d->rng, 900) ? tu_range(&d->rng, 1, 40)
                                             : tu_range(&d->rng, 41, 400);
        d->opname = "begin";
        DRC(d, bonsai_txn_begin(d->db, 0, &d->txn), 0);
        for (uint64_t i = 0; i < n; i++)
            maps_one_op(x);
        if (tu_below(&d->rng, 100) < 80) {
            d->opname = "commit";
            int rc = bonsai_txn_commit(d->txn);
            d->txn = NULL;
            DCHECK(d, rc == 0, "commit of %" PRIu64 " ops -> %s", n,
                   tu_err(rc));
            log_clear(d);
            xstate_copy(&x->x_committed, &x->x);
            d->n_commit++;
            x_check(x, NULL, &x->x_committed, "x after commit");
        } else {
            d->opname = "abort";
            bonsai_txn_abort(d->txn);
            d->txn = NULL;
            undo_apply(d, &d->model);
            check_rollback(d);
            log_clear(d);
            xstate_copy(&x->x, &x->x_committed);
            d->n_abort++;
            x_check(x, NULL, &x->x_committed, "x after abort");
        }
        x->was_empty = d->model.n == 0;
        if (txns % 50 == 0)
            maps_check_all(x, "periodic full check");
    }
}

static void run_maps(const cfg *c)
{
    mt *x = calloc(1, sizeof *x);
    cr_assert(x != NULL);
    dt *d = &x->d;
    setup(d, c);
    tm_init(&x->x.model, BONSAI_KEY_BYTES);
    tm_init(&x->x_committed.model, BONSAI_KEY_BYTES);
    if (c->file)
        run_maps_txn(x);
    else
        run_maps_direct(x);
    maps_check_all(x, "final check");
    if (c->file)
        maps_reopen(x);
    cr_log_info("[%s] %" PRIu64 " ops, %zu entries at the end, %zu at "
                "most; x: %" PRIu64
                " drops, %" PRIu64 " creates (%" PRIu64 " of the other "
                "kind right after a drop), %" PRIu64 " listings; %" PRIu64
                " maps emptied, %" PRIu64 " deletes at a cursor; %" PRIu64
                " commits, %" PRIu64 " aborts, %" PRIu64 " reopens",
                c->name, d->op, d->model.n, d->max_seen, x->n_drop,
                x->n_create,
                x->n_other_kind, x->n_list, x->n_empty, x->n_gap,
                d->n_commit, d->n_abort, d->n_reopen);
    TU_OK(bonsai_close(d->db));
    tm_free(&d->model);
    tm_free(&d->decoy_model);
    tm_free(&x->x.model);
    tm_free(&x->x_committed.model);
    log_clear(d);
    free(d->log);
    free(d->vbuf);
    free(x);
}

/* Small nodes, so that emptying a map takes trees down from several
 * levels; sizes kept small so that maps empty often. */
static const cfg cfg_maps_anon_u64 = {
    "maps-anon-u64", BONSAI_KEY_U64, 0, 512, 512, 4, 0,
    150000, 1500, 0x5EED0101, 0, 0};
static const cfg cfg_maps_anon_bytes_no_cache = {
    "maps-anon-bytes-no-write-cache", BONSAI_KEY_BYTES, 0, 512, 512, 8, 0,
    100000, 1000, 0x5EED0102, 0, CACHE_NONE};
static const cfg cfg_maps_file_u64 = {
    "maps-file-u64", BONSAI_KEY_U64, 1, 512, 512, 8, 0,
    150000, 1500, 0x5EED0103, 0, 0};
static const cfg cfg_maps_file_bytes_lz4 = {
    "maps-file-bytes-lz4", BONSAI_KEY_BYTES, 1, 512, 1024, 4, 0,
    100000, 1000, 0x5EED0104, BONSAI_COMPRESS_LZ4, 4096};

Test(diff, maps_anon_u64) { run_maps(&cfg_maps_anon_u64); }
Test(diff, maps_anon_bytes_no_write_cache)
{
    run_maps(&cfg_maps_anon_bytes_no_cache);
}
Test(diff, maps_file_u64) { run_maps(&cfg_maps_file_u64); }
Test(diff, maps_file_bytes_lz4) { run_maps(&cfg_maps_file_bytes_lz4); }

/* ---- at the cap, without transactions ----------------------------------
 *
 * A store without transactions whose cap the phases outgrow, so that it
 * meets BONSAI_FULL again and again and deletes run near the cap.  Every
 * call must answer what the model says, or BONSAI_FULL where the header
 * allows it, which then changed nothing: a put of a new key or a new
 * value, a delete of a present key (rare), a map's creation.  What adds
 * nothing never answers BONSAI_FULL: a NOOVERWRITE put of a present key
 * (BONSAI_EXISTS), a delete of an absent key (BONSAI_NOTFOUND), gets,
 * counts, cursors, bonsai_map_list, bonsai_map_stat and bonsai_verify, also
 * while puts wait in the write cache.  Maps are created at the cap now and
 * then (their catalog records must find room, or the create must be
 * refused); each stays empty and must be listed.  On a file, bonsai_sync
 * and close must write back what was acknowledged, and a reopen must find
 * exactly the model (deleted keys must not come back).
 */

typedef struct capcfg {
    cfg base;          /* base.file stays 0: no transactions */
    int file;          /* on a file (else anonymous memory) */
    uint64_t max_size; /* the cap */
    int empty_values;  /* all but 1 in 100 values empty: whole leaves of
                          them take puts where their images lie */
} capcfg;

#define CAP_EXTRA_MAX 48

typedef struct capst {
    dt d;
    const capcfg *cc;
    bonsai_map extra[CAP_EXTRA_MAX]; /* created maps, empty ... */
    char extra_name[CAP_EXTRA_MAX][32]; /* ... and their names */
    unsigned nextra, extra_tries;
    uint64_t n_full, n_created, n_refused, n_sync, n_verify, n_list;
    bool full_lately; /* the last put of a new key answered FULL */
    size_t at_cap;    /* entries when the first fill met the cap */
} capst;

/* Small values: many entries fit under the cap; now and then a longer
 * one (inline, or past inline_max) takes a run of its own. */
static void cap_gen_val(dt *d, const capcfg *cc)
{
    unsigned r = (unsigned)tu_below(&d->rng, 1000);
    if (cc->empty_values && r >= 10)
        r = 0;
    size_t n = r < 400 ? 0
             : r < 980 ? (size_t)tu_range(&d->rng, 1, 24)
             : r < 998 ? (size_t)tu_range(&d->rng, 25, 600)
                       : (size_t)tu_range(&d->rng, 601, 6000);
    tu_fill(&d->rng, d->vbuf, n);
    d->vlen = n;
}

static void cap_setup(capst *s, const capcfg *cc)
{
    memset(s, 0, sizeof *s);
    dt *d = &s->d;
    const cfg *c = &cc->base;
    s->cc = cc;
    d->c = c;
    d->seed = tu_seed(c->name, c->seed);
    d->rng.s = d->seed;
    d->total = tu_scaled(c->ops, 1000);
    d->opname = "setup";
    d->vbuf = malloc(VBUF_MAX);
    cr_assert(d->vbuf != NULL);
    tm_init(&d->model, c->kind);
    unsigned other = c->kind == BONSAI_KEY_U64 ? BONSAI_KEY_BYTES
                                                : BONSAI_KEY_U64;
    tm_init(&d->decoy_model, other);
    for (int p = 0; p < 6; p++) {
        d->prefix_len[p] = (size_t)tu_range(&d->rng, 1, 48);
        fill_alpha(d, d->prefix[p], d->prefix_len[p]);
    }
    d->seq = tu_rand(&d->rng) >> 8;
    bonsai_options_init(&d->opts);
    d->opts.transactions = 0;
    d->opts.max_size = cc->max_size;
    if (c->page_size)
        d->opts.page_size = c->page_size;
    if (c->node_bytes)
        d->opts.node_bytes = c->node_bytes;
    if (c->node_entries)
        d->opts.node_entries = c->node_entries;
    d->opts.compression = c->compression;
    d->opts.write_cache_bytes = c->write_cache == CACHE_NONE ? 0
                                                              : c->write_cache;
    d->path = cc->file ? tu_path("diff-cap.db") : NULL;
    d->db = tu_open(d->path, &d->opts);
    open_maps(d, true);
    for (uint64_t i = 0; i < 20; i++) { /* a small decoy */
        uint64_t u = tu_mix64(i + d->seed);
        uint8_t kb[8];
        memcpy(kb, &u, 8);
        bonsai_val k = tu_val(kb, 8), v = tu_val(&u, i % 9);
        if (other == BONSAI_KEY_BYTES)
            k.size = 1 + i % 8;
        TU_OK(bonsai_put(NULL, d->decoy, &k, &v, 0));
        tm_put(&d->decoy_model, kb, k.size, &u, i % 9);
    }
}

/* A put of a new key or a new value: 0, or FULL and nothing changed. */
static void cap_put(capst *s, bool present)
{
    dt *d = &s->d;
    d->opname = present ? "overwrite at the cap" : "put new key at the cap";
    if (!present || !pick_present(d, NULL))
        gen_absent(d);
    cap_gen_val(d, s->cc);
    bool had = tm_find(&d->model, d->key, d->klen, NULL);
    int rc = do_put(d, 0);
    DCHECK(d, rc == 0 || rc == BONSAI_FULL, "put(%s, %zu bytes) -> %s",
           kstr(d, d->key, d->klen), d->vlen, tu_err(rc));
    if (!had)
        s->full_lately = rc == BONSAI_FULL;
    if (rc == 0)
        tm_put(&d->model, d->key, d->klen, d->vbuf, d->vlen);
    else
        s->n_full++;
    if (rc || tu_chance(&d->rng, 100))
        check_get(d, NULL, d->map, &d->model, d->key, d->klen);
}

/* New keys until the cap: the ops then run near it. */
static void cap_prefill(capst *s)
{
    dt *d = &s->d;
    while (s->n_full == 0) {
        cap_put(s, false);
        DCHECK(d, d->model.n < 4000000, "4 M entries and the cap not met");
    }
    s->at_cap = d->model.n;
}

/* Adds nothing: never FULL. */
static void cap_nooverwrite_present(capst *s)
{
    dt *d = &s->d;
    d->opname = "NOOVERWRITE of a present key at the cap";
    if (!pick_present(d, NULL))
        return;
    cap_gen_val(d, s->cc);
    int rc = do_put(d, BONSAI_NOOVERWRITE);
    DCHECK(d, rc == BONSAI_EXISTS, "put NOOVERWRITE of present %s -> %s, "
           "expected EXISTS", kstr(d, d->key, d->klen), tu_err(rc));
    check_get(d, NULL, d->map, &d->model, d->key, d->klen);
}

static void cap_del(capst *s, bool present)
{
    dt *d = &s->d;
    d->opname = present ? "delete at the cap" : "delete absent at the cap";
    if (present ? !pick_present(d, NULL) : !gen_absent(d))
        return;
    int rc = do_del(d);
    if (!present) {
        DCHECK(d, rc == BONSAI_NOTFOUND, "del(%s) -> %s, model: absent",
               kstr(d, d->key, d->klen), tu_err(rc));
        return;
    }
    DCHECK(d, rc == 0 || rc == BONSAI_FULL, "del(%s) -> %s, model: present",
           kstr(d, d->key, d->klen), tu_err(rc));
    if (rc == 0)
        tm_del(&d->model, d->key, d->klen);
    else
        s->n_full++;
    if (rc || tu_chance(&d->rng, 100))
        check_get(d, NULL, d->map, &d->model, d->key, d->klen);
}

typedef struct cap_listing {
    capst *s;
    unsigned seen_data, seen_decoy, seen_extra, others;
    char last[BONSAI_MAX_NAME + 1];
    bool unordered;
    char bad[160];
} cap_listing;

static int cap_list_one(void *ctx, const char *name, unsigned kind,
                        uint64_t entries)
{
    cap_listing *l = ctx;
    dt *d = &l->s->d;
    if (l->last[0] && strcmp(l->last, name) >= 0)
        l->unordered = true;
    snprintf(l->last, sizeof l->last, "%s", name);
    const tm_model *m = NULL;
    if (strcmp(name, "data") == 0) {
        l->seen_data++;
        m = &d->model;
    } else if (strcmp(name, "decoy") == 0) {
        l->seen_decoy++;
        m = &d->decoy_model;
    } else if (strncmp(name, "extra", 5) == 0) {
        l->seen_extra++;
        if (entries && !l->bad[0])
            snprintf(l->bad, sizeof l->bad, "%s lists %" PRIu64
                     " entries, 0 put", name, entries);
        return 0;
    } else {
        l->others++;
        return 0;
    }
    if ((entries != m->n || kind != m->kind) && !l->bad[0])
        snprintf(l->bad, sizeof l->bad, "%s lists %" PRIu64 " entries of "
                 "kind %u, the model %zu of kind %u", name, entries, kind,
                 m->n, m->kind);
    return 0;
}

/* Listing reads only: never FULL, and it lists what the model holds. */
static void cap_list(capst *s)
{
    dt *d = &s->d;
    d->opname = "map_list at the cap";
    cap_listing l = {.s = s};
    DRC(d, bonsai_map_list(d->db, NULL, cap_list_one, &l), 0);
    DCHECK(d, !l.bad[0], "%s", l.bad);
    DCHECK(d, l.seen_data == 1 && l.seen_decoy == 1 &&
                  l.seen_extra == s->nextra && l.others == 0 && !l.unordered,
           "map_list: data %u, decoy %u, extra %u of %u, others %u%s",
           l.seen_data, l.seen_decoy, l.seen_extra, s->nextra, l.others,
           l.unordered ? ", out of order" : "");
    s->n_list++;
}

static void cap_stat(capst *s)
{
    dt *d = &s->d;
    d->opname = "map_stat at the cap";
    bonsai_map_info mi;
    DRC(d, bonsai_map_stat(NULL, d->map, &mi), 0);
    DCHECK(d, mi.entries == d->model.n, "map_stat: %" PRIu64 " entries, "
           "model %zu", mi.entries, d->model.n);
}

/* A map created near the cap: its record must find room in the catalog,
 * or the create answers FULL and there is no such map. */
static void cap_create(capst *s)
{
    dt *d = &s->d;
    d->opname = "map_create at the cap";
    if (s->nextra == CAP_EXTRA_MAX)
        return;
    char name[32];
    snprintf(name, sizeof name, "extra%03u", s->extra_tries++);
    bonsai_map m = NULL;
    unsigned kind = tu_below(&d->rng, 2) ? BONSAI_KEY_U64 : BONSAI_KEY_BYTES;
    int rc = bonsai_map_create(d->db, NULL, name, kind, &m);
    DCHECK(d, rc == 0 || rc == BONSAI_FULL, "map_create(%s) -> %s", name,
           tu_err(rc));
    if (rc == 0) {
        snprintf(s->extra_name[s->nextra], sizeof s->extra_name[0], "%s",
                 name);
        s->extra[s->nextra++] = m;
        s->n_created++;
        return;
    }
    s->n_refused++;
    bonsai_map x;
    DRC(d, bonsai_map_open(d->db, NULL, name, &x, NULL), BONSAI_NOTFOUND);
}

static void cap_verify(capst *s)
{
    dt *d = &s->d;
    d->opname = "verify at the cap";
    uint64_t problems = UINT64_MAX;
    DRC(d, bonsai_verify(d->db, 0, NULL, NULL, NULL, &problems), 0);
    DCHECK(d, problems == 0, "verify: %" PRIu64 " problems", problems);
    s->n_verify++;
}

/* bonsai_sync writes back what was acknowledged; on a file, now and then
 * a close and reopen must find exactly the model. */
static void cap_sync(capst *s)
{
    dt *d = &s->d;
    d->opname = "sync at the cap";
    DRC(d, bonsai_sync(d->db), 0);
    s->n_sync++;
    if (!s->cc->file || !tu_chance(&d->rng, 250))
        return;
    d->opname = "close and reopen at the cap";
    DRC(d, bonsai_close(d->db), 0);
    d->db = NULL;
    DRC(d, bonsai_open(d->path, &d->opts, &d->db), 0);
    open_maps(d, false);
    for (unsigned i = 0; i < s->nextra; i++) {
        DRC(d, bonsai_map_open(d->db, NULL, s->extra_name[i], &s->extra[i],
                               NULL), 0);
    }
    check_all(d, NULL, "after reopening");
    d->n_reopen++;
}

static void cap_one_op(capst *s)
{
    dt *d = &s->d;
    if (d->phase_left == 0 || (d->grow && d->model.n >= d->target) ||
        (!d->grow && d->model.n <= d->target) ||
        (d->grow && s->full_lately && tu_chance(&d->rng, 2))) {
        /* grow phases aim past the cap; shrink phases delete near it */
        size_t q = s->at_cap / 4 + 10;
        d->target = tu_chance(&d->rng, 600)
                        ? (size_t)tu_range(&d->rng, s->at_cap, s->at_cap + q)
                        : (size_t)tu_range(&d->rng, s->at_cap - q / 2,
                                           s->at_cap);
        d->grow = d->model.n < d->target;
        d->phase_left = tu_range(&d->rng, 5000, 30000);
    }
    d->phase_left--;
    /* weights: put new, overwrite, noovw present, del, del absent, get,
     * count, cursor, list, stat, create, verify, sync */
    unsigned w[] = {d->grow ? 300u : 40u, 60, 40, d->grow ? 40u : 300u, 40,
                    60, 10, 25, 10, 3, s->full_lately ? 6u : 0u, 1, 1};
    unsigned total = 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        total += w[i];
    unsigned r = (unsigned)tu_below(&d->rng, total);
    size_t op = 0;
    while (r >= w[op])
        r -= w[op++];
    switch (op) {
    case 0: cap_put(s, false); break;
    case 1: cap_put(s, true); break;
    case 2: cap_nooverwrite_present(s); break;
    case 3: cap_del(s, true); break;
    case 4: cap_del(s, false); break;
    case 5:
        d->opname = "get at the cap";
        if (tu_below(&d->rng, 2) ? pick_present(d, NULL) : gen_absent(d))
            check_get(d, NULL, d->map, &d->model, d->key, d->klen);
        break;
    case 6: op_count(d); break;
    case 7: op_cursor(d, (int)tu_below(&d->rng, 3)); break;
    case 8: cap_list(s); break;
    case 9: cap_stat(s); break;
    case 10: cap_create(s); break;
    case 11:
        if (tu_chance(&d->rng, 200))
            cap_verify(s);
        break;
    default:
        if (tu_chance(&d->rng, 200))
            cap_sync(s);
        break;
    }
    if (d->model.n > d->max_seen)
        d->max_seen = d->model.n;
    d->op++;
}

static void cap_run(const capcfg *cc)
{
    capst *s = malloc(sizeof *s);
    cr_assert(s != NULL);
    cap_setup(s, cc);
    dt *d = &s->d;
    cap_prefill(s);
    uint64_t next_full = 20000;
    while (d->op < d->total) {
        cap_one_op(s);
        if (d->op >= next_full) {
            check_all(d, NULL, "periodic full check at the cap");
            cap_list(s);
            next_full += 20000;
        }
    }
    cap_list(s);
    cap_verify(s);
    check_all(d, NULL, "final check at the cap");
    if (cc->file) {
        d->opname = "final close and reopen";
        DRC(d, bonsai_close(d->db), 0);
        d->db = NULL;
        DRC(d, bonsai_open(d->path, &d->opts, &d->db), 0);
        open_maps(d, false);
        check_all(d, NULL, "after the final reopen");
    }
    cr_log_info("[%s] %" PRIu64 " ops, %zu entries at the end, %zu at most "
                "(%zu at the first FULL); %" PRIu64 " FULL, maps created %" PRIu64 " (refused %"
                PRIu64 "), %" PRIu64 " lists, %" PRIu64 " verifies, %"
                PRIu64 " syncs, %" PRIu64 " reopens",
                d->c->name, d->op, d->model.n, d->max_seen, s->at_cap,
                s->n_full,
                s->n_created, s->n_refused, s->n_list, s->n_verify,
                s->n_sync, d->n_reopen);
    TU_OK(bonsai_close(d->db));
    tm_free(&d->model);
    tm_free(&d->decoy_model);
    free(d->vbuf);
    free(s);
}

/* the write cache as large as the cap (puts wait, deletes are cached),
 * and so with nearly every value empty (runs go into leaf images where
 * they lie); no cache with one node a page and four entries a node (a
 * map's record often needs a new catalog node); 64-byte pages, byte
 * keys */
static const capcfg cap_anon_u64_cached = {
    {"cap-anon-u64-cached", BONSAI_KEY_U64, 0, 0, 0, 0, 0, 60000, 60000,
     0x5EED0101, 0, UINT64_C(1) << 20},
    0, UINT64_C(1) << 20, 0};
static const capcfg cap_file_u64_cached = {
    {"cap-file-u64-cached", BONSAI_KEY_U64, 0, 0, 0, 0, 0, 60000, 60000,
     0x5EED0102, 0, UINT64_C(1) << 20},
    1, UINT64_C(1) << 20, 0};
static const capcfg cap_anon_u64_empty_values = {
    {"cap-anon-u64-empty-values", BONSAI_KEY_U64, 0, 0, 0, 0, 0, 60000, 60000,
     0x5EED0105, 0, UINT64_C(1) << 20},
    0, UINT64_C(1) << 20, 1};
static const capcfg cap_anon_u64_direct_4 = {
    {"cap-anon-u64-no-cache-4-entries", BONSAI_KEY_U64, 0, 65536, 0, 4, 0,
     20000, 3000, 0x5EED0103, 0, CACHE_NONE},
    0, UINT64_C(7) << 20, 0};
static const capcfg cap_file_bytes_p64 = {
    {"cap-file-bytes-p64", BONSAI_KEY_BYTES, 0, 64, 1024, 0, 0, 40000, 40000,
     0x5EED0104, 0, UINT64_C(256) << 10},
    1, UINT64_C(2) << 20, 0};

Test(diff, cap_anon_u64_cached) { cap_run(&cap_anon_u64_cached); }
Test(diff, cap_file_u64_cached) { cap_run(&cap_file_u64_cached); }
Test(diff, cap_anon_u64_empty_values) { cap_run(&cap_anon_u64_empty_values); }
Test(diff, cap_anon_u64_no_cache_4_entries)
{
    cap_run(&cap_anon_u64_direct_4);
}
Test(diff, cap_file_bytes_p64) { cap_run(&cap_file_bytes_p64); }

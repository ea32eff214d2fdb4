/* SPDX-License-Identifier: MIT */
/*
 * getbatch.c - bonsai_get_batch and bonsai_get_batch_u64: many keys of one
 * map looked up in one call, with the answers of as many bonsai_get calls.
 *
 * The keys are looked up in key order (a sorted index permutation): the
 * keys of one leaf then come in a row, while it is in the CPU's caches,
 * the branches above stay there too, and a key goes down without a
 * search where the key before it went (bt_finger).  They go in groups of
 * BT_FINGER_KEYS: the group descends level by level, the nodes of each
 * level prefetched before they are searched; one group later the part of
 * each leaf its key's search reads is prefetched, and one group after
 * that it is searched, so that the cache misses of many keys overlap; in
 * the leaf of the key before it, a key's search goes on from where that
 * key's ended (bt_leaf_get), so a leaf is walked once, not searched
 * from the top for each of its keys.  A value of an unpacked (compressed)
 * leaf is copied aside (pk_keep): the unpack cache may reuse the leaf's
 * buffer before the batch ends.
 *
 * The sort's array (16 bytes a key) stays with the store for its next
 * batch: fresh memory of that size, a new mapping each call, cost a
 * batch of a million keys a third of its time in page faults on a
 * virtual machine.  Its spreading pass needs as much again, and takes
 * it from the caller's vals, which the answers overwrite afterwards.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "btree.h"
#include "bytes.h"
#include "internal.h"
#include "put.h"
#include "txn.h"

/* Keys few enough to sort by insertion. */
#define RUN 16u

/* The spreading pass of the sort makes at most 2^this buckets. */
#define SPREAD_BITS_MAX 16u

/* A key of the batch: its number (see number_at; after the sort, of the
 * offset its sort ended on) and its index in the caller's arrays. */
typedef struct bkey {
    uint64_t k;
    size_t i;
} bkey;

/* The sort's spreading pass goes through the caller's vals, which the
 * answers overwrite later: no memory of its own for it. */
_Static_assert(sizeof(bkey) <= sizeof(bonsai_val), "a bkey fits a val");

typedef struct batch {
    bonsai_map map;
    const uint64_t *ukeys;  /* the keys: these numbers, or ... */
    const bonsai_val *keys; /* ... these, checked for the map's kind */
    size_t n;
    bonsai_val *vals;
    uint8_t *found;
    int bytes;              /* a byte-key map */
    int waiting;            /* the writer's view: puts may be waiting */
    bkey *order;            /* the keys in key order */
    uint8_t *tmp;           /* room for as many, for the sort: the
                               caller's vals, which the answers
                               overwrite after it */
} batch;

/* ---- sorting ----------------------------------------------------------- */

/* The number a key sorts by at byte off: a u64 key itself (off 0); for a
 * byte key, its bytes [off, off + 8) read big-endian, zeros past its end.
 * Among keys whose first off bytes are the same, a smaller number means a
 * smaller key, and equal numbers leave the order to the bytes after. */
static uint64_t number_at(const batch *b, size_t i, size_t off)
{
    if (b->ukeys)
        return b->ukeys[i];
    const bonsai_val *key = &b->keys[i];
    if (!b->bytes) {
        uint64_t u;
        memcpy(&u, key->data, sizeof u);
        return u;
    }
    uint8_t be[8] = {0};
    if (key->size > off) {
        size_t len = key->size - off;
        memcpy(be, (const uint8_t *)key->data + off, len < 8 ? len : 8);
    }
    return __builtin_bswap64(get_le64(be));
}

static uint64_t number_of(const batch *b, size_t i)
{
    return number_at(b, i, 0);
}

/* x before y: by number, then (byte keys) by all their bytes. */
static int bkey_less(const batch *b, const bkey *x, const bkey *y)
{
    if (x->k != y->k || !b->bytes)
        return x->k < y->k;
    const bonsai_val *p = &b->keys[x->i], *q = &b->keys[y->i];
    return key_below(p->data, (uint32_t)p->size, q->data, (uint32_t)q->size);
}

static void insertion_sort(const batch *b, bkey *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        bkey x = a[i];
        size_t j = i;
        for (; j > 0 && bkey_less(b, &x, &a[j - 1]); j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Bits of a key's number that pick its bucket: about four keys a bucket. */
static unsigned spread_bits(size_t n)
{
    unsigned bits = 0;
    while (bits < SPREAD_BITS_MAX && ((size_t)4 << bits) < n)
        bits++;
    return bits;
}

/* Moves a[0, n) bucket by bucket through tmp, a bucket for each value of
 * the highest `bits` bits in which their numbers differ (differ: the bits
 * in which some differ from the first): the bits above are the same in
 * every key, so the buckets come in key order.  Then c[j] = where bucket
 * j ends (c: 2^bits + 1 counts). */
static void spread(bkey *a, uint8_t *tmp, size_t n, uint64_t differ,
                   unsigned bits, size_t *c)
{
    unsigned top = 64 - (unsigned)__builtin_clzll(differ); /* differ > 0 */
    unsigned shift = top > bits ? top - bits : 0;          /* < 64 */
    size_t nb = (size_t)1 << bits, mask = nb - 1;
    memset(c, 0, (nb + 1) * sizeof *c);
    for (size_t i = 0; i < n; i++)
        c[((a[i].k >> shift) & mask) + 1]++;
    for (size_t j = 1; j <= nb; j++)
        c[j] += c[j - 1];
    /* c[j], where bucket j starts, moves on to where it ends */
    for (size_t i = 0; i < n; i++)
        memcpy(tmp + c[(a[i].k >> shift) & mask]++ * sizeof *a, &a[i],
               sizeof *a);
    memcpy(a, tmp, n * sizeof *a);
}

/* Keys whose numbers at off are all the same: each takes its number at
 * off + 8.  Returns 0 when none has bytes there (they are all equal). */
static int renumber(const batch *b, bkey *a, size_t n, size_t off)
{
    int more = 0;
    for (size_t i = 0; i < n; i++) {
        a[i].k = number_at(b, a[i].i, off + 8);
        more |= b->keys[a[i].i].size > off + 8;
    }
    return more;
}

static int sort_range(const batch *b, bkey *a, uint8_t *tmp, size_t n,
                      size_t off);

/* Byte keys whose numbers agree at every offset differ, if at all, only
 * in trailing zero bytes ("k" < "k\0"): they sort by their lengths, as
 * numbers, with nothing left to renumber. */
static int sort_by_length(const batch *b, bkey *a, uint8_t *tmp, size_t n)
{
    batch lengths = *b;
    lengths.bytes = 0;
    for (size_t i = 0; i < n; i++)
        a[i].k = b->keys[a[i].i].size;
    return sort_range(&lengths, a, tmp, n, 0);
}

/* Sorts the buckets of a[0, n) that spread left in c, all but the largest
 * (sort_range's recursion); *big = where that one starts, *nbig its size. */
static int sort_buckets(const batch *b, bkey *a, uint8_t *tmp,
                        const size_t *c, size_t nb, size_t off, size_t *big,
                        size_t *nbig)
{
    int rc = 0;
    *big = *nbig = 0;
    for (size_t j = 0, from = 0; j < nb; from = c[j++])
        if (c[j] - from > *nbig) {
            *big = from;
            *nbig = c[j] - from;
        }
    for (size_t j = 0, from = 0; rc == 0 && j < nb; from = c[j++])
        if (from != *big)
            rc = sort_range(b, a + from, tmp + from * sizeof *a,
                            c[j] - from, off);
    return rc;
}

/* Sorts a[0, n), whose keys share their first off bytes and carry their
 * numbers at off, with room for n more at tmp: each pass spreads the keys
 * over buckets of a few keys each, the buckets of more are sorted the
 * same way (on lower bits), and byte keys equal in all 8 bytes go on to
 * the next 8.  The largest bucket is sorted by the loop, not a call, so
 * that calls nest at most log2(n) deep, whatever the keys. */
static int sort_range(const batch *b, bkey *a, uint8_t *tmp, size_t n,
                      size_t off)
{
    while (n > RUN) {
        uint64_t differ = 0;
        for (size_t i = 1; i < n; i++)
            differ |= a[i].k ^ a[0].k;
        if (!differ) {
            if (!b->bytes)
                return 0; /* all the same key */
            if (!renumber(b, a, n, off))
                return sort_by_length(b, a, tmp, n);
            off += 8;
            continue;
        }
        unsigned bits = spread_bits(n);
        size_t nb = (size_t)1 << bits, big, nbig;
        size_t *c = malloc((nb + 1) * sizeof *c);
        if (!c)
            return BONSAI_NOMEM;
        spread(a, tmp, n, differ, bits, c);
        int rc = sort_buckets(b, a, tmp, c, nb, off, &big, &nbig);
        free(c);
        if (rc)
            return rc;
        a += big;
        tmp += big * sizeof *a;
        n = nbig;
    }
    insertion_sort(b, a, n);
    return 0;
}

/* Sorts the keys into b->order. */
static int sort_keys(batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        b->order[i] = (bkey){number_of(b, i), i};
    return sort_range(b, b->order, b->tmp, b->n, 0);
}

/* ---- lookups ----------------------------------------------------------- */

static bn_key key_of(const batch *b, const bkey *e)
{
    bn_key key = {0};
    if (b->bytes) {
        key.b = b->keys[e->i].data;
        key.len = (uint32_t)b->keys[e->i].size;
    } else {
        key.u = e->k;
    }
    return key;
}

/* The same key twice.  A sorted byte key's number is of whichever 8 bytes
 * its sort ended on, so equal numbers leave it to the bytes; but the same
 * key twice took the same way through the sort, so different numbers
 * mean different keys, without a read of their bytes (a cache miss each,
 * in sorted order, where the caller's keys lie in theirs). */
static int same_key(const batch *b, const bkey *x, const bkey *y)
{
    if (!b->bytes || x->k != y->k)
        return x->k == y->k;
    const bonsai_val *p = &b->keys[x->i], *q = &b->keys[y->i];
    return p->size == q->size && memcmp(p->data, q->data, p->size) == 0;
}

static void answer(batch *b, size_t i, const bonsai_val *val)
{
    b->found[i] = val != NULL;
    b->vals[i] = val ? *val : (bonsai_val){0, NULL};
}

/* A value that must outlive the unpack cache's next use of its entry. */
static int keep(pk_cache *uc, bonsai_val *val)
{
    const uint8_t *p = val->data;
    int rc = pk_keep(uc, &p, val->size);
    val->data = p;
    return rc;
}

/* A group of the sorted keys, order[from, to), and what each still needs
 * once the leaves of those to search are found. */
enum { DONE, SAME_AS_BEFORE, SEARCH };

typedef struct group {
    size_t from, to;
    uint8_t step[BT_FINGER_KEYS];
    unsigned n; /* keys to search: */
    bn_key keys[BT_FINGER_KEYS];
    bn_child leaves[BT_FINGER_KEYS];
    int empty;  /* no leaves: the tree is empty */
} group;

/* Answers what needs no leaf, a waiting put; marks a repeated key, and
 * the keys to search. */
static void triage(batch *b, group *g)
{
    g->n = 0;
    for (size_t j = g->from; j < g->to; j++) {
        const bkey *e = &b->order[j];
        bonsai_val val;
        uint8_t *step = &g->step[j - g->from];
        *step = DONE;
        if (j > 0 && same_key(b, &b->order[j - 1], e)) {
            *step = SAME_AS_BEFORE;
            continue;
        }
        bn_key key = key_of(b, e);
        /* a waiting put is newer than the tree, as for bonsai_get */
        if (b->waiting && put_waiting_get(b->map, &key, &val) == 0) {
            answer(b, e->i, &val);
            continue;
        }
        *step = SEARCH;
        g->keys[g->n++] = key;
        /* the answers land all over the caller's arrays */
        __builtin_prefetch(&b->vals[e->i], 1);
        __builtin_prefetch(&b->found[e->i], 1);
    }
}

/* Answers the group's keys in order, searching the leaves found. */
static int search(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                  bt_finger *f, batch *b, const group *g)
{
    unsigned n = 0;
    for (size_t j = g->from; j < g->to; j++) {
        const bkey *e = &b->order[j];
        bonsai_val val;
        if (g->step[j - g->from] == SAME_AS_BEFORE) {
            size_t before = b->order[j - 1].i;
            answer(b, e->i, b->found[before] ? &b->vals[before] : NULL);
            continue;
        }
        if (g->step[j - g->from] != SEARCH)
            continue;
        int rc = g->empty ? BONSAI_NOTFOUND
                       : bt_leaf_get(db, rd, t, f, g->leaves[n],
                                     g->keys[n], &val);
        n++;
        if (rc == 0)
            rc = keep(rd->uc, &val);
        if (rc && rc != BONSAI_NOTFOUND)
            return rc;
        answer(b, e->i, rc ? NULL : &val);
    }
    return 0;
}

/* The group of keys from `from` on: what needs no leaf is answered, and
 * the leaves of the others are found (their first bytes asked for). */
static int find_group(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                      bt_finger *f, batch *b, group *g, size_t from)
{
    g->from = from;
    g->to = b->n - from < BT_FINGER_KEYS ? b->n : from + BT_FINGER_KEYS;
    triage(b, g);
    int rc = g->n ? bt_finger_leaves(db, rd, t, f, g->keys, g->n, g->leaves)
                  : 0;
    g->empty = rc == BONSAI_NOTFOUND;
    return rc && !g->empty ? rc : 0;
}

/* Asks for the part of each leaf the group's searches read, once the
 * leaves' first bytes, which say where that part is, have come. */
static void aim(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                const group *g)
{
    for (unsigned j = 0; !g->empty && j < g->n; j++)
        bt_prefetch_search(db, rd, t->kind, g->leaves[j], g->keys[j]);
}

/* Groups pass three stages, one group a stage at a time: found, aimed,
 * searched.  Each stage's cache misses have the time of the other two
 * groups' work to come. */
#define STAGES 3u

static int batch_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    batch *b = argp;
    bt_tree *t;
    bt_rd rd;
    bt_finger *f;
    int rc = txn_tree_as_is(db, txn, b->map, &t, &rd);
    if (rc || (rc = bt_finger_new(t, &f)))
        return rc;
    /* this batch's values replace the last one's */
    pk_keep_reset(rd.uc);
    b->waiting = !(txn && txn->rdonly);
    group g[STAGES];
    size_t groups = (b->n + BT_FINGER_KEYS - 1) / BT_FINGER_KEYS;
    for (size_t k = 0; rc == 0 && k < groups + STAGES - 1; k++) {
        if (k < groups)
            rc = find_group(db, &rd, t, f, b, &g[k % STAGES],
                            k * BT_FINGER_KEYS);
        if (rc == 0 && k >= 1 && k - 1 < groups)
            aim(db, &rd, t, &g[(k - 1) % STAGES]);
        if (rc == 0 && k >= 2 && k - 2 < groups)
            rc = search(db, &rd, t, f, b, &g[(k - 2) % STAGES]);
    }
    bt_finger_free(f);
    return rc;
}

/* ---- the calls --------------------------------------------------------- */

/* The sort's arrays, at least bytes long (*got: how long): the ones the
 * last batch kept if they are large enough (one thread at a time has
 * them), else new ones. */
static bkey *take_sort_arrays(bonsai_db *db, size_t bytes, size_t *got)
{
    void *p = NULL;
    *got = bytes;
    pthread_mutex_lock(&db->lock);
    if (db->batch_sort && db->batch_sort_bytes >= bytes) {
        p = db->batch_sort;
        *got = db->batch_sort_bytes;
        db->batch_sort = NULL;
    }
    pthread_mutex_unlock(&db->lock);
    return p ? p : malloc(bytes);
}

/* The largest sort array a store keeps between batches (2 Mi keys): the
 * page faults they save matter less a key in a batch larger still, and a
 * store should not hold a once-in-a-while batch's memory to its close. */
#define SORT_ARRAYS_KEPT_MAX ((size_t)32 << 20)

/* Keeps the arrays (bytes long) for the next batch if they are larger than
 * those kept, up to SORT_ARRAYS_KEPT_MAX; frees the others. */
static void keep_sort_arrays(bonsai_db *db, void *p, size_t bytes)
{
    pthread_mutex_lock(&db->lock);
    if (bytes <= SORT_ARRAYS_KEPT_MAX &&
        (!db->batch_sort || db->batch_sort_bytes < bytes)) {
        void *old = db->batch_sort;
        db->batch_sort = p;
        db->batch_sort_bytes = bytes;
        p = old;
    }
    pthread_mutex_unlock(&db->lock);
    free(p);
}

/* Checks every key for the map.  0, BONSAI_KEYSIZE, BONSAI_INVALID. */
static int check_keys(const batch *b)
{
    for (size_t i = 0; b->keys && i < b->n; i++) {
        bn_key key;
        int rc = api_key(b->map->kind, &b->keys[i], &key);
        if (rc)
            return rc;
    }
    return 0;
}

static int get_batch(bonsai_txn *txn, batch *b)
{
    if (b->n == 0)
        return 0;
    if (!b->vals || !b->found || !(b->ukeys || b->keys))
        return BONSAI_INVALID;
    b->bytes = b->map->kind == BONSAI_KEY_BYTES;
    int rc = check_keys(b);
    if (rc)
        return rc;
    if (b->n > SIZE_MAX / sizeof(bkey))
        return BONSAI_NOMEM;
    size_t bytes;
    if (!(b->order = take_sort_arrays(b->map->db, b->n * sizeof(bkey),
                                      &bytes)))
        return BONSAI_NOMEM;
    b->tmp = (uint8_t *)b->vals;
    rc = sort_keys(b);
    if (rc == 0)
        rc = txn_read(b->map->db, txn, batch_fn, b);
    keep_sort_arrays(b->map->db, b->order, bytes);
    return rc;
}

int bonsai_get_batch_u64(bonsai_txn *txn, bonsai_map map,
                         const uint64_t *keys, size_t n, bonsai_val *vals,
                         uint8_t *found)
{
    int rc = api_u64_ok(map);
    if (rc || (rc = api_map_ok(txn, map)))
        return rc;
    batch b = {.map = map, .ukeys = keys, .n = n, .vals = vals,
               .found = found};
    return get_batch(txn, &b);
}

int bonsai_get_batch(bonsai_txn *txn, bonsai_map map, const bonsai_val *keys,
                     size_t n, bonsai_val *vals, uint8_t *found)
{
    int rc = api_map_ok(txn, map);
    if (rc)
        return rc;
    batch b = {.map = map, .keys = keys, .n = n, .vals = vals,
               .found = found};
    return get_batch(txn, &b);
}

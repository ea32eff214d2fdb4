/* SPDX-License-Identifier: MIT */
/*
 * cursor.c - ordered iteration.  A cursor holds a decoded copy of the leaf
 * it stands in, so next and prev within a leaf cost nothing.  Crossing to
 * the next leaf seeks the separator above the copy (the previous: below
 * it), one descent to the leaf wanted; any move after the map changed in
 * the cursor's own transaction re-finds the position from the current key
 * (bt_seek GT / LT), so a cursor never follows a stale pointer.
 *
 * Where a cursor stands is its key, whatever writes do (bonsai.h): while
 * the key is in the map the cursor is on it; once it is deleted the cursor
 * stands in its gap (AT_GAP), where get finds nothing and next and prev
 * go to the keys either side of it.
 *
 * A cursor that ran off an end stands beyond it (AT_END after the last
 * key, AT_START before the first), so a move the other way comes back.
 *
 * A range [lo, hi) bounds every landing: a key reached beyond it is not
 * taken, the cursor stands beyond that end of the range instead.
 *
 * A cursor writes at its key through the data calls (bonsai_del,
 * bonsai_put), in its own transaction, and then follows the rules above.
 *
 * A cursor opened in the caller's transaction is tied to it (txn_tie):
 * once that transaction ends, every call but close answers BONSAI_BADTXN.
 */
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "maps.h"
#include "txn.h"

/* AT_ENTRY: on key, as of gen; AT_GAP: key was deleted (as of gen);
 * AT_END / AT_START: past the last / before the first key (of the range). */
enum { AT_NOTHING, AT_ENTRY, AT_GAP, AT_END, AT_START };

/* One end of a cursor's range. */
typedef struct range_end {
    int set;
    bn_key key;
    uint8_t buf[BONSAI_MAX_KEY];
} range_end;

struct bonsai_cursor {
    bonsai_db *db;
    bonsai_txn *txn;
    bonsai_txn *own_txn; /* snapshot opened for a NULL txn */
    bonsai_map map;
    txn_tie tie;         /* to the caller's txn (not own_txn) */
    bn_node leaf;
    bt_bounds bounds; /* of the leaf copy */
    uint32_t idx;
    int state;
    uint64_t gen;
    const uint64_t *gen_src; /* the writer's change count, or NO_CHANGES */
    uint64_t ukey;
    uint8_t kbuf[BONSAI_MAX_KEY];
    bn_key key; /* current key, a copy */
    range_end lo, hi; /* the range: lo <= key < hi, where set */
};

/* A read snapshot never changes under its cursors. */
static const uint64_t NO_CHANGES = 0;

static uint64_t current_gen(const bonsai_cursor *c)
{
    return *c->gen_src;
}

/* BONSAI_INVALID for no cursor, BONSAI_BADTXN once its txn has ended. */
static int usable(const bonsai_cursor *c)
{
    if (!c)
        return BONSAI_INVALID;
    return c->tie.ended ? BONSAI_BADTXN : 0;
}

/* Counts the cursor on its map, so that the map's handle is not freed
 * under it (bonsai_map_close); 0 or BONSAI_INVALID for a closed handle. */
static int count_cursor(bonsai_map map, int delta)
{
    bonsai_db *db = map->db;
    pthread_mutex_lock(&db->lock);
    int rc = map->name ? 0 : BONSAI_INVALID;
    if (rc == 0)
        map->cursors += (uint32_t)delta;
    pthread_mutex_unlock(&db->lock);
    return rc;
}

int bonsai_cursor_open(bonsai_txn *txn, bonsai_map map, bonsai_cursor **out)
{
    if (!out || !map || !map->db || (txn && txn->db != map->db))
        return BONSAI_INVALID;
    *out = NULL;
    bonsai_cursor *c = calloc(1, sizeof *c);
    if (!c)
        return BONSAI_NOMEM;
    if (count_cursor(map, 1)) {
        free(c);
        return BONSAI_INVALID;
    }
    c->db = map->db;
    c->map = map;
    c->txn = txn;
    if (!txn && c->db->cow) {
        int rc = bonsai_txn_begin(c->db, BONSAI_TXN_RDONLY, &c->own_txn);
        if (rc) {
            count_cursor(map, -1);
            free(c);
            return rc;
        }
        c->txn = c->own_txn;
    }
    if (txn)
        txn_tie_cursor(txn, &c->tie);
    c->gen_src = c->txn && c->txn->rdonly ? &NO_CHANGES : &c->db->write_gen;
    bn_init(&c->leaf, map->kind, 1);
    *out = c;
    return 0;
}

void bonsai_cursor_close(bonsai_cursor *c)
{
    if (!c)
        return;
    if (c->txn && !c->own_txn)
        txn_untie_cursor(c->txn, &c->tie);
    bn_clear(&c->leaf);
    if (c->own_txn)
        bonsai_txn_abort(c->own_txn);
    count_cursor(c->map, -1);
    free(c);
}

/* A scan's every step: read off the leaf copy's arrays in place. */
static void remember_key(bonsai_cursor *c)
{
    if (c->map->kind == BONSAI_KEY_U64) {
        c->key.u = c->leaf.k64[c->idx];
        return;
    }
    bn_span s = c->leaf.kb[c->idx]; /* into the leaf copy */
    c->key.b = c->leaf.arena + s.off;
    c->key.len = s.len;
}

/* The current key, moved out of the leaf copy that a seek replaces. */
static bn_key key_to_keep(bonsai_cursor *c)
{
    if (c->map->kind == BONSAI_KEY_BYTES && c->key.b != c->kbuf) {
        memcpy(c->kbuf, c->key.b, c->key.len);
        c->key.b = c->kbuf;
    }
    return c->key;
}

/* Does a mode move backward (land on or below its key)? */
static int backward(int mode)
{
    return mode == BT_LAST || mode == BT_LT || mode == BT_LE ||
           mode == BT_PREV_LEAF;
}

/* Leaves the current key if it lies beyond the range: the cursor then
 * stands beyond that end, BONSAI_NOTFOUND. */
static int keep_in_range(bonsai_cursor *c)
{
    unsigned kind = c->map->kind;
    if (c->hi.set && !bt_key_less(kind, c->key, c->hi.key)) {
        c->state = AT_END;
        return BONSAI_NOTFOUND;
    }
    if (c->lo.set && bt_key_less(kind, c->key, c->lo.key)) {
        c->state = AT_START;
        return BONSAI_NOTFOUND;
    }
    return 0;
}

static int seek(bonsai_cursor *c, int mode, bn_key key)
{
    if (c->txn) {
        int rc = txn_check(c->txn);
        if (rc)
            return rc;
    }
    bt_tree *t;
    bt_rd rd;
    int rc = txn_tree(c->db, c->txn, c->map, &t, &rd);
    if (rc == 0)
        rc = bt_seek(c->db, &rd, t, mode, key, &c->leaf, &c->idx,
                     &c->bounds);
    if (rc) {
        c->state = rc != BONSAI_NOTFOUND ? AT_NOTHING
                   : backward(mode)      ? AT_START
                                         : AT_END;
        return rc;
    }
    c->state = AT_ENTRY;
    c->gen = current_gen(c);
    remember_key(c);
    return keep_in_range(c);
}

/* The first key >= key within the range. */
static int seek_ge(bonsai_cursor *c, bn_key key)
{
    if (c->lo.set && bt_key_less(c->map->kind, key, c->lo.key))
        key = c->lo.key;
    return seek(c, BT_GE, key);
}

/* The last key <= key within the range. */
static int seek_le(bonsai_cursor *c, bn_key key)
{
    if (c->hi.set && !bt_key_less(c->map->kind, key, c->hi.key))
        return seek(c, BT_LT, c->hi.key);
    return seek(c, BT_LE, key);
}

static int go_first(bonsai_cursor *c)
{
    return c->lo.set ? seek(c, BT_GE, c->lo.key)
                     : seek(c, BT_FIRST, (bn_key){0});
}

static int go_last(bonsai_cursor *c)
{
    return c->hi.set ? seek(c, BT_LT, c->hi.key)
                     : seek(c, BT_LAST, (bn_key){0});
}

int bonsai_cursor_first(bonsai_cursor *c)
{
    int rc = usable(c);
    return rc ? rc : go_first(c);
}

int bonsai_cursor_last(bonsai_cursor *c)
{
    int rc = usable(c);
    return rc ? rc : go_last(c);
}

/* A key as the cursor's map reads it (bytes point into *key). */
static int to_key(const bonsai_cursor *c, const bonsai_val *key, bn_key *k)
{
    if (!key || (key->size && !key->data))
        return BONSAI_INVALID;
    memset(k, 0, sizeof *k);
    if (c->map->kind == BONSAI_KEY_U64) {
        if (key->size != sizeof(uint64_t))
            return BONSAI_KEYSIZE;
        memcpy(&k->u, key->data, sizeof k->u);
        return 0;
    }
    if (key->size == 0 || key->size > BONSAI_MAX_KEY)
        return BONSAI_KEYSIZE;
    k->b = key->data;
    k->len = (uint32_t)key->size;
    return 0;
}

/* The checks of a seek by a bonsai_val key, then the seek. */
static int seek_val(bonsai_cursor *c, const bonsai_val *key,
                    int (*how)(bonsai_cursor *, bn_key))
{
    int rc = usable(c);
    bn_key k;
    if (rc == 0)
        rc = to_key(c, key, &k);
    return rc ? rc : how(c, k);
}

/* The checks of a seek by a u64 key, then the seek. */
static int seek_u64(bonsai_cursor *c, uint64_t key,
                    int (*how)(bonsai_cursor *, bn_key))
{
    int rc = usable(c);
    if (rc)
        return rc;
    if (c->map->kind != BONSAI_KEY_U64)
        return BONSAI_MAPKIND;
    return how(c, (bn_key){.u = key});
}

int bonsai_cursor_seek(bonsai_cursor *c, const bonsai_val *key)
{
    return seek_val(c, key, seek_ge);
}

int bonsai_cursor_seek_u64(bonsai_cursor *c, uint64_t key)
{
    return seek_u64(c, key, seek_ge);
}

int bonsai_cursor_seek_le(bonsai_cursor *c, const bonsai_val *key)
{
    return seek_val(c, key, seek_le);
}

int bonsai_cursor_seek_le_u64(bonsai_cursor *c, uint64_t key)
{
    return seek_u64(c, key, seek_le);
}

/* From the first or last entry of the leaf copy to the leaf beside it,
 * by the separator between them (nothing lies between the entry and it).
 * Separators that do not lie beyond the entry (a damaged or hostile
 * file) would send a scan round in circles: BONSAI_CORRUPT.  So is a
 * leaf that does not begin (end) at that separator, or whose keys lie
 * outside its own (bt_seek), and one whose first (last) key does not
 * follow the entry: a scan of a corrupt tree never ends as if the map
 * had ended, nor meets a key twice. */
static int cross(bonsai_cursor *c, int forward)
{
    int has = forward ? c->bounds.has_upper : c->bounds.has_lower;
    if (!has) {
        c->state = forward ? AT_END : AT_START;
        return BONSAI_NOTFOUND;
    }
    uint8_t buf[BONSAI_MAX_KEY];
    bn_key bound = forward ? c->bounds.upper : c->bounds.lower;
    if (c->map->kind == BONSAI_KEY_BYTES) {
        memcpy(buf, bound.b, bound.len); /* the seek rewrites the bounds */
        bound.b = buf;
    }
    bn_key here = key_to_keep(c);
    if (forward ? !bt_key_less(c->map->kind, here, bound)
                : bt_key_less(c->map->kind, here, bound)) {
        c->state = AT_NOTHING;
        return BONSAI_CORRUPT;
    }
    int rc = seek(c, forward ? BT_NEXT_LEAF : BT_PREV_LEAF, bound);
    if (rc == 0 && (forward ? !bt_key_less(c->map->kind, here, c->key)
                            : !bt_key_less(c->map->kind, c->key, here))) {
        c->state = AT_NOTHING;
        return BONSAI_CORRUPT;
    }
    return rc;
}

/* After writes: looks for the cursor's key again.  0: it is there, the
 * cursor on it; BONSAI_NOTFOUND: it was deleted, the cursor stands in its
 * gap. */
static int refind(bonsai_cursor *c)
{
    bn_key k = key_to_keep(c);
    int rc = seek(c, BT_GE, k);
    if (rc == 0 && !bt_key_less(c->map->kind, k, c->key))
        return 0;
    if (rc && rc != BONSAI_NOTFOUND)
        return rc;
    c->key = k; /* the seek went past it: back to the gap */
    c->state = AT_GAP;
    c->gen = current_gen(c);
    return BONSAI_NOTFOUND;
}

static int step(bonsai_cursor *c, int forward)
{
    int rc = usable(c);
    if (rc)
        return rc;
    /* from beyond an end: back at that end, or nothing further */
    if (c->state == AT_NOTHING || c->state == AT_START || c->state == AT_END) {
        if (c->state == (forward ? AT_END : AT_START))
            return BONSAI_NOTFOUND;
        return forward ? go_first(c) : go_last(c);
    }
    if (c->state == AT_ENTRY && c->gen == current_gen(c)) {
        if (forward && c->idx + 1 < c->leaf.n) {
            c->idx++;
            remember_key(c);
            return keep_in_range(c);
        }
        if (!forward && c->idx > 0) {
            c->idx--;
            remember_key(c);
            return keep_in_range(c);
        }
        return cross(c, forward);
    }
    bn_key k = key_to_keep(c);
    return seek(c, forward ? BT_GT : BT_LT, k);
}

int bonsai_cursor_next(bonsai_cursor *c)
{
    return step(c, 1);
}

int bonsai_cursor_prev(bonsai_cursor *c)
{
    return step(c, 0);
}

/* 0 when the cursor is on its key (after writes: if the key is still
 * there), else BONSAI_NOTFOUND. */
static int on_key(bonsai_cursor *c)
{
    if (c->state != AT_ENTRY && c->state != AT_GAP)
        return BONSAI_NOTFOUND;
    if (c->gen != current_gen(c))
        return refind(c);
    return c->state == AT_GAP ? BONSAI_NOTFOUND : 0;
}

int bonsai_cursor_get(bonsai_cursor *c, bonsai_val *key, bonsai_val *val)
{
    int rc = usable(c);
    if (rc)
        return rc;
    if ((rc = on_key(c)))
        return rc;
    if (key) {
        if (c->map->kind == BONSAI_KEY_U64) {
            c->ukey = c->key.u;
            key->data = &c->ukey;
            key->size = sizeof c->ukey;
        } else {
            key->data = c->key.b;
            key->size = c->key.len;
        }
    }
    if (!val)
        return 0;
    static const uint8_t empty[1];
    if (!c->leaf.val) { /* a leaf of empty values only */
        val->data = empty;
        val->size = 0;
        return 0;
    }
    bn_span s = c->leaf.val[c->idx]; /* in place, as the key */
    unsigned vflag = c->leaf.vflag[c->idx];
    const uint8_t *v = s.len ? c->leaf.arena + s.off : empty;
    uint32_t len = s.len;
    if (!(vflag & BN_VAL_OVERFLOW)) {
        val->data = v;
        val->size = len;
        return 0;
    }
    uint64_t end = c->txn && c->txn->rdonly ? c->txn->snap.end
                                            : c->db->al.end;
    return bt_value(c->db, end, v, len, vflag, val);
}

int bonsai_cursor_get_u64(bonsai_cursor *c, uint64_t *key, bonsai_val *val)
{
    int rc = usable(c);
    if (rc)
        return rc;
    if (c->map->kind != BONSAI_KEY_U64)
        return BONSAI_MAPKIND;
    rc = bonsai_cursor_get(c, NULL, val);
    if (rc == 0 && key)
        *key = c->key.u;
    return rc;
}

/* ---- writes at the cursor --------------------------------------------- */

/* The checks of a write at the cursor: the key it is on, as a bonsai_val
 * of the data calls (held by the cursor). */
static int write_key(bonsai_cursor *c, bonsai_val *kv)
{
    int rc = usable(c);
    if (rc)
        return rc;
    if (c->txn && c->txn->rdonly)
        return BONSAI_READONLY;
    if ((rc = on_key(c)))
        return rc;
    bn_key k = key_to_keep(c);
    if (c->map->kind == BONSAI_KEY_U64) {
        c->ukey = k.u;
        *kv = (bonsai_val){sizeof c->ukey, &c->ukey};
    } else {
        *kv = (bonsai_val){k.len, k.b};
    }
    return 0;
}

int bonsai_cursor_del(bonsai_cursor *c)
{
    bonsai_val kv;
    int rc = write_key(c, &kv);
    if (rc == 0)
        rc = bonsai_del(c->txn, c->map, &kv);
    if (rc == 0) { /* in the key's gap, as any delete of it leaves it */
        c->state = AT_GAP;
        c->gen = current_gen(c);
    }
    return rc;
}

int bonsai_cursor_put(bonsai_cursor *c, const bonsai_val *val,
                      unsigned flags)
{
    bonsai_val kv;
    int rc = write_key(c, &kv);
    /* the cursor stays on its key: the next call re-finds it */
    return rc ? rc : bonsai_put(c->txn, c->map, &kv, val, flags);
}

/* ---- ranges ------------------------------------------------------------ */

static void set_end(bonsai_cursor *c, range_end *e, const bn_key *k)
{
    e->set = k != NULL;
    if (!k)
        return;
    e->key = *k;
    if (c->map->kind == BONSAI_KEY_BYTES) {
        memcpy(e->buf, k->b, k->len);
        e->key.b = e->buf;
    }
}

/* Bounds the cursor to [lo, hi) (NULL: open) and unpositions it. */
static void set_range(bonsai_cursor *c, const bn_key *lo, const bn_key *hi)
{
    set_end(c, &c->lo, lo);
    set_end(c, &c->hi, hi);
    c->state = AT_NOTHING;
}

int bonsai_cursor_set_range(bonsai_cursor *c, const bonsai_val *lo,
                            const bonsai_val *hi)
{
    int rc = usable(c);
    if (rc)
        return rc;
    bn_key klo, khi;
    if ((lo && (rc = to_key(c, lo, &klo))) ||
        (hi && (rc = to_key(c, hi, &khi))))
        return rc;
    set_range(c, lo ? &klo : NULL, hi ? &khi : NULL);
    return 0;
}

int bonsai_cursor_set_range_u64(bonsai_cursor *c, uint64_t lo, uint64_t hi,
                                unsigned flags)
{
    int rc = usable(c);
    if (rc)
        return rc;
    if (c->map->kind != BONSAI_KEY_U64)
        return BONSAI_MAPKIND;
    if (flags & ~BONSAI_RANGE_NO_HI)
        return BONSAI_INVALID;
    bn_key klo = {.u = lo}, khi = {.u = hi};
    set_range(c, &klo, flags & BONSAI_RANGE_NO_HI ? NULL : &khi);
    return 0;
}

int bonsai_cursor_set_prefix(bonsai_cursor *c, const bonsai_val *prefix)
{
    int rc = usable(c);
    if (rc)
        return rc;
    if (c->map->kind != BONSAI_KEY_BYTES)
        return BONSAI_MAPKIND;
    bn_key lo;
    if ((rc = to_key(c, prefix, &lo)))
        return rc;
    /* hi: the prefix without its trailing 0xff bytes, its last byte one
     * up; every key that begins with the prefix lies below it.  All
     * 0xff: no key beyond the prefix's, no hi. */
    uint32_t n = lo.len;
    while (n > 0 && lo.b[n - 1] == 0xff)
        n--;
    set_end(c, &c->lo, &lo);
    c->hi.set = n > 0;
    if (n) {
        memcpy(c->hi.buf, lo.b, n);
        c->hi.buf[n - 1]++;
        c->hi.key = (bn_key){.b = c->hi.buf, .len = n};
    }
    c->state = AT_NOTHING;
    return 0;
}

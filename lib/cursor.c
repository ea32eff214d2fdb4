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
 * A cursor opened in the caller's transaction is tied to it (txn_tie):
 * once that transaction ends, every call but close answers BONSAI_BADTXN.
 */
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "maps.h"
#include "txn.h"

/* AT_ENTRY: on key, as of gen; AT_GAP: key was deleted (as of gen). */
enum { AT_NOTHING, AT_ENTRY, AT_GAP, AT_END };

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
        c->state = rc == BONSAI_NOTFOUND ? AT_END : AT_NOTHING;
        return rc;
    }
    c->state = AT_ENTRY;
    c->gen = current_gen(c);
    remember_key(c);
    return 0;
}

int bonsai_cursor_first(bonsai_cursor *c)
{
    int rc = usable(c);
    return rc ? rc : seek(c, BT_FIRST, (bn_key){0});
}

int bonsai_cursor_last(bonsai_cursor *c)
{
    int rc = usable(c);
    return rc ? rc : seek(c, BT_LAST, (bn_key){0});
}

int bonsai_cursor_seek(bonsai_cursor *c, const bonsai_val *key)
{
    int rc = usable(c);
    if (rc)
        return rc;
    if (!key || (key->size && !key->data))
        return BONSAI_INVALID;
    bn_key k = {0};
    if (c->map->kind == BONSAI_KEY_U64) {
        if (key->size != sizeof(uint64_t))
            return BONSAI_KEYSIZE;
        memcpy(&k.u, key->data, sizeof k.u);
    } else {
        if (key->size == 0 || key->size > BONSAI_MAX_KEY)
            return BONSAI_KEYSIZE;
        k.b = key->data;
        k.len = (uint32_t)key->size;
    }
    return seek(c, BT_GE, k);
}

int bonsai_cursor_seek_u64(bonsai_cursor *c, uint64_t key)
{
    int rc = usable(c);
    if (rc)
        return rc;
    if (c->map->kind != BONSAI_KEY_U64)
        return BONSAI_MAPKIND;
    return seek(c, BT_GE, (bn_key){.u = key});
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
        c->state = AT_END;
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
    if (c->state == AT_NOTHING)
        return forward ? bonsai_cursor_first(c) : bonsai_cursor_last(c);
    if (c->state == AT_END)
        return BONSAI_NOTFOUND;
    if (c->state == AT_ENTRY && c->gen == current_gen(c)) {
        if (forward && c->idx + 1 < c->leaf.n) {
            c->idx++;
            remember_key(c);
            return 0;
        }
        if (!forward && c->idx > 0) {
            c->idx--;
            remember_key(c);
            return 0;
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

int bonsai_cursor_get(bonsai_cursor *c, bonsai_val *key, bonsai_val *val)
{
    int rc = usable(c);
    if (rc)
        return rc;
    if (c->state != AT_ENTRY && c->state != AT_GAP)
        return BONSAI_NOTFOUND;
    if (c->gen != current_gen(c)) {
        if ((rc = refind(c)))
            return rc;
    } else if (c->state == AT_GAP) {
        return BONSAI_NOTFOUND;
    }
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

/* SPDX-License-Identifier: MIT */
/*
 * put.c - the write path of puts and deletes: which way each takes (the
 * table in put.h), and applying the puts that wait.
 */
#include "put.h"

#include "btree.h"
#include "cache.h"
#include "change.h"
#include "maps.h"
#include "room.h"
#include "txn.h"

/* After an undo: decoded nodes are gone, so cursors look again, and the
 * trees are whole (the change failed without harm). */
static void note_undone(bonsai_db *db)
{
    db->write_gen++;
    db->settled_gen = db->write_gen;
}

/* Writes the maps' changed records now, or puts the catalog back as it
 * was (the records then wait, as they do after any change). */
static int store_records_or_undo(bonsai_db *db)
{
    bt_tree catalog = db->catalog;
    int rc = maps_store_records(db);
    if (rc == 0)
        rc = bt_flush(db);
    if (rc == 0) {
        bt_after_flush(db);
        return 0;
    }
    bt_forget_changes(db);
    bt_discard(db, &db->catalog);
    db->catalog = catalog;
    db->catalog.root.mem = NULL;
    maps_mark_records_dirty(db); /* some may have been stored, then lost */
    note_undone(db);
    return rc;
}

/* A change written at once, and undone when that fails: a put, or with
 * vlen ROOM_DELETE a delete.  The room check must assume every node may
 * need a run of node_bytes; near the cap the free space lies in shorter
 * runs and it says no while the change may still fit (a node that finds
 * no run long enough is written as two halves).  With nothing else
 * cached, trying is honest: the change is acknowledged only once written,
 * else its tree is as it was.  A put takes no run that would leave less
 * room than a delete needs (it is written in shorter runs, or not).  The
 * records go first, so that the catalog holds every map's record and the
 * one this change touches is rewritten in place later. */
static int change_through(bonsai_db *db, bt_tree *t, bn_key key,
                          const uint8_t *val, uint32_t vlen, unsigned flags)
{
    int rc = store_records_or_undo(db);
    if (rc)
        return rc;
    bt_tree saved = *t;
    if (vlen == ROOM_DELETE) {
        rc = bt_del(db, t, key);
    } else {
        db->al.keep_runs = ROOM_DEL_IN_PLACE;
        rc = bt_put(db, t, key, val, vlen, flags);
    }
    if (rc == 0)
        rc = bt_flush(db);
    db->al.keep_runs = 0;
    if (rc == 0) {
        bt_after_flush(db);
        store_records_or_undo(db); /* else the record waits */
        return 0;
    }
    bt_forget_changes(db);
    bt_discard(db, t);
    *t = saved;
    t->root.mem = NULL;
    note_undone(db);
    return rc;
}

/* The put path proper: room first, then the tree. */
static int put_now(bonsai_db *db, bt_tree *t, bn_key key, const uint8_t *val,
                   uint32_t vlen, unsigned flags)
{
    uint32_t runs;
    int rc = room_put_key(db, t, key, vlen, &runs);
    if (rc)
        return rc;
    rc = room_reserve(db, room_put_runs(db, t, runs), vlen);
    if (rc == BONSAI_FULL && !db->cow && db->dirty.n == 0)
        return change_through(db, t, key, val, vlen, flags);
    if (rc)
        return rc;
    change_note_tree(db, t);
    return bt_put(db, t, key, val, vlen, flags);
}

/* A key after every other into the decoded last leaf: the sequential
 * load's put, with no descent.  0 and *done = 0 when it does not apply. */
static int append_now(bonsai_db *db, bt_tree *t, bn_key key,
                      const uint8_t *val, uint32_t vlen, int *done)
{
    *done = 0;
    bt_node *tail = bt_tail_leaf(t, key);
    if (!tail || vlen > db->inline_max)
        return 0;
    /* the room the waiting puts count on is not this put's to take */
    if (db->waiting &&
        !room_waiting(db, room_put_any(db, t), db->waiting,
                      db->waiting_payload))
        return 0;
    uint32_t runs =
        room_put_runs(db, t, room_put_leaf(db, t, tail, key, vlen));
    if (!room_has(db, runs, vlen)) {
        /* short of room: the general path decides (it may write the put
         * through); making room may have evicted the leaf */
        if (room_reserve(db, runs, vlen) || !(tail = bt_tail_leaf(t, key)))
            return 0;
    }
    *done = 1;
    change_note_tree(db, t);
    return bt_append(db, t, tail, key, val, vlen);
}

int put_append_direct(bonsai_db *db, map_entry *s, bn_key key,
                      const uint8_t *val, uint32_t vlen, int *done)
{
    *done = 0;
    if (!db->opt.write_cache_bytes || db->waiting || !s->loaded ||
        s->dropped || vlen > db->inline_max || db->wb_error)
        return 0;
    bt_tree *t = &s->w;
    bt_node *tail = bt_tail_leaf_hinted(db, t, key);
    if (!tail ||
        !room_has(db, room_put_runs(db, t,
                                     room_put_leaf(db, t, tail, key, vlen)),
                  vlen))
        return 0;
    *done = 1;
    uint64_t gen0 = db->write_gen;
    uint32_t n0 = tail->bn.n;
    int rc = bt_append(db, t, tail, key, val, vlen);
    if (rc == 0)
        bt_note_tail(db, t, tail, n0);
    return change_settle_cached(db, rc, gen0);
}

/* The key and value bytes a waiting put holds (a u64 key sits in its
 * record). */
static size_t entry_payload(const bt_tree *t, bn_key key, uint32_t vlen)
{
    return (t->kind == BONSAI_KEY_U64 ? 0 : key.len) + vlen;
}

/* The putbuf b held mem0 bytes of memory and payload0 of keys and values
 * before a change: the totals of what waits follow it. */
static void note_bytes(bonsai_db *db, const putbuf *b, size_t mem0,
                       size_t payload0)
{
    db->waiting_bytes = db->waiting_bytes - mem0 + pb_mem_bytes(b);
    db->waiting_payload = db->waiting_payload - payload0 +
                          pb_payload_bytes(b);
}

enum { GO_NOW, GO_WAIT, GO_APPLY_FIRST };

/* The cache's share for waiting puts: fifteen sixteenths.  A batch decodes
 * each leaf once, for its run only, so decoded leaves need little of the
 * budget, and every put more a batch holds spreads a leaf's decode and
 * encode wider (3/4 -> 15/16: 10 M string puts 1501 -> 1217 ns a put).
 * At most the waiting puts' share of the cache, though (what the decoded
 * nodes leave, or under a cap on the whole process a fixed part): a cache
 * over its budget writes its changed nodes back, which frees nothing when
 * the waiting puts are what fills it. */
static size_t waiting_budget(const bonsai_db *db)
{
    size_t cache = db->opt.write_cache_bytes;
    size_t share = cache / 16 * 15;
    size_t left = cache_waiting_share(db);
    return share < left ? share : left;
}

/* Is there room in the budget for one more waiting put in b?  Its arrays
 * grow now if they must, to at most what the budget leaves them. */
static int fits_batch(bonsai_db *db, putbuf *b, size_t payload)
{
    size_t budget = waiting_budget(db), mem0 = pb_mem_bytes(b);
    size_t others = db->waiting_bytes - mem0; /* other maps' batches */
    if (others >= budget)
        return 0;
    int rc = pb_make_room(b, payload, budget - others);
    db->waiting_bytes = db->waiting_bytes - mem0 + pb_mem_bytes(b);
    return rc == 0;
}

/* Frees the arrays every empty batch keeps for its next one; whether any
 * did. */
static int let_kept_go(bonsai_db *db)
{
    int any = 0;
    for (uint32_t i = 0; i < db->nmaps; i++) {
        putbuf *b = &db->maps[i].pb;
        size_t mem0 = pb_mem_bytes(b), payload0 = pb_payload_bytes(b);
        any |= pb_let_go(b);
        note_bytes(db, b, mem0, payload0);
    }
    return any;
}

/* fits_batch, the arrays that empty batches keep (this one's too) giving
 * way when they leave no room.  They are counted in the budget: a map
 * whose batch grew to the whole budget keeps arrays that leave another
 * map's puts none, and the budget may have shrunk since they grew (the
 * decoded nodes took more of the cache).  Kept, they would send every
 * later put to the tree at once (25 to 50 times slower puts). */
static int batch_takes(bonsai_db *db, putbuf *b, size_t payload)
{
    if (fits_batch(db, b, payload))
        return 1;
    return let_kept_go(db) && fits_batch(db, b, payload);
}

/* Does this put wait, go to the tree now, or wait once the waiting puts
 * are applied (the budget or the room is short)?  Appends to a decoded
 * leaf and puts into the last leaf (a sequential load, whose leaf a
 * write-back may just have evicted) go at once.  Other puts wait even
 * where their leaf is decoded: a random decoded leaf is as cold in the
 * CPU's caches as an image, while a sorted batch walks the leaves in
 * order.  Once puts wait, an append to a decoded leaf waits too: finding
 * its leaf costs a search of every branch on the way, which a put that
 * waits never makes. */
static int choose(bonsai_db *db, putbuf *b, const bt_tree *t, bn_key key,
                  uint32_t vlen)
{
    if (!db->opt.write_cache_bytes || vlen > db->inline_max ||
        t->depth == 0 || bt_goes_last(t, key) ||
        (!db->waiting && bt_appends_to_cached_leaf(t, key)))
        return GO_NOW;
    bt_size_unsure(db); /* the room below counts on every node's bound */
    size_t payload = entry_payload(t, key, vlen);
    if (!room_waiting(db, room_put_any(db, t), db->waiting + 1,
                      db->waiting_payload + payload) ||
        !batch_takes(db, b, payload))
        return db->waiting ? GO_APPLY_FIRST : GO_NOW;
    return GO_WAIT;
}

/* A NOOVERWRITE put: is key in the tree (the waiting puts aside)? */
static int check_absent(bonsai_db *db, const bt_tree *t, bn_key key)
{
    bonsai_val v;
    bt_rd rd = {db->al.end, &db->uc, NULL, 0, NULL};
    int rc = bt_get(db, &rd, t, &key, &v);
    return rc == 0 ? BONSAI_EXISTS : rc == BONSAI_NOTFOUND ? 0 : rc;
}

static int wait_put(bonsai_db *db, map_entry *s, bn_key key,
                    const uint8_t *val, uint32_t vlen)
{
    putbuf *b = &s->pb;
    size_t mem0 = pb_mem_bytes(b), payload0 = pb_payload_bytes(b);
    uint32_t n0 = b->n;
    int rc = pb_put(b, key, val, vlen);
    if (rc)
        return rc;
    db->waiting = db->waiting + b->n - n0; /* n may shrink: pb_settle */
    note_bytes(db, b, mem0, payload0);
    db->write_gen++;
    return 0;
}

int put_key(bonsai_db *db, map_entry *s, bt_tree *t, bn_key key,
            const uint8_t *val, uint32_t vlen, unsigned flags)
{
    int rc;
    /* a put that waits needs not know whether its key waits already (the
     * putbuf keeps the newest value): that question is a memory miss */
    if (s->pb.n && !(flags & BONSAI_NOOVERWRITE) && vlen <= db->inline_max &&
        choose(db, &s->pb, t, key, vlen) == GO_WAIT)
        return wait_put(db, s, key, val, vlen);
    if (pb_find(&s->pb, &key) != UINT32_MAX) {
        if (flags & BONSAI_NOOVERWRITE)
            return BONSAI_EXISTS;
        /* the new value may take an entry and arena bytes more (the
         * front finds only the newest puts), within the budget too */
        if (vlen <= db->inline_max &&
            batch_takes(db, &s->pb, entry_payload(t, key, vlen)))
            return wait_put(db, s, key, val, vlen);
        /* its older value must land first */
        if ((rc = put_apply_waiting(db, s)))
            return rc;
    }
    int done;
    if ((rc = append_now(db, t, key, val, vlen, &done)) || done)
        return rc;
    /* a put that changes nothing needs no room: found before any is made */
    if ((flags & BONSAI_NOOVERWRITE) && (rc = check_absent(db, t, key)))
        return rc;
    int go = choose(db, &s->pb, t, key, vlen);
    if (go == GO_APPLY_FIRST) {
        if ((rc = put_apply_all(db)))
            return rc;
        go = choose(db, &s->pb, t, key, vlen);
    }
    if (go == GO_WAIT)
        return wait_put(db, s, key, val, vlen);
    /* the room the waiting puts count on is not this put's to take */
    if (db->waiting &&
        !room_waiting(db, room_put_any(db, t), db->waiting,
                      db->waiting_payload) &&
        (rc = put_apply_all(db)))
        return rc;
    return put_now(db, t, key, val, vlen, flags);
}

int put_reserve(bonsai_db *db, uint32_t runs, uint32_t vlen)
{
    int rc;
    /* the room the waiting puts count on is not this change's to take */
    if (db->waiting &&
        !room_waiting(db, runs, db->waiting, db->waiting_payload) &&
        (rc = put_apply_all(db)))
        return rc;
    return room_reserve(db, runs, vlen);
}

int put_new_record(bonsai_db *db, map_entry *s)
{
    int rc = BONSAI_FULL;
    if (db->opt.write_cache_bytes)
        rc = put_reserve(db, room_put_any(db, &db->catalog), 0);
    if (rc == BONSAI_FULL && db->dirty.n == 0)
        return store_records_or_undo(db);
    return rc ? rc : maps_store_record(db, s);
}

int put_del(bonsai_db *db, map_entry *s, bt_tree *t, bn_key key)
{
    int rc;
    /* a delete of an absent key changes nothing and needs no room: it is
     * found out before any is made, or any waiting put applied */
    if (pb_find(&s->pb, &key) == UINT32_MAX &&
        (rc = check_absent(db, t, key)) != BONSAI_EXISTS)
        return rc ? rc : BONSAI_NOTFOUND;
    if ((rc = put_apply_waiting(db, s)))
        return rc;
    /* the path read first: room_del_runs counts its growth bounds */
    bt_node *leaf;
    if (t->depth && (rc = bt_leaf_of(db, t, key, &leaf)))
        return rc;
    uint32_t runs = room_del_runs(db, t);
    change_note_tree(db, t);
    /* short of room, a delete without copy-on-write leaves its leaf where
     * it is, unmerged, when it can */
    if (!room_has(db, runs, ROOM_DELETE) ||
        (db->waiting &&
         !room_waiting(db, runs, db->waiting, db->waiting_payload))) {
        int done;
        if ((rc = bt_del_in_place(db, t, key, &done)) || done)
            return rc;
    }
    rc = put_reserve(db, runs, ROOM_DELETE);
    if (rc == BONSAI_FULL && !db->cow && db->dirty.n == 0)
        return change_through(db, t, key, NULL, ROOM_DELETE, 0);
    return rc ? rc : bt_del(db, t, key);
}

/* apply_run through the decoded leaf: the whole run when there is room
 * for it, else just its first entry, with its room counted exactly. */
static int put_run_decoded(bonsai_db *db, bt_tree *t, const putbuf *b,
                           uint32_t from, uint32_t max, uint32_t *to)
{
    /* the leaf read first: room_run counts its growth bound */
    bt_node *leaf;
    int rc = t->depth ? bt_leaf_of(db, t, pb_key(b, from), &leaf) : 0;
    if (rc == 0)
        rc = room_reserve(db, room_run(db, t, max), 0);
    if (rc == 0) {
        change_note_tree(db, t);
        rc = bt_put_run(db, t, b, from, max, to);
    } else if (rc == BONSAI_FULL) {
        uint32_t vlen;
        const uint8_t *val = pb_value(b, from, &vlen);
        rc = put_now(db, t, pb_key(b, from), val, vlen, 0);
        *to = from + (rc == 0);
    }
    return rc;
}

/* Entries from, from + 1, ... of the sorted batch that share a leaf: into
 * the leaf's image where it lies when that needs neither decoding nor
 * room, else through the decoded leaf.  *to = the first entry not
 * applied. */
static int apply_run(bonsai_db *db, map_entry *s, uint32_t from, uint32_t *to)
{
    bt_tree *t = &s->w;
    uint32_t max = s->pb.n - from < ROOM_RUN_MAX ? s->pb.n - from
                                                 : ROOM_RUN_MAX;
    uint64_t gen0 = db->write_gen;
    *to = from;
    int done, rc = bt_put_run_in_place(db, t, &s->pb, from, max, to, &done);
    if (rc == 0 && !done)
        rc = put_run_decoded(db, t, &s->pb, from, max, to);
    if (rc) {
        change_settle_failed(db, gen0);
        return rc;
    }
    if (!db->cow)
        bt_release_now(db);
    uint64_t failed_ms = db->wb_error_ms;
    rc = cache_after_change(db); /* a failed write leaves changes cached */
    db->settled_gen = db->write_gen;
    /* a write-back the disk just refused: the rest of the batch waits,
     * and the change that applies it hears so now, not after the whole
     * batch (an earlier refusal the cache remembers is not news: a sync
     * tries again) */
    int refused = (rc == BONSAI_ENOSPC || rc == BONSAI_IO) &&
                  db->wb_error_ms != failed_ms;
    return refused ? rc : 0;
}

/* How many keys ahead of the run being applied their leaves are asked
 * for.  Near a cap a batch puts a key or two into each leaf, and reading
 * each leaf (bt_prefetch_leaf: all of it) is cache misses that the runs
 * before it can overlap (a random fill to a 256 MiB cap, two stores
 * filled in turns in one process: 5 % with the leaves' first two lines
 * asked for, 17 % more with their whole images). */
#define AHEAD_KEYS 4u

/* Asks for the leaves of the keys from *next up to AHEAD_KEYS past i
 * (*last: the page of the leaf asked for last).  Measured without
 * copy-on-write or compression only, so only there. */
static void ask_ahead(bonsai_db *db, map_entry *s, uint32_t i, uint32_t *next,
                      uint64_t *last)
{
    if (db->cow || db->opt.compression != BONSAI_COMPRESS_NONE)
        return;
    const putbuf *b = &s->pb;
    uint32_t to = b->n - i > AHEAD_KEYS ? i + AHEAD_KEYS : b->n;
    if (*next < i)
        *next = i;
    for (; *next < to; ++*next)
        bt_prefetch_leaf(db, &s->w, pb_key(b, *next), last);
}

int put_apply_waiting(bonsai_db *db, map_entry *s)
{
    putbuf *b = &s->pb;
    if (b->n == 0)
        return 0;
    size_t mem0 = pb_mem_bytes(b), payload0 = pb_payload_bytes(b);
    uint32_t n0 = b->n;
    pb_sort(b); /* its scratch may have grown the index's block */
    note_bytes(db, b, mem0, payload0);
    mem0 = pb_mem_bytes(b);
    uint32_t i = 0, asked = 0;
    uint64_t last = UINT64_MAX;
    int rc = 0;
    while (i < b->n) {
        ask_ahead(db, s, i, &asked, &last);
        if ((rc = apply_run(db, s, i, &i)))
            break;
    }
    /* Under a cap on the whole process the decoded nodes want the
     * arrays' memory between batches.  Else they stay: mapping and first
     * touching them anew for every batch took a fifth of a load of 10 M
     * random keys with 16-byte values. */
    pb_keep_from(b, i, cache_in_cap(db));
    db->waiting -= n0 - b->n;
    note_bytes(db, b, mem0, payload0);
    return rc;
}

int put_apply_all(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps && db->waiting; i++) {
        int rc = put_apply_waiting(db, &db->maps[i]);
        if (rc)
            return rc;
    }
    return 0;
}

void put_give_back(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        putbuf *b = &db->maps[i].pb;
        size_t mem0 = pb_mem_bytes(b), payload0 = pb_payload_bytes(b);
        pb_give_back(b);
        note_bytes(db, b, mem0, payload0);
    }
}

int put_new_keys(bonsai_db *db, map_entry *s, uint64_t *n)
{
    putbuf *b = &s->pb;
    size_t mem0 = pb_mem_bytes(b), payload0 = pb_payload_bytes(b);
    uint32_t n0 = b->n;
    pb_settle(b); /* a key counted once */
    db->waiting -= n0 - b->n;
    note_bytes(db, b, mem0, payload0);
    *n = 0;
    for (uint32_t i = 0; i < s->pb.n; i++) {
        int rc = check_absent(db, &s->w, pb_key(&s->pb, i));
        if (rc == 0)
            ++*n;
        else if (rc != BONSAI_EXISTS)
            return rc;
    }
    return 0;
}

int put_waiting_get(const map_entry *s, const bn_key *key, bonsai_val *out)
{
    uint32_t i = pb_find(&s->pb, key);
    if (i == UINT32_MAX)
        return BONSAI_NOTFOUND;
    uint32_t vlen;
    out->data = pb_value(&s->pb, i, &vlen);
    out->size = vlen;
    return 0;
}

/* SPDX-License-Identifier: MIT */
/* room.c - the room budget (room.h derives every figure here). */
#include "room.h"

#include "btree.h"
#include "cache.h"
#include "regroup.h"

uint32_t room_growth_any(uint32_t node_entries)
{
    uint64_t keys = (uint64_t)node_entries + 1u;
    uint64_t bytes = keys * 8u + (keys / 64u + 1u) * GROW_GROUP_BYTES;
    return bytes < BN_GROW_UNKNOWN ? (uint32_t)bytes : BN_GROW_UNKNOWN - 1;
}

/* Slots beyond the one split a change counts for a node that may grow by
 * `grow` bytes: within half a node, none (one split absorbs it); past
 * that, a node of up to node_bytes + grow split in halves until each
 * fits makes at most 2 ceil(grow / node_bytes) + 1 more, and its parent,
 * whose separators shift too, as many. */
static uint32_t regroup_runs(const bonsai_db *db, uint64_t grow)
{
    uint64_t node = db->opt.node_bytes;
    if (grow <= node / 2)
        return 0;
    uint64_t pieces = 2u * ((grow + node - 1) / node) + 1u;
    uint64_t runs = 2u * pieces;
    return runs < UINT32_MAX / 4 ? (uint32_t)runs : UINT32_MAX / 4;
}

uint32_t room_regroup(const bonsai_db *db)
{
    return regroup_runs(db, db->grow_max);
}

/* A waiting put's leaf is not read yet: where the store opened with
 * images it has not read, its bound may be any. */
static uint32_t regroup_unread(const bonsai_db *db)
{
    return regroup_runs(db, db->unread_nodes
                                 ? room_growth_any(db->opt.node_entries)
                                 : db->grow_max);
}

uint32_t room_put_worst(const bonsai_db *db, const bt_tree *t)
{
    return 2u * (t->depth + 1u) + 2u + room_regroup(db);
}

uint32_t room_del_worst(const bonsai_db *db, const bt_tree *t)
{
    return 2u * (t->depth + 1u) + room_regroup(db);
}

static uint32_t record_runs(const bonsai_db *db)
{
    return db->catalog.depth + 1u;
}

uint32_t room_put_runs(const bonsai_db *db, const bt_tree *t,
                        uint32_t runs)
{
    uint32_t later_delete = db->cow ? room_del_worst(db, t) +
                                          db->catalog.depth + 2u
                                    : ROOM_DEL_IN_PLACE;
    return runs + later_delete + record_runs(db);
}

uint32_t room_del_runs(const bonsai_db *db, const bt_tree *t)
{
    return room_del_worst(db, t) + record_runs(db);
}

uint32_t room_put_any(const bonsai_db *db, const bt_tree *t)
{
    return room_put_runs(db, t, room_put_worst(db, t));
}

uint32_t room_put_leaf(const bonsai_db *db, const bt_tree *t,
                       const bt_node *leaf, bn_key key, uint32_t vlen)
{
    if (db->cow || !bt_leaf_takes(db, t, leaf, key, vlen))
        return room_put_worst(db, t);
    return 0;
}

int room_put_key(bonsai_db *db, bt_tree *t, bn_key key, uint32_t vlen,
                 uint32_t *runs)
{
    *runs = room_put_worst(db, t);
    if (t->depth == 0)
        return 0;
    /* the path read, its nodes' growth bounds are known (room_regroup) */
    bt_node *leaf;
    int rc = bt_leaf_of(db, t, key, &leaf);
    if (rc == 0)
        *runs = room_put_leaf(db, t, leaf, key, vlen);
    return rc;
}

static uint64_t per_waiting_put(const bonsai_db *db, int leaves_read)
{
    return (db->cow ? 3u : 1u) +
           (leaves_read ? room_regroup(db) : regroup_unread(db));
}

/* Bytes a waiting put's entry may add to a leaf's image beyond its key
 * and value bytes: varints of the key's delta or shared prefix and of the
 * lengths. */
#define ENTRY_ENCODING 20u

static uint64_t batch_runs(const bonsai_db *db, uint64_t n,
                            uint64_t payload, int leaves_read)
{
    uint32_t regroup = leaves_read ? room_regroup(db) : regroup_unread(db);
    uint64_t per_put = per_waiting_put(db, leaves_read) * n;
    /* a tree smaller than the batch: count what it has and makes */
    uint64_t runs = db->nodes_max + n / ROOM_RUN_MAX + 1u;
    uint64_t touched = n < runs ? n : runs;
    uint64_t grown = payload + n * ENTRY_ENCODING;
    uint64_t new_leaves = touched + 2u * grown / db->opt.node_bytes +
                          2u * n / db->opt.node_entries + 1u;
    new_leaves += touched * regroup;
    uint64_t made = new_leaves + new_leaves / 2u + BT_MAX_DEPTH;
    uint64_t tree = runs + made;
    return per_put < tree ? per_put : tree;
}

uint64_t room_batch(const bonsai_db *db, uint64_t n, uint64_t payload)
{
    return batch_runs(db, n, payload, 0);
}

uint32_t room_run(const bonsai_db *db, const bt_tree *t, uint32_t n)
{
    uint64_t batch = batch_runs(db, n, db->waiting_payload, 1);
    return room_put_any(db, t) + (uint32_t)batch;
}

/* The cached nodes with a parent each, `nodes` more, and a large value's
 * run. */
static int room_for(const bonsai_db *db, uint64_t nodes, uint32_t vlen)
{
    uint64_t need = 2u * db->dirty_nodes + nodes;
    if (vlen != ROOM_DELETE && vlen > db->inline_max) {
        uint64_t run = db->al.node_pages;
        uint64_t pages = ((uint64_t)vlen + 16 + db->page_size - 1) /
                         db->page_size;
        need += (pages + run - 1) / run;
    }
    return alloc_runs_avail(&db->al) >= need;
}

int room_waiting(const bonsai_db *db, uint32_t runs, uint64_t waiting,
                 uint64_t payload)
{
    return room_for(db, runs + room_batch(db, waiting, payload), 0);
}

int room_has(const bonsai_db *db, uint32_t runs, uint32_t vlen)
{
    return room_for(db, runs, vlen);
}

/* Node runs' worth of free pages in runs too short for one. */
static uint64_t stranded(const bonsai_db *db)
{
    uint64_t pages = alloc_pages_avail(&db->al) / db->al.node_pages;
    uint64_t runs = alloc_runs_avail(&db->al);
    return pages > runs ? pages - runs : 0;
}

/* Is gathering the free space (bt_defrag) worth a walk of the trees?
 * When what it may gather holds the runs asked for and a 256th of the
 * store besides, beyond what the last one could not: a store near its cap
 * then walks its trees once for each 0.4 % of it that fragments, not for
 * every change.  (A 64th: a random fill to 256 MiB gathered once and
 * held 0.4 % more keys at BONSAI_FULL; a 256th: three times, 1.1 %.) */
static int defrag_pays(const bonsai_db *db, uint64_t runs)
{
    if (db->cow || !db->anonymous)
        return 0;
    uint64_t store = (db->al.end - db->al.first) / db->al.node_pages;
    uint64_t least = store / 256 > 64 ? store / 256 : 64;
    return stranded(db) >= db->defrag_left + runs + least;
}

static int defrag_all(bonsai_db *db)
{
    int rc = bt_defrag(db, &db->catalog);
    for (uint32_t i = 0; i < db->nmaps && rc == 0; i++) {
        map_entry *s = &db->maps[i];
        if (s->name && s->live && s->loaded && !s->dropped)
            rc = bt_defrag(db, &s->w);
    }
    db->defrag_left = stranded(db);
    db->settled_gen = db->write_gen; /* the trees are whole */
    return rc;
}

int room_reserve(bonsai_db *db, uint32_t runs, uint32_t vlen)
{
    if (room_has(db, runs, vlen))
        return 0;
    int rc;
    if (db->dirty.n) {
        if ((rc = cache_write_back(db)))
            return rc;
        /* room is made before a change begins: the write-back (which may
         * rewrite records) left the trees whole, and a change failing
         * from here on fails alone */
        db->settled_gen = db->write_gen;
    }
    if (room_has(db, runs, vlen))
        return 0;
    if (db->dirty.n == 0 && defrag_pays(db, runs)) {
        /* short of memory it gathers less, or nothing: no error */
        if ((rc = defrag_all(db)) && rc != BONSAI_NOMEM)
            return rc;
        if (room_has(db, runs, vlen))
            return 0;
    }
    /* on a full disk the file's end is the limit: unless the disk now
     * grants more, that is what ran out */
    if (db->al.disk_full && (rc = alloc_disk_retry(&db->al)) != 0)
        return rc;
    return room_has(db, runs, vlen) ? 0 : BONSAI_FULL;
}

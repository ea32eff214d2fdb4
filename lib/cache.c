/* SPDX-License-Identifier: MIT */
/*
 * cache.c - when to write cached changes, and how much room to demand
 * before accepting another one.
 *
 * Budget: db->cache_bytes counts the memory of decoded leaves and changed
 * branches.  It is recounted every RECOUNT_EVERY changes, or every quarter
 * of the decoded leaves' number of changes if more, rather than kept
 * exact, so the cache may overshoot its budget by that many changes.
 *
 * Room: each changed node may need a fresh run when it is written, so a
 * change is accepted only while the free runs hold a node-sized run for
 * every changed node.
 * When they do not, the cache is written first and the question asked
 * again: FULL comes only when even that does not help.
 */
#include "cache.h"

#include <time.h>

#include "btree.h"

#define RECOUNT_EVERY 256u
#define RETRY_MS 1000u /* a write-back that met a full disk, tried again */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The age of the oldest unwritten change is taken from the first change
 * after which nodes are dirty, not where a node turns dirty: the tree lies
 * below the cache and does not call up into it. */
static void note_dirty_age(bonsai_db *db)
{
    if (db->opt.flush_delay_ms && db->dirty.n && db->dirty_since_ms == 0)
        db->dirty_since_ms = now_ms();
}

static void recount(bonsai_db *db)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < db->leaves.n; i++) {
        bn_node *n = db->leaves.v[i];
        if (!n->dead)
            bytes += bn_mem_bytes(n);
    }
    for (size_t i = 0; i < db->dirty.n; i++) {
        bn_node *n = db->dirty.v[i];
        if (!n->dead && !n->leaf)
            bytes += bn_mem_bytes(n);
    }
    db->cache_bytes = bytes;
    db->changes = 0;
}

void cache_note_failure(bonsai_db *db, int rc)
{
    if (rc == BONSAI_FULL)
        db->full_at_pages = 1 + alloc_pages_avail(&db->al);
    if (rc == BONSAI_ENOSPC || rc == BONSAI_IO) {
        db->wb_error = rc;
        db->wb_error_ms = now_ms();
    }
}

static int write_nodes(bonsai_db *db)
{
    int rc = bt_flush(db);
    if (rc == 0)
        bt_after_flush(db);
    return rc;
}

int cache_flush(bonsai_db *db)
{
    int rc = db->write_back ? db->write_back(db) : write_nodes(db);
    if (rc == 0)
        bt_evict_leaves(db, 0);
    cache_note_failure(db, rc);
    recount(db);
    return rc;
}

/* A write-back plans every cached node, so after one failed, trying
 * again after every change is ruinous (deletes in a full store, or puts
 * on a full disk, made that quadratic): not until the free space has
 * grown by a node's run (BONSAI_FULL), or a second has passed (a full
 * disk, an I/O error: the disk may have room again).  0 when a write-back
 * is worth trying, else the error the last one met. */
static int write_back_gate(const bonsai_db *db)
{
    if (db->wb_error && now_ms() - db->wb_error_ms < RETRY_MS)
        return db->wb_error;
    if (db->full_at_pages && 1 + alloc_pages_avail(&db->al) <
                                 db->full_at_pages + db->al.slot_pages)
        return BONSAI_FULL;
    return 0;
}

static int over_budget(const bonsai_db *db)
{
    return db->cache_bytes + db->waiting_bytes > db->opt.write_cache_bytes;
}

int cache_after_change(bonsai_db *db)
{
    /* a recount walks every decoded leaf: at most once per leaf/4
     * changes, so its cost per change stays constant however many a
     * large cache holds (the overshoot stays a small fraction) */
    if (++db->changes >= RECOUNT_EVERY &&
        (uint64_t)db->changes * 4 >= db->leaves.n)
        recount(db);
    note_dirty_age(db);
    int old = db->opt.flush_delay_ms && db->dirty.n &&
              now_ms() - db->dirty_since_ms >= db->opt.flush_delay_ms;
    if (!over_budget(db) && !old)
        return 0;
    if (db->dirty.n == 0) {
        bt_evict_leaves(db, 0);
        recount(db);
        return 0;
    }
    int rc = write_back_gate(db);
    return rc ? rc : cache_flush(db);
}

int cache_before_change(bonsai_db *db)
{
    if (!db->wb_error || !over_budget(db) || db->dirty.n == 0)
        return 0;
    int rc = write_back_gate(db);
    return rc ? rc : cache_flush(db);
}

/* Enough room when every cached node and a parent for each, plus the
 * nodes this change may add, can each get node_bytes of contiguous pages,
 * and a large value its own run.  Counted in slots (runs of node_bytes,
 * alloc.h), not pages: free space cut into runs shorter than a node has
 * pages but no room for one, and a write-back that cannot place its
 * nodes would fail after the changes were accepted.  An image a little
 * over node_bytes (the size estimate drifts) that finds no run splits in
 * two at write-back; the parents counted for every node cover that. */
static int room_for(const bonsai_db *db, uint64_t nodes, uint32_t vlen)
{
    uint64_t need = nodes;
    if (vlen != CACHE_DELETE && vlen > db->inline_max) {
        /* a value's run of p pages takes at most ceil(p / slot) slots */
        uint64_t slot = db->al.slot_pages;
        uint64_t pages = ((uint64_t)vlen + 16 + db->page_size - 1) /
                         db->page_size;
        need += (pages + slot - 1) / slot;
    }
    return alloc_slots_avail(&db->al) >= need;
}

/* A waiting put may dirty a leaf and split it when applied: a node run
 * each without copy-on-write (the leaf is rewritten in place or moves),
 * with it also the copy of the leaf and of its parent. */
int cache_room_waiting(const bonsai_db *db, uint32_t slots, uint64_t waiting)
{
    uint64_t per = db->cow ? 3 : 1;
    return room_for(db, 2u * db->dirty_nodes + slots + per * waiting, 0);
}

int cache_has_room(const bonsai_db *db, uint32_t slots, uint32_t vlen)
{
    return room_for(db, 2u * db->dirty_nodes + slots, vlen);
}

int cache_reserve(bonsai_db *db, uint32_t slots, uint32_t vlen)
{
    if (cache_has_room(db, slots, vlen))
        return 0;
    int rc;
    if (db->dirty.n && ((rc = write_back_gate(db)) || (rc = cache_flush(db))))
        return rc;
    return room_for(db, slots, vlen) ? 0 : BONSAI_FULL;
}

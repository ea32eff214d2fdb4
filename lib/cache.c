/* SPDX-License-Identifier: MIT */
/*
 * cache.c - when to write cached changes back (the room a change needs
 * is decided in room.c).
 *
 * Budget: db->cache_bytes counts the memory of decoded leaves and
 * branches, and what the heap keeps beside them (HEAP_SLACK).  It is
 * recounted rather than kept exact: after RECOUNT_EVERY changes at
 * least, once the changes since the last recount reach twice the decoded
 * nodes (leaves and branches) counted then, or the leaves decoded since
 * reach an eighth of the leaves.  So the cache overshoots its budget by
 * at most that many changes (an entry's key and value references, about
 * 17 bytes each against the several KiB a decoded leaf holds) and an
 * eighth of its leaves.  A recount reads every decoded node, a cache miss
 * each: once a quarter leaf a change, it took a fifth of a random fill's
 * time at 100 M keys; now a change pays half a node's visit, a decode
 * eight.  The branches count in the rule because the walk reads them
 * too: a 15 GiB fill holds some 23 thousand.
 */
#include "cache.h"

#include <time.h>

#include "btree.h"

#define RECOUNT_EVERY 256u

/* Decoded nodes are malloc blocks of many sizes, and the heap that holds
 * them keeps the holes between them: a random fill to a 64 MiB cap held
 * 9-10 MiB of heap for an 8 MiB cache counted by its blocks alone, and
 * its peak RSS was 4.3 MiB over the cap.  Counted with a quarter more,
 * the same fill peaks 1.6 MiB over (the program's own code and stack),
 * and at 128 MiB below the cap, with as many entries and as fast. */
#define HEAP_SLACK 4u

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

void cache_recount(bonsai_db *db)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < db->leaves.n; i++) {
        bt_node *n = db->leaves.v[i];
        if (!n->dead)
            bytes += bt_node_bytes(n);
    }
    for (size_t i = 0; i < db->branches.n; i++) {
        bt_node *n = db->branches.v[i];
        if (!n->dead)
            bytes += bt_node_bytes(n);
    }
    bytes += db->ld.bytes;
    db->cache_bytes = bytes + bytes / HEAP_SLACK;
    /* half the budget left: lookups keep the branches they pass, while
     * changes coming after them still find room */
    uint64_t used = db->cache_bytes + db->waiting_bytes;
    db->read_room = used < db->opt.write_cache_bytes
                        ? (db->opt.write_cache_bytes - used) / 2
                        : 0;
    db->read_decoded = 0;
    db->changes = 0;
    db->leaves_counted = db->leaves.n;
    db->nodes_counted = db->leaves.n + db->branches.n;
}

int cache_in_cap(const bonsai_db *db)
{
    return db->anonymous && db->opt.cache_in_cap;
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

uint64_t cache_held(const bonsai_db *db)
{
    return db->cache_bytes + db->read_decoded + db->read_decoded / HEAP_SLACK;
}

/* The heap keeps resident what freed decoded nodes held, while a batch's
 * arrays are mapped anew beside it: so the process holds the decoded
 * nodes' peak and the arrays' peak at once.  Shared freely, the nodes
 * filled the cache while no batch waited and a batch's arrays came on top
 * later: a random fill to 15 GiB with a 512 MiB cache peaked 36 MB over
 * its cap, and in one to 2 GiB the heap and the arrays held 560 MB
 * together.  Under a cap on the whole process the nodes therefore keep to
 * three quarters and the arrays to the last one (that fill's batches
 * took a sixth at most), and to what the nodes leave.  The arrays may
 * borrow half the store's room its pages have not reached yet: they are
 * unmapped after each batch, and the batch's own puts take store pages
 * as they are applied. */
#define WAITING_SHARE_IN_CAP 4u

static uint64_t store_untouched(const bonsai_db *db)
{
    const alloc *al = &db->al;
    return al->cap_pages > al->end ? (al->cap_pages - al->end) * db->page_size
                                   : 0;
}

uint64_t cache_waiting_share(const bonsai_db *db)
{
    uint64_t budget = db->opt.write_cache_bytes, held = db->cache_bytes;
    uint64_t left = budget > held ? budget - held : 0;
    if (!cache_in_cap(db))
        return left;
    uint64_t own = budget / WAITING_SHARE_IN_CAP + store_untouched(db) / 2;
    return own < left ? own : left;
}

static uint64_t nodes_budget(const bonsai_db *db)
{
    uint64_t budget = db->opt.write_cache_bytes;
    return cache_in_cap(db) ? budget - budget / WAITING_SHARE_IN_CAP
                            : budget;
}

static int over_budget(const bonsai_db *db)
{
    uint64_t held = cache_held(db);
    return held + db->waiting_bytes > db->opt.write_cache_bytes ||
           held > nodes_budget(db);
}

/* Frees the clean decoded leaves, and the clean branches too when the
 * budget is still short (a tree of tiny leaves has many branches). */
static void evict_clean(bonsai_db *db)
{
    bt_evict_leaves(db, 0);
    cache_recount(db);
    if (over_budget(db)) {
        bt_evict_branches(db);
        cache_recount(db);
    }
}

int cache_flush(bonsai_db *db)
{
    int rc = db->write_back ? db->write_back(db) : write_nodes(db);
    cache_note_failure(db, rc);
    if (rc == 0)
        evict_clean(db);
    else
        cache_recount(db);
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
                                 db->full_at_pages + db->al.node_pages)
        return BONSAI_FULL;
    return 0;
}

int cache_write_back(bonsai_db *db)
{
    int rc = write_back_gate(db);
    return rc ? rc : cache_flush(db);
}

int cache_after_change(bonsai_db *db)
{
    /* a recount walks every decoded node: its cost per change and per
     * decoded leaf stays constant however many a large cache holds */
    size_t counted = db->leaves_counted;
    size_t decoded = db->leaves.n > counted ? db->leaves.n - counted : 0;
    if (++db->changes >= RECOUNT_EVERY &&
        ((uint64_t)db->changes >= 2 * (uint64_t)db->nodes_counted ||
         decoded >= counted / 8))
        cache_recount(db);
    note_dirty_age(db);
    int old = db->opt.flush_delay_ms && db->dirty.n &&
              now_ms() - db->dirty_since_ms >= db->opt.flush_delay_ms;
    if (!over_budget(db) && !old)
        return 0;
    if (db->dirty.n == 0) {
        evict_clean(db);
        return 0;
    }
    return cache_write_back(db);
}

int cache_before_change(bonsai_db *db)
{
    if (!db->wb_error || !over_budget(db) || db->dirty.n == 0)
        return 0;
    return cache_write_back(db);
}

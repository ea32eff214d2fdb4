/* SPDX-License-Identifier: MIT */
/* change.c - what every change of a tree does around it (change.h). */
#include "change.h"

#include "btree.h"
#include "cache.h"
#include "txn.h"

void change_note_tree(bonsai_db *db, bt_tree *t)
{
    if (db->op_tree)
        return;
    db->op_tree = t;
    db->op_saved = *t;
}

/* With a write cache a failed change cannot be undone alone: the cached
 * changes before it have not been written anywhere else. */
int change_settle_cached(bonsai_db *db, int rc, uint64_t gen0)
{
    if (rc == 0) {
        bt_release_now(db); /* merged nodes' runs serve the next write */
        cache_after_change(db); /* a failed write leaves changes cached */
        return 0;
    }
    change_settle_failed(db, gen0);
    return rc;
}

void change_settle_failed(bonsai_db *db, uint64_t gen0)
{
    if (db->write_gen == gen0 || db->write_gen == db->settled_gen)
        return; /* nothing half done */
    if (db->wtxn)
        db->wtxn->failed = 1;
    else
        db->failed = 1;
}

/* ---- running a change ------------------------------------------------- */

int change_in_txn(bonsai_txn *txn, txn_change_fn fn, void *arg)
{
    bonsai_db *db = txn->db;
    uint64_t gen0 = db->write_gen;
    int rc;
    if (db->opt.write_cache_bytes && (rc = cache_before_change(db)))
        return rc;
    rc = fn(db, txn, arg);
    if (rc)
        change_settle_failed(db, gen0);
    if (rc == 0 && db->opt.write_cache_bytes)
        cache_after_change(db); /* failure: stays cached */
    return rc;
}

/* Clean decoded leaves kept between direct changes, so a run of changes to
 * one leaf does not decode it every time. */
#define DIRECT_LEAF_KEEP 256u

/* Without a write cache nothing else bounds the decoded branches: a
 * sequential fill decodes each new branch of its right edge, and kept
 * every one (7,280 of them, 118 MiB of heap beside a 64 MiB store).  The
 * branches with no decoded child go once their number has doubled since
 * the last time, so that a change pays for the scan a branch at most. */
static void evict_direct_branches(bonsai_db *db)
{
    if (db->branches.n <= 2 * db->branches_kept + 64u)
        return;
    bt_evict_branches(db);
    db->branches_kept = db->branches.n;
}

/* Why a change without transactions may not be made now: 0, or the
 * error change_directly answers. */
static int direct_refusal(const bonsai_db *db)
{
    if (db->opt.read_only)
        return BONSAI_READONLY;
    if (db->failed)
        return BONSAI_FAILED;
    /* a change applies in place at once, but only a write-back with a
     * larger id than the last makes it the store's: refuse it first */
    if (!txn_next_id(db->meta.txn_id))
        return BONSAI_TXNID_FULL;
    return 0;
}

int change_direct_ok(const bonsai_db *db)
{
    return !db->cow && direct_refusal(db) == 0;
}

int change_directly(bonsai_db *db, txn_change_fn fn, void *arg)
{
    int rc0 = direct_refusal(db);
    if (rc0)
        return rc0;
    uint64_t gen0 = db->write_gen;
    db->op_tree = NULL;
    int rc;
    if (db->opt.write_cache_bytes) {
        if ((rc = cache_before_change(db)))
            return rc;
        return change_settle_cached(db, fn(db, NULL, arg), gen0);
    }
    rc = fn(db, NULL, arg);
    if (rc == 0)
        rc = bt_flush(db);
    int touched = db->write_gen != gen0 || db->dirty.n || db->op_alloc.n;
    if (rc == 0 || !touched) {
        bt_after_flush(db);
        bt_evict_leaves(db, DIRECT_LEAF_KEEP);
        evict_direct_branches(db);
        return rc;
    }
    bt_forget_changes(db);
    if (db->op_tree) {
        bt_discard(db, db->op_tree);
        *db->op_tree = db->op_saved;
        db->op_tree->root.mem = NULL;
    }
    return rc;
}

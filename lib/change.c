/* SPDX-License-Identifier: MIT */
/* change.c - what every change of a tree does around it (change.h). */
#include "change.h"

#include "btree.h"
#include "cache.h"

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

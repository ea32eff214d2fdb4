/* SPDX-License-Identifier: MIT */
/*
 * txn.h - the commit protocol and the reader table (txn.c).
 *
 * Commit, in order (format.md, "Commit protocol"):
 *  1. write every changed node to pages no committed snapshot uses;
 *  2. write the changed map records into the catalog, and its nodes;
 *  3. sync the data;
 *  4. write the meta slot (txn_id & 1) naming the new catalog root;
 *  5. sync again.  Only then is the commit reported durable.
 * Pages the commit stopped using become free once no reader's snapshot
 * is older than it.
 */
#ifndef BONSAI_TXN_H
#define BONSAI_TXN_H

#include "internal.h"

/* The id of the write after the commit with id last; 0 when last is the
 * largest id there is.  No write may follow that one (BONSAI_TXNID_FULL:
 * a wrapped id would lose to the older meta slot at the next open), and 0
 * is no image's home, so nothing counts as written by it (writeback.c). */
static inline uint64_t txn_next_id(uint64_t last)
{
    return last < UINT64_MAX ? last + 1 : 0;
}

/* No-transaction mode: writes nodes and records, and on a file a meta
 * slot (anonymous memory keeps the new state in db->meta alone). */
int txn_write_back(bonsai_db *db);

/* No-transaction mode on a file: a write-back of the cache (db->
 * write_back).  It writes what is cached, not the puts waiting to be
 * applied, and ends like txn_write_back but without syncing: nodes
 * rewritten in place are then always named by a meta slot with records
 * that match them, so a write-back that fails later (a full disk) leaves
 * the file as the last one left it.  0 or what the write met. */
int txn_write_back_cached(bonsai_db *db);

/* Checks a transaction may write. */
int txn_check_write(const bonsai_txn *txn);

/* Checks a transaction is usable at all (read or write). */
int txn_check(const bonsai_txn *txn);

/* Ties a cursor to txn / unties it when the cursor closes first.  A
 * transaction's end marks its tied cursors ended. */
void txn_tie_cursor(bonsai_txn *txn, txn_tie *tie);
void txn_untie_cursor(bonsai_txn *txn, txn_tie *tie);

/* Runs fn as one change: inside txn when given; in a transaction of its
 * own (transaction mode, txn NULL); or directly (no-transaction mode),
 * where the change is written at once and rolled back if that fails.  fn
 * calls change_note_tree() on the tree it is about to change. */
typedef int (*txn_change_fn)(bonsai_db *db, bonsai_txn *txn, void *arg);
int txn_change(bonsai_db *db, bonsai_txn *txn, txn_change_fn fn, void *arg);

/* Runs fn to read: in txn, in a snapshot of its own (transaction mode,
 * txn NULL), or on the store's current state (no-transaction mode). */
typedef int (*txn_read_fn)(bonsai_db *db, bonsai_txn *txn, void *arg);
int txn_read(bonsai_db *db, bonsai_txn *txn, txn_read_fn fn, void *arg);

/* The tree of map as txn sees it (txn NULL: the writer's, its waiting
 * puts applied first), and the page limit to read it with. */
int txn_tree(bonsai_db *db, bonsai_txn *txn, bonsai_map map, bt_tree **t,
             bt_rd *rd);

/* The same without applying waiting puts (the caller looks them up). */
int txn_tree_as_is(bonsai_db *db, bonsai_txn *txn, bonsai_map map,
                   bt_tree **t, bt_rd *rd);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * change.h - what every change of a tree does around it, whatever runs it
 * (a transaction, a direct change, a waiting put applied): note the tree
 * it is about to change, so a failed direct change can be put back, and
 * settle a change kept in the write cache; and run a change directly or
 * inside a write transaction (txn_change, in txn.c, picks the way).
 *
 * The writer's states with a write cache.  Without transactions they are
 * the store's (db->failed); a write transaction has its own
 * (txn->failed), and a commit that fails once its meta slot may be half
 * written fails the store as well (txn.c, make_durable).
 *
 *   state    holds                              a change
 *   CLEAN    nothing cached, nothing waiting    that succeeds: CACHED
 *   CACHED   changed nodes cached, or puts      that succeeds: CACHED;
 *            waiting                            a write-back: CLEAN
 *   FAILED   a tree half changed among cached   is refused: BONSAI_FAILED
 *            changes                            (a transaction's:
 *                                               BONSAI_BADTXN, and its
 *                                               commit aborts it)
 *
 *   CLEAN or CACHED, unchanged: a change refused or failed before it
 *     changed a tree (a bad key, BONSAI_FULL from the room budget):
 *     nothing to undo.
 *   CACHED -> FAILED: a change failed after changing a cached tree
 *     (change_settle_failed): the cached changes before it exist nowhere
 *     else, so it cannot be undone alone.
 *   CACHED, unchanged: a write-back the disk refused (BONSAI_ENOSPC,
 *     BONSAI_IO) leaves the changes cached, to be written again by the
 *     next write-back or bonsai_sync.
 *
 * Without a write cache a direct change is written at once, and one that
 * fails is undone whole (change_directly): CLEAN throughout.
 */
#ifndef BONSAI_CHANGE_H
#define BONSAI_CHANGE_H

#include "internal.h"
#include "txn.h"

/* Notes t as the tree the running change is about to change: the first
 * note of a change keeps its state before. */
void change_note_tree(bonsai_db *db, bt_tree *t);

/* After a change without a transaction kept in the write cache (gen0:
 * db->write_gen before it): on success releases the runs it stopped
 * using and lets the cache write back; a failure half way among cached
 * changes fails the writer.  Returns rc. */
int change_settle_cached(bonsai_db *db, int rc, uint64_t gen0);

/* After a change that failed (gen0: db->write_gen before it): when it
 * changed a tree among cached changes (write_gen moved, and not only by
 * waiting puts applied and settled: db->settled_gen), fails the writer,
 * the open write transaction or else the store. */
void change_settle_failed(bonsai_db *db, uint64_t gen0);

/* ---- running a change (txn_change decides which) ---- */

/* Runs fn as one change inside txn, a write transaction the caller
 * checked: a failure half way among cached changes fails txn. */
int change_in_txn(bonsai_txn *txn, txn_change_fn fn, void *arg);

/* May a change without a transaction run directly (no copy-on-write, not
 * read-only, not failed, a txn id left)?  A shortcut past txn_change asks
 * this first, so the rules stay those of change_directly. */
int change_direct_ok(const bonsai_db *db);

/* Runs fn directly, without copy-on-write: with a write cache the change
 * stays cached (change_settle_cached); without one it is written at once
 * and, if that fails, undone whole (the tree change_note_tree noted is
 * put back as it was). */
int change_directly(bonsai_db *db, txn_change_fn fn, void *arg);

#endif

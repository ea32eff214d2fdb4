/* SPDX-License-Identifier: MIT */
/*
 * change.h - what every change of a tree does around it, whatever runs it
 * (a transaction, a direct change, a waiting put applied): note the tree
 * it is about to change, so a failed direct change can be put back
 * (txn.c), and settle a change kept in the write cache.
 */
#ifndef BONSAI_CHANGE_H
#define BONSAI_CHANGE_H

#include "internal.h"

/* Notes t as the tree the running change is about to change: the first
 * note of a change keeps its state before. */
void change_note_tree(bonsai_db *db, bt_tree *t);

/* After a change without a transaction kept in the write cache (gen0:
 * db->write_gen before it): on success releases the runs it stopped
 * using and lets the cache write back; a failure half way among cached
 * changes fails the writer.  Returns rc. */
int change_settle_cached(bonsai_db *db, int rc, uint64_t gen0);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * room.h - the room budget: the one place that decides whether a change
 * fits the store (room.c).  A change is accepted only if every change
 * cached with it can surely be written back, so BONSAI_FULL comes from
 * the call that would overfill the store, never later from a write-back
 * of changes already acknowledged.
 *
 * Room is counted in node runs: runs of pages long enough for a node
 * image (node_bytes), as the allocator counts them (alloc_runs_avail).
 * Free space cut into runs shorter than a node has pages but no node
 * run, and a write-back that could not place a node would fail after the
 * fact.
 * Without copy-on-write, in anonymous memory, room_reserve gathers such
 * runs (bt_defrag: leaves slide into the gaps below them) before it
 * answers BONSAI_FULL, when enough pages lie in them to be worth it.
 *
 * What each kind of change can need at worst, d being the tree's depth
 * (leaves at level 0, the root at level d - 1):
 *
 *  - a cached node, at write-back: a run of its own (it moves, or is a
 *    copy under copy-on-write), and one for its parent, which changes to
 *    point at it: 2 per dirty node.  Under copy-on-write every ancestor
 *    of a dirty node is dirty too (tree_mark_dirty), since each copy
 *    moves its parent; without it a node moves only when it outgrows its
 *    run, and its parent is the one counted.  An image a little over
 *    node_bytes (the codec's size estimate drifts) that finds no run is
 *    split in two at write-back; the parent counted for it covers the
 *    second half.  Built with BONSAI_CHECK_HINTS (make check does, under
 *    the sanitizers), every write-back asserts that it took no more.
 *  - a put: its leaf and each branch above it may split, a new node and
 *    the node rewritten at each of the d levels, and a new root above
 *    the old one: 2 (d + 1) + 2 (room_put_worst).  Without copy-on-write
 *    a put into a decoded leaf that neither splits it nor outgrows its
 *    home needs nothing (bt_leaf_takes).
 *  - where a u64 node may grow past half a node when its groups shift
 *    (regroup.h), a put or delete may split it, and its parent, into
 *    several: every put, waiting or not, and every delete counts that
 *    many more (room_regroup), by the largest bound of any node the store
 *    has sized (db->grow_max; unknown for nodes a store opened with and
 *    has not read: the most a node of node_entries keys can grow).
 *  - a delete: the path merged, and where a key's removal lengthens a
 *    neighbour's encoding, split: 2 (d + 1) (room_del_worst).
 *  - every change also keeps room for the map's record in the catalog
 *    (its leaf and path: catalog depth + 1), and a put keeps what a
 *    delete needs after it, so that a full store can still be emptied:
 *    without copy-on-write one run (a delete then takes its key from its
 *    leaf in place), with it the delete's path and record (room_extras).
 *  - a waiting put, when applied: its leaf rewritten or moved, one run
 *    without copy-on-write; with it the copies of the leaf and its parent
 *    and a split, three.  A run of puts applied to one leaf at once takes
 *    that for each of them (room_run).  A batch larger than its tree can
 *    rewrite no more nodes than the tree has, and adds leaves by the
 *    bytes it adds: room_batch takes the smaller count.
 *  - a value too large to sit in its leaf: its own run of pages, at most
 *    ceil(pages / node_pages) runs.  That many runs need not lie in
 *    one run: the put then gets BONSAI_FULL before it changes anything,
 *    never later, since such a value is written at once.
 */
#ifndef BONSAI_ROOM_H
#define BONSAI_ROOM_H

#include "internal.h"

#define ROOM_DELETE UINT32_MAX /* vlen of a delete */

/* Without copy-on-write a delete short of room takes its entry from its
 * leaf where the leaf lies (bt_del_in_place), which needs no room unless
 * a neighbour's encoding lengthens past the leaf's home: then one run. */
#define ROOM_DEL_IN_PLACE 1u

/* The most a u64 node of node_entries keys can grow, whatever its keys. */
uint32_t room_growth_any(uint32_t node_entries);

/* The runs a change may need besides for nodes that grow as their
 * groups shift, split into several: 0 while no node's bound exceeds
 * half a node. */
uint32_t room_regroup(const bonsai_db *db);

/* The most runs a put into / a delete from t may need beyond the cached
 * changes. */
uint32_t room_put_worst(const bonsai_db *db, const bt_tree *t);
uint32_t room_del_worst(const bonsai_db *db, const bt_tree *t);

/* runs for a change of t, with the catalog record's and (for a put)
 * the later delete's room added. */
uint32_t room_put_runs(const bonsai_db *db, const bt_tree *t,
                        uint32_t runs);
uint32_t room_del_runs(const bonsai_db *db, const bt_tree *t);
/* room_put_runs of room_put_worst: a put of any key into t. */
uint32_t room_put_any(const bonsai_db *db, const bt_tree *t);

/* The runs a put of key may need: 0 beside the extras when it surely
 * changes one leaf within its home (decodes the leaf's path to know). */
int room_put_key(bonsai_db *db, bt_tree *t, bn_key key, uint32_t vlen,
                 uint32_t *runs);
/* The same for a put into leaf, the decoded leaf of key. */
uint32_t room_put_leaf(const bonsai_db *db, const bt_tree *t,
                       const bt_node *leaf, bn_key key, uint32_t vlen);

/* Most waiting puts applied to one leaf at once (a run). */
#define ROOM_RUN_MAX 256u

/* The runs n waiting puts, of `payload` key and value bytes, may need
 * once applied and written back: per put as above, or where
 * the tree is small beside the batch, a count of the nodes it can write.
 * Without transactions a write-back frees a moved node's old pages
 * before it finds the new ones (writeback.c), so each node it writes
 * takes at most one run: each node there is (db->nodes_max, counted at
 * open and raised by every node made) once a run; new leaves, at most
 * one split of each leaf touched and two for each node's worth of bytes
 * the entries add (a split leaves nodes at least half full); and new
 * branches, at most one for two new children, and a new root a level. */
uint64_t room_batch(const bonsai_db *db, uint64_t n, uint64_t payload);

/* The runs n waiting puts of t applied at once to one leaf, read
 * already (bt_leaf_of), may need. */
uint32_t room_run(const bonsai_db *db, const bt_tree *t, uint32_t n);

/* Is there room for the cached changes, `runs` more and `waiting` puts
 * (of `payload` key and value bytes) not yet applied? */
int room_waiting(const bonsai_db *db, uint32_t runs, uint64_t waiting,
                 uint64_t payload);

/* Is there room for the cached changes, `runs` more and a value of vlen
 * bytes (or ROOM_DELETE) without writing anything? */
int room_has(const bonsai_db *db, uint32_t runs, uint32_t vlen);

/* 0 if room_has, else the cache is written back (cache_write_back) and
 * the question asked again without it, and again after gathering free
 * space where that is allowed and pays: BONSAI_FULL when even that does
 * not help, or what the write-back met.  Asked before a change begins
 * (gathering moves leaves, so no change may be half made). */
int room_reserve(bonsai_db *db, uint32_t runs, uint32_t vlen);

#endif

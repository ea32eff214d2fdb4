/* SPDX-License-Identifier: MIT */
/*
 * btree.h - B-tree operations over node images and decoded nodes.
 *
 * Readers search images in place (no copies, no shared state).  The writer
 * decodes the nodes on its path and changes them in memory; bt_flush
 * writes every changed node in two phases: first it sizes each image and
 * finds it a home (in place where allowed, else a fresh run), which is the
 * only step that can fail; then it encodes them all.  A failure in the
 * first phase leaves every image in the store as it was.
 *
 * A reader passes a bt_rd: `end`, the page limit its snapshot vouches for
 * (no extent at or beyond it is followed: BONSAI_CORRUPT), and the cache
 * its packed (compressed) nodes are unpacked into.
 */
#ifndef BONSAI_BTREE_H
#define BONSAI_BTREE_H

#include "internal.h"
#include "pack.h"
#include "pageset.h"

#define BT_FIRST 0
#define BT_LAST 1
#define BT_GE 2
#define BT_GT 3
#define BT_LT 4
/* The leaf beside the one whose upper (lower) separator is the key: as
 * BT_GE (BT_LT) from that separator, and the leaf reached must begin
 * (end) exactly there, or the separators disagree (BONSAI_CORRUPT). */
#define BT_NEXT_LEAF 5
#define BT_PREV_LEAF 6
#define BT_LE 7 /* the last key <= key */

#define BT_OVF_REF 20u /* bytes of an overflow value reference */
#define BT_MAX_DEPTH 32u /* levels a tree may have (format.md) */


/* Is a below b, keys of the kind? */
int bt_key_less(unsigned kind, bn_key a, bn_key b);

int bt_get(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
           const bn_key *key, bonsai_val *val);
int bt_put(bonsai_db *db, bt_tree *t, bn_key key, const uint8_t *val,
           uint32_t vlen, unsigned flags);
int bt_del(bonsai_db *db, bt_tree *t, bn_key key);

/* Without copy-on-write: deletes key from its leaf alone, without the
 * merges bt_del makes, when that surely needs no room when written back:
 * the leaf keeps other entries, does not split, and still fits its home.
 * *done = 1 then, or when key is absent (BONSAI_NOTFOUND); *done = 0:
 * nothing changed, the delete needs room (bt_del). */
int bt_del_in_place(bonsai_db *db, bt_tree *t, bn_key key, int *done);

/* The writer's leaf for key, decoded with its path. */
int bt_leaf_of(bonsai_db *db, bt_tree *t, bn_key key, bt_node **leaf);

/* Measures every changed u64 node whose growth as its groups shift the
 * room budget's bound (db->grow_max) may miss, before puts wait on that
 * bound (room.h, growth.c). */
void bt_size_unsure(bonsai_db *db);

/* Does a put of key (a value of vlen bytes) into leaf, the decoded leaf
 * of key, leave it unsplit and within its home (or, dirty, counted
 * already)?  Its size is estimated: within 7/8 of node_bytes, with 16
 * bytes for the estimate's drift and 10 for a u64 key's delta. */
int bt_leaf_takes(const bonsai_db *db, const bt_tree *t, const bt_node *leaf,
                  bn_key key, uint32_t vlen);

/* bt_put_run without decoding the leaf (inplace.c): the run's keys
 * written into the leaf's image where it lies, when the store rewrites
 * images in place, the values are empty and the new image fits the
 * leaf's run.  *done = 0 when it does not apply (nothing changed); else
 * *to = the first entry not put.  Needs no room. */
int bt_put_run_in_place(bonsai_db *db, bt_tree *t, const putbuf *b,
                        uint32_t from, uint32_t max, uint32_t *to, int *done);

/* Puts entries from, from + 1, ... of the sorted batch b (all inline
 * values) while they fall into the leaf of entry `from`, at most max of
 * them, then splits that leaf as needed.  *to = the first entry not put.
 * The caller has made room for them (room_reserve). */
int bt_put_run(bonsai_db *db, bt_tree *t, const putbuf *b, uint32_t from,
               uint32_t max, uint32_t *to);

/* Is the writer's leaf for key decoded (and its whole path), and does key
 * go after its last entry? */
int bt_appends_to_cached_leaf(const bt_tree *t, bn_key key);

/* Does key fall into the tree's last leaf (as far as the decoded branches
 * on the right edge tell)?  Where a sequential load goes. */
int bt_goes_last(const bt_tree *t, bn_key key);

/* The tree's last leaf when it and the whole right edge are decoded and
 * key goes after every key of the tree; else NULL. */
bt_node *bt_tail_leaf(const bt_tree *t, bn_key key);

/* bt_tail_leaf without the walk down the right edge when the last
 * append (bt_note_tail) went to t and nothing has changed since. */
bt_node *bt_tail_leaf_hinted(bonsai_db *db, const bt_tree *t, bn_key key);

/* After a successful append of a new key to tail: remembers tail if it
 * still is t's last leaf (the append did not split it). */
void bt_note_tail(bonsai_db *db, const bt_tree *t, bt_node *tail,
                  uint32_t n_before);

/* bt_put of a new key (an inline value) at the end of tail, the leaf
 * bt_tail_leaf gave: no descent, no search.  Room made by the caller. */
int bt_append(bonsai_db *db, bt_tree *t, bt_node *tail, bn_key key,
              const uint8_t *val, uint32_t vlen);

/* The separators around a leaf: every key of the tree from lower (when
 * has_lower) up to below upper (when has_upper) is in it.  Byte keys
 * point into the buffers. */
typedef struct bt_bounds {
    int has_lower, has_upper;
    bn_key lower, upper;
    uint8_t lbuf[BONSAI_MAX_KEY], ubuf[BONSAI_MAX_KEY];
} bt_bounds;

/* Positions on an entry by mode, decoding its leaf into *leaf (which the
 * caller bn_init'ed; it is cleared first), and when bounds is not NULL
 * gives that leaf's bounds (a cursor steps to the next leaf with them).
 * A leaf whose keys lie outside the bounds its descent gives, or one
 * reached past another leaf (BT_NEXT_LEAF, BT_PREV_LEAF, or moving on
 * from a leaf the mode does not land in) whose separators disagree with
 * that leaf's, is BONSAI_CORRUPT: a forged tree never makes a seek skip
 * keys or meet a leaf twice. */
int bt_seek(bonsai_db *db, const bt_rd *rd, const bt_tree *t, int mode,
            bn_key key, bn_node *leaf, uint32_t *idx, bt_bounds *bounds);

/* Turns a stored value (inline bytes or overflow reference) into bytes. */
int bt_value(bonsai_db *db, uint64_t end, const uint8_t *v, uint32_t len,
             unsigned vflag, bonsai_val *out);

/* bt_value, and for an overflow value also that its bytes match the
 * checksum of its run, which *run is then ({0, 0} for an inline value). */
int bt_value_checked(bonsai_db *db, uint64_t end, const uint8_t *v,
                     uint32_t len, unsigned vflag, bonsai_val *out,
                     bn_ext *run);

/* Writes every changed node (see above). */
int bt_flush(bonsai_db *db);

/* Without copy-on-write, in anonymous memory and with every change
 * written back: slides the leaves of t down into the free pages below
 * them, so that free space gathers into long runs (defrag.c).  The tree
 * stays whole at every step; an error stops it early. */
int bt_defrag(bonsai_db *db, bt_tree *t);

/* After a successful flush: releases replaced runs and frees removed
 * nodes. */
void bt_after_flush(bonsai_db *db);

/* Releases the runs the finished changes stopped using.  Only where no
 * rollback can follow (a change kept in the write cache), since a rolled
 * back change would still need them. */
void bt_release_now(bonsai_db *db);

/* Drops clean decoded leaves (not roots) when more than keep are held. */
void bt_evict_leaves(bonsai_db *db, size_t keep);

/* Drops the clean decoded branches (not roots) with no decoded node below
 * them, the lowest first (freeing those may leave their parents so).
 * Lookups search decoded branches faster than images, so the cache keeps
 * them while its budget allows. */
void bt_evict_branches(bonsai_db *db);

/* Forgets every change since the last flush: frees runs handed out by the
 * operation (no-transaction mode) and all decoded nodes of the trees. */
void bt_forget_changes(bonsai_db *db);

/* Frees the decoded nodes of t (its images are untouched); they leave
 * the writer's lists of decoded nodes first. */
void bt_discard(bonsai_db *db, bt_tree *t);

/* Calls fn (unless NULL) for every extent t references: nodes (is_value
 * 0) and overflow values (is_value 1), reading branches, the leaves of a
 * tree with TREE_F_OVERFLOW, and of every other leaf its type and flags
 * bytes only: a branch where a leaf must be, or a leaf with overflow
 * values in a tree without the flag, is BONSAI_CORRUPT (the pages they
 * reach would go unmarked).  Each extent is first claimed in
 * seen (a set over at least [first_pgno, rd->end); NULL: a set of the
 * walk's own): one beyond rd->end, or meeting a page claimed before (by
 * this walk or an earlier one into the same set), is BONSAI_CORRUPT and
 * not followed, so the walk costs at most the pages of the file. */
typedef int (*bt_ext_fn)(void *ctx, bn_ext ext, int is_value);
int bt_walk(bonsai_db *db, const bt_rd *rd, const bt_tree *t, pageset *seen,
            bt_ext_fn fn, void *ctx);

/* Releases every extent of t and forgets its decoded nodes: t is empty. */
int bt_drop(bonsai_db *db, bt_tree *t);

/* Lookups in increasing key order (a sorted batch of gets), a group of
 * up to BT_FINGER_KEYS keys at a time.  A finger holds the descent of the
 * last key with the separators each node's range ends below: a key in the
 * same node as the key before it, and still below the separator of that
 * key's child, goes to the same child without a search.  t must not
 * change while a finger is used. */
#define BT_FINGER_KEYS 16u
typedef struct bt_finger bt_finger;
int bt_finger_new(const bt_tree *t, bt_finger **f);
void bt_finger_free(bt_finger *f);

/* The leaves whose ranges hold keys[0, n), 1 <= n <= BT_FINGER_KEYS, in
 * increasing order and none below the last key of the call before.  The
 * keys go down level by level together: the nodes of a level are found
 * for all of them and asked of the CPU's caches before any is searched,
 * so that the cache misses of the keys overlap.  The leaves' first bytes
 * are asked for too (bt_prefetch_search asks for the part a search reads).
 * BONSAI_NOTFOUND for an empty tree. */
int bt_finger_leaves(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                     bt_finger *f, const bn_key *keys, unsigned n,
                     bn_child *leaves);

/* Asks the CPU for the whole image of the leaf that holds key in t, found
 * through the writer's decoded branches alone (nothing is read from the
 * store or decoded; where a branch is not decoded, nothing is asked).
 * Writing keys into a leaf reads all of it: its groups, the bytes moved
 * after them, the checksum.  *last is the page of the leaf asked for
 * before, not asked for twice. */
void bt_prefetch_leaf(const bonsai_db *db, const bt_tree *t, bn_key key,
                      uint64_t *last);

/* Once a leaf's first bytes are there (bt_finger_leaves asked for them),
 * asks the CPU for the part of it a search for key reads: for a u64 leaf
 * in the indexed form, key's group alone. */
void bt_prefetch_search(const bonsai_db *db, const bt_rd *rd, unsigned kind,
                        bn_child leaf, bn_key key);

/* bt_get's last step: key's value in the leaf bt_finger_leaves gave,
 * for keys in increasing order: in the leaf of the key before, the search
 * goes on from where that key's ended, with the leaf's header, index and
 * group as that search read them. */
int bt_leaf_get(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                bt_finger *f, bn_child leaf, bn_key key, bonsai_val *val);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * tree.h - what the files of the tree (btree.h's functions) share among
 * themselves, and nothing outside them uses:
 *
 *   view.c       reading: images searched in place, lookups (a u64 tree's
 *                through its table of leaves, leafdir.h), seeks, walks
 *   ovf.c        overflow values (ovf.h)
 *   nodes.c      the writer's decoded nodes: lifetime, eviction
 *   shape.c      insert and split, delete and merge, drop
 *   writeback.c  bt_flush: plan every image's home, then write them
 *   defrag.c     bt_defrag: leaves slid down to gather free space
 *
 * Invariants of a tree:
 *  - all leaves are at depth `depth`; a branch's child i holds keys k with
 *    key[i] <= k < key[i+1] (key[0] is never compared, but stays below
 *    key[1]);
 *  - no node is empty once a change is done: a tree without entries has
 *    no nodes (depth 0);
 *  - a node's image fits node_bytes and node_entries, except a node of a
 *    single entry that alone is larger;
 *  - the writer's decoded nodes are linked both ways: a branch's
 *    child[i].mem points at the decoded child, whose parent points back.
 *    A decoded node with dirty == 0 equals its image at home.
 */
#ifndef BONSAI_TREE_H
#define BONSAI_TREE_H

#include "btree.h"

/* ---- extents ------------------------------------------------------------ */

/* Does e lie inside [first_pgno, end)? */
static inline int tree_ext_ok(const bonsai_db *db, uint64_t end, bn_ext e)
{
    return e.npages >= 1 && e.pgno >= db->first_pgno && e.pgno < end &&
           e.npages <= end - e.pgno;
}

static inline const uint8_t *tree_ext_ptr(const bonsai_db *db, bn_ext e)
{
    return db->rg.base + e.pgno * db->page_size;
}

static inline uint32_t tree_pages_for(const bonsai_db *db, uint64_t bytes)
{
    return (uint32_t)((bytes + db->page_size - 1) / db->page_size);
}

/* ---- decoded nodes (nodes.c) -------------------------------------------- */

bt_node *tree_new_node(bt_tree *t, int leaf, unsigned level);
void tree_free_node(bt_node *n);
/* Puts n on the dirty list (once). */
int tree_mark_dirty(bonsai_db *db, bt_node *n);
/* Releases n's home and buries it; the caller already removed n from its
 * tree. */
int tree_kill_node(bonsai_db *db, bt_node *n);
/* The decoded root / child idx of parent, decoding it if needed. */
int tree_load_root(bonsai_db *db, bt_tree *t, bt_node **out);
int tree_load_child(bonsai_db *db, bt_tree *t, bt_node *parent,
                    uint32_t idx, bt_node **out);
/* Decodes the path for key down to the node on `level` (0: the leaf) of
 * a tree of depth >= 1: *out.  With bound: *bound is the lowest key
 * beyond *out (*has_bound 1; left as it was when there is none),
 * pointing into a branch that stays as it is until the tree changes
 * shape. */
int tree_descend(bonsai_db *db, bt_tree *t, bn_key key, unsigned level,
                 bt_node **out, bn_key *bound, int *has_bound);
/* Index of child in parent, found by its first key and checked
 * (UINT32_MAX: not there). */
uint32_t tree_index_of(const bt_node *parent, const bt_node *child);
/* Points the parent links of n's decoded children back at n. */
void tree_adopt_children(bt_node *n);

/* ---- growth as groups shift (growth.c) ---------------------------------- */

/* Must n be measured exactly (tree_outgrows) before its estimate guess
 * is trusted?  Its groups may have shifted past what the estimate sees. */
int tree_grow_unsure(const bonsai_db *db, const bt_node *n, int64_t guess);
/* Does n's exact size (bn_size_exact; its estimate's drift kept in
 * est_fix) exceed node_bytes (*exact = it, unless NULL)?  The
 * caller splits n when it does, so its bounds are noted only when it
 * fits; else they become unknown, each part to be measured alone. */
int tree_outgrows(bonsai_db *db, bt_node *n, size_t *exact);
/* Raises db->grow_max to n's bounds, measured as n is. */
void tree_note_grow(bonsai_db *db, const bt_node *n);
/* n was just read from its home: its bounds are known now. */
void tree_note_read(bonsai_db *db, const bt_node *n);
/* The image at e leaves the store unread: its bound no longer matters. */
void tree_forget_unread(bonsai_db *db, bn_ext e);
/* After a change to n: notes whether the budget's bound may now miss
 * what n can grow by (bt_size_unsure then measures it). */
void tree_note_change(bonsai_db *db, const bt_node *n);

/* ---- shape changes (shape.c) -------------------------------------------- */

/* Splits n in two; *right_out gets the new right half. */
int tree_split(bonsai_db *db, bt_tree *t, bt_node *n, int append,
               bt_node **right_out);

/* A tree's nodes changed in memory, or moved: the lookups' table of
 * leaves no longer holds (leafdir.h). */
static inline void tree_moved(bonsai_db *db)
{
    db->tree_gen++;
    if (ld_built(&db->ld))
        ld_drop(&db->ld);
}

/* Drops the hint to the tail leaf of sequential puts: before decoded
 * leaves are freed, or split in a way the hint cannot follow. */
static inline void tree_forget_tail(bonsai_db *db)
{
    db->tail_hint.leaf = NULL;
}

#endif

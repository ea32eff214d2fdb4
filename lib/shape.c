/* SPDX-License-Identifier: MIT */
/*
 * shape.c - changes of a tree's shape: insert and split, delete and merge,
 * the tail leaf of sequential puts, dropping a whole tree.
 */
#include "tree.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ovf.h"

/* ---- insert and split -------------------------------------------------- */

/* Does n's image outgrow node_bytes?  The codec's estimate drifts from
 * the exact size (it can undercount u64 groups mixing runs and jumps), so
 * the drift measured at the last exact sizing corrects it, and the exact
 * size is taken again every 64 changes or when the corrected estimate is
 * within 1/32 of the limit: O(1) a change amortised.  Where keys put
 * among a node's keys may have shifted its groups further than that, it
 * is measured each time (tree_grow_unsure). */
static int too_big(bonsai_db *db, bt_node *n)
{
    if (n->bn.n > db->opt.node_entries)
        return 1;
    int64_t limit = db->opt.node_bytes;
    int64_t guess = (int64_t)n->bn.est + n->est_fix;
    int64_t near = limit / 32;
    /* the estimate drifts a little with each change: measure exactly when
     * near the limit, or after more changes the farther from it */
    int64_t gap = guess < limit ? limit - guess : guess - limit;
    /* fix_changes < 64 * (gap / near), without a division (one a change
     * cost a sequential put 15 %) */
    if (!tree_grow_unsure(db, n, guess) && gap > near &&
        (++n->fix_changes < 64 ||
         ((int64_t)(n->fix_changes >> 6) + 1) * near <= gap))
        return guess > limit;
    return tree_outgrows(db, n, NULL);
}

/* Shortest key s with a < s <= b (byte keys), written to buf. */
static bn_key separator(bn_key a, bn_key b, uint8_t *buf)
{
    uint32_t p = 0;
    while (p < a.len && p < b.len && a.b[p] == b.b[p])
        p++;
    uint32_t len = p + 1 <= b.len ? p + 1 : b.len;
    memcpy(buf, b.b, len);
    return (bn_key){.b = buf, .len = len};
}

/* The smallest key there is, below every separator (a separator lies
 * above the last key left of it): what a branch's key[0], never
 * compared, is set to when it must stay below key[1]. */
static bn_key lowest_key(void)
{
    static const uint8_t zero = 0;
    return (bn_key){.u = 0, .b = &zero, .len = 1};
}

static int new_root_above(bonsai_db *db, bt_tree *t, bt_node *n)
{
    bt_node *root = tree_new_node(t, 0, n->level + 1u);
    if (!root)
        return BONSAI_NOMEM;
    if (ptrvec_reserve(&db->branches, 1)) {
        tree_free_node(root);
        return BONSAI_NOMEM;
    }
    db->nodes_max++;
    bn_child c = {t->root.ext, n};
    int rc = bn_insert_child(&root->bn, 0, lowest_key(), c);
    if (rc == 0)
        rc = tree_mark_dirty(db, root);
    if (rc) {
        tree_free_node(root);
        return rc;
    }
    ptrvec_push(&db->branches, root); /* reserved: cannot fail */
    n->parent = root;
    t->root = (bn_child){{0, 0}, root};
    t->depth++;
    t->record_dirty = 1;
    return 0;
}

/* Where a too big node splits: in half, or after an append as late as
 * keeps the left node within node_bytes (the sizes of its entries taken
 * as even), so that sequential loads leave full nodes behind. */
static uint32_t split_point(const bonsai_db *db, const bt_node *n, int append)
{
    if (!append)
        return n->bn.n / 2;
    /* too many entries, bytes far from the limit: the left node keeps the
     * most it may, without a pass over every key to size it exactly */
    int64_t guess = (int64_t)n->bn.est + n->est_fix;
    if (n->bn.n > db->opt.node_entries &&
        guess + db->opt.node_bytes / 32 < db->opt.node_bytes)
        return db->opt.node_entries >= n->bn.n / 2 ? db->opt.node_entries
                                                : n->bn.n / 2;
    uint64_t exact = bn_encoded_size(&n->bn);
    uint64_t keep =
        (uint64_t)n->bn.n * db->opt.node_bytes / (exact ? exact : 1);
    if (keep > db->opt.node_entries)
        keep = db->opt.node_entries;
    if (keep >= n->bn.n)
        keep = n->bn.n - 1;
    return keep < n->bn.n / 2 ? n->bn.n / 2 : (uint32_t)keep;
}

int tree_split(bonsai_db *db, bt_tree *t, bt_node *n, int append,
               bt_node **right_out)
{
    uint32_t at = split_point(db, n, append);
    bt_node *r = tree_new_node(t, n->bn.leaf, n->level);
    if (!r)
        return BONSAI_NOMEM;
    db->nodes_max++;
    int rc = bn_move(&r->bn, 0, &n->bn, at, n->bn.n);
    if (rc) {
        tree_free_node(r);
        return rc;
    }
    tree_adopt_children(r);
    if ((rc = ptrvec_push(r->bn.leaf ? &db->leaves : &db->branches, r)))
        goto orphan;
    if (!n->parent && (rc = new_root_above(db, t, n)))
        goto orphan;
    uint8_t buf[BONSAI_MAX_KEY];
    bn_key sep = bn_key_at(&r->bn, 0);
    if (t->kind == BONSAI_KEY_BYTES && r->bn.leaf)
        sep = separator(bn_key_at(&n->bn, n->bn.n - 1), sep, buf);
    bt_node *p = n->parent;
    uint32_t idx = tree_index_of(p, n);
    if (idx == UINT32_MAX) {
        rc = BONSAI_CORRUPT;
        goto orphan;
    }
    /* keys below key[0] may reach child 0 (p, or a node above it, took
     * in the range of an emptied node before it): key[0] then gives way
     * to the lowest key, as a node's keys must increase */
    if (idx == 0 && !bt_key_less(t->kind, bn_key_at(&p->bn, 0), sep) &&
        (rc = bn_set_key(&p->bn, 0, lowest_key())))
        goto orphan;
    bn_child c = {{0, 0}, r};
    if ((rc = bn_insert_child(&p->bn, idx + 1, sep, c)))
        goto orphan;
    r->parent = p;
    *right_out = r;
    if ((rc = tree_mark_dirty(db, n)) || (rc = tree_mark_dirty(db, r)))
        return rc;
    return tree_mark_dirty(db, p);
orphan:
    /* the tree is now inconsistent; the caller rolls it back */
    r->dead = 1;
    ptrvec_push(&db->graveyard, r);
    return rc;
}

/* *split is set when n split at least once (its parent gained a child). */
static int split_until_fits(bonsai_db *db, bt_tree *t, bt_node *n,
                            int append, int *split_any)
{
    /* a branch keeps two children a side, or huge separators would stack
     * up one-child branches without end */
    uint32_t least = n->bn.leaf ? 2 : 4;
    while (n->bn.n >= least && too_big(db, n)) {
        bt_node *r;
        int rc = tree_split(db, t, n, append, &r);
        if (rc)
            return rc;
        *split_any = 1;
        int ignored = 0;
        if ((rc = split_until_fits(db, t, r, 0, &ignored)))
            return rc;
        append = 0;
    }
    return 0;
}

/* Splits n as needed, then each ancestor that gained a child: a node
 * nothing was added to still fits. */
static int fit_upwards(bonsai_db *db, bt_tree *t, bt_node *n, int append)
{
    for (; n; n = n->parent) {
        int split_any = 0;
        int rc = split_until_fits(db, t, n, append, &split_any);
        if (rc || !split_any)
            return rc;
        append = 0;
    }
    return 0;
}

/* Decodes the path to the leaf for key; creates a root leaf if empty.
 * With bound: *bound is the lowest key beyond the leaf (*has_bound 0 for
 * the last leaf), pointing into a branch that stays as it is until the
 * tree changes shape. */
static int touch_leaf_bounded(bonsai_db *db, bt_tree *t, bn_key key,
                              bt_node **leaf, bn_key *bound, int *has_bound)
{
    bt_node *n = NULL;
    if (t->depth == 0) {
        n = tree_new_node(t, 1, 0);
        if (!n)
            return BONSAI_NOMEM;
        db->nodes_max++;
        int rc = ptrvec_push(&db->leaves, n);
        if (rc) {
            tree_free_node(n);
            return rc;
        }
        t->root = (bn_child){{0, 0}, n};
        t->depth = 1;
        t->record_dirty = 1;
        *leaf = n;
        /* dirty at once: an empty tree's new root must be written */
        return tree_mark_dirty(db, n);
    }
    return tree_descend(db, t, key, 0, leaf, bound, has_bound);
}

static int touch_leaf(bonsai_db *db, bt_tree *t, bn_key key, bt_node **leaf)
{
    return touch_leaf_bounded(db, t, key, leaf, NULL, NULL);
}

static int release_value(bonsai_db *db, bt_node *leaf, uint32_t idx)
{
    const uint8_t *v;
    uint32_t len;
    unsigned vflag;
    bn_value_at(&leaf->bn, idx, &v, &len, &vflag);
    if (!(vflag & BN_VAL_OVERFLOW))
        return 0;
    bn_ext e;
    uint64_t vlen;
    if (ovf_ext(v, len, &e, &vlen))
        return BONSAI_CORRUPT;
    return extvec_push(&db->op_release, e);
}

int bt_leaf_of(bonsai_db *db, bt_tree *t, bn_key key, bt_node **leaf)
{
    return touch_leaf(db, t, key, leaf);
}

int bt_leaf_takes(const bonsai_db *db, const bt_tree *t, const bt_node *leaf,
                  bn_key key, uint32_t vlen)
{
    size_t kbytes = t->kind == BONSAI_KEY_U64 ? 10 : key.len;
    size_t grown = leaf->bn.est + kbytes + (vlen > db->inline_max ? BT_OVF_REF
                                                                : vlen) + 16;
    /* a key among a u64 leaf's keys may shift its groups (regroup.h) */
    if (t->kind == BONSAI_KEY_U64 && leaf->bn.n &&
        key.u < leaf->bn.k64[leaf->bn.n - 1])
        grown += leaf->bn.grow == BN_GROW_UNKNOWN
                     ? db->opt.node_bytes
                     : (size_t)leaf->bn.grow + leaf->bn.grow_since +
                           leaf->bn.grow_key;
    int splits = leaf->bn.n + 1 > db->opt.node_entries ||
                 grown >= (size_t)db->opt.node_bytes * 7 / 8;
    /* a dirty leaf is counted already; a clean one must fit its home */
    int fits = leaf->dirty || (leaf->has_home &&
                               tree_pages_for(db, grown) <= leaf->home.npages);
    return !splits && fits;
}

/* Does key go after the last entry of leaf n, which has one? */
static int after_last(const bt_tree *t, const bt_node *n, bn_key key)
{
    if (t->kind == BONSAI_KEY_U64)
        return n->bn.k64[n->bn.n - 1] < key.u;
    return bt_key_less(t->kind, bn_key_at(&n->bn, n->bn.n - 1), key);
}

int bt_appends_to_cached_leaf(const bt_tree *t, bn_key key)
{
    const bt_node *n = t->root.mem;
    while (n && !n->bn.leaf) {
        int found;
        n = n->bn.child[bn_search(&n->bn, &key, &found)].mem;
    }
    if (!n || n->bn.n == 0)
        return n != NULL;
    return after_last(t, n, key);
}

int bt_goes_last(const bt_tree *t, bn_key key)
{
    const bt_node *n = t->root.mem;
    for (; n && !n->bn.leaf; n = n->bn.child[n->bn.n - 1].mem) {
        if (n->bn.n == 0 ||
            bt_key_less(t->kind, key, bn_key_at(&n->bn, n->bn.n - 1)))
            return 0;
    }
    return 1;
}

/* The decoded last leaf, or NULL where the right edge is not decoded. */
static bt_node *last_leaf(const bt_tree *t)
{
    bt_node *n = t->root.mem;
    while (n && !n->bn.leaf)
        n = n->bn.n ? n->bn.child[n->bn.n - 1].mem : NULL;
    return n;
}

bt_node *bt_tail_leaf(const bt_tree *t, bn_key key)
{
    bt_node *n = last_leaf(t);
    if (!n || n->bn.n == 0) /* an emptied last leaf says nothing of key */
        return n && n == t->root.mem ? n : NULL;
    return after_last(t, n, key) ? n : NULL;
}

bt_node *bt_tail_leaf_hinted(bonsai_db *db, const bt_tree *t, bn_key key)
{
    bt_node *n = db->tail_hint.leaf;
    if (!n || db->tail_hint.tree != t || db->tail_hint.gen != db->write_gen)
        return bt_tail_leaf(t, key);
#ifdef BONSAI_CHECK_HINTS
    assert(n == last_leaf(t)); /* a change that kept write_gen moved it */
#endif
    return n->bn.n && after_last(t, n, key) ? n : NULL;
}

void bt_note_tail(bonsai_db *db, const bt_tree *t, bt_node *tail,
                  uint32_t n_before)
{
    int split = tail->bn.n != n_before + 1; /* the new key moved right */
    db->tail_hint.tree = t;
    db->tail_hint.leaf = split ? NULL : tail;
    db->tail_hint.gen = db->write_gen;
}

/* Nodes a change removes from its tree wait in the graveyard; room for
 * them is made first, so unlinking a node can never lose it. */
static int room_for_removed(bonsai_db *db, const bt_tree *t)
{
    return ptrvec_reserve(&db->graveyard, 2u * (t->depth + 2u));
}

int bt_put(bonsai_db *db, bt_tree *t, bn_key key, const uint8_t *val,
           uint32_t vlen, unsigned flags)
{
    bt_node *leaf;
    int found, rc = room_for_removed(db, t);
    if (rc == 0)
        rc = touch_leaf(db, t, key, &leaf);
    if (rc)
        return rc;
    uint32_t idx = bn_search(&leaf->bn, &key, &found);
    if (found && (flags & BONSAI_NOOVERWRITE))
        return BONSAI_EXISTS;
    uint8_t ref[BT_OVF_REF];
    unsigned vflag = 0;
    if (vlen > db->inline_max) {
        if ((rc = ovf_write(db, val, vlen, ref)))
            return rc;
        val = ref;
        vlen = BT_OVF_REF;
        vflag = BN_VAL_OVERFLOW;
        t->flags |= TREE_F_OVERFLOW;
    }
    if (found) {
        if ((rc = release_value(db, leaf, idx)))
            return rc;
        rc = bn_set_value(&leaf->bn, idx, val, vlen, vflag);
    } else {
        rc = bn_insert(&leaf->bn, idx, key, val, vlen, vflag);
    }
    if (rc)
        return rc;
    db->write_gen++;
    t->record_dirty = 1;
    if (!found)
        t->count++;
    if ((rc = tree_mark_dirty(db, leaf)))
        return rc;
    return fit_upwards(db, t, leaf, !found && idx + 1 == leaf->bn.n);
}

int bt_append(bonsai_db *db, bt_tree *t, bt_node *leaf, bn_key key,
              const uint8_t *val, uint32_t vlen)
{
    int rc = room_for_removed(db, t);
    if (rc == 0)
        rc = bn_insert(&leaf->bn, leaf->bn.n, key, val, vlen, 0);
    if (rc)
        return rc;
    db->write_gen++;
    t->record_dirty = 1;
    t->count++;
    if ((rc = tree_mark_dirty(db, leaf)))
        return rc;
    return fit_upwards(db, t, leaf, 1);
}

#define RUN_NEW 256u /* new entries merged into a leaf at a time */
#define PREFETCH_AHEAD 8u /* batch keys asked for ahead of their use */

/* Merges the gathered new entries into leaf; on failure *to is the first
 * of them, so that they stay waiting. */
static int merge_news(bt_tree *t, bt_node *leaf, const bn_new *news,
                      uint32_t *nnew, uint32_t first, uint32_t *to)
{
    int rc = bn_insert_sorted(&leaf->bn, *nnew, news);
    if (rc)
        *to = first;
    else
        t->count += *nnew;
    *nnew = 0;
    return rc;
}

int bt_put_run(bonsai_db *db, bt_tree *t, const putbuf *b, uint32_t from,
               uint32_t max, uint32_t *to)
{
    bt_node *leaf;
    bn_key bound = {0};
    int has_bound = 0;
    *to = from;
    int rc = room_for_removed(db, t);
    if (rc == 0)
        rc = touch_leaf_bounded(db, t, pb_key(b, from), &leaf, &bound,
                                &has_bound);
    if (rc)
        return rc;
    /* positions are found in the leaf as it is; new keys are merged in
     * together, overwrites change values in place */
    bn_new news[RUN_NEW];
    uint32_t nnew = 0, first_new = from, i = from, lo = 0;
    int at_end = 0;
    while (rc == 0 && i < b->n && i - from < max) {
        pb_prefetch(b, i + PREFETCH_AHEAD);
        bn_key key = pb_key(b, i);
        if (i > from && has_bound && !bt_key_less(t->kind, key, bound))
            break;
        uint32_t vlen;
        const uint8_t *val = pb_value(b, i, &vlen);
        int found;
        uint32_t idx = bn_search_leaf_from(&leaf->bn, lo, key, &found);
        lo = idx; /* the batch is sorted: the next key lands here or on */
        at_end = !found && idx == leaf->bn.n;
        if (found) {
            if ((rc = release_value(db, leaf, idx)) == 0)
                rc = bn_set_value(&leaf->bn, idx, val, vlen, 0);
        } else {
            if (nnew == 0)
                first_new = i;
            news[nnew++] = (bn_new){idx, vlen, key, val};
            if (nnew == RUN_NEW) {
                rc = merge_news(t, leaf, news, &nnew, first_new, to);
                lo = 0; /* the merge moved the leaf's entries */
            }
        }
        if (rc == 0)
            *to = ++i;
    }
    if (rc == 0 && nnew)
        rc = merge_news(t, leaf, news, &nnew, first_new, to);
    if (*to == from)
        return rc;
    db->write_gen++;
    t->record_dirty = 1;
    int rc2 = tree_mark_dirty(db, leaf);
    if (rc2 == 0)
        rc2 = fit_upwards(db, t, leaf, at_end && !has_bound);
    return rc ? rc : rc2;
}

/* ---- delete and merge -------------------------------------------------- */

static int is_small(const bonsai_db *db, const bt_node *n)
{
    return n->bn.n == 0 || (n->bn.est < db->opt.node_bytes / 4 &&
                         n->bn.n <= db->opt.node_entries / 4);
}

static int can_merge(const bonsai_db *db, const bt_node *a, const bt_node *b)
{
    if (a->bn.n == 0 || b->bn.n == 0)
        return 1;
    return a->bn.n + b->bn.n <= db->opt.node_entries &&
           a->bn.est + b->bn.est <= (size_t)db->opt.node_bytes * 3 / 4;
}

/* Moves everything of right (child ridx of p) onto left and drops it. */
static int merge(bonsai_db *db, bt_node *p, uint32_t ridx, bt_node *left,
                 bt_node *right)
{
    int rc;
    if (!right->bn.leaf && right->bn.n &&
        (rc = bn_set_key(&right->bn, 0, bn_key_at(&p->bn, ridx))))
        return rc;
    if ((rc = bn_move(&left->bn, left->bn.n, &right->bn, 0, right->bn.n)))
        return rc;
    tree_adopt_children(left);
    bn_remove(&p->bn, ridx);
    if ((rc = tree_kill_node(db, right)) || (rc = tree_mark_dirty(db, left)) ||
        (rc = tree_mark_dirty(db, p)))
        return rc;
    /* right's keys fell into new groups: the estimates said they fit
     * together, the groups may not (regroup.h) */
    return fit_upwards(db, left->tree, left, 0);
}

/* Takes n, empty and the only child of p, out of the tree: p is empty
 * now, and goes next (merge_upwards). */
static int remove_only_child(bonsai_db *db, bt_node *p, bt_node *n)
{
    bn_remove(&p->bn, 0);
    int rc = tree_kill_node(db, n);
    return rc ? rc : tree_mark_dirty(db, p);
}

static int shrink_root(bonsai_db *db, bt_tree *t, bt_node *root,
                       bt_node **next)
{
    *next = NULL;
    if (!root->bn.leaf && root->bn.n == 1) {
        bt_node *child;
        int rc = tree_load_child(db, t, root, 0, &child);
        if (rc)
            return rc;
        t->root = root->bn.child[0];
        child->parent = NULL;
        t->depth--;
        t->record_dirty = 1;
        *next = child;
        return tree_kill_node(db, root);
    }
    if (root->bn.n == 0) { /* a leaf, or a branch whose last child left */
        t->root = (bn_child){{0, 0}, NULL};
        t->depth = 0;
        t->record_dirty = 1;
        return tree_kill_node(db, root);
    }
    return 0;
}

/* A node that got small merges with a sibling when they fit together.
 * An empty node never stays: it always fits with a sibling, and when it
 * has none it leaves its parent, which is then empty in turn; so a tree
 * whose last entry goes has no nodes left (depth 0). */
static int merge_upwards(bonsai_db *db, bt_tree *t, bt_node *n)
{
    while (n) {
        bt_node *p = n->parent;
        if (!p) {
            int rc = shrink_root(db, t, n, &n);
            if (rc)
                return rc;
            continue;
        }
        if (!is_small(db, n))
            return 0;
        uint32_t idx = tree_index_of(p, n);
        if (idx == UINT32_MAX)
            return BONSAI_CORRUPT;
        bt_node *sib;
        int rc;
        if (idx + 1 < p->bn.n) {
            if ((rc = tree_load_child(db, t, p, idx + 1, &sib)))
                return rc;
            if (can_merge(db, n, sib) && (rc = merge(db, p, idx + 1, n, sib)))
                return rc;
        } else if (idx > 0) {
            if ((rc = tree_load_child(db, t, p, idx - 1, &sib)))
                return rc;
            if (can_merge(db, sib, n) && (rc = merge(db, p, idx, sib, n)))
                return rc;
        } else if (n->bn.n == 0 && (rc = remove_only_child(db, p, n))) {
            return rc;
        }
        n = p;
    }
    return 0;
}

int bt_del(bonsai_db *db, bt_tree *t, bn_key key)
{
    if (t->depth == 0)
        return BONSAI_NOTFOUND;
    bt_node *leaf;
    int found, rc = room_for_removed(db, t);
    if (rc == 0)
        rc = touch_leaf(db, t, key, &leaf);
    if (rc)
        return rc;
    uint32_t idx = bn_search(&leaf->bn, &key, &found);
    if (!found)
        return BONSAI_NOTFOUND;
    if ((rc = release_value(db, leaf, idx)))
        return rc;
    bn_remove(&leaf->bn, idx);
    db->write_gen++;
    t->count--;
    t->record_dirty = 1;
    if ((rc = tree_mark_dirty(db, leaf)))
        return rc;
    /* removing a key can lengthen its neighbour's encoding */
    if ((rc = fit_upwards(db, t, leaf, 0)))
        return rc;
    return merge_upwards(db, t, leaf);
}

/* After an entry left leaf, which keeps others: may the delete stay
 * without room made for it?  Only when written back it surely takes no
 * run: the leaf does not split and still fits its home, measured exactly
 * (a delete can lengthen a neighbour's encoding, and the leaf may be
 * dirty with changes whose room was not counted either). */
static int del_needs_room(bonsai_db *db, bt_node *leaf)
{
    size_t exact;
    return tree_outgrows(db, leaf, &exact) ||
           tree_pages_for(db, exact) > leaf->home.npages;
}

int bt_del_in_place(bonsai_db *db, bt_tree *t, bn_key key, int *done)
{
    *done = 0;
    if (db->cow || t->depth == 0)
        return 0;
    bt_node *leaf;
    int found, rc = touch_leaf(db, t, key, &leaf);
    if (rc)
        return rc;
    uint32_t idx = bn_search(&leaf->bn, &key, &found);
    if (!found) {
        *done = 1;
        return BONSAI_NOTFOUND;
    }
    if (!leaf->has_home || leaf->bn.n < 2)
        return 0; /* an emptied leaf leaves the tree: bt_del */
    /* the entry, to be put back when the delete needs room after all */
    const uint8_t *v;
    uint32_t vlen;
    unsigned vflag;
    bn_value_at(&leaf->bn, idx, &v, &vlen, &vflag);
    uint8_t *copy = vlen ? malloc(vlen) : NULL;
    if (vlen && !copy)
        return BONSAI_NOMEM;
    if (vlen)
        memcpy(copy, v, vlen);
    bn_remove(&leaf->bn, idx);
    if (del_needs_room(db, leaf)) {
        rc = bn_insert(&leaf->bn, idx, key, copy, vlen, vflag);
        free(copy);
        if (rc)
            db->write_gen++; /* the leaf lost an entry: a failed change */
        return rc;
    }
    *done = 1;
    db->write_gen++;
    t->count--;
    t->record_dirty = 1;
    if (vflag & BN_VAL_OVERFLOW) {
        bn_ext e;
        uint64_t len;
        rc = ovf_ext(copy, vlen, &e, &len) ? BONSAI_CORRUPT
                                           : extvec_push(&db->op_release, e);
    }
    free(copy);
    return rc ? rc : tree_mark_dirty(db, leaf);
}

/* ---- dropping a tree --------------------------------------------------- */

static int release_ext(void *ctx, bn_ext e, int is_value)
{
    bonsai_db *db = ctx;
    if (!is_value)
        tree_forget_unread(db, e);
    return extvec_push(&db->op_release, e);
}

static int bury(bonsai_db *db, bt_node *n)
{
    if (!n->bn.leaf)
        for (uint32_t i = 0; i < n->bn.n; i++)
            if (n->bn.child[i].mem) {
                int rc = bury(db, n->bn.child[i].mem);
                if (rc)
                    return rc;
            }
    n->has_home = 0; /* released by the walk already */
    return tree_kill_node(db, n);
}

int bt_drop(bonsai_db *db, bt_tree *t)
{
    bt_rd rd = {db->al.end, &db->uc, NULL, 0, NULL};
    tree_moved(db);
    int rc = bt_walk(db, &rd, t, NULL, release_ext, db);
    if (rc == 0 && t->root.mem)
        rc = bury(db, t->root.mem);
    if (rc)
        return rc;
    t->root = (bn_child){{0, 0}, NULL};
    t->depth = 0;
    t->count = 0;
    t->flags = 0;
    t->record_dirty = 1;
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * defrag.c - free space gathered into runs long enough for a node
 * (bt_defrag): leaves slide down into the free pages below them, so that
 * the pages they leave join the free space above.
 *
 * Near its cap a store's free pages lie in runs shorter than a node: each
 * write-back frees a grown leaf's run and takes a longer one elsewhere.
 * The room budget counts only runs a node surely fits (room.h), so such
 * pages hold nothing, and a grown leaf that finds no run is split in two
 * to fit the gaps, leaving leaves half full.
 *
 * Only without copy-on-write and in anonymous memory: nothing but the
 * writer reads the images, and a crash loses the store anyway, so a leaf
 * may move with its parent's reference patched in place.  Only leaves
 * move (most of a tree's pages), and only below raw branch images, whose
 * child references have a fixed width: a patch is eight bytes and the
 * checksum.  Branches, roots and overflow runs stay where they are.
 *
 * Leaves are taken in the order of their pages: each goes to the first
 * free run below it that holds it, and the run it leaves becomes free for
 * the leaves after it.  A run too short for the leaf at hand (a gap
 * before a branch, mostly) takes smaller leaves from the next few, or
 * stays behind.  Every step leaves the tree whole, so running out of
 * memory midway only stops early.
 */
#include "bigmem.h"
#include "tree.h"

#include <stdlib.h>
#include <string.h>

/* A leaf that may move: where it lies and the reference to it. */
typedef struct leaf_ref {
    uint64_t at;     /* pgno << 24 | npages */
    uint64_t parent; /* the parent image's pgno << 24 | child index */
} leaf_ref;

/* Leaves listed at once, at most: the list's 16 bytes a leaf are memory
 * outside every budget, so a large tree is taken in windows of pages,
 * each of this many leaves or fewer (1 MiB), in page order. */
#define LIST_MAX 65536u

/* The leaves of a window [lo, hi) of pages; while counting (hist set)
 * only how many lie in each bucket of LIST_MAX pages. */
typedef struct leaf_list {
    leaf_ref *v;
    size_t n, cap;
    uint64_t lo, hi;
    uint32_t *hist;
} leaf_list;

#define REF_LOW 24
#define REF_MASK ((UINT64_C(1) << REF_LOW) - 1)

static int list_add(leaf_list *l, bn_ext leaf, uint64_t parent, uint32_t idx)
{
    if (leaf.pgno < l->lo || leaf.pgno >= l->hi)
        return 0;
    if (l->hist) {
        l->hist[(leaf.pgno - l->lo) / LIST_MAX]++;
        return 0;
    }
    if (l->n == l->cap)
        return BONSAI_CORRUPT; /* more leaves than counted */
    l->v[l->n++] = (leaf_ref){leaf.pgno << REF_LOW | leaf.npages,
                              parent << REF_LOW | idx};
    return 0;
}

/* The header of the raw branch image at pgno; BONSAI_NOTFOUND when it is
 * packed (its references cannot be patched in place). */
static int branch_at(const bonsai_db *db, const bt_tree *t, uint64_t pgno,
                     bn_info *info)
{
    if (pgno < db->first_pgno || pgno >= db->al.end)
        return BONSAI_CORRUPT;
    const uint8_t *img = db->rg.base + pgno * db->page_size;
    size_t avail = (size_t)(db->al.end - pgno) * db->page_size;
    if (pk_is_packed(img))
        return BONSAI_NOTFOUND;
    int rc = bn_img_check(img, avail, t->kind, 0, info);
    if (rc == 0 && info->type != BN_TYPE_BRANCH)
        rc = BONSAI_CORRUPT;
    return rc;
}

/* Lists the leaves below the branch at e, on level `level`. */
static int list_below(bonsai_db *db, const bt_tree *t, bn_ext e,
                      unsigned level, leaf_list *l)
{
    if (!tree_ext_ok(db, db->al.end, e))
        return BONSAI_CORRUPT;
    bn_info info;
    int rc = branch_at(db, t, e.pgno, &info);
    if (rc)
        return rc == BONSAI_NOTFOUND ? 0 : rc;
    const uint8_t *img = tree_ext_ptr(db, e);
    for (uint32_t i = 0; i < info.count; i++) {
        bn_ext c;
        if ((rc = bn_img_child(img, &info, i, &c)) != 0)
            return rc;
        rc = level == 1 ? list_add(l, c, e.pgno, i)
                        : list_below(db, t, c, level - 1, l);
        if (rc)
            return rc;
    }
    return 0;
}

static int by_page(const void *a, const void *b)
{
    const leaf_ref *x = a, *y = b;
    return (x->at > y->at) - (x->at < y->at);
}

/* Moves the leaf r to page `to` and points its parent's image there. */
static int move_leaf(bonsai_db *db, const bt_tree *t, leaf_ref *r,
                     uint64_t to)
{
    bn_ext from = {r->at >> REF_LOW, (uint32_t)(r->at & REF_MASK)};
    bn_ext dest = {to, from.npages};
    uint64_t parent = r->parent >> REF_LOW;
    bn_info info;
    int rc = branch_at(db, t, parent, &info);
    if (rc)
        return rc;
    if ((rc = alloc_take(&db->al, dest)) != 0) {
        alloc_put(&db->al, dest); /* taken even on NOMEM: free again */
        return rc;
    }
    uint8_t *base = db->rg.base;
    memcpy(base + to * db->page_size, base + from.pgno * db->page_size,
           (size_t)from.npages * db->page_size);
    rc = bn_img_set_child(base + parent * db->page_size, &info,
                          (uint32_t)(r->parent & REF_MASK), dest);
    if (rc) {
        alloc_put(&db->al, dest);
        return rc;
    }
    r->at = dest.pgno << REF_LOW | dest.npages;
    return alloc_put(&db->al, from); /* free even on NOMEM */
}

/* Brings the decoded copies of the moved leaves' references up to date:
 * a clean decoded node equals its image (tree.h). */
static int refresh_decoded(bonsai_db *db, bt_node *n)
{
    if (!n || n->bn.leaf)
        return 0;
    bn_info info;
    const bt_tree *t = n->tree;
    int rc = branch_at(db, t, n->home.pgno, &info);
    if (rc)
        return rc == BONSAI_NOTFOUND ? 0 : rc;
    const uint8_t *img = tree_ext_ptr(db, n->home);
    for (uint32_t i = 0; i < n->bn.n && i < info.count; i++) {
        bn_child *c = &n->bn.child[i];
        if ((rc = bn_img_child(img, &info, i, &c->ext)) != 0)
            return rc;
        if (c->mem && c->mem->bn.leaf)
            c->mem->home = c->ext;
        else if ((rc = refresh_decoded(db, c->mem)) != 0)
            return rc;
    }
    return 0;
}

/* Lists the movable leaves of t in [lo, hi) by page. */
static int list_window(bonsai_db *db, const bt_tree *t, leaf_list *l,
                       uint64_t lo, uint64_t hi)
{
    l->lo = lo;
    l->hi = hi;
    l->n = 0;
    int rc = list_below(db, t, t->root.ext, t->depth - 1u, l);
    if (rc == 0)
        qsort(l->v, l->n, sizeof *l->v, by_page);
    return rc;
}

/* Leaves after the one at hand that may fill a run too short for it. */
#define GAP_LOOKAHEAD 64u

/* Fills the free run [p, p + run) with leaves from l->v[from] on that fit
 * it, in their order; returns where the filled part ends. */
static uint64_t fill_gap(bonsai_db *db, const bt_tree *t, leaf_list *l,
                         size_t from, uint64_t p, uint64_t run, int *rc)
{
    for (size_t j = from; j < l->n && j < from + GAP_LOOKAHEAD && *rc == 0;
         j++) {
        uint32_t np = (uint32_t)(l->v[j].at & REF_MASK);
        if (np <= run && l->v[j].at >> REF_LOW > p) { /* not moved yet */
            *rc = move_leaf(db, t, &l->v[j], p);
            p += np;
            run -= np;
        }
    }
    return p;
}

/* Moves leaf i of l to the first free run at or after *cursor that holds
 * it and lies below it; runs too short for it on the way are filled with
 * smaller leaves after it, or left behind. */
static int slide_leaf(bonsai_db *db, const bt_tree *t, leaf_list *l,
                      size_t i, uint64_t *cursor)
{
    uint64_t pg = l->v[i].at >> REF_LOW;
    uint32_t np = (uint32_t)(l->v[i].at & REF_MASK);
    if (pg < *cursor)
        return 0; /* moved already, into a gap below */
    uint64_t p = *cursor;
    int rc = 0;
    while (rc == 0 && (p = alloc_next_free(&db->al, p, pg)) + np <= pg) {
        uint64_t run = alloc_free_run(&db->al, p, np);
        if (run == np) {
            rc = move_leaf(db, t, &l->v[i], p);
            *cursor = p + np;
            return rc;
        }
        uint64_t filled = fill_gap(db, t, l, i + 1, p, run, &rc);
        p = filled > p ? filled : p + run;
    }
    *cursor = p < pg ? p : pg;
    return rc;
}

/* Slides the leaves of [lo, hi), l->cap of them at most. */
static int slide_window(bonsai_db *db, const bt_tree *t, leaf_list *l,
                        uint64_t lo, uint64_t hi, uint64_t *cursor)
{
    int rc = list_window(db, t, l, lo, hi);
    for (size_t i = 0; i < l->n && rc == 0; i++)
        rc = slide_leaf(db, t, l, i, cursor);
    return rc;
}

/* Counts the leaves in each bucket of LIST_MAX pages (each holds at most
 * LIST_MAX leaves), then slides them in windows of whole buckets. */
static int slide_all(bonsai_db *db, const bt_tree *t)
{
    uint64_t first = db->al.first, end = db->al.end;
    size_t buckets = (size_t)((end - first + LIST_MAX - 1) / LIST_MAX);
    leaf_list l = {0};
    if (!(l.hist = calloc(buckets ? buckets : 1, sizeof *l.hist)))
        return BONSAI_NOMEM;
    l.lo = first;
    l.hi = end;
    int rc = list_below(db, t, t->root.ext, t->depth - 1u, &l);
    uint32_t *hist = l.hist;
    l.hist = NULL;
    l.cap = LIST_MAX;
    if (rc == 0 && !(l.v = big_alloc(l.cap * sizeof *l.v, 0)))
        rc = BONSAI_NOMEM;
    uint64_t cursor = first;
    for (size_t b = 0; b < buckets && rc == 0;) {
        size_t e = b;
        uint64_t sum = 0;
        while (e < buckets && (e == b || sum + hist[e] <= LIST_MAX))
            sum += hist[e++];
        if (sum)
            rc = slide_window(db, t, &l, first + b * LIST_MAX,
                              first + e * LIST_MAX, &cursor);
        b = e;
    }
    free(hist);
    big_free(l.v, l.cap * sizeof *l.v);
    return rc;
}

static int defrag_tree(bonsai_db *db, bt_tree *t)
{
    if (t->depth < 2)
        return 0;
    int rc = slide_all(db, t);
    int rc2 = refresh_decoded(db, t->root.mem);
    return rc ? rc : rc2;
}

int bt_defrag(bonsai_db *db, bt_tree *t)
{
    if (db->cow || !db->anonymous || db->dirty.n)
        return 0;
    tree_forget_tail(db);
    tree_moved(db);
    db->write_gen++; /* cursors look again */
    return defrag_tree(db, t);
}

/* SPDX-License-Identifier: MIT */
/*
 * nodes.c - the writer's decoded nodes: their lifetime (decoded from an
 * image, linked to parent and children, marked dirty, freed), and what
 * the write cache evicts and forgets.
 */
#include "tree.h"

#include <stdlib.h>

/* ---- decoded nodes of the writer --------------------------------------- */

bt_node *tree_new_node(bt_tree *t, int leaf, unsigned level)
{
    bt_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    bn_init(&n->bn, t->kind, leaf);
    n->tree = t;
    n->level = (uint8_t)level;
    return n;
}

void tree_free_node(bt_node *n)
{
    bn_clear(&n->bn);
    free(n->packed);
    free(n);
}

static int mark_one(bonsai_db *db, bt_node *n)
{
    int rc = ptrvec_push(&db->dirty, n);
    if (rc)
        return rc;
    n->dirty = 1;
    db->dirty_nodes++;
    return 0;
}

/* With copy-on-write a changed node is written to a new run, so its
 * parent changes too, and so up to the root: they are marked now, so
 * that the room budget counts every node a write-back writes (room.h). */
int tree_mark_dirty(bonsai_db *db, bt_node *n)
{
    if (n)
        tree_note_change(db, n);
    tree_moved(db);
    for (; n && !n->dirty; n = db->cow ? n->parent : NULL) {
        int rc = mark_one(db, n);
        if (rc)
            return rc;
    }
    return 0;
}

/* Unlinks nothing: the caller already removed n from its tree. */
int tree_kill_node(bonsai_db *db, bt_node *n)
{
    n->dead = 1;
    if (n->dirty) {
        n->dirty = 0;
        db->dirty_nodes--;
    }
    int rc = ptrvec_push(&db->graveyard, n);
    if (rc == 0 && n->has_home)
        rc = extvec_push(&db->op_release, n->home);
    return rc;
}

/* Decodes the image at e, unpacking it first if it is packed. */
static int decode_image(bonsai_db *db, bn_ext e, unsigned kind, bt_node *n)
{
    const uint8_t *img = tree_ext_ptr(db, e);
    size_t avail = (size_t)e.npages * db->page_size;
    if (avail < BN_HEADER_SIZE || !pk_is_packed(img))
        return bn_decode(img, avail, kind, &n->bn);
    uint32_t raw_len;
    int rc = pk_check(img, avail, &db->pk, &raw_len);
    if (rc)
        return rc;
    uint8_t *raw = malloc(raw_len);
    if (!raw)
        return BONSAI_NOMEM;
    rc = pk_unpack(img, raw, raw_len);
    if (rc == 0)
        rc = bn_decode(raw, raw_len, kind, &n->bn);
    free(raw);
    return rc;
}

static int decode_node(bonsai_db *db, bt_tree *t, bn_ext e, unsigned level,
                       bt_node *parent, bt_node **out)
{
    if (!tree_ext_ok(db, db->al.end, e))
        return BONSAI_CORRUPT;
    bt_node *n = tree_new_node(t, level == 0, level);
    if (!n)
        return BONSAI_NOMEM;
    int rc = decode_image(db, e, t->kind, n);
    n->bn.walked = 0; /* rewritten in the current form */
    n->bn.least_base = 0;
    n->bn.positional = 0;
    if (rc == 0 && n->bn.leaf != (level == 0))
        rc = BONSAI_CORRUPT;
    if (rc == 0)
        rc = ptrvec_push(n->bn.leaf ? &db->leaves : &db->branches, n);
    if (rc) {
        tree_free_node(n);
        return rc;
    }
    n->level = (uint8_t)level;
    n->home = e;
    n->has_home = 1;
    /* written earlier by this very transaction: its own to rewrite */
    if (db->cow && alloc_is_fresh(&db->al, e.pgno))
        n->home_txn = db->wtxn_id;
    n->parent = parent;
    tree_note_read(db, n);
    *out = n;
    return 0;
}

int tree_load_root(bonsai_db *db, bt_tree *t, bt_node **out)
{
    if (!t->root.mem) {
        int rc = decode_node(db, t, t->root.ext, t->depth - 1u, NULL,
                             &t->root.mem);
        if (rc)
            return rc;
    }
    *out = t->root.mem;
    return 0;
}

int tree_load_child(bonsai_db *db, bt_tree *t, bt_node *parent,
                    uint32_t idx, bt_node **out)
{
    bn_child *c = &parent->bn.child[idx];
    if (!c->mem) {
        int rc = decode_node(db, t, c->ext, parent->level - 1u, parent,
                             &c->mem);
        if (rc)
            return rc;
    }
    *out = c->mem;
    return 0;
}

int tree_descend(bonsai_db *db, bt_tree *t, bn_key key, unsigned level,
                 bt_node **out, bn_key *bound, int *has_bound)
{
    bt_node *n = NULL;
    int rc = tree_load_root(db, t, &n);
    while (rc == 0 && n->level > level) {
        int found;
        uint32_t idx = bn_search(&n->bn, &key, &found);
        if (bound && idx + 1 < n->bn.n) {
            *bound = bn_key_at(&n->bn, idx + 1); /* tighter the deeper */
            *has_bound = 1;
        }
        rc = tree_load_child(db, t, n, idx, &n);
    }
    *out = n;
    return rc;
}

/* Index of child in parent, found by its first key and checked. */
uint32_t tree_index_of(const bt_node *parent, const bt_node *child)
{
    if (child->bn.n > 0) {
        int found;
        bn_key first = bn_key_at(&child->bn, 0);
        uint32_t g = bn_search(&parent->bn, &first, &found);
        for (uint32_t i = g ? g - 1 : 0; i <= g + 1 && i < parent->bn.n; i++)
            if (parent->bn.child[i].mem == child)
                return i;
    }
    for (uint32_t i = 0; i < parent->bn.n; i++)
        if (parent->bn.child[i].mem == child)
            return i;
    return UINT32_MAX;
}

void tree_adopt_children(bt_node *n)
{
    if (n->bn.leaf)
        return;
    for (uint32_t i = 0; i < n->bn.n; i++)
        if (n->bn.child[i].mem)
            n->bn.child[i].mem->parent = n;
}

/* Drops the dead nodes from the lists of decoded ones: before they are
 * freed. */
static void drop_dead(ptrvec *list)
{
    size_t kept = 0;
    for (size_t i = 0; i < list->n; i++)
        if (!((bt_node *)list->v[i])->dead)
            list->v[kept++] = list->v[i];
    list->n = kept;
}

static int has_decoded_child(const bt_node *n)
{
    for (uint32_t i = 0; i < n->bn.n; i++)
        if (n->bn.child[i].mem)
            return 1;
    return 0;
}

void bt_evict_branches(bonsai_db *db)
{
    tree_forget_tail(db);
    for (unsigned level = 1; level < BT_MAX_DEPTH; level++) {
        size_t kept = 0, above = 0;
        for (size_t i = 0; i < db->branches.n; i++) {
            bt_node *n = db->branches.v[i];
            uint32_t idx = UINT32_MAX;
            if (!n->dead && n->level == level && !n->dirty && n->parent &&
                !has_decoded_child(n))
                idx = tree_index_of(n->parent, n);
            if (idx == UINT32_MAX) {
                above += !n->dead && n->level > level;
                db->branches.v[kept++] = n;
                continue;
            }
            n->parent->bn.child[idx].mem = NULL;
            tree_free_node(n);
        }
        db->branches.n = kept;
        if (!above)
            return;
    }
}

void bt_evict_leaves(bonsai_db *db, size_t keep)
{
    if (db->leaves.n <= keep)
        return;
    tree_forget_tail(db);
    size_t kept = 0;
    for (size_t i = 0; i < db->leaves.n; i++) {
        bt_node *n = db->leaves.v[i];
        if (n->dead)
            continue;
        uint32_t idx = n->parent && !n->dirty ? tree_index_of(n->parent, n)
                                               : UINT32_MAX;
        if (idx == UINT32_MAX) {
            db->leaves.v[kept++] = n;
            continue;
        }
        n->parent->bn.child[idx].mem = NULL;
        tree_free_node(n);
    }
    db->leaves.n = kept;
}

static void free_graveyard(bonsai_db *db)
{
    if (db->graveyard.n == 0)
        return;
    tree_forget_tail(db);
    drop_dead(&db->leaves);
    drop_dead(&db->branches);
    for (size_t i = 0; i < db->graveyard.n; i++)
        tree_free_node(db->graveyard.v[i]);
    db->graveyard.n = 0;
}

void bt_release_now(bonsai_db *db)
{
    if (db->op_release.n == 0)
        return; /* most changes: return before saving registers */
    for (size_t i = 0; i < db->op_release.n; i++)
        alloc_release(&db->al, db->op_release.v[i]);
    db->op_release.n = 0;
}

void bt_after_flush(bonsai_db *db)
{
    bt_release_now(db);
    db->op_alloc.n = 0;
    free_graveyard(db);
}

void bt_forget_changes(bonsai_db *db)
{
    tree_moved(db); /* the trees go back to their last images */
    if (!db->cow)
        for (size_t i = 0; i < db->op_alloc.n; i++)
            alloc_put(&db->al, db->op_alloc.v[i]);
    db->op_alloc.n = 0;
    db->op_release.n = 0;
    for (size_t i = 0; i < db->dirty.n; i++)
        ((bt_node *)db->dirty.v[i])->dirty = 0;
    db->dirty.n = 0;
    db->dirty_nodes = 0;
    db->dirty_since_ms = 0;
    db->leaves.n = 0;
    db->branches.n = 0;
    free_graveyard(db);
}

static void mark_dead(bt_node *n)
{
    n->dead = 1;
    if (!n->bn.leaf)
        for (uint32_t i = 0; i < n->bn.n; i++)
            if (n->bn.child[i].mem)
                mark_dead(n->bn.child[i].mem);
}

static void discard_node(bt_node *n)
{
    if (!n->bn.leaf)
        for (uint32_t i = 0; i < n->bn.n; i++)
            if (n->bn.child[i].mem)
                discard_node(n->bn.child[i].mem);
    tree_free_node(n);
}

/* Frees t's decoded nodes, once the lists of decoded nodes hold none. */
void bt_discard(bonsai_db *db, bt_tree *t)
{
    tree_forget_tail(db);
    if (!t->root.mem)
        return;
    mark_dead(t->root.mem);
    drop_dead(&db->leaves);
    drop_dead(&db->branches);
    discard_node(t->root.mem);
    t->root.mem = NULL;
}

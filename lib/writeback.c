/* SPDX-License-Identifier: MIT */
/*
 * writeback.c - writing the changed nodes back (bt_flush): a plan that sizes
 * every image and finds it a home, the only step that can fail, then the
 * images written.
 */
#include "metaslot.h"
#include "tree.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- flush ------------------------------------------------------------- */

/* Points the reference to n at e, remembering the old value for
 * undo_plan (by node, not address: a split while planning moves arrays). */
static int point_parent_at(bonsai_db *db, bt_node *n, bn_ext e)
{
    bt_tree *t = n->tree;
    bn_ext *c = &t->root.ext;
    if (n->parent) {
        uint32_t idx = tree_index_of(n->parent, n);
        if (idx == UINT32_MAX)
            return BONSAI_CORRUPT;
        c = &n->parent->bn.child[idx].ext;
    }
    if (c->pgno == e.pgno && c->npages == e.npages)
        return 0;
    ext_undo *u = vec_room(db->undo, db->nundo, &db->cap_undo, sizeof *u, 64);
    if (!u)
        return BONSAI_NOMEM;
    db->undo = u;
    db->undo[db->nundo++] = (ext_undo){n, t, *c};
    *c = e;
    if (!n->parent) {
        t->record_dirty = 1;
        return 0;
    }
    return tree_mark_dirty(db, n->parent);
}

/* A plan that failed: every reference and run back as it was; changed
 * nodes stay dirty for a later flush. */
static void undo_plan(bonsai_db *db, size_t alloc0, size_t release0)
{
    while (db->nundo > 0) {
        ext_undo *u = &db->undo[--db->nundo];
        /* where the reference is now: a split while planning may have
         * moved the child to a new sibling of its parent, or put a new
         * root above it */
        bt_node *p = u->child->parent;
        uint32_t idx = p ? tree_index_of(p, u->child) : 0;
        if (!p)
            u->tree->root.ext = u->old;
        else if (idx != UINT32_MAX)
            p->bn.child[idx].ext = u->old;
    }
    while (db->op_alloc.n > alloc0)
        alloc_unget(&db->al, db->op_alloc.v[--db->op_alloc.n]);
    /* every run the plan handed out is free again, so these are too */
    while (db->plan_freed.n > 0)
        alloc_take(&db->al, db->plan_freed.v[--db->plan_freed.n]);
    db->op_release.n = release0;
}

/* Without transactions no reader needs a node's old image once the node
 * is decoded (its entries live in its arena): the plan frees the pages at
 * once, so that the node's new image, or another's, may take them in
 * this very write-back.  Else a write-back of many grown leaves would
 * need a new run for each, and the store would grow by what it wrote. */
static int free_for_plan(bonsai_db *db, bn_ext e)
{
    int rc = extvec_push(&db->plan_freed, e);
    if (rc == 0)
        rc = alloc_put(&db->al, e); /* the pages are free even on NOMEM */
    return rc;
}

/* A run of the old image this write-back no longer needs: free now, or
 * after the change (with transactions: after the readers). */
static int release_old(bonsai_db *db, bn_ext e)
{
    return db->cow ? extvec_push(&db->op_release, e) : free_for_plan(db, e);
}

/* The bytes n's image will take: raw, or packed when the store compresses
 * and packing saves bytes (the packed form then waits in n->packed). */
static int image_bytes(bonsai_db *db, bt_node *n, size_t *bytes)
{
    bn_layout_of(&n->bn, &n->plan_lay); /* write_node encodes by it */
    bn_sized(&n->bn, &n->plan_lay);
    tree_note_grow(db, n); /* the image's bound: what the budget counts */
    size_t raw = n->plan_lay.size;
    free(n->packed);
    n->packed = NULL;
    *bytes = raw;
    /* readers refuse to inflate more than pk_raw_limit: store it raw */
    if (db->opt.compression == BONSAI_COMPRESS_NONE || raw > db->pk.max_raw)
        return 0;
    if (db->scratch_cap < raw) {
        uint8_t *b = realloc(db->scratch, raw);
        if (!b)
            return BONSAI_NOMEM;
        db->scratch = b;
        db->scratch_cap = raw;
    }
    size_t len;
    int rc = bn_encode_laid(&n->bn, &n->plan_lay, db->scratch, raw, &len);
    uint8_t *out = rc ? NULL : malloc(raw);
    if (!out)
        return rc ? rc : BONSAI_NOMEM;
    rc = pk_pack(db->opt.compression, db->opt.compression_level, db->scratch,
                 raw, out, raw, &len);
    if (rc) {
        free(out);
        return rc == BONSAI_NOTFOUND ? 0 : rc;
    }
    n->packed = out;
    n->packed_len = (uint32_t)len;
    *bytes = len;
    return 0;
}

/* Phase one for one node: size its image and find where it goes. */
static int plan_node(bonsai_db *db, bt_node *n)
{
    size_t bytes;
    int rc0 = image_bytes(db, n, &bytes);
    if (rc0)
        return rc0;
    uint64_t np = tree_pages_for(db, bytes);
    if (np > BN_MAX_NPAGES)
        return BONSAI_INVALID;
    int own_home = n->has_home &&
                   (!db->cow || (n->home_txn && n->home_txn == db->wtxn_id));
    if (own_home && np == n->home.npages) {
        n->plan = n->home;
        return 0;
    }
    if (own_home && np < n->home.npages && db->cow) {
        /* shrink in place: a node left half empty by a split or deletes
         * gives its tail back rather than keeping it.  Without
         * copy-on-write it moves instead, as a grown node does (its run
         * freed first, then the best fit): a split's left half kept its
         * run and freed a tail shorter than any leaf, and such tails
         * were a tenth of a random fill's store, free but of no use */
        bn_ext tail = {n->home.pgno + np, n->home.npages - (uint32_t)np};
        n->plan = (bn_ext){n->home.pgno, (uint32_t)np};
        int rc = release_old(db, tail);
        return rc ? rc : point_parent_at(db, n, n->plan);
    }
    int free_first = n->has_home && !db->cow;
    if (free_first) {
        int rc = free_for_plan(db, n->home);
        if (rc)
            return rc;
    }
    uint64_t pgno;
    int rc = alloc_get(&db->al, (uint32_t)np, &pgno);
    if (rc && free_first) {
        /* as it was: a split below plans n again from its home */
        db->plan_freed.n--;
        alloc_take(&db->al, n->home);
    }
    if (rc == BONSAI_FULL && n->bn.n >= (n->bn.leaf ? 2u : 4u)) {
        /* no run that long is left: two halves may fit the gaps */
        bt_node *r;
        if ((rc = tree_split(db, n->tree, n, 0, &r)))
            return rc;
        return plan_node(db, n);
    }
    if (rc)
        return rc;
    n->plan = (bn_ext){pgno, (uint32_t)np};
    if ((rc = extvec_push(&db->op_alloc, n->plan))) {
        alloc_unget(&db->al, n->plan);
        return rc;
    }
    if (n->has_home && db->cow &&
        (rc = extvec_push(&db->op_release, n->home)))
        return rc;
    return point_parent_at(db, n, n->plan);
}

static int plan_all(bonsai_db *db)
{
    for (unsigned level = 0; level < BT_MAX_DEPTH; level++) {
        int more = 0;
        /* planning a level may append parents (a level up) to the list */
        for (size_t i = 0; i < db->dirty.n; i++) {
            bt_node *n = db->dirty.v[i];
            if (n->dead || !n->dirty || n->level < level)
                continue;
            if (n->level > level) {
                more = 1;
                continue;
            }
            int rc = plan_node(db, n);
            if (rc)
                return rc;
        }
        if (!more)
            return 0;
    }
    return 0;
}

static void write_node(bonsai_db *db, bt_node *n)
{
    uint8_t *p = db->rg.base + n->plan.pgno * db->page_size;
    size_t cap = (size_t)n->plan.npages * db->page_size, len = 0;
    if (n->packed) {
        len = n->packed_len;
        memcpy(p, n->packed, len);
        free(n->packed);
        n->packed = NULL;
    } else {
        /* cannot fail: laid out and sized in plan_node */
        bn_encode_laid(&n->bn, &n->plan_lay, p, cap, &len);
    }
    memset(p + len, 0, cap - len);
    n->home = n->plan;
    n->has_home = 1;
    n->home_txn = db->wtxn_id;
    n->dirty = 0;
}

int bt_flush(bonsai_db *db)
{
    tree_forget_tail(db); /* a write-back may split what outgrew its estimate */
    tree_moved(db);
    size_t alloc0 = db->op_alloc.n, release0 = db->op_release.n;
    db->nundo = 0;
    db->plan_freed.n = 0;
#ifdef BONSAI_CHECK_HINTS
    /* the room budget's promise (room.h): a cached node takes at most
     * two node runs (its own, its parent's) when written back */
    uint64_t runs0 = alloc_runs_avail(&db->al);
    uint64_t reserved = 2u * db->dirty_nodes;
#endif
    int rc = plan_all(db);
    if (rc) {
        undo_plan(db, alloc0, release0);
        return rc;
    }
#ifdef BONSAI_CHECK_HINTS
    assert(alloc_runs_avail(&db->al) + reserved >= runs0);
#endif
    if (db->dirty.n && (rc = bx_upgrade_header(db)) != 0) { /* first */
        undo_plan(db, alloc0, release0);
        return rc;
    }
    db->plan_freed.n = 0;
    db->nundo = 0;
    for (size_t i = 0; i < db->dirty.n; i++) {
        bt_node *n = db->dirty.v[i];
        if (!n->dead && n->dirty)
            write_node(db, n);
    }
    db->dirty.n = 0;
    db->dirty_nodes = 0;
    db->dirty_since_ms = 0;
    db->full_at_pages = 0;
    db->wb_error = 0;
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * growth.c - what the writer knows of how far its u64 nodes may grow as
 * their groups shift (regroup.h): when a node's estimate may be trusted,
 * and the largest bound any node has, which the room budget counts.
 */
#include "tree.h"

/* Keys put after a node's last bring new differences into the one or two
 * groups there, which the estimate's drift absorbs while they are fewer
 * than a group's worth; keys taken merge differences, which the bound
 * covers for up to 63 of them (GROW_PER_DEL each).  Past either, the
 * node is measured again. */
#define GROW_ENDS_SURE 64u
#define GROW_DELS_SURE 64u

static int is_last(const bt_node *n)
{
    for (; n->parent; n = n->parent) {
        const bt_node *p = n->parent;
        if (p->bn.n == 0 || p->bn.child[p->bn.n - 1].mem != n)
            return 0;
    }
    return 1;
}

int tree_grow_unsure(const bonsai_db *db, const bt_node *n, int64_t guess)
{
    if (n->bn.kind != BONSAI_KEY_U64)
        return 0;
    if (n->bn.grow == BN_GROW_UNKNOWN || n->bn.grow_dels >= GROW_DELS_SURE)
        return 1;
    /* the last leaf takes a sequential load's keys, a group's worth
     * after a group's worth: bt_size_unsure measures it before puts
     * wait, not every 64 keys */
    if (n->bn.grow_ends >= GROW_ENDS_SURE && !is_last(n))
        return 1;
    /* groups that do not shift (counted groups, or none to shift) grow by
     * what each put brings, which the estimate counts: its drift is
     * measured as any node's.  Groups that shift may grow past it. */
    if (n->bn.grow == 0)
        return 0;
    int64_t limit = db->opt.node_bytes;
    int64_t may = (int64_t)n->bn.grow + n->bn.grow_since;
    return n->bn.grow_moves && guess + may + limit / 32 > limit;
}

/* Does the budget's bound miss what n may grow by? */
static int budget_unsure(const bt_node *n)
{
    return n->bn.kind == BONSAI_KEY_U64 && !n->dead &&
           (n->bn.grow == BN_GROW_UNKNOWN || n->bn.grow_dels ||
            n->bn.grow_ends >= GROW_ENDS_SURE);
}

void tree_note_grow(bonsai_db *db, const bt_node *n)
{
    if (n->bn.kind != BONSAI_KEY_U64 || n->bn.grow == BN_GROW_UNKNOWN)
        return;
    uint32_t may = n->bn.grow > n->bn.grow_key ? n->bn.grow : n->bn.grow_key;
    if (may > db->grow_max)
        db->grow_max = may;
}

void tree_note_read(bonsai_db *db, const bt_node *n)
{
    tree_note_grow(db, n);
    tree_forget_unread(db, n->home);
}

void tree_forget_unread(bonsai_db *db, bn_ext e)
{
    pageset *s = &db->unread;
    if (!db->unread_nodes || !ps_inside(s, e) || !ps_has(s, e.pgno))
        return;
    ps_del(s, e.pgno);
    if (--db->unread_nodes == 0)
        ps_free(s); /* every bound known: the set is done with */
}

void tree_note_change(bonsai_db *db, const bt_node *n)
{
    if (budget_unsure(n))
        db->grow_unsure = 1;
}

/* n's exact size; its estimate's drift kept in est_fix. */
static size_t measure(bt_node *n)
{
    size_t size = bn_size_exact(&n->bn);
    n->est_fix = (int64_t)size - (int64_t)n->bn.est;
    n->fix_changes = 0;
    return size;
}

/* measure, its bounds noted in db->grow_max. */
static size_t size_exact(bonsai_db *db, bt_node *n)
{
    size_t size = measure(n);
    tree_note_grow(db, n);
    return size;
}

int tree_outgrows(bonsai_db *db, bt_node *n, size_t *exact)
{
    size_t size = measure(n);
    if (exact)
        *exact = size;
    if (size <= db->opt.node_bytes) {
        tree_note_grow(db, n);
        return 0;
    }
    /* split at once, each part measured alone: the bound of the whole
     * would stay in grow_max, which only rises, and raise the room
     * charged to every waiting put for the rest of the run */
    if (n->bn.kind == BONSAI_KEY_U64) {
        n->bn.grow = BN_GROW_UNKNOWN;
        db->grow_unsure = 1;
    }
    return 1;
}

void bt_size_unsure(bonsai_db *db)
{
    if (!db->grow_unsure)
        return;
    for (size_t i = 0; i < db->dirty.n; i++) {
        bt_node *n = db->dirty.v[i];
        if (budget_unsure(n))
            size_exact(db, n);
    }
    db->grow_unsure = 0;
}

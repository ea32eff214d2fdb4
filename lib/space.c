/* SPDX-License-Identifier: MIT */
/*
 * space.c - free space derived, not trusted (DESIGN.md decision 3).
 *
 * At open the writer walks every tree of the last commit and marks the
 * pages they reach; every other page below the high-water mark is free.
 * The walk (bt_walk) reads branches, and of a leaf whose values it need
 * not read its type and flags: a record whose depth or overflow flag
 * lies about its tree fails the open (BONSAI_CORRUPT), since the pages
 * it hides would be handed out.
 * A reader in another process may still read an older snapshot (its slot
 * in the lock file, readers.h, says which): the writer walks that
 * snapshot's trees too, from the copy of its meta in the slot, and keeps
 * the pages only it reaches out of the free space, as held runs
 * tagged with the snapshot's txn id + 1 (alloc.h), so they are freed once
 * no reader holds a snapshot that old.  A slot's snapshot that does not
 * walk (bounds, checksums) is ignored: its owner was still checking
 * whether that snapshot was the newest, and will find it was not.
 */
#include "space.h"

#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "maps.h"

typedef struct walk_ctx {
    bonsai_db *db;
    const bt_rd *rd;
    pageset *u;
    uint64_t nodes;
    int unread;  /* note u64 nodes in db->unread (the writer's snapshot) */
    int u64;     /* the tree walked has u64 keys */
} walk_ctx;

static int count_node(void *ctx, bn_ext ext, int is_value)
{
    walk_ctx *w = ctx;
    w->nodes += !is_value;
    pageset *unread = &w->db->unread;
    if (w->unread && w->u64 && !is_value && ps_inside(unread, ext) &&
        !ps_has(unread, ext.pgno)) {
        ps_add(unread, ext.pgno);
        w->db->unread_nodes++;
    }
    return 0;
}

static int walk_map_record(void *ctx, const char *name, const bt_tree *t)
{
    (void)name;
    walk_ctx *w = ctx;
    w->u64 = t->kind == BONSAI_KEY_U64;
    int rc = bt_walk(w->db, w->rd, t, w->u, count_node, w);
    w->u64 = 0;
    return rc;
}

/* Marks every page the trees of snapshot m reach (u covers m->end); a
 * page reached twice is BONSAI_CORRUPT.  *nodes = the nodes of its trees.
 * With unread, its u64 nodes go into db->unread too. */
static int mark_snapshot(bonsai_db *db, const bx_meta *m, pk_cache *uc,
                         pageset *u, uint64_t *nodes, int unread)
{
    bt_tree cat = {.kind = BONSAI_KEY_BYTES, .depth = m->cat_depth,
                   .count = m->cat_count};
    cat.root.ext = m->cat_root;
    bt_rd rd = {m->end, uc, NULL, 0, NULL};
    walk_ctx w = {db, &rd, u, 0, unread, 0};
    int rc = bt_walk(db, &rd, &cat, u, count_node, &w);
    if (rc == 0)
        rc = maps_each_record(db, &rd, &cat, walk_map_record, &w);
    *nodes = w.nodes;
    return rc;
}

/* ---- snapshots of readers in other processes ----------------------------- */

typedef struct held {
    bx_meta *v;
    size_t n, cap;
    const bonsai_db *db;
} held;

/* Keeps a live slot's snapshot older than the last commit, if its meta
 * copy is plausible: never trust the lock file. */
static int collect(void *ctx, const bx_meta *m)
{
    held *h = ctx;
    const bonsai_db *db = h->db;
    if (m->txn_id >= db->meta.txn_id || m->end < db->first_pgno ||
        m->end > db->rg.mapped / db->page_size)
        return 0;
    bx_meta *v = vec_room(h->v, h->n, &h->cap, sizeof *v, 8);
    if (!v)
        return BONSAI_NOMEM;
    h->v = v;
    h->v[h->n++] = *m;
    return 0;
}

static int newest_first(const void *a, const void *b)
{
    const bx_meta *x = a, *y = b;
    return x->txn_id < y->txn_id ? 1 : x->txn_id > y->txn_id ? -1 : 0;
}

typedef struct hold_list {
    held_run *v;
    size_t n, cap;
} hold_list;

static int hold(hold_list *l, uint64_t tag, uint64_t pgno, uint64_t npages)
{
    held_run *v = vec_room(l->v, l->n, &l->cap, sizeof *v, 64);
    if (!v)
        return BONSAI_NOMEM;
    l->v = v;
    l->v[l->n++] = (held_run){tag, {pgno, (uint32_t)npages}};
    return 0;
}

/* Pages snapshot s reaches that nothing in u (the last commit, newer
 * snapshots) does: held for s, and marked in u. */
static int hold_snapshot(bonsai_db *db, const bx_meta *s, pageset *u,
                         hold_list *l)
{
    pageset mine;
    int rc = ps_init(&mine, u->first, u->end);
    if (rc)
        return rc;
    pk_cache uc;
    memset(&uc, 0, sizeof uc);
    uint64_t nodes;
    rc = mark_snapshot(db, s, &uc, &mine, &nodes, 0);
    pk_cache_free(&uc);
    if (rc == BONSAI_NOMEM) {
        ps_free(&mine);
        return rc;
    }
    uint64_t run = 0;
    for (uint64_t p = u->first; rc == 0 && p <= s->end; p++) {
        int only = p < s->end && ps_has(&mine, p) && !ps_has(u, p);
        if (only && run < UINT32_MAX) {
            ps_add(u, p);
            run++;
            continue;
        }
        if (run)
            rc = hold(l, s->txn_id + 1, p - run, run);
        run = 0;
        if (only) {
            ps_add(u, p);
            run = 1;
        }
    }
    ps_free(&mine);
    return rc == BONSAI_CORRUPT ? 0 : rc;
}

static int oldest_tag_first(const void *a, const void *b)
{
    const held_run *x = a, *y = b;
    return x->txn < y->txn ? -1 : x->txn > y->txn;
}

/* Holds, newest snapshot first, so a page two snapshots reach waits for
 * the newer one; then hands the holds to the allocator, oldest first. */
static int hold_all(bonsai_db *db, held *h, pageset *u)
{
    qsort(h->v, h->n, sizeof *h->v, newest_first);
    hold_list l = {0};
    int rc = 0;
    for (size_t i = 0; i < h->n && rc == 0; i++)
        rc = hold_snapshot(db, &h->v[i], u, &l);
    if (l.n) /* qsort may not be given NULL, even for nothing */
        qsort(l.v, l.n, sizeof *l.v, oldest_tag_first);
    for (size_t i = 0; i < l.n && rc == 0; i++)
        rc = alloc_hold(&db->al, l.v[i].txn, l.v[i].ext);
    free(l.v);
    return rc;
}

/* ---- the free runs ------------------------------------------------------- */

static int free_gaps(bonsai_db *db, const pageset *u)
{
    uint64_t n = u->end - u->first, run = 0;
    for (uint64_t p = 0; p <= n; p++) {
        int used = p == n || ps_has(u, u->first + p);
        if (!used && run < UINT32_MAX) {
            run++;
            continue;
        }
        if (run) {
            bn_ext e = {u->first + p - run, (uint32_t)run};
            int rc = alloc_put(&db->al, e);
            if (rc)
                return rc;
        }
        run = used ? 0 : 1;
    }
    return 0;
}

static uint64_t highest_end(const bonsai_db *db, const held *h)
{
    uint64_t end = db->meta.end;
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].end > end)
            end = h->v[i].end;
    return end;
}

int space_derive(bonsai_db *db)
{
    held h = {.db = db};
    int rc = 0;
    if (db->rt.fd >= 0)
        rc = rt_each_snapshot(&db->rt, collect, &h);
    /* an older snapshot may reach past the last commit's end */
    pageset u = {0};
    if (rc == 0)
        rc = ps_init(&u, db->first_pgno, highest_end(db, &h));
    if (rc == 0)
        rc = ps_init(&db->unread, db->first_pgno, db->meta.end);
    if (rc == 0)
        rc = mark_snapshot(db, &db->meta, &db->uc, &u, &db->nodes_max, 1);
    if (rc == 0 && h.n) {
        db->al.end = u.end;
        rc = hold_all(db, &h, &u);
    }
    if (rc == 0)
        rc = free_gaps(db, &u);
    ps_free(&u);
    free(h.v);
    return rc;
}

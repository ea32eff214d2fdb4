/* SPDX-License-Identifier: MIT */
/*
 * inspect.c - the inspection API: the shape of a map (bonsai_map_stat).
 * Walks every node of a tree, decoded (the writer's cache) or as an image
 * (reading its header only, plus the values of leaves that may hold
 * overflow references).  Each walk claims the extents it meets in a set
 * of pages (pageset.h): a page met twice is BONSAI_CORRUPT, so a forged
 * tree costs at most its file's pages.  The checks of bonsai-verify are
 * in verify.c.
 */
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "bytes.h"
#include "maps.h"
#include "txn.h"

typedef struct shape {
    bonsai_db *db;
    const bt_rd *rd;
    const bt_tree *t;
    bonsai_map_info *st;
    pageset seen;
    uint64_t leaf_raw;
} shape;

static uint64_t whole_pages(const bonsai_db *db, uint64_t bytes)
{
    return (bytes + db->page_size - 1) / db->page_size * db->page_size;
}

static void count_node(shape *s, int leaf, uint64_t raw, uint64_t stored,
                       uint64_t pages)
{
    if (leaf) {
        s->st->leaf_nodes++;
        s->leaf_raw += raw;
    } else {
        s->st->branch_nodes++;
    }
    s->st->raw_bytes += raw;
    s->st->stored_bytes += stored;
    s->st->page_bytes += pages;
}

static int count_overflow(void *ctx, bn_ext e, int is_value)
{
    shape *s = ctx;
    if (!is_value)
        return 0;
    s->st->overflow_values++;
    s->st->overflow_bytes += (uint64_t)e.npages * s->db->page_size;
    return 0;
}

static int walk_mem(shape *s, const bt_node *n);

static int walk_ref(shape *s, bn_child ref, unsigned level)
{
    if (ref.mem)
        return walk_mem(s, ref.mem);
    const bonsai_db *db = s->db;
    if (ps_claim(&s->seen, ref.ext))
        return BONSAI_CORRUPT;
    const uint8_t *stored = db->rg.base + ref.ext.pgno * db->page_size;
    const uint8_t *img;
    size_t avail;
    bn_info info;
    int rc = pk_view(s->rd->uc, &db->pk, ref.ext.pgno, stored,
                     (size_t)ref.ext.npages * db->page_size, &img, &avail);
    if (rc == 0)
        rc = bn_img_check(img, avail, s->t->kind, 0, &info);
    if (rc)
        return rc;
    int leaf = info.type == BN_TYPE_LEAF;
    if (leaf != (level == 1))
        return BONSAI_CORRUPT;
    uint32_t stored_len = img == stored ? info.length : get_le32(stored + 4);
    count_node(s, leaf, info.length, stored_len,
               (uint64_t)ref.ext.npages * db->page_size);
    if (leaf)
        return 0;
    /* the children first: walking them reuses the unpack cache that may
     * hold this node's image */
    bn_child *kids = calloc(info.count, sizeof *kids);
    if (!kids)
        return BONSAI_NOMEM;
    for (uint32_t i = 0; i < info.count && rc == 0; i++)
        rc = bn_img_child(img, &info, i, &kids[i].ext);
    for (uint32_t i = 0; i < info.count && rc == 0; i++)
        rc = walk_ref(s, kids[i], level - 1);
    free(kids);
    return rc;
}

static int walk_mem(shape *s, const bt_node *n)
{
    const bonsai_db *db = s->db;
    uint64_t raw = n->bn.est, stored = raw, pages = whole_pages(db, raw);
    if (n->has_home && ps_claim(&s->seen, n->home))
        return BONSAI_CORRUPT;
    if (n->has_home && !n->dirty) {
        /* written: its image at home tells the stored size */
        const uint8_t *img = db->rg.base + n->home.pgno * db->page_size;
        stored = get_le32(img + 4);
        pages = (uint64_t)n->home.npages * db->page_size;
        if (pk_is_packed(img))
            raw = get_le32(img + 12);
        else
            raw = stored;
    }
    /* not written yet: its estimate stands for its image */
    count_node(s, n->bn.leaf, raw, stored, pages);
    int rc = 0;
    for (uint32_t i = 0; !n->bn.leaf && i < n->bn.n && rc == 0; i++)
        rc = walk_ref(s, n->bn.child[i], n->level);
    return rc;
}

typedef struct stat_arg {
    bonsai_map map;
    bonsai_map_info *st;
} stat_arg;

static int stat_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    stat_arg *a = argp;
    bt_tree *t;
    bt_rd rd;
    int rc = txn_tree(db, txn, a->map, &t, &rd);
    if (rc)
        return rc;
    bonsai_map_info *st = a->st;
    memset(st, 0, sizeof *st);
    st->entries = t->count;
    st->depth = t->depth;
    if (t->depth == 0)
        return 0;
    if (rd.end < db->first_pgno)
        return BONSAI_CORRUPT;
    shape s = {db, &rd, t, st, {0}, 0};
    if ((rc = ps_init(&s.seen, db->first_pgno, rd.end)))
        return rc;
    rc = walk_ref(&s, t->root, t->depth);
    ps_free(&s.seen);
    if (rc)
        return rc;
    if (t->flags & TREE_F_OVERFLOW)
        rc = bt_walk(db, &rd, t, NULL, count_overflow, &s);
    if (st->leaf_nodes)
        st->leaf_fill = (double)s.leaf_raw / (double)st->leaf_nodes /
                        db->opt.node_bytes;
    return rc;
}

int bonsai_map_stat(bonsai_txn *txn, bonsai_map map, bonsai_map_info *st)
{
    if (!map || !map->db || !st || (txn && txn->db != map->db))
        return BONSAI_INVALID;
    stat_arg a = {map, st};
    return txn_read(map->db, txn, stat_fn, &a);
}

/* SPDX-License-Identifier: MIT */
/*
 * salvage.c - the salvage walk (salvage.h): every entry of a tree that
 * can still be read, in key order, and a report for each part that
 * cannot.
 *
 * Nodes are decoded as readers decode them (pk_view, bn_decode_frozen:
 * header, checksum, sections, keys strictly increasing within a node).
 * The range each subtree may hold is its parent's separators narrowed by
 * the ranges above, so the ranges of siblings never overlap and an entry
 * handed on always follows the one before, however the file is forged.
 */
#include "salvage.h"

#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "maps.h"
#include "pageset.h"

#define MAX_DEPTH 32u

struct salvage {
    bonsai_db *db;
    bt_rd rd;
    bx_meta snap;          /* the snapshot read: the catalog's root */
    pageset seen;          /* every extent read so far */
    sv_loss_fn loss;
    void *ctx;
    /* the tree being walked */
    const char *map;
    unsigned kind;
    uint64_t leaf;         /* the page of the leaf being read */
    sv_entry_fn entry;
    void *ectx;
    bn_node node[MAX_DEPTH]; /* the node read at each level, leaves at 0 */
};

/* The keys a subtree may hold: lo <= key < hi (NULL: no bound). */
typedef struct range {
    const bn_key *lo, *hi;
} range;

static void report(salvage *s, int what, uint64_t pgno, const char *why,
                   range r, uint64_t entries)
{
    sv_loss l = {what, s->map, pgno, why, s->kind, r.lo, r.hi, entries};
    if (s->loss)
        s->loss(s->ctx, &l);
}

/* ---- reading a node ----------------------------------------------------- */

/* Why an extent cannot be read, or NULL: the pass claims it. */
static const char *claim(salvage *s, bn_ext e)
{
    if (!ps_inside(&s->seen, e))
        return "it lies outside the store's pages";
    if (ps_claim(&s->seen, e))
        return "its pages were already reached from another node";
    return NULL;
}

/* Why a raw image that bn_decode_frozen refused cannot be read. */
static const char *undecodable(const uint8_t *img, size_t avail,
                               unsigned kind)
{
    bn_info info;
    if (bn_img_check(img, avail, kind, 0, &info))
        return "bad node header";
    if (bn_img_check(img, avail, kind, 1, &info))
        return "checksum mismatch";
    return "malformed key or value section";
}

/* Why a node decoded at level does not belong there, or NULL. */
static const char *misplaced(const bn_node *n, unsigned level)
{
    if (n->leaf != (level == 1))
        return level == 1 ? "a branch where a leaf belongs"
                          : "a leaf where a branch belongs";
    if (!n->leaf && n->n == 0)
        return "a branch without children";
    return NULL;
}

/* Decodes the node at e into n; *why says why it cannot be read (NULL:
 * it can).  0 or BONSAI_NOMEM. */
static int read_node(salvage *s, bn_ext e, unsigned level, bn_node *n,
                     const char **why)
{
    const bonsai_db *db = s->db;
    const uint8_t *img;
    size_t avail;
    *why = NULL;
    int rc = pk_view(s->rd.uc, &db->pk, e.pgno,
                     db->rg.base + e.pgno * db->page_size,
                     (size_t)e.npages * db->page_size, &img, &avail);
    if (rc == BONSAI_CORRUPT)
        *why = "its packed image cannot be unpacked";
    if (rc)
        return rc == BONSAI_CORRUPT ? 0 : rc;
    rc = bn_decode_frozen(img, avail, s->kind, n);
    if (rc == BONSAI_CORRUPT)
        *why = undecodable(img, avail, s->kind);
    if (rc)
        return rc == BONSAI_CORRUPT ? 0 : rc;
    *why = misplaced(n, level);
    return 0;
}

/* ---- walking ------------------------------------------------------------ */

static int within(unsigned kind, bn_key k, range r)
{
    return (!r.lo || !bt_key_less(kind, k, *r.lo)) &&
           (!r.hi || bt_key_less(kind, k, *r.hi));
}

/* Hands entry i of leaf n on, or reports its value lost. */
static int emit(salvage *s, const bn_node *n, uint32_t i, bn_key k)
{
    const uint8_t *p;
    uint32_t len;
    unsigned vflag;
    bonsai_val v;
    bn_ext run;
    const char *why = NULL;
    bn_value_at(n, i, &p, &len, &vflag);
    if (bt_value_checked(s->db, s->rd.end, p, len, vflag, &v, &run))
        why = "its overflow value is damaged";
    else if (run.npages && ps_claim(&s->seen, run))
        why = "its overflow value's pages were already reached";
    if (!why)
        return s->entry(s->ectx, k, v);
    report(s, SV_VALUE, s->leaf, why, (range){&k, NULL}, 0);
    return 0;
}

static int walk_leaf(salvage *s, const bn_node *n, uint64_t pgno, range r)
{
    uint64_t outside = 0;
    s->leaf = pgno;
    for (uint32_t i = 0; i < n->n; i++) {
        bn_key k = bn_key_at(n, i);
        if (!within(s->kind, k, r)) {
            outside++;
            continue;
        }
        int rc = emit(s, n, i, k);
        if (rc)
            return rc;
    }
    if (outside)
        report(s, SV_OUTSIDE, pgno, "outside the separators its parents "
               "give", r, outside);
    return 0;
}

/* The range of child i of branch n within r; lo and hi hold the
 * separators it points at. */
static range child_range(unsigned kind, const bn_node *n, uint32_t i,
                         range r, bn_key *lo, bn_key *hi)
{
    range c = r;
    if (i > 0) {
        *lo = bn_key_at(n, i);
        if (!c.lo || bt_key_less(kind, *c.lo, *lo))
            c.lo = lo;
    }
    if (i + 1 < n->n) {
        *hi = bn_key_at(n, i + 1);
        if (!c.hi || bt_key_less(kind, *hi, *c.hi))
            c.hi = hi;
    }
    return c;
}

static int walk_node(salvage *s, bn_ext e, unsigned level, range r);

static int walk_branch(salvage *s, const bn_node *n, unsigned level,
                       range r)
{
    for (uint32_t i = 0; i < n->n; i++) {
        bn_key lo, hi;
        range c = child_range(s->kind, n, i, r, &lo, &hi);
        int rc = walk_node(s, n->child[i].ext, level - 1, c);
        if (rc)
            return rc;
    }
    return 0;
}

/* The subtree at e, at level (1: a leaf), whose keys lie in r. */
static int walk_node(salvage *s, bn_ext e, unsigned level, range r)
{
    bn_node *n = &s->node[level - 1];
    const char *why = claim(s, e);
    int rc = why ? 0 : read_node(s, e, level, n, &why);
    if (rc || why) {
        if (why)
            report(s, SV_NODE, e.pgno, why, r, 0);
        return rc;
    }
    return level == 1 ? walk_leaf(s, n, e.pgno, r)
                      : walk_branch(s, n, level, r);
}

static int walk_tree(salvage *s, const char *map, const bt_tree *t,
                     sv_entry_fn entry, void *ctx)
{
    s->map = map;
    s->kind = t->kind;
    s->entry = entry;
    s->ectx = ctx;
    range all = {NULL, NULL};
    int rc = 0;
    if (t->depth > MAX_DEPTH)
        report(s, SV_NODE, t->root.ext.pgno, "its depth exceeds 32", all, 0);
    else if (t->depth)
        rc = walk_node(s, t->root.ext, t->depth, all);
    s->entry = NULL; /* ctx may be the caller's local */
    s->ectx = NULL;
    return rc;
}

/* ---- the catalog -------------------------------------------------------- */

typedef struct listing {
    salvage *s;
    sv_map *v;
    size_t n, cap;
} listing;

static int add_map(listing *l, bn_key name, const bt_tree *t)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        sv_map *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return BONSAI_NOMEM;
        l->v = v;
        l->cap = cap;
    }
    char *copy = malloc(name.len + 1);
    if (!copy)
        return BONSAI_NOMEM;
    memcpy(copy, name.b, name.len);
    copy[name.len] = 0;
    l->v[l->n++] = (sv_map){copy, *t};
    return 0;
}

/* A catalog entry: a map's name and its record. */
static int on_record(void *ctx, bn_key name, bonsai_val val)
{
    listing *l = ctx;
    bt_tree t;
    if (name.len == 0 || name.len > BONSAI_MAX_NAME ||
        memchr(name.b, 0, name.len) || val.size != BX_RECORD_SIZE ||
        maps_tree_of_record(val.data, BX_RECORD_SIZE, &t)) {
        report(l->s, SV_RECORD, l->s->leaf, "malformed name or record",
               (range){&name, NULL}, 0);
        return 0;
    }
    return add_map(l, name, &t);
}

int sv_maps(salvage *s, sv_map **maps, size_t *n)
{
    bt_tree cat = {.kind = BONSAI_KEY_BYTES, .depth = s->snap.cat_depth,
                   .count = s->snap.cat_count};
    cat.root.ext = s->snap.cat_root;
    listing l = {s, NULL, 0, 0};
    int rc = walk_tree(s, "", &cat, on_record, &l);
    if (rc) {
        sv_maps_free(l.v, l.n);
        l = (listing){0};
    }
    *maps = l.v;
    *n = l.n;
    return rc;
}

void sv_maps_free(sv_map *maps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(maps[i].name);
    free(maps);
}

/* ---- a pass ------------------------------------------------------------- */

int sv_walk(salvage *s, const sv_map *m, sv_entry_fn entry, void *ctx)
{
    return walk_tree(s, m->name, &m->t, entry, ctx);
}

int sv_begin(bonsai_txn *txn, sv_loss_fn loss, void *ctx, salvage **out)
{
    *out = NULL;
    if (!txn || !txn->rdonly || txn->failed)
        return BONSAI_INVALID;
    bonsai_db *db = txn->db;
    if (txn->snap.end < db->first_pgno)
        return BONSAI_CORRUPT;
    salvage *s = calloc(1, sizeof *s);
    if (!s)
        return BONSAI_NOMEM;
    s->db = db;
    s->rd = (bt_rd){txn->snap.end, &txn->uc, NULL, 0, NULL};
    s->snap = txn->snap;
    s->loss = loss;
    s->ctx = ctx;
    for (unsigned i = 0; i < MAX_DEPTH; i++)
        bn_init(&s->node[i], BONSAI_KEY_BYTES, i == 0);
    if (ps_init(&s->seen, db->first_pgno, txn->snap.end)) {
        free(s);
        return BONSAI_NOMEM;
    }
    *out = s;
    return 0;
}

void sv_end(salvage *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < MAX_DEPTH; i++)
        bn_clear(&s->node[i]);
    ps_free(&s->seen);
    free(s);
}

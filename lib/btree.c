/* SPDX-License-Identifier: MIT */
/*
 * btree.c - search, insert, delete, split, merge and flush.
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
 *
 * Overflow value: a run of pages holding
 *   0 u8 type 3   1 u8 zero   2 u16 zero   4 u32 crc32c of the value bytes
 *   8 u64 length  16 the value bytes
 * referenced from its leaf by 20 bytes: u64 pgno, u32 npages, u64 length.
 */
#include "btree.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "cache.h"
#include "checksum.h"

#define OVF_HEADER 16u
#define OVF_TYPE 3u
#define MAX_DEPTH 32u

/* ---- extents and images ------------------------------------------------ */

static int ext_ok(const bonsai_db *db, uint64_t end, bn_ext e)
{
    return e.npages >= 1 && e.pgno >= db->first_pgno && e.pgno < end &&
           e.npages <= end - e.pgno;
}

static const uint8_t *ext_ptr(const bonsai_db *db, bn_ext e)
{
    return db->rg.base + e.pgno * db->page_size;
}

static uint32_t pages_for(const bonsai_db *db, uint64_t bytes)
{
    return (uint32_t)((bytes + db->page_size - 1) / db->page_size);
}

/* A node as either its decoded form or its (unpacked) image. */
typedef struct nview {
    bn_node *mem;
    const uint8_t *img;
    size_t avail;
    bn_info info;
} nview;

static int view_of(bonsai_db *db, const bt_rd *rd, unsigned kind,
                   bn_child ref, nview *v)
{
    v->mem = ref.mem;
    if (ref.mem)
        return 0;
    if (!ext_ok(db, rd->end, ref.ext))
        return BONSAI_CORRUPT;
    int rc = pk_view(rd->uc, &db->pk, ref.ext.pgno, ext_ptr(db, ref.ext),
                     (size_t)ref.ext.npages * db->page_size, &v->img,
                     &v->avail);
    if (rc)
        return rc;
    return bn_img_check(v->img, v->avail, kind, 0, &v->info);
}

static int view_leaf(const nview *v)
{
    return v->mem ? v->mem->leaf : v->info.type == BN_TYPE_LEAF;
}

static uint32_t view_count(const nview *v)
{
    return v->mem ? v->mem->n : v->info.count;
}

static int view_search(const nview *v, unsigned kind, bn_key key,
                       uint32_t *idx, int *found)
{
    if (v->mem) {
        *idx = bn_search(v->mem, key, found);
        return 0;
    }
    return bn_img_search(v->img, &v->info, kind, key, idx, found);
}

static int view_child(const nview *v, uint32_t idx, bn_child *out)
{
    if (v->mem) {
        *out = v->mem->child[idx];
        return 0;
    }
    out->mem = NULL;
    return bn_img_child(v->img, &v->info, idx, &out->ext);
}

/* Copies key idx into buf so it outlives the view. */
static int view_key(const nview *v, unsigned kind, uint32_t idx,
                    uint8_t *buf, bn_key *out)
{
    if (!v->mem)
        return bn_img_key(v->img, &v->info, kind, idx, buf, out);
    *out = bn_key_at(v->mem, idx);
    if (kind == BONSAI_KEY_BYTES) {
        memcpy(buf, out->b, out->len);
        out->b = buf;
    }
    return 0;
}

int bt_key_less(unsigned kind, bn_key a, bn_key b)
{
    if (kind == BONSAI_KEY_U64)
        return a.u < b.u;
    return key_below(a.b, a.len, b.b, b.len);
}

/* ---- overflow values --------------------------------------------------- */

static int ovf_write(bonsai_db *db, const uint8_t *val, uint32_t vlen,
                     uint8_t ref[BT_OVF_REF])
{
    uint32_t np = pages_for(db, (uint64_t)OVF_HEADER + vlen);
    uint64_t pgno;
    int rc = alloc_get(&db->al, np, &pgno);
    if (rc)
        return rc;
    bn_ext e = {pgno, np};
    rc = extvec_push(&db->op_alloc, e);
    if (rc) {
        alloc_put(&db->al, e);
        return rc;
    }
    uint8_t *p = db->rg.base + pgno * db->page_size;
    memset(p, 0, OVF_HEADER);
    p[0] = OVF_TYPE;
    put_le32(p + 4, bonsai_crc32c(0, val, vlen));
    put_le64(p + 8, vlen);
    memcpy(p + OVF_HEADER, val, vlen);
    put_le64(ref, pgno);
    put_le32(ref + 8, np);
    put_le64(ref + 12, vlen);
    return 0;
}

static int ovf_ext(const uint8_t *ref, uint32_t len, bn_ext *e,
                   uint64_t *vlen)
{
    if (len != BT_OVF_REF)
        return BONSAI_CORRUPT;
    e->pgno = get_le64(ref);
    e->npages = get_le32(ref + 8);
    *vlen = get_le64(ref + 12);
    return 0;
}

int bt_value(bonsai_db *db, uint64_t end, const uint8_t *v, uint32_t len,
             unsigned vflag, bonsai_val *out)
{
    if (!(vflag & BN_VAL_OVERFLOW)) {
        out->data = v;
        out->size = len;
        return 0;
    }
    bn_ext e;
    uint64_t vlen;
    if (ovf_ext(v, len, &e, &vlen) || !ext_ok(db, end, e))
        return BONSAI_CORRUPT;
    const uint8_t *p = ext_ptr(db, e);
    if (p[0] != OVF_TYPE || get_le64(p + 8) != vlen ||
        vlen > (uint64_t)e.npages * db->page_size - OVF_HEADER)
        return BONSAI_CORRUPT;
    out->data = p + OVF_HEADER;
    out->size = (size_t)vlen;
    return 0;
}

/* A salvage reads only what its checksums vouch for: a value of flipped
 * bytes would pass for a good one. */
int bt_value_checked(bonsai_db *db, uint64_t end, const uint8_t *v,
                     uint32_t len, unsigned vflag, bonsai_val *out,
                     bn_ext *run)
{
    *run = (bn_ext){0, 0};
    int rc = bt_value(db, end, v, len, vflag, out);
    if (rc || !(vflag & BN_VAL_OVERFLOW))
        return rc;
    uint64_t vlen;
    ovf_ext(v, len, run, &vlen);
    const uint8_t *p = ext_ptr(db, *run);
    if (bonsai_crc32c(0, out->data, out->size) != get_le32(p + 4))
        return BONSAI_CORRUPT;
    return 0;
}

/* ---- lookups ----------------------------------------------------------- */

int bt_get(bonsai_db *db, const bt_rd *rd, const bt_tree *t, bn_key key,
           bonsai_val *val)
{
    if (t->depth == 0)
        return BONSAI_NOTFOUND;
    bn_child ref = t->root;
    for (unsigned level = t->depth; level > 0; level--) {
        nview v;
        uint32_t idx;
        int found, rc = view_of(db, rd, t->kind, ref, &v);
        if (rc)
            return rc;
        if (view_leaf(&v) != (level == 1))
            return BONSAI_CORRUPT;
        if ((rc = view_search(&v, t->kind, key, &idx, &found)))
            return rc;
        if (level > 1) {
            if ((rc = view_child(&v, idx, &ref)))
                return rc;
            continue;
        }
        if (!found)
            return BONSAI_NOTFOUND;
        const uint8_t *p;
        uint32_t len;
        unsigned vflag;
        if (v.mem)
            bn_value_at(v.mem, idx, &p, &len, &vflag);
        else if ((rc = bn_img_value(v.img, &v.info, idx, &p, &len, &vflag)))
            return rc;
        return bt_value(db, rd->end, p, len, vflag, val);
    }
    return BONSAI_CORRUPT;
}

/* ---- decoded nodes of the writer --------------------------------------- */

static bn_node *new_node(bt_tree *t, int leaf, unsigned level)
{
    bn_node *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    bn_init(n, t->kind, leaf);
    n->tree = t;
    n->level = (uint8_t)level;
    return n;
}

static void free_node(bn_node *n)
{
    bn_clear(n);
    free(n->packed);
    free(n);
}

static int mark_dirty(bonsai_db *db, bn_node *n)
{
    if (n->dirty)
        return 0;
    cache_note_dirty(db);
    int rc = ptrvec_push(&db->dirty, n);
    if (rc)
        return rc;
    n->dirty = 1;
    db->dirty_nodes++;
    return 0;
}

/* Unlinks nothing: the caller already removed n from its tree. */
static int kill_node(bonsai_db *db, bn_node *n)
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
static int decode_image(bonsai_db *db, bn_ext e, unsigned kind, bn_node *n)
{
    const uint8_t *img = ext_ptr(db, e);
    size_t avail = (size_t)e.npages * db->page_size;
    if (avail < BN_HEADER_SIZE || !pk_is_packed(img))
        return bn_decode(img, avail, kind, n);
    uint32_t raw_len;
    int rc = pk_check(img, avail, &db->pk, &raw_len);
    if (rc)
        return rc;
    uint8_t *raw = malloc(raw_len);
    if (!raw)
        return BONSAI_NOMEM;
    rc = pk_unpack(img, raw, raw_len);
    if (rc == 0)
        rc = bn_decode(raw, raw_len, kind, n);
    free(raw);
    return rc;
}

static int decode_node(bonsai_db *db, bt_tree *t, bn_ext e, unsigned level,
                       bn_node *parent, bn_node **out)
{
    if (!ext_ok(db, db->al.end, e))
        return BONSAI_CORRUPT;
    bn_node *n = new_node(t, level == 0, level);
    if (!n)
        return BONSAI_NOMEM;
    int rc = decode_image(db, e, t->kind, n);
    if (rc == 0 && n->leaf != (level == 0))
        rc = BONSAI_CORRUPT;
    if (rc == 0 && n->leaf)
        rc = ptrvec_push(&db->leaves, n);
    if (rc) {
        free_node(n);
        return rc;
    }
    n->level = (uint8_t)level;
    n->home = e;
    n->has_home = 1;
    /* written earlier by this very transaction: its own to rewrite */
    if (db->cow && alloc_is_fresh(&db->al, e.pgno))
        n->home_txn = db->wtxn_id;
    n->parent = parent;
    *out = n;
    return 0;
}

static int load_root(bonsai_db *db, bt_tree *t, bn_node **out)
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

static int load_child(bonsai_db *db, bt_tree *t, bn_node *parent,
                      uint32_t idx, bn_node **out)
{
    bn_child *c = &parent->child[idx];
    if (!c->mem) {
        int rc = decode_node(db, t, c->ext, parent->level - 1u, parent,
                             &c->mem);
        if (rc)
            return rc;
    }
    *out = c->mem;
    return 0;
}

/* Index of child in parent, found by its first key and checked. */
static uint32_t slot_of(const bn_node *parent, const bn_node *child)
{
    if (child->n > 0) {
        int found;
        uint32_t g = bn_search(parent, bn_key_at(child, 0), &found);
        for (uint32_t i = g ? g - 1 : 0; i <= g + 1 && i < parent->n; i++)
            if (parent->child[i].mem == child)
                return i;
    }
    for (uint32_t i = 0; i < parent->n; i++)
        if (parent->child[i].mem == child)
            return i;
    return UINT32_MAX;
}

static void adopt_children(bn_node *n)
{
    if (n->leaf)
        return;
    for (uint32_t i = 0; i < n->n; i++)
        if (n->child[i].mem)
            n->child[i].mem->parent = n;
}

/* ---- insert and split -------------------------------------------------- */

/* Does n's image outgrow node_bytes?  The codec's estimate drifts from
 * the exact size (it can undercount u64 groups mixing runs and jumps), so
 * the drift measured at the last exact sizing corrects it, and the exact
 * size is taken again every 64 changes or when the corrected estimate is
 * within 1/32 of the limit: O(1) a change amortised. */
static int too_big(const bonsai_db *db, bn_node *n)
{
    if (n->n > db->opt.node_entries)
        return 1;
    int64_t limit = db->opt.node_bytes;
    int64_t guess = (int64_t)n->est + n->est_fix;
    int64_t near = limit / 32;
    /* the estimate drifts a little with each change: measure exactly when
     * near the limit, or after more changes the farther from it */
    int64_t gap = guess < limit ? limit - guess : guess - limit;
    /* fix_changes < 64 * (gap / near), without a division (one a change
     * cost a sequential put 15 %) */
    if (gap > near && (++n->fix_changes < 64 ||
                       ((int64_t)(n->fix_changes >> 6) + 1) * near <= gap))
        return guess > limit;
    size_t exact = bn_encoded_size(n);
    n->est_fix = (int64_t)exact - (int64_t)n->est;
    n->fix_changes = 0;
    return exact > db->opt.node_bytes;
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

static int new_root_above(bonsai_db *db, bt_tree *t, bn_node *n)
{
    bn_node *root = new_node(t, 0, n->level + 1u);
    if (!root)
        return BONSAI_NOMEM;
    bn_child c = {t->root.ext, n};
    int rc = bn_insert_child(root, 0, lowest_key(), c);
    if (rc == 0)
        rc = mark_dirty(db, root);
    if (rc) {
        free_node(root);
        return rc;
    }
    n->parent = root;
    t->root = (bn_child){{0, 0}, root};
    t->depth++;
    t->record_dirty = 1;
    return 0;
}

/* Where a too big node splits: in half, or after an append as late as
 * keeps the left node within node_bytes (the sizes of its entries taken
 * as even), so that sequential loads leave full nodes behind. */
static uint32_t split_point(const bonsai_db *db, const bn_node *n, int append)
{
    if (!append)
        return n->n / 2;
    /* too many entries, bytes far from the limit: the left node keeps the
     * most it may, without a pass over every key to size it exactly */
    int64_t guess = (int64_t)n->est + n->est_fix;
    if (n->n > db->opt.node_entries &&
        guess + db->opt.node_bytes / 32 < db->opt.node_bytes)
        return db->opt.node_entries >= n->n / 2 ? db->opt.node_entries
                                                : n->n / 2;
    uint64_t exact = bn_encoded_size(n);
    uint64_t keep = (uint64_t)n->n * db->opt.node_bytes / (exact ? exact : 1);
    if (keep > db->opt.node_entries)
        keep = db->opt.node_entries;
    if (keep >= n->n)
        keep = n->n - 1;
    return keep < n->n / 2 ? n->n / 2 : (uint32_t)keep;
}

static int split(bonsai_db *db, bt_tree *t, bn_node *n, int append,
                 bn_node **right_out)
{
    uint32_t at = split_point(db, n, append);
    bn_node *r = new_node(t, n->leaf, n->level);
    if (!r)
        return BONSAI_NOMEM;
    int rc = bn_move(r, 0, n, at, n->n);
    if (rc) {
        free_node(r);
        return rc;
    }
    adopt_children(r);
    if (r->leaf && (rc = ptrvec_push(&db->leaves, r)))
        goto orphan;
    if (!n->parent && (rc = new_root_above(db, t, n)))
        goto orphan;
    uint8_t buf[BONSAI_MAX_KEY];
    bn_key sep = bn_key_at(r, 0);
    if (t->kind == BONSAI_KEY_BYTES && r->leaf)
        sep = separator(bn_key_at(n, n->n - 1), sep, buf);
    bn_node *p = n->parent;
    uint32_t idx = slot_of(p, n);
    if (idx == UINT32_MAX) {
        rc = BONSAI_CORRUPT;
        goto orphan;
    }
    /* keys below key[0] may reach child 0 (p, or a node above it, took
     * in the range of an emptied node before it): key[0] then gives way
     * to the lowest key, as a node's keys must increase */
    if (idx == 0 && !bt_key_less(t->kind, bn_key_at(p, 0), sep) &&
        (rc = bn_set_key(p, 0, lowest_key())))
        goto orphan;
    bn_child c = {{0, 0}, r};
    if ((rc = bn_insert_child(p, idx + 1, sep, c)))
        goto orphan;
    r->parent = p;
    *right_out = r;
    if ((rc = mark_dirty(db, n)) || (rc = mark_dirty(db, r)))
        return rc;
    return mark_dirty(db, p);
orphan:
    /* the tree is now inconsistent; the caller rolls it back */
    r->dead = 1;
    ptrvec_push(&db->graveyard, r);
    return rc;
}

/* *split is set when n split at least once (its parent gained a child). */
static int split_until_fits(bonsai_db *db, bt_tree *t, bn_node *n,
                            int append, int *split_any)
{
    /* a branch keeps two children a side, or huge separators would stack
     * up one-child branches without end */
    uint32_t least = n->leaf ? 2 : 4;
    while (n->n >= least && too_big(db, n)) {
        bn_node *r;
        int rc = split(db, t, n, append, &r);
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
static int fit_upwards(bonsai_db *db, bt_tree *t, bn_node *n, int append)
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
                              bn_node **leaf, bn_key *bound, int *has_bound)
{
    bn_node *n = NULL;
    if (t->depth == 0) {
        n = new_node(t, 1, 0);
        if (!n)
            return BONSAI_NOMEM;
        int rc = ptrvec_push(&db->leaves, n);
        if (rc) {
            free_node(n);
            return rc;
        }
        t->root = (bn_child){{0, 0}, n};
        t->depth = 1;
        t->record_dirty = 1;
        *leaf = n;
        /* dirty at once: an empty tree's new root must be written */
        return mark_dirty(db, n);
    }
    int rc = load_root(db, t, &n);
    while (rc == 0 && !n->leaf) {
        int found;
        uint32_t idx = bn_search(n, key, &found);
        if (bound && idx + 1 < n->n) {
            *bound = bn_key_at(n, idx + 1); /* tighter the deeper */
            *has_bound = 1;
        }
        rc = load_child(db, t, n, idx, &n);
    }
    *leaf = n;
    return rc;
}

static int touch_leaf(bonsai_db *db, bt_tree *t, bn_key key, bn_node **leaf)
{
    return touch_leaf_bounded(db, t, key, leaf, NULL, NULL);
}

static int release_value(bonsai_db *db, bn_node *leaf, uint32_t idx)
{
    const uint8_t *v;
    uint32_t len;
    unsigned vflag;
    bn_value_at(leaf, idx, &v, &len, &vflag);
    if (!(vflag & BN_VAL_OVERFLOW))
        return 0;
    bn_ext e;
    uint64_t vlen;
    if (ovf_ext(v, len, &e, &vlen))
        return BONSAI_CORRUPT;
    return extvec_push(&db->op_release, e);
}

uint32_t bt_put_worst_slots(const bt_tree *t)
{
    return 2u * (t->depth + 1u) + 2u;
}

uint32_t bt_del_worst_slots(const bt_tree *t)
{
    return 2u * (t->depth + 1u);
}

int bt_put_slots(bonsai_db *db, bt_tree *t, bn_key key, uint32_t vlen,
                 uint32_t *slots)
{
    *slots = bt_put_worst_slots(t);
    if (db->cow || t->depth == 0)
        return 0;
    bn_node *leaf;
    int rc = touch_leaf(db, t, key, &leaf);
    if (rc)
        return rc;
    *slots = bt_leaf_put_slots(db, t, leaf, key, vlen);
    return 0;
}

uint32_t bt_leaf_put_slots(const bonsai_db *db, const bt_tree *t,
                           const bn_node *leaf, bn_key key, uint32_t vlen)
{
    if (db->cow)
        return bt_put_worst_slots(t);
    size_t kbytes = t->kind == BONSAI_KEY_U64 ? 10 : key.len;
    size_t grown = leaf->est + kbytes + (vlen > db->inline_max ? BT_OVF_REF
                                                                : vlen) + 16;
    int splits = leaf->n + 1 > db->opt.node_entries ||
                 grown >= (size_t)db->opt.node_bytes * 7 / 8;
    /* a dirty leaf is counted already; a clean one must fit its home */
    int fits = leaf->dirty || (leaf->has_home &&
                               pages_for(db, grown) <= leaf->home.npages);
    return !splits && fits ? 0 : bt_put_worst_slots(t);
}

/* Does key go after the last entry of leaf n, which has one? */
static int after_last(const bt_tree *t, const bn_node *n, bn_key key)
{
    if (t->kind == BONSAI_KEY_U64)
        return n->k64[n->n - 1] < key.u;
    return bt_key_less(t->kind, bn_key_at(n, n->n - 1), key);
}

int bt_appends_to_cached_leaf(const bt_tree *t, bn_key key)
{
    const bn_node *n = t->root.mem;
    while (n && !n->leaf) {
        int found;
        n = n->child[bn_search(n, key, &found)].mem;
    }
    if (!n || n->n == 0)
        return n != NULL;
    return after_last(t, n, key);
}

int bt_goes_last(const bt_tree *t, bn_key key)
{
    const bn_node *n = t->root.mem;
    for (; n && !n->leaf; n = n->child[n->n - 1].mem) {
        if (n->n == 0 || bt_key_less(t->kind, key, bn_key_at(n, n->n - 1)))
            return 0;
    }
    return 1;
}

/* The decoded last leaf, or NULL where the right edge is not decoded. */
static bn_node *last_leaf(const bt_tree *t)
{
    bn_node *n = t->root.mem;
    while (n && !n->leaf)
        n = n->n ? n->child[n->n - 1].mem : NULL;
    return n;
}

bn_node *bt_tail_leaf(const bt_tree *t, bn_key key)
{
    bn_node *n = last_leaf(t);
    if (!n || n->n == 0) /* an emptied last leaf says nothing of key */
        return n && n == t->root.mem ? n : NULL;
    return after_last(t, n, key) ? n : NULL;
}

bn_node *bt_tail_leaf_hinted(bonsai_db *db, const bt_tree *t, bn_key key)
{
    bn_node *n = db->tail_hint.leaf;
    if (!n || db->tail_hint.tree != t || db->tail_hint.gen != db->write_gen)
        return bt_tail_leaf(t, key);
#ifdef BONSAI_CHECK_HINTS
    assert(n == last_leaf(t)); /* a change that kept write_gen moved it */
#endif
    return n->n && after_last(t, n, key) ? n : NULL;
}

void bt_note_tail(bonsai_db *db, const bt_tree *t, bn_node *tail,
                  uint32_t n_before)
{
    int split = tail->n != n_before + 1; /* the new key moved right */
    db->tail_hint.tree = t;
    db->tail_hint.leaf = split ? NULL : tail;
    db->tail_hint.gen = db->write_gen;
}

static void forget_tail(bonsai_db *db)
{
    db->tail_hint.leaf = NULL;
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
    bn_node *leaf;
    int found, rc = room_for_removed(db, t);
    if (rc == 0)
        rc = touch_leaf(db, t, key, &leaf);
    if (rc)
        return rc;
    uint32_t idx = bn_search(leaf, key, &found);
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
        rc = bn_set_value(leaf, idx, val, vlen, vflag);
    } else {
        rc = bn_insert(leaf, idx, key, val, vlen, vflag);
    }
    if (rc)
        return rc;
    db->write_gen++;
    t->record_dirty = 1;
    if (!found)
        t->count++;
    if ((rc = mark_dirty(db, leaf)))
        return rc;
    return fit_upwards(db, t, leaf, !found && idx + 1 == leaf->n);
}

int bt_append(bonsai_db *db, bt_tree *t, bn_node *leaf, bn_key key,
              const uint8_t *val, uint32_t vlen)
{
    int rc = room_for_removed(db, t);
    if (rc == 0)
        rc = bn_insert(leaf, leaf->n, key, val, vlen, 0);
    if (rc)
        return rc;
    db->write_gen++;
    t->record_dirty = 1;
    t->count++;
    if ((rc = mark_dirty(db, leaf)))
        return rc;
    return fit_upwards(db, t, leaf, 1);
}

#define RUN_NEW 256u /* new entries merged into a leaf at a time */
#define PREFETCH_AHEAD 8u /* batch keys asked for ahead of their use */

/* Merges the gathered new entries into leaf; on failure *to is the first
 * of them, so that they stay waiting. */
static int merge_news(bt_tree *t, bn_node *leaf, const bn_new *news,
                      uint32_t *nnew, uint32_t first, uint32_t *to)
{
    int rc = bn_insert_sorted(leaf, *nnew, news);
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
    bn_node *leaf;
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
        uint32_t idx = bn_search_leaf_from(leaf, lo, key, &found);
        lo = idx; /* the batch is sorted: the next key lands here or on */
        at_end = !found && idx == leaf->n;
        if (found) {
            if ((rc = release_value(db, leaf, idx)) == 0)
                rc = bn_set_value(leaf, idx, val, vlen, 0);
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
    int rc2 = mark_dirty(db, leaf);
    if (rc2 == 0)
        rc2 = fit_upwards(db, t, leaf, at_end && !has_bound);
    return rc ? rc : rc2;
}

/* ---- delete and merge -------------------------------------------------- */

static int is_small(const bonsai_db *db, const bn_node *n)
{
    return n->n == 0 || (n->est < db->opt.node_bytes / 4 &&
                         n->n <= db->opt.node_entries / 4);
}

static int can_merge(const bonsai_db *db, const bn_node *a, const bn_node *b)
{
    if (a->n == 0 || b->n == 0)
        return 1;
    return a->n + b->n <= db->opt.node_entries &&
           a->est + b->est <= (size_t)db->opt.node_bytes * 3 / 4;
}

/* Moves everything of right (child ridx of p) onto left and drops it. */
static int merge(bonsai_db *db, bn_node *p, uint32_t ridx, bn_node *left,
                 bn_node *right)
{
    int rc;
    if (!right->leaf && right->n &&
        (rc = bn_set_key(right, 0, bn_key_at(p, ridx))))
        return rc;
    if ((rc = bn_move(left, left->n, right, 0, right->n)))
        return rc;
    adopt_children(left);
    bn_remove(p, ridx);
    if ((rc = kill_node(db, right)) || (rc = mark_dirty(db, left)))
        return rc;
    return mark_dirty(db, p);
}

/* Takes n, empty and the only child of p, out of the tree: p is empty
 * now, and goes next (merge_upwards). */
static int remove_only_child(bonsai_db *db, bn_node *p, bn_node *n)
{
    bn_remove(p, 0);
    int rc = kill_node(db, n);
    return rc ? rc : mark_dirty(db, p);
}

static int shrink_root(bonsai_db *db, bt_tree *t, bn_node *root,
                       bn_node **next)
{
    *next = NULL;
    if (!root->leaf && root->n == 1) {
        bn_node *child;
        int rc = load_child(db, t, root, 0, &child);
        if (rc)
            return rc;
        t->root = root->child[0];
        child->parent = NULL;
        t->depth--;
        t->record_dirty = 1;
        *next = child;
        return kill_node(db, root);
    }
    if (root->n == 0) { /* a leaf, or a branch whose last child left */
        t->root = (bn_child){{0, 0}, NULL};
        t->depth = 0;
        t->record_dirty = 1;
        return kill_node(db, root);
    }
    return 0;
}

/* A node that got small merges with a sibling when they fit together.
 * An empty node never stays: it always fits with a sibling, and when it
 * has none it leaves its parent, which is then empty in turn; so a tree
 * whose last entry goes has no nodes left (depth 0). */
static int merge_upwards(bonsai_db *db, bt_tree *t, bn_node *n)
{
    while (n) {
        bn_node *p = n->parent;
        if (!p) {
            int rc = shrink_root(db, t, n, &n);
            if (rc)
                return rc;
            continue;
        }
        if (!is_small(db, n))
            return 0;
        uint32_t idx = slot_of(p, n);
        if (idx == UINT32_MAX)
            return BONSAI_CORRUPT;
        bn_node *sib;
        int rc;
        if (idx + 1 < p->n) {
            if ((rc = load_child(db, t, p, idx + 1, &sib)))
                return rc;
            if (can_merge(db, n, sib) && (rc = merge(db, p, idx + 1, n, sib)))
                return rc;
        } else if (idx > 0) {
            if ((rc = load_child(db, t, p, idx - 1, &sib)))
                return rc;
            if (can_merge(db, sib, n) && (rc = merge(db, p, idx, sib, n)))
                return rc;
        } else if (n->n == 0 && (rc = remove_only_child(db, p, n))) {
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
    bn_node *leaf;
    int found, rc = room_for_removed(db, t);
    if (rc == 0)
        rc = touch_leaf(db, t, key, &leaf);
    if (rc)
        return rc;
    uint32_t idx = bn_search(leaf, key, &found);
    if (!found)
        return BONSAI_NOTFOUND;
    if ((rc = release_value(db, leaf, idx)))
        return rc;
    bn_remove(leaf, idx);
    db->write_gen++;
    t->count--;
    t->record_dirty = 1;
    if ((rc = mark_dirty(db, leaf)))
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
static int del_needs_room(const bonsai_db *db, bn_node *leaf)
{
    size_t exact = bn_encoded_size(leaf);
    leaf->est_fix = (int64_t)exact - (int64_t)leaf->est;
    leaf->fix_changes = 0;
    return exact > db->opt.node_bytes ||
           pages_for(db, exact) > leaf->home.npages;
}

int bt_del_in_place(bonsai_db *db, bt_tree *t, bn_key key, int *done)
{
    *done = 0;
    if (db->cow || t->depth == 0)
        return 0;
    bn_node *leaf;
    int found, rc = touch_leaf(db, t, key, &leaf);
    if (rc)
        return rc;
    uint32_t idx = bn_search(leaf, key, &found);
    if (!found) {
        *done = 1;
        return BONSAI_NOTFOUND;
    }
    if (!leaf->has_home || leaf->n < 2)
        return 0; /* an emptied leaf leaves the tree: bt_del */
    /* the entry, to be put back when the delete needs room after all */
    const uint8_t *v;
    uint32_t vlen;
    unsigned vflag;
    bn_value_at(leaf, idx, &v, &vlen, &vflag);
    uint8_t *copy = vlen ? malloc(vlen) : NULL;
    if (vlen && !copy)
        return BONSAI_NOMEM;
    if (vlen)
        memcpy(copy, v, vlen);
    bn_remove(leaf, idx);
    if (del_needs_room(db, leaf)) {
        rc = bn_insert(leaf, idx, key, copy, vlen, vflag);
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
    return rc ? rc : mark_dirty(db, leaf);
}

/* ---- flush ------------------------------------------------------------- */

/* Points the reference to n at e, remembering the old value for
 * undo_plan (by node, not address: a split while planning moves arrays). */
static int point_parent_at(bonsai_db *db, bn_node *n, bn_ext e)
{
    bt_tree *t = n->tree;
    bn_ext *c = &t->root.ext;
    if (n->parent) {
        uint32_t idx = slot_of(n->parent, n);
        if (idx == UINT32_MAX)
            return BONSAI_CORRUPT;
        c = &n->parent->child[idx].ext;
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
    return mark_dirty(db, n->parent);
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
        bn_node *p = u->child->parent;
        uint32_t idx = p ? slot_of(p, u->child) : 0;
        if (!p)
            u->tree->root.ext = u->old;
        else if (idx != UINT32_MAX)
            p->child[idx].ext = u->old;
    }
    while (db->op_alloc.n > alloc0)
        alloc_unget(&db->al, db->op_alloc.v[--db->op_alloc.n]);
    db->op_release.n = release0;
}

/* The bytes n's image will take: raw, or packed when the store compresses
 * and packing saves bytes (the packed form then waits in n->packed). */
static int image_bytes(bonsai_db *db, bn_node *n, size_t *bytes)
{
    bn_layout_of(n, &n->plan_lay); /* write_node encodes by it */
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
    int rc = bn_encode_laid(n, &n->plan_lay, db->scratch, raw, &len);
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
static int plan_node(bonsai_db *db, bn_node *n)
{
    size_t bytes;
    int rc0 = image_bytes(db, n, &bytes);
    if (rc0)
        return rc0;
    uint64_t np = pages_for(db, bytes);
    if (np > BN_MAX_NPAGES)
        return BONSAI_INVALID;
    int own_home = n->has_home &&
                   (!db->cow || (n->home_txn && n->home_txn == db->wtxn_id));
    if (own_home && np == n->home.npages) {
        n->plan = n->home;
        return 0;
    }
    if (own_home && np < n->home.npages) {
        /* shrink in place: a node left half empty by a split or deletes
         * gives its tail back rather than keeping it */
        bn_ext tail = {n->home.pgno + np, n->home.npages - (uint32_t)np};
        n->plan = (bn_ext){n->home.pgno, (uint32_t)np};
        int rc = extvec_push(&db->op_release, tail);
        return rc ? rc : point_parent_at(db, n, n->plan);
    }
    uint64_t pgno;
    int rc = alloc_get(&db->al, (uint32_t)np, &pgno);
    if (rc == BONSAI_FULL && n->n >= (n->leaf ? 2u : 4u)) {
        /* no run that long is left: two halves may fit the gaps */
        bn_node *r;
        if ((rc = split(db, n->tree, n, 0, &r)))
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
    if (n->has_home && (rc = extvec_push(&db->op_release, n->home)))
        return rc;
    return point_parent_at(db, n, n->plan);
}

static int plan_all(bonsai_db *db)
{
    for (unsigned level = 0; level < MAX_DEPTH; level++) {
        int more = 0;
        /* planning a level may append parents (a level up) to the list */
        for (size_t i = 0; i < db->dirty.n; i++) {
            bn_node *n = db->dirty.v[i];
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

static void write_node(bonsai_db *db, bn_node *n)
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
        bn_encode_laid(n, &n->plan_lay, p, cap, &len);
    }
    memset(p + len, 0, cap - len);
    n->home = n->plan;
    n->has_home = 1;
    n->home_txn = db->wtxn_id;
    n->dirty = 0;
}

int bt_flush(bonsai_db *db)
{
    forget_tail(db); /* a write-back may split what outgrew its estimate */
    size_t alloc0 = db->op_alloc.n, release0 = db->op_release.n;
    db->nundo = 0;
    int rc = plan_all(db);
    if (rc) {
        undo_plan(db, alloc0, release0);
        return rc;
    }
    db->nundo = 0;
    for (size_t i = 0; i < db->dirty.n; i++) {
        bn_node *n = db->dirty.v[i];
        if (!n->dead && n->dirty)
            write_node(db, n);
    }
    db->dirty.n = 0;
    db->dirty_nodes = 0;
    db->full_at_pages = 0;
    db->wb_error = 0;
    return 0;
}

void bt_evict_leaves(bonsai_db *db, size_t keep)
{
    if (db->leaves.n <= keep)
        return;
    forget_tail(db);
    size_t kept = 0;
    for (size_t i = 0; i < db->leaves.n; i++) {
        bn_node *n = db->leaves.v[i];
        if (n->dead)
            continue;
        uint32_t idx = n->parent && !n->dirty ? slot_of(n->parent, n)
                                               : UINT32_MAX;
        if (idx == UINT32_MAX) {
            db->leaves.v[kept++] = n;
            continue;
        }
        n->parent->child[idx].mem = NULL;
        free_node(n);
    }
    db->leaves.n = kept;
}

static void free_graveyard(bonsai_db *db)
{
    if (db->graveyard.n == 0)
        return;
    forget_tail(db);
    size_t kept = 0;
    for (size_t i = 0; i < db->leaves.n; i++)
        if (!((bn_node *)db->leaves.v[i])->dead)
            db->leaves.v[kept++] = db->leaves.v[i];
    db->leaves.n = kept;
    for (size_t i = 0; i < db->graveyard.n; i++)
        free_node(db->graveyard.v[i]);
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
    if (!db->cow)
        for (size_t i = 0; i < db->op_alloc.n; i++)
            alloc_put(&db->al, db->op_alloc.v[i]);
    db->op_alloc.n = 0;
    db->op_release.n = 0;
    for (size_t i = 0; i < db->dirty.n; i++)
        ((bn_node *)db->dirty.v[i])->dirty = 0;
    db->dirty.n = 0;
    db->dirty_nodes = 0;
    db->leaves.n = 0;
    free_graveyard(db);
}

static void discard_node(bn_node *n)
{
    if (!n->leaf)
        for (uint32_t i = 0; i < n->n; i++)
            if (n->child[i].mem)
                discard_node(n->child[i].mem);
    free_node(n);
}

void bt_discard(bonsai_db *db, bt_tree *t)
{
    forget_tail(db);
    if (t->root.mem)
        discard_node(t->root.mem);
    t->root.mem = NULL;
}

static void mark_dead(bn_node *n)
{
    n->dead = 1;
    if (!n->leaf)
        for (uint32_t i = 0; i < n->n; i++)
            if (n->child[i].mem)
                mark_dead(n->child[i].mem);
}

void bt_forget_tree(bonsai_db *db, bt_tree *t)
{
    if (!t->root.mem)
        return;
    mark_dead(t->root.mem);
    size_t kept = 0;
    for (size_t i = 0; i < db->leaves.n; i++)
        if (!((bn_node *)db->leaves.v[i])->dead)
            db->leaves.v[kept++] = db->leaves.v[i];
    db->leaves.n = kept;
    bt_discard(db, t);
}

/* ---- seek (cursors) ---------------------------------------------------- */

static int load_leaf_copy(const nview *v, unsigned kind, bn_node *leaf)
{
    if (!v->mem)
        return bn_decode_frozen(v->img, v->avail, kind, leaf);
    bn_clear(leaf);
    return bn_copy_frozen(leaf, v->mem);
}

/* Where in the leaf the mode lands, or -1 to go on past it. */
static int64_t land(const bn_node *leaf, int mode, bn_key key)
{
    int found;
    uint32_t n = leaf->n, i;
    switch (mode) {
    case BT_FIRST:
        return n ? 0 : -1;
    case BT_LAST:
        return n ? (int64_t)n - 1 : -1;
    case BT_GE:
        i = bn_search(leaf, key, &found);
        return i < n ? (int64_t)i : -1;
    case BT_GT:
        i = bn_search(leaf, key, &found);
        i += (uint32_t)found;
        return i < n ? (int64_t)i : -1;
    case BT_LE:
        i = bn_search(leaf, key, &found);
        i += (uint32_t)found;
        return i > 0 ? (int64_t)i - 1 : -1;
    default: /* BT_LT */
        i = bn_search(leaf, key, &found);
        return i > 0 ? (int64_t)i - 1 : -1;
    }
}

typedef struct seek_state {
    int mode;     /* BT_FIRST .. BT_LT, BT_LE */
    int crossing; /* key is the separator of the leaf beside */
    bn_key key;
    uint8_t kbuf[BONSAI_MAX_KEY];
    bt_bounds b; /* of the leaf the last descent reached */
} seek_state;

/* One descent: lands in a leaf, noting the tightest separators either
 * side of it. */
static int descend(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                   seek_state *s, nview *v)
{
    bn_child ref = t->root;
    s->b.has_lower = s->b.has_upper = 0;
    for (unsigned level = t->depth; level > 1; level--) {
        uint32_t idx = 0, n;
        int found, rc = view_of(db, rd, t->kind, ref, v);
        if (rc)
            return rc;
        n = view_count(v);
        if (view_leaf(v) || n == 0)
            return BONSAI_CORRUPT;
        if (s->mode == BT_LAST)
            idx = n - 1;
        else if (s->mode != BT_FIRST &&
                 (rc = view_search(v, t->kind, s->key, &idx, &found)))
            return rc;
        /* keys below key[idx] live left of child idx */
        if (s->mode == BT_LT && found && idx > 0)
            idx--;
        if (idx + 1 < n) {
            if ((rc = view_key(v, t->kind, idx + 1, s->b.ubuf, &s->b.upper)))
                return rc;
            s->b.has_upper = 1;
        }
        if (idx > 0) {
            if ((rc = view_key(v, t->kind, idx, s->b.lbuf, &s->b.lower)))
                return rc;
            s->b.has_lower = 1;
        }
        if ((rc = view_child(v, idx, &ref)))
            return rc;
    }
    int rc = view_of(db, rd, t->kind, ref, v);
    if (rc == 0 && !view_leaf(v))
        rc = BONSAI_CORRUPT;
    return rc;
}

/* Crossing the separator s->key onward, the descent's bound on the near
 * side is at most (at least) that separator by the search: it must be
 * the separator itself, else a branch on the way disagrees with the one
 * that gave it, and the keys between would be skipped. */
static int crossed_ok(unsigned kind, const seek_state *s)
{
    if (!s->crossing)
        return 1;
    if (s->mode == BT_GE)
        return s->b.has_lower && !bt_key_less(kind, s->b.lower, s->key);
    return s->b.has_upper && !bt_key_less(kind, s->key, s->b.upper);
}

/* A leaf holds keys within the bounds its parents give (a leaf shared by
 * two parents cannot, unless they give it the same ones). */
static int within_bounds(unsigned kind, const bn_node *leaf,
                         const bt_bounds *b)
{
    if (leaf->n == 0)
        return 1;
    if (b->has_lower && bt_key_less(kind, bn_key_at(leaf, 0), b->lower))
        return 0;
    return !b->has_upper ||
           bt_key_less(kind, bn_key_at(leaf, leaf->n - 1), b->upper);
}

/* Copies bounds, pointing byte keys at the copy's own buffers. */
static void copy_bounds(bt_bounds *to, const bt_bounds *from, unsigned kind)
{
    to->has_lower = from->has_lower;
    to->has_upper = from->has_upper;
    to->lower = from->lower;
    to->upper = from->upper;
    if (kind != BONSAI_KEY_BYTES)
        return;
    if (from->has_lower) {
        memcpy(to->lbuf, from->lower.b, from->lower.len);
        to->lower.b = to->lbuf;
    }
    if (from->has_upper) {
        memcpy(to->ubuf, from->upper.b, from->upper.len);
        to->upper.b = to->ubuf;
    }
}

int bt_seek(bonsai_db *db, const bt_rd *rd, const bt_tree *t, int mode,
            bn_key key, bn_node *leaf, uint32_t *idx, bt_bounds *bounds)
{
    if (t->depth == 0)
        return BONSAI_NOTFOUND;
    seek_state *s = malloc(sizeof *s);
    if (!s)
        return BONSAI_NOMEM;
    s->mode = mode == BT_NEXT_LEAF ? BT_GE : mode == BT_PREV_LEAF ? BT_LT
                                                                 : mode;
    s->crossing = s->mode != mode;
    s->key = key;
    int rc;
    for (;;) {
        nview v;
        if ((rc = descend(db, rd, t, s, &v)))
            break;
        if ((rc = load_leaf_copy(&v, t->kind, leaf)))
            break;
        if (!crossed_ok(t->kind, s) || !within_bounds(t->kind, leaf, &s->b)) {
            rc = BONSAI_CORRUPT;
            break;
        }
        int64_t at = land(leaf, s->mode, s->key);
        if (at >= 0) {
            *idx = (uint32_t)at;
            if (bounds)
                copy_bounds(bounds, &s->b, t->kind);
            break;
        }
        rc = BONSAI_NOTFOUND;
        int forward = s->mode != BT_LAST && s->mode != BT_LT &&
                      s->mode != BT_LE;
        if (!(forward ? s->b.has_upper : s->b.has_lower))
            break;
        bn_key bound = forward ? s->b.upper : s->b.lower;
        /* separators must move the search strictly onward (BT_LE: the
         * leaf of key begins at or below it; BT_LT from there moves on) */
        if (s->mode != BT_FIRST && s->mode != BT_LAST &&
            (forward ? !bt_key_less(t->kind, s->key, bound)
             : s->mode == BT_LE ? bt_key_less(t->kind, s->key, bound)
                                : !bt_key_less(t->kind, bound, s->key))) {
            rc = BONSAI_CORRUPT;
            break;
        }
        s->key = bound;
        if (t->kind == BONSAI_KEY_BYTES) {
            memcpy(s->kbuf, bound.b, bound.len);
            s->key.b = s->kbuf;
        }
        s->mode = forward ? BT_GE : BT_LT;
        s->crossing = 1;
    }
    free(s);
    return rc;
}

/* ---- walking every extent ---------------------------------------------- */

typedef struct walk_ctx {
    bonsai_db *db;
    const bt_rd *rd;
    const bt_tree *t;
    pageset *seen;
    bt_ext_fn fn;
    void *ctx;
} walk_ctx;

/* Every extent lies below the snapshot's end and is met once. */
static int visit(walk_ctx *w, bn_ext e, int is_value)
{
    if (!ext_ok(w->db, w->rd->end, e) || ps_claim(w->seen, e))
        return BONSAI_CORRUPT;
    return w->fn ? w->fn(w->ctx, e, is_value) : 0;
}

/* A leaf the walk does not read (its tree has no overflow values) must
 * still be a leaf without overflow values, since free space is derived
 * trusting both: else the pages below it, or its values' runs, would be
 * taken for free.  Its type and flags bytes tell (a packed image's outer
 * header repeats them), without unpacking or hashing it.  From a file
 * they are read, not touched through the mapping: the walk meets every
 * leaf of the store once, and a page fault costs more than the call. */
static int unread_leaf_ok(const bonsai_db *db, bn_ext e)
{
    uint8_t head[2];
    if (db->fd < 0) {
        memcpy(head, ext_ptr(db, e), sizeof head);
    } else {
        int rc = db->io.pread(db->io.ctx, db->fd, head, sizeof head,
                              e.pgno * db->page_size);
        if (rc)
            return rc;
    }
    if (head[0] != BN_TYPE_LEAF || (head[1] & BN_F_OVERFLOW))
        return BONSAI_CORRUPT;
    return 0;
}

static int walk_values(walk_ctx *w, const nview *v)
{
    for (uint32_t i = 0; i < view_count(v); i++) {
        const uint8_t *p;
        uint32_t len;
        unsigned vflag;
        int rc = 0;
        if (v->mem)
            bn_value_at(v->mem, i, &p, &len, &vflag);
        else
            rc = bn_img_value(v->img, &v->info, i, &p, &len, &vflag);
        if (rc)
            return rc;
        if (!(vflag & BN_VAL_OVERFLOW))
            continue;
        bn_ext e;
        uint64_t vlen;
        if (ovf_ext(p, len, &e, &vlen))
            return BONSAI_CORRUPT;
        if ((rc = visit(w, e, 1)))
            return rc;
    }
    return 0;
}

static int walk(walk_ctx *w, bn_child ref, unsigned level)
{
    int rc = 0;
    if (ref.mem ? ref.mem->has_home : 1)
        rc = visit(w, ref.mem ? ref.mem->home : ref.ext, 0);
    if (rc)
        return rc;
    if (level == 1 && !ref.mem && !(w->t->flags & TREE_F_OVERFLOW))
        return unread_leaf_ok(w->db, ref.ext);
    nview v;
    if ((rc = view_of(w->db, w->rd, w->t->kind, ref, &v)))
        return rc;
    if (view_leaf(&v) != (level == 1))
        return BONSAI_CORRUPT;
    if (level == 1)
        return walk_values(w, &v);
    /* the children first: walking them reuses the unpack cache that may
     * hold this node's image */
    uint32_t n = view_count(&v);
    bn_child *kids = malloc((size_t)n * sizeof *kids);
    if (!kids)
        return BONSAI_NOMEM;
    for (uint32_t i = 0; i < n && rc == 0; i++)
        rc = view_child(&v, i, &kids[i]);
    for (uint32_t i = 0; i < n && rc == 0; i++)
        rc = walk(w, kids[i], level - 1);
    free(kids);
    return rc;
}

int bt_walk(bonsai_db *db, const bt_rd *rd, const bt_tree *t, pageset *seen,
            bt_ext_fn fn, void *ctx)
{
    if (t->depth == 0)
        return 0;
    if (t->depth > MAX_DEPTH || rd->end < db->first_pgno)
        return BONSAI_CORRUPT;
    pageset own;
    int rc = seen ? 0 : ps_init(&own, db->first_pgno, rd->end);
    if (rc)
        return rc;
    walk_ctx w = {db, rd, t, seen ? seen : &own, fn, ctx};
    rc = walk(&w, t->root, t->depth);
    if (!seen)
        ps_free(&own);
    return rc;
}

/* ---- dropping a tree --------------------------------------------------- */

static int release_ext(void *ctx, bn_ext e, int is_value)
{
    (void)is_value;
    bonsai_db *db = ctx;
    return extvec_push(&db->op_release, e);
}

static int bury(bonsai_db *db, bn_node *n)
{
    if (!n->leaf)
        for (uint32_t i = 0; i < n->n; i++)
            if (n->child[i].mem) {
                int rc = bury(db, n->child[i].mem);
                if (rc)
                    return rc;
            }
    n->has_home = 0; /* released by the walk already */
    return kill_node(db, n);
}

int bt_drop(bonsai_db *db, bt_tree *t)
{
    bt_rd rd = {db->al.end, &db->uc};
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

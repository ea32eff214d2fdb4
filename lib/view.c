/* SPDX-License-Identifier: MIT */
/*
 * view.c - reading a tree: node images searched in place (or the writer's
 * decoded nodes), lookups, cursor seeks and walks over every extent.
 * Nothing here changes a tree.
 */
#include "tree.h"

#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "ovf.h"

/* ---- extents and images ------------------------------------------------ */

/* A node as either its decoded form or its (unpacked) image. */
typedef struct nview {
    bt_node *mem;
    const uint8_t *img;
    size_t avail;
    bn_info info;
} nview;

/* Asks the CPU for the cache lines of bytes [from, to) of p, four a
 * step.  Written with pointers: with an index (i + 3 * 64 < to) GCC 12
 * drops the loop's prefetches altogether. */
static void prefetch_span(const uint8_t *p, size_t from, size_t to)
{
    const uint8_t *q = p + (from & ~(size_t)63), *end = p + to;
    for (; end - q > 3 * 64; q += 4 * 64) { /* a quarter of the steps */
        __builtin_prefetch(q);
        __builtin_prefetch(q + 64);
        __builtin_prefetch(q + 128);
        __builtin_prefetch(q + 192);
    }
    for (; q < end; q += 64)
        __builtin_prefetch(q);
}

/* A byte-key search halves over restart points, each step a read of
 * the restart array and then of a key somewhere in the section: a chain
 * of dependent misses.  A u64 search reads the group records, then the
 * numbers of the group they point to.  Asking for the whole section at
 * once lets the misses overlap (about a third more byte-key lookups a
 * second at 5-10 M keys).  A u64 get whose leaf bytes were guessed
 * (prefetch_leaf_guess) asks for nothing more: the guess covers the group,
 * and a whole section's 40-odd lines queued behind one another ahead of
 * it (a tenth more random gets a second at 20 M keys without them). */
static void prefetch_key_section(const nview *v)
{
    prefetch_span(v->img, 64, BN_HEADER_SIZE + (size_t)v->info.keys_len);
}

/* How much of a leaf's key section view_image asks for. */
enum { ASK_SECTION, ASK_NOTHING };

/* The image at ref; a reader's branch seen often enough comes back
 * decoded instead (brcache.h). */
static int view_image(bonsai_db *db, const bt_rd *rd, unsigned kind,
                      const bn_child *ref, int ask, nview *v)
{
    v->mem = NULL;
    if (!tree_ext_ok(db, rd->end, ref->ext))
        return BONSAI_CORRUPT;
    int rc = pk_view(rd->uc, &db->pk, ref->ext.pgno, tree_ext_ptr(db, ref->ext),
                     (size_t)ref->ext.npages * db->page_size, &v->img,
                     &v->avail);
    if (rc || (rc = bn_img_check(v->img, v->avail, kind, 0, &v->info)))
        return rc;
    if (rd->br && v->info.type == BN_TYPE_BRANCH)
        v->mem = br_visit(rd->br, ref->ext, kind, v->img, v->avail);
    else if (ask == ASK_SECTION &&
             (kind == BONSAI_KEY_BYTES || v->info.type == BN_TYPE_LEAF))
        prefetch_key_section(v);
    return 0;
}

/* ref by address, as the key (view_search) */
static int view_asking(bonsai_db *db, const bt_rd *rd, unsigned kind,
                       const bn_child *ref, int ask, nview *v)
{
    v->mem = ref->mem;
    if (ref->mem)
        return 0;
    if (rd->br && (v->mem = br_find(rd->br, ref->ext, kind)))
        return 0;
    return view_image(db, rd, kind, ref, ask, v);
}

static int view_of(bonsai_db *db, const bt_rd *rd, unsigned kind,
                   const bn_child *ref, nview *v)
{
    return view_asking(db, rd, kind, ref, ASK_SECTION, v);
}

static int view_leaf(const nview *v)
{
    return v->mem ? v->mem->bn.leaf : v->info.type == BN_TYPE_LEAF;
}

static uint32_t view_count(const nview *v)
{
    return v->mem ? v->mem->bn.n : v->info.count;
}

/* key by address: a 24-byte key passed down by value was rebuilt on the
 * stack at each level, and the wide load of what had just been stored in
 * pieces stalled a descent at every level. */
static int view_search(const nview *v, unsigned kind, const bn_key *key,
                       uint32_t *idx, int *found)
{
    if (v->mem) {
        *idx = bn_search(&v->mem->bn, key, found);
        return 0;
    }
    return bn_img_search(v->img, &v->info, kind, key, idx, found);
}

static int view_child(const nview *v, uint32_t idx, bn_child *out)
{
    if (v->mem) {
        *out = v->mem->bn.child[idx];
        return 0;
    }
    out->mem = NULL;
    return bn_img_child(v->img, &v->info, idx, &out->ext);
}

/* Branch idx of the writer's decoded branch parent (parent NULL: the
 * root of t), decoded and kept in *out while the cache has room for it
 * (db->read_room), so that lookups search the writer's branches as a
 * read transaction searches those it keeps (brcache.h): their key
 * arrays, not their images, and with the separators that let a leaf's
 * bytes be asked for early.  1 when it was not decoded (the caller
 * reads its image), 0 or an error otherwise. */
static int decode_kept(bonsai_db *db, bt_tree *t, bt_node *parent,
                       uint32_t idx, bt_node **out)
{
    if (db->read_decoded >= db->read_room)
        return 1;
    int rc = parent ? tree_load_child(db, t, parent, idx, out)
                    : tree_load_root(db, t, out);
    if (rc == BONSAI_NOMEM)
        return 1;
    if (rc == 0)
        db->read_decoded += bt_node_bytes(*out);
    return rc;
}

/* Child idx of branch v, viewed in *c.  A reader's decoded branch links
 * its decoded children and marks when its children are leaves, so that
 * the next descent through it asks the cache nothing. */
static int view_down(bonsai_db *db, const bt_rd *rd, unsigned kind,
                     const nview *v, uint32_t idx, int ask, nview *c)
{
    bn_child ref;
    int rc = view_child(v, idx, &ref);
    if (rc)
        return rc;
    if (rd->writer && v->mem && !ref.mem && v->mem->level >= 2 &&
        (rc = decode_kept(db, v->mem->tree, v->mem, idx, &c->mem)) <= 0)
        return rc;
    if (!rd->br || !v->mem || ref.mem)
        return view_asking(db, rd, kind, &ref, ask, c);
    if (v->mem->level == 1)
        return view_image(db, rd, kind, &ref, ask, c);
    if ((rc = view_asking(db, rd, kind, &ref, ask, c)))
        return rc;
    if (c->mem)
        v->mem->bn.child[idx].mem = c->mem;
    else if (c->info.type == BN_TYPE_LEAF)
        v->mem->level = 1;
    return 0;
}

/* Value idx of a leaf as stored: its bytes, or an overflow reference. */
static int view_value(const nview *v, uint32_t idx, const uint8_t **p,
                      uint32_t *len, unsigned *vflag)
{
    if (!v->mem)
        return bn_img_value(v->img, &v->info, idx, p, len, vflag);
    bn_value_at(&v->mem->bn, idx, p, len, vflag);
    return 0;
}

/* Copies key idx into buf so it outlives the view. */
static int view_key(const nview *v, unsigned kind, uint32_t idx,
                    uint8_t *buf, bn_key *out)
{
    if (!v->mem)
        return bn_img_key(v->img, &v->info, kind, idx, buf, out);
    *out = bn_key_at(&v->mem->bn, idx);
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

/* ---- lookups ----------------------------------------------------------- */

/* The value of entry idx of leaf v. */
static int leaf_value(bonsai_db *db, const bt_rd *rd, const nview *v,
                      uint32_t idx, bonsai_val *val)
{
    const uint8_t *p;
    uint32_t len;
    unsigned vflag;
    int rc = view_value(v, idx, &p, &len, &vflag);
    return rc ? rc : bt_value(db, rd->end, p, len, vflag, val);
}

/* The separators either side of child idx of decoded u64 branch n, the
 * bounds of that child's keys; 0 where one is missing. */
static int u64_bounds(const bt_node *n, uint32_t idx, uint64_t *lo,
                      uint64_t *hi)
{
    if (idx == 0 || idx + 1 >= n->bn.n)
        return 0;
    *lo = n->bn.k64[idx];
    *hi = n->bn.k64[idx + 1];
    return 1;
}

/* Asks for the bytes of the leaf at e, whose keys lie in [lo, hi), where
 * key would be were the leaf's image spread evenly between its bounds:
 * reading the leaf's header (which names the group of key) and then the
 * group are two misses in a row, and this lets the second overlap the
 * first.  The window reaches a group's length back, since a group is
 * scanned from its start (+20 % random gets at 20 M keys).  1 when it
 * asked. */
static int prefetch_leaf_within(const bonsai_db *db, const bt_rd *rd,
                                bn_ext e, uint64_t lo, uint64_t hi,
                                uint64_t key)
{
    enum { BACK = 5 * 64, AHEAD = 64 };
    if (db->pk.codec != BONSAI_COMPRESS_NONE)
        return 0; /* the bytes are packed */
    if (!tree_ext_ok(db, rd->end, e) || key < lo || key >= hi)
        return 0;
    size_t size = (size_t)e.npages * db->page_size;
    size_t at = (size_t)((double)(key - lo) / (double)(hi - lo) *
                         (double)size);
    size_t to = at + AHEAD < size ? at + AHEAD + 1 : size;
    prefetch_span(tree_ext_ptr(db, e), at > BACK ? at - BACK : 0, to);
    return 1;
}

/* prefetch_leaf_within for leaf child idx of decoded branch n. */
static int prefetch_leaf_guess(const bonsai_db *db, const bt_rd *rd,
                               const bt_node *n, uint32_t idx, uint64_t key)
{
    uint64_t lo, hi;
    return u64_bounds(n, idx, &lo, &hi) &&
           prefetch_leaf_within(db, rd, n->bn.child[idx].ext, lo, hi, key);
}

/* ---- the table of leaves (leafdir.h) ------------------------------------ */

/* A key range [lo, hi); hi none when open. */
typedef struct key_range {
    uint64_t lo, hi;
    int has_hi;
} key_range;

/* Key i of u64 branch v.  0, or an error. */
static int branch_key(const nview *v, uint32_t i, uint64_t *key)
{
    bn_key k;
    uint8_t unused[1]; /* a u64 key needs no buffer */
    int rc = view_key(v, BONSAI_KEY_U64, i, unused, &k);
    *key = k.u;
    return rc;
}

/* The keys a descent sends to child i of a branch whose own are r: from
 * its key (child 0: from r's start) up to the next child's (has_next). */
static key_range child_range(key_range r, uint32_t i, uint64_t key,
                             int has_next, uint64_t next)
{
    if (i > 0 && key > r.lo)
        r.lo = key;
    if (has_next && (!r.has_hi || next < r.hi)) {
        r.hi = next;
        r.has_hi = 1;
    }
    return r;
}

/* A table being built: its leaves at most max (the budget's). */
typedef struct table_walk {
    bonsai_db *db;
    const bt_rd *rd;
    leafdir *d;
    uint32_t max;
} table_walk;

/* Adds to the table, in key order, the leaves below branch v of the
 * given level (>= 2) whose keys are r, each with the lower bound of the
 * keys a descent sends it.  A child no key reaches is left out, so that
 * a forged tree whose branches point to one another is walked once per
 * range its keys cut, not once per path.  -1 when the tree cannot have a
 * table: keys out of order (a descent's search assumes them increasing),
 * a branch where a leaf is not, a leaf changed in memory, an error
 * reading a branch, more leaves than the budget. */
static int add_leaves(table_walk *w, const nview *v, unsigned level,
                      key_range r)
{
    uint32_t n = view_count(v);
    uint64_t key = 0, next = 0;
    if (view_leaf(v) || (n > 0 && branch_key(v, 0, &key)))
        return -1;
    for (uint32_t i = 0; i < n; i++, key = next) {
        int has_next = i + 1 < n;
        if (has_next && (branch_key(v, i + 1, &next) || next <= key))
            return -1;
        key_range c = child_range(r, i, key, has_next, next);
        if (c.has_hi && c.lo >= c.hi)
            continue;
        if (level > 2) {
            nview below;
            if (view_down(w->db, w->rd, BONSAI_KEY_U64, v, i, ASK_NOTHING,
                          &below) ||
                add_leaves(w, &below, level - 1, c))
                return -1;
            continue;
        }
        bn_child ref;
        if (w->d->n >= w->max || view_child(v, i, &ref) ||
            (ref.mem && (ref.mem->dirty || !ref.mem->has_home)) ||
            ld_add(w->d, c.lo, ref.ext))
            return -1;
    }
    return 0;
}

/* What says a table still holds: a read snapshot never changes; the
 * writer's trees change with tree_gen and write_gen. */
static void table_stamp(const bonsai_db *db, const bt_rd *rd, uint64_t s[2])
{
    s[0] = rd->writer ? db->tree_gen : 0;
    s[1] = rd->writer ? db->write_gen : 0;
}

static int stamp_is(const uint64_t a[2], const uint64_t b[2])
{
    return a[0] == b[0] && a[1] == b[1];
}

/* The bytes the reader's budget has left for a table: the writer's
 * cache (cache.c counts db->ld) or the read transaction's (brcache.h). */
static size_t table_room(const bonsai_db *db, const bt_rd *rd)
{
    if (rd->br)
        return br_room(rd->br);
    return db->read_decoded < db->read_room
               ? (size_t)(db->read_room - db->read_decoded)
               : 0;
}

/* Holds the memory of a table of bytes within that budget. */
static int table_afford(bonsai_db *db, const bt_rd *rd, size_t bytes)
{
    if (bytes > table_room(db, rd))
        return -1;
    if (rd->br)
        return br_charge(rd->br, bytes);
    db->read_decoded += bytes;
    return 0;
}

static void table_drop(const bt_rd *rd, leafdir *d)
{
    if (rd->br)
        br_refund(rd->br, d->bytes);
    ld_drop(d);
}

/* Builds rd->ld for t, whose stamp is s.  0, or -1: no table. */
static int table_build(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                       const uint64_t s[2])
{
    leafdir *d = rd->ld;
    nview root;
    if (rd->writer && db->dirty.n)
        return -1; /* a leaf's image may be older than its decoded node */
    size_t max = table_room(db, rd) / sizeof(ld_leaf);
    table_walk w = {db, rd, d, max < UINT32_MAX ? (uint32_t)max : UINT32_MAX};
    int rc = view_asking(db, rd, t->kind, &t->root, ASK_NOTHING, &root);
    if (rc || add_leaves(&w, &root, t->depth, (key_range){0, 0, 0}) ||
        ld_finish(d) || table_afford(db, rd, d->bytes)) {
        ld_drop(d);
        return -1;
    }
    d->root = t->root.ext;
    d->depth = t->depth;
    memcpy(d->stamp, s, sizeof d->stamp);
    return 0;
}

/* Lookups of a tree of count entries before its table is built.  The
 * walk that builds it visits every leaf's entry in its parent: at 20 M
 * random keys about 39 thousand, some 1.5 ms, which this many lookups
 * win back several times over. */
static uint64_t lookups_before_table(const bt_tree *t)
{
    return 256 + t->count / 256;
}

/* t's table of leaves for a lookup, built when enough lookups asked for
 * it since t last changed; NULL when there is none (yet). */
static const leafdir *table_for(bonsai_db *db, const bt_rd *rd,
                                const bt_tree *t)
{
    leafdir *d = rd->ld;
    uint64_t s[2];
    table_stamp(db, rd, s);
    if (ld_built(d)) {
        if (stamp_is(d->stamp, s) && d->depth == t->depth &&
            d->root.pgno == t->root.ext.pgno &&
            d->root.npages == t->root.ext.npages)
            return d;
        table_drop(rd, d);
    }
    if (!stamp_is(d->asked_stamp, s)) {
        memcpy(d->asked_stamp, s, sizeof d->asked_stamp);
        d->asked = 0;
    }
    if (++d->asked < lookups_before_table(t))
        return NULL;
    d->asked = 0;
    return table_build(db, rd, t, s) ? NULL : d;
}

/* bt_get through the table of leaves: the leaf's bytes asked for and
 * searched as the descent's last step does. */
static int get_by_table(bonsai_db *db, const bt_rd *rd, const leafdir *d,
                        const bt_tree *t, const bn_key *key, bonsai_val *val)
{
    bn_ext likely = {ld_likely_page(d, key->u), 1};
    if (tree_ext_ok(db, rd->end, likely)) { /* (leafdir.h) */
        const uint8_t *p = tree_ext_ptr(db, likely);
        __builtin_prefetch(p); /* the header, and the group records */
        if (db->page_size > 64)
            __builtin_prefetch(p + 64);
    }
    uint32_t i = ld_find(d, key->u);
    bn_child ref = {ld_ext(d, i), NULL};
    uint64_t lo, hi;
    int ask = ld_bounds(d, i, &lo, &hi) &&
                      prefetch_leaf_within(db, rd, ref.ext, lo, hi, key->u)
                  ? ASK_NOTHING
                  : ASK_SECTION;
    nview v;
    uint32_t idx;
    int found;
    int rc = view_image(db, rd, t->kind, &ref, ask, &v);
    if (rc == 0 && !view_leaf(&v))
        rc = BONSAI_CORRUPT;
    if (rc || (rc = view_search(&v, t->kind, key, &idx, &found)))
        return rc;
    return found ? leaf_value(db, rd, &v, idx, val) : BONSAI_NOTFOUND;
}

int bt_get(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
           const bn_key *key, bonsai_val *val)
{
    if (t->depth == 0)
        return BONSAI_NOTFOUND;
    const leafdir *d;
    if (rd->ld && t->kind == BONSAI_KEY_U64 && t->depth >= 3 &&
        (d = table_for(db, rd, t)))
        return get_by_table(db, rd, d, t, key, val);
    nview v[2];
    unsigned at = 0;
    int rc = 0;
    if (rd->writer && !t->root.mem && t->depth > 1) /* this thread's tree */
        rc = decode_kept(db, (bt_tree *)t, NULL, 0, &v[at].mem);
    if (rc < 0)
        return rc;
    rc = view_of(db, rd, t->kind, &t->root, &v[at]);
    uint64_t lo = 0, hi = 0;
    int bounded = 0; /* v[at] is a decoded u64 branch within [lo, hi) */
    for (unsigned level = t->depth; rc == 0; level--, at ^= 1) {
        uint32_t idx;
        int found;
        if (view_leaf(&v[at]) != (level == 1))
            return BONSAI_CORRUPT;
        if (bounded && v[at].mem)
            idx = bn_branch_index_u64(&v[at].mem->bn, key->u, lo, hi);
        else if ((rc = view_search(&v[at], t->kind, key, &idx, &found)))
            return rc;
        if (level == 1)
            return found ? leaf_value(db, rd, &v[at], idx, val)
                         : BONSAI_NOTFOUND;
        int ask = ASK_SECTION;
        if (level == 2 && v[at].mem && t->kind == BONSAI_KEY_U64 &&
            prefetch_leaf_guess(db, rd, v[at].mem, idx, key->u))
            ask = ASK_NOTHING;
        bounded = level > 2 && v[at].mem && t->kind == BONSAI_KEY_U64 &&
                  u64_bounds(v[at].mem, idx, &lo, &hi);
        rc = view_down(db, rd, t->kind, &v[at], idx, ask, &v[at ^ 1]);
    }
    return rc;
}

/* ---- seek (cursors) ---------------------------------------------------- */

static int load_leaf_copy(const nview *v, unsigned kind, bn_node *leaf)
{
    if (!v->mem)
        return bn_decode_frozen(v->img, v->avail, kind, leaf);
    bn_clear(leaf);
    return bn_copy_frozen(leaf, &v->mem->bn);
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
        i = bn_search(leaf, &key, &found);
        return i < n ? (int64_t)i : -1;
    case BT_GT:
        i = bn_search(leaf, &key, &found);
        i += (uint32_t)found;
        return i < n ? (int64_t)i : -1;
    case BT_LE:
        i = bn_search(leaf, &key, &found);
        i += (uint32_t)found;
        return i > 0 ? (int64_t)i - 1 : -1;
    default: /* BT_LT */
        i = bn_search(leaf, &key, &found);
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
        int found, rc = view_of(db, rd, t->kind, &ref, v);
        if (rc)
            return rc;
        n = view_count(v);
        if (view_leaf(v) || n == 0)
            return BONSAI_CORRUPT;
        if (s->mode == BT_LAST)
            idx = n - 1;
        else if (s->mode != BT_FIRST &&
                 (rc = view_search(v, t->kind, &s->key, &idx, &found)))
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
    int rc = view_of(db, rd, t->kind, &ref, v);
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
    if (!tree_ext_ok(w->db, w->rd->end, e) || ps_claim(w->seen, e))
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
        memcpy(head, tree_ext_ptr(db, e), sizeof head);
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
        int rc = view_value(v, i, &p, &len, &vflag);
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
    if ((rc = view_of(w->db, w->rd, w->t->kind, &ref, &v)))
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
    if (t->depth > BT_MAX_DEPTH || rd->end < db->first_pgno)
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

/* ---- lookups in key order (getbatch.c) --------------------------------- */

/* Where a key's descent stands: a node, and the separator its range ends
 * below (none on the right edge). */
typedef struct fpos {
    bn_child ref;
    int has_upper;
    bn_key upper;
    uint8_t *ubuf; /* byte keys: room for upper's bytes */
} fpos;

struct bt_finger {
    unsigned depth; /* of the tree */
    int held;       /* path holds the descent of the last key */
    fpos *path;     /* [depth]: path[0] the root ... a leaf */
    fpos *row[2];   /* [BT_FINGER_KEYS]: a group's keys at a level, and
                       at the next */
    bn_child leaf;  /* the leaf bt_leaf_get searched last ... */
    bn_mark mark;   /* ... and where that search ended */
    nview view;     /* ... and its view, when it stays put (not unpacked
                       into the unpack cache, which a descent may reuse) */
    int have_view;
};

/* Gives each position room for a byte key (none for u64 keys). */
static void give_room(fpos *p, unsigned n, uint8_t *room, size_t kb)
{
    for (unsigned i = 0; i < n; i++, room += kb)
        p[i].ubuf = kb ? room : NULL;
}

int bt_finger_new(const bt_tree *t, bt_finger **out)
{
    if (t->depth > BT_MAX_DEPTH)
        return BONSAI_CORRUPT;
    unsigned npos = t->depth + 2 * BT_FINGER_KEYS;
    size_t kb = t->kind == BONSAI_KEY_BYTES ? BONSAI_MAX_KEY : 0;
    bt_finger *f = malloc(sizeof *f + npos * (sizeof(fpos) + kb));
    if (!f)
        return BONSAI_NOMEM;
    f->depth = t->depth;
    f->held = 0;
    f->mark.set = 0;
    f->mark.img = NULL;
    f->have_view = 0;
    f->path = (fpos *)(f + 1);
    f->row[0] = f->path + t->depth;
    f->row[1] = f->row[0] + BT_FINGER_KEYS;
    give_room(f->path, npos, (uint8_t *)(f->path + npos), kb);
    *out = f;
    return 0;
}

void bt_finger_free(bt_finger *f)
{
    free(f);
}

static int same_node(bn_child a, bn_child b)
{
    return a.mem == b.mem && (a.mem || a.ext.pgno == b.ext.pgno);
}

/* to's range ends where from's does; byte keys are copied into to's own
 * room, so that no position points into another. */
static void take_upper(unsigned kind, fpos *to, const fpos *from)
{
    to->has_upper = from->has_upper;
    to->upper = from->upper;
    if (kind == BONSAI_KEY_BYTES && from->has_upper) {
        memcpy(to->ubuf, from->upper.b, from->upper.len);
        to->upper.b = to->ubuf;
    }
}

/* Asks the CPU for the first bytes of a node ahead of its search. */
static void prefetch_node(const bonsai_db *db, const bt_rd *rd, bn_child ref)
{
    if (ref.mem) {
        __builtin_prefetch(ref.mem);
        return;
    }
    if (!tree_ext_ok(db, rd->end, ref.ext))
        return;
    prefetch_span(tree_ext_ptr(db, ref.ext), 0, 4 * 64);
}

/* Once a node's first bytes are there (prefetch_node), its whole key
 * section (a branch's; a decoded node's key array): a search of a 4 KiB
 * image then waits for one cache miss, not one for each group it walks. */
static void prefetch_keys(const bonsai_db *db, const bt_rd *rd, bn_child ref)
{
    const uint8_t *p;
    size_t len;
    if (ref.mem) {
        const bn_node *m = &ref.mem->bn;
        int u64 = m->kind == BONSAI_KEY_U64;
        p = u64 ? (const uint8_t *)m->k64 : (const uint8_t *)m->kb;
        len = m->n * (u64 ? sizeof *m->k64 : sizeof *m->kb);
    } else {
        if (!tree_ext_ok(db, rd->end, ref.ext))
            return;
        p = tree_ext_ptr(db, ref.ext);
        if (pk_is_packed(p))
            return; /* unpacked whole anyway */
        size_t avail = (size_t)ref.ext.npages * db->page_size;
        len = BN_HEADER_SIZE + (size_t)get_le32(p + 12);
        len = len < avail ? len : avail;
    }
    prefetch_span(p, 0, len);
}

void bt_prefetch_search(const bonsai_db *db, const bt_rd *rd, unsigned kind,
                        bn_child leaf, bn_key key)
{
    if (leaf.mem) {
        prefetch_keys(db, rd, leaf);
        return;
    }
    if (!tree_ext_ok(db, rd->end, leaf.ext))
        return;
    const uint8_t *p = tree_ext_ptr(db, leaf.ext);
    bn_info info;
    size_t off, len;
    if (pk_is_packed(p) ||
        bn_img_check(p, (size_t)leaf.ext.npages * db->page_size, kind, 0,
                     &info))
        return; /* unpacked whole, or a search that will fail anyway */
    bn_img_search_span(p, &info, kind, key, &off, &len);
    prefetch_span(p, off, off + len);
}

/* From the branch at `at` to its child for key, into *to: the child's
 * range ends at the next separator or, past the last, where at's does.  A
 * separator beyond at's end is cut to it, so that ranges nest even in a
 * forged tree. */
static int step_down(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                     const fpos *at, bn_key key, fpos *to)
{
    nview v;
    uint32_t idx;
    int found, rc = view_of(db, rd, t->kind, &at->ref, &v);
    if (rc)
        return rc;
    if (view_leaf(&v) || view_count(&v) == 0)
        return BONSAI_CORRUPT;
    if ((rc = view_search(&v, t->kind, &key, &idx, &found)) ||
        (rc = view_child(&v, idx, &to->ref)))
        return rc;
    prefetch_node(db, rd, to->ref);
    if (idx + 1 < view_count(&v)) {
        bn_key sep;
        if ((rc = view_key(&v, t->kind, idx + 1, to->ubuf, &sep)))
            return rc;
        if (!at->has_upper || bt_key_less(t->kind, sep, at->upper)) {
            to->has_upper = 1;
            to->upper = sep;
            return 0;
        }
    }
    take_upper(t->kind, to, at);
    return 0;
}

/* One level of a group's descent: each key's node in cur, its child into
 * next.  A key in the node of the key before it, and below the separator
 * that key's child ends at, goes to that child without a search; before
 * the first key of the group is the last key of the group before. */
static int finger_level(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                        bt_finger *f, unsigned d, const bn_key *keys,
                        unsigned n)
{
    fpos *cur = f->row[d % 2], *next = f->row[(d + 1) % 2];
    for (unsigned j = 0; j < n; j++)
        if (j == 0 || !same_node(cur[j].ref, cur[j - 1].ref))
            prefetch_keys(db, rd, cur[j].ref);
    for (unsigned j = 0; j < n; j++) {
        const fpos *pn = j ? &cur[j - 1] : f->held ? &f->path[d] : NULL;
        const fpos *pc = j ? &next[j - 1] : &f->path[d + 1];
        if (pn && same_node(pn->ref, cur[j].ref) &&
            (!pc->has_upper || bt_key_less(t->kind, keys[j], pc->upper))) {
            next[j].ref = pc->ref;
            take_upper(t->kind, &next[j], pc);
            continue;
        }
        int rc = step_down(db, rd, t, &cur[j], keys[j], &next[j]);
        if (rc)
            return rc;
    }
    return 0;
}

/* Keeps where the group's last key went at level d, for the next group. */
static void keep_path(bt_finger *f, unsigned kind, unsigned d, unsigned last)
{
    const fpos *p = &f->row[d % 2][last];
    f->path[d].ref = p->ref;
    take_upper(kind, &f->path[d], p);
}

int bt_finger_leaves(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                     bt_finger *f, const bn_key *keys, unsigned n,
                     bn_child *leaves)
{
    if (f->depth == 0)
        return BONSAI_NOTFOUND;
    if (n == 0 || n > BT_FINGER_KEYS)
        return BONSAI_INVALID;
    for (unsigned j = 0; j < n; j++) {
        f->row[0][j].ref = t->root;
        f->row[0][j].has_upper = 0;
    }
    for (unsigned d = 0; d + 1 < f->depth; d++) {
        int rc = finger_level(db, rd, t, f, d, keys, n);
        if (rc) {
            f->held = 0;
            return rc;
        }
        /* the old path at d is no longer asked for; at d + 1 it is,
         * by the next level */
        keep_path(f, t->kind, d, n - 1);
    }
    keep_path(f, t->kind, f->depth - 1, n - 1);
    f->held = 1;
    for (unsigned j = 0; j < n; j++)
        leaves[j] = f->row[(f->depth - 1) % 2][j].ref;
    return 0;
}

void bt_prefetch_leaf(const bonsai_db *db, const bt_tree *t, bn_key key,
                      uint64_t *last)
{
    const bt_node *n = t->root.mem;
    while (n && !n->bn.leaf) {
        int found;
        const bn_child *c = &n->bn.child[bn_search(&n->bn, &key, &found)];
        if (n->level == 1) {
            if (!c->mem && c->ext.pgno != *last &&
                tree_ext_ok(db, db->al.end, c->ext))
                prefetch_span(tree_ext_ptr(db, c->ext), 0,
                              (size_t)c->ext.npages * db->page_size);
            *last = c->ext.pgno;
            return;
        }
        n = c->mem;
    }
}

/* In a leaf searched last for a smaller key, from where that search
 * ended; *m holds this search's end. */
static int search_on(const nview *v, unsigned kind, bn_key key, bn_mark *m,
                     uint32_t *idx, int *found)
{
    if (!v->mem)
        return bn_img_search_on(v->img, &v->info, kind, key, m, idx, found);
    *idx = bn_search_leaf_from(&v->mem->bn, m->set ? m->idx : 0, key, found);
    m->set = 1;
    m->idx = *idx;
    return 0;
}

int bt_leaf_get(bonsai_db *db, const bt_rd *rd, const bt_tree *t,
                bt_finger *f, bn_child leaf, bn_key key, bonsai_val *val)
{
    uint32_t idx;
    int found, rc;
    if (!f->mark.set || !same_node(f->leaf, leaf)) {
        f->leaf = leaf;
        f->mark.set = 0;
        f->have_view = 0;
    }
    if (!f->have_view) { /* a leaf's first key of the run, or unpacked */
        if ((rc = view_of(db, rd, t->kind, &leaf, &f->view)))
            return rc;
        if (!view_leaf(&f->view))
            return BONSAI_CORRUPT;
        f->have_view = f->view.mem ||
                       f->view.img == tree_ext_ptr(db, leaf.ext);
    }
    const nview *v = &f->view;
    if ((rc = search_on(v, t->kind, key, &f->mark, &idx, &found)))
        return rc;
    return found ? leaf_value(db, rd, v, idx, val) : BONSAI_NOTFOUND;
}

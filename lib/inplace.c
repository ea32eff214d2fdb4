/* SPDX-License-Identifier: MIT */
/*
 * inplace.c - a run of waiting puts written into its leaf's image where
 * the image lies, without decoding the leaf.
 *
 * Near the cap a batch of waiting puts is small beside the tree, so each
 * put lands in a leaf of its own, which bt_put_run decodes, changes,
 * caches, lays out and encodes again for that one entry.  Where the store
 * overwrites images in place anyway (anonymous memory, no transactions)
 * and the new image still fits the leaf's run, the codec can make the new
 * image from the old one and the run's keys directly (bn_img_add_u64):
 * the leaf's extent stays, so its parent does not change, and no room is
 * taken.  Any other case takes the decoded path.
 */
#include "btree.h"

#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "putbuf.h"
#include "tree.h"

/* v with room for `need` items of elem bytes (*cap counts them), moved
 * perhaps; NULL when memory ran out (v kept). */
static void *with_room(void *v, size_t *cap, size_t need, size_t elem)
{
    if (*cap >= need)
        return v;
    void *w = realloc(v, need * elem);
    if (w)
        *cap = need;
    return w;
}

/* Whether t's images may be rewritten where they lie with keys alone. */
static int store_allows(const bonsai_db *db, const bt_tree *t)
{
    return db->anonymous && !db->cow && t->kind == BONSAI_KEY_U64 &&
           db->opt.compression == BONSAI_COMPRESS_NONE && t->depth >= 2;
}

/* The run's keys into db->run_keys while they fall below bound and their
 * values are empty: how many. */
static uint32_t gather_run(bonsai_db *db, const putbuf *b, uint32_t from,
                           uint32_t max, uint64_t bound, int has_bound)
{
    uint32_t m = 0;
    while (m < max && from + m < b->n) {
        uint32_t vlen;
        uint64_t key = pb_key(b, from + m).u;
        pb_value(b, from + m, &vlen);
        if (vlen != 0 || (has_bound && key >= bound))
            break;
        db->run_keys[m++] = key;
    }
    return m;
}

/* Whether m more keys may fit in cap bytes, if each takes what the
 * image's keys take on average: a run that would not is not worth the
 * work of finding out (far from the cap, runs are long and leaves
 * mostly outgrow their runs). */
static int may_fit(const bn_info *info, uint32_t m, size_t cap)
{
    uint64_t per_key = info->count ? info->keys_len / info->count : 0;
    return info->length + (uint64_t)m * per_key <= cap;
}

/* A leaf's image as it lies in the store. */
typedef struct leaf_image {
    bn_ext ext;
    uint8_t *img;
    bn_info info;
    uint64_t bound; /* the lowest key beyond the leaf, if has_bound */
    int has_bound;
} leaf_image;

/* key's leaf's image into *li, its header checked, where no decoded node
 * stands for the leaf: *found = 0 when one does (or the extent is not
 * plainly inside the store). */
static int find_leaf_image(bonsai_db *db, bt_tree *t, bn_key key,
                           leaf_image *li, int *found)
{
    bt_node *parent;
    bn_key bound = {0};
    *found = 0;
    li->has_bound = 0;
    int rc = tree_descend(db, t, key, 1, &parent, &bound, &li->has_bound);
    if (rc)
        return rc;
    int exact;
    uint32_t idx = bn_search(&parent->bn, &key, &exact);
    if (idx + 1 < parent->bn.n) {
        bound = bn_key_at(&parent->bn, idx + 1);
        li->has_bound = 1;
    }
    li->bound = bound.u;
    bn_child c = parent->bn.child[idx];
    if (c.mem || !tree_ext_ok(db, db->al.end, c.ext))
        return 0;
    li->ext = c.ext;
    li->img = db->rg.base + c.ext.pgno * db->page_size;
    rc = bn_img_check(li->img, (size_t)c.ext.npages * db->page_size,
                      t->kind, 0, &li->info);
    *found = rc == 0;
    return rc;
}

/* db->run_keys for a run of max keys and a leaf of count, db->scratch
 * for an image of cap bytes. */
static int reserve_scratch(bonsai_db *db, uint32_t count, uint32_t max,
                           size_t cap)
{
    /* the run's keys, then the codec's scratch */
    size_t words = (bn_img_add_scratch(count, max) + 7) / 8;
    uint64_t *keys = with_room(db->run_keys, &db->run_keys_cap,
                               (size_t)max + words, sizeof *keys);
    if (keys)
        db->run_keys = keys;
    uint8_t *out = with_room(db->scratch, &db->scratch_cap, cap, 1);
    if (out)
        db->scratch = out;
    return keys && out ? 0 : BONSAI_NOMEM;
}

/* The new image (db->scratch, len bytes, growth bound grow) over the old
 * one, and the tree told of its new keys. */
static void write_image(bonsai_db *db, bt_tree *t, const leaf_image *li,
                        size_t len, uint32_t grow)
{
    uint32_t count = get_le16(db->scratch + 2);
    memcpy(li->img, db->scratch, len);
    if (len < li->info.length)
        memset(li->img + len, 0, li->info.length - len);
    t->count += count - li->info.count;
    t->record_dirty = 1;
    db->write_gen++;
    if (grow > db->grow_max)
        db->grow_max = grow;
    tree_forget_unread(db, li->ext);
}

int bt_put_run_in_place(bonsai_db *db, bt_tree *t, const putbuf *b,
                        uint32_t from, uint32_t max, uint32_t *to, int *done)
{
    *done = 0;
    *to = from;
    if (!store_allows(db, t))
        return 0;
    leaf_image li;
    int found, rc = find_leaf_image(db, t, pb_key(b, from), &li, &found);
    if (rc || !found)
        return rc;
    size_t run = (size_t)li.ext.npages * db->page_size;
    size_t cap = run < db->opt.node_bytes ? run : db->opt.node_bytes;
    if ((rc = reserve_scratch(db, li.info.count, max, cap)))
        return rc;
    uint32_t m = gather_run(db, b, from, max, li.bound, li.has_bound);
    if (m == 0 || li.info.count + m > db->opt.node_entries ||
        !may_fit(&li.info, m, cap))
        return 0;
    size_t len;
    uint32_t grow;
    rc = bn_img_add_u64(li.img, &li.info, db->run_keys, m,
                        db->run_keys + max, db->scratch, cap, &len, &grow);
    if (rc == BONSAI_INVALID)
        return 0; /* another form, or too large: the decoded path */
    if (rc)
        return rc;
    write_image(db, t, &li, len, grow);
    *to = from + m;
    *done = 1;
    return 0;
}

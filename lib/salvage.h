/* SPDX-License-Identifier: MIT */
/*
 * salvage.h - reading what can still be read of a damaged store
 * (salvage.c): every map whose record the catalog still holds, and of
 * each every entry outside the subtrees that cannot be read.  What
 * bonsai-dump -r writes.  Internal: not part of bonsai.h.
 *
 * A pass reads one read snapshot.  It walks each tree from its root in
 * key order, decoding nodes as readers do (checksums included), and hands
 * each entry (key, value, overflow values whole and checked) to the
 * caller.  A node that cannot be read (outside the snapshot's pages,
 * reached a second time, a bad header, checksum or section, a leaf where
 * a branch belongs) is reported with the separators that bound it in its
 * parent, and the walk goes on with the next subtree.  Each entry must lie
 * within the separators its parents give, so what a pass hands on is in
 * strictly increasing key order whatever the file holds; one that does
 * not is dropped and reported.  The pass claims every extent it reads in
 * one set of pages (pageset.h): no page is read twice, so a forged file
 * costs at most its pages; recursion follows the tree's depth (at most
 * 32), memory one decoded node per level.
 */
#ifndef BONSAI_SALVAGE_H
#define BONSAI_SALVAGE_H

#include "internal.h"

/* What a loss report is about. */
#define SV_NODE 0    /* a node could not be read: keys from lo up to below
                        hi are lost (NULL: no bound on that side) */
#define SV_OUTSIDE 1 /* a leaf read holds `entries` entries outside lo..hi,
                        the separators its parents give: dropped */
#define SV_VALUE 2   /* the value of key *lo could not be read: dropped */
#define SV_RECORD 3  /* catalog: the record of the map named *lo (its raw
                        name bytes) could not be read: the map is lost */

typedef struct sv_loss {
    int what;            /* SV_* */
    const char *map;     /* the map; "" for the catalog */
    uint64_t pgno;       /* the node's first page (SV_VALUE, SV_RECORD: of
                            the leaf holding the entry) */
    const char *why;     /* what is wrong there, a phrase */
    unsigned kind;       /* BONSAI_KEY_* of lo and hi */
    const bn_key *lo, *hi;
    uint64_t entries;    /* SV_OUTSIDE */
} sv_loss;

/* An entry: key (of the tree's kind) and value, valid during the call.
 * A non-zero return stops the walk, which returns it. */
typedef int (*sv_entry_fn)(void *ctx, bn_key key, bonsai_val val);
typedef void (*sv_loss_fn)(void *ctx, const sv_loss *loss);

/* A map the catalog lists with a record that could be read. */
typedef struct sv_map {
    char *name;
    bt_tree t;           /* t.kind, t.count: what the record says */
} sv_map;

typedef struct salvage salvage;

/* A pass over the snapshot of the read transaction txn, reporting losses
 * to loss(ctx, ...).  0, BONSAI_INVALID (no read transaction),
 * BONSAI_CORRUPT (the snapshot ends below the first data page) or
 * BONSAI_NOMEM. */
int sv_begin(bonsai_txn *txn, sv_loss_fn loss, void *ctx, salvage **out);
void sv_end(salvage *s);

/* The maps of the catalog whose records can be read, in name order, into
 * *maps (*n of them; free with sv_maps_free).  0 or BONSAI_NOMEM. */
int sv_maps(salvage *s, sv_map **maps, size_t *n);
void sv_maps_free(sv_map *maps, size_t n);

/* Every entry of map m that can be read, in key order, to entry(ctx, ...).
 * 0, BONSAI_NOMEM, or what entry returned. */
int sv_walk(salvage *s, const sv_map *m, sv_entry_fn entry, void *ctx);

#endif

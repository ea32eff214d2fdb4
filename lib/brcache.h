/* SPDX-License-Identifier: MIT */
/*
 * brcache.h - the branch nodes a read transaction keeps decoded.
 *
 * A read snapshot never changes, so a branch image decoded once stays true
 * for as long as the snapshot lives.  Searching a decoded branch (a plain
 * key array) costs a fraction of searching its image in place (header
 * check, group index, varints), and every lookup of a long read
 * transaction passes the same few upper branches.  A branch is decoded on
 * its second visit, so that a transaction making one lookup pays only a
 * table probe per level; leaves are never kept (a lookup's value points
 * into the leaf image, and leaves are most of the store).  Decoding stops
 * once the kept nodes and the table reach BR_CACHE_MAX bytes: the upper
 * levels, visited most, are decoded first.
 *
 * A kept node is linked into the tree as the writer's decoded nodes are:
 * its parent's child entry points to it once a descent has passed there
 * (view.c), and its bt_node fields say where its image lives (home,
 * has_home) and, level 1, that its children are leaves (0: not known).
 *
 * A cache belongs to one read transaction, used by one thread at a time,
 * and is freed with it.
 */
#ifndef BONSAI_BRCACHE_H
#define BONSAI_BRCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "btnode.h"

#define BR_CACHE_MAX ((size_t)8 << 20)

typedef struct br_entry br_entry;

typedef struct br_cache {
    br_entry *tab;  /* open addressing by page number; NULL until used */
    uint32_t cap;   /* entries in tab, a power of two */
    uint32_t used;
    size_t bytes;   /* tab and the kept nodes */
    br_entry *last; /* the entry br_find found last: a lookup's root */
} br_cache;

/* The decoded branch of kind kept for extent e, or NULL. */
bt_node *br_find(br_cache *c, bn_ext e, unsigned kind);

/* Counts a visit of the branch image img (avail bytes) at e, which
 * br_find did not have; from the second visit on, decodes and keeps it
 * while the budget allows.  The kept node, or NULL (not yet, over budget,
 * out of memory or an image the decoder refuses: the caller reads the
 * image as before and reports what it finds). */
bt_node *br_visit(br_cache *c, bn_ext e, unsigned kind, const uint8_t *img,
                  size_t avail);

/* Counts bytes that other memory of the transaction's lookups holds (its
 * table of leaves, leafdir.h) within the same budget.  0, or -1 when the
 * budget has no room for them. */
int br_charge(br_cache *c, size_t bytes);
size_t br_room(const br_cache *c);
void br_refund(br_cache *c, size_t bytes);

/* Frees every kept node and the table. */
void br_cache_free(br_cache *c);

#endif

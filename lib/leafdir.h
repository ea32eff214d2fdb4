/* SPDX-License-Identifier: MIT */
/*
 * leafdir.h - a u64 tree's leaves as one sorted table: each leaf's lower
 * bound (the key a descent first sends it) and its extent, found through
 * a table of buckets over the keys' range.
 *
 * A random get at 20 M keys spends about a fifth of its time finding its
 * leaf: the root's keys, then the struct and then the arrays of a decoded
 * branch, each a trip to the L3 cache that must end before the leaf's
 * lines can be asked of memory.  The table answers with a bucket and one
 * or two entries, most often in one line, so the leaf's lines are asked
 * for sooner (7-13 % less time a get, in-process A/B).
 *
 * Pure data: it neither reads a tree nor knows when one changes.  Whoever
 * builds it (view.c) fills it with every leaf in key order and says when
 * it is no longer true (a stamp it keeps beside it).
 */
#ifndef BONSAI_LEAFDIR_H
#define BONSAI_LEAFDIR_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

/* A leaf: its lower bound and where it lies, pgno << 24 | npages. */
typedef struct ld_leaf {
    uint64_t lo;
    uint64_t place;
} ld_leaf;

/* A bucket of keys: the first leaf they may reach (the leaves they reach
 * lie from there up to the next bucket's first), and the page of the leaf
 * that holds the middle of its range (0: not known), whose translation
 * and header are asked for while the leaf is being found: a leaf's first
 * touch waits some 20 ns for its address on this machine, and the guess
 * is right for 79-88 % of random keys (at one to two buckets a leaf). */
typedef struct ld_bucket {
    uint32_t first;
    uint32_t page;
} ld_bucket;

typedef struct leafdir {
    ld_leaf *leaf;     /* n leaves, lo strictly increasing, leaf[0].lo 0 */
    uint32_t n, cap;
    ld_bucket *bucket;
    uint32_t nb;       /* a power of two */
    unsigned shift;    /* bucket of key: (key - base) >> shift */
    uint64_t base;
    size_t bytes;      /* both arrays */
    /* the tree it was built from, and the builder's stamp then */
    bn_ext root;
    unsigned depth;
    uint64_t stamp[2];
    /* lookups since the stamp last changed, while none was built */
    uint64_t asked;
    uint64_t asked_stamp[2];
} leafdir;

/* Limits of ld_leaf.place: a leaf beyond them leaves the table unbuilt. */
#define LD_PGNO_BITS 40u
#define LD_NPAGES_BITS 24u

/* Appends a leaf with lower bound lo at e.  0; -1 when lo is not above
 * the last one's (the first leaf's must be 0), e does not fit a place,
 * or memory ran out. */
int ld_add(leafdir *d, uint64_t lo, bn_ext e);

/* After the last ld_add: the buckets.  0, or -1 (no leaf, no memory). */
int ld_finish(leafdir *d);

/* Frees the arrays; the stamps and counts stay. */
void ld_drop(leafdir *d);

static inline int ld_built(const leafdir *d)
{
    return d->bucket != NULL;
}

static inline uint32_t ld_bucket_of(const leafdir *d, uint64_t key)
{
    uint64_t off = key > d->base ? (key - d->base) >> d->shift : 0;
    return off < d->nb ? (uint32_t)off : d->nb - 1;
}

/* The page of the leaf key most likely lies in (0: not known). */
static inline uint32_t ld_likely_page(const leafdir *d, uint64_t key)
{
    return d->bucket[ld_bucket_of(d, key)].page;
}

/* The leaf whose range holds key: the last with lo <= key. */
static inline uint32_t ld_find(const leafdir *d, uint64_t key)
{
    uint32_t b = ld_bucket_of(d, key);
    uint32_t i = d->bucket[b].first;
    uint32_t last = b + 1 < d->nb ? d->bucket[b + 1].first : d->n - 1;
    while (last - i > 8) { /* keys crowded into one bucket */
        uint32_t mid = i + (last - i + 1) / 2;
        if (d->leaf[mid].lo <= key)
            i = mid;
        else
            last = mid - 1;
    }
    while (i < last && d->leaf[i + 1].lo <= key)
        i++;
    return i;
}

static inline bn_ext ld_ext(const leafdir *d, uint32_t i)
{
    uint64_t p = d->leaf[i].place;
    return (bn_ext){p >> LD_NPAGES_BITS,
                    (uint32_t)(p & ((1u << LD_NPAGES_BITS) - 1))};
}

/* The bounds of leaf i's keys, [lo, hi): 0 for the first and the last
 * leaf, whose ranges are open. */
static inline int ld_bounds(const leafdir *d, uint32_t i, uint64_t *lo,
                            uint64_t *hi)
{
    if (i == 0 || i + 1 >= d->n)
        return 0;
    *lo = d->leaf[i].lo;
    *hi = d->leaf[i + 1].lo;
    return 1;
}

#endif

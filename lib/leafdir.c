/* SPDX-License-Identifier: MIT */
/*
 * leafdir.c - building a tree's table of leaves (leafdir.h).
 */
#include "leafdir.h"

#include <stdlib.h>

int ld_add(leafdir *d, uint64_t lo, bn_ext e)
{
    if (d->n == 0 ? lo != 0 : lo <= d->leaf[d->n - 1].lo)
        return -1;
    if (e.pgno >> LD_PGNO_BITS || e.npages >> LD_NPAGES_BITS)
        return -1;
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 256;
        ld_leaf *v = cap > d->cap ? realloc(d->leaf, cap * sizeof *v) : NULL;
        if (!v)
            return -1;
        d->leaf = v;
        d->cap = cap;
    }
    d->leaf[d->n++] = (ld_leaf){lo, e.pgno << LD_NPAGES_BITS | e.npages};
    return 0;
}

/* About one leaf a bucket: the buckets span the range from the second
 * leaf's bound (below it, all is the first leaf's) to the last one's. */
static void size_buckets(leafdir *d)
{
    d->nb = 1;
    while (d->nb < d->n)
        d->nb *= 2;
    d->base = d->n > 1 ? d->leaf[1].lo : 0;
    uint64_t span = d->leaf[d->n - 1].lo - d->base;
    d->shift = 0;
    while (d->shift < 63 && (span >> d->shift) >= d->nb)
        d->shift++;
}

/* The middle of bucket b's keys (the last bucket's: as if it ended where
 * the others do), at most 2^64 - 1. */
static uint64_t middle_of(const leafdir *d, uint32_t b)
{
    uint64_t half = (UINT64_C(1) << d->shift) / 2;
    if (b > (UINT64_MAX >> d->shift))
        return UINT64_MAX;
    uint64_t off = ((uint64_t)b << d->shift) + half;
    return off > UINT64_MAX - d->base ? UINT64_MAX : d->base + off;
}

/* Bucket b's first leaf: the one before the first whose lower bound lies
 * in a bucket at or after b.  Every leaf a key of b may reach lies from
 * there up to the next bucket's first. */
int ld_finish(leafdir *d)
{
    if (d->n == 0)
        return -1;
    ld_leaf *fit = realloc(d->leaf, (size_t)d->n * sizeof *d->leaf);
    if (fit) { /* the doubling's slack back: a third of the leaves' bytes */
        d->leaf = fit;
        d->cap = d->n;
    }
    size_buckets(d);
    d->bucket = malloc((size_t)d->nb * sizeof *d->bucket);
    if (!d->bucket)
        return -1;
    uint32_t i = 0, m = 0;
    for (uint32_t b = 0; b < d->nb; b++) {
        while (i + 1 < d->n && ld_bucket_of(d, d->leaf[i + 1].lo) < b)
            i++;
        uint64_t mid = middle_of(d, b);
        while (m + 1 < d->n && d->leaf[m + 1].lo <= mid)
            m++;
        uint64_t page = d->leaf[m].place >> LD_NPAGES_BITS;
        d->bucket[b].first = i;
        d->bucket[b].page = page >> 32 ? 0 : (uint32_t)page;
    }
    d->bytes = (size_t)d->cap * sizeof *d->leaf +
               (size_t)d->nb * sizeof *d->bucket;
    return 0;
}

void ld_drop(leafdir *d)
{
    free(d->leaf);
    free(d->bucket);
    d->leaf = NULL;
    d->bucket = NULL;
    d->n = d->cap = d->nb = 0;
    d->bytes = 0;
}

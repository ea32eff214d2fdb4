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

/* The bucket of key as ld_find computes it. */
static uint32_t bucket_of(const leafdir *d, uint64_t key)
{
    uint64_t off = key > d->base ? (key - d->base) >> d->shift : 0;
    return off < d->nb ? (uint32_t)off : d->nb - 1;
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

/* Bucket b holds the first leaf whose lower bound lies in a bucket at or
 * after b, less one: every leaf a key of b may reach lies from there up
 * to the next bucket's value. */
int ld_finish(leafdir *d)
{
    if (d->n == 0)
        return -1;
    size_buckets(d);
    d->bucket = malloc((size_t)d->nb * sizeof *d->bucket);
    if (!d->bucket)
        return -1;
    uint32_t i = 0;
    for (uint32_t b = 0; b < d->nb; b++) {
        while (i + 1 < d->n && bucket_of(d, d->leaf[i + 1].lo) < b)
            i++;
        d->bucket[b] = i;
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

/* SPDX-License-Identifier: MIT */
/*
 * brcache.c - the branch nodes a read transaction keeps decoded
 * (brcache.h).
 */
#include "brcache.h"

#include <stdlib.h>

#include "bonsai.h"

/* visits 0 marks an empty entry. */
struct br_entry {
    uint64_t pgno;
    uint32_t npages;
    uint32_t visits;
    bt_node *node;
};

#define BR_FIRST_CAP 64u

static uint32_t home_of(uint64_t pgno, uint32_t cap)
{
    return (uint32_t)((pgno * UINT64_C(0x9E3779B97F4A7C15)) >> 32) &
           (cap - 1);
}

/* The entry of pgno, or the empty entry where it would go. */
static br_entry *probe(br_entry *tab, uint32_t cap, uint64_t pgno)
{
    uint32_t i = home_of(pgno, cap);
    while (tab[i].visits && tab[i].pgno != pgno)
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

/* A descent's other branches are linked into their decoded parents, so
 * the table is asked for the root, the same page each time: the entry
 * found last is tried first. */
bt_node *br_find(br_cache *c, bn_ext e, unsigned kind)
{
    if (!c->tab)
        return NULL;
    br_entry *at = c->last && c->last->pgno == e.pgno
                       ? c->last
                       : probe(c->tab, c->cap, e.pgno);
    if (!at->node || at->npages != e.npages || at->node->bn.kind != kind)
        return NULL;
    c->last = at;
    return at->node;
}

/* Doubles the table (or makes the first).  0, or -1 when the budget or
 * memory says no. */
static int grow(br_cache *c)
{
    uint32_t cap = c->cap ? c->cap * 2 : BR_FIRST_CAP;
    size_t bytes = (size_t)cap * sizeof(br_entry);
    if (c->bytes - (size_t)c->cap * sizeof(br_entry) + bytes > BR_CACHE_MAX)
        return -1;
    br_entry *tab = calloc(cap, sizeof *tab);
    if (!tab)
        return -1;
    for (uint32_t i = 0; i < c->cap; i++)
        if (c->tab[i].visits)
            *probe(tab, cap, c->tab[i].pgno) = c->tab[i];
    free(c->tab);
    c->bytes += bytes - (size_t)c->cap * sizeof(br_entry);
    c->last = NULL; /* it pointed into the old table */
    c->tab = tab;
    c->cap = cap;
    return 0;
}


static size_t node_bytes(const bt_node *n)
{
    size_t per = n->bn.kind == BONSAI_KEY_U64 ? sizeof *n->bn.k64
                                              : sizeof *n->bn.kb;
    return sizeof *n + (size_t)n->bn.cap * (per + sizeof *n->bn.child) +
           n->bn.arena_cap;
}

/* Decodes the image into a new node within the budget, or NULL. */
static bt_node *decode(br_cache *c, bn_ext e, unsigned kind,
                       const uint8_t *img, size_t avail)
{
    bt_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    bn_init(&n->bn, kind, 0);
    if (bn_decode_frozen(img, avail, kind, &n->bn) == 0 && !n->bn.leaf &&
        c->bytes + node_bytes(n) <= BR_CACHE_MAX) {
        c->bytes += node_bytes(n);
        n->home = e;
        n->has_home = 1;
        return n;
    }
    bn_clear(&n->bn);
    free(n);
    return NULL;
}

bt_node *br_visit(br_cache *c, bn_ext e, unsigned kind, const uint8_t *img,
                  size_t avail)
{
    if (c->bytes >= BR_CACHE_MAX)
        return NULL;
    if ((c->used + 1) * 2 > c->cap && grow(c))
        return NULL;
    br_entry *at = probe(c->tab, c->cap, e.pgno);
    if (!at->visits) {
        *at = (br_entry){e.pgno, e.npages, 1, NULL};
        c->used++;
        return NULL;
    }
    /* decoded once at most: a refusal is not tried again */
    if (at->visits >= 2 || at->npages != e.npages)
        return NULL;
    at->visits = 2;
    at->node = decode(c, e, kind, img, avail);
    return at->node;
}

int br_charge(br_cache *c, size_t bytes)
{
    if (bytes > br_room(c))
        return -1;
    c->bytes += bytes;
    return 0;
}

size_t br_room(const br_cache *c)
{
    return c->bytes < BR_CACHE_MAX ? BR_CACHE_MAX - c->bytes : 0;
}

void br_refund(br_cache *c, size_t bytes)
{
    c->bytes -= bytes < c->bytes ? bytes : c->bytes;
}

void br_cache_free(br_cache *c)
{
    for (uint32_t i = 0; c->tab && i < c->cap; i++) {
        if (c->tab[i].node) {
            bn_clear(&c->tab[i].node->bn);
            free(c->tab[i].node);
        }
    }
    free(c->tab);
    *c = (br_cache){0};
}

/* SPDX-License-Identifier: MIT */
/*
 * pageset.h - a set of the pages [first, end) a walk over a tree has met
 * (pageset.c).
 *
 * Every walk that can meet a forged file (free space at open, verify and
 * the space figures, bonsai_map_stat, dropping a tree) claims each extent
 * before it reads or follows it: an extent outside [first, end), or one
 * that meets a page already claimed, is refused.  So no page is visited
 * twice, and a walk costs at most the pages of the file, however its
 * branches are forged (a child named by many branches would otherwise be
 * walked once per path to it).
 */
#ifndef BONSAI_PAGESET_H
#define BONSAI_PAGESET_H

#include <stdint.h>

#include "node.h"

typedef struct pageset {
    uint64_t first, end;
    uint8_t *bits; /* bit p - first: page p is in the set */
} pageset;

/* An empty set over [first, end), first <= end.  0 or BONSAI_NOMEM. */
int ps_init(pageset *s, uint64_t first, uint64_t end);
void ps_free(pageset *s);

/* Is page p (first <= p < end) in the set? */
int ps_has(const pageset *s, uint64_t p);

/* Adds / removes page p (first <= p < end). */
void ps_add(pageset *s, uint64_t p);
void ps_del(pageset *s, uint64_t p);

/* Is e a run of at least one page inside [first, end)? */
int ps_inside(const pageset *s, bn_ext e);

/* Adds e's pages: 0, or BONSAI_CORRUPT when e is not inside the set's
 * range or meets a page already in it (then nothing is added). */
int ps_claim(pageset *s, bn_ext e);

#endif

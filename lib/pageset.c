/* SPDX-License-Identifier: MIT */
/*
 * pageset.c - a bitmap of pages (pageset.h).
 */
#include "pageset.h"

#include <stdlib.h>

#include "bonsai.h"

int ps_init(pageset *s, uint64_t first, uint64_t end)
{
    *s = (pageset){first, end, calloc((end - first) / 8 + 1, 1)};
    return s->bits ? 0 : BONSAI_NOMEM;
}

void ps_free(pageset *s)
{
    free(s->bits);
    s->bits = NULL;
}

int ps_has(const pageset *s, uint64_t p)
{
    uint64_t i = p - s->first;
    return (s->bits[i >> 3] >> (i & 7)) & 1;
}

void ps_add(pageset *s, uint64_t p)
{
    uint64_t i = p - s->first;
    s->bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

void ps_del(pageset *s, uint64_t p)
{
    uint64_t i = p - s->first;
    s->bits[i >> 3] &= (uint8_t)~(1u << (i & 7));
}

int ps_inside(const pageset *s, bn_ext e)
{
    return e.npages >= 1 && e.pgno >= s->first && e.pgno < s->end &&
           e.npages <= s->end - e.pgno;
}

int ps_claim(pageset *s, bn_ext e)
{
    if (!ps_inside(s, e))
        return BONSAI_CORRUPT;
    for (uint64_t p = e.pgno; p < e.pgno + e.npages; p++)
        if (ps_has(s, p))
            return BONSAI_CORRUPT;
    for (uint64_t p = e.pgno; p < e.pgno + e.npages; p++)
        ps_add(s, p);
    return 0;
}

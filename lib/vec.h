/* SPDX-License-Identifier: MIT */
/*
 * vec.h - growable arrays of page runs and of held runs, the only
 * containers the allocator and the writer need.
 */
#ifndef BONSAI_VEC_H
#define BONSAI_VEC_H

#include <stdint.h>
#include <stdlib.h>

#include "bonsai.h"
#include "node.h"

/* Room for one more item in an array of n items of elem bytes with room
 * for *cap, doubling from first: the array (moved, perhaps), or NULL
 * when memory ran out (the old one is kept). */
static inline void *vec_room(void *v, size_t n, size_t *cap, size_t elem,
                             size_t first)
{
    if (n < *cap)
        return v;
    size_t c = *cap ? *cap * 2 : first;
    void *w = realloc(v, c * elem);
    if (w)
        *cap = c;
    return w;
}

typedef struct extvec {
    bn_ext *v;
    size_t n, cap;
} extvec;

static inline int extvec_push(extvec *a, bn_ext e)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        bn_ext *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return BONSAI_NOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = e;
    return 0;
}

static inline void extvec_free(extvec *a)
{
    free(a->v);
    *a = (extvec){0};
}

typedef struct ptrvec {
    void **v;
    size_t n, cap;
} ptrvec;

static inline int ptrvec_push(ptrvec *a, void *p)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void **v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return BONSAI_NOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = p;
    return 0;
}

/* Makes room for `more` pushes that then cannot fail. */
static inline int ptrvec_reserve(ptrvec *a, size_t more)
{
    if (a->n + more <= a->cap)
        return 0;
    size_t cap = a->cap ? a->cap : 16;
    while (cap < a->n + more)
        cap *= 2;
    void **v = realloc(a->v, cap * sizeof *v);
    if (!v)
        return BONSAI_NOMEM;
    a->v = v;
    a->cap = cap;
    return 0;
}

static inline void ptrvec_free(ptrvec *a)
{
    free(a->v);
    *a = (ptrvec){0};
}

#endif

/*
 * alloc.c - extent allocation: exact-size free lists first, then a larger
 * run split, then fresh pages at the high-water mark, then (before giving
 * up with BONSAI_FULL) one merge of adjacent free runs and a retry.
 */
#include "alloc.h"

#include <string.h>

void alloc_init(alloc *a, region *rg, uint32_t page_size, uint64_t first,
                uint64_t end, uint32_t slot)
{
    memset(a, 0, sizeof *a);
    a->slot = slot ? slot : 1;
    a->rg = rg;
    a->page_size = page_size;
    a->first = first;
    a->end = end;
    a->limit = rg->cap / page_size;
}

void alloc_free_all(alloc *a)
{
    for (unsigned k = 0; k <= ALLOC_CLASSES; k++)
        extvec_free(&a->lists[k]);
    extvec_free(&a->large);
    extvec_free(&a->txn_alloc);
    extvec_free(&a->txn_freed);
    free(a->pending);
    a->pending = NULL;
    a->npending = a->cap_pending = 0;
}

int alloc_put(alloc *a, bn_ext e)
{
    if (e.npages == 0)
        return 0;
    extvec *list = e.npages <= ALLOC_CLASSES ? &a->lists[e.npages] : &a->large;
    int rc = extvec_push(list, e);
    if (rc == 0) {
        a->free_pages += e.npages;
        a->free_slots += e.npages / a->slot;
    }
    return rc;
}

/* Takes the run at index i out of list and hands out its first npages. */
static int take_from(alloc *a, extvec *list, size_t i, uint32_t npages,
                     uint64_t *pgno)
{
    bn_ext e = list->v[i];
    list->v[i] = list->v[--list->n];
    a->free_pages -= e.npages;
    a->free_slots -= e.npages / a->slot;
    *pgno = e.pgno;
    if (e.npages > npages) {
        bn_ext rest = {e.pgno + npages, e.npages - npages};
        if (alloc_put(a, rest)) {
            /* cannot record the remainder: give the whole run back */
            list->v[list->n++] = e;
            a->free_pages += e.npages;
            a->free_slots += e.npages / a->slot;
            return BONSAI_NOMEM;
        }
    }
    return 0;
}

static int from_free_lists(alloc *a, uint32_t npages, uint64_t *pgno)
{
    for (uint32_t k = npages; k <= ALLOC_CLASSES; k++)
        if (a->lists[k].n)
            return take_from(a, &a->lists[k], a->lists[k].n - 1, npages,
                             pgno);
    for (size_t i = 0; i < a->large.n; i++)
        if (a->large.v[i].npages >= npages)
            return take_from(a, &a->large, i, npages, pgno);
    return BONSAI_NOTFOUND;
}

static int from_high_water(alloc *a, uint32_t npages, uint64_t *pgno)
{
    if (a->end + npages > a->limit)
        return BONSAI_FULL;
    int rc = region_grow(a->rg, (a->end + npages) * a->page_size);
    if (rc)
        return rc;
    *pgno = a->end;
    a->end += npages;
    return 0;
}

static int get_run(alloc *a, uint32_t npages, uint64_t *pgno)
{
    int rc = from_free_lists(a, npages, pgno);
    if (rc != BONSAI_NOTFOUND)
        return rc;
    rc = from_high_water(a, npages, pgno);
    if (rc != BONSAI_FULL || a->free_pages < npages)
        return rc;
    rc = alloc_defrag(a);
    if (rc)
        return rc;
    rc = from_free_lists(a, npages, pgno);
    if (rc != BONSAI_NOTFOUND)
        return rc;
    return from_high_water(a, npages, pgno);
}

int alloc_get(alloc *a, uint32_t npages, uint64_t *pgno)
{
    if (npages == 0)
        return BONSAI_INVALID;
    int rc = get_run(a, npages, pgno);
    if (rc || !a->tracking)
        return rc;
    bn_ext e = {*pgno, npages};
    rc = extvec_push(&a->txn_alloc, e);
    if (rc)
        alloc_put(a, e);
    return rc;
}

void alloc_unget(alloc *a, bn_ext e)
{
    if (a->tracking && a->txn_alloc.n &&
        a->txn_alloc.v[a->txn_alloc.n - 1].pgno == e.pgno)
        a->txn_alloc.n--;
    if (e.pgno + e.npages == a->end)
        a->end = e.pgno; /* it came from the high-water mark */
    else
        alloc_put(a, e); /* on NOMEM the run stays lost until reopen */
}

int alloc_release(alloc *a, bn_ext e)
{
    if (a->tracking)
        return extvec_push(&a->txn_freed, e);
    return alloc_put(a, e);
}

uint64_t alloc_avail(const alloc *a)
{
    return a->free_pages + (a->limit > a->end ? a->limit - a->end : 0);
}

uint64_t alloc_avail_slots(const alloc *a)
{
    uint64_t top = a->limit > a->end ? a->limit - a->end : 0;
    return a->free_slots + top / a->slot;
}

void alloc_txn_begin(alloc *a)
{
    a->tracking = 1;
    a->txn_end0 = a->end;
    a->txn_alloc.n = 0;
    a->txn_freed.n = 0;
}

int alloc_txn_commit(alloc *a, uint64_t txn)
{
    a->tracking = 0;
    size_t need = a->npending + a->txn_freed.n;
    if (need > a->cap_pending) {
        size_t cap = need * 2;
        pending_free *p = realloc(a->pending, cap * sizeof *p);
        if (!p)
            return BONSAI_NOMEM;
        a->pending = p;
        a->cap_pending = cap;
    }
    for (size_t i = 0; i < a->txn_freed.n; i++)
        a->pending[a->npending++] = (pending_free){txn, a->txn_freed.v[i]};
    a->txn_freed.n = 0;
    a->txn_alloc.n = 0;
    return 0;
}

void alloc_txn_abort(alloc *a)
{
    a->tracking = 0;
    for (size_t i = 0; i < a->txn_alloc.n; i++) {
        bn_ext e = a->txn_alloc.v[i];
        if (e.pgno < a->txn_end0)
            alloc_put(a, e); /* on NOMEM the run stays lost until reopen */
    }
    a->end = a->txn_end0;
    a->txn_alloc.n = 0;
    a->txn_freed.n = 0;
}

void alloc_reclaim(alloc *a, uint64_t oldest)
{
    size_t i = 0;
    while (i < a->npending && a->pending[i].txn <= oldest) {
        if (alloc_put(a, a->pending[i].ext))
            break;
        i++;
    }
    memmove(a->pending, a->pending + i, (a->npending - i) * sizeof *a->pending);
    a->npending -= i;
}

static int by_pgno(const void *x, const void *y)
{
    const bn_ext *a = x, *b = y;
    return a->pgno < b->pgno ? -1 : a->pgno > b->pgno;
}

int alloc_defrag(alloc *a)
{
    extvec all = {0};
    for (unsigned k = 0; k <= ALLOC_CLASSES; k++)
        for (size_t i = 0; i < a->lists[k].n; i++)
            if (extvec_push(&all, a->lists[k].v[i])) {
                extvec_free(&all);
                return BONSAI_NOMEM;
            }
    for (size_t i = 0; i < a->large.n; i++)
        if (extvec_push(&all, a->large.v[i])) {
            extvec_free(&all);
            return BONSAI_NOMEM;
        }
    qsort(all.v, all.n, sizeof *all.v, by_pgno);
    for (unsigned k = 0; k <= ALLOC_CLASSES; k++)
        a->lists[k].n = 0;
    a->large.n = 0;
    a->free_pages = 0;
    a->free_slots = 0;
    size_t m = 0;
    for (size_t i = 0; i < all.n; i++) {
        if (m && all.v[m - 1].pgno + all.v[m - 1].npages == all.v[i].pgno &&
            (uint64_t)all.v[m - 1].npages + all.v[i].npages <= UINT32_MAX)
            all.v[m - 1].npages += all.v[i].npages;
        else
            all.v[m++] = all.v[i];
    }
    if (m && !a->tracking && all.v[m - 1].pgno + all.v[m - 1].npages == a->end)
        a->end = all.v[--m].pgno;
    int rc = 0;
    for (size_t i = 0; i < m && rc == 0; i++)
        rc = alloc_put(a, all.v[i]);
    extvec_free(&all);
    return rc;
}

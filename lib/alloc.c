/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - extent allocation: an exact-size free run first, then the
 * smallest larger one (cut), then fresh pages at the high-water mark.
 * Freed runs merge with their free neighbours (found in the bitmap), so
 * free space does not crumble into runs too small to use.
 */
#include "alloc.h"

#include <string.h>

/* Runs of the longest node image a file keeps beyond its high-water mark
 * while the disk grants it: a delete's room (room.h) in a tree of depth
 * up to 30. */
#define DISK_RESERVE_RUNS 64u

void alloc_init(alloc *a, region *rg, uint32_t page_size, uint64_t first,
                uint64_t end, uint32_t node_pages)
{
    memset(a, 0, sizeof *a);
    a->rg = rg;
    a->page_size = page_size;
    a->node_pages = node_pages ? node_pages : 1;
    a->node_shift = -1;
    for (int s = 0; s < 32; s++)
        if (a->node_pages == 1u << s)
            a->node_shift = s;
    a->first = first;
    a->end = end;
    a->reserve = (uint64_t)a->node_pages * DISK_RESERVE_RUNS;
    alloc_set_cap(a, rg->cap);
}

static uint64_t file_end_pages(const alloc *a)
{
    return a->rg->mapped / a->page_size;
}

/* The pages runs may reach: the cap's, or the file's end on a full disk. */
static void set_limit(alloc *a)
{
    uint64_t end = file_end_pages(a);
    a->limit = a->disk_full && end < a->cap_pages ? end : a->cap_pages;
}

void alloc_set_cap(alloc *a, uint64_t cap)
{
    a->cap_pages = cap / a->page_size;
    /* branch entries hold 40-bit page numbers: with small pages that, not
     * the cap, may be the end of the store */
    if (a->cap_pages > BN_MAX_PGNO + 1)
        a->cap_pages = BN_MAX_PGNO + 1;
    set_limit(a);
}

/* Grows the file to hold upto pages and the reserve after them, at most
 * an eighth of the file (the growth step's share: a small store on a
 * small disk keeps little back).  On a full disk the file's end becomes
 * the limit (the reserve it kept is below it). */
static int grow_file(alloc *a, uint64_t upto)
{
    uint64_t reserve = file_end_pages(a) / 8;
    if (reserve > a->reserve)
        reserve = a->reserve;
    uint64_t want = upto + reserve;
    if (want > a->cap_pages)
        want = a->cap_pages;
    int rc = region_grow(a->rg, want * a->page_size);
    if (rc == BONSAI_ENOSPC) {
        a->disk_full = 1;
        set_limit(a);
    } else if (rc == 0 && a->disk_full) {
        a->disk_full = 0;
        set_limit(a);
    }
    return rc;
}

int alloc_disk_retry(alloc *a)
{
    if (!a->disk_full)
        return 0;
    return grow_file(a, file_end_pages(a));
}

void alloc_free_all(alloc *a)
{
    for (unsigned k = 0; k <= ALLOC_CLASSES; k++)
        extvec_free(&a->lists[k]);
    extvec_free(&a->large);
    extvec_free(&a->txn_alloc);
    extvec_free(&a->txn_freed);
    free(a->held);
    free(a->bits);
    free(a->fresh);
    a->held = NULL;
    a->bits = NULL;
    a->fresh = NULL;
    a->nheld = a->cap_held = 0;
}

/* ---- the bitmap -------------------------------------------------------- */

static int is_free(const alloc *a, uint64_t p)
{
    uint64_t i = p - a->first;
    return p >= a->first && i < a->nbits && (a->bits[i >> 6] >> (i & 63)) & 1;
}

static void set_bits(const alloc *a, uint64_t *map, bn_ext e, int on)
{
    for (uint64_t p = e.pgno - a->first; p < e.pgno - a->first + e.npages;
         p++) {
        uint64_t m = UINT64_C(1) << (p & 63);
        if (on)
            map[p >> 6] |= m;
        else
            map[p >> 6] &= ~m;
    }
}

static void set_free(alloc *a, bn_ext e, int on)
{
    set_bits(a, a->bits, e, on);
}

/* set_free for a count of pages that may not fit an extent's npages */
static void set_free_pages(alloc *a, uint64_t from, uint64_t n, int on)
{
    while (n) {
        uint32_t step = n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
        set_free(a, (bn_ext){from, step}, on);
        from += step;
        n -= step;
    }
}

int alloc_is_fresh(const alloc *a, uint64_t pgno)
{
    uint64_t i = pgno - a->first;
    return a->fresh && pgno >= a->first && i < a->nbits &&
           (a->fresh[i >> 6] >> (i & 63)) & 1;
}

/* Makes the bitmap cover pages below `upto`. */
static int cover(alloc *a, uint64_t upto)
{
    uint64_t need = upto - a->first;
    if (need <= a->nbits)
        return 0;
    uint64_t bits = a->nbits ? a->nbits : 4096;
    while (bits < need)
        bits *= 2;
    uint64_t *b = realloc(a->bits, bits / 8);
    if (!b)
        return BONSAI_NOMEM;
    memset((uint8_t *)b + a->nbits / 8, 0, (bits - a->nbits) / 8);
    a->bits = b;
    uint64_t *f = realloc(a->fresh, bits / 8);
    if (!f)
        return BONSAI_NOMEM; /* bits grew; nbits did not: retried later */
    memset((uint8_t *)f + a->nbits / 8, 0, (bits - a->nbits) / 8);
    a->fresh = f;
    a->nbits = bits;
    return 0;
}

/* Are pages [p, p + n) all free?  A word of the bitmap at a time. */
static int all_free(const alloc *a, uint64_t p, uint64_t n)
{
    uint64_t i = p - a->first, stop = i + n;
    while (i < stop) {
        unsigned bit = (unsigned)(i & 63);
        uint64_t take = 64 - bit < stop - i ? 64 - bit : stop - i;
        uint64_t mask = (take == 64 ? ~UINT64_C(0)
                                    : (UINT64_C(1) << take) - 1) << bit;
        if ((a->bits[i >> 6] & mask) != mask)
            return 0;
        i += take;
    }
    return 1;
}

/* Is e exactly a maximal free run below end?  Stale list entries are not. */
static int run_is_current(const alloc *a, bn_ext e)
{
    if (e.pgno < a->first || e.pgno + e.npages > a->end ||
        e.pgno + e.npages - a->first > a->nbits || is_free(a, e.pgno - 1) ||
        is_free(a, e.pgno + e.npages))
        return 0;
    return all_free(a, e.pgno, e.npages);
}

/* ---- node runs --------------------------------------------------------- */

static uint64_t runs_in(const alloc *a, uint64_t npages)
{
    /* every put asks: a shift, not a division, where it can */
    return a->node_shift >= 0 ? npages >> a->node_shift
                              : npages / a->node_pages;
}

/* Set bits of the bitmap from index i up, a word at a time. */
static uint64_t ones_up(const alloc *a, uint64_t i)
{
    uint64_t n = 0;
    while (i < a->nbits) {
        unsigned bit = (unsigned)(i & 63);
        uint64_t w = a->bits[i >> 6] >> bit, avail = 64 - bit;
        uint64_t ones = ~w ? (uint64_t)__builtin_ctzll(~w) : 64;
        if (ones > a->nbits - i)
            ones = a->nbits - i;
        n += ones;
        if (ones < avail)
            break;
        i += avail;
    }
    return n;
}

/* Set bits of the bitmap from index j down. */
static uint64_t ones_down(const alloc *a, uint64_t j)
{
    uint64_t n = 0;
    while (j < a->nbits) {
        unsigned bit = (unsigned)(j & 63);
        uint64_t w = a->bits[j >> 6] << (63 - bit), avail = bit + 1u;
        uint64_t ones = ~w ? (uint64_t)__builtin_clzll(~w) : 64;
        n += ones;
        if (ones < avail || j < avail)
            break;
        j -= avail;
    }
    return n;
}

/* Free pages next to p going down (dir -1) or up (dir +1). */
static uint64_t free_beside(const alloc *a, uint64_t p, int dir)
{
    if (p < a->first || (dir < 0 && p == a->first))
        return 0;
    return dir < 0 ? ones_down(a, p - 1 - a->first) : ones_up(a, p - a->first);
}

uint64_t alloc_next_free(const alloc *a, uint64_t p, uint64_t limit)
{
    if (p < a->first)
        p = a->first;
    if (p >= limit)
        return limit;
    uint64_t i = p - a->first, stop = limit - a->first;
    if (stop > a->nbits)
        stop = a->nbits;
    while (i < stop) {
        uint64_t w = a->bits[i >> 6] >> (i & 63);
        if (w) {
            i += (uint64_t)__builtin_ctzll(w);
            break;
        }
        i = (i | 63) + 1;
    }
    return i < stop ? a->first + i : limit;
}

uint64_t alloc_free_run(const alloc *a, uint64_t p, uint64_t max)
{
    uint64_t n = free_beside(a, p, +1);
    return n < max ? n : max;
}

/* ---- lists of runs ----------------------------------------------------- */

/* Drops the stale entries of a list, keeping the order of the rest. */
static size_t sweep_list(const alloc *a, extvec *list)
{
    size_t kept = 0;
    for (size_t i = 0; i < list->n; i++)
        if (run_is_current(a, list->v[i]))
            list->v[kept++] = list->v[i];
    list->n = kept;
    return kept;
}

/* A list meets its stale entries only when it is asked for a run, and
 * the lists of lengths no node asks for are not: without a sweep they
 * grew by every run freed (7 MiB of them in a 128 MiB fill).  A sweep
 * once the lists took as many entries as the last one kept holds them
 * to about twice the runs they list, for a pass over each entry. */
static void sweep_if_due(alloc *a)
{
    if (++a->listed_since <= a->listed_kept + 4096u)
        return;
    size_t kept = sweep_list(a, &a->large);
    for (unsigned k = 1; k <= ALLOC_CLASSES; k++)
        kept += sweep_list(a, &a->lists[k]);
    a->listed_kept = kept;
    a->listed_since = 0;
}

static int list_run(alloc *a, bn_ext e)
{
    extvec *list = e.npages <= ALLOC_CLASSES ? &a->lists[e.npages] : &a->large;
    int rc = extvec_push(list, e);
    if (rc == 0)
        sweep_if_due(a);
    return rc;
}

int alloc_put(alloc *a, bn_ext e)
{
    if (e.npages == 0)
        return 0;
    int rc = cover(a, e.pgno + e.npages);
    if (rc)
        return rc;
    /* the free runs on either side merge with e into one */
    uint64_t below = free_beside(a, e.pgno, -1);
    uint64_t above = free_beside(a, e.pgno + e.npages, 1);
    a->node_runs -= runs_in(a, below) + runs_in(a, above);
    set_free(a, e, 1);
    a->free_pages += e.npages;
    uint64_t start = e.pgno - below, len = below + e.npages + above;
    if (!a->tracking && start + len == a->end) {
        /* the top of the store is free: hand it back to the high water */
        set_free_pages(a, start, len, 0);
        a->free_pages -= len;
        a->end = start;
        return 0;
    }
    a->node_runs += runs_in(a, len);
    /* a run too long to list is met again when a neighbour is freed */
    bn_ext run = {start, len < UINT32_MAX ? (uint32_t)len : UINT32_MAX};
    return list_run(a, run);
}

/* Hands out the first npages of the listed run at index i. */
static int take_from(alloc *a, extvec *list, size_t i, uint32_t npages,
                     uint64_t *pgno)
{
    bn_ext e = list->v[i];
    list->v[i] = list->v[--list->n];
    *pgno = e.pgno;
    uint64_t runs_cut = runs_in(a, e.npages) - runs_in(a, e.npages - npages);
    set_free(a, (bn_ext){e.pgno, npages}, 0);
    a->free_pages -= npages;
    a->node_runs -= runs_cut;
    if (e.npages > npages) {
        bn_ext rest = {e.pgno + npages, e.npages - npages};
        if (list_run(a, rest)) {
            set_free(a, (bn_ext){e.pgno, npages}, 1);
            a->free_pages += npages;
            a->node_runs += runs_cut;
            list_run(a, e); /* room was there a moment ago */
            return BONSAI_NOMEM;
        }
    }
    return 0;
}

/* The last current run of a list, dropping stale ones on the way. */
static int pop_current(alloc *a, extvec *list, size_t *at)
{
    while (list->n) {
        if (run_is_current(a, list->v[list->n - 1])) {
            *at = list->n - 1;
            return 1;
        }
        list->n--;
    }
    return 0;
}

/* May npages be cut from a free run of len pages (keep_runs)? */
static int may_cut(const alloc *a, uint64_t len, uint32_t npages)
{
    uint64_t loss = runs_in(a, len) - runs_in(a, len - npages);
    return !a->keep_runs || alloc_runs_avail(a) >= a->keep_runs + loss;
}

static int from_free_runs(alloc *a, uint32_t npages, uint64_t *pgno)
{
    size_t at;
    for (uint32_t k = npages; k <= ALLOC_CLASSES; k++)
        if (may_cut(a, k, npages) && pop_current(a, &a->lists[k], &at))
            return take_from(a, &a->lists[k], at, npages, pgno);
    for (size_t i = 0; i < a->large.n;) {
        bn_ext e = a->large.v[i];
        if (!run_is_current(a, e)) {
            a->large.v[i] = a->large.v[--a->large.n];
            continue;
        }
        if (e.npages >= npages && may_cut(a, e.npages, npages))
            return take_from(a, &a->large, i, npages, pgno);
        i++;
    }
    return BONSAI_NOTFOUND;
}

static int from_high_water(alloc *a, uint32_t npages, uint64_t *pgno)
{
    if (a->end + npages > a->limit && a->disk_full) {
        int rc = alloc_disk_retry(a); /* the disk may have room again */
        if (rc)
            return rc;
    }
    if (a->end + npages > a->limit ||
        !may_cut(a, a->limit - a->end, npages))
        return BONSAI_FULL;
    int rc = cover(a, a->end + npages);
    if (rc == 0 && !a->disk_full)
        rc = grow_file(a, a->end + npages);
    if (rc)
        return rc;
    *pgno = a->end;
    a->end += npages;
    return 0;
}

int alloc_get(alloc *a, uint32_t npages, uint64_t *pgno)
{
    if (npages == 0)
        return BONSAI_INVALID;
    int rc = from_free_runs(a, npages, pgno);
    if (rc == BONSAI_NOTFOUND)
        rc = from_high_water(a, npages, pgno);
    if (rc || !a->tracking)
        return rc;
    bn_ext e = {*pgno, npages};
    rc = extvec_push(&a->txn_alloc, e);
    if (rc)
        alloc_put(a, e);
    else
        set_bits(a, a->fresh, e, 1);
    return rc;
}

/* The open transaction's runs are no longer its own. */
static void forget_fresh(alloc *a)
{
    for (size_t i = 0; i < a->txn_alloc.n; i++)
        if (a->txn_alloc.v[i].pgno + a->txn_alloc.v[i].npages - a->first <=
            a->nbits)
            set_bits(a, a->fresh, a->txn_alloc.v[i], 0);
}

void alloc_unget(alloc *a, bn_ext e)
{
    if (a->tracking && a->txn_alloc.n &&
        a->txn_alloc.v[a->txn_alloc.n - 1].pgno == e.pgno) {
        set_bits(a, a->fresh, e, 0);
        a->txn_alloc.n--;
    }
    if (e.pgno + e.npages == a->end)
        a->end = e.pgno; /* it came from the high-water mark */
    else
        alloc_put(a, e); /* on NOMEM the run stays lost until reopen */
}

/* e lies in the pages alloc_put returned to the high-water mark: end
 * rises over it again, and the pages between the two are free. */
static int take_above_end(alloc *a, bn_ext e)
{
    uint64_t old_end = a->end;
    int rc = cover(a, e.pgno + e.npages);
    if (rc)
        return rc;
    a->end = e.pgno + e.npages;
    if (e.pgno == old_end)
        return 0;
    return alloc_put(a, (bn_ext){old_end, (uint32_t)(e.pgno - old_end)});
}

int alloc_take(alloc *a, bn_ext e)
{
    if (e.npages == 0)
        return 0;
    /* alloc_put lowers end only to the start of a free run it reached */
    if (e.pgno >= a->end)
        return take_above_end(a, e);
    uint64_t below = free_beside(a, e.pgno, -1);
    uint64_t above = free_beside(a, e.pgno + e.npages, 1);
    a->node_runs -= runs_in(a, below + e.npages + above);
    set_free(a, e, 0);
    a->free_pages -= e.npages;
    a->node_runs += runs_in(a, below) + runs_in(a, above);
    int rc = 0;
    if (below)
        rc = list_run(a, (bn_ext){e.pgno - below, (uint32_t)below});
    if (above && rc == 0)
        rc = list_run(a, (bn_ext){e.pgno + e.npages, (uint32_t)above});
    return rc;
}

static int run_is_fresh(const alloc *a, bn_ext e)
{
    for (uint64_t p = e.pgno; p < e.pgno + e.npages; p++)
        if (!alloc_is_fresh(a, p))
            return 0;
    return 1;
}

int alloc_release(alloc *a, bn_ext e)
{
    if (!a->tracking)
        return alloc_put(a, e);
    if (!run_is_fresh(a, e))
        return extvec_push(&a->txn_freed, e);
    /* written by this transaction alone: no snapshot ever saw it, so it
     * is free at once (abort skips pages no longer fresh) */
    set_bits(a, a->fresh, e, 0);
    return alloc_put(a, e);
}

uint64_t alloc_pages_avail(const alloc *a)
{
    return a->free_pages + (a->limit > a->end ? a->limit - a->end : 0);
}

uint64_t alloc_runs_avail(const alloc *a)
{
    return a->node_runs + runs_in(a, a->limit > a->end ? a->limit - a->end
                                                          : 0);
}

/* ---- transactions ------------------------------------------------------ */

void alloc_txn_begin(alloc *a)
{
    a->tracking = 1;
    a->txn_end0 = a->end;
    a->txn_alloc.n = 0;
    a->txn_freed.n = 0;
}

static int held_room(alloc *a, size_t need)
{
    if (need <= a->cap_held)
        return 0;
    size_t cap = need * 2;
    held_run *p = realloc(a->held, cap * sizeof *p);
    if (!p)
        return BONSAI_NOMEM;
    a->held = p;
    a->cap_held = cap;
    return 0;
}

int alloc_hold(alloc *a, uint64_t txn, bn_ext e)
{
    int rc = held_room(a, a->nheld + 1);
    if (rc == 0)
        a->held[a->nheld++] = (held_run){txn, e};
    return rc;
}

int alloc_txn_commit(alloc *a, uint64_t txn)
{
    forget_fresh(a);
    a->tracking = 0;
    int rc = held_room(a, a->nheld + a->txn_freed.n);
    if (rc)
        return rc;
    for (size_t i = 0; i < a->txn_freed.n; i++)
        a->held[a->nheld++] = (held_run){txn, a->txn_freed.v[i]};
    a->txn_freed.n = 0;
    a->txn_alloc.n = 0;
    return 0;
}

/* Frees the pages of e below the old mark that the transaction still
 * holds (fresh): pages it released early are free already, and a page
 * handed out twice is freed once. */
static void give_back(alloc *a, bn_ext e)
{
    uint64_t stop = e.pgno + e.npages < a->txn_end0 ? e.pgno + e.npages
                                                     : a->txn_end0;
    uint64_t p = e.pgno;
    while (p < stop) {
        if (!alloc_is_fresh(a, p)) {
            p++;
            continue;
        }
        bn_ext run = {p, 0};
        while (p < stop && alloc_is_fresh(a, p) && run.npages < UINT32_MAX) {
            p++;
            run.npages++;
        }
        set_bits(a, a->fresh, run, 0);
        alloc_put(a, run); /* on NOMEM the run stays lost until reopen */
    }
}

void alloc_txn_abort(alloc *a)
{
    for (size_t i = 0; i < a->txn_alloc.n; i++)
        give_back(a, a->txn_alloc.v[i]);
    forget_fresh(a);
    /* pages at or above the old mark were never handed out before, and a
     * free run reaching down from it goes back to the high water too */
    uint64_t top = a->txn_end0;
    uint64_t p = top - free_beside(a, top, -1);
    while (p < a->end) {
        uint64_t len = free_beside(a, p, 1);
        if (len == 0) {
            p++;
            continue;
        }
        set_free_pages(a, p, len, 0);
        a->free_pages -= len;
        a->node_runs -= runs_in(a, len);
        if (p < top)
            top = p;
        p += len;
    }
    a->tracking = 0;
    a->end = top;
    a->txn_alloc.n = 0;
    a->txn_freed.n = 0;
}

void alloc_reclaim(alloc *a, uint64_t oldest)
{
    size_t i = 0;
    while (i < a->nheld && a->held[i].txn <= oldest) {
        if (alloc_put(a, a->held[i].ext))
            break;
        i++;
    }
    if (i == 0)
        return;
    memmove(a->held, a->held + i, (a->nheld - i) * sizeof *a->held);
    a->nheld -= i;
}

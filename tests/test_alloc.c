/* SPDX-License-Identifier: MIT */
/*
 * test_alloc.c - the page allocator (lib/alloc.h) against a model of the
 * pages it handed out: runs never overlap, freed pages come back, and
 * the lists of free runs stay near the runs there are however long the
 * churn (a list no request reaches used to keep every run ever freed).
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "io.h"
#include "util.h"

TestSuite(alloc, .init = tu_setup, .fini = tu_teardown);

enum { PAGES = 1 << 16, SLOT = 32, LIVE = 4000 };

static size_t listed(const alloc *a)
{
    size_t n = a->large.n;
    for (unsigned k = 0; k <= ALLOC_CLASSES; k++)
        n += a->lists[k].n;
    return n;
}

/* Maximal free runs below end, from the model. */
static size_t free_runs(const uint8_t *used, uint64_t first, uint64_t end)
{
    size_t runs = 0;
    for (uint64_t p = first; p < end; p++)
        if (!used[p] && (p == first || used[p - 1]))
            runs++;
    return runs;
}

Test(alloc, random_churn_matches_the_model_and_lists_stay_bounded)
{
    tu_rng r = {tu_seed("alloc-churn", 0xA110C)};
    region rg;
    cr_assert_eq(region_open_anon(&rg, bx_io_default(), (uint64_t)PAGES * 128),
                 0);
    alloc a;
    alloc_init(&a, &rg, 128, 1, 1, SLOT);
    static uint8_t used[PAGES];
    static bn_ext live[LIVE];
    size_t nlive = 0, most_listed = 0, most_runs = 1;
    memset(used, 0, sizeof used);
    for (int step = 0; step < 400000; step++) {
        int take = nlive < LIVE && (nlive == 0 || tu_below(&r, 2));
        if (take) {
            /* leaf-like runs, and now and then a short one */
            uint32_t np = tu_below(&r, 8) ? 16 + (uint32_t)tu_below(&r, 17)
                                          : 1 + (uint32_t)tu_below(&r, 6);
            uint64_t pg;
            int rc = alloc_get(&a, np, &pg);
            if (rc == BONSAI_FULL)
                continue;
            cr_assert_eq(rc, 0, "step %d", step);
            for (uint64_t p = pg; p < pg + np; p++) {
                cr_assert(!used[p], "page %llu handed out twice (step %d)",
                          (unsigned long long)p, step);
                used[p] = 1;
            }
            live[nlive++] = (bn_ext){pg, np};
        } else {
            size_t i = tu_below(&r, nlive);
            bn_ext e = live[i];
            live[i] = live[--nlive];
            for (uint64_t p = e.pgno; p < e.pgno + e.npages; p++)
                used[p] = 0;
            cr_assert_eq(alloc_put(&a, e), 0);
        }
        if (step % 1000 == 0) {
            size_t runs = free_runs(used, a.first, a.end);
            if (runs > most_runs)
                most_runs = runs;
            if (listed(&a) > most_listed)
                most_listed = listed(&a);
        }
    }
    /* every free page is found again: hand out single pages to the end */
    uint64_t pg, got = 0;
    while (alloc_get(&a, 1, &pg) == 0) {
        cr_assert(!used[pg], "page %llu handed out twice",
                  (unsigned long long)pg);
        used[pg] = 1;
        got++;
    }
    for (uint64_t p = a.first; p < a.limit; p++)
        cr_assert(used[p], "free page %llu never handed out",
                  (unsigned long long)p);
    cr_assert_gt(got, 0);
    /* a sweep keeps the lists within about twice the runs, plus its
     * 4096-entry allowance */
    cr_assert_leq(most_listed, 3 * most_runs + 4096 + 64,
                  "lists held %zu entries for at most %zu free runs",
                  most_listed, most_runs);
    alloc_free_all(&a);
    region_close(&rg);
}

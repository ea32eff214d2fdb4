/* SPDX-License-Identifier: MIT */
/*
 * alloc.h - runs of pages ("extents"): hand them out, take them back, and
 * hold back the ones a reader or the last durable commit may still need.
 *
 * Page numbers count page_size units from the start of the file; pages
 * below `first` hold the header and meta slots.  Pages at or above `end`
 * (the high-water mark) were never handed out.  A bitmap marks every free
 * page below `end`; a freed run merges with free neighbours at once, and a
 * free run that reaches `end` lowers it (outside transactions).  Maximal
 * free runs are listed by size (1..ALLOC_CLASSES pages, and one list of
 * larger runs); a listed run that has since merged or been cut is stale
 * and dropped when met (the bitmap decides).  Nothing of this is stored:
 * it is derived at open from what the trees reach.
 *
 * Room is counted in node runs as well as pages: a node run is
 * `node_pages` contiguous free pages, the most a node image may need.  A
 * free run of len pages holds len / node_pages node runs; node_runs sums
 * that over the maximal free runs and is kept current as runs merge and
 * are cut, so asking how many node images surely fit costs O(1).
 * Counting pages alone would overstate it: free space cut into runs
 * shorter than a node holds many pages and no node.  While keep_runs is
 * set, alloc_get cuts no run that would leave fewer node runs: a change
 * that must leave room for another (a put, for a delete) then takes
 * shorter runs, or none.
 *
 * In transaction mode a run released by the writer is not free at once
 * (unless the transaction itself wrote it: no snapshot ever saw that):
 * readers of older snapshots may still read it.  It waits in `txn_freed`
 * until commit, then in `held` tagged with the committing txn id until
 * no reader's snapshot is older than that id.  At open, pages that only
 * an older snapshot of a reader in another process reaches wait there too
 * (alloc_hold, space.c).  Runs handed out during a transaction are
 * remembered so abort can take them back.
 */
#ifndef BONSAI_ALLOC_H
#define BONSAI_ALLOC_H

#include <stdint.h>

#include "region.h"
#include "vec.h"

#define ALLOC_CLASSES 64u

typedef struct held_run {
    uint64_t txn; /* freed by this commit */
    bn_ext ext;
} held_run;

typedef struct alloc {
    region *rg;
    uint32_t page_size;
    uint64_t first;     /* first data page */
    uint64_t end;       /* high-water mark */
    uint64_t limit;     /* pages runs may reach: cap_pages, or the file's
                           end while the disk refuses to grow it */
    uint64_t cap_pages; /* pages the cap allows */
    uint64_t reserve;   /* pages a file is grown by beyond what it needs */
    int disk_full;      /* the disk refused the last growth */
    uint64_t free_pages;
    uint32_t node_pages; /* pages of the longest node image */
    int node_shift;      /* log2 node_pages when a power of two, else -1 */
    uint64_t node_runs; /* node runs in the free runs below end */
    uint64_t keep_runs; /* alloc_get leaves this many node runs (0: none) */
    uint64_t *bits;     /* bit p - first set: page p is free */
    uint64_t *fresh;    /* bit set: handed out by the open transaction */
    uint64_t nbits;     /* pages the bitmap covers */
    extvec lists[ALLOC_CLASSES + 1]; /* lists[k]: free runs of k pages */
    extvec large;                    /* free runs over ALLOC_CLASSES */
    uint64_t listed_kept;  /* entries the last sweep of the lists kept */
    uint64_t listed_since; /* entries listed since */
    int tracking;                    /* inside a write transaction */
    uint64_t txn_end0;               /* end when the transaction began */
    extvec txn_alloc;
    extvec txn_freed;
    held_run *held;
    size_t nheld, cap_held;
} alloc;

/* node_pages: the pages a node image takes at most (at least 1). */
void alloc_init(alloc *a, region *rg, uint32_t page_size, uint64_t first,
                uint64_t end, uint32_t node_pages);
/* Pages the store may use from now on: cap bytes' worth (the region's
 * cap after bonsai_set_max_size), at most 2^40. */
void alloc_set_cap(alloc *a, uint64_t cap);

/* After the disk refused to grow the file: asks it again for the reserve
 * beyond the file's end; 0 (the limit back at the cap) if it gives it,
 * else BONSAI_ENOSPC or another growth error.  0 at once when the disk
 * did not refuse. */
int alloc_disk_retry(alloc *a);
void alloc_free_all(alloc *a);

/* Hands out npages contiguous pages, from a run that leaves keep_runs
 * node runs available.  Returns 0, BONSAI_FULL (the cap, or no such run),
 * BONSAI_NOMEM, BONSAI_ENOSPC or BONSAI_IO (growing the file failed).
 * A file grows by a reserve beyond what it needs: when the disk refuses
 * to grow it, its end becomes the limit, so the room budget, which keeps
 * a later delete's room below the limit, finds it in the reserve. */
int alloc_get(alloc *a, uint32_t npages, uint64_t *pgno);

/* Takes back the run the last alloc_get handed out (undoing a plan). */
void alloc_unget(alloc *a, bn_ext e);

/* Takes the free run e out of the free space again: the inverse of
 * alloc_put, for a plan that freed e and then failed.  On BONSAI_NOMEM e
 * is taken but a free run beside it may stay unlisted until a neighbour
 * is freed. */
int alloc_take(alloc *a, bn_ext e);

/* Was the page handed out by the open transaction (so no snapshot can
 * see it, and it may be rewritten in place)? */
int alloc_is_fresh(const alloc *a, uint64_t pgno);

/* Returns a run to the free lists now. */
int alloc_put(alloc *a, bn_ext e);

/* Releases a run the writer no longer references: at once without
 * transactions, after commit and readers with them. */
int alloc_release(alloc *a, bn_ext e);

/* The first free page at or after p below limit (limit if none). */
uint64_t alloc_next_free(const alloc *a, uint64_t p, uint64_t limit);
/* The free pages from p on, counted up to max. */
uint64_t alloc_free_run(const alloc *a, uint64_t p, uint64_t max);

/* Pages that could still be handed out (free and up to the cap). */
uint64_t alloc_pages_avail(const alloc *a);

/* Node runs that could still be handed out (in free runs and up to the
 * cap): so many runs of up to node_pages pages each surely fit, since
 * handing out a run that long takes at most one node run from the
 * count. */
uint64_t alloc_runs_avail(const alloc *a);


void alloc_txn_begin(alloc *a);
/* The transaction's releases wait for readers older than txn. */
int alloc_txn_commit(alloc *a, uint64_t txn);
/* Takes back what the transaction handed out; forgets its releases. */
void alloc_txn_abort(alloc *a);
/* Adds a held run, freed once no reader's snapshot is older than txn
 * (open: pages an older snapshot of another process reaches).  Runs must
 * be added in ascending txn order, before any commit adds its own. */
int alloc_hold(alloc *a, uint64_t txn, bn_ext e);
/* Frees held runs released by commits <= oldest (the oldest snapshot a
 * reader holds, or the last commit when there are none). */
void alloc_reclaim(alloc *a, uint64_t oldest);

#endif

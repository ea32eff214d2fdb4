/* SPDX-License-Identifier: MIT */
/*
 * cache.h - the write cache policy: when changed nodes are written and
 * when decoded nodes are dropped (cache.c).  The mechanism (decoded nodes,
 * the dirty list, flush) is btree's; this file only decides when.
 */
#ifndef BONSAI_CACHE_H
#define BONSAI_CACHE_H

#include "internal.h"

/* Does the write cache count inside the store's cap (cache_in_cap, in
 * anonymous memory), so that the cap bounds the whole process? */
int cache_in_cap(const bonsai_db *db);

/* The part of the write cache's budget the waiting puts' arrays may take:
 * what the decoded nodes leave, and under a cap on the whole process at
 * most a quarter, or more while the store's pages leave the cap room (see
 * cache.c). */
uint64_t cache_waiting_share(const bonsai_db *db);

/* Called after every successful change: writes the cached changes when
 * the cache is over its budget or its oldest change is older than the
 * delay.  A failed write keeps the changes cached and returns the error
 * (the change itself stands); after one, writing is not tried again on
 * every change (cache_note_failure). */
int cache_after_change(bonsai_db *db);

/* Counts the memory the cache holds again, and the room lookups have to
 * keep the branches they pass (db->read_room); changes and write-backs
 * recount as they go, other memory given back calls it. */
void cache_recount(bonsai_db *db);

/* The memory of the decoded nodes and of the heap beside them: as last
 * counted, and the branches lookups kept since. */
uint64_t cache_held(const bonsai_db *db);

/* Writes every cached change now and drops clean decoded leaves. */
int cache_flush(bonsai_db *db);

/* Notes what a write-back met (cache_flush does): after BONSAI_FULL,
 * BONSAI_ENOSPC or BONSAI_IO the cache is not written again on every
 * change (see cache.c). */
void cache_note_failure(bonsai_db *db, int rc);

/* Before a change: BONSAI_ENOSPC (or BONSAI_IO) while the cache is over
 * its budget and its last write-back met a full disk, so that changes
 * stop piling up in memory and the caller hears of it at once; tried
 * again once a second. */
int cache_before_change(bonsai_db *db);

/* cache_flush, unless the last write-back failed and trying again is not
 * worth it yet (write_back_gate in cache.c): then what that one met. */
int cache_write_back(bonsai_db *db);

#endif

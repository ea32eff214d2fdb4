/* SPDX-License-Identifier: MIT */
/*
 * readers.h - the lock file PATH-lock: reader slots shared by every
 * process that has the store open (format.md, "The lock file").
 *
 * A process that reads the store while a writer in another process may be
 * committing publishes each snapshot it reads in a slot of the table; the
 * writer keeps every page a published snapshot reaches.  A slot belongs
 * to the process holding an OFD lock on its first byte; the kernel drops
 * that lock when the process dies, so the slot of a dead reader is simply
 * unowned and its contents are ignored.
 *
 * Invariants:
 *  - a slot's words change only while its owner holds the slot's lock;
 *  - a slot's txn word is 0 (no snapshot) or snapshot txn id + 1, written
 *    last (sequentially consistent) after the copy of the meta it reads;
 *  - a slot with a non-zero txn word and a live owner never changes while
 *    any read transaction of its owner uses it (refs > 0).
 * Nothing read from the table is trusted: the header is checked at open,
 * and a snapshot copied from a slot is bounds-checked by whoever uses it.
 */
#ifndef BONSAI_READERS_H
#define BONSAI_READERS_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

#define RT_MAGIC 0x4b4c5342u /* "BSLK" read as a little-endian u32 */
#define RT_VERSION 1u
#define RT_HEAD_BYTES 64u
#define RT_SLOT_BYTES 64u
#define RT_SLOTS 127u /* the table fills 8 KiB */
#define RT_MAX_SLOTS 4096u

/* A slot this handle owns, and the read transactions using it. */
typedef struct rt_own {
    uint32_t slot;
    uint32_t refs;
    uint64_t txn; /* the snapshot published, valid while refs > 0 */
} rt_own;

typedef struct rt_table {
    int fd;          /* -1: no lock file (the fallback of bonsai.h) */
    uint8_t *map;    /* the whole file, shared */
    size_t bytes;
    uint32_t nslots;
    rt_own *own;
    size_t nown, cap_own;
} rt_table;

/* An empty table: fd -1, nothing mapped. */
void rt_init(rt_table *t);

/* Opens PATH-lock beside the store at store_path (PATH: the file it
 * names, symbolic links followed; PATH-lock itself is never followed),
 * creating and initialising it (with permission bits mode) if this is the
 * first opener, or if a creator left it unfinished.  Returns 0;
 * BONSAI_NOTSUP when no lock file can be used here (not permitted,
 * read-only file system, a disk too full to create it): the caller falls
 * back; or BONSAI_LOCKFILE (a symbolic link, not a regular file, not a
 * bonsai lock file, damaged: left unwritten), BONSAI_NOMEM, BONSAI_IO. */
int rt_open(rt_table *t, const char *store_path, uint32_t mode);

/* Releases every slot this handle owns and closes the file. */
void rt_close(rt_table *t);

/* ---- the reader's side --------------------------------------------------- */

/* Publishes snapshot m in a slot of this handle: one already publishing
 * m's txn id (shared), else an idle one it owns, else a newly claimed
 * one.  *slot receives the slot to pass to rt_release.  The caller must
 * then check that m is still the newest commit (else release and retry):
 * only a snapshot published before it stopped being the newest is safe.
 * Returns 0, BONSAI_READERS_FULL (every slot owned) or BONSAI_NOMEM. */
int rt_publish(rt_table *t, const bx_meta *m, uint32_t *slot);

/* Ends one use of the slot; its last use clears it. */
void rt_release(rt_table *t, uint32_t slot);

/* ---- the writer's side --------------------------------------------------- */

/* The oldest snapshot txn id a live slot holds, if older than oldest;
 * else oldest.  Call after the newest meta is written. */
uint64_t rt_oldest(const rt_table *t, uint64_t oldest);

/* Calls fn with a copy of each snapshot a live slot publishes (slots
 * caught changing are skipped: their owner is publishing the newest
 * commit).  A non-zero return from fn stops and is returned. */
typedef int (*rt_snap_fn)(void *ctx, const bx_meta *m);
int rt_each_snapshot(const rt_table *t, rt_snap_fn fn, void *ctx);

#endif

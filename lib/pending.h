/* SPDX-License-Identifier: MIT */
/*
 * pending.h - puts that wait before they reach the tree (the mechanism is
 * putbuf.h; this is the policy).
 *
 * A put waits when the write cache is on, its value is stored inline, and
 * it does not append to a decoded leaf: applying it at once would decode
 * (or miss the CPU's caches on) a whole leaf for one entry.  Waiting puts
 * are part of the write cache: they use at most fifteen sixteenths of its
 * budget, and each is counted as needing node runs when applied, so that
 * applying them can never run out of room (a put that cannot wait under
 * that rule is applied at once, and may get BONSAI_FULL there as before).
 *
 * They are applied in key order, all of a map at once, before anything
 * reads or writes that map's tree otherwise (txn_tree, deletes, commit,
 * write-back); a get and a listing only look them up.  A map's count excludes
 * its waiting puts until they are applied.
 *
 * Deletes take their path through here too (pending_del): they meet the
 * waiting puts of their map, and need room as puts do.
 */
#ifndef BONSAI_PENDING_H
#define BONSAI_PENDING_H

#include "internal.h"

/* A put of the write path: waits when it may, else goes to the tree. */
int pending_put(bonsai_db *db, map_slot *s, bt_tree *t, bn_key key,
                const uint8_t *val, uint32_t vlen, unsigned flags);

/* A delete of the write path: the map's waiting puts are applied first,
 * then room is made as for a put, so that the cached delete is surely
 * written back (else BONSAI_FULL, nothing changed).  Without transactions
 * and short of room, it takes its entry from its leaf alone where that
 * needs no room (bt_del_in_place), else, with nothing cached, it is
 * written at once.  Puts leave what such a delete may need (one node run),
 * so that a full store can still be emptied. */
int pending_del(bonsai_db *db, map_slot *s, bt_tree *t, bn_key key);

/* Room for a change that may need `slots` node runs (and a value of vlen
 * bytes, or ROOM_DELETE) beside the cached changes and the waiting puts:
 * those are applied first when the change would take the room they count
 * on, the cache written when that makes room (room_reserve). */
int pending_reserve(bonsai_db *db, uint32_t slots, uint32_t vlen);

/* Without transactions a new map's record goes into the catalog at once:
 * a record left for a later write-back might find no room there (the
 * catalog may split), and that write-back would fail.  Room is made for
 * it as for a put; with nothing cached it is written at once, or not at
 * all (BONSAI_FULL: the catalog as it was). */
int pending_new_record(bonsai_db *db, map_slot *s);

/* A sequential load's put without a transaction: into the decoded last
 * leaf at once, without the layers of the general path (txn_change,
 * pending_put), when nothing waits and the write cache is on.  *done = 0
 * when it does not apply: the caller takes the general path. */
int pending_append_direct(bonsai_db *db, map_slot *s, bn_key key,
                          const uint8_t *val, uint32_t vlen, int *done);

/* Applies the map's waiting puts.  On failure the ones not applied still
 * wait; a failure half way through a put fails the writer as any failed
 * change does. */
int pending_apply(bonsai_db *db, map_slot *s);
int pending_apply_all(bonsai_db *db);

/* How many of the map's waiting puts add a key (the others overwrite):
 * found by looking each up, without applying any. */
int pending_new_keys(bonsai_db *db, const map_slot *s, uint64_t *n);

/* A waiting put's value for key: 0, or BONSAI_NOTFOUND. */
int pending_get(const map_slot *s, bn_key key, bonsai_val *out);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * put.h - the write path of a put (and of a delete): where each one goes,
 * and the batches of puts that wait before they reach the tree (putbuf.h
 * is their mechanism, this the policy).  Every way a put can take is in
 * put.c; which one, in the order put.c asks:
 *
 *   situation                                      path            function
 *   no transaction, cache on, nothing waiting,     direct append   put_append_direct
 *     key after every other of the decoded last
 *     leaf, inline value (api.c asks change.c
 *     change_direct_ok first)
 *   key already waiting, inline value              replaces it     wait_put
 *   key already waiting, large value               batch applied,  put_apply_waiting
 *                                                  then as below
 *   key after every other of the decoded last      append now      append_now
 *     leaf (the room the batch counts on kept)
 *   NOOVERWRITE and the key in the tree            BONSAI_EXISTS   check_absent
 *   cache off, large value, empty tree, key goes   now             put_now
 *     last, or (nothing waiting) appends to a
 *     decoded leaf
 *   batch's budget or room short                   batch applied,  put_apply_all
 *                                                  then asked again
 *   otherwise                                      waits           wait_put
 *   now, but short of room with nothing cached     written         change_through
 *     (no copy-on-write)                           through at once
 *
 * A put waits when the write cache is on, its value is stored inline, and
 * it does not append to a decoded leaf: applying it at once would decode
 * (or miss the CPU's caches on) a whole leaf for one entry.  Waiting puts
 * are part of the write cache: they use at most fifteen sixteenths of its
 * budget, and each is counted as needing node runs when applied (room.h),
 * so that applying them can never run out of room (a put that cannot wait
 * under that rule is applied at once, and may get BONSAI_FULL there).
 *
 * They are applied in key order, all of a map at once, before anything
 * reads or writes that map's tree otherwise (txn_tree, deletes, commit,
 * write-back); a get and a listing only look them up.  A map's count
 * excludes its waiting puts until they are applied.  Each run of them
 * that falls in one leaf goes into the leaf's image where it lies when
 * that needs no room (inplace.c), else into the decoded leaf (shape.c).
 *
 * Deletes take their path through here too (put_del): they meet the
 * waiting puts of their map, and need room as puts do.
 */
#ifndef BONSAI_PUT_H
#define BONSAI_PUT_H

#include "internal.h"

/* A put of the write path: waits when it may, else goes to the tree. */
int put_key(bonsai_db *db, map_entry *s, bt_tree *t, bn_key key,
            const uint8_t *val, uint32_t vlen, unsigned flags);

/* A delete of the write path: the map's waiting puts are applied first,
 * then room is made as for a put, so that the cached delete is surely
 * written back (else BONSAI_FULL, nothing changed).  Without transactions
 * and short of room, it takes its entry from its leaf alone where that
 * needs no room (bt_del_in_place), else, with nothing cached, it is
 * written at once.  Puts leave what such a delete may need (one node run),
 * so that a full store can still be emptied. */
int put_del(bonsai_db *db, map_entry *s, bt_tree *t, bn_key key);

/* Room for a change that may need `runs` node runs (and a value of vlen
 * bytes, or ROOM_DELETE) beside the cached changes and the waiting puts:
 * those are applied first when the change would take the room they count
 * on, the cache written when that makes room (room_reserve). */
int put_reserve(bonsai_db *db, uint32_t runs, uint32_t vlen);

/* Without transactions a new map's record goes into the catalog at once:
 * a record left for a later write-back might find no room there (the
 * catalog may split), and that write-back would fail.  Room is made for
 * it as for a put; with nothing cached it is written at once, or not at
 * all (BONSAI_FULL: the catalog as it was). */
int put_new_record(bonsai_db *db, map_entry *s);

/* A sequential load's put without a transaction: into the decoded last
 * leaf at once, without the layers of the general path (txn_change,
 * put_key), when nothing waits and the write cache is on.  The caller
 * has asked change_direct_ok whether a change may be made directly at
 * all.
 * *done = 0 when it does not apply: the caller takes the general path. */
int put_append_direct(bonsai_db *db, map_entry *s, bn_key key,
                      const uint8_t *val, uint32_t vlen, int *done);

/* Applies the map's waiting puts.  On failure the ones not applied still
 * wait; a failure half way through a put fails the writer as any failed
 * change does. */
int put_apply_waiting(bonsai_db *db, map_entry *s);
int put_apply_all(bonsai_db *db);

/* Gives back the arrays the maps' empty batches keep for the next: an
 * explicit sync ends a run of changes, and the lookups that may follow
 * want the cache's budget for the branches they decode (view.c). */
void put_give_back(bonsai_db *db);

/* How many of the map's waiting puts add a key (the others overwrite):
 * found by looking each up, without applying any. */
int put_new_keys(bonsai_db *db, map_entry *s, uint64_t *n);

/* A waiting put's value for key: 0, or BONSAI_NOTFOUND. */
int put_waiting_get(const map_entry *s, const bn_key *key, bonsai_val *out);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * maps.h - named maps: the handle table, and the catalog tree that maps
 * each name to a record (kind, flags, depth, root, count; see meta.h).
 *
 * The writer keeps each map's tree in its handle entry and writes changed
 * records into the catalog only when it makes state durable (commit,
 * write-back), and without transactions a new map's record when the map
 * is created (put_new_record).  A listing reads the writer's maps
 * over the catalog, and writes nothing.  Readers look names up in the catalog of
 * their snapshot.
 */
#ifndef BONSAI_MAPS_H
#define BONSAI_MAPS_H

#include "internal.h"

typedef int (*maps_record_fn)(void *ctx, const char *name, const bt_tree *t);

/* Can name (NUL-terminated) name a map: 1..BONSAI_MAX_NAME bytes? */
int maps_name_ok(const char *name);

/* Looks name up in catalog; fills *t with its map's tree. */
int maps_find_record(bonsai_db *db, const bt_rd *rd, const bt_tree *catalog,
                     const char *name, bt_tree *t);

/* The tree a record (a catalog value of len bytes) describes: 0 or
 * BONSAI_CORRUPT. */
int maps_tree_of_record(const uint8_t *v, uint32_t len, bt_tree *t);

/* Calls fn for every record of catalog in name order. */
int maps_each_record(bonsai_db *db, const bt_rd *rd,
                     const bt_tree *catalog,
                     maps_record_fn fn, void *ctx);

/* The writer's tree of a map handle (BONSAI_INVALID for another store's,
 * BONSAI_NOTFOUND for a dropped map's). */
int maps_writer_tree(bonsai_db *db, bonsai_map map, bt_tree **t);

/* The tree of a map handle in a read snapshot (BONSAI_NOTFOUND if the map
 * did not exist then). */
int maps_reader_tree(bonsai_txn *txn, bonsai_map map, bt_tree **t);

/* Writes the map's record into the catalog if it changed (deletes a
 * dropped map's record). */
int maps_store_record(bonsai_db *db, map_entry *s);

/* Writes every changed record into the catalog (and deletes dropped
 * maps' records). */
int maps_store_records(bonsai_db *db);
/* Has every map's record written again (storing an unchanged record is
 * harmless): after the catalog was put back as it was. */
void maps_mark_records_dirty(bonsai_db *db);

/* ---- entries ---- */

/* The writer's live entry of that name, or NULL. */
map_entry *maps_writer_entry(bonsai_db *db, const char *name);

/* The entry of that name and kind, or a free one given them.  handle: the
 * entry is given to the caller as a handle (counted in opens). */
int maps_get_entry(bonsai_db *db, const char *name, unsigned kind,
                  int handle, map_entry **out);

/* Does the entry hold changes the writer's catalog does not know yet? */
int maps_unsettled(const map_entry *s);

/* Frees an entry whose writer state is settled: nothing in it is unknown
 * to the catalog the writer sees. */
void maps_release_entry(bonsai_db *db, map_entry *s);
/* Frees it if no handle or cursor names it (one a drop took). */
void maps_release_if_unused(bonsai_db *db, map_entry *s);

/* Drops the puts waiting in the entry, and their count in the cache. */
void maps_forget_waiting(bonsai_db *db, map_entry *s);

void maps_after_commit(bonsai_db *db);
void maps_after_abort(bonsai_db *db);
void maps_free_all(bonsai_db *db);

#endif

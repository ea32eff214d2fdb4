/* SPDX-License-Identifier: MIT */
/*
 * mapcalls.c - the public calls on named maps: create, open, drop, list
 * and close, each run as a change or a read of the store (txn.c) over the
 * entries and records of maps.c.
 */
#include "maps.h"

#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "change.h"
#include "put.h"
#include "txn.h"

typedef struct map_arg {
    const char *name;
    unsigned kind;
    bonsai_map *map;
    unsigned *kind_out;
} map_arg;

/* Does the catalog the caller sees hold name?  Fills *t when it does. */
static int lookup(bonsai_db *db, bonsai_txn *txn, const char *name,
                  bt_tree *t)
{
    if (txn && txn->rdonly) {
        bt_tree cat = {.kind = BONSAI_KEY_BYTES, .depth = txn->snap.cat_depth};
        cat.root.ext = txn->snap.cat_root;
        bt_rd rd = {txn->snap.end, &txn->uc, NULL, 0, NULL};
        return maps_find_record(db, &rd, &cat, name, t);
    }
    map_entry *s = maps_writer_entry(db, name);
    if (s) {
        t->kind = s->kind;
        return 0;
    }
    for (uint32_t i = 0; i < db->nmaps; i++)
        if (db->maps[i].dropped && strcmp(db->maps[i].name, name) == 0)
            return BONSAI_NOTFOUND; /* dropped by this transaction */
    bt_rd rd = {db->al.end, &db->uc, NULL, 0, NULL};
    return maps_find_record(db, &rd, &db->catalog, name, t);
}

static int create_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    map_arg *a = argp;
    bt_tree t;
    int rc = lookup(db, txn, a->name, &t);
    if (rc == 0) {
        if (t.kind == a->kind)
            maps_get_entry(db, a->name, t.kind, 1, a->map);
        return BONSAI_EXISTS;
    }
    if (rc != BONSAI_NOTFOUND)
        return rc;
    map_entry *s;
    if ((rc = maps_get_entry(db, a->name, a->kind, 1, &s)))
        return rc;
    if (s->loaded)
        bt_discard(db, &s->w);
    s->w = (bt_tree){.kind = a->kind, .record_dirty = 1};
    s->live = s->loaded = 1;
    s->dropped = 0; /* its record is overwritten, not deleted */
    s->created = db->cow;
    if (!db->cow && (rc = put_new_record(db, s))) {
        s->live = s->loaded = 0;
        return rc;
    }
    db->write_gen++;
    *a->map = s;
    return 0;
}

int bonsai_map_create(bonsai_db *db, bonsai_txn *txn, const char *name,
                      unsigned kind, bonsai_map *map)
{
    if (!db || !map || !maps_name_ok(name) || (txn && txn->db != db) ||
        (kind != BONSAI_KEY_U64 && kind != BONSAI_KEY_BYTES))
        return BONSAI_INVALID;
    map_arg a = {name, kind, map, NULL};
    return txn_change(db, txn, create_fn, &a);
}

static int open_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    map_arg *a = argp;
    bt_tree t;
    int rc = lookup(db, txn, a->name, &t);
    if (rc)
        return rc;
    map_entry *s;
    if ((rc = maps_get_entry(db, a->name, t.kind, 1, &s)))
        return rc;
    *a->map = s;
    if (a->kind_out)
        *a->kind_out = t.kind;
    return 0;
}

int bonsai_map_open(bonsai_db *db, bonsai_txn *txn, const char *name,
                    bonsai_map *map, unsigned *kind)
{
    if (!db || !map || !maps_name_ok(name) || (txn && txn->db != db))
        return BONSAI_INVALID;
    map_arg a = {name, 0, map, kind};
    return txn_read(db, txn, open_fn, &a);
}

static int drop_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    (void)txn;
    map_arg *a = argp;
    bt_tree t;
    int rc = lookup(db, txn, a->name, &t);
    if (rc)
        return rc;
    map_entry *s;
    if ((rc = maps_get_entry(db, a->name, t.kind, 0, &s)))
        return rc;
    bt_tree *w;
    if ((rc = maps_writer_tree(db, s, &w)))
        return rc;
    maps_forget_waiting(db, s); /* they die with the map */
    change_note_tree(db, w);
    db->write_gen++;
    if ((rc = bt_drop(db, w)))
        return rc;
    s->dropped = 1;
    w->record_dirty = 1; /* now: the record's deletion */
    if (!db->cow) {
        /* no transaction to wait for: the record goes now */
        if ((rc = maps_store_record(db, s)))
            return rc;
        s->live = s->loaded = s->dropped = 0;
        maps_release_if_unused(db, s);
    }
    return 0;
}

int bonsai_map_drop(bonsai_db *db, bonsai_txn *txn, const char *name)
{
    if (!db || !maps_name_ok(name) || (txn && txn->db != db))
        return BONSAI_INVALID;
    map_arg a = {name, 0, NULL, NULL};
    return txn_change(db, txn, drop_fn, &a);
}

typedef struct list_arg {
    bonsai_map_fn fn;
    void *ctx;
    bonsai_db *db;
    int writer;          /* the writer's view: its maps over the catalog */
    map_entry **created;  /* writer: maps with no record yet, by name ... */
    uint32_t ncreated, next; /* ... and the next one to list */
} list_arg;

/* A writer's map as it is, with its waiting puts that add keys. */
static int list_entry(list_arg *a, map_entry *s)
{
    uint64_t adds;
    int rc = put_new_keys(a->db, s, &adds);
    return rc ? rc : a->fn(a->ctx, s->name, s->kind, s->w.count + adds);
}

/* Lists the created maps named before name (the one named name, if any,
 * has a record: list_one lists it). */
static int list_created_before(list_arg *a, const char *name)
{
    for (; a->next < a->ncreated; a->next++) {
        map_entry *s = a->created[a->next];
        int order = name ? strcmp(s->name, name) : -1;
        if (order == 0)
            a->next++;
        if (order >= 0)
            return 0;
        int rc = list_entry(a, s);
        if (rc)
            return rc;
    }
    return 0;
}

static int dropped_here(bonsai_db *db, const char *name)
{
    for (uint32_t i = 0; i < db->nmaps; i++)
        if (db->maps[i].dropped && strcmp(db->maps[i].name, name) == 0)
            return 1;
    return 0;
}

static int list_one(void *ctx, const char *name, const bt_tree *t)
{
    list_arg *a = ctx;
    if (!a->writer)
        return a->fn(a->ctx, name, t->kind, t->count);
    int rc = list_created_before(a, name);
    if (rc)
        return rc;
    map_entry *s = maps_writer_entry(a->db, name);
    if (s)
        return list_entry(a, s);
    return dropped_here(a->db, name) ? 0 : a->fn(a->ctx, name, t->kind,
                                                  t->count);
}

static int by_name(const void *x, const void *y)
{
    const map_entry *const *a = x, *const *b = y;
    return strcmp((*a)->name, (*b)->name);
}

/* The maps the writer created that have no record in the catalog yet
 * (with transactions: until the commit), sorted by name. */
static int gather_created(bonsai_db *db, list_arg *a)
{
    a->created = malloc((db->nmaps ? db->nmaps : 1) * sizeof *a->created);
    if (!a->created)
        return BONSAI_NOMEM;
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_entry *s = &db->maps[i];
        if (s->created && s->live && s->loaded && !s->dropped)
            a->created[a->ncreated++] = s;
    }
    qsort(a->created, a->ncreated, sizeof *a->created, by_name);
    return 0;
}

/* Reads only, so that it needs no room: the writer's maps are listed as
 * they are (their records in the catalog may be older), not written. */
static int list_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    list_arg *a = argp;
    if (txn && txn->rdonly) {
        bt_tree cat = {.kind = BONSAI_KEY_BYTES, .depth = txn->snap.cat_depth};
        cat.root.ext = txn->snap.cat_root;
        bt_rd rd = {txn->snap.end, &txn->uc, NULL, 0, NULL};
        return maps_each_record(db, &rd, &cat, list_one, a);
    }
    a->db = db;
    a->writer = 1;
    int rc = gather_created(db, a);
    bt_rd rd = {db->al.end, &db->uc, NULL, 0, NULL};
    if (rc == 0)
        rc = maps_each_record(db, &rd, &db->catalog, list_one, a);
    if (rc == 0)
        rc = list_created_before(a, NULL);
    free(a->created);
    return rc;
}

int bonsai_map_list(bonsai_db *db, bonsai_txn *txn, bonsai_map_fn fn,
                    void *ctx)
{
    if (!db || !fn || (txn && txn->db != db))
        return BONSAI_INVALID;
    list_arg a = {.fn = fn, .ctx = ctx};
    return txn_read(db, txn, list_fn, &a);
}

/* Writes one map's changes into the writer's catalog (as a commit does
 * for all): its waiting puts, every cached node, its record. */
static int settle_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    (void)txn;
    map_entry *s = argp;
    int rc = put_apply_waiting(db, s);
    if (rc == 0)
        rc = bt_flush(db);
    if (rc == 0)
        rc = maps_store_record(db, s);
    return rc;
}

int bonsai_map_close(bonsai_db *db, bonsai_map map)
{
    if (!db || !map || map->db != db)
        return BONSAI_INVALID;
    pthread_mutex_lock(&db->lock);
    int rc = !map->name || !map->opens ? BONSAI_INVALID : 0;
    int last = rc == 0 && map->opens == 1;
    if (last && map->cursors)
        rc = BONSAI_BUSY;
    else if (rc == 0 && !last)
        map->opens--;
    bonsai_txn *wtxn = db->wtxn;
    pthread_mutex_unlock(&db->lock);
    if (rc || !last)
        return rc;
    /* changes only a write transaction (or, without transactions, the
     * store) holds go into its catalog first: nothing is lost with the
     * entry, and commit or abort still takes them or leaves them */
    if (maps_unsettled(map) && (wtxn || !db->cow) &&
        (rc = txn_change(db, wtxn, settle_fn, map)))
        return rc;
    maps_release_entry(db, map);
    return 0;
}

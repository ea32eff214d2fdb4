/* SPDX-License-Identifier: MIT */
/*
 * maps.c - named maps: the map table's entries and the catalog's records (the
 * public calls on them are in mapcalls.c).
 *
 * The catalog is a byte-key tree: key = map name (1..255 bytes), value =
 * the map's 24-byte record (meta.h).  db->maps is a fixed array of
 * BONSAI_MAX_MAPS entries, so a bonsai_map pointer stays valid until its
 * last bonsai_map_close (or the db's close); an entry is published (nmaps
 * raised, or a free entry taken) under db->lock once its name and kind
 * are set.  An entry is freed only when its map's state is in the catalog
 * the writer sees (settled, below), so freeing it loses nothing; its gen
 * tells read snapshots that it may name another map now.
 * An entry is one (name, kind): a map dropped and created again with
 * the other kind in one transaction leaves two entries of one name, the
 * dropped one and the live one, and the name's record is the live one's.
 */
#include "maps.h"

#include <stdlib.h>
#include <string.h>

#include "btree.h"

static bn_key name_key(const char *name)
{
    return (bn_key){.b = (const uint8_t *)name, .len = (uint32_t)strlen(name)};
}

int maps_name_ok(const char *name)
{
    if (!name)
        return 0;
    size_t len = strlen(name);
    return len >= 1 && len <= BONSAI_MAX_NAME;
}

int maps_tree_of_record(const uint8_t *v, uint32_t len, bt_tree *t)
{
    unsigned kind, flags, depth;
    bn_ext root;
    uint64_t count;
    int rc = bx_record_decode(v, len, &kind, &flags, &depth, &root, &count);
    if (rc)
        return rc;
    *t = (bt_tree){.kind = kind, .depth = (uint8_t)depth,
                   .flags = (uint8_t)flags, .count = count};
    t->root.ext = root;
    return 0;
}

/* Looks name up in catalog. */
int maps_find_record(bonsai_db *db, const bt_rd *rd, const bt_tree *catalog,
                       const char *name, bt_tree *t)
{
    bonsai_val v;
    bn_key key = name_key(name);
    int rc = bt_get(db, rd, catalog, &key, &v);
    if (rc)
        return rc;
    return maps_tree_of_record(v.data, (uint32_t)v.size, t);
}

int maps_each_record(bonsai_db *db, const bt_rd *rd, const bt_tree *catalog,
                     maps_record_fn fn, void *ctx)
{
    bn_node leaf;
    bn_init(&leaf, BONSAI_KEY_BYTES, 1);
    uint8_t last[BONSAI_MAX_KEY];
    char name[BONSAI_MAX_NAME + 1];
    uint32_t idx;
    int rc = bt_seek(db, rd, catalog, BT_FIRST, (bn_key){0}, &leaf, &idx,
                     NULL);
    while (rc == 0) {
        for (uint32_t i = idx; i < leaf.n && rc == 0; i++) {
            bn_key k = bn_key_at(&leaf, i);
            const uint8_t *v;
            uint32_t len;
            unsigned vflag;
            bt_tree t;
            bn_value_at(&leaf, i, &v, &len, &vflag);
            if (k.len > BONSAI_MAX_NAME || vflag ||
                memchr(k.b, 0, k.len)) {
                rc = BONSAI_CORRUPT;
                break;
            }
            memcpy(name, k.b, k.len);
            name[k.len] = 0;
            if ((rc = maps_tree_of_record(v, len, &t)) == 0)
                rc = fn(ctx, name, &t);
        }
        if (rc)
            break;
        bn_key k = bn_key_at(&leaf, leaf.n - 1);
        memcpy(last, k.b, k.len);
        k.b = last;
        rc = bt_seek(db, rd, catalog, BT_GT, k, &leaf, &idx, NULL);
    }
    bn_clear(&leaf);
    return rc == BONSAI_NOTFOUND ? 0 : rc;
}

/* ---- entries ----------------------------------------------------------- */

map_entry *maps_writer_entry(bonsai_db *db, const char *name)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_entry *s = &db->maps[i];
        if (s->loaded && s->live && !s->dropped &&
            strcmp(s->name, name) == 0)
            return s;
    }
    return NULL;
}

/* A free entry (one a close left, or a new one), under db->lock. */
static map_entry *free_entry(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++)
        if (!db->maps[i].name)
            return &db->maps[i];
    if (db->nmaps == BONSAI_MAX_MAPS)
        return NULL;
    map_entry *s = &db->maps[db->nmaps];
    memset(s, 0, sizeof *s);
    s->db = db;
    s->index = db->nmaps;
    pb_init(&s->pb, 0);
    db->nmaps++;
    return s;
}

/* The entry of that name and kind, or a free one given them.  handle: the
 * entry is given to the caller as a handle (counted in opens). */
int maps_get_entry(bonsai_db *db, const char *name, unsigned kind,
                    int handle, map_entry **out)
{
    int rc = 0;
    pthread_mutex_lock(&db->lock);
    map_entry *s = NULL;
    for (uint32_t i = 0; i < db->nmaps && !s; i++)
        if (db->maps[i].name && db->maps[i].kind == kind &&
            strcmp(db->maps[i].name, name) == 0)
            s = &db->maps[i];
    if (!s) {
        char *copy = strdup(name);
        if (!copy)
            rc = BONSAI_NOMEM;
        else if (!(s = free_entry(db)))
            rc = BONSAI_MAPS_FULL;
        if (rc) {
            free(copy);
        } else {
            /* the writer's fields are as a free entry has them: zero */
            s->name = copy;
            s->kind = kind;
            s->pb.kind = kind;
        }
    }
    if (s && handle)
        s->opens++;
    pthread_mutex_unlock(&db->lock);
    *out = s;
    return rc;
}

void maps_forget_waiting(bonsai_db *db, map_entry *s)
{
    size_t before = pb_mem_bytes(&s->pb);
    db->waiting -= s->pb.n;
    db->waiting_payload -= pb_payload_bytes(&s->pb);
    pb_reset(&s->pb);
    db->waiting_bytes = db->waiting_bytes - before + pb_mem_bytes(&s->pb);
}

/* Frees an entry whose writer state is settled: nothing in it is unknown
 * to the catalog the writer sees. */
void maps_release_entry(bonsai_db *db, map_entry *s)
{
    if (s->loaded)
        bt_discard(db, &s->w);
    maps_forget_waiting(db, s);
    db->waiting_bytes -= pb_mem_bytes(&s->pb); /* the arrays kept */
    pb_free(&s->pb);
    pthread_mutex_lock(&db->lock);
    char *name = s->name;
    uint32_t index = s->index, gen = s->gen + 1;
    memset(s, 0, sizeof *s);
    s->db = db;
    s->index = index;
    s->gen = gen;
    pb_init(&s->pb, 0);
    pthread_mutex_unlock(&db->lock);
    free(name);
}

/* Does the entry hold changes the writer's catalog does not know yet? */
int maps_unsettled(const map_entry *s)
{
    return s->pb.n || (s->loaded && (s->w.record_dirty || s->dropped));
}

static uint32_t published(bonsai_db *db)
{
    pthread_mutex_lock(&db->lock);
    uint32_t n = db->nmaps;
    pthread_mutex_unlock(&db->lock);
    return n;
}

int maps_writer_tree(bonsai_db *db, bonsai_map map, bt_tree **t)
{
    if (!map || map->db != db || !map->name)
        return BONSAI_INVALID;
    if (map->dropped)
        return BONSAI_NOTFOUND; /* as a snapshot after the drop says */
    if (!map->loaded) {
        /* opened through a snapshot, or not used since a commit/abort:
         * the map exists for the writer if its catalog says so */
        bt_rd rd = {db->al.end, &db->uc, NULL, 0, NULL};
        int rc = maps_find_record(db, &rd, &db->catalog, map->name,
                             &map->w);
        if (rc == BONSAI_NOTFOUND || (rc == 0 && map->w.kind != map->kind)) {
            map->live = 0;
            return BONSAI_NOTFOUND;
        }
        if (rc)
            return rc;
        map->loaded = map->live = 1;
    }
    *t = &map->w;
    return 0;
}

static int grow_reader_maps(bonsai_txn *txn, uint32_t n)
{
    struct rmap *m = realloc(txn->rmaps, n * sizeof *m);
    if (!m)
        return BONSAI_NOMEM;
    memset(m + txn->nrmaps, 0, (n - txn->nrmaps) * sizeof *m);
    txn->rmaps = m;
    txn->nrmaps = n;
    return 0;
}

int maps_reader_tree(bonsai_txn *txn, bonsai_map map, bt_tree **t)
{
    bonsai_db *db = txn->db;
    if (!map || map->db != db || !map->name)
        return BONSAI_INVALID;
    uint32_t i = map->index;
    if (i >= txn->nrmaps) {
        int rc = grow_reader_maps(txn, published(db));
        if (rc)
            return rc;
    }
    struct rmap *r = &txn->rmaps[i];
    if (r->state == 0 || r->gen != map->gen) {
        /* not looked up yet, or for the map a closed entry named before */
        bt_tree cat = {.kind = BONSAI_KEY_BYTES, .depth = txn->snap.cat_depth,
                       .count = txn->snap.cat_count};
        cat.root.ext = txn->snap.cat_root;
        bt_rd rd = {txn->snap.end, &txn->uc, NULL, 0, NULL};
        int rc = maps_find_record(db, &rd, &cat, map->name, &r->t);
        if (rc && rc != BONSAI_NOTFOUND)
            return rc;
        r->state = rc == 0 && r->t.kind == map->kind ? 1 : 2;
        r->gen = map->gen;
    }
    if (r->state == 2)
        return BONSAI_NOTFOUND;
    *t = &r->t;
    return 0;
}

/* ---- records, commit and abort ----------------------------------------- */

/* The record deletion a dropped entry owes (w.record_dirty), once. */
static int delete_record(bonsai_db *db, map_entry *s)
{
    if (!s->w.record_dirty)
        return 0;
    int rc = bt_del(db, &db->catalog, name_key(s->name));
    if (rc == BONSAI_NOTFOUND)
        rc = 0;
    if (rc == 0)
        s->w.record_dirty = 0;
    return rc;
}

/* Before a live entry stores its name's record, the dropped entries of that
 * name delete theirs: so the live record is the one that stays, even when
 * the live entry is closed (and freed) before the commit. */
static int delete_dropped_records(bonsai_db *db, const map_entry *live)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_entry *s = &db->maps[i];
        if (s != live && s->loaded && s->dropped &&
            strcmp(s->name, live->name) == 0) {
            int rc = delete_record(db, s);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int maps_store_record(bonsai_db *db, map_entry *s)
{
    if (s->dropped) {
        /* a map created again under the name, in another entry when the
         * kind differs, owns the record now: deleting it, before or
         * after that map stored it, would lose the map */
        if (maps_writer_entry(db, s->name))
            return 0;
        return delete_record(db, s);
    }
    if (!s->live || !s->w.record_dirty)
        return 0;
    int drc = delete_dropped_records(db, s);
    if (drc)
        return drc;
    const bt_tree *t = &s->w;
    if (t->depth && t->root.ext.pgno == 0)
        return BONSAI_CORRUPT; /* not flushed: a bug, not a file problem */
    uint8_t rec[BX_RECORD_SIZE];
    bx_record_encode(t->kind, t->flags, t->depth, t->root.ext, t->count, rec);
    int rc = bt_put(db, &db->catalog, name_key(s->name), rec, sizeof rec, 0);
    if (rc == 0)
        s->w.record_dirty = 0;
    return rc;
}

int maps_store_records(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_entry *s = &db->maps[i];
        if (!s->loaded)
            continue;
        int rc = maps_store_record(db, s);
        if (rc)
            return rc;
    }
    return 0;
}

void maps_mark_records_dirty(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_entry *s = &db->maps[i];
        if (s->loaded && s->live)
            s->w.record_dirty = 1;
    }
}

/* An entry no handle names (taken by a drop) is freed once settled. */
void maps_release_if_unused(bonsai_db *db, map_entry *s)
{
    pthread_mutex_lock(&db->lock);
    int unused = s->name && !s->opens && !s->cursors;
    pthread_mutex_unlock(&db->lock);
    if (unused)
        maps_release_entry(db, s);
}

void maps_after_commit(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_entry *s = &db->maps[i];
        if (s->dropped) {
            s->live = 0;
            s->loaded = 0;
        }
        s->dropped = 0;
        s->created = 0;
        maps_release_if_unused(db, s);
    }
}

void maps_after_abort(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_entry *s = &db->maps[i];
        if (s->created)
            s->live = 0;
        s->created = 0;
        s->dropped = 0;
        if (s->loaded)
            bt_discard(db, &s->w);
        s->loaded = 0;
        maps_forget_waiting(db, s);
        maps_release_if_unused(db, s);
    }
}

void maps_free_all(bonsai_db *db)
{
    if (!db->maps)
        return;
    for (uint32_t i = 0; i < db->nmaps; i++) {
        if (db->maps[i].loaded)
            bt_discard(db, &db->maps[i].w);
        maps_forget_waiting(db, &db->maps[i]);
        pb_free(&db->maps[i].pb);
        free(db->maps[i].name);
    }
    db->nmaps = 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * maps.c - named maps: handles, catalog records, create/open/drop/list.
 *
 * The catalog is a byte-key tree: key = map name (1..255 bytes), value =
 * the map's 24-byte record (meta.h).  db->maps is a fixed array of
 * BONSAI_MAX_MAPS slots, so a bonsai_map pointer stays valid until its
 * last bonsai_map_close (or the db's close); a slot is published (nmaps
 * raised, or a free slot taken) under db->lock once its name and kind
 * are set.  A slot is freed only when its map's state is in the catalog
 * the writer sees (settled, below), so freeing it loses nothing; its gen
 * tells read snapshots that it may name another map now.
 * A slot is one (name, kind): a map dropped and created again with the
 * other kind in one transaction leaves two slots of one name, the dropped
 * one and the live one, and the name's record is the live one's.
 */
#include "maps.h"

#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "pending.h"
#include "txn.h"

static bn_key name_key(const char *name)
{
    return (bn_key){.b = (const uint8_t *)name, .len = (uint32_t)strlen(name)};
}

static int name_ok(const char *name)
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
static int find_record(bonsai_db *db, const bt_rd *rd, const bt_tree *catalog,
                       const char *name, bt_tree *t)
{
    bonsai_val v;
    int rc = bt_get(db, rd, catalog, name_key(name), &v);
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

/* ---- slots ------------------------------------------------------------- */

static map_slot *writer_slot(bonsai_db *db, const char *name)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_slot *s = &db->maps[i];
        if (s->loaded && s->live && !s->dropped &&
            strcmp(s->name, name) == 0)
            return s;
    }
    return NULL;
}

/* A free slot (one a close left, or a new one), under db->lock. */
static map_slot *free_slot(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++)
        if (!db->maps[i].name)
            return &db->maps[i];
    if (db->nmaps == BONSAI_MAX_MAPS)
        return NULL;
    map_slot *s = &db->maps[db->nmaps];
    memset(s, 0, sizeof *s);
    s->db = db;
    s->index = db->nmaps;
    pb_init(&s->pb, 0);
    db->nmaps++;
    return s;
}

/* The slot of that name and kind, or a free one given them.  handle: the
 * slot is given to the caller as a handle (counted in opens). */
static int get_slot(bonsai_db *db, const char *name, unsigned kind,
                    int handle, map_slot **out)
{
    int rc = 0;
    pthread_mutex_lock(&db->lock);
    map_slot *s = NULL;
    for (uint32_t i = 0; i < db->nmaps && !s; i++)
        if (db->maps[i].name && db->maps[i].kind == kind &&
            strcmp(db->maps[i].name, name) == 0)
            s = &db->maps[i];
    if (!s) {
        char *copy = strdup(name);
        if (!copy)
            rc = BONSAI_NOMEM;
        else if (!(s = free_slot(db)))
            rc = BONSAI_MAPS_FULL;
        if (rc) {
            free(copy);
        } else {
            /* the writer's fields are as a free slot has them: zero */
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

/* Frees a slot whose writer state is settled: nothing in it is unknown
 * to the catalog the writer sees. */
static void release_slot(bonsai_db *db, map_slot *s)
{
    if (s->loaded)
        bt_forget_tree(db, &s->w);
    pending_forget(db, s);
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

/* Does the slot hold changes the writer's catalog does not know yet? */
static int unsettled(const map_slot *s)
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
        bt_rd rd = {db->al.end, &db->uc};
        int rc = find_record(db, &rd, &db->catalog, map->name,
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
        /* not looked up yet, or for the map a closed slot named before */
        bt_tree cat = {.kind = BONSAI_KEY_BYTES, .depth = txn->snap.cat_depth,
                       .count = txn->snap.cat_count};
        cat.root.ext = txn->snap.cat_root;
        bt_rd rd = {txn->snap.end, &txn->uc};
        int rc = find_record(db, &rd, &cat, map->name, &r->t);
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

/* The record deletion a dropped slot owes (w.record_dirty), once. */
static int delete_record(bonsai_db *db, map_slot *s)
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

/* Before a live slot stores its name's record, the dropped slots of that
 * name delete theirs: so the live record is the one that stays, even when
 * the live slot is closed (and freed) before the commit. */
static int delete_dropped_records(bonsai_db *db, const map_slot *live)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_slot *s = &db->maps[i];
        if (s != live && s->loaded && s->dropped &&
            strcmp(s->name, live->name) == 0) {
            int rc = delete_record(db, s);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int maps_store_record(bonsai_db *db, map_slot *s)
{
    if (s->dropped) {
        /* a map created again under the name, in another slot when the
         * kind differs, owns the record now: deleting it, before or
         * after that map stored it, would lose the map */
        if (writer_slot(db, s->name))
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
        map_slot *s = &db->maps[i];
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
        map_slot *s = &db->maps[i];
        if (s->loaded && s->live)
            s->w.record_dirty = 1;
    }
}

/* A slot no handle names (taken by a drop) is freed once settled. */
static void release_if_unused(bonsai_db *db, map_slot *s)
{
    pthread_mutex_lock(&db->lock);
    int unused = s->name && !s->opens && !s->cursors;
    pthread_mutex_unlock(&db->lock);
    if (unused)
        release_slot(db, s);
}

void maps_after_commit(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_slot *s = &db->maps[i];
        if (s->dropped) {
            s->live = 0;
            s->loaded = 0;
        }
        s->dropped = 0;
        s->created = 0;
        release_if_unused(db, s);
    }
}

void maps_after_abort(bonsai_db *db)
{
    for (uint32_t i = 0; i < db->nmaps; i++) {
        map_slot *s = &db->maps[i];
        if (s->created)
            s->live = 0;
        s->created = 0;
        s->dropped = 0;
        if (s->loaded)
            bt_discard(db, &s->w);
        s->loaded = 0;
        pending_forget(db, s);
        release_if_unused(db, s);
    }
}

void maps_free_all(bonsai_db *db)
{
    if (!db->maps)
        return;
    for (uint32_t i = 0; i < db->nmaps; i++) {
        if (db->maps[i].loaded)
            bt_discard(db, &db->maps[i].w);
        pending_forget(db, &db->maps[i]);
        pb_free(&db->maps[i].pb);
        free(db->maps[i].name);
    }
    db->nmaps = 0;
}

/* ---- public calls ------------------------------------------------------ */

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
        bt_rd rd = {txn->snap.end, &txn->uc};
        return find_record(db, &rd, &cat, name, t);
    }
    map_slot *s = writer_slot(db, name);
    if (s) {
        t->kind = s->kind;
        return 0;
    }
    for (uint32_t i = 0; i < db->nmaps; i++)
        if (db->maps[i].dropped && strcmp(db->maps[i].name, name) == 0)
            return BONSAI_NOTFOUND; /* dropped by this transaction */
    bt_rd rd = {db->al.end, &db->uc};
    return find_record(db, &rd, &db->catalog, name, t);
}

static int create_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    map_arg *a = argp;
    bt_tree t;
    int rc = lookup(db, txn, a->name, &t);
    if (rc == 0) {
        if (t.kind == a->kind)
            get_slot(db, a->name, t.kind, 1, a->map);
        return BONSAI_EXISTS;
    }
    if (rc != BONSAI_NOTFOUND)
        return rc;
    map_slot *s;
    if ((rc = get_slot(db, a->name, a->kind, 1, &s)))
        return rc;
    if (s->loaded)
        bt_discard(db, &s->w);
    s->w = (bt_tree){.kind = a->kind, .record_dirty = 1};
    s->live = s->loaded = 1;
    s->dropped = 0; /* its record is overwritten, not deleted */
    s->created = db->cow;
    if (!db->cow && (rc = pending_new_record(db, s))) {
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
    if (!db || !map || !name_ok(name) || (txn && txn->db != db) ||
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
    map_slot *s;
    if ((rc = get_slot(db, a->name, t.kind, 1, &s)))
        return rc;
    *a->map = s;
    if (a->kind_out)
        *a->kind_out = t.kind;
    return 0;
}

int bonsai_map_open(bonsai_db *db, bonsai_txn *txn, const char *name,
                    bonsai_map *map, unsigned *kind)
{
    if (!db || !map || !name_ok(name) || (txn && txn->db != db))
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
    map_slot *s;
    if ((rc = get_slot(db, a->name, t.kind, 0, &s)))
        return rc;
    bt_tree *w;
    if ((rc = maps_writer_tree(db, s, &w)))
        return rc;
    pending_forget(db, s); /* they die with the map */
    txn_note_tree(db, w);
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
        release_if_unused(db, s);
    }
    return 0;
}

int bonsai_map_drop(bonsai_db *db, bonsai_txn *txn, const char *name)
{
    if (!db || !name_ok(name) || (txn && txn->db != db))
        return BONSAI_INVALID;
    map_arg a = {name, 0, NULL, NULL};
    return txn_change(db, txn, drop_fn, &a);
}

typedef struct list_arg {
    bonsai_map_fn fn;
    void *ctx;
    bonsai_db *db;
    int writer;          /* the writer's view: its maps over the catalog */
    map_slot **created;  /* writer: maps with no record yet, by name ... */
    uint32_t ncreated, next; /* ... and the next one to list */
} list_arg;

/* A writer's map as it is, with its waiting puts that add keys. */
static int list_slot(list_arg *a, map_slot *s)
{
    uint64_t adds;
    int rc = pending_new_keys(a->db, s, &adds);
    return rc ? rc : a->fn(a->ctx, s->name, s->kind, s->w.count + adds);
}

/* Lists the created maps named before name (the one named name, if any,
 * has a record: list_one lists it). */
static int list_created_before(list_arg *a, const char *name)
{
    for (; a->next < a->ncreated; a->next++) {
        map_slot *s = a->created[a->next];
        int order = name ? strcmp(s->name, name) : -1;
        if (order == 0)
            a->next++;
        if (order >= 0)
            return 0;
        int rc = list_slot(a, s);
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
    map_slot *s = writer_slot(a->db, name);
    if (s)
        return list_slot(a, s);
    return dropped_here(a->db, name) ? 0 : a->fn(a->ctx, name, t->kind,
                                                  t->count);
}

static int by_name(const void *x, const void *y)
{
    const map_slot *const *a = x, *const *b = y;
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
        map_slot *s = &db->maps[i];
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
        bt_rd rd = {txn->snap.end, &txn->uc};
        return maps_each_record(db, &rd, &cat, list_one, a);
    }
    a->db = db;
    a->writer = 1;
    int rc = gather_created(db, a);
    bt_rd rd = {db->al.end, &db->uc};
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
    map_slot *s = argp;
    int rc = pending_apply(db, s);
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
     * slot, and commit or abort still takes them or leaves them */
    if (unsettled(map) && (wtxn || !db->cow) &&
        (rc = txn_change(db, wtxn, settle_fn, map)))
        return rc;
    release_slot(db, map);
    return 0;
}

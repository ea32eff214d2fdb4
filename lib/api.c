/* SPDX-License-Identifier: MIT */
/*
 * api.c - the data calls: put, get, del, count and their u64 forms.
 * Checks arguments, turns a bonsai_val key into a node key of the map's
 * kind, and runs the operation through txn_change / txn_read.
 */
#include <string.h>

#include "api.h"
#include "btree.h"
#include "cache.h"
#include "change.h"
#include "maps.h"
#include "put.h"
#include "txn.h"

int api_key(unsigned kind, const bonsai_val *key, bn_key *out)
{
    if (!key || (key->size && !key->data))
        return BONSAI_INVALID;
    memset(out, 0, sizeof *out);
    if (kind == BONSAI_KEY_U64) {
        if (key->size != sizeof(uint64_t))
            return BONSAI_KEYSIZE;
        memcpy(&out->u, key->data, sizeof out->u);
        return 0;
    }
    if (key->size == 0 || key->size > BONSAI_MAX_KEY)
        return BONSAI_KEYSIZE;
    out->b = key->data;
    out->len = (uint32_t)key->size;
    return 0;
}

int api_map_ok(const bonsai_txn *txn, bonsai_map map)
{
    if (!map || !map->db || (txn && txn->db != map->db))
        return BONSAI_INVALID;
    return 0;
}

typedef struct data_arg {
    bonsai_map map;
    bn_key key;
    const uint8_t *val;
    uint32_t vlen;
    unsigned flags;
    bonsai_val *out;
    uint64_t *count;
} data_arg;

static int put_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    (void)txn;
    data_arg *a = argp;
    bt_tree *t;
    int rc = maps_writer_tree(db, a->map, &t);
    if (rc)
        return rc;
    return put_key(db, a->map, t, a->key, a->val, a->vlen, a->flags);
}

static int del_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    (void)txn;
    data_arg *a = argp;
    bt_tree *t;
    int rc = maps_writer_tree(db, a->map, &t);
    return rc ? rc : put_del(db, a->map, t, a->key);
}

static int get_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    data_arg *a = argp;
    bt_tree *t;
    bt_rd rd;
    bonsai_val ignored, *out = a->out ? a->out : &ignored;
    if (!(txn && txn->rdonly) && a->map->db == db &&
        put_waiting_get(a->map, &a->key, out) == 0)
        return 0;
    int rc = txn_tree_as_is(db, txn, a->map, &t, &rd);
    if (rc)
        return rc;
    return bt_get(db, &rd, t, &a->key, out);
}

static int count_fn(bonsai_db *db, bonsai_txn *txn, void *argp)
{
    data_arg *a = argp;
    bt_tree *t;
    bt_rd rd;
    int rc = txn_tree(db, txn, a->map, &t, &rd);
    if (rc == 0)
        *a->count = t->count;
    return rc;
}

int bonsai_put(bonsai_txn *txn, bonsai_map map, const bonsai_val *key,
               const bonsai_val *val, unsigned flags)
{
    int rc = api_map_ok(txn, map);
    if (rc)
        return rc;
    data_arg a = {.map = map, .flags = flags};
    if ((rc = api_key(map->kind, key, &a.key)))
        return rc;
    if (flags & ~BONSAI_NOOVERWRITE)
        return BONSAI_INVALID;
    if (val) {
        if (val->size && !val->data)
            return BONSAI_INVALID;
        if (val->size > BONSAI_MAX_VALUE)
            return BONSAI_VALSIZE;
        a.val = val->data;
        a.vlen = (uint32_t)val->size;
    }
    if (!txn && change_direct_ok(map->db)) {
        int done;
        rc = put_append_direct(map->db, map, a.key, a.val, a.vlen, &done);
        if (done)
            return rc;
    }
    return txn_change(map->db, txn, put_fn, &a);
}

int bonsai_get(bonsai_txn *txn, bonsai_map map, const bonsai_val *key,
               bonsai_val *val)
{
    int rc = api_map_ok(txn, map);
    if (rc)
        return rc;
    data_arg a = {.map = map, .out = val};
    if ((rc = api_key(map->kind, key, &a.key)))
        return rc;
    return txn_read(map->db, txn, get_fn, &a);
}

int bonsai_del(bonsai_txn *txn, bonsai_map map, const bonsai_val *key)
{
    int rc = api_map_ok(txn, map);
    if (rc)
        return rc;
    data_arg a = {.map = map};
    if ((rc = api_key(map->kind, key, &a.key)))
        return rc;
    return txn_change(map->db, txn, del_fn, &a);
}

int bonsai_count(bonsai_txn *txn, bonsai_map map, uint64_t *count)
{
    int rc = api_map_ok(txn, map);
    if (rc)
        return rc;
    if (!count)
        return BONSAI_INVALID;
    data_arg a = {.map = map, .count = count};
    return txn_read(map->db, txn, count_fn, &a);
}

int api_u64_ok(bonsai_map map)
{
    if (!map)
        return BONSAI_INVALID;
    return map->kind == BONSAI_KEY_U64 ? 0 : BONSAI_MAPKIND;
}

int bonsai_put_u64(bonsai_txn *txn, bonsai_map map, uint64_t key,
                   const bonsai_val *val, unsigned flags)
{
    int rc = api_u64_ok(map);
    bonsai_val k = {sizeof key, &key};
    return rc ? rc : bonsai_put(txn, map, &k, val, flags);
}

int bonsai_get_u64(bonsai_txn *txn, bonsai_map map, uint64_t key,
                   bonsai_val *val)
{
    int rc = api_u64_ok(map);
    bonsai_val k = {sizeof key, &key};
    return rc ? rc : bonsai_get(txn, map, &k, val);
}

int bonsai_del_u64(bonsai_txn *txn, bonsai_map map, uint64_t key)
{
    int rc = api_u64_ok(map);
    bonsai_val k = {sizeof key, &key};
    return rc ? rc : bonsai_del(txn, map, &k);
}

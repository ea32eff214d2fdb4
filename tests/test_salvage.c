/* SPDX-License-Identifier: MIT */
/*
 * test_salvage.c - bonsai-dump -r, which dumps what can still be read of a
 * damaged store, run as a program from $BONSAI_BUILD_DIR:
 *
 *  - one leaf of a 300,000-key map damaged beside a healthy map: every
 *    key of the healthy map and every key of the damaged one outside the
 *    leaf's separators is dumped, sorted; stderr names the map, the page
 *    and the keys lost; exit 1; the dump loads into a store that verify
 *    passes, holding exactly those entries.  Without -r the dump fails as
 *    it did; on the healthy store -r writes what a plain dump writes;
 *  - a damaged overflow value: only its entry is dropped, and named;
 *  - a damaged catalog leaf and a damaged map root: the maps whose
 *    records can be read are dumped (the one without its root, empty),
 *    the others named with the range of names lost;
 *  - forged trees (forge.h): a child shared by many branches, separators
 *    out of order, a leaf under two parents, a root outside the file: the
 *    dump ends promptly, in key order, each entry once, each loss named.
 *
 * Where the damage goes is found with the library's own walk (bt_walk)
 * and seek (bt_seek), not with the salvage walk under test.  The suite's
 * timeout is a hang guard, not a timing assertion.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bonsai.h"
#include "btree.h"
#include "forge.h"
#include "internal.h"
#include "toolrun.h"
#include "txn.h"
#include "util.h"

TestSuite(salvage, .init = tu_setup, .fini = tu_teardown, .timeout = 300);

#define A_KEYS 300000u
#define B_KEYS 3000u

/* ---- runs and their output ---------------------------------------------- */

static void expect(const tr_result *r, int want)
{
    cr_assert(r->status == want, "%s: exit %d, expected %d\nstderr: %.2000s",
              r->cmd, r->status, want, r->err);
}

static void expect_in(const char *text, const char *needle, const char *cmd)
{
    cr_assert(strstr(text, needle), "%s: no '%s' in:\n%.3000s", cmd, needle,
              text);
}

static size_t count_lines(const char *text)
{
    size_t n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* Asserts that the key lines of every block of a dump strictly increase
 * (bytevalue and print lines of printable keys sort as the bytes). */
static void assert_sorted(const char *text, const char *cmd)
{
    const char *prev = NULL;
    size_t plen = 0;
    int data = 0, is_key = 1;
    for (const char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        cr_assert(nl, "%s: output ends inside a line", cmd);
        size_t len = (size_t)(nl - p);
        if (!data) {
            data = !strncmp(p, "HEADER=END\n", 11);
            is_key = 1;
            prev = NULL;
            continue;
        }
        if (!strncmp(p, "DATA=END\n", 9)) {
            data = 0;
            continue;
        }
        if (is_key) {
            size_t m = len < plen ? len : plen;
            int c = prev ? memcmp(prev, p, m) : -1;
            cr_assert(c < 0 || (c == 0 && plen < len), "%s: key line %.*s "
                      "does not follow %.*s", cmd, (int)len, p, (int)plen,
                      prev);
            prev = p;
            plen = len;
        }
        is_key = !is_key;
    }
}

/* The u64 keys of map's block of a bytevalue dump, in order, into keys
 * (at most cap); their number. */
static size_t u64_keys(const char *text, const char *map, uint64_t *keys,
                       size_t cap)
{
    char head[64];
    snprintf(head, sizeof head, "database=%s\n", map);
    const char *p = strstr(text, head);
    cr_assert(p, "no block of map %s", map);
    p = strstr(p, "HEADER=END\n") + 11;
    size_t n = 0;
    while (strncmp(p, "DATA=END\n", 9) != 0) {
        cr_assert(n < cap && sscanf(p, " %16" SCNx64, &keys[n]) == 1);
        n++;
        p = strchr(p, '\n') + 1; /* the key line */
        p = strchr(p, '\n') + 1; /* the value line */
    }
    return n;
}

static void flip(const char *path, uint64_t off, size_t n)
{
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    uint8_t b[64];
    cr_assert(n <= sizeof b && pread(fd, b, n, (off_t)off) == (ssize_t)n);
    for (size_t i = 0; i < n; i++)
        b[i] ^= 0xff;
    cr_assert(pwrite(fd, b, n, (off_t)off) == (ssize_t)n);
    close(fd);
}

/* ---- stores ------------------------------------------------------------- */

static bonsai_db *open_rw(const char *path, uint32_t node_entries)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.transactions = 1;
    o.sync = 0;
    o.max_size = UINT64_C(256) << 20;
    if (node_entries)
        o.node_entries = node_entries;
    return tu_open(path, &o);
}

/* Key i of map "a": a0000000, a0000001, ... */
static bonsai_val key_a(uint32_t i, char buf[16])
{
    snprintf(buf, 16, "a%07" PRIu32, i);
    return tu_val(buf, 8);
}

/* Map "a": A_KEYS keys key_a(i) with empty values (a model of so many
 * would cost more than the rest); map "b": B_KEYS u64 keys 0, 7, 14, ...
 * with small values, and its model. */
static void make_two_maps(const char *path, tm_model *b)
{
    bonsai_db *db = open_rw(path, 0);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    bonsai_map ma = tu_map_create(db, txn, "a", BONSAI_KEY_BYTES);
    bonsai_map mb = tu_map_create(db, txn, "b", BONSAI_KEY_U64);
    bonsai_val none = tu_val("", 0);
    tm_init(b, BONSAI_KEY_U64);
    for (uint32_t i = 0; i < A_KEYS; i++) {
        char k[16];
        bonsai_val key = key_a(i, k);
        TU_OK(bonsai_put(txn, ma, &key, &none, 0));
    }
    for (uint64_t i = 0; i < B_KEYS; i++) {
        char v[16];
        uint64_t k = 7 * i;
        int vl = snprintf(v, sizeof v, "v%" PRIu64, i);
        bonsai_val val = tu_val(v, (size_t)vl);
        TU_OK(bonsai_put_u64(txn, mb, k, &val, 0));
        tm_append(b, &k, 8, v, (size_t)vl);
    }
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
}

/* ---- where the damage goes ---------------------------------------------- */

typedef struct exts {
    bn_ext v[4096];
    size_t n;
    int values;      /* collect overflow runs, not nodes */
    const bonsai_db *db;
} exts;

/* Collects leaves (a raw image's type byte) or overflow runs. */
static int collect(void *ctx, bn_ext e, int is_value)
{
    exts *x = ctx;
    const uint8_t *img = x->db->rg.base + e.pgno * x->db->page_size;
    if (is_value == x->values && (is_value || img[0] == BN_TYPE_LEAF)) {
        cr_assert(x->n < sizeof x->v / sizeof x->v[0]);
        x->v[x->n++] = e;
    }
    return 0;
}

/* A leaf of a tree, where it is and the separators around it. */
typedef struct leaf_at {
    uint64_t pgno;
    uint64_t off;    /* in the file */
    uint32_t n;      /* entries */
    bt_bounds b;
} leaf_at;

/* The tree of map (NULL: the catalog) in txn. */
static bt_tree tree_of(bonsai_db *db, bonsai_txn *txn, const char *map)
{
    if (!map) {
        bt_tree cat = {.kind = BONSAI_KEY_BYTES,
                       .depth = txn->snap.cat_depth};
        cat.root.ext = txn->snap.cat_root;
        return cat;
    }
    bonsai_map m;
    bt_tree *t;
    bt_rd rd;
    TU_OK(bonsai_map_open(db, txn, map, &m, NULL));
    TU_OK(txn_tree(db, txn, m, &t, &rd));
    bt_tree copy = *t;
    TU_OK(bonsai_map_close(db, m));
    return copy;
}

/* The leaves (values 0) or overflow runs (1) of the tree of map (NULL:
 * the catalog) in txn, in walk order. */
static exts *walk_exts(bonsai_db *db, bonsai_txn *txn, const char *map,
                       int values)
{
    bt_tree t = tree_of(db, txn, map);
    bt_rd rd = {txn->snap.end, &txn->uc, NULL, 0, NULL};
    exts *x = calloc(1, sizeof *x);
    cr_assert(x);
    x->db = db;
    x->values = values;
    TU_OK(bt_walk(db, &rd, &t, NULL, collect, x));
    return x;
}

/* The leaf at `where` (0 the first, 1 the last, in walk order) of the
 * tree of map (NULL: the catalog) of the store at path; the seek of its
 * first key gives its bounds. */
static void find_leaf(const char *path, const char *map, double where,
                      leaf_at *out)
{
    bonsai_db *db = tu_open_ro(path);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn));
    bt_tree t = tree_of(db, txn, map);
    bt_rd rd = {txn->snap.end, &txn->uc, NULL, 0, NULL};
    exts *x = walk_exts(db, txn, map, 0);
    cr_assert(x->n >= 3, "%zu leaves", x->n);
    bn_ext e = x->v[(size_t)(where * (double)(x->n - 1))];
    bn_node n, seek;
    bn_init(&n, t.kind, 1);
    bn_init(&seek, t.kind, 1);
    TU_OK(bn_decode(db->rg.base + e.pgno * db->page_size,
                    (size_t)e.npages * db->page_size, t.kind, &n));
    uint32_t idx;
    TU_OK(bt_seek(db, &rd, &t, BT_GE, bn_key_at(&n, 0), &seek, &idx,
                  &out->b));
    cr_assert(idx == 0 && seek.n == n.n, "the seek landed elsewhere");
    out->pgno = e.pgno;
    out->off = e.pgno * db->page_size;
    out->n = n.n;
    bn_clear(&n);
    bn_clear(&seek);
    free(x);
    bonsai_txn_abort(txn);
    TU_OK(bonsai_close(db));
}

/* The first overflow run of map (values 1) or its root (0), as a page. */
static uint64_t find_page(const char *path, const char *map, int values)
{
    bonsai_db *db = tu_open_ro(path);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn));
    uint64_t pgno = tree_of(db, txn, map).root.ext.pgno;
    if (values) {
        exts *x = walk_exts(db, txn, map, 1);
        cr_assert(x->n > 0, "map %s has no overflow value", map);
        pgno = x->v[0].pgno;
        free(x);
    }
    bonsai_txn_abort(txn);
    TU_OK(bonsai_close(db));
    return pgno;
}

static uint32_t page_size_of(const char *path)
{
    bonsai_db *db = tu_open_ro(path);
    uint32_t ps = db->page_size;
    TU_OK(bonsai_close(db));
    return ps;
}

/* Is key k (bytes) within [lower, upper) of b? */
static int in_bounds(const bt_bounds *b, const void *k, size_t kl)
{
    return (!b->has_lower || tm_cmp(BONSAI_KEY_BYTES, k, kl, b->lower.b,
                                    b->lower.len) >= 0) &&
           (!b->has_upper || tm_cmp(BONSAI_KEY_BYTES, k, kl, b->upper.b,
                                    b->upper.len) < 0);
}

/* How stderr shows the range between two byte-key separators. */
static void range_text(const bt_bounds *b, char *buf, size_t cap)
{
    cr_assert(b->has_lower && b->has_upper, "an edge leaf");
    for (uint32_t i = 0; i < b->lower.len; i++)
        cr_assert(b->lower.b[i] > 0x20 && b->lower.b[i] < 0x7f &&
                  b->lower.b[i] != '"' && b->lower.b[i] != '\\');
    for (uint32_t i = 0; i < b->upper.len; i++)
        cr_assert(b->upper.b[i] > 0x20 && b->upper.b[i] < 0x7f &&
                  b->upper.b[i] != '"' && b->upper.b[i] != '\\');
    snprintf(buf, cap, "from \"%.*s\" up to \"%.*s\"", (int)b->lower.len,
             (const char *)b->lower.b, (int)b->upper.len,
             (const char *)b->upper.b);
}

/* Map "a" of db holds exactly the keys key_a(i) outside b's range, with
 * empty values; how many are within it. */
static uint32_t assert_a_without(bonsai_db *db, const bt_bounds *b)
{
    bonsai_map map = tu_map_open(db, NULL, "a", BONSAI_KEY_BYTES);
    bonsai_cursor *c;
    TU_OK(bonsai_cursor_open(NULL, map, &c));
    int rc = bonsai_cursor_first(c);
    uint32_t dropped = 0;
    for (uint32_t i = 0; i < A_KEYS; i++) {
        char want[16];
        bonsai_val w = key_a(i, want), k, v;
        if (in_bounds(b, w.data, w.size)) {
            dropped++;
            continue;
        }
        TU_OK(rc);
        TU_OK(bonsai_cursor_get(c, &k, &v));
        cr_assert(k.size == 8 && memcmp(k.data, want, 8) == 0 && v.size == 0,
                  "map a: %s where %s belongs", tu_fmt(BONSAI_KEY_BYTES,
                  k.data, k.size), want);
        rc = bonsai_cursor_next(c);
    }
    TU_RC(rc, BONSAI_NOTFOUND);
    bonsai_cursor_close(c);
    TU_OK(bonsai_map_close(db, map));
    return dropped;
}

/* Loads the dump into a new store, which verify passes. */
static const char *load_and_verify(const char *dump, const char *name)
{
    const char *st = tr_path(name);
    tr_result r = TR_RUN("bonsai-load", "-f", dump, st);
    expect(&r, 0);
    tr_result_free(&r);
    r = TR_RUN("bonsai-verify", st);
    expect(&r, 0);
    tr_result_free(&r);
    return st;
}

static void assert_map(bonsai_db *db, const char *name, const tm_model *m)
{
    bonsai_map map = tu_map_open(db, NULL, name, m->kind);
    TU_ASSERT_SAME(NULL, map, m, name);
    TU_OK(bonsai_map_close(db, map));
}

/* ---- a damaged leaf beside a healthy map ------------------------------- */

Test(salvage, damaged_leaf_loses_its_range_only)
{
    const char *good = tr_path("good.bonsai"), *bad = tr_path("bad.bonsai");
    const char *dump = tr_path("dump.txt");
    tm_model b;
    make_two_maps(good, &b);

    /* healthy: -r writes what a plain dump writes */
    tr_result plain = TR_RUN("bonsai-dump", good);
    tr_result r = TR_RUN("bonsai-dump", "-r", good);
    expect(&plain, 0);
    expect(&r, 0);
    cr_assert(r.err[0] == 0, "%s: stderr: %s", r.cmd, r.err);
    cr_assert(strcmp(r.out, plain.out) == 0, "-r differs from a plain dump");
    tr_result_free(&plain);
    tr_result_free(&r);

    leaf_at leaf;
    find_leaf(good, "a", 0.5, &leaf);
    tr_copy_file(good, bad);
    flip(bad, leaf.off + 40, 8); /* in the key section: its checksum */

    /* without -r the dump fails, as it always did */
    r = TR_RUN("bonsai-dump", bad);
    expect(&r, 1);
    expect_in(r.err, "map a", r.cmd);
    tr_result_free(&r);

    r = TR_RUN("bonsai-dump", "-r", "-f", dump, bad);
    expect(&r, 1);
    char want[600], range[512];
    range_text(&leaf.b, range, sizeof range);
    snprintf(want, sizeof want, "map a: page %" PRIu64 ": ", leaf.pgno);
    expect_in(r.err, want, r.cmd);
    expect_in(r.err, range, r.cmd);
    cr_assert(count_lines(r.err) == 1, "%s: more than one loss:\n%s",
              r.cmd, r.err);
    cr_log_info("%s", r.err);
    tr_result_free(&r);
    char *text = tr_slurp(dump, NULL);
    assert_sorted(text, "bonsai-dump -r");
    free(text);

    bonsai_db *db = tu_open_ro(load_and_verify(dump, "loaded.bonsai"));
    uint32_t dropped = assert_a_without(db, &leaf.b);
    cr_assert(dropped == leaf.n, "the separators hold %" PRIu32 " keys, the "
              "leaf %" PRIu32, dropped, leaf.n);
    assert_map(db, "b", &b);
    TU_OK(bonsai_close(db));
    tm_free(&b);
}

/* ---- a damaged overflow value ------------------------------------------- */

/* Map "v": keys k00..k39, every tenth value (k03, k13, ...) 3000 bytes,
 * stored apart from its leaf; the others small. */
static void make_values(const char *path, tm_model *m)
{
    bonsai_db *db = open_rw(path, 0);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    bonsai_map map = tu_map_create(db, txn, "v", BONSAI_KEY_BYTES);
    tm_init(m, BONSAI_KEY_BYTES);
    static char big[3000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    for (int i = 0; i < 40; i++) {
        char k[16], small[16];
        snprintf(k, sizeof k, "k%02d", i);
        int vl = snprintf(small, sizeof small, "small %d", i);
        bonsai_val key = tu_val(k, 3);
        bonsai_val val = i % 10 == 3 ? tu_val(big, sizeof big)
                                     : tu_val(small, (size_t)vl);
        TU_OK(bonsai_put(txn, map, &key, &val, 0));
        tm_append(m, k, 3, val.data, val.size);
    }
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
}

Test(salvage, damaged_overflow_value_loses_its_entry_only)
{
    const char *good = tr_path("v.bonsai"), *bad = tr_path("vbad.bonsai");
    const char *dump = tr_path("v.txt");
    tm_model m, left;
    make_values(good, &m);
    tr_result plain = TR_RUN("bonsai-dump", "-p", good);
    tr_result r = TR_RUN("bonsai-dump", "-r", "-p", good);
    expect(&r, 0);
    cr_assert(strcmp(r.out, plain.out) == 0, "-r -p differs from -p");
    tr_result_free(&plain);
    tr_result_free(&r);

    uint64_t pgno = find_page(good, "v", 1);
    tr_copy_file(good, bad);
    flip(bad, pgno * page_size_of(good) + 100, 4); /* in the value */
    r = TR_RUN("bonsai-dump", "-r", "-p", "-f", dump, bad);
    expect(&r, 1);
    char *text = tr_slurp(dump, NULL);
    tm_init(&left, BONSAI_KEY_BYTES);
    int lost = -1;
    for (size_t i = 0; i < m.n; i++) {
        char line[8];
        snprintf(line, sizeof line, " %.3s\n", (const char *)m.e[i].key);
        if (strstr(text, line))
            tm_append(&left, m.e[i].key, 3, m.e[i].val, m.e[i].vlen);
        else
            lost = (int)i;
    }
    cr_assert(left.n == m.n - 1 && m.e[lost].vlen == 3000,
              "%zu entries dumped of %zu", left.n, m.n);
    char want[64];
    snprintf(want, sizeof want, "map v: page ");
    expect_in(r.err, want, r.cmd);
    snprintf(want, sizeof want, "key \"%.3s\": ",
             (const char *)m.e[lost].key);
    expect_in(r.err, want, r.cmd);
    cr_assert(count_lines(r.err) == 1, "%s:\n%s", r.cmd, r.err);
    cr_log_info("%s", r.err);
    tr_result_free(&r);
    free(text);
    bonsai_db *db = tu_open_ro(load_and_verify(dump, "vloaded.bonsai"));
    assert_map(db, "v", &left);
    TU_OK(bonsai_close(db));
    tm_free(&m);
    tm_free(&left);
}

/* ---- a damaged catalog -------------------------------------------------- */

#define N_MAPS 40

/* N_MAPS maps m00, m01, ... of keys 0, 1, 2, in nodes of at most 4
 * entries: a catalog of many leaves. */
static void make_many_maps(const char *path)
{
    bonsai_db *db = open_rw(path, 4);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    for (int i = 0; i < N_MAPS; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%02d", i);
        bonsai_map m = tu_map_create(db, txn, name, BONSAI_KEY_U64);
        bonsai_val none = tu_val("", 0);
        for (uint64_t k = 0; k < 3; k++)
            TU_OK(bonsai_put_u64(txn, m, k, &none, 0));
        TU_OK(bonsai_map_close(db, m));
    }
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
}

Test(salvage, damaged_catalog_keeps_the_maps_it_can_read)
{
    const char *good = tr_path("c.bonsai"), *bad = tr_path("cbad.bonsai");
    const char *dump = tr_path("c.txt");
    make_many_maps(good);
    leaf_at cat;
    find_leaf(good, NULL, 0.5, &cat);
    cr_assert(!in_bounds(&cat.b, "m00", 3));
    uint64_t root = find_page(good, "m00", 0);
    uint32_t ps = page_size_of(good);
    tr_copy_file(good, bad);
    flip(bad, cat.off + 8, 4); /* their checksums */
    flip(bad, root * ps + 8, 4);

    tr_result r = TR_RUN("bonsai-dump", bad);
    expect(&r, 1);
    tr_result_free(&r);
    r = TR_RUN("bonsai-dump", "-r", "-f", dump, bad);
    expect(&r, 1);
    char want[600], range[512];
    snprintf(want, sizeof want, "catalog: page %" PRIu64 ": ", cat.pgno);
    expect_in(r.err, want, r.cmd);
    range_text(&cat.b, range, sizeof range);
    snprintf(want, sizeof want, "skipped the maps %s", range);
    expect_in(r.err, want, r.cmd);
    snprintf(want, sizeof want, "map m00: page %" PRIu64 ": ", root);
    expect_in(r.err, want, r.cmd);
    expect_in(r.err, "skipped all its keys", r.cmd);
    cr_assert(count_lines(r.err) == 2, "%s:\n%s", r.cmd, r.err);
    cr_log_info("%s", r.err);
    tr_result_free(&r);

    bonsai_db *db = tu_open_ro(load_and_verify(dump, "cloaded.bonsai"));
    uint32_t lost = 0;
    for (int i = 0; i < N_MAPS; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%02d", i);
        bonsai_map m;
        int rc = bonsai_map_open(db, NULL, name, &m, NULL);
        if (in_bounds(&cat.b, name, 3)) {
            TU_RC(rc, BONSAI_NOTFOUND);
            lost++;
            continue;
        }
        TU_OK(rc);
        uint64_t n;
        TU_OK(bonsai_count(NULL, m, &n));
        cr_assert(n == (i == 0 ? 0u : 3u), "map %s: %" PRIu64 " entries",
                  name, n);
        TU_OK(bonsai_map_close(db, m));
    }
    cr_assert(lost == cat.n && lost > 0, "%u maps lost, the leaf held %u",
              lost, cat.n);
    TU_OK(bonsai_close(db));
}

/* ---- forged trees ------------------------------------------------------- */

static void write_forged(tf_store *s, const char *path, const tf_map *maps,
                         unsigned n)
{
    tf_finish(s, maps, n);
    tf_write(s, path);
    tf_free(s);
}

/* bonsai-dump -r of path: exit 1, the keys of map m into keys (at most
 * cap, their number into *n), stderr into err (freed by the caller). */
static char *salvage_keys(const char *path, const char *map, uint64_t *keys,
                          size_t cap, size_t *n)
{
    tr_result r = TR_RUN("bonsai-dump", "-r", path);
    expect(&r, 1);
    assert_sorted(r.out, r.cmd);
    *n = u64_keys(r.out, map, keys, cap);
    char *err = r.err;
    r.err = NULL;
    tr_result_free(&r);
    return err;
}

static void assert_keys(const uint64_t *got, size_t n, const uint64_t *want,
                        size_t wn, const char *ctx)
{
    cr_assert(n == wn, "%s: %zu keys, expected %zu", ctx, n, wn);
    for (size_t i = 0; i < n; i++)
        cr_assert(got[i] == want[i], "%s: key %zu is %" PRIu64 ", expected "
                  "%" PRIu64, ctx, i, got[i], want[i]);
}

/* One leaf (keys 0..9) under 7 levels of branches of 300 children, all
 * the one node below: 300^7 paths lead to it. */
Test(salvage, forged_shared_children_read_once)
{
    const char *path = tr_path("shared.bonsai");
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    bn_ext below = tf_place(&s, tf_leaf_run(10, 0, 1));
    uint64_t keys[300];
    bn_ext kids[300];
    for (unsigned l = 0; l < 7; l++) {
        for (uint32_t i = 0; i < 300; i++) {
            keys[i] = i * 1000;
            kids[i] = below;
        }
        below = tf_place(&s, tf_branch_u64(300, keys, kids));
    }
    write_forged(&s, path, &(tf_map){"m", BONSAI_KEY_U64, 0, 8, below, 10},
                 1);
    uint64_t got[64], want[10];
    size_t n;
    for (uint64_t i = 0; i < 10; i++)
        want[i] = i;
    char *err = salvage_keys(path, "m", got, 64, &n);
    assert_keys(got, n, want, 10, "shared child");
    expect_in(err, "map m: page ", "shared child");
    expect_in(err, "already reached", "shared child");
    cr_assert(count_lines(err) == 7 * 299, "%zu losses", count_lines(err));
    free(err);
}

/* Separators 0, 50, 100 over leaves {10, 20, 60}, {40, 70}, {150}: keys
 * beyond them; and a leaf {50..59} under two branches, below the second
 * one's separator 100. */
Test(salvage, forged_separators_keep_the_dump_sorted)
{
    const char *order = tr_path("order.bonsai"), *twice = tr_path("2.bonsai");
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    uint64_t a[] = {10, 20, 60}, b[] = {40, 70}, c[] = {150},
             seps[] = {0, 50, 100};
    bn_ext kids[3] = {tf_place(&s, tf_leaf_u64(3, a, NULL)),
                      tf_place(&s, tf_leaf_u64(2, b, NULL)),
                      tf_place(&s, tf_leaf_u64(1, c, NULL))};
    bn_ext root = tf_place(&s, tf_branch_u64(3, seps, kids));
    write_forged(&s, order, &(tf_map){"m", BONSAI_KEY_U64, 0, 2, root, 6}, 1);
    uint64_t got[64], want[30];
    size_t n;
    char *err = salvage_keys(order, "m", got, 64, &n);
    assert_keys(got, n, (uint64_t[]){10, 20, 70, 150}, 4, "out of bounds");
    char line[160];
    snprintf(line, sizeof line, "map m: page %" PRIu64 ": 1 key outside "
             "the separators its parents give (below 50); skipped it",
             kids[0].pgno);
    expect_in(err, line, "out of bounds");
    snprintf(line, sizeof line, "map m: page %" PRIu64 ": 1 key outside "
             "the separators its parents give (from 50 up to 100); skipped "
             "it", kids[1].pgno);
    expect_in(err, line, "out of bounds");
    cr_assert(count_lines(err) == 2, "%s", err);
    free(err);

    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    bn_ext l1 = tf_place(&s, tf_leaf_run(10, 0, 1));
    bn_ext l2 = tf_place(&s, tf_leaf_run(10, 50, 1));
    bn_ext l3 = tf_place(&s, tf_leaf_run(10, 150, 1));
    uint64_t k1[] = {0, 50}, k2[] = {100, 150}, kr[] = {0, 100};
    bn_ext c1[] = {l1, l2}, c2[] = {l2, l3};
    bn_ext mid[] = {tf_place(&s, tf_branch_u64(2, k1, c1)),
                    tf_place(&s, tf_branch_u64(2, k2, c2))};
    root = tf_place(&s, tf_branch_u64(2, kr, mid));
    write_forged(&s, twice, &(tf_map){"m", BONSAI_KEY_U64, 0, 3, root, 40},
                 1);
    for (uint64_t i = 0; i < 30; i++)
        want[i] = i < 10 ? i : i < 20 ? 40 + i : 130 + i;
    err = salvage_keys(twice, "m", got, 64, &n);
    assert_keys(got, n, want, 30, "a leaf under two parents");
    snprintf(line, sizeof line, "map m: page %" PRIu64 ": its pages were "
             "already reached from another node; skipped the keys from 100 "
             "up to 150", l2.pgno);
    expect_in(err, line, "a leaf under two parents");
    free(err);
}

/* Map "x" whose root lies beyond the file, beside a healthy map "m". */
Test(salvage, map_without_a_readable_root_is_skipped)
{
    const char *path = tr_path("root.bonsai");
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    bn_ext leaf = tf_place(&s, tf_leaf_run(10, 0, 1));
    tf_map maps[] = {{"m", BONSAI_KEY_U64, 0, 1, leaf, 10},
                     {"x", BONSAI_KEY_U64, 0, 1, {99999, 1}, 10}};
    write_forged(&s, path, maps, 2);
    tr_result r = TR_RUN("bonsai-dump", path);
    expect(&r, 1);
    tr_result_free(&r);
    uint64_t got[64], want[10];
    size_t n;
    for (uint64_t i = 0; i < 10; i++)
        want[i] = i;
    char *err = salvage_keys(path, "m", got, 64, &n);
    assert_keys(got, n, want, 10, "map m");
    expect_in(err, "map x: page 99999: it lies outside the store's pages; "
              "skipped all its keys", "map x");
    cr_assert(count_lines(err) == 1, "%s", err);
    free(err);
}

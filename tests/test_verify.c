/* SPDX-License-Identifier: MIT */
/*
 * test_verify.c - the inspection API (bonsai_verify, bonsai_compact,
 * bonsai_space_stat) and its tools (bonsai-verify, bonsai-stat,
 * bonsai-compact).
 *
 *  - verify is clean on stores of every configuration: file or anonymous,
 *    transactions on or off, write cache or none, no compression, lz4,
 *    zlib, pages of 512 and 4096 bytes; u64 and byte maps, overflow
 *    values, after many deletes, after a map drop, after a reopen;
 *  - corruption by flipping bytes of a file: a node's body and its header,
 *    one meta slot (the store opens from the other, verify names the bad
 *    one), both slots, the header;
 *  - every single-bit flip of a small store (and every third of a small
 *    lz4 store): open + verify never crash; every flip in bytes verify
 *    covers (the head area, node runs, overflow headers and values) is
 *    reported, and no flip elsewhere (free pages, overflow tails) is;
 *  - compact: contents equal, verify clean, smaller than a randomly
 *    filled source, the source untouched, other settings, anonymous
 *    sources, refusals (same file, a directory), no temporary left;
 *  - the tools: success, --help, bad usage (2), a missing file, a
 *    directory, a read-only file, a corrupt store (1, the node named;
 *    bonsai-dump and bonsai-stat report and do not crash).
 *
 * The bit-flip test learns where the nodes and values are through the
 * library's own walk (bt_walk, maps_each_record), not through verify.
 * Random stores print their seed and take BONSAI_TEST_SEED.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include "bonsai.h"
#include "btree.h"
#include "internal.h"
#include "maps.h"
#include "util.h"

TestSuite(verify, .init = tu_setup, .fini = tu_teardown, .timeout = 120);



/* A path in the temporary directory that stays valid for the test (the
 * buffers of tu_path rotate). */
static const char *tp(const char *name)
{
    static char pool[64][PATH_MAX];
    static unsigned used;
    cr_assert(used < 64, "tp: out of path buffers");
    snprintf(pool[used], PATH_MAX, "%s", tu_path(name));
    return pool[used++];
}

/* ---- running verify ----------------------------------------------------- */

#define KEEP 4

typedef struct probs {
    uint64_t n;
    char map[KEEP][64];
    uint64_t pgno[KEEP];
    char what[KEEP][400];
    uint64_t done, total;
    int calls, backwards;
} probs;

static void on_problem(void *ctx, const char *map, uint64_t pgno,
                       const char *what)
{
    probs *p = ctx;
    if (p->n < KEEP) {
        snprintf(p->map[p->n], sizeof p->map[0], "%s", map);
        p->pgno[p->n] = pgno;
        snprintf(p->what[p->n], sizeof p->what[0], "%s", what);
    }
    p->n++;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    probs *p = ctx;
    if (done < p->done || done > total)
        p->backwards = 1;
    p->done = done;
    p->total = total;
    p->calls++;
}

static uint64_t run_verify(bonsai_db *db, unsigned flags, probs *p)
{
    memset(p, 0, sizeof *p);
    uint64_t n = UINT64_MAX;
    TU_OK(bonsai_verify(db, flags, on_problem, on_progress, p, &n));
    cr_assert(n == p->n, "verify counted %" PRIu64 ", reported %" PRIu64, n,
              p->n);
    cr_assert(p->calls > 0 && !p->backwards && p->done == p->total,
              "progress: %d calls, ended at %" PRIu64 " of %" PRIu64,
              p->calls, p->done, p->total);
    return n;
}

static void assert_clean(bonsai_db *db, const char *ctx)
{
    probs p;
    for (unsigned quick = 0; quick < 2; quick++) {
        run_verify(db, quick ? BONSAI_VERIFY_QUICK : 0, &p);
        cr_assert(p.n == 0, "%s (%s): %" PRIu64 " problems, first: map '%s' "
                  "page %" PRIu64 ": %s", ctx, quick ? "quick" : "full", p.n,
                  p.map[0], p.pgno[0], p.what[0]);
    }
}

/* Asserts a problem was reported, one of them naming map and pgno (map
 * NULL: any). */
static void assert_reported(const probs *p, const char *map, uint64_t pgno,
                            const char *ctx)
{
    cr_assert(p->n > 0, "%s: no problem reported", ctx);
    for (uint64_t i = 0; i < p->n && i < KEEP; i++)
        if ((!map || strcmp(p->map[i], map) == 0) && p->pgno[i] == pgno)
            return;
    cr_assert_fail("%s: %" PRIu64 " problems, none at map '%s' page %" PRIu64
                   "; first: map '%s' page %" PRIu64 ": %s", ctx, p->n,
                   map ? map : "*", pgno, p->map[0], p->pgno[0], p->what[0]);
}

/* ---- building stores ---------------------------------------------------- */

static bonsai_options small_opts(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.node_bytes = 512; /* deep trees from few entries; overflow > 128 */
    o.page_size = 512;  /* the corruption tests find images at pgno * 512 */
    o.max_size = UINT64_C(64) << 20;
    o.sync = 0; /* crash safety is not what these tests are about */
    return o;
}

/* Contents: a u64 map "u" and a byte map "b" with models. */
typedef struct content {
    tm_model u, b;
    uint64_t seed;
} content;

static void content_init(content *c, uint64_t seed)
{
    tm_init(&c->u, BONSAI_KEY_U64);
    tm_init(&c->b, BONSAI_KEY_BYTES);
    c->seed = seed;
}

static void content_free(content *c)
{
    tm_free(&c->u);
    tm_free(&c->b);
}

static void put_u(bonsai_txn *txn, bonsai_map m, tm_model *mod, tu_rng *r)
{
    uint64_t k = tu_rand(r);
    uint8_t v[8];
    size_t vl = tu_chance(r, 200) ? 8 : 0;
    tu_fill(r, v, vl);
    bonsai_val val = tu_val(v, vl);
    TU_OK(bonsai_put_u64(txn, m, k, &val, 0));
    tm_put(mod, &k, 8, v, vl);
}

static void put_b(bonsai_txn *txn, bonsai_map m, tm_model *mod, tu_rng *r)
{
    char k[32];
    static uint8_t v[400];
    int kl = snprintf(k, sizeof k, "key-%08" PRIx64, tu_below(r, 1u << 30));
    size_t vl = tu_chance(r, 150) ? tu_range(r, 129, 400) : tu_below(r, 40);
    tu_fill(r, v, vl);
    bonsai_val key = tu_val(k, (size_t)kl), val = tu_val(v, vl);
    TU_OK(bonsai_put(txn, m, &key, &val, 0));
    tm_put(mod, k, (size_t)kl, v, vl);
}

/* Runs n puts (or deletes of every entry whose hash says so) in batches:
 * one transaction per batch in transaction mode, NULL txn otherwise. */
typedef void (*op_fn)(bonsai_db *db, bonsai_txn *txn, content *c,
                      tu_rng *r, uint64_t i);

static void batches(bonsai_db *db, int txns, content *c, uint64_t n,
                    op_fn op, uint64_t seed)
{
    tu_rng r = {seed};
    const uint64_t per = 700;
    for (uint64_t i = 0; i < n; i += per) {
        bonsai_txn *txn = NULL;
        if (txns)
            TU_OK(bonsai_txn_begin(db, 0, &txn));
        for (uint64_t j = i; j < n && j < i + per; j++)
            op(db, txn, c, &r, j);
        if (txns)
            TU_OK(bonsai_txn_commit(txn));
    }
}

static void op_put(bonsai_db *db, bonsai_txn *txn, content *c, tu_rng *r,
                   uint64_t i)
{
    bonsai_map u = tu_map_open(db, txn, "u", BONSAI_KEY_U64);
    bonsai_map b = tu_map_open(db, txn, "b", BONSAI_KEY_BYTES);
    if (i % 8 == 0)
        put_b(txn, b, &c->b, r);
    else
        put_u(txn, u, &c->u, r);
}

/* Deletes about two thirds of a model's keys from the map. */
static void delete_most(bonsai_db *db, bonsai_txn *txn, const char *name,
                        tm_model *m)
{
    bonsai_map map = tu_map_open(db, txn, name, m->kind);
    for (size_t i = m->n; i-- > 0;) {
        tm_entry *e = &m->e[i];
        if (tu_hash(e->key, e->klen, 7) % 3 == 0)
            continue;
        bonsai_val k = tu_val(e->key, e->klen);
        TU_OK(bonsai_del(txn, map, &k));
        uint8_t key[BONSAI_MAX_KEY];
        size_t kl = e->klen;
        memcpy(key, e->key, kl);
        tm_del(m, key, kl);
    }
}

static void create_maps(bonsai_db *db, int txns)
{
    bonsai_txn *txn = NULL;
    bonsai_map m;
    if (txns)
        TU_OK(bonsai_txn_begin(db, 0, &txn));
    TU_OK(bonsai_map_create(db, txn, "u", BONSAI_KEY_U64, &m));
    TU_OK(bonsai_map_create(db, txn, "b", BONSAI_KEY_BYTES, &m));
    TU_OK(bonsai_map_create(db, txn, "gone", BONSAI_KEY_U64, &m));
    TU_OK(bonsai_put_u64(txn, m, 5, NULL, 0));
    if (txns)
        TU_OK(bonsai_txn_commit(txn));
}

static void fill(bonsai_db *db, int txns, content *c, uint64_t n)
{
    create_maps(db, txns);
    batches(db, txns, c, n, op_put, c->seed);
}

static void assert_content(bonsai_db *db, content *c, const char *ctx)
{
    bonsai_txn *txn = NULL;
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    if (st.transactions)
        TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn));
    TU_ASSERT_SAME(txn, tu_map_open(db, txn, "u", BONSAI_KEY_U64), &c->u,
                   ctx);
    TU_ASSERT_SAME(txn, tu_map_open(db, txn, "b", BONSAI_KEY_BYTES), &c->b,
                   ctx);
    bonsai_txn_abort(txn);
}

/* ---- every configuration ------------------------------------------------ */

typedef struct config {
    const char *name;
    int file, txns;
    unsigned compress;
    uint32_t page_size;
    int cache; /* 0: write_cache_bytes 0 */
} config;

static const config configs[] = {
    {"file-txn", 1, 1, BONSAI_COMPRESS_NONE, 512, 1},
    {"file-notxn", 1, 0, BONSAI_COMPRESS_NONE, 512, 1},
    {"file-notxn-nocache", 1, 0, BONSAI_COMPRESS_NONE, 512, 0},
    {"file-txn-lz4", 1, 1, BONSAI_COMPRESS_LZ4, 512, 1},
    {"file-txn-zlib-4k", 1, 1, BONSAI_COMPRESS_ZLIB, 4096, 1},
    {"file-notxn-zlib", 1, 0, BONSAI_COMPRESS_ZLIB, 512, 1},
    {"file-txn-4k", 1, 1, BONSAI_COMPRESS_NONE, 4096, 1},
    {"anon-notxn", 0, 0, BONSAI_COMPRESS_NONE, 512, 1},
    {"anon-notxn-nocache", 0, 0, BONSAI_COMPRESS_NONE, 512, 0},
    {"anon-notxn-lz4", 0, 0, BONSAI_COMPRESS_LZ4, 512, 1},
    {"anon-txn", 0, 1, BONSAI_COMPRESS_NONE, 512, 1},
    {"file-txn-64", 1, 1, BONSAI_COMPRESS_NONE, 64, 1},
    {"file-txn-zlib-64", 1, 1, BONSAI_COMPRESS_ZLIB, 64, 1},
    {"anon-notxn-lz4-64", 0, 0, BONSAI_COMPRESS_LZ4, 64, 1},
};

static void drop_gone(bonsai_db *db)
{
    TU_OK(bonsai_map_drop(db, NULL, "gone"));
}

static void run_config(const config *cf, uint64_t seed)
{
    char path[64];
    snprintf(path, sizeof path, "%s.bonsai", cf->name);
    bonsai_options o = small_opts();
    o.transactions = cf->txns;
    o.compression = cf->compress;
    o.page_size = cf->page_size;
    if (!cf->cache)
        o.write_cache_bytes = 0;
    bonsai_db *db = tu_open(cf->file ? tp(path) : NULL, &o);
    content c;
    content_init(&c, seed);
    uint64_t n = tu_scaled(6000, 1500);
    fill(db, cf->txns, &c, n);
    assert_clean(db, cf->name);
    drop_gone(db);
    for (int i = 0; i < 2; i++) {
        bonsai_txn *txn = NULL;
        if (cf->txns)
            TU_OK(bonsai_txn_begin(db, 0, &txn));
        delete_most(db, txn, i ? "b" : "u", i ? &c.b : &c.u);
        if (cf->txns)
            TU_OK(bonsai_txn_commit(txn));
    }
    assert_clean(db, cf->name);
    assert_content(db, &c, cf->name);
    TU_OK(bonsai_close(db));
    for (int txns = -1; cf->file && txns <= 0; txns++) {
        bonsai_options ro = o;
        ro.read_only = 1;
        ro.transactions = txns; /* a snapshot, or the store as it is */
        db = tu_open(tp(path), &ro);
        assert_clean(db, cf->name);
        assert_content(db, &c, cf->name);
        TU_OK(bonsai_close(db));
    }
    content_free(&c);
}

Test(verify, every_configuration)
{
    uint64_t seed = tu_seed("every_configuration", 11);
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        run_config(&configs[i], seed + i);
}

/* A write transaction in progress does not disturb verify: it checks the
 * last commit. */
Test(verify, open_write_txn)
{
    bonsai_options o = small_opts();
    bonsai_db *db = tu_open(tp("w.bonsai"), &o);
    content c;
    content_init(&c, 3);
    fill(db, 1, &c, 2000);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    tu_rng r = {9};
    bonsai_map u = tu_map_open(db, txn, "u", BONSAI_KEY_U64);
    for (int i = 0; i < 3000; i++)
        put_u(txn, u, &c.u, &r);
    assert_clean(db, "during a write txn");
    TU_OK(bonsai_txn_commit(txn));
    assert_clean(db, "after it");
    TU_OK(bonsai_close(db));
    content_free(&c);
}

Test(verify, arguments)
{
    uint64_t n = 7;
    TU_RC(bonsai_verify(NULL, 0, NULL, NULL, NULL, &n), BONSAI_INVALID);
    cr_assert(n == 0);
    bonsai_db *db = tu_open(NULL, NULL);
    TU_RC(bonsai_verify(db, 0x80, NULL, NULL, NULL, NULL), BONSAI_INVALID);
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, NULL)); /* empty store */
    bonsai_space sp;
    TU_RC(bonsai_space_stat(NULL, &sp), BONSAI_INVALID);
    TU_OK(bonsai_space_stat(db, &sp));
    cr_assert(sp.problems == 0 && sp.free_bytes == 0 && sp.file_bytes == 0);
    TU_RC(bonsai_compact(NULL, tp("x"), NULL), BONSAI_INVALID);
    TU_RC(bonsai_compact(db, NULL, NULL), BONSAI_INVALID);
    TU_OK(bonsai_close(db));
}

/* ---- file bytes --------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            b = realloc(b, cap *= 2);
        cr_assert(b);
    }
    fclose(f);
    if (len)
        *len = n;
    b[n < cap ? n : cap - 1] = 0;
    return b;
}

static void poke(const char *path, uint64_t off, uint8_t xor)
{
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
    uint8_t b;
    cr_assert(pread(fd, &b, 1, (off_t)off) == 1);
    b ^= xor;
    cr_assert(pwrite(fd, &b, 1, (off_t)off) == 1);
    close(fd);
}

static void put_bytes(const char *path, uint64_t off, const void *p,
                      size_t n)
{
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
    cr_assert(pwrite(fd, p, n, (off_t)off) == (ssize_t)n);
    close(fd);
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *b = slurp(from, &n);
    FILE *f = fopen(to, "wb");
    cr_assert(f && fwrite(b, 1, n, f) == n && fclose(f) == 0);
    free(b);
}

/* ---- where things are: the library's own walk --------------------------- */

typedef struct place {
    uint64_t pgno;
    uint32_t npages;
    int value;      /* an overflow value run */
    char map[32];   /* "" for the catalog */
} place;

typedef struct places {
    place v[4096];
    size_t n;
    const char *map;
    bonsai_db *db;
    bt_rd rd;
} places;

static int on_ext(void *ctx, bn_ext e, int is_value)
{
    places *p = ctx;
    cr_assert(p->n < sizeof p->v / sizeof p->v[0]);
    place *x = &p->v[p->n++];
    *x = (place){e.pgno, e.npages, is_value, ""};
    snprintf(x->map, sizeof x->map, "%s", p->map);
    return 0;
}

static int on_record(void *ctx, const char *name, const bt_tree *t)
{
    places *p = ctx;
    p->map = name;
    int rc = bt_walk(p->db, &p->rd, t, NULL, on_ext, p);
    p->map = "";
    return rc;
}

/* Every node and overflow run the last commit of db reaches. */
static places *find_places(bonsai_db *db)
{
    places *p = calloc(1, sizeof *p);
    cr_assert(p);
    pk_cache uc;
    memset(&uc, 0, sizeof uc);
    p->db = db;
    p->map = "";
    p->rd = (bt_rd){db->meta.end, &uc, NULL, 0, NULL};
    bt_tree cat = {.kind = BONSAI_KEY_BYTES, .depth = db->meta.cat_depth,
                   .count = db->meta.cat_count};
    cat.root.ext = db->meta.cat_root;
    TU_OK(bt_walk(db, &p->rd, &cat, NULL, on_ext, p));
    TU_OK(maps_each_record(db, &p->rd, &cat, on_record, p));
    pk_cache_free(&uc);
    return p;
}

/* A run of map holding a node of type 1 (leaf), 2 (branch) or, type 3,
 * an overflow value, as a file offset; its pgno in *pgno. */
static uint64_t find_run(const places *p, const char *map, unsigned type,
                         const uint8_t *file, uint64_t *pgno)
{
    for (size_t i = 0; i < p->n; i++) {
        const place *x = &p->v[i];
        if (x->value == (type == 3) && strcmp(x->map, map) == 0 &&
            file[x->pgno * 512] == type) {
            *pgno = x->pgno;
            return x->pgno * 512;
        }
    }
    cr_assert_fail("no run of type %u in map %s", type, map);
    return 0;
}

static uint64_t find_leaf(const places *p, const char *map,
                          uint32_t page_size, const uint8_t *file,
                          uint64_t *pgno)
{
    cr_assert(page_size == 512);
    return find_run(p, map, 1, file, pgno);
}

/* ---- corruptions -------------------------------------------------------- */

/* A file store of a few commits, closed. */
static void make_store(const char *path, uint64_t n, unsigned compress,
                       content *c)
{
    bonsai_options o = small_opts();
    o.compression = compress;
    bonsai_db *db = tu_open(path, &o);
    fill(db, 1, c, n);
    drop_gone(db);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    delete_most(db, txn, "u", &c->u);
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
}

static uint64_t verify_file(const char *path, probs *p)
{
    bonsai_db *db = tu_open_ro(path);
    uint64_t n = run_verify(db, 0, p);
    TU_OK(bonsai_close(db));
    return n;
}

Test(verify, corrupt_node)
{
    const char *path = tp("n.bonsai"), *bad = tp("bad.bonsai");
    content c;
    content_init(&c, 5);
    make_store(path, 3000, BONSAI_COMPRESS_NONE, &c);
    bonsai_db *db = tu_open_ro(path);
    places *pl = find_places(db);
    TU_OK(bonsai_close(db));
    uint8_t *file = slurp(path, NULL);
    uint64_t pgno, off = find_leaf(pl, "u", 512, file, &pgno);
    probs p;

    copy_file(path, bad);
    poke(bad, off + 40, 0x10); /* inside the key section */
    verify_file(bad, &p);
    assert_reported(&p, "u", pgno, "leaf body");
    cr_assert(strstr(p.what[0], "checksum"), "%s", p.what[0]);

    copy_file(path, bad);
    poke(bad, off, 0x06); /* type 1 -> 7 */
    verify_file(bad, &p);
    assert_reported(&p, "u", pgno, "leaf header");

    /* quick mode still sees a smashed header */
    db = tu_open_ro(bad);
    run_verify(db, BONSAI_VERIFY_QUICK, &p);
    assert_reported(&p, "u", pgno, "leaf header, quick");
    TU_OK(bonsai_close(db));

    /* a branch: reported there, its subtree not descended into */
    off = find_run(pl, "u", 2, file, &pgno);
    copy_file(path, bad);
    poke(bad, off + 17, 0x01);
    verify_file(bad, &p);
    assert_reported(&p, "u", pgno, "branch body");
    cr_assert(strstr(p.what[0], "checksum"), "%s", p.what[0]);

    /* an overflow value: its bytes, then its length */
    off = find_run(pl, "b", 3, file, &pgno);
    copy_file(path, bad);
    poke(bad, off + 100, 0x80);
    verify_file(bad, &p);
    assert_reported(&p, "b", pgno, "overflow value bytes");
    cr_assert(p.n == 1 && strstr(p.what[0], "checksum of the"), "%s",
              p.what[0]);
    db = tu_open_ro(bad);
    run_verify(db, BONSAI_VERIFY_QUICK, &p); /* quick skips value CRCs */
    cr_assert(p.n == 0, "%s", p.what[0]);
    TU_OK(bonsai_close(db));
    copy_file(path, bad);
    poke(bad, off + 8, 0x01);
    verify_file(bad, &p);
    assert_reported(&p, "b", pgno, "overflow value length");
    free(file);
    free(pl);
    content_free(&c);
}

/* Slot offsets and the txn each holds. */
static uint64_t slot_txn(const uint8_t *file, int s)
{
    uint64_t t;
    memcpy(&t, file + 512 + 512 * s + 8, 8); /* little-endian host */
    return t;
}

Test(verify, corrupt_meta_and_header)
{
    const char *path = tp("m.bonsai"), *bad = tp("bad.bonsai");
    content c;
    content_init(&c, 6);
    make_store(path, 2000, BONSAI_COMPRESS_NONE, &c);
    uint8_t *file = slurp(path, NULL);
    int newer = slot_txn(file, 1) > slot_txn(file, 0);
    probs p;

    for (int s = 0; s < 2; s++) {
        copy_file(path, bad);
        poke(bad, 512 + 512 * (unsigned)s + 20, 0x01);
        verify_file(bad, &p); /* opens from the other slot */
        char want[32];
        snprintf(want, sizeof want, "meta slot %d", s);
        cr_assert(p.n == 1 && strstr(p.what[0], want),
                  "slot %d: %" PRIu64 " problems: %s", s, p.n, p.what[0]);
        if (s == newer) {
            bonsai_db *db = tu_open_ro(bad);
            bonsai_stat st;
            TU_OK(bonsai_db_stat(db, &st));
            cr_assert(st.txn_id == slot_txn(file, !s));
            TU_OK(bonsai_close(db));
        }
    }

    copy_file(path, bad);
    poke(bad, 512 + 30, 0x01);
    poke(bad, 1024 + 30, 0x01);
    bonsai_db *db = NULL;
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    TU_RC(bonsai_open(bad, &o, &db), BONSAI_CORRUPT);

    copy_file(path, bad);
    poke(bad, 13, 0x02); /* page size */
    TU_RC(bonsai_open(bad, &o, &db), BONSAI_CORRUPT);

    copy_file(path, bad);
    poke(bad, 700, 0x01); /* the zero bytes of the head area */
    verify_file(bad, &p);
    assert_reported(&p, "", 0, "head area");
    free(file);
    content_free(&c);
}

/* A map record whose count disagrees with its leaves, rewritten through
 * the library's own encoder so every checksum holds. */
Test(verify, wrong_count)
{
    bonsai_options o = small_opts();
    o.transactions = 0;
    bonsai_db *db = tu_open(NULL, &o);
    content c;
    content_init(&c, 8);
    fill(db, 0, &c, 1000);
    assert_clean(db, "before");
    bonsai_map u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    bt_tree *t;
    TU_OK(maps_writer_tree(db, u, &t));
    t->count += 3;
    t->record_dirty = 1;
    probs p;
    run_verify(db, 0, &p);
    cr_assert(p.n == 1 && strcmp(p.map[0], "u") == 0 &&
              strstr(p.what[0], "entries"), "%" PRIu64 ": %s", p.n,
              p.what[0]);
    t->count -= 3;
    t->record_dirty = 1;
    assert_clean(db, "after");
    TU_OK(bonsai_close(db));
    content_free(&c);
}

/* ---- every single-bit flip ---------------------------------------------- */

enum { ANY, MUST_NOT, MUST };

/* What verify must say about a flip at each byte below end. */
static uint8_t *classify(const places *pl, const uint8_t *file, size_t end,
                         uint32_t ps)
{
    uint8_t *cls = malloc(end);
    cr_assert(cls);
    memset(cls, MUST, 4096);        /* header, slots, zero bytes */
    memset(cls + 4096, MUST_NOT, end - 4096); /* free pages */
    for (size_t i = 0; i < pl->n; i++) {
        const place *x = &pl->v[i];
        size_t at = x->pgno * ps, len = (size_t)x->npages * ps;
        cr_assert(at + len <= end);
        memset(cls + at, MUST, len); /* image and zero fill */
        if (!x->value)
            continue;
        uint64_t vlen;
        memcpy(&vlen, file + at + 8, 8);
        memset(cls + at + 16 + vlen, ANY, len - 16 - vlen); /* unspecified */
    }
    return cls;
}

typedef struct flips {
    const char *path;
    uint8_t *file;
    uint8_t *cls;
    size_t end;
    uint64_t tried, reported, missed, false_alarms;
    char first_miss[200], first_false[200];
} flips;

static int flip_reported(flips *f, bonsai_db *ro, uint64_t bit)
{
    uint64_t off = bit / 8;
    uint8_t b = f->file[off] ^ (uint8_t)(1u << (bit % 8));
    put_bytes(f->path, off, &b, 1);
    uint64_t n = 0;
    int rc = 0;
    if (ro) {
        TU_OK(bonsai_verify(ro, 0, NULL, NULL, NULL, &n));
    } else {
        bonsai_options o;
        bonsai_options_init(&o);
        o.read_only = 1;
        bonsai_db *db;
        rc = bonsai_open(f->path, &o, &db);
        if (rc == 0) {
            TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &n));
            TU_OK(bonsai_close(db));
        }
    }
    put_bytes(f->path, off, &f->file[off], 1);
    return rc != 0 || n > 0;
}

static void judge(flips *f, uint64_t bit, int reported)
{
    uint8_t c = f->cls[bit / 8];
    f->tried++;
    f->reported += (uint64_t)reported;
    if (c == MUST && !reported && f->missed++ == 0)
        snprintf(f->first_miss, sizeof f->first_miss, "byte %" PRIu64
                 " bit %" PRIu64, bit / 8, bit % 8);
    if (c == MUST_NOT && reported && f->false_alarms++ == 0)
        snprintf(f->first_false, sizeof f->first_false, "byte %" PRIu64
                 " bit %" PRIu64, bit / 8, bit % 8);
}

/* The header and the meta slots. */
static int read_at_open(uint64_t off)
{
    return off < 32 || (off >= 512 && off < 512 + 52) ||
           (off >= 1024 && off < 1024 + 52);
}

static void flip_all(const char *path, unsigned stride)
{
    bonsai_db *db = tu_open_ro(path);
    places *pl = find_places(db);
    size_t end = (size_t)(db->meta.end * db->page_size);
    uint32_t ps = db->page_size;
    TU_OK(bonsai_close(db));
    size_t len;
    flips f = {.path = path, .file = slurp(path, &len), .end = end};
    cr_assert(len >= end);
    f.cls = classify(pl, f.file, end, ps);
    /* the header and meta slots, which open reads, through a fresh open
     * each time; everything else through one read-only handle (the file
     * is mapped shared, so it sees pwrite; verify reads the head anew) */
    for (uint64_t bit = 0; bit < 4096 * 8; bit += stride)
        if (read_at_open(bit / 8))
            judge(&f, bit, flip_reported(&f, NULL, bit));
    db = tu_open_ro(path);
    for (uint64_t bit = 0; bit < end * 8; bit += stride)
        if (!read_at_open(bit / 8))
            judge(&f, bit, flip_reported(&f, db, bit));
    TU_OK(bonsai_close(db));
    cr_log_info("%s: %" PRIu64 " flips, %" PRIu64 " reported, %zu bytes, %zu "
                "extents", path, f.tried, f.reported, end, pl->n);
    cr_assert(f.missed == 0, "%" PRIu64 " flips in checked bytes not "
              "reported, the first at %s", f.missed, f.first_miss);
    cr_assert(f.false_alarms == 0, "%" PRIu64 " flips in free or unchecked "
              "bytes reported, the first at %s", f.false_alarms,
              f.first_false);
    free(f.file);
    free(f.cls);
    free(pl);
}

Test(verify, every_bit_flip)
{
    const char *path = tp("flip.bonsai");
    content c;
    content_init(&c, tu_seed("every_bit_flip", 21));
    make_store(path, 300, BONSAI_COMPRESS_NONE, &c);
    flip_all(path, tu_scale() < 1 ? 3 : 1);
    content_free(&c);
}

Test(verify, every_third_bit_flip_lz4)
{
    const char *path = tp("flip4.bonsai");
    content c;
    content_init(&c, tu_seed("every_third_bit_flip_lz4", 22));
    make_store(path, 300, BONSAI_COMPRESS_LZ4, &c);
    flip_all(path, tu_scale() < 1 ? 7 : 3);
    content_free(&c);
}

/* ---- compact ------------------------------------------------------------ */

static uint64_t file_size(const char *path)
{
    struct stat st;
    cr_assert(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
    return (uint64_t)st.st_size;
}

static void no_temp_left(void)
{
    DIR *d = opendir(tu_tmpdir());
    cr_assert(d);
    struct dirent *e;
    while ((e = readdir(d)))
        cr_assert(!strstr(e->d_name, ".compact-"), "left behind: %s",
                  e->d_name);
    closedir(d);
}

static void assert_copy(const char *dst, content *c, const char *ctx)
{
    bonsai_db *db = tu_open_ro(dst);
    assert_clean(db, ctx);
    assert_content(db, c, ctx);
    TU_OK(bonsai_close(db));
}

/* A store filled with random u64 keys in many commits. */
static bonsai_db *random_store(const char *path, content *c)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = UINT64_C(256) << 20;
    o.sync = 0;
    bonsai_db *db = tu_open(path, &o);
    fill(db, 1, c, tu_scaled(80000, 20000));
    drop_gone(db);
    return db;
}

Test(verify, compact_round_trip)
{
    const char *src = tp("src.bonsai"), *dst = tp("dst.bonsai");
    content c;
    content_init(&c, tu_seed("compact_round_trip", 31));
    bonsai_db *db = random_store(src, &c);
    size_t n0;
    uint8_t *before = slurp(src, &n0);
    FILE *f = fopen(dst, "w"); /* an old DST is replaced */
    cr_assert(f && fputs("old", f) >= 0 && fclose(f) == 0);
    TU_OK(bonsai_compact(db, dst, NULL));
    size_t n1;
    uint8_t *after = slurp(src, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "the source changed");
    cr_assert(file_size(dst) < file_size(src), "copy %" PRIu64 " bytes, "
              "source %" PRIu64, file_size(dst), file_size(src));
    cr_log_info("compact: %" PRIu64 " -> %" PRIu64 " bytes", file_size(src),
                file_size(dst));
    assert_copy(dst, &c, "copy");

    /* compacting the copy again: no larger */
    bonsai_db *cdb = tu_open_ro(dst);
    const char *again = tp("again.bonsai");
    TU_OK(bonsai_compact(cdb, again, NULL));
    TU_OK(bonsai_close(cdb));
    cr_assert(file_size(again) <= file_size(dst));

    /* other settings */
    bonsai_options o;
    bonsai_options_init(&o);
    o.compression = BONSAI_COMPRESS_LZ4;
    o.node_bytes = 8192;
    o.node_entries = 120;
    o.page_size = 1024;
    const char *other = tp("other.bonsai");
    TU_OK(bonsai_compact(db, other, &o));
    assert_copy(other, &c, "other settings");
    cdb = tu_open_ro(other);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(cdb, &st));
    cr_assert(st.page_size == 1024 && st.node_bytes == 8192 &&
              st.node_entries == 120);
    bonsai_space sp;
    TU_OK(bonsai_space_stat(cdb, &sp));
    cr_assert(sp.compression == BONSAI_COMPRESS_LZ4 && sp.free_bytes == 0);
    TU_OK(bonsai_close(cdb));

    /* into the smallest page: compressed images round up to 64 bytes,
     * not 1024, so the copy is smaller */
    o.page_size = 64;
    const char *small = tp("small-pages.bonsai");
    TU_OK(bonsai_compact(db, small, &o));
    assert_copy(small, &c, "64-byte pages");
    cdb = tu_open_ro(small);
    TU_OK(bonsai_db_stat(cdb, &st));
    cr_assert_eq(st.page_size, 64u);
    TU_OK(bonsai_close(cdb));
    cr_assert(file_size(small) < file_size(other),
              "64-byte pages: %" PRIu64 " bytes, 1024-byte pages: %" PRIu64,
              (uint64_t)file_size(small), (uint64_t)file_size(other));

    /* refusals */
    TU_RC(bonsai_compact(db, src, NULL), BONSAI_INVALID);
    TU_RC(bonsai_compact(db, tu_tmpdir(), NULL), BONSAI_IO);
    o.node_bytes = 7;
    TU_RC(bonsai_compact(db, tp("bad.bonsai"), &o), BONSAI_INVALID);
    no_temp_left();
    TU_OK(bonsai_close(db));
    free(before);
    free(after);
    content_free(&c);
}

Test(verify, compact_anonymous)
{
    bonsai_options o = small_opts();
    bonsai_db *db = tu_open(NULL, &o);
    content c;
    content_init(&c, 41);
    fill(db, 0, &c, 5000);
    drop_gone(db);
    const char *dst = tp("anon.bonsai");
    TU_OK(bonsai_compact(db, dst, NULL));
    assert_copy(dst, &c, "anonymous source");
    assert_clean(db, "anonymous source after");
    TU_OK(bonsai_close(db));
    content_free(&c);
}

/* ---- the tools ---------------------------------------------------------- */


/* Runs cmd through sh with stdout and stderr to files of the temporary
 * directory; returns the exit status.  A signal fails the test. */
static int run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return tu_sh("%s >'%s' 2>'%s'", cmd, tu_path("out"), tu_path("err"));
}

static char *out_text(const char *which)
{
    return (char *)slurp(tu_path(which), NULL);
}

#define RUN_EXPECT(want, ...)                                                \
    do {                                                                     \
        int st_ = run(__VA_ARGS__);                                          \
        if (st_ != (want)) {                                                 \
            char *o_ = out_text("out"), *e_ = out_text("err");               \
            cr_assert_fail("exit %d, expected %d\nstdout: %s\nstderr: %s",   \
                           st_, (want), o_, e_);                             \
        }                                                                    \
    } while (0)

static void assert_out(const char *which, const char *needle)
{
    char *t = out_text(which);
    cr_assert(strstr(t, needle), "%s lacks '%s': %s", which, needle, t);
    free(t);
}

Test(verify, tools_success_and_usage)
{
    const char *src = tp("t.bonsai"), *dst = tp("tc.bonsai");
    content c;
    content_init(&c, 51);
    make_store(src, 3000, BONSAI_COMPRESS_NONE, &c);
    const char *v = tu_program("bonsai-verify");
    const char *s = tu_program("bonsai-stat");
    const char *k = tu_program("bonsai-compact");
    RUN_EXPECT(0, "'%s' '%s'", v, src);
    assert_out("out", "no problems");
    RUN_EXPECT(0, "'%s' --quick --quiet --no-progress '%s'", v, src);
    RUN_EXPECT(0, "'%s' '%s'", s, src);
    assert_out("out", "bytes per entry");
    RUN_EXPECT(0, "'%s' --json -s u '%s'", s, src);
    assert_out("out", "\"maps\":[{\"name\":\"u\"");
    RUN_EXPECT(0, "'%s' '%s' '%s'", k, src, dst);
    assert_out("out", "% of the source");
    RUN_EXPECT(0, "'%s' --compress zlib:9 --node-bytes 2048 --page-size 1024 "
                  "'%s' '%s'", k, src, tp("tz.bonsai"));
    RUN_EXPECT(0, "'%s' '%s'", v, tp("tz.bonsai"));
    assert_copy(dst, &c, "tool copy");

    const char *all[] = {v, s, k};
    for (int i = 0; i < 3; i++) {
        RUN_EXPECT(0, "'%s' --help", all[i]);
        assert_out("out", "EXIT STATUS");
        RUN_EXPECT(2, "'%s' --bogus '%s'", all[i], src);
        RUN_EXPECT(2, "'%s'", all[i]);
        RUN_EXPECT(2, "'%s' '%s' '%s' '%s'", all[i], src, src, src);
    }
    RUN_EXPECT(2, "'%s' --node-bytes 7 '%s' '%s'", k, src, dst);
    RUN_EXPECT(2, "'%s' --compress brotli '%s' '%s'", k, src, dst);
    RUN_EXPECT(2, "'%s' --page-size 1000 '%s' '%s'", k, src, dst);
    RUN_EXPECT(2, "'%s' '%s' '%s'", k, src, src);
    RUN_EXPECT(2, "'%s' -s '' '%s'", s, src);
    content_free(&c);
}

Test(verify, tools_bad_files)
{
    const char *src = tp("t.bonsai"), *bad = tp("bad.bonsai");
    content c;
    content_init(&c, 52);
    make_store(src, 3000, BONSAI_COMPRESS_NONE, &c);
    const char *v = tu_program("bonsai-verify");
    const char *s = tu_program("bonsai-stat");
    const char *k = tu_program("bonsai-compact");
    const char *d = tu_program("bonsai-dump");
    const char *missing = tp("missing.bonsai"), *dir = tu_tmpdir();
    const char *ro[] = {v, s, d};
    for (int i = 0; i < 3; i++) {
        RUN_EXPECT(1, "'%s' '%s'", ro[i], missing);
        RUN_EXPECT(1, "'%s' '%s'", ro[i], dir);
    }
    RUN_EXPECT(1, "'%s' '%s' '%s'", k, missing, bad);
    RUN_EXPECT(1, "'%s' '%s' '%s'", k, src, dir);
    cr_assert(access(missing, F_OK) != 0, "a tool created %s", missing);

    /* a read-only file: everything that only reads it works */
    copy_file(src, bad);
    cr_assert(chmod(bad, 0444) == 0);
    RUN_EXPECT(0, "'%s' '%s'", v, bad);
    RUN_EXPECT(0, "'%s' '%s'", s, bad);
    RUN_EXPECT(0, "'%s' '%s' '%s'", k, bad, tp("fromro.bonsai"));
    cr_assert(chmod(bad, 0644) == 0);

    /* a corrupt leaf body: verify names it, dump fails, stat survives */
    bonsai_db *db = tu_open_ro(src);
    places *pl = find_places(db);
    TU_OK(bonsai_close(db));
    uint8_t *file = slurp(src, NULL);
    uint64_t pgno, off = find_leaf(pl, "u", 512, file, &pgno);
    copy_file(src, bad);
    poke(bad, off + 40, 0x10);
    RUN_EXPECT(1, "'%s' '%s'", v, bad);
    char where[64];
    snprintf(where, sizeof where, "map u, page %" PRIu64 " (byte %" PRIu64
             ")", pgno, pgno * 512);
    assert_out("out", where);
    RUN_EXPECT(1, "'%s' '%s'", d, bad);
    run("'%s' '%s'", s, bad); /* reads headers only: any status, no crash */
    RUN_EXPECT(1, "'%s' '%s' '%s'", k, bad, tp("fromcorrupt.bonsai"));
    cr_assert(access(tp("fromcorrupt.bonsai"), F_OK) != 0);

    /* a smashed leaf header: everyone notices */
    copy_file(src, bad);
    poke(bad, off, 0x06); /* type 1 -> 7 */
    RUN_EXPECT(1, "'%s' '%s'", v, bad);
    RUN_EXPECT(1, "'%s' '%s'", d, bad);
    RUN_EXPECT(1, "'%s' '%s'", s, bad);
    RUN_EXPECT(1, "'%s' --json '%s'", s, bad);
    assert_out("out", "\"error\":\"");

    /* a bad header: no tool opens it */
    copy_file(src, bad);
    poke(bad, 0, 0x01);
    for (int i = 0; i < 3; i++)
        RUN_EXPECT(1, "'%s' '%s'", ro[i], bad);
    no_temp_left();
    free(file);
    free(pl);
    content_free(&c);
}

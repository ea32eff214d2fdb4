/* SPDX-License-Identifier: MIT */
/*
 * test_forged.c - stores with valid checksums and hostile structure,
 * built byte by byte from format.md (forge.h):
 *
 *  - branches that share a child, many times over: every walk (map stat,
 *    space figures, verify, compact, free space at open, bonsai-stat)
 *    ends in BONSAI_CORRUPT or a problem, never a walk per path;
 *  - separators out of order, a child shared by two parents: cursors
 *    answer BONSAI_CORRUPT, in both directions, rather than end early;
 *  - a packed image that inflates beyond what the store's node size
 *    allows: readers and verify refuse it;
 *  - map records that lie about what free space at open depends on (the
 *    depth, the overflow flag): a read-write open refuses the store and
 *    verify names the map;
 *  - packed images of another codec than the store's: refused, verify
 *    says which.
 *
 * Each test's store is written in its temporary directory.  The suite's
 * timeout is a hang guard, not a timing assertion.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "forge.h"
#include "internal.h"
#include "meta.h"
#include "util.h"

TestSuite(forged, .init = tu_setup, .fini = tu_teardown, .timeout = 120);

/* ---- opening and checking ----------------------------------------------- */

static const char *tp(const char *name)
{
    static char pool[32][PATH_MAX];
    static unsigned used;
    cr_assert(used < 32, "tp: out of path buffers");
    snprintf(pool[used], PATH_MAX, "%s", tu_path(name));
    return pool[used++];
}

static int open_store(const char *path, int read_only, bonsai_db **db)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = read_only;
    o.create = 0;
    o.sync = 0;
    o.max_size = UINT64_C(64) << 20;
    *db = NULL;
    return bonsai_open(path, &o, db);
}

static bonsai_db *open_ro(const char *path)
{
    bonsai_db *db;
    TU_OK(open_store(path, 1, &db));
    return db;
}

/* The problems verify reports, and the first message holding needle. */
typedef struct found {
    uint64_t n;
    const char *needle;
    char hit[512];
    char first[512];
} found;

static void on_problem(void *ctx, const char *map, uint64_t pgno,
                       const char *what)
{
    (void)map;
    (void)pgno;
    found *f = ctx;
    if (f->n++ == 0)
        snprintf(f->first, sizeof f->first, "%s", what);
    if (!f->hit[0] && f->needle && strstr(what, f->needle))
        snprintf(f->hit, sizeof f->hit, "%s", what);
}

/* Asserts that verify (full and quick) reports a problem holding needle
 * (NULL: any problem). */
static void assert_verify_reports(bonsai_db *db, const char *needle)
{
    for (unsigned quick = 0; quick < 2; quick++) {
        found f = {.needle = needle};
        uint64_t n = 0;
        TU_OK(bonsai_verify(db, quick ? BONSAI_VERIFY_QUICK : 0, on_problem,
                            NULL, &f, &n));
        cr_assert(n > 0, "verify (%s) found nothing", quick ? "quick" :
                  "full");
        cr_assert(!needle || f.hit[0], "verify (%s): no problem mentions "
                  "\"%s\"; the first: %s", quick ? "quick" : "full", needle,
                  f.first);
    }
}

static void assert_clean(bonsai_db *db, const char *ctx)
{
    found f = {0};
    uint64_t n = 1;
    TU_OK(bonsai_verify(db, 0, on_problem, NULL, &f, &n));
    cr_assert(n == 0, "%s: %" PRIu64 " problems, the first: %s", ctx, n,
              f.first);
}

static bonsai_map map_of(bonsai_db *db, const char *name)
{
    bonsai_map m;
    unsigned kind;
    TU_OK(bonsai_map_open(db, NULL, name, &m, &kind));
    return m;
}

/* ---- branches sharing a child ------------------------------------------- */

/* A u64 map "m" of one leaf (keys 0..9) under `levels` levels of
 * branches, each of fan children that are all the one node below: fan to
 * the power levels paths lead to that leaf. */
static void shared_child_store(const char *path, uint32_t fan,
                               unsigned levels)
{
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    bn_ext below = tf_place(&s, tf_leaf_run(10, 0, 1));
    uint64_t *keys = malloc(fan * sizeof *keys);
    bn_ext *kids = malloc(fan * sizeof *kids);
    cr_assert(keys && kids);
    for (unsigned l = 0; l < levels; l++) {
        for (uint32_t i = 0; i < fan; i++) {
            keys[i] = i * 1000;
            kids[i] = below;
        }
        below = tf_place(&s, tf_branch_u64(fan, keys, kids));
    }
    tf_map m = {"m", BONSAI_KEY_U64, 0, levels + 1, below, 10};
    tf_finish(&s, &m, 1);
    tf_write(&s, path);
    tf_free(&s);
    free(keys);
    free(kids);
}

/* A file of a few dozen KiB whose branches name one child 300 times, 8
 * levels deep: a walk per path would visit the leaf 300^7 times. */
Test(forged, shared_child_walks_end_in_corrupt)
{
    const char *path = tp("shared.bonsai");
    shared_child_store(path, 300, 7);
    bonsai_db *db = open_ro(path);
    bonsai_map m = map_of(db, "m");
    bonsai_map_info info;
    TU_RC(bonsai_map_stat(NULL, m, &info), BONSAI_CORRUPT);
    bonsai_space sp;
    TU_OK(bonsai_space_stat(db, &sp));
    cr_assert(sp.problems > 0, "the space walk saw no problem");
    assert_verify_reports(db, "already referenced");
    TU_RC(bonsai_compact(db, tp("copy.bonsai"), NULL), BONSAI_CORRUPT);
    TU_OK(bonsai_close(db));

    bonsai_db *rw;
    TU_RC(open_store(path, 0, &rw), BONSAI_CORRUPT); /* free space */
    cr_assert(rw == NULL);

    /* the tool: reports the map and fails, promptly */
    int st = tu_sh("%s %s >/dev/null 2>&1", tu_program("bonsai-stat"),
                   tu_quote(path));
    cr_assert(st == 1, "bonsai-stat exited %d, expected 1", st);
}

/* A map whose two levels of branches share their children: the stat
 * walk must not count the leaf once per path (it did: 16 leaves). */
Test(forged, shared_child_stat_counts_no_node_twice)
{
    const char *path = tp("shared4.bonsai");
    shared_child_store(path, 4, 2);
    bonsai_db *db = open_ro(path);
    bonsai_map_info info;
    TU_RC(bonsai_map_stat(NULL, map_of(db, "m"), &info), BONSAI_CORRUPT);
    TU_OK(bonsai_close(db));
}

/* ---- cursors in a corrupt tree ------------------------------------------ */

/* Walks map "m" with a cursor until it stops: the keys it gave (up to
 * cap) and how it stopped. */
static int scan(bonsai_db *db, int forward, uint64_t *keys, unsigned cap,
                unsigned *n)
{
    bonsai_cursor *c;
    TU_OK(bonsai_cursor_open(NULL, map_of(db, "m"), &c));
    *n = 0;
    int rc = forward ? bonsai_cursor_first(c) : bonsai_cursor_last(c);
    while (rc == 0 && *n < cap) {
        uint64_t k = 0;
        TU_OK(bonsai_cursor_get_u64(c, &k, NULL));
        keys[(*n)++] = k;
        rc = forward ? bonsai_cursor_next(c) : bonsai_cursor_prev(c);
    }
    bonsai_cursor_close(c);
    return rc;
}

/* Both directions end in BONSAI_CORRUPT, having given keys in order. */
static void assert_scans_corrupt(const char *path, const char *ctx)
{
    bonsai_db *db = open_ro(path);
    uint64_t keys[4096];
    for (int fwd = 1; fwd >= 0; fwd--) {
        unsigned n;
        int rc = scan(db, fwd, keys, 4096, &n);
        cr_assert(rc == BONSAI_CORRUPT, "%s: %s scan ended in %s after %u "
                  "keys, expected BONSAI_CORRUPT", ctx, fwd ? "forward" :
                  "backward", tu_err(rc), n);
        for (unsigned i = 1; i < n; i++)
            cr_assert(fwd ? keys[i - 1] < keys[i] : keys[i - 1] > keys[i],
                      "%s: key %u out of order", ctx, i);
    }
    TU_OK(bonsai_close(db));
}

static void one_map_store(tf_store *s, const char *path, unsigned depth,
                          bn_ext root, uint64_t count)
{
    tf_map m = {"m", BONSAI_KEY_U64, 0, depth, root, count};
    tf_finish(s, &m, 1);
    tf_write(s, path);
    tf_free(s);
}

/* A root whose separators 0, 50, 30 are out of order, over leaves
 * {10, 20}, {60, 70}, {80}: a backward scan used to give 80, 20, 10 and
 * end as if the map had (the seek below 30 lands left of 50). */
Test(forged, cursor_corrupt_on_separators_out_of_order)
{
    const char *path = tp("order.bonsai");
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    uint64_t a[] = {10, 20}, b[] = {60, 70}, c[] = {80};
    bn_ext kids[3] = {tf_place(&s, tf_leaf_u64(2, a, NULL)),
                      tf_place(&s, tf_leaf_u64(2, b, NULL)),
                      tf_place(&s, tf_leaf_u64(1, c, NULL))};
    uint64_t seps[] = {0, 50, 30};
    one_map_store(&s, path, 2, tf_place(&s, tf_branch_u64(3, seps, kids)),
                  5);
    assert_scans_corrupt(path, "separators 0, 50, 30");
}

/* Two branches share the leaf {50..59}: under the second it lies below
 * its separator 100. */
static void two_parents_store(const char *path)
{
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    bn_ext l1 = tf_place(&s, tf_leaf_run(10, 0, 1));
    bn_ext l2 = tf_place(&s, tf_leaf_run(10, 50, 1));
    bn_ext l3 = tf_place(&s, tf_leaf_run(10, 150, 1));
    uint64_t k1[] = {0, 50}, k2[] = {100, 150}, kr[] = {0, 100};
    bn_ext c1[] = {l1, l2}, c2[] = {l2, l3};
    bn_ext kids[] = {tf_place(&s, tf_branch_u64(2, k1, c1)),
                     tf_place(&s, tf_branch_u64(2, k2, c2))};
    one_map_store(&s, path, 3, tf_place(&s, tf_branch_u64(2, kr, kids)),
                  40);
}

/* A forward scan of the tree above used to give 0..9, 50..59, 150..159
 * and end as if the map had. */
Test(forged, cursor_corrupt_on_leaf_shared_by_two_parents)
{
    const char *path = tp("twice.bonsai");
    two_parents_store(path);
    assert_scans_corrupt(path, "a leaf under two parents");
}

/* The shared-child file of the walks above, scanned: its one leaf is met
 * again past the separator 1000. */
Test(forged, cursor_corrupt_on_child_shared_by_many)
{
    const char *path = tp("shared.bonsai");
    shared_child_store(path, 300, 7);
    assert_scans_corrupt(path, "one child 300 times");
    int st = tu_sh("%s %s >/dev/null 2>&1", tu_program("bonsai-dump"),
                   tu_quote(path));
    cr_assert(st == 1, "bonsai-dump exited %d, expected 1", st);
}

/* ---- gets through a snapshot's table of leaves --------------------------- */

/* Gets of keys 0..n-1 in one read snapshot, enough of them that the
 * snapshot builds its table of leaves (view.c), answer each as a get
 * alone does (a snapshot of its own, too short-lived for a table): the
 * same result and value size, on a tree however forged. */
static void assert_table_gets_agree(const char *path, uint64_t n,
                                    uint64_t step, int built, const char *ctx)
{
    bonsai_db *db = open_ro(path);
    bonsai_map m = map_of(db, "m");
    bonsai_txn *snap;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &snap));
    for (int round = 0; round < 2; round++) {
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = i * step;
            bonsai_val a = {0}, b = {0};
            int alone = bonsai_get_u64(NULL, m, k, &a);
            int in_snap = bonsai_get_u64(snap, m, k, &b);
            cr_assert(alone == in_snap && a.size == b.size,
                      "%s: key %" PRIu64 ": %s alone, %s in a snapshot", ctx,
                      k, tu_err(alone), tu_err(in_snap));
        }
    }
    cr_assert(ld_built(&snap->ld) == built, "%s: a table %s", ctx,
              built ? "was not built" : "over separators out of order");
    bonsai_txn_abort(snap);
    TU_OK(bonsai_close(db));
}

Test(forged, table_gets_agree_on_forged_trees)
{
    const char *path = tp("shared-t.bonsai");
    shared_child_store(path, 300, 7); /* its walk must end, too */
    assert_table_gets_agree(path, 1200, 250, 1, "one child 300 times");

    const char *twice = tp("twice-t.bonsai");
    two_parents_store(twice);
    assert_table_gets_agree(twice, 400, 1, 1, "a leaf under two parents");

    const char *order = tp("order-t.bonsai");
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    uint64_t a[] = {10, 20}, b[] = {60, 70}, c[] = {80};
    bn_ext leaves[3] = {tf_place(&s, tf_leaf_u64(2, a, NULL)),
                        tf_place(&s, tf_leaf_u64(2, b, NULL)),
                        tf_place(&s, tf_leaf_u64(1, c, NULL))};
    uint64_t seps[] = {0, 50, 30}, top[] = {0};
    bn_ext mid = tf_place(&s, tf_branch_u64(3, seps, leaves));
    one_map_store(&s, order, 3, tf_place(&s, tf_branch_u64(1, top, &mid)),
                  5);
    assert_table_gets_agree(order, 400, 1, 0, "separators 0, 50, 30");
}

/* ---- a file of an older version ----------------------------------------- */

static uint32_t header_version(const char *path)
{
    uint8_t head[BX_HEADER_SIZE];
    FILE *f = fopen(path, "rb");
    cr_assert(f && fread(head, 1, sizeof head, f) == sizeof head);
    fclose(f);
    bx_header h;
    TU_OK(bx_header_decode(head, &h));
    return h.version;
}

/* A version 1 file of walked u64 images (forge writes format 1): it reads
 * as it is, keeps its version while only read, and its first write-back
 * raises the header to the current version; old and new nodes then read
 * side by side and verify. */
Test(forged, older_version_is_read_then_raised_by_a_write)
{
    const char *path = tp("v1.bonsai");
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    bn_ext kids[3] = {tf_place(&s, tf_leaf_run(200, 0, 3)),
                      tf_place(&s, tf_leaf_run(200, 1000, 7)),
                      tf_place(&s, tf_leaf_run(200, 5000, 1))};
    uint64_t seps[] = {0, 1000, 5000};
    one_map_store(&s, path, 2, tf_place(&s, tf_branch_u64(3, seps, kids)),
                  600);

    bonsai_db *db = open_ro(path);
    bonsai_map m = map_of(db, "m");
    bonsai_val v;
    TU_OK(bonsai_get_u64(NULL, m, 1000 + 7 * 150, &v));
    TU_RC(bonsai_get_u64(NULL, m, 1000 + 7 * 150 + 1, &v), BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
    cr_assert_eq(header_version(path), 1);

    TU_OK(open_store(path, 0, &db));
    m = map_of(db, "m");
    TU_OK(bonsai_put_u64(NULL, m, 5000 + 1000, &(bonsai_val){0}, 0));
    TU_OK(bonsai_close(db));
    cr_assert_eq(header_version(path), BX_FORMAT_VERSION);

    db = open_ro(path);
    m = map_of(db, "m");
    for (uint64_t k = 0; k < 600; k += 3)
        TU_OK(bonsai_get_u64(NULL, m, k, &v));
    TU_OK(bonsai_get_u64(NULL, m, 1000 + 7 * 199, &v));
    TU_OK(bonsai_get_u64(NULL, m, 6000, &v));
    TU_RC(bonsai_get_u64(NULL, m, 5999, &v), BONSAI_NOTFOUND);
    bonsai_map_info info;
    TU_OK(bonsai_map_stat(NULL, m, &info));
    cr_assert_eq(info.entries, 601);
    uint64_t problems = 1;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    cr_assert_eq(problems, 0);
    TU_OK(bonsai_close(db));
}

/* ---- packed images that inflate too far --------------------------------- */

/* A zlib store of 4 KiB nodes whose map "m" is one packed leaf of
 * 65535 keys and 16-byte values: a megabyte raw, a few KiB stored. */
Test(forged, packed_image_beyond_node_size_is_corrupt)
{
    const char *path = tp("inflate.bonsai");
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_ZLIB);
    uint32_t n = 65535;
    uint64_t *keys = malloc(n * sizeof *keys);
    tf_val *vals = malloc(n * sizeof *vals);
    static const uint8_t zero[16];
    cr_assert(keys && vals);
    for (uint32_t i = 0; i < n; i++) {
        keys[i] = i;
        vals[i] = (tf_val){zero, sizeof zero, 0};
    }
    tf_img raw = tf_leaf_u64(n, keys, vals);
    cr_assert(raw.n > 1000000);
    bn_ext leaf = tf_place(&s, tf_pack(BONSAI_COMPRESS_ZLIB, raw));
    cr_assert(leaf.npages < 32, "the packed leaf takes %u pages",
              leaf.npages);
    free(keys);
    free(vals);
    one_map_store(&s, path, 1, leaf, n);

    bonsai_db *db = open_ro(path);
    bonsai_map m = map_of(db, "m");
    bonsai_val v;
    TU_RC(bonsai_get_u64(NULL, m, 7, &v), BONSAI_CORRUPT);
    bonsai_map_info info;
    TU_RC(bonsai_map_stat(NULL, m, &info), BONSAI_CORRUPT);
    bonsai_cursor *c;
    TU_OK(bonsai_cursor_open(NULL, m, &c));
    TU_RC(bonsai_cursor_first(c), BONSAI_CORRUPT);
    bonsai_cursor_close(c);
    assert_verify_reports(db, "raw length 1");
    TU_OK(bonsai_close(db));

    /* the writer's path decodes it for a change */
    bonsai_db *rw;
    TU_OK(open_store(path, 0, &rw));
    TU_RC(bonsai_put_u64(NULL, map_of(rw, "m"), 70000, NULL, 0),
          BONSAI_CORRUPT);
    TU_OK(bonsai_close(rw));
}

/* What the writer packs stays within what readers accept: nodes that
 * cannot split (one entry of a 1024-byte key, branches of three such
 * separators) in the smallest nodes, compressed. */
Test(forged, writer_packs_only_what_readers_accept)
{
    for (unsigned codec = BONSAI_COMPRESS_LZ4; codec <= BONSAI_COMPRESS_ZLIB;
         codec++) {
        const char *path = tp(codec == BONSAI_COMPRESS_LZ4 ? "big-lz4.bonsai"
                                                         : "big-zlib.bonsai");
        bonsai_options o;
        bonsai_options_init(&o);
        o.node_bytes = 256;
        o.compression = codec;
        o.sync = 0;
        o.max_size = UINT64_C(64) << 20;
        bonsai_db *db = tu_open(path, &o);
        bonsai_map m = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
        uint8_t key[BONSAI_MAX_KEY], val[64];
        memset(val, 'v', sizeof val);
        for (unsigned i = 0; i < 60; i++) {
            memset(key, 'a', sizeof key);
            key[sizeof key - 1] = (uint8_t)i; /* 1024-byte separators */
            bonsai_val k = {sizeof key, key}, v = {sizeof val, val};
            TU_OK(bonsai_put(NULL, m, &k, &v, 0));
        }
        TU_OK(bonsai_close(db));
        db = open_ro(path);
        assert_clean(db, codec == BONSAI_COMPRESS_LZ4 ? "lz4" : "zlib");
        bonsai_map_info info;
        TU_OK(bonsai_map_stat(NULL, map_of(db, "b"), &info));
        cr_assert(info.entries == 60 && info.depth >= 3 &&
                  info.stored_bytes < info.raw_bytes / 2, "codec %u: %"
                  PRIu64 " entries, depth %u, %" PRIu64 " bytes stored of %"
                  PRIu64, codec, info.entries, info.depth, info.stored_bytes,
                  info.raw_bytes);
        TU_OK(bonsai_close(db));
    }
}

/* ---- codecs the header does not name ------------------------------------ */

/* A store of header codec `store` whose map "m" is one leaf packed with
 * `codec`. */
static void other_codec_store(const char *path, unsigned store,
                              unsigned codec)
{
    static const char val[] = "a value that packs";
    uint64_t keys[200];
    tf_val vals[200];
    for (unsigned i = 0; i < 200; i++) {
        keys[i] = 1000 + 3 * i;
        vals[i] = (tf_val){val, sizeof val, 0};
    }
    tf_store s;
    tf_init(&s, 512, 4096, store);
    bn_ext leaf = tf_place(&s, tf_pack(codec, tf_leaf_u64(200, keys, vals)));
    one_map_store(&s, path, 1, leaf, 200);
}

Test(forged, packed_image_of_another_codec_is_corrupt)
{
    static const struct {
        unsigned store, codec;
        const char *says;
    } cases[] = {
        {BONSAI_COMPRESS_NONE, BONSAI_COMPRESS_LZ4,
         "found codec lz4 (expected no compression, as the store's header "
         "says)"},
        {BONSAI_COMPRESS_NONE, BONSAI_COMPRESS_ZLIB,
         "found codec zlib (expected no compression, as the store's header "
         "says)"},
        {BONSAI_COMPRESS_ZLIB, BONSAI_COMPRESS_LZ4,
         "found codec lz4 (expected zlib, as the store's header says)"},
        {BONSAI_COMPRESS_LZ4, BONSAI_COMPRESS_ZLIB,
         "found codec zlib (expected lz4, as the store's header says)"},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "codec%u.bonsai", i);
        const char *path = tp(name);
        other_codec_store(path, cases[i].store, cases[i].codec);
        bonsai_db *db = open_ro(path);
        bonsai_map m = map_of(db, "m");
        bonsai_val v;
        TU_RC(bonsai_get_u64(NULL, m, 1003, &v), BONSAI_CORRUPT);
        bonsai_cursor *c;
        TU_OK(bonsai_cursor_open(NULL, m, &c));
        TU_RC(bonsai_cursor_first(c), BONSAI_CORRUPT);
        bonsai_cursor_close(c);
        assert_verify_reports(db, cases[i].says);
        TU_OK(bonsai_close(db));
    }
    /* the same leaf in a store of its own codec reads */
    const char *path = tp("same.bonsai");
    other_codec_store(path, BONSAI_COMPRESS_LZ4, BONSAI_COMPRESS_LZ4);
    bonsai_db *db = open_ro(path);
    bonsai_val v;
    TU_OK(bonsai_get_u64(NULL, map_of(db, "m"), 1003, &v));
    TU_OK(bonsai_close(db));
}

/* ---- records that lie about what free space depends on ------------------ */

/* Asserts that a read-write open refuses path while a read-only one
 * opens it and verify reports needle. */
static void assert_write_refused(const char *path, const char *needle)
{
    bonsai_db *db;
    TU_RC(open_store(path, 0, &db), BONSAI_CORRUPT);
    cr_assert(db == NULL);
    db = open_ro(path);
    assert_verify_reports(db, needle);
    TU_OK(bonsai_close(db));
}

/* A tree of `levels` levels of two-child branches over leaves of ten
 * keys, under a record that says depth `depth`. */
static void deep_store(const char *path, unsigned levels, unsigned depth)
{
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    unsigned width = 1u << levels;
    bn_ext nodes[64];
    uint64_t first[64];
    for (unsigned i = 0; i < width; i++) {
        first[i] = 100 * i;
        nodes[i] = tf_place(&s, tf_leaf_run(10, first[i], 1));
    }
    for (; width > 1; width /= 2)
        for (unsigned i = 0; i < width / 2; i++) {
            uint64_t keys[2] = {first[2 * i], first[2 * i + 1]};
            bn_ext kids[2] = {nodes[2 * i], nodes[2 * i + 1]};
            first[i] = first[2 * i];
            nodes[i] = tf_place(&s, tf_branch_u64(2, keys, kids));
        }
    one_map_store(&s, path, depth, nodes[0], 10u << levels);
}

/* Free space at open reads branches only, down to the record's depth:
 * under a record too shallow, the tree's lower nodes were taken for free
 * pages, and a read-write open let later writes overwrite them. */
Test(forged, open_refuses_record_depth_below_tree)
{
    const char *path = tp("depth.bonsai");
    deep_store(path, 2, 3); /* the truth: opens for writing, verifies */
    bonsai_db *db;
    TU_OK(open_store(path, 0, &db));
    assert_clean(db, "a record of the tree's depth");
    TU_OK(bonsai_close(db));
    deep_store(path, 1, 1);
    assert_write_refused(path, "level 1: found a branch");
    deep_store(path, 2, 2);
    assert_write_refused(path, "level 1: found a branch");
}

/* A map "m" of one leaf whose entry 1 is an overflow value, under a
 * record with flags rflags. */
static void overflow_store(const char *path, unsigned rflags)
{
    tf_store s;
    tf_init(&s, 512, 4096, BONSAI_COMPRESS_NONE);
    static uint8_t big[3000];
    memset(big, 'o', sizeof big);
    uint8_t ref[20];
    tf_overflow(&s, big, sizeof big, ref);
    uint64_t keys[3] = {1, 2, 3};
    tf_val vals[3] = {{"a", 1, 0}, {ref, 20, 1}, {"c", 1, 0}};
    bn_ext leaf = tf_place(&s, tf_leaf_u64(3, keys, vals));
    tf_map m = {"m", BONSAI_KEY_U64, rflags, 1, leaf, 3};
    tf_finish(&s, &m, 1);
    tf_write(&s, path);
    tf_free(&s);
}

/* Free space at open reads the leaves of maps flagged as holding
 * overflow values only: without the flag, the value's run was taken for
 * free while bonsai_get still returned its bytes. */
Test(forged, open_refuses_overflow_values_without_record_flag)
{
    const char *path = tp("ovf.bonsai");
    overflow_store(path, 0x01); /* the truth */
    bonsai_db *db;
    TU_OK(open_store(path, 0, &db));
    bonsai_val v;
    TU_OK(bonsai_get_u64(NULL, map_of(db, "m"), 2, &v));
    cr_assert(v.size == 3000 && ((const uint8_t *)v.data)[2999] == 'o');
    assert_clean(db, "overflow value under the flag");
    TU_OK(bonsai_close(db));

    overflow_store(path, 0);
    assert_write_refused(path, "lacks the overflow flag");
}

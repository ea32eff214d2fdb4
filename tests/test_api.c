/* SPDX-License-Identifier: MIT */
/*
 * test_api.c - the public API, call by call: options, open/close, maps,
 * put/get/del, sizes, cursors, transactions, read-only stores, snapshots,
 * batched gets, error strings and bad arguments.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bonsai.h"
#include "util.h"

TestSuite(api, .init = tu_setup, .fini = tu_teardown);

/* ---- small helpers ------------------------------------------------------ */

static bonsai_val sval(const char *s)
{
    return tu_val(s, strlen(s));
}

static bonsai_val u64val(const uint64_t *k)
{
    return tu_val(k, 8);
}

/* Asserts that key k of a byte map holds exactly the string want. */
static void expect_str(bonsai_txn *txn, bonsai_map map, const char *k,
                       const char *want)
{
    bonsai_val key = sval(k), val = {0, NULL};
    int rc = bonsai_get(txn, map, &key, &val);
    cr_assert(rc == 0, "get(%s) -> %s, expected value \"%s\"", k, tu_err(rc),
              want);
    cr_assert(val.size == strlen(want) &&
                  (val.size == 0 || memcmp(val.data, want, val.size) == 0),
              "get(%s) = \"%.*s\", expected \"%s\"", k, (int)val.size,
              val.size ? (const char *)val.data : "", want);
}

static void expect_absent(bonsai_txn *txn, bonsai_map map, const char *k)
{
    bonsai_val key = sval(k), val = {0, NULL};
    TU_RC(bonsai_get(txn, map, &key, &val), BONSAI_NOTFOUND);
}

static void put_str(bonsai_txn *txn, bonsai_map map, const char *k,
                    const char *v)
{
    bonsai_val key = sval(k), val = sval(v);
    TU_OK(bonsai_put(txn, map, &key, &val, 0));
}

static uint64_t count_of(bonsai_txn *txn, bonsai_map map)
{
    uint64_t n = UINT64_MAX;
    TU_OK(bonsai_count(txn, map, &n));
    return n;
}

static bonsai_options file_opts(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.sync = 0; /* durability across crashes is not what these tests check */
    return o;
}

/* ---- options, open, close ----------------------------------------------- */

Test(api, options_defaults)
{
    bonsai_options o;
    memset(&o, 0xA5, sizeof o);
    bonsai_options_init(&o);
    cr_assert_eq(o.max_size, 0); /* the store's own cap, 1 GiB when new */
    cr_assert_eq(o.page_size, 0u); /* the mode's own */
    cr_assert_eq(o.node_bytes, 4096u);
    cr_assert_eq(o.node_entries, 4096u);
    cr_assert_eq(o.transactions, -1);
    cr_assert_eq(o.sync, 1);
    cr_assert_eq(o.read_only, 0);
    cr_assert_eq(o.create, 1);
    cr_assert_eq(o.file_mode, 0644u);
}

Test(api, open_close_anonymous)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_stat st;
    memset(&st, 0xA5, sizeof st);
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert_eq(st.anonymous, 1);
    cr_assert_eq(st.transactions, 0, "anonymous default is no-transaction");
    cr_assert_eq(st.max_size, UINT64_C(1) << 30);
    cr_assert_eq(st.page_size, 128u); /* anonymous memory's */
    cr_assert_eq(st.node_bytes, 4096u);
    cr_assert_eq(st.node_entries, 4096u);

    /* no-transaction mode: transactions are not supported */
    bonsai_txn *txn = NULL;
    TU_RC(bonsai_txn_begin(db, 0, &txn), BONSAI_NOTSUP);
    TU_RC(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn), BONSAI_NOTSUP);

    /* it works without */
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    put_str(NULL, m, "k", "v");
    expect_str(NULL, m, "k", "v");
    TU_OK(bonsai_sync(db));
    TU_OK(bonsai_close(db));
    TU_OK(bonsai_close(NULL));

    /* explicit default options behave the same; a fresh anonymous store is
     * empty (nothing of the previous one survives) */
    bonsai_options o;
    bonsai_options_init(&o);
    db = tu_open(NULL, &o);
    bonsai_map m2;
    TU_RC(bonsai_map_open(db, NULL, "m", &m2, NULL), BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
}

Test(api, open_close_file)
{
    const char *path = tu_path("a.db");
    bonsai_db *db = tu_open(path, NULL);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert_eq(st.anonymous, 0);
    cr_assert_eq(st.transactions, 1, "file default is transaction mode");
    struct stat sb;
    cr_assert(stat(path, &sb) == 0 && S_ISREG(sb.st_mode),
              "the store file was not created");
    TU_OK(bonsai_close(db));

    /* reopen an existing file without create */
    bonsai_options o;
    bonsai_options_init(&o);
    o.create = 0;
    db = tu_open(path, &o);
    TU_OK(bonsai_close(db));

    /* a missing file with create = 0 */
    const char *missing = tu_path("missing.db");
    db = NULL;
    TU_RC(bonsai_open(missing, &o, &db), BONSAI_NOTFOUND);
    cr_assert(stat(missing, &sb) != 0, "open with create=0 created a file");

    /* a directory */
    const char *dir = tu_path("dir");
    cr_assert(mkdir(dir, 0755) == 0);
    TU_RC(bonsai_open(dir, NULL, &db), BONSAI_IO);

    /* file_mode is used for a created file */
    mode_t old = umask(022);
    bonsai_options_init(&o);
    o.file_mode = 0600;
    const char *p2 = tu_path("mode.db");
    db = tu_open(p2, &o);
    TU_OK(bonsai_close(db));
    umask(old);
    cr_assert(stat(p2, &sb) == 0);
    cr_assert_eq(sb.st_mode & 0777, 0600u, "file mode %o, expected 0600",
                 (unsigned)(sb.st_mode & 0777));
}

Test(api, empty_file_store_reopens_empty)
{
    const char *path = tu_path("e.db");
    bonsai_db *db = tu_open(path, NULL);
    TU_OK(bonsai_close(db));
    db = tu_open(path, NULL);
    bonsai_map m;
    TU_RC(bonsai_map_open(db, NULL, "anything", &m, NULL), BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
}

Test(api, bad_options_rejected)
{
    struct {
        const char *what;
        uint32_t page, nbytes, nentries;
    } bad[] = {
        {"page_size 1000 (not a power of two)", 1000, 4096, 4096},
        {"page_size 32", 32, 4096, 4096},
        {"page_size 131072", 131072, 4096, 4096},
        {"node_bytes 255", 512, 255, 4096},
        {"node_bytes 2 MiB", 512, 2u << 20, 4096},
        {"node_entries 1", 512, 4096, 1},
        {"node_entries 65536", 512, 4096, 65536},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bonsai_options o;
        bonsai_options_init(&o);
        o.page_size = bad[i].page;
        o.node_bytes = bad[i].nbytes;
        o.node_entries = bad[i].nentries;
        bonsai_db *db = NULL;
        int rc = bonsai_open(NULL, &o, &db);
        cr_assert(rc == BONSAI_INVALID, "anonymous open with %s -> %s",
                  bad[i].what, tu_err(rc));
        rc = bonsai_open(tu_path("bad.db"), &o, &db);
        cr_assert(rc == BONSAI_INVALID, "file create with %s -> %s",
                  bad[i].what, tu_err(rc));
        /* the check names the option at fault */
        const char *why = bonsai_options_check(&o);
        char field[32];
        snprintf(field, sizeof field, "%.*s", (int)strcspn(bad[i].what, " "),
                 bad[i].what);
        cr_assert(why && strstr(why, field), "%s: check says %s", bad[i].what,
                  why ? why : "nothing");
    }
}

/* bonsai_options_check says why an open would refuse the options, and
 * nothing for options it would take. */
Test(api, options_check_names_the_option)
{
    bonsai_options o;
    bonsai_options_init(&o);
    cr_assert_null(bonsai_options_check(&o));
    cr_assert_null(bonsai_options_check(NULL));
    o.max_size = 1000;
    cr_assert(strstr(bonsai_options_check(&o), "max_size"));
    bonsai_options_init(&o);
    o.compression = 7;
    cr_assert(strstr(bonsai_options_check(&o), "compression"));
    bonsai_options_init(&o);
    o.compression_level = 10;
    cr_assert(strstr(bonsai_options_check(&o), "compression_level"));
    bonsai_options hand;
    memset(&hand, 0, sizeof hand);
    cr_assert(strstr(bonsai_options_check(&hand), "struct_size"));
}

/* bonsai_options can grow: the struct's size travels in it, a program
 * that did not start from bonsai_options_init or was built against a
 * newer header (a larger struct) is refused, and init writes no byte
 * beyond the size it is given. */
Test(api, options_struct_size_checked)
{
    bonsai_options o;
    bonsai_options_init(&o);
    cr_assert_eq(o.struct_size, sizeof o);
    bonsai_db *db = NULL;
    cr_assert_eq(bonsai_open(NULL, &o, &db), 0);
    TU_OK(bonsai_close(db));

    bonsai_options hand;
    memset(&hand, 0, sizeof hand); /* not from bonsai_options_init */
    hand.max_size = 1u << 20;
    hand.page_size = 512;
    hand.node_bytes = 4096;
    hand.node_entries = 4096;
    TU_RC(bonsai_open(NULL, &hand, &db), BONSAI_INVALID);
    cr_assert_null(db);

    /* a struct from a newer header: more bytes than this library knows */
    unsigned char big[sizeof(bonsai_options) + 32];
    memset(big, 0xA5, sizeof big);
    bonsai_options_init_sized((bonsai_options *)big, sizeof big - 8);
    cr_assert_eq(((bonsai_options *)big)->struct_size, sizeof big - 8);
    for (size_t i = sizeof(bonsai_options); i < sizeof big - 8; i++)
        cr_assert_eq(big[i], 0, "unknown field byte %zu not zeroed", i);
    for (size_t i = sizeof big - 8; i < sizeof big; i++)
        cr_assert_eq(big[i], 0xA5, "byte %zu beyond the struct written", i);
    TU_RC(bonsai_open(NULL, (bonsai_options *)big, &db), BONSAI_INVALID);

    /* too small to be any bonsai_options: nothing written */
    memset(big, 0xA5, sizeof big);
    bonsai_options_init_sized((bonsai_options *)big, 8);
    for (size_t i = 0; i < sizeof big; i++)
        cr_assert_eq(big[i], 0xA5);
}

/* The version the library reports is the header's. */
Test(api, version_matches_header)
{
    int major = -1, minor = -1, patch = -1;
    const char *v = bonsai_version(&major, &minor, &patch);
    cr_assert_eq(major, BONSAI_VERSION_MAJOR);
    cr_assert_eq(minor, BONSAI_VERSION_MINOR);
    cr_assert_eq(patch, BONSAI_VERSION_PATCH);
    char want[48];
    snprintf(want, sizeof want, "%d.%d.%d", major, minor, patch);
    cr_assert_str_eq(v, want);
    cr_assert_str_eq(bonsai_version(NULL, NULL, NULL), want);
}

/* A cap whose size rounds up past 2^64 - 1 (or beyond the largest file,
 * BONSAI_MAX_SIZE) is a bad option, not an I/O error: nothing is made. */
Test(api, cap_beyond_the_largest_store_is_invalid)
{
    const uint64_t caps[] = {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 4095,
                             BONSAI_MAX_SIZE + 1};
    const char *path = tu_path("cap.db");
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        bonsai_options o;
        bonsai_options_init(&o);
        o.max_size = caps[i];
        bonsai_db *db = NULL;
        int rc = bonsai_open(NULL, &o, &db);
        cr_assert(rc == BONSAI_INVALID, "anonymous, cap %" PRIu64 " -> %s",
                  caps[i], tu_err(rc));
        rc = bonsai_open(path, &o, &db);
        cr_assert(rc == BONSAI_INVALID, "file, cap %" PRIu64 " -> %s",
                  caps[i], tu_err(rc));
        cr_assert(access(path, F_OK) != 0, "cap %" PRIu64 " made %s",
                  caps[i], path);
    }
    /* the largest cap is an option, reserved if the address space holds
     * it */
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = BONSAI_MAX_SIZE;
    bonsai_db *db = NULL;
    int rc = bonsai_open(NULL, &o, &db);
    cr_assert(rc == 0 || rc == BONSAI_NOMEM, "cap BONSAI_MAX_SIZE -> %s",
              tu_err(rc));
    TU_OK(bonsai_close(db));
}

/* The extreme legal options still give a working store. */
Test(api, extreme_options_work)
{
    struct {
        uint32_t page, nbytes, nentries;
    } cfg[] = {
        {65536, 256, 2},
        {512, 256, 2},
        {64, 256, 2},
        {64, 1u << 20, 65535},
        {512, 1u << 20, 65535},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        bonsai_options o;
        bonsai_options_init(&o);
        o.page_size = cfg[c].page;
        o.node_bytes = cfg[c].nbytes;
        o.node_entries = cfg[c].nentries;
        bonsai_db *db = tu_open(NULL, &o);
        bonsai_stat st;
        TU_OK(bonsai_db_stat(db, &st));
        cr_assert_eq(st.page_size, cfg[c].page);
        cr_assert_eq(st.node_bytes, cfg[c].nbytes);
        cr_assert_eq(st.node_entries, cfg[c].nentries);
        bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
        tm_model model;
        tm_init(&model, BONSAI_KEY_U64);
        for (uint64_t i = 0; i < 300; i++) {
            uint64_t k = tu_mix64(i) % 1000;
            char v[24];
            int n = snprintf(v, sizeof v, "v%" PRIu64, i);
            bonsai_val val = tu_val(v, (size_t)n);
            TU_OK(bonsai_put_u64(NULL, m, k, &val, 0));
            tm_put(&model, &k, 8, v, (size_t)n);
            if (i % 3 == 2) {
                uint64_t d = tu_mix64(i * 7) % 1000;
                int rc = bonsai_del_u64(NULL, m, d);
                bool had = tm_del(&model, &d, 8);
                cr_assert_eq(rc, had ? 0 : BONSAI_NOTFOUND, "del -> %s",
                             tu_err(rc));
            }
        }
        TU_ASSERT_SAME(NULL, m, &model, "extreme options");
        tm_free(&model);
        TU_OK(bonsai_close(db));
    }
}

/* ---- maps --------------------------------------------------------------- */

struct list_rec {
    int n;
    char names[16][64];
    unsigned kinds[16];
    uint64_t entries[16];
};

static int list_cb(void *ctx, const char *name, unsigned kind,
                   uint64_t entries)
{
    struct list_rec *r = ctx;
    if (r->n < 16) {
        snprintf(r->names[r->n], 64, "%s", name);
        r->kinds[r->n] = kind;
        r->entries[r->n] = entries;
    }
    r->n++;
    return 0;
}

static int stop_cb(void *ctx, const char *name, unsigned kind,
                   uint64_t entries)
{
    (void)name;
    (void)kind;
    (void)entries;
    int *calls = ctx;
    ++*calls;
    return 42;
}

Test(api, maps_create_open_list_drop)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    bonsai_map a = tu_map_create(db, NULL, "a", BONSAI_KEY_U64);
    bonsai_map B = tu_map_create(db, NULL, "B", BONSAI_KEY_BYTES);
    bonsai_map ab = tu_map_create(db, NULL, "ab", BONSAI_KEY_U64);
    cr_assert(a != b && a != B && a != ab && b != B && b != ab && B != ab,
              "map handles must differ");

    put_str(NULL, b, "x", "1");
    put_str(NULL, b, "y", "2");
    TU_OK(bonsai_put_u64(NULL, a, 7, NULL, 0));

    /* duplicates */
    bonsai_map again = 0;
    TU_RC(bonsai_map_create(db, NULL, "b", BONSAI_KEY_BYTES, &again),
          BONSAI_EXISTS);
    /* *map is set when the kinds agree: it reaches the same map */
    expect_str(NULL, again, "x", "1");
    TU_RC(bonsai_map_create(db, NULL, "b", BONSAI_KEY_U64, &again), BONSAI_EXISTS);
    TU_RC(bonsai_map_create(db, NULL, "a", BONSAI_KEY_BYTES, &again),
          BONSAI_EXISTS);
    cr_assert_eq(count_of(NULL, b), 2, "a failed create must not clear");

    /* open */
    unsigned kind = 0;
    bonsai_map o = 0;
    TU_OK(bonsai_map_open(db, NULL, "a", &o, &kind));
    cr_assert_eq(kind, BONSAI_KEY_U64);
    TU_RC(bonsai_get_u64(NULL, o, 7, &(bonsai_val){0, NULL}), 0);
    TU_OK(bonsai_map_open(db, NULL, "b", &o, &kind));
    cr_assert_eq(kind, BONSAI_KEY_BYTES);
    expect_str(NULL, o, "y", "2");
    TU_OK(bonsai_map_open(db, NULL, "B", &o, NULL)); /* kind may be NULL */
    TU_RC(bonsai_map_open(db, NULL, "c", &o, &kind), BONSAI_NOTFOUND);
    TU_RC(bonsai_map_open(db, NULL, "A", &o, &kind), BONSAI_NOTFOUND);

    /* list, in name order */
    struct list_rec r;
    memset(&r, 0, sizeof r);
    TU_OK(bonsai_map_list(db, NULL, list_cb, &r));
    cr_assert_eq(r.n, 4, "listed %d maps", r.n);
    const char *want[] = {"B", "a", "ab", "b"};
    unsigned wkind[] = {BONSAI_KEY_BYTES, BONSAI_KEY_U64, BONSAI_KEY_U64,
                        BONSAI_KEY_BYTES};
    uint64_t went[] = {0, 1, 0, 2};
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(r.names[i], want[i], "list[%d] = %s", i, r.names[i]);
        cr_assert_eq(r.kinds[i], wkind[i], "list[%d] kind", i);
        cr_assert_eq(r.entries[i], went[i], "list[%d] (%s) entries %" PRIu64,
                     i, want[i], r.entries[i]);
    }
    /* a non-zero callback result stops the walk and is returned */
    int calls = 0;
    TU_RC(bonsai_map_list(db, NULL, stop_cb, &calls), 42);
    cr_assert_eq(calls, 1);

    /* drop */
    TU_OK(bonsai_map_drop(db, NULL, "b"));
    TU_RC(bonsai_map_drop(db, NULL, "b"), BONSAI_NOTFOUND);
    TU_RC(bonsai_map_drop(db, NULL, "zzz"), BONSAI_NOTFOUND);
    TU_RC(bonsai_map_open(db, NULL, "b", &o, &kind), BONSAI_NOTFOUND);
    memset(&r, 0, sizeof r);
    TU_OK(bonsai_map_list(db, NULL, list_cb, &r));
    cr_assert_eq(r.n, 3);
    cr_assert_str_eq(r.names[0], "B");
    cr_assert_str_eq(r.names[1], "a");
    cr_assert_str_eq(r.names[2], "ab");
    /* the other maps are untouched */
    TU_RC(bonsai_get_u64(NULL, a, 7, &(bonsai_val){0, NULL}), 0);
    /* the name can be created again, empty, with another kind */
    bonsai_map nb = tu_map_create(db, NULL, "b", BONSAI_KEY_U64);
    cr_assert_eq(count_of(NULL, nb), 0, "a re-created map must be empty");
    TU_RC(bonsai_get_u64(NULL, nb, 7, &(bonsai_val){0, NULL}),
          BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
}

Test(api, map_names_and_kinds_validated)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m;
    TU_RC(bonsai_map_create(db, NULL, "", BONSAI_KEY_BYTES, &m), BONSAI_INVALID);
    TU_RC(bonsai_map_create(db, NULL, "k0", 0, &m), BONSAI_INVALID);
    TU_RC(bonsai_map_create(db, NULL, "k3", 3, &m), BONSAI_INVALID);
    char name[BONSAI_MAX_NAME + 2];
    memset(name, 'n', sizeof name);
    name[BONSAI_MAX_NAME + 1] = 0; /* 256 bytes */
    TU_RC(bonsai_map_create(db, NULL, name, BONSAI_KEY_BYTES, &m), BONSAI_INVALID);
    name[BONSAI_MAX_NAME] = 0; /* 255 bytes */
    bonsai_map longm = tu_map_create(db, NULL, name, BONSAI_KEY_BYTES);
    put_str(NULL, longm, "k", "v");
    bonsai_map o;
    unsigned kind;
    TU_OK(bonsai_map_open(db, NULL, name, &o, &kind));
    expect_str(NULL, o, "k", "v");
    int rc = bonsai_map_open(db, NULL, "", &o, &kind);
    cr_assert(rc == BONSAI_INVALID || rc == BONSAI_NOTFOUND,
              "map_open of an empty name -> %s", tu_err(rc));
    TU_OK(bonsai_close(db));
}

Test(api, map_kind_survives_reopen)
{
    const char *path = tu_path("k.db");
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map u = tu_map_create(db, NULL, "ints", BONSAI_KEY_U64);
    bonsai_map b = tu_map_create(db, NULL, "strs", BONSAI_KEY_BYTES);
    TU_OK(bonsai_put_u64(NULL, u, 5, NULL, 0));
    put_str(NULL, b, "k", "v");
    TU_OK(bonsai_close(db));

    db = tu_open(path, NULL);
    unsigned kind = 0;
    bonsai_map m;
    TU_OK(bonsai_map_open(db, NULL, "ints", &m, &kind));
    cr_assert_eq(kind, BONSAI_KEY_U64, "kind after reopen: %u", kind);
    TU_OK(bonsai_get_u64(NULL, m, 5, &(bonsai_val){0, NULL}));
    TU_RC(bonsai_put_u64(NULL, tu_map_open(db, NULL, "strs",
                                           BONSAI_KEY_BYTES),
                         1, NULL, 0),
          BONSAI_MAPKIND);
    struct list_rec r;
    memset(&r, 0, sizeof r);
    TU_OK(bonsai_map_list(db, NULL, list_cb, &r));
    cr_assert_eq(r.n, 2);
    cr_assert_str_eq(r.names[0], "ints");
    cr_assert_eq(r.kinds[0], BONSAI_KEY_U64);
    cr_assert_eq(r.entries[0], 1);
    cr_assert_str_eq(r.names[1], "strs");
    cr_assert_eq(r.kinds[1], BONSAI_KEY_BYTES);
    cr_assert_eq(r.entries[1], 1);
    TU_RC(bonsai_map_create(db, NULL, "ints", BONSAI_KEY_BYTES, &m),
          BONSAI_EXISTS);

    /* a drop survives reopen too */
    TU_OK(bonsai_map_drop(db, NULL, "ints"));
    TU_OK(bonsai_close(db));
    db = tu_open(path, NULL);
    TU_RC(bonsai_map_open(db, NULL, "ints", &m, &kind), BONSAI_NOTFOUND);
    b = tu_map_open(db, NULL, "strs", BONSAI_KEY_BYTES);
    expect_str(NULL, b, "k", "v");
    TU_OK(bonsai_close(db));
}

Test(api, map_kind_mismatch)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_val v = sval("v"), out = {0, NULL};
    /* u64 calls on a byte map */
    TU_RC(bonsai_put_u64(NULL, b, 1, &v, 0), BONSAI_MAPKIND);
    TU_RC(bonsai_get_u64(NULL, b, 1, &out), BONSAI_MAPKIND);
    TU_RC(bonsai_del_u64(NULL, b, 1), BONSAI_MAPKIND);
    cr_assert_eq(count_of(NULL, b), 0);
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(NULL, b, &cur));
    TU_RC(bonsai_cursor_seek_u64(cur, 1), BONSAI_MAPKIND);
    bonsai_cursor_close(cur);

    /* a u64 map takes 8-byte keys only */
    uint8_t k9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (size_t n = 1; n <= 9; n++) {
        if (n == 8)
            continue;
        bonsai_val k = tu_val(k9, n);
        TU_RC(bonsai_put(NULL, u, &k, &v, 0), BONSAI_KEYSIZE);
        TU_RC(bonsai_get(NULL, u, &k, &out), BONSAI_KEYSIZE);
        TU_RC(bonsai_del(NULL, u, &k), BONSAI_KEYSIZE);
    }
    cr_assert_eq(count_of(NULL, u), 0);
    /* 8 native bytes and the u64 calls are the same key */
    uint64_t key = UINT64_C(0x0102030405060708);
    bonsai_val k8 = u64val(&key);
    TU_OK(bonsai_put(NULL, u, &k8, &v, 0));
    TU_OK(bonsai_get_u64(NULL, u, key, &out));
    cr_assert(out.size == 1 && memcmp(out.data, "v", 1) == 0);
    TU_OK(bonsai_del_u64(NULL, u, key));
    TU_RC(bonsai_get(NULL, u, &k8, &out), BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
}

/* Checks that map "a" is a byte map holding exactly "k" -> "v", and that
 * verify agrees. */
static void expect_map_a(bonsai_db *db, const char *when)
{
    bonsai_map m = NULL;
    unsigned kind = 0;
    int rc = bonsai_map_open(db, NULL, "a", &m, &kind);
    cr_assert(rc == 0, "%s: map_open(a) -> %s", when, tu_err(rc));
    cr_assert_eq(kind, BONSAI_KEY_BYTES, "%s: kind %u", when, kind);
    expect_str(NULL, m, "k", "v");
    cr_assert_eq(count_of(NULL, m), 1, "%s: count", when);
    uint64_t problems = 1;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    cr_assert_eq(problems, 0, "%s: verify", when);
}

/* In one write transaction: drop "a", create it again as a byte map, put
 * a key (listing the maps `lists` times after the put, and closing the
 * new handle if `close_it`), commit.  The map created last must be the
 * one the catalog keeps, whichever handle slots the earlier maps of that
 * name took. */
static void recreate_in_one_txn(unsigned first_kind, int history, int lists,
                                int close_it)
{
    const char *path = tu_path("re.db");
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(path, &o);
    if (history) {
        /* "a" has been a byte map and a u64 map before */
        tu_map_create(db, NULL, "a", BONSAI_KEY_BYTES);
        TU_OK(bonsai_map_drop(db, NULL, "a"));
        tu_map_create(db, NULL, "a", BONSAI_KEY_U64);
    } else {
        tu_map_create(db, NULL, "a", first_kind);
    }
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    TU_OK(bonsai_map_drop(db, txn, "a"));
    bonsai_map m = tu_map_create(db, txn, "a", BONSAI_KEY_BYTES);
    put_str(txn, m, "k", "v");
    for (int i = 0; i < lists; i++) {
        struct list_rec r;
        memset(&r, 0, sizeof r);
        TU_OK(bonsai_map_list(db, txn, list_cb, &r));
        cr_assert_eq(r.n, 1, "list %d in the txn: %d maps", i + 1, r.n);
        cr_assert_str_eq(r.names[0], "a");
        cr_assert_eq(r.kinds[0], BONSAI_KEY_BYTES);
        cr_assert_eq(r.entries[0], 1, "list %d: entries", i + 1);
    }
    if (close_it)
        TU_OK(bonsai_map_close(db, m));
    TU_OK(bonsai_txn_commit(txn));
    expect_map_a(db, "after commit");
    TU_OK(bonsai_close(db));
    db = tu_open(path, &o);
    expect_map_a(db, "after reopen");
    TU_OK(bonsai_close(db));
}

Test(api, map_recreated_after_other_kinds_survives_commit)
{
    recreate_in_one_txn(0, 1, 0, 0);
}

Test(api, map_recreated_with_other_kind_survives_listing_twice)
{
    recreate_in_one_txn(BONSAI_KEY_U64, 0, 2, 0);
}

Test(api, map_recreated_with_same_kind_survives_listing_twice)
{
    recreate_in_one_txn(BONSAI_KEY_BYTES, 0, 2, 0);
}

Test(api, map_recreated_after_other_kinds_survives_listing)
{
    recreate_in_one_txn(0, 1, 2, 0);
}

/* The new handle closed before the commit: its record is in the
 * transaction's catalog then, and the dropped map's deletion of the name
 * must not come after it. */
Test(api, map_recreated_with_other_kind_survives_its_handle_closed)
{
    recreate_in_one_txn(BONSAI_KEY_U64, 0, 0, 1);
}

Test(api, map_recreated_after_other_kinds_survives_its_handle_closed)
{
    recreate_in_one_txn(0, 1, 1, 1);
}

Test(api, maps_full_at_max_maps)
{
    bonsai_db *db = tu_open(NULL, NULL);
    char name[32];
    bonsai_map first = NULL, last = NULL;
    for (unsigned i = 0; i < BONSAI_MAX_MAPS; i++) {
        bonsai_map m;
        snprintf(name, sizeof name, "map%05u", i);
        int rc = bonsai_map_create(db, NULL, name, BONSAI_KEY_U64, &m);
        cr_assert(rc == 0, "create of map %u of %u -> %s", i + 1,
                  BONSAI_MAX_MAPS, tu_err(rc));
        if (i == 0)
            first = m;
        last = m;
    }
    bonsai_map m;
    TU_RC(bonsai_map_create(db, NULL, "one-too-many", BONSAI_KEY_U64, &m),
          BONSAI_MAPS_FULL);
    TU_RC(bonsai_map_open(db, NULL, "one-too-many", &m, NULL),
          BONSAI_NOTFOUND);
    /* the maps created are fine */
    TU_OK(bonsai_put_u64(NULL, first, 1, NULL, 0));
    TU_OK(bonsai_get_u64(NULL, first, 1, &(bonsai_val){0, NULL}));
    TU_OK(bonsai_put_u64(NULL, last, 2, NULL, 0));
    TU_RC(bonsai_get_u64(NULL, last, 1, &(bonsai_val){0, NULL}),
          BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
}

/* ---- more maps than handles --------------------------------------------- */

/* More maps than one handle holds open at once: a store written in two
 * parts (as two loads of 2,500 maps each make it). */
#define MANY_MAPS 5000u

static void map_name(char *buf, size_t n, unsigned i)
{
    snprintf(buf, n, "%c%05u", i < MANY_MAPS / 2 ? 'a' : 'b', i);
}

/* Map i holds key i with the value "v<i>"; returns its handle. */
static bonsai_map map_i_holds(bonsai_db *db, bonsai_txn *txn, unsigned i)
{
    char name[16], v[16];
    map_name(name, sizeof name, i);
    snprintf(v, sizeof v, "v%u", i);
    bonsai_map m = tu_map_open(db, txn, name, BONSAI_KEY_U64);
    uint64_t count;
    TU_OK(bonsai_count(txn, m, &count));
    cr_assert_eq(count, 1, "map %s holds %" PRIu64 " entries", name, count);
    bonsai_val got = {0, NULL};
    TU_OK(bonsai_get_u64(txn, m, i, &got));
    cr_assert(got.size == strlen(v) && memcmp(got.data, v, got.size) == 0,
              "map %s: wrong value", name);
    return m;
}

/* map_i_holds, then the handle closed. */
static void expect_map_i(bonsai_db *db, bonsai_txn *txn, unsigned i)
{
    TU_OK(bonsai_map_close(db, map_i_holds(db, txn, i)));
}

static int count_map(void *ctx, const char *name, unsigned kind,
                     uint64_t entries)
{
    (void)name;
    (void)kind;
    uint64_t *n = ctx;
    n[0]++;
    n[1] += entries;
    return 0;
}

static void expect_many_maps(const char *path)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    bonsai_db *db = tu_open(path, &o);
    uint64_t n[2] = {0, 0};
    TU_OK(bonsai_map_list(db, NULL, count_map, n));
    cr_assert(n[0] == MANY_MAPS && n[1] == MANY_MAPS,
              "%s: %" PRIu64 " maps, %" PRIu64 " entries", path, n[0], n[1]);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn));
    for (unsigned i = 0; i < MANY_MAPS; i += 7) /* fewer than a handle holds */
        map_i_holds(db, txn, i);
    bonsai_txn_abort(txn);
    uint64_t problems = 1;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    cr_assert_eq(problems, 0);
    TU_OK(bonsai_close(db));
}

/* Maps [from, to) of map_name, each in a handle of its own, written in
 * one commit by a handle that opens fewer than BONSAI_MAX_MAPS. */
static void put_maps(const char *path, unsigned from, unsigned to)
{
    bonsai_db *db = tu_open(path, NULL);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    for (unsigned i = from; i < to; i++) {
        char name[16], v[16];
        map_name(name, sizeof name, i);
        bonsai_map m = tu_map_create(db, txn, name, BONSAI_KEY_U64);
        bonsai_val val = sval((snprintf(v, sizeof v, "v%u", i), v));
        TU_OK(bonsai_put_u64(txn, m, i, &val, 0));
    }
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
}

/* bonsai_compact opens every map of the source and of the copy: it
 * copies a store of more maps than one handle holds open at once. */
Test(api, compact_copies_more_maps_than_one_handle_opens)
{
    const char *path = tu_path("many.db"), *copy = tu_path("copy.db");
    put_maps(path, 0, MANY_MAPS / 2);
    put_maps(path, MANY_MAPS / 2, MANY_MAPS);
    expect_many_maps(path);
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    bonsai_db *db = tu_open(path, &o);
    TU_OK(bonsai_compact(db, copy, NULL));
    TU_OK(bonsai_close(db));
    expect_many_maps(copy);
}

/* A handle closed when done frees its slot: one handle creates, writes
 * and reads any number of maps, in a write transaction (whose changes to
 * closed maps commit or abort with it) and without transactions. */
Test(api, closed_map_handles_let_a_handle_use_any_number_of_maps)
{
    const char *path = tu_path("close.db");
    bonsai_db *db = tu_open(path, NULL);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    for (unsigned i = 0; i < MANY_MAPS; i++) {
        char name[16], v[16];
        map_name(name, sizeof name, i);
        bonsai_map m = tu_map_create(db, txn, name, BONSAI_KEY_U64);
        bonsai_val val = sval((snprintf(v, sizeof v, "v%u", i), v));
        TU_OK(bonsai_put_u64(txn, m, i, &val, 0));
        TU_OK(bonsai_map_close(db, m));
        if (i % 1000 == 0) /* the transaction sees the closed map */
            expect_map_i(db, txn, i);
    }
    TU_OK(bonsai_txn_commit(txn));
    /* maps created, closed, then aborted are gone */
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    for (unsigned i = 0; i < MANY_MAPS; i++) {
        char name[16];
        snprintf(name, sizeof name, "gone%05u", i);
        bonsai_map m = tu_map_create(db, txn, name, BONSAI_KEY_U64);
        TU_OK(bonsai_put_u64(txn, m, i, NULL, 0));
        TU_OK(bonsai_map_close(db, m));
    }
    /* a drop, closed, also waits for the commit (here: the abort) */
    bonsai_map m = tu_map_open(db, txn, "a00007", BONSAI_KEY_U64);
    TU_OK(bonsai_map_drop(db, txn, "a00007"));
    TU_OK(bonsai_map_close(db, m));
    TU_RC(bonsai_map_open(db, txn, "a00007", &m, NULL), BONSAI_NOTFOUND);
    bonsai_txn_abort(txn);
    TU_RC(bonsai_map_open(db, NULL, "gone00001", &m, NULL), BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
    expect_many_maps(path);

    /* without transactions, in memory */
    db = tu_open(NULL, NULL);
    for (unsigned i = 0; i < MANY_MAPS; i++) {
        char name[16], v[16];
        map_name(name, sizeof name, i);
        m = tu_map_create(db, NULL, name, BONSAI_KEY_U64);
        bonsai_val val = sval((snprintf(v, sizeof v, "v%u", i), v));
        TU_OK(bonsai_put_u64(NULL, m, i, &val, 0));
        TU_OK(bonsai_map_close(db, m));
    }
    uint64_t n[2] = {0, 0};
    TU_OK(bonsai_map_list(db, NULL, count_map, n));
    cr_assert(n[0] == MANY_MAPS && n[1] == MANY_MAPS);
    for (unsigned i = 0; i < MANY_MAPS; i += 7)
        expect_map_i(db, NULL, i);
    TU_OK(bonsai_close(db));
}

/* Closing counts: each open or create that gave the handle needs a close
 * before the slot is freed; a handle under a cursor is not freed; a read
 * snapshot never mistakes the map a freed slot names next for the one
 * it named before. */
Test(api, map_close_rules)
{
    bonsai_db *db = tu_open(tu_path("rules.db"), NULL);
    bonsai_map x = tu_map_create(db, NULL, "x", BONSAI_KEY_BYTES);
    bonsai_map y = tu_map_create(db, NULL, "y", BONSAI_KEY_BYTES);
    put_str(NULL, x, "k", "in x");
    put_str(NULL, y, "k", "in y");
    bonsai_map again = tu_map_open(db, NULL, "x", BONSAI_KEY_BYTES);
    cr_assert(again == x, "a map open twice has one handle");
    TU_OK(bonsai_map_close(db, again));
    expect_str(NULL, x, "k", "in x"); /* one open left */
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(NULL, x, &cur));
    TU_RC(bonsai_map_close(db, x), BONSAI_BUSY);
    bonsai_cursor_close(cur);
    TU_OK(bonsai_map_close(db, x));
    TU_RC(bonsai_map_close(db, x), BONSAI_INVALID);
    bonsai_val k = sval("k"), v;
    TU_RC(bonsai_get(NULL, x, &k, &v), BONSAI_INVALID);
    TU_RC(bonsai_cursor_open(NULL, x, &cur), BONSAI_INVALID);
    TU_RC(bonsai_map_close(NULL, y), BONSAI_INVALID);
    TU_RC(bonsai_map_close(db, NULL), BONSAI_INVALID);

    /* a snapshot reads x, its handle is freed and y's reopened handle
     * may take its slot: the snapshot reads y there, not x */
    bonsai_txn *r;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
    bonsai_map rx = tu_map_open(db, r, "x", BONSAI_KEY_BYTES);
    expect_str(r, rx, "k", "in x");
    TU_OK(bonsai_map_close(db, rx));
    TU_OK(bonsai_map_close(db, y));
    bonsai_map ry = tu_map_open(db, r, "y", BONSAI_KEY_BYTES);
    expect_str(r, ry, "k", "in y");
    bonsai_txn_abort(r);
    TU_OK(bonsai_map_close(db, ry));
    TU_OK(bonsai_close(db));
}

/* ---- put / get / del ---------------------------------------------------- */

Test(api, put_get_del_overwrite_bytes)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    expect_absent(NULL, m, "a");
    put_str(NULL, m, "a", "1");
    put_str(NULL, m, "b", "2");
    put_str(NULL, m, "ab", "3");
    expect_str(NULL, m, "a", "1");
    expect_str(NULL, m, "b", "2");
    expect_str(NULL, m, "ab", "3");
    expect_absent(NULL, m, "abc");
    expect_absent(NULL, m, "A");
    /* overwrite, longer and shorter */
    put_str(NULL, m, "a", "one, much longer than before");
    expect_str(NULL, m, "a", "one, much longer than before");
    put_str(NULL, m, "a", "");
    expect_str(NULL, m, "a", "");
    put_str(NULL, m, "a", "1b");
    expect_str(NULL, m, "a", "1b");
    cr_assert_eq(count_of(NULL, m), 3);
    /* delete */
    bonsai_val k = sval("ab");
    TU_OK(bonsai_del(NULL, m, &k));
    expect_absent(NULL, m, "ab");
    TU_RC(bonsai_del(NULL, m, &k), BONSAI_NOTFOUND);
    expect_str(NULL, m, "a", "1b");
    expect_str(NULL, m, "b", "2");
    /* keys and values may hold any bytes, including NUL */
    uint8_t kb[4] = {0, 0xff, 0, 1}, vb[5] = {0, 1, 0, 0xff, 0};
    bonsai_val kk = tu_val(kb, 4), vv = tu_val(vb, 5), out = {0, NULL};
    TU_OK(bonsai_put(NULL, m, &kk, &vv, 0));
    TU_OK(bonsai_get(NULL, m, &kk, &out));
    cr_assert(out.size == 5 && memcmp(out.data, vb, 5) == 0);
    bonsai_val k3 = tu_val(kb, 3);
    TU_RC(bonsai_get(NULL, m, &k3, &out), BONSAI_NOTFOUND);
    cr_assert_eq(count_of(NULL, m), 3);
    TU_OK(bonsai_close(db));
}

Test(api, put_get_del_overwrite_u64)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    uint64_t keys[] = {0, 1, 255, 256, 65536, UINT64_C(1) << 32,
                       UINT64_C(1) << 63, UINT64_MAX - 1, UINT64_MAX};
    size_t nk = sizeof keys / sizeof keys[0];
    bonsai_val out;
    for (size_t i = 0; i < nk; i++)
        TU_RC(bonsai_get_u64(NULL, m, keys[i], &out), BONSAI_NOTFOUND);
    for (size_t i = 0; i < nk; i++) {
        uint64_t v = ~keys[i];
        bonsai_val val = tu_val(&v, 8);
        TU_OK(bonsai_put_u64(NULL, m, keys[i], &val, 0));
    }
    for (size_t i = 0; i < nk; i++) {
        TU_OK(bonsai_get_u64(NULL, m, keys[i], &out));
        uint64_t v;
        cr_assert_eq(out.size, 8);
        memcpy(&v, out.data, 8);
        cr_assert_eq(v, ~keys[i], "value of key %" PRIu64, keys[i]);
    }
    TU_RC(bonsai_get_u64(NULL, m, 2, &out), BONSAI_NOTFOUND);
    cr_assert_eq(count_of(NULL, m), nk);
    /* overwrite with NULL (empty) and a string */
    TU_OK(bonsai_put_u64(NULL, m, 255, NULL, 0));
    TU_OK(bonsai_get_u64(NULL, m, 255, &out));
    cr_assert_eq(out.size, 0);
    bonsai_val s = sval("hello");
    TU_OK(bonsai_put_u64(NULL, m, UINT64_MAX, &s, 0));
    TU_OK(bonsai_get_u64(NULL, m, UINT64_MAX, &out));
    cr_assert(out.size == 5 && memcmp(out.data, "hello", 5) == 0);
    cr_assert_eq(count_of(NULL, m), nk);
    /* delete the extremes */
    TU_OK(bonsai_del_u64(NULL, m, 0));
    TU_OK(bonsai_del_u64(NULL, m, UINT64_MAX));
    TU_RC(bonsai_del_u64(NULL, m, 0), BONSAI_NOTFOUND);
    TU_RC(bonsai_del_u64(NULL, m, 12345), BONSAI_NOTFOUND);
    TU_RC(bonsai_get_u64(NULL, m, 0, &out), BONSAI_NOTFOUND);
    TU_RC(bonsai_get_u64(NULL, m, UINT64_MAX, &out), BONSAI_NOTFOUND);
    TU_OK(bonsai_get_u64(NULL, m, UINT64_MAX - 1, &out));
    cr_assert_eq(count_of(NULL, m), nk - 2);
    TU_OK(bonsai_close(db));
}

Test(api, nooverwrite)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_val k = sval("key"), v1 = sval("first"), v2 = sval("second");
    TU_OK(bonsai_put(NULL, m, &k, &v1, BONSAI_NOOVERWRITE));
    TU_RC(bonsai_put(NULL, m, &k, &v2, BONSAI_NOOVERWRITE), BONSAI_EXISTS);
    expect_str(NULL, m, "key", "first");
    bonsai_val e = tu_val(NULL, 0);
    TU_RC(bonsai_put(NULL, m, &k, &e, BONSAI_NOOVERWRITE), BONSAI_EXISTS);
    expect_str(NULL, m, "key", "first");
    cr_assert_eq(count_of(NULL, m), 1);
    /* without the flag it overwrites */
    TU_OK(bonsai_put(NULL, m, &k, &v2, 0));
    expect_str(NULL, m, "key", "second");

    TU_OK(bonsai_put_u64(NULL, u, 9, &v1, BONSAI_NOOVERWRITE));
    TU_RC(bonsai_put_u64(NULL, u, 9, &v2, BONSAI_NOOVERWRITE), BONSAI_EXISTS);
    TU_RC(bonsai_put_u64(NULL, u, 9, NULL, BONSAI_NOOVERWRITE), BONSAI_EXISTS);
    bonsai_val out;
    TU_OK(bonsai_get_u64(NULL, u, 9, &out));
    cr_assert(out.size == 5 && memcmp(out.data, "first", 5) == 0);
    cr_assert_eq(count_of(NULL, u), 1);
    /* after a delete the key is new again */
    TU_OK(bonsai_del_u64(NULL, u, 9));
    TU_OK(bonsai_put_u64(NULL, u, 9, &v2, BONSAI_NOOVERWRITE));
    TU_OK(bonsai_get_u64(NULL, u, 9, &out));
    cr_assert(out.size == 6 && memcmp(out.data, "second", 6) == 0);
    TU_OK(bonsai_close(db));
}

Test(api, count_tracks_changes)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    bonsai_map other = tu_map_create(db, NULL, "other", BONSAI_KEY_U64);
    cr_assert_eq(count_of(NULL, m), 0);
    uint64_t n = 0;
    for (uint64_t i = 0; i < 5000; i++) {
        uint64_t k = tu_mix64(i) % 3000;
        int rc = bonsai_put_u64(NULL, m, k, NULL, BONSAI_NOOVERWRITE);
        cr_assert(rc == 0 || rc == BONSAI_EXISTS, "put -> %s", tu_err(rc));
        if (rc == 0)
            n++;
        if (i % 500 == 0)
            cr_assert_eq(count_of(NULL, m), n, "after %" PRIu64 " puts", i);
    }
    cr_assert_eq(count_of(NULL, m), n);
    /* overwrites do not count */
    for (uint64_t k = 0; k < 3000; k += 7) {
        bonsai_val out;
        if (bonsai_get_u64(NULL, m, k, &out) == 0) {
            bonsai_val v = sval("x");
            TU_OK(bonsai_put_u64(NULL, m, k, &v, 0));
        }
    }
    cr_assert_eq(count_of(NULL, m), n);
    /* deletes, present and absent */
    for (uint64_t k = 0; k < 3000; k += 2) {
        int rc = bonsai_del_u64(NULL, m, k);
        cr_assert(rc == 0 || rc == BONSAI_NOTFOUND);
        if (rc == 0)
            n--;
    }
    cr_assert_eq(count_of(NULL, m), n);
    cr_assert_eq(count_of(NULL, other), 0, "another map's count moved");
    /* down to empty */
    for (uint64_t k = 0; k < 3000; k++) {
        int rc = bonsai_del_u64(NULL, m, k);
        cr_assert(rc == 0 || rc == BONSAI_NOTFOUND);
    }
    cr_assert_eq(count_of(NULL, m), 0);
    TU_OK(bonsai_close(db));
}

Test(api, key_sizes)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    static uint8_t big[BONSAI_MAX_KEY + 2];
    memset(big, 'k', sizeof big);
    bonsai_val v = sval("v"), out;
    bonsai_val k0 = tu_val(big, 0);
    bonsai_val k0null = tu_val(NULL, 0);
    bonsai_val k1025 = tu_val(big, BONSAI_MAX_KEY + 1);
    bonsai_val *bad[] = {&k0, &k0null, &k1025};
    for (size_t i = 0; i < 3; i++) {
        TU_RC(bonsai_put(NULL, m, bad[i], &v, 0), BONSAI_KEYSIZE);
        TU_RC(bonsai_put(NULL, m, bad[i], &v, BONSAI_NOOVERWRITE),
              BONSAI_KEYSIZE);
        TU_RC(bonsai_get(NULL, m, bad[i], &out), BONSAI_KEYSIZE);
        TU_RC(bonsai_del(NULL, m, bad[i]), BONSAI_KEYSIZE);
    }
    cr_assert_eq(count_of(NULL, m), 0);
    bonsai_val k1 = tu_val(big, 1), k1024 = tu_val(big, BONSAI_MAX_KEY);
    TU_OK(bonsai_put(NULL, m, &k1, &v, 0));
    TU_OK(bonsai_put(NULL, m, &k1024, &v, 0));
    TU_OK(bonsai_get(NULL, m, &k1, &out));
    TU_OK(bonsai_get(NULL, m, &k1024, &out));
    cr_assert_eq(count_of(NULL, m), 2);
    TU_RC(bonsai_get(NULL, m, &k1025, &out), BONSAI_KEYSIZE);
    TU_OK(bonsai_close(db));
}

/* ---- value sizes -------------------------------------------------------- */

static const size_t value_sizes[] = {0, 1, 4096, 1u << 20, 64u << 20};
#define NVALUES (sizeof value_sizes / sizeof value_sizes[0])

static uint8_t *pattern(size_t n, uint64_t salt)
{
    uint8_t *p = malloc(n ? n : 1);
    cr_assert(p != NULL);
    tu_rng r = {salt};
    tu_fill(&r, p, n);
    return p;
}

static void check_value(bonsai_txn *txn, bonsai_map m, uint64_t key,
                        const uint8_t *want, size_t n)
{
    bonsai_val out = {0, NULL};
    int rc = bonsai_get_u64(txn, m, key, &out);
    cr_assert(rc == 0, "get of the %zu-byte value -> %s", n, tu_err(rc));
    cr_assert(out.size == n, "value of %zu bytes came back as %zu", n,
              out.size);
    cr_assert(n == 0 || memcmp(out.data, want, n) == 0,
              "value of %zu bytes came back different", n);
}

static void value_sizes_test(const char *path, uint32_t page_size)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = UINT64_C(512) << 20;
    if (page_size)
        o.page_size = page_size;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "v", BONSAI_KEY_U64);
    uint8_t *pat[NVALUES];
    for (size_t i = 0; i < NVALUES; i++) {
        pat[i] = pattern(value_sizes[i], i + 1);
        bonsai_val v = tu_val(pat[i], value_sizes[i]);
        int rc = bonsai_put_u64(NULL, m, i, &v, 0);
        cr_assert(rc == 0, "put of a %zu-byte value -> %s", value_sizes[i],
                  tu_err(rc));
        /* neighbours with small values around the big ones */
        bonsai_val s = tu_val(&i, sizeof i);
        TU_OK(bonsai_put_u64(NULL, m, 1000 + i, &s, 0));
    }
    for (size_t i = 0; i < NVALUES; i++)
        check_value(NULL, m, i, pat[i], value_sizes[i]);
    if (path) {
        TU_OK(bonsai_close(db));
        db = tu_open(path, &o);
        m = tu_map_open(db, NULL, "v", BONSAI_KEY_U64);
        for (size_t i = 0; i < NVALUES; i++)
            check_value(NULL, m, i, pat[i], value_sizes[i]);
    }
    for (size_t i = 0; i < NVALUES; i++)
        check_value(NULL, m, 1000 + i, (const uint8_t *)&i, sizeof i);
    /* shrink the big ones, grow the small ones */
    for (size_t i = 0; i < NVALUES; i++) {
        size_t j = NVALUES - 1 - i;
        bonsai_val v = tu_val(pat[j], value_sizes[j]);
        TU_OK(bonsai_put_u64(NULL, m, i, &v, 0));
    }
    for (size_t i = 0; i < NVALUES; i++)
        check_value(NULL, m, i, pat[NVALUES - 1 - i],
                    value_sizes[NVALUES - 1 - i]);
    /* delete them all */
    for (size_t i = 0; i < NVALUES; i++)
        TU_OK(bonsai_del_u64(NULL, m, i));
    cr_assert_eq(count_of(NULL, m), NVALUES);
    if (path) {
        TU_OK(bonsai_close(db));
        db = tu_open(path, &o);
        m = tu_map_open(db, NULL, "v", BONSAI_KEY_U64);
        cr_assert_eq(count_of(NULL, m), NVALUES);
        bonsai_val out;
        TU_RC(bonsai_get_u64(NULL, m, NVALUES - 1, &out), BONSAI_NOTFOUND);
    }
    for (size_t i = 0; i < NVALUES; i++)
        free(pat[i]);
    TU_OK(bonsai_close(db));
}

Test(api, value_sizes_anonymous)
{
    value_sizes_test(NULL, 0);
}

Test(api, value_sizes_file_survive_reopen)
{
    value_sizes_test(tu_path("values.db"), 0);
}

/* The smallest page: a 64 MiB value spans a million pages, node images
 * several; all of it survives reopening the file. */
Test(api, value_sizes_64_byte_pages_survive_reopen)
{
    const char *path = tu_path("values64.db");
    value_sizes_test(path, 64);
    /* the page size is the file's: default options reopen it as it is */
    bonsai_db *db = tu_open(path, NULL);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert_eq(st.page_size, 64u);
    uint64_t problems = 1;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    cr_assert_eq(problems, 0u, "verify of the 64-byte page store: %" PRIu64
                 " problems", problems);
    TU_OK(bonsai_close(db));
}

Test(api, value_too_big)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    /* 1 GiB + 1 readable (zero) bytes, no memory behind them */
    size_t n = (size_t)BONSAI_MAX_VALUE + 1;
    void *p = mmap(NULL, n + 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
                   MAP_NORESERVE, -1, 0);
    cr_assert(p != MAP_FAILED, "mmap: %s", strerror(errno));
    bonsai_val v = tu_val(p, n);
    TU_RC(bonsai_put_u64(NULL, m, 1, &v, 0), BONSAI_VALSIZE);
    cr_assert_eq(count_of(NULL, m), 0);
    munmap(p, n + 4096);
    TU_OK(bonsai_close(db));
}

/* ---- big keys ----------------------------------------------------------- */

static void big_keys_test(uint32_t node_bytes)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.node_bytes = node_bytes;
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    tm_model model;
    tm_init(&model, BONSAI_KEY_BYTES);
    uint8_t key[BONSAI_MAX_KEY];
    /* 1 KiB keys that share all but their last two bytes ... */
    for (unsigned i = 0; i < 300; i++) {
        memset(key, 'p', sizeof key);
        unsigned x = (i * 7919u) % 300u;
        key[BONSAI_MAX_KEY - 2] = (uint8_t)(x >> 8);
        key[BONSAI_MAX_KEY - 1] = (uint8_t)x;
        bonsai_val k = tu_val(key, sizeof key), v = tu_val(&x, sizeof x);
        TU_OK(bonsai_put(NULL, m, &k, &v, 0));
        tm_put(&model, key, sizeof key, &x, sizeof x);
    }
    /* ... that differ in their first byte, and prefixes of each other */
    for (unsigned i = 0; i < 256; i++) {
        memset(key, 'q', sizeof key);
        key[0] = (uint8_t)(255 - i);
        size_t len = i % 3 == 0 ? BONSAI_MAX_KEY : BONSAI_MAX_KEY - i;
        bonsai_val k = tu_val(key, len), v = tu_val(key, i % 50);
        TU_OK(bonsai_put(NULL, m, &k, &v, 0));
        tm_put(&model, key, len, key, i % 50);
    }
    /* all 256 one-byte keys: memcmp order puts 0x00 first, 0xff last */
    for (unsigned i = 0; i < 256; i++) {
        uint8_t b = (uint8_t)(i * 37u);
        bonsai_val k = tu_val(&b, 1), v = tu_val(&b, 1);
        TU_OK(bonsai_put(NULL, m, &k, &v, 0));
        tm_put(&model, &b, 1, &b, 1);
    }
    TU_ASSERT_SAME(NULL, m, &model, "after inserting big keys");
    /* delete every other big key */
    for (size_t i = 0, orig = 0; i < model.n; orig++) {
        tm_entry *e = &model.e[i];
        if (e->klen > 1 && orig % 2 == 0) {
            bonsai_val k = tu_val(e->key, e->klen);
            TU_OK(bonsai_del(NULL, m, &k));
            tm_del(&model, e->key, e->klen); /* e->key now freed */
        } else {
            i++;
        }
    }
    TU_ASSERT_SAME(NULL, m, &model, "after deleting big keys");
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

Test(api, big_keys_default_nodes)
{
    big_keys_test(4096);
}

Test(api, big_keys_nodes_smaller_than_a_key)
{
    big_keys_test(512);
}

/* ---- cursors ------------------------------------------------------------ */

static void cur_expect_u64(bonsai_cursor *cur, uint64_t want, const char *ctx)
{
    uint64_t k = ~want;
    bonsai_val v = {0, NULL};
    int rc = bonsai_cursor_get_u64(cur, &k, &v);
    cr_assert(rc == 0, "%s: cursor_get_u64 -> %s", ctx, tu_err(rc));
    cr_assert(k == want, "%s: cursor at %" PRIu64 ", expected %" PRIu64, ctx,
              k, want);
    cr_assert(v.size == 8 && tu_u64_of(v.data) == ~want,
              "%s: wrong value at key %" PRIu64, ctx, want);
    /* the generic call agrees */
    bonsai_val kb = {0, NULL};
    TU_OK(bonsai_cursor_get(cur, &kb, NULL));
    cr_assert(kb.size == 8 && tu_u64_of(kb.data) == want,
              "%s: cursor_get key differs from cursor_get_u64", ctx);
}

Test(api, cursor_u64)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    /* numeric order, unlike the native little-endian bytes' memcmp order */
    uint64_t keys[] = {0, 1, 255, 256, 257, 65536, UINT64_C(1) << 40,
                       UINT64_C(1) << 63, UINT64_MAX};
    size_t nk = sizeof keys / sizeof keys[0];
    for (size_t i = nk; i-- > 0;) {
        uint64_t v = ~keys[i];
        bonsai_val val = tu_val(&v, 8);
        TU_OK(bonsai_put_u64(NULL, m, keys[i], &val, 0));
    }
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(NULL, m, &cur));
    TU_OK(bonsai_cursor_first(cur));
    for (size_t i = 0; i < nk; i++) {
        cur_expect_u64(cur, keys[i], "next walk");
        TU_RC(bonsai_cursor_next(cur), i + 1 < nk ? 0 : BONSAI_NOTFOUND);
    }
    cr_assert(bonsai_cursor_get_u64(cur, NULL, NULL) != 0,
              "a cursor past the end has no current entry");
    TU_OK(bonsai_cursor_last(cur));
    for (size_t i = nk; i-- > 0;) {
        cur_expect_u64(cur, keys[i], "prev walk");
        TU_RC(bonsai_cursor_prev(cur), i > 0 ? 0 : BONSAI_NOTFOUND);
    }
    /* seek: first key >= k */
    TU_OK(bonsai_cursor_seek_u64(cur, 0));
    cur_expect_u64(cur, 0, "seek 0");
    TU_OK(bonsai_cursor_seek_u64(cur, 2));
    cur_expect_u64(cur, 255, "seek 2");
    TU_OK(bonsai_cursor_seek_u64(cur, 256));
    cur_expect_u64(cur, 256, "seek 256");
    TU_OK(bonsai_cursor_seek_u64(cur, 258));
    cur_expect_u64(cur, 65536, "seek 258");
    TU_OK(bonsai_cursor_next(cur));
    cur_expect_u64(cur, UINT64_C(1) << 40, "seek 258, next");
    TU_OK(bonsai_cursor_prev(cur));
    TU_OK(bonsai_cursor_prev(cur));
    cur_expect_u64(cur, 257, "seek 258, next, prev, prev");
    TU_OK(bonsai_cursor_seek_u64(cur, (UINT64_C(1) << 63) + 1));
    cur_expect_u64(cur, UINT64_MAX, "seek 2^63+1");
    uint64_t k8 = 300;
    bonsai_val kv = u64val(&k8);
    TU_OK(bonsai_cursor_seek(cur, &kv));
    cur_expect_u64(cur, 65536, "seek (bytes) 300");
    /* seek past the end */
    TU_OK(bonsai_del_u64(NULL, m, UINT64_MAX));
    bonsai_cursor_close(cur);
    TU_OK(bonsai_cursor_open(NULL, m, &cur));
    TU_RC(bonsai_cursor_seek_u64(cur, UINT64_MAX), BONSAI_NOTFOUND);
    cr_assert(bonsai_cursor_get_u64(cur, NULL, NULL) != 0);
    TU_RC(bonsai_cursor_seek_u64(cur, (UINT64_C(1) << 63) + 1),
          BONSAI_NOTFOUND);
    TU_OK(bonsai_cursor_seek_u64(cur, UINT64_C(1) << 63));
    cur_expect_u64(cur, UINT64_C(1) << 63, "seek 2^63 after delete");
    TU_RC(bonsai_cursor_next(cur), BONSAI_NOTFOUND);
    /* a key of the wrong size */
    uint32_t k4 = 1;
    bonsai_val bad = tu_val(&k4, 4);
    TU_RC(bonsai_cursor_seek(cur, &bad), BONSAI_KEYSIZE);
    bonsai_cursor_close(cur);
    TU_OK(bonsai_close(db));
}

static void cur_expect_str(bonsai_cursor *cur, const char *want,
                           const char *ctx)
{
    bonsai_val k = {0, NULL}, v = {0, NULL};
    int rc = bonsai_cursor_get(cur, &k, &v);
    cr_assert(rc == 0, "%s: cursor_get -> %s", ctx, tu_err(rc));
    size_t n = strlen(want);
    cr_assert(k.size == n && memcmp(k.data, want, n) == 0,
              "%s: cursor at %s, expected \"%s\"", ctx,
              tu_fmt(BONSAI_KEY_BYTES, k.data, k.size), want);
    /* values are the key reversed */
    cr_assert(v.size == n, "%s: value size %zu", ctx, v.size);
    for (size_t i = 0; i < n; i++)
        cr_assert(((const char *)v.data)[i] == want[n - 1 - i],
                  "%s: wrong value", ctx);
    /* key only, value only */
    bonsai_val only = {0, NULL};
    TU_OK(bonsai_cursor_get(cur, &only, NULL));
    cr_assert(only.size == n);
    TU_OK(bonsai_cursor_get(cur, NULL, &only));
    cr_assert(only.size == n);
}

Test(api, cursor_bytes)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    const char *sorted[] = {"A", "B", "a", "ab", "abc", "abd", "b", "ba",
                            "bb", "z"};
    size_t nk = sizeof sorted / sizeof sorted[0];
    const char *insert_order[] = {"ba", "a", "z", "abc", "B", "ab", "bb",
                                  "b", "A", "abd"};
    for (size_t i = 0; i < nk; i++) {
        const char *s = insert_order[i];
        size_t n = strlen(s);
        char rev[8];
        for (size_t j = 0; j < n; j++)
            rev[j] = s[n - 1 - j];
        bonsai_val k = sval(s), v = tu_val(rev, n);
        TU_OK(bonsai_put(NULL, m, &k, &v, 0));
    }
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(NULL, m, &cur));
    TU_OK(bonsai_cursor_first(cur));
    for (size_t i = 0; i < nk; i++) {
        cur_expect_str(cur, sorted[i], "next walk");
        TU_RC(bonsai_cursor_next(cur), i + 1 < nk ? 0 : BONSAI_NOTFOUND);
    }
    TU_OK(bonsai_cursor_last(cur));
    for (size_t i = nk; i-- > 0;) {
        cur_expect_str(cur, sorted[i], "prev walk");
        TU_RC(bonsai_cursor_prev(cur), i > 0 ? 0 : BONSAI_NOTFOUND);
    }
    struct {
        const char *seek, *want;
    } seeks[] = {
        {"\x01", "A"}, {"A", "A"},   {"AA", "B"}, {"a", "a"},  {"aa", "ab"},
        {"abc", "abc"}, {"abcd", "abd"}, {"abz", "b"}, {"b\x01", "ba"},
        {"y", "z"},   {"z", "z"},
    };
    for (size_t i = 0; i < sizeof seeks / sizeof seeks[0]; i++) {
        bonsai_val k = sval(seeks[i].seek);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "seek \"%s\"", seeks[i].seek);
        TU_OK(bonsai_cursor_seek(cur, &k));
        cur_expect_str(cur, seeks[i].want, ctx);
    }
    bonsai_val k = sval("ab");
    TU_OK(bonsai_cursor_seek(cur, &k));
    TU_OK(bonsai_cursor_prev(cur));
    cur_expect_str(cur, "a", "seek ab, prev");
    TU_OK(bonsai_cursor_next(cur));
    TU_OK(bonsai_cursor_next(cur));
    cur_expect_str(cur, "abc", "seek ab, prev, next, next");
    /* past the end */
    const char *past[] = {"z\x00", "za", "\xff"};
    size_t pastlen[] = {2, 2, 1};
    for (size_t i = 0; i < 3; i++) {
        bonsai_val pk = tu_val(past[i], pastlen[i]);
        TU_RC(bonsai_cursor_seek(cur, &pk), BONSAI_NOTFOUND);
        cr_assert(bonsai_cursor_get(cur, NULL, NULL) != 0);
    }
    /* a cursor can start over after an end */
    TU_OK(bonsai_cursor_last(cur));
    cur_expect_str(cur, "z", "last after end");
    bonsai_val bad = tu_val("", 0);
    TU_RC(bonsai_cursor_seek(cur, &bad), BONSAI_KEYSIZE);
    bonsai_cursor_close(cur);
    TU_OK(bonsai_close(db));
}

Test(api, cursor_empty_map)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(NULL, u, &cur));
    TU_RC(bonsai_cursor_first(cur), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_last(cur), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_seek_u64(cur, 0), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_seek_u64(cur, UINT64_MAX), BONSAI_NOTFOUND);
    cr_assert(bonsai_cursor_get_u64(cur, NULL, NULL) != 0);
    bonsai_cursor_close(cur);
    TU_OK(bonsai_cursor_open(NULL, b, &cur));
    TU_RC(bonsai_cursor_first(cur), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_last(cur), BONSAI_NOTFOUND);
    bonsai_val k = sval("a");
    TU_RC(bonsai_cursor_seek(cur, &k), BONSAI_NOTFOUND);
    cr_assert(bonsai_cursor_get(cur, NULL, NULL) != 0);
    bonsai_cursor_close(cur);

    /* a map emptied by deletes behaves the same */
    for (uint64_t i = 0; i < 2000; i++)
        TU_OK(bonsai_put_u64(NULL, u, i * 3, NULL, 0));
    for (uint64_t i = 0; i < 2000; i++)
        TU_OK(bonsai_del_u64(NULL, u, i * 3));
    TU_OK(bonsai_cursor_open(NULL, u, &cur));
    TU_RC(bonsai_cursor_first(cur), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_last(cur), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_seek_u64(cur, 0), BONSAI_NOTFOUND);
    bonsai_cursor_close(cur);
    cr_assert_eq(count_of(NULL, u), 0);
    TU_OK(bonsai_close(db));
}

/* Small nodes so the writes below split and merge around the cursor. */
static void cursor_survives_writes(bonsai_txn *txn, bonsai_map m)
{
    for (uint64_t i = 0; i < 200; i++)
        TU_OK(bonsai_put_u64(txn, m, i * 10, NULL, 0));
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(txn, m, &cur));
    TU_OK(bonsai_cursor_seek_u64(cur, 500));
    /* inserts after and before the cursor's key, many, to split nodes */
    for (uint64_t i = 0; i < 200; i++) {
        TU_OK(bonsai_put_u64(txn, m, i * 10 + 5, NULL, 0));
        TU_OK(bonsai_put_u64(txn, m, i * 10 + 1, NULL, 0));
    }
    uint64_t k = 0;
    TU_OK(bonsai_cursor_get_u64(cur, &k, NULL));
    cr_assert_eq(k, 500, "cursor moved to %" PRIu64 " after inserts", k);
    TU_OK(bonsai_cursor_next(cur));
    TU_OK(bonsai_cursor_get_u64(cur, &k, NULL));
    cr_assert_eq(k, 501, "next after inserts gave %" PRIu64, k);
    TU_OK(bonsai_cursor_prev(cur));
    TU_OK(bonsai_cursor_prev(cur));
    TU_OK(bonsai_cursor_get_u64(cur, &k, NULL));
    cr_assert_eq(k, 495, "prev, prev after inserts gave %" PRIu64, k);
    /* deletes of other keys, many, to merge nodes */
    for (uint64_t i = 0; i < 200; i++) {
        if (i * 10 + 5 != 495)
            TU_OK(bonsai_del_u64(txn, m, i * 10 + 5));
        TU_OK(bonsai_del_u64(txn, m, i * 10 + 1));
    }
    TU_OK(bonsai_cursor_get_u64(cur, &k, NULL));
    cr_assert_eq(k, 495, "cursor moved to %" PRIu64 " after deletes", k);
    TU_OK(bonsai_cursor_next(cur));
    TU_OK(bonsai_cursor_get_u64(cur, &k, NULL));
    cr_assert_eq(k, 500, "next after deletes gave %" PRIu64, k);
    TU_OK(bonsai_cursor_prev(cur));
    TU_OK(bonsai_cursor_prev(cur));
    TU_OK(bonsai_cursor_get_u64(cur, &k, NULL));
    cr_assert_eq(k, 490, "prev, prev after deletes gave %" PRIu64, k);
    bonsai_cursor_close(cur);
}

Test(api, cursor_survives_writes_direct)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.node_bytes = 256;
    o.node_entries = 4;
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    cursor_survives_writes(NULL, m);
    TU_OK(bonsai_close(db));
}

Test(api, cursor_survives_writes_txn)
{
    bonsai_options o = file_opts();
    o.node_bytes = 256;
    o.node_entries = 4;
    bonsai_db *db = tu_open(tu_path("c.db"), &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    cursor_survives_writes(txn, m);
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
}

/* Where a cursor stands after a delete or put in its transaction
 * (bonsai.h, "Writes and cursors"). */
static void cursor_at_deleted_key(bonsai_txn *txn, bonsai_map m)
{
    const char *keys[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) {
        char v[2] = {keys[i][0], 0}; /* one byte: its own reverse */
        put_str(txn, m, keys[i], v);
    }
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(txn, m, &cur));
    bonsai_val b = sval("b"), out = {0, NULL};
    TU_OK(bonsai_cursor_seek(cur, &b));
    /* deleting the current key leaves the cursor in its gap: nothing to
     * get (twice), and next is the key after it */
    TU_OK(bonsai_del(txn, m, &b));
    TU_RC(bonsai_cursor_get(cur, &out, NULL), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_get(cur, &out, NULL), BONSAI_NOTFOUND);
    TU_OK(bonsai_cursor_next(cur));
    cur_expect_str(cur, "c", "delete b, then next");
    /* prev from a gap is the key before it */
    bonsai_val c = sval("c");
    TU_OK(bonsai_del(txn, m, &c));
    TU_RC(bonsai_cursor_get(cur, &out, NULL), BONSAI_NOTFOUND);
    TU_OK(bonsai_cursor_prev(cur));
    cur_expect_str(cur, "a", "delete c, then prev");
    /* puts and deletes of other keys do not move it */
    put_str(txn, m, "b", "b");
    put_str(txn, m, "0", "0");
    TU_OK(bonsai_del(txn, m, &(bonsai_val){1, "d"}));
    cur_expect_str(cur, "a", "after puts of other keys");
    /* a key deleted and put again has the cursor back on it */
    bonsai_val a = sval("a");
    TU_OK(bonsai_del(txn, m, &a));
    put_str(txn, m, "a", "a");
    cur_expect_str(cur, "a", "a deleted and put again");
    /* the last key deleted: next runs off the end, prev finds the key
     * before */
    TU_OK(bonsai_cursor_last(cur));
    cur_expect_str(cur, "b", "last");
    TU_OK(bonsai_del(txn, m, &(bonsai_val){1, "b"}));
    TU_RC(bonsai_cursor_get(cur, &out, NULL), BONSAI_NOTFOUND);
    TU_OK(bonsai_cursor_prev(cur));
    cur_expect_str(cur, "a", "delete the last, then prev");
    TU_OK(bonsai_cursor_last(cur));
    TU_OK(bonsai_del(txn, m, &a));
    TU_RC(bonsai_cursor_next(cur), BONSAI_NOTFOUND);
    bonsai_cursor_close(cur);
}

/* Delete-then-next and delete-then-prev loops over many leaves visit
 * every key once, in order, also when they get at the gap. */
static void cursor_delete_loops(bonsai_txn *txn, bonsai_map m)
{
    const uint64_t n = 500;
    for (int forward = 1; forward >= 0; forward--) {
        for (uint64_t i = 0; i < n; i++) {
            uint64_t v = ~i;
            bonsai_val val = tu_val(&v, 8);
            TU_OK(bonsai_put_u64(txn, m, i, &val, 0));
        }
        bonsai_cursor *cur;
        TU_OK(bonsai_cursor_open(txn, m, &cur));
        int rc = forward ? bonsai_cursor_first(cur) : bonsai_cursor_last(cur);
        uint64_t seen = 0;
        while (rc == 0) {
            uint64_t want = forward ? seen : n - 1 - seen;
            char ctx[64];
            snprintf(ctx, sizeof ctx, "%s loop, key %" PRIu64,
                     forward ? "delete-next" : "delete-prev", want);
            cur_expect_u64(cur, want, ctx);
            TU_OK(bonsai_del_u64(txn, m, want));
            /* a look at the gap moves nothing */
            TU_RC(bonsai_cursor_get_u64(cur, NULL, NULL), BONSAI_NOTFOUND);
            seen++;
            rc = forward ? bonsai_cursor_next(cur) : bonsai_cursor_prev(cur);
        }
        TU_RC(rc, BONSAI_NOTFOUND);
        cr_assert_eq(seen, n, "the loop visited %" PRIu64 " of %" PRIu64
                     " keys", seen, n);
        cr_assert_eq(count_of(txn, m), 0);
        bonsai_cursor_close(cur);
    }
}

Test(api, cursor_stands_in_gap_of_deleted_key_direct)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.node_bytes = 256;
    o.node_entries = 4;
    bonsai_db *db = tu_open(NULL, &o);
    cursor_at_deleted_key(NULL, tu_map_create(db, NULL, "s",
                                              BONSAI_KEY_BYTES));
    cursor_delete_loops(NULL, tu_map_create(db, NULL, "u", BONSAI_KEY_U64));
    TU_OK(bonsai_close(db));
}

Test(api, cursor_stands_in_gap_of_deleted_key_txn)
{
    bonsai_options o = file_opts();
    o.node_bytes = 256;
    o.node_entries = 4;
    bonsai_db *db = tu_open(tu_path("gap.db"), &o);
    bonsai_map s = tu_map_create(db, NULL, "s", BONSAI_KEY_BYTES);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    cursor_at_deleted_key(txn, s);
    cursor_delete_loops(txn, u);
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
}

/* ---- seek_le, ends, writes at a cursor, ranges -------------------------- */

/* The stores these cursor tests run in: no transactions with small nodes
 * (many leaves), a file with transactions, and lz4-compressed nodes. */
typedef struct cstore {
    const char *name;
    int file;
    unsigned compression;
} cstore;

static const cstore cstores[] = {
    {"anonymous", 0, BONSAI_COMPRESS_NONE},
    {"file", 1, BONSAI_COMPRESS_NONE},
    {"anonymous lz4", 0, BONSAI_COMPRESS_LZ4},
    {"file lz4", 1, BONSAI_COMPRESS_LZ4},
};

static bonsai_db *cstore_open(const cstore *s)
{
    bonsai_options o = file_opts();
    o.node_bytes = 256;
    o.node_entries = 8;
    o.compression = s->compression;
    static unsigned seq; /* a fresh file each time */
    char name[32];
    snprintf(name, sizeof name, "cur%u.db", seq++);
    return tu_open(s->file ? tu_path(name) : NULL, &o);
}

/* Keys 10, 20, .., 10 * n with value ~key, in one write (txn) of a
 * fresh store. */
static bonsai_map tens(bonsai_db *db, uint64_t n)
{
    bonsai_map m = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_txn *txn = NULL;
    int cow = bonsai_txn_begin(db, 0, &txn) == 0;
    for (uint64_t i = 1; i <= n; i++) {
        uint64_t v = ~(i * 10);
        bonsai_val val = tu_val(&v, 8);
        TU_OK(bonsai_put_u64(cow ? txn : NULL, m, i * 10, &val, 0));
    }
    if (cow)
        TU_OK(bonsai_txn_commit(txn));
    return m;
}

/* rc and the cursor's key: want, or NOTFOUND for want == 0. */
static void cur_is(bonsai_cursor *cur, int rc, uint64_t want, const char *ctx)
{
    if (want == 0) {
        cr_assert(rc == BONSAI_NOTFOUND, "%s -> %s, expected NOTFOUND", ctx,
                  tu_err(rc));
        TU_RC(bonsai_cursor_get_u64(cur, NULL, NULL), BONSAI_NOTFOUND);
        return;
    }
    cr_assert(rc == 0, "%s -> %s, expected %" PRIu64, ctx, tu_err(rc), want);
    cur_expect_u64(cur, want, ctx);
    uint64_t k = 0;
    bonsai_val v = {0, NULL};
    TU_OK(bonsai_cursor_get_u64(cur, &k, &v));
    cr_assert(v.size == 8 && tu_u64_of(v.data) == ~want,
              "%s: the value of %" PRIu64, ctx, want);
}

Test(api, cursor_seek_le_lands_on_the_last_key_at_or_below)
{
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        bonsai_db *db = cstore_open(&cstores[si]);
        const uint64_t n = 300;
        bonsai_map m = tens(db, n);
        bonsai_cursor *cur;
        TU_OK(bonsai_cursor_open(NULL, m, &cur));
        for (uint64_t k = 0; k <= n * 10 + 20; k++) {
            uint64_t want = k < 10 ? 0 : k / 10 > n ? n * 10 : k / 10 * 10;
            char ctx[96];
            snprintf(ctx, sizeof ctx, "%s: seek_le %" PRIu64,
                     cstores[si].name, k);
            if (k & 1) {
                cur_is(cur, bonsai_cursor_seek_le_u64(cur, k), want, ctx);
            } else {
                bonsai_val kv = u64val(&k);
                cur_is(cur, bonsai_cursor_seek_le(cur, &kv), want, ctx);
            }
            if (want && want < n * 10) /* and on from there */
                cur_is(cur, bonsai_cursor_next(cur), want + 10, ctx);
        }
        cur_is(cur, bonsai_cursor_seek_le_u64(cur, UINT64_MAX), n * 10,
               "seek_le max");
        uint32_t k4 = 1;
        bonsai_val bad = tu_val(&k4, 4);
        TU_RC(bonsai_cursor_seek_le(cur, &bad), BONSAI_KEYSIZE);
        TU_RC(bonsai_cursor_seek_le(cur, NULL), BONSAI_INVALID);
        TU_RC(bonsai_cursor_seek_le_u64(NULL, 1), BONSAI_INVALID);
        bonsai_cursor_close(cur);
        TU_OK(bonsai_close(db));
    }
    /* byte keys: memcmp order, keys that are prefixes of others */
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    const char *keys[] = {"b", "ba", "bb", "c"};
    for (size_t i = 0; i < 4; i++) {
        char rev[2] = {keys[i][1] ? keys[i][1] : keys[i][0], keys[i][0]};
        bonsai_val k = sval(keys[i]), v = tu_val(rev, strlen(keys[i]));
        TU_OK(bonsai_put(NULL, b, &k, &v, 0));
    }
    struct {
        const char *seek, *want;
    } le[] = {{"a", NULL},  {"b", "b"},   {"b\x01", "b"}, {"ba", "ba"},
              {"baa", "ba"}, {"bz", "bb"}, {"c", "c"},     {"\xff", "c"}};
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(NULL, b, &cur));
    TU_RC(bonsai_cursor_seek_le_u64(cur, 1), BONSAI_MAPKIND);
    for (size_t i = 0; i < sizeof le / sizeof le[0]; i++) {
        bonsai_val k = sval(le[i].seek);
        int rc = bonsai_cursor_seek_le(cur, &k);
        if (!le[i].want) {
            TU_RC(rc, BONSAI_NOTFOUND);
            continue;
        }
        TU_OK(rc);
        cur_expect_str(cur, le[i].want, le[i].seek);
    }
    bonsai_cursor_close(cur);
    TU_OK(bonsai_close(db));
}

/* A cursor beyond an end comes back with a move the other way. */
static void moves_back(bonsai_cursor *cur, uint64_t lo, uint64_t hi,
                       const char *name)
{
    char ctx[96];
    snprintf(ctx, sizeof ctx, "%s: next past the end", name);
    cur_is(cur, bonsai_cursor_last(cur), hi, ctx);
    cur_is(cur, bonsai_cursor_next(cur), 0, ctx);
    cur_is(cur, bonsai_cursor_next(cur), 0, ctx);
    cur_is(cur, bonsai_cursor_prev(cur), hi, ctx);
    cur_is(cur, bonsai_cursor_prev(cur), hi - 10, ctx);
    snprintf(ctx, sizeof ctx, "%s: prev before the start", name);
    cur_is(cur, bonsai_cursor_first(cur), lo, ctx);
    cur_is(cur, bonsai_cursor_prev(cur), 0, ctx);
    cur_is(cur, bonsai_cursor_prev(cur), 0, ctx);
    cur_is(cur, bonsai_cursor_next(cur), lo, ctx);
    cur_is(cur, bonsai_cursor_next(cur), lo + 10, ctx);
    snprintf(ctx, sizeof ctx, "%s: seek past the end", name);
    cur_is(cur, bonsai_cursor_seek_u64(cur, hi + 1), 0, ctx);
    cur_is(cur, bonsai_cursor_prev(cur), hi, ctx);
    snprintf(ctx, sizeof ctx, "%s: seek_le before the start", name);
    cur_is(cur, bonsai_cursor_seek_le_u64(cur, lo - 1), 0, ctx);
    cur_is(cur, bonsai_cursor_next(cur), lo, ctx);
    /* a walk to an end and back over the whole map */
    snprintf(ctx, sizeof ctx, "%s: walk back from the end", name);
    cur_is(cur, bonsai_cursor_seek_u64(cur, lo), lo, ctx);
    int rc;
    while ((rc = bonsai_cursor_next(cur)) == 0)
        ;
    TU_RC(rc, BONSAI_NOTFOUND);
    for (uint64_t k = hi; k >= lo; k -= 10)
        cur_is(cur, bonsai_cursor_prev(cur), k, ctx);
    cur_is(cur, bonsai_cursor_prev(cur), 0, ctx);
    cur_is(cur, bonsai_cursor_next(cur), lo, ctx);
}

Test(api, cursor_moves_back_from_either_end)
{
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        bonsai_db *db = cstore_open(&cstores[si]);
        bonsai_map m = tens(db, 200);
        bonsai_cursor *cur;
        TU_OK(bonsai_cursor_open(NULL, m, &cur));
        moves_back(cur, 10, 2000, cstores[si].name);
        /* and within a range */
        TU_OK(bonsai_cursor_set_range_u64(cur, 500, 1001, 0));
        moves_back(cur, 500, 1000, cstores[si].name);
        bonsai_cursor_close(cur);
        /* an empty map: nothing either way */
        bonsai_map e = tu_map_create(db, NULL, "e", BONSAI_KEY_U64);
        TU_OK(bonsai_cursor_open(NULL, e, &cur));
        cur_is(cur, bonsai_cursor_first(cur), 0, "empty: first");
        cur_is(cur, bonsai_cursor_prev(cur), 0, "empty: prev");
        cur_is(cur, bonsai_cursor_next(cur), 0, "empty: next");
        cur_is(cur, bonsai_cursor_prev(cur), 0, "empty: prev again");
        bonsai_cursor_close(cur);
        TU_OK(bonsai_close(db));
    }
}

/* A cursor past the end of a map sees a key put beyond it on prev (no
 * transactions: every write at once). */
Test(api, cursor_past_the_end_finds_a_key_put_after)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tens(db, 3);
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(NULL, m, &cur));
    cur_is(cur, bonsai_cursor_last(cur), 30, "last");
    cur_is(cur, bonsai_cursor_next(cur), 0, "next past the end");
    uint64_t v = ~UINT64_C(40);
    bonsai_val val = tu_val(&v, 8);
    TU_OK(bonsai_put_u64(NULL, m, 40, &val, 0));
    cur_is(cur, bonsai_cursor_prev(cur), 40, "prev to a new last key");
    bonsai_cursor_close(cur);
    TU_OK(bonsai_close(db));
}

/* Deletes every third key and overwrites the others through a cursor
 * walking forward (dir > 0) or backward, in txn (NULL: no transactions). */
static void writes_at_cursor(bonsai_txn *txn, bonsai_map m, uint64_t n,
                             int dir, const char *name)
{
    bonsai_cursor *cur;
    TU_OK(bonsai_cursor_open(txn, m, &cur));
    /* no current key: not positioned yet */
    uint64_t nv = 1;
    bonsai_val val = tu_val(&nv, 8);
    TU_RC(bonsai_cursor_del(cur), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_put(cur, &val, 0), BONSAI_NOTFOUND);
    int rc = dir > 0 ? bonsai_cursor_first(cur) : bonsai_cursor_last(cur);
    uint64_t seen = 0;
    char ctx[96];
    while (rc == 0) {
        uint64_t k = dir > 0 ? (seen + 1) * 10 : (n - seen) * 10;
        snprintf(ctx, sizeof ctx, "%s: %s at %" PRIu64, name,
                 dir > 0 ? "forward" : "backward", k);
        cur_is(cur, 0, k, ctx);
        if (k % 30 == 0) {
            TU_OK(bonsai_cursor_del(cur));
            /* in the gap: nothing to get, delete or put */
            TU_RC(bonsai_cursor_get_u64(cur, NULL, NULL), BONSAI_NOTFOUND);
            TU_RC(bonsai_cursor_del(cur), BONSAI_NOTFOUND);
            TU_RC(bonsai_cursor_put(cur, &val, 0), BONSAI_NOTFOUND);
        } else {
            nv = k + 1;
            TU_OK(bonsai_cursor_put(cur, &val, 0));
            TU_RC(bonsai_cursor_put(cur, &val, BONSAI_NOOVERWRITE),
                  BONSAI_EXISTS);
            /* still on its key, which reads the new value */
            uint64_t got = 0;
            bonsai_val v = {0, NULL};
            TU_OK(bonsai_cursor_get_u64(cur, &got, &v));
            cr_assert(got == k && v.size == 8 && tu_u64_of(v.data) == k + 1,
                      "%s: after cursor_put", ctx);
        }
        seen++;
        rc = dir > 0 ? bonsai_cursor_next(cur) : bonsai_cursor_prev(cur);
    }
    TU_RC(rc, BONSAI_NOTFOUND);
    cr_assert_eq(seen, n, "%s: the walk saw %" PRIu64 " keys", name, seen);
    /* beyond the end: no current key */
    TU_RC(bonsai_cursor_del(cur), BONSAI_NOTFOUND);
    TU_RC(bonsai_cursor_put(cur, &val, 0), BONSAI_NOTFOUND);
    bonsai_cursor_close(cur);
    cr_assert_eq(count_of(txn, m), n - n / 3);
    for (uint64_t i = 1; i <= n; i++) {
        bonsai_val v = {0, NULL};
        int grc = bonsai_get_u64(txn, m, i * 10, &v);
        if (i % 3 == 0) {
            TU_RC(grc, BONSAI_NOTFOUND);
            continue;
        }
        TU_OK(grc);
        cr_assert(v.size == 8 && tu_u64_of(v.data) == i * 10 + 1,
                  "%s: the value of %" PRIu64, name, i * 10);
    }
}

Test(api, cursor_del_and_put_write_at_the_cursor)
{
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        for (int dir = 1; dir >= -1; dir -= 2) {
            const cstore *s = &cstores[si];
            bonsai_db *db = cstore_open(s);
            const uint64_t n = 300;
            bonsai_map m = tens(db, n);
            bonsai_txn *txn = NULL;
            if (s->file)
                TU_OK(bonsai_txn_begin(db, 0, &txn));
            writes_at_cursor(txn, m, n, dir, s->name);
            if (txn)
                TU_OK(bonsai_txn_commit(txn));
            TU_OK(bonsai_close(db));
        }
    }
}

/* A cursor that reads a snapshot cannot write: READONLY, nothing
 * changed. */
Test(api, cursor_writes_in_a_read_snapshot_are_readonly)
{
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        const cstore *s = &cstores[si];
        if (!s->file)
            continue;
        bonsai_db *db = cstore_open(s);
        bonsai_map m = tens(db, 50);
        bonsai_txn *rd;
        TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &rd));
        bonsai_cursor *cur, *own;
        TU_OK(bonsai_cursor_open(rd, m, &cur));
        TU_OK(bonsai_cursor_open(NULL, m, &own)); /* a snapshot of its own */
        uint64_t nv = 1;
        bonsai_val val = tu_val(&nv, 8);
        bonsai_cursor *both[] = {cur, own};
        for (int i = 0; i < 2; i++) {
            TU_RC(bonsai_cursor_del(both[i]), BONSAI_READONLY);
            TU_OK(bonsai_cursor_seek_u64(both[i], 250));
            TU_RC(bonsai_cursor_del(both[i]), BONSAI_READONLY);
            TU_RC(bonsai_cursor_put(both[i], &val, 0), BONSAI_READONLY);
            cur_is(both[i], 0, 250, s->name);
        }
        bonsai_cursor_close(own);
        bonsai_cursor_close(cur);
        bonsai_txn_abort(rd);
        cr_assert_eq(count_of(NULL, m), 50);
        /* a cursor whose txn ended */
        bonsai_txn *w;
        TU_OK(bonsai_txn_begin(db, 0, &w));
        TU_OK(bonsai_cursor_open(w, m, &cur));
        TU_OK(bonsai_cursor_first(cur));
        bonsai_txn_abort(w);
        TU_RC(bonsai_cursor_del(cur), BONSAI_BADTXN);
        TU_RC(bonsai_cursor_put(cur, &val, 0), BONSAI_BADTXN);
        bonsai_cursor_close(cur);
        TU_OK(bonsai_close(db));
    }
    TU_RC(bonsai_cursor_del(NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_put(NULL, NULL, 0), BONSAI_INVALID);
}

/* The walk of a range forward and back against the keys 10..10n. */
static void walk_range(bonsai_cursor *cur, uint64_t n, uint64_t lo,
                       uint64_t hi, int open_hi, const char *name)
{
    uint64_t first = lo <= 10 ? 10 : (lo + 9) / 10 * 10;
    uint64_t last = open_hi || hi > n * 10 ? n * 10 : (hi - 1) / 10 * 10;
    int empty = first > last || (!open_hi && hi <= lo);
    char ctx[128];
    snprintf(ctx, sizeof ctx, "%s: range [%" PRIu64 ", %" PRIu64 "%s)", name,
             lo, hi, open_hi ? " open" : "");
    int rc = bonsai_cursor_next(cur); /* unpositioned: the first */
    for (uint64_t k = first; !empty && k <= last; k += 10) {
        cur_is(cur, rc, k, ctx);
        rc = bonsai_cursor_next(cur);
    }
    cur_is(cur, rc, 0, ctx);
    rc = bonsai_cursor_last(cur);
    for (uint64_t k = last; !empty && k >= first; k -= 10) {
        cur_is(cur, rc, k, ctx);
        rc = bonsai_cursor_prev(cur);
    }
    cur_is(cur, rc, 0, ctx);
    /* seeks land within it */
    cur_is(cur, bonsai_cursor_seek_u64(cur, 0), empty ? 0 : first, ctx);
    cur_is(cur, bonsai_cursor_seek_le_u64(cur, UINT64_MAX), empty ? 0 : last,
           ctx);
    if (!empty) {
        cur_is(cur, bonsai_cursor_seek_u64(cur, last + 1), 0, ctx);
        cur_is(cur, bonsai_cursor_seek_le_u64(cur, first - 1), 0, ctx);
        cur_is(cur, bonsai_cursor_seek_u64(cur, first + 1),
               first + 10 <= last ? first + 10 : 0, ctx);
    }
}

Test(api, cursor_ranges_bound_every_move)
{
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        bonsai_db *db = cstore_open(&cstores[si]);
        const uint64_t n = 200;
        bonsai_map m = tens(db, n);
        bonsai_cursor *cur;
        TU_OK(bonsai_cursor_open(NULL, m, &cur));
        const uint64_t r[][2] = {{0, 0},     {0, 10},    {0, 11},
                                 {10, 20},   {15, 16},   {15, 31},
                                 {500, 1000}, {500, 1001}, {1000, 500},
                                 {1990, 2000}, {1995, UINT64_MAX},
                                 {2000, 2001}, {2001, UINT64_MAX}};
        for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
            for (int open = 0; open < 2; open++) {
                TU_OK(bonsai_cursor_set_range_u64(
                    cur, r[i][0], r[i][1], open ? BONSAI_RANGE_NO_HI : 0));
                walk_range(cur, n, r[i][0], r[i][1], open, cstores[si].name);
                /* the same range by bonsai_val keys */
                bonsai_val lo = u64val(&r[i][0]), hi = u64val(&r[i][1]);
                TU_OK(bonsai_cursor_set_range(cur, &lo, open ? NULL : &hi));
                walk_range(cur, n, r[i][0], r[i][1], open, cstores[si].name);
            }
        }
        /* no range again */
        TU_OK(bonsai_cursor_set_range(cur, NULL, NULL));
        walk_range(cur, n, 0, 0, 1, "no range");
        TU_OK(bonsai_cursor_set_range_u64(cur, 20, 40, 0));
        TU_OK(bonsai_cursor_set_range_u64(cur, 0, 0, BONSAI_RANGE_NO_HI));
        walk_range(cur, n, 0, 0, 1, "no range (u64)");
        TU_RC(bonsai_cursor_set_range_u64(cur, 0, 0, 2), BONSAI_INVALID);
        uint32_t k4 = 1;
        bonsai_val bad = tu_val(&k4, 4);
        TU_RC(bonsai_cursor_set_range(cur, &bad, NULL), BONSAI_KEYSIZE);
        TU_RC(bonsai_cursor_set_range(cur, NULL, &bad), BONSAI_KEYSIZE);
        TU_RC(bonsai_cursor_set_prefix(cur, &bad), BONSAI_MAPKIND);
        TU_RC(bonsai_cursor_set_range_u64(NULL, 0, 0, 0), BONSAI_INVALID);
        bonsai_cursor_close(cur);
        TU_OK(bonsai_close(db));
    }
}

/* Collects the keys a cursor walks (next from unpositioned) as one
 * string, "k1,k2,...". */
static void walk_str(bonsai_cursor *cur, char *out, size_t cap, int forward)
{
    out[0] = 0;
    int rc;
    while ((rc = forward ? bonsai_cursor_next(cur)
                         : bonsai_cursor_prev(cur)) == 0) {
        bonsai_val k = {0, NULL};
        TU_OK(bonsai_cursor_get(cur, &k, NULL));
        size_t len = strlen(out);
        cr_assert(len + k.size + 2 < cap);
        memcpy(out + len, k.data, k.size);
        out[len + k.size] = ',';
        out[len + k.size + 1] = 0;
    }
    TU_RC(rc, BONSAI_NOTFOUND);
}

Test(api, cursor_byte_ranges_and_prefixes)
{
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        bonsai_db *db = cstore_open(&cstores[si]);
        bonsai_map m = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
        const char *keys[] = {"a", "ab", "ab\xff", "ab\xff\xff", "ac", "b",
                              "\xff", "\xff\xff", "\xff\xff\x01"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            put_str(NULL, m, keys[i], "v");
        bonsai_cursor *cur;
        TU_OK(bonsai_cursor_open(NULL, m, &cur));
        char got[256];
        struct {
            const char *prefix, *want;
        } pf[] = {
            {"a", "a,ab,ab\xff,ab\xff\xff,ac,"},
            {"ab", "ab,ab\xff,ab\xff\xff,"},
            {"ab\xff", "ab\xff,ab\xff\xff,"},
            {"ab\xff\xff", "ab\xff\xff,"},
            {"ac", "ac,"},
            {"aa", ""},
            {"\xff", "\xff,\xff\xff,\xff\xff\x01,"},
            {"\xff\xff", "\xff\xff,\xff\xff\x01,"},
            {"c", ""},
        };
        for (size_t i = 0; i < sizeof pf / sizeof pf[0]; i++) {
            bonsai_val p = sval(pf[i].prefix);
            TU_OK(bonsai_cursor_set_prefix(cur, &p));
            walk_str(cur, got, sizeof got, 1);
            cr_assert_str_eq(got, pf[i].want, "%s: prefix %s",
                             cstores[si].name,
                             tu_fmt(BONSAI_KEY_BYTES, p.data, p.size));
            /* backward: the same keys */
            TU_OK(bonsai_cursor_set_prefix(cur, &p));
            char back[256];
            walk_str(cur, back, sizeof back, 0);
            cr_assert_eq(strlen(back), strlen(got));
        }
        /* explicit ranges, open at either end */
        bonsai_val ab = sval("ab"), b = sval("b");
        TU_OK(bonsai_cursor_set_range(cur, &ab, &b));
        walk_str(cur, got, sizeof got, 1);
        cr_assert_str_eq(got, "ab,ab\xff,ab\xff\xff,ac,");
        TU_OK(bonsai_cursor_set_range(cur, NULL, &ab));
        walk_str(cur, got, sizeof got, 1);
        cr_assert_str_eq(got, "a,");
        TU_OK(bonsai_cursor_set_range(cur, &b, NULL));
        walk_str(cur, got, sizeof got, 1);
        cr_assert_str_eq(got, "b,\xff,\xff\xff,\xff\xff\x01,");
        TU_RC(bonsai_cursor_seek_le(cur, &ab), BONSAI_NOTFOUND); /* below */
        TU_RC(bonsai_cursor_get(cur, NULL, NULL), BONSAI_NOTFOUND);
        bonsai_val empty = tu_val("", 0);
        TU_RC(bonsai_cursor_set_prefix(cur, &empty), BONSAI_KEYSIZE);
        TU_RC(bonsai_cursor_set_prefix(cur, NULL), BONSAI_INVALID);
        TU_RC(bonsai_cursor_set_range(cur, &empty, NULL), BONSAI_KEYSIZE);
        TU_RC(bonsai_cursor_set_range_u64(cur, 0, 1, 0), BONSAI_MAPKIND);
        bonsai_cursor_close(cur);
        TU_OK(bonsai_close(db));
    }
}

/* ---- transactions ------------------------------------------------------- */

Test(api, txn_commit_and_abort)
{
    const char *path = tu_path("t.db");
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(path, &o);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    bonsai_map m = tu_map_create(db, t, "m", BONSAI_KEY_BYTES);
    put_str(t, m, "a", "1");
    put_str(t, m, "b", "2");
    expect_str(t, m, "a", "1"); /* a txn sees its own writes */
    cr_assert_eq(count_of(t, m), 2);
    TU_OK(bonsai_txn_commit(t));

    /* an aborted txn: puts, overwrites, deletes, a new map, a drop */
    TU_OK(bonsai_txn_begin(db, 0, &t));
    put_str(t, m, "c", "3");
    put_str(t, m, "a", "changed");
    bonsai_val kb = sval("b");
    TU_OK(bonsai_del(t, m, &kb));
    bonsai_map x = tu_map_create(db, t, "x", BONSAI_KEY_U64);
    TU_OK(bonsai_put_u64(t, x, 1, NULL, 0));
    expect_str(t, m, "a", "changed");
    expect_absent(t, m, "b");
    cr_assert_eq(count_of(t, m), 2);
    bonsai_txn_abort(t);

    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    expect_str(t, m, "a", "1");
    expect_str(t, m, "b", "2");
    expect_absent(t, m, "c");
    cr_assert_eq(count_of(t, m), 2);
    bonsai_map xx;
    TU_RC(bonsai_map_open(db, t, "x", &xx, NULL), BONSAI_NOTFOUND);
    bonsai_txn_abort(t);

    /* an aborted drop */
    TU_OK(bonsai_txn_begin(db, 0, &t));
    TU_OK(bonsai_map_drop(db, t, "m"));
    TU_RC(bonsai_map_open(db, t, "m", &xx, NULL), BONSAI_NOTFOUND);
    bonsai_txn_abort(t);

    /* a committed txn with the same kind of changes */
    TU_OK(bonsai_txn_begin(db, 0, &t));
    m = tu_map_open(db, t, "m", BONSAI_KEY_BYTES);
    put_str(t, m, "c", "3");
    put_str(t, m, "a", "changed");
    TU_OK(bonsai_del(t, m, &kb));
    x = tu_map_create(db, t, "x", BONSAI_KEY_U64);
    TU_OK(bonsai_put_u64(t, x, 1, NULL, 0));
    TU_OK(bonsai_txn_commit(t));
    TU_OK(bonsai_close(db));

    db = tu_open(path, &o);
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    m = tu_map_open(db, t, "m", BONSAI_KEY_BYTES);
    expect_str(t, m, "a", "changed");
    expect_absent(t, m, "b");
    expect_str(t, m, "c", "3");
    cr_assert_eq(count_of(t, m), 2);
    x = tu_map_open(db, t, "x", BONSAI_KEY_U64);
    TU_OK(bonsai_get_u64(t, x, 1, &(bonsai_val){0, NULL}));
    bonsai_txn_abort(t);

    /* an open write txn is aborted by close */
    TU_OK(bonsai_txn_begin(db, 0, &t));
    put_str(t, m, "lost", "yes");
    TU_OK(bonsai_close(db));
    db = tu_open(path, &o);
    m = tu_map_open(db, NULL, "m", BONSAI_KEY_BYTES);
    expect_absent(NULL, m, "lost");
    cr_assert_eq(count_of(NULL, m), 2);
    TU_OK(bonsai_close(db));
}

Test(api, txn_rules)
{
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(tu_path("r.db"), &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    uint64_t last = st.txn_id;

    bonsai_txn *w, *w2 = NULL, *r;
    TU_OK(bonsai_txn_begin(db, 0, &w));
    cr_assert(bonsai_txn_id(w) > last, "write txn id %" PRIu64
              " not after last commit %" PRIu64, bonsai_txn_id(w), last);
    /* one writer at a time */
    TU_RC(bonsai_txn_begin(db, 0, &w2), BONSAI_BUSY);
    /* readers may start meanwhile and see the last commit */
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
    cr_assert_eq(bonsai_txn_id(r), last);
    TU_OK(bonsai_put_u64(w, m, 1, NULL, 0));
    bonsai_val out;
    TU_RC(bonsai_get_u64(r, m, 1, &out), BONSAI_NOTFOUND);
    cr_assert_eq(count_of(r, m), 0, "a reader saw an uncommitted put");
    uint64_t wid = bonsai_txn_id(w);
    TU_OK(bonsai_txn_commit(w));
    TU_RC(bonsai_get_u64(r, m, 1, &out), BONSAI_NOTFOUND);
    cr_assert_eq(count_of(r, m), 0, "a reader saw a later commit");
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert_eq(st.txn_id, wid, "stat txn_id after commit");
    cr_assert_eq(bonsai_txn_id(r), last, "a reader's snapshot id moved");

    /* a read txn refuses writes */
    TU_RC(bonsai_put_u64(r, m, 2, NULL, 0), BONSAI_READONLY);
    TU_RC(bonsai_del_u64(r, m, 1), BONSAI_READONLY);
    bonsai_map m2;
    TU_RC(bonsai_map_create(db, r, "m2", BONSAI_KEY_U64, &m2), BONSAI_READONLY);
    TU_RC(bonsai_map_drop(db, r, "m"), BONSAI_READONLY);
    TU_OK(bonsai_txn_commit(r)); /* a read txn just ends */

    /* an abort does not move the committed id */
    TU_OK(bonsai_txn_begin(db, 0, &w));
    TU_OK(bonsai_put_u64(w, m, 3, NULL, 0));
    bonsai_txn_abort(w);
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert_eq(st.txn_id, wid, "an abort changed txn_id");
    bonsai_txn_abort(NULL);

    /* the writer slot is free again after commit and abort */
    TU_OK(bonsai_txn_begin(db, 0, &w));
    bonsai_txn_abort(w);
    TU_OK(bonsai_close(db));
}

Test(api, autocommit)
{
    const char *path = tu_path("auto.db");
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    uint64_t before = st.txn_id;
    put_str(NULL, m, "k", "v");
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert(st.txn_id > before, "an autocommit put did not commit");
    /* a read snapshot begun after sees it */
    bonsai_txn *r;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
    expect_str(r, m, "k", "v");
    bonsai_txn_abort(r);
    /* explicit and autocommit transactions mix */
    bonsai_txn *w;
    TU_OK(bonsai_txn_begin(db, 0, &w));
    put_str(w, m, "w", "1");
    TU_OK(bonsai_txn_commit(w));
    bonsai_val k = sval("k");
    TU_OK(bonsai_del(NULL, m, &k));
    TU_OK(bonsai_close(db));
    db = tu_open(path, &o);
    m = tu_map_open(db, NULL, "m", BONSAI_KEY_BYTES);
    expect_absent(NULL, m, "k");
    expect_str(NULL, m, "w", "1");
    TU_OK(bonsai_close(db));
}

Test(api, no_transaction_file)
{
    const char *path = tu_path("direct.db");
    bonsai_options o = file_opts();
    o.transactions = 0;
    bonsai_db *db = tu_open(path, &o);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert_eq(st.transactions, 0);
    cr_assert_eq(st.anonymous, 0);
    bonsai_txn *t;
    TU_RC(bonsai_txn_begin(db, 0, &t), BONSAI_NOTSUP);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    for (uint64_t i = 0; i < 3000; i++)
        TU_OK(bonsai_put_u64(NULL, m, i, NULL, 0));
    TU_OK(bonsai_sync(db));
    for (uint64_t i = 0; i < 3000; i += 2)
        TU_OK(bonsai_del_u64(NULL, m, i));
    TU_OK(bonsai_close(db)); /* writes everything back */
    db = tu_open(path, &o);
    m = tu_map_open(db, NULL, "m", BONSAI_KEY_U64);
    cr_assert_eq(count_of(NULL, m), 1500);
    bonsai_val out;
    TU_RC(bonsai_get_u64(NULL, m, 0, &out), BONSAI_NOTFOUND);
    TU_OK(bonsai_get_u64(NULL, m, 2999, &out));
    TU_OK(bonsai_close(db));
    /* and the file opens in transaction mode too */
    db = tu_open(path, NULL);
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    m = tu_map_open(db, t, "m", BONSAI_KEY_U64);
    cr_assert_eq(count_of(t, m), 1500);
    bonsai_txn_abort(t);
    TU_OK(bonsai_close(db));
}

/* ---- read-only stores --------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "fopen %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
    cr_assert(p != NULL);
    cr_assert(fread(p, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

Test(api, read_only_open_rejects_writes)
{
    const char *path = tu_path("ro.db");
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    for (uint64_t i = 0; i < 10; i++)
        TU_OK(bonsai_put_u64(NULL, u, i, NULL, 0));
    put_str(NULL, b, "k", "v");
    TU_OK(bonsai_close(db));
    size_t n0;
    uint8_t *before = slurp(path, &n0);

    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    db = tu_open(path, &o);
    u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    b = tu_map_open(db, NULL, "b", BONSAI_KEY_BYTES);
    cr_assert_eq(count_of(NULL, u), 10);
    expect_str(NULL, b, "k", "v");
    bonsai_val k = sval("k"), v = sval("w");
    TU_RC(bonsai_put(NULL, b, &k, &v, 0), BONSAI_READONLY);
    TU_RC(bonsai_put(NULL, b, &v, &v, BONSAI_NOOVERWRITE), BONSAI_READONLY);
    TU_RC(bonsai_del(NULL, b, &k), BONSAI_READONLY);
    TU_RC(bonsai_put_u64(NULL, u, 100, NULL, 0), BONSAI_READONLY);
    TU_RC(bonsai_del_u64(NULL, u, 1), BONSAI_READONLY);
    bonsai_map m;
    TU_RC(bonsai_map_create(db, NULL, "new", BONSAI_KEY_U64, &m),
          BONSAI_READONLY);
    TU_RC(bonsai_map_drop(db, NULL, "u"), BONSAI_READONLY);
    bonsai_txn *t;
    TU_RC(bonsai_txn_begin(db, 0, &t), BONSAI_READONLY);
    /* reading works, in a snapshot too */
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    expect_str(t, b, "k", "v");
    tm_model model;
    tm_init(&model, BONSAI_KEY_U64);
    char why[256];
    TU_OK(tu_walk(t, u, &model, why, sizeof why));
    cr_assert_eq(model.n, 10, "%s", why);
    tm_free(&model);
    bonsai_txn_abort(t);
    TU_OK(bonsai_close(db));

    /* nothing was written */
    size_t n1;
    uint8_t *after = slurp(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "a read-only open changed the file");
    free(before);
    free(after);
    db = tu_open(path, NULL);
    u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    cr_assert_eq(count_of(NULL, u), 10);
    TU_OK(bonsai_close(db));
}

Test(api, unwritable_file_needs_read_only)
{
    if (geteuid() == 0) {
        tu_teardown(); /* a skipped test does not reach .fini */
        cr_skip_test("root can write any file");
    }
    const char *path = tu_path("perm.db");
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    TU_OK(bonsai_put_u64(NULL, m, 1, NULL, 0));
    TU_OK(bonsai_close(db));
    cr_assert(chmod(path, 0444) == 0);
    TU_RC(bonsai_open(path, NULL, &db), BONSAI_READONLY);
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    db = tu_open(path, &o);
    m = tu_map_open(db, NULL, "m", BONSAI_KEY_U64);
    cr_assert_eq(count_of(NULL, m), 1);
    TU_OK(bonsai_close(db));
}

/* ---- snapshots (one thread) --------------------------------------------- */

Test(api, snapshot_stable_while_writer_commits)
{
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(tu_path("snap.db"), &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tm_model old;
    tm_init(&old, BONSAI_KEY_U64);
    bonsai_txn *w, *r, *r2;
    TU_OK(bonsai_txn_begin(db, 0, &w));
    for (uint64_t i = 0; i < 500; i++) {
        uint64_t v = i * 3;
        bonsai_val val = tu_val(&v, 8);
        TU_OK(bonsai_put_u64(w, m, i, &val, 0));
        tm_put(&old, &i, 8, &v, 8);
    }
    TU_OK(bonsai_txn_commit(w));

    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
    TU_ASSERT_SAME(r, m, &old, "snapshot before the write");

    /* a write txn changes a lot and commits */
    tm_model cur;
    tm_init(&cur, BONSAI_KEY_U64);
    tm_copy(&cur, &old);
    TU_OK(bonsai_txn_begin(db, 0, &w));
    for (uint64_t i = 0; i < 500; i += 2) {
        TU_OK(bonsai_del_u64(w, m, i));
        tm_del(&cur, &i, 8);
    }
    for (uint64_t i = 1000; i < 1300; i++) {
        TU_OK(bonsai_put_u64(w, m, i, NULL, 0));
        tm_put(&cur, &i, 8, NULL, 0);
    }
    for (uint64_t i = 1; i < 500; i += 4) {
        bonsai_val val = sval("new");
        TU_OK(bonsai_put_u64(w, m, i, &val, 0));
        tm_put(&cur, &i, 8, "new", 3);
    }
    /* the reader does not see uncommitted changes ... */
    TU_ASSERT_SAME(r, m, &old, "snapshot while a writer works");
    TU_OK(bonsai_txn_commit(w));
    /* ... nor committed ones */
    TU_ASSERT_SAME(r, m, &old, "snapshot after the writer committed");
    bonsai_val out;
    TU_RC(bonsai_get_u64(r, m, 1000, &out), BONSAI_NOTFOUND);
    TU_OK(bonsai_get_u64(r, m, 0, &out));
    /* an autocommit write is a commit too */
    TU_OK(bonsai_put_u64(NULL, m, 5000, NULL, 0));
    tm_put(&cur, &(uint64_t){5000}, 8, NULL, 0);
    TU_ASSERT_SAME(r, m, &old, "snapshot after an autocommit");

    /* a new snapshot sees everything */
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r2));
    TU_ASSERT_SAME(r2, m, &cur, "new snapshot");
    cr_assert(bonsai_txn_id(r2) > bonsai_txn_id(r));
    bonsai_txn_abort(r);
    bonsai_txn_abort(r2);
    tm_free(&old);
    tm_free(&cur);
    TU_OK(bonsai_close(db));
}

/* ---- batched gets ------------------------------------------------------- */

/* Asserts that answer i of a batch (found, val) is what the model holds
 * for key k. */
static void expect_answer(const tm_model *model, const void *k, size_t kl,
                          uint8_t found, bonsai_val val, size_t i)
{
    size_t at;
    const char *key = tu_fmt(model->kind, k, kl);
    if (!tm_find(model, k, kl, &at)) {
        cr_assert(found == 0 && val.size == 0 && val.data == NULL,
                  "batch key %zu (%s): found %u, expected absent", i, key,
                  found);
        return;
    }
    const tm_entry *e = &model->e[at];
    cr_assert(found == 1, "batch key %zu (%s): found %u, expected 1", i, key,
              found);
    cr_assert(val.size == e->vlen &&
                  (e->vlen == 0 || memcmp(val.data, e->val, e->vlen) == 0),
              "batch key %zu (%s): value %s, expected %s", i, key,
              tu_fmt(BONSAI_KEY_BYTES, val.data, val.size),
              tu_fmt(BONSAI_KEY_BYTES, e->val, e->vlen));
}

/* Looks keys[0, n) up in one batch, through bonsai_get_batch_u64 or (as
 * 8-byte keys) bonsai_get_batch, and only then checks every answer: all
 * the values of a batch stay valid together. */
static void expect_batch_u64(bonsai_txn *txn, bonsai_map m,
                             const tm_model *model, const uint64_t *keys,
                             size_t n, int as_vals)
{
    bonsai_val *vals = malloc((n + 1) * sizeof *vals);
    bonsai_val *kv = malloc((n + 1) * sizeof *kv);
    uint8_t *found = malloc(n + 1);
    cr_assert(vals && kv && found);
    memset(found, 2, n + 1);
    for (size_t i = 0; i < n; i++)
        kv[i] = u64val(&keys[i]);
    if (as_vals)
        TU_OK(bonsai_get_batch(txn, m, kv, n, vals, found));
    else
        TU_OK(bonsai_get_batch_u64(txn, m, keys, n, vals, found));
    for (size_t i = 0; i < n; i++)
        expect_answer(model, &keys[i], 8, found[i], vals[i], i);
    cr_assert_eq(found[n], 2, "an answer past the batch");
    free(vals);
    free(kv);
    free(found);
}

/* The same for keys of a byte map. */
static void expect_batch(bonsai_txn *txn, bonsai_map m, const tm_model *model,
                         const bonsai_val *keys, size_t n)
{
    bonsai_val *vals = malloc((n + 1) * sizeof *vals);
    uint8_t *found = malloc(n + 1);
    cr_assert(vals && found);
    memset(found, 2, n + 1);
    TU_OK(bonsai_get_batch(txn, m, keys, n, vals, found));
    for (size_t i = 0; i < n; i++)
        expect_answer(model, keys[i].data, keys[i].size, found[i], vals[i],
                      i);
    cr_assert_eq(found[n], 2, "an answer past the batch");
    free(vals);
    free(found);
}

/* A value of 1..40 bytes that names its key. */
static size_t batch_value(uint64_t key, char *buf)
{
    int n = snprintf(buf, 64, "v%" PRIu64 "-", key);
    size_t len = 1 + key % 40;
    for (size_t i = (size_t)n; i < len; i++)
        buf[i] = (char)('a' + i % 26);
    return len;
}

/* Keys 10, 20, .., 10 * n with batch_value, in one write (txn) of the
 * store. */
static bonsai_map batch_tens(bonsai_db *db, uint64_t n, tm_model *model)
{
    bonsai_map m = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_txn *txn = NULL;
    int cow = bonsai_txn_begin(db, 0, &txn) == 0;
    tm_init(model, BONSAI_KEY_U64);
    for (uint64_t k = 10; k <= 10 * n; k += 10) {
        char v[64];
        bonsai_val val = tu_val(v, batch_value(k, v));
        TU_OK(bonsai_put_u64(cow ? txn : NULL, m, k, &val, 0));
        tm_put(model, &k, 8, v, val.size);
    }
    if (cow)
        TU_OK(bonsai_txn_commit(txn));
    return m;
}

/* n keys for a batch over keys 10 .. 10 * top: mostly present ones,
 * some absent, some repeated, the extremes. */
static void batch_keys_u64(tu_rng *rng, uint64_t top, uint64_t *keys,
                           size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tu_below(rng, 10);
        if (r < 6)
            keys[i] = 10 * tu_range(rng, 1, top);
        else if (r < 8)
            keys[i] = tu_range(rng, 0, 10 * top + 100);
        else
            keys[i] = i ? keys[tu_below(rng, i)] : 0;
    }
    if (n > 2) {
        keys[tu_below(rng, n)] = 0;
        keys[tu_below(rng, n)] = UINT64_MAX;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* In stores without and with transactions, raw and lz4, with small nodes:
 * the batches meet hundreds of leaves, far more than the unpack cache
 * holds, so a compressed store's values must be kept aside. */
Test(api, get_batch_u64_hits_misses_repeats)
{
    tu_rng rng = {tu_seed("get_batch_u64_hits_misses_repeats", 77)};
    enum { TOP = 2000, N = 3000 };
    uint64_t *keys = malloc(N * sizeof *keys);
    cr_assert(keys);
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        cr_log_info("store: %s", cstores[si].name);
        bonsai_db *db = cstore_open(&cstores[si]);
        tm_model model;
        bonsai_map m = batch_tens(db, TOP, &model);
        batch_keys_u64(&rng, TOP, keys, N);
        expect_batch_u64(NULL, m, &model, keys, N, 0);
        expect_batch_u64(NULL, m, &model, keys, N, 1);
        /* small batches, across a group's end, and keys in order */
        static const size_t sizes[] = {1, 2, 15, 16, 17, 33};
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++)
            expect_batch_u64(NULL, m, &model, keys + j, sizes[j], 0);
        qsort(keys, N, sizeof *keys, cmp_u64);
        expect_batch_u64(NULL, m, &model, keys, N, 0);
        /* the extremes alone: their numbers differ in every bit */
        keys[0] = UINT64_MAX;
        keys[1] = 0;
        expect_batch_u64(NULL, m, &model, keys, 2, 0);
        /* one key, many times */
        for (size_t i = 0; i < 100; i++)
            keys[i] = 1230;
        expect_batch_u64(NULL, m, &model, keys, 100, 0);
        bonsai_txn *r;
        if (bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r) == 0) {
            batch_keys_u64(&rng, TOP, keys, N);
            expect_batch_u64(r, m, &model, keys, N, 0);
            bonsai_txn_abort(r);
        }
        tm_free(&model);
        TU_OK(bonsai_close(db));
    }
    free(keys);
}

/* Random keys in leaves of the default size, hundreds of keys in groups
 * of 64: a sorted batch goes on in a leaf from where the key before it
 * landed, within its group or in a later one.  Every present key, its
 * neighbours either side (absent but for a clash) and random keys, in
 * order and shuffled, in stores raw and lz4, with and without
 * transactions. */
Test(api, get_batch_u64_walks_each_leaf_on)
{
    tu_rng rng = {tu_seed("get_batch_u64_walks_each_leaf_on", 79)};
    enum { KEYS = 10000, N = 4 * KEYS };
    uint64_t *keys = malloc(N * sizeof *keys);
    cr_assert(keys);
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        cr_log_info("store: %s", cstores[si].name);
        bonsai_options o = file_opts();
        o.compression = cstores[si].compression;
        char name[32];
        snprintf(name, sizeof name, "walk%zu.db", si);
        bonsai_db *db = tu_open(cstores[si].file ? tu_path(name) : NULL, &o);
        bonsai_map m = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
        bonsai_txn *txn = NULL;
        int cow = bonsai_txn_begin(db, 0, &txn) == 0;
        tm_model model;
        tm_init(&model, BONSAI_KEY_U64);
        for (size_t i = 0; i < KEYS; i++) {
            uint64_t k = tu_rand(&rng) | 1; /* k - 1 stays above 0 */
            char v[64];
            bonsai_val val = tu_val(v, i % 3 ? 0 : batch_value(k, v));
            TU_OK(bonsai_put_u64(cow ? txn : NULL, m, k, &val, 0));
            tm_put(&model, &k, 8, v, val.size);
            keys[4 * i] = k;
            keys[4 * i + 1] = k - 1;
            keys[4 * i + 2] = k + 1;
            keys[4 * i + 3] = tu_rand(&rng);
        }
        if (cow)
            TU_OK(bonsai_txn_commit(txn));
        else
            TU_OK(bonsai_sync(db));
        qsort(keys, N, sizeof *keys, cmp_u64);
        expect_batch_u64(NULL, m, &model, keys, N, 0);
        expect_batch_u64(NULL, m, &model, keys + N / 3, N / 3, 1);
        /* sparse batches: a key's group can lie groups past the last's */
        for (size_t stride = 7; stride < 400; stride *= 3) {
            uint64_t *some = malloc(N / stride * sizeof *some);
            cr_assert(some);
            for (size_t i = 0; i < N / stride; i++)
                some[i] = keys[i * stride + tu_below(&rng, stride)];
            expect_batch_u64(NULL, m, &model, some, N / stride, 0);
            free(some);
        }
        for (size_t i = N - 1; i > 0; i--) {
            size_t j = tu_below(&rng, i + 1);
            uint64_t t = keys[i];
            keys[i] = keys[j];
            keys[j] = t;
        }
        expect_batch_u64(NULL, m, &model, keys, N, 0);
        tm_free(&model);
        TU_OK(bonsai_close(db));
    }
    free(keys);
}

/* Byte keys: prefixes of one another, keys alike in their first 8 bytes
 * (which the batch sorts by first), NUL bytes, the longest key. */
Test(api, get_batch_byte_keys)
{
    tu_rng rng = {tu_seed("get_batch_byte_keys", 78)};
    enum { NK = 1200, N = 2000 };
    static char text[NK][24];
    static uint8_t longest[BONSAI_MAX_KEY];
    memset(longest, 'z', sizeof longest);
    bonsai_val all[NK + 8];
    size_t nall = 0;
    for (unsigned i = 0; i < NK; i++) {
        snprintf(text[i], sizeof text[i], i % 3 ? "key:%05u" : "k%u", i);
        all[nall++] = sval(text[i]);
    }
    static const char *odd[] = {"a", "ab", "abc", "prefix00", "prefix0",
                                "prefix00-a", "prefix00-b"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        all[nall++] = sval(odd[i]);
    static const uint8_t nul[4] = {0, 0xff, 0, 1};
    bonsai_val special[] = {tu_val(nul, 4), tu_val(nul, 3), tu_val(nul, 1),
                            tu_val(longest, sizeof longest),
                            tu_val(longest, sizeof longest - 1)};
    bonsai_val *keys = malloc(N * sizeof *keys);
    cr_assert(keys);
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        cr_log_info("store: %s", cstores[si].name);
        bonsai_db *db = cstore_open(&cstores[si]);
        bonsai_map m = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
        tm_model model;
        tm_init(&model, BONSAI_KEY_BYTES);
        bonsai_txn *txn = NULL;
        int cow = bonsai_txn_begin(db, 0, &txn) == 0;
        /* every other key, and one of each special but the last */
        for (size_t i = 0; i < nall + 4; i++) {
            bonsai_val k = i < nall ? all[i] : special[i - nall];
            if (i < nall && i % 2)
                continue;
            char v[64];
            bonsai_val val = tu_val(v, batch_value(i, v));
            TU_OK(bonsai_put(cow ? txn : NULL, m, &k, &val, 0));
            tm_put(&model, k.data, k.size, v, val.size);
        }
        if (cow)
            TU_OK(bonsai_txn_commit(txn));
        for (size_t i = 0; i < N; i++) {
            uint64_t r = tu_below(&rng, nall + 5);
            keys[i] = r < nall ? all[r] : special[r - nall];
        }
        expect_batch(NULL, m, &model, keys, N);
        expect_batch(NULL, m, &model, all, nall);
        expect_batch(NULL, m, &model, special, 5);
        tm_free(&model);
        TU_OK(bonsai_close(db));
    }
    free(keys);
}

/* A byte map in memory holding every `every`th of all[0, nk), then a
 * batch of n keys picked from all of them at random, checked against a
 * model. */
static void batch_of_picks(tu_rng *rng, const bonsai_val *all, size_t nk,
                           size_t every, size_t n)
{
    bonsai_val *keys = malloc(n * sizeof *keys);
    cr_assert(keys);
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map m = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    tm_model model;
    tm_init(&model, BONSAI_KEY_BYTES);
    for (size_t i = 0; i < nk; i += every) {
        char v[64];
        bonsai_val val = tu_val(v, batch_value(i, v));
        TU_OK(bonsai_put(NULL, m, &all[i], &val, 0));
        tm_put(&model, all[i].data, all[i].size, v, val.size);
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = all[tu_below(rng, nk)];
    expect_batch(NULL, m, &model, keys, n);
    tm_free(&model);
    TU_OK(bonsai_close(db));
    free(keys);
}

/* Byte keys that share a prefix longer than 8 bytes, many of them a
 * prefix of another and many repeated: a batch sorts them 8 bytes at a
 * time, and keys equal so far in large numbers are what it must get
 * right. */
Test(api, get_batch_long_shared_prefixes)
{
    tu_rng rng = {tu_seed("get_batch_long_shared_prefixes", 79)};
    enum { NK = 600, N = 3000 };
    static char text[NK][48];
    bonsai_val all[NK];
    for (unsigned i = 0; i < NK; i++) {
        /* 24 shared bytes, then 0 to 13 more: "...:" ends some keys */
        int more = (int)(i % 14);
        snprintf(text[i], sizeof text[i], "customer:profile:000000:%.*s",
                 more, "0123456789abcd" + (i / 14) % 2);
        all[i] = tu_val(text[i], strlen(text[i]) - (i / 28) % 3);
    }
    batch_of_picks(&rng, all, NK, 3, N); /* a third of them present */
}

/* Keys equal but for trailing zero bytes ("k", "k\0", "k\0\0", ...) are
 * distinct keys, the shorter first: a batch of more than a few of them
 * must still find each, in any order. */
Test(api, get_batch_keys_equal_but_for_trailing_zeros)
{
    tu_rng rng = {tu_seed("get_batch_keys_equal_but_for_trailing_zeros", 83)};
    enum { NK = 30, N = 400 };
    static uint8_t text[NK][NK + 1];
    bonsai_val all[NK];
    for (unsigned i = 0; i < NK; i++) {
        text[i][0] = 'k';
        all[i] = tu_val(text[i], 1 + i); /* 'k' and i zero bytes */
    }
    batch_of_picks(&rng, all, NK, 2, N); /* half of them present */
}

Test(api, get_batch_empty_and_bad_arguments)
{
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(tu_path("batch.db"), &o);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    uint64_t k64[2] = {1, 2};
    bonsai_val kb[2] = {sval("x"), sval("y")}, vals[2];
    uint8_t found[2];
    /* an empty batch needs no arrays */
    TU_OK(bonsai_get_batch_u64(NULL, u, NULL, 0, NULL, NULL));
    TU_OK(bonsai_get_batch(NULL, b, NULL, 0, NULL, NULL));
    /* an empty map answers absent */
    memset(found, 2, sizeof found);
    TU_OK(bonsai_get_batch_u64(NULL, u, k64, 2, vals, found));
    cr_assert(found[0] == 0 && found[1] == 0 && vals[1].data == NULL);
    TU_OK(bonsai_get_batch(NULL, b, kb, 2, vals, found));
    cr_assert(found[0] == 0 && found[1] == 0);
    /* missing arrays, handles, kinds and sizes: as bonsai_get answers */
    TU_RC(bonsai_get_batch_u64(NULL, u, NULL, 2, vals, found),
          BONSAI_INVALID);
    TU_RC(bonsai_get_batch_u64(NULL, u, k64, 2, NULL, found),
          BONSAI_INVALID);
    TU_RC(bonsai_get_batch(NULL, b, kb, 2, vals, NULL), BONSAI_INVALID);
    TU_RC(bonsai_get_batch_u64(NULL, NULL, k64, 2, vals, found),
          BONSAI_INVALID);
    TU_RC(bonsai_get_batch(NULL, NULL, kb, 2, vals, found), BONSAI_INVALID);
    TU_RC(bonsai_get_batch_u64(NULL, b, k64, 2, vals, found),
          BONSAI_MAPKIND);
    TU_RC(bonsai_get_batch(NULL, u, kb, 2, vals, found), BONSAI_KEYSIZE);
    bonsai_val empty[2] = {sval("x"), tu_val("", 0)};
    TU_RC(bonsai_get_batch(NULL, b, empty, 2, vals, found), BONSAI_KEYSIZE);
    static uint8_t big[BONSAI_MAX_KEY + 1];
    bonsai_val too_long[1] = {tu_val(big, sizeof big)};
    TU_RC(bonsai_get_batch(NULL, b, too_long, 1, vals, found),
          BONSAI_KEYSIZE);
    bonsai_val no_bytes[1] = {tu_val(NULL, 3)};
    TU_RC(bonsai_get_batch(NULL, b, no_bytes, 1, vals, found),
          BONSAI_INVALID);
    /* a transaction of another store */
    bonsai_db *db2 = tu_open(NULL, NULL);
    bonsai_db *db3 = tu_open(tu_path("batch3.db"), &o);
    bonsai_txn *t3;
    TU_OK(bonsai_txn_begin(db3, BONSAI_TXN_RDONLY, &t3));
    TU_RC(bonsai_get_batch_u64(t3, u, k64, 2, vals, found), BONSAI_INVALID);
    bonsai_txn_abort(t3);
    TU_OK(bonsai_close(db3));
    TU_OK(bonsai_close(db2));
    /* a dropped map */
    TU_OK(bonsai_map_drop(db, NULL, "u"));
    TU_RC(bonsai_get_batch_u64(NULL, u, k64, 2, vals, found),
          BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
}

/* Puts waiting in the write cache, without transactions and in a write
 * transaction, and a read snapshot that keeps its view while the writer
 * changes the map: a batch answers as bonsai_get in each. */
Test(api, get_batch_sees_waiting_puts_and_keeps_snapshots)
{
    tu_rng rng = {tu_seed("get_batch_sees_waiting_puts", 79)};
    enum { TOP = 3000, N = 4000 };
    uint64_t *keys = malloc(N * sizeof *keys);
    cr_assert(keys);
    for (int file = 0; file < 2; file++) {
        bonsai_options o = file_opts();
        o.node_bytes = 512;
        bonsai_db *db = tu_open(file ? tu_path("waits.db") : NULL, &o);
        tm_model model, old;
        bonsai_map m = batch_tens(db, TOP, &model);
        tm_init(&old, BONSAI_KEY_U64);
        tm_copy(&old, &model);
        bonsai_txn *r = NULL, *w = NULL;
        if (file) {
            TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
            TU_OK(bonsai_txn_begin(db, 0, &w));
        }
        /* deletes apply the waiting puts: they come first; then puts
         * into the middle, new keys and overwrites, wait for their
         * leaves */
        for (int i = 0; i < 100; i++) {
            uint64_t k = 10 * tu_range(&rng, 1, TOP);
            int rc = bonsai_del_u64(w, m, k);
            cr_assert(rc == 0 || rc == BONSAI_NOTFOUND);
            tm_del(&model, &k, 8);
        }
        for (int i = 0; i < 500; i++) {
            uint64_t k = tu_range(&rng, 1, 10 * TOP);
            char v[64];
            bonsai_val val = tu_val(v, batch_value(k * 7, v));
            TU_OK(bonsai_put_u64(w, m, k, &val, 0));
            tm_put(&model, &k, 8, v, val.size);
        }
        batch_keys_u64(&rng, TOP, keys, N);
        expect_batch_u64(w, m, &model, keys, N, 0);
        if (file) {
            expect_batch_u64(r, m, &old, keys, N, 0);
            TU_OK(bonsai_txn_commit(w));
            expect_batch_u64(r, m, &old, keys, N, 1);
            expect_batch_u64(NULL, m, &model, keys, N, 0);
            bonsai_txn_abort(r);
        }
        tm_free(&model);
        tm_free(&old);
        TU_OK(bonsai_close(db));
    }
    free(keys);
}

/* ---- long read snapshots ------------------------------------------------ */

/* Key i of long_snapshot's maps: u64 keys 7 apart, or their text. */
static size_t long_key(unsigned kind, uint64_t i, uint8_t *buf)
{
    if (kind == BONSAI_KEY_U64) {
        uint64_t k = i * 7;
        memcpy(buf, &k, 8);
        return 8;
    }
    return (size_t)snprintf((char *)buf, 32, "key:%09" PRIu64, i * 7);
}

static void expect_long_get(bonsai_txn *r, bonsai_map m,
                            const tm_model *model, const uint8_t *k,
                            size_t kl)
{
    bonsai_val key = tu_val(k, kl), out = {0, NULL};
    int rc = model->kind == BONSAI_KEY_U64
                 ? bonsai_get_u64(r, m, tu_u64_of(k), &out)
                 : bonsai_get(r, m, &key, &out);
    size_t at;
    const char *name = tu_fmt(model->kind, k, kl);
    if (!tm_find(model, k, kl, &at)) {
        TU_RC(rc, BONSAI_NOTFOUND);
        return;
    }
    cr_assert(rc == 0, "get %s -> %s", name, tu_err(rc));
    cr_assert(out.size == model->e[at].vlen &&
                  memcmp(out.data, model->e[at].val, out.size) == 0,
              "get %s: another value", name);
}

/* A read snapshot searches the branches it passes decoded from their
 * second visit on and links them (brcache.c): its lookups, batches and
 * walks must answer as the images do, for both key kinds and lz4 nodes,
 * in a deep tree, while a writer commits changes to it. */
static void long_snapshot(const cstore *s, unsigned kind, tu_rng *rng)
{
    enum { N = 3000, GETS = 3000, BATCH = 1000 };
    bonsai_db *db = cstore_open(s);
    bonsai_map m = tu_map_create(db, NULL, "m", kind);
    tm_model model;
    tm_init(&model, kind);
    uint8_t k[32];
    bonsai_txn *w, *r;
    TU_OK(bonsai_txn_begin(db, 0, &w));
    for (uint64_t i = 0; i < N; i++) {
        size_t kl = long_key(kind, i, k);
        bonsai_val key = tu_val(k, kl), val = tu_val(k, kl);
        TU_OK(bonsai_put(w, m, &key, &val, 0));
        tm_put(&model, k, kl, k, kl);
    }
    TU_OK(bonsai_txn_commit(w));
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
    bonsai_map_info mi;
    TU_OK(bonsai_map_stat(r, m, &mi));
    cr_assert(mi.depth >= 3, "a tree of depth %u", mi.depth);
    static uint8_t keys[BATCH][32];
    bonsai_val *kv = malloc(BATCH * sizeof *kv);
    uint64_t *ku = malloc(BATCH * sizeof *ku);
    cr_assert(kv && ku);
    for (int round = 0; round < 3; round++) {
        /* the writer deletes a third and adds keys between */
        TU_OK(bonsai_txn_begin(db, 0, &w));
        for (uint64_t i = (uint64_t)round; i < N; i += 3) {
            size_t kl = long_key(kind, i, k);
            bonsai_val key = tu_val(k, kl);
            TU_OK(bonsai_del(w, m, &key));
            k[kl - 1]++; /* between this key and the next */
            key = tu_val(k, kl);
            TU_OK(bonsai_put(w, m, &key, NULL, 0));
        }
        TU_OK(bonsai_txn_commit(w));
        for (int j = 0; j < GETS; j++) {
            size_t kl = long_key(kind, tu_below(rng, N + 2), k);
            if (tu_chance(rng, 300))
                k[kl - 1]++; /* absent */
            expect_long_get(r, m, &model, k, kl);
        }
        for (size_t j = 0; j < BATCH; j++) {
            size_t kl = long_key(kind, tu_below(rng, N + 2), keys[j]);
            kv[j] = tu_val(keys[j], kl);
            ku[j] = kind == BONSAI_KEY_U64 ? tu_u64_of(keys[j]) : 0;
        }
        if (kind == BONSAI_KEY_U64)
            expect_batch_u64(r, m, &model, ku, BATCH, 0);
        else
            expect_batch(r, m, &model, kv, BATCH);
        TU_ASSERT_SAME(r, m, &model, "long snapshot");
    }
    bonsai_txn_abort(r);
    free(kv);
    free(ku);
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

Test(api, long_read_snapshot_answers_as_its_images)
{
    tu_rng rng = {tu_seed("long_read_snapshot", 80)};
    for (size_t si = 0; si < sizeof cstores / sizeof cstores[0]; si++) {
        if (!cstores[si].file)
            continue; /* read snapshots need transactions */
        cr_log_info("store: %s", cstores[si].name);
        long_snapshot(&cstores[si], BONSAI_KEY_U64, &rng);
        long_snapshot(&cstores[si], BONSAI_KEY_BYTES, &rng);
    }
}

/* Key i of batch_reads_a_leaf_again_after_unpacks: rising, not evenly
 * spaced (a leaf of those is searched by arithmetic alone). */
static uint64_t unpacked_key(uint64_t i)
{
    return i * 8 + i % 3;
}

/* A batch goes through its keys in groups of 16, and a leaf may hold the
 * last key of one group and the first of the next.  Between the two
 * searches, the descents of later groups unpack more lz4 branches (first
 * visits of a fresh read snapshot) than the unpack cache has slots, so
 * the leaf's unpacked image the first search read is gone and must be
 * read again.  The keys: 15 from the start, two of one leaf (keys 15 and
 * 16, for some `at`), 15 after them, then 32 each under another branch. */
Test(api, batch_reads_a_leaf_again_after_unpacks)
{
    enum { N = 20000, SPREAD = 32, KEYS = 15 + 2 + 15 + SPREAD };
    bonsai_options o = file_opts();
    o.page_size = 128;
    o.node_bytes = 2048;
    o.node_entries = 32;
    o.compression = BONSAI_COMPRESS_LZ4;
    bonsai_db *db = tu_open(tu_path("unpacks.db"), &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    tm_model model;
    tm_init(&model, BONSAI_KEY_U64);
    uint8_t v[100];
    bonsai_txn *w, *r;
    TU_OK(bonsai_txn_begin(db, 0, &w));
    for (uint64_t i = 0; i < N; i++) {
        uint64_t key = unpacked_key(i);
        memset(v, 'a' + (int)(i % 26), sizeof v); /* leaves lz4 shrinks */
        bonsai_val val = tu_val(v, sizeof v);
        TU_OK(bonsai_put_u64(w, m, key, &val, 0));
        tm_put(&model, (const uint8_t *)&key, 8, v, sizeof v);
    }
    TU_OK(bonsai_txn_commit(w));
    uint64_t keys[KEYS];
    for (uint64_t at = 100; at < 140; at++) { /* some pair shares a leaf */
        size_t j = 0;
        for (uint64_t i = 0; i < 15; i++)
            keys[j++] = unpacked_key(i);
        for (uint64_t i = at; i < at + 2 + 15; i++)
            keys[j++] = unpacked_key(i);
        for (uint64_t i = 0; i < SPREAD; i++)
            keys[j++] = unpacked_key(1000 + i * 580);
        TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
        bonsai_map_info mi;
        TU_OK(bonsai_map_stat(r, m, &mi));
        cr_assert(mi.depth >= 4, "a tree of depth %u", mi.depth);
        expect_batch_u64(r, m, &model, keys, KEYS, 0);
        bonsai_txn_abort(r);
    }
    tm_free(&model);
    TU_OK(bonsai_close(db));
}

/* ---- error strings and bad arguments ------------------------------------ */

Test(api, strerror_distinct)
{
    int codes[] = {BONSAI_OK,       BONSAI_NOTFOUND, BONSAI_EXISTS,
                   BONSAI_FULL,     BONSAI_CORRUPT,  BONSAI_FORMAT_UNSUPPORTED,
                   BONSAI_INVALID,  BONSAI_KEYSIZE,  BONSAI_VALSIZE,
                   BONSAI_NOMEM,    BONSAI_IO,       BONSAI_BUSY,
                   BONSAI_READONLY, BONSAI_BADTXN,   BONSAI_MAPKIND,
                   BONSAI_ENOSPC,   BONSAI_FAILED,   BONSAI_NOTSUP,
                   BONSAI_MAPS_FULL, BONSAI_LOCKFILE, BONSAI_READERS_FULL,
                   BONSAI_TXNID_FULL};
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = bonsai_strerror(codes[i]);
        cr_assert(s != NULL && s[0] != 0, "strerror(%d) is empty", codes[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert(strcmp(s, bonsai_strerror(codes[j])) != 0,
                      "strerror(%d) == strerror(%d) == \"%s\"", codes[i],
                      codes[j], s);
    }
    int unknown[] = {1, -1, -30700, -30722, 12345, INT32_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = bonsai_strerror(unknown[i]);
        cr_assert(s != NULL && s[0] != 0, "strerror(%d) is empty",
                  unknown[i]);
    }
}

static int never_cb(void *ctx, const char *name, unsigned kind,
                    uint64_t entries)
{
    (void)ctx;
    (void)name;
    (void)kind;
    (void)entries;
    return 0;
}

Test(api, bad_arguments)
{
    bonsai_db *db = NULL;
    bonsai_stat st;
    bonsai_txn *t = NULL;
    TU_RC(bonsai_open(NULL, NULL, NULL), BONSAI_INVALID);
    TU_RC(bonsai_open(tu_path("x.db"), NULL, NULL), BONSAI_INVALID);
    TU_RC(bonsai_sync(NULL), BONSAI_INVALID);
    TU_RC(bonsai_db_stat(NULL, &st), BONSAI_INVALID);
    TU_RC(bonsai_txn_begin(NULL, 0, &t), BONSAI_INVALID);
    TU_RC(bonsai_txn_begin(NULL, BONSAI_TXN_RDONLY, &t), BONSAI_INVALID);
    TU_RC(bonsai_txn_commit(NULL), BONSAI_INVALID);
    bonsai_txn_abort(NULL);
    bonsai_cursor_close(NULL);
    TU_RC(bonsai_cursor_first(NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_last(NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_next(NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_prev(NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_seek_u64(NULL, 1), BONSAI_INVALID);
    bonsai_val k = sval("k"), v = sval("v"), out;
    TU_RC(bonsai_cursor_seek(NULL, &k), BONSAI_INVALID);
    TU_RC(bonsai_cursor_get(NULL, &k, &v), BONSAI_INVALID);
    uint64_t u;
    TU_RC(bonsai_cursor_get_u64(NULL, &u, &v), BONSAI_INVALID);

    /* with a store open: NULL out-pointers */
    bonsai_options o = file_opts();
    db = tu_open(tu_path("args.db"), &o);
    TU_RC(bonsai_db_stat(db, NULL), BONSAI_INVALID);
    TU_RC(bonsai_txn_begin(db, 0, NULL), BONSAI_INVALID);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    TU_RC(bonsai_map_create(db, NULL, NULL, BONSAI_KEY_BYTES, &m),
          BONSAI_INVALID);
    TU_RC(bonsai_map_create(db, NULL, "y", BONSAI_KEY_BYTES, NULL),
          BONSAI_INVALID);
    TU_RC(bonsai_map_open(db, NULL, NULL, &m, NULL), BONSAI_INVALID);
    TU_RC(bonsai_map_open(db, NULL, "m", NULL, NULL), BONSAI_INVALID);
    TU_RC(bonsai_map_drop(db, NULL, NULL), BONSAI_INVALID);
    TU_RC(bonsai_map_list(db, NULL, NULL, NULL), BONSAI_INVALID);
    TU_RC(bonsai_count(NULL, m, NULL), BONSAI_INVALID);
    TU_RC(bonsai_put(NULL, m, NULL, &v, 0), BONSAI_INVALID);
    TU_RC(bonsai_get(NULL, m, NULL, &out), BONSAI_INVALID);
    /* get without a place for the value: refused, or at most an
     * existence check (k is absent) */
    int rc = bonsai_get(NULL, m, &k, NULL);
    cr_assert(rc == BONSAI_INVALID || rc == BONSAI_NOTFOUND,
              "get with a NULL val -> %s", tu_err(rc));
    TU_RC(bonsai_del(NULL, m, NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_open(NULL, m, NULL), BONSAI_INVALID);
    bonsai_txn *r;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
    TU_RC(bonsai_cursor_open(r, m, NULL), BONSAI_INVALID);
    bonsai_txn_abort(r);
    /* no map */
    uint64_t cnt;
    bonsai_cursor *cur;
    TU_RC(bonsai_put(NULL, NULL, &k, &v, 0), BONSAI_INVALID);
    TU_RC(bonsai_get(NULL, NULL, &k, &out), BONSAI_INVALID);
    TU_RC(bonsai_del(NULL, NULL, &k), BONSAI_INVALID);
    TU_RC(bonsai_count(NULL, NULL, &cnt), BONSAI_INVALID);
    TU_RC(bonsai_put_u64(NULL, NULL, 1, NULL, 0), BONSAI_INVALID);
    TU_RC(bonsai_cursor_open(NULL, NULL, &cur), BONSAI_INVALID);
    /* no db */
    bonsai_map m2;
    TU_RC(bonsai_map_create(NULL, NULL, "m2", BONSAI_KEY_U64, &m2),
          BONSAI_INVALID);
    TU_RC(bonsai_map_open(NULL, NULL, "m", &m2, NULL), BONSAI_INVALID);
    TU_RC(bonsai_map_drop(NULL, NULL, "m"), BONSAI_INVALID);
    TU_RC(bonsai_map_list(NULL, NULL, never_cb, NULL), BONSAI_INVALID);

    /* a txn of another store */
    bonsai_db *db2 = tu_open(tu_path("other.db"), &o);
    bonsai_map other = tu_map_create(db2, NULL, "o", BONSAI_KEY_BYTES);
    bonsai_txn *t2;
    TU_OK(bonsai_txn_begin(db2, 0, &t2));
    TU_RC(bonsai_put(t2, m, &k, &v, 0), BONSAI_INVALID);
    TU_RC(bonsai_get(t2, m, &k, &out), BONSAI_INVALID);
    TU_RC(bonsai_count(t2, m, &cnt), BONSAI_INVALID);
    TU_RC(bonsai_map_create(db, t2, "m3", BONSAI_KEY_U64, &m2),
          BONSAI_INVALID);
    TU_RC(bonsai_map_open(db, t2, "m", &m2, NULL), BONSAI_INVALID);
    TU_OK(bonsai_put(t2, other, &k, &v, 0));
    TU_OK(bonsai_txn_commit(t2));
    TU_OK(bonsai_close(db2));

    /* none of it changed anything */
    TU_RC(bonsai_get(NULL, m, &k, &out), BONSAI_NOTFOUND);
    TU_RC(bonsai_map_open(db, NULL, "m2", &m2, NULL), BONSAI_NOTFOUND);
    TU_RC(bonsai_map_open(db, NULL, "m3", &m2, NULL), BONSAI_NOTFOUND);
    TU_OK(bonsai_close(db));
}

/* ---- reopen gives identical contents ------------------------------------ */

Test(api, reopen_identical_contents)
{
    uint64_t seed = tu_seed("reopen_identical_contents", 20240601);
    tu_rng rng = {seed};
    const char *path = tu_path("same.db");
    bonsai_options o = file_opts();
    o.node_bytes = 1024;
    bonsai_db *db = tu_open(path, &o);
    const char *names[] = {"alpha", "beta", "gamma"};
    unsigned kinds[] = {BONSAI_KEY_U64, BONSAI_KEY_BYTES, BONSAI_KEY_BYTES};
    tm_model before[3], after[3];
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    for (int i = 0; i < 3; i++) {
        bonsai_map m = tu_map_create(db, t, names[i], kinds[i]);
        tm_init(&before[i], kinds[i]);
        tm_init(&after[i], kinds[i]);
        for (int j = 0; j < 3000; j++) {
            uint8_t key[64], val[600];
            size_t kl = kinds[i] == BONSAI_KEY_U64 ? 8
                                                   : tu_range(&rng, 1, 64);
            size_t vl = tu_chance(&rng, 300) ? 0 : tu_range(&rng, 1, 600);
            tu_fill(&rng, key, kl);
            tu_fill(&rng, val, vl);
            if (kinds[i] == BONSAI_KEY_BYTES && kl > 4)
                memcpy(key, "pfx:", 4); /* shared prefixes */
            bonsai_val k = tu_val(key, kl), v = tu_val(val, vl);
            TU_OK(bonsai_put(t, m, &k, &v, 0));
        }
    }
    TU_OK(bonsai_txn_commit(t));
    /* and some autocommitted deletes */
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    bonsai_map m0 = tu_map_open(db, t, names[0], kinds[0]);
    char why[512];
    TU_OK(tu_walk(t, m0, &before[0], why, sizeof why));
    bonsai_txn_abort(t);
    for (size_t j = 0; j < before[0].n; j += 3) {
        bonsai_val k = tu_val(before[0].e[j].key, 8);
        TU_OK(bonsai_del(NULL, m0, &k));
    }
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    for (int i = 0; i < 3; i++) {
        bonsai_map m = tu_map_open(db, t, names[i], kinds[i]);
        int rc = tu_walk(t, m, &before[i], why, sizeof why);
        cr_assert(rc == 0, "walk of %s: %s", names[i], why);
    }
    bonsai_txn_abort(t);
    cr_assert(before[1].n > 2900 && before[0].n < 2100);
    TU_OK(bonsai_close(db));

    for (int round = 0; round < 2; round++) {
        db = tu_open(path, &o);
        TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
        for (int i = 0; i < 3; i++) {
            bonsai_map m = tu_map_open(db, t, names[i], kinds[i]);
            char ctx[64];
            snprintf(ctx, sizeof ctx, "map %s after reopen %d (seed %" PRIu64
                     ")", names[i], round + 1, seed);
            TU_ASSERT_SAME(t, m, &before[i], ctx);
            TU_OK(tu_walk(t, m, &after[i], why, sizeof why));
            cr_assert_eq(tm_checksum(&after[i]), tm_checksum(&before[i]));
        }
        bonsai_txn_abort(t);
        TU_OK(bonsai_close(db));
    }
    for (int i = 0; i < 3; i++) {
        tm_free(&before[i]);
        tm_free(&after[i]);
    }
}

/* ---- an emptied map has no nodes ----------------------------------------- */

/* Key i of a map of the kind: the u64 i, or i as 10 decimal digits (the
 * same order). */
static bonsai_val key_of(unsigned kind, uint64_t i, uint64_t *u, char *buf)
{
    if (kind == BONSAI_KEY_U64) {
        *u = i;
        return u64val(u);
    }
    snprintf(buf, 24, "%010" PRIu64, i % UINT64_C(10000000000));
    return tu_val(buf, 10);
}

static int put_i(bonsai_txn *txn, bonsai_map m, unsigned kind, uint64_t i)
{
    uint64_t u;
    char buf[24];
    bonsai_val k = key_of(kind, i, &u, buf);
    return bonsai_put(txn, m, &k, &(bonsai_val){0, NULL}, 0);
}

static int del_i(bonsai_txn *txn, bonsai_map m, unsigned kind, uint64_t i)
{
    uint64_t u;
    char buf[24];
    bonsai_val k = key_of(kind, i, &u, buf);
    return bonsai_del(txn, m, &k);
}

/* The j-th of n keys deleted: ascending, descending, or spread (a stride
 * prime to n). */
static uint64_t nth_of_order(int order, uint64_t j, uint64_t n)
{
    return order == 0 ? j : order == 1 ? n - 1 - j : (j * 7919) % n;
}

/* bonsai_map_stat says empty: no entries, depth 0, no nodes; and so does
 * the store's space (no map node pages) and verify. */
static void expect_no_nodes(bonsai_db *db, bonsai_map m, const char *ctx)
{
    bonsai_map_info mi;
    TU_OK(bonsai_map_stat(NULL, m, &mi));
    cr_assert(mi.entries == 0 && mi.depth == 0 && mi.branch_nodes == 0 &&
                  mi.leaf_nodes == 0 && mi.page_bytes == 0,
              "%s: an empty map has entries %" PRIu64 ", depth %u, %" PRIu64
              " branches, %" PRIu64 " leaves, %" PRIu64 " page bytes",
              ctx, mi.entries, mi.depth, mi.branch_nodes, mi.leaf_nodes,
              mi.page_bytes);
    bonsai_space sp;
    TU_OK(bonsai_space_stat(db, &sp));
    cr_assert(sp.node_bytes == 0 && sp.problems == 0,
              "%s: the empty map's store keeps %" PRIu64 " bytes of nodes",
              ctx, sp.node_bytes);
    uint64_t problems = 1;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    cr_assert_eq(problems, 0, "%s: verify", ctx);
}

/* Small nodes, so that a thousand keys make a tree four levels deep;
 * emptied in each order, the map must have no nodes left, and then take
 * the keys again. */
static void emptied_map_test(unsigned kind, int transactions)
{
    const char *path = transactions ? tu_path("empty.db") : NULL;
    bonsai_options o = file_opts();
    o.node_entries = 4;
    o.transactions = transactions;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", kind);
    const uint64_t n = 1000;
    for (int order = 0; order < 3; order++) {
        bonsai_txn *txn = NULL;
        if (transactions)
            TU_OK(bonsai_txn_begin(db, 0, &txn));
        for (uint64_t i = 0; i < n; i++)
            TU_OK(put_i(txn, m, kind, i));
        if (txn) {
            TU_OK(bonsai_txn_commit(txn));
            TU_OK(bonsai_txn_begin(db, 0, &txn));
        }
        bonsai_map_info mi;
        TU_OK(bonsai_map_stat(txn, m, &mi));
        cr_assert(mi.depth >= 3, "depth %u: the test wants a deep tree",
                  mi.depth);
        for (uint64_t j = 0; j < n; j++)
            TU_OK(del_i(txn, m, kind, nth_of_order(order, j, n)));
        if (txn) {
            /* the writer's own view first */
            TU_OK(bonsai_map_stat(txn, m, &mi));
            cr_assert(mi.depth == 0 && mi.leaf_nodes == 0,
                      "order %d: in the txn, depth %u and %" PRIu64
                      " leaves", order, mi.depth, mi.leaf_nodes);
            TU_OK(bonsai_txn_commit(txn));
        }
        char ctx[64];
        snprintf(ctx, sizeof ctx, "kind %u, order %d", kind, order);
        expect_no_nodes(db, m, ctx);
        cr_assert_eq(count_of(NULL, m), 0, "%s: count", ctx);
    }
    TU_OK(bonsai_close(db));
    if (path) {
        db = tu_open(path, &o);
        m = tu_map_open(db, NULL, "m", kind);
        expect_no_nodes(db, m, "after reopen");
        TU_OK(bonsai_close(db));
    }
}

Test(api, emptied_u64_map_has_no_nodes_direct)
{
    emptied_map_test(BONSAI_KEY_U64, 0);
}

Test(api, emptied_u64_map_has_no_nodes_txn)
{
    emptied_map_test(BONSAI_KEY_U64, 1);
}

Test(api, emptied_bytes_map_has_no_nodes_direct)
{
    emptied_map_test(BONSAI_KEY_BYTES, 0);
}

Test(api, emptied_bytes_map_has_no_nodes_txn)
{
    emptied_map_test(BONSAI_KEY_BYTES, 1);
}

/* As first seen: 100,000 u64 keys, nodes of 8 entries, emptied in
 * ascending order, left a branch and two empty leaves behind. */
Test(api, emptied_map_of_100000_keys_has_depth_0)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.node_entries = 8;
    bonsai_db *db = tu_open(NULL, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_U64);
    for (uint64_t i = 0; i < 100000; i++)
        TU_OK(bonsai_put_u64(NULL, m, i, NULL, 0));
    for (uint64_t i = 0; i < 100000; i++)
        TU_OK(bonsai_del_u64(NULL, m, i));
    expect_no_nodes(db, m, "100,000 keys emptied");
    TU_OK(bonsai_close(db));
}

/* ---- the write cache's age limit ---------------------------------------- */

static uint64_t txn_id_of(bonsai_db *db)
{
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    return st.txn_id;
}

/* Without transactions, a write-back of the cache ends with a meta slot
 * (a new txn id): flush_delay_ms makes the first change after the delay
 * write back what waited that long, and without it nothing is written
 * until the cache fills or a sync. */
static void cache_age_limit(uint32_t delay_ms, int expect_written)
{
    bonsai_options o = file_opts();
    o.transactions = 0;
    o.flush_delay_ms = delay_ms;
    bonsai_db *db = tu_open(tu_path("age.db"), &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    TU_OK(bonsai_sync(db));
    uint64_t synced = txn_id_of(db);
    put_str(NULL, m, "a", "1");
    put_str(NULL, m, "b", "2");
    cr_assert_eq(txn_id_of(db), synced, "written back before the delay");
    struct timespec nap = {0, 150 * 1000000L};
    nanosleep(&nap, NULL);
    put_str(NULL, m, "c", "3");
    cr_assert_eq(txn_id_of(db) > synced, expect_written,
                 "delay %u ms: txn %" PRIu64 " after the sync's %" PRIu64,
                 delay_ms, txn_id_of(db), synced);
    TU_OK(bonsai_close(db));
}

Test(api, flush_delay_writes_back_what_waited_that_long)
{
    cache_age_limit(100, 1);
}

Test(api, no_flush_delay_keeps_changes_cached)
{
    cache_age_limit(0, 0);
}

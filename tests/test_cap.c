/* SPDX-License-Identifier: MIT */
/*
 * test_cap.c - the cap belongs to the store: a file records the max_size
 * it was created with (format version 2), a later open with default
 * options works under it, an opener or bonsai_set_max_size raises or
 * lowers it and the change is recorded, and a version 1 file (no cap
 * recorded) still opens.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bytes.h"
#include "checksum.h"
#include "meta.h"
#include "util.h"

TestSuite(cap, .init = tu_setup, .fini = tu_teardown, .timeout = 120);

#define MiB (UINT64_C(1) << 20)
/* the cap stores are made with: small, so that filling it is quick */
#define CAP (2 * MiB)

static bonsai_db *open_store_paged(const char *path, uint64_t max_size,
                                   int txn, uint32_t page_size)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = max_size;
    o.sync = 0;
    o.transactions = txn;
    o.page_size = page_size;
    bonsai_db *db;
    TU_OK(bonsai_open(path, &o, &db));
    return db;
}

static bonsai_db *open_store(const char *path, uint64_t max_size, int txn)
{
    return open_store_paged(path, max_size, txn, 0);
}

static uint64_t cap_of(bonsai_db *db)
{
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    return st.max_size;
}

static bonsai_map the_map(bonsai_db *db)
{
    bonsai_map m;
    int rc = bonsai_map_create(db, NULL, "m", BONSAI_KEY_U64, &m);
    cr_assert(rc == 0 || rc == BONSAI_EXISTS, "map: %s", tu_err(rc));
    return m;
}

/* Puts keys from *next on, 16-byte values, until BONSAI_FULL; returns how
 * many went in.  Random-looking keys, so that the store fills quickly. */
static uint64_t fill(bonsai_db *db, uint64_t *next)
{
    bonsai_map m = the_map(db);
    bonsai_val v = tu_val("0123456789abcdef", 16);
    uint64_t n = 0;
    for (;;) {
        uint64_t k = *next * UINT64_C(0x9E3779B97F4A7C15);
        int rc = bonsai_put_u64(NULL, m, k, &v, 0);
        if (rc == BONSAI_FULL)
            return n;
        cr_assert(rc == 0, "put %" PRIu64 ": %s", *next, tu_err(rc));
        (*next)++;
        n++;
    }
}

static uint64_t count_of(bonsai_db *db)
{
    uint64_t n;
    TU_OK(bonsai_count(NULL, the_map(db), &n));
    return n;
}

Test(cap, recorded_at_creation_and_used_by_default)
{
    const char *path = tu_path("c.db");
    bonsai_db *db = open_store(path, CAP, -1);
    cr_assert_eq(cap_of(db), CAP);
    uint64_t next = 0, n = fill(db, &next);
    cr_assert(n > 0);
    TU_OK(bonsai_close(db));

    db = open_store(path, 0, -1); /* defaults: the store's own cap */
    cr_assert_eq(cap_of(db), CAP, "cap %" PRIu64, cap_of(db));
    cr_assert_eq(fill(db, &next), 0, "the store grew past its cap");
    cr_assert_eq(count_of(db), n);
    TU_OK(bonsai_close(db));

    /* bonsai-stat shows it */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s | grep -q 'cap  *2097152 bytes'",
             tu_program("bonsai-stat"), tu_quote(path));
    cr_assert_eq(tu_sh(cmd), 0, "bonsai-stat does not show the 2 MiB cap");
}

Test(cap, opener_raises_it_and_the_commit_records_it)
{
    const char *path = tu_path("c.db");
    bonsai_db *db = open_store(path, CAP, -1);
    uint64_t next = 0, n = fill(db, &next);
    TU_OK(bonsai_close(db));

    db = open_store(path, 2 * CAP, -1);
    cr_assert_eq(cap_of(db), 2 * CAP);
    uint64_t more = fill(db, &next);
    cr_assert(more > 0, "no room after raising the cap");
    TU_OK(bonsai_close(db));

    db = open_store(path, 0, -1);
    cr_assert_eq(cap_of(db), 2 * CAP);
    cr_assert_eq(count_of(db), n + more);
    TU_OK(bonsai_close(db));
}

static void set_max_size_raises_and_lowers(int txn)
{
    const char *path = tu_path("c.db");
    bonsai_db *db = open_store(path, CAP, txn);
    uint64_t next = 0, n = fill(db, &next);
    TU_OK(bonsai_set_max_size(db, 2 * CAP));
    cr_assert_eq(cap_of(db), 2 * CAP);
    n += fill(db, &next);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert(st.bytes_used > CAP, "the store did not use the room");
    /* not below what it uses, nor below 64 KiB */
    TU_RC(bonsai_set_max_size(db, st.bytes_used - 4096), BONSAI_INVALID);
    TU_RC(bonsai_set_max_size(db, 1024), BONSAI_INVALID);
    cr_assert_eq(cap_of(db), 2 * CAP);
    /* lowered to what it uses: full, deletes still work */
    uint64_t low = (st.bytes_used + 65535) / 65536 * 65536;
    TU_OK(bonsai_set_max_size(db, low));
    cr_assert_eq(cap_of(db), low);
    cr_assert_eq(fill(db, &next), 0);
    TU_OK(bonsai_close(db));

    db = open_store(path, 0, txn);
    cr_assert_eq(cap_of(db), low, "reopened with cap %" PRIu64 ", not %"
                 PRIu64, cap_of(db), low);
    cr_assert_eq(count_of(db), n);
    TU_OK(bonsai_close(db));
}

Test(cap, set_max_size_with_transactions)
{
    set_max_size_raises_and_lowers(1);
}

Test(cap, set_max_size_without_transactions)
{
    set_max_size_raises_and_lowers(0);
}

Test(cap, set_max_size_anonymous)
{
    bonsai_db *db = open_store(NULL, 1 * MiB, -1);
    uint64_t next = 0, n = fill(db, &next);
    TU_OK(bonsai_set_max_size(db, 4 * MiB));
    cr_assert_eq(cap_of(db), 4 * MiB);
    uint64_t more = fill(db, &next);
    cr_assert(more > n, "4 MiB took %" PRIu64 " more, 1 MiB %" PRIu64, more,
              n);
    cr_assert_eq(count_of(db), n + more);
    TU_OK(bonsai_close(db));
}

static uint64_t bytes_used(bonsai_db *db)
{
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    return st.bytes_used;
}

/* cache_in_cap: in memory the cap holds the store and its write cache, so
 * a store filled to BONSAI_FULL leaves the cache's share of the cap; the
 * cache must be below half of the cap when the cap moves. */
Test(cap, cache_in_cap_leaves_the_cache_its_share)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = 8 * MiB;
    o.write_cache_bytes = 3 * MiB;
    o.cache_in_cap = 1;
    bonsai_db *db;
    TU_OK(bonsai_open(NULL, &o, &db));
    uint64_t next = 0, n = fill(db, &next);
    cr_assert(n > 0);
    uint64_t used = bytes_used(db);
    cr_assert(used <= 5 * MiB && used > 4 * MiB, "store of %" PRIu64
              " bytes at FULL, expected the 5 MiB the cache leaves", used);
    cr_assert_eq(count_of(db), n);
    TU_RC(bonsai_set_max_size(db, 6 * MiB), BONSAI_INVALID);
    TU_OK(bonsai_set_max_size(db, 16 * MiB));
    cr_assert(fill(db, &next) > 0, "no room after the cap was raised");
    cr_assert(bytes_used(db) <= 13 * MiB);
    TU_OK(bonsai_close(db));
}

/* Without cache_in_cap the store takes the whole cap; the cache must be
 * below half of the cap, and cache_in_cap is 0 or 1. */
Test(cap, cache_outside_the_cap_and_cache_in_cap_checked)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = 8 * MiB;
    o.write_cache_bytes = 3 * MiB;
    o.cache_in_cap = 0;
    bonsai_db *db;
    TU_OK(bonsai_open(NULL, &o, &db));
    uint64_t next = 0;
    fill(db, &next);
    cr_assert(bytes_used(db) > 7 * MiB);
    TU_OK(bonsai_close(db));
    o.cache_in_cap = 1;
    o.write_cache_bytes = 4 * MiB;
    cr_assert(strstr(bonsai_options_check(&o), "write_cache_bytes"));
    TU_RC(bonsai_open(NULL, &o, &db), BONSAI_INVALID);
    o.write_cache_bytes = 1 * MiB;
    o.cache_in_cap = 2;
    cr_assert(strstr(bonsai_options_check(&o), "cache_in_cap"));
}

Test(cap, read_only_handle_cannot_set_it)
{
    const char *path = tu_path("c.db");
    TU_OK(bonsai_close(open_store(path, CAP, -1)));
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    bonsai_db *db;
    TU_OK(bonsai_open(path, &o, &db));
    cr_assert_eq(cap_of(db), CAP);
    TU_RC(bonsai_set_max_size(db, 2 * CAP), BONSAI_READONLY);
    TU_OK(bonsai_close(db));
    TU_RC(bonsai_set_max_size(NULL, 2 * CAP), BONSAI_INVALID);
}

/* A file of format version 1 records no cap: it opens under the opener's
 * max_size or the default, and keeps its entries. */
Test(cap, version_1_file_opens)
{
    const char *path = tu_path("v1.db");
    /* made with the pages a version 1 file has: 512 bytes (smaller ones
     * came with version 2) */
    bonsai_db *db = open_store_paged(path, CAP, -1, 512);
    uint64_t next = 0, n = fill(db, &next);
    TU_OK(bonsai_close(db));

    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    uint8_t head[BX_HEAD_BYTES];
    cr_assert_eq(pread(fd, head, sizeof head, 0), (ssize_t)sizeof head);
    bx_header h;
    TU_OK(bx_header_decode(head, &h));
    cr_assert_eq(h.version, BX_FORMAT_VERSION);
    h.version = 1;
    bx_header_encode(&h, head);
    for (unsigned s = 0; s < 2; s++) {
        bx_meta m;
        if (bx_meta_decode(head + BX_META_OFF(s), &m) != 0)
            continue;
        cr_assert_eq(m.cap_pages * 512, CAP, "slot %u records %" PRIu64
                     " pages", s, m.cap_pages);
        m.cap_pages = 0;
        bx_meta_encode(&m, head + BX_META_OFF(s));
    }
    cr_assert_eq(pwrite(fd, head, sizeof head, 0), (ssize_t)sizeof head);
    close(fd);

    db = open_store(path, 0, -1);
    cr_assert_eq(cap_of(db), UINT64_C(1) << 30);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert_eq(st.format_version, 1);
    cr_assert_eq(count_of(db), n);
    TU_OK(bonsai_close(db));
    db = open_store(path, CAP / 2, -1);
    TU_OK(bonsai_db_stat(db, &st));
    /* not below what the file uses (its last commit's end; free space
     * derived at the end may leave bytes_used below that) */
    cr_assert(st.max_size > CAP / 2 && st.max_size >= st.bytes_used,
              "cap %" PRIu64 " below what the file uses (%" PRIu64 ")",
              st.max_size, st.bytes_used);
    TU_OK(bonsai_close(db));
}

/* SPDX-License-Identifier: MIT */
/*
 * test_pack.c - node compression at node level (the packed-image envelope)
 * and in whole stores: round trips for both codecs, images that do not
 * shrink, corrupt packed images answered with BONSAI_CORRUPT, and options
 * that shape the file kept and enforced on reopen.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "node.h"
#include "pack.h"
#include "util.h"

TestSuite(pack, .init = tu_setup, .fini = tu_teardown);

static const unsigned codecs[] = {BONSAI_COMPRESS_LZ4, BONSAI_COMPRESS_ZLIB};

/* The rules of a store of codec that takes any raw length the format
 * allows. */
static pk_rules rules_of(unsigned codec)
{
    return (pk_rules){codec, PK_MAX_RAW};
}

/* A raw leaf image of n u64 keys with the given gap and value bytes. */
static uint8_t *leaf_image(tu_rng *r, uint32_t n, uint64_t gap,
                           uint32_t vlen, int random_vals, size_t *len)
{
    bn_node node;
    bn_init(&node, BONSAI_KEY_U64, 1);
    uint64_t k = tu_rand(r) >> 8;
    uint8_t v[64];
    for (uint32_t i = 0; i < n; i++) {
        k += gap > 1 ? 1 + tu_below(r, gap) : 1;
        if (random_vals)
            tu_fill(r, v, vlen);
        else
            memset(v, (int)(i & 7), vlen);
        cr_assert_eq(bn_insert(&node, i, (bn_key){.u = k}, v, vlen, 0), 0);
    }
    size_t cap = bn_encoded_size(&node);
    uint8_t *img = malloc(cap);
    cr_assert_eq(bn_encode(&node, img, cap, len), 0);
    bn_clear(&node);
    return img;
}

static void round_trip(const uint8_t *raw, size_t len, unsigned codec)
{
    uint8_t *packed = malloc(len), *back = malloc(len);
    size_t plen;
    TU_OK(pk_pack(codec, 0, raw, len, packed, len, &plen));
    cr_assert(plen < len);
    cr_assert(pk_is_packed(packed));
    uint32_t raw_len;
    pk_rules rules = rules_of(codec);
    TU_OK(pk_check(packed, plen, &rules, &raw_len));
    cr_assert_eq(raw_len, len);
    TU_OK(pk_unpack(packed, back, raw_len));
    cr_assert_eq(memcmp(raw, back, len), 0, "codec %u changed the image",
                 codec);
    bn_info info;
    TU_OK(bn_img_check(back, len, BONSAI_KEY_U64, 1, &info));
    free(packed);
    free(back);
}

Test(pack, round_trip_both_codecs)
{
    tu_rng r = {tu_seed("pack.round_trip", 11)};
    size_t len;
    /* sequential keys store one step: the values give the bytes to pack */
    uint8_t *seq = leaf_image(&r, 4096, 1, 4, 0, &len);
    for (unsigned c = 0; c < 2; c++)
        round_trip(seq, len, codecs[c]);
    free(seq);
    uint8_t *vals = leaf_image(&r, 500, 1 << 20, 8, 0, &len);
    for (unsigned c = 0; c < 2; c++)
        round_trip(vals, len, codecs[c]);
    free(vals);
}

/* A store takes packed images of its own codec only (the header's), and
 * none when it has no compression. */
Test(pack, other_codec_refused)
{
    tu_rng r = {tu_seed("pack.other_codec", 14)};
    size_t len, plen;
    uint8_t *raw = leaf_image(&r, 1000, 1, 4, 0, &len);
    uint8_t *packed = malloc(len);
    static const unsigned all[] = {BONSAI_COMPRESS_NONE, BONSAI_COMPRESS_LZ4,
                                   BONSAI_COMPRESS_ZLIB};
    for (unsigned c = 0; c < 2; c++) {
        TU_OK(pk_pack(codecs[c], 0, raw, len, packed, len, &plen));
        for (unsigned s = 0; s < 3; s++) {
            pk_rules rules = rules_of(all[s]);
            uint32_t raw_len;
            TU_RC(pk_check(packed, plen, &rules, &raw_len),
                  all[s] == codecs[c] ? 0 : BONSAI_CORRUPT);
        }
    }
    free(packed);
    free(raw);
}

Test(pack, incompressible_image_stays_raw)
{
    tu_rng r = {tu_seed("pack.incompressible", 12)};
    size_t len, plen;
    uint8_t *img = leaf_image(&r, 300, UINT64_C(1) << 40, 32, 1, &len);
    uint8_t *out = malloc(len);
    for (unsigned c = 0; c < 2; c++)
        TU_RC(pk_pack(codecs[c], 0, img, len, out, len, &plen),
              BONSAI_NOTFOUND);
    free(out);
    free(img);
}

/* Every flipped bit of a packed image is caught by its checksum, and
 * unpacking whatever passes never crashes. */
Test(pack, corrupt_packed_images)
{
    tu_rng r = {tu_seed("pack.corrupt", 13)};
    size_t len;
    uint8_t *raw = leaf_image(&r, 1000, 1, 4, 0, &len);
    uint8_t *packed = malloc(len), *bad = malloc(len), *back = malloc(len);
    for (unsigned c = 0; c < 2; c++) {
        size_t plen;
        TU_OK(pk_pack(codecs[c], 0, raw, len, packed, len, &plen));
        for (size_t bit = 0; bit < plen * 8; bit++) {
            memcpy(bad, packed, plen);
            bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            uint32_t raw_len;
            pk_rules rules = rules_of(codecs[c]);
            int rc = pk_is_packed(bad) ? pk_check(bad, plen, &rules, &raw_len)
                                       : BONSAI_CORRUPT;
            cr_assert_eq(rc, BONSAI_CORRUPT, "codec %u bit %zu not caught",
                         codecs[c], bit);
        }
        /* a body that lies past the checksum check: unpacking refuses it,
         * or yields an image its own checks refuse */
        memcpy(bad, packed, plen);
        bad[plen - 1] ^= 0x5a;
        uint32_t raw_len = (uint32_t)len;
        int rc = pk_unpack(bad, back, raw_len);
        cr_assert(rc == 0 || rc == BONSAI_CORRUPT);
        if (rc == 0)
            cr_assert_neq(bn_img_check(back, raw_len, BONSAI_KEY_U64, 1,
                                       &(bn_info){0}),
                          0);
    }
    free(raw);
    free(packed);
    free(bad);
    free(back);
}

/* ---- whole stores -------------------------------------------------------- */

static void fill_and_check(unsigned codec)
{
    const char *path = tu_path(codec == BONSAI_COMPRESS_LZ4 ? "lz4.db"
                                                            : "zlib.db");
    bonsai_options o;
    bonsai_options_init(&o);
    o.compression = codec;
    o.node_bytes = 16384;
    o.node_entries = 2000;
    bonsai_db *db;
    TU_OK(bonsai_open(path, &o, &db));
    bonsai_map m;
    TU_OK(bonsai_map_create(db, NULL, "m", BONSAI_KEY_U64, &m));
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    char v[16];
    for (uint64_t k = 0; k < 50000; k++) {
        snprintf(v, sizeof v, "v%llu", (unsigned long long)(k % 97));
        bonsai_val val = {strlen(v), v};
        TU_OK(bonsai_put_u64(t, m, k * 3, &val, 0));
    }
    TU_OK(bonsai_txn_commit(t));
    bonsai_map_info mi;
    TU_OK(bonsai_map_stat(NULL, m, &mi));
    cr_assert(mi.stored_bytes * 2 < mi.raw_bytes,
              "codec %u: stored %llu of %llu raw bytes", codec,
              (unsigned long long)mi.stored_bytes,
              (unsigned long long)mi.raw_bytes);
    TU_OK(bonsai_close(db));

    /* reopened with other options: the file's own settings win */
    bonsai_options_init(&o);
    o.node_bytes = 1024;
    o.node_entries = 8;
    o.sync = 0; /* 20 k commits below: what they keep, not their fsyncs */
    TU_OK(bonsai_open(path, &o, &db));
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert_eq(st.node_bytes, 16384);
    cr_assert_eq(st.node_entries, 2000);
    TU_OK(bonsai_map_open(db, NULL, "m", &m, NULL));
    uint64_t count;
    TU_OK(bonsai_count(NULL, m, &count));
    cr_assert_eq(count, 50000);
    bonsai_txn *r;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &r));
    for (uint64_t k = 0; k < 50000; k += 7) {
        bonsai_val got;
        TU_OK(bonsai_get_u64(r, m, k * 3, &got));
        snprintf(v, sizeof v, "v%llu", (unsigned long long)(k % 97));
        cr_assert(got.size == strlen(v) && !memcmp(got.data, v, got.size));
        TU_RC(bonsai_get_u64(r, m, k * 3 + 1, &got), BONSAI_NOTFOUND);
    }
    bonsai_cursor *c;
    TU_OK(bonsai_cursor_open(r, m, &c));
    uint64_t n = 0, prev = 0, key = 0;
    for (int rc = bonsai_cursor_first(c); rc == 0; rc = bonsai_cursor_next(c)) {
        TU_OK(bonsai_cursor_get_u64(c, &key, NULL));
        cr_assert(n == 0 || key > prev);
        prev = key;
        n++;
    }
    cr_assert_eq(n, 50000);
    bonsai_cursor_close(c);
    bonsai_txn_abort(r);
    /* the compression is kept for new nodes too */
    for (uint64_t k = 0; k < 20000; k++)
        TU_OK(bonsai_put_u64(NULL, m, 1000000 + k, NULL, 0));
    TU_OK(bonsai_map_stat(NULL, m, &mi));
    cr_assert(mi.stored_bytes * 2 < mi.raw_bytes);
    TU_OK(bonsai_close(db));
}

Test(pack, lz4_store_round_trip_and_reopen) { fill_and_check(1); }
Test(pack, zlib_store_round_trip_and_reopen) { fill_and_check(2); }

Test(pack, bad_compression_option)
{
    bonsai_options o;
    bonsai_options_init(&o);
    bonsai_db *db;
    o.compression = 3;
    TU_RC(bonsai_open(NULL, &o, &db), BONSAI_INVALID);
    o.compression = BONSAI_COMPRESS_ZLIB;
    o.compression_level = 10;
    TU_RC(bonsai_open(NULL, &o, &db), BONSAI_INVALID);
}

/* Flipping bytes inside a packed node of a store: reads report
 * BONSAI_CORRUPT (or, where the flip misses what they read, work), never
 * crash. */
Test(pack, corrupt_node_in_store)
{
    const char *path = tu_path("flip.db");
    bonsai_options o;
    bonsai_options_init(&o);
    o.compression = BONSAI_COMPRESS_LZ4;
    o.sync = 0; /* a commit a put: the flips matter here, not fsyncs */
    bonsai_db *db;
    TU_OK(bonsai_open(path, &o, &db));
    bonsai_map m;
    TU_OK(bonsai_map_create(db, NULL, "m", BONSAI_KEY_U64, &m));
    for (uint64_t k = 0; k < 20000; k++)
        TU_OK(bonsai_put_u64(NULL, m, k, NULL, 0));
    TU_OK(bonsai_close(db));
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    tu_rng r = {tu_seed("pack.corrupt_store", 14)};
    for (int i = 0; i < 64; i++) {
        long at = 4096 + (long)tu_below(&r, (uint64_t)(size - 4096));
        fseek(f, at, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(ch ^ 0xff, f);
    }
    fclose(f);
    int rc = bonsai_open(path, &o, &db);
    cr_assert(rc == 0 || rc == BONSAI_CORRUPT, "open -> %s", tu_err(rc));
    if (rc)
        return;
    rc = bonsai_map_open(db, NULL, "m", &m, NULL);
    if (rc == 0) {
        for (uint64_t k = 0; k < 20000; k += 13) {
            bonsai_val v;
            rc = bonsai_get_u64(NULL, m, k, &v);
            cr_assert(rc == 0 || rc == BONSAI_CORRUPT || rc == BONSAI_NOTFOUND,
                      "get -> %s", tu_err(rc));
        }
    }
    bonsai_close(db);
}

/* SPDX-License-Identifier: MIT */
/*
 * make_corpus.c - writes the seed corpora of the fuzz harnesses.
 *
 *   make_corpus ROOT [node|file|ops|compress|u64groups ...]
 *                                                   (default: all five)
 *
 * writes ROOT/<harness>/<seed> for each harness named.  Everything is made
 * by the library itself, deterministically (fixed seeds), so the seeds are
 * real: node images from bn_encode and pk_pack, compressed streams from
 * bx_compress, store files from the public API (cut to their high-water
 * mark so they stay a few pages), op programs in the ops harness's own
 * encoding, groups forms of u64 key sections from ug_put over keys placed
 * by ug_place.  Each seed is under 64 KiB; existing files of the same name
 * are replaced, others are left alone.  Exit 0, 1 on an error, 2 usage.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bonsai.h"
#include "bytes.h"
#include "compress.h"
#include "meta.h"
#include "node.h"
#include "pack.h"
#include "u64groups.h"

/* the ops harness's opcodes and configuration bits */
#define FUZZ_REPLAY 1
#include "fuzz_ops.c"

#define MAX_SEED (64u * 1024u)

static const char *g_root;
static int g_failed;
static unsigned g_written;

static void die(const char *what, int rc)
{
    fprintf(stderr, "make_corpus: %s: %s\n", what,
            rc ? bonsai_strerror(rc) : strerror(errno));
    exit(1);
}

static void seed(const char *harness, const char *name, const uint8_t *p,
                 size_t n)
{
    char path[4096];
    if (n > MAX_SEED) {
        fprintf(stderr, "make_corpus: %s/%s is %zu bytes, over %u: skipped\n",
                harness, name, n, MAX_SEED);
        g_failed = 1;
        return;
    }
    snprintf(path, sizeof path, "%s/%s", g_root, harness);
    mkdir(g_root, 0755);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        die(path, 0);
    snprintf(path, sizeof path, "%s/%s/%s", g_root, harness, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0)
        die(path, 0);
    g_written++;
}

static uint64_t g_rng = 0x5EEDC0DE;

static uint64_t rnd(void)
{
    return fz_mix(g_rng++);
}

/* ---- node images ------------------------------------------------------------ */

typedef struct img {
    uint8_t *p;
    size_t n;
} img;

static img encode(const bn_node *node)
{
    img r;
    r.n = bn_encoded_size(node);
    r.p = malloc(r.n);
    size_t len;
    int rc;
    if (!r.p || (rc = bn_encode(node, r.p, r.n, &len)) != 0 || len != r.n)
        die("bn_encode", r.p ? BONSAI_INVALID : BONSAI_NOMEM);
    return r;
}

/* ctl byte (kind, fix-crc) then the image */
static void node_seed(const char *name, unsigned kind, int fix, img im)
{
    uint8_t *b = malloc(im.n + 1);
    if (!b)
        die("malloc", BONSAI_NOMEM);
    b[0] = (uint8_t)((kind == BONSAI_KEY_U64 ? 1 : 0) | (fix ? 2 : 0) |
                     (rnd() & 0xfc));
    memcpy(b + 1, im.p, im.n);
    seed("node", name, b, im.n + 1);
    free(b);
}

static void packed_seeds(const char *name, unsigned kind, img raw)
{
    static const unsigned codecs[2] = {BONSAI_COMPRESS_LZ4,
                                       BONSAI_COMPRESS_ZLIB};
    for (int c = 0; c < 2; c++) {
        img pk;
        pk.p = malloc(raw.n);
        int rc = pk.p ? pk_pack(codecs[c], 6, raw.p, raw.n, pk.p, raw.n,
                                &pk.n)
                      : BONSAI_NOMEM;
        if (rc == BONSAI_NOTFOUND) { /* does not shrink: no seed */
            free(pk.p);
            continue;
        }
        if (rc)
            die("pk_pack", rc);
        char nm[256];
        snprintf(nm, sizeof nm, "%s-packed-%s", name, c ? "zlib" : "lz4");
        node_seed(nm, kind, 1, pk);
        free(pk.p);
    }
}

static void leaf_u64(bn_node *n, const uint64_t *keys, uint32_t count,
                     const uint32_t *vlen, const uint8_t *vflag)
{
    static uint8_t val[256];
    for (unsigned i = 0; i < sizeof val; i++)
        val[i] = (uint8_t)(i * 7 + 1);
    bn_init(n, BONSAI_KEY_U64, 1);
    for (uint32_t i = 0; i < count; i++) {
        bn_key k = {keys[i], NULL, 0};
        int rc = bn_insert(n, i, k, val, vlen ? vlen[i] : 0,
                           vflag ? vflag[i] : 0);
        if (rc)
            die("bn_insert", rc);
    }
}

static void bytes_key(uint32_t i, unsigned style, uint8_t *buf,
                      uint32_t *len)
{
    /* sorted by construction: a fixed prefix, then the index big-endian */
    static const char *prefixes[3] = {"", "user:", "com.example.bonsai/"};
    const char *p = prefixes[style % 3];
    size_t pl = strlen(p);
    memcpy(buf, p, pl);
    buf[pl] = (uint8_t)(i >> 8);
    buf[pl + 1] = (uint8_t)i;
    *len = (uint32_t)(pl + 2 + (i % 3));
    for (uint32_t j = (uint32_t)pl + 2; j < *len; j++)
        buf[j] = 'a';
}

static void make_node(void)
{
    bn_node n;
    uint64_t keys[300];
    uint32_t vlen[300];
    uint8_t vflag[300];

    /* the worked example of format.md */
    uint64_t ex[4] = {1000, 1001, 1003, 1010};
    leaf_u64(&n, ex, 4, NULL, NULL);
    img im = encode(&n);
    node_seed("u64-leaf-example", BONSAI_KEY_U64, 1, im);
    node_seed("u64-leaf-example-nofix", BONSAI_KEY_U64, 0, im);
    free(im.p);
    bn_clear(&n);

    /* consecutive keys, fixed 8-byte values */
    for (uint32_t i = 0; i < 200; i++)
        keys[i] = 5000 + i, vlen[i] = 8;
    leaf_u64(&n, keys, 200, vlen, NULL);
    im = encode(&n);
    node_seed("u64-leaf-fixed", BONSAI_KEY_U64, 1, im);
    packed_seeds("u64-leaf-fixed", BONSAI_KEY_U64, im);
    free(im.p);
    bn_clear(&n);

    /* scattered keys (several groups, wide deltas), general values */
    uint64_t k = 3;
    for (uint32_t i = 0; i < 150; i++) {
        k += 1 + (rnd() >> (i % 3 ? 40 : 8));
        keys[i] = k;
        vlen[i] = (uint32_t)(rnd() % 41);
    }
    leaf_u64(&n, keys, 150, vlen, NULL);
    im = encode(&n);
    node_seed("u64-leaf-general", BONSAI_KEY_U64, 1, im);
    packed_seeds("u64-leaf-general", BONSAI_KEY_U64, im);
    free(im.p);
    bn_clear(&n);

    /* overflow references among inline values */
    for (uint32_t i = 0; i < 20; i++) {
        keys[i] = UINT64_MAX - 40 + 2 * i;
        vflag[i] = i % 4 == 1;
        vlen[i] = vflag[i] ? 20 : i;
    }
    leaf_u64(&n, keys, 20, vlen, vflag);
    im = encode(&n);
    node_seed("u64-leaf-overflow", BONSAI_KEY_U64, 1, im);
    free(im.p);
    bn_clear(&n);

    /* an empty leaf of each kind */
    bn_init(&n, BONSAI_KEY_U64, 1);
    im = encode(&n);
    node_seed("u64-leaf-empty", BONSAI_KEY_U64, 1, im);
    free(im.p);
    bn_clear(&n);
    bn_init(&n, BONSAI_KEY_BYTES, 1);
    im = encode(&n);
    node_seed("bytes-leaf-empty", BONSAI_KEY_BYTES, 1, im);
    free(im.p);
    bn_clear(&n);

    /* a u64 branch */
    bn_init(&n, BONSAI_KEY_U64, 0);
    for (uint32_t i = 0; i < 50; i++) {
        bn_key bk = {(uint64_t)i * i * 977, NULL, 0};
        bn_child ch = {{8 + (uint64_t)i * 3, 1 + i % 3}, NULL};
        int rc = bn_insert_child(&n, i, bk, ch);
        if (rc)
            die("bn_insert_child", rc);
    }
    im = encode(&n);
    node_seed("u64-branch", BONSAI_KEY_U64, 1, im);
    free(im.p);
    bn_clear(&n);

    /* the byte-key example of format.md */
    static const char *fruit[3] = {"apple", "apply", "banana"};
    static const char *fval[3] = {"1", "22", "333"};
    bn_init(&n, BONSAI_KEY_BYTES, 1);
    for (uint32_t i = 0; i < 3; i++) {
        bn_key bk = {0, (const uint8_t *)fruit[i],
                     (uint32_t)strlen(fruit[i])};
        int rc = bn_insert(&n, i, bk, (const uint8_t *)fval[i],
                           (uint32_t)strlen(fval[i]), 0);
        if (rc)
            die("bn_insert", rc);
    }
    im = encode(&n);
    node_seed("bytes-leaf-example", BONSAI_KEY_BYTES, 1, im);
    node_seed("bytes-leaf-example-nofix", BONSAI_KEY_BYTES, 0, im);
    free(im.p);
    bn_clear(&n);

    /* byte keys with shared prefixes (several restarts): empty, fixed and
     * general values */
    for (unsigned style = 0; style < 3; style++) {
        bn_init(&n, BONSAI_KEY_BYTES, 1);
        uint32_t count = style == 0 ? 100 : 40;
        for (uint32_t i = 0; i < count; i++) {
            uint8_t kb[64];
            uint32_t kl;
            bytes_key(i, style, kb, &kl);
            bn_key bk = {0, kb, kl};
            uint32_t vl = style == 0 ? 0 : style == 1 ? 4 : i % 9;
            int rc = bn_insert(&n, i, bk, (const uint8_t *)"valuevalue", vl,
                               0);
            if (rc)
                die("bn_insert", rc);
        }
        im = encode(&n);
        static const char *names[3] = {"bytes-leaf-prefix-empty",
                                       "bytes-leaf-prefix-fixed",
                                       "bytes-leaf-prefix-general"};
        node_seed(names[style], BONSAI_KEY_BYTES, 1, im);
        if (style != 1)
            packed_seeds(names[style], BONSAI_KEY_BYTES, im);
        free(im.p);
        bn_clear(&n);
    }

    /* a byte-key branch */
    bn_init(&n, BONSAI_KEY_BYTES, 0);
    for (uint32_t i = 0; i < 30; i++) {
        uint8_t kb[64];
        uint32_t kl;
        bytes_key(i * 5, 2, kb, &kl);
        if (i == 0)
            kb[0] = 0, kl = 1; /* the lowest key a new root carries */
        bn_key bk = {0, kb, kl};
        bn_child ch = {{8 + (uint64_t)i, 1}, NULL};
        int rc = bn_insert_child(&n, i, bk, ch);
        if (rc)
            die("bn_insert_child", rc);
    }
    im = encode(&n);
    node_seed("bytes-branch", BONSAI_KEY_BYTES, 1, im);
    free(im.p);
    bn_clear(&n);
}

/* ---- compressed streams ------------------------------------------------------ */

static void stream_seed(const char *name, unsigned codec, const uint8_t *raw,
                        size_t raw_len)
{
    size_t bound = bx_compress_bound(codec, raw_len);
    uint8_t *b = malloc(4 + bound);
    if (!b)
        die("malloc", BONSAI_NOMEM);
    size_t clen = 0;
    int rc = bx_compress(codec, 6, raw, raw_len, b + 4, bound, &clen);
    if (rc == BONSAI_NOTFOUND) { /* stored raw: seed the bytes themselves */
        memcpy(b + 4, raw, raw_len);
        clen = raw_len;
    } else if (rc) {
        die("bx_compress", rc);
    }
    b[0] = (uint8_t)raw_len;
    b[1] = (uint8_t)(raw_len >> 8);
    b[2] = (uint8_t)(raw_len >> 16);
    b[3] = 6;
    seed("compress", name, b, 4 + clen);
    free(b);
}

static void make_compress(void)
{
    /* node images, as the envelope carries them */
    bn_node n;
    uint64_t keys[200];
    uint32_t vlen[200];
    for (uint32_t i = 0; i < 200; i++)
        keys[i] = 1000 + 3 * i, vlen[i] = i % 5;
    leaf_u64(&n, keys, 200, vlen, NULL);
    img im = encode(&n);
    stream_seed("lz4-u64-leaf", BONSAI_COMPRESS_LZ4, im.p, im.n);
    stream_seed("zlib-u64-leaf", BONSAI_COMPRESS_ZLIB, im.p, im.n);
    free(im.p);
    bn_clear(&n);

    char text[2048];
    size_t tl = 0;
    while (tl + 40 < sizeof text)
        tl += (size_t)snprintf(text + tl, sizeof text - tl,
                               "key%05zu=value-%zu;", tl, tl % 97);
    stream_seed("lz4-text", BONSAI_COMPRESS_LZ4, (uint8_t *)text, tl);
    stream_seed("zlib-text", BONSAI_COMPRESS_ZLIB, (uint8_t *)text, tl);

    uint8_t zeros[4096] = {0};
    stream_seed("lz4-zeros", BONSAI_COMPRESS_LZ4, zeros, sizeof zeros);
    stream_seed("zlib-zeros", BONSAI_COMPRESS_ZLIB, zeros, sizeof zeros);

    uint8_t noise[64];
    for (size_t i = 0; i < sizeof noise; i++)
        noise[i] = (uint8_t)rnd();
    stream_seed("raw-noise", BONSAI_COMPRESS_NONE, noise, sizeof noise);

    static const uint8_t empty[4] = {0, 0, 0, 0};
    seed("compress", "empty", empty, sizeof empty);
}

/* ---- store files ------------------------------------------------------------- */

typedef struct store_cfg {
    const char *name;
    uint32_t page_size, node_bytes, node_entries;
    unsigned compression;
    int transactions;
    unsigned u64s, byteses;  /* entries in map "u" (u64) and "b" (bytes) */
    int overflow;            /* some values over node_bytes / 4 */
    int history;             /* more commits: deletes, a dropped map */
    int fix;                 /* byte 32 = 'F': the harness repairs CRCs */
} store_cfg;

static void check(int rc, const char *what)
{
    if (rc)
        die(what, rc);
}

static void fill_store(bonsai_db *db, const store_cfg *c)
{
    bonsai_map u = NULL, b = NULL;
    check(bonsai_map_create(db, NULL, "u", BONSAI_KEY_U64, &u), "map u");
    check(bonsai_map_create(db, NULL, "b", BONSAI_KEY_BYTES, &b), "map b");
    uint8_t val[400];
    for (size_t i = 0; i < sizeof val; i++)
        val[i] = (uint8_t)(i % 26 + 'a');
    for (unsigned i = 0; i < c->u64s; i++) {
        size_t vl = c->overflow && i % 7 == 3 ? 300 : i % 12;
        bonsai_val v = {vl, val};
        check(bonsai_put_u64(NULL, u, (uint64_t)i * 37 + 5, &v, 0), "put u");
    }
    for (unsigned i = 0; i < c->byteses; i++) {
        uint8_t kb[64];
        uint32_t kl;
        bytes_key(i, i % 3, kb, &kl);
        size_t vl = c->overflow && i % 5 == 2 ? 200 : 4;
        bonsai_val k = {kl, kb}, v = {vl, val};
        check(bonsai_put(NULL, b, &k, &v, 0), "put b");
    }
    if (!c->history)
        return;
    for (unsigned i = 0; i < c->u64s; i += 3)
        check(bonsai_del_u64(NULL, u, (uint64_t)i * 37 + 5), "del u");
    bonsai_map t = NULL;
    check(bonsai_map_create(db, NULL, "temp", BONSAI_KEY_U64, &t), "temp");
    for (unsigned i = 0; i < 30; i++)
        check(bonsai_put_u64(NULL, t, i, NULL, 0), "put temp");
    check(bonsai_map_drop(db, NULL, "temp"), "drop temp");
}

/* Reads path, cuts it at the newest meta slot's high-water mark. */
static void store_seed(const store_cfg *c, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path, 0);
    static uint8_t buf[8u << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n < BX_HEAD_BYTES)
        die("store smaller than its head", BONSAI_CORRUPT);
    bx_meta m[2];
    int ok0 = bx_meta_decode(buf + BX_META_OFF(0), &m[0]) == 0;
    int ok1 = bx_meta_decode(buf + BX_META_OFF(1), &m[1]) == 0;
    if (!ok0 && !ok1)
        die("no valid meta slot", BONSAI_CORRUPT);
    const bx_meta *use = !ok0 || (ok1 && m[1].txn_id > m[0].txn_id) ? &m[1]
                                                                   : &m[0];
    uint32_t ps = get_le32(buf + 12);
    size_t cut = (size_t)(use->end * ps);
    if (cut < BX_HEAD_BYTES)
        cut = BX_HEAD_BYTES;
    if (cut > n)
        die("meta end beyond the file", BONSAI_CORRUPT);
    if (c->fix)
        buf[32] = 'F';
    seed("file", c->name, buf, cut);
}

static void make_file(void)
{
    static const store_cfg cfgs[] = {
        {"empty", 512, 4096, 4096, 0, 1, 0, 0, 0, 0, 1},
        {"empty-nofix", 512, 4096, 4096, 0, 1, 0, 0, 0, 0, 0},
        {"small-512", 512, 256, 8, 0, 1, 30, 20, 0, 0, 1},
        {"small-512-nofix", 512, 256, 8, 0, 1, 30, 20, 0, 0, 0},
        {"small-lz4", 512, 512, 16, BONSAI_COMPRESS_LZ4, 1, 60, 40, 0, 0, 1},
        {"small-zlib", 512, 512, 16, BONSAI_COMPRESS_ZLIB, 1, 60, 40, 0, 0,
         1},
        {"overflow", 512, 256, 8, 0, 1, 20, 12, 1, 0, 1},
        {"overflow-lz4", 512, 256, 8, BONSAI_COMPRESS_LZ4, 1, 20, 12, 1, 0,
         1},
        {"history", 512, 256, 8, 0, 1, 40, 10, 0, 1, 1},
        {"deep-tree", 512, 256, 4, 0, 1, 60, 30, 0, 0, 1},
        {"page-4096", 4096, 1024, 32, 0, 1, 40, 20, 0, 0, 1},
        {"page-64-zlib", 64, 512, 16, BONSAI_COMPRESS_ZLIB, 1, 60, 40, 0, 0,
         1},
        {"page-64-overflow", 64, 256, 8, 0, 1, 20, 12, 1, 0, 1},
        {"no-txn", 512, 256, 8, 0, 0, 30, 20, 1, 1, 1},
    };
    char dir[] = "/tmp/bonsai-corpus-XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp", 0);
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const store_cfg *c = &cfgs[i];
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bonsai", dir, c->name);
        bonsai_options o;
        bonsai_options_init(&o);
        o.page_size = c->page_size;
        o.node_bytes = c->node_bytes;
        o.node_entries = c->node_entries;
        o.compression = c->compression;
        o.transactions = c->transactions;
        o.sync = 0;
        o.max_size = UINT64_C(16) << 20;
        bonsai_db *db = NULL;
        check(bonsai_open(path, &o, &db), "bonsai_open");
        if (c->u64s || c->byteses)
            fill_store(db, c);
        check(bonsai_close(db), "bonsai_close");
        store_seed(c, path);
        unlink(path);
    }
    rmdir(dir);
}

/* ---- op programs ------------------------------------------------------------- */

typedef struct prog {
    uint8_t b[4096];
    size_t n;
} prog;

static void emit(prog *p, unsigned v)
{
    if (p->n < sizeof p->b)
        p->b[p->n++] = (uint8_t)v;
}

static void emit_op(prog *p, unsigned op, unsigned var)
{
    emit(p, op + FO_NOPS * var);
}

/* fo_pick_key operand: a generated key (a, b = 0: a small u64 / one short
 * byte key per a) */
static void emit_genkey(prog *p, unsigned a, unsigned b)
{
    emit(p, 1);
    emit(p, 0); /* r odd: generate */
    emit(p, a);
    emit(p, b);
}

/* fo_pick_key operand: the model's entry idx (mod its size) */
static void emit_present(prog *p, unsigned idx)
{
    emit(p, (idx << 1) & 0xff);
    emit(p, (idx >> 7) & 0xff);
}

static void prog_growth(prog *p, unsigned cfg)
{
    emit(p, cfg);
    for (unsigned i = 0; i < 6; i++) {
        emit_op(p, OP_BULK_PUT, i & 1);
        emit(p, 63);             /* count - 1 */
        emit(p, 17 * i);         /* key a */
        emit(p, 0);              /* key b */
        emit(p, i * 3);          /* value length */
    }
    emit_op(p, OP_CHECK, 0);
    for (unsigned i = 0; i < 12; i++) {
        emit_op(p, OP_PUT, i & 3);
        emit_genkey(p, 200 + i, i * 9);
        emit(p, i < 4 ? 230 + i : 100 + i * 10); /* some overflow values */
    }
    emit_op(p, OP_PCURSOR, 0); /* first */
    for (unsigned i = 0; i < 6; i++)
        emit_op(p, OP_PCURSOR, 3); /* next */
    emit_op(p, OP_DEL, 0);
    emit_present(p, 5);
    emit_op(p, OP_PCURSOR, 7); /* get after a delete */
    emit_op(p, OP_PCURSOR, 5); /* prev */
    emit_op(p, OP_BULK_DEL, 0);
    emit(p, 40);
    emit_present(p, 10);
    emit_op(p, OP_CURSOR, 2);
    emit_present(p, 3);
    emit(p, 0x5a);
    emit_op(p, OP_COMMIT, 0);
    emit_op(p, OP_REOPEN, 1);
    emit_op(p, OP_CHECK, 0);
}

static void prog_txns(prog *p, unsigned cfg)
{
    emit(p, cfg);
    emit_op(p, OP_BEGIN, 0);
    for (unsigned i = 0; i < 20; i++) {
        emit_op(p, OP_PUT, 0);
        emit_genkey(p, i * 11, 0);
        emit(p, i * 13);
    }
    emit_op(p, OP_SNAPSHOT, 0); /* begins: sees the last commit */
    emit_op(p, OP_COMMIT, 0);
    emit_op(p, OP_SNAPSHOT, 2); /* a read in the old snapshot */
    emit_present(p, 0);
    emit_op(p, OP_BEGIN, 0);
    emit_op(p, OP_DEL, 0);
    emit_present(p, 2);
    emit_op(p, OP_DECOY, 1); /* a put into the other map */
    emit_genkey(p, 7, 0);
    emit(p, 5);
    emit_op(p, OP_ABORT, 0);
    emit_op(p, OP_SNAPSHOT, 1); /* autocommit read */
    emit_present(p, 1);
    emit_op(p, OP_SNAPSHOT, 0); /* ends */
    emit_op(p, OP_DECOY, 0);    /* drop and recreate */
    emit_op(p, OP_BEGIN, 0);
    emit_op(p, OP_PCURSOR, 2);  /* seek */
    emit_present(p, 4);
    emit_op(p, OP_PUT2, 0);
    emit_genkey(p, 150, 64);
    emit(p, 240);
    emit_op(p, OP_PCURSOR, 3);
    emit_op(p, OP_REOPEN, 0);   /* aborts the open txn */
    emit_op(p, OP_CHECK, 0);
}

/* Batches of gets: present keys, absent ones, repeats; without and in a
 * write transaction, the u64 form too (var 10). */
static void prog_batch(prog *p, unsigned cfg)
{
    emit(p, cfg);
    for (unsigned i = 0; i < 30; i++) {
        emit_op(p, OP_PUT, 0);
        emit_genkey(p, i * 7, 64 + i);
        emit(p, i * 9);
    }
    emit_op(p, OP_GET, 8);
    emit(p, 12);
    for (unsigned i = 0; i < 12; i++) {
        if (i % 3)
            emit_present(p, i * 5 % 7);
        else
            emit_genkey(p, 200 + i, 0);
    }
    emit_op(p, OP_BEGIN, 0);
    emit_op(p, OP_DEL, 0);
    emit_present(p, 3);
    emit_op(p, OP_PUT, 0);
    emit_genkey(p, 99, 70);
    emit(p, 230);
    emit_op(p, OP_GET, 10);
    emit(p, 6);
    for (unsigned i = 0; i < 6; i++)
        emit_present(p, i);
    emit_op(p, OP_COMMIT, 0);
    emit_op(p, OP_CHECK, 0);
}

/* The ops program gen makes for cfg, seeded as NAME-cfgXX. */
static void seed_prog(void (*gen)(prog *, unsigned), const char *name,
                      unsigned cfg)
{
    prog p;
    char file[64];
    p.n = 0;
    gen(&p, cfg);
    snprintf(file, sizeof file, "%s-cfg%02x", name, cfg);
    seed("ops", file, p.b, p.n);
}

static void make_ops(void)
{
    /* a spread of configurations: both kinds, every mode, codec, cache
     * and node shape appear */
    static const unsigned cfgs[] = {
        0x00, 0x20, 0x06, 0x26, 0x4a, 0x6c, 0x93, 0xb5, 0xd8, 0xfe,
        0x31, 0x7b,
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        seed_prog(prog_growth, "growth", cfgs[i]);
        seed_prog(prog_txns, "txns", cfgs[i]);
    }
    static const unsigned batch_cfgs[] = {0x02, 0x10, 0x63, 0xd2};
    for (size_t i = 0; i < sizeof batch_cfgs / sizeof batch_cfgs[0]; i++)
        seed_prog(prog_batch, "batch", batch_cfgs[i]);
    /* a few random programs */
    for (unsigned i = 0; i < 4; i++) {
        prog p;
        char name[64];
        p.n = 300;
        for (size_t j = 0; j < p.n; j++)
            p.b[j] = (uint8_t)rnd();
        snprintf(name, sizeof name, "random-%u", i);
        seed("ops", name, p.b, p.n);
    }
}

/* ---- u64 key sections ---------------------------------------------------------- */

/* A key section's keys and group flags, kept sorted (room for cap). */
typedef struct keyset {
    uint32_t n, cap;
    uint64_t *k;
    uint64_t *start;
} keyset;

/* Puts key as a node would: in order, then ug_place; 0 if it was there. */
static int put_key(keyset *s, uint64_t key)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->k[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < s->n && s->k[lo] == key)
        return 0;
    if (s->n == s->cap)
        die("put_key: keyset full", BONSAI_INVALID);
    memmove(s->k + lo + 1, s->k + lo, (s->n - lo) * sizeof s->k[0]);
    ug_open(s->start, s->n, lo, 1);
    s->k[lo] = key;
    s->n++;
    ug_place(s->k, s->start, s->n, lo);
    return 1;
}

/* Key shapes: anywhere; dense in a small range; near 2^64 - 1; clusters
 * with wide gaps between them; nearly even. */
static uint64_t shaped_key(unsigned shape, uint64_t base)
{
    uint64_t r = rnd();
    switch (shape) {
    case 0: return r;
    case 1: return base + r % 4000;
    case 2: return UINT64_MAX - r % 100000;
    case 3: return base + ((r >> 61) << 40) + r % (1u << 20);
    default: { /* nearly even: groups with a base */
        uint64_t slot = r % 2200;
        return base + slot * 1000 + (slot * 2654435761u >> 7) % 11;
    }
    }
}

/* first, n - 2 (u16), control, then the form of s */
static void groups_seed(const char *name, const keyset *s, unsigned ctl)
{
    if (!ug_grouping_ok(s->start, s->n))
        die("ug_grouping_ok", BONSAI_INVALID);
    size_t len = ug_len(s->k, s->start, s->n);
    uint8_t *b = malloc(11 + len);
    if (!b)
        die("malloc", BONSAI_NOMEM);
    put_le64(b, s->k[0]);
    put_le16(b + 8, (uint16_t)(s->n - 2));
    b[10] = (uint8_t)ctl;
    if (ug_put(s->k, s->start, s->n, b + 11) != b + 11 + len)
        die("ug_put", BONSAI_INVALID);
    seed("u64groups", name, b, 11 + len);
    free(b);
}

static void make_u64groups(void)
{
    static const char *shapes[5] = {"random", "dense", "high", "clustered",
                                    "even"};
    static const uint32_t sizes[5][3] = {
        {2, 100, 2000}, {10, 600, 2000}, {10, 100, 600}, {100, 600, 2000},
        {100, 600, 2000},
    };
    /* a sequence of its own: the same seeds whichever harnesses ran
     * before */
    g_rng = 0x5EED6401;
    keyset s;
    s.cap = 2000;
    s.k = malloc(s.cap * sizeof s.k[0]);
    s.start = malloc(UG_WORDS(s.cap) * sizeof s.start[0]);
    if (!s.k || !s.start)
        die("malloc", BONSAI_NOMEM);
    for (unsigned shape = 0; shape < 5; shape++) {
        for (unsigned z = 0; z < 3; z++) {
            /* keys put in random order, as puts into a node place them */
            uint64_t base = rnd() >> 2;
            s.n = 0;
            while (s.n < sizes[shape][z])
                put_key(&s, shaped_key(shape, base));
            char name[64];
            snprintf(name, sizeof name, "%s-%u", shapes[shape],
                     sizes[shape][z]);
            groups_seed(name, &s, (unsigned)rnd());
        }
    }

    /* keys loaded in order into fresh groups of 64, with a key to add
     * before, among and after them */
    s.n = 300;
    for (uint32_t i = 0; i < s.n; i++)
        s.k[i] = 1000 + 3 * (uint64_t)i + (i % 7 == 0);
    ug_fresh(s.start, s.n);
    groups_seed("fresh-300", &s, 0xf3);

    /* keys put in increasing order: each joins the last group, which is
     * halved when it passes UG_MAX */
    s.n = 0;
    for (uint64_t key = 5; s.n < 1000; key += 2 + s.n % 3)
        put_key(&s, key);
    groups_seed("in-order-1000", &s, 0x2a);

    /* the fewest keys, far apart: one group each or one of two */
    s.n = 0;
    put_key(&s, 0);
    put_key(&s, UINT64_MAX);
    groups_seed("ends-2", &s, 0x05);
    free(s.k);
    free(s.start);
}

/* ---- main -------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr,
                "usage: %s ROOT [node|file|ops|compress|u64groups ...]\n",
                argv[0]);
        return 2;
    }
    g_root = argv[1];
    static const char *all[] = {"node", "file", "ops", "compress",
                                "u64groups"};
    const char **names = argc > 2 ? (const char **)argv + 2 : all;
    int count = argc > 2 ? argc - 2 : 5;
    for (int i = 0; i < count; i++) {
        unsigned before = g_written;
        if (!strcmp(names[i], "node"))
            make_node();
        else if (!strcmp(names[i], "file"))
            make_file();
        else if (!strcmp(names[i], "ops"))
            make_ops();
        else if (!strcmp(names[i], "compress"))
            make_compress();
        else if (!strcmp(names[i], "u64groups"))
            make_u64groups();
        else {
            fprintf(stderr, "make_corpus: no harness \"%s\"\n", names[i]);
            return 2;
        }
        printf("make_corpus: %s/%s: %u seeds\n", g_root, names[i],
               g_written - before);
    }
    return g_failed;
}

/* SPDX-License-Identifier: MIT */
/*
 * fuzz_file.c - a whole store file from arbitrary bytes, through
 * bonsai_open and every read path, then one write transaction.
 *
 * Input: the file image.  One harness convention on top of the format:
 * if byte 32 (in the header area's zero gap, which readers ignore) is 'F',
 * the harness first repairs every checksum it can find - the header's,
 * both meta slots', and those of anything that looks like a node image at
 * a page boundary (a packed image's outer CRC; the raw image inside a
 * packed one cannot be repaired) - so mutations reach the parsers behind
 * the CRCs.  Seeds carry the 'F'; a mutation of that byte tests the
 * checksums themselves.
 *
 * Under libFuzzer a structure-aware mutator (LLVMFuzzerCustomMutator,
 * below) makes half the mutations: it finds the node images at page
 * boundaries, the catalog's records and the meta slots, and changes what
 * the checks behind the checksums are about - a branch's child pointed at
 * another node (shared children, cycles, wrong levels), two children
 * swapped (separators out of order), a record's or a meta slot's root,
 * depth or flags, a node's type and flags, a packed image's codec and raw
 * length, the raw image inside a packed one (unpacked, mutated, its CRC
 * fixed, packed again), one image copied over another - and sets the
 * 'F' byte, so the checksums are repaired before the store is opened.
 *
 * Each input is written to one file in a directory made once per process
 * (mkdtemp), then:
 *  1. opened read-only (max_size 64 MiB whatever the file says); every map
 *     bonsai_map_list names is walked with a cursor forward and backward
 *     (keys must strictly increase / decrease: a cursor always moves on),
 *     seeked to keys taken from the walk and from the input (a seek lands
 *     on a key >= the one sought), read with bonsai_get, bonsai_count and
 *     bonsai_map_stat; bonsai_db_stat, bonsai_space_stat; bonsai_verify;
 *     for one input in 8 (by length), bonsai_compact into the directory;
 *  2. opened read-write (this derives free space): the same walks inside a
 *     write transaction, one put into every map, a delete of its first
 *     key, a new map, for one input in 4 the first map dropped, commit; a
 *     quick verify; close;
 *  3. opened read-only again and walked once more.
 * Every call must return 0 or a BONSAI_* code.  Walks stop after FF_STEPS
 * entries: a small file can still describe a huge tree.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bonsai.h"
#include "bytes.h"
#include "checksum.h"

#include "fuzz_util.h"

#define FF_MAX_SIZE (UINT64_C(64) << 20)
#define FF_MAX_MAPS 16u   /* maps walked per open */
#define FF_STEPS 4096u    /* cursor steps per direction */
#define FF_SEEKS 8u       /* seeks from keys seen, and as many from input */
#define FF_FIX_AT 32u
#define FF_FIX_MAGIC 'F'

typedef struct ff_map {
    char name[BONSAI_MAX_NAME + 1];
    unsigned kind;
} ff_map;

typedef struct ff_list {
    ff_map m[FF_MAX_MAPS];
    unsigned n;
    unsigned seen;
} ff_list;

typedef struct ff_ctx {
    const uint8_t *data;
    size_t size;
    uint64_t problems;
} ff_ctx;

#define FF_RC(rc, what)                                                      \
    FZ_CHECK(fz_rc_known(rc), "%s -> %d, not a bonsai result", (what), (rc))

/* ---- checksum repair -------------------------------------------------------- */

static uint32_t ff_image_crc(const uint8_t *img, uint32_t length)
{
    static const uint8_t zero[4];
    uint32_t crc = bonsai_crc32c(0, img, 8);
    crc = bonsai_crc32c(crc, zero, 4);
    return bonsai_crc32c(crc, img + 12, length - 12);
}

static void ff_fix_checksums(uint8_t *f, size_t n)
{
    if (n < 4096)
        return;
    put_le32(f + 28, bonsai_crc32c(0, f, 28));
    put_le32(f + 512 + 48, bonsai_crc32c(0, f + 512, 48));
    put_le32(f + 1024 + 48, bonsai_crc32c(0, f + 1024, 48));
    uint32_t ps = get_le32(f + 12);
    if (ps < 64 || ps > 65536 || (ps & (ps - 1)))
        return;
    size_t first = ps > 4096 ? ps : 4096;
    for (size_t off = first; off + 16 <= n; off += ps) {
        uint8_t *img = f + off;
        uint32_t len = get_le32(img + 4);
        if ((img[0] != 1 && img[0] != 2) || len < 16 || len > n - off)
            continue;
        if ((img[1] & 0x10) && len < 17)
            continue;
        put_le32(img + 8, ff_image_crc(img, len));
    }
}

/* ---- walking one map -------------------------------------------------------- */

static int ff_list_fn(void *ctx, const char *name, unsigned kind,
                      uint64_t entries)
{
    (void)entries;
    ff_list *l = ctx;
    size_t len = strlen(name);
    FZ_CHECK(len >= 1 && len <= BONSAI_MAX_NAME,
             "bonsai_map_list: a name of %zu bytes", len);
    FZ_CHECK(kind == BONSAI_KEY_BYTES || kind == BONSAI_KEY_U64,
             "bonsai_map_list: kind %u", kind);
    l->seen++;
    if (l->n < FF_MAX_MAPS) {
        memcpy(l->m[l->n].name, name, len + 1);
        l->m[l->n].kind = kind;
        l->n++;
    }
    return 0;
}

/* Keys kept from a walk, to seek to and get later. */
typedef struct ff_keys {
    uint8_t k[FF_SEEKS][BONSAI_MAX_KEY];
    size_t len[FF_SEEKS];
    unsigned n;
} ff_keys;

static int ff_cmp(unsigned kind, const bonsai_val *a, const bonsai_val *b)
{
    if (kind == BONSAI_KEY_U64) {
        uint64_t x, y;
        memcpy(&x, a->data, 8);
        memcpy(&y, b->data, 8);
        return x < y ? -1 : x > y;
    }
    size_t m = a->size < b->size ? a->size : b->size;
    int c = memcmp(a->data, b->data, m);
    if (c)
        return c < 0 ? -1 : 1;
    return a->size < b->size ? -1 : a->size > b->size;
}

/* Touches every byte of a value, so ASan sees a read past its end. */
static unsigned ff_touch(const bonsai_val *v)
{
    unsigned s = 0;
    const uint8_t *p = v->data;
    for (size_t i = 0; i < v->size; i++)
        s += p[i];
    return s;
}

/* Reads the cursor's entry; checks the key against the kind. */
static int ff_get(bonsai_cursor *cur, unsigned kind, bonsai_val *k,
                  unsigned *sum)
{
    bonsai_val v = {0, NULL};
    int rc = bonsai_cursor_get(cur, k, &v);
    FF_RC(rc, "bonsai_cursor_get");
    if (rc)
        return rc;
    FZ_CHECK(kind == BONSAI_KEY_U64 ? k->size == 8
                                    : k->size >= 1 && k->size <= BONSAI_MAX_KEY,
             "cursor key of %zu bytes in a map of kind %u", k->size, kind);
    *sum += ff_touch(v.size ? &v : k);
    return 0;
}

/* Walks in one direction; keys must move strictly that way. */
static void ff_walk(bonsai_cursor *cur, unsigned kind, int fwd, ff_keys *keep,
                    unsigned *sum)
{
    static uint8_t prev[BONSAI_MAX_KEY];
    bonsai_val pk = {0, prev};
    int rc = fwd ? bonsai_cursor_first(cur) : bonsai_cursor_last(cur);
    FF_RC(rc, fwd ? "bonsai_cursor_first" : "bonsai_cursor_last");
    for (unsigned i = 0; rc == 0 && i < FF_STEPS; i++) {
        bonsai_val k;
        if (ff_get(cur, kind, &k, sum))
            break;
        if (i > 0)
            FZ_CHECK(ff_cmp(kind, &pk, &k) == (fwd ? -1 : 1),
                     "cursor %s: step %u does not move %s", fwd ? "next" :
                     "prev", i, fwd ? "up" : "down");
        memcpy(prev, k.data, k.size);
        pk.size = k.size;
        if (keep && keep->n < FF_SEEKS && (i & (i - 1)) == 0) {
            memcpy(keep->k[keep->n], k.data, k.size);
            keep->len[keep->n++] = k.size;
        }
        rc = fwd ? bonsai_cursor_next(cur) : bonsai_cursor_prev(cur);
        FF_RC(rc, fwd ? "bonsai_cursor_next" : "bonsai_cursor_prev");
    }
}

static void ff_seek(bonsai_txn *txn, bonsai_map map, bonsai_cursor *cur,
                    unsigned kind, const void *key, size_t klen,
                    unsigned *sum)
{
    bonsai_val want = {klen, key}, k, v;
    int rc = bonsai_cursor_seek(cur, &want);
    FF_RC(rc, "bonsai_cursor_seek");
    if (rc == 0 && ff_get(cur, kind, &k, sum) == 0) {
        FZ_CHECK(ff_cmp(kind, &k, &want) >= 0,
                 "bonsai_cursor_seek landed below the key sought");
        rc = bonsai_cursor_next(cur);
        FF_RC(rc, "bonsai_cursor_next after a seek");
        rc = bonsai_cursor_prev(cur);
        FF_RC(rc, "bonsai_cursor_prev after a seek");
    }
    rc = bonsai_get(txn, map, &want, &v);
    FF_RC(rc, "bonsai_get");
    if (rc == 0)
        *sum += ff_touch(&v);
}

static void ff_walk_map(const ff_ctx *c, bonsai_txn *txn, bonsai_map map,
                        unsigned kind, unsigned *sum)
{
    uint64_t count;
    int rc = bonsai_count(txn, map, &count);
    FF_RC(rc, "bonsai_count");
    bonsai_map_info info;
    rc = bonsai_map_stat(txn, map, &info);
    FF_RC(rc, "bonsai_map_stat");

    static ff_keys keep;
    keep.n = 0;
    bonsai_cursor *cur = NULL;
    rc = bonsai_cursor_open(txn, map, &cur);
    FF_RC(rc, "bonsai_cursor_open");
    if (rc)
        return;
    ff_walk(cur, kind, 1, &keep, sum);
    ff_walk(cur, kind, 0, NULL, sum);
    for (unsigned i = 0; i < keep.n; i++)
        ff_seek(txn, map, cur, kind, keep.k[i], keep.len[i], sum);
    /* keys from the input: 8 bytes for u64 maps, slices for byte maps */
    for (unsigned i = 0; i < FF_SEEKS && c->size >= 8; i++) {
        size_t at = (size_t)(fz_mix(i) % (c->size - 7));
        size_t len = kind == BONSAI_KEY_U64 ? 8 : 1 + c->data[at] % 24;
        if (len > c->size - at)
            len = c->size - at;
        ff_seek(txn, map, cur, kind, c->data + at, len, sum);
    }
    bonsai_cursor_close(cur);
}

static void ff_problem(void *ctx, const char *map, uint64_t pgno,
                       const char *what)
{
    (void)map;
    (void)pgno;
    (void)what;
    ((ff_ctx *)ctx)->problems++;
}

static void ff_verify(ff_ctx *c, bonsai_db *db, unsigned flags)
{
    uint64_t problems = 0;
    int rc = bonsai_verify(db, flags, ff_problem, NULL, c, &problems);
    FF_RC(rc, "bonsai_verify");
}

/* Lists the maps and walks each in txn (NULL: one snapshot per call). */
static void ff_walk_all(const ff_ctx *c, bonsai_db *db, bonsai_txn *txn,
                        ff_list *l, bonsai_map *maps, unsigned *sum)
{
    memset(l, 0, sizeof *l);
    int rc = bonsai_map_list(db, txn, ff_list_fn, l);
    FF_RC(rc, "bonsai_map_list");
    for (unsigned i = 0; i < l->n; i++) {
        unsigned kind = 0;
        maps[i] = NULL;
        rc = bonsai_map_open(db, txn, l->m[i].name, &maps[i], &kind);
        FF_RC(rc, "bonsai_map_open");
        if (rc)
            continue;
        FZ_CHECK(kind == l->m[i].kind,
                 "bonsai_map_open: kind %u, the list said %u", kind,
                 l->m[i].kind);
        ff_walk_map(c, txn, maps[i], kind, sum);
    }
}

static void ff_read_only(ff_ctx *c, const char *path, unsigned *sum)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = FF_MAX_SIZE;
    o.read_only = 1;
    o.create = 0;
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, &o, &db);
    FF_RC(rc, "bonsai_open read-only");
    if (rc)
        return;
    bonsai_stat st;
    FF_RC(bonsai_db_stat(db, &st), "bonsai_db_stat");
    bonsai_space sp;
    FF_RC(bonsai_space_stat(db, &sp), "bonsai_space_stat");
    bonsai_txn *txn = NULL;
    rc = bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn);
    FF_RC(rc, "bonsai_txn_begin read-only");
    static ff_list l;
    static bonsai_map maps[FF_MAX_MAPS];
    if (rc == 0) {
        ff_walk_all(c, db, txn, &l, maps, sum);
        bonsai_txn_abort(txn);
    }
    ff_verify(c, db, 0);
    if ((c->size & 7) == 0) {
        char copy[4200];
        fz_path(copy, sizeof copy, "copy.bonsai");
        FF_RC(bonsai_compact(db, copy, NULL), "bonsai_compact");
        unlink(copy);
        strcat(copy, "-lock");
        unlink(copy);
    }
    FF_RC(bonsai_close(db), "bonsai_close read-only");
}

static void ff_read_write(ff_ctx *c, const char *path, unsigned *sum)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = FF_MAX_SIZE;
    o.create = 0;
    o.sync = 0;
    o.transactions = 1;
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, &o, &db);
    FF_RC(rc, "bonsai_open read-write");
    if (rc)
        return;
    bonsai_txn *txn = NULL;
    rc = bonsai_txn_begin(db, 0, &txn);
    FF_RC(rc, "bonsai_txn_begin");
    if (rc == 0) {
        static ff_list l;
        static bonsai_map maps[FF_MAX_MAPS];
        ff_walk_all(c, db, txn, &l, maps, sum);
        for (unsigned i = 0; i < l.n; i++) {
            if (!maps[i])
                continue;
            uint64_t u = c->size >= 8 ? get_le64(c->data + c->size - 8) : 7;
            static const char bkey[] = "fuzz-key";
            bonsai_val k = l.m[i].kind == BONSAI_KEY_U64
                               ? (bonsai_val){8, &u}
                               : (bonsai_val){sizeof bkey - 1, bkey};
            bonsai_val v = {c->size % 300, c->data};
            rc = bonsai_put(txn, maps[i], &k, &v, 0);
            FF_RC(rc, "bonsai_put");
            bonsai_cursor *cur = NULL;
            rc = bonsai_cursor_open(txn, maps[i], &cur);
            FF_RC(rc, "bonsai_cursor_open");
            if (rc == 0 && bonsai_cursor_first(cur) == 0) {
                bonsai_val first;
                if (bonsai_cursor_get(cur, &first, NULL) == 0) {
                    static uint8_t kb[BONSAI_MAX_KEY];
                    memcpy(kb, first.data, first.size);
                    first.data = kb;
                    FF_RC(bonsai_del(txn, maps[i], &first), "bonsai_del");
                }
            }
            bonsai_cursor_close(cur);
        }
        if ((c->size & 3) == 1 && l.n > 0)
            FF_RC(bonsai_map_drop(db, txn, l.m[0].name), "bonsai_map_drop");
        bonsai_map m = NULL;
        rc = bonsai_map_create(db, txn, "fuzz-new-map", BONSAI_KEY_U64, &m);
        FF_RC(rc, "bonsai_map_create");
        if (m)
            FF_RC(bonsai_put_u64(txn, m, 1, NULL, 0), "bonsai_put_u64");
        rc = bonsai_txn_commit(txn);
        FF_RC(rc, "bonsai_txn_commit");
    }
    ff_verify(c, db, BONSAI_VERIFY_QUICK);
    FF_RC(bonsai_close(db), "bonsai_close read-write");
}

int fuzz_file(const uint8_t *data, size_t size)
{
    char path[4200];
    fz_path(path, sizeof path, "store.bonsai");
    uint8_t *f = malloc(size ? size : 1);
    FZ_CHECK(f != NULL, "harness: out of memory");
    memcpy(f, data, size);
    if (size > FF_FIX_AT && f[FF_FIX_AT] == FF_FIX_MAGIC)
        ff_fix_checksums(f, size);
    if (fz_write_file(path, f, size) != 0)
        FZ_FAIL("harness: cannot write %s", path);
    free(f);

    ff_ctx c = {data, size, 0};
    unsigned sum = 0;
    ff_read_only(&c, path, &sum);
    ff_read_write(&c, path, &sum);
    ff_read_only(&c, path, &sum);
    unlink(path);
    return sum == 0xdeadbeef; /* keeps the reads */
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_file(data, size);
    return 0;
}

/* ---- the structure-aware mutator ---------------------------------------- */

#include "compress.h"
#include "pack.h"

#define FM_MAX_NODES 1024u

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                               unsigned int seed);

/* What the mutator found in a file image. */
typedef struct fm_file {
    uint8_t *f;
    size_t n;
    uint32_t ps;
    struct fm_node {
        size_t off;         /* byte offset of the image */
        uint32_t len;       /* its length field */
        uint32_t npages;    /* pages it takes */
    } node[FM_MAX_NODES];
    unsigned nnodes;
    uint64_t rng;
} fm_file;

static uint64_t fm_rand(fm_file *m)
{
    return fz_mix(m->rng++);
}

static unsigned fm_below(fm_file *m, unsigned n)
{
    return n ? (unsigned)(fm_rand(m) % n) : 0;
}

/* Images at page boundaries (as ff_fix_checksums finds them). */
static int fm_scan(fm_file *m)
{
    if (m->n < 4096)
        return 0;
    m->ps = get_le32(m->f + 12);
    if (m->ps < 64 || m->ps > 65536 || (m->ps & (m->ps - 1)))
        return 0;
    size_t first = m->ps > 4096 ? m->ps : 4096;
    for (size_t off = first; off + 16 <= m->n && m->nnodes < FM_MAX_NODES;
         off += m->ps) {
        const uint8_t *img = m->f + off;
        uint32_t len = get_le32(img + 4);
        if ((img[0] != 1 && img[0] != 2) || len < 16 || len > m->n - off)
            continue;
        if ((img[1] & PK_F_PACKED) && len < PK_HEADER)
            continue;
        m->node[m->nnodes++] = (struct fm_node){off, len,
                                                (len + m->ps - 1) / m->ps};
        off += (size_t)(len - 1) / m->ps * m->ps;
    }
    return m->nnodes > 0;
}

static struct fm_node *fm_pick(fm_file *m, int packed, unsigned type)
{
    unsigned start = fm_below(m, m->nnodes);
    for (unsigned i = 0; i < m->nnodes; i++) {
        struct fm_node *x = &m->node[(start + i) % m->nnodes];
        const uint8_t *img = m->f + x->off;
        if ((packed < 0 || !!(img[1] & PK_F_PACKED) == packed) &&
            (!type || img[0] == type))
            return x;
    }
    return NULL;
}

/* Another node's extent, as a branch child or a root names it. */
static void fm_put_ext(fm_file *m, uint8_t *at5, uint8_t *at3)
{
    const struct fm_node *x = &m->node[fm_below(m, m->nnodes)];
    put_le40(at5, x->off / m->ps);
    put_le24(at3, x->npages);
}

/* A raw branch: child idx's 8 bytes, or NULL. */
static uint8_t *fm_child(fm_file *m, struct fm_node *b, unsigned idx)
{
    uint8_t *img = m->f + b->off;
    unsigned count = get_le16(img + 2);
    if (idx >= count || (size_t)count * 8 + 16 > b->len)
        return NULL;
    return img + b->len - 8 * (size_t)(count - idx);
}

static int fm_branch_child(fm_file *m)
{
    struct fm_node *b = fm_pick(m, 0, 2);
    uint8_t *c = b ? fm_child(m, b, fm_below(m, get_le16(m->f + b->off + 2)))
                   : NULL;
    if (!c)
        return 0;
    if (fm_rand(m) & 1) {
        fm_put_ext(m, c, c + 5);
    } else { /* a sibling's: one child under two separators */
        uint8_t *d = fm_child(m, b, fm_below(m, get_le16(m->f + b->off + 2)));
        memmove(c, d, 8);
    }
    return 1;
}

static int fm_swap_children(fm_file *m)
{
    struct fm_node *b = fm_pick(m, 0, 2);
    unsigned count = b ? get_le16(m->f + b->off + 2) : 0;
    uint8_t *c = count > 1 ? fm_child(m, b, fm_below(m, count - 1)) : NULL;
    if (!c)
        return 0;
    uint8_t t[8];
    memcpy(t, c, 8);
    memmove(c, c + 8, 8);
    memcpy(c + 8, t, 8);
    return 1;
}

/* A record of the catalog: raw byte-key leaves of 24-byte fixed values. */
static uint8_t *fm_record(fm_file *m)
{
    unsigned start = fm_below(m, m->nnodes);
    for (unsigned i = 0; i < m->nnodes; i++) {
        struct fm_node *x = &m->node[(start + i) % m->nnodes];
        uint8_t *img = m->f + x->off;
        unsigned count = get_le16(img + 2);
        if (img[0] != 1 || img[1] != 0x04 || count == 0 ||
            (size_t)count * 24 + 17 > x->len)
            continue;
        return img + x->len - 24 * (size_t)(count - fm_below(m, count));
    }
    return NULL;
}

static int fm_mutate_record(fm_file *m)
{
    uint8_t *r = fm_record(m);
    if (!r)
        return 0;
    switch (fm_below(m, 4)) {
    case 0: r[2] = (uint8_t)(r[2] + (fm_rand(m) & 1 ? 1 : -1)); break;
    case 1: r[1] ^= 0x01; break;
    case 2: fm_put_ext(m, r + 4, r + 9); break;
    default: put_le64(r + 12, get_le64(r + 12) + (fm_rand(m) & 7) - 3);
    }
    return 1;
}

static int fm_mutate_meta(fm_file *m)
{
    uint8_t *s = m->f + 512 + 512 * fm_below(m, 2);
    switch (fm_below(m, 4)) {
    case 0: s[32] = (uint8_t)(s[32] + (fm_rand(m) & 1 ? 1 : -1)); break;
    case 1: fm_put_ext(m, s + 24, s + 29); break;
    case 2: put_le64(s + 16, get_le64(s + 16) + (fm_rand(m) & 15) - 8);
            break;
    default: put_le64(s + 8, get_le64(s + 8) ^ 1);
    }
    return 1;
}

static int fm_mutate_header(fm_file *m)
{
    struct fm_node *x = fm_pick(m, -1, 0);
    if (!x)
        return 0;
    uint8_t *img = m->f + x->off;
    static const uint8_t bits[] = {0x01, 0x02, 0x04, 0x08, 0x10};
    if (fm_rand(m) & 1)
        img[0] ^= 3; /* leaf <-> branch */
    else
        img[1] ^= bits[fm_below(m, sizeof bits)];
    return 1;
}

static int fm_mutate_envelope(fm_file *m)
{
    struct fm_node *x = fm_pick(m, 1, 0);
    if (!x)
        return 0;
    uint8_t *img = m->f + x->off;
    switch (fm_below(m, 3)) {
    case 0: img[16] ^= 3; break; /* the other codec */
    case 1: img[16] = 0; break;
    default: put_le32(img + 12, get_le32(img + 12) << (1 + fm_below(m, 8)));
    }
    return 1;
}

/* Unpacks a packed image, mutates its raw image (CRC fixed), packs it
 * again with its codec if the result still fits its pages. */
static int fm_mutate_packed(fm_file *m)
{
    struct fm_node *x = fm_pick(m, 1, 0);
    if (!x)
        return 0;
    uint8_t *img = m->f + x->off;
    uint32_t raw_len = get_le32(img + 12);
    unsigned codec = img[16];
    if (raw_len <= 16 || raw_len > (1u << 20))
        return 0;
    size_t cap = (size_t)x->npages * m->ps;
    uint8_t *raw = malloc(raw_len), *out = malloc(cap);
    int done = 0;
    if (raw && out &&
        bx_decompress(codec, img + PK_HEADER, x->len - PK_HEADER, raw,
                      raw_len) == 0) {
        size_t n = LLVMFuzzerMutate(raw + 16, raw_len - 16, raw_len - 16);
        put_le32(raw + 4, (uint32_t)(16 + n));
        put_le32(raw + 8, ff_image_crc(raw, (uint32_t)(16 + n)));
        size_t body;
        if (cap > PK_HEADER &&
            bx_compress(codec, 6, raw, 16 + n, out, cap - PK_HEADER,
                        &body) == 0) {
            memset(img + PK_HEADER, 0, cap - PK_HEADER);
            memcpy(img + PK_HEADER, out, body);
            memcpy(img + 2, raw + 2, 2);
            put_le32(img + 4, (uint32_t)(PK_HEADER + body));
            put_le32(img + 12, (uint32_t)(16 + n));
            done = 1;
        }
    }
    free(raw);
    free(out);
    return done;
}

/* One image copied over another's pages (as far as they reach). */
static int fm_copy_image(fm_file *m)
{
    struct fm_node *a = &m->node[fm_below(m, m->nnodes)];
    struct fm_node *b = &m->node[fm_below(m, m->nnodes)];
    if (a == b)
        return 0;
    size_t n = (size_t)b->npages * m->ps;
    if (n > (size_t)a->npages * m->ps)
        n = (size_t)a->npages * m->ps;
    if (b->off + n > m->n || a->off + n > m->n)
        return 0;
    memmove(m->f + b->off, m->f + a->off, n);
    return 1;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                               unsigned int seed)
{
    static fm_file m;
    m.f = data;
    m.n = size;
    m.nnodes = 0;
    m.rng = seed;
    if ((seed & 1) || !fm_scan(&m))
        return LLVMFuzzerMutate(data, size, max_size);
    int (*const ops[])(fm_file *) = {
        fm_branch_child, fm_swap_children, fm_mutate_record,
        fm_mutate_meta,  fm_mutate_header, fm_mutate_envelope,
        fm_mutate_packed, fm_copy_image,
    };
    unsigned nops = sizeof ops / sizeof ops[0];
    int done = 0;
    for (unsigned tries = 0; tries < 4 && !done; tries++)
        done = ops[fm_below(&m, nops)](&m);
    if (!done)
        return LLVMFuzzerMutate(data, size, max_size);
    data[FF_FIX_AT] = FF_FIX_MAGIC; /* the harness repairs the checksums */
    return size;
}
#endif

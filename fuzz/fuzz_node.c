/* SPDX-License-Identifier: MIT */
/*
 * fuzz_node.c - the node image decoder (lib/node.c) and the compression
 * envelope around it (lib/pack.c), on arbitrary bytes.
 *
 * Input:
 *   byte 0   control: bit 0 set = u64 keys, clear = byte keys;
 *            bit 1 set = repair checksums first (the image's CRC, and for
 *            a packed image the outer CRC and, once unpacked, the raw
 *            image's), so mutations get past the CRC to the parsers;
 *            bits 2..7 pick which entries are sampled in large images
 *   1..      the image; avail = all of it (the extent the reader would
 *            pass), allocated exactly, so reading past it is an ASan error
 *
 * What must hold (a violation is a finding, abort()):
 *  - every call returns 0 or BONSAI_CORRUPT (BONSAI_NOMEM from decode);
 *  - a CRC-checked header passes the plain check with the same summary;
 *    a header never checks as both key kinds;
 *  - in-place reads of a header-checked image stay inside the image: a
 *    value lies in [img, img + length), a search index in [0, count]
 *    (a branch's in [0, count - 1]), a byte key is 1..1024 bytes;
 *  - bn_decode succeeds only where the CRC check does; then the image is
 *    canonical: bn_encoded_size is its length and bn_encode gives back
 *    the same bytes; bn_encode into one byte less fails; keys strictly
 *    increase; in-place reads and searches agree with the decoded node;
 *    bn_move of the upper half, re-encoded, decodes back to the same
 *    entries;
 *  - a packed image (flag 0x10) that pk_check accepts either unpacks
 *    (and then goes through all of the above, once) or is CORRUPT, and
 *    pk_view agrees with pk_unpack, also when served from its cache.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "bytes.h"
#include "checksum.h"
#include "node.h"
#include "pack.h"

#include "fuzz_util.h"

#define FN_ALL 256u   /* images with at most this many entries: read all */
#define FN_SAMPLE 48u /* else this many sampled entries */
#define FN_PROBES 12u /* search keys taken from the input */

typedef struct fn_ctx {
    const uint8_t *data; /* the whole input, for probe keys */
    size_t size;
    unsigned kind;
    unsigned ctl;
} fn_ctx;

/* ---- checksums -------------------------------------------------------------- */

static uint32_t fn_image_crc(const uint8_t *img, uint32_t length)
{
    static const uint8_t zero[4];
    uint32_t crc = bonsai_crc32c(0, img, 8);
    crc = bonsai_crc32c(crc, zero, 4);
    return bonsai_crc32c(crc, img + 12, length - 12);
}

/* Recomputes the CRC the header's length field covers, if it fits. */
static void fn_fix_crc(uint8_t *img, size_t avail)
{
    if (avail < BN_HEADER_SIZE)
        return;
    uint32_t len = get_le32(img + 4);
    if (len < BN_HEADER_SIZE || len > avail)
        return;
    if ((img[1] & PK_F_PACKED) && len < PK_HEADER)
        return;
    put_le32(img + 8, fn_image_crc(img, len));
}

/* ---- keys ------------------------------------------------------------------- */

/* Order of two keys of one kind, as the library orders them. */
static int fn_cmp(unsigned kind, bn_key a, bn_key b)
{
    if (kind == BONSAI_KEY_U64)
        return a.u < b.u ? -1 : a.u > b.u;
    uint32_t m = a.len < b.len ? a.len : b.len;
    int c = m ? memcmp(a.b, b.b, m) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return a.len < b.len ? -1 : a.len > b.len;
}

/* Probe key j, made from the input's bytes (buf has BONSAI_MAX_KEY). */
static bn_key fn_probe(const fn_ctx *c, unsigned j, uint8_t *buf)
{
    bn_key k = {0, buf, 0};
    size_t at = c->size ? (size_t)(fz_mix(j) % c->size) : 0;
    if (c->kind == BONSAI_KEY_U64) {
        switch (j % 4) {
        case 0: k.u = 0; break;
        case 1: k.u = UINT64_MAX; break;
        default:
            for (size_t i = 0; i < 8 && at + i < c->size; i++)
                k.u |= (uint64_t)c->data[at + i] << (8 * i);
            if (j % 4 == 3)
                k.u >>= (c->data[at] & 63);
        }
        return k;
    }
    size_t len = c->size ? 1 + c->data[at] % 24 : 1;
    for (size_t i = 0; i < len; i++)
        buf[i] = c->size ? c->data[(at + i) % c->size] : 0;
    if (j == 0)
        buf[0] = 0, len = 1;
    if (j == 1)
        memset(buf, 0xff, len = 8);
    k.len = (uint32_t)len;
    return k;
}

/* Neighbours of a stored key: one below / above / a prefix or extension. */
static bn_key fn_near(unsigned kind, bn_key k, unsigned how, uint8_t *buf)
{
    if (kind == BONSAI_KEY_U64) {
        k.u += how == 0 ? (uint64_t)-1 : 1;
        return k;
    }
    memcpy(buf, k.b, k.len);
    bn_key n = {0, buf, k.len};
    if (how == 0) {
        if (n.len > 1)
            n.len--;
        else
            buf[0]--;
    } else if (n.len < BONSAI_MAX_KEY) {
        buf[n.len++] = 0;
    } else {
        buf[n.len - 1]++;
    }
    return n;
}

/* ---- in-place reads ----------------------------------------------------------- */

/* Entry i of the sample (of n picks) in an image of count entries. */
static uint32_t fn_pick(const fn_ctx *c, uint32_t count, uint32_t i,
                        uint32_t *n)
{
    if (count <= FN_ALL) {
        *n = count;
        return i;
    }
    *n = FN_SAMPLE;
    if (i < 16)
        return i;
    if (i < 32)
        return count - 32 + i;
    return (uint32_t)(fz_mix((uint64_t)i << 8 | (c->ctl >> 2)) % count);
}

static void fn_search_check(const fn_ctx *c, const uint8_t *img,
                            const bn_info *info, bn_key k, const char *what)
{
    uint32_t idx = UINT32_MAX;
    int found = -1;
    int rc = bn_img_search(img, info, c->kind, &k, &idx, &found);
    FZ_CHECK(rc == 0 || rc == BONSAI_CORRUPT, "bn_img_search(%s) -> %s",
             what, fz_err(rc));
    if (rc)
        return;
    uint32_t top = info->type == BN_TYPE_BRANCH ? info->count - 1
                                                : info->count;
    FZ_CHECK(idx <= top && (found == 0 || found == 1),
             "bn_img_search(%s) -> idx %u found %d in a %s of %u entries",
             what, idx, found,
             info->type == BN_TYPE_BRANCH ? "branch" : "leaf", info->count);
    FZ_CHECK(!found || idx < info->count,
             "bn_img_search(%s): found at idx %u = count", what, idx);
}

/* Reads sampled entries of a header-checked image; nothing is trusted
 * but the bounds. */
static void fn_read_image(const fn_ctx *c, const uint8_t *img,
                          const bn_info *info)
{
    static uint8_t kbuf[BONSAI_MAX_KEY], pbuf[BONSAI_MAX_KEY];
    uint32_t n = 0;
    for (uint32_t s = 0; s == 0 || s < n; s++) {
        if (info->count == 0)
            break;
        uint32_t i = fn_pick(c, info->count, s, &n);
        bn_key k;
        int rc = bn_img_key(img, info, c->kind, i, kbuf, &k);
        FZ_CHECK(rc == 0 || rc == BONSAI_CORRUPT, "bn_img_key(%u) -> %s", i,
                 fz_err(rc));
        if (rc == 0 && c->kind == BONSAI_KEY_BYTES)
            FZ_CHECK(k.b == kbuf && k.len >= 1 && k.len <= BONSAI_MAX_KEY,
                     "bn_img_key(%u): a byte key of %u bytes", i, k.len);
        if (rc == 0 && s < 8) {
            fn_search_check(c, img, info, k, "stored key");
            fn_search_check(c, img, info, fn_near(c->kind, k, s & 1, pbuf),
                            "near a stored key");
        }
        if (info->type == BN_TYPE_LEAF) {
            const uint8_t *v = NULL;
            uint32_t vlen = UINT32_MAX;
            unsigned vflag = 99;
            rc = bn_img_value(img, info, i, &v, &vlen, &vflag);
            FZ_CHECK(rc == 0 || rc == BONSAI_CORRUPT,
                     "bn_img_value(%u) -> %s", i, fz_err(rc));
            if (rc == 0) {
                FZ_CHECK(v >= img && v <= img + info->length &&
                             vlen <= (size_t)(img + info->length - v) &&
                             vflag <= 1,
                         "bn_img_value(%u): %u bytes at offset %td, flag %u, "
                         "image of %u bytes",
                         i, vlen, v - img, vflag, info->length);
            }
        } else {
            bn_ext e;
            rc = bn_img_child(img, info, i, &e);
            FZ_CHECK(rc == 0 || rc == BONSAI_CORRUPT,
                     "bn_img_child(%u) -> %s", i, fz_err(rc));
            FZ_CHECK(rc != 0 || (e.npages >= 1 && e.pgno <= BN_MAX_PGNO &&
                                 e.npages <= BN_MAX_NPAGES),
                     "bn_img_child(%u): pgno %llu npages %u", i,
                     (unsigned long long)e.pgno, e.npages);
        }
    }
    for (unsigned j = 0; j < FN_PROBES; j++)
        fn_search_check(c, img, info, fn_probe(c, j, kbuf), "probe");
    /* out-of-range reads are refused, not performed */
    bn_key k;
    FZ_CHECK(bn_img_key(img, info, c->kind, info->count, kbuf, &k) ==
                 BONSAI_CORRUPT,
             "bn_img_key(count) accepted");
}

/* ---- a decoded node against its image ------------------------------------------ */

static void fn_same_entry(const fn_ctx *c, const bn_node *a, uint32_t ai,
                          const bn_node *b, uint32_t bi, const char *what)
{
    bn_key ka = bn_key_at(a, ai), kb = bn_key_at(b, bi);
    FZ_CHECK(fn_cmp(c->kind, ka, kb) == 0, "%s: key %u differs", what, ai);
    if (a->leaf) {
        const uint8_t *va, *vb;
        uint32_t la, lb;
        unsigned fa, fb;
        bn_value_at(a, ai, &va, &la, &fa);
        bn_value_at(b, bi, &vb, &lb, &fb);
        FZ_CHECK(la == lb && fa == fb && (la == 0 || !memcmp(va, vb, la)),
                 "%s: value %u differs", what, ai);
    } else {
        FZ_CHECK(a->child[ai].ext.pgno == b->child[bi].ext.pgno &&
                     a->child[ai].ext.npages == b->child[bi].ext.npages,
                 "%s: child %u differs", what, ai);
    }
}

/* Encodes node exactly (checking size and the one-byte-short refusal)
 * into a fresh buffer; *len its length.  The caller frees it. */
static uint8_t *fn_encode(const bn_node *node, size_t *len, const char *what)
{
    size_t es = bn_encoded_size(node);
    FZ_CHECK(es >= BN_HEADER_SIZE, "%s: bn_encoded_size %zu", what, es);
    uint8_t *out = malloc(es);
    FZ_CHECK(out != NULL, "harness: out of memory");
    size_t got = 0;
    int rc = bn_encode(node, out, es - 1, &got);
    FZ_CHECK(rc == BONSAI_INVALID, "%s: bn_encode into %zu of %zu bytes -> %s",
             what, es - 1, es, fz_err(rc));
    rc = bn_encode(node, out, es, &got);
    FZ_CHECK(rc == 0 && got == es, "%s: bn_encode -> %s, %zu of %zu bytes",
             what, fz_err(rc), got, es);
    *len = got;
    return out;
}

static void fn_check_decoded(const fn_ctx *c, const uint8_t *img,
                             const bn_info *info, bn_node *node)
{
    static uint8_t kbuf[BONSAI_MAX_KEY], pbuf[BONSAI_MAX_KEY];
    FZ_CHECK(node->n == info->count && node->leaf ==
                 (info->type == BN_TYPE_LEAF) && node->kind == c->kind,
             "bn_decode: %u entries, leaf %d; header says %u, type %u",
             node->n, node->leaf, info->count, info->type);

    /* canonical: re-encoding gives back the image */
    size_t len;
    uint8_t *again = fn_encode(node, &len, "decoded node");
    size_t diff = 0;
    while (diff < len && diff < info->length && again[diff] == img[diff])
        diff++;
    FZ_CHECK(len == info->length && diff == len,
             "bn_decode accepted an image bn_encode does not write back "
             "(%u bytes in, %zu out, first difference at offset %zu)",
             info->length, len, diff);
    free(again);

    uint32_t n = 0;
    for (uint32_t s = 0; s == 0 || s < n; s++) {
        if (node->n == 0)
            break;
        uint32_t i = fn_pick(c, node->n, s, &n);
        bn_key k = bn_key_at(node, i), ki;
        if (i + 1 < node->n) {
            bn_key k2 = bn_key_at(node, i + 1);
            FZ_CHECK(fn_cmp(c->kind, k, k2) < 0,
                     "bn_decode: keys %u and %u not increasing", i, i + 1);
        }
        int rc = bn_img_key(img, info, c->kind, i, kbuf, &ki);
        FZ_CHECK(rc == 0 && fn_cmp(c->kind, k, ki) == 0,
                 "bn_img_key(%u) -> %s, or differs from the decoded key", i,
                 fz_err(rc));
        /* a stored key is found where it is */
        uint32_t idx, di;
        int found, dfound;
        rc = bn_img_search(img, info, c->kind, &k, &idx, &found);
        di = bn_search(node, &k, &dfound);
        FZ_CHECK(rc == 0 && idx == i && found == 1 && di == i && dfound == 1,
                 "search for stored key %u: image -> %s idx %u found %d, "
                 "node idx %u found %d",
                 i, fz_err(rc), idx, found, di, dfound);
        bn_key near = fn_near(c->kind, k, s & 1, pbuf);
        rc = bn_img_search(img, info, c->kind, &near, &idx, &found);
        di = bn_search(node, &near, &dfound);
        FZ_CHECK(rc == 0 && idx == di && found == dfound,
                 "search near key %u: image idx %u found %d, node %u %d", i,
                 idx, found, di, dfound);
        if (node->leaf) {
            const uint8_t *v, *vi;
            uint32_t l, li;
            unsigned f, fi;
            bn_value_at(node, i, &v, &l, &f);
            rc = bn_img_value(img, info, i, &vi, &li, &fi);
            FZ_CHECK(rc == 0 && l == li && f == fi &&
                         (l == 0 || !memcmp(v, vi, l)),
                     "value %u: image -> %s, %u bytes flag %u; node %u "
                     "bytes flag %u",
                     i, fz_err(rc), li, fi, l, f);
        } else {
            bn_ext e;
            rc = bn_img_child(img, info, i, &e);
            FZ_CHECK(rc == 0 && e.pgno == node->child[i].ext.pgno &&
                         e.npages == node->child[i].ext.npages,
                     "child %u: image -> %s or differs", i, fz_err(rc));
        }
    }
    for (unsigned j = 0; j < FN_PROBES; j++) {
        bn_key k = fn_probe(c, j, kbuf);
        uint32_t idx, di;
        int found, dfound;
        int rc = bn_img_search(img, info, c->kind, &k, &idx, &found);
        di = bn_search(node, &k, &dfound);
        FZ_CHECK(rc == 0 && idx == di && found == dfound,
                 "probe %u: image -> %s idx %u found %d, node idx %u found "
                 "%d",
                 j, fz_err(rc), idx, found, di, dfound);
    }

    /* split off the upper half, as a split would, and round-trip both */
    if (node->n < 2)
        return;
    uint32_t n0 = node->n, half = n0 / 2;
    bn_node hi, back;
    bn_init(&hi, c->kind, node->leaf);
    int rc = bn_move(&hi, 0, node, half, n0);
    FZ_CHECK(rc == 0 || rc == BONSAI_NOMEM, "bn_move -> %s", fz_err(rc));
    if (rc == 0) {
        FZ_CHECK(node->n == half && hi.n == n0 - half,
                 "bn_move left %u + %u of %u entries", node->n, hi.n, n0);
        bn_node *parts[2] = {node, &hi};
        for (int p = 0; p < 2; p++) {
            size_t plen;
            uint8_t *pimg = fn_encode(parts[p], &plen, "half after bn_move");
            bn_init(&back, c->kind, parts[p]->leaf);
            rc = bn_decode(pimg, plen, c->kind, &back);
            FZ_CHECK(rc == 0 && back.n == parts[p]->n,
                     "a half after bn_move does not decode: %s", fz_err(rc));
            for (uint32_t i = 0; i < back.n && i < FN_ALL; i++)
                fn_same_entry(c, &back, i, parts[p], i, "half round trip");
            bn_clear(&back);
            free(pimg);
        }
    }
    bn_clear(&hi);
}

/* ---- keys added to an image --------------------------------------------- */

static int fn_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The probe keys, increasing, each once: how many (u64 only). */
static uint32_t fn_add_keys(const fn_ctx *c, uint64_t *add)
{
    static uint8_t kbuf[BONSAI_MAX_KEY];
    uint32_t m = 0;
    for (unsigned j = 0; j < FN_PROBES; j++)
        add[m++] = fn_probe(c, j, kbuf).u;
    qsort(add, m, sizeof *add, fn_cmp_u64);
    uint32_t w = 0;
    for (uint32_t j = 0; j < m; j++)
        if (w == 0 || add[j] != add[w - 1])
            add[w++] = add[j];
    return w;
}

/* bn_img_add_u64 on any image with a sound header: an answer, never a
 * read out of bounds.  With `node` (the image decoded, so canonical):
 * the image that node encodes to with the keys put in. */
static void fn_add(const fn_ctx *c, const uint8_t *img, const bn_info *info,
                   const bn_node *node)
{
    if (c->kind != BONSAI_KEY_U64 || info->type != BN_TYPE_LEAF)
        return;
    uint64_t add[FN_PROBES];
    uint32_t m = fn_add_keys(c, add);
    void *keys = malloc(bn_img_add_scratch(info->count, m));
    size_t cap = (size_t)info->length + 65536u;
    uint8_t *out = malloc(cap);
    FZ_CHECK(keys && out, "harness: out of memory");
    size_t len = 0;
    uint32_t grow;
    int rc = bn_img_add_u64(img, info, add, m, keys, out, cap, &len, &grow);
    FZ_CHECK(rc == 0 || rc == BONSAI_CORRUPT || rc == BONSAI_INVALID,
             "bn_img_add_u64 -> %s", fz_err(rc));
    if (node && rc == 0) {
        bn_node want;
        bn_init(&want, BONSAI_KEY_U64, 1);
        for (uint32_t i = 0; i < node->n; i++)
            FZ_CHECK(bn_insert(&want, i, bn_key_at(node, i), NULL, 0, 0) == 0,
                     "harness: bn_insert");
        for (uint32_t j = 0; j < m; j++) {
            int found;
            bn_key k = {add[j], NULL, 0};
            uint32_t at = bn_search(&want, &k, &found);
            if (!found)
                FZ_CHECK(bn_insert(&want, at, k, NULL, 0, 0) == 0,
                         "harness: bn_insert");
        }
        size_t wlen;
        uint8_t *wimg = fn_encode(&want, &wlen, "node with keys added");
        FZ_CHECK(wlen == len && memcmp(wimg, out, len) == 0,
                 "bn_img_add_u64 wrote %zu bytes unlike bn_encode's %zu",
                 len, wlen);
        free(wimg);
        bn_clear(&want);
    }
    free(keys);
    free(out);
}

/* ---- one image ---------------------------------------------------------------- */

static void fn_image(const fn_ctx *c, uint8_t *img, size_t avail, int depth);

static void fn_packed(const fn_ctx *c, const uint8_t *img, size_t avail,
                      int depth)
{
    /* the rules of a store of the codec the image names, with any raw
     * length the format allows: a store's own limits are the file
     * harness's business */
    const pk_rules rules = {avail > 16 ? img[16] : 0, PK_MAX_RAW};
    uint32_t raw_len = 0;
    int rc = pk_check(img, avail, &rules, &raw_len);
    FZ_CHECK(rc == 0 || rc == BONSAI_CORRUPT, "pk_check -> %s", fz_err(rc));
    if (rc)
        return;
    FZ_CHECK(raw_len >= BN_HEADER_SIZE && raw_len <= PK_MAX_RAW,
             "pk_check: raw length %u", raw_len);
    uint8_t *raw = malloc(raw_len);
    FZ_CHECK(raw != NULL, "harness: out of memory");
    rc = pk_unpack(img, raw, raw_len);
    FZ_CHECK(rc == 0 || rc == BONSAI_CORRUPT || rc == BONSAI_NOMEM,
             "pk_unpack -> %s", fz_err(rc));

    /* the reader's path: pk_view, twice (the second from its cache) */
    pk_cache cache;
    memset(&cache, 0, sizeof cache);
    for (int t = 0; t < 2; t++) {
        const uint8_t *view = NULL;
        size_t view_len = 0;
        int vrc = pk_view(&cache, &rules, 42, img, avail, &view,
                          &view_len);
        FZ_CHECK(vrc == rc || (rc == 0 && vrc == BONSAI_NOMEM),
                 "pk_view -> %s, pk_unpack -> %s", fz_err(vrc), fz_err(rc));
        if (vrc == 0)
            FZ_CHECK(view_len == raw_len && !memcmp(view, raw, raw_len),
                     "pk_view (%s) and pk_unpack differ",
                     t ? "cached" : "fresh");
    }
    pk_cache_free(&cache);

    if (rc == 0 && depth == 0) {
        if (c->ctl & 2)
            fn_fix_crc(raw, raw_len);
        fn_image(c, raw, raw_len, depth + 1);
    }
    free(raw);
}

static void fn_image(const fn_ctx *c, uint8_t *img, size_t avail, int depth)
{
    bn_info plain, crc;
    memset(&plain, 0, sizeof plain);
    memset(&crc, 0, sizeof crc);
    int rp = bn_img_check(img, avail, c->kind, 0, &plain);
    int rc = bn_img_check(img, avail, c->kind, 1, &crc);
    FZ_CHECK((rp == 0 || rp == BONSAI_CORRUPT) &&
                 (rc == 0 || rc == BONSAI_CORRUPT),
             "bn_img_check -> %s / with crc %s", fz_err(rp), fz_err(rc));
    FZ_CHECK(rc != 0 || (rp == 0 && !memcmp(&plain, &crc, sizeof plain)),
             "bn_img_check passes with the crc but not without, or differs");
    if (rp == 0) {
        bn_info other;
        unsigned okind = c->kind == BONSAI_KEY_U64 ? BONSAI_KEY_BYTES
                                                   : BONSAI_KEY_U64;
        FZ_CHECK(bn_img_check(img, avail, okind, 0, &other) ==
                     BONSAI_CORRUPT,
                 "an image checks as both key kinds");
        FZ_CHECK(plain.length >= BN_HEADER_SIZE && plain.length <= avail &&
                     (uint64_t)BN_HEADER_SIZE + plain.keys_len <=
                         plain.length &&
                     (plain.type == BN_TYPE_LEAF ||
                      plain.type == BN_TYPE_BRANCH),
                 "bn_img_check passed a header it should not: type %u, "
                 "length %u, keys_len %u, avail %zu",
                 plain.type, plain.length, plain.keys_len, avail);
        fn_read_image(c, img, &plain);
        fn_add(c, img, &plain, NULL);
    }

    bn_node node;
    bn_init(&node, c->kind, 1);
    int rd = bn_decode(img, avail, c->kind, &node);
    FZ_CHECK(rd == 0 || rd == BONSAI_CORRUPT || rd == BONSAI_NOMEM,
             "bn_decode -> %s", fz_err(rd));
    FZ_CHECK(rd != 0 || rc == 0, "bn_decode accepted an image whose "
                                 "header or crc check fails");
    if (rd == 0) {
        fn_add(c, img, &crc, &node);
        fn_check_decoded(c, img, &crc, &node);
    }
    bn_clear(&node);

    if (avail >= BN_HEADER_SIZE && pk_is_packed(img))
        fn_packed(c, img, avail, depth);
}

int fuzz_node(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fn_ctx c = {data, size, data[0] & 1 ? BONSAI_KEY_U64 : BONSAI_KEY_BYTES,
                data[0]};
    size_t n = size - 1;
    uint8_t *img = malloc(n ? n : 1);
    FZ_CHECK(img != NULL, "harness: out of memory");
    if (n)
        memcpy(img, data + 1, n);
    if (c.ctl & 2)
        fn_fix_crc(img, n);
    /* an empty image is passed as NULL: the decoders must refuse it */
    fn_image(&c, n ? img : NULL, n, 0);
    free(img);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_node(data, size);
}
#endif

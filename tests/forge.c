/* SPDX-License-Identifier: MIT */
/*
 * forge.c - store files built byte by byte from format.md; see forge.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "forge.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "checksum.h"
#include "compress.h"

#define HEAD_MIN 4096u
#define GROUP 64u
#define RESTART 16u

/* ---- bytes -------------------------------------------------------------- */

typedef struct out {
    uint8_t *p;
    size_t n, cap;
} out;

static void room(out *o, size_t more)
{
    if (o->n + more <= o->cap)
        return;
    size_t cap = o->cap ? o->cap : 256;
    while (cap < o->n + more)
        cap *= 2;
    o->p = realloc(o->p, cap);
    cr_assert(o->p, "forge: out of memory");
    o->cap = cap;
}

static void put(out *o, const void *p, size_t n)
{
    room(o, n);
    if (n)
        memcpy(o->p + o->n, p, n);
    o->n += n;
}

static void put_u8(out *o, unsigned v)
{
    uint8_t b = (uint8_t)v;
    put(o, &b, 1);
}

/* little-endian, width bytes */
static void put_le(out *o, uint64_t v, unsigned width)
{
    for (unsigned i = 0; i < width; i++)
        put_u8(o, (unsigned)(v >> (8 * i)) & 0xff);
}

static void set_le(uint8_t *p, uint64_t v, unsigned width)
{
    for (unsigned i = 0; i < width; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_varint(out *o, uint64_t v)
{
    while (v >= 0x80) {
        put_u8(o, (unsigned)(v & 0x7f) | 0x80);
        v >>= 7;
    }
    put_u8(o, (unsigned)v);
}

static unsigned bit_len(uint64_t v)
{
    unsigned b = 0;
    while (v) {
        b++;
        v >>= 1;
    }
    return b;
}

/* ---- node images -------------------------------------------------------- */

/* Header (crc last), then keys and tail. */
static tf_img image(unsigned type, unsigned flags, uint32_t count,
                    const out *keys, const out *tail)
{
    out o = {0};
    size_t len = 16 + keys->n + tail->n;
    put_u8(&o, type);
    put_u8(&o, flags);
    put_le(&o, count, 2);
    put_le(&o, len, 4);
    put_le(&o, 0, 4); /* crc, below */
    put_le(&o, keys->n, 4);
    put(&o, keys->p, keys->n);
    put(&o, tail->p, tail->n);
    set_le(o.p + 8, bonsai_crc32c(0, o.p, o.n), 4);
    return (tf_img){o.p, o.n};
}

/* The u64 key section: groups of 64, minimal base and width. */
static void u64_keys(out *o, uint32_t n, const uint64_t *k)
{
    for (uint32_t g = 0; g < n; g += GROUP) {
        uint32_t cnt = n - g < GROUP ? n - g : GROUP;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t j = g + 1; j < g + cnt; j++) {
            uint64_t d = k[j] - k[j - 1];
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
        }
        uint64_t base = cnt > 1 ? lo : 0;
        unsigned width = cnt > 1 ? bit_len(hi - base) : 0;
        put_varint(o, g ? k[g] - k[g - GROUP] : k[0]);
        put_u8(o, width);
        put_varint(o, base);
        size_t bytes = ((size_t)(cnt - 1) * width + 7) / 8;
        room(o, bytes);
        uint8_t *p = o->p + o->n;
        memset(p, 0, bytes);
        size_t bit = 0;
        for (uint32_t j = g + 1; j < g + cnt; j++) {
            uint64_t v = k[j] - k[j - 1] - base;
            for (unsigned b = 0; b < width; b++, bit++)
                if ((v >> b) & 1)
                    p[bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
        o->n += bytes;
    }
}

tf_img tf_leaf_u64(uint32_t n, const uint64_t *keys, const tf_val *vals)
{
    out k = {0}, t = {0};
    u64_keys(&k, n, keys);
    int empty = 1, same = 1, ovf = 0;
    for (uint32_t i = 0; vals && i < n; i++) {
        empty &= vals[i].len == 0 && !vals[i].overflow;
        same &= vals[i].len == vals[0].len;
        ovf |= vals[i].overflow;
    }
    unsigned flags = BN_F_KEY_U64;
    if (empty) {
        flags |= BN_F_VALS_EMPTY;
    } else if (same && !ovf) {
        flags |= BN_F_VALS_FIXED;
        put_varint(&t, vals[0].len);
        for (uint32_t i = 0; i < n; i++)
            put(&t, vals[i].p, vals[i].len);
    } else {
        flags |= ovf ? BN_F_OVERFLOW : 0;
        for (uint32_t i = 0; i < n; i++)
            put_varint(&t, (uint64_t)vals[i].len << 1 | (vals[i].overflow
                                                           ? 1 : 0));
        for (uint32_t i = 0; i < n; i++)
            put(&t, vals[i].p, vals[i].len);
    }
    tf_img im = image(BN_TYPE_LEAF, flags, n, &k, &t);
    free(k.p);
    free(t.p);
    return im;
}

tf_img tf_leaf_run(uint32_t n, uint64_t from, uint64_t step)
{
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    cr_assert(keys);
    for (uint32_t i = 0; i < n; i++)
        keys[i] = from + i * step;
    tf_img im = tf_leaf_u64(n, keys, NULL);
    free(keys);
    return im;
}

tf_img tf_branch_u64(uint32_t n, const uint64_t *keys, const bn_ext *kids)
{
    out k = {0}, t = {0};
    u64_keys(&k, n, keys);
    for (uint32_t i = 0; i < n; i++) {
        put_le(&t, kids[i].pgno, 5);
        put_le(&t, kids[i].npages, 3);
    }
    tf_img im = image(BN_TYPE_BRANCH, BN_F_KEY_U64, n, &k, &t);
    free(k.p);
    free(t.p);
    return im;
}

tf_img tf_pack(unsigned codec, tf_img raw)
{
    size_t cap = bx_compress_bound(codec, raw.n), body;
    out o = {0};
    room(&o, 17 + cap);
    int rc = bx_compress(codec, 6, raw.p, raw.n, o.p + 17, cap, &body);
    cr_assert(rc == 0, "forge: the image does not compress (%d)", rc);
    o.n = 17 + body;
    o.p[0] = raw.p[0];
    o.p[1] = raw.p[1] | 0x10;
    memcpy(o.p + 2, raw.p + 2, 2);
    set_le(o.p + 4, o.n, 4);
    set_le(o.p + 8, 0, 4);
    set_le(o.p + 12, raw.n, 4);
    o.p[16] = (uint8_t)codec;
    set_le(o.p + 8, bonsai_crc32c(0, o.p, o.n), 4);
    free(raw.p);
    return (tf_img){o.p, o.n};
}

/* ---- the file ----------------------------------------------------------- */

static uint64_t head_bytes(uint32_t page_size)
{
    return page_size > HEAD_MIN ? page_size : HEAD_MIN;
}

void tf_init(tf_store *s, uint32_t page_size, uint32_t node_bytes,
             unsigned codec)
{
    *s = (tf_store){.page_size = page_size, .node_bytes = node_bytes,
                    .codec = codec};
    s->first = head_bytes(page_size) / page_size;
    s->end = s->first;
    s->cap = head_bytes(page_size);
    s->buf = calloc(1, s->cap);
    cr_assert(s->buf);
}

void tf_free(tf_store *s)
{
    free(s->buf);
    s->buf = NULL;
}

/* Room for npages more pages, zero. */
static uint8_t *take_pages(tf_store *s, uint64_t npages, bn_ext *e)
{
    size_t need = (size_t)(s->end + npages) * s->page_size;
    if (need > s->cap) {
        s->buf = realloc(s->buf, need);
        cr_assert(s->buf);
        memset(s->buf + s->cap, 0, need - s->cap);
        s->cap = need;
    }
    *e = (bn_ext){s->end, (uint32_t)npages};
    s->end += npages;
    return s->buf + e->pgno * s->page_size;
}

bn_ext tf_place(tf_store *s, tf_img im)
{
    bn_ext e;
    uint8_t *p = take_pages(s, (im.n + s->page_size - 1) / s->page_size, &e);
    memcpy(p, im.p, im.n);
    free(im.p);
    return e;
}

bn_ext tf_overflow(tf_store *s, const void *value, uint64_t len,
                   uint8_t ref[20])
{
    bn_ext e;
    uint8_t *p = take_pages(s, (16 + len + s->page_size - 1) / s->page_size,
                            &e);
    p[0] = 3;
    set_le(p + 4, bonsai_crc32c(0, value, len), 4);
    set_le(p + 8, len, 8);
    memcpy(p + 16, value, len);
    set_le(ref, e.pgno, 8);
    set_le(ref + 8, e.npages, 4);
    set_le(ref + 12, len, 8);
    return e;
}

static int by_name(const void *a, const void *b)
{
    const tf_map *x = a, *y = b;
    size_t lx = strlen(x->name), ly = strlen(y->name);
    int c = memcmp(x->name, y->name, lx < ly ? lx : ly);
    return c ? c : lx < ly ? -1 : lx > ly;
}

/* The catalog leaf: byte keys (shared prefixes, a restart every 16),
 * every value a 24-byte record (VALS_FIXED). */
static tf_img catalog_leaf(tf_map *m, unsigned n)
{
    qsort(m, n, sizeof *m, by_name);
    out k = {0}, t = {0}, restarts = {0};
    const char *prev = "";
    for (unsigned i = 0; i < n; i++) {
        size_t len = strlen(m[i].name), shared = 0;
        while (i % RESTART && shared < len && prev[shared] &&
               prev[shared] == m[i].name[shared])
            shared++;
        if (i % RESTART == 0)
            put_le(&restarts, k.n, 4);
        put_varint(&k, shared);
        put_varint(&k, len - shared);
        put(&k, m[i].name + shared, len - shared);
        prev = m[i].name;
    }
    put(&k, restarts.p, restarts.n);
    put_varint(&t, 24);
    for (unsigned i = 0; i < n; i++) {
        put_u8(&t, m[i].kind);
        put_u8(&t, m[i].flags);
        put_u8(&t, m[i].depth);
        put_u8(&t, 0);
        put_le(&t, m[i].root.pgno, 5);
        put_le(&t, m[i].root.npages, 3);
        put_le(&t, m[i].count, 8);
        put_le(&t, 0, 4);
    }
    tf_img im = image(BN_TYPE_LEAF, n ? BN_F_VALS_FIXED : BN_F_VALS_EMPTY,
                      n, &k, &t);
    free(k.p);
    free(t.p);
    free(restarts.p);
    return im;
}

void tf_finish(tf_store *s, const tf_map *maps, unsigned n)
{
    bn_ext cat = {0, 0};
    if (n) {
        tf_map *m = malloc(n * sizeof *m);
        cr_assert(m);
        memcpy(m, maps, n * sizeof *m);
        cat = tf_place(s, catalog_leaf(m, n));
        free(m);
    }
    uint8_t *h = s->buf;
    memcpy(h, "bonsai\x1a\n", 8);
    set_le(h + 8, 1, 4);
    set_le(h + 12, s->page_size, 4);
    set_le(h + 16, s->node_bytes, 4);
    set_le(h + 20, 1024, 4); /* node_entries */
    set_le(h + 24, s->codec, 4);
    set_le(h + 28, bonsai_crc32c(0, h, 28), 4);
    uint8_t *m = s->buf + 512;
    memset(m, 0, 52);
    memcpy(m, "meta", 4);
    set_le(m + 8, 0, 8); /* txn */
    set_le(m + 16, s->end, 8);
    set_le(m + 24, cat.pgno, 5);
    set_le(m + 29, cat.npages, 3);
    m[32] = n ? 1 : 0;
    set_le(m + 40, n, 8);
    set_le(m + 48, bonsai_crc32c(0, m, 48), 4);
}

void tf_write(const tf_store *s, const char *path)
{
    size_t n = (size_t)s->end * s->page_size;
    if (n < head_bytes(s->page_size))
        n = head_bytes(s->page_size);
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(s->buf, 1, n, f) == n && fclose(f) == 0,
              "forge: cannot write %s", path);
}

/* SPDX-License-Identifier: MIT */
/*
 * node.c - node images and decoded nodes.
 *
 * An image is one node as stored: a 16-byte header, the key section, then
 * the value section (leaf) or the child section (branch), which ends
 * exactly at the image length.  Every field is little-endian and assembled
 * byte by byte; a varint is the LEB128 of bytes.h, always in its shortest
 * form.
 *
 *   header (16 bytes):
 *     0  u8   type       1 = leaf, 2 = branch
 *     1  u8   flags      0x01 KEY_U64: u64 keys (else byte-string keys)
 *                        0x02 VALS_EMPTY: leaf, every value is empty
 *                        0x04 VALS_FIXED: leaf, every value has length L
 *                        0x08 OVERFLOW: leaf, some value is an overflow ref
 *                        a branch sets only 0x01; any other bit is corrupt
 *     2  u16  count n    leaf 0..65535, branch 1..65535
 *     4  u32  length     the whole image in bytes, header included
 *     8  u32  crc        bonsai_crc32c(0, image, length), these 4 bytes 0
 *     12 u32  keys_len   bytes of the key section, which starts at 16
 *
 *     flags 0x20 KEY_INDEX: u64 keys in the indexed form below (every u64
 *     image this code writes but one decoded from the walked form and not
 *     changed since); clear on a u64 image: the walked form of format 2
 *     flags 0x40 ZERO_BASE, only with KEY_INDEX: groups take base 0 where
 *     that needs no wider width (every indexed image this code writes but
 *     one decoded from format 3 and not changed since); clear: format 3's
 *     smallest base in every group
 *
 *     flags 0x80 COUNTED, only with ZERO_BASE: u64 keys in counted groups
 *     (format 5; every u64 image this code writes but one decoded from an
 *     older form and not changed since); clear: the older forms below
 *
 *   key section, u64 keys, counted form (format.md; the groups form is
 *   u64groups.h's, and a decoded node keeps where its groups lie):
 *     section := first:varint                        n = 1
 *              | first:varint 0x00 step:varint      n >= 2, evenly spaced
 *              | first:varint 0x02 groups           otherwise
 *
 *   key section, u64 keys, indexed form (formats 3 and 4):
 *     section := first:varint                       n = 1
 *              | first:varint 0x00 step:varint      n >= 2, evenly spaced
 *              | first:varint 0x01 [rw:u8 ow:u8 index] group[G]
 *                (nothing for n = 0; the index only when G >= 2)
 *     first   key 0; step >= 1: key i = first + i * step
 *     G       ceil(n / 64) groups of 64 entries (the last may be shorter),
 *             back to back to the section's end; group g's first key is
 *             first + its rel
 *     group   := width:u8 base:varint packed
 *     width   0..64: bits needed for (largest difference - base)
 *     base    smallest difference key[j] - key[j-1] inside the group (0 for
 *             a group of one entry); with ZERO_BASE, 0 when the largest
 *             difference needs no more bits than it less the smallest
 *     packed  ceil((cnt-1) * width / 8) bytes: key[j] - key[j-1] - base for
 *             j = 1..cnt-1 as width-bit numbers, a little-endian bit stream
 *             (first value in the low bits of the first byte); the unused
 *             high bits of the last byte are zero
 *     index   for groups 1..G-1: rel (rw bits: its first key - first) and
 *             off (ow bits: bytes from group 0's header to its header), a
 *             bit stream like packed; rw, ow = the bit lengths of the last
 *             record's rel and off
 *
 *   key section, u64 keys, walked form (format 2; read, and written only
 *   for a node decoded from it): the groups alone, each group :=
 *     gdelta:varint width:u8 base:varint packed, gdelta = group 0's first
 *     key, or the difference from the previous group's first key
 *
 *   key section, byte-string keys: prefix compression, restart every 16
 *     entry   := shared:varint unshared:varint bytes[unshared]
 *     shared  the longest prefix in common with the previous key, except 0
 *             when i % 16 == 0 (a restart: the key is stored whole);
 *             1 <= shared + unshared <= 1024
 *     then ceil(n / 16) u32 restart offsets: entry 16r's offset from the
 *     start of the key section
 *
 *   Keys strictly increase: u64 numerically, byte strings in memcmp order
 *   (a proper prefix sorts first).
 *
 *   value section (leaf), one of:
 *     VALS_EMPTY  nothing: every value is empty
 *     VALS_FIXED  L:varint (L >= 1), then n * L value bytes
 *     general     n varints (len << 1 | is_overflow), len < 2^31, then the
 *                 bytes of every value in entry order; OVERFLOW is set iff
 *                 some entry is an overflow value (its bytes are an opaque
 *                 reference this layer stores but does not read)
 *     The encoder picks VALS_EMPTY when every value is empty and none is
 *     overflow, else VALS_FIXED when all have one length and none is
 *     overflow, else the general form; u64 keys evenly spaced take the
 *     step.  The decoder accepts only that choice, the shortest varints,
 *     the base of the image's rule, the smallest width, rw and ow, groups
 *     back to back and zero padding bits, so one node has exactly one
 *     image in each key form.
 *
 *   child section (branch): n entries of pgno:u40 npages:u24, npages >= 1
 */
#include "node.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "bitstream.h"
#include "bytes.h"
#include "checksum.h"
#include "regroup.h"
#include "u64groups.h"

#define GROUP 64u            /* u64 keys: entries per group */
#define RESTART 16u          /* byte keys: entries per restart point */
#define CHILD_BYTES 8u       /* u40 pgno + u24 npages */
#define MAX_COUNT 65535u     /* the u16 count */
#define MAX_VLEN 0x7fffffffu /* value lengths are < 2^31 */

/* What an empty value points at when no arena byte backs it. */
static const uint8_t no_bytes[1];

/* ---- small helpers ------------------------------------------------------ */

static inline uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* varint_len without a loop (sizes are computed for every entry). */
static inline unsigned vlen(uint64_t v)
{
    return (bit_len(v | 1) + 6) / 7;
}

#define HIGH_BITS UINT64_C(0x8080808080808080)

/* The low 7 bits of each of the 8 bytes of w, packed together (56 bits). */
static inline uint64_t gather7(uint64_t w)
{
    w &= ~HIGH_BITS;
    w = (w & UINT64_C(0x007f007f007f007f)) |
        (w & UINT64_C(0x7f007f007f007f00)) >> 1;
    w = (w & UINT64_C(0x00003fff00003fff)) |
        (w & UINT64_C(0x3fff00003fff0000)) >> 2;
    return (w & UINT64_C(0x000000000fffffff)) |
           (w & UINT64_C(0x0fffffff00000000)) >> 4;
}

/* rd_varint with at least 10 bytes before end: a word at a time. */
static inline int rd_varint_wide(const uint8_t **p, uint64_t *v)
{
    const uint8_t *q = *p;
    uint64_t w = get_le64(q), stop = ~w & HIGH_BITS;
    unsigned nb;
    if (stop) { /* it ends in these 8 bytes */
        nb = (unsigned)__builtin_ctzll(stop) / 8 + 1;
        if (nb < 8)
            w &= (UINT64_C(1) << (8 * nb)) - 1;
        *v = gather7(w);
    } else if (q[8] < 0x80) { /* 9 bytes */
        nb = 9;
        *v = gather7(w) | (uint64_t)q[8] << 56;
    } else { /* 10 bytes; the last holds bit 63 only */
        nb = 10;
        if (q[9] != 1)
            return -1;
        *v = gather7(w) | (uint64_t)(q[8] & 0x7f) << 56 | UINT64_C(1) << 63;
    }
    if (q[nb - 1] == 0)
        return -1;
    *p = q + nb;
    return 0;
}

/* rd_varint past its first byte's test. */
static int rd_varint_long(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    if (end - *p >= (ptrdiff_t)VARINT_MAX)
        return rd_varint_wide(p, v);
    if (varint_get(p, end, v) != 0 || (*p)[-1] == 0)
        return -1;
    return 0;
}

/* Reads a varint that must be in its shortest form (a padded one would
 * give a node a second image).  Returns 0 or -1.  Always inlined: the
 * one-byte case is most of a byte-key decode's varints, two an entry. */
__attribute__((always_inline)) static inline int
rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *q = *p;
    if (q < end && *q < 0x80) { /* the usual one-byte case */
        *v = *q;
        *p = q + 1;
        return 0;
    }
    return rd_varint_long(p, end, v);
}

/* Steps over a varint whose value is not needed. */
static inline int skip_varint(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *q = *p;
    if (end - q >= 8) {
        uint64_t stop = ~get_le64(q) & HIGH_BITS;
        if (stop) {
            *p = q + __builtin_ctzll(stop) / 8 + 1;
            return 0;
        }
    }
    for (unsigned i = 0; i < VARINT_MAX && q < end; i++)
        if (!(*q++ & 0x80)) {
            *p = q;
            return 0;
        }
    return -1;
}

static uint32_t common_prefix(const uint8_t *a, uint32_t alen,
                              const uint8_t *b, uint32_t blen)
{
    uint32_t m = min_u32(alen, blen), i = 0;
    for (; i + 8 <= m; i += 8) { /* eight bytes a step */
        uint64_t x = get_le64(a + i) ^ get_le64(b + i);
        if (x) /* little-endian: the lowest set bit is in the first byte */
            return i + (uint32_t)__builtin_ctzll(x) / 8;
    }
    while (i < m && a[i] == b[i])
        i++;
    return i;
}

static inline size_t packed_bytes(uint32_t cnt, unsigned width)
{
    return ((size_t)(cnt - 1) * width + 7) / 8;
}

/* ---- header ------------------------------------------------------------- */

static uint32_t image_crc(const uint8_t *img, uint32_t length)
{
    static const uint8_t zero[4];
    uint32_t crc = bonsai_crc32c(0, img, 8);
    crc = bonsai_crc32c(crc, zero, 4);
    return bonsai_crc32c(crc, img + 12, length - 12);
}

static int kind_matches(unsigned flags, unsigned kind)
{
    if (kind != BONSAI_KEY_U64 && kind != BONSAI_KEY_BYTES)
        return 0;
    return !!(flags & BN_F_KEY_U64) == (kind == BONSAI_KEY_U64);
}

static int flags_ok(unsigned type, unsigned flags, unsigned kind)
{
    if (!kind_matches(flags, kind))
        return 0;
    if ((flags & BN_F_KEY_INDEX) && !(flags & BN_F_KEY_U64))
        return 0;
    if ((flags & BN_F_ZERO_BASE) && !(flags & BN_F_KEY_INDEX))
        return 0;
    if ((flags & BN_F_COUNTED) && !(flags & BN_F_ZERO_BASE))
        return 0;
    flags &= ~(BN_F_KEY_INDEX | BN_F_ZERO_BASE | BN_F_COUNTED);
    if (type == BN_TYPE_BRANCH)
        return (flags & ~BN_F_KEY_U64) == 0;
    if (type != BN_TYPE_LEAF || (flags & ~BN_F_KNOWN))
        return 0;
    /* one value form at most; overflow refs only in the general form */
    unsigned form = flags & ~BN_F_KEY_U64;
    return form == 0 || form == BN_F_VALS_EMPTY || form == BN_F_VALS_FIXED ||
           form == BN_F_OVERFLOW;
}

int bn_img_check(const uint8_t *img, size_t avail, unsigned kind,
                 int verify_crc, bn_info *info)
{
    if (img == NULL || avail < BN_HEADER_SIZE)
        return BONSAI_CORRUPT;
    unsigned type = img[0], flags = img[1];
    uint32_t count = get_le16(img + 2);
    uint32_t length = get_le32(img + 4);
    uint32_t keys_len = get_le32(img + 12);
    uint64_t body = (uint64_t)BN_HEADER_SIZE + keys_len;

    if (!flags_ok(type, flags, kind))
        return BONSAI_CORRUPT;
    if (type == BN_TYPE_BRANCH && count == 0)
        return BONSAI_CORRUPT;
    if (length < BN_HEADER_SIZE || length > avail || body > length)
        return BONSAI_CORRUPT;
    /* sections whose size the header alone fixes */
    if (type == BN_TYPE_BRANCH && body + (uint64_t)CHILD_BYTES * count != length)
        return BONSAI_CORRUPT;
    if ((flags & BN_F_VALS_EMPTY) && body != length)
        return BONSAI_CORRUPT;
    if (verify_crc && image_crc(img, length) != get_le32(img + 8))
        return BONSAI_CORRUPT;

    info->type = (uint8_t)type;
    info->flags = (uint8_t)flags;
    info->count = count;
    info->length = length;
    info->keys_len = keys_len;
    return 0;
}

/* ---- u64 key section, in place ------------------------------------------ */

/* Reads the rest of a group header at p, whose first key gr->first and
 * start gr->start the caller set: width, base (skipped) and the packed
 * deltas, which must end by end.  *p = just past the group.  Returns 0 or
 * -1. */
static int grp_body(const uint8_t **p, const uint8_t *end, uint32_t n,
                    bn_grp *gr)
{
    if (*p >= end)
        return -1;
    gr->width = *(*p)++;
    gr->base_at = *p;
    if (gr->width > 64 || skip_varint(p, end))
        return -1;
    gr->cnt = min_u32(n - gr->start, GROUP);
    size_t len = packed_bytes(gr->cnt, gr->width);
    if (len > (size_t)(end - *p))
        return -1;
    gr->packed = *p;
    *p += len;
    return 0;
}

/* Format 2's walked form: reads the group after gr (gr zeroed before the
 * first) at *p, whose header starts with gdelta, the difference from the
 * group before.  The caller knows that group exists (its start < n). */
static int grp_next(const uint8_t **p, const uint8_t *end, uint32_t n,
                    bn_grp *gr)
{
    uint32_t start = gr->start + gr->cnt;
    uint64_t gdelta;
    if (rd_varint(p, end, &gdelta))
        return -1;
    gr->first = start == 0 ? gdelta : gr->first + gdelta;
    gr->start = start;
    return grp_body(p, end, n, gr);
}

/* Decodes the base of a group read by grp_next or ix_group. */
static inline int grp_base(bn_grp *gr, const uint8_t *end)
{
    const uint8_t *p = gr->base_at;
    return rd_varint(&p, end, &gr->base);
}

/* Delta j (1..cnt-1) of a group, base not added. */
static inline uint64_t grp_delta(const bn_grp *gr, const uint8_t *end,
                                 uint32_t j)
{
    return get_bits(gr->packed, end, (uint64_t)(j - 1) * gr->width,
                    gr->width);
}

/* Whether every delta of gr is one unaligned 8-byte read from its first
 * byte: most groups have deltas of at most 56 bits and 7 bytes of the key
 * section after them (a node's last group takes get_bits' care for the
 * section's end). */
static inline int grp_in_words(const bn_grp *gr, const uint8_t *end)
{
    return gr->width > 0 && gr->width <= 56 &&
           (size_t)(end - gr->packed) >= packed_bytes(gr->cnt, gr->width) + 7;
}

/* The delta at bit pos of a group grp_in_words accepts, base not added. */
static inline uint64_t grp_word_delta(const bn_grp *gr, uint64_t pos,
                                      uint64_t mask)
{
    return get_le64(gr->packed + (pos >> 3)) >> (pos & 7) & mask;
}

/* grp_find's scan of a group grp_in_words accepts: one read, shift and
 * mask a delta (a random get scans half a group, and get_bits cost it
 * twice the instructions). */
static uint32_t scan_words(const bn_grp *gr, uint64_t key, uint32_t from,
                           uint64_t *k)
{
    uint64_t kj = *k, mask = (UINT64_C(1) << gr->width) - 1;
    uint64_t pos = (uint64_t)from * gr->width; /* delta from + 1's bit */
    uint32_t j = from;
    while (kj < key && ++j < gr->cnt) {
        kj += gr->base + grp_word_delta(gr, pos, mask);
        pos += gr->width;
    }
    *k = kj;
    return j;
}

/* The first j from `from` on in the group whose key >= key (cnt if
 * none), given *k = key `from` of the group, <= key or not; *k = the key
 * at the answer (at cnt - 1 when none). */
static uint32_t grp_find(const bn_grp *gr, const uint8_t *end, uint64_t key,
                         uint32_t from, uint64_t *k)
{
    uint64_t kj = *k;
    uint32_t j = from;
    if (gr->width == 0 && gr->base > 0) { /* evenly spaced: no scan */
        uint64_t gap = kj < key ? key - kj : 0;
        uint64_t steps = gap / gr->base + (gap % gr->base != 0);
        j = steps < gr->cnt - from ? from + (uint32_t)steps : gr->cnt;
        *k = kj + ((j < gr->cnt ? j : gr->cnt - 1) - from) * gr->base;
        return j;
    }
    if (grp_in_words(gr, end))
        return scan_words(gr, key, from, k);
    while (kj < key && ++j < gr->cnt)
        kj += gr->base + grp_delta(gr, end, j);
    *k = kj;
    return j;
}

/* *pos = the first index from the group on whose key >= key, *eq = it
 * equals key, for a group (read by grp_next or ix_group) whose first key
 * is <= key.  Returns 0 or -1. */
static int grp_search(bn_grp *gr, const uint8_t *end, uint64_t key,
                      uint32_t *pos, int *eq)
{
    if (grp_base(gr, end))
        return -1;
    uint64_t k = gr->first;
    uint32_t j = grp_find(gr, end, key, 0, &k);
    *pos = gr->start + j;
    *eq = j < gr->cnt && k == key;
    return 0;
}

/* Key j of a group whose base grp_base read. */
static uint64_t grp_key(const bn_grp *gr, const uint8_t *end, uint32_t j)
{
    uint64_t k = gr->first;
    for (uint32_t i = 1; i <= j; i++)
        k += gr->base + grp_delta(gr, end, i);
    return k;
}

/* Opens an indexed section of n entries: its first key and form, and
 * where its index and groups lie.  Returns 0 or -1. */
static int ix_open(bn_ixsec *x, const uint8_t *s, const uint8_t *end,
                   uint32_t n)
{
    const uint8_t *p = s;
    memset(x, 0, sizeof *x);
    x->n = n;
    x->end = end;
    if (n == 0 || rd_varint(&p, end, &x->first))
        return -1;
    x->after = p;
    if (n == 1)
        return 0;
    if (p >= end || *p > 1)
        return -1;
    if (*p++ == 0) { /* evenly spaced */
        if (rd_varint(&p, end, &x->step) || x->step == 0 ||
            (n - 1) > (UINT64_MAX - x->first) / x->step)
            return -1;
        x->after = p;
        return 0;
    }
    x->ngroups = (n + GROUP - 1) / GROUP;
    if (x->ngroups > 1) {
        if (end - p < 2)
            return -1;
        x->rw = p[0];
        x->ow = p[1];
        p += 2;
        if (x->rw < 1 || x->rw > 64 || x->ow < 1 || x->ow > 32)
            return -1;
        uint64_t bits = (uint64_t)(x->ngroups - 1) * (x->rw + x->ow);
        if ((bits + 7) / 8 > (uint64_t)(end - p))
            return -1;
        x->index = p;
        p += (bits + 7) / 8;
    }
    x->groups = p;
    return 0;
}

/* Group g's first key less key 0 (0 for group 0). */
static inline uint64_t ix_rel(const bn_ixsec *x, uint32_t g)
{
    if (g == 0)
        return 0;
    uint64_t pos = (uint64_t)(g - 1) * (x->rw + x->ow);
    return get_bits(x->index, x->end, pos, x->rw);
}

/* Where group g's header starts, from group 0's. */
static inline uint64_t ix_off(const bn_ixsec *x, uint32_t g)
{
    if (g == 0)
        return 0;
    uint64_t pos = (uint64_t)(g - 1) * (x->rw + x->ow) + x->rw;
    return get_bits(x->index, x->end, pos, x->ow);
}

/* Reads group g (< ngroups) of a grouped section; *after = just past it.
 * Returns 0 or -1. */
static int ix_group(const bn_ixsec *x, uint32_t g, bn_grp *gr,
                    const uint8_t **after)
{
    uint64_t rel = ix_rel(x, g), off = ix_off(x, g);
    if (rel > UINT64_MAX - x->first || off >= (uint64_t)(x->end - x->groups))
        return -1;
    const uint8_t *p = x->groups + off;
    gr->first = x->first + rel;
    gr->start = g * GROUP;
    if (grp_body(&p, x->end, x->n, gr))
        return -1;
    *after = p;
    return 0;
}

/* The last group whose first key is <= key, from group lo on (whose
 * first key is <= key).  Groups hold GROUP keys each, so where keys are
 * evenly spread (sequential or hashed keys) the group is where key's
 * share of the span says: that guess is read first, and halving does the
 * rest when it misses. */
static uint32_t ix_group_of(const bn_ixsec *x, uint64_t key, uint32_t lo)
{
    uint64_t d = key - x->first;
    uint32_t hi = x->ngroups - 1;
    uint64_t last = ix_rel(x, hi);
    if (d >= last)
        return hi;
    if (hi - lo >= 4) {
        uint32_t g = (uint32_t)((double)d / (double)last * hi);
        g = g < lo ? lo : g < hi ? g : hi - 1;
        if (ix_rel(x, g) > d) /* g > lo, whose group starts <= key */
            hi = g - 1;
        else if (ix_rel(x, g + 1) > d)
            return g;
        else
            lo = g + 1;
    }
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (ix_rel(x, mid) <= d)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The grouped form's search, above key 0: from the top when *m is clear,
 * else from where *m, a search of the same section for a smaller key,
 * ended (in its group when key is below the next group's first key, else
 * from the next group on).  Leaves the answer in *m. */
static int ix_search_on(const bn_ixsec *x, uint64_t key, bn_mark *m,
                        uint32_t *pos, int *eq)
{
    uint32_t g = 0, from = 0;
    uint64_t k = 0;
    bn_grp gr;
    const uint8_t *after;
    if (m->set) {
        g = m->idx / GROUP;
        from = m->idx % GROUP;
        k = m->key;
    }
    if (!m->set ||
        (g + 1 < x->ngroups && key - x->first >= ix_rel(x, g + 1))) {
        g = ix_group_of(x, key, m->set ? g + 1 : 0);
        from = 0;
    }
    if (m->set && m->have_group && m->g == g) {
        gr = m->gr;
    } else {
        if (ix_group(x, g, &gr, &after) || grp_base(&gr, x->end))
            return -1;
        m->have_group = 1;
        m->g = g;
        m->gr = gr;
    }
    if (from == 0)
        k = gr.first;
    uint32_t j = grp_find(&gr, x->end, key, from, &k);
    *pos = gr.start + j;
    *eq = j < gr.cnt && k == key;
    m->set = 1;
    m->idx = *pos;
    if (j == gr.cnt) /* the next group's first key, if there is one */
        k = g + 1 < x->ngroups ? x->first + ix_rel(x, g + 1) : 0;
    m->key = k;
    return 0;
}

static int ix_search(const uint8_t *s, const uint8_t *end, uint32_t n,
                     uint64_t key, uint32_t *pos, int *eq)
{
    bn_ixsec x;
    if (ix_open(&x, s, end, n))
        return -1;
    if (key <= x.first || n == 1) {
        *pos = key > x.first;
        *eq = key == x.first;
        return 0;
    }
    if (x.step) { /* key = first + pos * step, or falls between two */
        uint64_t gap = key - x.first, q = gap / x.step;
        int exact = gap % x.step == 0;
        *pos = q >= n ? n : (uint32_t)q + !exact;
        *eq = q < n && exact;
        return 0;
    }
    bn_mark none = {0};
    return ix_search_on(&x, key, &none, pos, eq);
}

static int ix_key_at(const uint8_t *s, const uint8_t *end, uint32_t n,
                     uint32_t idx, uint64_t *out)
{
    bn_ixsec x;
    bn_grp gr;
    const uint8_t *after;
    if (ix_open(&x, s, end, n))
        return -1;
    if (idx == 0 || x.step) {
        *out = x.first + idx * x.step;
        return 0;
    }
    if (ix_group(&x, idx / GROUP, &gr, &after) || grp_base(&gr, end))
        return -1;
    *out = grp_key(&gr, end, idx % GROUP);
    return 0;
}

/* The walked form: *pos = first index whose key >= key (n if none), *eq =
 * it equals key. */
static int walk_search(const uint8_t *s, const uint8_t *end, uint32_t n,
                       uint64_t key, uint32_t *pos, int *eq)
{
    const uint8_t *p = s;
    bn_grp cur = {0}, next;

    if (grp_next(&p, end, n, &cur))
        return -1;
    if (key < cur.first)
        return 0;
    /* the answer is in the last group that starts at or below key */
    while (cur.start + cur.cnt < n) {
        next = cur;
        if (grp_next(&p, end, n, &next))
            return -1;
        if (next.first > key)
            break;
        cur = next;
    }
    return grp_search(&cur, end, key, pos, eq);
}

static int walk_key_at(const uint8_t *s, const uint8_t *end, uint32_t n,
                       uint32_t idx, uint64_t *out)
{
    const uint8_t *p = s;
    bn_grp gr = {0};
    do {
        if (grp_next(&p, end, n, &gr))
            return -1;
    } while (gr.start + gr.cnt <= idx);
    if (grp_base(&gr, end))
        return -1;
    *out = grp_key(&gr, end, idx - gr.start);
    return 0;
}

/* A counted section (format 5) of n >= 2 keys in the groups form: key 0
 * into *first and *groups past the marker; 0, or 1 for the step form
 * (format 4's, read by ix_*), or -1. */
static int cg_open(const uint8_t *s, const uint8_t *end, uint64_t *first,
                   const uint8_t **groups)
{
    const uint8_t *p = s;
    if (rd_varint(&p, end, first) || p >= end)
        return -1;
    if (*p == 0)
        return 1;
    if (*p != 2)
        return -1;
    *groups = p + 1;
    return 0;
}

static int cg_search(const uint8_t *s, const uint8_t *end, uint32_t n,
                     uint64_t key, uint32_t *pos, int *eq)
{
    uint64_t first;
    const uint8_t *g;
    int form = n < 2 ? 1 : cg_open(s, end, &first, &g);
    if (form != 0)
        return form < 0 ? -1 : ix_search(s, end, n, key, pos, eq);
    return ug_search(g, end, first, n, key, pos, eq);
}

static int cg_key_at(const uint8_t *s, const uint8_t *end, uint32_t n,
                     uint32_t idx, uint64_t *out)
{
    uint64_t first;
    const uint8_t *g;
    int form = n < 2 ? 1 : cg_open(s, end, &first, &g);
    if (form != 0)
        return form < 0 ? -1 : ix_key_at(s, end, n, idx, out);
    return ug_key_at(g, end, first, n, idx, out);
}

/* *pos = first index whose key >= key (n if none), *eq = it equals key.
 * flags: the image's. */
static int u64_search(const uint8_t *s, const uint8_t *end, uint32_t n,
                      unsigned flags, uint64_t key, uint32_t *pos, int *eq)
{
    *pos = 0;
    *eq = 0;
    if (n == 0)
        return 0;
    if (flags & BN_F_COUNTED)
        return cg_search(s, end, n, key, pos, eq);
    return flags & BN_F_KEY_INDEX ? ix_search(s, end, n, key, pos, eq)
                                  : walk_search(s, end, n, key, pos, eq);
}

static int u64_key_at(const uint8_t *s, const uint8_t *end, uint32_t n,
                      unsigned flags, uint32_t idx, uint64_t *out)
{
    if (flags & BN_F_COUNTED)
        return cg_key_at(s, end, n, idx, out);
    return flags & BN_F_KEY_INDEX ? ix_key_at(s, end, n, idx, out)
                                  : walk_key_at(s, end, n, idx, out);
}

/* ---- byte key section, in place ----------------------------------------- */

/* A byte-key section: the entries, then the restart offsets. */
typedef struct bsec {
    const uint8_t *s;    /* section start */
    const uint8_t *ents; /* end of the entries, start of the restarts */
    uint32_t n;          /* entries */
    uint32_t nr;         /* restarts */
} bsec;

static int bsec_open(bsec *b, const uint8_t *s, uint32_t keys_len,
                     uint32_t n)
{
    b->nr = (n + RESTART - 1) / RESTART;
    if ((uint64_t)b->nr * 4 > keys_len)
        return -1;
    b->s = s;
    b->ents = s + keys_len - (size_t)b->nr * 4;
    b->n = n;
    return 0;
}

/* Where restart r's entry starts. */
static int bsec_restart(const bsec *b, uint32_t r, const uint8_t **p)
{
    uint32_t off = get_le32(b->ents + (size_t)r * 4);
    if (off >= (size_t)(b->ents - b->s))
        return -1;
    *p = b->s + off;
    return 0;
}

/* The two lengths that open a byte-key entry, and where its bytes start
 * (NULL if the lengths are bad). */
typedef struct entry_lens {
    const uint8_t *p;
    uint64_t shared, unshared;
} entry_lens;

/* Either length longer than one byte: rare, and out of line, so that the
 * usual case keeps its position in a register (a position passed by
 * address lives in memory, and a scan would wait on it every entry). */
__attribute__((noinline)) static entry_lens
rd_entry_lens_slow(const uint8_t *q, const uint8_t *end)
{
    entry_lens e = {NULL, 0, 0};
    if (rd_varint(&q, end, &e.shared) || rd_varint(&q, end, &e.unshared))
        return e;
    e.p = q;
    return e;
}

__attribute__((always_inline)) static inline entry_lens
rd_entry_lens(const uint8_t *q, const uint8_t *end)
{
    if (end - q >= 2 && (q[0] | q[1]) < 0x80)
        return (entry_lens){q + 2, q[0], q[1]};
    return rd_entry_lens_slow(q, end);
}

/* Steps over the next entry of a restart block, whose key shares *shares
 * bytes with the one before (*len bytes, 0 at a restart, which forces
 * shared == 0; its own length on return) and stores the rest, *sfx, in
 * place.  Returns 0 or -1. */
__attribute__((always_inline)) static inline int
bsec_next(const uint8_t **p, const uint8_t *end, const uint8_t **sfx,
          uint32_t *len, uint32_t *shares)
{
    entry_lens e = rd_entry_lens(*p, end);
    uint64_t shared = e.shared, unshared = e.unshared;
    if (!e.p || shared > *len || unshared > BONSAI_MAX_KEY - shared ||
        shared + unshared == 0 || unshared > (uint64_t)(end - e.p))
        return -1;
    *sfx = e.p;
    *p = e.p + unshared;
    *len = (uint32_t)(shared + unshared);
    *shares = (uint32_t)shared;
    return 0;
}

/* Reads the next entry of a restart block into buf (holding the one
 * before, *len bytes): its shared prefix stays, its suffix is copied. */
static int bsec_entry(const uint8_t **p, const uint8_t *end, uint8_t *buf,
                      uint32_t *len)
{
    const uint8_t *sfx;
    uint32_t shares;
    if (bsec_next(p, end, &sfx, len, &shares))
        return -1;
    memcpy(buf + shares, sfx, *len - shares);
    return 0;
}

/* The whole key stored at restart r, pointing into the image. */
static int bsec_restart_key(const bsec *b, uint32_t r, const uint8_t **key,
                            uint32_t *len)
{
    const uint8_t *p;
    if (bsec_restart(b, r, &p))
        return -1;
    entry_lens e = rd_entry_lens(p, b->ents);
    if (!e.p || e.shared != 0 || e.unshared == 0 ||
        e.unshared > BONSAI_MAX_KEY || e.unshared > (uint64_t)(b->ents - e.p))
        return -1;
    *key = e.p;
    *len = (uint32_t)e.unshared;
    return 0;
}

/* *pos = first index whose key >= key (n if none), *eq = it equals key:
 * binary search over the restart keys, then a scan of one restart run. */
static int bytes_search(const bsec *b, const uint8_t *key, uint32_t klen,
                        uint32_t *pos, int *eq)
{
    uint32_t lo = 0, hi = b->nr;

    *pos = 0;
    *eq = 0;
    while (lo < hi) { /* lo = first restart whose key is above key */
        uint32_t mid = lo + (hi - lo) / 2, rlen;
        const uint8_t *rk;
        if (bsec_restart_key(b, mid, &rk, &rlen))
            return -1;
        if (key_cmp(rk, rlen, key, klen) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) /* below every key (or no keys) */
        return 0;

    uint32_t i = (lo - 1) * RESTART, stop = min_u32(i + RESTART, b->n);
    uint32_t len = 0, shares;
    const uint8_t *p, *sfx;
    if (bsec_restart(b, lo - 1, &p) ||
        bsec_next(&p, b->ents, &sfx, &len, &shares))
        return -1;
    /* m: bytes the entry before shares with key.  Keys increase, so an
     * entry sharing fewer than m bytes with it is above key and one
     * sharing more is still below: only shares == m needs a compare, and
     * then only of its own stored bytes, so no key is rebuilt */
    uint32_t m = common_prefix(sfx, len, key, klen);
    int c = key_cmp(sfx + m, len - m, key + m, klen - m);
    while (c < 0 && ++i < stop) {
        if (bsec_next(&p, b->ents, &sfx, &len, &shares))
            return -1;
        if (shares < m) {
            c = 1;
        } else if (shares == m) {
            uint32_t own = len - m;
            uint32_t d = common_prefix(sfx, own, key + m, klen - m);
            m += d;
            c = key_cmp(sfx + d, own - d, key + m, klen - m);
        }
    }
    *pos = i;
    *eq = i < stop && c == 0;
    return 0;
}

static int bytes_key_at(const bsec *b, uint32_t idx, uint8_t *buf,
                        uint32_t *len)
{
    const uint8_t *p;
    *len = 0;
    if (bsec_restart(b, idx / RESTART, &p))
        return -1;
    for (uint32_t i = 0; i <= idx % RESTART; i++)
        if (bsec_entry(&p, b->ents, buf, len))
            return -1;
    return 0;
}

/* ---- images, read in place ---------------------------------------------- */

int bn_img_search(const uint8_t *img, const bn_info *info, unsigned kind,
                  const bn_key *key, uint32_t *idx, int *found)
{
    const uint8_t *s = img + BN_HEADER_SIZE;
    uint32_t pos;
    int eq, rc;

    if (!kind_matches(info->flags, kind))
        return BONSAI_CORRUPT;
    if (kind == BONSAI_KEY_U64) {
        rc = u64_search(s, s + info->keys_len, info->count, info->flags,
                        key->u, &pos, &eq);
    } else {
        bsec b;
        rc = bsec_open(&b, s, info->keys_len, info->count);
        if (rc == 0)
            rc = bytes_search(&b, key->b, key->len, &pos, &eq);
    }
    if (rc)
        return BONSAI_CORRUPT;
    if (info->type == BN_TYPE_BRANCH && !eq && pos > 0)
        pos--; /* the child whose range holds key */
    *idx = pos;
    if (found)
        *found = eq;
    return 0;
}

int bn_img_search_on(const uint8_t *img, const bn_info *info, unsigned kind,
                     bn_key key, bn_mark *mark, uint32_t *idx, int *found)
{
    const uint8_t *s = img + BN_HEADER_SIZE, *end = s + info->keys_len;
    if (mark->set && mark->idx >= info->count) { /* past the last key */
        *idx = info->count;
        *found = 0;
        return 0;
    }
    if (!mark->set || mark->img != img) { /* the index read once a run */
        mark->img = NULL;
        mark->have_group = 0;
        int grouped = kind == BONSAI_KEY_U64 &&
                      info->type == BN_TYPE_LEAF &&
                      kind_matches(info->flags, kind) &&
                      (info->flags & BN_F_KEY_INDEX) && info->count >= 2;
        mark->counted = grouped && (info->flags & BN_F_COUNTED);
        if (mark->counted) {
            uint64_t first;
            const uint8_t *g;
            grouped = cg_open(s, end, &first, &g) == 0 &&
                      ug_walk_open(&mark->w, g, end, first, info->count) == 0;
        } else if (grouped) {
            grouped = !ix_open(&mark->x, s, end, info->count) &&
                      !mark->x.step;
        }
        if (!grouped) {
            mark->set = 0; /* the plain search, and the next one too */
            return bn_img_search(img, info, kind, &key, idx, found);
        }
        mark->img = img;
    }
    if (mark->counted) {
        if (ug_walk_search(&mark->w, key.u, idx, found))
            return BONSAI_CORRUPT;
        mark->set = 1;
        mark->idx = *idx;
        mark->key = mark->w.cur;
        return 0;
    }
    if (key.u <= mark->x.first) {
        mark->set = 0;
        return bn_img_search(img, info, kind, &key, idx, found);
    }
    if (ix_search_on(&mark->x, key.u, mark, idx, found))
        return BONSAI_CORRUPT;
    return 0;
}

void bn_img_search_span(const uint8_t *img, const bn_info *info,
                        unsigned kind, bn_key key, size_t *off, size_t *len)
{
    const uint8_t *s = img + BN_HEADER_SIZE, *end = s + info->keys_len;
    bn_ixsec x;
    *off = BN_HEADER_SIZE;
    *len = info->keys_len;
    if (kind != BONSAI_KEY_U64 || !(info->flags & BN_F_KEY_INDEX) ||
        (info->flags & BN_F_COUNTED) || info->count < 2 || ix_open(&x, s, end, info->count) ||
        x.ngroups < 2 || key.u <= x.first)
        return;
    uint32_t g = ix_group_of(&x, key.u, 0);
    uint64_t from = ix_off(&x, g), size = (uint64_t)(end - x.groups);
    uint64_t to = g + 1 < x.ngroups ? ix_off(&x, g + 1) : size;
    if (from < to && to <= size) {
        *off = (size_t)(x.groups - img) + (size_t)from;
        *len = (size_t)(to - from);
    }
}

int bn_img_key(const uint8_t *img, const bn_info *info, unsigned kind,
               uint32_t idx, uint8_t *buf, bn_key *out)
{
    const uint8_t *s = img + BN_HEADER_SIZE;
    if (idx >= info->count || !kind_matches(info->flags, kind))
        return BONSAI_CORRUPT;
    memset(out, 0, sizeof *out);
    if (kind == BONSAI_KEY_U64)
        return u64_key_at(s, s + info->keys_len, info->count, info->flags,
                          idx, &out->u)
                   ? BONSAI_CORRUPT
                   : 0;
    bsec b;
    if (bsec_open(&b, s, info->keys_len, info->count) ||
        bytes_key_at(&b, idx, buf, &out->len))
        return BONSAI_CORRUPT;
    out->b = buf;
    return 0;
}

static int fixed_value(const uint8_t *p, const uint8_t *end, uint32_t idx,
                       const uint8_t **val, uint32_t *len)
{
    uint64_t l;
    if (rd_varint(&p, end, &l) || l == 0 || l > MAX_VLEN)
        return BONSAI_CORRUPT;
    if ((uint64_t)(idx + 1) * l > (uint64_t)(end - p))
        return BONSAI_CORRUPT;
    *val = p + (size_t)idx * l;
    *len = (uint32_t)l;
    return 0;
}

/* Sum of the lengths in 8 one-byte general-form varints (len << 1 | f). */
static inline uint64_t sum_short_lens(uint64_t w)
{
    w = (w >> 1) & UINT64_C(0x7f7f7f7f7f7f7f7f);
    w = (w & UINT64_C(0x00ff00ff00ff00ff)) +
        ((w >> 8) & UINT64_C(0x00ff00ff00ff00ff));
    return (w * UINT64_C(0x0001000100010001)) >> 48;
}

/* General form: the lengths before idx say where its bytes start, and the
 * bytes begin after all n length varints, so all of those are walked,
 * eight bytes at a time where possible. */
static int general_value(const uint8_t *p, const uint8_t *end, uint32_t n,
                         uint32_t idx, const uint8_t **val, uint32_t *len,
                         unsigned *vflag)
{
    uint64_t before = 0, v = 0;
    for (uint32_t i = 0; i <= idx;) {
        if (idx - i >= 8 && end - p >= 8 && !(get_le64(p) & HIGH_BITS)) {
            before += sum_short_lens(get_le64(p)); /* 8 short lengths */
            p += 8;
            i += 8;
            continue;
        }
        if (rd_varint(&p, end, &v) || (v >> 1) > MAX_VLEN)
            return BONSAI_CORRUPT;
        if (i++ < idx)
            before += v >> 1;
    }
    for (uint32_t left = n - idx - 1; left > 0;) {
        if (end - p >= 8) { /* count the varints ending in 8 bytes */
            uint32_t ends = (uint32_t)__builtin_popcountll(~get_le64(p) &
                                                           HIGH_BITS);
            if (ends < left) { /* all 8 bytes are length bytes */
                left -= ends;
                p += 8;
                continue;
            }
        }
        if (p >= end)
            return BONSAI_CORRUPT;
        left -= !(*p++ & 0x80); /* a byte without the high bit ends one */
    }
    if (before + (v >> 1) > (uint64_t)(end - p))
        return BONSAI_CORRUPT;
    *val = p + before;
    *len = (uint32_t)(v >> 1);
    *vflag = (unsigned)(v & 1);
    return 0;
}

int bn_img_value(const uint8_t *img, const bn_info *info, uint32_t idx,
                 const uint8_t **val, uint32_t *len, unsigned *vflag)
{
    const uint8_t *p = img + BN_HEADER_SIZE + info->keys_len;
    const uint8_t *end = img + info->length;

    if (info->type != BN_TYPE_LEAF || idx >= info->count)
        return BONSAI_CORRUPT;
    *vflag = 0;
    if (info->flags & BN_F_VALS_EMPTY) {
        *val = p;
        *len = 0;
        return 0;
    }
    if (info->flags & BN_F_VALS_FIXED)
        return fixed_value(p, end, idx, val, len);
    return general_value(p, end, info->count, idx, val, len, vflag);
}

int bn_img_child(const uint8_t *img, const bn_info *info, uint32_t idx,
                 bn_ext *out)
{
    uint64_t off = (uint64_t)BN_HEADER_SIZE + info->keys_len +
                   (uint64_t)idx * CHILD_BYTES;
    if (info->type != BN_TYPE_BRANCH || idx >= info->count ||
        off + CHILD_BYTES > info->length)
        return BONSAI_CORRUPT;
    out->pgno = get_le40(img + off);
    out->npages = get_le24(img + off + 5);
    return out->npages ? 0 : BONSAI_CORRUPT;
}

int bn_img_set_child(uint8_t *img, const bn_info *info, uint32_t idx,
                     bn_ext e)
{
    uint64_t off = (uint64_t)BN_HEADER_SIZE + info->keys_len +
                   (uint64_t)idx * CHILD_BYTES;
    if (info->type != BN_TYPE_BRANCH || idx >= info->count ||
        off + CHILD_BYTES > info->length || e.npages == 0 ||
        e.pgno > BN_MAX_PGNO || e.npages > BN_MAX_NPAGES)
        return BONSAI_CORRUPT;
    put_le40(img + off, e.pgno);
    put_le24(img + off + 5, e.npages);
    put_le32(img + 8, image_crc(img, info->length));
    return 0;
}

/* ---- decoded nodes: memory ---------------------------------------------- */

/* Sets the capacity of every array the node uses to cap (>= n).  On
 * failure some arrays may have grown, which changes nothing visible. */
static int set_cap(bn_node *node, uint32_t cap)
{
    if (node->kind == BONSAI_KEY_U64) {
        uint64_t *k = realloc(node->k64, (size_t)cap * sizeof *k);
        if (!k)
            return BONSAI_NOMEM;
        node->k64 = k;
        if (node->gstart) { /* bits past the keys are kept clear */
            size_t had = UG_WORDS(node->cap), words = UG_WORDS(cap);
            uint64_t *g = realloc(node->gstart, words * sizeof *g);
            if (!g)
                return BONSAI_NOMEM;
            if (words > had)
                memset(g + had, 0, (words - had) * sizeof *g);
            node->gstart = g;
        }
    } else {
        bn_span *k = realloc(node->kb, (size_t)cap * sizeof *k);
        if (!k)
            return BONSAI_NOMEM;
        node->kb = k;
        if (!node->leaf) {
            bn_head *h = realloc(node->head, (size_t)cap * sizeof *h);
            if (!h)
                return BONSAI_NOMEM;
            node->head = h;
        }
    }
    if (node->val) {
        bn_span *v = realloc(node->val, (size_t)cap * sizeof *v);
        if (!v)
            return BONSAI_NOMEM;
        node->val = v;
        uint8_t *f = realloc(node->vflag, cap);
        if (!f)
            return BONSAI_NOMEM;
        node->vflag = f;
    }
    if (!node->leaf) {
        bn_child *c = realloc(node->child, (size_t)cap * sizeof *c);
        if (!c)
            return BONSAI_NOMEM;
        node->child = c;
    }
    node->cap = cap;
    return 0;
}

/* Room for need entries, doubling. */
static int grow_arrays(bn_node *node, uint64_t need)
{
    if (need <= node->cap)
        return 0;
    if (need > UINT32_MAX / 2)
        return BONSAI_NOMEM;
    uint32_t cap = node->cap ? node->cap : 8;
    while (cap < need)
        cap *= 2;
    return set_cap(node, cap);
}

/* A u64 node's groups as bits of its own, fresh ones where it had none
 * (it was read from an image without groups, or its keys were one step
 * apart), before a change places keys among them. */
static int own_groups(bn_node *node)
{
    if (node->kind != BONSAI_KEY_U64 || node->gstart)
        return 0;
    uint64_t *g = calloc(UG_WORDS(node->cap ? node->cap : 1), sizeof *g);
    if (!g)
        return BONSAI_NOMEM;
    ug_fresh(g, node->n);
    node->gstart = g;
    return 0;
}

/* Leaf: the value arrays, which stay unallocated while every value is
 * empty (a u64 leaf of empty values then costs only its keys).  All-zero
 * spans and flags mean empty values, so this changes nothing visible. */
static int ensure_vals(bn_node *node)
{
    if (node->val)
        return 0;
    assert(node->leaf && node->cap > 0);
    bn_span *v = calloc(node->cap, sizeof *v);
    uint8_t *f = calloc(node->cap, 1);
    if (!v || !f) {
        free(v);
        free(f);
        return BONSAI_NOMEM;
    }
    node->val = v;
    node->vflag = f;
    return 0;
}

/* Room for extra more arena bytes, doubling. */
static int arena_reserve(bn_node *node, uint64_t extra)
{
    uint64_t need = (uint64_t)node->arena_len + extra;
    if (need <= node->arena_cap)
        return 0;
    if (need > UINT32_MAX)
        return BONSAI_NOMEM;
    uint64_t cap = node->arena_cap ? node->arena_cap : 64;
    while (cap < need)
        cap *= 2;
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;
    uint8_t *a = realloc(node->arena, cap);
    if (!a)
        return BONSAI_NOMEM;
    node->arena = a;
    node->arena_cap = (uint32_t)cap;
    return 0;
}

/* Appends len bytes (room reserved) and returns their span. */
static bn_span arena_put(bn_node *node, const uint8_t *src, uint32_t len)
{
    bn_span s = {node->arena_len, len};
    if (len)
        memcpy(node->arena + s.off, src, len);
    node->arena_len += len;
    return s;
}

/* Bytes of a span (never a null pointer, even for an empty span). */
static inline const uint8_t *span_bytes(const bn_node *node, bn_span s)
{
    return s.len ? node->arena + s.off : no_bytes;
}

/* A caller may pass bytes that live in this node's own arena (a key or
 * value it got from bn_key_at / bn_value_at); growing the arena moves
 * them, so they are remembered as an offset across the realloc. */
static int64_t arena_off(const bn_node *node, const uint8_t *p)
{
    uintptr_t a = (uintptr_t)node->arena, q = (uintptr_t)p;
    if (node->arena && q >= a && q < a + node->arena_cap)
        return (int64_t)(q - a);
    return -1;
}

static const uint8_t *arena_rebase(const bn_node *node, const uint8_t *p,
                                   int64_t off)
{
    return off >= 0 ? node->arena + off : p;
}

static void span_relocate(bn_span *s, const uint8_t *from, uint8_t *to,
                          uint32_t *off)
{
    if (s->len == 0) {
        s->off = 0;
        return;
    }
    memcpy(to + *off, from + s->off, s->len);
    s->off = *off;
    *off += s->len;
}

/* Once more than half the arena is dead, copies the live bytes into a
 * fresh, smaller arena in entry order.  If malloc fails the dead bytes
 * simply stay: compaction only saves memory. */
static void arena_settle(bn_node *node)
{
    if (node->n == 0 || node->arena_len == node->arena_dead) {
        node->arena_len = node->arena_dead = 0; /* nothing live */
        return;
    }
    if (node->arena_dead <= node->arena_len / 2)
        return;
    uint32_t live = node->arena_len - node->arena_dead, off = 0;
    uint64_t cap = 64;
    while (cap < live)
        cap *= 2;
    uint8_t *a = malloc(cap);
    if (!a)
        return;
    for (uint32_t i = 0; i < node->n; i++) {
        if (node->kb)
            span_relocate(&node->kb[i], node->arena, a, &off);
        if (node->val)
            span_relocate(&node->val[i], node->arena, a, &off);
    }
    assert(off == live);
    free(node->arena);
    node->arena = a;
    node->arena_cap = (uint32_t)cap;
    node->arena_len = live;
    node->arena_dead = 0;
}

/* Gives back the arena's spare room (a decoded node is cached as it is;
 * its first insert doubles the arena again).  Kept as it is if realloc
 * fails. */
static void arena_fit(bn_node *node)
{
    if (node->arena_cap == node->arena_len)
        return;
    if (node->arena_len == 0) {
        free(node->arena);
        node->arena = NULL;
        node->arena_cap = 0;
        return;
    }
    uint8_t *a = realloc(node->arena, node->arena_len);
    if (a) {
        node->arena = a;
        node->arena_cap = node->arena_len;
    }
}

/* Moves count entries of every array from index from to index to. */
static void move_entries(bn_node *node, uint32_t to, uint32_t from,
                         uint32_t count)
{
    if (count == 0 || to == from)
        return;
    if (node->k64)
        memmove(node->k64 + to, node->k64 + from, count * sizeof *node->k64);
    if (node->kb)
        memmove(node->kb + to, node->kb + from, count * sizeof *node->kb);
    if (node->val) {
        memmove(node->val + to, node->val + from, count * sizeof *node->val);
        memmove(node->vflag + to, node->vflag + from, count);
    }
    if (node->child)
        memmove(node->child + to, node->child + from,
                count * sizeof *node->child);
}

/* ---- decoded nodes: the size estimate ----------------------------------- */

/*
 * est = 16 (header) + keys + values (leaf) or 8 n (branch), from running
 * sums of per-entry terms.  An entry's key term depends on the entries
 * just before it only, so a change updates a few terms in O(1) (plus the
 * key's length for byte keys, to find a shared prefix); bn_move and
 * bn_decode recompute all in O(n).
 *
 * u64 keys, in 1/64 bytes: a group packs every difference d at the width
 * of its spread (largest d - smallest d), so an entry costs the bits of
 * |d - previous d|, plus up to 3 bits because the spread of a group is the
 * largest of 63 (for random keys about 2^3 times the typical one), plus a
 * 64th of a group header and index record guessed from d: varint(64 d) +
 * 1 + varint(d).  An entry in a run of equal steps costs nothing: a node
 * evenly spaced throughout stores its first key and step only.  The first
 * key costs its varint.  This is within a few percent for random or
 * evenly spaced keys; keys mixing runs with jumps are underestimated, by
 * their group headers and because one jump widens its whole group.
 *
 * byte keys, in bytes: an entry costs varint(p) + varint(len - p) + len - p,
 * p its prefix shared with the previous key (summed in est_shared).  Every
 * 16th entry really stores its whole key, so est_shared / 16 is added,
 * with the 4-byte restart offsets.
 *
 * values: VALS_EMPTY costs 0, the general form est_vhdr + est_vbytes.  The
 * fixed form applies when every length is equal, which holds iff
 * n * sum(len^2) == sum(len)^2 (Cauchy-Schwarz); that is tested mod 2^64,
 * where a false match is possible but harmless (1 byte per entry).  So the
 * value part is exact.
 */

enum { SUB = 0, ADD = 1 };

static void tally(uint64_t *sum, uint64_t v, int add)
{
    *sum = add ? *sum + v : *sum - v;
}

/* Entry i's u64 key term, in 1/64 bytes. */
static inline uint64_t u64_term(const uint64_t *k, uint32_t i)
{
    if (i == 0)
        return 64 * vlen(k[0]);
    uint64_t d = k[i] - k[i - 1], dp = i > 1 ? k[i - 1] - k[i - 2] : d;
    unsigned b = bit_len(d > dp ? d - dp : dp - d);
    if (b == 0 && i > 1)
        return 0;
    uint64_t d64 = d > UINT64_MAX >> 6 ? UINT64_MAX : d << 6;
    return 8 * (b + (b < 3 ? b : 3)) + vlen(d64) + 1 + vlen(d);
}

/* Entry i's byte key term, in bytes; *shared its prefix. */
static uint64_t bytes_term(const bn_node *node, uint32_t i, uint32_t *shared)
{
    bn_span k = node->kb[i];
    uint32_t p = 0;
    if (i > 0) {
        bn_span q = node->kb[i - 1];
        p = common_prefix(span_bytes(node, q), q.len, span_bytes(node, k),
                          k.len);
    }
    *shared = p;
    return vlen(p) + vlen(k.len - p) + k.len - p;
}

/* Adds or takes away the key terms of entries [from, to). */
static void est_key_terms(bn_node *node, uint32_t from, uint32_t to, int add)
{
    if (node->kind == BONSAI_KEY_U64) {
        uint64_t sum = 0;
        for (uint32_t i = from; i < to && i < node->n; i++)
            sum += u64_term(node->k64, i);
        tally(&node->est_keys, sum, add);
        return;
    }
    for (uint32_t i = from; i < to && i < node->n; i++) {
        if (node->kind == BONSAI_KEY_U64) {
            tally(&node->est_keys, u64_term(node->k64, i), add);
        } else {
            uint32_t p;
            tally(&node->est_keys, bytes_term(node, i, &p), add);
            tally(&node->est_shared, p, add);
        }
    }
}

/* How many entries after a key have terms that depend on it. */
static uint32_t est_reach(const bn_node *node)
{
    return node->kind == BONSAI_KEY_U64 ? 2 : 1;
}

/* Adds or takes away one value's term. */
static void est_val(bn_node *node, uint32_t len, unsigned vflag, int add)
{
    tally(&node->est_vbytes, len, add);
    tally(&node->est_vsq, (uint64_t)len * len, add);
    tally(&node->est_vhdr, vlen((uint64_t)len << 1 | vflag), add);
    if (vflag)
        node->est_novf = add ? node->est_novf + 1 : node->est_novf - 1;
}

static uint64_t est_values(const bn_node *node)
{
    uint64_t n = node->n, sum = node->est_vbytes;
    if (node->est_novf == 0 && sum == 0)
        return 0;
    if (node->est_novf == 0 && n * node->est_vsq == sum * sum)
        return vlen(sum / n) + sum;
    return node->est_vhdr + sum;
}

static void est_refresh(bn_node *node)
{
    uint64_t n = node->n, e = BN_HEADER_SIZE;
    /* u64 key terms start from a decoded image's exact size, not their
     * own sum (est_from_image), so taking every entry away may overshoot
     * zero by the terms' error */
    int64_t keys = (int64_t)node->est_keys;
    if (node->kind == BONSAI_KEY_U64)
        e += keys > 0 ? ((uint64_t)keys + 63) / 64 : 0;
    else
        e += node->est_keys + node->est_shared / RESTART +
             4 * ((n + RESTART - 1) / RESTART);
    e += node->leaf ? est_values(node) : CHILD_BYTES * n;
    node->est = (size_t)e;
}

static void est_values_recompute(bn_node *node)
{
    node->est_vbytes = node->est_vsq = node->est_vhdr = 0;
    node->est_novf = 0;
    if (node->leaf && !node->val)
        node->est_vhdr = node->n * (uint64_t)vlen(0); /* all empty */
    for (uint32_t i = 0; node->leaf && node->val && i < node->n; i++)
        est_val(node, node->val[i].len, node->vflag[i], ADD);
}

/* Recomputes every running sum from the entries: O(n). */
static void est_recompute(bn_node *node)
{
    node->est_keys = node->est_shared = 0;
    if (node->kind == BONSAI_KEY_U64) {
        uint64_t sum = node->n ? u64_term(node->k64, 0) : 0;
        for (uint32_t i = 1; i < node->n; i++)
            sum += u64_term(node->k64, i);
        node->est_keys = sum;
    } else {
        est_key_terms(node, 0, node->n, ADD);
    }
    est_values_recompute(node);
    est_refresh(node);
}

/* The running sums of a node just decoded from an image whose key section
 * took keys_len bytes.  u64 key terms cost a bit scan each, as much as
 * the decoding itself, and every node the writer changes is decoded
 * first: their sum starts from the exact size instead, and changes move
 * it by their terms as ever (a difference of terms needs no sum). */
static void est_from_image(bn_node *node, uint32_t keys_len)
{
    if (node->kind != BONSAI_KEY_U64) {
        est_recompute(node);
        return;
    }
    node->est_keys = 64 * (uint64_t)keys_len;
    node->est_shared = 0;
    est_values_recompute(node);
    est_refresh(node);
}

/* Takes the terms of entries [from, n) away, before they leave. */
static void est_take_tail(bn_node *node, uint32_t from)
{
    est_key_terms(node, from, node->n, SUB);
    for (uint32_t i = from; node->leaf && i < node->n; i++) {
        if (node->val)
            est_val(node, node->val[i].len, node->vflag[i], SUB);
        else
            est_val(node, 0, 0, SUB);
    }
}

/* ---- u64 keys in counted groups (format 5) ---------------------------- */

/* Whether node's u64 keys are written in counted groups: every node but
 * one read from an older form and not changed since. */
static int counted_of(const bn_node *node)
{
    return node->kind == BONSAI_KEY_U64 && !node->walked &&
           !node->least_base && !node->positional;
}

/* Key 0's varint may grow by this much when a new lowest key comes. */
#define KEY0_GROW 10u

/* The growth bounds of a counted section in the groups form of shape sh
 * (a put after the last key of fresh groups is not covered: regroup.h's
 * ends, as for every form). */
static void groups_bounds(const ug_shape *sh, uint32_t *shift,
                          uint32_t *per_key)
{
    *shift = 0; /* no put moves a key into another group */
    *per_key = ug_put_bound(sh) + KEY0_GROW;
}

/* The growth bounds of n keys one step apart (fewer than 2: any): the
 * first put that breaks the step turns the step form into fresh groups
 * (the shift bound), and each put then grows those as any. */
static void even_bounds(uint32_t n, uint64_t step, uint32_t *shift,
                        uint32_t *per_key)
{
    ug_shape sh = {1, 0, 0};
    uint32_t none;
    size_t grouped = 0, stepped = 0;
    if (n >= 2) {
        grouped = ug_even_len(n, step, &sh);
        stepped = vlen(step);
    }
    groups_bounds(&sh, &none, per_key);
    *per_key += 1; /* the marker of a section of one key */
    *shift = grouped > stepped ? (uint32_t)(grouped - stepped) : 0;
}

/* Whether n >= 2 keys increase one step apart; *step = it. */
static int keys_even(const uint64_t *k, uint32_t n, uint64_t *step)
{
    uint64_t d = k[1] - k[0];
    if (k[1] <= k[0])
        return 0;
    for (uint32_t i = 2; i < n; i++)
        if (k[i] - k[i - 1] != d || k[i] <= k[i - 1])
            return 0;
    *step = d;
    return 1;
}

/* How the counted writer (format 5) lays out n keys: the step form where
 * they lie one step apart, else the groups form. */
typedef struct cg_lay {
    size_t len;     /* the key section's bytes */
    uint64_t step;  /* the step form's step; 0: fewer than 2 keys, or
                       the groups form */
    uint32_t shift; /* the growth bounds (regroup.h) */
    uint32_t per_key;
} cg_lay;

static void counted_measure(const uint64_t *k, const uint64_t *start,
                            uint32_t n, cg_lay *c)
{
    c->step = 0;
    c->len = n ? vlen(k[0]) : 0;
    if (n < 2 || keys_even(k, n, &c->step)) {
        c->len += n >= 2 ? 1 + vlen(c->step) : 0;
        even_bounds(n, c->step, &c->shift, &c->per_key);
    } else {
        ug_shape sh;
        c->len += 1 + ug_measure(k, start, n, &sh);
        groups_bounds(&sh, &c->shift, &c->per_key);
    }
}

/* Writes what counted_measure laid out at p: the byte after it, or NULL
 * where the keys do not strictly increase. */
static uint8_t *counted_write(const uint64_t *k, const uint64_t *start,
                              uint32_t n, const cg_lay *c, uint8_t *p)
{
    if (n > 0)
        p = varint_put(p, k[0]);
    if (n < 2)
        return p;
    if (c->step) {
        *p++ = 0;
        return varint_put(p, c->step);
    }
    *p++ = 2;
    return ug_put(k, start, n, p);
}

/* Both written at p if it fits before end: the byte after, or NULL. */
static uint8_t *put_counted(const uint64_t *k, const uint64_t *start,
                            uint32_t n, uint8_t *p, const uint8_t *end,
                            uint32_t *grow)
{
    cg_lay c;
    counted_measure(k, start, n, &c);
    if (c.len > (size_t)(end - p))
        return NULL;
    *grow = c.shift > c.per_key ? c.shift : c.per_key;
    return counted_write(k, start, n, &c, p);
}

/* ---- encoding ----------------------------------------------------------- */

/* base and width of the group of cnt keys at k, by the zero-base rule
 * or with the smallest base; whether its keys strictly increase (checked
 * here, where the encoder passes over them anyway: a pass of its own cost
 * a random fill a tenth of its time).  Random keys' smallest difference
 * is a 64th of their mean, so taking it off rarely saves a bit of width,
 * while storing it costs a varint of some 4 bytes a group: base 0 saves
 * about 1 % of a random key set's bytes. */
static inline int group_shape(const uint64_t *k, uint32_t cnt, int zero_base,
                              uint64_t *base, unsigned *width)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    int increasing = 1;
    for (uint32_t j = 1; j < cnt; j++) {
        uint64_t d = k[j] - k[j - 1];
        increasing &= k[j] > k[j - 1];
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    *base = cnt > 1 ? lo : 0;
    *width = cnt > 1 ? bit_len(hi - lo) : 0;
    if (zero_base && cnt > 1 && bit_len(hi) == *width)
        *base = 0;
    return increasing;
}

/* Whether node's groups take the zero-base rule: every node but one read
 * from a walked (format 2) or format 3 image and not changed since. */
static int zero_base_of(const bn_node *node)
{
    return !node->walked && !node->least_base;
}

/* Bytes of the header and deltas of the group of cnt keys from entry g;
 * the group added to rg. */
static uint64_t group_len(const bn_node *node, uint32_t g, uint32_t cnt,
                          int zero_base, rg_sum *rg)
{
    const uint64_t *k = node->k64 + g;
    uint64_t base;
    unsigned width;
    group_shape(k, cnt, zero_base, &base, &width);
    rg_add_group(rg, cnt, base, width, g > 0, g ? k[0] - k[-1] : 0);
    return 1 + vlen(base) + packed_bytes(cnt, width);
}

/* The index widths of a grouped section whose last group starts at
 * last_off; both 0 when it has one group (no index). */
static void index_widths(const bn_node *node, uint64_t last_off,
                         bn_layout *lay)
{
    uint32_t last = (node->n - 1) / GROUP;
    lay->ix_rw = last ? (uint8_t)bit_len(node->k64[last * GROUP] -
                                         node->k64[0])
                      : 0;
    lay->ix_ow = last ? (uint8_t)bit_len(last_off) : 0;
}

/* Bytes of the index and its two widths. */
static uint64_t index_len(const bn_node *node, const bn_layout *lay)
{
    uint32_t last = (node->n - 1) / GROUP;
    if (last == 0)
        return 0;
    return 2 + ((uint64_t)last * (lay->ix_rw + lay->ix_ow) + 7) / 8;
}

/* Group g's gdelta in format 2's walked form. */
static uint64_t walked_gdelta(const bn_node *node, uint32_t g)
{
    return g ? node->k64[g] - node->k64[g - GROUP] : node->k64[0];
}

/* Format 2's walked form: each group starts with gdelta. */
static uint64_t walked_keys_len(const bn_node *node, rg_sum *rg)
{
    uint64_t len = 0;
    for (uint32_t g = 0; g < node->n; g += GROUP)
        len += vlen(walked_gdelta(node, g)) +
               group_len(node, g, min_u32(GROUP, node->n - g), 0, rg);
    return len;
}

/* The indexed form's length (format 3 and 4); its step or index widths
 * into lay. */
static uint64_t u64_keys_len(const bn_node *node, bn_layout *lay,
                             rg_sum *rg)
{
    uint64_t len = 0, off = 0;
    if (node->n == 0)
        return 0;
    len = vlen(node->k64[0]);
    if (node->n == 1)
        return len;
    if (keys_even(node->k64, node->n, &lay->ix_step)) {
        rg_add_even(rg, node->n, lay->ix_step);
        return len + 1 + vlen(lay->ix_step);
    }
    int zero_base = zero_base_of(node);
    uint32_t g = 0;
    for (; g + GROUP < node->n; g += GROUP)
        off += group_len(node, g, GROUP, zero_base, rg);
    uint32_t last = (node->n - 1) / GROUP * GROUP;
    index_widths(node, off, lay);
    return len + 1 + index_len(node, lay) + off +
           group_len(node, last, node->n - last, zero_base, rg);
}

static inline const uint8_t *key_bytes(const bn_node *node, uint32_t i)
{
    return span_bytes(node, node->kb[i]);
}

/* The 8 bytes of key from skip on, big-endian, zero past its end: two
 * keys whose heads differ are in the order of their heads. */
static uint64_t key_head(const uint8_t *key, uint32_t len, uint32_t skip)
{
    if (len - skip >= 8)
        return __builtin_bswap64(get_le64(key + skip));
    uint8_t b[8] = {0};
    uint32_t n = len - skip < 8 ? len - skip : 8;
    memcpy(b, key + skip, n);
    return __builtin_bswap64(get_le64(b));
}

/* The two numbers of key's head after skip bytes (bn_head). */
static inline bn_head key_head2(const uint8_t *key, uint32_t len,
                                uint32_t skip)
{
    bn_head h = {key_head(key, len, skip), 0};
    if (len - skip > 8)
        h.lo = key_head(key, len, skip + 8);
    return h;
}

/* A byte-key branch's heads, recomputed whole after any change to its
 * keys: a branch changes only when a child splits or merges.  Every key
 * sorts between the first and the last, so shares their prefix. */
static void heads_rebuild(bn_node *node)
{
    uint32_t n = node->n;
    if (!node->head)
        return;
    node->head_skip = n < 2 ? 0
                            : common_prefix(key_bytes(node, 0),
                                            node->kb[0].len,
                                            key_bytes(node, n - 1),
                                            node->kb[n - 1].len);
    for (uint32_t i = 0; i < n; i++)
        node->head[i] = key_head2(key_bytes(node, i), node->kb[i].len,
                                  node->head_skip);
}

/* The prefix entry i shares in the image: 0 at a restart. */
static uint32_t image_shared(const bn_node *node, uint32_t i)
{
    if (i % RESTART == 0)
        return 0;
    return common_prefix(key_bytes(node, i - 1), node->kb[i - 1].len,
                         key_bytes(node, i), node->kb[i].len);
}

static uint64_t byte_ents_len(const bn_node *node)
{
    uint64_t len = 0;
    for (uint32_t i = 0; i < node->n; i++) {
        uint32_t s = image_shared(node, i), u = node->kb[i].len - s;
        len += vlen(s) + vlen(u) + u;
    }
    return len;
}

static void value_layout(const bn_node *node, bn_layout *lay)
{
    uint64_t total = 0, hdr = 0;
    uint32_t len0 = node->val && node->n ? node->val[0].len : 0;
    int same = 1, ovf = 0;

    for (uint32_t i = 0; node->val && i < node->n; i++) {
        uint32_t len = node->val[i].len;
        unsigned f = node->vflag[i];
        total += len;
        hdr += vlen((uint64_t)len << 1 | f);
        same &= len == len0;
        ovf |= f != 0;
    }
    if (!ovf && total == 0) {
        lay->vform = BN_F_VALS_EMPTY;
        lay->tail_len = 0;
    } else if (!ovf && same) {
        lay->vform = BN_F_VALS_FIXED;
        lay->tail_len = vlen(len0) + total;
    } else {
        lay->vform = ovf ? BN_F_OVERFLOW : 0;
        lay->tail_len = hdr + total;
    }
}

/* Fills *lay and returns the image size. */
static uint64_t get_layout(const bn_node *node, bn_layout *lay)
{
    memset(lay, 0, sizeof *lay);
    if (counted_of(node)) {
        cg_lay c;
        counted_measure(node->k64, node->gstart, node->n, &c);
        lay->keys_len = c.len;
        lay->ix_step = c.step;
        lay->grow = c.shift;
        lay->grow_key = c.per_key;
    } else if (node->kind == BONSAI_KEY_U64) {
        rg_sum rg = RG_EMPTY;
        lay->keys_len = node->walked ? walked_keys_len(node, &rg)
                                     : u64_keys_len(node, lay, &rg);
        lay->grow = rg_shift_bytes(&rg);
        lay->grow_key = rg_key_bytes(&rg);
    } else {
        lay->ents_len = byte_ents_len(node);
        lay->keys_len = lay->ents_len +
                        4 * (uint64_t)((node->n + RESTART - 1) / RESTART);
    }
    if (node->leaf)
        value_layout(node, lay);
    else
        lay->tail_len = (uint64_t)CHILD_BYTES * node->n;
    lay->size = BN_HEADER_SIZE + lay->keys_len + lay->tail_len;
    lay->count = node->n;
    return lay->size;
}

size_t bn_encoded_size(const bn_node *node)
{
    bn_layout lay;
    return (size_t)get_layout(node, &lay);
}

void bn_layout_of(const bn_node *node, bn_layout *lay)
{
    get_layout(node, lay);
}

/* Every change since the last sizing forgotten: lay measured the node as
 * it is. */
static void grow_reset(bn_node *node, uint32_t grow, uint32_t per_key)
{
    int u64 = node->kind == BONSAI_KEY_U64;
    node->grow = u64 ? grow : 0;
    node->grow_key = u64 ? per_key : 0;
    node->grow_since = node->grow_moves = 0;
    node->grow_dels = node->grow_ends = 0;
}

void bn_sized(bn_node *node, const bn_layout *lay)
{
    grow_reset(node, lay->grow, lay->grow_key);
}

size_t bn_size_exact(bn_node *node)
{
    bn_layout lay;
    size_t size = (size_t)get_layout(node, &lay);
    bn_sized(node, &lay);
    return size;
}

/* Byte keys only: put_u64_keys checks u64 keys as it writes them. */
static int byte_keys_encodable(const bn_node *node)
{
    for (uint32_t i = 0; i < node->n; i++) {
        bn_span k = node->kb[i];
        if (k.len == 0 || k.len > BONSAI_MAX_KEY)
            return 0;
        if (i > 0 && key_cmp(key_bytes(node, i - 1), node->kb[i - 1].len,
                             key_bytes(node, i), k.len) >= 0)
            return 0;
    }
    return 1;
}

/* Whether the image would decode: the count fits, byte keys increase
 * (put_u64_keys checks u64 keys), and value lengths and child extents fit
 * their fields.  vform is the layout's: values laid out as all empty are
 * all of length 0, and a random fill's leaves need no pass over them. */
static int encodable(const bn_node *node, unsigned vform)
{
    if (node->n > MAX_COUNT || (!node->leaf && node->n == 0))
        return 0;
    if (node->kind != BONSAI_KEY_U64 && !byte_keys_encodable(node))
        return 0;
    if (!node->leaf) {
        for (uint32_t i = 0; i < node->n; i++) {
            bn_ext e = node->child[i].ext;
            if (e.pgno > BN_MAX_PGNO || e.npages == 0 ||
                e.npages > BN_MAX_NPAGES)
                return 0;
        }
        return 1;
    }
    if (!node->val || vform == BN_F_VALS_EMPTY)
        return 1;
    for (uint32_t i = 0; i < node->n; i++)
        if (node->val[i].len > MAX_VLEN)
            return 0;
    return 1;
}

/* ORs v's low width bits into the zeroed bit stream s at bit pos. */
static void put_bits_at(uint8_t *s, uint64_t pos, uint64_t v, unsigned width)
{
    while (width > 0) {
        unsigned sh = (unsigned)(pos & 7), take = 8 - sh;
        take = take < width ? take : width;
        s[pos >> 3] |= (uint8_t)((v & ((1u << take) - 1)) << sh);
        v = take < 64 ? v >> take : 0;
        pos += take;
        width -= take;
    }
}

/* Writes one group's width, base and deltas; NULL if its keys, or its
 * first and the key before it, do not strictly increase. */
static uint8_t *put_group(const bn_node *node, uint32_t g, uint8_t *p)
{
    const uint64_t *k = node->k64 + g;
    uint32_t cnt = min_u32(GROUP, node->n - g);
    uint64_t base;
    unsigned width;
    if (!group_shape(k, cnt, zero_base_of(node), &base, &width) ||
        (g && k[0] <= k[-1]))
        return NULL;
    *p++ = (uint8_t)width;
    p = varint_put(p, base);
    bitw w = {p, 0, 0};
    for (uint32_t j = 1; j < cnt; j++)
        bitw_put(&w, k[j] - k[j - 1] - base, width);
    return bitw_end(&w);
}

/* Format 2's walked form, for a node decoded from it. */
static uint8_t *put_walked_keys(const bn_node *node, uint8_t *p)
{
    for (uint32_t g = 0; g < node->n && p; g += GROUP) {
        p = varint_put(p, walked_gdelta(node, g));
        p = put_group(node, g, p);
    }
    return p;
}

/* Index record g (>= 1) of a grouped section at index. */
static int put_record(uint8_t *index, const bn_layout *lay, uint32_t g,
                      uint64_t rel, uint64_t off)
{
    unsigned rw = lay->ix_rw, ow = lay->ix_ow, rec = rw + ow;
    if (bit_len(rel) > rw || bit_len(off) > ow)
        return -1;
    put_bits_at(index, (uint64_t)(g - 1) * rec, rel, rw);
    put_bits_at(index, (uint64_t)(g - 1) * rec + rw, off, ow);
    return 0;
}

/* Writes the key section in the indexed form (format 3 and 4), with the
 * step or index widths lay measured; NULL if the keys do not strictly
 * increase or no longer fit those widths. */
static uint8_t *put_u64_keys(const bn_node *node, uint8_t *p,
                             const bn_layout *lay)
{
    if (node->n == 0)
        return p;
    p = varint_put(p, node->k64[0]);
    if (node->n == 1)
        return p;
    if (lay->ix_step) {
        *p++ = 0;
        return varint_put(p, lay->ix_step);
    }
    *p++ = 1;
    uint8_t *index = p + 2;
    if (node->n > GROUP) {
        p[0] = lay->ix_rw;
        p[1] = lay->ix_ow;
        p = index + index_len(node, lay) - 2;
        memset(index, 0, (size_t)(p - index));
    }
    uint8_t *g0 = p;
    for (uint32_t g = 0; g < node->n && p; g += GROUP) {
        if (g > 0 && put_record(index, lay, g / GROUP,
                                node->k64[g] - node->k64[0],
                                (uint64_t)(p - g0)))
            return NULL;
        p = put_group(node, g, p);
    }
    return p;
}

static uint8_t *put_byte_keys(const bn_node *node, uint8_t *p,
                              uint64_t ents_len)
{
    uint8_t *s = p, *restarts = p + ents_len;
    for (uint32_t i = 0; i < node->n; i++) {
        uint32_t sh = image_shared(node, i), u = node->kb[i].len - sh;
        if (i % RESTART == 0)
            put_le32(restarts + (size_t)(i / RESTART) * 4, (uint32_t)(p - s));
        p = varint_put(p, sh);
        p = varint_put(p, u);
        memcpy(p, key_bytes(node, i) + sh, u);
        p += u;
    }
    assert(p == restarts);
    return restarts + (size_t)((node->n + RESTART - 1) / RESTART) * 4;
}

static uint8_t *put_values(const bn_node *node, uint8_t *p, unsigned vform)
{
    if (vform == BN_F_VALS_EMPTY)
        return p;
    if (vform == BN_F_VALS_FIXED)
        p = varint_put(p, node->val[0].len);
    else
        for (uint32_t i = 0; i < node->n; i++)
            p = varint_put(p, (uint64_t)node->val[i].len << 1 |
                                  node->vflag[i]);
    for (uint32_t i = 0; i < node->n; i++) {
        memcpy(p, span_bytes(node, node->val[i]), node->val[i].len);
        p += node->val[i].len;
    }
    return p;
}

static uint8_t *put_children(const bn_node *node, uint8_t *p)
{
    for (uint32_t i = 0; i < node->n; i++, p += CHILD_BYTES) {
        put_le40(p, node->child[i].ext.pgno);
        put_le24(p + 5, node->child[i].ext.npages);
    }
    return p;
}

/* The header of an image whose sections are written, and its checksum. */
static void put_header(uint8_t *out, unsigned type, unsigned flags,
                       uint32_t n, uint64_t size, uint64_t keys_len)
{
    out[0] = (uint8_t)type;
    out[1] = (uint8_t)flags;
    put_le16(out + 2, (uint16_t)n);
    put_le32(out + 4, (uint32_t)size);
    put_le32(out + 8, 0);
    put_le32(out + 12, (uint32_t)keys_len);
    put_le32(out + 8, bonsai_crc32c(0, out, size));
}

int bn_encode(const bn_node *node, uint8_t *out, size_t cap, size_t *len)
{
    bn_layout lay;
    get_layout(node, &lay);
    return bn_encode_laid(node, &lay, out, cap, len);
}

int bn_encode_laid(const bn_node *node, const bn_layout *laid, uint8_t *out,
                   size_t cap, size_t *len)
{
    bn_layout lay = *laid;
    if (lay.count != node->n) /* changed since: never write past cap */
        get_layout(node, &lay);
    if (!encodable(node, lay.vform))
        return BONSAI_INVALID;
    uint64_t size = lay.size;
    if (size > UINT32_MAX || size > cap || out == NULL)
        return BONSAI_INVALID;

    uint8_t *p = out + BN_HEADER_SIZE;
    if (node->kind == BONSAI_KEY_U64) {
        cg_lay c = {lay.keys_len, lay.ix_step, 0, 0};
        p = counted_of(node) ? counted_write(node->k64, node->gstart, node->n,
                                             &c, p)
            : node->walked   ? put_walked_keys(node, p)
                             : put_u64_keys(node, p, &lay);
        if (!p) /* out's bytes so far mean nothing */
            return BONSAI_INVALID;
    } else {
        p = put_byte_keys(node, p, lay.ents_len);
    }
    assert((uint64_t)(p - out) == BN_HEADER_SIZE + lay.keys_len);
    p = node->leaf ? put_values(node, p, lay.vform) : put_children(node, p);
    assert((uint64_t)(p - out) == size);
    (void)p;

    unsigned flags = node->kind != BONSAI_KEY_U64 ? 0
                     : node->walked           ? BN_F_KEY_U64
                     : node->least_base ? BN_F_KEY_U64 | BN_F_KEY_INDEX
                     : node->positional
                         ? BN_F_KEY_U64 | BN_F_KEY_INDEX | BN_F_ZERO_BASE
                         : BN_F_KEY_U64 | BN_F_KEY_INDEX | BN_F_ZERO_BASE |
                               BN_F_COUNTED;
    put_header(out, node->leaf ? BN_TYPE_LEAF : BN_TYPE_BRANCH,
               flags | (node->leaf ? lay.vform : 0), node->n, size,
               lay.keys_len);
    *len = size;
    return 0;
}

/* ---- decoding ----------------------------------------------------------- */

/* The packed deltas 1..cnt-1 of a group into d[1..]. */
static void unpack_deltas(const bn_grp *gr, const uint8_t *end, uint64_t *d)
{
    if (!grp_in_words(gr, end)) {
        for (uint32_t j = 1; j < gr->cnt; j++)
            d[j] = grp_delta(gr, end, j);
        return;
    }
    uint64_t mask = (UINT64_C(1) << gr->width) - 1, pos = 0;
    for (uint32_t j = 1; j < gr->cnt; j++, pos += gr->width)
        d[j] = grp_word_delta(gr, pos, mask);
}

/* Unpacks one group into k[gr->start ..] checking that the keys strictly
 * increase and that base, width and padding are the encoder's (by the
 * zero-base rule, or with the smallest base). */
static int decode_group(const bn_grp *gr, const uint8_t *end, int zero_base,
                        uint64_t *k)
{
    uint64_t d[GROUP];
    unpack_deltas(gr, end, d);
    uint64_t lo = UINT64_MAX, hi = 0, key = gr->first;
    int wrapped = 0;
    k[gr->start] = gr->first;
    for (uint32_t j = 1; j < gr->cnt; j++) {
        /* if base + d wraps for any d, it does for the largest, which
         * is refused below: the keys written meanwhile are thrown away */
        wrapped |= __builtin_add_overflow(key, gr->base + d[j], &key);
        k[gr->start + j] = key;
        lo = d[j] < lo ? d[j] : lo;
        hi = d[j] > hi ? d[j] : hi;
    }
    if (gr->cnt == 1)
        return gr->base == 0 && gr->width == 0 ? 0 : -1;
    if (bit_len(hi) != gr->width || gr->base > UINT64_MAX - hi || wrapped)
        return -1;
    if (gr->base == 0) {
        /* the keys increase when every delta is >= 1; the rule stores
         * base 0 only where the smallest delta would not narrow them */
        if (!zero_base || lo == 0 || bit_len(hi - lo) != gr->width)
            return -1;
    } else if (lo != 0 || (zero_base && bit_len(hi + gr->base) == gr->width)) {
        /* the least delta is 0 (the base the smallest difference), and
         * under the rule only where base 0 would widen them */
        return -1;
    }
    uint64_t bits = (uint64_t)(gr->cnt - 1) * gr->width;
    size_t nbytes = packed_bytes(gr->cnt, gr->width);
    if (bits % 8 && gr->packed[nbytes - 1] >> (bits % 8))
        return -1; /* padding bits must be zero */
    return 0;
}

/* The walked form (format 2). */
static int walk_decode(const uint8_t *s, const uint8_t *end, uint32_t n,
                       uint64_t *k, rg_sum *rg)
{
    const uint8_t *p = s;
    bn_grp gr = {0};
    while (gr.start + gr.cnt < n) {
        uint64_t prev_first = gr.first;
        if (grp_next(&p, end, n, &gr) || grp_base(&gr, end))
            return BONSAI_CORRUPT;
        /* gdelta > 0 without wrapping, and past the previous group */
        if (gr.start > 0 &&
            (gr.first <= prev_first || gr.first <= k[gr.start - 1]))
            return BONSAI_CORRUPT;
        if (decode_group(&gr, end, 0, k))
            return BONSAI_CORRUPT;
        rg_add_group(rg, gr.cnt, gr.base, gr.width, gr.start > 0,
                     gr.start ? gr.first - k[gr.start - 1] : 0);
    }
    return p == end ? 0 : BONSAI_CORRUPT;
}

/* Whether the index's widths are the least that hold its last record and
 * its padding bits are zero (group G-1's rel and off are the largest). */
static int ix_index_minimal(const bn_ixsec *x)
{
    uint32_t last = x->ngroups - 1;
    if (bit_len(ix_rel(x, last)) != x->rw || bit_len(ix_off(x, last)) != x->ow)
        return 0;
    uint64_t bits = (uint64_t)last * (x->rw + x->ow);
    return bits % 8 == 0 || (x->groups[-1] >> (bits % 8)) == 0;
}

/* The grouped form's groups, each where the one before ended, checked as
 * the encoder writes them; keys evenly spaced belong in the other form. */
static int ix_decode_groups(const bn_ixsec *x, int zero_base, uint64_t *k,
                            rg_sum *rg)
{
    const uint8_t *at = x->groups, *after;
    int even = 1;
    bn_grp gr;
    for (uint32_t g = 0; g < x->ngroups; g++) {
        if (ix_group(x, g, &gr, &after) || gr.base_at - 1 != at ||
            grp_base(&gr, x->end))
            return BONSAI_CORRUPT;
        if (g > 0 && gr.first <= k[gr.start - 1])
            return BONSAI_CORRUPT;
        if (decode_group(&gr, x->end, zero_base, k))
            return BONSAI_CORRUPT;
        rg_add_group(rg, gr.cnt, gr.base, gr.width, g > 0,
                     g ? gr.first - k[gr.start - 1] : 0);
        even &= gr.width == 0 && (gr.cnt == 1 || gr.base == k[1] - k[0]) &&
                (g == 0 || gr.first - k[gr.start - 1] == k[1] - k[0]);
        at = after;
    }
    if (at != x->end || even || (x->ngroups > 1 && !ix_index_minimal(x)))
        return BONSAI_CORRUPT;
    return 0;
}

/* The indexed form (format 3). */
static int ix_decode(const uint8_t *s, const uint8_t *end, uint32_t n,
                     int zero_base, uint64_t *k, rg_sum *rg)
{
    bn_ixsec x;
    if (n == 0)
        return s == end ? 0 : BONSAI_CORRUPT;
    if (ix_open(&x, s, end, n))
        return BONSAI_CORRUPT;
    if (x.ngroups)
        return ix_decode_groups(&x, zero_base, k, rg);
    if (n > 1)
        rg_add_even(rg, n, x.step);
    for (uint32_t i = 0; i < n; i++)
        k[i] = x.first + i * x.step;
    return x.after == end ? 0 : BONSAI_CORRUPT;
}

/* form: the image's BN_F_KEY_INDEX and BN_F_ZERO_BASE flags */
static int decode_u64_keys(const uint8_t *s, const uint8_t *end, uint32_t n,
                           unsigned form, uint64_t *k, rg_sum *rg)
{
    if (!(form & BN_F_KEY_INDEX))
        return walk_decode(s, end, n, k, rg);
    return ix_decode(s, end, n, !!(form & BN_F_ZERO_BASE), k, rg);
}

/* A node read from an image without groups takes fresh ones. */
static void drop_groups(bn_node *node)
{
    free(node->gstart);
    node->gstart = NULL;
}

/* A counted section (format 5): its keys, its groups (none for the step
 * form) and growth bounds. */
static int cg_decode(const uint8_t *s, const uint8_t *end, uint32_t n,
                     bn_node *node, uint32_t *shift, uint32_t *per_key)
{
    uint64_t first, step;
    const uint8_t *g;
    int shape = n < 2 ? 1 : cg_open(s, end, &first, &g);
    if (shape < 0)
        return BONSAI_CORRUPT;
    if (shape == 1) {
        rg_sum rg = RG_EMPTY;
        drop_groups(node);
        if (ix_decode(s, end, n, 1, node->k64, &rg))
            return BONSAI_CORRUPT;
        even_bounds(n, n >= 2 ? node->k64[1] - node->k64[0] : 0, shift,
                    per_key);
        return 0;
    }
    if (!node->gstart) {
        node->gstart = calloc(UG_WORDS(node->cap), sizeof *node->gstart);
        if (!node->gstart)
            return BONSAI_NOMEM;
    }
    /* keys one step apart belong in the step form */
    if (ug_decode(g, end, first, n, node->k64, node->gstart) ||
        keys_even(node->k64, n, &step))
        return BONSAI_CORRUPT;
    ug_shape sh;
    if (ug_shape_of(g, end, n, &sh))
        return BONSAI_CORRUPT;
    groups_bounds(&sh, shift, per_key);
    return 0;
}

/* Whether entry i (shared bytes of prev, then u) sorts after prev.  Off a
 * restart, shared is the longest common prefix, so comparing one byte
 * decides it and also rejects a shared shorter than it could be. */
static int entry_follows(uint32_t i, const uint8_t *prev, uint32_t plen,
                         uint64_t shared, const uint8_t *u, uint64_t ulen)
{
    if (i % RESTART == 0)
        return key_cmp(u, (uint32_t)ulen, prev, plen) > 0;
    return shared == plen || u[0] > prev[shared];
}

#define KEY_COPY 32u /* bytes a decoded key's copy moves at once */

/* Copies len bytes from src to dst, KEY_COPY bytes in one move when len
 * is at most that and both sides have KEY_COPY bytes to spare: a library
 * call per key part cost a third of a string scan's decode.  A move, not
 * a copy: a key's shared prefix is read from the key just before it. */
static inline void copy_key_part(uint8_t *dst, const uint8_t *src,
                                 uint64_t len, int spare)
{
    if (spare && len <= KEY_COPY) {
        uint8_t t[KEY_COPY]; /* (in registers: loads, then stores) */
        memcpy(t, src, KEY_COPY);
        memcpy(dst, t, KEY_COPY);
    } else if (len) {
        memcpy(dst, src, len);
    }
}

static int decode_byte_keys(const uint8_t *s, uint32_t keys_len, uint32_t n,
                            bn_node *node)
{
    bsec b;
    if (bsec_open(&b, s, keys_len, n))
        return BONSAI_CORRUPT;
    const uint8_t *p = s;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t plen = i ? node->kb[i - 1].len : 0;
        if (i % RESTART == 0 &&
            get_le32(b.ents + (size_t)(i / RESTART) * 4) != (uint64_t)(p - s))
            return BONSAI_CORRUPT;
        entry_lens e = rd_entry_lens(p, b.ents);
        if (!e.p)
            return BONSAI_CORRUPT;
        uint64_t shared = e.shared, unshared = e.unshared;
        p = e.p;
        if ((i % RESTART == 0 && shared) || shared > plen || unshared == 0 ||
            unshared > BONSAI_MAX_KEY - shared ||
            unshared > (uint64_t)(b.ents - p))
            return BONSAI_CORRUPT;
        /* KEY_COPY to spare past the key: copies may write that far */
        if (node->arena_len + shared + unshared + KEY_COPY >
                node->arena_cap &&
            arena_reserve(node, shared + unshared + KEY_COPY))
            return BONSAI_NOMEM;
        const uint8_t *prev = i ? key_bytes(node, i - 1) : NULL;
        if (i > 0 && !entry_follows(i, prev, plen, shared, p, unshared))
            return BONSAI_CORRUPT;
        bn_span k = {node->arena_len, (uint32_t)(shared + unshared)};
        uint8_t *dst = node->arena + k.off;
        /* prev is in the arena, below dst: KEY_COPY past it is reserved */
        copy_key_part(dst, prev, shared, prev != NULL);
        copy_key_part(dst + shared, p, unshared,
                      KEY_COPY <= (uint64_t)(s + keys_len - p));
        node->arena_len += k.len;
        node->kb[i] = k;
        p += unshared;
    }
    return p == b.ents ? 0 : BONSAI_CORRUPT;
}

static int decode_fixed(const uint8_t *p, const uint8_t *end, uint32_t n,
                        bn_node *node)
{
    uint64_t l;
    if (rd_varint(&p, end, &l) || l == 0 || l > MAX_VLEN ||
        (uint64_t)n * l != (uint64_t)(end - p))
        return BONSAI_CORRUPT;
    if (arena_reserve(node, (uint64_t)n * l))
        return BONSAI_NOMEM;
    bn_span all = arena_put(node, p, (uint32_t)(n * l));
    for (uint32_t i = 0; i < n; i++) {
        node->val[i].off = all.off + i * (uint32_t)l;
        node->val[i].len = (uint32_t)l;
        node->vflag[i] = 0;
    }
    return 0;
}

static int decode_general(const uint8_t *p, const uint8_t *end, uint32_t n,
                          unsigned flags, bn_node *node)
{
    uint64_t total = 0, v;
    int same = 1, ovf = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (rd_varint(&p, end, &v) || (v >> 1) > MAX_VLEN)
            return BONSAI_CORRUPT;
        node->val[i].off = (uint32_t)total; /* rebased below */
        node->val[i].len = (uint32_t)(v >> 1);
        node->vflag[i] = (uint8_t)(v & 1);
        total += v >> 1;
        same &= node->val[i].len == node->val[0].len;
        ovf |= (int)(v & 1);
    }
    /* the bytes run to the end; the form and flag are the encoder's */
    if (total != (uint64_t)(end - p) || !!(flags & BN_F_OVERFLOW) != ovf ||
        (!ovf && same))
        return BONSAI_CORRUPT;
    if (arena_reserve(node, total))
        return BONSAI_NOMEM;
    bn_span all = arena_put(node, p, (uint32_t)total);
    for (uint32_t i = 0; i < n; i++)
        node->val[i].off = node->val[i].len ? node->val[i].off + all.off : 0;
    return 0;
}

static int decode_values(const uint8_t *p, const uint8_t *end, uint32_t n,
                         unsigned flags, bn_node *node)
{
    if (flags & BN_F_VALS_EMPTY) {
        /* a reused node may hold value arrays of its last image: none
         * means every value is empty */
        free(node->val);
        free(node->vflag);
        node->val = NULL;
        node->vflag = NULL;
        return p == end ? 0 : BONSAI_CORRUPT;
    }
    if (n == 0) /* no entries: always written VALS_EMPTY */
        return BONSAI_CORRUPT;
    if (ensure_vals(node))
        return BONSAI_NOMEM;
    if (flags & BN_F_VALS_FIXED)
        return decode_fixed(p, end, n, node);
    return decode_general(p, end, n, flags, node);
}

static int decode_children(const uint8_t *p, uint32_t n, bn_node *node)
{
    for (uint32_t i = 0; i < n; i++, p += CHILD_BYTES) {
        node->child[i].ext.pgno = get_le40(p);
        node->child[i].ext.npages = get_le24(p + 5);
        node->child[i].mem = NULL;
        if (node->child[i].ext.npages == 0)
            return BONSAI_CORRUPT;
    }
    return 0;
}

static int decode_sections(const uint8_t *img, const bn_info *info,
                           bn_node *node)
{
    const uint8_t *ks = img + BN_HEADER_SIZE, *ke = ks + info->keys_len;
    uint32_t n = info->count;
    int rc;

    if (n > node->cap && (rc = set_cap(node, n)) != 0)
        return rc;
    int u64 = node->kind == BONSAI_KEY_U64;
    node->walked = u64 && !(info->flags & BN_F_KEY_INDEX);
    node->least_base = u64 && !node->walked &&
                       !(info->flags & BN_F_ZERO_BASE);
    node->positional = u64 && (info->flags & BN_F_ZERO_BASE) &&
                       !(info->flags & BN_F_COUNTED);
    rg_sum rg = RG_EMPTY;
    uint32_t shift = 0, per_key = 0;
    if (u64 && (info->flags & BN_F_COUNTED)) {
        rc = cg_decode(ks, ke, n, node, &shift, &per_key);
    } else if (u64) {
        drop_groups(node);
        rc = decode_u64_keys(ks, ke, n, info->flags, node->k64, &rg);
        shift = rg_shift_bytes(&rg);
        per_key = rg_key_bytes(&rg);
    } else {
        rc = decode_byte_keys(ks, info->keys_len, n, node);
    }
    if (rc)
        return rc;
    grow_reset(node, shift, per_key);
    if (node->leaf)
        return decode_values(ke, img + info->length, n, info->flags, node);
    return decode_children(ke, n, node); /* its size bn_img_check fixed */
}

/* Decodes into node, which is cleared first, or with reuse only emptied:
 * its arrays and arena keep their room for the next image (a cursor's
 * leaf copy, decoded once a leaf through a scan). */
static int decode(const uint8_t *img, size_t avail, unsigned kind,
                  bn_node *node, uint32_t *keys_len, int reuse)
{
    bn_info info;
    if (reuse && node->kind == kind) {
        node->n = 0;
        node->arena_len = node->arena_dead = 0;
    } else {
        bn_clear(node);
    }
    int rc = bn_img_check(img, avail, kind, 1, &info);
    if (rc)
        return rc;
    if (node->leaf != (info.type == BN_TYPE_LEAF))
        bn_clear(node); /* its arrays are of the other type's */
    node->kind = (uint8_t)kind;
    node->leaf = info.type == BN_TYPE_LEAF;
    rc = decode_sections(img, &info, node);
    if (rc) {
        bn_clear(node);
        return rc;
    }
    node->n = info.count;
    *keys_len = info.keys_len;
    if (!reuse)
        arena_fit(node);
    heads_rebuild(node);
    return 0;
}

int bn_decode(const uint8_t *img, size_t avail, unsigned kind,
              bn_node *node)
{
    uint32_t keys_len;
    int rc = decode(img, avail, kind, node, &keys_len, 0);
    if (rc == 0)
        est_from_image(node, keys_len);
    return rc;
}

int bn_decode_frozen(const uint8_t *img, size_t avail, unsigned kind,
                     bn_node *node)
{
    uint32_t keys_len;
    return decode(img, avail, kind, node, &keys_len, 1);
}

/* ---- decoded nodes: reading --------------------------------------------- */

void bn_init(bn_node *node, unsigned kind, int leaf)
{
    assert(kind == BONSAI_KEY_U64 || kind == BONSAI_KEY_BYTES);
    memset(node, 0, sizeof *node);
    node->kind = (uint8_t)kind;
    node->leaf = leaf != 0;
    est_refresh(node);
}

void bn_clear(bn_node *node)
{
    free(node->k64);
    free(node->kb);
    free(node->head);
    free(node->val);
    free(node->vflag);
    free(node->child);
    free(node->arena);
    free(node->gstart);
    /* kind and leaf stay */
    node->n = node->cap = 0;
    node->walked = 0;
    node->least_base = 0;
    node->positional = 0;
    node->gstart = NULL;
    node->k64 = NULL;
    node->kb = NULL;
    node->head = NULL;
    node->val = NULL;
    node->vflag = NULL;
    node->child = NULL;
    node->arena = NULL;
    node->arena_len = node->arena_cap = node->arena_dead = 0;
    est_recompute(node);
}

/* Index of the first key >= key among n >= 1 keys (branch-free halving). */
static uint32_t halve_u64(const uint64_t *k, uint32_t n, uint64_t key)
{
    const uint64_t *base = k;
    while (n > 1) {
        uint32_t half = n / 2;
        base = base[half] < key ? base + half : base;
        n -= half;
    }
    return (uint32_t)(base - k) + (*base < key);
}

#define GUESS_SPAN 16u /* keys around an interpolated guess: two lines */

/* The first of span keys centred on guess among n > span keys, the
 * span ending before the last key. */
static inline uint32_t span_around(uint32_t guess, uint32_t n, uint32_t span)
{
    uint32_t from = guess > span / 2 ? guess - span / 2 : 0;
    return from < n - 1 - span ? from : n - 1 - span;
}

/* As halve_u64, but first where the key would lie were the keys evenly
 * spread: u64 keys in a node mostly are (sequential or hashed keys), so
 * the answer is usually within GUESS_SPAN keys of the guess, one or two
 * cache lines, where halving touches a line a step.  Keys spread any
 * other way cost two extra reads before halving. */
static uint32_t lower_bound_u64(const uint64_t *k, uint32_t n, uint64_t key)
{
    if (n <= 2 * GUESS_SPAN || key <= k[0] || key > k[n - 1])
        return halve_u64(k, n, key);
    double frac = (double)(key - k[0]) / (double)(k[n - 1] - k[0]);
    uint32_t guess = (uint32_t)(frac * (n - 1));
    if (k[guess] >= key) { /* evenly spaced keys: the guess itself */
        if (k[guess - 1] < key)
            return guess;
    } else if (k[guess + 1] >= key) {
        return guess + 1;
    }
    uint32_t lo = span_around(guess, n, GUESS_SPAN);
    uint32_t hi = lo + GUESS_SPAN; /* <= n - 1, and k[n - 1] >= key */
    if (k[lo] < key && k[hi] >= key) /* the answer is in (lo, hi] */
        return lo + 1 + halve_u64(k + lo + 1, hi - lo, key);
    return halve_u64(k, n, key);
}

/* ---- keys added to an image ---------------------------------------------- */

size_t bn_img_add_scratch(uint32_t count, uint32_t m)
{
    /* the keys not in the image, then the groups form's scratch (ug_add)
     * or the step form's keys merged, their groups and the new keys' */
    size_t n = (size_t)count + m;
    size_t even = n * sizeof(uint64_t) + 2 * UG_WORDS(n) * sizeof(uint64_t);
    size_t groups = ug_add_scratch(count, m);
    return m * sizeof(uint64_t) + (even > groups ? even : groups);
}

/* The header of an empty-valued u64 leaf image whose key section of
 * keys_len bytes is written at out + BN_HEADER_SIZE; its size. */
static size_t finish_added(uint8_t *out, uint32_t n, size_t keys_len)
{
    size_t size = BN_HEADER_SIZE + keys_len;
    put_header(out, BN_TYPE_LEAF,
               BN_F_KEY_U64 | BN_F_KEY_INDEX | BN_F_ZERO_BASE | BN_F_COUNTED |
                   BN_F_VALS_EMPTY,
               n, size, keys_len);
    return size;
}

/* Keys added to a section of fewer than 2 keys or in the step form: its
 * keys decoded, the new ones merged in and placed as bn_insert_sorted
 * places them, written again. */
static int add_to_even(const uint8_t *s, const uint8_t *end, uint32_t n,
                       const uint64_t *add, uint32_t m, uint64_t *scratch,
                       uint8_t *out, size_t cap, size_t *len, uint32_t *grow)
{
    uint32_t total = n + m;
    uint64_t *k = scratch, *start = k + total, *fresh = start + UG_WORDS(total);
    rg_sum rg = RG_EMPTY;
    if (ix_decode(s, end, n, 1, k, &rg))
        return BONSAI_CORRUPT;
    /* keys put after the last join fresh groups as they are */
    int keeps = n == 0 || add[0] > k[n - 1];
    memset(start, 0, 2 * UG_WORDS(total) * sizeof *start);
    if (!keeps)
        ug_fresh(start, n); /* the groups a changed node takes */
    for (uint32_t i = n, j = m, w = total; w-- > 0;) {
        int take_new = j > 0 && (i == 0 || add[j - 1] > k[i - 1]);
        if (!take_new && j > 0 && add[j - 1] == k[i - 1])
            return BONSAI_INVALID; /* a key it holds */
        k[w] = take_new ? add[--j] : k[--i];
        if (!keeps) {
            ug_mark(fresh, w, take_new);
            ug_mark(start, w, take_new ? 0 : ug_is_start(start, i));
        }
    }
    if (!keeps)
        ug_place_batch(k, start, total, fresh);
    uint8_t *p = put_counted(k, keeps ? NULL : start, total,
                             out + BN_HEADER_SIZE, out + cap, grow);
    if (!p)
        return BONSAI_INVALID;
    *len = finish_added(out, total, (size_t)(p - out) - BN_HEADER_SIZE);
    return 0;
}

/* Keys added to a groups form where it lies (ug_add), those it holds
 * left out; the step form when they fill every gap. */
static int add_to_groups(const uint8_t *g, const uint8_t *end,
                         uint64_t first, uint32_t n, const uint64_t *add,
                         uint32_t m, void *scratch, uint8_t *out, size_t cap,
                         size_t *len, uint32_t *grow)
{
    uint64_t first_out = m && add[0] < first ? add[0] : first;
    size_t head = BN_HEADER_SIZE + vlen(first_out) + 1, form;
    if (cap < head)
        return BONSAI_INVALID;
    uint8_t *at = varint_put(out + BN_HEADER_SIZE, first_out);
    *at++ = 2;
    uint64_t got_first;
    uint32_t added;
    int rc = ug_add(g, end, first, n, add, m, scratch, at, cap - head,
                    &got_first, &form, &added);
    if (rc)
        return rc > 0 ? BONSAI_INVALID : BONSAI_CORRUPT;
    if ((uint64_t)n + added > MAX_COUNT)
        return BONSAI_INVALID;
    uint32_t count = n + added, shift, per_key;
    uint64_t step;
    if (ug_even(at, at + form, count, &step)) {
        at = varint_put(out + BN_HEADER_SIZE, first_out);
        *at++ = 0;
        at = varint_put(at, step);
        even_bounds(count, step, &shift, &per_key);
    } else {
        ug_shape sh;
        if (ug_shape_of(at, at + form, count, &sh))
            return BONSAI_CORRUPT;
        at += form;
        groups_bounds(&sh, &shift, &per_key);
    }
    *len = finish_added(out, count, (size_t)(at - out) - BN_HEADER_SIZE);
    *grow = shift > per_key ? shift : per_key;
    return 0;
}

/* add[0..m) less the keys the section holds, into kept; how many. */
static int keys_not_held(const uint8_t *s, const uint8_t *end, uint32_t n,
                         const uint64_t *add, uint32_t m, uint64_t *kept,
                         uint32_t *left)
{
    uint32_t w = 0;
    for (uint32_t j = 0; j < m; j++) {
        uint32_t pos;
        int eq;
        if (u64_search(s, end, n, BN_F_COUNTED, add[j], &pos, &eq))
            return BONSAI_CORRUPT;
        if (!eq)
            kept[w++] = add[j];
    }
    *left = w;
    return 0;
}

int bn_img_add_u64(const uint8_t *img, const bn_info *info,
                   const uint64_t *add, uint32_t m, void *scratch,
                   uint8_t *out, size_t cap, size_t *len, uint32_t *grow)
{
    const unsigned form = BN_F_KEY_U64 | BN_F_KEY_INDEX | BN_F_ZERO_BASE |
                          BN_F_COUNTED | BN_F_VALS_EMPTY;
    if (info->type != BN_TYPE_LEAF || info->flags != form || m == 0)
        return BONSAI_INVALID;
    for (uint32_t j = 1; j < m; j++)
        if (add[j] <= add[j - 1])
            return BONSAI_INVALID;
    const uint8_t *s = img + BN_HEADER_SIZE, *end = s + info->keys_len;
    uint32_t n = info->count;
    uint64_t first;
    const uint8_t *g;
    int shape = n < 2 ? 1 : cg_open(s, end, &first, &g);
    if (shape < 0)
        return BONSAI_CORRUPT;
    uint64_t *kept = scratch, *rest = kept + m;
    if (shape == 0)
        return add_to_groups(g, end, first, n, add, m, rest, out, cap, len,
                             grow);
    /* a key it holds already stays once */
    int rc = keys_not_held(s, end, n, add, m, kept, &m);
    if (rc)
        return rc;
    if ((uint64_t)n + m > MAX_COUNT)
        return BONSAI_INVALID;
    return add_to_even(s, end, n, kept, m, rest, out, cap, len, grow);
}

/* lower_bound_bytes in a branch: the prefix its keys share compared
 * once, then integers; whole keys only where two heads are equal. */
static uint32_t lower_bound_heads(const bn_node *node, uint32_t lo,
                                  const uint8_t *key, uint32_t klen)
{
    uint32_t hi = node->n, skip = node->head_skip;
    if (lo >= hi)
        return lo;
    int c = key_cmp(key, klen < skip ? klen : skip, key_bytes(node, 0), skip);
    if (c != 0)
        return c < 0 ? lo : hi;
    bn_head kh = key_head2(key, klen, skip);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        bn_head h = node->head[mid];
        int below = h.hi != kh.hi ? h.hi < kh.hi
                    : h.lo != kh.lo
                        ? h.lo < kh.lo
                        : key_below(key_bytes(node, mid) + skip,
                                    node->kb[mid].len - skip, key + skip,
                                    klen - skip);
        if (below)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint32_t lower_bound_walk(const bn_node *node, uint32_t lo,
                                 const uint8_t *key, uint32_t klen)
{
    uint32_t hi = node->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (key_below(key_bytes(node, mid), node->kb[mid].len, key, klen))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint32_t lower_bound_bytes(const bn_node *node, uint32_t lo,
                                  const uint8_t *key, uint32_t klen)
{
    if (!node->head)
        return lower_bound_walk(node, lo, key, klen);
    uint32_t i = lower_bound_heads(node, lo, key, klen);
#ifdef BONSAI_CHECK_HINTS
    assert(i == lower_bound_walk(node, lo, key, klen));
#endif
    return i;
}

uint32_t bn_search(const bn_node *node, const bn_key *key, int *found)
{
    uint32_t n = node->n, i;
    int eq;
    if (n == 0) {
        i = 0;
        eq = 0;
    } else if (node->kind == BONSAI_KEY_U64 && key->u > node->k64[n - 1]) {
        i = n; /* appends, the sequential load's every put */
        eq = 0;
    } else if (node->kind == BONSAI_KEY_U64) {
        i = lower_bound_u64(node->k64, n, key->u);
        eq = i < n && node->k64[i] == key->u;
    } else {
        i = lower_bound_bytes(node, 0, key->b, key->len);
        eq = i < n && key_cmp(key_bytes(node, i), node->kb[i].len, key->b,
                              key->len) == 0;
    }
    if (!node->leaf && !eq && i > 0)
        i--; /* the child whose range holds key */
    if (found)
        *found = eq;
    return i;
}

#define BOUNDED_SPAN 12u /* keys read around a bounded guess */

/* A branch's separators between its parent's bounds lie close to where
 * even spacing would put them (within 4 places for 19 in 20 lookups at
 * 20 M random keys): BOUNDED_SPAN keys around that place, counted without
 * a branch, answer, and the child entries there are asked for before
 * the keys arrive.  The parent's bounds stand in for the node's first
 * and last keys, which a search would read first: a miss to the cache
 * less on every level (a twentieth of a random get at 20 M keys). */
uint32_t bn_branch_index_u64(const bn_node *node, uint64_t key, uint64_t lo,
                             uint64_t hi)
{
    uint32_t n = node->n;
    assert(node->kind == BONSAI_KEY_U64 && !node->leaf);
    if (n < 2 * BOUNDED_SPAN || key < lo || key >= hi)
        return bn_search(node, &(bn_key){.u = key}, NULL);
    uint32_t guess = (uint32_t)((double)(key - lo) / (double)(hi - lo) * n);
    uint32_t from = span_around(guess, n, BOUNDED_SPAN);
    uint32_t to = from + BOUNDED_SPAN; /* < n */
    const bn_child *c = node->child + from;
    __builtin_prefetch(c + 2);
    __builtin_prefetch(c + BOUNDED_SPAN / 2);
    __builtin_prefetch(c + BOUNDED_SPAN - 2);
    const uint64_t *k = node->k64;
    if ((from > 0 && k[from] > key) || k[to] <= key)
        return bn_search(node, &(bn_key){.u = key}, NULL);
    uint32_t below = 0; /* keys <= key in [from, to) */
    for (uint32_t i = from; i < to; i++)
        below += k[i] <= key;
    return below ? from + below - 1 : 0;
}

uint32_t bn_search_leaf_from(const bn_node *node, uint32_t from, bn_key key,
                             int *found)
{
    assert(node->leaf && from <= node->n);
    uint32_t n = node->n, i;
    if (node->kind == BONSAI_KEY_U64)
        i = from == n ? n
                      : from + lower_bound_u64(node->k64 + from, n - from,
                                               key.u);
    else
        i = lower_bound_bytes(node, from, key.b, key.len);
    *found = i < n && (node->kind == BONSAI_KEY_U64
                           ? node->k64[i] == key.u
                           : key_cmp(key_bytes(node, i), node->kb[i].len,
                                     key.b, key.len) == 0);
    return i;
}

bn_key bn_key_at(const bn_node *node, uint32_t idx)
{
    bn_key k = {0, NULL, 0};
    assert(idx < node->n);
    if (node->kind == BONSAI_KEY_U64) {
        k.u = node->k64[idx];
    } else {
        k.b = key_bytes(node, idx);
        k.len = node->kb[idx].len;
    }
    return k;
}

void bn_value_at(const bn_node *node, uint32_t idx, const uint8_t **val,
                 uint32_t *len, unsigned *vflag)
{
    assert(node->leaf && idx < node->n);
    bn_span s = {0, 0};
    if (node->val)
        s = node->val[idx];
    *val = span_bytes(node, s);
    *len = s.len;
    *vflag = node->vflag ? node->vflag[idx] : 0;
}

size_t bn_mem_bytes(const bn_node *node)
{
    size_t per = node->kind == BONSAI_KEY_U64 ? sizeof *node->k64
                                              : sizeof *node->kb;
    if (node->val)
        per += sizeof *node->val + 1;
    if (node->child)
        per += sizeof *node->child;
    if (node->head)
        per += sizeof *node->head;
    size_t groups = node->gstart ? UG_WORDS(node->cap) * sizeof(uint64_t) : 0;
    return sizeof *node + (size_t)node->cap * per + node->arena_cap + groups;
}

/* ---- decoded nodes: changes --------------------------------------------- */

/* Whether u64 key, put at idx, is a put after the last key that keeps a
 * node whose keys lie one step apart so: it needs no groups. */
static int keeps_fresh(const bn_node *node, uint32_t idx)
{
    return node->kind == BONSAI_KEY_U64 && !node->gstart && idx == node->n;
}

/* Reserves what inserting one entry needs: after it nothing can fail. */
static int reserve_insert(bn_node *node, uint32_t idx, uint64_t bytes,
                          int need_val)
{
    int rc = grow_arrays(node, (uint64_t)node->n + 1);
    if (!rc && need_val)
        rc = ensure_vals(node);
    if (!rc)
        rc = arena_reserve(node, bytes);
    if (!rc && !keeps_fresh(node, idx))
        rc = own_groups(node);
    return rc;
}

/* Opens a gap at idx, stores the key there (in its group, placed by the
 * one rule of u64groups.h) and updates the key terms of the estimate:
 * those of the entries that get a new predecessor. */
static void insert_key(bn_node *node, uint32_t idx, bn_key key)
{
    int u64 = node->kind == BONSAI_KEY_U64;
    int keeps = keeps_fresh(node, idx);
    if (u64 && !keeps)
        ug_open(node->gstart, node->n, idx, 1);
    if (idx == node->n && u64) {
        node->k64[node->n++] = key.u; /* an append: one new term */
        node->est_keys += u64_term(node->k64, idx);
    } else {
        uint32_t reach = est_reach(node);
        est_key_terms(node, idx, idx + reach, SUB);
        move_entries(node, idx + 1, idx, node->n - idx);
        node->n++;
        if (u64)
            node->k64[idx] = key.u;
        else
            node->kb[idx] = arena_put(node, key.b, key.len);
        est_key_terms(node, idx, idx + 1 + reach, ADD);
    }
    if (u64 && !keeps)
        ug_place(node->k64, node->gstart, node->n, idx);
}

/* ---- changes the growth bound does not cover (regroup.h) -------------- */

/* A key taken: its two differences merge, and up to 64 taken in a row
 * merge 64 of them, 6 bits wider than the widest, in the group holding
 * it or the next. */
#define GROW_PER_DEL (2u * GROUP * 6u / 8u)
/* A key replaced: its differences may be any, so its group may widen to
 * 64 bits. */
#define GROW_PER_SET (GROUP * 8u + GROW_GROUP_BYTES)

static uint32_t grow_add(uint32_t a, uint32_t b)
{
    return a > BN_GROW_UNKNOWN - 1 - b ? BN_GROW_UNKNOWN - 1 : a + b;
}

/* Before key idx is put in (idx == n: after the last). */
static void grow_put(bn_node *node, uint32_t idx, uint32_t bytes)
{
    if (node->kind != BONSAI_KEY_U64)
        return;
    if (idx >= node->n) {
        node->grow_ends++;
        return;
    }
    node->grow_moves++;
    node->grow_since = grow_add(node->grow_since, bytes);
}

static void grow_take(bn_node *node)
{
    if (node->kind != BONSAI_KEY_U64)
        return;
    node->grow_moves++;
    node->grow_dels++;
    node->grow_since =
        grow_add(node->grow_since, grow_add(node->grow_key, GROW_PER_DEL));
}

static void grow_unknown(bn_node *node)
{
    if (node->kind == BONSAI_KEY_U64)
        node->grow = BN_GROW_UNKNOWN;
}

int bn_insert(bn_node *node, uint32_t idx, bn_key key, const uint8_t *val,
              uint32_t vlen, unsigned vflag)
{
    assert(node->leaf && idx <= node->n);
    if (idx == node->n && node->n < node->cap && !node->val && vlen == 0 &&
        !(vflag & BN_VAL_OVERFLOW) && keeps_fresh(node, idx)) {
        /* a sequential load's every put: one new key term, one empty
         * value's (insert_key and est_val, without their calls) */
        node->grow_ends++;
        node->k64[node->n++] = key.u;
        node->est_keys += u64_term(node->k64, idx);
        node->est_vhdr += 1; /* an empty value's length varint */
        est_refresh(node);
        return 0;
    }
    int bytes = node->kind == BONSAI_KEY_BYTES;
    int64_t koff = bytes ? arena_off(node, key.b) : -1;
    int64_t voff = vlen ? arena_off(node, val) : -1;
    vflag &= BN_VAL_OVERFLOW;

    if (reserve_insert(node, idx, (uint64_t)(bytes ? key.len : 0) + vlen,
                       vlen || vflag))
        return BONSAI_NOMEM;
    key.b = arena_rebase(node, key.b, koff);
    val = arena_rebase(node, val, voff);

    grow_put(node, idx, node->grow_key);
    insert_key(node, idx, key);
    if (node->val) {
        node->val[idx] = arena_put(node, val, vlen);
        node->vflag[idx] = (uint8_t)vflag;
    }
    est_val(node, vlen, vflag, ADD);
    est_refresh(node);
    return 0;
}

/* Key terms of entries [from, to), each at most once across calls made
 * in increasing order: *done is where the last range ended. */
static void est_terms_once(bn_node *node, uint32_t from, uint32_t to,
                           uint32_t *done, int add)
{
    if (from < *done)
        from = *done;
    if (to > node->n)
        to = node->n;
    if (from < to) {
        est_key_terms(node, from, to, add);
        *done = to;
    }
}

#define PLACE_WORDS 64u

/* How many keys of a run a node without groups of its own takes into
 * its fresh groups: all when they come after its last key, else none. */
static uint32_t run_on_fresh(const bn_node *node, uint32_t m, const bn_new *e)
{
    int fresh = node->kind == BONSAI_KEY_U64 && !node->gstart;
    return fresh && e[0].at == node->n ? m : 0;
}

/* The groups of a node whose m new keys e have just been merged in (at
 * e[i].at + i), its old keys' bits still in place: placed as put one by
 * one (ug_place_batch).  bits holds a bitmap of the node's keys. */
static void place_run(bn_node *node, uint32_t m, const bn_new *e,
                      uint64_t *bits)
{
    uint32_t n = node->n, words = (uint32_t)UG_WORDS(n);
    uint64_t *fresh = bits;
    memset(fresh, 0, words * sizeof *fresh);
    for (uint32_t i = 0; i < m; i++) { /* the old bits move as keys did */
        uint32_t p = e[i].at + i;
        ug_open(node->gstart, n - m + i, p, 1);
        ug_mark(fresh, p, 1);
    }
    ug_place_batch(node->k64, node->gstart, n, fresh);
}

int bn_insert_sorted(bn_node *node, uint32_t m, const bn_new *e)
{
    assert(node->leaf);
    if (m == 0)
        return 0;
    uint64_t bytes = 0;
    int vals = 0;
    for (uint32_t i = 0; i < m; i++) {
        bytes += (node->kind == BONSAI_KEY_BYTES ? e[i].key.len : 0) +
                 e[i].vlen;
        vals |= e[i].vlen != 0;
    }
    if (grow_arrays(node, (uint64_t)node->n + m) ||
        (vals && ensure_vals(node)) || arena_reserve(node, bytes))
        return BONSAI_NOMEM;
    /* the new keys' bits while their groups are placed: on the stack
     * for a node of up to PLACE_WORDS * 64 keys */
    uint64_t near[PLACE_WORDS], *bits = NULL;
    uint32_t taken = run_on_fresh(node, m, e);
    if (node->kind == BONSAI_KEY_U64 && taken < m) {
        size_t words = UG_WORDS((size_t)node->n + m);
        bits = words <= PLACE_WORDS ? near : malloc(words * sizeof *bits);
        if (!bits || own_groups(node)) {
            if (bits != near)
                free(bits);
            return BONSAI_NOMEM;
        }
    }

    /* the old entries that get a new predecessor lose their terms */
    uint32_t reach = est_reach(node), done = 0;
    for (uint32_t i = 0; i < m; i++) {
        est_terms_once(node, e[i].at, e[i].at + reach, &done, SUB);
        grow_put(node, e[i].at, node->grow_key);
    }

    /* from the back: each old entry moves once, by the news before it */
    uint32_t src = node->n;
    for (uint32_t i = m; i-- > 0;) {
        uint32_t cnt = src - e[i].at;
        move_entries(node, e[i].at + i + 1, e[i].at, cnt);
        src = e[i].at;
        uint32_t j = e[i].at + i;
        if (node->kind == BONSAI_KEY_U64)
            node->k64[j] = e[i].key.u;
        else
            node->kb[j] = arena_put(node, e[i].key.b, e[i].key.len);
        if (node->val) {
            node->val[j] = arena_put(node, e[i].val, e[i].vlen);
            node->vflag[j] = 0;
        }
    }
    node->n += m;
    if (bits)
        place_run(node, m, e, bits);
    if (bits != near)
        free(bits);

    done = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t j = e[i].at + i;
        est_terms_once(node, j, j + 1 + reach, &done, ADD);
        est_val(node, e[i].vlen, 0, ADD);
    }
    est_refresh(node);
    return 0;
}

int bn_insert_child(bn_node *node, uint32_t idx, bn_key key, bn_child child)
{
    assert(!node->leaf && idx <= node->n);
    int bytes = node->kind == BONSAI_KEY_BYTES;
    int64_t koff = bytes ? arena_off(node, key.b) : -1;

    if (reserve_insert(node, idx, bytes ? key.len : 0, 0))
        return BONSAI_NOMEM;
    key.b = arena_rebase(node, key.b, koff);

    grow_put(node, idx, node->grow_key);
    insert_key(node, idx, key);
    node->child[idx] = child;
    heads_rebuild(node);
    est_refresh(node);
    return 0;
}

int bn_set_value(bn_node *node, uint32_t idx, const uint8_t *val,
                 uint32_t vlen, unsigned vflag)
{
    assert(node->leaf && idx < node->n);
    vflag &= BN_VAL_OVERFLOW;
    if (!node->val && vlen == 0 && vflag == 0)
        return 0; /* empty stays empty */
    int64_t voff = vlen ? arena_off(node, val) : -1;
    if (ensure_vals(node) || arena_reserve(node, vlen))
        return BONSAI_NOMEM;
    val = arena_rebase(node, val, voff);

    bn_span old = node->val[idx];
    est_val(node, old.len, node->vflag[idx], SUB); /* 0, 0 if it was NULL */
    node->val[idx] = arena_put(node, val, vlen);
    node->vflag[idx] = (uint8_t)vflag;
    node->arena_dead += old.len;
    est_val(node, vlen, vflag, ADD);
    arena_settle(node);
    est_refresh(node);
    return 0;
}

/* Takes away (or adds back) the key terms that depend on key idx. */
static void est_around(bn_node *node, uint32_t idx, int add)
{
    est_key_terms(node, idx, idx + 1 + est_reach(node), add);
}

int bn_set_key(bn_node *node, uint32_t idx, bn_key key)
{
    assert(idx < node->n);
    if (node->kind == BONSAI_KEY_U64) {
        grow_put(node, idx, GROW_PER_SET);
        est_around(node, idx, SUB);
        node->k64[idx] = key.u;
        est_around(node, idx, ADD);
        est_refresh(node);
        return 0;
    }
    int64_t koff = arena_off(node, key.b);
    if (arena_reserve(node, key.len))
        return BONSAI_NOMEM;
    key.b = arena_rebase(node, key.b, koff);

    est_around(node, idx, SUB);
    node->arena_dead += node->kb[idx].len;
    node->kb[idx] = arena_put(node, key.b, key.len);
    est_around(node, idx, ADD);
    arena_settle(node);
    heads_rebuild(node);
    est_refresh(node);
    return 0;
}

void bn_remove(bn_node *node, uint32_t idx)
{
    assert(idx < node->n);
    grow_take(node);
    /* a node without groups of its own keeps fresh ones */
    if (node->gstart) {
        ug_unplace(node->gstart, node->n, idx);
        ug_close(node->gstart, node->n, idx, 1);
    }
    est_around(node, idx, SUB);
    if (node->kb)
        node->arena_dead += node->kb[idx].len;
    if (node->val) {
        node->arena_dead += node->val[idx].len;
        est_val(node, node->val[idx].len, node->vflag[idx], SUB);
    } else if (node->leaf) {
        est_val(node, 0, 0, SUB);
    }
    move_entries(node, idx, idx + 1, node->n - idx - 1);
    node->n--;
    /* the entries that got a new predecessor */
    est_key_terms(node, idx, idx + est_reach(node), ADD);
    arena_settle(node);
    heads_rebuild(node);
    est_refresh(node);
}

/* Copies src's entry j into dst's position i (room reserved). */
static void copy_entry(bn_node *dst, uint32_t i, const bn_node *src,
                       uint32_t j)
{
    if (dst->kind == BONSAI_KEY_U64)
        dst->k64[i] = src->k64[j];
    else
        dst->kb[i] = arena_put(dst, key_bytes(src, j), src->kb[j].len);
    if (dst->val) {
        bn_span v = {0, 0};
        if (src->val)
            v = src->val[j];
        dst->val[i] = arena_put(dst, span_bytes(src, v), v.len);
        dst->vflag[i] = src->vflag ? src->vflag[j] : 0;
    }
    if (dst->child)
        dst->child[i] = src->child[j];
}

/* Arena bytes of src's entries [from, to) and whether any value is
 * non-empty (so dst needs value arrays). */
static uint64_t moved_bytes(const bn_node *src, uint32_t from, uint32_t to,
                            int *vals)
{
    uint64_t bytes = 0;
    *vals = 0;
    for (uint32_t i = from; i < to; i++) {
        if (src->kb)
            bytes += src->kb[i].len;
        if (src->val) {
            bytes += src->val[i].len;
            *vals |= src->val[i].len || src->vflag[i];
        }
    }
    return bytes;
}

int bn_copy_frozen(bn_node *dst, const bn_node *src)
{
    assert(dst->n == 0 && dst->kind == src->kind && dst->leaf == src->leaf);
    int vals;
    uint64_t bytes = moved_bytes(src, 0, src->n, &vals);
    if (src->n == 0)
        return 0;
    if (grow_arrays(dst, src->n) || (vals && ensure_vals(dst)) ||
        arena_reserve(dst, bytes))
        return BONSAI_NOMEM;
    for (uint32_t i = 0; i < src->n; i++)
        copy_entry(dst, i, src, i);
    dst->n = src->n;
    heads_rebuild(dst);
    dst->grow = src->grow;
    dst->grow_key = src->grow_key;
    return 0;
}

/* The groups of src's keys [from, to) moved to dst at index at: they
 * keep their groups, and the keys on either side of where they were and
 * where they go begin groups, so that no group grows. */
static void move_groups(bn_node *dst, uint32_t at, const bn_node *src,
                        uint32_t from, uint32_t to)
{
    uint32_t m = to - from;
    ug_open(dst->gstart, dst->n, at, m);
    for (uint32_t i = 0; i < m; i++)
        ug_mark(dst->gstart, at + i, ug_is_start(src->gstart, from + i));
    ug_mark(dst->gstart, at, 1);
    if (at + m < dst->n + m)
        ug_mark(dst->gstart, at + m, 1);
    ug_close(src->gstart, src->n, from, m);
    if (from < src->n - m)
        ug_mark(src->gstart, from, 1);
    if (src->n > m)
        ug_mark(src->gstart, 0, 1);
}

int bn_move(bn_node *dst, uint32_t at, bn_node *src, uint32_t from,
            uint32_t to)
{
    assert(dst != src && dst->kind == src->kind && dst->leaf == src->leaf);
    assert(from <= to && to <= src->n && at <= dst->n);
    uint32_t m = to - from;
    int vals;
    if (m == 0)
        return 0;

    /* everything that can fail first: dst only gains capacity */
    uint64_t bytes = moved_bytes(src, from, to, &vals);
    int groups = dst->gstart || src->gstart; /* else both keep fresh ones */
    if (grow_arrays(dst, (uint64_t)dst->n + m) ||
        (vals && ensure_vals(dst)) || arena_reserve(dst, bytes) ||
        (groups && (own_groups(dst) || own_groups(src))))
        return BONSAI_NOMEM;

    if (groups)
        move_groups(dst, at, src, from, to);
    move_entries(dst, at + m, at, dst->n - at);
    for (uint32_t i = 0; i < m; i++)
        copy_entry(dst, at + i, src, from + i);
    dst->n += m;

    /* a split moves a tail: what stays needs only the moved terms taken
     * away, not a recount of thousands of entries */
    int tail = to == src->n;
    if (tail)
        est_take_tail(src, from);

    src->arena_dead += (uint32_t)(bytes);
    move_entries(src, from, to, src->n - to);
    src->n -= m;
    arena_settle(src);
    heads_rebuild(dst);
    heads_rebuild(src);

    est_recompute(dst);
    if (tail)
        est_refresh(src);
    else
        est_recompute(src);
    /* dst's keys from `at` on fall into new groups; src keeps its groups
     * only when it loses its tail */
    grow_unknown(dst);
    if (!tail)
        grow_unknown(src);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * fuzz_u64groups.c - the groups form of a u64 key section
 * (lib/u64groups.c) on arbitrary bytes: decoding, reads in place, and keys
 * added where the form lies.
 *
 * Input:
 *   bytes 0..7   first: key 0, little-endian
 *   bytes 8..9   n = 2 + (little-endian u16) % 2000: the keys the form
 *                claims (2..2001)
 *   byte 10      control: bits 0..3 how many keys to add (0..15); bits
 *                4..7 pick which keys are sampled in large forms and which
 *                key is removed
 *   11..         the form; allocated exactly, so reading past it is an
 *                ASan error
 * A shorter input reads as zeros past its end (an empty form).
 *
 * What must hold (a violation is a finding, abort()):
 *  - ug_decode returns 0 or -1; ug_search and ug_key_at return 0 or -1,
 *    on any bytes, for a dozen probe keys (from the input, and 0, first,
 *    2^64 - 1) and a dozen indices; a search's idx lies in [0, n] (below
 *    n when found); ug_key_at(n) is refused;
 *  - a decoded form is canonical: k[0] is first, the keys strictly
 *    increase, the grouping is sound, ug_len is the form's length and
 *    ug_put writes back exactly its bytes; ug_key_at gives every key (256
 *    sampled when n times the groups passes 2^17: each call walks the
 *    index); ug_search finds the stored keys (all, or 256 sampled) where
 *    they are, and gives the lower bound of k for their neighbours and
 *    for the probes;
 *  - keys put into a decoded form: up to `control % 16` keys (neighbours
 *    of stored keys, and keys from the input; those already there
 *    dropped), put one by one into the decoded arrays as a node puts them
 *    (ug_place), grow the encoded form by at most ug_put_bound of the form
 *    before each put (but one after the last key of fresh groups), and
 *    ug_add on the form gives exactly the bytes of
 *    that result and its key 0, and refuses a byte too little room (1)
 *    and keys out of order (-1); a key already there leaves the form's
 *    bytes as they were, none added; on a form that does
 *    not decode, ug_add answers 0, 1 or -1; it never writes past its
 *    room;
 *  - a decoded form with one key removed (ug_unplace) and the same keys
 *    in fresh groups (ug_fresh) encode and decode back to the same keys
 *    and groups.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "u64groups.h"

#include "fuzz_util.h"

#define FU_HEADER 11u  /* first, n, control */
#define FU_NSPAN 2000u /* n = 2 + u16 % FU_NSPAN */
#define FU_ALL 256u    /* forms of at most this many keys: search them all */
#define FU_KEY_AT_WORK (1u << 17) /* ug_key_at of every key while n times
                                     the groups is at most this */
#define FU_PROBES 12u  /* search keys and indices taken from the input */
#define FU_MAX_ADD 15u
#define FU_CANARY 16u /* bytes past an output's room that must stay as set */

typedef struct fu_ctx {
    const uint8_t *data; /* the whole input, for probe and added keys */
    size_t size;
    uint64_t first;
    uint32_t n;
    unsigned ctl;
    const uint8_t *form, *end;
} fu_ctx;

/* ---- keys from the input -------------------------------------------------- */

/* Eight input bytes at a place picked by j, little-endian. */
static uint64_t fu_bytes_at(const fu_ctx *c, uint64_t j)
{
    uint64_t v = 0;
    if (c->size == 0)
        return 0;
    size_t at = (size_t)(fz_mix(j) % c->size);
    for (size_t i = 0; i < 8 && at + i < c->size; i++)
        v |= (uint64_t)c->data[at + i] << (8 * i);
    return v;
}

/* Probe key j: 0, first, 2^64 - 1, keys just past first, input bytes. */
static uint64_t fu_probe(const fu_ctx *c, unsigned j)
{
    uint64_t v = fu_bytes_at(c, j);
    switch (j % 6) {
    case 0: return j == 0 ? 0 : v >> (v & 63);
    case 1: return j == 1 ? c->first : c->first + (v & 0xff);
    case 2: return j == 2 ? UINT64_MAX : UINT64_MAX - (v & 0xffff);
    case 3: return c->first + (v >> (v & 63));
    default: return v;
    }
}

static int fu_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..m) and drops repeats; how many are left. */
static uint32_t fu_sort_unique(uint64_t *v, uint32_t m)
{
    qsort(v, m, sizeof *v, fu_cmp_u64);
    uint32_t w = 0;
    for (uint32_t j = 0; j < m; j++)
        if (w == 0 || v[j] != v[w - 1])
            v[w++] = v[j];
    return w;
}

/* The first index of k[0..n) whose key is >= key. */
static uint32_t fu_lower_bound(const uint64_t *k, uint32_t n, uint64_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (k[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int fu_contains(const uint64_t *k, uint32_t n, uint64_t key)
{
    uint32_t i = fu_lower_bound(k, n, key);
    return i < n && k[i] == key;
}

/* Up to control % 16 keys to add, increasing, none in k[0..n) (k NULL:
 * the form did not decode, any keys).  How many. */
static uint32_t fu_add_keys(const fu_ctx *c, const uint64_t *k, uint32_t n,
                            uint64_t *add)
{
    uint32_t want = c->ctl % 16, m = 0;
    for (uint32_t j = 0; j < want; j++) {
        uint64_t r = fz_mix((uint64_t)j << 8 | c->ctl);
        uint64_t v = fu_bytes_at(c, 100 + j), key;
        uint64_t d = 1 + (r >> 8) % 8;
        if (!k || r % 4 == 0) {
            key = j % 2 ? v : fu_probe(c, (unsigned)(r % FU_PROBES));
        } else {
            uint64_t at = k[(r >> 16) % n];
            if (r % 4 == 1)
                key = at <= UINT64_MAX - d ? at + d : at - d;
            else if (r % 4 == 2)
                key = at >= d ? at - d : at + d;
            else /* past either end */
                key = r & 32 ? k[n - 1] + (v & 0xfff) : k[0] - (v & 0xfff);
        }
        if (!k || !fu_contains(k, n, key))
            add[m++] = key;
    }
    return fu_sort_unique(add, m);
}

/* ---- the form as it lies --------------------------------------------------- */

/* A search of the form for key: an answer within [0, n].  *idx, *found
 * set when it returns 0. */
static int fu_search(const fu_ctx *c, uint64_t key, uint32_t *idx, int *found,
                     const char *what)
{
    *idx = UINT32_MAX;
    *found = -1;
    int rc = ug_search(c->form, c->end, c->first, c->n, key, idx, found);
    FZ_CHECK(rc == 0 || rc == -1, "ug_search(%s %llu) -> %d", what,
             (unsigned long long)key, rc);
    if (rc == 0)
        FZ_CHECK(*idx <= c->n && (*found == 0 || *found == 1) &&
                     (!*found || *idx < c->n),
                 "ug_search(%s %llu): idx %u found %d of %u keys", what,
                 (unsigned long long)key, *idx, *found, c->n);
    return rc;
}

static int fu_key_at(const fu_ctx *c, uint32_t i, uint64_t *key)
{
    int rc = ug_key_at(c->form, c->end, c->first, c->n, i, key);
    FZ_CHECK(rc == 0 || rc == -1, "ug_key_at(%u) -> %d", i, rc);
    FZ_CHECK(i < c->n || rc == -1, "ug_key_at(%u) of %u keys accepted", i,
             c->n);
    return rc;
}

/* The probes, on any bytes; with k (the form decoded), their answers. */
static void fu_probes(const fu_ctx *c, const uint64_t *k)
{
    for (unsigned j = 0; j < FU_PROBES; j++) {
        uint64_t key = fu_probe(c, j);
        uint32_t idx;
        int found;
        int rc = fu_search(c, key, &idx, &found, "probe");
        if (k) {
            uint32_t want = fu_lower_bound(k, c->n, key);
            FZ_CHECK(rc == 0 && idx == want &&
                         found == (want < c->n && k[want] == key),
                     "probe %u (%llu): ug_search -> %d idx %u found %d, "
                     "lower bound %u",
                     j, (unsigned long long)key, rc, idx, found, want);
        }
        uint32_t i = j == 0   ? 0
                     : j == 1 ? c->n - 1
                     : j == 2 ? c->n
                              : (uint32_t)(fu_bytes_at(c, 50 + j) %
                                           ((uint64_t)c->n + 1));
        uint64_t got = 0;
        rc = fu_key_at(c, i, &got);
        if (k && i < c->n)
            FZ_CHECK(rc == 0 && got == k[i],
                     "ug_key_at(%u) -> %d, %llu; decoded %llu", i, rc,
                     (unsigned long long)got, (unsigned long long)k[i]);
    }
}

/* ---- a decoded form ------------------------------------------------------- */

/* Key i of the sample (of *m picks) of n keys. */
static uint32_t fu_pick(const fu_ctx *c, uint32_t n, uint32_t i, uint32_t *m)
{
    if (n <= FU_ALL) {
        *m = n;
        return i;
    }
    *m = FU_ALL;
    if (i < 64)
        return i;
    if (i < 128)
        return n - 128 + i;
    return (uint32_t)(fz_mix((uint64_t)i << 8 | (c->ctl >> 4)) % n);
}

/* Whether two groupings of n keys are the same. */
static int fu_same_groups(const uint64_t *a, const uint64_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (ug_is_start(a, i) != ug_is_start(b, i))
            return 0;
    return 1;
}

/* Encodes k, start (n >= 2 keys) into a buffer of exactly ug_len bytes;
 * *len its length.  The caller frees it. */
static uint8_t *fu_encode(const uint64_t *k, const uint64_t *start,
                          uint32_t n, size_t *len, const char *what)
{
    FZ_CHECK(ug_grouping_ok(start, n), "%s: grouping of %u keys not sound",
             what, n);
    size_t l = ug_len(k, start, n);
    FZ_CHECK(l >= 3, "%s: ug_len %zu", what, l);
    uint8_t *out = malloc(l);
    FZ_CHECK(out != NULL, "harness: out of memory");
    uint8_t *e = ug_put(k, start, n, out);
    FZ_CHECK(e == out + l, "%s: ug_put wrote %td bytes, ug_len %zu", what,
             e - out, l);
    *len = l;
    return out;
}

/* The shape of an encoded form of n keys. */
static void fu_shape(const uint8_t *form, size_t len, uint32_t n,
                     ug_shape *sh)
{
    FZ_CHECK(ug_shape_of(form, form + len, n, sh) == 0,
             "an encoded form without a shape");
}

/* Whether the groups of n keys are fresh: a group begins at every 64th
 * key and nowhere else. */
static int fu_fresh(const uint64_t *start, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (ug_is_start(start, i) != (i % 64 == 0))
            return 0;
    return 1;
}

/* The keys and groups of an encoded form decode back as they are. */
static void fu_round_trip(const uint64_t *k, const uint64_t *start,
                          uint32_t n, const char *what)
{
    size_t len;
    uint8_t *form = fu_encode(k, start, n, &len, what);
    uint64_t *k2 = malloc((size_t)n * sizeof *k2);
    uint64_t *s2 = malloc(UG_WORDS(n) * sizeof *s2);
    FZ_CHECK(k2 && s2, "harness: out of memory");
    FZ_CHECK(ug_decode(form, form + len, k[0], n, k2, s2) == 0 &&
                 memcmp(k2, k, (size_t)n * sizeof *k) == 0 &&
                 fu_same_groups(s2, start, n),
             "%s: %u keys encoded do not decode back", what, n);
    free(k2);
    free(s2);
    free(form);
}

static void fu_check_decoded(const fu_ctx *c, const uint64_t *k,
                             const uint64_t *start)
{
    uint32_t n = c->n;
    size_t len = (size_t)(c->end - c->form);
    FZ_CHECK(k[0] == c->first, "ug_decode: key 0 %llu, first %llu",
             (unsigned long long)k[0], (unsigned long long)c->first);
    FZ_CHECK(ug_grouping_ok(start, n), "ug_decode: grouping not sound");
    for (uint32_t i = 1; i < n; i++)
        FZ_CHECK(k[i] > k[i - 1], "ug_decode: keys %u and %u not increasing",
                 i - 1, i);

    /* canonical: the same bytes back */
    size_t l = ug_len(k, start, n);
    FZ_CHECK(l == len, "ug_decode accepted %zu bytes, ug_len says %zu", len,
             l);
    size_t got;
    uint8_t *again = fu_encode(k, start, n, &got, "decoded form");
    size_t diff = 0;
    while (diff < len && again[diff] == c->form[diff])
        diff++;
    FZ_CHECK(diff == len,
             "ug_decode accepted a form ug_put does not write back (%zu "
             "bytes, first difference at offset %zu)",
             len, diff);
    free(again);

    /* ug_key_at walks the index up to the key's group: every key unless
     * that is many groups for many keys, then the sample */
    uint64_t groups = 0;
    for (uint32_t i = 0; i < n; i++)
        groups += (uint64_t)ug_is_start(start, i);
    int every = (uint64_t)n * groups <= FU_KEY_AT_WORK;
    uint32_t m = every ? n : 0;
    for (uint32_t s = 0; s == 0 || s < m; s++) {
        uint32_t i = every ? s : fu_pick(c, n, s, &m);
        uint64_t key = 0;
        int rc = fu_key_at(c, i, &key);
        FZ_CHECK(rc == 0 && key == k[i],
                 "ug_key_at(%u) -> %d, %llu; decoded %llu", i, rc,
                 (unsigned long long)key, (unsigned long long)k[i]);
    }

    m = 0;
    for (uint32_t s = 0; s == 0 || s < m; s++) {
        uint32_t i = fu_pick(c, n, s, &m);
        uint32_t idx;
        int found;
        int rc = fu_search(c, k[i], &idx, &found, "stored key");
        FZ_CHECK(rc == 0 && idx == i && found == 1,
                 "ug_search(key %u = %llu) -> %d idx %u found %d", i,
                 (unsigned long long)k[i], rc, idx, found);
        for (int side = 0; side < 2; side++) {
            if (side ? k[i] == UINT64_MAX : k[i] == 0)
                continue;
            uint64_t near = side ? k[i] + 1 : k[i] - 1;
            uint32_t want = fu_lower_bound(k, n, near);
            rc = fu_search(c, near, &idx, &found, "near a stored key");
            FZ_CHECK(rc == 0 && idx == want &&
                         found == (want < n && k[want] == near),
                     "ug_search(key %u %s 1) -> %d idx %u found %d, lower "
                     "bound %u",
                     i, side ? "+" : "-", rc, idx, found, want);
        }
    }
    fu_probes(c, k);
}

/* ---- keys added -------------------------------------------------------------- */

/* Puts key (absent) into k, start of *n keys (room for one more) as a
 * node does: in order, then ug_place. */
static void fu_put_key(uint64_t *k, uint64_t *start, uint32_t *n,
                       uint64_t key)
{
    uint32_t i = fu_lower_bound(k, *n, key);
    memmove(k + i + 1, k + i, (*n - i) * sizeof *k);
    ug_open(start, *n, i, 1);
    k[i] = key;
    (*n)++;
    ug_place(k, start, *n, i);
}

/* ug_add of add[0..m) to the form, into a room of cap bytes (*out, which
 * the caller frees): the bytes just past the room must stay as they were
 * set. */
static int fu_ug_add(const fu_ctx *c, const uint64_t *add, uint32_t m,
                     size_t cap, uint64_t *first_out, size_t *len,
                     uint8_t **out, uint32_t *added)
{
    size_t ss = ug_add_scratch(c->n, m);
    void *scratch = malloc(ss ? ss : 1);
    *out = malloc(cap + FU_CANARY);
    FZ_CHECK(scratch && *out, "harness: out of memory");
    memset(*out, 0xa5, cap + FU_CANARY);
    *first_out = 0;
    *len = SIZE_MAX;
    *added = UINT32_MAX;
    int rc = ug_add(c->form, c->end, c->first, c->n, add, m, scratch, *out,
                    cap, first_out, len, added);
    FZ_CHECK(rc == 0 || rc == 1 || rc == -1, "ug_add of %u keys -> %d", m,
             rc);
    if (rc == 0)
        FZ_CHECK(*len >= 3 && *len <= cap,
                 "ug_add of %u keys: %zu bytes in a room of %zu", m, *len,
                 cap);
    for (size_t b = cap; b < cap + FU_CANARY; b++)
        FZ_CHECK((*out)[b] == 0xa5,
                 "ug_add of %u keys -> %d wrote byte %zu past its room of "
                 "%zu",
                 m, rc, b, cap);
    free(scratch);
    return rc;
}

/* Keys added to a decoded form: one by one into the arrays, and by
 * ug_add where the form lies; the same bytes. */
static void fu_add_decoded(const fu_ctx *c, const uint64_t *k,
                           const uint64_t *start)
{
    uint64_t add[FU_MAX_ADD];
    uint32_t m = fu_add_keys(c, k, c->n, add);
    size_t len = (size_t)(c->end - c->form);

    uint32_t wn = c->n;
    uint64_t *wk = malloc(((size_t)wn + m) * sizeof *wk);
    uint64_t *ws = malloc(UG_WORDS((size_t)wn + m) * sizeof *ws);
    FZ_CHECK(wk && ws, "harness: out of memory");
    memcpy(wk, k, (size_t)wn * sizeof *wk);
    memcpy(ws, start, UG_WORDS(wn) * sizeof *ws);
    uint8_t *before = malloc(len);
    FZ_CHECK(before != NULL, "harness: out of memory");
    memcpy(before, c->form, len);
    size_t blen = len;
    for (uint32_t j = 0; j < m; j++) {
        ug_shape sh;
        fu_shape(before, blen, wn, &sh);
        uint32_t bound = ug_put_bound(&sh);
        /* after the last key of fresh groups a key joins by position,
         * which the bound does not cover */
        int by_place = add[j] > wk[wn - 1] && fu_fresh(ws, wn);
        fu_put_key(wk, ws, &wn, add[j]);
        size_t alen;
        uint8_t *after = fu_encode(wk, ws, wn, &alen, "keys put one by one");
        FZ_CHECK(by_place || alen <= blen + bound,
                 "a put of %llu grew the form from %zu to %zu bytes, bound "
                 "%u (%u groups, rw %u)",
                 (unsigned long long)add[j], blen, alen, bound, sh.groups,
                 sh.rw);
        free(before);
        before = after;
        blen = alen;
    }
    /* before: the form of the keys put one by one */

    uint64_t first_out;
    size_t got_len;
    uint8_t *out;
    uint32_t added;
    int rc = fu_ug_add(c, add, m, blen, &first_out, &got_len, &out, &added);
    size_t diff = 0;
    while (rc == 0 && diff < blen && diff < got_len &&
           out[diff] == before[diff])
        diff++;
    FZ_CHECK(rc == 0 && got_len == blen && diff == blen &&
                 first_out == wk[0] && added == m,
             "ug_add of %u keys to %u -> %d: %zu bytes, key 0 %llu, %u "
             "added; put one by one: %zu bytes, key 0 %llu, first "
             "difference at %zu",
             m, c->n, rc, got_len, (unsigned long long)first_out, added,
             blen, (unsigned long long)wk[0], diff);
    free(out);
    rc = fu_ug_add(c, add, m, blen - 1, &first_out, &got_len, &out, &added);
    FZ_CHECK(rc == 1, "ug_add of %u keys into %zu of %zu bytes -> %d", m,
             blen - 1, blen, rc);
    free(out);

    /* a key already there; keys out of order */
    size_t flen = (size_t)(c->end - c->form);
    uint64_t bad[2] = {k[(c->ctl >> 4) % c->n], m ? add[0] : 0};
    rc = fu_ug_add(c, bad, 1, flen, &first_out, &got_len, &out, &added);
    FZ_CHECK(rc == 0 && added == 0 && got_len == flen &&
                 memcmp(out, c->form, flen) == 0 && first_out == c->first,
             "ug_add of stored key %llu -> %d, %u added, %zu bytes of %zu",
             (unsigned long long)bad[0], rc, added, got_len, flen);
    free(out);
    if (m >= 2) {
        bad[0] = add[1];
        bad[1] = add[0];
        rc = fu_ug_add(c, bad, 2, blen + 64, &first_out, &got_len, &out,
                       &added);
        FZ_CHECK(rc == -1, "ug_add of keys out of order -> %d", rc);
        free(out);
    }

    free(before);
    free(wk);
    free(ws);
}

/* Keys added to a form that does not decode: an answer, within the room. */
static void fu_add_undecoded(const fu_ctx *c)
{
    uint64_t add[FU_MAX_ADD];
    uint32_t m = fu_add_keys(c, NULL, 0, add);
    size_t len = (size_t)(c->end - c->form);
    uint64_t first_out;
    size_t got_len;
    uint8_t *out;
    /* room for every rel widened to 64 bits and a few groups more */
    size_t cap = 8 * len + 32 * (size_t)m + 64;
    uint32_t added;
    (void)fu_ug_add(c, add, m, cap, &first_out, &got_len, &out, &added);
    free(out);
}

/* One key removed (ug_unplace), and fresh groups: both round-trip. */
static void fu_regroup(const fu_ctx *c, const uint64_t *k,
                       const uint64_t *start)
{
    uint32_t n = c->n;
    size_t words = UG_WORDS(n) * sizeof(uint64_t);
    uint64_t *k2 = malloc((size_t)n * sizeof *k2);
    uint64_t *s2 = malloc(words);
    FZ_CHECK(k2 && s2, "harness: out of memory");
    memcpy(k2, k, (size_t)n * sizeof *k2);
    ug_fresh(s2, n);
    fu_round_trip(k2, s2, n, "fresh groups");
    if (n >= 3) {
        uint32_t i = (uint32_t)(fz_mix(c->ctl) % n);
        memcpy(s2, start, words);
        ug_unplace(s2, n, i);
        memmove(k2 + i, k2 + i + 1, (size_t)(n - i - 1) * sizeof *k2);
        ug_close(s2, n, i, 1);
        fu_round_trip(k2, s2, n - 1, "a key removed");
    }
    free(k2);
    free(s2);
}

int fuzz_u64groups(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    fu_ctx c;
    c.data = data;
    c.size = size;
    c.first = fz_u64(&in);
    c.n = 2 + fz_u16(&in) % FU_NSPAN;
    c.ctl = fz_u8(&in);
    size_t len = size > FU_HEADER ? size - FU_HEADER : 0;
    uint8_t *form = malloc(len ? len : 1);
    uint64_t *k = malloc((size_t)c.n * sizeof *k);
    uint64_t *start = malloc(UG_WORDS(c.n) * sizeof *start);
    FZ_CHECK(form && k && start, "harness: out of memory");
    if (len)
        memcpy(form, data + FU_HEADER, len);
    c.form = form;
    c.end = form + len;

    int rc = ug_decode(c.form, c.end, c.first, c.n, k, start);
    FZ_CHECK(rc == 0 || rc == -1, "ug_decode -> %d", rc);
    if (rc == 0) {
        fu_check_decoded(&c, k, start);
        fu_add_decoded(&c, k, start);
        fu_regroup(&c, k, start);
    } else {
        fu_probes(&c, NULL);
        fu_add_undecoded(&c);
    }
    free(start);
    free(k);
    free(form);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_u64groups(data, size);
}
#endif

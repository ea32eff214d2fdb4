/* SPDX-License-Identifier: MIT */
/* u64groups.c - u64 keys in counted groups (u64groups.h). */
#include "u64groups.h"

#include <string.h>

#include "bitstream.h"
#include "bytes.h"

#define CNT_BITS 7u
#define WIDTH_BITS 7u
#define FIELD_BITS (CNT_BITS + WIDTH_BITS)
#define REL_MAX_BITS 64u

/* Bits the number stored for lo followed by hi takes. */
static inline unsigned delta_bits(uint64_t lo, uint64_t hi)
{
    return bit_len(hi - lo - 1);
}

static inline size_t data_bytes(uint32_t cnt, unsigned width)
{
    return ((size_t)(cnt - 1) * width + 7) / 8;
}

/* ---- where groups lie ---------------------------------------------------- */

void ug_fresh(uint8_t *start, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        start[i] = i % UG_FRESH == 0;
}

/* The keys a placement sees: all of k but those of a batch still to be
 * put (fresh ones after the key being placed, whose start flags mean
 * nothing yet). */
typedef struct ug_view {
    const uint64_t *k;
    uint8_t *start;
    uint32_t n;
    const uint8_t *fresh; /* NULL: every key is there */
    uint32_t at;          /* the key being placed */
} ug_view;

static inline int seen(const ug_view *v, uint32_t j)
{
    return !v->fresh || !v->fresh[j] || j <= v->at;
}

/* The next key seen after j, or n. */
static uint32_t next_seen(const ug_view *v, uint32_t j)
{
    for (j++; j < v->n && !seen(v, j); j++)
        ;
    return j;
}

/* The first key of the group holding key i (key 0 always begins one, and
 * every key before the one being placed is seen). */
static uint32_t group_begin(const ug_view *v, uint32_t i)
{
    while (!v->start[i] || !seen(v, i))
        i--;
    return i;
}

/* Where the next group begins after the one that begins at b, or n. */
static uint32_t group_end(const ug_view *v, uint32_t b)
{
    uint32_t e = next_seen(v, b);
    while (e < v->n && !v->start[e])
        e = next_seen(v, e);
    return e;
}

static unsigned group_width(const uint64_t *k, uint32_t b, uint32_t e)
{
    unsigned w = 0;
    for (uint32_t j = b + 1; j < e; j++) {
        unsigned d = delta_bits(k[j - 1], k[j]);
        w = d > w ? d : w;
    }
    return w;
}

/* Bits the group of the keys seen in [b, e) grows by when a key whose
 * number takes `bits` joins it. */
static uint64_t join_cost(const ug_view *v, uint32_t b, uint32_t e,
                          unsigned bits)
{
    unsigned w = 0;
    uint64_t cnt = 1;
    for (uint32_t prev = b, j = next_seen(v, b); j < e;
         prev = j, j = next_seen(v, j), cnt++) {
        unsigned d = delta_bits(v->k[prev], v->k[j]);
        w = d > w ? d : w;
    }
    unsigned joined = bits > w ? bits : w;
    return cnt * joined - (cnt - 1) * w;
}

/* What a record costs before key i is put: rw + the fields. */
static uint64_t record_cost(const ug_view *v, uint32_t i)
{
    uint32_t last = v->n - 1;
    while (!seen(v, last))
        last--;
    last = group_begin(v, last == i ? i - 1 : last);
    uint64_t key0 = v->k[i == 0 ? next_seen(v, 0) : 0];
    return bit_len(v->k[last] - key0) + FIELD_BITS;
}

static void halve_if_full(const ug_view *v, uint32_t i)
{
    uint32_t b = group_begin(v, i), e = group_end(v, b), cnt = 0;
    for (uint32_t j = b; j < e; j = next_seen(v, j))
        cnt++;
    if (cnt <= UG_MAX)
        return;
    uint32_t half = b;
    for (uint32_t t = 0; t < cnt / 2; t++)
        half = next_seen(v, half);
    v->start[half] = 1;
}

static void place(const ug_view *v)
{
    uint32_t i = v->at, right_at = next_seen(v, i);
    int has_left = i > 0, has_right = right_at < v->n;
    uint8_t *start = v->start;
    if (!has_left && !has_right) {
        start[i] = 1;
        return;
    }
    if (has_left && has_right && !start[right_at]) {
        start[i] = 0; /* among the keys of one group */
        halve_if_full(v, i);
        return;
    }
    uint64_t left = UINT64_MAX, right = UINT64_MAX;
    if (has_left)
        left = join_cost(v, group_begin(v, i - 1), i,
                         delta_bits(v->k[i - 1], v->k[i]));
    if (has_right)
        right = join_cost(v, right_at, group_end(v, right_at),
                          delta_bits(v->k[i], v->k[right_at]));
    uint64_t own = record_cost(v, i);
    if (has_left && left <= right && left <= own) {
        start[i] = 0;
    } else if (has_right && right <= own) {
        start[i] = 1;
        start[right_at] = 0;
    } else {
        start[i] = 1;
    }
    halve_if_full(v, i);
}

void ug_place(const uint64_t *k, uint8_t *start, uint32_t n, uint32_t i)
{
    ug_view v = {k, start, n, NULL, i};
    place(&v);
}

void ug_place_batch(const uint64_t *k, uint8_t *start, uint32_t n,
                    const uint8_t *fresh)
{
    ug_view v = {k, start, n, fresh, 0};
    for (v.at = 0; v.at < n; v.at++)
        if (fresh[v.at])
            place(&v);
}

void ug_unplace(uint8_t *start, uint32_t n, uint32_t i)
{
    if (start[i] && i + 1 < n && !start[i + 1])
        start[i + 1] = 1;
}

int ug_grouping_ok(const uint8_t *start, uint32_t n)
{
    if (n == 0 || !start[0])
        return 0;
    uint32_t run = 0;
    for (uint32_t i = 0; i < n; i++) {
        run = start[i] ? 1 : run + 1;
        if (run > UG_MAX)
            return 0;
    }
    return 1;
}

/* ---- writing ------------------------------------------------------------- */

/* One past the last key of the group that begins at b. */
static uint32_t plain_group_end(const uint8_t *start, uint32_t n,
                                uint32_t b)
{
    uint32_t e = b + 1;
    while (e < n && !start[e])
        e++;
    return e;
}

typedef struct ug_shape {
    uint32_t groups;
    unsigned rw;
    size_t data; /* bytes of every group's numbers */
} ug_shape;

static ug_shape shape_of(const uint64_t *k, const uint8_t *start, uint32_t n)
{
    ug_shape s = {0, 0, 0};
    for (uint32_t b = 0; b < n;) {
        uint32_t e = plain_group_end(start, n, b);
        s.data += data_bytes(e - b, group_width(k, b, e));
        s.rw = bit_len(k[b] - k[0]);
        s.groups++;
        b = e;
    }
    return s;
}

static size_t index_bytes(uint32_t groups, unsigned rw)
{
    return ((uint64_t)groups * (rw + FIELD_BITS) + 7) / 8;
}

size_t ug_len(const uint64_t *k, const uint8_t *start, uint32_t n)
{
    ug_shape s = shape_of(k, start, n);
    return 1 + varint_len(s.groups) + index_bytes(s.groups, s.rw) + s.data;
}

uint8_t *ug_put(const uint64_t *k, const uint8_t *start, uint32_t n,
                uint8_t *out)
{
    ug_shape s = shape_of(k, start, n);
    *out++ = (uint8_t)s.rw;
    out = varint_put(out, s.groups);
    bitw index = {out, 0, 0};
    for (uint32_t b = 0; b < n;) {
        uint32_t e = plain_group_end(start, n, b);
        bitw_put(&index, k[b] - k[0], s.rw);
        bitw_put(&index, e - b - 1, CNT_BITS);
        bitw_put(&index, group_width(k, b, e), WIDTH_BITS);
        b = e;
    }
    out = bitw_end(&index);
    for (uint32_t b = 0; b < n;) {
        uint32_t e = plain_group_end(start, n, b);
        unsigned w = group_width(k, b, e);
        bitw data = {out, 0, 0};
        for (uint32_t j = b + 1; j < e; j++)
            bitw_put(&data, k[j] - k[j - 1] - 1, w);
        out = bitw_end(&data);
        b = e;
    }
    return out;
}

uint32_t ug_put_bound(uint32_t groups, unsigned rw)
{
    uint64_t record = REL_MAX_BITS + FIELD_BITS;
    uint64_t widen = ((uint64_t)groups + 2) * (REL_MAX_BITS - rw);
    /* + G's varint one byte longer, + rounding of the index and of the
     * two groups a put may change */
    uint64_t bytes = (2 * record + widen + 7) / 8 + 4;
    return bytes < UINT32_MAX ? (uint32_t)bytes : UINT32_MAX;
}

/* ---- reading ------------------------------------------------------------- */

/* The form's header and index, opened. */
typedef struct ug_sec {
    const uint8_t *index, *data, *end;
    uint32_t groups;
    unsigned rw;
} ug_sec;

typedef struct ug_rec {
    uint64_t rel;
    uint32_t cnt;
    unsigned width;
} ug_rec;

static int open_sec(ug_sec *x, const uint8_t *s, const uint8_t *end,
                    uint32_t n)
{
    if (s >= end || *s > REL_MAX_BITS)
        return -1;
    x->rw = *s++;
    const uint8_t *at = s;
    uint64_t groups;
    if (varint_get(&s, end, &groups) ||
        (size_t)(s - at) != varint_len(groups) || groups == 0 ||
        groups > n)
        return -1;
    x->groups = (uint32_t)groups;
    size_t len = index_bytes(x->groups, x->rw);
    if (len > (size_t)(end - s))
        return -1;
    x->index = s;
    x->data = s + len;
    x->end = end;
    return 0;
}

static ug_rec record_at(const ug_sec *x, uint32_t g)
{
    uint64_t pos = (uint64_t)g * (x->rw + FIELD_BITS);
    ug_rec r;
    r.rel = get_bits(x->index, x->end, pos, x->rw);
    r.cnt = (uint32_t)get_bits(x->index, x->end, pos + x->rw, CNT_BITS) + 1;
    r.width = (unsigned)get_bits(x->index, x->end, pos + x->rw + CNT_BITS,
                                 WIDTH_BITS);
    return r;
}

/* Group g's record, the keys before it and where its numbers lie; -1 where
 * the index claims more keys than n or bytes past the end. */
static int locate(const ug_sec *x, uint32_t n, uint32_t g, ug_rec *r,
                  uint32_t *rank, const uint8_t **data)
{
    uint64_t keys = 0, off = 0;
    for (uint32_t h = 0; h < g; h++) {
        ug_rec before = record_at(x, h);
        keys += before.cnt;
        off += data_bytes(before.cnt, before.width);
    }
    *r = record_at(x, g);
    if (r->width > REL_MAX_BITS || keys + r->cnt > n ||
        off + data_bytes(r->cnt, r->width) > (uint64_t)(x->end - x->data))
        return -1;
    *rank = (uint32_t)keys;
    *data = x->data + off;
    return 0;
}

/* The key after cur by the group's number j (1-based); -1 past 2^64 - 1. */
static inline int next_key(const uint8_t *data, const uint8_t *end,
                           unsigned width, uint32_t j, uint64_t *cur)
{
    uint64_t d = get_bits(data, end, (uint64_t)(j - 1) * width, width);
    if (d >= UINT64_MAX - *cur)
        return -1;
    *cur += d + 1;
    return 0;
}

int ug_search(const uint8_t *s, const uint8_t *end, uint64_t first,
              uint32_t n, uint64_t key, uint32_t *idx, int *found)
{
    *idx = 0;
    *found = 0;
    if (key < first)
        return 0;
    ug_sec x;
    if (open_sec(&x, s, end, n))
        return -1;
    uint64_t want = key - first;
    uint32_t lo = 0, hi = x.groups; /* record lo's rel <= want */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (record_at(&x, mid).rel <= want)
            lo = mid;
        else
            hi = mid;
    }
    ug_rec r;
    uint32_t rank;
    const uint8_t *data;
    if (locate(&x, n, lo, &r, &rank, &data) || r.rel > UINT64_MAX - first)
        return -1;
    uint64_t cur = first + r.rel;
    for (uint32_t j = 0; j < r.cnt; j++) {
        if (j > 0 && next_key(data, end, r.width, j, &cur))
            return -1;
        if (cur >= key) {
            *idx = rank + j;
            *found = cur == key;
            return 0;
        }
    }
    *idx = rank + r.cnt;
    return 0;
}

int ug_key_at(const uint8_t *s, const uint8_t *end, uint64_t first,
              uint32_t n, uint32_t i, uint64_t *key)
{
    ug_sec x;
    if (i >= n || open_sec(&x, s, end, n))
        return -1;
    uint64_t keys = 0, off = 0;
    for (uint32_t g = 0; g < x.groups; g++) {
        ug_rec r = record_at(&x, g);
        if (keys + r.cnt > i) {
            const uint8_t *data = x.data + off;
            if (r.width > REL_MAX_BITS || r.rel > UINT64_MAX - first ||
                off + data_bytes(r.cnt, r.width) >
                    (uint64_t)(x.end - x.data))
                return -1;
            uint64_t cur = first + r.rel;
            for (uint32_t j = 1; j <= i - keys; j++)
                if (next_key(data, end, r.width, j, &cur))
                    return -1;
            *key = cur;
            return 0;
        }
        keys += r.cnt;
        off += data_bytes(r.cnt, r.width);
    }
    return -1;
}

/* ---- decoding ------------------------------------------------------------ */

/* The padding bits of a bit stream of `bits` bits ending at byte end[-1]
 * are zero. */
static int padding_zero(const uint8_t *end, uint64_t bits)
{
    unsigned used = (unsigned)(bits % 8);
    return used == 0 || (end[-1] >> used) == 0;
}

/* Decodes group r of the form into k[at..] and start; *data moves past
 * it.  The group must follow prev (the key before it, if at > 0) and take
 * the smallest width. */
static int decode_group(const ug_sec *x, const ug_rec *r, uint64_t first,
                        uint32_t at, const uint8_t **data, uint64_t *k,
                        uint8_t *start)
{
    size_t len = data_bytes(r->cnt, r->width);
    if (r->width > REL_MAX_BITS || r->rel > UINT64_MAX - first ||
        len > (size_t)(x->end - *data))
        return -1;
    uint64_t cur = first + r->rel;
    if (at > 0 && cur <= k[at - 1])
        return -1;
    unsigned widest = 0;
    k[at] = cur;
    start[at] = 1;
    for (uint32_t j = 1; j < r->cnt; j++) {
        uint64_t d = get_bits(*data, x->end, (uint64_t)(j - 1) * r->width,
                              r->width);
        unsigned bits = bit_len(d);
        widest = bits > widest ? bits : widest;
        if (d >= UINT64_MAX - cur)
            return -1;
        cur += d + 1;
        k[at + j] = cur;
        start[at + j] = 0;
    }
    if (widest != r->width)
        return -1;
    *data += len;
    return len == 0 || padding_zero(*data,
                                    (uint64_t)(r->cnt - 1) * r->width)
               ? 0
               : -1;
}

int ug_decode(const uint8_t *s, const uint8_t *end, uint64_t first,
              uint32_t n, uint64_t *k, uint8_t *start)
{
    ug_sec x;
    if (n < 2 || open_sec(&x, s, end, n))
        return -1;
    uint64_t index_bits = (uint64_t)x.groups * (x.rw + FIELD_BITS);
    if (x.data > x.index && !padding_zero(x.data, index_bits))
        return -1;
    const uint8_t *data = x.data;
    uint32_t at = 0;
    uint64_t last_rel = 0;
    for (uint32_t g = 0; g < x.groups; g++) {
        ug_rec r = record_at(&x, g);
        if ((g == 0) != (r.rel == 0) || (g > 0 && r.rel <= last_rel) ||
            r.cnt > UG_MAX || r.cnt > n - at)
            return -1;
        if (decode_group(&x, &r, first, at, &data, k, start))
            return -1;
        at += r.cnt;
        last_rel = r.rel;
    }
    return at == n && data == end && bit_len(last_rel) == x.rw ? 0 : -1;
}

/* ---- keys put where the form lies ---------------------------------------- */

/* A group of the new form: kept as the old form's bytes (keys NULL), or
 * decoded into a slot of UG_MAX + 1 keys. */
typedef struct ug_out {
    uint64_t first;
    uint32_t cnt;
    unsigned width;      /* its numbers' width, kept up to date */
    const uint8_t *data; /* kept groups' numbers */
    uint64_t *keys;
} ug_out;

typedef struct ug_adding {
    ug_out *g;
    uint32_t groups, groups_cap;
    uint64_t *slots;
    uint32_t slots_used, slots_cap;
    const uint8_t *end; /* of the old form */
} ug_adding;

#define SLOT_KEYS (UG_MAX + 1u)

size_t ug_add_scratch(uint32_t n, uint32_t m)
{
    /* a key adds at most one group (its own, or half of the one it
     * joined) and decodes at most three (the one before it, the one it
     * joins, the new half) */
    size_t groups = (size_t)n + m + 1;
    size_t slots = 3 * (size_t)m + 1;
    return groups * sizeof(ug_out) + slots * SLOT_KEYS * sizeof(uint64_t);
}

static uint64_t out_join_cost(const ug_out *o, unsigned bits)
{
    unsigned w = o->width;
    unsigned joined = bits > w ? bits : w;
    return (uint64_t)o->cnt * joined - (uint64_t)(o->cnt - 1) * w;
}

static uint64_t *take_slot(ug_adding *a)
{
    if (a->slots_used == a->slots_cap)
        return NULL;
    return a->slots + (size_t)a->slots_used++ * SLOT_KEYS;
}

/* Gives o its keys; -1 when the scratch is spent or a number overflows. */
static int decode_out(ug_adding *a, ug_out *o)
{
    if (o->keys)
        return 0;
    uint64_t *k = take_slot(a);
    if (!k)
        return -1;
    k[0] = o->first;
    for (uint32_t j = 1; j < o->cnt; j++) {
        k[j] = k[j - 1];
        if (next_key(o->data, a->end, o->width, j, &k[j]))
            return -1;
    }
    o->keys = k;
    return 0;
}

/* Inserts a group at index at: a decoded one holding key alone. */
static ug_out *new_group(ug_adding *a, uint32_t at, uint64_t key)
{
    uint64_t *k = take_slot(a);
    if (!k || a->groups == a->groups_cap)
        return NULL;
    memmove(a->g + at + 1, a->g + at, (a->groups - at) * sizeof a->g[0]);
    a->groups++;
    k[0] = key;
    a->g[at] = (ug_out){key, 1, 0, NULL, k};
    return &a->g[at];
}

/* Puts key into decoded group o at its place.  At either end the key
 * brings one number more; inside, it cuts one in two, which may narrow
 * the group. */
static void join(ug_out *o, uint64_t key)
{
    uint32_t i = o->cnt;
    while (i > 0 && o->keys[i - 1] > key) {
        o->keys[i] = o->keys[i - 1];
        i--;
    }
    o->keys[i] = key;
    o->cnt++;
    o->first = o->keys[0];
    if (i == 0 || i == o->cnt - 1) {
        unsigned bits = i == 0 ? delta_bits(key, o->keys[1])
                               : delta_bits(o->keys[i - 1], key);
        o->width = bits > o->width ? bits : o->width;
    } else {
        o->width = group_width(o->keys, 0, o->cnt);
    }
}

/* Halves group at when it has passed UG_MAX, as halve_if_full does. */
static int halve(ug_adding *a, uint32_t at)
{
    ug_out *o = &a->g[at];
    if (o->cnt <= UG_MAX)
        return 0;
    uint32_t keep = o->cnt / 2;
    ug_out *h = new_group(a, at + 1, a->g[at].keys[keep]);
    if (!h)
        return -1;
    o = &a->g[at];
    memcpy(h->keys, o->keys + keep, (o->cnt - keep) * sizeof h->keys[0]);
    h->cnt = o->cnt - keep;
    h->width = group_width(h->keys, 0, h->cnt);
    o->cnt = keep;
    o->width = group_width(o->keys, 0, o->cnt);
    return 0;
}

/* One key put: the rule of ug_place on groups.  *at is the group holding
 * the key before it (or 0), moved on as keys come. */
static int add_one(ug_adding *a, uint32_t *at, uint64_t key)
{
    while (*at + 1 < a->groups && a->g[*at + 1].first <= key)
        (*at)++;
    ug_out *o = &a->g[*at];
    uint64_t own = bit_len(a->g[a->groups - 1].first - a->g[0].first) +
                   FIELD_BITS;
    if (key == o->first)
        return -1;
    if (key < o->first) { /* a new lowest key: o is group 0 */
        if (out_join_cost(o, delta_bits(key, o->first)) <= own) {
            if (decode_out(a, o))
                return -1;
            join(o, key);
            return halve(a, *at);
        }
        return new_group(a, 0, key) ? 0 : -1;
    }
    if (decode_out(a, o))
        return -1;
    uint64_t last = o->keys[o->cnt - 1];
    if (key == last)
        return -1;
    int has_right = *at + 1 < a->groups;
    if (key > last) {
        uint64_t left = out_join_cost(o, delta_bits(last, key));
        uint64_t right = UINT64_MAX;
        if (has_right)
            right = out_join_cost(&a->g[*at + 1],
                                  delta_bits(key, a->g[*at + 1].first));
        if (!(left <= right && left <= own)) {
            if (has_right && right <= own)
                (*at)++;
            else
                return new_group(a, *at + 1, key) ? 0 : -1;
        }
    }
    o = &a->g[*at];
    if (decode_out(a, o))
        return -1;
    /* a key inside o, or at its end: duplicates of its keys are refused
     * by the caller's check of the result's order */
    join(o, key);
    return halve(a, *at);
}

/* Reads the old form's records into a->g: -1 unless they are sound. */
static int load_groups(ug_adding *a, const ug_sec *x, uint64_t first,
                       uint32_t n)
{
    uint64_t keys = 0, off = 0, last_rel = 0;
    if (x->groups > a->groups_cap)
        return -1;
    for (uint32_t g = 0; g < x->groups; g++) {
        ug_rec r = record_at(x, g);
        if (r.width > REL_MAX_BITS || (g > 0 && r.rel <= last_rel) ||
            (g == 0) != (r.rel == 0) || r.rel > UINT64_MAX - first ||
            r.cnt > n - keys)
            return -1;
        size_t len = data_bytes(r.cnt, r.width);
        if (off + len > (uint64_t)(x->end - x->data))
            return -1;
        a->g[g] = (ug_out){first + r.rel, r.cnt, r.width, x->data + off,
                           NULL};
        keys += r.cnt;
        off += len;
        last_rel = r.rel;
    }
    a->groups = x->groups;
    return keys == n ? 0 : -1;
}

/* Whether decoded group g's keys increase and follow and precede its
 * neighbours' (kept groups keep the old form's order). */
static int in_order(const ug_adding *a, uint32_t g)
{
    const ug_out *o = &a->g[g];
    for (uint32_t j = 1; j < o->cnt; j++)
        if (o->keys[j] <= o->keys[j - 1])
            return 0;
    if (g > 0 && a->g[g - 1].keys &&
        a->g[g - 1].keys[a->g[g - 1].cnt - 1] >= o->first)
        return 0;
    return g + 1 == a->groups || o->keys[o->cnt - 1] < a->g[g + 1].first;
}

/* The new form's bytes, or 0 where its keys are not strictly increasing
 * (a key put that was there already). */
static size_t added_len(const ug_adding *a, unsigned *rw)
{
    size_t data = 0;
    for (uint32_t g = 0; g < a->groups; g++) {
        const ug_out *o = &a->g[g];
        if (o->keys && !in_order(a, g))
            return 0;
        data += data_bytes(o->cnt, o->width);
    }
    *rw = bit_len(a->g[a->groups - 1].first - a->g[0].first);
    return 1 + varint_len(a->groups) + index_bytes(a->groups, *rw) + data;
}

static void put_added(const ug_adding *a, unsigned rw, uint8_t *out)
{
    *out++ = (uint8_t)rw;
    out = varint_put(out, a->groups);
    bitw index = {out, 0, 0};
    for (uint32_t g = 0; g < a->groups; g++) {
        const ug_out *o = &a->g[g];
        bitw_put(&index, o->first - a->g[0].first, rw);
        bitw_put(&index, o->cnt - 1, CNT_BITS);
        bitw_put(&index, o->width, WIDTH_BITS);
    }
    out = bitw_end(&index);
    for (uint32_t g = 0; g < a->groups; g++) {
        const ug_out *o = &a->g[g];
        if (!o->keys) {
            size_t len = data_bytes(o->cnt, o->width);
            memcpy(out, o->data, len);
            out += len;
            continue;
        }
        unsigned w = o->width;
        bitw data = {out, 0, 0};
        for (uint32_t j = 1; j < o->cnt; j++)
            bitw_put(&data, o->keys[j] - o->keys[j - 1] - 1, w);
        out = bitw_end(&data);
    }
}

int ug_add(const uint8_t *s, const uint8_t *end, uint64_t first, uint32_t n,
           const uint64_t *add, uint32_t m, void *scratch, uint8_t *out,
           size_t cap, uint64_t *first_out, size_t *len)
{
    ug_sec x;
    if (n < 2 || open_sec(&x, s, end, n))
        return -1;
    ug_adding a;
    a.g = scratch;
    a.groups_cap = n + m + 1;
    a.slots = (uint64_t *)(a.g + a.groups_cap);
    a.slots_used = 0;
    a.slots_cap = 3 * m + 1;
    a.end = end;
    if (load_groups(&a, &x, first, n))
        return -1;
    uint32_t at = 0;
    for (uint32_t i = 0; i < m; i++)
        if ((i > 0 && add[i] <= add[i - 1]) || add_one(&a, &at, add[i]))
            return -1;
    unsigned rw = 0;
    size_t need = added_len(&a, &rw);
    if (need == 0)
        return -1;
    if (need > cap)
        return 1;
    put_added(&a, rw, out);
    *first_out = a.g[0].first;
    *len = need;
    return 0;
}

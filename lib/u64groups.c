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
#define BASED 65u           /* a width field BASED + w: a base, width w */
#define BASED_MAX_WIDTH 62u /* so that BASED + w fits WIDTH_BITS */
#define BASE_MAX_BITS 72u   /* a base varint at its longest */

/* The number stored for lo followed by hi, before any base. */
static inline uint64_t number(uint64_t lo, uint64_t hi)
{
    return hi - lo - 1;
}

static inline size_t data_bytes(uint32_t cnt, unsigned width)
{
    return ((size_t)(cnt - 1) * width + 7) / 8;
}

/* ---- how a group stores its numbers --------------------------------------- */

/* A group's keys: how many, and the least and largest of their numbers
 * (lo > hi while it has one key). */
typedef struct ug_nums {
    uint32_t cnt;
    uint64_t lo, hi;
} ug_nums;

static inline ug_nums nums_one(void)
{
    return (ug_nums){1, UINT64_MAX, 0};
}

static inline void nums_add(ug_nums *s, uint64_t x)
{
    s->cnt++;
    s->lo = x < s->lo ? x : s->lo;
    s->hi = x > s->hi ? x : s->hi;
}

/* The numbers' width, and their base (0: none). */
typedef struct ug_form {
    unsigned width;
    uint64_t base;
} ug_form;

/* The one form a group takes: its numbers at the width of the largest,
 * or less the smallest (the base) at the width of their spread, where
 * that takes fewer bits with the base's varint. */
static ug_form form_of(const ug_nums *s)
{
    ug_form f = {0, 0};
    if (s->cnt < 2)
        return f;
    uint64_t nums = s->cnt - 1;
    unsigned plain = bit_len(s->hi), tight = bit_len(s->hi - s->lo);
    f.width = plain;
    if (s->lo > 0 && tight <= BASED_MAX_WIDTH &&
        8 * varint_len(s->lo) + nums * tight < nums * plain) {
        f.width = tight;
        f.base = s->lo;
    }
    return f;
}

static inline uint64_t form_bits(uint32_t cnt, ug_form f)
{
    return (f.base ? 8u * varint_len(f.base) : 0) + (uint64_t)(cnt - 1) * f.width;
}

static inline size_t form_bytes(uint32_t cnt, ug_form f)
{
    return (f.base ? varint_len(f.base) : 0) + data_bytes(cnt, f.width);
}

static inline unsigned width_field(ug_form f)
{
    return f.base ? BASED + f.width : f.width;
}

/* Bits of a group's numbers in its form. */
static inline int64_t nums_bits(const ug_nums *s)
{
    return (int64_t)form_bits(s->cnt, form_of(s));
}

/* Bits a group grows by when the number x joins it (maybe fewer than 0:
 * a shorter base). */
static int64_t join_bits(ug_nums s, uint64_t x)
{
    int64_t before = nums_bits(&s);
    nums_add(&s, x);
    return nums_bits(&s) - before;
}

static ug_nums nums_of_keys(const uint64_t *k, uint32_t b, uint32_t e)
{
    ug_nums s = nums_one();
    for (uint32_t j = b + 1; j < e; j++)
        nums_add(&s, number(k[j - 1], k[j]));
    return s;
}

/* ---- where groups lie ---------------------------------------------------- */

_Static_assert(UG_FRESH == 64, "ug_fresh sets one bit a word");

void ug_open(uint64_t *start, uint32_t n, uint32_t i, uint32_t cnt)
{
    if (cnt != 1) {
        for (uint32_t j = n; j-- > i;)
            ug_mark(start, j + cnt, ug_is_start(start, j));
        return;
    }
    /* one key, a word at a time: each word takes the bit below it */
    uint32_t wi = i >> 6;
    for (uint32_t w = n >> 6; w > wi; w--)
        start[w] = start[w] << 1 | start[w - 1] >> 63;
    uint64_t low = (UINT64_C(1) << (i & 63)) - 1;
    start[wi] = (start[wi] & low) | (start[wi] & ~low) << 1;
}

void ug_close(uint64_t *start, uint32_t n, uint32_t i, uint32_t cnt)
{
    if (cnt != 1) {
        for (uint32_t j = i + cnt; j < n; j++)
            ug_mark(start, j - cnt, ug_is_start(start, j));
        return;
    }
    uint32_t wi = i >> 6, last = (n - 1) >> 6;
    uint64_t low = (UINT64_C(1) << (i & 63)) - 1;
    start[wi] = (start[wi] & low) | (start[wi] >> 1 & ~low);
    for (uint32_t w = wi; w < last; w++) {
        start[w] |= start[w + 1] << 63;
        start[w + 1] >>= 1;
    }
}

void ug_fresh(uint64_t *start, uint32_t n)
{
    for (uint32_t w = 0; w < UG_WORDS(n); w++)
        start[w] = UINT64_C(1); /* UG_FRESH is one word's keys */
}

/* The keys a placement sees: all of k but those of a batch still to be
 * put (fresh ones after the key being placed, whose start flags mean
 * nothing yet). */
typedef struct ug_view {
    const uint64_t *k;
    uint64_t *start;
    uint32_t n;
    const uint64_t *fresh; /* NULL: every key is there */
    uint32_t at;          /* the key being placed */
} ug_view;

/* Of the 64 keys of word w, the bits of those the placement sees: every
 * key but the fresh ones after the key being placed. */
static inline uint64_t seen_word(const ug_view *v, uint32_t w)
{
    if (!v->fresh)
        return ~UINT64_C(0);
    uint32_t aw = v->at >> 6;
    uint64_t upto = w < aw   ? ~UINT64_C(0)
                    : w > aw ? 0
                             : ~UINT64_C(0) >> (63 - (v->at & 63));
    return ~v->fresh[w] | upto;
}

/* The first key from j on that is seen and, with bits, begins a group;
 * n if none.  A word at a time: a batch sees most keys but skips runs of
 * fresh ones. */
static uint32_t next_set(const ug_view *v, const uint64_t *bits, uint32_t j)
{
    while (j < v->n) {
        uint32_t w = j >> 6;
        uint64_t word = seen_word(v, w) & (bits ? bits[w] : ~UINT64_C(0));
        word &= ~UINT64_C(0) << (j & 63);
        if (word) {
            uint32_t at = (w << 6) + (uint32_t)__builtin_ctzll(word);
            return at < v->n ? at : v->n;
        }
        j = (w + 1) << 6;
    }
    return v->n;
}

/* The last key at or before j that is seen and, with bits, begins a
 * group (key 0 is seen and begins one). */
static uint32_t prev_set(const ug_view *v, const uint64_t *bits, uint32_t j)
{
    for (;;) {
        uint32_t w = j >> 6;
        uint64_t word = seen_word(v, w) & (bits ? bits[w] : ~UINT64_C(0));
        word &= ~UINT64_C(0) >> (63 - (j & 63));
        if (word)
            return (w << 6) + 63 - (uint32_t)__builtin_clzll(word);
        j = (w << 6) - 1;
    }
}

/* The set bits of x (a popcount without the instruction's target
 * flag, which the build does not assume). */
static inline uint32_t ones(uint64_t x)
{
    x -= (x >> 1) & UINT64_C(0x5555555555555555);
    x = (x & UINT64_C(0x3333333333333333)) +
        ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
    return (uint32_t)((x * UINT64_C(0x0101010101010101)) >> 56);
}

/* How many keys of [b, e) are seen. */
static uint32_t count_seen(const ug_view *v, uint32_t b, uint32_t e)
{
    uint32_t cnt = 0;
    for (uint32_t w = b >> 6; b < e; w++) {
        uint64_t word = seen_word(v, w) & ~UINT64_C(0) << (b & 63);
        uint32_t next = (w + 1) << 6;
        if (e < next)
            word &= ~UINT64_C(0) >> (64 - (e & 63));
        cnt += ones(word);
        b = next;
    }
    return cnt;
}

/* The next key seen after j, or n. */
static uint32_t next_seen(const ug_view *v, uint32_t j)
{
    return next_set(v, NULL, j + 1);
}

/* The first key of the group holding key i (key 0 always begins one).
 * The keys not seen yet have their start bits clear, so the bits alone
 * tell where groups begin. */
static uint32_t group_begin(const ug_view *v, uint32_t i)
{
    for (uint32_t w = i >> 6;; w--) {
        uint64_t word = v->start[w];
        if (w == i >> 6)
            word &= ~UINT64_C(0) >> (63 - (i & 63));
        if (word)
            return (w << 6) + 63 - (uint32_t)__builtin_clzll(word);
    }
}

/* Where the next group begins after the one that begins at b, or n. */
static uint32_t group_end(const ug_view *v, uint32_t b)
{
    for (uint32_t j = b + 1; j < v->n;) {
        uint32_t w = j >> 6;
        uint64_t word = v->start[w] & ~UINT64_C(0) << (j & 63);
        if (word) {
            uint32_t e = (w << 6) + (uint32_t)__builtin_ctzll(word);
            return e < v->n ? e : v->n;
        }
        j = (w + 1) << 6;
    }
    return v->n;
}

/* The numbers of the keys seen in [b, e). */
static ug_nums seen_nums(const ug_view *v, uint32_t b, uint32_t e)
{
    if (count_seen(v, b, e) == e - b) /* mostly: no key skipped */
        return nums_of_keys(v->k, b, e);
    ug_nums s = nums_one();
    for (uint32_t prev = b, j = next_seen(v, b); j < e;
         prev = j, j = next_seen(v, j))
        nums_add(&s, number(v->k[prev], v->k[j]));
    return s;
}

/* What a record costs before key i is put: rw + the fields. */
static int64_t record_cost(const ug_view *v, uint32_t i)
{
    uint32_t last = prev_set(v, NULL, v->n - 1);
    last = group_begin(v, last == i ? i - 1 : last);
    uint64_t key0 = v->k[i == 0 ? next_seen(v, 0) : 0];
    return bit_len(v->k[last] - key0) + FIELD_BITS;
}

/* Halves the group of the keys seen in [b, e) when it has passed UG_MAX. */
static void halve_if_full(const ug_view *v, uint32_t b, uint32_t e)
{
    if (e - b <= UG_MAX)
        return;
    uint32_t cnt = count_seen(v, b, e);
    if (cnt <= UG_MAX)
        return;
    uint32_t half = b;
    for (uint32_t t = 0; t < cnt / 2; t++)
        half = next_seen(v, half);
    ug_mark(v->start, half, 1);
}

/* Whether keys [0, i), all seen, lie in fresh groups: a group begins at
 * every 64th key and nowhere else. */
static int fresh_before(const uint64_t *start, uint32_t i)
{
    for (uint32_t w = 0; w < (i >> 6); w++)
        if (start[w] != 1)
            return 0;
    uint32_t rest = i & 63;
    return rest == 0 ||
           (start[i >> 6] & (~UINT64_C(0) >> (64 - rest))) == 1;
}

static void place(const ug_view *v)
{
    uint32_t i = v->at, right_at = next_seen(v, i);
    int has_left = i > 0, has_right = right_at < v->n;
    uint64_t *start = v->start;
    if (!has_right && (!has_left || fresh_before(start, i))) {
        ug_mark(start, i, i % UG_FRESH == 0); /* fresh groups stay so */
        return;
    }
    if (has_left && has_right && !ug_is_start(start, right_at)) {
        ug_mark(start, i, 0); /* among the keys of one group: it joins */
        uint32_t b = group_begin(v, i - 1);
        halve_if_full(v, b, group_end(v, b));
        return;
    }
    int64_t left = INT64_MAX, right = INT64_MAX;
    if (has_left) {
        uint32_t b = group_begin(v, i - 1);
        left = join_bits(seen_nums(v, b, i),
                         number(v->k[i - 1], v->k[i]));
    }
    if (has_right)
        right = join_bits(seen_nums(v, right_at, group_end(v, right_at)),
                          number(v->k[i], v->k[right_at]));
    int64_t own = record_cost(v, i);
    if (has_left && left <= right && left <= own) {
        ug_mark(start, i, 0);
    } else if (has_right && right <= own) {
        ug_mark(start, i, 1);
        ug_mark(start, right_at, 0);
    } else {
        ug_mark(start, i, 1);
    }
    uint32_t b = group_begin(v, i);
    halve_if_full(v, b, group_end(v, b));
}

void ug_place(const uint64_t *k, uint64_t *start, uint32_t n, uint32_t i)
{
    ug_view v = {k, start, n, NULL, i};
    place(&v);
}

void ug_place_batch(const uint64_t *k, uint64_t *start, uint32_t n,
                    const uint64_t *fresh)
{
    ug_view v = {k, start, n, fresh, 0};
    for (uint32_t w = 0; w < UG_WORDS(n); w++) /* a word of keys at a time */
        for (uint64_t word = fresh[w]; word; word &= word - 1) {
            v.at = (w << 6) + (uint32_t)__builtin_ctzll(word);
            if (v.at >= n)
                return;
            place(&v);
        }
}

void ug_unplace(uint64_t *start, uint32_t n, uint32_t i)
{
    if (ug_is_start(start, i) && i + 1 < n && !ug_is_start(start, i + 1))
        ug_mark(start, i + 1, 1);
}

int ug_grouping_ok(const uint64_t *start, uint32_t n)
{
    if (n == 0 || !ug_is_start(start, 0))
        return 0;
    uint32_t run = 0;
    for (uint32_t i = 0; i < n; i++) {
        run = ug_is_start(start, i) ? 1 : run + 1;
        if (run > UG_MAX)
            return 0;
    }
    return 1;
}

/* ---- writing ------------------------------------------------------------- */

/* One past the last key of the group that begins at b (start NULL:
 * fresh groups). */
static uint32_t plain_group_end(const uint64_t *start, uint32_t n,
                                uint32_t b)
{
    if (!start)
        return n - b > UG_FRESH ? b + UG_FRESH : n;
    for (uint32_t j = b + 1; j < n;) { /* a word at a time */
        uint32_t w = j >> 6;
        uint64_t word = start[w] & ~UINT64_C(0) << (j & 63);
        if (word) {
            uint32_t e = (w << 6) + (uint32_t)__builtin_ctzll(word);
            return e < n ? e : n;
        }
        j = (w + 1) << 6;
    }
    return n;
}

static size_t index_bytes(uint32_t groups, unsigned rw)
{
    return ((uint64_t)groups * (rw + FIELD_BITS) + 7) / 8;
}

/* The groups and rw of the form: from the flags and one key. */
static uint32_t count_groups(const uint64_t *k, const uint64_t *start,
                             uint32_t n, unsigned *rw)
{
    uint32_t groups = 0, last = 0;
    for (uint32_t b = 0; b < n; b = plain_group_end(start, n, b)) {
        groups++;
        last = b;
    }
    *rw = bit_len(k[last] - k[0]);
    return groups;
}

/* Bits a key put among the keys of a group of cnt keys in form f may add.
 * Its two numbers are below the one they replace, so no wider than the
 * largest, hi: with no base, a number's bits.  With a base they may fall
 * below it, and the group then takes another base or none: at most every
 * number at bit_len(hi) <= max(bit_len(base), width) + 1 bits. */
static uint64_t rebase_bits(uint32_t cnt, ug_form f)
{
    if (!f.base)
        return 0;
    unsigned b = bit_len(f.base), top = (b > f.width ? b : f.width) + 1;
    return (uint64_t)cnt * (top - f.width) + f.width;
}

static void shape_add(ug_shape *sh, uint32_t cnt, ug_form f)
{
    uint64_t bytes = (rebase_bits(cnt, f) + 7) / 8;
    if (bytes > sh->rebase)
        sh->rebase = bytes < UINT32_MAX ? (uint32_t)bytes : UINT32_MAX;
}

size_t ug_len(const uint64_t *k, const uint64_t *start, uint32_t n)
{
    ug_shape sh;
    return ug_measure(k, start, n, &sh);
}

size_t ug_measure(const uint64_t *k, const uint64_t *start, uint32_t n,
                  ug_shape *sh)
{
    sh->groups = count_groups(k, start, n, &sh->rw);
    sh->rebase = 0;
    size_t data = 0;
    for (uint32_t b = 0; b < n;) {
        uint32_t e = plain_group_end(start, n, b);
        ug_nums s = nums_of_keys(k, b, e);
        ug_form f = form_of(&s);
        data += form_bytes(s.cnt, f);
        shape_add(sh, s.cnt, f);
        b = e;
    }
    return 1 + varint_len(sh->groups) + index_bytes(sh->groups, sh->rw) +
           data;
}

/* Writes a group's base (if any) and numbers at out; the byte after, or
 * NULL where its keys do not increase (out's bytes then mean nothing). */
static uint8_t *put_numbers(const uint64_t *k, uint32_t cnt, ug_form f,
                            uint8_t *out)
{
    if (f.base)
        out = varint_put(out, f.base);
    bitw data = {out, 0, 0};
    int increasing = 1;
    for (uint32_t j = 1; j < cnt; j++) {
        increasing &= k[j] > k[j - 1];
        bitw_put(&data, number(k[j - 1], k[j]) - f.base, f.width);
    }
    uint8_t *end = bitw_end(&data);
    return increasing ? end : NULL;
}

uint8_t *ug_put(const uint64_t *k, const uint64_t *start, uint32_t n,
                uint8_t *out)
{
    unsigned rw;
    uint32_t groups = count_groups(k, start, n, &rw);
    *out++ = (uint8_t)rw;
    out = varint_put(out, groups);
    bitw index = {out, 0, 0};
    uint8_t *data = out + index_bytes(groups, rw);
    for (uint32_t b = 0; b < n && data;) {
        uint32_t e = plain_group_end(start, n, b);
        ug_nums s = nums_of_keys(k, b, e);
        ug_form f = form_of(&s);
        bitw_put(&index, k[b] - k[0], rw);
        bitw_put(&index, e - b - 1, CNT_BITS);
        bitw_put(&index, width_field(f), WIDTH_BITS);
        data = b > 0 && k[b] <= k[b - 1] ? NULL
                                          : put_numbers(k + b, e - b, f, data);
        b = e;
    }
    bitw_end(&index);
    return data;
}

size_t ug_even_len(uint32_t n, uint64_t step, ug_shape *sh)
{
    uint32_t g = (n + UG_FRESH - 1) / UG_FRESH, last = n - (g - 1) * UG_FRESH;
    ug_nums full = {UG_FRESH, step - 1, step - 1};
    ug_nums tail = {last, step - 1, step - 1};
    size_t data = (size_t)(g - 1) * form_bytes(UG_FRESH, form_of(&full)) +
                  form_bytes(last, form_of(&tail));
    sh->groups = g;
    sh->rw = bit_len((uint64_t)(g - 1) * UG_FRESH * step);
    sh->rebase = 0;
    if (g > 1)
        shape_add(sh, UG_FRESH, form_of(&full));
    shape_add(sh, last, form_of(&tail));
    return 1 + varint_len(g) + index_bytes(g, sh->rw) + data;
}

uint32_t ug_put_bound(const ug_shape *sh)
{
    uint64_t record = REL_MAX_BITS + FIELD_BITS;
    uint64_t widen = ((uint64_t)sh->groups + 2) * (REL_MAX_BITS - sh->rw);
    /* a record (joining a neighbour costs no more), one more and a base
     * written twice for a halved group, every rel widened; + G's varint
     * one byte longer, + rounding of the index and of the two groups a
     * put may change */
    uint64_t bits = 2 * record + BASE_MAX_BITS + widen;
    uint64_t bytes = (bits + 7) / 8 + 4 + (uint64_t)sh->rebase;
    return bytes < UINT32_MAX ? (uint32_t)bytes : UINT32_MAX;
}

/* ---- reading ------------------------------------------------------------- */

/* The form's header and index, opened. */
typedef struct ug_sec {
    const uint8_t *index, *data, *end;
    uint32_t groups;
    unsigned rw;
} ug_sec;

/* A group's record, and where its numbers lie once located. */
typedef struct ug_rec {
    uint64_t rel;
    uint32_t cnt;
    unsigned field;      /* the width field: width, or BASED + width */
    ug_form form;        /* located: its width and base */
    const uint8_t *at;   /* located: its bytes, base first */
    const uint8_t *nums; /* located: its numbers' bit stream */
    size_t len;          /* located: its bytes */
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

/* Reads group g's record into r's rel, cnt and field (r's other fields
 * are left as they were: a search reads a record into the ug_rec it
 * then locates, not into a copy). */
static inline void record_read(const ug_sec *x, uint32_t g, ug_rec *r)
{
    unsigned stride = x->rw + FIELD_BITS;
    uint64_t pos = (uint64_t)g * stride;
    if (stride <= 57) { /* the whole record in one word's read */
        uint64_t v = get_bits(x->index, x->end, pos, stride);
        r->rel = v & ((UINT64_C(1) << x->rw) - 1);
        r->cnt = (uint32_t)(v >> x->rw & ((1u << CNT_BITS) - 1)) + 1;
        r->field = (unsigned)(v >> (x->rw + CNT_BITS));
        return;
    }
    /* a wide rel (random keys: a leaf spans 2^49 and more) on its own,
     * then the count and width field in one read */
    r->rel = get_bits(x->index, x->end, pos, x->rw);
    uint64_t v = get_bits(x->index, x->end, pos + x->rw, FIELD_BITS);
    r->cnt = (uint32_t)(v & ((1u << CNT_BITS) - 1)) + 1;
    r->field = (unsigned)(v >> CNT_BITS);
}

static ug_rec record_at(const ug_sec *x, uint32_t g)
{
    ug_rec r;
    record_read(x, g, &r);
    return r;
}

/* Group g's rel alone. */
static inline uint64_t record_rel(const ug_sec *x, uint32_t g)
{
    return get_bits(x->index, x->end, (uint64_t)g * (x->rw + FIELD_BITS),
                    x->rw);
}

/* Reads where record r's group lies, its data starting at data: its base
 * and the bytes it takes.  -1 for a width past 64, a base that is 0 or
 * not the shortest varint, or bytes past the end. */
static int locate_at(const ug_sec *x, ug_rec *r, const uint8_t *data)
{
    const uint8_t *p = data;
    r->form = (ug_form){r->field, 0};
    if (r->field >= BASED) {
        r->form.width = r->field - BASED;
        if (r->form.width > BASED_MAX_WIDTH ||
            varint_get(&p, x->end, &r->form.base) || r->form.base == 0 ||
            (size_t)(p - data) != varint_len(r->form.base))
            return -1;
    } else if (r->field > REL_MAX_BITS) {
        return -1;
    }
    size_t packed = data_bytes(r->cnt, r->form.width);
    if (packed > (size_t)(x->end - p))
        return -1;
    r->at = data;
    r->nums = p;
    r->len = (size_t)(p - data) + packed;
    return 0;
}

/* locate_key's way through groups with a base: a group's bytes follow
 * from those before it, since a base's varint has its own length. */
static int locate_walk(const ug_sec *x, uint32_t n, uint64_t want, ug_rec *r,
                       uint32_t *rank)
{
    uint64_t keys = 0;
    const uint8_t *data = x->data;
    record_read(x, 0, r);
    for (uint32_t h = 0;; h++) {
        if (locate_at(x, r, data) || keys + r->cnt > n)
            return -1;
        *rank = (uint32_t)keys;
        if (h + 1 == x->groups || record_rel(x, h + 1) > want)
            return 0;
        keys += r->cnt;
        data += r->len;
        record_read(x, h + 1, r);
    }
}

/* The group that would hold a key `want` above key 0 (the last whose rel
 * is not above it), located, and the keys before it; -1 where the index
 * claims more keys than n or bytes past the end.  Without a base among
 * the groups before it, a group's bytes follow from its record alone, so
 * the records before it are summed, none of them located (a twentieth
 * of a cached random get's instructions). */
static int locate_key(const ug_sec *x, uint32_t n, uint64_t want, ug_rec *r,
                      uint32_t *rank)
{
    uint64_t keys = 0;
    size_t off = 0;
    int based = 0;
    ug_rec next;
    record_read(x, 0, r);
    for (uint32_t h = 1; h < x->groups; h++) {
        record_read(x, h, &next);
        if (next.rel > want)
            break;
        keys += r->cnt;
        off += data_bytes(r->cnt, r->field); /* < 2 KiB a group */
        based |= r->field > REL_MAX_BITS;
        r->rel = next.rel;
        r->cnt = next.cnt;
        r->field = next.field;
    }
    if (based)
        return locate_walk(x, n, want, r, rank);
    if (off > (size_t)(x->end - x->data) ||
        locate_at(x, r, x->data + off) || keys + r->cnt > n)
        return -1;
    *rank = (uint32_t)keys;
    return 0;
}

/* The key after cur by the group's number j (1-based); -1 past 2^64 - 1. */
static inline int next_key(const ug_rec *r, const uint8_t *end, uint32_t j,
                           uint64_t *cur)
{
    uint64_t d = get_bits(r->nums, end, (uint64_t)(j - 1) * r->form.width,
                          r->form.width);
    if (d > UINT64_MAX - r->form.base ||
        d + r->form.base >= UINT64_MAX - *cur)
        return -1;
    *cur += d + r->form.base + 1;
    return 0;
}

/* Whether located group r's keys after k0 can be read without a check a
 * key: its bit stream and 8 bytes more lie before end, and no key can
 * pass 2^64 - 1. */
static int unpack_unchecked(const ug_rec *r, const uint8_t *end, uint64_t k0)
{
    size_t packed = data_bytes(r->cnt, r->form.width);
    if (r->form.width > 56 || (size_t)(end - r->nums) < packed + 8)
        return 0;
    uint64_t most = (UINT64_C(1) << r->form.width) + r->form.base, all;
    return most >= r->form.base &&
           !__builtin_mul_overflow(most, (uint64_t)(r->cnt - 1), &all) &&
           all <= UINT64_MAX - k0;
}

/* The width-bit number at bit pos of an unchecked group's numbers (mask
 * holds width ones). */
static inline uint64_t number_at(const uint8_t *nums, uint64_t pos,
                                 uint64_t mask)
{
    return (get_le64(nums + (pos >> 3)) >> (pos & 7)) & mask;
}

/* Decodes located group r's keys after key 0, which k[0] holds, into
 * k[1..cnt), and their numbers into *s (from nums_one); -1 past
 * 2^64 - 1.  Decoding is most of a write's reading, so a group that
 * allows it is read a word a key, unchecked (unpack_unchecked). */
static int unpack_keys(const ug_rec *r, const uint8_t *end, uint64_t *k,
                       ug_nums *s)
{
    uint64_t cur = k[0];
    if (!unpack_unchecked(r, end, cur)) {
        for (uint32_t j = 1; j < r->cnt; j++) {
            uint64_t prev = cur;
            if (next_key(r, end, j, &cur))
                return -1;
            nums_add(s, number(prev, cur));
            k[j] = cur;
        }
        return 0;
    }
    unsigned width = r->form.width;
    uint64_t mask = (UINT64_C(1) << width) - 1, base = r->form.base, pos = 0;
    for (uint32_t j = 1; j < r->cnt; j++, pos += width) {
        uint64_t x = number_at(r->nums, pos, mask) + base;
        nums_add(s, x);
        cur += x + 1;
        k[j] = cur;
    }
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
    ug_rec r;
    uint32_t rank;
    if (locate_key(&x, n, key - first, &r, &rank) ||
        r.rel > UINT64_MAX - first)
        return -1;
    uint64_t cur = first + r.rel;
    uint32_t j = 0;
    if (cur < key && unpack_unchecked(&r, end, cur)) {
        unsigned width = r.form.width;
        uint64_t mask = (UINT64_C(1) << width) - 1, pos = 0;
        while (cur < key && ++j < r.cnt) {
            cur += number_at(r.nums, pos, mask) + r.form.base + 1;
            pos += width;
        }
    } else {
        while (cur < key && ++j < r.cnt)
            if (next_key(&r, end, j, &cur))
                return -1;
    }
    *idx = rank + j;
    *found = j < r.cnt && cur == key;
    return 0;
}

int ug_key_at(const uint8_t *s, const uint8_t *end, uint64_t first,
              uint32_t n, uint32_t i, uint64_t *key)
{
    ug_sec x;
    if (i >= n || open_sec(&x, s, end, n))
        return -1;
    uint64_t keys = 0;
    const uint8_t *data = x.data;
    for (uint32_t g = 0; g < x.groups; g++) {
        ug_rec r = record_at(&x, g);
        if (locate_at(&x, &r, data))
            return -1;
        if (keys + r.cnt > i) {
            if (r.rel > UINT64_MAX - first)
                return -1;
            uint64_t cur = first + r.rel;
            for (uint32_t j = 1; j <= i - keys; j++)
                if (next_key(&r, end, j, &cur))
                    return -1;
            *key = cur;
            return 0;
        }
        keys += r.cnt;
        data += r.len;
    }
    return -1;
}

int ug_even(const uint8_t *s, const uint8_t *end, uint32_t n,
            uint64_t *step)
{
    ug_sec x;
    if (n < 2 || open_sec(&x, s, end, n))
        return 0;
    uint64_t d = 0; /* the step, once a group or a rel shows it */
    uint32_t at = 0;
    const uint8_t *data = x.data;
    for (uint32_t g = 0; g < x.groups; g++) {
        ug_rec r = record_at(&x, g);
        if (locate_at(&x, &r, data))
            return 0;
        data += r.len;
        if (g > 0) { /* the rel of a group starting at key `at` */
            if (d == 0 && r.rel % at == 0)
                d = r.rel / at;
            if (d == 0 || r.rel / at != d || r.rel % at != 0)
                return 0;
        }
        if (r.cnt > 1) { /* its numbers all the same */
            uint64_t v = get_bits(r.nums, x.end, 0, r.form.width);
            for (uint32_t j = 2; j < r.cnt && r.form.width; j++)
                if (get_bits(r.nums, x.end, (uint64_t)(j - 1) * r.form.width,
                             r.form.width) != v)
                    return 0;
            if (v > UINT64_MAX - 1 - r.form.base)
                return 0;
            uint64_t inner = v + r.form.base + 1;
            if (d == 0)
                d = inner;
            if (inner != d)
                return 0;
        }
        at += r.cnt;
    }
    *step = d;
    return d != 0 && at == n;
}

int ug_shape_of(const uint8_t *s, const uint8_t *end, uint32_t n,
                ug_shape *sh)
{
    ug_sec x;
    if (open_sec(&x, s, end, n))
        return -1;
    sh->groups = x.groups;
    sh->rw = x.rw;
    sh->rebase = 0;
    const uint8_t *data = x.data;
    for (uint32_t g = 0; g < x.groups; g++) {
        ug_rec r = record_at(&x, g);
        if (locate_at(&x, &r, data))
            return -1;
        shape_add(sh, r.cnt, r.form);
        data += r.len;
    }
    return 0;
}

/* Puts w at group g, whose bytes begin at data, key 0 of it. */
static int walk_to(ug_walk *w, uint32_t g, const uint8_t *data)
{
    ug_sec x = {w->index, w->data, w->end, w->groups, w->rw};
    ug_rec r = record_at(&x, g);
    if (locate_at(&x, &r, data) || r.rel > UINT64_MAX - w->first ||
        (uint64_t)w->rank + r.cnt > w->n)
        return -1;
    w->g = g;
    w->cnt = r.cnt;
    w->j = 0;
    w->cur = w->first + r.rel;
    w->width = r.form.width;
    w->base = r.form.base;
    w->nums = r.nums;
    w->len = r.len;
    w->at = data;
    w->unchecked = unpack_unchecked(&r, w->end, w->cur);
    return 0;
}

int ug_walk_open(ug_walk *w, const uint8_t *s, const uint8_t *end,
                 uint64_t first, uint32_t n)
{
    ug_sec x;
    if (n < 2 || open_sec(&x, s, end, n))
        return -1;
    w->index = x.index;
    w->data = x.data;
    w->end = x.end;
    w->groups = x.groups;
    w->rw = x.rw;
    w->first = first;
    w->n = n;
    w->rank = 0;
    return walk_to(w, 0, x.data);
}

int ug_walk_search(ug_walk *w, uint64_t key, uint32_t *idx, int *found)
{
    ug_sec x = {w->index, w->data, w->end, w->groups, w->rw};
    /* the groups whose first key is not above key */
    while (w->cur < key && w->g + 1 < w->groups &&
           w->first + record_at(&x, w->g + 1).rel <= key) {
        w->rank += w->cnt;
        if (walk_to(w, w->g + 1, w->at + w->len))
            return -1;
    }
    ug_rec r = {0, w->cnt, 0, {w->width, w->base}, w->at, w->nums, w->len};
    if (w->unchecked) {
        uint64_t mask = (UINT64_C(1) << w->width) - 1;
        while (w->cur < key && w->j + 1 < w->cnt) {
            uint64_t pos = (uint64_t)w->j * w->width;
            w->cur += number_at(w->nums, pos, mask) + w->base + 1;
            w->j++;
        }
    }
    while (w->cur < key && w->j + 1 < w->cnt) {
        if (next_key(&r, w->end, w->j + 1, &w->cur))
            return -1;
        w->j++;
    }
    if (w->cur >= key) {
        *idx = w->rank + w->j;
        *found = w->cur == key;
        return 0;
    }
    /* past this group: the next one's first key is above key */
    *idx = w->rank + w->cnt;
    *found = 0;
    if (w->g + 1 < w->groups) {
        w->rank += w->cnt;
        return walk_to(w, w->g + 1, w->at + w->len);
    }
    return 0;
}

/* ---- decoding ------------------------------------------------------------ */

/* The padding bits of a bit stream of `bits` bits ending at byte end[-1]
 * are zero. */
static int padding_zero(const uint8_t *end, uint64_t bits)
{
    unsigned used = (unsigned)(bits % 8);
    return used == 0 || (end[-1] >> used) == 0;
}

/* Decodes group r of the form, whose data starts at *data, into k[at..]
 * and start; *data moves past it.  The group must follow the key before
 * it (if at > 0) and take the one form its numbers have (form_of). */
static int decode_group(const ug_sec *x, ug_rec *r, uint64_t first,
                        uint32_t at, const uint8_t **data, uint64_t *k,
                        uint64_t *start)
{
    if (locate_at(x, r, *data) || r->rel > UINT64_MAX - first)
        return -1;
    uint64_t cur = first + r->rel;
    if (at > 0 && cur <= k[at - 1])
        return -1;
    ug_nums s = nums_one();
    k[at] = cur;
    ug_mark(start, at, 1); /* the others were cleared */
    if (unpack_keys(r, x->end, k + at, &s))
        return -1;
    ug_form f = form_of(&s);
    if (f.width != r->form.width || f.base != r->form.base)
        return -1;
    *data += r->len;
    size_t packed = data_bytes(r->cnt, f.width);
    return packed == 0 ||
                   padding_zero(*data, (uint64_t)(r->cnt - 1) * f.width)
               ? 0
               : -1;
}

int ug_decode(const uint8_t *s, const uint8_t *end, uint64_t first,
              uint32_t n, uint64_t *k, uint64_t *start)
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
    memset(start, 0, UG_WORDS(n) * sizeof *start);
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
 * decoded into a block of UG_MAX + 1 keys. */
typedef struct ug_out {
    uint64_t first;
    uint32_t cnt;
    ug_rec rec;     /* kept: the old form's record, located */
    uint64_t *keys; /* decoded */
    ug_nums nums;   /* decoded: its numbers, kept up to date */
} ug_out;

typedef struct ug_adding {
    ug_out *g;
    uint32_t groups, groups_cap;
    uint64_t *blocks;
    uint32_t blocks_used, blocks_cap;
    const uint8_t *end; /* of the old form */
} ug_adding;

#define BLOCK_KEYS (UG_MAX + 1u)

size_t ug_add_scratch(uint32_t n, uint32_t m)
{
    /* a key adds at most two groups (its own and the keys after it in the
     * group it fell into, or half of the one it joined) and decodes at
     * most three (the two it chooses between and the one it adds, or the
     * one it falls into and the two it adds) */
    size_t groups = (size_t)n + 2 * (size_t)m + 1;
    size_t blocks = 3 * (size_t)m + 1;
    return groups * sizeof(ug_out) + blocks * BLOCK_KEYS * sizeof(uint64_t);
}

static uint64_t *take_block(ug_adding *a)
{
    if (a->blocks_used == a->blocks_cap)
        return NULL;
    return a->blocks + (size_t)a->blocks_used++ * BLOCK_KEYS;
}

/* Gives o its keys; -1 when the scratch is spent or a number overflows. */
static int decode_out(ug_adding *a, ug_out *o)
{
    if (o->keys)
        return 0;
    uint64_t *k = take_block(a);
    if (!k)
        return -1;
    k[0] = o->first;
    o->nums = nums_one();
    if (unpack_keys(&o->rec, a->end, k, &o->nums))
        return -1;
    o->keys = k;
    return 0;
}

/* Inserts a group at index at: a decoded one holding the cnt keys at k. */
static ug_out *new_group(ug_adding *a, uint32_t at, const uint64_t *keys,
                         uint32_t cnt)
{
    uint64_t *k = take_block(a);
    if (!k || a->groups == a->groups_cap)
        return NULL;
    memmove(a->g + at + 1, a->g + at, (a->groups - at) * sizeof a->g[0]);
    a->groups++;
    memcpy(k, keys, cnt * sizeof k[0]);
    a->g[at] = (ug_out){k[0], cnt, {0}, k, nums_of_keys(k, 0, cnt)};
    return &a->g[at];
}

/* Puts key into decoded group o at index i of its keys. */
static void join_at(ug_out *o, uint32_t i, uint64_t key)
{
    /* a number cut in two leaves two below it: only when it was the
     * largest can the largest fall, and only then are they all read */
    int cut_largest = i > 0 && i < o->cnt &&
                      number(o->keys[i - 1], o->keys[i]) == o->nums.hi;
    memmove(o->keys + i + 1, o->keys + i, (o->cnt - i) * sizeof o->keys[0]);
    o->keys[i] = key;
    o->cnt++;
    o->first = o->keys[0];
    if (cut_largest) {
        o->nums = nums_of_keys(o->keys, 0, o->cnt);
    } else if (i > 0 && i < o->cnt - 1) {
        o->nums.cnt++; /* the smaller of the two parts may be the least */
        uint64_t a = number(o->keys[i - 1], key);
        uint64_t b = number(key, o->keys[i + 1]);
        uint64_t low = a < b ? a : b;
        o->nums.lo = low < o->nums.lo ? low : o->nums.lo;
    } else {
        nums_add(&o->nums, i == 0 ? number(key, o->keys[1])
                                  : number(o->keys[i - 1], key));
    }
}

/* Where key goes among decoded group o's keys: the first above it. */
static uint32_t place_in(const ug_out *o, uint64_t key)
{
    uint32_t lo = 0, n = o->cnt;
    while (n > 0) {
        uint32_t half = n / 2;
        if (o->keys[lo + half] <= key) {
            lo += half + 1;
            n -= half + 1;
        } else {
            n = half;
        }
    }
    return lo;
}

/* Halves group at when it has passed UG_MAX, as halve_if_full does. */
static int halve(ug_adding *a, uint32_t at)
{
    ug_out *o = &a->g[at];
    if (o->cnt <= UG_MAX)
        return 0;
    uint32_t keep = o->cnt / 2;
    if (!new_group(a, at + 1, o->keys + keep, o->cnt - keep))
        return -1;
    o = &a->g[at];
    o->cnt = keep;
    o->nums = nums_of_keys(o->keys, 0, keep);
    return 0;
}

/* Whether every group but the last holds UG_FRESH keys and the last no
 * more: fresh groups. */
static int groups_fresh(const ug_adding *a)
{
    for (uint32_t g = 0; g + 1 < a->groups; g++)
        if (a->g[g].cnt != UG_FRESH)
            return 0;
    return a->g[a->groups - 1].cnt <= UG_FRESH;
}

/* One key put: the rule of ug_place on groups.  *at is the group holding
 * the key before it (or 0), moved on as keys come.  0: put; 1: the form
 * holds it already; -1: scratch spent or a number past 2^64 - 1. */
static int add_one(ug_adding *a, uint32_t *at, uint64_t key)
{
    while (*at + 1 < a->groups && a->g[*at + 1].first <= key)
        (*at)++;
    ug_out *o = &a->g[*at];
    int64_t own = bit_len(a->g[a->groups - 1].first - a->g[0].first) +
                  FIELD_BITS;
    if (key == o->first)
        return 1;
    if (decode_out(a, o))
        return -1;
    if (key < o->first) { /* a new lowest key: o is group 0 */
        if (join_bits(o->nums, number(key, o->first)) <= own) {
            join_at(o, 0, key);
            return halve(a, *at);
        }
        return new_group(a, 0, &key, 1) ? 0 : -1;
    }
    uint32_t i = place_in(o, key);
    if (o->keys[i - 1] == key)
        return 1;
    if (i < o->cnt) { /* among o's keys: it joins */
        join_at(o, i, key);
        return halve(a, *at);
    }
    if (*at + 1 == a->groups && groups_fresh(a)) { /* as fresh_before */
        if (o->cnt < UG_FRESH) {
            join_at(o, o->cnt, key);
            return 0;
        }
        (*at)++;
        return new_group(a, *at, &key, 1) ? 0 : -1;
    }
    int64_t left = join_bits(o->nums, number(o->keys[o->cnt - 1], key));
    int64_t right = INT64_MAX;
    if (*at + 1 < a->groups) {
        ug_out *r = &a->g[*at + 1];
        if (decode_out(a, r))
            return -1;
        right = join_bits(r->nums, number(key, r->first));
    }
    if (left <= right && left <= own) {
        join_at(o, o->cnt, key);
        return halve(a, *at);
    }
    if (right <= own) {
        (*at)++;
        join_at(&a->g[*at], 0, key);
        return halve(a, *at);
    }
    return new_group(a, *at + 1, &key, 1) ? 0 : -1;
}

/* Reads the old form's records into a->g: -1 unless they are sound. */
static int load_groups(ug_adding *a, const ug_sec *x, uint64_t first,
                       uint32_t n)
{
    uint64_t keys = 0, last_rel = 0;
    const uint8_t *data = x->data;
    if (x->groups > a->groups_cap)
        return -1;
    for (uint32_t g = 0; g < x->groups; g++) {
        ug_rec r = record_at(x, g);
        if (locate_at(x, &r, data) || (g > 0 && r.rel <= last_rel) ||
            (g == 0) != (r.rel == 0) || r.rel > UINT64_MAX - first ||
            r.cnt > UG_MAX || r.cnt > n - keys)
            return -1; /* a group decodes into a block of UG_MAX + 1 */
        a->g[g] = (ug_out){first + r.rel, r.cnt, r, NULL, {0, 0, 0}};
        keys += r.cnt;
        data += r.len;
        last_rel = r.rel;
    }
    a->groups = x->groups;
    return keys == n ? 0 : -1;
}

/* Whether decoded group g's keys follow and precede its neighbours'
 * (kept groups keep the old form's order).  Its own keys increase:
 * decode_out adds each number plus one, and add_one puts a key between
 * the keys below and above it. */
static int in_order(const ug_adding *a, uint32_t g)
{
    const ug_out *o = &a->g[g];
    if (g > 0 && a->g[g - 1].keys &&
        a->g[g - 1].keys[a->g[g - 1].cnt - 1] >= o->first)
        return 0;
    return g + 1 == a->groups || o->keys[o->cnt - 1] < a->g[g + 1].first;
}

/* The new form's bytes, or 0 where its keys are not strictly increasing
 * (an old form whose groups overlap). */
static size_t added_len(const ug_adding *a, unsigned *rw)
{
    size_t data = 0;
    for (uint32_t g = 0; g < a->groups; g++) {
        const ug_out *o = &a->g[g];
        if (o->keys && !in_order(a, g))
            return 0;
        data += o->keys ? form_bytes(o->cnt, form_of(&o->nums)) : o->rec.len;
    }
    *rw = bit_len(a->g[a->groups - 1].first - a->g[0].first);
    return 1 + varint_len(a->groups) + index_bytes(a->groups, *rw) + data;
}

/* Writes the new form at out: 0, or -1 where a group's keys turn out
 * not to increase (numbers of a form that does not hold what it
 * claims), out's bytes then meaning nothing. */
static int put_added(const ug_adding *a, unsigned rw, uint8_t *out)
{
    *out++ = (uint8_t)rw;
    out = varint_put(out, a->groups);
    bitw index = {out, 0, 0};
    uint8_t *data = out + index_bytes(a->groups, rw);
    for (uint32_t g = 0; g < a->groups; g++) {
        const ug_out *o = &a->g[g];
        ug_form f = o->keys ? form_of(&o->nums) : o->rec.form;
        bitw_put(&index, o->first - a->g[0].first, rw);
        bitw_put(&index, o->cnt - 1, CNT_BITS);
        bitw_put(&index, width_field(f), WIDTH_BITS);
        if (o->keys) {
            data = put_numbers(o->keys, o->cnt, f, data);
            if (!data)
                return -1;
        } else { /* its base and numbers as they were */
            memcpy(data, o->rec.at, o->rec.len);
            data += o->rec.len;
        }
    }
    bitw_end(&index);
    return 0;
}

int ug_add(const uint8_t *s, const uint8_t *end, uint64_t first, uint32_t n,
           const uint64_t *add, uint32_t m, void *scratch, uint8_t *out,
           size_t cap, uint64_t *first_out, size_t *len, uint32_t *added)
{
    ug_sec x;
    if (n < 2 || open_sec(&x, s, end, n))
        return -1;
    ug_adding a;
    a.g = scratch;
    a.groups_cap = n + 2 * m + 1;
    a.blocks = (uint64_t *)(a.g + a.groups_cap);
    a.blocks_used = 0;
    a.blocks_cap = 3 * m + 1;
    a.end = end;
    if (load_groups(&a, &x, first, n))
        return -1;
    uint32_t at = 0, put = 0;
    for (uint32_t i = 0; i < m; i++) {
        int rc = i > 0 && add[i] <= add[i - 1] ? -1 : add_one(&a, &at, add[i]);
        if (rc < 0)
            return -1;
        put += rc == 0;
    }
    unsigned rw = 0;
    size_t need = added_len(&a, &rw);
    if (need == 0)
        return -1;
    if (need > cap)
        return 1;
    if (put_added(&a, rw, out))
        return -1;
    *first_out = a.g[0].first;
    *len = need;
    *added = put;
    return 0;
}

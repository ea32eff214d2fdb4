/* SPDX-License-Identifier: MIT */
/*
 * test_u64groups.c - u64 keys in counted groups (lib/u64groups.c).
 *
 *  - key sets of several shapes built by puts in random order and by
 *    removals, each step encoded, decoded (the same keys and groups) and
 *    searched in place against the sorted array;
 *  - what the form is for: a put changes the bytes of at most the group it
 *    joins (two when it halves it) and grows the form by no more than
 *    ug_put_bound, but for keys put in order into fresh groups;
 *  - nearly even keys take a base, and the bound allows for a key below
 *    it;
 *  - groups: fresh ones of 64 keys, none above UG_MAX; keys placed all at
 *    once (ug_place_batch) or added to a form where it lies (ug_add) as
 *    if put one by one;
 *  - every single-bit flip and truncation of small forms: refused, or
 *    decoded into keys that encode to the same bytes, and searched in place
 *    without reading past the end (ASan).
 *
 * Randomised tests log their seed; BONSAI_TEST_SEED replays one.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "u64groups.h"
#include "util.h"

#define MAXN 1600u
#define FORM_CAP (MAXN * 10u + 64u)

static uint64_t g_seed;

#define CHK(cond, fmt, ...)                                                  \
    cr_assert((cond), "seed=%" PRIu64 " (BONSAI_TEST_SEED): " fmt, g_seed,  \
              ##__VA_ARGS__)

/* A node's keys and group flags, kept sorted. */
typedef struct keyset {
    uint32_t n;
    uint64_t k[MAXN];
    uint64_t start[UG_WORDS(MAXN)];
} keyset;

/* Whether two groupings of n keys are the same. */
static int same_groups(const uint64_t *a, const uint64_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (ug_is_start(a, i) != ug_is_start(b, i))
            return 0;
    return 1;
}

static uint32_t lower_bound(const keyset *s, uint64_t key)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->k[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Puts key (absent) as a node would: in order, then ug_place. */
static void put_key(keyset *s, uint64_t key)
{
    uint32_t i = lower_bound(s, key);
    memmove(s->k + i + 1, s->k + i, (s->n - i) * sizeof s->k[0]);
    ug_open(s->start, s->n, i, 1);
    s->k[i] = key;
    s->n++;
    ug_place(s->k, s->start, s->n, i);
}

static void remove_key(keyset *s, uint32_t i)
{
    ug_unplace(s->start, s->n, i);
    memmove(s->k + i, s->k + i + 1, (s->n - i - 1) * sizeof s->k[0]);
    ug_close(s->start, s->n, i, 1);
    s->n--;
}

static int contains(const keyset *s, uint64_t key)
{
    uint32_t i = lower_bound(s, key);
    return i < s->n && s->k[i] == key;
}

/* Key shapes: anywhere; dense in a small range; near 2^64 - 1; clusters
 * with wide gaps between them; nearly even, a step of 1000 and up to 10
 * more (the numbers of keys in neighbouring slots then take a base). */
#define SHAPES 5u
static uint64_t shaped_key(tu_rng *r, unsigned shape, uint64_t base)
{
    switch (shape) {
    case 0: return tu_rand(r);
    case 1: return base + tu_below(r, 4000);
    case 2: return UINT64_MAX - tu_below(r, 100000);
    case 3:
        return base + (tu_below(r, 8) << 40) + tu_below(r, 1u << 20);
    default: {
        uint64_t slot = tu_below(r, MAXN + MAXN / 8);
        return base + slot * 1000 + (slot * 2654435761u >> 7) % 11;
    }
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Puts keys of a shape into s until it holds target. */
static void fill_keys(tu_rng *r, keyset *s, unsigned shape, uint64_t base,
                      uint32_t target)
{
    while (s->n < target) {
        uint64_t key = shaped_key(r, shape, base);
        if (!contains(s, key))
            put_key(s, key);
    }
}

/* m keys in increasing order, none in s: of the shape, or any key with a
 * chance of any_per_mille. */
static void new_keys(tu_rng *r, const keyset *s, unsigned shape,
                     uint64_t base, unsigned any_per_mille, uint64_t *add,
                     uint32_t m)
{
    uint32_t got = 0;
    while (got < m) {
        uint64_t key = any_per_mille && tu_chance(r, any_per_mille)
                           ? tu_rand(r)
                           : shaped_key(r, shape, base);
        int dup = contains(s, key);
        for (uint32_t j = 0; j < got && !dup; j++)
            dup = add[j] == key;
        if (!dup)
            add[got++] = key;
    }
    qsort(add, m, sizeof add[0], cmp_u64);
}

static void check_add(const keyset *s, const uint64_t *add, uint32_t m);

static size_t encode(const keyset *s, uint8_t *out)
{
    CHK(ug_grouping_ok(s->start, s->n), "grouping of %u keys", s->n);
    size_t len = ug_len(s->k, s->start, s->n);
    CHK(len <= FORM_CAP, "form of %zu bytes", len);
    uint8_t *end = ug_put(s->k, s->start, s->n, out);
    CHK((size_t)(end - out) == len, "wrote %td bytes, ug_len %zu",
        end - out, len);
    return len;
}

static void check_decodes(const keyset *s, const uint8_t *form, size_t len)
{
    static uint64_t k[MAXN];
    static uint64_t start[UG_WORDS(MAXN)];
    CHK(ug_decode(form, form + len, s->k[0], s->n, k, start) == 0,
        "decode of %u keys", s->n);
    CHK(memcmp(k, s->k, s->n * sizeof k[0]) == 0, "keys differ");
    CHK(same_groups(start, s->start, s->n), "groups differ");
}

static void check_search(const keyset *s, const uint8_t *form, size_t len,
                         uint64_t probe)
{
    uint32_t idx;
    int found;
    CHK(ug_search(form, form + len, s->k[0], s->n, probe, &idx, &found) == 0,
        "search %" PRIu64, probe);
    uint32_t want = lower_bound(s, probe);
    CHK(idx == want, "search %" PRIu64 ": %u, want %u", probe, idx, want);
    CHK(found == (want < s->n && s->k[want] == probe), "found %" PRIu64,
        probe);
}

static void check_reads(const keyset *s, const uint8_t *form, size_t len,
                        tu_rng *r)
{
    for (uint32_t i = 0; i < s->n; i++) {
        uint64_t key;
        CHK(ug_key_at(form, form + len, s->k[0], s->n, i, &key) == 0 &&
                key == s->k[i],
            "key %u of %u", i, s->n);
        check_search(s, form, len, s->k[i]);
        if (s->k[i] > 0)
            check_search(s, form, len, s->k[i] - 1);
        if (s->k[i] < UINT64_MAX)
            check_search(s, form, len, s->k[i] + 1);
    }
    for (int j = 0; j < 200; j++)
        check_search(s, form, len, tu_rand(r));
    check_search(s, form, len, 0);
    check_search(s, form, len, UINT64_MAX);
}

/* Whether s's groups are fresh: every one but the last holds 64 keys. */
static int groups_fresh(const keyset *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (ug_is_start(s->start, i) != (i % 64 == 0))
            return 0;
    return 1;
}

/* The most a put may grow the form of s (len bytes) by. */
static uint32_t bound_of(const keyset *s, const uint8_t *form, size_t len)
{
    ug_shape sh;
    CHK(ug_shape_of(form, form + len, s->n, &sh) == 0, "the form's shape");
    return ug_put_bound(&sh);
}

static uint32_t groups_in(const uint8_t *form)
{
    const uint8_t *p = form + 1;
    uint64_t g = 0;
    cr_assert(varint_get(&p, form + 16, &g) == 0);
    return (uint32_t)g;
}

Test(u64groups, random_puts_and_removals_round_trip)
{
    g_seed = tu_seed("u64groups random round trips", 0x5eed6401);
    tu_rng r = {g_seed};
    static keyset s;
    static uint8_t form[FORM_CAP];
    uint64_t rounds = tu_scaled(48, 8);
    for (uint64_t round = 0; round < rounds; round++) {
        unsigned shape = (unsigned)(round % SHAPES);
        uint64_t base = tu_rand(&r) >> 2;
        uint32_t target = 2 + (uint32_t)tu_below(&r, MAXN - 2);
        s.n = 0;
        while (s.n < target) {
            uint64_t key = shaped_key(&r, shape, base);
            if (contains(&s, key))
                continue;
            put_key(&s, key);
            if (s.n >= 2 && (s.n < 300 || s.n % 97 == 0))
                check_decodes(&s, form, encode(&s, form));
        }
        size_t len = encode(&s, form);
        check_decodes(&s, form, len);
        check_reads(&s, form, len, &r);
        for (uint32_t gone = (uint32_t)tu_below(&r, s.n / 2); gone > 0;
             gone--)
            remove_key(&s, (uint32_t)tu_below(&r, s.n));
        if (s.n >= 2) {
            len = encode(&s, form);
            check_decodes(&s, form, len);
            check_reads(&s, form, len, &r);
        }
    }
}

/* The groups' data, one slice a group, as the index lays them out. */
typedef struct slices {
    uint32_t groups;
    uint32_t cnt[MAXN];
    size_t off[MAXN + 1];
} slices;

/* Reads the groups' slices from the form's own index: each group's data
 * is its base varint (width field past 64) and its numbers. */
static void slice(slices *out, const uint8_t *form, size_t len)
{
    unsigned rw = form[0];
    const uint8_t *p = form + 1;
    uint64_t groups = 0;
    CHK(varint_get(&p, form + len, &groups) == 0, "the group count");
    size_t at = (size_t)(p - form) + (groups * (rw + 14) + 7) / 8;
    out->groups = (uint32_t)groups;
    for (uint32_t g = 0; g < out->groups; g++) {
        uint64_t pos = (uint64_t)g * (rw + 14), field = 0, cnt = 0;
        for (unsigned b = 0; b < 14; b++) {
            uint64_t bit = pos + rw + b;
            unsigned v = (p[bit / 8] >> (bit % 8)) & 1u;
            if (b < 7)
                cnt |= (uint64_t)v << b;
            else
                field |= (uint64_t)v << (b - 7);
        }
        cnt++;
        unsigned width = (unsigned)field;
        out->off[g] = at;
        out->cnt[g] = (uint32_t)cnt;
        if (field > 64) {
            const uint8_t *q = form + at;
            uint64_t base;
            CHK(varint_get(&q, form + len, &base) == 0, "a base");
            at = (size_t)(q - form);
            width = (unsigned)field - 65;
        }
        at += ((size_t)(cnt - 1) * width + 7) / 8;
    }
    CHK(at == len, "groups end at %zu of %zu", at, len);
    out->off[out->groups] = len;
}

static int same_group(const slices *a, const uint8_t *fa, uint32_t g,
                      const slices *b, const uint8_t *fb, uint32_t h)
{
    size_t len = a->off[g + 1] - a->off[g];
    return a->cnt[g] == b->cnt[h] && b->off[h + 1] - b->off[h] == len &&
           memcmp(fa + a->off[g], fb + b->off[h], len) == 0;
}

/* How many groups of `after` are not the groups of `before` that lie
 * before or after them, byte for byte. */
static uint32_t groups_changed(const slices *before, const uint8_t *fb,
                               const slices *after, const uint8_t *fa)
{
    uint32_t most = before->groups < after->groups ? before->groups
                                                   : after->groups;
    uint32_t front = 0, back = 0;
    while (front < most && same_group(before, fb, front, after, fa, front))
        front++;
    while (front + back < most &&
           same_group(before, fb, before->groups - 1 - back, after, fa,
                      after->groups - 1 - back))
        back++;
    return after->groups - front - back;
}

Test(u64groups, a_put_changes_one_group_and_grows_within_the_bound)
{
    g_seed = tu_seed("u64groups locality", 0x10ca1);
    tu_rng r = {g_seed};
    static keyset s;
    static uint8_t fb[FORM_CAP], fa[FORM_CAP];
    static slices sb, sa;
    uint64_t rounds = tu_scaled(24, 6);
    for (uint64_t round = 0; round < rounds; round++) {
        unsigned shape = (unsigned)(round % SHAPES);
        uint64_t base = tu_rand(&r) >> 2;
        s.n = 0;
        fill_keys(&r, &s, shape, base, 2);
        size_t lb = encode(&s, fb);
        while (s.n < MAXN - 1) {
            uint64_t key = shaped_key(&r, shape, base);
            if (contains(&s, key))
                continue;
            uint32_t bound = bound_of(&s, fb, lb);
            int inner = key > s.k[0] && key < s.k[s.n - 1];
            /* after the last key of fresh groups, a key joins by position,
             * which the bound does not cover */
            int by_place = key > s.k[s.n - 1] && groups_fresh(&s);
            slice(&sb, fb, lb);
            put_key(&s, key);
            size_t la = encode(&s, fa);
            CHK(by_place || la <= lb + bound, "a put grew %zu to %zu, bound %u",
                lb, la, bound);
            slice(&sa, fa, la);
            /* a put among the keys leaves every other group's bytes: it
             * changes the group it joins (and its new half) */
            if (inner)
                CHK(groups_changed(&sb, fb, &sa, fa) <= 2,
                    "a put changed %u groups",
                    groups_changed(&sb, fb, &sa, fa));
            memcpy(fb, fa, la);
            lb = la;
        }
    }
}

/* A new lowest key moves key 0, so every rel grows by as much: the bound's
 * widest case.  A new highest key may widen them too, through the last
 * record's rel; 0 after 1 joins 1's group at no cost. */
Test(u64groups, a_new_lowest_or_highest_key_stays_within_the_bound)
{
    g_seed = tu_seed("u64groups ends", 0xe4d5);
    tu_rng r = {g_seed};
    static keyset s;
    static uint8_t fb[FORM_CAP], fa[FORM_CAP];
    uint64_t base = UINT64_C(1) << 62;
    s.n = 0;
    fill_keys(&r, &s, 3, base, 900);
    uint64_t ends[] = {1, UINT64_MAX, 0};
    for (unsigned e = 0; e < 3; e++) {
        size_t lb = encode(&s, fb);
        uint32_t bound = bound_of(&s, fb, lb);
        put_key(&s, ends[e]);
        size_t la = encode(&s, fa);
        CHK(la <= lb + bound, "key %" PRIu64 " grew %zu to %zu, bound %u",
            ends[e], lb, la, bound);
        if (e < 2) /* far from the others: a record, and wider rels */
            CHK(la > lb + 8, "key %" PRIu64 " grew %zu to only %zu",
                ends[e], lb, la);
        check_decodes(&s, fa, la);
    }
}

Test(u64groups, groups_fresh_of_64_and_never_above_the_most)
{
    static keyset s;
    static uint8_t form[FORM_CAP];
    s.n = 200;
    for (uint32_t i = 0; i < s.n; i++)
        s.k[i] = 1000 + 3 * (uint64_t)i + (i % 7 == 0);
    ug_fresh(s.start, s.n);
    for (uint32_t i = 0; i < s.n; i++)
        cr_assert_eq(ug_is_start(s.start, i), i % 64 == 0, "key %u", i);
    check_decodes(&s, form, encode(&s, form));
    cr_assert_eq(groups_in(form), 4);

    /* keys put in order into fresh groups keep them fresh */
    s.n = 0;
    for (uint64_t key = 5; s.n < 1000; key += 2 + s.n % 3)
        put_key(&s, key);
    cr_assert(groups_fresh(&s), "keys loaded in order, in fresh groups");
    check_decodes(&s, form, encode(&s, form));

    /* once a key among them makes them other, each key put in order joins
     * the last group, which halves when it would pass UG_MAX, so the
     * groups behind it hold half of UG_MAX + 1 */
    s.n = 0;
    uint64_t key = 5;
    for (; s.n < 70; key += 4)
        put_key(&s, key);
    put_key(&s, 7); /* group 0 holds 65 */
    for (; s.n < 1000; key += 2 + s.n % 3)
        put_key(&s, key);
    uint32_t run = 0, last = 0, halves = 0;
    for (uint32_t i = 0; i < s.n; i++) {
        if (ug_is_start(s.start, i) && i > 0 && i > 200) {
            cr_assert_eq(run, (UG_MAX + 1) / 2, "a group of %u before %u",
                         run, i);
            halves++;
        }
        run = ug_is_start(s.start, i) ? 1 : run + 1;
        last = run;
    }
    cr_assert(halves >= 10 && last >= 1 && last <= UG_MAX,
              "%u halves, last group %u", halves, last);
    check_decodes(&s, form, encode(&s, form));
}

/* Keys nearly evenly spaced take a base: their numbers (a step of 1000 and
 * up to 10 more) at 4 bits, not 10.  A key put close to one of them, whose
 * number is below the base, joins its group, which takes no base then:
 * that is what the bound's rebase allows for. */
Test(u64groups, nearly_even_keys_take_a_base_and_keep_it)
{
    static keyset s;
    static uint8_t fb[FORM_CAP], fa[FORM_CAP];
    s.n = 0;
    for (uint64_t i = 0; i < 400; i++)
        put_key(&s, (UINT64_C(1) << 40) + i * 1000 + (i * 7) % 11);
    size_t lb = encode(&s, fb);
    cr_assert_lt(lb, 399 * 5 / 8 + 64, "%zu bytes for 400 keys", lb);
    check_decodes(&s, fb, lb);

    ug_shape sh;
    cr_assert_eq(ug_shape_of(fb, fb + lb, s.n, &sh), 0);
    cr_assert_geq(sh.rebase, 48, "rebase %u", sh.rebase);
    uint32_t bound = ug_put_bound(&sh);
    uint64_t key = s.k[200] + 3;
    put_key(&s, key);
    size_t la = encode(&s, fa);
    cr_assert_leq(la, lb + bound);
    cr_assert_gt(la, lb + 24, "grew %zu to %zu: no wider group", lb, la);
    check_decodes(&s, fa, la);

    /* where the form lies, the same */
    s.n = 0;
    for (uint64_t i = 0; i < 400; i++)
        put_key(&s, (UINT64_C(1) << 40) + i * 1000 + (i * 7) % 11);
    check_add(&s, &key, 1);
}

/* A form the decoder accepts must be the one ug_put writes for what it
 * decoded; searches in place stay within the bytes either way. */
static void check_mangled(const uint8_t *form, size_t len, uint64_t first,
                          uint32_t n)
{
    static uint64_t k[MAXN];
    static uint64_t start[UG_WORDS(MAXN)];
    static uint8_t again[FORM_CAP];
    uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan sees past */
    cr_assert_not_null(copy);
    memcpy(copy, form, len);
    if (ug_decode(copy, copy + len, first, n, k, start) == 0) {
        CHK(k[0] == first && ug_grouping_ok(start, n), "accepted keys");
        CHK(ug_len(k, start, n) == len, "accepted a form of another length");
        ug_put(k, start, n, again);
        CHK(memcmp(again, copy, len) == 0, "accepted a non-canonical form");
    }
    uint32_t idx;
    int found;
    uint64_t key;
    for (uint64_t probe = first; probe < first + 64; probe += 7)
        (void)ug_search(copy, copy + len, first, n, probe, &idx, &found);
    (void)ug_search(copy, copy + len, first, n, UINT64_MAX, &idx, &found);
    for (uint32_t i = 0; i < n; i += 5)
        (void)ug_key_at(copy, copy + len, first, n, i, &key);
    free(copy);
}

Test(u64groups, flipped_and_truncated_forms_are_refused_or_canonical)
{
    g_seed = tu_seed("u64groups mangled forms", 0xf11b);
    tu_rng r = {g_seed};
    static keyset s;
    static uint8_t form[FORM_CAP];
    for (int round = 0; round < 12; round++) {
        s.n = 0;
        uint32_t target = 2 + (uint32_t)tu_below(&r, 150);
        uint64_t base = tu_rand(&r) >> 1;
        fill_keys(&r, &s, (unsigned)round % SHAPES, base, target);
        size_t len = encode(&s, form);
        for (size_t bit = 0; bit < len * 8; bit++) {
            form[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            check_mangled(form, len, s.k[0], s.n);
            form[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        for (size_t cut = 0; cut < len; cut++) {
            static uint64_t k[MAXN];
            static uint64_t start[UG_WORDS(MAXN)];
            CHK(ug_decode(form, form + cut, s.k[0], s.n, k, start) != 0,
                "a form cut to %zu of %zu bytes decoded", cut, len);
            check_mangled(form, cut, s.k[0], s.n);
        }
    }
}

/* ug_add on a form gives the bytes of the keys put one by one. */
static void check_add(const keyset *s, const uint64_t *add, uint32_t m)
{
    static keyset want;
    static uint8_t form[FORM_CAP], expect[FORM_CAP], got[FORM_CAP];
    size_t len = encode(s, form);
    want = *s;
    for (uint32_t i = 0; i < m; i++)
        put_key(&want, add[i]);
    size_t wlen = encode(&want, expect);
    void *scratch = malloc(ug_add_scratch(s->n, m));
    cr_assert_not_null(scratch);
    uint64_t first = 0;
    size_t glen = 0;
    uint32_t added = 0;
    int rc = ug_add(form, form + len, s->k[0], s->n, add, m, scratch, got,
                    FORM_CAP, &first, &glen, &added);
    CHK(rc == 0, "ug_add of %u keys to %u: %d", m, s->n, rc);
    CHK(first == want.k[0] && glen == wlen && added == m,
        "first, length or count: %zu, want %zu; %u added of %u", glen, wlen,
        added, m);
    CHK(memcmp(got, expect, wlen) == 0, "%u keys added to %u: other bytes",
        m, s->n);
    CHK(ug_add(form, form + len, s->k[0], s->n, add, m, scratch, got,
               wlen - 1, &first, &glen, &added) == 1,
        "a byte too little room");
    if (m > 0) { /* a key already there, and keys out of order */
        uint64_t bad[2] = {s->k[s->n / 2], add[0]};
        CHK(ug_add(form, form + len, s->k[0], s->n, bad, 1, scratch, got,
                   FORM_CAP, &first, &glen, &added) == 0 &&
                added == 0 && glen == len && memcmp(got, form, len) == 0,
            "a key already there: the form as it was");
        if (m > 1) {
            bad[0] = add[1];
            CHK(ug_add(form, form + len, s->k[0], s->n, bad, 2, scratch,
                       got, FORM_CAP, &first, &glen, &added) == -1,
                "keys out of order");
        }
    }
    free(scratch);
}

Test(u64groups, keys_added_where_the_form_lies_as_put_one_by_one)
{
    g_seed = tu_seed("u64groups add", 0xadd5);
    tu_rng r = {g_seed};
    static keyset s;
    static uint64_t add[400];
    uint64_t rounds = tu_scaled(400, 60);
    for (uint64_t round = 0; round < rounds; round++) {
        unsigned shape = (unsigned)(round % SHAPES);
        uint64_t base = tu_rand(&r) >> 2;
        uint32_t target = 2 + (uint32_t)tu_below(&r, 1000);
        s.n = 0;
        fill_keys(&r, &s, shape, base, target);
        uint32_t m = (uint32_t)tu_below(&r, round % 3 ? 8 : 400);
        new_keys(&r, &s, shape, base, 50, add, m);
        check_add(&s, add, m);
    }
}

Test(u64groups, keys_placed_at_once_as_one_by_one)
{
    g_seed = tu_seed("u64groups batch", 0xba7c);
    tu_rng r = {g_seed};
    static keyset s, want;
    static uint64_t k[MAXN];
    static uint64_t start[UG_WORDS(MAXN)], fresh[UG_WORDS(MAXN)];
    static uint64_t add[600];
    uint64_t rounds = tu_scaled(300, 50);
    for (uint64_t round = 0; round < rounds; round++) {
        unsigned shape = (unsigned)(round % SHAPES);
        uint64_t base = tu_rand(&r) >> 2;
        uint32_t target = 1 + (uint32_t)tu_below(&r, 800);
        s.n = 0;
        fill_keys(&r, &s, shape, base, target);
        uint32_t m = 1 + (uint32_t)tu_below(&r, round % 3 ? 6 : 600);
        new_keys(&r, &s, shape, base, 0, add, m);
        want = s;
        for (uint32_t j = 0; j < m; j++)
            put_key(&want, add[j]);
        /* the same keys merged at once, the new ones' bits clear */
        uint32_t i = 0, j = 0, n = 0;
        while (i < s.n || j < m) {
            int take_new = j < m && (i == s.n || add[j] < s.k[i]);
            k[n] = take_new ? add[j] : s.k[i];
            ug_mark(start, n, take_new ? 0 : ug_is_start(s.start, i));
            ug_mark(fresh, n++, take_new);
            if (take_new)
                j++;
            else
                i++;
        }
        ug_place_batch(k, start, n, fresh);
        CHK(n == want.n && memcmp(k, want.k, n * sizeof k[0]) == 0,
            "merged keys");
        CHK(same_groups(start, want.start, n),
            "%u keys placed at once among %u: other groups", m, s.n);
    }
}

/* Bits opened and closed anywhere, one key or many, across words: as a
 * flag a key moved by memmove. */
Test(u64groups, bits_open_and_close_as_flags_would_move)
{
    g_seed = tu_seed("u64groups bits", 0xb175);
    tu_rng r = {g_seed};
    static uint64_t bits[UG_WORDS(MAXN)];
    static uint8_t flags[MAXN];
    uint32_t n = 0;
    for (int step = 0; step < 20000; step++) {
        uint32_t cnt = tu_chance(&r, 500) ? 1 : 1 + (uint32_t)tu_below(&r, 150);
        if (n + cnt <= MAXN && (n < 200 || tu_chance(&r, 500))) {
            uint32_t i = (uint32_t)tu_below(&r, n + 1);
            ug_open(bits, n, i, cnt);
            memmove(flags + i + cnt, flags + i, n - i);
            n += cnt;
            for (uint32_t j = i; j < i + cnt; j++) {
                flags[j] = (uint8_t)tu_below(&r, 2);
                ug_mark(bits, j, flags[j]);
            }
        } else if (n > 0) {
            uint32_t i = (uint32_t)tu_below(&r, n);
            cnt = cnt > n - i ? n - i : cnt;
            ug_close(bits, n, i, cnt);
            memmove(flags + i, flags + i + cnt, n - i - cnt);
            n -= cnt;
        }
        for (uint32_t j = 0; j < n; j++)
            CHK(ug_is_start(bits, j) == flags[j], "step %d: bit %u of %u",
                step, j, n);
    }
}

/* A walk of rising keys answers each as ug_search does, from where the
 * search before it ended. */
Test(u64groups, a_walk_of_rising_keys_answers_as_searches)
{
    g_seed = tu_seed("u64groups walk", 0x3a1c);
    tu_rng r = {g_seed};
    static keyset s;
    static uint8_t form[FORM_CAP];
    static uint64_t probe[600];
    for (int round = 0; round < 40; round++) {
        unsigned shape = (unsigned)round % SHAPES;
        uint64_t base = tu_rand(&r) >> 2;
        s.n = 0;
        fill_keys(&r, &s, shape, base, 2 + (uint32_t)tu_below(&r, 1200));
        size_t len = encode(&s, form);
        uint32_t m = 1 + (uint32_t)tu_below(&r, 600);
        for (uint32_t j = 0; j < m; j++) /* stored keys, and others */
            probe[j] = tu_chance(&r, 500) ? s.k[tu_below(&r, s.n)]
                                          : shaped_key(&r, shape, base);
        qsort(probe, m, sizeof probe[0], cmp_u64);
        ug_walk w;
        CHK(ug_walk_open(&w, form, form + len, s.k[0], s.n) == 0, "open");
        for (uint32_t j = 0; j < m; j++) {
            uint32_t idx, want = lower_bound(&s, probe[j]);
            int found;
            CHK(ug_walk_search(&w, probe[j], &idx, &found) == 0, "walk");
            CHK(idx == want && found == (want < s.n && s.k[want] == probe[j]),
                "round %d, key %u of %u: %u, want %u", round, j, m, idx,
                want);
        }
    }
}

/* Keys one step apart are told from the index alone, and their form in
 * fresh groups measured without them. */
Test(u64groups, evenly_spaced_keys_told_and_measured)
{
    static keyset s;
    static uint8_t form[FORM_CAP];
    uint64_t steps[] = {1, 7, 1000, UINT64_C(1) << 40};
    for (unsigned t = 0; t < 4; t++) {
        for (uint32_t n = 2; n < MAXN; n += 37 + n / 3) {
            s.n = n;
            for (uint32_t i = 0; i < n; i++)
                s.k[i] = 5 + i * steps[t];
            ug_fresh(s.start, n);
            size_t len = encode(&s, form);
            uint64_t step = 0;
            CHK(ug_even(form, form + len, n, &step) == 1 && step == steps[t],
                "%u keys %" PRIu64 " apart", n, steps[t]);
            ug_shape sh;
            CHK(ug_even_len(n, steps[t], &sh) == len, "length of %u", n);
            if (n < 3)
                continue; /* any two keys are one step apart */
            s.k[n - 1] += 1; /* the last gap one wider */
            len = encode(&s, form);
            CHK(ug_even(form, form + len, n, &step) == 0, "not even");
        }
    }
}

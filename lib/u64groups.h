/* SPDX-License-Identifier: MIT */
/*
 * u64groups.h - u64 keys in counted groups that keep their bounds.
 *
 * The groups of format 4's indexed u64 key section (format.md) hold 64
 * keys by position, so a key put among them moves every later key one
 * place on: every later group changes and may widen (regroup.h), and a
 * write of the leaf re-encodes all of them.  In counted groups each group says how many
 * keys it holds, and a key put into a node joins one group or starts its
 * own; the other groups keep their bytes.  A put then grows the section by
 * a few bytes whatever the node's other keys are (ug_put_bound), which is
 * what a charge of room per waiting put needs, and rewriting the section
 * changes one group's bytes and the index.
 *
 * The groups form of a section, after key 0 and the marker byte:
 *
 *   groups := rw:u8  G:varint  index  data
 *   index   G records as one bit stream (bitstream.h) padded to a whole
 *           byte; each record is rel (rw bits), cnt - 1 (7 bits), width
 *           field (7 bits):
 *     rel     the group's first key minus key 0: 0 for group 0, strictly
 *             increasing; rw is the bit length of the last record's rel
 *     cnt     keys in the group, 1..UG_MAX; the counts sum to n
 *     field   0..64: the numbers' width, no base; 65..127: a base, and
 *             the width is field - 65
 *   data    for each group: its base (a varint, when it has one), then
 *           its cnt - 1 numbers key[j] - key[j-1] - 1 less the base, at
 *           the width, as a bit stream padded to a whole byte; the groups
 *           lie back to back and end with the section
 *
 * Each group takes one form, chosen by its numbers alone: with lo and hi
 * the least and largest, the width is bit_len(hi) and no base, or where
 * lo > 0, bit_len(hi - lo) <= 62 and 8 * varint_len(lo) + (cnt - 1) *
 * bit_len(hi - lo) < (cnt - 1) * bit_len(hi) bits, base lo at width
 * bit_len(hi - lo).  Keys nearly evenly spaced (timestamps, say) take a
 * base; random keys almost never do.
 *
 * Where the groups lie is the node's state, not a function of its keys: a
 * decoded node keeps a bit a key (set where a group begins), and
 * one rule (ug_place) decides where a key put into the node goes, whether
 * the node is decoded or its image is changed where it lies, so that both
 * give the same bytes.
 *
 * This is the key section of format 5 (image flag COUNTED, marker 0x02
 * after key 0, node.c).
 *
 * Pure: no allocation, no I/O.  Every reader checks its reads against the
 * section's end.
 */
#ifndef BONSAI_U64GROUPS_H
#define BONSAI_U64GROUPS_H

#include <stddef.h>
#include <stdint.h>

#define UG_MAX 96u   /* keys in a group; a put that makes it 97 halves it */
#define UG_FRESH 64u /* keys a group takes when keys come without groups */

/* Where groups begin, a bit a key: bit i % 64 of start[i / 64] is set
 * where key i begins a group.  The bits past the last key mean nothing. */
#define UG_WORDS(n) (((size_t)(n) + 63) / 64)

static inline int ug_is_start(const uint64_t *start, uint32_t i)
{
    return (int)(start[i >> 6] >> (i & 63) & 1u);
}

static inline void ug_mark(uint64_t *start, uint32_t i, int begins)
{
    uint64_t bit = UINT64_C(1) << (i & 63);
    start[i >> 6] = begins ? start[i >> 6] | bit : start[i >> 6] & ~bit;
}

/* Room for cnt keys put at index i of n: the bits of keys i..n-1 move up
 * by cnt (start holds UG_WORDS(n + cnt) words); the bits of the new keys
 * mean nothing until set.  ug_close takes the bits of keys i..i+cnt-1
 * out, the later ones moving down. */
void ug_open(uint64_t *start, uint32_t n, uint32_t i, uint32_t cnt);
void ug_close(uint64_t *start, uint32_t n, uint32_t i, uint32_t cnt);

/* Groups of UG_FRESH keys by position, for keys that come without any
 * (an image of the older forms, keys loaded in order): UG_WORDS(n)
 * words. */
void ug_fresh(uint64_t *start, uint32_t n);

/* Key i of k[0..n) has just been put (its start bit is a placeholder):
 * sets its bit and what the rule changes next to it, costs counted in
 * bits.  Inside a group the key joins it.  After the last key of fresh
 * groups (keys loaded in order) it takes the next place of fresh groups.
 * Otherwise between two groups (or past either end) it joins the one
 * whose bytes grow least, or starts a group of its own when a record
 * costs less than either.  A group that reaches UG_MAX + 1 keys is
 * halved. */
void ug_place(const uint64_t *k, uint64_t *start, uint32_t n, uint32_t i);

/* Keys put into a node at once: k[i] with fresh bit i set (and its start
 * bit clear), among keys that were there before with their groups.  Places them as ug_place would,
 * one by one in increasing order, each seeing the keys put before it and
 * not those after. */
void ug_place_batch(const uint64_t *k, uint64_t *start, uint32_t n,
                    const uint64_t *fresh);

/* Key i of n is about to be removed: moves its group's start to the next
 * key where it began one.  The caller then removes bit i with key i. */
void ug_unplace(uint64_t *start, uint32_t n, uint32_t i);

/* Bytes of the groups form of k[0..n) (n >= 2) grouped by start, and the
 * form written at out; ug_put returns the byte after it, or NULL where
 * the keys do not strictly increase.  start must
 * begin a group at key 0 and make groups of 1..UG_MAX keys
 * (ug_grouping_ok); NULL stands for fresh groups (ug_fresh). */
size_t ug_len(const uint64_t *k, const uint64_t *start, uint32_t n);
uint8_t *ug_put(const uint64_t *k, const uint64_t *start, uint32_t n,
                uint8_t *out);
int ug_grouping_ok(const uint64_t *start, uint32_t n);
/* What a put's growth depends on: the form's groups, its rel width, and
 * the most a key put among the keys of one of its groups with a base may
 * add (rebase, in bytes: its numbers may fall below the base). */
typedef struct ug_shape {
    uint32_t groups;
    unsigned rw;
    uint32_t rebase;
} ug_shape;

/* ug_len, and the form's shape. */
size_t ug_measure(const uint64_t *k, const uint64_t *start, uint32_t n,
                  ug_shape *sh);
/* ug_len of n >= 2 keys one step apart in fresh groups, without the
 * keys, and that form's shape. */
size_t ug_even_len(uint32_t n, uint64_t step, ug_shape *sh);
/* The shape of the form in [s, end) of n keys (reads the index and each
 * group's base); 0, or -1 where the bytes do not hold what they claim. */
int ug_shape_of(const uint8_t *s, const uint8_t *end, uint32_t n,
                ug_shape *sh);

/* Decodes the groups form in [s, end) of n >= 2 keys whose key 0 is first
 * into k and start.  Accepts only what ug_put writes for them: returns 0,
 * or -1 for anything else. */
int ug_decode(const uint8_t *s, const uint8_t *end, uint64_t first,
              uint32_t n, uint64_t *k, uint64_t *start);

/* In place: the first index whose key is >= key, and whether it equals
 * key; key i of the section.  Return 0, or -1 where the bytes do not hold
 * what they claim. */
int ug_search(const uint8_t *s, const uint8_t *end, uint64_t first,
              uint32_t n, uint64_t key, uint32_t *idx, int *found);
int ug_key_at(const uint8_t *s, const uint8_t *end, uint64_t first,
              uint32_t n, uint32_t i, uint64_t *key);

/* A run of searches of one form for rising keys, each going on from where
 * the one before it ended (a sorted batch of gets): the section opened
 * once, and the group and key the last search ended at. */
typedef struct ug_walk {
    const uint8_t *index, *data, *end;
    uint64_t first;
    uint32_t n, groups;
    unsigned rw;
    uint32_t g, rank;    /* the group, and the index of its first key */
    uint32_t cnt, j;     /* its keys, and the one the last search ended at */
    uint64_t cur;        /* that key */
    unsigned width;      /* the group's form and bytes */
    uint64_t base;
    const uint8_t *nums;
    size_t len;
    const uint8_t *at;   /* where its bytes begin */
    int unchecked;       /* its keys read without a check a key */
} ug_walk;

/* Opens w on the form in [s, end) of n >= 2 keys whose key 0 is first,
 * at key 0.  ug_walk_search answers ug_search for a key not below any
 * key searched since, going on from there.  Both return 0, or -1 where
 * the bytes do not hold what they claim. */
int ug_walk_open(ug_walk *w, const uint8_t *s, const uint8_t *end,
                 uint64_t first, uint32_t n);
int ug_walk_search(ug_walk *w, uint64_t key, uint32_t *idx, int *found);

/* Whether the form's n keys lie one step apart (every group's numbers
 * equal, its rels in line), read from the index alone; *step = it. */
int ug_even(const uint8_t *s, const uint8_t *end, uint32_t n,
            uint64_t *step);

/* Keys put into a groups form where it lies: the form in [s, end) of n
 * keys whose key 0 is first, with those of the strictly increasing keys
 * add[0..m) that it does not hold put in one by one as ug_place puts
 * them, written at out (cap bytes): the bytes ug_put writes for the keys
 * and groups that gives.  Groups no key joins are copied as they are.
 * scratch holds ug_add_scratch(n, m) bytes, 8-byte aligned.  *first_out
 * is the new key 0, *len the form's bytes and *added the keys put.
 * Returns 0, 1 when the form would pass cap, or -1 for a form that does
 * not hold what it claims or keys out of order. */
size_t ug_add_scratch(uint32_t n, uint32_t m);
int ug_add(const uint8_t *s, const uint8_t *end, uint64_t first, uint32_t n,
           const uint64_t *add, uint32_t m, void *scratch, uint8_t *out,
           size_t cap, uint64_t *first_out, size_t *len, uint32_t *added);

/* The most one put can add to a groups form of shape sh, in bytes, but
 * for a put after the last key into fresh groups (which joins by
 * position).  A key joining a group at its end, or starting its own,
 * costs at most a record (ug_place takes the cheaper); among a group's
 * keys it adds a number no wider than the group's largest, or, below a
 * base, up to sh->rebase; a group halved costs a record and its base
 * again; a new lowest or highest key may widen every rel.  Key 0's
 * varint, before the marker, may grow too; the caller adds it. */
uint32_t ug_put_bound(const ug_shape *sh);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * regroup.h - how much a u64 key section may grow when its groups shift.
 *
 * A u64 key section packs the differences of 64 keys a group at the width
 * their spread needs (format.md).  A key put among them moves every later
 * key one place on, so each later group takes a difference from the group
 * before it: groups of evenly spaced keys whose steps differ by turns
 * widen from 0 bits to the steps' difference, and one put can grow a leaf
 * many times over.  The split test (shape.c) and the room budget (room.h)
 * must know that before it happens.
 *
 * The bound, from the groups' shapes alone.  Let every difference in the
 * section lie in [lo, hi].  Keys put anywhere among its keys, any number
 * of them, leave every old difference whole or cut in two, and the parts
 * are new differences below hi.  A group of old differences alone needs
 * no more than bits(hi - lo): the section grows by at most
 *     sum over groups of cnt * (bits(hi - lo) - width) bits
 * plus a group's header and index record growing (GROW_GROUP_BYTES each),
 * the shift bound.  Each key put makes two parts, each in one group, which
 * then needs at most bits(hi): 2 * 64 * (bits(hi) - bits(hi - lo)) bits
 * more, plus the key's own difference (the per-key bound).  Keys put
 * beyond either end bring a new difference into the one or two groups
 * there; the codec's estimate and a write-back's split absorb that.
 *
 * Counted groups (format 5, u64groups.h) do not shift: a put changes the
 * group it joins, so their shift bound is 0 and their per-key bound is
 * ug_put_bound's.  This file's bounds are those of the older forms a node
 * read from an image keeps until it changes.
 *
 * Pure arithmetic: the encoder adds each group as it lays it out and the
 * decoder as it reads it, from the same base and width, so that both give
 * the same bounds for the same image.
 */
#ifndef BONSAI_REGROUP_H
#define BONSAI_REGROUP_H

#include <stdint.h>

/* A group header's base varint may grow to 9 bytes, and the index record
 * and width byte by one more. */
#define GROW_GROUP_BYTES 10u

typedef struct rg_sum {
    uint64_t keys;   /* keys in the groups added */
    uint64_t packed; /* sum of cnt * width over them, in bits */
    uint64_t groups;
    uint64_t lo, hi; /* the differences lie in [lo, hi] (lo > hi: none) */
} rg_sum;

#define RG_EMPTY {0, 0, 0, UINT64_MAX, 0}

/* Adds a group of cnt keys, its base and width, and `gap`, the difference
 * from the key before it to its first (none for the first group). */
void rg_add_group(rg_sum *s, uint32_t cnt, uint64_t base, unsigned width,
                  int has_gap, uint64_t gap);

/* Adds n >= 2 keys one step apart (the section's step form). */
void rg_add_even(rg_sum *s, uint32_t n, uint64_t step);

/* The shift bound and the per-key bound in bytes, each at most
 * UINT32_MAX - 1. */
uint32_t rg_shift_bytes(const rg_sum *s);
uint32_t rg_key_bytes(const rg_sum *s);

#endif

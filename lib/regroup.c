/* SPDX-License-Identifier: MIT */
/* regroup.c - the growth bounds of a u64 key section (see regroup.h). */
#include "regroup.h"

#include "bytes.h"

#define GROUP_KEYS 64u
#define KEY_OWN_BYTES 9u /* a key's own difference and its varint */

static void holds(rg_sum *s, uint64_t lo, uint64_t hi)
{
    s->lo = lo < s->lo ? lo : s->lo;
    s->hi = hi > s->hi ? hi : s->hi;
}

void rg_add_group(rg_sum *s, uint32_t cnt, uint64_t base, unsigned width,
                  int has_gap, uint64_t gap)
{
    s->keys += cnt;
    s->packed += (uint64_t)cnt * width;
    s->groups++;
    if (has_gap)
        holds(s, gap, gap);
    if (cnt < 2)
        return;
    /* a base of 0 says only that the differences are at least 1 */
    uint64_t top = width >= 64 ? UINT64_MAX : (UINT64_C(1) << width) - 1;
    uint64_t hi = base > UINT64_MAX - top ? UINT64_MAX : base + top;
    holds(s, base ? base : 1, hi);
}

void rg_add_even(rg_sum *s, uint32_t n, uint64_t step)
{
    s->keys += n;
    s->groups += (n + GROUP_KEYS - 1) / GROUP_KEYS;
    holds(s, step, step);
}

static uint32_t clip(uint64_t bytes)
{
    return bytes < UINT32_MAX - 1 ? (uint32_t)bytes : UINT32_MAX - 1;
}

/* bits(hi - lo), and bits(hi) in *top. */
static unsigned spread_bits(const rg_sum *s, unsigned *top)
{
    *top = bit_len(s->hi);
    return s->lo > s->hi ? 0 : bit_len(s->hi - s->lo);
}

uint32_t rg_shift_bytes(const rg_sum *s)
{
    unsigned top, spread = spread_bits(s, &top);
    uint64_t all = s->keys * spread;
    uint64_t bits = all > s->packed ? all - s->packed : 0;
    return clip((bits + 7) / 8 + s->groups * GROW_GROUP_BYTES);
}

uint32_t rg_key_bytes(const rg_sum *s)
{
    unsigned top, spread = spread_bits(s, &top);
    uint64_t parts = 2u * GROUP_KEYS * (top - spread) / 8;
    return clip(parts + KEY_OWN_BYTES + 2u * GROW_GROUP_BYTES);
}

/* SPDX-License-Identifier: MIT */
/*
 * bytes.h - little-endian fixed-width fields and LEB128 varints.
 *
 * Every multi-byte field bonsai stores is little-endian and assembled byte
 * by byte, never by casting a struct over the bytes, so the format does not
 * depend on the host's padding or byte order.
 *
 * varint: 7 bits a byte, least significant group first, high bit set on
 * every byte but the last.  0 -> 00, 127 -> 7f, 128 -> 80 01,
 * 300 -> ac 02.  At most 10 bytes for a uint64_t.
 */
#ifndef BONSAI_BYTES_H
#define BONSAI_BYTES_H

#include <stddef.h>
#include <stdint.h>

#define VARINT_MAX 10u

static inline uint16_t get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t get_le24(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

static inline uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t get_le40(const uint8_t *p)
{
    return (uint64_t)get_le32(p) | (uint64_t)p[4] << 32;
}

static inline uint64_t get_le64(const uint8_t *p)
{
    return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* a against b in memcmp order, a proper prefix first: < 0, 0 or > 0.
 * Eight bytes a step, as big-endian words: keys of a few dozen bytes
 * compare in a few steps, without a call per compare (memcmp's call cost
 * 6 % of the lookups of absent string keys). */
static inline int key_cmp(const uint8_t *a, uint32_t alen, const uint8_t *b,
                          uint32_t blen)
{
    uint32_t m = alen < blen ? alen : blen, i = 0;
    for (; i + 8 <= m; i += 8) {
        uint64_t x = get_le64(a + i), y = get_le64(b + i);
        if (x != y)
            return __builtin_bswap64(x) < __builtin_bswap64(y) ? -1 : 1;
    }
    for (; i < m; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return (alen > blen) - (alen < blen);
}

/* Is a below b in memcmp order (a proper prefix first)? */
static inline int key_below(const uint8_t *a, uint32_t alen,
                            const uint8_t *b, uint32_t blen)
{
    return key_cmp(a, alen, b, blen) < 0;
}

static inline void put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void put_le24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
    put_le16(p, (uint16_t)v);
    put_le16(p + 2, (uint16_t)(v >> 16));
}

static inline void put_le40(uint8_t *p, uint64_t v)
{
    put_le32(p, (uint32_t)v);
    p[4] = (uint8_t)(v >> 32);
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
    put_le32(p, (uint32_t)v);
    put_le32(p + 4, (uint32_t)(v >> 32));
}

/* Bits needed for v: 0 for 0. */
static inline unsigned bit_len(uint64_t v)
{
    return v ? 64u - (unsigned)__builtin_clzll(v) : 0u;
}

static inline unsigned varint_len(uint64_t v)
{
    unsigned n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Writes v at p (room for VARINT_MAX bytes); returns the byte after it. */
static inline uint8_t *varint_put(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Reads a varint from *p without reading at or past limit; advances *p.
 * Returns 0, or -1 if the bytes end first or the value overflows 64 bits. */
static inline int varint_get(const uint8_t **p, const uint8_t *limit,
                             uint64_t *v)
{
    const uint8_t *q = *p;
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (q >= limit)
            return -1;
        uint8_t b = *q++;
        if (shift == 63 && b > 1)
            return -1;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *p = q;
            *v = r;
            return 0;
        }
    }
    return -1;
}

#endif /* BONSAI_BYTES_H */

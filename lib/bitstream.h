/* SPDX-License-Identifier: MIT */
/*
 * bitstream.h - little-endian bit streams of fixed-width numbers.
 *
 * The u64 key sections pack their numbers this way (format.md): the first
 * number in the low bits of the first byte, each next one above it, the
 * unused high bits of the last byte zero.
 */
#ifndef BONSAI_BITSTREAM_H
#define BONSAI_BITSTREAM_H

#include <stdint.h>

#include "bytes.h"

/* The width-bit number at bit pos of a little-endian bit stream starting
 * at s.  The caller guarantees that those bits lie before end. */
static inline uint64_t get_bits(const uint8_t *s, const uint8_t *end,
                                uint64_t pos, unsigned width)
{
    if (width == 0)
        return 0;
    const uint8_t *q = s + (pos >> 3);
    unsigned sh = (unsigned)(pos & 7);
    uint64_t v = 0;
    if (end - q >= 8) {
        v = get_le64(q) >> sh;
        if (sh + width > 64) /* the 9th byte; sh >= 1 here */
            v |= (uint64_t)q[8] << (64 - sh);
    } else { /* near the end: only the bytes that hold the bits */
        unsigned nb = (sh + width + 7) >> 3;
        for (unsigned i = 0; i < nb; i++)
            v |= (uint64_t)q[i] << (8 * i);
        v >>= sh;
    }
    return width == 64 ? v : v & ((UINT64_C(1) << width) - 1);
}

/* Appends width-bit numbers to a little-endian bit stream. */
typedef struct bitw {
    uint8_t *p;
    uint64_t acc; /* bits not yet written, the oldest lowest */
    unsigned n;   /* how many; < 64 between calls */
} bitw;

/* Appends v's low width bits; whole 64-bit words are written as they
 * fill (a byte at a time cost a random fill's encode a third more). */
static inline void bitw_put(bitw *w, uint64_t v, unsigned width)
{
    if (width == 0)
        return;
    w->acc |= v << w->n;
    if (w->n + width >= 64) { /* acc is full: write it, keep v's rest */
        unsigned used = 64 - w->n;
        put_le64(w->p, w->acc);
        w->p += 8;
        w->acc = used < 64 ? v >> used : 0;
        w->n = w->n + width - 64;
    } else {
        w->n += width;
    }
}

static inline uint8_t *bitw_end(bitw *w)
{
    /* the last bytes, the high bits of the last one zero */
    for (; w->n > 0; w->n = w->n > 8 ? w->n - 8 : 0) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
    }
    return w->p;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * compress.h - node compression: one call to compress a buffer, one to
 * decompress it, one to size buffers, over the codecs of bonsai.h
 * (BONSAI_COMPRESS_NONE, _LZ4, _ZLIB).
 *
 * PURE: no I/O, no global state; thread-safe.  LZ4 allocates nothing;
 * zlib allocates its stream state inside each call and frees it before
 * returning.
 *
 * The compressed bytes carry no header, length or checksum: the caller's
 * envelope stores the codec, the exact compressed length and the raw
 * length, and checks the raw image (node images carry their own CRC-32C).
 *   LZ4   one LZ4 block (LZ4_compress_default), not the LZ4 frame format
 *   ZLIB  one raw deflate stream (RFC 1951: no zlib header, no adler32)
 *   NONE  never compresses; "decompressing" it is a bounded copy
 */
#ifndef BONSAI_COMPRESS_H
#define BONSAI_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

/* Compresses src[0..n) into dst (cap bytes).  Returns 0 with *out_len set
 * (always < n), BONSAI_NOTFOUND if the result would not be smaller than n
 * or does not fit in cap bytes (the caller stores the bytes raw; codec
 * NONE always gives this), BONSAI_INVALID for an unknown codec, a zlib
 * level outside 0..9, n beyond the codec's range (LZ4: 0x7E000000 bytes,
 * zlib: UINT_MAX) or a NULL pointer with a non-zero length, BONSAI_NOMEM.
 * level: zlib 1..9, 0 = 6; ignored by the other codecs.  A cap of n - 1
 * is enough: the result never uses more.  On an error dst holds
 * unspecified bytes in [0, cap). */
int bx_compress(unsigned codec, int level, const uint8_t *src, size_t n,
                uint8_t *dst, size_t cap, size_t *out_len);

/* Decompresses src[0..n), which must be exactly the bytes bx_compress
 * wrote, into exactly raw_len bytes of dst.  Returns 0, BONSAI_CORRUPT if
 * the input is malformed, does not decode to exactly raw_len bytes, has
 * bytes left over after its end, or a length is beyond the codec's range,
 * BONSAI_INVALID for an unknown codec or a NULL pointer with a non-zero
 * length, BONSAI_NOMEM (zlib).  Never reads outside src[0..n) nor writes
 * outside dst[0..raw_len); on an error dst holds unspecified bytes.
 * Decoding to raw_len bytes does not prove they are the bytes compressed:
 * raw deflate and LZ4 have no checksum, check the result. */
int bx_decompress(unsigned codec, const uint8_t *src, size_t n,
                  uint8_t *dst, size_t raw_len);

/* Upper bound of the codec's compressed size for n input bytes (to size
 * buffers; NONE: n).  0 for an unknown codec or n beyond its range. */
size_t bx_compress_bound(unsigned codec, size_t n);

#endif /* BONSAI_COMPRESS_H */

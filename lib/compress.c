/* SPDX-License-Identifier: MIT */
/*
 * compress.c - owns bonsai's use of LZ4 and zlib: which calls, which stream
 * format, which size limits.  Contract: bx_decompress never reads outside
 * src[0..n) nor writes outside dst[0..raw_len), and returns 0 only for
 * input that is one whole, well-formed stream of exactly raw_len bytes.
 *
 * Choices:
 *  - LZ4: one block, LZ4_compress_default / LZ4_decompress_safe.  The safe
 *    decoder rejects input left over after the last sequence, but (1.9.4)
 *    accepts a match offset of 0, which copies destination bytes not yet
 *    written: wrong output, still inside dst; the caller's CRC rejects it.
 *  - zlib: raw deflate (windowBits negative): no 2-byte header and no
 *    4-byte adler32, since the envelope records the codec and node images
 *    carry their own CRC-32C.  The compressor uses the smallest window
 *    that holds the whole input (less memory, the same output); the
 *    decompressor accepts any window up to 32 KiB.
 *  - "Not smaller" is found by the codec itself: the output room is
 *    clamped to n - 1 bytes, so a result that would not shrink simply does
 *    not fit and no scratch buffer is needed.
 */
#define ZLIB_CONST
#include "compress.h"

#include <limits.h>
#include <string.h>

#include <lz4.h>
#include <zlib.h>

#include "bonsai.h"

#define ZLIB_DEFAULT_LEVEL 6
#define ZLIB_MIN_WBITS 9      /* zlib's smallest raw deflate window */
#define ZLIB_MEM_LEVEL 8      /* zlib's default hash table size */
#define DEFLATE_LOOKAHEAD 262 /* MAX_MATCH + MIN_MATCH + 1: a match may
                                 reach back window - 262 bytes at most */

/* Largest input (and output) the codec takes; 0 for an unknown codec. */
static size_t max_len(unsigned codec)
{
    switch (codec) {
    case BONSAI_COMPRESS_NONE:
        return SIZE_MAX;
    case BONSAI_COMPRESS_LZ4:
        return LZ4_MAX_INPUT_SIZE;
    case BONSAI_COMPRESS_ZLIB:
        return UINT_MAX; /* z_stream's avail_in / avail_out are uInt */
    default:
        return 0;
    }
}

/* ---- LZ4 ------------------------------------------------------------------ */

static int lz4_compress(const uint8_t *src, size_t n, uint8_t *dst,
                        size_t cap, size_t *out_len)
{
    /* n <= LZ4_MAX_INPUT_SIZE and cap < n: both fit in an int */
    int got = LZ4_compress_default((const char *)src, (char *)dst, (int)n,
                                   (int)cap);
    if (got <= 0)
        return BONSAI_NOTFOUND;
    *out_len = (size_t)got;
    return 0;
}

static int lz4_decompress(const uint8_t *src, size_t n, uint8_t *dst,
                          size_t raw_len)
{
    int got = LZ4_decompress_safe((const char *)src, (char *)dst, (int)n,
                                  (int)raw_len);
    return got >= 0 && (size_t)got == raw_len ? 0 : BONSAI_CORRUPT;
}

/* ---- zlib (raw deflate) --------------------------------------------------- */

/* The smallest window whose match distance covers all n bytes. */
static int deflate_wbits(size_t n)
{
    int w = ZLIB_MIN_WBITS;
    while (w < MAX_WBITS && ((size_t)1 << w) - DEFLATE_LOOKAHEAD < n)
        w++;
    return w;
}

/* Runs deflate to the end of the stream, inside dst.  Returns Z_STREAM_END
 * when the whole stream fit, Z_BUF_ERROR when it did not, Z_STREAM_ERROR
 * on misuse. */
static int deflate_finish(z_stream *zs)
{
    uint8_t spare;
    int rc;
    do
        rc = deflate(zs, Z_FINISH);
    while (rc == Z_OK && zs->avail_out > 0);
    if (rc != Z_OK)
        return rc;
    /* dst is full, and the stream may have ended exactly there: deflate
     * tells only on another call, which needs room.  Lend it one byte; if
     * the byte is used, the stream did not fit. */
    zs->next_out = &spare;
    zs->avail_out = 1;
    rc = deflate(zs, Z_FINISH);
    return rc == Z_STREAM_END && zs->avail_out == 1 ? rc : Z_BUF_ERROR;
}

static int zlib_compress(int level, const uint8_t *src, size_t n,
                         uint8_t *dst, size_t cap, size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs); /* default allocator */
    int rc = deflateInit2(&zs, level ? level : ZLIB_DEFAULT_LEVEL,
                          Z_DEFLATED, -deflate_wbits(n), ZLIB_MEM_LEVEL,
                          Z_DEFAULT_STRATEGY);
    if (rc != Z_OK)
        return rc == Z_MEM_ERROR ? BONSAI_NOMEM : BONSAI_INVALID;
    zs.next_in = src;
    zs.avail_in = (uInt)n; /* n <= UINT_MAX and cap < n */
    zs.next_out = dst;
    zs.avail_out = (uInt)cap;
    rc = deflate_finish(&zs);
    size_t got = zs.total_out;
    deflateEnd(&zs);
    if (rc == Z_STREAM_END) {
        *out_len = got;
        return 0;
    }
    return rc == Z_BUF_ERROR ? BONSAI_NOTFOUND : BONSAI_INVALID;
}

static int zlib_decompress(const uint8_t *src, size_t n, uint8_t *dst,
                           size_t raw_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.next_in = src;
    zs.avail_in = (uInt)n; /* both checked against UINT_MAX */
    int rc = inflateInit2(&zs, -MAX_WBITS);
    if (rc != Z_OK)
        return rc == Z_MEM_ERROR ? BONSAI_NOMEM : BONSAI_INVALID;
    zs.next_out = dst;
    zs.avail_out = (uInt)raw_len;
    rc = inflate(&zs, Z_FINISH);
    /* the stream ends, exactly at the end of both buffers */
    int exact = rc == Z_STREAM_END && zs.avail_in == 0 && zs.avail_out == 0;
    inflateEnd(&zs);
    if (exact)
        return 0;
    return rc == Z_MEM_ERROR ? BONSAI_NOMEM : BONSAI_CORRUPT;
}

/* ---- the API -------------------------------------------------------------- */

int bx_compress(unsigned codec, int level, const uint8_t *src, size_t n,
                uint8_t *dst, size_t cap, size_t *out_len)
{
    size_t max = max_len(codec);
    if (max == 0 || !out_len || (!src && n) || (!dst && cap))
        return BONSAI_INVALID;
    if (codec == BONSAI_COMPRESS_ZLIB && (level < 0 || level > 9))
        return BONSAI_INVALID;
    if (n > max)
        return BONSAI_INVALID;
    if (cap >= n)
        cap = n ? n - 1 : 0; /* a result must be smaller than n */
    if (cap == 0 || codec == BONSAI_COMPRESS_NONE)
        return BONSAI_NOTFOUND;
    if (codec == BONSAI_COMPRESS_LZ4)
        return lz4_compress(src, n, dst, cap, out_len);
    return zlib_compress(level, src, n, dst, cap, out_len);
}

int bx_decompress(unsigned codec, const uint8_t *src, size_t n,
                  uint8_t *dst, size_t raw_len)
{
    static const uint8_t no_src[1];
    uint8_t no_dst[1]; /* stands in for a NULL dst of 0 bytes */
    size_t max = max_len(codec);
    if (max == 0 || (!src && n) || (!dst && raw_len))
        return BONSAI_INVALID;
    if (n > max || raw_len > max)
        return BONSAI_CORRUPT;
    if (!src)
        src = no_src;
    if (!dst)
        dst = no_dst;
    switch (codec) {
    case BONSAI_COMPRESS_LZ4:
        return lz4_decompress(src, n, dst, raw_len);
    case BONSAI_COMPRESS_ZLIB:
        return zlib_decompress(src, n, dst, raw_len);
    default: /* NONE: the bytes are the raw image */
        if (n != raw_len)
            return BONSAI_CORRUPT;
        memcpy(dst, src, n);
        return 0;
    }
}

size_t bx_compress_bound(unsigned codec, size_t n)
{
    if (n > max_len(codec))
        return 0;
    switch (codec) {
    case BONSAI_COMPRESS_LZ4:
        return (size_t)LZ4_compressBound((int)n);
    case BONSAI_COMPRESS_ZLIB:
        return (size_t)compressBound((uLong)n); /* covers the zlib wrapper
                                                   too, so raw deflate */
    default:
        return n;
    }
}

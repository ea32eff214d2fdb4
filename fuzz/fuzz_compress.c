/* SPDX-License-Identifier: MIT */
/*
 * fuzz_compress.c - the codec wrappers (lib/compress.c) on arbitrary bytes.
 *
 * Input:
 *   bytes 0..2  raw_len, little-endian, low 20 bits (0 .. 1 MiB - 1)
 *   byte 3      zlib level for the round trips (value % 10)
 *   4..         the compressed stream, n bytes
 *
 * Each input goes through bx_decompress with every codec (LZ4, ZLIB,
 * NONE) and an unknown one, into a buffer of exactly raw_len bytes (NULL
 * when raw_len is 0) from a source of exactly n bytes (NULL when 0), so
 * any access outside either is an ASan error.  Then round trips: what a
 * codec decoded, and the stream bytes themselves, are compressed, must
 * come out smaller than their input or be refused with BONSAI_NOTFOUND,
 * and must decompress back to the same bytes; compressing into a buffer
 * one byte short of the result is refused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "compress.h"

#include "fuzz_util.h"

#define FC_RAW_MASK 0xFFFFFu

static const char *fc_name(unsigned codec)
{
    return codec == BONSAI_COMPRESS_LZ4    ? "lz4"
           : codec == BONSAI_COMPRESS_ZLIB ? "zlib"
           : codec == BONSAI_COMPRESS_NONE ? "none"
                                           : "unknown";
}

static uint8_t *fc_dup(const uint8_t *p, size_t n)
{
    if (n == 0)
        return NULL;
    uint8_t *q = malloc(n);
    FZ_CHECK(q != NULL, "harness: out of memory");
    memcpy(q, p, n);
    return q;
}

/* Compresses src (n bytes) with codec and decompresses the result. */
static void fc_round_trip(unsigned codec, int level, const uint8_t *src,
                          size_t n, const char *what)
{
    size_t bound = bx_compress_bound(codec, n);
    FZ_CHECK(bound >= (codec == BONSAI_COMPRESS_NONE ? n : 1),
             "%s: bx_compress_bound(%s, %zu) = %zu", what, fc_name(codec), n,
             bound);
    uint8_t *out = malloc(bound);
    FZ_CHECK(out != NULL, "harness: out of memory");
    size_t clen = SIZE_MAX;
    int rc = bx_compress(codec, level, src, n, out, bound, &clen);
    FZ_CHECK(rc == 0 || rc == BONSAI_NOTFOUND || rc == BONSAI_NOMEM,
             "%s: bx_compress(%s, level %d, %zu bytes) -> %s", what,
             fc_name(codec), level, n, fz_err(rc));
    if (rc == 0) {
        FZ_CHECK(clen < n && codec != BONSAI_COMPRESS_NONE,
                 "%s: bx_compress(%s) made %zu bytes of %zu", what,
                 fc_name(codec), clen, n);
        uint8_t *back = malloc(n);
        FZ_CHECK(back != NULL, "harness: out of memory");
        uint8_t *exact = fc_dup(out, clen);
        rc = bx_decompress(codec, exact, clen, back, n);
        FZ_CHECK(rc == 0 && !memcmp(back, src, n),
                 "%s: %s round trip of %zu bytes -> %s%s", what,
                 fc_name(codec), n, fz_err(rc),
                 rc == 0 ? ", different bytes" : "");
        /* one byte short: refused, nothing written past it */
        if (clen > 1) {
            uint8_t *tight = malloc(clen - 1);
            FZ_CHECK(tight != NULL, "harness: out of memory");
            size_t tlen = 0;
            rc = bx_compress(codec, level, src, n, tight, clen - 1, &tlen);
            FZ_CHECK(rc == BONSAI_NOTFOUND || rc == BONSAI_NOMEM ||
                         (rc == 0 && tlen < clen),
                     "%s: bx_compress(%s) into %zu bytes (needs %zu) -> %s",
                     what, fc_name(codec), clen - 1, clen, fz_err(rc));
            free(tight);
        }
        free(exact);
        free(back);
    }
    free(out);
}

int fuzz_compress(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t raw_len = (data[0] | (size_t)data[1] << 8 |
                      (size_t)data[2] << 16) & FC_RAW_MASK;
    int level = data[3] % 10;
    size_t n = size - 4;
    uint8_t *src = fc_dup(data + 4, n);
    uint8_t *dst = raw_len ? malloc(raw_len) : NULL;
    FZ_CHECK(!raw_len || dst, "harness: out of memory");

    static const unsigned codecs[] = {BONSAI_COMPRESS_LZ4,
                                      BONSAI_COMPRESS_ZLIB,
                                      BONSAI_COMPRESS_NONE};
    for (size_t c = 0; c < sizeof codecs / sizeof codecs[0]; c++) {
        unsigned codec = codecs[c];
        int rc = bx_decompress(codec, src, n, dst, raw_len);
        FZ_CHECK(rc == 0 || rc == BONSAI_CORRUPT || rc == BONSAI_NOMEM,
                 "bx_decompress(%s, %zu bytes, raw_len %zu) -> %s",
                 fc_name(codec), n, raw_len, fz_err(rc));
        if (rc == 0 && codec == BONSAI_COMPRESS_NONE)
            FZ_CHECK(n == raw_len && (n == 0 || !memcmp(dst, src, n)),
                     "bx_decompress(none) is not a copy");
        if (rc == 0 && codec != BONSAI_COMPRESS_NONE && raw_len > 0) {
            /* what decoded must survive a round trip in every codec */
            fc_round_trip(codec, level, dst, raw_len, "decoded bytes");
            if (c == 0)
                fc_round_trip(BONSAI_COMPRESS_ZLIB, level, dst, raw_len,
                              "lz4-decoded bytes");
        }
    }
    int rc = bx_decompress(BONSAI_COMPRESS_ZLIB + 1 + data[3], src, n, dst,
                           raw_len);
    FZ_CHECK(rc == BONSAI_INVALID, "bx_decompress(unknown codec %u) -> %s",
             BONSAI_COMPRESS_ZLIB + 1 + data[3], fz_err(rc));

    /* the stream bytes as data to compress */
    if (n > 0) {
        fc_round_trip(BONSAI_COMPRESS_LZ4, 0, src, n, "input bytes");
        fc_round_trip(BONSAI_COMPRESS_ZLIB, level, src, n, "input bytes");
        size_t clen;
        uint8_t none_out[1];
        rc = bx_compress(BONSAI_COMPRESS_NONE, 0, src, n, none_out, 1, &clen);
        FZ_CHECK(rc == BONSAI_NOTFOUND, "bx_compress(none) -> %s",
                 fz_err(rc));
    }
    free(dst);
    free(src);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_compress(data, size);
}
#endif

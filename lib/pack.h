/* SPDX-License-Identifier: MIT */
/*
 * pack.h - the compression envelope of node images, and a small cache of
 * unpacked images for readers.
 *
 * A packed image keeps a 16-byte outer header so the file stays walkable
 * without decompressing:
 *   0 u8 type   1 u8 flags | PK_F_PACKED   2 u16 count
 *   4 u32 length (stored bytes)   8 u32 crc32c of the stored bytes (this
 *   field zero)   12 u32 raw length (the whole raw image)
 *   16 u8 codec (BONSAI_COMPRESS_LZ4 or _ZLIB)   17.. the compressed raw
 *   image, header and all, to `length`.
 * The raw image inside carries its own header and checksum.
 */
#ifndef BONSAI_PACK_H
#define BONSAI_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

#define PK_F_PACKED 0x10u
#define PK_HEADER 17u
#define PK_MAX_RAW (1u << 24) /* a raw image is never larger */
#define PK_ENTRIES 8u

/* What a store accepts of a packed image: its own codec (the header's;
 * none: no packed image at all), and a raw image no larger than its
 * writer packs (pk_raw_limit), so a few stored bytes never inflate into
 * more than a node's worth of memory and time. */
typedef struct pk_rules {
    unsigned codec;
    uint32_t max_raw;
} pk_rules;

/* The largest raw image a store of node_bytes packs: twice node_bytes
 * (its split target, which a size estimate may overrun before the split)
 * plus 4 KiB for a node that cannot split (one entry with a 1024-byte key,
 * a branch of three 1024-byte separators).  A writer stores a larger
 * image raw. */
uint32_t pk_raw_limit(uint32_t node_bytes);

/* Is this (at least 16-byte) image packed? */
int pk_is_packed(const uint8_t *img);

/* Packs a raw image into out (cap bytes).  0 with *len set, or
 * BONSAI_NOTFOUND when the packed form would not be smaller (store it
 * raw), BONSAI_NOMEM, BONSAI_INVALID. */
int pk_pack(unsigned codec, int level, const uint8_t *raw, size_t raw_len,
            uint8_t *out, size_t cap, size_t *len);

/* Checks a packed image's outer header and checksum within avail bytes
 * and against the store's rules, and gives its raw length.  0 or
 * BONSAI_CORRUPT. */
int pk_check(const uint8_t *img, size_t avail, const pk_rules *r,
             uint32_t *raw_len);

/* Unpacks a checked image into out (raw_len bytes).  0, BONSAI_CORRUPT. */
int pk_unpack(const uint8_t *img, uint8_t *out, uint32_t raw_len);

/* Recently unpacked images, keyed by page and stored checksum, so an image
 * rewritten in place is never served stale; and bytes copied out of them
 * to outlive their entries (pk_keep). */
typedef struct pk_cache {
    struct pk_entry {
        uint64_t pgno;
        uint32_t crc;
        uint32_t len;
        uint64_t used;
        uint8_t *buf;
        size_t cap;
    } ent[PK_ENTRIES];
    uint64_t clock;
    struct pk_chunk *kept; /* newest first */
} pk_cache;

/* The raw form of the image at img (page pgno, avail bytes): img itself
 * when not packed, else (checked by pk_check with r) a cache buffer
 * (valid until PK_ENTRIES more unpacks).  0, BONSAI_CORRUPT or
 * BONSAI_NOMEM. */
int pk_view(pk_cache *c, const pk_rules *r, uint64_t pgno,
            const uint8_t *img, size_t avail, const uint8_t **raw,
            size_t *raw_avail);

void pk_cache_free(pk_cache *c);

/* A run of lookups whose results must all stay valid (a batch of gets)
 * meets more images than the cache has entries.  When *data (len bytes)
 * lies in an entry's buffer, pk_keep copies it into memory of the cache
 * that lasts until pk_keep_reset or pk_cache_free, and points *data at
 * the copy; else it leaves *data alone.  0 or BONSAI_NOMEM. */
int pk_keep(pk_cache *c, const uint8_t **data, size_t len);

/* Lets the next pk_keep reuse the memory of those before (their copies
 * are then no longer valid). */
void pk_keep_reset(pk_cache *c);

#endif

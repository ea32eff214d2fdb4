/* SPDX-License-Identifier: MIT */
/*
 * meta.h - the file header and the two meta slots (format.md, "Header"
 * and "Meta slots").  Pure encode/decode with checksums; no I/O.
 */
#ifndef BONSAI_META_H
#define BONSAI_META_H

#include <stdint.h>

#include "node.h"

/* 5: u64 keys in counted groups (image flag 0x80, u64groups.h); 4: u64
 * groups with base 0 where that needs no wider width (image flag 0x40);
 * 3: u64 key sections in the indexed form (format.md, "Node images"); 2:
 * meta slots record the store's cap (cap_pages).  Files of versions 1 to
 * 4 still open; a writer raises their header to 5 (bx_upgrade_header)
 * before it writes an image. */
#define BX_FORMAT_VERSION 5u
#define BX_HEADER_OFF 0u
#define BX_HEADER_SIZE 32u
#define BX_META_OFF(slot) (512u + 512u * (slot))
#define BX_META_SIZE 52u
#define BX_HEAD_BYTES 4096u /* header and meta area before the data */
/* The allocation granule: a power of two in this range.  The header and
 * meta slots do not depend on it (they sit below BX_HEAD_BYTES). */
#define BX_PAGE_MIN 64u
#define BX_PAGE_MAX 65536u
/* page_size 0 picks 128 bytes, for a file as in memory: an image wastes
 * 64 bytes on average at its end.  A file's images then share disk
 * sectors; what that relies on is in bonsai.h (page_size). */
#define BX_PAGE_DEFAULT 128u

typedef struct bx_header {
    uint32_t version;
    uint32_t page_size;
    uint32_t node_bytes;
    uint32_t node_entries;
    uint32_t flags;
} bx_header;

typedef struct bx_meta {
    uint64_t txn_id;
    uint64_t end;         /* high-water page number */
    bn_ext cat_root;      /* catalog root, pgno 0 when empty */
    uint8_t cat_depth;
    uint64_t cat_count;   /* maps in the catalog */
    uint64_t cap_pages;   /* the store's cap in pages; 0: none recorded */
} bx_meta;

/* cap_pages is a u40: a larger cap is recorded as this (2^40 pages are
 * more than a store of 40-bit page numbers can use anyway). */
#define BX_CAP_PAGES_MAX ((UINT64_C(1) << 40) - 1)

void bx_header_encode(const bx_header *h, uint8_t out[BX_HEADER_SIZE]);
/* Returns 0, BONSAI_CORRUPT (magic, checksum, bad field) or
 * BONSAI_FORMAT_UNSUPPORTED (a newer format). */
int bx_header_decode(const uint8_t *in, bx_header *h);

void bx_meta_encode(const bx_meta *m, uint8_t out[BX_META_SIZE]);
/* Returns 0 or BONSAI_CORRUPT. */
int bx_meta_decode(const uint8_t *in, bx_meta *m);

/* The newest valid meta slot of a head area (both slots, from byte 0):
 * a slot that fails its checksum, or ends below first_pgno, is skipped.
 * 0, or BONSAI_CORRUPT when neither is valid. */
int bx_meta_pick(const uint8_t *head, uint64_t first_pgno, bx_meta *out);

/* A cap of cap bytes in pages, as a meta slot records it. */
uint64_t bx_cap_pages_of(uint64_t cap, uint32_t page_size);

/* Map records in the catalog: kind, flags, depth, root, count. */
#define BX_RECORD_SIZE 24u
void bx_record_encode(unsigned kind, unsigned flags, unsigned depth,
                      bn_ext root, uint64_t count,
                      uint8_t out[BX_RECORD_SIZE]);
int bx_record_decode(const uint8_t *in, uint32_t len, unsigned *kind,
                     unsigned *flags, unsigned *depth, bn_ext *root,
                     uint64_t *count);

#endif

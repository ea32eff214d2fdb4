/* SPDX-License-Identifier: MIT */
/*
 * meta.c - header, meta slot and map record bytes.
 *
 * header (32 bytes at offset 0):
 *   0 magic "bonsai\x1a\n"   8 u32 version   12 u32 page_size
 *   16 u32 node_bytes   20 u32 node_entries
 *   24 u32 flags: bits 0..3 node compression codec (0 none, 1 lz4,
 *          2 zlib), bits 4..7 zlib level (0 = default); others zero
 *   28 u32 crc32c of bytes 0..27
 * meta slot (52 bytes at offset 512 or 1024):
 *   0 u32 magic "meta"   4 u32 zero   8 u64 txn_id   16 u64 end
 *   24 u40 catalog root pgno   29 u24 catalog root npages
 *   32 u8 catalog depth   33 u40 cap in pages (0: none recorded)
 *   38..39 zero   40 u64 catalog count (maps)
 *   48 u32 crc32c of bytes 0..47
 * map record (24 bytes, the catalog's value for a map name):
 *   0 u8 kind   1 u8 flags   2 u8 depth   3 u8 zero
 *   4 u40 root pgno   9 u24 root npages   12 u64 count   20 u32 zero
 */
#include "meta.h"

#include <string.h>

#include "bonsai.h"
#include "bytes.h"
#include "checksum.h"

static const uint8_t magic[8] = {'b', 'o', 'n', 's', 'a', 'i', 0x1a, '\n'};

void bx_header_encode(const bx_header *h, uint8_t out[BX_HEADER_SIZE])
{
    memset(out, 0, BX_HEADER_SIZE);
    memcpy(out, magic, 8);
    put_le32(out + 8, h->version);
    put_le32(out + 12, h->page_size);
    put_le32(out + 16, h->node_bytes);
    put_le32(out + 20, h->node_entries);
    put_le32(out + 24, h->flags);
    put_le32(out + 28, bonsai_crc32c(0, out, 28));
}

int bx_header_decode(const uint8_t *in, bx_header *h)
{
    if (memcmp(in, magic, 8) != 0)
        return BONSAI_CORRUPT;
    if (get_le32(in + 28) != bonsai_crc32c(0, in, 28))
        return BONSAI_CORRUPT;
    h->version = get_le32(in + 8);
    h->page_size = get_le32(in + 12);
    h->node_bytes = get_le32(in + 16);
    h->node_entries = get_le32(in + 20);
    h->flags = get_le32(in + 24);
    if (h->version > BX_FORMAT_VERSION)
        return BONSAI_FORMAT_UNSUPPORTED;
    if (h->version == 0 || (h->flags & ~0xFFu) || (h->flags & 0xF) > 2 ||
        (h->flags >> 4 & 0xF) > 9)
        return BONSAI_CORRUPT;
    uint32_t p = h->page_size;
    if (p < BX_PAGE_MIN || p > BX_PAGE_MAX || (p & (p - 1)))
        return BONSAI_CORRUPT;
    if (h->node_bytes < 256 || h->node_bytes > (1u << 20) ||
        h->node_entries < 2 || h->node_entries > BONSAI_MAX_NODE_ENTRIES)
        return BONSAI_CORRUPT;
    return 0;
}

void bx_meta_encode(const bx_meta *m, uint8_t out[BX_META_SIZE])
{
    memset(out, 0, BX_META_SIZE);
    memcpy(out, "meta", 4);
    put_le64(out + 8, m->txn_id);
    put_le64(out + 16, m->end);
    put_le40(out + 24, m->cat_root.pgno);
    put_le24(out + 29, m->cat_root.npages);
    out[32] = m->cat_depth;
    put_le40(out + 33, m->cap_pages);
    put_le64(out + 40, m->cat_count);
    put_le32(out + 48, bonsai_crc32c(0, out, 48));
}

int bx_meta_decode(const uint8_t *in, bx_meta *m)
{
    if (memcmp(in, "meta", 4) != 0 ||
        get_le32(in + 48) != bonsai_crc32c(0, in, 48))
        return BONSAI_CORRUPT;
    m->txn_id = get_le64(in + 8);
    m->end = get_le64(in + 16);
    m->cat_root.pgno = get_le40(in + 24);
    m->cat_root.npages = get_le24(in + 29);
    m->cat_depth = in[32];
    m->cap_pages = get_le40(in + 33);
    m->cat_count = get_le64(in + 40);
    if ((m->cat_root.pgno == 0) != (m->cat_depth == 0))
        return BONSAI_CORRUPT;
    if (m->cat_depth > 32)
        return BONSAI_CORRUPT;
    return 0;
}

int bx_meta_pick(const uint8_t *head, uint64_t first_pgno, bx_meta *out)
{
    bx_meta m[2];
    int ok[2];
    for (unsigned s = 0; s < 2; s++)
        ok[s] = bx_meta_decode(head + BX_META_OFF(s), &m[s]) == 0 &&
                m[s].end >= first_pgno;
    if (!ok[0] && !ok[1])
        return BONSAI_CORRUPT;
    *out = m[!ok[0] || (ok[1] && m[1].txn_id > m[0].txn_id)];
    return 0;
}

uint64_t bx_cap_pages_of(uint64_t cap, uint32_t page_size)
{
    uint64_t pages = cap / page_size + (cap % page_size != 0);
    return pages < BX_CAP_PAGES_MAX ? pages : BX_CAP_PAGES_MAX;
}

void bx_record_encode(unsigned kind, unsigned flags, unsigned depth,
                      bn_ext root, uint64_t count,
                      uint8_t out[BX_RECORD_SIZE])
{
    memset(out, 0, BX_RECORD_SIZE);
    out[0] = (uint8_t)kind;
    out[1] = (uint8_t)flags;
    out[2] = (uint8_t)depth;
    put_le40(out + 4, root.pgno);
    put_le24(out + 9, root.npages);
    put_le64(out + 12, count);
}

int bx_record_decode(const uint8_t *in, uint32_t len, unsigned *kind,
                     unsigned *flags, unsigned *depth, bn_ext *root,
                     uint64_t *count)
{
    if (len != BX_RECORD_SIZE)
        return BONSAI_CORRUPT;
    *kind = in[0];
    *flags = in[1];
    *depth = in[2];
    root->pgno = get_le40(in + 4);
    root->npages = get_le24(in + 9);
    *count = get_le64(in + 12);
    if (*kind != BONSAI_KEY_U64 && *kind != BONSAI_KEY_BYTES)
        return BONSAI_CORRUPT;
    if (*depth > 32 || (root->pgno == 0) != (*depth == 0))
        return BONSAI_CORRUPT;
    return 0;
}

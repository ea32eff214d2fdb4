/* SPDX-License-Identifier: MIT */
/*
 * pack.c - packing node images (see pack.h for the bytes) and the reader's
 * cache of unpacked ones.  Pure but for the cache's own buffers.
 */
#include "pack.h"

#include <stdlib.h>
#include <string.h>

#include "bonsai.h"
#include "bytes.h"
#include "checksum.h"
#include "compress.h"

int pk_is_packed(const uint8_t *img)
{
    return (img[1] & PK_F_PACKED) != 0;
}

uint32_t pk_raw_limit(uint32_t node_bytes)
{
    uint64_t limit = 2 * (uint64_t)node_bytes + 4096;
    return limit < PK_MAX_RAW ? (uint32_t)limit : PK_MAX_RAW;
}

int pk_pack(unsigned codec, int level, const uint8_t *raw, size_t raw_len,
            uint8_t *out, size_t cap, size_t *len)
{
    if (raw_len < BN_HEADER_SIZE || raw_len > PK_MAX_RAW)
        return BONSAI_INVALID;
    if (cap <= PK_HEADER)
        return BONSAI_NOTFOUND; /* no room to gain anything: store raw */
    size_t body;
    int rc = bx_compress(codec, level, raw, raw_len, out + PK_HEADER,
                         cap - PK_HEADER, &body);
    if (rc)
        return rc;
    if (PK_HEADER + body >= raw_len)
        return BONSAI_NOTFOUND;
    memcpy(out, raw, 4); /* type, flags, count */
    out[1] |= PK_F_PACKED;
    put_le32(out + 4, (uint32_t)(PK_HEADER + body));
    put_le32(out + 8, 0);
    put_le32(out + 12, (uint32_t)raw_len);
    out[16] = (uint8_t)codec;
    *len = PK_HEADER + body;
    put_le32(out + 8, bonsai_crc32c(0, out, *len));
    return 0;
}

int pk_check(const uint8_t *img, size_t avail, const pk_rules *r,
             uint32_t *raw_len)
{
    if (avail < PK_HEADER || !pk_is_packed(img))
        return BONSAI_CORRUPT;
    uint32_t len = get_le32(img + 4), raw = get_le32(img + 12);
    if (len < PK_HEADER || len > avail || raw < BN_HEADER_SIZE ||
        raw > PK_MAX_RAW || raw > r->max_raw)
        return BONSAI_CORRUPT;
    if (img[16] != BONSAI_COMPRESS_LZ4 && img[16] != BONSAI_COMPRESS_ZLIB)
        return BONSAI_CORRUPT;
    if (img[16] != r->codec)
        return BONSAI_CORRUPT; /* only the codec the store was made with */
    uint32_t crc = bonsai_crc32c(0, img, 8);
    static const uint8_t zero[4] = {0};
    crc = bonsai_crc32c(crc, zero, 4);
    crc = bonsai_crc32c(crc, img + 12, len - 12);
    if (crc != get_le32(img + 8))
        return BONSAI_CORRUPT;
    *raw_len = raw;
    return 0;
}

int pk_unpack(const uint8_t *img, uint8_t *out, uint32_t raw_len)
{
    uint32_t len = get_le32(img + 4);
    int rc = bx_decompress(img[16], img + PK_HEADER, len - PK_HEADER, out,
                           raw_len);
    if (rc)
        return rc == BONSAI_NOMEM ? rc : BONSAI_CORRUPT;
    /* the raw image must agree with its envelope */
    if ((out[0] != img[0]) || (out[1] | PK_F_PACKED) != img[1] ||
        memcmp(out + 2, img + 2, 2) != 0 || get_le32(out + 4) != raw_len)
        return BONSAI_CORRUPT;
    return 0;
}

static struct pk_entry *find_entry(pk_cache *c, uint64_t pgno, uint32_t crc)
{
    for (unsigned i = 0; i < PK_ENTRIES; i++)
        if (c->ent[i].buf && c->ent[i].pgno == pgno &&
            c->ent[i].crc == crc)
            return &c->ent[i];
    return NULL;
}

static struct pk_entry *oldest_entry(pk_cache *c)
{
    struct pk_entry *s = &c->ent[0];
    for (unsigned i = 1; i < PK_ENTRIES; i++)
        if (c->ent[i].used < s->used)
            s = &c->ent[i];
    return s;
}

int pk_view(pk_cache *c, const pk_rules *r, uint64_t pgno,
            const uint8_t *img, size_t avail, const uint8_t **raw,
            size_t *raw_avail)
{
    if (avail < BN_HEADER_SIZE || !pk_is_packed(img)) {
        *raw = img;
        *raw_avail = avail;
        return 0;
    }
    uint32_t raw_len;
    int rc = pk_check(img, avail, r, &raw_len);
    if (rc)
        return rc;
    uint32_t crc = get_le32(img + 8);
    struct pk_entry *s = find_entry(c, pgno, crc);
    if (!s) {
        s = oldest_entry(c);
        if (s->cap < raw_len) {
            uint8_t *b = realloc(s->buf, raw_len);
            if (!b)
                return BONSAI_NOMEM;
            s->buf = b;
            s->cap = raw_len;
        }
        s->pgno = pgno;
        s->crc = ~crc; /* not valid until unpacked */
        if ((rc = pk_unpack(img, s->buf, raw_len)))
            return rc;
        s->crc = crc;
        s->len = raw_len;
    }
    s->used = ++c->clock;
    *raw = s->buf;
    *raw_avail = s->len;
    return 0;
}

/* Bytes pk_keep copied: chunks growing from KEEP_FIRST to KEEP_LARGEST
 * (or a value's size); a reset keeps the newest if it is small. */
#define KEEP_FIRST ((size_t)64 << 10)
#define KEEP_LARGEST ((size_t)16 << 20)
#define KEEP_REUSED ((size_t)1 << 20)

struct pk_chunk {
    struct pk_chunk *next;
    size_t cap, used;
    uint8_t bytes[];
};

static void free_chunks(struct pk_chunk *k)
{
    while (k) {
        struct pk_chunk *next = k->next;
        free(k);
        k = next;
    }
}

void pk_cache_free(pk_cache *c)
{
    for (unsigned i = 0; i < PK_ENTRIES; i++)
        free(c->ent[i].buf);
    free_chunks(c->kept);
    memset(c, 0, sizeof *c);
}

/* Does p point into an entry's buffer?  (As integers: pointers into other
 * objects do not compare in C.) */
static int in_entry(const pk_cache *c, const uint8_t *p)
{
    uintptr_t a = (uintptr_t)p;
    for (unsigned i = 0; i < PK_ENTRIES; i++) {
        uintptr_t b = (uintptr_t)c->ent[i].buf;
        if (b && a >= b && a - b <= c->ent[i].cap)
            return 1;
    }
    return 0;
}

static int add_chunk(pk_cache *c, size_t len)
{
    size_t cap = c->kept ? c->kept->cap * 2 : KEEP_FIRST;
    if (cap > KEEP_LARGEST)
        cap = KEEP_LARGEST;
    if (cap < len)
        cap = len;
    struct pk_chunk *k = malloc(sizeof *k + cap);
    if (!k)
        return BONSAI_NOMEM;
    k->next = c->kept;
    k->cap = cap;
    k->used = 0;
    c->kept = k;
    return 0;
}

int pk_keep(pk_cache *c, const uint8_t **data, size_t len)
{
    if (!in_entry(c, *data))
        return 0;
    if (!c->kept || c->kept->cap - c->kept->used < len) {
        int rc = add_chunk(c, len);
        if (rc)
            return rc;
    }
    struct pk_chunk *k = c->kept;
    memcpy(k->bytes + k->used, *data, len);
    *data = k->bytes + k->used;
    k->used += len;
    return 0;
}

void pk_keep_reset(pk_cache *c)
{
    struct pk_chunk *k = c->kept;
    if (!k)
        return;
    free_chunks(k->next);
    k->next = NULL;
    k->used = 0;
    if (k->cap > KEEP_REUSED) {
        free(k);
        c->kept = NULL;
    }
}

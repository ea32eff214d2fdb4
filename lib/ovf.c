/* SPDX-License-Identifier: MIT */
/*
 * ovf.c - overflow values: a value too large to sit in its leaf, in a run
 * of its own (format in ovf.h).
 */
#include "ovf.h"

#include <string.h>

#include "bytes.h"
#include "checksum.h"

/* ---- overflow values --------------------------------------------------- */

int ovf_write(bonsai_db *db, const uint8_t *val, uint32_t vlen,
              uint8_t ref[BT_OVF_REF])
{
    uint32_t np = tree_pages_for(db, (uint64_t)OVF_HEADER + vlen);
    uint64_t pgno;
    int rc = alloc_get(&db->al, np, &pgno);
    if (rc)
        return rc;
    bn_ext e = {pgno, np};
    rc = extvec_push(&db->op_alloc, e);
    if (rc) {
        alloc_put(&db->al, e);
        return rc;
    }
    uint8_t *p = db->rg.base + pgno * db->page_size;
    memset(p, 0, OVF_HEADER);
    p[0] = OVF_TYPE;
    put_le32(p + 4, bonsai_crc32c(0, val, vlen));
    put_le64(p + 8, vlen);
    memcpy(p + OVF_HEADER, val, vlen);
    put_le64(ref, pgno);
    put_le32(ref + 8, np);
    put_le64(ref + 12, vlen);
    return 0;
}

int ovf_ext(const uint8_t *ref, uint32_t len, bn_ext *e,
            uint64_t *vlen)
{
    if (len != BT_OVF_REF)
        return BONSAI_CORRUPT;
    e->pgno = get_le64(ref);
    e->npages = get_le32(ref + 8);
    *vlen = get_le64(ref + 12);
    return 0;
}

int bt_value(bonsai_db *db, uint64_t end, const uint8_t *v, uint32_t len,
             unsigned vflag, bonsai_val *out)
{
    if (!(vflag & BN_VAL_OVERFLOW)) {
        out->data = v;
        out->size = len;
        return 0;
    }
    bn_ext e;
    uint64_t vlen;
    if (ovf_ext(v, len, &e, &vlen) || !tree_ext_ok(db, end, e))
        return BONSAI_CORRUPT;
    const uint8_t *p = tree_ext_ptr(db, e);
    if (p[0] != OVF_TYPE || get_le64(p + 8) != vlen ||
        vlen > (uint64_t)e.npages * db->page_size - OVF_HEADER)
        return BONSAI_CORRUPT;
    out->data = p + OVF_HEADER;
    out->size = (size_t)vlen;
    return 0;
}

/* A salvage reads only what its checksums vouch for: a value of flipped
 * bytes would pass for a good one. */
int bt_value_checked(bonsai_db *db, uint64_t end, const uint8_t *v,
                     uint32_t len, unsigned vflag, bonsai_val *out,
                     bn_ext *run)
{
    *run = (bn_ext){0, 0};
    int rc = bt_value(db, end, v, len, vflag, out);
    if (rc || !(vflag & BN_VAL_OVERFLOW))
        return rc;
    uint64_t vlen;
    ovf_ext(v, len, run, &vlen);
    const uint8_t *p = tree_ext_ptr(db, *run);
    if (bonsai_crc32c(0, out->data, out->size) != get_le32(p + 4))
        return BONSAI_CORRUPT;
    return 0;
}

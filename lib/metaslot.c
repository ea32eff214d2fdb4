/* SPDX-License-Identifier: MIT */
/* metaslot.c - the meta slots of an open store (metaslot.h). */
#include "metaslot.h"

#include <sched.h>
#include <string.h>

int bx_newest_meta(bonsai_db *db, bx_meta *out)
{
    uint8_t head[BX_META_OFF(1) + BX_META_SIZE];
    for (unsigned tries = 0; tries < 1000; tries++) {
        memcpy(head, db->rg.base, sizeof head);
        if (bx_meta_pick(head, db->first_pgno, out) == 0)
            return 0;
        sched_yield(); /* both torn: two commits overtook this read */
    }
    return BONSAI_CORRUPT;
}

int bx_write_meta(bonsai_db *db, const bx_meta *m)
{
    uint8_t buf[BX_META_SIZE];
    bx_meta_encode(m, buf);
    return db->io.pwrite(db->io.ctx, db->fd, buf, sizeof buf,
                         BX_META_OFF(m->txn_id & 1));
}

int bx_upgrade_header(bonsai_db *db)
{
    uint8_t buf[BX_HEADER_SIZE];
    bx_header h;
    if (db->format_version >= BX_FORMAT_VERSION || db->fd < 0)
        return 0;
    memcpy(buf, db->rg.base, sizeof buf);
    if (bx_header_decode(buf, &h) != 0)
        return BONSAI_CORRUPT;
    h.version = BX_FORMAT_VERSION;
    bx_header_encode(&h, buf);
    int rc = db->io.pwrite(db->io.ctx, db->fd, buf, sizeof buf, 0);
    if (rc == 0)
        rc = db->io.fsync(db->io.ctx, db->fd);
    if (rc == 0)
        db->format_version = BX_FORMAT_VERSION;
    return rc;
}

uint64_t bx_cap_pages(const bonsai_db *db)
{
    return bx_cap_pages_of(db->rg.cap, db->page_size);
}

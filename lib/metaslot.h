/* SPDX-License-Identifier: MIT */
/*
 * metaslot.h - reading and writing the meta slots of an open store
 * (metaslot.c), below the commit protocol that decides what they say
 * (txn.c) and the open that reads them first (db.c).
 */
#ifndef BONSAI_METASLOT_H
#define BONSAI_METASLOT_H

#include "internal.h"

/* The newest valid meta slot as the mapping shows it now, for a reader
 * beside a writer in another process: a slot caught being written fails
 * its checksum and is skipped.  0 or BONSAI_CORRUPT. */
int bx_newest_meta(bonsai_db *db, bx_meta *m);

/* Writes a meta slot (slot txn_id & 1) with the store's I/O. */
int bx_write_meta(bonsai_db *db, const bx_meta *m);

/* Raises the header of a file an older format version wrote to this
 * library's, before the first image of the newer form goes in (images of
 * both forms are read), so that an older library refuses the file
 * rather than misreading it.  0 or an I/O error. */
int bx_upgrade_header(bonsai_db *db);

/* The cap to record in a meta slot. */
uint64_t bx_cap_pages(const bonsai_db *db);

#endif

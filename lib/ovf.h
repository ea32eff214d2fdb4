/* SPDX-License-Identifier: MIT */
/*
 * ovf.h - overflow values (ovf.c): a value larger than a leaf keeps
 * inline sits in a run of pages of its own,
 *   0 u8 type 3   1 u8 zero   2 u16 zero   4 u32 crc32c of the value bytes
 *   8 u64 length  16 the value bytes
 * referenced from its leaf by BT_OVF_REF (20) bytes: u64 pgno, u32
 * npages, u64 length.  verify.c checks the same format.
 */
#ifndef BONSAI_OVF_H
#define BONSAI_OVF_H

#include "tree.h"

#define OVF_HEADER 16u
#define OVF_TYPE 3u

/* Writes val into a new run and its reference into ref. */
int ovf_write(bonsai_db *db, const uint8_t *val, uint32_t vlen,
              uint8_t ref[BT_OVF_REF]);

/* The run and length a reference of len bytes names; BONSAI_CORRUPT if it
 * is not one. */
int ovf_ext(const uint8_t *ref, uint32_t len, bn_ext *e, uint64_t *vlen);

#endif

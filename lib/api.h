/* SPDX-License-Identifier: MIT */
/*
 * api.h - the argument checks the data calls share (api.c, getbatch.c).
 */
#ifndef BONSAI_API_H
#define BONSAI_API_H

#include "internal.h"

/* A key as the map's kind reads it: 0, BONSAI_INVALID (no bytes behind
 * a non-empty key) or BONSAI_KEYSIZE. */
int api_key(unsigned kind, const bonsai_val *key, bn_key *out);

/* Is map a handle of a store, and txn (when given) of the same store?
 * 0 or BONSAI_INVALID. */
int api_map_ok(const bonsai_txn *txn, bonsai_map map);

/* The *_u64 calls' check: map is a handle of a u64-key map.  0,
 * BONSAI_INVALID or BONSAI_MAPKIND. */
int api_u64_ok(bonsai_map map);

#endif

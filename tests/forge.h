/* SPDX-License-Identifier: MIT */
/*
 * forge.h - store files built byte by byte from format.md, for tests of
 * what bonsai does with hostile files: every checksum valid, the structure
 * whatever the test wants (branches sharing a child, separators out of
 * order, records that lie, packed images of any codec and raw length).
 *
 * Nothing here calls the library's encoders: the header, meta slot, map
 * records and node images (u64 keys; the catalog's byte keys) are written
 * as format.md describes them, so a test does not inherit a bug of the
 * code it tests.  Only the CRC-32C and the codecs are the library's.
 *
 * A store is built in memory: images are placed one after another from
 * the first data page (tf_place), then tf_finish writes the catalog, the
 * header and meta slot 0, and tf_write puts the file on disk.  Failures
 * are Criterion assertions.
 */
#ifndef BONSAI_TEST_FORGE_H
#define BONSAI_TEST_FORGE_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

/* An image being built (malloc'd bytes). */
typedef struct tf_img {
    uint8_t *p;
    size_t n;
} tf_img;

/* A leaf value: inline bytes, or (overflow) a 20-byte reference. */
typedef struct tf_val {
    const void *p;
    uint32_t len;
    int overflow;
} tf_val;

typedef struct tf_store {
    uint8_t *buf;
    size_t cap;
    uint32_t page_size;
    uint32_t node_bytes;
    unsigned codec;   /* header flags bits 0..3 */
    uint64_t first;   /* first data page */
    uint64_t end;     /* the high-water mark: where the next run goes */
} tf_store;

/* A map for the catalog. */
typedef struct tf_map {
    const char *name;
    unsigned kind;
    unsigned flags;   /* record flags (0x01: overflow values) */
    unsigned depth;
    bn_ext root;
    uint64_t count;
} tf_map;

void tf_init(tf_store *s, uint32_t page_size, uint32_t node_bytes,
             unsigned codec);
void tf_free(tf_store *s);

/* A u64 leaf of n keys (any order: differences wrap) and values (NULL:
 * all empty), in the value form the writer would choose. */
tf_img tf_leaf_u64(uint32_t n, const uint64_t *keys, const tf_val *vals);

/* A u64 leaf of n keys from, from + step, ... with empty values. */
tf_img tf_leaf_run(uint32_t n, uint64_t from, uint64_t step);

/* A u64 branch of n separators (any order) and children. */
tf_img tf_branch_u64(uint32_t n, const uint64_t *keys, const bn_ext *kids);

/* raw packed with codec (lz4 or zlib) into the compression envelope; the
 * codec byte and raw length are what they are, whatever the store says.
 * Consumes raw. */
tf_img tf_pack(unsigned codec, tf_img raw);

/* Places an image in a run of its own at the high-water mark (the run's
 * tail zero) and consumes it. */
bn_ext tf_place(tf_store *s, tf_img im);

/* Writes an overflow run for value (type 3, CRC, length) and fills its
 * 20-byte reference. */
bn_ext tf_overflow(tf_store *s, const void *value, uint64_t len,
                   uint8_t ref[20]);

/* The catalog of the maps (one leaf, sorted by name here), the header and
 * meta slot 0 (txn 0; slot 1 zero). */
void tf_finish(tf_store *s, const tf_map *maps, unsigned n);

/* The file: the head area and every page below the high-water mark. */
void tf_write(const tf_store *s, const char *path);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * node.h - node images (the bytes in the store) and decoded nodes (the
 * mutable in-memory form the writer works on).
 *
 * PURE: this layer does no I/O and keeps no global state.  It allocates
 * only the arrays of decoded nodes.  Every function that reads an image
 * takes the number of bytes available and never reads past it; bad bytes
 * give BONSAI_CORRUPT.
 *
 * The byte grammar is in node.c's opening comment and in format.md.
 *
 * Keys: a node is of one key kind (BONSAI_KEY_U64 or BONSAI_KEY_BYTES).
 * Keys are strictly increasing within a node.  A leaf holds (key, value);
 * a branch holds (key, child extent): child i holds keys >= key[i] and
 * < key[i+1]; key[0] of a branch is stored but never compared against
 * (searches treat it as minus infinity).
 *
 * Values: bytes held inline, or (flag BN_VAL_OVERFLOW) an opaque reference
 * to an out-of-line value whose bytes this layer stores but does not read.
 */
#ifndef BONSAI_NODE_H
#define BONSAI_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "u64groups.h"

#define BN_HEADER_SIZE 16u
#define BN_TYPE_LEAF 1u
#define BN_TYPE_BRANCH 2u

/* image flags (byte 1 of the header) */
#define BN_F_KEY_U64 0x01u     /* keys are u64; else byte strings */
#define BN_F_VALS_EMPTY 0x02u  /* leaf: every value is empty */
#define BN_F_VALS_FIXED 0x04u  /* leaf: every value has one length, inline */
#define BN_F_OVERFLOW 0x08u    /* leaf: some value is an overflow ref */
#define BN_F_KNOWN 0x0Fu       /* value forms and kind */
#define BN_F_KEY_INDEX 0x20u   /* u64 keys in the indexed form (format 3);
                                  clear: format 2's walked form, read only */
#define BN_F_ZERO_BASE 0x40u   /* indexed u64 groups take base 0 where the
                                  smallest difference would not narrow
                                  their width (format 4); clear: format 3's
                                  smallest base, read only */
#define BN_F_COUNTED 0x80u     /* with KEY_INDEX and ZERO_BASE: u64 keys in
                                  counted groups (format 5, u64groups.h);
                                  clear: format 4's groups of 64, read
                                  only.  Any other bit set:
                                  BONSAI_CORRUPT */

#define BN_VAL_OVERFLOW 1u     /* per-entry value flag */

#define BN_MAX_PGNO ((UINT64_C(1) << 40) - 1) /* branch child pgno: 40 bits */
#define BN_MAX_NPAGES ((1u << 24) - 1)         /* branch child run: 24 bits */

/* A key as passed to and from this layer; kind tells which part counts. */
typedef struct bn_key {
    uint64_t u;        /* BONSAI_KEY_U64 */
    const uint8_t *b;  /* BONSAI_KEY_BYTES: len bytes (len >= 1) */
    uint32_t len;
} bn_key;

/* A run of pages: where a child node (or any extent) lives. */
typedef struct bn_ext {
    uint64_t pgno;
    uint32_t npages;
} bn_ext;

struct bt_node;

/* A branch's child: its extent, and while the tree holds the child
 * decoded, a pointer to it (never stored in an image).  The codec moves
 * mem with its entry and clears it on decode, and never reads it. */
typedef struct bn_child {
    bn_ext ext;
    struct bt_node *mem;
} bn_child;

/* Offset and length of bytes in a node's arena. */
typedef struct bn_span {
    uint32_t off;
    uint32_t len;
} bn_span;

/* A node's image before it is written: its size, section lengths and
 * value form (bn_layout_of), so that writing it needs no second pass over
 * the keys to measure them (bn_encode_laid). */
typedef struct bn_layout {
    uint64_t size;     /* the whole image */
    uint64_t keys_len;
    uint64_t ents_len; /* byte keys: the entries before the restarts */
    unsigned vform;    /* leaf: BN_F_VALS_EMPTY, _FIXED, BN_F_OVERFLOW or 0 */
    uint64_t tail_len; /* the value or child section */
    uint32_t count;    /* entries when measured */
    uint64_t ix_step;  /* u64 keys evenly spaced: the step; else 0 */
    uint8_t ix_rw;     /* u64 keys in groups: index widths (0: no index) */
    uint8_t ix_ow;
    uint32_t grow;     /* u64 keys: the shift bound (regroup.h) */
    uint32_t grow_key; /* and the per-key bound */
} bn_layout;

/* A decoded node.  The codec owns the arrays and the arena; the tree
 * keeps what it knows about the node beside it (btnode.h). */

/* A byte-key branch entry's head: its 16 bytes after the node's shared
 * prefix as two big-endian numbers (hi first), zero-padded: most keys of
 * a branch differ within them (string keys of one shape often share
 * their first 8 bytes after the prefix), so a search seldom reads a
 * whole key. */
typedef struct bn_head {
    uint64_t hi, lo;
} bn_head;

typedef struct bn_node {
    uint8_t leaf;         /* 1 leaf, 0 branch */
    uint8_t kind;         /* BONSAI_KEY_U64 or BONSAI_KEY_BYTES */
    uint32_t n;           /* entries */
    uint32_t cap;         /* capacity of the arrays */
    uint64_t *k64;        /* kind U64: key[i] */
    bn_span *kb;          /* kind BYTES: key bytes in arena */
    bn_head *head;        /* kind BYTES, branch: the 16 key bytes after
                             the head_skip every key shares, big-endian
                             and zero-padded, so a search compares
                             integers */
    uint32_t head_skip;
    bn_span *val;         /* leaf: value bytes in arena (len 0 = empty) */
    uint8_t *vflag;       /* leaf: BN_VAL_* per entry */
    bn_child *child;      /* branch: child[i] */
    uint8_t *arena;       /* byte keys and values */
    uint32_t arena_len;   /* bytes used in arena, live or dead */
    uint32_t arena_cap;
    uint32_t arena_dead;  /* bytes no entry refers to any more */
    size_t est;           /* estimate of the encoded size, kept current */

    /* codec-private: the running sums est is computed from (node.c) */
    uint64_t est_keys;    /* key terms: u64 in 1/64 bytes, bytes in bytes */
    uint64_t est_shared;  /* bytes: sum of prefixes shared with the prior */
    uint64_t est_vbytes;  /* leaf: sum of value lengths */
    uint64_t est_vsq;     /* leaf: sum of squared value lengths, mod 2^64 */
    uint64_t est_vhdr;    /* leaf: sum of general-form length varint sizes */
    uint32_t est_novf;    /* leaf: overflow values */
    uint8_t walked;       /* u64 keys read from a format-2 image (walked
                             form, no BN_F_KEY_INDEX): encoded in that
                             form again while set, so that one image
                             decodes and re-encodes to itself; a writer
                             clears it to rewrite the node in the
                             indexed form */
    uint8_t least_base;   /* u64 groups read from a format-3 image (no
                             BN_F_ZERO_BASE): encoded with the smallest
                             base again while set, as walked is kept */
    uint8_t positional;   /* u64 keys read from a format-4 image (no
                             BN_F_COUNTED): encoded in groups of 64 again
                             while set, as walked is kept */
    uint64_t *gstart;     /* u64 keys: where their groups begin, a bit a
                             key (u64groups.h), room for cap.  NULL: fresh
                             groups of 64 by position, which a node read
                             from an image without groups (or made by
                             puts after its last key) keeps while keys
                             come after its last; a put among its keys
                             gives it groups of its own */
    /* u64 keys: how much the key section may grow as its groups shift
     * (regroup.h), from the last exact sizing (decode, bn_size_exact,
     * bn_sized), and the changes since, which it does not cover */
    uint32_t grow;        /* bytes, or BN_GROW_UNKNOWN */
    uint32_t grow_key;    /* bytes each key put among the keys may add */
    uint32_t grow_since;  /* bytes the keys put or taken since may add */
    uint32_t grow_moves;  /* keys put among the keys or taken since */
    uint32_t grow_dels;   /* keys taken since */
    uint32_t grow_ends;   /* keys put after the last since */
} bn_node;

/* Summary of a checked image header. */
typedef struct bn_info {
    uint8_t type;         /* BN_TYPE_LEAF or BN_TYPE_BRANCH */
    uint8_t flags;
    uint32_t count;
    uint32_t length;      /* whole image in bytes */
    uint32_t keys_len;    /* bytes of the key section */
} bn_info;

/* ---- images, read in place -------------------------------------------- */

/* Checks the header of an image of at most avail bytes: known type and
 * flags, length <= avail, key section inside the image, count in range,
 * kind as expected; with verify_crc also the checksum.  Fills *info.
 * Returns 0 or BONSAI_CORRUPT. */
int bn_img_check(const uint8_t *img, size_t avail, unsigned kind,
                 int verify_crc, bn_info *info);

/* Leaf: *idx = index of the first key >= key (count if none), *found = 1
 * when that key equals key.  Branch: *idx = index of the child to descend
 * for key (the last i with key[i] <= key, or 0), *found = exact match.
 * Returns 0 or BONSAI_CORRUPT. */
int bn_img_search(const uint8_t *img, const bn_info *info, unsigned kind,
                  const bn_key *key, uint32_t *idx, int *found);

/* Codec-private (node.c): one group of u64 keys as found in an image. */
typedef struct bn_grp {
    uint64_t first;         /* its first key */
    uint64_t base;          /* smallest difference (after grp_base) */
    const uint8_t *base_at; /* where base is stored */
    unsigned width;         /* bits per packed delta */
    uint32_t start;         /* index of its first entry */
    uint32_t cnt;           /* entries in it */
    const uint8_t *packed;  /* cnt - 1 deltas */
} bn_grp;

/* Codec-private (node.c): an indexed u64 section (flag BN_F_KEY_INDEX)
 * as ix_open read it. */
typedef struct bn_ixsec {
    uint32_t n;
    uint64_t first;          /* key 0 */
    uint64_t step;           /* evenly spaced: > 0; groups: 0 */
    const uint8_t *after;    /* first byte past what ix_open read */
    const uint8_t *index;    /* groups, G >= 2: the records */
    const uint8_t *groups;   /* groups: group 0's header */
    const uint8_t *end;      /* the section's end */
    uint32_t ngroups;
    unsigned rw, ow;         /* index record: bits of rel and of off */
} bn_ixsec;

/* Where the last of a run of searches of one leaf image for rising keys
 * ended: the next search goes on from there (bn_img_search_on). */
typedef struct bn_mark {
    int set;      /* idx and key hold the last answer; 0 before the first */
    uint32_t idx; /* that answer: the first index whose key >= the key */
    uint64_t key; /* u64 keys: the key at idx (when idx < count) */

    /* codec-private: what the searches since set read of the image, so
     * that the next one in the same place reads it not again */
    const uint8_t *img; /* the image x was read from (NULL: none) */
    bn_ixsec x;         /* its section's index */
    int have_group;     /* gr holds group g, its base read */
    uint32_t g;
    bn_grp gr;
    int counted;        /* the image has counted groups: w, not x */
    ug_walk w;
} bn_mark;

/* bn_img_search of a leaf for a key above every key searched in it since
 * *mark was cleared, answering from *mark on and leaving the answer in
 * it: a sorted batch then walks each leaf once instead of searching it
 * from the top for each key.  u64 sections in groups (indexed or counted)
 * go on from the mark; other forms are searched whole.  Returns 0 or BONSAI_CORRUPT. */
int bn_img_search_on(const uint8_t *img, const bn_info *info, unsigned kind,
                     bn_key key, bn_mark *mark, uint32_t *idx, int *found);

/* The bytes [*off, *off + *len) of an image that bn_img_search reads
 * for key beyond the header and a u64 section's index: key's group of an
 * indexed u64 section, else the whole key section.  Reads the header and
 * the index, so a batch asks for those first and for the span later.  An
 * unreadable section gives the whole key section (the search reports it). */
void bn_img_search_span(const uint8_t *img, const bn_info *info,
                        unsigned kind, bn_key key, size_t *off, size_t *len);

/* Key idx of an image.  Byte keys are rebuilt into buf (BONSAI_MAX_KEY
 * bytes) and out->b points there.  Returns 0 or BONSAI_CORRUPT. */
int bn_img_key(const uint8_t *img, const bn_info *info, unsigned kind,
               uint32_t idx, uint8_t *buf, bn_key *out);

/* Leaf value idx, pointing into the image.  Returns 0 or BONSAI_CORRUPT. */
int bn_img_value(const uint8_t *img, const bn_info *info, uint32_t idx,
                 const uint8_t **val, uint32_t *len, unsigned *vflag);

/* Branch child idx.  Returns 0 or BONSAI_CORRUPT. */
int bn_img_child(const uint8_t *img, const bn_info *info, uint32_t idx,
                 bn_ext *out);
/* Points branch child idx of a raw (not packed) image at e and sets the
 * image's checksum again.  Returns 0 or BONSAI_CORRUPT. */
int bn_img_set_child(uint8_t *img, const bn_info *info, uint32_t idx,
                     bn_ext e);

/* ---- decoded nodes ----------------------------------------------------- */

/* Makes an empty node (no allocation yet). */
void bn_init(bn_node *node, unsigned kind, int leaf);

/* Frees the arrays and arena; the node is empty again, of the same kind
 * and leaf or branch as before. */
void bn_clear(bn_node *node);

/* Decodes an image (checked as bn_img_check with verify_crc) into node,
 * which must be freshly bn_init'ed or bn_clear'ed.  Copies all bytes: the
 * node does not point into img afterwards.  Returns 0, BONSAI_CORRUPT or
 * BONSAI_NOMEM (node left empty). */
int bn_decode(const uint8_t *img, size_t avail, unsigned kind,
              bn_node *node);

/* bn_decode for a copy that is only read (a cursor's leaf): without the
 * running size estimate that changes need, which is most of the cost, and
 * reusing the room node's arrays have (node was bn_init'ed). */
int bn_decode_frozen(const uint8_t *img, size_t avail, unsigned kind,
                     bn_node *node);

/* The image of a u64 leaf whose values are all empty (flags KEY_U64,
 * KEY_INDEX, ZERO_BASE, COUNTED, VALS_EMPTY, as this code writes them)
 * with the m strictly increasing keys add[] put in, none of them in it,
 * as bn_encode would write the node decoded from img with those puts
 * made: written to out, *len bytes, *grow = the larger of its two growth
 * bounds (regroup.h) as decoding it would give them.  Groups no key
 * joins are copied as they lie.  scratch holds bn_img_add_scratch(count,
 * m) bytes, 8-byte aligned.  The checksum is not verified: the caller's
 * store wrote img.  Returns 0, BONSAI_CORRUPT, or BONSAI_INVALID when
 * img is of another form, the result needs more than cap bytes or 65535
 * entries, or add[] does not increase or holds a key img has. */
size_t bn_img_add_scratch(uint32_t count, uint32_t m);
int bn_img_add_u64(const uint8_t *img, const bn_info *info,
                   const uint64_t *add, uint32_t m, void *scratch,
                   uint8_t *out, size_t cap, size_t *len, uint32_t *grow);

/* Exact size in bytes of the image bn_encode would write. */
size_t bn_encoded_size(const bn_node *node);

/* The growth of a node nothing bounds: it must be sized first. */
#define BN_GROW_UNKNOWN UINT32_MAX

/* bn_encoded_size, and the node's growth bound measured with it: the
 * changes since are covered again. */
size_t bn_size_exact(bn_node *node);

/* Records a layout of the node as it is (bn_layout_of) as its sizing. */
void bn_sized(bn_node *node, const bn_layout *lay);

/* The layout of node's image as node is now; lay->size = the size. */
void bn_layout_of(const bn_node *node, bn_layout *lay);

/* Writes the image (header, sections, checksum) into out, which has room
 * for cap bytes.  *len = bytes written.  Returns 0, or BONSAI_INVALID if
 * cap is too small or the node cannot be encoded (count over 65535, keys
 * not strictly increasing, a value over its limit, a branch child past
 * BN_MAX_PGNO / BN_MAX_NPAGES); out's bytes are then unspecified. */
int bn_encode(const bn_node *node, uint8_t *out, size_t cap, size_t *len);

/* bn_encode with lay from bn_layout_of, node unchanged since (a node
 * whose count has changed is measured again). */
int bn_encode_laid(const bn_node *node, const bn_layout *lay, uint8_t *out,
                   size_t cap, size_t *len);

/* Same contract as bn_img_search, on a decoded node. */
uint32_t bn_search(const bn_node *node, const bn_key *key, int *found);

/* bn_search's index in a decoded u64 branch whose parent bounds its keys
 * by [lo, hi), which key lies in: found from where key lies in that
 * range, reading a few neighbouring keys instead of the node's first and
 * last, and asking for the child entries there at once. */
uint32_t bn_branch_index_u64(const bn_node *node, uint64_t key, uint64_t lo,
                             uint64_t hi);

/* bn_search in a leaf whose keys before index from are all below key:
 * a sorted batch searches on from where the key before it landed. */
uint32_t bn_search_leaf_from(const bn_node *node, uint32_t from, bn_key key,
                             int *found);

/* Key idx; byte keys point into the arena (valid until the next change). */
bn_key bn_key_at(const bn_node *node, uint32_t idx);

/* Leaf value idx, pointing into the arena. */
void bn_value_at(const bn_node *node, uint32_t idx, const uint8_t **val,
                 uint32_t *len, unsigned *vflag);

/* A new entry for bn_insert_sorted: goes before old entry at. */
typedef struct bn_new {
    uint32_t at;
    uint32_t vlen;
    bn_key key;
    const uint8_t *val; /* inline bytes, not in this node's arena */
} bn_new;

/* Leaf: inserts m entries whose keys it lacks, in increasing key order
 * (at nondecreasing), in one pass: each old entry moves once instead of
 * once per insert before it.  Returns 0 or BONSAI_NOMEM (node
 * unchanged). */
int bn_insert_sorted(bn_node *node, uint32_t m, const bn_new *e);

/* Leaf: inserts (key, value) at idx, shifting later entries.  The caller
 * keeps keys increasing.  Returns 0 or BONSAI_NOMEM (node unchanged). */
int bn_insert(bn_node *node, uint32_t idx, bn_key key, const uint8_t *val,
              uint32_t vlen, unsigned vflag);

/* Branch: inserts (key, child) at idx.  Returns 0 or BONSAI_NOMEM. */
int bn_insert_child(bn_node *node, uint32_t idx, bn_key key, bn_child child);

/* Leaf: replaces the value of entry idx.  Returns 0 or BONSAI_NOMEM. */
int bn_set_value(bn_node *node, uint32_t idx, const uint8_t *val,
                 uint32_t vlen, unsigned vflag);

/* Replaces key idx (the caller keeps order).  Returns 0 or BONSAI_NOMEM. */
int bn_set_key(bn_node *node, uint32_t idx, bn_key key);

/* Removes entry idx. */
void bn_remove(bn_node *node, uint32_t idx);

/* Copies every entry of src into the empty node dst, as bn_decode_frozen
 * leaves it: for reading only.  Returns 0 or BONSAI_NOMEM. */
int bn_copy_frozen(bn_node *dst, const bn_node *src);

/* Moves entries [from, to) of src to dst at index at (both nodes of the
 * same kind and type), removing them from src.  Used to split, merge and
 * redistribute.  Returns 0 or BONSAI_NOMEM (both nodes unchanged). */
int bn_move(bn_node *dst, uint32_t at, bn_node *src, uint32_t from,
            uint32_t to);

/* Bytes of memory the decoded node holds (for the cache budget). */
size_t bn_mem_bytes(const bn_node *node);

#endif /* BONSAI_NODE_H */

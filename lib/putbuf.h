/* SPDX-License-Identifier: MIT */
/*
 * putbuf.h - puts waiting to be applied to a map's tree.
 *
 * A random insert into a large tree lands in a leaf nobody has decoded;
 * applying it at once costs a decode and, later, an encode of that whole
 * leaf for one entry.  The writer therefore keeps such puts here (the
 * newest value per key) and applies them in key order in batches
 * (put.c), so each leaf is decoded and encoded once per batch.
 *
 * PURE: no I/O, no global state; it allocates only its own arrays.
 */
#ifndef BONSAI_PUTBUF_H
#define BONSAI_PUTBUF_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

typedef struct pb_entry {
    uint64_t k;    /* U64 key, or offset of the key bytes in the arena */
    uint32_t klen; /* BYTES: key length */
    uint32_t vlen;
    uint64_t voff; /* value bytes in the arena */
} pb_entry;

typedef struct putbuf {
    unsigned kind;
    pb_entry *e;
    uint32_t n, cap;
    uint32_t indexed; /* entries [0, indexed) are in cell, later ones in
                         front */
    uint64_t *cell;  /* hash index: entry + 1 (0 for empty) in the low
                        half, the key's hash's high half above */
    uint32_t ncells; /* 2 * cap */
    size_t cell_bytes; /* cell's block: ncells cells, or more once a
                          sort used it as its scratch */
    uint64_t *front; /* front_cells cells, as cell, for the newest
                        entries: a key there may also be in cell, older */
    uint32_t front_cells; /* PB_FRONT_CELLS, or fewer in a small budget */
    uint8_t *arena;  /* key bytes and values, live or replaced */
    size_t alen, acap;
    uint32_t hint;   /* entries of the last batch that freed the arrays */
} putbuf;

/* Entries the front index holds before they join the main one (at
 * most: half its cells). */
#define PB_FRONT_MAX 4096u
#define PB_FRONT_CELLS (2 * PB_FRONT_MAX)

void pb_init(putbuf *b, unsigned kind);
void pb_free(putbuf *b);

/* Forgets every entry; keeps the memory for the next batch. */
void pb_reset(putbuf *b);

/* Index of key's entry, or UINT32_MAX. */
uint32_t pb_find(const putbuf *b, const bn_key *key);

/* Adds key with its value, or replaces the value of its entry.  Returns
 * 0 or BONSAI_NOMEM (the buffer unchanged).  A key put again after
 * PB_FRONT_MAX newer puts may hold two entries, the newer one last, until
 * pb_settle; n counts both. */
int pb_put(putbuf *b, bn_key key, const uint8_t *val, uint32_t vlen);

/* Entry i's key (byte keys point into the arena) and value. */
bn_key pb_key(const putbuf *b, uint32_t i);

/* Asks the CPU for entry i's key bytes ahead of their use: a sorted batch
 * reads its arena in no order, a cache miss a key otherwise. */
void pb_prefetch(const putbuf *b, uint32_t i);
const uint8_t *pb_value(const putbuf *b, uint32_t i, uint32_t *vlen);

/* Gives each key one entry again (the newest value).  n may shrink. */
void pb_settle(putbuf *b);

/* Orders the entries by key, settled first.  The hash index is stale
 * until pb_keep_from or pb_reset. */
void pb_sort(putbuf *b);

/* After a sorted batch applied entries [0, i): keeps the rest.  A batch
 * applied whole keeps its arrays for the next one unless give_back (then
 * large ones are unmapped). */
void pb_keep_from(putbuf *b, uint32_t i, int give_back);

/* Unmaps the large arrays an empty putbuf keeps, as pb_keep_from with
 * give_back does; the next batch starts at their size. */
void pb_give_back(putbuf *b);

/* Frees whatever arrays an empty putbuf keeps, large or small; whether
 * it held any.  The next batch starts at their size. */
int pb_let_go(putbuf *b);

/* Makes room for one more entry holding payload key and value bytes,
 * growing the arrays now if they must, so that the putbuf's memory stays
 * within max_bytes.  0, BONSAI_FULL (not within max_bytes: nothing
 * changed) or BONSAI_NOMEM. */
int pb_make_room(putbuf *b, size_t payload, size_t max_bytes);

/* Memory the putbuf holds: its entry array, indexes and arena (for the
 * write cache budget). */
size_t pb_mem_bytes(const putbuf *b);
/* The key and value bytes it holds (replaced values too). */
size_t pb_payload_bytes(const putbuf *b);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * putbuf.c - puts waiting to be applied (see putbuf.h).
 *
 * Entries live in an array in arrival order, found by key through an
 * open-addressing hash index (linear probing, at most half full); a cell
 * keeps half of its key's hash beside the entry number, so a probe
 * passing other keys' cells compares numbers, not keys (a cache miss
 * each into the entries and the arena).  Keys
 * of a BYTES map and all values sit in one arena; a replaced value's
 * bytes stay there, dead, until the batch is applied.
 *
 * A large batch's index is far larger than the CPU's caches, and a probe
 * of it is a memory miss: most of a random put's time when every put
 * probed it.  The newest PB_FRONT_MAX entries are therefore indexed in a
 * small front index alone, which stays in the caches, and join the main
 * index together, each cell asked for ahead of its probe (index_range),
 * so that the misses overlap.  A key put again once its entry has left
 * the front gets a second entry there; joining the main index gives the
 * older entry the newer value and drops the newer one.
 */
#include "putbuf.h"

#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "bonsai.h"
#include "bytes.h"

void pb_init(putbuf *b, unsigned kind)
{
    memset(b, 0, sizeof *b);
    b->kind = kind;
}

/* A batch applied whole that gives its memory back keeps arrays up to
 * this many entries for the next; larger ones go back to the system. */
#define KEEP_CAP 65536u

void pb_free(putbuf *b)
{
    big_free(b->e, (size_t)b->cap * sizeof *b->e);
    big_free(b->cell, b->cell_bytes);
    big_free(b->front, (size_t)b->front_cells * sizeof *b->front);
    big_free(b->arena, b->acap);
    pb_init(b, b->kind);
}

static void clear_front(putbuf *b)
{
    if (b->front && b->n > b->indexed)
        memset(b->front, 0, (size_t)b->front_cells * sizeof *b->front);
}

void pb_reset(putbuf *b)
{
    clear_front(b);
    b->n = 0;
    b->indexed = 0;
    b->alen = 0;
    if (b->cell)
        memset(b->cell, 0, (size_t)b->ncells * sizeof *b->cell);
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return h;
}

static uint64_t hash_key(unsigned kind, bn_key key)
{
    if (kind == BONSAI_KEY_U64)
        return mix(key.u);
    /* eight bytes a step, the tail zero-padded; the length told apart
     * keys that differ only by trailing zero bytes */
    uint64_t h = key.len * UINT64_C(0x9e3779b97f4a7c15);
    uint32_t i = 0;
    for (; i + 8 <= key.len; i += 8)
        h = (h ^ get_le64(key.b + i)) * UINT64_C(0xbf58476d1ce4e5b9);
    uint64_t tail = 0;
    for (uint32_t j = 0; i + j < key.len; j++)
        tail |= (uint64_t)key.b[i + j] << (8 * j);
    return mix(h ^ tail);
}

bn_key pb_key(const putbuf *b, uint32_t i)
{
    const pb_entry *e = &b->e[i];
    if (b->kind == BONSAI_KEY_U64)
        return (bn_key){.u = e->k};
    return (bn_key){.b = b->arena + e->k, .len = e->klen};
}

void pb_prefetch(const putbuf *b, uint32_t i)
{
    if (i < b->n && b->kind != BONSAI_KEY_U64)
        __builtin_prefetch(b->arena + b->e[i].k);
}

const uint8_t *pb_value(const putbuf *b, uint32_t i, uint32_t *vlen)
{
    static const uint8_t no_bytes[1];
    *vlen = b->e[i].vlen;
    /* only empty values were put: no arena yet */
    return b->arena ? b->arena + b->e[i].voff : no_bytes;
}

static int same_key(const putbuf *b, uint32_t i, bn_key key)
{
    if (b->kind == BONSAI_KEY_U64)
        return b->e[i].k == key.u;
    return b->e[i].klen == key.len &&
           memcmp(b->arena + b->e[i].k, key.b, key.len) == 0;
}

/* The cell key's hash h points at in an index of ncells cells: any
 * number, so that a batch's arrays grow to what its budget allows rather
 * than to the next power of two.  The low half of h; the tag is the high
 * half. */
static uint32_t home_cell(uint64_t h, uint32_t ncells)
{
    return (uint32_t)(((h & UINT32_MAX) * ncells) >> 32);
}

#define CELL_ENTRY(v) ((uint32_t)(v))
#define CELL_TAG(h) ((h) & ~(uint64_t)UINT32_MAX)

/* The cell of an index of ncells cells holding key's entry, or the empty
 * cell where it would go; h = key's hash. */
static uint32_t probe_in(const putbuf *b, const uint64_t *cell,
                         uint32_t ncells, bn_key key, uint64_t h)
{
    uint32_t s = home_cell(h, ncells);
    for (uint64_t v; (v = cell[s]) != 0; s = s + 1 == ncells ? 0 : s + 1)
        if (CELL_TAG(v) == CELL_TAG(h) && same_key(b, CELL_ENTRY(v) - 1, key))
            break;
    return s;
}

uint32_t pb_find(const putbuf *b, const bn_key *key)
{
    if (b->n == 0)
        return UINT32_MAX;
    uint64_t h = hash_key(b->kind, *key);
    uint32_t s;
    if (b->n > b->indexed) { /* the newer entry first */
        s = probe_in(b, b->front, b->front_cells, *key, h);
        if (b->front[s])
            return CELL_ENTRY(b->front[s]) - 1;
    }
    if (b->indexed == 0)
        return UINT32_MAX;
    s = probe_in(b, b->cell, b->ncells, *key, h);
    return b->cell[s] ? CELL_ENTRY(b->cell[s]) - 1 : UINT32_MAX;
}

/* Entry i joins the main index at w (w <= i), or gives its value to the
 * older entry of its key there.  Returns where the next entry goes. */
static uint32_t index_one(putbuf *b, uint32_t i, uint64_t h, uint32_t w)
{
    uint32_t s = probe_in(b, b->cell, b->ncells, pb_key(b, i), h);
    if (b->cell[s]) {
        pb_entry *old = &b->e[CELL_ENTRY(b->cell[s]) - 1];
        old->voff = b->e[i].voff;
        old->vlen = b->e[i].vlen;
        return w;
    }
    b->e[w] = b->e[i];
    b->cell[s] = CELL_TAG(h) | (w + 1);
    return w + 1;
}

/* Entries [from, to) join the main index, which has room for them, in
 * steps of AHEAD: each step hashes its keys and asks for their cells,
 * then probes, so that a step's memory misses overlap.  Returns the
 * entries kept: from plus those whose key the index did not hold. */
static uint32_t index_range(putbuf *b, uint32_t from, uint32_t to)
{
    enum { AHEAD = 32 };
    uint64_t h[AHEAD];
    uint32_t w = from;
    for (uint32_t i = from; i < to; i += AHEAD) {
        uint32_t m = to - i < AHEAD ? to - i : AHEAD;
        for (uint32_t j = 0; j < m; j++) {
            h[j] = hash_key(b->kind, pb_key(b, i + j));
            __builtin_prefetch(&b->cell[home_cell(h[j], b->ncells)], 1);
        }
        for (uint32_t j = 0; j < m; j++)
            w = index_one(b, i + j, h[j], w);
    }
    return w;
}

void pb_settle(putbuf *b)
{
    if (b->n == b->indexed)
        return;
    clear_front(b);
    b->n = index_range(b, b->indexed, b->n);
    b->indexed = b->n;
}

static void rehash(putbuf *b)
{
    memset(b->cell, 0, (size_t)b->ncells * sizeof *b->cell);
    b->indexed = index_range(b, 0, b->indexed);
}

/* The first capacity of a batch: half the last large batch, so that a
 * batch as large grows once rather than from 1024 by doubling, each
 * doubling a rehash (a cache miss an entry: most of a large batch's
 * hashing), and a batch much smaller does not fill a hash of the old
 * size (a hash's pages are all touched soon: it is probed at random). */
static uint32_t first_cap(const putbuf *b)
{
    uint32_t cap = 1024;
    while (cap < b->hint / 2 && cap < UINT32_MAX / 8)
        cap *= 2;
    return cap;
}

/* Memory a putbuf may hold with cap entries, an arena of acap bytes and
 * a front index of front_cells: the entries, and the index's block (two
 * cells an entry, or an entry's copy while the batch is sorted). */
#define PER_ENTRY (2 * sizeof(pb_entry))

static size_t arrays_bytes(uint32_t cap, size_t acap, uint32_t front_cells)
{
    return (size_t)cap * PER_ENTRY + acap +
           (size_t)front_cells * sizeof(uint64_t);
}

static int alloc_front(putbuf *b, uint32_t cells)
{
    if (!(b->front = big_alloc((size_t)cells * sizeof *b->front, 1)))
        return BONSAI_NOMEM;
    b->front_cells = cells;
    return 0;
}

/* The front's cells in a budget of max_bytes: at most an eighth of it, so
 * that a small write cache still holds a batch. */
static uint32_t front_cells_for(size_t max_bytes)
{
    uint32_t cells = PB_FRONT_CELLS;
    while (cells > 64 && (size_t)cells * sizeof(uint64_t) > max_bytes / 8)
        cells /= 2;
    return cells;
}

/* The index's block, grown to at least bytes: its contents are not kept
 * (the index is rebuilt, or the block is a sort's scratch). */
static int cell_block_at_least(putbuf *b, size_t bytes)
{
    if (b->cell_bytes >= bytes)
        return 0;
    uint64_t *cell = big_resize(b->cell, b->cell_bytes, bytes);
    if (!cell)
        return BONSAI_NOMEM;
    b->cell = cell;
    b->cell_bytes = bytes;
    return 0;
}

/* Grows the entry array and the main index to cap entries (the front's
 * entries then join it as they do when the front is full).  The index is
 * resized, not copied beside the old one: it is rebuilt from the
 * entries. */
static int grow_to(putbuf *b, uint32_t cap)
{
    /* the index first: its block keeps its size if the entries fail */
    if (cell_block_at_least(b, (size_t)cap * 2 * sizeof *b->cell))
        return BONSAI_NOMEM;
    pb_entry *e = big_resize(b->e, (size_t)b->cap * sizeof *e,
                             (size_t)cap * sizeof *e);
    if (!e)
        return BONSAI_NOMEM;
    b->e = e;
    b->ncells = cap * 2;
    b->cap = cap;
    rehash(b);
    return 0;
}

/* The entries the arrays grow to next: twice as many. */
static uint32_t next_cap(const putbuf *b)
{
    if (b->cap >= UINT32_MAX / 4)
        return b->cap;
    return b->cap ? b->cap * 2 : first_cap(b);
}

/* The arena's capacity once it holds more bytes. */
static size_t arena_cap_for(const putbuf *b, size_t more)
{
    if (b->alen + more <= b->acap)
        return b->acap;
    size_t cap = b->acap ? b->acap : 256;
    while (cap < b->alen + more)
        cap *= 2;
    return cap;
}

static int arena_to(putbuf *b, size_t cap)
{
    if (cap == b->acap)
        return 0;
    uint8_t *a = big_resize(b->arena, b->acap, cap);
    if (!a)
        return BONSAI_NOMEM;
    b->arena = a;
    b->acap = cap;
    return 0;
}

static int reserve_arena(putbuf *b, size_t more)
{
    return arena_to(b, arena_cap_for(b, more));
}

/* The entries and the arena share the budget: the entries grow as far as
 * an entry's arrays and bytes fit it, the arena (by doubling) as far as
 * the entries leave, the last step cut to what is left. */
int pb_make_room(putbuf *b, size_t payload, size_t max_bytes)
{
    uint32_t front = b->front ? b->front_cells : front_cells_for(max_bytes);
    size_t need = b->alen + payload;
    uint32_t cap = b->cap;
    if (b->n == cap) {
        size_t fixed = arrays_bytes(0, need, front);
        size_t per = PER_ENTRY + payload;
        size_t most = max_bytes > fixed ? (max_bytes - fixed) / per : 0;
        cap = next_cap(b);
        if (cap > most)
            cap = (uint32_t)most; /* below cap, which is below 2^32 */
        if (cap <= b->n)
            return BONSAI_FULL;
    }
    size_t arrays = arrays_bytes(cap, 0, front);
    if (arrays + need > max_bytes)
        return BONSAI_FULL;
    size_t acap = arena_cap_for(b, payload);
    if (acap > max_bytes - arrays)
        acap = max_bytes - arrays; /* at least need */
    int rc = 0;
    if (!b->front)
        rc = alloc_front(b, front);
    if (rc == 0 && acap > b->acap)
        rc = arena_to(b, acap);
    if (rc == 0 && cap > b->cap)
        rc = grow_to(b, cap);
    return rc;
}

static uint64_t arena_add(putbuf *b, const uint8_t *p, uint32_t len)
{
    uint64_t off = b->alen;
    if (len)
        memcpy(b->arena + off, p, len);
    b->alen += len;
    return off;
}

int pb_put(putbuf *b, bn_key key, const uint8_t *val, uint32_t vlen)
{
    if (!b->front && alloc_front(b, PB_FRONT_CELLS))
        return BONSAI_NOMEM;
    if (b->n - b->indexed == b->front_cells / 2)
        pb_settle(b);
    /* one probe of the front finds the entry, or the cell a new one takes */
    uint64_t h = hash_key(b->kind, key);
    uint32_t s = probe_in(b, b->front, b->front_cells, key, h);
    int found = b->front[s] != 0;
    size_t kbytes = b->kind == BONSAI_KEY_U64 || found ? 0 : key.len;
    if (reserve_arena(b, kbytes + vlen))
        return BONSAI_NOMEM;
    if (found) {
        pb_entry *e = &b->e[CELL_ENTRY(b->front[s]) - 1];
        e->voff = arena_add(b, val, vlen);
        e->vlen = vlen;
        return 0;
    }
    if (b->n == b->cap && (next_cap(b) == b->cap || grow_to(b, next_cap(b))))
        return BONSAI_NOMEM;
    pb_entry *e = &b->e[b->n];
    e->k = b->kind == BONSAI_KEY_U64 ? key.u : arena_add(b, key.b, key.len);
    e->klen = b->kind == BONSAI_KEY_U64 ? 0 : key.len;
    e->voff = arena_add(b, val, vlen);
    e->vlen = vlen;
    b->front[s] = CELL_TAG(h) | ++b->n;
    return 0;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = ((const pb_entry *)x)->k, c = ((const pb_entry *)y)->k;
    return (a > c) - (a < c);
}

static int cmp_bytes(const void *x, const void *y, void *ctx)
{
    const pb_entry *a = x, *c = y;
    const uint8_t *arena = ctx;
    return key_cmp(arena + a->k, a->klen, arena + c->k, c->klen);
}

/* Sorts a few entries by k: a library sort's call per compare costs
 * more than these moves. */
static void insertion_sort_u64(pb_entry *e, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        pb_entry x = e[i];
        uint32_t j = i;
        for (; j > 0 && e[j - 1].k > x.k; j--)
            e[j] = e[j - 1];
        e[j] = x;
    }
}

#define FEW 32u /* at most so many entries are insertion sorted */
/* at least so many are sorted in buckets first: fewer would pay more for
 * the 64 Ki buckets than they save */
#define BUCKETED 4096u

/* The smallest k xor the largest: its top set bit is the highest bit in
 * which any two entries differ (0: all equal). */
static uint64_t differing_bits(const pb_entry *e, uint32_t n)
{
    uint64_t lo = e[0].k, hi = e[0].k;
    for (uint32_t i = 1; i < n; i++) {
        lo = e[i].k < lo ? e[i].k : lo;
        hi = e[i].k > hi ? e[i].k : hi;
    }
    return lo ^ hi;
}

/* Sorts by k with a pass of 256 buckets for each byte in which keys
 * differ, lowest first (stable), through tmp. */
static void radix_sort_u64(pb_entry *e, uint32_t n, pb_entry *tmp)
{
    uint64_t differ = differing_bits(e, n);
    unsigned top = differ ? 64 - (unsigned)__builtin_clzll(differ) : 0;
    for (unsigned shift = 0; shift < top; shift += 8) {
        uint32_t start[257] = {0};
        for (uint32_t i = 0; i < n; i++)
            start[((e[i].k >> shift) & 255) + 1]++;
        for (unsigned d = 0; d < 256; d++)
            start[d + 1] += start[d];
        for (uint32_t i = 0; i < n; i++)
            tmp[start[(e[i].k >> shift) & 255]++] = e[i];
        memcpy(e, tmp, (size_t)n * sizeof *e);
    }
}

/* Sorts by k fewer than a few thousand entries; tmp: scratch of n, or
 * NULL (a library sort then). */
static void sort_bucket(pb_entry *e, uint32_t n, pb_entry *tmp)
{
    if (n <= FEW)
        insertion_sort_u64(e, n);
    else if (tmp)
        radix_sort_u64(e, n, tmp);
    else
        qsort(e, n, sizeof *e, cmp_u64);
}

/* The 16 bits below those every key shares pick a bucket: a counting
 * pass into tmp, then each bucket sorted on its own (a handful of entries
 * for spread keys).  Keys that agree on their top bits (decimal digits
 * of string keys) still spread over the buckets. */
static void sort_u64(pb_entry *e, uint32_t n, pb_entry *tmp)
{
    enum { BITS = 16, BUCKETS = 1u << BITS };
    uint64_t differ = differing_bits(e, n);
    if (!differ)
        return; /* all equal: sorted */
    unsigned shared = (unsigned)__builtin_clzll(differ);
    size_t start_bytes = (BUCKETS + 1u) * sizeof(uint32_t);
    uint32_t *start = big_alloc(start_bytes, 1);
    if (!start) {
        qsort(e, n, sizeof *e, cmp_u64);
        return;
    }
#define BUCKET(k) ((uint32_t)(((k) << shared) >> (64 - BITS)))
    for (uint32_t i = 0; i < n; i++)
        start[BUCKET(e[i].k) + 1]++;
    for (uint32_t d = 0; d < BUCKETS; d++)
        start[d + 1] += start[d];
    for (uint32_t i = 0; i < n; i++)
        tmp[start[BUCKET(e[i].k)]++] = e[i];
#undef BUCKET
    /* start[d] is now the end of bucket d */
    uint32_t from = 0;
    for (uint32_t d = 0; d < BUCKETS; d++) {
        uint32_t to = start[d];
        if (to - from > 1) /* e is free scratch once scattered */
            sort_bucket(tmp + from, to - from, e + from);
        from = to;
    }
    memcpy(e, tmp, (size_t)n * sizeof *e);
    big_free(start, start_bytes);
}

/* Key bytes [off, off + 8) of e big-endian, zeros past the end: ordered
 * as the keys are, ties left to the bytes beyond. */
static uint64_t chunk_at(const putbuf *b, const pb_entry *e, uint32_t off)
{
    const uint8_t *k = b->arena + e->k;
    if (off + 8 <= e->klen)
        return __builtin_bswap64(get_le64(k + off));
    uint64_t v = 0;
    for (uint32_t j = off; j < off + 8; j++)
        v = v << 8 | (j < e->klen ? k[j] : 0);
    return v;
}

/* Byte keys, most significant 8 bytes first: each chunk sorted as u64,
 * then each run of equal chunks on the next (keys such as user:0000...
 * share long prefixes, and string compares over them cost most).  pre
 * and tmp are scratch of n entries. */
static void sort_chunks(const putbuf *b, pb_entry *e, pb_entry *pre,
                        pb_entry *tmp, uint32_t n, uint32_t off)
{
    for (uint32_t i = 0; i < n; i++)
        pre[i] = (pb_entry){.k = chunk_at(b, &e[i], off), .voff = i};
    if (n < BUCKETED)
        sort_bucket(pre, n, tmp);
    else
        sort_u64(pre, n, tmp);
    for (uint32_t i = 0; i < n; i++)
        tmp[i] = e[pre[i].voff];
    memcpy(e, tmp, (size_t)n * sizeof *e);
    for (uint32_t from = 0, to; from < n; from = to) {
        int longer = e[from].klen > off + 8;
        for (to = from + 1; to < n && pre[to].k == pre[from].k; to++)
            longer |= e[to].klen > off + 8;
        if (to - from < 2)
            continue;
        if (longer)
            sort_chunks(b, e + from, pre + from, tmp + from, to - from,
                        off + 8);
        else /* equal but for trailing zero bytes */
            qsort_r(e + from, to - from, sizeof *e, cmp_bytes, b->arena);
    }
}

/* The index's block as the sort's scratch of n entries, grown if it
 * must: the index is stale once the entries move, and rebuilt in the
 * same block (which only grows) before it is used again.  Counting it at
 * that size from the start (PER_ENTRY) keeps a sort inside the budget
 * the batch grew in.  NULL if it cannot grow. */
static pb_entry *index_as_scratch(putbuf *b)
{
    if (cell_block_at_least(b, (size_t)b->n * sizeof(pb_entry)))
        return NULL;
    return (pb_entry *)(void *)b->cell;
}

static void sort_bytes(putbuf *b)
{
    size_t pre_bytes = (size_t)b->n * sizeof(pb_entry);
    pb_entry *pre = big_alloc(pre_bytes, 0);
    pb_entry *tmp = pre ? index_as_scratch(b) : NULL;
    if (tmp)
        sort_chunks(b, b->e, pre, tmp, b->n, 0);
    else
        qsort_r(b->e, b->n, sizeof *b->e, cmp_bytes, b->arena);
    big_free(pre, pre_bytes);
}

void pb_sort(putbuf *b)
{
    pb_settle(b);
    if (b->n < 2)
        return;
    if (b->kind != BONSAI_KEY_U64) {
        sort_bytes(b);
        return;
    }
    pb_entry *tmp = b->n > FEW ? index_as_scratch(b) : NULL;
    if (b->n < BUCKETED)
        sort_bucket(b->e, b->n, tmp); /* a library sort without tmp */
    else if (tmp)
        sort_u64(b->e, b->n, tmp);
    else
        qsort(b->e, b->n, sizeof *b->e, cmp_u64);
}

/* Unmaps large arrays, the next batch to start at hint entries; whether
 * it did. */
static int unmap_large(putbuf *b, uint32_t hint)
{
    if (b->cap < KEEP_CAP)
        return 0;
    pb_free(b); /* the write cache's decoded nodes want the memory */
    b->hint = hint;
    return 1;
}

void pb_give_back(putbuf *b)
{
    if (b->n == 0)
        unmap_large(b, b->cap);
}

int pb_let_go(putbuf *b)
{
    if (b->n || pb_mem_bytes(b) == 0)
        return 0;
    uint32_t hint = b->cap;
    pb_free(b);
    b->hint = hint;
    return 1;
}

void pb_keep_from(putbuf *b, uint32_t i, int give_back)
{
    if (i >= b->n && give_back && unmap_large(b, b->n))
        return;
    if (i >= b->n) {
        pb_reset(b);
        return;
    }
    memmove(b->e, b->e + i, (size_t)(b->n - i) * sizeof *b->e);
    b->n -= i;
    b->indexed = b->n; /* sorted: settled */
    rehash(b);
}

size_t pb_mem_bytes(const putbuf *b)
{
    return (size_t)b->cap * sizeof(pb_entry) + b->cell_bytes + b->acap +
           (size_t)b->front_cells * sizeof(uint64_t);
}

size_t pb_payload_bytes(const putbuf *b)
{
    return b->alen;
}

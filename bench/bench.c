/* SPDX-License-Identifier: MIT */
/*
 * bench.c - bonsai against LMDB and in-memory collections on the same key
 * streams, on this machine.
 *
 * For every workload (a key stream fixed by the seed and the size) each
 * engine runs in a forked child process of its own, one after the other,
 * the order rotating from workload to workload.  A child loads the stream,
 * then does random lookups of present keys, of absent keys, a full
 * ordered scan, and the same lookups again in batches of BATCH_GETS keys
 * (only engines with a batched get: bonsai), and reports sizes, times, its
 * peak RSS and digests of what it read back through a pipe.  The parent
 * checks that the engines agree on every lookup and on the scan (and the
 * batched lookups with the single ones), prints a table, and writes a CSV.
 *
 * Engines:
 *   lmdb         a file in --dir (default /tmp): MDB_WRITEMAP, MDB_NOSYNC,
 *                MDB_MAPASYNC, MDB_NOMETASYNC, MDB_NOLOCK, MDB_NORDAHEAD,
 *                MDB_INTEGERKEY for u64 maps, MDB_APPEND for sequential
 *                loads, one write transaction per BATCH puts
 *   bonsai-mem   anonymous memory, options default (no transactions, write
 *                cache on); bonsai_sync after the load flushes the cache
 *   bonsai-file  a file in --dir, transactions on, sync off, one write
 *                transaction per BATCH puts; reads in one read snapshot
 *   (both bonsai rows: max_size raised to 64 GiB, nothing else changed)
 *   std-map      std::map (peers.cc), grown by inserts as a program would
 *   std-unordered std::unordered_map (peers.cc), default hash, no reserve;
 *                it has no order, so its scan is a walk in the table's
 *                order: counted, but neither timed against the others nor
 *                compared
 *   judy         JudyL for u64 keys, JudySL for string keys (they hold no
 *                NUL byte, and JudySL scans them in byte order); a value
 *                of 16 bytes is a malloc'd copy the Judy word points to
 *   (the three in-memory peers: store bytes are malloc's bytes in use)
 *
 * Keys: entry i of a stream has the id perm(i) (the identity for u64
 * workloads) and the key key_of(id).  Lookups of present keys pick ids
 * uniformly in [0, n) (id = splitmix64(seed' + q) % n); lookups of absent
 * keys pick ids in [n, 2n), whose keys are never in the stream: key_of is
 * injective (splitmix64 is a bijection; string keys spell the id).
 *
 * Figures: bytes per entry three ways (the store's bytes in use, the file's
 * allocated blocks, the child's peak RSS before the batched lookups),
 * inserts/s (the whole load, commits and the final flush included),
 * lookups/s present and absent, single and batched, scan entries/s (every
 * key and value byte is read), and the ratios of bonsai to LMDB and of
 * bonsai-mem to each peer (bonsai's batched rates over the other engine's
 * single ones when it has no batched get).  Load times include making
 * keys, the same work for every engine; lookup times do not (keys are made
 * a chunk at a time with the clock stopped), but checking each answer is
 * in them.
 *
 * Only bonsai's public API (bonsai.h) is used.
 */
#include "bonsai.h"
#include "peers.h"

#include <Judy.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAIL 1
#define EXIT_USAGE 2

#define BATCH 1000000u              /* puts per write transaction */
#define LOOKUPS_PRESENT 5000000.0   /* at scale 1 */
#define LOOKUPS_ABSENT 1000000.0
#define BATCH_GETS (1u << 20)       /* keys per batched get */
#define LOOKUP_CHUNK 256u           /* single gets between clock readings */
#define MAP_SIZE (UINT64_C(64) << 30) /* LMDB mapsize, bonsai max_size */
#define DEFAULT_SEED UINT64_C(20240601)
#define MAX_VALUE 16u
#define MAX_KEY 48u
#define ERROR_LEN 200u              /* a child's error message */

/* Salts that split one seed into independent streams. */
#define SALT_KEYS UINT64_C(0x6b657973)
#define SALT_PRESENT UINT64_C(0x70726573656e74)
#define SALT_ABSENT UINT64_C(0x616273656e74)
#define SALT_VALUE UINT64_C(0x76616c7565)
#define SALT_PERM UINT64_C(0x7065726d)

/* ---- workloads ------------------------------------------------------------ */

enum key_kind { KEYS_SEQ_U64, KEYS_RAND_U64, KEYS_STRING };

struct workload {
    const char *name;
    enum key_kind keys;
    uint32_t value_len;
    double entries; /* at scale 1 */
    const char *about;
};

static const struct workload WORKLOADS[] = {
    {"seq-u64", KEYS_SEQ_U64, 0, 100e6,
     "u64 keys 0..n-1 in order, empty values"},
    {"rand-u64", KEYS_RAND_U64, 0, 20e6,
     "random u64 keys, empty values"},
    {"rand-u64-v16", KEYS_RAND_U64, 16, 10e6,
     "random u64 keys, 16-byte values"},
    {"str-keys", KEYS_STRING, 0, 10e6,
     "16..39-byte strings with shared prefixes, random order, empty values"},
};
#define N_WORKLOADS (sizeof WORKLOADS / sizeof WORKLOADS[0])

/* ---- engines -------------------------------------------------------------- */

enum engine_id {
    ENG_LMDB, ENG_BONSAI_MEM, ENG_BONSAI_FILE,
    ENG_STD_MAP, ENG_STD_UNORDERED, ENG_JUDY, /* the in-memory peers */
    N_ENGINES
};

static const char *const ENGINE_NAMES[N_ENGINES] = {
    "lmdb", "bonsai-mem", "bonsai-file", "std-map", "std-unordered", "judy"};

/* ---- the PRNG and hashing ------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* A cheap order-dependent digest: a few cycles per 8 bytes, so the scan
 * rate measures the engine, not the hash. */
static uint64_t fold(uint64_t h, uint64_t w)
{
    h ^= w;
    h *= UINT64_C(0x9fb21c651e98df25);
    return h ^ (h >> 29);
}

static uint64_t fold_bytes(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    h = fold(h, len);
    for (; len >= 8; b += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = fold(h, w);
    }
    if (len) {
        uint64_t w = 0;
        memcpy(&w, b, len);
        h = fold(h, w);
    }
    return h;
}

/* ---- key streams ---------------------------------------------------------- */

struct key {
    uint64_t u;     /* u64 maps */
    size_t len;     /* byte-string maps */
    char s[MAX_KEY];
};

struct stream {
    const struct workload *w;
    uint64_t n;          /* entries */
    uint64_t present;    /* lookups of present keys */
    uint64_t absent;     /* lookups of absent keys */
    uint64_t seed;
    unsigned perm_bits;  /* 2^perm_bits >= n */
};

static void stream_init(struct stream *st, const struct workload *w,
                        double scale, uint64_t seed)
{
    *st = (struct stream){.w = w, .seed = seed};
    st->n = (uint64_t)fmax(1.0, llround(w->entries * scale));
    st->present = (uint64_t)fmax(1.0, llround(LOOKUPS_PRESENT * scale));
    st->absent = (uint64_t)fmax(1.0, llround(LOOKUPS_ABSENT * scale));
    st->perm_bits = 1;
    while (st->perm_bits < 64 && (UINT64_C(1) << st->perm_bits) < st->n)
        st->perm_bits++;
}

/* A bijection of [0, 2^bits): multiply by an odd constant and xor-shift,
 * both invertible modulo 2^bits. */
static uint64_t perm_round(const struct stream *st, uint64_t x)
{
    unsigned bits = st->perm_bits;
    uint64_t mask = bits == 64 ? ~UINT64_C(0) : (UINT64_C(1) << bits) - 1;
    uint64_t salt = splitmix64(st->seed ^ SALT_PERM);
    for (int r = 0; r < 4; r++) {
        x = (x + (salt >> (8 * r))) & mask;
        x = (x * UINT64_C(0xbf58476d1ce4e5b9)) & mask;
        x ^= x >> (bits / 2 + 1);
    }
    return x;
}

/* The id of the i-th key inserted: string keys go in a random order (a
 * permutation of [0, n) by cycle-walking), u64 keys in id order. */
static uint64_t stream_id(const struct stream *st, uint64_t i)
{
    if (st->w->keys != KEYS_STRING)
        return i;
    uint64_t x = i;
    do
        x = perm_round(st, x);
    while (x >= st->n);
    return x;
}

static uint64_t present_id(const struct stream *st, uint64_t q)
{
    return splitmix64((st->seed ^ SALT_PRESENT) + q) % st->n;
}

static uint64_t absent_id(const struct stream *st, uint64_t q)
{
    return st->n + splitmix64((st->seed ^ SALT_ABSENT) + q) % st->n;
}

static char *put_text(char *p, const char *s)
{
    size_t len = strlen(s);
    memcpy(p, s, len);
    return p + len;
}

/* v in exactly width decimal digits (zero-padded). */
static char *put_digits(char *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
    return p + width;
}

static char *put_uint(char *p, uint64_t v)
{
    int width = 1;
    for (uint64_t t = v; t >= 10; t /= 10)
        width++;
    return put_digits(p, v, width);
}

/* One of four shapes by id % 4, each spelling the rest of the id, so
 * distinct ids give distinct keys:
 *   user:000000012345:session:17             27-28 bytes
 *   order:0000012345:line:3                  23
 *   customer:profile:000000012345:address:1  39
 *   k:00000000012345                         16 */
static void string_key(uint64_t id, struct key *k)
{
    uint64_t u = id >> 2;
    char *p = k->s;
    switch (id & 3) {
    case 0:
        p = put_digits(put_text(p, "user:"), u >> 5, 12);
        p = put_uint(put_text(p, ":session:"), u & 31);
        break;
    case 1:
        p = put_digits(put_text(p, "order:"), u >> 2, 10);
        p = put_uint(put_text(p, ":line:"), u & 3);
        break;
    case 2:
        p = put_digits(put_text(p, "customer:profile:"), u >> 1, 12);
        p = put_uint(put_text(p, ":address:"), u & 1);
        break;
    default:
        p = put_digits(put_text(p, "k:"), u, 14);
        break;
    }
    k->len = (size_t)(p - k->s);
}

static void key_of(const struct stream *st, uint64_t id, struct key *k)
{
    switch (st->w->keys) {
    case KEYS_SEQ_U64: k->u = id; break;
    case KEYS_RAND_U64: k->u = splitmix64((st->seed ^ SALT_KEYS) + id); break;
    case KEYS_STRING: string_key(id, k); break;
    }
}

static void value_of(const struct stream *st, uint64_t id,
                     unsigned char v[MAX_VALUE])
{
    for (uint32_t i = 0; i < st->w->value_len; i += 8) {
        uint64_t w = splitmix64((st->seed ^ SALT_VALUE) + 2 * id + i / 8);
        memcpy(v + i, &w, 8);
    }
}

static int is_u64(const struct stream *st)
{
    return st->w->keys != KEYS_STRING;
}

/* ---- what a child reports ------------------------------------------------- */

/* What one way of looking up (single gets or batched ones) found: the
 * present keys found, absent keys found, wrong values, and a digest of
 * every answer in order. */
struct tally {
    uint64_t hits, absent_found, bad_values, digest;
};

struct result {
    int ran;                 /* the child finished and reported */
    char error[ERROR_LEN];   /* empty when all went well */
    uint64_t entries;        /* as the engine counts them */
    uint64_t bytes_used;     /* store bytes in use after the load */
    uint64_t tree_bytes;     /* pages of the map's tree alone */
    uint64_t file_bytes;     /* allocated blocks of the file, 0 in memory */
    uint64_t peak_rss;       /* bytes, before the batched lookups */
    uint64_t batch_peak_rss; /* bytes, at the end */
    double wall_s, cpu_s;    /* the whole child: cpu/wall < 1 = it waited */
    double load_s, hit_s, miss_s, bhit_s, bmiss_s, scan_s;
    struct tally single;     /* single gets: present keys, then absent */
    struct tally batch;      /* batched gets of the same keys */
    int batched;             /* the engine has get_batch */
    uint64_t scanned, scan_digest;
    int unordered_scan;      /* in no key order: not compared, no rate */
    /* bonsai-file and LMDB only: its single gets again, in rounds that
     * alternate with the same gets on a bonsai-mem store the child loads
     * beside it (paired_phase) */
    int paired;
    double pair_hit_s, pair_miss_s;         /* the engine's */
    double pair_mem_hit_s, pair_mem_miss_s; /* the memory store's */
};

/* ---- one engine's state in a child ---------------------------------------- */

struct ctx {
    const struct stream *st;
    char path[PATH_MAX];     /* the store file; "" in memory */
    char *error;             /* points into the result */
    /* LMDB */
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    unsigned put_flags;
    /* bonsai */
    bonsai_db *db;
    bonsai_txn *btxn;        /* NULL in no-transaction mode */
    bonsai_map map;
    int bonsai_txns;
    void *batch_keys;        /* get_batch's: u64s or bonsai_vals */
    bonsai_val *batch_vals;
    size_t batch_cap;        /* entries of both */
    /* the in-memory peers */
    size_t heap0;            /* malloc's bytes in use before the load */
    struct peer *peer;
    Pvoid_t judy;
    uint64_t judy_entries;
    char judy_key[MAX_KEY + 1]; /* NUL-terminated, for JudySL */
};

static int fail(struct ctx *c, const char *what, const char *why)
{
    snprintf(c->error, ERROR_LEN, "%s: %s", what, why);
    return -1;
}

static int lmdb_check(struct ctx *c, const char *what, int rc)
{
    return rc == MDB_SUCCESS ? 0 : fail(c, what, mdb_strerror(rc));
}

static int bonsai_check(struct ctx *c, const char *what, int rc)
{
    return rc == BONSAI_OK ? 0 : fail(c, what, bonsai_strerror(rc));
}

/* The operations a child runs, in this order: open; put... with commit
 * after every BATCH puts; end_load (last commit, flush, start reading);
 * stat; get...; get_batch...; scan; close.  get returns 1 found, 0 absent,
 * -1 error.  get_batch (NULL if the engine has none) looks up n keys at
 * once: found[i] 1 with v[i], vlen[i] the value (valid until the next
 * call), or 0; it returns 0 or -1 on an error.  batch_buffers (with
 * get_batch) makes and writes the engine's own arrays for calls of up to n
 * keys before the clock starts, as batch_alloc does the caller's.  The
 * engine's fields a workload does not have are NULL. */
struct engine_ops {
    int (*open)(struct ctx *c);
    int (*put)(struct ctx *c, const struct key *k, const void *v, size_t vlen);
    int (*commit)(struct ctx *c);
    int (*end_load)(struct ctx *c);
    int (*stat)(struct ctx *c, uint64_t *entries, uint64_t *bytes_used,
                uint64_t *tree_bytes);
    int (*get)(struct ctx *c, const struct key *k, const void **v,
               size_t *vlen);
    int (*get_batch)(struct ctx *c, const struct key *keys, size_t n,
                     const void **v, size_t *vlen, uint8_t *found);
    int (*batch_buffers)(struct ctx *c, size_t n);
    int (*scan)(struct ctx *c, uint64_t *count, uint64_t *digest);
    void (*close)(struct ctx *c);
};

/* ---- LMDB ----------------------------------------------------------------- */

static int lmdb_open(struct ctx *c)
{
    unsigned env_flags = MDB_NOSUBDIR | MDB_WRITEMAP | MDB_NOSYNC |
                         MDB_MAPASYNC | MDB_NOMETASYNC | MDB_NOLOCK |
                         MDB_NORDAHEAD;
    unsigned db_flags = MDB_CREATE | (is_u64(c->st) ? MDB_INTEGERKEY : 0);
    c->put_flags = c->st->w->keys == KEYS_SEQ_U64 ? MDB_APPEND : 0;
    if (lmdb_check(c, "mdb_env_create", mdb_env_create(&c->env)) ||
        lmdb_check(c, "mdb_env_set_mapsize",
                   mdb_env_set_mapsize(c->env, MAP_SIZE)) ||
        lmdb_check(c, "mdb_env_open",
                   mdb_env_open(c->env, c->path, env_flags, 0644)) ||
        lmdb_check(c, "mdb_txn_begin",
                   mdb_txn_begin(c->env, NULL, 0, &c->txn)))
        return -1;
    return lmdb_check(c, "mdb_dbi_open",
                      mdb_dbi_open(c->txn, NULL, db_flags, &c->dbi));
}

static MDB_val lmdb_key(const struct ctx *c, const struct key *k)
{
    if (is_u64(c->st))
        return (MDB_val){sizeof k->u, (void *)&k->u};
    return (MDB_val){k->len, (void *)k->s};
}

static int lmdb_put(struct ctx *c, const struct key *k, const void *v,
                    size_t vlen)
{
    MDB_val key = lmdb_key(c, k), val = {vlen, (void *)v};
    return lmdb_check(c, "mdb_put",
                      mdb_put(c->txn, c->dbi, &key, &val, c->put_flags));
}

static int lmdb_commit(struct ctx *c)
{
    int rc = mdb_txn_commit(c->txn);
    c->txn = NULL;
    if (lmdb_check(c, "mdb_txn_commit", rc))
        return -1;
    return lmdb_check(c, "mdb_txn_begin",
                      mdb_txn_begin(c->env, NULL, 0, &c->txn));
}

static int lmdb_end_load(struct ctx *c)
{
    int rc = mdb_txn_commit(c->txn);
    c->txn = NULL;
    if (lmdb_check(c, "mdb_txn_commit", rc))
        return -1;
    return lmdb_check(c, "mdb_txn_begin",
                      mdb_txn_begin(c->env, NULL, MDB_RDONLY, &c->txn));
}

/* Bytes in use: every page up to the last one allocated; the tree: its
 * branch, leaf and overflow pages (free pages below the last excluded). */
static int lmdb_stat(struct ctx *c, uint64_t *entries, uint64_t *bytes_used,
                     uint64_t *tree_bytes)
{
    MDB_envinfo info;
    MDB_stat env_st, db_st;
    if (lmdb_check(c, "mdb_env_info", mdb_env_info(c->env, &info)) ||
        lmdb_check(c, "mdb_env_stat", mdb_env_stat(c->env, &env_st)) ||
        lmdb_check(c, "mdb_stat", mdb_stat(c->txn, c->dbi, &db_st)))
        return -1;
    *entries = db_st.ms_entries;
    *bytes_used = ((uint64_t)info.me_last_pgno + 1) * env_st.ms_psize;
    *tree_bytes = ((uint64_t)db_st.ms_branch_pages + db_st.ms_leaf_pages +
                   db_st.ms_overflow_pages) * db_st.ms_psize;
    return 0;
}

static int lmdb_get(struct ctx *c, const struct key *k, const void **v,
                    size_t *vlen)
{
    MDB_val key = lmdb_key(c, k), val;
    int rc = mdb_get(c->txn, c->dbi, &key, &val);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (lmdb_check(c, "mdb_get", rc))
        return -1;
    *v = val.mv_data;
    *vlen = val.mv_size;
    return 1;
}

static int lmdb_scan(struct ctx *c, uint64_t *count, uint64_t *digest)
{
    MDB_cursor *cur;
    MDB_val key, val;
    if (lmdb_check(c, "mdb_cursor_open",
                   mdb_cursor_open(c->txn, c->dbi, &cur)))
        return -1;
    uint64_t n = 0, h = 0;
    int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST);
    for (; rc == MDB_SUCCESS; rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
        h = fold_bytes(h, key.mv_data, key.mv_size);
        h = fold_bytes(h, val.mv_data, val.mv_size);
        n++;
    }
    mdb_cursor_close(cur);
    *count = n;
    *digest = h;
    return rc == MDB_NOTFOUND ? 0 : lmdb_check(c, "mdb_cursor_get", rc);
}

static void lmdb_close(struct ctx *c)
{
    if (c->txn)
        mdb_txn_abort(c->txn);
    if (c->env)
        mdb_env_close(c->env);
}

static const struct engine_ops LMDB_OPS = {
    lmdb_open, lmdb_put, lmdb_commit, lmdb_end_load,
    lmdb_stat, lmdb_get, NULL, NULL, lmdb_scan, lmdb_close};

/* ---- bonsai --------------------------------------------------------------- */

/* bonsai-mem passes path "" (anonymous memory, options default);
 * bonsai-file a path, with transactions on and sync off. */
static int bonsai_open_store(struct ctx *c)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = MAP_SIZE;
    if (c->path[0]) {
        o.transactions = 1;
        o.sync = 0;
    }
    c->bonsai_txns = c->path[0] != '\0';
    if (bonsai_check(c, "bonsai_open",
                     bonsai_open(c->path[0] ? c->path : NULL, &o, &c->db)))
        return -1;
    if (c->bonsai_txns &&
        bonsai_check(c, "bonsai_txn_begin",
                     bonsai_txn_begin(c->db, 0, &c->btxn)))
        return -1;
    unsigned kind = is_u64(c->st) ? BONSAI_KEY_U64 : BONSAI_KEY_BYTES;
    return bonsai_check(c, "bonsai_map_create",
                        bonsai_map_create(c->db, c->btxn, "bench", kind,
                                          &c->map));
}

static int bonsai_put_key(struct ctx *c, const struct key *k, const void *v,
                          size_t vlen)
{
    bonsai_val val = {vlen, vlen ? v : ""};
    if (is_u64(c->st))
        return bonsai_check(c, "bonsai_put_u64",
                            bonsai_put_u64(c->btxn, c->map, k->u, &val, 0));
    bonsai_val key = {k->len, k->s};
    return bonsai_check(c, "bonsai_put",
                        bonsai_put(c->btxn, c->map, &key, &val, 0));
}

/* Ends the write transaction and begins the next: a write one, or (read)
 * a read snapshot. */
static int bonsai_next_txn(struct ctx *c, unsigned flags)
{
    int rc = bonsai_txn_commit(c->btxn);
    c->btxn = NULL;
    if (bonsai_check(c, "bonsai_txn_commit", rc))
        return -1;
    return bonsai_check(c, "bonsai_txn_begin",
                        bonsai_txn_begin(c->db, flags, &c->btxn));
}

static int bonsai_commit_batch(struct ctx *c)
{
    return c->bonsai_txns ? bonsai_next_txn(c, 0) : 0;
}

/* Without transactions the write cache is flushed, so that bytes_used
 * counts every node. */
static int bonsai_end_load(struct ctx *c)
{
    if (c->bonsai_txns)
        return bonsai_next_txn(c, BONSAI_TXN_RDONLY);
    return bonsai_check(c, "bonsai_sync", bonsai_sync(c->db));
}

static int bonsai_stat_store(struct ctx *c, uint64_t *entries,
                             uint64_t *bytes_used, uint64_t *tree_bytes)
{
    bonsai_stat st = {0};
    bonsai_map_info mi = {0};
    if (bonsai_check(c, "bonsai_db_stat", bonsai_db_stat(c->db, &st)) ||
        bonsai_check(c, "bonsai_map_stat",
                     bonsai_map_stat(c->btxn, c->map, &mi)) ||
        bonsai_check(c, "bonsai_count",
                     bonsai_count(c->btxn, c->map, entries)))
        return -1;
    *bytes_used = st.bytes_used;
    *tree_bytes = mi.page_bytes + mi.overflow_bytes;
    return 0;
}

static int bonsai_get_key(struct ctx *c, const struct key *k, const void **v,
                          size_t *vlen)
{
    bonsai_val val;
    int rc;
    if (is_u64(c->st)) {
        rc = bonsai_get_u64(c->btxn, c->map, k->u, &val);
    } else {
        bonsai_val key = {k->len, k->s};
        rc = bonsai_get(c->btxn, c->map, &key, &val);
    }
    if (rc == BONSAI_NOTFOUND)
        return 0;
    if (bonsai_check(c, "bonsai_get", rc))
        return -1;
    *v = val.data;
    *vlen = val.size;
    return 1;
}

/* Writes every page of a new array, so that its page faults come now and
 * not inside a timed loop.  Not with zeros: a compiler may fold malloc and
 * a zeroing memset into calloc, which leaves fresh pages untouched. */
static void write_pages(void *p, size_t bytes)
{
    memset(p, 0xa5, bytes);
}

/* Grows the arrays of keys and values bonsai's batched get takes to n
 * entries: u64 keys or bonsai_vals, as the map's keys are.  Written once
 * when made, so that their page faults are not a lookup's. */
static int bonsai_batch_room(struct ctx *c, size_t n)
{
    if (n <= c->batch_cap)
        return 0;
    free(c->batch_keys);
    free(c->batch_vals);
    size_t key_bytes = n * (is_u64(c->st) ? sizeof(uint64_t)
                                          : sizeof(bonsai_val));
    c->batch_keys = malloc(key_bytes);
    c->batch_vals = malloc(n * sizeof *c->batch_vals);
    c->batch_cap = c->batch_keys && c->batch_vals ? n : 0;
    if (!c->batch_cap)
        return fail(c, "malloc", "out of memory");
    write_pages(c->batch_keys, key_bytes);
    write_pages(c->batch_vals, n * sizeof *c->batch_vals);
    return 0;
}

/* The batch in the map's key form, with c->btxn as bonsai_get_key does. */
static int bonsai_get_batch_keys(struct ctx *c, const struct key *keys,
                                 size_t n, const void **v, size_t *vlen,
                                 uint8_t *found)
{
    int rc;
    if (bonsai_batch_room(c, n))
        return -1;
    if (is_u64(c->st)) {
        uint64_t *u = c->batch_keys;
        for (size_t i = 0; i < n; i++)
            u[i] = keys[i].u;
        rc = bonsai_get_batch_u64(c->btxn, c->map, u, n, c->batch_vals, found);
    } else {
        bonsai_val *s = c->batch_keys;
        for (size_t i = 0; i < n; i++)
            s[i] = (bonsai_val){keys[i].len, keys[i].s};
        rc = bonsai_get_batch(c->btxn, c->map, s, n, c->batch_vals, found);
    }
    if (bonsai_check(c, "bonsai_get_batch", rc))
        return -1;
    for (size_t i = 0; i < n; i++) {
        v[i] = c->batch_vals[i].data;
        vlen[i] = c->batch_vals[i].size;
    }
    return 0;
}

static int bonsai_scan(struct ctx *c, uint64_t *count, uint64_t *digest)
{
    bonsai_cursor *cur;
    bonsai_val key, val;
    if (bonsai_check(c, "bonsai_cursor_open",
                     bonsai_cursor_open(c->btxn, c->map, &cur)))
        return -1;
    uint64_t n = 0, h = 0;
    int rc = bonsai_cursor_first(cur);
    for (; rc == BONSAI_OK; rc = bonsai_cursor_next(cur)) {
        rc = bonsai_cursor_get(cur, &key, &val);
        if (rc != BONSAI_OK)
            break;
        h = fold_bytes(h, key.data, key.size);
        h = fold_bytes(h, val.data, val.size);
        n++;
    }
    bonsai_cursor_close(cur);
    *count = n;
    *digest = h;
    return rc == BONSAI_NOTFOUND ? 0 : bonsai_check(c, "bonsai_cursor", rc);
}

static void bonsai_close_store(struct ctx *c)
{
    bonsai_txn_abort(c->btxn);
    c->btxn = NULL;
    free(c->batch_keys);
    free(c->batch_vals);
    int rc = bonsai_close(c->db);
    if (rc != BONSAI_OK && !c->error[0])
        bonsai_check(c, "bonsai_close", rc);
}

static const struct engine_ops BONSAI_OPS = {
    bonsai_open_store, bonsai_put_key, bonsai_commit_batch, bonsai_end_load,
    bonsai_stat_store, bonsai_get_key, bonsai_get_batch_keys,
    bonsai_batch_room, bonsai_scan, bonsai_close_store};

/* ---- the in-memory peers -------------------------------------------------- */

/* Bytes malloc holds, chunk headers and mmap'd blocks included: what a
 * peer's load adds to it are its store bytes. */
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* A peer has no commits and nothing to flush. */
static int peer_nothing(struct ctx *c)
{
    (void)c;
    return 0;
}

static void peer_heap_stat(const struct ctx *c, uint64_t *bytes_used,
                           uint64_t *tree_bytes)
{
    *bytes_used = *tree_bytes = heap_in_use() - c->heap0;
}

/* std::map and std::unordered_map (peers.cc) */

static int std_open(struct ctx *c, enum peer_kind kind)
{
    c->heap0 = heap_in_use();
    c->peer = peer_create(kind, is_u64(c->st), c->st->w->value_len);
    return c->peer ? 0 : fail(c, "peer_create", "out of memory");
}

static int std_map_open(struct ctx *c)
{
    return std_open(c, PEER_STD_MAP);
}

static int std_unordered_open(struct ctx *c)
{
    return std_open(c, PEER_STD_UNORDERED);
}

static struct peer_key peer_key_of(const struct ctx *c, const struct key *k)
{
    if (is_u64(c->st))
        return (struct peer_key){.u = k->u};
    return (struct peer_key){.s = k->s, .len = k->len};
}

static int std_put(struct ctx *c, const struct key *k, const void *v,
                   size_t vlen)
{
    (void)vlen; /* the peer was made for the workload's value length */
    struct peer_key pk = peer_key_of(c, k);
    return peer_put(c->peer, &pk, v) ? fail(c, "peer_put", "out of memory")
                                     : 0;
}

static int std_stat(struct ctx *c, uint64_t *entries, uint64_t *bytes_used,
                    uint64_t *tree_bytes)
{
    *entries = peer_count(c->peer);
    peer_heap_stat(c, bytes_used, tree_bytes);
    return 0;
}

static int std_get(struct ctx *c, const struct key *k, const void **v,
                   size_t *vlen)
{
    struct peer_key pk = peer_key_of(c, k);
    int found = peer_get(c->peer, &pk, v);
    if (found < 0)
        return fail(c, "peer_get", "out of memory");
    *vlen = found ? c->st->w->value_len : 0;
    return found;
}

struct std_scan_state {
    int u64;
    uint64_t n, h;
};

static void std_scan_entry(void *arg, const struct peer_key *k, const void *v,
                           size_t vlen)
{
    struct std_scan_state *s = arg;
    s->h = s->u64 ? fold_bytes(s->h, &k->u, sizeof k->u)
                  : fold_bytes(s->h, k->s, k->len);
    s->h = fold_bytes(s->h, v, vlen);
    s->n++;
}

static int std_scan(struct ctx *c, uint64_t *count, uint64_t *digest)
{
    struct std_scan_state s = {.u64 = is_u64(c->st)};
    peer_scan(c->peer, std_scan_entry, &s);
    *count = s.n;
    *digest = s.h;
    return 0;
}

static void std_close(struct ctx *c)
{
    if (c->peer)
        peer_destroy(c->peer);
}

static const struct engine_ops STD_MAP_OPS = {
    std_map_open, std_put, peer_nothing, peer_nothing,
    std_stat, std_get, NULL, NULL, std_scan, std_close};

static const struct engine_ops STD_UNORDERED_OPS = {
    std_unordered_open, std_put, peer_nothing, peer_nothing,
    std_stat, std_get, NULL, NULL, std_scan, std_close};

/* Judy: JudyL for u64 keys, JudySL for string keys.  A Judy word holds one
 * pointer: to a malloc'd copy of the value, or to JUDY_EMPTY when values
 * are empty, so that a word still NULL after an insert is a new key. */

_Static_assert(sizeof(Word_t) == sizeof(uint64_t), "JudyL keys are u64");

static unsigned char JUDY_EMPTY[1];

static int judy_fail(struct ctx *c, const char *what, const JError_t *err)
{
    char why[40];
    snprintf(why, sizeof why, "Judy error %d", (int)JU_ERRNO(err));
    return fail(c, what, why);
}

static int judy_open(struct ctx *c)
{
    c->heap0 = heap_in_use();
    c->judy = NULL;
    return 0;
}

/* JudySL takes a NUL-terminated key: the string keys hold no NUL byte. */
static const uint8_t *judy_string(struct ctx *c, const struct key *k)
{
    memcpy(c->judy_key, k->s, k->len);
    c->judy_key[k->len] = '\0';
    return (const uint8_t *)c->judy_key;
}

static int judy_put(struct ctx *c, const struct key *k, const void *v,
                    size_t vlen)
{
    JError_t err;
    PPvoid_t word = is_u64(c->st)
                        ? JudyLIns(&c->judy, (Word_t)k->u, &err)
                        : JudySLIns(&c->judy, judy_string(c, k), &err);
    if (word == PPJERR)
        return judy_fail(c, is_u64(c->st) ? "JudyLIns" : "JudySLIns", &err);
    if (!*word) {
        *word = vlen ? malloc(vlen) : JUDY_EMPTY;
        if (!*word)
            return fail(c, "malloc", "out of memory");
        c->judy_entries++;
    }
    memcpy(*word, v, vlen);
    return 0;
}

static int judy_stat(struct ctx *c, uint64_t *entries, uint64_t *bytes_used,
                     uint64_t *tree_bytes)
{
    *entries = c->judy_entries;
    peer_heap_stat(c, bytes_used, tree_bytes);
    return 0;
}

static int judy_get(struct ctx *c, const struct key *k, const void **v,
                    size_t *vlen)
{
    JError_t err;
    PPvoid_t word = is_u64(c->st)
                        ? JudyLGet(c->judy, (Word_t)k->u, &err)
                        : JudySLGet(c->judy, judy_string(c, k), &err);
    if (word == PPJERR)
        return judy_fail(c, is_u64(c->st) ? "JudyLGet" : "JudySLGet", &err);
    if (!word)
        return 0;
    *v = *word;
    *vlen = c->st->w->value_len;
    return 1;
}

/* The word of the first entry (first) or of the one after the last found;
 * its key in *u (u64 keys) or c->judy_key (strings).  NULL at the end. */
static PPvoid_t judy_step(struct ctx *c, Word_t *u, int first, JError_t *err)
{
    uint8_t *s = (uint8_t *)c->judy_key;
    if (first) {
        *u = 0;
        s[0] = '\0';
    }
    if (is_u64(c->st))
        return first ? JudyLFirst(c->judy, u, err) : JudyLNext(c->judy, u, err);
    return first ? JudySLFirst(c->judy, s, err) : JudySLNext(c->judy, s, err);
}

static int judy_scan(struct ctx *c, uint64_t *count, uint64_t *digest)
{
    JError_t err;
    Word_t u;
    uint64_t n = 0, h = 0;
    size_t vlen = c->st->w->value_len;
    PPvoid_t word = judy_step(c, &u, 1, &err);
    for (; word && word != PPJERR; word = judy_step(c, &u, 0, &err)) {
        h = is_u64(c->st) ? fold_bytes(h, &u, sizeof u)
                          : fold_bytes(h, c->judy_key, strlen(c->judy_key));
        h = fold_bytes(h, *word, vlen);
        n++;
    }
    *count = n;
    *digest = h;
    if (word == PPJERR)
        return judy_fail(c, is_u64(c->st) ? "JudyLNext" : "JudySLNext", &err);
    return 0;
}

static void judy_close(struct ctx *c)
{
    JError_t err;
    Word_t u;
    if (c->st->w->value_len) {
        PPvoid_t word = judy_step(c, &u, 1, &err);
        for (; word && word != PPJERR; word = judy_step(c, &u, 0, &err))
            free(*word);
    }
    if (is_u64(c->st))
        JudyLFreeArray(&c->judy, &err);
    else
        JudySLFreeArray(&c->judy, &err);
}

static const struct engine_ops JUDY_OPS = {
    judy_open, judy_put, peer_nothing, peer_nothing,
    judy_stat, judy_get, NULL, NULL, judy_scan, judy_close};

/* ---- the run in a child --------------------------------------------------- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t peak_rss_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024
                                            : 0;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static uint64_t file_bytes(const char *path)
{
    struct stat sb;
    if (!path[0] || stat(path, &sb) != 0)
        return 0;
    return (uint64_t)sb.st_blocks * 512; /* LMDB's file is sparse */
}

static int load(const struct engine_ops *e, struct ctx *c, struct result *r)
{
    const struct stream *st = c->st;
    unsigned char v[MAX_VALUE];
    struct key k;
    double t0 = now();
    for (uint64_t i = 0; i < st->n; i++) {
        uint64_t id = stream_id(st, i);
        key_of(st, id, &k);
        value_of(st, id, v);
        if (e->put(c, &k, v, st->w->value_len))
            return -1;
        if ((i + 1) % BATCH == 0 && i + 1 < st->n && e->commit(c))
            return -1;
    }
    if (e->end_load(c))
        return -1;
    r->load_s = now() - t0;
    r->file_bytes = file_bytes(c->path);
    return e->stat(c, &r->entries, &r->bytes_used, &r->tree_bytes);
}

static uint64_t lookup_id(const struct stream *st, uint64_t q, int absent)
{
    return absent ? absent_id(st, q) : present_id(st, q);
}

/* Counts one lookup's answer into t, a present key's value checked
 * against the stream, and folds the answer into t's digest.  Inline: it
 * is in the timed loops, as this code was before it was shared. */
static inline void tally(const struct stream *st, struct tally *t,
                         uint64_t id, int absent, int found, const void *v,
                         size_t vlen)
{
    unsigned char want[MAX_VALUE];
    t->digest = fold(t->digest, (uint64_t)found);
    if (!found)
        return;
    t->digest = fold_bytes(t->digest, v, vlen);
    if (absent) {
        t->absent_found++;
        return;
    }
    t->hits++;
    value_of(st, id, want);
    if (vlen != st->w->value_len || (vlen && memcmp(v, want, vlen)))
        t->bad_values++;
}

/* Single gets of queries [from, to), a chunk of LOOKUP_CHUNK keys at a
 * time: the chunk's keys are made with the clock stopped, as a program
 * has the keys it looks up in hand, so that the time is the engine's
 * (making a string key costs a fifth of a bonsai miss).  Each answer is
 * checked inside the clock, as a program uses it before its next call.
 * Adds the time to *timed. */
static int timed_gets(const struct engine_ops *e, struct ctx *c,
                      struct tally *t, int absent, uint64_t from,
                      uint64_t to, double *timed)
{
    const struct stream *st = c->st;
    struct key keys[LOOKUP_CHUNK];
    uint64_t ids[LOOKUP_CHUNK];
    for (uint64_t q0 = from; q0 < to; q0 += LOOKUP_CHUNK) {
        size_t n = to - q0 < LOOKUP_CHUNK ? (size_t)(to - q0) : LOOKUP_CHUNK;
        for (size_t i = 0; i < n; i++) {
            ids[i] = lookup_id(st, q0 + i, absent);
            key_of(st, ids[i], &keys[i]);
        }
        double t0 = now();
        for (size_t i = 0; i < n; i++) {
            const void *v = NULL;
            size_t vlen = 0;
            int found = e->get(c, &keys[i], &v, &vlen);
            if (found < 0)
                return -1;
            tally(st, t, ids[i], absent, found, v, vlen);
        }
        *timed += now() - t0;
    }
    return 0;
}

static int lookups(const struct engine_ops *e, struct ctx *c,
                   struct result *r, int absent)
{
    const struct stream *st = c->st;
    uint64_t count = absent ? st->absent : st->present;
    double *timed = absent ? &r->miss_s : &r->hit_s;
    *timed = 0;
    return timed_gets(e, c, &r->single, absent, 0, count, timed);
}

/* The caller's side of a batched get: the keys of one call, their ids
 * (to check the answers), and the answers. */
struct batch {
    size_t cap;
    struct key *keys;
    uint64_t *ids;
    const void **v;
    size_t *vlen;
    uint8_t *found;
};

static void batch_free(struct batch *b)
{
    free(b->keys);
    free(b->ids);
    free(b->v);
    free(b->vlen);
    free(b->found);
}

/* The arrays are written once before any clock starts, as a program
 * would reuse its buffers: the single lookups pay no page faults for their
 * one key either. */
static int batch_alloc(struct ctx *c, struct batch *b, size_t cap)
{
    *b = (struct batch){.cap = cap};
    b->keys = malloc(cap * sizeof *b->keys);
    b->ids = malloc(cap * sizeof *b->ids);
    b->v = malloc(cap * sizeof *b->v);
    b->vlen = malloc(cap * sizeof *b->vlen);
    b->found = malloc(cap * sizeof *b->found);
    if (!b->keys || !b->ids || !b->v || !b->vlen || !b->found)
        return fail(c, "malloc", "out of memory");
    write_pages(b->keys, cap * sizeof *b->keys);
    write_pages(b->ids, cap * sizeof *b->ids);
    write_pages(b->v, cap * sizeof *b->v);
    write_pages(b->vlen, cap * sizeof *b->vlen);
    write_pages(b->found, cap * sizeof *b->found);
    return 0;
}

/* The keys of lookups() in calls of b->cap keys (the last one shorter),
 * each call's keys made with the clock stopped as in lookups(); the
 * answers are tallied as lookups() does, into r->batch, inside the
 * clock. */
static int batch_lookups(const struct engine_ops *e, struct ctx *c,
                         struct result *r, struct batch *b, int absent)
{
    const struct stream *st = c->st;
    uint64_t count = absent ? st->absent : st->present;
    double timed = 0;
    for (uint64_t q0 = 0; q0 < count; q0 += b->cap) {
        size_t n = count - q0 < b->cap ? (size_t)(count - q0) : b->cap;
        for (size_t i = 0; i < n; i++) {
            b->ids[i] = lookup_id(st, q0 + i, absent);
            key_of(st, b->ids[i], &b->keys[i]);
        }
        double t0 = now();
        if (e->get_batch(c, b->keys, n, b->v, b->vlen, b->found))
            return -1;
        for (size_t i = 0; i < n; i++)
            tally(st, &r->batch, b->ids[i], absent, b->found[i], b->v[i],
                  b->vlen[i]);
        timed += now() - t0;
    }
    *(absent ? &r->bmiss_s : &r->bhit_s) = timed;
    return 0;
}

/* Present keys, then absent ones, in calls of at most BATCH_GETS keys:
 * for engines with a batched get. */
static int batched_phase(const struct engine_ops *e, struct ctx *c,
                         struct result *r)
{
    const struct stream *st = c->st;
    uint64_t most = st->present > st->absent ? st->present : st->absent;
    struct batch b;
    if (!e->get_batch)
        return 0;
    r->batched = 1;
    int rc = batch_alloc(c, &b, most < BATCH_GETS ? (size_t)most : BATCH_GETS);
    if (rc == 0)
        rc = e->batch_buffers(c, b.cap);
    if (rc == 0)
        rc = batch_lookups(e, c, r, &b, 0) || batch_lookups(e, c, r, &b, 1);
    batch_free(&b);
    return rc ? -1 : 0;
}

static int scan(const struct engine_ops *e, struct ctx *c, struct result *r)
{
    double t0 = now();
    if (e->scan(c, &r->scanned, &r->scan_digest))
        return -1;
    r->scan_s = now() - t0;
    return 0;
}

/* How each engine runs: its operations, whether its store is a file in
 * the job's directory, and whether its scan visits the keys in order. */
static const struct engine_run {
    const struct engine_ops *ops;
    int in_file;
    int ordered;
} ENGINE_RUNS[N_ENGINES] = {
    [ENG_LMDB] = {&LMDB_OPS, 1, 1},
    [ENG_BONSAI_MEM] = {&BONSAI_OPS, 0, 1},
    [ENG_BONSAI_FILE] = {&BONSAI_OPS, 1, 1},
    [ENG_STD_MAP] = {&STD_MAP_OPS, 0, 1},
    [ENG_STD_UNORDERED] = {&STD_UNORDERED_OPS, 0, 0},
    [ENG_JUDY] = {&JUDY_OPS, 0, 1},
};

/* ---- an engine against bonsai-mem, in one process ------------------------ */

#define PAIR_ROUNDS 8u /* rounds each store takes in turn (paired_gets) */

static int same_tally(const struct tally *a, const struct tally *b)
{
    return a->hits == b->hits && a->absent_found == b->absent_found &&
           a->bad_values == b->bad_values && a->digest == b->digest;
}

/* One side of a pairing: an engine, its store and what its gets took. */
struct side {
    const struct engine_ops *ops;
    struct ctx *c;
    struct tally t;
    double s;
};

/* The single gets of present (or absent) keys in PAIR_ROUNDS rounds, each
 * round on one store and then the other (which goes first alternates),
 * each store's time summed into its side. */
static int paired_gets(struct side *a, struct side *b, int absent)
{
    const struct stream *st = a->c->st;
    uint64_t count = absent ? st->absent : st->present;
    a->t = b->t = (struct tally){0};
    a->s = b->s = 0;
    for (unsigned round = 0; round < PAIR_ROUNDS; round++) {
        uint64_t from = count * round / PAIR_ROUNDS;
        uint64_t to = count * (round + 1) / PAIR_ROUNDS;
        for (unsigned turn = 0; turn < 2; turn++) {
            struct side *x = (turn + round) % 2 == 0 ? a : b;
            if (timed_gets(x->ops, x->c, &x->t, absent, from, to, &x->s))
                return -1;
        }
    }
    if (!same_tally(&a->t, &b->t))
        return fail(a->c, "paired gets", "the two stores answer differently");
    return 0;
}

/* The child's gets against bonsai-mem's, from one process.  Children run
 * one after the other meet the machine's other tenants at different
 * times: here the file child's read-snapshot gets against the other
 * child's differed by -48 % to +113 % from one run to the next, with a
 * slow child slow in every phase, and bonsai-mem's string misses against
 * LMDB's by 0.82x to 1.68x in three runs of one build.  So the bonsai-file
 * and LMDB children also load the stream into a bonsai store in anonymous
 * memory, and the two stores' gets take turns. */
static int paired_phase(const struct engine_ops *e, struct ctx *c,
                        struct result *r)
{
    struct ctx mem = {.st = c->st, .error = r->error}; /* no path: memory */
    struct result scratch = {0};
    struct side own = {.ops = e, .c = c}, bm = {.ops = &BONSAI_OPS, .c = &mem};
    int rc = BONSAI_OPS.open(&mem) || load(&BONSAI_OPS, &mem, &scratch) ||
             paired_gets(&own, &bm, 0);
    r->pair_hit_s = own.s;
    r->pair_mem_hit_s = bm.s;
    rc = rc || paired_gets(&own, &bm, 1);
    r->pair_miss_s = own.s;
    r->pair_mem_miss_s = bm.s;
    BONSAI_OPS.close(&mem);
    r->paired = !rc;
    return rc ? -1 : 0;
}

/* The phases in order, up to the first that fails. */
static int run_phases(const struct engine_ops *e, struct ctx *c,
                      struct result *r)
{
    if (e->open(c) || load(e, c, r) || lookups(e, c, r, 0) ||
        lookups(e, c, r, 1) || scan(e, c, r))
        return -1;
    /* The store's peak, taken before the batched phase: its key and answer
     * arrays (some 100 MB at BATCH_GETS keys) are the caller's transient
     * buffers and would be charged to the store's bytes per entry.
     * batch_peak_rss, taken at the end, still shows them. */
    r->peak_rss = peak_rss_bytes();
    return batched_phase(e, c, r);
}

static void run_engine(enum engine_id id, const struct stream *st,
                       const char *dir, struct result *r)
{
    const struct engine_ops *e = ENGINE_RUNS[id].ops;
    struct ctx c = {.st = st, .error = r->error};
    double t0 = now(), cpu0 = cpu_seconds();
    r->unordered_scan = !ENGINE_RUNS[id].ordered;
    if (ENGINE_RUNS[id].in_file &&
        snprintf(c.path, sizeof c.path, "%s/store", dir) >= (int)sizeof c.path)
        fail(&c, "store path", "too long");
    else
        run_phases(e, &c, r);
    r->batch_peak_rss = peak_rss_bytes();
    if (!r->peak_rss) /* an earlier phase failed */
        r->peak_rss = r->batch_peak_rss;
    r->wall_s = now() - t0; /* the child's own phases */
    r->cpu_s = cpu_seconds() - cpu0;
    if ((id == ENG_BONSAI_FILE || id == ENG_LMDB) && !r->error[0])
        paired_phase(e, &c, r);
    e->close(&c);
    r->ran = 1;
}

/* ---- forking ------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t len)
{
    const char *b = p;
    while (len) {
        ssize_t w = write(fd, b, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        len -= (size_t)w;
    }
    return 0;
}

static size_t read_all(int fd, void *p, size_t len)
{
    char *b = p;
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, b + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}

/* Removes the files a child left in dir (the store, a lock file), then
 * dir itself. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[PATH_MAX];
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) <
                (int)sizeof path)
                unlink(path);
        }
    }
    closedir(d);
    rmdir(dir);
}

static void child_died(struct result *r, int status, unsigned timeout)
{
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        snprintf(r->error, sizeof r->error, "timed out after %u s (--timeout)",
                 timeout);
    else if (WIFSIGNALED(status))
        snprintf(r->error, sizeof r->error, "child killed by signal %d (%s)",
                 WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(r->error, sizeof r->error, "child exited with status %d",
                 WEXITSTATUS(status));
}

/* One engine on one workload, run in a child of its own with a directory
 * of its own.  The child's report (smaller than the pipe's buffer) waits
 * in the pipe until the parent reaps the child. */
struct job {
    const struct stream *st;
    enum engine_id engine;
    struct result *r;
    char dir[PATH_MAX];
    unsigned timeout;    /* seconds, 0 = none */
    pid_t pid;           /* > 0 while it runs */
    int fd;              /* read end of its pipe */
    double t0;
};

static int job_fail(struct job *j, const char *what)
{
    snprintf(j->r->error, sizeof j->r->error, "%s: %s", what,
             strerror(errno));
    return -1;
}

static int job_start(struct job *j)
{
    int fds[2];
    *j->r = (struct result){0};
    if (mkdir(j->dir, 0755) != 0)
        return job_fail(j, "mkdir");
    if (pipe(fds) != 0)
        return job_fail(j, "pipe");
    fprintf(stderr, "bonsai-bench: start %s %s (%" PRIu64 " entries)\n",
            j->st->w->name, ENGINE_NAMES[j->engine], j->st->n);
    fflush(NULL);
    j->t0 = now();
    j->pid = fork();
    if (j->pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return job_fail(j, "fork");
    }
    if (j->pid == 0) {
        close(fds[0]);
        alarm(j->timeout); /* SIGALRM ends a run that takes too long */
        run_engine(j->engine, j->st, j->dir, j->r);
        _exit(write_all(fds[1], j->r, sizeof *j->r) ? EXIT_FAIL : 0);
    }
    close(fds[1]);
    j->fd = fds[0];
    return 0;
}

static void job_finish(struct job *j, int status)
{
    size_t got = read_all(j->fd, j->r, sizeof *j->r);
    close(j->fd);
    j->pid = 0;
    remove_dir(j->dir);
    if (got != sizeof *j->r || !WIFEXITED(status) || WEXITSTATUS(status)) {
        *j->r = (struct result){0};
        child_died(j->r, status, j->timeout);
    }
    fprintf(stderr, "bonsai-bench: done  %s %s in %.1f s%s%s\n",
            j->st->w->name, ENGINE_NAMES[j->engine], now() - j->t0,
            j->r->error[0] ? ": FAILED: " : "", j->r->error);
}

/* Runs the jobs in order, at most `parallel` at a time. */
static void run_jobs(struct job *jobs, size_t n, int parallel)
{
    size_t next = 0;
    int running = 0;
    while (next < n || running > 0) {
        while (running < parallel && next < n)
            if (job_start(&jobs[next++]) == 0)
                running++;
        if (running == 0)
            continue;
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            break;
        for (size_t i = 0; i < next; i++) {
            if (jobs[i].pid == pid) {
                job_finish(&jobs[i], status);
                running--;
            }
        }
    }
}

/* ---- checking that the engines agree ------------------------------------ */

/* Appends a complaint to buf; returns 1 so callers can count. */
static int complain(char *buf, size_t size, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    if (used < size)
        vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
    return 1;
}

/* One way of looking up against the stream: every present key found with
 * its value, no absent key found.  how: "" or " (batched)". */
static int check_tally(const struct stream *st, const char *name,
                       const char *how, const struct tally *t, char *buf,
                       size_t size)
{
    int bad = 0;
    if (t->hits != st->present || t->bad_values)
        bad += complain(buf, size,
                        "  %s%s: %" PRIu64 " of %" PRIu64 " present keys "
                        "found, %" PRIu64 " wrong values\n",
                        name, how, t->hits, st->present, t->bad_values);
    if (t->absent_found)
        bad += complain(buf, size, "  %s%s: %" PRIu64 " absent keys found\n",
                        name, how, t->absent_found);
    return bad;
}

/* One engine against the stream itself, its batched lookups also against
 * its single ones. */
static int check_self(const struct stream *st, const char *name,
                      const struct result *r, char *buf, size_t size)
{
    int bad = 0;
    if (r->error[0])
        return complain(buf, size, "  %s: FAILED: %s\n", name, r->error);
    bad += check_tally(st, name, "", &r->single, buf, size);
    if (r->batched) {
        bad += check_tally(st, name, " (batched)", &r->batch, buf, size);
        if (r->batch.digest != r->single.digest)
            bad += complain(buf, size,
                            "  %s: batched and single lookups DISAGREE: "
                            "digest %016" PRIx64 "/%016" PRIx64 "\n",
                            name, r->batch.digest, r->single.digest);
    }
    if (r->scanned != r->entries)
        bad += complain(buf, size,
                        "  %s: scan saw %" PRIu64 " entries, count says %"
                        PRIu64 "\n", name, r->scanned, r->entries);
    return bad;
}

/* Two engines against each other: every lookup and the scan (its digest
 * only when both scans are in key order). */
static int check_pair(const char *a_name, const struct result *a,
                      const char *b_name, const struct result *b, char *buf,
                      size_t size)
{
    int ordered = !a->unordered_scan && !b->unordered_scan;
    if (a->entries != b->entries || a->single.digest != b->single.digest ||
        (ordered && a->scan_digest != b->scan_digest) ||
        a->scanned != b->scanned)
        return complain(buf, size,
                        "  %s and %s DISAGREE: entries %" PRIu64 "/%" PRIu64
                        ", lookup digest %016" PRIx64 "/%016" PRIx64
                        ", scan digest %016" PRIx64 "/%016" PRIx64 "\n",
                        a_name, b_name, a->entries, b->entries,
                        a->single.digest, b->single.digest, a->scan_digest,
                        b->scan_digest);
    return 0;
}

/* Returns the number of problems; their description goes to buf. */
static int check_workload(const struct stream *st, const int *selected,
                          const struct result *res, char *buf, size_t size)
{
    int bad = 0, first = -1;
    buf[0] = '\0';
    for (int e = 0; e < N_ENGINES; e++) {
        if (!selected[e])
            continue;
        int self = check_self(st, ENGINE_NAMES[e], &res[e], buf, size);
        bad += self;
        if (self || res[e].error[0])
            continue;
        if (first < 0)
            first = e;
        else
            bad += check_pair(ENGINE_NAMES[first], &res[first],
                              ENGINE_NAMES[e], &res[e], buf, size);
    }
    return bad;
}

/* ---- figures ------------------------------------------------------------ */

enum figure {
    FIG_USED, FIG_TREE, FIG_FILE, FIG_RSS, FIG_INSERT, FIG_HIT, FIG_MISS,
    FIG_BHIT, FIG_BMISS, FIG_SCAN,
    N_FIGURES
};

static const char *const FIGURE_NAMES[N_FIGURES] = {
    "bytes_per_entry", "tree_bytes_per_entry", "file_bytes_per_entry", "rss_bytes_per_entry",
    "inserts_per_s", "hits_per_s", "misses_per_s", "batch_hits_per_s",
    "batch_misses_per_s", "scan_per_s"};

/* A figure of one run; NAN when it does not apply or the run failed. */
static double figure(const struct stream *st, const struct result *r,
                     enum figure f)
{
    if (!r->ran || r->error[0] || !r->entries)
        return NAN;
    double n = (double)r->entries;
    switch (f) {
    /* 0 bytes: not measured (a peer under an allocator malloc can't see) */
    case FIG_USED: return r->bytes_used ? (double)r->bytes_used / n : NAN;
    case FIG_TREE: return r->tree_bytes ? (double)r->tree_bytes / n : NAN;
    case FIG_FILE: return r->file_bytes ? (double)r->file_bytes / n : NAN;
    case FIG_RSS: return (double)r->peak_rss / n;
    case FIG_INSERT: return (double)st->n / r->load_s;
    case FIG_HIT: return (double)st->present / r->hit_s;
    case FIG_MISS: return (double)st->absent / r->miss_s;
    case FIG_BHIT: return r->batched ? (double)st->present / r->bhit_s : NAN;
    case FIG_BMISS: return r->batched ? (double)st->absent / r->bmiss_s : NAN;
    case FIG_SCAN:
        return r->unordered_scan ? NAN : (double)r->scanned / r->scan_s;
    default: return NAN;
    }
}

/* Engine e's figure over engine base's.  A batched rate goes over base's
 * single rate when base has no batched get: what the ratio tells is how
 * bonsai's batched gets fare against the only gets LMDB and the peers
 * have. */
static double ratio(const struct stream *st, const struct result *res,
                    enum engine_id e, enum engine_id base, enum figure f)
{
    double b = figure(st, &res[base], f);
    if (isnan(b) && (f == FIG_BHIT || f == FIG_BMISS))
        b = figure(st, &res[base], f == FIG_BHIT ? FIG_HIT : FIG_MISS);
    return figure(st, &res[e], f) / b;
}

/* The engine's rate over bonsai-mem's in the paired rounds (absent: of
 * the absent keys), or NaN where they did not run. */
static double pair_ratio(const struct result *r, int absent)
{
    if (!r->paired || r->error[0])
        return NAN;
    return absent ? r->pair_mem_miss_s / r->pair_miss_s
                  : r->pair_mem_hit_s / r->pair_hit_s;
}

/* ---- the table ----------------------------------------------------------- */

static void print_rate(double v)
{
    if (isnan(v))
        printf(" %8s", "-");
    else if (v >= 1e6)
        printf(" %7.2fM", v / 1e6);
    else
        printf(" %7.0fk", v / 1e3);
}

static void print_num(double v, const char *fmt)
{
    if (isnan(v))
        printf(" %8s", "-");
    else
        printf(fmt, v);
}

static void print_header(void)
{
    printf("%-13s %-13s %9s %8s %8s %8s %8s %8s %8s %4s %8s %8s %8s %8s %8s "
           "%8s\n",
           "workload", "engine", "entries", "B/entry", "tree B/e", "file B/e",
           "RSS B/e",
           "RSS MiB", "load s", "cpu", "insert/s", "hit/s", "miss/s",
           "bhit/s", "bmiss/s", "scan/s");
}

static void print_row(const char *wname, const struct stream *st,
                      enum engine_id e, const struct result *r)
{
    printf("%-13s %-13s", wname, ENGINE_NAMES[e]);
    if (r->error[0]) {
        printf(" FAILED: %s\n", r->error);
        return;
    }
    printf(" %9" PRIu64, r->entries);
    for (int f = FIG_USED; f <= FIG_RSS; f++)
        print_num(figure(st, r, f), " %8.3f");
    printf(" %8.1f %8.2f %3.0f%%", (double)r->peak_rss / 1048576.0, r->load_s,
           r->wall_s > 0 ? 100 * r->cpu_s / r->wall_s : 0.0);
    for (int f = FIG_INSERT; f < FIG_SCAN; f++)
        print_rate(figure(st, r, f));
    if (r->unordered_scan) /* a walk in hash order is no ordered scan */
        printf(" %8s", "no order");
    else
        print_rate(figure(st, r, FIG_SCAN));
    printf("\n");
}

static void print_ratio_row(const struct stream *st, enum engine_id e,
                            enum engine_id base, const struct result *res)
{
    char label[40];
    snprintf(label, sizeof label, "%s/%s", ENGINE_NAMES[e], ENGINE_NAMES[base]);
    printf("  ratio %-29s", label);
    for (int f = FIG_USED; f <= FIG_RSS; f++)
        print_num(ratio(st, res, e, base, f), " %7.3fx");
    printf(" %8s %8s %4s", "", "", "");
    for (int f = FIG_INSERT; f <= FIG_SCAN; f++)
        print_num(ratio(st, res, e, base, f), " %7.2fx");
    printf("\n");
}

/* The engines' rows, then each bonsai engine against LMDB and bonsai-mem
 * against each in-memory peer. */
static void print_workload(const struct stream *st, const int *selected,
                           const struct result *res)
{
    for (int e = 0; e < N_ENGINES; e++)
        if (selected[e])
            print_row(st->w->name, st, e, &res[e]);
    for (int e = ENG_BONSAI_MEM; e <= ENG_BONSAI_FILE; e++)
        if (selected[e] && selected[ENG_LMDB])
            print_ratio_row(st, e, ENG_LMDB, res);
    for (int peer = ENG_STD_MAP; peer < N_ENGINES; peer++)
        if (selected[ENG_BONSAI_MEM] && selected[peer])
            print_ratio_row(st, ENG_BONSAI_MEM, peer, res);
    const struct result *f = &res[ENG_BONSAI_FILE], *l = &res[ENG_LMDB];
    if (selected[ENG_BONSAI_FILE] && f->paired && !f->error[0])
        printf("  bonsai-file/bonsai-mem in one process, rounds in turn: "
               "hits %.2fx (%.2fM/s against %.2fM/s), misses %.2fx "
               "(%.2fM/s against %.2fM/s)\n",
               pair_ratio(f, 0), st->present / f->pair_hit_s / 1e6,
               st->present / f->pair_mem_hit_s / 1e6, pair_ratio(f, 1),
               st->absent / f->pair_miss_s / 1e6,
               st->absent / f->pair_mem_miss_s / 1e6);
    if (selected[ENG_LMDB] && l->paired && !l->error[0])
        printf("  bonsai-mem/lmdb in one process, rounds in turn: "
               "hits %.2fx (%.2fM/s against %.2fM/s), misses %.2fx "
               "(%.2fM/s against %.2fM/s)\n",
               1 / pair_ratio(l, 0), st->present / l->pair_mem_hit_s / 1e6,
               st->present / l->pair_hit_s / 1e6, 1 / pair_ratio(l, 1),
               st->absent / l->pair_mem_miss_s / 1e6,
               st->absent / l->pair_miss_s / 1e6);
}

/* ---- the CSV ------------------------------------------------------------- */

/* A row's ratio_ columns are its engine over LMDB; its mem_ratio_ columns
 * bonsai-mem over its engine (bonsai-mem against each peer); its pair_
 * columns its engine over bonsai-mem in the rounds in turn (paired_phase:
 * bonsai-file and LMDB rows). */

static void csv_num(FILE *f, double v)
{
    if (isnan(v))
        fputs(",", f);
    else
        fprintf(f, ",%.6g", v);
}

static void csv_header(FILE *f)
{
    fputs("workload,workload_index,engine,engine_index,entries,bytes_used,"
          "tree_bytes,file_bytes,peak_rss,batch_peak_rss,load_s,hit_s,miss_s,"
          "bhit_s,bmiss_s,scan_s,wall_s,cpu_s,lookups_present,"
          "lookups_absent,ok", f);
    for (int i = 0; i < N_FIGURES; i++)
        fprintf(f, ",%s", FIGURE_NAMES[i]);
    for (int i = 0; i < N_FIGURES; i++)
        fprintf(f, ",ratio_%s", FIGURE_NAMES[i]);
    for (int i = 0; i < N_FIGURES; i++)
        fprintf(f, ",mem_ratio_%s", FIGURE_NAMES[i]);
    fputs(",pair_hit_ratio,pair_miss_ratio\n", f);
}

static void csv_row(FILE *f, int wi, const struct stream *st,
                    enum engine_id e, const struct result *res, int ok)
{
    const struct result *r = &res[e];
    fprintf(f, "%s,%d,%s,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
            ",%" PRIu64 ",%" PRIu64 ",%.4f,%.4f,%.4f",
            st->w->name, wi, ENGINE_NAMES[e], (int)e, r->entries,
            r->bytes_used, r->tree_bytes, r->file_bytes, r->peak_rss,
            r->batch_peak_rss, r->load_s, r->hit_s, r->miss_s);
    /* no batched gets: empty, as a figure that does not apply */
    csv_num(f, r->batched ? r->bhit_s : NAN);
    csv_num(f, r->batched ? r->bmiss_s : NAN);
    fprintf(f, ",%.4f,%.4f,%.4f,%" PRIu64 ",%" PRIu64 ",%d", r->scan_s,
            r->wall_s, r->cpu_s, st->present, st->absent, ok);
    for (int i = 0; i < N_FIGURES; i++)
        csv_num(f, figure(st, r, i));
    for (int i = 0; i < N_FIGURES; i++)
        csv_num(f, ratio(st, res, e, ENG_LMDB, i));
    for (int i = 0; i < N_FIGURES; i++)
        csv_num(f, ratio(st, res, ENG_BONSAI_MEM, e, i));
    csv_num(f, pair_ratio(r, 0));
    csv_num(f, pair_ratio(r, 1));
    fputs("\n", f);
}

/* ---- arguments ------------------------------------------------------------ */

struct args {
    double scale;
    int quick;
    uint64_t seed;
    const char *csv;
    const char *dir;
    int jobs;                   /* children at a time */
    unsigned timeout;           /* seconds per child, 0 = none */
    int workloads[N_WORKLOADS]; /* selected */
    int engines[N_ENGINES];
    int peer_workloads[N_WORKLOADS]; /* where the in-memory peers run */
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: bonsai-bench [options]\n"
        "Runs the same key streams through bonsai, LMDB and in-memory\n"
        "collections, each engine and workload in a forked child, and\n"
        "compares them.\n"
        "\n"
        "  --quick          a tenth of every size; checks only that every\n"
        "                   engine ran and that they agree (as every run)\n"
        "  --scale F        multiply every size by F (default 1)\n"
        "  --workload NAME  run only this workload (repeatable)\n"
        "  --engine NAME    run only this engine (repeatable)\n"
        "  --peers-on NAME  run std-map, std-unordered and judy only on this\n"
        "                   workload (repeatable; default all)\n"
        "  --csv PATH       write the CSV there (default bench/results.csv)\n"
        "  --dir DIR        where store files go (default /tmp)\n"
        "  --seed N         PRNG seed (default %" PRIu64 ")\n"
        "  --jobs N         run N children at a time (default 1; more\n"
        "                   only when times do not matter)\n"
        "  --timeout S      stop a child after S seconds: its run fails\n"
        "  --help           this text\n"
        "\nWorkloads (sizes at scale 1; then %.0f M present-key and %.0f M\n"
        "absent-key lookups, a full scan, and the lookups again in batched\n"
        "gets of up to %u keys (engines with one: bonsai) on each):\n",
        DEFAULT_SEED, LOOKUPS_PRESENT / 1e6, LOOKUPS_ABSENT / 1e6,
        BATCH_GETS);
    for (size_t i = 0; i < N_WORKLOADS; i++)
        fprintf(out, "  %-13s %5.0f M  %s\n", WORKLOADS[i].name,
                WORKLOADS[i].entries / 1e6, WORKLOADS[i].about);
    fprintf(out, "Engines: lmdb, bonsai-mem, bonsai-file, and the in-memory "
                 "peers std-map,\nstd-unordered (no order: its scan is not "
                 "compared) and judy.\n"
                 "\nExit status: 0 all ran and agree, 1 a run failed or the "
                 "engines disagree, 2 bad usage.\n");
}

static int select_name(const char *name, const char *const *names, size_t n,
                       int *selected)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(name, names[i]) == 0) {
            selected[i] = 1;
            return 0;
        }
    }
    return -1;
}

static int select_workload(const char *name, int *selected)
{
    const char *names[N_WORKLOADS];
    for (size_t i = 0; i < N_WORKLOADS; i++)
        names[i] = WORKLOADS[i].name;
    return select_name(name, names, N_WORKLOADS, selected);
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return errno || end == s || *end || !(*out > 0) ? -1 : 0;
}

static int parse_seed(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    *out = strtoull(s, &end, 0);
    return errno || end == s || *end ? -1 : 0;
}

static int parse_jobs(const char *s, int *out)
{
    double v;
    if (parse_double(s, &v) || v != (int)v || v > 64)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_timeout(const char *s, unsigned *out)
{
    double v;
    if (parse_double(s, &v) || v != (unsigned)v)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static void select_all_if_none(int *selected, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (selected[i])
            return;
    for (size_t i = 0; i < n; i++)
        selected[i] = 1;
}

/* Fills *a; returns 0, -1 after --help, or EXIT_USAGE. */
static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option longopts[] = {
        {"quick", no_argument, NULL, 'q'},
        {"scale", required_argument, NULL, 's'},
        {"workload", required_argument, NULL, 'w'},
        {"engine", required_argument, NULL, 'e'},
        {"peers-on", required_argument, NULL, 'p'},
        {"csv", required_argument, NULL, 'c'},
        {"dir", required_argument, NULL, 'd'},
        {"seed", required_argument, NULL, 'S'},
        {"jobs", required_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){.scale = 1.0, .seed = DEFAULT_SEED,
                       .csv = "bench/results.csv", .dir = "/tmp",
                       .jobs = 1};
    int c, idx = 0, bad = 0;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        switch (c) {
        case 'q': a->quick = 1; a->scale = 0.1; break;
        case 's': bad = parse_double(optarg, &a->scale); break;
        case 'w': bad = select_workload(optarg, a->workloads); break;
        case 'e': bad = select_name(optarg, ENGINE_NAMES, N_ENGINES,
                                    a->engines); break;
        case 'p': bad = select_workload(optarg, a->peer_workloads); break;
        case 'c': a->csv = optarg; break;
        case 'd': a->dir = optarg; break;
        case 'S': bad = parse_seed(optarg, &a->seed); break;
        case 'j': bad = parse_jobs(optarg, &a->jobs); break;
        case 't': bad = parse_timeout(optarg, &a->timeout); break;
        case 'h': usage(stdout); return -1;
        default: bad = 1; break;
        }
        if (bad && c != '?')
            fprintf(stderr, "bonsai-bench: bad value for --%s: '%s'\n",
                    longopts[idx].name, optarg);
    }
    if (bad || optind != argc) {
        fprintf(stderr, "Try 'bonsai-bench --help'.\n");
        return EXIT_USAGE;
    }
    select_all_if_none(a->workloads, N_WORKLOADS);
    select_all_if_none(a->engines, N_ENGINES);
    select_all_if_none(a->peer_workloads, N_WORKLOADS);
    return 0;
}

/* ---- main ----------------------------------------------------------------- */

static void print_intro(const struct args *a)
{
    printf("bonsai-bench: seed %" PRIu64 ", scale %g%s, stores in %s, "
           "bonsai %d.%d.%d, %s\n",
           a->seed, a->scale, a->quick ? " (quick)" : "", a->dir,
           BONSAI_VERSION_MAJOR, BONSAI_VERSION_MINOR, BONSAI_VERSION_PATCH,
           MDB_VERSION_STRING);
    printf("B/entry: store bytes in use (free pages included; for std-map, "
           "std-unordered and judy\nmalloc's bytes in use); tree B/e: the "
           "map's tree alone; file B/e: file blocks;\nRSS: the child's peak "
           "before the batched lookups; cpu: child cpu/wall; rates per\n"
           "second; bhit/s, bmiss/s: batched lookups (bonsai only); ratio "
           "A/B: A's figure over\nB's (a batched rate over B's single one "
           "if B has none); std-unordered's scan is\na walk in no order%s\n\n",
           a->jobs > 1 ? "; children ran in parallel: times are not "
                         "comparable" : "");
    fflush(stdout);
}

/* Whether engine e runs on workload wi. */
static int runs(const struct args *a, size_t wi, int e)
{
    int peer = e >= ENG_STD_MAP;
    return a->workloads[wi] && a->engines[e] &&
           (!peer || a->peer_workloads[wi]);
}

/* One job per selected workload and engine, workload after workload;
 * the engines' order rotates from one workload to the next. */
static size_t plan_jobs(const struct args *a, const char *dir,
                        const struct stream *streams,
                        struct result (*res)[N_ENGINES], struct job *jobs)
{
    size_t n = 0;
    for (size_t wi = 0; wi < N_WORKLOADS; wi++) {
        for (int k = 0; k < N_ENGINES; k++) {
            int e = (int)((wi + (size_t)k) % N_ENGINES);
            if (!runs(a, wi, e))
                continue;
            struct job *j = &jobs[n++];
            *j = (struct job){.st = &streams[wi], .engine = e,
                              .r = &res[wi][e], .timeout = a->timeout};
            snprintf(j->dir, sizeof j->dir, "%.3000s/%s-%s", dir,
                     WORKLOADS[wi].name, ENGINE_NAMES[e]);
        }
    }
    return n;
}

/* Prints the table and writes the CSV; returns the number of problems. */
static int report(const struct args *a, const struct stream *streams,
                  struct result (*res)[N_ENGINES], FILE *csv)
{
    int problems = 0;
    print_header();
    for (size_t wi = 0; wi < N_WORKLOADS; wi++) {
        if (!a->workloads[wi])
            continue;
        int ran[N_ENGINES];
        for (int e = 0; e < N_ENGINES; e++)
            ran[e] = runs(a, wi, e);
        char text[2048];
        int bad = check_workload(&streams[wi], ran, res[wi], text,
                                 sizeof text);
        print_workload(&streams[wi], ran, res[wi]);
        if (bad)
            printf("%s", text);
        else
            printf("  all engines agree on every lookup and on the scan%s\n",
                   ran[ENG_STD_UNORDERED] ? " (std-unordered's: its count)"
                                          : "");
        for (int e = 0; e < N_ENGINES; e++)
            if (ran[e])
                csv_row(csv, (int)wi, &streams[wi], e, res[wi], !bad);
        problems += bad;
    }
    return problems;
}

int main(int argc, char **argv)
{
    static struct stream streams[N_WORKLOADS];
    static struct result res[N_WORKLOADS][N_ENGINES];
    static struct job jobs[N_WORKLOADS * N_ENGINES];
    struct args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.3000s/bonsai-bench-XXXXXX", a.dir);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bonsai-bench: mkdtemp %s: %s\n", dir,
                strerror(errno));
        return EXIT_FAIL;
    }
    FILE *csv = fopen(a.csv, "w");
    if (!csv) {
        fprintf(stderr, "bonsai-bench: %s: %s\n", a.csv, strerror(errno));
        rmdir(dir);
        return EXIT_FAIL;
    }
    for (size_t wi = 0; wi < N_WORKLOADS; wi++)
        stream_init(&streams[wi], &WORKLOADS[wi], a.scale, a.seed);
    print_intro(&a);
    size_t n = plan_jobs(&a, dir, streams, res, jobs);
    run_jobs(jobs, n, a.jobs);
    rmdir(dir);
    csv_header(csv);
    int problems = report(&a, streams, res, csv);
    if (fclose(csv) != 0) {
        fprintf(stderr, "bonsai-bench: %s: %s\n", a.csv, strerror(errno));
        problems++;
    }
    printf("\n%s; CSV in %s\n",
           problems ? "PROBLEMS (see above)" : "all runs complete and agree",
           a.csv);
    return problems ? EXIT_FAIL : 0;
}

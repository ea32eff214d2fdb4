/* SPDX-License-Identifier: MIT */
/*
 * util.h - helpers shared by every test binary (compiled in from util.c).
 *
 *  - a fresh temporary directory per test (tu_setup / tu_teardown, meant as
 *    a Criterion suite's .init / .fini), paths inside it;
 *  - the seed of a randomised test (BONSAI_TEST_SEED overrides, it is
 *    logged) and a scale for op counts (BONSAI_TEST_SCALE, default 1, or
 *    1/4 under AddressSanitizer);
 *  - splitmix64, a small reproducible PRNG;
 *  - the reference model: a sorted dynamic array of (key, value) byte
 *    strings with binary search, ordered like a bonsai map of its kind;
 *  - walking a map into a model and comparing a map with a model;
 *  - assertion macros that print the error name of a bonsai result.
 *
 * Criterion assertions abort the calling test, so they may only be used in
 * the test's own thread (not in reader threads, not in forked children).
 */
#ifndef BONSAI_TEST_UTIL_H
#define BONSAI_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "bonsai.h"

/* ---- bonsai results in assertions --------------------------------------- */

/* "BONSAI_NOTFOUND" etc., or "rc=<n>" for anything else (static buffer). */
const char *tu_err(int rc);

/* Asserts that expr returns 0. */
#define TU_OK(expr)                                                          \
    do {                                                                     \
        int tu_rc_ = (expr);                                                 \
        cr_assert(tu_rc_ == 0, "%s:%d: %s -> %s, expected 0", __FILE__,      \
                  __LINE__, #expr, tu_err(tu_rc_));                          \
    } while (0)

/* Asserts that expr returns exactly want. */
#define TU_RC(expr, want)                                                    \
    do {                                                                     \
        int tu_rc_ = (expr);                                                 \
        int tu_want_ = (want);                                               \
        cr_assert(tu_rc_ == tu_want_, "%s:%d: %s -> %s, expected %s",        \
                  __FILE__, __LINE__, #expr, tu_err(tu_rc_),                 \
                  tu_err(tu_want_));                                         \
    } while (0)

/* ---- temporary directory ------------------------------------------------ */

/* Creates a fresh directory /tmp/bonsai-test-XXXXXX (suite .init). */
void tu_setup(void);
/* Removes it and everything in it (suite .fini); only in the process that
 * created it, so a forked child that returns by mistake leaves it alone. */
void tu_teardown(void);
/* The directory (created on first use if tu_setup did not run). */
const char *tu_tmpdir(void);
/* dir/name; the result lives in one of 8 rotating static buffers. */
const char *tu_path(const char *name);
/* The program name of this build ($BONSAI_BUILD_DIR, default build/),
 * asserted executable; one of 8 rotating static buffers. */
const char *tu_program(const char *name);
/* s in single quotes for sh (asserted free of quotes); 16 rotating
 * static buffers. */
const char *tu_quote(const char *s);
/* A child process and the pipes to it: the parent writes `to` (a byte
 * releases the child, EOF too) and reads `from` (int64 reports). */
typedef struct tu_child {
    int pid;
    int to;
    int from;
} tu_child;
/* Forks a child that runs fn(up, down, ctx) and exits 0; up is its end of
 * `from`, down of `to`. */
tu_child tu_spawn(void (*fn)(int up, int down, void *ctx), void *ctx);
/* The child's side: a report, and waiting for a byte (1) or EOF (0). */
void tu_put_int(int fd, int64_t v);
int tu_wait_parent(int down);
/* The parent's side: the next report (the child must send it), whether
 * one is waiting, a byte to release the child, and its reaping (it must
 * have exited 0). */
int64_t tu_report(tu_child *c, const char *what);
int tu_has_report(tu_child *c);
void tu_release(tu_child *c);
void tu_reap(tu_child *c);

/* Runs cmd with /bin/sh, as user uid unless uid is -1; returns its exit
 * status.  A program killed by a signal fails the test. */
int tu_sh_as(int uid, const char *cmd);
/* tu_sh_as(-1, ...) of a printf-formatted command. */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- seeds, scale, PRNG ------------------------------------------------- */

/* BONSAI_TEST_SEED (decimal or 0x-hex) if set, else def.  Logs
 * "<what>: seed=<n>" so a failing run can be replayed. */
uint64_t tu_seed(const char *what, uint64_t def);

/* BONSAI_TEST_SCALE if set (> 0), else 0.25 under AddressSanitizer, else 1. */
double tu_scale(void);
/* n * tu_scale(), at least min. */
uint64_t tu_scaled(uint64_t n, uint64_t min);

typedef struct tu_rng {
    uint64_t s;
} tu_rng;

static inline uint64_t tu_mix64(uint64_t z)
{
    /* splitmix64's finaliser: a bijection on 64-bit integers */
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t tu_rand(tu_rng *r)
{
    r->s += UINT64_C(0x9e3779b97f4a7c15);
    return tu_mix64(r->s);
}

/* Uniform in [0, n); n > 0. */
uint64_t tu_below(tu_rng *r, uint64_t n);
/* Uniform in [lo, hi]. */
uint64_t tu_range(tu_rng *r, uint64_t lo, uint64_t hi);
/* True with probability per_mille / 1000. */
bool tu_chance(tu_rng *r, unsigned per_mille);
/* Fills buf with n pseudo-random bytes. */
void tu_fill(tu_rng *r, void *buf, size_t n);

/* 64-bit hash of a byte string (FNV-1a, then mixed). */
uint64_t tu_hash(const void *p, size_t n, uint64_t seed);

/* ---- formatting --------------------------------------------------------- */

/* A key or value for a message: u64 keys as numbers, byte strings as hex
 * (truncated) with their length.  Rotating static buffers. */
const char *tu_fmt(unsigned kind, const void *p, size_t n);

/* ---- values ------------------------------------------------------------- */

static inline bonsai_val tu_val(const void *p, size_t n)
{
    bonsai_val v;
    v.size = n;
    v.data = p;
    return v;
}

/* A u64 key as the 8 native bytes a u64 map expects. */
static inline uint64_t tu_u64_of(const void *p)
{
    uint64_t u;
    memcpy(&u, p, 8);
    return u;
}

/* ---- reference model ---------------------------------------------------- */

typedef struct tm_entry {
    uint8_t *key;
    uint8_t *val; /* NULL when vlen == 0 */
    uint32_t klen;
    uint32_t vlen;
} tm_entry;

typedef struct tm_model {
    unsigned kind; /* BONSAI_KEY_BYTES (memcmp order) or BONSAI_KEY_U64 */
    size_t n, cap;
    tm_entry *e;
} tm_model;

void tm_init(tm_model *m, unsigned kind);
void tm_free(tm_model *m);   /* frees everything; m is empty again */
void tm_clear(tm_model *m);  /* same as tm_free */
/* Order of two keys of the model's kind (u64 keys: 8 native bytes). */
int tm_cmp(unsigned kind, const void *a, size_t al, const void *b, size_t bl);
/* Index of the first key >= k (n if none). */
size_t tm_lower_bound(const tm_model *m, const void *k, size_t kl);
/* True and *idx when present. */
bool tm_find(const tm_model *m, const void *k, size_t kl, size_t *idx);
/* Inserts or overwrites; returns true when the key was new. */
bool tm_put(tm_model *m, const void *k, size_t kl, const void *v, size_t vl);
/* Deletes; returns true when the key was present. */
bool tm_del(tm_model *m, const void *k, size_t kl);
/* Deep copy; dst is overwritten (it must be initialised or zeroed). */
void tm_copy(tm_model *dst, const tm_model *src);
/* Appends an entry that sorts after every present key (for walks). */
void tm_append(tm_model *m, const void *k, size_t kl, const void *v,
               size_t vl);

/* ---- stores and maps ---------------------------------------------------- */

/* Opens (asserting success) a store; path NULL for anonymous memory. */
bonsai_db *tu_open(const char *path, const bonsai_options *opts);
/* Opens the existing store at path read-only, asserting success. */
bonsai_db *tu_open_ro(const char *path);

/* Creates / opens a map of db, asserting success (txn may be NULL). */
bonsai_map tu_map_create(bonsai_db *db, bonsai_txn *txn, const char *name,
                         unsigned kind);
bonsai_map tu_map_open(bonsai_db *db, bonsai_txn *txn, const char *name,
                       unsigned want_kind);

/* Copies the value of key into a malloc'd buffer (*out NULL for an empty
 * value).  Returns the bonsai result. */
int tu_get_copy(bonsai_txn *txn, bonsai_map map, const void *k, size_t kl,
                uint8_t **out, size_t *outlen);

/* Walks the whole map forward into out (cleared first; out->kind must be
 * the map's kind).  Also checks that keys strictly increase.  Returns 0 or
 * a bonsai error; why describes a failure (ordering, cursor errors). */
int tu_walk(bonsai_txn *txn, bonsai_map map, tm_model *out, char *why,
            size_t whylen);

/* Compares the map with the model: forward walk, backward walk, and
 * bonsai_count.  Returns true when equal; otherwise why says how. */
bool tu_same(bonsai_txn *txn, bonsai_map map, const tm_model *m, char *why,
             size_t whylen);

/* Asserts tu_same, with a context string in the message. */
#define TU_ASSERT_SAME(txn, map, model, ctx)                                 \
    do {                                                                     \
        char tu_why_[512];                                                   \
        bool tu_same_ = tu_same((txn), (map), (model), tu_why_,              \
                                sizeof tu_why_);                             \
        cr_assert(tu_same_, "%s: map differs from model: %s", (ctx),        \
                  tu_why_);                                                  \
    } while (0)

/* An order-independent checksum of a model: the sum of a hash of each
 * entry.  tu_entry_hash is that per-entry hash. */
uint64_t tu_entry_hash(const void *k, size_t kl, const void *v, size_t vl);
uint64_t tm_checksum(const tm_model *m);

#endif /* BONSAI_TEST_UTIL_H */

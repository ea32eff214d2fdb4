/* SPDX-License-Identifier: MIT */
/*
 * crashsim.h - helpers of the reliability tests (test_crash.c, test_kill.c,
 * test_faults.c).  Linked into every test binary, so: no global state, no
 * Criterion assertions (these run in forked children too).
 *
 *  - cs_io: a bx_io that forwards every call to another one (normally
 *    bx_io_default()) after asking a hook, which may observe the call, fail
 *    it with a BONSAI_* code, or skip it (report success without doing it).
 *  - a seeded workload over three maps ("u" u64 keys, "b" byte keys, "x" a
 *    byte-key map that is created and dropped again): cs_gen makes the ops
 *    of one transaction and applies them to a model, cs_apply runs them on
 *    a store.  Generation depends only on the seed and the model, so a
 *    parent can replay what a child did without a store.
 *  - cs_check: opens nothing; compares an open store with a model (list of
 *    maps, every map walked both ways, counts, point lookups) and runs
 *    bonsai_verify (see CS_VERIFY in crashsim.c for the switch).
 */
#ifndef BONSAI_TEST_CRASHSIM_H
#define BONSAI_TEST_CRASHSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bonsai.h"
#include "io.h"
#include "util.h"

/* ---- the hooked I/O ------------------------------------------------------ */

enum cs_op {
    CS_PWRITE,
    CS_PREAD,
    CS_FSYNC,
    CS_MSYNC,
    CS_TRUNCATE,
    CS_FALLOCATE,
    CS_MAP,
    CS_UNMAP,
    CS_NOPS
};

/* One call: pwrite/pread (fd, buf, len, off), fsync (fd), msync (addr,
 * len), truncate (fd, off = new size), fallocate (fd, off, len), map
 * (addr, len, fd, off; out after it), unmap (addr, len). */
typedef struct cs_call {
    enum cs_op op;
    int fd;
    const void *buf;
    void *addr;
    size_t len;
    uint64_t off;
    void *out;
    uint64_t nth;   /* 1-based number of this call among calls of its op */
    uint64_t total; /* 1-based number among all calls */
} cs_call;

/* A hook's answer before a call: go on, skip it (report 0 without doing
 * it), or a negative BONSAI_* code to fail it without doing it. */
#define CS_GO 0
#define CS_SKIP 1

/* before != 0: about to run (return CS_GO, CS_SKIP or an error);
 * before == 0: it ran, rc is its result (return value ignored). */
typedef int (*cs_hook_fn)(void *ctx, const cs_call *c, int before, int rc);

typedef struct cs_io {
    bx_io io; /* give &x->io to bonsai_open_io; io.ctx is x */
    const bx_io *base;
    cs_hook_fn hook;
    void *hook_ctx;
    uint64_t count[CS_NOPS];
    uint64_t total;
} cs_io;

void cs_io_init(cs_io *x, const bx_io *base, cs_hook_fn hook, void *ctx);
const char *cs_op_name(enum cs_op op);

/* ---- workload ------------------------------------------------------------ */

#define CS_NMAPS 3

typedef struct cs_model {
    tm_model m[CS_NMAPS];
    bool live[CS_NMAPS];
} cs_model;

const char *cs_map_name(unsigned i);
unsigned cs_map_kind(unsigned i);

void cs_model_init(cs_model *m);
void cs_model_free(cs_model *m);
/* dst must be initialised (or freed); it becomes a deep copy. */
void cs_model_copy(cs_model *dst, const cs_model *src);
/* Order-independent digest of the whole model. */
uint64_t cs_model_digest(const cs_model *m);
size_t cs_model_entries(const cs_model *m);

typedef struct cs_params {
    unsigned ops_min, ops_max; /* ops per transaction */
    uint64_t u64_keys;         /* u64 keys drawn from [0, u64_keys) */
    unsigned byte_keys;        /* byte keys drawn from this many */
    uint32_t small_max;        /* ordinary values: 0..small_max bytes */
    unsigned big_permille;     /* values of big_min..big_max bytes */
    uint32_t big_min, big_max;
    unsigned del_permille;     /* deletes of present keys */
    unsigned xmap_permille;    /* create / drop map "x" */
    size_t soft_entries;       /* beyond this many entries, delete more */
} cs_params;

/* Defaults for a small store (a few hundred KiB). */
void cs_params_small(cs_params *p);

enum cs_kind { CS_PUT, CS_DEL, CS_CREATE, CS_DROP };

typedef struct cs_opr {
    uint8_t kind;  /* enum cs_kind */
    uint8_t map;   /* 0..CS_NMAPS-1 */
    uint16_t klen;
    uint32_t vlen;
    uint8_t *key;
    uint8_t *val;
} cs_opr;

typedef struct cs_ops {
    cs_opr *o;
    size_t n, cap;
} cs_ops;

void cs_ops_free(cs_ops *ops); /* empties it; reusable */

/* Generates one transaction's ops into ops (emptied first) and applies
 * them to m.  The first transaction on an empty model creates "u" and
 * "b". */
void cs_gen(tu_rng *r, const cs_params *p, cs_model *m, cs_ops *ops);

/* Runs ops on db inside txn (a write transaction; NULL = autocommit each
 * op).  Returns 0 or the first unexpected bonsai result; *done (may be
 * NULL) gets the number of ops that succeeded, why says what failed. */
int cs_apply(bonsai_db *db, bonsai_txn *txn, const cs_ops *ops, size_t *done,
             char *why, size_t whylen);

/* ---- checking ------------------------------------------------------------ */

/* Compares the last commit of db with m: the maps listed (names, kinds,
 * counts), each live map walked forwards and backwards, bonsai_count,
 * bonsai_map_stat's entries, and point lookups of up to `probes` keys.
 * Then bonsai_verify when it is linked in (cs_have_verify()).  Returns
 * true when all agree; otherwise why says the first difference.
 * *tolerated (may be NULL) is increased by the verify problems let pass
 * (see cs_verify). */
bool cs_check(bonsai_db *db, const cs_model *m, unsigned probes,
              uint64_t *tolerated, char *why, size_t whylen);

/* Runs bonsai_verify if linked: 0 clean, -1 not linked, else the number
 * of problems (> 0) or a negative bonsai error; why gets the first.  A
 * problem that only says the meta slot the store did not open from is
 * invalid (what a torn or lost meta write leaves; format.md's recovery
 * relies on it) is not counted but added to *tolerated (may be NULL),
 * unless BONSAI_TEST_KNOWN_BUG is set. */
long cs_verify(bonsai_db *db, uint64_t *tolerated, char *why, size_t whylen);
bool cs_have_verify(void);

/* The store's last committed txn id (bonsai_db_stat). */
uint64_t cs_txn_id(bonsai_db *db);

/* Runs `__lsan_do_recoverable_leak_check` in a sanitizer build (a forked
 * child that leaves with _exit otherwise skips the leak check); no-op
 * elsewhere. */
void cs_leak_check(void);
/* True in an AddressSanitizer build. */
bool cs_asan(void);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ops.c - differential: a sequence of operations decoded from the
 * input, applied to a bonsai store and to a reference model (a sorted
 * array), which must agree after every step.  Any disagreement, and any
 * result the API documents no room for, is a finding: abort().
 *
 * Byte 0 picks the configuration:
 *   bit 0     page_size 512 / 4096
 *   bits 1-2  compression 0 none, 1 lz4, 2 zlib, 3 lz4 with the other mode
 *             (below)
 *   bits 3-4  write cache: 0 none, 1 tiny (4 KiB), 2 default, 3 64 KiB
 *   bit 5     0 anonymous memory, no transactions; 1 a file with
 *             transactions (compression 3: anonymous memory with
 *             transactions / a file without)
 *   bit 6     key kind: 0 u64, 1 byte strings
 *   bit 7     nodes: 0 node_bytes 256, node_entries 8; 1 node_bytes 1024,
 *             node_entries 4 (tiny nodes: deep trees, many splits, values
 *             over node_bytes / 4 go to overflow runs)
 * The rest is a program: an opcode byte (op = byte % FO_NOPS, the high bits
 * pick a variant), then its operands; reading past the end gives zeros.
 *
 * Two maps: "data" of the chosen kind and "decoy" of the other, each with
 * its model.  In transaction mode the operations run inside the open write
 * transaction or, when none is open, each in its own (autocommit); the
 * model of the last commit is kept for abort, for read snapshots and for
 * reopening.  One read snapshot and one long-lived cursor may be open
 * across operations; the cursor follows the documented rule (bonsai.h,
 * "Writes and cursors": it stands at its key; once the key is deleted,
 * get answers NOTFOUND, next = first key above it, prev = last below;
 * beyond an end, a move the other way comes back to that end).
 *
 * The store is capped at 256 MiB and "data" at FO_MAX_ENTRIES entries, so
 * BONSAI_FULL should not happen; if it does, the run stops there without
 * a verdict (after FULL a transaction or a write-cached store may refuse
 * further writes, which the model does not follow).
 *
 * Environment: FUZZ_TRACE=1 prints every operation to stderr;
 * FUZZ_OPS_NO_CODEC=1 turns node compression off whatever byte 0 says
 * (the modes stay), to fuzz past an open bug in the compressed path.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bonsai.h"

#include "fuzz_util.h"

#define FO_MAX_SIZE (UINT64_C(256) << 20)
#define FO_MAX_VAL 3200u
#define FO_MAX_ENTRIES 2048u /* "data" grows no further: far from FULL */

/* ---- the model ---------------------------------------------------------------- */

typedef struct fo_ent {
    uint8_t *k;
    uint8_t *v;
    uint32_t kl, vl;
} fo_ent;

typedef struct fo_model {
    unsigned kind;
    size_t n, cap;
    fo_ent *e;
} fo_model;

static int fo_kcmp(unsigned kind, const void *a, size_t al, const void *b,
                   size_t bl)
{
    if (kind == BONSAI_KEY_U64) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return x < y ? -1 : x > y;
    }
    size_t m = al < bl ? al : bl;
    int c = memcmp(a, b, m);
    if (c)
        return c < 0 ? -1 : 1;
    return al < bl ? -1 : al > bl;
}

/* First index whose key >= k; *eq when equal. */
static size_t fo_lower(const fo_model *m, const void *k, size_t kl, int *eq)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fo_kcmp(m->kind, m->e[mid].k, m->e[mid].kl, k, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (eq)
        *eq = lo < m->n &&
              fo_kcmp(m->kind, m->e[lo].k, m->e[lo].kl, k, kl) == 0;
    return lo;
}

static uint8_t *fo_dup(const void *p, size_t n)
{
    if (n == 0)
        return NULL;
    uint8_t *q = malloc(n);
    FZ_CHECK(q != NULL, "harness: out of memory");
    memcpy(q, p, n);
    return q;
}

static void fo_mput(fo_model *m, const void *k, size_t kl, const void *v,
                    size_t vl)
{
    int eq;
    size_t i = fo_lower(m, k, kl, &eq);
    if (eq) {
        free(m->e[i].v);
        m->e[i].v = fo_dup(v, vl);
        m->e[i].vl = (uint32_t)vl;
        return;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->e = realloc(m->e, m->cap * sizeof *m->e);
        FZ_CHECK(m->e != NULL, "harness: out of memory");
    }
    memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof *m->e);
    m->e[i] = (fo_ent){fo_dup(k, kl), fo_dup(v, vl), (uint32_t)kl,
                       (uint32_t)vl};
    m->n++;
}

static void fo_mdel_at(fo_model *m, size_t i)
{
    free(m->e[i].k);
    free(m->e[i].v);
    memmove(&m->e[i], &m->e[i + 1], (m->n - i - 1) * sizeof *m->e);
    m->n--;
}

static void fo_mclear(fo_model *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].k);
        free(m->e[i].v);
    }
    m->n = 0;
}

static void fo_mfree(fo_model *m)
{
    fo_mclear(m);
    free(m->e);
    m->e = NULL;
    m->cap = 0;
}

static void fo_mcopy(fo_model *dst, const fo_model *src)
{
    fo_mclear(dst);
    dst->kind = src->kind;
    if (dst->cap < src->n) {
        dst->cap = src->n;
        dst->e = realloc(dst->e, dst->cap * sizeof *dst->e);
        FZ_CHECK(dst->e != NULL, "harness: out of memory");
    }
    for (size_t i = 0; i < src->n; i++)
        dst->e[i] = (fo_ent){fo_dup(src->e[i].k, src->e[i].kl),
                             fo_dup(src->e[i].v, src->e[i].vl),
                             src->e[i].kl, src->e[i].vl};
    dst->n = src->n;
}

/* ---- the state ---------------------------------------------------------------- */

enum { FO_MODE_ANON = 0, FO_MODE_FILE_TXN, FO_MODE_ANON_TXN,
       FO_MODE_FILE_DIRECT };
/* CUR_END / CUR_START: past the last key / before the first */
enum { CUR_NOTHING, CUR_ENTRY, CUR_END, CUR_START };

typedef struct fo_cursor {
    bonsai_cursor *c;
    int state;
    uint8_t key[BONSAI_MAX_KEY];
    size_t kl;
} fo_cursor;

typedef struct fo {
    fz_in in;
    unsigned cfg;
    int mode;
    int cow;              /* transactions */
    int file;
    unsigned kind;        /* of "data"; "decoy" has the other */
    char path[4200];
    bonsai_options o;
    bonsai_db *db;
    bonsai_map map[2];    /* data, decoy */
    fo_model m[2];        /* what the writer sees */
    fo_model cm[2];       /* the last commit (valid while wtxn is open) */
    bonsai_txn *wtxn;
    bonsai_txn *snap;     /* a read snapshot ... */
    fo_model sm;          /* ... and its view of "data" */
    fo_cursor pc;         /* the long-lived cursor, on "data" */
    uint64_t op;
    int stop;             /* BONSAI_FULL seen: no verdict from here on */
    const char *opname;
    int trace;
    uint8_t key[BONSAI_MAX_KEY];
    size_t kl;
    uint8_t val[FO_MAX_VAL];
    size_t vl;
} fo;

#define FO_FAIL(s, ...)                                                      \
    FZ_FAIL("[cfg 0x%02x mode %d kind %s] op %" PRIu64 " (%s): %s",         \
            (s)->cfg, (s)->mode,                                             \
            (s)->kind == BONSAI_KEY_U64 ? "u64" : "bytes", (s)->op,         \
            (s)->opname, fo_msg(__VA_ARGS__))
#define FO_CHECK(s, cond, ...)                                               \
    do {                                                                     \
        if (!(cond))                                                         \
            FO_FAIL(s, __VA_ARGS__);                                         \
    } while (0)
#define FO_RC(s, expr, want)                                                 \
    do {                                                                     \
        int fo_rc_ = (expr);                                                 \
        FO_CHECK(s, fo_rc_ == (want), "%s -> %s, expected %s", #expr,        \
                 fz_err(fo_rc_), fz_err(want));                              \
    } while (0)

__attribute__((format(printf, 1, 2))) static const char *
fo_msg(const char *fmt, ...)
{
    static char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

/* A key or value for messages (static, rotating). */
static const char *fo_fmt(unsigned kind, const void *p, size_t n)
{
    static char bufs[4][96];
    static unsigned r;
    char *b = bufs[r++ & 3];
    if (kind == BONSAI_KEY_U64 && n == 8) {
        uint64_t u;
        memcpy(&u, p, 8);
        snprintf(b, 96, "%" PRIu64, u);
        return b;
    }
    int o = snprintf(b, 96, "[%zu]", n);
    for (size_t i = 0; i < n && o < 90; i++)
        o += snprintf(b + o, (size_t)(96 - o), "%02x",
                      ((const uint8_t *)p)[i]);
    if (o >= 90)
        snprintf(b + 88, 8, "..");
    return b;
}

static unsigned fo_other(unsigned kind)
{
    return kind == BONSAI_KEY_U64 ? BONSAI_KEY_BYTES : BONSAI_KEY_U64;
}

/* The transaction ops run in: the write txn or NULL. */
static bonsai_txn *fo_txn(const fo *s)
{
    return s->wtxn;
}

/* The model of the last commit (what a snapshot begun now sees). */
static const fo_model *fo_committed(const fo *s, int which)
{
    return s->wtxn ? &s->cm[which] : &s->m[which];
}

/* ---- keys and values ---------------------------------------------------------- */

static void fo_gen_key(fo *s, unsigned kind)
{
    uint8_t a = fz_u8(&s->in), b = fz_u8(&s->in);
    if (kind == BONSAI_KEY_U64) {
        uint64_t k;
        switch (b >> 6) {
        case 0: k = a; break;
        case 1: k = (uint64_t)a * 1000 + (b & 63); break;
        case 2: k = UINT64_MAX - a - (uint64_t)(b & 63) * 256; break;
        default: k = fz_u64(&s->in); break;
        }
        memcpy(s->key, &k, 8);
        s->kl = 8;
        return;
    }
    size_t len;
    if (b < 224)
        len = 1 + (b & 31);
    else if (b < 255)
        len = 100 + (size_t)(b - 224) * 29;
    else
        len = BONSAI_MAX_KEY;
    static const uint8_t alpha[4] = {0x00, 'a', 'b', 0xff};
    for (size_t i = 0; i < len; i++) {
        uint64_t h = fz_mix(a + ((uint64_t)(i / 16) << 8));
        s->key[i] = alpha[(h >> (2 * (i % 16))) & 3];
    }
    s->kl = len;
}

/* A key of the model (by an operand), or a generated one if empty. */
static void fo_pick_key(fo *s, const fo_model *m)
{
    uint16_t r = fz_u16(&s->in);
    if (m->n == 0 || (r & 1)) {
        fo_gen_key(s, m->kind);
        return;
    }
    const fo_ent *e = &m->e[(r >> 1) % m->n];
    memcpy(s->key, e->k, e->kl);
    s->kl = e->kl;
}

static void fo_gen_val(fo *s)
{
    uint8_t b = fz_u8(&s->in);
    size_t n;
    if (b < 96)
        n = b % 8;
    else if (b < 160)
        n = 8;
    else if (b < 224)
        n = (size_t)b - 150;
    else
        n = 60 + (size_t)(b - 224) * 100;
    uint8_t seed = (uint8_t)(s->op * 7 + b);
    for (size_t i = 0; i < n; i++)
        s->val[i] = (uint8_t)(seed + i * 31 + (i >> 8));
    s->vl = n;
}

/* ---- checks --------------------------------------------------------------------- */

static void fo_check_val(fo *s, const bonsai_val *v, const fo_ent *e,
                         const char *what)
{
    FO_CHECK(s, v->size == e->vl &&
                    (v->size == 0 || memcmp(v->data, e->v, v->size) == 0),
             "%s: value of %s is %s, model %s", what,
             fo_fmt(s->kind, e->k, e->kl),
             fo_fmt(BONSAI_KEY_BYTES, v->data, v->size),
             fo_fmt(BONSAI_KEY_BYTES, e->v, e->vl));
}

static void fo_check_get(fo *s, bonsai_txn *t, bonsai_map map,
                         const fo_model *m, const void *k, size_t kl,
                         const char *what)
{
    int eq;
    size_t i = fo_lower(m, k, kl, &eq);
    bonsai_val key = {kl, k}, v = {0, NULL};
    int rc = bonsai_get(t, map, &key, &v);
    if (!eq) {
        FO_CHECK(s, rc == BONSAI_NOTFOUND, "%s: get(%s) -> %s, model: absent",
                 what, fo_fmt(m->kind, k, kl), fz_err(rc));
        return;
    }
    FO_CHECK(s, rc == 0, "%s: get(%s) -> %s, model: present", what,
             fo_fmt(m->kind, k, kl), fz_err(rc));
    fo_check_val(s, &v, &m->e[i], what);
}

/* The cursor's entry must be model entry i. */
static void fo_check_cur(fo *s, bonsai_cursor *c, const fo_model *m, size_t i,
                         const char *what)
{
    bonsai_val k = {0, NULL}, v = {0, NULL};
    int rc = bonsai_cursor_get(c, &k, &v);
    FO_CHECK(s, rc == 0, "%s: cursor_get -> %s, model entry %zu of %zu",
             what, fz_err(rc), i, m->n);
    FO_CHECK(s, k.size == m->e[i].kl &&
                    fo_kcmp(m->kind, k.data, k.size, m->e[i].k,
                            m->e[i].kl) == 0,
             "%s: cursor at %s, model entry %zu of %zu is %s", what,
             fo_fmt(m->kind, k.data, k.size), i, m->n,
             fo_fmt(m->kind, m->e[i].k, m->e[i].kl));
    fo_check_val(s, &v, &m->e[i], what);
}

/* Walks the whole map both ways and compares with m; count too. */
static void fo_same(fo *s, bonsai_txn *t, bonsai_map map, const fo_model *m,
                    const char *what)
{
    uint64_t count = UINT64_MAX;
    int rc = bonsai_count(t, map, &count);
    FO_CHECK(s, rc == 0 && count == m->n, "%s: count -> %s, %" PRIu64
             ", model %zu", what, fz_err(rc), count, m->n);
    bonsai_cursor *c = NULL;
    FO_RC(s, bonsai_cursor_open(t, map, &c), 0);
    for (int dir = 0; dir < 2; dir++) {
        rc = dir ? bonsai_cursor_last(c) : bonsai_cursor_first(c);
        for (size_t j = 0; j < m->n; j++) {
            size_t i = dir ? m->n - 1 - j : j;
            FO_CHECK(s, rc == 0, "%s: walk %s at entry %zu of %zu -> %s",
                     what, dir ? "backward" : "forward", i, m->n, fz_err(rc));
            fo_check_cur(s, c, m, i, what);
            rc = dir ? bonsai_cursor_prev(c) : bonsai_cursor_next(c);
        }
        FO_CHECK(s, rc == BONSAI_NOTFOUND, "%s: walk %s past %zu entries "
                 "-> %s, expected the end", what,
                 dir ? "backward" : "forward", m->n, fz_err(rc));
    }
    bonsai_cursor_close(c);
}

static void fo_problem(void *ctx, const char *map, uint64_t pgno,
                       const char *what)
{
    fo *s = ctx;
    fprintf(stderr, "bonsai_verify: map \"%s\" page %" PRIu64 ": %s\n", map,
            pgno, what);
    (void)s;
}

/* A committed (or just reopened) store verifies clean. */
static void fo_verify(fo *s, int reopened)
{
    if (s->stop || (!reopened && (!s->cow || s->wtxn)))
        return;
    uint64_t problems = UINT64_MAX;
    int rc = bonsai_verify(s->db, 0, fo_problem, NULL, s, &problems);
    FO_CHECK(s, rc == 0 && problems == 0,
             "bonsai_verify -> %s, %" PRIu64 " problems", fz_err(rc),
             problems);
}

static void fo_check_all(fo *s, const char *what)
{
    for (int w = 0; w < 2; w++)
        fo_same(s, fo_txn(s), s->map[w], &s->m[w], what);
    bonsai_map_info info;
    int rc = bonsai_map_stat(fo_txn(s), s->map[0], &info);
    FO_CHECK(s, rc == 0 && info.entries == s->m[0].n &&
                    (info.entries == 0 || info.leaf_nodes > 0),
             "%s: map_stat -> %s, %" PRIu64 " entries in %" PRIu64
             " leaves, model %zu",
             what, fz_err(rc), info.entries, info.leaf_nodes, s->m[0].n);
}

/* ---- the long-lived cursor -------------------------------------------------------- */

static void fo_pc_close(fo *s)
{
    bonsai_cursor_close(s->pc.c);
    s->pc.c = NULL;
}

/* The model's answer to a cursor move: index or m->n for NOTFOUND. */
static size_t fo_pc_expect(const fo *s, const fo_model *m, int how)
{
    const fo_cursor *p = &s->pc;
    int eq;
    size_t i;
    switch (how) {
    case 0: /* next */
        if (p->state == CUR_NOTHING || p->state == CUR_START)
            return 0;
        if (p->state == CUR_END)
            return m->n;
        i = fo_lower(m, p->key, p->kl, &eq);
        return eq ? i + 1 : i;
    case 1: /* prev */
        if (p->state == CUR_NOTHING || p->state == CUR_END)
            return m->n ? m->n - 1 : m->n;
        if (p->state == CUR_START)
            return m->n;
        i = fo_lower(m, p->key, p->kl, &eq);
        return i ? i - 1 : m->n;
    default: /* get: the cursor's key, if it is still there */
        if (p->state != CUR_ENTRY)
            return m->n;
        i = fo_lower(m, p->key, p->kl, &eq);
        return eq ? i : m->n;
    }
}

/* i >= m->n: NOTFOUND, the cursor then beyond the end `end`. */
static void fo_pc_land(fo *s, const fo_model *m, size_t i, int rc,
                       const char *what, int end)
{
    if (i >= m->n) {
        FO_CHECK(s, rc == BONSAI_NOTFOUND, "cursor %s -> %s, model: the end",
                 what, fz_err(rc));
        s->pc.state = end;
        return;
    }
    FO_CHECK(s, rc == 0, "cursor %s -> %s, model: entry %zu of %zu (%s)",
             what, fz_err(rc), i, m->n,
             fo_fmt(m->kind, m->e[i].k, m->e[i].kl));
    fo_check_cur(s, s->pc.c, m, i, what);
    s->pc.state = CUR_ENTRY;
    memcpy(s->pc.key, m->e[i].k, m->e[i].kl);
    s->pc.kl = m->e[i].kl;
}

/* Only where writes are seen at once: no txn mode, or inside the write
 * txn (closed when it ends). */
static void op_pcursor(fo *s, unsigned var)
{
    s->opname = "long-lived cursor";
    const fo_model *m = &s->m[0];
    if (s->cow && !s->wtxn)
        return;
    if (!s->pc.c) {
        FO_RC(s, bonsai_cursor_open(fo_txn(s), s->map[0], &s->pc.c), 0);
        s->pc.state = CUR_NOTHING;
    }
    switch (var % 8) {
    case 0:
        fo_pc_land(s, m, 0, bonsai_cursor_first(s->pc.c), "first",
                   CUR_END);
        break;
    case 1:
        fo_pc_land(s, m, m->n ? m->n - 1 : 0, bonsai_cursor_last(s->pc.c),
                   "last", CUR_START);
        break;
    case 2: {
        fo_pick_key(s, m);
        bonsai_val k = {s->kl, s->key};
        if (var & 16) { /* the last key <= k */
            int eq;
            size_t i = fo_lower(m, s->key, s->kl, &eq) + (eq != 0);
            fo_pc_land(s, m, i ? i - 1 : m->n,
                       bonsai_cursor_seek_le(s->pc.c, &k), "seek_le",
                       CUR_START);
            break;
        }
        fo_pc_land(s, m, fo_lower(m, s->key, s->kl, NULL),
                   bonsai_cursor_seek(s->pc.c, &k), "seek", CUR_END);
        break;
    }
    case 3:
    case 4: {
        size_t i = fo_pc_expect(s, m, 0);
        int rc = bonsai_cursor_next(s->pc.c);
        if (s->pc.state == CUR_END) {
            FO_CHECK(s, rc == BONSAI_NOTFOUND, "next at the end -> %s",
                     fz_err(rc));
            break;
        }
        fo_pc_land(s, m, i, rc, "next", CUR_END);
        break;
    }
    case 5:
    case 6: {
        size_t i = fo_pc_expect(s, m, 1);
        int rc = bonsai_cursor_prev(s->pc.c);
        if (s->pc.state == CUR_START) {
            FO_CHECK(s, rc == BONSAI_NOTFOUND, "prev at the start -> %s",
                     fz_err(rc));
            break;
        }
        fo_pc_land(s, m, i, rc, "prev", CUR_START);
        break;
    }
    default:
        if (var & 8) {
            fo_pc_close(s);
            break;
        }
        if (s->pc.state != CUR_ENTRY) {
            bonsai_val k;
            FO_RC(s, bonsai_cursor_get(s->pc.c, &k, NULL), BONSAI_NOTFOUND);
            break;
        }
        size_t i = fo_pc_expect(s, m, 2);
        bonsai_val k = {0, NULL}, v = {0, NULL};
        int rc = bonsai_cursor_get(s->pc.c, &k, &v);
        if (i >= m->n) {
            /* its key went: it stays in the key's gap */
            FO_CHECK(s, rc == BONSAI_NOTFOUND,
                     "get after its key went -> %s", fz_err(rc));
            break;
        }
        fo_pc_land(s, m, i, rc, "get", CUR_END);
        break;
    }
}

/* ---- operations ------------------------------------------------------------------- */

static void fo_after_write(fo *s, int which)
{
    uint64_t n = UINT64_MAX;
    int rc = bonsai_count(fo_txn(s), s->map[which], &n);
    FO_CHECK(s, rc == 0 && n == s->m[which].n,
             "count after a write -> %s, %" PRIu64 ", model %zu", fz_err(rc),
             n, s->m[which].n);
}

/* BONSAI_FULL: the run stops here (see the top of the file). */
static int fo_full(fo *s, int rc)
{
    if (rc != BONSAI_FULL)
        return 0;
    if (s->trace)
        fprintf(stderr, "  BONSAI_FULL: stopping\n");
    s->stop = 1;
    return 1;
}

static void op_put(fo *s, int which, unsigned var)
{
    s->opname = var & 1 ? "put NOOVERWRITE" : "put";
    fo_model *m = &s->m[which];
    fo_pick_key(s, m);
    fo_gen_val(s);
    int eq;
    fo_lower(m, s->key, s->kl, &eq);
    if (!eq && which == 0 && m->n >= FO_MAX_ENTRIES)
        return;
    bonsai_val k = {s->kl, s->key}, v = {s->vl, s->val};
    unsigned flags = var & 1 ? BONSAI_NOOVERWRITE : 0;
    int rc;
    if (m->kind == BONSAI_KEY_U64 && (var & 2)) {
        uint64_t u;
        memcpy(&u, s->key, 8);
        rc = bonsai_put_u64(fo_txn(s), s->map[which], u,
                            s->vl || (var & 4) ? &v : NULL, flags);
    } else {
        rc = bonsai_put(fo_txn(s), s->map[which], &k, &v, flags);
    }
    if (s->trace)
        fprintf(stderr, "  put%s %s (%zu-byte value) -> %d\n",
                flags ? " noovw" : "", fo_fmt(m->kind, s->key, s->kl), s->vl,
                rc);
    if (fo_full(s, rc))
        return;
    if (eq && flags) {
        FO_CHECK(s, rc == BONSAI_EXISTS, "put NOOVERWRITE of present %s -> "
                 "%s", fo_fmt(m->kind, s->key, s->kl), fz_err(rc));
        fo_check_get(s, fo_txn(s), s->map[which], m, s->key, s->kl,
                     "the old value stays");
        return;
    }
    FO_CHECK(s, rc == 0, "put(%s, %zu bytes) -> %s",
             fo_fmt(m->kind, s->key, s->kl), s->vl, fz_err(rc));
    fo_mput(m, s->key, s->kl, s->val, s->vl);
    fo_after_write(s, which);
    if (var & 8)
        fo_check_get(s, fo_txn(s), s->map[which], m, s->key, s->kl,
                     "get after put");
}

static void op_del(fo *s, int which, unsigned var)
{
    s->opname = "delete";
    fo_model *m = &s->m[which];
    fo_pick_key(s, m);
    int eq;
    size_t i = fo_lower(m, s->key, s->kl, &eq);
    int rc;
    if (m->kind == BONSAI_KEY_U64 && (var & 2)) {
        uint64_t u;
        memcpy(&u, s->key, 8);
        rc = bonsai_del_u64(fo_txn(s), s->map[which], u);
    } else {
        bonsai_val k = {s->kl, s->key};
        rc = bonsai_del(fo_txn(s), s->map[which], &k);
    }
    if (s->trace)
        fprintf(stderr, "  del %s -> %d\n", fo_fmt(m->kind, s->key, s->kl),
                rc);
    if (fo_full(s, rc))
        return;
    FO_CHECK(s, rc == (eq ? 0 : BONSAI_NOTFOUND), "del(%s) -> %s, model: %s",
             fo_fmt(m->kind, s->key, s->kl), fz_err(rc),
             eq ? "present" : "absent");
    if (eq)
        fo_mdel_at(m, i);
    fo_after_write(s, which);
}

#define FO_MAX_BATCH 40u

/* A batch of up to FO_MAX_BATCH gets, each key picked as a get picks it
 * (so repeats come too); the answers are checked only after the call,
 * since all the values of a batch stay valid together. */
static void op_get_batch(fo *s, int which, unsigned var)
{
    s->opname = "get batch";
    const fo_model *m = &s->m[which];
    static uint8_t kbuf[FO_MAX_BATCH][BONSAI_MAX_KEY];
    bonsai_val keys[FO_MAX_BATCH], vals[FO_MAX_BATCH];
    uint64_t nums[FO_MAX_BATCH];
    uint8_t found[FO_MAX_BATCH];
    size_t n = fz_u8(&s->in) % (FO_MAX_BATCH + 1);
    for (size_t i = 0; i < n; i++) {
        fo_pick_key(s, m);
        memcpy(kbuf[i], s->key, s->kl);
        keys[i] = (bonsai_val){s->kl, kbuf[i]};
        if (m->kind == BONSAI_KEY_U64)
            memcpy(&nums[i], s->key, 8);
    }
    int u64 = m->kind == BONSAI_KEY_U64 && (var & 2);
    int rc = u64 ? bonsai_get_batch_u64(fo_txn(s), s->map[which], nums, n,
                                        vals, found)
                 : bonsai_get_batch(fo_txn(s), s->map[which], keys, n, vals,
                                    found);
    FO_CHECK(s, rc == 0, "get_batch of %zu keys -> %s", n, fz_err(rc));
    for (size_t i = 0; i < n; i++) {
        int eq;
        size_t at = fo_lower(m, keys[i].data, keys[i].size, &eq);
        FO_CHECK(s, found[i] == eq, "get_batch: key %zu (%s) found %u, "
                 "model %d", i, fo_fmt(m->kind, keys[i].data, keys[i].size),
                 found[i], eq);
        if (eq)
            fo_check_val(s, &vals[i], &m->e[at], "get_batch");
    }
}

/* var & 8: a batch of gets. */
static void op_get(fo *s, int which, unsigned var)
{
    if (var & 8) {
        op_get_batch(s, which, var);
        return;
    }
    s->opname = "get";
    fo_model *m = &s->m[which];
    fo_pick_key(s, m);
    if (m->kind == BONSAI_KEY_U64 && (var & 2)) {
        uint64_t u;
        memcpy(&u, s->key, 8);
        int eq;
        size_t i = fo_lower(m, s->key, 8, &eq);
        bonsai_val v = {0, NULL};
        int rc = bonsai_get_u64(fo_txn(s), s->map[which], u, &v);
        FO_CHECK(s, rc == (eq ? 0 : BONSAI_NOTFOUND),
                 "get_u64(%" PRIu64 ") -> %s", u, fz_err(rc));
        if (eq)
            fo_check_val(s, &v, &m->e[i], "get_u64");
        return;
    }
    fo_check_get(s, fo_txn(s), s->map[which], m, s->key, s->kl, "get");
}

/* A short-lived cursor: position, then a few steps. */
static void op_cursor(fo *s, unsigned var)
{
    s->opname = "cursor walk";
    const fo_model *m = &s->m[0];
    bonsai_cursor *c = NULL;
    FO_RC(s, bonsai_cursor_open(fo_txn(s), s->map[0], &c), 0);
    size_t i;
    int rc;
    switch (var % 4) {
    case 0:
        rc = bonsai_cursor_first(c);
        i = 0;
        break;
    case 1:
        rc = bonsai_cursor_last(c);
        i = m->n ? m->n - 1 : 0;
        break;
    default: {
        fo_pick_key(s, m);
        i = fo_lower(m, s->key, s->kl, NULL);
        if (m->kind == BONSAI_KEY_U64 && (var & 4)) {
            uint64_t u;
            memcpy(&u, s->key, 8);
            rc = bonsai_cursor_seek_u64(c, u);
        } else {
            bonsai_val k = {s->kl, s->key};
            rc = bonsai_cursor_seek(c, &k);
        }
    }
    }
    uint8_t steps = fz_u8(&s->in);
    for (int n = 0;; n++) {
        if (i >= m->n) {
            FO_CHECK(s, rc == BONSAI_NOTFOUND, "cursor step %d -> %s, "
                     "model: the end", n, fz_err(rc));
            break;
        }
        FO_CHECK(s, rc == 0, "cursor step %d -> %s, model: entry %zu of %zu",
                 n, fz_err(rc), i, m->n);
        fo_check_cur(s, c, m, i, "cursor walk");
        if (n == 8)
            break;
        int fwd = (steps >> n) & 1;
        rc = fwd ? bonsai_cursor_next(c) : bonsai_cursor_prev(c);
        i = fwd ? i + 1 : (i ? i - 1 : m->n);
    }
    bonsai_cursor_close(c);
}

/* Puts count keys in a row (u64: consecutive; bytes: consecutive seeds). */
static void op_bulk_put(fo *s, unsigned var)
{
    s->opname = "bulk put";
    fo_model *m = &s->m[0];
    unsigned count = 1 + (fz_u8(&s->in) & 63);
    fo_gen_key(s, m->kind);
    uint8_t vlen = fz_u8(&s->in) & 15;
    for (unsigned j = 0; j < count && m->n < FO_MAX_ENTRIES; j++) {
        if (m->kind == BONSAI_KEY_U64) {
            uint64_t u;
            memcpy(&u, s->key, 8);
            u += var & 1 ? 1 : 1000;
            memcpy(s->key, &u, 8);
        } else {
            s->key[s->kl - 1]++;
        }
        for (unsigned b = 0; b < vlen; b++)
            s->val[b] = (uint8_t)(j + b);
        bonsai_val k = {s->kl, s->key}, v = {vlen, s->val};
        int rc = bonsai_put(fo_txn(s), s->map[0], &k, &v, 0);
        if (fo_full(s, rc))
            return;
        FO_CHECK(s, rc == 0, "bulk put %u of %u (%s) -> %s", j, count,
                 fo_fmt(m->kind, s->key, s->kl), fz_err(rc));
        fo_mput(m, s->key, s->kl, s->val, vlen);
    }
    fo_after_write(s, 0);
}

/* Deletes count keys in a row from the model's order. */
static void op_bulk_del(fo *s)
{
    s->opname = "bulk delete";
    fo_model *m = &s->m[0];
    unsigned count = 1 + (fz_u8(&s->in) & 63);
    fo_pick_key(s, m);
    size_t i = fo_lower(m, s->key, s->kl, NULL);
    for (unsigned j = 0; j < count && i < m->n; j++) {
        bonsai_val k = {m->e[i].kl, m->e[i].k};
        int rc = bonsai_del(fo_txn(s), s->map[0], &k);
        if (fo_full(s, rc))
            return;
        FO_CHECK(s, rc == 0, "bulk delete of present %s -> %s",
                 fo_fmt(m->kind, k.data, k.size), fz_err(rc));
        fo_mdel_at(m, i);
    }
    fo_after_write(s, 0);
}

static void fo_reopen_maps(fo *s)
{
    static const char *names[2] = {"data", "decoy"};
    for (int w = 0; w < 2; w++) {
        unsigned kind = 0;
        s->map[w] = NULL;
        int rc = bonsai_map_open(s->db, fo_txn(s), names[w], &s->map[w],
                                 &kind);
        FO_CHECK(s, rc == 0 && kind == s->m[w].kind,
                 "map_open(%s) -> %s, kind %u", names[w], fz_err(rc), kind);
    }
}

/* Drops "decoy" and creates it afresh. */
static void op_drop_decoy(fo *s)
{
    s->opname = "drop and recreate the decoy";
    int rc = bonsai_map_drop(s->db, fo_txn(s), "decoy");
    if (fo_full(s, rc))
        return;
    FO_CHECK(s, rc == 0, "map_drop -> %s", fz_err(rc));
    fo_mclear(&s->m[1]);
    bonsai_map nm = NULL;
    rc = bonsai_map_create(s->db, fo_txn(s), "decoy", s->m[1].kind, &nm);
    FO_CHECK(s, rc == 0 && nm, "map_create after drop -> %s", fz_err(rc));
    s->map[1] = nm;
    fo_same(s, fo_txn(s), s->map[1], &s->m[1], "recreated decoy");
}

static void fo_snap_end(fo *s)
{
    if (!s->snap)
        return;
    fo_same(s, s->snap, s->map[0], &s->sm, "read snapshot at its end");
    bonsai_txn_abort(s->snap);
    s->snap = NULL;
}

static void op_snapshot(fo *s, unsigned var)
{
    s->opname = "read snapshot";
    if (!s->cow) {
        bonsai_txn *t = NULL;
        FO_RC(s, bonsai_txn_begin(s->db, BONSAI_TXN_RDONLY, &t),
              BONSAI_NOTSUP);
        return;
    }
    if (!s->snap) {
        FO_RC(s, bonsai_txn_begin(s->db, BONSAI_TXN_RDONLY, &s->snap), 0);
        fo_mcopy(&s->sm, fo_committed(s, 0));
        return;
    }
    switch (var % 4) {
    case 0:
        fo_snap_end(s);
        break;
    case 1: /* a NULL-txn read sees the last commit */
        fo_pick_key(s, &s->sm);
        fo_check_get(s, NULL, s->map[0], fo_committed(s, 0), s->key, s->kl,
                     "autocommit read");
        break;
    default:
        fo_pick_key(s, &s->sm);
        fo_check_get(s, s->snap, s->map[0], &s->sm, s->key, s->kl,
                     "snapshot read");
        break;
    }
}

static void op_begin(fo *s)
{
    s->opname = "begin";
    if (!s->cow) {
        bonsai_txn *t = NULL;
        FO_RC(s, bonsai_txn_begin(s->db, 0, &t), BONSAI_NOTSUP);
        return;
    }
    if (s->wtxn) {
        bonsai_txn *t = NULL;
        FO_RC(s, bonsai_txn_begin(s->db, 0, &t), BONSAI_BUSY);
        return;
    }
    FO_RC(s, bonsai_txn_begin(s->db, 0, &s->wtxn), 0);
    for (int w = 0; w < 2; w++)
        fo_mcopy(&s->cm[w], &s->m[w]);
}

/* Ends the write txn: commit (1) or abort (0). */
static void fo_end(fo *s, int commit)
{
    fo_pc_close(s);
    if (!s->wtxn)
        return;
    bonsai_txn *t = s->wtxn;
    s->wtxn = NULL;
    if (commit) {
        int rc = bonsai_txn_commit(t);
        if (s->trace)
            fprintf(stderr, "  commit -> %d\n", rc);
        if (rc == 0 || fo_full(s, rc))
            return;
        FO_FAIL(s, "commit -> %s", fz_err(rc));
    } else {
        bonsai_txn_abort(t);
    }
    for (int w = 0; w < 2; w++)
        fo_mcopy(&s->m[w], &s->cm[w]);
    /* a dropped or created map handle does not survive its rollback */
    fo_reopen_maps(s);
}

static void op_commit(fo *s)
{
    s->opname = "commit";
    if (!s->cow) {
        FO_RC(s, bonsai_sync(s->db), 0);
        return;
    }
    fo_end(s, 1);
    fo_verify(s, 0);
}

static void op_abort(fo *s)
{
    s->opname = "abort";
    if (s->cow)
        fo_end(s, 0);
}

static void fo_open(fo *s, int create)
{
    int rc = bonsai_open(s->file ? s->path : NULL, &s->o, &s->db);
    FO_CHECK(s, rc == 0, "open -> %s", fz_err(rc));
    bonsai_stat st;
    FO_RC(s, bonsai_db_stat(s->db, &st), 0);
    FO_CHECK(s, st.transactions == s->cow && st.anonymous == !s->file,
             "db_stat: transactions %d anonymous %d", st.transactions,
             st.anonymous);
    if (!create) {
        fo_reopen_maps(s);
        return;
    }
    FO_RC(s, bonsai_map_create(s->db, NULL, "data", s->kind, &s->map[0]), 0);
    FO_RC(s, bonsai_map_create(s->db, NULL, "decoy", fo_other(s->kind),
                               &s->map[1]),
          0);
}

static void op_reopen(fo *s, unsigned var)
{
    s->opname = "reopen";
    if (!s->file) {
        fo_check_all(s, "instead of a reopen");
        return;
    }
    fo_snap_end(s);
    fo_end(s, var & 1);
    fo_pc_close(s);
    FO_RC(s, bonsai_close(s->db), 0);
    s->db = NULL;
    static const uint64_t caches[4] = {0, 4096, UINT64_C(32) << 20, 65536};
    s->o.write_cache_bytes = caches[(var >> 1) & 3];
    fo_open(s, 0);
    if (s->stop)
        return;
    fo_check_all(s, "after reopen");
    fo_verify(s, 1);
}

enum {
    OP_PUT, OP_PUT2, OP_DEL, OP_GET, OP_CURSOR, OP_PCURSOR, OP_PCURSOR2,
    OP_BEGIN, OP_COMMIT, OP_ABORT, OP_REOPEN, OP_CHECK, OP_SNAPSHOT,
    OP_BULK_PUT, OP_BULK_DEL, OP_DECOY, FO_NOPS
};

static void fo_step(fo *s, uint8_t opb)
{
    unsigned op = opb % FO_NOPS, var = opb / FO_NOPS;
    if (s->trace)
        fprintf(stderr, "op %" PRIu64 ": %u var %u (entries %zu, txn %s)\n",
                s->op, op, var, s->m[0].n, s->wtxn ? "open" : "none");
    switch (op) {
    case OP_PUT:
    case OP_PUT2: op_put(s, 0, var | (op == OP_PUT2 ? 8 : 0)); break;
    case OP_DEL: op_del(s, 0, var); break;
    case OP_GET: op_get(s, 0, var); break;
    case OP_CURSOR: op_cursor(s, var); break;
    case OP_PCURSOR:
    case OP_PCURSOR2: op_pcursor(s, var + (op == OP_PCURSOR2 ? 3 : 0)); break;
    case OP_BEGIN: op_begin(s); break;
    case OP_COMMIT: op_commit(s); break;
    case OP_ABORT: op_abort(s); break;
    case OP_REOPEN: op_reopen(s, var); break;
    case OP_CHECK:
        s->opname = "full check";
        fo_check_all(s, "full check");
        fo_verify(s, 0);
        break;
    case OP_SNAPSHOT: op_snapshot(s, var); break;
    case OP_BULK_PUT: op_bulk_put(s, var); break;
    case OP_BULK_DEL: op_bulk_del(s); break;
    default:
        switch (var % 8) {
        case 0: op_drop_decoy(s); break;
        case 1: case 2: case 3: op_put(s, 1, var); break;
        case 4: case 5: op_del(s, 1, var); break;
        default: op_get(s, 1, var); break;
        }
    }
    s->op++;
}

int fuzz_ops(const uint8_t *data, size_t size)
{
    static fo st;
    fo *s = &st;
    memset(s, 0, sizeof *s);
    if (size < 1)
        return 0;
    s->in = (fz_in){data + 1, size - 1};
    s->cfg = data[0];
    s->trace = getenv("FUZZ_TRACE") != NULL;
    unsigned comp = (s->cfg >> 1) & 3;
    s->mode = ((s->cfg >> 5) & 1) | (comp == 3 ? 2 : 0);
    s->cow = s->mode == FO_MODE_FILE_TXN || s->mode == FO_MODE_ANON_TXN;
    s->file = s->mode == FO_MODE_FILE_TXN || s->mode == FO_MODE_FILE_DIRECT;
    s->kind = s->cfg & 0x40 ? BONSAI_KEY_BYTES : BONSAI_KEY_U64;
    s->m[0].kind = s->cm[0].kind = s->sm.kind = s->kind;
    s->m[1].kind = s->cm[1].kind = fo_other(s->kind);
    s->opname = "setup";

    bonsai_options_init(&s->o);
    s->o.max_size = FO_MAX_SIZE;
    s->o.page_size = s->cfg & 1 ? 4096 : 512;
    s->o.compression = comp == 3 ? BONSAI_COMPRESS_LZ4 : comp;
    if (getenv("FUZZ_OPS_NO_CODEC"))
        s->o.compression = BONSAI_COMPRESS_NONE;
    static const uint64_t caches[4] = {0, 4096, UINT64_C(32) << 20, 65536};
    s->o.write_cache_bytes = caches[(s->cfg >> 3) & 3];
    s->o.node_bytes = s->cfg & 0x80 ? 1024 : 256;
    s->o.node_entries = s->cfg & 0x80 ? 4 : 8;
    s->o.transactions = s->cow;
    s->o.sync = 0;
    if (s->file) {
        fz_path(s->path, sizeof s->path, "ops.bonsai");
        unlink(s->path);
    }
    fo_open(s, 1);

    while (s->in.n > 0 && !s->stop)
        fo_step(s, fz_u8(&s->in));

    /* the end: whatever is open ends, everything compares, a file is
     * reopened and compared once more */
    s->opname = "final check";
    if (!s->stop) {
        fo_snap_end(s);
        fo_end(s, 1);
    }
    if (!s->stop) {
        fo_check_all(s, "final check");
        fo_verify(s, 0);
        if (s->file)
            op_reopen(s, 1);
    }
    fo_pc_close(s);
    if (s->snap)
        bonsai_txn_abort(s->snap);
    if (s->wtxn)
        bonsai_txn_abort(s->wtxn);
    int rc = bonsai_close(s->db);
    FO_CHECK(s, rc == 0 || (s->stop && fz_rc_known(rc)), "close -> %s",
             fz_err(rc));
    s->db = NULL;
    if (s->file)
        unlink(s->path);
    for (int w = 0; w < 2; w++) {
        fo_mfree(&s->m[w]);
        fo_mfree(&s->cm[w]);
    }
    fo_mfree(&s->sm);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_ops(data, size);
}
#endif

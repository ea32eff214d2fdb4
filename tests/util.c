/* SPDX-License-Identifier: MIT */
/*
 * util.c - helpers shared by every test binary; see util.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "util.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- error names -------------------------------------------------------- */

const char *tu_err(int rc)
{
    static const struct {
        int code;
        const char *name;
    } names[] = {
        {BONSAI_OK, "0 (BONSAI_OK)"},
        {BONSAI_NOTFOUND, "BONSAI_NOTFOUND"},
        {BONSAI_EXISTS, "BONSAI_EXISTS"},
        {BONSAI_FULL, "BONSAI_FULL"},
        {BONSAI_CORRUPT, "BONSAI_CORRUPT"},
        {BONSAI_FORMAT_UNSUPPORTED, "BONSAI_FORMAT_UNSUPPORTED"},
        {BONSAI_INVALID, "BONSAI_INVALID"},
        {BONSAI_KEYSIZE, "BONSAI_KEYSIZE"},
        {BONSAI_VALSIZE, "BONSAI_VALSIZE"},
        {BONSAI_NOMEM, "BONSAI_NOMEM"},
        {BONSAI_IO, "BONSAI_IO"},
        {BONSAI_BUSY, "BONSAI_BUSY"},
        {BONSAI_READONLY, "BONSAI_READONLY"},
        {BONSAI_BADTXN, "BONSAI_BADTXN"},
        {BONSAI_MAPKIND, "BONSAI_MAPKIND"},
        {BONSAI_ENOSPC, "BONSAI_ENOSPC"},
        {BONSAI_FAILED, "BONSAI_FAILED"},
        {BONSAI_NOTSUP, "BONSAI_NOTSUP"},
        {BONSAI_MAPS_FULL, "BONSAI_MAPS_FULL"},
        {BONSAI_LOCKFILE, "BONSAI_LOCKFILE"},
        {BONSAI_READERS_FULL, "BONSAI_READERS_FULL"},
        {BONSAI_TXNID_FULL, "BONSAI_TXNID_FULL"},
    };
    static _Thread_local char buf[4][32];
    static _Thread_local unsigned next;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == rc)
            return names[i].name;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "rc=%d", rc);
    return b;
}

/* ---- temporary directory ------------------------------------------------ */

static char tmp_dir[64];
static pid_t tmp_owner;

void tu_setup(void)
{
    if (tmp_dir[0])
        return;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/bonsai-test-XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        int e = errno;
        tmp_dir[0] = 0;
        cr_assert_fail("mkdtemp: %s", strerror(e));
    }
    tmp_owner = getpid();
}

static int rm_one(const char *path, const struct stat *sb, int type,
                  struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (type == FTW_DP || type == FTW_D)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void tu_teardown(void)
{
    if (!tmp_dir[0] || getpid() != tmp_owner)
        return;
    nftw(tmp_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    tmp_dir[0] = 0;
}

const char *tu_tmpdir(void)
{
    if (!tmp_dir[0])
        tu_setup();
    return tmp_dir;
}

const char *tu_path(const char *name)
{
    static char buf[8][PATH_MAX];
    static unsigned next;
    char *b = buf[next++ % 8];
    int n = snprintf(b, PATH_MAX, "%s/%s", tu_tmpdir(), name);
    cr_assert(n > 0 && n < PATH_MAX, "path too long: %s", name);
    return b;
}

const char *tu_program(const char *name)
{
    static char buf[8][PATH_MAX];
    static unsigned next;
    const char *dir = getenv("BONSAI_BUILD_DIR");
    char *b = buf[next++ % 8];
    snprintf(b, PATH_MAX, "%s/%s", dir && *dir ? dir : "build", name);
    cr_assert(access(b, X_OK) == 0, "%s: %s (build it first)", b,
              strerror(errno));
    return b;
}

const char *tu_quote(const char *s)
{
    static char buf[16][PATH_MAX + 8];
    static unsigned next;
    cr_assert(strchr(s, '\'') == NULL, "path with a quote: %s", s);
    char *b = buf[next++ % 16];
    snprintf(b, sizeof buf[0], "'%s'", s);
    return b;
}

tu_child tu_spawn(void (*fn)(int up, int down, void *ctx), void *ctx)
{
    int up[2], down[2];
    cr_assert(pipe(up) == 0 && pipe(down) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        fn(up[1], down[0], ctx);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    return (tu_child){pid, down[1], up[0]};
}

void tu_put_int(int fd, int64_t v)
{
    ssize_t n = write(fd, &v, sizeof v);
    (void)n;
}

int tu_wait_parent(int down)
{
    char c;
    ssize_t n;
    do
        n = read(down, &c, 1);
    while (n < 0 && errno == EINTR);
    return n == 1;
}

int64_t tu_report(tu_child *c, const char *what)
{
    int64_t v = 0;
    size_t got = 0;
    while (got < sizeof v) {
        ssize_t n = read(c->from, (char *)&v + got, sizeof v - got);
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert(n > 0, "the child died before reporting %s", what);
        got += (size_t)n;
    }
    return v;
}

int tu_has_report(tu_child *c)
{
    struct pollfd p = {.fd = c->from, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

void tu_release(tu_child *c)
{
    char b = 'x';
    cr_assert(write(c->to, &b, 1) == 1);
}

void tu_reap(tu_child *c)
{
    int st;
    close(c->to);
    pid_t r;
    do
        r = waitpid(c->pid, &st, 0);
    while (r < 0 && errno == EINTR);
    close(c->from);
    cr_assert(r == c->pid, "waitpid: %s", strerror(errno));
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the child did not exit cleanly (status %d)", st);
}

int tu_sh_as(int uid, const char *cmd)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (uid >= 0 && (setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0))
            _exit(125);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st;
    pid_t r;
    while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    cr_assert(r == pid, "waitpid: %s", strerror(errno));
    cr_assert(!WIFSIGNALED(st), "killed by signal %d: %s", WTERMSIG(st),
              cmd);
    return WEXITSTATUS(st);
}

int tu_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    cr_assert(n > 0 && (size_t)n < sizeof cmd, "command too long");
    return tu_sh_as(-1, cmd);
}

/* ---- seeds, scale, PRNG ------------------------------------------------- */

uint64_t tu_seed(const char *what, uint64_t def)
{
    uint64_t seed = def;
    const char *s = getenv("BONSAI_TEST_SEED");
    if (s && *s)
        seed = strtoull(s, NULL, 0);
    cr_log_info("%s: seed=%" PRIu64 "%s", what, seed,
                s && *s ? " (from BONSAI_TEST_SEED)"
                        : " (replay with BONSAI_TEST_SEED)");
    return seed;
}

#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif

double tu_scale(void)
{
    const char *s = getenv("BONSAI_TEST_SCALE");
    if (s && *s) {
        double d = strtod(s, NULL);
        if (d > 0)
            return d;
    }
    return TU_ASAN ? 0.25 : 1.0;
}

uint64_t tu_scaled(uint64_t n, uint64_t min)
{
    double d = (double)n * tu_scale();
    uint64_t r = d < 1 ? 0 : (uint64_t)d;
    return r < min ? min : r;
}

uint64_t tu_below(tu_rng *r, uint64_t n)
{
    if (n <= 1)
        return 0;
    /* rejection sampling: no modulo bias */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = tu_rand(r);
    while (x >= lim);
    return x % n;
}

uint64_t tu_range(tu_rng *r, uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return lo;
    if (lo == 0 && hi == UINT64_MAX)
        return tu_rand(r);
    return lo + tu_below(r, hi - lo + 1);
}

bool tu_chance(tu_rng *r, unsigned per_mille)
{
    return tu_below(r, 1000) < per_mille;
}

void tu_fill(tu_rng *r, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n >= 8) {
        uint64_t x = tu_rand(r);
        memcpy(p, &x, 8);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t x = tu_rand(r);
        memcpy(p, &x, n);
    }
}

uint64_t tu_hash(const void *p, size_t n, uint64_t seed)
{
    const uint8_t *b = p;
    uint64_t h = UINT64_C(0xcbf29ce484222325) ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return tu_mix64(h ^ n);
}

/* ---- formatting --------------------------------------------------------- */

const char *tu_fmt(unsigned kind, const void *p, size_t n)
{
    static _Thread_local char buf[8][128];
    static _Thread_local unsigned next;
    char *b = buf[next++ % 8];
    if (kind == BONSAI_KEY_U64 && n == 8 && p) {
        snprintf(b, 128, "u64 %" PRIu64, tu_u64_of(p));
        return b;
    }
    int o = snprintf(b, 128, "[%zu bytes]", n);
    const uint8_t *q = p;
    for (size_t i = 0; q && i < n && i < 24 && o < 120; i++)
        o += snprintf(b + o, 128 - (size_t)o, "%s%02x", i ? "" : " ", q[i]);
    if (n > 24 && o < 124)
        snprintf(b + o, 128 - (size_t)o, "...");
    return b;
}

/* ---- reference model ---------------------------------------------------- */

void tm_init(tm_model *m, unsigned kind)
{
    memset(m, 0, sizeof *m);
    m->kind = kind;
}

void tm_free(tm_model *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].key);
        free(m->e[i].val);
    }
    free(m->e);
    m->e = NULL;
    m->n = m->cap = 0;
}

void tm_clear(tm_model *m)
{
    tm_free(m);
}

int tm_cmp(unsigned kind, const void *a, size_t al, const void *b, size_t bl)
{
    if (kind == BONSAI_KEY_U64) {
        uint64_t x = tu_u64_of(a), y = tu_u64_of(b);
        return x < y ? -1 : x > y;
    }
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return al < bl ? -1 : al > bl;
}

size_t tm_lower_bound(const tm_model *m, const void *k, size_t kl)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tm_cmp(m->kind, m->e[mid].key, m->e[mid].klen, k, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool tm_find(const tm_model *m, const void *k, size_t kl, size_t *idx)
{
    size_t i = tm_lower_bound(m, k, kl);
    if (idx)
        *idx = i;
    return i < m->n && tm_cmp(m->kind, m->e[i].key, m->e[i].klen, k, kl) == 0;
}

static void *dup_bytes(const void *p, size_t n)
{
    if (n == 0)
        return NULL;
    void *d = malloc(n);
    cr_assert(d != NULL, "out of memory (%zu bytes)", n);
    memcpy(d, p, n);
    return d;
}

static void tm_grow(tm_model *m)
{
    if (m->n < m->cap)
        return;
    size_t cap = m->cap ? m->cap * 2 : 64;
    tm_entry *e = realloc(m->e, cap * sizeof *e);
    cr_assert(e != NULL, "out of memory");
    m->e = e;
    m->cap = cap;
}

bool tm_put(tm_model *m, const void *k, size_t kl, const void *v, size_t vl)
{
    size_t i;
    if (tm_find(m, k, kl, &i)) {
        free(m->e[i].val);
        m->e[i].val = dup_bytes(v, vl);
        m->e[i].vlen = (uint32_t)vl;
        return false;
    }
    tm_grow(m);
    memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof m->e[0]);
    m->e[i].key = dup_bytes(k, kl);
    m->e[i].klen = (uint32_t)kl;
    m->e[i].val = dup_bytes(v, vl);
    m->e[i].vlen = (uint32_t)vl;
    m->n++;
    return true;
}

bool tm_del(tm_model *m, const void *k, size_t kl)
{
    size_t i;
    if (!tm_find(m, k, kl, &i))
        return false;
    free(m->e[i].key);
    free(m->e[i].val);
    memmove(&m->e[i], &m->e[i + 1], (m->n - i - 1) * sizeof m->e[0]);
    m->n--;
    return true;
}

void tm_copy(tm_model *dst, const tm_model *src)
{
    if (dst == src)
        return;
    tm_free(dst);
    dst->kind = src->kind;
    dst->cap = src->n ? src->n : 1;
    dst->e = malloc(dst->cap * sizeof dst->e[0]);
    cr_assert(dst->e != NULL, "out of memory");
    for (size_t i = 0; i < src->n; i++) {
        dst->e[i].key = dup_bytes(src->e[i].key, src->e[i].klen);
        dst->e[i].klen = src->e[i].klen;
        dst->e[i].val = dup_bytes(src->e[i].val, src->e[i].vlen);
        dst->e[i].vlen = src->e[i].vlen;
    }
    dst->n = src->n;
}

void tm_append(tm_model *m, const void *k, size_t kl, const void *v,
               size_t vl)
{
    tm_grow(m);
    tm_entry *e = &m->e[m->n++];
    e->key = dup_bytes(k, kl);
    e->klen = (uint32_t)kl;
    e->val = dup_bytes(v, vl);
    e->vlen = (uint32_t)vl;
}

uint64_t tu_entry_hash(const void *k, size_t kl, const void *v, size_t vl)
{
    uint64_t hk = tu_hash(k, kl, 0x6b6579);
    uint64_t hv = tu_hash(v, vl, 0x76616c);
    return tu_mix64(hk + 31 * hv);
}

uint64_t tm_checksum(const tm_model *m)
{
    uint64_t s = 0;
    for (size_t i = 0; i < m->n; i++)
        s += tu_entry_hash(m->e[i].key, m->e[i].klen, m->e[i].val,
                           m->e[i].vlen);
    return s;
}

/* ---- stores and maps ---------------------------------------------------- */

bonsai_db *tu_open(const char *path, const bonsai_options *opts)
{
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, opts, &db);
    cr_assert(rc == 0, "bonsai_open(%s) -> %s", path ? path : "NULL",
              tu_err(rc));
    cr_assert(db != NULL, "bonsai_open returned 0 but no handle");
    return db;
}

bonsai_db *tu_open_ro(const char *path)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.read_only = 1;
    o.create = 0;
    return tu_open(path, &o);
}

bonsai_map tu_map_create(bonsai_db *db, bonsai_txn *txn, const char *name,
                         unsigned kind)
{
    bonsai_map map = NULL;
    int rc = bonsai_map_create(db, txn, name, kind, &map);
    cr_assert(rc == 0, "bonsai_map_create(%s) -> %s", name, tu_err(rc));
    cr_assert(map != NULL, "bonsai_map_create(%s) gave no handle", name);
    return map;
}

bonsai_map tu_map_open(bonsai_db *db, bonsai_txn *txn, const char *name,
                       unsigned want_kind)
{
    bonsai_map map = NULL;
    unsigned kind = 0;
    int rc = bonsai_map_open(db, txn, name, &map, &kind);
    cr_assert(rc == 0, "bonsai_map_open(%s) -> %s", name, tu_err(rc));
    cr_assert(kind == want_kind, "map %s has kind %u, expected %u", name,
              kind, want_kind);
    return map;
}

int tu_get_copy(bonsai_txn *txn, bonsai_map map, const void *k, size_t kl,
                uint8_t **out, size_t *outlen)
{
    bonsai_val key = tu_val(k, kl), val = {0, NULL};
    *out = NULL;
    *outlen = 0;
    int rc = bonsai_get(txn, map, &key, &val);
    if (rc)
        return rc;
    *outlen = val.size;
    if (val.size) {
        cr_assert(val.data != NULL, "get: %zu bytes at NULL", val.size);
        *out = dup_bytes(val.data, val.size);
    }
    return 0;
}

/* Checks the key a cursor reports has a size valid for the kind. */
static bool key_ok(unsigned kind, const bonsai_val *k)
{
    if (!k->data)
        return false;
    if (kind == BONSAI_KEY_U64)
        return k->size == 8;
    return k->size >= 1 && k->size <= BONSAI_MAX_KEY;
}

int tu_walk(bonsai_txn *txn, bonsai_map map, tm_model *out, char *why,
            size_t whylen)
{
    unsigned kind = out->kind;
    tm_free(out);
    snprintf(why, whylen, "ok");
    bonsai_cursor *cur = NULL;
    int rc = bonsai_cursor_open(txn, map, &cur);
    if (rc) {
        snprintf(why, whylen, "cursor_open -> %s", tu_err(rc));
        return rc;
    }
    rc = bonsai_cursor_first(cur);
    while (rc == 0) {
        bonsai_val k = {0, NULL}, v = {0, NULL};
        rc = bonsai_cursor_get(cur, &k, &v);
        if (rc) {
            snprintf(why, whylen, "cursor_get at entry %zu -> %s", out->n,
                     tu_err(rc));
            break;
        }
        if (!key_ok(kind, &k) || (v.size && !v.data)) {
            snprintf(why, whylen, "entry %zu: bad key/value (%zu, %zu)",
                     out->n, k.size, v.size);
            rc = BONSAI_CORRUPT;
            break;
        }
        if (out->n) {
            tm_entry *l = &out->e[out->n - 1];
            if (tm_cmp(kind, l->key, l->klen, k.data, k.size) >= 0) {
                snprintf(why, whylen,
                         "walk not strictly increasing at entry %zu: %s "
                         "then %s",
                         out->n, tu_fmt(kind, l->key, l->klen),
                         tu_fmt(kind, k.data, k.size));
                rc = BONSAI_CORRUPT;
                break;
            }
        }
        tm_append(out, k.data, k.size, v.data, v.size);
        rc = bonsai_cursor_next(cur);
    }
    if (rc == BONSAI_NOTFOUND)
        rc = 0;
    else if (rc && strcmp(why, "ok") == 0)
        snprintf(why, whylen, "cursor move after entry %zu -> %s", out->n,
                 tu_err(rc));
    bonsai_cursor_close(cur);
    return rc;
}

/* Compares the cursor's current entry with model entry i. */
static bool cur_matches(bonsai_cursor *cur, const tm_model *m, size_t i,
                        const char *dir, char *why, size_t whylen)
{
    bonsai_val k = {0, NULL}, v = {0, NULL};
    int rc = bonsai_cursor_get(cur, &k, &v);
    if (rc) {
        snprintf(why, whylen, "%s walk: cursor_get at entry %zu -> %s", dir,
                 i, tu_err(rc));
        return false;
    }
    const tm_entry *e = &m->e[i];
    if (!key_ok(m->kind, &k) ||
        tm_cmp(m->kind, k.data, k.size, e->key, e->klen) != 0) {
        snprintf(why, whylen, "%s walk: entry %zu of %zu has key %s, model %s",
                 dir, i, m->n, tu_fmt(m->kind, k.data, k.size),
                 tu_fmt(m->kind, e->key, e->klen));
        return false;
    }
    if (v.size != e->vlen || (v.size && (!v.data ||
                                         memcmp(v.data, e->val, v.size)))) {
        snprintf(why, whylen,
                 "%s walk: key %s has value %s, model %s", dir,
                 tu_fmt(m->kind, e->key, e->klen),
                 tu_fmt(BONSAI_KEY_BYTES, v.data, v.size),
                 tu_fmt(BONSAI_KEY_BYTES, e->val, e->vlen));
        return false;
    }
    return true;
}

bool tu_same(bonsai_txn *txn, bonsai_map map, const tm_model *m, char *why,
             size_t whylen)
{
    snprintf(why, whylen, "ok");
    uint64_t count = UINT64_MAX;
    int rc = bonsai_count(txn, map, &count);
    if (rc) {
        snprintf(why, whylen, "bonsai_count -> %s", tu_err(rc));
        return false;
    }
    if (count != m->n) {
        snprintf(why, whylen, "bonsai_count = %" PRIu64 ", model has %zu",
                 count, m->n);
        return false;
    }
    bonsai_cursor *cur = NULL;
    rc = bonsai_cursor_open(txn, map, &cur);
    if (rc) {
        snprintf(why, whylen, "cursor_open -> %s", tu_err(rc));
        return false;
    }
    bool ok = true;
    /* forward */
    rc = bonsai_cursor_first(cur);
    for (size_t i = 0; ok && i < m->n; i++) {
        if (rc) {
            snprintf(why, whylen,
                     "forward walk: move to entry %zu of %zu (%s) -> %s", i,
                     m->n, tu_fmt(m->kind, m->e[i].key, m->e[i].klen),
                     tu_err(rc));
            ok = false;
            break;
        }
        ok = cur_matches(cur, m, i, "forward", why, whylen);
        rc = bonsai_cursor_next(cur);
    }
    if (ok && rc != BONSAI_NOTFOUND) {
        snprintf(why, whylen,
                 "forward walk: move past the last of %zu entries -> %s",
                 m->n, tu_err(rc));
        ok = false;
    }
    /* backward */
    if (ok) {
        rc = bonsai_cursor_last(cur);
        for (size_t j = m->n; ok && j-- > 0;) {
            if (rc) {
                snprintf(why, whylen,
                         "backward walk: move to entry %zu of %zu -> %s", j,
                         m->n, tu_err(rc));
                ok = false;
                break;
            }
            ok = cur_matches(cur, m, j, "backward", why, whylen);
            rc = bonsai_cursor_prev(cur);
        }
        if (ok && rc != BONSAI_NOTFOUND) {
            snprintf(why, whylen,
                     "backward walk: move before the first of %zu entries "
                     "-> %s",
                     m->n, tu_err(rc));
            ok = false;
        }
    }
    bonsai_cursor_close(cur);
    return ok;
}

/* SPDX-License-Identifier: MIT */
/*
 * test_crash.c - simulated power loss.
 *
 * A recording bx_io (crashsim.h) watches a seeded workload of write
 * transactions.  At every sync barrier (fsync; msync would be a barrier
 * for its range) it reads the whole file: the "durable image" is the file
 * as it was at the previous barrier, and the pending changes are the
 * 4096-byte OS pages that differ between the file now and that image
 * (pages written through the shared mapping, the meta slot's pwrite, file
 * growth).  It also takes such a cut without a barrier (an "observation")
 * around each fallocate (the middle of growth), at random points inside
 * transactions (nodes the write cache evicted), after an abort, and while
 * a last transaction is still in flight.  Real fsyncs are skipped: the
 * process never really loses power.
 *
 * From each cut it builds crash states: the durable image plus a subset
 * of the pending pages, each old, new, or torn at a 512-byte sector
 * boundary, the file growth kept or lost.  With at most EXHAUSTIVE
 * pending pages every old/new subset and every prefix/suffix tear of each
 * page; otherwise random subsets; and always the telling ones: none, all,
 * meta page only, all but the meta page, and every byte-prefix and
 * byte-suffix tear of a meta slot that changed.  States are deduplicated
 * by content.
 *
 * A forked checker process writes each state to a file, opens it with the
 * default io and checks: open succeeds (before the creating open returned,
 * BONSAI_CORRUPT is allowed too); the last commit's txn id T lies between
 * the last acknowledged and the last attempted commit; the contents equal
 * the model after T (crashsim's cs_check: the list of maps, walks both
 * ways, counts, lookups, bonsai_map_stat, bonsai_verify).  Then, for each
 * state, one more commit through a second recorder, a few crash states
 * inside that commit, and the same checks (nested states).  If the checker
 * dies (a crash in the library), the parent reports that state and starts
 * a new checker after it.  Under ASan the checks run in the test process
 * (LeakSanitizer cannot check a forked child of it).
 *
 * Each configuration is a Test (Criterion runs two at a time); each logs
 * and prints how many states it checked.  A failure message names the
 * config, seed, event and state; replay with BONSAI_TEST_SEED=<seed> and
 * the same --filter.  BONSAI_TEST_KNOWN_BUG=1 turns on the cases that fail
 * today (see known_bug_enabled() and cs_verify() in crashsim.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bonsai.h"
#include "crashsim.h"
#include "io.h"
#include "util.h"

/* .timeout: a hang guard, not a timing assertion */
TestSuite(crash, .init = tu_setup, .fini = tu_teardown, .timeout = 900);

#define OSPG 4096u
#define SECT 512u
#define SPP (OSPG / SECT) /* sectors a page */
#define META_SIZE 52u     /* format.md: meta slot bytes */
#define NONE UINT64_MAX   /* no acknowledged state yet */
#define EXHAUSTIVE 6      /* up to this many pending pages: all subsets */

/* ---- configurations ------------------------------------------------------ */

typedef struct cfg {
    const char *name;
    uint32_t page_size;
    unsigned compression;
    uint32_t node_bytes;
    uint32_t node_entries;
    uint64_t max_size;
    uint64_t write_cache;
    unsigned txns;    /* committed (or aborted) transactions */
    unsigned randoms; /* random states per cut with many pending pages */
    unsigned nested;  /* nested crash states per state */
    int sync_off;     /* the sync option off: no barriers after creation */
} cfg;

static void cfg_options(const cfg *c, bonsai_options *o)
{
    bonsai_options_init(o);
    o->page_size = c->page_size;
    o->compression = c->compression;
    o->node_bytes = c->node_bytes;
    o->node_entries = c->node_entries;
    o->max_size = c->max_size;
    o->write_cache_bytes = c->write_cache;
    o->transactions = 1;
    o->sync = !c->sync_off;
}

static void cfg_params(const cfg *c, cs_params *p)
{
    cs_params_small(p);
    /* values above node_bytes / 4 go out of line */
    p->big_min = c->node_bytes / 4 + 1;
    p->big_max = c->node_bytes * 3;
}

/* ---- the recorder -------------------------------------------------------- */

enum ev_label {
    EV_FSYNC,
    EV_MSYNC,
    EV_GROW0,    /* just before a fallocate */
    EV_GROW1,    /* just after it */
    EV_MID,      /* inside a transaction, between its operations */
    EV_ABORTED,  /* after an abort */
    EV_INFLIGHT, /* a transaction that never commits */
    EV_COMMITTED, /* after a commit returned (sync off only) */
};

static const char *ev_name(int l)
{
    static const char *const n[] = {"fsync", "msync", "before-fallocate",
                                    "after-fallocate", "mid-transaction",
                                    "after-abort", "in-flight",
                                    "after-commit"};
    return l >= 0 && l <= EV_COMMITTED ? n[l] : "?";
}

typedef struct event {
    int label;
    uint64_t call;      /* io call number (all ops) at the cut */
    uint64_t old_size;  /* durable file size */
    uint64_t new_size;  /* file size at the cut */
    size_t np;          /* pending pages */
    uint64_t *pg;       /* their OS page numbers, ascending */
    uint8_t *diff;      /* per page: sectors that differ (bit s) */
    uint8_t *data;      /* per page: new contents, OSPG bytes */
    uint64_t adv_lo, adv_hi; /* pages that become durable after the cut */
    int adv_size;            /* and the size */
    uint64_t lo, hi;    /* acknowledged .. attempted commit at the cut */
} event;

typedef struct recorder {
    cs_io x;
    int fd;
    int started;
    uint8_t *init; /* the file when the recorder first saw it */
    uint64_t init_size;
    uint8_t *dur;  /* the durable image now */
    uint64_t dur_size, dur_cap;
    uint8_t *cur;
    uint64_t cur_cap;
    event *ev;
    size_t nev, cap;
    uint64_t lo, hi;
    uint8_t *map_base; /* address of file offset 0, for msync */
    char err[200];     /* the recorder itself failed */
} recorder;

/* snprintf without -Wformat-truncation: messages may be cut short */
__attribute__((format(printf, 3, 4))) static int say(char *buf, size_t n,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort();
    return q;
}

static int read_file(int fd, uint8_t **buf, uint64_t *cap, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    uint64_t n = (uint64_t)st.st_size;
    uint64_t want = (n + OSPG - 1) / OSPG * OSPG;
    if (want > *cap) {
        *buf = xrealloc(*buf, want);
        *cap = want;
    }
    uint64_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, *buf + done, n - done, (off_t)done);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return -1;
        }
        done += (uint64_t)r;
    }
    if (want > n)
        memset(*buf + n, 0, want - n);
    *size = n;
    return 0;
}

static const uint8_t zero_page[OSPG];

static void rec_cut(recorder *r, int label, uint64_t adv_lo, uint64_t adv_hi,
                    int adv_size)
{
    uint64_t csize = 0;
    if (!r->started)
        return;
    if (read_file(r->fd, &r->cur, &r->cur_cap, &csize) != 0) {
        say(r->err, sizeof r->err, "reading the file at %s: %s",
                 ev_name(label), strerror(errno));
        return;
    }
    if (r->nev == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->ev = xrealloc(r->ev, r->cap * sizeof *r->ev);
    }
    event *e = &r->ev[r->nev++];
    memset(e, 0, sizeof *e);
    e->label = label;
    e->call = r->x.total;
    e->old_size = r->dur_size;
    e->new_size = csize;
    e->lo = r->lo;
    e->hi = r->hi;
    e->adv_lo = adv_lo;
    e->adv_hi = adv_hi;
    e->adv_size = adv_size;
    uint64_t dpages = (r->dur_size + OSPG - 1) / OSPG;
    uint64_t cpages = (csize + OSPG - 1) / OSPG;
    uint64_t n = dpages > cpages ? dpages : cpages;
    size_t cap = 0;
    for (uint64_t p = 0; p < n; p++) {
        const uint8_t *o = p < dpages ? r->dur + p * OSPG : zero_page;
        const uint8_t *c = p < cpages ? r->cur + p * OSPG : zero_page;
        if (p >= cpages || memcmp(o, c, OSPG) == 0)
            continue; /* a page past the new end cannot be new */
        uint8_t mask = 0;
        for (unsigned s = 0; s < SPP; s++)
            if (memcmp(o + s * SECT, c + s * SECT, SECT) != 0)
                mask |= (uint8_t)(1u << s);
        if (e->np == cap) {
            cap = cap ? cap * 2 : 16;
            e->pg = xrealloc(e->pg, cap * sizeof *e->pg);
            e->diff = xrealloc(e->diff, cap);
            e->data = xrealloc(e->data, cap * OSPG);
        }
        e->pg[e->np] = p;
        e->diff[e->np] = mask;
        memcpy(e->data + e->np * OSPG, c, OSPG);
        e->np++;
    }
    /* what the cut makes durable */
    if (adv_size) {
        if (cpages * OSPG > r->dur_cap) {
            r->dur = xrealloc(r->dur, cpages * OSPG);
            r->dur_cap = cpages * OSPG;
        }
        if (cpages > dpages)
            memset(r->dur + dpages * OSPG, 0, (cpages - dpages) * OSPG);
        r->dur_size = csize;
    }
    uint64_t dp_now = (r->dur_size + OSPG - 1) / OSPG;
    for (size_t i = 0; i < e->np; i++)
        if (e->pg[i] >= adv_lo && e->pg[i] < adv_hi && e->pg[i] < dp_now)
            memcpy(r->dur + e->pg[i] * OSPG, e->data + i * OSPG, OSPG);
}

static void rec_observe(recorder *r, int label)
{
    rec_cut(r, label, 0, 0, 0);
}

static int rec_hook(void *ctx, const cs_call *c, int before, int rc)
{
    recorder *r = ctx;
    if (before && c->fd >= 0 && c->op != CS_MAP) {
        if (!r->started) {
            r->fd = c->fd;
            if (read_file(r->fd, &r->dur, &r->dur_cap, &r->dur_size) != 0) {
                say(r->err, sizeof r->err, "reading the file: %s",
                         strerror(errno));
                return BONSAI_IO;
            }
            r->init = xrealloc(NULL, r->dur_cap);
            if (r->dur_cap)
                memcpy(r->init, r->dur, r->dur_cap);
            r->init_size = r->dur_size;
            r->started = 1;
        }
        r->fd = c->fd; /* a reopen gets a new descriptor */
    }
    switch (c->op) {
    case CS_FSYNC:
        if (before) {
            rec_cut(r, EV_FSYNC, 0, UINT64_MAX, 1);
            return CS_SKIP; /* nothing is ever really lost */
        }
        break;
    case CS_MSYNC:
        if (before && r->map_base) {
            uint64_t off = (uint64_t)((uint8_t *)c->addr - r->map_base);
            rec_cut(r, EV_MSYNC, off / OSPG, (off + c->len + OSPG - 1) / OSPG,
                    0);
            return CS_SKIP;
        }
        break;
    case CS_FALLOCATE:
        if (before)
            rec_observe(r, EV_GROW0);
        else if (rc == 0)
            rec_observe(r, EV_GROW1);
        break;
    case CS_MAP:
        if (!before && rc == 0 && c->fd >= 0 && c->out)
            r->map_base = (uint8_t *)c->out - c->off;
        break;
    default:
        break;
    }
    return CS_GO;
}

static void rec_init(recorder *r)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->lo = r->hi = NONE;
    cs_io_init(&r->x, bx_io_default(), rec_hook, r);
}

static void rec_free(recorder *r)
{
    for (size_t i = 0; i < r->nev; i++) {
        free(r->ev[i].pg);
        free(r->ev[i].diff);
        free(r->ev[i].data);
    }
    free(r->ev);
    free(r->init);
    free(r->dur);
    free(r->cur);
    memset(r, 0, sizeof *r);
}

/* ---- replaying durable images ------------------------------------------- */

static uint64_t sect_hash(const uint8_t *p)
{
    uint64_t h = UINT64_C(0x243f6a8885a308d3);
    for (unsigned i = 0; i < SECT; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * UINT64_C(0x9e3779b97f4a7c15);
        h ^= h >> 29;
    }
    return tu_mix64(h);
}

static uint64_t sect_term(uint64_t i, uint64_t h)
{
    return tu_mix64(h + i * UINT64_C(0xd6e8feb86659fd93));
}

typedef struct replay {
    const recorder *r;
    size_t next;       /* events applied: [0, next) */
    uint8_t *d;
    uint64_t dsize, dcap;
    uint64_t *dh;      /* hash of each durable sector (when hashing) */
    uint64_t dhcap;
    uint64_t dsum;     /* sum of sect_term over the durable sectors */
    int hashing;
} replay;

static void replay_rehash(replay *p)
{
    uint64_t ns = p->dsize / SECT;
    if (ns > p->dhcap) {
        p->dh = xrealloc(p->dh, ns * sizeof *p->dh);
        p->dhcap = ns;
    }
    p->dsum = 0;
    for (uint64_t i = 0; i < ns; i++) {
        p->dh[i] = sect_hash(p->d + i * SECT);
        p->dsum += sect_term(i, p->dh[i]);
    }
}

static void replay_init(replay *p, const recorder *r, int hashing)
{
    memset(p, 0, sizeof *p);
    p->r = r;
    p->hashing = hashing;
    p->dcap = r->init_size > OSPG ? (r->init_size + OSPG - 1) / OSPG * OSPG
                                  : OSPG;
    p->d = xrealloc(NULL, p->dcap);
    memset(p->d, 0, p->dcap);
    if (r->init_size)
        memcpy(p->d, r->init, r->init_size);
    p->dsize = r->init_size;
    if (hashing)
        replay_rehash(p);
}

static void replay_free(replay *p)
{
    free(p->d);
    free(p->dh);
    memset(p, 0, sizeof *p);
}

/* Makes p->d the durable image at event k (before its cut). */
static void replay_to(replay *p, size_t k)
{
    while (p->next < k) {
        const event *e = &p->r->ev[p->next++];
        int changed = 0;
        if (e->adv_size && e->new_size != p->dsize) {
            uint64_t want = (e->new_size + OSPG - 1) / OSPG * OSPG;
            if (want > p->dcap) {
                p->d = xrealloc(p->d, want);
                memset(p->d + p->dcap, 0, want - p->dcap);
                p->dcap = want;
            }
            if (e->new_size > p->dsize)
                memset(p->d + p->dsize, 0, e->new_size - p->dsize);
            p->dsize = e->new_size;
            changed = 1;
        }
        for (size_t i = 0; i < e->np; i++) {
            uint64_t pg = e->pg[i];
            if (pg < e->adv_lo || pg >= e->adv_hi ||
                (pg + 1) * OSPG > p->dsize)
                continue;
            memcpy(p->d + pg * OSPG, e->data + i * OSPG, OSPG);
            changed = 1;
        }
        if (changed && p->hashing)
            replay_rehash(p);
    }
}

/* ---- crash states -------------------------------------------------------- */

/* A crash state of event ev: per pending page a mask of the sectors that
 * are new; size_new picks the file size at the cut (else the durable
 * one); tear_slot 1/2 tears meta slot 0/1 at byte tear_len (prefix new
 * when tear_pre, else suffix new). */
typedef struct sdesc {
    uint32_t ev;
    uint8_t size_new;
    uint8_t tear_slot;
    uint8_t tear_pre;
    uint8_t tear_len;
    uint8_t what; /* enum what */
    uint32_t mask_off;
    uint64_t hash;
    /* acknowledged .. attempted commit: the event's, narrowed by every
     * other cut that produced the same content (it must be right at
     * each) */
    uint64_t lo, hi;
} sdesc;

enum what {
    W_NONE,
    W_ALL,
    W_META_ONLY,
    W_ALL_BUT_META,
    W_META_TEAR,
    W_SUBSET,
    W_PAGE_TEAR,
    W_RANDOM,
    W_SINGLE,
};

static const char *what_name(int w)
{
    static const char *const n[] = {"none",      "all",       "meta only",
                                    "all but meta", "meta tear", "subset",
                                    "page tear", "random",   "single page"};
    return w >= 0 && w <= W_SINGLE ? n[w] : "?";
}

typedef struct sset {
    sdesc *d;
    size_t n, cap;
    uint8_t *masks;
    size_t nm, capm;
    uint64_t *tab; /* open-addressing set of hashes (0 = empty) */
    uint32_t *tabi; /* the state each hash belongs to */
    size_t tabcap, tabn;
    uint64_t dups;
} sset;

static void sset_free(sset *s)
{
    free(s->d);
    free(s->masks);
    free(s->tab);
    free(s->tabi);
    memset(s, 0, sizeof *s);
}

/* Adds hash h of state idx; returns UINT32_MAX, or the state that had
 * the hash already (then nothing is added). */
static uint32_t sset_insert(sset *s, uint64_t h, uint32_t idx)
{
    if (h == 0)
        h = 1;
    if (2 * (s->tabn + 1) > s->tabcap) {
        size_t cap = s->tabcap ? s->tabcap * 2 : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        uint32_t *ti = calloc(cap, sizeof *ti);
        if (!t || !ti)
            abort();
        for (size_t i = 0; i < s->tabcap; i++)
            if (s->tab[i]) {
                size_t j = s->tab[i] & (cap - 1);
                while (t[j])
                    j = (j + 1) & (cap - 1);
                t[j] = s->tab[i];
                ti[j] = s->tabi[i];
            }
        free(s->tab);
        free(s->tabi);
        s->tab = t;
        s->tabi = ti;
        s->tabcap = cap;
    }
    size_t j = h & (s->tabcap - 1);
    while (s->tab[j]) {
        if (s->tab[j] == h)
            return s->tabi[j];
        j = (j + 1) & (s->tabcap - 1);
    }
    s->tab[j] = h;
    s->tabi[j] = idx;
    s->tabn++;
    return UINT32_MAX;
}

/* Commit numbers with NONE (nothing acknowledged or attempted) lowest. */
static uint64_t rank(uint64_t t)
{
    return t == NONE ? 0 : t + 1;
}

/* Sector i of a state's image (i * SECT < size), into buf. */
static const uint8_t *state_sector(const replay *p, const event *e,
                                   const sdesc *d, const uint8_t *masks,
                                   uint64_t i, uint8_t *buf)
{
    uint64_t pg = i / SPP;
    unsigned s = (unsigned)(i % SPP);
    const uint8_t *old = i * SECT < p->dsize ? p->d + i * SECT : zero_page;
    const uint8_t *neu = old;
    /* pending pages are sorted: binary search */
    size_t lo = 0, hi = e->np;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e->pg[mid] < pg)
            lo = mid + 1;
        else
            hi = mid;
    }
    int pend = lo < e->np && e->pg[lo] == pg;
    if (pend)
        neu = e->data + lo * OSPG + s * SECT;
    const uint8_t *res = old;
    if (pend && (masks[lo] >> s & 1))
        res = neu;
    if (d->tear_slot && pg == 0 && s == d->tear_slot) {
        memcpy(buf, old, SECT);
        unsigned a = d->tear_pre ? 0 : META_SIZE - d->tear_len;
        unsigned b = d->tear_pre ? d->tear_len : META_SIZE;
        memcpy(buf + a, neu + a, b - a);
        res = buf;
    }
    return res;
}

static uint64_t state_size(const event *e, const sdesc *d)
{
    return d->size_new ? e->new_size : e->old_size;
}

/* Content hash of a state, computed from the durable sum and the sectors
 * that differ from it. */
static uint64_t state_hash(const replay *p, const event *e, const sdesc *d,
                           const uint8_t *masks)
{
    uint64_t size = state_size(e, d);
    uint64_t h = p->dsum;
    uint64_t dsec = p->dsize / SECT, nsec = size / SECT;
    uint8_t buf[SECT];
    for (uint64_t i = nsec; i < dsec; i++) /* shrunk */
        h -= sect_term(i, p->dh[i]);
    for (uint64_t i = dsec; i < nsec; i++) /* grown: zero unless new */
        h += sect_term(i, sect_hash(state_sector(p, e, d, masks, i, buf)));
    for (size_t k = 0; k < e->np; k++) {
        for (unsigned s = 0; s < SPP; s++) {
            uint64_t i = e->pg[k] * SPP + s;
            if (i >= dsec || i >= nsec)
                continue;
            int torn = d->tear_slot && e->pg[k] == 0 && s == d->tear_slot;
            if (!torn && !(masks[k] >> s & 1))
                continue;
            uint64_t nh = sect_hash(state_sector(p, e, d, masks, i, buf));
            h += sect_term(i, nh) - sect_term(i, p->dh[i]);
        }
    }
    return tu_mix64(h + size * UINT64_C(0x9e3779b97f4a7c15));
}

static void build_image(const replay *p, const event *e, const sdesc *d,
                        const uint8_t *masks, uint8_t **img, uint64_t *cap,
                        uint64_t *size)
{
    uint64_t n = state_size(e, d);
    uint64_t want = (n + OSPG - 1) / OSPG * OSPG + OSPG;
    if (want > *cap) {
        *img = xrealloc(*img, want);
        *cap = want;
    }
    uint8_t *o = *img;
    uint64_t keep = n < p->dsize ? n : p->dsize;
    memcpy(o, p->d, keep);
    memset(o + keep, 0, want - keep);
    uint8_t buf[SECT];
    for (size_t k = 0; k < e->np; k++)
        for (unsigned s = 0; s < SPP; s++) {
            uint64_t i = e->pg[k] * SPP + s;
            if ((i + 1) * SECT > n)
                continue;
            memcpy(o + i * SECT, state_sector(p, e, d, masks, i, buf), SECT);
        }
    *size = n;
}

/* Candidate generation: adds the states of event k not seen before. */
typedef struct gen {
    sset *set;
    const replay *p;
    const event *e;
    uint32_t ev;
    uint8_t *m; /* scratch masks */
} gen;

static void gen_add(gen *g, const uint8_t *masks, int size_new, int slot,
                    int pre, int len, int what)
{
    const event *e = g->e;
    sdesc d = {.ev = g->ev, .size_new = (uint8_t)(size_new ? 1 : 0),
               .tear_slot = (uint8_t)slot, .tear_pre = (uint8_t)pre,
               .tear_len = (uint8_t)len, .what = (uint8_t)what};
    if (e->new_size == e->old_size)
        d.size_new = 1;
    uint64_t size = state_size(e, &d);
    /* normalise: only sectors that differ and lie inside the file */
    for (size_t k = 0; k < e->np; k++) {
        g->m[k] = masks[k] & e->diff[k];
        if ((e->pg[k] + 1) * OSPG > size)
            g->m[k] = 0;
    }
    if (slot && (!e->np || e->pg[0] != 0 || size < OSPG))
        return;
    d.hash = state_hash(g->p, e, &d, g->m);
    d.lo = e->lo;
    d.hi = e->hi;
    sset *s = g->set;
    uint32_t old = sset_insert(s, d.hash, (uint32_t)s->n);
    if (old != UINT32_MAX) {
        sdesc *o = &s->d[old];
        if (rank(e->lo) > rank(o->lo))
            o->lo = e->lo;
        if (rank(e->hi) < rank(o->hi))
            o->hi = e->hi;
        s->dups++;
        return;
    }
    if (s->nm + e->np > s->capm) {
        s->capm = (s->nm + e->np) * 2 + 256;
        s->masks = xrealloc(s->masks, s->capm);
    }
    d.mask_off = (uint32_t)s->nm;
    if (e->np)
        memcpy(s->masks + s->nm, g->m, e->np);
    s->nm += e->np;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->d = xrealloc(s->d, s->cap * sizeof *s->d);
    }
    s->d[s->n++] = d;
}

static uint8_t random_mask(tu_rng *r, uint8_t diff)
{
    return (uint8_t)(tu_rand(r) & diff);
}

/* All states of event k worth checking (randoms: states per cut with
 * many pending pages). */
static void gen_event(sset *set, const replay *p, uint32_t k, tu_rng *r,
                      unsigned randoms)
{
    const event *e = &p->r->ev[k];
    size_t np = e->np;
    uint8_t *all = calloc(np + 1, 1);
    uint8_t *m = calloc(np + 1, 1);
    gen g = {set, p, e, k, calloc(np + 1, 1)};
    if (!all || !m || !g.m)
        abort();
    for (size_t i = 0; i < np; i++)
        all[i] = e->diff[i];
    memset(m, 0, np + 1);
    int grew = e->new_size != e->old_size;
    /* the telling ones */
    gen_add(&g, m, 0, 0, 0, 0, W_NONE);
    gen_add(&g, m, 1, 0, 0, 0, W_NONE);
    gen_add(&g, all, 1, 0, 0, 0, W_ALL);
    if (grew)
        gen_add(&g, all, 0, 0, 0, 0, W_ALL);
    int meta = np && e->pg[0] == 0;
    if (meta) {
        memset(m, 0, np);
        m[0] = all[0];
        gen_add(&g, m, 1, 0, 0, 0, W_META_ONLY);
        gen_add(&g, m, 0, 0, 0, 0, W_META_ONLY);
        memcpy(m, all, np);
        m[0] = 0;
        gen_add(&g, m, 1, 0, 0, 0, W_ALL_BUT_META);
        for (int slot = 1; slot <= 2; slot++) {
            if (!(e->diff[0] >> slot & 1))
                continue;
            memcpy(m, all, np);
            for (int len = 1; len < (int)META_SIZE; len++) {
                gen_add(&g, m, 1, slot, 1, len, W_META_TEAR);
                gen_add(&g, m, 1, slot, 0, len, W_META_TEAR);
            }
            /* and the same tears with nothing else new */
            memset(m, 0, np);
            for (int len = 1; len < (int)META_SIZE; len += 5)
                gen_add(&g, m, 0, slot, 1, len, W_META_TEAR);
        }
    }
    if (np && np <= EXHAUSTIVE) {
        for (unsigned bits = 0; bits < (1u << np); bits++) {
            for (size_t i = 0; i < np; i++)
                m[i] = (bits >> i & 1) ? all[i] : 0;
            gen_add(&g, m, 1, 0, 0, 0, W_SUBSET);
            if (grew)
                gen_add(&g, m, 0, 0, 0, 0, W_SUBSET);
        }
        for (size_t i = 0; i < np; i++)
            for (unsigned t = 1; t < SPP; t++) {
                uint8_t pre = (uint8_t)((1u << t) - 1), suf = (uint8_t)~pre;
                for (int others = 0; others < 2; others++) {
                    for (size_t j = 0; j < np; j++)
                        m[j] = others ? all[j] : 0;
                    m[i] = pre & all[i];
                    gen_add(&g, m, 1, 0, 0, 0, W_PAGE_TEAR);
                    m[i] = suf & all[i];
                    gen_add(&g, m, 1, 0, 0, 0, W_PAGE_TEAR);
                }
            }
    } else if (np) {
        for (size_t i = 0; i < np && np <= 32; i++) {
            memset(m, 0, np);
            m[i] = all[i];
            gen_add(&g, m, 1, 0, 0, 0, W_SINGLE);
            memcpy(m, all, np);
            m[i] = 0;
            gen_add(&g, m, 1, 0, 0, 0, W_SINGLE);
        }
    }
    unsigned nr = np > EXHAUSTIVE ? randoms : randoms / 4;
    for (unsigned t = 0; t < nr && np; t++) {
        for (size_t i = 0; i < np; i++) {
            switch (tu_below(r, 3)) {
            case 0: m[i] = 0; break;
            case 1: m[i] = all[i]; break;
            default: m[i] = random_mask(r, all[i]); break;
            }
        }
        gen_add(&g, m, grew ? (int)tu_below(r, 2) : 1, 0, 0, 0, W_RANDOM);
    }
    free(all);
    free(m);
    free(g.m);
}

static void gen_all(sset *set, const recorder *r, uint64_t seed,
                    unsigned randoms)
{
    replay p;
    replay_init(&p, r, 1);
    tu_rng rng = {seed ^ UINT64_C(0x5eed5eed)};
    for (uint32_t k = 0; k < r->nev; k++) {
        replay_to(&p, k);
        gen_event(set, &p, k, &rng, randoms);
    }
    replay_free(&p);
}

static void describe(const recorder *r, const sset *s, size_t i, char *out,
                     size_t outlen)
{
    const sdesc *d = &s->d[i];
    const event *e = &r->ev[d->ev];
    const uint8_t *m = s->masks + d->mask_off;
    int o = say(out, outlen,
                     "state %zu: %s of event %u (%s at io call %" PRIu64
                     ", acked %s%" PRId64 " attempted %" PRId64
                     "), size %" PRIu64 " of %" PRIu64 "->%" PRIu64
                     ", pages",
                     i, what_name(d->what), d->ev, ev_name(e->label), e->call,
                     d->lo == NONE ? "none " : "",
                     d->lo == NONE ? (int64_t)-1 : (int64_t)d->lo,
                     d->hi == NONE ? (int64_t)-1 : (int64_t)d->hi,
                     state_size(e, d), e->old_size, e->new_size);
    for (size_t k = 0; k < e->np && o > 0 && (size_t)o < outlen - 40; k++) {
        const char *st = m[k] == 0 ? "old"
                         : m[k] == e->diff[k] ? "new"
                                              : "torn";
        o += say(out + o, outlen - (size_t)o, " %" PRIu64 ":%s", e->pg[k],
                      st);
        if (m[k] && m[k] != e->diff[k] && (size_t)o < outlen - 8)
            o += say(out + o, outlen - (size_t)o, "(%02x/%02x)", m[k],
                          e->diff[k]);
    }
    if (d->tear_slot && o > 0 && (size_t)o < outlen)
        say(out + o, outlen - (size_t)o,
                 "; meta slot %u torn: %s %u of %u bytes new",
                 d->tear_slot - 1u, d->tear_pre ? "first" : "last",
                 d->tear_len, META_SIZE);
}

/* ---- files --------------------------------------------------------------- */

static bool is_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w)
            return false;
    }
    return true;
}

static int write_image(const char *path, const uint8_t *img, uint64_t size)
{
    /* unlink, not O_TRUNC: ext4 flushes a file truncated to 0 on close */
    if (unlink(path) != 0 && errno != ENOENT)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    for (uint64_t off = 0; off < size; off += OSPG) {
        uint64_t n = size - off < OSPG ? size - off : OSPG;
        if (n == OSPG && is_zero(img + off, OSPG))
            continue;
        if (pwrite(fd, img + off, n, (off_t)off) != (ssize_t)n) {
            close(fd);
            return -1;
        }
    }
    int rc = ftruncate(fd, (off_t)size);
    close(fd);
    return rc;
}

/* ---- the workload -------------------------------------------------------- */

typedef struct run {
    const cfg *c;
    uint64_t seed;
    char path[512];
    recorder rec;
    cs_model *models; /* models[T]: the contents after commit T */
    size_t nmodels;
    unsigned commits, aborts, fulls;
} run;

static void ops_view(const cs_ops *ops, size_t from, size_t to, cs_ops *v)
{
    v->o = ops->o + from;
    v->n = to - from;
    v->cap = v->n;
}

static void set_model(run *w, uint64_t t, const cs_model *m)
{
    if (t >= w->nmodels) {
        size_t n = t + 1;
        w->models = xrealloc(w->models, n * sizeof *w->models);
        for (size_t i = w->nmodels; i < n; i++)
            cs_model_init(&w->models[i]);
        w->nmodels = n;
    }
    cs_model_copy(&w->models[t], m);
}

static void run_workload(run *w)
{
    const cfg *c = w->c;
    bonsai_options o;
    cfg_options(c, &o);
    cs_params prm;
    cfg_params(c, &prm);
    tu_rng rng = {w->seed};
    rec_init(&w->rec);
    recorder *rec = &w->rec;
    bonsai_db *db = NULL;
    TU_OK(bonsai_open_io(w->path, &o, &rec->x.io, &db));
    cr_assert(rec->err[0] == 0, "recorder: %s", rec->err);
    cs_model m, pre;
    cs_model_init(&m);
    cs_model_init(&pre);
    set_model(w, 0, &m);
    rec->lo = rec->hi = 0;
    cs_ops ops = {0}, view;
    char why[512];
    uint64_t t = 0; /* last commit */
    for (unsigned n = 0; n < c->txns; n++) {
        if (n == c->txns / 2) { /* a reopen in the middle */
            TU_OK(bonsai_close(db));
            db = NULL;
            TU_OK(bonsai_open_io(w->path, &o, &rec->x.io, &db));
        }
        cs_model_copy(&pre, &m);
        cs_gen(&rng, &prm, &m, &ops);
        bonsai_txn *txn = NULL;
        TU_OK(bonsai_txn_begin(db, 0, &txn));
        size_t cut = ops.n;
        if (tu_chance(&rng, 300))
            cut = (size_t)tu_below(&rng, ops.n + 1);
        ops_view(&ops, 0, cut, &view);
        int rc = cs_apply(db, txn, &view, NULL, why, sizeof why);
        if (rc == 0 && cut < ops.n) {
            rec_observe(rec, EV_MID);
            ops_view(&ops, cut, ops.n, &view);
            rc = cs_apply(db, txn, &view, NULL, why, sizeof why);
        }
        if (rc == BONSAI_FULL) {
            bonsai_txn_abort(txn);
            cs_model_copy(&m, &pre);
            w->fulls++;
            continue;
        }
        cr_assert(rc == 0, "[%s seed=%" PRIu64 "] txn %u: %s", c->name,
                  w->seed, n, why);
        if (tu_chance(&rng, 60)) {
            bonsai_txn_abort(txn);
            cs_model_copy(&m, &pre);
            rec_observe(rec, EV_ABORTED);
            w->aborts++;
            continue;
        }
        rec->hi = t + 1;
        rc = bonsai_txn_commit(txn);
        if (rc == BONSAI_FULL) {
            rec->hi = t;
            cs_model_copy(&m, &pre);
            w->fulls++;
            continue;
        }
        cr_assert(rc == 0, "[%s seed=%" PRIu64 "] commit of txn %" PRIu64
                  " -> %s", c->name, w->seed, t + 1, tu_err(rc));
        t++;
        cr_assert_eq(cs_txn_id(db), t, "txn id %" PRIu64 ", expected %" PRIu64,
                     cs_txn_id(db), t);
        if (c->sync_off)
            rec_observe(rec, EV_COMMITTED); /* nothing was made durable */
        else
            rec->lo = t;
        set_model(w, t, &m);
        w->commits++;
        cr_assert(rec->err[0] == 0, "recorder: %s", rec->err);
    }
    /* a last transaction that never commits, big enough to spill */
    cs_model_copy(&pre, &m);
    cs_params big = prm;
    big.ops_min = big.ops_max = prm.ops_max * 3;
    cs_gen(&rng, &big, &m, &ops);
    bonsai_txn *txn = NULL;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    int rc = cs_apply(db, txn, &ops, NULL, why, sizeof why);
    cr_assert(rc == 0 || rc == BONSAI_FULL, "in-flight txn: %s", why);
    rec_observe(rec, EV_INFLIGHT);
    bonsai_txn_abort(txn);
    TU_OK(bonsai_close(db));
    cr_assert(rec->err[0] == 0, "recorder: %s", rec->err);
    cs_ops_free(&ops);
    free(ops.o);
    cs_model_free(&m);
    cs_model_free(&pre);
}

/* ---- checking one state -------------------------------------------------- */

/*
 * BONSAI_TEST_KNOWN_BUG=1 turns on the cases that fail today:
 *
 *  - meta splice: a crash tears the meta write of commit T byte-wise
 *    (its last bytes new); open rightly picks T-1; the next commit, again
 *    T, writes the same slot and a crash tears it again (its first bytes
 *    new).  The slot now holds the first commit T's meta complete, with
 *    a valid checksum, naming pages the second T has overwritten: open
 *    gives BONSAI_CORRUPT, or contents that were never acknowledged.
 *    Without the flag, nested meta tears after a primary meta tear are
 *    left out (and counted).
 */
static bool known_bug_enabled(void)
{
    /* the bugs these cases found are fixed: they run unless set to 0 */
    const char *s = getenv("BONSAI_TEST_KNOWN_BUG");
    return !(s && strcmp(s, "0") == 0);
}

enum { ST_OK, ST_OPEN_ERR, ST_FAIL };

typedef struct result {
    uint32_t idx;
    int32_t status;
    int64_t j;        /* the commit found */
    uint32_t nested;  /* nested states checked */
    uint32_t nfail;   /* nested states failed */
    uint32_t skipped; /* nested states left out (known bug) */
    uint64_t tolerated; /* verify problems let pass (known issue) */
    char msg[1800];
} result;

/* Opens the state at path and checks it against models[lo..hi] (lo NONE:
 * the creating open had not returned).  *j gets the commit found. */
static int check_file(const run *w, const char *path, uint64_t lo,
                      uint64_t hi, int64_t *j, uint64_t *tol, char *why,
                      size_t whylen)
{
    bonsai_options o;
    cfg_options(w->c, &o);
    bonsai_db *db = NULL;
    *j = -1;
    int rc = bonsai_open(path, &o, &db);
    if (rc) {
        if (lo == NONE && rc == BONSAI_CORRUPT) {
            say(why, whylen, "open -> %s before creation finished",
                     tu_err(rc));
            return ST_OPEN_ERR;
        }
        say(why, whylen, "open -> %s", tu_err(rc));
        return ST_FAIL;
    }
    uint64_t t = cs_txn_id(db);
    uint64_t a = lo == NONE ? 0 : lo, b = hi == NONE ? 0 : hi;
    int st = ST_OK;
    if (t < a || t > b || t >= w->nmodels) {
        say(why, whylen,
                 "last commit is txn %" PRIu64 ", expected %" PRIu64
                 "..%" PRIu64 "%s",
                 t, a, b, t < a ? " (an acknowledged commit is lost)" : "");
        st = ST_FAIL;
    } else {
        char w2[700];
        if (!cs_check(db, &w->models[t], 8, tol, w2, sizeof w2)) {
            say(why, whylen, "txn %" PRIu64 ": contents differ: %s", t,
                     w2);
            st = ST_FAIL;
        }
        *j = (int64_t)t;
    }
    rc = bonsai_close(db);
    if (st == ST_OK && rc) {
        say(why, whylen, "close -> %s", tu_err(rc));
        st = ST_FAIL;
    }
    return st;
}

/* One more commit on the state at path (which holds commit j), through a
 * recorder; then a few crash states inside it and the final file. */
static void nested(const run *w, const char *path, const char *path2,
                   int64_t j, uint64_t seed, const sdesc *primary,
                   result *res)
{
    bonsai_options o;
    cfg_options(w->c, &o);
    cs_params prm;
    cfg_params(w->c, &prm);
    prm.ops_max = 6;
    recorder nr;
    rec_init(&nr);
    nr.lo = nr.hi = (uint64_t)j;
    bonsai_db *db = NULL;
    char why[700];
    int rc = bonsai_open_io(path, &o, &nr.x.io, &db);
    if (rc) {
        say(res->msg, sizeof res->msg, "nested: open -> %s", tu_err(rc));
        res->status = ST_FAIL;
        rec_free(&nr);
        return;
    }
    run w2 = *w; /* models j and j+1 */
    w2.models = NULL;
    w2.nmodels = 0;
    cs_model m;
    cs_model_init(&m);
    cs_model_copy(&m, &w->models[j]);
    tu_rng rng = {seed};
    cs_ops ops = {0};
    cs_gen(&rng, &prm, &m, &ops);
    bonsai_txn *txn = NULL;
    uint64_t target = (uint64_t)j;
    rc = bonsai_txn_begin(db, 0, &txn);
    if (rc == 0)
        rc = cs_apply(db, txn, &ops, NULL, why, sizeof why);
    else
        say(why, sizeof why, "txn_begin -> %s", tu_err(rc));
    if (rc == 0) {
        nr.hi = (uint64_t)j + 1;
        rc = bonsai_txn_commit(txn);
        say(why, sizeof why, "commit -> %s", tu_err(rc));
        if (rc == 0)
            nr.lo = target = (uint64_t)j + 1;
    } else if (txn) {
        bonsai_txn_abort(txn);
    }
    int crc = bonsai_close(db);
    if ((rc && rc != BONSAI_FULL) || crc || nr.err[0]) {
        say(res->msg, sizeof res->msg, "nested commit on txn %" PRId64
                 ": %s; close -> %s %s",
                 j, why, tu_err(crc), nr.err);
        res->status = ST_FAIL;
        goto out;
    }
    /* models: index j and j+1 */
    w2.nmodels = (size_t)j + 2;
    w2.models = xrealloc(NULL, w2.nmodels * sizeof *w2.models);
    memcpy(w2.models, w->models, ((size_t)j + 1) * sizeof *w2.models);
    w2.models[j + 1] = m;
    /* the states */
    sset set;
    memset(&set, 0, sizeof set);
    {
        replay p;
        replay_init(&p, &nr, 1);
        tu_rng r2 = {seed ^ 0x77};
        for (uint32_t k = 0; k < nr.nev; k++) {
            replay_to(&p, k);
            gen_event(&set, &p, k, &r2, 4);
        }
        replay_free(&p);
    }
    replay p;
    replay_init(&p, &nr, 0);
    uint8_t *img = NULL;
    uint64_t cap = 0, size = 0;
    unsigned want = w->c->nested;
    /* pick `want` states at random, in event order: even picks among the
     * states that do not tear a meta slot (they are most of the set) */
    size_t *pick = xrealloc(NULL, (want + 3) * sizeof *pick);
    size_t *elig = xrealloc(NULL, (set.n + 1) * sizeof *elig);
    size_t ne = 0, nt = 0;
    for (size_t i = 0; i < set.n; i++) {
        if (set.d[i].what != W_META_TEAR)
            elig[ne++] = i;
    }
    nt = ne;
    for (size_t i = 0; i < set.n; i++) {
        if (set.d[i].what != W_META_TEAR)
            continue;
        /* KNOWN BUG (see known_bug_enabled): a byte-torn meta write over
         * a slot that an earlier byte-torn write of the same txn id left
         * behind can splice into that earlier, rolled-back meta */
        if (primary->what == W_META_TEAR && !known_bug_enabled()) {
            res->skipped++;
            continue;
        }
        elig[ne++] = i;
    }
    unsigned np = 0;
    for (unsigned t = 0; t < want && ne; t++)
        pick[np++] = elig[(t % 2 == 0 && nt) ? tu_below(&rng, nt)
                                             : tu_below(&rng, ne)];
    free(elig);
    /* the known bug on: after a primary suffix tear of k bytes, the
     * prefix tears of the same slot that complete it (52 - k bytes, and
     * 17: magic, reserved word, txn id and a byte of end) */
    if (known_bug_enabled() && primary->what == W_META_TEAR &&
        !primary->tear_pre)
        for (size_t i = 0; i < set.n && np < want + 2; i++) {
            const sdesc *c = &set.d[i];
            if (c->what == W_META_TEAR && c->tear_pre && c->size_new &&
                c->tear_slot == primary->tear_slot &&
                (c->tear_len == META_SIZE - primary->tear_len ||
                 c->tear_len == 17))
                pick[np++] = i;
        }
    for (unsigned a = 1; a < np; a++) /* insertion sort */
        for (unsigned b = a; b > 0 && pick[b - 1] > pick[b]; b--) {
            size_t x = pick[b];
            pick[b] = pick[b - 1];
            pick[b - 1] = x;
        }
    for (unsigned t = 0; t < np; t++) {
        if (t && pick[t] == pick[t - 1])
            continue;
        const sdesc *d = &set.d[pick[t]];
        const event *e = &nr.ev[d->ev];
        replay_to(&p, d->ev);
        build_image(&p, e, d, set.masks + d->mask_off, &img, &cap, &size);
        if (write_image(path2, img, size) != 0) {
            say(res->msg, sizeof res->msg, "nested: writing %s: %s",
                     path2, strerror(errno));
            res->status = ST_FAIL;
            break;
        }
        int64_t jj;
        int st = check_file(&w2, path2, d->lo, d->hi, &jj, &res->tolerated,
                            why, sizeof why);
        res->nested++;
        if (st != ST_OK) {
            char desc[600];
            describe(&nr, &set, pick[t], desc, sizeof desc);
            say(res->msg, sizeof res->msg,
                     "nested commit on txn %" PRId64 ", nested %s: %s", j,
                     desc, why);
            res->status = ST_FAIL;
            res->nfail++;
            break;
        }
    }
    free(pick);
    free(img);
    replay_free(&p);
    sset_free(&set);
    /* the file as the nested commit left it */
    if (res->status == ST_OK) {
        int64_t jj;
        int st = check_file(&w2, path, target, target, &jj, &res->tolerated,
                            why, sizeof why);
        if (st != ST_OK) {
            say(res->msg, sizeof res->msg,
                     "after the nested commit on txn %" PRId64 ": %s", j, why);
            res->status = ST_FAIL;
        }
    }
    free(w2.models);
out:
    cs_ops_free(&ops);
    free(ops.o);
    cs_model_free(&m);
    rec_free(&nr);
}

static void check_state(const run *w, const sset *s, size_t i,
                        const replay *p, uint8_t **img, uint64_t *cap,
                        const char *path, const char *path2, result *res)
{
    const sdesc *d = &s->d[i];
    const event *e = &w->rec.ev[d->ev];
    uint64_t size;
    memset(res, 0, sizeof *res);
    res->idx = (uint32_t)i;
    build_image(p, e, d, s->masks + d->mask_off, img, cap, &size);
    if (write_image(path, *img, size) != 0) {
        res->status = ST_FAIL;
        say(res->msg, sizeof res->msg, "writing %s: %s", path,
                 strerror(errno));
        return;
    }
    char why[700];
    res->status = check_file(w, path, d->lo, d->hi, &res->j, &res->tolerated,
                             why, sizeof why);
    if (res->status == ST_FAIL) {
        char desc[600];
        describe(&w->rec, s, i, desc, sizeof desc);
        say(res->msg, sizeof res->msg, "%s: %s", desc, why);
        return;
    }
    if (res->status == ST_OK && w->c->nested) {
        nested(w, path, path2, res->j,
               w->seed ^ tu_mix64(i + UINT64_C(0xa5a5a5)), d, res);
        if (res->status == ST_FAIL) {
            char desc[600], m[sizeof res->msg];
            describe(&w->rec, s, i, desc, sizeof desc);
            memcpy(m, res->msg, sizeof m);
            say(res->msg, sizeof res->msg, "after %s: %s", desc, m);
        }
    }
}

/* Checks states [from, n), handing each result to sink. */
typedef bool (*sink_fn)(void *ctx, const result *res);

static void checker(const run *w, const sset *s, size_t from, sink_fn sink,
                    void *ctx)
{
    char path[600], path2[600];
    say(path, sizeof path, "%s.state", w->path);
    say(path2, sizeof path2, "%s.nested", w->path);
    replay p;
    replay_init(&p, &w->rec, 0);
    uint8_t *img = NULL;
    uint64_t cap = 0;
    result *res = xrealloc(NULL, sizeof *res);
    for (size_t i = from; i < s->n; i++) {
        replay_to(&p, s->d[i].ev);
        check_state(w, s, i, &p, &img, &cap, path, path2, res);
        if (!sink(ctx, res))
            break;
    }
    free(res);
    free(img);
    replay_free(&p);
}

static bool pipe_sink(void *ctx, const result *res)
{
    int fd = *(int *)ctx;
    return write(fd, res, sizeof *res) == (ssize_t)sizeof *res;
}

#define MAX_REPORTED 6

typedef struct tally {
    const sset *set;
    uint64_t ok, open_err, failed, nested, skipped, crashed, tolerated;
    uint64_t by_what[W_SINGLE + 1];
    char reports[MAX_REPORTED][sizeof(((result *)0)->msg) + 100];
    unsigned nrep;
    size_t next; /* the state after the last result */
} tally;

static void tally_report(tally *t, const char *msg)
{
    t->failed++;
    if (t->nrep < MAX_REPORTED)
        say(t->reports[t->nrep++], sizeof t->reports[0], "%s", msg);
}

static bool tally_sink(void *ctx, const result *res)
{
    tally *t = ctx;
    t->next = res->idx + 1;
    t->by_what[t->set->d[res->idx].what]++;
    t->nested += res->nested;
    t->skipped += res->skipped;
    t->tolerated += res->tolerated;
    if (res->status == ST_OK)
        t->ok++;
    else if (res->status == ST_OPEN_ERR)
        t->open_err++;
    else
        tally_report(t, res->msg);
    return true;
}

static bool read_full(int fd, void *buf, size_t n)
{
    uint8_t *b = buf;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        b += r;
        n -= (size_t)r;
    }
    return true;
}

/* ---- the test ------------------------------------------------------------ */


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void run_config(const cfg *c0, uint64_t default_seed)
{
    cr_assert_eq(sysconf(_SC_PAGESIZE), OSPG, "these tests assume 4 KiB OS "
                 "pages");
    cfg c = *c0;
    c.txns = (unsigned)tu_scaled(c.txns, 8);
    c.randoms = (unsigned)tu_scaled(c.randoms, 4);
    if (tu_scale() < 1 && c.nested > 1)
        c.nested = c.nested / 2;
    double t0 = now_s();
    run w;
    memset(&w, 0, sizeof w);
    w.c = &c;
    w.seed = tu_seed(c.name, default_seed);
    say(w.path, sizeof w.path, "%s", tu_path(c.name));
    run_workload(&w);
    double t1 = now_s();

    sset set;
    memset(&set, 0, sizeof set);
    gen_all(&set, &w.rec, w.seed, c.randoms);
    cr_assert(set.n > 0, "no crash states");
    double t2 = now_s();

    tally *ty = xrealloc(NULL, sizeof *ty);
    memset(ty, 0, sizeof *ty);
    ty->set = &set;
    size_t from = 0;
    /* A forked checker survives a crash in the library and reports the
     * state.  Under ASan the checks run in this process instead: LeakSan
     * cannot check a forked child of this process (it would report the
     * parent's thread as not suspended), and at its exit here it sees
     * every path the checks took. */
    if (cs_asan()) {
        checker(&w, &set, 0, tally_sink, ty);
        from = set.n;
    }
    while (from < set.n) {
        int pfd[2];
        cr_assert(pipe(pfd) == 0, "pipe: %s", strerror(errno));
        fflush(NULL);
        pid_t pid = fork();
        cr_assert(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            close(pfd[0]);
            checker(&w, &set, from, pipe_sink, &pfd[1]);
            close(pfd[1]);
            _exit(0);
        }
        close(pfd[1]);
        result *res = xrealloc(NULL, sizeof *res);
        ty->next = from;
        while (read_full(pfd[0], res, sizeof *res))
            tally_sink(ty, res);
        free(res);
        close(pfd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        size_t next = ty->next;
        if (next < set.n) {
            /* the checker died at state `next` */
            ty->crashed++;
            char desc[600], msg[800];
            describe(&w.rec, &set, next, desc, sizeof desc);
            say(msg, sizeof msg, "the checker died (%s %d) on %s",
                WIFSIGNALED(status) ? "signal" : "exit",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                desc);
            tally_report(ty, msg);
            next++;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            char msg[100];
            say(msg, sizeof msg, "the checker ended with status 0x%x",
                status);
            tally_report(ty, msg);
        }
        from = next;
    }
    uint64_t ok = ty->ok, open_err = ty->open_err, failed = ty->failed;
    uint64_t nested_n = ty->nested, skipped = ty->skipped;
    uint64_t *by_what = ty->by_what;
    unsigned nrep = ty->nrep;
    char (*reports)[sizeof ty->reports[0]] = ty->reports;
    double t3 = now_s();
    cr_log_info("crash[%s]: seed=%" PRIu64 " %u commits %u aborts %u full, "
                "%zu cuts; %zu distinct crash states (%" PRIu64
                " duplicates skipped) + %" PRIu64 " nested: %" PRIu64
                " ok, %" PRIu64 " open refused before creation, %" PRIu64
                " failed; verify: %s; %.1fs workload, %.1fs gen, %.1fs check",
                c.name, w.seed, w.commits, w.aborts, w.fulls, w.rec.nev,
                set.n, set.dups, nested_n, ok, open_err, failed,
                cs_have_verify() ? "bonsai_verify"
                                 : "not linked (full reads only)",
                t1 - t0, t2 - t1, t3 - t2);
    cr_log_info("crash[%s]: states by kind: none %" PRIu64 ", all %" PRIu64
                ", meta only %" PRIu64 ", all but meta %" PRIu64
                ", meta tears %" PRIu64 ", subsets %" PRIu64
                ", page tears %" PRIu64 ", random %" PRIu64
                ", single page %" PRIu64,
                c.name, by_what[W_NONE], by_what[W_ALL], by_what[W_META_ONLY],
                by_what[W_ALL_BUT_META], by_what[W_META_TEAR],
                by_what[W_SUBSET], by_what[W_PAGE_TEAR], by_what[W_RANDOM],
                by_what[W_SINGLE]);
    printf("crash[%s]: %zu crash states + %" PRIu64 " nested checked, %" PRIu64
           " failed\n",
           c.name, set.n, nested_n, failed);
    fflush(stdout);
    for (unsigned i = 0; i < nrep; i++)
        cr_log_error("crash[%s] seed=%" PRIu64 ": %s", c.name, w.seed,
                     reports[i]);
    if (ty->tolerated)
        cr_log_info("crash[%s]: KNOWN ISSUE: %" PRIu64 " times bonsai_verify reported the "
                    "meta slot the store did not open from as invalid (a "
                    "torn or lost meta write, which recovery expects): let "
                    "pass, BONSAI_TEST_KNOWN_BUG=1 fails on it",
                    c.name, ty->tolerated);
    if (skipped)
        cr_log_info("crash[%s]: KNOWN BUG: %" PRIu64 " nested meta tears after a primary "
                    "meta tear left out: known bug (meta splice), "
                    "BONSAI_TEST_KNOWN_BUG=1 runs them",
                    c.name, skipped);
    cr_assert(failed == 0,
              "crash[%s] seed=%" PRIu64 ": %" PRIu64 " of %zu crash states "
              "failed (first: %s)",
              c.name, w.seed, failed, set.n, nrep ? reports[0] : "?");

    free(ty);
    sset_free(&set);
    rec_free(&w.rec);
    for (size_t i = 0; i < w.nmodels; i++)
        cs_model_free(&w.models[i]);
    free(w.models);
}

/* name, page, codec, node_bytes, node_entries, max_size, write cache,
 * txns, randoms per cut, nested states per state, sync off */
#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)

Test(crash, p512_plain)
{
    cfg c = {"p512-plain", 512, BONSAI_COMPRESS_NONE, 512, 32, 384 * KIB,
             4 * KIB, 60, 24, 2, 0};
    run_config(&c, 1001);
}

Test(crash, p4096_plain)
{
    cfg c = {"p4096-plain", 4096, BONSAI_COMPRESS_NONE, 1024, 64, 1024 * KIB,
             32 * MIB, 60, 24, 2, 0};
    run_config(&c, 1002);
}

Test(crash, p512_lz4)
{
    cfg c = {"p512-lz4", 512, BONSAI_COMPRESS_LZ4, 1024, 64, 384 * KIB,
             8 * KIB, 60, 24, 2, 0};
    run_config(&c, 1003);
}

Test(crash, p4096_zlib)
{
    cfg c = {"p4096-zlib", 4096, BONSAI_COMPRESS_ZLIB, 2048, 4096, 1024 * KIB,
             16 * KIB, 60, 24, 2, 0};
    run_config(&c, 1004);
}

/* the smallest page: several node images share one 512-byte sector, so a
 * torn sector may hold parts of a new image beside a committed one */
Test(crash, p64_zlib)
{
    cfg c = {"p64-zlib", 64, BONSAI_COMPRESS_ZLIB, 512, 32, 256 * KIB,
             4 * KIB, 60, 24, 2, 0};
    run_config(&c, 1007);
}

/*
 * KNOWN BUG (doc): bonsai.h says of the sync option "0 = leave it to the
 * OS (a crash may lose recent commits but never corrupts the file)".
 * Without the syncs nothing orders the meta slot after the nodes it
 * names, so a crash can keep the new meta and lose nodes: open or verify
 * then fails.  format.md says "may lose or tear the commit".  Runs only
 * with BONSAI_TEST_KNOWN_BUG=1 (and fails); any commit since creation is
 * accepted as the state found.
 */
Test(crash, sync_off_never_corrupts)
{
    const char *claim = getenv("BONSAI_TEST_SYNC_OFF_CLAIM");
    if (!(claim && *claim && strcmp(claim, "0") != 0)) {
        cr_log_info("crash[sync-off]: not run: bonsai.h no longer claims a "
                    "store with sync off survives a crash (it may not, as "
                    "with LMDB's MDB_NOSYNC); BONSAI_TEST_SYNC_OFF_CLAIM=1 "
                    "shows how it fails");
        return;
    }
    cfg c = {"sync-off", 512, BONSAI_COMPRESS_NONE, 512, 32, 384 * KIB,
             4 * KIB, 20, 8, 0, 1};
    run_config(&c, 1006);
}

/* the default 1 MiB growth steps (max_size large) */
Test(crash, p512_lz4_big_growth)
{
    cfg c = {"p512-lz4-grow", 512, BONSAI_COMPRESS_LZ4, 512, 4096,
             64 * MIB, 32 * MIB, 30, 16, 1, 0};
    run_config(&c, 1005);
}

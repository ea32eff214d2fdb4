/* SPDX-License-Identifier: MIT */
/*
 * test_kill.c - process death: a forked writer runs a seeded workload of
 * small transactions on a store file and reports each acknowledged commit
 * through a pipe; it is killed with SIGKILL at a random moment (by the
 * parent, after a random number of acknowledgements plus a random delay)
 * or at a named failpoint raised by its own io (crashsim.h's cs_io):
 *
 *   before-data-sync   at the k-th commit's first fsync, before it
 *   before-meta-write  at its meta slot pwrite, before it
 *   torn-meta-write    half way through that pwrite (a prefix written)
 *   before-meta-sync   at its second fsync, before it
 *   after-meta-sync    after that fsync, before commit returns
 *   before-growth      at a fallocate that grows the file, before it
 *   after-growth       after that fallocate, before the new part is mapped
 *
 * Then the parent reopens the file read-write with the default io (a new
 * writer must not be blocked by the dead one's lock), and checks: the last
 * commit is an acknowledged one or at most one more (for failpoints: the
 * exact one the protocol implies), the contents equal the model of that
 * commit (crashsim's cs_check), and the store takes one more commit.  The
 * writer's io skips real fsyncs: the page cache survives a process death.
 *
 * The parent replays the workload on a model (cs_gen depends only on the
 * seed and the model), so the child reports nothing but acknowledgements.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bonsai.h"
#include "crashsim.h"
#include "io.h"
#include "util.h"

/* .timeout: a hang guard, not a timing assertion */
TestSuite(kill, .init = tu_setup, .fini = tu_teardown, .timeout = 600);

#define TXNS 8               /* transactions a writer runs */
#define TXNS_RANDOM 400      /* ... when it is killed at a random moment */
#define RANDOM_US 2500       /* within this many microseconds of its start */
#define KIB (UINT64_C(1) << 10)
#define RESET_USED (160 * KIB) /* start a fresh file beyond this */

enum fp {
    FP_RANDOM,
    FP_DATA_SYNC,
    FP_META_WRITE,
    FP_META_TORN,
    FP_META_SYNC,
    FP_AFTER_META_SYNC,
    FP_GROW_BEFORE,
    FP_GROW_AFTER,
    FP_N
};

static const char *fp_name(int f)
{
    static const char *const n[FP_N] = {
        "random",          "before-data-sync", "before-meta-write",
        "torn-meta-write", "before-meta-sync", "after-meta-sync",
        "before-growth",   "after-growth"};
    return f >= 0 && f < FP_N ? n[f] : "?";
}

__attribute__((format(printf, 3, 4))) static int say(char *buf, size_t n,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- the writer ---------------------------------------------------------- */

typedef struct fpctx {
    int fp;
    unsigned k;         /* the k-th commit (or fallocate) */
    unsigned tear;      /* bytes of a torn meta write */
    unsigned commits;   /* data syncs seen */
    unsigned grows;     /* fallocates seen */
    int after_meta;     /* a meta pwrite since the last fsync */
} fpctx;

static void die(void)
{
    kill(getpid(), SIGKILL);
    for (;;)
        pause();
}

static int fp_hook(void *ctx, const cs_call *c, int before, int rc)
{
    fpctx *f = ctx;
    (void)rc;
    switch (c->op) {
    case CS_FSYNC:
        if (before) {
            int meta = f->after_meta;
            f->after_meta = 0;
            if (!meta) {
                f->commits++;
                if (f->fp == FP_DATA_SYNC && f->commits == f->k)
                    die();
            } else if (f->fp == FP_META_SYNC && f->commits == f->k) {
                die();
            }
            return CS_SKIP; /* a process death loses no page cache */
        }
        break;
    case CS_PWRITE:
        if (before && c->len == 52 && (c->off == 512 || c->off == 1024)) {
            f->after_meta = 1;
            if (f->fp == FP_META_WRITE && f->commits == f->k)
                die();
            if (f->fp == FP_META_TORN && f->commits == f->k) {
                const bx_io *d = bx_io_default();
                d->pwrite(d->ctx, c->fd, c->buf, f->tear, c->off);
                die();
            }
        }
        break;
    case CS_FALLOCATE:
        if (before) {
            f->grows++;
            if (f->fp == FP_GROW_BEFORE && f->grows == f->k)
                die();
        } else if (f->fp == FP_GROW_AFTER && f->grows == f->k) {
            die();
        }
        break;
    default:
        break;
    }
    return CS_GO;
}

enum msg_type { M_ACK, M_ERR, M_DONE };

typedef struct msg {
    int32_t type;
    int32_t val;
    char text[240];
} msg;

static void send_msg(int fd, int type, int val, const char *text)
{
    msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.val = val;
    if (text)
        say(m.text, sizeof m.text, "%s", text);
    ssize_t n = write(fd, &m, sizeof m);
    (void)n;
}

typedef struct round {
    const char *path;
    const bonsai_options *opts;
    const cs_params *prm;
    const cs_model *base; /* the contents when the round starts */
    uint64_t seed;
    int fp;
    unsigned k, tear;
    unsigned txns;
} round_t;

static void writer(const round_t *r, int fd)
{
    fpctx f = {r->fp, r->k, r->tear, 0, 0, 0};
    cs_io x;
    cs_io_init(&x, bx_io_default(), fp_hook, &f);
    bonsai_db *db = NULL;
    char why[200];
    int rc = bonsai_open_io(r->path, r->opts, &x.io, &db);
    if (rc) {
        say(why, sizeof why, "writer: open -> %s", tu_err(rc));
        send_msg(fd, M_ERR, rc, why);
        _exit(3);
    }
    cs_model m;
    cs_model_init(&m);
    cs_model_copy(&m, r->base);
    tu_rng rng = {r->seed};
    cs_ops ops = {0};
    for (int i = 1; i <= (int)r->txns; i++) {
        cs_gen(&rng, r->prm, &m, &ops);
        bonsai_txn *txn = NULL;
        rc = bonsai_txn_begin(db, 0, &txn);
        if (rc == 0)
            rc = cs_apply(db, txn, &ops, NULL, why, sizeof why);
        else
            say(why, sizeof why, "txn_begin -> %s", tu_err(rc));
        if (rc == 0) {
            f.after_meta = 0;
            rc = bonsai_txn_commit(txn);
            say(why, sizeof why, "commit -> %s", tu_err(rc));
            if (rc == 0 && f.fp == FP_AFTER_META_SYNC && f.commits == f.k)
                die(); /* durable, not yet acknowledged */
        } else {
            bonsai_txn_abort(txn);
        }
        if (rc) {
            char t[240];
            say(t, sizeof t, "writer txn %d: %s", i, why);
            send_msg(fd, M_ERR, rc, t);
            _exit(3);
        }
        send_msg(fd, M_ACK, i, NULL);
    }
    rc = bonsai_close(db);
    send_msg(fd, rc ? M_ERR : M_DONE, rc, rc ? "writer: close failed" : NULL);
    _exit(0); /* no cleanup: the process ends here */
}

/* ---- the parent ---------------------------------------------------------- */

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static bool read_msg(int fd, msg *m)
{
    uint8_t *b = (uint8_t *)m;
    size_t n = sizeof *m;
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

typedef struct kstats {
    unsigned kills, by_fp[FP_N], finished, rounds, resets;
    uint64_t tolerated; /* verify problems let pass */
} kstats;

static void run_kills(const char *name, uint32_t page_size, unsigned codec,
                      unsigned want_kills, uint64_t default_seed)
{
    uint64_t seed = tu_seed(name, default_seed);
    tu_rng rng = {seed};
    const char *path = tu_path(name);
    bonsai_options o;
    bonsai_options_init(&o);
    o.page_size = page_size;
    o.compression = codec;
    o.node_bytes = 512;
    o.node_entries = 32;
    o.max_size = 512 * KIB;
    o.write_cache_bytes = 4 * KIB;
    cs_params prm;
    cs_params_small(&prm);
    prm.ops_max = 6;
    prm.big_min = o.node_bytes / 4 + 1;
    prm.big_max = 1200;
    prm.soft_entries = 400;

    cs_model base, ma, mb;
    cs_model_init(&base);
    cs_model_init(&ma);
    cs_model_init(&mb);
    uint64_t t = 0; /* last commit of the file */
    bool fresh = true;
    kstats ks;
    memset(&ks, 0, sizeof ks);
    unsigned max_rounds = want_kills * 2 + 50;
    cs_ops ops = {0};
    char why[700];

    while (ks.kills < want_kills && ks.rounds < max_rounds) {
        /* growth failpoints: often on a fresh file, which grows 4 KiB at
         * a time under this cap */
        if (ks.rounds % FP_N == FP_GROW_BEFORE ||
            ks.rounds % FP_N == FP_GROW_AFTER)
            fresh = true;
        if (fresh) {
            unlink(path);
            bonsai_db *db = tu_open(path, &o);
            TU_OK(bonsai_close(db));
            cs_model_free(&base);
            t = 0;
            fresh = false;
            ks.resets++;
        }
        unsigned rno = ks.rounds++;
        round_t r = {path, &o, &prm, &base, seed ^ tu_mix64(rno + 1),
                     0, 0, 0, TXNS};
        r.fp = (int)(rno % FP_N);
        r.k = (unsigned)tu_range(&rng, 1, TXNS);
        r.tear = (unsigned)tu_range(&rng, 1, 51);
        if (r.fp == FP_GROW_BEFORE || r.fp == FP_GROW_AFTER)
            r.k = (unsigned)tu_range(&rng, 1, 2);
        if (r.fp == FP_RANDOM)
            r.txns = TXNS_RANDOM;
        uint64_t delay = tu_below(&rng, RANDOM_US);

        int pfd[2];
        cr_assert(pipe(pfd) == 0, "pipe: %s", strerror(errno));
        fflush(NULL);
        pid_t pid = fork();
        cr_assert(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            close(pfd[0]);
            writer(&r, pfd[1]);
            _exit(0);
        }
        close(pfd[1]);
        unsigned acks = 0;
        bool done = false;
        char err[240] = "";
        msg m;
        if (r.fp == FP_RANDOM) {
            sleep_us(delay);
            kill(pid, SIGKILL);
        }
        while (read_msg(pfd[0], &m)) {
            if (m.type == M_ACK) {
                cr_assert_eq((unsigned)m.val, acks + 1, "ack out of order");
                acks++;
            } else if (m.type == M_DONE) {
                done = true;
            } else {
                say(err, sizeof err, "%s (%s)", m.text, tu_err(m.val));
            }
        }
        close(pfd[0]);
        int status = 0;
        cr_assert(waitpid(pid, &status, 0) == pid, "waitpid");
        cr_assert(err[0] == 0, "[%s seed=%" PRIu64 " round %u %s k=%u] %s",
                  name, seed, rno, fp_name(r.fp), r.k, err);
        bool died = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        cr_assert(died || (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                           done),
                  "[%s round %u] writer ended with status 0x%x", name, rno,
                  status);
        if (died) {
            ks.kills++;
            ks.by_fp[r.fp]++;
        } else {
            ks.finished++;
        }

        /* the models after `acks` and `acks + 1` of this round's txns */
        cs_model_copy(&ma, &base);
        tu_rng wr = {r.seed};
        for (unsigned i = 0; i < acks; i++)
            cs_gen(&wr, &prm, &ma, &ops);
        cs_model_copy(&mb, &ma);
        if (acks < r.txns)
            cs_gen(&wr, &prm, &mb, &ops);

        /* what the file may hold */
        uint64_t lo = t + acks, hi = acks < r.txns ? lo + 1 : lo;
        if (died && r.fp != FP_RANDOM) {
            cr_assert_eq(acks, r.fp >= FP_GROW_BEFORE ? acks : r.k - 1,
                         "[%s round %u %s k=%u] %u acks before the failpoint",
                         name, rno, fp_name(r.fp), r.k, acks);
            if (r.fp == FP_META_SYNC || r.fp == FP_AFTER_META_SYNC)
                lo = hi; /* the meta reached the page cache */
            else
                hi = lo; /* the meta slot was not (validly) written */
        }

        bonsai_db *db = NULL;
        int rc = bonsai_open(path, &o, &db);
        cr_assert(rc == 0,
                  "[%s seed=%" PRIu64 " round %u, %s k=%u tear=%u, %u acks] "
                  "reopen after the writer died -> %s",
                  name, seed, rno, fp_name(r.fp), r.k, r.tear, acks,
                  tu_err(rc));
        uint64_t now = cs_txn_id(db);
        cr_assert(now >= lo && now <= hi,
                  "[%s seed=%" PRIu64 " round %u, %s k=%u tear=%u, %u acks] "
                  "last commit %" PRIu64 ", expected %" PRIu64 "..%" PRIu64
                  "%s",
                  name, seed, rno, fp_name(r.fp), r.k, r.tear, acks, now, lo,
                  hi, now < t + acks ? " (an acknowledged commit is lost)" : "");
        const cs_model *want = now == t + acks ? &ma : &mb;
        bool same = cs_check(db, want, 4, &ks.tolerated, why, sizeof why);
        cr_assert(same,
                  "[%s seed=%" PRIu64 " round %u, %s k=%u tear=%u, %u acks] "
                  "commit %" PRIu64 ": %s",
                  name, seed, rno, fp_name(r.fp), r.k, r.tear, acks, now, why);
        cs_model_copy(&base, want);
        t = now;

        /* the new writer writes */
        bonsai_map u = NULL;
        rc = bonsai_map_open(db, NULL, "u", &u, NULL);
        if (rc == 0) {
            uint64_t key = UINT64_C(1000000) + rno;
            rc = bonsai_put_u64(NULL, u, key, NULL, 0);
            if (rc == 0) {
                tm_put(&base.m[0], &key, 8, NULL, 0);
                t++;
            }
        } else if (rc == BONSAI_NOTFOUND && !base.live[0]) {
            rc = 0; /* nothing committed yet */
        }
        cr_assert(rc == 0, "[%s round %u] a put after the reopen -> %s", name,
                  rno, tu_err(rc));
        bonsai_stat st;
        TU_OK(bonsai_db_stat(db, &st));
        TU_OK(bonsai_close(db));
        if (st.bytes_used > RESET_USED)
            fresh = true;
    }
    cs_ops_free(&ops);
    free(ops.o);
    cs_model_free(&base);
    cs_model_free(&ma);
    cs_model_free(&mb);
    cr_log_info("kill[%s]: seed=%" PRIu64 " %u rounds, %u kills (random %u, "
                "before-data-sync %u, before-meta-write %u, torn-meta-write "
                "%u, before-meta-sync %u, after-meta-sync %u, before-growth "
                "%u, after-growth %u), %u writers finished first, %u fresh "
                "files",
                name, seed, ks.rounds, ks.kills, ks.by_fp[FP_RANDOM],
                ks.by_fp[FP_DATA_SYNC], ks.by_fp[FP_META_WRITE],
                ks.by_fp[FP_META_TORN], ks.by_fp[FP_META_SYNC],
                ks.by_fp[FP_AFTER_META_SYNC], ks.by_fp[FP_GROW_BEFORE],
                ks.by_fp[FP_GROW_AFTER], ks.finished, ks.resets);
    if (ks.tolerated)
        cr_log_info("kill[%s]: KNOWN ISSUE: %" PRIu64 " times bonsai_verify reported the "
                    "meta slot the store did not open from as invalid (a "
                    "torn meta write, which recovery expects): let pass, "
                    "BONSAI_TEST_KNOWN_BUG=1 fails on it",
                    name, ks.tolerated);
    printf("kill[%s]: %u kills in %u rounds\n", name, ks.kills, ks.rounds);
    fflush(stdout);
    cr_assert(ks.kills >= want_kills, "only %u kills in %u rounds", ks.kills,
              ks.rounds);
}

Test(kill, p512_plain)
{
    run_kills("kill-p512", 512, BONSAI_COMPRESS_NONE,
              (unsigned)tu_scaled(300, 40), 2001);
}

Test(kill, p4096_lz4)
{
    run_kills("kill-p4096-lz4", 4096, BONSAI_COMPRESS_LZ4,
              (unsigned)tu_scaled(300, 40), 2002);
}

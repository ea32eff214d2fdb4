/* SPDX-License-Identifier: MIT */
/*
 * test_badinput.c - bad input, one test per case, each answered with its
 * exact BONSAI_* code, and each checking that nothing committed before is
 * lost: the store still opens (or, after damage to the file, the file is
 * left byte for byte as it was) and reads what was committed.
 *
 * The cases are those of README's "What bonsai does with bad input":
 * keys too long or empty, a value too big, a full map, no memory (malloc
 * failing, through this binary's own malloc in the plain build; an
 * address space too small for the cap), a full disk (an injected ENOSPC,
 * and a real one on a small tmpfs mounted in a private mount namespace:
 * skipped, with a warning, only where mounting is not permitted), a
 * truncated file, a wrong magic, an unknown version, a store at the last
 * transaction id (2^64-1, forged in its meta slot), an unwritable file
 * opened for writing (as root too: the child drops CAP_DAC_OVERRIDE), a
 * read-only handle asked to write, a second writer process, a path that
 * is a directory, a FIFO or a device, NULL handles, a dropped map's
 * handle, a read snapshot asked to write, transactions in no-transaction
 * mode and a cursor used after its transaction ended.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bonsai.h"
#include "checksum.h"
#include "crashsim.h"
#include "io.h"
#include "meta.h"
#include "util.h"

/* .timeout: a hang guard, not a timing assertion */
TestSuite(badinput, .init = tu_setup, .fini = tu_teardown, .timeout = 300);

#if defined(__SANITIZE_ADDRESS__)
#define BI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BI_ASAN 1
#endif
#endif
#ifndef BI_ASAN
#define BI_ASAN 0
#endif

/* ---- a store with known contents ------------------------------------------ */

#define NCOMMITTED 500u

static bonsai_options plain_opts(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    return o;
}

/* The value of key i: "value-<i>" */
static bonsai_val value_of(uint64_t i, char *buf, size_t n)
{
    int len = snprintf(buf, n, "value-%" PRIu64, i);
    return tu_val(buf, (size_t)len);
}

/* Puts keys [from, to) into map "u" of db in one transaction (or
 * directly in no-transaction mode). */
static void put_range(bonsai_db *db, bonsai_map m, uint64_t from, uint64_t to)
{
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    bonsai_txn *t = NULL;
    if (st.transactions)
        TU_OK(bonsai_txn_begin(db, 0, &t));
    for (uint64_t i = from; i < to; i++) {
        char buf[32];
        bonsai_val v = value_of(i, buf, sizeof buf);
        TU_OK(bonsai_put_u64(t, m, i, &v, 0));
    }
    if (t)
        TU_OK(bonsai_txn_commit(t));
}

/* Asserts that map "u" holds exactly keys [0, n) with their values. */
static void expect_range(bonsai_txn *t, bonsai_map m, uint64_t n)
{
    uint64_t count = UINT64_MAX;
    TU_OK(bonsai_count(t, m, &count));
    cr_assert_eq(count, n, "map holds %" PRIu64 " entries, expected %" PRIu64,
                 count, n);
    for (uint64_t i = 0; i < n; i++) {
        char buf[32];
        bonsai_val want = value_of(i, buf, sizeof buf), got = {0, NULL};
        int rc = bonsai_get_u64(t, m, i, &got);
        cr_assert(rc == 0, "key %" PRIu64 " -> %s", i, tu_err(rc));
        cr_assert(got.size == want.size &&
                      memcmp(got.data, want.data, want.size) == 0,
                  "key %" PRIu64 " holds the wrong value", i);
    }
}

/* A file store whose map "u" holds keys [0, n). */
static const char *make_store(const char *name, uint64_t n)
{
    const char *path = tu_path(name);
    bonsai_options o = plain_opts();
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    put_range(db, m, 0, n);
    TU_OK(bonsai_close(db));
    return path;
}

static void verify_clean(bonsai_db *db)
{
    uint64_t problems = UINT64_MAX;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    cr_assert_eq(problems, 0, "bonsai_verify found %" PRIu64 " problems",
                 problems);
}

/* Reopens path (read-write unless read_only) and asserts it holds keys
 * [0, n) and passes bonsai_verify. */
static void expect_store(const char *path, uint64_t n, int read_only)
{
    bonsai_options o = plain_opts();
    o.read_only = read_only;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    expect_range(NULL, m, n);
    verify_clean(db);
    TU_OK(bonsai_close(db));
}

static uint8_t *slurp(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
    struct stat st;
    cr_assert(fstat(fd, &st) == 0);
    *n = (size_t)st.st_size;
    uint8_t *p = malloc(*n ? *n : 1);
    cr_assert(p != NULL);
    cr_assert(pread(fd, p, *n, 0) == (ssize_t)*n);
    close(fd);
    return p;
}

static void spill(const char *path, const uint8_t *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
    cr_assert(write(fd, p, n) == (ssize_t)n);
    close(fd);
}

/* Asserts that opening path (read-write, then read-only) fails with want
 * and leaves the file exactly as it was. */
static void expect_refused(const char *path, int want, const char *what)
{
    size_t n0, n1;
    uint8_t *before = slurp(path, &n0);
    for (int ro = 0; ro <= 1; ro++) {
        bonsai_options o = plain_opts();
        o.read_only = ro;
        bonsai_db *db = NULL;
        int rc = bonsai_open(path, &o, &db);
        cr_assert(rc == want, "%s: %s open -> %s, expected %s", what,
                  ro ? "read-only" : "read-write", tu_err(rc), tu_err(want));
        cr_assert(db == NULL);
    }
    uint8_t *after = slurp(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "%s: a refused open changed the file", what);
    free(before);
    free(after);
}

/* ---- running a function in a child process --------------------------------- */

typedef struct child_result {
    int rc;        /* what the function returned */
    char msg[512]; /* what it said */
    int64_t data[4];
} child_result;

typedef int (*child_fn)(void *arg, child_result *r);

/* Runs fn in a forked child and returns its result; asserts that the
 * child ended normally (no signal, no crash). */
static child_result in_child(child_fn fn, void *arg)
{
    int fds[2];
    cr_assert(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        child_result r;
        memset(&r, 0, sizeof r);
        r.rc = fn(arg, &r);
        ssize_t w = write(fds[1], &r, sizeof r);
        /* no leak check here: LeakSanitizer in a forked child of a
         * threaded process only warns that it cannot stop the threads */
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fds[1]);
    child_result r;
    memset(&r, 0, sizeof r);
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int status;
    cr_assert(waitpid(pid, &status, 0) == pid);
    cr_assert(!WIFSIGNALED(status), "the child was killed by signal %d (%s)",
              WTERMSIG(status), strsignal(WTERMSIG(status)));
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                  got == (ssize_t)sizeof r,
              "the child did not report");
    return r;
}

/* ---- keys and values ------------------------------------------------------------ */

Test(badinput, key_too_long)
{
    const char *path = make_store("k.db", NCOMMITTED);
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    static uint8_t big[BONSAI_MAX_KEY + 1];
    memset(big, 'k', sizeof big);
    bonsai_val k = tu_val(big, sizeof big), v = tu_val("v", 1), out;
    TU_RC(bonsai_put(NULL, b, &k, &v, 0), BONSAI_KEYSIZE);
    TU_RC(bonsai_put(NULL, b, &k, &v, BONSAI_NOOVERWRITE), BONSAI_KEYSIZE);
    TU_RC(bonsai_get(NULL, b, &k, &out), BONSAI_KEYSIZE);
    TU_RC(bonsai_del(NULL, b, &k), BONSAI_KEYSIZE);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    TU_RC(bonsai_put(t, b, &k, &v, 0), BONSAI_KEYSIZE);
    bonsai_cursor *c;
    TU_OK(bonsai_cursor_open(t, b, &c));
    TU_RC(bonsai_cursor_seek(c, &k), BONSAI_KEYSIZE);
    bonsai_cursor_close(c);
    /* the transaction goes on: a refused key is no failure of it */
    bonsai_val ok = tu_val(big, BONSAI_MAX_KEY);
    TU_OK(bonsai_put(t, b, &ok, &v, 0));
    TU_OK(bonsai_txn_commit(t));
    uint64_t n;
    TU_OK(bonsai_count(NULL, b, &n));
    cr_assert_eq(n, 1);
    TU_OK(bonsai_close(db));
    expect_store(path, NCOMMITTED, 0);
}

/* bonsai.h: byte-string keys are 1..1024 bytes ("key empty" is
 * BONSAI_KEYSIZE); a u64 key is exactly 8 bytes. */
Test(badinput, key_empty)
{
    const char *path = make_store("k0.db", NCOMMITTED);
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    bonsai_map u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_val k0 = tu_val("x", 0), knull = tu_val(NULL, 0);
    bonsai_val v = tu_val("v", 1), out;
    bonsai_val *empty[] = {&k0, &knull};
    for (int i = 0; i < 2; i++) {
        TU_RC(bonsai_put(NULL, b, empty[i], &v, 0), BONSAI_KEYSIZE);
        TU_RC(bonsai_get(NULL, b, empty[i], &out), BONSAI_KEYSIZE);
        TU_RC(bonsai_del(NULL, b, empty[i]), BONSAI_KEYSIZE);
        TU_RC(bonsai_put(NULL, u, empty[i], &v, 0), BONSAI_KEYSIZE);
        TU_RC(bonsai_get(NULL, u, empty[i], &out), BONSAI_KEYSIZE);
        TU_RC(bonsai_del(NULL, u, empty[i]), BONSAI_KEYSIZE);
    }
    /* a u64 key of another width */
    uint32_t four = 7;
    bonsai_val k4 = tu_val(&four, sizeof four);
    TU_RC(bonsai_put(NULL, u, &k4, &v, 0), BONSAI_KEYSIZE);
    TU_RC(bonsai_get(NULL, u, &k4, &out), BONSAI_KEYSIZE);
    bonsai_cursor *c;
    TU_OK(bonsai_cursor_open(NULL, b, &c));
    TU_RC(bonsai_cursor_seek(c, &k0), BONSAI_KEYSIZE);
    bonsai_cursor_close(c);
    /* a one-byte key is the shortest there is */
    bonsai_val k1 = tu_val("", 1);
    TU_OK(bonsai_put(NULL, b, &k1, &v, 0));
    uint64_t n;
    TU_OK(bonsai_count(NULL, b, &n));
    cr_assert_eq(n, 1);
    TU_OK(bonsai_close(db));
    expect_store(path, NCOMMITTED, 0);
}

Test(badinput, value_too_big)
{
    const char *path = make_store("v.db", NCOMMITTED);
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    /* 1 GiB + 1 readable (zero) bytes with no memory behind them */
    size_t n = (size_t)BONSAI_MAX_VALUE + 1;
    void *p = mmap(NULL, n, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    cr_assert(p != MAP_FAILED, "mmap: %s", strerror(errno));
    bonsai_val v = tu_val(p, n);
    TU_RC(bonsai_put_u64(NULL, u, 1, &v, 0), BONSAI_VALSIZE);
    TU_RC(bonsai_put_u64(NULL, u, NCOMMITTED, &v, BONSAI_NOOVERWRITE),
          BONSAI_VALSIZE);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    TU_RC(bonsai_put_u64(t, u, 2, &v, 0), BONSAI_VALSIZE);
    TU_OK(bonsai_txn_commit(t));
    munmap(p, n);
    expect_range(NULL, u, NCOMMITTED);
    TU_OK(bonsai_close(db));
    expect_store(path, NCOMMITTED, 0);
}

/* ---- a full map ------------------------------------------------------------------- */

Test(badinput, map_full)
{
    const char *path = tu_path("full.db");
    bonsai_options o = plain_opts();
    o.max_size = 256 * 1024;
    o.sync = 0;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    /* commits of 100 until one is refused */
    uint64_t committed = 0;
    int rc = 0;
    char big[300];
    memset(big, 'f', sizeof big);
    bonsai_val filler = tu_val(big, sizeof big);
    while (rc == 0 && committed < 100000) {
        bonsai_txn *t;
        TU_OK(bonsai_txn_begin(db, 0, &t));
        for (uint64_t i = committed; i < committed + 100 && rc == 0; i++) {
            char buf[32];
            bonsai_val v = value_of(i, buf, sizeof buf);
            rc = bonsai_put_u64(t, m, i, &v, 0);
            /* a value beside each key, in map "u" too, at keys 1e9 + i */
            if (rc == 0)
                rc = bonsai_put_u64(t, m, 1000000000u + i, &filler, 0);
        }
        if (rc) {
            bonsai_txn_abort(t);
            break;
        }
        rc = bonsai_txn_commit(t);
        if (rc == 0)
            committed += 100;
    }
    cr_assert(rc == BONSAI_FULL, "filling a 256 KiB store -> %s after %" PRIu64
              " entries, expected BONSAI_FULL", tu_err(rc), committed);
    cr_assert(committed > 0, "not one commit fitted in 256 KiB");
    /* autocommit puts of single entries fill what is left, then are
     * refused the same way */
    uint64_t extra = 0;
    while ((rc = bonsai_put_u64(NULL, m, 2000000000u + extra, &filler, 0)) ==
               0 && extra < 100000)
        extra++;
    TU_RC(rc, BONSAI_FULL);
    TU_RC(bonsai_put_u64(NULL, m, 3000000000u, NULL, 0), BONSAI_FULL);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    cr_assert(st.bytes_used <= o.max_size, "the store went past its cap");
    /* the map is still readable ... */
    for (uint64_t i = 0; i < committed; i++) {
        bonsai_val got;
        TU_OK(bonsai_get_u64(NULL, m, i, &got));
        TU_OK(bonsai_get_u64(NULL, m, 1000000000u + i, &got));
    }
    /* ... and deletes still work */
    for (uint64_t i = 0; i < extra; i++)
        TU_OK(bonsai_del_u64(NULL, m, 2000000000u + i));
    for (uint64_t i = 0; i < committed; i++)
        TU_OK(bonsai_del_u64(NULL, m, 1000000000u + i));
    expect_range(NULL, m, committed);
    verify_clean(db);
    TU_OK(bonsai_close(db));
    bonsai_options again = plain_opts();
    again.max_size = o.max_size;
    bonsai_db *db2 = tu_open(path, &again);
    m = tu_map_open(db2, NULL, "u", BONSAI_KEY_U64);
    expect_range(NULL, m, committed);
    /* the space the deletes gave back takes new entries */
    TU_OK(bonsai_put_u64(NULL, m, 1000000000u, &filler, 0));
    TU_OK(bonsai_close(db2));
}

/* ---- out of memory ------------------------------------------------------------------ */

/* Allocation failure, in the plain build: this binary's malloc, calloc
 * and realloc fail while `oom.armed` is set in the test's thread (every
 * call from then on, as when memory is exhausted).  Under ASan the
 * sanitizer owns malloc. */
static struct {
    int armed;
    pthread_t th;
    uint64_t failed;
} oom;

#if !BI_ASAN
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t a, size_t b);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static int oom_now(void)
{
    if (!oom.armed || !pthread_equal(pthread_self(), oom.th))
        return 0;
    oom.failed++;
    errno = ENOMEM;
    return 1;
}

void *malloc(size_t n)
{
    return oom_now() ? NULL : __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    return oom_now() ? NULL : __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    return oom_now() ? NULL : __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}
#endif

/* Evaluates a bonsai call with allocations failing. */
#define OOM(expr)                                                            \
    ({                                                                       \
        oom.th = pthread_self();                                             \
        oom.armed = 1;                                                       \
        __typeof__(expr) oom_r_ = (expr);                                    \
        oom.armed = 0;                                                       \
        oom_r_;                                                              \
    })

static void skip_under_asan(void)
{
    if (BI_ASAN) {
        cr_log_info("SKIPPED: allocation failures are injected through "
                    "this binary's malloc, which AddressSanitizer replaces: "
                    "checked in the plain build only");
        tu_teardown(); /* a skipped test does not reach .fini */
        cr_skip_test("malloc failure injection needs the plain build");
    }
}

Test(badinput, out_of_memory_malloc_open)
{
    skip_under_asan();
    const char *path = make_store("oo.db", NCOMMITTED);
    bonsai_db *db = NULL;
    TU_RC(OOM(bonsai_open(path, NULL, &db)), BONSAI_NOMEM);
    cr_assert(db == NULL);
    TU_RC(OOM(bonsai_open(NULL, NULL, &db)), BONSAI_NOMEM);
    cr_assert(oom.failed > 0);
    expect_store(path, NCOMMITTED, 0);
}

Test(badinput, out_of_memory_malloc_txn)
{
    skip_under_asan();
    const char *path = make_store("om.db", NCOMMITTED);
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    /* an autocommit put cannot even begin its transaction */
    TU_RC(OOM(bonsai_put_u64(NULL, u, NCOMMITTED, NULL, 0)), BONSAI_NOMEM);
    /* puts in a transaction go on until one needs memory */
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    int rc = 0;
    uint64_t i;
    for (i = NCOMMITTED; i < 1000000 && rc == 0; i++) {
        char buf[32];
        bonsai_val v = value_of(i, buf, sizeof buf);
        rc = OOM(bonsai_put_u64(t, u, i, &v, 0));
    }
    uint64_t acked = i - 1; /* keys below the refused one */
    cr_assert(rc == BONSAI_NOMEM, "puts with malloc failing -> %s after %"
              PRIu64 " puts, expected BONSAI_NOMEM", tu_err(rc),
              acked - NCOMMITTED);
    /* the refused put changed nothing, or the transaction can only be
     * rolled back */
    rc = bonsai_txn_commit(t);
    cr_assert(rc == 0 || rc == BONSAI_BADTXN, "commit after the refused put "
              "-> %s", tu_err(rc));
    uint64_t n = rc == 0 ? acked : NCOMMITTED;
    expect_range(NULL, u, n);
    /* a commit whose allocations fail either needs none or rolls back */
    TU_OK(bonsai_txn_begin(db, 0, &t));
    for (i = n; i < n + 2000; i++) {
        char buf[32];
        bonsai_val v = value_of(i, buf, sizeof buf);
        TU_OK(bonsai_put_u64(t, u, i, &v, 0));
    }
    rc = OOM(bonsai_txn_commit(t));
    cr_assert(rc == 0 || rc == BONSAI_NOMEM, "commit with malloc failing -> "
              "%s", tu_err(rc));
    if (rc == 0)
        n += 2000;
    expect_range(NULL, u, n);
    put_range(db, u, n, n + 1);
    TU_OK(bonsai_close(db));
    expect_store(path, n + 1, 0);
}

Test(badinput, out_of_memory_malloc_direct)
{
    skip_under_asan();
    /* anonymous memory, no transactions: acknowledged puts stay */
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    put_range(db, u, 0, NCOMMITTED);
    int rc = 0;
    uint64_t i;
    for (i = NCOMMITTED; i < 1000000 && rc == 0; i++) {
        char buf[32];
        bonsai_val v = value_of(i, buf, sizeof buf);
        rc = OOM(bonsai_put_u64(NULL, u, i, &v, 0));
    }
    cr_assert(rc == BONSAI_NOMEM, "puts with malloc failing -> %s, expected "
              "BONSAI_NOMEM", tu_err(rc));
    /* keys below i - 1 were acknowledged; the failed one may or may not
     * be there */
    uint64_t acked = i - 1;
    bonsai_val got;
    rc = bonsai_get_u64(NULL, u, acked, &got);
    cr_assert(rc == 0 || rc == BONSAI_NOTFOUND, "get -> %s", tu_err(rc));
    if (rc == 0)
        acked++;
    expect_range(NULL, u, acked);
    verify_clean(db);
    TU_OK(bonsai_close(db));
}

/* No address space for the cap: the reservation's mmap fails. */
Test(badinput, out_of_memory_address_space)
{
    const char *path = make_store("as.db", NCOMMITTED);
    bonsai_options o = plain_opts();
    o.max_size = UINT64_C(1) << 62;
    bonsai_db *db = NULL;
    TU_RC(bonsai_open(NULL, &o, &db), BONSAI_NOMEM);
    TU_RC(bonsai_open(path, &o, &db), BONSAI_NOMEM);
    cr_assert(db == NULL);
    expect_store(path, NCOMMITTED, 0);
}

/* ---- a full disk ------------------------------------------------------------------------ */

static int enospc_hook(void *ctx, const cs_call *c, int before, int rc)
{
    (void)rc;
    const int *on = ctx;
    if (before && *on && c->op == CS_FALLOCATE)
        return BONSAI_ENOSPC;
    return CS_GO;
}

/* The disk is full when the store must grow: fallocate says ENOSPC. */
Test(badinput, disk_full_injected)
{
    const char *path = make_store("df.db", NCOMMITTED);
    int on = 0;
    cs_io x;
    cs_io_init(&x, bx_io_default(), enospc_hook, &on);
    bonsai_db *db;
    TU_OK(bonsai_open_io(path, NULL, &x.io, &db));
    bonsai_map u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    on = 1;
    uint64_t n = NCOMMITTED;
    int rc = 0;
    char big[2000];
    memset(big, 'd', sizeof big);
    bonsai_val v = tu_val(big, sizeof big);
    while (rc == 0 && n < 1000000) {
        bonsai_txn *t;
        TU_OK(bonsai_txn_begin(db, 0, &t));
        for (uint64_t i = n; i < n + 100 && rc == 0; i++)
            rc = bonsai_put_u64(t, u, UINT64_C(1) << 40 | i, &v, 0);
        if (rc == 0)
            rc = bonsai_txn_commit(t);
        else
            bonsai_txn_abort(t);
        if (rc == 0)
            n += 100;
    }
    cr_assert(rc == BONSAI_ENOSPC, "filling with the disk full -> %s, "
              "expected BONSAI_ENOSPC", tu_err(rc));
    cr_assert(x.count[CS_FALLOCATE] > 0);
    /* deletes of what was committed need no new space ... */
    for (uint64_t i = NCOMMITTED; i < n; i++)
        TU_OK(bonsai_del_u64(NULL, u, UINT64_C(1) << 40 | i));
    expect_range(NULL, u, NCOMMITTED);
    /* ... and once the disk has room again, the store grows again: more
     * than the deletes freed, in one transaction */
    on = 0;
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, 0, &t));
    for (uint64_t i = 0; i < 2 * n; i++)
        TU_OK(bonsai_put_u64(t, u, UINT64_C(1) << 41 | i, &v, 0));
    TU_OK(bonsai_txn_commit(t));
    TU_OK(bonsai_txn_begin(db, 0, &t));
    for (uint64_t i = 0; i < 2 * n; i++)
        TU_OK(bonsai_del_u64(t, u, UINT64_C(1) << 41 | i));
    TU_OK(bonsai_txn_commit(t));
    expect_range(NULL, u, NCOMMITTED);
    TU_OK(bonsai_close(db));
    expect_store(path, NCOMMITTED, 0);
}

/* A disk of `limit` bytes: fallocate beyond it says ENOSPC.  `full`: it
 * did, with none taken since (the store takes what is left in smaller
 * steps before a change finds no room at all); `refused`: how often. */
typedef struct small_disk {
    uint64_t limit;
    int full;
    uint64_t refused;
} small_disk;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int small_disk_hook(void *ctx, const cs_call *c, int before, int rc)
{
    small_disk *d = ctx;
    if (c->op != CS_FALLOCATE)
        return CS_GO;
    if (!before && rc == 0)
        d->full = 0;
    if (!before || c->off + c->len <= d->limit)
        return CS_GO;
    d->full = 1;
    d->refused++;
    return BONSAI_ENOSPC;
}

static uint64_t nd_key(uint64_t i)
{
    return tu_mix64(i + 0xD15C);
}

/* 1000 puts and a sync on the full disk: each BONSAI_ENOSPC, and none
 * tries the write-back again, which plans every cached node (puts took
 * a third of a second each, and a fill never ended).  A full disk is
 * tried again once a second, each try asking for a step of the file and
 * then a smaller one, and the sync tries once more: that many refusals
 * the seconds taken allow, and no more. */
static void expect_enospc_stays(bonsai_db *db, bonsai_map u, uint64_t n,
                                const bonsai_val *val, const small_disk *d)
{
    uint64_t refused0 = d->refused;
    double t0 = mono_s();
    for (uint64_t i = 0; i < 1000; i++)
        TU_RC(bonsai_put_u64(NULL, u, nd_key(n + i), val, 0),
              BONSAI_ENOSPC);
    TU_RC(bonsai_sync(db), BONSAI_ENOSPC);
    double secs = mono_s() - t0;
    uint64_t tries = d->refused - refused0;
    cr_assert(tries <= 2 * (2 + (uint64_t)secs), "1000 puts and a sync on "
              "the full disk asked it for room %" PRIu64 " times in %.1f s",
              tries, secs);
}

/* Without transactions, a write cache larger than the disk: the first
 * write-back of the cache meets the full disk.  That must be reported
 * by the next change or sync, and the changes since must not each try
 * the write-back again (each try plans every cached node: puts took a
 * third of a second each, and a fill never ended).
 * Then either the disk gets room again (room_again): a sync writes every
 * acknowledged put; or the store is closed on the full disk: a reopen
 * finds what was synced. */
static void disk_full_no_txn_with(int room_again, size_t cache,
                                  uint64_t sync_every)
{
    const char *path = tu_path(room_again ? "nd-room.db" : "nd-full.db");
    small_disk d = {2u << 20, 0, 0};
    cs_io x;
    cs_io_init(&x, bx_io_default(), small_disk_hook, &d);
    bonsai_options o = plain_opts();
    o.transactions = 0;
    o.max_size = 256u << 20;
    o.write_cache_bytes = cache;
    bonsai_db *db;
    TU_OK(bonsai_open_io(path, &o, &x.io, &db));
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    uint8_t v[16];
    bonsai_val val = tu_val(v, sizeof v);
    uint64_t n = 0;
    int rc = 0;
    /* a first part that fits the disk, synced */
    for (; n < 20000; n++) {
        memcpy(v, &n, 8);
        memcpy(v + 8, &n, 8);
        TU_OK(bonsai_put_u64(NULL, u, nd_key(n), &val, 0));
    }
    TU_OK(bonsai_sync(db));
    uint64_t synced = n;
    /* then puts until one reports the full disk.  A change whose own
     * write-back the disk refuses is in the cache already and succeeds:
     * the next change reports the refusal, so at most one is
     * acknowledged after the disk filled. */
    uint64_t acked_full = 0;
    while (rc == 0 && acked_full < 2) {
        memcpy(v, &n, 8);
        memcpy(v + 8, &n, 8);
        int full = d.full;
        rc = bonsai_put_u64(NULL, u, nd_key(n), &val, 0);
        if (rc == 0 && ++n % sync_every == 0 && (rc = bonsai_sync(db)) == 0)
            synced = n;
        acked_full += rc == 0 && (full || d.full);
        cr_assert(n < 5000000, "5 M puts and the disk never filled");
    }
    cr_assert(rc == BONSAI_ENOSPC, "%" PRIu64 " puts acknowledged after the "
              "disk filled, then %s, expected BONSAI_ENOSPC at the second",
              acked_full, tu_err(rc));
    /* with every change in the cache, it stays reported, at once, and
     * changes nothing (a small cache writes back as it goes, so a put
     * that finds its leaf cached with room may still succeed) */
    if (sync_every == UINT64_MAX) {
        expect_enospc_stays(db, u, n, &val, &d);
    }
    int all_written = room_again;
    if (room_again) {
        d.limit = UINT64_MAX;
        TU_OK(bonsai_sync(db));
        TU_OK(bonsai_close(db));
    } else {
        /* what the full disk still holds (the reserve a file keeps past
         * its end) may take the rest: then close says so by succeeding */
        int crc = bonsai_close(db);
        cr_assert(crc == 0 || crc == BONSAI_ENOSPC, "close on the full disk "
                  "-> %s, expected BONSAI_ENOSPC or 0", tu_err(crc));
        all_written = crc == 0;
    }
    /* Closed with success, every acknowledged put; else every synced one,
     * and with write-backs between syncs perhaps some acknowledged after */
    uint64_t least = all_written ? n : synced;
    uint64_t most = all_written || sync_every == UINT64_MAX ? least : n;
    db = tu_open(path, &o);
    u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    uint64_t count = 0, problems = UINT64_MAX;
    TU_OK(bonsai_verify(db, 0, NULL, NULL, NULL, &problems));
    cr_assert_eq(problems, 0);
    TU_OK(bonsai_count(NULL, u, &count));
    cr_assert(count >= least && count <= most, "%" PRIu64 " entries after "
              "a reopen, expected %" PRIu64 "..%" PRIu64 " (%" PRIu64
              " synced, %" PRIu64 " acknowledged)", count, least, most,
              synced, n);
    for (uint64_t i = 0; i < n; i += i < least ? 97 : 1) {
        bonsai_val got;
        int grc = bonsai_get_u64(NULL, u, nd_key(i), &got);
        if (i >= least && grc == BONSAI_NOTFOUND)
            continue;
        TU_OK(grc);
        cr_assert(got.size == 16 && memcmp(got.data, &i, 8) == 0);
    }
    TU_OK(bonsai_close(db));
}

/* A cache that holds every change until the 2 MiB disk is full.  Waiting
 * puts take up to fifteen sixteenths of it, and a batch being applied is
 * written back once the leaves it decodes outgrow the rest: with 128 MiB
 * that comes after the disk is full. */
static void disk_full_no_txn(int room_again)
{
    disk_full_no_txn_with(room_again, 128u << 20, UINT64_MAX);
}

Test(badinput, disk_full_no_txn_reported_at_once_then_written_with_room)
{
    disk_full_no_txn(1);
}

Test(badinput, disk_full_no_txn_reported_at_once_and_close_keeps_synced)
{
    disk_full_no_txn(0);
}

/* The real thing: a store on a 256 KiB tmpfs, filled until the disk is
 * full.  The mount lives in a private mount namespace of a child
 * process, so it vanishes with the child whatever happens. */

#define TMPFS_BYTES (256 * 1024)
#define SKIP_NO_MOUNT 1

typedef struct tmpfs_run {
    const char *dir;
    int transactions;
    uint64_t committed; /* out */
} tmpfs_run;

static int fill_on_tmpfs(tmpfs_run *r, char *msg, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/store.db", r->dir);
    bonsai_options o = plain_opts();
    o.max_size = 64u << 20; /* far beyond the disk */
    o.transactions = r->transactions;
    bonsai_db *db;
    int rc = bonsai_open(path, &o, &db);
    if (rc) {
        snprintf(msg, len, "open -> %s", tu_err(rc));
        return rc;
    }
    bonsai_map u;
    if ((rc = bonsai_map_create(db, NULL, "u", BONSAI_KEY_U64, &u)) ||
        (rc = bonsai_sync(db))) {
        snprintf(msg, len, "map_create -> %s", tu_err(rc));
        bonsai_close(db);
        return rc;
    }
    /* batches of 50 keys with 100-byte values: a commit, or a sync in
     * no-transaction mode, ends each */
    uint64_t n = 0;
    char val[100];
    while (rc == 0 && n < 1000000) {
        bonsai_txn *t = NULL;
        if (r->transactions && (rc = bonsai_txn_begin(db, 0, &t)))
            break;
        for (uint64_t i = n; i < n + 50 && rc == 0; i++) {
            memset(val, (int)('a' + i % 26), sizeof val);
            bonsai_val v = tu_val(val, sizeof val);
            rc = bonsai_put_u64(t, u, i, &v, 0);
        }
        if (t && rc)
            bonsai_txn_abort(t);
        else if (t)
            rc = bonsai_txn_commit(t);
        else if (rc == 0)
            rc = bonsai_sync(db);
        if (rc == 0)
            n += 50;
    }
    r->committed = n;
    snprintf(msg, len, "filling stopped after %" PRIu64 " entries with %s", n,
             tu_err(rc));
    /* close may try to write back again (no-transaction mode): it may
     * fail the same way but must not crash */
    bonsai_close(db);
    return rc;
}

/* Reopens the full store (still on the full disk) and checks it: keys
 * [0, committed), bonsai_verify clean.  Returns 0 or a short reason. */
static int check_on_tmpfs(const tmpfs_run *r, char *msg, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/store.db", r->dir);
    bonsai_db *db;
    int rc = bonsai_open(path, NULL, &db);
    if (rc) {
        snprintf(msg, len, "reopen on the full disk -> %s", tu_err(rc));
        return -1;
    }
    bonsai_map u;
    uint64_t count = 0, problems = 0;
    rc = bonsai_map_open(db, NULL, "u", &u, NULL);
    if (rc == 0)
        rc = bonsai_count(NULL, u, &count);
    if (rc == 0 && count < r->committed) {
        snprintf(msg, len, "%" PRIu64 " entries after reopen, %" PRIu64
                 " were committed", count, r->committed);
        rc = -1;
    }
    /* no-transaction mode may hold a batch that was written but not
     * acknowledged; keys are still 0..count-1 */
    for (uint64_t i = 0; rc == 0 && i < count; i++) {
        bonsai_val v;
        rc = bonsai_get_u64(NULL, u, i, &v);
        if (rc == 0 && (v.size != 100 ||
                        ((const char *)v.data)[99] != (char)('a' + i % 26))) {
            snprintf(msg, len, "key %" PRIu64 " holds the wrong value", i);
            rc = -1;
        } else if (rc) {
            snprintf(msg, len, "key %" PRIu64 " -> %s", i, tu_err(rc));
        }
    }
    if (rc == 0 && (rc = bonsai_verify(db, 0, NULL, NULL, NULL, &problems)) ==
                       0 && problems) {
        snprintf(msg, len, "bonsai_verify: %" PRIu64 " problems", problems);
        rc = -1;
    }
    int crc = bonsai_close(db);
    if (rc == 0 && crc) {
        snprintf(msg, len, "close -> %s", tu_err(crc));
        rc = -1;
    }
    return rc;
}

enum { TF_FILL_RC, TF_CHECK_RC, TF_COMMITTED };

static int tmpfs_child(void *arg, child_result *out)
{
    tmpfs_run *r = arg;
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        snprintf(out->msg, sizeof out->msg, "unshare(CLONE_NEWNS): %s",
                 strerror(errno));
        return SKIP_NO_MOUNT;
    }
    char opts[64];
    snprintf(opts, sizeof opts, "size=%d,mode=0700", TMPFS_BYTES);
    if (mount("bonsai-test", r->dir, "tmpfs", 0, opts) != 0) {
        snprintf(out->msg, sizeof out->msg, "mount -t tmpfs: %s",
                 strerror(errno));
        return SKIP_NO_MOUNT;
    }
    char fill_msg[200] = "", check_msg[200] = "";
    out->data[TF_FILL_RC] = fill_on_tmpfs(r, fill_msg, sizeof fill_msg);
    out->data[TF_COMMITTED] = (int64_t)r->committed;
    if (r->committed > 0)
        out->data[TF_CHECK_RC] =
            check_on_tmpfs(r, check_msg, sizeof check_msg);
    umount(r->dir);
    snprintf(out->msg, sizeof out->msg, "%s%s%s", fill_msg,
             *check_msg ? "; " : "", check_msg);
    return 0;
}

static void disk_full_tmpfs(int transactions)
{
    tmpfs_run r = {tu_path("tmpfs"), transactions, 0};
    cr_assert(mkdir(r.dir, 0700) == 0);
    child_result c = in_child(tmpfs_child, &r);
    if (c.rc == SKIP_NO_MOUNT) {
        /* a message, not cr_log_warn: Criterion 2.4 fails a run that
         * logged a warning */
        fprintf(stderr, "badinput: disk full on a real tmpfs SKIPPED: "
                "mounting is not permitted here (%s); run as root or with "
                "CAP_SYS_ADMIN\n", c.msg);
        tu_teardown();
        cr_skip_test("cannot mount a tmpfs here: %s", c.msg);
    }
    int fill_rc = (int)c.data[TF_FILL_RC];
    cr_log_info("disk full on a %d KiB tmpfs (%s): %s", TMPFS_BYTES / 1024,
                transactions ? "transactions" : "no transactions", c.msg);
    cr_assert(fill_rc == BONSAI_ENOSPC,
              "filling a store on a full tmpfs -> %s, expected "
              "BONSAI_ENOSPC (%s)", tu_err(fill_rc), c.msg);
    cr_assert(c.data[TF_COMMITTED] > 0, "nothing fitted on the tmpfs (%s)",
              c.msg);
    cr_assert(c.data[TF_CHECK_RC] == 0, "after the disk filled: %s", c.msg);
}

Test(badinput, disk_full_tmpfs_transactions)
{
    disk_full_tmpfs(1);
}

Test(badinput, disk_full_tmpfs_no_transactions)
{
    disk_full_tmpfs(0);
}

/* ---- a damaged file ----------------------------------------------------------------------- */

Test(badinput, truncated_file)
{
    const char *path = make_store("t.db", 5000);
    size_t n;
    uint8_t *orig = slurp(path, &n);
    bonsai_db *db = tu_open(path, NULL);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    TU_OK(bonsai_close(db));
    /* inside the header, inside the head area, and through used pages */
    uint64_t cuts[] = {10, BX_HEADER_SIZE, 1000, BX_HEAD_BYTES - 1,
                       BX_HEAD_BYTES, st.bytes_used / 2, st.bytes_used - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "cut to %" PRIu64 " bytes", cuts[i]);
        spill(path, orig, (size_t)cuts[i]);
        expect_refused(path, BONSAI_CORRUPT, what);
    }
    /* put back, it is whole again */
    spill(path, orig, n);
    free(orig);
    expect_store(path, 5000, 0);
}

Test(badinput, wrong_magic)
{
    const char *path = make_store("m.db", NCOMMITTED);
    size_t n;
    uint8_t *orig = slurp(path, &n);
    uint8_t *bad = malloc(n);
    cr_assert(bad != NULL);
    for (size_t i = 0; i < 8; i++) {
        memcpy(bad, orig, n);
        bad[i] ^= 0x20;
        spill(path, bad, n);
        expect_refused(path, BONSAI_CORRUPT, "magic changed");
    }
    /* a file of something else entirely */
    memset(bad, 'x', n);
    spill(path, bad, n);
    expect_refused(path, BONSAI_CORRUPT, "a file of 'x'");
    spill(path, orig, n);
    free(bad);
    free(orig);
    expect_store(path, NCOMMITTED, 0);
}

/* Sets the header's version field and makes its checksum hold again. */
static void set_version(uint8_t *head, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        head[8 + i] = (uint8_t)(v >> (8 * i));
    uint32_t crc = bonsai_crc32c(0, head, 28);
    for (int i = 0; i < 4; i++)
        head[28 + i] = (uint8_t)(crc >> (8 * i));
}

Test(badinput, unknown_version)
{
    const char *path = make_store("ver.db", NCOMMITTED);
    size_t n;
    uint8_t *orig = slurp(path, &n);
    uint8_t *bad = malloc(n);
    cr_assert(bad != NULL);
    memcpy(bad, orig, n);
    /* the unchanged header gives the same bytes back (the setter works) */
    set_version(bad, BX_FORMAT_VERSION);
    cr_assert(memcmp(bad, orig, n) == 0);
    uint32_t newer[] = {BX_FORMAT_VERSION + 1, 0x7fffffffu, 0xffffffffu};
    for (size_t i = 0; i < 3; i++) {
        memcpy(bad, orig, n);
        set_version(bad, newer[i]);
        spill(path, bad, n);
        expect_refused(path, BONSAI_FORMAT_UNSUPPORTED, "a newer version");
    }
    /* version 0 was never written: damage, not the future */
    memcpy(bad, orig, n);
    set_version(bad, 0);
    spill(path, bad, n);
    expect_refused(path, BONSAI_CORRUPT, "version 0");
    spill(path, orig, n);
    free(bad);
    free(orig);
    expect_store(path, NCOMMITTED, 0);
}

/* ---- the last transaction id ---------------------------------------------- */

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The newest meta slot of the file image f (format.md, "Meta slots"). */
static const uint8_t *newest_slot(const uint8_t *f)
{
    const uint8_t *s0 = f + 512, *s1 = f + 1024;
    return get_le64(s1 + 8) > get_le64(s0 + 8) && !memcmp(s1, "meta", 4)
               ? s1 : s0;
}

/* Writes slot (52 bytes) with txn_id id and end (if not 0), its checksum
 * made to hold, into out. */
static void forge_slot(const uint8_t *slot, uint64_t id, uint64_t end,
                       uint8_t *out)
{
    uint8_t s[52];
    memcpy(s, slot, sizeof s);
    put_le64(s + 8, id);
    if (end)
        put_le64(s + 16, end);
    uint32_t crc = bonsai_crc32c(0, s, 48);
    for (int i = 0; i < 4; i++)
        s[48 + i] = (uint8_t)(crc >> (8 * i));
    memcpy(out, s, sizeof s);
}

/* Rewrites path's meta slots: the newest slot's contents with txn_id id
 * in slot 0; slot 1 all zero (unused). */
static void forge_txn_id(const char *path, uint64_t id)
{
    size_t n;
    uint8_t *f = slurp(path, &n);
    forge_slot(newest_slot(f), id, 0, f + 512);
    memset(f + 1024, 0, 52);
    spill(path, f, n);
    free(f);
}

static uint64_t last_txn(bonsai_db *db)
{
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    return st.txn_id;
}

/* Every way to change a store whose last id is UINT64_MAX is refused
 * with BONSAI_TXNID_FULL, and the file is left as it was. */
static void expect_no_more_writes(const char *path, int transactions)
{
    size_t n0, n1;
    uint8_t *before = slurp(path, &n0);
    bonsai_options o = plain_opts();
    o.transactions = transactions;
    bonsai_db *db = tu_open(path, &o);
    cr_assert_eq(last_txn(db), UINT64_MAX);
    bonsai_map m = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_txn *t = NULL;
    if (transactions) {
        TU_RC(bonsai_txn_begin(db, 0, &t), BONSAI_TXNID_FULL);
        cr_assert(t == NULL);
    }
    uint64_t count;
    TU_OK(bonsai_count(NULL, m, &count)); /* the writer's tree, loaded */
    TU_RC(bonsai_put_u64(NULL, m, NCOMMITTED + 7, NULL, 0),
          BONSAI_TXNID_FULL);
    TU_RC(bonsai_del_u64(NULL, m, 0), BONSAI_TXNID_FULL);
    bonsai_map other;
    TU_RC(bonsai_map_create(db, NULL, "v", BONSAI_KEY_U64, &other),
          BONSAI_TXNID_FULL);
    TU_RC(bonsai_map_drop(db, NULL, "u"), BONSAI_TXNID_FULL);
    /* reading goes on, at the last id */
    if (transactions) {
        TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
        cr_assert_eq(bonsai_txn_id(t), UINT64_MAX);
        expect_range(t, m, NCOMMITTED);
        bonsai_txn_abort(t);
    }
    expect_range(NULL, m, NCOMMITTED);
    verify_clean(db);
    TU_OK(bonsai_sync(db));
    TU_OK(bonsai_close(db));
    uint8_t *after = slurp(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "a refused write changed the file (transactions %d)",
              transactions);
    free(before);
    free(after);
}

/* The commit with the last id there is stands; after it every write
 * fails before it writes anything, as it does when the file already
 * ends there; nothing wraps to id 0, whose meta slot would lose to the
 * older one at the next open. */
Test(badinput, no_commit_is_lost_at_the_last_txn_id)
{
    for (int transactions = 1; transactions >= 0; transactions--) {
        const char *path = make_store("ids.db", NCOMMITTED);
        forge_txn_id(path, UINT64_MAX - 1);
        bonsai_options o = plain_opts();
        o.transactions = transactions;
        bonsai_db *db = tu_open(path, &o);
        bonsai_map m = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
        char buf[32];
        bonsai_val v = value_of(NCOMMITTED, buf, sizeof buf);
        bonsai_txn *t = NULL;
        if (transactions) {
            TU_OK(bonsai_txn_begin(db, 0, &t));
            cr_assert_eq(bonsai_txn_id(t), UINT64_MAX);
        }
        TU_OK(bonsai_put_u64(t, m, NCOMMITTED, &v, 0));
        if (t)
            TU_OK(bonsai_txn_commit(t));
        TU_OK(bonsai_close(db));
        db = tu_open(path, &o);
        cr_assert_eq(last_txn(db), UINT64_MAX, "transactions %d",
                     transactions);
        m = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
        expect_range(NULL, m, NCOMMITTED + 1);
        TU_OK(bonsai_close(db));
        cr_assert(unlink(path) == 0);
        unlink(tu_path("ids.db-lock"));

        path = make_store("ids.db", NCOMMITTED);
        forge_txn_id(path, UINT64_MAX);
        expect_no_more_writes(path, transactions);
        expect_no_more_writes(path, 1 - transactions);
        expect_store(path, NCOMMITTED, 1);
        cr_assert(unlink(path) == 0);
        unlink(tu_path("ids.db-lock"));
    }
}

/* A read-only handle publishes its snapshot of the last id in the lock
 * file as a snapshot (a non-zero word), never as "no snapshot" (0). */
Test(badinput, snapshot_of_the_last_txn_id_is_published)
{
    const char *path = make_store("ids.db", NCOMMITTED);
    forge_txn_id(path, UINT64_MAX);
    bonsai_options o = plain_opts();
    o.read_only = 1;
    bonsai_db *db = tu_open(path, &o);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    cr_assert_eq(bonsai_txn_id(t), UINT64_MAX);
    bonsai_map m = tu_map_open(db, t, "u", BONSAI_KEY_U64);
    expect_range(t, m, NCOMMITTED);
    /* slot 0, the first a handle claims: its txn word, in host order */
    int fd = open(tu_path("ids.db-lock"), O_RDONLY);
    cr_assert(fd >= 0, "no lock file: %s", strerror(errno));
    uint64_t word = 0;
    cr_assert(pread(fd, &word, 8, 64) == 8);
    close(fd);
    cr_assert(word != 0, "the snapshot of id 2^64-1 is published as none");
    /* a writer opening beside it keeps what it reads */
    bonsai_db *w = tu_open(path, NULL);
    TU_OK(bonsai_close(w));
    expect_range(t, m, NCOMMITTED);
    bonsai_txn_abort(t);
    TU_OK(bonsai_close(db));
}

/* A reader follows the newest meta slot a writer wrote after it opened;
 * an end so far out that its bytes pass 2^64 is beyond what the reader
 * reserved (BONSAI_FULL), not a wrapped size that seems to fit. */
Test(badinput, reader_refuses_an_end_whose_bytes_wrap)
{
    const char *path = make_store("end.db", NCOMMITTED);
    bonsai_options o = plain_opts();
    o.read_only = 1;
    bonsai_db *db = tu_open(path, &o);
    size_t n;
    uint8_t *f = slurp(path, &n);
    const uint8_t *s = newest_slot(f);
    uint64_t id = get_le64(s + 8) + 1;
    /* 2^55 pages of 512 bytes (the default page) are 2^64 bytes: 0 */
    uint8_t slot[52];
    forge_slot(s, id, UINT64_C(1) << 55, slot);
    int fd = open(path, O_WRONLY);
    cr_assert(fd >= 0 && pwrite(fd, slot, sizeof slot, 512 + 512 * (id & 1))
                             == (ssize_t)sizeof slot);
    close(fd);
    bonsai_txn *t = NULL;
    int rc = bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t);
    cr_assert(rc == BONSAI_FULL, "a snapshot of end 2^55 pages -> %s",
              tu_err(rc));
    TU_OK(bonsai_close(db));
    spill(path, f, n);
    free(f);
    expect_store(path, NCOMMITTED, 1);
}

/* ---- permissions, locks, paths --------------------------------------------------------- */

/* Drops the capabilities that let root write any file, so the test means
 * the same as root and as anyone else. */
static int drop_file_caps(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) != 0)
        return -1;
    unsigned drop[] = {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER};
    for (size_t i = 0; i < 3; i++)
        for (int w = 0; w < _LINUX_CAPABILITY_U32S_3; w++)
            if (CAP_TO_INDEX(drop[i]) == (unsigned)w) {
                d[w].effective &= ~CAP_TO_MASK(drop[i]);
                d[w].permitted &= ~CAP_TO_MASK(drop[i]);
            }
    return (int)syscall(SYS_capset, &h, d);
}

static int open_unwritable(void *arg, child_result *out)
{
    char *msg = out->msg;
    size_t len = sizeof out->msg;
    const char *path = arg;
    if (drop_file_caps() != 0) {
        snprintf(msg, len, "capset: %s", strerror(errno));
        return 1;
    }
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, NULL, &db);
    snprintf(msg, len, "read-write open of a 0444 file -> %s", tu_err(rc));
    if (rc == 0)
        bonsai_close(db);
    return rc;
}

Test(badinput, unwritable_file_opened_for_writing)
{
    const char *path = make_store("ro.db", NCOMMITTED);
    cr_assert(chmod(path, 0444) == 0);
    child_result c = in_child(open_unwritable, (void *)path);
    cr_assert(c.rc == BONSAI_READONLY, "%s, expected BONSAI_READONLY", c.msg);
    /* read-only, it opens and reads everything */
    expect_store(path, NCOMMITTED, 1);
    cr_assert(chmod(path, 0644) == 0);
    expect_store(path, NCOMMITTED, 0);
}

Test(badinput, read_only_handle_asked_to_write)
{
    const char *path = make_store("rh.db", NCOMMITTED);
    size_t n0, n1;
    uint8_t *before = slurp(path, &n0);
    bonsai_options o = plain_opts();
    o.read_only = 1;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64), m2;
    TU_RC(bonsai_put_u64(NULL, u, 1, NULL, 0), BONSAI_READONLY);
    TU_RC(bonsai_put_u64(NULL, u, 1, NULL, BONSAI_NOOVERWRITE),
          BONSAI_READONLY);
    TU_RC(bonsai_del_u64(NULL, u, 1), BONSAI_READONLY);
    TU_RC(bonsai_map_create(db, NULL, "new", BONSAI_KEY_U64, &m2),
          BONSAI_READONLY);
    TU_RC(bonsai_map_drop(db, NULL, "u"), BONSAI_READONLY);
    bonsai_txn *t;
    TU_RC(bonsai_txn_begin(db, 0, &t), BONSAI_READONLY);
    cr_assert(t == NULL);
    /* a read snapshot of a writable store refuses writes the same way */
    bonsai_db *w = tu_open(tu_path("w.db"), NULL);
    bonsai_map wm = tu_map_create(w, NULL, "u", BONSAI_KEY_U64);
    bonsai_txn *r;
    TU_OK(bonsai_txn_begin(w, BONSAI_TXN_RDONLY, &r));
    TU_RC(bonsai_put_u64(r, wm, 1, NULL, 0), BONSAI_READONLY);
    TU_RC(bonsai_del_u64(r, wm, 1), BONSAI_READONLY);
    TU_RC(bonsai_map_create(w, r, "x", BONSAI_KEY_U64, &m2), BONSAI_READONLY);
    TU_RC(bonsai_map_drop(w, r, "u"), BONSAI_READONLY);
    TU_OK(bonsai_txn_commit(r));
    TU_OK(bonsai_close(w));
    expect_range(NULL, u, NCOMMITTED);
    TU_OK(bonsai_close(db));
    uint8_t *after = slurp(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "a read-only handle changed the file");
    free(before);
    free(after);
}

/* The read-only open reads the committed entries beside the writer: its
 * snapshots are published in the lock file. */
static int open_second(void *arg, child_result *out)
{
    char *msg = out->msg;
    size_t len = sizeof out->msg;
    const char *path = arg;
    bonsai_db *db = NULL;
    int rc = bonsai_open(path, NULL, &db);
    bonsai_options o = plain_opts();
    o.read_only = 1;
    bonsai_db *rdb = NULL;
    int rrc = bonsai_open(path, &o, &rdb);
    bonsai_map u;
    uint64_t count = 0;
    int crc = rrc ? rrc : bonsai_map_open(rdb, NULL, "u", &u, NULL);
    if (crc == 0)
        crc = bonsai_count(NULL, u, &count);
    snprintf(msg, len, "read-write open -> %s, read-only open -> %s, its "
             "count -> %s, %" PRIu64 " entries", tu_err(rc), tu_err(rrc),
             tu_err(crc), count);
    bonsai_close(db);
    bonsai_close(rdb);
    return rc == BONSAI_BUSY && crc == 0 && count == NCOMMITTED ? 0 : -1;
}

Test(badinput, second_writer_process)
{
    const char *path = make_store("sw.db", NCOMMITTED);
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    child_result c = in_child(open_second, (void *)path);
    cr_assert(c.rc == 0, "while this process writes, another: %s (expected "
              "BONSAI_BUSY for the read-write open, the %u committed "
              "entries through the read-only one)", c.msg, NCOMMITTED);
    /* the writer goes on undisturbed */
    put_range(db, u, NCOMMITTED, NCOMMITTED + 10);
    TU_OK(bonsai_close(db));
    expect_store(path, NCOMMITTED + 10, 0);
}

Test(badinput, path_is_not_a_file)
{
    const char *dir = tu_path("adir");
    cr_assert(mkdir(dir, 0755) == 0);
    bonsai_db *db = NULL;
    TU_RC(bonsai_open(dir, NULL, &db), BONSAI_IO);
    bonsai_options o = plain_opts();
    o.read_only = 1;
    TU_RC(bonsai_open(dir, &o, &db), BONSAI_IO);
    o = plain_opts();
    o.create = 0;
    TU_RC(bonsai_open(dir, &o, &db), BONSAI_IO);
    cr_assert(db == NULL);
    struct stat st;
    cr_assert(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    /* a FIFO is refused at once, not waited on for a writer */
    const char *fifo = tu_path("fifo");
    cr_assert(mkfifo(fifo, 0644) == 0);
    TU_RC(bonsai_open(fifo, NULL, &db), BONSAI_IO);
    o = plain_opts();
    o.read_only = 1;
    TU_RC(bonsai_open(fifo, &o, &db), BONSAI_IO);
    TU_RC(bonsai_open("/dev/zero", &o, &db), BONSAI_IO);
    cr_assert(db == NULL);
    /* and a missing file without create */
    o = plain_opts();
    o.create = 0;
    TU_RC(bonsai_open(tu_path("missing.db"), &o, &db), BONSAI_NOTFOUND);
    cr_assert(access(tu_path("missing.db"), F_OK) != 0);
}

/* ---- handles --------------------------------------------------------------------------- */

static int never_cb(void *ctx, const char *name, unsigned kind,
                    uint64_t entries)
{
    (void)ctx, (void)name, (void)kind, (void)entries;
    return 1;
}

/* Every NULL for which bonsai.h documents an answer. */
Test(badinput, null_handles)
{
    bonsai_db *db = NULL;
    bonsai_txn *t = NULL;
    bonsai_stat st;
    TU_RC(bonsai_open(NULL, NULL, NULL), BONSAI_INVALID);
    TU_OK(bonsai_close(NULL));
    TU_RC(bonsai_sync(NULL), BONSAI_INVALID);
    TU_RC(bonsai_db_stat(NULL, &st), BONSAI_INVALID);
    TU_RC(bonsai_txn_begin(NULL, 0, &t), BONSAI_INVALID);
    TU_RC(bonsai_txn_commit(NULL), BONSAI_INVALID);
    bonsai_txn_abort(NULL);
    bonsai_cursor_close(NULL);
    bonsai_options_init_sized(NULL, sizeof(bonsai_options));
    cr_assert_eq(bonsai_txn_id(NULL), 0);
    bonsai_map m = NULL;
    bonsai_val k = tu_val("k", 1), v = tu_val("v", 1), out;
    uint64_t n;
    TU_RC(bonsai_map_create(NULL, NULL, "m", BONSAI_KEY_U64, &m),
          BONSAI_INVALID);
    TU_RC(bonsai_map_open(NULL, NULL, "m", &m, NULL), BONSAI_INVALID);
    TU_RC(bonsai_map_drop(NULL, NULL, "m"), BONSAI_INVALID);
    TU_RC(bonsai_map_list(NULL, NULL, never_cb, NULL), BONSAI_INVALID);
    TU_RC(bonsai_put(NULL, NULL, &k, &v, 0), BONSAI_INVALID);
    TU_RC(bonsai_get(NULL, NULL, &k, &out), BONSAI_INVALID);
    TU_RC(bonsai_del(NULL, NULL, &k), BONSAI_INVALID);
    TU_RC(bonsai_count(NULL, NULL, &n), BONSAI_INVALID);
    TU_RC(bonsai_put_u64(NULL, NULL, 1, NULL, 0), BONSAI_INVALID);
    TU_RC(bonsai_get_u64(NULL, NULL, 1, &out), BONSAI_INVALID);
    TU_RC(bonsai_del_u64(NULL, NULL, 1), BONSAI_INVALID);
    bonsai_cursor *c = NULL;
    TU_RC(bonsai_cursor_open(NULL, NULL, &c), BONSAI_INVALID);
    TU_RC(bonsai_cursor_first(NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_next(NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_get(NULL, &k, &v), BONSAI_INVALID);
    TU_RC(bonsai_verify(NULL, 0, NULL, NULL, NULL, &n), BONSAI_INVALID);
    bonsai_space sp;
    TU_RC(bonsai_space_stat(NULL, &sp), BONSAI_INVALID);
    TU_RC(bonsai_compact(NULL, tu_path("c.db"), NULL), BONSAI_INVALID);
    cr_assert(bonsai_strerror(-1) != NULL && bonsai_strerror(12345) != NULL);

    /* NULL keys, values' data and out-pointers with a store open */
    const char *path = make_store("n.db", NCOMMITTED);
    db = tu_open(path, NULL);
    m = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_val nodata = tu_val(NULL, 8);
    TU_RC(bonsai_put(NULL, m, NULL, &v, 0), BONSAI_INVALID);
    TU_RC(bonsai_put(NULL, m, &nodata, &v, 0), BONSAI_INVALID);
    TU_RC(bonsai_put_u64(NULL, m, 1, &nodata, 0), BONSAI_INVALID);
    TU_RC(bonsai_get(NULL, m, NULL, &out), BONSAI_INVALID);
    TU_RC(bonsai_del(NULL, m, NULL), BONSAI_INVALID);
    TU_RC(bonsai_count(NULL, m, NULL), BONSAI_INVALID);
    TU_RC(bonsai_db_stat(db, NULL), BONSAI_INVALID);
    TU_RC(bonsai_txn_begin(db, 0, NULL), BONSAI_INVALID);
    TU_RC(bonsai_map_open(db, NULL, NULL, &m, NULL), BONSAI_INVALID);
    TU_RC(bonsai_cursor_open(NULL, m, NULL), BONSAI_INVALID);
    TU_RC(bonsai_put_u64(NULL, m, 1, NULL, 7), BONSAI_INVALID); /* flags */
    TU_RC(bonsai_txn_begin(db, 7, &t), BONSAI_INVALID);
    TU_OK(bonsai_close(db));
    expect_store(path, NCOMMITTED, 0);
}

/* bonsai.h: a dropped map's handles answer BONSAI_NOTFOUND (the map is
 * not present), in either mode, for reads and writes alike; a snapshot
 * begun before the drop still reads it. */
static void dropped_map_test(const char *path)
{
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map gone = tu_map_create(db, NULL, "gone", BONSAI_KEY_U64);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    put_range(db, u, 0, NCOMMITTED);
    TU_OK(bonsai_put_u64(NULL, gone, 1, NULL, 0));
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    bonsai_txn *before = NULL;
    if (st.transactions)
        TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &before));
    TU_OK(bonsai_map_drop(db, NULL, "gone"));
    bonsai_val out;
    uint64_t n;
    bonsai_cursor *c;
    TU_RC(bonsai_put_u64(NULL, gone, 2, NULL, 0), BONSAI_NOTFOUND);
    TU_RC(bonsai_del_u64(NULL, gone, 1), BONSAI_NOTFOUND);
    TU_RC(bonsai_get_u64(NULL, gone, 1, &out), BONSAI_NOTFOUND);
    TU_RC(bonsai_count(NULL, gone, &n), BONSAI_NOTFOUND);
    TU_OK(bonsai_cursor_open(NULL, gone, &c));
    TU_RC(bonsai_cursor_first(c), BONSAI_NOTFOUND);
    bonsai_cursor_close(c);
    TU_RC(bonsai_map_drop(db, NULL, "gone"), BONSAI_NOTFOUND);
    if (before) {
        bonsai_txn *w;
        TU_OK(bonsai_txn_begin(db, 0, &w));
        TU_RC(bonsai_put_u64(w, gone, 2, NULL, 0), BONSAI_NOTFOUND);
        TU_RC(bonsai_get_u64(w, gone, 1, &out), BONSAI_NOTFOUND);
        bonsai_txn_abort(w);
        /* the snapshot from before the drop still has it */
        TU_OK(bonsai_get_u64(before, gone, 1, &out));
        TU_OK(bonsai_count(before, gone, &n));
        cr_assert_eq(n, 1);
        bonsai_txn_abort(before);
    }
    expect_range(NULL, u, NCOMMITTED);
    TU_OK(bonsai_close(db));
}

Test(badinput, dropped_map_handle_transactions)
{
    dropped_map_test(tu_path("drop.db"));
    expect_store(tu_path("drop.db"), NCOMMITTED, 0);
}

Test(badinput, dropped_map_handle_no_transactions)
{
    dropped_map_test(NULL);
}

Test(badinput, transactions_in_no_transaction_mode)
{
    bonsai_db *db = tu_open(NULL, NULL);
    bonsai_txn *t = (bonsai_txn *)&t; /* must be reset to NULL */
    TU_RC(bonsai_txn_begin(db, 0, &t), BONSAI_NOTSUP);
    cr_assert(t == NULL);
    TU_RC(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t), BONSAI_NOTSUP);
    TU_OK(bonsai_close(db));
}

/* bonsai.h: a cursor must be closed before its transaction ends; one that
 * is not answers every call with BONSAI_BADTXN and may still be closed. */
static void cursor_after_end(int commit, unsigned flags)
{
    const char *path = make_store("cur.db", NCOMMITTED);
    bonsai_db *db = tu_open(path, NULL);
    bonsai_map u = tu_map_open(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_txn *t;
    TU_OK(bonsai_txn_begin(db, flags, &t));
    if (!flags) {
        char buf[32];
        bonsai_val v = value_of(NCOMMITTED, buf, sizeof buf);
        TU_OK(bonsai_put_u64(t, u, NCOMMITTED, &v, 0));
    }
    bonsai_cursor *c, *c2;
    TU_OK(bonsai_cursor_open(t, u, &c));
    TU_OK(bonsai_cursor_open(t, u, &c2));
    TU_OK(bonsai_cursor_first(c));
    TU_OK(bonsai_cursor_next(c));
    if (commit)
        TU_OK(bonsai_txn_commit(t));
    else
        bonsai_txn_abort(t);
    bonsai_val k, v;
    uint64_t key;
    TU_RC(bonsai_cursor_get(c, &k, &v), BONSAI_BADTXN);
    TU_RC(bonsai_cursor_get_u64(c, &key, &v), BONSAI_BADTXN);
    TU_RC(bonsai_cursor_next(c), BONSAI_BADTXN);
    TU_RC(bonsai_cursor_prev(c), BONSAI_BADTXN);
    TU_RC(bonsai_cursor_first(c), BONSAI_BADTXN);
    TU_RC(bonsai_cursor_last(c), BONSAI_BADTXN);
    TU_RC(bonsai_cursor_seek_u64(c, 3), BONSAI_BADTXN);
    TU_RC(bonsai_cursor_seek(c, &k), BONSAI_BADTXN);
    TU_RC(bonsai_cursor_first(c2), BONSAI_BADTXN);
    bonsai_cursor_close(c);
    bonsai_cursor_close(c2);
    /* a cursor closed in time and one without a transaction are fine */
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &t));
    TU_OK(bonsai_cursor_open(t, u, &c));
    TU_OK(bonsai_cursor_last(c));
    bonsai_cursor_close(c);
    bonsai_txn_abort(t);
    TU_OK(bonsai_cursor_open(NULL, u, &c));
    TU_OK(bonsai_cursor_first(c));
    bonsai_cursor_close(c);
    TU_OK(bonsai_close(db));
    expect_store(path, NCOMMITTED + (commit && !flags), 0);
}

Test(badinput, cursor_after_read_txn_ended)
{
    cursor_after_end(1, BONSAI_TXN_RDONLY);
}

Test(badinput, cursor_after_write_txn_committed)
{
    cursor_after_end(1, 0);
}

Test(badinput, cursor_after_write_txn_aborted)
{
    cursor_after_end(0, 0);
}
/* A write cache smaller than what is written between syncs: write-backs
 * between them rewrite nodes in place.  Each ends with the records and a
 * meta slot that name what it wrote, so a close on the full disk leaves a
 * store that opens and verifies, with every synced put. */
Test(badinput, disk_full_no_txn_small_cache_close_keeps_synced)
{
    disk_full_no_txn_with(0, 256u << 10, 10000);
}

Test(badinput, disk_full_no_txn_larger_cache_close_keeps_synced)
{
    disk_full_no_txn_with(0, 1u << 20, 50000);
}

Test(badinput, disk_full_no_txn_small_cache_written_with_room)
{
    disk_full_no_txn_with(1, 256u << 10, 10000);
}

/* SPDX-License-Identifier: MIT */
/*
 * test_dumpload.c - bonsai-dump and bonsai-load, run as programs (from
 * $BONSAI_BUILD_DIR, default build/) against stores made through the
 * public API, and against the reference tools:
 *
 *  - bonsai-dump | mdb_load -n, mdb_dump -n -a | bonsai-load, and the
 *    data sections (database= lines, key and value lines) of the dumps
 *    are identical; the same through db_load / db_dump, whose -p output
 *    must also match bonsai-dump -p line for line.  Bytevalue format for
 *    LMDB (mdb_dump 0.9.24 does not escape backslashes in print format).
 *    The dumps are compared, not the reference tools' exit codes
 *    (mdb_load exits 0 on some malformed input).  Skipped with a message
 *    when mdb_load / db_load are not on PATH.
 *  - the exact bytes of both formats, print round trips, -s, -l, -T, -N,
 *    renaming with -s, empty stores and inputs;
 *  - malformed input: exit 1, the line number in stderr, the store (or
 *    its absence) unchanged;
 *  - usage (exit 2), --help, and failures (exit 1, a bonsai_strerror
 *    text, never a signal).
 *
 * Commands run through /bin/sh without pipes where an exit status
 * matters; intermediate dumps are files in the test's directory.  LMDB
 * files go to /dev/shm when it is there: mdb_load syncs every 100 puts,
 * which on a disk takes a minute for a million entries.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bonsai.h"
#include "util.h"

/* ---- suite: the temporary directory, plus one in /dev/shm --------------- */

static char shm_dir[64];

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

static void suite_fini(void)
{
    if (shm_dir[0]) {
        nftw(shm_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        shm_dir[0] = 0;
    }
    tu_teardown();
}

/* .timeout: a hang guard, not a timing assertion */
TestSuite(dumpload, .init = tu_setup, .fini = suite_fini, .timeout = 600);

/* A directory for LMDB files: in /dev/shm (a tmpfs) if possible. */
static const char *fast_dir(int *on_tmpfs)
{
    if (!shm_dir[0]) {
        snprintf(shm_dir, sizeof shm_dir, "/dev/shm/bonsai-dumpload-XXXXXX");
        if (!mkdtemp(shm_dir))
            shm_dir[0] = 0;
    }
    *on_tmpfs = shm_dir[0] != 0;
    return shm_dir[0] ? shm_dir : tu_tmpdir();
}

static const char *fast_path(const char *name, int *on_tmpfs)
{
    static char buf[4][PATH_MAX];
    static unsigned next;
    char *b = buf[next++ % 4];
    snprintf(b, PATH_MAX, "%s/%s", fast_dir(on_tmpfs), name);
    return b;
}

/* dir/name in a buffer of its own for the rest of the test (tu_path
 * rotates 8 buffers; a test here holds more paths than that).  Each test
 * runs in a fresh Criterion worker, so the pool starts empty. */
static const char *tp(const char *name)
{
    static char pool[64][PATH_MAX];
    static unsigned used;
    cr_assert(used < 64, "tp: out of path buffers");
    char *b = pool[used++];
    snprintf(b, PATH_MAX, "%s", tu_path(name));
    return b;
}

/* ---- running programs --------------------------------------------------- */

/* s quoted for sh: a short name for the many command lines below. */
static const char *q(const char *s)
{
    return tu_quote(s);
}

/* A program of the build, quoted. */
static const char *tool(const char *name)
{
    return q(tu_program(name));
}

#define DUMP tool("bonsai-dump")
#define LOAD tool("bonsai-load")

static char *slurp(const char *path, size_t *len);

/* Runs a command that must succeed (exit 0); its stderr is shown when it
 * does not.  In a pipeline only the last program's status counts (dash
 * has no pipefail): the callers check what the pipeline produced. */
static void must(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    cr_assert(n > 0 && (size_t)n + 64 < sizeof cmd, "command too long");
    static const char *errf;
    if (!errf)
        errf = tp("must.err");
    char full[8400];
    snprintf(full, sizeof full, "{ %s; } 2>%s", cmd, q(errf));
    int st = tu_sh_as(-1, full);
    if (st) {
        char *err = slurp(errf, NULL);
        cr_assert_fail("exit %d: %s\n%s", st, cmd, err ? err : "");
    }
}

/* Is prog an executable on PATH? */
static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char dir[PATH_MAX];
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n && n < sizeof dir - 64) {
            snprintf(dir, sizeof dir, "%.*s/%s", (int)n, path, prog);
            if (access(dir, X_OK) == 0)
                return 1;
        }
        path += n + (path[n] == ':');
    }
    return 0;
}

/* Skips the test (cleaning up first: a skipped test skips .fini). */
#define NEED_TOOLS(a, b, pkg)                                                \
    do {                                                                     \
        if (!on_path(a) || !on_path(b)) {                                    \
            suite_fini();                                                    \
            cr_skip_test(a " or " b " is not on PATH (Debian package "      \
                         pkg "): reference round trip skipped");             \
        }                                                                    \
    } while (0)

/* ---- files -------------------------------------------------------------- */

/* The whole file, NUL-terminated (NULL if it cannot be read). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    cr_assert(b);
    size_t r;
    while ((r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            cap *= 2;
            b = realloc(b, cap);
            cr_assert(b);
        }
    }
    fclose(f);
    b[n] = 0;
    if (len)
        *len = n;
    return b;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    size_t n = strlen(text);
    cr_assert(fwrite(text, 1, n, f) == n);
    cr_assert(fclose(f) == 0);
}

/* Asserts two files are byte for byte the same. */
static void same_file(const char *a, const char *b, const char *ctx)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    cr_assert(fa && fb, "%s: open %s / %s", ctx, a, b);
    uint64_t off = 0;
    for (;;) {
        int ca = getc(fa), cb = getc(fb);
        cr_assert(ca == cb, "%s: %s and %s differ at byte %" PRIu64, ctx, a,
                  b, off);
        if (ca == EOF)
            break;
        off++;
    }
    fclose(fa);
    fclose(fb);
}

/* ---- the data view of a dump -------------------------------------------- */

/* Yields a dump's database= lines, key and value lines and DATA=END
 * lines; every other header line is skipped (a header runs from VERSION=
 * to HEADER=END). */
typedef struct dview {
    FILE *f;
    const char *path;
    char *p;
    size_t cap;
    ssize_t len;
    uint64_t lineno;
    int in_header;
    int no_names; /* skip database= too */
    uint64_t data_lines;
} dview;

static void dview_open(dview *v, const char *path, int no_names)
{
    memset(v, 0, sizeof *v);
    v->path = path;
    v->no_names = no_names;
    v->f = fopen(path, "rb");
    cr_assert(v->f, "%s: %s", path, strerror(errno));
}

static int dview_next(dview *v)
{
    while ((v->len = getline(&v->p, &v->cap, v->f)) >= 0) {
        v->lineno++;
        if (v->in_header) {
            if (strcmp(v->p, "HEADER=END\n") == 0)
                v->in_header = 0;
            else if (!v->no_names && strncmp(v->p, "database=", 9) == 0)
                return 1;
            continue;
        }
        if (strncmp(v->p, "VERSION=", 8) == 0) {
            v->in_header = 1;
            continue;
        }
        if (v->p[0] == ' ')
            v->data_lines++;
        return 1;
    }
    return 0;
}

static void dview_close(dview *v)
{
    fclose(v->f);
    free(v->p);
}

/* Asserts the data views of two dumps are identical; returns the number
 * of key and value lines. */
static uint64_t same_data(const char *a, const char *b, int no_names,
                          const char *ctx)
{
    dview va, vb;
    dview_open(&va, a, no_names);
    dview_open(&vb, b, no_names);
    for (;;) {
        int ra = dview_next(&va), rb = dview_next(&vb);
        cr_assert(ra == rb,
                  "%s: %s ends at line %" PRIu64 ", %s goes on (line %" PRIu64
                  ": %.60s)",
                  ctx, ra ? b : a, ra ? vb.lineno : va.lineno, ra ? a : b,
                  ra ? va.lineno : vb.lineno, ra ? va.p : vb.p);
        if (!ra)
            break;
        cr_assert(va.len == vb.len && memcmp(va.p, vb.p, (size_t)va.len) == 0,
                  "%s: data differs: %s line %" PRIu64 " \"%.60s\" vs %s "
                  "line %" PRIu64 " \"%.60s\"",
                  ctx, a, va.lineno, va.p, b, vb.lineno, vb.p);
    }
    uint64_t n = va.data_lines;
    dview_close(&va);
    dview_close(&vb);
    return n;
}

/* Lines of a file that start with prefix. */
static uint64_t count_lines(const char *path, const char *prefix)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    char *p = NULL;
    size_t cap = 0, pl = strlen(prefix);
    uint64_t n = 0;
    while (getline(&p, &cap, f) >= 0)
        n += strncmp(p, prefix, pl) == 0;
    free(p);
    fclose(f);
    return n;
}

/* ---- stores ------------------------------------------------------------- */

static bonsai_options file_opts(void)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.sync = 0; /* crash durability is not what these tests check */
    return o;
}

static void put_bytes(bonsai_txn *txn, bonsai_map m, const void *k,
                      size_t kl, const void *v, size_t vl)
{
    bonsai_val key = tu_val(k, kl), val = tu_val(v, vl);
    TU_OK(bonsai_put(txn, m, &key, &val, 0));
}

typedef struct dataset {
    size_t key_max;    /* longest key: 511 for LMDB, 1024 otherwise */
    uint64_t many;     /* entries of the u64 map "many" (0: no map) */
    uint64_t entries;  /* out: entries in all maps */
} dataset;

/* Builds the test store at path: maps "bin" (byte keys: 0x00 and 0xff,
 * escapes, key_max-byte keys, empty values, values of 4 KiB + 1, 5000
 * bytes and 1 MiB + 17, random keys and values), "many" (ds->many u64
 * keys), "u64" (edge values), "with space" (a name with a space). */
static void build_store(const char *path, dataset *ds)
{
    tu_rng rng = {tu_seed("dataset", 20240601)};
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(path, &o);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    uint64_t before, total = 0;

    bonsai_map bin = tu_map_create(db, txn, "bin", BONSAI_KEY_BYTES);
    static const struct {
        const char *k;
        size_t kl;
        const char *v;
        size_t vl;
    } fixed[] = {
        {"\x00", 1, "", 0},
        {"\x00\x00", 2, "\x00", 1},
        {"\x00\xff", 2, "\xff\x00", 2},
        {"\xff", 1, "", 0},
        {"\xff\xff\xff", 3, "end", 3},
        {"\\", 1, "\\\\", 2},
        {"a\\b", 3, "back\\slash", 10},
        {" lead", 5, " ", 1},
        {"~\x7f\x80", 3, "\x1f~", 2},
        {"\n\r\t", 3, "\n", 1},
        {"=", 1, "=", 1},
        {"DATA=END", 8, "HEADER=END", 10},
        {"\\5c", 3, "\\00", 3},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        put_bytes(txn, bin, fixed[i].k, fixed[i].kl, fixed[i].v,
                  fixed[i].vl);
    uint8_t *buf = malloc((1u << 20) + 64);
    cr_assert(buf);
    /* the longest keys */
    memset(buf, 'k', ds->key_max);
    put_bytes(txn, bin, buf, ds->key_max, "long", 4);
    tu_fill(&rng, buf, ds->key_max);
    buf[0] = 0x00;
    buf[ds->key_max - 1] = 0xff;
    put_bytes(txn, bin, buf, ds->key_max, "", 0);
    /* large values */
    static const size_t big[] = {4097, 5000, (1u << 20) + 17};
    for (size_t i = 0; i < 3; i++) {
        char k[32];
        snprintf(k, sizeof k, "big-%zu", big[i]);
        tu_fill(&rng, buf, big[i]);
        put_bytes(txn, bin, k, strlen(k), buf, big[i]);
    }
    /* random keys and values, some empty */
    for (int i = 0; i < 400; i++) {
        uint8_t k[BONSAI_MAX_KEY], v[256];
        size_t kl = tu_chance(&rng, 20) ? tu_range(&rng, 65, ds->key_max)
                                        : tu_range(&rng, 1, 16);
        size_t vl = tu_chance(&rng, 250) ? 0 : tu_range(&rng, 1, 255);
        tu_fill(&rng, k, kl);
        tu_fill(&rng, v, vl);
        put_bytes(txn, bin, k, kl, v, vl);
    }
    TU_OK(bonsai_count(txn, bin, &before));
    total += before;

    bonsai_map u = tu_map_create(db, txn, "u64", BONSAI_KEY_U64);
    static const uint64_t edge[] = {
        0, 1, 255, 256, 65535, UINT64_C(1) << 32, (UINT64_C(1) << 63) - 1,
        UINT64_C(1) << 63, UINT64_MAX - 1, UINT64_MAX,
    };
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        char v[32];
        int n = snprintf(v, sizeof v, "v%" PRIu64, edge[i]);
        bonsai_val val = tu_val(v, i % 3 ? (size_t)n : 0);
        TU_OK(bonsai_put_u64(txn, u, edge[i], &val, 0));
    }
    for (int i = 0; i < 100; i++)
        TU_OK(bonsai_put_u64(txn, u, tu_rand(&rng), NULL, 0));
    TU_OK(bonsai_count(txn, u, &before));
    total += before;

    bonsai_map sp = tu_map_create(db, txn, "with space", BONSAI_KEY_BYTES);
    put_bytes(txn, sp, "a", 1, "1", 1);
    put_bytes(txn, sp, "b", 1, "", 0);
    put_bytes(txn, sp, "c c", 3, "3 3", 3);
    total += 3;

    if (ds->many) {
        bonsai_map many = tu_map_create(db, txn, "many", BONSAI_KEY_U64);
        for (uint64_t i = 0; i < ds->many; i++) {
            uint64_t v = i * 31;
            bonsai_val val = tu_val(&v, i % 4 ? 0 : 8);
            TU_OK(bonsai_put_u64(txn, many, i * 7 + 3, &val, 0));
        }
        total += ds->many;
    }
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
    free(buf);
    ds->entries = total;
}

/* The kind of map name in the store at path. */
static unsigned kind_of(const char *path, const char *name)
{
    bonsai_options o = file_opts();
    o.read_only = 1;
    bonsai_db *db = tu_open(path, &o);
    bonsai_map m;
    unsigned kind = 0;
    TU_OK(bonsai_map_open(db, NULL, name, &m, &kind));
    TU_OK(bonsai_close(db));
    return kind;
}

/* ---- round trips through the reference tools ---------------------------- */

Test(dumpload, lmdb_round_trip)
{
    NEED_TOOLS("mdb_load", "mdb_dump", "lmdb-utils");
    int tmpfs;
    const char *lmdb = fast_path("data.mdb", &tmpfs);
    /* on a disk mdb_load's syncs make a million entries take a minute */
    dataset ds = {.key_max = 511,
                  .many = tmpfs ? tu_scaled(1000000, 20000) : 50000};
    if (!tmpfs)
        cr_log_info("no /dev/shm: the big map has %" PRIu64 " entries",
                    ds.many);
    const char *src = tp("src.bonsai"), *dst = tp("dst.bonsai");
    const char *d1 = tp("d1"), *d2 = tp("d2"), *d3 = tp("d3");
    build_store(src, &ds);

    must("%s %s >%s", DUMP, q(src), q(d1));
    cr_assert_eq(count_lines(d1, " "), 2 * ds.entries);
    must("mdb_load -n -f %s %s", q(d1), q(lmdb));
    must("mdb_dump -n -a %s >%s", q(lmdb), q(d2));
    uint64_t n = same_data(d1, d2, 0, "bonsai-dump vs mdb_dump");
    cr_assert_eq(n, 2 * ds.entries);

    must("%s -f %s %s", LOAD, q(d2), q(dst));
    must("%s %s >%s", DUMP, q(dst), q(d3));
    same_data(d1, d3, 0, "bonsai-dump before and after LMDB");
    /* LMDB keeps no key kind: u64 maps come back as 8-byte big-endian
     * byte-string keys, in the same order */
    cr_assert_eq(kind_of(dst, "u64"), BONSAI_KEY_BYTES);
    cr_assert_eq(kind_of(dst, "bin"), BONSAI_KEY_BYTES);
    cr_assert_eq(count_lines(d1, "bonsai_keys=u64"), 2);
    cr_assert_eq(count_lines(d3, "bonsai_keys=u64"), 0);
}

Test(dumpload, bdb_round_trip)
{
    NEED_TOOLS("db_load", "db_dump", "db-util");
    dataset ds = {.key_max = BONSAI_MAX_KEY, .many = tu_scaled(100000, 5000)};
    const char *src = tp("src.bonsai"), *dst = tp("dst.bonsai");
    const char *bdb = tp("data.db");
    const char *d1 = tp("d1"), *d2 = tp("d2"), *d3 = tp("d3");
    const char *p1 = tp("p1"), *p2 = tp("p2");
    build_store(src, &ds);

    must("%s %s >%s", DUMP, q(src), q(d1));
    /* db_load rejects keywords it does not know: strip as documented */
    must("sed '/^mapsize=/d; /^bonsai_keys=/d' %s | db_load %s", q(d1),
         q(bdb));
    must("db_dump %s >%s", q(bdb), q(d2));
    uint64_t n = same_data(d1, d2, 0, "bonsai-dump vs db_dump");
    cr_assert_eq(n, 2 * ds.entries);

    /* print format: bonsai-dump -p and db_dump -p, line for line */
    must("%s -p %s >%s", DUMP, q(src), q(p1));
    must("db_dump -p %s >%s", q(bdb), q(p2));
    n = same_data(p1, p2, 0, "bonsai-dump -p vs db_dump -p");
    cr_assert_eq(n, 2 * ds.entries);

    must("%s -f %s %s", LOAD, q(d2), q(dst));
    must("%s %s >%s", DUMP, q(dst), q(d3));
    same_data(d1, d3, 0, "bonsai-dump before and after Berkeley DB");
    cr_assert_eq(kind_of(dst, "many"), BONSAI_KEY_BYTES);

    /* db_dump's print format loads too */
    const char *dst2 = tp("dst2.bonsai"), *d4 = tp("d4");
    must("%s -f %s %s", LOAD, q(p2), q(dst2));
    must("%s %s >%s", DUMP, q(dst2), q(d4));
    same_file(d3, d4, "loaded from db_dump and db_dump -p");
}

/* The same -T input through db_load -T and bonsai-load -T. */
Test(dumpload, text_input)
{
    const char *in = tp("in.txt"), *st = tp("t.bonsai");
    const char *d1 = tp("d1");
    write_file(in, "k1\nv1\nk\\\\2\n\nk3\nv\\003\n \n\\00\\ff\n"
                   "dup\nfirst\ndup\nsecond\n");
    must("%s -T -s t -f %s %s", LOAD, q(in), q(st));
    must("%s -p %s >%s", DUMP, q(st), q(d1));
    char *got = slurp(d1, NULL);
    const char *want_data = "HEADER=END\n"
                            "  \n \\00\\ff\n"
                            " dup\n second\n"
                            " k1\n v1\n"
                            " k3\n v\\003\n"
                            " k\\\\2\n \n"
                            "DATA=END\n";
    cr_assert(strstr(got, want_data), "got:\n%s", got);
    free(got);
    /* -T needs a map name */
    cr_assert_eq(tu_sh("%s -T -f %s %s 2>/dev/null", LOAD, q(in), q(st)), 2);
    /* a key without its value line */
    write_file(in, "k1\nv1\nk2\n");
    cr_assert_eq(tu_sh("%s -T -s t -f %s %s 2>%s", LOAD, q(in), q(st),
                     q(tp("err"))), 1);
    char *err = slurp(tp("err"), NULL);
    cr_assert(strstr(err, "line 3:") && strstr(err, "missing value line"),
              "stderr: %s", err);
    free(err);

    if (on_path("db_load") && on_path("db_dump")) {
        const char *bdb = tp("t.db"), *d2 = tp("d2");
        write_file(in, "k1\nv1\nk\\\\2\n\nk3\nv\\003\n \n\\00\\ff\n");
        const char *st2 = tp("t2.bonsai");
        must("%s -T -s t -f %s %s", LOAD, q(in), q(st2));
        must("%s %s >%s", DUMP, q(st2), q(d1));
        must("db_load -T -t btree -f %s %s", q(in), q(bdb));
        must("db_dump %s >%s", q(bdb), q(d2));
        same_data(d1, d2, 1, "bonsai-load -T vs db_load -T");
    } else {
        cr_log_info("db_load not on PATH: -T not compared with db_load");
    }
}

/* ---- bonsai to bonsai --------------------------------------------------- */

Test(dumpload, print_round_trip)
{
    dataset ds = {.key_max = BONSAI_MAX_KEY,
                  .many = tu_scaled(100000, 5000)};
    const char *src = tp("src.bonsai"), *dst = tp("dst.bonsai");
    const char *dst2 = tp("dst2.bonsai");
    const char *d1 = tp("d1"), *p1 = tp("p1");
    const char *d2 = tp("d2"), *d3 = tp("d3");
    build_store(src, &ds);
    must("%s %s >%s", DUMP, q(src), q(d1));
    must("%s -p %s >%s", DUMP, q(src), q(p1));
    cr_assert_eq(count_lines(p1, " "), 2 * ds.entries);
    /* through a pipe, print format */
    must("%s <%s %s", LOAD, q(p1), q(dst));
    must("%s %s >%s", DUMP, q(dst), q(d2));
    same_file(d1, d2, "bytevalue dump before and after a print round trip");
    /* key kinds survive between bonsai stores */
    cr_assert_eq(kind_of(dst, "u64"), BONSAI_KEY_U64);
    cr_assert_eq(kind_of(dst, "many"), BONSAI_KEY_U64);
    cr_assert_eq(kind_of(dst, "bin"), BONSAI_KEY_BYTES);
    /* -a is the default; a pipe from bonsai-dump */
    must("%s -a %s | %s %s", DUMP, q(src), LOAD, q(dst2));
    must("%s -f %s %s", DUMP, q(d3), q(dst2));
    same_file(d1, d3, "bytevalue dump through a pipe");
}

/* Exact bytes of both formats. */
Test(dumpload, format_bytes)
{
    const char *st = tp("g.bonsai");
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(st, &o);
    bonsai_map g = tu_map_create(db, NULL, "g", BONSAI_KEY_BYTES);
    bonsai_map n = tu_map_create(db, NULL, "n", BONSAI_KEY_U64);
    put_bytes(NULL, g, "\x00\xff", 2, "", 0);
    put_bytes(NULL, g, "a\\b", 3, "x y", 3);
    put_bytes(NULL, g, "k", 1, "\x7f", 1);
    bonsai_val v = tu_val("v", 1);
    TU_OK(bonsai_put_u64(NULL, n, 1, &v, 0));
    TU_OK(bonsai_put_u64(NULL, n, (UINT64_C(1) << 63) + 2, NULL, 0));
    TU_OK(bonsai_close(db));

    const char *out = tp("out");
    must("%s %s >%s", DUMP, q(st), q(out));
    char *got = slurp(out, NULL);
    const char *ms = strstr(got, "mapsize=");
    cr_assert(ms, "no mapsize: %s", got);
    unsigned long long mapsize = strtoull(ms + 8, NULL, 10);
    cr_assert(mapsize >= (1u << 20) && mapsize % (1u << 20) == 0,
              "mapsize=%llu", mapsize);
    char want[2048];
    snprintf(want, sizeof want,
             "VERSION=3\nformat=bytevalue\ndatabase=g\ntype=btree\n"
             "mapsize=%llu\nHEADER=END\n"
             " 00ff\n \n 615c62\n 782079\n 6b\n 7f\nDATA=END\n"
             "VERSION=3\nformat=bytevalue\ndatabase=n\ntype=btree\n"
             "mapsize=%llu\nbonsai_keys=u64\nHEADER=END\n"
             " 0000000000000001\n 76\n 8000000000000002\n \nDATA=END\n",
             mapsize, mapsize);
    cr_assert_str_eq(got, want);
    free(got);

    must("%s -p %s >%s", DUMP, q(st), q(out));
    got = slurp(out, NULL);
    snprintf(want, sizeof want,
             "VERSION=3\nformat=print\ndatabase=g\ntype=btree\n"
             "mapsize=%llu\nHEADER=END\n"
             " \\00\\ff\n \n a\\\\b\n x y\n k\n \\7f\nDATA=END\n"
             "VERSION=3\nformat=print\ndatabase=n\ntype=btree\n"
             "mapsize=%llu\nbonsai_keys=u64\nHEADER=END\n"
             " \\00\\00\\00\\00\\00\\00\\00\\01\n v\n"
             " \\80\\00\\00\\00\\00\\00\\00\\02\n \nDATA=END\n",
             mapsize, mapsize);
    cr_assert_str_eq(got, want);
    free(got);

    /* -s: one block; -l: the names */
    must("%s -s n %s >%s", DUMP, q(st), q(out));
    got = slurp(out, NULL);
    cr_assert(strncmp(got, "VERSION=3\nformat=bytevalue\ndatabase=n\n", 38) ==
                  0 && strstr(got, "database=g") == NULL,
              "got: %s", got);
    free(got);
    must("%s -l %s >%s", DUMP, q(st), q(out));
    got = slurp(out, NULL);
    cr_assert_str_eq(got, "g\nn\n");
    free(got);
}

Test(dumpload, mapsize_fits_lmdb)
{
    NEED_TOOLS("mdb_load", "mdb_dump", "lmdb-utils");
    /* values that do not fit LMDB's default 1 MiB map, and many small
     * entries with long keys (half-full pages) */
    const char *st = tp("m.bonsai"), *d1 = tp("d1");
    const char *d2 = tp("d2");
    int tmpfs;
    const char *lmdb = fast_path("m.mdb", &tmpfs);
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(st, &o);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    bonsai_map m = tu_map_create(db, txn, "m", BONSAI_KEY_BYTES);
    tu_rng rng = {tu_seed("mapsize", 7)};
    uint8_t *buf = malloc(3u << 20);
    cr_assert(buf);
    for (int i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof k, "big%d", i);
        tu_fill(&rng, buf, (3u << 20) - (size_t)i);
        put_bytes(txn, m, k, strlen(k), buf, (3u << 20) - (size_t)i);
    }
    uint64_t n = tu_scaled(4000, 1000);
    for (uint64_t i = 0; i < n; i++) {
        tu_fill(&rng, buf, 511);
        put_bytes(txn, m, buf, 511, buf, 300);
    }
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
    free(buf);
    must("%s %s >%s", DUMP, q(st), q(d1));
    must("mdb_load -n -f %s %s", q(d1), q(lmdb));
    must("mdb_dump -n -a %s >%s", q(lmdb), q(d2));
    cr_assert_eq(same_data(d1, d2, 0, "bonsai-dump vs mdb_dump"),
                 2 * (n + 3));
}

/* -s renames; -N keeps existing values; empty stores and inputs. */
Test(dumpload, options)
{
    const char *src = tp("src.bonsai"), *dst = tp("dst.bonsai");
    const char *out = tp("out"), *in = tp("in");
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(src, &o);
    bonsai_map u = tu_map_create(db, NULL, "u", BONSAI_KEY_U64);
    bonsai_val v = tu_val("x", 1);
    TU_OK(bonsai_put_u64(NULL, u, 42, &v, 0));
    TU_OK(bonsai_close(db));

    must("%s -s u %s | %s -s renamed %s", DUMP, q(src), LOAD, q(dst));
    cr_assert_eq(kind_of(dst, "renamed"), BONSAI_KEY_U64);
    must("%s -l %s >%s", DUMP, q(dst), q(out));
    char *got = slurp(out, NULL);
    cr_assert_str_eq(got, "renamed\n");
    free(got);

    /* -N: existing keys and the first of repeated input keys win */
    db = tu_open(dst, &o);
    bonsai_map b = tu_map_create(db, NULL, "b", BONSAI_KEY_BYTES);
    put_bytes(NULL, b, "a", 1, "old", 3);
    TU_OK(bonsai_close(db));
    write_file(in, "VERSION=3\nformat=print\ndatabase=b\ntype=btree\n"
                   "HEADER=END\n a\n new\n c\n first\n c\n second\n"
                   "DATA=END\n");
    must("%s -N -f %s %s", LOAD, q(in), q(dst));
    must("%s -p -s b %s >%s", DUMP, q(dst), q(out));
    got = slurp(out, NULL);
    cr_assert(strstr(got, "HEADER=END\n a\n old\n c\n first\nDATA=END\n"),
              "got: %s", got);
    free(got);
    must("%s -f %s %s", LOAD, q(in), q(dst));
    must("%s -p -s b %s >%s", DUMP, q(dst), q(out));
    got = slurp(out, NULL);
    cr_assert(strstr(got, "HEADER=END\n a\n new\n c\n second\nDATA=END\n"),
              "got: %s", got);
    free(got);

    /* a store without maps dumps to nothing, and nothing loads */
    const char *empty = tp("empty.bonsai"), *e2 = tp("e2.bonsai");
    db = tu_open(empty, &o);
    TU_OK(bonsai_close(db));
    must("%s %s >%s", DUMP, q(empty), q(out));
    size_t len = 1;
    free(slurp(out, &len));
    cr_assert_eq(len, 0);
    must("%s -f %s %s", LOAD, q(out), q(e2));
    must("%s -l %s >%s", DUMP, q(e2), q(out));
    free(slurp(out, &len));
    cr_assert_eq(len, 0);

    /* warnings for keywords bonsai does not know, like mdb_load */
    write_file(in, "VERSION=3\nformat=bytevalue\ndatabase=w\ntype=btree\n"
                   "maxreaders=126\ndb_pagesize=4096\nfoo=bar\n"
                   "HEADER=END\n 61\n 62\nDATA=END\n");
    cr_assert_eq(tu_sh("%s -f %s %s 2>%s", LOAD, q(in), q(dst),
                     q(tp("err"))), 0);
    got = slurp(tp("err"), NULL);
    cr_assert(strstr(got, "line 7: unrecognized keyword ignored: foo"),
              "stderr: %s", got);
    cr_assert(!strstr(got, "maxreaders") && !strstr(got, "db_pagesize"),
              "stderr: %s", got);
    free(got);
}

/* ---- malformed input ---------------------------------------------------- */

/* The first 13 lines of every bad input: a new key for the existing map
 * and a new map, so an aborted load has something to undo. */
#define PREFIX                                                               \
    "VERSION=3\nformat=bytevalue\ndatabase=keep\ntype=btree\nHEADER=END\n"   \
    " 6e6577\n 76\nDATA=END\n"                                               \
    "VERSION=3\nformat=bytevalue\ndatabase=fresh\ntype=btree\nHEADER=END\n"

static const struct bad {
    const char *input; /* after PREFIX */
    const char *line;  /* "line N:" expected in stderr */
    const char *why;   /* and this */
} bad_inputs[] = {
    {" 616\n 62\nDATA=END\n", "line 14:", "odd number of hex digits"},
    {" 61\n 6\nDATA=END\n", "line 15:", "odd number of hex digits"},
    {" 6g\n 62\nDATA=END\n", "line 14:", "not a hex digit"},
    {" 61\nDATA=END\n", "line 15:", "missing value line"},
    {" 61\n 62\n 63\n", "line 16:", "missing value line"},
    {" 61\n 62\n", "line 15:", "unexpected end of input"},
    {" 61\n 62\nDATA=END\nVERSION=3\nformat=base64\n", "line 18:",
     "unknown format"},
    {" 61\n 62\nDATA=END\nVERSION=3\ndatabase=x\n", "line 18:",
     "unexpected end of input"},
    {"61\n 62\nDATA=END\n", "line 14:", "expected a key line"},
    {" 61\n62\nDATA=END\n", "line 15:", "expected a value line"},
    {" \nx\nDATA=END\n", "line 15:", "expected a value line"},
    {" \n \nDATA=END\n", "line 14:",
     "key empty, too long or of the wrong size"},
    {" 61\n 62\nDATA=END\nVERSION=3\nformat=print\ndatabase=p\n"
     "HEADER=END\n a\\q\n b\nDATA=END\n",
     "line 21:", "bad escape"},
    {" 61\n 62\nDATA=END\nVERSION=3\ndatabase=n\nbonsai_keys=u64\n"
     "HEADER=END\n 0102\n 62\nDATA=END\n",
     "line 21:", "a u64 key is 8 bytes"},
    {" 61\n 62\nDATA=END\nVERSION=3\ndatabase=keep\nbonsai_keys=u64\n"
     "HEADER=END\n 0000000000000001\n 62\nDATA=END\n",
     "line 20:", "map has the other key kind"},
    {" 61\n 62\nDATA=END\nVERSION=4\n", "line 17:", "unsupported VERSION"},
    {" 61\n 62\nDATA=END\nVERSION=3\ndupsort=1\n", "line 18:",
     "duplicate keys"},
    {" 61\n 62\nDATA=END\nVERSION=3\ntype=recno\n", "line 18:",
     "unsupported type"},
    {" 61\n 62\nDATA=END\n 61\n", "line 17:", "expected a header line"},
    {" 61\n 62\nDATA=END\nVERSION=3\nHEADER=END\n 61\n 62\nDATA=END\n",
     "line 18:", "no database= line"},
};

Test(dumpload, malformed_input)
{
    const char *st = tp("keep.bonsai"), *before = tp("before");
    const char *after = tp("after"), *in = tp("in");
    const char *err = tp("err");
    const char *absent = tp("absent.bonsai");
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(st, &o);
    bonsai_map keep = tu_map_create(db, NULL, "keep", BONSAI_KEY_BYTES);
    put_bytes(NULL, keep, "a", 1, "1", 1);
    put_bytes(NULL, keep, "b", 1, "", 0);
    TU_OK(bonsai_close(db));
    must("%s %s >%s", DUMP, q(st), q(before));

    for (size_t i = 0; i < sizeof bad_inputs / sizeof bad_inputs[0]; i++) {
        const struct bad *b = &bad_inputs[i];
        char text[1024];
        snprintf(text, sizeof text, "%s%s", PREFIX, b->input);
        write_file(in, text);
        int rc = tu_sh("%s -f %s %s 2>%s", LOAD, q(in), q(st), q(err));
        char *msg = slurp(err, NULL);
        cr_assert_eq(rc, 1, "case %zu: exit %d, stderr: %s", i, rc, msg);
        cr_assert(strstr(msg, b->line) && strstr(msg, b->why),
                  "case %zu: stderr lacks \"%s ... %s\": %s", i, b->line,
                  b->why, msg);
        free(msg);
        must("%s %s >%s", DUMP, q(st), q(after));
        same_file(before, after, "the store after a failed load");

        /* into a store that did not exist: it still does not */
        rc = tu_sh("%s -f %s %s 2>/dev/null", LOAD, q(in), q(absent));
        cr_assert_eq(rc, 1, "case %zu (new store): exit %d", i, rc);
        cr_assert(access(absent, F_OK) != 0,
                  "case %zu: a failed load left %s behind", i, absent);
    }

    /* a key over BONSAI_MAX_KEY bytes */
    char *text = malloc(4096);
    cr_assert(text);
    int off = snprintf(text, 4096, "%s ", PREFIX);
    for (unsigned i = 0; i <= BONSAI_MAX_KEY; i++)
        off += snprintf(text + off, 4096 - (size_t)off, "6b");
    snprintf(text + off, 4096 - (size_t)off, "\n 62\nDATA=END\n");
    write_file(in, text);
    free(text);
    cr_assert_eq(tu_sh("%s -f %s %s 2>%s", LOAD, q(in), q(st), q(err)), 1);
    char *msg = slurp(err, NULL);
    cr_assert(strstr(msg, "line 14:"), "stderr: %s", msg);
    free(msg);
    must("%s %s >%s", DUMP, q(st), q(after));
    same_file(before, after, "the store after a failed load");
}

/* ---- usage and failures ------------------------------------------------- */

/* Does the file hold some bonsai_strerror text? */
static int has_strerror(const char *path)
{
    char *s = slurp(path, NULL);
    int found = 0;
    for (int rc = BONSAI_NOTFOUND; rc >= BONSAI_TXNID_FULL && !found; rc--)
        found = strstr(s, bonsai_strerror(rc)) != NULL;
    free(s);
    return found;
}

Test(dumpload, usage)
{
    const char *out = tp("out");
    cr_assert_eq(tu_sh("%s --help >%s", DUMP, q(out)), 0);
    char *s = slurp(out, NULL);
    cr_assert(strstr(s, "SYNOPSIS") && strstr(s, "EXIT STATUS") &&
                  strstr(s, "bonsai_keys=u64"),
              "%s", s);
    free(s);
    cr_assert_eq(tu_sh("%s --help >%s", LOAD, q(out)), 0);
    s = slurp(out, NULL);
    cr_assert(strstr(s, "SYNOPSIS") && strstr(s, "-T") && strstr(s, "-N"),
              "%s", s);
    free(s);

    static const char *dump_bad[] = {
        "", "-x f", "a b", "-a -s m f", "-s", "--nope f", "-l -p f",
    };
    for (size_t i = 0; i < sizeof dump_bad / sizeof dump_bad[0]; i++)
        cr_assert_eq(tu_sh("%s %s 2>/dev/null", DUMP, dump_bad[i]), 2,
                     "bonsai-dump %s", dump_bad[i]);
    static const char *load_bad[] = {
        "", "-x f", "a b", "-T f", "-f", "--nope f",
    };
    for (size_t i = 0; i < sizeof load_bad / sizeof load_bad[0]; i++)
        cr_assert_eq(tu_sh("%s %s </dev/null 2>/dev/null", LOAD, load_bad[i]),
                     2, "bonsai-load %s", load_bad[i]);
}

Test(dumpload, failures)
{
    const char *err = tp("err"), *st = tp("ok.bonsai");
    const char *garbage = tp("garbage"), *empty = tp("empty");
    const char *dump = tp("dump");
    bonsai_options o = file_opts();
    bonsai_db *db = tu_open(st, &o);
    bonsai_map m = tu_map_create(db, NULL, "m", BONSAI_KEY_BYTES);
    put_bytes(NULL, m, "k", 1, "v", 1);
    TU_OK(bonsai_close(db));
    must("%s %s >%s", DUMP, q(st), q(dump));

    tu_rng rng = {tu_seed("garbage", 3)};
    uint8_t junk[65536];
    tu_fill(&rng, junk, sizeof junk);
    FILE *f = fopen(garbage, "wb");
    cr_assert(f && fwrite(junk, 1, sizeof junk, f) == sizeof junk);
    fclose(f);
    write_file(empty, "");

    const char *dump_fail[] = {
        tp("missing"), tu_tmpdir(), garbage, empty,
    };
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(tu_sh("%s %s >/dev/null 2>%s", DUMP, q(dump_fail[i]),
                         q(err)), 1, "bonsai-dump %s", dump_fail[i]);
        cr_assert(has_strerror(err), "bonsai-dump %s: no bonsai_strerror "
                  "text in: %s", dump_fail[i], slurp(err, NULL));
    }
    cr_assert_eq(tu_sh("%s -s nosuch %s >/dev/null 2>%s", DUMP, q(st),
                     q(err)), 1);
    cr_assert(has_strerror(err));
    /* a write error */
    if (access("/dev/full", W_OK) == 0)
        cr_assert_eq(tu_sh("%s %s >/dev/full 2>/dev/null", DUMP, q(st)), 1);

    /* load into a directory, a garbage file, from a missing input */
    cr_assert_eq(tu_sh("%s -f %s %s 2>%s", LOAD, q(dump), q(tu_tmpdir()),
                     q(err)), 1);
    cr_assert(has_strerror(err));
    cr_assert_eq(tu_sh("%s -f %s %s 2>%s", LOAD, q(dump), q(garbage), q(err)),
                 1);
    cr_assert(has_strerror(err));
    size_t len;
    uint8_t *now = (uint8_t *)slurp(garbage, &len);
    cr_assert(len == sizeof junk && memcmp(now, junk, len) == 0,
              "bonsai-load changed a file it could not open as a store");
    free(now);
    cr_assert_eq(tu_sh("%s -f %s %s 2>/dev/null", LOAD,
                     q(tp("missing")), q(st)), 1);

    /* a read-only store file: as root, run the load as nobody */
    const char *ro = tp("ro.bonsai"), *before = tp("before");
    const char *after = tp("after");
    must("%s -f %s %s", LOAD, q(dump), q(ro));
    must("%s %s >%s", DUMP, q(ro), q(before));
    cr_assert(chmod(ro, 0444) == 0 && chmod(dump, 0644) == 0);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -f %s %s", LOAD, q(dump), q(ro));
    int rc;
    if (geteuid() == 0) {
        cr_assert(chmod(tu_tmpdir(), 0755) == 0);
        char full[4200];
        snprintf(full, sizeof full, "%s 2>%s", cmd, q(tp("ro.err")));
        /* the error file must be writable by nobody */
        write_file(tp("ro.err"), "");
        cr_assert(chmod(tp("ro.err"), 0666) == 0);
        rc = tu_sh_as(65534, full);
        cr_assert(chmod(tu_tmpdir(), 0700) == 0);
        if (rc == 125 || rc == 126 || rc == 127) {
            cr_log_info("cannot run as nobody (exit %d): read-only load "
                        "not checked", rc);
        } else {
            cr_assert_eq(rc, 1, "load into a read-only file: exit %d", rc);
            char *msg = slurp(tp("ro.err"), NULL);
            cr_assert(strstr(msg, bonsai_strerror(BONSAI_READONLY)),
                      "stderr: %s", msg);
            free(msg);
        }
    } else {
        char full[4200];
        snprintf(full, sizeof full, "%s 2>%s", cmd, q(tp("ro.err")));
        cr_assert_eq(tu_sh_as(-1, full), 1);
        char *msg = slurp(tp("ro.err"), NULL);
        cr_assert(strstr(msg, bonsai_strerror(BONSAI_READONLY)),
                  "stderr: %s", msg);
        free(msg);
    }
    /* it still dumps (read-only open) and is unchanged */
    must("%s %s >%s", DUMP, q(ro), q(after));
    same_file(before, after, "read-only store after a refused load");
}

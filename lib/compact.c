/* SPDX-License-Identifier: MIT */
/*
 * compact.c - bonsai_compact: a copy of a store's last commit with every
 * node full and no free space.
 *
 * Steps (each failure removes the temporary file; dst_path is replaced
 * only at the end, by rename):
 *  1. transaction mode: the source is verified (bonsai_verify, full), and
 *     read in one snapshot; no-transaction mode: it is synced (its write
 *     cache written back, so that the size rule sees what it holds), then
 *     read as it stands (the store is single-threaded there).  The
 *     source's contents never change.
 *  2. a temporary file "<dst_path>.compact-<pid>-<n>" is created beside
 *     dst_path (O_EXCL, the options' file_mode), and a store opened on it
 *     with transactions off and a write cache of at least 32 MiB;
 *  3. every map is created with its kind and filled in key order through
 *     the public calls, so every insert is an append: the rightmost leaf
 *     splits leaving the left node full (shape.c), and the write cache
 *     writes each node image once;
 *  4. the copy is closed (written back and synced), cut to its high-water
 *     mark (rounded up to the OS page) and synced again;
 *  5. it is reopened read-only and verified (full), and its maps and their
 *     entry counts must be the source's;
 *  6. the size rule: with the source's settings the copy must not be
 *     larger than the source (its file, or the bytes an anonymous store
 *     uses); if it is, nothing is renamed and BONSAI_FULL is returned;
 *  7. rename over dst_path, then sync the directory.
 * The source may be a read-only handle on a store another process is
 * writing: its snapshot is published in the lock file, and the copy is
 * of that commit.  bx_compact (compact.h) tells a callback how far steps
 * 1, 3 and 5 are, for a tool to show.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compact.h"
#include "internal.h"

#define BUILD_CACHE (UINT64_C(32) << 20) /* write cache of the copy */
#define TEMP_TRIES 100
#define TELL_EVERY 4096 /* entries copied between two calls of tell */

/* A map of the source: name, kind, entries. */
typedef struct cmap {
    char *name;
    unsigned kind;
    uint64_t count;
} cmap;

typedef struct cmaps {
    cmap *v;
    size_t n, cap;
} cmaps;

static int io_error(int e)
{
    if (e == ENOSPC || e == EDQUOT)
        return BONSAI_ENOSPC;
    return e == ENOMEM ? BONSAI_NOMEM : BONSAI_IO;
}

/* ---- the maps ----------------------------------------------------------- */

static int add_map(void *ctx, const char *name, unsigned kind,
                   uint64_t count)
{
    cmaps *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        cmap *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return BONSAI_NOMEM;
        l->v = v;
        l->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return BONSAI_NOMEM;
    l->v[l->n++] = (cmap){copy, kind, count};
    return 0;
}

static void free_maps(cmaps *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
    *l = (cmaps){0};
}

static int same_maps(const cmaps *a, const cmaps *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i].name, b->v[i].name) != 0 ||
            a->v[i].kind != b->v[i].kind || a->v[i].count != b->v[i].count)
            return 0;
    return 1;
}

/* ---- telling how far it is --------------------------------------------- */

/* The caller's callback, and where the step is. */
typedef struct tell {
    bx_compact_progress_fn fn; /* NULL: nobody asked */
    void *ctx;
    bx_compact_step step;
    uint64_t done, total;
} tell;

static void tell_now(tell *t)
{
    if (t->fn)
        t->fn(t->ctx, t->step, t->done, t->total);
}

static void tell_step(tell *t, bx_compact_step step, uint64_t total)
{
    t->step = step;
    t->done = 0;
    t->total = total;
    tell_now(t);
}

/* bonsai_verify's progress, passed on. */
static void tell_verified(void *ctx, uint64_t done, uint64_t total)
{
    tell *t = ctx;
    t->done = done;
    t->total = total;
    tell_now(t);
}

/* ---- copying ------------------------------------------------------------ */

/* Every entry of one map, from one handle to the other, in key order:
 * appends only. */
static int copy_entries(bonsai_txn *txn, bonsai_map from, bonsai_map to,
                        tell *t)
{
    bonsai_cursor *cur;
    int rc = bonsai_cursor_open(txn, from, &cur);
    if (rc)
        return rc;
    for (rc = bonsai_cursor_first(cur); rc == 0;
         rc = bonsai_cursor_next(cur)) {
        bonsai_val k, v;
        if ((rc = bonsai_cursor_get(cur, &k, &v)) ||
            (rc = bonsai_put(NULL, to, &k, &v, 0)))
            break;
        if (++t->done % TELL_EVERY == 0)
            tell_now(t);
    }
    bonsai_cursor_close(cur);
    return rc == BONSAI_NOTFOUND ? 0 : rc;
}

/* One map, its handles closed after it: a store may hold more maps than
 * a handle opens at once (the source's handle is the caller's own if it
 * had the map open: closing undoes only this open). */
static int copy_map(bonsai_db *src, bonsai_txn *txn, bonsai_db *dst,
                    const cmap *m, tell *t)
{
    bonsai_map from, to;
    unsigned kind;
    int rc = bonsai_map_open(src, txn, m->name, &from, &kind);
    if (rc)
        return rc;
    if ((rc = bonsai_map_create(dst, NULL, m->name, m->kind, &to)) == 0) {
        rc = copy_entries(txn, from, to, t);
        int rc2 = bonsai_map_close(dst, to);
        if (rc == 0)
            rc = rc2;
    }
    int rc2 = bonsai_map_close(src, from);
    return rc ? rc : rc2;
}

static int copy_all(bonsai_db *src, bonsai_txn *txn, bonsai_db *dst,
                    cmaps *maps, tell *t)
{
    int rc = bonsai_map_list(src, txn, add_map, maps);
    uint64_t total = 0;
    for (size_t i = 0; i < maps->n; i++)
        total += maps->v[i].count;
    tell_step(t, BX_COMPACT_COPY, total);
    for (size_t i = 0; rc == 0 && i < maps->n; i++)
        rc = copy_map(src, txn, dst, &maps->v[i], t);
    return rc;
}

/* ---- files -------------------------------------------------------------- */

/* Creates "<dst>.compact-<pid>-<n>" exclusively; *out is malloc'd. */
static int temp_create(const char *dst, uint32_t mode, char **out)
{
    size_t cap = strlen(dst) + 48;
    char *p = malloc(cap);
    if (!p)
        return BONSAI_NOMEM;
    for (int i = 0; i < TEMP_TRIES; i++) {
        snprintf(p, cap, "%s.compact-%ld-%d", dst, (long)getpid(), i);
        int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
        if (fd >= 0) {
            close(fd);
            *out = p;
            return 0;
        }
        if (errno != EEXIST) {
            int rc = io_error(errno);
            free(p);
            return rc;
        }
    }
    free(p);
    return BONSAI_IO;
}

/* Cuts the file to bytes (rounded up to the OS page) and syncs it. */
static int cut_and_sync(const char *path, uint64_t bytes)
{
    long os = sysconf(_SC_PAGESIZE);
    uint64_t page = os > 0 ? (uint64_t)os : 4096;
    bytes = (bytes + page - 1) / page * page;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return io_error(errno);
    int rc = 0;
    if (ftruncate(fd, (off_t)bytes) != 0 || fdatasync(fd) != 0)
        rc = io_error(errno);
    if (close(fd) != 0 && rc == 0)
        rc = io_error(errno);
    return rc;
}

static int sync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path + 1))
                      : strdup(".");
    if (!dir)
        return BONSAI_NOMEM;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    free(dir);
    if (fd < 0)
        return io_error(errno);
    if (fsync(fd) != 0)
        rc = io_error(errno);
    close(fd);
    return rc;
}

static uint64_t file_bytes(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* What the size rule compares with: the file, or the bytes used. */
static uint64_t source_bytes(bonsai_db *src)
{
    struct stat st;
    if (!src->anonymous && fstat(src->fd, &st) == 0)
        return (uint64_t)st.st_size;
    return src->al.end * src->page_size;
}

/* dst_path must not be the source itself, nor anything but a regular
 * file (or nothing). */
static int dst_ok(bonsai_db *src, const char *dst)
{
    struct stat d, s;
    if (stat(dst, &d) != 0)
        return errno == ENOENT ? 0 : io_error(errno);
    /* the rename would replace whatever dst is: only a regular file */
    if (!S_ISREG(d.st_mode))
        return BONSAI_IO;
    if (!src->anonymous && fstat(src->fd, &s) == 0 && s.st_dev == d.st_dev &&
        s.st_ino == d.st_ino)
        return BONSAI_INVALID;
    return 0;
}

/* ---- the copy's options ------------------------------------------------- */

static int copy_options(const bonsai_db *src, const bonsai_options *opts,
                        bonsai_options *o)
{
    int rc = bx_options_take(opts, o);
    if (rc)
        return rc;
    if (!opts) {
        o->page_size = src->page_size;
        o->node_bytes = src->opt.node_bytes;
        o->node_entries = src->opt.node_entries;
        o->compression = src->opt.compression;
        o->compression_level = src->opt.compression_level;
    }
    /* room for any sane settings; the file grows only as needed */
    uint64_t src_bytes = src->al.end * src->page_size; /* <= its file */
    uint64_t want = src_bytes < BONSAI_MAX_SIZE / 8
                        ? 4 * src_bytes + (UINT64_C(64) << 20)
                        : BONSAI_MAX_SIZE;
    if (o->max_size < want)
        o->max_size = want;
    if (o->write_cache_bytes < BUILD_CACHE)
        o->write_cache_bytes = BUILD_CACHE;
    o->flush_delay_ms = 0;
    o->transactions = 0;
    o->sync = 1;
    o->read_only = 0;
    o->create = 0;
    return 0;
}

static int same_settings(const bonsai_db *src, const bonsai_options *o)
{
    int level = o->compression == BONSAI_COMPRESS_ZLIB
                    ? o->compression_level : 0;
    int src_level = src->opt.compression == BONSAI_COMPRESS_ZLIB
                        ? src->opt.compression_level : 0;
    return bx_page_size_for(o) == src->page_size &&
           o->node_bytes == src->opt.node_bytes &&
           o->node_entries == src->opt.node_entries &&
           o->compression == src->opt.compression && level == src_level;
}

/* ---- the steps ---------------------------------------------------------- */

/* A full verify of db, told as step (the walk's first call tells it
 * starts, with its total). */
static int count_problems(bonsai_db *db, tell *t, bx_compact_step step)
{
    uint64_t problems;
    t->step = step;
    int rc = bonsai_verify(db, 0, NULL, t->fn ? tell_verified : NULL, t,
                           &problems);
    return rc ? rc : problems ? BONSAI_CORRUPT : 0;
}

/* Steps 3 and 4: the copy, written, closed and cut to size. */
static int build(bonsai_db *src, bonsai_txn *txn, bonsai_db *dst,
                 const char *tmp, cmaps *maps, tell *t)
{
    int rc = copy_all(src, txn, dst, maps, t);
    if (rc == 0)
        rc = bonsai_sync(dst);
    uint64_t bytes = dst->al.end * dst->page_size;
    int rc2 = bonsai_close(dst);
    if (rc == 0)
        rc = rc2;
    return rc ? rc : cut_and_sync(tmp, bytes);
}

/* The read-only open made a lock file beside the copy; nobody else knows
 * the copy's name, so nobody else uses it. */
static void drop_lock_file(const char *tmp)
{
    size_t len = strlen(tmp);
    char *p = malloc(len + sizeof "-lock");
    if (!p)
        return;
    memcpy(p, tmp, len);
    memcpy(p + len, "-lock", sizeof "-lock");
    unlink(p);
    free(p);
}

/* Step 5: the copy verifies and holds the source's maps. */
static int check_copy(const char *tmp, const bonsai_options *o,
                      const cmaps *maps, tell *t)
{
    bonsai_options ro = *o;
    ro.read_only = 1;
    ro.transactions = -1;
    bonsai_db *db;
    int rc = bonsai_open(tmp, &ro, &db);
    if (rc)
        return rc;
    cmaps got = {0};
    rc = count_problems(db, t, BX_COMPACT_VERIFY_COPY);
    if (rc == 0)
        rc = bonsai_map_list(db, NULL, add_map, &got);
    if (rc == 0 && !same_maps(maps, &got))
        rc = BONSAI_CORRUPT;
    free_maps(&got);
    bonsai_close(db);
    drop_lock_file(tmp);
    return rc;
}

/* Steps 1 to 6 into tmp, which exists (empty). */
static int make_copy(bonsai_db *src, const char *tmp,
                     const bonsai_options *o, tell *t)
{
    bonsai_db *dst;
    int rc = bonsai_open(tmp, o, &dst); /* first: bad options fail fast */
    if (rc)
        return rc;
    bonsai_txn *txn = NULL;
    if (!src->cow)
        rc = bonsai_sync(src);
    else if ((rc = count_problems(src, t, BX_COMPACT_VERIFY_SOURCE)) == 0)
        rc = bonsai_txn_begin(src, BONSAI_TXN_RDONLY, &txn);
    if (rc) {
        bonsai_close(dst);
        return rc;
    }
    cmaps maps = {0};
    rc = build(src, txn, dst, tmp, &maps, t);
    bonsai_txn_abort(txn);
    if (rc == 0)
        rc = check_copy(tmp, o, &maps, t);
    free_maps(&maps);
    if (rc == 0 && same_settings(src, o) &&
        file_bytes(tmp) > source_bytes(src))
        rc = BONSAI_FULL;
    return rc;
}

int bonsai_compact(bonsai_db *src, const char *dst_path,
                   const bonsai_options *opts)
{
    return bx_compact(src, dst_path, opts, NULL, NULL);
}

int bx_compact(bonsai_db *src, const char *dst_path,
               const bonsai_options *opts, bx_compact_progress_fn fn,
               void *ctx)
{
    if (!src || !dst_path || !*dst_path)
        return BONSAI_INVALID;
    int rc = dst_ok(src, dst_path);
    if (rc)
        return rc;
    bonsai_options o;
    if ((rc = copy_options(src, opts, &o)))
        return rc;
    char *tmp;
    if ((rc = temp_create(dst_path, o.file_mode, &tmp)))
        return rc;
    tell t = {.fn = fn, .ctx = ctx};
    rc = make_copy(src, tmp, &o, &t);
    if (rc == 0 && rename(tmp, dst_path) != 0)
        rc = io_error(errno);
    if (rc)
        unlink(tmp);
    else
        rc = sync_dir_of(dst_path);
    free(tmp);
    return rc;
}

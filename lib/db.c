/* SPDX-License-Identifier: MIT */
/*
 * db.c - opening and closing a store: options, the file's header and meta
 * slots, the locks between processes (and the lock file, readers.h), the
 * mapping; free space is derived by space.c.
 *
 * File layout: header at 0, meta slots at 512 and 1024, node pages from
 * max(4096, page_size) on.  Anonymous stores use the same page numbering
 * and simply never write the header or meta slots.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btree.h"
#include "cache.h"
#include "put.h"
#include "internal.h"
#include "maps.h"
#include "metaslot.h"
#include "space.h"
#include "txn.h"
#include "wait.h"

#define DEFAULT_MAX_SIZE (UINT64_C(1) << 30)
#define MIN_MAX_SIZE (UINT64_C(64) << 10)

/* The smallest bonsai_options a program may hand in: the struct of the
 * first header that had struct_size.  Fields added later go after it. */
#define OPTIONS_MIN_SIZE (offsetof(bonsai_options, compression_level) + \
                          sizeof(int))

static void options_defaults(bonsai_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = (uint32_t)sizeof *o;
    o->page_size = 0; /* the default: bx_page_size_for */
    o->node_bytes = 4096;
    o->node_entries = 4096;
    o->transactions = -1;
    o->sync = 1;
    o->create = 1;
    o->file_mode = 0644;
    o->write_cache_bytes = UINT64_C(32) << 20;
}

/* Writes the defaults into the caller's size bytes: a program built
 * against an older header has a smaller struct, one built against a newer
 * header a larger one, whose fields this library does not know (zeroed
 * here; bonsai_open refuses that size rather than ignore them). */
void bonsai_options_init_sized(bonsai_options *o, size_t size)
{
    if (!o || size < OPTIONS_MIN_SIZE || size > UINT32_MAX)
        return;
    bonsai_options d;
    options_defaults(&d);
    d.struct_size = (uint32_t)size;
    if (size > sizeof d) {
        memset((char *)o + sizeof d, 0, size - sizeof d);
        size = sizeof d;
    }
    memcpy(o, &d, size);
}

/* The caller's options over the defaults, or BONSAI_INVALID for a size
 * this library does not know (a newer header's fields it cannot honour,
 * or a struct not set up by bonsai_options_init). */
int bx_options_take(const bonsai_options *in, bonsai_options *out)
{
    options_defaults(out);
    if (!in)
        return 0;
    size_t size = in->struct_size;
    if (size < OPTIONS_MIN_SIZE || size > sizeof *out)
        return BONSAI_INVALID;
    memcpy(out, in, size);
    out->struct_size = (uint32_t)sizeof *out;
    return 0;
}

/* With cache_in_cap the cache takes less than half of a cap. */
static int cache_fits_cap(const bonsai_options *o, uint64_t cap)
{
    return !o->cache_in_cap || o->write_cache_bytes < cap / 2;
}

/* The first option out of its range, as a sentence, or NULL. */
static const char *options_problem(const bonsai_options *o)
{
    uint32_t p = o->page_size;
    if (p != 0 && (p < BX_PAGE_MIN || p > BX_PAGE_MAX || (p & (p - 1))))
        return "page_size must be a power of two from 64 to 65536";
    if (o->node_bytes < 256 || o->node_bytes > (1u << 20))
        return "node_bytes must be from 256 to 1048576";
    if (o->node_entries < 2 || o->node_entries > BONSAI_MAX_NODE_ENTRIES)
        return "node_entries must be from 2 to 65535";
    if (o->compression > BONSAI_COMPRESS_ZLIB)
        return "compression must be BONSAI_COMPRESS_NONE, _LZ4 or _ZLIB";
    if (o->compression_level < 0 || o->compression_level > 9)
        return "compression_level must be from 0 to 9";
    if (o->max_size != 0 &&
        (o->max_size < MIN_MAX_SIZE || o->max_size > BONSAI_MAX_SIZE))
        return "max_size must be 0 (the store's own cap) or from 64 KiB "
               "to BONSAI_MAX_SIZE (2^63 bytes)";
    if (o->cache_in_cap != 0 && o->cache_in_cap != 1)
        return "cache_in_cap must be 0 or 1";
    if (!cache_fits_cap(o, o->max_size ? o->max_size : DEFAULT_MAX_SIZE))
        return "write_cache_bytes must be below half of max_size when "
               "cache_in_cap is 1";
    return NULL;
}

static int options_valid(const bonsai_options *o)
{
    return options_problem(o) == NULL;
}

const char *bonsai_options_check(const bonsai_options *opts)
{
    bonsai_options o;
    if (!opts)
        return NULL;
    if (bx_options_take(opts, &o) != 0)
        return "struct_size is not that of a bonsai_options: start from "
               "bonsai_options_init (or the program's bonsai.h is newer "
               "than the library)";
    return options_problem(&o);
}

/* The bytes the store's pages may take of a cap: all of it, or with
 * cache_in_cap in memory what the write cache leaves. */
static uint64_t store_cap(const bonsai_db *db, uint64_t cap)
{
    if (!cache_in_cap(db))
        return cap;
    return cap - db->opt.write_cache_bytes;
}

static uint64_t head_bytes(uint32_t page_size)
{
    return page_size > BX_HEAD_BYTES ? page_size : BX_HEAD_BYTES;
}

/* ---- the cap ------------------------------------------------------------ */

/* The cap this handle starts with: the opener's max_size, else the one
 * the store records (format version 2), else the default. */
static uint64_t opening_cap(const bonsai_db *db)
{
    if (db->opt.max_size)
        return db->opt.max_size;
    if (db->meta.cap_pages)
        return db->meta.cap_pages * db->page_size;
    return DEFAULT_MAX_SIZE;
}

/* ---- header and meta --------------------------------------------------- */

static int write_header(bonsai_db *db)
{
    uint8_t buf[BX_HEAD_BYTES];
    memset(buf, 0, sizeof buf);
    uint32_t flags = db->opt.compression |
                     (uint32_t)db->opt.compression_level << 4;
    bx_header h = {BX_FORMAT_VERSION, db->opt.page_size, db->opt.node_bytes,
                   db->opt.node_entries, flags};
    bx_header_encode(&h, buf);
    bx_meta m = {0};
    m.end = db->first_pgno;
    m.cap_pages = bx_cap_pages_of(opening_cap(db), db->page_size);
    bx_meta_encode(&m, buf + BX_META_OFF(0));
    int rc = db->io.truncate(db->io.ctx, db->fd, head_bytes(db->page_size));
    if (rc == 0)
        rc = db->io.pwrite(db->io.ctx, db->fd, buf, sizeof buf, 0);
    if (rc == 0)
        rc = db->io.fsync(db->io.ctx, db->fd);
    return rc;
}

static int read_meta(bonsai_db *db, const uint8_t *head, uint64_t fsize)
{
    bx_meta m;
    if (bx_meta_pick(head, db->first_pgno, &m))
        return BONSAI_CORRUPT;
    /* A commit's pages are in the file before its meta slot is written,
     * so a newest commit that reaches past the end means the file was
     * cut: refuse it rather than quietly open the commit before. */
    if (m.end > fsize / db->page_size)
        return BONSAI_CORRUPT;
    db->meta = m;
    return 0;
}

static int file_size(bonsai_db *db, uint64_t *size)
{
    struct stat st;
    if (fstat(db->fd, &st) != 0)
        return BONSAI_IO;
    *size = (uint64_t)st.st_size;
    return 0;
}

/* Reads the header, adopts the settings fixed at creation, picks a meta.
 * A reader sizes the file after reading the meta: a writer in another
 * process grows the file before it commits. */
static int load_file(bonsai_db *db, uint64_t *size)
{
    uint8_t head[BX_HEAD_BYTES];
    if (*size < BX_HEAD_BYTES)
        return BONSAI_CORRUPT;
    int rc = db->io.pread(db->io.ctx, db->fd, head, sizeof head, 0);
    if (rc == 0 && db->opt.read_only)
        rc = file_size(db, size);
    if (rc)
        return rc;
    uint64_t fsize = *size;
    bx_header h;
    if ((rc = bx_header_decode(head, &h)))
        return rc;
    db->format_version = h.version;
    db->opt.page_size = h.page_size;
    db->opt.node_bytes = h.node_bytes;
    db->opt.node_entries = h.node_entries;
    db->opt.compression = h.flags & 0xF;
    db->opt.compression_level = (int)(h.flags >> 4 & 0xF);
    db->page_size = h.page_size;
    db->first_pgno = head_bytes(h.page_size) / h.page_size;
    if (fsize < head_bytes(h.page_size))
        return BONSAI_CORRUPT;
    return read_meta(db, head, fsize);
}

/* ---- open -------------------------------------------------------------- */

static int open_error(int e, int writable)
{
    if (e == ENOENT)
        return BONSAI_NOTFOUND;
    if (writable && (e == EACCES || e == EROFS || e == EPERM))
        return BONSAI_READONLY;
    if (e == ENOMEM)
        return BONSAI_NOMEM;
    return BONSAI_IO;
}

/* ---- locks (bonsai.h, "Processes") ------------------------------------- */

static int flock_error(void)
{
    return errno == EWOULDBLOCK ? BONSAI_BUSY : BONSAI_IO;
}

/* flock without blocking, tried again until busy_timeout_ms passes. */
static int flock_wait(int fd, int op, bx_wait *w)
{
    while (flock(fd, op | LOCK_NB) != 0) {
        int rc = flock_error();
        if (rc != BONSAI_BUSY || !bx_wait_sleep(w))
            return rc;
    }
    return 0;
}

/* An OFD lock on byte 0 of the store file: held shared by every reader
 * that publishes its snapshots in the lock file, exclusively by a writer
 * that cannot respect such readers (it has no lock file, or no
 * transactions), so the two exclude each other. */
static int store_byte_lock(int fd, short type, bx_wait *w)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0,
                       .l_len = 1};
    while (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        /* a file system without these locks has no lock files either:
         * there flock alone keeps readers and writers apart */
        if (errno == EINVAL || errno == ENOLCK || errno == EOPNOTSUPP)
            return 0;
        if (errno != EAGAIN && errno != EACCES)
            return BONSAI_IO;
        if (!bx_wait_sleep(w))
            return BONSAI_BUSY;
    }
    return 0;
}

/* Writers exclude each other with flock (released when the process
 * dies).  Readers and a transactional writer share the store through the
 * lock file where there is one; without it readers take a shared flock,
 * which excludes a writer, as a writer excludes them. */
static int lock_store(bonsai_db *db, const char *path, mode_t mode)
{
    int writable = !db->opt.read_only;
    bx_wait w;
    bx_wait_start(&w, db->opt.busy_timeout_ms);
    int rc = writable ? flock_wait(db->fd, LOCK_EX, &w) : 0;
    if (rc)
        return rc;
    /* a store file nobody may write: its directory is likely no better */
    if (db->cow && (mode & S_IWUSR)) {
        rc = rt_open(&db->rt, path, mode & 0666);
        if (rc && rc != BONSAI_NOTSUP)
            return rc;
    }
    if (db->rt.fd >= 0)
        return writable ? 0 : store_byte_lock(db->fd, F_RDLCK, &w);
    if (writable)
        return store_byte_lock(db->fd, F_WRLCK, &w);
    return flock_wait(db->fd, LOCK_SH, &w);
}

static int open_fd(bonsai_db *db, const char *path)
{
    int writable = !db->opt.read_only;
    /* O_NONBLOCK: a FIFO given for a path must not make open() wait for a
     * writer; it is refused below like anything but a regular file */
    int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK;
    if (writable && db->opt.create)
        flags |= O_CREAT;
    db->fd = open(path, flags, (mode_t)db->opt.file_mode);
    if (db->fd < 0)
        return open_error(errno, writable);
    struct stat st;
    if (fstat(db->fd, &st) != 0)
        return BONSAI_IO;
    if (!S_ISREG(st.st_mode))
        return BONSAI_IO;
    /* back to blocking I/O now that it is known to be a regular file */
    int fl = fcntl(db->fd, F_GETFL);
    if (fl < 0 || fcntl(db->fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        return BONSAI_IO;
    return lock_store(db, path, st.st_mode);
}

/* A creation that never finished (a crash or an error before the header
 * reached the disk) leaves at most the head area, all zero: no store yet. */
static int never_created(bonsai_db *db, uint64_t fsize, int *yes)
{
    *yes = fsize == 0;
    if (fsize == 0 || fsize > BX_HEAD_BYTES)
        return 0;
    uint8_t head[BX_HEAD_BYTES] = {0};
    int rc = db->io.pread(db->io.ctx, db->fd, head, (size_t)fsize, 0);
    if (rc)
        return rc;
    size_t i = 0;
    while (i < fsize && head[i] == 0)
        i++;
    *yes = i == fsize;
    return 0;
}

uint32_t bx_page_size_for(const bonsai_options *o)
{
    return o->page_size ? o->page_size : BX_PAGE_DEFAULT;
}

static int create_file(bonsai_db *db, uint64_t *fsize)
{
    if (db->opt.read_only)
        return BONSAI_CORRUPT;
    db->opt.page_size = bx_page_size_for(&db->opt);
    db->page_size = db->opt.page_size;
    db->first_pgno = head_bytes(db->page_size) / db->page_size;
    int rc = write_header(db);
    if (rc) {
        db->io.truncate(db->io.ctx, db->fd, 0); /* leave no half store */
        return rc;
    }
    db->meta = (bx_meta){.end = db->first_pgno};
    return file_size(db, fsize);
}

/* Zeroes a meta slot open did not pick because it was torn, before any
 * commit can reuse its number: else a second torn write of that number
 * could splice with the first into a valid-looking slot. */
static int clear_torn_slots(bonsai_db *db)
{
    uint8_t head[BX_HEAD_BYTES], zero[BX_META_SIZE] = {0};
    int rc = db->io.pread(db->io.ctx, db->fd, head, sizeof head, 0);
    int cleared = 0;
    for (unsigned s = 0; s < 2 && rc == 0; s++) {
        bx_meta m;
        const uint8_t *p = head + BX_META_OFF(s);
        if (bx_meta_decode(p, &m) == 0 || !memcmp(p, zero, sizeof zero))
            continue;
        rc = db->io.pwrite(db->io.ctx, db->fd, zero, sizeof zero,
                           BX_META_OFF(s));
        cleared = 1;
    }
    if (rc == 0 && cleared)
        rc = db->io.fsync(db->io.ctx, db->fd);
    return rc;
}

static int open_file(bonsai_db *db, const char *path)
{
    int rc = open_fd(db, path), fresh = 0;
    uint64_t fsize = 0;
    if (rc == 0)
        rc = file_size(db, &fsize);
    if (rc == 0)
        rc = never_created(db, fsize, &fresh);
    if (rc)
        return rc;
    if (fresh)
        rc = create_file(db, &fsize);
    else if ((rc = load_file(db, &fsize)) == 0 && !db->opt.read_only)
        rc = clear_torn_slots(db);
    if (rc)
        return rc;
    long os = sysconf(_SC_PAGESIZE);
    uint64_t ospage = os > 0 ? (uint64_t)os : 4096;
    if (fsize % ospage && !db->opt.read_only) {
        fsize += ospage - fsize % ospage;
        if ((rc = db->io.truncate(db->io.ctx, db->fd, fsize)))
            return rc;
    }
    uint64_t used = db->meta.end * db->page_size;
    uint64_t cap = opening_cap(db);
    if (cap < used)
        cap = used;
    return region_open_file(&db->rg, &db->io, db->fd, cap, fsize,
                            !db->opt.read_only);
}

static int open_anon(bonsai_db *db)
{
    if (db->opt.read_only)
        return BONSAI_INVALID;
    db->opt.page_size = bx_page_size_for(&db->opt);
    db->page_size = db->opt.page_size;
    db->first_pgno = head_bytes(db->page_size) / db->page_size;
    db->meta = (bx_meta){.end = db->first_pgno};
    return region_open_anon(&db->rg, &db->io, opening_cap(db));
}

static void set_catalog_from_meta(bonsai_db *db)
{
    db->catalog = (bt_tree){.kind = BONSAI_KEY_BYTES};
    db->catalog.root.ext = db->meta.cat_root;
    db->catalog.depth = db->meta.cat_depth;
    db->catalog.count = db->meta.cat_count;
}

static int open_store(bonsai_db *db, const char *path)
{
    db->cow = db->opt.transactions < 0 ? path != NULL
                                        : db->opt.transactions != 0;
    int rc = path ? open_file(db, path) : open_anon(db);
    if (rc)
        return rc;
    db->inline_max = db->opt.node_bytes / 4;
    db->pk = (pk_rules){db->opt.compression,
                        pk_raw_limit(db->opt.node_bytes)};
    db->wtxn_id = txn_next_id(db->meta.txn_id);
    if (!db->cow && !db->anonymous && !db->opt.read_only)
        db->write_back = txn_write_back_cached;
    set_catalog_from_meta(db);
    /* a node image takes node_bytes at most (bigger ones split) */
    uint32_t node_pages = (db->opt.node_bytes + db->page_size - 1) /
                          db->page_size;
    alloc_init(&db->al, &db->rg, db->page_size, db->first_pgno,
               db->meta.end, node_pages);
    alloc_set_cap(&db->al, store_cap(db, db->rg.cap));
    if (path && !db->opt.read_only)
        return space_derive(db);
    return 0;
}

int bonsai_open_io(const char *path, const bonsai_options *opts,
                   const bx_io *io, bonsai_db **out)
{
    if (!out || !io)
        return BONSAI_INVALID;
    *out = NULL;
    bonsai_db *db = calloc(1, sizeof *db);
    if (!db)
        return BONSAI_NOMEM;
    db->io = *io;
    db->fd = -1;
    rt_init(&db->rt);
    db->anonymous = path == NULL;
    db->format_version = BX_FORMAT_VERSION;
    if (bx_options_take(opts, &db->opt) != 0 || !options_valid(&db->opt)) {
        free(db);
        return BONSAI_INVALID;
    }
    db->maps = calloc(BONSAI_MAX_MAPS, sizeof *db->maps);
    if (!db->maps || pthread_mutex_init(&db->lock, NULL) != 0) {
        free(db->maps);
        free(db);
        return BONSAI_NOMEM;
    }
    if (bx_cond_init(&db->wtxn_ended) != 0) {
        pthread_mutex_destroy(&db->lock);
        free(db->maps);
        free(db);
        return BONSAI_NOMEM;
    }
    int rc = open_store(db, path);
    if (rc) {
        db->wtxn = NULL;
        db->opt.read_only = 1; /* nothing to write back */
        bonsai_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

int bonsai_open(const char *path, const bonsai_options *opts, bonsai_db **db)
{
    return bonsai_open_io(path, opts, bx_io_default(), db);
}

/* ---- close, sync, stat ------------------------------------------------- */

int bonsai_sync(bonsai_db *db)
{
    if (!db)
        return BONSAI_INVALID;
    if (db->opt.read_only)
        return 0;
    if (db->failed)
        return BONSAI_FAILED;
    if (db->cow)
        return db->anonymous ? 0 : db->io.fsync(db->io.ctx, db->fd);
    int rc = db->anonymous ? put_apply_all(db) : txn_write_back(db);
    if (rc)
        return rc;
    put_give_back(db);
    if (!db->anonymous) {
        cache_recount(db); /* the arrays given back make room */
        return 0;
    }
    return cache_flush(db);
}

int bonsai_close(bonsai_db *db)
{
    if (!db)
        return 0;
    int rc = 0;
    if (db->wtxn)
        bonsai_txn_abort(db->wtxn);
    if (!db->cow && !db->opt.read_only && !db->anonymous && !db->failed &&
        db->rg.base)
        rc = txn_write_back(db);
    bt_forget_changes(db);
    maps_free_all(db);
    bt_discard(db, &db->catalog);
    ptrvec_free(&db->dirty);
    ptrvec_free(&db->leaves);
    ptrvec_free(&db->branches);
    ptrvec_free(&db->graveyard);
    extvec_free(&db->op_alloc);
    extvec_free(&db->op_release);
    extvec_free(&db->plan_freed);
    free(db->undo);
    free(db->scratch);
    free(db->run_keys);
    pk_cache_free(&db->uc);
    ld_drop(&db->ld);
    pk_cache_free(&db->auto_uc);
    free(db->batch_sort);
    ps_free(&db->unread);
    alloc_free_all(&db->al);
    region_close(&db->rg);
    rt_close(&db->rt);
    if (db->fd >= 0)
        close(db->fd);
    free(db->readers);
    free(db->maps);
    pthread_cond_destroy(&db->wtxn_ended);
    pthread_mutex_destroy(&db->lock);
    free(db);
    return rc;
}

int bonsai_db_stat(bonsai_db *db, bonsai_stat *st)
{
    if (!db || !st)
        return BONSAI_INVALID;
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&db->lock);
    st->txn_id = db->meta.txn_id;
    /* a reader has no allocator: the last snapshot's end stands for it */
    uint64_t end = db->opt.read_only ? db->meta.end : db->al.end;
    pthread_mutex_unlock(&db->lock);
    st->max_size = db->rg.cap;
    st->bytes_mapped = db->anonymous ? db->al.end * db->page_size
                                     : db->rg.mapped;
    st->bytes_used = end * db->page_size;
    st->bytes_free = db->al.free_pages * db->page_size;
    st->page_size = db->page_size;
    st->node_bytes = db->opt.node_bytes;
    st->node_entries = db->opt.node_entries;
    st->format_version = db->format_version;
    st->cache_bytes = cache_held(db);
    st->transactions = db->cow;
    st->anonymous = db->anonymous;
    return 0;
}

/* ---- changing the cap ---------------------------------------------------- */

/* The cap of the open store, then (files) recorded in a commit. */
static int set_cap(bonsai_db *db, uint64_t bytes)
{
    if (bytes < db->al.end * db->page_size)
        return BONSAI_INVALID; /* below what the store uses */
    if (db->anonymous && !cache_fits_cap(&db->opt, bytes))
        return BONSAI_INVALID; /* as options_problem says */
    int rc = region_set_cap(&db->rg, bytes);
    if (rc == 0)
        alloc_set_cap(&db->al, store_cap(db, db->rg.cap));
    return rc;
}

int bonsai_set_max_size(bonsai_db *db, uint64_t bytes)
{
    if (!db || bytes < MIN_MAX_SIZE || bytes > BONSAI_MAX_SIZE)
        return BONSAI_INVALID;
    if (db->opt.read_only)
        return BONSAI_READONLY;
    if (!db->cow) {
        /* waiting puts counted their room under the old cap */
        int rc = bonsai_sync(db);
        if (rc == 0)
            rc = set_cap(db, bytes);
        return rc == 0 && !db->anonymous ? bonsai_sync(db) : rc;
    }
    bonsai_txn *txn;
    int rc = bonsai_txn_begin(db, 0, &txn);
    if (rc)
        return rc;
    uint64_t old = db->rg.cap;
    if ((rc = set_cap(db, bytes))) {
        bonsai_txn_abort(txn);
        return rc;
    }
    if ((rc = bonsai_txn_commit(txn)) && !db->failed)
        set_cap(db, old);
    return rc;
}

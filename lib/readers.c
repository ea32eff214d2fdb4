/* SPDX-License-Identifier: MIT */
/*
 * readers.c - the lock file and its reader slots (readers.h).
 *
 * Layout (format.md, "The lock file"; words in the machine's byte order,
 * since processes update them with atomic instructions and the file never
 * leaves the machine):
 *
 *   0    header: magic u32, version u32, slot count u32, slot bytes u32,
 *        then zero to byte 64.  Byte 0 also carries the creation lock.
 *   64   slot 0, 64 bytes: eight u64 words
 *          0 txn      snapshot txn id + 1 (at most 2^64-1); 0 = none
 *          1 end      the snapshot's meta: high-water page
 *          2 root     catalog root page
 *          3 shape    catalog root pages | catalog depth << 32
 *          4 count    maps in the catalog
 *          5..7       zero
 *   128  slot 1, ...
 *
 * A slot is owned through an OFD write lock on its first byte.
 *
 * PATH-lock is opened without following a link, and written only when
 * it is a table bonsai made, or began to make (empty, or 8 KiB of zeros
 * with one name): any other file is refused and left as it is.
 */
#include "readers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bonsai.h"
#include "vec.h"

enum { W_TXN, W_END, W_ROOT, W_SHAPE, W_COUNT };

/* Atomics shared between processes must not hide a lock in one process. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && sizeof(uint64_t) == 8,
               "the lock file needs lock-free 64-bit atomics");

void rt_init(rt_table *t)
{
    memset(t, 0, sizeof *t);
    t->fd = -1;
}

static uint64_t slot_offset(uint32_t slot)
{
    return RT_HEAD_BYTES + (uint64_t)slot * RT_SLOT_BYTES;
}

static _Atomic uint64_t *slot_words(const rt_table *t, uint32_t slot)
{
    return (_Atomic uint64_t *)(void *)(t->map + slot_offset(slot));
}

/* ---- OFD byte locks ------------------------------------------------------ */

static int byte_lock(int fd, int cmd, short type, uint64_t byte)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET,
                       .l_start = (off_t)byte, .l_len = 1};
    int rc;
    do
        rc = fcntl(fd, cmd, &fl);
    while (rc != 0 && errno == EINTR);
    return rc;
}

/* Does another open file description hold slot's lock? */
static int slot_live(const rt_table *t, uint32_t slot)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
                       .l_start = (off_t)slot_offset(slot), .l_len = 1};
    if (fcntl(t->fd, F_OFD_GETLK, &fl) != 0)
        return 1; /* cannot tell: keep what it holds */
    return fl.l_type != F_UNLCK;
}

/* ---- open and close ------------------------------------------------------ */

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static int write_all(int fd, const uint8_t *p, size_t n, off_t off)
{
    while (n) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return BONSAI_IO;
        p += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

/* Makes a fresh table of a file that a creator left unfinished (see
 * unfinished_table): nothing but zero bytes, so nothing to lose. */
static int create_table(int fd, size_t *bytes)
{
    uint8_t head[RT_HEAD_BYTES] = {0};
    put32(head, RT_MAGIC);
    put32(head + 4, RT_VERSION);
    put32(head + 8, RT_SLOTS);
    put32(head + 12, RT_SLOT_BYTES);
    *bytes = slot_offset(RT_SLOTS);
    /* blocks reserved, not a sparse file: a slot written through the
     * mapping must not meet a full disk (SIGBUS) */
    int e = posix_fallocate(fd, 0, (off_t)*bytes);
    if (e)
        return e == ENOSPC || e == EDQUOT ? BONSAI_ENOSPC : BONSAI_IO;
    return write_all(fd, head, sizeof head, 0);
}

/* Is the file (size bytes, the link count nlink) one that create_table
 * began and never finished?  Such a file is new and empty, or all of its
 * table's bytes reserved and still zero (the header comes last).  Any
 * other file without a header is not bonsai's, and is never written. */
static int unfinished_table(int fd, uint64_t size, nlink_t nlink, int *yes)
{
    *yes = 0;
    if (nlink != 1)
        return 0; /* another name reaches it: not a file bonsai made */
    if (size == 0) {
        *yes = 1;
        return 0;
    }
    if (size != slot_offset(RT_SLOTS))
        return 0;
    uint8_t buf[4096];
    for (uint64_t off = 0; off < size; off += sizeof buf) {
        ssize_t n;
        do
            n = pread(fd, buf, sizeof buf, (off_t)off);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t)sizeof buf)
            return BONSAI_IO;
        if (!all_zero(buf, sizeof buf))
            return 0;
    }
    *yes = 1;
    return 0;
}

/* Checks the header of an existing table; *bytes gets the table's size. */
static int check_table(int fd, uint64_t size, uint32_t *nslots,
                       size_t *bytes)
{
    uint8_t head[RT_HEAD_BYTES];
    ssize_t n;
    do
        n = pread(fd, head, sizeof head, 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof head)
        return BONSAI_LOCKFILE;
    *nslots = get32(head + 8);
    if (get32(head) != RT_MAGIC || get32(head + 4) != RT_VERSION ||
        get32(head + 12) != RT_SLOT_BYTES || *nslots == 0 ||
        *nslots > RT_MAX_SLOTS || !all_zero(head + 16, sizeof head - 16) ||
        size != slot_offset(*nslots))
        return BONSAI_LOCKFILE;
    *bytes = (size_t)size;
    return 0;
}

/* Under the creation lock: a table ready to map. */
static int set_up(rt_table *t)
{
    struct stat st;
    if (fstat(t->fd, &st) != 0)
        return BONSAI_IO;
    if (!S_ISREG(st.st_mode))
        return BONSAI_LOCKFILE;
    uint8_t head[RT_HEAD_BYTES] = {0};
    size_t have = st.st_size < (off_t)sizeof head ? (size_t)st.st_size
                                                  : sizeof head;
    ssize_t n;
    do
        n = pread(t->fd, head, have, 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)have)
        return BONSAI_IO;
    if (!all_zero(head, sizeof head))
        return check_table(t->fd, (uint64_t)st.st_size, &t->nslots,
                           &t->bytes);
    /* users check the header under this lock, so a table whose header is
     * zero (its creator died before writing it) has no users */
    int unfinished, rc = unfinished_table(t->fd, (uint64_t)st.st_size,
                                          st.st_nlink, &unfinished);
    if (rc)
        return rc;
    if (!unfinished)
        return BONSAI_LOCKFILE;
    t->nslots = RT_SLOTS;
    return create_table(t->fd, &t->bytes);
}

static int open_error(int e)
{
    if (e == EACCES || e == EPERM || e == EROFS)
        return BONSAI_NOTSUP;
    /* a symbolic link, a directory, a socket: not a lock file bonsai
     * made, and not to be followed or written */
    if (e == ELOOP || e == EISDIR || e == ENXIO)
        return BONSAI_LOCKFILE;
    return e == ENOMEM ? BONSAI_NOMEM : BONSAI_IO;
}

/* PATH-lock beside the file store_path names, symbolic links followed,
 * so that every process finds the same lock file whatever link it used. */
static char *lock_path(const char *store_path)
{
    char *real = realpath(store_path, NULL);
    const char *base = real ? real : store_path;
    size_t len = strlen(base);
    char *path = malloc(len + sizeof "-lock");
    if (path) {
        memcpy(path, base, len);
        memcpy(path + len, "-lock", sizeof "-lock");
    }
    free(real);
    return path;
}

int rt_open(rt_table *t, const char *store_path, uint32_t mode)
{
    rt_init(t);
    char *path = lock_path(store_path);
    if (!path)
        return BONSAI_NOMEM;
    /* O_NOFOLLOW: PATH-lock itself, never a file a link points at;
     * O_NONBLOCK: a FIFO of that name must not make open() wait (it is
     * refused as not a regular file) */
    t->fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
                           O_CLOEXEC, (mode_t)mode);
    int e = errno;
    free(path);
    if (t->fd < 0)
        return open_error(e);
    if (byte_lock(t->fd, F_OFD_SETLKW, F_WRLCK, 0) != 0) {
        int rc = errno == ENOLCK || errno == EINVAL ? BONSAI_NOTSUP
                                                     : BONSAI_IO;
        rt_close(t);
        return rc;
    }
    int rc = set_up(t);
    /* a disk too full for the table: go on without one, as where none
     * may be made, so a full disk still opens (readers exclude writers) */
    if (rc == BONSAI_ENOSPC)
        rc = BONSAI_NOTSUP;
    if (rc == 0) {
        void *p = mmap(NULL, t->bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                       t->fd, 0);
        if (p == MAP_FAILED)
            rc = errno == ENOMEM ? BONSAI_NOMEM : BONSAI_IO;
        else
            t->map = p;
    }
    byte_lock(t->fd, F_OFD_SETLK, F_UNLCK, 0);
    if (rc)
        rt_close(t);
    return rc;
}

void rt_close(rt_table *t)
{
    for (size_t i = 0; i < t->nown && t->map; i++)
        atomic_store(&slot_words(t, t->own[i].slot)[W_TXN], 0);
    if (t->map)
        munmap(t->map, t->bytes);
    if (t->fd >= 0)
        close(t->fd); /* drops the slot locks */
    free(t->own);
    rt_init(t);
}

/* ---- the reader's side --------------------------------------------------- */

static int claim(rt_table *t, rt_own **out)
{
    rt_own *o = vec_room(t->own, t->nown, &t->cap_own, sizeof *o, 4);
    if (!o)
        return BONSAI_NOMEM;
    t->own = o;
    for (uint32_t s = 0; s < t->nslots; s++) {
        int mine = 0;
        for (size_t i = 0; i < t->nown && !mine; i++)
            mine = t->own[i].slot == s;
        if (mine || byte_lock(t->fd, F_OFD_SETLK, F_WRLCK, slot_offset(s)))
            continue;
        /* a dead owner may have left a snapshot: no longer ours to keep */
        atomic_store(&slot_words(t, s)[W_TXN], 0);
        *out = &t->own[t->nown++];
        **out = (rt_own){.slot = s};
        return 0;
    }
    return BONSAI_READERS_FULL;
}

static void write_slot(rt_table *t, uint32_t slot, const bx_meta *m)
{
    _Atomic uint64_t *w = slot_words(t, slot);
    atomic_store(&w[W_TXN], 0);
    atomic_store_explicit(&w[W_END], m->end, memory_order_relaxed);
    atomic_store_explicit(&w[W_ROOT], m->cat_root.pgno, memory_order_relaxed);
    atomic_store_explicit(&w[W_SHAPE],
                          m->cat_root.npages | (uint64_t)m->cat_depth << 32,
                          memory_order_relaxed);
    atomic_store_explicit(&w[W_COUNT], m->cat_count, memory_order_relaxed);
    /* the last id there is shows as the one before it: older, so the
     * writer keeps as much or more, and no write can follow it anyway */
    atomic_store(&w[W_TXN], m->txn_id < UINT64_MAX ? m->txn_id + 1
                                                    : UINT64_MAX);
}

int rt_publish(rt_table *t, const bx_meta *m, uint32_t *slot)
{
    rt_own *idle = NULL;
    for (size_t i = 0; i < t->nown; i++) {
        rt_own *o = &t->own[i];
        if (o->refs && o->txn == m->txn_id) {
            o->refs++;
            *slot = o->slot;
            return 0;
        }
        if (!o->refs && !idle)
            idle = o;
    }
    if (!idle) {
        int rc = claim(t, &idle);
        if (rc)
            return rc;
    }
    write_slot(t, idle->slot, m);
    idle->refs = 1;
    idle->txn = m->txn_id;
    *slot = idle->slot;
    atomic_thread_fence(memory_order_seq_cst);
    return 0;
}

void rt_release(rt_table *t, uint32_t slot)
{
    for (size_t i = 0; i < t->nown; i++) {
        rt_own *o = &t->own[i];
        if (o->slot != slot || !o->refs)
            continue;
        if (--o->refs == 0)
            atomic_store(&slot_words(t, slot)[W_TXN], 0);
        return;
    }
}

/* ---- the writer's side --------------------------------------------------- */

uint64_t rt_oldest(const rt_table *t, uint64_t oldest)
{
    atomic_thread_fence(memory_order_seq_cst);
    for (uint32_t s = 0; s < t->nslots; s++) {
        uint64_t v = atomic_load(&slot_words(t, s)[W_TXN]);
        if (v && v - 1 < oldest && slot_live(t, s))
            oldest = v - 1;
    }
    return oldest;
}

/* A consistent copy of slot's snapshot: 1, or 0 (none, or it changed). */
static int read_slot(const rt_table *t, uint32_t slot, bx_meta *m)
{
    _Atomic uint64_t *w = slot_words(t, slot);
    uint64_t v = atomic_load(&w[W_TXN]);
    if (!v)
        return 0;
    uint64_t shape = atomic_load(&w[W_SHAPE]);
    *m = (bx_meta){.txn_id = v - 1, .end = atomic_load(&w[W_END]),
                   .cat_count = atomic_load(&w[W_COUNT])};
    m->cat_root.pgno = atomic_load(&w[W_ROOT]);
    m->cat_root.npages = (uint32_t)shape;
    m->cat_depth = (uint8_t)(shape >> 32);
    if (shape >> 40)
        return 0; /* not a depth this library writes */
    return atomic_load(&w[W_TXN]) == v;
}

int rt_each_snapshot(const rt_table *t, rt_snap_fn fn, void *ctx)
{
    atomic_thread_fence(memory_order_seq_cst);
    for (uint32_t s = 0; s < t->nslots; s++) {
        bx_meta m;
        if (!read_slot(t, s, &m) || !slot_live(t, s))
            continue;
        int rc = fn(ctx, &m);
        if (rc)
            return rc;
    }
    return 0;
}

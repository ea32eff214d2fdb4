/* SPDX-License-Identifier: MIT */
/*
 * region.c - reserve once, map the file into the reservation, grow in
 * place.  Growth reserves disk blocks with fallocate before mapping them,
 * so a full disk shows up as BONSAI_ENOSPC here rather than as SIGBUS on
 * a later store into the mapping.
 */
#include "region.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GROW_MIN (1u << 20) /* grow a file by at least 1 MiB */
#define ZERO_CHUNK (256u << 10)

static uint64_t os_page(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}

/* v rounded up to a multiple of to; 0 if that is beyond 2^64 - 1 (only
 * a size no caller may pass: callers check it). */
static uint64_t round_up(uint64_t v, uint64_t to)
{
    if (v > UINT64_MAX - (to - 1))
        return 0;
    return (v + to - 1) / to * to;
}

/* Address space beyond the cap, reserved (PROT_NONE, no memory) so that
 * bonsai_set_max_size can raise the cap in place: 7 times the cap, at
 * least 64 GiB, at most 1 TiB; none where even that much is refused. */
static uint64_t headroom(uint64_t need)
{
    uint64_t room = need <= (UINT64_C(1) << 37) ? need * 7 : UINT64_C(1) << 40;
    if (room < (UINT64_C(64) << 30))
        room = UINT64_C(64) << 30;
    return room > (UINT64_C(1) << 40) ? UINT64_C(1) << 40 : room;
}

/* need bytes of address space and, if the system allows, headroom.  The
 * headroom is asked of mmap itself, not of the I/O layer: it is optional,
 * and refused for many reasons (an address space limit, valgrind's
 * EINVAL), so any refusal falls back to need alone through the I/O layer,
 * whose errors are the open's. */
static int reserve(const bx_io *io, uint64_t need, void **p, uint64_t *got)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    uint64_t want = need + headroom(need);
    void *q = mmap(NULL, want, PROT_NONE, flags, -1, 0);
    if (q != MAP_FAILED) {
        *p = q;
        *got = want;
        return 0;
    }
    *got = need;
    return io->map(io->ctx, NULL, need, PROT_NONE, flags, -1, 0, p);
}

/* Anonymous memory [from, to) of the reservation made readable and
 * writable (pages are touched lazily). */
static int map_anon(region *rg, uint64_t from, uint64_t to)
{
    void *q;
    int rc = rg->io->map(rg->io->ctx, rg->base + from, to - from,
                         PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
                             MAP_FIXED,
                         -1, 0, &q);
#ifdef MADV_HUGEPAGE
    /* advice, which the system may ignore: a large store's leaves are
     * read at random, and with 4 KiB pages each read also walks page
     * tables that no longer fit the caches (a random fill to 1 GiB runs
     * about a tenth faster in huge pages) */
    if (rc == 0)
        (void)madvise(q, to - from, MADV_HUGEPAGE);
#endif
    return rc;
}

int region_open_anon(region *rg, const bx_io *io, uint64_t cap)
{
    void *p;
    uint64_t reserved;
    cap = round_up(cap, os_page());
    if (cap == 0)
        return BONSAI_INVALID;
    int rc = reserve(io, cap, &p, &reserved);
    if (rc)
        return rc;
    *rg = (region){.io = io, .base = p, .reserved = reserved, .mapped = 0,
                   .cap = cap, .fd = -1, .writable = 1};
    if ((rc = map_anon(rg, 0, cap))) {
        io->unmap(io->ctx, p, reserved);
        return rc;
    }
    rg->mapped = cap;
    return 0;
}

int region_open_file(region *rg, const bx_io *io, int fd, uint64_t cap,
                     uint64_t file_size, int writable)
{
    uint64_t need = round_up(cap > file_size ? cap : file_size, os_page());
    if (need == 0)
        return BONSAI_INVALID;
    uint64_t reserved;
    void *p;
    int rc = reserve(io, need, &p, &reserved);
    if (rc)
        return rc;
    *rg = (region){.io = io, .base = p, .reserved = reserved, .mapped = 0,
                   .cap = cap, .fd = fd, .writable = writable};
    if (file_size == 0)
        return 0;
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    void *q;
    rc = io->map(io->ctx, p, file_size, prot, MAP_SHARED | MAP_FIXED, fd, 0,
                 &q);
    if (rc) {
        io->unmap(io->ctx, p, reserved);
        return rc;
    }
    rg->mapped = file_size;
    return 0;
}

/* Writes zeros over [from, to) of the file with pwrite before the range
 * is first used through the mapping.  The page cache pages the kernel
 * makes for stores into a shared mapping made later reads of them slower
 * than pages made by write(): lookups on a store grown that way ran at
 * 0.65 times those on the same file once its pages were made again (10 M
 * random keys, commits every 1 M puts), and at 0.97 times anonymous
 * memory's with this fill.  The blocks are reserved already, so this
 * costs one sequential write of each byte the file grows by. */
static int zero_fill(region *rg, uint64_t from, uint64_t to)
{
    size_t chunk = to - from < ZERO_CHUNK ? (size_t)(to - from) : ZERO_CHUNK;
    void *zero = calloc(1, chunk);
    if (!zero)
        return BONSAI_NOMEM;
    int rc = 0;
    for (uint64_t at = from; at < to && rc == 0; at += chunk) {
        size_t len = to - at < chunk ? (size_t)(to - at) : chunk;
        rc = rg->io->pwrite(rg->io->ctx, rg->fd, zero, len, at);
    }
    free(zero);
    return rc;
}

int region_grow(region *rg, uint64_t need)
{
    if (need <= rg->mapped)
        return 0;
    if (need > rg->cap || need > rg->reserved)
        return BONSAI_FULL;
    if (rg->fd < 0 || !rg->writable)
        return BONSAI_READONLY;
    uint64_t step = rg->mapped / 8 > GROW_MIN ? rg->mapped / 8 : GROW_MIN;
    uint64_t want = round_up(need > rg->mapped + step ? need
                                                      : rg->mapped + step,
                             os_page());
    if (want > rg->cap)
        want = round_up(need, os_page());
    if (want > rg->reserved)
        want = rg->reserved;
    const bx_io *io = rg->io;
    int rc = io->fallocate(io->ctx, rg->fd, rg->mapped, want - rg->mapped);
    if (rc == BONSAI_ENOSPC && want > round_up(need, os_page())) {
        /* no room for the usual step: the disk may still hold what this
         * change needs, so a store can use a nearly full disk to the end */
        want = round_up(need, os_page());
        rc = io->fallocate(io->ctx, rg->fd, rg->mapped, want - rg->mapped);
    }
    if (rc || (rc = zero_fill(rg, rg->mapped, want)))
        return rc;
    void *q;
    rc = io->map(io->ctx, rg->base + rg->mapped, want - rg->mapped,
                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, rg->fd,
                 rg->mapped, &q);
    if (rc)
        return rc;
    rg->mapped = want;
    return 0;
}

int region_follow(region *rg, uint64_t need)
{
    if (need <= rg->mapped)
        return 0;
    if (need > rg->reserved)
        return BONSAI_FULL;
    struct stat st;
    if (rg->fd < 0 || fstat(rg->fd, &st) != 0)
        return BONSAI_IO;
    uint64_t size = (uint64_t)st.st_size;
    if (size < need)
        return BONSAI_CORRUPT;
    if (size > rg->reserved)
        size = rg->reserved;
    /* from the page holding the old end: a file mapped at open need not
     * have ended on a page boundary */
    uint64_t from = rg->mapped / os_page() * os_page();
    const bx_io *io = rg->io;
    void *q;
    int rc = io->map(io->ctx, rg->base + from, size - from, PROT_READ,
                     MAP_SHARED | MAP_FIXED, rg->fd, from, &q);
    if (rc)
        return rc;
    rg->mapped = size;
    return 0;
}

int region_sync(region *rg, uint64_t off, uint64_t len)
{
    if (rg->fd < 0 || len == 0)
        return 0;
    uint64_t start = off / os_page() * os_page();
    uint64_t stop = off + len;
    if (stop > rg->mapped)
        stop = rg->mapped;
    if (stop <= start)
        return 0;
    return rg->io->msync(rg->io->ctx, rg->base + start, stop - start);
}

/* More address space right after the reservation (PROT_NONE), or
 * BONSAI_NOMEM when something else is mapped there. */
static int extend_reservation(region *rg, uint64_t upto)
{
    uint8_t *at = rg->base + rg->reserved;
    uint64_t len = upto - rg->reserved;
    void *p;
    int rc = rg->io->map(rg->io->ctx, at, len, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
                             MAP_FIXED_NOREPLACE,
                         -1, 0, &p);
    if (rc)
        return BONSAI_NOMEM;
    if (p != at) { /* a kernel that does not know MAP_FIXED_NOREPLACE */
        rg->io->unmap(rg->io->ctx, p, len);
        return BONSAI_NOMEM;
    }
    rg->reserved = upto;
    return 0;
}

int region_set_cap(region *rg, uint64_t cap)
{
    cap = round_up(cap, os_page());
    int rc = cap > rg->reserved ? extend_reservation(rg, cap) : 0;
    /* anonymous memory is mapped whole, up to the highest cap it had */
    if (rc == 0 && rg->fd < 0 && cap > rg->mapped &&
        (rc = map_anon(rg, rg->mapped, cap)) == 0)
        rg->mapped = cap;
    if (rc == 0)
        rg->cap = cap;
    return rc;
}

void region_close(region *rg)
{
    if (rg->base)
        rg->io->unmap(rg->io->ctx, rg->base, rg->reserved);
    rg->base = NULL;
}

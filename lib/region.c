/*
 * region.c - reserve once, map the file into the reservation, grow in
 * place.  Growth reserves disk blocks with fallocate before mapping them,
 * so a full disk shows up as BONSAI_ENOSPC here rather than as SIGBUS on
 * a later store into the mapping.
 */
#include "region.h"

#include <sys/mman.h>
#include <unistd.h>

#define GROW_MIN (1u << 20) /* grow a file by at least 1 MiB */

static uint64_t os_page(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

int region_open_anon(region *rg, const bx_io *io, uint64_t cap)
{
    void *p;
    cap = round_up(cap, os_page());
    int rc = io->map(io->ctx, NULL, cap, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, &p);
    if (rc)
        return rc;
    *rg = (region){.io = io, .base = p, .reserved = cap, .mapped = cap,
                   .cap = cap, .fd = -1, .writable = 1};
    return 0;
}

int region_open_file(region *rg, const bx_io *io, int fd, uint64_t cap,
                     uint64_t file_size, int writable)
{
    uint64_t reserve = round_up(cap > file_size ? cap : file_size, os_page());
    void *p;
    int rc = io->map(io->ctx, NULL, reserve, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, &p);
    if (rc)
        return rc;
    *rg = (region){.io = io, .base = p, .reserved = reserve, .mapped = 0,
                   .cap = cap, .fd = fd, .writable = writable};
    if (file_size == 0)
        return 0;
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    void *q;
    rc = io->map(io->ctx, p, file_size, prot, MAP_SHARED | MAP_FIXED, fd, 0,
                 &q);
    if (rc) {
        io->unmap(io->ctx, p, reserve);
        return rc;
    }
    rg->mapped = file_size;
    return 0;
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
    if (rc)
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

void region_close(region *rg)
{
    if (rg->base)
        rg->io->unmap(rg->io->ctx, rg->base, rg->reserved);
    rg->base = NULL;
}

/* SPDX-License-Identifier: MIT */
/*
 * io.c - the POSIX implementation of the I/O seam.  Maps errno to codes:
 * ENOSPC and EDQUOT to BONSAI_ENOSPC, ENOMEM to BONSAI_NOMEM, anything
 * else to BONSAI_IO.  Short writes are retried; EINTR is retried.
 */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static int errno_code(int e)
{
    if (e == ENOSPC || e == EDQUOT)
        return BONSAI_ENOSPC;
    if (e == ENOMEM)
        return BONSAI_NOMEM;
    return BONSAI_IO;
}

static int px_pwrite(void *ctx, int fd, const void *buf, size_t len,
                     uint64_t off)
{
    (void)ctx;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno_code(errno);
        }
        p += w;
        off += (uint64_t)w;
        len -= (size_t)w;
    }
    return 0;
}

static int px_pread(void *ctx, int fd, void *buf, size_t len, uint64_t off)
{
    (void)ctx;
    char *p = buf;
    while (len > 0) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno_code(errno);
        }
        if (r == 0)
            return BONSAI_CORRUPT; /* the file ended early */
        p += r;
        off += (uint64_t)r;
        len -= (size_t)r;
    }
    return 0;
}

static int px_fsync(void *ctx, int fd)
{
    (void)ctx;
    return fdatasync(fd) == 0 ? 0 : errno_code(errno);
}

static int px_msync(void *ctx, void *addr, size_t len)
{
    (void)ctx;
    return msync(addr, len, MS_SYNC) == 0 ? 0 : errno_code(errno);
}

static int px_truncate(void *ctx, int fd, uint64_t size)
{
    (void)ctx;
    return ftruncate(fd, (off_t)size) == 0 ? 0 : errno_code(errno);
}

static int px_fallocate(void *ctx, int fd, uint64_t off, uint64_t len)
{
    (void)ctx;
    int e = posix_fallocate(fd, (off_t)off, (off_t)len);
    return e == 0 ? 0 : errno_code(e);
}

static int px_map(void *ctx, void *addr, size_t len, int prot, int flags,
                  int fd, uint64_t off, void **out)
{
    (void)ctx;
    void *p = mmap(addr, len, prot, flags, fd, (off_t)off);
    if (p == MAP_FAILED)
        return errno_code(errno);
    *out = p;
    return 0;
}

static int px_unmap(void *ctx, void *addr, size_t len)
{
    (void)ctx;
    return munmap(addr, len) == 0 ? 0 : errno_code(errno);
}

static const bx_io posix_io = {
    NULL,     px_pwrite,    px_pread, px_fsync, px_msync,
    px_truncate, px_fallocate, px_map,   px_unmap,
};

const bx_io *bx_io_default(void)
{
    return &posix_io;
}

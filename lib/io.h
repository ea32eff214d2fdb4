/* SPDX-License-Identifier: MIT */
/*
 * io.h - the one seam every durability effect passes through: writes,
 * syncs, truncation, space reservation, mapping and unmapping.
 *
 * A store holds a bx_io; the default one calls POSIX.  Tests substitute
 * their own (bonsai_open_io) to record effects or fail the n-th call.
 * Every operation returns 0 or a negative BONSAI_* code (BONSAI_IO,
 * BONSAI_ENOSPC, BONSAI_NOMEM).
 */
#ifndef BONSAI_IO_H
#define BONSAI_IO_H

#include <stddef.h>
#include <stdint.h>

#include "bonsai.h"

typedef struct bx_io {
    void *ctx;
    int (*pwrite)(void *ctx, int fd, const void *buf, size_t len,
                  uint64_t off);
    int (*pread)(void *ctx, int fd, void *buf, size_t len, uint64_t off);
    /* data sync of the whole file (fdatasync) */
    int (*fsync)(void *ctx, int fd);
    /* write back and wait for a range of a shared file mapping */
    int (*msync)(void *ctx, void *addr, size_t len);
    int (*truncate)(void *ctx, int fd, uint64_t size);
    /* reserve blocks for [off, off+len) so later writes cannot hit ENOSPC */
    int (*fallocate)(void *ctx, int fd, uint64_t off, uint64_t len);
    /* mmap at a fixed address (addr != NULL) or anywhere; *out set */
    int (*map)(void *ctx, void *addr, size_t len, int prot, int flags,
               int fd, uint64_t off, void **out);
    int (*unmap)(void *ctx, void *addr, size_t len);
} bx_io;

/* The POSIX implementation. */
const bx_io *bx_io_default(void);

/* Opens like bonsai_open, with every effect passing through io (copied;
 * io->ctx must outlive the store).  For tests of crash and fault paths. */
int bonsai_open_io(const char *path, const bonsai_options *opts,
                   const bx_io *io, bonsai_db **db);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * region.h - the mapping the store lives in: a file mapped MAP_SHARED, or
 * anonymous memory.
 *
 * Invariants: the whole virtual range [base, base+reserved) is reserved at
 * open, so base never moves and pointers into the store stay valid while
 * it grows.  Bytes [0, mapped) are backed (file blocks reserved with
 * fallocate, so writes through the mapping cannot SIGBUS on a full disk).
 * mapped never exceeds cap (the store's max_size) once the store is open,
 * unless the cap was lowered since (region_set_cap): the file then keeps
 * its length and the store may not grow into it.
 */
#ifndef BONSAI_REGION_H
#define BONSAI_REGION_H

#include <stdint.h>

#include "io.h"

typedef struct region {
    const bx_io *io;
    uint8_t *base;
    uint64_t reserved; /* bytes of address space reserved */
    uint64_t mapped;   /* bytes backed and mapped now */
    uint64_t cap;      /* the store may never map more */
    int fd;            /* -1: anonymous memory */
    int writable;
} region;

/* Anonymous memory of cap bytes (pages are touched lazily).  A cap that
 * rounds up to the OS page beyond 2^64 - 1 is BONSAI_INVALID. */
int region_open_anon(region *rg, const bx_io *io, uint64_t cap);

/* A file of file_size bytes (a multiple of the OS page size) on fd,
 * with room to grow to cap; BONSAI_INVALID as above. */
int region_open_file(region *rg, const bx_io *io, int fd, uint64_t cap,
                     uint64_t file_size, int writable);

/* Makes [0, need) backed, growing the file in steps.  Returns 0,
 * BONSAI_FULL (need > cap), BONSAI_ENOSPC, BONSAI_IO or BONSAI_NOMEM. */
int region_grow(region *rg, uint64_t need);

/* A read-only file mapping: maps what another process appended to the
 * file, so that [0, need) is mapped.  Returns 0, BONSAI_FULL (need is
 * beyond the range reserved at open: the store outgrew this handle's
 * max_size), BONSAI_CORRUPT (the file is shorter than need), BONSAI_IO or
 * BONSAI_NOMEM. */
int region_follow(region *rg, uint64_t need);

/* Writes back [off, off+len) of a file mapping and waits for it. */
int region_sync(region *rg, uint64_t off, uint64_t len);

/* Sets the cap to cap bytes (the caller keeps it above what the store
 * uses).  Raising it past the reservation extends the
 * reservation in place: BONSAI_NOMEM when the address space right after
 * it is taken (the store cannot move; reopen with the larger cap). */
int region_set_cap(region *rg, uint64_t cap);

void region_close(region *rg);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * bigmem.h - large arrays that give their memory back when freed.
 *
 * A write cache's arrays (a batch of waiting puts) grow by doubling to
 * many MiB and are freed after each batch.  In malloc's heap the blocks
 * they leave are holes the next, larger block does not fit, and the heap
 * keeps them: a fill in 256 MiB of memory held 49 MiB of heap for a
 * 32 MiB cache.  An array of BIG_MIN bytes or more is therefore a mapping
 * of its own: freeing it returns its pages, and it grows in place or
 * moves without a copy (mremap).  Smaller ones stay in the heap.  A
 * mapping of 2 MiB or more asks for huge pages (MADV_HUGEPAGE, where
 * the system grants them on request): such arrays are filled and freed
 * again batch after batch, and faulting them in 4 KiB at a time cost a
 * random fill a fifth of its time.
 *
 * The caller keeps each array's size and passes it back.  A mapping's
 * failure is not one of malloc's, so the tests that fail malloc reach
 * only the heap side; the callers treat NULL alike from both.
 */
#ifndef BONSAI_BIGMEM_H
#define BONSAI_BIGMEM_H

#include <stddef.h>

#define BIG_MIN (64u * 1024u)

/* An array of bytes (zeroed when zero is set), or NULL. */
void *big_alloc(size_t bytes, int zero);

/* p, of old bytes, resized to bytes with its contents kept up to the
 * shorter of the two; NULL if memory ran out, p then as it was. */
void *big_resize(void *p, size_t old, size_t bytes);

/* Frees p, of bytes (NULL: nothing). */
void big_free(void *p, size_t bytes);

#endif

/* SPDX-License-Identifier: MIT */
/* bigmem.c - large arrays in mappings of their own (bigmem.h). */
#include "bigmem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int is_big(size_t bytes)
{
    return bytes >= BIG_MIN;
}

/* A mapping this large asks for huge pages (bigmem.h). */
#define HUGE_MIN ((size_t)2 << 20)

static void *map_bytes(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL; /* fresh mappings read as zeros */
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_MIN)
        (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: may be refused */
#endif
    return p;
}

void *big_alloc(size_t bytes, int zero)
{
    if (is_big(bytes))
        return map_bytes(bytes);
    return zero ? calloc(bytes ? bytes : 1, 1) : malloc(bytes ? bytes : 1);
}

/* Between the heap and a mapping: a new block, the contents copied. */
static void *move_block(void *p, size_t old, size_t bytes)
{
    void *q = big_alloc(bytes, 0);
    if (!q)
        return NULL;
    if (p)
        memcpy(q, p, old < bytes ? old : bytes);
    big_free(p, old);
    return q;
}

void *big_resize(void *p, size_t old, size_t bytes)
{
    if (!p)
        return big_alloc(bytes, 0);
    if (is_big(old) && is_big(bytes)) {
        void *q = mremap(p, old, bytes, MREMAP_MAYMOVE);
        return q == MAP_FAILED ? NULL : q;
    }
    if (!is_big(old) && !is_big(bytes))
        return realloc(p, bytes ? bytes : 1);
    return move_block(p, old, bytes);
}

void big_free(void *p, size_t bytes)
{
    if (!p)
        return;
    if (is_big(bytes))
        munmap(p, bytes);
    else
        free(p);
}

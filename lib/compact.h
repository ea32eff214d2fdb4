/* SPDX-License-Identifier: MIT */
/*
 * compact.h - bonsai_compact telling how far it is, for bonsai-compact:
 * on a store of many gigabytes each step takes minutes.  The public
 * bonsai_compact is bx_compact without a callback.
 */
#ifndef BONSAI_COMPACT_H
#define BONSAI_COMPACT_H

#include <stdint.h>

#include "bonsai.h"

/* The steps of a compaction, in order (compact.c says what each does). */
typedef enum bx_compact_step {
    BX_COMPACT_VERIFY_SOURCE, /* pages of the source verified */
    BX_COMPACT_COPY,          /* entries copied, over every map */
    BX_COMPACT_VERIFY_COPY,   /* pages of the copy verified */
} bx_compact_step;

/* Called at the start of each step and now and then during it: done of
 * total (pages or entries, as the step says). */
typedef void (*bx_compact_progress_fn)(void *ctx, bx_compact_step step,
                                       uint64_t done, uint64_t total);

/* bonsai_compact, calling fn (may be NULL) with ctx as it goes. */
int bx_compact(bonsai_db *src, const char *dst_path,
               const bonsai_options *opts, bx_compact_progress_fn fn,
               void *ctx);

#endif /* BONSAI_COMPACT_H */

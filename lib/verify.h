/* SPDX-License-Identifier: MIT */
/*
 * verify.h - bonsai_verify's problems in parts, for programs that link
 * the library's objects (bonsai-verify --json): what bonsai_problem_fn
 * gets as one sentence, "SUBJECT: found FOUND (expected EXPECTED)", with
 * what was found and what was expected as strings of their own, so that
 * nobody has to split the sentence (a key or a map name in it may hold
 * any of its words).
 */
#ifndef BONSAI_VERIFY_H
#define BONSAI_VERIFY_H

#include <stdint.h>

#include "bonsai.h"

typedef struct verify_problem {
    const char *map;      /* "" for the file, the catalog or free space */
    uint64_t pgno;        /* 0 if none */
    const char *what;     /* the sentence bonsai_problem_fn gets */
    const char *found;    /* NULL for a problem without found/expected */
    const char *expected; /* NULL exactly when found is */
} verify_problem;

/* The strings live until the callback returns. */
typedef void (*verify_problem_fn)(void *ctx, const verify_problem *p);

/* bonsai_verify, with each problem in parts. */
int verify_in_parts(bonsai_db *db, unsigned flags, verify_problem_fn fn,
                    bonsai_progress_fn progress, void *ctx,
                    uint64_t *problems);

#endif /* BONSAI_VERIFY_H */

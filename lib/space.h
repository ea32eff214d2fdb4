/* SPDX-License-Identifier: MIT */
/*
 * space.h - free space derived at open (space.c).
 */
#ifndef BONSAI_SPACE_H
#define BONSAI_SPACE_H

#include "internal.h"

/* Fills the allocator of a store opened for writing: every page below the
 * high-water mark that no tree of db->meta reaches is free, except pages
 * that an older snapshot held by a live reader in another process still
 * reaches: those wait in the allocator's held runs until no reader
 * holds a snapshot that old.  Returns 0, BONSAI_CORRUPT (the last commit's
 * trees do not walk) or BONSAI_NOMEM. */
int space_derive(bonsai_db *db);

#endif

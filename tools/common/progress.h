/* SPDX-License-Identifier: MIT */
/*
 * progress.h - the progress line the tools draw on standard error while
 * they work: one line, redrawn in place at most PROGRESS_TICK apart,
 *
 *   bonsai-dump: dumping 1,200,000 of 5,000,000 entries (24 %),
 *       4.8 M entries/s, 1 s left
 *
 * (one line on the terminal), with the rate since the phase began and,
 * when the total is known, the time left at that rate.  It is drawn only
 * where someone watches: by default when standard error is a terminal.
 * The line is erased before the tool writes anything else to the
 * terminal (progress_clear) and when the work is done.
 *
 * A phase is one piece of the work with its own unit and total
 * ("verifying" pages, then "copying" entries); done counts from 0 in
 * each.  progress_update is cheap while nothing is to be drawn (it looks
 * at the clock); progress_add, for loops of cheaper steps, looks only
 * every so often.
 */
#ifndef BONSAI_PROGRESS_H
#define BONSAI_PROGRESS_H

#include <stdint.h>

/* Seconds between two draws of the line. */
#define PROGRESS_TICK 0.25

typedef struct progress {
    int on;              /* drawing at all */
    int shown;           /* a line is on the terminal now */
    const char *what;    /* the phase: "dumping" */
    const char *unit;    /* "entries", "pages"; NULL: bytes (MB, MB/s) */
    uint64_t total;      /* of the phase, in its unit; 0: not known */
    double start;        /* seconds: the phase began */
    double last;         /* the last draw; 0: none in this phase */
    uint64_t done;       /* progress_add's sum */
    uint64_t calls;      /* of progress_add in this phase */
} progress;

/* Whether to draw at all: show -1 where standard error is a terminal
 * (the default), 0 never (--quiet, --no-progress), 1 always
 * (--progress). */
void progress_init(progress *p, int show);

/* A new phase: what it is, its unit (NULL: bytes) and total (0: not
 * known).  The next update draws at once. */
void progress_phase(progress *p, const char *what, const char *unit,
                    uint64_t total);

/* Is a draw due: on, and none yet in this phase, or the last
 * PROGRESS_TICK ago?  For callers that work out a note only to draw. */
int progress_due(const progress *p);

/* Draws the line for done (in the phase's unit), with note (may be
 * NULL) after the figures. */
void progress_draw(progress *p, uint64_t done, const char *note);

/* progress_draw when progress_due. */
void progress_update(progress *p, uint64_t done);

/* n more units of the phase done, for loops of cheap steps: looks at
 * the clock only every PROGRESS_STEPS calls (and on the first). */
void progress_add(progress *p, uint64_t n);
#define PROGRESS_STEPS 1024

/* Erases the line (before other output to the terminal, and at the
 * end); the next draw puts it back. */
void progress_clear(progress *p);

/* Erases the line of whichever progress is on the terminal: the tool's
 * messages (tool.h) call it first, so as not to write after it. */
void progress_hide(void);

#endif /* BONSAI_PROGRESS_H */

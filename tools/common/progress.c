/* SPDX-License-Identifier: MIT */
/* progress.c - the progress line on standard error (progress.h). */
#include "progress.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

/* The progress whose line is on the terminal, if any (a program draws
 * one line at a time). */
static progress *on_screen;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void progress_init(progress *p, int show)
{
    *p = (progress){.on = show > 0 || (show < 0 && isatty(STDERR_FILENO))};
    progress_phase(p, "working", NULL, 0);
}

void progress_phase(progress *p, const char *what, const char *unit,
                    uint64_t total)
{
    p->what = what;
    p->unit = unit;
    p->total = total;
    p->start = now();
    p->last = 0;
    p->done = 0;
    p->calls = 0;
}

int progress_due(const progress *p)
{
    return p->on && (p->last == 0 || now() - p->last >= PROGRESS_TICK);
}

/* ---- the figures -------------------------------------------------------- */

/* v in the phase's unit: "1,234,567" or "12.3 MB". */
static void amount(const progress *p, uint64_t v, char *buf, size_t cap)
{
    if (!p->unit) {
        snprintf(buf, cap, "%.1f MB", (double)v / 1e6);
        return;
    }
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, v);
    size_t j = 0;
    for (int i = 0; i < n && j + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0)
            buf[j++] = ',';
        buf[j++] = digits[i];
    }
    buf[j] = 0;
}

/* Units a second: "4.8 M entries/s", "40.1 MB/s". */
static void rate_text(const progress *p, double rate, char *buf, size_t cap)
{
    if (!p->unit)
        snprintf(buf, cap, "%.1f MB/s", rate / 1e6);
    else if (rate >= 1e6)
        snprintf(buf, cap, "%.1f M %s/s", rate / 1e6, p->unit);
    else if (rate >= 1e4)
        snprintf(buf, cap, "%.0f k %s/s", rate / 1e3, p->unit);
    else
        snprintf(buf, cap, "%.0f %s/s", rate, p->unit);
}

/* "42 s", "3 min 5 s", "2 h 3 min". */
static void duration(double s, char *buf, size_t cap)
{
    uint64_t t = (uint64_t)(s + 0.5);
    if (t < 60)
        snprintf(buf, cap, "%" PRIu64 " s", t);
    else if (t < 3600)
        snprintf(buf, cap, "%" PRIu64 " min %" PRIu64 " s", t / 60, t % 60);
    else
        snprintf(buf, cap, "%" PRIu64 " h %" PRIu64 " min", t / 3600,
                 t / 60 % 60);
}

/* ---- drawing ------------------------------------------------------------ */

typedef struct text {
    char s[512];
    size_t n;
} text;

__attribute__((format(printf, 2, 3)))
static void add(text *t, const char *fmt, ...)
{
    if (t->n >= sizeof t->s)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s + t->n, sizeof t->s - t->n, fmt, ap);
    va_end(ap);
    t->n = n < 0 ? sizeof t->s : t->n + (size_t)n;
}

void progress_draw(progress *p, uint64_t done, const char *note)
{
    if (!p->on)
        return;
    double t = now(), elapsed = t - p->start;
    int known = p->total && done <= p->total;
    /* a rate over less than a tick says little */
    double rate = elapsed >= PROGRESS_TICK ? (double)done / elapsed : 0;
    char buf[48];
    text line = {.n = 0};
    amount(p, done, buf, sizeof buf);
    add(&line, "%s: %s %s", tool_name(), p->what, buf);
    if (p->total) {
        amount(p, p->total, buf, sizeof buf);
        add(&line, " of %s", buf);
    }
    if (p->unit)
        add(&line, " %s", p->unit);
    if (known)
        add(&line, " (%.0f %%)", 100.0 * (double)done / (double)p->total);
    if (rate > 0) {
        rate_text(p, rate, buf, sizeof buf);
        add(&line, ", %s", buf);
    }
    if (rate > 0 && known) {
        duration((double)(p->total - done) / rate, buf, sizeof buf);
        add(&line, ", %s left", buf);
    }
    if (note)
        add(&line, ", %s", note);
    fflush(stdout); /* what the tool wrote so far comes first */
    /* \033[K: erase what a longer line left */
    fprintf(stderr, "\r%s\033[K", line.s);
    p->shown = 1;
    on_screen = p;
    p->last = t;
}

void progress_update(progress *p, uint64_t done)
{
    if (progress_due(p))
        progress_draw(p, done, NULL);
}

void progress_add(progress *p, uint64_t n)
{
    p->done += n;
    if (p->on && p->calls++ % PROGRESS_STEPS == 0)
        progress_update(p, p->done);
}

void progress_clear(progress *p)
{
    if (!p->shown)
        return;
    fputs("\r\033[K", stderr);
    p->shown = 0;
    on_screen = NULL;
}

void progress_hide(void)
{
    if (on_screen)
        progress_clear(on_screen);
}

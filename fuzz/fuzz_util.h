/* SPDX-License-Identifier: MIT */
/*
 * fuzz_util.h - what the harnesses in fuzz/ share: reporting a finding,
 * reading an input a field at a time, a temporary directory per process.
 *
 * Everything here is static inline, so the replay test, which compiles
 * all five harnesses into one translation unit, gets one copy without
 * unused-function warnings.
 *
 * A finding is reported on stderr and ends in abort(): libFuzzer saves the
 * input as a crash artifact, the replay test sees its worker die.  Only
 * the harnesses abort; the library never does.
 */
#ifndef BONSAI_FUZZ_UTIL_H
#define BONSAI_FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bonsai.h"

#if defined(__SANITIZE_ADDRESS__)
#define FZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_SANITIZED 1
#endif
#endif
#ifdef FZ_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

/* ---- findings -------------------------------------------------------------- */

static inline void fz_tmpdir_remove(void);

/* Reports a finding and aborts; the temporary directory goes first (an
 * abort skips atexit, and a store left in /dev/shm holds memory). */
__attribute__((noreturn, format(printf, 3, 4))) static inline void
fz_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\n==== bonsai fuzz finding at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    fz_tmpdir_remove();
    abort();
}

#define FZ_FAIL(...) fz_fail(__FILE__, __LINE__, __VA_ARGS__)
#define FZ_CHECK(cond, ...)                                                  \
    do {                                                                     \
        if (!(cond))                                                         \
            FZ_FAIL(__VA_ARGS__);                                            \
    } while (0)

/* Is rc a result the library may return at all: 0 or a BONSAI_* code? */
static inline int fz_rc_known(int rc)
{
    return rc == 0 || (rc <= BONSAI_NOTFOUND && rc >= BONSAI_TXNID_FULL);
}

/* Name of a result for messages ("0" or the BONSAI_* description). */
static inline const char *fz_err(int rc)
{
    return rc == 0 ? "0 (ok)" : bonsai_strerror(rc);
}

/* ---- reading an input ----------------------------------------------------- */

/* The input as a stream of fields; past its end every field reads as 0,
 * so any byte string is a complete, valid program. */
typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

static inline uint8_t fz_u8(fz_in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint16_t fz_u16(fz_in *in)
{
    uint16_t v = fz_u8(in);
    return (uint16_t)(v | (uint16_t)fz_u8(in) << 8);
}

static inline uint64_t fz_u64(fz_in *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)fz_u8(in) << (8 * i);
    return v;
}

/* splitmix64's finaliser, to spread a small number over 64 bits. */
static inline uint64_t fz_mix(uint64_t z)
{
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* ---- a temporary directory ------------------------------------------------ */

/* Removes every file in dir (not recursing), then dir. */
static inline void fz_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[4096 + 512]; /* dir (< 4096) / a name (< 256) */
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The process's directory: NULL to get it, non-NULL "" to forget it. */
static inline char *fz_tmpdir_slot(int forget)
{
    static char dir[4096];
    if (forget)
        dir[0] = 0;
    return dir;
}

static inline void fz_tmpdir_remove(void)
{
    char *dir = fz_tmpdir_slot(0);
    if (dir[0])
        fz_rmdir(dir);
    fz_tmpdir_slot(1);
}

/* A directory made once per process with mkdtemp under $FUZZ_TMPDIR,
 * else $TMPDIR, else /dev/shm (a store's creation syncs; tmpfs makes that
 * free), else /tmp; removed at exit, and by the replay test after each
 * harness.  Aborts if it cannot be made: nothing else could run. */
static inline const char *fz_tmpdir(void)
{
    static int registered;
    char *dir = fz_tmpdir_slot(0);
    if (dir[0])
        return dir;
    const char *base = getenv("FUZZ_TMPDIR");
    if (!base || !*base)
        base = getenv("TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, 4096, "%s/bonsai-fuzz-XXXXXX", base);
    if (!mkdtemp(dir))
        FZ_FAIL("harness: mkdtemp(%s) failed", dir);
    if (!registered) {
        registered = 1;
        atexit(fz_tmpdir_remove);
#if !defined(FUZZ_REPLAY) && defined(FZ_SANITIZED)
        /* a sanitizer report ends the process without atexit (the
         * replay test installs its own callback, which calls this) */
        __sanitizer_set_death_callback(fz_tmpdir_remove);
#endif
    }
    return dir;
}

/* dir/name into buf. */
static inline const char *fz_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", fz_tmpdir(), name);
    return buf;
}

/* Writes n bytes to path, replacing it.  0 or -1. */
static inline int fz_write_file(const char *path, const uint8_t *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return close(fd);
}

#endif /* BONSAI_FUZZ_UTIL_H */

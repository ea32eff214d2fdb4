/* SPDX-License-Identifier: MIT */
/*
 * toolrun.h - running the command-line tools from a test: a tool as a
 * program from $BONSAI_BUILD_DIR with its stdout, stderr and exit status
 * collected, and the file helpers such tests need (whole files, and a
 * snapshot of a path to assert afterwards that a tool left it alone).
 * Failures are Criterion assertions.
 */
#ifndef BONSAI_TEST_TOOLRUN_H
#define BONSAI_TEST_TOOLRUN_H

#include <stddef.h>
#include <sys/types.h>

/* Seconds a tool may run before it counts as hung (under ASan, on a
 * loaded machine, the stores the tests use take well under a second). */
#define TR_HANG_SECONDS 60

/* dir/name (tu_path) in a buffer of its own for the rest of the test. */
const char *tr_path(const char *name);

/* The whole file, NUL-terminated; *len (may be NULL) gets its length. */
char *tr_slurp(const char *path, size_t *len);
void tr_write_bytes(const char *path, const void *p, size_t n);
void tr_copy_file(const char *from, const char *to);
int tr_exists(const char *path); /* lstat: a dangling link exists */

/* What a path is before a tool runs, to compare with afterwards. */
typedef struct tr_snap {
    const char *path;
    int exists;
    mode_t type;  /* S_IFREG, S_IFIFO, ... */
    char *bytes;  /* regular files only */
    size_t len;
} tr_snap;

tr_snap tr_snap_take(const char *path);
/* Asserts that s->path is as it was, and frees the snapshot. */
void tr_snap_same(tr_snap *s, const char *ctx);

typedef struct tr_result {
    int status;  /* exit status */
    char *out;   /* stdout */
    char *err;   /* stderr */
    char cmd[1024];
} tr_result;

void tr_result_free(tr_result *r);

/* Runs argv (argv[0] a tool name) with stdin from in (NULL: /dev/null),
 * as uid unless uid is -1, and collects its output.  Death by a signal,
 * and so a hang (the alarm), fails the test.  Exit 125 means the child
 * could not become uid, 126 that uid may not run the program. */
tr_result tr_run_v(int uid, const char *in, const char *const *argv);

/* Runs argv as tr_run_v does (stdin /dev/null, as this user), with
 * standard error on a terminal: a pseudo-terminal, whose output is
 * r.err (each "\n" as "\r\n", as a terminal is sent it). */
tr_result tr_run_tty(const char *const *argv);

#define TR_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define TR_RUN(...) tr_run_v(-1, NULL, TR_ARGS(__VA_ARGS__))

#endif /* BONSAI_TEST_TOOLRUN_H */

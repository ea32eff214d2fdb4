/* SPDX-License-Identifier: MIT */
/* toolrun.c - running the command-line tools from a test (toolrun.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "toolrun.h"
#include "util.h"

/* ---- files -------------------------------------------------------------- */

/* dir/name in a buffer of its own for the rest of the test. */
const char *tr_path(const char *name)
{
    static char pool[64][PATH_MAX];
    static unsigned used;
    cr_assert(used < 64, "tr_path: out of path buffers");
    char *b = pool[used++];
    snprintf(b, PATH_MAX, "%s", tu_path(name));
    return b;
}

char *tr_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0, r;
    char *p = malloc(cap + 1);
    cr_assert(p);
    while ((r = fread(p + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            p = realloc(p, (cap *= 2) + 1);
            cr_assert(p);
        }
    }
    cr_assert(!ferror(f), "read %s", path);
    fclose(f);
    p[n] = 0;
    if (len)
        *len = n;
    return p;
}

void tr_write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "create %s: %s", path, strerror(errno));
    cr_assert(fwrite(p, 1, n, f) == n && fclose(f) == 0, "write %s", path);
}

void tr_copy_file(const char *from, const char *to)
{
    size_t n;
    char *p = tr_slurp(from, &n);
    tr_write_bytes(to, p, n);
    free(p);
}

int tr_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

tr_snap tr_snap_take(const char *path)
{
    tr_snap s = {.path = path};
    struct stat st;
    if (lstat(path, &st) != 0)
        return s;
    s.exists = 1;
    s.type = st.st_mode & S_IFMT;
    if (S_ISREG(st.st_mode))
        s.bytes = tr_slurp(path, &s.len);
    return s;
}

/* Asserts that s->path is as it was, and frees the snapshot. */
void tr_snap_same(tr_snap *s, const char *ctx)
{
    tr_snap now = tr_snap_take(s->path);
    cr_assert(now.exists == s->exists, "%s: %s was %s, now %s", ctx,
              s->path, s->exists ? "there" : "missing",
              now.exists ? "there" : "missing");
    cr_assert(now.type == s->type, "%s: %s changed its type", ctx, s->path);
    cr_assert(now.len == s->len &&
                  (!s->bytes || memcmp(now.bytes, s->bytes, s->len) == 0),
              "%s: the tool changed %s", ctx, s->path);
    free(now.bytes);
    free(s->bytes);
    s->bytes = NULL;
}

/* ---- running the tools -------------------------------------------------- */


void tr_result_free(tr_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static int open_out(const char *name)
{
    int fd = open(tu_path(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  0600);
    cr_assert(fd >= 0, "%s: %s", name, strerror(errno));
    return fd;
}

/* r->cmd: argv as one line, for messages. */
static void command_line(tr_result *r, const char *const *argv)
{
    size_t n = 0;
    for (int i = 0; argv[i]; i++)
        n += (size_t)snprintf(r->cmd + n, n < sizeof r->cmd
                                              ? sizeof r->cmd - n : 0,
                              "%s%s", i ? " " : "", argv[i]);
}

/* Starts argv (argv[0] a tool name) with its standard streams on fin,
 * fout and ferr, as uid unless uid is -1. */
static pid_t start(int uid, int fin, int fout, int ferr,
                   const char *const *argv)
{
    const char *path = tu_program(argv[0]);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fin, 0);
        dup2(fout, 1);
        dup2(ferr, 2);
        if (uid >= 0 && (setgroups(0, NULL) != 0 ||
                         setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0))
            _exit(125);
        alarm(TR_HANG_SECONDS); /* kept across exec */
        execv(path, (char *const *)argv);
        _exit(errno == EACCES ? 126 : 127);
    }
    return pid;
}

/* The exit status st into r; death by a signal fails the test. */
static void exited(tr_result *r, int st)
{
    cr_assert(!WIFSIGNALED(st), "%s: killed by signal %d%s\nstderr: %s",
              r->cmd, WTERMSIG(st),
              WTERMSIG(st) == SIGALRM ? " (hung)" : "", r->err);
    r->status = WEXITSTATUS(st);
}

/* Runs argv (argv[0] a tool name) with stdin from in (NULL: /dev/null),
 * as uid unless uid is -1, and collects its output.  Death by a signal,
 * and so a hang (the alarm), fails the test.  Exit 125 means the child
 * could not become uid, 126 that uid may not run the program. */
tr_result tr_run_v(int uid, const char *in, const char *const *argv)
{
    tr_result r = {0};
    command_line(&r, argv);
    int fin = open(in ? in : "/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert(fin >= 0, "%s: %s", in, strerror(errno));
    int fout = open_out("run.out"), ferr = open_out("run.err");
    pid_t pid = start(uid, fin, fout, ferr, argv);
    close(fin);
    close(fout);
    close(ferr);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        cr_assert(errno == EINTR, "waitpid: %s", strerror(errno));
    r.out = tr_slurp(tu_path("run.out"), NULL);
    r.err = tr_slurp(tu_path("run.err"), NULL);
    exited(&r, st);
    return r;
}

/* ---- on a terminal ------------------------------------------------------ */

/* Written to the terminal once the tool has exited: all it wrote comes
 * before it. */
#define TTY_END "[tr_run_tty: end]"

typedef struct tty_text {
    char *p;
    size_t n, cap;
} tty_text;

/* Reads what there is on the terminal's master side into t, waiting up
 * to ms milliseconds for it. */
static void tty_read(int master, tty_text *t, int ms)
{
    struct pollfd pfd = {.fd = master, .events = POLLIN};
    if (poll(&pfd, 1, ms) <= 0)
        return;
    if (t->cap - t->n < 4096) {
        t->cap = 2 * t->cap + 4096;
        t->p = realloc(t->p, t->cap + 1);
        cr_assert(t->p);
    }
    ssize_t got = read(master, t->p + t->n, t->cap - t->n);
    cr_assert(got > 0 || errno == EAGAIN || errno == EINTR,
              "read the terminal: %s", strerror(errno));
    if (got > 0)
        t->n += (size_t)got;
    t->p[t->n] = 0;
}

tr_result tr_run_tty(const char *const *argv)
{
    tr_result r = {0};
    command_line(&r, argv);
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    cr_assert(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0,
              "pseudo-terminal: %s", strerror(errno));
    int tty = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
    cr_assert(tty >= 0, "%s: %s", ptsname(master), strerror(errno));
    int fin = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert(fin >= 0, "/dev/null: %s", strerror(errno));
    int fout = open_out("run.out");
    pid_t pid = start(-1, fin, fout, tty, argv);
    close(fin);
    close(fout);
    tty_text t = {0};
    int st, ended = 0;
    while (!t.p || !strstr(t.p, TTY_END)) {
        tty_read(master, &t, 10);
        if (!ended && waitpid(pid, &st, WNOHANG) == pid) {
            ended = 1;
            cr_assert(write(tty, TTY_END, strlen(TTY_END)) ==
                      (ssize_t)strlen(TTY_END));
        }
    }
    close(tty);
    close(master);
    *strstr(t.p, TTY_END) = 0;
    r.err = t.p;
    r.out = tr_slurp(tu_path("run.out"), NULL);
    exited(&r, st);
    return r;
}

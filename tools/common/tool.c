/* SPDX-License-Identifier: MIT */
/*
 * tool.c - the shared part of the command-line programs (see tool.h).
 *
 * A program is one process with one name, so the name and synopsis are
 * kept in two statics set once by tool_init (the library keeps no global
 * state; a program may).
 */
#include "tool.h"
#include "progress.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *prog = "bonsai";
static const char *synopsis = "";
static int quiet;
static const char *context;

void tool_init(const char *name, const char *syn)
{
    prog = name;
    synopsis = syn;
}

const char *tool_name(void)
{
    return prog;
}

void tool_set_quiet(int q)
{
    quiet = q;
}

void tool_set_context(const char *what)
{
    context = what;
}

static void vmessage(const char *fmt, va_list ap)
{
    fflush(stdout); /* keep the order of what a terminal shows */
    progress_hide();
    fprintf(stderr, "%s: ", prog);
    if (context)
        fprintf(stderr, "%s: ", context);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int tool_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    return TOOL_EXIT_FAIL;
}

void tool_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

void tool_info(const char *fmt, ...)
{
    if (quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

int tool_usage_error(const char *fmt, ...)
{
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vmessage(fmt, ap);
        va_end(ap);
    }
    /* one line a form of the command; a line that starts with a space
     * goes on with the form before it */
    const char *line = synopsis;
    for (int first = 1; *line; first = 0) {
        size_t n = strcspn(line, "\n");
        if (*line == ' ')
            fprintf(stderr, "       %*s%.*s\n", (int)strlen(prog), "",
                    (int)n, line);
        else
            fprintf(stderr, "%s %s %.*s\n", first ? "usage:" : "      ",
                    prog, (int)n, line);
        line += n + (line[n] == '\n');
    }
    fprintf(stderr, "Try '%s --help'.\n", prog);
    return TOOL_EXIT_USAGE;
}

int tool_bad_option(int c, char **argv)
{
    const char *arg = argv[optind - 1];
    if (c == ':')
        return tool_usage_error("option %s needs an argument", arg);
    if (optopt > 0 && optopt < 256)
        return tool_usage_error("unknown option -%c", optopt);
    return tool_usage_error("unknown option %s", arg);
}

int tool_bad_value(const char *option, const char *value, const char *rule)
{
    return tool_usage_error("%s: %s, not '%s'", option, rule, value);
}

/* The field of o that a store option sets, or NULL. */
static uint32_t *store_field(bonsai_options *o, const char *option)
{
    if (strcmp(option, "--page-size") == 0)
        return &o->page_size;
    if (strcmp(option, "--node-bytes") == 0)
        return &o->node_bytes;
    if (strcmp(option, "--node-entries") == 0)
        return &o->node_entries;
    return NULL;
}

const char *tool_store_rule(const char *option)
{
    bonsai_options o;
    bonsai_options_init(&o);
    uint32_t *field = store_field(&o, option);
    if (!field)
        return NULL;
    /* 1 is out of range for each of them: the library's sentence names
     * the field, then says what it takes */
    *field = 1;
    const char *why = bonsai_options_check(&o);
    const char *rest = why ? strchr(why, ' ') : NULL;
    return rest ? rest + 1 : why;
}

int tool_store_option(const char *option, const char *value, uint32_t *out)
{
    bonsai_options o;
    bonsai_options_init(&o);
    uint32_t *field = store_field(&o, option);
    int64_t v;
    if (field && tool_number(value, 0, UINT32_MAX, &v) == 0) {
        *field = (uint32_t)v;
        if (!bonsai_options_check(&o)) {
            *out = *field;
            return 0;
        }
    }
    return tool_bad_value(option, value, tool_store_rule(option));
}

int tool_new_path(const char *what, const char *path)
{
    if (!*path)
        return tool_bad_value(what, path, "must be a file name");
    if (strcmp(path, "-") != 0)
        return 0;
    return tool_usage_error("%s: '-' is not a file name here (./- names a "
                            "file called -)", what);
}

int tool_one_file(int argc, char **argv, const char **file)
{
    if (optind == argc)
        return tool_usage_error("no store FILE given");
    if (optind + 1 != argc)
        return tool_usage_error("unexpected argument '%s'",
                                argv[optind + 1]);
    *file = argv[optind];
    return 0;
}

int tool_check_map_name(const char *name)
{
    char rule[64];
    if (*name && strlen(name) <= BONSAI_MAX_NAME)
        return 0;
    snprintf(rule, sizeof rule, "must be a map name of 1 to %u bytes",
             BONSAI_MAX_NAME);
    return tool_bad_value("-s", name, rule);
}

void tool_version(void)
{
    printf("%s (bonsai %d.%d.%d)\n", prog, BONSAI_VERSION_MAJOR,
           BONSAI_VERSION_MINOR, BONSAI_VERSION_PATCH);
}

/* ---- opening a store ---------------------------------------------------- */

/* Whether path may hold a store: 0 if it is a regular file, or does not
 * exist and may be created; else the bonsai error and *why, what the OS
 * says about the path.  A FIFO is refused here because opening it would
 * wait for a writer. */
static int check_path(const char *path, int create, const char **why)
{
    struct stat st;
    *why = NULL;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT && create)
            return 0;
        *why = strerror(errno);
        return errno == ENOENT ? BONSAI_NOTFOUND : BONSAI_IO;
    }
    if (S_ISDIR(st.st_mode))
        *why = "is a directory";
    else if (!S_ISREG(st.st_mode))
        *why = "not a regular file";
    return *why ? BONSAI_IO : 0;
}

/* bonsai_open, first without waiting, so that the user hears why the
 * tool stops before it waits for another writer. */
static int open_waiting(const char *path, const bonsai_options *opts,
                        bonsai_db **db)
{
    bonsai_options now = *opts;
    now.busy_timeout_ms = 0;
    int rc = bonsai_open(path, &now, db);
    if (rc != BONSAI_BUSY || opts->busy_timeout_ms == 0)
        return rc;
    if (opts->busy_timeout_ms == BONSAI_WAIT_FOREVER)
        tool_info("%s: waiting for the process that has it open to write "
                  "(--busy-timeout MS to give up)", path);
    else
        tool_info("%s: waiting up to %u ms for the process that has it "
                  "open to write", path, (unsigned)opts->busy_timeout_ms);
    return bonsai_open(path, opts, db);
}

int tool_parse_busy_timeout(const char *s, uint32_t *ms)
{
    int64_t v;
    if (strcmp(s, "forever") == 0) {
        *ms = BONSAI_WAIT_FOREVER;
        return 0;
    }
    if (tool_number(s, 0, (int64_t)BONSAI_WAIT_FOREVER - 1, &v) != 0)
        return tool_bad_value("--busy-timeout", s, TOOL_BUSY_TIMEOUT_RULE);
    *ms = (uint32_t)v;
    return 0;
}

int tool_open(const char *path, const bonsai_options *opts, bonsai_db **db)
{
    *db = NULL;
    const char *why;
    char waited[96];
    int rc = check_path(path, opts->create && !opts->read_only, &why);
    if (rc == 0 && (rc = open_waiting(path, opts, db)) != 0)
        *db = NULL;
    if (rc == 0)
        return 0;
    if (rc == BONSAI_CORRUPT)
        why = "not a bonsai store, or its header and both meta slots are "
              "damaged";
    if (rc == BONSAI_INVALID && bonsai_options_check(opts))
        why = bonsai_options_check(opts);
    if (rc == BONSAI_BUSY) {
        snprintf(waited, sizeof waited, "waited %u ms for the process that "
                 "has it open", (unsigned)opts->busy_timeout_ms);
        why = waited;
    }
    return tool_fail("%s: cannot open: %s%s%s%s", path, bonsai_strerror(rc),
                     why ? " (" : "", why ? why : "", why ? ")" : "");
}

int tool_hold_writer(const char *path, uint32_t timeout_ms,
                     bonsai_db **held)
{
    struct stat st;
    *held = NULL;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        return 0;
    bonsai_options o;
    bonsai_options_init(&o);
    o.create = 0;
    o.busy_timeout_ms = timeout_ms;
    int rc = open_waiting(path, &o, held);
    if (rc == 0)
        return 0;
    *held = NULL;
    if (rc != BONSAI_BUSY)
        return 0; /* not a store, or one that does not open: replaced */
    return tool_fail("%s: %s (waited %u ms for the process that has it "
                     "open)", path, bonsai_strerror(rc), (unsigned)timeout_ms);
}

int tool_open_read_only(const char *path, bonsai_db **db)
{
    bonsai_options opts;
    bonsai_options_init(&opts);
    opts.read_only = 1;
    opts.create = 0;
    return tool_open(path, &opts, db);
}

int tool_is_store(const char *path)
{
    static const char magic[8] = "bonsai\x1a\n";
    char head[sizeof magic];
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, head, sizeof head, 0);
    int e = errno;
    close(fd);
    errno = e;
    if (n < 0)
        return -1;
    return n == (ssize_t)sizeof head &&
           memcmp(head, magic, sizeof head) == 0;
}

int tool_same_file(const char *path, const char *other)
{
    struct stat a, b;
    return stat(path, &a) == 0 && stat(other, &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int tool_flush_stdout(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    return tool_fail("write standard output: %s",
                     strerror(errno ? errno : EIO));
}

int tool_number(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int tool_parse_compress(const char *s, unsigned *codec, int *level)
{
    int64_t lv = 0;
    if (strcmp(s, "none") == 0)
        *codec = BONSAI_COMPRESS_NONE;
    else if (strcmp(s, "lz4") == 0)
        *codec = BONSAI_COMPRESS_LZ4;
    else if (strcmp(s, "zlib") == 0)
        *codec = BONSAI_COMPRESS_ZLIB;
    else if (strncmp(s, "zlib:", 5) == 0 && !tool_number(s + 5, 1, 9, &lv))
        *codec = BONSAI_COMPRESS_ZLIB;
    else
        return -1;
    *level = (int)lv;
    return 0;
}

const char *tool_codec_name(unsigned codec)
{
    return codec == BONSAI_COMPRESS_LZ4 ? "lz4"
           : codec == BONSAI_COMPRESS_ZLIB ? "zlib" : "none";
}

/* ---- the maps of a store ------------------------------------------------ */

static int maps_add(void *ctx, const char *name, unsigned kind,
                    uint64_t entries)
{
    tool_maps *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        tool_map *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return BONSAI_NOMEM;
        l->v = v;
        l->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return BONSAI_NOMEM;
    l->v[l->n++] =
        (tool_map){.name = copy, .kind = kind, .entries = entries};
    return 0;
}

int tool_maps_list(bonsai_db *db, bonsai_txn *txn, const char *only,
                   tool_maps *maps)
{
    if (!only)
        return bonsai_map_list(db, txn, maps_add, maps);
    bonsai_map m;
    unsigned kind;
    uint64_t entries = 0;
    int rc = bonsai_map_open(db, txn, only, &m, &kind);
    if (rc == 0) {
        rc = bonsai_count(txn, m, &entries);
        int rc2 = bonsai_map_close(db, m);
        if (rc == 0)
            rc = rc2;
    }
    return rc ? rc : maps_add(maps, only, kind, entries);
}

void tool_maps_free(tool_maps *maps)
{
    for (size_t i = 0; i < maps->n; i++)
        free(maps->v[i].name);
    free(maps->v);
    *maps = (tool_maps){0};
}

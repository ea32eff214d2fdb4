/* SPDX-License-Identifier: MIT */
/*
 * bonsai-compact - writes a compacted copy of a bonsai store: every node
 * full, no free space, optionally under other node settings.
 *
 * A thin wrapper over bonsai_compact (lib/compact.c, which says how; it
 * calls bx_compact, the same with a progress callback, lib/compact.h):
 * it opens SRC read-only (never writes it), compacts into DST atomically
 * (a temporary file beside DST, synced, verified, renamed), and prints
 * the sizes before and after (with --json, as one JSON object).  With
 * the source's settings the copy is never larger than the source: if it
 * would be, DST is left as it was and the exit status is 1.  The copy gets DST's permission bits if DST
 * existed, else SRC's.  On a terminal each step shows its progress.
 *
 * Exit: 0 done, 1 an operation failed (the message says which and why),
 * 2 bad usage.
 */
#include "bonsai.h"
#include "common/json.h"
#include "common/progress.h"
#include "common/tool.h"
#include "compact.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define PROG "bonsai-compact"

struct args {
    int compress;        /* -1: the source's, else BONSAI_COMPRESS_* */
    int level;           /* zlib level, 0 = default */
    uint32_t node_bytes, node_entries, page_size; /* 0: the source's */
    int quiet;
    int json;            /* the sizes as one JSON object */
    uint32_t busy_timeout_ms;
    const char *src, *dst;
};

/* ---- usage -------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
        "NAME\n"
        "    bonsai-compact - write a compacted copy of a bonsai store\n"
        "\n"
        "SYNOPSIS\n"
        "    bonsai-compact [--compress none|lz4|zlib[:LEVEL]] "
        "[--node-bytes N]\n"
        "                   [--node-entries N] [--page-size N] [-q] [--json]\n"
        "                   [--busy-timeout MS] SRC DST\n"
        "\n"
        "DESCRIPTION\n"
        "    Copies the last commit of the store SRC into a new store DST\n"
        "    with every node full and no free space: each map is inserted\n"
        "    in key order, so every node but the last of each level is\n"
        "    filled to its node size.  SRC is opened read-only and never\n"
        "    written; it is verified before it is copied.  DST is written\n"
        "    to a temporary file beside it, synced, verified and only then\n"
        "    renamed over DST, so DST is either the old file or the whole\n"
        "    new copy.  A DST that is a store another process has open to\n"
        "    write is waited for (--busy-timeout) and held while it is\n"
        "    replaced.  Prints the sizes before and after.\n"
        "\n"
        "    The copy gets the permission bits of DST if DST existed,\n"
        "    else those of SRC (never more than those while it is\n"
        "    written).  On a terminal, standard error shows how far each\n"
        "    step is: verifying SRC, copying, verifying the copy.\n"
        "\n"
        "    With the source's settings the copy is never larger than the\n"
        "    source: if it would be, DST is left as it was and the exit\n"
        "    status is 1.  Other settings may make it larger.\n"
        "\n"
        "OPTIONS\n"
        "    --compress none|lz4|zlib[:LEVEL]\n"
        "                      node compression of the copy (zlib level\n"
        "                      1..9; default: the source's)\n"
        "    --node-bytes N    target node size in bytes, 256..1048576\n"
        "    --node-entries N  maximum entries in a node, 2..65535\n"
        "    --page-size N     allocation granule, a power of two,\n"
        "                      64..65536\n"
        "                      (each default: the source's)\n"
        "    -q, --quiet       print nothing on success, no progress\n"
        "    --json            print the sizes as one JSON object, also\n"
        "                      with --quiet: one line,\n"
        "                        {\"src\":S,\"dst\":S,\"src_bytes\":N,\n"
        "                         \"dst_bytes\":N,\"ratio\":F,\"seconds\":F}\n"
        "                      (S a string, N an integer, F a number):\n"
        "                      the files' sizes, ratio dst_bytes /\n"
        "                      src_bytes, and the seconds the copy took\n"
        TOOL_BUSY_TIMEOUT_HELP
        "    -V, --version     print the version and exit\n"
        "    -h, --help        this text\n"
        "\n"
        "EXIT STATUS\n"
        "    0 done, 1 an operation failed (SRC cannot be opened or fails\n"
        "    verify, the copy would be larger, a write failed), 2 bad\n"
        "    usage.\n"
        "\n"
        "NOTES\n"
        "    SRC may be open for writing in another process: the copy is\n"
        "    of the last commit when the copy began (without a lock file\n"
        "    SRC-lock the open fails, busy: stop the writer first).  SRC\n"
        "    must be a regular file, and so must DST if it exists: the\n"
        "    copy is renamed over it.\n"
        "\n"
        "EXAMPLES\n"
        "    bonsai-compact store.bonsai store.compact\n"
        "    bonsai-compact --compress zlib:9 --node-bytes 16384 a.bonsai "
        "b.bonsai\n");
}

static int parse_option(int c, const char *arg, struct args *a)
{
    unsigned codec;
    switch (c) {
    case 'c':
        if (tool_parse_compress(arg, &codec, &a->level))
            return tool_bad_value("--compress", arg, TOOL_COMPRESS_RULE);
        a->compress = (int)codec;
        return 0;
    case 'b': return tool_store_option("--node-bytes", arg, &a->node_bytes);
    case 'e':
        return tool_store_option("--node-entries", arg, &a->node_entries);
    default: /* 'p' */
        return tool_store_option("--page-size", arg, &a->page_size);
    }
}

/* Fills *a from argv.  Returns 0, an exit status, or -1 when done. */
static int parse_args(int argc, char **argv, struct args *a)
{
    enum { OPT_HELP = 256, OPT_BUSY };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, 'V'},
        {"quiet", no_argument, NULL, 'q'},
        {"busy-timeout", required_argument, NULL, OPT_BUSY},
        {"compress", required_argument, NULL, 'c'},
        {"node-bytes", required_argument, NULL, 'b'},
        {"node-entries", required_argument, NULL, 'e'},
        {"page-size", required_argument, NULL, 'p'},
        {"json", no_argument, NULL, 'J'}, /* long only: not a short option */
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){.compress = -1,
                       .busy_timeout_ms = TOOL_BUSY_TIMEOUT_DEFAULT};
    int c;
    opterr = 0;
    int st;
    while ((c = getopt_long(argc, argv, ":hqV", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': case 'b': case 'e': case 'p':
            if ((st = parse_option(c, optarg, a)))
                return st;
            break;
        case 'q': a->quiet = 1; break;
        case 'J': a->json = 1; break;
        case OPT_BUSY:
            if (tool_parse_busy_timeout(optarg, &a->busy_timeout_ms))
                return TOOL_EXIT_USAGE;
            break;
        case 'V': tool_version(); return -1;
        case 'h': case OPT_HELP: usage(stdout); return -1;
        default: return tool_bad_option(c, argv);
        }
    }
    if (argc - optind < 2)
        return tool_usage_error("SRC and DST are both needed");
    if (argc - optind > 2)
        return tool_usage_error("unexpected argument '%s'",
                                argv[optind + 2]);
    a->src = argv[optind];
    a->dst = argv[optind + 1];
    if (tool_new_path("DST", a->dst))
        return TOOL_EXIT_USAGE;
    if (strcmp(a->src, a->dst) == 0 || tool_same_file(a->src, a->dst))
        return tool_usage_error("SRC and DST are the same file '%s'",
                                a->src);
    return 0;
}

/* ---- compacting --------------------------------------------------------- */

static int fail(const char *what, const char *path, int rc)
{
    return tool_fail("%s %s: %s", what, path, bonsai_strerror(rc));
}

/* DST is replaced by a rename: it must be a regular file or not exist
 * (a rename over a device or a FIFO would replace it). */
static int check_dst(const char *dst)
{
    struct stat st;
    if (stat(dst, &st) != 0 || S_ISREG(st.st_mode))
        return 0;
    return tool_fail("%s: %s: %s", dst, S_ISDIR(st.st_mode)
                     ? "is a directory" : "not a regular file",
                     bonsai_strerror(BONSAI_IO));
}

/* The copy's options: the source's settings with the flags applied, or
 * NULL (the source's settings) when no flag was given. */
static int copy_options(bonsai_db *db, const struct args *a,
                        bonsai_options *o, const bonsai_options **out)
{
    *out = NULL;
    if (a->compress < 0 && !a->node_bytes && !a->node_entries &&
        !a->page_size)
        return 0;
    bonsai_stat s;
    bonsai_space sp;
    int rc = bonsai_db_stat(db, &s);
    if (rc == 0)
        rc = bonsai_space_stat(db, &sp);
    if (rc)
        return rc;
    bonsai_options_init(o);
    o->page_size = a->page_size ? a->page_size : s.page_size;
    o->node_bytes = a->node_bytes ? a->node_bytes : s.node_bytes;
    o->node_entries = a->node_entries ? a->node_entries : s.node_entries;
    o->compression = a->compress >= 0 ? (unsigned)a->compress
                                      : sp.compression;
    o->compression_level = a->compress >= 0 ? a->level
                                            : sp.compression_level;
    *out = o;
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void explain(const struct args *a, int rc)
{
    if (rc == BONSAI_FULL)
        tool_fail("the copy would be larger than %s with the same "
                  "settings; %s left as it was", a->src, a->dst);
    else if (rc == BONSAI_CORRUPT)
        tool_fail("%s (or the copy) fails verify; see bonsai-verify %s",
                  a->src, a->src);
    else if (rc == BONSAI_INVALID)
        tool_fail("%s and %s are the same file, or a setting is out of "
                  "range", a->src, a->dst);
    else
        fail("compact into", a->dst, rc);
}

/* The permission bits the copy ends with: DST's if it exists, else
 * SRC's. */
static mode_t copy_mode(const struct args *a)
{
    struct stat st;
    if (stat(a->dst, &st) == 0 || stat(a->src, &st) == 0)
        return st.st_mode & 0777;
    return 0644;
}

static void on_step(void *ctx, bx_compact_step step, uint64_t done,
                    uint64_t total)
{
    static const char *const what[] = {
        [BX_COMPACT_VERIFY_SOURCE] = "verifying the source",
        [BX_COMPACT_COPY] = "copying",
        [BX_COMPACT_VERIFY_COPY] = "verifying the copy",
    };
    progress *p = ctx;
    if (p->what != what[step])
        progress_phase(p, what[step],
                       step == BX_COMPACT_COPY ? "entries" : "pages", total);
    p->total = total;
    progress_update(p, done);
}

/* The copy, with the progress line.  It is written with no more
 * permission bits than it ends with (the umask takes the others from
 * the library's 0644), and given exactly those once it is DST.  0 or an
 * exit status (reported). */
static int compact_into(const struct args *a, bonsai_db *db,
                        const bonsai_options *o)
{
    mode_t mode = copy_mode(a);
    progress p;
    progress_init(&p, a->quiet ? 0 : -1);
    mode_t old = umask(~mode & 0777);
    int rc = bx_compact(db, a->dst, o, on_step, &p);
    umask(old);
    progress_clear(&p);
    if (rc) {
        explain(a, rc);
        return TOOL_EXIT_FAIL;
    }
    if (chmod(a->dst, mode) != 0)
        return tool_fail("%s: cannot give it mode %03o: %s", a->dst,
                         (unsigned)mode, strerror(errno));
    return 0;
}

static double ratio(uint64_t after, uint64_t before)
{
    return before ? (double)after / (double)before : 0.0;
}

static int print_json(const struct args *a, uint64_t before, uint64_t after,
                      double seconds)
{
    json_writer j;
    json_init(&j, stdout);
    json_begin_object(&j, NULL);
    json_string(&j, "src", a->src);
    json_string(&j, "dst", a->dst);
    json_uint(&j, "src_bytes", before);
    json_uint(&j, "dst_bytes", after);
    json_double(&j, "ratio", ratio(after, before), 4);
    json_double(&j, "seconds", seconds, 3);
    json_end_object(&j);
    return tool_flush_stdout();
}

static int compact(const struct args *a, bonsai_db *db)
{
    bonsai_options opts;
    const bonsai_options *o;
    int rc = copy_options(db, a, &opts, &o);
    if (rc)
        return fail("read", a->src, rc);
    struct stat st;
    uint64_t before = stat(a->src, &st) == 0 ? (uint64_t)st.st_size : 0;
    double t0 = now();
    if ((rc = compact_into(a, db, o)))
        return rc;
    uint64_t after = stat(a->dst, &st) == 0 ? (uint64_t)st.st_size : 0;
    double seconds = now() - t0;
    if (a->json)
        return print_json(a, before, after, seconds);
    if (a->quiet)
        return 0;
    printf("%s: %" PRIu64 " bytes\n", a->src, before);
    printf("%s: %" PRIu64 " bytes, %.1f %% of the source (%.2f s)\n",
           a->dst, after, 100.0 * ratio(after, before), seconds);
    return tool_flush_stdout();
}

int main(int argc, char **argv)
{
    tool_init(PROG, "[--compress none|lz4|zlib[:LEVEL]] [--node-bytes N]\n"
                    " [--node-entries N] [--page-size N] [-q] [--json]\n"
                    " [--busy-timeout MS] SRC DST");
    struct args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st < 0 ? TOOL_EXIT_OK : st;
    tool_set_quiet(a.quiet);
    bonsai_db *db, *held;
    if ((st = check_dst(a.dst)) ||
        (st = tool_hold_writer(a.dst, a.busy_timeout_ms, &held)))
        return st;
    if ((st = tool_open_read_only(a.src, &db)) == 0) {
        st = compact(&a, db);
        bonsai_close(db);
    }
    bonsai_close(held);
    return st;
}

/* SPDX-License-Identifier: MIT */
/*
 * bonsai-verify - checks a bonsai store and lists every problem it finds.
 *
 * A thin wrapper over bonsai_verify (lib/verify.c, which says what is
 * checked): it opens the store read-only, runs the walk, prints each
 * problem as one line
 *
 *   FILE: map NAME, page P (byte B): WHAT
 *
 * ("the file" instead of "map NAME" for the header, meta slots, catalog
 * and free space; no page part when there is none), then a summary line;
 * with --json, one JSON object instead, each problem in the parts
 * lib/verify.h gives (the one call here beyond bonsai.h).  On a terminal,
 * the walk shows its progress on standard error.
 *
 * Exit: 0 no problem, 1 a problem found or the store could not be opened
 * or read, 2 bad usage.
 */
#include "bonsai.h"
#include "common/json.h"
#include "common/progress.h"
#include "common/tool.h"
#include "verify.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

#define PROG "bonsai-verify"

struct args {
    unsigned flags;   /* BONSAI_VERIFY_QUICK */
    int progress;     /* -1 auto (a terminal), 0 never, 1 always */
    int quiet;        /* only the exit status and the summary */
    int json;         /* one JSON object on stdout */
    const char *file;
};

/* ---- usage -------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
        "NAME\n"
        "    bonsai-verify - check a bonsai store\n"
        "\n"
        "SYNOPSIS\n"
        "    bonsai-verify [--quick] [-q] [--progress | --no-progress]\n"
        "                  [--json] FILE\n"
        "\n"
        "DESCRIPTION\n"
        "    Opens the store FILE read-only and checks its last commit: the\n"
        "    header and both meta slots with their checksums, every node\n"
        "    image (checksum, bounds, sections), key order within and across\n"
        "    nodes and against the separators of branches, entry counts,\n"
        "    the map records of the catalog, overflow values (reference,\n"
        "    header, length, checksum of the bytes), that no page is\n"
        "    referenced twice and that every page lies inside the store.\n"
        "    Free space is derived, as at open: every page below the\n"
        "    high-water mark that no tree reaches is free.\n"
        "\n"
        "    Every problem is printed on standard output, one line each:\n"
        "        FILE: map NAME, page P (byte B): SUBJECT: found FOUND\n"
        "            (expected EXPECTED)\n"
        "    what the problem is about, what was found there and what was\n"
        "    expected instead (\"the file\" for the header, meta slots,\n"
        "    catalog and free space; \"SUBJECT: NOTE\" for the few problems\n"
        "    that are no value where another belonged, such as a part that\n"
        "    cannot be read), and the walk goes on after it.  A node that\n"
        "    cannot be read is not descended into.  The last line sums up.\n"
        "\n"
        "OPTIONS\n"
        "    --quick        meta slots and structure only: skip the\n"
        "                   checksums and full decoding of leaves and the\n"
        "                   checksums of overflow values\n"
        "    -q, --quiet    print only the summary line, no progress\n"
        "    --progress     show progress on standard error (pages checked,\n"
        "                   rate, time left), also with --quiet\n"
        "    --no-progress  never show progress (default: shown when\n"
        "                   standard error is a terminal, unless --quiet)\n"
        "    --json         print one JSON object (below) instead of lines\n"
        "    -V, --version  print the version and exit\n"
        "    -h, --help     this text\n"
        "\n"
        "JSON\n"
        "    With --json, standard output is one line, one object:\n"
        "        {\"file\":S,\"txn\":N,\"quick\":B,\"problems\":[P,...],\n"
        "         \"problem_count\":N,\"ok\":B}\n"
        "    and each problem P is\n"
        "        {\"map\":S,\"page\":N,\"byte\":N,\"what\":S,\n"
        "         \"expected\":S|null,\"found\":S|null}\n"
        "    (S a string, N a number, B true or false).  txn is the commit\n"
        "    checked; map is \"\" for the header, meta slots, catalog and\n"
        "    free space; page and byte are 0 when there is no page; what\n"
        "    is the whole sentence, \"SUBJECT: found FOUND (expected\n"
        "    EXPECTED)\", and found and expected its parts, both null for\n"
        "    a problem that is no value where another belonged (\"SUBJECT:\n"
        "    NOTE\").  ok is true when the walk completed and found no\n"
        "    problem.  If the walk stops (the message on standard error\n"
        "    says why), the object holds the problems found until then.\n"
        "    In strings '\"' and '\\' are escaped with a backslash, and\n"
        "    every byte below 0x20 or above 0x7e is written \\u00XX.\n"
        "\n"
        "EXIT STATUS\n"
        "    0 no problem found, 1 a problem found (or the store could not\n"
        "    be opened or read: the message says why), 2 bad usage.\n"
        "\n"
        "NOTES\n"
        "    The store is opened read-only, so other processes may read and\n"
        "    write it meanwhile: the commit checked is the last one when the\n"
        "    check began (without a lock file FILE-lock a writer makes the\n"
        "    open fail, busy).  FILE must be a regular file: a FIFO or a\n"
        "    device is refused, not read.\n"
        "\n"
        "EXAMPLES\n"
        "    bonsai-verify store.bonsai\n"
        "    bonsai-verify --quick -q store.bonsai && echo fine\n"
        "    bonsai-verify --json store.bonsai | jq '.problems[].what'\n");
}

/* Fills *a from argv.  Returns 0, an exit status, or -1 when done. */
static int parse_args(int argc, char **argv, struct args *a)
{
    enum { OPT_HELP = 256, OPT_QUICK, OPT_PROGRESS, OPT_NO_PROGRESS };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, 'V'},
        {"quick", no_argument, NULL, OPT_QUICK},
        {"quiet", no_argument, NULL, 'q'},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
        {"json", no_argument, NULL, 'J'}, /* long only: not a short option */
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){.progress = -1};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "qhV", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_QUICK: a->flags |= BONSAI_VERIFY_QUICK; break;
        case 'q': a->quiet = 1; break;
        case OPT_PROGRESS: a->progress = 1; break;
        case OPT_NO_PROGRESS: a->progress = 0; break;
        case 'J': a->json = 1; break;
        case 'V': tool_version(); return -1;
        case 'h': case OPT_HELP: usage(stdout); return -1;
        default: return tool_bad_option(c, argv);
        }
    }
    return tool_one_file(argc, argv, &a->file);
}

/* ---- reporting ---------------------------------------------------------- */

typedef struct report {
    const char *file;
    uint32_t page_size;
    int quiet;
    progress pr;
    json_writer *json;   /* --json: where the problems go */
} report;

static void on_problem(void *ctx, const char *map, uint64_t pgno,
                       const char *what)
{
    report *r = ctx;
    if (r->quiet)
        return;
    progress_clear(&r->pr);
    if (*map)
        printf("%s: map %s", r->file, map);
    else
        printf("%s: the file", r->file);
    if (pgno)
        printf(", page %" PRIu64 " (byte %" PRIu64 ")", pgno,
               pgno * r->page_size);
    printf(": %s\n", what);
}

/* --json: a problem, as an element of the "problems" array. */
static void on_problem_parts(void *ctx, const verify_problem *p)
{
    report *r = ctx;
    json_writer *j = r->json;
    progress_clear(&r->pr);
    json_begin_object(j, NULL);
    json_string(j, "map", p->map);
    json_uint(j, "page", p->pgno);
    json_uint(j, "byte", p->pgno * r->page_size);
    json_string(j, "what", p->what);
    json_string(j, "expected", p->expected);
    json_string(j, "found", p->found);
    json_end_object(j);
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    report *r = ctx;
    r->pr.total = total;
    if (done < total)
        progress_update(&r->pr, done);
}

/* ---- main --------------------------------------------------------------- */

/* --json: the walk, its problems printed as they come, in one object
 * that is closed even when the walk stops; the exit status. */
static int verify_json(const struct args *a, bonsai_db *db, report *r,
                       uint64_t txn)
{
    json_writer j;
    json_init(&j, stdout);
    r->json = &j;
    json_begin_object(&j, NULL);
    json_string(&j, "file", a->file);
    json_uint(&j, "txn", txn);
    json_bool(&j, "quick", a->flags & BONSAI_VERIFY_QUICK);
    json_begin_array(&j, "problems");
    uint64_t problems = 0;
    int rc = verify_in_parts(db, a->flags, on_problem_parts, on_progress, r,
                             &problems);
    progress_clear(&r->pr);
    json_end_array(&j);
    json_uint(&j, "problem_count", problems);
    json_bool(&j, "ok", rc == 0 && problems == 0);
    json_end_object(&j);
    if (rc)
        return tool_fail("%s: the walk stopped: %s", a->file,
                         bonsai_strerror(rc));
    if (tool_flush_stdout())
        return TOOL_EXIT_FAIL;
    return problems ? TOOL_EXIT_FAIL : TOOL_EXIT_OK;
}

/* Runs the walk and prints the summary; the exit status. */
static int verify(const struct args *a, bonsai_db *db)
{
    bonsai_stat s;
    int rc = bonsai_db_stat(db, &s);
    if (rc)
        return tool_fail("%s: %s", a->file, bonsai_strerror(rc));
    report r = {.file = a->file, .page_size = s.page_size,
                .quiet = a->quiet};
    progress_init(&r.pr, a->progress >= 0 ? a->progress
                         : a->quiet   ? 0 : -1);
    progress_phase(&r.pr, "verifying", "pages", 0);
    if (a->json)
        return verify_json(a, db, &r, s.txn_id);
    uint64_t problems = 0;
    rc = bonsai_verify(db, a->flags, on_problem, on_progress, &r,
                       &problems);
    progress_clear(&r.pr);
    if (rc) {
        return tool_fail("%s: the walk stopped: %s", a->file,
                         bonsai_strerror(rc));
    }
    if (problems)
        printf("%s: %" PRIu64 " problem%s found\n", a->file, problems,
               problems == 1 ? "" : "s");
    else
        printf("%s: no problems found (%s check of txn %" PRIu64 ")\n",
               a->file, a->flags & BONSAI_VERIFY_QUICK ? "quick" : "full",
               s.txn_id);
    if (tool_flush_stdout())
        return TOOL_EXIT_FAIL;
    return problems ? TOOL_EXIT_FAIL : TOOL_EXIT_OK;
}

int main(int argc, char **argv)
{
    tool_init(PROG, "[--quick] [-q] [--progress | --no-progress] [--json] "
                    "FILE");
    struct args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st < 0 ? TOOL_EXIT_OK : st;
    tool_set_quiet(a.quiet);
    bonsai_db *db;
    if ((st = tool_open_read_only(a.file, &db)))
        return st;
    st = verify(&a, db);
    bonsai_close(db);
    return st;
}

/* SPDX-License-Identifier: MIT */
/*
 * bonsai-stat - the shape and space of a bonsai store, like mdb_stat and
 * bbolt stats: per map entries, depth, node counts, bytes, fill, bytes
 * per entry, compression ratio and the bytes lost to rounding images up to
 * whole pages; for the whole file its size, the cap, used and free bytes,
 * free extents, txn id, read snapshots and the format version.
 *
 * A thin wrapper: bonsai_db_stat, bonsai_map_list and bonsai_map_stat (in
 * one read snapshot), and bonsai_space_stat (lib/verify.c: free space as
 * the quick verify walk derives it).  Text by default, one JSON object
 * with --json.  A map whose walk fails is reported (its "error" in JSON)
 * and the others still are.
 *
 * Exit: 0 done, 1 an operation failed or the store has problems, 2 bad
 * usage.
 */
#include "bonsai.h"
#include "common/json.h"
#include "common/tool.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "bonsai-stat"

struct args {
    int json;
    const char *map;   /* -s MAP: only this map */
    const char *file;
};

/* ---- usage -------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
        "NAME\n"
        "    bonsai-stat - show the shape and space of a bonsai store\n"
        "\n"
        "SYNOPSIS\n"
        "    bonsai-stat [--json] [-s MAP] FILE\n"
        "\n"
        "DESCRIPTION\n"
        "    Opens the store FILE read-only and prints, for the file: its\n"
        "    size, the cap the store records (max_size), the bytes below the\n"
        "    high-water mark and what holds them (head, map nodes, catalog,\n"
        "    overflow values, free), the free extents and the largest, the\n"
        "    rounding waste of the maps shown, the txn id, the read\n"
        "    snapshots open in this handle and the oldest one's lag, the\n"
        "    settings and the format version; and for each\n"
        "    map: entries, depth, branch and leaf nodes, bytes in nodes\n"
        "    (raw, stored, in whole pages), average leaf fill, bytes per\n"
        "    entry (node and overflow pages / entries), compression ratio\n"
        "    (raw / stored), rounding waste (pages - stored) and overflow\n"
        "    values.  Free space is derived as verify derives it: every\n"
        "    page below the high-water mark that no tree reaches.\n"
        "\n"
        "    Read snapshots are known only for this handle (the reader\n"
        "    table is not shared between processes), so a separate\n"
        "    bonsai-stat process always sees 0.\n"
        "\n"
        "OPTIONS\n"
        "    --json     one JSON object instead of text; map names are\n"
        "               escaped, bytes over 0x7f as \\u00XX\n"
        "    -s MAP     only the map MAP\n"
        "    -V, --version\n"
        "               print the version and exit\n"
        "    -h, --help\n"
        "               this text\n"
        "\n"
        "EXIT STATUS\n"
        "    0 done, 1 an operation failed or the walk met a problem (the\n"
        "    message says which; run bonsai-verify), 2 bad usage.\n"
        "\n"
        "EXAMPLES\n"
        "    bonsai-stat store.bonsai\n"
        "    bonsai-stat --json store.bonsai | jq '.maps[].bytes_per_entry'"
        "\n");
}

/* Fills *a from argv.  Returns 0, an exit status, or -1 when done. */
static int parse_args(int argc, char **argv, struct args *a)
{
    enum { OPT_HELP = 256, OPT_JSON };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, OPT_HELP},
        {"json", no_argument, NULL, OPT_JSON},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 's': a->map = optarg; break;
        case OPT_JSON: a->json = 1; break;
        case 'V': tool_version(); return -1;
        case 'h': case OPT_HELP: usage(stdout); return -1;
        default: return tool_bad_option(c, argv);
        }
    }
    if (a->map && tool_check_map_name(a->map))
        return TOOL_EXIT_USAGE;
    return tool_one_file(argc, argv, &a->file);
}

/* ---- gathering ---------------------------------------------------------- */

typedef struct mapstat {
    const tool_map *map;   /* name and kind */
    int err;               /* 0, or why info is missing */
    bonsai_map_info info;
} mapstat;

typedef struct store {
    const char *file;
    const char *only;      /* -s MAP */
    bonsai_stat st;
    bonsai_space sp;
    int space_err;
    tool_maps names;
    mapstat *maps;         /* one per name; NULL if none */
    size_t n;
    int list_err;
} store;

static void stat_maps(bonsai_db *db, const struct args *a, store *s)
{
    bonsai_txn *txn;
    int rc = bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn);
    if (rc) {
        s->list_err = rc;
        return;
    }
    s->list_err = tool_maps_list(db, txn, a->map, &s->names);
    if (s->names.n && !(s->maps = calloc(s->names.n, sizeof *s->maps)))
        s->list_err = BONSAI_NOMEM;
    for (size_t i = 0; s->maps && i < s->names.n; i++, s->n++) {
        mapstat *ms = &s->maps[i];
        bonsai_map m;
        ms->map = &s->names.v[i];
        ms->err = bonsai_map_open(db, txn, ms->map->name, &m, NULL);
        if (ms->err == 0) {
            ms->err = bonsai_map_stat(txn, m, &ms->info);
            /* a store may hold more maps than one handle opens at once */
            int rc = bonsai_map_close(db, m);
            if (ms->err == 0)
                ms->err = rc;
        }
    }
    bonsai_txn_abort(txn);
}

static void gather(bonsai_db *db, const struct args *a, store *s)
{
    bonsai_db_stat(db, &s->st);
    /* before any snapshot of ours: the readers are other code's */
    s->space_err = bonsai_space_stat(db, &s->sp);
    stat_maps(db, a, s);
}

static void store_free(store *s)
{
    tool_maps_free(&s->names);
    free(s->maps);
}

/* ---- figures ------------------------------------------------------------ */

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

static uint64_t used_bytes(const bonsai_space *sp)
{
    return sp->head_bytes + sp->node_bytes + sp->catalog_bytes +
           sp->overflow_bytes;
}

/* Bytes lost to rounding node images up to whole pages, over the maps
 * listed (their walks that worked). */
static uint64_t rounding_waste(const store *s)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!s->maps[i].err)
            sum += s->maps[i].info.page_bytes - s->maps[i].info.stored_bytes;
    return sum;
}

static uint64_t map_bytes(const bonsai_map_info *m)
{
    return m->page_bytes + m->overflow_bytes;
}

/* ---- text --------------------------------------------------------------- */

static void text_space(const store *s)
{
    const bonsai_space *sp = &s->sp;
    if (s->space_err) {
        printf("  space              unknown: %s\n",
               bonsai_strerror(s->space_err));
        return;
    }
    printf("  used               %" PRIu64 " bytes (head %" PRIu64 ", map "
           "nodes %" PRIu64 ", catalog %" PRIu64 ", overflow values %"
           PRIu64 ")\n", used_bytes(sp), sp->head_bytes, sp->node_bytes,
           sp->catalog_bytes, sp->overflow_bytes);
    printf("  free               %" PRIu64 " bytes in %" PRIu64 " extent%s "
           "(largest %" PRIu64 " bytes)\n", sp->free_bytes,
           sp->free_extents, sp->free_extents == 1 ? "" : "s",
           sp->largest_free);
    printf("  high-water mark    %" PRIu64 " bytes; %" PRIu64 " bytes of "
           "file beyond it\n", sp->end_bytes,
           sp->file_bytes > sp->end_bytes ? sp->file_bytes - sp->end_bytes
                                          : 0);
    if (sp->shared_readers) {
        printf("  read snapshots     %" PRIu64 " published by the processes "
               "reading it", sp->all_readers);
        if (sp->all_readers)
            printf(", the oldest %" PRIu64 " txns behind",
                   sp->txn_id - sp->oldest_any);
    } else {
        printf("  read snapshots     %" PRIu64 " open in this handle (no "
               "lock file: other processes' are not known)", sp->readers);
        if (sp->readers)
            printf(", the oldest %" PRIu64 " txns behind",
                   sp->txn_id - sp->oldest_reader);
    }
    printf("\n");
    if (sp->problems)
        printf("  problems           %" PRIu64 " met by the walk: the space "
               "figures are partial; run bonsai-verify\n", sp->problems);
}

static void text_file(const store *s)
{
    const bonsai_stat *st = &s->st;
    printf("%s\n", s->file);
    printf("  format version     %" PRIu32 "\n", st->format_version);
    printf("  file size          %" PRIu64 " bytes\n", s->sp.file_bytes);
    printf("  cap                %" PRIu64 " bytes (recorded in the "
           "store)\n", st->max_size);
    text_space(s);
    printf("  rounding waste     %" PRIu64 " bytes in the node pages of the "
           "maps below\n", rounding_waste(s));
    printf("  txn id             %" PRIu64 "\n", st->txn_id);
    printf("  settings           page %" PRIu32 " bytes, nodes of %" PRIu32
           " bytes / %" PRIu32 " entries, compression %s\n", st->page_size,
           st->node_bytes, st->node_entries,
           s->space_err ? "unknown" : tool_codec_name(s->sp.compression));
}

static void text_map(const mapstat *ms)
{
    const bonsai_map_info *m = &ms->info;
    printf("map %s (%s keys)\n", ms->map->name,
           ms->map->kind == BONSAI_KEY_U64 ? "u64" : "byte");
    if (ms->err) {
        printf("  error              %s\n", bonsai_strerror(ms->err));
        return;
    }
    printf("  entries            %" PRIu64 "\n", m->entries);
    printf("  depth              %" PRIu32 "\n", m->depth);
    printf("  nodes              %" PRIu64 " branch, %" PRIu64 " leaf\n",
           m->branch_nodes, m->leaf_nodes);
    printf("  bytes in nodes     %" PRIu64 " raw, %" PRIu64 " stored, %"
           PRIu64 " in pages\n", m->raw_bytes, m->stored_bytes,
           m->page_bytes);
    printf("  average leaf fill  %.1f %%\n", 100.0 * m->leaf_fill);
    printf("  bytes per entry    %.3f\n", ratio(map_bytes(m), m->entries));
    printf("  compression ratio  %.3f (raw / stored)\n",
           ratio(m->raw_bytes, m->stored_bytes));
    printf("  rounding waste     %" PRIu64 " bytes (%.1f %% of the pages)\n",
           m->page_bytes - m->stored_bytes,
           100.0 * ratio(m->page_bytes - m->stored_bytes, m->page_bytes));
    printf("  overflow values    %" PRIu64 " (%" PRIu64 " bytes of pages)\n",
           m->overflow_values, m->overflow_bytes);
}

/* ---- JSON --------------------------------------------------------------- */

/* "key":"the bonsai_strerror text" */
static void json_error(json_writer *j, const char *key, int rc)
{
    json_string(j, key, bonsai_strerror(rc));
}

static void json_space(json_writer *j, const store *s)
{
    const bonsai_space *sp = &s->sp;
    if (s->space_err) {
        json_error(j, "space_error", s->space_err);
        return;
    }
    json_uint(j, "used_bytes", used_bytes(sp));
    json_uint(j, "head_bytes", sp->head_bytes);
    json_uint(j, "map_node_bytes", sp->node_bytes);
    json_uint(j, "catalog_bytes", sp->catalog_bytes);
    json_uint(j, "overflow_bytes", sp->overflow_bytes);
    json_uint(j, "free_bytes", sp->free_bytes);
    json_uint(j, "free_extents", sp->free_extents);
    json_uint(j, "largest_free_bytes", sp->largest_free);
    json_uint(j, "end_bytes", sp->end_bytes);
    uint64_t n = sp->shared_readers ? sp->all_readers : sp->readers;
    uint64_t oldest = sp->shared_readers ? sp->oldest_any : sp->oldest_reader;
    json_uint(j, "readers", n);
    json_string(j, "readers_scope",
                sp->shared_readers ? "all processes" : "this handle");
    if (n)
        json_uint(j, "oldest_reader_lag", sp->txn_id - oldest);
    else
        json_null(j, "oldest_reader_lag");
    json_string(j, "compression", tool_codec_name(sp->compression));
    json_int(j, "compression_level", sp->compression_level);
    json_uint(j, "problems", sp->problems);
}

static void json_map(json_writer *j, const mapstat *ms)
{
    const bonsai_map_info *m = &ms->info;
    json_begin_object(j, NULL);
    json_string(j, "name", ms->map->name);
    json_string(j, "kind", ms->map->kind == BONSAI_KEY_U64 ? "u64" : "bytes");
    if (ms->err) {
        json_error(j, "error", ms->err);
        json_end_object(j);
        return;
    }
    json_uint(j, "entries", m->entries);
    json_uint(j, "depth", m->depth);
    json_uint(j, "branch_nodes", m->branch_nodes);
    json_uint(j, "leaf_nodes", m->leaf_nodes);
    json_uint(j, "raw_bytes", m->raw_bytes);
    json_uint(j, "stored_bytes", m->stored_bytes);
    json_uint(j, "page_bytes", m->page_bytes);
    json_double(j, "leaf_fill", m->leaf_fill, 4);
    json_double(j, "bytes_per_entry", ratio(map_bytes(m), m->entries), 4);
    json_double(j, "compression_ratio",
                ratio(m->raw_bytes, m->stored_bytes), 4);
    json_uint(j, "rounding_waste", m->page_bytes - m->stored_bytes);
    json_uint(j, "overflow_values", m->overflow_values);
    json_uint(j, "overflow_bytes", m->overflow_bytes);
    json_null(j, "error");
    json_end_object(j);
}

static void json_store(const store *s)
{
    const bonsai_stat *st = &s->st;
    json_writer j;
    json_init(&j, stdout);
    json_begin_object(&j, NULL);
    json_string(&j, "file", s->file);
    json_uint(&j, "format_version", st->format_version);
    json_uint(&j, "file_bytes", s->sp.file_bytes);
    json_uint(&j, "cap", st->max_size);
    json_uint(&j, "txn_id", st->txn_id);
    json_uint(&j, "page_size", st->page_size);
    json_uint(&j, "node_bytes", st->node_bytes);
    json_uint(&j, "node_entries", st->node_entries);
    json_space(&j, s);
    json_uint(&j, "rounding_waste", rounding_waste(s));
    if (s->list_err)
        json_error(&j, "list_error", s->list_err);
    else
        json_null(&j, "list_error");
    json_begin_array(&j, "maps");
    for (size_t i = 0; i < s->n; i++)
        json_map(&j, &s->maps[i]);
    json_end_array(&j);
    json_end_object(&j);
}

/* ---- main --------------------------------------------------------------- */

/* Errors on stderr (also in JSON mode); 1 if there was any. */
static int report_errors(const store *s)
{
    int bad = 0;
    if (s->space_err || s->sp.problems) {
        tool_warn("%s: free space walk: %s", s->file,
                  s->space_err ? bonsai_strerror(s->space_err)
                               : "problems met; run bonsai-verify");
        bad = 1;
    }
    if (s->list_err && s->only) {
        tool_warn("%s: map %s: %s", s->file, s->only,
                  bonsai_strerror(s->list_err));
        bad = 1;
    } else if (s->list_err) {
        tool_warn("%s: listing maps: %s", s->file,
                  bonsai_strerror(s->list_err));
        bad = 1;
    }
    for (size_t i = 0; i < s->n; i++)
        if (s->maps[i].err) {
            tool_warn("%s: map %s: %s", s->file, s->maps[i].map->name,
                      bonsai_strerror(s->maps[i].err));
            bad = 1;
        }
    return bad;
}

int main(int argc, char **argv)
{
    tool_init(PROG, "[--json] [-s MAP] FILE");
    struct args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st < 0 ? TOOL_EXIT_OK : st;
    bonsai_db *db;
    if ((st = tool_open_read_only(a.file, &db)))
        return st;
    store s = {.file = a.file, .only = a.map};
    gather(db, &a, &s);
    if (a.json) {
        json_store(&s);
    } else {
        text_file(&s);
        for (size_t i = 0; i < s.n; i++)
            text_map(&s.maps[i]);
    }
    st = report_errors(&s);
    if (tool_flush_stdout())
        st = 1;
    store_free(&s);
    bonsai_close(db);
    return st ? TOOL_EXIT_FAIL : TOOL_EXIT_OK;
}

/* SPDX-License-Identifier: MIT */
/*
 * bonsai-dump - writes the maps of a bonsai store as text, in the format
 * Berkeley DB's db_dump and LMDB's mdb_dump write.  bonsai-load and
 * mdb_load read it as it is; db_load reads it once the mapsize= and
 * bonsai_keys= lines are removed (see usage()).
 *
 * The output, one block per map, maps in name (memcmp) order:
 *
 *   VERSION=3
 *   format=bytevalue          or format=print (-p)
 *   database=NAME             the map's name, escaped as in print format
 *   type=btree
 *   mapsize=N                 an LMDB map size that holds every block of
 *                             this dump (the same N in every block)
 *   bonsai_keys=u64           only for a map with u64 keys
 *   HEADER=END
 *   ' ' KEY '\n'              then ' ' VALUE '\n', for each entry in key
 *   ...                       order; an empty value is a line of one space
 *   DATA=END
 *
 * bytevalue: two lowercase hex digits per byte.  print: a byte 0x20..0x7e
 * is written as itself, except '\' which is written "\\"; any other byte
 * is "\hh" (lowercase hex).  That is db_dump -p byte for byte.  A u64 key
 * is written as 8 bytes, most significant first, so that memcmp order in
 * another engine is numeric order.
 *
 * mapsize: mdb_load sizes its environment from the first header it reads
 * and stops at 1 MiB without one.  A first pass over the maps being dumped
 * adds up what LMDB needs for each entry, as LMDB 0.9 lays it out (see
 * lmdb_entry_bytes), tripled for half-full pages and branch pages.
 *
 * Memory: one read snapshot, one cursor at a time, output encoded through
 * a fixed buffer; only the list of map names grows (with the number of
 * maps, not entries).  Uses only the public API (bonsai.h).
 *
 * Exit: 0 done, 1 an operation failed, 2 bad usage.
 */
#include "bonsai.h"
#include "common/progress.h"
#include "common/tool.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "bonsai-dump"

static const char hexdig[] = "0123456789abcdef";

struct args {
    int all;            /* -a */
    const char *map;    /* -s MAP */
    int print;          /* -p */
    int list;           /* -l */
    const char *output; /* -f OUTPUT, NULL: stdout */
    int quiet;          /* -q */
    const char *file;
};

/* The store, for messages. */
static const char *store_file = "";

/* ---- usage -------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
        "NAME\n"
        "    bonsai-dump - write the maps of a bonsai store as text\n"
        "\n"
        "SYNOPSIS\n"
        "    bonsai-dump [-a | -s MAP] [-p] [-q] [-f OUTPUT] FILE\n"
        "    bonsai-dump -l FILE\n"
        "\n"
        "DESCRIPTION\n"
        "    Writes every map of the store FILE (or the one named by -s) in\n"
        "    the text format of db_dump and mdb_dump, one block per map in\n"
        "    name order.  bonsai-load and mdb_load read the output as it is.\n"
        "    The store is opened read-only and read in one snapshot; memory\n"
        "    use does not grow with its size.  When standard error is a\n"
        "    terminal and the output is not, a line there shows how far\n"
        "    the two passes over the maps are (the first sizes mapsize=).\n"
        "\n"
        "OPTIONS\n"
        "    -a         all maps (the default; for mdb_dump users)\n"
        "    -s MAP     only the map MAP\n"
        "    -p         print format: printable ASCII as itself, '\\' as\n"
        "               '\\\\', any other byte as '\\hh' (default:\n"
        "               bytevalue, two hex digits per byte)\n"
        "    -l         list the map names, one a line, and exit\n"
        "    -f OUTPUT  write to OUTPUT instead of standard output (- is\n"
        "               standard output)\n"
        "    -q, --quiet\n"
        "               no progress line\n"
        "    -V, --version\n"
        "               print the version and exit\n"
        "    -h, --help\n"
        "               this text\n"
        "\n"
        "FORMAT\n"
        "    Each block: VERSION=3, format=bytevalue|print, database=MAP,\n"
        "    type=btree, mapsize=N, bonsai_keys=u64 (u64-key maps only),\n"
        "    HEADER=END; then a key line and a value line per entry, each a\n"
        "    space followed by the bytes (an empty value is a line of one\n"
        "    space); then DATA=END.  A u64 key is written as 8 bytes, most\n"
        "    significant first, so other engines keep numeric order;\n"
        "    bonsai_keys=u64 tells bonsai-load to make a u64 map again.\n"
        "    mapsize=N is an LMDB map size large enough to load every block\n"
        "    of the output (mdb_load stops at 1 MiB without it).\n"
        "\n"
        "    mdb_load reads the output and warns about bonsai_keys=.\n"
        "    db_load rejects both mapsize= and bonsai_keys=; remove them:\n"
        "        bonsai-dump FILE | sed '/^mapsize=/d; /^bonsai_keys=/d' |\n"
        "            db_load out.db\n"
        "    (data lines start with a space, so the patterns only match\n"
        "    header lines).  LMDB takes keys of at most 511 bytes.\n"
        "\n"
        "EXIT STATUS\n"
        "    0 success, 1 an operation failed (the message says which and\n"
        "    why), 2 bad usage.\n"
        "\n"
        "EXAMPLES\n"
        "    bonsai-dump store.bonsai | bonsai-load copy.bonsai\n"
        "    bonsai-dump -s users store.bonsai | mdb_load -n users.mdb\n");
}

/* Fills *a from argv.  Returns 0, an exit status, or -1 when done
 * (--help, -V). */
static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"quiet", no_argument, NULL, 'q'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":as:plf:qhV", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'a': a->all = 1; break;
        case 's': a->map = optarg; break;
        case 'p': a->print = 1; break;
        case 'l': a->list = 1; break;
        case 'f': a->output = strcmp(optarg, "-") ? optarg : NULL; break;
        case 'q': a->quiet = 1; break;
        case 'V': tool_version(); return -1;
        case 'h': usage(stdout); return -1;
        default: return tool_bad_option(c, argv);
        }
    }
    if (a->all && a->map)
        return tool_usage_error("-a and -s %s exclude each other", a->map);
    if (a->list && (a->map || a->print))
        return tool_usage_error("-l takes no -s or -p");
    if ((a->map && tool_check_map_name(a->map)) ||
        (a->output && tool_new_path("-f", a->output)))
        return TOOL_EXIT_USAGE;
    return tool_one_file(argc, argv, &a->file);
}

/* ---- output ------------------------------------------------------------- */

/* Output through a fixed buffer; the first write error is kept. */
typedef struct out {
    FILE *f;
    size_t n;
    int err;
    char buf[1 << 16];
} out;

static void out_flush(out *o)
{
    if (o->n && !o->err && fwrite(o->buf, 1, o->n, o->f) != o->n)
        o->err = errno ? errno : EIO;
    o->n = 0;
}

/* Room for at least 4 more bytes. */
static inline void out_room(out *o)
{
    if (sizeof o->buf - o->n < 4)
        out_flush(o);
}

static void out_str(out *o, const char *s)
{
    for (; *s; s++) {
        out_room(o);
        o->buf[o->n++] = *s;
    }
}

/* Writes n bytes in print format (no leading space, no newline). */
static void out_print(out *o, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t b = p[i];
        out_room(o);
        if (b == '\\') {
            o->buf[o->n++] = '\\';
            o->buf[o->n++] = '\\';
        } else if (b >= 0x20 && b <= 0x7e) {
            o->buf[o->n++] = (char)b;
        } else {
            o->buf[o->n++] = '\\';
            o->buf[o->n++] = hexdig[b >> 4];
            o->buf[o->n++] = hexdig[b & 15];
        }
    }
}

/* One key or value line: a space, the bytes, a newline. */
static void out_line(out *o, const uint8_t *p, size_t n, int print)
{
    out_room(o);
    o->buf[o->n++] = ' ';
    if (print) {
        out_print(o, p, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            out_room(o);
            o->buf[o->n++] = hexdig[p[i] >> 4];
            o->buf[o->n++] = hexdig[p[i] & 15];
        }
    }
    out_room(o);
    o->buf[o->n++] = '\n';
}

/* ---- the LMDB size estimate --------------------------------------------- */

/* Bytes LMDB 0.9 needs for one entry, generously: a leaf node is an 8-byte
 * header, the key and the value, padded to even, plus a 2-byte slot; a
 * node over (page - 16) / 2 - 2 bytes keeps its value on overflow pages
 * (16-byte header) and an 8-byte page number in the leaf.  The leaf share
 * is tripled: pages split half full, and branch pages hold keys again. */
static uint64_t lmdb_entry_bytes(uint64_t klen, uint64_t vlen, uint64_t page)
{
    uint64_t nodemax = (((page - 16) / 2) & ~(uint64_t)1) - 2;
    uint64_t node = 8 + klen + vlen, overflow = 0;
    if (node > nodemax) {
        node = 8 + klen + 8;
        overflow = (16 + vlen + page - 1) / page * page;
    }
    node += node & 1;
    return 3 * (node + 2) + overflow;
}

/* a + b, or UINT64_MAX where that does not fit: an estimate this large
 * says only "more than LMDB can map" anyway. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int fail(const char *map, const char *what, int rc)
{
    if (map)
        return tool_fail("%s: map %s: %s: %s", store_file, map, what,
                         bonsai_strerror(rc));
    return tool_fail("%s: %s: %s", store_file, what, bonsai_strerror(rc));
}

/* A cursor on map m of txn (in *cur, its map's handle in *map), and its
 * entry count if count is not NULL; 0 or an exit status (reported). */
static int open_cursor(bonsai_db *db, bonsai_txn *txn, const tool_map *m,
                       bonsai_map *map, bonsai_cursor **cur, uint64_t *count)
{
    int rc = bonsai_map_open(db, txn, m->name, map, NULL);
    if (rc)
        return fail(m->name, "open", rc);
    if (count && (rc = bonsai_count(txn, *map, count)))
        rc = fail(m->name, "count", rc);
    else if ((rc = bonsai_cursor_open(txn, *map, cur)))
        rc = fail(m->name, "cursor", rc);
    if (rc)
        bonsai_map_close(db, *map);
    return rc;
}

/* Closes the cursor and the map's handle: a store may hold more maps
 * than one handle opens at once.  0 or an exit status (reported). */
static int close_cursor(bonsai_db *db, const tool_map *m, bonsai_map map,
                        bonsai_cursor *cur)
{
    bonsai_cursor_close(cur);
    int rc = bonsai_map_close(db, map);
    return rc ? fail(m->name, "close", rc) : 0;
}

/* Adds the LMDB bytes of every entry of m to *total. */
static int estimate_map(bonsai_db *db, bonsai_txn *txn, const tool_map *m,
                        uint64_t page, uint64_t *total, progress *pr)
{
    bonsai_map map;
    bonsai_cursor *cur;
    int rc = open_cursor(db, txn, m, &map, &cur, NULL);
    if (rc)
        return rc;
    uint64_t sum = 4 * page; /* root, a record in LMDB's main tree */
    for (rc = bonsai_cursor_first(cur); rc == 0;
         rc = bonsai_cursor_next(cur)) {
        bonsai_val k, v;
        if ((rc = bonsai_cursor_get(cur, &k, &v)))
            break;
        sum = add_sat(sum, lmdb_entry_bytes(k.size, v.size, page));
        progress_add(pr, 1);
    }
    int st = close_cursor(db, m, map, cur);
    if (rc != BONSAI_NOTFOUND)
        return fail(m->name, "walk", rc);
    *total = add_sat(*total, sum);
    return st;
}

/* ---- dumping ------------------------------------------------------------ */

static void write_header(out *o, const tool_map *m, uint64_t mapsize,
                         int print)
{
    char num[32];
    out_str(o, "VERSION=3\nformat=");
    out_str(o, print ? "print" : "bytevalue");
    out_str(o, "\ndatabase=");
    out_print(o, (const uint8_t *)m->name, strlen(m->name));
    out_str(o, "\ntype=btree\nmapsize=");
    snprintf(num, sizeof num, "%" PRIu64, mapsize);
    out_str(o, num);
    out_str(o, "\n");
    if (m->kind == BONSAI_KEY_U64)
        out_str(o, "bonsai_keys=u64\n");
    out_str(o, "HEADER=END\n");
}

static int dump_map(bonsai_db *db, bonsai_txn *txn, const tool_map *m,
                    uint64_t mapsize, int print, out *o, progress *pr)
{
    bonsai_map map;
    bonsai_cursor *cur;
    uint64_t count = 0, seen = 0;
    int rc = open_cursor(db, txn, m, &map, &cur, &count);
    if (rc)
        return rc;
    write_header(o, m, mapsize, print);
    for (rc = bonsai_cursor_first(cur); rc == 0 && !o->err;
         rc = bonsai_cursor_next(cur)) {
        bonsai_val k, v;
        uint8_t be[8];
        if (m->kind == BONSAI_KEY_U64) {
            uint64_t u;
            if ((rc = bonsai_cursor_get_u64(cur, &u, &v)))
                break;
            for (int i = 7; i >= 0; i--, u >>= 8)
                be[i] = (uint8_t)u;
            k.data = be;
            k.size = 8;
        } else if ((rc = bonsai_cursor_get(cur, &k, &v))) {
            break;
        }
        out_line(o, k.data, k.size, print);
        out_line(o, v.data, v.size, print);
        seen++;
        progress_add(pr, 1);
    }
    int st = close_cursor(db, m, map, cur);
    if (o->err)
        return 0; /* reported by the caller */
    if (st)
        return st;
    if (rc != BONSAI_NOTFOUND)
        return fail(m->name, "walk", rc);
    if (seen != count) {
        return tool_fail("map %s: the walk found %" PRIu64 " entries, the "
                         "count says %" PRIu64 ": %s", m->name, seen, count,
                         bonsai_strerror(BONSAI_CORRUPT));
    }
    out_str(o, "DATA=END\n");
    return 0;
}

/* ---- main --------------------------------------------------------------- */

static int run(const struct args *a, bonsai_db *db, bonsai_txn *txn,
               tool_maps *maps, out *o, progress *pr)
{
    int rc = tool_maps_list(db, txn, a->map, maps);
    if (rc)
        return fail(a->map, a->map ? "open" : "map list", rc);
    if (a->list) {
        for (size_t i = 0; i < maps->n && !o->err; i++) {
            out_print(o, (const uint8_t *)maps->v[i].name,
                      strlen(maps->v[i].name));
            out_str(o, "\n");
        }
        return 0;
    }
    long os = sysconf(_SC_PAGESIZE);
    uint64_t page = os >= 4096 ? (uint64_t)os : 4096;
    uint64_t total = 1u << 20; /* meta pages, free list, commit garbage */
    uint64_t entries = 0;
    for (size_t i = 0; i < maps->n; i++)
        entries += maps->v[i].entries;
    progress_phase(pr, "measuring", "entries", entries);
    for (size_t i = 0; i < maps->n; i++)
        if ((rc = estimate_map(db, txn, &maps->v[i], page, &total, pr)))
            return rc;
    uint64_t mib = 1u << 20;
    uint64_t mapsize = add_sat(total, mib - 1) / mib * mib;
    progress_phase(pr, "dumping", "entries", entries);
    for (size_t i = 0; i < maps->n && !o->err; i++)
        if ((rc = dump_map(db, txn, &maps->v[i], mapsize, a->print, o, pr)))
            return rc;
    return 0;
}

int main(int argc, char **argv)
{
    tool_init(PROG, "[-a | -s MAP] [-p] [-q] [-f OUTPUT] FILE\n-l FILE");
    struct args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st < 0 ? TOOL_EXIT_OK : st;
    tool_set_quiet(a.quiet);
    store_file = a.file;
    if (a.output && tool_same_file(a.output, a.file))
        return tool_usage_error("-f %s would overwrite the store",
                                a.output);

    bonsai_db *db;
    if ((st = tool_open_read_only(a.file, &db)))
        return st;
    bonsai_txn *txn = NULL;
    int rc = bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn);
    if (rc) {
        bonsai_close(db);
        return fail(NULL, "read transaction", rc);
    }

    FILE *f = stdout;
    if (a.output && !(f = fopen(a.output, "w"))) {
        st = tool_fail("%s: %s", a.output, strerror(errno));
        bonsai_txn_abort(txn);
        bonsai_close(db);
        return st;
    }
    out *o = calloc(1, sizeof *o);
    tool_maps maps = {0};
    if (!o) {
        st = fail(NULL, "output buffer", BONSAI_NOMEM);
    } else {
        o->f = f;
        /* not over the dump itself on a terminal */
        progress pr;
        progress_init(&pr, a.quiet || isatty(fileno(f)) ? 0 : -1);
        st = run(&a, db, txn, &maps, o, &pr);
        progress_clear(&pr);
        out_flush(o);
        if (!o->err && fflush(f) != 0)
            o->err = errno ? errno : EIO;
        if (f != stdout && fclose(f) != 0 && !o->err)
            o->err = errno ? errno : EIO;
        if (o->err)
            st = tool_fail("write %s: %s",
                           a.output ? a.output : "standard output",
                           strerror(o->err));
    }
    free(o);
    tool_maps_free(&maps);
    bonsai_txn_abort(txn);
    if ((rc = bonsai_close(db)) && st == 0)
        st = fail(NULL, "close", rc);
    return st;
}

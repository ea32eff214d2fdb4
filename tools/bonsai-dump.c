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
 * maps, not entries).  Uses only the public API (bonsai.h), but for -r.
 *
 * -r (salvage, as db_dump -r): the maps and entries come from the
 * library's salvage walk (salvage.h), which reads what can still be read
 * of a damaged store: each node, record or value it cannot read is named
 * on stderr with the keys lost, and the dump goes on.  The output stays
 * valid dump text in key order.  Memory: one bit per page of the store
 * besides, so that no page is read twice.
 *
 * Exit: 0 done, 1 an operation failed (with -r: or something could not
 * be read), 2 bad usage.
 */
#include "bonsai.h"
#include "common/progress.h"
#include "common/tool.h"
#include "salvage.h"

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
    int salvage;        /* -r */
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
        "    bonsai-dump [-a | -s MAP] [-p] [-r] [-q] [-f OUTPUT] FILE\n"
        "    bonsai-dump -l [-r] FILE\n"
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
        "    -r         salvage a damaged store: write every map and entry\n"
        "               that can still be read; each node, map record or\n"
        "               value that cannot is named on standard error with\n"
        "               the keys lost (the separators around it), and the\n"
        "               exit status is 1\n"
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
        "    why) or, with -r, something could not be read, 2 bad usage.\n"
        "\n"
        "EXAMPLES\n"
        "    bonsai-dump store.bonsai | bonsai-load copy.bonsai\n"
        "    bonsai-dump -s users store.bonsai | mdb_load -n users.mdb\n"
        "    bonsai-dump -r damaged.bonsai | bonsai-load rescued.bonsai\n");
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
    while ((c = getopt_long(argc, argv, ":as:plrf:qhV", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'a': a->all = 1; break;
        case 's': a->map = optarg; break;
        case 'p': a->print = 1; break;
        case 'l': a->list = 1; break;
        case 'r': a->salvage = 1; break;
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

/* The page size LMDB will use: the system's, at least 4 KiB. */
static uint64_t lmdb_page(void)
{
    long os = sysconf(_SC_PAGESIZE);
    return os >= 4096 ? (uint64_t)os : 4096;
}

/* What every LMDB environment needs besides the maps' entries: meta
 * pages, free list, commit garbage. */
#define LMDB_BASE_BYTES (UINT64_C(1) << 20)

/* The mapsize= line for total bytes: whole MiB. */
static uint64_t lmdb_mapsize(uint64_t total)
{
    uint64_t mib = 1u << 20;
    return add_sat(total, mib - 1) / mib * mib;
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

/* A line of -l. */
static void write_name(out *o, const char *name)
{
    out_print(o, (const uint8_t *)name, strlen(name));
    out_str(o, "\n");
}

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

/* ---- salvage (-r) ------------------------------------------------------- */

/* A key as a message shows it: a u64 key as its number; a byte key in
 * quotes, in print format with '"' as \22. */
#define KEY_TEXT (4 * BONSAI_MAX_KEY + 3)

static const char *key_text(unsigned kind, const bn_key *k, char *buf)
{
    if (kind == BONSAI_KEY_U64) {
        snprintf(buf, KEY_TEXT, "%" PRIu64, k->u);
        return buf;
    }
    size_t at = 0;
    buf[at++] = '"';
    for (uint32_t i = 0; i < k->len && i < BONSAI_MAX_KEY; i++) {
        uint8_t b = k->b[i];
        if (b == '\\' || b == '"' || b < 0x20 || b > 0x7e)
            at += (size_t)snprintf(buf + at, KEY_TEXT - at, b == '\\' ?
                                   "\\\\" : "\\%02x", b);
        else
            buf[at++] = (char)b;
    }
    buf[at++] = '"';
    buf[at] = 0;
    return buf;
}

/* "from X up to Y", "from X on", "below Y", or "of any key" (no bound:
 * a root). */
static const char *range_text(const sv_loss *l, char *buf, size_t cap)
{
    static char lo[KEY_TEXT], hi[KEY_TEXT];
    if (l->lo && l->hi)
        snprintf(buf, cap, "from %s up to %s", key_text(l->kind, l->lo, lo),
                 key_text(l->kind, l->hi, hi));
    else if (l->lo)
        snprintf(buf, cap, "from %s on", key_text(l->kind, l->lo, lo));
    else if (l->hi)
        snprintf(buf, cap, "below %s", key_text(l->kind, l->hi, hi));
    else
        snprintf(buf, cap, "of any key");
    return buf;
}

/* Names what a salvage pass could not read, and what was lost with it. */
static void report_loss(const sv_loss *l)
{
    static char where[BONSAI_MAX_NAME + 8], range[2 * KEY_TEXT + 32],
        key[KEY_TEXT];
    int cat = l->map[0] == 0, one = l->entries == 1;
    const char *keys = cat ? "maps" : "keys";
    snprintf(where, sizeof where, cat ? "catalog" : "map %s", l->map);
    uint64_t pg = l->pgno;
    switch (l->what) {
    case SV_NODE:
        if (!l->lo && !l->hi)
            tool_warn("%s: page %" PRIu64 ": %s; skipped all its %s", where,
                      pg, l->why, keys);
        else
            tool_warn("%s: page %" PRIu64 ": %s; skipped the %s %s", where,
                      pg, l->why, keys, range_text(l, range, sizeof range));
        break;
    case SV_OUTSIDE:
        tool_warn("%s: page %" PRIu64 ": %" PRIu64 " %s %s (%s); skipped %s",
                  where, pg, l->entries, one ? (cat ? "map" : "key") : keys,
                  l->why, range_text(l, range, sizeof range),
                  one ? "it" : "them");
        break;
    case SV_VALUE:
        tool_warn("%s: page %" PRIu64 ": key %s: %s; skipped the entry",
                  where, pg, key_text(l->kind, l->lo, key), l->why);
        break;
    default: /* SV_RECORD */
        tool_warn("%s: page %" PRIu64 ": map %s: %s; skipped the map", where,
                  pg, key_text(l->kind, l->lo, key), l->why);
    }
}

/* One salvage pass: sizing (o NULL, silent) or writing. */
typedef struct rescue {
    out *o;
    int print;
    unsigned kind;      /* of the map being walked */
    uint64_t page;      /* sizing: LMDB's page size ... */
    uint64_t total;     /* ... and the bytes LMDB needs so far */
    uint64_t seen;      /* entries of the map handed on */
    uint64_t lost;      /* losses in the pass ... */
    uint64_t map_lost;  /* ... and in the map being walked */
} rescue;

static void on_loss(void *ctx, const sv_loss *l)
{
    rescue *r = ctx;
    r->lost++;
    r->map_lost++;
    if (r->o)
        report_loss(l);
}

static int on_entry(void *ctx, bn_key key, bonsai_val val)
{
    rescue *r = ctx;
    uint8_t be[8];
    const uint8_t *k = key.b;
    size_t klen = key.len;
    if (r->kind == BONSAI_KEY_U64) {
        for (int i = 7; i >= 0; i--, key.u >>= 8)
            be[i] = (uint8_t)key.u;
        k = be;
        klen = 8;
    }
    r->seen++;
    if (!r->o) {
        r->total = add_sat(r->total, lmdb_entry_bytes(klen, val.size,
                                                      r->page));
        return 0;
    }
    out_line(r->o, k, klen, r->print);
    out_line(r->o, val.data, val.size, r->print);
    return r->o->err != 0; /* stops the walk; reported by main */
}

/* Map m's block (or its share of the size); 0 or an exit status. */
static int salvage_map(salvage *s, const sv_map *m, uint64_t mapsize,
                       rescue *r)
{
    r->kind = m->t.kind;
    r->seen = r->map_lost = 0;
    if (r->o)
        write_header(r->o, &(tool_map){m->name, m->t.kind, m->t.count},
                     mapsize, r->print);
    else
        r->total = add_sat(r->total, 4 * r->page); /* as estimate_map */
    int rc = sv_walk(s, m, on_entry, r);
    if (rc < 0)
        return fail(m->name, "salvage", rc);
    if (!r->o || r->o->err)
        return 0;
    out_str(r->o, "DATA=END\n");
    if (!r->map_lost && r->seen != m->t.count) {
        tool_warn("map %s: the walk found %" PRIu64 " entries, the record "
                  "says %" PRIu64, m->name, r->seen, m->t.count);
        r->lost++;
    }
    return 0;
}

/* A pass over the maps the catalog still lists (-s: the one); 0 or an
 * exit status. */
static int salvage_pass(const struct args *a, bonsai_txn *txn,
                        uint64_t mapsize, rescue *r)
{
    salvage *s;
    sv_map *maps = NULL;
    size_t n = 0, chosen = 0;
    int rc = sv_begin(txn, on_loss, r, &s);
    if (rc == 0 && (rc = sv_maps(s, &maps, &n)))
        sv_end(s);
    if (rc)
        return fail(NULL, "salvage", rc);
    int st = 0;
    for (size_t i = 0; i < n && st == 0 && !(r->o && r->o->err); i++) {
        if (a->map && strcmp(a->map, maps[i].name) != 0)
            continue;
        chosen++;
        if (a->list)
            write_name(r->o, maps[i].name);
        else
            st = salvage_map(s, &maps[i], mapsize, r);
    }
    /* in the pass that reports: a loss in the catalog may say why */
    if (st == 0 && a->map && !chosen && r->o)
        st = fail(a->map, "open", BONSAI_NOTFOUND);
    sv_maps_free(maps, n);
    sv_end(s);
    return st;
}

/* -r: sizes the maps in a silent pass, then writes them, reporting what
 * could not be read; 1 when anything could not. */
static int run_salvage(const struct args *a, bonsai_txn *txn, out *o)
{
    rescue size = {.page = lmdb_page(), .total = LMDB_BASE_BYTES};
    int st = a->list ? 0 : salvage_pass(a, txn, 0, &size);
    if (st)
        return st;
    rescue w = {.o = o, .print = a->print};
    st = salvage_pass(a, txn, lmdb_mapsize(size.total), &w);
    return st ? st : w.lost ? TOOL_EXIT_FAIL : TOOL_EXIT_OK;
}

/* ---- main --------------------------------------------------------------- */

static int run(const struct args *a, bonsai_db *db, bonsai_txn *txn,
               tool_maps *maps, out *o, progress *pr)
{
    if (a->salvage)
        return run_salvage(a, txn, o);
    int rc = tool_maps_list(db, txn, a->map, maps);
    if (rc)
        return fail(a->map, a->map ? "open" : "map list", rc);
    if (a->list) {
        for (size_t i = 0; i < maps->n && !o->err; i++)
            write_name(o, maps->v[i].name);
        return 0;
    }
    uint64_t page = lmdb_page(), total = LMDB_BASE_BYTES;
    uint64_t entries = 0;
    for (size_t i = 0; i < maps->n; i++)
        entries += maps->v[i].entries;
    progress_phase(pr, "measuring", "entries", entries);
    for (size_t i = 0; i < maps->n; i++)
        if ((rc = estimate_map(db, txn, &maps->v[i], page, &total, pr)))
            return rc;
    uint64_t mapsize = lmdb_mapsize(total);
    progress_phase(pr, "dumping", "entries", entries);
    for (size_t i = 0; i < maps->n && !o->err; i++)
        if ((rc = dump_map(db, txn, &maps->v[i], mapsize, a->print, o, pr)))
            return rc;
    return 0;
}

int main(int argc, char **argv)
{
    tool_init(PROG,
              "[-a | -s MAP] [-p] [-r] [-q] [-f OUTPUT] FILE\n-l [-r] FILE");
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

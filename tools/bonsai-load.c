/* SPDX-License-Identifier: MIT */
/*
 * bonsai-load - loads text in the format of db_dump and mdb_dump (as
 * bonsai-dump writes it) into a bonsai store, creating maps as needed.
 *
 * Input grammar (a line ends at '\n'; N is the line number reported):
 *
 *   input   = { block }
 *   block   = header { key value } "DATA=END"
 *   header  = { name "=" text } "HEADER=END"
 *   key     = " " bytes          value = " " bytes   (an empty value: " ")
 *
 * Header keywords: VERSION (3), format (bytevalue | print; default
 * bytevalue), database (the map; print escapes decoded, as db_load does),
 * type (btree or hash), mapsize (the first block's raises the store's cap
 * above the 1 GiB default; above BONSAI_MAX_SIZE it is refused),
 * bonsai_keys (u64 | bytes; default bytes);
 * duplicates=1 and dupsort=1 are refused (a map holds one value per key);
 * the sizing keywords of both tools (quiet_keyword) are ignored; any other
 * keyword is ignored with a warning, as mdb_load does.
 *
 * bytes: bytevalue = pairs of hex digits (either case); print = any byte
 * as itself except '\', which starts "\\" (a backslash) or "\hh" (a byte).
 * With -T the input is only key and value lines, alternating, in print
 * format without the leading space (db_load -T, mdb_load -T).
 *
 * A u64 map (bonsai_keys=u64) takes keys of 8 bytes, most significant
 * first.  -s MAP sends every block to MAP, whatever its database= says
 * (mdb_load lets database= win; bonsai-load lets the command line win).
 *
 * The whole load is one write transaction: on any error (malformed input,
 * a failed put, a failed commit) it is aborted and the store is left as it
 * was: a store file this run created (also through a symbolic link) is
 * removed again with the lock file made for it, an empty file emptied
 * again, and an existing store cut back to its size (growth for a load
 * that met a full disk).  Only an existing store's new lock file stays: a
 * reader may have begun to use it meanwhile.  Memory: the longest key
 * line and value line, nothing more.
 *
 * With --json, a load that succeeded prints one JSON object: the key/value
 * pairs read for each map and in all, and the seconds it took.
 *
 * Exit: 0 loaded, 1 an operation failed or the input is malformed, 2 bad
 * usage.  Uses only the public API (bonsai.h).
 */
#include "bonsai.h"
#include "common/json.h"
#include "common/progress.h"
#include "common/tool.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROG "bonsai-load"

/* The longest line valid input can hold: a value of BONSAI_MAX_VALUE bytes
 * in print format (at most three characters a byte) after its space.  A
 * longer line is refused before it takes more memory. */
#define MAX_LINE (3 * (size_t)BONSAI_MAX_VALUE + 1)
/* the cap of a new store when nothing asks for more */
#define LOAD_DEFAULT_CAP (UINT64_C(1) << 30)

struct args {
    const char *map;   /* -s MAP */
    int text;          /* -T */
    int nooverwrite;   /* -N */
    const char *input; /* -f INPUT, NULL: stdin */
    int quiet;         /* -q */
    const char *file;
    uint32_t busy_timeout_ms;
    int json;          /* --json: what was loaded, as one JSON object */
};

/* ---- usage -------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
        "NAME\n"
        "    bonsai-load - load db_dump/mdb_dump text into a bonsai store\n"
        "\n"
        "SYNOPSIS\n"
        "    bonsai-load [-s MAP] [-N] [-q] [-f INPUT] [--json]\n"
        "                [--busy-timeout MS] FILE\n"
        "    bonsai-load -T -s MAP [-N] [-q] [-f INPUT] [--json]\n"
        "                [--busy-timeout MS] FILE\n"
        "\n"
        "DESCRIPTION\n"
        "    Reads text in the format bonsai-dump, db_dump and mdb_dump\n"
        "    write (standard input, or INPUT) and puts every key and value\n"
        "    into the store FILE, which is created if it does not exist.\n"
        "    Each block goes to the map its database= line names, created\n"
        "    with u64 keys if the block says bonsai_keys=u64, else with\n"
        "    byte-string keys.  An existing map must have the same key kind.\n"
        "\n"
        "    The load is one transaction: on any error nothing is written\n"
        "    and the store stays as it was.  A malformed line (odd hex\n"
        "    digits, a bad escape, a missing value line, an unknown format,\n"
        "    a NUL byte, a CRLF line end, a line longer than 3 GiB) is\n"
        "    reported with the input's name and its line number (\"INPUT:\n"
        "    line N: ...\").  A failed load takes back what\n"
        "    it made: a new store file (also one a symbolic link names)\n"
        "    with its FILE-lock, or the growth of an existing one (whose\n"
        "    FILE-lock, which any open of it makes, stays).  INPUT may be a\n"
        "    FIFO; FILE must be a regular file.  On a terminal, standard\n"
        "    error shows how much input is loaded (of how much, when INPUT\n"
        "    is a regular file).\n"
        "\n"
        "OPTIONS\n"
        "    -s MAP     load every block into MAP (it wins over database=;\n"
        "               needed for input without database=, such as\n"
        "               mdb_dump of LMDB's main database)\n"
        "    -T         plain text input: key and value lines alternate,\n"
        "               no header, no leading space, print escapes ('\\\\'\n"
        "               is a backslash, '\\hh' a byte), as db_load -T;\n"
        "               needs -s\n"
        "    -N         do not overwrite: a key already in the map (or\n"
        "               earlier in the input) keeps its value, as\n"
        "               mdb_load -N\n"
        "    -f INPUT   read INPUT instead of standard input (- is\n"
        "               standard input)\n"
        "    -q, --quiet\n"
        "               no progress line, no message while waiting for\n"
        "               another writer\n"
        "    --json     once loaded, print one JSON object on one line:\n"
        "                 {\"file\":S,\"maps\":[{\"name\":S,\"entries\":N},\n"
        "                  ...],\"entries\":N,\"seconds\":F}\n"
        "               (S a string, N an integer, F a number): each map\n"
        "               the input loaded into, in the order first met, with\n"
        "               the key/value pairs read for it (-N skips and\n"
        "               overwritten keys count), their sum, and the\n"
        "               seconds the load took.  Nothing is printed when\n"
        "               the load fails.\n"
        TOOL_BUSY_TIMEOUT_HELP
        "    -V, --version\n"
        "               print the version and exit\n"
        "    -h, --help\n"
        "               this text\n"
        "\n"
        "FORMAT\n"
        "    See bonsai-dump --help.  Header keywords read: VERSION=3,\n"
        "    format=bytevalue|print, database=, type=btree|hash, mapsize=\n"
        "    (the first block's raises the store's cap above 1 GiB; at\n"
        "    most 2^63 bytes),\n"
        "    bonsai_keys=u64|bytes.  duplicates=1 and dupsort=1 are\n"
        "    refused; other keywords are ignored (unknown ones with a\n"
        "    warning).  A u64 key is 8 bytes, most significant first.\n"
        "    LMDB 0.9.24's mdb_dump -p writes '\\' unescaped: load its\n"
        "    bytevalue output (the default) instead.\n"
        "\n"
        "EXIT STATUS\n"
        "    0 loaded, 1 an operation failed or the input is malformed\n"
        "    (the store is unchanged), 2 bad usage.\n"
        "\n"
        "EXAMPLES\n"
        "    bonsai-dump old.bonsai | bonsai-load new.bonsai\n"
        "    mdb_dump -n -a data.mdb | bonsai-load data.bonsai\n"
        "    db_dump data.db | bonsai-load data.bonsai\n");
}

/* Fills *a from argv.  Returns 0, an exit status, or -1 when done
 * (--help, -V). */
static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"busy-timeout", required_argument, NULL, 'B'},
        {"version", no_argument, NULL, 'V'},
        {"quiet", no_argument, NULL, 'q'},
        {"json", no_argument, NULL, 'J'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){.busy_timeout_ms = TOOL_BUSY_TIMEOUT_DEFAULT};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:TNf:qhV", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 's': a->map = optarg; break;
        case 'T': a->text = 1; break;
        case 'N': a->nooverwrite = 1; break;
        case 'f': a->input = strcmp(optarg, "-") ? optarg : NULL; break;
        case 'q': a->quiet = 1; break;
        case 'J': a->json = 1; break;
        case 'B':
            if (tool_parse_busy_timeout(optarg, &a->busy_timeout_ms))
                return TOOL_EXIT_USAGE;
            break;
        case 'V': tool_version(); return -1;
        case 'h': usage(stdout); return -1;
        default: return tool_bad_option(c, argv);
        }
    }
    if (a->map && tool_check_map_name(a->map))
        return TOOL_EXIT_USAGE;
    if (a->text && !a->map)
        return tool_usage_error("-T needs -s MAP");
    if (tool_one_file(argc, argv, &a->file) ||
        tool_new_path("FILE", a->file) ||
        (a->input && tool_new_path("-f", a->input)))
        return TOOL_EXIT_USAGE;
    if (a->input && tool_same_file(a->input, a->file))
        return tool_usage_error("-f %s is the store itself", a->input);
    return 0;
}

/* ---- input lines -------------------------------------------------------- */

typedef struct line {
    char *p;
    size_t cap;
    size_t len; /* without the '\n' */
} line;

typedef struct input {
    FILE *f;
    const char *name;
    uint64_t lineno; /* of the last line read */
    progress *pr;    /* counts the bytes read */
} input;

/* Makes room for n + 1 bytes in l; -1 (reported) past MAX_LINE. */
static int line_room(input *in, line *l, size_t n)
{
    if (n + 1 <= l->cap)
        return 0;
    if (n >= MAX_LINE) {
        tool_fail("line %" PRIu64 ": longer than %zu bytes: not dump text",
                  in->lineno + 1, MAX_LINE);
        return -1;
    }
    size_t cap = l->cap ? 2 * l->cap : 256;
    char *p = realloc(l->p, cap);
    if (!p) {
        tool_fail("line %" PRIu64 ": %s", in->lineno + 1,
                  bonsai_strerror(BONSAI_NOMEM));
        return -1;
    }
    l->p = p;
    l->cap = cap;
    return 0;
}

/* Reads the next line into l (NUL-terminated, without its '\n').  1: a
 * line, 0: end of input, -1: a read error, a NUL byte (no dump text holds
 * one: it is binary input), a carriage return at its end (a CRLF line
 * end, which would otherwise end every key and value in '\r', and make a
 * header value wrong where the '\r' cannot be seen) or a line too long
 * (reported). */
static int read_line(input *in, line *l)
{
    size_t n = 0;
    int c;
    errno = 0;
    while ((c = getc_unlocked(in->f)) != EOF && c != '\n') {
        if (c == 0) {
            tool_fail("line %" PRIu64 ": a NUL byte: not dump text",
                      in->lineno + 1);
            return -1;
        }
        if (line_room(in, l, n))
            return -1;
        l->p[n++] = (char)c;
    }
    if (c == EOF && ferror(in->f)) {
        tool_fail("read %s: %s", in->name, strerror(errno ? errno : EIO));
        return -1;
    }
    if (c == EOF && n == 0)
        return 0;
    if (n && l->p[n - 1] == '\r') {
        tool_fail("line %" PRIu64 ": carriage return (CRLF line ends are "
                  "not dump format)", in->lineno + 1);
        return -1;
    }
    if (line_room(in, l, n))
        return -1;
    in->lineno++;
    l->p[n] = 0;
    l->len = n;
    progress_add(in->pr, n + 1);
    return 1;
}

static int is(const line *l, const char *s)
{
    return l->len == strlen(s) && memcmp(l->p, s, l->len) == 0;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes s[0..n) in place into *len bytes.  Returns NULL, or what is
 * wrong with it. */
static const char *decode(char *s, size_t n, int print, size_t *len)
{
    unsigned char *p = (unsigned char *)s, *o = p;
    if (print) {
        for (size_t i = 0; i < n; i++) {
            if (p[i] != '\\') {
                *o++ = p[i];
            } else if (i + 1 < n && p[i + 1] == '\\') {
                *o++ = '\\';
                i++;
            } else if (i + 2 < n && hexval(p[i + 1]) >= 0 &&
                       hexval(p[i + 2]) >= 0) {
                *o++ = (unsigned char)(hexval(p[i + 1]) << 4 |
                                       hexval(p[i + 2]));
                i += 2;
            } else {
                return "bad escape: '\\' must be followed by '\\' or two "
                       "hex digits";
            }
        }
    } else {
        if (n % 2)
            return "odd number of hex digits";
        for (size_t i = 0; i < n; i += 2) {
            int hi = hexval(p[i]), lo = hexval(p[i + 1]);
            if (hi < 0 || lo < 0)
                return "not a hex digit";
            *o++ = (unsigned char)(hi << 4 | lo);
        }
    }
    *len = (size_t)(o - p);
    return NULL;
}

/* ---- headers ------------------------------------------------------------ */

typedef struct header {
    int print;
    unsigned kind;
    char *name;       /* database=, decoded; NULL if absent */
    uint64_t mapsize; /* 0 if absent */
    uint64_t end;     /* line of HEADER=END */
} header;

static void header_clear(header *h)
{
    free(h->name);
    *h = (header){.kind = BONSAI_KEY_BYTES};
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* Keywords of db_dump and mdb_dump that change nothing in a bonsai map;
 * they are skipped without a warning. */
static int quiet_keyword(const char *k)
{
    static const char *const quiet[] = {
        "maxreaders", "mapaddr",     "db_pagesize", "db_lorder",
        "h_ffactor",  "h_nelem",     "bt_minkey",   "chksum",
        "extentsize",
    };
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++)
        if (!strcmp(k, quiet[i]))
            return 1;
    return 0;
}

/* One "name=value" line of a header (l is NUL-terminated). */
static int header_line(input *in, line *l, header *h)
{
    char *eq = memchr(l->p, '=', l->len);
    if (!eq || eq == l->p || memchr(l->p, 0, l->len))
        return tool_fail("line %" PRIu64 ": expected a header line "
                         "(name=value)%s", in->lineno,
                         l->len && l->p[0] == ' '
                             ? "; plain key/value lines need -T" : "");
    *eq = 0;
    const char *k = l->p, *v = eq + 1;
    uint64_t n = in->lineno;
    if (!strcmp(k, "VERSION")) {
        if (strcmp(v, "3"))
            return tool_fail("line %" PRIu64 ": unsupported VERSION %s", n,
                             v);
    } else if (!strcmp(k, "format")) {
        if (!strcmp(v, "print"))
            h->print = 1;
        else if (!strcmp(v, "bytevalue"))
            h->print = 0;
        else
            return tool_fail("line %" PRIu64 ": unknown format '%s'", n, v);
    } else if (!strcmp(k, "database")) {
        size_t len, vn = strlen(v);
        char *name = malloc(vn + 1);
        if (!name)
            return tool_fail("%s", bonsai_strerror(BONSAI_NOMEM));
        memcpy(name, v, vn + 1);
        const char *why = decode(name, vn, 1, &len);
        if (!why && (len == 0 || len > BONSAI_MAX_NAME ||
                     memchr(name, 0, len)))
            why = "a map name is 1 to 255 bytes, none of them 0";
        if (why) {
            free(name);
            return tool_fail("line %" PRIu64 ": bad database name: %s", n,
                             why);
        }
        name[len] = 0;
        free(h->name);
        h->name = name;
    } else if (!strcmp(k, "type")) {
        if (strcmp(v, "btree") && strcmp(v, "hash"))
            return tool_fail("line %" PRIu64 ": unsupported type '%s'", n,
                             v);
    } else if (!strcmp(k, "mapsize")) {
        if (parse_u64(v, &h->mapsize))
            return tool_fail("line %" PRIu64 ": bad mapsize '%s'", n, v);
        if (h->mapsize > BONSAI_MAX_SIZE)
            return tool_fail("line %" PRIu64 ": mapsize=%s: %s (a store's "
                             "cap is at most %" PRIu64 " bytes, 2^63)", n,
                             v, bonsai_strerror(BONSAI_INVALID),
                             (uint64_t)BONSAI_MAX_SIZE);
    } else if (!strcmp(k, "bonsai_keys")) {
        if (!strcmp(v, "u64"))
            h->kind = BONSAI_KEY_U64;
        else if (!strcmp(v, "bytes"))
            h->kind = BONSAI_KEY_BYTES;
        else
            return tool_fail("line %" PRIu64 ": unknown bonsai_keys '%s'",
                             n, v);
    } else if (!strcmp(k, "duplicates") || !strcmp(k, "dupsort")) {
        if (strcmp(v, "0"))
            return tool_fail("line %" PRIu64 ": %s=%s: duplicate keys are "
                             "not supported (a map holds one value per key)",
                             n, k, v);
    } else if (!quiet_keyword(k)) {
        tool_warn("line %" PRIu64 ": unrecognized keyword ignored: %s", n,
                  k);
    }
    return 0;
}

/* Reads one block's header into h.  1: read, 0: clean end of input (no
 * line at all), -1: an error (reported). */
static int read_header(input *in, line *l, header *h)
{
    header_clear(h);
    for (int lines = 0;; lines++) {
        int r = read_line(in, l);
        if (r <= 0) {
            if (r == 0 && lines > 0)
                tool_fail("line %" PRIu64 ": unexpected end of input in a "
                          "header (no HEADER=END)", in->lineno);
            return r < 0 || lines > 0 ? -1 : 0;
        }
        if (is(l, "HEADER=END")) {
            h->end = in->lineno;
            return 1;
        }
        if (header_line(in, l, h))
            return -1;
    }
}

/* ---- loading ------------------------------------------------------------ */

/* The pairs read for one map (--json). */
typedef struct loaded {
    char *name;
    uint64_t entries;
} loaded;

typedef struct loader {
    const struct args *a;
    input in;
    line key, val;
    bonsai_db *db;
    bonsai_txn *txn;
    uint64_t pairs;    /* read in the block being loaded */
    loaded *maps;      /* --json: in the order first met */
    size_t nmaps, cap_maps;
} loader;

static const char *kind_name(unsigned kind)
{
    return kind == BONSAI_KEY_U64 ? "u64" : "byte-string";
}

/* Creates or opens the map for a block. */
static int get_map(loader *ld, const char *name, unsigned kind,
                   uint64_t lineno, bonsai_map *map)
{
    *map = NULL;
    int rc = bonsai_map_create(ld->db, ld->txn, name, kind, map);
    if (rc == 0 || (rc == BONSAI_EXISTS && *map))
        return 0;
    if (rc == BONSAI_EXISTS) {
        bonsai_map other;
        unsigned have = 0;
        bonsai_map_open(ld->db, ld->txn, name, &other, &have);
        return tool_fail("line %" PRIu64 ": map %s has %s keys, the input "
                         "%s keys: %s", lineno, name, kind_name(have),
                         kind_name(kind), bonsai_strerror(BONSAI_MAPKIND));
    }
    return tool_fail("line %" PRIu64 ": map %s: %s", lineno, name,
                     bonsai_strerror(rc));
}

static int put(loader *ld, bonsai_map map, unsigned kind, const char *name,
               size_t klen, size_t vlen, uint64_t kline)
{
    bonsai_val val = {vlen, ld->val.p};
    unsigned flags = ld->a->nooverwrite ? BONSAI_NOOVERWRITE : 0;
    int rc;
    if (kind == BONSAI_KEY_U64) {
        if (klen != 8)
            return tool_fail("line %" PRIu64 ": a u64 key is 8 bytes, this "
                             "one is %zu: %s", kline, klen,
                             bonsai_strerror(BONSAI_KEYSIZE));
        uint64_t u = 0;
        for (size_t i = 0; i < 8; i++)
            u = u << 8 | (unsigned char)ld->key.p[i];
        rc = bonsai_put_u64(ld->txn, map, u, &val, flags);
    } else {
        bonsai_val key = {klen, ld->key.p};
        rc = bonsai_put(ld->txn, map, &key, &val, flags);
    }
    if (rc == BONSAI_EXISTS && ld->a->nooverwrite)
        return 0;
    if (rc)
        return tool_fail("line %" PRIu64 ": put into map %s: %s", kline,
                         name, bonsai_strerror(rc));
    return 0;
}

/* Checks a key or value line (what) and decodes it in place: without -T
 * it starts with a space, which is dropped.  0, or an exit status. */
static int decode_line(const loader *ld, line *l, const char *what,
                       int print, uint64_t lineno, size_t *len)
{
    size_t skip = ld->a->text ? 0 : 1;
    if (skip && l->p[0] != ' ')
        return tool_fail("line %" PRIu64 ": expected a %s line (a space, "
                         "then the %s)%s", lineno, what, what,
                         *what == 'k' ? " or DATA=END" : "");
    const char *why = decode(l->p + skip, l->len - skip, print, len);
    if (why)
        return tool_fail("line %" PRIu64 ": %s: %s", lineno, what, why);
    memmove(l->p, l->p + skip, *len);
    return 0;
}

/* Loads key/value lines up to DATA=END (or, with -T, the end of input)
 * into map. */
static int load_entries(loader *ld, const header *h, const char *name,
                        bonsai_map map)
{
    int text = ld->a->text, rc;
    for (;;) {
        size_t klen, vlen;
        int r = read_line(&ld->in, &ld->key);
        if (r < 0)
            return TOOL_EXIT_FAIL;
        if (r == 0 && text)
            return 0;
        if (r == 0)
            return tool_fail("line %" PRIu64 ": unexpected end of input "
                             "(no DATA=END)", ld->in.lineno);
        uint64_t kline = ld->in.lineno;
        if (!text && is(&ld->key, "DATA=END"))
            return 0;
        if ((rc = decode_line(ld, &ld->key, "key", h->print, kline, &klen)))
            return rc;

        if ((r = read_line(&ld->in, &ld->val)) < 0)
            return TOOL_EXIT_FAIL;
        if (r == 0)
            return tool_fail("line %" PRIu64 ": missing value line: the "
                             "input ends after this key", kline);
        uint64_t vline = ld->in.lineno;
        if (!text && is(&ld->val, "DATA=END"))
            return tool_fail("line %" PRIu64 ": missing value line: "
                             "DATA=END after the key on line %" PRIu64,
                             vline, kline);
        if ((rc = decode_line(ld, &ld->val, "value", h->print, vline,
                              &vlen)))
            return rc;
        if ((rc = put(ld, map, h->kind, name, klen, vlen, kline)))
            return rc;
        ld->pairs++;
    }
}

/* Adds n pairs read for the map name to what --json reports. */
static int count_loaded(loader *ld, const char *name, uint64_t n)
{
    for (size_t i = 0; i < ld->nmaps; i++)
        if (strcmp(ld->maps[i].name, name) == 0) {
            ld->maps[i].entries += n;
            return 0;
        }
    if (ld->nmaps == ld->cap_maps) {
        size_t cap = ld->cap_maps ? 2 * ld->cap_maps : 8;
        loaded *v = realloc(ld->maps, cap * sizeof *v);
        if (!v)
            return tool_fail("%s", bonsai_strerror(BONSAI_NOMEM));
        ld->maps = v;
        ld->cap_maps = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return tool_fail("%s", bonsai_strerror(BONSAI_NOMEM));
    ld->maps[ld->nmaps++] = (loaded){copy, n};
    return 0;
}

static void print_loaded(const loader *ld, double seconds)
{
    json_writer j;
    uint64_t sum = 0;
    json_init(&j, stdout);
    json_begin_object(&j, NULL);
    json_string(&j, "file", ld->a->file);
    json_begin_array(&j, "maps");
    for (size_t i = 0; i < ld->nmaps; i++) {
        json_begin_object(&j, NULL);
        json_string(&j, "name", ld->maps[i].name);
        json_uint(&j, "entries", ld->maps[i].entries);
        json_end_object(&j);
        sum += ld->maps[i].entries;
    }
    json_end_array(&j);
    json_uint(&j, "entries", sum);
    json_double(&j, "seconds", seconds, 3);
    json_end_object(&j);
}

static void loaded_free(loader *ld)
{
    for (size_t i = 0; i < ld->nmaps; i++)
        free(ld->maps[i].name);
    free(ld->maps);
}

/* One block into its map, whose handle is closed after it: the input
 * may name more maps than one handle opens at once. */
static int load_block(loader *ld, const header *h)
{
    const char *name = ld->a->map ? ld->a->map : h->name;
    if (!name)
        return tool_fail("line %" PRIu64 ": the block has no database= "
                         "line; name a map with -s MAP", h->end);
    bonsai_map map;
    int st = get_map(ld, name, h->kind, h->end, &map);
    if (st)
        return st;
    ld->pairs = 0;
    st = load_entries(ld, h, name, map);
    if (!st && ld->a->json)
        st = count_loaded(ld, name, ld->pairs);
    int rc = bonsai_map_close(ld->db, map);
    if (rc && !st)
        st = tool_fail("line %" PRIu64 ": map %s: %s", ld->in.lineno, name,
                       bonsai_strerror(rc));
    return st;
}

/* ---- leaving no trace --------------------------------------------------- */

/* What a load may change in the file system, to put back when it fails:
 * the store file it opens (the file a symbolic link names: made, or
 * grown) and its lock file, which the library makes beside that file.
 * Noted before the open, and again once this run is the store's writer,
 * for another process may have made or grown the file in between. */
typedef struct undo {
    char *target;  /* the store file, links followed */
    char *lock;    /* target + "-lock" */
    int created;   /* target did not exist */
    int made;      /* the store is this run's: it did not exist, or was
                      an empty file */
    off_t size;    /* the file's size to cut back to */
    int lock_new;  /* the lock file did not exist */
} undo;

/* path/name (name may be absolute); malloc'd. */
static char *join(const char *dir, const char *name)
{
    if (name[0] == '/' || !dir)
        return strdup(name);
    size_t d = strlen(dir), n = strlen(name);
    char *p = malloc(d + n + 2);
    if (p) {
        memcpy(p, dir, d);
        p[d] = '/';
        memcpy(p + d + 1, name, n + 1);
    }
    return p;
}

/* The directory part of path ("." for none); malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* The file that open(path, O_CREAT) reaches, existing or not: symbolic
 * links followed as the kernel does (a dangling one names the file it
 * would create), as an absolute path like the one the library puts the
 * lock file beside.  NULL when it cannot be told (then path is used). */
static char *resolve(const char *path)
{
    char *p = strdup(path);
    for (int hops = 0; p && hops < 40; hops++) {
        char link[PATH_MAX];
        ssize_t n = readlink(p, link, sizeof link - 1);
        if (n < 0)
            break; /* not a link (or not there): p is the file */
        link[n] = 0;
        char *dir = dir_of(p), *next = dir ? join(dir, link) : NULL;
        free(dir);
        free(p);
        p = next;
    }
    if (!p)
        return NULL;
    const char *slash = strrchr(p, '/');
    char *dir = dir_of(p), *real = dir ? realpath(dir, NULL) : NULL;
    char *out = real ? join(real, slash ? slash + 1 : p) : NULL;
    free(dir);
    free(real);
    free(p);
    return out;
}

static void undo_free(undo *u)
{
    free(u->target);
    free(u->lock);
    *u = (undo){0};
}

/* Notes the state of file (the FILE operand) before the store opens. */
static int undo_note(undo *u, const char *file)
{
    *u = (undo){0};
    u->target = resolve(file);
    if (!u->target)
        u->target = strdup(file);
    size_t n = u->target ? strlen(u->target) : 0;
    if (u->target && (u->lock = malloc(n + sizeof "-lock"))) {
        memcpy(u->lock, u->target, n);
        memcpy(u->lock + n, "-lock", sizeof "-lock");
    }
    if (!u->lock) {
        undo_free(u);
        return tool_fail("%s", bonsai_strerror(BONSAI_NOMEM));
    }
    struct stat st;
    u->created = lstat(u->target, &st) != 0 && errno == ENOENT;
    u->size = u->created ? 0 : st.st_size;
    u->made = u->created || u->size == 0;
    u->lock_new = lstat(u->lock, &st) != 0 && errno == ENOENT;
    return 0;
}

/* Once this run is the writer, nobody else changes the file: a store it
 * found new is its own only while no commit is in it (another process
 * may have made one meanwhile), and an existing file is cut back to the
 * size it has now but for the open's own rounding up to the OS page. */
static void undo_opened(undo *u, bonsai_db *db)
{
    bonsai_stat s;
    if (u->made && (bonsai_db_stat(db, &s) != 0 || s.txn_id != 0))
        u->made = u->created = 0;
    struct stat st;
    if (u->made || stat(u->target, &st) != 0)
        return;
    long os = sysconf(_SC_PAGESIZE);
    off_t page = os > 0 ? os : 4096;
    if (st.st_size != (u->size + page - 1) / page * page)
        u->size = st.st_size;
}

/* After the open failed: a file it created (left empty) goes, unless
 * another process holds it as its writer (the open was busy). */
static void undo_open_failed(const undo *u)
{
    if (!u->created)
        return;
    int fd = open(u->target, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 ||
        fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    if (unlink(u->target) == 0 && u->lock_new)
        unlink(u->lock);
    close(fd);
}

/* After a failed load, while still the writer: the store file removed
 * if this run made it (or emptied, if it was an empty file), else cut
 * back to its size (a load that met a full disk grew it), and the lock
 * file removed if this run made it for a store it made.  An existing
 * store's new lock file stays: a reader may have begun to use it. */
static int undo_apply(const undo *u)
{
    struct stat st;
    int ok = 1;
    if (u->created && u->made)
        ok = unlink(u->target) == 0 || errno == ENOENT;
    else if (stat(u->target, &st) == 0 && st.st_size > u->size)
        ok = truncate(u->target, u->size) == 0;
    if (!ok) {
        tool_warn("%s: could not take it back: %s", u->target,
                  strerror(errno));
        return -1;
    }
    if (u->made && u->lock_new && unlink(u->lock) != 0 && errno != ENOENT) {
        tool_warn("%s: could not remove it: %s", u->lock, strerror(errno));
        return -1;
    }
    return 0;
}

/* Every block, starting with h (already read). */
static int load_all(loader *ld, header *h, int have)
{
    int rc;
    if (ld->a->text) {
        *h = (header){.print = 1, .kind = BONSAI_KEY_BYTES};
        return load_block(ld, h);
    }
    while (have == 1) {
        if ((rc = load_block(ld, h)))
            return rc;
        have = read_header(&ld->in, &ld->key, h);
    }
    return have < 0 ? TOOL_EXIT_FAIL : 0;
}

/* load_all, its messages naming the input ("line N" is of it). */
static int load_input(loader *ld, header *h, int have)
{
    tool_set_context(ld->in.name);
    int st = load_all(ld, h, have);
    tool_set_context(NULL);
    return st;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    tool_init(PROG, "[-s MAP] [-N] [-q] [-f INPUT] [--json] FILE\n"
                    "-T -s MAP [-N] [-q] [-f INPUT] [--json] FILE");
    struct args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st < 0 ? TOOL_EXIT_OK : st;
    double t0 = now();

    tool_set_quiet(a.quiet);
    progress pr;
    progress_init(&pr, a.quiet ? 0 : -1);
    loader ld = {.a = &a,
                 .in = {.f = stdin, .name = "standard input", .pr = &pr}};
    if (a.input) {
        ld.in.name = a.input;
        if (!(ld.in.f = fopen(a.input, "r")))
            return tool_fail("%s: %s", a.input, strerror(errno));
    }
    struct stat in_st;
    int sized = fstat(fileno(ld.in.f), &in_st) == 0 && S_ISREG(in_st.st_mode);
    progress_phase(&pr, "loading", NULL, sized ? (uint64_t)in_st.st_size : 0);

    /* The first header comes before the store opens: its mapsize may
     * raise the cap, and bad input leaves no trace. */
    header h = {.kind = BONSAI_KEY_BYTES};
    tool_set_context(ld.in.name); /* line errors name the input */
    int have = a.text ? 1 : read_header(&ld.in, &ld.key, &h);
    tool_set_context(NULL);
    if (have < 0) {
        st = TOOL_EXIT_FAIL;
        goto out;
    }

    bonsai_options opts;
    bonsai_options_init(&opts);
    /* only ever raises the cap: the store's own (or, for a new store,
     * the default 1 GiB) stays when the dump asks for less */
    if (h.mapsize > LOAD_DEFAULT_CAP)
        opts.max_size = h.mapsize;
    opts.busy_timeout_ms = a.busy_timeout_ms;
    undo u;
    if ((st = undo_note(&u, a.file)))
        goto out;
    if ((st = tool_open(a.file, &opts, &ld.db))) {
        undo_open_failed(&u);
        goto out_undo;
    }
    undo_opened(&u, ld.db);
    int rc = bonsai_txn_begin(ld.db, 0, &ld.txn);
    if (rc)
        st = tool_fail("%s: write transaction: %s", a.file,
                       bonsai_strerror(rc));
    else if ((st = load_input(&ld, &h, have)))
        bonsai_txn_abort(ld.txn);
    else if ((rc = bonsai_txn_commit(ld.txn)))
        st = tool_fail("%s: commit: %s", a.file, bonsai_strerror(rc));
    /* BONSAI_FAILED: a sync failed once the commit was being written, so
     * it may stand; any other failure rolled everything back.  Still the
     * writer: nobody else may change the file meanwhile. */
    if (st && rc == BONSAI_FAILED)
        tool_warn("%s: the load may stand or not: see bonsai-verify %s",
                  a.file, a.file);
    else if (st && undo_apply(&u) == 0)
        tool_warn("nothing loaded; %s is as it was", a.file);
    if ((rc = bonsai_close(ld.db)) && !st)
        st = tool_fail("%s: close: %s", a.file, bonsai_strerror(rc));
    if (!st && a.json) {
        print_loaded(&ld, now() - t0);
        st = tool_flush_stdout();
    }
out_undo:
    undo_free(&u);
out:
    progress_clear(&pr);
    header_clear(&h);
    loaded_free(&ld);
    free(ld.key.p);
    free(ld.val.p);
    if (ld.in.f != stdin)
        fclose(ld.in.f);
    return st;
}

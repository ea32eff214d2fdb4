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
 * above the 1 GiB default), bonsai_keys (u64 | bytes; default bytes);
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
 * was; a store file this run created is removed again.  Memory: the
 * longest key line and value line, nothing more.
 *
 * Exit: 0 loaded, 1 an operation failed or the input is malformed, 2 bad
 * usage.  Uses only the public API (bonsai.h).
 */
#include "bonsai.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "bonsai-load"
#define EXIT_FAIL 1
#define EXIT_USAGE 2

struct args {
    const char *map;   /* -s MAP */
    int text;          /* -T */
    int nooverwrite;   /* -N */
    const char *input; /* -f INPUT, NULL: stdin */
    const char *file;
};

/* ---- usage -------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
        "NAME\n"
        "    bonsai-load - load db_dump/mdb_dump text into a bonsai store\n"
        "\n"
        "SYNOPSIS\n"
        "    bonsai-load [-s MAP] [-N] [-f INPUT] FILE\n"
        "    bonsai-load -T -s MAP [-N] [-f INPUT] FILE\n"
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
        "    digits, a bad escape, a missing value line, an unknown format)\n"
        "    is reported with its line number.\n"
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
        "    -f INPUT   read INPUT instead of standard input\n"
        "    -V         print the version and exit\n"
        "    --help     this text\n"
        "\n"
        "FORMAT\n"
        "    See bonsai-dump --help.  Header keywords read: VERSION=3,\n"
        "    format=bytevalue|print, database=, type=btree|hash, mapsize=\n"
        "    (the first block's raises the store's cap above 1 GiB),\n"
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

static int bad_usage(const char *fmt, const char *arg)
{
    if (fmt) {
        fprintf(stderr, PROG ": ");
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
    }
    fprintf(stderr,
            "usage: " PROG " [-s MAP] [-T] [-N] [-f INPUT] FILE\n"
            "Try '" PROG " --help'.\n");
    return EXIT_USAGE;
}

/* Fills *a from argv.  Returns 0, an exit status, or -1 when done
 * (--help, -V). */
static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:TNf:V", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 's': a->map = optarg; break;
        case 'T': a->text = 1; break;
        case 'N': a->nooverwrite = 1; break;
        case 'f': a->input = optarg; break;
        case 'V':
            printf(PROG " (bonsai %d.%d.%d)\n", BONSAI_VERSION_MAJOR,
                   BONSAI_VERSION_MINOR, BONSAI_VERSION_PATCH);
            return -1;
        case 'h': usage(stdout); return -1;
        case ':': return bad_usage("option -%s needs an argument",
                                   (char[]){(char)optopt, 0});
        default:
            if (optopt)
                return bad_usage("unknown option -%s",
                                 (char[]){(char)optopt, 0});
            return bad_usage("unknown option %s", argv[optind - 1]);
        }
    }
    if (optind == argc)
        return bad_usage("no store FILE given%s", "");
    if (optind + 1 != argc)
        return bad_usage("unexpected argument '%s'", argv[optind + 1]);
    if (a->map && (!*a->map || strlen(a->map) > BONSAI_MAX_NAME))
        return bad_usage("bad map name '%s'", a->map);
    if (a->text && !a->map)
        return bad_usage("-T needs -s MAP%s", "");
    a->file = argv[optind];
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
} input;

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}

/* Reads the next line into l.  1: a line, 0: end of input, -1: a read
 * error (reported). */
static int read_line(input *in, line *l)
{
    errno = 0;
    ssize_t n = getline(&l->p, &l->cap, in->f);
    if (n < 0) {
        if (ferror(in->f)) {
            fail("read %s: %s", in->name, strerror(errno ? errno : EIO));
            return -1;
        }
        return 0;
    }
    in->lineno++;
    if (n > 0 && l->p[n - 1] == '\n')
        l->p[--n] = 0;
    l->len = (size_t)n;
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
        return fail("line %" PRIu64 ": expected a header line "
                    "(name=value)%s", in->lineno,
                    l->len && l->p[0] == ' '
                        ? "; plain key/value lines need -T" : "");
    *eq = 0;
    const char *k = l->p, *v = eq + 1;
    uint64_t n = in->lineno;
    if (!strcmp(k, "VERSION")) {
        if (strcmp(v, "3"))
            return fail("line %" PRIu64 ": unsupported VERSION %s", n, v);
    } else if (!strcmp(k, "format")) {
        if (!strcmp(v, "print"))
            h->print = 1;
        else if (!strcmp(v, "bytevalue"))
            h->print = 0;
        else
            return fail("line %" PRIu64 ": unknown format '%s'", n, v);
    } else if (!strcmp(k, "database")) {
        size_t len, vn = strlen(v);
        char *name = malloc(vn + 1);
        if (!name)
            return fail("%s", bonsai_strerror(BONSAI_NOMEM));
        memcpy(name, v, vn + 1);
        const char *why = decode(name, vn, 1, &len);
        if (!why && (len == 0 || len > BONSAI_MAX_NAME ||
                     memchr(name, 0, len)))
            why = "a map name is 1 to 255 bytes, none of them 0";
        if (why) {
            free(name);
            return fail("line %" PRIu64 ": bad database name: %s", n, why);
        }
        name[len] = 0;
        free(h->name);
        h->name = name;
    } else if (!strcmp(k, "type")) {
        if (strcmp(v, "btree") && strcmp(v, "hash"))
            return fail("line %" PRIu64 ": unsupported type '%s'", n, v);
    } else if (!strcmp(k, "mapsize")) {
        if (parse_u64(v, &h->mapsize))
            return fail("line %" PRIu64 ": bad mapsize '%s'", n, v);
    } else if (!strcmp(k, "bonsai_keys")) {
        if (!strcmp(v, "u64"))
            h->kind = BONSAI_KEY_U64;
        else if (!strcmp(v, "bytes"))
            h->kind = BONSAI_KEY_BYTES;
        else
            return fail("line %" PRIu64 ": unknown bonsai_keys '%s'", n, v);
    } else if (!strcmp(k, "duplicates") || !strcmp(k, "dupsort")) {
        if (strcmp(v, "0"))
            return fail("line %" PRIu64 ": %s=%s: duplicate keys are not "
                        "supported (a map holds one value per key)", n, k,
                        v);
    } else if (!quiet_keyword(k)) {
        fprintf(stderr, PROG ": line %" PRIu64
                        ": unrecognized keyword ignored: %s\n", n, k);
    }
    return 0;
}

/* Reads one block's header into h.  1: read, 0: clean end of input (no
 * line at all), or an exit status. */
static int read_header(input *in, line *l, header *h)
{
    header_clear(h);
    for (int lines = 0;; lines++) {
        int r = read_line(in, l);
        if (r < 0)
            return EXIT_FAIL;
        if (r == 0) {
            if (lines == 0)
                return 0;
            return fail("line %" PRIu64 ": unexpected end of input in a "
                        "header (no HEADER=END)", in->lineno);
        }
        if (is(l, "HEADER=END")) {
            h->end = in->lineno;
            return 1;
        }
        if (header_line(in, l, h))
            return EXIT_FAIL;
    }
}

/* ---- loading ------------------------------------------------------------ */

typedef struct loader {
    const struct args *a;
    input in;
    line key, val;
    bonsai_db *db;
    bonsai_txn *txn;
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
        return fail("line %" PRIu64 ": map %s has %s keys, the input %s "
                    "keys: %s", lineno, name, kind_name(have),
                    kind_name(kind), bonsai_strerror(BONSAI_MAPKIND));
    }
    return fail("line %" PRIu64 ": map %s: %s", lineno, name,
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
            return fail("line %" PRIu64 ": a u64 key is 8 bytes, this one "
                        "is %zu: %s", kline, klen,
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
        return fail("line %" PRIu64 ": put into map %s: %s", kline, name,
                    bonsai_strerror(rc));
    return 0;
}

/* Loads key/value lines up to DATA=END (or, with -T, the end of input). */
static int load_block(loader *ld, const header *h)
{
    int text = ld->a->text, skip = text ? 0 : 1;
    const char *name = ld->a->map ? ld->a->map : h->name;
    if (!name)
        return fail("line %" PRIu64 ": the block has no database= line; "
                    "name a map with -s MAP", h->end);
    bonsai_map map;
    int rc = get_map(ld, name, h->kind, h->end, &map);
    if (rc)
        return rc;
    const char *why;
    for (;;) {
        size_t klen, vlen;
        int r = read_line(&ld->in, &ld->key);
        if (r < 0)
            return EXIT_FAIL;
        if (r == 0) {
            if (text)
                return 0;
            return fail("line %" PRIu64 ": unexpected end of input (no "
                        "DATA=END)", ld->in.lineno);
        }
        uint64_t kline = ld->in.lineno;
        if (!text && is(&ld->key, "DATA=END"))
            return 0;
        if (!text && ld->key.p[0] != ' ')
            return fail("line %" PRIu64 ": expected a key line (a space, "
                        "then the key) or DATA=END", kline);
        why = decode(ld->key.p + skip, ld->key.len - skip, h->print, &klen);
        if (why)
            return fail("line %" PRIu64 ": key: %s", kline, why);
        memmove(ld->key.p, ld->key.p + skip, klen);

        r = read_line(&ld->in, &ld->val);
        if (r < 0)
            return EXIT_FAIL;
        if (r == 0)
            return fail("line %" PRIu64 ": missing value line: the input "
                        "ends after this key", kline);
        uint64_t vline = ld->in.lineno;
        if (!text && is(&ld->val, "DATA=END"))
            return fail("line %" PRIu64 ": missing value line: DATA=END "
                        "after the key on line %" PRIu64, vline, kline);
        if (!text && ld->val.p[0] != ' ')
            return fail("line %" PRIu64 ": expected a value line (a "
                        "space, then the value)", vline);
        why = decode(ld->val.p + skip, ld->val.len - skip, h->print, &vlen);
        if (why)
            return fail("line %" PRIu64 ": value: %s", vline, why);
        memmove(ld->val.p, ld->val.p + skip, vlen);

        if ((rc = put(ld, map, h->kind, name, klen, vlen, kline)))
            return rc;
    }
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
    return have; /* 0 at the end, else an exit status */
}

/* An open error, with what the OS says about the path when that helps. */
static int open_failed(const char *path, int rc)
{
    struct stat st;
    const char *hint = NULL;
    if (stat(path, &st) != 0)
        hint = strerror(errno);
    else if (S_ISDIR(st.st_mode))
        hint = "is a directory";
    else if (!S_ISREG(st.st_mode))
        hint = "not a regular file";
    return fail("%s: %s%s%s%s", path, bonsai_strerror(rc), hint ? " (" : "",
                hint ? hint : "", hint ? ")" : "");
}

int main(int argc, char **argv)
{
    struct args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st < 0 ? 0 : st;

    loader ld = {.a = &a, .in = {.f = stdin, .name = "standard input"}};
    if (a.input && strcmp(a.input, "-")) {
        ld.in.name = a.input;
        if (!(ld.in.f = fopen(a.input, "r")))
            return fail("%s: %s", a.input, strerror(errno));
    }

    /* The first header comes before the store opens: its mapsize may
     * raise the cap, and bad input leaves no trace. */
    header h = {.kind = BONSAI_KEY_BYTES};
    int have = a.text ? 1 : read_header(&ld.in, &ld.key, &h);
    if (have > 1) {
        st = have;
        goto out;
    }

    bonsai_options opts;
    bonsai_options_init(&opts);
    if (h.mapsize > opts.max_size)
        opts.max_size = h.mapsize;
    struct stat sb;
    int created = stat(a.file, &sb) != 0 && errno == ENOENT;
    int rc = bonsai_open(a.file, &opts, &ld.db);
    if (rc) {
        st = open_failed(a.file, rc);
        if (created)
            unlink(a.file); /* in case the open got as far as creating */
        goto out;
    }
    if ((rc = bonsai_txn_begin(ld.db, 0, &ld.txn))) {
        st = fail("%s: write transaction: %s", a.file, bonsai_strerror(rc));
    } else if ((st = load_all(&ld, &h, have))) {
        bonsai_txn_abort(ld.txn);
    } else if ((rc = bonsai_txn_commit(ld.txn))) {
        st = fail("%s: commit: %s", a.file, bonsai_strerror(rc));
    }
    if ((rc = bonsai_close(ld.db)) && !st)
        st = fail("%s: close: %s", a.file, bonsai_strerror(rc));
    if (st && created)
        unlink(a.file);
    if (st)
        fprintf(stderr, PROG ": nothing loaded; %s is as it was\n", a.file);
out:
    header_clear(&h);
    free(ld.key.p);
    free(ld.val.p);
    if (ld.in.f != stdin)
        fclose(ld.in.f);
    return st;
}

/* SPDX-License-Identifier: MIT */
/*
 * bonsai-fill - the fill-until-full experiment.
 *
 * Opens a store (anonymous memory, or --file PATH created anew), creates
 * the u64 map "test" and inserts keys with empty values until the store
 * answers BONSAI_FULL, --count entries are in or --seconds have passed.
 * --resume goes on with the store a run with --file left: a fill longer
 * than one sitting runs in parts, each ending cleanly at its --seconds.
 * Keys are 0, 1, 2, ...
 * (--keys seq) or a seeded splitmix64 stream (--keys random; it never
 * repeats a key: its output is a bijection of a counter).  With transactions it commits every
 * 100,000 inserts; when FULL arrives the open transaction is aborted and
 * only committed entries count.
 *
 * --preset NAME stands for a set of flags: one rung of the original
 * experiment's ladder (see PRESETS below and --preset list).
 *
 * While it fills it shows progress: a live line on standard error when
 * that is a terminal, or with --counter the count every 1,000,000
 * entries on standard output, nothing with --quiet; --csv FILE gets a
 * row per million.  Then a report (entries, bytes, RSS, rate, sampled
 * insert latency, the tree's shape from bonsai_map_stat, why it stopped),
 * then a check of the map: bonsai_count, an ordered cursor walk and
 * lookups of up to SAMPLE_MAX keys kept while filling.  With --json the
 * last line of stdout is the report as one JSON object; with --quiet it is
 * the only one (a failed check is then said on stderr).
 *
 * --file refuses to replace anything but an empty file or, with --force,
 * a bonsai store.
 *
 * Exit: 0 done and consistent, 1 an error, 2 bad usage, 3 inconsistent.
 * Uses only the public API (bonsai.h).
 */
#include "bonsai.h"
#include "common/json.h"
#include "common/progress.h"
#include "common/tool.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROG "bonsai-fill"
#define SYNOPSIS "[--preset NAME] [OPTION]...\n--preset list"

#define EXIT_ERROR TOOL_EXIT_FAIL
#define EXIT_USAGE TOOL_EXIT_USAGE
#define EXIT_INCONSISTENT 3

#define TXN_BATCH 100000u
#define REPORT_EVERY 1000000u
#define SAMPLE_MAX 1024u
#define TIME_EVERY 65536u   /* inserts between looks for --seconds */
#define DEFAULT_FILE "/tmp/bonsai-fill.db"
/* The original ran in "15 GB"; we read that as 15 GiB. */
#define ORIG_BYTES (15.0 * 1024 * 1024 * 1024)
#define TICK_INSERTS 4096u  /* inserts between looks at the clock */
#define STAT_PROGRESS 0.02  /* bonsai_map_stat: at most every 2 % ... */
#define STAT_SECONDS 1.0    /* ... and at most once a second */
#define LAT_GAP_MAX 127u    /* latency sample gaps 1..127, mean 64 */
#define LAT_SUB 16u         /* histogram: 16 buckets per power of two */
#define LAT_BUCKETS (61u * LAT_SUB)

/* ---- presets ------------------------------------------------------------ */

/* A preset is shorthand for flags the user could type; flags given on the
 * command line override it.  orig_m and orig_bpe are the original's row
 * (millions of entries in 15 GB, bytes per entry); file variants repeat the
 * row of their in-memory twin for comparison.
 *
 * Each rung is what a bonsai user would pick for it, not a copy of the
 * original's node sizes (MapDB's 32 entries cost a whole page each here):
 * 64-byte pages and the library's defaults (4 KiB nodes of up to 4096
 * entries, a 32 MiB write cache) except where the rung says otherwise.
 * direct: no write cache, so every insert re-encodes its leaf; 256
 * entries was the fastest node measured (README, "The experiment's
 * ladder").  n120: the 120-entry nodes the rung names, compressed.
 * random: 1 KiB nodes insert random keys twice as fast as 4 KiB ones
 * for some 8 % more bytes. */
struct preset {
    const char *name;
    const char *flags;
    double orig_m;
    double orig_bpe;
};

#define MEM "--no-txn --page-size 64 --flush-delay 0"
#define FILE_ "--txn --file " DEFAULT_FILE " --page-size 64 --flush-delay 0"
#define CACHE " --write-cache 32M"
#define NOCACHE " --write-cache 0"
#define NDIRECT " --node-entries 256 --node-bytes 4096"
#define NDEFAULT " --node-entries 4096 --node-bytes 4096"
#define N120 " --node-entries 120 --node-bytes 4096"
#define NRANDOM " --node-entries 4096 --node-bytes 1024"
#define SEQ " --keys seq"
#define RND " --keys random"
#define RAW " --compress none"

static const struct preset PRESETS[] = {
    {"direct", MEM NOCACHE NDIRECT SEQ RAW, 980, 16.4},
    {"direct-cache", MEM CACHE NDEFAULT SEQ RAW, 1738, 9.3},
    {"direct-cache-n120-zlib", MEM CACHE N120 SEQ " --compress zlib", 3315,
     4.9},
    {"direct-cache-n120-lz4", MEM CACHE N120 SEQ " --compress lz4", 3315,
     4.9},
    {"random-cache", MEM CACHE NRANDOM RND RAW, 651, 24.7},
    {"file-direct", FILE_ NOCACHE NDIRECT SEQ RAW, 980, 16.4},
    {"file-direct-cache", FILE_ CACHE NDEFAULT SEQ RAW, 1738, 9.3},
    {"file-direct-cache-n120-zlib", FILE_ CACHE N120 SEQ " --compress zlib",
     3315, 4.9},
    {"file-direct-cache-n120-lz4", FILE_ CACHE N120 SEQ " --compress lz4",
     3315, 4.9},
    {"file-random-cache", FILE_ CACHE NRANDOM RND RAW, 651, 24.7},
};
#define NPRESETS (sizeof PRESETS / sizeof PRESETS[0])

static const struct preset *preset_find(const char *name)
{
    for (size_t i = 0; i < NPRESETS; i++)
        if (strcmp(PRESETS[i].name, name) == 0)
            return &PRESETS[i];
    return NULL;
}

static void preset_list(void)
{
    printf("%-28s %-22s %s\n", "PRESET", "ORIGINAL (15 GB)", "FLAGS");
    for (size_t i = 0; i < NPRESETS; i++) {
        const struct preset *p = &PRESETS[i];
        char orig[32];
        snprintf(orig, sizeof orig, "%.0f M, %.1f B/entry", p->orig_m,
                 p->orig_bpe);
        printf("%-28s %-22s %s\n", p->name, orig, p->flags);
    }
    printf("\nThe original: MapDB 2012, JVM, 15 GB of direct memory (read as\n"
           "15 GiB); file-* repeat the row they compare with.  n120: a node\n"
           "splits beyond 120 entries; node_bytes 4096 leaves room for 120\n"
           "entries even at 9 bytes of key each, so the count binds.\n");
}

/* ---- arguments ---------------------------------------------------------- */

#define WRITE_CACHE_DEFAULT UINT64_MAX
/* Past 512 MiB a cache buys a random fill little (a billion keys: 910 s
 * against 766 s with 2 GiB) and takes a cap's room from the store: 15 GiB
 * less 2 GiB cannot hold 3.2 billion keys near their floor. */
#define FILL_CACHE_MAX (UINT64_C(512) << 20)
#define FLUSH_DELAY_DEFAULT UINT32_MAX

struct args {
    const char *file;      /* NULL: anonymous memory */
    const struct preset *preset;
    const char *csv;       /* NULL: no CSV */
    uint64_t cap;
    int random;            /* 0 seq, 1 random */
    uint64_t seed;
    uint64_t count;        /* stop after this many entries */
    int transactions;      /* -1 library default */
    uint32_t node_bytes;   /* 0: library default */
    uint32_t node_entries;
    uint32_t page_size;
    uint64_t write_cache;  /* WRITE_CACHE_DEFAULT: the library's */
    uint32_t flush_delay;  /* FLUSH_DELAY_DEFAULT: the library's */
    unsigned compress;     /* BONSAI_COMPRESS_* */
    int level;             /* zlib level, 0 default */
    int json;
    int quiet;
    int counter;           /* the count every million on stdout */
    int force;             /* --file may replace a store */
    int resume;            /* go on with the store in --file */
    uint64_t seconds;      /* stop after this long; 0 = no limit */
    uint32_t busy_timeout; /* ms to wait for another writer of --file */
};

static void usage(FILE *out)
{
    fprintf(out,
"NAME\n"
"    bonsai-fill - insert u64 keys until the store is full\n"
"\n"
"SYNOPSIS\n"
"    bonsai-fill [--preset NAME] [OPTION]...\n"
"    bonsai-fill --preset list\n"
"\n"
"DESCRIPTION\n"
"    Inserts u64 keys with empty values into the map \"test\" of a new\n"
"    store until it is full (BONSAI_FULL) or holds --count entries, then\n"
"    reports and checks it (count, ordered walk, sampled lookups).\n"
"\n"
"    --preset NAME       one rung of the original experiment; a preset is\n"
"                        a set of the flags below, and flags given with it\n"
"                        override it wherever they stand.  'list' prints\n"
"                        every preset, its flags and the original figure.\n"
"    --file PATH         store in PATH, created anew (default: anonymous\n"
"                        memory; file-* presets: " DEFAULT_FILE ").\n"
"                        A store already there is replaced only with\n"
"                        --force; any other file (but an empty one) is\n"
"                        never replaced\n"
"    --force             replace the store at --file\n"
"    --cap SIZE          max_size, 64K to 8 EiB (2^63 bytes); K, M, G are\n"
"                        powers of 1024 (default 1G).  In memory the cap\n"
"                        holds the store and its write cache together\n"
"                        (cache_in_cap) when the cache is below half of it\n"
"    --keys seq|random   0,1,2,... or seeded random keys (default seq)\n"
"    --seed N            PRNG seed for random keys and latency sampling\n"
"                        (default 1); same seed, same figures but time\n"
"    --count N           stop after N entries (default: until full)\n"
"    --seconds N         stop after N seconds of filling (stopped: time)\n"
"    --resume            go on with the store in --file, which a run with\n"
"                        the same --keys, --seed and --cap left: the\n"
"                        keys it holds must be the stream's first ones.\n"
"                        A fill longer than one sitting runs in parts\n"
"                        (--seconds each); --count counts every entry\n"
"    --txn, --no-txn     transactions on or off (default: the library's,\n"
"                        on for a file, off in memory); with --txn it\n"
"                        commits every %u inserts\n"
"    --write-cache SIZE  write cache bytes, 0 = none (default: the\n"
"                        library's; with --keys random an eighth of the\n"
"                        cap, at least that and at most 512 MiB: random keys\n"
"                        applied in batches of many to a leaf need a cache\n"
"                        that grows with the store; in memory at most a\n"
"                        quarter of the cap)\n"
"    --flush-delay MS    write cached nodes once this old (0 = no limit)\n"
"    --compress none|lz4|zlib[:LEVEL]\n"
"                        node compression (default none; zlib level 1..9)\n"
"    --node-bytes N      target node size in bytes (uncompressed),\n"
"                        256..1048576\n"
"    --node-entries N    maximum entries in a node, 2..65535\n"
"    --page-size N       allocation granule in bytes, a power of two,\n"
"                        64..65536\n"
"\n"
"OUTPUT\n"
"    When standard error is a terminal, a live line there (entries, rate,\n"
"    bytes per entry, %% of the cap; with --count the time left),\n"
"    refreshed 4 times a second.\n"
"    --counter           instead, the count every 1,000,000 entries on\n"
"                        standard output, one number a line\n"
"    -q, --quiet         neither, no report, no verdict of the check (a\n"
"                        failed check is said on standard error) and no\n"
"                        message while waiting for another writer:\n"
"                        nothing on standard output but the --json line\n"
"    --csv FILE          a header, then a row per million entries and one\n"
"                        at the end: seconds, entries, bytes used, bytes\n"
"                        mapped, RSS, write cache bytes, depth, leaf and\n"
"                        branch nodes, leaf fill, compression ratio (raw /\n"
"                        stored), inserts per second in the interval, and\n"
"                        stat_at: the entries when the shape columns were\n"
"                        measured.  bonsai_map_stat walks the whole tree,\n"
"                        so it runs at most every 2 %% of the run (of the\n"
"                        cap, or of --count) and once a second; rows in\n"
"                        between repeat its last values.\n"
"    --json              end with the report as one JSON line, an object\n"
"                        of its figures and the settings:\n"
"                        entries, bytes_used, rss_peak_bytes,\n"
"                        bytes_per_entry, seconds, inserts_per_sec,\n"
"                        stopped (\"full\", \"count\" or \"time\"), keys,\n"
"                        seed, cap, mode (\"txn\" or \"no-txn\"),\n"
"                        consistent (true or false), resumed_from, file\n"
"                        (null in memory), page_size, node_bytes,\n"
"                        node_entries, bytes_mapped, bytes_free,\n"
"                        cache_bytes, preset (or null), compress,\n"
"                        compression_level, write_cache, depth,\n"
"                        leaf_nodes, branch_nodes, leaf_fill,\n"
"                        compression_ratio, raw_bytes, stored_bytes,\n"
"                        page_bytes, lat_p50_ns, lat_p99_ns, lat_p999_ns,\n"
"                        lat_max_ns, lat_samples, stat_seconds,\n"
"                        orig_entries, orig_scaled (0 without a preset)\n"
"    --busy-timeout MS   wait at most MS milliseconds (0: not at all) for\n"
"                        another process that has --file open to write,\n"
"                        before replacing or resuming it (default:\n"
"                        \"forever\", as long as it takes)\n"
"    -V, --version       print the version and exit\n"
"    -h, --help          this text\n"
"\n"
"    The report samples insert latency: one bonsai_put_u64 in 64 on\n"
"    average, at random gaps (commits are not inserts), percentiles\n"
"    within 3 %%.  Inserts per second exclude the time bonsai_map_stat\n"
"    took during the fill.\n"
"\n"
"EXIT STATUS\n"
"    0 stopped as asked (full, --count or --seconds) and consistent,\n"
"    1 error (also: --file names what it may not replace),\n"
"    2 bad usage, 3 consistency check failed.\n",
        TXN_BATCH);
}

/* Parses a decimal uint64_t; 0 on success, -1 if not a whole number. */
static int parse_u64(const char *s, uint64_t *out, char **end)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, end, 10);
    if (errno)
        return -1;
    *out = v;
    return 0;
}

static int parse_count(const char *s, uint64_t *out)
{
    char *end;
    return parse_u64(s, out, &end) == 0 && *end == '\0' ? 0 : -1;
}

static int parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (parse_count(s, &v) || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* SIZE: a number with an optional K, M or G suffix (powers of 1024). */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    uint64_t v;
    if (parse_u64(s, &v, &end))
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: return -1;
    }
    if (*end && end[1] != '\0')
        return -1;
    if (v > (UINT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

/* none | lz4 | zlib | zlib:LEVEL */
static int parse_compress(const char *s, struct args *a)
{
    a->level = 0;
    if (strcmp(s, "none") == 0)
        a->compress = BONSAI_COMPRESS_NONE;
    else if (strcmp(s, "lz4") == 0)
        a->compress = BONSAI_COMPRESS_LZ4;
    else if (strncmp(s, "zlib", 4) == 0 && (s[4] == '\0' || s[4] == ':'))
        a->compress = BONSAI_COMPRESS_ZLIB;
    else
        return -1;
    uint64_t level;
    if (s[0] == 'z' && s[4] == ':') {
        if (parse_count(s + 5, &level) || level < 1 || level > 9)
            return -1;
        a->level = (int)level;
    }
    return 0;
}

static const char *compress_name(unsigned c)
{
    return c == BONSAI_COMPRESS_LZ4    ? "lz4"
           : c == BONSAI_COMPRESS_ZLIB ? "zlib"
                                       : "none";
}

/* What an option takes, for the usage error of a bad value. */
static const char *rule_of(const char *opt)
{
    static const char *const rules[][2] = {
        {"cap", "must be from 64K to 8 EiB (2^63 bytes); K, M, G are "
                "powers of 1024"},
        {"keys", "must be seq or random"},
        {"seed", "must be a whole number"},
        {"count", "must be a whole number"},
        {"seconds", "must be a whole number"},
        {"write-cache", "must be a size in bytes; K, M, G are powers of "
                        "1024"},
        {"flush-delay", "must be milliseconds from 0 to 4294967295"},
        {"compress", TOOL_COMPRESS_RULE},
        {"busy-timeout", TOOL_BUSY_TIMEOUT_RULE},
    };
    char dashed[32];
    snprintf(dashed, sizeof dashed, "--%s", opt);
    if (tool_store_rule(dashed))
        return tool_store_rule(dashed);
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(opt, rules[i][0]) == 0)
            return rules[i][1];
    return "must be a value it takes (--help)";
}

static int bad_value(const char *opt, const char *val)
{
    char dashed[32];
    snprintf(dashed, sizeof dashed, "--%s", opt);
    return tool_bad_value(dashed, val, rule_of(opt));
}

/* v in [lo, hi] into *out, else -1. */
static int in_range(uint64_t v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_cap(const char *s, uint64_t *out)
{
    uint64_t v;
    return parse_size(s, &v) ? -1 : in_range(v, 64 << 10, BONSAI_MAX_SIZE,
                                              out);
}

/* Milliseconds below BONSAI_WAIT_FOREVER, or "forever". */
static int parse_busy_timeout(const char *s, uint32_t *out)
{
    if (strcmp(s, "forever") == 0) {
        *out = BONSAI_WAIT_FOREVER;
        return 0;
    }
    uint32_t v;
    if (parse_u32(s, &v) || v == BONSAI_WAIT_FOREVER)
        return -1;
    *out = v;
    return 0;
}

/* A u32 option in [lo, hi] (a power of two if pow2). */
static int parse_u32_in(const char *s, uint32_t lo, uint32_t hi, int pow2,
                        uint32_t *out)
{
    uint32_t v;
    if (parse_u32(s, &v) || v < lo || v > hi || (pow2 && (v & (v - 1))))
        return -1;
    *out = v;
    return 0;
}

#define SHORTOPTS ":hqV"

static const struct option LONGOPTS[] = {
    {"preset", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},
    {"cap", required_argument, NULL, 'c'},
    {"keys", required_argument, NULL, 'k'},
    {"seed", required_argument, NULL, 's'},
    {"count", required_argument, NULL, 'n'},
    {"seconds", required_argument, NULL, 'S'},
    {"resume", no_argument, NULL, 'R'},
    {"txn", no_argument, NULL, 'T'},
    {"no-txn", no_argument, NULL, 'N'},
    {"write-cache", required_argument, NULL, 'W'},
    {"flush-delay", required_argument, NULL, 'D'},
    {"compress", required_argument, NULL, 'C'},
    {"node-bytes", required_argument, NULL, 'B'},
    {"node-entries", required_argument, NULL, 'E'},
    {"page-size", required_argument, NULL, 'P'},
    {"csv", required_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"counter", no_argument, NULL, 'u'},
    {"force", no_argument, NULL, 'F'},
    {"version", no_argument, NULL, 'V'},
    {"json", no_argument, NULL, 'j'},
    {"busy-timeout", required_argument, NULL, 'b'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Applies one option.  Returns 0, -1 for a bad value, 1 for --help, 2 for
 * an unknown option. */
static int apply_opt(int c, const char *v, struct args *a)
{
    switch (c) {
    case 'p': return 0; /* found by find_preset() */
    case 'f': a->file = v; return 0;
    case 'c': return parse_cap(v, &a->cap);
    case 'k':
        a->random = strcmp(v, "random") == 0;
        return strcmp(v, "seq") && !a->random ? -1 : 0;
    case 's': return parse_count(v, &a->seed);
    case 'n': return parse_count(v, &a->count);
    case 'S': return parse_count(v, &a->seconds);
    case 'R': a->resume = 1; return 0;
    case 'T': a->transactions = 1; return 0;
    case 'N': a->transactions = 0; return 0;
    case 'W': return parse_size(v, &a->write_cache);
    case 'D': return parse_u32(v, &a->flush_delay);
    case 'C': return parse_compress(v, a);
    case 'B': return parse_u32_in(v, 256, 1u << 20, 0, &a->node_bytes);
    case 'E': return parse_u32_in(v, 2, BONSAI_MAX_NODE_ENTRIES, 0,
                                  &a->node_entries);
    case 'P': return parse_u32_in(v, 64, 65536, 1, &a->page_size);
    case 'v': a->csv = v; return 0;
    case 'q': a->quiet = 1; return 0;
    case 'u': a->counter = 1; return 0;
    case 'F': a->force = 1; return 0;
    case 'j': a->json = 1; return 0;
    case 'b': return parse_busy_timeout(v, &a->busy_timeout);
    case 'h': return 1;
    default: return 2;
    }
}

/* First pass: the name given to the last --preset, or NULL. */
static const char *find_preset(int argc, char **argv)
{
    const char *name = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, SHORTOPTS, LONGOPTS, NULL)) != -1)
        if (c == 'p')
            name = optarg;
    optind = 0; /* GNU: start afresh */
    return name;
}

/* A new argv (malloc'ed) with the preset's flags right after argv[0], so
 * that the command line's own flags come later and win.  The flags'
 * strings live in a static buffer. */
static char **with_preset(int argc, char **argv, const struct preset *p,
                          int *newc)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s", p->flags);
    char **v = malloc((size_t)(argc + 64) * sizeof *v);
    if (!v)
        return NULL;
    int n = 0;
    v[n++] = argv[0];
    for (char *t = strtok(buf, " "); t && n < 64; t = strtok(NULL, " "))
        v[n++] = t;
    for (int i = 1; i < argc; i++)
        v[n++] = argv[i];
    v[n] = NULL;
    *newc = n;
    return v;
}

static int parse_opts(int argc, char **argv, struct args *a)
{
    int c, idx = 0;
    while ((c = getopt_long(argc, argv, SHORTOPTS, LONGOPTS, &idx)) != -1) {
        if (c == 'V') {
            tool_version();
            return -1;
        }
        int r = apply_opt(c, optarg, a);
        if (r == 1) {
            usage(stdout);
            return -1;
        }
        if (r == 2)
            return tool_bad_option(c, argv);
        if (r)
            return bad_value(LONGOPTS[idx].name, optarg);
    }
    if (optind < argc)
        return tool_usage_error("unexpected argument '%s'", argv[optind]);
    if (a->resume && !a->file)
        return tool_usage_error("--resume needs --file");
    if ((a->file && tool_new_path("--file", a->file)) ||
        (a->csv && tool_new_path("--csv", a->csv)))
        return EXIT_USAGE;
    return 0;
}

/* Fills *a from argv.  Returns 0, or an exit status (-1: exit 0 now). */
static int parse_args(int argc, char **argv, struct args *a)
{
    *a = (struct args){.cap = UINT64_C(1) << 30, .seed = 1,
                       .count = UINT64_MAX, .transactions = -1,
                       .write_cache = WRITE_CACHE_DEFAULT,
                       .flush_delay = FLUSH_DELAY_DEFAULT,
                       .busy_timeout = BONSAI_WAIT_FOREVER};
    const char *name = find_preset(argc, argv);
    if (name && strcmp(name, "list") == 0) {
        preset_list();
        return -1;
    }
    if (name && !(a->preset = preset_find(name)))
        return tool_bad_value("--preset", name,
                              "must be a preset's name (--preset list)");
    if (!a->preset)
        return parse_opts(argc, argv, a);
    /* Values point at the strings, not into the array: free it after. */
    char **v = with_preset(argc, argv, a->preset, &argc);
    if (!v)
        return tool_fail("%s", bonsai_strerror(BONSAI_NOMEM));
    int rc = parse_opts(argc, v, a);
    free(v);
    return rc;
}

/* ---- keys and samples --------------------------------------------------- */

/* Every stride-th inserted key, in insertion order: sample[i] is entry
 * number i * stride.  When the array fills, every other one is dropped and
 * the stride doubles, so it always spans the whole fill. */
struct sample {
    uint64_t key[SAMPLE_MAX];
    uint32_t n;
    uint64_t stride;
};

#define SPLITMIX_STEP UINT64_C(0x9E3779B97F4A7C15)

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += SPLITMIX_STEP);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Called for entry number idx (0-based) with its key. */
static void sample_add(struct sample *s, uint64_t idx, uint64_t key)
{
    if (idx % s->stride)
        return;
    if (s->n == SAMPLE_MAX) {
        for (uint32_t i = 0; i < SAMPLE_MAX / 2; i++)
            s->key[i] = s->key[2 * i];
        s->n = SAMPLE_MAX / 2;
        s->stride *= 2;
        if (idx % s->stride)
            return;
    }
    s->key[s->n++] = key;
}

/* Forgets the samples of entries >= entries (an aborted transaction). */
static void sample_truncate(struct sample *s, uint64_t entries)
{
    uint64_t keep = (entries + s->stride - 1) / s->stride;
    if (keep < s->n)
        s->n = (uint32_t)keep;
}

/* ---- clocks and memory -------------------------------------------------- */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rss_peak_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

static uint64_t rss_now_bytes(void)
{
    unsigned long size, resident;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (!fp)
        return 0;
    int n = fscanf(fp, "%lu %lu", &size, &resident);
    fclose(fp);
    return n == 2 ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* ---- latency: a log-scale histogram of sampled inserts ------------------ */

struct latency {
    uint64_t hist[LAT_BUCKETS];
    uint64_t n, max_ns;
    uint64_t rng;   /* picks the gaps */
    uint32_t gap;   /* inserts until the next timed one */
};

/* Values below LAT_SUB have a bucket each; above, LAT_SUB buckets per
 * power of two. */
static unsigned lat_bucket(uint64_t ns)
{
    if (ns < LAT_SUB)
        return (unsigned)ns;
    unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* >= 4 */
    unsigned sub = (unsigned)(ns >> (e - 4)) & (LAT_SUB - 1);
    unsigned b = (e - 3) * LAT_SUB + sub;
    return b < LAT_BUCKETS ? b : LAT_BUCKETS - 1;
}

/* The middle of bucket b. */
static uint64_t lat_value(unsigned b)
{
    if (b < LAT_SUB)
        return b;
    unsigned e = b / LAT_SUB + 3, sub = b % LAT_SUB;
    uint64_t lo = (uint64_t)(LAT_SUB + sub) << (e - 4);
    return lo + ((UINT64_C(1) << (e - 4)) >> 1);
}

static void lat_next_gap(struct latency *l)
{
    l->gap = 1 + (uint32_t)(splitmix64(&l->rng) % LAT_GAP_MAX);
}

static void lat_add(struct latency *l, uint64_t ns)
{
    l->hist[lat_bucket(ns)]++;
    l->n++;
    if (ns > l->max_ns)
        l->max_ns = ns;
}

/* The q-quantile (0 < q < 1) of the samples, 0 without any. */
static uint64_t lat_quantile(const struct latency *l, double q)
{
    uint64_t want = (uint64_t)(q * (double)l->n) + 1, seen = 0;
    for (unsigned b = 0; b < LAT_BUCKETS && l->n; b++) {
        seen += l->hist[b];
        if (seen >= want)
            return lat_value(b) < l->max_ns ? lat_value(b) : l->max_ns;
    }
    return l->max_ns;
}

/* ---- the state of a fill ------------------------------------------------ */

enum display { SHOW_NONE, SHOW_LINES, SHOW_LIVE };

struct probe {
    enum display show;
    FILE *csv;
    double t0;               /* the fill began */
    uint64_t next_event;     /* inserts at which to look again */
    uint64_t next_row;       /* next million */
    uint64_t next_look;      /* next look at the clock (live line) */
    progress bar;            /* the live line */
    double row_time;         /* last CSV row: when, at how many */
    uint64_t row_entries;
    bonsai_map_info info;    /* the last bonsai_map_stat */
    int have_info;
    uint64_t info_entries;
    double info_time, info_progress;
    double row_rate;         /* of the last CSV row */
    uint64_t row_stat_at;
    double stat_seconds;     /* spent in bonsai_map_stat */
};

struct fill {
    bonsai_db *db;
    bonsai_map map;
    int transactions;      /* as the store reports it */
    uint64_t entries;      /* committed entries */
    uint64_t resumed;      /* entries the store held before this run */
    const char *stopped;   /* "full", "count" or "time" */
    double seconds;
    double stat_seconds;   /* of them in bonsai_map_stat */
    uint64_t rss_peak;
    bonsai_stat st;
    struct sample sample;
    struct latency lat;
    struct probe pr;
};

/* The store, for messages: --file, or anonymous memory. */
static const char *store_name = "anonymous memory";

static int fail(const char *what, int rc)
{
    return tool_fail("%s: %s: %s", store_name, what, bonsai_strerror(rc));
}

/* ---- the tree's shape --------------------------------------------------- */

/* How far the run is, 0..1: of the cap, or of --count if that is nearer. */
static double run_progress(const struct fill *f, const struct args *a,
                           uint64_t entries)
{
    double p = (double)f->st.bytes_used / (double)a->cap;
    if (a->count != UINT64_MAX && a->count > 0) {
        double pc = (double)entries / (double)a->count;
        p = pc > p ? pc : p;
    }
    return p;
}

/* Walks the tree now (bonsai_map_stat).  Returns 0 or the library's error. */
static int shape_now(struct fill *f, uint64_t entries)
{
    struct probe *pr = &f->pr;
    /* a count applies the waiting puts first (a get would not: it reads
     * them where they wait): that is insert time, and counted in
     * stat_seconds it made a --csv run's rate look twice as fast as it
     * was */
    uint64_t count;
    int rc = bonsai_count(NULL, f->map, &count);
    if (rc)
        return rc;
    double t = now_seconds();
    rc = bonsai_map_stat(NULL, f->map, &pr->info);
    double t1 = now_seconds();
    pr->stat_seconds += t1 - t;
    pr->info_time = t1;
    pr->info_entries = entries;
    pr->have_info = rc == 0;
    return rc;
}

/* Walks the tree if 2 % of the run and a second have passed since the
 * last walk (or there was none). */
static void shape_maybe(struct fill *f, const struct args *a,
                        uint64_t entries)
{
    struct probe *pr = &f->pr;
    double p = run_progress(f, a, entries);
    if (pr->have_info && (p - pr->info_progress < STAT_PROGRESS ||
                          now_seconds() - pr->info_time < STAT_SECONDS))
        return;
    pr->info_progress = p;
    shape_now(f, entries); /* a failure leaves have_info 0: empty columns */
}

static double ratio(const bonsai_map_info *m)
{
    return m->stored_bytes ? (double)m->raw_bytes / (double)m->stored_bytes
                           : 0.0;
}

/* ---- progress: CSV rows, counter lines, the live line ------------------- */

static void csv_header(FILE *fp)
{
    fprintf(fp, "seconds,entries,bytes_used,bytes_mapped,rss_bytes,"
                "cache_bytes,depth,leaf_nodes,branch_nodes,leaf_fill,"
                "compression_ratio,inserts_per_sec,stat_at\n");
}

/* The shape columns: the last walk's figures and the entries it saw. */
static void csv_shape(FILE *fp, const struct probe *pr)
{
    const bonsai_map_info *m = &pr->info;
    if (!pr->have_info) {
        fprintf(fp, ",,,,,");
        return;
    }
    fprintf(fp, ",%" PRIu32 ",%" PRIu64 ",%" PRIu64 ",%.4f,%.3f", m->depth,
            m->leaf_nodes, m->branch_nodes, m->leaf_fill, ratio(m));
}

/* A row at entries; the time of its walk counts in no interval. */
static void csv_row(struct fill *f, const struct args *a, uint64_t entries)
{
    struct probe *pr = &f->pr;
    double t = now_seconds(), dt = t - pr->row_time;
    if (entries > pr->row_entries && dt > 0)
        pr->row_rate = (double)(entries - pr->row_entries) / dt;
    shape_maybe(f, a, entries);
    fprintf(pr->csv, "%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
            ",%" PRIu64, t - pr->t0, entries, f->st.bytes_used,
            f->st.bytes_mapped, rss_now_bytes(), f->st.cache_bytes);
    csv_shape(pr->csv, pr);
    fprintf(pr->csv, ",%.0f,", pr->row_rate);
    if (pr->have_info)
        fprintf(pr->csv, "%" PRIu64, pr->info_entries);
    fputc('\n', pr->csv);
    pr->row_time = now_seconds();
    pr->row_entries = entries;
    pr->row_stat_at = pr->info_entries;
}

/* The live line, at n entries: this run's, and what they take. */
static void live_line(struct fill *f, const struct args *a, uint64_t n)
{
    char note[64];
    bonsai_db_stat(f->db, &f->st);
    snprintf(note, sizeof note, "%.3f B/entry, %.1f %% of cap",
             n ? (double)f->st.bytes_used / (double)n : 0.0,
             100.0 * (double)f->st.bytes_used / (double)a->cap);
    progress_draw(&f->pr.bar, n - f->resumed, note);
}

/* Every million entries now committed: a counter line, a CSV row. */
static void committed(struct fill *f, const struct args *a)
{
    struct probe *pr = &f->pr;
    if (f->entries < pr->next_row)
        return;
    if (pr->csv)
        bonsai_db_stat(f->db, &f->st);
    for (; f->entries >= pr->next_row; pr->next_row += REPORT_EVERY) {
        if (pr->show == SHOW_LINES) {
            printf("%" PRIu64 "\n", pr->next_row);
            fflush(stdout);
        }
    }
    if (pr->csv)
        csv_row(f, a, f->entries);
}

static void set_next_event(struct probe *pr, int txn)
{
    pr->next_event = pr->show == SHOW_LIVE ? pr->next_look : UINT64_MAX;
    if (!txn && pr->next_row < pr->next_event)
        pr->next_event = pr->next_row;
}

/* Called when n inserts (committed or not) reach pr->next_event. */
static void event(struct fill *f, const struct args *a, uint64_t n)
{
    struct probe *pr = &f->pr;
    if (!f->transactions)
        committed(f, a);
    if (pr->show == SHOW_LIVE && n >= pr->next_look) {
        pr->next_look = n + TICK_INSERTS;
        if (progress_due(&pr->bar))
            live_line(f, a, n);
    }
    set_next_event(pr, f->transactions);
}

static void after_insert(struct fill *f, const struct args *a, uint64_t n)
{
    if (n >= f->pr.next_event)
        event(f, a, n);
}

static int probe_start(struct fill *f, const struct args *a)
{
    struct probe *pr = &f->pr;
    pr->show = a->quiet ? SHOW_NONE : a->counter ? SHOW_LINES : SHOW_LIVE;
    progress_init(&pr->bar, pr->show == SHOW_LIVE ? -1 : 0);
    if (pr->show == SHOW_LIVE && !pr->bar.on)
        pr->show = SHOW_NONE; /* standard error is no terminal */
    progress_phase(&pr->bar, "filling", "entries",
                   a->count != UINT64_MAX && a->count > f->resumed
                       ? a->count - f->resumed : 0);
    if (a->csv) {
        pr->csv = fopen(a->csv, "w");
        if (!pr->csv)
            return tool_fail("%s: %s", a->csv, strerror(errno));
        csv_header(pr->csv);
    }
    pr->t0 = pr->row_time = now_seconds();
    pr->row_entries = f->resumed;
    pr->next_row = (f->resumed / REPORT_EVERY + 1) * REPORT_EVERY;
    pr->next_look = f->resumed + TICK_INSERTS;
    set_next_event(pr, f->transactions);
    return 0;
}

/* The end of the fill: the final walk, a last CSV row, the live line. */
static int probe_end(struct fill *f, const struct args *a)
{
    struct probe *pr = &f->pr;
    int rc = shape_now(f, f->entries);
    if (pr->csv && (pr->row_entries != f->entries ||
                    pr->row_stat_at != f->entries || !pr->have_info))
        csv_row(f, a, f->entries);
    if (pr->csv && fclose(pr->csv) != 0)
        return tool_fail("%s: %s", a->csv, strerror(errno));
    pr->csv = NULL;
    progress_clear(&pr->bar);
    if (rc == BONSAI_CORRUPT)
        return 0; /* the check will say so */
    return rc ? fail("bonsai_map_stat", rc) : 0;
}

/* ---- opening ------------------------------------------------------------ */

static void set_options(const struct args *a, bonsai_options *o)
{
    bonsai_options_init(o);
    o->max_size = a->cap;
    o->busy_timeout_ms = a->busy_timeout;
    o->transactions = a->transactions;
    if (a->node_bytes)
        o->node_bytes = a->node_bytes;
    if (a->node_entries)
        o->node_entries = a->node_entries;
    if (a->page_size)
        o->page_size = a->page_size;
    if (a->write_cache != WRITE_CACHE_DEFAULT)
        o->write_cache_bytes = a->write_cache;
    else if (a->random && a->cap / 8 > o->write_cache_bytes)
        o->write_cache_bytes = a->cap / 8 < FILL_CACHE_MAX ? a->cap / 8
                                                           : FILL_CACHE_MAX;
    else if (!a->file && o->write_cache_bytes > a->cap / 4)
        o->write_cache_bytes = a->cap / 4; /* a small cap holds it too */
    if (a->flush_delay != FLUSH_DELAY_DEFAULT)
        o->flush_delay_ms = a->flush_delay;
    /* the experiment's cap is the process's memory: the cache inside it */
    o->cache_in_cap = !a->file && o->write_cache_bytes < a->cap / 2;
    o->compression = a->compress;
    o->compression_level = a->level;
}

/* Key number idx of the stream (0-based): splitmix64 adds its constant
 * to the state once a key, so any key is found without the ones before. */
static uint64_t stream_key(const struct args *a, uint64_t idx)
{
    if (!a->random)
        return idx;
    uint64_t state = a->seed + idx * SPLITMIX_STEP;
    return splitmix64(&state);
}

/* Is key in the map?  1 yes, 0 no, or the library's error. */
static int holds(const struct fill *f, uint64_t key)
{
    bonsai_txn *txn = NULL;
    int rc = 0;
    if (f->transactions &&
        (rc = bonsai_txn_begin(f->db, BONSAI_TXN_RDONLY, &txn)))
        return rc;
    bonsai_val v;
    rc = bonsai_get_u64(txn, f->map, key, &v);
    bonsai_txn_abort(txn);
    return rc == 0 ? 1 : rc == BONSAI_NOTFOUND ? 0 : rc;
}

/* The map of an earlier part: it must hold the stream's first keys, as
 * many as it counts, and not the next one. */
static int open_resumed(const struct args *a, struct fill *f)
{
    unsigned kind;
    int rc = bonsai_map_open(f->db, NULL, "test", &f->map, &kind);
    if (rc)
        return fail("bonsai_map_open \"test\"", rc);
    if (kind != BONSAI_KEY_U64)
        return tool_fail("%s: map \"test\" has no u64 keys", a->file);
    if ((rc = bonsai_count(NULL, f->map, &f->resumed)))
        return fail("bonsai_count", rc);
    f->entries = f->resumed;
    int first = f->resumed ? holds(f, stream_key(a, 0)) : 1;
    int last = f->resumed ? holds(f, stream_key(a, f->resumed - 1)) : 1;
    int next = holds(f, stream_key(a, f->resumed));
    if (first < 0 || last < 0 || next < 0)
        return fail("bonsai_get_u64", first < 0 ? first
                                      : last < 0 ? last : next);
    if (!first || !last || next)
        return tool_fail("%s does not hold the first %" PRIu64 " keys of "
                         "this --keys/--seed stream", a->file, f->resumed);
    return 0;
}

static int open_db(const struct args *a, struct fill *f, int read_only)
{
    bonsai_options o;
    set_options(a, &o);
    o.read_only = read_only;
    int rc = bonsai_open(a->file, &o, &f->db);
    if (rc) {
        f->db = NULL;
        return fail("bonsai_open", rc);
    }
    rc = bonsai_db_stat(f->db, &f->st);
    if (rc)
        return fail("bonsai_db_stat", rc);
    f->transactions = f->st.transactions;
    return 0;
}

/* A store at --file that another process writes is not replaced under
 * it: this waits for that writer (up to --busy-timeout) by opening the
 * store to write, and holds it in *old while it is replaced.  Anything
 * that does not open as a store is replaced as it is. */
static int wait_for_writer(const struct args *a, bonsai_db **old)
{
    struct stat st;
    *old = NULL;
    if (!a->file || stat(a->file, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size == 0)
        return 0;
    bonsai_options o;
    bonsai_options_init(&o);
    o.create = 0;
    o.busy_timeout_ms = 0;
    int rc = bonsai_open(a->file, &o, old);
    if (rc == BONSAI_BUSY && a->busy_timeout) {
        tool_info("%s: waiting for the process that has it open to write",
                  a->file);
        o.busy_timeout_ms = a->busy_timeout;
        rc = bonsai_open(a->file, &o, old);
    }
    if (rc == BONSAI_BUSY)
        return tool_fail("cannot replace %s: %s (waited %u ms for the "
                         "process that has it open)", a->file,
                         bonsai_strerror(rc), (unsigned)a->busy_timeout);
    if (rc)
        *old = NULL;
    return 0;
}

/* --file without --resume names where the new store goes: nothing, an
 * empty file or, with --force, a bonsai store.  Anything else is left
 * as it is (exit 1): a text file given by mistake, a device node. */
static int may_replace(const struct args *a)
{
    struct stat st;
    if (!a->file)
        return 0;
    if (stat(a->file, &st) != 0)
        return errno == ENOENT ? 0 : tool_fail("%s: %s", a->file,
                                               strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tool_fail("%s: %s; not replaced", a->file,
                         S_ISDIR(st.st_mode) ? "is a directory"
                                             : "not a regular file");
    if (st.st_size == 0)
        return 0;
    int store = tool_is_store(a->file);
    if (store < 0)
        return tool_fail("%s: %s", a->file, strerror(errno));
    if (!store)
        return tool_fail("%s: not a bonsai store; not replaced", a->file);
    if (!a->force)
        return tool_fail("%s: a bonsai store; not replaced without --force "
                         "(--resume goes on with it)", a->file);
    return 0;
}

/* A resumed store is looked at read-only first, so that one it cannot go
 * on with is left as it was. */
static int open_store(const struct args *a, struct fill *f)
{
    if (a->resume) {
        int rc = open_db(a, f, 1);
        if (rc == 0)
            rc = open_resumed(a, f);
        bonsai_close(f->db);
        f->db = NULL;
        if (rc == 0)
            rc = open_db(a, f, 0);
        return rc ? rc : open_resumed(a, f);
    }
    bonsai_db *old = NULL;
    int rc = may_replace(a);
    if (rc == 0)
        rc = wait_for_writer(a, &old);
    if (rc)
        return rc;
    if (a->file && unlink(a->file) != 0 && errno != ENOENT) {
        rc = tool_fail("cannot replace %s: %s", a->file, strerror(errno));
        bonsai_close(old);
        return rc;
    }
    bonsai_close(old); /* the old store's lock, held while it went */
    rc = open_db(a, f, 0);
    if (rc)
        return rc;
    rc = bonsai_map_create(f->db, NULL, "test", BONSAI_KEY_U64, &f->map);
    return rc ? fail("bonsai_map_create", rc) : 0;
}

/* ---- filling ------------------------------------------------------------ */

/* Inserts one new key in txn (NULL without transactions), timing one in
 * about 64.  Returns 0 when an entry was added, or the error. */
static int insert_one(struct fill *f, const struct args *a, bonsai_txn *txn,
                      uint64_t idx)
{
    uint64_t key = stream_key(a, idx);
    int timed = --f->lat.gap == 0;
    uint64_t t = timed ? now_ns() : 0;
    int rc = bonsai_put_u64(txn, f->map, key, NULL, 0);
    if (timed) {
        if (rc == 0)
            lat_add(&f->lat, now_ns() - t);
        lat_next_gap(&f->lat);
    }
    if (rc == 0)
        sample_add(&f->sample, idx - f->resumed, key);
    return rc;
}

/* Has the run had its --seconds? */
static int past_seconds(const struct fill *f, const struct args *a)
{
    return a->seconds && now_seconds() - f->pr.t0 >= (double)a->seconds;
}

/* past_seconds, looking at the clock once in a while. */
static int out_of_time(const struct fill *f, const struct args *a)
{
    return (f->entries & (TIME_EVERY - 1)) == 0 && past_seconds(f, a);
}

static int fill_direct(struct fill *f, const struct args *a)
{
    f->stopped = "count";
    while (f->entries < a->count) {
        if (out_of_time(f, a)) {
            f->stopped = "time";
            break;
        }
        int rc = insert_one(f, a, NULL, f->entries);
        if (rc == BONSAI_FULL) {
            f->stopped = "full";
            break;
        }
        if (rc)
            return fail("bonsai_put_u64", rc);
        f->entries++;
        after_insert(f, a, f->entries);
    }
    /* Write the write cache back so bytes_used counts every node. */
    int rc = bonsai_sync(f->db);
    return rc ? fail("bonsai_sync", rc) : 0;
}

/* Ends a batch that met an error: aborts, keeping what was committed. */
static int batch_failed(struct fill *f, bonsai_txn *txn, int rc)
{
    if (txn)
        bonsai_txn_abort(txn);
    sample_truncate(&f->sample, f->entries - f->resumed);
    if (rc != BONSAI_FULL)
        return fail(txn ? "bonsai_put_u64" : "bonsai_txn_commit", rc);
    f->stopped = "full";
    return 0;
}

/* One transaction of up to TXN_BATCH inserts.  Returns 0 and sets
 * f->stopped when the fill is over, 0 to go on, or an exit status. */
static int fill_batch(struct fill *f, const struct args *a)
{
    bonsai_txn *txn;
    int rc = bonsai_txn_begin(f->db, 0, &txn);
    if (rc)
        return fail("bonsai_txn_begin", rc);
    uint64_t added = 0;
    while (added < TXN_BATCH && f->entries + added < a->count) {
        rc = insert_one(f, a, txn, f->entries + added);
        if (rc)
            return batch_failed(f, txn, rc);
        after_insert(f, a, f->entries + ++added);
    }
    rc = bonsai_txn_commit(txn);
    if (rc)
        return batch_failed(f, NULL, rc);
    f->entries += added;
    committed(f, a);
    if (f->entries >= a->count)
        f->stopped = "count";
    return 0;
}

static int fill_txn(struct fill *f, const struct args *a)
{
    if (f->entries >= a->count)
        f->stopped = "count";
    while (!f->stopped) {
        if (past_seconds(f, a)) {
            f->stopped = "time";
            break;
        }
        int rc = fill_batch(f, a);
        if (rc)
            return rc;
    }
    return 0;
}

static int fill(struct fill *f, const struct args *a)
{
    f->sample.stride = 1;
    f->lat.rng = a->seed ^ UINT64_C(0x6C6174656E6379); /* "latency" */
    lat_next_gap(&f->lat);
    int rc = probe_start(f, a);
    if (rc)
        return rc;
    rc = f->transactions ? fill_txn(f, a) : fill_direct(f, a);
    f->seconds = now_seconds() - f->pr.t0;
    f->stat_seconds = f->pr.stat_seconds;
    f->rss_peak = rss_peak_bytes();
    int src = bonsai_db_stat(f->db, &f->st);
    if (rc == 0 && src)
        rc = fail("bonsai_db_stat", src);
    int prc = probe_end(f, a);
    return rc ? rc : prc;
}

/* ---- checking ----------------------------------------------------------- */

/* Where the check's verdict goes: stdout, or stderr with --quiet. */
static FILE *verdict = NULL;

/* Says what failed; returns 0 so a check can "return inconsistent(...)". */
__attribute__((format(printf, 1, 2)))
static int inconsistent(const char *fmt, ...)
{
    FILE *out = verdict ? verdict : stdout;
    va_list ap;
    va_start(ap, fmt);
    fprintf(out, "%sconsistency: FAILED: ", out == stderr ? "bonsai-fill: "
                                                          : "");
    vfprintf(out, fmt, ap);
    fprintf(out, "\n");
    va_end(ap);
    return 0;
}

/* Walks the map in order: keys strictly increasing, as many as entries,
 * and with --keys seq exactly 0..entries-1.  Returns 1 if so. */
static int check_walk(const struct fill *f, const struct args *a,
                      bonsai_txn *txn, int *rc)
{
    bonsai_cursor *cur;
    *rc = bonsai_cursor_open(txn, f->map, &cur);
    if (*rc)
        return 0;
    uint64_t n = 0, prev = 0, key;
    int ok = 1;
    *rc = bonsai_cursor_first(cur);
    while (*rc == 0 && ok) {
        *rc = bonsai_cursor_get_u64(cur, &key, NULL);
        if (*rc)
            break;
        if (n > 0 && key <= prev)
            ok = inconsistent("cursor key %" PRIu64 " after %" PRIu64, key,
                              prev);
        else if (!a->random && key != n)
            ok = inconsistent("cursor key %" PRIu64 " at position %" PRIu64,
                              key, n);
        prev = key;
        n++;
        if (ok)
            *rc = bonsai_cursor_next(cur);
    }
    bonsai_cursor_close(cur);
    if (*rc == BONSAI_NOTFOUND)
        *rc = 0;
    if (*rc || !ok)
        return 0;
    if (n != f->entries)
        return inconsistent("cursor saw %" PRIu64 " entries, expected %"
                            PRIu64, n, f->entries);
    return 1;
}

/* Looks up every sampled key.  Returns 1 if all are there and empty. */
static int check_samples(const struct fill *f, bonsai_txn *txn, int *rc)
{
    for (uint32_t i = 0; i < f->sample.n; i++) {
        bonsai_val v;
        uint64_t key = f->sample.key[i];
        *rc = bonsai_get_u64(txn, f->map, key, &v);
        if (*rc == BONSAI_NOTFOUND) {
            *rc = 0;
            return inconsistent("key %" PRIu64 " (entry %" PRIu64
                                ") not found", key, i * f->sample.stride);
        }
        if (*rc)
            return 0;
        if (v.size != 0)
            return inconsistent("key %" PRIu64 " has a value of %" PRIu64
                                " bytes", key, (uint64_t)v.size);
    }
    return 1;
}

/* The final walk of the tree agrees with the count. */
static int check_shape(const struct fill *f)
{
    if (!f->pr.have_info)
        return inconsistent("bonsai_map_stat failed");
    if (f->pr.info.entries != f->entries)
        return inconsistent("bonsai_map_stat counts %" PRIu64
                            " entries, inserted %" PRIu64,
                            f->pr.info.entries, f->entries);
    return 1;
}

/* Runs every check.  Sets *consistent; returns 0 or an exit status. */
static int check(const struct fill *f, const struct args *a, int *consistent)
{
    bonsai_txn *txn = NULL;
    int rc = 0;
    if (f->transactions && (rc = bonsai_txn_begin(f->db, BONSAI_TXN_RDONLY,
                                                  &txn)))
        return fail("bonsai_txn_begin", rc);
    uint64_t count = 0;
    *consistent = 0;
    verdict = a->quiet ? stderr : stdout;
    if ((rc = bonsai_count(txn, f->map, &count)))
        goto out;
    if (count != f->entries) {
        inconsistent("bonsai_count says %" PRIu64 ", inserted %" PRIu64,
                     count, f->entries);
        goto out;
    }
    if (check_shape(f) && check_walk(f, a, txn, &rc) &&
        check_samples(f, txn, &rc)) {
        *consistent = 1;
        if (!a->quiet)
            printf("consistency:     ok (count, tree walk, ordered walk of %"
                   PRIu64 " keys, %u lookups)\n", f->entries, f->sample.n);
    }
out:
    bonsai_txn_abort(txn);
    return rc ? fail("consistency check", rc) : 0;
}

/* ---- reporting ---------------------------------------------------------- */

static double per_entry(const struct fill *f)
{
    return f->entries ? (double)f->st.bytes_used / (double)f->entries : 0.0;
}

/* Inserts per second, not counting the time bonsai_map_stat took. */
static double rate(const struct fill *f)
{
    double s = f->seconds - f->stat_seconds;
    return s > 0 ? (double)(f->entries - f->resumed) / s : 0.0;
}

/* The original's figure for the preset, scaled to the cap. */
static double orig_scaled(const struct args *a)
{
    return a->preset ? a->preset->orig_m * 1e6 * (double)a->cap / ORIG_BYTES
                     : 0.0;
}

static uint64_t write_cache_bytes(const struct args *a)
{
    bonsai_options o;
    set_options(a, &o);
    return o.write_cache_bytes;
}

static void report_config(const struct fill *f, const struct args *a)
{
    if (a->preset)
        printf("preset:          %s (original: %.0f M in 15 GB, %.1f "
               "B/entry; scaled to the cap: %.0f)\n", a->preset->name,
               a->preset->orig_m, a->preset->orig_bpe, orig_scaled(a));
    printf("store:           %s, %s, %s keys, write cache %" PRIu64
           " bytes, node %" PRIu32 " entries / %" PRIu32 " bytes, page %"
           PRIu32 ", compress %s\n", a->file ? a->file : "memory",
           f->transactions ? "txn" : "no-txn", a->random ? "random" : "seq",
           write_cache_bytes(a), f->st.node_entries, f->st.node_bytes,
           f->st.page_size, compress_name(a->compress));
}

static void report_shape(const struct fill *f)
{
    const bonsai_map_info *m = &f->pr.info;
    if (!f->pr.have_info) {
        printf("tree:            n/a\n");
        return;
    }
    printf("tree:            depth %" PRIu32 ", %" PRIu64 " leaves, %" PRIu64
           " branches, leaf fill %.1f %%\n", m->depth, m->leaf_nodes,
           m->branch_nodes, 100.0 * m->leaf_fill);
    printf("node bytes:      raw %" PRIu64 ", stored %" PRIu64 ", in pages %"
           PRIu64 ", compression ratio %.3f\n", m->raw_bytes,
           m->stored_bytes, m->page_bytes, ratio(m));
}

static void report_text(const struct fill *f, const struct args *a)
{
    const struct latency *l = &f->lat;
    report_config(f, a);
    printf("entries:         %" PRIu64 "\n", f->entries);
    if (a->resume)
        printf("resumed from:    %" PRIu64 " (the rate counts this part "
               "only)\n", f->resumed);
    printf("bytes used:      %" PRIu64 "\n", f->st.bytes_used);
    printf("bytes mapped:    %" PRIu64 "\n", f->st.bytes_mapped);
    printf("peak RSS:        %" PRIu64 " (%.3f of the cap)\n", f->rss_peak,
           (double)f->rss_peak / (double)a->cap);
    printf("bytes per entry: %.3f\n", per_entry(f));
    printf("seconds:         %.3f (%.3f of them in bonsai_map_stat)\n",
           f->seconds, f->stat_seconds);
    printf("inserts per sec: %.0f\n", rate(f));
    printf("insert latency:  p50 %" PRIu64 " ns, p99 %" PRIu64
           " ns, p99.9 %" PRIu64 " ns, max %" PRIu64 " ns (%" PRIu64
           " sampled)\n", lat_quantile(l, 0.5), lat_quantile(l, 0.99),
           lat_quantile(l, 0.999), l->max_ns, l->n);
    report_shape(f);
    printf("stopped:         %s\n", f->stopped);
}

static void json_fill(json_writer *j, const struct fill *f,
                      const struct args *a, int consistent)
{
    json_uint(j, "entries", f->entries);
    json_uint(j, "bytes_used", f->st.bytes_used);
    json_uint(j, "rss_peak_bytes", f->rss_peak);
    json_double(j, "bytes_per_entry", per_entry(f), 4);
    json_double(j, "seconds", f->seconds, 3);
    json_double(j, "inserts_per_sec", rate(f), 0);
    json_string(j, "stopped", f->stopped);
    json_string(j, "keys", a->random ? "random" : "seq");
    json_uint(j, "seed", a->seed);
    json_uint(j, "cap", a->cap);
    json_string(j, "mode", f->transactions ? "txn" : "no-txn");
    json_bool(j, "consistent", consistent);
    json_uint(j, "resumed_from", f->resumed);
    json_string(j, "file", a->file);
    json_uint(j, "page_size", f->st.page_size);
    json_uint(j, "node_bytes", f->st.node_bytes);
    json_uint(j, "node_entries", f->st.node_entries);
    json_uint(j, "bytes_mapped", f->st.bytes_mapped);
    json_uint(j, "bytes_free", f->st.bytes_free);
    json_uint(j, "cache_bytes", f->st.cache_bytes);
}

static void json_new(json_writer *j, const struct fill *f,
                     const struct args *a)
{
    const bonsai_map_info *m = &f->pr.info;
    const struct latency *l = &f->lat;
    json_string(j, "preset", a->preset ? a->preset->name : NULL);
    json_string(j, "compress", compress_name(a->compress));
    json_int(j, "compression_level", a->level);
    json_uint(j, "write_cache", write_cache_bytes(a));
    json_uint(j, "depth", m->depth);
    json_uint(j, "leaf_nodes", m->leaf_nodes);
    json_uint(j, "branch_nodes", m->branch_nodes);
    json_double(j, "leaf_fill", m->leaf_fill, 4);
    json_double(j, "compression_ratio", ratio(m), 4);
    json_uint(j, "raw_bytes", m->raw_bytes);
    json_uint(j, "stored_bytes", m->stored_bytes);
    json_uint(j, "page_bytes", m->page_bytes);
    json_uint(j, "lat_p50_ns", lat_quantile(l, 0.5));
    json_uint(j, "lat_p99_ns", lat_quantile(l, 0.99));
    json_uint(j, "lat_p999_ns", lat_quantile(l, 0.999));
    json_uint(j, "lat_max_ns", l->max_ns);
    json_uint(j, "lat_samples", l->n);
    json_double(j, "stat_seconds", f->stat_seconds, 3);
    json_double(j, "orig_entries", a->preset ? a->preset->orig_m * 1e6 : 0.0,
                0);
    json_double(j, "orig_scaled", orig_scaled(a), 0);
}

/* The report as one JSON line. */
static void report_json(const struct fill *f, const struct args *a,
                        int consistent)
{
    json_writer j;
    json_init(&j, stdout);
    json_begin_object(&j, NULL);
    json_fill(&j, f, a, consistent);
    json_new(&j, f, a);
    json_end_object(&j);
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
    tool_init(PROG, SYNOPSIS);
    struct args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    tool_set_quiet(a.quiet);
    if (a.file)
        store_name = a.file;
    static struct fill f;
    int consistent = 0;
    rc = open_store(&a, &f);
    if (!rc)
        rc = fill(&f, &a);
    if (!rc) {
        if (!a.quiet)
            report_text(&f, &a);
        rc = check(&f, &a, &consistent);
    }
    if (!rc && a.json)
        report_json(&f, &a, consistent);
    if (!rc && tool_flush_stdout())
        rc = TOOL_EXIT_FAIL; /* a report lost is a failed run */
    int crc = f.db ? bonsai_close(f.db) : 0;
    if (crc && !rc)
        rc = fail("bonsai_close", crc);
    if (!rc && !consistent)
        rc = EXIT_INCONSISTENT;
    return rc;
}

/*
 * bonsai-fill - the fill-until-full experiment.
 *
 * Opens a store (anonymous memory, or --file PATH created anew), creates
 * the u64 map "test" and inserts keys with empty values until the store
 * answers BONSAI_FULL or --count entries are in.  Keys are 0, 1, 2, ...
 * (--keys seq) or a seeded splitmix64 stream (--keys random; a repeated
 * key is skipped, not counted).  With transactions it commits every
 * 100,000 inserts; when FULL arrives the open transaction is aborted and
 * only committed entries count.
 *
 * It prints the count every 1,000,000 entries, then a report (entries,
 * bytes used, peak RSS, bytes per entry, time, rate, why it stopped), then
 * checks the map: bonsai_count, an ordered cursor walk and lookups of up
 * to SAMPLE_MAX keys kept while filling.  With --json the last line of
 * stdout is the report as one JSON object.
 *
 * Exit: 0 done and consistent, 1 an error, 2 bad usage, 3 inconsistent.
 * Uses only the public API (bonsai.h).
 */
#include "bonsai.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define EXIT_INCONSISTENT 3

#define TXN_BATCH 100000u
#define REPORT_EVERY 1000000u
#define SAMPLE_MAX 1024u

struct args {
    const char *file;      /* NULL: anonymous memory */
    uint64_t cap;
    int random;            /* 0 seq, 1 random */
    uint64_t seed;
    uint64_t count;        /* stop after this many entries */
    int transactions;      /* -1 library default */
    uint32_t node_bytes;   /* 0: library default */
    uint32_t node_entries;
    uint32_t page_size;
    int json;
};

/* Every stride-th inserted key, in insertion order: sample[i] is entry
 * number i * stride.  When the array fills, every other one is dropped and
 * the stride doubles, so it always spans the whole fill. */
struct sample {
    uint64_t key[SAMPLE_MAX];
    uint32_t n;
    uint64_t stride;
};

struct fill {
    bonsai_db *db;
    bonsai_map map;
    int transactions;      /* as the store reports it */
    uint64_t gen;          /* next seq key, or the PRNG state */
    uint64_t entries;      /* committed entries */
    uint64_t next_report;
    const char *stopped;   /* "full" or "count" */
    double seconds;
    uint64_t rss_peak;
    bonsai_stat st;
    struct sample sample;
};

/* ---- usage and arguments ------------------------------------------------ */

static void usage(FILE *out)
{
    fprintf(out,
        "usage: bonsai-fill [options]\n"
        "Inserts u64 keys with empty values into map \"test\" until the\n"
        "store is full (or --count entries), then reports and checks it.\n"
        "\n"
        "  --file PATH        store in PATH (created anew; default:\n"
        "                     anonymous memory)\n"
        "  --cap SIZE         max_size, with K, M or G (powers of 1024);\n"
        "                     default 1G\n"
        "  --keys seq|random  0,1,2,... or seeded random keys (default seq)\n"
        "  --seed N           PRNG seed for --keys random (default 1)\n"
        "  --count N          stop after N entries (default: until full)\n"
        "  --txn, --no-txn    transactions on or off (default: the\n"
        "                     library's: on for a file, off in memory);\n"
        "                     with --txn it commits every %u inserts\n"
        "  --node-bytes N     target encoded node size in bytes\n"
        "  --node-entries N   maximum entries in a node\n"
        "  --page-size N      allocation granule in bytes\n"
        "  --json             end with the report as one JSON line\n"
        "  --help             this text\n"
        "\n"
        "Exit status: 0 done and consistent, 1 error, 2 bad usage,\n"
        "3 consistency check failed.\n",
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

static int bad_usage(void)
{
    fprintf(stderr, "Try 'bonsai-fill --help'.\n");
    return EXIT_USAGE;
}

static int bad_value(const char *opt, const char *val)
{
    fprintf(stderr, "bonsai-fill: bad value for --%s: '%s'\n", opt, val);
    return bad_usage();
}

/* Fills *a from argv.  Returns 0, or an exit status (-1 for --help). */
static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option longopts[] = {
        {"file", required_argument, NULL, 'f'},
        {"cap", required_argument, NULL, 'c'},
        {"keys", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, 's'},
        {"count", required_argument, NULL, 'n'},
        {"txn", no_argument, NULL, 'T'},
        {"no-txn", no_argument, NULL, 'N'},
        {"node-bytes", required_argument, NULL, 'B'},
        {"node-entries", required_argument, NULL, 'E'},
        {"page-size", required_argument, NULL, 'P'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){.cap = UINT64_C(1) << 30, .seed = 1,
                       .count = UINT64_MAX, .transactions = -1};
    int c, idx = 0, bad = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        switch (c) {
        case 'f': a->file = optarg; break;
        case 'c': bad = parse_size(optarg, &a->cap); break;
        case 'k':
            bad = strcmp(optarg, "seq") && strcmp(optarg, "random");
            a->random = strcmp(optarg, "random") == 0;
            break;
        case 's': bad = parse_count(optarg, &a->seed); break;
        case 'n': bad = parse_count(optarg, &a->count); break;
        case 'T': a->transactions = 1; break;
        case 'N': a->transactions = 0; break;
        case 'B': bad = parse_u32(optarg, &a->node_bytes); break;
        case 'E': bad = parse_u32(optarg, &a->node_entries); break;
        case 'P': bad = parse_u32(optarg, &a->page_size); break;
        case 'j': a->json = 1; break;
        case 'h': usage(stdout); return -1;
        default: return bad_usage();
        }
        if (bad)
            return bad_value(longopts[idx].name, optarg);
    }
    if (optind < argc) {
        fprintf(stderr, "bonsai-fill: unexpected argument '%s'\n",
                argv[optind]);
        return bad_usage();
    }
    return 0;
}

/* ---- keys and samples ---------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t next_key(struct fill *f, const struct args *a)
{
    return a->random ? splitmix64(&f->gen) : f->gen++;
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

/* ---- measuring ------------------------------------------------------------ */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rss_peak_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

/* Prints the running count for every million entries now committed. */
static void progress(struct fill *f)
{
    while (f->entries >= f->next_report) {
        printf("%" PRIu64 "\n", f->next_report);
        fflush(stdout);
        f->next_report += REPORT_EVERY;
    }
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bonsai-fill: %s: %s\n", what, bonsai_strerror(rc));
    return EXIT_ERROR;
}

/* ---- opening ---------------------------------------------------------- */

static int open_store(const struct args *a, struct fill *f)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = a->cap;
    o.transactions = a->transactions;
    if (a->node_bytes)
        o.node_bytes = a->node_bytes;
    if (a->node_entries)
        o.node_entries = a->node_entries;
    if (a->page_size)
        o.page_size = a->page_size;
    if (a->file && unlink(a->file) != 0 && errno != ENOENT) {
        fprintf(stderr, "bonsai-fill: cannot replace %s: %s\n", a->file,
                strerror(errno));
        return EXIT_ERROR;
    }
    int rc = bonsai_open(a->file, &o, &f->db);
    if (rc)
        return fail("bonsai_open", rc);
    rc = bonsai_db_stat(f->db, &f->st);
    if (rc)
        return fail("bonsai_db_stat", rc);
    f->transactions = f->st.transactions;
    rc = bonsai_map_create(f->db, NULL, "test", BONSAI_KEY_U64, &f->map);
    if (rc)
        return fail("bonsai_map_create", rc);
    return 0;
}

/* ---- filling ---------------------------------------------------------- */

/* Inserts one new key in txn (NULL without transactions).  Returns 0 when
 * an entry was added, BONSAI_EXISTS for a repeated random key, or the
 * error. */
static int insert_one(struct fill *f, const struct args *a, bonsai_txn *txn,
                      uint64_t idx)
{
    uint64_t key = next_key(f, a);
    unsigned flags = a->random ? BONSAI_NOOVERWRITE : 0;
    int rc = bonsai_put_u64(txn, f->map, key, NULL, flags);
    if (rc == 0)
        sample_add(&f->sample, idx, key);
    return rc;
}

static int fill_direct(struct fill *f, const struct args *a)
{
    while (f->entries < a->count) {
        int rc = insert_one(f, a, NULL, f->entries);
        if (rc == BONSAI_FULL)
            break;
        if (rc == BONSAI_EXISTS)
            continue;
        if (rc)
            return fail("bonsai_put_u64", rc);
        f->entries++;
        progress(f);
    }
    f->stopped = f->entries < a->count ? "full" : "count";
    /* Write the write cache back so bytes_used counts every node. */
    int rc = bonsai_sync(f->db);
    return rc ? fail("bonsai_sync", rc) : 0;
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
        if (rc == 0)
            added++;
        else if (rc != BONSAI_EXISTS)
            break;
    }
    if (rc && rc != BONSAI_EXISTS) { /* abort: keep what was committed */
        bonsai_txn_abort(txn);
        sample_truncate(&f->sample, f->entries);
        if (rc != BONSAI_FULL)
            return fail("bonsai_put_u64", rc);
        f->stopped = "full";
        return 0;
    }
    rc = bonsai_txn_commit(txn);
    if (rc == BONSAI_FULL) {
        sample_truncate(&f->sample, f->entries);
        f->stopped = "full";
        return 0;
    }
    if (rc)
        return fail("bonsai_txn_commit", rc);
    f->entries += added;
    progress(f);
    if (f->entries >= a->count)
        f->stopped = "count";
    return 0;
}

static int fill_txn(struct fill *f, const struct args *a)
{
    while (!f->stopped) {
        int rc = fill_batch(f, a);
        if (rc)
            return rc;
    }
    return 0;
}

static int fill(struct fill *f, const struct args *a)
{
    f->gen = a->random ? a->seed : 0;
    f->next_report = REPORT_EVERY;
    f->sample.stride = 1;
    double t0 = now_seconds();
    int rc = f->transactions ? fill_txn(f, a) : fill_direct(f, a);
    f->seconds = now_seconds() - t0;
    f->rss_peak = rss_peak_bytes();
    if (rc)
        return rc;
    rc = bonsai_db_stat(f->db, &f->st);
    return rc ? fail("bonsai_db_stat", rc) : 0;
}

/* ---- checking --------------------------------------------------------- */

/* Says what failed; returns 0 so a check can "return inconsistent(...)". */
__attribute__((format(printf, 1, 2)))
static int inconsistent(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("consistency: FAILED: ");
    vprintf(fmt, ap);
    printf("\n");
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
    if ((rc = bonsai_count(txn, f->map, &count)))
        goto out;
    if (count != f->entries) {
        inconsistent("bonsai_count says %" PRIu64 ", inserted %" PRIu64,
                     count, f->entries);
        goto out;
    }
    if (check_walk(f, a, txn, &rc) && check_samples(f, txn, &rc)) {
        *consistent = 1;
        printf("consistency: ok (count, ordered walk of %" PRIu64
               " keys, %u lookups)\n", f->entries, f->sample.n);
    }
out:
    bonsai_txn_abort(txn);
    return rc ? fail("consistency check", rc) : 0;
}

/* ---- reporting ------------------------------------------------------------ */

static double per_entry(const struct fill *f)
{
    return f->entries ? (double)f->st.bytes_used / (double)f->entries : 0.0;
}

static double rate(const struct fill *f)
{
    return f->seconds > 0 ? (double)f->entries / f->seconds : 0.0;
}

static void report_text(const struct fill *f)
{
    printf("entries:         %" PRIu64 "\n", f->entries);
    printf("bytes used:      %" PRIu64 "\n", f->st.bytes_used);
    printf("peak RSS:        %" PRIu64 "\n", f->rss_peak);
    printf("bytes per entry: %.3f\n", per_entry(f));
    printf("seconds:         %.3f\n", f->seconds);
    printf("inserts per sec: %.0f\n", rate(f));
    printf("stopped:         %s\n", f->stopped);
}

/* Prints s as a JSON string. */
static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void report_json(const struct fill *f, const struct args *a,
                        int consistent)
{
    printf("{\"entries\":%" PRIu64 ",\"bytes_used\":%" PRIu64
           ",\"rss_peak_bytes\":%" PRIu64 ",\"bytes_per_entry\":%.4f"
           ",\"seconds\":%.3f,\"inserts_per_sec\":%.0f,\"stopped\":\"%s\"",
           f->entries, f->st.bytes_used, f->rss_peak, per_entry(f),
           f->seconds, rate(f), f->stopped);
    printf(",\"keys\":\"%s\",\"seed\":%" PRIu64 ",\"cap\":%" PRIu64
           ",\"mode\":\"%s\",\"consistent\":%s",
           a->random ? "random" : "seq", a->seed, a->cap,
           f->transactions ? "txn" : "no-txn",
           consistent ? "true" : "false");
    printf(",\"file\":");
    if (a->file)
        json_string(a->file);
    else
        printf("null");
    printf(",\"page_size\":%" PRIu32 ",\"node_bytes\":%" PRIu32
           ",\"node_entries\":%" PRIu32 ",\"bytes_mapped\":%" PRIu64
           ",\"bytes_free\":%" PRIu64 ",\"cache_bytes\":%" PRIu64 "}\n",
           f->st.page_size, f->st.node_bytes, f->st.node_entries,
           f->st.bytes_mapped, f->st.bytes_free, f->st.cache_bytes);
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
    struct args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    static struct fill f;
    int consistent = 0;
    rc = open_store(&a, &f);
    if (!rc)
        rc = fill(&f, &a);
    if (!rc) {
        report_text(&f);
        rc = check(&f, &a, &consistent);
    }
    if (!rc && a.json)
        report_json(&f, &a, consistent);
    int crc = bonsai_close(f.db);
    if (crc && !rc)
        rc = fail("bonsai_close", crc);
    if (!rc && !consistent)
        rc = EXIT_INCONSISTENT;
    return rc;
}

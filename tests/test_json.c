/* SPDX-License-Identifier: MIT */
/*
 * test_json.c - what the tools print with --json, read back with a
 * strict parser (json.h), and that parser itself:
 *
 *  - the parser reads valid documents to the right values and refuses
 *    invalid ones (so that a tool's output passing it means something);
 *  - bonsai-verify --json on a healthy store (ok, no problems) and on one
 *    with a leaf's bytes flipped (the leaf's map, page and byte, the
 *    sentence and its found and expected parts, ok false, exit 1);
 *  - bonsai-stat --json: the fields, the file's size, the maps, and a map
 *    name of quotes, control and high bytes escaped as documented;
 *  - bonsai-compact --json: the sizes are the files' sizes;
 *  - bonsai-load --json: the pairs of the input, per map and in all;
 *  - bonsai-fill --json --quiet: one line, the only one.
 *
 * Every tool's output must be exactly one line that parses.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bonsai.h"
#include "btree.h"
#include "internal.h"
#include "json.h"
#include "maps.h"
#include "toolrun.h"
#include "util.h"

/* .timeout: a hang guard, not a timing assertion */
TestSuite(json, .init = tu_setup, .fini = tu_teardown, .timeout = 120);

/* ---- reading JSON ------------------------------------------------------- */

static tj_value *parse(const char *text, size_t len, const char *ctx)
{
    char err[160];
    tj_value *v = tj_parse(text, len, err, sizeof err);
    cr_assert(v, "%s: not JSON: %s\n%.2000s", ctx, err, text);
    return v;
}

/* A tool's stdout: exactly one line, which parses. */
static tj_value *one_line(const tr_result *r)
{
    size_t n = strlen(r->out);
    cr_assert(n > 0 && r->out[n - 1] == '\n' &&
                  !memchr(r->out, '\n', n - 1),
              "%s: stdout is not one line:\n%.2000s", r->cmd, r->out);
    return parse(r->out, n, r->cmd);
}

static const tj_value *member(const tj_value *o, const char *key,
                              tj_type type)
{
    const tj_value *v = tj_get(o, key);
    cr_assert(v, "no \"%s\"", key);
    cr_assert(tj_type_of(v) == type, "\"%s\" is of type %d, not %d", key,
              tj_type_of(v), type);
    return v;
}

static uint64_t u64_of(const tj_value *o, const char *key)
{
    uint64_t u;
    cr_assert(tj_u64(member(o, key, TJ_NUMBER), &u) == 0,
              "\"%s\" is not a whole number", key);
    return u;
}

static double num_of(const tj_value *o, const char *key)
{
    double d;
    cr_assert(tj_num(member(o, key, TJ_NUMBER), &d) == 0);
    return d;
}

static const char *str_of(const tj_value *o, const char *key)
{
    return tj_str(member(o, key, TJ_STRING));
}

static int bool_of(const tj_value *o, const char *key)
{
    int b;
    cr_assert(tj_bool(member(o, key, TJ_BOOL), &b) == 0);
    return b;
}

/* ---- the parser --------------------------------------------------------- */

Test(json, parser_reads_valid_documents)
{
    static const char doc[] =
        " {\"a\" : [1, -2.5e3, true, false, null,\n"
        "  \"x\\u00e9\\ud83d\\ude00\\n\\\"\\\\\\/\\b\\f\\r\\t\", \"\xc3\xa9\"],"
        "\t\"b\":{}, \"c\":[], \"d\":{\"e\":[[0]]}}\r\n";
    tj_value *v = parse(doc, strlen(doc), "doc");
    cr_assert_eq(tj_type_of(v), TJ_OBJECT);
    cr_assert_eq(tj_len(v), 4);
    const tj_value *a = member(v, "a", TJ_ARRAY);
    cr_assert_eq(tj_len(a), 7);
    uint64_t u;
    double d;
    int b;
    cr_assert(tj_u64(tj_at(a, 0), &u) == 0 && u == 1);
    cr_assert(tj_num(tj_at(a, 1), &d) == 0 && d == -2500.0);
    cr_assert(tj_u64(tj_at(a, 1), &u) != 0, "-2.5e3 read as an integer");
    cr_assert(tj_bool(tj_at(a, 2), &b) == 0 && b == 1);
    cr_assert(tj_bool(tj_at(a, 3), &b) == 0 && b == 0);
    cr_assert(tj_is_null(tj_at(a, 4)));
    cr_assert_str_eq(tj_str(tj_at(a, 5)),
                     "x\xc3\xa9\xf0\x9f\x98\x80\n\"\\/\b\f\r\t");
    cr_assert_str_eq(tj_str(tj_at(a, 6)), "\xc3\xa9");
    cr_assert(tj_at(a, 7) == NULL);
    cr_assert_eq(tj_len(member(v, "b", TJ_OBJECT)), 0);
    cr_assert_eq(tj_len(member(v, "c", TJ_ARRAY)), 0);
    const tj_value *e = member(member(v, "d", TJ_OBJECT), "e", TJ_ARRAY);
    cr_assert(tj_u64(tj_at(tj_at(e, 0), 0), &u) == 0 && u == 0);
    cr_assert(tj_get(v, "z") == NULL && tj_get(a, "a") == NULL);
    tj_free(v);

    /* scalars at the top, the edges of numbers, a NUL kept */
    v = parse("-0", 2, "-0");
    cr_assert(tj_num(v, &d) == 0 && d == 0.0 && tj_u64(v, &u) != 0);
    tj_free(v);
    v = parse("1E+2", 4, "1E+2");
    cr_assert(tj_num(v, &d) == 0 && d == 100.0);
    tj_free(v);
    v = parse("18446744073709551615", 20, "2^64-1");
    cr_assert(tj_u64(v, &u) == 0 && u == UINT64_MAX);
    tj_free(v);
    v = parse("18446744073709551616", 20, "2^64");
    cr_assert(tj_u64(v, &u) != 0 && tj_num(v, &d) == 0);
    tj_free(v);
    v = parse("\"\\u0000a\"", 9, "NUL");
    cr_assert(tj_str_len(v) == 2 && memcmp(tj_str(v), "\0a", 2) == 0);
    tj_free(v);

    /* nesting up to the limit */
    char deep[2 * TJ_MAX_DEPTH + 1];
    memset(deep, '[', TJ_MAX_DEPTH);
    memset(deep + TJ_MAX_DEPTH, ']', TJ_MAX_DEPTH);
    v = parse(deep, 2 * TJ_MAX_DEPTH, "deepest");
    tj_free(v);
}

Test(json, parser_refuses_invalid_documents)
{
    static const char *const bad[] = {
        "", " ", "{", "}", "[", "]", "[1,]", "[,1]", "[1 2]", "[1]]",
        "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{\"a\":1 \"b\":2}", "{1:2}",
        "{\"a\":1,\"a\":2}", "01", "-01", "1.", ".5", "+1", "-", "1e", "1e+",
        "0x10", "1.5e", "NaN", "Infinity", "-Infinity", "1e400", "tru",
        "nul", "True", "'a'", "\"abc", "\"a\\x\"", "\"\\u12\"", "\"\\u12g4\"",
        "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\tb\"",
        "\"a\nb\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"",
        "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xc3\"", "[1] x",
        "{} {}", "1 2", "[1,\"a\"", "\"\\\"", "nulll",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[160];
        tj_value *v = tj_parse(bad[i], strlen(bad[i]), err, sizeof err);
        cr_assert(v == NULL, "accepted: %s", bad[i]);
        cr_assert(err[0], "refused without a reason: %s", bad[i]);
    }
    char err[160];
    cr_assert(tj_parse("1\0", 2, err, sizeof err) == NULL, "a NUL after");
    char deep[2 * TJ_MAX_DEPTH + 3];
    memset(deep, '[', TJ_MAX_DEPTH + 1);
    memset(deep + TJ_MAX_DEPTH + 1, ']', TJ_MAX_DEPTH + 1);
    cr_assert(tj_parse(deep, 2 * TJ_MAX_DEPTH + 2, err, sizeof err) == NULL,
              "nested past the limit");
}

/* ---- stores ------------------------------------------------------------- */

#define U64_ENTRIES 20
#define BYTE_ENTRIES 30

/* A store of a u64 map "m" and a byte-key map "b", each one leaf, and
 * map `extra` (NULL: none) of one entry, in one commit. */
static const char *make_store(const char *name, const char *extra)
{
    const char *path = tr_path(name);
    bonsai_options o;
    bonsai_options_init(&o);
    o.transactions = 1;
    o.max_size = 16u << 20;
    o.page_size = 1024; /* not the default: byte is page * this */
    bonsai_db *db = tu_open(path, &o);
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, 0, &txn));
    bonsai_map m = tu_map_create(db, txn, "m", BONSAI_KEY_U64);
    bonsai_map b = tu_map_create(db, txn, "b", BONSAI_KEY_BYTES);
    bonsai_val val = tu_val("value", 5);
    for (int i = 0; i < U64_ENTRIES; i++)
        TU_OK(bonsai_put_u64(txn, m, (uint64_t)i * 10, &val, 0));
    for (int i = 0; i < BYTE_ENTRIES; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "key-%03d", i);
        bonsai_val key = tu_val(k, (size_t)kl);
        TU_OK(bonsai_put(txn, b, &key, &val, 0));
    }
    if (extra) {
        bonsai_map x = tu_map_create(db, txn, extra, BONSAI_KEY_BYTES);
        bonsai_val key = tu_val("k", 1);
        TU_OK(bonsai_put(txn, x, &key, &val, 0));
    }
    TU_OK(bonsai_txn_commit(txn));
    TU_OK(bonsai_close(db));
    return path;
}

/* The page of map's root, which is its only leaf, and the page size. */
static uint64_t leaf_page(const char *path, const char *map,
                          uint32_t *page_size)
{
    bonsai_db *db = tu_open_ro(path);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    *page_size = st.page_size;
    bonsai_txn *txn;
    TU_OK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn));
    bonsai_map m;
    TU_OK(bonsai_map_open(db, txn, map, &m, NULL));
    bt_tree *t;
    TU_OK(maps_reader_tree(txn, m, &t));
    cr_assert_eq(t->depth, 1, "map %s is not one leaf", map);
    uint64_t pgno = t->root.ext.pgno;
    bonsai_txn_abort(txn);
    TU_OK(bonsai_close(db));
    return pgno;
}

/* Flips the bits of n bytes at off. */
static void smash(const char *path, uint64_t off, size_t n)
{
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    uint8_t b[64];
    cr_assert(n <= sizeof b);
    cr_assert(pread(fd, b, n, (off_t)off) == (ssize_t)n);
    for (size_t i = 0; i < n; i++)
        b[i] ^= 0xa5;
    cr_assert(pwrite(fd, b, n, (off_t)off) == (ssize_t)n);
    close(fd);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    cr_assert(stat(path, &st) == 0, "%s", path);
    return (uint64_t)st.st_size;
}

static uint64_t txn_of(const char *path)
{
    bonsai_db *db = tu_open_ro(path);
    bonsai_stat st;
    TU_OK(bonsai_db_stat(db, &st));
    TU_OK(bonsai_close(db));
    return st.txn_id;
}

/* ---- bonsai-verify ------------------------------------------------------ */

Test(json, verify_healthy_store)
{
    const char *path = make_store("ok.bonsai", NULL);
    for (int quick = 0; quick < 2; quick++) {
        tr_result r = quick ? TR_RUN("bonsai-verify", "--json", "--quick",
                                     path)
                            : TR_RUN("bonsai-verify", "--json", path);
        cr_assert_eq(r.status, 0, "%s: exit %d: %s", r.cmd, r.status, r.err);
        cr_assert_str_empty(r.err, "%s: %s", r.cmd, r.err);
        tj_value *v = one_line(&r);
        cr_assert_str_eq(str_of(v, "file"), path);
        cr_assert_eq(u64_of(v, "txn"), txn_of(path));
        cr_assert_eq(bool_of(v, "quick"), quick);
        cr_assert_eq(tj_len(member(v, "problems", TJ_ARRAY)), 0);
        cr_assert_eq(u64_of(v, "problem_count"), 0);
        cr_assert(bool_of(v, "ok"));
        cr_assert_eq(tj_len(v), 6, "fields other than the six");
        tj_free(v);
        tr_result_free(&r);
    }
}

/* A problem as --json gives it: every field, of its type; byte is
 * page * page_size; found and expected both strings, then the sentence's
 * parts, or both null. */
static void check_problem(const tj_value *p, uint32_t page_size)
{
    cr_assert_eq(tj_len(p), 6, "a problem of %zu fields", tj_len(p));
    str_of(p, "map");
    uint64_t page = u64_of(p, "page");
    cr_assert_eq(u64_of(p, "byte"), page * page_size);
    const char *what = str_of(p, "what");
    cr_assert(what[0], "an empty sentence");
    const tj_value *found = tj_get(p, "found"), *want = tj_get(p, "expected");
    cr_assert(found && want, "found or expected missing: %s", what);
    if (tj_is_null(found)) {
        cr_assert(tj_is_null(want), "found null, expected not: %s", what);
        return;
    }
    const char *f = tj_str(found), *e = tj_str(want);
    cr_assert(f && e && f[0] && e[0], "found or expected not a string: %s",
              what);
    char part[1200];
    snprintf(part, sizeof part, ": found %s (expected %s)", f, e);
    size_t n = strlen(what), m = strlen(part);
    cr_assert(n > m && strcmp(what + n - m, part) == 0,
              "the sentence does not end in its parts:\n%s\n%s", what, part);
}

Test(json, verify_damaged_store)
{
    const char *good = make_store("good.bonsai", NULL);
    const char *bad = tr_path("bad.bonsai");
    uint32_t ps;
    uint64_t pgno = leaf_page(good, "m", &ps);
    tr_copy_file(good, bad);
    smash(bad, pgno * ps + 40, 8); /* inside the leaf's image */

    tr_result r = TR_RUN("bonsai-verify", "--json", bad);
    cr_assert_eq(r.status, 1, "%s: exit %d: %s", r.cmd, r.status, r.err);
    tj_value *v = one_line(&r);
    cr_assert_str_eq(str_of(v, "file"), bad);
    cr_assert_not(bool_of(v, "quick"));
    cr_assert_not(bool_of(v, "ok"));
    const tj_value *probs = member(v, "problems", TJ_ARRAY);
    size_t n = tj_len(probs);
    cr_assert(n >= 1);
    cr_assert_eq(u64_of(v, "problem_count"), n);
    const tj_value *leaf = NULL;
    for (size_t i = 0; i < n; i++) {
        const tj_value *p = tj_at(probs, i);
        check_problem(p, ps);
        if (!leaf && strcmp(str_of(p, "map"), "m") == 0 &&
            u64_of(p, "page") == pgno)
            leaf = p;
    }
    cr_assert(leaf, "no problem names map m, page %" PRIu64 ":\n%s", pgno,
              r.out);
    cr_assert_eq(u64_of(leaf, "byte"), pgno * ps);
    /* a checksum that does not match: something found, something else
     * expected */
    cr_assert(tj_str(tj_get(leaf, "found")) && tj_str(tj_get(leaf,
                                                             "expected")),
              "%s", str_of(leaf, "what"));
    tj_free(v);
    tr_result_free(&r);

    /* the same problems as the text lines say, and the same exit */
    r = TR_RUN("bonsai-verify", bad);
    cr_assert_eq(r.status, 1);
    char summary[64];
    snprintf(summary, sizeof summary, ": %zu problem%s found\n", n,
             n == 1 ? "" : "s");
    cr_assert(strstr(r.out, summary), "%s", r.out);
    tr_result_free(&r);
}

/* ---- bonsai-stat -------------------------------------------------------- */

/* Map names are bytes: each byte above 0x7e (and below 0x20) is written
 * \u00XX, so it reads back as the code point of its number. */
static void as_code_points(const char *bytes, char *out, size_t cap)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)bytes; *p; p++) {
        cr_assert(n + 3 < cap);
        if (*p < 0x80) {
            out[n++] = (char)*p;
        } else {
            out[n++] = (char)(0xc0 | *p >> 6);
            out[n++] = (char)(0x80 | (*p & 0x3f));
        }
    }
    out[n] = 0;
}

Test(json, stat_fields_and_escaped_names)
{
    static const char odd[] = "q\"b\\s\x01\x7f\xe9\xc3\xa9";
    const char *path = make_store("s.bonsai", odd);
    tr_result r = TR_RUN("bonsai-stat", "--json", path);
    cr_assert_eq(r.status, 0, "%s: exit %d: %s", r.cmd, r.status, r.err);
    tj_value *v = one_line(&r);
    cr_assert_str_eq(str_of(v, "file"), path);
    cr_assert_eq(u64_of(v, "file_bytes"), file_size(path));
    cr_assert_eq(u64_of(v, "txn_id"), txn_of(path));
    uint64_t page = u64_of(v, "page_size");
    cr_assert(page >= 64 && (page & (page - 1)) == 0);
    cr_assert_eq(u64_of(v, "problems"), 0);
    cr_assert(tj_is_null(tj_get(v, "list_error")));
    cr_assert_str_eq(str_of(v, "compression"), "none");
    static const char *const counts[] = {
        "format_version", "cap", "node_bytes", "node_entries", "used_bytes",
        "head_bytes", "map_node_bytes", "catalog_bytes", "overflow_bytes",
        "free_bytes", "free_extents", "largest_free_bytes", "end_bytes",
        "readers", "compression_level", "rounding_waste",
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        u64_of(v, counts[i]);
    cr_assert_eq(u64_of(v, "used_bytes"),
                 u64_of(v, "head_bytes") + u64_of(v, "map_node_bytes") +
                     u64_of(v, "catalog_bytes") +
                     u64_of(v, "overflow_bytes"));

    /* the maps in name order: "b", "m", then the odd name (its first
     * byte, 'q', sorts last) */
    const tj_value *maps = member(v, "maps", TJ_ARRAY);
    cr_assert_eq(tj_len(maps), 3);
    char decoded[64];
    as_code_points(odd, decoded, sizeof decoded);
    static const struct {
        const char *kind;
        uint64_t entries;
    } want[] = {{"bytes", BYTE_ENTRIES}, {"u64", U64_ENTRIES}, {"bytes", 1}};
    const char *names[] = {"b", "m", decoded};
    for (size_t i = 0; i < 3; i++) {
        const tj_value *m = tj_at(maps, i);
        cr_assert_str_eq(str_of(m, "name"), names[i]);
        cr_assert_str_eq(str_of(m, "kind"), want[i].kind);
        cr_assert_eq(u64_of(m, "entries"), want[i].entries);
        cr_assert_eq(u64_of(m, "depth"), 1);
        num_of(m, "leaf_fill");
        num_of(m, "bytes_per_entry");
        cr_assert(tj_is_null(tj_get(m, "error")));
    }
    /* what is escaped, as written */
    cr_assert(strstr(r.out, "\"q\\\"b\\\\s\\u0001\\u007f\\u00e9\\u00c3\\u00a9\""),
              "%s", r.out);
    tj_free(v);
    tr_result_free(&r);
}

/* ---- bonsai-compact ----------------------------------------------------- */

Test(json, compact_sizes_are_the_files)
{
    const char *src = make_store("src.bonsai", NULL);
    const char *dst = tr_path("dst.bonsai");
    for (int quiet = 0; quiet < 2; quiet++) {
        tr_result r = quiet ? TR_RUN("bonsai-compact", "--json", "--quiet",
                                     src, dst)
                            : TR_RUN("bonsai-compact", "--json", src, dst);
        cr_assert_eq(r.status, 0, "%s: exit %d: %s", r.cmd, r.status, r.err);
        tj_value *v = one_line(&r);
        cr_assert_eq(tj_len(v), 6);
        cr_assert_str_eq(str_of(v, "src"), src);
        cr_assert_str_eq(str_of(v, "dst"), dst);
        uint64_t sb = u64_of(v, "src_bytes"), db = u64_of(v, "dst_bytes");
        cr_assert_eq(sb, file_size(src));
        cr_assert_eq(db, file_size(dst));
        cr_assert(db < sb, "the copy is not smaller: %" PRIu64 " of %"
                  PRIu64, db, sb);
        double ratio = num_of(v, "ratio");
        cr_assert(fabs(ratio - (double)db / (double)sb) < 1e-4,
                  "ratio %f for %" PRIu64 " / %" PRIu64, ratio, db, sb);
        double s = num_of(v, "seconds");
        cr_assert(s >= 0 && s < TR_HANG_SECONDS, "seconds %f", s);
        tj_free(v);
        tr_result_free(&r);
    }
}

/* ---- bonsai-load -------------------------------------------------------- */

/* A dump block of map name with n pairs, keys from `from` on (hex). */
static size_t put_block(char *out, size_t cap, const char *name, int from,
                        int n)
{
    size_t at = (size_t)snprintf(out, cap, "VERSION=3\nformat=bytevalue\n"
                                 "database=%s\ntype=btree\nHEADER=END\n",
                                 name);
    for (int i = from; i < from + n; i++)
        at += (size_t)snprintf(out + at, cap - at, " 6b%02x\n 76\n", i);
    at += (size_t)snprintf(out + at, cap - at, "DATA=END\n");
    cr_assert(at < cap);
    return at;
}

Test(json, load_counts_the_input)
{
    /* "a" twice, the second block overwriting one key of the first: the
     * pairs read count, not the keys the map ends with */
    char text[4096];
    size_t n = put_block(text, sizeof text, "a", 0, 3);
    n += put_block(text + n, sizeof text - n, "b", 0, 5);
    n += put_block(text + n, sizeof text - n, "a", 2, 2);
    const char *in = tr_path("in.dump"), *st = tr_path("l.bonsai");
    tr_write_bytes(in, text, n);
    tr_result r = TR_RUN("bonsai-load", "--json", "-f", in, st);
    cr_assert_eq(r.status, 0, "%s: exit %d: %s", r.cmd, r.status, r.err);
    tj_value *v = one_line(&r);
    cr_assert_eq(tj_len(v), 4);
    cr_assert_str_eq(str_of(v, "file"), st);
    const tj_value *maps = member(v, "maps", TJ_ARRAY);
    cr_assert_eq(tj_len(maps), 2);
    cr_assert_str_eq(str_of(tj_at(maps, 0), "name"), "a");
    cr_assert_eq(u64_of(tj_at(maps, 0), "entries"), 5);
    cr_assert_str_eq(str_of(tj_at(maps, 1), "name"), "b");
    cr_assert_eq(u64_of(tj_at(maps, 1), "entries"), 5);
    cr_assert_eq(u64_of(v, "entries"), 10);
    double s = num_of(v, "seconds");
    cr_assert(s >= 0 && s < TR_HANG_SECONDS, "seconds %f", s);
    tj_free(v);
    tr_result_free(&r);

    /* plain text: the one map -s names */
    static const char plain[] = "k1\nv1\nk2\nv2\nk3\nv3\n";
    tr_write_bytes(in, plain, strlen(plain));
    r = TR_RUN("bonsai-load", "--json", "-T", "-s", "t", "-f", in, st);
    cr_assert_eq(r.status, 0, "%s: exit %d: %s", r.cmd, r.status, r.err);
    v = one_line(&r);
    maps = member(v, "maps", TJ_ARRAY);
    cr_assert_eq(tj_len(maps), 1);
    cr_assert_str_eq(str_of(tj_at(maps, 0), "name"), "t");
    cr_assert_eq(u64_of(tj_at(maps, 0), "entries"), 3);
    cr_assert_eq(u64_of(v, "entries"), 3);
    tj_free(v);
    tr_result_free(&r);

    /* a failed load prints no object */
    static const char broken[] = "VERSION=3\nHEADER=END\n 6b\n";
    tr_write_bytes(in, broken, strlen(broken));
    r = TR_RUN("bonsai-load", "--json", "-s", "x", "-f", in, st);
    cr_assert_eq(r.status, 1);
    cr_assert_str_empty(r.out, "%s: %s", r.cmd, r.out);
    tr_result_free(&r);
}

/* ---- bonsai-fill -------------------------------------------------------- */

Test(json, fill_json_quiet_is_one_line)
{
    tr_result r = TR_RUN("bonsai-fill", "--count", "3000", "--json",
                         "--quiet");
    cr_assert_eq(r.status, 0, "%s: exit %d: %s", r.cmd, r.status, r.err);
    cr_assert_str_empty(r.err, "%s: %s", r.cmd, r.err);
    tj_value *v = one_line(&r);
    cr_assert_eq(u64_of(v, "entries"), 3000);
    cr_assert_str_eq(str_of(v, "stopped"), "count");
    cr_assert(bool_of(v, "consistent"));
    cr_assert(tj_is_null(tj_get(v, "file")));
    cr_assert(tj_is_null(tj_get(v, "preset")));
    cr_assert_str_eq(str_of(v, "keys"), "seq");
    num_of(v, "bytes_per_entry");
    u64_of(v, "lat_samples");
    tj_free(v);
    tr_result_free(&r);

    /* --quiet alone: nothing on stdout */
    r = TR_RUN("bonsai-fill", "--count", "3000", "--quiet");
    cr_assert_eq(r.status, 0);
    cr_assert_str_empty(r.out, "%s: %s", r.cmd, r.out);
    tr_result_free(&r);
}

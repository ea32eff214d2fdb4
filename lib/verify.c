/* SPDX-License-Identifier: MIT */
/*
 * verify.c - the inspection walk: bonsai_verify, and bonsai_space_stat
 * (the space figures of bonsai-stat).
 *
 * It checks one state of the store and says where each problem is:
 *  - transaction mode: the last commit, through a read snapshot of its own
 *    (the store may be open read-only, and writers may go on meanwhile);
 *  - no-transaction mode: the state the store has written.  Cached
 *    changes and map records are written back first, as bonsai_sync does
 *    (on a file that writes a meta slot), unless the store is read-only;
 *    if that fails, it is the one problem reported besides the head
 *    area's, since nodes may have been rewritten in place since the last
 *    write-back.
 *
 * The checks, in order (format.md, "Checks on untrusted bytes"):
 *  1. files: the head area: the header (magic, checksum, fields, the
 *     settings the store runs with), both meta slots (magic, checksum,
 *     reserved bytes, end within the file; the older one holds the commit
 *     before the newer; the newer one is the state checked), and zero
 *     bytes everywhere else in the head area;
 *  2. every tree, the catalog first, then each map it lists: every extent
 *     inside [first_pgno, end) and referenced once; every image's
 *     envelope (the header's codec, a raw length within the store's
 *     limit), header, checksum and sections (a full decode); leaves
 *     exactly on the bottom level; keys strictly increasing within a
 *     node, within the separators the parents give, and across leaves;
 *     zero bytes after each image to the end of its run; entry counts
 *     against the record (the meta slot for the catalog); catalog names
 *     and records; overflow values (reference, run, type, length, the
 *     CRC of the value bytes) and the record's overflow flag;
 *  3. free space, derived as at open: every page below end that no tree
 *     reaches is free.  In no-transaction mode, when the write-back above
 *     succeeded, the allocator's free pages must be exactly those.
 * BONSAI_VERIFY_QUICK keeps 1, the extents, the branches and the leaf
 * headers, first and last keys and overflow references of 2, and 3: it
 * skips leaf checksums and full decodes, image tails and value CRCs.
 *
 * A problem is reported and the walk goes on; a node that cannot be read
 * is not descended into (its subtree's pages then count as free, and the
 * tree's entry count will differ).  Only running out of memory or failing
 * to read the file stops the walk.  Nothing here prints: each problem is
 * formatted into a buffer and handed to the caller's callback, as one
 * sentence (bonsai_problem_fn) or in parts (verify.h): what it is about
 * (the subject), what was found and what was expected, or, for the few
 * problems that are not a value where another belonged, a note.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "btree.h"
#include "bytes.h"
#include "checksum.h"
#include "ovf.h"
#include "txn.h"
#include "verify.h"

#define PART_MAX 384u /* a subject, found or expected part */
#define MSG_MAX (3 * PART_MAX + 32)
#define KEY_SHOW 24u /* bytes of a byte key a message shows */


/* A key copied out of a node, to outlive it. */
typedef struct vkey {
    uint64_t u;
    uint32_t len;
    uint8_t b[BONSAI_MAX_KEY];
} vkey;

/* A map the catalog lists. */
typedef struct vrec {
    char *name;
    bt_tree t;
} vrec;

/* One node as read: its stored bytes and its raw image. */
typedef struct vnode {
    bn_ext e;
    const uint8_t *stored;
    size_t avail;          /* bytes of its run */
    uint32_t stored_len;   /* bytes the stored image takes */
    const uint8_t *img;    /* the raw image (unpacked if packed) */
    size_t img_avail;
    bn_info info;
} vnode;

typedef struct vwalk {
    bonsai_db *db;
    unsigned flags;
    bonsai_problem_fn fn;
    verify_problem_fn in_parts;
    bonsai_progress_fn progress;
    void *ctx;
    uint64_t problems;
    bx_meta m;            /* the state checked */
    int current;          /* m is the allocator's state too */
    int stale;            /* no-txn write-back failed: m is out of date */
    bonsai_txn *snap;     /* transaction mode: the snapshot read */
    pk_cache uc;
    bt_rd rd;
    pageset used;         /* the pages of [first_pgno, end) met */
    /* the tree being walked */
    const char *map;      /* its name; "" for the catalog and the file */
    const bt_tree *t;
    int catalog;
    uint64_t entries;     /* in the leaves read */
    int unread;           /* some node could not be read */
    int has_prev;
    vkey prev;            /* the last key of the previous leaf */
    uint8_t kbuf[2][BONSAI_MAX_KEY];
    /* what the catalog lists */
    vrec *recs;
    size_t nrecs, cap_recs;
    /* tallies */
    uint64_t pages_done, next_tick, total;
    uint64_t node_pages, cat_pages, value_pages;
    uint64_t free_pages, free_runs, largest_run;
    /* the parts of the problem being reported */
    char subject[PART_MAX], found[PART_MAX], expected[PART_MAX];
} vwalk;

/* ---- reporting ---------------------------------------------------------- */

/* Hands a problem to the caller: found and expected, or a note (found
 * and expected NULL).  The sentence is made here only, in one form. */
static void report(vwalk *w, uint64_t pgno, const char *subject,
                   const char *found, const char *expected, const char *note)
{
    char what[MSG_MAX];
    if (found)
        snprintf(what, sizeof what, "%s: found %s (expected %s)", subject,
                 found, expected);
    else
        snprintf(what, sizeof what, "%s: %s", subject, note);
    w->problems++;
    if (w->fn)
        w->fn(w->ctx, w->map, pgno, what);
    if (w->in_parts)
        w->in_parts(w->ctx, &(verify_problem){.map = w->map, .pgno = pgno,
                                              .what = what, .found = found,
                                              .expected = expected});
}

/* A problem at page pgno (0: none) of the tree walked: what it is about,
 * what was found there and what was expected instead. */
static void problem(vwalk *w, uint64_t pgno, const char *subject,
                    const char *found, const char *expected)
{
    report(w, pgno, subject, found, expected, NULL);
}

/* A problem that is no value found where another was expected: the
 * sentence is "SUBJECT: NOTE". */
static void problem_note(vwalk *w, uint64_t pgno, const char *subject,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void problem_note(vwalk *w, uint64_t pgno, const char *subject,
                         const char *fmt, ...)
{
    char note[PART_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, sizeof note, fmt, ap);
    va_end(ap);
    report(w, pgno, subject, NULL, NULL, note);
}

/* The parts of a problem, printf-formatted into the walk's buffers: one
 * of each may be in use at a time. */
static const char *vpart(char *buf, const char *fmt, va_list ap)
{
    vsnprintf(buf, PART_MAX, fmt, ap);
    return buf;
}

static const char *subject(vwalk *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *found(vwalk *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *expected(vwalk *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static const char *subject(vwalk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpart(w->subject, fmt, ap);
    va_end(ap);
    return w->subject;
}

static const char *found(vwalk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpart(w->found, fmt, ap);
    va_end(ap);
    return w->found;
}

static const char *expected(vwalk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpart(w->expected, fmt, ap);
    va_end(ap);
    return w->expected;
}

static void tick(vwalk *w)
{
    if (!w->progress || w->pages_done < w->next_tick)
        return;
    uint64_t step = w->total / 200 > 1024 ? w->total / 200 : 1024;
    w->next_tick = w->pages_done + step;
    w->progress(w->ctx, w->pages_done, w->total);
}

/* A key for a message: a number, a quoted string, or hex. */
static const char *show_key(unsigned kind, bn_key k, char *buf, size_t cap)
{
    if (kind == BONSAI_KEY_U64) {
        snprintf(buf, cap, "%" PRIu64, k.u);
        return buf;
    }
    uint32_t n = k.len < KEY_SHOW ? k.len : KEY_SHOW, printable = 1;
    for (uint32_t i = 0; i < n; i++)
        printable &= k.b[i] >= 0x20 && k.b[i] < 0x7f && k.b[i] != '"';
    size_t at = (size_t)snprintf(buf, cap, printable ? "\"" : "0x");
    for (uint32_t i = 0; i < n && at + 4 < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, printable ? "%c" : "%02x",
                               k.b[i]);
    snprintf(buf + at, cap - at, "%s%s", printable ? "\"" : "",
             k.len > n ? "..." : "");
    return buf;
}

static const char *node_name(const vnode *v)
{
    return v->info.type == BN_TYPE_LEAF ? "leaf" : "branch";
}

/* ---- keys --------------------------------------------------------------- */

/* a against b in the order of kind: < 0, 0 or > 0. */
static int key_order(unsigned kind, bn_key a, bn_key b)
{
    if (kind == BONSAI_KEY_U64)
        return a.u < b.u ? -1 : a.u > b.u;
    return key_cmp(a.b, a.len, b.b, b.len);
}

static void key_copy(vkey *dst, unsigned kind, bn_key k)
{
    dst->u = k.u;
    dst->len = kind == BONSAI_KEY_BYTES ? k.len : 0;
    if (dst->len)
        memcpy(dst->b, k.b, dst->len);
}

static bn_key key_of(const vkey *v)
{
    return (bn_key){.u = v->u, .b = v->b, .len = v->len};
}

/* The keys a node must lie within: lo <= k < hi (NULL: unbounded). */
typedef struct bounds {
    const bn_key *lo, *hi;
} bounds;

/* Checks a node's first and last key against its bounds and, for a leaf,
 * its first key against the previous leaf's last. */
static void check_range(vwalk *w, const vnode *v, bn_key first, bn_key last,
                        bounds b)
{
    char s1[80], s2[80];
    unsigned kind = w->t->kind;
    if (b.lo && key_order(kind, first, *b.lo) < 0)
        problem(w, v->e.pgno, node_name(v),
                found(w, "first key %s", show_key(kind, first, s1,
                                                  sizeof s1)),
                expected(w, "a key of at least %s, the separator its "
                         "parent gives", show_key(kind, *b.lo, s2,
                                                  sizeof s2)));
    if (b.hi && key_order(kind, last, *b.hi) >= 0)
        problem(w, v->e.pgno, node_name(v),
                found(w, "last key %s", show_key(kind, last, s1,
                                                 sizeof s1)),
                expected(w, "a key below %s, the next separator of its "
                         "parent", show_key(kind, *b.hi, s2, sizeof s2)));
    if (v->info.type != BN_TYPE_LEAF)
        return;
    bn_key prev = key_of(&w->prev);
    if (w->has_prev && key_order(kind, first, prev) <= 0)
        problem(w, v->e.pgno, "leaf",
                found(w, "first key %s", show_key(kind, first, s1,
                                                  sizeof s1)),
                expected(w, "a key after %s, the last key of the leaf "
                         "before it", show_key(kind, prev, s2, sizeof s2)));
    key_copy(&w->prev, kind, last);
    w->has_prev = 1;
}

/* ---- extents ------------------------------------------------------------ */

/* Marks e's pages used; 0 when they were inside the store and not yet
 * referenced, else a problem is reported and -1 returned. */
static int claim(vwalk *w, bn_ext e, uint64_t from, const char *what)
{
    uint64_t first = w->db->first_pgno, end = w->m.end;
    if (!ps_inside(&w->used, e)) {
        problem(w, from, what,
                found(w, "pages %" PRIu64 "+%" PRIu32, e.pgno, e.npages),
                expected(w, "pages within [%" PRIu64 ", %" PRIu64 "), the "
                         "store's pages", first, end));
        return -1;
    }
    for (uint64_t p = e.pgno; p < e.pgno + e.npages; p++)
        if (ps_has(&w->used, p)) {
            problem(w, from, what,
                    found(w, "pages %" PRIu64 "+%" PRIu32 ", whose page %"
                          PRIu64 " is already referenced by another node or "
                          "value", e.pgno, e.npages, p),
                    expected(w, "pages referenced once"));
            return -1;
        }
    for (uint64_t p = e.pgno; p < e.pgno + e.npages; p++)
        ps_add(&w->used, p);
    w->pages_done += e.npages;
    tick(w);
    return 0;
}

/* ---- reading a node ----------------------------------------------------- */

static uint32_t image_crc(const uint8_t *img, uint32_t length)
{
    static const uint8_t zero[4];
    uint32_t crc = bonsai_crc32c(0, img, 8);
    crc = bonsai_crc32c(crc, zero, 4);
    return bonsai_crc32c(crc, img + 12, length - 12);
}

static const char *codec_name(unsigned codec)
{
    return codec == BONSAI_COMPRESS_LZ4    ? "lz4"
           : codec == BONSAI_COMPRESS_ZLIB ? "zlib"
                                           : "no compression";
}

/* Says why pk_check refused a packed image. */
static void packed_problem(vwalk *w, const vnode *v)
{
    const uint8_t *p = v->stored;
    uint32_t len = v->avail >= PK_HEADER ? get_le32(p + 4) : 0;
    uint32_t raw = v->avail >= PK_HEADER ? get_le32(p + 12) : 0;
    uint32_t max_raw = w->db->pk.max_raw;
    const char *what = "packed image";
    if (len < PK_HEADER || len > v->avail || raw < BN_HEADER_SIZE)
        problem(w, v->e.pgno, what,
                found(w, "length %" PRIu32 ", raw length %" PRIu32, len,
                      raw),
                expected(w, "a length of %u to %zu bytes (its run) and a "
                         "raw length of at least %u", PK_HEADER, v->avail,
                         BN_HEADER_SIZE));
    else if (raw > max_raw)
        problem(w, v->e.pgno, what, found(w, "raw length %" PRIu32, raw),
                expected(w, "at most %" PRIu32 " bytes, what a node may "
                         "take in this store (node_bytes %" PRIu32 ")",
                         max_raw, w->db->opt.node_bytes));
    else if (p[16] != BONSAI_COMPRESS_LZ4 && p[16] != BONSAI_COMPRESS_ZLIB)
        problem(w, v->e.pgno, what, found(w, "codec %u", p[16]),
                expected(w, "codec %u (lz4) or %u (zlib)",
                         BONSAI_COMPRESS_LZ4, BONSAI_COMPRESS_ZLIB));
    else if (p[16] != w->db->pk.codec)
        problem(w, v->e.pgno, what, found(w, "codec %s", codec_name(p[16])),
                expected(w, "%s, as the store's header says",
                         codec_name(w->db->pk.codec)));
    else
        problem(w, v->e.pgno, what,
                found(w, "checksum 0x%08" PRIx32 " stored",
                      get_le32(p + 8)),
                expected(w, "0x%08" PRIx32 ", the checksum of its bytes",
                         image_crc(p, len)));
}

/* The raw image of a stored one: itself, or unpacked.  *ok = 0 after a
 * problem; the result is an error only when the walk must stop. */
static int unpack(vwalk *w, vnode *v, int *ok)
{
    v->img = v->stored;
    v->img_avail = v->avail;
    if (v->avail < BN_HEADER_SIZE || !pk_is_packed(v->stored))
        return 0;
    uint32_t raw;
    if (pk_check(v->stored, v->avail, &w->db->pk, &raw)) {
        packed_problem(w, v);
        *ok = 0;
        return 0;
    }
    v->stored_len = get_le32(v->stored + 4);
    int rc = pk_view(w->rd.uc, &w->db->pk, v->e.pgno, v->stored, v->avail,
                     &v->img, &v->img_avail);
    if (rc == BONSAI_CORRUPT) {
        problem(w, v->e.pgno, "packed image",
                found(w, "a body that does not unpack"),
                expected(w, "the %" PRIu32 "-byte raw image its header "
                         "describes", raw));
        *ok = 0;
        return 0;
    }
    return rc;
}

/* Says why bn_img_check refused a header. */
static void header_problem(vwalk *w, const vnode *v)
{
    const uint8_t *p = v->img;
    if (v->img_avail < BN_HEADER_SIZE) {
        problem(w, v->e.pgno, "node",
                found(w, "a run of %zu bytes", v->img_avail),
                expected(w, "at least %u bytes, a header's",
                         BN_HEADER_SIZE));
        return;
    }
    problem(w, v->e.pgno, "node header",
            found(w, "type %u, flags 0x%02x, count %u, length %" PRIu32
                  ", keys_len %" PRIu32 " in %zu bytes", p[0], p[1],
                  get_le16(p + 2), get_le32(p + 4), get_le32(p + 12),
                  v->img_avail),
            expected(w, "type 1 or 2, flags of a %s tree, lengths within "
                     "the image", w->t->kind == BONSAI_KEY_U64 ? "u64"
                                                               : "byte-key"));
}

/* Reads the node at e: envelope, header, and that its type fits level. */
static int read_node(vwalk *w, bn_ext e, unsigned level, vnode *v, int *ok)
{
    const bonsai_db *db = w->db;
    memset(v, 0, sizeof *v);
    v->e = e;
    v->stored = db->rg.base + e.pgno * db->page_size;
    v->avail = (size_t)e.npages * db->page_size;
    *ok = 1;
    int rc = unpack(w, v, ok);
    if (rc || !*ok)
        return rc;
    if (bn_img_check(v->img, v->img_avail, w->t->kind, 0, &v->info)) {
        header_problem(w, v);
        *ok = 0;
        return 0;
    }
    if (v->img == v->stored)
        v->stored_len = v->info.length;
    if ((v->info.type == BN_TYPE_LEAF) != (level == 1)) {
        /* a branch where leaves must be: a depth too small, which free
         * space at open would trust (it refuses a read-write open) */
        problem(w, e.pgno, subject(w, "level %u", level),
                found(w, "a %s", node_name(v)),
                expected(w, "%s", level == 1
                         ? "a leaf: the depth recorded is below the "
                           "tree's, and a read-write open refuses the store"
                         : "a branch"));
        *ok = 0;
    }
    return 0;
}

/* The first i >= 1 whose key does not follow key i-1, or 0. */
static uint32_t order_break(vwalk *w, const vnode *v)
{
    unsigned kind = w->t->kind;
    bn_key a, b;
    if (v->info.count < 2 ||
        bn_img_key(v->img, &v->info, kind, 0, w->kbuf[0], &a))
        return 0;
    for (uint32_t i = 1; i < v->info.count; i++) {
        if (bn_img_key(v->img, &v->info, kind, i, w->kbuf[i & 1], &b))
            return 0;
        if (key_order(kind, a, b) >= 0)
            return i;
        a = b;
    }
    return 0;
}

/* Says why bn_decode refused an image whose header was fine. */
static void decode_problem(vwalk *w, const vnode *v)
{
    uint32_t stored = get_le32(v->img + 8);
    uint32_t crc = image_crc(v->img, v->info.length);
    if (crc != stored) {
        problem(w, v->e.pgno, node_name(v),
                found(w, "checksum 0x%08" PRIx32 " stored", stored),
                expected(w, "0x%08" PRIx32 ", the checksum of the image",
                         crc));
        return;
    }
    uint32_t i = order_break(w, v);
    if (i) {
        problem(w, v->e.pgno, node_name(v),
                found(w, "key %" PRIu32 " not above key %" PRIu32, i,
                      i - 1),
                expected(w, "keys that strictly increase"));
        return;
    }
    problem(w, v->e.pgno, node_name(v),
            found(w, "a malformed key or value section"),
            expected(w, "lengths, varints, restart offsets and value forms "
                     "within the image"));
}

/* Decodes v into n (bn_init'ed).  *ok = 0 after a problem. */
static int decode(vwalk *w, const vnode *v, bn_node *n, int *ok)
{
    int rc = bn_decode(v->img, v->img_avail, w->t->kind, n);
    if (rc == BONSAI_CORRUPT) {
        decode_problem(w, v);
        *ok = 0;
        return 0;
    }
    return rc;
}

/* Offset of the first non-zero byte of p[0, n), or n. */
static size_t first_nonzero(const uint8_t *p, size_t n)
{
    static const uint8_t zero[256];
    size_t i = 0;
    while (n - i >= sizeof zero && memcmp(p + i, zero, sizeof zero) == 0)
        i += sizeof zero;
    while (i < n && !p[i])
        i++;
    return i;
}

/* The writer zero-fills its run after an image. */
static void check_tail(vwalk *w, const vnode *v)
{
    size_t i = v->stored_len + first_nonzero(v->stored + v->stored_len,
                                             v->avail - v->stored_len);
    if (i < v->avail)
        problem(w, v->e.pgno, node_name(v),
                found(w, "0x%02x at byte %zu of its run, after the %"
                      PRIu32 "-byte image", v->stored[i], i, v->stored_len),
                expected(w, "zero bytes after the image"));
}

/* ---- overflow values ---------------------------------------------------- */

static void check_overflow_run(vwalk *w, bn_ext e, uint64_t vlen,
                               const char *what)
{
    const uint8_t *p = w->db->rg.base + e.pgno * w->db->page_size;
    uint64_t room = (uint64_t)e.npages * w->db->page_size - OVF_HEADER;
    uint64_t want = (OVF_HEADER + vlen + w->db->page_size - 1) /
                    w->db->page_size;
    uint64_t max_value = BONSAI_MAX_VALUE;
    if (p[0] != OVF_TYPE || p[1] || p[2] || p[3])
        problem(w, e.pgno, what,
                found(w, "header bytes %02x %02x %02x %02x", p[0], p[1],
                      p[2], p[3]),
                expected(w, "type 3 and three zero bytes"));
    else if (get_le64(p + 8) != vlen)
        problem(w, e.pgno, what,
                found(w, "stored length %" PRIu64, get_le64(p + 8)),
                expected(w, "%" PRIu64 ", the length the reference gives",
                         vlen));
    else if (vlen > room || vlen > BONSAI_MAX_VALUE)
        problem(w, e.pgno, what,
                found(w, "%" PRIu64 " bytes in a run of %" PRIu32 " pages",
                      vlen, e.npages),
                expected(w, "at most %" PRIu64 " bytes",
                         room < max_value ? room : max_value));
    else if (e.npages != want)
        problem(w, e.pgno, what,
                found(w, "a run of %" PRIu32 " pages", e.npages),
                expected(w, "%" PRIu64 " pages for %" PRIu64 " bytes", want,
                         vlen));
    else if (!(w->flags & BONSAI_VERIFY_QUICK) &&
             bonsai_crc32c(0, p + OVF_HEADER, vlen) != get_le32(p + 4))
        problem(w, e.pgno, what,
                found(w, "checksum of the %" PRIu64 " value bytes stored as "
                      "0x%08" PRIx32, vlen, get_le32(p + 4)),
                expected(w, "0x%08" PRIx32 ", the checksum of those bytes",
                         bonsai_crc32c(0, p + OVF_HEADER, vlen)));
}

/* Entry idx of the leaf at pgno holds the overflow reference ref. */
static void check_overflow(vwalk *w, uint64_t pgno, uint32_t idx,
                           const uint8_t *ref, uint32_t len)
{
    char what[96];
    snprintf(what, sizeof what, "overflow value of entry %" PRIu32
             " of the leaf at page %" PRIu64, idx, pgno);
    if (len != BT_OVF_REF) {
        problem(w, pgno, subject(w, "leaf entry %" PRIu32, idx),
                found(w, "an overflow reference of %" PRIu32 " bytes", len),
                expected(w, "%u bytes", BT_OVF_REF));
        return;
    }
    bn_ext e = {get_le64(ref), get_le32(ref + 8)};
    if (claim(w, e, pgno, what))
        return;
    w->value_pages += e.npages;
    check_overflow_run(w, e, get_le64(ref + 12), what);
}

/* A leaf with overflow values needs the flag that makes open find them. */
static int overflow_allowed(vwalk *w, const vnode *v)
{
    if (!(v->info.flags & BN_F_OVERFLOW))
        return 1;
    if (w->catalog) {
        problem(w, v->e.pgno, "catalog leaf", found(w, "overflow values"),
                expected(w, "records inline, as they always are"));
        return 0;
    }
    if (!(w->t->flags & TREE_F_OVERFLOW))
        problem(w, v->e.pgno, "leaf",
                found(w, "overflow values, but the map's record lacks the "
                      "overflow flag 0x01"),
                expected(w, "the flag in the record: free space at open "
                         "would take their pages, and a read-write open "
                         "refuses the store"));
    return 1;
}

/* ---- the catalog's records ---------------------------------------------- */

static int add_record(vwalk *w, const char *name, const bt_tree *t)
{
    if (w->nrecs == w->cap_recs) {
        size_t cap = w->cap_recs ? 2 * w->cap_recs : 16;
        vrec *r = realloc(w->recs, cap * sizeof *r);
        if (!r)
            return BONSAI_NOMEM;
        w->recs = r;
        w->cap_recs = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return BONSAI_NOMEM;
    w->recs[w->nrecs++] = (vrec){copy, *t};
    return 0;
}

static int record_ok(vwalk *w, uint64_t pgno, const char *name,
                     const uint8_t *v, uint32_t len, bt_tree *t)
{
    unsigned kind, flags, depth;
    bn_ext root;
    uint64_t count;
    char shown[80];
    bn_key k = {.b = (const uint8_t *)name, .len = (uint32_t)strlen(name)};
    const char *of = subject(w, "catalog: the record of map %s",
                             show_key(BONSAI_KEY_BYTES, k, shown,
                                      sizeof shown));
    if (bx_record_decode(v, len, &kind, &flags, &depth, &root, &count)) {
        problem(w, pgno, of,
                found(w, "a malformed record of %" PRIu32 " bytes", len),
                expected(w, "24 bytes with kind 1 or 2, depth <= 32 and a "
                         "root exactly when depth > 0"));
        return 0;
    }
    if ((flags & ~TREE_F_OVERFLOW) || v[3] || get_le32(v + 20))
        problem(w, pgno, of,
                found(w, "flags 0x%02x, reserved bytes %s", flags,
                      v[3] || get_le32(v + 20) ? "not zero" : "zero"),
                expected(w, "flags 0x00 or 0x01 and zero reserved bytes"));
    *t = (bt_tree){.kind = kind, .depth = (uint8_t)depth,
                   .flags = (uint8_t)flags, .count = count};
    t->root.ext = root;
    return 1;
}

/* Entry i of a decoded catalog leaf: a map name and its record. */
static int catalog_entry(vwalk *w, uint64_t pgno, const bn_node *n,
                         uint32_t i)
{
    bn_key k = bn_key_at(n, i);
    const uint8_t *v;
    uint32_t len;
    unsigned vflag;
    char name[BONSAI_MAX_NAME + 1], shown[80];
    bn_value_at(n, i, &v, &len, &vflag);
    if (k.len > BONSAI_MAX_NAME || memchr(k.b, 0, k.len)) {
        problem(w, pgno, "catalog",
                found(w, "map name %s of %" PRIu32 " bytes",
                      show_key(BONSAI_KEY_BYTES, k, shown, sizeof shown),
                      k.len),
                expected(w, "a name of 1 to %u bytes, none of them NUL",
                         BONSAI_MAX_NAME));
        return 0;
    }
    memcpy(name, k.b, k.len);
    name[k.len] = 0;
    bt_tree t;
    if (vflag || !record_ok(w, pgno, name, v, len, &t))
        return 0;
    return add_record(w, name, &t);
}

/* ---- walking a tree ----------------------------------------------------- */

static int walk_node(vwalk *w, bn_ext e, uint64_t from, unsigned level,
                     bounds b);

static void check_branch_keys(vwalk *w, const vnode *v, const bn_node *n,
                              bounds b)
{
    /* key 0 is never compared; the others must lie within the bounds */
    if (n->n >= 2)
        check_range(w, v, bn_key_at(n, 1), bn_key_at(n, n->n - 1), b);
}

static int walk_branch(vwalk *w, const vnode *v, unsigned level, bounds b)
{
    bn_node *n = malloc(sizeof *n);
    if (!n)
        return BONSAI_NOMEM;
    bn_init(n, w->t->kind, 0);
    int ok = 1, rc = decode(w, v, n, &ok);
    if (rc == 0 && ok) {
        if (!(w->flags & BONSAI_VERIFY_QUICK))
            check_tail(w, v);
        check_branch_keys(w, v, n, b);
    } else {
        w->unread = 1;
    }
    for (uint32_t i = 0; rc == 0 && ok && i < n->n; i++) {
        bn_key lo = bn_key_at(n, i), hi = lo;
        if (i + 1 < n->n)
            hi = bn_key_at(n, i + 1);
        bounds cb = {i ? &lo : b.lo, i + 1 < n->n ? &hi : b.hi};
        rc = walk_node(w, n->child[i].ext, v->e.pgno, level - 1, cb);
    }
    bn_clear(n);
    free(n);
    return rc;
}

static int leaf_entries(vwalk *w, const vnode *v, const bn_node *n)
{
    int ovf = overflow_allowed(w, v);
    for (uint32_t i = 0; i < n->n; i++) {
        const uint8_t *p;
        uint32_t len;
        unsigned vflag;
        bn_value_at(n, i, &p, &len, &vflag);
        if ((vflag & BN_VAL_OVERFLOW) && ovf)
            check_overflow(w, v->e.pgno, i, p, len);
        int rc = w->catalog ? catalog_entry(w, v->e.pgno, n, i) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

/* A leaf, fully decoded: checksum, sections, keys, values. */
static int walk_leaf(vwalk *w, const vnode *v, bounds b)
{
    bn_node n;
    bn_init(&n, w->t->kind, 1);
    int ok = 1, rc = decode(w, v, &n, &ok);
    if (rc == 0 && ok) {
        check_tail(w, v);
        if (n.n)
            check_range(w, v, bn_key_at(&n, 0), bn_key_at(&n, n.n - 1), b);
        w->entries += n.n;
        rc = leaf_entries(w, v, &n);
    } else {
        w->unread = 1;
    }
    bn_clear(&n);
    return rc;
}

/* A leaf read in place (quick): header, first and last key, overflow
 * references. */
static int glance_leaf(vwalk *w, const vnode *v, bounds b)
{
    unsigned kind = w->t->kind;
    uint32_t n = v->info.count;
    bn_key first, last;
    if (n && (bn_img_key(v->img, &v->info, kind, 0, w->kbuf[0], &first) ||
              bn_img_key(v->img, &v->info, kind, n - 1, w->kbuf[1], &last))) {
        problem_note(w, v->e.pgno, "leaf", "its key section cannot be read");
        w->unread = 1;
        return 0;
    }
    if (n)
        check_range(w, v, first, last, b);
    w->entries += n;
    if (!overflow_allowed(w, v) || !(v->info.flags & BN_F_OVERFLOW))
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *p;
        uint32_t len;
        unsigned vflag;
        if (bn_img_value(v->img, &v->info, i, &p, &len, &vflag)) {
            problem_note(w, v->e.pgno, "leaf", "value %" PRIu32 " cannot be "
                         "read", i);
            return 0;
        }
        if (vflag & BN_VAL_OVERFLOW)
            check_overflow(w, v->e.pgno, i, p, len);
    }
    return 0;
}

/* The node at e, referenced from page `from`, and everything below it. */
static int walk_node(vwalk *w, bn_ext e, uint64_t from, unsigned level,
                     bounds b)
{
    if (claim(w, e, from, level == 1 ? "leaf" : "branch")) {
        w->unread = 1;
        return 0;
    }
    *(w->catalog ? &w->cat_pages : &w->node_pages) += e.npages;
    vnode v;
    int ok, rc = read_node(w, e, level, &v, &ok);
    if (rc || !ok) {
        w->unread = 1;
        return rc;
    }
    if (level > 1)
        return walk_branch(w, &v, level, b);
    if ((w->flags & BONSAI_VERIFY_QUICK) && !w->catalog)
        return glance_leaf(w, &v, b);
    return walk_leaf(w, &v, b);
}

static int walk_tree(vwalk *w, const char *map, const bt_tree *t)
{
    w->map = map;
    w->t = t;
    w->catalog = map[0] == 0;
    w->entries = 0;
    w->unread = w->has_prev = 0;
    int rc = 0;
    const char *holder = w->catalog ? "meta slot" : "map's record";
    if (t->depth > BT_MAX_DEPTH)
        problem(w, 0, holder, found(w, "depth %u", t->depth),
                expected(w, "a depth of at most %u", BT_MAX_DEPTH));
    else if (t->depth)
        rc = walk_node(w, t->root.ext, 0, t->depth, (bounds){NULL, NULL});
    if (rc == 0 && w->entries != t->count)
        problem(w, t->root.ext.pgno, "entry count",
                found(w, "%" PRIu64 " entries in the leaves%s", w->entries,
                      w->unread ? ", some of which could not be read" : ""),
                expected(w, "%" PRIu64 ", as the %s says", t->count,
                         holder));
    w->map = "";
    return rc;
}

static int walk_trees(vwalk *w)
{
    bt_tree cat = {.kind = BONSAI_KEY_BYTES, .depth = w->m.cat_depth,
                   .count = w->m.cat_count};
    cat.root.ext = w->m.cat_root;
    int rc = walk_tree(w, "", &cat);
    for (size_t i = 0; rc == 0 && i < w->nrecs; i++)
        rc = walk_tree(w, w->recs[i].name, &w->recs[i].t);
    return rc;
}

/* ---- the head area ------------------------------------------------------ */

static uint64_t head_size(const bonsai_db *db)
{
    return db->page_size > BX_HEAD_BYTES ? db->page_size : BX_HEAD_BYTES;
}

static void check_header(vwalk *w, const uint8_t *head)
{
    bx_header h;
    const bonsai_db *db = w->db;
    int rc = bx_header_decode(head, &h);
    if (rc) {
        problem_note(w, 0, "header", "%s (bad magic, checksum, version or "
                     "field)", bonsai_strerror(rc));
        return;
    }
    uint32_t flags = db->opt.compression |
                     (uint32_t)db->opt.compression_level << 4;
    if (h.page_size != db->page_size || h.node_bytes != db->opt.node_bytes ||
        h.node_entries != db->opt.node_entries || h.flags != flags)
        problem(w, 0, "header",
                found(w, "page_size %" PRIu32 ", node_bytes %" PRIu32
                      ", node_entries %" PRIu32 ", flags 0x%" PRIx32,
                      h.page_size, h.node_bytes, h.node_entries, h.flags),
                expected(w, "page_size %" PRIu32 ", node_bytes %" PRIu32
                         ", node_entries %" PRIu32 ", flags 0x%" PRIx32
                         ", the settings the store was opened with",
                         db->page_size, db->opt.node_bytes,
                         db->opt.node_entries, flags));
}

/* Why a meta slot is not valid, or NULL. */
static const char *slot_fault(const vwalk *w, const uint8_t *s,
                              uint64_t fsize, bx_meta *m)
{
    if (memcmp(s, "meta", 4) != 0)
        return "bad magic";
    if (get_le32(s + 48) != bonsai_crc32c(0, s, 48))
        return "checksum mismatch";
    if (bx_meta_decode(s, m))
        return "catalog root and depth disagree, or depth over 32";
    if (m->end < w->db->first_pgno || m->end > fsize / w->db->page_size)
        return "its end lies outside the file";
    if (get_le32(s + 4) || get_le16(s + 38)) /* 33..37: the cap */
        return "reserved bytes are not zero";
    return NULL;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static int same_meta(const bx_meta *a, const bx_meta *b)
{
    return a->txn_id == b->txn_id && a->end == b->end &&
           a->cat_root.pgno == b->cat_root.pgno &&
           a->cat_root.npages == b->cat_root.npages &&
           a->cat_depth == b->cat_depth && a->cat_count == b->cat_count;
}

/* The newest valid slot must be the state checked (or a later commit),
 * the other one the commit before it. */
static void compare_slots(vwalk *w, const bx_meta *m, const char *fault[2])
{
    int n = !fault[1] && (fault[0] || m[1].txn_id > m[0].txn_id);
    int o = !n;
    uint64_t want = m[n].txn_id - 1;
    if (m[n].txn_id < w->m.txn_id)
        problem(w, 0, subject(w, "meta slot %d", n),
                found(w, "txn %" PRIu64, m[n].txn_id),
                expected(w, "txn %" PRIu64 ", the store's last commit (a "
                         "meta write did not reach the file)", w->m.txn_id));
    else if (m[n].txn_id == w->m.txn_id && !same_meta(&m[n], &w->m))
        problem(w, 0, subject(w, "meta slot %d", n),
                found(w, "another state for txn %" PRIu64, m[n].txn_id),
                expected(w, "the state the store holds for that commit"));
    if (fault[o] || m[n].txn_id == 0 || m[o].txn_id == want)
        return;
    problem(w, 0, subject(w, "meta slot %d", o),
            found(w, "txn %" PRIu64, m[o].txn_id),
            expected(w, "txn %" PRIu64 ", the commit before slot %d's", want,
                     n));
}

static void check_slots(vwalk *w, const uint8_t *head, uint64_t fsize)
{
    bx_meta m[2] = {{0}, {0}};
    const char *fault[2];
    for (int s = 0; s < 2; s++)
        fault[s] = slot_fault(w, head + BX_META_OFF(s), fsize, &m[s]);
    if (fault[0] && fault[1]) {
        problem(w, 0, "meta slots",
                found(w, "slot 0: %s; slot 1: %s", fault[0], fault[1]),
                expected(w, "at least one valid slot"));
        return;
    }
    int n = !fault[1] && (fault[0] || m[1].txn_id > m[0].txn_id);
    compare_slots(w, m, fault);
    int o = !n;
    /* an all-zero slot is unused: a new file's slot 1, or one a
     * read-write open zeroed because a crash had torn it */
    if (!fault[o] || all_zero(head + BX_META_OFF(o), BX_META_SIZE))
        return;
    problem(w, 0, subject(w, "meta slot %d (offset %u)", o, BX_META_OFF(o)),
            found(w, "%s", fault[o]),
            expected(w, "a valid or all-zero slot; the store opened from "
                     "slot %d (txn %" PRIu64 ")", n, m[n].txn_id));
}

/* Outside the header and the slots, the head area is zero. */
static void check_head_zero(vwalk *w, const uint8_t *head, size_t n)
{
    const size_t parts[3][2] = {
        {BX_HEADER_SIZE, BX_META_OFF(0)},
        {BX_META_OFF(0) + BX_META_SIZE, BX_META_OFF(1)},
        {BX_META_OFF(1) + BX_META_SIZE, n},
    };
    for (int i = 0; i < 3; i++) {
        size_t from = parts[i][0], len = parts[i][1] - from;
        size_t at = from + first_nonzero(head + from, len);
        if (at < parts[i][1]) {
            problem(w, 0, "head area",
                    found(w, "0x%02x at byte %zu", head[at], at),
                    expected(w, "zero bytes outside the header and meta "
                             "slots"));
            return;
        }
    }
}

/* The head area, and the file's size after it was read: a writer grows
 * the file before its meta names the new end. */
static int read_head(bonsai_db *db, uint8_t *head, size_t n, uint64_t *fsize)
{
    int rc = db->io.pread(db->io.ctx, db->fd, head, n, 0);
    struct stat st;
    if (rc == 0 && fstat(db->fd, &st) != 0)
        rc = BONSAI_IO;
    if (rc == 0)
        *fsize = (uint64_t)st.st_size;
    return rc;
}

static int slot_torn(const uint8_t *head)
{
    bx_meta m;
    for (int s = 0; s < 2; s++)
        if (bx_meta_decode(head + BX_META_OFF(s), &m) &&
            !all_zero(head + BX_META_OFF(s), BX_META_SIZE))
            return 1;
    return 0;
}

/* Beside a writer in another process a meta slot may be caught while it
 * is written: read again until it decodes, or two reads a millisecond
 * apart agree (a slot torn for good). */
static int read_settled_head(bonsai_db *db, uint8_t *head, size_t n,
                             uint64_t *fsize)
{
    int rc = read_head(db, head, n, fsize);
    if (rc || !db->opt.read_only || db->rt.fd < 0)
        return rc;
    uint8_t *again = malloc(n);
    if (!again)
        return BONSAI_NOMEM;
    for (int tries = 0; rc == 0 && tries < 100 && slot_torn(head); tries++) {
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        if ((rc = read_head(db, again, n, fsize)) == 0 &&
            memcmp(head, again, n) == 0)
            break;
        memcpy(head, again, n);
    }
    free(again);
    return rc;
}

static int check_head(vwalk *w)
{
    bonsai_db *db = w->db;
    size_t n = (size_t)head_size(db);
    uint8_t *head = malloc(n);
    if (!head)
        return BONSAI_NOMEM;
    uint64_t fsize;
    int rc = read_settled_head(db, head, n, &fsize);
    if (rc == 0) {
        check_header(w, head);
        check_slots(w, head, fsize);
        check_head_zero(w, head, n);
    }
    free(head);
    return rc;
}

/* ---- free space --------------------------------------------------------- */

static void tally_free(vwalk *w)
{
    uint64_t run = 0;
    for (uint64_t p = w->db->first_pgno; p <= w->m.end; p++) {
        if (p < w->m.end && !ps_has(&w->used, p)) {
            run++;
            w->free_pages++;
            continue;
        }
        if (run) {
            w->free_runs++;
            if (run > w->largest_run)
                w->largest_run = run;
        }
        run = 0;
    }
}

static int alloc_free(const alloc *a, uint64_t p)
{
    uint64_t i = p - a->first;
    return i < a->nbits && (a->bits[i >> 6] >> (i & 63)) & 1;
}

static void mismatch(vwalk *w, uint64_t from, uint64_t to, int used)
{
    const char *pages = subject(w, "free space: pages %" PRIu64 "..%" PRIu64,
                                from, to - 1);
    if (used)
        problem(w, from, pages,
                found(w, "referenced by a tree and free in the allocator"),
                expected(w, "pages a tree references not free"));
    else
        problem(w, from, pages,
                found(w, "neither referenced nor free in the allocator "
                      "(leaked)"),
                expected(w, "every page no tree references free"));
}

/* No-transaction mode, state written back: the allocator's free pages are
 * exactly the pages no tree reaches. */
static void check_allocator(vwalk *w)
{
    const alloc *a = &w->db->al;
    uint64_t start = 0;
    int state = 0; /* 0 agree, 1 used but free, 2 leaked */
    for (uint64_t p = w->db->first_pgno; p <= w->m.end; p++) {
        int s = 0;
        if (p < w->m.end) {
            int used = ps_has(&w->used, p), fr = alloc_free(a, p);
            s = used && fr ? 1 : !used && !fr ? 2 : 0;
        }
        if (s == state)
            continue;
        if (state)
            mismatch(w, start, p, state == 1);
        state = s;
        start = p;
    }
}

/* ---- the state to check ------------------------------------------------- */

/* No-transaction mode: write cached changes and records back first. */
static void written_state(vwalk *w)
{
    bonsai_db *db = w->db;
    w->m = db->meta;
    if (db->opt.read_only)
        return;
    /* as bonsai_sync does, and in anonymous memory too: the records */
    int rc = db->failed ? BONSAI_FAILED : txn_write_back(db);
    if (rc) {
        /* the trees last written may since have been changed in place */
        problem_note(w, 0, "write-back", "could not write cached changes "
                     "back (%s): the trees were not checked",
                     bonsai_strerror(rc));
        w->stale = 1;
        return;
    }
    w->m = (bx_meta){.txn_id = db->meta.txn_id, .end = db->al.end,
                     .cat_root = db->catalog.root.ext,
                     .cat_depth = db->catalog.depth,
                     .cat_count = db->catalog.count};
    w->current = 1;
}

static int choose_state(vwalk *w)
{
    if (!w->db->cow) {
        written_state(w);
        return 0;
    }
    int rc = bonsai_txn_begin(w->db, BONSAI_TXN_RDONLY, &w->snap);
    if (rc == 0)
        w->m = w->snap->snap;
    return rc;
}

static int run_checks(vwalk *w)
{
    int rc = choose_state(w);
    if (rc)
        return rc;
    bonsai_db *db = w->db;
    w->rd = (bt_rd){w->m.end, &w->uc, NULL, 0, NULL};
    w->total = w->m.end - db->first_pgno;
    if ((rc = ps_init(&w->used, db->first_pgno, w->m.end)))
        return rc;
    if (!db->anonymous && (rc = check_head(w)))
        return rc;
    if (w->stale)
        return 0;
    if ((rc = walk_trees(w)))
        return rc;
    tally_free(w);
    if (w->current && db->al.end == w->m.end)
        check_allocator(w);
    if (w->progress)
        w->progress(w->ctx, w->total, w->total);
    return 0;
}

static void walk_free(vwalk *w)
{
    for (size_t i = 0; i < w->nrecs; i++)
        free(w->recs[i].name);
    free(w->recs);
    ps_free(&w->used);
    pk_cache_free(&w->uc);
    bonsai_txn_abort(w->snap);
    free(w);
}

static vwalk *walk_new(bonsai_db *db, unsigned flags)
{
    vwalk *w = calloc(1, sizeof *w);
    if (w) {
        w->db = db;
        w->flags = flags;
        w->map = "";
    }
    return w;
}

/* ---- public calls ------------------------------------------------------- */

/* bonsai_verify with problems as one sentence (fn) or in parts. */
static int verify(bonsai_db *db, unsigned flags, bonsai_problem_fn fn,
                  verify_problem_fn in_parts, bonsai_progress_fn progress,
                  void *ctx, uint64_t *problems)
{
    if (problems)
        *problems = 0;
    if (!db || (flags & ~BONSAI_VERIFY_QUICK))
        return BONSAI_INVALID;
    vwalk *w = walk_new(db, flags);
    if (!w)
        return BONSAI_NOMEM;
    w->fn = fn;
    w->in_parts = in_parts;
    w->progress = progress;
    w->ctx = ctx;
    int rc = run_checks(w);
    if (problems)
        *problems = w->problems;
    walk_free(w);
    return rc;
}

int bonsai_verify(bonsai_db *db, unsigned flags, bonsai_problem_fn fn,
                  bonsai_progress_fn progress, void *ctx, uint64_t *problems)
{
    return verify(db, flags, fn, NULL, progress, ctx, problems);
}

int verify_in_parts(bonsai_db *db, unsigned flags, verify_problem_fn fn,
                    bonsai_progress_fn progress, void *ctx,
                    uint64_t *problems)
{
    return verify(db, flags, NULL, fn, progress, ctx, problems);
}

static void fill_space(const vwalk *w, bonsai_space *sp)
{
    const bonsai_db *db = w->db;
    uint64_t ps = db->page_size;
    sp->txn_id = w->m.txn_id;
    sp->end_bytes = w->m.end * ps;
    sp->head_bytes = db->first_pgno * ps;
    sp->node_bytes = w->node_pages * ps;
    sp->catalog_bytes = w->cat_pages * ps;
    sp->overflow_bytes = w->value_pages * ps;
    sp->free_bytes = w->free_pages * ps;
    sp->free_extents = w->free_runs;
    sp->largest_free = w->largest_run * ps;
    sp->compression = db->opt.compression;
    sp->compression_level = db->opt.compression_level;
    sp->problems = w->problems;
}

/* Readers of this handle, before the walk adds its own. */
static void count_readers(bonsai_db *db, bonsai_space *sp)
{
    pthread_mutex_lock(&db->lock);
    sp->readers = db->nreaders;
    for (size_t i = 0; i < db->nreaders; i++)
        if (i == 0 || db->readers[i] < sp->oldest_reader)
            sp->oldest_reader = db->readers[i];
    pthread_mutex_unlock(&db->lock);
}

static int count_shared(void *ctx, const bx_meta *m)
{
    bonsai_space *sp = ctx;
    if (sp->all_readers++ == 0 || m->txn_id < sp->oldest_any)
        sp->oldest_any = m->txn_id;
    return 0;
}

/* Snapshots of every process, where a lock file publishes them. */
static void count_shared_readers(const bonsai_db *db, bonsai_space *sp)
{
    if (db->rt.fd < 0)
        return;
    sp->shared_readers = 1;
    rt_each_snapshot(&db->rt, count_shared, sp);
}

int bonsai_space_stat(bonsai_db *db, bonsai_space *sp)
{
    if (!db || !sp)
        return BONSAI_INVALID;
    memset(sp, 0, sizeof *sp);
    count_readers(db, sp);
    count_shared_readers(db, sp);
    struct stat st;
    if (!db->anonymous && fstat(db->fd, &st) == 0)
        sp->file_bytes = (uint64_t)st.st_size;
    vwalk *w = walk_new(db, BONSAI_VERIFY_QUICK);
    if (!w)
        return BONSAI_NOMEM;
    int rc = run_checks(w);
    if (rc == 0)
        fill_space(w, sp);
    walk_free(w);
    return rc;
}

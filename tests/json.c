/* SPDX-License-Identifier: MIT */
/* json.c - a strict JSON parser for the tests (json.h). */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tj_value {
    tj_type type;
    int b;              /* TJ_BOOL */
    double num;         /* TJ_NUMBER */
    int is_u64;         /* written as an integer that fits a uint64_t */
    uint64_t u;
    char *str;          /* TJ_STRING: decoded, NUL-terminated */
    size_t len;
    tj_value **items;   /* TJ_ARRAY, TJ_OBJECT */
    tj_value **keys;    /* TJ_OBJECT: a string per item */
    size_t n, cap;
};

typedef struct parser {
    const unsigned char *p, *start, *end;
    int depth;
    char *err;
    size_t errlen;
    int failed;
} parser;

static tj_value *fail(parser *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Notes the first error, where it was met. */
static tj_value *fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return NULL;
    ps->failed = 1;
    int n = snprintf(ps->err, ps->errlen, "offset %zu: ",
                     (size_t)(ps->p - ps->start));
    if (n >= 0 && (size_t)n < ps->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return NULL;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
                               *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static tj_value *new_value(parser *ps, tj_type type)
{
    tj_value *v = calloc(1, sizeof *v);
    if (!v)
        return fail(ps, "out of memory");
    v->type = type;
    return v;
}

/* ---- strings ------------------------------------------------------------ */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static int put(buf *b, const void *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (b->n + n + 1 > cap)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

static int put_utf8(buf *b, uint32_t c)
{
    unsigned char u[4];
    size_t n;
    if (c < 0x80) {
        u[0] = (unsigned char)c;
        n = 1;
    } else if (c < 0x800) {
        u[0] = (unsigned char)(0xc0 | c >> 6);
        u[1] = (unsigned char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        u[0] = (unsigned char)(0xe0 | c >> 12);
        u[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
        u[2] = (unsigned char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xf0 | c >> 18);
        u[1] = (unsigned char)(0x80 | (c >> 12 & 0x3f));
        u[2] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
        u[3] = (unsigned char)(0x80 | (c & 0x3f));
        n = 4;
    }
    return put(b, u, n);
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
    size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (n == 0 || p[0] > 0xf4 || (size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

static int hex4(parser *ps, uint32_t *out)
{
    uint32_t v = 0;
    if (ps->end - ps->p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        unsigned char c = *ps->p++;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* After "\u": one code point, a surrogate pair taken whole. */
static int unicode_escape(parser *ps, buf *b)
{
    uint32_t c, lo;
    if (hex4(ps, &c))
        return fail(ps, "\\u needs four hex digits"), -1;
    if (c >= 0xdc00 && c <= 0xdfff)
        return fail(ps, "a low surrogate without a high one"), -1;
    if (c >= 0xd800 && c <= 0xdbff) {
        if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
            return fail(ps, "a high surrogate without a low one"), -1;
        ps->p += 2;
        if (hex4(ps, &lo) || lo < 0xdc00 || lo > 0xdfff)
            return fail(ps, "a high surrogate without a low one"), -1;
        c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
    }
    return put_utf8(b, c) ? (fail(ps, "out of memory"), -1) : 0;
}

/* After '\': one escape. */
static int escape(parser *ps, buf *b)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (ps->p == ps->end)
        return fail(ps, "unterminated string"), -1;
    unsigned char c = *ps->p++;
    if (c == 'u')
        return unicode_escape(ps, b);
    const char *at = c ? strchr(from, c) : NULL;
    if (!at)
        return fail(ps, "unknown escape \\%c", c), -1;
    return put(b, &to[at - from], 1) ? (fail(ps, "out of memory"), -1) : 0;
}

/* At '"': the string, decoded. */
static tj_value *parse_string(parser *ps)
{
    buf b = {0};
    ps->p++;
    if (put(&b, "", 0))
        return fail(ps, "out of memory");
    for (;;) {
        if (ps->p == ps->end) {
            free(b.p);
            return fail(ps, "unterminated string");
        }
        unsigned char c = *ps->p;
        size_t n = 1;
        int rc = 0;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c < 0x20) {
            free(b.p);
            return fail(ps, "control character 0x%02x in a string", c);
        }
        if (c == '\\') {
            ps->p++;
            rc = escape(ps, &b);
        } else {
            if (c >= 0x80 && (n = utf8_len(ps->p, ps->end)) == 0) {
                free(b.p);
                return fail(ps, "not UTF-8");
            }
            rc = put(&b, ps->p, n) ? (fail(ps, "out of memory"), -1) : 0;
            ps->p += n;
        }
        if (rc) {
            free(b.p);
            return NULL;
        }
    }
    tj_value *v = new_value(ps, TJ_STRING);
    if (!v) {
        free(b.p);
        return NULL;
    }
    v->str = b.p;
    v->len = b.n;
    return v;
}

/* ---- numbers ------------------------------------------------------------ */

static int digit(const parser *ps)
{
    return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

static void digits(parser *ps)
{
    while (digit(ps))
        ps->p++;
}

static tj_value *parse_number(parser *ps)
{
    const unsigned char *from = ps->p;
    int integer = 1;
    if (*ps->p == '-')
        ps->p++;
    if (!digit(ps))
        return fail(ps, "a digit must follow '-'");
    if (*ps->p == '0') {
        ps->p++;
        if (digit(ps))
            return fail(ps, "a leading zero");
    } else {
        digits(ps);
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        integer = 0;
        if (!digit(ps))
            return fail(ps, "a digit must follow '.'");
        digits(ps);
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        integer = 0;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (!digit(ps))
            return fail(ps, "a digit must follow the exponent");
        digits(ps);
    }
    char text[512];
    size_t n = (size_t)(ps->p - from);
    if (n >= sizeof text)
        return fail(ps, "a number of %zu characters", n);
    memcpy(text, from, n);
    text[n] = 0;
    tj_value *v = new_value(ps, TJ_NUMBER);
    if (!v)
        return NULL;
    v->num = strtod(text, NULL);
    if (!isfinite(v->num)) {
        free(v);
        return fail(ps, "%s is out of range", text);
    }
    if (integer && text[0] != '-') {
        errno = 0;
        v->u = strtoull(text, NULL, 10);
        v->is_u64 = errno == 0;
    }
    return v;
}

/* ---- arrays and objects ------------------------------------------------- */

static tj_value *parse_value(parser *ps);

static int add_item(parser *ps, tj_value *c, tj_value *key, tj_value *item)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        tj_value **items = realloc(c->items, cap * sizeof *items);
        if (items)
            c->items = items;
        if (items && c->type == TJ_OBJECT) {
            tj_value **keys = realloc(c->keys, cap * sizeof *keys);
            if (keys)
                c->keys = keys;
            else
                items = NULL;
        }
        if (!items) {
            tj_free(key);
            tj_free(item);
            fail(ps, "out of memory");
            return -1;
        }
        c->cap = cap;
    }
    if (key)
        c->keys[c->n] = key;
    c->items[c->n++] = item;
    return 0;
}

static int same_key(const tj_value *a, const tj_value *b)
{
    return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

/* One "key": value of an object, added to it. */
static int parse_member(parser *ps, tj_value *obj)
{
    skip_ws(ps);
    if (ps->p == ps->end || *ps->p != '"')
        return fail(ps, "expected a key string"), -1;
    tj_value *key = parse_string(ps);
    if (!key)
        return -1;
    for (size_t i = 0; i < obj->n; i++)
        if (same_key(obj->keys[i], key)) {
            tj_free(key);
            return fail(ps, "a duplicate key"), -1;
        }
    skip_ws(ps);
    if (ps->p == ps->end || *ps->p != ':') {
        tj_free(key);
        return fail(ps, "expected ':'"), -1;
    }
    ps->p++;
    tj_value *item = parse_value(ps);
    if (!item) {
        tj_free(key);
        return -1;
    }
    return add_item(ps, obj, key, item);
}

/* At '[' or '{': the elements or members up to the closing bracket. */
static tj_value *parse_container(parser *ps, tj_type type)
{
    char close = type == TJ_ARRAY ? ']' : '}';
    if (++ps->depth > TJ_MAX_DEPTH)
        return fail(ps, "nested deeper than %d", TJ_MAX_DEPTH);
    tj_value *c = new_value(ps, type);
    if (!c)
        return NULL;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return c;
    }
    for (;;) {
        int rc;
        if (type == TJ_OBJECT) {
            rc = parse_member(ps, c);
        } else {
            tj_value *item = parse_value(ps);
            rc = item ? add_item(ps, c, NULL, item) : -1;
        }
        if (rc) {
            tj_free(c);
            return NULL;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return c;
        }
        tj_free(c);
        return fail(ps, "expected ',' or '%c'", close);
    }
}

/* ---- values ------------------------------------------------------------- */

static tj_value *parse_literal(parser *ps)
{
    static const struct {
        const char *word;
        tj_type type;
        int b;
    } words[] = {{"true", TJ_BOOL, 1}, {"false", TJ_BOOL, 0},
                 {"null", TJ_NULL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(ps->end - ps->p) >= n &&
            memcmp(ps->p, words[i].word, n) == 0) {
            ps->p += n;
            tj_value *v = new_value(ps, words[i].type);
            if (v)
                v->b = words[i].b;
            return v;
        }
    }
    return fail(ps, "not a JSON value");
}

static tj_value *parse_value(parser *ps)
{
    skip_ws(ps);
    if (ps->p == ps->end)
        return fail(ps, "expected a value");
    switch (*ps->p) {
    case '{': return parse_container(ps, TJ_OBJECT);
    case '[': return parse_container(ps, TJ_ARRAY);
    case '"': return parse_string(ps);
    case '-': case '0': case '1': case '2': case '3': case '4': case '5':
    case '6': case '7': case '8': case '9': return parse_number(ps);
    default: return parse_literal(ps);
    }
}

tj_value *tj_parse(const char *text, size_t len, char *err, size_t errlen)
{
    parser ps = {.p = (const unsigned char *)text,
                 .start = (const unsigned char *)text,
                 .end = (const unsigned char *)text + len,
                 .err = err, .errlen = errlen};
    if (errlen)
        err[0] = 0;
    tj_value *v = parse_value(&ps);
    if (!v)
        return NULL;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        tj_free(v);
        return fail(&ps, "something after the value");
    }
    return v;
}

void tj_free(tj_value *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        tj_free(v->items[i]);
        if (v->keys)
            tj_free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

/* ---- lookups ------------------------------------------------------------ */

tj_type tj_type_of(const tj_value *v)
{
    return v->type;
}

const tj_value *tj_get(const tj_value *v, const char *key)
{
    if (!v || v->type != TJ_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < v->n; i++)
        if (v->keys[i]->len == n && memcmp(v->keys[i]->str, key, n) == 0)
            return v->items[i];
    return NULL;
}

size_t tj_len(const tj_value *v)
{
    return v && (v->type == TJ_ARRAY || v->type == TJ_OBJECT) ? v->n : 0;
}

const tj_value *tj_at(const tj_value *v, size_t i)
{
    return v && v->type == TJ_ARRAY && i < v->n ? v->items[i] : NULL;
}

const char *tj_str(const tj_value *v)
{
    return v && v->type == TJ_STRING ? v->str : NULL;
}

size_t tj_str_len(const tj_value *v)
{
    return v && v->type == TJ_STRING ? v->len : 0;
}

int tj_num(const tj_value *v, double *out)
{
    if (!v || v->type != TJ_NUMBER)
        return -1;
    *out = v->num;
    return 0;
}

int tj_u64(const tj_value *v, uint64_t *out)
{
    if (!v || v->type != TJ_NUMBER || !v->is_u64)
        return -1;
    *out = v->u;
    return 0;
}

int tj_bool(const tj_value *v, int *out)
{
    if (!v || v->type != TJ_BOOL)
        return -1;
    *out = v->b;
    return 0;
}

int tj_is_null(const tj_value *v)
{
    return v && v->type == TJ_NULL;
}

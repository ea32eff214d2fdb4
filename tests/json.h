/* SPDX-License-Identifier: MIT */
/*
 * json.h - a strict JSON parser for the tests (RFC 8259), to check what
 * the tools print with --json by reading it, not by matching text.
 *
 * One document: a value with white space (space, tab, CR, LF) around it
 * and nothing else.  Refused: trailing commas, leading zeros, '+', bare
 * '.', NaN and infinities, numbers out of double's range, control
 * characters in strings, unknown escapes, unpaired surrogates, bytes that
 * are not UTF-8, duplicate keys in an object, nesting deeper than
 * TJ_MAX_DEPTH, and anything after the value.  Strings are decoded to
 * UTF-8 (a \u0000 inside one is kept: tj_str_len).
 */
#ifndef BONSAI_TEST_JSON_H
#define BONSAI_TEST_JSON_H

#include <stddef.h>
#include <stdint.h>

#define TJ_MAX_DEPTH 64

typedef enum tj_type {
    TJ_NULL,
    TJ_BOOL,
    TJ_NUMBER,
    TJ_STRING,
    TJ_ARRAY,
    TJ_OBJECT,
} tj_type;

typedef struct tj_value tj_value;

/* text[0, len) as one document, or NULL with the reason (and the offset
 * it was found at) in err. */
tj_value *tj_parse(const char *text, size_t len, char *err, size_t errlen);
void tj_free(tj_value *v);

tj_type tj_type_of(const tj_value *v);
/* The member key of an object; NULL if v is no object or has none. */
const tj_value *tj_get(const tj_value *v, const char *key);
/* Elements of an array or members of an object; 0 for anything else. */
size_t tj_len(const tj_value *v);
/* Element i of an array; NULL if v is no array or i is past its end. */
const tj_value *tj_at(const tj_value *v, size_t i);

/* The decoded string (NUL-terminated), or NULL if v is no string. */
const char *tj_str(const tj_value *v);
size_t tj_str_len(const tj_value *v);
/* 0 and the value in *out, or -1 if v is not of that kind: any number;
 * a number written as an integer in [0, 2^64); true or false. */
int tj_num(const tj_value *v, double *out);
int tj_u64(const tj_value *v, uint64_t *out);
int tj_bool(const tj_value *v, int *out);
int tj_is_null(const tj_value *v);

#endif /* BONSAI_TEST_JSON_H */

/* SPDX-License-Identifier: MIT */
/*
 * json.h - the JSON the command-line programs print: a tiny writer of
 * objects, arrays, keys and values that puts the commas in, so that every
 * tool escapes strings the same way.
 *
 * Strings are byte strings (map names, paths): '"' and '\' are escaped
 * with a backslash, and every byte below 0x20 or above 0x7e as \u00XX, so
 * the output is ASCII whatever the bytes (a byte over 0x7f reads back as
 * the code point of the same number).  A value inside an object is given
 * its key; inside an array, or at the top, the key is NULL.  The top-level
 * value ends its line.  Linked into every program in tools/.
 */
#ifndef BONSAI_JSON_H
#define BONSAI_JSON_H

#include <stdint.h>
#include <stdio.h>

typedef struct json_writer {
    FILE *out;
    int depth;  /* objects and arrays open */
    int comma;  /* a value came before: the next one needs a comma */
} json_writer;

void json_init(json_writer *j, FILE *out);

void json_begin_object(json_writer *j, const char *key);
void json_end_object(json_writer *j);
void json_begin_array(json_writer *j, const char *key);
void json_end_array(json_writer *j);

/* "key": (the comma before it when one is due); the value follows.  The
 * value calls below do this themselves when given a key. */
void json_key(json_writer *j, const char *key);

/* s escaped, or null when s is NULL. */
void json_string(json_writer *j, const char *key, const char *s);
void json_int(json_writer *j, const char *key, int64_t v);
void json_uint(json_writer *j, const char *key, uint64_t v);
/* v with `decimals` digits after the point; null if it is not finite. */
void json_double(json_writer *j, const char *key, double v, int decimals);
void json_bool(json_writer *j, const char *key, int v);
void json_null(json_writer *j, const char *key);

#endif /* BONSAI_JSON_H */

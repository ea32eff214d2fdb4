/* SPDX-License-Identifier: MIT */
/* json.c - the JSON writer of the command-line programs (json.h). */
#include "json.h"

#include <inttypes.h>
#include <math.h>

void json_init(json_writer *j, FILE *out)
{
    *j = (json_writer){.out = out};
}

/* Before a value: its comma and key. */
static void value_start(json_writer *j, const char *key)
{
    if (key)
        json_key(j, key);
    else if (j->comma)
        fputc(',', j->out);
}

/* After a value: the next one needs a comma; the top one ends its line. */
static void value_end(json_writer *j)
{
    j->comma = 1;
    if (j->depth == 0)
        fputc('\n', j->out);
}

static void escaped(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p > 0x7e)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

void json_key(json_writer *j, const char *key)
{
    if (j->comma)
        fputc(',', j->out);
    escaped(j->out, key);
    fputc(':', j->out);
    j->comma = 0;
}

static void open_container(json_writer *j, const char *key, char c)
{
    value_start(j, key);
    fputc(c, j->out);
    j->depth++;
    j->comma = 0;
}

static void close_container(json_writer *j, char c)
{
    fputc(c, j->out);
    j->depth--;
    value_end(j);
}

void json_begin_object(json_writer *j, const char *key)
{
    open_container(j, key, '{');
}

void json_end_object(json_writer *j)
{
    close_container(j, '}');
}

void json_begin_array(json_writer *j, const char *key)
{
    open_container(j, key, '[');
}

void json_end_array(json_writer *j)
{
    close_container(j, ']');
}

void json_string(json_writer *j, const char *key, const char *s)
{
    if (!s) {
        json_null(j, key);
        return;
    }
    value_start(j, key);
    escaped(j->out, s);
    value_end(j);
}

void json_int(json_writer *j, const char *key, int64_t v)
{
    value_start(j, key);
    fprintf(j->out, "%" PRId64, v);
    value_end(j);
}

void json_uint(json_writer *j, const char *key, uint64_t v)
{
    value_start(j, key);
    fprintf(j->out, "%" PRIu64, v);
    value_end(j);
}

void json_double(json_writer *j, const char *key, double v, int decimals)
{
    if (!isfinite(v)) { /* JSON has no NaN or infinity */
        json_null(j, key);
        return;
    }
    value_start(j, key);
    fprintf(j->out, "%.*f", decimals, v);
    value_end(j);
}

void json_bool(json_writer *j, const char *key, int v)
{
    value_start(j, key);
    fputs(v ? "true" : "false", j->out);
    value_end(j);
}

void json_null(json_writer *j, const char *key)
{
    value_start(j, key);
    fputs("null", j->out);
    value_end(j);
}

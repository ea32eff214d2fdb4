/* SPDX-License-Identifier: MIT */
/*
 * clash.c - a program that defines functions with the names of bonsai's
 * internal ones (alloc_init, cache_flush, region_close).  It must link
 * against libbonsai.a and libbonsai.so, and the library must call its own
 * code, never these: the store works and the counters stay at zero.
 * Exit 0 when all is well; built and run by tests/abi/check.sh.
 */
#include <stdio.h>
#include <string.h>

#include "bonsai.h"

static int calls;

/* Deliberately the internal names, with signatures of the program's own. */
int alloc_init(void);
int cache_flush(void);
int region_close(void);
int alloc_init(void) { return ++calls; }
int cache_flush(void) { return ++calls; }
int region_close(void) { return ++calls; }

#define CHECK(expr)                                                           \
    do {                                                                      \
        int rc_ = (expr);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "clash: %s: %s\n", #expr, bonsai_strerror(rc_));  \
            return 1;                                                         \
        }                                                                     \
    } while (0)

static int use_store(const char *path)
{
    bonsai_options o;
    bonsai_options_init(&o);
    o.max_size = 8u << 20;
    bonsai_db *db;
    CHECK(bonsai_open(path, &o, &db));
    bonsai_map m;
    CHECK(bonsai_map_create(db, NULL, "m", BONSAI_KEY_U64, &m));
    for (uint64_t k = 0; k < 10000; k++)
        CHECK(bonsai_put_u64(NULL, m, k * 7, NULL, 0));
    bonsai_val v;
    CHECK(bonsai_get_u64(NULL, m, 7 * 9999, &v));
    uint64_t n;
    CHECK(bonsai_count(NULL, m, &n));
    CHECK(bonsai_close(db));
    if (n != 10000) {
        fprintf(stderr, "clash: count %llu, not 10000\n",
                (unsigned long long)n);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (use_store(NULL) || (argc > 1 && use_store(argv[1])))
        return 1;
    if (calls != 0) {
        fprintf(stderr, "clash: the library called the program's "
                        "alloc_init/cache_flush/region_close\n");
        return 1;
    }
    int major, minor, patch;
    const char *v = bonsai_version(&major, &minor, &patch);
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", major, minor, patch);
    if (strcmp(v, want) != 0 || major != BONSAI_VERSION_MAJOR ||
        minor != BONSAI_VERSION_MINOR || patch != BONSAI_VERSION_PATCH) {
        fprintf(stderr, "clash: bonsai_version says %s\n", v);
        return 1;
    }
    /* the program's own functions are still its own */
    return alloc_init() + cache_flush() + region_close() == 6 ? 0 : 1;
}

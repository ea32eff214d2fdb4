/* SPDX-License-Identifier: MIT */
/*
 * test_fuzz_replay.c - the fuzz corpora, replayed under the ordinary
 * compiler and sanitizers (`make check`), so every seed and every crasher
 * ever found keeps running even where clang's libFuzzer is absent.
 *
 * The five harnesses are compiled in from fuzz/ with FUZZ_REPLAY defined
 * (which leaves out their LLVMFuzzerTestOneInput).  For each harness h,
 * every regular file in fuzz/corpus/h/ and fuzz/regress/h/ goes through
 * fuzz_h(), the same entry libFuzzer calls.  A harness reports a finding
 * with abort(), which fails the test; the file being replayed is named on
 * stderr first (also when a sanitizer ends the process).
 *
 * The directories are found under $BONSAI_SRC_DIR, else the current
 * directory (`make check` runs from the repository root).  The corpus
 * directory must exist and hold at least one file; regress/ may be
 * absent.
 */
#define FUZZ_REPLAY 1

#include "../fuzz/fuzz_compress.c"
#include "../fuzz/fuzz_file.c"
#include "../fuzz/fuzz_node.c"
#include "../fuzz/fuzz_ops.c"
#include "../fuzz/fuzz_u64groups.c"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


typedef int (*replay_fn)(const uint8_t *data, size_t size);

static char g_current[4096]; /* the file being replayed */

static void replay_say_current(void)
{
    if (g_current[0]) {
        const char pre[] = "\nfuzz replay: the input being replayed: ";
        if (write(2, pre, sizeof pre - 1) < 0 ||
            write(2, g_current, strlen(g_current)) < 0 || write(2, "\n", 1) < 0)
            return;
    }
}

#ifdef FZ_SANITIZED
/* a sanitizer report: name the input, remove the temporary directory */
static void replay_on_death(void)
{
    replay_say_current();
    fz_tmpdir_remove();
}
#endif

static void replay_on_signal(int sig)
{
    replay_say_current();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void replay_init(void)
{
    signal(SIGABRT, replay_on_signal);
    signal(SIGSEGV, replay_on_signal);
    signal(SIGBUS, replay_on_signal);
#ifdef FZ_SANITIZED /* fuzz_util.h: built with ASan */
    __sanitizer_set_death_callback(replay_on_death);
#endif
}

static const char *src_dir(void)
{
    const char *d = getenv("BONSAI_SRC_DIR");
    return d && *d ? d : ".";
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot open %s", path);
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            buf = realloc(buf, cap);
            cr_assert(buf != NULL);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    cr_assert(!ferror(f), "cannot read %s", path);
    fclose(f);
    *size = n;
    return buf;
}

/* Replays every regular file of dir (in name order); returns how many.
 * -1 when dir does not exist. */
static long replay_dir(const char *dir, replay_fn fn)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof *names);
            cr_assert(names != NULL);
        }
        names[n] = strdup(e->d_name);
        cr_assert(names[n] != NULL);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    long done = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        free(names[i]);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        size_t size;
        uint8_t *data = slurp(path, &size);
        /* an exact-size copy, as libFuzzer passes it: a read past the end
         * is a sanitizer error here too */
        uint8_t *exact = malloc(size ? size : 1);
        cr_assert(exact != NULL);
        memcpy(exact, data, size);
        free(data);
        snprintf(g_current, sizeof g_current, "%s", path);
        fn(exact, size);
        g_current[0] = 0;
        free(exact);
        done++;
    }
    free(names);
    return done;
}

static void replay(const char *harness, replay_fn fn)
{
    char corpus[4096], regress[4096];
    replay_init();
    snprintf(corpus, sizeof corpus, "%s/fuzz/corpus/%s", src_dir(), harness);
    snprintf(regress, sizeof regress, "%s/fuzz/regress/%s", src_dir(),
             harness);
    long seeds = replay_dir(corpus, fn);
    cr_assert(seeds > 0,
              "%s: no corpus (run from the repository root or set "
              "BONSAI_SRC_DIR; `make fuzz-corpus` regenerates it)",
              corpus);
    long crashers = replay_dir(regress, fn);
    fz_tmpdir_remove();
    cr_log_info("fuzz replay %s: %ld corpus inputs, %ld regression inputs",
                harness, seeds, crashers < 0 ? 0 : crashers);
}

TestSuite(fuzz_replay, .timeout = 600);

Test(fuzz_replay, node) { replay("node", fuzz_node); }
Test(fuzz_replay, file) { replay("file", fuzz_file); }
Test(fuzz_replay, ops) { replay("ops", fuzz_ops); }
Test(fuzz_replay, compress) { replay("compress", fuzz_compress); }
Test(fuzz_replay, u64groups) { replay("u64groups", fuzz_u64groups); }

/* SPDX-License-Identifier: MIT */
/*
 * test_readers.c - the lock file's reader slots (lib/readers.c) on their
 * own: what one handle publishes another sees, until it is released or
 * its process dies; slots are shared per commit and run out cleanly; a
 * damaged header is refused.
 *
 * Two rt_tables opened on one path stand for two processes: each has its
 * own open file description, so their OFD locks conflict as those of two
 * processes do.  Where a process must really die, a forked child (no
 * Criterion there) publishes and leaves with _exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "readers.h"
#include "util.h"

TestSuite(readers, .init = tu_setup, .fini = tu_teardown, .timeout = 120);

#define NONE UINT64_MAX

static const char *store(void)
{
    return tu_path("s.db"); /* the store itself need not exist */
}

static void open_table(rt_table *t)
{
    TU_OK(rt_open(t, store(), 0644));
    cr_assert(t->fd >= 0 && t->nslots == RT_SLOTS);
}

static bx_meta snapshot(uint64_t txn)
{
    bx_meta m = {.txn_id = txn, .end = 1000 + txn, .cat_depth = 3,
                 .cat_count = txn * 7};
    m.cat_root = (bn_ext){.pgno = 500 + txn, .npages = 2};
    return m;
}

typedef struct seen {
    bx_meta m[RT_SLOTS + 1];
    size_t n;
} seen;

static int collect(void *ctx, const bx_meta *m)
{
    seen *s = ctx;
    cr_assert(s->n <= RT_SLOTS);
    s->m[s->n++] = *m;
    return 0;
}

/* The snapshots another table sees, in slot order. */
static seen seen_by(const rt_table *t)
{
    seen s = {.n = 0};
    TU_OK(rt_each_snapshot(t, collect, &s));
    return s;
}

static int same(const bx_meta *a, const bx_meta *b)
{
    return a->txn_id == b->txn_id && a->end == b->end &&
           a->cat_root.pgno == b->cat_root.pgno &&
           a->cat_root.npages == b->cat_root.npages &&
           a->cat_depth == b->cat_depth && a->cat_count == b->cat_count;
}

Test(readers, a_published_snapshot_is_seen_until_released)
{
    rt_table reader, writer;
    open_table(&reader);
    open_table(&writer);
    cr_assert_eq(rt_oldest(&writer, NONE), NONE);
    bx_meta m = snapshot(41);
    uint32_t slot;
    TU_OK(rt_publish(&reader, &m, &slot));
    cr_assert_eq(rt_oldest(&writer, NONE), 41);
    cr_assert_eq(rt_oldest(&writer, 30), 30, "only older snapshots count");
    seen s = seen_by(&writer);
    cr_assert_eq(s.n, 1);
    cr_assert(same(&s.m[0], &m), "the slot's copy of the meta differs");
    rt_release(&reader, slot);
    cr_assert_eq(rt_oldest(&writer, NONE), NONE);
    cr_assert_eq(seen_by(&writer).n, 0);
    rt_close(&reader);
    rt_close(&writer);
}

Test(readers, snapshots_of_one_commit_share_a_slot)
{
    rt_table reader, writer;
    open_table(&reader);
    open_table(&writer);
    bx_meta a = snapshot(5), b = snapshot(9);
    uint32_t s1, s2, s3;
    TU_OK(rt_publish(&reader, &a, &s1));
    TU_OK(rt_publish(&reader, &a, &s2));
    TU_OK(rt_publish(&reader, &b, &s3));
    cr_assert_eq(s1, s2);
    cr_assert_neq(s1, s3);
    cr_assert_eq(seen_by(&writer).n, 2);
    rt_release(&reader, s1);
    cr_assert_eq(rt_oldest(&writer, NONE), 5, "a shared slot ended early");
    rt_release(&reader, s2);
    cr_assert_eq(rt_oldest(&writer, NONE), 9);
    /* the idle slot is reused, not a new one claimed */
    uint32_t s4;
    TU_OK(rt_publish(&reader, &a, &s4));
    cr_assert_eq(s4, s1);
    /* closing releases everything */
    rt_close(&reader);
    cr_assert_eq(rt_oldest(&writer, NONE), NONE);
    rt_close(&writer);
}

Test(readers, slots_run_out_cleanly)
{
    rt_table reader, other;
    open_table(&reader);
    open_table(&other);
    uint32_t slot;
    for (uint64_t i = 0; i < RT_SLOTS; i++) {
        bx_meta m = snapshot(100 + i);
        TU_OK(rt_publish(&reader, &m, &slot));
    }
    bx_meta m = snapshot(1);
    TU_RC(rt_publish(&reader, &m, &slot), BONSAI_READERS_FULL);
    TU_RC(rt_publish(&other, &m, &slot), BONSAI_READERS_FULL);
    cr_assert_eq(rt_oldest(&other, NONE), 100);
    rt_close(&reader);
    TU_OK(rt_publish(&other, &m, &slot));
    rt_close(&other);
}

Test(readers, a_dead_processs_slot_is_ignored_and_reused)
{
    rt_table writer;
    open_table(&writer);
    int up[2], down[2];
    cr_assert(pipe(up) == 0 && pipe(down) == 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        rt_table t;
        uint32_t slot = 0;
        bx_meta m = snapshot(3);
        int rc = rt_open(&t, store(), 0644);
        if (rc == 0)
            rc = rt_publish(&t, &m, &slot);
        ssize_t n = write(up[1], &rc, sizeof rc);
        char c;
        n = read(down[0], &c, 1);
        (void)n;
        _exit(0); /* no release: the kernel drops the slot's lock */
    }
    close(up[1]);
    close(down[0]);
    int rc = -1;
    cr_assert(read(up[0], &rc, sizeof rc) == sizeof rc);
    TU_OK(rc);
    cr_assert_eq(rt_oldest(&writer, NONE), 3);
    close(down[1]);
    int st;
    cr_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    close(up[0]);
    /* its words still say 3, but nobody owns the slot */
    cr_assert_eq(rt_oldest(&writer, NONE), NONE);
    cr_assert_eq(seen_by(&writer).n, 0);
    rt_table reader;
    open_table(&reader);
    bx_meta m = snapshot(8);
    uint32_t slot;
    TU_OK(rt_publish(&reader, &m, &slot));
    cr_assert_eq(slot, 0, "the dead process's slot was not reused");
    cr_assert_eq(rt_oldest(&writer, NONE), 8);
    rt_close(&reader);
    rt_close(&writer);
}

static const char *lock_path(void)
{
    return tu_path("s.db-lock");
}

static void write_at(const char *path, off_t off, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY);
    cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
    cr_assert(pwrite(fd, p, n, off) == (ssize_t)n);
    close(fd);
}

Test(readers, a_damaged_header_is_refused)
{
    rt_table t;
    open_table(&t);
    rt_close(&t);
    uint32_t bad_version = RT_VERSION + 1, bad_slots = RT_MAX_SLOTS + 1,
             v;
    static const uint8_t zero[RT_HEAD_BYTES];
    /* each damage alone, then the original value back */
    struct {
        off_t off;
        uint32_t val;
    } damage[] = {{0, 0x12345678}, {4, bad_version}, {8, bad_slots},
                  {8, RT_SLOTS - 1}, {12, 32}, {40, 1}};
    for (size_t i = 0; i < sizeof damage / sizeof damage[0]; i++) {
        int fd = open(lock_path(), O_RDONLY);
        cr_assert(pread(fd, &v, 4, damage[i].off) == 4);
        close(fd);
        write_at(lock_path(), damage[i].off, &damage[i].val, 4);
        TU_RC(rt_open(&t, store(), 0644), BONSAI_LOCKFILE);
        cr_assert_eq(t.fd, -1);
        write_at(lock_path(), damage[i].off, &v, 4);
        TU_OK(rt_open(&t, store(), 0644));
        rt_close(&t);
    }
    /* a file cut short */
    cr_assert(truncate(lock_path(), 100) == 0);
    TU_RC(rt_open(&t, store(), 0644), BONSAI_LOCKFILE);
    /* a header of zeros on a file of another size is no table's: no
     * creation leaves one, so it is refused and left as it is */
    write_at(lock_path(), 0, zero, sizeof zero);
    TU_RC(rt_open(&t, store(), 0644), BONSAI_LOCKFILE);
    struct stat st;
    cr_assert(stat(lock_path(), &st) == 0 && st.st_size == 100);
    /* a table's size and nothing but zeros is a creation that never
     * finished: made afresh */
    cr_assert(truncate(lock_path(), 0) == 0);
    cr_assert(truncate(lock_path(), RT_HEAD_BYTES +
                                    RT_SLOTS * RT_SLOT_BYTES) == 0);
    TU_OK(rt_open(&t, store(), 0644));
    cr_assert_eq(t.nslots, RT_SLOTS);
    cr_assert(stat(lock_path(), &st) == 0);
    cr_assert_eq((uint64_t)st.st_size, RT_HEAD_BYTES + RT_SLOTS * RT_SLOT_BYTES);
    rt_close(&t);
}

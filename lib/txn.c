/* SPDX-License-Identifier: MIT */
/*
 * txn.c - write transactions, read snapshots and the commit protocol (see
 * txn.h for its steps).
 *
 * One write transaction at a time (db->wtxn, set under db->lock).  A read
 * snapshot copies db->meta under the lock and registers its txn id in the
 * reader table; the writer frees pages released by commit T only when
 * every registered snapshot is >= T, and every snapshot a reader in
 * another process publishes in the lock file (readers.h) too.  A
 * read-only handle with a lock file reads the newest commit in the file
 * at each snapshot, not the one it opened with.
 */
#include "txn.h"

#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "cache.h"
#include "change.h"
#include "maps.h"
#include "metaslot.h"
#include "put.h"
#include "wait.h"

int txn_check(const bonsai_txn *txn)
{
    if (!txn || !txn->db)
        return BONSAI_INVALID;
    return 0;
}

int txn_check_write(const bonsai_txn *txn)
{
    int rc = txn_check(txn);
    if (rc)
        return rc;
    if (txn->rdonly)
        return BONSAI_READONLY;
    if (txn->failed)
        return BONSAI_BADTXN;
    if (txn->db->failed)
        return BONSAI_FAILED;
    return 0;
}

/* ---- readers ----------------------------------------------------------- */

static int add_reader(bonsai_db *db, uint64_t id)
{
    uint64_t *r = vec_room(db->readers, db->nreaders, &db->cap_readers,
                           sizeof *r, 8);
    if (!r)
        return BONSAI_NOMEM;
    db->readers = r;
    db->readers[db->nreaders++] = id;
    return 0;
}

static void remove_reader(bonsai_db *db, uint64_t id)
{
    for (size_t i = 0; i < db->nreaders; i++)
        if (db->readers[i] == id) {
            db->readers[i] = db->readers[--db->nreaders];
            return;
        }
}

static uint64_t oldest_snapshot(bonsai_db *db)
{
    uint64_t oldest = db->meta.txn_id;
    for (size_t i = 0; i < db->nreaders; i++)
        if (db->readers[i] < oldest)
            oldest = db->readers[i];
    return oldest;
}

/* A commit may overtake the check as often as the writer commits; this
 * many in a row means something else is wrong. */
#define PUBLISH_TRIES 100000

/* A read-only handle with a lock file, beside a writer that may be
 * committing in another process: the snapshot is the newest commit in
 * the file, published in a reader slot first and used only if it is
 * still the newest after that.  The writer frees pages only after writing
 * a newer meta and then scanning the slots (both sides fenced), so either
 * it sees the slot or this sees its meta and starts over.  Under db->lock.
 */
static int begin_shared_read(bonsai_db *db, bonsai_txn *txn)
{
    bx_meta m, now;
    int rc = bx_newest_meta(db, &m);
    for (unsigned tries = 0; rc == 0; tries++) {
        if (tries == PUBLISH_TRIES)
            return BONSAI_BUSY;
        if ((rc = rt_publish(&db->rt, &m, &txn->slot)))
            return rc;
        txn->in_slot = 1;
        if ((rc = bx_newest_meta(db, &now)) || now.txn_id == m.txn_id)
            break;
        rt_release(&db->rt, txn->slot);
        txn->in_slot = 0;
        m = now;
    }
    /* end is the file's word: a page count whose bytes pass 2^64 is
     * beyond any reservation (checked before the product wraps) */
    if (rc == 0)
        rc = m.end > db->rg.reserved / db->page_size
                 ? BONSAI_FULL
                 : region_follow(&db->rg, m.end * db->page_size);
    if (rc == 0)
        db->meta = m;
    return rc;
}

static int begin_read(bonsai_db *db, bonsai_txn *txn)
{
    txn->rdonly = 1;
    pthread_mutex_lock(&db->lock);
    int rc = 0;
    if (db->opt.read_only && db->rt.fd >= 0)
        rc = begin_shared_read(db, txn);
    txn->snap = db->meta;
    if (rc == 0 && (rc = add_reader(db, txn->snap.txn_id)) == 0)
        txn->listed = 1;
    pthread_mutex_unlock(&db->lock);
    txn->id = txn->snap.txn_id;
    return rc;
}

static void end_read(bonsai_txn *txn)
{
    bonsai_db *db = txn->db;
    pthread_mutex_lock(&db->lock);
    if (txn->listed)
        remove_reader(db, txn->snap.txn_id);
    if (txn->in_slot)
        rt_release(&db->rt, txn->slot);
    pthread_mutex_unlock(&db->lock);
    free(txn->rmaps);
    pk_cache_free(&txn->uc);
    br_cache_free(&txn->br);
    ld_drop(&txn->ld);
}

/* ---- writers ----------------------------------------------------------- */

/* Under db->lock: waits up to busy_timeout_ms for the write transaction
 * of another thread to end.  1 if it is still there. */
static int wait_for_writer(bonsai_db *db)
{
    if (db->wtxn && pthread_equal(db->wtxn_thread, pthread_self()))
        return 1; /* it would wait for itself */
    bx_wait w;
    bx_wait_start(&w, db->opt.busy_timeout_ms);
    while (db->wtxn)
        if (!bx_wait_cond(&w, &db->wtxn_ended, &db->lock))
            return db->wtxn != NULL;
    return 0;
}

/* Ends the write transaction's hold on the store and wakes a writer that
 * waits for it. */
static void release_writer(bonsai_db *db)
{
    pthread_mutex_lock(&db->lock);
    db->wtxn = NULL;
    pthread_cond_broadcast(&db->wtxn_ended);
    pthread_mutex_unlock(&db->lock);
}

static int begin_write(bonsai_db *db, bonsai_txn *txn)
{
    if (db->opt.read_only)
        return BONSAI_READONLY;
    if (db->failed)
        return BONSAI_FAILED;
    pthread_mutex_lock(&db->lock);
    int busy = wait_for_writer(db);
    uint64_t oldest = oldest_snapshot(db);
    txn->id = txn_next_id(db->meta.txn_id);
    if (!busy && txn->id) {
        db->wtxn = txn;
        db->wtxn_thread = pthread_self();
    }
    pthread_mutex_unlock(&db->lock);
    if (busy)
        return BONSAI_BUSY;
    if (!txn->id)
        return BONSAI_TXNID_FULL;
    /* scanning the reader slots costs a lock query per slot in use: only
     * when pages wait that in-process readers would let go */
    if (db->rt.fd >= 0 && db->al.nheld && db->al.held[0].txn <= oldest)
        oldest = rt_oldest(&db->rt, oldest);
    alloc_reclaim(&db->al, oldest);
    alloc_txn_begin(&db->al);
    db->wtxn_id = txn->id;
    return 0;
}

static void set_catalog(bonsai_db *db, const bx_meta *m)
{
    db->catalog = (bt_tree){.kind = BONSAI_KEY_BYTES};
    db->catalog.root.ext = m->cat_root;
    db->catalog.depth = m->cat_depth;
    db->catalog.count = m->cat_count;
}

static void abort_write(bonsai_db *db)
{
    bt_forget_changes(db);
    maps_after_abort(db);
    bt_discard(db, &db->catalog);
    set_catalog(db, &db->meta);
    alloc_txn_abort(&db->al);
    release_writer(db);
}

/* Steps 1 and 2 of the protocol for what is cached: every changed node
 * and record written.  A write-back plans every run before it writes a
 * byte, so one that fails for want of room has written nothing. */
static int write_cached(bonsai_db *db)
{
    int rc = bt_flush(db);
    if (rc == 0)
        rc = maps_store_records(db);
    if (rc == 0)
        rc = bt_flush(db);
    if (rc == 0)
        bt_after_flush(db);
    return rc;
}

/* Steps 1 and 2: the puts waiting to be applied too. */
static int write_changes(bonsai_db *db)
{
    int rc = put_apply_all(db);
    return rc ? rc : write_cached(db);
}

static bx_meta next_meta(bonsai_db *db, uint64_t txn_id)
{
    bx_meta m = {0};
    m.txn_id = txn_id;
    m.end = db->al.end;
    m.cat_root = db->catalog.root.ext;
    m.cat_depth = db->catalog.depth;
    m.cat_count = db->catalog.count;
    m.cap_pages = bx_cap_pages(db);
    return m;
}

/* Steps 3 to 5 (3 and 5 only when sync is asked for).  A failure here
 * leaves the file's state unknown, so the handle refuses further writes
 * (retrying an fsync is unsafe). */
static int make_durable(bonsai_db *db, const bx_meta *m, int sync)
{
    if (db->anonymous)
        return 0;
    int rc = 0;
    if (sync)
        rc = db->io.fsync(db->io.ctx, db->fd);
    if (rc == 0)
        rc = bx_write_meta(db, m);
    if (rc == 0 && sync)
        rc = db->io.fsync(db->io.ctx, db->fd);
    if (rc)
        db->failed = 1;
    return rc;
}

static void publish(bonsai_db *db, const bx_meta *m)
{
    pthread_mutex_lock(&db->lock);
    db->meta = *m;
    pthread_mutex_unlock(&db->lock);
}

static int commit_write(bonsai_db *db, bonsai_txn *txn)
{
    int rc = write_changes(db);
    if (rc) {
        abort_write(db);
        return rc;
    }
    bx_meta m = next_meta(db, txn->id);
    rc = make_durable(db, &m, db->opt.sync);
    /* the commit stands now: if its released pages cannot be recorded
     * they stay unused until the next open derives them free again */
    alloc_txn_commit(&db->al, txn->id);
    publish(db, &m);
    maps_after_commit(db);
    cache_after_change(db);
    db->wtxn_id = txn_next_id(txn->id);
    release_writer(db);
    return rc == BONSAI_IO || rc == BONSAI_ENOSPC ? BONSAI_FAILED : rc;
}

static int end_write_back(bonsai_db *db, int waiting_too, int sync)
{
    uint64_t id = txn_next_id(db->meta.txn_id);
    if (!id)
        return 0; /* change_directly let no change in: nothing to write */
    int rc = waiting_too ? write_changes(db) : write_cached(db);
    if (rc) {
        cache_note_failure(db, rc);
        return rc;
    }
    bx_meta m = next_meta(db, id);
    if ((rc = make_durable(db, &m, sync)))
        return BONSAI_FAILED;
    publish(db, &m);
    db->wtxn_id = txn_next_id(m.txn_id);
    return 0;
}

int txn_write_back(bonsai_db *db)
{
    /* after a refused write-back the cached nodes are tried alone first:
     * a disk that still refuses them is reported before a whole batch of
     * waiting puts is applied in vain */
    if (db->wb_error && db->dirty.n) {
        int rc = end_write_back(db, 0, 0);
        if (rc)
            return rc;
    }
    return end_write_back(db, 1, db->opt.sync);
}

int txn_write_back_cached(bonsai_db *db)
{
    return end_write_back(db, 0, 0);
}

/* ---- cursors tied to a transaction ------------------------------------- */

void txn_tie_cursor(bonsai_txn *txn, txn_tie *tie)
{
    tie->ended = 0;
    tie->prev = NULL;
    tie->next = txn->cursors;
    if (txn->cursors)
        txn->cursors->prev = tie;
    txn->cursors = tie;
}

void txn_untie_cursor(bonsai_txn *txn, txn_tie *tie)
{
    if (tie->ended)
        return;
    if (tie->prev)
        tie->prev->next = tie->next;
    else
        txn->cursors = tie->next;
    if (tie->next)
        tie->next->prev = tie->prev;
    tie->next = tie->prev = NULL;
}

static void end_cursors(bonsai_txn *txn)
{
    for (txn_tie *t = txn->cursors, *next; t; t = next) {
        next = t->next;
        t->next = t->prev = NULL;
        t->ended = 1;
    }
    txn->cursors = NULL;
}

/* ---- public calls ------------------------------------------------------ */

int bonsai_txn_begin(bonsai_db *db, unsigned flags, bonsai_txn **out)
{
    if (!db || !out || (flags & ~BONSAI_TXN_RDONLY))
        return BONSAI_INVALID;
    *out = NULL;
    if (!db->cow)
        return BONSAI_NOTSUP;
    bonsai_txn *txn = calloc(1, sizeof *txn);
    if (!txn)
        return BONSAI_NOMEM;
    txn->db = db;
    int rc = (flags & BONSAI_TXN_RDONLY) ? begin_read(db, txn)
                                          : begin_write(db, txn);
    if (rc) {
        if (txn->rdonly)
            end_read(txn);
        free(txn);
        return rc;
    }
    *out = txn;
    return 0;
}

int bonsai_txn_commit(bonsai_txn *txn)
{
    if (!txn)
        return BONSAI_INVALID;
    end_cursors(txn);
    int rc = 0;
    if (txn->rdonly) {
        end_read(txn);
    } else if (txn->failed) {
        abort_write(txn->db);
        rc = BONSAI_BADTXN;
    } else {
        rc = commit_write(txn->db, txn);
    }
    free(txn);
    return rc;
}

void bonsai_txn_abort(bonsai_txn *txn)
{
    if (!txn)
        return;
    end_cursors(txn);
    if (txn->rdonly)
        end_read(txn);
    else
        abort_write(txn->db);
    free(txn);
}

uint64_t bonsai_txn_id(const bonsai_txn *txn)
{
    return txn ? txn->id : 0;
}

/* ---- running changes and reads ----------------------------------------- */

int txn_change(bonsai_db *db, bonsai_txn *txn, txn_change_fn fn, void *arg)
{
    if (txn) {
        int rc = txn_check_write(txn);
        return rc ? rc : change_in_txn(txn, fn, arg);
    }
    if (!db)
        return BONSAI_INVALID;
    if (db->opt.read_only)
        return BONSAI_READONLY;
    if (!db->cow)
        return change_directly(db, fn, arg);
    bonsai_txn *own;
    int rc = bonsai_txn_begin(db, 0, &own);
    if (rc)
        return rc;
    rc = txn_change(db, own, fn, arg);
    if (rc) {
        bonsai_txn_abort(own);
        return rc;
    }
    return bonsai_txn_commit(own);
}

int txn_read(bonsai_db *db, bonsai_txn *txn, txn_read_fn fn, void *arg)
{
    if (txn) {
        int rc = txn_check(txn);
        return rc ? rc : fn(txn->db, txn, arg);
    }
    if (!db)
        return BONSAI_INVALID;
    if (!db->cow)
        return fn(db, NULL, arg);
    bonsai_txn *own;
    int rc = bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &own);
    if (rc)
        return rc;
    rc = fn(db, own, arg);
    /* values read may point into its unpacked images: they outlive the
     * snapshot until the next read without a transaction */
    pthread_mutex_lock(&db->lock);
    pk_cache_free(&db->auto_uc);
    db->auto_uc = own->uc;
    memset(&own->uc, 0, sizeof own->uc);
    pthread_mutex_unlock(&db->lock);
    bonsai_txn_commit(own);
    return rc;
}

int txn_tree_as_is(bonsai_db *db, bonsai_txn *txn, bonsai_map map,
                   bt_tree **t, bt_rd *rd)
{
    if (txn && txn->rdonly) {
        *rd = (bt_rd){txn->snap.end, &txn->uc, &txn->br, 0, &txn->ld};
        return maps_reader_tree(txn, map, t);
    }
    *rd = (bt_rd){db->al.end, &db->uc, NULL, 1, &db->ld};
    return maps_writer_tree(db, map, t);
}

int txn_tree(bonsai_db *db, bonsai_txn *txn, bonsai_map map, bt_tree **t,
             bt_rd *rd)
{
    int rc = txn_tree_as_is(db, txn, map, t, rd);
    if (rc || (txn && txn->rdonly))
        return rc;
    /* applying them may grow the store: the page limit comes after */
    rc = put_apply_waiting(db, map);
    rd->end = db->al.end;
    return rc;
}

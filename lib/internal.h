/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the private structs behind the public handles.
 *
 * A store has one writer state (db->maps[i].w, db->catalog and the dirty
 * lists): in transaction mode it belongs to the open write transaction,
 * in no-transaction mode to the store itself.  Read snapshots share
 * nothing mutable with it: they read node images through their own copy
 * of the meta slot.  db->lock guards the reader table, db->meta, and in a
 * read-only handle the reader slots it owns and the growth of its mapping.
 */
#ifndef BONSAI_INTERNAL_H
#define BONSAI_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "alloc.h"
#include "bonsai.h"
#include "brcache.h"
#include "btnode.h"
#include "io.h"
#include "leafdir.h"
#include "meta.h"
#include "node.h"
#include "pack.h"
#include "pageset.h"
#include "putbuf.h"
#include "readers.h"
#include "region.h"
#include "vec.h"

typedef struct bonsai_map_s map_entry;

/* How a reader reads a tree: the page limit its snapshot vouches for, the
 * cache its packed nodes unpack into, (a read transaction's; NULL for
 * the writer, whose pages change) the branches it keeps decoded,
 * whether the tree is the writer's own, whose decoded nodes a lookup may
 * add to (the thread reading it is the one that writes it), and the
 * table of leaves its lookups may build and use (NULL: none). */
typedef struct bt_rd {
    uint64_t end;
    pk_cache *uc;
    br_cache *br;
    int writer;
    leafdir *ld;
} bt_rd;



#define TREE_F_OVERFLOW 0x01u /* some leaf holds an overflow value */

/* One B-tree: a map or the catalog. */
typedef struct bt_tree {
    unsigned kind;
    bn_child root;    /* ext and, for the writer, the decoded root */
    uint8_t depth;    /* 0: empty, 1: the root is a leaf */
    uint8_t flags;    /* TREE_F_* */
    uint64_t count;   /* entries */
    int record_dirty; /* the catalog's record is out of date */
} bt_tree;

/* A reference the flush plan changed, to put back if the plan fails:
 * the entry for child in its parent of the moment, or the tree's root when
 * it has none. */
typedef struct ext_undo {
    bt_node *child;
    bt_tree *tree;
    bn_ext old;
} ext_undo;

/* An entry of the map table (bonsai_map points at one).  db and index
 * never change; name and kind not while the entry is in use (name not
 * NULL).  The last bonsai_map_close frees the entry (gen counts that)
 * and a later open may take it again, both under db->lock.  opens and
 * cursors are kept under db->lock; the rest is the writer's. */
struct bonsai_map_s {
    bonsai_db *db;
    uint32_t index;
    uint32_t gen;     /* times the entry was freed */
    char *name;       /* NULL: a free entry */
    unsigned kind;
    uint64_t opens;   /* handles given out by open and create, not closed */
    uint32_t cursors; /* cursors open on the map */
    int live;       /* 0 once dropped (or its creation was rolled back) */
    int loaded;     /* w holds the writer's state */
    int created;    /* created by the open write transaction */
    int dropped;    /* dropped by the open write transaction */
    bt_tree w;
    putbuf pb;      /* puts waiting to be applied to w (put.h) */
};

struct bonsai_db {
    bonsai_options opt;
    bx_io io;
    region rg;
    alloc al;
    int fd;
    int anonymous;
    int cow;             /* transactions on */
    int failed;          /* a sync failed: no more writes */
    uint32_t page_size;
    uint32_t format_version; /* the file's (anonymous: the library's) */
    uint32_t inline_max; /* longer values go to overflow extents */
    pk_rules pk;         /* what a packed image of this store may be */
    uint64_t first_pgno;

    pthread_mutex_t lock;
    bx_meta meta;        /* last commit */
    uint64_t *readers;   /* snapshot txn ids of open read txns */
    size_t nreaders, cap_readers;
    rt_table rt;         /* reader slots shared with other processes (fd
                          * -1: none); read-only handles publish their
                          * snapshots there, the writer respects them */

    /* writer state */
    bonsai_txn *wtxn;    /* open write transaction */
    pthread_t wtxn_thread;      /* the thread that began it */
    pthread_cond_t wtxn_ended;  /* signalled when wtxn goes back to NULL */
    uint64_t wtxn_id;    /* id the writer stamps on new images */
    uint64_t write_gen;  /* bumped by every change, for cursors */
    uint64_t settled_gen; /* write_gen after the last waiting put applied:
                             a change failing with write_gen there left
                             the trees whole */
    bt_tree catalog;
    map_entry *maps;
    uint32_t nmaps, cap_maps;
    ptrvec dirty;        /* decoded nodes changed since the last flush */
    ptrvec leaves;       /* decoded leaves (evicted after a flush) */
    ptrvec branches;     /* decoded branches (evicted once no decoded
                          * node lies below them) */
    ptrvec graveyard;    /* nodes removed from trees, freed after a flush */
    uint64_t nodes_max;      /* at least the nodes of every tree: counted
                              * at open, raised as nodes are made */
    uint64_t dirty_nodes;
    uint32_t grow_max;       /* the largest growth bound of a u64 node
                                sized since open (regroup.h), or of any
                                node where some were not (room.h) */
    pageset unread;          /* first pages of the u64 node images the
                                store opened with and has not read
                                since: grow_max does not know their
                                bounds (growth.c) */
    uint64_t unread_nodes;   /* how many */
    int grow_unsure;         /* a changed node's growth may exceed
                                grow_max (bt_size_unsure) */
    uint64_t dirty_since_ms; /* when the oldest unwritten change was made
                                (0: none, or no flush_delay_ms) */
    uint64_t full_at_pages;  /* 1 + the free pages when the last
                                write-back failed for want of room; 0
                                once one succeeds (bt_flush) */
    int wb_error;            /* BONSAI_ENOSPC or BONSAI_IO: what the last
                                write-back met (a full disk), 0 once one
                                succeeds (bt_flush) ... */
    uint64_t wb_error_ms;    /* ... and when (cache.c) */
    /* How a write-back of the cache is made: NULL, the changed nodes
     * only; without transactions on a file, txn_write_back_cached, which
     * also writes the records and a meta slot (set at open). */
    int (*write_back)(bonsai_db *db);
    uint64_t cache_bytes;    /* decoded nodes, recounted now and then */
    /* Bytes of branches lookups of the writer's tree may decode and
     * keep (view.c), set by each recount from the cache's budget, and
     * the bytes they have decoded since, which the cache counts too. */
    uint64_t read_room;
    uint64_t read_decoded;
    /* The lookups' table of the leaves of one tree (leafdir.h), true
     * while tree_gen and write_gen stay as they were when it was built;
     * tree_gen moves with every change to a tree's nodes or their places
     * (tree_moved). */
    leafdir ld;
    uint64_t tree_gen;
    uint32_t changes;        /* since the last recount */
    size_t leaves_counted;   /* decoded leaves at the last recount */
    size_t nodes_counted;    /* decoded leaves and branches then */
    size_t branches_kept;    /* decoded branches after the last eviction
                                of a change without a cache (txn.c) */
    uint64_t waiting;        /* puts waiting in the maps' putbufs ... */
    size_t waiting_bytes;    /* ... the memory they hold ... */
    size_t waiting_payload;  /* ... and their key and value bytes */
    extvec op_alloc;     /* no-txn: runs this operation handed out */
    extvec op_release;   /* runs to release once the change is final */
    extvec plan_freed;   /* flush without transactions: old homes freed
                          * by the plan, taken back if it fails */
    ext_undo *undo; /* ... and references it changed */
    size_t nundo, cap_undo;
    uint64_t defrag_left; /* node runs' worth of free pages in short runs
                             the last bt_defrag could not gather */
    uint8_t *scratch;    /* a raw image being packed, or made in place
                            (inplace.c) */
    size_t scratch_cap;
    uint64_t *run_keys;  /* inplace.c: a run's keys, then both merged */
    size_t run_keys_cap;
    pk_cache uc;         /* the writer's unpacked images */
    pk_cache auto_uc;    /* those of the last read without a txn */
    void *batch_sort;    /* the sort arrays of the last batched get, kept
                          * for the next one (getbatch.c; under lock) */
    size_t batch_sort_bytes;
    struct {             /* the leaf the last append went to, and ... */
        const bt_tree *tree;
        bt_node *leaf;
        uint64_t gen;    /* ... write_gen then: trusted as tree's tail
                            while no change, write-back or freeing of
                            decoded nodes came after (bt_tail_leaf_hinted) */
    } tail_hint;
    bt_tree *op_tree;    /* no-txn: the tree the change touches ... */
    bt_tree op_saved;    /* ... and its state before, for rollback */
};

/* A cursor's tie to the transaction it reads through.  The transaction
 * unties every cursor still open when it ends, so such a cursor answers
 * BONSAI_BADTXN instead of reaching into a freed transaction. */
typedef struct txn_tie {
    struct txn_tie *next, *prev;
    int ended;
} txn_tie;

struct bonsai_txn {
    bonsai_db *db;
    txn_tie *cursors;    /* open cursors of the caller's, tied to it */
    int rdonly;
    int failed;          /* an operation failed midway: only abort */
    uint64_t id;         /* snapshot (read) or new txn id (write) */
    bx_meta snap;        /* read: the meta it sees */
    int listed;          /* read: in db->readers */
    int in_slot;         /* read: published in db->rt ... */
    uint32_t slot;       /* ... in this reader slot */
    pk_cache uc;         /* read: its unpacked images */
    br_cache br;         /* read: its decoded branches */
    leafdir ld;          /* read: its lookups' table of leaves */
    struct rmap {        /* read: trees by map entry, loaded lazily */
        bt_tree t;
        uint32_t gen;    /* the entry's gen when loaded */
        uint8_t state;   /* 0 not yet, 1 loaded, 2 missing */
    } *rmaps;
    uint32_t nrmaps;
    int autocommit;
};

/* opts over the defaults (db.c): BONSAI_INVALID for a struct_size this
 * library does not know.  opts NULL gives the defaults. */
int bx_options_take(const bonsai_options *opts, bonsai_options *out);

/* The page size a new store of these options gets (page_size 0: the
 * default, meta.h). */
uint32_t bx_page_size_for(const bonsai_options *o);

#endif

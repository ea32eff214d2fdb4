/* SPDX-License-Identifier: MIT */
/*
 * bonsai.h - the public API of bonsai, an embedded ordered key-value store.
 *
 * A store (bonsai_db) lives in a memory-mapped file or in anonymous memory
 * ("direct memory", no file).  It holds named maps; each map is an ordered
 * B-tree whose keys are either unsigned 64-bit integers in numeric order or
 * byte strings in memcmp order, chosen when the map is created.
 *
 * Two modes:
 *  - transactions on (default for files): one write transaction at a time,
 *    commit or abort, copy-on-write, any number of read snapshots in other
 *    threads.  A commit is durable when it returns (unless sync is off).
 *  - transactions off (default for anonymous memory): every call applies
 *    directly, nodes are updated in place, there is no isolation and no
 *    crash safety.  Pass NULL wherever a bonsai_txn is asked for.
 *
 * Every function that can fail returns 0 or a negative BONSAI_* code;
 * bonsai_strerror() names it.  The library never prints, exits or aborts.
 *
 * Processes: one writer process, any number of reader processes.  A
 * read-write open takes an exclusive lock on the file (BONSAI_BUSY while
 * another handle, in any process, holds it; the kernel releases it when
 * the process dies).  A read-only open works beside it: each read snapshot
 * reads the newest commit in the file and publishes it in a reader slot of
 * the lock file PATH-lock, created beside the store by the first opener
 * with the store file's permissions; the writer never reuses pages a live
 * slot's snapshot reaches, even when it opens after the snapshot began,
 * and ignores the slots of dead processes.  Do not delete PATH-lock while
 * the store is open, and open a store by one name (symbolic links are
 * followed; hard links are not).  Where no lock file can be used (a read-only
 * directory or file system, a store file without write permission for its
 * owner) and for handles with transactions off, readers and a writer
 * exclude each other instead: whichever opens second gets BONSAI_BUSY.
 * Anonymous stores have no lock file.  A handle belongs to the process
 * that opened it: a child made by fork() must open the store itself.
 *
 * Threads: a bonsai_db may be shared by threads.  In transaction mode each
 * transaction (and its cursors) belongs to one thread at a time; read
 * transactions may run in many threads while one writer works.  In
 * no-transaction mode the whole store is single-threaded: serialise all
 * calls yourself.
 *
 * Memory: bonsai_val results point into the store or into transaction
 * buffers; they stay valid until the next write in the same transaction, or
 * its end, whichever comes first.  In a store with node compression a
 * value from bonsai_get points into a small cache of unpacked nodes and
 * stays valid only until the next call on the same transaction (with a
 * NULL txn: the next such call on the store).  Copy what you keep.
 */
#ifndef BONSAI_H
#define BONSAI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions of the library's ABI: the shared library exports
 * these and nothing else (it is built with -fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define BONSAI_API __attribute__((visibility("default")))
#else
#define BONSAI_API
#endif

#define BONSAI_VERSION_MAJOR 0
#define BONSAI_VERSION_MINOR 1
#define BONSAI_VERSION_PATCH 0

/* ---- error codes (all negative) --------------------------------------- */
#define BONSAI_OK 0
#define BONSAI_NOTFOUND (-30701)  /* key or map not present; cursor at end */
#define BONSAI_EXISTS (-30702)    /* key (NOOVERWRITE) or map already exists */
#define BONSAI_FULL (-30703)      /* the store reached max_size */
#define BONSAI_CORRUPT (-30704)   /* the file or a node failed a check */
#define BONSAI_FORMAT_UNSUPPORTED (-30705) /* file format this library cannot
                                             read (a newer version) */
#define BONSAI_INVALID (-30706)   /* bad argument (NULL handle, bad option) */
#define BONSAI_KEYSIZE (-30707)   /* key empty, too long, or wrong size */
#define BONSAI_VALSIZE (-30708)   /* value longer than BONSAI_MAX_VALUE */
#define BONSAI_NOMEM (-30709)     /* malloc or mmap failed */
#define BONSAI_IO (-30710)        /* read, write, sync or truncate failed */
#define BONSAI_BUSY (-30711)      /* another handle holds the write lock */
#define BONSAI_READONLY (-30712)  /* write through a read-only store or txn */
#define BONSAI_BADTXN (-30713)    /* txn finished, failed, or wrong mode */
#define BONSAI_MAPKIND (-30714)   /* map used with the other key kind */
#define BONSAI_ENOSPC (-30715)    /* the disk is full */
#define BONSAI_FAILED (-30716)    /* an earlier sync failed; handle unusable */
#define BONSAI_NOTSUP (-30717)    /* not supported in this mode */
#define BONSAI_MAPS_FULL (-30718) /* BONSAI_MAX_MAPS maps open in this
                                     handle (see bonsai_map_close) */
#define BONSAI_LOCKFILE (-30719)  /* PATH-lock is damaged or not bonsai's */
#define BONSAI_READERS_FULL (-30720) /* every reader slot of PATH-lock is
                                        owned */
#define BONSAI_TXNID_FULL (-30721)   /* the last commit's id is 2^64-1: no
                                        larger one for another write */

/* Returns a static, human-readable description of an error code. */
BONSAI_API const char *bonsai_strerror(int err);

/* The version of the library linked in, as "MAJOR.MINOR.PATCH"; each of
 * major, minor, patch may be NULL.  The BONSAI_VERSION_* macros give the
 * version of this header. */
BONSAI_API const char *bonsai_version(int *major, int *minor, int *patch);

/* ---- limits ------------------------------------------------------------ */
#define BONSAI_MAX_KEY 1024u             /* bytes; byte-string keys */
#define BONSAI_MAX_VALUE (1u << 30)      /* bytes (1 GiB) */
#define BONSAI_MAX_NAME 255u             /* map name bytes, without NUL */
#define BONSAI_MAX_NODE_ENTRIES 65535u
#define BONSAI_MAX_MAPS 4096u            /* maps open at once in one handle
                                            (a store may hold any number) */
#define BONSAI_MAX_SIZE (UINT64_C(1) << 63) /* the largest max_size: no file
                                               is larger (off_t) */

/* ---- types ------------------------------------------------------------- */
typedef struct bonsai_db bonsai_db;         /* an open store */
typedef struct bonsai_txn bonsai_txn;       /* a transaction or snapshot */
typedef struct bonsai_cursor bonsai_cursor; /* a position in one map */
typedef struct bonsai_map_s *bonsai_map;    /* a named map of one db; valid
                                              until the db closes or
                                              bonsai_map_close frees it */

/* A counted byte string.  For u64-key maps a key is 8 bytes holding a
 * uint64_t in native byte order (or use the *_u64 calls). */
typedef struct bonsai_val {
    size_t size;
    const void *data;
} bonsai_val;

/* Key kinds, chosen at map creation and stored in the file. */
#define BONSAI_KEY_BYTES 1u /* byte strings, memcmp order, 1..1024 bytes */
#define BONSAI_KEY_U64 2u   /* unsigned 64-bit integers, numeric order */

/* ---- options ----------------------------------------------------------- */
typedef struct bonsai_options {
    /* sizeof(bonsai_options) as the program was compiled; set by
     * bonsai_options_init.  It lets the struct grow: a library newer than
     * the program's header gives the fields the program does not know
     * their defaults, and bonsai_open refuses (BONSAI_INVALID) a size it
     * does not know.  Always start from bonsai_options_init. */
    uint32_t struct_size;
    /* The cap: the store never uses more than this many bytes of file or
     * memory; an insert that would need more fails with BONSAI_FULL.
     * The cap belongs to the store: a file records it in every commit.
     * 0 (default) = the cap the file records, or 1 GiB for a new store
     * (and a file from before caps were recorded); else 64 KiB to
     * BONSAI_MAX_SIZE (BONSAI_INVALID otherwise).  Open reserves the cap
     * as address space: a cap beyond what the process may map is
     * BONSAI_NOMEM.  Setting it on open raises or lowers the cap (never
     * below what the file already uses), recorded with the next commit
     * (no-transaction mode: the next bonsai_sync or close). */
    uint64_t max_size;
    /* Allocation granule in bytes: a power of two, 64..65536.  Node images
     * occupy a run of whole pages, so a small page wastes less at the end
     * of each image (a compressed image of 30 bytes takes 64, not 512).
     * Default 0: 128 (an image wastes 64 bytes on average, 3 % of a
     * random fill's leaf).  Smaller pages cost bitmap memory, 2 bits a
     * page, and near the cap cut the free space into more runs too short
     * for a node.  In a file, pages below the disk's sector put several
     * images in one sector, and a commit rewrites unchanged the bytes of
     * committed images beside the ones it writes (msync writes whole
     * memory pages, so it does at any page size): a device must not harm
     * bytes a write leaves as they were, SQLite's "powersafe overwrite",
     * which it assumes by default.  Fixed at creation. */
    uint32_t page_size;
    /* Target encoded size of a node in bytes (a node splits beyond it).
     * 256..1 MiB, default 4096.  Fixed at creation. */
    uint32_t node_bytes;
    /* Maximum entries in a node (MapDB used 32 and 120).  2..65535,
     * default 4096.  Fixed at creation. */
    uint32_t node_entries;
    /* 1 = transactions, 0 = no-transaction mode, -1 (default) = on for a
     * file, off for anonymous memory. */
    int transactions;
    /* 1 (default) = a commit syncs data, then the meta slot, before it
     * returns; 0 = leave writing back to the OS: faster, but a crash of
     * the machine may lose recent commits or, as with LMDB's
     * MDB_NOSYNC, leave the file unusable. */
    int sync;
    /* 1 = open read-only: no writes; readers never block each other, and
     * with transactions on (the default for files) a writer in another
     * process may commit meanwhile: every read snapshot sees the newest
     * commit (see "Processes" above).  max_size then bounds how large the
     * store may grow while this handle is open (BONSAI_FULL from
     * bonsai_txn_begin beyond it). */
    int read_only;
    /* 1 (default) = create the file if it does not exist. */
    int create;
    /* Permission bits for a created file; default 0644. */
    uint32_t file_mode;
    /* The write cache: changed nodes stay decoded in memory and are
     * encoded once, when the cache holds more than this many bytes, when
     * flush_delay_ms has passed, at commit, bonsai_sync or close.
     * Up to 15/16 of it also holds puts waiting for their leaf (their
     * entries, index and bytes, counted as allocated):
     * a put that does not append to a decoded leaf waits, and waiting
     * puts are applied in key order, each leaf decoded and encoded once
     * per batch (gets see them at once; cursors, counts, deletes and
     * commits apply them first).  Their room is counted when they are accepted, so they
     * never meet BONSAI_FULL later.
     * When writing the cache back meets a full disk, every change after
     * answers BONSAI_ENOSPC (nothing changed) while the cache is over its
     * budget: the write-back is tried again once a second, or by
     * bonsai_sync.
     * Lookups made without a read transaction keep the branches they pass
     * decoded in up to half of what the cache has free (a read
     * transaction keeps its own, outside this budget).
     * 0 = no cache: without transactions every call writes its nodes at
     * once (MapDB's "direct" mode).  Default 32 MiB. */
    uint64_t write_cache_bytes;
    /* Write cached changes once the oldest is this old (checked on each
     * change; no background thread).  0 (default) = no delay limit. */
    uint32_t flush_delay_ms;
    /* Node compression: BONSAI_COMPRESS_NONE (default), _LZ4 or _ZLIB.
     * node_bytes then bounds a node's uncompressed image; the stored image
     * takes only the pages its compressed form needs (an image that does
     * not shrink is stored raw).  Fixed at creation, stored in the file. */
    unsigned compression;
    /* zlib level 1..9 (0 = default, 6); ignored for other codecs. */
    int compression_level;
    /* How long a writer waits for another, in milliseconds, before
     * BONSAI_BUSY: bonsai_txn_begin (and a call with a NULL txn in a store
     * with transactions) for the write transaction of another thread, and
     * bonsai_open for another process that has the file open read-write
     * (or, where there is no lock file, read-only when this open wants to
     * write, and the other way round).  0 (default) = fail at once;
     * BONSAI_WAIT_FOREVER = wait as long as it takes.  A thread that
     * holds the write transaction and asks for another gets BONSAI_BUSY
     * at once: it would wait for itself. */
    uint32_t busy_timeout_ms;
    /* Anonymous memory: 1 = max_size is the memory of the store and its
     * write cache together: the store's pages get max_size less
     * write_cache_bytes, so that a store filled to BONSAI_FULL, with its
     * cache full, holds about max_size bytes of memory in all.  Then
     * write_cache_bytes must be below half of max_size.  0 (default) =
     * max_size bounds the store alone.  No effect on a file, whose cap
     * bounds the file. */
    int cache_in_cap;
} bonsai_options;

#define BONSAI_WAIT_FOREVER UINT32_MAX

#define BONSAI_COMPRESS_NONE 0u
#define BONSAI_COMPRESS_LZ4 1u
#define BONSAI_COMPRESS_ZLIB 2u

/* Fills *opts with the defaults documented above, struct_size included.
 * A macro, so that the size is that of the program's own header. */
#define bonsai_options_init(opts) \
    bonsai_options_init_sized((opts), sizeof *(opts))
BONSAI_API void bonsai_options_init_sized(bonsai_options *opts, size_t size);

/* Why bonsai_open would refuse opts with BONSAI_INVALID: a sentence that
 * names the first option out of range and the values it may take (static
 * text), or NULL when every option is in range (NULL opts too).  It
 * checks the options alone, not the file or the system. */
BONSAI_API const char *bonsai_options_check(const bonsai_options *opts);

/* ---- store ------------------------------------------------------------- */

/* Opens or creates a store.  path NULL means anonymous memory.  opts NULL
 * means defaults.  Errors: BONSAI_INVALID (bad option), BONSAI_IO (open,
 * read or map failed, path is a directory), BONSAI_NOTFOUND (file missing
 * and create is 0), BONSAI_CORRUPT (no valid meta slot, bad header),
 * BONSAI_FORMAT_UNSUPPORTED, BONSAI_BUSY (another writer holds the file; or, without
 * a lock file, a reader when opening to write and a writer when opening to
 * read), BONSAI_READONLY (file not writable and read_only is 0),
 * BONSAI_LOCKFILE (PATH-lock exists but is not a lock file bonsai made:
 * a symbolic link, not a regular file, damaged or foreign; it is never
 * followed or written: remove it when no process has the store open),
 * BONSAI_NOMEM. */
BONSAI_API int bonsai_open(const char *path, const bonsai_options *opts, bonsai_db **db);

/* Closes the store.  In no-transaction mode on a file it first writes
 * everything back and syncs (its result is returned).  An open write
 * transaction is aborted.  Read transactions and cursors must be finished
 * before.  db NULL is a no-op returning 0.  The handle is freed even when
 * an error is returned. */
BONSAI_API int bonsai_close(bonsai_db *db);

/* No-transaction mode: writes the write cache back and, on a file, syncs
 * data and writes the meta slot; the memory kept for the next batch of
 * waiting puts is given back.  Transaction mode: syncs (useful when sync
 * is off).  Errors: BONSAI_IO, BONSAI_ENOSPC (the disk is full: the
 * changes stay in the write cache, and a later sync writes them once the
 * disk has room), BONSAI_FAILED. */
BONSAI_API int bonsai_sync(bonsai_db *db);

/* Changes the cap of an open store to bytes, as mdb_env_set_mapsize does:
 * higher, or lower down to what the store uses now, and records it in
 * the file (with transactions: in a commit of its own, which waits for
 * the write transaction as bonsai_txn_begin does; without: it first
 * writes the write cache back, as bonsai_sync does).  Errors:
 * BONSAI_INVALID (below 64 KiB or below what the store uses),
 * BONSAI_READONLY, BONSAI_BUSY, BONSAI_NOMEM (the address space after the
 * store is taken: reopen with the larger max_size), and those of
 * bonsai_txn_commit or bonsai_sync. */
BONSAI_API int bonsai_set_max_size(bonsai_db *db, uint64_t bytes);

/* Facts about the whole store. */
typedef struct bonsai_stat {
    uint64_t txn_id;        /* last committed transaction (read-only
                               handle: the last one a snapshot began at) */
    uint64_t max_size;      /* the cap in bytes */
    uint64_t bytes_mapped;  /* bytes of file or memory mapped now */
    uint64_t bytes_used;    /* bytes up to the highest allocated page */
    uint64_t bytes_free;    /* free bytes below that mark */
    uint32_t page_size;
    uint32_t node_bytes;
    uint32_t node_entries;
    uint32_t format_version;
    uint64_t cache_bytes;   /* decoded nodes held in memory, and the heap
                               malloc keeps beside them */
    int transactions;
    int anonymous;
} bonsai_stat;

BONSAI_API int bonsai_db_stat(bonsai_db *db, bonsai_stat *st);

/* ---- inspection: verify and compact ----------------------------------- */

/* Called once per problem verify finds: the map ("" for the file, the
 * catalog or free space), the page the problem is at (0 if none) and a
 * sentence, "SUBJECT: found FOUND (expected EXPECTED)": what it is about
 * (a node, a meta slot, ...), what was found there and what was expected
 * instead, e.g. "leaf: found checksum 0x1c2d3e4f stored (expected
 * 0x5a6b7c8d, the checksum of the image)".  A few problems are no value
 * where another belonged (a part that cannot be read); theirs is
 * "SUBJECT: NOTE". */
typedef void (*bonsai_problem_fn)(void *ctx, const char *map, uint64_t pgno,
                                  const char *what);
/* Called now and then during a long verify: pages checked of total. */
typedef void (*bonsai_progress_fn)(void *ctx, uint64_t done, uint64_t total);

#define BONSAI_VERIFY_QUICK 1u /* meta slots and tree structure only */

/* Checks the whole store from the last commit (a snapshot; the store may
 * be open read-only): both meta slots and their checksums, every node's
 * checksum, bounds, key order within and across nodes and separators,
 * entry counts, overflow values, that no page is referenced twice and that
 * used plus free pages cover the file.  In no-transaction mode it first
 * writes cached changes back, as bonsai_sync does.  Reports every problem
 * through fn
 * (may be NULL) and keeps going; *problems (may be NULL) gets their
 * number.  Returns 0 when the walk completed (problems or not),
 * BONSAI_NOMEM / BONSAI_IO if it could not. */
BONSAI_API int bonsai_verify(bonsai_db *db, unsigned flags, bonsai_problem_fn fn,
                  bonsai_progress_fn progress, void *ctx, uint64_t *problems);

/* Where the store's space goes, from a walk of the last commit (like
 * bonsai_verify, it costs O(nodes)): used by bonsai-stat and compact.
 * Read snapshots are those of this handle only. */
typedef struct bonsai_space {
    uint64_t txn_id;         /* the commit examined */
    uint64_t file_bytes;     /* the file's size (0: anonymous memory) */
    uint64_t end_bytes;      /* bytes below the high-water mark */
    uint64_t head_bytes;     /* the header and meta slots */
    uint64_t node_bytes;     /* pages of the maps' node images */
    uint64_t catalog_bytes;  /* pages of the catalog's node images */
    uint64_t overflow_bytes; /* pages of out-of-line values */
    uint64_t free_bytes;     /* pages below end that nothing references */
    uint64_t free_extents;   /* maximal runs of free pages */
    uint64_t largest_free;   /* bytes of the longest */
    uint64_t readers;        /* read snapshots open in this handle */
    uint64_t oldest_reader;  /* txn id the oldest of them reads (0: none) */
    int shared_readers;      /* 1: the two below are known (a lock file) */
    uint64_t all_readers;    /* snapshots published in the lock file by
                                every process, this one's included */
    uint64_t oldest_any;     /* txn id the oldest of them reads (0: none) */
    unsigned compression;    /* BONSAI_COMPRESS_* */
    int compression_level;
    uint64_t problems;       /* met by the walk: figures are partial */
} bonsai_space;

BONSAI_API int bonsai_space_stat(bonsai_db *db, bonsai_space *sp);

/* Writes a copy of the store's last commit to dst_path with every node
 * full and no free space, under opts (NULL: the source's settings;
 * compression, node_bytes, node_entries and page_size may differ).  The
 * copy is written to a temporary file beside dst_path, synced, verified,
 * then renamed over dst_path; the source is only read (without
 * transactions it is synced first).  Errors: those of bonsai_open,
 * bonsai_sync, bonsai_put, BONSAI_CORRUPT (source or copy fails verify),
 * BONSAI_FULL (with the source's settings the copy came out larger: dst
 * is left alone), BONSAI_INVALID (dst is the source), BONSAI_IO (dst is a
 * directory, a device or anything else but a regular file). */
BONSAI_API int bonsai_compact(bonsai_db *src, const char *dst_path,
                   const bonsai_options *opts);

/* ---- transactions ------------------------------------------------------ */
#define BONSAI_TXN_RDONLY 1u

/* Begins a transaction.  flags 0 = write transaction (one at a time per
 * store: BONSAI_BUSY if one is active), BONSAI_TXN_RDONLY = a read
 * snapshot that sees the last commit and nothing after (in a read-only
 * handle: the newest commit in the file, made by whichever process).  A
 * read snapshot keeps the branch nodes its lookups pass through decoded,
 * up to 8 MiB, so that a long one searches them as fast as a store in
 * anonymous memory; that memory is freed when it ends.  In
 * no-transaction mode transactions are not supported (BONSAI_NOTSUP);
 * pass NULL instead.  Errors: BONSAI_READONLY, BONSAI_BUSY, BONSAI_NOMEM,
 * BONSAI_FAILED; in a read-only handle also BONSAI_READERS_FULL (every
 * slot of PATH-lock in use: snapshots at 127 distinct commits are open
 * across processes), BONSAI_FULL (the store grew beyond this handle's
 * max_size), BONSAI_CORRUPT; for a write transaction BONSAI_TXNID_FULL
 * (the last commit's id is 2^64-1, the largest: ids never wrap, so no
 * write can follow; read snapshots still work). */
BONSAI_API int bonsai_txn_begin(bonsai_db *db, unsigned flags, bonsai_txn **txn);

/* Commits and frees the transaction, whatever the result.  On error the
 * transaction is rolled back.  A read transaction just ends.  Errors:
 * BONSAI_FULL, BONSAI_IO, BONSAI_ENOSPC, BONSAI_FAILED (sync failed: the
 * handle refuses further writes), BONSAI_NOMEM. */
BONSAI_API int bonsai_txn_commit(bonsai_txn *txn);

/* Rolls back and frees the transaction.  NULL is a no-op. */
BONSAI_API void bonsai_txn_abort(bonsai_txn *txn);

/* The id of the snapshot a transaction reads (read) or will write. */
BONSAI_API uint64_t bonsai_txn_id(const bonsai_txn *txn);

/* ---- maps -------------------------------------------------------------- */
/* Everywhere below, txn may be NULL: in no-transaction mode the call then
 * applies directly; in transaction mode it runs in a transaction of its
 * own (autocommit for changes, a fresh snapshot for reads: a value read
 * that way stays valid until the next commit).  A txn given must belong
 * to the same db as the map (BONSAI_INVALID otherwise).  A change with a
 * NULL txn fails with BONSAI_TXNID_FULL, changing nothing, once the last
 * commit (write-back, in no-transaction mode) has id 2^64-1. */

/* Creates a map with the given key kind.  Errors: BONSAI_EXISTS (the name
 * exists; *map is still set when the kinds agree), BONSAI_INVALID (name
 * empty or longer than BONSAI_MAX_NAME, bad kind), BONSAI_READONLY,
 * BONSAI_FULL, BONSAI_MAPS_FULL, BONSAI_ENOSPC, BONSAI_IO. */
BONSAI_API int bonsai_map_create(bonsai_db *db, bonsai_txn *txn, const char *name,
                      unsigned kind, bonsai_map *map);

/* Opens an existing map; *kind (may be NULL) receives its key kind.
 * Errors: BONSAI_NOTFOUND, BONSAI_INVALID, BONSAI_MAPS_FULL. */
BONSAI_API int bonsai_map_open(bonsai_db *db, bonsai_txn *txn, const char *name,
                    bonsai_map *map, unsigned *kind);

/* Map handles, as LMDB's database handles: opening (or creating) a map
 * that is open already gives the same handle, and a handle lasts until
 * the store closes, so most programs never close one.  A handle holds
 * one of the store's BONSAI_MAX_MAPS entries, though: a program that goes
 * through more maps than that (bonsai-dump and bonsai-load do) closes each
 * when done.
 *
 * bonsai_map_close undoes one bonsai_map_open or bonsai_map_create that
 * gave this handle (BONSAI_EXISTS with *map set counts); the last one
 * frees it, and the handle must not be used again (another map may get
 * its entry).  Changes to the map in the open write transaction (or, in
 * no-transaction mode, not yet written back) stay: they are moved into
 * the transaction's catalog first, and commit or abort as usual; call it
 * then from the thread that runs the transaction.  The map itself is not
 * touched, and any read snapshot keeps seeing it.  Errors: BONSAI_INVALID
 * (not a handle of db, or closed), BONSAI_BUSY (a cursor on the map is
 * open), and moving the changes: BONSAI_FULL, BONSAI_NOMEM, BONSAI_IO,
 * BONSAI_BADTXN (the write transaction failed: abort it); on error the
 * handle stays open.  Like LMDB's mdb_dbi_close, not for a handle that
 * another thread is using. */
BONSAI_API int bonsai_map_close(bonsai_db *db, bonsai_map map);

/* Deletes a map and all its entries.  Its handles stay safe to pass but
 * find no map: every call through them answers BONSAI_NOTFOUND, except
 * in a read snapshot begun before the drop, which still sees the map.  A
 * map created again under the name is reached through them again.
 * Errors: BONSAI_NOTFOUND, BONSAI_READONLY, BONSAI_FULL, BONSAI_ENOSPC,
 * BONSAI_IO. */
BONSAI_API int bonsai_map_drop(bonsai_db *db, bonsai_txn *txn, const char *name);

/* Calls fn for every map in name order, with its entries (puts still
 * waiting in the write cache included); a non-zero return from fn stops
 * the walk and is returned.  It only reads: it needs no room and writes
 * nothing.  Errors: BONSAI_INVALID, BONSAI_NOMEM, BONSAI_CORRUPT. */
typedef int (*bonsai_map_fn)(void *ctx, const char *name, unsigned kind,
                             uint64_t entries);
BONSAI_API int bonsai_map_list(bonsai_db *db, bonsai_txn *txn, bonsai_map_fn fn,
                    void *ctx);

/* Number of entries in the map, O(1). */
BONSAI_API int bonsai_count(bonsai_txn *txn, bonsai_map map, uint64_t *count);

/* The shape of one map: walks every node (reading each leaf's header), so
 * it costs O(nodes); not for every call.  Changes still in the write cache
 * count with their estimated sizes. */
typedef struct bonsai_map_info {
    uint64_t entries;
    uint32_t depth;         /* 0 empty, 1 a single leaf */
    uint64_t branch_nodes;
    uint64_t leaf_nodes;
    uint64_t raw_bytes;     /* node images before compression */
    uint64_t stored_bytes;  /* node images as stored */
    uint64_t page_bytes;    /* whole pages the node images occupy */
    uint64_t overflow_values;
    uint64_t overflow_bytes; /* pages of out-of-line values */
    double leaf_fill;       /* mean leaf raw size / node_bytes, 0..1+ */
} bonsai_map_info;

BONSAI_API int bonsai_map_stat(bonsai_txn *txn, bonsai_map map, bonsai_map_info *st);

/* ---- data -------------------------------------------------------------- */
#define BONSAI_NOOVERWRITE 1u /* put fails with BONSAI_EXISTS if present */

/* Inserts or overwrites.  With BONSAI_NOOVERWRITE an existing key is left
 * as it is, BONSAI_EXISTS is returned and *val... is not touched.  Errors:
 * BONSAI_KEYSIZE, BONSAI_VALSIZE, BONSAI_FULL (nothing changed; the map is
 * consistent), BONSAI_READONLY, BONSAI_MAPKIND, BONSAI_INVALID,
 * BONSAI_NOTFOUND (the map was dropped), BONSAI_NOMEM, BONSAI_IO,
 * BONSAI_ENOSPC, BONSAI_CORRUPT. */
BONSAI_API int bonsai_put(bonsai_txn *txn, bonsai_map map, const bonsai_val *key,
               const bonsai_val *val, unsigned flags);

/* Looks a key up.  *val receives the value (see "Memory" above).  Errors:
 * BONSAI_NOTFOUND, BONSAI_KEYSIZE, BONSAI_CORRUPT. */
BONSAI_API int bonsai_get(bonsai_txn *txn, bonsai_map map, const bonsai_val *key,
               bonsai_val *val);

/* Deletes a key.  Errors: BONSAI_NOTFOUND, BONSAI_READONLY, BONSAI_FULL
 * (nothing changed: a copy-on-write delete needs space; without
 * transactions only a store at its cap refuses one, rarely: where taking
 * the key out lengthens a node's encoding past the pages it has),
 * BONSAI_ENOSPC, BONSAI_IO, BONSAI_CORRUPT. */
BONSAI_API int bonsai_del(bonsai_txn *txn, bonsai_map map, const bonsai_val *key);

/* u64-key conveniences; val may be NULL for an empty value. */
BONSAI_API int bonsai_put_u64(bonsai_txn *txn, bonsai_map map, uint64_t key,
                   const bonsai_val *val, unsigned flags);
BONSAI_API int bonsai_get_u64(bonsai_txn *txn, bonsai_map map, uint64_t key,
                   bonsai_val *val);
BONSAI_API int bonsai_del_u64(bonsai_txn *txn, bonsai_map map, uint64_t key);

/* Looks up n keys of one map at once: for each i, found[i] = 1 and
 * vals[i] the value of keys[i], or found[i] = 0 and vals[i] = {0, NULL}
 * when the key is absent.  The answers are those of n calls of bonsai_get
 * in the same transaction (puts still waiting in the write cache
 * included), found faster: the keys are looked up in key order, so that
 * each leaf is searched for all its keys in a row and the cache misses of
 * several keys overlap.  Keys may come in any order and repeat; n = 0
 * returns 0 (keys, vals and found may then be NULL).  The call sorts
 * the keys in 16 bytes of memory a key, which the store keeps for the
 * next batch until bonsai_close (the largest batch's up to 2 Mi keys, 32
 * MiB; one at a time: a batch running beside it in another thread takes
 * its own), using vals (which must not overlap keys) as scratch space
 * before it answers.  Values stay valid as those of bonsai_get do (see
 * "Memory" above), all those of a batch together: in a store with node
 * compression, until the next call on the same transaction (NULL txn: the
 * next such call on the store), for which the values of compressed nodes
 * are copied into memory of the transaction (or store), reused by the
 * next batch.  Errors: BONSAI_INVALID (a NULL array, a key of size > 0
 * with NULL data, a map or txn as for bonsai_get), BONSAI_KEYSIZE (a key
 * empty, longer than BONSAI_MAX_KEY, or not 8 bytes in a u64 map),
 * BONSAI_MAPKIND (the _u64 form on a byte-key map), BONSAI_NOTFOUND (the
 * map was dropped), BONSAI_BADTXN, BONSAI_NOMEM, BONSAI_CORRUPT; after
 * an error the contents of vals and found are unspecified. */
BONSAI_API int bonsai_get_batch(bonsai_txn *txn, bonsai_map map,
                                const bonsai_val *keys, size_t n,
                                bonsai_val *vals, uint8_t *found);
BONSAI_API int bonsai_get_batch_u64(bonsai_txn *txn, bonsai_map map,
                                    const uint64_t *keys, size_t n,
                                    bonsai_val *vals, uint8_t *found);

/* ---- cursors ----------------------------------------------------------- */
/* A cursor walks one map in key order.  Close it before its transaction
 * ends (in no-transaction mode: before the store closes); a cursor whose
 * transaction has ended answers every call with BONSAI_BADTXN and must
 * still be closed.  A cursor opened with a NULL txn in transaction mode
 * reads a snapshot of its own until it closes.  Moves return
 * BONSAI_NOTFOUND at either end or in an empty map; the cursor then has
 * no current entry.
 *
 * Ends.  A cursor that ran off an end stands beyond it and can come back,
 * as LMDB's does: after bonsai_cursor_next (or a seek, or first in an
 * empty map) answered BONSAI_NOTFOUND, the cursor is past the last key:
 * next answers BONSAI_NOTFOUND again, prev goes to the last key.  After
 * bonsai_cursor_prev (or seek_le, or last in an empty map) answered
 * BONSAI_NOTFOUND, it is before the first key: prev answers
 * BONSAI_NOTFOUND again, next goes to the first key.  A cursor not yet
 * positioned (just opened, after an error, or after a range was set)
 * goes to the first key on next and to the last on prev.
 *
 * Ranges.  bonsai_cursor_set_range bounds a cursor to the keys lo <= key
 * < hi: first, last, seek, seek_le, next and prev then land only within
 * them and answer BONSAI_NOTFOUND beyond (the ends above are the range's
 * ends), so a range walk needs no compares of its own.
 *
 * Writes and cursors.  A cursor stays usable across writes in its own
 * transaction (in no-transaction mode: any write to the store), and where
 * it stands is its key; no write moves it to another:
 *  - after a put of any key, or a delete of another key, it is still on
 *    its key (bonsai_cursor_get reads the key's value as it is now);
 *  - after a delete of its key it stands in the gap the key left, between
 *    the keys that were its neighbours: bonsai_cursor_get answers
 *    BONSAI_NOTFOUND, bonsai_cursor_next moves to the first key after the
 *    deleted one and bonsai_cursor_prev to the last key before it (so a
 *    loop that deletes the current key, then moves next, visits every
 *    key once; with prev, likewise backwards).  If the key is put again
 *    before the cursor moves, the cursor is on it again.
 * bonsai_cursor_del and bonsai_cursor_put write at the cursor's key with
 * these rules: after a delete the cursor stands in the key's gap (next
 * gives the following key), after a put it is still on its key.  They
 * write in the cursor's transaction (in no-transaction mode: directly); a
 * cursor in a read snapshot, or opened with a NULL txn in transaction
 * mode (it reads a snapshot of its own), answers BONSAI_READONLY. */
BONSAI_API int bonsai_cursor_open(bonsai_txn *txn, bonsai_map map, bonsai_cursor **cur);
BONSAI_API void bonsai_cursor_close(bonsai_cursor *cur);
BONSAI_API int bonsai_cursor_first(bonsai_cursor *cur);
BONSAI_API int bonsai_cursor_last(bonsai_cursor *cur);
/* Positions at the first key >= key (within the range, if set; a key
 * below the range seeks its first key).  BONSAI_NOTFOUND when every key
 * is smaller: the cursor is then past the last key.  Errors also:
 * BONSAI_KEYSIZE (a key of the wrong size for the map), BONSAI_INVALID,
 * BONSAI_MAPKIND (the _u64 form on a byte-key map), BONSAI_BADTXN,
 * BONSAI_CORRUPT, BONSAI_NOMEM. */
BONSAI_API int bonsai_cursor_seek(bonsai_cursor *cur, const bonsai_val *key);
BONSAI_API int bonsai_cursor_seek_u64(bonsai_cursor *cur, uint64_t key);
/* Positions at the last key <= key (within the range, if set; a key at
 * or above the range's hi seeks its last key).  BONSAI_NOTFOUND when
 * every key is greater: the cursor is then before the first key.  Other
 * errors as bonsai_cursor_seek. */
BONSAI_API int bonsai_cursor_seek_le(bonsai_cursor *cur, const bonsai_val *key);
BONSAI_API int bonsai_cursor_seek_le_u64(bonsai_cursor *cur, uint64_t key);
/* Move to the next (previous) key; see "Ends" above. */
BONSAI_API int bonsai_cursor_next(bonsai_cursor *cur);
BONSAI_API int bonsai_cursor_prev(bonsai_cursor *cur);
/* Reads the current entry; key or val may be NULL.  For u64 maps key
 * points at 8 bytes holding the native uint64_t.  BONSAI_NOTFOUND when
 * the cursor has no current entry: not positioned yet, past either end,
 * or in the gap of its deleted key (see above). */
BONSAI_API int bonsai_cursor_get(bonsai_cursor *cur, bonsai_val *key, bonsai_val *val);
BONSAI_API int bonsai_cursor_get_u64(bonsai_cursor *cur, uint64_t *key, bonsai_val *val);

/* Deletes the cursor's current key; the cursor then stands in its gap
 * (see "Writes and cursors").  Errors: BONSAI_NOTFOUND (no current key:
 * not positioned, beyond an end, or in the gap of a deleted key),
 * BONSAI_READONLY (a read snapshot, a cursor with its own snapshot, or a
 * read-only store), BONSAI_BADTXN, BONSAI_INVALID, and those of
 * bonsai_del (BONSAI_FULL, BONSAI_NOMEM, BONSAI_IO, BONSAI_CORRUPT). */
BONSAI_API int bonsai_cursor_del(bonsai_cursor *cur);
/* Overwrites the value of the cursor's current key with *val (NULL: an
 * empty value); the cursor stays on the key.  flags as bonsai_put (with
 * BONSAI_NOOVERWRITE it answers BONSAI_EXISTS: the key is there).
 * Errors: BONSAI_NOTFOUND, BONSAI_READONLY, BONSAI_BADTXN as
 * bonsai_cursor_del, and those of bonsai_put (BONSAI_VALSIZE,
 * BONSAI_FULL, BONSAI_INVALID, BONSAI_NOMEM, BONSAI_IO, BONSAI_ENOSPC,
 * BONSAI_CORRUPT). */
BONSAI_API int bonsai_cursor_put(bonsai_cursor *cur, const bonsai_val *val,
                                 unsigned flags);

/* Bounds the cursor to the keys lo <= key < hi (see "Ranges" above); lo
 * or hi NULL leaves that end open, both NULL removes the range.  Keys as
 * bonsai_cursor_seek takes them (8 native bytes in a u64 map).  lo >= hi
 * is an empty range.  The cursor is left unpositioned: next then gives
 * the range's first key, prev its last.  Errors: BONSAI_KEYSIZE,
 * BONSAI_INVALID, BONSAI_BADTXN. */
BONSAI_API int bonsai_cursor_set_range(bonsai_cursor *cur, const bonsai_val *lo,
                                       const bonsai_val *hi);
/* The range of a u64 map: lo <= key < hi, or with BONSAI_RANGE_NO_HI
 * lo <= key (hi is ignored); (0, 0, BONSAI_RANGE_NO_HI) removes the
 * range.  Errors: BONSAI_MAPKIND (a byte-key map), BONSAI_INVALID (an
 * unknown flag), BONSAI_BADTXN. */
#define BONSAI_RANGE_NO_HI 1u
BONSAI_API int bonsai_cursor_set_range_u64(bonsai_cursor *cur, uint64_t lo,
                                           uint64_t hi, unsigned flags);
/* The range of the keys that begin with prefix (a byte-key map): lo is
 * the prefix, hi the prefix without its trailing 0xff bytes and its last
 * byte one up (none when the prefix is all 0xff).  Errors:
 * BONSAI_MAPKIND (a u64 map), BONSAI_KEYSIZE (prefix empty or longer
 * than BONSAI_MAX_KEY), BONSAI_INVALID, BONSAI_BADTXN. */
BONSAI_API int bonsai_cursor_set_prefix(bonsai_cursor *cur, const bonsai_val *prefix);

#ifdef __cplusplus
}
#endif
#endif /* BONSAI_H */

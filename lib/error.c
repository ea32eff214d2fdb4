/* SPDX-License-Identifier: MIT */
/*
 * error.c - names for the error codes of bonsai.h.
 */
#include "bonsai.h"

const char *bonsai_strerror(int err)
{
    switch (err) {
    case BONSAI_OK: return "success";
    case BONSAI_NOTFOUND: return "not found";
    case BONSAI_EXISTS: return "already exists";
    case BONSAI_FULL: return "store full: max_size reached";
    case BONSAI_CORRUPT: return "store corrupt: a check failed";
    case BONSAI_FORMAT_UNSUPPORTED: return "unknown file format version";
    case BONSAI_INVALID: return "invalid argument";
    case BONSAI_KEYSIZE: return "key empty, too long or of the wrong size";
    case BONSAI_VALSIZE: return "value too long";
    case BONSAI_NOMEM: return "out of memory";
    case BONSAI_IO: return "I/O error";
    case BONSAI_BUSY:
        return "busy: the store's writer (a write transaction in another "
               "thread, or another process with the file open to write) "
               "did not finish within busy_timeout_ms";
    case BONSAI_READONLY: return "store or transaction is read-only";
    case BONSAI_BADTXN: return "transaction failed or finished";
    case BONSAI_MAPKIND: return "map has the other key kind";
    case BONSAI_ENOSPC: return "no space left on the device";
    case BONSAI_FAILED: return "an earlier sync failed: handle unusable";
    case BONSAI_NOTSUP: return "not supported in this mode";
    case BONSAI_MAPS_FULL: return "too many maps in one handle";
    case BONSAI_LOCKFILE:
        return "the store's -lock file is damaged or not a bonsai lock file";
    case BONSAI_READERS_FULL:
        return "too many read snapshots across processes: no free reader "
               "slot in the -lock file";
    case BONSAI_TXNID_FULL:
        return "transaction ids used up: the last commit's id is 2^64-1";
    default: return "unknown error";
    }
}

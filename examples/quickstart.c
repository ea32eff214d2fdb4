/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>
#include <bonsai.h>

#define S(s) (&(bonsai_val){strlen(s), s})
#define CHECK(call) if ((rc = (call)) != 0) goto out

int main(void)
{
    bonsai_db *db = NULL;
    bonsai_txn *txn;
    bonsai_map fruit;
    bonsai_cursor *cur;
    bonsai_val k, v;
    int rc;
    CHECK(bonsai_open("fruit.bonsai", NULL, &db));     /* created if new */
    CHECK(bonsai_txn_begin(db, 0, &txn));              /* write transaction */
    rc = bonsai_map_create(db, txn, "fruit", BONSAI_KEY_BYTES, &fruit);
    CHECK(rc == BONSAI_EXISTS ? 0 : rc);               /* there already */
    CHECK(bonsai_put(txn, fruit, S("apple"), S("red"), 0));
    CHECK(bonsai_put(txn, fruit, S("apricot"), S("orange"), 0));
    CHECK(bonsai_put(txn, fruit, S("banana"), S("yellow"), 0));
    CHECK(bonsai_txn_commit(txn));                     /* durable now */

    CHECK(bonsai_txn_begin(db, BONSAI_TXN_RDONLY, &txn)); /* a snapshot */
    CHECK(bonsai_cursor_open(txn, fruit, &cur));
    CHECK(bonsai_cursor_set_prefix(cur, S("ap")));     /* keys "ap"... */
    while (bonsai_cursor_next(cur) == 0 && bonsai_cursor_get(cur, &k, &v) == 0)
        printf("%.*s: %.*s\n", (int)k.size, (const char *)k.data,
               (int)v.size, (const char *)v.data);
    bonsai_cursor_close(cur);
    bonsai_txn_abort(txn);                             /* ends the snapshot */
    CHECK(bonsai_del(NULL, fruit, S("banana")));       /* NULL: autocommit */
out:
    if (rc && rc != BONSAI_NOTFOUND)
        fprintf(stderr, "fruit: %s\n", bonsai_strerror(rc));
    return bonsai_close(db) != 0 || (rc && rc != BONSAI_NOTFOUND);
}

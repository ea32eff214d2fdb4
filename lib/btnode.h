/* SPDX-License-Identifier: MIT */
/*
 * btnode.h - a decoded node of a tree: the codec's node (node.h), which
 * holds the entries, and what the tree keeps about it: where its image
 * lives, its links, its place in the write-back, its state.
 *
 * The writer's decoded nodes (nodes.c) and the branches a read
 * transaction keeps decoded (brcache.c) are both of this kind, so that a
 * descent follows child[i].mem through either.
 */
#ifndef BONSAI_BTNODE_H
#define BONSAI_BTNODE_H

#include <stdint.h>

#include "node.h"

typedef struct bt_node {
    bn_node bn;           /* the entries: the codec's alone */
    bn_ext home;          /* where the image this node came from lives */
    uint64_t home_txn;    /* txn that wrote home (0 if none) */
    struct bt_node *parent; /* decoded parent, NULL for a root */
    void *tree;           /* the tree this node belongs to */
    bn_ext plan;          /* where the next write goes (during a flush) */
    bn_layout plan_lay;   /* its image then, measured when planned */
    uint8_t *packed;      /* its compressed image, between plan and write */
    uint32_t packed_len;
    int64_t est_fix;      /* exact size minus est when last measured */
    uint32_t fix_changes; /* changes since then */
    uint8_t level;        /* 0 for leaves */
    uint8_t dirty;        /* changed since decoded or last written */
    uint8_t has_home;
    uint8_t dead;         /* removed from its tree, freed after the flush */
} bt_node;

/* Memory n holds: the node, its arrays and its arena. */
static inline size_t bt_node_bytes(const bt_node *n)
{
    return bn_mem_bytes(&n->bn) - sizeof n->bn + sizeof *n;
}

#endif

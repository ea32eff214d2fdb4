/* SPDX-License-Identifier: MIT */
/*
 * peers.h - std::map and std::unordered_map behind a C interface, so that
 * bench.c can run them as engines beside bonsai (peers.cc).
 *
 * A peer holds keys that are either u64 or byte strings, each with a value
 * of a length fixed when the peer is created (0 or PEER_MAX_VALUE bytes).
 * The containers grow as they are filled: nothing is reserved.
 */
#ifndef BENCH_PEERS_H
#define BENCH_PEERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PEER_MAX_VALUE 16

enum peer_kind { PEER_STD_MAP, PEER_STD_UNORDERED };

/* u64 keys use u; byte-string keys len bytes at s. */
struct peer_key {
    uint64_t u;
    const char *s;
    size_t len;
};

struct peer;

/* Called once per entry by peer_scan; v holds vlen bytes. */
typedef void peer_visit(void *arg, const struct peer_key *k, const void *v,
                        size_t vlen);

/* NULL when out of memory or value_len is neither 0 nor PEER_MAX_VALUE. */
struct peer *peer_create(enum peer_kind kind, int u64_keys, size_t value_len);

/* Inserts k with the peer's value_len bytes at v, or overwrites its value.
 * 0, or -1 when out of memory. */
int peer_put(struct peer *p, const struct peer_key *k, const void *v);

/* 1 and *v the value of k (value_len bytes), 0 when k is absent, -1 when
 * out of memory. */
int peer_get(struct peer *p, const struct peer_key *k, const void **v);

uint64_t peer_count(const struct peer *p);

/* Visits every entry: in key order for PEER_STD_MAP, in the table's own
 * order for PEER_STD_UNORDERED. */
void peer_scan(const struct peer *p, peer_visit *visit, void *arg);

void peer_destroy(struct peer *p);

#ifdef __cplusplus
}
#endif

#endif

// SPDX-License-Identifier: MIT
//
// peers.cc - std::map and std::unordered_map as benchmark engines, behind
// the C interface of peers.h.
//
// Each container is used as a program would use it by default: the
// standard allocator, std::less and std::hash (the identity for integers
// in libstdc++), no reserve() and no rehash(), so it grows as it is
// filled, as bonsai does.  A value is a fixed array of 0 or 16 bytes held
// in the node itself, so an empty value costs what an empty struct costs.
#include "peers.h"

#include <cstring>
#include <map>
#include <new>
#include <string>
#include <unordered_map>

namespace {

template <size_t N> struct value {
    static constexpr size_t size = N;
    unsigned char bytes[N];
};
template <> struct value<0> {
    static constexpr size_t size = 0;
};

void set_key(uint64_t &dst, const peer_key *k) { dst = k->u; }
void set_key(std::string &dst, const peer_key *k) { dst.assign(k->s, k->len); }

peer_key view(uint64_t k) { return peer_key{k, nullptr, 0}; }
peer_key view(const std::string &k) { return peer_key{0, k.data(), k.size()}; }

} // namespace

// The interface every container is used through (one virtual call per
// operation, the same for both containers).
struct peer {
    virtual ~peer() = default;
    virtual void put(const peer_key *k, const void *v) = 0;
    virtual const void *get(const peer_key *k) = 0;
    virtual uint64_t count() const = 0;
    virtual void scan(peer_visit *visit, void *arg) const = 0;
};

namespace {

template <class Map> class basic_peer final : public peer {
    using key_type = typename Map::key_type;
    using mapped_type = typename Map::mapped_type;

    Map map_;
    // The key of the operation at hand: a string lookup reuses its buffer
    // instead of allocating a std::string per call.
    key_type probe_;

public:
    void put(const peer_key *k, const void *v) override
    {
        set_key(probe_, k);
        std::memcpy(&map_[probe_], v, mapped_type::size);
    }

    const void *get(const peer_key *k) override
    {
        set_key(probe_, k);
        auto it = map_.find(probe_);
        return it == map_.end() ? nullptr : &it->second;
    }

    uint64_t count() const override { return map_.size(); }

    void scan(peer_visit *visit, void *arg) const override
    {
        for (const auto &entry : map_) {
            peer_key k = view(entry.first);
            visit(arg, &k, &entry.second, mapped_type::size);
        }
    }
};

template <class Key, size_t N> peer *make_peer(peer_kind kind)
{
    if (kind == PEER_STD_MAP)
        return new basic_peer<std::map<Key, value<N>>>;
    return new basic_peer<std::unordered_map<Key, value<N>>>;
}

template <size_t N> peer *make_peer(peer_kind kind, int u64_keys)
{
    return u64_keys ? make_peer<uint64_t, N>(kind)
                    : make_peer<std::string, N>(kind);
}

} // namespace

// No exception may cross into C: an allocation that fails becomes NULL or -1.
extern "C" peer *peer_create(peer_kind kind, int u64_keys, size_t value_len)
{
    try {
        if (value_len == 0)
            return make_peer<0>(kind, u64_keys);
        if (value_len == PEER_MAX_VALUE)
            return make_peer<PEER_MAX_VALUE>(kind, u64_keys);
        return nullptr;
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

extern "C" int peer_put(peer *p, const peer_key *k, const void *v)
{
    try {
        p->put(k, v);
        return 0;
    } catch (const std::bad_alloc &) {
        return -1;
    }
}

extern "C" int peer_get(peer *p, const peer_key *k, const void **v)
{
    try { // a string key longer than any before grows the probe's buffer
        *v = p->get(k);
        return *v != nullptr;
    } catch (const std::bad_alloc &) {
        return -1;
    }
}

extern "C" uint64_t peer_count(const peer *p) { return p->count(); }

extern "C" void peer_scan(const peer *p, peer_visit *visit, void *arg)
{
    p->scan(visit, arg);
}

extern "C" void peer_destroy(peer *p) { delete p; }

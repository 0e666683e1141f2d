/*
 * hash.h — the documented key mixers.
 *
 * rs_mix64 decides PS sharding everywhere (client, server, every transport):
 *     shard = rs_mix64(key) % num_shards
 * It is the splitmix64/Stafford "mix13" finaliser: a bijection on u64 with full avalanche, so
 * sequential keys 1..N spread evenly over shards. Do not change it: shard placement of stored
 * data depends on it. Generated configs name it "hash_method": "rs_mix64" (the native wire's own
 * method); RecStore's wire routes by "city_hash" or "simple_mod" (recstore/recstore_wire.h).
 *
 * rs_fnv64_u64 is YCSB's Utils.fnvhash64(long): FNV-1a over the 8 little-endian bytes of the value,
 * returned as a non-negative 63-bit number. The scrambled zipfian generator uses it.
 * rs_fnv1a64 hashes a byte string (YCSB key strings that are not decimal numbers).
 */
#ifndef RECSTORE_HASH_H
#define RECSTORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint64_t rs_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline uint32_t rs_shard_of(uint64_t key, uint32_t num_shards) {
    return num_shards <= 1 ? 0u : (uint32_t)(rs_mix64(key) % num_shards);
}

#define RS_FNV_OFFSET64 0xCBF29CE484222325ull
#define RS_FNV_PRIME64  1099511628211ull

static inline uint64_t rs_fnv64_u64(uint64_t val) {
    uint64_t h = RS_FNV_OFFSET64;
    for (int i = 0; i < 8; i++) {
        h ^= val & 0xff;
        h *= RS_FNV_PRIME64;
        val >>= 8;
    }
    int64_t s = (int64_t)h;
    return (uint64_t)(s < 0 ? -(s + 1) + 1 : s) & 0x7fffffffffffffffull;
}

static inline uint64_t rs_fnv1a64(const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    uint64_t h = RS_FNV_OFFSET64;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= RS_FNV_PRIME64;
    }
    return h;
}

#ifdef __cplusplus
}
#endif
#endif

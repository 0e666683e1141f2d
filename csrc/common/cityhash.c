/*
 * cityhash.c — CityHash64 v1.1 (Pike and Alakuijala, Google 2011), unseeded, written from its
 * published definition, and RecStore's shard-method names. RecStore's distributed clients route a
 * key to shard CityHash64(8 little-endian key bytes) % num_shards (recstore/recstore_wire.h).
 *
 * Structure of the hash: inputs of 0..16, 17..32 and 33..64 bytes each have a short closed form;
 * longer inputs keep 56 bytes of state (x, y, z and two 128-bit pairs v, w), mix it with every
 * 64-byte chunk, and fold it down with the 128->64 mixer (hash16). All loads are little-endian
 * and unaligned. Checked against the published test vectors (csrc/tests/test_cityhash.c).
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "recstore/bytes.h"
#include "recstore/recstore_wire.h"

static const uint64_t K0 = 0xc3a5c85c97cb3127ull;
static const uint64_t K1 = 0xb492b66fbe98f273ull;
static const uint64_t K2 = 0x9ae16a3b2f90404full;

static inline uint64_t ror(uint64_t v, unsigned s) {
    return s == 0 ? v : (v >> s) | (v << (64 - s));
}

static inline uint64_t shift_mix(uint64_t v) {
    return v ^ (v >> 47);
}

/* The 128 -> 64 bit mixer with multiplier mul. */
static inline uint64_t hash16_mul(uint64_t u, uint64_t v, uint64_t mul) {
    uint64_t a = (u ^ v) * mul;
    a ^= a >> 47;
    uint64_t b = (v ^ a) * mul;
    b ^= b >> 47;
    return b * mul;
}

static inline uint64_t hash16(uint64_t u, uint64_t v) {
    return hash16_mul(u, v, 0x9ddfea08eb382d69ull);
}

static uint64_t hash_0_to_16(const uint8_t *s, size_t len) {
    if (len >= 8) {
        uint64_t mul = K2 + len * 2;
        uint64_t a = rs_get64(s) + K2;
        uint64_t b = rs_get64(s + len - 8);
        uint64_t c = ror(b, 37) * mul + a;
        uint64_t d = (ror(a, 25) + b) * mul;
        return hash16_mul(c, d, mul);
    }
    if (len >= 4) {
        uint64_t mul = K2 + len * 2;
        uint64_t a = (uint64_t)rs_get32(s);
        return hash16_mul(len + (a << 3), (uint64_t)rs_get32(s + len - 4), mul);
    }
    if (len > 0) {
        uint32_t y = (uint32_t)s[0] + ((uint32_t)s[len >> 1] << 8);
        uint32_t z = (uint32_t)len + ((uint32_t)s[len - 1] << 2);
        return shift_mix(y * K2 ^ z * K0) * K2;
    }
    return K2;
}

static uint64_t hash_17_to_32(const uint8_t *s, size_t len) {
    uint64_t mul = K2 + len * 2;
    uint64_t a = rs_get64(s) * K1;
    uint64_t b = rs_get64(s + 8);
    uint64_t c = rs_get64(s + len - 8) * mul;
    uint64_t d = rs_get64(s + len - 16) * K2;
    return hash16_mul(ror(a + b, 43) + ror(c, 30) + d, a + ror(b + K2, 18) + c, mul);
}

static uint64_t hash_33_to_64(const uint8_t *s, size_t len) {
    uint64_t mul = K2 + len * 2;
    uint64_t a = rs_get64(s) * K2;
    uint64_t b = rs_get64(s + 8);
    uint64_t c = rs_get64(s + len - 24);
    uint64_t d = rs_get64(s + len - 32);
    uint64_t e = rs_get64(s + 16) * K2;
    uint64_t f = rs_get64(s + 24) * 9;
    uint64_t g = rs_get64(s + len - 8);
    uint64_t h = rs_get64(s + len - 16) * mul;
    uint64_t u = ror(a + g, 43) + (ror(b, 30) + c) * 9;
    uint64_t v = ((a + g) ^ d) + f + 1;
    uint64_t w = __builtin_bswap64((u + v) * mul) + h;
    uint64_t x = ror(e + f, 42) + c;
    uint64_t y = (__builtin_bswap64((v + w) * mul) + g) * mul;
    uint64_t z = e + f + c;
    a = __builtin_bswap64((x + z) * mul + y) + b;
    b = shift_mix((z + a) * mul + d + h) * mul;
    return b + x;
}

typedef struct pair64 {
    uint64_t first, second;
} pair64;

/* 32 bytes at s mixed into seeds a, b. */
static inline pair64 weak32(const uint8_t *s, uint64_t a, uint64_t b) {
    uint64_t w = rs_get64(s), x = rs_get64(s + 8), y = rs_get64(s + 16), z = rs_get64(s + 24);
    a += w;
    b = ror(b + a + z, 21);
    uint64_t c = a;
    a += x;
    a += y;
    b += ror(a, 44);
    return (pair64){a + z, b + c};
}

uint64_t rs_cityhash64(const void *data, size_t len) {
    const uint8_t *s = data;
    if (len <= 16) return hash_0_to_16(s, len);
    if (len <= 32) return hash_17_to_32(s, len);
    if (len <= 64) return hash_33_to_64(s, len);

    /* state seeded from the last 64 bytes, then every 64-byte chunk from the start */
    uint64_t x = rs_get64(s + len - 40);
    uint64_t y = rs_get64(s + len - 16) + rs_get64(s + len - 56);
    uint64_t z = hash16(rs_get64(s + len - 48) + len, rs_get64(s + len - 24));
    pair64 v = weak32(s + len - 64, len, z);
    pair64 w = weak32(s + len - 32, y + K1, x);
    x = x * K1 + rs_get64(s);
    size_t left = (len - 1) & ~(size_t)63;
    do {
        x = ror(x + y + v.first + rs_get64(s + 8), 37) * K1;
        y = ror(y + v.second + rs_get64(s + 48), 42) * K1;
        x ^= w.second;
        y += v.first + rs_get64(s + 40);
        z = ror(z + w.first, 33) * K1;
        v = weak32(s, v.second * K1, x + w.first);
        w = weak32(s + 32, z + w.second, y + rs_get64(s + 16));
        uint64_t t = z;
        z = x;
        x = t;
        s += 64;
        left -= 64;
    } while (left != 0);
    return hash16(hash16(v.first, w.first) + shift_mix(y) * K1 + z, hash16(v.second, w.second) + x);
}

int rs_rs_hash_method_parse(const char *name, rs_rs_hash_method *out, rs_error *err) {
    if (name && strcasecmp(name, "city_hash") == 0) {
        *out = RS_RS_HASH_CITY;
        return 0;
    }
    if (name && strcasecmp(name, "simple_mod") == 0) {
        *out = RS_RS_HASH_SIMPLE_MOD;
        return 0;
    }
    return rs_error_set(err, RS_EINVAL,
                        "hash_method '%s' is not one of RecStore's: city_hash, simple_mod",
                        name ? name : "(null)");
}

const char *rs_rs_hash_method_name(rs_rs_hash_method m) {
    return m == RS_RS_HASH_SIMPLE_MOD ? "simple_mod" : "city_hash";
}

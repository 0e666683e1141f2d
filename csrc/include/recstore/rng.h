/*
 * rng.h — per-thread pseudo-random numbers: xoshiro256** seeded through splitmix64.
 *
 * One generator per thread, seeded explicitly (seed + thread index), so runs are reproducible
 * and no state is shared on hot paths. rs_rng_below() uses Lemire's multiply-shift rejection so
 * ranges are unbiased.
 */
#ifndef RECSTORE_RNG_H
#define RECSTORE_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_rng {
    uint64_t s[4];
} rs_rng;

static inline uint64_t rs_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void rs_rng_seed(rs_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = rs_splitmix64(&x);
}

static inline uint64_t rs_rng_rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t rs_rng_next(rs_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rs_rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rs_rng_rotl(s[3], 45);
    return result;
}

/* Uniform integer in [0, n); n > 0. */
static inline uint64_t rs_rng_below(rs_rng *r, uint64_t n) {
    __uint128_t m = (__uint128_t)rs_rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = -n % n;
        while (lo < t) {
            m = (__uint128_t)rs_rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Uniform double in [0, 1). */
static inline double rs_rng_double(rs_rng *r) {
    return (double)(rs_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

#ifdef __cplusplus
}
#endif
#endif

/*
 * zipf.h — YCSB's zipfian generators (Gray et al., "Quickly generating billion-record synthetic
 * databases"), as YCSB's ZipfianGenerator and ScrambledZipfianGenerator define them.
 *
 * rs_zipf draws a rank in [0, items): rank 0 is the most popular, P(rank = i) ~ 1/(i+1)^theta.
 * Ranks 0 and 1 are exact; higher ranks follow Gray's closed-form approximation, as in YCSB.
 *
 * rs_zipf_scrambled spreads the popular ranks over the key space: rank -> fnv64(rank) % items.
 * With theta = 0.99 (YCSB's constant) it draws from YCSB's fixed 10^10-item generator with its
 * precomputed zeta (26.46902820178302) and then folds, exactly like YCSB, so its skew is
 * comparable with YCSB zipfian runs. Other thetas use a generator over `items` itself.
 *
 * Generators are read-only after init; each thread passes its own rs_rng.
 */
#ifndef RECSTORE_ZIPF_H
#define RECSTORE_ZIPF_H

#include <stdint.h>

#include "recstore/error.h"
#include "recstore/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_YCSB_ZIPFIAN_CONSTANT 0.99
#define RS_YCSB_SCRAMBLED_ITEMS  10000000000ull
#define RS_YCSB_SCRAMBLED_ZETAN  26.46902820178302

typedef struct rs_zipf {
    uint64_t items;
    double theta;
    double alpha;
    double zetan;
    double eta;
    double half_pow_theta; /* 1 + 0.5^theta: the rank-1 threshold */
} rs_zipf;

/* zeta(n, theta) = sum_{i=1..n} i^-theta; exact sum up to 10^7 terms, Euler-Maclaurin beyond. */
double rs_zeta(uint64_t n, double theta);

/* items >= 1, 0 < theta < 1. RS_EINVAL (message names the argument) otherwise. */
int rs_zipf_init(rs_zipf *z, uint64_t items, double theta, rs_error *err);

/* Like rs_zipf_init with a precomputed zetan (YCSB's constructor with zetan). */
int rs_zipf_init_zetan(rs_zipf *z, uint64_t items, double theta, double zetan, rs_error *err);

/* A rank in [0, items). */
uint64_t rs_zipf_next(const rs_zipf *z, rs_rng *r);

typedef struct rs_zipf_scrambled {
    rs_zipf gen;
    uint64_t items;
} rs_zipf_scrambled;

int rs_zipf_scrambled_init(rs_zipf_scrambled *s, uint64_t items, double theta, rs_error *err);

/* A value in [0, items), popular values scattered by fnv64. */
static inline uint64_t rs_zipf_scrambled_next(const rs_zipf_scrambled *s, rs_rng *r);

#ifdef __cplusplus
}
#endif

#include "recstore/hash.h"
static inline uint64_t rs_zipf_scrambled_next(const rs_zipf_scrambled *s, rs_rng *r) {
    return rs_fnv64_u64(rs_zipf_next(&s->gen, r)) % s->items;
}
#endif

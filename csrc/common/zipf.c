/*
 * zipf.c — YCSB ZipfianGenerator / ScrambledZipfianGenerator arithmetic (see zipf.h).
 */
#include "recstore/zipf.h"

#include <math.h>

#define ZETA_EXACT_TERMS 10000000ull

double rs_zeta(uint64_t n, double theta) {
    uint64_t m = n < ZETA_EXACT_TERMS ? n : ZETA_EXACT_TERMS;
    double sum = 0.0;
    for (uint64_t i = m; i >= 1; i--) /* small terms first: less rounding */
        sum += pow((double)i, -theta);
    if (n == m) return sum;
    /* Euler-Maclaurin tail for sum_{i=m+1..n} i^-theta. */
    double a = (double)m, b = (double)n;
    double tail = (pow(b, 1 - theta) - pow(a, 1 - theta)) / (1 - theta) +
                  (pow(b, -theta) - pow(a, -theta)) / 2.0 +
                  (-theta) * (pow(b, -theta - 1) - pow(a, -theta - 1)) / 12.0;
    return sum + tail;
}

int rs_zipf_init_zetan(rs_zipf *z, uint64_t items, double theta, double zetan, rs_error *err) {
    if (items < 1) return rs_error_set(err, RS_EINVAL, "zipfian items must be >= 1 (got 0)");
    if (!(theta > 0.0 && theta < 1.0))
        return rs_error_set(err, RS_EINVAL, "zipfian theta/alpha must be in (0, 1), got %g", theta);
    z->items = items;
    z->theta = theta;
    z->alpha = 1.0 / (1.0 - theta);
    z->zetan = zetan;
    double zeta2 = rs_zeta(2, theta);
    z->eta = (1.0 - pow(2.0 / (double)items, 1.0 - theta)) / (1.0 - zeta2 / zetan);
    z->half_pow_theta = 1.0 + pow(0.5, theta);
    return RS_OK;
}

int rs_zipf_init(rs_zipf *z, uint64_t items, double theta, rs_error *err) {
    if (items < 1) return rs_error_set(err, RS_EINVAL, "zipfian items must be >= 1 (got 0)");
    if (!(theta > 0.0 && theta < 1.0))
        return rs_error_set(err, RS_EINVAL, "zipfian theta/alpha must be in (0, 1), got %g", theta);
    return rs_zipf_init_zetan(z, items, theta, rs_zeta(items, theta), err);
}

uint64_t rs_zipf_next(const rs_zipf *z, rs_rng *r) {
    double u = rs_rng_double(r);
    double uz = u * z->zetan;
    if (uz < 1.0) return 0;
    if (uz < z->half_pow_theta) return z->items > 1 ? 1 : 0;
    uint64_t ret = (uint64_t)((double)z->items * pow(z->eta * u - z->eta + 1.0, z->alpha));
    return ret < z->items ? ret : z->items - 1;
}

int rs_zipf_scrambled_init(rs_zipf_scrambled *s, uint64_t items, double theta, rs_error *err) {
    if (items < 1) return rs_error_set(err, RS_EINVAL, "zipfian items must be >= 1 (got 0)");
    s->items = items;
    if (theta == RS_YCSB_ZIPFIAN_CONSTANT)
        return rs_zipf_init_zetan(&s->gen, RS_YCSB_SCRAMBLED_ITEMS, theta, RS_YCSB_SCRAMBLED_ZETAN,
                                  err);
    return rs_zipf_init(&s->gen, items, theta, err);
}

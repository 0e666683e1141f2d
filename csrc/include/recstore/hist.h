/*
 * hist.h — HDR-style log-linear latency histogram (values in nanoseconds).
 *
 * Layout: values 0..127 get one bucket each; above that, every power of two [2^e, 2^(e+1)) is cut
 * into 128 equal sub-buckets, so any recorded value is reported within 1/128 (< 0.8 %) of itself.
 * Range 0 .. 2^44 ns (about 4.9 hours); larger values clamp into the last bucket and raise max.
 *
 *   index(v) = v                                    for v < 128
 *            = (e - 6) * 128 + (v >> (e - 7)) - 128  for v >= 128, e = floor(log2 v)
 *
 * One histogram per thread (plain counters, no atomics); merge at the end with rs_hist_merge.
 * The struct is public so it can live inside per-thread state; it is about 39 KB.
 */
#ifndef RECSTORE_HIST_H
#define RECSTORE_HIST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_HIST_SUB_BITS 7
#define RS_HIST_SUB      (1u << RS_HIST_SUB_BITS)
#define RS_HIST_MAX_EXP  44
#define RS_HIST_BUCKETS  ((RS_HIST_MAX_EXP - RS_HIST_SUB_BITS + 1) * RS_HIST_SUB)

typedef struct rs_hist {
    uint64_t count;
    uint64_t min;
    uint64_t max;
    double sum; /* for the mean; double keeps hours of ns sums exact enough */
    uint64_t buckets[RS_HIST_BUCKETS];
} rs_hist;

/* Reset to empty. */
void rs_hist_reset(rs_hist *h);

/* Bucket index of a value. */
static inline uint32_t rs_hist_index(uint64_t v) {
    if (v < RS_HIST_SUB) return (uint32_t)v;
    uint32_t e = 63u - (uint32_t)__builtin_clzll(v);
    if (e >= RS_HIST_MAX_EXP) return RS_HIST_BUCKETS - 1;
    uint32_t shift = e - RS_HIST_SUB_BITS;
    return (shift + 1) * RS_HIST_SUB + (uint32_t)(v >> shift) - RS_HIST_SUB;
}

/* Highest value that maps to bucket idx (exposed for tests). */
uint64_t rs_hist_bucket_high(uint32_t idx);

static inline void rs_hist_record(rs_hist *h, uint64_t v) {
    h->buckets[rs_hist_index(v)]++;
    h->count++;
    h->sum += (double)v;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
}

/* dst += src (bucket-wise; count/sum/min/max combined). */
void rs_hist_merge(rs_hist *dst, const rs_hist *src);

/* Value at percentile p (0 < p <= 100): the upper edge of the bucket holding the ceil(p% * count)th
 * value, clamped to [min, max]. 0 for an empty histogram. */
uint64_t rs_hist_percentile(const rs_hist *h, double p);

/* Mean of recorded values; 0 when empty. */
double rs_hist_mean(const rs_hist *h);

/* What a benchmark line reports of a histogram of ns values, in microseconds: mean, p50, p95,
 * p99, p99.9 and max (all 0 for an empty histogram). */
typedef struct rs_hist_us {
    double mean, p50, p95, p99, p999, max;
} rs_hist_us;

rs_hist_us rs_hist_summary_us(const rs_hist *h);

#ifdef __cplusplus
}
#endif
#endif

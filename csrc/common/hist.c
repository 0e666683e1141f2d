/*
 * hist.c — log-linear histogram (see hist.h for the bucket picture). Recording is a count++ in
 * one bucket plus min/max/sum; percentiles walk the cumulative counts once.
 */
#include "recstore/hist.h"

#include <string.h>

void rs_hist_reset(rs_hist *h) {
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

uint64_t rs_hist_bucket_high(uint32_t idx) {
    if (idx < RS_HIST_SUB) return idx;
    uint32_t shift = idx / RS_HIST_SUB - 1;
    uint64_t base = (uint64_t)(idx % RS_HIST_SUB + RS_HIST_SUB) << shift;
    return base + ((1ull << shift) - 1);
}

void rs_hist_merge(rs_hist *dst, const rs_hist *src) {
    if (src->count == 0) return;
    for (uint32_t i = 0; i < RS_HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
}

uint64_t rs_hist_percentile(const rs_hist *h, double p) {
    if (h->count == 0) return 0;
    if (p <= 0) return h->min;
    if (p >= 100.0) return h->max;
    uint64_t rank = (uint64_t)((p / 100.0) * (double)h->count + 0.999999999);
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < RS_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = rs_hist_bucket_high(i);
            if (v > h->max) v = h->max;
            if (v < h->min) v = h->min;
            return v;
        }
    }
    return h->max;
}

double rs_hist_mean(const rs_hist *h) {
    return h->count ? h->sum / (double)h->count : 0.0;
}

rs_hist_us rs_hist_summary_us(const rs_hist *h) {
    return (rs_hist_us){.mean = rs_hist_mean(h) / 1e3,
                        .p50 = (double)rs_hist_percentile(h, 50) / 1e3,
                        .p95 = (double)rs_hist_percentile(h, 95) / 1e3,
                        .p99 = (double)rs_hist_percentile(h, 99) / 1e3,
                        .p999 = (double)rs_hist_percentile(h, 99.9) / 1e3,
                        .max = h->count ? (double)h->max / 1e3 : 0.0};
}

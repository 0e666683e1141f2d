/*
 * test_common.c — histogram buckets and percentiles, rng ranges, zipfian frequencies against
 * their definition, eventual set/wait across threads, the streaming copy against memcpy.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/clock.h"
#include "recstore/copy.h"
#include "recstore/cpu.h"
#include "recstore/error.h"
#include "recstore/eventual.h"
#include "recstore/hash.h"
#include "recstore/hist.h"
#include "recstore/rng.h"
#include "recstore/zipf.h"
#include "rs_test.h"

static rs_hist g_h, g_h2;

static void test_hist_index_roundtrip(void) {
    /* every value lies at or below its bucket's high edge and within 1/128 of it */
    for (uint64_t v = 0; v < (1ull << 40); v = v * 3 / 2 + 1) {
        uint32_t i = rs_hist_index(v);
        uint64_t hi = rs_hist_bucket_high(i);
        RS_CHECK(hi >= v);
        RS_CHECK((double)(hi - v) <= (double)v / 128.0 + 1.0);
        if (i > 0) RS_CHECK(rs_hist_bucket_high(i - 1) < v);
    }
}

static void test_hist_percentiles(void) {
    rs_hist_reset(&g_h);
    for (uint64_t v = 1; v <= 10000; v++)
        rs_hist_record(&g_h, v * 1000);
    RS_CHECK_EQ(g_h.count, 10000);
    uint64_t p50 = rs_hist_percentile(&g_h, 50), p99 = rs_hist_percentile(&g_h, 99);
    RS_CHECK(fabs((double)p50 - 5000000.0) / 5000000.0 < 0.01);
    RS_CHECK(fabs((double)p99 - 9900000.0) / 9900000.0 < 0.01);
    RS_CHECK_EQ(rs_hist_percentile(&g_h, 100), 10000000);
    RS_CHECK(fabs(rs_hist_mean(&g_h) - 5000500.0) < 1.0);
    rs_hist_reset(&g_h2);
    rs_hist_record(&g_h2, 20000000);
    rs_hist_merge(&g_h, &g_h2);
    RS_CHECK_EQ(g_h.count, 10001);
    RS_CHECK_EQ(g_h.max, 20000000);
    RS_CHECK_EQ(g_h.min, 1000);
    rs_hist_reset(&g_h2);
    RS_CHECK_EQ(rs_hist_percentile(&g_h2, 99), 0);
}

static void test_hist_summary_us(void) {
    rs_hist_reset(&g_h);
    for (uint64_t v = 1; v <= 10000; v++)
        rs_hist_record(&g_h, v * 1000);
    rs_hist_us s = rs_hist_summary_us(&g_h);
    RS_CHECK(s.mean == rs_hist_mean(&g_h) / 1e3);
    RS_CHECK(s.p50 == (double)rs_hist_percentile(&g_h, 50) / 1e3);
    RS_CHECK(s.p999 == (double)rs_hist_percentile(&g_h, 99.9) / 1e3);
    RS_CHECK(s.max == 10000.0);
    rs_hist_reset(&g_h2);
    s = rs_hist_summary_us(&g_h2);
    RS_CHECK(s.mean == 0 && s.p99 == 0 && s.max == 0);
}

static void test_rng_below_range_and_seed(void) {
    rs_rng a, b;
    rs_rng_seed(&a, 42);
    rs_rng_seed(&b, 42);
    uint64_t counts[10] = {0};
    for (int i = 0; i < 100000; i++) {
        uint64_t x = rs_rng_below(&a, 10);
        RS_CHECK(x < 10);
        RS_CHECK_EQ(x, rs_rng_below(&b, 10));
        counts[x]++;
    }
    for (int i = 0; i < 10; i++)
        RS_CHECK(counts[i] > 9000 && counts[i] < 11000);
}

static void test_zipf_frequencies_match_definition(void) {
    const uint64_t n = 1000;
    const double theta = 0.99;
    rs_zipf z;
    RS_CHECK_EQ(rs_zipf_init(&z, n, theta, NULL), 0);
    static uint64_t counts[1000];
    memset(counts, 0, sizeof counts);
    rs_rng r;
    rs_rng_seed(&r, 7);
    const int draws = 2000000;
    for (int i = 0; i < draws; i++) {
        uint64_t k = rs_zipf_next(&z, &r);
        RS_CHECK(k < n);
        counts[k]++;
    }
    double zeta = rs_zeta(n, theta);
    /* ranks 0 and 1 are exact in Gray's method; within 2% */
    for (int k = 0; k < 2; k++) {
        double expect = draws * pow(k + 1, -theta) / zeta;
        RS_CHECK(fabs(counts[k] - expect) / expect < 0.02);
    }
    /* the head of the distribution (top 10 ranks) holds its defined mass within 5% */
    double head = 0, head_expect = 0;
    for (int k = 0; k < 10; k++) {
        head += counts[k];
        head_expect += draws * pow(k + 1, -theta) / zeta;
    }
    RS_CHECK(fabs(head - head_expect) / head_expect < 0.05);
    RS_CHECK(rs_zipf_init(&z, n, 1.0, NULL) == RS_EINVAL);
    RS_CHECK(rs_zipf_init(&z, 0, 0.5, NULL) == RS_EINVAL);
}

static void test_zeta_tail_approximation(void) {
    /* Euler-Maclaurin beyond 1e7 terms agrees with YCSB's precomputed zeta(1e10, 0.99) */
    double z = rs_zeta(10000000000ull, 0.99);
    RS_CHECK(fabs(z - RS_YCSB_SCRAMBLED_ZETAN) < 1e-6);
}

static void test_scrambled_zipf_in_range(void) {
    rs_zipf_scrambled s;
    RS_CHECK_EQ(rs_zipf_scrambled_init(&s, 12345, 0.99, NULL), 0);
    rs_rng r;
    rs_rng_seed(&r, 1);
    for (int i = 0; i < 100000; i++)
        RS_CHECK(rs_zipf_scrambled_next(&s, &r) < 12345);
}

static void test_fnv_matches_ycsb(void) {
    /* YCSB Utils.fnvhash64(0): eight zero octets, so offset * prime^8, then Math.abs */
    uint64_t h = RS_FNV_OFFSET64;
    for (int i = 0; i < 8; i++)
        h *= RS_FNV_PRIME64;
    int64_t s = (int64_t)h;
    RS_CHECK_EQ(rs_fnv64_u64(0), (uint64_t)(s < 0 ? -s : s));
    RS_CHECK(rs_fnv64_u64(1) != rs_fnv64_u64(2));
}

static rs_eventual g_ev;
static void *setter(void *arg) {
    (void)arg;
    rs_sleep_ns(1000000);
    rs_eventual_set(&g_ev, 77);
    return NULL;
}

static void test_eventual_block_and_spin(void) {
    for (int mode = 0; mode < 2; mode++) {
        rs_eventual_init(&g_ev);
        pthread_t t;
        pthread_create(&t, NULL, setter, NULL);
        int64_t v = 0;
        RS_CHECK_EQ(rs_eventual_wait(&g_ev, (rs_wait_mode)mode, UINT64_MAX, &v), 0);
        RS_CHECK_EQ(v, 77);
        pthread_join(t, NULL);
    }
    rs_eventual_init(&g_ev);
    RS_CHECK_EQ(rs_eventual_wait(&g_ev, RS_WAIT_BLOCK, 1000000, NULL), RS_ETIMEDOUT);
    RS_CHECK_EQ(rs_eventual_wait(&g_ev, RS_WAIT_SPIN, 1000000, NULL), RS_ETIMEDOUT);
}

/* every length and alignment lands the same bytes as memcpy, and nothing outside [dst, dst+n),
 * with the kernel rs_copy_stream picks and with each one this CPU has (Zen 3 has no AVX-512) */
static void test_copy_stream_matches_memcpy(void) {
    static const size_t lens[] = {0, 1, 63, 64, 65, 127, 128, 129, 200, 4096, 4113, 262144};
    static const size_t dofs[] = {0, 1, 8, 63};
    static const size_t sofs[] = {0, 5, 64};
    size_t cap = 262144 + 256;
    uint8_t *src = malloc(cap), *dst = malloc(cap), *want = malloc(cap);
    RS_CHECK(src && dst && want);
    for (size_t i = 0; i < cap; i++)
        src[i] = (uint8_t)(i * 131 + 7);
    int ran = 0;
    for (size_t a = 0; a < sizeof lens / sizeof *lens; a++)
        for (size_t b = 0; b < sizeof dofs / sizeof *dofs; b++)
            for (size_t c = 0; c < sizeof sofs / sizeof *sofs; c++) {
                /* dst + 64 is 64-byte aligned only by chance: align the base first */
                uint8_t *d = (uint8_t *)(((uintptr_t)dst + 63) & ~(uintptr_t)63) + dofs[b];
                size_t n = lens[a];
                memset(dst, 0xee, cap);
                memset(want, 0xee, cap);
                memcpy(want + (d - dst), src + sofs[c], n);
                rs_copy_stream(d, src + sofs[c], n);
                RS_CHECK(memcmp(dst, want, cap) == 0);
                for (int k = RS_CPU_VEC_BASE; k <= RS_CPU_VEC_AVX512; k++) {
                    memset(dst, 0xee, cap);
                    int rc = rs_copy_stream_on(k, d, src + sofs[c], n);
                    if (rc == RS_ENOTSUP) continue; /* not on this CPU */
                    RS_CHECK_EQ(rc, 0);
                    RS_CHECK(memcmp(dst, want, cap) == 0);
                    ran |= 1 << k;
                }
            }
    RS_CHECK_EQ(ran, (1 << (rs_cpu_best_vec() + 1)) - 1); /* every level the CPU runs */
    RS_CHECK_EQ(rs_copy_stream_on(RS_CPU_VEC_AVX512 + 1, dst, src, 64), RS_ENOTSUP);
    RS_CHECK_EQ(rs_copy_stream_on(-1, dst, src, 64), RS_ENOTSUP);
    free(src);
    free(dst);
    free(want);
}

RS_TEST_MAIN(RS_TEST(test_hist_index_roundtrip), RS_TEST(test_hist_percentiles),
             RS_TEST(test_hist_summary_us), RS_TEST(test_rng_below_range_and_seed),
             RS_TEST(test_zipf_frequencies_match_definition), RS_TEST(test_zeta_tail_approximation),
             RS_TEST(test_scrambled_zipf_in_range), RS_TEST(test_fnv_matches_ycsb),
             RS_TEST(test_eventual_block_and_spin), RS_TEST(test_copy_stream_matches_memcpy))

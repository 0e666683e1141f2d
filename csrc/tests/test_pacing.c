/*
 * test_pacing.c — the open-loop timetable (recstore/pacing.h) tested on the schedule it generates,
 * never on the machine's clock: uniform arrivals are exactly spaced, per thread and merged over
 * threads, without drift; Poisson gaps have the exponential's mean, coefficient of variation and
 * tail within statistical bounds for the seed, per thread and merged; late and unsent accounting.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/pacing.h"
#include "rs_test.h"

#define START 1000000000000ull /* an arbitrary monotonic origin: 1000 s */

static void test_uniform_exact_spacing(void) {
    rs_pacing p;
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_UNIFORM, 1000.0, 0, 1, START, 1, NULL), RS_OK);
    uint64_t prev = rs_pacing_take(&p);
    RS_CHECK_EQ(prev, START);
    int bad = 0;
    for (int k = 1; k < 200000; k++) {
        uint64_t t = rs_pacing_take(&p);
        bad += t - prev != 1000000ull;
        prev = t;
    }
    RS_CHECK_EQ(bad, 0);
}

static void test_uniform_no_drift(void) {
    /* a gap that is not a whole number of ns: every due time is start + floor(k * gap) */
    rs_pacing p;
    double rate = 300000.0, gap = 1e9 / rate;
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_UNIFORM, rate, 0, 1, START, 1, NULL), RS_OK);
    int bad = 0;
    for (uint64_t k = 0; k < 3000000; k++) {
        uint64_t t = rs_pacing_take(&p), want = START + (uint64_t)((double)k * gap);
        bad += t > want + 1 || t + 1 < want;
    }
    RS_CHECK_EQ(bad, 0);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_uniform_threads_interleave(void) {
    /* 4 threads sharing 1e6 requests/s: the process sends exactly every 1000 ns */
    enum { T = 4, K = 10000 };
    uint64_t *all = malloc(sizeof *all * T * K);
    for (uint32_t i = 0; i < T; i++) {
        rs_pacing p;
        RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_UNIFORM, 1e6, i, T, START, 7, NULL), RS_OK);
        for (int k = 0; k < K; k++)
            all[i * K + k] = rs_pacing_take(&p);
    }
    qsort(all, T * K, sizeof *all, cmp_u64);
    int bad = 0;
    for (int j = 0; j < T * K; j++)
        bad += all[j] != START + (uint64_t)j * 1000u;
    RS_CHECK_EQ(bad, 0);
    free(all);
}

typedef struct gap_stats {
    double mean, cv, frac_above_mean;
} gap_stats;

static gap_stats stats_of(const uint64_t *t, size_t n) {
    double s = 0, s2 = 0, mean;
    for (size_t i = 1; i < n; i++) {
        double g = (double)(t[i] - t[i - 1]);
        s += g;
        s2 += g * g;
    }
    double m = (double)(n - 1);
    mean = s / m;
    double var = s2 / m - mean * mean;
    size_t above = 0;
    for (size_t i = 1; i < n; i++)
        above += (double)(t[i] - t[i - 1]) > mean;
    return (gap_stats){mean, sqrt(var) / mean, (double)above / m};
}

/* Bounds for N exponential gaps: the sample mean's sd is mean/sqrt(N); the sample sd's relative
 * sd is about sqrt(2/N); P(gap > mean) = 1/e with binomial sd sqrt(p(1-p)/N). 5 sd each. */
static void check_exponential(gap_stats g, double want_mean, size_t n) {
    double sn = sqrt((double)n);
    RS_CHECK(fabs(g.mean - want_mean) / want_mean < 5.0 / sn);
    RS_CHECK(fabs(g.cv - 1.0) < 5.0 * sqrt(2.0) / sn + 1e-3);
    double e1 = exp(-1.0);
    RS_CHECK(fabs(g.frac_above_mean - e1) < 5.0 * sqrt(e1 * (1 - e1)) / sn);
}

static void test_poisson_one_thread(void) {
    enum { N = 200000 };
    uint64_t *t = malloc(sizeof *t * N);
    rs_pacing p;
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_POISSON, 10000.0, 0, 1, START, 42, NULL), RS_OK);
    for (int k = 0; k < N; k++)
        t[k] = rs_pacing_take(&p);
    RS_CHECK(t[0] >= START);
    gap_stats g = stats_of(t, N);
    check_exponential(g, 100000.0, N);
    /* and the bounds can fail: uniform spacing has cv 0 */
    RS_CHECK(g.cv > 0.9);
    free(t);
}

static void test_poisson_threads_merge_to_poisson(void) {
    enum { T = 3, K = 60000 };
    uint64_t *all = malloc(sizeof *all * T * K);
    for (uint32_t i = 0; i < T; i++) {
        rs_pacing p;
        RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_POISSON, 30000.0, i, T, START, 5, NULL), RS_OK);
        RS_CHECK(fabs(p.gap_ns - 100000.0) < 1e-6); /* each thread: 10000/s */
        for (int k = 0; k < K; k++)
            all[i * K + k] = rs_pacing_take(&p);
    }
    /* compare over the span every thread covers */
    uint64_t end = UINT64_MAX;
    for (int i = 0; i < T; i++)
        if (all[i * K + K - 1] < end) end = all[i * K + K - 1];
    qsort(all, T * K, sizeof *all, cmp_u64);
    size_t n = 0;
    while (n < (size_t)T * K && all[n] <= end)
        n++;
    check_exponential(stats_of(all, n), 1e9 / 30000.0, n);
    free(all);
}

static void test_poisson_seeded(void) {
    rs_pacing a, b, c, d;
    rs_pacing_init(&a, RS_PACING_POISSON, 5000.0, 0, 2, START, 9, NULL);
    rs_pacing_init(&b, RS_PACING_POISSON, 5000.0, 0, 2, START, 9, NULL);
    rs_pacing_init(&c, RS_PACING_POISSON, 5000.0, 0, 2, START, 10, NULL);
    rs_pacing_init(&d, RS_PACING_POISSON, 5000.0, 1, 2, START, 9, NULL);
    int same_ab = 1, same_ac = 1, same_ad = 1;
    for (int k = 0; k < 100; k++) {
        uint64_t ta = rs_pacing_take(&a);
        same_ab &= ta == rs_pacing_take(&b);
        same_ac &= ta == rs_pacing_take(&c);
        same_ad &= ta == rs_pacing_take(&d);
    }
    RS_CHECK(same_ab);  /* reproducible */
    RS_CHECK(!same_ac); /* the seed matters */
    RS_CHECK(!same_ad); /* one generator per thread */
}

static void test_late_and_unsent(void) {
    rs_pacing p;
    rs_pacing_init(&p, RS_PACING_UNIFORM, 1000.0, 0, 1, START, 1, NULL);
    uint64_t due = rs_pacing_take(&p);
    RS_CHECK_EQ(rs_pacing_note_send(&p, due, 0), 0);       /* never waited */
    RS_CHECK_EQ(rs_pacing_note_send(&p, due, due), 0);     /* free exactly at the due time */
    RS_CHECK_EQ(rs_pacing_note_send(&p, due, due + 1), 1); /* still waiting when it was due */
    RS_CHECK_EQ(p.late, 1);
    /* next due START + 1 ms; requests due before START + 10 ms: 1..9 ms -> 9 unsent */
    RS_CHECK_EQ(rs_pacing_count_unsent(&p, START + 10000000ull), 9);
    RS_CHECK_EQ(p.late, 10);
    RS_CHECK_EQ(rs_pacing_due(&p), START + 10000000ull);
    RS_CHECK_EQ(rs_pacing_count_unsent(&p, START), 0);
}

static void test_bad_input(void) {
    rs_pacing p;
    rs_error e = {0};
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_POISSON, 0.0, 0, 1, START, 1, &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "target rate 0") != NULL);
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_POISSON, NAN, 0, 1, START, 1, &e), RS_EINVAL);
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_POISSON, 2e7, 0, 1, START, 1, &e), RS_EINVAL);
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_POISSON, 10.0, 2, 2, START, 1, &e), RS_EINVAL);
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_POISSON, 1e-6, 0, 4, START, 1, &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "over 4 threads") != NULL);
    RS_CHECK_EQ(rs_pacing_init(&p, RS_PACING_UNIFORM, 4e-6, 0, 4, START, 1, &e), RS_OK);
    rs_pacing_arrival a;
    RS_CHECK_EQ(rs_pacing_arrival_parse("poisson", &a, &e), RS_OK);
    RS_CHECK_EQ(a, RS_PACING_POISSON);
    RS_CHECK_EQ(rs_pacing_arrival_parse("bursty", &a, &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "'bursty'") && strstr(e.msg, "uniform or poisson"));
    RS_CHECK(strcmp(rs_pacing_arrival_name(RS_PACING_UNIFORM), "uniform") == 0);
}

RS_TEST_MAIN(RS_TEST(test_uniform_exact_spacing), RS_TEST(test_uniform_no_drift),
             RS_TEST(test_uniform_threads_interleave), RS_TEST(test_poisson_one_thread),
             RS_TEST(test_poisson_threads_merge_to_poisson), RS_TEST(test_poisson_seeded),
             RS_TEST(test_late_and_unsent), RS_TEST(test_bad_input))

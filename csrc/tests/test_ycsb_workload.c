/*
 * test_ycsb_workload.c — the YCSB pieces below the driver, checked against their definitions:
 * property files and their errors, the record codec, the key mapping, key names, and the
 * generators (scrambled zipfian, skewed latest, hotspot, the acknowledged insert counter).
 * Generator checks draw a fixed number of samples from fixed seeds; tolerances are several
 * standard deviations wide, so they never flake yet catch a wrong formula.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recstore/hash.h"
#include "recstore/ycsb.h"
#include "recstore/zipf.h"
#include "rs_test.h"
#include "ycsb/workload.h"

static void test_props_file_and_errors(void) {
    char path[] = "/tmp/rs_ycsb_props_XXXXXX";
    int fd = mkstemp(path);
    RS_CHECK(fd >= 0);
    const char *text = "# comment\n! also\n\nrecordcount=100\nfieldlength : 7\n  table=t1  \n"
                       "oops-no-separator\n";
    RS_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    rs_ycsb_props *p;
    rs_ycsb_props_new(&p);
    rs_error err = {0};
    RS_CHECK_EQ(rs_ycsb_props_load_file(p, path, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, ":7:") && strstr(err.msg, "oops-no-separator"));
    RS_CHECK(!strcmp(rs_ycsb_props_get(p, "fieldlength", ""), "7"));
    RS_CHECK(!strcmp(rs_ycsb_props_get(p, "table", ""), "t1"));
    RS_CHECK(strstr(rs_ycsb_props_source(p, "recordcount"), ":4") != NULL);
    RS_CHECK_EQ(rs_ycsb_props_set_arg(p, "recordcount=abc", &err), RS_OK);
    uint64_t v;
    err = (rs_error){0};
    RS_CHECK_EQ(rs_ycsb_props_u64(p, "recordcount", 0, &v, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "recordcount=abc") && strstr(err.msg, "-p"));
    RS_CHECK_EQ(rs_ycsb_props_set_arg(p, "novalue", &err), RS_EINVAL);
    rs_ycsb_props_set(p, "requestdistribution", "pareto", "-p");
    rs_ycsb_workload w;
    err = (rs_error){0};
    RS_CHECK_EQ(rs_ycsb_props_set_arg(p, "recordcount=10", &err), RS_OK);
    RS_CHECK_EQ(rs_ycsb_workload_parse(p, &w, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "requestdistribution=pareto") != NULL);
    rs_ycsb_props_set(p, "requestdistribution", "zipfian", "-p");
    rs_ycsb_props_set(p, "readproportion", "1.5", "-p");
    RS_CHECK_EQ(rs_ycsb_workload_parse(p, &w, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "readproportion") != NULL);
    err = (rs_error){0};
    RS_CHECK_EQ(rs_ycsb_props_load_file(p, "/nonexistent/workloadz", &err), RS_EIO);
    RS_CHECK(strstr(err.msg, "/nonexistent/workloadz") != NULL);
    rs_ycsb_props_free(p);
    unlink(path);
}

static void test_record_codec(void) {
    rs_ycsb_field f[2] = {{"a", 1, "xyz", 3}, {"bb", 2, "\0\xff", 2}};
    char buf[64];
    size_t n = rs_ycsb_record_encode(f, 2, buf);
    RS_CHECK_EQ(n, rs_ycsb_record_size(f, 2));
    rs_ycsb_field upd[2] = {{"bb", 2, "Q", 1}, {"c", 1, "new", 3}};
    char *m;
    size_t mlen;
    RS_CHECK_EQ(rs_ycsb_record_merge(buf, n, upd, 2, &m, &mlen), RS_OK);
    rs_ycsb_result r;
    rs_ycsb_result_init(&r);
    RS_CHECK_EQ(rs_ycsb_record_decode(m, mlen, NULL, &r), RS_OK);
    RS_CHECK_EQ(r.n, 3);
    RS_CHECK(r.fields[0].value_len == 3 && !memcmp(r.fields[0].value, "xyz", 3));
    RS_CHECK(r.fields[1].value_len == 1 && r.fields[1].value[0] == 'Q');
    RS_CHECK(r.fields[2].name_len == 1 && !memcmp(r.fields[2].value, "new", 3));
    RS_CHECK_EQ(rs_ycsb_record_decode(m, mlen - 1, NULL, &r), RS_EPROTO); /* truncated */
    free(m);
    rs_ycsb_result_free(&r);
}

static void test_key_mapping(void) {
    RS_CHECK_EQ(rs_ycsb_key_u64("12345", 5), 12345);
    RS_CHECK_EQ(rs_ycsb_key_u64("18446744073709551615", 20), UINT64_MAX);
    RS_CHECK(rs_ycsb_key_u64("user12", 6) == rs_fnv1a64("user12", 6));
    RS_CHECK(rs_ycsb_key_u64("18446744073709551616", 20) == rs_fnv1a64("18446744073709551616", 20));
    RS_CHECK(rs_ycsb_key_u64("", 0) == rs_fnv1a64("", 0));
}

static void test_key_names(void) {
    rs_ycsb_props *p;
    rs_ycsb_props_new(&p);
    rs_ycsb_props_set(p, "insertorder", "ordered", "t");
    rs_ycsb_props_set(p, "zeropadding", "6", "t");
    rs_ycsb_workload w;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ycsb_workload_parse(p, &w, &err), RS_OK);
    char k[RS_YCSB_KEY_MAX];
    size_t len;
    rs_ycsb_build_key_into(&w, 42, k, &len);
    RS_CHECK(!strcmp(k, "user000042") && len == 10);
    rs_rng r;
    rs_rng_seed(&r, 1);
    for (int i = 0; i < 20000; i++) { /* every digit pair, every length */
        uint64_t v = i < 10000 ? (uint64_t)i : rs_rng_next(&r) >> (i % 64);
        char want[48];
        snprintf(want, sizeof want, "user%06llu", (unsigned long long)v);
        rs_ycsb_build_key_into(&w, v, k, &len);
        if (strcmp(k, want) || len != strlen(want)) {
            fprintf(stderr, "key %llu: got %s want %s\n", (unsigned long long)v, k, want);
            RS_CHECK(0);
            break;
        }
    }
    rs_ycsb_workload_free(&w);
    rs_ycsb_props_set(p, "insertorder", "hashed", "t");
    RS_CHECK_EQ(rs_ycsb_workload_parse(p, &w, &err), RS_OK);
    rs_ycsb_build_key_into(&w, 42, k, &len);
    char want[64];
    snprintf(want, sizeof want, "user%06llu", (unsigned long long)rs_fnv64_u64(42));
    RS_CHECK(!strcmp(k, want));
    rs_ycsb_workload_free(&w);
    rs_ycsb_props_free(p);
}

/* YCSB's scrambled zipfian with constant 0.99: the most popular keynum is fnv64(0) % items and
 * is drawn with probability 1/zeta(10^10, 0.99); the second, fnv64(1) % items, with 2^-0.99 of
 * that. */
static void test_scrambled_zipfian(void) {
    const uint64_t items = 1000, draws = 400000;
    rs_zipf_scrambled z;
    rs_error err = {0};
    RS_CHECK_EQ(rs_zipf_scrambled_init(&z, items, 0.99, &err), RS_OK);
    uint64_t *cnt = calloc(items, sizeof *cnt);
    rs_rng r;
    rs_rng_seed(&r, 7);
    for (uint64_t i = 0; i < draws; i++)
        cnt[rs_zipf_scrambled_next(&z, &r)]++;
    double p0 = 1.0 / RS_YCSB_SCRAMBLED_ZETAN, p1 = p0 * pow(2.0, -0.99);
    uint64_t k0 = rs_fnv64_u64(0) % items, k1 = rs_fnv64_u64(1) % items;
    double f0 = (double)cnt[k0] / draws, f1 = (double)cnt[k1] / draws;
    /* other ranks fold onto the same keynum too, adding about 1/items of mass each */
    RS_CHECK(f0 > p0 * 0.95 && f0 < p0 * 1.05 + 0.01);
    RS_CHECK(f1 > p1 * 0.95 && f1 < p1 * 1.05 + 0.01);
    uint64_t maxc = 0, arg = 0;
    for (uint64_t i = 0; i < items; i++)
        if (cnt[i] > maxc) maxc = cnt[i], arg = i;
    RS_CHECK_EQ(arg, k0);
    free(cnt);
}

/* Plain zipfian over n items: P(rank i) = (i+1)^-theta / zeta(n) for ranks 0 and 1 (exact in
 * YCSB's generator); the top decile holds the bulk of the mass. */
static void test_zipfian_definition(void) {
    const uint64_t n = 100, draws = 400000;
    rs_zipf z;
    rs_error err = {0};
    RS_CHECK_EQ(rs_zipf_init(&z, n, 0.99, &err), RS_OK);
    uint64_t cnt[100] = {0};
    rs_rng r;
    rs_rng_seed(&r, 11);
    for (uint64_t i = 0; i < draws; i++)
        cnt[rs_zipf_next(&z, &r)]++;
    double zeta = rs_zeta(n, 0.99);
    for (int i = 0; i < 2; i++) {
        double p = pow(i + 1, -0.99) / zeta, f = (double)cnt[i] / draws;
        RS_CHECK(fabs(f - p) < 5 * sqrt(p * (1 - p) / draws));
    }
    for (int i = 1; i < 10; i++)
        RS_CHECK(cnt[i] < cnt[0]);
}

/* Skewed latest: value = last - rank with rank zipfian over [0, last): the newest keynum is the
 * most popular with P = 1/zeta(last); values stay within [1, last]. As `last` grows the zeta is
 * extended incrementally and must equal a fresh zeta. */
static void test_latest(void) {
    rs_ycsb_latest g;
    rs_ycsb_latest_init(&g, 0.99);
    rs_rng r;
    rs_rng_seed(&r, 3);
    const uint64_t last = 500, draws = 300000;
    uint64_t top = 0, second = 0, bad = 0;
    for (uint64_t i = 0; i < draws; i++) {
        uint64_t v = rs_ycsb_latest_next(&g, last, &r);
        if (v < 1 || v > last) bad++;
        top += v == last;
        second += v == last - 1;
    }
    RS_CHECK_EQ(bad, 0);
    double p = 1.0 / rs_zeta(last, 0.99), f = (double)top / draws;
    RS_CHECK(fabs(f - p) < 5 * sqrt(p * (1 - p) / draws));
    double p2 = pow(2, -0.99) / rs_zeta(last, 0.99), f2 = (double)second / draws;
    RS_CHECK(fabs(f2 - p2) < 5 * sqrt(p2 * (1 - p2) / draws));
    rs_ycsb_latest_next(&g, 800, &r); /* grow */
    RS_CHECK(fabs(g.zetan - rs_zeta(800, 0.99)) < 1e-9);
    rs_ycsb_latest_next(&g, 700, &r); /* shrink: recomputed */
    RS_CHECK(fabs(g.zetan - rs_zeta(700, 0.99)) < 1e-9);
}

/* A huge recordcount (found by fuzz_ycsb_props: it summed zeta term by term, 10^15 terms): the
 * first draw costs a bounded zeta, and values stay within [1, last]. */
static void test_latest_huge_count(void) {
    rs_ycsb_latest g;
    rs_ycsb_latest_init(&g, 0.99);
    rs_rng r;
    rs_rng_seed(&r, 5);
    const uint64_t last = 1000000000000000ull;
    for (int i = 0; i < 1000; i++) {
        uint64_t v = rs_ycsb_latest_next(&g, last + (uint64_t)(i % 3), &r); /* inserts landing */
        RS_CHECK(v >= 1 && v <= last + 2);
    }
    RS_CHECK(fabs(g.zetan / rs_zeta(last + 2, 0.99) - 1.0) < 1e-12);
}

/* Hotspot: a fraction hotopn of draws falls in the first hotdata fraction of [lo, hi]. */
static void test_hotspot(void) {
    rs_ycsb_hotspot h;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ycsb_hotspot_init(&h, 100, 1099, 0.2, 0.8, &err), RS_OK);
    rs_rng r;
    rs_rng_seed(&r, 5);
    const uint64_t draws = 200000;
    uint64_t hot = 0, out = 0;
    for (uint64_t i = 0; i < draws; i++) {
        uint64_t v = rs_ycsb_hotspot_next(&h, &r);
        if (v < 100 || v > 1099) out++;
        hot += v < 300;
    }
    RS_CHECK_EQ(out, 0);
    double f = (double)hot / draws;
    RS_CHECK(fabs(f - 0.8) < 5 * sqrt(0.8 * 0.2 / draws));
    RS_CHECK_EQ(rs_ycsb_hotspot_init(&h, 0, 9, 1.5, 0.8, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "hotspotdatafraction") != NULL);
}

static void test_ack_counter(void) {
    rs_ycsb_ack_counter *c;
    RS_CHECK_EQ(rs_ycsb_ack_counter_new(10, &c), RS_OK);
    RS_CHECK_EQ(rs_ycsb_ack_counter_last(c), 9);
    uint64_t a = rs_ycsb_ack_counter_next(c), b = rs_ycsb_ack_counter_next(c),
             d = rs_ycsb_ack_counter_next(c);
    RS_CHECK(a == 10 && b == 11 && d == 12);
    rs_ycsb_ack_counter_ack(c, b); /* out of order: 10 still in flight */
    RS_CHECK_EQ(rs_ycsb_ack_counter_last(c), 9);
    rs_ycsb_ack_counter_ack(c, a);
    RS_CHECK_EQ(rs_ycsb_ack_counter_last(c), 11);
    rs_ycsb_ack_counter_ack(c, d);
    RS_CHECK_EQ(rs_ycsb_ack_counter_last(c), 12);
    rs_ycsb_ack_counter_free(c);
}

/* Operation choice follows the normalised proportions. */
static void test_op_mix(void) {
    rs_ycsb_props *p;
    rs_ycsb_props_new(&p);
    rs_ycsb_props_set(p, "readproportion", "0.2", "t");
    rs_ycsb_props_set(p, "updateproportion", "0.2", "t");
    rs_ycsb_props_set(p, "insertproportion", "0.2", "t");
    rs_ycsb_props_set(p, "scanproportion", "0.2", "t");
    rs_ycsb_props_set(p, "readmodifywriteproportion", "0.2", "t");
    rs_ycsb_workload w;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ycsb_workload_parse(p, &w, &err), RS_OK);
    rs_ycsb_wthread t;
    RS_CHECK_EQ(rs_ycsb_wthread_init(&t, &w, 0), RS_OK);
    uint64_t cnt[5] = {0};
    const uint64_t draws = 100000;
    for (uint64_t i = 0; i < draws; i++)
        cnt[rs_ycsb_next_op(&t)]++;
    for (int i = 0; i < 5; i++)
        RS_CHECK(fabs((double)cnt[i] / draws - 0.2) < 0.01);
    rs_ycsb_wthread_free(&t);
    rs_ycsb_workload_free(&w);
    rs_ycsb_props_free(p);
}

RS_TEST_MAIN(RS_TEST(test_props_file_and_errors), RS_TEST(test_record_codec),
             RS_TEST(test_key_mapping), RS_TEST(test_key_names), RS_TEST(test_scrambled_zipfian),
             RS_TEST(test_zipfian_definition), RS_TEST(test_latest),
             RS_TEST(test_latest_huge_count), RS_TEST(test_hotspot), RS_TEST(test_ack_counter),
             RS_TEST(test_op_mix))

/*
 * test_eventual_bench.c — the wait-primitive benchmark completes in both wait modes, frees
 * what it allocates (ASan leak check), reports consistent figures, and rejects bad configs by
 * field name. No timing assertions beyond "the numbers are in range".
 */
#include <string.h>

#include "recstore/eventual_bench.h"
#include "rs_test.h"

static void run_mode(rs_wait_mode mode) {
    rs_eventual_bench_cfg cfg = {
        .num_waiters = 8, .duration_s = 0.2, .interval_ms = 0.5, .wait_mode = mode};
    rs_eventual_bench_result r;
    rs_error err = {0};
    RS_CHECK_EQ(rs_eventual_bench_run(&cfg, &r, &err), RS_OK);
    RS_CHECK(r.elapsed_s == 0.2);
    RS_CHECK(r.ops_per_sec == (double)r.ops / 0.2);
    RS_CHECK(r.cpu_user_s >= 0 && r.cpu_sys_s >= 0);
    RS_CHECK(r.cpu_time_s == r.cpu_user_s + r.cpu_sys_s);
    RS_CHECK(r.wall_s >= r.elapsed_s);
    RS_CHECK(r.late_p50_us <= r.late_p99_us);
}

static void test_block(void) {
    run_mode(RS_WAIT_BLOCK);
}

static void test_spin(void) {
    run_mode(RS_WAIT_SPIN);
}

static void test_bad_config(void) {
    rs_eventual_bench_result r;
    rs_error err = {0};
    rs_eventual_bench_cfg cfg = {.num_waiters = 0, .duration_s = 1, .interval_ms = 1};
    RS_CHECK_EQ(rs_eventual_bench_run(&cfg, &r, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "num_waiters") != NULL);
    cfg.num_waiters = 1;
    cfg.duration_s = 0;
    RS_CHECK_EQ(rs_eventual_bench_validate(&cfg, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "duration_s") != NULL);
    cfg.duration_s = 1;
    cfg.interval_ms = -1;
    RS_CHECK_EQ(rs_eventual_bench_validate(&cfg, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "interval_ms") != NULL);
    cfg.interval_ms = 1;
    cfg.wait_mode = (rs_wait_mode)7;
    RS_CHECK_EQ(rs_eventual_bench_validate(&cfg, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "wait_mode") != NULL);
}

RS_TEST_MAIN(RS_TEST(test_block), RS_TEST(test_spin), RS_TEST(test_bad_config))

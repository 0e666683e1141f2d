/*
 * test_kv_cceh.c — SSD_EXTENDIBLE_HASH (CCEH in files under a directory): the shared index checks
 * (kv_test_cases.h), segment splits while filling, and reopen: fixed rows and variable values
 * written before close come back after reopen, count included, and the reopened store keeps
 * accepting writes; a value_size mismatch on reopen is refused naming value_size.
 */
#include "kv_test_cases.h"

static void test_cceh_basic(void) {
    kvt_basic(RS_KV_INDEX_CCEH);
}
static void test_cceh_batch_segments(void) {
    kvt_batch_segments(RS_KV_INDEX_CCEH);
}
static void test_cceh_growth_and_full(void) {
    kvt_full(RS_KV_INDEX_CCEH, 20000);
}
static void test_cceh_variable(void) {
    kvt_variable(RS_KV_INDEX_CCEH);
}
static void test_cceh_update_add(void) {
    kvt_update_add(RS_KV_INDEX_CCEH);
}
static void test_cceh_no_torn_reads(void) {
    kvt_no_torn_reads(RS_KV_INDEX_CCEH);
}

static void test_cceh_requires_path(void) {
    rs_kv_config cfg = {.index_type = RS_KV_INDEX_CCEH, .value_size = 8, .capacity = 10};
    rs_kv *kv = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_kv_open(&cfg, &kv, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "path") != NULL);
}

static void test_cceh_reopen(void) {
    const char *d = kvt_fresh_dir();
    char dir[256];
    snprintf(dir, sizeof dir, "%s", d);
    rs_error err = {0};
    uint8_t row[128], got[128];
    rs_kv *kv = kvt_open(RS_KV_INDEX_CCEH, 128, 30000, dir);
    if (!kv) return;
    for (uint64_t k = 0; k < 20000; k++) {
        kvt_fill_row(row, 128, k, 5);
        RS_CHECK_EQ(rs_kv_put(kv, k * 3, row, 128, &err), 0);
    }
    for (uint64_t k = 0; k < 20000; k += 10)
        RS_CHECK_EQ(rs_kv_delete(kv, k * 3), 0);
    rs_kv_close(kv);

    kv = kvt_open(RS_KV_INDEX_CCEH, 128, 30000, dir);
    if (!kv) return;
    RS_CHECK_EQ(rs_kv_count(kv), 18000);
    for (uint64_t k = 0; k < 20000; k++) {
        int rc = rs_kv_get(kv, k * 3, got, sizeof got, NULL);
        if (k % 10 == 0) {
            RS_CHECK_EQ(rc, RS_ENOTFOUND);
        } else {
            kvt_fill_row(row, 128, k, 5);
            RS_CHECK_EQ(rc, 0);
            if (memcmp(row, got, 128)) {
                RS_CHECK(!"row differs after reopen");
                break;
            }
        }
    }
    /* still writable: new keys (reusing freed rows) and overwrites */
    for (uint64_t k = 0; k < 2000; k++) {
        kvt_fill_row(row, 128, k, 6);
        RS_CHECK_EQ(rs_kv_put(kv, 1000000 + k, row, 128, &err), 0);
    }
    RS_CHECK_EQ(rs_kv_count(kv), 20000);
    rs_kv_close(kv);

    /* value_size must match */
    rs_kv_config cfg = {
        .index_type = RS_KV_INDEX_CCEH, .value_size = 64, .capacity = 30000, .path = dir};
    kv = NULL;
    RS_CHECK_EQ(rs_kv_open(&cfg, &kv, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "value_size") != NULL);

    kv = kvt_open(RS_KV_INDEX_CCEH, 128, 30000, dir);
    if (!kv) return;
    RS_CHECK_EQ(rs_kv_get(kv, 1000000 + 1999, got, sizeof got, NULL), 0);
    kvt_fill_row(row, 128, 1999, 6);
    RS_CHECK(memcmp(row, got, 128) == 0);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

/* Key k's value: "value-<k>-" then k % 40 padding bytes, so lengths cover several size classes. */
static int variable_value(int k, char *out, size_t cap) {
    static const char pad[] = "0123456789abcdefghijklmnopqrstuvwxyzABCD";
    return snprintf(out, cap, "value-%d-%.*s", k, k % 40, pad);
}

static void test_cceh_reopen_variable(void) {
    const char *d = kvt_fresh_dir();
    char dir[256];
    snprintf(dir, sizeof dir, "%s", d);
    rs_error err = {0};
    char val[64], got[64];
    rs_kv *kv = kvt_open(RS_KV_INDEX_CCEH, 0, 1000, dir);
    if (!kv) return;
    for (int k = 0; k < 300; k++) {
        int n = variable_value(k, val, sizeof val);
        RS_CHECK_EQ(rs_kv_put(kv, (uint64_t)k, val, (size_t)n, &err), 0);
    }
    rs_kv_close(kv);
    kv = kvt_open(RS_KV_INDEX_CCEH, 0, 1000, dir);
    if (!kv) return;
    RS_CHECK_EQ(rs_kv_count(kv), 300);
    for (int k = 0; k < 300; k++) {
        int n = variable_value(k, val, sizeof val);
        size_t len = 0;
        RS_CHECK_EQ(rs_kv_get(kv, (uint64_t)k, got, sizeof got, &len), 0);
        RS_CHECK_EQ(len, (size_t)n);
        RS_CHECK(memcmp(val, got, (size_t)n) == 0);
    }
    /* new values after reopen come from the persisted allocator, not over old ones */
    RS_CHECK_EQ(rs_kv_put(kv, 5000, "fresh", 5, &err), 0);
    size_t len = 0;
    RS_CHECK_EQ(rs_kv_get(kv, 0, got, sizeof got, &len), 0);
    RS_CHECK(len == 8 && memcmp(got, "value-0-", 8) == 0);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

static void test_cceh_hot_key_no_torn_reads(void) {
    kvt_hot_key_no_torn_reads(RS_KV_INDEX_CCEH);
}

RS_TEST_MAIN(RS_TEST(test_cceh_hot_key_no_torn_reads), RS_TEST(test_cceh_basic),
             RS_TEST(test_cceh_batch_segments), RS_TEST(test_cceh_growth_and_full),
             RS_TEST(test_cceh_variable), RS_TEST(test_cceh_update_add),
             RS_TEST(test_cceh_no_torn_reads), RS_TEST(test_cceh_requires_path),
             RS_TEST(test_cceh_reopen), RS_TEST(test_cceh_reopen_variable))

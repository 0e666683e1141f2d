/*
 * test_kv_ext_hash.c — DRAM_EXTENDIBLE_HASH: the shared index checks (kv_test_cases.h); filling
 * 20000 keys from a 16-bucket start forces many bucket splits and directory doublings.
 */
#include "kv_test_cases.h"

static void test_eh_basic(void) {
    kvt_basic(RS_KV_INDEX_EXTENDIBLE_HASH);
}
static void test_eh_batch_segments(void) {
    kvt_batch_segments(RS_KV_INDEX_EXTENDIBLE_HASH);
}
static void test_eh_growth_and_full(void) {
    kvt_full(RS_KV_INDEX_EXTENDIBLE_HASH, 20000);
}
static void test_eh_variable(void) {
    kvt_variable(RS_KV_INDEX_EXTENDIBLE_HASH);
}
static void test_eh_update_add(void) {
    kvt_update_add(RS_KV_INDEX_EXTENDIBLE_HASH);
}
static void test_eh_no_torn_reads(void) {
    kvt_no_torn_reads(RS_KV_INDEX_EXTENDIBLE_HASH);
}

/* Readers racing inserts that split buckets never miss a key that was present before. */
typedef struct {
    rs_kv *kv;
    long missing;
} eh_race;

static void *eh_reader(void *arg) {
    eh_race *r = arg;
    uint64_t v;
    for (int round = 0; round < 20; round++)
        for (uint64_t k = 0; k < 500; k++)
            if (rs_kv_get(r->kv, k, &v, 8, NULL) != 0 || v != k) r->missing++;
    return NULL;
}

static void test_eh_reads_during_splits(void) {
    rs_kv *kv = kvt_open(RS_KV_INDEX_EXTENDIBLE_HASH, 8, 100000, NULL);
    if (!kv) return;
    rs_error err = {0};
    for (uint64_t k = 0; k < 500; k++)
        rs_kv_put(kv, k, &k, 8, &err);
    eh_race r = {kv, 0};
    pthread_t th;
    pthread_create(&th, NULL, eh_reader, &r);
    for (uint64_t k = 500; k < 60000; k++)
        RS_CHECK_EQ(rs_kv_put(kv, k, &k, 8, &err), 0);
    pthread_join(th, NULL);
    RS_CHECK_EQ(r.missing, 0);
    RS_CHECK_EQ(rs_kv_count(kv), 60000);
    rs_kv_close(kv);
}

static void test_eh_hot_key_no_torn_reads(void) {
    kvt_hot_key_no_torn_reads(RS_KV_INDEX_EXTENDIBLE_HASH);
}

RS_TEST_MAIN(RS_TEST(test_eh_hot_key_no_torn_reads), RS_TEST(test_eh_basic),
             RS_TEST(test_eh_batch_segments), RS_TEST(test_eh_growth_and_full),
             RS_TEST(test_eh_variable), RS_TEST(test_eh_update_add), RS_TEST(test_eh_no_torn_reads),
             RS_TEST(test_eh_reads_during_splits))

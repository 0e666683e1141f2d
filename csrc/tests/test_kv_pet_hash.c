/*
 * test_kv_pet_hash.c — DRAM_PET_HASH: the shared index checks (kv_test_cases.h) plus overflow
 * chains: keys that all share one home line spill along the probe sequence and stay findable,
 * and deletes inside the chain keep later keys reachable.
 */
#include "kv_test_cases.h"

static void test_pet_basic(void) {
    kvt_basic(RS_KV_INDEX_PET_HASH);
}
static void test_pet_batch_segments(void) {
    kvt_batch_segments(RS_KV_INDEX_PET_HASH);
}
static void test_pet_full(void) {
    kvt_full(RS_KV_INDEX_PET_HASH, 5000);
}
static void test_pet_variable(void) {
    kvt_variable(RS_KV_INDEX_PET_HASH);
}
static void test_pet_update_add(void) {
    kvt_update_add(RS_KV_INDEX_PET_HASH);
}
static void test_pet_no_torn_reads(void) {
    kvt_no_torn_reads(RS_KV_INDEX_PET_HASH);
}

static void test_pet_overflow_chain(void) {
    /* capacity 800 -> next_pow2(800 / 0.7875 / 4 + 1) = 256 lines of 4 slots: 40 keys with one
     * home line fill it and spill 36 along its probe sequence */
    enum { SLOTS = 4, N = 40 };
    rs_kv *kv = kvt_open(RS_KV_INDEX_PET_HASH, 8, 800, NULL);
    if (!kv) return;
    uint64_t keys[N];
    int n = 0;
    for (uint64_t k = 1; n < N; k++)
        if ((rs_kv_hash(k) & 255) == 0) keys[n++] = k;
    rs_error err = {0};
    for (int i = 0; i < n; i++)
        RS_CHECK_EQ(rs_kv_put(kv, keys[i], &keys[i], 8, &err), 0);
    uint64_t v;
    for (int i = 0; i < n; i++) {
        RS_CHECK_EQ(rs_kv_get(kv, keys[i], &v, 8, NULL), 0);
        RS_CHECK_EQ(v, keys[i]);
    }
    /* every key through the batch path: the home line, the one-step probe pass and the slow
     * path for keys further along the sequence */
    uint8_t out[8 * N], found[N];
    size_t nf;
    RS_CHECK_EQ(rs_kv_batch_get_flat(kv, keys, (size_t)n, out, found, &nf), 0);
    RS_CHECK_EQ(nf, (size_t)n);
    for (int i = 0; i < n; i++) {
        RS_CHECK_EQ(found[i], 1);
        RS_CHECK(memcmp(out + 8 * i, &keys[i], 8) == 0);
    }
    /* remove the first 4 (the home line) — the spilled keys must stay reachable */
    for (int i = 0; i < SLOTS; i++)
        RS_CHECK_EQ(rs_kv_delete(kv, keys[i]), 0);
    for (int i = SLOTS; i < n; i++) {
        RS_CHECK_EQ(rs_kv_get(kv, keys[i], &v, 8, NULL), 0);
        RS_CHECK_EQ(v, keys[i]);
    }
    RS_CHECK_EQ(rs_kv_batch_get_flat(kv, keys, (size_t)n, out, found, &nf), 0);
    RS_CHECK_EQ(nf, (size_t)n - SLOTS);
    for (int i = 0; i < n; i++) {
        RS_CHECK_EQ(found[i], i >= SLOTS);
        if (i >= SLOTS) RS_CHECK(memcmp(out + 8 * i, &keys[i], 8) == 0);
    }
    /* home slots are free again and reused; the re-inserted keys read back their new values */
    for (int i = 0; i < SLOTS; i++) {
        uint64_t nv = keys[i] ^ 0xabcdef;
        RS_CHECK_EQ(rs_kv_put(kv, keys[i], &nv, 8, &err), 0);
    }
    RS_CHECK_EQ(rs_kv_count(kv), (uint64_t)n);
    RS_CHECK_EQ(rs_kv_batch_get_flat(kv, keys, (size_t)n, out, found, &nf), 0);
    RS_CHECK_EQ(nf, (size_t)n);
    for (int i = 0; i < SLOTS; i++) {
        uint64_t nv = keys[i] ^ 0xabcdef;
        RS_CHECK(memcmp(out + 8 * i, &nv, 8) == 0);
    }
    rs_kv_close(kv);
}

static void test_index_names(void) {
    rs_kv_index_type t;
    rs_error err = {0};
    RS_CHECK_EQ(rs_kv_index_type_parse("dram_pet_hash", &t, &err), 0);
    RS_CHECK_EQ(t, RS_KV_INDEX_PET_HASH);
    RS_CHECK_EQ(rs_kv_index_type_parse("DRAM", &t, &err), 0);
    RS_CHECK_EQ(t, RS_KV_INDEX_EXTENDIBLE_HASH);
    RS_CHECK_EQ(rs_kv_index_type_parse("cceh", &t, &err), 0);
    RS_CHECK_EQ(t, RS_KV_INDEX_CCEH);
    RS_CHECK_EQ(rs_kv_index_type_parse("btree", &t, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "btree") && strstr(err.msg, "DRAM_PET_HASH"));
    rs_kv_config cfg = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = 8, .capacity = 0};
    rs_kv *kv = NULL;
    RS_CHECK_EQ(rs_kv_open(&cfg, &kv, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "capacity") != NULL);
}

static void test_pet_hot_key_no_torn_reads(void) {
    kvt_hot_key_no_torn_reads(RS_KV_INDEX_PET_HASH);
}

RS_TEST_MAIN(RS_TEST(test_pet_hot_key_no_torn_reads), RS_TEST(test_pet_basic),
             RS_TEST(test_pet_batch_segments), RS_TEST(test_pet_full), RS_TEST(test_pet_variable),
             RS_TEST(test_pet_update_add), RS_TEST(test_pet_overflow_chain),
             RS_TEST(test_pet_no_torn_reads), RS_TEST(test_index_names))

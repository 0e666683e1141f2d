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

/* Every key of keys[0..n) (n <= 64) through the batch path, under each row-loop build the CPU
 * runs (the lookup's line match is built per kernel too): key i must be found iff want[i], with
 * row vals[i]. The batch holds the keys twice, at its start and at its end, around CB_FILL keys
 * never stored: longer than the distance between a line's prefetch and its match, so the lookup
 * carries keys past their home line both while it still prefetches and in its last steps. */
enum { CB_KEYS = 64, CB_FILL = 200, CB_MAX = 2 * CB_KEYS + CB_FILL };
static void check_batch(rs_kv *kv, const uint64_t *keys, int n, const uint8_t *want,
                        const uint64_t *vals) {
    RS_CHECK(n <= CB_KEYS);
    uint64_t batch[CB_MAX];
    int idx[CB_MAX], m = 0; /* idx: the key's index in keys, or -1 for a key never stored */
    for (int i = 0; i < n; i++, m++)
        batch[m] = keys[i], idx[m] = i;
    for (int f = 0; f < CB_FILL; f++, m++)
        batch[m] = (1ull << 40) + (uint64_t)f, idx[m] = -1;
    for (int i = 0; i < n; i++, m++)
        batch[m] = keys[i], idx[m] = i;
    for (int k = 0; k < KVT_KERNELS; k++) {
        if (!rs_kv_cpu_supports(k)) continue;
        RS_CHECK_EQ(rs_kv_row_kernel_select(kvt_kernels[k], NULL), 0);
        uint8_t out[8 * CB_MAX], found[CB_MAX];
        size_t nf, expect = 0;
        RS_CHECK_EQ(rs_kv_batch_get_flat(kv, batch, (size_t)m, out, found, &nf), 0);
        for (int j = 0; j < m; j++) {
            int w = idx[j] < 0 ? 0 : want[idx[j]];
            RS_CHECK_EQ(found[j], w);
            if (w) RS_CHECK(memcmp(out + 8 * j, &vals[idx[j]], 8) == 0);
            expect += (size_t)w;
        }
        RS_CHECK_EQ(nf, expect);
    }
    rs_kv_row_kernel_select("auto", NULL);
}

static void test_pet_overflow_chain(void) {
    /* capacity 800 -> next_pow2(800 / 0.7875 / 4 + 1) = 256 lines of 4 slots: 40 keys with one
     * home line fill it and spill 36 along its probe sequence */
    enum { SLOTS = 4, N = 40 };
    rs_kv *kv = kvt_open(RS_KV_INDEX_PET_HASH, 8, 800, NULL);
    if (!kv) return;
    uint64_t keys[N], vals[N];
    uint8_t want[N];
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
    /* every key through the batch path: each slot of the home line, the probe passes and the
     * slow path for keys further along the sequence */
    memcpy(vals, keys, sizeof keys);
    memset(want, 1, sizeof want);
    check_batch(kv, keys, n, want, vals);
    /* remove the first 4 (the home line) — the spilled keys must stay reachable */
    for (int i = 0; i < SLOTS; i++) {
        RS_CHECK_EQ(rs_kv_delete(kv, keys[i]), 0);
        want[i] = 0;
    }
    for (int i = SLOTS; i < n; i++) {
        RS_CHECK_EQ(rs_kv_get(kv, keys[i], &v, 8, NULL), 0);
        RS_CHECK_EQ(v, keys[i]);
    }
    check_batch(kv, keys, n, want, vals);
    /* home slots are free again and reused, last key first: key 3 takes the first free slot
     * while its removed entry (its key, a free word) still sits in the last one — the batch
     * match sees both and must take the live one; the re-inserted keys read back their new
     * values */
    for (int i = SLOTS - 1; i >= 0; i--) {
        vals[i] = keys[i] ^ 0xabcdef;
        want[i] = 1;
        RS_CHECK_EQ(rs_kv_put(kv, keys[i], &vals[i], 8, &err), 0);
        if (i == SLOTS - 1) check_batch(kv, keys, n, want, vals);
    }
    RS_CHECK_EQ(rs_kv_count(kv), (uint64_t)n);
    check_batch(kv, keys, n, want, vals);
    rs_kv_close(kv);
}

/* A reader that found a key and then reads the word of its entry, removed meanwhile, sees the
 * free marker (word 0, handle 0) beside the key the entry keeps: the seqlock copy must refuse it,
 * not return handle 0's unused row as the key's (under ThreadSanitizer's timing
 * test_pet_no_torn_reads met this as a found row of zeros). */
static void test_pet_removed_entry_is_not_a_row(void) {
    rs_kv *kv = kvt_open(RS_KV_INDEX_PET_HASH, 8, 100, NULL);
    if (!kv) return;
    uint64_t key = 7, val = 0x1234567890abcdefull, out = 0;
    rs_error err = {0};
    RS_CHECK_EQ(rs_kv_put(kv, key, &val, 8, &err), 0);
    rs_kv_slot s;
    int created = 0;
    RS_CHECK_EQ(kv->ops->acquire(kv->ix, key, 0, 0, &s, &created, &err), 0);
    kv->ops->release(kv->ix, &s);
    uint64_t live = __atomic_load_n(s.word, __ATOMIC_RELAXED);
    RS_CHECK_EQ(rs_kv_copy_fixed(&kv->vs, key, &s, live, &out), 1);
    RS_CHECK_EQ(out, val);
    RS_CHECK_EQ(rs_kv_delete(kv, key), 0);
    uint64_t freed = __atomic_load_n(s.word, __ATOMIC_RELAXED);
    RS_CHECK_EQ(__atomic_load_n(s.keyp, __ATOMIC_RELAXED), key); /* the entry keeps its key */
    RS_CHECK_EQ(rs_kv_copy_fixed(&kv->vs, key, &s, freed, &out), 0);
    RS_CHECK_EQ(rs_kv_get(kv, key, &out, 8, NULL), RS_ENOTFOUND);
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
             RS_TEST(test_pet_no_torn_reads), RS_TEST(test_pet_removed_entry_is_not_a_row),
             RS_TEST(test_index_names))

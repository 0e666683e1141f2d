/*
 * test_kv_bench.c — the benchmark_kv_engine loops: a counted load and run put and read exactly
 * the requested keys with every read mode, histograms hold one sample per call, the ceiling needs
 * no engine, batches go to out_buffers output buffers in turn, and bad configurations are refused
 * naming the field.
 */
#include <string.h>

#include "kv/kv_internal.h" /* rs_kv_pet_lines */
#include "recstore/kv_bench.h"
#include "rs_test.h"

static rs_kv_bench_phase g_load, g_run;

static rs_kv *open_pet(uint64_t cap, uint32_t vs) {
    rs_kv_config cfg = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = vs, .capacity = cap};
    rs_kv *kv = NULL;
    RS_CHECK_EQ(rs_kv_open(&cfg, &kv, NULL), 0);
    return kv;
}

/* kv's 1000 rows of 64 bytes read in batches of 10 keys by 2 threads, 5000 keys in all */
static rs_kv_bench_config batch_config(rs_kv *kv) {
    return (rs_kv_bench_config){.kv = kv,
                                .record_count = 1000,
                                .value_size = 64,
                                .threads = 2,
                                .workload = 'c',
                                .distribution = RS_KV_BENCH_UNIFORM,
                                .read_mode = RS_KV_BENCH_BATCH,
                                .batch_keys = 10,
                                .operation_count = 5000,
                                .seed = 3};
}

static void test_counted_batch_run(void) {
    rs_kv *kv = open_pet(1000, 64);
    rs_kv_bench_config c = batch_config(kv);
    rs_kv_bench *b = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), 0);
    RS_CHECK_EQ(rs_kv_bench_load(b, &g_load, &err), 0);
    RS_CHECK_EQ(g_load.ops, 1000);
    RS_CHECK_EQ(g_load.update.count, 1000);
    RS_CHECK_EQ(rs_kv_count(kv), 1000);
    RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, &err), 0);
    RS_CHECK_EQ(g_run.ops, 5000);
    RS_CHECK_EQ(g_run.read_ops, 5000);
    RS_CHECK_EQ(g_run.batches, 500);
    RS_CHECK_EQ(g_run.read.count, 500);
    RS_CHECK_EQ(g_run.not_found, 0);
    /* every row holds its key in its first 8 bytes after the load */
    uint64_t keys[3] = {0, 500, 999}, rows[3 * 8];
    RS_CHECK_EQ(rs_kv_batch_get_flat(kv, keys, 3, rows, NULL, NULL), 0);
    RS_CHECK(rows[0] == 0 && rows[8] == 500 && rows[16] == 999);
    rs_kv_bench_close(b);
    rs_kv_close(kv);
}

/* paired_ceiling: every batch is followed by a ceiling batch over the engine's own rows, timed
 * apart; ops count the engine's keys only */
static void test_paired_ceiling(void) {
    rs_kv *kv = open_pet(1000, 64);
    rs_kv_bench_config c = batch_config(kv);
    c.huge_pages = RS_KV_HUGE_OFF;
    c.paired_ceiling = 1;
    rs_kv_bench *b = NULL;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, NULL), 0);
    RS_CHECK_EQ(rs_kv_bench_load(b, &g_load, NULL), 0);
    RS_CHECK_EQ(rs_kv_count(kv), 1000);
    RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, NULL), 0);
    RS_CHECK_EQ(g_run.ops, 5000);
    RS_CHECK_EQ(g_run.batches, 500);
    RS_CHECK_EQ(g_run.read.count, 500);
    RS_CHECK_EQ(g_run.paired.count, 500);
    RS_CHECK_EQ(g_run.not_found, 0);
    rs_kv_memory m = {0};
    rs_kv_bench_memory(b, &m); /* the engine's: there is no flat array */
    RS_CHECK(m.index_bytes > 0);
    RS_CHECK(rs_kv_bench_rows_huge_share(b) >= 0.0); /* the engine's slab: known */
    rs_kv_bench_close(b);
    /* the bound, and the plain ceiling itself, paired with the plain ceiling; without pairing
     * nothing lands in paired */
    for (int k = 0; k < 3; k++) {
        int paired = k > 0;
        rs_kv_bench_config cc = c;
        cc.kv = NULL;
        cc.threads = 1;
        cc.read_mode = RS_KV_BENCH_CEILING;
        cc.ceiling_index_lines = k == 2 ? 0 : 2;
        cc.paired_ceiling = paired;
        RS_CHECK_EQ(rs_kv_bench_open(&cc, &b, NULL), 0);
        RS_CHECK_EQ(rs_kv_bench_load(b, &g_load, NULL), 0);
        RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, NULL), 0);
        RS_CHECK_EQ(g_run.read.count, 500);
        RS_CHECK_EQ(g_run.paired.count, paired ? 500 : 0);
        rs_kv_bench_close(b);
    }
    rs_kv_close(kv);
    /* the paired batches read the engine's rows, so it must have fixed-size ones */
    rs_kv *var = open_pet(100, 0);
    rs_error err = {0};
    c.kv = var;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "paired_ceiling needs an engine with fixed-size rows") != NULL);
    rs_kv_close(var);
}

static void test_workload_a_zipfian_get(void) {
    rs_kv *kv = open_pet(2000, 32);
    rs_kv_bench_config c = {.kv = kv,
                            .record_count = 2000,
                            .value_size = 32,
                            .threads = 1,
                            .workload = 'a',
                            .distribution = RS_KV_BENCH_ZIPFIAN,
                            .zipfian_alpha = 0.9,
                            .read_mode = RS_KV_BENCH_GET,
                            .operation_count = 4000,
                            .seed = 1};
    rs_kv_bench *b = NULL;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, NULL), 0);
    RS_CHECK_EQ(rs_kv_bench_load(b, &g_load, NULL), 0);
    RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, NULL), 0);
    RS_CHECK_EQ(g_run.ops, 4000);
    RS_CHECK_EQ(g_run.read_ops + g_run.update_ops, 4000);
    RS_CHECK(g_run.update_ops > 1500 && g_run.update_ops < 2500);
    RS_CHECK_EQ(g_run.read.count, g_run.read_ops);
    RS_CHECK_EQ(g_run.update.count, g_run.update_ops);
    RS_CHECK_EQ(rs_kv_count(kv), 2000); /* updates overwrite, never add keys */
    rs_kv_bench_close(b);
    rs_kv_close(kv);
}

static void test_ceiling_timed(void) {
    rs_kv_bench_config c = {.record_count = 500,
                            .value_size = 128,
                            .threads = 1,
                            .workload = 'c',
                            .distribution = RS_KV_BENCH_UNIFORM,
                            .read_mode = RS_KV_BENCH_CEILING,
                            .batch_keys = 20,
                            .running_seconds = 0.05};
    rs_kv_bench *b = NULL;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, NULL), 0);
    RS_CHECK_EQ(rs_kv_bench_load(b, &g_load, NULL), 0);
    RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, NULL), 0);
    RS_CHECK(g_run.seconds >= 0.05);
    RS_CHECK(g_run.ops > 0);
    RS_CHECK_EQ(g_run.ops, g_run.batches * 20);
    rs_kv_bench_close(b);
}

/* The ceiling over 3000 rows of 64 bytes on 4 KiB pages, batches of 50, 5000 keys in all, with
 * `lines` chunk lines per key in an array of `bytes` (0: PET's size) */
static rs_kv_bench_config ceiling_config(uint32_t lines, uint64_t bytes) {
    return (rs_kv_bench_config){.record_count = 3000,
                                .value_size = 64,
                                .threads = 1,
                                .workload = 'c',
                                .distribution = RS_KV_BENCH_UNIFORM,
                                .read_mode = RS_KV_BENCH_CEILING,
                                .batch_keys = 50,
                                .operation_count = 5000,
                                .huge_pages = RS_KV_HUGE_OFF,
                                .ceiling_index_lines = lines,
                                .ceiling_index_bytes = bytes};
}

/* ceiling_index_lines: the stand-in is PET's line array in size, and the run is whole */
static void test_ceiling_index_lines(void) {
    rs_kv_config kc = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = 64, .capacity = 3000};
    rs_kv *kv = NULL;
    RS_CHECK_EQ(rs_kv_open(&kc, &kv, NULL), 0);
    rs_kv_memory pet = {0};
    rs_kv_get_memory(kv, &pet);
    rs_kv_close(kv);
    const uint64_t pet_lines = rs_kv_pet_lines(3000);
    RS_CHECK_EQ(pet.index_bytes, pet_lines * (RS_KV_PET_LINE_BYTES + 2));
    for (uint32_t lines = 0; lines <= 2; lines++) {
        rs_kv_bench_config c = ceiling_config(lines, 0);
        rs_kv_bench *b = NULL;
        RS_CHECK_EQ(rs_kv_bench_open(&c, &b, NULL), 0);
        RS_CHECK_EQ(rs_kv_bench_load(b, &g_load, NULL), 0);
        RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, NULL), 0);
        RS_CHECK_EQ(g_run.ops, 5000);
        RS_CHECK_EQ(g_run.not_found, 0);
        rs_kv_memory m = {0};
        rs_kv_bench_memory(b, &m);
        /* PET's line array (its index bytes also count 2 bytes of writer state per line) */
        RS_CHECK_EQ(m.index_bytes, lines ? pet_lines * RS_KV_PET_LINE_BYTES : 0);
        RS_CHECK(rs_kv_bench_rows_huge_share(b) == 0.0); /* 4 KiB pages asked for */
        rs_kv_bench_close(b);
    }
    /* ceiling_index_bytes: an array of that size instead, from one 128-byte chunk up */
    for (uint64_t bytes = 128; bytes <= 4 * pet.index_bytes; bytes *= 8) {
        rs_kv_bench_config c = ceiling_config(2, bytes);
        rs_kv_bench *b = NULL;
        RS_CHECK_EQ(rs_kv_bench_open(&c, &b, NULL), 0);
        RS_CHECK_EQ(rs_kv_bench_load(b, &g_load, NULL), 0);
        RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, NULL), 0);
        RS_CHECK_EQ(g_run.ops, 5000);
        rs_kv_memory m = {0};
        rs_kv_bench_memory(b, &m);
        RS_CHECK_EQ(m.index_bytes, bytes);
        rs_kv_bench_close(b);
    }
}

/* out_buffers: the batches of each thread go to its buffers in turn, every buffer is written once
 * there are at least as many batches as buffers, and a thread with fewer batches writes fewer */
static void test_out_buffers(void) {
    rs_kv *kv = open_pet(1000, 64);
    const uint64_t batch_bytes = 10 * 64;
    for (int ceiling = 0; ceiling <= 1; ceiling++) {
        rs_kv_bench_config c = batch_config(ceiling ? NULL : kv);
        if (ceiling) c.read_mode = RS_KV_BENCH_CEILING;
        rs_kv_bench *b = NULL;
        RS_CHECK_EQ(rs_kv_bench_open(&c, &b, NULL), 0);
        RS_CHECK_EQ(rs_kv_bench_load(b, &g_load, NULL), 0);
        RS_CHECK_EQ(g_load.out_bytes, 0); /* the load writes rows, not batches */
        RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, NULL), 0);
        RS_CHECK_EQ(g_run.out_bytes, 2 * batch_bytes); /* one buffer per thread by default */
        rs_kv_bench_close(b);
        /* 2 threads × 250 batches over 7 buffers each; then 300 buffers each, 250 written */
        const uint32_t nbuf[] = {7, 300};
        const uint64_t written[] = {2 * 7 * batch_bytes, 2 * 250 * batch_bytes};
        for (int i = 0; i < 2; i++) {
            c.out_buffers = nbuf[i];
            RS_CHECK_EQ(rs_kv_bench_open(&c, &b, NULL), 0);
            RS_CHECK_EQ(rs_kv_bench_run(b, &g_run, NULL), 0);
            RS_CHECK_EQ(g_run.ops, 5000);
            RS_CHECK_EQ(g_run.batches, 500);
            RS_CHECK_EQ(g_run.not_found, 0);
            RS_CHECK_EQ(g_run.out_bytes, written[i]);
            rs_kv_bench_close(b);
        }
    }
    rs_kv_close(kv);
}

static void test_bad_config(void) {
    rs_error err = {0};
    rs_kv_bench *b = NULL;
    rs_kv_bench_config c = {.record_count = 10,
                            .value_size = 8,
                            .threads = 1,
                            .workload = 'x',
                            .distribution = RS_KV_BENCH_UNIFORM,
                            .read_mode = RS_KV_BENCH_CEILING,
                            .batch_keys = 1,
                            .operation_count = 1};
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "workload") != NULL);
    c.workload = 'c';
    c.read_mode = RS_KV_BENCH_BATCH;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "kv") != NULL);
    c.read_mode = RS_KV_BENCH_CEILING;
    c.operation_count = 0;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "operation_count") != NULL);
    c.operation_count = 1;
    c.distribution = RS_KV_BENCH_ZIPFIAN;
    c.zipfian_alpha = 1.5;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    c.distribution = RS_KV_BENCH_UNIFORM;
    c.ceiling_index_lines = 3;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "ceiling_index_lines") != NULL);
    c.ceiling_index_lines = 1;
    c.read_mode = RS_KV_BENCH_GET;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "ceiling_index_lines") != NULL);
    c.read_mode = RS_KV_BENCH_CEILING;
    const uint64_t bad_sizes[] = {64, 3000, (1ull << 20) + 128};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        c.ceiling_index_bytes = bad_sizes[i];
        RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
        RS_CHECK(strstr(err.msg, "ceiling_index_bytes must be a power of two") != NULL);
    }
    c.ceiling_index_bytes = 4096;
    c.ceiling_index_lines = 0;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "ceiling_index_bytes needs ceiling_index_lines") != NULL);
    c.ceiling_index_bytes = 0;
    c.paired_ceiling = 1; /* a single get has no batch to pair with */
    c.read_mode = RS_KV_BENCH_GET;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "paired_ceiling needs") != NULL);
    c.paired_ceiling = 0;
    c.out_buffers = 2; /* a single get has no batch to put in them */
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "out_buffers 2 needs read_mode batch_get_flat or ceiling") != NULL);
    c.read_mode = RS_KV_BENCH_CEILING;
    c.out_buffers = RS_KV_BENCH_MAX_OUT_BUFFERS + 1;
    RS_CHECK_EQ(rs_kv_bench_open(&c, &b, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "out_buffers must be at most 65536 (got 65537)") != NULL);
}

RS_TEST_MAIN(RS_TEST(test_counted_batch_run), RS_TEST(test_paired_ceiling),
             RS_TEST(test_workload_a_zipfian_get), RS_TEST(test_ceiling_timed),
             RS_TEST(test_ceiling_index_lines), RS_TEST(test_out_buffers), RS_TEST(test_bad_config))

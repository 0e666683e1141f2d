/*
 * kv_test_cases.h — checks every KV index must pass, shared by test_kv_pet_hash.c,
 * test_kv_ext_hash.c and test_kv_cceh.c: insert/lookup/overwrite/delete, batch reads with misses,
 * batch reads over many segments in both builds of the row loops, capacity (RS_EFULL naming
 * capacity and index type), growth past many splits, variable-length
 * values across size classes, update_add_f32, clear, and the no-torn-read property with writer and
 * reader threads (many keys with deletes, and one hot key rewritten nonstop). Each case takes the
 * index type and a directory (CCEH needs one).
 */
#ifndef KV_TEST_CASES_H
#define KV_TEST_CASES_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv/kv_internal.h" /* rs_kv_cpu_supports */
#include "recstore/kv.h"
#include "rs_test.h"
#include "support/engine_dir.h"

static char kvt_dir[256];

/* A fresh temp directory per engine (CCEH stores files there; DRAM indexes ignore it). */
static const char *kvt_fresh_dir(void) {
    snprintf(kvt_dir, sizeof kvt_dir, "/tmp/rs_kvtest_XXXXXX");
    if (!mkdtemp(kvt_dir)) abort();
    return kvt_dir;
}

static void kvt_rm_dir(const char *d) {
    rs_test_rm_engine_dir(d);
}

static rs_kv *kvt_open(rs_kv_index_type t, uint32_t vs, uint64_t cap, const char *dir) {
    rs_kv_config cfg = {.index_type = t, .value_size = vs, .capacity = cap, .path = dir};
    rs_kv *kv = NULL;
    rs_error err = {0};
    int rc = rs_kv_open(&cfg, &kv, &err);
    if (rc) fprintf(stderr, "rs_kv_open: %s\n", err.msg);
    RS_CHECK_EQ(rc, 0);
    return kv;
}

static void kvt_fill_row(uint8_t *row, uint32_t vs, uint64_t key, uint64_t version) {
    for (uint32_t i = 0; i < vs; i += 8) {
        uint64_t v = key * 0x9e3779b97f4a7c15ull ^ (version << 20) ^ i;
        memcpy(row + i, &v, vs - i < 8 ? vs - i : 8);
    }
}

static void kvt_basic(rs_kv_index_type t) {
    const char *dir = kvt_fresh_dir();
    rs_kv *kv = kvt_open(t, 64, 1000, dir);
    if (!kv) return;
    uint8_t row[64], got[64];
    rs_error err = {0};
    for (uint64_t k = 0; k < 500; k++) {
        kvt_fill_row(row, 64, k, 1);
        RS_CHECK_EQ(rs_kv_put(kv, k * 7919, row, 64, &err), 0);
    }
    RS_CHECK_EQ(rs_kv_count(kv), 500);
    for (uint64_t k = 0; k < 500; k++) {
        size_t len = 0;
        kvt_fill_row(row, 64, k, 1);
        RS_CHECK_EQ(rs_kv_get(kv, k * 7919, got, sizeof got, &len), 0);
        RS_CHECK_EQ(len, 64);
        RS_CHECK(memcmp(row, got, 64) == 0);
    }
    RS_CHECK_EQ(rs_kv_get(kv, 1, got, sizeof got, NULL), RS_ENOTFOUND);
    /* too-small buffer: RS_EINVAL with the needed size */
    size_t need = 0;
    RS_CHECK_EQ(rs_kv_get(kv, 0, got, 10, &need), RS_EINVAL);
    RS_CHECK_EQ(need, 64);
    /* overwrite */
    kvt_fill_row(row, 64, 7, 2);
    RS_CHECK_EQ(rs_kv_put(kv, 7 * 7919, row, 64, &err), 0);
    RS_CHECK_EQ(rs_kv_get(kv, 7 * 7919, got, sizeof got, NULL), 0);
    RS_CHECK(memcmp(row, got, 64) == 0);
    RS_CHECK_EQ(rs_kv_count(kv), 500);
    /* wrong length */
    RS_CHECK_EQ(rs_kv_put(kv, 1, row, 63, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "value_size") != NULL);
    /* delete */
    for (uint64_t k = 0; k < 500; k += 2)
        RS_CHECK_EQ(rs_kv_delete(kv, k * 7919), 0);
    RS_CHECK_EQ(rs_kv_delete(kv, 0), RS_ENOTFOUND);
    RS_CHECK_EQ(rs_kv_count(kv), 250);
    for (uint64_t k = 0; k < 500; k++) {
        int rc = rs_kv_get(kv, k * 7919, got, sizeof got, NULL);
        RS_CHECK_EQ(rc, (k % 2) ? 0 : RS_ENOTFOUND);
    }
    /* re-insert into freed slots and rows */
    for (uint64_t k = 0; k < 500; k += 2) {
        kvt_fill_row(row, 64, k, 3);
        RS_CHECK_EQ(rs_kv_put(kv, k * 7919, row, 64, &err), 0);
    }
    RS_CHECK_EQ(rs_kv_count(kv), 500);
    /* batch reads with misses */
    uint64_t keys[20];
    uint8_t out[20 * 64], found[20];
    size_t nf = 0;
    for (int i = 0; i < 20; i++)
        keys[i] = (i % 4 == 3) ? 123456789ull + (uint64_t)i : (uint64_t)i * 7919;
    RS_CHECK_EQ(rs_kv_batch_get_flat(kv, keys, 20, out, found, &nf), 0);
    RS_CHECK_EQ(nf, 15);
    for (int i = 0; i < 20; i++) {
        if (i % 4 == 3) {
            RS_CHECK_EQ(found[i], 0);
            for (int j = 0; j < 64; j++)
                RS_CHECK_EQ(out[i * 64 + j], 0);
        } else {
            RS_CHECK_EQ(found[i], 1);
            kvt_fill_row(row, 64, (uint64_t)i, (i % 2) ? 1 : 3);
            RS_CHECK(memcmp(row, out + i * 64, 64) == 0);
        }
    }
    /* key 0 and UINT64_MAX are ordinary keys */
    RS_CHECK_EQ(rs_kv_put(kv, UINT64_MAX, row, 64, &err), 0);
    RS_CHECK_EQ(rs_kv_get(kv, UINT64_MAX, got, sizeof got, NULL), 0);
    RS_CHECK_EQ(rs_kv_clear(kv), 0);
    RS_CHECK_EQ(rs_kv_count(kv), 0);
    RS_CHECK_EQ(rs_kv_get(kv, 7919, got, sizeof got, NULL), RS_ENOTFOUND);
    RS_CHECK_EQ(rs_kv_put(kv, 5, row, 64, &err), 0);
    RS_CHECK_EQ(rs_kv_get(kv, 5, got, sizeof got, NULL), 0);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

/* batch_get_flat and batch_row_refs over many segments (PET reads 512 keys per segment, EH 256,
 * a lookup for references 256), present and absent keys interleaved, for the 512-byte
 * specialisation and a size with a partial 64-byte block, in every build of the row loops the CPU
 * runs (plain, AVX2, AVX-512). */
static void kvt_batch_segments_one(rs_kv_index_type t, uint32_t vs, const char *kernel) {
    enum { N = 1300, PRESENT_EVERY = 3 };
    const char *dir = kvt_fresh_dir();
    rs_kv *kv = kvt_open(t, vs, 2 * N, dir);
    if (!kv) return;
    RS_CHECK_EQ(rs_kv_row_kernel_select(kernel, NULL), 0);
    RS_CHECK(strcmp(rs_kv_row_kernel(), kernel) == 0);
    uint8_t *row = malloc(vs), *out = malloc((size_t)N * vs), *found = malloc(N);
    uint64_t *keys = malloc(N * sizeof *keys);
    rs_error err = {0};
    for (int i = 0; i < N; i++) {
        keys[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        if (i % PRESENT_EVERY) continue;
        kvt_fill_row(row, vs, keys[i], 5);
        RS_CHECK_EQ(rs_kv_put(kv, keys[i], row, vs, &err), 0);
    }
    memset(out, 0xee, (size_t)N * vs);
    size_t nf = 0;
    RS_CHECK_EQ(rs_kv_batch_get_flat(kv, keys, N, out, found, &nf), 0);
    RS_CHECK_EQ(nf, (size_t)(N + PRESENT_EVERY - 1) / PRESENT_EVERY);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        int present = i % PRESENT_EVERY == 0;
        bad += found[i] != present;
        if (present) {
            kvt_fill_row(row, vs, keys[i], 5);
            bad += memcmp(row, out + (size_t)i * vs, vs) != 0;
        } else {
            for (uint32_t j = 0; j < vs; j++)
                bad += out[(size_t)i * vs + j] != 0;
        }
    }
    RS_CHECK_EQ(bad, 0);
    /* batches of every remainder a batch lookup's vector or chunked steps leave (PET hashes its
     * keys 4 at a time in chunks of 16), starting at an odd key so the key array is unaligned */
    static const size_t lens[] = {1, 2, 3, 5, 15, 17, 33, 63, 65, 127, 513, 1023};
    for (size_t x = 0; x < sizeof lens / sizeof lens[0]; x++) {
        const size_t from = 7, len = lens[x];
        memset(out, 0xee, len * vs);
        RS_CHECK_EQ(rs_kv_batch_get_flat(kv, keys + from, len, out, found, &nf), 0);
        size_t want_nf = 0;
        for (size_t i = 0; i < len; i++) {
            int present = (from + i) % PRESENT_EVERY == 0;
            want_nf += (size_t)present;
            bad += found[i] != present;
            if (present) {
                kvt_fill_row(row, vs, keys[from + i], 5);
                bad += memcmp(row, out + i * vs, vs) != 0;
            }
        }
        RS_CHECK_EQ(nf, want_nf);
    }
    RS_CHECK_EQ(bad, 0);
    /* row references of the same keys (rs_kv_batch_row_refs, direct_sg's lookup): segments of
     * the index's batch lookup, the present keys' rows in place, NULL for the absent */
    const void **refs = malloc(N * sizeof *refs);
    nf = 0;
    RS_CHECK_EQ(rs_kv_batch_row_refs(kv, keys, N, refs, &nf), 0);
    RS_CHECK_EQ(nf, (size_t)(N + PRESENT_EVERY - 1) / PRESENT_EVERY);
    for (int i = 0; i < N; i++) {
        if (i % PRESENT_EVERY) {
            bad += refs[i] != NULL;
            continue;
        }
        kvt_fill_row(row, vs, keys[i], 5);
        bad += !refs[i] || memcmp(row, refs[i], vs) != 0;
    }
    RS_CHECK_EQ(bad, 0);
    free(refs);
    rs_kv_row_kernel_select("auto", NULL);
    free(keys);
    free(found);
    free(out);
    free(row);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

/* The row-loop builds by name: kvt_kernels[k] is RS_KV_KERNEL_* k. */
#define KVT_KERNELS 3
static const char *const kvt_kernels[KVT_KERNELS] = {"plain", "avx2", "avx512"};

static void kvt_batch_segments(rs_kv_index_type t) {
    for (int k = 0; k < KVT_KERNELS; k++) {
        if (!rs_kv_cpu_supports(k)) continue;
        kvt_batch_segments_one(t, 512, kvt_kernels[k]);
        kvt_batch_segments_one(t, 200, kvt_kernels[k]);
    }
}

/* Fill to capacity (growth through many splits for EH/CCEH, probing past full chunks for PET),
 * check every key, then one more key is RS_EFULL naming capacity and index type. */
static void kvt_full(rs_kv_index_type t, uint64_t cap) {
    const char *dir = kvt_fresh_dir();
    rs_kv *kv = kvt_open(t, 16, cap, dir);
    if (!kv) return;
    rs_error err = {0};
    uint8_t row[16], got[16];
    for (uint64_t k = 0; k < cap; k++) {
        kvt_fill_row(row, 16, k, 0);
        int rc = rs_kv_put(kv, k << 12, row, 16, &err);
        if (rc) {
            fprintf(stderr, "put %llu: %s\n", (unsigned long long)k, err.msg);
            RS_CHECK_EQ(rc, 0);
            break;
        }
    }
    RS_CHECK_EQ(rs_kv_count(kv), cap);
    for (uint64_t k = 0; k < cap; k++) {
        kvt_fill_row(row, 16, k, 0);
        RS_CHECK_EQ(rs_kv_get(kv, k << 12, got, sizeof got, NULL), 0);
        if (memcmp(row, got, 16)) {
            RS_CHECK(!"row mismatch");
            break;
        }
    }
    memset(&err, 0, sizeof err);
    RS_CHECK_EQ(rs_kv_put(kv, 999999999999ull, row, 16, &err), RS_EFULL);
    char capstr[32];
    snprintf(capstr, sizeof capstr, "%llu", (unsigned long long)cap);
    RS_CHECK(strstr(err.msg, capstr) != NULL);
    RS_CHECK(strstr(err.msg, rs_kv_index_type_name(t)) != NULL);
    /* overwriting an existing key still works when full; a delete makes room again */
    RS_CHECK_EQ(rs_kv_put(kv, 0, row, 16, &err), 0);
    RS_CHECK_EQ(rs_kv_delete(kv, 1 << 12), 0);
    RS_CHECK_EQ(rs_kv_put(kv, 999999999999ull, row, 16, &err), 0);
    RS_CHECK_EQ(rs_kv_count(kv), cap);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

static void kvt_variable(rs_kv_index_type t) {
    const char *dir = kvt_fresh_dir();
    rs_kv *kv = kvt_open(t, 0, 1000, dir);
    if (!kv) return;
    rs_error err = {0};
    static uint8_t big[70016], got[70016];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 31 + 7);
    size_t lens[] = {0, 1, 7, 8, 100, 4096, 65536, 69999};
    for (uint64_t k = 0; k < 8; k++)
        RS_CHECK_EQ(rs_kv_put(kv, k, big + k, lens[k], &err), 0);
    for (uint64_t k = 0; k < 8; k++) {
        size_t len = 12345;
        RS_CHECK_EQ(rs_kv_get(kv, k, got, sizeof got, &len), 0);
        RS_CHECK_EQ(len, lens[k]);
        RS_CHECK(memcmp(got, big + k, lens[k]) == 0);
    }
    /* grow and shrink a value across size classes */
    RS_CHECK_EQ(rs_kv_put(kv, 2, big, 5000, &err), 0);
    size_t len = 0;
    RS_CHECK_EQ(rs_kv_get(kv, 2, got, sizeof got, &len), 0);
    RS_CHECK_EQ(len, 5000);
    RS_CHECK(memcmp(got, big, 5000) == 0);
    RS_CHECK_EQ(rs_kv_put(kv, 2, big + 3, 3, &err), 0);
    RS_CHECK_EQ(rs_kv_get(kv, 2, got, sizeof got, &len), 0);
    RS_CHECK_EQ(len, 3);
    RS_CHECK(memcmp(got, big + 3, 3) == 0);
    /* small buffer: RS_EINVAL, needed size reported */
    RS_CHECK_EQ(rs_kv_get(kv, 6, got, 10, &len), RS_EINVAL);
    RS_CHECK_EQ(len, 65536);
    /* fixed-row calls refuse variable mode */
    uint64_t key = 1;
    RS_CHECK_EQ(rs_kv_batch_get_flat(kv, &key, 1, got, NULL, NULL), RS_EINVAL);
    RS_CHECK_EQ(rs_kv_batch_put(kv, &key, 1, got, NULL, &err), RS_EINVAL);
    RS_CHECK_EQ(rs_kv_put(kv, 9, big, RS_KV_MAX_VALUE + 1, &err), RS_EINVAL);
    /* delete and reuse */
    RS_CHECK_EQ(rs_kv_delete(kv, 6), 0);
    RS_CHECK_EQ(rs_kv_get(kv, 6, got, sizeof got, &len), RS_ENOTFOUND);
    RS_CHECK_EQ(rs_kv_put(kv, 6, big, 65000, &err), 0);
    RS_CHECK_EQ(rs_kv_get(kv, 6, got, sizeof got, &len), 0);
    RS_CHECK_EQ(len, 65000);
    RS_CHECK_EQ(rs_kv_count(kv), 8);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

static void kvt_update_add(rs_kv_index_type t) {
    const char *dir = kvt_fresh_dir();
    rs_kv *kv = kvt_open(t, 16, 100, dir);
    if (!kv) return;
    rs_error err = {0};
    uint64_t keys[2] = {3, 4};
    float d[8] = {1, 2, 3, 4, 10, 20, 30, 40}, got[4];
    RS_CHECK_EQ(rs_kv_update_add_f32(kv, keys, 2, d, &err), 0); /* inserts from zero */
    RS_CHECK_EQ(rs_kv_update_add_f32(kv, keys, 2, d, &err), 0);
    RS_CHECK_EQ(rs_kv_get(kv, 4, got, sizeof got, NULL), 0);
    RS_CHECK(got[0] == 20 && got[3] == 80);
    RS_CHECK_EQ(rs_kv_count(kv), 2);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

/* ---- no torn reads: writers store rows derived from (key, version); readers check rows ---- */

#define KVT_KEYS  8
#define KVT_VS    4096
#define KVT_ITERS 4000

typedef struct kvt_thread {
    rs_kv *kv;
    int id;
    int writer;
    long torn;
    long reads;
} kvt_thread;

static int kvt_row_whole(const uint8_t *row, uint64_t key) {
    /* every 8-byte word must agree on one version */
    uint64_t w0;
    memcpy(&w0, row, 8);
    uint64_t version = ((w0 ^ key * 0x9e3779b97f4a7c15ull) >> 20);
    static __thread uint8_t want[KVT_VS];
    kvt_fill_row(want, KVT_VS, key, version);
    return memcmp(want, row, KVT_VS) == 0;
}

static void *kvt_worker(void *arg) {
    kvt_thread *t = arg;
    static __thread uint8_t row[KVT_VS], out[16 * KVT_VS], found[16];
    rs_error err = {0};
    uint64_t x = (uint64_t)t->id * 7 + 1;
    for (int it = 0; it < KVT_ITERS; it++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t key = (x >> 33) % KVT_KEYS;
        if (t->writer) {
            kvt_fill_row(row, KVT_VS, key, (uint64_t)it * 4 + (uint64_t)t->id);
            if (rs_kv_put(t->kv, key, row, KVT_VS, &err)) t->torn++;
            if (it % 64 == 0) { /* deletes and re-inserts exercise slot and row reuse */
                rs_kv_delete(t->kv, (key + 1) % KVT_KEYS);
                kvt_fill_row(row, KVT_VS, (key + 1) % KVT_KEYS, 1);
                rs_kv_put(t->kv, (key + 1) % KVT_KEYS, row, KVT_VS, &err);
            }
        } else if (it % 2) {
            if (rs_kv_get(t->kv, key, row, sizeof row, NULL) == 0) {
                t->reads++;
                if (!kvt_row_whole(row, key)) t->torn++;
            }
        } else {
            uint64_t keys[16];
            for (int i = 0; i < 16; i++)
                keys[i] = (key + (uint64_t)i * 5) % KVT_KEYS;
            rs_kv_batch_get_flat(t->kv, keys, 16, out, found, NULL);
            for (int i = 0; i < 16; i++)
                if (found[i]) {
                    t->reads++;
                    if (!kvt_row_whole(out + i * KVT_VS, keys[i])) t->torn++;
                }
        }
    }
    return NULL;
}

static void kvt_no_torn_reads(rs_kv_index_type t) {
    const char *dir = kvt_fresh_dir();
    rs_kv *kv = kvt_open(t, KVT_VS, 1000, dir);
    if (!kv) return;
    rs_error err = {0};
    uint8_t row[KVT_VS];
    for (uint64_t k = 0; k < KVT_KEYS; k++) {
        kvt_fill_row(row, KVT_VS, k, 0);
        rs_kv_put(kv, k, row, KVT_VS, &err);
    }
    enum { NT = 4 };
    pthread_t th[NT];
    kvt_thread st[NT];
    for (int i = 0; i < NT; i++) {
        st[i] = (kvt_thread){kv, i, i < 2, 0, 0};
        pthread_create(&th[i], NULL, kvt_worker, &st[i]);
    }
    long torn = 0, reads = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        torn += st[i].torn;
        reads += st[i].reads;
    }
    RS_CHECK_EQ(torn, 0);
    RS_CHECK(reads > 0);
    RS_CHECK_EQ(rs_kv_count(kv), KVT_KEYS);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

/* One writer rewrites one hot key with rows whose 8-byte words all hold the version, while this
 * thread reads it back (get and batch_get_flat alternating): every row must hold one version. */
typedef struct kvt_hot {
    rs_kv *kv;
    int stop;
} kvt_hot;

static void *kvt_hot_writer(void *arg) {
    kvt_hot *h = arg;
    static __thread uint64_t row[KVT_VS / 8];
    for (uint64_t v = 1; !__atomic_load_n(&h->stop, __ATOMIC_RELAXED); v++) {
        for (size_t i = 0; i < KVT_VS / 8; i++)
            row[i] = v;
        rs_kv_put(h->kv, 7, row, KVT_VS, NULL);
    }
    return NULL;
}

static void kvt_hot_key_no_torn_reads(rs_kv_index_type t) {
    const char *dir = kvt_fresh_dir();
    rs_kv *kv = kvt_open(t, KVT_VS, 100, dir);
    if (!kv) return;
    static uint64_t row[KVT_VS / 8];
    memset(row, 0, sizeof row);
    RS_CHECK_EQ(rs_kv_put(kv, 7, row, KVT_VS, NULL), 0);
    kvt_hot h = {kv, 0};
    pthread_t th;
    pthread_create(&th, NULL, kvt_hot_writer, &h);
    long torn = 0, reads = 0;
    uint64_t key = 7;
    for (int it = 0; it < 20000; it++) {
        int rc = (it & 1) ? rs_kv_get(kv, 7, row, KVT_VS, NULL)
                          : rs_kv_batch_get_flat(kv, &key, 1, row, NULL, NULL);
        if (rc) continue;
        reads++;
        for (size_t i = 1; i < KVT_VS / 8; i++)
            if (row[i] != row[0]) {
                torn++;
                break;
            }
    }
    __atomic_store_n(&h.stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    RS_CHECK_EQ(torn, 0);
    RS_CHECK_EQ(reads, 20000);
    rs_kv_close(kv);
    kvt_rm_dir(dir);
}

#endif

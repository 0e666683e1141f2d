/*
 * test_kv_checkpoint.c — checkpoints (kv_checkpoint.c) of all three index types: round trip over
 * many blocks (keys, rows and count back exactly, a load into another index type), damage refused
 * with the file and offset named (a byte flipped in the header, a block header, a payload and the
 * trailer; truncation at many lengths; verify and load report the same), too many rows for the
 * capacity, the wrong value size, shard id, shard count and a newer
 * format version refused by name, the atomic rename (no temporary file left, an old checkpoint
 * replaced whole), and a save taken while writer threads rewrite rows and insert new keys (EH/CCEH
 * splits during the scan): every saved row is whole, every key that existed throughout is there.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>

#include "kv_test_cases.h"
#include "recstore/crc32c.h"
#include "recstore/kv_checkpoint.h"

static const rs_kv_index_type TYPES[] = {RS_KV_INDEX_PET_HASH, RS_KV_INDEX_EXTENDIBLE_HASH,
                                         RS_KV_INDEX_CCEH};

typedef struct ckdirs {
    char eng[256], eng2[256], ck[300];
} ckdirs;

static void ck_dirs(ckdirs *d) {
    snprintf(d->eng, sizeof d->eng, "%s", kvt_fresh_dir());
    snprintf(d->eng2, sizeof d->eng2, "%s", kvt_fresh_dir());
    snprintf(d->ck, sizeof d->ck, "%s/ck", d->eng);
}

static void ck_rm(ckdirs *d) {
    char p[600];
    for (int s = 0; s < 4; s++) {
        snprintf(p, sizeof p, "%s/shard_%d.rsckpt", d->ck, s);
        unlink(p);
    }
    rmdir(d->ck);
    kvt_rm_dir(d->eng);
    kvt_rm_dir(d->eng2);
}

static rs_kv *ck_filled(rs_kv_index_type t, uint32_t vs, uint64_t n, const char *dir) {
    rs_kv *kv = kvt_open(t, vs, n + 1000, dir);
    uint8_t *row = malloc(vs);
    rs_error err = {0};
    for (uint64_t k = 0; kv && k < n; k++) {
        kvt_fill_row(row, vs, k * 7 + 1, 3);
        RS_CHECK_EQ(rs_kv_put(kv, k * 7 + 1, row, vs, &err), 0);
    }
    free(row);
    return kv;
}

static void ck_expect_rows(rs_kv *kv, uint32_t vs, uint64_t n) {
    uint8_t *row = malloc(vs), *got = malloc(vs);
    size_t len = 0;
    RS_CHECK_EQ(rs_kv_count(kv), n);
    for (uint64_t k = 0; k < n; k++) {
        kvt_fill_row(row, vs, k * 7 + 1, 3);
        RS_CHECK_EQ(rs_kv_get(kv, k * 7 + 1, got, vs, &len), 0);
        RS_CHECK(memcmp(row, got, vs) == 0);
    }
    RS_CHECK_EQ(rs_kv_get(kv, 2, got, vs, &len), RS_ENOTFOUND);
    free(row);
    free(got);
}

static void test_round_trip_all_types(void) {
    for (size_t i = 0; i < 3; i++) {
        ckdirs d;
        ck_dirs(&d);
        rs_error err = {0};
        rs_kv *kv = ck_filled(TYPES[i], 512, 10000, d.eng);
        rs_kv_ckpt_info info = {0}, li = {0};
        int rc = rs_kv_checkpoint_save(kv, d.ck, 1, 3, &info, &err);
        if (rc) fprintf(stderr, "save: %s\n", err.msg);
        RS_CHECK_EQ(rc, 0);
        RS_CHECK_EQ(info.records, 10000);
        RS_CHECK(info.blocks >= 5);
        RS_CHECK_EQ(info.index_type, TYPES[i]);
        /* into the same index type, and into the next one (a checkpoint is just rows) */
        for (int j = 0; j < 2; j++) {
            rs_kv_index_type t = TYPES[(i + j) % 3];
            rs_kv *to = kvt_open(t, 512, 20000, d.eng2);
            rc = rs_kv_checkpoint_load(d.ck, 1, 3, to, &li, &err);
            if (rc) fprintf(stderr, "load: %s\n", err.msg);
            RS_CHECK_EQ(rc, 0);
            RS_CHECK_EQ(li.records, 10000);
            RS_CHECK_EQ(li.shard_id, 1);
            RS_CHECK_EQ(li.num_shards, 3);
            RS_CHECK(strcmp(li.hash_method, "rs_mix64") == 0);
            ck_expect_rows(to, 512, 10000);
            rs_kv_close(to);
            kvt_rm_dir(d.eng2);
            mkdir(d.eng2, 0755);
        }
        /* an empty engine makes a valid, empty checkpoint */
        RS_CHECK_EQ(rs_kv_clear(kv), 0);
        RS_CHECK_EQ(rs_kv_checkpoint_save(kv, d.ck, 1, 3, &info, &err), 0);
        RS_CHECK_EQ(info.records, 0);
        rs_kv *to = kvt_open(RS_KV_INDEX_PET_HASH, 512, 10, NULL);
        RS_CHECK_EQ(rs_kv_checkpoint_load(d.ck, 1, 3, to, &li, &err), 0);
        RS_CHECK_EQ(rs_kv_count(to), 0);
        rs_kv_close(to);
        rs_kv_close(kv);
        ck_rm(&d);
    }
}

/* Save 3000 rows of 512 B (2 blocks), return the file size. */
static uint64_t ck_save_small(ckdirs *d, char *file, size_t cap) {
    rs_error err = {0};
    rs_kv *kv = ck_filled(RS_KV_INDEX_PET_HASH, 512, 3000, NULL);
    rs_kv_ckpt_info info;
    RS_CHECK_EQ(rs_kv_checkpoint_save(kv, d->ck, 0, 1, &info, &err), 0);
    rs_kv_close(kv);
    rs_kv_checkpoint_path(d->ck, 0, file, cap, &err);
    return info.file_bytes;
}

static void ck_patch(const char *file, uint64_t off, const void *bytes, size_t n) {
    int fd = open(file, O_RDWR);
    RS_CHECK(fd >= 0);
    RS_CHECK_EQ(pwrite(fd, bytes, n, (off_t)off), (long long)n);
    close(fd);
}

static void ck_flip(const char *file, uint64_t off) {
    uint8_t b;
    int fd = open(file, O_RDWR);
    RS_CHECK_EQ(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 0x40;
    RS_CHECK_EQ(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

/* Load must fail with code, naming the file and the words given; the target stays empty or
 * untouched is the shard's business (it loads into a fresh engine). */
static void ck_expect_fail(ckdirs *d, uint32_t shard, uint32_t nsh, uint32_t vs, int code,
                           const char *w1, const char *w2) {
    rs_error err = {0}, verr = {0};
    rs_kv *to = kvt_open(RS_KV_INDEX_PET_HASH, vs, 10000, NULL);
    RS_CHECK_EQ(rs_kv_checkpoint_verify(d->ck, shard, nsh, vs, 10000, NULL, &verr), code);
    int rc = rs_kv_checkpoint_load(d->ck, shard, nsh, to, NULL, &err);
    RS_CHECK(strcmp(err.msg, verr.msg) == 0);
    RS_CHECK_EQ(rc, code);
    rs_error oerr = {0}; /* the one-pass (direct I/O) load names the same damage */
    RS_CHECK_EQ(rs_kv_checkpoint_load_once(d->ck, shard, nsh, to, NULL, &oerr), code);
    RS_CHECK(strcmp(oerr.msg, verr.msg) == 0);
    RS_CHECK(strstr(err.msg, "shard_") != NULL && strstr(err.msg, ".rsckpt") != NULL);
    if (w1) RS_CHECK(strstr(err.msg, w1) != NULL);
    if (w2) RS_CHECK(strstr(err.msg, w2) != NULL);
    if (rc != code || (w1 && !strstr(err.msg, w1)) || (w2 && !strstr(err.msg, w2)))
        fprintf(stderr, "  message was: %s\n", err.msg);
    rs_kv_close(to);
}

static void test_corruption_named_with_offset(void) {
    /* offsets: header field, header crc, block 0 header, block 0 payload (key, row), block 1
     * payload, the trailer */
    const uint64_t block0 = 4096, payload0 = 4096 + 32;
    const uint32_t rpb = (1u << 20) / 520, blk = 32 + rpb * 520;
    struct {
        uint64_t off;
        const char *w1, *w2;
    } cases[] = {
        {20, "header checksum", "offset 0"},
        {4092, "header checksum", NULL},
        {block0 + 4, "block 0 at offset 4096", "block header"},
        {payload0 + 3, "block 0 at offset 4096", "checksum mismatch"},
        {payload0 + rpb * 8 + 100, "block 0 at offset 4096", "checksum mismatch"},
        {block0 + blk + 32 + 5000, "block 1 at offset", "checksum mismatch"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckdirs d;
        ck_dirs(&d);
        char file[600];
        uint64_t size = ck_save_small(&d, file, sizeof file);
        RS_CHECK(cases[i].off < size);
        ck_flip(file, cases[i].off);
        ck_expect_fail(&d, 0, 1, 512, RS_EPROTO, cases[i].w1, cases[i].w2);
        ck_rm(&d);
    }
    ckdirs d;
    ck_dirs(&d);
    char file[600];
    uint64_t size = ck_save_small(&d, file, sizeof file);
    ck_flip(file, size - 20);
    ck_expect_fail(&d, 0, 1, 512, RS_EPROTO, "trailer at offset", NULL);
    ck_rm(&d);
}

static void test_truncation_named_with_offset(void) {
    ckdirs d;
    ck_dirs(&d);
    char file[600], want[64];
    uint64_t size = ck_save_small(&d, file, sizeof file);
    uint64_t cuts[] = {0, 5, 11, 100, 4096, 4100, 4096 + 32 + 777, size / 2, size - 32, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        RS_CHECK_EQ(truncate(file, (off_t)cuts[i]), 0);
        snprintf(want, sizeof want, "offset %llu", (unsigned long long)cuts[i]);
        ck_expect_fail(&d, 0, 1, 512, RS_EPROTO, cuts[i] >= 12 ? "truncated" : NULL,
                       cuts[i] >= 12 ? want : NULL);
        ck_rm(&d);
        ck_dirs(&d);
        size = ck_save_small(&d, file, sizeof file);
    }
    ck_rm(&d);
}

static void test_refused_by_name(void) {
    ckdirs d;
    ck_dirs(&d);
    char file[600];
    ck_save_small(&d, file, sizeof file);
    ck_expect_fail(&d, 0, 1, 256, RS_EINVAL, "value_size 512", "value_size 256");
    ck_expect_fail(&d, 0, 2, 512, RS_EINVAL, "shard count", "1 shards");
    /* the header alone is readable */
    rs_error err = {0};
    rs_kv_ckpt_info hi;
    RS_CHECK_EQ(rs_kv_checkpoint_read_header(file, &hi, &err), 0);
    RS_CHECK_EQ(hi.shard_id, 0);
    RS_CHECK_EQ(hi.records, 3000);
    RS_CHECK_EQ(rs_kv_checkpoint_verify(d.ck, 0, 1, 512, 2999, NULL, &err), RS_EFULL);
    RS_CHECK(strstr(err.msg, "3000 rows do not fit a capacity of 2999") != NULL);
    /* a missing checkpoint is RS_ENOTFOUND naming the file */
    ck_expect_fail(&d, 2, 4, 512, RS_ENOTFOUND, "shard_2.rsckpt", NULL);
    /* a newer format version is named before anything else is trusted */
    uint32_t v2 = RS_KV_CKPT_FORMAT + 1;
    ck_patch(file, 8, &v2, 4);
    ck_expect_fail(&d, 0, 1, 512, RS_ENOTSUP, "format version 2 is newer", NULL);
    ck_patch(file, 0, "NOTACKPT", 8);
    ck_expect_fail(&d, 0, 1, 512, RS_EPROTO, "not a recbench checkpoint", NULL);
    ck_rm(&d);
}

static void test_shard_id_mismatch(void) {
    ckdirs d;
    ck_dirs(&d);
    rs_error err = {0};
    rs_kv *kv = ck_filled(RS_KV_INDEX_PET_HASH, 64, 100, NULL);
    RS_CHECK_EQ(rs_kv_checkpoint_save(kv, d.ck, 0, 2, NULL, &err), 0);
    rs_kv_close(kv);
    char a[600], b[600];
    rs_kv_checkpoint_path(d.ck, 0, a, sizeof a, &err);
    rs_kv_checkpoint_path(d.ck, 1, b, sizeof b, &err);
    RS_CHECK_EQ(rename(a, b), 0);
    ck_expect_fail(&d, 1, 2, 64, RS_EINVAL, "holds shard id 0", "this is shard id 1");
    ck_rm(&d);
}

static void test_replace_is_atomic(void) {
    ckdirs d;
    ck_dirs(&d);
    rs_error err = {0};
    rs_kv *kv = ck_filled(RS_KV_INDEX_EXTENDIBLE_HASH, 64, 500, NULL);
    RS_CHECK_EQ(rs_kv_checkpoint_save(kv, d.ck, 0, 1, NULL, &err), 0);
    RS_CHECK_EQ(rs_kv_delete(kv, 1), 0);
    RS_CHECK_EQ(rs_kv_checkpoint_save(kv, d.ck, 0, 1, NULL, &err), 0);
    rs_kv_close(kv);
    rs_kv *to = kvt_open(RS_KV_INDEX_PET_HASH, 64, 1000, NULL);
    RS_CHECK_EQ(rs_kv_checkpoint_load(d.ck, 0, 1, to, NULL, &err), 0);
    RS_CHECK_EQ(rs_kv_count(to), 499);
    rs_kv_close(to);
    /* only the final file is left in the directory */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", d.ck);
    RS_CHECK_EQ(system(cmd), 0);
    ck_rm(&d);
}

/* Patch a u32/u64 field and re-seal the checksum over [crc_from, crc_at) as a writer would. */
static void ck_patch_sealed(const char *file, uint64_t field, const void *v, size_t n,
                            uint64_t crc_from, uint64_t crc_at) {
    ck_patch(file, field, v, n);
    uint8_t buf[4096];
    int fd = open(file, O_RDONLY);
    RS_CHECK_EQ(pread(fd, buf, crc_at - crc_from, (off_t)crc_from), (long long)(crc_at - crc_from));
    close(fd);
    uint32_t c = rs_crc32c(0, buf, crc_at - crc_from);
    ck_patch(file, crc_at, &c, 4);
}

/* Verify reads block ranges on two threads at once: with two damaged blocks in different ranges
 * the lower one is named, as a sequential reader would; a load stops at the damaged block with
 * exactly the rows of the blocks before it; a block whose row count is not the header's (sealed
 * with a valid header checksum) and a header whose counts do not fit its size are refused. */
static void test_parallel_reads_report_lowest_damage(void) {
    const uint32_t vs = 4096, rpb = (1u << 20) / (vs + 8), blk = 32 + rpb * (vs + 8);
    const uint64_t n = 10ull * rpb - 7; /* 10 blocks, the last one short */
    for (int round = 0; round < 4; round++) {
        ckdirs d;
        ck_dirs(&d);
        rs_error err = {0};
        rs_kv *kv = ck_filled(RS_KV_INDEX_PET_HASH, vs, n, NULL);
        RS_CHECK_EQ(rs_kv_checkpoint_save(kv, d.ck, 0, 1, NULL, &err), 0);
        rs_kv_close(kv);
        char file[600];
        rs_kv_checkpoint_path(d.ck, 0, file, sizeof file, &err);
        const uint64_t b2 = 4096 + 2ull * blk, b7 = 4096 + 7ull * blk;
        if (round == 0) { /* blocks 2 and 7: block 2 is named */
            ck_flip(file, b7 + 32 + 999);
            ck_flip(file, b2 + 32 + 12345);
            ck_expect_fail(&d, 0, 1, vs, RS_EPROTO, "block 2 at offset", "checksum mismatch");
        } else if (round == 1) { /* block 7 alone: a load keeps blocks 0..6 */
            ck_flip(file, b7 + 32 + 999);
            ck_expect_fail(&d, 0, 1, vs, RS_EPROTO, "block 7 at offset", "checksum mismatch");
            for (int once = 0; once < 2; once++) {
                rs_kv *to = kvt_open(RS_KV_INDEX_PET_HASH, vs, n + 10, NULL);
                RS_CHECK_EQ(once ? rs_kv_checkpoint_load_once(d.ck, 0, 1, to, NULL, &err)
                                 : rs_kv_checkpoint_load(d.ck, 0, 1, to, NULL, &err),
                            RS_EPROTO);
                RS_CHECK_EQ(rs_kv_count(to), 7ull * rpb);
                rs_kv_close(to);
            }
        } else if (round == 2) { /* block 3 claims one row less, its header sealed */
            uint32_t short_n = rpb - 1;
            ck_patch_sealed(file, 4096 + 3ull * blk + 4, &short_n, 4, 4096 + 3ull * blk,
                            4096 + 3ull * blk + 28);
            ck_expect_fail(&d, 0, 1, vs, RS_EPROTO, "block 3 at offset", "row count");
        } else { /* a header announcing one block more, sealed */
            uint64_t blocks = 11;
            ck_patch_sealed(file, 64, &blocks, 8, 0, 4092);
            ck_expect_fail(&d, 0, 1, vs, RS_EPROTO, "inconsistent header", "11 blocks");
        }
        ck_rm(&d);
    }
}

/* ---- concurrent writers --------------------------------------------------------------------- */

#define CW_STABLE 20000u /* keys 0..CW_STABLE-1 exist throughout and are rewritten nonstop */
#define CW_VS     256u

typedef struct cw_arg {
    rs_kv *kv;
    uint32_t id;
    uint64_t base; /* new keys start here (inserts cause splits) */
    int *stop;
    uint64_t inserted;
} cw_arg;

/* Row of one write: word 0 = the key, word i = gen * C + i; whole iff every word i >= 1 has the
 * same gen. */
static void cw_row(uint32_t *r, uint64_t key, uint32_t gen) {
    r[0] = (uint32_t)key;
    for (uint32_t i = 1; i < CW_VS / 4; i++)
        r[i] = gen * 2654435761u + i;
}

static int cw_row_whole(const uint32_t *r, uint64_t key) {
    if (r[0] != (uint32_t)key) return 0;
    for (uint32_t i = 2; i < CW_VS / 4; i++)
        if (r[i] - i != r[1] - 1) return 0;
    return 1;
}

static void *cw_writer(void *p) {
    cw_arg *a = p;
    uint32_t row[CW_VS / 4];
    rs_error err = {0};
    uint64_t x = 0x243f6a8885a308d3ull ^ a->id, nk = a->base;
    uint32_t gen = 1;
    while (!__atomic_load_n(a->stop, __ATOMIC_ACQUIRE)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t k = x % CW_STABLE;
        cw_row(row, k, gen++);
        rs_kv_put(a->kv, k, row, CW_VS, &err);
        if ((gen & 3) == 0 && nk < a->base + 60000) {
            cw_row(row, nk, gen);
            if (rs_kv_put(a->kv, nk, row, CW_VS, &err) == 0) nk++;
        }
    }
    a->inserted = nk - a->base;
    return NULL;
}

static void test_concurrent_writers_no_torn_rows(void) {
    for (size_t t = 0; t < 3; t++) {
        ckdirs d;
        ck_dirs(&d);
        rs_error err = {0};
        rs_kv *kv = kvt_open(TYPES[t], CW_VS, 300000, d.eng);
        uint32_t row[CW_VS / 4];
        for (uint64_t k = 0; k < CW_STABLE; k++) {
            cw_row(row, k, 0);
            RS_CHECK_EQ(rs_kv_put(kv, k, row, CW_VS, &err), 0);
        }
        int stop = 0;
        pthread_t th[2];
        cw_arg args[2];
        for (uint32_t i = 0; i < 2; i++) {
            args[i] = (cw_arg){.kv = kv, .id = i, .base = 1000000ull * (i + 1), .stop = &stop};
            pthread_create(&th[i], NULL, cw_writer, &args[i]);
        }
        rs_kv_ckpt_info info = {0};
        int rc = 0;
        for (int rep = 0; rep < 3 && !rc; rep++)
            rc = rs_kv_checkpoint_save(kv, d.ck, 0, 1, &info, &err);
        __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        RS_CHECK_EQ(rc, 0);
        RS_CHECK(args[0].inserted + args[1].inserted > 0);
        rs_kv *to = kvt_open(RS_KV_INDEX_PET_HASH, CW_VS, 300000, NULL);
        RS_CHECK_EQ(rs_kv_checkpoint_load(d.ck, 0, 1, to, &info, &err), 0);
        RS_CHECK(info.records >= CW_STABLE);
        size_t len, torn = 0, missing = 0;
        for (uint64_t k = 0; k < CW_STABLE; k++) {
            if (rs_kv_get(to, k, row, CW_VS, &len) != 0) {
                missing++;
                continue;
            }
            torn += !cw_row_whole(row, k);
        }
        for (uint32_t i = 0; i < 2; i++)
            for (uint64_t k = args[i].base; k < args[i].base + args[i].inserted; k++)
                if (rs_kv_get(to, k, row, CW_VS, &len) == 0) torn += !cw_row_whole(row, k);
        RS_CHECK_EQ(missing, 0);
        RS_CHECK_EQ(torn, 0);
        rs_kv_close(to);
        rs_kv_close(kv);
        ck_rm(&d);
    }
}

/* The one-pass load (rs_kv_checkpoint_load_once) of every index type's checkpoint into every
 * type: rows back exactly, read with O_DIRECT where the file system takes it (the last block ends
 * short of a page); a value size whose blocks are not 8-byte multiples is read buffered. */
static void test_load_once_direct_and_buffered(void) {
    const uint32_t sizes[] = {512, 4}; /* 4 B: 12-byte rows, blocks of 1048604 bytes */
    for (size_t v = 0; v < 2; v++) {
        for (size_t i = 0; i < 3; i++) {
            uint32_t vs = sizes[v];
            ckdirs d;
            ck_dirs(&d);
            rs_error err = {0};
            rs_kv *kv = ck_filled(TYPES[i], vs, 30011, d.eng);
            RS_CHECK_EQ(rs_kv_checkpoint_save(kv, d.ck, 0, 1, NULL, &err), 0);
            rs_kv_close(kv);
            char file[600];
            rs_kv_checkpoint_path(d.ck, 0, file, sizeof file, &err);
            int dfd = open(file, O_RDONLY | O_DIRECT);
            int fs_direct = dfd >= 0;
            if (dfd >= 0) close(dfd);
            rs_kv *to = kvt_open(TYPES[(i + 1) % 3], vs, 40000, d.eng2);
            rs_kv_ckpt_info li = {0};
            int rc = rs_kv_checkpoint_load_once(d.ck, 0, 1, to, &li, &err);
            if (rc) fprintf(stderr, "load_once: %s\n", err.msg);
            RS_CHECK_EQ(rc, 0);
            RS_CHECK_EQ(li.direct_io, vs == 512 && fs_direct);
            ck_expect_rows(to, vs, 30011);
            rs_kv_close(to);
            ck_rm(&d);
        }
    }
}

RS_TEST_MAIN(RS_TEST(test_round_trip_all_types), RS_TEST(test_corruption_named_with_offset),
             RS_TEST(test_truncation_named_with_offset), RS_TEST(test_refused_by_name),
             RS_TEST(test_shard_id_mismatch), RS_TEST(test_replace_is_atomic),
             RS_TEST(test_parallel_reads_report_lowest_damage),
             RS_TEST(test_concurrent_writers_no_torn_rows),
             RS_TEST(test_load_once_direct_and_buffered))

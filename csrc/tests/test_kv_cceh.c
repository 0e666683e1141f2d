/*
 * test_kv_cceh.c — SSD_EXTENDIBLE_HASH (CCEH in files under a directory): the shared index checks
 * (kv_test_cases.h), segment splits while filling, and reopen: fixed rows and variable values
 * written before close come back after reopen, count included, and the reopened store keeps
 * accepting writes; a value_size mismatch on reopen is refused naming value_size. Durability: the
 * full consistency check (rs_kv_verify) after every sync mode and after reopen, and finding a
 * misplaced pair; a newer format version refused by name; and a process killed with SIGKILL at
 * seeded random points of a stream of inserts (segment splits, directory doubling), overwrites and
 * deletes, reopened each time: every finished operation is there, nothing else changed, the one
 * in flight is whole (old or new), verify passes.
 */
#include <signal.h>
#include <sys/wait.h>

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

/* ---- durability: verify, format version, sync modes, kill -9 ------------------------------- */

static void test_cceh_verify_and_sync_modes(void) {
    const char *modes[] = {"none", "interval:5", "always"};
    for (int m = 0; m < 3; m++) {
        const char *d = kvt_fresh_dir();
        char dir[256], rep[512];
        snprintf(dir, sizeof dir, "%s", d);
        rs_error err = {0};
        rs_kv_config cfg = {
            .index_type = RS_KV_INDEX_CCEH, .value_size = 64, .capacity = 20000, .path = dir};
        RS_CHECK_EQ(rs_kv_sync_parse(modes[m], &cfg.sync, &cfg.sync_interval_ms, &err), 0);
        rs_kv *kv = NULL;
        RS_CHECK_EQ(rs_kv_open(&cfg, &kv, &err), 0);
        if (!kv) return;
        uint8_t row[64];
        for (uint64_t k = 0; k < 6000; k++) {
            kvt_fill_row(row, 64, k, 1);
            RS_CHECK_EQ(rs_kv_put(kv, k, row, 64, &err), 0);
        }
        for (uint64_t k = 0; k < 6000; k += 3) {
            kvt_fill_row(row, 64, k, 2);
            RS_CHECK_EQ(rs_kv_put(kv, k, row, 64, &err), 0);
        }
        for (uint64_t k = 1; k < 6000; k += 7)
            RS_CHECK_EQ(rs_kv_delete(kv, k), 0);
        int rc = rs_kv_verify(kv, rep, sizeof rep, &err);
        if (rc) fprintf(stderr, "verify: %s\n", err.msg);
        RS_CHECK_EQ(rc, 0);
        RS_CHECK(strstr(rep, "ok index_type=SSD_EXTENDIBLE_HASH keys=5143") != NULL);
        RS_CHECK(strstr(rep, "global_depth=") != NULL);
        rs_kv_close(kv);
        kv = kvt_open(RS_KV_INDEX_CCEH, 64, 20000, dir);
        RS_CHECK_EQ(rs_kv_verify(kv, rep, sizeof rep, &err), 0);
        rs_kv_close(kv);
        kvt_rm_dir(dir);
    }
    rs_kv_sync_mode mode;
    uint32_t ms;
    rs_error err = {0};
    RS_CHECK_EQ(rs_kv_sync_parse("interval:0", &mode, &ms, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "interval:MS") != NULL);
    RS_CHECK_EQ(rs_kv_sync_parse("sometimes", &mode, &ms, &err), RS_EINVAL);
    /* a DRAM index has nothing to sync */
    rs_kv_config dc = {.index_type = RS_KV_INDEX_PET_HASH,
                       .value_size = 8,
                       .capacity = 10,
                       .sync = RS_KV_SYNC_ALWAYS};
    rs_kv *kv = NULL;
    RS_CHECK_EQ(rs_kv_open(&dc, &kv, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "only SSD_EXTENDIBLE_HASH") != NULL);
}

static void test_cceh_verify_finds_damage(void) {
    const char *d = kvt_fresh_dir();
    char dir[256], rep[512], file[300];
    snprintf(dir, sizeof dir, "%s", d);
    rs_error err = {0};
    rs_kv *kv = kvt_open(RS_KV_INDEX_CCEH, 64, 5000, dir);
    uint8_t row[64];
    for (uint64_t k = 0; k < 3000; k++) {
        kvt_fill_row(row, 64, k, 1);
        rs_kv_put(kv, k, row, 64, &err);
    }
    rs_kv_close(kv);
    /* a pair moved to the wrong segment: the key of the first used pair of segment 0 is changed
     * to one that hashes elsewhere (offset 16 KiB + 64: bucket 1, pair 0) */
    snprintf(file, sizeof file, "%s/cceh.index", dir);
    FILE *f = fopen(file, "r+b");
    uint64_t kw[2];
    long off = 16384 + 64;
    for (; off < 32768; off += 16) {
        fseek(f, off, SEEK_SET);
        if (fread(kw, 8, 2, f) == 2 && kw[1] != UINT64_MAX) break;
    }
    uint64_t bogus = 0;
    while ((rs_kv_hash(bogus) >> 62) == (rs_kv_hash(kw[0]) >> 62))
        bogus++;
    fseek(f, off, SEEK_SET);
    fwrite(&bogus, 8, 1, f);
    fclose(f);
    kv = kvt_open(RS_KV_INDEX_CCEH, 64, 5000, dir);
    RS_CHECK_EQ(rs_kv_verify(kv, rep, sizeof rep, &err), RS_EVERIFY);
    RS_CHECK(strstr(err.msg, "hashes outside its segment") != NULL);
    rs_kv_close(kv);
    /* a newer format version is refused by name, not misread */
    f = fopen(file, "r+b");
    uint32_t v = 99;
    fseek(f, 8, SEEK_SET);
    fwrite(&v, 4, 1, f);
    fclose(f);
    rs_kv_config cfg = {
        .index_type = RS_KV_INDEX_CCEH, .value_size = 64, .capacity = 5000, .path = dir};
    kv = NULL;
    RS_CHECK_EQ(rs_kv_open(&cfg, &kv, &err), RS_ENOTSUP);
    RS_CHECK(strstr(err.msg, "CCEH format version 99 is newer") != NULL);
    RS_CHECK(strstr(err.msg, "cceh.index") != NULL);
    kvt_rm_dir(dir);
}

/* The operation stream of the kill test: op i on key kill_key(i) writes version i, or deletes.
 * Odd ops insert fresh keys in order (splits and directory doubling), even ops rewrite or delete
 * an earlier key. */
#define KILL_VS   128u
#define KILL_KEYS 200000u
static uint64_t kill_key(uint64_t i) {
    if (i & 1) return i / 2;
    uint64_t x = i * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    return x % (i / 2 + 1);
}
static int kill_is_delete(uint64_t i) {
    return !(i & 1) && i % 10 == 4;
}

/* Child: run ops from `start`, report each finished op index on fd, until killed. */
static void kill_child(const char *dir, uint64_t start, int fd) {
    rs_kv *kv = kvt_open(RS_KV_INDEX_CCEH, KILL_VS, KILL_KEYS, dir);
    if (!kv) _exit(3);
    uint8_t row[KILL_VS];
    rs_error err = {0};
    for (uint64_t i = start; i < 2 * (uint64_t)KILL_KEYS - 2; i++) {
        uint64_t k = kill_key(i);
        if (kill_is_delete(i)) {
            rs_kv_delete(kv, k);
        } else {
            kvt_fill_row(row, KILL_VS, k, i);
            if (rs_kv_put(kv, k, row, KILL_VS, &err)) _exit(4);
        }
        if (write(fd, &i, 8) != 8) _exit(5);
    }
    _exit(0);
}

static void test_cceh_kill9_recovers(void) {
    const char *d = kvt_fresh_dir();
    char dir[256], rep[512];
    snprintf(dir, sizeof dir, "%s", d);
    int64_t *ver = malloc(KILL_KEYS * sizeof *ver); /* version of each key; -1 absent */
    for (uint64_t k = 0; k < KILL_KEYS; k++)
        ver[k] = -1;
    uint64_t next = 0, rng = 20261201;
    unsigned depth_first = 0, depth_last = 0;
    for (int round = 0; round < 8; round++) {
        int p[2];
        RS_CHECK_EQ(pipe(p), 0);
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t acks_wanted = 2000 + rng % 20000; /* the kill point */
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            kill_child(dir, next, p[1]);
        }
        close(p[1]);
        uint64_t got = 0, last = UINT64_MAX, i;
        while (got < acks_wanted && read(p[0], &i, 8) == 8) {
            last = i;
            got++;
        }
        kill(pid, SIGKILL);
        while (read(p[0], &i, 8) == 8)
            last = i;
        close(p[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        RS_CHECK(WIFSIGNALED(status));
        /* every op up to `last` finished; op last+1 may or may not have */
        uint64_t done_to = last == UINT64_MAX ? next : last + 1;
        for (uint64_t j = next; j < done_to; j++)
            ver[kill_key(j)] = kill_is_delete(j) ? -1 : (int64_t)j;
        uint64_t inflight = done_to, ik = kill_key(inflight);
        rs_kv *kv = kvt_open(RS_KV_INDEX_CCEH, KILL_VS, KILL_KEYS, dir);
        if (!kv) break;
        int rc = rs_kv_verify(kv, rep, sizeof rep, &(rs_error){0});
        RS_CHECK_EQ(rc, 0);
        unsigned gd = 0;
        const char *g = strstr(rep, "global_depth=");
        if (g) gd = (unsigned)atoi(g + 13);
        if (round == 0) depth_first = gd;
        depth_last = gd;
        uint8_t row[KILL_VS], want[KILL_VS];
        uint64_t bad = 0;
        for (uint64_t k = 0; k <= inflight / 2 + 1 && k < KILL_KEYS; k++) {
            size_t len;
            int hit = rs_kv_get(kv, k, row, sizeof row, &len) == 0;
            int64_t v = ver[k];
            if (k == ik) { /* old or new state, whole */
                int64_t nv = kill_is_delete(inflight) ? -1 : (int64_t)inflight;
                int ok_old = v < 0 ? !hit
                                   : (kvt_fill_row(want, KILL_VS, k, (uint64_t)v),
                                      hit && !memcmp(row, want, KILL_VS));
                int ok_new = nv < 0 ? !hit
                                    : (kvt_fill_row(want, KILL_VS, k, (uint64_t)nv),
                                       hit && !memcmp(row, want, KILL_VS));
                RS_CHECK(ok_old || ok_new);
                ver[k] = ok_new ? nv : v;
                continue;
            }
            if (v < 0) {
                bad += hit;
            } else {
                kvt_fill_row(want, KILL_VS, k, (uint64_t)v);
                bad += !hit || memcmp(row, want, KILL_VS) != 0;
            }
        }
        RS_CHECK_EQ(bad, 0);
        if (rc || bad)
            fprintf(stderr, "round %d: verify %d, %llu wrong keys\n", round, rc,
                    (unsigned long long)bad);
        rs_kv_close(kv);
        next = inflight + 1;
    }
    RS_CHECK(depth_last > depth_first); /* the stream doubled the directory across rounds */
    free(ver);
    kvt_rm_dir(dir);
}

RS_TEST_MAIN(RS_TEST(test_cceh_verify_and_sync_modes), RS_TEST(test_cceh_verify_finds_damage),
             RS_TEST(test_cceh_kill9_recovers), RS_TEST(test_cceh_hot_key_no_torn_reads),
             RS_TEST(test_cceh_basic), RS_TEST(test_cceh_batch_segments),
             RS_TEST(test_cceh_growth_and_full), RS_TEST(test_cceh_variable),
             RS_TEST(test_cceh_update_add), RS_TEST(test_cceh_no_torn_reads),
             RS_TEST(test_cceh_requires_path), RS_TEST(test_cceh_reopen),
             RS_TEST(test_cceh_reopen_variable))

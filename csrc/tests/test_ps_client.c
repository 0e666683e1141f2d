/* test_ps_client.c — the all-shards client and the bench loops over real brpc servers on
 * loopback: 2 shards, batches that mix shards come back in the caller's order, pipelined batches,
 * batches many times max_keys_per_request split into chunks (alone and pipelined), a shard's error
 * mid-batch failing the whole batch with the shard named, the process's budget of bytes in flight
 * (pipelined chunked batches and 4 bench threads under a budget of 3 chunks), and a short verified
 * load + run. */
#include <stdlib.h>
#include <string.h>

#include "recstore/hash.h"
#include "recstore/ps_bench.h"
#include "recstore/ps_budget.h"
#include "recstore/ps_client.h"
#include "recstore/transport.h"
#include "rs_test.h"

#if RS_HAVE_PROTOBUF_C
#define VS  16u
#define NSH 2

typedef struct cluster {
    const rs_ps_server_ops *sops;
    rs_ps_shard *shards[NSH];
    void *srv[NSH];
    const char *hosts[NSH];
    uint16_t ports[NSH];
} cluster;

/* Shard 1 holds `capacity1` keys (0 = as many as the others). */
static int cluster_start(cluster *cl, uint32_t max_keys, uint64_t capacity1) {
    rs_error err = {0};
    memset(cl, 0, sizeof *cl);
    if (rs_ps_transport_find("brpc", &cl->sops, NULL, &err)) return -1;
    for (int i = 0; i < NSH; i++) {
        rs_ps_shard_config sc = {.shard_id = (uint32_t)i,
                                 .num_shards = NSH,
                                 .kv = {.index_type = RS_KV_INDEX_PET_HASH,
                                        .value_size = VS,
                                        .capacity = i == 1 && capacity1 ? capacity1 : 20000},
                                 .max_keys_per_request = max_keys};
        if (rs_ps_shard_open(&sc, &cl->shards[i], &err)) return -1;
        rs_ps_server_opts so = {.host = "127.0.0.1", .num_threads = 1};
        if (cl->sops->start(&so, cl->shards[i], &cl->srv[i], &err)) return -1;
        cl->hosts[i] = "127.0.0.1";
        cl->ports[i] = cl->sops->bound_port(cl->srv[i]);
    }
    return 0;
}

static void cluster_stop(cluster *cl) {
    for (int i = 0; i < NSH; i++) {
        if (cl->srv[i]) cl->sops->stop(cl->srv[i]);
        rs_ps_shard_close(cl->shards[i]);
    }
}

static void test_order_across_shards(void) {
    cluster cl;
    RS_CHECK_EQ(cluster_start(&cl, 1000, 0), 0);
    rs_ps_client_config cc = {.transport = "brpc",
                              .num_shards = NSH,
                              .hosts = cl.hosts,
                              .ports = cl.ports,
                              .value_size = 0,
                              .prefetch_depth = 4};
    rs_ps_client *c = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_client_open(&cc, &c, &err), 0);
    if (!c) {
        fprintf(stderr, "%s\n", err.msg);
        return cluster_stop(&cl);
    }
    RS_CHECK_EQ(rs_ps_client_value_size(c), VS);
    /* row buffers: not for several shards, and brpc has none */
    void *bufs[1];
    size_t cap = 0;
    uint32_t nbufs = 0;
    RS_CHECK_EQ(rs_ps_client_rows_buffers(c, bufs, 1, &cap, &nbufs, &err), RS_ENOTSUP);
    RS_CHECK(strstr(err.msg, "one shard") != NULL);
    rs_ps_client_config one = cc;
    one.num_shards = 1;
    rs_ps_client *c1 = NULL;
    RS_CHECK_EQ(rs_ps_client_open(&one, &c1, &err), 0);
    if (c1) {
        RS_CHECK_EQ(rs_ps_client_rows_buffers(c1, bufs, 1, &cap, &nbufs, &err), RS_ENOTSUP);
        RS_CHECK(strstr(err.msg, "brpc has no row buffers") != NULL);
        rs_ps_client_close(c1);
    }
    enum { N = 300 };
    uint64_t keys[N];
    float rows[N * VS / 4], got[N * VS / 4];
    int per_shard[NSH] = {0};
    for (int i = 0; i < N; i++) {
        keys[i] = 1000 + (uint64_t)i * 7919;
        per_shard[rs_shard_of(keys[i], NSH)]++;
        rs_ps_bench_row(keys[i], VS, rows + i * VS / 4);
    }
    RS_CHECK(per_shard[0] > 50 && per_shard[1] > 50); /* the batch really mixes shards */
    RS_CHECK_EQ(rs_ps_client_put(c, keys, N, rows, &err), 0);
    /* reversed order, plus a missing key in the middle */
    uint64_t rkeys[N];
    for (int i = 0; i < N; i++)
        rkeys[i] = keys[N - 1 - i];
    rkeys[N / 2] = 5; /* never written */
    uint64_t found = 0;
    RS_CHECK_EQ(rs_ps_client_get(c, rkeys, N, got, &found, &err), 0);
    RS_CHECK_EQ(found, N - 1);
    for (int i = 0; i < N; i++) {
        const float *g = got + i * VS / 4;
        if (i == N / 2) {
            RS_CHECK(g[0] == 0.0f && g[VS / 4 - 1] == 0.0f);
        } else {
            RS_CHECK(memcmp(g, rows + (N - 1 - i) * VS / 4, VS) == 0);
        }
    }
    /* update on both shards */
    float deltas[N * VS / 4];
    for (int i = 0; i < N * (int)VS / 4; i++)
        deltas[i] = 1.0f;
    RS_CHECK_EQ(rs_ps_client_update(c, keys, N, deltas, &err), 0);
    RS_CHECK_EQ(rs_ps_client_get(c, keys, N, got, &found, &err), 0);
    RS_CHECK(got[0] == rows[0] + 1.0f && got[(N - 1) * VS / 4] == rows[(N - 1) * VS / 4] + 1.0f);

    /* pipelined batches complete FIFO with their tags */
    static float outs[4][N * VS / 4];
    for (uint64_t t = 0; t < 4; t++)
        RS_CHECK_EQ(rs_ps_client_submit(c, RS_PS_GET, keys + t * 10, 10, NULL, outs[t], t, &err),
                    0);
    RS_CHECK_EQ(rs_ps_client_submit(c, RS_PS_GET, keys, 10, NULL, outs[0], 9, &err), RS_EBUSY);
    for (uint64_t t = 0; t < 4; t++) {
        rs_ps_batch_result r;
        RS_CHECK_EQ(rs_ps_client_wait(c, &r, &err), 0);
        RS_CHECK_EQ(r.tag, t);
        RS_CHECK_EQ(r.num_found, 10);
        RS_CHECK(outs[t][0] == got[t * 10 * VS / 4]);
    }
    char reply[2048];
    RS_CHECK_EQ(rs_ps_client_command(c, 1, "stats", reply, sizeof reply, &err), 0);
    RS_CHECK(strstr(reply, "shard=1 num_shards=2") != NULL);
    rs_ps_client_close(c);

    /* value_size disagreement is refused with both sizes named */
    cc.value_size = 64;
    RS_CHECK_EQ(rs_ps_client_open(&cc, &c, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "16-byte") != NULL);
    cluster_stop(&cl);
}

static int check_rows(const uint64_t *keys, size_t n, const float *got, float add) {
    float want[VS / 4];
    for (size_t i = 0; i < n; i++) {
        rs_ps_bench_row(keys[i], VS, want);
        for (unsigned j = 0; j < VS / 4; j++)
            if (got[i * VS / 4 + j] != want[j] + add) return -1;
    }
    return 0;
}

static void test_chunked_batches(void) {
    cluster cl;
    RS_CHECK_EQ(cluster_start(&cl, 10, 0), 0);
    rs_ps_client_config cc = {.transport = "brpc",
                              .num_shards = NSH,
                              .hosts = cl.hosts,
                              .ports = cl.ports,
                              .prefetch_depth = 3};
    rs_ps_client *c = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_client_open(&cc, &c, &err), 0);
    if (!c) return cluster_stop(&cl);
    RS_CHECK_EQ(rs_ps_client_chunk_keys(c, RS_PS_GET), 10);
    RS_CHECK_EQ(rs_ps_client_chunk_keys(c, RS_PS_PUT), 10);
    RS_CHECK(rs_ps_client_window(c) >= 3);
    enum { N = 3000 };
    static uint64_t keys[N], rkeys[N];
    static float rows[N * VS / 4], got[N * VS / 4], ones[N * VS / 4];
    for (int i = 0; i < N; i++) {
        keys[i] = 77 + (uint64_t)i * 104729;
        rkeys[N - 1 - i] = keys[i];
        rs_ps_bench_row(keys[i], VS, rows + i * VS / 4);
    }
    for (int i = 0; i < N * (int)VS / 4; i++)
        ones[i] = 1.0f;
    /* 3000 keys = ~150 requests per shard with max_keys_per_request 10 */
    RS_CHECK_EQ(rs_ps_client_put(c, keys, N, rows, &err), 0);
    uint64_t found = 0;
    RS_CHECK_EQ(rs_ps_client_get(c, rkeys, N, got, &found, &err), 0);
    RS_CHECK_EQ(found, N);
    RS_CHECK_EQ(check_rows(rkeys, N, got, 0.0f), 0);
    RS_CHECK_EQ(rs_ps_client_update(c, keys, N, ones, &err), 0);
    /* three big batches in flight at once, each more chunks than the window: FIFO, in order */
    static float outs[3][N * VS / 4];
    const uint64_t *order[3] = {keys, rkeys, keys};
    for (uint64_t t = 0; t < 3; t++)
        RS_CHECK_EQ(rs_ps_client_submit(c, RS_PS_GET, order[t], N, NULL, outs[t], t, &err), 0);
    for (uint64_t t = 0; t < 3; t++) {
        rs_ps_batch_result r;
        RS_CHECK_EQ(rs_ps_client_wait(c, &r, &err), 0);
        RS_CHECK_EQ(r.tag, t);
        RS_CHECK_EQ(r.num_found, N);
        RS_CHECK_EQ(check_rows(order[t], N, outs[t], 1.0f), 0);
    }
    /* a chunked PUT whose input buffer is reused right after submit still stores what was given */
    static float scratch[N * VS / 4];
    memcpy(scratch, rows, sizeof scratch);
    RS_CHECK_EQ(rs_ps_client_submit(c, RS_PS_PUT, keys, N, scratch, NULL, 5, &err), 0);
    memset(scratch, 0, sizeof scratch);
    rs_ps_batch_result r;
    RS_CHECK_EQ(rs_ps_client_wait(c, &r, &err), 0);
    RS_CHECK_EQ(rs_ps_client_get(c, keys, N, got, &found, &err), 0);
    RS_CHECK_EQ(check_rows(keys, N, got, 0.0f), 0);
    rs_ps_client_close(c);
    cluster_stop(&cl);
}

/* A budget of 3 chunks: pipelined big batches over 2 shards (chunks left unsent by submit and
 * by refills, the oldest batch's next chunk held back by later batches' chunks out on the other
 * shard) come back whole and in order, and the bytes in flight never pass the budget. Then 4
 * threads sharing it (less than a chunk each), rows verified. */
static uint64_t held(const rs_ps_client *c) {
    rs_ps_client_budget_stats st;
    rs_ps_client_budget_stats_get(c, &st);
    return st.held;
}

static void test_budget(void) {
    cluster cl;
    RS_CHECK_EQ(cluster_start(&cl, 10, 0), 0);
    const uint64_t chunk = 10 * (8 + VS), budget = 3 * chunk;
    rs_ps_client_config cc = {.transport = "brpc",
                              .num_shards = NSH,
                              .hosts = cl.hosts,
                              .ports = cl.ports,
                              .prefetch_depth = 3,
                              .max_inflight_bytes = budget};
    rs_ps_client *c = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_client_open(&cc, &c, &err), 0);
    if (!c) return cluster_stop(&cl);
    enum { N = 600 };
    static uint64_t keys[N], rkeys[N];
    static float rows[N * VS / 4], outs[3][N * VS / 4];
    for (int i = 0; i < N; i++) {
        keys[i] = 5 + (uint64_t)i * 7919;
        rkeys[N - 1 - i] = keys[i];
        rs_ps_bench_row(keys[i], VS, rows + i * VS / 4);
    }
    RS_CHECK_EQ(rs_ps_client_put(c, keys, N, rows, &err), 0);
    RS_CHECK_EQ(held(c), 0);
    const uint64_t *order[3] = {keys, rkeys, keys};
    for (int round = 0; round < 2; round++) {
        for (uint64_t t = 0; t < 3; t++) {
            RS_CHECK_EQ(rs_ps_client_submit(c, RS_PS_GET, order[t], N, NULL, outs[t], t, &err), 0);
            RS_CHECK(held(c) <= budget);
        }
        for (uint64_t t = 0; t < 3; t++) {
            rs_ps_batch_result r;
            RS_CHECK_EQ(rs_ps_client_wait(c, &r, &err), 0);
            RS_CHECK(held(c) <= budget);
            RS_CHECK_EQ(r.tag, t);
            RS_CHECK_EQ(r.num_found, N);
            RS_CHECK_EQ(check_rows(order[t], N, outs[t], 0.0f), 0);
        }
    }
    rs_ps_client_budget_stats st;
    rs_ps_client_budget_stats_get(c, &st);
    RS_CHECK_EQ(st.budget, budget);
    rs_ps_client *d = NULL; /* not given one: brpc's default */
    rs_ps_client_config dc = cc;
    dc.max_inflight_bytes = 0;
    RS_CHECK_EQ(rs_ps_client_open(&dc, &d, &err), 0);
    if (d) {
        rs_ps_client_budget_stats_get(d, &st);
        RS_CHECK_EQ(st.budget, rs_ps_budget_default(RS_PS_BUDGET_BRPC_PER_CPU));
        rs_ps_client_close(d);
    }
    rs_ps_client_budget_stats_get(c, &st);
    RS_CHECK(st.deferred > 0);
    RS_CHECK_EQ(rs_ps_budget_active(), 0);
    /* closing with batches in flight leaves the active clients */
    RS_CHECK_EQ(rs_ps_client_submit(c, RS_PS_GET, keys, N, NULL, outs[0], 9, &err), 0);
    RS_CHECK(held(c) > 0);
    RS_CHECK_EQ(rs_ps_budget_active(), 1);
    rs_ps_client_close(c);
    RS_CHECK_EQ(rs_ps_budget_active(), 0);

    rs_ps_bench_config bc = {.client = cc,
                             .mode = RS_PS_BENCH_FETCH,
                             .record_count = 2000,
                             .batch_keys = 64,
                             .threads = 4,
                             .running_seconds = 0.3,
                             .verify = 1,
                             .seed = 3};
    bc.client.prefetch_depth = 4;
    bc.client.value_size = VS;
    rs_ps_bench_result res;
    RS_CHECK_EQ(rs_ps_bench_load(&bc, &res, &err), 0);
    int rc = rs_ps_bench_run(&bc, &res, &err);
    if (rc) fprintf(stderr, "run: %s\n", err.msg);
    RS_CHECK_EQ(rc, 0);
    RS_CHECK(res.batches > 0 && res.verify_checked_rows == res.key_ops);
    RS_CHECK(res.budget.deferred > 0); /* a share below one chunk: one request per thread */
    RS_CHECK_EQ(rs_ps_budget_active(), 0);
    cluster_stop(&cl);
}

static void test_server_error_names_shard(void) {
    cluster cl;
    RS_CHECK_EQ(cluster_start(&cl, 10, 64), 0); /* shard 1 fills up after 64 keys */
    rs_ps_client_config cc = {.transport = "brpc",
                              .num_shards = NSH,
                              .hosts = cl.hosts,
                              .ports = cl.ports,
                              .prefetch_depth = 1};
    rs_ps_client *c = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_client_open(&cc, &c, &err), 0);
    if (!c) return cluster_stop(&cl);
    enum { N = 2000 };
    static uint64_t keys[N];
    static float rows[N * VS / 4];
    for (int i = 0; i < N; i++)
        keys[i] = (uint64_t)i + 1;
    /* the error comes back for one chunk in the middle of shard 1's part: the call fails */
    RS_CHECK_EQ(rs_ps_client_put(c, keys, N, rows, &err), RS_ESERVER);
    RS_CHECK(strstr(err.msg, "shard 1 (brpc://127.0.0.1:") != NULL);
    RS_CHECK(strstr(err.msg, "CAPACITY") != NULL || strstr(err.msg, "capacity") != NULL);
    /* the client is still usable afterwards (every sent chunk was drained) */
    RS_CHECK_EQ(rs_ps_client_get(c, keys, 5, rows, NULL, &err), 0);
    rs_ps_client_close(c);
    /* a shard that goes away mid-session: the batch fails naming it, and so does the next one,
     * at once (the connection is marked broken, nothing waits for the dead server again) */
    RS_CHECK_EQ(rs_ps_client_open(&cc, &c, &err), 0);
    if (c) {
        cl.sops->stop(cl.srv[1]);
        cl.srv[1] = NULL;
        RS_CHECK_EQ(rs_ps_client_get(c, keys, N, rows, NULL, &err), RS_ECONN);
        RS_CHECK(strstr(err.msg, "shard 1") != NULL);
        RS_CHECK_EQ(rs_ps_client_get(c, keys, N, rows, NULL, &err), RS_ECONN);
        RS_CHECK(strstr(err.msg, "shard 1") != NULL);
        char reply[64];
        RS_CHECK_EQ(rs_ps_client_command(c, 1, "ping", reply, sizeof reply, &err), RS_ECONN);
        RS_CHECK_EQ(held(c), 0); /* failed requests gave their bytes back */
        RS_CHECK_EQ(rs_ps_client_command(c, 0, "ping", reply, sizeof reply, &err), 0);
        rs_ps_client_close(c);
    }
    /* refused connection names the server */
    RS_CHECK(rs_ps_client_open(&cc, &c, &err) == RS_ECONN);
    RS_CHECK(strstr(err.msg, "shard 1") != NULL);
    cluster_stop(&cl);
}

static void test_bench_verify(void) {
    cluster cl;
    RS_CHECK_EQ(cluster_start(&cl, 1000, 0), 0);
    rs_ps_bench_config bc = {.client = {.transport = "brpc",
                                        .num_shards = NSH,
                                        .hosts = cl.hosts,
                                        .ports = cl.ports,
                                        .value_size = VS,
                                        .prefetch_depth = 4},
                             .mode = RS_PS_BENCH_FETCH,
                             .record_count = 2000,
                             .batch_keys = 64,
                             .threads = 2,
                             .running_seconds = 0.3,
                             .verify = 1,
                             .seed = 1,
                             .fetch_key_space = 2500};
    rs_ps_bench_result res;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_bench_load(&bc, &res, &err), 0);
    RS_CHECK_EQ(res.key_ops, 2000);
    RS_CHECK_EQ(res.put_batches, 2 * ((1000 + 63) / 64));
    int rc = rs_ps_bench_run(&bc, &res, &err);
    if (rc) fprintf(stderr, "run: %s\n", err.msg);
    RS_CHECK_EQ(rc, 0);
    RS_CHECK(res.batches > 0 && res.get_batches == res.batches);
    RS_CHECK(res.verify_checked_rows == res.key_ops);
    RS_CHECK_EQ(res.keys_missing, 0);
    RS_CHECK(res.p50_us > 0 && res.p99_us >= res.p50_us);
    /* mixed mode keeps the verified rows intact */
    bc.mode = RS_PS_BENCH_MIXED;
    bc.read_ratio = 50;
    bc.zipfian = 1;
    bc.zipfian_alpha = 0.99;
    RS_CHECK_EQ(rs_ps_bench_run(&bc, &res, &err), 0);
    RS_CHECK(res.put_batches > 0 && res.get_batches > 0);
    /* insert and fetch_insert write the key's own rows: a later verified fetch still passes */
    bc.mode = RS_PS_BENCH_INSERT;
    RS_CHECK_EQ(rs_ps_bench_run(&bc, &res, &err), 0);
    RS_CHECK(res.put_batches == res.batches && res.batches > 0);
    bc.mode = RS_PS_BENCH_FETCH_INSERT;
    bc.zipfian = 0;
    RS_CHECK_EQ(rs_ps_bench_run(&bc, &res, &err), 0);
    RS_CHECK(res.put_batches > 0 && res.get_batches > 0);
    RS_CHECK(llabs((long long)res.get_batches - (long long)res.put_batches) <= 8); /* alternate */
    bc.mode = RS_PS_BENCH_FETCH;
    RS_CHECK_EQ(rs_ps_bench_run(&bc, &res, &err), 0);
    RS_CHECK_EQ(res.verify_bad_rows, 0);
    /* a wrong row is detected and named */
    uint64_t k = 17;
    float bad[VS / 4] = {1, 2, 3, 4};
    rs_ps_client *c = NULL;
    RS_CHECK_EQ(rs_ps_client_open(&bc.client, &c, &err), 0);
    if (c) {
        RS_CHECK_EQ(rs_ps_client_put(c, &k, 1, bad, &err), 0);
        rs_ps_client_close(c);
    }
    bc.mode = RS_PS_BENCH_FETCH;
    bc.zipfian = 0;
    bc.record_count = 20; /* keys 1..20: key 17 is read often */
    bc.fetch_key_space = 0;
    RS_CHECK_EQ(rs_ps_bench_run(&bc, &res, &err), RS_EVERIFY);
    RS_CHECK_EQ(res.first_bad_key, 17);
    RS_CHECK(strstr(err.msg, "key 17") != NULL);
    cluster_stop(&cl);
}

RS_TEST_MAIN(RS_TEST(test_order_across_shards), RS_TEST(test_chunked_batches), RS_TEST(test_budget),
             RS_TEST(test_server_error_names_shard), RS_TEST(test_bench_verify))
#else
static void test_skipped(void) {
    printf("brpc transport not built (no protobuf-c)\n");
}
RS_TEST_MAIN(RS_TEST(test_skipped))
#endif

/*
 * test_rc_shm.c — the RC slot protocol over the shared-memory fabric end to end: a real server and
 * clients in one process (both sides of the shm fabric work the same whether the peer is another
 * process or this one). The pieces on their own (options, descriptors, frames, the fabric) are in
 * test_rc_parts.c.
 *
 * The server answers through a test handler backed by a real rs_kv engine (so direct_sg and
 * index_only have rows to reference); rows of key k are deterministic: float j of row k = k +
 * j/1000.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/cpu.h"
#include "recstore/rc.h"
#include "rs_test.h"
#include "transport/net.h"

#define VS  128u /* value size */
#define DIM (VS / 4)

static void row_of(uint64_t k, float *row) {
    for (uint32_t j = 0; j < DIM; j++)
        row[j] = (float)k + (float)j / 1000.0f;
}

/* ---- test handler ------------------------------------------------------------------------------
 */

typedef struct thandler {
    rs_kv *kv;
    uint64_t calls;
} thandler;

/* A GET whose first key is SLOW_KEY takes SLOW_NS in the handler: a response the client surely
 * waits long enough for to fall asleep (stands for slow work, synchronises nothing). */
#define SLOW_KEY 4999u
#define SLOW_NS  50000000ull

static int th_handle(void *ctx, const rs_ps_request *req, rs_ps_response *resp, void *rows_out,
                     size_t rows_cap, unsigned slot) {
    thandler *t = ctx;
    __atomic_add_fetch(&t->calls, 1, __ATOMIC_RELAXED);
    if (req->op == RS_PS_GET && req->num_keys && rs_ps_key(req->keys, 0) == SLOW_KEY)
        rs_sleep_ns(SLOW_NS);
    memset(resp, 0, offsetof(rs_ps_response, error));
    resp->error[0] = resp->reply[0] = '\0';
    resp->value_size = VS;
    uint64_t keys[2048];
    if (req->num_keys > 2048) {
        resp->status = RS_PS_BATCH_TOO_LARGE;
        snprintf(resp->error, sizeof resp->error, "test handler takes <= 2048 keys");
        return 0;
    }
    for (uint32_t i = 0; i < req->num_keys; i++)
        keys[i] = rs_ps_key(req->keys, i);
    if (req->op == RS_PS_GET) {
        if ((size_t)req->num_keys * VS > rows_cap) {
            resp->status = RS_PS_BATCH_TOO_LARGE;
            return 0;
        }
        size_t found = 0;
        rs_kv_batch_get_flat(t->kv, keys, req->num_keys, rows_out, NULL, &found);
        resp->num_found = (uint32_t)found;
        resp->rows_len = (size_t)req->num_keys * VS;
    } else if (req->op == RS_PS_PUT) {
        if (req->rows_len != (size_t)req->num_keys * VS) {
            resp->status = RS_PS_INVALID_PAYLOAD;
            snprintf(resp->error, sizeof resp->error, "rows_len %zu", req->rows_len);
            return 0;
        }
        rs_kv_batch_put(t->kv, keys, req->num_keys, req->rows, NULL, NULL);
    } else if (req->op == RS_PS_COMMAND) {
        snprintf(resp->reply, sizeof resp->reply, "pong %.*s", (int)req->command_len, req->command);
    }
    return 0;
}

static rs_kv *open_kv(void) {
    rs_kv_config c = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = VS, .capacity = 100000};
    rs_kv *kv = NULL;
    rs_error e = {0};
    RS_CHECK(rs_kv_open(&c, &kv, &e) == 0);
    float row[DIM];
    for (uint64_t k = 1; k <= 5000; k++) {
        row_of(k, row);
        rs_kv_put(kv, k, row, VS, NULL);
    }
    return kv;
}

typedef struct fixture {
    thandler th;
    rs_rc_server *srv;
    uint16_t port;
} fixture;

static void fx_start(fixture *fx, const char *extra, uint32_t threads) {
    memset(fx, 0, sizeof *fx);
    fx->th.kv = open_kv();
    rs_rc_options o;
    rs_rc_options_default(&o);
    rs_error e = {0};
    RS_CHECK(rs_rc_options_parse(&o, extra, &e) == 0);
    rs_rc_handler h = {.ctx = &fx->th,
                       .shard_id = 0,
                       .value_size = VS,
                       .max_keys = 1000,
                       .index_type = RS_KV_INDEX_PET_HASH,
                       .kv = fx->th.kv,
                       .handle = th_handle};
    int rc = rs_rc_server_start(&rs_rc_fabric_shm, "127.0.0.1", 0, threads, &o, &h, &fx->srv, &e);
    if (rc) fprintf(stderr, "server start: %s\n", e.msg);
    RS_CHECK(rc == 0);
    fx->port = rs_rc_server_port(fx->srv);
}

static void fx_stop(fixture *fx) {
    rs_rc_server_stop(fx->srv);
    rs_kv_close(fx->th.kv);
}

static rs_rc_client *connect_client(fixture *fx, const char *extra, uint32_t depth) {
    rs_rc_options o;
    rs_rc_options_default(&o);
    rs_error e = {0};
    RS_CHECK(rs_rc_options_parse(&o, extra, &e) == 0);
    o.wait_timeout_ms = 10000;
    rs_rc_client *c = NULL;
    int rc = rs_rc_client_connect(&rs_rc_fabric_shm, "127.0.0.1", fx->port, depth, &o, &c, &e);
    if (rc) fprintf(stderr, "connect: %s\n", e.msg);
    RS_CHECK(rc == 0);
    return c;
}

static rs_ps_request get_req(const uint64_t *keys, uint32_t n) {
    rs_ps_request r = {.op = RS_PS_GET,
                       .shard = 0,
                       .value_size = VS,
                       .num_keys = n,
                       .keys = (const uint8_t *)keys};
    return r;
}

/* one request and its answer (tag checked); returns the status */
static int do_call(rs_rc_client *c, const rs_ps_request *r, void *out, size_t cap,
                   rs_ps_response *resp) {
    rs_error e = {0};
    uint64_t tag = 0;
    RS_CHECK(rs_rc_client_submit(c, r, 7, out, cap, &e) == 0);
    int rc = rs_rc_client_next(c, &tag, resp, &e);
    if (rc) fprintf(stderr, "next: %s\n", e.msg);
    RS_CHECK(rc == 0);
    RS_CHECK_EQ(tag, 7);
    return resp->status;
}

/* one GET, returns the status; rows in out */
static int do_get(rs_rc_client *c, const uint64_t *keys, uint32_t n, float *out,
                  rs_ps_response *resp) {
    rs_ps_request r = get_req(keys, n);
    return do_call(c, &r, out, (size_t)n * VS, resp);
}

/* one PUT of n rows, returns the status */
static int do_put(rs_rc_client *c, const uint64_t *keys, uint32_t n, const float *rows,
                  rs_ps_response *resp) {
    rs_ps_request r = {.op = RS_PS_PUT,
                       .value_size = VS,
                       .num_keys = n,
                       .keys = (const uint8_t *)keys,
                       .rows = (const uint8_t *)rows,
                       .rows_len = (size_t)n * VS};
    return do_call(c, &r, NULL, 0, resp);
}

static int rows_ok(const uint64_t *keys, uint32_t n, const float *rows) {
    float want[DIM];
    for (uint32_t i = 0; i < n; i++) {
        if (keys[i] >= 1 && keys[i] <= 5000)
            row_of(keys[i], want);
        else
            memset(want, 0, sizeof want);
        if (memcmp(want, rows + (size_t)i * DIM, VS) != 0) return 0;
    }
    return 1;
}

static void wait_lanes(fixture *fx, uint64_t want) {
    rs_rc_server_stats st;
    uint64_t deadline = rs_now_ns() + 5000000000ull;
    do {
        rs_rc_server_get_stats(fx->srv, &st);
        if (st.lanes_open == want) return;
        rs_sleep_ns(1000000);
    } while (rs_now_ns() < deadline);
    RS_CHECK_EQ(st.lanes_open, want);
}

/* Poll the server's stats until the uint64_t counter at `field` (offsetof) reaches at least
 * `min`, bounded by 10 s; *st holds the last stats read, for the caller's check. */
static void wait_server_counter(fixture *fx, size_t field, uint64_t min, rs_rc_server_stats *st) {
    uint64_t deadline = rs_now_ns() + 10000000000ull;
    for (;;) {
        rs_rc_server_get_stats(fx->srv, st);
        uint64_t v;
        memcpy(&v, (const char *)st + field, sizeof v);
        if (v >= min || rs_now_ns() >= deadline) return;
        rs_sleep_ns(1000000); /* polling a condition, bounded by the deadline */
    }
}

/* ---- units --------------------------------------------------------------------------------------
 */

/* ---- end to end
 * ---------------------------------------------------------------------------------- */

static void test_get_put_command(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    rs_rc_client *c =
        connect_client(&fx,
                       "qps_per_client_per_shard=2;slots_per_qp=2;request_slot_bytes=65536;"
                       "response_slot_bytes=131072",
                       4);
    uint64_t keys[500];
    for (uint32_t i = 0; i < 500; i++)
        keys[i] = (i * 7919u) % 6000 + 1; /* some above 5000: misses */
    float *rows = malloc(500 * VS);
    rs_ps_response *resp = malloc(sizeof *resp);
    RS_CHECK_EQ(do_get(c, keys, 500, rows, resp), RS_PS_OK);
    RS_CHECK(rows_ok(keys, 500, rows));
    RS_CHECK(resp->num_found < 500 && resp->num_found > 400);
    /* pipelined: 4 in flight, completions in order */
    rs_error e = {0};
    float *many = malloc(4 * 50 * VS);
    for (uint64_t t = 0; t < 4; t++) {
        rs_ps_request r = get_req(keys + t * 50, 50);
        RS_CHECK(rs_rc_client_submit(c, &r, t, many + t * 50 * DIM, 50 * VS, &e) == 0);
    }
    rs_ps_request r5 = get_req(keys, 1);
    RS_CHECK(rs_rc_client_submit(c, &r5, 9, many, VS, &e) == RS_EBUSY); /* depth 4 */
    for (uint64_t t = 0; t < 4; t++) {
        uint64_t tag;
        RS_CHECK(rs_rc_client_next(c, &tag, resp, &e) == 0);
        RS_CHECK_EQ(tag, t);
        RS_CHECK(rows_ok(keys + t * 50, 50, many + t * 50 * DIM));
    }
    /* PUT then GET sees the new rows */
    uint64_t pk[2] = {9001, 9002};
    float prow[2 * DIM];
    row_of(9001, prow);
    row_of(9002, prow + DIM);
    RS_CHECK_EQ(do_put(c, pk, 2, prow, resp), RS_PS_OK);
    float back[2 * DIM];
    RS_CHECK_EQ(do_get(c, pk, 2, back, resp), RS_PS_OK);
    RS_CHECK(memcmp(back, prow, sizeof prow) == 0);
    rs_ps_request cmd = {.op = RS_PS_COMMAND, .command = "ping", .command_len = 4};
    RS_CHECK_EQ(do_call(c, &cmd, NULL, 0, resp), RS_PS_OK);
    RS_CHECK(strcmp(resp->reply, "pong ping") == 0);
    /* too large for the request slot: refused by the client with a reason */
    static uint64_t big[9000];
    rs_ps_request rb = get_req(big, 9000);
    RS_CHECK(rs_rc_client_submit(c, &rb, 3, NULL, 0, &e) == RS_EINVAL);
    RS_CHECK(strstr(e.msg, "request_slot_bytes") != NULL);
    rs_rc_client_close(c);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
    free(rows);
    free(many);
    free(resp);
}

static void test_status_codes(void) {
    fixture fx;
    fx_start(&fx, "", 2);
    rs_rc_client *c =
        connect_client(&fx, "qps_per_client_per_shard=2;response_slot_bytes=65536", 1);
    rs_ps_response *resp = malloc(sizeof *resp);
    uint64_t keys[1001];
    for (uint32_t i = 0; i < 1001; i++)
        keys[i] = i + 1;
    float *rows = malloc(1001 * VS);
    /* wrong shard */
    rs_ps_request r = get_req(keys, 4);
    r.shard = 1;
    RS_CHECK_EQ(do_call(c, &r, rows, 4 * VS, resp), RS_PS_WRONG_SHARD);
    RS_CHECK(strstr(resp->error, "shard 1") != NULL);
    /* value size mismatch */
    r = get_req(keys, 4);
    r.value_size = 64;
    RS_CHECK_EQ(do_call(c, &r, rows, 4 * VS, resp), RS_PS_VALUE_SIZE_MISMATCH);
    /* batch too large: 1001 > max_keys 1000 */
    r = get_req(keys, 1001);
    RS_CHECK_EQ(do_call(c, &r, rows, 1001 * VS, resp), RS_PS_BATCH_TOO_LARGE);
    /* 600 rows of 128 B do not fit a 64 KiB response slot */
    r = get_req(keys, 600);
    RS_CHECK_EQ(do_call(c, &r, rows, 600 * VS, resp), RS_PS_BATCH_TOO_LARGE);
    /* and the lane keeps working */
    RS_CHECK_EQ(do_get(c, keys, 10, rows, resp), RS_PS_OK);
    RS_CHECK(rows_ok(keys, 10, rows));
    rs_rc_client_close(c);
    fx_stop(&fx);
    free(rows);
    free(resp);
}

static void test_corrupt_and_duplicate(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    rs_rc_client *bad =
        connect_client(&fx,
                       "qps_per_client_per_shard=1;slots_per_qp=2;request_slot_bytes=16384;"
                       "response_slot_bytes=16384",
                       1);
    rs_rc_client *good = connect_client(&fx,
                                        "qps_per_client_per_shard=1;request_slot_bytes=16384;"
                                        "response_slot_bytes=16384",
                                        1);
    RS_CHECK(rs_rc_client_id(bad) != rs_rc_client_id(good));
    rs_ps_response *resp = malloc(sizeof *resp);
    uint64_t keys[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float rows[8 * DIM];
    int32_t status = 0;
    char why[256];
    rs_error e = {0};
    /* garbage descriptor */
    uint8_t junk[256];
    memset(junk, 0xab, sizeof junk);
    RS_CHECK(rs_rc_client_debug_inject(bad, 0, 0, junk, sizeof junk, 5000, &status, why, sizeof why,
                                       &e) == 0);
    RS_CHECK_EQ(status, RS_PS_INVALID_PAYLOAD);
    RS_CHECK(strstr(why, "magic") != NULL);
    RS_CHECK_EQ(do_get(good, keys, 8, rows, resp), RS_PS_OK);
    RS_CHECK(rows_ok(keys, 8, rows));
    /* a well-formed descriptor that lies about its client, and one pointing the response elsewhere
     */
    rs_rc_desc d = {.magic = RS_RC_MAGIC,
                    .version = RS_RC_VERSION,
                    .op = RS_PS_GET,
                    .client_id = 12345,
                    .payload_offset = RS_RC_DESC_BYTES};
    d.seq = rs_rc_client_debug_next_seq(bad, 0);
    RS_CHECK(rs_rc_client_debug_inject(bad, 0, 1, &d, sizeof d, 5000, &status, why, sizeof why,
                                       &e) == 0);
    RS_CHECK_EQ(status, RS_PS_INVALID_PAYLOAD);
    RS_CHECK(strstr(why, "client 12345") != NULL);
    d.client_id = rs_rc_client_id(bad);
    d.client_response_addr = 0x1000;
    d.seq = rs_rc_client_debug_next_seq(bad, 0);
    RS_CHECK(rs_rc_client_debug_inject(bad, 0, 0, &d, sizeof d, 5000, &status, why, sizeof why,
                                       &e) == 0);
    RS_CHECK_EQ(status, RS_PS_INVALID_PAYLOAD);
    RS_CHECK(strstr(why, "address") != NULL);
    /* the bad client's lane still serves real requests */
    RS_CHECK_EQ(do_get(bad, keys, 8, rows, resp), RS_PS_OK);
    RS_CHECK(rows_ok(keys, 8, rows));
    rs_rc_server_stats st;
    rs_rc_server_get_stats(fx.srv, &st);
    RS_CHECK(st.invalid_descriptor >= 3);
    rs_rc_client_close(bad);
    rs_rc_client_close(good);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
    free(resp);
}

static void test_duplicate_seq(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    rs_rc_client *c = connect_client(&fx,
                                     "qps_per_client_per_shard=1;request_slot_bytes=16384;"
                                     "response_slot_bytes=16384",
                                     1);
    rs_ps_response *resp = malloc(sizeof *resp);
    uint64_t keys[4] = {1, 2, 3, 4};
    float rows[4 * DIM];
    RS_CHECK_EQ(do_get(c, keys, 4, rows, resp), RS_PS_OK); /* seq 1 */
    RS_CHECK_EQ(do_get(c, keys, 4, rows, resp), RS_PS_OK); /* seq 2 */
    uint64_t before = __atomic_load_n(&fx.th.calls, __ATOMIC_RELAXED);
    /* a replayed, stale commit (seq 1 again) in the slot: counted as a duplicate, never answered */
    rs_rc_server_stats st0, st1;
    rs_rc_server_get_stats(fx.srv, &st0);
    RS_CHECK(rs_rc_client_debug_commit(c, 0, 0, 1) == 0);
    uint64_t deadline = rs_now_ns() + 5000000000ull;
    do {
        rs_rc_server_get_stats(fx.srv, &st1);
        if (st1.duplicate_seq > st0.duplicate_seq) break;
        rs_sleep_ns(1000000);
    } while (rs_now_ns() < deadline);
    RS_CHECK_EQ(st1.duplicate_seq, st0.duplicate_seq + 1);
    RS_CHECK_EQ(__atomic_load_n(&fx.th.calls, __ATOMIC_RELAXED), before);
    RS_CHECK_EQ(do_get(c, keys, 4, rows, resp), RS_PS_OK); /* seq 3 still works */
    RS_CHECK(rows_ok(keys, 4, rows));
    rs_rc_client_close(c);
    fx_stop(&fx);
    free(resp);
}

static void test_prefetch_depth_check(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    rs_rc_options o;
    rs_rc_options_default(&o);
    o.qps = 2;
    o.slots = 3;
    rs_rc_client *c = NULL;
    rs_error e = {0};
    RS_CHECK(rs_rc_client_connect(&rs_rc_fabric_shm, "127.0.0.1", fx.port, 7, &o, &c, &e) ==
             RS_EINVAL);
    RS_CHECK(strstr(e.msg, "prefetch_depth 7") != NULL);
    RS_CHECK(strstr(e.msg, "= 6") != NULL);
    fx_stop(&fx);
}

static void test_slot_exhaustion_many_clients(void) {
    fixture fx;
    fx_start(&fx, "", 2);
    enum { NC = 4 };
    rs_rc_client *c[NC];
    for (int i = 0; i < NC; i++)
        c[i] = connect_client(&fx,
                              "qps_per_client_per_shard=2;slots_per_qp=2;request_slot_bytes=16384;"
                              "response_slot_bytes=16384",
                              4);
    wait_lanes(&fx, NC * 2);
    uint64_t keys[16];
    for (int i = 0; i < 16; i++)
        keys[i] = (uint64_t)i * 13 + 1;
    float rows[NC][4][16 * DIM];
    rs_error e = {0};
    rs_ps_response *resp = malloc(sizeof *resp);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < NC; i++)
            for (int t = 0; t < 4; t++) {
                rs_ps_request r = get_req(keys, 16);
                RS_CHECK(rs_rc_client_submit(c[i], &r, (uint64_t)t, rows[i][t], sizeof rows[i][t],
                                             &e) == 0);
            }
        for (int i = 0; i < NC; i++) {
            rs_ps_request r = get_req(keys, 16); /* every slot of every QP is taken */
            RS_CHECK(rs_rc_client_submit(c[i], &r, 99, rows[i][0], sizeof rows[i][0], &e) ==
                     RS_EBUSY);
        }
        for (int i = 0; i < NC; i++)
            for (int t = 0; t < 4; t++) {
                uint64_t tag;
                RS_CHECK(rs_rc_client_next(c[i], &tag, resp, &e) == 0);
                RS_CHECK_EQ(tag, (uint64_t)t);
                RS_CHECK_EQ(resp->status, RS_PS_OK);
                RS_CHECK(rows_ok(keys, 16, rows[i][t]));
            }
    }
    rs_rc_client_close(c[1]);
    wait_lanes(&fx, (NC - 1) * 2);
    RS_CHECK_EQ(do_get(c[0], keys, 16, rows[0][0], resp), RS_PS_OK);
    for (int i = 0; i < NC; i++)
        if (i != 1) rs_rc_client_close(c[i]);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
    free(resp);
}

static void check_mode(const char *server_extra, const char *client_extra, int expect_rows,
                       int expect_found) {
    fixture fx;
    fx_start(&fx, server_extra, 1);
    rs_rc_client *c = connect_client(&fx, client_extra, 1);
    uint64_t keys[300];
    for (uint32_t i = 0; i < 300; i++)
        keys[i] = (i * 31u) % 5000 + 1; /* all present */
    float *rows = malloc(300 * VS);
    memset(rows, 0x5a, 300 * VS);
    rs_ps_response *resp = malloc(sizeof *resp);
    RS_CHECK_EQ(do_get(c, keys, 300, rows, resp), RS_PS_OK);
    if (expect_rows == 1) RS_CHECK(rows_ok(keys, 300, rows));
    if (expect_rows == 0) RS_CHECK_EQ(resp->rows_len, 0);
    if (expect_rows == 2) { /* payload_memset: zero rows */
        RS_CHECK_EQ(resp->rows_len, 300 * VS);
        for (uint32_t i = 0; i < 300 * DIM; i++)
            if (rows[i] != 0.0f) {
                RS_CHECK(!"memset rows are zero");
                break;
            }
    }
    if (expect_found >= 0) RS_CHECK_EQ(resp->num_found, expect_found);
    /* a missing key under direct_sg falls back to the copy and still reads zeros */
    keys[5] = 999999;
    RS_CHECK_EQ(do_get(c, keys, 300, rows, resp), RS_PS_OK);
    if (expect_rows == 1) RS_CHECK(rows_ok(keys, 300, rows));
    rs_rc_server_stats st;
    rs_rc_server_get_stats(fx.srv, &st);
    if (strstr(client_extra, "direct_sg") && !server_extra[0]) {
        RS_CHECK_EQ(st.direct_sg, 1);
        RS_CHECK_EQ(st.direct_sg_fallback, 1);
    } else {
        RS_CHECK_EQ(st.direct_sg, 0);
    }
    rs_rc_client_close(c);
    fx_stop(&fx);
    free(rows);
    free(resp);
}

static void test_response_modes(void) {
    check_mode("", "qps_per_client_per_shard=1;get_response_mode=staging_copy", 1, 300);
    check_mode("", "qps_per_client_per_shard=1;get_response_mode=direct_sg", 1, 300);
    check_mode("", "qps_per_client_per_shard=1;get_response_mode=auto", 1,
               300); /* PET -> staging_copy */
    /* a server set to staging_copy copies even when the request asks for direct_sg */
    check_mode("get_response_mode=staging_copy",
               "qps_per_client_per_shard=1;get_response_mode=direct_sg", 1, 300);
}

static void test_fake_modes(void) {
    check_mode("fake_get_mode=status_only", "qps_per_client_per_shard=1", 0, 0);
    check_mode("fake_get_mode=index_only", "qps_per_client_per_shard=1", 0, 300);
    check_mode("fake_get_mode=payload_memset", "qps_per_client_per_shard=1", 2, 0);
}

static void test_skip_client_copy(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    rs_rc_client *c = connect_client(&fx, "qps_per_client_per_shard=1;skip_client_copy=1", 1);
    uint64_t keys[3] = {1, 2, 3};
    float rows[3 * DIM];
    memset(rows, 0x5a, sizeof rows);
    unsigned char before[sizeof rows];
    memcpy(before, rows, sizeof rows);
    rs_ps_response *resp = malloc(sizeof *resp);
    RS_CHECK_EQ(do_get(c, keys, 3, rows, resp), RS_PS_OK);
    RS_CHECK(memcmp(rows, before, sizeof rows) == 0);      /* untouched */
    RS_CHECK(rows_ok(keys, 3, (const float *)resp->rows)); /* the rows are in the response slot */
    rs_rc_client_close(c);
    fx_stop(&fx);
    free(resp);
}

/* client_copy: stream and plain copy every GET's rows their way; auto streams while the
 * process's GETs in flight hold at least a quarter of the LLC in row buffers, and only then */
static void test_client_copy_modes(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    uint64_t keys[64];
    for (int i = 0; i < 64; i++)
        keys[i] = (uint64_t)i + 1;
    rs_ps_response *resp = malloc(sizeof *resp);
    float rows[64 * DIM];
    rs_rc_client_stats st;
    const char *fixed[2] = {"qps_per_client_per_shard=1;client_copy=stream",
                            "qps_per_client_per_shard=1;client_copy=plain"};
    for (int m = 0; m < 2; m++) {
        rs_rc_client *c = connect_client(&fx, fixed[m], 1);
        for (int t = 0; t < 3; t++) {
            memset(rows, 0, sizeof rows);
            RS_CHECK_EQ(do_get(c, keys, 64, rows, resp), RS_PS_OK);
            RS_CHECK(rows_ok(keys, 64, rows));
        }
        rs_rc_client_get_stats(c, &st);
        RS_CHECK_EQ(st.stream_copies, m == 0 ? 3 : 0);
        rs_rc_client_close(c);
    }
    /* auto: four GETs in flight whose buffers hold a quarter of the LLC together; the first
     * collected sees all four counted and streams, the next three see three or fewer: plain */
    size_t thr = rs_copy_rows_stream_from();
    if (thr == SIZE_MAX) {
        fprintf(stderr, "  (client_copy=auto part skipped: the LLC size is unknown here)\n");
    } else {
        size_t cap = (thr + 3) / 4;
        RS_CHECK(3 * cap < thr);
        rs_rc_client *c = connect_client(&fx, "qps_per_client_per_shard=4;client_copy=auto", 4);
        uint8_t *bufs[4];
        rs_error e = {0};
        rs_ps_request r = get_req(keys, 64);
        for (int i = 0; i < 4; i++) {
            bufs[i] = calloc(1, cap);
            RS_CHECK(bufs[i] != NULL);
            RS_CHECK(rs_rc_client_submit(c, &r, (uint64_t)i, bufs[i], cap, &e) == 0);
        }
        for (int i = 0; i < 4; i++) {
            uint64_t tag;
            RS_CHECK(rs_rc_client_next(c, &tag, resp, &e) == 0);
            RS_CHECK_EQ(tag, (uint64_t)i);
            RS_CHECK(rows_ok(keys, 64, (const float *)bufs[i]));
            rs_rc_client_get_stats(c, &st);
            RS_CHECK_EQ(st.stream_copies, 1);
        }
        /* the same GETs one at a time hold a fraction of it: plain */
        RS_CHECK_EQ(do_get(c, keys, 64, rows, resp), RS_PS_OK);
        rs_rc_client_get_stats(c, &st);
        RS_CHECK_EQ(st.stream_copies, 1);
        rs_rc_client_close(c);
        for (int i = 0; i < 4; i++)
            free(bufs[i]);
    }
    fx_stop(&fx);
    free(resp);
}

/* rows_buffers: a GET into one of the caller's row buffers lands in place (no copy) and the
 * buffer keeps its rows while other requests use the other slots. */
static void test_rows_buffers(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    rs_error e = {0};
    rs_rc_options o;
    rs_rc_options_default(&o);
    RS_CHECK(rs_rc_options_parse(&o, "qps_per_client_per_shard=2;rows_buffers=2", &e) == 0);
    rs_rc_client *bad = NULL;
    RS_CHECK_EQ(rs_rc_client_connect(&rs_rc_fabric_shm, "127.0.0.1", fx.port, 1, &o, &bad, &e),
                RS_EINVAL);
    RS_CHECK(strstr(e.msg, "rows_buffers 2") != NULL);
    rs_rc_client *c = connect_client(&fx, "qps_per_client_per_shard=5;rows_buffers=2", 3);
    void *bufs[4] = {0};
    size_t cap = 0;
    RS_CHECK_EQ(rs_rc_client_rows_buffers(c, bufs, 4, &cap), 2);
    RS_CHECK(bufs[0] && bufs[1] && bufs[0] != bufs[1] && cap >= 64 * VS);
    uint64_t a[64], b[64], k2[64];
    for (int i = 0; i < 64; i++) {
        a[i] = (uint64_t)i + 1;
        b[i] = (uint64_t)i + 101;
        k2[i] = (uint64_t)i + 201;
    }
    rs_ps_response *resp = malloc(sizeof *resp);
    rs_ps_request ra = get_req(a, 64), rb = get_req(b, 64), r2 = get_req(k2, 64);
    uint64_t tag;
    /* both buffers in flight at once, then the same buffer again while busy */
    RS_CHECK(rs_rc_client_submit(c, &ra, 1, bufs[0], cap, &e) == 0);
    RS_CHECK(rs_rc_client_submit(c, &rb, 2, bufs[1], cap, &e) == 0);
    RS_CHECK_EQ(rs_rc_client_submit(c, &ra, 3, bufs[0], cap, &e), RS_EBUSY);
    RS_CHECK(strstr(e.msg, "still has a GET in flight") != NULL);
    for (uint64_t want = 1; want <= 2; want++) {
        RS_CHECK(rs_rc_client_next(c, &tag, resp, &e) == 0);
        RS_CHECK_EQ(tag, want);
        RS_CHECK_EQ(resp->status, RS_PS_OK);
        RS_CHECK(resp->rows == bufs[want - 1]); /* the rows are where the caller reads them */
    }
    RS_CHECK(rows_ok(a, 64, bufs[0]) && rows_ok(b, 64, bufs[1]));
    rs_rc_client_stats st;
    rs_rc_client_get_stats(c, &st);
    RS_CHECK_EQ(st.rows_in_place, 2);
    /* the other requests take the other slots: two GETs in flight at once and a PUT leave the
     * buffers' rows alone */
    float rows[2][64 * DIM];
    RS_CHECK(rs_rc_client_submit(c, &r2, 4, rows[0], sizeof rows[0], &e) == 0);
    RS_CHECK(rs_rc_client_submit(c, &r2, 5, rows[1], sizeof rows[1], &e) == 0);
    for (int t = 0; t < 2; t++) {
        RS_CHECK(rs_rc_client_next(c, &tag, resp, &e) == 0);
        RS_CHECK(rows_ok(k2, 64, rows[t]));
    }
    float put_rows[DIM];
    row_of(7, put_rows);
    uint64_t pk = 7;
    RS_CHECK_EQ(do_put(c, &pk, 1, put_rows, resp), RS_PS_OK);
    RS_CHECK(rows_ok(a, 64, bufs[0]) && rows_ok(b, 64, bufs[1]));
    /* rows_out inside a buffer but not at its start: an ordinary GET, copied there */
    float *mid = (float *)bufs[0] + DIM;
    RS_CHECK_EQ(do_get(c, b, 8, mid, resp), RS_PS_OK);
    RS_CHECK(rows_ok(b, 8, mid));
    rs_rc_client_get_stats(c, &st);
    RS_CHECK_EQ(st.rows_in_place, 2);
    rs_rc_client_close(c);
    fx_stop(&fx);
    free(resp);
}

static void test_workers_and_profile(void) {
    fixture fx;
    fx_start(&fx, "server_get_workers=2;profile_interval_ms=20", 1);
    rs_rc_client *c = connect_client(&fx, "qps_per_client_per_shard=4;profile_interval_ms=20", 4);
    uint64_t keys[64];
    for (int i = 0; i < 64; i++)
        keys[i] = (uint64_t)i + 1;
    float rows[4][64 * DIM];
    rs_error e = {0};
    rs_ps_response *resp = malloc(sizeof *resp);
    for (int round = 0; round < 100; round++) {
        for (int t = 0; t < 4; t++) {
            rs_ps_request r = get_req(keys, 64);
            RS_CHECK(rs_rc_client_submit(c, &r, (uint64_t)t, rows[t], sizeof rows[t], &e) == 0);
        }
        for (int t = 0; t < 4; t++) {
            uint64_t tag;
            RS_CHECK(rs_rc_client_next(c, &tag, resp, &e) == 0);
            RS_CHECK_EQ(resp->status, RS_PS_OK);
            RS_CHECK(rows_ok(keys, 64, rows[t]));
        }
    }
    rs_rc_client_close(c);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
    free(resp);
}

/* the control plane answers bad frames with a reason, closes that connection and keeps serving */
static void expect_rejected(uint16_t port, const uint8_t *frame, size_t len, const char *needle) {
    int fd = -1;
    rs_error e = {0};
    RS_CHECK(rs_net_connect("127.0.0.1", port, 5000, RS_NET_NONBLOCK, &fd, &e) == 0);
    RS_CHECK(send(fd, frame, len, MSG_NOSIGNAL) == (ssize_t)len);
    uint16_t type = 0;
    uint8_t *body = NULL;
    uint32_t blen = 0;
    int rc = rs_rc_ctrl_recv(fd, 5000, &type, &body, &blen, &e);
    RS_CHECK(rc == 0);
    if (rc == 0) {
        int is_err = type == RS_RC_MSG_ERROR && blen > 4;
        int is_rep = type == RS_RC_MSG_ATTACH_REP && blen > 4;
        RS_CHECK(is_err || is_rep);
        if (is_err || is_rep) {
            char text[300];
            snprintf(text, sizeof text, "%.*s", (int)(blen > 260 ? 256 : blen - 4),
                     (const char *)body + 4);
            if (!strstr(text, needle)) fprintf(stderr, "reason '%s' lacks '%s'\n", text, needle);
            RS_CHECK(strstr(text, needle) != NULL);
        }
    }
    free(body);
    close(fd);
}

/* A fresh client attaches, GETs two keys and reads the right rows. */
static void expect_serving(fixture *fx) {
    rs_rc_client *c = connect_client(fx, "qps_per_client_per_shard=1", 1);
    uint64_t keys[2] = {1, 2};
    float rows[2 * DIM];
    rs_ps_response *resp = malloc(sizeof *resp);
    RS_CHECK_EQ(do_get(c, keys, 2, rows, resp), RS_PS_OK);
    RS_CHECK(rows_ok(keys, 2, rows));
    rs_rc_client_close(c);
    free(resp);
}

static void test_ctrl_rejects_bad_frames(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    uint8_t h[RS_RC_CTRL_HDR];
    rs_rc_ctrl_put_header(h, RS_RC_MSG_READY_REQ, 0);
    h[0] ^= 0x55;
    expect_rejected(fx.port, h, sizeof h, "magic");
    rs_rc_ctrl_put_header(h, RS_RC_MSG_ATTACH_REQ, 1u << 30);
    expect_rejected(fx.port, h, sizeof h, "limit");
    rs_rc_ctrl_put_header(h, 99, 0);
    expect_rejected(fx.port, h, sizeof h, "type 99");
    /* a well-formed attach for another fabric */
    static rs_rc_attach_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.fabric, sizeof rq.fabric, "verbs");
    rq.qps = 1;
    rq.slots = 1;
    rq.request_slot_bytes = rq.response_slot_bytes = 8192;
    uint8_t buf[1024];
    int n = rs_rc_ctrl_encode_attach_req(&rq, buf, sizeof buf);
    RS_CHECK(n > 0);
    expect_rejected(fx.port, buf, (size_t)n, "fabric 'verbs'");
    /* bad geometry */
    snprintf(rq.fabric, sizeof rq.fabric, "shm");
    rq.slots = 5000;
    n = rs_rc_ctrl_encode_attach_req(&rq, buf, sizeof buf);
    expect_rejected(fx.port, buf, (size_t)n, "geometry");
    expect_serving(&fx);
    rs_rc_server_stats st;
    rs_rc_server_get_stats(fx.srv, &st);
    RS_CHECK(st.ctrl_rejected >= 5);
    fx_stop(&fx);
}

/* A control connection that sends part of a frame and stalls must not hold up other clients'
 * attach: the control thread takes frames in pieces. (Before, it waited up to 2 s for the rest and
 * then rejected and closed the staller before serving anyone else.) */
static void test_ctrl_partial_frame_does_not_block(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    int stall = -1;
    rs_error e = {0};
    RS_CHECK(rs_net_connect("127.0.0.1", fx.port, 5000, RS_NET_NONBLOCK, &stall, &e) == 0);
    uint8_t h[RS_RC_CTRL_HDR];
    rs_rc_ctrl_put_header(h, RS_RC_MSG_READY_REQ, 0);
    RS_CHECK(send(stall, h, RS_RC_CTRL_HDR / 2, 0) == RS_RC_CTRL_HDR / 2);
    /* a real client attaches and is served while the staller's half frame is pending */
    expect_serving(&fx);
    /* the staller was neither answered nor dropped: nothing to read, not closed */
    uint8_t b;
    errno = 0;
    RS_CHECK(recv(stall, &b, 1, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    /* and its frame still completes: the rest of the header gets the READY reply */
    RS_CHECK(send(stall, h + RS_RC_CTRL_HDR / 2, RS_RC_CTRL_HDR / 2, 0) == RS_RC_CTRL_HDR / 2);
    uint16_t type = 0;
    uint8_t *body = NULL;
    uint32_t len = 0;
    RS_CHECK_EQ(rs_rc_ctrl_recv(stall, 5000, &type, &body, &len, &e), 0);
    RS_CHECK_EQ(type, RS_RC_MSG_READY_REP);
    free(body);
    close(stall);
    fx_stop(&fx);
}

/* bind_core_offset on the client binds the thread that submits (once per thread) */
typedef struct bind_arg {
    fixture *fx;
    int core;
} bind_arg;

static void *bind_thread(void *p) {
    bind_arg *a = p;
    rs_rc_client *c = connect_client(a->fx, "qps_per_client_per_shard=1;bind_core_offset=1", 1);
    uint64_t keys[1] = {1};
    float rows[DIM];
    rs_ps_response *resp = malloc(sizeof *resp);
    RS_CHECK_EQ(do_get(c, keys, 1, rows, resp), RS_PS_OK);
    cpu_set_t set;
    CPU_ZERO(&set);
    a->core = -1;
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &set)) a->core = i;
    rs_rc_client_close(c);
    free(resp);
    return NULL;
}

static void test_client_binds_submitting_thread(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    bind_arg a = {&fx, -2};
    pthread_t th;
    RS_CHECK(pthread_create(&th, NULL, bind_thread, &a) == 0);
    pthread_join(th, NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    RS_CHECK_EQ(a.core, (int)(1 % ncpu)); /* the first bound thread of this process: offset + 0 */
    fx_stop(&fx);
}

/* ---- sleeping waiters (shm futex) ------------------------------------------------------------ */

typedef struct stress_arg {
    fixture *fx;
    const char *extra;
    pthread_barrier_t *go; /* spin slots: the threads wait together */
    int id, rounds, bad;
    rs_rc_client_stats cs;
} stress_arg;

/* Start n client threads running fn over a[] (each filled by the caller). */
static void start_clients(pthread_t *th, stress_arg *a, int n, void *(*fn)(void *)) {
    for (int i = 0; i < n; i++)
        RS_CHECK(pthread_create(&th[i], NULL, fn, &a[i]) == 0);
}

/* Join them: every one finished right; their waits' counters summed into *sum. */
static void join_clients(pthread_t *th, stress_arg *a, int n, rs_rc_client_stats *sum) {
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        RS_CHECK_EQ(a[i].bad, 0);
        sum->wait_blocks += a[i].cs.wait_blocks;
        sum->wait_sleep_timeouts += a[i].cs.wait_sleep_timeouts;
        sum->wait_unspun += a[i].cs.wait_unspun;
    }
}

/* One client thread: many short GETs (2 in flight), every row checked. */
static void *stress_thread(void *arg) {
    stress_arg *a = arg;
    char extra[256];
    snprintf(extra, sizeof extra,
             "qps_per_client_per_shard=2;request_slot_bytes=16384;response_slot_bytes=16384;%s",
             a->extra);
    rs_rc_client *c = connect_client(a->fx, extra, 2);
    rs_ps_response *resp = malloc(sizeof *resp);
    uint64_t keys[2][8];
    float rows[2][8 * DIM];
    rs_error e = {0};
    for (int r = 0; r < a->rounds && !a->bad; r++) {
        for (int t = 0; t < 2; t++) {
            for (int i = 0; i < 8; i++)
                keys[t][i] = (uint64_t)((a->id * 7919 + r * 31 + t * 17 + i * 3) % 4990 + 1);
            rs_ps_request q = get_req(keys[t], 8);
            if (rs_rc_client_submit(c, &q, (uint64_t)t, rows[t], sizeof rows[t], &e)) a->bad = 1;
        }
        for (int t = 0; t < 2 && !a->bad; t++) {
            uint64_t tag = 99;
            if (rs_rc_client_next(c, &tag, resp, &e) || tag != (uint64_t)t ||
                resp->status != RS_PS_OK || !rows_ok(keys[t], 8, rows[t])) {
                fprintf(stderr, "stress client %d round %d: %s\n", a->id, r, e.msg);
                a->bad = 1;
            }
        }
    }
    rs_rc_client_get_stats(c, &a->cs);
    rs_rc_client_close(c);
    free(resp);
    return NULL;
}

/* NT client threads (more than this machine's cores) x 400 rounds of 2 GETs in flight against
 * one poller: rows verified, and no answer is lost: every sleep ends by a wake, none runs out its
 * 1 s slice. Returns the client sleeps. */
static uint64_t stress(fixture *fx, const char *client_extra) {
    enum { NT = 8 };
    pthread_t th[NT];
    stress_arg a[NT];
    for (int i = 0; i < NT; i++)
        a[i] = (stress_arg){.fx = fx, .extra = client_extra, .id = i, .rounds = 400};
    start_clients(th, a, NT, stress_thread);
    rs_rc_client_stats sum;
    join_clients(th, a, NT, &sum);
    RS_CHECK_EQ(sum.wait_sleep_timeouts, 0);
    wait_lanes(fx, 0);
    return sum.wait_blocks;
}

/* Two slow GETs (tags 0 and 1), the first on `first`, the second on `second` (the same client or
 * another), sent once the poller has begun serving the first, so that it answers them in that
 * order; collected in that order with their rows checked. Returns how often `second`'s waits
 * slept meanwhile. */
static uint64_t slow_gets_in_turn(fixture *fx, rs_rc_client *first, rs_rc_client *second,
                                  float *rows, rs_ps_response *resp) {
    rs_rc_client *cl[2] = {first, second};
    uint64_t keys[2][8];
    rs_error e = {0};
    rs_rc_client_stats cs0, cs1;
    rs_rc_client_get_stats(second, &cs0);
    for (int t = 0; t < 2; t++) {
        keys[t][0] = SLOW_KEY;
        for (int i = 1; i < 8; i++)
            keys[t][i] = (uint64_t)(t * 8 + i);
        rs_ps_request q = get_req(keys[t], 8);
        rs_rc_server_stats st0, st1;
        rs_rc_server_get_stats(fx->srv, &st0);
        RS_CHECK(rs_rc_client_submit(cl[t], &q, (uint64_t)t, rows + (size_t)t * 8 * DIM, 8 * VS,
                                     &e) == 0);
        if (t == 0) { /* the poller has begun serving it (counted before the handler runs) */
            wait_server_counter(fx, offsetof(rs_rc_server_stats, requests), st0.requests + 1, &st1);
            RS_CHECK(st1.requests > st0.requests);
        }
    }
    for (int t = 0; t < 2; t++) {
        uint64_t tag = 99;
        RS_CHECK(rs_rc_client_next(cl[t], &tag, resp, &e) == 0);
        RS_CHECK_EQ(tag, (uint64_t)t);
        RS_CHECK_EQ(resp->status, RS_PS_OK);
        RS_CHECK(rows_ok(keys[t], 8, rows + (size_t)t * 8 * DIM));
    }
    rs_rc_client_get_stats(second, &cs1);
    RS_CHECK_EQ(cs1.wait_sleep_timeouts, cs0.wait_sleep_timeouts);
    return cs1.wait_blocks - cs0.wait_blocks;
}

/* Wakes after the client's lanes (rc_server.c): with two other clients' lanes on the poller, a
 * client asleep on the first of its two answers (two lanes, both requests slow) is woken once,
 * after the poller's pass over its lanes, and finds both there; with one other client it is woken
 * after each answer, and asleep again in between. */
static void test_wakes_after_the_clients_lanes(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    rs_rc_client *a =
        connect_client(&fx, "qps_per_client_per_shard=2;idle_spin_rounds=0;idle_yield_rounds=0", 2);
    rs_rc_client *b = connect_client(&fx, "qps_per_client_per_shard=1", 1);
    rs_rc_client *c = connect_client(&fx, "qps_per_client_per_shard=1", 1);
    rs_ps_response *resp = malloc(sizeof *resp);
    float *rows = malloc(2 * 8 * VS);
    uint64_t keys[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    /* answered: the poller's lanes hold c's, and a's and b's, which attached first */
    RS_CHECK_EQ(do_get(c, keys, 8, rows, resp), RS_PS_OK);
    rs_rc_server_stats st0, st1;
    rs_rc_server_get_stats(fx.srv, &st0);
    RS_CHECK_EQ(slow_gets_in_turn(&fx, a, a, rows, resp), 1);
    wait_server_counter(&fx, offsetof(rs_rc_server_stats, client_wake_checks_deferred),
                        st0.client_wake_checks_deferred + 2, &st1);
    RS_CHECK(st1.client_wake_checks_deferred >= st0.client_wake_checks_deferred + 2);
    RS_CHECK(st1.client_wakes > st0.client_wakes);

    rs_rc_client_close(c);
    wait_lanes(&fx, 3); /* the poller holds a's and b's lanes */
    rs_rc_server_get_stats(fx.srv, &st0);
    RS_CHECK_EQ(slow_gets_in_turn(&fx, a, a, rows, resp), 2);
    wait_server_counter(&fx, offsetof(rs_rc_server_stats, client_wakes), st0.client_wakes + 2,
                        &st1);
    RS_CHECK(st1.client_wakes >= st0.client_wakes + 2);
    RS_CHECK_EQ(st1.client_wake_checks_deferred, st0.client_wake_checks_deferred);
    rs_rc_client_close(a);
    rs_rc_client_close(b);
    free(resp);
    free(rows);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
}

/* Wakes after a group of clients' lanes (rc_server.c): with 4 clients on the poller (groups of
 * 2), a client asleep on its answer is woken only once the poller has passed over the next
 * client's lanes as well, so b's slow answer, sent while a's was served, is there when a's next()
 * returns; with 3 clients (groups of 1) a is woken after its own lanes, and b then sleeps for its
 * answer. */
static void test_wakes_after_a_group_of_clients_lanes(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    const char *sleepy = "qps_per_client_per_shard=1;idle_spin_rounds=0;idle_yield_rounds=0";
    rs_rc_client *a = connect_client(&fx, sleepy, 1);
    rs_rc_client *b = connect_client(&fx, sleepy, 1);
    rs_rc_client *c = connect_client(&fx, "qps_per_client_per_shard=1", 1);
    rs_rc_client *d = connect_client(&fx, "qps_per_client_per_shard=1", 1);
    rs_ps_response *resp = malloc(sizeof *resp);
    float *rows = malloc(2 * 8 * VS);
    uint64_t keys[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    /* answered: the poller's lanes hold d's, and those of a, b and c, which attached first */
    RS_CHECK_EQ(do_get(d, keys, 8, rows, resp), RS_PS_OK);
    rs_rc_server_stats st0, st1;
    rs_rc_server_get_stats(fx.srv, &st0);
    RS_CHECK_EQ(slow_gets_in_turn(&fx, a, b, rows, resp), 0);
    /* a slept, and the poller woke it */
    wait_server_counter(&fx, offsetof(rs_rc_server_stats, client_wakes), st0.client_wakes + 1,
                        &st1);
    RS_CHECK(st1.client_wakes > st0.client_wakes);

    rs_rc_client_close(d);
    wait_lanes(&fx, 3);
    RS_CHECK_EQ(slow_gets_in_turn(&fx, a, b, rows, resp), 1);
    rs_rc_client_close(a);
    rs_rc_client_close(b);
    rs_rc_client_close(c);
    free(resp);
    free(rows);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
}

/* Waiters that sleep at once (no spinning or yielding) on both sides: every wait and every idle
 * poller goes through the futex, the stress must still lose nothing. Two pollers and three QPs per
 * client: a client's lanes 0 and 2 share a poller and lane 0's doorbell. */
static void test_immediate_sleepers_lose_nothing(void) {
    fixture fx;
    fx_start(&fx, "idle_spin_rounds=0;idle_yield_rounds=0", 2);
    uint64_t blocks =
        stress(&fx, "idle_spin_rounds=0;idle_yield_rounds=0;qps_per_client_per_shard=3");
    rs_rc_server_stats st;
    rs_rc_server_get_stats(fx.srv, &st);
    RS_CHECK(blocks > 0);
    RS_CHECK(st.client_wakes > 0);
    RS_CHECK(st.poller_blocks > 0);
    RS_CHECK(st.poller_doorbell_wakes > 0);
    fprintf(stderr,
            "  immediate: %llu client sleeps; server %llu client wakes, %llu poller sleeps, "
            "%llu doorbell wakes\n",
            (unsigned long long)blocks, (unsigned long long)st.client_wakes,
            (unsigned long long)st.poller_blocks, (unsigned long long)st.poller_doorbell_wakes);
    fx_stop(&fx);
}

/* The default backoff under the same stress; then a client asleep in its wait is woken by the
 * response, and an idle poller's sleep is reached and ended by a request's doorbell. */
static void test_sleepers_woken_without_loss(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    uint64_t blocks = stress(&fx, "");

    /* a client asleep in its wait is woken by the response (it sleeps at once: spinning through a
     * default backoff can outlast the slow request on a slow build, e.g. under TSan) */
    rs_rc_client *c =
        connect_client(&fx, "qps_per_client_per_shard=1;idle_spin_rounds=0;idle_yield_rounds=0", 1);
    rs_ps_response *resp = malloc(sizeof *resp);
    float *rows = malloc(8 * VS);
    uint64_t keys[8] = {SLOW_KEY, 1, 2, 3, 4, 5, 6, 7};
    rs_rc_server_stats st0, st1;
    rs_rc_server_get_stats(fx.srv, &st0);
    RS_CHECK_EQ(do_get(c, keys, 8, rows, resp), RS_PS_OK);
    RS_CHECK(rows_ok(keys, 8, rows));
    rs_rc_client_stats cs;
    rs_rc_client_get_stats(c, &cs);
    RS_CHECK(cs.wait_blocks >= 1);
    RS_CHECK_EQ(cs.wait_sleep_timeouts, 0);
    /* the server counts the wake after making it: the woken client can read the stats first */
    wait_server_counter(&fx, offsetof(rs_rc_server_stats, client_wakes), st0.client_wakes + 1,
                        &st1);
    RS_CHECK(st1.client_wakes > st0.client_wakes);

    /* the idle poller blocks on the doorbells, and a request's doorbell wakes it */
    uint64_t deadline = rs_now_ns() + 10000000000ull;
    do {
        rs_rc_server_get_stats(fx.srv, &st0);
        if (st0.pollers_sleeping == 1 && st0.poller_blocks > st1.poller_blocks) break;
        rs_sleep_ns(1000000); /* polling a condition, bounded by the deadline */
    } while (rs_now_ns() < deadline);
    RS_CHECK_EQ(st0.pollers_sleeping, 1);
    RS_CHECK(st0.poller_blocks > st1.poller_blocks);
    keys[0] = 9;
    RS_CHECK_EQ(do_get(c, keys, 8, rows, resp), RS_PS_OK);
    RS_CHECK(rows_ok(keys, 8, rows));
    rs_rc_server_get_stats(fx.srv, &st1);
    RS_CHECK(st1.poller_doorbell_wakes > st0.poller_doorbell_wakes);
    rs_rc_client_get_stats(c, &cs);
    RS_CHECK(cs.doorbell_rings >= 1);
    fprintf(stderr, "  stress: %llu client sleeps; server %llu client wakes, %llu poller sleeps\n",
            (unsigned long long)blocks, (unsigned long long)st1.client_wakes,
            (unsigned long long)st1.poller_blocks);
    rs_rc_client_close(c);
    free(resp);
    free(rows);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
}

/* Adaptive spinning: a client whose waits keep ending asleep (slow requests) begins the next ones
 * with the short spin (wait_quick), every answer still right; a poller that keeps blocking while
 * idle begins its next idle stretch after work with the short spin (poller_quick_idles). */
static void test_adaptive_spin_after_sleeps(void) {
    fixture fx;
    fx_start(&fx, "", 1);
    /* no yields: on a loaded machine a yield can last longer than the slow request */
    rs_rc_client *c = connect_client(&fx, "qps_per_client_per_shard=1;idle_yield_rounds=0", 1);
    rs_ps_response *resp = malloc(sizeof *resp);
    float *rows = malloc(8 * VS);
    uint64_t keys[8] = {SLOW_KEY, 1, 2, 3, 4, 5, 6, 7};
    rs_rc_client_stats cs;
    for (unsigned i = 0; i < RS_SPIN_QUICK_AFTER + 2; i++) {
        RS_CHECK_EQ(do_get(c, keys, 8, rows, resp), RS_PS_OK);
        RS_CHECK(rows_ok(keys, 8, rows));
        rs_rc_client_get_stats(c, &cs);
        /* the waits up to the streak spin in full, the ones after it begin short */
        RS_CHECK_EQ(cs.wait_quick, i < RS_SPIN_QUICK_AFTER ? 0 : i - RS_SPIN_QUICK_AFTER + 1);
    }
    RS_CHECK(cs.wait_blocks >= RS_SPIN_QUICK_AFTER + 2);
    RS_CHECK_EQ(cs.wait_sleep_timeouts, 0);
    /* the idle poller blocks again and again (each sleep ends by its timeout, no work between):
     * after the next request its idle stretch begins short (bounded polling of a condition) */
    rs_rc_server_stats st;
    rs_rc_server_get_stats(fx.srv, &st);
    uint64_t blocks0 = st.poller_blocks;
    wait_server_counter(&fx, offsetof(rs_rc_server_stats, poller_blocks),
                        blocks0 + RS_SPIN_QUICK_AFTER + 1, &st);
    RS_CHECK(st.poller_blocks >= blocks0 + RS_SPIN_QUICK_AFTER + 1);
    keys[0] = 9;
    uint64_t quick0 = st.poller_quick_idles;
    for (int i = 0; i < 4; i++) {
        RS_CHECK_EQ(do_get(c, keys, 8, rows, resp), RS_PS_OK);
        RS_CHECK(rows_ok(keys, 8, rows));
    }
    wait_server_counter(&fx, offsetof(rs_rc_server_stats, poller_quick_idles), quick0 + 1, &st);
    RS_CHECK(st.poller_quick_idles > quick0);
    rs_rc_client_close(c);
    free(resp);
    free(rows);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
}

/* One waiter that would spin until its answer (10 s budget, no yields) for a slow GET. */
static void *slot_thread(void *arg) {
    stress_arg *a = arg;
    rs_rc_client *c =
        connect_client(a->fx,
                       "qps_per_client_per_shard=1;idle_spin_rounds=1000000000;idle_yield_rounds=0;"
                       "idle_spin_us=10000000",
                       1);
    rs_ps_response *resp = malloc(sizeof *resp);
    float *rows = malloc(8 * VS);
    uint64_t keys[8] = {SLOW_KEY, (uint64_t)a->id + 1, 2, 3, 4, 5, 6, 7};
    pthread_barrier_wait(a->go);
    a->bad = do_get(c, keys, 8, rows, resp) != RS_PS_OK || !rows_ok(keys, 8, rows);
    rs_rc_client_get_stats(c, &a->cs);
    rs_rc_client_close(c);
    free(resp);
    free(rows);
    return NULL;
}

/* Spin slots: cap + 2 waiters at once, each of which would spin until its slow answer (one poller
 * answers them in turn, 50 ms each): never more than the cap spin at once, the others find the
 * slots taken, sleep and are woken, every row right. */
static void test_spin_slots_cap_spinning_waiters(void) {
    uint32_t cap, peak;
    rs_spin_slots(&cap, &peak);
    RS_CHECK_EQ(cap, rs_cpu_count() / 2 ? rs_cpu_count() / 2 : 1);
    RS_CHECK(peak <= cap);
    fixture fx;
    fx_start(&fx, "", 1);
    int nt = (int)cap + 2;
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    stress_arg *a = calloc((size_t)nt, sizeof *a);
    pthread_barrier_t go;
    RS_CHECK(pthread_barrier_init(&go, NULL, (unsigned)nt) == 0);
    for (int i = 0; i < nt; i++)
        a[i] = (stress_arg){.fx = &fx, .go = &go, .id = i};
    start_clients(th, a, nt, slot_thread);
    rs_rc_client_stats sum;
    join_clients(th, a, nt, &sum);
    rs_spin_slots(&cap, &peak);
    RS_CHECK(peak >= 1 && peak <= cap);
    RS_CHECK(sum.wait_unspun >= 1);
    RS_CHECK_EQ(sum.wait_sleep_timeouts, 0);
    fprintf(stderr, "  spin slots: cap %u, peak %u; %d waiters, %llu found them taken\n", cap, peak,
            nt, (unsigned long long)sum.wait_unspun);
    pthread_barrier_destroy(&go);
    free(th);
    free(a);
    wait_lanes(&fx, 0);
    fx_stop(&fx);
}

/* Busy mode never sleeps: no doorbell is armed, no client sleeps. */
static void test_busy_mode_never_blocks(void) {
    fixture fx;
    fx_start(&fx, "poll_mode=busy", 1);
    rs_rc_client *c = connect_client(&fx, "qps_per_client_per_shard=1;poll_mode=busy", 1);
    rs_ps_response *resp = malloc(sizeof *resp);
    float *rows = malloc(8 * VS);
    uint64_t keys[8] = {SLOW_KEY, 1, 2, 3, 4, 5, 6, 7};
    RS_CHECK_EQ(do_get(c, keys, 8, rows, resp), RS_PS_OK);
    rs_rc_client_stats cs;
    rs_rc_client_get_stats(c, &cs);
    RS_CHECK_EQ(cs.wait_blocks, 0);
    rs_rc_server_stats st;
    rs_rc_server_get_stats(fx.srv, &st);
    RS_CHECK_EQ(st.poller_blocks, 0);
    RS_CHECK_EQ(st.client_wakes, 0);
    rs_rc_client_close(c);
    free(resp);
    free(rows);
    fx_stop(&fx);
}

static void test_no_shm_leftovers(void) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "recbench-rc-%d-", (int)getpid());
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *de;
    int left = 0;
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix))) left++;
    closedir(d);
    RS_CHECK_EQ(left, 0);
}

RS_TEST_MAIN(RS_TEST(test_get_put_command), RS_TEST(test_status_codes),
             RS_TEST(test_corrupt_and_duplicate), RS_TEST(test_duplicate_seq),
             RS_TEST(test_prefetch_depth_check), RS_TEST(test_slot_exhaustion_many_clients),
             RS_TEST(test_response_modes), RS_TEST(test_fake_modes), RS_TEST(test_skip_client_copy),
             RS_TEST(test_rows_buffers), RS_TEST(test_client_copy_modes),
             RS_TEST(test_workers_and_profile), RS_TEST(test_ctrl_rejects_bad_frames),
             RS_TEST(test_ctrl_partial_frame_does_not_block),
             RS_TEST(test_client_binds_submitting_thread),
             RS_TEST(test_sleepers_woken_without_loss), RS_TEST(test_adaptive_spin_after_sleeps),
             RS_TEST(test_immediate_sleepers_lose_nothing),
             RS_TEST(test_wakes_after_the_clients_lanes),
             RS_TEST(test_wakes_after_a_group_of_clients_lanes),
             RS_TEST(test_busy_mode_never_blocks), RS_TEST(test_spin_slots_cap_spinning_waiters),
             RS_TEST(test_no_shm_leftovers))

/* test_ps_shard.c — the shard handler without a transport: validation messages, wrong-shard keys,
 * UPDATE semantics, stats counters, and "clear" racing with writers and with another clear
 * (no deadlock, no lost structure). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/hash.h"
#include "recstore/ps.h"
#include "rs_test.h"

#define VS 16u

static rs_ps_shard *open_shard(uint32_t id, uint32_t n) {
    rs_ps_shard_config sc = {
        .shard_id = id,
        .num_shards = n,
        .kv = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = VS, .capacity = 100000},
        .max_keys_per_request = 64};
    rs_ps_shard *s = NULL;
    rs_error err = {0};
    if (rs_ps_shard_open(&sc, &s, &err)) fprintf(stderr, "open: %s\n", err.msg);
    return s;
}

static void test_open_validation(void) {
    rs_ps_shard_config sc = {
        .shard_id = 2,
        .num_shards = 2,
        .kv = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = VS, .capacity = 10},
        .max_keys_per_request = 1};
    rs_ps_shard *s = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_shard_open(&sc, &s, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "shard id 2") != NULL);
    sc.shard_id = 0;
    sc.kv.value_size = 6;
    RS_CHECK_EQ(rs_ps_shard_open(&sc, &s, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "value_size 6") != NULL);
}

static void test_validation_and_update(void) {
    rs_ps_shard *s = open_shard(1, 2);
    RS_CHECK(s != NULL);
    if (!s) return;
    /* keys of shard 1 and one of shard 0 */
    uint64_t mine[4], other = 0;
    int m = 0;
    for (uint64_t k = 1; m < 4 || !other; k++) {
        if (rs_shard_of(k, 2) == 1 && m < 4)
            mine[m++] = k;
        else if (rs_shard_of(k, 2) == 0 && !other)
            other = k;
    }
    float rows[4 * VS / 4] = {0}, out[4 * VS / 4];
    rs_ps_response resp;
    rs_ps_request put = {.op = RS_PS_PUT,
                         .shard = 1,
                         .num_keys = 4,
                         .keys = (const uint8_t *)mine,
                         .rows = (const uint8_t *)rows,
                         .rows_len = sizeof rows};
    RS_CHECK_EQ(rs_ps_shard_handle(s, &put, &resp, NULL, 0, 0), 0);
    RS_CHECK_EQ(resp.status, RS_PS_OK);
    /* wrong shard id and a key of another shard */
    rs_ps_request bad = put;
    bad.shard = 0;
    rs_ps_shard_handle(s, &bad, &resp, NULL, 0, 0);
    RS_CHECK_EQ(resp.status, RS_PS_WRONG_SHARD);
    uint64_t mixed[2] = {mine[0], other};
    rs_ps_request g = {.op = RS_PS_GET, .shard = 1, .num_keys = 2, .keys = (const uint8_t *)mixed};
    rs_ps_shard_handle(s, &g, &resp, out, sizeof out, 0);
    RS_CHECK_EQ(resp.status, RS_PS_WRONG_SHARD);
    RS_CHECK(strstr(resp.error, "index 1") != NULL);
    /* unaligned keys and deltas (views into a network buffer) */
    uint8_t buf[1 + 4 * 8 + 4 * VS];
    memcpy(buf + 1, mine, 32);
    float d[4 * VS / 4];
    for (unsigned i = 0; i < 4 * VS / 4; i++)
        d[i] = (float)i;
    memcpy(buf + 1 + 32, d, sizeof d);
    rs_ps_request up = {.op = RS_PS_UPDATE,
                        .shard = 1,
                        .num_keys = 4,
                        .keys = buf + 1,
                        .rows = buf + 1 + 32,
                        .rows_len = sizeof d};
    RS_CHECK_EQ(rs_ps_shard_handle(s, &up, &resp, NULL, 0, 3), 0);
    RS_CHECK_EQ(resp.status, RS_PS_OK);
    RS_CHECK_EQ(rs_ps_shard_handle(s, &up, &resp, NULL, 0, 3), 0);
    g.num_keys = 4;
    g.keys = (const uint8_t *)mine;
    rs_ps_shard_handle(s, &g, &resp, out, sizeof out, 0);
    RS_CHECK_EQ(resp.status, RS_PS_OK);
    RS_CHECK_EQ(resp.num_found, 4);
    RS_CHECK(out[5] == 10.0f && out[15] == 30.0f); /* two updates of d */
    /* GET carrying rows, short rows_out, unknown op */
    rs_ps_request gr = g;
    gr.rows = (const uint8_t *)rows;
    gr.rows_len = 4;
    rs_ps_shard_handle(s, &gr, &resp, out, sizeof out, 0);
    RS_CHECK_EQ(resp.status, RS_PS_INVALID_PAYLOAD);
    rs_ps_shard_handle(s, &g, &resp, out, 8, 0);
    RS_CHECK_EQ(resp.status, RS_PS_INTERNAL);
    rs_ps_request unk = {.op = (rs_ps_op)9, .shard = 1};
    rs_ps_shard_handle(s, &unk, &resp, NULL, 0, 0);
    RS_CHECK_EQ(resp.status, RS_PS_UNKNOWN_METHOD);
    /* stats counts per thread slot, summed */
    rs_ps_shard_stats st;
    rs_ps_shard_get_stats(s, &st);
    RS_CHECK_EQ(st.handled_update, 2);
    RS_CHECK_EQ(st.keys_update, 8);
    RS_CHECK_EQ(st.handled_put, 1);
    RS_CHECK(st.handled_error >= 5);
    rs_ps_shard_close(s);
}

typedef struct racer {
    rs_ps_shard *s;
    unsigned slot;
    int clears;
    int ok;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    uint64_t keys[32];
    float rows[32 * VS / 4] = {0}, out[32 * VS / 4];
    rs_ps_response resp;
    for (int it = 0; it < 300; it++) {
        if (r->clears && it % 10 == 0) {
            rs_ps_request c = {.op = RS_PS_COMMAND, .command = "clear", .command_len = 5};
            rs_ps_shard_handle(r->s, &c, &resp, NULL, 0, r->slot);
            if (resp.status != RS_PS_OK) r->ok = 0;
            continue;
        }
        for (int i = 0; i < 32; i++)
            keys[i] = (uint64_t)(r->slot * 1000 + it * 32 + i);
        rs_ps_request p = {.op = RS_PS_PUT,
                           .num_keys = 32,
                           .keys = (const uint8_t *)keys,
                           .rows = (const uint8_t *)rows,
                           .rows_len = sizeof rows};
        rs_ps_shard_handle(r->s, &p, &resp, NULL, 0, r->slot);
        if (resp.status != RS_PS_OK) r->ok = 0;
        rs_ps_request g = {.op = RS_PS_GET, .num_keys = 32, .keys = (const uint8_t *)keys};
        rs_ps_shard_handle(r->s, &g, &resp, out, sizeof out, r->slot);
        if (resp.status != RS_PS_OK) r->ok = 0;
    }
    return NULL;
}

static void test_clear_races_writers_and_clears(void) {
    rs_ps_shard *s = open_shard(0, 1);
    RS_CHECK(s != NULL);
    if (!s) return;
    enum { N = 4 };
    pthread_t th[N];
    racer r[N];
    for (int i = 0; i < N; i++) {
        r[i] = (racer){.s = s, .slot = (unsigned)i, .clears = i < 2, .ok = 1};
        pthread_create(&th[i], NULL, race, &r[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        RS_CHECK(r[i].ok);
    }
    rs_ps_response resp;
    rs_ps_request c = {.op = RS_PS_COMMAND, .command = "clear", .command_len = 5};
    rs_ps_shard_handle(s, &c, &resp, NULL, 0, 0);
    RS_CHECK_EQ(resp.status, RS_PS_OK);
    rs_ps_request st = {.op = RS_PS_COMMAND, .command = "stats", .command_len = 5};
    rs_ps_shard_handle(s, &st, &resp, NULL, 0, 0);
    RS_CHECK(strstr(resp.reply, " keys=0 ") != NULL);
    rs_ps_shard_close(s);
}

/* A reply's numbers by key: whole keys only, 0 when absent. */
static void test_reply_numbers(void) {
    const char *r = "max_server_threads=9 server_threads=4 max_keys_per_request=500 x=";
    RS_CHECK_EQ(rs_ps_reply_u64(r, "server_threads"), 4);
    RS_CHECK_EQ(rs_ps_reply_u64(r, "max_server_threads"), 9);
    RS_CHECK_EQ(rs_ps_reply_u64(r, "max_keys_per_request"), 500);
    RS_CHECK_EQ(rs_ps_reply_u64(r, "threads"), 0);
    RS_CHECK_EQ(rs_ps_reply_u64(r, "keys"), 0);
    RS_CHECK_EQ(rs_ps_reply_u64(r, "x"), 0);
    RS_CHECK_EQ(rs_ps_reply_u64("", "x"), 0);
    rs_ps_shard *s = open_shard(0, 1);
    RS_CHECK(s != NULL);
    if (!s) return;
    rs_ps_response resp;
    rs_ps_request st = {.op = RS_PS_COMMAND, .command = "stats", .command_len = 5};
    rs_ps_shard_handle(s, &st, &resp, NULL, 0, 0);
    RS_CHECK_EQ(rs_ps_reply_u64(resp.reply, "max_keys_per_request"), rs_ps_shard_max_keys(s));
    RS_CHECK_EQ(rs_ps_reply_u64(resp.reply, "num_shards"), 1);
    rs_ps_shard_close(s);
}

RS_TEST_MAIN(RS_TEST(test_open_validation), RS_TEST(test_validation_and_update),
             RS_TEST(test_clear_races_writers_and_clears), RS_TEST(test_reply_numbers))

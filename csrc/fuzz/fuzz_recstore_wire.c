/*
 * fuzz_recstore_wire.c — libFuzzer target for RecStore's wire as recbench's servers and clients
 * read it: one ParameterService call on a real shard (rs_rsmsg_call: the request codec, row-block
 * validation, the service semantics, the reply writer), and the client's reply decoder
 * (rs_rsmsg_client_decode) on the same bytes, and the client's block reader (rs_rsblock_read_rows)
 * against the validator: each accepts exactly what the other accepts.
 *
 * Input layout: byte 0 picks the method (mod 5) and whether the bytes after the message are the
 * baidu_std attachment (bit 3); bytes 1-2 (u16) the attachment length, taken from the end of the
 * input; the message is what lies between. Each gets its own exact-size heap block.
 *
 * Checked beyond "no crash": a reply's head fits its buffer, a payload never exceeds what was
 * allocated for it, and a GET payload that the service reports OK is a valid row block.
 */
#include <stdio.h>

#include "fuzz/fuzz_input.h"
#include "recstore/recstore_msg.h"

#define VS 16

static rs_rsps *svc;
static uint8_t *buf;
static size_t buf_cap;

static uint8_t *alloc_fn(void *ctx, size_t cap) {
    (void)ctx;
    free(buf);
    buf = malloc(cap ? cap : 1);
    buf_cap = cap;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!svc) {
        rs_ps_shard_config cfg = {.shard_id = 0, .num_shards = 1, .max_keys_per_request = 500};
        cfg.kv.index_type = RS_KV_INDEX_PET_HASH;
        cfg.kv.value_size = VS;
        cfg.kv.capacity = 4096;
        rs_ps_shard *shard = NULL;
        rs_error e = {0};
        if (rs_ps_shard_open(&cfg, &shard, &e) || rs_rsps_create(shard, NULL, &svc, &e)) {
            fprintf(stderr, "setup: %s\n", e.msg);
            abort();
        }
    }
    fuzz_input in = {data, size};
    uint8_t sel = fuzz_u8(&in);
    size_t att_want = fuzz_u16(&in), att_len = att_want < in.left ? att_want : in.left;
    size_t msg_len = in.left - att_len;
    uint8_t *msg = fuzz_dup(in.p, msg_len);
    uint8_t *att = (sel & 8) ? fuzz_dup(in.p + msg_len, att_len) : NULL;
    if (!(sel & 8)) att_len = 0;
    rs_rsmsg_method m = (rs_rsmsg_method)(sel % RS_RSMSG_NUM_METHODS);

    rs_rsmsg_alloc alloc = {alloc_fn, NULL};
    rs_rsmsg_reply r;
    buf_cap = 0;
    rs_rsmsg_call(svc, m, msg, msg_len, att, att_len, m == RS_RSMSG_GET, 0, &alloc, &r);
    FUZZ_CHECK(r.head_len <= sizeof r.head);
    FUZZ_CHECK(r.payload_len <= buf_cap);
    if (r.res.code == RS_RSPS_OK && m == RS_RSMSG_GET) {
        uint32_t n = 0;
        FUZZ_CHECK(rs_rsblock_validate(buf, r.payload_len, &n, NULL) == 0);
        fuzz_touch(buf, r.payload_len);
    }

    /* the client's decoder on the same bytes, as a reply to a GET of up to 8 keys */
    float rows[8 * (VS / 4)];
    rs_ps_response resp;
    size_t keys = (sel >> 4) % 9;
    if (rs_rsmsg_client_decode(m, msg, msg_len, att, att_len, keys, VS, rows, &resp, NULL) == 0 &&
        m == RS_RSMSG_GET)
        fuzz_touch(rows, keys * VS);
    /* the reader's check of the usual layout accepts exactly what the validator accepts */
    if (att_len) {
        uint32_t n = 0, found = 0;
        int valid = rs_rsblock_validate(att, att_len, &n, NULL) == 0 && n == keys;
        int read = rs_rsblock_read_rows(att, att_len, (uint32_t)keys, VS, (uint8_t *)rows, &found,
                                        NULL) == 0;
        FUZZ_CHECK(valid == read);
        FUZZ_CHECK(found <= keys);
    }
    free(msg);
    free(att);
    return 0;
}

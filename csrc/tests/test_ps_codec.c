/* test_ps_codec.c — PSRequest/PSResponse codec: round trips in both forms, and malformed input
 * (truncation at every byte, bad lengths, wrong wire types, groups, overflowing varints,
 * inconsistent attachment sizes) rejected with RS_EPROTO and a reason. */
#include <stdlib.h>
#include <string.h>

#include "recstore/ps.h"
#include "rs_test.h"

static void test_request_roundtrip_inline(void) {
    uint64_t keys[3] = {1, 2, 0xffffffffffffffffull};
    float rows[3 * 4];
    for (int i = 0; i < 12; i++)
        rows[i] = (float)i * 0.5f;
    rs_ps_request req = {.op = RS_PS_PUT,
                         .shard = 3,
                         .value_size = 16,
                         .num_keys = 3,
                         .keys = (const uint8_t *)keys,
                         .rows = (const uint8_t *)rows,
                         .rows_len = sizeof rows};
    uint8_t buf[512];
    size_t n = rs_ps_request_encode(&req, 0, buf);
    RS_CHECK_EQ(n, rs_ps_request_encoded_size(&req, 0));
    rs_ps_request out;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_PUT, buf, n, NULL, 0, &out, &err), 0);
    RS_CHECK_EQ(out.shard, 3);
    RS_CHECK_EQ(out.value_size, 16);
    RS_CHECK_EQ(out.num_keys, 3);
    RS_CHECK_EQ(rs_ps_key(out.keys, 2), (long long)0xffffffffffffffffull);
    RS_CHECK_EQ(out.rows_len, sizeof rows);
    RS_CHECK(memcmp(out.rows, rows, sizeof rows) == 0);
    RS_CHECK(out.keys >= buf && out.keys < buf + n); /* a view, not a copy */
}

static void test_request_roundtrip_attachment(void) {
    uint8_t att[8 * 2 + 8];
    uint64_t k[2] = {7, 9};
    memcpy(att, k, 16);
    memset(att + 16, 0xab, 8);
    rs_ps_request req = {.op = RS_PS_UPDATE, .num_keys = 2, .rows_len = 8};
    uint8_t buf[64];
    size_t n = rs_ps_request_encode(&req, 1, buf);
    RS_CHECK_EQ(n, rs_ps_request_encoded_size(&req, 1));
    rs_ps_request out;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_UPDATE, buf, n, att, sizeof att, &out, &err), 0);
    RS_CHECK_EQ(out.num_keys, 2);
    RS_CHECK(out.keys == att);
    RS_CHECK(out.rows == att + 16);
    RS_CHECK_EQ(out.rows_len, 8);
    /* attachment size that does not match num_keys/rows_len */
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_UPDATE, buf, n, att, sizeof att - 1, &out, &err),
                RS_EPROTO);
    RS_CHECK(strstr(err.msg, "attachment") != NULL);
}

/* gRPC Stream messages: the request names its method (field 8); decoding with
 * RS_PS_OP_FROM_MESSAGE takes the op from it, and refuses a message without one or with another. */
static void test_request_names_its_method(void) {
    uint64_t keys[2] = {5, 6};
    rs_ps_request req = {.op = RS_PS_GET, .num_keys = 2, .keys = (const uint8_t *)keys};
    uint8_t buf[128];
    size_t n = rs_ps_request_encode(&req, 0, buf);
    size_t m = rs_ps_request_encode_method(req.op, buf + n);
    RS_CHECK(m > 0 && m <= RS_PS_METHOD_FIELD_BYTES);
    rs_ps_request out;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_OP_FROM_MESSAGE, buf, n + m, NULL, 0, &out, &err), 0);
    RS_CHECK_EQ(out.op, RS_PS_GET);
    RS_CHECK_EQ(out.num_keys, 2);
    RS_CHECK_EQ(rs_ps_key(out.keys, 1), 6);
    /* a unary method's op wins over the field: the field matters on Stream only */
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_PUT, buf, n + m, NULL, 0, &out, &err), 0);
    RS_CHECK_EQ(out.op, RS_PS_PUT);
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_OP_FROM_MESSAGE, buf, n, NULL, 0, &out, &err),
                RS_EPROTO);
    RS_CHECK(strstr(err.msg, "needs its method") != NULL);
    m = rs_ps_request_encode_method((rs_ps_op)9, buf + n);
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_OP_FROM_MESSAGE, buf, n + m, NULL, 0, &out, &err),
                RS_EPROTO);
    RS_CHECK(strstr(err.msg, "method 9") != NULL);
}

static void test_command_and_empty(void) {
    rs_ps_request req = {.op = RS_PS_COMMAND, .command = "stats", .command_len = 5};
    uint8_t buf[64];
    size_t n = rs_ps_request_encode(&req, 1, buf);
    rs_ps_request out;
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_COMMAND, buf, n, NULL, 0, &out, NULL), 0);
    RS_CHECK_EQ(out.command_len, 5);
    RS_CHECK(memcmp(out.command, "stats", 5) == 0);
    /* the empty message is a valid request with all defaults */
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_GET, buf, 0, NULL, 0, &out, NULL), 0);
    RS_CHECK_EQ(out.num_keys, 0);
}

static void test_request_truncated_everywhere(void) {
    uint64_t keys[2] = {1, 2};
    rs_ps_request req = {.op = RS_PS_GET,
                         .shard = 1,
                         .value_size = 300,
                         .num_keys = 2,
                         .keys = (const uint8_t *)keys,
                         .command = "x",
                         .command_len = 1};
    uint8_t buf[128];
    size_t n = rs_ps_request_encode(&req, 0, buf);
    int failures = 0;
    for (size_t cut = 1; cut < n; cut++) {
        /* copy into an exact-size heap block so ASan catches any read past the end */
        uint8_t *p = malloc(cut);
        memcpy(p, buf, cut);
        rs_ps_request out;
        rs_error err = {0};
        int rc = rs_ps_request_decode(RS_PS_GET, p, cut, NULL, 0, &out, &err);
        if (rc == RS_EPROTO) {
            failures++;
            RS_CHECK(err.msg[0] != 0);
        }
        free(p);
    }
    /* every cut inside a field fails; cuts at field boundaries are valid shorter messages */
    RS_CHECK(failures >= (int)n - 5);
}

static void expect_bad_request(const uint8_t *msg, size_t len, const char *needle) {
    uint8_t *p = malloc(len ? len : 1);
    memcpy(p, msg, len);
    rs_ps_request out;
    rs_error err = {0};
    int rc = rs_ps_request_decode(RS_PS_GET, p, len, NULL, 0, &out, &err);
    RS_CHECK_EQ(rc, RS_EPROTO);
    if (needle && !strstr(err.msg, needle)) {
        fprintf(stderr, "error '%s' does not mention '%s'\n", err.msg, needle);
        RS_CHECK(0);
    }
    free(p);
}

static void test_request_malformed(void) {
    /* keys field claims 100 bytes, 2 present */
    expect_bad_request((const uint8_t[]){0x1a, 100, 1, 2}, 4, "keys");
    /* keys not a multiple of 8 */
    expect_bad_request((const uint8_t[]){0x1a, 3, 1, 2, 3}, 5, "multiple of 8");
    /* shard sent as length-delimited */
    expect_bad_request((const uint8_t[]){0x0a, 1, 0}, 3, "shard");
    /* value_size varint of 11 bytes */
    expect_bad_request(
        (const uint8_t[]){0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
        12, "varint");
    /* value_size over uint32 */
    expect_bad_request((const uint8_t[]){0x10, 0x80, 0x80, 0x80, 0x80, 0x10}, 6, "uint32");
    /* field number 0 */
    expect_bad_request((const uint8_t[]){0x00, 0x01}, 2, "field number");
    /* start group (wire type 3) on an unknown field */
    expect_bad_request((const uint8_t[]){0x9b, 0x01}, 2, "wire type");
    /* truncated fixed64 unknown field */
    expect_bad_request((const uint8_t[]){0x99, 0x01, 1, 2, 3}, 5, "truncated");
    /* num_keys without keys */
    expect_bad_request((const uint8_t[]){0x30, 5}, 2, "num_keys");
    /* length varint itself truncated */
    expect_bad_request((const uint8_t[]){0x22, 0x80}, 2, "truncated");
    /* unknown fields of valid types are skipped */
    rs_ps_request out;
    const uint8_t ok[] = {0x98, 0x01, 5, 0xa2, 0x01, 2, 'h', 'i', 0x08, 2};
    RS_CHECK_EQ(rs_ps_request_decode(RS_PS_GET, ok, sizeof ok, NULL, 0, &out, NULL), 0);
    RS_CHECK_EQ(out.shard, 2);
}

static void test_response_roundtrip(void) {
    rs_ps_response resp = {.status = RS_PS_BATCH_TOO_LARGE, .value_size = 512, .num_found = 0};
    snprintf(resp.error, sizeof resp.error, "too many keys");
    uint8_t buf[4096];
    size_t n = rs_ps_response_encode_header(&resp, 1, buf);
    RS_CHECK_EQ(n, rs_ps_response_header_size(&resp, 1));
    rs_ps_response out;
    RS_CHECK_EQ(rs_ps_response_decode(buf, n, NULL, 0, &out, NULL), 0);
    RS_CHECK_EQ(out.status, RS_PS_BATCH_TOO_LARGE);
    RS_CHECK(strcmp(out.error, "too many keys") == 0);
    RS_CHECK_EQ(out.value_size, 512);

    /* negative status survives (10-byte varint) */
    resp.status = -5;
    n = rs_ps_response_encode_header(&resp, 1, buf);
    RS_CHECK_EQ(rs_ps_response_decode(buf, n, NULL, 0, &out, NULL), 0);
    RS_CHECK_EQ(out.status, -5);

    /* inline rows: header then the row bytes appended by the transport */
    rs_ps_response g = {.status = 0, .value_size = 8, .num_found = 2, .rows_len = 16};
    n = rs_ps_response_encode_header(&g, 0, buf);
    RS_CHECK_EQ(n, rs_ps_response_header_size(&g, 0));
    for (int i = 0; i < 16; i++)
        buf[n + i] = (uint8_t)i;
    RS_CHECK_EQ(rs_ps_response_decode(buf, n + 16, NULL, 0, &out, NULL), 0);
    RS_CHECK_EQ(out.rows_len, 16);
    RS_CHECK(out.rows == buf + n);
    RS_CHECK_EQ(out.num_found, 2);
    /* rows cut short */
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_response_decode(buf, n + 15, NULL, 0, &out, &err), RS_EPROTO);

    /* attachment form */
    n = rs_ps_response_encode_header(&g, 1, buf);
    uint8_t att[16] = {0};
    RS_CHECK_EQ(rs_ps_response_decode(buf, n, att, 16, &out, NULL), 0);
    RS_CHECK(out.rows == att);
    RS_CHECK_EQ(rs_ps_response_decode(buf, n, att, 8, &out, &err), RS_EPROTO);
    RS_CHECK(strstr(err.msg, "rows_len") != NULL);
}

static void test_response_garbage(void) {
    /* deterministic garbage: decoding must fail or succeed without reading out of bounds */
    uint64_t x = 12345;
    for (int round = 0; round < 2000; round++) {
        size_t len = 1 + (size_t)(round % 40);
        uint8_t *p = malloc(len);
        for (size_t i = 0; i < len; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            p[i] = (uint8_t)(x >> 56);
        }
        rs_ps_response out;
        rs_ps_request rq;
        rs_error err = {0};
        int rc = rs_ps_response_decode(p, len, NULL, 0, &out, &err);
        RS_CHECK(rc == 0 || (rc == RS_EPROTO && err.msg[0]));
        rc = rs_ps_request_decode(RS_PS_PUT, p, len, NULL, 0, &rq, &err);
        RS_CHECK(rc == 0 || rc == RS_EPROTO);
        if (rc == 0) RS_CHECK(rq.num_keys * 8ull + rq.rows_len <= len);
        free(p);
    }
}

static void test_names(void) {
    rs_ps_op op;
    RS_CHECK_EQ(rs_ps_op_from_method("Update", 6, &op), 0);
    RS_CHECK_EQ(op, RS_PS_UPDATE);
    RS_CHECK_EQ(rs_ps_op_from_method("Upd", 3, &op), RS_EINVAL);
    RS_CHECK(strcmp(rs_ps_op_method(RS_PS_COMMAND), "Command") == 0);
    RS_CHECK(strcmp(rs_ps_status_name(RS_PS_WRONG_SHARD), "wrong shard") == 0);
}

RS_TEST_MAIN(RS_TEST(test_request_roundtrip_inline), RS_TEST(test_request_roundtrip_attachment),
             RS_TEST(test_request_names_its_method), RS_TEST(test_command_and_empty),
             RS_TEST(test_request_truncated_everywhere), RS_TEST(test_request_malformed),
             RS_TEST(test_response_roundtrip), RS_TEST(test_response_garbage), RS_TEST(test_names))

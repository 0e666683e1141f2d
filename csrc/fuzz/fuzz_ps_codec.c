/*
 * fuzz_ps_codec.c — libFuzzer target for the shared PS payload codec (csrc/ps/ps_codec.c):
 * PSRequest and PSResponse decoding, with and without an attachment, as every transport feeds it
 * (gRPC inline bytes, baidu_std and RC attachments).
 *
 * Input layout: byte 0 picks the message (0-3: PSRequest for Get/Put/Update/Command, else
 * PSResponse); bytes 1-2 (u16) the attachment length; the attachment bytes come from the end of
 * the input and the message is what lies between. Message and attachment each get their own
 * exact-size heap block.
 *
 * Checked beyond "no crash": every decoded view lies inside the buffer it came from and is read in
 * full; a decoded message re-encodes and decodes back to the same fields (round trip).
 */
#include <stdio.h>

#include "fuzz/fuzz_input.h"
#include "recstore/ps.h"

static int in_range(const uint8_t *v, size_t n, const uint8_t *base, size_t len) {
    if (!n) return 1;
    return v && base && v >= base && n <= len && (size_t)(v - base) <= len - n;
}

static void request_round_trip(const rs_ps_request *req, int attach) {
    size_t msg_len = rs_ps_request_encoded_size(req, attach);
    uint8_t *msg = malloc(msg_len ? msg_len : 1);
    FUZZ_CHECK(rs_ps_request_encode(req, attach, msg) == msg_len);
    size_t att_len = attach ? (size_t)req->num_keys * 8 + req->rows_len : 0;
    uint8_t *att = NULL;
    if (att_len) {
        att = malloc(att_len);
        if (req->num_keys) memcpy(att, req->keys, (size_t)req->num_keys * 8);
        if (req->rows_len) memcpy(att + (size_t)req->num_keys * 8, req->rows, req->rows_len);
    }
    rs_ps_request back;
    rs_error err = {0};
    int rc = rs_ps_request_decode(req->op, msg, msg_len, att, att_len, &back, &err);
    if (rc) fprintf(stderr, "re-decode failed: %s\n", err.msg);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(back.op == req->op && back.shard == req->shard &&
               back.value_size == req->value_size && back.num_keys == req->num_keys &&
               back.rows_len == req->rows_len && back.command_len == req->command_len);
    FUZZ_CHECK(!req->num_keys || memcmp(back.keys, req->keys, (size_t)req->num_keys * 8) == 0);
    FUZZ_CHECK(!req->rows_len || memcmp(back.rows, req->rows, req->rows_len) == 0);
    FUZZ_CHECK(!req->command_len || memcmp(back.command, req->command, req->command_len) == 0);
    free(att);
    free(msg);
}

static void fuzz_request(rs_ps_op op, const uint8_t *msg, size_t len, const uint8_t *att,
                         size_t att_len) {
    rs_ps_request req;
    rs_error err = {0};
    if (rs_ps_request_decode(op, msg, len, att, att_len, &req, &err)) {
        FUZZ_CHECK(err.code == RS_EPROTO && err.msg[0]);
        return;
    }
    size_t keys_len = (size_t)req.num_keys * 8;
    if (att_len) {
        FUZZ_CHECK(in_range(req.keys, keys_len, att, att_len));
        FUZZ_CHECK(in_range(req.rows, req.rows_len, att, att_len));
    } else {
        FUZZ_CHECK(in_range(req.keys, keys_len, msg, len));
        FUZZ_CHECK(in_range(req.rows, req.rows_len, msg, len));
    }
    FUZZ_CHECK(in_range((const uint8_t *)req.command, req.command_len, msg, len));
    uint64_t sum = 0;
    for (size_t i = 0; i < req.num_keys; i++)
        sum += rs_ps_key(req.keys, i);
    (void)sum;
    fuzz_touch(req.rows, req.rows_len);
    fuzz_touch(req.command, req.command_len);
    request_round_trip(&req, att_len != 0);
}

static void response_round_trip(const rs_ps_response *resp, int attach) {
    size_t head = rs_ps_response_header_size(resp, attach);
    size_t msg_len = head + (attach ? 0 : resp->rows_len);
    uint8_t *msg = malloc(msg_len ? msg_len : 1);
    FUZZ_CHECK(rs_ps_response_encode_header(resp, attach, msg) == head);
    if (!attach && resp->rows_len) memcpy(msg + head, resp->rows, resp->rows_len);
    uint8_t *att = attach ? fuzz_dup(resp->rows, resp->rows_len) : NULL;
    rs_ps_response *back = malloc(sizeof *back);
    rs_error err = {0};
    int rc = rs_ps_response_decode(msg, msg_len, att, attach ? resp->rows_len : 0, back, &err);
    if (rc) fprintf(stderr, "re-decode failed: %s\n", err.msg);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(back->status == resp->status && back->value_size == resp->value_size &&
               back->num_found == resp->num_found && back->rows_len == resp->rows_len);
    FUZZ_CHECK(strcmp(back->error, resp->error) == 0 && strcmp(back->reply, resp->reply) == 0);
    FUZZ_CHECK(!resp->rows_len || memcmp(back->rows, resp->rows, resp->rows_len) == 0);
    free(back);
    free(att);
    free(msg);
}

static void fuzz_response(const uint8_t *msg, size_t len, const uint8_t *att, size_t att_len) {
    rs_ps_response *resp = malloc(sizeof *resp);
    rs_error err = {0};
    if (rs_ps_response_decode(msg, len, att, att_len, resp, &err)) {
        FUZZ_CHECK(err.code == RS_EPROTO && err.msg[0]);
        free(resp);
        return;
    }
    FUZZ_CHECK(in_range(resp->rows, resp->rows_len, att_len ? att : msg, att_len ? att_len : len));
    FUZZ_CHECK(memchr(resp->error, 0, sizeof resp->error) &&
               memchr(resp->reply, 0, sizeof resp->reply));
    fuzz_touch(resp->rows, resp->rows_len);
    response_round_trip(resp, att_len != 0);
    free(resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_input in = {data, size};
    uint8_t kind = fuzz_u8(&in);
    size_t att_len = fuzz_u16(&in);
    if (att_len > in.left) att_len = in.left;
    size_t msg_len = in.left - att_len;
    uint8_t *msg = fuzz_dup(in.p, msg_len);
    uint8_t *att = fuzz_dup(in.p + msg_len, att_len);
    if (kind % 5 < 4)
        fuzz_request((rs_ps_op)(kind % 5 + 1), msg, msg_len, att, att_len);
    else
        fuzz_response(msg, msg_len, att, att_len);
    free(att);
    free(msg);
    return 0;
}

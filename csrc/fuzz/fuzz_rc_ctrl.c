/*
 * fuzz_rc_ctrl.c — libFuzzer target for what an RC server reads from untrusted peers: control
 * plane frame headers and ATTACH request/reply bodies (csrc/transport/rc/rc_ctrl.c), and request
 * descriptors found in a request slot (rs_rc_desc_check, csrc/transport/rc/rc_slot.c).
 *
 * Input layout: byte 0 picks the parser (0 header, 1 attach request, 2 attach reply, 3 descriptor);
 * the rest is the bytes under test, in their own exact-size heap block. For descriptors, the first
 * 192 bytes are the descriptor and the next bytes choose the slot's expectations.
 *
 * Checked beyond "no crash": a rejection carries RS_EPROTO and a reason; a decoded attach body
 * re-encodes to the same bytes; an accepted descriptor's payload, response room and key bytes lie
 * inside the slot geometry; every rejection names its reason.
 */
#include <stdio.h>

#include "fuzz/fuzz_input.h"
#include "recstore/rc.h"

static void fuzz_header(const uint8_t *b, size_t n) {
    if (n < RS_RC_CTRL_HDR)
        return;
    uint16_t type;
    uint32_t len;
    rs_error err = {0};
    if (rs_rc_ctrl_check_header(b, &type, &len, &err)) {
        FUZZ_CHECK(err.code == RS_EPROTO && err.msg[0]);
        return;
    }
    FUZZ_CHECK(len <= RS_RC_CTRL_MAX_BODY);
}

static void fuzz_attach_req(const uint8_t *b, size_t n) {
    static rs_rc_attach_req r;
    rs_error err = {0};
    if (rs_rc_ctrl_decode_attach_req(b, n, &r, &err)) {
        FUZZ_CHECK(err.code == RS_EPROTO && err.msg[0]);
        return;
    }
    FUZZ_CHECK(r.qps >= 1 && r.qps <= RS_RC_CTRL_MAX_QPS);
    static uint8_t out[RS_RC_CTRL_HDR + 64 + RS_RC_CTRL_MAX_QPS * 128];
    int m = rs_rc_ctrl_encode_attach_req(&r, out, sizeof out);
    FUZZ_CHECK(m == (int)(RS_RC_CTRL_HDR + n));
    static rs_rc_attach_req back;
    FUZZ_CHECK(rs_rc_ctrl_decode_attach_req(out + RS_RC_CTRL_HDR, n, &back, &err) == 0);
    FUZZ_CHECK(back.qps == r.qps && back.slots == r.slots && back.shard_id == r.shard_id);
    for (uint32_t i = 0; i < r.qps; i++)
        FUZZ_CHECK(back.lanes[i].region_addr == r.lanes[i].region_addr &&
                   back.lanes[i].rkey == r.lanes[i].rkey &&
                   strcmp(back.lanes[i].shm_name, r.lanes[i].shm_name) == 0);
}

static void fuzz_attach_rep(const uint8_t *b, size_t n) {
    static rs_rc_attach_rep r;
    rs_error err = {0};
    if (rs_rc_ctrl_decode_attach_rep(b, n, &r, &err)) {
        FUZZ_CHECK(err.code == RS_EPROTO && err.msg[0]);
        return;
    }
    FUZZ_CHECK(r.qps <= RS_RC_CTRL_MAX_QPS && strlen(r.reason) < sizeof r.reason);
    fuzz_touch(r.lanes, r.qps * sizeof r.lanes[0]);
}

static void fuzz_desc(fuzz_input *in) {
    size_t got;
    const uint8_t *p = fuzz_bytes(in, sizeof(rs_rc_desc), &got);
    rs_rc_desc d;
    memset(&d, 0, sizeof d);
    memcpy(&d, p, got);
    rs_rc_slot_expect x = {
        .shard_id = fuzz_u8(in) % 4,
        .client_id = fuzz_u8(in),
        .qp_index = fuzz_u8(in) % 16,
        .value_size = 4u * (1u + fuzz_u8(in)),
        .max_keys = fuzz_u16(in),
        .request_slot_bytes = 4096u << (fuzz_u8(in) % 6),
        .response_room = (4096u << (fuzz_u8(in) % 6)) - RS_RC_TAIL_BYTES,
        .response_addr = d.client_response_addr, /* sometimes matches, as for an honest client */
        .status_addr = d.client_status_addr,
        .rkey = d.client_response_rkey,
    };
    if (fuzz_u8(in) & 1)
        x.response_addr ^= 0x40;
    char why[256];
    int st = rs_rc_desc_check(&d, &x, why, sizeof why);
    FUZZ_CHECK(st == RS_PS_OK || st == RS_PS_INVALID_PAYLOAD || st == RS_PS_WRONG_SHARD ||
               st == RS_PS_BATCH_TOO_LARGE || st == RS_PS_VALUE_SIZE_MISMATCH);
    if (st != RS_PS_OK) {
        FUZZ_CHECK(why[0] != '\0');
        return;
    }
    FUZZ_CHECK(d.magic == RS_RC_MAGIC && d.payload_offset == RS_RC_DESC_BYTES);
    FUZZ_CHECK((uint64_t)RS_RC_DESC_BYTES + d.payload_bytes + RS_RC_TAIL_BYTES <=
               x.request_slot_bytes);
    FUZZ_CHECK(d.msg_bytes <= d.payload_bytes && d.response_bytes <= x.response_room);
    FUZZ_CHECK((uint64_t)d.key_count * 8 <= (uint64_t)d.payload_bytes - d.msg_bytes);
    FUZZ_CHECK(d.op != RS_PS_GET ||
               (uint64_t)d.key_count * x.value_size + RS_RC_RESP_HDR_ROOM <= d.response_bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_input in = {data, size};
    uint8_t kind = fuzz_u8(&in) % 4;
    if (kind == 3) {
        fuzz_desc(&in);
        return 0;
    }
    uint8_t *b = fuzz_dup(in.p, in.left);
    if (kind == 0)
        fuzz_header(b, in.left);
    else if (kind == 1)
        fuzz_attach_req(b, in.left);
    else
        fuzz_attach_rep(b, in.left);
    free(b);
    return 0;
}

/*
 * fuzz_rc_ctrl.c — libFuzzer target for the RC (rdma/shm) control plane's wire format
 * (csrc/transport/rc/rc_ctrl.c): the 16-byte frame header, attach requests (what a server reads
 * from a client) and attach replies (what a client reads from a server), and the framed receive
 * over a socket.
 *
 * Input: byte 0 picks the parser (0: attach request body, 1: attach reply body, 2: a byte stream
 * read frame by frame with rs_rc_ctrl_recv from a socketpair, as the server's control thread and
 * the client do); the rest is the body or stream. Bodies get an exact-size heap block.
 *
 * Checked beyond "no crash": a decoded message re-encodes and decodes to the same fields; every
 * received frame's body length is within RS_RC_CTRL_MAX_BODY; failures carry a reason.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz/fuzz_input.h"
#include "recstore/rc.h"

static void same_meta(const rs_rc_ep_meta *a, const rs_rc_ep_meta *b) {
    FUZZ_CHECK(a->region_addr == b->region_addr && a->region_len == b->region_len &&
               a->rkey == b->rkey && a->qpn == b->qpn && a->psn == b->psn && a->lid == b->lid &&
               a->port == b->port && a->link_layer == b->link_layer && a->mtu == b->mtu &&
               a->gid_index == b->gid_index && memcmp(a->gid, b->gid, sizeof a->gid) == 0 &&
               strcmp(a->shm_name, b->shm_name) == 0);
}

static void fuzz_attach_req(const uint8_t *body, size_t len) {
    rs_rc_attach_req *r = malloc(sizeof *r), *back = malloc(sizeof *back);
    rs_error err = {0};
    if (rs_rc_ctrl_decode_attach_req(body, len, r, &err) == 0) {
        size_t cap = RS_RC_CTRL_HDR + len;
        uint8_t *buf = malloc(cap);
        int n = rs_rc_ctrl_encode_attach_req(r, buf, cap);
        FUZZ_CHECK(n == (int)cap);
        uint16_t type = 0;
        uint32_t blen = 0;
        FUZZ_CHECK(rs_rc_ctrl_check_header(buf, &type, &blen, &err) == 0);
        FUZZ_CHECK(type == RS_RC_MSG_ATTACH_REQ && blen == len);
        FUZZ_CHECK(rs_rc_ctrl_decode_attach_req(buf + RS_RC_CTRL_HDR, blen, back, &err) == 0);
        FUZZ_CHECK(strcmp(r->fabric, back->fabric) == 0 && r->qps == back->qps &&
                   r->slots == back->slots && r->request_slot_bytes == back->request_slot_bytes &&
                   r->response_slot_bytes == back->response_slot_bytes &&
                   r->shard_id == back->shard_id);
        for (uint32_t i = 0; i < r->qps; i++)
            same_meta(&r->lanes[i], &back->lanes[i]);
        free(buf);
    } else {
        FUZZ_CHECK(err.code == RS_EPROTO && err.msg[0]);
    }
    free(back);
    free(r);
}

static void fuzz_attach_rep(const uint8_t *body, size_t len) {
    rs_rc_attach_rep *r = malloc(sizeof *r), *back = malloc(sizeof *back);
    rs_error err = {0};
    if (rs_rc_ctrl_decode_attach_rep(body, len, r, &err) == 0) {
        FUZZ_CHECK(memchr(r->reason, 0, sizeof r->reason) != NULL);
        size_t cap = RS_RC_CTRL_HDR + len;
        uint8_t *buf = malloc(cap);
        int n = rs_rc_ctrl_encode_attach_rep(r, buf, cap);
        /* a failed reply is re-encoded without lanes; a successful one byte for byte in size */
        FUZZ_CHECK(n > 0 && (r->status != 0 || n == (int)cap));
        FUZZ_CHECK(rs_rc_ctrl_decode_attach_rep(buf + RS_RC_CTRL_HDR, (size_t)n - RS_RC_CTRL_HDR,
                                                back, &err) == 0);
        FUZZ_CHECK(r->status == back->status && strcmp(r->reason, back->reason) == 0 &&
                   r->client_id == back->client_id && r->shard_id == back->shard_id &&
                   r->value_size == back->value_size && r->max_keys == back->max_keys);
        if (r->status == 0) {
            FUZZ_CHECK(r->qps == back->qps);
            for (uint32_t i = 0; i < r->qps; i++)
                same_meta(&r->lanes[i], &back->lanes[i]);
        }
        free(buf);
    } else {
        FUZZ_CHECK(err.code == RS_EPROTO && err.msg[0]);
    }
    free(back);
    free(r);
}

static void fuzz_stream(const uint8_t *p, size_t len) {
    if (len > 60000) return; /* within the socketpair buffer: written up front, no blocking */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) abort();
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(sv[1], p + off, len - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    shutdown(sv[1], SHUT_WR);
    for (int frames = 0; frames < 64; frames++) {
        uint16_t type = 0;
        uint8_t *body = NULL;
        uint32_t blen = 0;
        rs_error err = {0};
        int rc = rs_rc_ctrl_recv(sv[0], 1000, &type, &body, &blen, &err);
        if (rc) {
            FUZZ_CHECK(body == NULL && err.msg[0]);
            FUZZ_CHECK(rc != RS_ETIMEDOUT); /* the stream ends with EOF, never a wait */
            break;
        }
        FUZZ_CHECK(blen <= RS_RC_CTRL_MAX_BODY);
        fuzz_touch(body, blen);
        if (type == RS_RC_MSG_ATTACH_REQ) fuzz_attach_req(body, blen);
        if (type == RS_RC_MSG_ATTACH_REP) fuzz_attach_rep(body, blen);
        free(body);
    }
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_input in = {data, size};
    uint8_t kind = fuzz_u8(&in) % 3;
    uint8_t *body = fuzz_dup(in.p, in.left);
    const uint8_t *b = body ? body : (const uint8_t *)"";
    if (kind == 0)
        fuzz_attach_req(b, in.left);
    else if (kind == 1)
        fuzz_attach_rep(b, in.left);
    else
        fuzz_stream(b, in.left);
    free(body);
    return 0;
}

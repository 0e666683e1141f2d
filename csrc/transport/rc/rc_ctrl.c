/*
 * rc_ctrl.c — the RC control plane's wire format and blocking frame I/O (TCP set-up is net.c).
 *
 * Frames: a 16-byte header {magic u32 = 0x52444d41, version u16, type u16, body_len u32,
 * reserved u32}, little-endian, then body_len bytes. A receiver checks magic, version and
 * body_len <= RS_RC_CTRL_MAX_BODY before allocating anything, so a bad or oversized frame costs
 * the server one rejected connection, never memory or a crash. Endpoint metadata travels as
 * fixed 128-byte records (rs_rc_ep_meta, encoded field by field). The control plane is used at
 * attach time only, never on the data path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "recstore/bytes.h"
#include "recstore/clock.h"
#include "recstore/rc.h"
#include "transport/net.h"

#define META_REC 128u
/* how long a client-side send waits for a server that does not read before giving up */
#define CTRL_SEND_TIMEOUT_NS (30ull * 1000000000ull)

void rs_rc_ctrl_put_header(uint8_t *h, uint16_t type, uint32_t body_len) {
    uint16_t ver = RS_RC_CTRL_VERSION;
    rs_put32(h, RS_RC_CTRL_MAGIC);
    memcpy(h + 4, &ver, 2);
    memcpy(h + 6, &type, 2);
    rs_put32(h + 8, body_len);
    rs_put32(h + 12, 0);
}

int rs_rc_ctrl_check_header(const uint8_t *h, uint16_t *type, uint32_t *body_len, rs_error *err) {
    uint16_t ver;
    if (rs_get32(h) != RS_RC_CTRL_MAGIC)
        return rs_error_set(err, RS_EPROTO, "control frame magic 0x%08x, expected 0x%08x",
                            rs_get32(h), RS_RC_CTRL_MAGIC);
    memcpy(&ver, h + 4, 2);
    if (ver != RS_RC_CTRL_VERSION)
        return rs_error_set(err, RS_EPROTO, "control frame version %u, this side speaks %u", ver,
                            RS_RC_CTRL_VERSION);
    memcpy(type, h + 6, 2);
    *body_len = rs_get32(h + 8);
    if (*body_len > RS_RC_CTRL_MAX_BODY)
        return rs_error_set(err, RS_EPROTO,
                            "control frame body of %u bytes exceeds the %u-byte limit", *body_len,
                            RS_RC_CTRL_MAX_BODY);
    return 0;
}

static void meta_put(uint8_t *p, const rs_rc_ep_meta *m) {
    memset(p, 0, META_REC);
    rs_put64(p, m->region_addr);
    rs_put64(p + 8, m->region_len);
    rs_put32(p + 16, m->rkey);
    rs_put32(p + 20, m->qpn);
    rs_put32(p + 24, m->psn);
    memcpy(p + 28, &m->lid, 2);
    p[30] = m->port;
    p[31] = m->link_layer;
    p[32] = m->mtu;
    p[33] = m->gid_index;
    p[34] = m->caps;
    memcpy(p + 36, m->gid, 16);
    memcpy(p + 52, m->shm_name, RS_RC_NAME_MAX);
}

static int meta_get(const uint8_t *p, rs_rc_ep_meta *m, rs_error *err) {
    memset(m, 0, sizeof *m);
    m->region_addr = rs_get64(p);
    m->region_len = rs_get64(p + 8);
    m->rkey = rs_get32(p + 16);
    m->qpn = rs_get32(p + 20);
    m->psn = rs_get32(p + 24);
    memcpy(&m->lid, p + 28, 2);
    m->port = p[30];
    m->link_layer = p[31];
    m->mtu = p[32];
    m->gid_index = p[33];
    m->caps = p[34];
    memcpy(m->gid, p + 36, 16);
    memcpy(m->shm_name, p + 52, RS_RC_NAME_MAX);
    if (m->shm_name[RS_RC_NAME_MAX - 1] != '\0')
        return rs_error_set(err, RS_EPROTO, "endpoint metadata: region name is not terminated");
    return 0;
}

#define REQ_FIXED (16u + 5u * 4u)
#define REP_FIXED (4u + 256u + 5u * 4u)

int rs_rc_ctrl_encode_attach_req(const rs_rc_attach_req *r, uint8_t *buf, size_t cap) {
    if (r->qps == 0 || r->qps > RS_RC_CTRL_MAX_QPS || r->token_len > RS_AUTH_TOKEN_MAX)
        return RS_EINVAL;
    size_t lanes_end = REQ_FIXED + (size_t)r->qps * META_REC;
    size_t body = lanes_end + (r->token_len ? 4 + r->token_len : 0);
    if (RS_RC_CTRL_HDR + body > cap) return RS_EINVAL;
    rs_rc_ctrl_put_header(buf, RS_RC_MSG_ATTACH_REQ, (uint32_t)body);
    uint8_t *p = buf + RS_RC_CTRL_HDR;
    memset(p, 0, 16);
    memcpy(p, r->fabric, strnlen(r->fabric, 15));
    rs_put32(p + 16, r->qps);
    rs_put32(p + 20, r->slots);
    rs_put32(p + 24, r->request_slot_bytes);
    rs_put32(p + 28, r->response_slot_bytes);
    rs_put32(p + 32, r->shard_id);
    for (uint32_t i = 0; i < r->qps; i++)
        meta_put(p + REQ_FIXED + i * META_REC, &r->lanes[i]);
    if (r->token_len) {
        rs_put32(p + lanes_end, r->token_len);
        memcpy(p + lanes_end + 4, r->token, r->token_len);
    }
    return (int)(RS_RC_CTRL_HDR + body);
}

int rs_rc_ctrl_decode_attach_req(const uint8_t *b, size_t len, rs_rc_attach_req *r, rs_error *err) {
    if (len < REQ_FIXED)
        return rs_error_set(err, RS_EPROTO, "attach request of %zu bytes is truncated", len);
    memset(r, 0, offsetof(rs_rc_attach_req, lanes));
    memcpy(r->fabric, b, 15);
    r->fabric[15] = '\0';
    r->qps = rs_get32(b + 16);
    r->slots = rs_get32(b + 20);
    r->request_slot_bytes = rs_get32(b + 24);
    r->response_slot_bytes = rs_get32(b + 28);
    r->shard_id = rs_get32(b + 32);
    if (r->qps == 0 || r->qps > RS_RC_CTRL_MAX_QPS)
        return rs_error_set(err, RS_EPROTO, "attach request asks for %u QPs (1..%u)", r->qps,
                            RS_RC_CTRL_MAX_QPS);
    size_t lanes_end = REQ_FIXED + (size_t)r->qps * META_REC;
    r->token_len = 0;
    if (len > lanes_end + 4) {
        uint32_t tl = rs_get32(b + lanes_end);
        if (tl == 0 || tl > RS_AUTH_TOKEN_MAX || len != lanes_end + 4 + tl)
            return rs_error_set(err, RS_EPROTO,
                                "attach request of %zu bytes: bad token field of %u bytes", len,
                                tl);
        r->token_len = tl;
        memcpy(r->token, b + lanes_end + 4, tl);
    } else if (len != lanes_end) {
        return rs_error_set(err, RS_EPROTO, "attach request of %zu bytes does not hold %u lanes",
                            len, r->qps);
    }
    for (uint32_t i = 0; i < r->qps; i++) {
        int rc = meta_get(b + REQ_FIXED + i * META_REC, &r->lanes[i], err);
        if (rc) return rc;
    }
    return 0;
}

int rs_rc_ctrl_encode_attach_rep(const rs_rc_attach_rep *r, uint8_t *buf, size_t cap) {
    uint32_t qps = r->status == 0 ? r->qps : 0;
    if (qps > RS_RC_CTRL_MAX_QPS) return RS_EINVAL;
    size_t body = REP_FIXED + (size_t)qps * META_REC;
    if (RS_RC_CTRL_HDR + body > cap) return RS_EINVAL;
    rs_rc_ctrl_put_header(buf, RS_RC_MSG_ATTACH_REP, (uint32_t)body);
    uint8_t *p = buf + RS_RC_CTRL_HDR;
    rs_put32(p, (uint32_t)r->status);
    memset(p + 4, 0, 256);
    memcpy(p + 4, r->reason, strnlen(r->reason, 255));
    rs_put32(p + 260, r->client_id);
    rs_put32(p + 264, r->shard_id);
    rs_put32(p + 268, r->value_size);
    rs_put32(p + 272, r->max_keys);
    rs_put32(p + 276, qps);
    for (uint32_t i = 0; i < qps; i++)
        meta_put(p + REP_FIXED + i * META_REC, &r->lanes[i]);
    return (int)(RS_RC_CTRL_HDR + body);
}

int rs_rc_ctrl_decode_attach_rep(const uint8_t *b, size_t len, rs_rc_attach_rep *r, rs_error *err) {
    if (len < REP_FIXED)
        return rs_error_set(err, RS_EPROTO, "attach reply of %zu bytes is truncated", len);
    memset(r, 0, offsetof(rs_rc_attach_rep, lanes));
    r->status = (int32_t)rs_get32(b);
    memcpy(r->reason, b + 4, 255);
    r->reason[255] = '\0';
    r->client_id = rs_get32(b + 260);
    r->shard_id = rs_get32(b + 264);
    r->value_size = rs_get32(b + 268);
    r->max_keys = rs_get32(b + 272);
    r->qps = rs_get32(b + 276);
    if (r->qps > RS_RC_CTRL_MAX_QPS || len != REP_FIXED + (size_t)r->qps * META_REC)
        return rs_error_set(err, RS_EPROTO, "attach reply of %zu bytes does not hold %u lanes", len,
                            r->qps);
    for (uint32_t i = 0; i < r->qps; i++) {
        int rc = meta_get(b + REP_FIXED + i * META_REC, &r->lanes[i], err);
        if (rc) return rc;
    }
    return 0;
}

static int send_all(int fd, const uint8_t *p, size_t n, rs_error *err) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                /* a blocking socket says EAGAIN only when its SO_SNDTIMEO (set by the server on
                 * control connections) expired: the peer does not read, give up on it */
                int fl = fcntl(fd, F_GETFL);
                if (fl >= 0 && !(fl & O_NONBLOCK))
                    return rs_error_set(err, RS_ETIMEDOUT,
                                        "control plane send: peer does not read");
                if (rs_net_wait(fd, POLLOUT, rs_now_ns() + CTRL_SEND_TIMEOUT_NS) == 0) continue;
                return rs_error_set(err, RS_ETIMEDOUT, "control plane send: peer does not read");
            }
            return rs_error_errno(err, RS_ECONN, errno, "control plane send");
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int recv_all(int fd, uint8_t *p, size_t n, uint64_t deadline, rs_error *err) {
    while (n) {
        int rc = rs_net_wait(fd, POLLIN, deadline);
        if (rc == RS_ETIMEDOUT)
            return rs_error_set(err, rc, "control plane: no reply before the deadline");
        if (rc) return rs_error_errno(err, RS_EIO, errno, "control plane poll");
        ssize_t r = recv(fd, p, n, 0);
        if (r == 0) return rs_error_set(err, RS_ECONN, "control plane: peer closed the connection");
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return rs_error_errno(err, RS_ECONN, errno, "control plane recv");
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int rs_rc_ctrl_send(int fd, uint16_t type, const void *body, uint32_t len, rs_error *err) {
    uint8_t h[RS_RC_CTRL_HDR];
    rs_rc_ctrl_put_header(h, type, len);
    int rc = send_all(fd, h, sizeof h, err);
    if (rc == 0 && len) rc = send_all(fd, body, len, err);
    return rc;
}

int rs_rc_ctrl_recv(int fd, uint32_t timeout_ms, uint16_t *type, uint8_t **body, uint32_t *len,
                    rs_error *err) {
    uint64_t deadline = rs_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    uint8_t h[RS_RC_CTRL_HDR];
    *body = NULL;
    int rc = recv_all(fd, h, sizeof h, deadline, err);
    if (rc) return rc;
    if ((rc = rs_rc_ctrl_check_header(h, type, len, err))) return rc;
    uint8_t *b = malloc(*len ? *len : 1);
    if (!b) return rs_error_set(err, RS_ENOMEM, "control plane: out of memory");
    if ((rc = recv_all(fd, b, *len, deadline, err))) {
        free(b);
        return rc;
    }
    *body = b;
    return 0;
}

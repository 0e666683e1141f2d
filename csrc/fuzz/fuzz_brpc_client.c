/*
 * fuzz_brpc_client.c — libFuzzer target for what a brpc client connection reads from a server:
 * response frames (header, RpcMeta with correlation id / error code / attachment size, PSResponse,
 * GET rows received into the caller's buffer). A client must survive a broken or hostile server.
 * fuzz-requires: protobuf_c
 *
 * brpc_conn.c is #included so a connection can be made over a socketpair instead of TCP. The
 * connection submits a few requests (the ops, key counts and pipeline depth come from the first
 * input bytes), the rest of the input is what the "server" sends back, then EOF. Every outstanding
 * request is collected with next(): each either completes or fails with an error naming the peer.
 *
 * Checked beyond "no crash": completions come back with their own tags in submission order, GET
 * rows never exceed the caller's buffer, a failure carries a message naming the peer, and once the
 * connection is broken every later request that had not already been answered fails with the same
 * code.
 */
#include "transport/brpc_conn.c"

#include <fcntl.h>

#include "fuzz/fuzz_input.h"

#define FUZZ_VS      16
#define FUZZ_MAX_REQ 4

static brpc_cconn *conn_over(int fd, uint32_t depth) {
    brpc_cconn *c = calloc(1, sizeof *c);
    c->s = rs_brpc_sock_alloc("fuzz-server", 0);
    if (!c || !c->s) abort();
    c->s->fd = fd;
    c->s->in_cap = 256; /* small, so fill() grows the buffer and moves data around */
    c->timeout_ns = 2000ull * 1000000ull; /* never reached: the stream ends with EOF */
    c->cap = depth;
    c->ring = calloc(c->cap, sizeof *c->ring);
    rs_error err = {0};
    if (!c->ring || rs_brpc_sock_add_user(c->s, c, &c->uid, &err)) abort();
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 60000) return 0; /* stays within the socketpair's buffer: no blocking write */
    fuzz_input in = {data, size};
    uint8_t shape = fuzz_u8(&in);
    uint32_t nreq = shape % FUZZ_MAX_REQ + 1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) abort();
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    brpc_cconn *c = conn_over(sv[0], nreq);

    uint64_t keys[8];
    float rows[8 * FUZZ_VS / 4];
    for (unsigned i = 0; i < 8; i++)
        keys[i] = i * 7 + 1;
    memset(rows, 0, sizeof rows);
    void *outs[FUZZ_MAX_REQ] = {0};
    size_t caps[FUZZ_MAX_REQ] = {0};
    uint32_t submitted = 0;
    for (uint32_t i = 0; i < nreq; i++) {
        uint8_t d = fuzz_u8(&in);
        rs_ps_request req = {.op = (rs_ps_op)(d % 4 + 1),
                             .value_size = FUZZ_VS,
                             .num_keys = (d >> 2) % 9,
                             .keys = (const uint8_t *)keys};
        if (req.op == RS_PS_PUT || req.op == RS_PS_UPDATE) {
            req.rows = (const uint8_t *)rows;
            req.rows_len = (size_t)req.num_keys * FUZZ_VS;
        }
        if (req.op == RS_PS_COMMAND) {
            req.num_keys = 0;
            req.command = "stats";
            req.command_len = 5;
        }
        caps[i] = req.op == RS_PS_GET ? (size_t)req.num_keys * FUZZ_VS : 0;
        outs[i] = caps[i] ? malloc(caps[i]) : NULL;
        rs_error err = {0};
        FUZZ_CHECK(rs_brpc_conn_ops.submit(c, &req, 100 + i, outs[i], caps[i], &err) == 0);
        submitted++;
    }
    /* the server's reply stream, then EOF */
    size_t n = in.left;
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(sv[1], in.p + off, n - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    shutdown(sv[1], SHUT_WR);

    int broken = 0;
    rs_error first = {0};
    for (uint32_t i = 0; i < submitted; i++) {
        rs_ps_completion comp;
        rs_error err = {0};
        int rc = rs_brpc_conn_ops.next(c, &comp, &err);
        if (rc) {
            FUZZ_CHECK(err.code == rc && strstr(err.msg, "fuzz-server") != NULL);
            FUZZ_CHECK(!broken || rc == first.code);
            if (!broken) first = err;
            broken = 1;
            continue;
        }
        FUZZ_CHECK(comp.tag == 100 + i);
        if (comp.resp.rows) {
            FUZZ_CHECK(comp.resp.rows == outs[i] && comp.resp.rows_len <= caps[i]);
            fuzz_touch(comp.resp.rows, comp.resp.rows_len);
        }
        FUZZ_CHECK(memchr(comp.resp.error, 0, sizeof comp.resp.error) != NULL);
    }
    for (uint32_t i = 0; i < nreq; i++)
        free(outs[i]);
    rs_brpc_conn_ops.close(c);
    close(sv[1]);
    return 0;
}

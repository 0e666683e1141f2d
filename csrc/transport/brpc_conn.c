/*
 * brpc_conn.c — the client side of the brpc transport: one TCP connection to one shard server,
 * speaking baidu_std (frame picture in brpc_frame.h).
 *
 * A connection is used by one thread. submit() writes the whole request frame (writev of
 * header + RpcMeta + PSRequest, keys, rows: no copy of keys or rows) and records it in a ring of
 * at most max_in_flight outstanding requests; next() reads responses, matches them to requests by
 * correlation id, and returns completions in submission order. A GET response's attachment is
 * received straight into the caller's rows buffer when it is not already buffered.
 *
 * The same connection speaks RecStore's wire when made through rs_brpc_rs_conn_ops
 * ("recstore+brpc"): requests become recstoreps_brpc.ParameterService calls of at most
 * RS_RSMSG_MAX_KEYS_PER_REQUEST keys, keys and row blocks in the attachment as RecStore's bRPC
 * client sends them (recstore_msg.c); the ring holds one entry per call (up to RS_BRPC_RS_CHUNKS
 * per request) and next() merges a request's calls, GET blocks decoded into the caller's rows.
 *
 * Waiting: the first receive of a next() that finds nothing begins a wait. The thread then receives
 * again in a loop for up to spin_us (transport option, default RS_BRPC_CLIENT_SPIN_US) from there,
 * then blocks in poll() for the rest of the wait. It spins only when no more of the process's
 * threads are waiting than it has CPUs, when it holds one of the process's spin slots
 * (recstore/spin.h), and while its connection's waits pay for a spin (adaptive spinning): a spin
 * that did not catch its answer, or during which the kernel switched the thread out for another
 * (its involuntary context switches, getrusage: the CPU it spun on was wanted, by the server's
 * threads or the process's own, and spinning there delays the answer it waits for), puts the
 * connection's count at its top; a wait longer than spin_us raises it by one; a wait that blocked
 * but was over within spin_us lowers it by one (a spin might have caught it), one caught by the
 * spin halves it; at RS_SPIN_QUICK_AFTER or more the thread blocks at once. So after a spin that
 * failed it takes several short waits in a row before the next, and no probe spins are needed.
 * At one client thread per core the answer comes within the spin: the thread does not sleep, and
 * the server's send of the answer does not have to wake it (an interrupt to the client's CPU; on a
 * VM an exit, and the halted CPU's way back). With more threads than cores nothing spins.
 * spin_us=0 blocks at once (docs/scale.md, "brpc clients spin before they block").
 *
 * The connection's TCP congestion control follows the option tcp_congestion (default auto: cubic
 * instead of a BBR when the server is on a loopback address; transport/tcp_congestion.h).
 *
 * A response carrying RpcMeta's CRC32C (a bRPC server set to checksum its responses) is verified
 * over the message as sent and, when checksum_with_attachment says so, the attachment
 * (brpc_checksum.c); a mismatch or an unknown checksum type is a malformed frame.
 *
 * Failure policy: a refused/reset/closed connection, a malformed response frame, or a timeout
 * marks the connection broken; every outstanding and later request then fails with the stored
 * reason (RS_ECONN / RS_ETIMEDOUT / RS_EPROTO), which names the server. Timeouts count from the
 * request's submission.
 */
#if RS_HAVE_PROTOBUF_C
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "recstore/auth.h"
#include "recstore/clock.h"
#include "recstore/cpu.h"
#include "recstore/crc32c.h"
#include "recstore/ps_budget.h"
#include "recstore/spin.h"
#include "recstore/transport.h"
#include "transport/brpc_frame.h"
#include "transport/net.h"
#include "transport/tcp_congestion.h"
#include "transport/transport_options.h"

#define RS_BRPC_CLIENT_READ_AHEAD 4096
/* RpcMeta and PSResponse are buffered; only GET rows (the attachment) can be large, and they go
 * straight into the caller's buffer, sized by the request. A server claiming more than this for
 * the buffered part is broken or hostile: refused before allocating. */
#define RS_BRPC_CLIENT_MAX_HEAD (1u << 20)
/* How long a client thread receives again before it blocks (transport option spin_us; the
 * largest accepted is a second). */
#define RS_BRPC_CLIENT_SPIN_US     100u
#define RS_BRPC_CLIENT_SPIN_US_MAX 1000000u
/* RecStore's wire: calls one request may take (so at most 32 x 500 keys per request). */
#define RS_BRPC_RS_CHUNKS 32

typedef struct pending {
    uint64_t tag;
    int64_t cid;
    uint64_t deadline_ns;
    rs_ps_op op;
    uint32_t num_keys;
    void *rows_out;
    size_t rows_cap;
    int done;
    rs_ps_completion comp;
    int rs_method; /* RecStore's wire: the call's rs_rsmsg_method */
    size_t rs_from, rs_keys, rs_vs;
    int last; /* RecStore's wire: the request's last call */
} pending;

typedef struct brpc_cconn {
    int fd;
    char peer[160]; /* "brpc://host:port" for messages */
    uint64_t timeout_ns;
    uint32_t cap, head, count;
    pending *ring;
    int64_t next_cid;
    uint8_t *in;
    size_t in_start, in_len, in_cap; /* buffered bytes are in[in_start .. in_start + in_len) */
    rs_brpc_arena arena;
    uint8_t *zbuf; /* inflated response messages (compress_type != 0) */
    size_t zcap;
    int recstore; /* RecStore's wire */
    uint32_t requests, max_requests;
    uint8_t *abuf; /* RecStore's wire: a request's message + attachment being sent */
    size_t acap;
    int broken;
    rs_error broken_err;
    rs_auth_token auth; /* sent in every request's RpcMeta.authentication_data; len 0: none */
    uint64_t spin_ns;   /* spin_us */
    rs_spin_streak streak;
    struct {
        int on, blocked, slot; /* a wait began in this next(); it blocked; holds a spin slot */
        int spins;             /* it may spin (took a slot) */
        uint64_t t0, spin_ns;  /* when it began; how long it may spin */
        long nivcsw;           /* the thread's involuntary context switches when it began */
    } w;
    rs_ps_wait_stats st;
} brpc_cconn;

/* Every request carries the deployment token when the client has one (RpcMeta field 7). */
static void meta_set_auth(brpc_cconn *c, Brpc__Policy__RpcMeta *meta) {
    if (!c->auth.len) return;
    meta->has_authentication_data = 1;
    meta->authentication_data.data = c->auth.bytes;
    meta->authentication_data.len = c->auth.len;
}

static int mark_broken(brpc_cconn *c, rs_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int mark_broken(brpc_cconn *c, rs_error *err, int code, const char *fmt, ...) {
    char why[RS_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!c->broken) {
        c->broken = 1;
        rs_error_set(&c->broken_err, code, "%s: %s", c->peer, why);
    }
    if (err) *err = c->broken_err;
    return c->broken_err.code;
}

static int broken_error(brpc_cconn *c, rs_error *err) {
    if (err) *err = c->broken_err;
    return c->broken_err.code;
}

/* The brpc client's transport options. Any other key is an error, not ignored. */
typedef struct client_opts {
    uint64_t spin_us;
    rs_tcp_cc tcp_cc;
} client_opts;

static int client_option(void *ctx, const char *key, const char *val, rs_error *err) {
    client_opts *o = ctx;
    if (strcmp(key, "spin_us") == 0)
        return rs_transport_option_u64("brpc client", key, val, 0, RS_BRPC_CLIENT_SPIN_US_MAX,
                                       &o->spin_us, err);
    if (strcmp(key, "tcp_congestion") == 0)
        return rs_tcp_cc_parse("brpc client", val, &o->tcp_cc, err);
    return rs_error_set(
        err, RS_EINVAL,
        "brpc client option '%s=%s' is unknown (the brpc client takes spin_us, tcp_congestion)",
        key, val);
}

static int connect_wire(const char *host, uint16_t port, const rs_ps_client_opts *opts,
                        int recstore, void **out, rs_error *err) {
    int rc;
    *out = NULL;
    client_opts o = {.spin_us = RS_BRPC_CLIENT_SPIN_US};
    if (opts &&
        (rc = rs_transport_options_each(opts->extra, "brpc client", client_option, &o, err)))
        return rc;
    brpc_cconn *c = calloc(1, sizeof *c);
    if (!c) return rs_error_set(err, RS_ENOMEM, "brpc connection");
    c->fd = -1;
    c->spin_ns = o.spin_us * 1000u;
    snprintf(c->peer, sizeof c->peer, "brpc://%s:%u", host, port);
    c->timeout_ns =
        (uint64_t)(opts && opts->timeout_ms ? opts->timeout_ms : RS_PS_DEFAULT_TIMEOUT_MS) *
        1000000ull;
    c->max_requests = opts && opts->max_in_flight ? opts->max_in_flight : 1;
    if (opts && opts->want_in_flight > c->max_requests)
        c->max_requests = opts->want_in_flight; /* the client's chunks of one batch */
    c->recstore = recstore;
    c->cap = c->max_requests * (recstore ? RS_BRPC_RS_CHUNKS : 1);
    if (opts && opts->auth) c->auth = *opts->auth;
    c->ring = calloc(c->cap, sizeof *c->ring);
    c->in_cap = 256 << 10;
    c->in = malloc(c->in_cap);
    if (!c->ring || !c->in) {
        rc = rs_error_set(err, RS_ENOMEM, "brpc connection buffers");
        goto fail;
    }
    rs_brpc_arena_init(&c->arena);

    if ((rc = rs_net_connect(host, port, (uint32_t)(c->timeout_ns / 1000000), RS_NET_NONBLOCK,
                             &c->fd, err))) {
        rs_error_prefix(err, "brpc");
        goto fail;
    }
    if ((rc = rs_tcp_cc_apply(c->fd, &o.tcp_cc, "brpc client", err)) < 0) goto fail;
    *out = c;
    return 0;
fail:
    if (c->fd >= 0) close(c->fd);
    free(c->in);
    free(c->ring);
    free(c);
    return rc;
}

static void brpc_close(void *conn) {
    brpc_cconn *c = conn;
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    free(c->in);
    free(c->zbuf);
    free(c->abuf);
    free(c->ring);
    free(c);
}

/* Write all of iov (modified in place) before deadline. */
static int write_all(brpc_cconn *c, struct iovec *iov, int n, uint64_t deadline, rs_error *err) {
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL); /* no SIGPIPE if the server went away */
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = rs_net_wait(c->fd, POLLOUT, deadline);
                if (rc == RS_ETIMEDOUT)
                    return mark_broken(c, err, RS_ETIMEDOUT, "sending a request timed out");
                if (rc) return mark_broken(c, err, RS_ECONN, "poll failed while sending");
                continue;
            }
            return mark_broken(c, err, RS_ECONN, "send failed: %s", strerror(errno));
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

static int brpc_connect(const char *host, uint16_t port, const rs_ps_client_opts *opts, void **out,
                        rs_error *err) {
    return connect_wire(host, port, opts, 0, out, err);
}

static int brpc_rs_connect(const char *host, uint16_t port, const rs_ps_client_opts *opts,
                           void **out, rs_error *err) {
    return connect_wire(host, port, opts, 1, out, err);
}

/* RecStore's wire: one call per chunk of at most RS_RSMSG_MAX_KEYS_PER_REQUEST keys. */
static int rs_submit(brpc_cconn *c, const rs_ps_request *req, uint64_t tag, void *rows_out,
                     size_t rows_cap, rs_error *err) {
    size_t n = req->op == RS_PS_COMMAND ? 1 : req->num_keys;
    size_t vs = !req->num_keys         ? 0
                : req->op == RS_PS_GET ? rows_cap / req->num_keys
                                       : req->rows_len / req->num_keys;
    size_t chunk = RS_RSMSG_MAX_KEYS_PER_REQUEST;
    if (req->op != RS_PS_COMMAND && (n == 0 || (req->op == RS_PS_GET && !vs)))
        return rs_error_set(err, RS_EINVAL, "%s: RecStore's wire has no request of 0 keys/rows",
                            c->peer);
    if ((n + chunk - 1) / chunk > RS_BRPC_RS_CHUNKS)
        return rs_error_set(err, RS_EINVAL,
                            "%s: %zu keys in one request; recstore+brpc sends at most %u calls of "
                            "%zu keys per request",
                            c->peer, n, RS_BRPC_RS_CHUNKS, chunk);
    if (c->requests == c->max_requests)
        return rs_error_set(err, RS_EBUSY, "%s: %u requests already in flight (max_in_flight)",
                            c->peer, c->max_requests);
    for (size_t from = 0; from < n; from += chunk) {
        size_t m = n - from < chunk ? n - from : chunk;
        rs_rsmsg_client_req cr;
        int rc = rs_rsmsg_client_size(req, from, m, "default", 1, &cr, err);
        if (rc) return rc;
        size_t need = cr.msg_len + cr.att_len;
        if (need > c->acap) {
            uint8_t *b = realloc(c->abuf, need);
            if (!b) return rs_error_set(err, RS_ENOMEM, "%s: no memory for a request", c->peer);
            c->abuf = b;
            c->acap = need;
        }
        rs_rsmsg_client_encode(req, from, m, "default", 1, c->abuf, c->abuf + cr.msg_len);
        Brpc__Policy__RpcMeta meta = BRPC__POLICY__RPC_META__INIT;
        Brpc__Policy__RpcRequestMeta rmeta = BRPC__POLICY__RPC_REQUEST_META__INIT;
        rmeta.service_name = (char *)RS_BRPC_RECSTORE_SERVICE;
        rmeta.method_name = (char *)rs_rsmsg_method_name(cr.method);
        meta.request = &rmeta;
        meta.has_correlation_id = 1;
        meta.correlation_id = ++c->next_cid;
        meta_set_auth(c, &meta);
        if (cr.att_len) {
            meta.has_attachment_size = 1;
            meta.attachment_size = (int32_t)cr.att_len;
        }
        size_t meta_len = brpc__policy__rpc_meta__get_packed_size(&meta);
        uint8_t head[RS_BRPC_HEADER_BYTES + 256 + RS_AUTH_TOKEN_MAX + 4];
        rs_brpc_header_write(head, (uint32_t)(meta_len + need), (uint32_t)meta_len);
        brpc__policy__rpc_meta__pack(&meta, head + RS_BRPC_HEADER_BYTES);
        struct iovec iov[2] = {{head, RS_BRPC_HEADER_BYTES + meta_len}, {c->abuf, need}};
        uint64_t now = rs_now_ns();
        if ((rc = write_all(c, iov, need ? 2 : 1, now + c->timeout_ns, err))) {
            if (from == 0) return rc;
            /* earlier calls were sent: the request ends there, next() reports the broken
             * connection */
            c->ring[(c->head + c->count - 1) % c->cap].last = 1;
            break;
        }
        pending *p = &c->ring[(c->head + c->count) % c->cap];
        p->tag = tag;
        p->cid = meta.correlation_id;
        p->deadline_ns = now + c->timeout_ns;
        p->op = req->op;
        p->num_keys = (uint32_t)m;
        p->rows_out = rows_out;
        p->rows_cap = rows_cap;
        p->done = 0;
        p->rs_method = (int)cr.method;
        p->rs_from = from;
        p->rs_keys = m;
        p->rs_vs = vs;
        p->last = from + m >= n;
        c->count++;
    }
    c->requests++;
    return 0;
}

static int brpc_submit(void *conn, const rs_ps_request *req, uint64_t tag, void *rows_out,
                       size_t rows_cap, rs_error *err) {
    brpc_cconn *c = conn;
    if (c->broken) return broken_error(c, err);
    if (c->recstore) return rs_submit(c, req, tag, rows_out, rows_cap, err);
    if (c->count == c->cap)
        return rs_error_set(err, RS_EBUSY, "%s: %u requests already in flight (max_in_flight)",
                            c->peer, c->cap);
    size_t keys_len = (size_t)req->num_keys * 8;
    size_t att = keys_len + req->rows_len;
    if (att > INT32_MAX)
        return rs_error_set(err, RS_EINVAL, "%s: request of %zu bytes is too large", c->peer, att);

    Brpc__Policy__RpcMeta meta = BRPC__POLICY__RPC_META__INIT;
    Brpc__Policy__RpcRequestMeta rmeta = BRPC__POLICY__RPC_REQUEST_META__INIT;
    rmeta.service_name = (char *)RS_BRPC_SERVICE;
    rmeta.method_name = (char *)rs_ps_op_method(req->op);
    meta.request = &rmeta;
    meta.has_correlation_id = 1;
    meta.correlation_id = ++c->next_cid;
    meta_set_auth(c, &meta);
    if (att) {
        meta.has_attachment_size = 1;
        meta.attachment_size = (int32_t)att;
    }
    size_t meta_len = brpc__policy__rpc_meta__get_packed_size(&meta);
    size_t msg_len = rs_ps_request_encoded_size(req, 1);
    uint8_t head[RS_BRPC_HEADER_BYTES + 256 + 64 + RS_AUTH_TOKEN_MAX + 4];
    if (meta_len + msg_len + RS_BRPC_HEADER_BYTES > sizeof head) /* commands are short words */
        return rs_error_set(err, RS_EINVAL, "%s: command of %zu bytes is too long", c->peer,
                            req->command_len);
    rs_brpc_header_write(head, (uint32_t)(meta_len + msg_len + att), (uint32_t)meta_len);
    brpc__policy__rpc_meta__pack(&meta, head + RS_BRPC_HEADER_BYTES);
    rs_ps_request_encode(req, 1, head + RS_BRPC_HEADER_BYTES + meta_len);

    struct iovec iov[3];
    int n = 0;
    iov[n++] = (struct iovec){head, RS_BRPC_HEADER_BYTES + meta_len + msg_len};
    if (keys_len) iov[n++] = (struct iovec){(void *)req->keys, keys_len};
    if (req->rows_len) iov[n++] = (struct iovec){(void *)req->rows, req->rows_len};
    uint64_t now = rs_now_ns();
    int rc = write_all(c, iov, n, now + c->timeout_ns, err);
    if (rc) return rc;

    pending *p = &c->ring[(c->head + c->count) % c->cap];
    p->tag = tag;
    p->cid = meta.correlation_id;
    p->deadline_ns = now + c->timeout_ns;
    p->op = req->op;
    p->num_keys = req->num_keys;
    p->rows_out = rows_out;
    p->rows_cap = rows_cap;
    p->done = 0;
    p->rs_method = -1;
    p->last = 1;
    c->count++;
    c->requests++;
    return 0;
}

/* The calling thread's involuntary context switches so far (0 if unknown). */
static long thread_nivcsw(void) {
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

/* A wait begins (file comment: Waiting): how long it may spin, and with a spin slot or not. */
static void wait_begin(brpc_cconn *c) {
    c->w.on = 1;
    c->w.blocked = 0;
    c->w.slot = 0;
    c->w.spins = 0;
    c->w.t0 = rs_now_ns();
    c->w.spin_ns = c->spin_ns;
    if (!c->w.spin_ns) return; /* spin_us=0: not one of the process's waiters either */
    if (rs_spin_waiters_enter() > rs_cpu_count()) {
        c->w.spin_ns = 0; /* more waiters than CPUs: none of them spins */
        c->st.unspun++;
    } else if (rs_spin_streak_high(&c->streak)) {
        c->w.spin_ns = 0; /* its recent waits did not pay for a spin */
        c->st.quick++;
    } else if (!(c->w.slot = rs_spin_slot_take())) {
        c->w.spin_ns = 0;
        c->st.unspun++;
    } else {
        c->w.spins = 1;
        c->w.nivcsw = thread_nivcsw();
    }
}

/* The wait of this next() (if it had one) is over: count how it ended, and move the connection's
 * count of waits that did not pay for a spin (file comment: Waiting). */
static void wait_end(brpc_cconn *c) {
    if (!c->w.on) return;
    c->w.on = 0;
    rs_spin_slot_give(&c->w.slot);
    if (c->spin_ns) rs_spin_waiters_leave();
    c->st.blocked += c->w.blocked;
    c->st.spun += !c->w.blocked;
    int preempted = c->w.spins && thread_nivcsw() != c->w.nivcsw;
    c->st.preempted += preempted;
    if (c->w.spins && (preempted || c->w.blocked))
        rs_spin_streak_failed(&c->streak); /* a spin that did not pay */
    else if (!c->w.blocked)
        rs_spin_streak_spun(&c->streak);
    else if (rs_now_ns() - c->w.t0 > c->spin_ns)
        rs_spin_streak_blocked(&c->streak);
    else
        rs_spin_streak_short(&c->streak); /* a spin might have caught it */
}

/* One receive step into the iovecs: the bytes received (> 0); 0 when nothing arrived yet and the
 * caller should try again (EINTR, or the socket became readable before the deadline); or a
 * negative code after marking the connection broken (peer closed, error, deadline). Finding
 * nothing, it spins (receives again) while the wait may, then blocks in poll(). */
static ssize_t recv_stepv(brpc_cconn *c, struct iovec *iov, size_t n, uint64_t deadline,
                          rs_error *err) {
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
    for (;;) {
        ssize_t r = recvmsg(c->fd, &mh, 0);
        if (r > 0) return r;
        if (r == 0)
            return mark_broken(c, err, RS_ECONN,
                               "connection closed by the server with %u request(s) outstanding",
                               c->count);
        if (errno == EINTR) return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return mark_broken(c, err, RS_ECONN, "receive failed: %s", strerror(errno));
        if (!c->w.on) wait_begin(c);
        if (c->w.blocked || !c->w.spin_ns || rs_now_ns() - c->w.t0 >= c->w.spin_ns) break;
        rs_cpu_relax();
    }
    rs_spin_slot_give(&c->w.slot);
    c->w.blocked = 1;
    int rc = rs_net_wait(c->fd, POLLIN, deadline);
    if (rc == RS_ETIMEDOUT)
        return mark_broken(c, err, RS_ETIMEDOUT, "no response within %llu ms",
                           (unsigned long long)(c->timeout_ns / 1000000));
    if (rc) return mark_broken(c, err, RS_ECONN, "poll failed while receiving");
    return 0;
}

static ssize_t recv_step(brpc_cconn *c, uint8_t *buf, size_t len, uint64_t deadline,
                         rs_error *err) {
    struct iovec iov = {buf, len};
    return recv_stepv(c, &iov, 1, deadline, err);
}

static int fill(brpc_cconn *c, size_t want, uint64_t deadline, rs_error *err) {
    if (c->in_len >= want) return 0;
    if (c->in_start + want > c->in_cap) {
        memmove(c->in, c->in + c->in_start, c->in_len);
        c->in_start = 0;
        if (want > c->in_cap) {
            size_t cap = c->in_cap;
            while (cap < want)
                cap *= 2;
            uint8_t *p = realloc(c->in, cap);
            if (!p)
                return mark_broken(c, err, RS_ENOMEM, "no memory for a %zu-byte response", want);
            c->in = p;
            c->in_cap = cap;
        }
    }
    while (c->in_len < want) {
        size_t off = c->in_start + c->in_len;
        /* read little beyond what is needed: a GET's rows are then received straight into the
         * caller's buffer by recv_into instead of being copied out of this one */
        size_t room = c->in_cap - off, ask = want - c->in_len;
        if (ask < RS_BRPC_CLIENT_READ_AHEAD) ask = RS_BRPC_CLIENT_READ_AHEAD;
        ssize_t r = recv_step(c, c->in + off, ask < room ? ask : room, deadline, err);
        if (r < 0) return (int)r;
        c->in_len += (size_t)r;
    }
    return 0;
}

/* Receive exactly len bytes into dst, first from the buffer, then from the socket directly. */
static int recv_into(brpc_cconn *c, uint8_t *dst, size_t len, uint64_t deadline, rs_error *err) {
    size_t from_buf = c->in_len < len ? c->in_len : len;
    memcpy(dst, c->in + c->in_start, from_buf);
    c->in_start += from_buf;
    c->in_len -= from_buf;
    size_t got = from_buf;
    while (got < len) {
        ssize_t r = recv_step(c, dst + got, len - got, deadline, err);
        if (r < 0) return (int)r;
        got += (size_t)r;
    }
    return 0;
}

static int map_error_code(int code) {
    switch (code) {
    case RS_BRPC_ENOSERVICE:
    case RS_BRPC_ENOMETHOD: return RS_PS_UNKNOWN_METHOD;
    case RS_BRPC_EREQUEST: return RS_PS_INVALID_PAYLOAD;
    case RS_BRPC_EAUTH: return RS_PS_UNAUTHENTICATED;
    default: return RS_PS_INTERNAL;
    }
}

/* Read one response frame and complete its pending request. */
static int read_one(brpc_cconn *c, uint64_t deadline, rs_error *err) {
    rs_error perr = {0};
    int rc = fill(c, RS_BRPC_HEADER_BYTES, deadline, err);
    if (rc) return rc;
    rs_brpc_header hdr;
    if (rs_brpc_header_parse(c->in + c->in_start, RS_PS_MAX_REPLY_BYTES, &hdr, &perr))
        return mark_broken(c, err, RS_EPROTO, "bad response frame: %s", perr.msg);
    if (hdr.meta_size > RS_BRPC_CLIENT_MAX_HEAD)
        return mark_broken(c, err, RS_EPROTO, "bad response frame: meta_size %u exceeds %u bytes",
                           hdr.meta_size, RS_BRPC_CLIENT_MAX_HEAD);
    /* buffer meta + message; the attachment may go straight to the caller's rows */
    rc = fill(c, RS_BRPC_HEADER_BYTES + hdr.meta_size, deadline, err);
    if (rc) return rc;
    Brpc__Policy__RpcMeta *meta = NULL;
    if (rs_brpc_meta_unpack(&c->arena, c->in + c->in_start + RS_BRPC_HEADER_BYTES, hdr.meta_size,
                            &meta, &perr))
        return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
    size_t att = meta->has_attachment_size ? (size_t)(uint32_t)meta->attachment_size : 0;
    int64_t cid = meta->has_correlation_id ? meta->correlation_id : -1;
    int ecode = meta->response && meta->response->has_error_code ? meta->response->error_code : 0;
    char etext[256] = "";
    if (ecode && meta->response->error_text)
        snprintf(etext, sizeof etext, "%s", meta->response->error_text);
    int bad_att = meta->has_attachment_size && meta->attachment_size < 0;
    int ctype = meta->has_compress_type ? meta->compress_type : RS_BRPC_COMPRESS_NONE;
    rs_brpc_checksum ck;
    int bad_meta =
        rs_brpc_content_type_check(meta, &perr) || rs_brpc_checksum_read(meta, &ck, &perr);
    rs_brpc_meta_free(&c->arena, meta);
    if (bad_meta) return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
    if (bad_att || att > (size_t)hdr.body_size - hdr.meta_size)
        return mark_broken(c, err, RS_EPROTO, "bad response: attachment_size %zu > body", att);
    pending *p = NULL;
    for (uint32_t i = 0; i < c->count; i++) {
        pending *q = &c->ring[(c->head + i) % c->cap];
        if (!q->done && q->cid == cid) {
            p = q;
            break;
        }
    }
    if (!p)
        return mark_broken(c, err, RS_EPROTO, "response with unknown correlation id %lld",
                           (long long)cid);
    size_t msg_len = hdr.body_size - hdr.meta_size - att;
    if (p->rs_method >= 0) {
        /* RecStore's wire: the frame is received whole into the input buffer (one large copy out
         * of the socket, as the native wire's rows), then the block is checked and its rows copied
         * to the caller's in one pass (rs_rsblock_read_rows). Receiving each item's floats
         * straight into its row instead takes two pieces per key (12-byte head, row): the
         * kernel's per-piece cost made that 3x the copy (docs/recstore-wire.md, Performance). */
        size_t frame = RS_BRPC_HEADER_BYTES + (size_t)hdr.body_size;
        rc = fill(c, frame, deadline, err);
        if (rc) return rc;
        const uint8_t *m = c->in + c->in_start + RS_BRPC_HEADER_BYTES + hdr.meta_size;
        size_t mlen = msg_len;
        if (rs_brpc_checksum_verify(&ck, m, msg_len, m + msg_len, att, &perr))
            return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
        if (ctype != RS_BRPC_COMPRESS_NONE) {
            if (rs_brpc_decompress(ctype, m, msg_len, RS_BRPC_CLIENT_MAX_HEAD, &c->zbuf, &c->zcap,
                                   &mlen, &perr))
                return mark_broken(c, err, RS_EPROTO, "response message: %s", perr.msg);
            m = c->zbuf;
        }
        rs_ps_response *resp = &p->comp.resp;
        if (ecode) {
            memset(resp, 0, offsetof(rs_ps_response, error));
            resp->status = ecode == 22 ? RS_PS_INVALID_PAYLOAD : map_error_code(ecode);
            snprintf(resp->error, sizeof resp->error, "error %d: %s", ecode, etext);
            resp->reply[0] = 0;
        } else if (rs_rsmsg_client_decode(
                       (rs_rsmsg_method)p->rs_method, m, mlen,
                       c->in + c->in_start + RS_BRPC_HEADER_BYTES + hdr.meta_size + msg_len, att,
                       p->rs_keys, (uint32_t)p->rs_vs,
                       p->rows_out ? (uint8_t *)p->rows_out + p->rs_from * p->rs_vs : NULL, resp,
                       &perr)) {
            return mark_broken(c, err, RS_EPROTO, "bad %s reply: %s",
                               rs_rsmsg_method_name((rs_rsmsg_method)p->rs_method), perr.msg);
        }
        c->in_start += frame;
        c->in_len -= frame;
        p->comp.tag = p->tag;
        p->done = 1;
        return 0;
    }
    if (msg_len > RS_BRPC_CLIENT_MAX_HEAD)
        return mark_broken(c, err, RS_EPROTO, "bad response: PSResponse of %zu bytes exceeds %u",
                           msg_len, RS_BRPC_CLIENT_MAX_HEAD);
    rc = fill(c, RS_BRPC_HEADER_BYTES + hdr.meta_size + msg_len, deadline, err);
    if (rc) return rc;
    const uint8_t *msg = c->in + c->in_start + RS_BRPC_HEADER_BYTES + hdr.meta_size;
    size_t raw_len = msg_len;
    /* the CRC runs over the message as sent, then (if asked) over the rows once received */
    uint32_t crc = ck.type ? rs_crc32c(0, msg, raw_len) : 0;
    if (ck.type && !(ck.with_attachment && att) &&
        rs_brpc_checksum_check(&ck, crc, raw_len, 0, &perr))
        return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
    if (ctype != RS_BRPC_COMPRESS_NONE) { /* a bRPC server that compresses its responses */
        if (rs_brpc_decompress(ctype, msg, raw_len, RS_BRPC_CLIENT_MAX_HEAD, &c->zbuf, &c->zcap,
                               &msg_len, &perr))
            return mark_broken(c, err, RS_EPROTO, "response message: %s", perr.msg);
        msg = c->zbuf;
    }
    rs_ps_response *resp = &p->comp.resp;
    /* decode the message with a placeholder attachment: the rows are placed below */
    static const uint8_t placeholder[1];
    if (rs_ps_response_decode(msg, msg_len, att ? placeholder : NULL, att, resp, &perr))
        return mark_broken(c, err, RS_EPROTO, "bad PSResponse: %s", perr.msg);
    if (!att && resp->rows_len) { /* rows in PSResponse.rows (a server not using attachments) */
        if (p->op != RS_PS_GET || resp->rows_len > p->rows_cap || !p->rows_out)
            return mark_broken(c, err, RS_EPROTO,
                               "response carries %zu bytes of rows; %zu expected for %s",
                               resp->rows_len, p->rows_cap, rs_ps_op_method(p->op));
        memcpy(p->rows_out, resp->rows, resp->rows_len); /* before the buffer is reused */
    }
    c->in_start += RS_BRPC_HEADER_BYTES + hdr.meta_size + raw_len;
    c->in_len -= RS_BRPC_HEADER_BYTES + hdr.meta_size + raw_len;
    resp->rows = !att && resp->rows_len ? p->rows_out : NULL;
    if (att) {
        if (p->op != RS_PS_GET || att > p->rows_cap || !p->rows_out)
            return mark_broken(c, err, RS_EPROTO,
                               "response carries %zu bytes of rows; %zu expected for %s", att,
                               p->rows_cap, rs_ps_op_method(p->op));
        rc = recv_into(c, p->rows_out, att, deadline, err);
        if (rc) return rc;
        if (ck.type && ck.with_attachment &&
            rs_brpc_checksum_check(&ck, rs_crc32c(crc, p->rows_out, att), raw_len, att, &perr))
            return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
        resp->rows = p->rows_out;
    }
    if (ecode) {
        resp->status = map_error_code(ecode);
        snprintf(resp->error, sizeof resp->error, "%s", etext);
    }
    p->comp.tag = p->tag;
    p->done = 1;
    return 0;
}

static int next_reply(brpc_cconn *c, rs_ps_completion *out, rs_error *err) {
    if (c->count == 0)
        return rs_error_set(err, RS_EINVAL, "%s: next() with no request outstanding", c->peer);
    c->requests--;
    if (c->recstore) { /* merge the request's calls */
        uint32_t found = 0;
        int status = RS_PS_OK;
        char error[256] = "";
        for (;;) {
            pending *p = &c->ring[c->head];
            while (!p->done && !c->broken)
                if (read_one(c, p->deadline_ns, err)) break;
            int last = p->last;
            c->head = (c->head + 1) % c->cap;
            c->count--;
            if (!p->done) {
                while (!last) { /* drop the request's other calls: the connection is broken */
                    last = c->ring[c->head].last;
                    c->head = (c->head + 1) % c->cap;
                    c->count--;
                }
                return broken_error(c, err);
            }
            found += p->comp.resp.num_found;
            if (p->comp.resp.status != RS_PS_OK && status == RS_PS_OK) {
                status = p->comp.resp.status;
                snprintf(error, sizeof error, "%s", p->comp.resp.error);
            }
            if (last) {
                memcpy(out, &p->comp, sizeof *out);
                break;
            }
        }
        out->resp.status = status;
        out->resp.num_found = found;
        snprintf(out->resp.error, sizeof out->resp.error, "%s", error);
        out->resp.rows = NULL;
        return 0;
    }
    pending *p = &c->ring[c->head];
    while (!p->done) {
        if (c->broken) break;
        if (read_one(c, p->deadline_ns, err)) break;
    }
    if (!p->done) {
        /* the connection is broken: fail this request (and, on later calls, the others) */
        c->head = (c->head + 1) % c->cap;
        c->count--;
        return broken_error(c, err);
    }
    memcpy(out, &p->comp, sizeof *out);
    c->head = (c->head + 1) % c->cap;
    c->count--;
    return 0;
}

static int brpc_next(void *conn, rs_ps_completion *out, rs_error *err) {
    brpc_cconn *c = conn;
    int rc = next_reply(c, out, err);
    wait_end(c);
    return rc;
}

static void brpc_wait_stats(void *conn, rs_ps_wait_stats *out) {
    const brpc_cconn *c = conn;
    out->spun += c->st.spun;
    out->blocked += c->st.blocked;
    out->quick += c->st.quick;
    out->unspun += c->st.unspun;
    out->preempted += c->st.preempted;
}

const rs_ps_conn_ops rs_brpc_conn_ops = {
    .name = "brpc",
    .connect = brpc_connect,
    .submit = brpc_submit,
    .next = brpc_next,
    .close = brpc_close,
    .budget_per_cpu = RS_PS_BUDGET_BRPC_PER_CPU,
    .wait_stats = brpc_wait_stats,
};

/* RecStore's wire on the same connection code ("recstore+brpc"). */
const rs_ps_conn_ops rs_brpc_rs_conn_ops = {
    .name = "recstore+brpc",
    .connect = brpc_rs_connect,
    .submit = brpc_submit,
    .next = brpc_next,
    .close = brpc_close,
    .budget_per_cpu = RS_PS_BUDGET_BRPC_PER_CPU,
    .wait_stats = brpc_wait_stats,
};
#endif

/*
 * brpc_server.c — the PS server side of the brpc transport: bRPC's baidu_std protocol over TCP.
 *
 * Threads: num_threads epoll workers. The listening socket sits in every worker's epoll set with
 * EPOLLEXCLUSIVE. The worker that accepts a connection gives it to the worker that owns the fewest
 * (itself on a tie): through that worker's inbox and its own eventfd, and that worker then owns it
 * for its lifetime, so a connection's state is touched by one thread only. (Keeping every
 * connection where it was accepted let one worker take all of a burst of connects: 16 clients on
 * 2 workers came out 16/0 in one start of three.) An eventfd in every set wakes all workers for
 * stop(). epoll_wait blocks without a timeout: an idle server uses no CPU.
 *
 * Per connection: an input buffer of whole frames, handled in arrival order (pipelining), and an
 * output arena. For each request the GET rows are written by the shard handler straight into the
 * output arena, the response head (baidu_std header + RpcMeta + PSResponse) is appended after
 * them, and the pair is queued as two iovecs (head, rows) for one writev of all ready responses.
 * A connection holds an output arena only while it has output queued: once everything is sent the
 * arena goes back to its worker, whose next reply on any connection takes the hottest one.
 *
 * Failure policy: a frame that cannot be parsed (bad magic, body over max_body_bytes, meta_size >
 * body_size, RpcMeta that does not parse or lacks the request part, attachment larger than the
 * body) closes that connection only. A well-framed request with an unknown service or method or a
 * PSRequest that does not decode gets an error response (RpcResponseMeta.error_code/error_text);
 * PS-level errors travel in PSResponse.status/error. Sizes are checked before allocating.
 * The same port serves RecStore's recstoreps_brpc.ParameterService (brpc_recstore.c). A request
 * whose RpcMeta.compress_type is snappy, gzip or zlib is inflated first (brpc_compress.c) and
 * answered uncompressed; other values get an EREQUEST error naming the value. A CRC32C in
 * RpcMeta.checksum_type/checksum_value is verified before that (brpc_checksum.c); a mismatch, a
 * malformed value, another checksum type or a non-protobuf content_type gets an EREQUEST error
 * naming the field, and the request is not applied.
 * Backpressure: a connection whose unsent output reaches max_pending_bytes (transport option,
 * default 64 MiB) is not read until it drains, which bounds the requests in flight per connection
 * by their response bytes. Limits:
 * max_connections (default 1024) connections at once, more are accepted and closed; when the
 * process runs out of descriptors, pending connections are shed through a reserved descriptor
 * instead of leaving the listening socket readable (a busy loop).
 * The listening socket takes the option tcp_congestion (default auto: cubic instead of a BBR when
 * it is bound to a loopback address), and the connections it accepts inherit it
 * (transport/tcp_congestion.h).
 */
#if RS_HAVE_PROTOBUF_C
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "recstore/auth.h"
#include "recstore/transport.h"
#include "transport/accept_shed.h"
#include "transport/brpc_frame.h"
#include "transport/net.h"
#include "transport/tcp_congestion.h"
#include "transport/transport_options.h"

#define RS_BRPC_HEAD_MAX   4096 /* header + RpcMeta + PSResponse head, bounded by error/reply */
#define RS_BRPC_OUT_LIMIT  (64ull << 20) /* default max_pending_bytes */
#define RS_BRPC_IN_INITIAL (64u << 10)
#define RS_BRPC_KEEP_BYTES (4u << 20) /* larger idle buffers are released after use */
#define RS_BRPC_SPARE_OUTS 2          /* drained output buffers a worker keeps for the next reply */
#define RS_BRPC_FLUSH_EARLY                                                                        \
    (64u << 10) /* queued reply bytes that are sent before the next request */

typedef struct out_seg {
    size_t off, len;
} out_seg;

struct brpc_worker;

typedef struct brpc_sconn {
    int fd;
    uint32_t events; /* currently registered epoll events */
    struct brpc_worker *w;
    struct brpc_sconn *prev, *next;
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out;
    size_t out_len, out_cap;
    out_seg *segs;
    size_t nsegs, segs_cap, seg_pos, seg_done; /* seg_done: bytes of segs[seg_pos] already sent */
    size_t out_pending;                        /* unsent bytes */
    unsigned auth_failures;                    /* refused requests (closed at the limit) */
} brpc_sconn;

typedef struct brpc_worker {
    pthread_t thread;
    int epfd;
    unsigned index;
    struct brpc_server *srv;
    brpc_sconn *conns;
    uint32_t owned; /* atomic: connections this worker owns or has in its inbox */
    int inbox_fd;   /* eventfd in this worker's set: its inbox has connections to adopt */
    pthread_mutex_t inbox_mu;
    int *inbox; /* accepted descriptors handed to this worker by another */
    unsigned inbox_len, inbox_cap;
    /* Output buffers of connections that had sent everything, most recently used last: the next
     * reply of any of this worker's connections is built in the hottest one, so a worker serving
     * many connections in turn writes one buffer that stays in its cache instead of one per
     * connection (16 connections of 256 KiB replies on 2 workers: 8 buffers each, past L2). */
    uint8_t *spare[RS_BRPC_SPARE_OUTS];
    size_t spare_cap[RS_BRPC_SPARE_OUTS];
    unsigned nspare;
    rs_brpc_arena arena;
    uint8_t *zbuf; /* inflated request messages (compress_type != 0) */
    size_t zcap;
    /* counters: written by this worker only, read by stats() */
    uint64_t accepted, closed, requests, bad_frames, bytes_in, bytes_out, auth_failures;
} __attribute__((aligned(64))) brpc_worker;

typedef struct brpc_server {
    int lfd, stopfd;
    uint16_t port;
    rs_ps_shard *shard;
    rs_rsps *rsps; /* recstoreps_brpc.ParameterService on the shard */
    rs_rsps_optimizer
        opt; /* its UpdateParameter optimizer (optimizer=, learning_rate=, epsilon=) */
    uint64_t max_body;
    uint64_t out_limit; /* max_pending_bytes: unsent reply bytes that pause reading a connection */
    rs_tcp_cc tcp_cc;   /* tcp_congestion: set on the listener, which its connections inherit */
    uint32_t max_conns;
    uint32_t open_conns; /* atomic */
    int spare_fd;        /* atomic; a reserved descriptor (/dev/null) that lets accept shed a
                          * connection when the process has no descriptor left */
    unsigned nworkers, started;
    brpc_worker *workers;
    rs_auth_token auth; /* len 0: none required */
} brpc_server;

static void wcount(uint64_t *c, uint64_t n) {
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* ---- connection lifecycle -------------------------------------------------------------------- */

/* A connection counts in open_conns and in its worker's owned from accept (claim) until it is
 * closed or could not be adopted (unclaim). */
static void claim(brpc_worker *w) {
    __atomic_add_fetch(&w->srv->open_conns, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w->owned, 1, __ATOMIC_RELAXED);
}

static void unclaim(brpc_worker *w) {
    __atomic_sub_fetch(&w->srv->open_conns, 1, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&w->owned, 1, __ATOMIC_RELAXED);
}

static void conn_close(brpc_sconn *c) {
    brpc_worker *w = c->w;
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    unclaim(w);
    wcount(&w->closed, 1);
    free(c->in);
    free(c->out);
    free(c->segs);
    free(c);
}

static int conn_set_events(brpc_sconn *c, uint32_t ev) {
    if (ev == c->events) return 0;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &e)) return -1;
    c->events = ev;
    return 0;
}

/* A connection claimed for w becomes w's: it joins w's epoll set and list. Runs on w's thread
 * only. On failure the descriptor is closed and the claim given back. */
static void conn_adopt(brpc_worker *w, int fd) {
    brpc_sconn *c = calloc(1, sizeof *c);
    if (c) {
        c->fd = fd;
        c->w = w;
        c->events = EPOLLIN;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &e) == 0) {
            c->next = w->conns;
            if (w->conns) w->conns->prev = c;
            w->conns = c;
            wcount(&w->accepted, 1);
            return;
        }
        free(c);
    }
    close(fd);
    unclaim(w);
}

/* The worker owning the fewest connections; the caller on a tie (no hand-off needed). */
static brpc_worker *least_owned(brpc_server *s, brpc_worker *self) {
    brpc_worker *best = self;
    uint32_t n = __atomic_load_n(&self->owned, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < s->nworkers; i++) {
        uint32_t m = __atomic_load_n(&s->workers[i].owned, __ATOMIC_RELAXED);
        if (m < n) {
            n = m;
            best = &s->workers[i];
        }
    }
    return best;
}

/* Queue fd for worker t and wake it. Returns -1 when the inbox cannot grow. */
static int inbox_push(brpc_worker *t, int fd) {
    int rc = 0;
    pthread_mutex_lock(&t->inbox_mu);
    if (t->inbox_len == t->inbox_cap) {
        unsigned cap = t->inbox_cap ? t->inbox_cap * 2 : 16;
        int *p = realloc(t->inbox, cap * sizeof *p);
        if (p) {
            t->inbox = p;
            t->inbox_cap = cap;
        }
    }
    if (t->inbox_len < t->inbox_cap)
        t->inbox[t->inbox_len++] = fd;
    else
        rc = -1;
    pthread_mutex_unlock(&t->inbox_mu);
    uint64_t one = 1;
    if (rc == 0 && write(t->inbox_fd, &one, sizeof one) < 0) { /* eventfd: cannot fail here */
    }
    return rc;
}

/* Adopt what other workers handed to w. */
static void inbox_take(brpc_worker *w) {
    uint64_t v;
    if (read(w->inbox_fd, &v, sizeof v) < 0) { /* EAGAIN: another event already emptied it */
    }
    pthread_mutex_lock(&w->inbox_mu);
    for (unsigned i = 0; i < w->inbox_len; i++)
        conn_adopt(w, w->inbox[i]);
    w->inbox_len = 0;
    pthread_mutex_unlock(&w->inbox_mu);
}

static void accept_all(brpc_worker *w) {
    brpc_server *s = w->srv;
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* out of descriptors: shed the connection rather than spin on the listener */
            if ((errno == EMFILE || errno == ENFILE) &&
                rs_accept_shed_one(s->lfd, &s->spare_fd) == 0)
                continue;
            return; /* EAGAIN (another worker took it) or a transient error */
        }
        if (s->max_conns && __atomic_load_n(&s->open_conns, __ATOMIC_RELAXED) >= s->max_conns) {
            close(fd);
            continue;
        }
        rs_net_set_nodelay(fd, NULL);
        brpc_worker *t = least_owned(s, w);
        claim(t);
        if (t == w) {
            conn_adopt(w, fd);
        } else if (inbox_push(t, fd)) {
            close(fd);
            unclaim(t);
        }
    }
}

/* ---- output ---------------------------------------------------------------------------------- */

static int out_reserve(brpc_sconn *c, size_t more) {
    brpc_worker *w = c->w;
    if (!c->out && w->nspare) { /* nothing pending: take the worker's hottest buffer */
        w->nspare--;
        c->out = w->spare[w->nspare];
        c->out_cap = w->spare_cap[w->nspare];
    }
    if (c->out_len + more <= c->out_cap) return 0;
    size_t cap = c->out_cap ? c->out_cap : 64 << 10;
    while (cap < c->out_len + more)
        cap *= 2;
    uint8_t *p = realloc(c->out, cap);
    if (!p) return -1;
    c->out = p;
    c->out_cap = cap;
    return 0;
}

static int seg_push(brpc_sconn *c, size_t off, size_t len) {
    if (!len) return 0;
    if (c->nsegs == c->segs_cap) {
        size_t cap = c->segs_cap ? c->segs_cap * 2 : 64;
        out_seg *p = realloc(c->segs, cap * sizeof *p);
        if (!p) return -1;
        c->segs = p;
        c->segs_cap = cap;
    }
    c->segs[c->nsegs++] = (out_seg){off, len};
    c->out_pending += len;
    return 0;
}

/* Write queued output. Returns -1 when the connection failed (caller closes it). */
static int conn_flush(brpc_sconn *c) {
    while (c->seg_pos < c->nsegs) {
        struct iovec iov[256]; /* <= IOV_MAX (1024 on Linux) */
        int n = 0;
        for (size_t i = c->seg_pos; i < c->nsegs && n < (int)(sizeof iov / sizeof iov[0]); i++) {
            size_t skip = i == c->seg_pos ? c->seg_done : 0;
            iov[n].iov_base = c->out + c->segs[i].off + skip;
            iov[n].iov_len = c->segs[i].len - skip;
            n++;
        }
        /* sendmsg = writev with MSG_NOSIGNAL: a peer that went away must not SIGPIPE the
         * process embedding the server */
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t wr = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (wr < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return -1;
        }
        wcount(&c->w->bytes_out, (uint64_t)wr);
        c->out_pending -= (size_t)wr;
        size_t left = (size_t)wr;
        while (left) {
            size_t rem = c->segs[c->seg_pos].len - c->seg_done;
            if (left >= rem) {
                left -= rem;
                c->seg_pos++;
                c->seg_done = 0;
            } else {
                c->seg_done += left;
                left = 0;
            }
        }
    }
    if (c->seg_pos == c->nsegs) {
        c->nsegs = c->seg_pos = c->seg_done = 0;
        c->out_len = 0;
        c->out_pending = 0;
        brpc_worker *w = c->w;
        if (c->out_cap > RS_BRPC_KEEP_BYTES) { /* a burst of big replies: give the memory back */
            free(c->out);
        } else if (c->out) { /* to the worker, for whichever connection replies next */
            if (w->nspare == RS_BRPC_SPARE_OUTS) { /* the coldest goes */
                free(w->spare[0]);
                memmove(w->spare, w->spare + 1, (RS_BRPC_SPARE_OUTS - 1) * sizeof w->spare[0]);
                memmove(w->spare_cap, w->spare_cap + 1,
                        (RS_BRPC_SPARE_OUTS - 1) * sizeof w->spare_cap[0]);
                w->nspare--;
            }
            w->spare[w->nspare] = c->out;
            w->spare_cap[w->nspare] = c->out_cap;
            w->nspare++;
        }
        c->out = NULL;
        c->out_cap = 0;
    }
    return 0;
}

/* ---- request handling ------------------------------------------------------------------------ */

/* Append one response: its payload (already at out + rows_off, rows_len bytes, rows_reserved
 * reserved) and its head. The message is resp's PSResponse, or raw (raw_len bytes) when resp is
 * NULL; the payload is the attachment, or (in_attachment == 0) the rest of the message. */
static int queue_frame(brpc_sconn *c, int64_t cid, int error_code, const char *error_text,
                       const rs_ps_response *resp, const uint8_t *raw, size_t raw_len,
                       size_t rows_off, size_t rows_len, size_t rows_reserved, int in_attachment) {
    Brpc__Policy__RpcMeta meta = BRPC__POLICY__RPC_META__INIT;
    Brpc__Policy__RpcResponseMeta rmeta = BRPC__POLICY__RPC_RESPONSE_META__INIT;
    meta.has_correlation_id = 1;
    meta.correlation_id = cid;
    if (rows_len && in_attachment) {
        meta.has_attachment_size = 1;
        meta.attachment_size = (int32_t)rows_len;
    }
    char text[RS_ERROR_MSG_MAX];
    if (error_code) {
        snprintf(text, sizeof text, "%s", error_text);
        rmeta.has_error_code = 1;
        rmeta.error_code = error_code;
        rmeta.error_text = text;
        meta.response = &rmeta;
    }
    size_t meta_len = brpc__policy__rpc_meta__get_packed_size(&meta);
    size_t msg_len = resp ? rs_ps_response_header_size(resp, 1) : raw_len;
    size_t head_len = RS_BRPC_HEADER_BYTES + meta_len + msg_len;
    size_t head_off = rows_off + rows_reserved;
    if (head_len > RS_BRPC_HEAD_MAX) return -1; /* bounded by error/reply sizes; cannot happen */
    /* capacity for rows_reserved + RS_BRPC_HEAD_MAX was reserved before handling */
    uint8_t *h = c->out + head_off;
    rs_brpc_header_write(h, (uint32_t)(meta_len + msg_len + rows_len), (uint32_t)meta_len);
    brpc__policy__rpc_meta__pack(&meta, h + RS_BRPC_HEADER_BYTES);
    if (resp)
        rs_ps_response_encode_header(resp, 1, h + RS_BRPC_HEADER_BYTES + meta_len);
    else if (raw_len)
        memcpy(h + RS_BRPC_HEADER_BYTES + meta_len, raw, raw_len);
    c->out_len = head_off + head_len;
    if (seg_push(c, head_off, head_len) || seg_push(c, rows_off, rows_len)) return -1;
    return 0;
}

static int queue_response(brpc_sconn *c, int64_t cid, int error_code, const char *error_text,
                          const rs_ps_response *resp, size_t rows_off, size_t rows_reserved) {
    return queue_frame(c, cid, error_code, error_text, resp, NULL, 0, rows_off,
                       resp ? resp->rows_len : 0, rows_reserved, 1);
}

typedef struct out_alloc {
    brpc_sconn *c;
    size_t base, reserved;
} out_alloc;

/* RecStore reply payloads are written at out + base, the head goes after them. */
static uint8_t *out_alloc_fn(void *ctx, size_t cap) {
    out_alloc *a = ctx;
    if (out_reserve(a->c, cap + RS_BRPC_HEAD_MAX)) return NULL;
    a->reserved = cap;
    return a->c->out + a->base;
}

static int serve_recstore(brpc_sconn *c, int64_t cid, const char *method, const uint8_t *msg,
                          size_t msg_len, const uint8_t *att, size_t att_len, size_t base) {
    out_alloc a = {c, base, 0};
    rs_rsmsg_alloc alloc = {out_alloc_fn, &a};
    rs_rsmsg_reply r;
    int ecode, in_att;
    rs_brpc_recstore_call(c->w->srv->rsps, method, msg, msg_len, att, att_len, c->w->index, &alloc,
                          &r, &ecode, &in_att);
    if (ecode) return queue_frame(c, cid, ecode, r.res.msg, NULL, NULL, 0, base, 0, a.reserved, 1);
    return queue_frame(c, cid, 0, NULL, NULL, r.head, r.head_len, base, r.payload_len, a.reserved,
                       in_att);
}

/* Handle one complete frame (body = meta + message + attachment). Returns -1 to close. */
static int handle_frame(brpc_sconn *c, const uint8_t *body, const rs_brpc_header *hdr) {
    brpc_worker *w = c->w;
    rs_error err = {0};
    Brpc__Policy__RpcMeta *meta = NULL;
    if (rs_brpc_meta_unpack(&w->arena, body, hdr->meta_size, &meta, &err)) return -1;
    int ret = -1;
    if (!meta->request) goto done; /* a response or garbage sent to a server: framing error */
    size_t att = meta->has_attachment_size ? (size_t)(uint32_t)meta->attachment_size : 0;
    if (meta->has_attachment_size && meta->attachment_size < 0) goto done;
    if (att > (size_t)hdr->body_size - hdr->meta_size) goto done;
    const uint8_t *msg = body + hdr->meta_size;
    size_t msg_len = hdr->body_size - hdr->meta_size - att;
    const uint8_t *attachment = msg + msg_len;
    int64_t cid = meta->has_correlation_id ? meta->correlation_id : 0;
    const char *svc = meta->request->service_name ? meta->request->service_name : "";
    const char *method = meta->request->method_name ? meta->request->method_name : "";
    wcount(&w->requests, 1);

    if (out_reserve(c, RS_BRPC_HEAD_MAX)) goto done;
    size_t base = c->out_len;
    /* the token first: no service (RecStore's included) and no decompression without it */
    const rs_auth_token *tok = &w->srv->auth;
    if (tok->len &&
        !(meta->has_authentication_data && rs_auth_token_equal(tok, meta->authentication_data.data,
                                                               meta->authentication_data.len))) {
        wcount(&w->auth_failures, 1);
        ret = queue_response(c, cid, RS_BRPC_EAUTH,
                             meta->has_authentication_data
                                 ? "authentication failed: wrong token"
                                 : "authentication failed: this server requires a token "
                                   "(auth_token_file)",
                             NULL, base, 0);
        /* the refusal is sent; the connection closes after too many */
        if (ret == 0 && ++c->auth_failures >= RS_AUTH_MAX_FAILURES) {
            conn_flush(c);
            ret = -3;
        }
        goto done;
    }
    /* the message as sent (before inflating) and, if asked, the attachment are checksummed */
    rs_brpc_checksum ck;
    if (rs_brpc_content_type_check(meta, &err) || rs_brpc_checksum_read(meta, &ck, &err) ||
        rs_brpc_checksum_verify(&ck, msg, msg_len, attachment, att, &err)) {
        rs_error_prefix(&err, "request");
        ret = queue_response(c, cid, RS_BRPC_EREQUEST, err.msg, NULL, base, 0);
        goto done;
    }
    if (meta->has_compress_type && meta->compress_type != RS_BRPC_COMPRESS_NONE) {
        size_t n = 0;
        if (rs_brpc_decompress(meta->compress_type, msg, msg_len, w->srv->max_body, &w->zbuf,
                               &w->zcap, &n, &err)) {
            rs_error_prefix(&err, "request message");
            ret = queue_response(c, cid, RS_BRPC_EREQUEST, err.msg, NULL, base, 0);
            goto done;
        }
        msg = w->zbuf;
        msg_len = n;
    }
    if (strcmp(svc, RS_BRPC_RECSTORE_SERVICE) == 0) {
        ret = serve_recstore(c, cid, method, msg, msg_len, attachment, att, base);
        goto done;
    }
    rs_ps_op op;
    if (strcmp(svc, RS_BRPC_SERVICE) != 0) {
        snprintf(err.msg, sizeof err.msg, "unknown service '%.100s' (this server serves %s and %s)",
                 svc, RS_BRPC_SERVICE, RS_BRPC_RECSTORE_SERVICE);
        ret = queue_response(c, cid, RS_BRPC_ENOSERVICE, err.msg, NULL, base, 0);
        goto done;
    }
    if (rs_ps_op_from_method(method, strlen(method), &op)) {
        snprintf(err.msg, sizeof err.msg,
                 "unknown method '%.100s' of %s (expected Get, Put, Update or Command)", method,
                 RS_BRPC_SERVICE);
        ret = queue_response(c, cid, RS_BRPC_ENOMETHOD, err.msg, NULL, base, 0);
        goto done;
    }
    rs_ps_request req;
    if (rs_ps_request_decode(op, msg, msg_len, attachment, att, &req, &err)) {
        ret = queue_response(c, cid, RS_BRPC_EREQUEST, err.msg, NULL, base, 0);
        goto done;
    }
    size_t rows = rs_ps_shard_reply_rows_bytes(c->w->srv->shard, &req);
    if (out_reserve(c, rows + RS_BRPC_HEAD_MAX)) goto done;
    rs_ps_response resp;
    if (rs_ps_shard_handle(w->srv->shard, &req, &resp, c->out + base, rows, w->index)) {
        ret = queue_response(c, cid, RS_BRPC_EINTERNAL, "shard handler failed", NULL, base, 0);
        goto done;
    }
    ret = queue_response(c, cid, 0, NULL, &resp, base, rows);
done:
    rs_brpc_meta_free(&w->arena, meta);
    return ret;
}

/* Handle every complete frame in the input buffer (until output backs up). -1 to close. */
static int conn_process(brpc_sconn *c) {
    brpc_server *s = c->w->srv;
    size_t pos = 0;
    int ret = 0;
    while (c->in_len - pos >= RS_BRPC_HEADER_BYTES && c->out_pending < c->w->srv->out_limit) {
        rs_brpc_header hdr;
        if (rs_brpc_header_parse(c->in + pos, s->max_body, &hdr, NULL)) {
            ret = -1;
            break;
        }
        size_t frame = RS_BRPC_HEADER_BYTES + (size_t)hdr.body_size;
        if (c->in_len - pos < frame) break;
        int hr = handle_frame(c, c->in + pos + RS_BRPC_HEADER_BYTES, &hdr);
        if (hr) {
            ret = hr == -3 ? -3 : -1;
            break;
        }
        pos += frame;
        /* Send big replies as soon as they are ready: the client receives this one while the
         * next pipelined request is handled, instead of waiting for the whole batch. */
        if (c->out_pending >= RS_BRPC_FLUSH_EARLY && conn_flush(c)) {
            ret = -2; /* the peer went away: not a framing error */
            break;
        }
    }
    if (ret == -1) wcount(&c->w->bad_frames, 1);
    if (ret == -3) ret = -1; /* closed for failed authentication: not a framing error */
    if (pos) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
    if (c->in_len == 0 && c->in_cap > RS_BRPC_KEEP_BYTES) { /* after a big request */
        free(c->in);
        c->in = NULL;
        c->in_cap = 0;
    }
    return ret;
}

/* Room for the next read: towards the whole frame whose header is buffered (bounded by
 * max_body, checked by the header parse), else a default chunk. The buffer grows at most to twice
 * what actually arrived, so a header claiming a large body costs memory only as its bytes come in.
 * -1 on bad header/allocation. */
static int in_make_room(brpc_sconn *c) {
    size_t need = RS_BRPC_IN_INITIAL;
    if (c->in_len >= RS_BRPC_HEADER_BYTES) {
        rs_brpc_header hdr;
        if (rs_brpc_header_parse(c->in, c->w->srv->max_body, &hdr, NULL)) return -1;
        size_t frame = RS_BRPC_HEADER_BYTES + (size_t)hdr.body_size;
        size_t grow = 2 * c->in_len > need ? 2 * c->in_len : need;
        if (frame > need) need = frame < grow ? frame : grow;
    }
    if (c->in_cap - c->in_len > 0 && c->in_cap >= need) return 0;
    size_t cap = c->in_cap ? c->in_cap : RS_BRPC_IN_INITIAL;
    while (cap < need || cap - c->in_len == 0)
        cap *= 2;
    uint8_t *p = realloc(c->in, cap);
    if (!p) return -1;
    c->in = p;
    c->in_cap = cap;
    return 0;
}

static void conn_on_readable(brpc_sconn *c) {
    /* a bounded number of reads per wakeup keeps one busy connection from starving the others
     * of this worker (level-triggered epoll brings us back) */
    for (int rounds = 0; rounds < 16; rounds++) {
        if (in_make_room(c)) {
            wcount(&c->w->bad_frames, 1);
            conn_close(c);
            return;
        }
        ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (r == 0) {
            conn_close(c);
            return;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            conn_close(c);
            return;
        }
        wcount(&c->w->bytes_in, (uint64_t)r);
        c->in_len += (size_t)r;
        if (conn_process(c)) {
            conn_close(c);
            return;
        }
        if (c->out_pending >= c->w->srv->out_limit) break;
        if (c->in_len < c->in_cap) break; /* the socket had less than we asked for */
    }
    if (conn_flush(c)) {
        conn_close(c);
        return;
    }
    uint32_t ev =
        (c->out_pending >= c->w->srv->out_limit ? 0 : EPOLLIN) | (c->out_pending ? EPOLLOUT : 0);
    if (conn_set_events(c, ev)) conn_close(c);
}

static void conn_on_writable(brpc_sconn *c) {
    if (conn_flush(c)) {
        conn_close(c);
        return;
    }
    if (c->out_pending < c->w->srv->out_limit && c->in_len) {
        /* frames buffered while output was backed up */
        if (conn_process(c) || conn_flush(c)) {
            conn_close(c);
            return;
        }
    }
    uint32_t ev =
        (c->out_pending >= c->w->srv->out_limit ? 0 : EPOLLIN) | (c->out_pending ? EPOLLOUT : 0);
    if (conn_set_events(c, ev)) conn_close(c);
}

/* ---- workers --------------------------------------------------------------------------------- */

static void *worker_main(void *arg) {
    brpc_worker *w = arg;
    brpc_server *s = w->srv;
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(w->epfd, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        int stop = 0;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &s->stopfd) {
                stop = 1;
            } else if (p == &s->lfd) {
                accept_all(w);
            } else if (p == &w->inbox_fd) {
                inbox_take(w);
            } else {
                brpc_sconn *c = p;
                if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN)) {
                    conn_close(c);
                    /* a later event in this batch may name the freed conn: only if the same fd
                     * appeared twice, which epoll does not do within one wait */
                    continue;
                }
                if (evs[i].events & EPOLLOUT) {
                    /* conn_on_writable may close c; check readability first to keep c valid */
                    if (evs[i].events & EPOLLIN) {
                        conn_on_readable(c);
                        continue;
                    }
                    conn_on_writable(c);
                } else if (evs[i].events & EPOLLIN) {
                    conn_on_readable(c);
                }
            }
        }
        if (stop) break;
    }
    while (w->conns)
        conn_close(w->conns);
    return NULL;
}

static void server_free(brpc_server *s) {
    if (s->workers) {
        for (unsigned i = 0; i < s->nworkers; i++) {
            brpc_worker *w = &s->workers[i];
            if (w->epfd >= 0) close(w->epfd);
            if (w->inbox_fd >= 0) close(w->inbox_fd);
            for (unsigned k = 0; k < w->inbox_len; k++) /* handed over after its worker stopped */
                close(w->inbox[k]);
            free(w->inbox);
            pthread_mutex_destroy(&w->inbox_mu);
            for (unsigned k = 0; k < w->nspare; k++)
                free(w->spare[k]);
            free(w->zbuf);
        }
        free(s->workers);
    }
    rs_rsps_destroy(s->rsps);
    if (s->stopfd >= 0) close(s->stopfd);
    if (s->lfd >= 0) close(s->lfd);
    if (s->spare_fd >= 0) close(s->spare_fd);
    free(s);
}

static void brpc_stop(void *state);

/* brpc server transport options: max_pending_bytes=N (64 KiB .. 4 GiB); tcp_congestion=auto|system|
 * NAME (transport/tcp_congestion.h); optimizer=SGD|AdaGrad|
 * RowWiseAdaGrad, learning_rate=X and epsilon=X for RecStore's UpdateParameter. */
static int apply_server_option(void *ctx, const char *key, const char *val, rs_error *err) {
    brpc_server *s = ctx;
    int known = rs_rsps_optimizer_option(&s->opt, "brpc server", key, val, err);
    if (known) return known < 0 ? known : 0;
    if (strcmp(key, "max_pending_bytes") == 0)
        return rs_transport_option_u64("brpc server", key, val, 64u << 10, 4ull << 30,
                                       &s->out_limit, err);
    if (strcmp(key, "tcp_congestion") == 0)
        return rs_tcp_cc_parse("brpc server", val, &s->tcp_cc, err);
    return rs_error_set(err, RS_EINVAL,
                        "unknown brpc server option '%s' (known: max_pending_bytes, "
                        "tcp_congestion, optimizer, learning_rate, epsilon)",
                        key);
}

static int brpc_start(const rs_ps_server_opts *opts, rs_ps_shard *shard, void **state,
                      rs_error *err) {
    int rc;
    *state = NULL;
    brpc_server *s = calloc(1, sizeof *s);
    if (!s) return rs_error_set(err, RS_ENOMEM, "brpc server");
    s->lfd = s->stopfd = -1;
    s->spare_fd = rs_accept_reserve_open();
    s->shard = shard;
    s->max_body = opts->max_body_bytes ? opts->max_body_bytes : RS_PS_DEFAULT_MAX_BODY_BYTES;
    if (s->max_body > UINT32_MAX) s->max_body = UINT32_MAX;
    s->max_conns = opts->max_connections ? opts->max_connections : RS_PS_DEFAULT_MAX_CONNECTIONS;
    if (opts->auth) s->auth = *opts->auth;
    s->nworkers = opts->num_threads ? opts->num_threads : 1;
    s->out_limit = RS_BRPC_OUT_LIMIT;
    rs_rsps_optimizer_default(&s->opt);
    if ((rc = rs_transport_options_each(opts->extra, "brpc server", apply_server_option, s, err)))
        goto fail;
    if ((rc = rs_rsps_create(shard, &s->opt, &s->rsps, err))) goto fail;

    /* no host: loopback only, never every address by accident */
    const char *host = opts->host && *opts->host ? opts->host : "127.0.0.1";
    if ((rc = rs_net_listen(host, opts->port, RS_NET_NONBLOCK, 0, &s->lfd, err)) ||
        (rc = rs_net_bound_port(s->lfd, &s->port, err))) {
        rs_error_prefix(err, "brpc");
        goto fail;
    }
    if ((rc = rs_tcp_cc_apply(s->lfd, &s->tcp_cc, "brpc server", err)) < 0) goto fail;
    s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->stopfd < 0) {
        rc = rs_error_errno(err, RS_EIO, errno, "brpc: eventfd");
        goto fail;
    }
    if (posix_memalign((void **)&s->workers, 64, s->nworkers * sizeof *s->workers)) {
        s->workers = NULL;
        rc = rs_error_set(err, RS_ENOMEM, "brpc workers");
        goto fail;
    }
    memset(s->workers, 0, s->nworkers * sizeof *s->workers);
    for (unsigned i = 0; i < s->nworkers; i++) {
        s->workers[i].epfd = s->workers[i].inbox_fd = -1;
        pthread_mutex_init(&s->workers[i].inbox_mu, NULL);
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        brpc_worker *w = &s->workers[i];
        w->index = i;
        w->srv = s;
        rs_brpc_arena_init(&w->arena);
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (w->epfd < 0) {
            rc = rs_error_errno(err, RS_EIO, errno, "brpc: epoll_create1");
            goto fail;
        }
        w->inbox_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->inbox_fd < 0) {
            rc = rs_error_errno(err, RS_EIO, errno, "brpc: eventfd");
            goto fail;
        }
        struct epoll_event le = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &s->lfd};
        struct epoll_event se = {.events = EPOLLIN, .data.ptr = &s->stopfd};
        struct epoll_event ie = {.events = EPOLLIN, .data.ptr = &w->inbox_fd};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->lfd, &le) ||
            epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->stopfd, &se) ||
            epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->inbox_fd, &ie)) {
            rc = rs_error_errno(err, RS_EIO, errno, "brpc: epoll_ctl");
            goto fail;
        }
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        int e = pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]);
        if (e) {
            rc = rs_error_errno(err, RS_EIO, e, "brpc: pthread_create");
            brpc_stop(s); /* joins the started ones and frees */
            return rc;
        }
        s->started++;
    }
    *state = s;
    return 0;
fail:
    server_free(s);
    return rc;
}

static uint16_t brpc_bound_port(void *state) {
    return ((brpc_server *)state)->port;
}

static void brpc_stop(void *state) {
    brpc_server *s = state;
    if (!s) return;
    uint64_t one = 1;
    if (write(s->stopfd, &one, sizeof one) < 0) { /* eventfd write cannot fail here */
    }
    for (unsigned i = 0; i < s->started; i++)
        pthread_join(s->workers[i].thread, NULL);
    server_free(s);
}

static void brpc_stats(void *state, rs_ps_transport_stats *out) {
    brpc_server *s = state;
    memset(out, 0, sizeof *out);
    rs_tcp_cc_name(s->lfd, out->tcp_congestion, sizeof out->tcp_congestion);
    for (unsigned i = 0; i < s->nworkers; i++) {
        brpc_worker *w = &s->workers[i];
        out->connections_accepted += __atomic_load_n(&w->accepted, __ATOMIC_RELAXED);
        out->requests += __atomic_load_n(&w->requests, __ATOMIC_RELAXED);
        out->bad_frames += __atomic_load_n(&w->bad_frames, __ATOMIC_RELAXED);
        out->bytes_in += __atomic_load_n(&w->bytes_in, __ATOMIC_RELAXED);
        out->bytes_out += __atomic_load_n(&w->bytes_out, __ATOMIC_RELAXED);
        out->auth_failures += __atomic_load_n(&w->auth_failures, __ATOMIC_RELAXED);
    }
    out->connections_open = __atomic_load_n(&s->open_conns, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < s->nworkers; i++) {
        uint64_t n = __atomic_load_n(&s->workers[i].owned, __ATOMIC_RELAXED);
        if (i == 0 || n > out->worker_connections_max) out->worker_connections_max = n;
        if (i == 0 || n < out->worker_connections_min) out->worker_connections_min = n;
    }
}

const rs_ps_server_ops rs_brpc_server_ops = {
    .name = "brpc",
    .start = brpc_start,
    .bound_port = brpc_bound_port,
    .stop = brpc_stop,
    .stats = brpc_stats,
};
#endif

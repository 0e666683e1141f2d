/*
 * grpc_server.c — the server side of the gRPC transport (rs_grpc_server_ops): serves one PS shard
 * as recstore.PSService over HTTP/2 through the gRPC core C API.
 *
 * Threads: num_threads workers, each with its own completion queue (CQ) registered with the
 * server. A worker keeps `calls_per_method` requested calls armed per method on its CQ (registered
 * methods with the request payload read up front, plus two slots for unregistered paths), so a
 * call arrives with its PSRequest already in a byte buffer. The worker decodes it with the shared
 * codec (keys and rows viewed in place), runs the shard handler, and answers with one batch:
 * SEND_INITIAL_METADATA + SEND_MESSAGE + SEND_STATUS_FROM_SERVER + RECV_CLOSE_ON_SERVER. The reply
 * message is two slices: the PSResponse header from rs_ps_response_encode_header and the GET rows
 * that the shard handler wrote straight into a pooled buffer lent to gRPC as a slice
 * (grpc_slice_pool.c), so rows are never copied by us and their buffers are reused. When that
 * batch completes the slot is re-armed. Workers block in grpc_completion_queue_next without a
 * deadline while no reply is pending, so an idle server sleeps; while replies are pending they wake
 * every reply_timeout/4 to cancel replies a client has not taken within reply_timeout (a client
 * that stops reading would otherwise hold its slots forever).
 *
 * Calls stay on their connection's worker. gRPC core hands accepted connections to the CQs in
 * turn (16 connections on 4 workers: 4 each), polls a connection's socket in the poller of that
 * CQ, and matches each new call with a call requested on that CQ first. A call served on another
 * worker costs a hand-off per message: the connection's poller reads it and must wake the call's
 * worker (measured with 4 workers: 1.4-2 voluntary context switches per batch against 0.1, and a
 * third more server CPU per batch; docs/grpc.md). So every method, PSService/Stream included,
 * keeps calls_per_method requested calls armed on every worker — enough that a connection opening
 * several streams at once finds them all on its own CQ — and streams are spread over the workers
 * as gRPC core spreads the connections. Open PS streams per worker are counted by the worker itself
 * (ctr.streams) and reported as worker_connections_max/min.
 *
 * Invariants: a slot and its call are touched only by the worker that owns its CQ; every slot is
 * either idle, REQUESTED (a request_call is pending on the CQ) or REPLYING (a batch is pending).
 * Bad payloads get a PSResponse with RS_PS_INVALID_PAYLOAD naming the problem; an unknown method
 * gets gRPC status UNIMPLEMENTED naming the path; oversized messages are refused by gRPC itself
 * (RESOURCE_EXHAUSTED, limit max_body_bytes). Shutdown: set `shutting`, shutdown_and_notify on
 * worker 0's CQ, cancel all calls, wait for the notification, shut the CQs down, let every worker
 * drain its CQ to GRPC_QUEUE_SHUTDOWN, join, destroy.
 */
#if RS_HAVE_GRPC

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "recstore/auth.h"
#include "recstore/clock.h"
#include "recstore/eventual.h"
#include "transport/grpc_services.h"
#include "transport/grpc_transport.h"
#include "transport/net.h"

#define RS_GRPC_SLOT_UNKNOWN  (-1) /* slot.method for unregistered paths */
#define RS_GRPC_UNKNOWN_SLOTS 2
#define RS_GRPC_MAX_THREADS   64

enum { SLOT_IDLE = 0, SLOT_REQUESTED, SLOT_REPLYING };

typedef struct rs_grpc_worker rs_grpc_worker;
typedef struct rs_grpc_server rs_grpc_server;

typedef struct rs_grpc_slot {
    rs_grpc_worker *w;
    int method; /* 0..3 PSService method (op - 1), 4.. rs_grpc_extra_methods[method - 4],
                 * or RS_GRPC_SLOT_UNKNOWN */
    int state;
    grpc_call *call; /* owned ref while REQUESTED-and-matched or REPLYING */
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_call_details details; /* unregistered slots only */
    grpc_byte_buffer *payload; /* request message (registered slots), owned */
    grpc_byte_buffer *reply;   /* response message, owned until the batch completes */
    grpc_slice status_text;    /* UNIMPLEMENTED text (unknown-method slots) */
    int cancelled;             /* RECV_CLOSE_ON_SERVER result, written by gRPC */
    int cancel_sent;           /* we cancelled this reply (reply_timeout) */
    uint64_t reply_start_ns;   /* when the reply batch started (REPLYING) */
} rs_grpc_slot;

struct rs_grpc_worker {
    rs_grpc_server *srv;
    unsigned index; /* shard handler thread_slot */
    grpc_completion_queue *cq;
    pthread_t thread;
    int thread_started;
    rs_grpc_slot *slots;
    size_t nslots;
    rs_grpc_scratch scratch;  /* gathers multi-slice requests */
    rs_grpc_slice_pool *rows; /* GET reply rows buffers */
    rs_ps_response resp;      /* reused per request: 2.3 KB of text buffers */
    unsigned replying;        /* slots in SLOT_REPLYING */
    /* Held by the worker while it handles an event; stop() takes it once after setting the
     * server's `closing` (see there). */
    pthread_mutex_t lock;
    uint64_t next_scan_ns; /* next look for replies past reply_timeout */
    rs_grpc_counters ctr;
} __attribute__((aligned(64)));

struct rs_grpc_server {
    grpc_server *server;
    rs_ps_shard *shard;
    void *methods[RS_GRPC_NUM_METHODS + RS_GRPC_MAX_EXTRA_METHODS];
    rs_grpc_services *svc; /* RecStore ParameterService, health, reflection */
    uint16_t port;
    char tcp_congestion[16]; /* the listener's congestion control after tcp_congestion */
    unsigned nworkers;
    unsigned calls_per_method;
    uint64_t reply_timeout_ns;
    rs_auth_token auth; /* len 0: none required */
    rs_grpc_worker *workers;
    int shutting; /* __atomic: set once by stop() */
    /* __atomic: set by stop() before it shuts the workers' CQs down. A worker reads it under its
     * own lock before starting any batch (grpc_services.c too, via rs_grpc_worker_closing): gRPC
     * aborts the process on a batch for a shut-down CQ, and after shutdown the queued events
     * are only drained. */
    int closing;
    int shutdown_tag; /* its address tags the shutdown notification */
    rs_eventual shutdown_done;
};

/* ---- serving ------------------------------------------------------------------------------- */

/* Kind of a registered method (RS_GRPC_UNARY for PSService's own). */
static int extra_kind(int method) {
    return method >= RS_GRPC_NUM_METHODS ? rs_grpc_extra_methods[method - RS_GRPC_NUM_METHODS].kind
                                         : RS_GRPC_UNARY;
}

/* Called by the worker owning sl, holding its lock. */
static void slot_arm(rs_grpc_slot *sl) {
    rs_grpc_worker *w = sl->w;
    rs_grpc_server *srv = w->srv;
    grpc_call_error ce;
    if (__atomic_load_n(&srv->closing, __ATOMIC_ACQUIRE)) {
        sl->state = SLOT_IDLE;
        return;
    }
    sl->state = SLOT_REQUESTED;
    if (sl->method == RS_GRPC_SLOT_UNKNOWN)
        ce = grpc_server_request_call(srv->server, &sl->call, &sl->details, &sl->md, w->cq, w->cq,
                                      sl);
    else
        ce = grpc_server_request_registered_call(
            srv->server, srv->methods[sl->method], &sl->call, &sl->deadline, &sl->md,
            extra_kind(sl->method) == RS_GRPC_BIDI_STREAM ? NULL : &sl->payload, w->cq, w->cq, sl);
    if (ce != GRPC_CALL_OK) sl->state = SLOT_IDLE;
}

/* Release what one call used and re-arm, unless the server is stopping. */
static void slot_finish(rs_grpc_slot *sl) {
    if (sl->state == SLOT_REPLYING) sl->w->replying--;
    if (sl->call) {
        grpc_call_unref(sl->call);
        sl->call = NULL;
    }
    if (sl->payload) {
        grpc_byte_buffer_destroy(sl->payload);
        sl->payload = NULL;
    }
    if (sl->reply) {
        grpc_byte_buffer_destroy(sl->reply);
        sl->reply = NULL;
    }
    grpc_slice_unref(sl->status_text);
    sl->status_text = grpc_empty_slice();
    grpc_metadata_array_destroy(&sl->md);
    grpc_metadata_array_init(&sl->md);
    if (sl->method == RS_GRPC_SLOT_UNKNOWN) {
        grpc_call_details_destroy(&sl->details);
        grpc_call_details_init(&sl->details);
    }
    sl->state = SLOT_IDLE;
    if (!__atomic_load_n(&sl->w->srv->shutting, __ATOMIC_ACQUIRE)) slot_arm(sl);
}

/* The handler context of worker w (grpc_services.h). */
static rs_grpc_call_ctx worker_ctx(rs_grpc_worker *w) {
    return (rs_grpc_call_ctx){w->srv->svc,   w->index, w->cq,       w->rows,
                              w->srv->shard, &w->ctr,  &w->scratch, &w->resp};
}

grpc_byte_buffer *rs_grpc_ps_reply(const rs_grpc_call_ctx *c, rs_ps_op op,
                                   grpc_byte_buffer *payload) {
    rs_ps_response *resp = c->resp;
    resp->status = RS_PS_OK;
    resp->value_size = 0;
    resp->num_found = 0;
    resp->rows = NULL;
    resp->rows_len = 0;
    resp->error[0] = 0;
    resp->reply[0] = 0;

    rs_error e = {0};
    rs_grpc_span msg;
    rs_ps_request req;
    grpc_slice rows = grpc_empty_slice();
    int rc = rs_grpc_message_span(payload, c->scratch, &msg, &e);
    if (rc == 0) {
        RS_GRPC_CTR_ADD(c->ctr->bytes_in, msg.len);
        rc = rs_ps_request_decode(op, msg.data ? msg.data : (const uint8_t *)"", msg.len, NULL, 0,
                                  &req, &e);
    }
    if (rc != 0) {
        resp->status = rc == RS_ENOMEM ? RS_PS_INTERNAL : RS_PS_INVALID_PAYLOAD;
        snprintf(resp->error, sizeof resp->error, "bad PSRequest for %s: %s",
                 op == RS_PS_OP_FROM_MESSAGE ? "Stream" : rs_ps_op_method(op),
                 e.msg[0] ? e.msg : rs_strerror(rc));
        resp->value_size = rs_ps_shard_value_size(c->shard);
        RS_GRPC_CTR_ADD(c->ctr->bad_frames, 1);
    } else {
        size_t need = rs_ps_shard_reply_rows_bytes(c->shard, &req);
        if (need && rs_grpc_slice_pool_get(c->pool, need, &rows) != 0) {
            rc = RS_ENOMEM;
            need = 0;
        } else {
            rc = rs_ps_shard_handle(c->shard, &req, resp, need ? GRPC_SLICE_START_PTR(rows) : NULL,
                                    need, c->thread);
        }
        if (rc != 0) {
            resp->status = RS_PS_INTERNAL;
            snprintf(resp->error, sizeof resp->error, "server could not handle the request: %s",
                     rs_strerror(rc));
            resp->rows_len = 0;
        }
        if (resp->rows_len > need)
            resp->rows_len = 0; /* cannot happen with a correct handler; never send past rows */
    }
    resp->rows = NULL;
    size_t hlen = rs_ps_response_header_size(resp, 0);
    grpc_slice parts[2];
    parts[0] = grpc_slice_malloc(hlen);
    size_t written = rs_ps_response_encode_header(resp, 0, GRPC_SLICE_START_PTR(parts[0]));
    if (written < hlen) parts[0] = grpc_slice_sub_no_ref(parts[0], 0, written);
    size_t nparts = 1;
    if (resp->rows_len) {
        parts[1] = GRPC_SLICE_LENGTH(rows) == resp->rows_len
                       ? rows
                       : grpc_slice_sub_no_ref(rows, 0, resp->rows_len);
        nparts = 2;
    }
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(parts, nparts);
    grpc_slice_unref(parts[0]);
    grpc_slice_unref(rows); /* the byte buffer holds its own ref */
    RS_GRPC_CTR_ADD(c->ctr->bytes_out, written + resp->rows_len);
    return bb;
}

/* NULL if the call carries `authorization: Bearer <token>` with the server's token (or none is
 * required), else the reason for refusing it. gRPC core has no hook to close the connection of
 * a client that keeps failing, so each refused call is answered and counted. */
static const char *auth_refusal(const rs_grpc_server *srv, const grpc_metadata_array *md) {
    if (!srv->auth.len) return NULL;
    for (size_t i = 0; i < md->count; i++) {
        if (!grpc_slice_str_cmp(md->metadata[i].key, "authorization")) {
            const grpc_slice v = md->metadata[i].value;
            size_t len = GRPC_SLICE_LENGTH(v);
            const uint8_t *p = GRPC_SLICE_START_PTR(v);
            if (len > 7 && memcmp(p, "Bearer ", 7) == 0 &&
                rs_auth_token_equal(&srv->auth, p + 7, len - 7))
                return NULL;
            return "authentication failed: wrong token";
        }
    }
    return "authentication failed: this server requires a token (auth_token_file)";
}

static void slot_serve(rs_grpc_slot *sl) {
    rs_grpc_worker *w = sl->w;
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].data.send_initial_metadata.count = 0;
    n++;
    /* every service of this server, RecStore's and reflection included, needs the token;
     * health does not (grpc_services.c: Kubernetes' gRPC probe cannot send metadata) */
    int open_method = sl->method >= RS_GRPC_NUM_METHODS &&
                      rs_grpc_extra_methods[sl->method - RS_GRPC_NUM_METHODS].no_token;
    const char *refusal = open_method ? NULL : auth_refusal(w->srv, &sl->md);
    grpc_status_code fail_status = GRPC_STATUS_OK;
    rs_grpc_unary_reply xr = {.status = GRPC_STATUS_OK};
    if (refusal) {
        sl->status_text = grpc_slice_from_static_string(refusal);
        fail_status = GRPC_STATUS_UNAUTHENTICATED;
        RS_GRPC_CTR_ADD(w->ctr.auth_failures, 1);
    } else if (sl->method >= RS_GRPC_NUM_METHODS) {
        const rs_grpc_method_def *def = &rs_grpc_extra_methods[sl->method - RS_GRPC_NUM_METHODS];
        rs_grpc_call_ctx ctx = worker_ctx(w);
        RS_GRPC_CTR_ADD(w->ctr.requests, 1);
        if (def->kind != RS_GRPC_UNARY) {
            /* the stream takes the call over; the slot is re-armed at once */
            grpc_call *call = sl->call;
            grpc_byte_buffer *payload = sl->payload;
            sl->call = NULL;
            sl->payload = NULL;
            def->stream(&ctx, call, payload);
            slot_finish(sl);
            return;
        }
        rs_grpc_span msg = {0};
        rs_error e = {0};
        if (rs_grpc_message_span(sl->payload, &w->scratch, &msg, &e) != 0)
            rs_grpc_reply_error(&xr, GRPC_STATUS_INVALID_ARGUMENT, "%s", e.msg);
        else
            def->unary(&ctx, &msg, &xr);
        RS_GRPC_CTR_ADD(w->ctr.bytes_in, msg.len);
        if (xr.status == GRPC_STATUS_OK) {
            sl->reply = xr.msg;
            RS_GRPC_CTR_ADD(w->ctr.bytes_out, grpc_byte_buffer_length(xr.msg));
            ops[n].op = GRPC_OP_SEND_MESSAGE;
            ops[n].data.send_message.send_message = sl->reply;
            n++;
            ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
            ops[n].data.send_status_from_server.status = GRPC_STATUS_OK;
            n++;
        } else {
            sl->status_text = grpc_slice_from_copied_string(xr.details);
            ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
            ops[n].data.send_status_from_server.status = xr.status;
            ops[n].data.send_status_from_server.status_details = &sl->status_text;
            n++;
            RS_GRPC_CTR_ADD(w->ctr.bad_frames, 1);
        }
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n].data.recv_close_on_server.cancelled = &sl->cancelled;
        n++;
        sl->state = SLOT_REPLYING;
        sl->cancel_sent = 0;
        sl->reply_start_ns = rs_now_ns();
        w->replying++;
        if (grpc_call_start_batch(sl->call, ops, n, sl, NULL) != GRPC_CALL_OK) slot_finish(sl);
        return;
    } else if (sl->method == RS_GRPC_SLOT_UNKNOWN) {
        char text[600];
        grpc_slice m = sl->details.method;
        snprintf(text, sizeof text,
                 "unknown method %.*s: this server serves recstore.PSService (Get, Put, Update, "
                 "Command, Stream), recstoreps.ParameterService (GetParameter, PutParameter, "
                 "UpdateParameter, InitEmbeddingTable, Command), grpc.health.v1.Health and "
                 "server reflection",
                 (int)(GRPC_SLICE_LENGTH(m) > 200 ? 200 : GRPC_SLICE_LENGTH(m)),
                 (const char *)GRPC_SLICE_START_PTR(m));
        sl->status_text = grpc_slice_from_copied_string(text);
        fail_status = GRPC_STATUS_UNIMPLEMENTED;
        RS_GRPC_CTR_ADD(w->ctr.bad_frames, 1);
    }
    if (fail_status != GRPC_STATUS_OK) { /* a status with its text, no message */
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = fail_status;
        ops[n].data.send_status_from_server.status_details = &sl->status_text;
        n++;
    } else {
        rs_grpc_call_ctx ctx = worker_ctx(w);
        sl->reply = rs_grpc_ps_reply(&ctx, (rs_ps_op)(sl->method + 1), sl->payload);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = sl->reply;
        n++;
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = GRPC_STATUS_OK;
        ops[n].data.send_status_from_server.status_details = NULL;
        n++;
    }
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n].data.recv_close_on_server.cancelled = &sl->cancelled;
    n++;
    RS_GRPC_CTR_ADD(w->ctr.requests, 1);
    sl->state = SLOT_REPLYING;
    sl->cancel_sent = 0;
    sl->reply_start_ns = rs_now_ns();
    w->replying++;
    if (grpc_call_start_batch(sl->call, ops, n, sl, NULL) != GRPC_CALL_OK) slot_finish(sl);
}

/* A client that never reads its replies (or keeps its HTTP/2 window shut) would hold a slot
 * forever; replies not delivered within reply_timeout are cancelled, which frees the slot. */
static void cancel_stuck_replies(rs_grpc_worker *w, uint64_t now) {
    uint64_t limit = w->srv->reply_timeout_ns;
    for (size_t j = 0; j < w->nslots; j++) {
        rs_grpc_slot *sl = &w->slots[j];
        if (sl->state == SLOT_REPLYING && sl->call && now - sl->reply_start_ns > limit &&
            !sl->cancel_sent) {
            sl->cancel_sent = 1;
            grpc_call_cancel_with_status(sl->call, GRPC_STATUS_DEADLINE_EXCEEDED,
                                         "recstore.PSService: reply not taken by the client within "
                                         "the server's reply_timeout_ms",
                                         NULL);
        }
    }
}

/* How long the worker may sleep: forever when no reply is pending (an idle server sleeps). */
static gpr_timespec worker_deadline(rs_grpc_worker *w) {
    if (!w->replying) return gpr_inf_future(GPR_CLOCK_REALTIME);
    uint64_t now = rs_now_ns();
    if (now >= w->next_scan_ns) {
        if (w->next_scan_ns) cancel_stuck_replies(w, now);
        w->next_scan_ns = now + w->srv->reply_timeout_ns / 4 + 1000000;
    }
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_nanos((int64_t)(w->next_scan_ns - now), GPR_TIMESPAN));
}

static void *worker_main(void *arg) {
    rs_grpc_worker *w = arg;
    rs_grpc_server *srv = w->srv;
    rs_grpc_worker_closing = &srv->closing;
    pthread_mutex_lock(&w->lock);
    /* a worker arms its own slots, so a slot is only ever touched by this thread */
    for (size_t j = 0; j < w->nslots; j++)
        slot_arm(&w->slots[j]);
    for (;;) {
        gpr_timespec until = worker_deadline(w);
        pthread_mutex_unlock(&w->lock);
        grpc_event ev = grpc_completion_queue_next(w->cq, until, NULL);
        pthread_mutex_lock(&w->lock);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
        if (ev.type != GRPC_OP_COMPLETE) continue;
        if (ev.tag == &srv->shutdown_tag) {
            rs_eventual_set(&srv->shutdown_done, 1);
            continue;
        }
        if ((rs_grpc_slot *)ev.tag < w->slots || (rs_grpc_slot *)ev.tag >= w->slots + w->nslots) {
            rs_grpc_stream *st = ev.tag; /* a call a streaming method took over */
            st->on_event(st, ev.success);
            continue;
        }
        rs_grpc_slot *sl = ev.tag;
        if (sl->state == SLOT_REQUESTED) {
            if (ev.success && sl->call && !__atomic_load_n(&srv->closing, __ATOMIC_ACQUIRE))
                slot_serve(sl);
            else
                slot_finish(sl); /* server shutting down: the request was failed */
        } else if (sl->state == SLOT_REPLYING) {
            slot_finish(sl);
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

/* After gRPC refused the address: listen on it ourselves to name the cause (errno). */
static int bind_failure(const char *host, uint16_t port, const char *addr, rs_error *err) {
    int fd;
    int rc = rs_net_listen(host, port, 0, 0, &fd, err);
    if (rc) {
        rs_error_prefix(err, "grpc server");
        return rc;
    }
    close(fd);
    return rs_error_set(err, RS_EIO, "grpc server: gRPC refused to listen on %s", addr);
}

static void rs_grpc_srv_stop(void *state);

static void slot_init(rs_grpc_slot *sl, rs_grpc_worker *w, int method) {
    sl->w = w;
    sl->method = method;
    grpc_metadata_array_init(&sl->md);
    grpc_call_details_init(&sl->details);
    sl->status_text = grpc_empty_slice();
}

/* What a slot still holds once the server and its queues are gone (a zeroed slot holds nothing). */
static void slot_release(rs_grpc_slot *sl) {
    if (sl->call) grpc_call_unref(sl->call);
    if (sl->payload) grpc_byte_buffer_destroy(sl->payload);
    if (sl->reply) grpc_byte_buffer_destroy(sl->reply);
    grpc_slice_unref(sl->status_text);
    grpc_metadata_array_destroy(&sl->md);
    grpc_call_details_destroy(&sl->details);
}

static int rs_grpc_srv_start(const rs_ps_server_opts *opts, rs_ps_shard *shard, void **state,
                             rs_error *err) {
    int rc;
    char addr[300];
    rs_grpc_options o;
    *state = NULL;
    if (!opts || !shard)
        return rs_error_set(err, RS_EINVAL, "grpc server: missing options or shard");
    unsigned nthreads = opts->num_threads ? opts->num_threads : 1;
    if (nthreads > RS_GRPC_MAX_THREADS)
        return rs_error_set(err, RS_EINVAL, "grpc server: num_threads %u exceeds %d", nthreads,
                            RS_GRPC_MAX_THREADS);
    if (opts->max_connections)
        return rs_error_set(err, RS_ENOTSUP,
                            "grpc server: max_connections=%u cannot be enforced (gRPC core does "
                            "not let the application refuse connections); leave it 0",
                            opts->max_connections);
    if ((rc = rs_grpc_options_parse(opts->extra, 1, &o, err)) != 0) return rc;
    unsigned calls_per_method = o.calls_per_method;
    if ((rc = rs_grpc_format_addr(opts->host, opts->port, addr, sizeof addr, err)) != 0) return rc;
    uint64_t max_body = opts->max_body_bytes ? opts->max_body_bytes : RS_PS_DEFAULT_MAX_BODY_BYTES;
    if (max_body > INT32_MAX) max_body = INT32_MAX;

    if ((rc = rs_grpc_options_apply_process(&o, 1, err)) != 0) return rc;
    grpc_init();
    rs_grpc_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        rc = rs_error_set(err, RS_ENOMEM, "grpc server: out of memory");
        goto fail_init;
    }
    srv->shard = shard;
    srv->nworkers = nthreads;
    srv->calls_per_method = calls_per_method;
    srv->reply_timeout_ns = (uint64_t)o.reply_timeout_ms * 1000000u;
    if (opts->auth) srv->auth = *opts->auth;
    rs_eventual_init(&srv->shutdown_done);
    srv->workers = aligned_alloc(64, sizeof(rs_grpc_worker) * nthreads);
    if (!srv->workers) {
        rc = rs_error_set(err, RS_ENOMEM, "grpc server: out of memory");
        goto fail_srv;
    }
    memset(srv->workers, 0, sizeof(rs_grpc_worker) * nthreads);
    if ((rc = rs_grpc_services_create(shard, &o, &srv->svc, err)) != 0) goto fail_workers;

    grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = (int)max_body},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, .value.integer = -1},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0},
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_HTTP2_MAX_FRAME_SIZE,
         .value.integer = (int)o.max_frame_size},
    };
    grpc_channel_args cargs = {.num_args = sizeof args / sizeof args[0], .args = args};
    srv->server = grpc_server_create(&cargs, NULL);
    if (!srv->server) {
        rc = rs_error_set(err, RS_ENOMEM, "grpc server: grpc_server_create failed");
        goto fail_workers;
    }
    for (unsigned i = 0; i < nthreads; i++) {
        rs_grpc_worker *w = &srv->workers[i];
        w->srv = srv;
        w->index = i;
        pthread_mutex_init(&w->lock, NULL);
        w->cq = grpc_completion_queue_create_for_next(NULL);
        if (!w->cq) {
            rc = rs_error_set(err, RS_ENOMEM, "grpc server: cannot create a completion queue");
            goto fail_server;
        }
        grpc_server_register_completion_queue(srv->server, w->cq, NULL);
    }
    /* PSService's methods, then rs_grpc_extra_methods; slots: the unknown-path ones, then
     * calls_per_method per unary method and for PSService/Stream (a connection's streams arrive
     * together: see the top), then one per other streaming method (a stream hands its call over
     * and re-arms at once) */
    int nmethods = RS_GRPC_NUM_METHODS + (int)rs_grpc_num_extra_methods, ncalls = 0;
    int slot_methods[RS_GRPC_NUM_METHODS + RS_GRPC_MAX_EXTRA_METHODS];
    for (int m = 0; m < nmethods; m++) {
        const char *path = m < RS_GRPC_NUM_METHODS
                               ? rs_grpc_method_paths[m]
                               : rs_grpc_extra_methods[m - RS_GRPC_NUM_METHODS].path;
        srv->methods[m] = grpc_server_register_method(
            srv->server, path, NULL,
            extra_kind(m) == RS_GRPC_BIDI_STREAM ? GRPC_SRM_PAYLOAD_NONE
                                                 : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
            0);
        if (!srv->methods[m]) {
            rc = rs_error_set(err, RS_EINVAL, "grpc server: cannot register %s", path);
            goto fail_server;
        }
        if (extra_kind(m) == RS_GRPC_UNARY ||
            rs_grpc_extra_methods[m - RS_GRPC_NUM_METHODS].stream == rs_grpc_ps_stream)
            slot_methods[ncalls++] = m;
    }
    int nstream = 0;
    for (int m = 0; m < nmethods; m++)
        if (extra_kind(m) != RS_GRPC_UNARY &&
            rs_grpc_extra_methods[m - RS_GRPC_NUM_METHODS].stream != rs_grpc_ps_stream)
            slot_methods[ncalls + nstream++] = m;
    size_t nslots =
        (size_t)calls_per_method * (size_t)ncalls + (size_t)nstream + RS_GRPC_UNKNOWN_SLOTS;
    for (unsigned i = 0; i < nthreads; i++) {
        rs_grpc_worker *w = &srv->workers[i];
        w->slots = calloc(nslots, sizeof *w->slots);
        if (!w->slots) {
            rc = rs_error_set(err, RS_ENOMEM, "grpc server: out of memory for call slots");
            goto fail_server;
        }
        w->nslots = nslots;
        if (rs_grpc_slice_pool_create(calls_per_method, &w->rows) != 0) {
            rc = rs_error_set(err, RS_ENOMEM, "grpc server: out of memory for row buffers");
            goto fail_server;
        }
        for (size_t j = 0; j < nslots; j++) {
            size_t k = j - RS_GRPC_UNKNOWN_SLOTS, call_slots = (size_t)calls_per_method * ncalls;
            slot_init(&w->slots[j], w,
                      j < RS_GRPC_UNKNOWN_SLOTS ? RS_GRPC_SLOT_UNKNOWN
                      : k < call_slots          ? slot_methods[k % (size_t)ncalls]
                                                : slot_methods[ncalls + (k - call_slots)]);
        }
    }

    /* Everything that can fail before a listener exists is done: from here on, cleaning up
     * needs the server's shutdown (rs_grpc_srv_stop). */
    grpc_server_credentials *creds = NULL;
    if ((rc = rs_grpc_server_creds(&o, &creds, err))) goto fail_server;
    int port = grpc_server_add_http2_port(srv->server, addr, creds);
    grpc_server_credentials_release(creds);
    if (port <= 0) {
        rc = bind_failure(opts->host, opts->port, addr, err);
        goto fail_server;
    }
    srv->port = (uint16_t)port;
    grpc_server_start(srv->server);
    /* gRPC core made the listener: find it by its port; the connections it accepts inherit
     * what it has */
    if ((rc = rs_tcp_cc_apply_port(srv->port, 1, &o.tcp_cc, "grpc server", NULL,
                                   srv->tcp_congestion, sizeof srv->tcp_congestion, err)) < 0) {
        rs_grpc_srv_stop(srv); /* no worker runs yet: stop takes the shutdown itself */
        return rc;
    }
    for (unsigned i = 0; i < nthreads; i++) {
        rs_grpc_worker *w = &srv->workers[i];
        int prc = pthread_create(&w->thread, NULL, worker_main, w);
        if (prc != 0) {
            rs_error_errno(err, RS_EIO, prc, "grpc server: cannot start worker thread %u", i);
            rs_grpc_srv_stop(srv); /* the running workers' armed calls fail at shutdown */
            return RS_EIO;
        }
        w->thread_started = 1;
    }
    *state = srv;
    return 0;

fail_server:
    /* no listener was added, so the server can be destroyed without a shutdown */
    grpc_server_destroy(srv->server);
    for (unsigned i = 0; i < nthreads; i++) {
        rs_grpc_worker *w = &srv->workers[i];
        if (w->slots) {
            for (size_t j = 0; j < w->nslots; j++)
                slot_release(&w->slots[j]);
            free(w->slots);
        }
        rs_grpc_slice_pool_release(w->rows);
        if (w->srv) pthread_mutex_destroy(&w->lock);
        if (w->cq) {
            grpc_completion_queue_shutdown(w->cq);
            while (
                grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
                GRPC_QUEUE_SHUTDOWN) {
            }
            grpc_completion_queue_destroy(w->cq);
        }
    }
fail_workers:
    rs_grpc_services_destroy(srv->svc);
    free(srv->workers);
fail_srv:
    free(srv);
fail_init:
    grpc_shutdown();
    return rc;
}

static uint16_t rs_grpc_srv_bound_port(void *state) {
    return ((rs_grpc_server *)state)->port;
}

static void rs_grpc_srv_stop(void *state) {
    rs_grpc_server *srv = state;
    if (!srv) return;
    __atomic_store_n(&srv->shutting, 1, __ATOMIC_RELEASE);
    rs_grpc_services_stopping(srv->svc); /* health: NOT_SERVING, told to Watch streams */
    grpc_server_shutdown_and_notify(srv->server, srv->workers[0].cq, &srv->shutdown_tag);
    grpc_server_cancel_all_calls(srv->server);
    if (srv->workers[0].thread_started) {
        rs_eventual_wait(&srv->shutdown_done, RS_WAIT_BLOCK, UINT64_MAX, NULL);
    } else {
        /* start() failed to create worker 0 (no worker runs, no call is armed): take the
         * notification here */
        grpc_event ev;
        do
            ev = grpc_completion_queue_next(srv->workers[0].cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                            NULL);
        while (!(ev.type == GRPC_OP_COMPLETE && ev.tag == &srv->shutdown_tag));
    }
    /* no batch may start on a CQ once it is shut down: set `closing`, then wait for every
     * worker's event in progress to end (its lock) — from then on none starts a batch — and only
     * then shut the CQs down */
    __atomic_store_n(&srv->closing, 1, __ATOMIC_RELEASE);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        pthread_mutex_lock(&srv->workers[i].lock);
        pthread_mutex_unlock(&srv->workers[i].lock);
    }
    for (unsigned i = 0; i < srv->nworkers; i++)
        grpc_completion_queue_shutdown(srv->workers[i].cq);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        rs_grpc_worker *w = &srv->workers[i];
        if (w->thread_started) {
            pthread_join(w->thread, NULL);
        } else {
            while (
                grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
                GRPC_QUEUE_SHUTDOWN) {
            }
        }
    }
    grpc_server_destroy(srv->server);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        rs_grpc_worker *w = &srv->workers[i];
        for (size_t j = 0; j < w->nslots; j++)
            slot_release(&w->slots[j]);
        free(w->slots);
        free(w->scratch.buf);
        rs_grpc_slice_pool_release(w->rows);
        grpc_completion_queue_destroy(w->cq);
        pthread_mutex_destroy(&w->lock);
    }
    rs_grpc_services_destroy(srv->svc);
    free(srv->workers);
    free(srv);
    grpc_shutdown();
}

static void rs_grpc_srv_stats(void *state, rs_ps_transport_stats *out) {
    rs_grpc_server *srv = state;
    memset(out, 0, sizeof *out);
    snprintf(out->tcp_congestion, sizeof out->tcp_congestion, "%s", srv->tcp_congestion);
    /* gRPC core does not report connection events to the application: connections_* stay 0;
     * worker_connections_* count open PS streams (one per client connection that uses one) */
    out->worker_connections_min = UINT64_MAX;
    for (unsigned i = 0; i < srv->nworkers; i++) {
        rs_grpc_counters *c = &srv->workers[i].ctr;
        uint64_t streams = __atomic_load_n(&c->streams, __ATOMIC_RELAXED);
        if (streams > out->worker_connections_max) out->worker_connections_max = streams;
        if (streams < out->worker_connections_min) out->worker_connections_min = streams;
        out->requests += __atomic_load_n(&c->requests, __ATOMIC_RELAXED);
        out->bad_frames += __atomic_load_n(&c->bad_frames, __ATOMIC_RELAXED);
        out->bytes_in += __atomic_load_n(&c->bytes_in, __ATOMIC_RELAXED);
        out->bytes_out += __atomic_load_n(&c->bytes_out, __ATOMIC_RELAXED);
        out->auth_failures += __atomic_load_n(&c->auth_failures, __ATOMIC_RELAXED);
    }
}

const rs_ps_server_ops rs_grpc_server_ops = {
    .name = "grpc",
    .start = rs_grpc_srv_start,
    .bound_port = rs_grpc_srv_bound_port,
    .stop = rs_grpc_srv_stop,
    .stats = rs_grpc_srv_stats,
};

#endif /* RS_HAVE_GRPC */

/*
 * grpc_health.c — grpc.health.v1.Health on the gRPC transport.
 *
 * Check answers SERVING for the whole server ("") and for each served service while the server
 * runs, NOT_SERVING once it stops, NOT_FOUND for other names. Watch sends the current status at
 * once and again whenever it changes (the only change is to NOT_SERVING when the server stops),
 * and SERVICE_UNKNOWN, without ending the stream, for unknown names, as gRPC's health protocol
 * says.
 *
 * A Watch stream owns its call and has two tags: `send` (initial metadata + one status message
 * per batch; at most one in flight) and `close` (RECV_CLOSE_ON_SERVER, completes when the client
 * goes away or the server cancels the call). Stream state is guarded by the services lock,
 * because rs_grpc_health_stopping starts sends from the stopping thread; completions arrive on
 * the worker that accepted the call. A stream is freed once `close` completed and no send is in
 * flight.
 */
#if RS_HAVE_GRPC

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/pb_wire.h"
#include "transport/grpc_services.h"

enum { ST_UNKNOWN = 0, ST_SERVING = 1, ST_NOT_SERVING = 2, ST_SERVICE_UNKNOWN = 3 };

struct rs_grpc_watch {
    rs_grpc_stream send, close;
    rs_grpc_services *svc;
    grpc_call *call;
    grpc_byte_buffer *out;
    int known;     /* the watched service exists */
    int sending;   /* a send batch is in flight */
    int metadata;  /* initial metadata sent */
    int sent;      /* last status sent (-1 none) */
    int closed;    /* close completed */
    int cancelled; /* written by gRPC */
    rs_grpc_watch *next;
};

static int service_known(const uint8_t *name, size_t len) {
    if (len == 0) return 1;
    for (size_t i = 0; i < rs_grpc_num_served_services; i++)
        if (strlen(rs_grpc_served_services[i]) == len &&
            memcmp(rs_grpc_served_services[i], name, len) == 0)
            return 1;
    return 0;
}

/* HealthCheckRequest { 1: string service } */
static int decode_request(const uint8_t *msg, size_t len, const uint8_t **name, size_t *name_len,
                          rs_error *err) {
    static const uint8_t empty[1];
    rs_pb_reader r = {msg ? msg : empty, (msg ? msg : empty) + len, "HealthCheckRequest", err};
    *name = NULL;
    *name_len = 0;
    while (r.p < r.end) {
        unsigned field, wt;
        int rc = rs_pb_get_tag(&r, &field, &wt);
        if (!rc)
            rc = field == 1 ? rs_pb_get_bytes(&r, wt, "service", name, name_len)
                            : rs_pb_skip_field(&r, field, wt);
        if (rc) return rc;
    }
    return 0;
}

/* HealthCheckResponse { 1: ServingStatus status } */
static grpc_byte_buffer *status_message(int status) {
    uint8_t buf[4];
    size_t n = (size_t)(rs_pb_put_vfield(buf, 1, (uint64_t)status) - buf);
    return rs_grpc_message_copy(buf, n);
}

void rs_grpc_health_check(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out) {
    const uint8_t *name;
    size_t len;
    rs_error e = {0};
    if (decode_request(req->data, req->len, &name, &len, &e)) {
        rs_grpc_reply_error(out, GRPC_STATUS_INVALID_ARGUMENT, "%s", e.msg);
        return;
    }
    if (!service_known(name, len)) {
        rs_grpc_reply_error(out, GRPC_STATUS_NOT_FOUND,
                            "grpc.health.v1.Health/Check: unknown service '%.*s'",
                            (int)(len > 200 ? 200 : len), (const char *)name);
        return;
    }
    pthread_mutex_lock(&c->svc->lock);
    int serving = c->svc->serving;
    pthread_mutex_unlock(&c->svc->lock);
    out->msg = status_message(serving ? ST_SERVING : ST_NOT_SERVING);
    out->status = GRPC_STATUS_OK;
}

/* Under svc->lock. */
static int watch_status(const rs_grpc_watch *w) {
    if (!w->known) return ST_SERVICE_UNKNOWN;
    return w->svc->serving ? ST_SERVING : ST_NOT_SERVING;
}

/* Under svc->lock: send the current status if it differs from the last one sent. */
static void watch_push(rs_grpc_watch *w) {
    int want = watch_status(w);
    if (w->sending || w->closed || want == w->sent) return;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    if (!w->metadata) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        n++;
        w->metadata = 1;
    }
    w->out = status_message(want);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = w->out;
    n++;
    if (grpc_call_start_batch(w->call, ops, n, &w->send, NULL) == GRPC_CALL_OK) {
        w->sending = 1;
        w->sent = want;
    } else {
        grpc_byte_buffer_destroy(w->out);
        w->out = NULL;
    }
}

/* Under svc->lock: free the stream once nothing of it is in flight. */
static int watch_maybe_free(rs_grpc_watch *w) {
    if (!w->closed || w->sending) return 0;
    for (rs_grpc_watch **pp = &w->svc->watchers; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    grpc_call_unref(w->call);
    free(w);
    return 1;
}

static void on_send(rs_grpc_stream *tag, int ok) {
    rs_grpc_watch *w = (rs_grpc_watch *)((char *)tag - offsetof(rs_grpc_watch, send));
    rs_grpc_services *svc = w->svc;
    pthread_mutex_lock(&svc->lock);
    w->sending = 0;
    if (w->out) grpc_byte_buffer_destroy(w->out);
    w->out = NULL;
    if (ok) watch_push(w);
    pthread_cond_broadcast(&svc->changed);
    watch_maybe_free(w);
    pthread_mutex_unlock(&svc->lock);
}

static void on_close(rs_grpc_stream *tag, int ok) {
    rs_grpc_watch *w = (rs_grpc_watch *)((char *)tag - offsetof(rs_grpc_watch, close));
    rs_grpc_services *svc = w->svc;
    pthread_mutex_lock(&svc->lock);
    w->closed = 1;
    pthread_cond_broadcast(&svc->changed);
    watch_maybe_free(w);
    pthread_mutex_unlock(&svc->lock);
}

int rs_grpc_health_watch(rs_grpc_call_ctx *c, grpc_call *call, grpc_byte_buffer *payload) {
    rs_grpc_scratch scratch = {0};
    rs_grpc_span req = {0};
    const uint8_t *name = NULL;
    size_t len = 0;
    rs_error e = {0};
    int bad = !payload || rs_grpc_message_span(payload, &scratch, &req, &e) != 0 ||
              decode_request(req.data, req.len, &name, &len, &e) != 0;
    int known = !bad && service_known(name, len);
    free(scratch.buf);
    if (payload) grpc_byte_buffer_destroy(payload);
    rs_grpc_watch *w = bad ? NULL : calloc(1, sizeof *w);
    if (!w) {
        grpc_call_cancel_with_status(call, GRPC_STATUS_INVALID_ARGUMENT,
                                     "grpc.health.v1.Health/Watch: bad HealthCheckRequest", NULL);
        grpc_call_unref(call);
        return 0;
    }
    w->send.on_event = on_send;
    w->close.on_event = on_close;
    w->svc = c->svc;
    w->call = call;
    w->known = known;
    w->sent = -1;
    pthread_mutex_lock(&c->svc->lock);
    if (rs_grpc_stream_on_close(call, &w->cancelled, &w->close) != 0) {
        pthread_mutex_unlock(&c->svc->lock);
        grpc_call_unref(call);
        free(w);
        return 0;
    }
    w->next = c->svc->watchers;
    c->svc->watchers = w;
    watch_push(w);
    pthread_mutex_unlock(&c->svc->lock);
    return 0;
}

void rs_grpc_health_stopping(rs_grpc_services *svc) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)RS_GRPC_NOT_SERVING_WAIT_MS % 1000 * 1000000L;
    until.tv_sec += RS_GRPC_NOT_SERVING_WAIT_MS / 1000 + until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&svc->lock);
    svc->serving = 0;
    for (rs_grpc_watch *w = svc->watchers; w; w = w->next)
        watch_push(w);
    for (;;) {
        int pending = 0;
        for (rs_grpc_watch *w = svc->watchers; w; w = w->next)
            if (!w->closed && (w->sending || w->sent != watch_status(w))) pending = 1;
        if (!pending) break;
        if (pthread_cond_timedwait(&svc->changed, &svc->lock, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&svc->lock);
}

#endif /* RS_HAVE_GRPC */

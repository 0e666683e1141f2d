/*
 * grpc_ps_stream.c — /recstore.PSService/Stream: PSService's four methods on one bidirectional
 * gRPC stream. Each PSRequest names its method (field 8) and gets one PSResponse, in the order
 * the requests came. A unary call pays gRPC core's per-call work (creating the call, its filter
 * stack, metadata both ways, the status) on every request; a stream pays it once, and then each
 * request is one message each way (docs/grpc.md has the figures).
 *
 * One stream, three tags, all completing on the worker that took the call (so no lock):
 *   recv   SEND_INITIAL_METADATA + RECV_MESSAGE first, then RECV_MESSAGE; one in flight
 *   send   SEND_MESSAGE of a reply, or at the end SEND_STATUS_FROM_SERVER OK; one in flight
 *   close  RECV_CLOSE_ON_SERVER: the call is over (ended, or cancelled by either side)
 * A request is answered as soon as it arrives; while the previous reply is still being sent, the
 * new reply waits in `queued` and the next request is not read until it leaves, so a client that
 * stops reading holds at most two replies of this server's memory and no call slot (HTTP/2 flow
 * control then stops the client's sends). The client's half-close (RECV_MESSAGE with no message)
 * is answered with status OK once the last reply is out. Freed when close completed and no batch
 * is in flight; a server stop cancels the call, which completes all three.
 */
#if RS_HAVE_GRPC

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "transport/grpc_services.h"

typedef struct ps_stream {
    rs_grpc_stream recv_tag, send_tag, close_tag;
    rs_grpc_call_ctx ctx;
    grpc_call *call;
    grpc_byte_buffer *in;     /* RECV_MESSAGE's result */
    grpc_byte_buffer *out;    /* the reply being sent */
    grpc_byte_buffer *queued; /* the next reply, waiting for `out` to leave */
    int recving, sending;     /* a batch is in flight on recv_tag / send_tag */
    int half_closed;          /* the client sent all its requests */
    int status_sent;
    int failed; /* a batch failed: the call is broken, start nothing more */
    int closed; /* close_tag completed */
    int cancelled;
} ps_stream;

static ps_stream *of(rs_grpc_stream *tag, size_t offset) {
    return (ps_stream *)((char *)tag - offset);
}

static void maybe_free(ps_stream *s) {
    if (!s->closed || s->recving || s->sending) return;
    RS_GRPC_CTR_ADD(s->ctx.ctr->streams, (uint64_t)-1);
    if (s->in) grpc_byte_buffer_destroy(s->in);
    if (s->out) grpc_byte_buffer_destroy(s->out);
    if (s->queued) grpc_byte_buffer_destroy(s->queued);
    grpc_call_unref(s->call);
    free(s);
}

static void start_recv(ps_stream *s, int with_metadata) {
    s->recving = 1;
    if (rs_grpc_stream_recv(s->call, with_metadata, &s->in, &s->recv_tag) != 0) {
        s->recving = 0;
        s->failed = 1;
    }
}

static void start_send(ps_stream *s, grpc_byte_buffer *reply) {
    s->out = reply;
    s->sending = 1;
    if (rs_grpc_stream_send(s->call, reply, &s->send_tag) != 0) {
        s->sending = 0;
        s->failed = 1;
    }
}

static void start_status(ps_stream *s) {
    s->status_sent = 1;
    s->sending = 1;
    if (rs_grpc_stream_status_ok(s->call, &s->send_tag) != 0) {
        s->sending = 0;
        s->failed = 1;
    }
}

static void on_recv(rs_grpc_stream *tag, int ok) {
    ps_stream *s = of(tag, offsetof(ps_stream, recv_tag));
    s->recving = 0;
    if (!ok || s->failed) {
        s->failed = 1;
    } else if (!s->in) {
        s->half_closed = 1;
        if (!s->sending) start_status(s);
    } else {
        grpc_byte_buffer *reply = rs_grpc_ps_reply(&s->ctx, RS_PS_OP_FROM_MESSAGE, s->in);
        grpc_byte_buffer_destroy(s->in);
        s->in = NULL;
        RS_GRPC_CTR_ADD(s->ctx.ctr->requests, 1);
        if (!reply) {
            s->failed = 1;
            grpc_call_cancel_with_status(s->call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                         "recstore.PSService/Stream: server out of memory", NULL);
        } else if (s->sending) {
            s->queued = reply; /* read on when it has left */
        } else {
            start_send(s, reply);
            if (!s->failed) start_recv(s, 0);
        }
    }
    maybe_free(s);
}

static void on_send(rs_grpc_stream *tag, int ok) {
    ps_stream *s = of(tag, offsetof(ps_stream, send_tag));
    s->sending = 0;
    if (s->out) {
        grpc_byte_buffer_destroy(s->out);
        s->out = NULL;
    }
    if (!ok || s->failed) {
        s->failed = 1;
    } else if (s->queued) {
        grpc_byte_buffer *reply = s->queued;
        s->queued = NULL;
        start_send(s, reply);
        if (!s->failed && !s->half_closed && !s->recving) start_recv(s, 0);
    } else if (s->half_closed && !s->status_sent) {
        start_status(s);
    }
    maybe_free(s);
}

static void on_close(rs_grpc_stream *tag, int ok) {
    (void)ok;
    ps_stream *s = of(tag, offsetof(ps_stream, close_tag));
    s->closed = 1;
    maybe_free(s);
}

int rs_grpc_ps_stream(rs_grpc_call_ctx *c, grpc_call *call, grpc_byte_buffer *payload) {
    if (payload) grpc_byte_buffer_destroy(payload); /* a bidi method reads nothing up front */
    if (!c->svc->ps_stream) { /* clients fall back to unary calls on UNIMPLEMENTED */
        grpc_call_cancel_with_status(call, GRPC_STATUS_UNIMPLEMENTED,
                                     "recstore.PSService/Stream is off on this server (transport "
                                     "option stream=0): use the unary methods",
                                     NULL);
        grpc_call_unref(call);
        return 0;
    }
    ps_stream *s = calloc(1, sizeof *s);
    if (!s) {
        grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                     "recstore.PSService/Stream: server out of memory", NULL);
        grpc_call_unref(call);
        return 0;
    }
    s->recv_tag.on_event = on_recv;
    s->send_tag.on_event = on_send;
    s->close_tag.on_event = on_close;
    s->ctx = *c;
    s->call = call;
    if (rs_grpc_stream_on_close(call, &s->cancelled, &s->close_tag) != 0) {
        grpc_call_unref(call);
        free(s);
        return 0;
    }
    RS_GRPC_CTR_ADD(s->ctx.ctr->streams, 1); /* until maybe_free frees it */
    start_recv(s, 1);
    if (s->failed)
        grpc_call_cancel_with_status(call, GRPC_STATUS_INTERNAL,
                                     "recstore.PSService/Stream: cannot read", NULL);
    return 0;
}

#endif /* RS_HAVE_GRPC */

/*
 * grpc_services.c — the table of methods the gRPC server serves beyond recstore.PSService
 * (grpc_services.h), their per-server state, and the helpers their handlers share.
 */
#if RS_HAVE_GRPC

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/grpc_services.h"

void rs_grpc_health_stopping(rs_grpc_services *s); /* grpc_health.c */

const rs_grpc_method_def rs_grpc_extra_methods[] = {
    {RS_GRPC_STREAM_PATH, RS_GRPC_BIDI_STREAM, NULL, rs_grpc_ps_stream},
    {"/recstoreps.ParameterService/GetParameter", RS_GRPC_UNARY, rs_grpc_rs_get, NULL},
    {"/recstoreps.ParameterService/PutParameter", RS_GRPC_UNARY, rs_grpc_rs_put, NULL},
    {"/recstoreps.ParameterService/UpdateParameter", RS_GRPC_UNARY, rs_grpc_rs_update, NULL},
    {"/recstoreps.ParameterService/InitEmbeddingTable", RS_GRPC_UNARY, rs_grpc_rs_init_table, NULL},
    {"/recstoreps.ParameterService/Command", RS_GRPC_UNARY, rs_grpc_rs_command, NULL},
    /* health answers probes that cannot send a token (docs/security.md) */
    {"/grpc.health.v1.Health/Check", RS_GRPC_UNARY, rs_grpc_health_check, NULL, 1},
    {"/grpc.health.v1.Health/Watch", RS_GRPC_SERVER_STREAM, NULL, rs_grpc_health_watch, 1},
#if RS_HAVE_PROTOBUF_C
    {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", RS_GRPC_BIDI_STREAM, NULL,
     rs_grpc_reflection_info},
    {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", RS_GRPC_BIDI_STREAM, NULL,
     rs_grpc_reflection_info},
#endif
};
const size_t rs_grpc_num_extra_methods =
    sizeof rs_grpc_extra_methods / sizeof rs_grpc_extra_methods[0];

const char *const rs_grpc_served_services[] = {
    "recstore.PSService",
    "recstoreps.ParameterService",
    "grpc.health.v1.Health",
#if RS_HAVE_PROTOBUF_C
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
#endif
};
const size_t rs_grpc_num_served_services =
    sizeof rs_grpc_served_services / sizeof rs_grpc_served_services[0];

int rs_grpc_services_create(rs_ps_shard *shard, const rs_grpc_options *o, rs_grpc_services **out,
                            rs_error *err) {
    int rc;
    *out = NULL;
    rs_grpc_services *s = calloc(1, sizeof *s);
    if (!s) return rs_error_set(err, RS_ENOMEM, "grpc server: out of memory");
    if ((rc = rs_rsps_create(shard, &o->optimizer, &s->rsps, err)) != 0) goto fail_free;
    if ((rc = pthread_mutex_init(&s->lock, NULL)) != 0) {
        rc = rs_error_errno(err, RS_ENOMEM, rc, "grpc server: health lock");
        goto fail_rsps;
    }
    if ((rc = pthread_cond_init(&s->changed, NULL)) != 0) {
        rc = rs_error_errno(err, RS_ENOMEM, rc, "grpc server: health condition");
        goto fail_lock;
    }
    s->serving = 1;
    s->ps_stream = (int)o->stream;
    *out = s;
    return 0;
fail_lock:
    pthread_mutex_destroy(&s->lock);
fail_rsps:
    rs_rsps_destroy(s->rsps);
fail_free:
    free(s);
    return rc;
}

void rs_grpc_services_stopping(rs_grpc_services *s) {
    if (s) rs_grpc_health_stopping(s);
}

void rs_grpc_services_destroy(rs_grpc_services *s) {
    if (!s) return;
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    rs_rsps_destroy(s->rsps);
    free(s);
}

void rs_grpc_reply_error(rs_grpc_unary_reply *out, grpc_status_code st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->details, sizeof out->details, fmt, ap);
    va_end(ap);
    out->status = st;
    if (out->msg) grpc_byte_buffer_destroy(out->msg);
    out->msg = NULL;
}

_Thread_local const int *rs_grpc_worker_closing;

/* A stream's batches: refused (-1, as a failed start) on a worker whose CQ stop() has shut down,
 * whose queued events are only drained (grpc_server.c). */
static int start_batch(grpc_call *call, const grpc_op *ops, size_t n, void *tag) {
    if (rs_grpc_worker_closing && __atomic_load_n(rs_grpc_worker_closing, __ATOMIC_ACQUIRE))
        return -1;
    return grpc_call_start_batch(call, ops, n, tag, NULL) == GRPC_CALL_OK ? 0 : -1;
}

int rs_grpc_stream_recv(grpc_call *call, int with_metadata, grpc_byte_buffer **in, void *tag) {
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    if (with_metadata) ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n].data.recv_message.recv_message = in;
    return start_batch(call, ops, n + 1, tag);
}

int rs_grpc_stream_send(grpc_call *call, grpc_byte_buffer *msg, void *tag) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = msg;
    return start_batch(call, &op, 1, tag);
}

int rs_grpc_stream_status_ok(grpc_call *call, void *tag) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    op.data.send_status_from_server.status = GRPC_STATUS_OK;
    return start_batch(call, &op, 1, tag);
}

int rs_grpc_stream_on_close(grpc_call *call, int *cancelled, void *tag) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = cancelled;
    return start_batch(call, &op, 1, tag);
}

grpc_byte_buffer *rs_grpc_message_copy(const void *data, size_t len) {
    grpc_slice sl = len ? grpc_slice_from_copied_buffer(data, len) : grpc_empty_slice();
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    return bb;
}

#endif /* RS_HAVE_GRPC */

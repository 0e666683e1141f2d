/*
 * grpc_recstore.c — recstoreps.ParameterService on the gRPC transport: each unary call runs
 * through the shared RecStore call (recstore_msg.c) with the worker's thread slot. The
 * GetParameter block and LOAD_FAKE_DATA bytes are written straight into a pooled buffer lent to
 * gRPC as a slice; the reply message is the field head followed by that slice, so rows are copied
 * once, from the engine into the reply. Errors RecStore's server answers with success=false stay
 * so; what it would abort on, or cannot honour here, is a gRPC status naming the cause.
 */
#if RS_HAVE_GRPC

#include <string.h>

#include "recstore/recstore_msg.h"
#include "transport/grpc_services.h"

typedef struct pooled {
    rs_grpc_slice_pool *pool;
    grpc_slice slice;
    int have;
} pooled;

static uint8_t *pooled_alloc(void *ctx, size_t cap) {
    pooled *p = ctx;
    if (rs_grpc_slice_pool_get(p->pool, cap, &p->slice) != 0) return NULL;
    p->have = 1;
    return GRPC_SLICE_START_PTR(p->slice);
}

static grpc_status_code status_of(rs_rsps_code c) {
    switch (c) {
    case RS_RSPS_OK: return GRPC_STATUS_OK;
    case RS_RSPS_INVALID: return GRPC_STATUS_INVALID_ARGUMENT;
    case RS_RSPS_UNSUPPORTED: return GRPC_STATUS_UNIMPLEMENTED;
    case RS_RSPS_CAPACITY: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case RS_RSPS_PRECONDITION: return GRPC_STATUS_FAILED_PRECONDITION;
    case RS_RSPS_INTERNAL: break;
    }
    return GRPC_STATUS_INTERNAL;
}

static void call(rs_grpc_call_ctx *c, rs_rsmsg_method m, const rs_grpc_span *req,
                 rs_grpc_unary_reply *out) {
    pooled p = {.pool = c->pool};
    rs_rsmsg_alloc alloc = {pooled_alloc, &p};
    rs_rsmsg_reply r;
    rs_rsmsg_call(c->svc->rsps, m, req->data, req->len, NULL, 0, 0, c->thread, &alloc, &r);
    if (r.res.code != RS_RSPS_OK) {
        rs_grpc_reply_error(out, status_of(r.res.code), "recstoreps.ParameterService/%s: %s",
                            rs_rsmsg_method_name(m), r.res.msg);
    } else {
        grpc_slice parts[2];
        size_t n = 0;
        if (r.head_len)
            parts[n++] = grpc_slice_from_copied_buffer((const char *)r.head, r.head_len);
        if (r.payload_len)
            parts[n++] = GRPC_SLICE_LENGTH(p.slice) == r.payload_len
                             ? grpc_slice_ref(p.slice)
                             : grpc_slice_sub(p.slice, 0, r.payload_len);
        if (!n) parts[n++] = grpc_empty_slice();
        out->msg = grpc_raw_byte_buffer_create(parts, n);
        for (size_t i = 0; i < n; i++)
            grpc_slice_unref(parts[i]);
        out->status = GRPC_STATUS_OK;
    }
    if (p.have) grpc_slice_unref(p.slice);
}

void rs_grpc_rs_get(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out) {
    call(c, RS_RSMSG_GET, req, out);
}

void rs_grpc_rs_put(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out) {
    call(c, RS_RSMSG_PUT, req, out);
}

void rs_grpc_rs_update(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out) {
    call(c, RS_RSMSG_UPDATE, req, out);
}

void rs_grpc_rs_init_table(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out) {
    call(c, RS_RSMSG_INIT, req, out);
}

void rs_grpc_rs_command(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out) {
    call(c, RS_RSMSG_COMMAND, req, out);
}

#endif /* RS_HAVE_GRPC */

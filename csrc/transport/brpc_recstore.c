/*
 * brpc_recstore.c — recstoreps_brpc.ParameterService over baidu_std: RecStore's bRPC service,
 * served by recbench's brpc server next to recstore.PSService on the same port.
 *
 * As RecStore's bRPC client sends them, keys (GetParameter) and row blocks (PutParameter,
 * UpdateParameter) travel in the request attachment with the message's bytes field empty; the
 * field form is accepted too (the attachment wins when non-empty). The GetParameter block goes
 * back in the response attachment with an empty GetParameterResponse. PS-level outcomes follow
 * RecStore: Update/Init refusals are success=false in an OK response; what RecStore's server
 * would answer with cntl->SetFailed, crash on, or recbench cannot honour is an RPC error
 * (RpcResponseMeta.error_code, a bRPC caller sees Failed() == true):
 *
 *   EINVAL (22)        malformed or unacceptable input: zero keys, keys not a multiple of 8 bytes,
 *                      a row block whose offsets do not add up, wrong dims, bad command args,
 *                      unknown PSCommand (RecStore's own Command errors are EINVAL too)
 *   EOPNOTSUPP (95)    RELOAD_PS; SAVE/LOAD_CHECKPOINT on a server without a checkpoint root
 *   ENOSPC (28)        the shard is full
 *   2001 (EINTERNAL)   engine failure
 */
#if RS_HAVE_PROTOBUF_C

#include <stdio.h>
#include <string.h>

#include "transport/brpc_frame.h"

int rs_brpc_recstore_call(rs_rsps *s, const char *method, const uint8_t *msg, size_t len,
                          const uint8_t *att, size_t att_len, unsigned thread_slot,
                          const rs_rsmsg_alloc *alloc, rs_rsmsg_reply *r, int *error_code,
                          int *payload_in_attachment) {
    rs_rsmsg_method m;
    *error_code = 0;
    *payload_in_attachment = 0;
    if (rs_rsmsg_method_from_name(method, strlen(method), &m)) {
        memset(r, 0, sizeof *r);
        snprintf(r->res.msg, sizeof r->res.msg,
                 "unknown method '%.100s' of %s (expected GetParameter, PutParameter, "
                 "UpdateParameter, InitEmbeddingTable or Command)",
                 method, RS_BRPC_RECSTORE_SERVICE);
        *error_code = RS_BRPC_ENOMETHOD;
        return 0;
    }
    *payload_in_attachment = m == RS_RSMSG_GET;
    rs_rsmsg_call(s, m, msg, len, att, att_len, m == RS_RSMSG_GET, thread_slot, alloc, r);
    switch (r->res.code) {
    case RS_RSPS_OK: break;
    case RS_RSPS_INVALID:
    case RS_RSPS_PRECONDITION: *error_code = 22; break;
    case RS_RSPS_UNSUPPORTED: *error_code = 95; break;
    case RS_RSPS_CAPACITY: *error_code = 28; break;
    case RS_RSPS_INTERNAL: *error_code = RS_BRPC_EINTERNAL; break;
    }
    return 0;
}

#endif /* RS_HAVE_PROTOBUF_C */

/*
 * recstore_msg.c — one RecStore ParameterService call, whatever the transport: decodes the
 * request message (csrc/proto/recstore_ps.proto, hand-written protobuf codec, zero-copy), runs it
 * on the shard's RecStore service (recstore_ps.c) and encodes the reply.
 *
 * The reply is a short message head plus, for GetParameter and LOAD_FAKE_DATA, a payload the
 * service writes straight into a buffer the transport provides (alloc): inline, the head is the
 * field's tag and length and the payload follows it (gRPC; baidu_std Command); in the attachment,
 * the GetParameter message is empty and the payload is the attachment (baidu_std). Request
 * payloads (keys, blocks) may arrive in an attachment too: then it is used when non-empty and the
 * proto field otherwise, as RecStore's bRPC server does.
 *
 *   GetParameterRequest        1 keys (bytes)          | GetParameterResponse    1 parameter_value
 *   PutParameterRequest        2 parameter_value        | PutParameterResponse    (empty)
 *   UpdateParameterRequest     1 table_name, 2 gradients| UpdateParameterResponse 1 success
 * (always) InitEmbeddingTableRequest  1 table_name, 2 config   | InitEmbeddingTableResponse 1
 * success, 2 tag CommandRequest             1 command, 2/3/4 args    | CommandResponse         1
 * reply
 */
#include <stdio.h>
#include <string.h>

#include "common/pb_wire.h"
#include "recstore/recstore_msg.h"

static const char *const method_names[RS_RSMSG_NUM_METHODS] = {
    "GetParameter", "PutParameter", "UpdateParameter", "InitEmbeddingTable", "Command",
};

const char *rs_rsmsg_method_name(rs_rsmsg_method m) {
    return (unsigned)m < RS_RSMSG_NUM_METHODS ? method_names[m] : "Unknown";
}

int rs_rsmsg_method_from_name(const char *name, size_t len, rs_rsmsg_method *out) {
    for (int i = 0; i < RS_RSMSG_NUM_METHODS; i++)
        if (strlen(method_names[i]) == len && memcmp(method_names[i], name, len) == 0) {
            *out = (rs_rsmsg_method)i;
            return 0;
        }
    return RS_EINVAL;
}

static const char *const request_names[RS_RSMSG_NUM_METHODS] = {
    "GetParameterRequest",       "PutParameterRequest", "UpdateParameterRequest",
    "InitEmbeddingTableRequest", "CommandRequest",
};

int rs_rsmsg_decode(rs_rsmsg_method m, const uint8_t *msg, size_t len, rs_rsmsg_request *out,
                    rs_error *err) {
    static const uint8_t empty[1];
    memset(out, 0, sizeof *out);
    if (!msg) msg = empty;
    rs_pb_reader r = {msg, msg + len, request_names[m], err};
    while (r.p < r.end) {
        unsigned field = 0, wt = 0;
        int rc = rs_pb_get_tag(&r, &field, &wt);
        if (rc) return rc;
        const uint8_t *d = NULL;
        size_t n = 0;
        uint64_t v = 0;
        switch (m * 8 + field) {
        case RS_RSMSG_GET * 8 + 1:
            rc = rs_pb_get_bytes(&r, wt, "keys", &out->payload, &out->payload_len);
            out->has_payload = 1;
            break;
        case RS_RSMSG_PUT * 8 + 2:
            rc = rs_pb_get_bytes(&r, wt, "parameter_value", &out->payload, &out->payload_len);
            out->has_payload = 1;
            break;
        case RS_RSMSG_UPDATE * 8 + 2:
            rc = rs_pb_get_bytes(&r, wt, "gradients", &out->payload, &out->payload_len);
            out->has_payload = 1;
            break;
        case RS_RSMSG_INIT * 8 + 2:
            rc = rs_pb_get_bytes(&r, wt, "config_payload", &out->payload, &out->payload_len);
            out->has_payload = 1;
            break;
        case RS_RSMSG_UPDATE * 8 + 1:
        case RS_RSMSG_INIT * 8 + 1:
            rc = rs_pb_get_bytes(&r, wt, "table_name", &d, &out->table_len);
            out->table = (const char *)d;
            break;
        case RS_RSMSG_COMMAND * 8 + 1:
            if (wt != RS_PB_VARINT) return rs_pb_wrong_type(&r, "command", wt);
            rc = rs_pb_get_varint(&r, &v, "command");
            out->cmd.command = (int64_t)(int32_t)(uint32_t)v; /* enum: int32 on the wire */
            break;
        case RS_RSMSG_COMMAND * 8 + 2:
        case RS_RSMSG_COMMAND * 8 + 3: {
            rc = rs_pb_get_bytes(&r, wt, field == 2 ? "arg1" : "arg2", &d, &n);
            uint32_t *cnt = field == 2 ? &out->cmd.n_arg1 : &out->cmd.n_arg2;
            rs_rsps_bytes *arr = field == 2 ? out->cmd.arg1 : out->cmd.arg2;
            if (!rc && *cnt < RS_RSPS_MAX_ARGS) arr[*cnt] = (rs_rsps_bytes){d, n};
            if (!rc) (*cnt)++;
            break;
        }
        case RS_RSMSG_COMMAND * 8 + 4:
            rc = rs_pb_get_bytes(&r, wt, "arg3", &d, &n);
            if (!rc) out->cmd.n_arg3++;
            break;
        default: rc = rs_pb_skip_field(&r, field, wt); break;
        }
        if (rc) return rc;
    }
    return 0;
}

static size_t head(uint8_t *out, unsigned field, size_t len) {
    return (size_t)(rs_pb_put_lhead(out, field, len) - out);
}

int rs_rsmsg_call(rs_rsps *s, rs_rsmsg_method m, const uint8_t *msg, size_t len,
                  const uint8_t *attachment, size_t attachment_len, int reply_in_attachment,
                  unsigned thread_slot, const rs_rsmsg_alloc *alloc, rs_rsmsg_reply *r) {
    rs_rsmsg_request q;
    rs_error e = {0};
    memset(r, 0, sizeof *r);
    r->res.code = RS_RSPS_OK;
    int rc = rs_rsmsg_decode(m, msg, len, &q, &e);
    if (rc) {
        r->res.code = RS_RSPS_INVALID;
        snprintf(r->res.msg, sizeof r->res.msg, "%s", e.msg);
        rs_ps_shard_count(rs_rsps_shard(s), thread_slot, RS_PS_COMMAND, 0, 0, 1);
        return 0;
    }
    if (attachment_len) { /* RecStore's bRPC form: the attachment wins when non-empty */
        q.payload = attachment;
        q.payload_len = attachment_len;
        q.has_payload = 1;
    }
    uint8_t *h = r->head;
    switch (m) {
    case RS_RSMSG_GET: {
        size_t cap = rs_rsps_get_reply_max(s, q.payload_len);
        uint8_t *buf = NULL;
        if (cap && !(buf = alloc->fn(alloc->ctx, cap))) {
            r->res.code = RS_RSPS_INTERNAL;
            snprintf(r->res.msg, sizeof r->res.msg, "out of memory for a %zu-byte row block", cap);
            return 0;
        }
        if (rs_rsps_get(s, q.payload, q.payload_len, buf, cap, &r->payload_len, thread_slot,
                        &r->res) != RS_RSPS_OK)
            return 0;
        if (!reply_in_attachment) r->head_len = head(h, 1, r->payload_len);
        return 0;
    }
    case RS_RSMSG_PUT: rs_rsps_put(s, q.payload, q.payload_len, thread_slot, &r->res); return 0;
    case RS_RSMSG_UPDATE: {
        /* RecStore answers every refusal as success=false (the reason is in the server log) */
        rs_rsps_code c =
            rs_rsps_update(s, q.table, q.table_len, q.payload, q.payload_len, thread_slot, &r->res);
        r->refused = c != RS_RSPS_OK;
        r->res.code = RS_RSPS_OK;
        h = rs_pb_put_vfield_present(h, 1, c == RS_RSPS_OK);
        r->head_len = (size_t)(h - r->head);
        return 0;
    }
    case RS_RSMSG_INIT: {
        int32_t tag = -1;
        rs_rsps_code c = rs_rsps_init_table(s, q.table, q.table_len, q.payload, q.payload_len,
                                            q.has_payload, &tag, &r->res);
        r->refused = c != RS_RSPS_OK;
        if (r->refused) {
            fprintf(stderr, "component=recstore_ps event=init_refused shard=%u reason=\"%s\"\n",
                    rs_ps_shard_id(rs_rsps_shard(s)), r->res.msg);
            rs_ps_shard_count(rs_rsps_shard(s), thread_slot, RS_PS_COMMAND, 0, 0, 1);
        }
        r->res.code = RS_RSPS_OK;
        h = rs_pb_put_vfield_present(h, 1, c == RS_RSPS_OK);
        h = rs_pb_put_vfield_present(h, 2, (uint64_t)(int64_t)tag); /* int32: sign-extended */
        r->head_len = (size_t)(h - r->head);
        return 0;
    }
    case RS_RSMSG_COMMAND: {
        const char *text;
        size_t text_len, fake = 0;
        if (rs_rsps_command(s, &q.cmd, &text, &text_len, &fake, thread_slot, &r->res) != RS_RSPS_OK)
            return 0;
        if (fake) {
            uint8_t *buf = alloc->fn(alloc->ctx, fake);
            if (!buf) {
                r->res.code = RS_RSPS_INTERNAL;
                snprintf(r->res.msg, sizeof r->res.msg, "out of memory for %zu bytes", fake);
                return 0;
            }
            memset(buf, 0xAB, fake);
            r->payload_len = fake;
            r->head_len = head(h, 1, fake);
        } else if (text_len) {
            r->head_len = head(h, 1, text_len);
            memcpy(h + r->head_len, text, text_len); /* "ok": fits the head buffer */
            r->head_len += text_len;
        }
        return 0;
    }
    default: break;
    }
    r->res.code = RS_RSPS_INVALID;
    snprintf(r->res.msg, sizeof r->res.msg, "unknown ParameterService method %d", (int)m);
    return 0;
}

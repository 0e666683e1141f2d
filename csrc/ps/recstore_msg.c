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

/* ---- client side ------------------------------------------------------------------------------
 */

static int client_command(const rs_ps_request *req, int64_t *cmd, rs_error *err) {
    const char *c = req->command ? req->command : "";
    size_t n = req->command_len;
    if ((n == 4 && memcmp(c, "ping", 4) == 0) || (n == 5 && memcmp(c, "ready", 5) == 0)) {
        *cmd = RS_RSPS_LOAD_FAKE_DATA; /* of 0 bytes: a round trip every RecStore server answers */
        return 0;
    }
    if (n == 5 && memcmp(c, "clear", 5) == 0) {
        *cmd = RS_RSPS_CLEAR_PS;
        return 0;
    }
    return rs_error_set(err, RS_EINVAL,
                        "command '%.*s' has no equivalent on RecStore's wire (it has ping/ready "
                        "as LOAD_FAKE_DATA of 0 bytes, and clear as CLEAR_PS)",
                        (int)(n > 64 ? 64 : n), c);
}

static size_t block_len(size_t m, size_t dim) {
    return 4 + m * (4 + RS_RSBLOCK_ITEM_HEAD + 4 * dim);
}

int rs_rsmsg_client_size(const rs_ps_request *req, size_t from, size_t m, const char *table,
                         int attach, rs_rsmsg_client_req *out, rs_error *err) {
    size_t vs = req->num_keys ? req->rows_len / req->num_keys : 0, payload = 0;
    memset(out, 0, sizeof *out);
    switch (req->op) {
    case RS_PS_GET:
        out->method = RS_RSMSG_GET;
        payload = 8 * m;
        break;
    case RS_PS_PUT:
    case RS_PS_UPDATE:
        out->method = req->op == RS_PS_PUT ? RS_RSMSG_PUT : RS_RSMSG_UPDATE;
        payload = block_len(m, vs / 4);
        if (req->op == RS_PS_UPDATE) out->msg_len = rs_pb_lfield_size(strlen(table));
        break;
    case RS_PS_COMMAND: {
        int64_t cmd;
        int rc = client_command(req, &cmd, err);
        if (rc) return rc;
        out->method = RS_RSMSG_COMMAND;
        out->msg_len = cmd ? rs_pb_vfield_size((uint64_t)cmd) + 10 : 0; /* arg1 = 8-byte 0 */
        return 0;
    }
    }
    if (attach)
        out->att_len = payload;
    else
        out->msg_len += 1 + rs_pb_varint_size(payload) + payload;
    return 0;
}

void rs_rsmsg_client_encode(const rs_ps_request *req, size_t from, size_t m, const char *table,
                            int attach, uint8_t *msg_out, uint8_t *att_out) {
    uint8_t *p = msg_out;
    if (req->op == RS_PS_COMMAND) {
        int64_t cmd = 0;
        client_command(req, &cmd, NULL);
        if (cmd) {
            static const uint8_t zero[8];
            p = rs_pb_put_vfield(p, 1, (uint64_t)cmd);
            p = rs_pb_put_lhead(p, 2, 8);
            memcpy(p, zero, 8);
        }
        return;
    }
    if (req->op == RS_PS_UPDATE) p = rs_pb_put_lfield(p, 1, table, strlen(table));
    if (req->op == RS_PS_GET) {
        if (!attach) p = rs_pb_put_lhead(p, 1, 8 * m);
        memcpy(attach ? att_out : p, req->keys + 8 * from, 8 * m);
        return;
    }
    size_t vs = req->rows_len / req->num_keys, dim = vs / 4;
    uint8_t *b = att_out;
    if (!attach) {
        p = rs_pb_put_lhead(p, 2, block_len(m, dim));
        b = p;
    }
    /* every item present: a block of m rows of dim floats */
    int32_t cnt = (int32_t)m;
    memcpy(b, &cnt, 4);
    uint8_t *item = b + 4 + 4 * m;
    for (size_t i = 0; i < m; i++) {
        int32_t d = (int32_t)dim, end = (int32_t)((i + 1) * (RS_RSBLOCK_ITEM_HEAD + vs));
        memcpy(b + 4 + 4 * i, &end, 4);
        memcpy(item, req->keys + 8 * (from + i), 8);
        memcpy(item + 8, &d, 4);
        memcpy(item + 12, req->rows + vs * (from + i), vs);
        item += RS_RSBLOCK_ITEM_HEAD + vs;
    }
}

int rs_rsmsg_client_decode(rs_rsmsg_method method, const uint8_t *msg, size_t len,
                           const uint8_t *att, size_t att_len, size_t m, uint32_t value_size,
                           void *rows_out, rs_ps_response *resp, rs_error *err) {
    static const uint8_t empty[1];
    rs_pb_reader r = {msg ? msg : empty, (msg ? msg : empty) + len,
                      method == RS_RSMSG_GET      ? "GetParameterResponse"
                      : method == RS_RSMSG_UPDATE ? "UpdateParameterResponse"
                                                  : "CommandResponse",
                      err};
    const uint8_t *bytes = NULL;
    size_t bytes_len = 0;
    uint64_t flag = 1;
    while (r.p < r.end) {
        unsigned field, wt;
        int rc = rs_pb_get_tag(&r, &field, &wt);
        if (!rc) {
            if (field == 1 && method == RS_RSMSG_UPDATE && wt == RS_PB_VARINT)
                rc = rs_pb_get_varint(&r, &flag, "success");
            else if (field == 1 && (method == RS_RSMSG_GET || method == RS_RSMSG_COMMAND))
                rc = rs_pb_get_bytes(&r, wt, "field 1", &bytes, &bytes_len);
            else
                rc = rs_pb_skip_field(&r, field, wt);
        }
        if (rc) return rc;
    }
    resp->status = RS_PS_OK;
    resp->value_size = value_size;
    resp->num_found = 0;
    resp->rows = NULL;
    resp->rows_len = 0;
    resp->error[0] = 0;
    resp->reply[0] = 0;
    if (method == RS_RSMSG_UPDATE && !flag) {
        resp->status = RS_PS_INVALID_PAYLOAD;
        snprintf(resp->error, sizeof resp->error,
                 "UpdateParameter answered success=false (table not registered on that shard, "
                 "or keys without the table's tag; the server's log says which)");
    }
    if (method == RS_RSMSG_COMMAND) snprintf(resp->reply, sizeof resp->reply, "ok");
    if (method != RS_RSMSG_GET) return 0;
    if (att_len) { /* baidu_std: the block is the attachment, else the field */
        bytes = att;
        bytes_len = att_len;
    }
    uint8_t *out = rows_out;
    if (bytes_len == 0 || (bytes_len == 4 && memcmp(bytes, "\0\0\0\0", 4) == 0)) {
        memset(out, 0, m * value_size); /* RecStore: an empty block reads as all missing */
    } else {
        uint32_t found = 0;
        if (rs_rsblock_read_rows(bytes, bytes_len, (uint32_t)m, value_size, out, &found, err))
            return RS_EPROTO;
        resp->num_found = found;
    }
    resp->rows = rows_out;
    resp->rows_len = m * value_size;
    return 0;
}

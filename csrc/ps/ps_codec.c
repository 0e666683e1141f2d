/*
 * ps_codec.c — the one PS payload codec: PSRequest / PSResponse (csrc/proto/ps.proto) in the
 * protobuf wire format, written by hand so decoding is zero-copy and costs no allocation.
 *
 * Every transport uses these functions: gRPC carries keys and rows inline in the bytes fields;
 * baidu_std and the RC slots carry them in an attachment that follows the message, and the message
 * then holds num_keys / rows_len instead. Decoded structs hold views into the caller's buffers.
 *
 * Invariants: the decoder never reads outside [msg, msg + len) or the attachment; every malformed
 * input (truncated varint, length past the end, wrong wire type for a known field, groups, field
 * number 0, sizes that do not add up) returns RS_EPROTO with a reason naming the field. Unknown
 * fields with valid wire types are skipped, as protobuf requires. The encoder writes fields in
 * field-number order except the response's inline rows, which come last so a transport can send
 * the encoded header and then the rows straight from where the handler wrote them.
 */
#include <stdio.h>
#include <string.h>

#include "common/pb_wire.h"
#include "recstore/ps.h"

/* ---- names ----------------------------------------------------------------------------------- */

const char *rs_ps_op_method(rs_ps_op op) {
    switch (op) {
    case RS_PS_GET: return "Get";
    case RS_PS_PUT: return "Put";
    case RS_PS_UPDATE: return "Update";
    case RS_PS_COMMAND: return "Command";
    }
    return "Unknown";
}

int rs_ps_op_from_method(const char *name, size_t len, rs_ps_op *out) {
    static const rs_ps_op ops[] = {RS_PS_GET, RS_PS_PUT, RS_PS_UPDATE, RS_PS_COMMAND};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const char *m = rs_ps_op_method(ops[i]);
        if (strlen(m) == len && memcmp(m, name, len) == 0) {
            *out = ops[i];
            return 0;
        }
    }
    return RS_EINVAL;
}

const char *rs_ps_status_name(int status) {
    switch (status) {
    case RS_PS_OK: return "ok";
    case RS_PS_INVALID_PAYLOAD: return "invalid payload";
    case RS_PS_WRONG_SHARD: return "wrong shard";
    case RS_PS_BATCH_TOO_LARGE: return "batch too large";
    case RS_PS_VALUE_SIZE_MISMATCH: return "value size mismatch";
    case RS_PS_UNKNOWN_METHOD: return "unknown method";
    case RS_PS_CAPACITY: return "capacity reached";
    case RS_PS_INTERNAL: return "internal error";
    case RS_PS_SHUTTING_DOWN: return "shutting down";
    case RS_PS_CHECKPOINT: return "checkpoint failed";
    case RS_PS_UNAUTHENTICATED: return "authentication failed";
    }
    return "unknown status";
}

static const uint8_t empty_msg[1];

/* ---- PSRequest ------------------------------------------------------------------------------- */

size_t rs_ps_request_encoded_size(const rs_ps_request *req, int attach) {
    size_t n = rs_pb_vfield_size(req->shard) + rs_pb_vfield_size(req->value_size) +
               rs_pb_lfield_size(req->command_len);
    if (attach)
        n += rs_pb_vfield_size(req->num_keys) + rs_pb_vfield_size(req->rows_len);
    else
        n += rs_pb_lfield_size((size_t)req->num_keys * 8) + rs_pb_lfield_size(req->rows_len);
    return n;
}

size_t rs_ps_request_encode(const rs_ps_request *req, int attach, uint8_t *out) {
    uint8_t *p = out;
    p = rs_pb_put_vfield(p, 1, req->shard);
    p = rs_pb_put_vfield(p, 2, req->value_size);
    if (!attach) {
        p = rs_pb_put_lfield(p, 3, req->keys, (size_t)req->num_keys * 8);
        p = rs_pb_put_lfield(p, 4, req->rows, req->rows_len);
    }
    p = rs_pb_put_lfield(p, 5, req->command, req->command_len);
    if (attach) {
        p = rs_pb_put_vfield(p, 6, req->num_keys);
        p = rs_pb_put_vfield(p, 7, req->rows_len);
    }
    return (size_t)(p - out);
}

size_t rs_ps_request_encode_method(rs_ps_op op, uint8_t *out) {
    return (size_t)(rs_pb_put_vfield(out, 8, (uint32_t)op) - out);
}

int rs_ps_request_decode(rs_ps_op op, const uint8_t *msg, size_t len, const uint8_t *attachment,
                         size_t attachment_len, rs_ps_request *out, rs_error *err) {
    const uint8_t *keys = NULL, *rows = NULL;
    size_t keys_len = 0, rows_len_inline = 0;
    int has_keys = 0, has_rows = 0;
    uint32_t num_keys = 0, rows_len = 0, method = 0;
    memset(out, 0, sizeof *out);
    out->op = op;
    if (!msg && len)
        return rs_error_set(err, RS_EPROTO, "PSRequest: NULL message of %zu bytes", len);
    if (!msg) msg = empty_msg; /* an empty message may come as NULL (gRPC); NULL + 0 is UB */
    rs_pb_reader r = {msg, msg + len, "PSRequest", err};
    while (r.p < r.end) {
        unsigned field = 0, wt = 0;
        int rc = rs_pb_get_tag(&r, &field, &wt);
        if (rc) return rc;
        switch (field) {
        case 1: rc = rs_pb_get_u32(&r, wt, "shard", &out->shard); break;
        case 2: rc = rs_pb_get_u32(&r, wt, "value_size", &out->value_size); break;
        case 3:
            if (wt != RS_PB_LEN) return rs_pb_wrong_type(&r, "keys", wt);
            rc = rs_pb_get_len(&r, &keys, &keys_len, "keys");
            has_keys = 1;
            break;
        case 4:
            if (wt != RS_PB_LEN) return rs_pb_wrong_type(&r, "rows", wt);
            rc = rs_pb_get_len(&r, &rows, &rows_len_inline, "rows");
            has_rows = 1;
            break;
        case 5: {
            if (wt != RS_PB_LEN) return rs_pb_wrong_type(&r, "command", wt);
            const uint8_t *c;
            rc = rs_pb_get_len(&r, &c, &out->command_len, "command");
            out->command = (const char *)c;
            break;
        }
        case 6: rc = rs_pb_get_u32(&r, wt, "num_keys", &num_keys); break;
        case 7: rc = rs_pb_get_u32(&r, wt, "rows_len", &rows_len); break;
        case 8: rc = rs_pb_get_u32(&r, wt, "method", &method); break;
        default: rc = rs_pb_skip_field(&r, field, wt); break;
        }
        if (rc) return rc;
    }
    if (op == RS_PS_OP_FROM_MESSAGE) {
        if (!method)
            return rs_error_set(err, RS_EPROTO,
                                "PSRequest: a Stream request needs its method "
                                "(field 8: 1 Get, 2 Put, 3 Update, 4 Command)");
        if (method > RS_PS_COMMAND)
            return rs_error_set(err, RS_EPROTO,
                                "PSRequest: method %u is not 1 (Get), 2 (Put), 3 (Update) or "
                                "4 (Command)",
                                method);
        out->op = (rs_ps_op)method;
    }
    if (attachment_len) {
        if (has_keys || has_rows)
            return rs_error_set(err, RS_EPROTO,
                                "PSRequest: inline keys/rows and a %zu-byte attachment together",
                                attachment_len);
        if (!attachment)
            return rs_error_set(err, RS_EPROTO, "PSRequest: NULL attachment of %zu bytes",
                                attachment_len);
        if ((uint64_t)num_keys * 8 + rows_len != attachment_len)
            return rs_error_set(err, RS_EPROTO,
                                "PSRequest: num_keys %u * 8 + rows_len %u != attachment size %zu",
                                num_keys, rows_len, attachment_len);
        out->num_keys = num_keys;
        out->keys = num_keys ? attachment : NULL;
        out->rows_len = rows_len;
        out->rows = rows_len ? attachment + (size_t)num_keys * 8 : NULL;
        return 0;
    }
    if (keys_len % 8)
        return rs_error_set(err, RS_EPROTO,
                            "PSRequest: keys field of %zu bytes is not a multiple of 8", keys_len);
    if (keys_len / 8 > UINT32_MAX)
        return rs_error_set(err, RS_EPROTO, "PSRequest: %zu keys is too many", keys_len / 8);
    if (num_keys && num_keys != keys_len / 8)
        return rs_error_set(err, RS_EPROTO, "PSRequest: num_keys %u but keys field holds %zu keys",
                            num_keys, keys_len / 8);
    if (rows_len && rows_len != rows_len_inline)
        return rs_error_set(err, RS_EPROTO, "PSRequest: rows_len %u but rows field holds %zu bytes",
                            rows_len, rows_len_inline);
    if (!has_keys && num_keys)
        return rs_error_set(err, RS_EPROTO, "PSRequest: num_keys %u without keys or attachment",
                            num_keys);
    out->num_keys = (uint32_t)(keys_len / 8);
    out->keys = keys_len ? keys : NULL;
    out->rows_len = rows_len_inline;
    out->rows = rows_len_inline ? rows : NULL;
    return 0;
}

/* ---- PSResponse ------------------------------------------------------------------------------ */

static size_t int32_field_size(int32_t v) {
    /* proto3 int32: negative values are sign-extended to 10-byte varints */
    return v ? 1 + rs_pb_varint_size((uint64_t)(int64_t)v) : 0;
}

size_t rs_ps_response_header_size(const rs_ps_response *resp, int attach) {
    size_t n = int32_field_size(resp->status) + rs_pb_lfield_size(strlen(resp->error)) +
               rs_pb_vfield_size(resp->value_size) + rs_pb_lfield_size(strlen(resp->reply)) +
               rs_pb_vfield_size(resp->num_found);
    if (attach)
        n += rs_pb_vfield_size(resp->rows_len);
    else if (resp->rows_len)
        n += 1 + rs_pb_varint_size(resp->rows_len); /* tag + length of rows; the bytes follow */
    return n;
}

size_t rs_ps_response_encode_header(const rs_ps_response *resp, int attach, uint8_t *out) {
    uint8_t *p = out;
    if (resp->status) {
        *p++ = (uint8_t)(1 << 3 | RS_PB_VARINT);
        p = rs_pb_put_varint(p, (uint64_t)(int64_t)resp->status);
    }
    p = rs_pb_put_lfield(p, 2, resp->error, strlen(resp->error));
    p = rs_pb_put_vfield(p, 3, resp->value_size);
    p = rs_pb_put_lfield(p, 5, resp->reply, strlen(resp->reply));
    p = rs_pb_put_vfield(p, 6, resp->num_found);
    if (attach) {
        p = rs_pb_put_vfield(p, 7, resp->rows_len);
    } else if (resp->rows_len) {
        *p++ = (uint8_t)(4 << 3 | RS_PB_LEN);
        p = rs_pb_put_varint(p, resp->rows_len);
    }
    return (size_t)(p - out);
}

static void copy_text(char *dst, size_t cap, const uint8_t *src, size_t len) {
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

int rs_ps_response_decode(const uint8_t *msg, size_t len, const uint8_t *attachment,
                          size_t attachment_len, rs_ps_response *out, rs_error *err) {
    const uint8_t *rows = NULL;
    size_t rows_inline = 0;
    int has_rows = 0;
    uint32_t rows_len = 0;
    out->status = 0;
    out->value_size = 0;
    out->num_found = 0;
    out->rows = NULL;
    out->rows_len = 0;
    out->error[0] = 0;
    out->reply[0] = 0;
    out->flags = 0;
    if (!msg && len)
        return rs_error_set(err, RS_EPROTO, "PSResponse: NULL message of %zu bytes", len);
    if (!msg) msg = empty_msg;
    rs_pb_reader r = {msg, msg + len, "PSResponse", err};
    while (r.p < r.end) {
        unsigned field = 0, wt = 0;
        int rc = rs_pb_get_tag(&r, &field, &wt);
        if (rc) return rc;
        const uint8_t *d;
        size_t n = 0;
        uint64_t v = 0;
        switch (field) {
        case 1:
            if (wt != RS_PB_VARINT) return rs_pb_wrong_type(&r, "status", wt);
            rc = rs_pb_get_varint(&r, &v, "status");
            out->status = (int32_t)(uint32_t)v;
            break;
        case 2:
            if (wt != RS_PB_LEN) return rs_pb_wrong_type(&r, "error", wt);
            rc = rs_pb_get_len(&r, &d, &n, "error");
            if (!rc) copy_text(out->error, sizeof out->error, d, n);
            break;
        case 3: rc = rs_pb_get_u32(&r, wt, "value_size", &out->value_size); break;
        case 4:
            if (wt != RS_PB_LEN) return rs_pb_wrong_type(&r, "rows", wt);
            rc = rs_pb_get_len(&r, &rows, &rows_inline, "rows");
            has_rows = 1;
            break;
        case 5:
            if (wt != RS_PB_LEN) return rs_pb_wrong_type(&r, "reply", wt);
            rc = rs_pb_get_len(&r, &d, &n, "reply");
            if (!rc) copy_text(out->reply, sizeof out->reply, d, n);
            break;
        case 6: rc = rs_pb_get_u32(&r, wt, "num_found", &out->num_found); break;
        case 7: rc = rs_pb_get_u32(&r, wt, "rows_len", &rows_len); break;
        default: rc = rs_pb_skip_field(&r, field, wt); break;
        }
        if (rc) return rc;
    }
    if (attachment_len) {
        if (has_rows)
            return rs_error_set(err, RS_EPROTO,
                                "PSResponse: inline rows and a %zu-byte attachment together",
                                attachment_len);
        if (!attachment || rows_len != attachment_len)
            return rs_error_set(err, RS_EPROTO, "PSResponse: rows_len %u != attachment size %zu",
                                rows_len, attachment_len);
        out->rows = attachment;
        out->rows_len = attachment_len;
        return 0;
    }
    if (rows_len && rows_len != rows_inline)
        return rs_error_set(err, RS_EPROTO,
                            "PSResponse: rows_len %u but rows field holds %zu bytes", rows_len,
                            rows_inline);
    out->rows = rows_inline ? rows : NULL;
    out->rows_len = rows_inline;
    return 0;
}

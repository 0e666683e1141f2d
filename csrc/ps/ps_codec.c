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

#include "recstore/ps.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

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
    }
    return "unknown status";
}

/* ---- wire primitives ------------------------------------------------------------------------- */

static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Size of a varint field (0 when v == 0: proto3 omits defaults). Field numbers here are < 16, so
 * every tag is one byte. */
static size_t vfield_size(uint64_t v) {
    return v ? 1 + varint_size(v) : 0;
}

static uint8_t *put_vfield(uint8_t *p, unsigned field, uint64_t v) {
    if (!v) return p;
    *p++ = (uint8_t)(field << 3 | WT_VARINT);
    return put_varint(p, v);
}

static size_t lfield_size(size_t len) {
    return len ? 1 + varint_size(len) + len : 0;
}

static uint8_t *put_lfield(uint8_t *p, unsigned field, const void *data, size_t len) {
    if (!len) return p;
    *p++ = (uint8_t)(field << 3 | WT_LEN);
    p = put_varint(p, len);
    memcpy(p, data, len);
    return p + len;
}

static const uint8_t empty_msg[1];

typedef struct reader {
    const uint8_t *p, *end;
    const char *msg_name;
    rs_error *err;
} reader;

static int get_varint(reader *r, uint64_t *out, const char *what) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return rs_error_set(r->err, RS_EPROTO, "%s: truncated varint in %s", r->msg_name, what);
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return rs_error_set(r->err, RS_EPROTO, "%s: varint longer than 10 bytes in %s", r->msg_name,
                        what);
}

/* Reads a length-delimited payload: *data points into the buffer. */
static int get_len(reader *r, const uint8_t **data, size_t *len, const char *what) {
    uint64_t n = 0;
    int rc = get_varint(r, &n, what);
    if (rc) return rc;
    if (n > (uint64_t)(r->end - r->p))
        return rs_error_set(r->err, RS_EPROTO, "%s: field %s claims %llu bytes but only %zu remain",
                            r->msg_name, what, (unsigned long long)n, (size_t)(r->end - r->p));
    *data = r->p;
    *len = (size_t)n;
    r->p += n;
    return 0;
}

static int skip_field(reader *r, unsigned field, unsigned wt) {
    uint64_t v = 0;
    const uint8_t *d;
    size_t n = 0;
    switch (wt) {
    case WT_VARINT: return get_varint(r, &v, "unknown field");
    case WT_LEN: return get_len(r, &d, &n, "unknown field");
    case WT_I64:
    case WT_I32: {
        size_t w = wt == WT_I64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < w)
            return rs_error_set(r->err, RS_EPROTO, "%s: truncated fixed field %u", r->msg_name,
                                field);
        r->p += w;
        return 0;
    }
    }
    return rs_error_set(r->err, RS_EPROTO, "%s: field %u has unsupported wire type %u", r->msg_name,
                        field, wt);
}

static int get_tag(reader *r, unsigned *field, unsigned *wt) {
    uint64_t tag = 0;
    int rc = get_varint(r, &tag, "field tag");
    if (rc) return rc;
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return rs_error_set(r->err, RS_EPROTO, "%s: invalid field number in tag 0x%llx",
                            r->msg_name, (unsigned long long)tag);
    *field = (unsigned)(tag >> 3);
    *wt = (unsigned)(tag & 7);
    return 0;
}

static int wrong_type(reader *r, const char *name, unsigned wt) {
    return rs_error_set(r->err, RS_EPROTO, "%s: field %s has wire type %u", r->msg_name, name, wt);
}

static int get_u32(reader *r, unsigned wt, const char *name, uint32_t *out) {
    if (wt != WT_VARINT) return wrong_type(r, name, wt);
    uint64_t v = 0;
    int rc = get_varint(r, &v, name);
    if (rc) return rc;
    if (v > UINT32_MAX)
        return rs_error_set(r->err, RS_EPROTO, "%s: %s = %llu does not fit uint32", r->msg_name,
                            name, (unsigned long long)v);
    *out = (uint32_t)v;
    return 0;
}

/* ---- PSRequest ------------------------------------------------------------------------------- */

size_t rs_ps_request_encoded_size(const rs_ps_request *req, int attach) {
    size_t n =
        vfield_size(req->shard) + vfield_size(req->value_size) + lfield_size(req->command_len);
    if (attach)
        n += vfield_size(req->num_keys) + vfield_size(req->rows_len);
    else
        n += lfield_size((size_t)req->num_keys * 8) + lfield_size(req->rows_len);
    return n;
}

size_t rs_ps_request_encode(const rs_ps_request *req, int attach, uint8_t *out) {
    uint8_t *p = out;
    p = put_vfield(p, 1, req->shard);
    p = put_vfield(p, 2, req->value_size);
    if (!attach) {
        p = put_lfield(p, 3, req->keys, (size_t)req->num_keys * 8);
        p = put_lfield(p, 4, req->rows, req->rows_len);
    }
    p = put_lfield(p, 5, req->command, req->command_len);
    if (attach) {
        p = put_vfield(p, 6, req->num_keys);
        p = put_vfield(p, 7, req->rows_len);
    }
    return (size_t)(p - out);
}

int rs_ps_request_decode(rs_ps_op op, const uint8_t *msg, size_t len, const uint8_t *attachment,
                         size_t attachment_len, rs_ps_request *out, rs_error *err) {
    const uint8_t *keys = NULL, *rows = NULL;
    size_t keys_len = 0, rows_len_inline = 0;
    int has_keys = 0, has_rows = 0;
    uint32_t num_keys = 0, rows_len = 0;
    memset(out, 0, sizeof *out);
    out->op = op;
    if (!msg && len)
        return rs_error_set(err, RS_EPROTO, "PSRequest: NULL message of %zu bytes", len);
    if (!msg) msg = empty_msg; /* an empty message may come as NULL (gRPC); NULL + 0 is UB */
    reader r = {msg, msg + len, "PSRequest", err};
    while (r.p < r.end) {
        unsigned field = 0, wt = 0;
        int rc = get_tag(&r, &field, &wt);
        if (rc) return rc;
        switch (field) {
        case 1: rc = get_u32(&r, wt, "shard", &out->shard); break;
        case 2: rc = get_u32(&r, wt, "value_size", &out->value_size); break;
        case 3:
            if (wt != WT_LEN) return wrong_type(&r, "keys", wt);
            rc = get_len(&r, &keys, &keys_len, "keys");
            has_keys = 1;
            break;
        case 4:
            if (wt != WT_LEN) return wrong_type(&r, "rows", wt);
            rc = get_len(&r, &rows, &rows_len_inline, "rows");
            has_rows = 1;
            break;
        case 5: {
            if (wt != WT_LEN) return wrong_type(&r, "command", wt);
            const uint8_t *c;
            rc = get_len(&r, &c, &out->command_len, "command");
            out->command = (const char *)c;
            break;
        }
        case 6: rc = get_u32(&r, wt, "num_keys", &num_keys); break;
        case 7: rc = get_u32(&r, wt, "rows_len", &rows_len); break;
        default: rc = skip_field(&r, field, wt); break;
        }
        if (rc) return rc;
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
    return v ? 1 + varint_size((uint64_t)(int64_t)v) : 0;
}

size_t rs_ps_response_header_size(const rs_ps_response *resp, int attach) {
    size_t n = int32_field_size(resp->status) + lfield_size(strlen(resp->error)) +
               vfield_size(resp->value_size) + lfield_size(strlen(resp->reply)) +
               vfield_size(resp->num_found);
    if (attach)
        n += vfield_size(resp->rows_len);
    else if (resp->rows_len)
        n += 1 + varint_size(resp->rows_len); /* tag + length of rows; the bytes follow */
    return n;
}

size_t rs_ps_response_encode_header(const rs_ps_response *resp, int attach, uint8_t *out) {
    uint8_t *p = out;
    if (resp->status) {
        *p++ = (uint8_t)(1 << 3 | WT_VARINT);
        p = put_varint(p, (uint64_t)(int64_t)resp->status);
    }
    p = put_lfield(p, 2, resp->error, strlen(resp->error));
    p = put_vfield(p, 3, resp->value_size);
    p = put_lfield(p, 5, resp->reply, strlen(resp->reply));
    p = put_vfield(p, 6, resp->num_found);
    if (attach) {
        p = put_vfield(p, 7, resp->rows_len);
    } else if (resp->rows_len) {
        *p++ = (uint8_t)(4 << 3 | WT_LEN);
        p = put_varint(p, resp->rows_len);
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
    reader r = {msg, msg + len, "PSResponse", err};
    while (r.p < r.end) {
        unsigned field = 0, wt = 0;
        int rc = get_tag(&r, &field, &wt);
        if (rc) return rc;
        const uint8_t *d;
        size_t n = 0;
        uint64_t v = 0;
        switch (field) {
        case 1:
            if (wt != WT_VARINT) return wrong_type(&r, "status", wt);
            rc = get_varint(&r, &v, "status");
            out->status = (int32_t)(uint32_t)v;
            break;
        case 2:
            if (wt != WT_LEN) return wrong_type(&r, "error", wt);
            rc = get_len(&r, &d, &n, "error");
            if (!rc) copy_text(out->error, sizeof out->error, d, n);
            break;
        case 3: rc = get_u32(&r, wt, "value_size", &out->value_size); break;
        case 4:
            if (wt != WT_LEN) return wrong_type(&r, "rows", wt);
            rc = get_len(&r, &rows, &rows_inline, "rows");
            has_rows = 1;
            break;
        case 5:
            if (wt != WT_LEN) return wrong_type(&r, "reply", wt);
            rc = get_len(&r, &d, &n, "reply");
            if (!rc) copy_text(out->reply, sizeof out->reply, d, n);
            break;
        case 6: rc = get_u32(&r, wt, "num_found", &out->num_found); break;
        case 7: rc = get_u32(&r, wt, "rows_len", &rows_len); break;
        default: rc = skip_field(&r, field, wt); break;
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

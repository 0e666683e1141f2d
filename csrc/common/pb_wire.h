/*
 * pb_wire.h — the protobuf wire format primitives every hand-written codec shares (the native
 * PSRequest/PSResponse codec in ps_codec.c, RecStore's ParameterService messages in
 * recstore_msg.c, gRPC health and reflection): varints, tags, length-delimited fields, and a
 * bounds-checked reader whose every failure is RS_EPROTO with a reason naming the message and the
 * field.
 *
 * Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 (3/4, groups, are refused).
 * Writers assume one-byte tags (field numbers < 16), which holds for every message recbench
 * encodes. The reader never reads outside [p, end).
 */
#ifndef RS_PB_WIRE_H
#define RS_PB_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "recstore/error.h"

enum { RS_PB_VARINT = 0, RS_PB_I64 = 1, RS_PB_LEN = 2, RS_PB_I32 = 5 };

static inline size_t rs_pb_varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *rs_pb_put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Size of a proto3 varint field (0 when v == 0: defaults are omitted). */
static inline size_t rs_pb_vfield_size(uint64_t v) {
    return v ? 1 + rs_pb_varint_size(v) : 0;
}

static inline uint8_t *rs_pb_put_vfield(uint8_t *p, unsigned field, uint64_t v) {
    if (!v) return p;
    *p++ = (uint8_t)(field << 3 | RS_PB_VARINT);
    return rs_pb_put_varint(p, v);
}

/* A varint field written even when v == 0 (proto3 `optional` fields: explicit presence). */
static inline uint8_t *rs_pb_put_vfield_present(uint8_t *p, unsigned field, uint64_t v) {
    *p++ = (uint8_t)(field << 3 | RS_PB_VARINT);
    return rs_pb_put_varint(p, v);
}

static inline size_t rs_pb_lfield_size(size_t len) {
    return len ? 1 + rs_pb_varint_size(len) + len : 0;
}

static inline uint8_t *rs_pb_put_lfield(uint8_t *p, unsigned field, const void *data, size_t len) {
    if (!len) return p;
    *p++ = (uint8_t)(field << 3 | RS_PB_LEN);
    p = rs_pb_put_varint(p, len);
    memcpy(p, data, len);
    return p + len;
}

/* Tag and length of a length-delimited field whose len bytes the caller writes next. */
static inline uint8_t *rs_pb_put_lhead(uint8_t *p, unsigned field, size_t len) {
    *p++ = (uint8_t)(field << 3 | RS_PB_LEN);
    return rs_pb_put_varint(p, len);
}

typedef struct rs_pb_reader {
    const uint8_t *p, *end;
    const char *msg_name; /* "PSRequest", ... for error messages */
    rs_error *err;
} rs_pb_reader;

static inline int rs_pb_get_varint(rs_pb_reader *r, uint64_t *out, const char *what) {
    uint64_t v = 0;
    *out = 0;
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

/* A length-delimited payload: *data points into the buffer. */
static inline int rs_pb_get_len(rs_pb_reader *r, const uint8_t **data, size_t *len,
                                const char *what) {
    uint64_t n = 0;
    *data = NULL;
    *len = 0;
    int rc = rs_pb_get_varint(r, &n, what);
    if (rc) return rc;
    if (n > (uint64_t)(r->end - r->p))
        return rs_error_set(r->err, RS_EPROTO, "%s: field %s claims %llu bytes but only %zu remain",
                            r->msg_name, what, (unsigned long long)n, (size_t)(r->end - r->p));
    *data = r->p;
    *len = (size_t)n;
    r->p += n;
    return 0;
}

static inline int rs_pb_skip_field(rs_pb_reader *r, unsigned field, unsigned wt) {
    uint64_t v = 0;
    const uint8_t *d;
    size_t n = 0;
    switch (wt) {
    case RS_PB_VARINT: return rs_pb_get_varint(r, &v, "unknown field");
    case RS_PB_LEN: return rs_pb_get_len(r, &d, &n, "unknown field");
    case RS_PB_I64:
    case RS_PB_I32: {
        size_t w = wt == RS_PB_I64 ? 8 : 4;
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

static inline int rs_pb_get_tag(rs_pb_reader *r, unsigned *field, unsigned *wt) {
    uint64_t tag = 0;
    *field = 0;
    *wt = 0;
    int rc = rs_pb_get_varint(r, &tag, "field tag");
    if (rc) return rc;
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return rs_error_set(r->err, RS_EPROTO, "%s: invalid field number in tag 0x%llx",
                            r->msg_name, (unsigned long long)tag);
    *field = (unsigned)(tag >> 3);
    *wt = (unsigned)(tag & 7);
    return 0;
}

static inline int rs_pb_wrong_type(rs_pb_reader *r, const char *name, unsigned wt) {
    return rs_error_set(r->err, RS_EPROTO, "%s: field %s has wire type %u", r->msg_name, name, wt);
}

static inline int rs_pb_get_u32(rs_pb_reader *r, unsigned wt, const char *name, uint32_t *out) {
    if (wt != RS_PB_VARINT) return rs_pb_wrong_type(r, name, wt);
    uint64_t v = 0;
    int rc = rs_pb_get_varint(r, &v, name);
    if (rc) return rc;
    if (v > UINT32_MAX)
        return rs_error_set(r->err, RS_EPROTO, "%s: %s = %llu does not fit uint32", r->msg_name,
                            name, (unsigned long long)v);
    *out = (uint32_t)v;
    return 0;
}

/* A length-delimited field of a known name (wire type checked). */
static inline int rs_pb_get_bytes(rs_pb_reader *r, unsigned wt, const char *name,
                                  const uint8_t **data, size_t *len) {
    if (wt != RS_PB_LEN) return rs_pb_wrong_type(r, name, wt);
    return rs_pb_get_len(r, data, len, name);
}

#endif

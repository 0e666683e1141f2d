/*
 * grpc_transport.c — pieces the gRPC server and client connection share (grpc_transport.h):
 * method paths, address formatting, viewing a received byte buffer as one span, and the mapping
 * of gRPC status codes onto rs_* codes.
 *
 * Invariant of rs_grpc_message_span: the span stays valid while both the byte buffer and the
 * scratch buffer live and are not reused; it never copies an uncompressed single-slice message.
 */
#if RS_HAVE_GRPC

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>

#include "transport/grpc_transport.h"

const char *const rs_grpc_method_paths[RS_GRPC_NUM_METHODS] = {
    "/recstore.PSService/Get",
    "/recstore.PSService/Put",
    "/recstore.PSService/Update",
    "/recstore.PSService/Command",
};

int rs_grpc_format_addr(const char *host, uint16_t port, char *out, size_t cap, rs_error *err) {
    if (!host || !*host) return rs_error_set(err, RS_EINVAL, "grpc: empty host");
    int bracket = strchr(host, ':') != NULL && host[0] != '[';
    int n = snprintf(out, cap, bracket ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
    if (n < 0 || (size_t)n >= cap)
        return rs_error_set(err, RS_EINVAL, "grpc: host '%.64s' is too long", host);
    return 0;
}

static int scratch_reserve(rs_grpc_scratch *s, size_t len) {
    if (s->cap >= len) return 0;
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < len)
        cap *= 2;
    uint8_t *p = realloc(s->buf, cap);
    if (!p) return RS_ENOMEM;
    s->buf = p;
    s->cap = cap;
    return 0;
}

int rs_grpc_message_span(grpc_byte_buffer *bb, rs_grpc_scratch *scratch, rs_grpc_span *out,
                         rs_error *err) {
    out->data = NULL;
    out->len = 0;
    if (!bb) return 0;
    if (bb->type == GRPC_BB_RAW && bb->data.raw.compression == GRPC_COMPRESS_NONE) {
        grpc_slice_buffer *sb = &bb->data.raw.slice_buffer;
        if (sb->count == 1) {
            out->data = GRPC_SLICE_START_PTR(sb->slices[0]);
            out->len = GRPC_SLICE_LENGTH(sb->slices[0]);
            return 0;
        }
        if (scratch_reserve(scratch, sb->length) != 0)
            return rs_error_set(err, RS_ENOMEM, "grpc: no memory for a %zu-byte message",
                                sb->length);
        size_t off = 0;
        for (size_t i = 0; i < sb->count; i++) {
            size_t n = GRPC_SLICE_LENGTH(sb->slices[i]);
            memcpy(scratch->buf + off, GRPC_SLICE_START_PTR(sb->slices[i]), n);
            off += n;
        }
        out->data = scratch->buf;
        out->len = off;
        return 0;
    }
    /* compressed (a client that enabled message compression): the reader inflates */
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, bb))
        return rs_error_set(err, RS_EPROTO, "grpc: cannot decompress the message");
    size_t off = 0;
    grpc_slice sl;
    int rc = 0;
    while (grpc_byte_buffer_reader_next(&rd, &sl)) {
        size_t n = GRPC_SLICE_LENGTH(sl);
        if (rc == 0 && scratch_reserve(scratch, off + n) != 0)
            rc = rs_error_set(err, RS_ENOMEM, "grpc: no memory for a decompressed message");
        if (rc == 0) memcpy(scratch->buf + off, GRPC_SLICE_START_PTR(sl), n);
        off += n;
        grpc_slice_unref(sl);
    }
    grpc_byte_buffer_reader_destroy(&rd);
    if (rc != 0) return rc;
    out->data = off ? scratch->buf : (const uint8_t *)"";
    out->len = off;
    return 0;
}

int rs_grpc_status_code(grpc_status_code st) {
    switch (st) {
    case GRPC_STATUS_OK: return 0;
    case GRPC_STATUS_UNAVAILABLE:
    case GRPC_STATUS_CANCELLED: return RS_ECONN;
    case GRPC_STATUS_DEADLINE_EXCEEDED: return RS_ETIMEDOUT;
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
    case GRPC_STATUS_INVALID_ARGUMENT: return RS_EINVAL;
    case GRPC_STATUS_UNIMPLEMENTED: return RS_ENOTSUP;
    default: return RS_ESERVER;
    }
}

const char *rs_grpc_status_name(grpc_status_code st) {
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if ((unsigned)st < sizeof names / sizeof names[0]) return names[st];
    return "UNKNOWN_STATUS";
}

#endif /* RS_HAVE_GRPC */

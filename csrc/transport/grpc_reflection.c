/*
 * grpc_reflection.c — gRPC server reflection (grpc.reflection.v1 and v1alpha, the same messages
 * under two package names) on the gRPC transport, answered from rs_proto_descriptor_set: the
 * FileDescriptorSet of the csrc/proto files that the build generates (tools/build/rsbuild.py).
 *
 *   list_services            the services this server serves (rs_grpc_served_services)
 *   file_by_filename         that file's FileDescriptorProto
 *   file_containing_symbol   the file declaring a package-qualified service, method, message
 *                            (nested too) or enum, followed by the files it imports
 *   file_containing_extension, all_extension_numbers_of_type
 *                            NOT_FOUND / an empty list: recbench's protos declare no extensions
 *
 * Each response echoes host and the request (original_request). Lookups walk the descriptor
 * bytes on demand with the shared protobuf reader; nothing is indexed or allocated per file.
 *
 * Stream: one ServerReflectionInfo call is a loop RECV_MESSAGE -> SEND_MESSAGE -> RECV_MESSAGE
 * on tag `op` (one batch in flight), ended by the client's half-close with SEND_STATUS OK; `close`
 * (RECV_CLOSE_ON_SERVER) tells when the call is over. Both tags complete on the worker that took
 * the call, so the stream needs no lock. Freed when close completed and no op batch is pending.
 */
#if RS_HAVE_GRPC && RS_HAVE_PROTOBUF_C

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pb_wire.h"
#include "transport/grpc_services.h"

extern const unsigned char rs_proto_descriptor_set[];
extern const size_t rs_proto_descriptor_set_len;

#define MAX_FILES 32

typedef struct span {
    const uint8_t *p;
    size_t n;
} span;

/* ---- descriptor walking -------------------------------------------------------------------- */

/* The files of the set: FileDescriptorSet { repeated FileDescriptorProto file = 1 }. */
static size_t files(span *out, size_t cap) {
    rs_pb_reader r = {rs_proto_descriptor_set,
                      rs_proto_descriptor_set + rs_proto_descriptor_set_len, "FileDescriptorSet",
                      NULL};
    size_t n = 0;
    while (r.p < r.end && n < cap) {
        unsigned field, wt;
        if (rs_pb_get_tag(&r, &field, &wt)) break;
        if (field == 1 && wt == RS_PB_LEN) {
            if (rs_pb_get_len(&r, &out[n].p, &out[n].n, "file")) break;
            n++;
        } else if (rs_pb_skip_field(&r, field, wt)) {
            break;
        }
    }
    return n;
}

/* First string field `want` of a message (e.g. name = 1). */
static span str_field(span msg, unsigned want) {
    rs_pb_reader r = {msg.p, msg.p + msg.n, "descriptor", NULL};
    span s = {NULL, 0};
    while (r.p < r.end) {
        unsigned field, wt;
        if (rs_pb_get_tag(&r, &field, &wt)) break;
        if (field == want && wt == RS_PB_LEN) {
            rs_pb_get_len(&r, &s.p, &s.n, "name");
            return s;
        }
        if (rs_pb_skip_field(&r, field, wt)) break;
    }
    return s;
}

static int span_eq(span a, const char *b, size_t bn) {
    return a.n == bn && (bn == 0 || memcmp(a.p, b, bn) == 0);
}

/* sym == prefix "." name ? (prefix may be empty) */
static int qualified_eq(const char *sym, size_t sn, span prefix, span name) {
    if (!prefix.n) return span_eq(name, sym, sn);
    return sn == prefix.n + 1 + name.n && memcmp(sym, prefix.p, prefix.n) == 0 &&
           sym[prefix.n] == '.' && memcmp(sym + prefix.n + 1, name.p, name.n) == 0;
}

/* Does message `msg` named prefix.name (or one of its nested messages/enums) declare sym? */
static int message_declares(span msg, const char *sym, size_t sn, const char *scope,
                            size_t scope_n) {
    span name = str_field(msg, 1);
    span pre = {(const uint8_t *)scope, scope_n};
    if (qualified_eq(sym, sn, pre, name)) return 1;
    char full[512];
    size_t fn =
        scope_n ? (size_t)snprintf(full, sizeof full, "%.*s.%.*s", (int)scope_n, scope, (int)name.n,
                                   (const char *)name.p)
                : (size_t)snprintf(full, sizeof full, "%.*s", (int)name.n, (const char *)name.p);
    if (fn >= sizeof full || sn <= fn || memcmp(sym, full, fn) != 0 || sym[fn] != '.') return 0;
    rs_pb_reader r = {msg.p, msg.p + msg.n, "DescriptorProto", NULL};
    while (r.p < r.end) {
        unsigned field, wt;
        if (rs_pb_get_tag(&r, &field, &wt)) break;
        if ((field == 3 || field == 4) && wt == RS_PB_LEN) { /* nested_type, enum_type */
            span sub = {NULL, 0};
            if (rs_pb_get_len(&r, &sub.p, &sub.n, "nested")) break;
            if (field == 3
                    ? message_declares(sub, sym, sn, full, fn)
                    : qualified_eq(sym, sn, (span){(const uint8_t *)full, fn}, str_field(sub, 1)))
                return 1;
        } else if (rs_pb_skip_field(&r, field, wt)) {
            break;
        }
    }
    return 0;
}

static int file_declares(span file, const char *sym, size_t sn) {
    span pkg = str_field(file, 2);
    rs_pb_reader r = {file.p, file.p + file.n, "FileDescriptorProto", NULL};
    while (r.p < r.end) {
        unsigned field, wt;
        if (rs_pb_get_tag(&r, &field, &wt)) break;
        if ((field == 4 || field == 5 || field == 6) && wt == RS_PB_LEN) {
            span d = {NULL, 0};
            if (rs_pb_get_len(&r, &d.p, &d.n, "decl")) break;
            if (field == 4 && message_declares(d, sym, sn, (const char *)pkg.p, pkg.n)) return 1;
            if (field == 5 && qualified_eq(sym, sn, pkg, str_field(d, 1))) return 1;
            if (field == 6) { /* service and its methods */
                span svc = str_field(d, 1);
                if (qualified_eq(sym, sn, pkg, svc)) return 1;
                rs_pb_reader m = {d.p, d.p + d.n, "ServiceDescriptorProto", NULL};
                while (m.p < m.end) {
                    unsigned f2, w2;
                    if (rs_pb_get_tag(&m, &f2, &w2)) break;
                    if (f2 == 2 && w2 == RS_PB_LEN) {
                        span meth = {NULL, 0};
                        if (rs_pb_get_len(&m, &meth.p, &meth.n, "method")) break;
                        span mn = str_field(meth, 1);
                        size_t want = pkg.n + (pkg.n ? 1 : 0) + svc.n + 1 + mn.n;
                        if (sn == want && qualified_eq(sym, sn - mn.n - 1, pkg, svc) &&
                            sym[sn - mn.n - 1] == '.' && memcmp(sym + sn - mn.n, mn.p, mn.n) == 0)
                            return 1;
                    } else if (rs_pb_skip_field(&m, f2, w2)) {
                        break;
                    }
                }
            }
        } else if (rs_pb_skip_field(&r, field, wt)) {
            break;
        }
    }
    return 0;
}

static int find_file(const span *fs, size_t nf, const char *name, size_t len) {
    for (size_t i = 0; i < nf; i++)
        if (span_eq(str_field(fs[i], 1), name, len)) return (int)i;
    return -1;
}

/* ---- responses ------------------------------------------------------------------------------ */

typedef struct msgbuf {
    uint8_t *p;
    size_t len, cap;
} msgbuf;

static int mb_reserve(msgbuf *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int mb_lfield(msgbuf *b, unsigned field, const void *data, size_t len) {
    if (mb_reserve(b, 16 + len)) return -1;
    uint8_t *e = rs_pb_put_lhead(b->p + b->len, field, len);
    memcpy(e, data, len);
    b->len = (size_t)(e + len - b->p);
    return 0;
}

/* Wrap `inner` as field `field` of the response. */
static int mb_sub(msgbuf *b, unsigned field, const msgbuf *inner) {
    return mb_lfield(b, field, inner->p ? inner->p : (const uint8_t *)"", inner->len);
}

static int error_response(msgbuf *b, grpc_status_code code, const char *text) {
    msgbuf e = {0};
    uint8_t v[12];
    size_t vn = (size_t)(rs_pb_put_vfield(v, 1, (uint64_t)code) - v);
    int rc = mb_reserve(&e, vn) ? -1 : 0;
    if (!rc) {
        memcpy(e.p, v, vn);
        e.len = vn;
        rc = mb_lfield(&e, 2, text, strlen(text));
    }
    if (!rc) rc = mb_sub(b, 7, &e);
    free(e.p);
    return rc;
}

/* FileDescriptorResponse with file i and what it imports (transitively). */
static int files_response(msgbuf *b, const span *fs, size_t nf, int first) {
    int order[MAX_FILES];
    size_t n = 0;
    order[n++] = first;
    for (size_t k = 0; k < n; k++) {
        span f = fs[order[k]];
        rs_pb_reader r = {f.p, f.p + f.n, "FileDescriptorProto", NULL};
        while (r.p < r.end) {
            unsigned field, wt;
            if (rs_pb_get_tag(&r, &field, &wt)) break;
            if (field == 3 && wt == RS_PB_LEN) { /* dependency */
                span dep = {NULL, 0};
                if (rs_pb_get_len(&r, &dep.p, &dep.n, "dependency")) break;
                int j = find_file(fs, nf, (const char *)dep.p, dep.n);
                int seen = j < 0;
                for (size_t q = 0; q < n && !seen; q++)
                    seen = order[q] == j;
                if (!seen && n < MAX_FILES) order[n++] = j;
            } else if (rs_pb_skip_field(&r, field, wt)) {
                break;
            }
        }
    }
    msgbuf fr = {0};
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++)
        rc = mb_lfield(&fr, 1, fs[order[k]].p, fs[order[k]].n);
    if (!rc) rc = mb_sub(b, 4, &fr);
    free(fr.p);
    return rc;
}

/* The ServerReflectionResponse for one request message. */
static grpc_byte_buffer *answer(const uint8_t *req, size_t len) {
    span fs[MAX_FILES];
    size_t nf = files(fs, MAX_FILES);
    span host = {NULL, 0}, arg = {NULL, 0};
    unsigned kind = 0;
    rs_pb_reader r = {req, req + len, "ServerReflectionRequest", NULL};
    int malformed = 0;
    while (r.p < r.end) {
        unsigned field, wt;
        if (rs_pb_get_tag(&r, &field, &wt)) {
            malformed = 1;
            break;
        }
        if (field >= 1 && field <= 7 && field != 2 && wt == RS_PB_LEN) {
            span s = {NULL, 0};
            if (rs_pb_get_len(&r, &s.p, &s.n, "field")) {
                malformed = 1;
                break;
            }
            if (field == 1) {
                host = s;
            } else {
                kind = field;
                arg = s;
            }
        } else if (rs_pb_skip_field(&r, field, wt)) {
            malformed = 1;
            break;
        }
    }
    msgbuf b = {0};
    int rc = mb_lfield(&b, 1, host.p ? host.p : (const uint8_t *)"", host.n);
    if (!rc && len) rc = mb_lfield(&b, 2, req, len);
    char text[300];
    if (rc) {
    } else if (malformed) {
        rc = error_response(&b, GRPC_STATUS_INVALID_ARGUMENT, "malformed ServerReflectionRequest");
    } else if (kind == 7) {
        msgbuf ls = {0};
        for (size_t i = 0; i < rs_grpc_num_served_services && !rc; i++) {
            msgbuf one = {0};
            rc = mb_lfield(&one, 1, rs_grpc_served_services[i], strlen(rs_grpc_served_services[i]));
            if (!rc) rc = mb_sub(&ls, 1, &one);
            free(one.p);
        }
        if (!rc) rc = mb_sub(&b, 6, &ls);
        free(ls.p);
    } else if (kind == 3 || kind == 4) {
        int i = -1;
        if (kind == 3) {
            i = find_file(fs, nf, (const char *)arg.p, arg.n);
        } else {
            for (size_t k = 0; k < nf && i < 0; k++)
                if (file_declares(fs[k], (const char *)arg.p, arg.n)) i = (int)k;
        }
        if (i >= 0) {
            rc = files_response(&b, fs, nf, i);
        } else {
            snprintf(text, sizeof text, "%s '%.*s' not found", kind == 3 ? "file" : "symbol",
                     (int)(arg.n > 200 ? 200 : arg.n), (const char *)arg.p);
            rc = error_response(&b, GRPC_STATUS_NOT_FOUND, text);
        }
    } else if (kind == 5) {
        rc = error_response(&b, GRPC_STATUS_NOT_FOUND, "no extensions are declared");
    } else if (kind == 6) {
        int known = 0;
        for (size_t k = 0; k < nf && !known; k++)
            known = file_declares(fs[k], (const char *)arg.p, arg.n);
        if (known) {
            msgbuf en = {0};
            rc = mb_lfield(&en, 1, arg.p, arg.n);
            if (!rc) rc = mb_sub(&b, 5, &en);
            free(en.p);
        } else {
            snprintf(text, sizeof text, "type '%.*s' not found", (int)(arg.n > 200 ? 200 : arg.n),
                     (const char *)arg.p);
            rc = error_response(&b, GRPC_STATUS_NOT_FOUND, text);
        }
    } else {
        rc = error_response(&b, GRPC_STATUS_UNIMPLEMENTED, "request carries no known question");
    }
    grpc_byte_buffer *bb = rc ? NULL : rs_grpc_message_copy(b.p, b.len);
    free(b.p);
    return bb;
}

/* ---- the stream --------------------------------------------------------------------------------
 */

enum { OP_NONE = 0, OP_RECV, OP_SEND, OP_STATUS };

typedef struct refl_stream {
    rs_grpc_stream op_tag, close_tag;
    grpc_call *call;
    grpc_byte_buffer *in, *out;
    int op;        /* batch in flight on op_tag */
    int closed;    /* close_tag completed */
    int cancelled; /* written by gRPC */
    rs_grpc_scratch scratch;
} refl_stream;

static void maybe_free(refl_stream *s) {
    if (!s->closed || s->op != OP_NONE) return;
    if (s->in) grpc_byte_buffer_destroy(s->in);
    if (s->out) grpc_byte_buffer_destroy(s->out);
    free(s->scratch.buf);
    grpc_call_unref(s->call);
    free(s);
}

static int start_recv(refl_stream *s, int with_metadata) {
    s->op = OP_RECV;
    if (rs_grpc_stream_recv(s->call, with_metadata, &s->in, &s->op_tag) == 0) return 0;
    s->op = OP_NONE;
    return -1;
}

static void start_status(refl_stream *s) {
    s->op = OP_STATUS;
    if (rs_grpc_stream_status_ok(s->call, &s->op_tag) != 0) s->op = OP_NONE;
}

static void on_op(rs_grpc_stream *tag, int ok) {
    refl_stream *s = (refl_stream *)((char *)tag - offsetof(refl_stream, op_tag));
    int was = s->op;
    s->op = OP_NONE;
    if (was == OP_RECV && ok && s->in) {
        rs_grpc_span req;
        rs_error e = {0};
        int rc = rs_grpc_message_span(s->in, &s->scratch, &req, &e);
        grpc_byte_buffer_destroy(s->in);
        s->in = NULL;
        s->out = rc ? NULL : answer(req.data ? req.data : (const uint8_t *)"", req.len);
        if (!s->out) {
            grpc_call_cancel_with_status(s->call, GRPC_STATUS_INTERNAL,
                                         "server reflection: could not build a response", NULL);
        } else {
            s->op = OP_SEND;
            if (rs_grpc_stream_send(s->call, s->out, &s->op_tag) != 0) s->op = OP_NONE;
        }
    } else if (was == OP_RECV && ok) {
        start_status(s); /* the client half-closed: end the call */
    } else if (was == OP_SEND) {
        grpc_byte_buffer_destroy(s->out);
        s->out = NULL;
        if (ok) start_recv(s, 0);
    }
    maybe_free(s);
}

static void on_close(rs_grpc_stream *tag, int ok) {
    refl_stream *s = (refl_stream *)((char *)tag - offsetof(refl_stream, close_tag));
    s->closed = 1;
    maybe_free(s);
}

int rs_grpc_reflection_info(rs_grpc_call_ctx *c, grpc_call *call, grpc_byte_buffer *payload) {
    if (payload) grpc_byte_buffer_destroy(payload);
    refl_stream *s = calloc(1, sizeof *s);
    if (!s) {
        grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL);
        grpc_call_unref(call);
        return 0;
    }
    s->op_tag.on_event = on_op;
    s->close_tag.on_event = on_close;
    s->call = call;
    if (rs_grpc_stream_on_close(call, &s->cancelled, &s->close_tag) != 0) {
        grpc_call_unref(call);
        free(s);
        return 0;
    }
    if (start_recv(s, 1) != 0)
        grpc_call_cancel_with_status(call, GRPC_STATUS_INTERNAL, "server reflection: cannot read",
                                     NULL);
    return 0;
}

#endif /* RS_HAVE_GRPC && RS_HAVE_PROTOBUF_C */

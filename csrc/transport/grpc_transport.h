/*
 * grpc_transport.h — what the gRPC transport's server (grpc_server.c) and client connection
 * (grpc_client.c) share: the two transport tables, the service's method paths, how a host and
 * port become a gRPC address, how a received message becomes one contiguous span, and how a gRPC
 * status maps onto an rs_* code. Built only with libgrpc-dev (RS_HAVE_GRPC).
 *
 * Wire: HTTP/2 through the gRPC core C API, service recstore.PSService (csrc/proto/ps.proto, also
 * shipped as recbench/proto/ps.proto), unary methods /recstore.PSService/{Get,Put,Update,Command}.
 * Request and response messages are PSRequest / PSResponse with keys and rows inline in their
 * bytes fields, encoded and decoded by the shared payload codec (ps_codec.c).
 */
#ifndef RS_GRPC_TRANSPORT_H
#define RS_GRPC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/status.h>

#include "recstore/copy.h"
#include "recstore/error.h"
#include "recstore/ps.h"
#include "recstore/recstore_wire.h"
#include "recstore/transport.h"
#include "transport/tcp_congestion.h"

extern const rs_ps_server_ops rs_grpc_server_ops;
extern const rs_ps_conn_ops rs_grpc_conn_ops;

/* The four unary methods, indexed by op - 1 (RS_PS_GET .. RS_PS_COMMAND). */
#define RS_GRPC_NUM_METHODS 4
extern const char *const rs_grpc_method_paths[RS_GRPC_NUM_METHODS];
/* The bidi method carrying all four (grpc_ps_stream.c). */
#define RS_GRPC_STREAM_PATH "/recstore.PSService/Stream"
/* A client connection opens `streams` of them (option streams=N, 1..RS_GRPC_MAX_STREAMS), never
 * more than its requests in flight; without the option, one, and up to 4 while the process has
 * more gRPC client threads than CPUs (grpc_client.c). */
#define RS_GRPC_MAX_STREAMS 16

/* Transport options ("k=v;k=v", see grpc_options.c for the keys). server != 0 also accepts the
 * server-only keys. RS_EINVAL naming the option for unknown keys or bad values. */
typedef struct rs_grpc_options {
    unsigned calls_per_method;   /* server */
    unsigned reply_timeout_ms;   /* server */
    unsigned max_frame_size;     /* GRPC_ARG_HTTP2_MAX_FRAME_SIZE of this end */
    unsigned max_reply_bytes;    /* client: largest reply message accepted (receive limit) */
    unsigned malloc_tuning;      /* 1: raise glibc's mmap/trim thresholds once per process */
    unsigned stream;             /* client: requests as messages of Stream calls */
    unsigned streams;            /* client: Stream calls per connection; 0 = by the process */
    rs_copy_mode client_copy;    /* client: how GET rows reach the caller's buffer (copy.h) */
    char poll_strategy[8];       /* "", "epoll1" or "poll": gRPC core's poller for the process */
    rs_rsps_optimizer optimizer; /* server: RecStore UpdateParameter's optimizer */
    char tls_cert[512];          /* server: PEM certificate chain file; "" = no TLS */
    char tls_key[512];           /* server: PEM private key file (with tls_cert) */
    char tls_ca[512];            /* client: PEM root certificates to trust; "" = no TLS */
    rs_tcp_cc tcp_cc;            /* both: the sockets' congestion control (tcp_congestion.h) */
} rs_grpc_options;
int rs_grpc_options_parse(const char *extra, int server, rs_grpc_options *out, rs_error *err);
/* Process-wide effects of the options, to call before grpc_init: malloc tuning (at most once)
 * and the poller (set before gRPC's first start in the process; asking for another one later is
 * RS_EINVAL naming both). */
int rs_grpc_options_apply_process(const rs_grpc_options *o, int server, rs_error *err);

/* Credentials from the options (grpc_tls.c): TLS when tls_cert+tls_key (server) / tls_ca (client)
 * are given, else insecure. Errors name the file. Release with grpc_*_credentials_release. */
int rs_grpc_server_creds(const rs_grpc_options *o, grpc_server_credentials **out, rs_error *err);
int rs_grpc_channel_creds(const rs_grpc_options *o, grpc_channel_credentials **out, rs_error *err);

/* "host:port", with IPv6 literals bracketed ("[::1]:15000"). RS_EINVAL when it does not fit. */
int rs_grpc_format_addr(const char *host, uint16_t port, char *out, size_t cap, rs_error *err);

/* A received message as one contiguous span. Uncompressed single-slice messages are viewed in
 * place; anything else is gathered into `scratch` (grown as needed, owned by the caller and freed
 * with free()). Returns 0, or RS_ENOMEM / RS_EPROTO (a compressed message that fails to
 * inflate). */
typedef struct rs_grpc_span {
    const uint8_t *data;
    size_t len;
} rs_grpc_span;

typedef struct rs_grpc_scratch {
    uint8_t *buf;
    size_t cap;
} rs_grpc_scratch;

int rs_grpc_message_span(grpc_byte_buffer *bb, rs_grpc_scratch *scratch, rs_grpc_span *out,
                         rs_error *err);

/* Reusable buffers lent to gRPC as slices (grpc_slice_pool.c). create: a pool that keeps up to
 * `keep` idle buffers. get: a slice of len bytes over a pooled buffer; the buffer returns to the
 * pool when gRPC and the caller have dropped every reference (grpc_slice_unref). release: the
 * owner's reference; the pool is freed once every lent buffer has come back. */
typedef struct rs_grpc_slice_pool rs_grpc_slice_pool;
int rs_grpc_slice_pool_create(size_t keep, rs_grpc_slice_pool **out);
int rs_grpc_slice_pool_get(rs_grpc_slice_pool *p, size_t len, grpc_slice *out);
void rs_grpc_slice_pool_release(rs_grpc_slice_pool *p);

/* gRPC status -> rs code: UNAVAILABLE -> RS_ECONN, DEADLINE_EXCEEDED -> RS_ETIMEDOUT,
 * CANCELLED -> RS_ECONN, RESOURCE_EXHAUSTED/INVALID_ARGUMENT -> RS_EINVAL, others RS_ESERVER. */
int rs_grpc_status_code(grpc_status_code st);
/* "UNAVAILABLE", "DEADLINE_EXCEEDED", ... */
const char *rs_grpc_status_name(grpc_status_code st);

#endif

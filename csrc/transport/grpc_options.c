/*
 * grpc_options.c — the gRPC transport's "k=v;k=v" options (rs_ps_server_opts.extra,
 * rs_ps_client_opts.extra) and the channel arguments both ends use.
 *
 *   calls_per_method=N  (server) requested calls kept armed per method per worker thread
 *                       (PSService/Stream too: a connection's streams then all find one on
 *                       the worker gRPC core bound the connection to), 1..1024
 *   reply_timeout_ms=N  (server) a reply the client has not taken after N ms (it stopped reading,
 *                       or keeps its HTTP/2 flow-control window shut) is cancelled so its slot is
 *                       freed; default 30000, 10..3600000
 *   max_frame_size=N    (both) largest HTTP/2 frame this end accepts, 16384..16777215; default
 *                       16384, HTTP/2's own (larger frames measured no better here)
 *   max_reply_bytes=N   (client) largest reply message accepted, 4096..2147483647; default
 *                       2147483647 (2 GiB - 1, the brpc client's limit too): a server cannot make
 *                       the client take more; a larger reply fails the call (RESOURCE_EXHAUSTED)
 *   poll_strategy=epoll1|poll
 *                       (both) gRPC core's socket poller for the whole process (its
 *                       GRPC_POLL_STRATEGY; default poll, or the variable if set). Chosen when
 *                       gRPC first starts in the process; a later
 *                       server or client asking for another poller is an error. With epoll1 one
 *                       thread at a time polls, and a request read by one worker is often served
 *                       on another worker's queue (a wake-up per call): on the 2-core VM a server
 *                       with 2 workers served one client at half the rate of 1 worker; with poll
 *                       it did not, and 128 connections were served no slower (docs/grpc.md).
 *   stream=BOOL         1 (default). Client: send the requests of a connection as messages of
 *                       /recstore.PSService/Stream calls (streams=N of them) instead of one unary
 *                       call each
 *                       (gRPC core's per-call work is paid once; docs/grpc.md has the figures).
 *                       A server without Stream is detected at connect and served unary; if the
 *                       stream fails later, its requests in flight fail and the connection goes
 *                       on with unary calls. 0: always unary calls. Server: 0 answers Stream
 *                       with UNIMPLEMENTED naming this option, so every client of that server
 *                       uses unary calls (one key for both sides: the runner's
 *                       --transport-options grpc:stream=0 reaches servers and clients).
 *   streams=N           (client) Stream calls per connection, 1..16, all opened at connect and
 *                       all used; never more than the requests in flight. One stream sends one
 *                       message at a time, and the next leaves only when the client thread has
 *                       seen the last one go, so with more client threads than cores a
 *                       descheduled thread's queued requests wait for it; with N streams N
 *                       requests leave at once, all served by the connection's server worker.
 *                       Default (no streams=): one stream while the process's gRPC client
 *                       threads are no more than its CPUs; past that up to 4, opened as
 *                       requests find every stream sending (grpc_client.c, docs/grpc.md).
 *   tcp_congestion=auto|system|NAME
 *                       (both) the TCP congestion control of this end's sockets: auto (default)
 *                       takes cubic instead of a BBR on loopback (a server listening on a
 *                       loopback address, a client's connections to one), system keeps the
 *                       kernel's choice, NAME sets that one (tcp_congestion.h; gRPC core makes
 *                       the sockets, so they are found among the process's descriptors)
 *   optimizer=SGD       (server) the optimizer RecStore's UpdateParameter applies (RecStore's
 *                       cache_ps.optimizer.type): SGD, AdaGrad or RowWiseAdaGrad
 *   learning_rate=X     (server) its learning rate, default 0.01 (RecStore's)
 *   epsilon=X           (server) AdaGrad's epsilon, default 1e-10 (RecStore's)
 *   client_copy=auto|plain|stream
 *                       (client) how GET rows go from gRPC's slices into the caller's buffer:
 *                       auto (default) with streaming stores while the process's GETs in flight
 *                       hold a quarter of the LLC or more in row buffers, else memcpy; plain
 *                       always memcpy; stream always streaming stores (copy.h, the RC clients'
 *                       option of the same name; docs/grpc.md)
 *   malloc_tuning=BOOL  (both) 1 (default): at first use, raise glibc's mmap and trim thresholds
 *                       to 64 MiB for the process. gRPC allocates a buffer per socket read and
 *                       frees it after parsing; with glibc's defaults those frees return memory
 *                       to the kernel (heap trim / munmap) and the next read page-faults it back
 *                       in, which cost about a quarter of the CPU of a 500 x 512 B GET loop. The
 *                       price is that freed memory stays in the process. 0 leaves malloc alone.
 *
 * Integers and booleans have the syntax of every transport (transport_options.h). Unknown keys
 * and bad values are errors naming the option, never ignored.
 */
#if RS_HAVE_GRPC

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/grpc_transport.h"
#include "transport/transport_options.h"

#define RS_GRPC_DEFAULT_CALLS_PER_METHOD 16
#define RS_GRPC_DEFAULT_REPLY_TIMEOUT_MS 30000
#define RS_GRPC_DEFAULT_MAX_FRAME        16384u
#define RS_GRPC_MALLOC_THRESHOLD         (64 << 20)

typedef struct parse_ctx {
    int server;
    const char *side; /* "server" or "client", in messages */
    const char *who;  /* "grpc server" or "grpc client": the option parsers' prefix */
    rs_grpc_options *out;
} parse_ctx;

static int parse_uint(const parse_ctx *c, const char *key, const char *val, unsigned long lo,
                      unsigned long hi, unsigned *out, rs_error *err) {
    uint64_t v;
    int rc = rs_transport_option_u64(c->who, key, val, lo, hi, &v, err);
    if (rc == 0) *out = (unsigned)v;
    return rc;
}

static int apply_option(void *ctx, const char *kv, const char *val, rs_error *err) {
    parse_ctx *c = ctx;
    rs_grpc_options *out = c->out;
    if (c->server && strcmp(kv, "calls_per_method") == 0)
        return parse_uint(c, kv, val, 1, 1024, &out->calls_per_method, err);
    if (c->server && strcmp(kv, "reply_timeout_ms") == 0)
        return parse_uint(c, kv, val, 10, RS_TRANSPORT_OPTION_MAX_MS, &out->reply_timeout_ms, err);
    if (strcmp(kv, "max_frame_size") == 0)
        return parse_uint(c, kv, val, 16384, 16777215, &out->max_frame_size, err);
    if (!c->server && strcmp(kv, "streams") == 0)
        return parse_uint(c, kv, val, 1, RS_GRPC_MAX_STREAMS, &out->streams, err);
    if (!c->server && strcmp(kv, "client_copy") == 0) {
        int w = 0;
        int rc =
            rs_transport_option_choice(c->who, kv, val, rs_copy_mode_names, RS_COPY_MODES, &w, err);
        if (rc == 0) out->client_copy = (rs_copy_mode)w;
        return rc;
    }
    if (!c->server && strcmp(kv, "max_reply_bytes") == 0)
        return parse_uint(c, kv, val, 4096, RS_PS_MAX_REPLY_BYTES, &out->max_reply_bytes, err);
    if (strcmp(kv, "malloc_tuning") == 0 || strcmp(kv, "stream") == 0) {
        int on, rc;
        unsigned *dst = strcmp(kv, "stream") == 0 ? &out->stream : &out->malloc_tuning;
        if ((rc = rs_transport_option_bool(c->who, kv, val, &on, err)) == 0) *dst = (unsigned)on;
        return rc;
    }
    char *path = c->server && strcmp(kv, "tls_cert") == 0  ? out->tls_cert
                 : c->server && strcmp(kv, "tls_key") == 0 ? out->tls_key
                 : !c->server && strcmp(kv, "tls_ca") == 0 ? out->tls_ca
                                                           : NULL;
    if (path) {
        if (!val[0] || strlen(val) >= sizeof out->tls_ca)
            return rs_error_set(err, RS_EINVAL, "grpc %s option %s: a file path (1..%zu bytes)",
                                c->side, kv, sizeof out->tls_ca - 1);
        snprintf(path, sizeof out->tls_ca, "%s", val);
        return 0;
    }
    if (strcmp(kv, "tcp_congestion") == 0) return rs_tcp_cc_parse(c->who, val, &out->tcp_cc, err);
    if (strcmp(kv, "poll_strategy") == 0) {
        if (strcmp(val, "epoll1") != 0 && strcmp(val, "poll") != 0)
            return rs_error_set(err, RS_EINVAL,
                                "grpc %s option poll_strategy=%s: expected epoll1 or poll", c->side,
                                val);
        snprintf(out->poll_strategy, sizeof out->poll_strategy, "%s", val);
        return 0;
    }
    if (c->server) {
        int known = rs_rsps_optimizer_option(&out->optimizer, c->who, kv, val, err);
        if (known) return known < 0 ? known : 0;
    }
    return rs_error_set(
        err, RS_EINVAL, "unknown grpc %s option '%s' (known: %s)", c->side, kv,
        c->server
            ? "calls_per_method, reply_timeout_ms, max_frame_size, "
              "poll_strategy, malloc_tuning, stream, tcp_congestion, optimizer, learning_rate, "
              "epsilon, tls_cert, tls_key"
            : "max_frame_size, max_reply_bytes, client_copy, poll_strategy, "
              "malloc_tuning, stream, streams, tcp_congestion, tls_ca");
}

int rs_grpc_options_parse(const char *extra, int server, rs_grpc_options *out, rs_error *err) {
    out->calls_per_method = RS_GRPC_DEFAULT_CALLS_PER_METHOD;
    out->reply_timeout_ms = RS_GRPC_DEFAULT_REPLY_TIMEOUT_MS;
    out->max_frame_size = RS_GRPC_DEFAULT_MAX_FRAME;
    out->max_reply_bytes = RS_PS_MAX_REPLY_BYTES;
    out->malloc_tuning = 1;
    out->stream = 1;
    out->streams = 0;
    out->poll_strategy[0] = '\0';
    out->tls_cert[0] = out->tls_key[0] = out->tls_ca[0] = '\0';
    rs_rsps_optimizer_default(&out->optimizer);
    parse_ctx c = {server, server ? "server" : "client", server ? "grpc server" : "grpc client",
                   out};
    return rs_transport_options_each(extra, c.who, apply_option, &c, err);
}

static void tune_malloc(void) {
    mallopt(M_MMAP_THRESHOLD, RS_GRPC_MALLOC_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, RS_GRPC_MALLOC_THRESHOLD);
}

/* The poller in effect in this process since gRPC's first start through this transport ("" =
 * gRPC's own choice); gRPC core reads GRPC_POLL_STRATEGY when it starts. */
/* gRPC core's own default is epoll1; poll serves few busy connections on many workers without a
 * hand-off per call, and measured no worse at 128 connections (docs/grpc.md). */
#define RS_GRPC_DEFAULT_POLLER "poll"

static pthread_mutex_t g_poll_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_poll_chosen;
static char g_poll[16];

int rs_grpc_options_apply_process(const rs_grpc_options *o, int server, rs_error *err) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int rc = 0;
    if (o->malloc_tuning) pthread_once(&once, tune_malloc);
    pthread_mutex_lock(&g_poll_mu);
    if (!g_poll_chosen) {
        if (o->poll_strategy[0])
            setenv("GRPC_POLL_STRATEGY", o->poll_strategy, 1);
        else /* our default, unless the user's environment names one (docs/grpc.md) */
            setenv("GRPC_POLL_STRATEGY", RS_GRPC_DEFAULT_POLLER, 0);
        const char *env = getenv("GRPC_POLL_STRATEGY");
        snprintf(g_poll, sizeof g_poll, "%s", env ? env : "");
        g_poll_chosen = 1;
    } else if (o->poll_strategy[0] && strcmp(o->poll_strategy, g_poll) != 0) {
        rc = rs_error_set(err, RS_EINVAL,
                          "grpc %s option poll_strategy=%s: gRPC already runs in this process "
                          "with poller '%s'; the poller is chosen once per process",
                          server ? "server" : "client", o->poll_strategy,
                          g_poll[0] ? g_poll : "default");
    }
    pthread_mutex_unlock(&g_poll_mu);
    return rc;
}

#endif /* RS_HAVE_GRPC */

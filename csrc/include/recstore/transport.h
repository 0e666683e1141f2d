/*
 * transport.h — the two tables every PS transport fills: a server side that serves one shard on
 * an endpoint, and a client connection to one shard. brpc (baidu_std over TCP), grpc (gRPC core
 * C API), rdma and shm (the RC slot protocol over verbs or shared memory) each provide both.
 * Above this interface, the all-shards client (ps_client.c) and the server process are the same
 * for every transport.
 */
#ifndef RECSTORE_TRANSPORT_H
#define RECSTORE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"
#include "recstore/ps.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Shared defaults and limits of every transport (the Python layer exports the ones a caller must
 * know: recbench._ps.DEFAULT_TIMEOUT_MS, ...). */
#define RS_PS_DEFAULT_TIMEOUT_MS      10000u        /* per request, when timeout_ms == 0 */
#define RS_PS_DEFAULT_MAX_BODY_BYTES  (64ull << 20) /* largest request a server accepts */
#define RS_PS_DEFAULT_MAX_CONNECTIONS 1024u         /* connections a server holds at once */
/* Largest reply a client accepts (2 GiB - 1: a baidu_std body size or a gRPC message length is
 * at most this); a server cannot make a client allocate more. */
#define RS_PS_MAX_REPLY_BYTES 2147483647u

typedef struct rs_ps_server_opts {
    const char *host;         /* bind address (only this one) */
    uint16_t port;            /* 0 = pick a free port (read it back with bound_port) */
    uint32_t num_threads;     /* worker / poll threads */
    uint64_t max_body_bytes;  /* largest request accepted before allocating
                               * (0 = RS_PS_DEFAULT_MAX_BODY_BYTES) */
    uint32_t max_connections; /* 0 = RS_PS_DEFAULT_MAX_CONNECTIONS (brpc connections, rdma/shm
                               * control connections); RS_ENOTSUP where it cannot be enforced
                               * (grpc) */
    const char *extra;        /* transport-specific "k=v;k=v" options (e.g. RC poll_mode) */
    const struct rs_auth_token *auth; /* NULL or len 0: no token required (recstore/auth.h) */
} rs_ps_server_opts;

typedef struct rs_ps_transport_stats {
    uint64_t connections_accepted, connections_open, requests, bad_frames, bytes_in, bytes_out;
    uint64_t auth_failures; /* requests refused for a missing or wrong token */
    /* RC (rdma/shm) poll threads; 0 elsewhere: napping or parked now, naps taken, idle rounds
     * spent spinning or yielding */
    uint64_t pollers_sleeping, poller_naps, poller_awake_idle_rounds;
    /* RC poller sleeps (0 elsewhere): doorbell sleeps entered (shm futexes, verbs completion
     * events), those a client's doorbell ended, responses after which a sleeping client was woken
     * (or that carried the immediate it asked for) */
    uint64_t poller_blocks, poller_doorbell_wakes, client_wakes, poller_quick_idles;
    /* shm: answers whose sleeping client was checked after the pass over its lanes (rc.h) */
    uint64_t client_wake_checks_deferred;
    uint64_t lanes_ringing; /* verbs: open lanes whose client rings (RS_RC_CAP_RING) */
    /* brpc: open connections of the worker that has the most, and the fewest; grpc: open
     * PSService/Stream calls (one per client connection on a stream) likewise; 0 elsewhere */
    uint64_t worker_connections_max, worker_connections_min;
    /* brpc, grpc: the TCP congestion control of the listening socket, which the connections it
     * accepts inherit (option tcp_congestion, transport/tcp_congestion.h); "" elsewhere */
    char tcp_congestion[16];
} rs_ps_transport_stats;

typedef struct rs_ps_server_ops {
    const char *name; /* "brpc", "grpc", "rdma", "shm" */
    /* Bind, start threads; returns once requests are accepted. */
    int (*start)(const rs_ps_server_opts *opts, rs_ps_shard *shard, void **state, rs_error *err);
    uint16_t (*bound_port)(void *state);
    /* Stop accepting, fail in-flight work with RS_PS_SHUTTING_DOWN or close, join threads, free. */
    void (*stop)(void *state);
    void (*stats)(void *state, rs_ps_transport_stats *out);
} rs_ps_server_ops;

typedef struct rs_ps_client_opts {
    uint32_t timeout_ms;    /* per request; 0 = RS_PS_DEFAULT_TIMEOUT_MS */
    uint32_t max_in_flight; /* requests a connection may have outstanding (prefetch_depth) */
    const char *extra;      /* transport-specific "k=v;k=v" options */
    /* In-flight requests wanted on top of that for the chunks of batches larger than one request:
     * a transport with a fixed number of request slots (rdma, shm) takes what fits, never less
     * than max_in_flight; the conn's limits() says what it took. 0 = max_in_flight. */
    uint32_t want_in_flight;
    const struct rs_auth_token *auth; /* NULL: send no token */
} rs_ps_client_opts;

/* What one request on a connection can carry (0 = no bound of this transport). */
typedef struct rs_ps_conn_limits {
    uint32_t max_keys;            /* keys per request the server announced */
    uint32_t max_in_flight;       /* requests outstanding the connection accepts */
    uint64_t max_request_payload; /* key bytes + row bytes of one request */
    uint64_t max_response_rows;   /* row bytes of one response */
} rs_ps_conn_limits;

/* One finished request on a connection. */
typedef struct rs_ps_completion {
    uint64_t tag;        /* the submit() tag */
    rs_ps_response resp; /* status, error, value_size, num_found, reply; rows already copied */
} rs_ps_completion;

/* How a connection's waits for answers ended (recstore/spin.h; added up over connections): answered
 * while the thread spun, blocked in the kernel; begun with a short spin or none because the
 * connection's recent waits did not pay for a spin (quick, adaptive spinning), begun without a
 * spin because more of the process's threads were waiting than it has CPUs or every spin slot was
 * taken (unspun); spins during which the thread was switched out for another thread (preempted). */
typedef struct rs_ps_wait_stats {
    uint64_t spun, blocked, quick, unspun, preempted;
} rs_ps_wait_stats;

typedef struct rs_ps_conn_ops {
    const char *name;
    int (*connect)(const char *host, uint16_t port, const rs_ps_client_opts *opts, void **conn,
                   rs_error *err);
    /* Queue one request. For GET, the response rows are copied into rows_out (rows_cap bytes) by
     * the time its completion is returned. Keys/rows of req need to stay valid only during the
     * call. At most max_in_flight requests may be outstanding (submitted, not yet returned by
     * next()); beyond that submit returns RS_EBUSY without sending. */
    int (*submit)(void *conn, const rs_ps_request *req, uint64_t tag, void *rows_out,
                  size_t rows_cap, rs_error *err);
    /* Wait for the next completion (in submission order on every transport). RS_ETIMEDOUT,
     * RS_ECONN (peer closed: every outstanding request fails) with a reason naming the peer. */
    int (*next)(void *conn, rs_ps_completion *out, rs_error *err);
    void (*close)(void *conn);
    /* Optional (NULL: the transport bounds nothing but max_in_flight as asked). */
    void (*limits)(void *conn, rs_ps_conn_limits *out);
    /* Optional (NULL: none): the connection's row buffers, GET destinations the transport writes
     * rows into without a copy; fills bufs[0..min(n, max)), *cap (row bytes each) and returns n
     * (rdma/shm: response slots set aside by the RC option rows_buffers=N; recstore/rc.h). */
    uint32_t (*rows_buffers)(void *conn, void **bufs, uint32_t max, size_t *cap);
    /* A client that is not given max_inflight_bytes keeps to a budget of bytes in flight of this
     * many bytes per CPU of the process (recstore/ps_budget.h); 0: to none. Set for the socket
     * transports, whose waiters block; not for RC, whose waiters spin first, so that one request
     * per thread made threads unequal and shm slower (docs/scale.md, "A budget of bytes in
     * flight"). */
    uint64_t budget_per_cpu;
    /* Optional (NULL: the transport does not count them): adds the connection's wait counters to
     * *out. Called by the thread that uses the connection. */
    void (*wait_stats)(void *conn, rs_ps_wait_stats *out);
} rs_ps_conn_ops;

/* Look up a transport by name ("brpc", "grpc", "rdma", "shm"). RS_ENOTSUP with a reason when it
 * was not compiled in (e.g. "grpc: built without libgrpc-dev"); RS_EINVAL for unknown names. */
int rs_ps_transport_find(const char *name, const rs_ps_server_ops **server,
                         const rs_ps_conn_ops **conn, rs_error *err);

/* Name of the i-th known transport (0, 1, ...); NULL past the end. With rs_ps_transport_find it
 * lists what this build has and why the rest is absent. */
const char *rs_ps_transport_name(size_t i);

#ifdef __cplusplus
}
#endif
#endif

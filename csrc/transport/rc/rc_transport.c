/*
 * rc_transport.c — the transport tables of "shm" and "rdma" (transport.h): the RC slot protocol
 * server and client over the shared-memory or the verbs fabric. Options arrive in the `extra`
 * string (rc_options.c); the server answers through the shard handler (rs_ps_shard_handle) and
 * reads rows straight from the shard's KV engine for direct_sg and index_only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/rc.h"
#include "recstore/transport.h"

/* The verbs fabric's options mean nothing on shm: refuse them rather than ignore them. */
static int check_fabric_options(const rs_rc_fabric_ops *fab, const rs_rc_options *o,
                                rs_error *err) {
    if (fab == &rs_rc_fabric_shm && (o->device[0] || o->ib_port != 1 || o->gid_index != -1))
        return rs_error_set(err, RS_EINVAL,
                            "RC options device/ib_port/gid_index select a verbs device: they apply "
                            "to the rdma transport, not shm");
    return 0;
}

/* One option string often serves both sides (the runner's --transport-options reaches servers and
 * clients): a key of the other side is not an error, but it is said, not silently dropped. */
static void warn_other_side(const rs_rc_options *o, int server) {
    rs_error e = {0};
    if (rs_rc_options_check_role(o, server, &e))
        fprintf(stderr, "component=rdma_rc_%s event=option_not_used reason=\"%s\"\n",
                server ? "server" : "client", e.msg);
}

typedef struct rc_srv_state {
    rs_rc_server *srv;
} rc_srv_state;

static int shard_handle(void *ctx, const rs_ps_request *req, rs_ps_response *resp, void *rows_out,
                        size_t rows_cap, unsigned thread_slot) {
    return rs_ps_shard_handle(ctx, req, resp, rows_out, rows_cap, thread_slot);
}

static int rc_start(const rs_rc_fabric_ops *fab, const rs_ps_server_opts *opts, rs_ps_shard *shard,
                    void **state, rs_error *err) {
    rs_rc_options o;
    rs_rc_options_default(&o);
    int rc = rs_rc_options_parse(&o, opts->extra, err);
    if (rc || (rc = check_fabric_options(fab, &o, err))) return rc;
    warn_other_side(&o, 1);
    rs_kv *kv = rs_ps_shard_kv(shard);
    rs_rc_handler h = {
        .ctx = shard,
        .shard_id = rs_ps_shard_id(shard),
        .value_size = rs_ps_shard_value_size(shard),
        .max_keys = o.max_keys ? o.max_keys : rs_ps_shard_max_keys(shard),
        .index_type = kv ? rs_kv_get_index_type(kv) : RS_KV_INDEX_PET_HASH,
        .kv = kv,
        .handle = shard_handle,
    };
    rc_srv_state *st = calloc(1, sizeof *st);
    if (!st) return rs_error_set(err, RS_ENOMEM, "%s server: out of memory", fab->name);
    if (opts->max_connections) o.max_clients = opts->max_connections;
    if (opts->auth) o.auth = *opts->auth;
    rc = rs_rc_server_start(fab, opts->host, opts->port, opts->num_threads, &o, &h, &st->srv, err);
    if (rc) {
        free(st);
        return rc;
    }
    *state = st;
    return 0;
}

static int shm_start(const rs_ps_server_opts *opts, rs_ps_shard *shard, void **state,
                     rs_error *err) {
    return rc_start(&rs_rc_fabric_shm, opts, shard, state, err);
}

static int rdma_start(const rs_ps_server_opts *opts, rs_ps_shard *shard, void **state,
                      rs_error *err) {
    return rc_start(&rs_rc_fabric_verbs, opts, shard, state, err);
}

static uint16_t rc_bound_port(void *state) {
    return rs_rc_server_port(((rc_srv_state *)state)->srv);
}

static void rc_stop(void *state) {
    rc_srv_state *st = state;
    if (!st) return;
    rs_rc_server_stop(st->srv);
    free(st);
}

static void rc_stats(void *state, rs_ps_transport_stats *out) {
    rs_rc_server_stats s;
    rs_rc_server_get_stats(((rc_srv_state *)state)->srv, &s);
    memset(out, 0, sizeof *out);
    out->connections_accepted = s.clients_attached;
    out->connections_open = s.clients_open;
    out->requests = s.requests;
    out->bad_frames = s.invalid_descriptor + s.ctrl_rejected;
    out->auth_failures = s.auth_failures;
    out->bytes_in = s.bytes_in;
    out->bytes_out = s.bytes_out;
    out->pollers_sleeping = s.pollers_sleeping;
    out->poller_naps = s.poller_naps;
    out->poller_awake_idle_rounds = s.poller_awake_idle_rounds;
    out->poller_blocks = s.poller_blocks;
    out->poller_doorbell_wakes = s.poller_doorbell_wakes;
    out->client_wakes = s.client_wakes;
    out->client_wake_checks_deferred = s.client_wake_checks_deferred;
    out->poller_quick_idles = s.poller_quick_idles;
    out->lanes_ringing = s.lanes_ringing;
}

const rs_ps_server_ops rs_shm_server_ops = {.name = "shm",
                                            .start = shm_start,
                                            .bound_port = rc_bound_port,
                                            .stop = rc_stop,
                                            .stats = rc_stats};
const rs_ps_server_ops rs_rdma_server_ops = {.name = "rdma",
                                             .start = rdma_start,
                                             .bound_port = rc_bound_port,
                                             .stop = rc_stop,
                                             .stats = rc_stats};

static int rc_connect(const rs_rc_fabric_ops *fab, const char *host, uint16_t port,
                      const rs_ps_client_opts *opts, void **conn, rs_error *err) {
    rs_rc_options o;
    rs_rc_options_default(&o);
    int rc = rs_rc_options_parse(&o, opts ? opts->extra : NULL, err);
    if (rc || (rc = check_fabric_options(fab, &o, err))) return rc;
    warn_other_side(&o, 0);
    if (opts && opts->timeout_ms && !strstr(opts->extra ? opts->extra : "", "wait_timeout_ms"))
        o.wait_timeout_ms = opts->timeout_ms;
    uint32_t depth = opts && opts->max_in_flight ? opts->max_in_flight : 1;
    uint32_t want = opts ? opts->want_in_flight : 0,
             room = o.qps * o.slots > o.rows_buffers ? o.qps * o.slots - o.rows_buffers : 0;
    if (want > room) want = room; /* chunks take the slots there are, never fewer than depth */
    if (want > depth) depth = want;
    if (opts && opts->auth) o.auth = *opts->auth;
    return rs_rc_client_connect(fab, host, port, depth, &o, (rs_rc_client **)conn, err);
}

static int shm_connect(const char *host, uint16_t port, const rs_ps_client_opts *opts, void **conn,
                       rs_error *err) {
    return rc_connect(&rs_rc_fabric_shm, host, port, opts, conn, err);
}

static int rdma_connect(const char *host, uint16_t port, const rs_ps_client_opts *opts, void **conn,
                        rs_error *err) {
    return rc_connect(&rs_rc_fabric_verbs, host, port, opts, conn, err);
}

static int rc_submit(void *conn, const rs_ps_request *req, uint64_t tag, void *rows_out,
                     size_t rows_cap, rs_error *err) {
    return rs_rc_client_submit(conn, req, tag, rows_out, rows_cap, err);
}

static int rc_next(void *conn, rs_ps_completion *out, rs_error *err) {
    return rs_rc_client_next(conn, &out->tag, &out->resp, err);
}

static void rc_close(void *conn) {
    rs_rc_client_close(conn);
}

static void rc_limits(void *conn, rs_ps_conn_limits *out) {
    rs_rc_client_limits(conn, out);
}

static uint32_t rc_rows_buffers(void *conn, void **bufs, uint32_t max, size_t *cap) {
    return rs_rc_client_rows_buffers(conn, bufs, max, cap);
}

const rs_ps_conn_ops rs_shm_conn_ops = {.name = "shm",
                                        .connect = shm_connect,
                                        .submit = rc_submit,
                                        .next = rc_next,
                                        .close = rc_close,
                                        .limits = rc_limits,
                                        .rows_buffers = rc_rows_buffers};
const rs_ps_conn_ops rs_rdma_conn_ops = {.name = "rdma",
                                         .connect = rdma_connect,
                                         .submit = rc_submit,
                                         .next = rc_next,
                                         .close = rc_close,
                                         .limits = rc_limits,
                                         .rows_buffers = rc_rows_buffers};

/*
 * ps_client.h — the all-shards PS client: one logical client over one connection per shard, on any
 * transport of the registry (transport.h).
 *
 * A batch of keys is split by shard (rs_shard_of) and each shard's part into requests of at most
 * the server's max_keys_per_request (learned at open); all of them are sent before any reply is
 * awaited, as far as the connection's window allows, and GET rows come back in the caller's key
 * order. A batch of any size (up to 2^32 - 1 keys) works; a failure of any request fails the
 * whole batch, naming the shard. Up to prefetch_depth batches
 * may be in flight: submit() starts one, wait() finishes the oldest (FIFO).
 *
 * One rs_ps_client belongs to one thread at a time (no internal locking). Errors name the shard
 * and server ("shard 1 (brpc://127.0.0.1:25001): connection closed by the server ...").
 */
#ifndef RECSTORE_PS_CLIENT_H
#define RECSTORE_PS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"
#include "recstore/ps.h"
#include "recstore/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_ps_client_config {
    const char *transport; /* "brpc", "grpc", "shm", "rdma" */
    uint32_t num_shards;   /* number of endpoints; shard i is served at hosts[i]:ports[i] */
    const char *const *hosts;
    const uint16_t *ports;
    uint32_t value_size;     /* row bytes; 0 = ask the servers */
    uint32_t prefetch_depth; /* batches in flight per client (0 = 1) */
    uint32_t timeout_ms;     /* per request (0 = RS_PS_DEFAULT_TIMEOUT_MS, transport.h) */
    const char *extra;       /* transport-specific "k=v;k=v" options */
    const char *hash_method; /* shard routing: NULL = the wire's own (native: rs_mix64; RecStore's
                              * wire, "recstore+grpc": city_hash, or "simple_mod") */
    const struct rs_auth_token *auth; /* NULL: no token (recstore/auth.h) */
    uint64_t max_inflight_bytes;      /* the process's budget of request bytes (keys + rows) in
                                       * flight, shared by its active clients (recstore/ps_budget.h):
                                       * 0 = the transport's default (rs_ps_budget_default() on
                                       * brpc and grpc, none on rdma and shm), UINT64_MAX = none */
} rs_ps_client_config;

typedef struct rs_ps_client rs_ps_client;

/* Connect to every shard, check they agree on value_size and learn max_keys_per_request (COMMAND
 * stats). RS_ECONN/RS_ETIMEDOUT
 * naming the unreachable server, RS_ENOTSUP for a transport not built in, RS_ENODEV when the
 * transport's device is missing, RS_EINVAL for bad config or a value_size disagreement. */
int rs_ps_client_open(const rs_ps_client_config *cfg, rs_ps_client **out, rs_error *err);
void rs_ps_client_close(rs_ps_client *c);

uint32_t rs_ps_client_value_size(const rs_ps_client *c);
/* Keys per request the client sends for op (GET, or PUT/UPDATE): the smallest of the shards'
 * max_keys_per_request and what one request/response slot of the transport holds; UINT32_MAX when
 * nothing bounds it. Batches larger than that are split into chunks sent together. */
uint32_t rs_ps_client_chunk_keys(const rs_ps_client *c, rs_ps_op op);
/* Requests the client keeps outstanding per connection (prefetch_depth or more, for chunks). */
uint32_t rs_ps_client_window(const rs_ps_client *c);
/* Row buffers of a one-shard client whose transport has them (rdma/shm with the RC option
 * rows_buffers=N, recstore/rc.h): a GET batch submitted into bufs[i] gets its rows written there
 * by the server, without the client's copy (a batch larger than one request: its first chunk).
 * Fills bufs[0..min(N, max)), *cap (row bytes each) and *n = N. RS_ENOTSUP naming the reason
 * for a client of several shards (their rows are scattered back) or a transport without them,
 * RS_EINVAL when the transport has none set aside. */
int rs_ps_client_rows_buffers(rs_ps_client *c, void **bufs, uint32_t max, size_t *cap, uint32_t *n,
                              rs_error *err);

/* The budget this client keeps to (bytes, RS_PS_BUDGET_NONE: none), the bytes it has in flight now
 * (keys + rows of the chunks sent and not yet collected), and how many times a refill or a submit
 * left a chunk unsent because the client's share was used (recstore/ps_budget.h). */
typedef struct rs_ps_client_budget_stats {
    uint64_t budget, held, deferred;
} rs_ps_client_budget_stats;
void rs_ps_client_budget_stats_get(const rs_ps_client *c, rs_ps_client_budget_stats *out);

/* Adds how the waits of the client's connections ended (rs_ps_wait_stats, recstore/transport.h) to
 * *out; 1 when the transport counts them, else 0 and *out unchanged. */
int rs_ps_client_wait_stats_get(const rs_ps_client *c, rs_ps_wait_stats *out);

/* Start one batch. GET: rows_out receives n * value_size bytes, filled by the time wait() returns
 * this batch (it must stay valid until then). PUT / UPDATE: rows_in holds n rows (UPDATE: float32
 * deltas), read during this call only; keys are read during this call only. RS_EBUSY when
 * prefetch_depth batches are in flight (nothing is sent). Transport failures after part of the
 * batch was sent are reported by wait() for this batch. */
int rs_ps_client_submit(rs_ps_client *c, rs_ps_op op, const uint64_t *keys, size_t n,
                        const void *rows_in, void *rows_out, uint64_t tag, rs_error *err);

typedef struct rs_ps_batch_result {
    uint64_t tag;
    uint64_t num_found; /* GET: keys that existed */
    uint32_t parts;     /* shard responses of the batch */
    uint32_t gathered;  /* ... of which the transport scatter-gathered (RS_PS_RESP_GATHERED) */
} rs_ps_batch_result;

/* Finish the oldest batch. 0, or RS_ESERVER (a shard answered with an error status: the text
 * names the shard, server and reason), RS_ECONN, RS_ETIMEDOUT, RS_EPROTO. res->tag is set even
 * on failure. RS_EINVAL when nothing is in flight. After RS_ECONN, RS_ETIMEDOUT or RS_EPROTO from
 * a shard's connection, every later request to that shard fails at once with the same error (the
 * transport may still hold the request): open a new client to try it again. */
int rs_ps_client_wait(rs_ps_client *c, rs_ps_batch_result *res, rs_error *err);

/* Synchronous conveniences (need no batch in flight). */
int rs_ps_client_get(rs_ps_client *c, const uint64_t *keys, size_t n, void *rows_out,
                     uint64_t *num_found, rs_error *err);
int rs_ps_client_put(rs_ps_client *c, const uint64_t *keys, size_t n, const void *rows,
                     rs_error *err);
int rs_ps_client_update(rs_ps_client *c, const uint64_t *keys, size_t n, const float *deltas,
                        rs_error *err);
/* COMMAND to one shard ("ping", "ready", "stats", "clear"); reply copied into reply (cap bytes). */
int rs_ps_client_command(rs_ps_client *c, uint32_t shard, const char *command, char *reply,
                         size_t cap, rs_error *err);

#ifdef __cplusplus
}
#endif
#endif

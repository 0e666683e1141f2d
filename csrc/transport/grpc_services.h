/*
 * grpc_services.h — the services recbench's gRPC server serves next to recstore.PSService, and
 * the hook grpc_server.c calls them through:
 *
 *   recstoreps.ParameterService   RecStore's own PS service (grpc_recstore.c)
 *   grpc.health.v1.Health         Check and Watch (grpc_health.c)
 *   grpc.reflection.v1 / v1alpha  ServerReflectionInfo (grpc_reflection.c)
 *   recstore.PSService/Stream     PSService's four methods on one bidi stream (grpc_ps_stream.c)
 *
 * grpc_server.c registers every method of rs_grpc_extra_methods next to its own four and keeps
 * requested calls armed for them on every worker. A unary method's handler gets the request
 * message and fills the reply (message or error status); a streaming method's handler takes the
 * call over and drives it with batches tagged by an rs_grpc_stream, whose on_event the worker
 * calls for every completion of such a tag on its completion queue.
 */
#ifndef RS_GRPC_SERVICES_H
#define RS_GRPC_SERVICES_H

#include <pthread.h>

#include "recstore/recstore_wire.h"
#include "transport/grpc_transport.h"

/* A completion-queue tag owned by a streaming call; on_event runs on the worker thread that
 * owns the queue. ok is the event's success flag. */
typedef struct rs_grpc_stream rs_grpc_stream;
struct rs_grpc_stream {
    void (*on_event)(rs_grpc_stream *tag, int ok);
};

typedef struct rs_grpc_watch rs_grpc_watch;

/* One server's state of the extra services. */
typedef struct rs_grpc_services {
    rs_rsps *rsps; /* RecStore ParameterService semantics on the shard */
    /* health: serving flag and the open Watch streams, under lock */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int serving;
    rs_grpc_watch *watchers;
    int ps_stream; /* recstore.PSService/Stream is served (transport option stream, default 1) */
} rs_grpc_services;

/* A worker's counters: written only by that worker (RS_GRPC_CTR_ADD), read by stats() with
 * relaxed atomic loads. */
typedef struct rs_grpc_counters {
    uint64_t requests, bad_frames, bytes_in, bytes_out, auth_failures;
    uint64_t streams; /* PSService/Stream calls open now (the server balances new ones by it) */
} rs_grpc_counters;

#define RS_GRPC_CTR_ADD(field, v) __atomic_store_n(&(field), (field) + (v), __ATOMIC_RELAXED)

/* What a handler may use: the services, the worker's thread slot, queue, reply buffers, shard,
 * counters and its reusable request scratch and response. Everything belongs to the worker, so
 * a handler uses it only on that worker's thread (a stream: in on_event). */
/* Set by each server worker thread to its server's `closing` flag (grpc_server.c), read under the
 * worker's lock: the stream helpers below start no batch once stop() is about to shut the CQs
 * down. */
extern _Thread_local const int *rs_grpc_worker_closing;

typedef struct rs_grpc_call_ctx {
    rs_grpc_services *svc;
    unsigned thread;
    grpc_completion_queue *cq;
    rs_grpc_slice_pool *pool;
    rs_ps_shard *shard;
    rs_grpc_counters *ctr;
    rs_grpc_scratch *scratch;
    rs_ps_response *resp;
} rs_grpc_call_ctx;

typedef struct rs_grpc_unary_reply {
    grpc_byte_buffer *msg; /* the reply message when status is OK (owned by the caller) */
    grpc_status_code status;
    char details[320]; /* status != OK: the reason */
} rs_grpc_unary_reply;

enum {
    RS_GRPC_UNARY = 0,     /* request read up front; unary() answers */
    RS_GRPC_SERVER_STREAM, /* request read up front; stream() takes the call */
    RS_GRPC_BIDI_STREAM,   /* nothing read; stream() takes the call */
};

typedef struct rs_grpc_method_def {
    const char *path;
    int kind;
    void (*unary)(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out);
    /* Takes over the call reference (and payload, which may be NULL). Returns 0, or non-zero
     * when it could not start (the caller then cancels and drops the call). */
    int (*stream)(rs_grpc_call_ctx *c, grpc_call *call, grpc_byte_buffer *payload);
    int no_token; /* served without the deployment token (health: probes cannot send one) */
} rs_grpc_method_def;

extern const rs_grpc_method_def rs_grpc_extra_methods[];
extern const size_t rs_grpc_num_extra_methods;
#define RS_GRPC_MAX_EXTRA_METHODS 16

/* Services listed by reflection and answered by health. */
extern const char *const rs_grpc_served_services[];
extern const size_t rs_grpc_num_served_services;

int rs_grpc_services_create(rs_ps_shard *shard, const rs_grpc_options *o, rs_grpc_services **out,
                            rs_error *err);
/* The server is stopping: health turns NOT_SERVING, every Watch stream is told, and this waits
 * (up to RS_GRPC_NOT_SERVING_WAIT_MS) until those messages left. Call before the gRPC shutdown. */
#define RS_GRPC_NOT_SERVING_WAIT_MS 1000
void rs_grpc_services_stopping(rs_grpc_services *s);
void rs_grpc_services_destroy(rs_grpc_services *s);

/* One PSService request: decode payload as a PSRequest for op (RS_PS_OP_FROM_MESSAGE: the op
 * the message names), run it on the shard and encode the PSResponse, GET rows lent from the
 * pool. Bad requests get a PSResponse with RS_PS_INVALID_PAYLOAD naming the problem. Counts
 * requests, bytes and bad frames. NULL only when out of memory. (grpc_server.c) */
grpc_byte_buffer *rs_grpc_ps_reply(const rs_grpc_call_ctx *c, rs_ps_op op,
                                   grpc_byte_buffer *payload);

/* One batch of a server-side stream on call, tagged tag (a rs_grpc_stream of the handler's):
 * RECV_MESSAGE into *in (with_metadata: SEND_INITIAL_METADATA first), SEND_MESSAGE of msg (the
 * caller keeps msg until the batch completes), SEND_STATUS_FROM_SERVER OK, or RECV_CLOSE_ON_SERVER
 * (completes when the call is over). 0, or -1 when gRPC refused the batch (the call is broken). */
int rs_grpc_stream_recv(grpc_call *call, int with_metadata, grpc_byte_buffer **in, void *tag);
int rs_grpc_stream_send(grpc_call *call, grpc_byte_buffer *msg, void *tag);
int rs_grpc_stream_status_ok(grpc_call *call, void *tag);
int rs_grpc_stream_on_close(grpc_call *call, int *cancelled, void *tag);

/* Helpers shared by the handlers. */
void rs_grpc_reply_error(rs_grpc_unary_reply *out, grpc_status_code st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A reply message from one buffer (copied). */
grpc_byte_buffer *rs_grpc_message_copy(const void *data, size_t len);

/* Handlers (grpc_recstore.c, grpc_health.c, grpc_reflection.c). */
void rs_grpc_rs_get(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out);
void rs_grpc_rs_put(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out);
void rs_grpc_rs_update(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out);
void rs_grpc_rs_init_table(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out);
void rs_grpc_rs_command(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out);
void rs_grpc_health_check(rs_grpc_call_ctx *c, const rs_grpc_span *req, rs_grpc_unary_reply *out);
int rs_grpc_health_watch(rs_grpc_call_ctx *c, grpc_call *call, grpc_byte_buffer *payload);
int rs_grpc_reflection_info(rs_grpc_call_ctx *c, grpc_call *call, grpc_byte_buffer *payload);
int rs_grpc_ps_stream(rs_grpc_call_ctx *c, grpc_call *call, grpc_byte_buffer *payload);

#endif
